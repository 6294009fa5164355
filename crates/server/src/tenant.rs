//! A tenant's live state: the committed network ACLs (served to readers), the engine holding the
//! compiled policy, the channel of installed rule sets (the watch endpoint waits on it, an
//! in-process edge follows it), and the write path.
//!
//! The write path, under the tenant's write mutex: build the new rule set in memory from the
//! current snapshot → compile it (blocking thread) → commit to the store in one transaction
//! conditioned on the snapshot's version → install the compiled policy in the engine → publish the
//! new snapshot and version → answer. A rule set that cannot compile is refused before anything
//! is written. The whole sequence runs in its own task, so a client that disconnects mid-write
//! cannot leave the engine behind the database.
use std::collections::HashMap;
use std::sync::{Arc, PoisonError, RwLock};

use bytes::Bytes;
use netacl_model::{AclId, Limits, NetworkAcl, RuleSet};
use netacl_store::{Store, TenantId};
use tokio::sync::{watch, Mutex};

use crate::error::ApiError;
use crate::policy::{Policy, PolicyEngine};

/// One committed record and its JSON form, rendered once.
pub(crate) struct StoredAcl {
    pub(crate) acl: NetworkAcl,
    pub(crate) json: Bytes,
}

impl StoredAcl {
    fn new(acl: NetworkAcl) -> Arc<Self> {
        let json = Bytes::from(acl.to_json().to_string());
        Arc::new(Self { acl, json })
    }
}

/// The committed network ACLs of a tenant at one version.
pub(crate) struct AclSnapshot {
    pub(crate) version: u64,
    /// Ascending by priority, then id.
    pub(crate) ordered: Vec<Arc<StoredAcl>>,
    by_id: HashMap<AclId, Arc<StoredAcl>>,
}

impl AclSnapshot {
    fn new(version: u64, mut ordered: Vec<Arc<StoredAcl>>) -> Self {
        ordered.sort_by(|a, b| {
            (a.acl.spec.priority, a.acl.id.as_str()).cmp(&(b.acl.spec.priority, b.acl.id.as_str()))
        });
        let by_id = ordered
            .iter()
            .map(|stored| (stored.acl.id.clone(), Arc::clone(stored)))
            .collect();
        Self {
            version,
            ordered,
            by_id,
        }
    }

    /// The record with this id.
    pub(crate) fn get(&self, id: &AclId) -> Option<&Arc<StoredAcl>> {
        self.by_id.get(id)
    }

    /// The rule set this snapshot holds.
    fn rule_set(&self) -> RuleSet {
        RuleSet {
            version: self.version,
            acls: self.ordered.iter().map(|s| s.acl.clone()).collect(),
        }
    }

    /// A JSON array of the records `[from, to)`, concatenated from their rendered forms.
    pub(crate) fn json_array(&self, from: usize, to: usize) -> Vec<u8> {
        let slice = self
            .ordered
            .get(from..to.min(self.ordered.len()))
            .unwrap_or(&[]);
        let mut out = Vec::with_capacity(2 + slice.iter().map(|s| s.json.len() + 1).sum::<usize>());
        out.push(b'[');
        for (index, stored) in slice.iter().enumerate() {
            if index > 0 {
                out.push(b',');
            }
            out.extend_from_slice(&stored.json);
        }
        out.push(b']');
        out
    }
}

/// A change to a tenant's network ACLs.
pub(crate) enum Change {
    /// Insert a new record.
    Create(Box<NetworkAcl>),
    /// Replace the record `id` by what `build` makes of the current one.
    Replace {
        id: AclId,
        build: Box<dyn FnOnce(&NetworkAcl) -> NetworkAcl + Send>,
    },
    /// Delete the record `id`.
    Delete(AclId),
}

/// What a change produced: the stored record (none for a delete).
pub(crate) struct Applied {
    pub(crate) record: Option<Arc<StoredAcl>>,
}

/// A tenant's live state.
pub(crate) struct TenantRuntime {
    pub(crate) id: TenantId,
    store: Arc<dyn Store>,
    limits: Limits,
    snapshot: RwLock<Arc<AclSnapshot>>,
    engine: PolicyEngine,
    write_lock: Mutex<()>,
    /// The rule set last installed in the engine, sent right after each install.
    installed: watch::Sender<Arc<RuleSet>>,
}

impl TenantRuntime {
    /// Loads the tenant's rule set from the store and compiles it into a fresh engine, so the
    /// first request already sees the committed rules.
    pub(crate) async fn load(
        store: Arc<dyn Store>,
        id: TenantId,
        limits: Limits,
    ) -> Result<Arc<Self>, LoadError> {
        let rules = store.network_acl_rule_set(&id).await?;
        let version = rules.version;
        let (policy, rules) = tokio::task::spawn_blocking(move || {
            let policy = Policy::compile(&rules, &limits);
            (policy, rules)
        })
        .await
        .map_err(|err| LoadError::Compile(err.to_string()))?;
        let policy = policy.map_err(|err| LoadError::Compile(err.to_string()))?;
        let engine = PolicyEngine::new();
        engine.install(Arc::new(policy));
        let ordered = rules.acls.iter().cloned().map(StoredAcl::new).collect();
        let (installed, _) = watch::channel(Arc::new(rules));
        Ok(Arc::new(Self {
            id,
            store,
            limits,
            snapshot: RwLock::new(Arc::new(AclSnapshot::new(version, ordered))),
            engine,
            write_lock: Mutex::new(()),
            installed,
        }))
    }

