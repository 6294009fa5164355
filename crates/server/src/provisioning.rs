//! Tenant lifecycle: the one provisioning path shared by `netacl tenant create|delete` (on the
//! store directly) and the operator API (`/_netacl/v1/tenants`).
//!
//! Creating a tenant checks its id and domains, generates its RSA signing key (sealed with the
//! key-encryption key exactly as `netacl serve` seals its own, bound to the tenant and the kid)
//! and a bootstrap client holding every management scope (not the network ACL key material
//! scope, as the default tenant's bootstrap client: an edge client gets it, see
//! [`create_edge_client`]), and writes all of it in one store transaction. The client secret is returned once and stored only as a hash.
use std::sync::Arc;

use netacl_model::Timestamp;
use netacl_secrets::Kek;
use netacl_store::{Store, StoreError, StoredClient, TenantCredentials, TenantId, TenantRecord};

use crate::auth::{
    bootstrap_scopes, generate_client_id, generate_client_secret, hash_client_secret, SigningKey,
};

/// Most domains one tenant may have.
pub const MAX_TENANT_DOMAINS: usize = 32;

/// A tenant just created, with the bootstrap client's secret (shown once).
#[derive(Clone)]
pub struct ProvisionedTenant {
    /// The tenant as stored.
    pub record: TenantRecord,
    /// The token issuer, `https://DOMAIN/` of its first domain.
    pub issuer: String,
    /// The management audience, `https://DOMAIN/api/v2/`.
    pub audience: String,
    /// The bootstrap client's id.
    pub client_id: String,
    /// The bootstrap client's secret: stored only as a hash, shown once.
    pub client_secret: String,
    /// The signing key's id.
    pub kid: String,
}

impl std::fmt::Debug for ProvisionedTenant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProvisionedTenant")
            .field("record", &self.record)
            .field("client_id", &self.client_id)
            .field("client_secret", &"<redacted>")
            .finish()
    }
}

impl ProvisionedTenant {
    /// The creation's answer (`netacl tenant create --json`, `POST /_netacl/v1/tenants`).
    pub fn to_json(&self) -> serde_json::Value {
        let mut value = tenant_json(&self.record);
        value["client_id"] = self.client_id.clone().into();
        value["client_secret"] = self.client_secret.clone().into();
        value
    }
}

/// A tenant as the operator sees it (no secret): `tenant`, `domains`, `issuer`, `audience`,
/// `created_at`.
pub fn tenant_json(record: &TenantRecord) -> serde_json::Value {
    let domains = if record.domains.is_empty() {
        vec![record.domain.clone()]
    } else {
        record.domains.clone()
    };
    serde_json::json!({
        "tenant": record.id.as_str(),
        "domains": domains,
        "issuer": format!("https://{}/", record.domain),
        "audience": format!("https://{}/api/v2/", record.domain),
        "created_at": Timestamp::from_unix_millis(record.created_at_ms).to_string(),
    })
}

/// Why a tenant could not be created or deleted. Nothing was written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProvisionError {
    /// The id is not 1..=64 of ASCII letters, digits, `-`, `_`.
    #[error("tenant: must be 1 to 64 of ASCII letters, digits, '-' and '_'")]
    InvalidId,
    /// No domain given, or more than [`MAX_TENANT_DOMAINS`].
    #[error("domains: 1 to {MAX_TENANT_DOMAINS} domains are required")]
    DomainCount,
    /// A domain is not a host name (its index in the list, and why).
    #[error("domains[{index}]: {reason}")]
    InvalidDomain {
        /// Its position in the list.
        index: usize,
        /// Why.
        reason: String,
    },
    /// A tenant with this id exists (or the id is `default`).
    #[error("tenant {0} already exists")]
    TenantExists(String),
    /// A domain belongs to another tenant.
    #[error("domain {0} belongs to another tenant")]
    DomainTaken(String),
    /// The tenant does not exist.
    #[error("tenant {0} does not exist")]
    NotFound(String),
    /// The default tenant cannot be deleted.
    #[error("the default tenant cannot be deleted")]
    DefaultTenant,
    /// The signing key could not be made or sealed.
    #[error("signing key: {0}")]
    Key(String),
    /// The store failed.
    #[error("store: {0}")]
    Store(#[source] StoreError),
}

