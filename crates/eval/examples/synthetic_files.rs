//! Writes a synthetic tenant as files for `netacl eval`: the rule records (a JSON array, as the
//! list endpoint returns them) and request lines (one JSON object a line, the mix `netacl bench`
//! decides, repeated until `LINES` lines are written). The replay figure in the README is
//! measured on these files.
//!
//! ```text
//! cargo run --release -p netacl-eval --example synthetic_files -- RULES CIDRS LINES RULES.json REQUESTS.jsonl
//! /usr/bin/time -v target/release/netacl eval --rules RULES.json --requests REQUESTS.jsonl > /dev/null
//! ```
use std::fs::File;
use std::io::{BufWriter, Write};

use netacl_eval::synthetic::{self, SyntheticConfig};

fn main() -> std::io::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 6 {
        eprintln!("usage: synthetic_files RULES CIDRS LINES RULES.json REQUESTS.jsonl");
        std::process::exit(2);
    }
    let number = |i: usize| -> usize {
        args[i].parse().unwrap_or_else(|_| {
            eprintln!("{} is not a number", args[i]);
            std::process::exit(2)
        })
    };
    let config = SyntheticConfig {
        rules: number(1).max(1),
        cidrs: number(2),
        requests: 20_000,
        ..SyntheticConfig::default()
    };
    let lines = number(3);
    let generated = synthetic::generate(&config);
    serde_json::to_writer(BufWriter::new(File::create(&args[4])?), &generated.records)?;
    let mut out = BufWriter::new(File::create(&args[5])?);
    for input in generated.requests.iter().cycle().take(lines) {
        serde_json::to_writer(&mut out, input)?;
        out.write_all(b"\n")?;
    }
    out.flush()
}
