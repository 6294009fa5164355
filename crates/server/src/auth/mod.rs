//! Authentication of the admin API: RS256 access tokens issued with the OAuth
//! client-credentials grant, and their strict verification on every `/api/v2` route.
//!
//! ```
//! use netacl_server::auth::{
//!     generate_client_id, generate_client_secret, hash_client_secret, AuthorityConfig,
//!     SigningKey, TenantAuthority, TokenRequest,
//! };
//!
//! // Once, at first start: a key and a bootstrap client (the store persists both).
//! let key = SigningKey::generate()?;
//! let (client_id, secret) = (generate_client_id(), generate_client_secret());
//! let authority = TenantAuthority::new(AuthorityConfig::new("localhost:8080"), key, [])?;
//! let bootstrap = authority.management_client(
//!     client_id.clone(),
//!     hash_client_secret(&secret),
//!     netacl_server::auth::MANAGEMENT_SCOPES.iter().copied(),
//! );
//! authority.upsert_client(bootstrap)?;
//!
//! // POST /oauth/token
//! let request = TokenRequest::client_credentials(&client_id, &secret, "https://localhost:8080/api/v2/");
//! let token = authority.issue_client_credentials(&request)?;
//! assert_eq!(token.token_type, "Bearer");
//!
//! // Any /api/v2 request.
//! let principal = authority.verify_bearer(Some(&format!("Bearer {}", token.access_token)))?;
//! assert_eq!(principal.client_id(), client_id);
//! principal.require_any(&["create:network_acls"])?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Design
//!
//! - [`SigningKey`] holds the RSA key (in AWS-LC); its `kid` is the RFC 7638 thumbprint, so a key
//!   reloaded from the store keeps its id. Persisting it is the store's job
//!   ([`SigningKey::to_pem`] / [`SigningKey::from_pem`]).
//! - [`TenantAuthority`] knows the issuer (`https://<domain>/`), the management audience
//!   (`https://<domain>/api/v2/`), the key and the registered [`ClientRecord`]s. It issues
//!   tokens ([`TenantAuthority::issue_client_credentials`], errors as [`OAuthError`]) and
//!   verifies them ([`TenantAuthority::verify_bearer`] / [`TenantAuthority::verify_headers`],
//!   errors as [`AuthError`]).
//! - Verification accepts RS256 only and checks the header itself (`alg`, `kid`, `typ`, no
//!   `crit`) before `jsonwebtoken` checks the signature and the claims; `iss`, `aud`,
//!   `exp`, `nbf` and `iat` are then checked again explicitly with strict types, so a
//!   library default cannot loosen them.
//! - Mounting: merge [`token_router`] at the host root; in front of `/api/v2`, call
//!   `verify_headers`, turn an [`AuthError`] into the error body with
//!   [`AuthError::status`], [`AuthError::error_code`], its message and (on 401)
//!   [`AuthError::www_authenticate`], and check the operation's scope with
//!   [`Principal::require_any`].

mod authority;
mod client;
mod endpoint;
mod key;
pub(crate) mod key_material;
pub(crate) mod operator_token;
mod scopes;
mod verify;

pub use authority::{
    AuthorityConfig, AuthorityConfigError, KeyRing, OAuthError, TenantAuthority, TokenRequest,
    TokenResponse, CLIENT_CREDENTIALS, DEFAULT_LEEWAY_SECS, DEFAULT_TOKEN_LIFETIME_SECS,
    MAX_LEEWAY_SECS, MAX_TOKEN_LIFETIME_SECS,
};
pub use client::{
    generate_client_id, generate_client_secret, hash_client_secret, verify_client_secret,
    ClientRecord,
};
pub use endpoint::{jwks_endpoint, token_endpoint, token_router, MAX_TOKEN_BODY_BYTES};
pub use key::{KeyError, SigningKey, GENERATED_KEY_BITS, MAX_KEY_BITS, MIN_KEY_BITS};
pub use scopes::{
    bootstrap_scopes, is_bootstrap, is_management_scope, with_added_scopes, ADDED_SCOPES,
    EDGE_CLIENT_SCOPES, KEY_MATERIAL_SCOPE, MANAGEMENT_SCOPES,
};
pub use verify::{AuthError, Principal};
