#![doc = include_str!("../README.md")]
#![deny(missing_docs)]
use std::sync::{Arc, PoisonError, RwLock};

use netacl_model::{
    AclId, KeyMaterial, Limits, ManagedList, ManagedListName, ManagedLists, NetworkAcl,
    NetworkAclKey, NetworkAclKeyId, RuleSet, ValidationError,
};
use netacl_secrets::{Kek, SecretContext};
use netacl_store::{
    ChangeOp, RecordChange, RecordKind, Store, StoreError, StoredManagedList, StoredNetworkAclKey,
    TenantId, TenantPolicy, WriteOrigin,
};
use tokio::sync::{watch, Mutex};

pub use error::WriteError;
use keys::KEY_PURPOSE;
pub use keys::{KeysState, LiveKey, KEY_TRANSIT_PURPOSE};
use policy::{Policy, PolicyEngine};
pub use snapshot::{AclSnapshot, ListEntry, ListSource, ListsState, StoredAcl};

pub mod error;
pub mod keys;
pub mod policy;
pub mod rollback;
pub mod samples;
pub mod snapshot;

/// The stored lists of a store read, reusing the content this node already holds for lists
/// whose version did not change.
fn stored_entries(
    rows: Vec<StoredManagedList>,
    current: Option<&ListsState>,
) -> Result<[Option<ListEntry>; 5], LoadError> {
    let mut stored: [Option<ListEntry>; 5] = Default::default();
    for row in rows {
        let list = match row.list {
            Some(list) => list,
            None => current
                .and_then(|c| c.stored[row.name.index()].as_ref())
                .filter(|e| e.version == row.version)
                .map(|e| Arc::clone(&e.list))
                .ok_or_else(|| {
                    LoadError::Store(StoreError::Unavailable(format!(
                        "managed list {} not read",
                        row.name
                    )))
                })?,
        };
        stored[row.name.index()] = Some(ListEntry {
            list,
            source: ListSource::Api,
            version: row.version,
            updated_at_ms: row.updated_at_ms,
        });
    }
    Ok(stored)
}

/// Opens the stored keys with the key-encryption key; a key that does not open (another KEK,
/// a value moved between records) stops the load: serving without it would turn every signed
/// request into an unsigned one.
fn open_keys(
    kek: &Kek,
    tenant: &TenantId,
    stored: Vec<StoredNetworkAclKey>,
) -> Result<KeysState, LoadError> {
    let mut keys = Vec::with_capacity(stored.len());
    for key in stored {
        let id = key.record.id.as_str().to_owned();
        let context = SecretContext::new(tenant.as_str(), KEY_PURPOSE, &id);
        let opened = kek
            .open(&context, &key.sealed_material)
            .map_err(|err| LoadError::Secrets(format!("network ACL key {id}: {err}")))?;
        let material = KeyMaterial::from_bytes(opened.expose().to_vec()).ok_or_else(|| {
            LoadError::Secrets(format!("network ACL key {id}: material of a wrong length"))
        })?;
        keys.push(Arc::new(LiveKey {
            record: key.record,
            material,
        }));
    }
    Ok(KeysState::new(keys))
}

/// 400 when `acl` names a key the tenant does not have, at the reference's property path.
fn check_key_references(acl: &NetworkAcl, keys: &KeysState) -> Result<(), WriteError> {
    let rule = &acl.spec.rule;
    for (member, criteria) in [
        ("match", rule.match_criteria()),
        ("not_match", rule.not_match()),
    ] {
        let Some(ids) = criteria.and_then(|c| c.http_message_signature()) else {
            continue;
        };
        for (i, id) in ids.iter().enumerate() {
            if keys.get(id).is_none() {
                return Err(ValidationError::new(
                    format!("rule.{member}.http_message_signature.keys[{i}].id"),
                    format!("No network ACL key with id {id}"),
                )
                .into());
            }
        }
    }
    Ok(())
}

