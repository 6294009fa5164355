//! A whole rule set given in a request body: what the analysis endpoint and `/netacl/v1`'s
//! evaluation read (records, or create bodies that get ids in order), checked as the write
//! path checks each record.
use netacl_model::{AclId, NetworkAcl, NetworkAclSpec, RuleSet, Timestamp, ValidationError};
use serde_json::Value;

use crate::http::error::ApiError;

/// Records (with `id`) or create bodies (without; they get ids `acl_111…1`, `acl_111…2`, ... in
/// order) into a rule set at version 0.
pub(crate) fn rule_set_from_body(
    acls: &Value,
    limits: &netacl_model::Limits,
) -> Result<RuleSet, ApiError> {
    let Value::Array(items) = acls else {
        return Err(ValidationError::new("network_acls", "Expected type array").into());
    };
    let mut rules = RuleSet::default();
    for (index, item) in items.iter().enumerate() {
        let nest = |err: ValidationError| {
            let path = if err.path.is_empty() {
                format!("network_acls[{index}]")
            } else {
                format!("network_acls[{index}].{}", err.path)
            };
            ValidationError::new(path, err.reason)
        };
        let acl = if item.get("id").is_some() {
            NetworkAcl::from_json(item, limits).map_err(nest)?
        } else {
            let spec = NetworkAclSpec::from_json(item, limits).map_err(nest)?;
            let epoch = Timestamp::from_unix_millis(0);
            NetworkAcl {
                id: AclId::from_random(index as u128 + 1),
                spec,
                created_at: epoch,
                updated_at: epoch,
            }
        };
        rules.acls.push(acl);
    }
    Ok(rules)
}
