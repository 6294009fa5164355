//! The network ACL evaluator: compiles a rule set into indexes once, then decides each request
//! in nanoseconds, at a cost that does not grow with the number of rules or entries.
//!
//! ```
//! use netacl_eval::{Engine, Request, Verdict};
//! use netacl_model::{Limits, RequestScope, RuleSet};
//!
//! let rules = serde_json::json!([{
//!     "id": "acl_1111111111111111111111",
//!     "description": "block a bad network outside the US",
//!     "active": true,
//!     "priority": 10,
//!     "rule": {
//!         "action": {"block": true},
//!         "scope": "tenant",
//!         "match": {"ipv4_cidrs": ["198.51.100.0/24"]},
//!         "not_match": {"geo_country_codes": ["US"]}
//!     },
//!     "created_at": "2026-07-30T11:42:25.354Z",
//!     "updated_at": "2026-07-30T11:42:25.354Z"
//! }]);
//! let rules = RuleSet::from_json(&rules, 7, &Limits::default()).unwrap();
//!
//! let engine = Engine::new();
//! engine.publish(&rules).unwrap();
//!
//! let request = Request::new(RequestScope::Authentication)
//!     .with_client_ip("198.51.100.9".parse().unwrap())
//!     .with_country("FR");
//! let evaluation = engine.evaluate(&request);
//! assert_eq!(evaluation.verdict(), Verdict::Block);
//! assert_eq!(evaluation.rule_id().unwrap().as_str(), "acl_1111111111111111111111");
//! assert_eq!(evaluation.decision().version(), 7);
//!
//! // The same address from the US: the `not_match` fails, no rule decides.
//! let request = request.with_country("us");
//! assert_eq!(engine.evaluate(&request).verdict(), Verdict::None);
//! ```
//!
//! # The pipeline
//!
//! [`RuleSet`](netacl_model::RuleSet) (validated records) → [`CompiledPolicy::compile`] →
//! [`CompiledPolicy`] (immutable, `Send + Sync`) → [`CompiledPolicy::evaluate`] with a
//! [`Request`] (the request's signals, canonicalised once) → [`Decision`] (rule indexes, no
//! allocation) → [`Outcome`] (ids resolved, for JSON). The [`Engine`] holds the policy in service
//! in an `ArcSwap`: each evaluation takes exactly one snapshot, publication compiles aside and
//! swaps. [`reference::evaluate`] is the plain linear transcription of the semantics, the oracle
//! every test compares against.
//!
//! # How evaluation avoids scanning rules
//!
//! Active rules get an *ordinal* in evaluation order (ascending priority, ties by id in byte
//! order); inactive rules are left out entirely. Then, per signal, an index maps a request value
//! to a *posting*: the ordinals of the rules whose lists contain the value, split in five sorted
//! lists (see below).
//!
//! - Client and connecting addresses: CIDR blocks are nested or disjoint, so the distinct
//!   networks of a signal cut the address space into elementary intervals; each interval is
//!   labelled with the posting of its innermost network and that network's enclosing network
//!   (further enclosing networks follow through parent links). A network listed by many rules is
//!   stored once. The layout follows the size (see `range.rs`): small tables are searched
//!   directly, IPv4 tables up to 4,095 intervals behind a direct table on the top 8 to 22
//!   address bits (a block no network touches is answered by the table alone), and larger ones
//!   (such as a million-CIDR block list) packed twelve intervals to a 64-byte line, each region
//!   of the address space cut into as many lines as its density needs and found by a multiply
//!   (`packed.rs`, about 13 bytes an interval): a random address costs one memory access, which
//!   the evaluator prefetches before it looks up the other signals, in memory advised for
//!   transparent huge pages so that it does not also walk the page tables. A line holds 16-bit
//!   codes of interned *chains* (a posting and the chain of the network around it); a table
//!   with more distinct chains than that (every network listed by its own combination of
//!   rules) keeps half-line blocks holding the postings themselves (from 131,072 intervals) or
//!   the direct table. Postings of the same rules in the same roles are stored once, so a
//!   block list written into two rules has one. IPv6 tables have a fence array of every 32nd
//!   interval start.
//! - ASNs, subdivisions (as one word) and JA3 (as two words): two-choice cuckoo hash tables
//!   (two buckets of two slots; the keys are known when the policy is compiled, so each is
//!   placed once): a lookup reads both buckets and selects the match with conditional moves, so
//!   whether a request value is present costs no branch misprediction.
//! - Countries: a table of 26 × 26 entries indexed by the two letters.
//! - JA4 fingerprints and hostnames: cuckoo tables of 32-bit tags over the lowercase bytes,
//!   hashed case-insensitively (each word OR-ed with bit 5 of every byte, one instruction; 16
//!   bytes a multiply); the key is compared folded, eight bytes at a time, once its tag matches.
//! - User agents: exact values by hash; wildcard patterns by their literal prefix or suffix (byte
//!   tries walked from either end, which stop at the first byte no literal continues with),
//!   otherwise by an inner literal (one single-needle SIMD search when the literals share a
//!   prefix, Teddy for up to 64 literals, Teddy over their distinct prefixes with a hash probe
//!   at each occurrence beyond that, an Aho-Corasick DFA otherwise), then verified in linear
//!   time. Because traffic repeats user agents, the result for a string is remembered in a
//!   per-thread memo (256 slots in thread storage, keyed by a seeded hash, verified byte for
//!   byte, tagged with the index's id): a repeated user agent is not scanned again.
//!   `netacl bench` also reports the cost with no user agent repeated.
//!
//! A hash table larger than 16 KB has a membership filter in front (about 8 bits a key, two
//! bits of one word per key): most request values are in no rule, and the filter tells so
//! from a small, cache-resident array without touching the table. The hash functions are keyed
//! by a random seed per policy, so that a rule author cannot choose colliding keys.
//!
//! Each rule with a `match` is *anchored* on one of its signals: the one a random request is
//! least likely to hit, estimated from the entries (prefix lengths of CIDRs, number of values
//! times a per-signal share: an ASN is rarer than a country, a hostname is common). A posting's
//! five lists are: the rules anchored on this signal, one list per request scope (so rules of
//! other scopes cost nothing); the other rules whose `match` lists the value; and the rules whose
//! `not_match` lists it. Rules without `match` sit in a per-scope *unanchored* list. A posting
//! that concerns a single rule in a single role (most CIDRs of a block list, most ASNs) is not
//! stored at all: the index holds the rule's ordinal and role inline, so a hit on it reads no
//! posting memory. An anchor list is cut at compile time after its first rule that decides
//! alone (a terminal action, no other `match` signal, no `not_match`): a request reaching that
//! rule through the list is decided there or earlier, so the rules after it could never be
//! tried.
//!
//! A rule with `match_all` and a terminal action decides every request of its scopes that
//! reaches it, so the compiler also cuts each scope there: the scope's anchor lists drop every
//! rule after it, and the signals only those rules are anchored on are not probed for the
//! scope at all. A deny-all under allow rules costs what the allow rules cost; a request that
//! hits none of them is decided by the deny-all, the one candidate of the scope's unanchored
//! list.
//!
//! Country, subdivision and ASN can also be answered from GeoIP databases without a tree walk
//! per request, in two ways. For one policy, [`GeoIntervals`] compile the networks that carry a
//! value its rules list, and [`CompiledPolicy::with_geo`] attaches them: each interval holds
//! value ids mapped to the policy's postings by indexing (rebuilt when its listed values or the
//! databases change). For many policies at once (an edge enforcing thousands of tenants), one
//! [`GeoTable`] holds every network's answer for every value, depends on the databases alone,
//! and is shared: [`GeoTable::enrich`] gives a request its address's values and any policy
//! answers them with its own indexes, so a rule change never rebuilds it and a tenant holds
//! nothing for it.
//!
//! Managed lists (`auth0_managed`) are compiled apart, once per list content, into a
//! [`ManagedIndex`]: address tables (the same interval tables as above) and JA3/JA4 hash tables
//! whose values are the set of lists holding the key, as a five-bit mask, nested networks'
//! masks folded into the inner network. A policy compiled against the index (shared through an
//! `Arc`, so a rule change does not rebuild it) holds one posting per mask: the rules naming any
//! of its lists, in their roles. Probing the signal is one address lookup, two fingerprint
//! lookups and one array read; a list of a million CIDRs named by ten rules is stored once.
//!
//! Evaluating a request: probe each index that anchors some rule of the request's scope once
//! for the request's value (straight-line code, the posting references hit go to a buffer on
//! the stack; the address indexes last, their blocks having been prefetched first), then take
//! the candidates in ordinal order: one anchor list is walked as it is (most requests have none
//! or one), several are merged as they are walked (each list is a head and the rest; the next
//! candidate is the smallest head; an inline posting's list is its rule alone, read from the
//! reference). The other signals cannot bring candidates: each is probed only when the first
//! candidate that needs it (to check a `match` or a `not_match`) comes up, so most requests
//! touch a few indexes, not all nine. Each candidate is checked for its other `match` signals
//! by membership in the hit postings' member lists and for its `not_match` signals by absence
//! from their excluded lists (an inline posting is one compare, a stored one a branch-free
//! binary search), all conditions combined before the one branch on the outcome. A matching
//! `log` rule is recorded and the walk continues; the first matching terminal rule ends it. The
//! work is one probe per needed signal plus the candidates the request actually hits, not the
//! size of the rule set.
//!
//! No allocation (stack buffers; a pathological request hitting more than 32 postings is
//! evaluated again with a heap buffer, and more than 4 matching log rules spill the decision's
//! list), no lock, no parsing, each string hashed once. [`CompiledPolicy::evaluate`] is
//! compiled once, in this crate, so it runs the same code in every program that embeds it.
//!
//! # Semantics
//!
//! As in the project's `network-acl-semantics.md`: a missing request value matches nothing in a
//! `match` and satisfies a `not_match`; IPv4-mapped IPv6 addresses are matched as IPv4; CIDRs
//! with host bits set mean their network; country, subdivision, JA3, JA4 and hostname compare
//! case-insensitively (hostnames without trailing dots); user agents compare exactly, `*`
//! matching any run. `match_all` matches every request of the rule's scope. `auth0_managed`
//! holds when the client address (IPv4-mapped IPv6 as IPv4), the JA3 or the JA4 is an entry of
//! one of the named lists; a list without content (unconfigured, or configured empty) holds no
//! entry, like a missing value: in `match` it matches nothing, in `not_match` its condition
//! holds ([`PolicyStats::rules_naming_empty_lists`] names the rules concerned).
#![deny(missing_docs)]

mod compile;
mod engine;
mod geo;
mod geo_table;
mod hash;
mod lines;
mod managed;
mod memo;
mod packed;
mod pages;
mod policy;
mod postings;
mod range;
pub mod reference;
mod request;
mod search;
pub mod synthetic;
mod units;
mod useragent;

pub use compile::CompileError;
pub use engine::{Engine, Evaluation};
pub use geo::{GeoAnswer, GeoIntervalStats, GeoIntervals, GeoIntervalsBuilder, GeoValues};
pub use geo_table::{GeoDatabase, GeoLookup, GeoTable, GeoTableBuilder, GeoTableStats};
pub use managed::{ManagedIndex, ManagedListStats};
pub use policy::{
    signal_name, CompiledPolicy, Decision, EmptyListRule, IndexKind, IndexStats, ManagedListUse,
    Outcome, OutcomeRef, PolicyStats, RuleIndex, SignalSet, Verdict,
};
pub use request::{Request, RequestError, RequestInput, RequestInputRef};
pub use useragent::UserAgentStats;
