//! A deterministic synthetic tenant: rule records and a request mix, for `netacl bench`, the
//! criterion benches and load tests.
//!
//! Every signal is used; CIDR lists range from one entry to thousands (a few rules hold most of
//! the CIDRs, as block lists do); some rules are `log` rules, some carry `not_match`, a few have
//! only `not_match`; scopes are mixed; priorities repeat (ties broken by id). The requests mix
//! hits (built from a rule's own values), log-rule matches and misses, always with geolocation
//! and ASN given. Requests come from clients as real traffic does: 80% from a pool of 2,000
//! returning clients with skewed popularity (address, ASN, geolocation, one of 40 TLS stacks),
//! 20% from first-time clients with fresh random values. The same seed gives the same rules and
//! requests.
//!
//! ```
//! use netacl_eval::synthetic::{self, SyntheticConfig};
//!
//! let config = SyntheticConfig { rules: 50, cidrs: 500, requests: 20, ..SyntheticConfig::default() };
//! let generated = synthetic::generate(&config);
//! let rules = generated.rule_set(&config).unwrap();
//! assert_eq!(rules.acls.len(), 50);
//! assert_eq!(generated.requests.len(), 20);
//! ```

use netacl_model::{AclId, Limits, RuleSet, ValidationError};
use serde_json::{json, Map, Value};

use crate::RequestInput;

/// What to generate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SyntheticConfig {
    /// Rules in the set.
    pub rules: usize,
    /// CIDR entries over all rules (client and connecting, IPv4 and IPv6).
    pub cidrs: usize,
    /// Requests in the mix.
    pub requests: usize,
    /// The seed.
    pub seed: u64,
}

impl Default for SyntheticConfig {
    fn default() -> Self {
        Self {
            rules: 10_000,
            cidrs: 100_000,
            requests: 10_000,
            seed: 0x6e65_7461_636c,
        }
    }
}

/// Limits wide enough for any synthetic set of this configuration.
pub fn limits_for(config: &SyntheticConfig) -> Limits {
    let defaults = Limits::default();
    Limits::new(
        defaults.max_entries_per_member.max(config.cidrs),
        defaults.max_entries_per_rule.max(config.cidrs + 1_000),
        defaults.max_rules_per_set.max(config.rules),
        defaults
            .max_entries_per_set
            .max(config.cidrs * 2 + config.rules * 20),
    )
}

/// SplitMix64: small, fast, good enough for test data.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator from a seed.
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (`0` when `n` is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next_u64() % n
        }
    }

    /// `true` with probability `percent`/100.
    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    /// One item of a non-empty slice.
    pub fn pick<'t, T>(&mut self, items: &'t [T]) -> &'t T {
        &items[self.below(items.len() as u64) as usize]
    }
}

const COUNTRIES: [&str; 24] = [
    "US", "GB", "FR", "DE", "NL", "SE", "ES", "IT", "PL", "BR", "AR", "MX", "CA", "JP", "KR", "CN",
    "IN", "SG", "AU", "NZ", "ZA", "NG", "RU", "UA",
];
const SUBDIVISIONS: [&str; 12] = [
    "US-NY", "US-CA", "US-TX", "GB-ENG", "FR-75C", "DE-BY", "JP-13", "BR-SP", "IN-MH", "CA-ON",
    "AU-NSW", "ES-M",
];
const PATHS: [&str; 6] = [
    "/authorize",
    "/u/login",
    "/oauth/token",
    "/api/v2/users",
    "/scim/v2/Users",
    "/oidc/register",
];
const BROWSERS: [&str; 3] = [
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36",
    "Mozilla/5.0 (Macintosh; Intel Mac OS X 14_5) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Safari/605.1.15",
    "Mozilla/5.0 (X11; Linux x86_64; rv:133.0) Gecko/20100101 Firefox/133.0",
];

