//! Why a change to a tenant's network ACLs, managed lists or keys was refused or failed: the write
//! path's own error, which knows no HTTP. The admin API maps each variant to its error shape once,
//! at the boundary (`From<WriteError> for ApiError` in `netacl-server`'s `http::error`).
use netacl_model::{AclId, ManagedListName, ValidationError};
use netacl_store::StoreError;

use super::policy::CompileFailure;

/// Why a write through the tenant's write path was refused or failed.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    /// A record is invalid (it names a network ACL key the tenant does not have), at its
    /// property path.
    #[error(transparent)]
    Invalid(#[from] ValidationError),
    /// The rule set the change leads to cannot be compiled.
    #[error("the rule set cannot be compiled: {0}")]
    Uncompilable(CompileFailure),
    /// The network ACL named does not exist.
    #[error("the network ACL does not exist")]
    NoSuchNetworkAcl,
    /// Another network ACL holds this priority.
    #[error("a network ACL with priority {0} already exists")]
    PriorityTaken(u8),
    /// The managed list is supplied by a file on this node, read-only through the API.
    #[error("the managed list {0} is supplied by a file on this node")]
    ListFromFile(ManagedListName),
    /// The managed list has no stored content.
    #[error("the managed list {0} does not exist or has no stored content")]
    NoSuchManagedList(ManagedListName),
    /// A network ACL key with this name exists already.
    #[error("a network ACL key with this name already exists")]
    KeyNameTaken,
    /// The network ACL key does not exist.
    #[error("the network ACL key does not exist")]
    NoSuchKey,
    /// Network ACLs (these ids) still name the key.
    #[error("the network ACL key is referenced by network ACLs ({})", .0.join(", "))]
    KeyInUse(Vec<String>),
    /// A rollback saw another version than the one in force.
    #[error("the network ACLs are at version {actual}, not the expected version {expected}")]
    StaleVersion {
        /// The version the caller saw.
        expected: u64,
        /// The version in force.
        actual: u64,
    },
    /// The version to restore was never recorded, is no longer kept, or is not reached yet.
    #[error("the version does not exist or is no longer kept")]
    NoSuchVersion,
    /// A record of the version to restore is refused today (it names a key the tenant no longer
    /// has).
    #[error("version {version} cannot be restored: network ACL {acl}: {reason}")]
    NotRestorable {
        /// The version to restore.
        version: u64,
        /// The record refused.
        acl: AclId,
        /// Why.
        reason: Box<WriteError>,
    },
    /// The store refused or failed the write.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// This node cannot catch up with the store.
    #[error("the store is unavailable")]
    Unavailable,
    /// A task of the write path failed, a key could not be sealed, or the store's version moved
    /// behind this node (each logged where it happened).
    #[error("internal error")]
    Internal,
}

impl WriteError {
    /// The change conflicts with the tenant's state (another node may have moved it, or the
    /// change itself collides with a record): after catching up with the store it may go
    /// through. Exactly the errors the admin API answers with 409.
    pub fn is_conflict(&self) -> bool {
        matches!(
            self,
            WriteError::PriorityTaken(_)
                | WriteError::ListFromFile(_)
                | WriteError::KeyNameTaken
                | WriteError::KeyInUse(_)
                | WriteError::StaleVersion { .. }
                | WriteError::NotRestorable { .. }
                | WriteError::Store(
                    StoreError::PriorityTaken(_)
                        | StoreError::VersionConflict { .. }
                        | StoreError::DuplicateId(_)
                        | StoreError::ConnectionAlreadyInOrganization(_)
                )
        )
    }
}
