//! The one error-to-response type of the admin API.
use axum::response::{IntoResponse, Response};
use http::header::{CONTENT_TYPE, WWW_AUTHENTICATE};
use http::{HeaderValue, StatusCode};
use netacl_model::ValidationError;
use netacl_store::StoreError;

use crate::auth::AuthError;
use crate::tenant::WriteError;

/// `Content-Type` of every JSON answer.
pub const JSON_UTF8: &str = "application/json; charset=utf-8";

/// An error answer: `{"statusCode", "error", "message", "errorCode"}` with the status, and
/// `WWW-Authenticate` on a 401/403 from the verifier. Internal details are logged where the error
/// arises, never sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    status: StatusCode,
    message: String,
    error_code: Option<&'static str>,
    www_authenticate: Option<HeaderValue>,
    retry_after_secs: Option<u64>,
}

impl ApiError {
    /// An error with a status, a public message and an `errorCode`.
    pub fn new(
        status: StatusCode,
        error_code: Option<&'static str>,
        message: impl Into<String>,
    ) -> Self {
        Self {
            status,
            message: message.into(),
            error_code,
            www_authenticate: None,
            retry_after_secs: None,
        }
    }

    /// With a `WWW-Authenticate` header (a 401 of the operator API).
    pub(crate) fn with_www_authenticate(mut self, value: &'static str) -> Self {
        self.www_authenticate = Some(HeaderValue::from_static(value));
        self
    }

    /// With a `Retry-After` header (a 429 for too many expensive requests at once).
    pub(crate) fn with_retry_after(mut self, secs: u64) -> Self {
        self.retry_after_secs = Some(secs);
        self
    }

    /// 400 `invalid_body` with the model's property-path message.
    pub fn invalid_body(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, Some("invalid_body"), message)
    }

    /// 400 `invalid_body` for a body that is not even well-formed.
    pub fn malformed_body(reason: impl std::fmt::Display) -> Self {
        Self::invalid_body(format!("Payload validation error: '{reason}'."))
    }

    /// 400 `invalid_query_string`.
    pub fn invalid_query(reason: impl std::fmt::Display, property: Option<&str>) -> Self {
        let message = match property {
            Some(property) => {
                format!("Query validation error: '{reason}' on property {property}.")
            }
            None => format!("Query validation error: '{reason}'."),
        };
        Self::new(
            StatusCode::BAD_REQUEST,
            Some("invalid_query_string"),
            message,
        )
    }

    /// 400 `invalid_uri` for a malformed path parameter.
    pub fn invalid_uri(reason: impl std::fmt::Display, property: &str) -> Self {
        Self::new(
            StatusCode::BAD_REQUEST,
            Some("invalid_uri"),
            format!("Path validation error: '{reason}' on property {property}."),
        )
    }

    /// 404 `inexistent_network_acl`.
    pub fn no_such_network_acl() -> Self {
        Self::new(
            StatusCode::NOT_FOUND,
            Some("inexistent_network_acl"),
            "The network ACL does not exist.",
        )
    }

    /// 404 `inexistent_organization`.
    pub fn no_such_organization() -> Self {
        Self::new(
            StatusCode::NOT_FOUND,
            Some("inexistent_organization"),
            "The organization does not exist.",
        )
    }

    /// 404 `inexistent_managed_list`: not one of the managed list names, or (for a delete) a
    /// list without stored content.
    pub fn no_such_managed_list(name: impl std::fmt::Display) -> Self {
        Self::new(
            StatusCode::NOT_FOUND,
            Some("inexistent_managed_list"),
            format!("The managed list {name} does not exist or has no stored content."),
        )
    }

    /// 409: the managed list is given by a file of this node and read-only through the API.
    pub fn list_from_file(name: impl std::fmt::Display) -> Self {
        Self::new(
            StatusCode::CONFLICT,
            Some("conflict"),
            format!(
                "The managed list {name} is supplied by a file on this node (--managed-list) \
                 and is read-only through the API."
            ),
        )
    }

    /// 404 `inexistent_network_acl_key`.
    pub fn no_such_network_acl_key() -> Self {
        Self::new(
            StatusCode::NOT_FOUND,
            Some("inexistent_network_acl_key"),
            "The network ACL key does not exist.",
        )
    }

    /// 409: another key of the tenant has this name.
    pub fn key_name_taken() -> Self {
        Self::new(
            StatusCode::CONFLICT,
            Some("conflict"),
            "A network ACL key with this name already exists.",
        )
    }

    /// 409: rules still name the key.
    pub fn key_in_use(rules: &[String]) -> Self {
        Self::new(
            StatusCode::CONFLICT,
            Some("conflict"),
            format!(
                "The network ACL key is referenced by network ACLs ({}); remove the references first.",
                rules.join(", ")
            ),
        )
    }

    /// 421 for a host no tenant is served on (one fixed body, whatever the host).
    pub fn unknown_host() -> Self {
        Self::new(
            StatusCode::MISDIRECTED_REQUEST,
            Some("unknown_host"),
            "This host is not served here.",
        )
    }

    /// 421 for a request naming more than one host: two `Host` headers, or a `Host` and a URI
    /// authority (absolute-form target, HTTP/2 `:authority`) naming different hosts. A proxy
    /// in front could route by the other one: neither is taken.
    pub fn ambiguous_host() -> Self {
        Self::new(
            StatusCode::MISDIRECTED_REQUEST,
            Some("ambiguous_host"),
            "The request names more than one host.",
        )
    }

    /// 400 for a `Host` (or `:authority`) that is not a host name.
    pub fn malformed_host() -> Self {
        Self::new(
            StatusCode::BAD_REQUEST,
            Some("malformed_host"),
            "The request's host is not a valid host name.",
        )
    }

    /// 404 for a path no route serves.
    pub fn no_such_route() -> Self {
        Self::new(StatusCode::NOT_FOUND, None, "Not Found")
    }

    /// 405 for a method the path does not take.
    pub fn method_not_allowed() -> Self {
        Self::new(StatusCode::METHOD_NOT_ALLOWED, None, "Method Not Allowed")
    }

    /// 409 for a priority another network ACL holds.
    pub fn priority_taken(priority: u8) -> Self {
        Self::new(
            StatusCode::CONFLICT,
            Some("conflict"),
            format!("A network ACL with priority {priority} already exists."),
        )
    }

    /// 413 for a body over the configured limit.
    pub fn body_too_large(limit: usize) -> Self {
        Self::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            Some("payload_too_large"),
            format!("Request body is larger than {limit} bytes."),
        )
    }

    /// 415 for a body that is neither JSON nor a form.
    pub fn unsupported_media_type(content_type: &str) -> Self {
        Self::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            Some("unsupported_media_type"),
            format!(
                "Content-Type {content_type:?} is not supported; send application/json or \
                 application/x-www-form-urlencoded."
            ),
        )
    }

    /// 429 `too_many_requests`.
    pub fn too_many_requests() -> Self {
        Self::new(
            StatusCode::TOO_MANY_REQUESTS,
            Some("too_many_requests"),
            "Global limit has been reached",
        )
    }

    /// 503 when the database cannot take the request; clients retry.
    pub fn unavailable() -> Self {
        Self::new(
            StatusCode::SERVICE_UNAVAILABLE,
            Some("temporarily_unavailable"),
            "The service is temporarily unavailable; retry.",
        )
    }

    /// 500 with no detail (the cause is logged by the caller).
    pub fn internal() -> Self {
        Self::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            None,
            "Internal Server Error",
        )
    }

    /// The status.
    pub fn status(&self) -> StatusCode {
        self.status
    }

    /// The `errorCode`, if any.
    pub fn error_code(&self) -> Option<&'static str> {
        self.error_code
    }

    /// The public message.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The error body.
    pub fn body(&self) -> serde_json::Value {
        let mut body = serde_json::json!({
            "statusCode": self.status.as_u16(),
            "error": self.status.canonical_reason().unwrap_or("Error"),
            "message": self.message,
        });
        if let (Some(code), Some(object)) = (self.error_code, body.as_object_mut()) {
            object.insert("errorCode".into(), code.into());
        }
        body
    }
}

