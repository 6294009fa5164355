//! Where an edge's policy comes from, and what it reports back to the same server: a rule file
//! or a remote admin server (`source`), a platform's tenants (`tenant_source`), the inputs a
//! policy is compiled from, rules and managed lists (`policy_sources`), managed lists read from
//! files and followed (`list_files`), their error
//! (`source_error`), and the per-rule summaries and traffic sample posted to the admin server
//! the edge follows (`summaries`).
pub mod list_files;
pub(crate) mod policy_sources;
pub(crate) mod source;
pub(crate) mod source_error;
pub(crate) mod summaries;
pub(crate) mod tenant_source;
