use std::fmt;

/// A tenant's id. Every record in the store carries one, so that one deployment can serve many
/// tenants.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TenantId(String);

impl TenantId {
    /// The tenant a single-tenant deployment serves.
    pub const DEFAULT: &'static str = "default";

    /// A tenant id: 1..=64 characters of ASCII letters, digits, `-` and `_`.
    pub fn new(id: &str) -> Option<Self> {
        let ok = !id.is_empty()
            && id.len() <= 64
            && id
                .bytes()
                .all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_');
        ok.then(|| Self(id.to_owned()))
    }

    /// The id of the default tenant.
    pub fn default_tenant() -> Self {
        Self(Self::DEFAULT.to_owned())
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for TenantId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A tenant as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tenant {
    /// Its id.
    pub id: TenantId,
    /// The host its API is served on (`localhost:8080`); issuer and audience derive from it.
    pub domain: String,
    /// The version of its network ACL rule set; every ACL write bumps it by one.
    pub acl_version: u64,
}

/// A tenant with the domains it is served on (the operator's view).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TenantRecord {
    /// Its id.
    pub id: TenantId,
    /// The domain its issuer and audience derive from: its first domain, or for the default
    /// tenant the server's `--tenant-domain` (port included, as before).
    pub domain: String,
    /// The domains requests select it by, canonical (see `netacl_model::normalize_domain`), in
    /// the order they were given. Empty for the default tenant, which is selected by its
    /// `domain` (and by every host while it is the only tenant).
    pub domains: Vec<String>,
    /// When it was created, in milliseconds since the UNIX epoch.
    pub created_at_ms: i64,
}

/// What a tenant is created with, in the transaction that creates it: its first signing key
/// (current, sealed by the caller) and its bootstrap client.
#[derive(Debug, Clone)]
pub struct TenantCredentials {
    /// The signing key.
    pub signing_key: crate::StoredSigningKey,
    /// The bootstrap client.
    pub client: crate::StoredClient,
}

/// Every table holding a tenant's records, in an order deleting them one after the other
/// respects the foreign keys (referencing tables first; `tenants` last). A tenant's deletion
/// empties each of them of its rows; a test checks that every table with a `tenant_id` column is
/// listed.
pub(crate) const TENANT_TABLES: &[&str] = &[
    "organization_connections",
    "group_members",
    "user_sessions",
    "organizations",
    "connections",
    "directory_groups",
    "directory_users",
    "network_acls",
    "signing_keys",
    "clients",
    "branding",
    "managed_lists",
    "network_acl_keys",
    "tenant_logs",
    "tenant_domains",
    "network_acl_history",
    "network_acl_history_versions",
    "network_acl_history_texts",
    "network_acl_history_contents",
];
