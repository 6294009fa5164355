//! The compiled policy and its decisions.

use std::any::Any;
use std::fmt;
use std::hint::select_unpredictable;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use netacl_model::{AclId, RequestScope, Signal};
use serde::ser::{SerializeSeq, SerializeStruct};
use serde::{Deserialize, Serialize, Serializer};
use smallvec::SmallVec;

use crate::geo::{uses_compiled, GeoIds, GeoIntervals, GeoPostings, GeoValues};
use crate::hash::{ja3_key, short_key_caseless, ByteMap, CountryTable, FixedMap};
use crate::managed::{ManagedIndex, MASKS};
use crate::postings::{Postings, NO_RULE, REQUEST_SCOPES};
use crate::range::{RangeTable, NONE};
use crate::request::{v4_bits, Request};
use crate::useragent::UserAgentIndex;

/// A rule's position in evaluation order within one [`CompiledPolicy`] (active rules only,
/// ascending priority, ties by id).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RuleIndex(pub(crate) u32);

impl RuleIndex {
    /// The position, from 0.
    pub fn get(self) -> usize {
        self.0 as usize
    }
}

/// What a decision does with the request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    /// No rule decided (the request goes through; distinct from an explicit `allow`).
    None,
    /// An `allow` rule decided.
    Allow,
    /// A `block` rule decided.
    Block,
    /// A `redirect` rule decided.
    Redirect,
}

impl Verdict {
    /// The wire name (`none`, `allow`, `block`, `redirect`).
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::None => "none",
            Verdict::Allow => "allow",
            Verdict::Block => "block",
            Verdict::Redirect => "redirect",
        }
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The result of evaluating one request against one policy: the verdict, the deciding rule and
/// the monitoring-mode (`log`) rules that matched before it, in evaluation order. Holds rule
/// indexes, not ids: resolve them with the policy that made it ([`CompiledPolicy::outcome`]).
/// No heap allocation unless more than four `log` rules match.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    version: u64,
    verdict: Verdict,
    rule: Option<RuleIndex>,
    monitored: SmallVec<[RuleIndex; 4]>,
}

impl Decision {
    /// What to do.
    pub fn verdict(&self) -> Verdict {
        self.verdict
    }

    /// The deciding rule (`None` exactly when the verdict is [`Verdict::None`]).
    pub fn rule(&self) -> Option<RuleIndex> {
        self.rule
    }

    /// The `log` rules that matched, in evaluation order.
    pub fn monitored(&self) -> &[RuleIndex] {
        &self.monitored
    }

    /// The version of the rule set the decision was made with.
    pub fn version(&self) -> u64 {
        self.version
    }
}

/// A decision with rule ids resolved: the JSON of `netacl eval` and of the dry-run endpoint.
///
/// Serialises as `{"action": .., "rule_id": ..|null, "redirect_uri": .. (redirect only),
/// "monitored": [..]}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Outcome {
    /// What to do.
    pub action: Verdict,
    /// The deciding rule's id.
    #[serde(default)]
    pub rule_id: Option<String>,
    /// Where to send the client (redirect only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redirect_uri: Option<String>,
    /// The ids of the `log` rules that matched, in evaluation order.
    #[serde(default)]
    pub monitored: Vec<String>,
}

/// A decision with its policy, serialising like [`Outcome`] without building one (no
/// allocation): what `netacl eval` writes.
#[derive(Debug, Clone, Copy)]
pub struct OutcomeRef<'p> {
    policy: &'p CompiledPolicy,
    decision: &'p Decision,
}

impl OutcomeRef<'_> {
    /// Writes the outcome's JSON (the same text as serialising it with serde_json) without
    /// going through a serializer: rule ids are base58 and need no escaping; only the redirect
    /// target is escaped.
    pub fn write_json<W: std::io::Write>(&self, out: &mut W) -> std::io::Result<()> {
        out.write_all(b"{\"action\":\"")?;
        out.write_all(self.decision.verdict.as_str().as_bytes())?;
        match self.decision.rule {
            Some(rule) => {
                out.write_all(b"\",\"rule_id\":\"")?;
                out.write_all(self.policy.rule_id(rule).as_str().as_bytes())?;
                out.write_all(b"\"")?;
            }
            None => out.write_all(b"\",\"rule_id\":null")?,
        }
        if let Some(uri) = self.policy.redirect_uri(self.decision) {
            out.write_all(b",\"redirect_uri\":")?;
            serde_json::to_writer(&mut *out, uri)?;
        }
        out.write_all(b",\"monitored\":[")?;
        for (i, &rule) in self.decision.monitored.iter().enumerate() {
            out.write_all(if i == 0 { b"\"" } else { b",\"" })?;
            out.write_all(self.policy.rule_id(rule).as_str().as_bytes())?;
            out.write_all(b"\"")?;
        }
        out.write_all(b"]}")
    }
}