#[derive(Debug, Clone, Default)]
struct Criteria {
    v4: Vec<(u32, u8)>,
    v6: Vec<(u128, u8)>,
    connecting_v4: Vec<(u32, u8)>,
    asns: Vec<u32>,
    countries: Vec<&'static str>,
    subdivisions: Vec<&'static str>,
    ja3: Vec<String>,
    ja4: Vec<String>,
    user_agents: Vec<String>,
    hostnames: Vec<String>,
}

impl Criteria {
    fn is_empty(&self) -> bool {
        self.to_json().as_object().is_none_or(Map::is_empty)
    }

    fn to_json(&self) -> Value {
        fn v4_text(net: &(u32, u8)) -> String {
            let addr = std::net::Ipv4Addr::from(net.0);
            if net.1 == 32 {
                addr.to_string()
            } else {
                format!("{addr}/{}", net.1)
            }
        }
        let mut out = Map::new();
        let mut put = |key: &str, items: Vec<Value>| {
            if !items.is_empty() {
                out.insert(key.to_owned(), Value::Array(items));
            }
        };
        put(
            "ipv4_cidrs",
            self.v4.iter().map(|n| v4_text(n).into()).collect(),
        );
        put(
            "ipv6_cidrs",
            self.v6
                .iter()
                .map(|n| format!("{}/{}", std::net::Ipv6Addr::from(n.0), n.1).into())
                .collect(),
        );
        put(
            "connecting_ipv4_cidrs",
            self.connecting_v4
                .iter()
                .map(|n| v4_text(n).into())
                .collect(),
        );
        put("asns", self.asns.iter().map(|&a| a.into()).collect());
        put(
            "geo_country_codes",
            self.countries.iter().map(|&c| c.into()).collect(),
        );
        put(
            "geo_subdivision_codes",
            self.subdivisions.iter().map(|&c| c.into()).collect(),
        );
        put(
            "ja3_fingerprints",
            self.ja3.iter().map(|c| c.as_str().into()).collect(),
        );
        put(
            "ja4_fingerprints",
            self.ja4.iter().map(|c| c.as_str().into()).collect(),
        );
        put(
            "user_agents",
            self.user_agents.iter().map(|c| c.as_str().into()).collect(),
        );
        put(
            "hostnames",
            self.hostnames.iter().map(|c| c.as_str().into()).collect(),
        );
        Value::Object(out)
    }
}

#[derive(Debug, Clone)]
struct PlannedRule {
    id: AclId,
    active: bool,
    priority: u64,
    scope: &'static str,
    action: &'static str,
    matching: Criteria,
    not_matching: Criteria,
}

/// A generated tenant: its records (as the API returns them) and a request mix.
#[derive(Debug, Clone)]
pub struct Synthetic {
    /// The rule records, a JSON array.
    pub records: Value,
    /// The requests.
    pub requests: Vec<RequestInput>,
    /// CIDR entries actually generated.
    pub cidrs: usize,
}

impl Synthetic {
    /// The records validated into a rule set (version 1).
    pub fn rule_set(&self, config: &SyntheticConfig) -> Result<RuleSet, ValidationError> {
        RuleSet::from_json(&self.records, 1, &limits_for(config))
    }
}

fn ja3(rng: &mut Rng) -> String {
    format!("{:016x}{:016x}", rng.next_u64(), rng.next_u64())
}

fn ja4(rng: &mut Rng) -> String {
    let v = rng.next_u64();
    format!(
        "t13d{:02}{:02}h2_{:012x}_{:012x}",
        v % 100,
        (v >> 8) % 100,
        rng.next_u64() & 0xffff_ffff_ffff,
        rng.next_u64() & 0xffff_ffff_ffff
    )
}

/// A random public-looking IPv4 network of prefix length `len`.
fn v4_net(rng: &mut Rng, len: u8) -> (u32, u8) {
    let addr = (rng.next_u64() as u32) | 0x0100_0000;
    let mask = if len == 0 {
        0
    } else {
        u32::MAX << (32 - u32::from(len))
    };
    (addr & mask, len)
}