impl From<StoreError> for ProvisionError {
    fn from(err: StoreError) -> Self {
        match err {
            StoreError::TenantExists(id) => ProvisionError::TenantExists(id),
            StoreError::DomainTaken(domain) => ProvisionError::DomainTaken(domain),
            StoreError::NotFound(what) => ProvisionError::NotFound(what),
            other => ProvisionError::Store(other),
        }
    }
}

/// The canonical domains of a request, in order; a duplicate (after normalisation) is refused
/// with its index.
pub fn check_domains(domains: &[String]) -> Result<Vec<String>, ProvisionError> {
    if domains.is_empty() || domains.len() > MAX_TENANT_DOMAINS {
        return Err(ProvisionError::DomainCount);
    }
    let mut out: Vec<String> = Vec::with_capacity(domains.len());
    for (index, raw) in domains.iter().enumerate() {
        let domain =
            netacl_model::normalize_domain(raw).map_err(|err| ProvisionError::InvalidDomain {
                index,
                reason: err.to_string(),
            })?;
        if out.contains(&domain) {
            return Err(ProvisionError::InvalidDomain {
                index,
                reason: format!("{domain} is given twice"),
            });
        }
        out.push(domain);
    }
    Ok(out)
}

/// The id of a tenant to create: a valid id other than `default`.
pub fn check_new_id(id: &str) -> Result<TenantId, ProvisionError> {
    let tenant = TenantId::new(id).ok_or(ProvisionError::InvalidId)?;
    if tenant.as_str() == TenantId::DEFAULT {
        return Err(ProvisionError::TenantExists(tenant.to_string()));
    }
    Ok(tenant)
}

/// Creates tenant `id` on `domains` (see the module docs): every check, the key, the client and
/// one store transaction. A domain of the default tenant (its stored domain, without the port)
/// is refused like any other tenant's.
pub async fn create_tenant(
    store: &Arc<dyn Store>,
    kek: &Kek,
    id: &str,
    domains: &[String],
) -> Result<ProvisionedTenant, ProvisionError> {
    let tenant = check_new_id(id)?;
    let domains = check_domains(domains)?;
    if let Some(default) = store.tenant(&TenantId::default_tenant()).await? {
        if let Ok(host) = netacl_model::request_host(&default.domain) {
            if domains.contains(&host) {
                return Err(ProvisionError::DomainTaken(host));
            }
        }
    }
    if store.tenant(&tenant).await?.is_some() {
        return Err(ProvisionError::TenantExists(tenant.to_string()));
    }
    let key = tokio::task::spawn_blocking(SigningKey::generate)
        .await
        .map_err(|err| ProvisionError::Key(err.to_string()))?
        .map_err(|err| ProvisionError::Key(err.to_string()))?;
    let now = Timestamp::now().unix_millis();
    let signing_key =
        crate::resources::signing_keys::sealed_row(&tenant, kek, &key, &domains[0], now)
            .map_err(|err| ProvisionError::Key(err.to_string()))?;
    let (client_id, client_secret) = (generate_client_id(), generate_client_secret());
    let client = StoredClient {
        client_id: client_id.clone(),
        secret_hash: hash_client_secret(&client_secret),
        scopes: bootstrap_scopes(),
        created_at_ms: now,
    };
    let kid = signing_key.kid.clone();
    let record = store
        .create_tenant(
            &tenant,
            &domains,
            &TenantCredentials {
                signing_key,
                client,
            },
            now,
        )
        .await?;
    tracing::info!(tenant = %record.id, domains = ?record.domains, "tenant created");
    Ok(ProvisionedTenant {
        issuer: format!("https://{}/", record.domain),
        audience: format!("https://{}/api/v2/", record.domain),
        record,
        client_id,
        client_secret,
        kid,
    })
}

