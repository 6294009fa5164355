//! In front of every authenticated route: verify the bearer token, take one request from the
//! caller's rate-limit bucket (keyed by client id, or by peer address without a valid token),
//! and stamp the rate-limit headers on whatever the route answers. The operation's scope is
//! checked by the [`Authorized`] extractor of each handler.
use std::marker::PhantomData;
use std::net::SocketAddr;

use axum::extract::{ConnectInfo, FromRequestParts, Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http::request::Parts;

use crate::auth::{AuthError, Principal};
use crate::error::ApiError;
use crate::AppState;

/// The middleware (see the module docs).
pub(crate) async fn guard(
    State(state): State<AppState>,
    mut request: Request,
    next: Next,
) -> Response {
    let verified = state.inner.authority.verify_headers(request.headers());
    let key = match &verified {
        Ok(principal) => format!("client:{}", principal.client_id()),
        Err(_) => match request.extensions().get::<ConnectInfo<SocketAddr>>() {
            Some(ConnectInfo(peer)) => format!("peer:{}", peer.ip()),
            None => "peer:unknown".to_owned(),
        },
    };
    let decision = state.inner.limiter.check(&key);
    let mut response = if !decision.allowed {
        ApiError::too_many_requests().into_response()
    } else {
        match verified {
            Ok(principal) => {
                request.extensions_mut().insert(principal);
                next.run(request).await
            }
            Err(err) => {
                tracing::debug!(error = ?err, "authentication failed");
                ApiError::from(err).into_response()
            }
        }
    };
    decision.apply_headers(response.headers_mut());
    response
}

/// A scope an operation requires.
pub(crate) trait RequiredScope {
    /// The scope, e.g. `read:network_acls`.
    const SCOPE: &'static str;
}

macro_rules! scopes {
    ($($name:ident => $scope:literal),* $(,)?) => {$(
        #[doc = concat!("The `", $scope, "` scope.")]
        pub(crate) struct $name;
        impl RequiredScope for $name {
            const SCOPE: &'static str = $scope;
        }
    )*};
}

scopes! {
    ReadNetworkAcls => "read:network_acls",
    CreateNetworkAcls => "create:network_acls",
    UpdateNetworkAcls => "update:network_acls",
    DeleteNetworkAcls => "delete:network_acls",
    CreateOrganizations => "create:organizations",
    ReadGroupMembers => "read:group_members",
    ReadSessions => "read:sessions",
    ReadBranding => "read:branding",
    UpdateBranding => "update:branding",
    CreateUsers => "create:users",
}

/// Extracts the verified caller and requires scope `S` (403 `insufficient_scope` otherwise).
pub(crate) struct Authorized<S>(PhantomData<S>);

impl<S: RequiredScope, St: Send + Sync> FromRequestParts<St> for Authorized<S> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &St) -> Result<Self, ApiError> {
        let principal = parts
            .extensions
            .get::<Principal>()
            .ok_or(AuthError::MissingAuthentication)?;
        principal.require_any(&[S::SCOPE])?;
        Ok(Self(PhantomData))
    }
}