fn v6_net(rng: &mut Rng, len: u8) -> (u128, u8) {
    let bits = (u128::from(rng.next_u64()) << 64) | u128::from(rng.next_u64());
    let addr = (bits & !(0xe000u128 << 112)) | (0x2000u128 << 112);
    let mask = if len == 0 {
        0
    } else {
        u128::MAX << (128 - u32::from(len))
    };
    (addr & mask, len)
}

fn v4_len(rng: &mut Rng) -> u8 {
    match rng.below(100) {
        0..=39 => 32,
        40..=79 => 24,
        80..=94 => 28,
        _ => 16 + rng.below(8) as u8,
    }
}

/// How many CIDRs each rule that holds CIDRs gets: Zipf-like, summing to `total`.
fn cidr_counts(holders: usize, total: usize) -> Vec<usize> {
    if holders == 0 {
        return Vec::new();
    }
    let harmonic: f64 = (1..=holders).map(|r| 1.0 / r as f64).sum();
    let mut counts: Vec<usize> = (1..=holders)
        .map(|r| ((total as f64 / harmonic) / r as f64).floor().max(1.0) as usize)
        .collect();
    let mut sum: usize = counts.iter().sum();
    let mut i = 0;
    while sum < total {
        counts[i % holders] += 1;
        sum += 1;
        i += 1;
    }
    counts
}

fn unique_v4(rng: &mut Rng, count: usize, list: &mut Vec<(u32, u8)>) {
    let mut seen: std::collections::HashSet<(u32, u8)> = list.iter().copied().collect();
    while list.len() < count {
        let len = v4_len(rng);
        let net = v4_net(rng, len);
        if seen.insert(net) {
            list.push(net);
        }
    }
}

