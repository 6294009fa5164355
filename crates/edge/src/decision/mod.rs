//! The decision the edge acted on, as it is logged, counted and attached to requests.
//!
//! `connection_rules`: the part of a rule set that can decide before a request is read.
pub(crate) mod connection_rules;

use std::net::IpAddr;
use std::sync::Arc;

use netacl_model::{AclId, RequestScope};

/// What the edge did with a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum AclVerdict {
    /// No rule decided; the request passed.
    None,
    /// An `allow` rule decided; the request passed.
    Allow,
    /// A `block` rule decided; the edge answered 403.
    Block,
    /// A `redirect` rule decided; the edge answered 302.
    Redirect,
    /// The request path is refused before any rule (a malformed percent-escape, a backslash, or
    /// a path servers would route to different scopes: see
    /// [`scope_of_path`](crate::scope_of_path)); the edge answered 400.
    InvalidPath,
    /// Multi-tenant mode: the request's host is no tenant's, or its TLS SNI and its HTTP host
    /// name different tenants; the edge answered 421.
    Misdirected,
}

impl AclVerdict {
    /// `none`, `allow`, `block`, `redirect`, `invalid_path` or `misdirected`.
    pub fn as_str(self) -> &'static str {
        match self {
            AclVerdict::None => "none",
            AclVerdict::Allow => "allow",
            AclVerdict::Block => "block",
            AclVerdict::Redirect => "redirect",
            AclVerdict::InvalidPath => "invalid_path",
            AclVerdict::Misdirected => "misdirected",
        }
    }
}

/// The decision about one request, as the edge acted on it. Inserted into the request's
/// extensions (for the service behind the layer) and the response's (for access logs).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct AclDecision {
    /// What was done.
    pub verdict: AclVerdict,
    /// The deciding rule.
    pub rule_id: Option<AclId>,
    /// Monitoring-mode (`log`) rules that matched, in evaluation order.
    pub monitored: Vec<AclId>,
    /// Where a redirect sends the client (shared with the policy that decided).
    pub redirect_uri: Option<Arc<str>>,
    /// The rule-set version the decision was made against.
    pub version: u64,
    /// The request's scope (from its path, see [`scope_of_path`](crate::scope_of_path));
    /// `authentication` for a refused path.
    pub scope: RequestScope,
    /// The client address used (absent when the request carried no
    /// [`ConnectionInfo`](crate::ConnectionInfo)).
    pub client_ip: Option<IpAddr>,
}