    /// The store (for the tenant's other resources, which are read and written directly).
    pub(crate) fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    /// The committed records (what readers see).
    pub(crate) fn snapshot(&self) -> Arc<AclSnapshot> {
        Arc::clone(&self.snapshot.read().unwrap_or_else(PoisonError::into_inner))
    }

    /// The live compiled policy.
    pub(crate) fn policy(&self) -> Arc<Policy> {
        self.engine.policy()
    }

    /// The engine the write path and the store follower install into.
    pub(crate) fn engine(&self) -> &Arc<netacl_eval::Engine> {
        self.engine.engine()
    }

    /// A receiver of the rule set installed in the engine (its version is the committed one),
    /// updated right after each install: for long polls and an in-process edge.
    pub(crate) fn subscribe(&self) -> watch::Receiver<Arc<RuleSet>> {
        self.installed.subscribe()
    }

    /// Catches up with the store when another node (sharing the database) committed a newer
    /// rule set: compares the committed version with the served one and, if they differ, loads,
    /// compiles, installs and publishes the stored rule set. Serialised with the write path.
    /// Returns the version served afterwards. On any error the served state is left as it was.
    pub(crate) async fn refresh_from_store(&self) -> Result<u64, LoadError> {
        let _guard = self.write_lock.lock().await;
        let served = self.snapshot().version;
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
        let rules = self.store.network_acl_rule_set(&self.id).await?;
        let version = rules.version;
        let limits = self.limits;
        let (policy, rules) =
            tokio::task::spawn_blocking(move || (Policy::compile(&rules, &limits), rules))
                .await
                .map_err(|err| LoadError::Compile(err.to_string()))?;
        let policy = policy.map_err(|err| LoadError::Compile(err.to_string()))?;
        self.engine.install(Arc::new(policy));
        let ordered = rules.acls.iter().cloned().map(StoredAcl::new).collect();
        *self
            .snapshot
            .write()
            .unwrap_or_else(PoisonError::into_inner) = Arc::new(AclSnapshot::new(version, ordered));
        self.installed.send_replace(Arc::new(rules));
        Ok(version)
    }

    /// Applies a change through the whole write path (see the module docs). Runs to completion
    /// even if the caller goes away.
    pub(crate) async fn apply(self: &Arc<Self>, change: Change) -> Result<Applied, ApiError> {
        let this = Arc::clone(self);
        tokio::spawn(async move { this.apply_inner(change).await })
            .await
            .map_err(|err| {
                tracing::error!(error = %err, "write task failed");
                ApiError::internal()
            })?
    }

    async fn apply_inner(&self, change: Change) -> Result<Applied, ApiError> {
        let _guard = self.write_lock.lock().await;
        let current = self.snapshot();
        let mut records: Vec<Arc<StoredAcl>> = current.ordered.clone();
        let (record, write) = match change {
            Change::Create(acl) => {
                check_priority_free(&current, &acl)?;
                let stored = StoredAcl::new(*acl);
                records.push(Arc::clone(&stored));
                (Some(stored), Write::Create)
            }
            Change::Replace { id, build } => {
                let old = current.get(&id).ok_or_else(ApiError::no_such_network_acl)?;
                let acl = build(&old.acl);
                check_priority_free(&current, &acl)?;
                let stored = StoredAcl::new(acl);
                records.retain(|r| r.acl.id != id);
                records.push(Arc::clone(&stored));
                (Some(stored), Write::Replace)
            }
            Change::Delete(id) => {
                if current.get(&id).is_none() {
                    return Err(ApiError::no_such_network_acl());
                }
                records.retain(|r| r.acl.id != id);
                (None, Write::Delete(id))
            }
        };
        let next = AclSnapshot::new(current.version + 1, records);
        let rules = next.rule_set();
        let limits = self.limits;
        let (policy, rules) =
            tokio::task::spawn_blocking(move || (Policy::compile(&rules, &limits), rules))
                .await
                .map_err(|err| {
                    tracing::error!(error = %err, "compile task failed");
                    ApiError::internal()
                })?;
        let policy = policy.map_err(|err| {
            ApiError::invalid_body(format!(
                "Payload validation error: 'The rule set cannot be compiled: {err}'."
            ))
        })?;

        let expected = current.version;
        let version = match (&write, &record) {
            (Write::Create, Some(stored)) => {
                self.store
                    .create_network_acl(&self.id, expected, &stored.acl)
                    .await?
            }
            (Write::Replace, Some(stored)) => {
                self.store
                    .replace_network_acl(&self.id, expected, &stored.acl)
                    .await?
            }
            (Write::Delete(id), _) => {
                self.store
                    .delete_network_acl(&self.id, expected, id)
                    .await?
            }
            _ => return Err(ApiError::internal()),
        };
        if version != next.version {
            // The store was changed behind our back (another process on the same database).
            tracing::error!(version, expected = next.version, "rule-set version skew");
            return Err(ApiError::internal());
        }
        self.engine.install(Arc::new(policy));
        *self
            .snapshot
            .write()
            .unwrap_or_else(PoisonError::into_inner) = Arc::new(next);
        self.installed.send_replace(Arc::new(rules));
        Ok(Applied { record })
    }
}

enum Write {
    Create,
    Replace,
    Delete(AclId),
}

/// 409 when another record of the snapshot holds `acl`'s priority (the database's unique index
/// is the final word; this answers early without a write).
fn check_priority_free(snapshot: &AclSnapshot, acl: &NetworkAcl) -> Result<(), ApiError> {
    let taken = snapshot
        .ordered
        .iter()
        .any(|r| r.acl.spec.priority == acl.spec.priority && r.acl.id != acl.id);
    if taken {
        Err(ApiError::priority_taken(acl.spec.priority.get()))
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
}