impl From<ValidationError> for ApiError {
    fn from(err: ValidationError) -> Self {
        ApiError::invalid_body(err.to_string())
    }
}

impl From<AuthError> for ApiError {
    fn from(err: AuthError) -> Self {
        let mut api = ApiError::new(err.status(), err.error_code(), err.message());
        api.www_authenticate = Some(err.www_authenticate());
        api
    }
}

impl From<StoreError> for ApiError {
    fn from(err: StoreError) -> Self {
        match err {
            StoreError::PriorityTaken(priority) => ApiError::priority_taken(priority.get()),
            StoreError::NotFound(_) => ApiError::no_such_network_acl(),
            StoreError::VersionConflict { .. } | StoreError::DuplicateId(_) => ApiError::new(
                StatusCode::CONFLICT,
                Some("conflict"),
                "The network ACLs changed concurrently; retry.",
            ),
            StoreError::UnknownOrganization(_) => ApiError::no_such_organization(),
            StoreError::ConnectionNotInOrganization(_) => ApiError::new(
                StatusCode::NOT_FOUND,
                Some("inexistent_connection"),
                "The connection is not a connection of the organization.",
            ),
            StoreError::ConnectionAlreadyInOrganization(_) => ApiError::new(
                StatusCode::CONFLICT,
                Some("conflict"),
                "The connection is already a connection of the organization.",
            ),
            StoreError::Unavailable(_) => {
                tracing::error!(error = %err, "store unavailable");
                ApiError::unavailable()
            }
            other => {
                tracing::error!(error = %other, "store error");
                ApiError::internal()
            }
        }
    }
}

