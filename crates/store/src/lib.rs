#![doc = include_str!("../README.md")]
#![deny(missing_docs)]

mod acl_keys;
mod branding;
mod credentials;
mod directory;
mod error;
mod history;
mod logs;
mod managed;
mod organizations;
mod postgres;
mod sqlite;
mod tenant;

use async_trait::async_trait;
use netacl_model::{AclId, NetworkAcl, RuleSet};

pub use acl_keys::{NetworkAclKeyStore, StoredNetworkAclKey};
pub use branding::BrandingStore;
pub use credentials::{StoredClient, StoredSigningKey};
pub use directory::{DirectoryStore, ImportReport, Page};
pub use error::StoreError;
pub use history::{
    ChangeOp, HistoryRetention, RecordChange, RecordKind, VersionEntry, WriteOrigin,
    DEFAULT_HISTORY_BYTES,
};
pub use logs::{
    AclSummaryCounts, CountWindow, LogFilter, LogOrder, LogPage, LogRetention, LogStore,
    NewLogEvent, RuleBucketCounts, StoredLogEvent,
};
pub use managed::{ManagedListStore, StoredManagedList, TenantPolicy};
pub use organizations::{
    OrganizationConnectionEntry, OrganizationConnectionPage, OrganizationCursor, OrganizationPage,
    OrganizationStore,
};
pub use postgres::{ChangeListener, ChangeNotice, PostgresStore, CHANGES_CHANNEL};
pub use sqlite::{prepare_data_dir, SqliteStore};
pub use tenant::{Tenant, TenantCredentials, TenantId, TenantRecord};

/// Tenants: the owner of every other record.
#[async_trait]
pub trait TenantStore: Send + Sync {
    /// The tenant, created (at ACL version 0) if it does not exist; its domain is updated to
    /// `domain`.
    async fn ensure_tenant(&self, tenant: &TenantId, domain: &str) -> Result<Tenant, StoreError>;

    /// The tenant, if it exists.
    async fn tenant(&self, tenant: &TenantId) -> Result<Option<Tenant>, StoreError>;

    /// Creates a tenant served on `domains` (canonical host names, at least one; the first one
    /// is its issuer's) with its first signing key and its bootstrap client. One transaction: [`StoreError::TenantExists`] when the id is taken,
    /// [`StoreError::DomainTaken`] when a domain belongs to another tenant (a unique constraint
    /// of the database, so of two writers racing for a domain exactly one wins); nothing is
    /// written then. Bumps the tenants generation.
    async fn create_tenant(
        &self,
        tenant: &TenantId,
        domains: &[String],
        credentials: &TenantCredentials,
        created_at_ms: i64,
    ) -> Result<TenantRecord, StoreError>;

    /// The tenant with its domains, if it exists.
    async fn tenant_record(&self, tenant: &TenantId) -> Result<Option<TenantRecord>, StoreError>;

    /// Up to `limit` tenants with ids after `after` (byte order), with their domains.
    async fn list_tenants(
        &self,
        after: Option<&TenantId>,
        limit: u32,
    ) -> Result<Vec<TenantRecord>, StoreError>;

    /// Deletes the tenant and everything it owns (every table keyed by tenant, its domains), in
    /// one transaction; [`StoreError::NotFound`] when it does not exist. Bumps the tenants
    /// generation (and the networked backend announces it: [`ChangeNotice::TenantsChanged`]).
    async fn delete_tenant(&self, tenant: &TenantId) -> Result<(), StoreError>;

    /// A counter bumped by every tenant created or deleted: one cheap read tells a node (or a
    /// follower) whether the set of tenants changed since it last looked.
    async fn tenants_generation(&self) -> Result<u64, StoreError>;
}

/// One page of a tenant's network ACLs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AclPage {
    /// The records, ascending by priority then id.
    pub acls: Vec<NetworkAcl>,
    /// How many records the tenant holds in all.
    pub total: u64,
    /// The tenant's rule-set version the page was read at.
    pub version: u64,
}

