//! netacl-edge: enforcing network ACLs where the traffic arrives.
//!
//! The pipeline: a connection ([`ConnectionInfo`]: peer, and under TLS the SNI, JA3 and JA4
//! from its ClientHello) and a request (path, headers) → [`Enforcer::decide`] (client address,
//! normalised path → scope, geo/ASN lookups for the signals the live policy needs, one policy
//! load, one evaluation) → [`AclDecision`] → enforced by [`AclLayer`] (403, 302, or the inner
//! service) and counted in [`EdgeMetrics`].
//!
//! ```
//! use std::sync::Arc;
//! use netacl_edge::{AclVerdict, ClientAddrResolver, ConnectionInfo, Enforcer};
//! use netacl_eval::Engine;
//! use netacl_model::{Limits, RuleSet};
//!
//! let rules = RuleSet::from_json(&serde_json::json!([{
//!     "id": "acl_6dL8L5Vqc1TxxXRuLhzD7c", "description": "no management from this net",
//!     "active": true, "priority": 1,
//!     "rule": {"action": {"block": true}, "scope": "management",
//!              "match": {"ipv4_cidrs": ["192.0.2.0/24"]}},
//!     "created_at": "2026-01-01T00:00:00.000Z", "updated_at": "2026-01-01T00:00:00.000Z"
//! }]), 1, &Limits::default()).unwrap();
//!
//! let enforcer = Enforcer::new(Arc::new(Engine::new()), ClientAddrResolver::default());
//! enforcer.apply_rules(&rules).unwrap();
//!
//! let conn = ConnectionInfo::new("192.0.2.1:50000".parse().unwrap());
//! let headers = http::HeaderMap::new();
//! // `//api/v2/...` is the management scope too: blocked.
//! let decision = enforcer.decide(Some(&conn), "//api/v2/users", None, &headers);
//! assert_eq!(decision.verdict, AclVerdict::Block);
//! assert_eq!(decision.rule_id.unwrap().as_str(), "acl_6dL8L5Vqc1TxxXRuLhzD7c");
//! // Other paths are not in that rule's scope.
//! let decision = enforcer.decide(Some(&conn), "/authorize", None, &headers);
//! assert_eq!(decision.verdict, AclVerdict::None);
//! ```
//!
//! # Where each signal comes from
//!
//! | signal | source |
//! |---|---|
//! | connecting address | the TCP peer |
//! | client address | the peer, or the forwarding header when the peer is a trusted proxy (see [`ClientAddrResolver`]) |
//! | country, subdivision, ASN | the client address in the GeoIP databases ([`geo::GeoEnricher`]), compiled into intervals (the single-tenant policy's own, or one table for every tenant), read only when a live rule names the signal |
//! | JA3, JA4 | the ClientHello the edge read before the handshake ([`fingerprint`]); absent on plain HTTP |
//! | hostname | the TLS SNI; without SNI (plain HTTP, or a TLS client that sent none) the `Host` header (or the HTTP/2 authority), port removed |
//! | user agent | the `User-Agent` header (absent when missing or not visible ASCII) |
//! | scope | the path, by [`scope_of_path`]: its normal form ([`normalize_path`]: escapes of unreserved characters decoded, dot segments removed as RFC 3986 and WHATWG remove them), checked against the readings of servers that merge `//`, decode `%2F` or strip `;` parameters; a malformed escape, a backslash or an ambiguous path is answered `400` before any rule |
//!
//! A missing signal follows the engine's rule: it matches nothing in `match` and holds in
//! `not_match` (fails closed).
//!
//! # Refusing connections before the TLS handshake
//!
//! The proxy reads the ClientHello itself, then asks [`Enforcer::check_connection`] before
//! handing the bytes to rustls. A connection is refused (closed without a byte of handshake)
//! only when **every** request it could carry would be blocked:
//!
//! - Known at that point: the connecting address, JA3 and JA4 (a plain-HTTP connection has
//!   none, and never will), the hostname when the ClientHello carried SNI, and — when the peer
//!   is not a trusted proxy — the client address and its country, subdivision and ASN.
//! - A rule is *certain* when its scope is `tenant` and every signal its `match` and
//!   `not_match` name is known. Walking the active rules in evaluation order, the check keeps
//!   the certain terminal rules and stops at the first uncertain `allow` or `redirect` (it
//!   might let a request through); uncertain `block` rules are skipped (they only add
//!   blocks, which the request-level check enforces anyway); `log` rules change no decision.
//! - The connection is refused when the kept rules decide `block`. Everything else is decided
//!   per request, as usual.
//!
//! Plain-HTTP connections are not refused this way: a blocked request there gets its `403`,
//! which costs about as much as closing and tells the client what happened.
//! Connection-level rules are derived from the rule set when it is installed
//! ([`Enforcer::apply_rules`], [`Enforcer::observe_rules`]); they are used only while the
//! engine's live version is the one they were derived from.
//!
//! # Rule sources
//!
//! [`run_edge`] takes an [`Engine`](netacl_eval::Engine): shared with `netacl serve` in
//! process ([`RulesSource::Engine`], with [`EdgeConfig::rule_updates`] to follow the rule
//! sets), or fed from a rule file ([`RulesSource::File`]) or a remote admin server's watch
//! long-poll ([`RulesSource::Remote`], over `https://` with the server's certificate verified,
//! or plain `http://` on loopback only unless [`RemoteRules::allow_insecure_http`]). Both keep
//! the last good rules on any error. The
//! managed lists (`auth0_managed`) of the policy come from the admin server with the rules
//! (the watch carries them when the edge asks) and from the edge's own files
//! ([`EdgeConfig::managed_lists`], reloaded through [`PolicySources`]), which win for their
//! names; see [`PolicySources`].
//!
//! # Many tenants
//!
//! With [`EdgeConfig::tenants`] (a [`TenantRouter`]) one edge enforces many tenants: the TLS
//! SNI, or over plain HTTP the `Host` header (or HTTP/2 authority), picks the tenant whose own
//! engine decides ([`Enforcer::with_tenants`]). Names are compared without ASCII case, port and
//! one trailing dot removed. A request is [`AclVerdict::Misdirected`] (421,
//! [`MISDIRECTED_BODY`]) when its host is no tenant's, when SNI and host name different tenants
//! (domain fronting), or when TLS came without SNI for a host that has a certificate of its own
//! ([`SniCertificates`], [`EdgeConfig::tls_cert_dir`]: the certificate is chosen by SNI; an SNI
//! without one gets the default pair, or no handshake). The connection-level check uses the
//! SNI's tenant. Selection takes no lock and allocates nothing; changes come in batches
//! ([`TenantRouter::apply`]) that compile only the tenants they name.
//!
//! Each tenant's decisions are counted per rule in its own table ([`TenantRuleCounts`], striped,
//! sized by its rules, no lock or allocation per request) and reported every summary interval
//! to that tenant's log ([`EdgeConfig::tenant_summary_sink`] in process, or the platform's
//! operator API with [`EdgeConfig::platform`]); one [`TrafficSample`] ring holds every tenant's
//! sampled requests, each slot keyed by its tenant ([`TrafficSample::requests_of`]).
//!
//! With GeoIP databases ([`EdgeConfig::geoip_city`], [`EdgeConfig::geoip_asn`]) every tenant's
//! country, subdivision and ASN conditions are answered from one table of every network's
//! answer, for every value the databases hold ([`geo::SharedGeoTable`], a
//! [`netacl_eval::GeoTable`]): built from the databases alone when the edge starts and again
//! when a database is reloaded, off the request path, and swapped whole. A request reads one
//! table snapshot (its blocks prefetched as soon as the client address is known, while the
//! tenant is selected) and gives its address's values to its tenant's policy, which answers
//! them with the indexes it holds for the values its rules list, as for values given in a
//! request. No tenant holds anything for the table, so a rule change compiles that tenant's
//! rules alone and any table snapshot goes with any policy snapshot. No tree walk and no
//! per-address cache on the request path; until a first table is built (the databases could
//! not be walked) addresses are looked up in the databases directly.
//!
//! # TLS
//!
//! The TLS listener's certificate ([`EdgeConfig::tls`]) is reloaded when its files are replaced
//! ([`EdgeConfig::tls_reload_interval`]); an `https://` upstream is verified against
//! [`EdgeConfig::upstream_trust`] and spoken to over HTTP/2 when it selects `h2` by ALPN;
//! WebSocket upgrades pass through (see the proxy's module docs for the details). Certificate
//! loading and trust come from `netacl-tls`.
//!
//! # Untrusted input
//!
//! Everything a request carries is the client's to choose. The two parsers the edge runs on it
//! per request are public, so that a fuzzer calls exactly what the edge runs:
//!
//! - [`forwarded_client`]: the forwarding-header walk over raw header lines (the rules are on
//!   [`ClientAddrResolver`]). Never panics, never allocates; the answer is the peer, an address
//!   written in the lines, or `None` (unknown). Whatever bytes precede the entry a trusted proxy
//!   appends to a line, that entry decides.
//! - [`normalize_path`] and [`scope_of_path`]: a path's normal form and its scope (or why it is
//!   refused). Never panic; normalising twice equals normalising once; the scope of a path equals
//!   the scope of its normal form.
//!
//! [`Enforcer::decide`] allocates nothing for the common request (a path already in normal form,
//! no `log` rule matching), which `tests/decide_allocations.rs` counts.
//!
//! # Observability
//!
//! Per-rule counters without locks ([`EdgeMetrics`]; per tenant in multi-tenant mode,
//! [`TenantRuleCounts`]), one `acls_summary` event per rule per interval (target
//! `netacl_edge::summary`), an access event per request (target
//! `netacl_edge::access`) and a monitoring event for `log` matches (target
//! `netacl_edge::monitor`), and Prometheus text on an admin-only listener.
#![deny(missing_docs)]

