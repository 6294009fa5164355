//! Where the MaxMind-format test databases live and how their JSON sources read, shared by the
//! lookup tests (geo_enrichment.rs) and the compiled-interval tests (geo_intervals.rs).
#![allow(dead_code)]

use std::net::{IpAddr, Ipv6Addr};
use std::path::{Path, PathBuf};

use ipnet::IpNet;

pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A file of MaxMind's reference data (`../shared/reference-data/maxmind/`).
pub fn maxmind(name: &str) -> PathBuf {
    repo_root()
        .join("../shared/reference-data/maxmind")
        .join(name)
}

/// A file of the project's own fixtures (`testdata/mmdb/`).
pub fn fixture(name: &str) -> PathBuf {
    repo_root().join("testdata/mmdb").join(name)
}

/// The rows of a MaxMind-style source file: `[{"network": record}, ...]`, in insertion order.
pub fn source_rows(path: &Path) -> Vec<(IpNet, serde_json::Value)> {
    let text = std::fs::read_to_string(path).unwrap();
    let rows: Vec<serde_json::Map<String, serde_json::Value>> =
        serde_json::from_str(&text).unwrap();
    rows.into_iter()
        .flat_map(|row| row.into_iter())
        .map(|(network, record)| (network.parse::<IpNet>().unwrap(), record))
        .collect()
}

/// An address in the database's IPv6 space, where IPv4 `a.b.c.d` is `::a.b.c.d`.
pub fn as_v6(ip: IpAddr) -> Ipv6Addr {
    match ip {
        IpAddr::V4(v4) => v4.to_ipv6_compatible(),
        IpAddr::V6(v6) => v6,
    }
}

/// A network's prefix length in that IPv6 space.
pub fn prefix_in_v6(net: &IpNet) -> u8 {
    match net {
        IpNet::V4(n) => n.prefix_len() + 96,
        IpNet::V6(n) => n.prefix_len(),
    }
}