/// A tenant's network ACLs. Writes are conditioned on the tenant's rule-set version
/// (`expected_version`) and return the new version (always `expected_version + 1`).
#[async_trait]
pub trait NetworkAclStore: Send + Sync {
    /// The tenant's whole rule set at its current version, every record re-validated.
    async fn network_acl_rule_set(&self, tenant: &TenantId) -> Result<RuleSet, StoreError>;

    /// One page (`offset`, `limit`) ordered by priority then id, with the total count.
    async fn list_network_acls(
        &self,
        tenant: &TenantId,
        offset: u64,
        limit: u64,
    ) -> Result<AclPage, StoreError>;

    /// One record; [`StoreError::NotFound`] when it does not exist.
    async fn get_network_acl(
        &self,
        tenant: &TenantId,
        id: &AclId,
    ) -> Result<NetworkAcl, StoreError>;

    /// Inserts a new record. [`StoreError::PriorityTaken`] when another record holds its
    /// priority, [`StoreError::DuplicateId`] when its id exists.
    async fn create_network_acl(
        &self,
        tenant: &TenantId,
        expected_version: u64,
        acl: &NetworkAcl,
        origin: &WriteOrigin,
    ) -> Result<u64, StoreError>;

    /// Replaces the record with `acl.id` (which must exist) by `acl`.
    async fn replace_network_acl(
        &self,
        tenant: &TenantId,
        expected_version: u64,
        acl: &NetworkAcl,
        origin: &WriteOrigin,
    ) -> Result<u64, StoreError>;

    /// Deletes the record; [`StoreError::NotFound`] when it does not exist.
    async fn delete_network_acl(
        &self,
        tenant: &TenantId,
        expected_version: u64,
        id: &AclId,
        origin: &WriteOrigin,
    ) -> Result<u64, StoreError>;
}

/// A tenant's rule-set history: every write of [`NetworkAclStore`], [`ManagedListStore`] and
/// [`NetworkAclKeyStore`] records its version's [`VersionEntry`] in its own transaction, with the
/// [`WriteOrigin`] it is given (network ACLs before and after; keys and lists by id and metadata,
/// never their material or items). The history is content-addressed: a network ACL's `rule` is
/// stored once per tenant however many versions hold it, and each version keeps a small
/// manifest of the records in force after it, so a version costs what it changed and any kept
/// version is rebuilt from its own manifest. The oldest entries are removed by later writes as
/// the store's [`HistoryRetention`] says (count, age, bytes), contiguously.
#[async_trait]
pub trait HistoryStore: Send + Sync {
    /// Up to `limit` entries with versions at most `from` (the newest when `None`), newest
    /// first. Their network ACL changes leave the records out (`before` and `after` are
    /// `None`: [`HistoryStore::version_entry`] gives them); key and list changes keep their
    /// metadata.
    async fn versions(
        &self,
        tenant: &TenantId,
        from: Option<u64>,
        limit: u32,
    ) -> Result<Vec<VersionEntry>, StoreError>;

    /// The entry of `version`, if it is kept.
    async fn version_entry(
        &self,
        tenant: &TenantId,
        version: u64,
    ) -> Result<Option<VersionEntry>, StoreError>;

    /// The network ACLs as they were right after `version` was committed, rebuilt from the
    /// version's manifest and the rules it names, in one snapshot; `None` when the history does not
    /// reach back to it (never recorded, removed by retention, or newer than the current
    /// version). The current version is always available; version 0 (no records) while the
    /// entry of version 1 is kept.
    async fn network_acls_at(
        &self,
        tenant: &TenantId,
        version: u64,
    ) -> Result<Option<RuleSet>, StoreError>;

    /// Makes the tenant's network ACLs exactly `acls` in one transaction conditioned on
    /// `expected_version`: records that differ are replaced, missing ones inserted, extra ones
    /// deleted; one version records every change. Returns the new version.
    async fn restore_network_acls(
        &self,
        tenant: &TenantId,
        expected_version: u64,
        acls: &[NetworkAcl],
        origin: &WriteOrigin,
    ) -> Result<u64, StoreError>;

    /// The bytes the tenant's history holds, as [`HistoryRetention::bytes`] counts them: the
    /// text of each kept version's changes, client id and request id, and of each content
    /// (rule or manifest) a kept version refers to.
    async fn history_bytes(&self, tenant: &TenantId) -> Result<u64, StoreError>;
}