impl Serialize for OutcomeRef<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        struct Monitored<'p>(&'p CompiledPolicy, &'p [RuleIndex]);
        impl Serialize for Monitored<'_> {
            fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                let mut seq = serializer.serialize_seq(Some(self.1.len()))?;
                for &rule in self.1 {
                    seq.serialize_element(self.0.rule_id(rule).as_str())?;
                }
                seq.end()
            }
        }
        let redirect = self.policy.redirect_uri(self.decision);
        let mut s =
            serializer.serialize_struct("Outcome", if redirect.is_some() { 4 } else { 3 })?;
        s.serialize_field("action", &self.decision.verdict)?;
        s.serialize_field(
            "rule_id",
            &self.decision.rule.map(|r| self.policy.rule_id(r).as_str()),
        )?;
        if let Some(uri) = redirect {
            s.serialize_field("redirect_uri", uri)?;
        } else {
            s.skip_field("redirect_uri")?;
        }
        s.serialize_field(
            "monitored",
            &Monitored(self.policy, &self.decision.monitored),
        )?;
        s.end()
    }
}

/// A set of [`Signal`]s.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct SignalSet(u16);

impl SignalSet {
    /// No signal.
    pub const EMPTY: SignalSet = SignalSet(0);

    /// Whether `signal` is in the set.
    pub fn contains(self, signal: Signal) -> bool {
        self.0 & bit(signal) != 0
    }

    /// Adds `signal`.
    pub fn insert(&mut self, signal: Signal) {
        self.0 |= bit(signal);
    }

    /// Whether the set is empty.
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The signals in the set, in [`Signal::ALL`] order.
    pub fn iter(self) -> impl Iterator<Item = Signal> {
        Signal::ALL.into_iter().filter(move |s| self.contains(*s))
    }
}

impl fmt::Debug for SignalSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(self.iter().map(signal_name)).finish()
    }
}

impl Serialize for SignalSet {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.iter().map(signal_name))
    }
}

impl FromIterator<Signal> for SignalSet {
    fn from_iter<I: IntoIterator<Item = Signal>>(iter: I) -> Self {
        let mut set = SignalSet::EMPTY;
        for s in iter {
            set.insert(s);
        }
        set
    }
}

/// The signals compiled geo intervals answer.
const GEO_SIGNALS: u16 =
    (1 << Signal::Asn as u16) | (1 << Signal::Country as u16) | (1 << Signal::Subdivision as u16);

#[inline]
pub(crate) fn bit(signal: Signal) -> u16 {
    1 << (signal as u16)
}

/// The name of a signal in stats and messages (`client_ip`, `asn`, ...).
pub fn signal_name(signal: Signal) -> &'static str {
    match signal {
        Signal::ClientIp => "client_ip",
        Signal::ConnectingIp => "connecting_ip",
        Signal::Asn => "asn",
        Signal::Country => "country",
        Signal::Subdivision => "subdivision",
        Signal::Ja3 => "ja3",
        Signal::Ja4 => "ja4",
        Signal::UserAgent => "user_agent",
        Signal::Hostname => "hostname",
        Signal::Managed => "auth0_managed",
        Signal::MessageSignature => "http_message_signature",
    }
}

/// Which private strategy an index uses (for the admin view and the benches).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum IndexKind {
    /// No active rule names the signal.
    Unused,
    /// Sorted disjoint intervals, binary search over all of them.
    IntervalTable,
    /// Sorted disjoint intervals behind a direct table on the top 8 to 22 address bits (IPv4).
    IntervalTableDirect,
    /// Sorted disjoint intervals behind a fence array of every 32nd start (IPv6).
    IntervalTableFenced,
    /// Intervals packed in blocks indexed by the top 17 to 20 address bits (large IPv4
    /// tables whose networks carry more distinct postings than [`IndexKind::IntervalLines`]
    /// can code: one memory access a lookup, in huge pages where the system allows).
    IntervalBlocks,
    /// Intervals packed twelve to a cache line, each region of the address space cut into as
    /// many lines as its density needs, found by a multiply (IPv4 tables from 4,096
    /// intervals: one memory access a lookup, about 13 bytes an interval).
    IntervalLines,
    /// A hash table (two-choice cuckoo).
    HashTable,
    /// A table indexed by the value itself (country codes: 26 × 26 entries).
    DirectTable,
    /// Exact user agents by hash, wildcard patterns by prefix/suffix hash and Aho-Corasick.
    UserAgentMatcher,
}

/// One index of a policy.
#[derive(Debug, Clone, Serialize)]
pub struct IndexStats {
    /// The index (`client_ip_v4`, `asn`, `user_agent`, ...).
    pub name: &'static str,
    /// Its strategy.
    pub kind: IndexKind,
    /// Distinct keys (networks, values or patterns).
    pub keys: usize,
    /// Elementary intervals (address indexes only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub intervals: Option<usize>,
    /// Approximate bytes.
    pub bytes: usize,
}