/// An edge client just created: the one kind of client that receives network ACL key material
/// (sealed to the edge) with the watch. Its secret is stored only as a hash, shown once.
#[derive(Clone)]
#[non_exhaustive]
pub struct EdgeClient {
    /// The tenant it belongs to.
    pub tenant: TenantId,
    /// Its id.
    pub client_id: String,
    /// Its secret.
    pub client_secret: String,
    /// Its scopes: [`EDGE_CLIENT_SCOPES`](crate::auth::EDGE_CLIENT_SCOPES).
    pub scopes: Vec<String>,
    /// The hash stored for the secret (to serve the client at once).
    pub(crate) secret_hash: String,
}

impl std::fmt::Debug for EdgeClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EdgeClient")
            .field("tenant", &self.tenant)
            .field("client_id", &self.client_id)
            .field("client_secret", &"<redacted>")
            .finish_non_exhaustive()
    }
}

impl EdgeClient {
    /// The creation's answer: `tenant`, `client_id`, `client_secret`, `scopes`.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "tenant": self.tenant.as_str(),
            "client_id": self.client_id,
            "client_secret": self.client_secret,
            "scopes": self.scopes,
        })
    }
}

/// Creates an edge client of tenant `id` (the default tenant's id is `default`): a client
/// holding [`EDGE_CLIENT_SCOPES`](crate::auth::EDGE_CLIENT_SCOPES) (the watch, the key material
/// sealed to the edge, the edge's reports), for `netacl edge --rules-url`.
pub async fn create_edge_client(
    store: &Arc<dyn Store>,
    id: &str,
) -> Result<EdgeClient, ProvisionError> {
    let tenant = TenantId::new(id).ok_or_else(|| ProvisionError::NotFound(id.to_owned()))?;
    if store.tenant(&tenant).await?.is_none() {
        return Err(ProvisionError::NotFound(tenant.to_string()));
    }
    let (client_id, client_secret) = (generate_client_id(), generate_client_secret());
    let scopes: Vec<String> = crate::auth::EDGE_CLIENT_SCOPES
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
    let client = StoredClient {
        client_id: client_id.clone(),
        secret_hash: hash_client_secret(&client_secret),
        scopes: scopes.clone(),
        created_at_ms: Timestamp::now().unix_millis(),
    };
    store.put_client(&tenant, &client).await?;
    tracing::info!(%tenant, %client_id, "edge client created");
    Ok(EdgeClient {
        tenant,
        client_id,
        client_secret,
        scopes,
        secret_hash: client.secret_hash,
    })
}

/// Deletes tenant `id` and everything it owns (one store transaction). The default tenant is
/// refused.
pub async fn delete_tenant(store: &Arc<dyn Store>, id: &str) -> Result<(), ProvisionError> {
    let tenant = TenantId::new(id).ok_or_else(|| ProvisionError::NotFound(id.to_owned()))?;
    if tenant.as_str() == TenantId::DEFAULT {
        return Err(ProvisionError::DefaultTenant);
    }
    store
        .delete_tenant(&tenant)
        .await
        .map_err(|err| match err {
            StoreError::NotFound(_) => ProvisionError::NotFound(tenant.to_string()),
            other => other.into(),
        })?;
    tracing::info!(%tenant, "tenant deleted");
    Ok(())
}

/// Checks that `kek` is the key-encryption key the store's signing keys were sealed with (the
/// default tenant's current key opens with it), so that a tenant created outside the server
/// (`netacl tenant create`) is sealed with the key the server will use. `Ok` when there is no
/// sealed key yet to check against.
pub async fn check_secrets_key(store: &Arc<dyn Store>, kek: &Kek) -> Result<(), ProvisionError> {
    let tenant = TenantId::default_tenant();
    let keys = store.signing_keys(&tenant).await?;
    let Some(current) = netacl_store::current_key(&keys) else {
        return Ok(());
    };
    if !netacl_secrets::is_sealed(&current.private_key) {
        return Ok(());
    }
    crate::resources::signing_keys::open_row(&tenant, kek, current)
        .map(|_| ())
        .map_err(|_| {
            ProvisionError::Key(
                "the secrets key does not open the signing keys already in the store: give \
                 the --secrets-key-file the server uses"
                    .into(),
            )
        })
}
