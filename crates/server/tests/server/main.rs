//! Integration tests of netacl-server: requests through the service's router (no socket) against
//! a temporary SQLite store, one module per concern; `support` is the shared set-up.

mod analysis_api;
mod api;
mod auth_api;
mod console;
mod history_api;
mod input_limits;
mod logs_api;
mod openapi_conformance;
mod openapi_served;
mod organizations_api;
mod rule_counts_api;
mod shared_cases;
mod signing_keys_api;
mod support;
mod tenancy_directory;
mod tenant_api;
