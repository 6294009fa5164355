//! The HTTP plumbing every resource shares and none owns: the error shape ([`error::ApiError`]),
//! request bodies and forms read by a shape the resource gives, query strings, paging and
//! cursors, the guard in front of authenticated routes (token, scope, rate limit), the request
//! id, integral numbers in JSON bodies, and the gate of expensive requests.
pub(crate) mod body;
pub(crate) mod cursor;
pub(crate) mod error;
pub(crate) mod guard;
pub(crate) mod integral_numbers;
pub(crate) mod paging;
pub(crate) mod query;
pub mod rate_limit;
pub(crate) mod request_context;
pub(crate) mod work;
