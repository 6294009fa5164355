//! Integration tests of netacl-edge: enforcement, tenants, fingerprints, signatures, GeoIP and the
//! proxy over TLS.
//!
//! `decide_allocations.rs` keeps its own binary: it replaces the global allocator with a counting
//! one, which no other test should run under.

mod edge_enforcement;
mod edge_tenants;
mod fingerprint_props;
mod fingerprint_vectors;
mod geo_enrichment;
mod geo_intervals;
mod httpsig_vectors;
mod maxmind_sources;
mod proxy_tls;