/// What a compiled policy holds (serialises for the admin view and `netacl bench --json`).
#[derive(Debug, Clone, Serialize)]
pub struct PolicyStats {
    /// The rule-set version.
    pub version: u64,
    /// Rules in the set, active or not.
    pub rules: usize,
    /// Rules evaluated.
    pub active_rules: usize,
    /// Entries over the active rules' `match` and `not_match`.
    pub entries: usize,
    /// Signals some active rule names.
    pub needed_signals: SignalSet,
    /// How many rules are anchored on each signal (rules with a `match`).
    pub anchors: Vec<(&'static str, usize)>,
    /// Rules without `match`, tried for every request of a scope they cover, per request scope
    /// (management, authentication, dynamic_client_registration).
    pub unanchored: [usize; 3],
    /// Posting lists.
    pub postings: usize,
    /// The indexes.
    pub indexes: Vec<IndexStats>,
    /// How the user-agent patterns are matched.
    pub user_agents: crate::UserAgentStats,
    /// Time the compilation took, in microseconds.
    pub compile_micros: u64,
    /// Approximate heap bytes of the policy (with the managed-list tables it shares).
    pub approx_bytes: usize,
    /// Every managed list name: its content and how many active rules name it.
    pub managed_lists: Vec<ManagedListUse>,
    /// Active rules naming a managed list that holds no entry (unconfigured, or configured
    /// empty): in `match` such a list matches nothing, in `not_match` its condition holds.
    pub rules_naming_empty_lists: Vec<EmptyListRule>,
}

/// One managed list as a policy uses it.
#[derive(Debug, Clone, Serialize)]
pub struct ManagedListUse {
    /// The list's content.
    #[serde(flatten)]
    pub list: crate::ManagedListStats,
    /// Active rules naming it (in `match` or `not_match`).
    pub rules: usize,
}

/// An active rule naming a managed list without entries.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EmptyListRule {
    /// The rule.
    pub rule_id: String,
    /// The list it names.
    pub list: &'static str,
    /// `false`: no content was supplied for the list; `true`: it was, and it is empty.
    pub configured: bool,
}

/// What a rule does, packed for the hot path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ActionCode {
    Block,
    Allow,
    Redirect,
    Log,
}

impl ActionCode {
    /// The verdict of a terminal action (a table read, not a jump).
    #[inline]
    fn verdict(self) -> Verdict {
        const VERDICTS: [Verdict; 4] = [
            Verdict::Block,
            Verdict::Allow,
            Verdict::Redirect,
            Verdict::None,
        ];
        VERDICTS[self as usize]
    }
}

/// The per-rule data the evaluation loop reads.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RuleMeta {
    /// `match` signals other than the anchor: each must hold by membership.
    pub(crate) check: u16,
    /// `not_match` signals: the rule must be absent from each one's excluded list.
    pub(crate) exclude: u16,
    pub(crate) action: ActionCode,
}

/// The signal indexes.
#[derive(Debug, Clone, Default)]
pub(crate) struct Indexes {
    pub(crate) client_v4: RangeTable<u32>,
    pub(crate) client_v6: RangeTable<u128>,
    pub(crate) connecting_v4: RangeTable<u32>,
    pub(crate) connecting_v6: RangeTable<u128>,
    pub(crate) asn: Option<FixedMap<u32>>,
    pub(crate) country: Option<CountryTable>,
    pub(crate) subdivision: Option<FixedMap<u64>>,
    pub(crate) ja3: Option<FixedMap<[u64; 2]>>,
    pub(crate) ja4: Option<ByteMap>,
    pub(crate) user_agent: Option<UserAgentIndex>,
    pub(crate) hostname: Option<ByteMap>,
    pub(crate) message_signature: Option<ByteMap>,
}

/// A rule set compiled into indexes: immutable, `Send + Sync`, evaluated in nanoseconds.
///
/// Build it with [`CompiledPolicy::compile`]; the crate documentation explains the design.
///
/// Laid out in the order declared (`repr(C)`): what every evaluation reads first (the version,
/// which signals are indexed and anchored, the rules' metadata and the rules without `match`,
/// the postings) sits in the first cache lines, together, so that requesting the policy's
/// first line (as the multi-tenant edge does while it reads the host's slot) brings most of it;
/// the indexes follow, each read only for the signals a request carries.
#[derive(Debug, Clone)]
#[repr(C)]
pub struct CompiledPolicy {
    pub(crate) version: u64,
    /// Signals that have a non-empty index.
    pub(crate) indexed: SignalSet,
    pub(crate) needed: SignalSet,
    /// Per request scope: the signals some rule covering it is anchored on. Only these are
    /// probed up front; the others are probed when a candidate needs them.
    pub(crate) anchored: [u16; REQUEST_SCOPES],
    pub(crate) meta: Vec<RuleMeta>,
    /// Per request scope: active rules without `match` covering it, in order.
    pub(crate) unanchored: [Vec<u32>; REQUEST_SCOPES],
    pub(crate) postings: Postings,
    /// Geo/ASN answers per client address, compiled from databases (see [`GeoIntervals`]).
    pub(crate) geo: Option<Arc<GeoIntervals>>,
    /// The managed lists this policy was compiled against.
    pub(crate) managed: Arc<ManagedIndex>,
    pub(crate) indexes: Indexes,
    /// Per mask of managed lists (see [`ManagedIndex`]): the posting of the rules naming any
    /// of them, [`NONE`] when there is none.
    pub(crate) managed_postings: [u32; MASKS],
    /// Per value id of `geo`, the postings of this policy's country, subdivision and ASN
    /// indexes.
    pub(crate) geo_postings: GeoPostings,
    pub(crate) ids: Vec<AclId>,
    pub(crate) redirects: Vec<Option<Arc<str>>>,
    pub(crate) stats: PolicyStats,
    /// Data an embedder swaps together with the rules (see [`CompiledPolicy::with_attachment`]).
    pub(crate) attachment: Option<Arc<dyn Any + Send + Sync>>,
    /// The countries, subdivisions and ASNs the active rules list.
    pub(crate) geo_values: Arc<GeoValues>,
}