/// The ids of the records naming the key `id`.
fn rules_naming_key(records: &[Arc<StoredAcl>], id: &NetworkAclKeyId) -> Vec<String> {
    records
        .iter()
        .filter(|stored| {
            stored.acl.spec.rule.criteria().any(|c| {
                c.http_message_signature()
                    .is_some_and(|ids| ids.contains(id))
            })
        })
        .map(|stored| stored.acl.id.to_string())
        .collect()
}

/// A change to a tenant's network ACLs or managed lists.
pub enum Change {
    /// Insert a new record.
    Create(Box<NetworkAcl>),
    /// Replace the record `id` by what `build` makes of the current one.
    Replace {
        /// The record replaced.
        id: AclId,
        /// The new record, made from the current one.
        build: Box<dyn FnOnce(&NetworkAcl) -> NetworkAcl + Send>,
    },
    /// Delete the record `id`.
    Delete(AclId),
    /// Store the content of a managed list (through the API).
    PutList(ManagedListName, Arc<ManagedList>),
    /// Remove the stored content of a managed list.
    DeleteList(ManagedListName),
    /// A list file of this node was (re)loaded: the content is in force from now on.
    FileList(ManagedListName, Arc<ManagedList>),
    /// Add a network ACL key (its record and material; the material is sealed here).
    CreateKey(Box<(NetworkAclKey, KeyMaterial)>),
    /// Remove a network ACL key (409 while a rule names it).
    DeleteKey(NetworkAclKeyId),
    /// Restore the network ACLs of a kept version, if the tenant is still at
    /// `expected_version` (409 otherwise; see `history`).
    Rollback {
        /// The kept version whose network ACLs come back.
        version: u64,
        /// The version the caller saw in force.
        expected_version: u64,
    },
}

/// What a change produced: the stored record (none for a delete or a list change), the
/// tenant's version afterwards and the snapshot it serves from then on.
pub struct Applied {
    /// The record created or replaced.
    pub record: Option<Arc<StoredAcl>>,
    /// The tenant's version after the change.
    pub version: u64,
    /// The snapshot served from then on.
    pub snapshot: Arc<AclSnapshot>,
}

/// A tenant's live state.
pub struct TenantRuntime {
    /// The tenant.
    pub id: TenantId,
    store: Arc<dyn Store>,
    limits: Limits,
    snapshot: RwLock<Arc<AclSnapshot>>,
    engine: PolicyEngine,
    write_lock: Mutex<()>,
    /// The rule set last installed in the engine, sent right after each install.
    installed: watch::Sender<Arc<RuleSet>>,
    /// Seals and opens network ACL key material.
    kek: Arc<Kek>,
    /// The traffic samples remote edges posted (in memory; see `logs::sample`).
    posted_samples: samples::PostedSamples,
}