/// Generates a tenant.
pub fn generate(config: &SyntheticConfig) -> Synthetic {
    let mut rng = Rng::new(config.seed);
    let rules_n = config.rules.max(1);
    // About a third of the rules hold CIDRs (at least one rule when CIDRs are asked for).
    let holders = if config.cidrs == 0 {
        0
    } else {
        (rules_n / 3).clamp(1, config.cidrs.max(1))
    };
    let mut counts = cidr_counts(holders, config.cidrs).into_iter();
    let mut cidrs = 0usize;

    let mut planned = Vec::with_capacity(rules_n);
    for i in 0..rules_n {
        let id =
            AclId::from_random((u128::from(rng.next_u64()) << 64) | u128::from(rng.next_u64()));
        let active = !rng.chance(5);
        let priority = 1 + rng.below(100);
        let scope = match rng.below(10) {
            0..=3 => "tenant",
            4..=6 => "authentication",
            7..=8 => "management",
            _ => "dynamic_client_registration",
        };
        let action = match rng.below(20) {
            0..=11 => "block",
            12..=13 => "allow",
            14..=17 => "log",
            _ => "redirect",
        };
        let mut matching = Criteria::default();
        let mut not_matching = Criteria::default();
        let holds_cidrs = i < holders;
        if holds_cidrs {
            let count = counts.next().unwrap_or(1);
            cidrs += count;
            match rng.below(10) {
                0 => {
                    // IPv6 block list.
                    let mut seen = std::collections::HashSet::new();
                    while matching.v6.len() < count {
                        let len = [32u8, 48, 56, 64, 128][rng.below(5) as usize];
                        let net = v6_net(&mut rng, len);
                        if seen.insert(net) {
                            matching.v6.push(net);
                        }
                    }
                }
                1 => unique_v4(&mut rng, count, &mut matching.connecting_v4),
                _ => unique_v4(&mut rng, count, &mut matching.v4),
            }
        } else {
            match rng.below(8) {
                0 => {
                    matching.asns = (0..1 + rng.below(50))
                        .map(|_| 1 + rng.below(400_000) as u32)
                        .collect()
                }
                1 => matching.countries = vec![*rng.pick(&COUNTRIES)],
                2 => matching.subdivisions = vec![*rng.pick(&SUBDIVISIONS)],
                3 => matching.ja3 = (0..1 + rng.below(20)).map(|_| ja3(&mut rng)).collect(),
                4 => matching.ja4 = (0..1 + rng.below(20)).map(|_| ja4(&mut rng)).collect(),
                5 => {
                    matching.user_agents = (0..1 + rng.below(5))
                        .map(|_| {
                            let n = rng.below(1_000_000);
                            match rng.below(4) {
                                0 => format!("badbot{n}/*"),
                                1 => format!("*scanner{n}"),
                                2 => format!("*crawl{n}*"),
                                _ => format!("agent{n}/1.0"),
                            }
                        })
                        .collect();
                }
                6 => {
                    matching.hostnames = vec![format!("app{}.example.com", rng.below(2_000))];
                    matching.asns = (0..1 + rng.below(5))
                        .map(|_| 1 + rng.below(400_000) as u32)
                        .collect();
                }
                _ => {
                    matching.countries = vec![*rng.pick(&COUNTRIES)];
                    matching.asns = (0..1 + rng.below(10))
                        .map(|_| 1 + rng.below(400_000) as u32)
                        .collect();
                }
            }
        }
        // A second signal in `match` now and then, and `not_match` on some rules.
        if rng.chance(10) && matching.countries.is_empty() {
            matching.countries = vec![*rng.pick(&COUNTRIES), *rng.pick(&COUNTRIES)];
            matching.countries.dedup();
        }
        if rng.chance(15) {
            match rng.below(3) {
                0 => not_matching.countries = vec!["US"],
                1 => not_matching.asns = vec![1 + rng.below(400_000) as u32],
                _ => not_matching.hostnames = vec!["login.example.com".into()],
            }
        }
        // A handful of rules with only `not_match` (management lock-downs to a corporate range).
        if rng.below(1000) < 3 {
            matching = Criteria::default();
            not_matching = Criteria {
                v4: vec![v4_net(&mut rng, 16)],
                ..Criteria::default()
            };
        }
        planned.push(PlannedRule {
            id,
            active,
            priority,
            scope: if matching.is_empty() {
                "management"
            } else {
                scope
            },
            action,
            matching,
            not_matching,
        });
    }

    for rule in &mut planned {
        for list in [&mut rule.matching.asns, &mut rule.not_matching.asns] {
            list.sort_unstable();
            list.dedup();
        }
    }
    let records = Value::Array(planned.iter().map(record).collect());
    let clients = Clients::new(&mut rng);
    let requests = (0..config.requests)
        .map(|_| request(&mut rng, &clients, &planned))
        .collect();
    Synthetic {
        records,
        requests,
        cidrs,
    }
}

/// `count` distinct IPv4 networks (as texts, lengths distributed like the generated rules'),
/// for a managed list of that size.
pub fn list_cidrs(count: usize, seed: u64) -> Vec<String> {
    let mut rng = Rng::new(seed ^ 0x6c69_7374);
    let mut nets = Vec::with_capacity(count);
    unique_v4(&mut rng, count, &mut nets);
    nets.iter()
        .map(|&(addr, len)| format!("{}/{len}", std::net::Ipv4Addr::from(addr)))
        .collect()
}

/// A random address inside the IPv4 network `cidr` (`a.b.c.d/len`).
pub fn address_in(rng: &mut Rng, cidr: &str) -> String {
    let (addr, len) = cidr.split_once('/').unwrap_or((cidr, "32"));
    let addr: std::net::Ipv4Addr = addr.parse().unwrap_or(std::net::Ipv4Addr::UNSPECIFIED);
    address_in_v4(rng, (u32::from(addr), len.parse().unwrap_or(32)))
}

