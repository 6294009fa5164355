//! What the write path needs to restore a kept version (`/_netacl/v1/network-acls/rollback`):
//! the refusals of a rollback and the records it leaves in force.
use std::sync::Arc;

use http::StatusCode;
use netacl_model::{NetworkAcl, Timestamp};

use super::{AclSnapshot, StoredAcl};
use crate::http::error::ApiError;

/// 404 `inexistent_version`: never recorded, removed by retention, or not reached yet.
pub(crate) fn no_such_version() -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        Some("inexistent_version"),
        "The version does not exist or is no longer kept.",
    )
}

/// 409: the rule set is no longer at the version the caller saw.
pub(crate) fn stale_version(expected: u64, actual: u64) -> ApiError {
    ApiError::new(
        StatusCode::CONFLICT,
        Some("conflict"),
        format!(
            "The network ACLs are at version {actual}, not the expected_version {expected}; \
             review the changes since and retry."
        ),
    )
}

/// The records a rollback to `version` leaves in force: the rule set of `version` (`then`),
/// each record that is unchanged but for `updated_at` kept as it is now, each other one stamped
/// `updated_at` = now (never earlier than its current stamp). `None` when that is the rule set in
/// force already. A record naming a key the tenant no longer has (`check` refuses it) makes the
/// version impossible to restore: 409 naming the record and the reason.
pub(crate) fn restored_records(
    current: &AclSnapshot,
    then: Vec<NetworkAcl>,
    version: u64,
    check: impl Fn(&NetworkAcl) -> Result<(), ApiError>,
) -> Result<Option<Vec<Arc<StoredAcl>>>, ApiError> {
    let now = Timestamp::now();
    let mut unchanged = 0;
    let mut restored = Vec::with_capacity(then.len());
    for acl in then {
        match current.get(&acl.id) {
            Some(live) if same_but_updated_at(&live.acl, &acl) => {
                unchanged += 1;
                restored.push(Arc::clone(live));
            }
            live => {
                check(&acl).map_err(|err| {
                    ApiError::new(
                        StatusCode::CONFLICT,
                        Some("conflict"),
                        format!(
                            "Version {version} cannot be restored: network ACL {}: {}",
                            acl.id,
                            err.message()
                        ),
                    )
                })?;
                let floor = live.map_or(acl.updated_at, |l| l.acl.updated_at.max(acl.updated_at));
                restored.push(StoredAcl::new(NetworkAcl {
                    updated_at: now.max(floor),
                    ..acl
                }));
            }
        }
    }
    if unchanged == restored.len() && unchanged == current.ordered.len() {
        return Ok(None);
    }
    Ok(Some(restored))
}

fn same_but_updated_at(a: &NetworkAcl, b: &NetworkAcl) -> bool {
    a.id == b.id && a.spec == b.spec && a.created_at == b.created_at
}
