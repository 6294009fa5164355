#![doc = include_str!("../README.md")]
#![deny(missing_docs)]

mod decision;
mod enforce;
mod file_stamp;
mod observe;
mod origin;
mod proxy;
mod signals;
mod sources;
mod tenants;

pub use signals::{fingerprint, geo, httpsig};

pub use decision::{
    AclDecision, AclVerdict, Refusal, BLOCKED_BODY, INVALID_PATH_BODY, MISDIRECTED_BODY,
};
pub use enforce::client_addr::{
    canonical_ip, forwarded_client, ClientAddrResolver, ForwardedHeader, RequestAddrs,
    TrustedProxies, TrustedProxyError,
};
pub use enforce::connection::{ConnectionInfo, TlsInfo};
pub use enforce::facts::{RequestFacts, RequestHost, TlsFacts};
pub use enforce::{ConnectionVerdict, Enforcer};
/// Request paths (re-exported from `netacl-model`, so that `netacl eval`, the dry run and the
/// edge derive a scope alike): [`normalize_path`] gives a path's normal form, [`scope_of_path`]
/// the scope the edge decides with, or why the path is refused.
pub use netacl_model::{normalize_path, scope_of_path, PathError};
pub use netacl_tls::{ClientTrust, TlsFiles};
pub use observe::metrics::{
    counter_stripes, set_counter_stripes, EdgeMetrics, MetricFamily, RuleStat, RuleTable,
    SummarySink, MAX_STRIPES,
};
pub use observe::sample::{
    TrafficSample, DEFAULT_SAMPLE_EVERY, DEFAULT_SAMPLE_SIZE, MAX_HOSTNAME, MAX_USER_AGENT,
};
pub use observe::tenant_counts::{TenantRuleCounts, TenantSummaries, TenantSummarySink};
pub use proxy::forwarding::{judged_host, Forwarding};
pub use proxy::layer::{AclBody, AclLayer, AclService};
pub use proxy::{
    run_edge, start_edge, EdgeConfig, EdgeError, RulesSource, RunningEdge,
    DEFAULT_PROXY_MAX_CONNECTIONS, DEFAULT_PROXY_MAX_CONNECTIONS_PER_CLIENT,
    METRICS_MAX_CONNECTIONS,
};
pub use signals::httpsig::HeaderLookup;
pub use sources::list_files;
pub use sources::policy_sources::PolicySources;
pub use sources::source::{
    spawn_file_source, spawn_file_source_with, spawn_remote_source, spawn_remote_source_with,
    RemoteRules, SourceError, MAX_RULES_BYTES,
};
pub use sources::summaries::MAX_POSTED_SAMPLE;
pub use sources::tenant_source::{spawn_tenant_source, RemoteTenants};
pub use tenants::sni::SniCertificates;
pub use tenants::{
    tenant_host, ApplyReport, SelectedTenant, TenantChange, TenantChangeError, TenantCounters,
    TenantPolicy, TenantRouter, TenantRules, OTHER_TENANTS,
};
