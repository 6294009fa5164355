//! The flags several commands share, each group a clap `Args` struct flattened into the commands
//! that take it: the admin console (`console`), durations (`duration`), GeoIP databases
//! (`geoip`), rule-set limits (`limits`), listener caps and timeouts (`listener`), managed-list
//! files (`managed_list`) and TLS (`tls`).
pub mod console;
pub mod duration;
pub mod geoip;
pub mod limits;
pub mod listener;
pub mod managed_list;
pub mod tls;