impl ApiError {
    /// 404 `inexistent_version`: never recorded, removed by retention, or not reached yet.
    pub(crate) fn no_such_version() -> Self {
        Self::new(
            StatusCode::NOT_FOUND,
            Some("inexistent_version"),
            "The version does not exist or is no longer kept.",
        )
    }
}

/// The write path's errors, each to one answer.
impl From<WriteError> for ApiError {
    fn from(err: WriteError) -> Self {
        match err {
            WriteError::Invalid(err) => err.into(),
            WriteError::Uncompilable(err) => ApiError::invalid_body(format!(
                "Payload validation error: 'The rule set cannot be compiled: {err}'."
            )),
            WriteError::NoSuchNetworkAcl => ApiError::no_such_network_acl(),
            WriteError::PriorityTaken(priority) => ApiError::priority_taken(priority),
            WriteError::ListFromFile(name) => ApiError::list_from_file(name),
            WriteError::NoSuchManagedList(name) => ApiError::no_such_managed_list(name),
            WriteError::KeyNameTaken => ApiError::key_name_taken(),
            WriteError::NoSuchKey => ApiError::no_such_network_acl_key(),
            WriteError::KeyInUse(rules) => ApiError::key_in_use(&rules),
            WriteError::StaleVersion { expected, actual } => ApiError::new(
                StatusCode::CONFLICT,
                Some("conflict"),
                format!(
                    "The network ACLs are at version {actual}, not the expected_version \
                     {expected}; review the changes since and retry."
                ),
            ),
            WriteError::NoSuchVersion => ApiError::no_such_version(),
            WriteError::NotRestorable {
                version,
                acl,
                reason,
            } => ApiError::new(
                StatusCode::CONFLICT,
                Some("conflict"),
                format!(
                    "Version {version} cannot be restored: network ACL {acl}: {}",
                    ApiError::from(*reason).message()
                ),
            ),
            WriteError::Store(err) => err.into(),
            WriteError::Unavailable => ApiError::unavailable(),
            WriteError::Internal => ApiError::internal(),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut response = (self.status, self.body().to_string()).into_response();
        let headers = response.headers_mut();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static(JSON_UTF8));
        if let Some(value) = self.www_authenticate {
            headers.insert(WWW_AUTHENTICATE, value);
        }
        if let Some(secs) = self.retry_after_secs {
            headers.insert(http::header::RETRY_AFTER, HeaderValue::from(secs));
        }
        response
    }
}

/// A JSON answer already written, with the admin API's content type.
pub(crate) fn json_text_response(status: StatusCode, text: Vec<u8>) -> Response {
    let mut response = (status, text).into_response();
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(JSON_UTF8));
    response
}

/// A JSON answer with the admin API's content type.
pub(crate) fn json_response(status: StatusCode, body: &serde_json::Value) -> Response {
    let mut response = (status, body.to_string()).into_response();
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(JSON_UTF8));
    response
}

/// The answer to a handler that panicked (the panic guard, outermost in
/// [`AdminService::router`](crate::AdminService::router)): 500 in the error shape, without
/// detail; the panic's message is logged. The default panic hook has printed it already, with
/// its location; this event ties it to the answer.
pub(crate) fn panic_response(panic: Box<dyn std::any::Any + Send + 'static>) -> Response {
    let message = panic
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("(not a string)");
    tracing::error!(panic = message, "a handler panicked; answered 500");
    ApiError::internal().into_response()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tenant::WriteError;
    use netacl_model::{AclId, ManagedListName, ValidationError};
    use netacl_store::StoreError;

    /// `is_conflict` (after which the write path catches up with the store and tries once more)
    /// holds for exactly the errors the admin API answers with 409.
    #[test]
    fn conflicts_are_exactly_the_errors_answered_with_409() {
        let invalid = || WriteError::Invalid(ValidationError::new("rule", "bad"));
        let errors = vec![
            invalid(),
            WriteError::NoSuchNetworkAcl,
            WriteError::PriorityTaken(3),
            WriteError::ListFromFile(ManagedListName::Tor),
            WriteError::NoSuchManagedList(ManagedListName::Tor),
            WriteError::KeyNameTaken,
            WriteError::NoSuchKey,
            WriteError::KeyInUse(vec!["acl_1".into()]),
            WriteError::StaleVersion {
                expected: 1,
                actual: 2,
            },
            WriteError::NoSuchVersion,
            WriteError::NotRestorable {
                version: 1,
                acl: AclId::from_random(1),
                reason: Box::new(invalid()),
            },
            WriteError::Store(StoreError::DuplicateId(AclId::from_random(2))),
            WriteError::Store(StoreError::ConnectionAlreadyInOrganization("c".into())),
            WriteError::Store(StoreError::NotFound("x".into())),
            WriteError::Store(StoreError::NameTaken("k".into())),
            WriteError::Unavailable,
            WriteError::Internal,
        ];
        for err in errors {
            let text = err.to_string();
            let conflict = err.is_conflict();
            let status = ApiError::from(err).status();
            assert_eq!(conflict, status == StatusCode::CONFLICT, "{text}: {status}");
        }
    }
}
