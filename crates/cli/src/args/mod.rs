//! The flags several commands share, each group a clap `Args` struct flattened into the commands
//! that take it: the admin console (`console`), durations (`duration`), GeoIP databases
//! (`geoip`), rule-set limits (`limits`), listener caps and timeouts (`listener`) and TLS
//! (`tls`). Managed-list files are the edge's (`netacl_edge::list_files`), shared with
//! `netacl-pingora`.
pub mod console;
pub mod duration;
pub mod geoip;
pub mod limits;
pub mod listener;
pub mod tls;
