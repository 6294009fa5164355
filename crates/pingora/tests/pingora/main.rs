//! `netacl-pingora` as a process (the release binary): decisions, the forwarding walk, signals,
//! rule reloads under load, GeoIP databases and managed list files, TLS fingerprints and bad
//! input. One test binary; loopback only
//! (clients from distinct 127.0.0.X addresses where a rule names an address); every wait and
//! every load loop is bounded.
mod decisions;
mod input;
mod sources;
mod support;
mod swap;
mod tls;
