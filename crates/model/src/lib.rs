//! The network ACL model: the admin API's wire format and the validated domain types.
//!
//! Everything that crosses the boundary into netacl is validated exactly once, here, and comes
//! out as a domain value that cannot be built any other way. The evaluator, the store and the
//! server only ever see validated values.
//!
//! ```
//! use netacl_model::{NetworkAclSpec, Limits};
//!
//! let body = serde_json::json!({
//!     "description": "block a bad network",
//!     "active": true,
//!     "priority": 10,
//!     "rule": {
//!         "action": {"block": true},
//!         "scope": "tenant",
//!         "match": {"ipv4_cidrs": ["198.51.100.0/24"]}
//!     }
//! });
//! let spec = NetworkAclSpec::from_json(&body, &Limits::default()).unwrap();
//! assert_eq!(spec.priority.get(), 10);
//!
//! // Every error names the property path, in the admin API's words.
//! let bad = serde_json::json!({
//!     "description": "dup", "active": true,
//!     "rule": {"action": {"block": true}, "scope": "tenant", "match": {"asns": [1, 1]}}
//! });
//! let err = NetworkAclSpec::from_json(&bad, &Limits::default()).unwrap_err();
//! assert_eq!(
//!     err.to_string(),
//!     "Payload validation error: 'Array items are not unique (indexes 0 and 1)' on property rule.match.asns."
//! );
//! ```
#![deny(missing_docs)]

mod acl;
mod criteria;
mod error;
mod formats;
mod limits;
mod rule;
mod schema;
mod scope;
mod timestamp;
mod validate;

pub use acl::{AclId, NetworkAcl, NetworkAclPatch, NetworkAclSpec, Priority, RuleSet};
pub use criteria::{
    AsnEntry, CidrEntry, CountryCode, Criteria, FingerprintJa3, FingerprintJa4, Hostname, Signal,
    SubdivisionCode, UserAgentPattern,
};
pub use error::ValidationError;
pub use limits::Limits;
pub use rule::{Action, Rule};
pub use scope::{RequestScope, RuleScope};
pub use timestamp::Timestamp;