impl TenantRuntime {
    /// Loads the tenant's rule set from the store and compiles it into a fresh engine, so the
    /// first request already sees the committed rules.
    pub async fn load(
        store: Arc<dyn Store>,
        id: TenantId,
        limits: Limits,
        file_lists: &ManagedLists,
        kek: Arc<Kek>,
    ) -> Result<Arc<Self>, LoadError> {
        let TenantPolicy {
            rules,
            managed_lists,
        } = store.tenant_policy(&id, &[]).await?;
        let keys = Arc::new(open_keys(&kek, &id, store.network_acl_keys(&id).await?)?);
        let version = rules.version;
        let stored = stored_entries(managed_lists, None)?;
        let mut files: [Option<ListEntry>; 5] = Default::default();
        let now = netacl_model::Timestamp::now().unix_millis();
        for (name, list) in file_lists.iter() {
            files[name.index()] = Some(ListEntry {
                list: Arc::clone(list),
                source: ListSource::File,
                version,
                updated_at_ms: now,
            });
        }
        let compile_keys = Arc::clone(&keys);
        let (policy, rules, lists) = tokio::task::spawn_blocking(move || {
            let lists = ListsState::build(stored, files);
            let policy = Policy::compile_with_keys(&rules, &limits, &lists.index, &compile_keys);
            (policy, rules, lists)
        })
        .await
        .map_err(|err| LoadError::Compile(err.to_string()))?;
        let policy = policy.map_err(|err| LoadError::Compile(err.to_string()))?;
        policy.warn_about_empty_lists(None);
        let engine = PolicyEngine::new();
        engine.install(Arc::new(policy));
        let ordered = rules.acls.iter().cloned().map(StoredAcl::new).collect();
        let (installed, _) = watch::channel(Arc::new(rules));
        Ok(Arc::new(Self {
            id,
            store,
            limits,
            snapshot: RwLock::new(Arc::new(AclSnapshot::new(
                version,
                ordered,
                Arc::new(lists),
                keys,
            ))),
            engine,
            write_lock: Mutex::new(()),
            installed,
            kek,
            posted_samples: Default::default(),
        }))
    }

    /// The key-encryption key (sealing, and the tags of the tenant's paging cursors).
    pub fn kek(&self) -> &Kek {
        &self.kek
    }

    /// The traffic samples remote edges posted for this tenant.
    pub fn posted_samples(&self) -> &samples::PostedSamples {
        &self.posted_samples
    }

    /// The store (for the tenant's other resources, which are read and written directly).
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    /// The committed records (what readers see).
    pub fn snapshot(&self) -> Arc<AclSnapshot> {
        Arc::clone(&self.snapshot.read().unwrap_or_else(PoisonError::into_inner))
    }

    /// The live compiled policy.
    pub fn policy(&self) -> Arc<Policy> {
        self.engine.policy()
    }

    /// The engine the write path and the store follower install into.
    pub fn engine(&self) -> &Arc<netacl_eval::Engine> {
        self.engine.engine()
    }

    /// A receiver of the rule set installed in the engine (its version is the committed one),
    /// updated right after each install: for long polls and an in-process edge.
    pub fn subscribe(&self) -> watch::Receiver<Arc<RuleSet>> {
        self.installed.subscribe()
    }

    /// Catches up with the store when another node (sharing the database) committed a newer
    /// rule set: compares the committed version with the served one and, if they differ, loads,
    /// compiles, installs and publishes the stored rule set. Serialised with the write path.
    /// Returns the version served afterwards. On any error the served state is left as it was.
    pub async fn refresh_from_store(&self) -> Result<u64, LoadError> {
        let _guard = self.write_lock.lock().await;
        self.refresh_locked().await
    }

    /// [`TenantRuntime::refresh_from_store`] with the write lock held.
    async fn refresh_locked(&self) -> Result<u64, LoadError> {
        let current = self.snapshot();
        let served = current.version;
        let committed = match self.store.tenant(&self.id).await? {
            Some(tenant) => tenant.acl_version,
            None => {
                return Err(
                    netacl_store::StoreError::NotFound(format!("tenant {}", self.id)).into(),
                )
            }
        };
        if committed == served {
            return Ok(served);
        }
        let known = current.lists.stored_versions();
        let TenantPolicy {
            rules,
            managed_lists,
        } = self.store.tenant_policy(&self.id, &known).await?;
        let keys = Arc::new(open_keys(
            &self.kek,
            &self.id,
            self.store.network_acl_keys(&self.id).await?,
        )?);
        let version = rules.version;
        let stored = stored_entries(managed_lists, Some(&current.lists))?;
        let files = current.lists.files.clone();
        let limits = self.limits;
        let previous = Arc::clone(&current.lists);
        let compile_keys = Arc::clone(&keys);
        let (policy, rules, lists) = tokio::task::spawn_blocking(move || {
            let lists = previous.rebuilt(stored, files);
            let policy = Policy::compile_with_keys(&rules, &limits, &lists.index, &compile_keys);
            (policy, rules, lists)
        })
        .await
        .map_err(|err| LoadError::Compile(err.to_string()))?;
        let policy = policy.map_err(|err| LoadError::Compile(err.to_string()))?;
        policy.warn_about_empty_lists(Some(&self.policy()));
        self.engine.install(Arc::new(policy));
        let ordered = rules.acls.iter().cloned().map(StoredAcl::new).collect();
        *self
            .snapshot
            .write()
            .unwrap_or_else(PoisonError::into_inner) =
            Arc::new(AclSnapshot::new(version, ordered, Arc::new(lists), keys));
        self.installed.send_replace(Arc::new(rules));
        Ok(version)
    }

