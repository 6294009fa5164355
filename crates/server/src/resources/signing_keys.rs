//! The tenant's signing keys: sealed at rest, rotated and revoked through
//! `/api/v2/keys/signing`, reloaded when another node changes them.
//!
//! - **At rest** every private key is sealed with the key-encryption key
//!   ([`netacl_secrets::Kek`], `--secrets-key-file`), bound to its tenant, its purpose
//!   (`signing_key`) and its kid, so a sealed key copied onto another row does not open. Keys
//!   stored in clear by a version before schema 5 are sealed at the first start with a
//!   key-encryption key (same kid, same JWKS).
//! - **In force** ([`crate::auth::KeyRing`]): the current key and every previous key not
//!   revoked. A rotation makes a new key current; tokens of the previous keys verify until they
//!   expire. A revoked key's tokens are refused from the moment the node reloads its keys: at
//!   once on the node that revoked, on other nodes as soon as they hear the database's
//!   notification (PostgreSQL), and at the latest after [`KEY_REFRESH_INTERVAL`].
//! - **An unknown kid** (a key another node just made current) makes the node reload its keys
//!   before answering, at most once every [`UNKNOWN_KID_RELOAD_INTERVAL`]; other requests with
//!   unknown kids in between are refused without a store query.
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::extract::Path;
use axum::response::Response;
use http::StatusCode;
use netacl_secrets::{Kek, SecretContext};
use netacl_store::{Store, StoreError, StoredSigningKey, TenantId};
use serde_json::{json, Value};

use crate::auth::{KeyError, KeyRing, SigningKey, TenantAuthority};
use crate::http::error::{json_response, ApiError};
use crate::http::guard::{Authorized, CreateSigningKeys, ReadSigningKeys, UpdateSigningKeys};
use crate::AppState;

/// The purpose a signing key is sealed under.
pub const SIGNING_KEY_PURPOSE: &str = "signing_key";

/// How often a node re-reads its signing keys even without a notification.
pub const KEY_REFRESH_INTERVAL: Duration = Duration::from_secs(5);

/// Shortest time between two reloads caused by tokens naming an unknown kid.
pub const UNKNOWN_KID_RELOAD_INTERVAL: Duration = Duration::from_secs(1);

/// Why the signing keys could not be prepared or reloaded.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum KeysError {
    /// The store failed.
    #[error("store: {0}")]
    Store(#[from] StoreError),
    /// A stored key does not open with the key-encryption key (another `--secrets-key-file`?),
    /// or was altered.
    #[error("signing key {kid}: {source}")]
    Sealed {
        /// The key's id.
        kid: String,
        /// What went wrong.
        source: netacl_secrets::SecretsError,
    },
    /// A stored or given key is not a usable RSA key.
    #[error("signing key {kid}: {source}")]
    Key {
        /// The key's id (or `new`).
        kid: String,
        /// What went wrong.
        source: KeyError,
    },
    /// The stored key's kid is not the thumbprint of its key.
    #[error("signing key {kid}: the stored key does not match its kid")]
    KidMismatch {
        /// The stored kid.
        kid: String,
    },
    /// `--signing-key-file` holds a key that was revoked.
    #[error("the signing key given ({kid}) was revoked; it cannot become current again")]
    RevokedKeyGiven {
        /// Its kid.
        kid: String,
    },
    /// The tenant has no current key.
    #[error("the tenant has no current signing key")]
    NoCurrentKey,
    /// A blocking task failed.
    #[error("task: {0}")]
    Task(String),
}

/// The tenant's signing keys on this node: the store rows (public parts, for the API) and the
/// authority's key ring built from them.
pub(crate) struct SigningKeys {
    store: Arc<dyn Store>,
    tenant: TenantId,
    kek: Arc<Kek>,
    authority: Arc<TenantAuthority>,
    domain: String,
    /// The rows the ring was built from (their private key text dropped).
    rows: arc_swap::ArcSwap<Vec<StoredSigningKey>>,
    /// Serialises reloads and local changes.
    reload: tokio::sync::Mutex<()>,
    /// When the last reload caused by an unknown kid began (UNIX ms).
    last_unknown_kid_reload_ms: AtomicU64,
}

impl std::fmt::Debug for SigningKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SigningKeys")
            .field("tenant", &self.tenant)
            .field("kek", &self.kek.id())
            .finish_non_exhaustive()
    }
}

/// What preparing the keys at start did.
pub(crate) struct Prepared {
    pub(crate) keys: Arc<SigningKeys>,
    pub(crate) created: bool,
    pub(crate) sealed: usize,
}

