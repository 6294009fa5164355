//! What the write path needs to restore a kept version (`/_netacl/v1/network-acls/rollback`):
//! the records a rollback leaves in force.
use std::sync::Arc;

use netacl_model::{NetworkAcl, Timestamp};

use super::error::WriteError;
use super::snapshot::{AclSnapshot, StoredAcl};

/// The records a rollback to `version` leaves in force: the rule set of `version` (`then`),
/// each record that is unchanged but for `updated_at` kept as it is now, each other one stamped
/// `updated_at` = now (never earlier than its current stamp). `None` when that is the rule set in
/// force already. A record naming a key the tenant no longer has (`check` refuses it) makes the
/// version impossible to restore: 409 naming the record and the reason.
pub fn restored_records(
    current: &AclSnapshot,
    then: Vec<NetworkAcl>,
    version: u64,
    check: impl Fn(&NetworkAcl) -> Result<(), WriteError>,
) -> Result<Option<Vec<Arc<StoredAcl>>>, WriteError> {
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
                check(&acl).map_err(|reason| WriteError::NotRestorable {
                    version,
                    acl: acl.id.clone(),
                    reason: Box::new(reason),
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