/// The same requests with every browser user agent made unique, so that no user agent
/// repeats: what the evaluator costs when remembered user-agent results never help. A request
/// counter is inserted after the browser's opening `(` (`Mozilla/5.0 (r1234; Windows ...`):
/// the string keeps its first and last bytes, so prefix and suffix patterns see it as they see
/// the browser's, and no pattern of a synthetic tenant matches the token, so the decisions stay
/// the same.
pub fn with_unique_browser_user_agents(requests: &[RequestInput]) -> Vec<RequestInput> {
    requests
        .iter()
        .enumerate()
        .map(|(i, request)| {
            let mut request = request.clone();
            if let Some(ua) = &mut request.user_agent {
                if BROWSERS.contains(&ua.as_str()) {
                    if let Some(at) = ua.find('(') {
                        ua.insert_str(at + 1, &format!("r{i}; "));
                    }
                }
            }
            request
        })
        .collect()
}

fn record(rule: &PlannedRule) -> Value {
    let mut action = Map::new();
    action.insert(rule.action.to_owned(), Value::Bool(true));
    if rule.action == "redirect" {
        action.insert(
            "redirect_uri".into(),
            format!("https://example.com/blocked?rule={}", rule.id).into(),
        );
    }
    let mut body = Map::new();
    body.insert("action".into(), Value::Object(action));
    body.insert("scope".into(), rule.scope.into());
    if !rule.matching.is_empty() {
        body.insert("match".into(), rule.matching.to_json());
    }
    if !rule.not_matching.is_empty() {
        body.insert("not_match".into(), rule.not_matching.to_json());
    }
    json!({
        "id": rule.id.as_str(),
        "description": format!("synthetic rule {}", rule.id),
        "active": rule.active,
        "priority": rule.priority,
        "rule": Value::Object(body),
        "created_at": "2026-01-01T00:00:00.000Z",
        "updated_at": "2026-01-01T00:00:00.000Z",
    })
}

fn address_in_v4(rng: &mut Rng, net: (u32, u8)) -> String {
    let host_bits = 32 - u32::from(net.1);
    let host = if host_bits == 0 {
        0
    } else {
        (rng.next_u64() as u32) & (u32::MAX >> (32 - host_bits))
    };
    std::net::Ipv4Addr::from(net.0 | host).to_string()
}

/// A client that comes back: real traffic repeats addresses, networks and TLS stacks.
fn client_profile(rng: &mut Rng, fingerprints: &[(String, String)]) -> RequestInput {
    let (ja3, ja4) = rng.pick(fingerprints).clone();
    RequestInput {
        path: Some((*rng.pick(&PATHS)).to_owned()),
        client_ip: Some(std::net::Ipv4Addr::from(rng.next_u64() as u32).to_string()),
        connecting_ip: Some(format!("10.0.{}.{}", rng.below(4), rng.below(256))),
        asn: Some(1 + rng.below(400_000) as u32),
        country: Some((*rng.pick(&COUNTRIES)).to_owned()),
        subdivision: Some((*rng.pick(&SUBDIVISIONS)).to_owned()),
        ja3: Some(ja3),
        ja4: Some(ja4),
        user_agent: Some((*rng.pick(&BROWSERS)).to_owned()),
        hostname: Some("login.example.com".to_owned()),
        http_message_signature: None,
        scope: None,
    }
}

/// Clients a request mix draws from: a pool of returning clients with skewed popularity (a
/// few clients send most requests), and 20% first-time clients with fresh random values.
struct Clients {
    fingerprints: Vec<(String, String)>,
    returning: Vec<RequestInput>,
}

impl Clients {
    fn new(rng: &mut Rng) -> Self {
        let fingerprints: Vec<(String, String)> = (0..40).map(|_| (ja3(rng), ja4(rng))).collect();
        let returning = (0..2_000)
            .map(|_| client_profile(rng, &fingerprints))
            .collect();
        Self {
            fingerprints,
            returning,
        }
    }