/// Inline capacity for the postings a request hits.
const HITS: usize = 32;

/// Where an evaluation keeps the references of the postings it hits.
trait RefBuffer {
    fn push(&mut self, reference: u32);
    /// Pushes `reference` unless it is [`NONE`] (an index lookup that found nothing).
    fn push_found(&mut self, reference: u32);
    fn len(&self) -> usize;
    fn as_slice(&self) -> &[u32];
    /// Whether references were dropped (the evaluation must start over with a larger buffer).
    fn overflowed(&self) -> bool;
}

/// The references on the stack: no allocation, no capacity branch beyond one compare. A
/// request hitting more postings than fit (deeply nested networks, many user-agent patterns)
/// marks it overflowed and is evaluated again with a `Vec`.
struct StackRefs {
    refs: [u32; HITS],
    len: usize,
}

impl RefBuffer for StackRefs {
    #[inline(always)]
    fn push(&mut self, reference: u32) {
        if let Some(slot) = self.refs.get_mut(self.len) {
            *slot = reference;
        }
        self.len += 1;
    }

    /// Without a branch: the slot is written either way, the length grows only for a hit.
    #[inline]
    fn push_found(&mut self, reference: u32) {
        if let Some(slot) = self.refs.get_mut(self.len) {
            *slot = reference;
        }
        self.len += usize::from(reference != NONE);
    }

    #[inline]
    fn len(&self) -> usize {
        self.len
    }

    #[inline]
    fn as_slice(&self) -> &[u32] {
        &self.refs[..self.len.min(HITS)]
    }

    #[inline]
    fn overflowed(&self) -> bool {
        self.len > HITS
    }
}

impl RefBuffer for Vec<u32> {
    fn push(&mut self, reference: u32) {
        Vec::push(self, reference);
    }

    fn push_found(&mut self, reference: u32) {
        if reference != NONE {
            Vec::push(self, reference);
        }
    }

    fn len(&self) -> usize {
        Vec::len(self)
    }

    fn as_slice(&self) -> &[u32] {
        self
    }

    fn overflowed(&self) -> bool {
        false
    }
}

/// A request hit more postings than the stack buffer holds.
struct Overflowed;

/// Candidate streams merged on the stack (more go to the heap).
const STREAMS: usize = 8;

/// The postings one evaluation has hit, grouped by signal.
struct Hits<B> {
    /// Posting references, signal by signal.
    refs: B,
    /// `range[s]` = the references of signal `s` (from, to).
    range: [(u32, u32); Signal::ALL.len()],
    /// Signals already probed (or known to have nothing to probe).
    probed: u16,
}

impl<B: RefBuffer> Hits<B> {
    #[inline(always)]
    fn of(&self, signal: usize) -> &[u32] {
        let (from, to) = self.range[signal];
        self.refs
            .as_slice()
            .get(from as usize..to as usize)
            .unwrap_or(&[])
    }
}

pub(crate) fn scope_index(scope: RequestScope) -> usize {
    match scope {
        RequestScope::Management => 0,
        RequestScope::Authentication => 1,
        RequestScope::DynamicClientRegistration => 2,
    }
}

impl CompiledPolicy {
    /// The version of the rule set this policy was compiled from.
    pub fn version(&self) -> u64 {
        self.version
    }

    /// How many rules are evaluated (the active ones).
    pub fn active_rules(&self) -> usize {
        self.meta.len()
    }

    /// The id of the rule at `rule`.
    ///
    /// # Panics
    ///
    /// When `rule` does not come from this policy (a decision of another policy); use
    /// [`CompiledPolicy::get_rule_id`] where that can happen.
    pub fn rule_id(&self, rule: RuleIndex) -> &AclId {
        &self.ids[rule.get()]
    }

