//! Durations as flags take them: `250ms`, `10s`, `10m`, `1h`, or a bare number of seconds
//! (`netacl edge`'s timeouts, the listener limits, the TLS reload interval); shared with
//! `netacl-pingora` through `netacl-listener`.
pub use netacl_listener::parse_duration;
