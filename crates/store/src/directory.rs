//! Directory data of a tenant: connections, users, groups, group members and sessions.
//!
//! Members and sessions carry an immutable insertion sequence number (`seq`), assigned when the
//! record is first stored and kept when it is updated. Lists are ordered by it and paged by
//! position (`after` = the `seq` of the last record the caller has), so a page boundary stays
//! correct while records are added: new records sort after every existing one.
use async_trait::async_trait;
use netacl_model::{Connection, DirectoryData, GroupId};
use serde_json::Value;

use crate::{StoreError, TenantId};

/// What an import did, counted per record.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ImportReport {
    /// Records that did not exist.
    pub inserted: u64,
    /// Records that existed with other content.
    pub updated: u64,
    /// Records that existed with the same content (nothing written).
    pub unchanged: u64,
}

/// One page of a list ordered by insertion sequence.
#[derive(Debug, Clone, PartialEq)]
pub struct Page {
    /// The records, as their endpoint answers them.
    pub items: Vec<Value>,
    /// The `seq` of the last record of this page when more records follow; `None` on the last
    /// page.
    pub next_after: Option<u64>,
    /// How many records the whole list holds, when asked for.
    pub total: Option<u64>,
}

/// A tenant's directory data.
#[async_trait]
pub trait DirectoryStore: Send + Sync {
    /// Upserts every record of `data` by id in one transaction (all or nothing). A record whose
    /// stored content is identical is not written, so importing the same data twice changes
    /// nothing. Records absent from `data` are kept. [`StoreError::NameTaken`] when a
    /// connection's name is held by another stored connection.
    async fn import_directory(
        &self,
        tenant: &TenantId,
        data: &DirectoryData,
    ) -> Result<ImportReport, StoreError>;

    /// The tenant's connections, ordered by name.
    async fn connections(&self, tenant: &TenantId) -> Result<Vec<Connection>, StoreError>;

    /// Up to `limit` members of `group` after position `after`, in insertion order; `None` when
    /// the group does not exist.
    async fn group_members(
        &self,
        tenant: &TenantId,
        group: &GroupId,
        after: Option<u64>,
        limit: u32,
    ) -> Result<Option<Page>, StoreError>;

    /// Up to `limit` sessions of `user_id` after position `after`, in insertion order, with the
    /// user's session count when `with_total`; `None` when the user does not exist.
    async fn user_sessions(
        &self,
        tenant: &TenantId,
        user_id: &str,
        after: Option<u64>,
        limit: u32,
        with_total: bool,
    ) -> Result<Option<Page>, StoreError>;
}