    /// The id of the rule at `rule`, `None` when there is no such rule.
    pub fn get_rule_id(&self, rule: RuleIndex) -> Option<&AclId> {
        self.ids.get(rule.get())
    }

    /// The redirect target of a redirect decision.
    pub fn redirect_uri(&self, decision: &Decision) -> Option<&str> {
        self.shared_redirect_uri(decision).map(|uri| &**uri)
    }

    /// The redirect target of a redirect decision, shared: a copy that outlives the policy costs
    /// a reference count, not an allocation (what the edge keeps in its decisions).
    pub fn shared_redirect_uri(&self, decision: &Decision) -> Option<&Arc<str>> {
        match (decision.verdict, decision.rule) {
            (Verdict::Redirect, Some(rule)) => {
                self.redirects.get(rule.get()).and_then(|r| r.as_ref())
            }
            _ => None,
        }
    }

    /// The decision with ids resolved.
    ///
    /// # Panics
    ///
    /// When `decision` was made by another policy with more rules (see
    /// [`CompiledPolicy::rule_id`]).
    pub fn outcome(&self, decision: &Decision) -> Outcome {
        Outcome {
            action: decision.verdict,
            rule_id: decision.rule.map(|r| self.rule_id(r).to_string()),
            redirect_uri: self.redirect_uri(decision).map(str::to_owned),
            monitored: decision
                .monitored
                .iter()
                .map(|&r| self.rule_id(r).to_string())
                .collect(),
        }
    }

    /// The decision with ids resolved, serialisable without allocating.
    pub fn outcome_ref<'p>(&'p self, decision: &'p Decision) -> OutcomeRef<'p> {
        OutcomeRef {
            policy: self,
            decision,
        }
    }

    /// The signals some active rule names: an embedder looks up geolocation or the ASN only
    /// when they are needed.
    pub fn needed_signals(&self) -> SignalSet {
        self.needed
    }

    /// The managed lists the policy was compiled against.
    pub fn managed_index(&self) -> &Arc<ManagedIndex> {
        &self.managed
    }

    /// The policy with `value` attached: data that must change exactly when the rules change
    /// (the edge's prepared `http_message_signature` keys), so that whoever loads the policy
    /// gets both from one snapshot, never new rules with old data or the reverse. Replaces an
    /// earlier attachment. The evaluator never looks at it.
    pub fn with_attachment(mut self, value: Arc<dyn Any + Send + Sync>) -> Self {
        self.attachment = Some(value);
        self
    }

    /// The policy with geo/ASN answers compiled from databases for its listed values
    /// ([`GeoIntervals`], built for [`geo_values`](Self::geo_values) or a superset of them):
    /// a request that carries no country, subdivision or ASN of its own then takes them from
    /// the intervals, by its client address (a request with no client address has none). A
    /// request that carries any of the three is evaluated with the values it carries, the
    /// compiled ones ignored (explicit values win, all three together). Replaces earlier
    /// intervals; rules and intervals are then one value, swapped together.
    pub fn with_geo(mut self, geo: Arc<GeoIntervals>) -> Self {
        let ix = &self.indexes;
        self.geo_postings = GeoPostings::new(
            geo.value_ids(),
            |code| ix.country.as_ref().map_or(NONE, |t| t.find(code)),
            |key| ix.subdivision.as_ref().map_or(NONE, |m| m.find(key)),
            |asn| ix.asn.as_ref().map_or(NONE, |m| m.find(asn)),
        );
        self.geo = Some(geo);
        self
    }

    /// The compiled geo/ASN intervals, if any.
    pub fn geo(&self) -> Option<&Arc<GeoIntervals>> {
        self.geo.as_ref()
    }

    /// The countries, subdivisions and ASNs the active rules list: what
    /// [`GeoIntervalsBuilder`](crate::GeoIntervalsBuilder) keeps from a database.
    pub fn geo_values(&self) -> GeoValues {
        GeoValues::clone(&self.geo_values)
    }

    /// The attachment, if there is one of type `T`.
    pub fn attachment<T: Any + Send + Sync>(&self) -> Option<&T> {
        self.attachment.as_deref()?.downcast_ref::<T>()
    }

    /// What the policy holds.
    pub fn stats(&self) -> PolicyStats {
        self.stats.clone()
    }

    /// Time the compilation took.
    pub fn compile_time(&self) -> Duration {
        Duration::from_micros(self.stats.compile_micros)
    }

    /// Evaluates one request.
    ///
    /// Compiled once, in this crate, with the lookups inlined into it: not `#[inline]`, so its
    /// code (and speed) is the same in every program that embeds the engine, whatever that
    /// program's own inlining decisions.
    #[inline(never)]
    pub fn evaluate(&self, request: &Request<'_>) -> Decision {
        let mut decision = Decision {
            version: self.version,
            verdict: Verdict::None,
            rule: None,
            monitored: SmallVec::new(),
        };
        if self.meta.is_empty() {
            return decision;
        }
        let stack = StackRefs {
            refs: [0; HITS],
            len: 0,
        };
        if self.walk(request, stack, &mut decision).is_err() {
            // More postings than the stack buffer holds: start over on the heap.
            decision.monitored.clear();
            decision.verdict = Verdict::None;
            decision.rule = None;
            let complete = self.walk(request, Vec::new(), &mut decision);
            debug_assert!(complete.is_ok(), "a Vec never overflows");
        }
        decision
    }

