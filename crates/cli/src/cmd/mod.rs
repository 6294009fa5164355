//! One module per subcommand, each with its `Args` and its `run`: `serve` (the admin API, and
//! `serve_tenants`, its in-process edge following every tenant), `edge`, `eval`, `lint`,
//! `bench` (with its measurements beside it), `fingerprint`, `directory`, `secrets_key` and
//! `tenant`.
pub mod bench;
pub mod directory;
pub mod edge;
pub mod eval;
pub mod fingerprint;
pub mod lint;
pub mod secrets_key;
pub mod serve;
pub mod serve_tenants;
pub mod tenant;