mod client_addr;
mod connection;
mod decision;
mod enforce;
mod enrich;
pub mod fingerprint;
pub mod geo;
mod host_table;
pub mod httpsig;
mod layer;
mod lists;
mod metrics;
mod origin;
mod proxy;
mod sample;
mod sni;
mod source;
mod summaries;
mod tenant_counts;
mod tenant_source;
mod tenants;

pub use client_addr::{
    canonical_ip, forwarded_client, ClientAddrResolver, ForwardedHeader, RequestAddrs,
    TrustedProxies, TrustedProxyError,
};
pub use connection::{ConnectionInfo, TlsInfo};
pub use decision::{AclDecision, AclVerdict};
pub use enforce::{ConnectionVerdict, Enforcer};
pub use layer::{AclBody, AclLayer, AclService, BLOCKED_BODY, INVALID_PATH_BODY, MISDIRECTED_BODY};
pub use lists::PolicySources;
pub use metrics::{
    counter_stripes, set_counter_stripes, EdgeMetrics, RuleStat, RuleTable, SummarySink,
    MAX_STRIPES,
};
/// Request paths (re-exported from `netacl-model`, so that `netacl eval`, the dry run and the
/// edge derive a scope alike): [`normalize_path`] gives a path's normal form, [`scope_of_path`]
/// the scope the edge decides with, or why the path is refused.
pub use netacl_model::{normalize_path, scope_of_path, PathError};
pub use netacl_tls::{ClientTrust, TlsFiles};
pub use proxy::{run_edge, start_edge, EdgeConfig, EdgeError, RulesSource, RunningEdge};
pub use sample::{
    TrafficSample, DEFAULT_SAMPLE_EVERY, DEFAULT_SAMPLE_SIZE, MAX_HOSTNAME, MAX_USER_AGENT,
};
pub use sni::SniCertificates;
pub use source::{
    spawn_file_source, spawn_file_source_with, spawn_remote_source, spawn_remote_source_with,
    RemoteRules, SourceError, MAX_RULES_BYTES,
};
pub use summaries::MAX_POSTED_SAMPLE;
pub use tenant_counts::{TenantRuleCounts, TenantSummaries, TenantSummarySink};
pub use tenant_source::{spawn_tenant_source, RemoteTenants};
pub use tenants::{
    tenant_host, ApplyReport, SelectedTenant, TenantChange, TenantChangeError, TenantCounters,
    TenantPolicy, TenantRouter, TenantRules, OTHER_TENANTS,
};