/// A tenant's token signing keys and API clients.
#[async_trait]
pub trait CredentialStore: Send + Sync {
    /// The tenant's signing keys, oldest first.
    async fn signing_keys(&self, tenant: &TenantId) -> Result<Vec<StoredSigningKey>, StoreError>;

    /// Adds a signing key.
    async fn add_signing_key(
        &self,
        tenant: &TenantId,
        key: &StoredSigningKey,
    ) -> Result<(), StoreError>;

    /// The tenant's current signing key, storing `candidate` first if the tenant has none. Nodes
    /// sharing a database that start together all get the same key (the networked backend
    /// decides under a lock); the default suits a single-process store.
    async fn ensure_signing_key(
        &self,
        tenant: &TenantId,
        candidate: &StoredSigningKey,
    ) -> Result<StoredSigningKey, StoreError> {
        let keys = self.signing_keys(tenant).await?;
        if let Some(key) = current_key(&keys) {
            return Ok(key.clone());
        }
        self.add_signing_key(tenant, candidate).await?;
        Ok(candidate.clone())
    }

    /// Makes `next` the tenant's current signing key, if the current one is still
    /// `expected_current` (else [`StoreError::KeyConflict`]; nothing written): the current key
    /// gets `current_until = at_ms`; `next` is inserted with `current_since = at_ms`, or, when a
    /// key with its kid exists and is not revoked, that key becomes current again (a revoked
    /// one is refused with [`StoreError::KeyConflict`]). Nodes sharing the database hear of it
    /// ([`ChangeNotice::KeysChanged`]).
    async fn rotate_signing_key(
        &self,
        tenant: &TenantId,
        expected_current: &str,
        next: &StoredSigningKey,
        at_ms: i64,
    ) -> Result<(), StoreError>;

    /// Revokes a key that is not the current one (`revoked_at = at_ms`; a key already revoked
    /// keeps its time) and returns it. [`StoreError::NotFound`] for an unknown kid,
    /// [`StoreError::KeyConflict`] for the current key. Nodes sharing the database hear of it.
    async fn revoke_signing_key(
        &self,
        tenant: &TenantId,
        kid: &str,
        at_ms: i64,
    ) -> Result<StoredSigningKey, StoreError>;

    /// Replaces a key's stored private key and certificate if its private key is still
    /// `expected_private_key` (the sealing of plaintext keys from before schema 5 at first
    /// start; nodes starting together seal each key once). Returns whether it was replaced.
    /// Freed database pages are overwritten (SQLite `secure_delete`), so the old text does not
    /// linger in the file.
    async fn seal_signing_key(
        &self,
        tenant: &TenantId,
        kid: &str,
        expected_private_key: &str,
        private_key: &str,
        cert_pem: &str,
    ) -> Result<bool, StoreError>;

    /// The tenant's clients, ordered by id.
    async fn clients(&self, tenant: &TenantId) -> Result<Vec<StoredClient>, StoreError>;

    /// Creates the client, or replaces the one with the same id.
    async fn put_client(&self, tenant: &TenantId, client: &StoredClient) -> Result<(), StoreError>;
}

/// The current key among a tenant's stored signing keys (see [`StoredSigningKey`]).
pub fn current_key(keys: &[StoredSigningKey]) -> Option<&StoredSigningKey> {
    keys.iter()
        .filter(|k| k.is_current())
        .max_by(|a, b| (a.current_since_ms, &a.kid).cmp(&(b.current_since_ms, &b.kid)))
}

/// Everything the admin service stores. Implemented by every type that implements the
/// per-resource traits; used as `Arc<dyn Store>`.
pub trait Store:
    TenantStore
    + NetworkAclStore
    + HistoryStore
    + ManagedListStore
    + NetworkAclKeyStore
    + CredentialStore
    + OrganizationStore
    + DirectoryStore
    + BrandingStore
    + LogStore
{
}

impl<T> Store for T where
    T: TenantStore
        + NetworkAclStore
        + HistoryStore
        + ManagedListStore
        + NetworkAclKeyStore
        + CredentialStore
        + OrganizationStore
        + DirectoryStore
        + BrandingStore
        + LogStore
{
}
