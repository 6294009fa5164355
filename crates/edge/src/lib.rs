//! netacl-edge: enforcement at the edge (work in progress; see the module docs).
#![deny(missing_docs)]

mod client_addr;
pub mod fingerprint;
mod path;

pub use client_addr::{
    canonical_ip, ClientAddrResolver, ForwardedHeader, RequestAddrs, TrustedProxies,
    TrustedProxyError,
};
pub use path::normalize_path;