    fn next(&self, rng: &mut Rng) -> RequestInput {
        if rng.chance(20) {
            let mut fresh = client_profile(rng, &self.fingerprints);
            fresh.ja3 = Some(ja3(rng));
            fresh.ja4 = Some(ja4(rng));
            return fresh;
        }
        // u^3 skews toward the first clients of the pool.
        let u = (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
        let at = ((u * u * u) * self.returning.len() as f64) as usize;
        let mut client = self.returning[at.min(self.returning.len() - 1)].clone();
        client.path = Some((*rng.pick(&PATHS)).to_owned());
        client
    }
}

fn request(rng: &mut Rng, clients: &Clients, rules: &[PlannedRule]) -> RequestInput {
    let mut input = clients.next(rng);
    let kind = rng.below(10);
    if kind >= 5 {
        return input; // a miss, mostly
    }
    // A hit on a rule's own values (kind 4: a log rule, when there is one nearby).
    let mut rule = rng.pick(rules);
    if kind == 4 {
        for _ in 0..20 {
            if rule.action == "log" {
                break;
            }
            rule = rng.pick(rules);
        }
    }
    let m = &rule.matching;
    if !m.v4.is_empty() {
        let net = *rng.pick(&m.v4);
        input.client_ip = Some(address_in_v4(rng, net));
    }
    if !m.v6.is_empty() {
        let net = *rng.pick(&m.v6);
        let host_bits = 128 - u32::from(net.1);
        let host = if host_bits == 0 {
            0
        } else {
            ((u128::from(rng.next_u64()) << 64) | u128::from(rng.next_u64()))
                & (u128::MAX >> (128 - host_bits))
        };
        input.client_ip = Some(std::net::Ipv6Addr::from(net.0 | host).to_string());
    }
    if !m.connecting_v4.is_empty() {
        let net = *rng.pick(&m.connecting_v4);
        input.connecting_ip = Some(address_in_v4(rng, net));
    }
    if !m.asns.is_empty() {
        input.asn = Some(*rng.pick(&m.asns));
    }
    if !m.countries.is_empty() {
        input.country = Some(rng.pick(&m.countries).to_ascii_lowercase());
    }
    if !m.subdivisions.is_empty() {
        input.subdivision = Some((*rng.pick(&m.subdivisions)).to_owned());
    }
    if !m.ja3.is_empty() {
        input.ja3 = Some(rng.pick(&m.ja3).clone());
    }
    if !m.ja4.is_empty() {
        input.ja4 = Some(rng.pick(&m.ja4).to_ascii_uppercase());
    }
    if !m.user_agents.is_empty() {
        let pattern = rng.pick(&m.user_agents);
        input.user_agent = Some(pattern.replace('*', "x/2.1"));
    }
    if !m.hostnames.is_empty() {
        input.hostname = Some(format!("{}.", rng.pick(&m.hostnames)));
    }
    input.path = Some(
        match rule.scope {
            "management" => "/api/v2/clients",
            "dynamic_client_registration" => "/oidc/register",
            _ => "/authorize",
        }
        .to_owned(),
    );
    input
}

/// A rule set made to be costly to analyse (what the analysis's budget is tested and measured
/// with): `rules` rules (priorities `1..=100`, repeating), each matching 16 overlapping IPv4
/// networks of `10.0.0.0/14` (`/16` to `/24`), about 26 of 100 ASNs and about 10 of 30
/// countries, half `block` and half `allow`. Every pair of rules meets and no rule constrains
/// a single signal, so every question needs a decision diagram over the earlier rules, whose
/// boxes cut it in many ways: the work grows with about the third power of the rules (about
/// 1 s of CPU at 100 rules and 10 s at 200 on the 2-vCPU machine of the README; minutes at
/// 1,000). A JSON array of records (ids from the seed), as rule files and the API take them.
pub fn overlapping(rules: usize, seed: u64) -> Value {
    const COUNTRY_POOL: [&str; 30] = [
        "US", "DE", "FR", "GB", "JP", "CN", "BR", "IN", "RU", "CA", "AU", "NL", "SE", "NO", "FI",
        "DK", "PL", "ES", "IT", "PT", "AT", "BE", "CH", "CZ", "GR", "HU", "IE", "IL", "MX", "NZ",
    ];
    let mut rng = Rng::new(seed);
    let records: Vec<Value> = (0..rules)
        .map(|i| {
            let mut cidrs: Vec<String> = Vec::with_capacity(16);
            while cidrs.len() < 16 {
                let len = [16u32, 18, 20, 22, 24][rng.below(5) as usize];
                let addr = (10u32 << 24) | ((rng.below(4) as u32) << 16) | ((rng.below(256) as u32) << 8);
                let net = addr & (u32::MAX << (32 - len));
                let text = format!("{}/{len}", std::net::Ipv4Addr::from(net));
                if !cidrs.contains(&text) {
                    cidrs.push(text);
                }
            }
            let mut asns: Vec<u64> = (0..30).map(|_| 64_500 + rng.below(100)).collect();
            asns.sort_unstable();
            asns.dedup();
            let mut countries: Vec<&str> = (0..12).map(|_| *rng.pick(&COUNTRY_POOL)).collect();
            countries.sort_unstable();
            countries.dedup();
            let action = if rng.chance(50) { "block" } else { "allow" };
            let id = AclId::from_random((u128::from(rng.next_u64()) << 64) | u128::from(rng.next_u64()));
            json!({
                "id": id.to_string(), "description": format!("overlapping {i}"), "active": true,
                "priority": i % 100 + 1,
                "rule": {"action": {action: true}, "scope": "tenant",
                         "match": {"ipv4_cidrs": cidrs, "asns": asns, "geo_country_codes": countries}},
                "created_at": "2026-01-01T00:00:00.000Z", "updated_at": "2026-01-01T00:00:00.000Z"
            })
        })
        .collect();
    Value::Array(records)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cidr_counts_sum_and_spread() {
        let counts = cidr_counts(3000, 100_000);
        assert_eq!(counts.iter().sum::<usize>(), 100_000);
        assert!(counts[0] > 1_000);
        assert!(counts[2999] < 20);
        assert_eq!(cidr_counts(0, 10), Vec::<usize>::new());
    }

    #[test]
    fn unique_browser_user_agents_keep_every_decision() {
        let config = SyntheticConfig {
            rules: 300,
            cidrs: 3_000,
            requests: 2_000,
            seed: 11,
        };
        let generated = generate(&config);
        let policy = crate::CompiledPolicy::compile_with_limits(
            &generated.rule_set(&config).unwrap(),
            &limits_for(&config),
        )
        .unwrap();
        let unique = with_unique_browser_user_agents(&generated.requests);
        let mut seen = std::collections::HashSet::new();
        let mut browsers = 0;
        for (original, changed) in generated.requests.iter().zip(&unique) {
            let (a, b) = (
                original.user_agent.as_deref(),
                changed.user_agent.as_deref(),
            );
            if a.is_some_and(|ua| BROWSERS.contains(&ua)) {
                browsers += 1;
                assert!(seen.insert(b.unwrap().to_owned()), "{b:?} repeats");
                assert_eq!(a.unwrap().as_bytes()[..13], b.unwrap().as_bytes()[..13]);
                assert!(b.unwrap().ends_with(&a.unwrap()[a.unwrap().len() - 10..]));
            } else {
                assert_eq!(a, b);
            }
            let (a, b) = (
                original.to_request().unwrap(),
                changed.to_request().unwrap(),
            );
            assert_eq!(
                policy.outcome(&policy.evaluate(&a)),
                policy.outcome(&policy.evaluate(&b))
            );
        }
        assert!(browsers > 1_000, "{browsers} browser requests");
    }

    #[test]
    fn same_seed_same_tenant() {
        let config = SyntheticConfig {
            rules: 30,
            cidrs: 200,
            requests: 10,
            seed: 5,
        };
        let a = generate(&config);
        let b = generate(&config);
        assert_eq!(a.records, b.records);
        assert_eq!(a.requests, b.requests);
        assert_eq!(a.cidrs, 200);
    }
}
