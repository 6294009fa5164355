//! A tenant's network ACL keys in force: each key's record with its material, opened once, and
//! the set of them at one version (what the policy's signature checks and the watch's sealed
//! keys are made from).
use std::sync::Arc;

use netacl_model::{KeyMaterial, NetworkAcl, NetworkAclKey, NetworkAclKeyId, RuleSet};

/// The purpose network ACL key material is sealed under (bound into the sealed value).
pub(super) const KEY_PURPOSE: &str = "network_acl_key";

/// The purpose network ACL key material is sealed under in transit to an edge.
pub const KEY_TRANSIT_PURPOSE: &str = "network_acl_key";

/// One network ACL key in force: its record and its material, opened once at load (or kept
/// from the create request). The material stays in memory, wiped when dropped, for two uses
/// only: the prepared HMAC keys the in-process edge verifies with, and sealing to a remote
/// edge (the watch, see `internal::watch`). It is never serialised.
pub struct LiveKey {
    /// The key's record (id, name, algorithm, dates).
    pub record: NetworkAclKey,
    /// The key's material, in clear (wiped when dropped).
    pub material: KeyMaterial,
}

/// The network ACL keys of a tenant at one version, newest first.
#[derive(Default)]
pub struct KeysState {
    keys: Vec<Arc<LiveKey>>,
}

impl KeysState {
    pub(super) fn new(mut keys: Vec<Arc<LiveKey>>) -> Self {
        keys.sort_by(|a, b| {
            (b.record.created_at, b.record.id.as_str())
                .cmp(&(a.record.created_at, a.record.id.as_str()))
        });
        Self { keys }
    }

    /// Every key, newest first.
    pub fn newest_first(&self) -> impl Iterator<Item = &Arc<LiveKey>> {
        self.keys.iter()
    }

    /// The key with this id.
    pub fn get(&self, id: &NetworkAclKeyId) -> Option<&Arc<LiveKey>> {
        self.keys.iter().find(|k| &k.record.id == id)
    }

    /// The keys the active rules of `rules` name (the only ones an edge needs), with their
    /// material.
    pub fn named_by<'a>(
        &'a self,
        acls: impl IntoIterator<Item = &'a NetworkAcl>,
    ) -> impl Iterator<Item = &'a Arc<LiveKey>> + 'a {
        NetworkAcl::message_signature_keys(acls)
            .into_iter()
            .filter_map(|id| self.get(id))
    }

    /// The HMAC keys prepared for the keys the active rules of `rules` name.
    pub fn mac_keys_for(&self, rules: &RuleSet) -> netacl_secrets::MacKeys {
        netacl_secrets::MacKeys::new(
            self.named_by(&rules.acls)
                .map(|k| (k.record.id.as_str(), k.material.expose())),
        )
    }
}
