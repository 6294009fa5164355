//! Prints the rule set made to be costly to analyse (`netacl_eval::synthetic::overlapping`) as
//! the analysis endpoint's body: `cargo run --release -p netacl-analysis --example
//! overlapping_rules -- RULES [SEED] > body.json` gives `{"network_acls": [...]}`, for `POST
//! /_netacl/v1/network-acls/analyze` (or, its member alone, a rule file for `netacl lint`).
fn main() {
    let mut args = std::env::args().skip(1);
    let rules: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(100);
    let seed: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(0x2828);
    let body = serde_json::json!({
        "network_acls": netacl_eval::synthetic::overlapping(rules, seed)
    });
    println!("{body}");
}
