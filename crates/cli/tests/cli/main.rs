//! Integration tests of the `netacl` binary: each module runs the real release binary (`serve`,
//! `edge`, `eval`, `lint`, `fingerprint`, `tenant`, the SDKs and the deploy CLI against it) on
//! loopback.
//!
//! One binary for all of them, so the workspace links one test executable for this crate. The
//! PostgreSQL outage test (`../cluster_outage.rs`) keeps its own binary: it stops and restarts
//! the test database server that the cluster tests here share, so it must not run beside them.

mod cluster_measure;
mod cluster_nodes;
mod cluster_support;
mod cluster_tenants;
mod console_browser;
mod deploy_units;
mod edge_cli;
mod edge_platform;
mod edge_sample;
mod edge_signatures;
mod edge_tls;
mod eval_cli;
mod fingerprint_cli;
mod lint_cli;
mod network_acl_keys_node;
mod organizations_node;
mod proxy_doors;
mod serve_deploy_cli;
mod serve_durability;
mod serve_edge_inprocess;
mod serve_edge_tenants;
mod serve_limits;
mod serve_node_sdk;
mod serve_sdk;
mod serve_support;
mod serve_tls;
mod stdin_support;
mod tenant_cli;
mod tenant_isolation;
mod tenant_sdk;
mod tls_support;
mod untrusted_input_cli;