fn context<'a>(tenant: &'a TenantId, kid: &'a str) -> SecretContext<'a> {
    SecretContext::new(tenant.as_str(), SIGNING_KEY_PURPOSE, kid)
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// A new stored row for `key`: sealed, with its certificate.
pub(crate) fn sealed_row(
    tenant: &TenantId,
    kek: &Kek,
    key: &SigningKey,
    domain: &str,
    at_ms: i64,
) -> Result<StoredSigningKey, KeysError> {
    let kid = key.kid().to_owned();
    let key_error = |source| KeysError::Key {
        kid: kid.clone(),
        source,
    };
    let pem = key.to_pem().map_err(key_error)?;
    let sealed = kek
        .seal(&context(tenant, &kid), pem.as_bytes())
        .map_err(|source| KeysError::Sealed {
            kid: kid.clone(),
            source,
        })?;
    let mut row = StoredSigningKey::new(kid.clone(), sealed.into_string(), at_ms);
    row.cert_pem = Some(key.self_signed_certificate(domain).map_err(key_error)?);
    Ok(row)
}

/// Opens a stored row's key.
pub(crate) fn open_row(
    tenant: &TenantId,
    kek: &Kek,
    row: &StoredSigningKey,
) -> Result<SigningKey, KeysError> {
    let secret = kek
        .open(&context(tenant, &row.kid), &row.private_key)
        .map_err(|source| KeysError::Sealed {
            kid: row.kid.clone(),
            source,
        })?;
    let pem = secret.expose_str().ok_or_else(|| KeysError::Key {
        kid: row.kid.clone(),
        source: KeyError::Parse,
    })?;
    let key = SigningKey::from_pem(pem).map_err(|source| KeysError::Key {
        kid: row.kid.clone(),
        source,
    })?;
    if key.kid() != row.kid {
        return Err(KeysError::KidMismatch {
            kid: row.kid.clone(),
        });
    }
    Ok(key)
}

/// The key ring of the rows: the current key and every other key not revoked.
fn build_ring(
    tenant: &TenantId,
    kek: &Kek,
    rows: &[StoredSigningKey],
) -> Result<KeyRing, KeysError> {
    let current = netacl_store::current_key(rows).ok_or(KeysError::NoCurrentKey)?;
    let current_key = Arc::new(open_row(tenant, kek, current)?);
    let mut previous: Vec<&StoredSigningKey> = rows
        .iter()
        .filter(|r| r.kid != current.kid && r.revoked_at_ms.is_none())
        .collect();
    // Most recently current first.
    previous.sort_by_key(|row| std::cmp::Reverse(row.current_until_ms));
    let previous = previous
        .into_iter()
        .map(|row| open_row(tenant, kek, row).map(Arc::new))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(KeyRing::new(current_key, previous))
}

/// What of a row the API may show (no private key text kept in memory beyond the ring).
fn public_rows(rows: Vec<StoredSigningKey>) -> Vec<StoredSigningKey> {
    rows.into_iter()
        .map(|mut row| {
            row.private_key = String::new();
            row
        })
        .collect()
}

fn same_state(a: &[StoredSigningKey], b: &[StoredSigningKey]) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).all(|(a, b)| {
            a.kid == b.kid
                && a.current_since_ms == b.current_since_ms
                && a.current_until_ms == b.current_until_ms
                && a.revoked_at_ms == b.revoked_at_ms
                && a.cert_pem == b.cert_pem
        })
}

