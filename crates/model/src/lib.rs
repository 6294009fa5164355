#![doc = include_str!("../README.md")]
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
mod trusted_proxies;
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
pub use trusted_proxies::{TrustedProxies, TrustedProxyError};
