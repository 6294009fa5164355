//! What an edge's policy is compiled from: the rule set, and the managed lists (`auth0_managed`)
//! from two places: the admin server the edge follows (its watch answers carry them) and this
//! edge's own `--managed-list` files, which win for their names.
//!
//! Each input changes on its own (a rule set arrives, the server's lists change, a file is
//! reloaded); every change recompiles the policy from all three and installs it, under one
//! lock so that two changes cannot interleave. The managed-list index is rebuilt only when the
//! lists in force change; a rule change compiles against the same index. On any error nothing
//! changes: the policy in service stays.
use std::sync::Arc;

use netacl_eval::ManagedIndex;
use netacl_model::{ManagedList, ManagedListName, ManagedLists, NetworkAcl, RuleSet};
use tokio::sync::Mutex;

use crate::enforce::Enforcer;
use crate::signals::httpsig::SigningKeys;
use crate::sources::source_error::SourceError;

/// The inputs of an edge's policy, and the enforcer they are installed in. Share it (`Arc`)
/// between the rule source and whatever reloads list files.
pub struct PolicySources {
    enforcer: Arc<Enforcer>,
    state: Mutex<Inputs>,
}

impl std::fmt::Debug for PolicySources {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PolicySources").finish_non_exhaustive()
    }
}

struct Inputs {
    /// The rule set in force; `None` until the first one arrives.
    rules: Option<Arc<RuleSet>>,
    /// Lists from the admin server.
    remote: ManagedLists,
    /// Lists from this edge's files (they win).
    local: ManagedLists,
    /// Compiled from the lists in force.
    index: Arc<ManagedIndex>,
    /// The prepared network ACL keys that came with the rules (remote source only).
    keys: Option<Arc<SigningKeys>>,
}

/// The lists in force: `local` over `remote`.
fn effective(remote: &ManagedLists, local: &ManagedLists) -> ManagedLists {
    let mut lists = remote.clone();
    for (name, list) in local.iter() {
        lists.set(name, Some(Arc::clone(list)));
    }
    lists
}

impl PolicySources {
    /// Inputs with no rule set yet, no list from a server and the lists of this edge's files
    /// (`local`), installed in `enforcer`.
    pub fn new(enforcer: Arc<Enforcer>, local: ManagedLists) -> Self {
        let index = if local.is_empty() {
            ManagedIndex::empty()
        } else {
            Arc::new(ManagedIndex::build(&local))
        };
        Self {
            enforcer,
            state: Mutex::new(Inputs {
                rules: None,
                remote: ManagedLists::new(),
                local,
                index,
                keys: None,
            }),
        }
    }

    /// The enforcer the policy is installed in.
    pub fn enforcer(&self) -> &Arc<Enforcer> {
        &self.enforcer
    }

    /// The lists the admin server sent last.
    pub async fn remote_lists(&self) -> ManagedLists {
        self.state.lock().await.remote.clone()
    }

    /// Installs a new rule set from `origin` (the lists stay as they are; no network ACL key:
    /// a rule file carries none).
    pub async fn set_rules(&self, rules: RuleSet, origin: &str) -> Result<(), SourceError> {
        let mut state = self.state.lock().await;
        let (remote, local) = (state.remote.clone(), state.local.clone());
        self.install(
            &mut state,
            Some(Arc::new(rules)),
            remote,
            local,
            None,
            origin,
        )
        .await
    }

    /// Installs a new rule set and the lists the admin server at `origin` sent with it.
    pub async fn set_rules_and_remote_lists(
        &self,
        rules: RuleSet,
        remote: ManagedLists,
        origin: &str,
    ) -> Result<(), SourceError> {
        self.set_remote(rules, Some(remote), None, origin).await
    }

