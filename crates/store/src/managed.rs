//! A tenant's managed lists (`auth0_managed` content supplied through the admin API).
use std::sync::Arc;

use async_trait::async_trait;
use netacl_model::{ManagedList, ManagedListName, RuleSet, MAX_NESTING_DEPTH};

use crate::{RecordChange, StoreError, TenantId, WriteOrigin};

/// One stored managed list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredManagedList {
    /// The list's name.
    pub name: ManagedListName,
    /// The tenant's rule-set version its last write produced (it changes with every write).
    pub version: u64,
    /// When it was last written, in milliseconds since the UNIX epoch.
    pub updated_at_ms: i64,
    /// The content, re-validated; `None` when the caller said it holds this version already
    /// (see [`ManagedListStore::tenant_policy`]).
    pub list: Option<Arc<ManagedList>>,
}

/// What decides a tenant's requests, read in one snapshot: its rule set and its managed lists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TenantPolicy {
    /// The network ACLs at the tenant's version.
    pub rules: RuleSet,
    /// The managed lists written through the API, by name.
    pub managed_lists: Vec<StoredManagedList>,
}

/// A tenant's managed lists. Writes bump the tenant's rule-set version like ACL writes (a list
/// changes decisions), are conditioned on it, and return the new version.
#[async_trait]
pub trait ManagedListStore: Send + Sync {
    /// The rule set and the managed lists at one version. The content of a list whose stored
    /// version is the one `known` gives for its name is not read (`list: None`): a node that
    /// follows the database re-reads only what changed.
    async fn tenant_policy(
        &self,
        tenant: &TenantId,
        known: &[(ManagedListName, u64)],
    ) -> Result<TenantPolicy, StoreError>;

    /// Creates or replaces the content of `name`; `updated_at_ms` is the write's time (the one
    /// the caller shows, so the stored and the answered times are the same).
    async fn put_managed_list(
        &self,
        tenant: &TenantId,
        expected_version: u64,
        name: ManagedListName,
        list: &ManagedList,
        updated_at_ms: i64,
        origin: &WriteOrigin,
    ) -> Result<u64, StoreError>;

    /// Removes `name` (it becomes unconfigured); [`StoreError::NotFound`] when it has no
    /// stored content.
    async fn delete_managed_list(
        &self,
        tenant: &TenantId,
        expected_version: u64,
        name: ManagedListName,
        origin: &WriteOrigin,
    ) -> Result<u64, StoreError>;

    /// Bumps the tenant's version without any other write: a node announces that something
    /// outside the database changed its decisions (a managed list file it reloaded), which
    /// `change` describes in the version's history entry.
    async fn bump_version(
        &self,
        tenant: &TenantId,
        expected_version: u64,
        origin: &WriteOrigin,
        change: &RecordChange,
    ) -> Result<u64, StoreError>;
}

/// The JSON text stored for a list: the array of its accepted entries, written straight from
/// them (a list of a million entries is not made into a JSON value first).
pub(crate) fn items_text(list: &ManagedList) -> Result<String, StoreError> {
    let entries = list.items();
    let size: usize = entries.iter().map(|e| e.text().len() + 3).sum();
    let mut text = Vec::with_capacity(size + 2);
    text.push(b'[');
    for (i, entry) in entries.iter().enumerate() {
        if i > 0 {
            text.push(b',');
        }
        serde_json::to_writer(&mut text, entry.text())
            .map_err(|err| StoreError::Unavailable(format!("cannot serialise list: {err}")))?;
    }
    text.push(b']');
    String::from_utf8(text)
        .map_err(|err| StoreError::Unavailable(format!("cannot serialise list: {err}")))
}

/// A stored list's content, re-validated.
pub(crate) fn parse_items(
    tenant: &TenantId,
    name: &str,
    text: &str,
    max_items: usize,
) -> Result<(ManagedListName, Arc<ManagedList>), StoreError> {
    let corrupt = |reason: String| StoreError::Corrupt {
        tenant: tenant.to_string(),
        id: format!("managed list {name}"),
        reason,
    };
    let parsed = ManagedListName::parse(name).ok_or_else(|| corrupt("unknown name".into()))?;
    // Read straight into the entries, as the admin API reads a list's body.
    let list = ManagedList::from_items_json_text(text.as_bytes(), MAX_NESTING_DEPTH, max_items)
        .map_err(|err| corrupt(err.to_string()))?;
    Ok((parsed, Arc::new(list)))
}

/// The stored name of a list.
pub(crate) fn name_of(name: &str, tenant: &TenantId) -> Result<ManagedListName, StoreError> {
    ManagedListName::parse(name).ok_or_else(|| StoreError::Corrupt {
        tenant: tenant.to_string(),
        id: format!("managed list {name}"),
        reason: "unknown name".into(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The stored text is the array of the entries as JSON writes it, and reads back to the
    /// same list.
    #[test]
    fn a_list_is_stored_as_its_items_array_and_read_back() {
        let body = serde_json::json!({"items": ["192.0.2.0/24", "2001:db8::/32", "e7d705a3286e19ea42f587b344ee6865"]});
        let list = ManagedList::from_json(&body, 10).expect("list");
        let text = items_text(&list).expect("text");
        assert_eq!(
            text,
            serde_json::to_string(&list.items_json()).expect("json")
        );
        let empty = items_text(&ManagedList::empty()).expect("text");
        assert_eq!(empty, "[]");
        let tenant = TenantId::default_tenant();
        let (name, read) = parse_items(&tenant, "auth0.tor", &text, 10).expect("read back");
        assert_eq!(name, ManagedListName::Tor);
        assert_eq!(*read, list);
        assert!(
            parse_items(&tenant, "auth0.tor", &text, 2).is_err(),
            "over the limit"
        );
        assert!(
            parse_items(&tenant, "auth0.tor", "[1", 10).is_err(),
            "not JSON"
        );
    }
}
