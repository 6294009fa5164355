//! What the edge tells about what it decided: counters and Prometheus text (`metrics`), each
//! tenant's per-rule counts and their `acls_summary` reports (`tenant_counts`), and the traffic
//! sample for the impact preview (`sample`).
pub(crate) mod metrics;
pub(crate) mod sample;
pub(crate) mod tenant_counts;