impl SigningKeys {
    /// At start: seals keys stored in clear, makes sure a current key exists (generated on first
    /// start), applies `--signing-key-file`, and builds the key ring. The authority is built by
    /// `make_authority` from the current key.
    pub(crate) async fn prepare(
        store: Arc<dyn Store>,
        tenant: TenantId,
        kek: Arc<Kek>,
        domain: String,
        given: Option<Arc<SigningKey>>,
        make_authority: impl FnOnce(SigningKey) -> Result<Arc<TenantAuthority>, crate::StartError>,
    ) -> Result<(Prepared, Arc<TenantAuthority>), crate::StartError> {
        // 1. Keys stored in clear by earlier versions: sealed now, with a certificate.
        let mut sealed = 0;
        for row in store.signing_keys(&tenant).await? {
            if netacl_secrets::is_sealed(&row.private_key) {
                continue;
            }
            let pem = zeroize::Zeroizing::new(row.private_key.clone());
            let key = SigningKey::from_pem(&pem)?;
            if key.kid() != row.kid {
                return Err(KeysError::KidMismatch { kid: row.kid }.into());
            }
            let fresh = sealed_row(&tenant, &kek, &key, &domain, row.created_at_ms)?;
            let cert = fresh.cert_pem.clone().unwrap_or_default();
            if store
                .seal_signing_key(&tenant, &row.kid, &pem, &fresh.private_key, &cert)
                .await?
            {
                sealed += 1;
                tracing::info!(kid = %row.kid, "signing key sealed with the key-encryption key");
            }
        }

        // 2. First start: a key.
        let mut created = false;
        let rows = store.signing_keys(&tenant).await?;
        if netacl_store::current_key(&rows).is_none() {
            let key = match &given {
                Some(given) => Arc::clone(given),
                None => Arc::new(
                    tokio::task::spawn_blocking(SigningKey::generate)
                        .await
                        .map_err(|err| crate::StartError::Task(err.to_string()))??,
                ),
            };
            let row = sealed_row(&tenant, &kek, &key, &domain, now_ms())?;
            // Nodes sharing a database that start together: one key wins, all use it.
            let chosen = store.ensure_signing_key(&tenant, &row).await?;
            created = chosen.kid == row.kid;
        }

        // 3. A key brought by the operator becomes current (a no-op when it is already).
        if let Some(given) = &given {
            let rows = store.signing_keys(&tenant).await?;
            let current = netacl_store::current_key(&rows).ok_or(KeysError::NoCurrentKey)?;
            if current.kid != given.kid() {
                if rows
                    .iter()
                    .any(|r| r.kid == given.kid() && r.revoked_at_ms.is_some())
                {
                    return Err(KeysError::RevokedKeyGiven {
                        kid: given.kid().to_owned(),
                    }
                    .into());
                }
                let at = now_ms();
                let row = sealed_row(&tenant, &kek, given, &domain, at)?;
                store
                    .rotate_signing_key(&tenant, &current.kid, &row, at)
                    .await?;
                tracing::info!(kid = %given.kid(), previous = %current.kid, "the signing key given became current");
            }
        }

        // 4. The ring.
        let rows = store.signing_keys(&tenant).await?;
        let ring = build_ring(&tenant, &kek, &rows)?;
        let current = netacl_store::current_key(&rows).ok_or(KeysError::NoCurrentKey)?;
        let current_key = open_row(&tenant, &kek, current)?;
        let authority = make_authority(current_key)?;
        authority.install_keys(ring);
        let keys = Arc::new(SigningKeys {
            store,
            tenant,
            kek,
            authority: Arc::clone(&authority),
            domain,
            rows: arc_swap::ArcSwap::from_pointee(public_rows(rows)),
            reload: tokio::sync::Mutex::new(()),
            last_unknown_kid_reload_ms: AtomicU64::new(0),
        });
        Ok((
            Prepared {
                keys,
                created,
                sealed,
            },
            authority,
        ))
    }

    /// Re-reads the keys and, when they changed, installs the new ring (at once: a revoked
    /// key's tokens stop verifying on return).
    pub(crate) async fn reload(&self) -> Result<bool, KeysError> {
        let _serial = self.reload.lock().await;
        self.reload_locked().await
    }

    async fn reload_locked(&self) -> Result<bool, KeysError> {
        let rows = self.store.signing_keys(&self.tenant).await?;
        if same_state(&rows, &self.rows.load()) {
            return Ok(false);
        }
        // Opening keys (RSA parsing) is CPU work: off the async workers.
        let (tenant, kek, rows) = (self.tenant.clone(), Arc::clone(&self.kek), rows);
        let (ring, rows) = tokio::task::spawn_blocking(move || {
            build_ring(&tenant, &kek, &rows).map(|ring| (ring, rows))
        })
        .await
        .map_err(|err| KeysError::Task(err.to_string()))??;
        self.authority.install_keys(ring);
        self.rows.store(Arc::new(public_rows(rows)));
        tracing::info!("signing keys reloaded");
        Ok(true)
    }

    /// A reload for a token naming a kid not in force, if none was made in the last
    /// [`UNKNOWN_KID_RELOAD_INTERVAL`]. Returns whether the keys were read (the ring in force
    /// is then the database's, whoever installed it).
    pub(crate) async fn reload_for_unknown_kid(&self) -> bool {
        let now = now_ms().max(0) as u64;
        let last = self.last_unknown_kid_reload_ms.load(Ordering::Acquire);
        let interval = UNKNOWN_KID_RELOAD_INTERVAL.as_millis() as u64;
        if now.saturating_sub(last) < interval
            || self
                .last_unknown_kid_reload_ms
                .compare_exchange(last, now, Ordering::AcqRel, Ordering::Acquire)
                .is_err()
        {
            return false;
        }
        match self.reload().await {
            Ok(_) => true,
            Err(err) => {
                tracing::warn!(error = %err, "cannot reload signing keys");
                false
            }
        }
    }

