//! Loading figures of the edge's MaxMind databases at real size, each step in a fresh process so
//! that the resident memory it reports is the databases' and nothing else's.
//!
//! ```sh
//! cargo run --release -p netacl-benches --example geo_load -- write DIR   # a few seconds
//! cargo run --release -p netacl-benches --example geo_load -- open DIR
//! ```
//!
//! `write` writes the enrichment bench's databases (`mmdb_fixture.rs`: a City-like database of
//! 1,050,000 networks and an ASN database of 200,000) into `DIR`. `open` opens both as the edge
//! does at start, then reloads both as the edge does when the files change, and prints the time
//! of each and the process's resident memory (`VmRSS`) and its peak (`VmHWM`) after each (Linux).

use std::path::Path;
use std::time::Instant;

use netacl_edge::geo::GeoEnricher;

// The bench's generator; this example writes the databases and uses nothing else of it.
#[allow(dead_code)]
#[path = "mmdb_fixture.rs"]
mod mmdb_fixture;

/// `VmRSS` and `VmHWM` of this process in MiB (0 when unknown).
fn memory_mib() -> (f64, f64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|line| line.strip_prefix(name))
            .and_then(|rest| {
                rest.trim()
                    .trim_end_matches("kB")
                    .trim()
                    .parse::<f64>()
                    .ok()
            })
            .map_or(0.0, |kib| kib / 1024.0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [command, dir] = args.as_slice() else {
        return Err("usage: geo_load write|open DIR".into());
    };
    let dir = Path::new(dir);
    match command.as_str() {
        "write" => {
            std::fs::create_dir_all(dir)?;
            mmdb_fixture::write_databases(dir);
            for name in ["city.mmdb", "asn.mmdb"] {
                let len = std::fs::metadata(dir.join(name))?.len();
                println!("{name}: {:.1} MiB", len as f64 / 1048576.0);
            }
        }
        "open" => {
            let (rss, _) = memory_mib();
            println!("before: VmRSS {rss:.1} MiB");
            let started = Instant::now();
            let geo = GeoEnricher::open(Some(&dir.join("city.mmdb")), Some(&dir.join("asn.mmdb")))?;
            let open = started.elapsed();
            let (rss, peak) = memory_mib();
            println!(
                "open both: {:.0} ms; VmRSS {rss:.1} MiB, VmHWM {peak:.1} MiB",
                open.as_secs_f64() * 1e3
            );
            let started = Instant::now();
            geo.reload()?;
            let reload = started.elapsed();
            let (rss, peak) = memory_mib();
            println!(
                "reload both: {:.0} ms; VmRSS {rss:.1} MiB, VmHWM {peak:.1} MiB",
                reload.as_secs_f64() * 1e3
            );
        }
        other => return Err(format!("unknown command {other:?}: write or open").into()),
    }
    Ok(())
}