    /// The postings of the networks holding `address`, innermost first.
    #[inline(always)]
    fn chain<A: crate::range::Address>(
        table: &RangeTable<A>,
        address: A,
        refs: &mut impl RefBuffer,
    ) {
        let (posting, mut node) = table.innermost(address);
        if posting != NONE {
            refs.push(posting);
        }
        while node != NONE {
            let n = table.node(node);
            refs.push(n.posting);
            node = n.parent;
        }
    }

    /// Starts loading the index blocks of the request's addresses. In a table far larger than
    /// the cache a random address costs one memory access (over a hundred nanoseconds); begun
    /// before the other signals are looked up, it overlaps their work instead of stalling it.
    #[inline(always)]
    fn prefetch_addresses(&self, request: &Request<'_>) {
        let ix = &self.indexes;
        for (v4, v6, ip) in [
            (&ix.client_v4, &ix.client_v6, request.client_ip()),
            (
                &ix.connecting_v4,
                &ix.connecting_v6,
                request.connecting_ip(),
            ),
        ] {
            match ip {
                Some(IpAddr::V4(a)) => v4.prefetch(v4_bits(a)),
                Some(IpAddr::V6(a)) => v6.prefetch(u128::from(a)),
                None => {}
            }
        }
        if self.indexed.contains(Signal::Managed) {
            self.managed.prefetch(request);
        }
        if let Some(geo) = &self.geo {
            if self.indexed.0 & GEO_SIGNALS != 0 {
                if let Some(ip) = uses_compiled(request) {
                    geo.prefetch(ip);
                }
            }
        }
    }

    /// The compiled value ids for the request, when it takes its geo/ASN values from
    /// intervals.
    #[inline(always)]
    fn compiled_geo(&self, request: &Request<'_>) -> Option<GeoIds> {
        let geo = self.geo.as_deref()?;
        Some(geo.ids_canonical(uses_compiled(request)?))
    }

    #[inline(always)]
    fn address(
        v4: &RangeTable<u32>,
        v6: &RangeTable<u128>,
        ip: Option<IpAddr>,
        refs: &mut impl RefBuffer,
    ) {
        match ip {
            Some(IpAddr::V4(a)) => Self::chain(v4, v4_bits(a), refs),
            Some(IpAddr::V6(a)) => Self::chain(v6, u128::from(a), refs),
            None => {}
        }
    }

