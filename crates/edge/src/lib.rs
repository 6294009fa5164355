#![doc = include_str!("../README.md")]
#![deny(missing_docs)]

mod client_addr;
mod connection;
mod connection_rules;
mod decision;
mod enforce;
mod enrich;
mod facts;
pub mod fingerprint;
mod forwarding;
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
mod source_error;
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
pub use facts::{RequestFacts, RequestHost, TlsFacts};
pub use httpsig::HeaderLookup;
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
pub use proxy::{
    run_edge, start_edge, EdgeConfig, EdgeError, RulesSource, RunningEdge,
    DEFAULT_PROXY_MAX_CONNECTIONS, DEFAULT_PROXY_MAX_CONNECTIONS_PER_CLIENT,
    METRICS_MAX_CONNECTIONS,
};
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