    fn rows(&self) -> Arc<Vec<StoredSigningKey>> {
        self.rows.load_full()
    }

    /// Rotation: a new key becomes current.
    async fn rotate(&self) -> Result<StoredSigningKey, ApiError> {
        let key = tokio::task::spawn_blocking(SigningKey::generate)
            .await
            .map_err(|_| ApiError::internal())?
            .map_err(|err| {
                tracing::error!(error = %err, "signing key generation failed");
                ApiError::internal()
            })?;
        let _serial = self.reload.lock().await;
        // The current key as the database has it (another node may have rotated).
        let rows = self.store.signing_keys(&self.tenant).await?;
        let current = netacl_store::current_key(&rows)
            .map(|r| r.kid.clone())
            .ok_or_else(ApiError::internal)?;
        let at = now_ms();
        let row = sealed_row(&self.tenant, &self.kek, &key, &self.domain, at).map_err(|err| {
            tracing::error!(error = %err, "signing key sealing failed");
            ApiError::internal()
        })?;
        self.store
            .rotate_signing_key(&self.tenant, &current, &row, at)
            .await
            .map_err(key_store_error)?;
        self.reload_locked().await.map_err(|err| {
            tracing::error!(error = %err, "signing keys reload failed");
            ApiError::internal()
        })?;
        tracing::info!(kid = %key.kid(), previous = %current, "signing key rotated");
        let rows = self.rows();
        rows.iter()
            .find(|r| r.kid == key.kid())
            .cloned()
            .ok_or_else(ApiError::internal)
    }

    /// Revocation of a key that is not the current one.
    async fn revoke(&self, kid: &str) -> Result<StoredSigningKey, ApiError> {
        let _serial = self.reload.lock().await;
        let row = self
            .store
            .revoke_signing_key(&self.tenant, kid, now_ms())
            .await
            .map_err(key_store_error)?;
        self.reload_locked().await.map_err(|err| {
            tracing::error!(error = %err, "signing keys reload failed");
            ApiError::internal()
        })?;
        tracing::info!(%kid, "signing key revoked");
        Ok(row)
    }
}

fn key_store_error(err: StoreError) -> ApiError {
    match err {
        StoreError::NotFound(_) => no_such_key(),
        StoreError::KeyConflict(message) if message.contains("cannot be revoked") => ApiError::new(
            StatusCode::BAD_REQUEST,
            Some("invalid_request"),
            "The current signing key cannot be revoked; rotate first.",
        ),
        StoreError::KeyConflict(_) => ApiError::new(
            StatusCode::CONFLICT,
            Some("conflict"),
            "The signing keys changed concurrently; retry.",
        ),
        other => other.into(),
    }
}

fn no_such_key() -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        Some("inexistent_signing_key"),
        "The signing key does not exist.",
    )
}

fn iso(ms: Option<i64>) -> Option<String> {
    ms.map(|ms| netacl_model::Timestamp::from_unix_millis(ms).to_string())
}

/// Auth0's colon-separated upper-case SHA-1 of the certificate's DER, and the same without
/// colons.
fn fingerprints(cert_pem: &str) -> (String, String) {
    use rustls_pki_types::pem::PemObject;
    let der = rustls_pki_types::CertificateDer::from_pem_slice(cert_pem.as_bytes())
        .map(|d| d.to_vec())
        .unwrap_or_default();
    let digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA1_FOR_LEGACY_USE_ONLY, &der);
    let hex: Vec<String> = digest.as_ref().iter().map(|b| format!("{b:02X}")).collect();
    (hex.join(":"), hex.concat())
}

/// The public record of a key, as the public API has it (never any private material).
fn record(row: &StoredSigningKey, current_kid: Option<&str>) -> Value {
    let cert = row.cert_pem.clone().unwrap_or_default();
    let (fingerprint, thumbprint) = fingerprints(&cert);
    let current = current_kid == Some(row.kid.as_str());
    let revoked = row.revoked_at_ms.is_some();
    let mut out = json!({
        "kid": row.kid,
        "cert": cert,
        "fingerprint": fingerprint,
        "thumbprint": thumbprint,
        "current": current,
        "next": false,
        "previous": !current && !revoked && row.current_since_ms.is_some(),
        "revoked": revoked,
    });
    if let Some(object) = out.as_object_mut() {
        for (name, value) in [
            ("current_since", iso(row.current_since_ms)),
            ("current_until", iso(row.current_until_ms)),
            ("revoked_at", iso(row.revoked_at_ms)),
        ] {
            if let Some(value) = value {
                object.insert(name.into(), value.into());
            }
        }
    }
    out
}