    /// Looks up the request's value of every signal in `signals` (a bit set; nothing for a
    /// signal the request lacks or no rule names) and records the postings hit, signal by
    /// signal. Straight-line code: one predictable branch per signal.
    #[inline(always)]
    fn probe<B: RefBuffer>(&self, request: &Request<'_>, signals: u16, hits: &mut Hits<B>) {
        let ix = &self.indexes;
        let refs = &mut hits.refs;
        let mut mark = |s: Signal, refs: &B, from: usize| {
            hits.range[s as usize] = (from as u32, refs.len() as u32);
        };
        let wants = |s: Signal| signals & bit(s) != 0;
        if wants(Signal::Ja3) {
            let from = refs.len();
            if let (Some(map), Some(ja3)) = (&ix.ja3, request.ja3()) {
                refs.push_found(map.find(ja3_key(ja3)));
            }
            mark(Signal::Ja3, refs, from);
        }
        if wants(Signal::Ja4) {
            let from = refs.len();
            if let (Some(map), Some(ja4)) = (&ix.ja4, request.ja4()) {
                refs.push_found(map.find_caseless(ja4.as_bytes()));
            }
            mark(Signal::Ja4, refs, from);
        }
        if wants(Signal::UserAgent) {
            let from = refs.len();
            if let (Some(index), Some(ua)) = (&ix.user_agent, request.user_agent()) {
                index.each_match(ua, &mut |posting| refs.push(posting));
            }
            mark(Signal::UserAgent, refs, from);
        }
        if wants(Signal::Hostname) {
            let from = refs.len();
            if let (Some(map), Some(host)) = (&ix.hostname, request.hostname()) {
                refs.push_found(map.find_caseless(host.as_bytes()));
            }
            mark(Signal::Hostname, refs, from);
        }
        if wants(Signal::MessageSignature) {
            let from = refs.len();
            if let (Some(map), Some(key)) = (&ix.message_signature, request.message_signature()) {
                if let Some(posting) = map.get(key.as_bytes()) {
                    refs.push(posting);
                }
            }
            mark(Signal::MessageSignature, refs, from);
        }
        // The addresses last: their index blocks were prefetched when the evaluation began
        // (see `prefetch_addresses`), and the probes above ran while they arrived.
        if wants(Signal::ClientIp) {
            let from = refs.len();
            Self::address(&ix.client_v4, &ix.client_v6, request.client_ip(), refs);
            mark(Signal::ClientIp, refs, from);
        }
        if wants(Signal::ConnectingIp) {
            let from = refs.len();
            Self::address(
                &ix.connecting_v4,
                &ix.connecting_v6,
                request.connecting_ip(),
                refs,
            );
            mark(Signal::ConnectingIp, refs, from);
        }
        // Country, subdivision and ASN: the request's own values, or (when it carries none and
        // the policy has compiled intervals) the value ids of its client address's interval,
        // read from a block prefetched when the evaluation began (after the address lookups,
        // so that both blocks arrive while the other signals are probed), each id mapped to
        // its posting by indexing.
        if signals & GEO_SIGNALS != 0 {
            let compiled = self
                .compiled_geo(request)
                .map(|ids| self.geo_postings.of(ids));
            if wants(Signal::Asn) {
                let from = refs.len();
                refs.push_found(match (compiled, &ix.asn, request.asn()) {
                    (Some((asn, _, _)), _, _) => asn,
                    (None, Some(map), Some(asn)) => map.find(asn),
                    _ => NONE,
                });
                mark(Signal::Asn, refs, from);
            }
            if wants(Signal::Country) {
                let from = refs.len();
                refs.push_found(match (compiled, &ix.country, request.country_code()) {
                    (Some((_, country, _)), _, _) => country,
                    (None, Some(map), Some(code)) => map.find(code),
                    _ => NONE,
                });
                mark(Signal::Country, refs, from);
            }
            if wants(Signal::Subdivision) {
                let from = refs.len();
                refs.push_found(match (compiled, &ix.subdivision, request.subdivision()) {
                    (Some((_, _, subdivision)), _, _) => subdivision,
                    (None, Some(map), Some(code)) => {
                        short_key_caseless(code.as_bytes()).map_or(NONE, |key| map.find(key))
                    }
                    _ => NONE,
                });
                mark(Signal::Subdivision, refs, from);
            }
        }
        if wants(Signal::Managed) {
            let from = refs.len();
            let mask = self.managed.mask_of(request);
            refs.push_found(self.managed_postings[mask as usize % MASKS]);
            mark(Signal::Managed, refs, from);
        }
        hits.probed |= signals;
    }

    /// Checks the candidate `rule` (its anchor holds) and records it: `true` when it decides.
    #[inline]
    fn try_candidate<B: RefBuffer>(
        &self,
        request: &Request<'_>,
        rule: u32,
        hits: &mut Hits<B>,
        decision: &mut Decision,
    ) -> Result<bool, Overflowed> {
        let meta = self.meta[rule as usize];
        let unprobed = (meta.check | meta.exclude) & !hits.probed;
        if unprobed != 0 {
            self.probe_lazily(request, unprobed, hits)?;
        }
        // Every condition is evaluated and combined: one branch on the outcome instead of one
        // per condition (whether a request hits is data, and each branch on it mispredicts).
        let mut holds = true;
        let mut check = meta.check;
        while check != 0 {
            let s = check.trailing_zeros() as usize;
            check &= check - 1;
            holds &= hits
                .of(s)
                .iter()
                .fold(false, |found, &r| found | self.postings.is_member(r, rule));
        }
        let mut exclude = meta.exclude;
        while exclude != 0 {
            let s = exclude.trailing_zeros() as usize;
            exclude &= exclude - 1;
            holds &= !hits.of(s).iter().fold(false, |found, &r| {
                found | self.postings.is_excluded(r, rule)
            });
        }
        if !holds {
            return Ok(false);
        }
        let index = RuleIndex(rule);
        if meta.action == ActionCode::Log {
            decision.monitored.push(index);
            return Ok(false);
        }
        decision.verdict = meta.action.verdict();
        decision.rule = Some(index);
        Ok(true)
    }

    /// Probes signals no rule of the request's scope is anchored on, at the first candidate
    /// that needs them (their postings hold no anchors for the scope, so the candidates do not
    /// change).
    #[cold]
    #[inline(never)]
    fn probe_lazily<B: RefBuffer>(
        &self,
        request: &Request<'_>,
        signals: u16,
        hits: &mut Hits<B>,
    ) -> Result<(), Overflowed> {
        let from = hits.refs.len();
        self.probe(request, signals, hits);
        if hits.refs.overflowed() {
            return Err(Overflowed);
        }
        debug_assert!(
            hits.refs.as_slice()[from..].iter().all(|&r| self
                .postings
                .anchor_stream(r, scope_index(request.scope()))
                .0
                == NO_RULE),
            "anchors on a lazy signal"
        );
        Ok(())
    }