    /// [`TenantRuntime::apply_as`] for a change this node makes itself (no client, no request).
    pub async fn apply(self: &Arc<Self>, change: Change) -> Result<Applied, WriteError> {
        self.apply_as(change, WriteOrigin::default()).await
    }

    /// Applies a change through the whole write path (see the module docs), recording `origin`
    /// in the version's history entry. Runs to completion even if the caller goes away.
    pub async fn apply_as(
        self: &Arc<Self>,
        change: Change,
        origin: WriteOrigin,
    ) -> Result<Applied, WriteError> {
        let this = Arc::clone(self);
        tokio::spawn(async move { this.apply_inner(change, origin).await })
            .await
            .map_err(|err| {
                tracing::error!(error = %err, "write task failed");
                WriteError::Internal
            })?
    }

    async fn apply_inner(
        &self,
        change: Change,
        origin: WriteOrigin,
    ) -> Result<Applied, WriteError> {
        let _guard = self.write_lock.lock().await;
        let current = self.snapshot();
        let mut records: Vec<Arc<StoredAcl>> = current.ordered.clone();
        let mut stored = current.lists.stored.clone();
        let mut files = current.lists.files.clone();
        let mut keys: Vec<Arc<LiveKey>> = current.keys.newest_first().cloned().collect();
        let next_version = current.version + 1;
        let now = netacl_model::Timestamp::now().unix_millis();
        let list_entry = |list: &Arc<ManagedList>, source| ListEntry {
            list: Arc::clone(list),
            source,
            version: next_version,
            updated_at_ms: now,
        };
        let (record, write) = match change {
            Change::Create(acl) => {
                check_key_references(&acl, &current.keys)?;
                check_priority_free(&current, &acl)?;
                let stored = StoredAcl::new(*acl);
                records.push(Arc::clone(&stored));
                (Some(stored), Write::Create)
            }
            Change::Replace { id, build } => {
                let old = current.get(&id).ok_or(WriteError::NoSuchNetworkAcl)?;
                let acl = build(&old.acl);
                check_key_references(&acl, &current.keys)?;
                check_priority_free(&current, &acl)?;
                let stored = StoredAcl::new(acl);
                records.retain(|r| r.acl.id != id);
                records.push(Arc::clone(&stored));
                (Some(stored), Write::Replace)
            }
            Change::Delete(id) => {
                if current.get(&id).is_none() {
                    return Err(WriteError::NoSuchNetworkAcl);
                }
                records.retain(|r| r.acl.id != id);
                (None, Write::Delete(id))
            }
            Change::PutList(name, list) => {
                if current.lists.is_from_file(name) {
                    return Err(WriteError::ListFromFile(name));
                }
                stored[name.index()] = Some(list_entry(&list, ListSource::Api));
                (None, Write::PutList(name, list))
            }
            Change::DeleteList(name) => {
                if current.lists.is_from_file(name) {
                    return Err(WriteError::ListFromFile(name));
                }
                if stored[name.index()].take().is_none() {
                    return Err(WriteError::NoSuchManagedList(name));
                }
                (None, Write::DeleteList(name))
            }
            Change::FileList(name, list) => {
                let reload = RecordChange {
                    kind: RecordKind::ManagedList,
                    op: ChangeOp::Reload,
                    id: name.to_string(),
                    before: None,
                    after: Some(serde_json::json!({
                        "name": name.as_str(), "source": ListSource::File.as_str(),
                        "entries": list.len(), "digest": list.digest(),
                    })),
                };
                files[name.index()] = Some(list_entry(&list, ListSource::File));
                (None, Write::Bump(Box::new(reload)))
            }
            Change::CreateKey(key) => {
                let (record, material) = *key;
                if keys.iter().any(|k| k.record.name == record.name) {
                    return Err(WriteError::KeyNameTaken);
                }
                let context = SecretContext::new(self.id.as_str(), KEY_PURPOSE, record.id.as_str());
                let sealed = self.kek.seal(&context, material.expose()).map_err(|err| {
                    tracing::error!(error = %err, "cannot seal a network ACL key");
                    WriteError::Internal
                })?;
                let stored = StoredNetworkAclKey {
                    record: record.clone(),
                    sealed_material: sealed.as_str().to_owned(),
                };
                keys.push(Arc::new(LiveKey { record, material }));
                (None, Write::CreateKey(Box::new(stored)))
            }
            Change::DeleteKey(id) => {
                if current.keys.get(&id).is_none() {
                    return Err(WriteError::NoSuchKey);
                }
                let naming = rules_naming_key(&current.ordered, &id);
                if !naming.is_empty() {
                    return Err(WriteError::KeyInUse(naming));
                }
                keys.retain(|k| k.record.id != id);
                (None, Write::DeleteKey(id))
            }
            Change::Rollback {
                version,
                expected_version,
            } => {
                if expected_version != current.version {
                    return Err(WriteError::StaleVersion {
                        expected: expected_version,
                        actual: current.version,
                    });
                }
                let then = self
                    .store
                    .network_acls_at(&self.id, version)
                    .await?
                    .ok_or(WriteError::NoSuchVersion)?;
                let restored = rollback::restored_records(&current, then.acls, version, |acl| {
                    check_key_references(acl, &current.keys)
                })?;
                let Some(restored) = restored else {
                    // The rule set of `version` is the one in force: nothing to record.
                    return Ok(Applied {
                        record: None,
                        version: current.version,
                        snapshot: current,
                    });
                };
                records = restored;
                (None, Write::Restore)
            }
        };
        let limits = self.limits;
        let previous = Arc::clone(&current.lists);
        let rules = RuleSet {
            version: next_version,
            acls: records.iter().map(|s| s.acl.clone()).collect(),
        };
        let keys = Arc::new(KeysState::new(keys));
        let compile_keys = Arc::clone(&keys);
        let (policy, rules, lists) = tokio::task::spawn_blocking(move || {
            let lists = previous.rebuilt(stored, files);
            let policy = Policy::compile_with_keys(&rules, &limits, &lists.index, &compile_keys);
            (policy, rules, lists)
        })
        .await
        .map_err(|err| {
            tracing::error!(error = %err, "compile task failed");
            WriteError::Internal
        })?;
        let next = Arc::new(AclSnapshot::new(
            next_version,
            records,
            Arc::new(lists),
            keys,
        ));
        let policy = policy.map_err(WriteError::Uncompilable)?;

        let expected = current.version;
        let version = match (&write, &record) {
            (Write::Create, Some(stored)) => {
                self.store
                    .create_network_acl(&self.id, expected, &stored.acl, &origin)
                    .await?
            }
            (Write::Replace, Some(stored)) => {
                self.store
                    .replace_network_acl(&self.id, expected, &stored.acl, &origin)
                    .await?
            }
            (Write::Delete(id), _) => {
                self.store
                    .delete_network_acl(&self.id, expected, id, &origin)
                    .await?
            }
            (Write::PutList(name, list), _) => {
                self.store
                    .put_managed_list(&self.id, expected, *name, list, now, &origin)
                    .await?
            }
            (Write::DeleteList(name), _) => {
                self.store
                    .delete_managed_list(&self.id, expected, *name, &origin)
                    .await?
            }
            (Write::Bump(change), _) => {
                self.store
                    .bump_version(&self.id, expected, &origin, change)
                    .await?
            }
            (Write::Restore, _) => {
                self.store
                    .restore_network_acls(&self.id, expected, &rules.acls, &origin)
                    .await?
            }
            (Write::CreateKey(stored), _) => self
                .store
                .create_network_acl_key(&self.id, expected, stored, &origin)
                .await
                .map_err(|err| match err {
                    StoreError::NameTaken(_) => WriteError::KeyNameTaken,
                    other => WriteError::Store(other),
                })?,
            (Write::DeleteKey(id), _) => self
                .store
                .delete_network_acl_key(&self.id, expected, id, &origin)
                .await
                .map_err(|err| match err {
                    StoreError::NotFound(_) => WriteError::NoSuchKey,
                    other => WriteError::Store(other),
                })?,
            _ => return Err(WriteError::Internal),
        };
        if version != next.version {
            // The store was changed behind our back (another process on the same database).
            tracing::error!(version, expected = next.version, "rule-set version skew");
            return Err(WriteError::Internal);
        }
        policy.warn_about_empty_lists(Some(&self.policy()));
        self.engine.install(Arc::new(policy));
        *self
            .snapshot
            .write()
            .unwrap_or_else(PoisonError::into_inner) = Arc::clone(&next);
        self.installed.send_replace(Arc::new(rules));
        Ok(Applied {
            record,
            version,
            snapshot: next,
        })
    }

