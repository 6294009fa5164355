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
//!
//! // A rule file (what `netacl eval` loads): errors also say which record failed.
//! let rules = serde_json::json!([{
//!     "id": "acl_2ZbGfPu9TCHmbkDc8Qv3rL", "description": "", "active": true,
//!     "rule": {"action": {"log": true}, "scope": "tenant", "match": {"hostnames": ["*.x"]}}
//! }]);
//! let err = netacl_model::RuleSet::from_json(&rules, 1, &Limits::default()).unwrap_err();
//! assert_eq!(err.path, "[0].rule.match.hostnames[0]");
//! assert_eq!(err.rule_id.as_deref(), Some("acl_2ZbGfPu9TCHmbkDc8Qv3rL"));
//! ```
//!
//! # The stages
//!
//! | input | validated by | gives |
//! |---|---|---|
//! | create / replace body | [`NetworkAclSpec::from_json`] | [`NetworkAclSpec`] |
//! | PATCH body | [`NetworkAclPatch::from_json`] | [`NetworkAclPatch`] (apply it with [`NetworkAclPatch::apply`]) |
//! | stored record (`GET` answer) | [`NetworkAcl::from_json`] | [`NetworkAcl`] |
//! | rule file: an array of records or the list envelope `{"network_acls": [...]}` | [`RuleSet::from_json`] | [`RuleSet`] |
//! | organization create body | [`OrganizationSpec::from_json`] | [`OrganizationSpec`] (answered by [`Organization::to_json`]) |
//! | organization PATCH body | [`OrganizationPatch::from_json`] | [`OrganizationPatch`] (applied by [`OrganizationPatch::apply`]) |
//! | stored organization | [`Organization::from_stored_json`] | [`Organization`] (answered by [`Organization::record_json`]) |
//! | organization connection add / PATCH body, per [`ConnectionView`] | [`OrganizationConnection::from_json`], [`OrganizationConnectionPatch::from_json`] | [`OrganizationConnection`], [`OrganizationConnectionPatch`] |
//! | `PATCH /branding` body | [`BrandingPatch::from_json`] | [`BrandingPatch`] (merged by [`BrandingSettings::apply`]) |
//! | directory import file | [`DirectoryData::from_json`] | [`DirectoryData`] |
//!
//! `to_json` goes back the other way, giving every value exactly as it was accepted: CIDRs keep
//! their host bits (`10.1.2.3/8`), codes and hostnames keep their case, lists keep their order.
//! The domain types carry both the accepted text and the meaning (`CidrEntry::net` is
//! `10.0.0.0/8`; `CountryCode::canonical` is uppercase), so nothing downstream re-parses text.
//!
//! # Errors
//!
//! A [`ValidationError`] holds the dotted property path (`rule.match.ipv4_cidrs[3]`; for rule
//! files prefixed with the record's position, `[3].rule...` or `network_acls[3].rule...`), the
//! reason in z-schema's words (`Missing required property: scope`, `Additional properties not
//! allowed: foo`, `Expected type integer but found type number`, `String is too long (256
//! chars), maximum 255`, `Object didn't pass validation for format ipv4-cidr: 10.0.0.256`, ...)
//! and, for rule files, the failing record's `id`. Its `Display` is the admin API's
//! `invalid_body` message. Only the first problem is reported, checked in a fixed order: a
//! value's type, unknown properties, missing required properties, then members in the
//! documented order.
//!
//! # Untrusted input
//!
//! Bodies come from the network. Validation never panics, takes time linear in the body's size
//! (uniqueness of list items is checked with a hash map, not pairwise), and [`Limits`] caps the
//! entries per criteria member, per rule and per rule set, and the rules per set. JSON text
//! from outside is parsed by [`parse_json`], which refuses arrays and objects nested deeper
//! than [`MAX_NESTING_DEPTH`] (32) levels before building anything. Unknown
//! properties are refused at every level, so a misspelt member can never silently match
//! everything.
#![deny(missing_docs)]

mod acl;
mod acl_key;
mod branding;
mod criteria;
mod directory;
mod error;
mod formats;
mod host;
mod limits;
mod managed;
mod managed_body;
mod nesting;
mod organization;
mod organization_connection;
mod organization_update;
mod path;
pub mod patterns;
mod rule;
mod schema;
mod scope;
mod summary;
mod timestamp;
mod validate;

pub use acl::{AclId, NetworkAcl, NetworkAclPatch, NetworkAclSpec, Priority, RuleSet};
pub use acl_key::{
    KeyMaterial, NetworkAclKey, NetworkAclKeyId, NetworkAclKeySpec, MAX_KEY_BYTES, MAX_KEY_ID_LEN,
    MIN_KEY_BYTES, NETWORK_ACL_KEY_ALG,
};
pub use branding::{BrandingColors, BrandingFont, BrandingPatch, BrandingSettings, PageBackground};
pub use criteria::{
    AsnEntry, CidrEntry, CountryCode, Criteria, FingerprintJa3, FingerprintJa4, Hostname, Signal,
    SubdivisionCode, UserAgentPattern,
};
pub use directory::{
    Connection, DirectoryData, DirectoryUser, Group, GroupId, GroupMember, Session,
    GROUP_ID_PATTERN, MEMBERSHIP_TYPES, MEMBER_TYPES,
};
pub use error::ValidationError;
pub use host::{normalize_domain, request_host, HostError};
pub use limits::Limits;
pub use managed::{
    ManagedEntry, ManagedList, ManagedListCounts, ManagedListFileError, ManagedListName,
    ManagedLists,
};
pub use managed_body::{ManagedListBodyError, ManagedListItems};
pub use nesting::{nests_deeper_than, parse_json, JsonTextError, MAX_NESTING_DEPTH};
pub use organization::{
    EnabledConnection, Organization, OrganizationBranding, OrganizationColors, OrganizationId,
    OrganizationSpec, TokenQuota, MAX_ENABLED_CONNECTIONS, MAX_METADATA_PROPERTIES,
};
pub use organization_connection::{
    AccessLevel, ConnectionView, OrganizationConnection, OrganizationConnectionPatch,
    MAX_ORGANIZATION_CONNECTION_NAME,
};
pub use organization_update::OrganizationPatch;
pub use path::{normalize_path, scope_of_path, PathError};
pub use rule::{Action, Rule};
pub use scope::{RequestScope, RuleScope};
pub use summary::{AclSummary, MAX_SUMMARY_INTERVAL_S, SUMMARY_ACTIONS};
pub use timestamp::Timestamp;
