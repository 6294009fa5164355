//! What a tenant serves from at one version: the committed records (each rendered once), the
//! managed lists in force with the index compiled from them, and the network ACL keys. The write
//! path (`tenant`) builds a new snapshot for each change; readers and the rollback read them.
use std::collections::HashMap;
use std::sync::Arc;

use bytes::Bytes;
use netacl_eval::ManagedIndex;
use netacl_model::{AclId, ManagedList, ManagedListName, ManagedLists, NetworkAcl};

use super::keys::KeysState;

/// One committed record and its JSON form, rendered once.
pub struct StoredAcl {
    /// The record.
    pub acl: NetworkAcl,
    /// Its JSON form, as the API answers it.
    pub json: Bytes,
}

impl StoredAcl {
    /// The record with its JSON form rendered.
    pub fn new(acl: NetworkAcl) -> Arc<Self> {
        let json = Bytes::from(acl.to_json().to_string());
        Arc::new(Self { acl, json })
    }
}

/// Where a managed list's content comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListSource {
    /// Written through the API, stored in the database.
    Api,
    /// A `--managed-list` file of this node.
    File,
}

impl ListSource {
    /// `api` or `file`, as the API reports it.
    pub fn as_str(self) -> &'static str {
        match self {
            ListSource::Api => "api",
            ListSource::File => "file",
        }
    }
}

/// One managed list in force.
#[derive(Debug, Clone)]
pub struct ListEntry {
    /// The content.
    pub list: Arc<ManagedList>,
    /// Where it comes from.
    pub source: ListSource,
    /// The tenant version its content took effect at (for a stored list: the version its last
    /// write produced).
    pub version: u64,
    /// When it was last written (stored lists) or loaded (files), in milliseconds.
    pub updated_at_ms: i64,
}

/// The managed lists in force: the stored ones, this node's files, and the index compiled from
/// what is effective (a file wins over the stored list of the same name).
pub struct ListsState {
    /// The lists written through the API, by [`ManagedListName::index`].
    pub(super) stored: [Option<ListEntry>; 5],
    /// This node's list files, by [`ManagedListName::index`].
    pub(super) files: [Option<ListEntry>; 5],
    /// The index compiled from the lists in force.
    pub index: Arc<ManagedIndex>,
}

impl ListsState {
    /// The lists in force and their index, compiled.
    pub(super) fn build(stored: [Option<ListEntry>; 5], files: [Option<ListEntry>; 5]) -> Self {
        let lists = effective_lists(&stored, &files);
        let index = if lists.is_empty() {
            ManagedIndex::empty()
        } else {
            Arc::new(ManagedIndex::build(&lists))
        };
        Self {
            stored,
            files,
            index,
        }
    }

    /// The same index when the effective content did not change (no rebuild).
    pub(super) fn rebuilt(
        &self,
        stored: [Option<ListEntry>; 5],
        files: [Option<ListEntry>; 5],
    ) -> Self {
        if effective_lists(&stored, &files).same_content(self.index.lists()) {
            return Self {
                stored,
                files,
                index: Arc::clone(&self.index),
            };
        }
        Self::build(stored, files)
    }

    /// The list in force for `name`, if any.
    pub fn effective(&self, name: ManagedListName) -> Option<&ListEntry> {
        self.files[name.index()]
            .as_ref()
            .or(self.stored[name.index()].as_ref())
    }

    /// Whether `name` is given by a file of this node.
    pub fn is_from_file(&self, name: ManagedListName) -> bool {
        self.files[name.index()].is_some()
    }

    /// `(name, version)` of every stored list (what the store need not send again).
    pub(super) fn stored_versions(&self) -> Vec<(ManagedListName, u64)> {
        ManagedListName::ALL
            .into_iter()
            .filter_map(|n| self.stored[n.index()].as_ref().map(|e| (n, e.version)))
            .collect()
    }
}

/// The list in force for each name: this node's file, else the stored list.
fn effective_lists(
    stored: &[Option<ListEntry>; 5],
    files: &[Option<ListEntry>; 5],
) -> ManagedLists {
    let mut lists = ManagedLists::new();
    for name in ManagedListName::ALL {
        let entry = files[name.index()]
            .as_ref()
            .or(stored[name.index()].as_ref());
        lists.set(name, entry.map(|e| Arc::clone(&e.list)));
    }
    lists
}

/// The committed network ACLs and managed lists of a tenant at one version.
pub struct AclSnapshot {
    /// The tenant's version.
    pub version: u64,
    /// Ascending by priority, then id.
    pub ordered: Vec<Arc<StoredAcl>>,
    by_id: HashMap<AclId, Arc<StoredAcl>>,
    /// The managed lists in force at this version.
    pub lists: Arc<ListsState>,
    /// The network ACL keys at this version.
    pub keys: Arc<KeysState>,
}

impl AclSnapshot {
    pub(super) fn new(
        version: u64,
        mut ordered: Vec<Arc<StoredAcl>>,
        lists: Arc<ListsState>,
        keys: Arc<KeysState>,
    ) -> Self {
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
            lists,
            keys,
        }
    }

    /// The record with this id.
    pub fn get(&self, id: &AclId) -> Option<&Arc<StoredAcl>> {
        self.by_id.get(id)
    }

    /// A JSON array of the records `[from, to)`, concatenated from their rendered forms.
    pub fn json_array(&self, from: usize, to: usize) -> Vec<u8> {
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