    /// Puts a reloaded list file of this node in force (bumping the tenant's version, as any
    /// list change does). When another node moved the version meanwhile, catches up with the
    /// store and tries once more. Nothing changes on error: the caller keeps the file pending
    /// and tries again later.
    pub async fn load_file_list(
        self: &Arc<Self>,
        name: ManagedListName,
        list: Arc<ManagedList>,
    ) -> Result<u64, WriteError> {
        for attempt in 0..2 {
            match self.apply(Change::FileList(name, Arc::clone(&list))).await {
                Ok(applied) => return Ok(applied.version),
                Err(err) if attempt == 0 && err.is_conflict() => {
                    self.refresh_from_store().await.map_err(|err| {
                        tracing::warn!(error = %err, "cannot catch up with the store");
                        WriteError::Unavailable
                    })?;
                }
                Err(err) => return Err(err),
            }
        }
        Err(WriteError::Unavailable)
    }
}

enum Write {
    Create,
    Replace,
    Delete(AclId),
    PutList(ManagedListName, Arc<ManagedList>),
    DeleteList(ManagedListName),
    Bump(Box<RecordChange>),
    Restore,
    CreateKey(Box<StoredNetworkAclKey>),
    DeleteKey(NetworkAclKeyId),
}

/// 409 when another record of the snapshot holds `acl`'s priority (the database's unique index
/// is the final word; this answers early without a write).
fn check_priority_free(snapshot: &AclSnapshot, acl: &NetworkAcl) -> Result<(), WriteError> {
    let taken = snapshot
        .ordered
        .iter()
        .any(|r| r.acl.spec.priority == acl.spec.priority && r.acl.id != acl.id);
    if taken {
        Err(WriteError::PriorityTaken(acl.spec.priority.get()))
    } else {
        Ok(())
    }
}

/// Why a tenant could not be loaded at start.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] netacl_store::StoreError),
    /// The stored rule set does not compile.
    #[error("the stored rule set does not compile: {0}")]
    Compile(String),
    /// Stored key material does not open with this server's key-encryption key.
    #[error("cannot open stored secrets: {0}")]
    Secrets(String),
}