fn keys_of(state: &AppState) -> &Arc<SigningKeys> {
    &state.inner.signing_keys
}

/// `GET /api/v2/keys/signing`: every key, newest first.
pub(crate) async fn list(state: AppState, _auth: Authorized<ReadSigningKeys>) -> Response {
    let rows = keys_of(&state).rows();
    let current = netacl_store::current_key(&rows).map(|r| r.kid.clone());
    let mut records: Vec<&StoredSigningKey> = rows.iter().collect();
    records.sort_by(|a, b| (b.created_at_ms, &b.kid).cmp(&(a.created_at_ms, &a.kid)));
    let body: Vec<Value> = records
        .into_iter()
        .map(|r| record(r, current.as_deref()))
        .collect();
    json_response(StatusCode::OK, &Value::Array(body))
}

/// `GET /api/v2/keys/signing/{kid}`.
pub(crate) async fn get(
    state: AppState,
    _auth: Authorized<ReadSigningKeys>,
    Path(kid): Path<String>,
) -> Result<Response, ApiError> {
    let rows = keys_of(&state).rows();
    let current = netacl_store::current_key(&rows).map(|r| r.kid.clone());
    let row = rows.iter().find(|r| r.kid == kid).ok_or_else(no_such_key)?;
    Ok(json_response(
        StatusCode::OK,
        &record(row, current.as_deref()),
    ))
}

/// `POST /api/v2/keys/signing/rotate`: `201 {"cert", "kid"}` of the new current key.
pub(crate) async fn rotate(
    state: AppState,
    _auth: Authorized<CreateSigningKeys>,
) -> Result<Response, ApiError> {
    let row = keys_of(&state).rotate().await?;
    Ok(json_response(
        StatusCode::CREATED,
        &json!({"cert": row.cert_pem.unwrap_or_default(), "kid": row.kid}),
    ))
}

/// `PUT /api/v2/keys/signing/{kid}/revoke`: `200 {"cert", "kid"}`.
pub(crate) async fn revoke(
    state: AppState,
    _auth: Authorized<UpdateSigningKeys>,
    Path(kid): Path<String>,
) -> Result<Response, ApiError> {
    let row = keys_of(&state).revoke(&kid).await?;
    Ok(json_response(
        StatusCode::OK,
        &json!({"cert": row.cert_pem.unwrap_or_default(), "kid": row.kid}),
    ))
}

/// The success schemas of the four operations, for the OpenAPI document.
pub(crate) fn success_schema(operation_id: &str) -> Option<Value> {
    let date = json!({"type": "string", "format": "date-time"});
    let record = json!({
        "type": "object",
        "required": ["kid", "cert", "fingerprint", "thumbprint", "current", "next", "previous", "revoked"],
        "additionalProperties": false,
        "properties": {
            "kid": {"type": "string"},
            "cert": {"type": "string", "description": "Self-signed X.509 certificate of the public key (PEM)."},
            "fingerprint": {"type": "string", "description": "SHA-1 of the certificate, colon-separated upper-case hex."},
            "thumbprint": {"type": "string", "description": "SHA-1 of the certificate, upper-case hex."},
            "current": {"type": "boolean"},
            "next": {"type": "boolean", "description": "Always false: netacl does not pre-publish a next key."},
            "previous": {"type": "boolean"},
            "revoked": {"type": "boolean"},
            "current_since": date,
            "current_until": date,
            "revoked_at": date
        }
    });
    let short = json!({
        "type": "object", "required": ["cert", "kid"], "additionalProperties": false,
        "properties": {"cert": {"type": "string"}, "kid": {"type": "string"}}
    });
    match operation_id {
        "get_signing_keys" => Some(json!({"type": "array", "items": record})),
        "get_signing_key" => Some(record),
        "post_signing_keys" | "put_signing_keys" => Some(short),
        _ => None,
    }
}

/// The `{kid}` path parameter.
pub(crate) fn path_parameters(path: &str) -> Option<Vec<Value>> {
    path.starts_with("/api/v2/keys/signing/{kid}").then(|| {
        vec![json!({
            "name": "kid", "in": "path", "required": true,
            "description": "The key id.",
            "schema": {"type": "string"}
        })]
    })
}