    /// Installs a rule set from the admin server at `origin`, with the lists it sent (`None`:
    /// the lists stay) and the network ACL keys it sent (opened, prepared), all in one swap.
    pub async fn set_remote(
        &self,
        rules: RuleSet,
        remote: Option<ManagedLists>,
        keys: Option<Arc<SigningKeys>>,
        origin: &str,
    ) -> Result<(), SourceError> {
        let mut state = self.state.lock().await;
        let local = state.local.clone();
        let remote = remote.unwrap_or_else(|| state.remote.clone());
        self.install(
            &mut state,
            Some(Arc::new(rules)),
            remote,
            local,
            keys,
            origin,
        )
        .await
    }

    /// Puts the reloaded content of one of this edge's list files in force.
    pub async fn set_local_list(
        &self,
        name: ManagedListName,
        list: Arc<ManagedList>,
    ) -> Result<(), SourceError> {
        let mut state = self.state.lock().await;
        let rules = state.rules.clone();
        let remote = state.remote.clone();
        let mut local = state.local.clone();
        local.set(name, Some(list));
        let keys = state.keys.clone();
        self.install(&mut state, rules, remote, local, keys, name.as_str())
            .await
    }

    /// Compiles and installs the policy of these inputs; on success they become the state.
    async fn install(
        &self,
        state: &mut Inputs,
        rules: Option<Arc<RuleSet>>,
        remote: ManagedLists,
        local: ManagedLists,
        keys: Option<Arc<SigningKeys>>,
        origin: &str,
    ) -> Result<(), SourceError> {
        let lists = effective(&remote, &local);
        let current = Arc::clone(&state.index);
        let enforcer = Arc::clone(&self.enforcer);
        let installed_rules = rules.clone();
        let installed_keys = keys.clone();
        let joined = tokio::task::spawn_blocking(move || {
            let index = if lists.same_content(current.lists()) {
                current
            } else {
                let index = Arc::new(ManagedIndex::build(&lists));
                tracing::info!(
                    lists = ?index.stats().iter().filter(|s| s.configured).map(|s| s.name).collect::<Vec<_>>(),
                    build_ms = index.build_time().as_millis() as u64,
                    "managed lists compiled"
                );
                index
            };
            match &installed_rules {
                Some(rules) => enforcer
                    .apply_rules_with_keys(rules, &index, installed_keys)
                    .map(|()| index),
                None => Ok(index),
            }
        })
        .await;
        let index = match joined {
            Ok(Ok(index)) => index,
            Ok(Err(source)) => {
                return Err(SourceError::Compile {
                    origin: origin.to_owned(),
                    source,
                })
            }
            Err(err) => return Err(SourceError::Remote(format!("compiling {origin}: {err}"))),
        };
        if let Some(rules) = &rules {
            warn_about_missing_keys(rules, keys.as_deref(), origin);
        }
        *state = Inputs {
            rules,
            remote,
            local,
            index,
            keys,
        };
        Ok(())
    }
}

/// Logs one warning naming the active rules that name a network ACL key this edge holds no
/// material for (a rule file has none; a remote edge whose client lacks
/// `read:network_acl_key_material` gets none): for them `http_message_signature` is always
/// missing, so a `not_match` on it holds for every request.
fn warn_about_missing_keys(rules: &RuleSet, keys: Option<&SigningKeys>, origin: &str) {
    let missing: Vec<&str> = rules
        .message_signature_keys()
        .into_iter()
        .map(|id| id.as_str())
        .filter(|id| !keys.is_some_and(|k| k.contains(id)))
        .collect();
    if missing.is_empty() {
        return;
    }
    let naming: Vec<&str> = rules
        .acls
        .iter()
        .filter(|acl| {
            acl.spec.active
                && NetworkAcl::message_signature_keys([*acl])
                    .iter()
                    .any(|id| missing.contains(&id.as_str()))
        })
        .map(|acl| acl.id.as_str())
        .collect();
    tracing::warn!(
        source = origin,
        version = rules.version,
        rules = ?naming,
        keys = ?missing,
        "live rules name http_message_signature keys this edge holds no material for: the \
         signal is always missing for them (a rule file carries no key material; an edge \
         following netacl serve needs a client with read:network_acl_key_material)"
    );
}