    /// Walks the candidates in rule order and fills in the decision.
    #[inline]
    fn walk<B: RefBuffer>(
        &self,
        request: &Request<'_>,
        refs: B,
        decision: &mut Decision,
    ) -> Result<(), Overflowed> {
        let scope = scope_index(request.scope());
        let indexed = self.indexed.0;
        let mut hits = Hits {
            refs,
            range: [(0, 0); Signal::ALL.len()],
            // Signals no rule names have nothing to probe.
            probed: !indexed,
        };
        self.prefetch_addresses(request);
        // Candidates come only from the signals rules of this scope are anchored on (and the
        // rules without `match`): probe those now, the others when a candidate needs them.
        self.probe(request, self.anchored[scope] & indexed, &mut hits);
        if hits.refs.overflowed() {
            return Err(Overflowed);
        }

        // One stream of candidates per hit posting with anchors for the scope, and the
        // unanchored rules: on the stack unless there are more than it holds.
        let mut heads = [NO_RULE; STREAMS];
        let mut rests: [&[u32]; STREAMS] = [&[]; STREAMS];
        let mut n = 0;
        let unanchored: &[u32] = &self.unanchored[scope];
        let streams = std::iter::once(match unanchored.split_first() {
            Some((&head, rest)) => (head, rest),
            None => (NO_RULE, &[][..]),
        })
        .chain(
            hits.refs
                .as_slice()
                .iter()
                .map(|&r| self.postings.anchor_stream(r, scope)),
        );
        for (head, rest) in streams.clone() {
            // Without a branch on whether the posting has anchors for the scope: the slot is
            // written either way, the count grows only for a stream.
            if n < STREAMS {
                heads[n] = head;
                rests[n] = rest;
            }
            n += usize::from(head != NO_RULE);
        }
        if n <= 1 {
            // No stream, or one: its rules in order, nothing to merge.
            let single = std::iter::once(heads[0]).chain(rests[0].iter().copied());
            for rule in single.take_while(|&rule| rule != NO_RULE) {
                if self.try_candidate(request, rule, &mut hits, decision)? {
                    break;
                }
            }
            return Ok(());
        }
        if n <= STREAMS {
            let (heads, rests) = (&mut heads[..n], &mut rests[..n]);
            return self.merge_walk(request, heads, rests, &mut hits, decision);
        }
        let (mut heads, mut rests): (Vec<u32>, Vec<&[u32]>) =
            streams.filter(|&(head, _)| head != NO_RULE).unzip();
        self.merge_walk(request, &mut heads, &mut rests, &mut hits, decision)
    }

    /// Tries the candidates of several sorted streams in rule order, merging them as they are
    /// walked: the first deciding rule usually comes after one or two candidates, long before
    /// the streams end, so nothing is copied or sorted up front. Stream `i` is `heads[i]`
    /// followed by `rests[i]`; an exhausted stream's head is [`NO_RULE`], above every rule, so
    /// the next candidate is the minimum of all heads (a branch-free scan).
    #[inline]
    fn merge_walk<B: RefBuffer>(
        &self,
        request: &Request<'_>,
        heads: &mut [u32],
        rests: &mut [&[u32]],
        hits: &mut Hits<B>,
        decision: &mut Decision,
    ) -> Result<(), Overflowed> {
        loop {
            let candidate = heads.iter().fold(NO_RULE, |m, &h| m.min(h));
            if candidate == NO_RULE {
                return Ok(());
            }
            // Every stream whose head is the candidate moves on, without branches.
            for (head, rest) in heads.iter_mut().zip(rests.iter_mut()) {
                let moves = *head == candidate;
                let next = *rest.first().unwrap_or(&NO_RULE);
                *head = select_unpredictable(moves, next, *head);
                *rest = &rest[usize::from(moves).min(rest.len())..];
            }
            if self.try_candidate(request, candidate, hits, decision)? {
                return Ok(());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::{offset_of, size_of};

    #[test]
    fn what_every_evaluation_reads_first_is_in_the_first_three_cache_lines() {
        let ends = [
            offset_of!(CompiledPolicy, version) + size_of::<u64>(),
            offset_of!(CompiledPolicy, indexed) + size_of::<SignalSet>(),
            offset_of!(CompiledPolicy, needed) + size_of::<SignalSet>(),
            offset_of!(CompiledPolicy, anchored) + size_of::<[u16; REQUEST_SCOPES]>(),
            offset_of!(CompiledPolicy, meta) + size_of::<Vec<RuleMeta>>(),
            offset_of!(CompiledPolicy, unanchored) + size_of::<[Vec<u32>; REQUEST_SCOPES]>(),
            offset_of!(CompiledPolicy, postings) + size_of::<Postings>(),
            offset_of!(CompiledPolicy, geo) + size_of::<Option<Arc<GeoIntervals>>>(),
            offset_of!(CompiledPolicy, managed) + size_of::<Arc<ManagedIndex>>(),
        ];
        for end in ends {
            assert!(end <= 3 * 64, "{ends:?}");
        }
        assert_eq!(offset_of!(CompiledPolicy, version), 0);
    }
}
