//! netacl-edge: enforcement at the edge (work in progress; see the module docs).
#![deny(missing_docs)]

mod client_addr;
mod decision;
pub mod fingerprint;
mod metrics;
mod path;

pub use client_addr::{
    canonical_ip, ClientAddrResolver, ForwardedHeader, RequestAddrs, TrustedProxies,
    TrustedProxyError,
};
pub use decision::{AclDecision, AclVerdict};
pub use metrics::{EdgeMetrics, RuleStat, RuleTable};
pub use path::normalize_path;
