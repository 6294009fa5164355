use netacl_model::{AclId, Priority};

/// Why a store operation failed. Every write is one transaction: when an error comes back,
/// nothing was written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// Another record of the tenant holds this priority (the database's unique index said so).
    #[error("priority {} is held by another network ACL", .0.get())]
    PriorityTaken(Priority),
    /// A record with this id already exists (a create whose random id collided).
    #[error("a network ACL with id {0} already exists")]
    DuplicateId(AclId),
    /// A unique name is held by another record (an organization's name, an imported
    /// connection's name); the text says which.
    #[error("name taken: {0}")]
    NameTaken(String),
    /// A record refers to a connection the tenant does not have (its id).
    #[error("connection {0} does not exist")]
    UnknownConnection(String),
    /// The organization does not exist (its id or name).
    #[error("organization {0} does not exist")]
    UnknownOrganization(String),
    /// The connection (its id) is not one of the organization's (in the view asked for).
    #[error("connection {0} is not a connection of the organization")]
    ConnectionNotInOrganization(String),
    /// The connection (its id) is already one of the organization's.
    #[error("connection {0} is already a connection of the organization")]
    ConnectionAlreadyInOrganization(String),
    /// A tenant with this id already exists.
    #[error("tenant {0} already exists")]
    TenantExists(String),
    /// The domain is already one of another tenant's (the database's unique constraint said so).
    #[error("domain {0} belongs to another tenant")]
    DomainTaken(String),
    /// The record (or tenant) does not exist.
    #[error("not found: {0}")]
    NotFound(String),
    /// The tenant's rule set is no longer at the version the write was conditioned on.
    #[error("the tenant's rule set is at version {actual}, not the expected {expected}")]
    VersionConflict {
        /// The version the caller expected.
        expected: u64,
        /// The version the store holds.
        actual: u64,
    },
    /// A signing-key change conflicts with the stored keys (the current key moved since it was
    /// read, the key is revoked, or the current key was asked to be revoked).
    #[error("signing keys: {0}")]
    KeyConflict(String),
    /// A stored record no longer validates (edited by hand, or limits lowered since).
    #[error("stored record {id} of tenant {tenant} is invalid: {reason}")]
    Corrupt {
        /// The tenant.
        tenant: String,
        /// The record's id (or table key).
        id: String,
        /// What is wrong.
        reason: String,
    },
    /// The database cannot be opened or set up as required (WAL refused, newer schema, ...).
    #[error("cannot set up the database: {0}")]
    Setup(String),
    /// The database failed (I/O error, disk full, locked for too long, ...).
    #[error("the database is unavailable: {0}")]
    Unavailable(String),
}

impl From<rusqlite::Error> for StoreError {
    fn from(err: rusqlite::Error) -> Self {
        StoreError::Unavailable(err.to_string())
    }
}
