//! A tenant's network ACL keys (`/api/v2/keys/network-acls`). The store keeps the record and
//! the key material **sealed** by the caller (`netacl-secrets`): it never sees the material in
//! clear, so a copy of the database alone hands out no key.
use async_trait::async_trait;
use netacl_model::{NetworkAclKey, NetworkAclKeyId};

use crate::{StoreError, TenantId, WriteOrigin};

/// One stored key: its public record and its sealed material.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredNetworkAclKey {
    /// What the API answers.
    pub record: NetworkAclKey,
    /// The material as sealed by the caller (`sealed-v1:...`); opaque to the store.
    pub sealed_material: String,
}

/// A tenant's network ACL keys. Writes bump the tenant's rule-set version (a key changes which
/// requests a rule naming it matches), are conditioned on it, and return the new version.
#[async_trait]
pub trait NetworkAclKeyStore: Send + Sync {
    /// Every key of the tenant, newest first (ties by id).
    async fn network_acl_keys(
        &self,
        tenant: &TenantId,
    ) -> Result<Vec<StoredNetworkAclKey>, StoreError>;

    /// Adds a key; [`StoreError::NameTaken`] when the tenant has a key of that name.
    async fn create_network_acl_key(
        &self,
        tenant: &TenantId,
        expected_version: u64,
        key: &StoredNetworkAclKey,
        origin: &WriteOrigin,
    ) -> Result<u64, StoreError>;

    /// Removes a key; [`StoreError::NotFound`] when there is none with this id.
    async fn delete_network_acl_key(
        &self,
        tenant: &TenantId,
        expected_version: u64,
        id: &NetworkAclKeyId,
        origin: &WriteOrigin,
    ) -> Result<u64, StoreError>;
}

/// A stored row back into a key, re-validated.
pub(crate) fn key_from_row(
    tenant: &TenantId,
    (id, name, fingerprint, sealed, created_at, updated_at): (
        String,
        String,
        String,
        String,
        i64,
        i64,
    ),
) -> Result<StoredNetworkAclKey, StoreError> {
    let corrupt = |reason: &str| StoreError::Corrupt {
        tenant: tenant.to_string(),
        id: format!("network ACL key {id}"),
        reason: reason.to_owned(),
    };
    let parsed = NetworkAclKeyId::parse(&id).ok_or_else(|| corrupt("malformed id"))?;
    let fingerprint_ok = fingerprint.len() == 64
        && fingerprint
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    if !fingerprint_ok {
        return Err(corrupt("malformed fingerprint"));
    }
    Ok(StoredNetworkAclKey {
        record: NetworkAclKey {
            id: parsed,
            name,
            fingerprint,
            created_at: netacl_model::Timestamp::from_unix_millis(created_at),
            updated_at: netacl_model::Timestamp::from_unix_millis(updated_at),
        },
        sealed_material: sealed,
    })
}
