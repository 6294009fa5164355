//! User-agent matching: exact patterns by hash, wildcard patterns through a cheap anchor and a
//! linear verification.
//!
//! Each wildcard pattern (`*` matches any run) is sorted into the cheapest matcher that can find
//! it: by its literal *prefix* (a byte trie walked from the user agent's first byte: the walk
//! stops at the first byte no prefix continues with, usually the first), by its literal *suffix*
//! (a trie of reversed suffixes walked from the last byte), or, when it starts and ends with `*`,
//! by its longest inner literal, found with a SIMD multi-literal searcher (Teddy, from the
//! aho-corasick crate; an overlapping Aho-Corasick automaton when there are too many literals).
//! Patterns
//! made only of `*` match every user agent. A pattern found by its anchor is then verified in
//! time linear in the user agent's length (leftmost-first placement of the pieces, exact for
//! `*`-only globs), so no input can make matching backtrack.

use aho_corasick::packed;
use aho_corasick::{AhoCorasick, Span};
use smallvec::SmallVec;

use crate::hash::ByteMap;

const NO_NODE: u32 = u32::MAX;

/// A byte trie of literals; each literal's end node names a group of patterns.
#[derive(Debug, Clone, Default)]
struct LiteralTrie {
    /// The root's children by first byte (empty when there is no literal).
    root: Vec<u32>,
    nodes: Vec<TrieNode>,
    /// Children of every node, sorted by byte within each node.
    edges: Vec<(u8, u32)>,
}

#[derive(Debug, Clone, Copy)]
struct TrieNode {
    first_edge: u32,
    edge_count: u32,
    group: u32,
}

impl LiteralTrie {
    fn build(literals: &[(Vec<u8>, u32)]) -> Self {
        if literals.is_empty() {
            return Self::default();
        }
        // Node 0 is the root.
        let mut children: Vec<std::collections::BTreeMap<u8, u32>> = vec![Default::default()];
        let mut groups = vec![NO_NODE];
        for (literal, group) in literals {
            let mut node = 0usize;
            for &byte in literal {
                let next = children.len() as u32;
                let child = *children[node].entry(byte).or_insert(next);
                if child == next {
                    children.push(Default::default());
                    groups.push(NO_NODE);
                }
                node = child as usize;
            }
            groups[node] = *group;
        }
        let mut nodes = Vec::with_capacity(children.len());
        let mut edges = Vec::new();
        for (kids, group) in children.iter().zip(&groups) {
            nodes.push(TrieNode {
                first_edge: edges.len() as u32,
                edge_count: kids.len() as u32,
                group: *group,
            });
            edges.extend(kids.iter().map(|(&b, &n)| (b, n)));
        }
        let mut root = vec![NO_NODE; 256];
        for (&byte, &node) in &children[0] {
            root[usize::from(byte)] = node;
        }
        Self { root, nodes, edges }
    }

    /// Calls `found` with the group of every literal that `bytes` starts with, shortest first.
    #[inline]
    fn walk(&self, mut bytes: impl Iterator<Item = u8>, mut found: impl FnMut(u32)) {
        let Some(first) = bytes.next() else {
            return;
        };
        let Some(&start) = self.root.get(usize::from(first)) else {
            return;
        };
        let mut node = start;
        while node != NO_NODE {
            let n = self.nodes[node as usize];
            if n.group != NO_NODE {
                found(n.group);
            }
            let Some(byte) = bytes.next() else {
                return;
            };
            let kids = &self.edges[n.first_edge as usize..(n.first_edge + n.edge_count) as usize];
            node = match kids.binary_search_by_key(&byte, |&(b, _)| b) {
                Ok(i) => kids[i].1,
                Err(_) => NO_NODE,
            };
        }
    }

    fn bytes(&self) -> usize {
        self.root.capacity() * 4 + self.nodes.capacity() * 12 + self.edges.capacity() * 8
    }
}

/// How the user-agent patterns of a policy are matched (part of [`crate::PolicyStats`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub struct UserAgentStats {
    /// Patterns without `*`, found by one hash probe.
    pub exact: usize,
    /// Wildcard patterns found by their literal prefix.
    pub by_prefix: usize,
    /// Wildcard patterns found by their literal suffix.
    pub by_suffix: usize,
    /// Wildcard patterns found by an inner literal (Aho-Corasick).
    pub by_inner_literal: usize,
    /// Patterns made only of `*`: they match every user agent.
    pub match_all: usize,
}

#[derive(Debug, Clone)]
struct Pattern {
    /// The literal pieces between the `*`s (at least two: the pattern holds a `*`).
    pieces: Vec<Box<[u8]>>,
    posting: u32,
}

impl Pattern {
    /// Whether `text` matches: the first piece is a prefix, the last a suffix of what remains,
    /// the pieces between are found leftmost-first in order.
    fn matches(&self, text: &[u8]) -> bool {
        let Some((first, rest_pieces)) = self.pieces.split_first() else {
            return false;
        };
        let Some((last, middle)) = rest_pieces.split_last() else {
            return text == &**first;
        };
        let Some(mut rest) = text.strip_prefix(&**first) else {
            return false;
        };
        for piece in middle {
            match memchr::memmem::find(rest, piece) {
                Some(at) => rest = &rest[at + piece.len()..],
                None => return false,
            }
        }
        rest.ends_with(last)
    }
}

/// Finds the postings of every pattern a user agent matches.
#[derive(Debug, Clone)]
pub(crate) struct UserAgentIndex {
    /// The policy's hash seed (the memo's slot hash).
    seed: u64,
    /// This index's id in the per-thread memo of results ([`crate::memo`]).
    memo_owner: u64,
    exact: ByteMap,
    patterns: Vec<Pattern>,
    /// Prefix literals → group.
    prefixes: LiteralTrie,
    /// Reversed suffix literals → group.
    suffixes: LiteralTrie,
    /// Pattern ids grouped by anchor; `ranges[i]` is the slice of group `i`.
    anchored: Vec<u32>,
    ranges: Vec<(u32, u32)>,
    /// Finds the inner literals; literal `i` is group `inner_groups[i]`.
    inner: InnerFinder,
    inner_groups: Vec<u32>,
    match_all: Vec<u32>,
    shape: UserAgentStats,
}

impl Default for UserAgentIndex {
    fn default() -> Self {
        Self::build(0, Vec::new())
    }
}

/// Up to this many literals one packed (Teddy) searcher finds them; beyond, one automaton pass
/// beats several Teddy passes.
const PACKED_MAX: usize = 64;

/// Finds every inner literal that occurs in a user agent.
#[derive(Debug, Clone)]
enum InnerFinder {
    None,
    /// A leftmost-first SIMD searcher over literals sorted by length. Restarting one byte after
    /// each match start visits every position where some literal starts; the literal reported
    /// there is the shortest, and every other literal starting there extends it, so checking
    /// its precomputed extensions finds them all.
    Packed(Box<PackedChunk>),
    /// More literals than one packed searcher takes, but few distinct prefixes: a packed
    /// searcher finds the prefixes, and the literals starting at each occurrence are looked up.
    Prefixed(Box<PrefixedLiterals>),
    /// Overlapping Aho-Corasick (a DFA where it can be built): every occurrence of every
    /// literal in one pass.
    Automaton(AhoCorasick),
}

/// Finds the leftmost-first occurrence of one of a few literals: one SIMD single-needle search
/// (`memchr::memmem`) when there is a single literal, Teddy otherwise.
#[derive(Debug, Clone)]
enum LiteralSearcher {
    One(memchr::memmem::Finder<'static>),
    Many(packed::Searcher),
}

impl LiteralSearcher {
    /// A searcher for `literals` (leftmost-first: at one position, the first given wins).
    fn build<B: AsRef<[u8]>>(literals: &[B]) -> Option<Self> {
        if let [one] = literals {
            return Some(Self::One(
                memchr::memmem::Finder::new(one.as_ref()).into_owned(),
            ));
        }
        let mut builder = packed::Config::new()
            .match_kind(packed::MatchKind::LeftmostFirst)
            .builder();
        for literal in literals {
            builder.add(literal);
        }
        builder.build().map(Self::Many)
    }

    /// The start and the literal index of the leftmost occurrence at or after `at`.
    #[inline]
    fn find(&self, text: &[u8], at: usize) -> Option<(usize, usize)> {
        match self {
            Self::One(finder) => finder.find(&text[at..]).map(|i| (at + i, 0)),
            Self::Many(searcher) => searcher
                .find_in(text, Span::from(at..text.len()))
                .map(|m| (m.start(), m.pattern().as_usize())),
        }
    }

    fn memory_usage(&self) -> usize {
        match self {
            Self::One(finder) => finder.needle().len() + 64,
            Self::Many(searcher) => searcher.memory_usage(),
        }
    }
}

/// Literals found through their first `width` bytes (the shortest literal's length, at most
/// four): many literals with few distinct prefixes, or any number sharing one prefix. The prefixes all have that width, so at most one occurs at a position and a
/// leftmost-first search restarted one byte after each occurrence visits every occurrence; at
/// each, one hash probe per distinct length of the literals with that prefix finds them.
/// Real lists (`*bot*`, `*crawl*`, `*python*`, ...) share a handful of prefixes, and a user
/// agent holding none of them costs one SIMD pass.
#[derive(Debug, Clone)]
struct PrefixedLiterals {
    searcher: LiteralSearcher,
    width: usize,
    /// Per prefix (the searcher's pattern id): the distinct lengths of its literals, ascending.
    lengths: Vec<Box<[u32]>>,
    /// Literal bytes → literal id.
    literals: ByteMap,
}

impl PrefixedLiterals {
    fn build(seed: u64, literals: &[Vec<u8>]) -> Option<Self> {
        let width = literals.iter().map(Vec::len).min()?.clamp(1, 4);
        let mut prefixes: std::collections::BTreeMap<&[u8], std::collections::BTreeSet<u32>> =
            Default::default();
        for literal in literals {
            prefixes
                .entry(&literal[..width])
                .or_default()
                .insert(literal.len() as u32);
        }
        if prefixes.len() > PACKED_MAX {
            return None;
        }
        let keys: Vec<&[u8]> = prefixes.keys().copied().collect();
        let searcher = LiteralSearcher::build(&keys)?;
        Some(Self {
            searcher,
            width,
            lengths: prefixes
                .into_values()
                .map(|lengths| lengths.into_iter().collect())
                .collect(),
            literals: ByteMap::build(
                seed,
                literals
                    .iter()
                    .enumerate()
                    .map(|(id, literal)| (literal.as_slice(), id as u32)),
            ),
        })
    }

    #[inline]
    fn each_literal(&self, text: &[u8], report: &mut impl FnMut(u32)) {
        let mut at = 0;
        while at + self.width <= text.len() {
            let Some((start, prefix)) = self.searcher.find(text, at) else {
                break;
            };
            for &len in self.lengths[prefix].iter() {
                let Some(candidate) = text.get(start..start + len as usize) else {
                    break;
                };
                if let Some(id) = self.literals.get(candidate) {
                    report(id);
                }
            }
            at = start + 1;
        }
    }
}

#[derive(Debug, Clone)]
struct PackedChunk {
    searcher: LiteralSearcher,
    /// Chunk pattern → global literal id.
    literal_ids: Vec<u32>,
    literals: Vec<Box<[u8]>>,
    /// Chunk pattern → chunk patterns that have it as a proper prefix.
    extensions: Vec<Vec<u32>>,
}

impl InnerFinder {
    fn build(seed: u64, literals: &[Vec<u8>]) -> Option<Self> {
        if literals.is_empty() {
            return Some(InnerFinder::None);
        }
        // Literals that all begin alike (`*crawl1*`, `*crawl2*`, ...): one single-needle search
        // for the shared prefix beats a multi-literal search.
        let prefixed = PrefixedLiterals::build(seed, literals);
        if let Some(prefixed) = prefixed.filter(|p| p.lengths.len() == 1) {
            return Some(InnerFinder::Prefixed(Box::new(prefixed)));
        }
        if literals.len() <= PACKED_MAX {
            let mut ids: Vec<u32> = (0..literals.len() as u32).collect();
            ids.sort_by_key(|&i| (literals[i as usize].len(), i));
            let chunk: Vec<Box<[u8]>> = ids
                .iter()
                .map(|&i| literals[i as usize].clone().into())
                .collect();
            if let Some(searcher) = LiteralSearcher::build(&chunk) {
                let extensions = chunk
                    .iter()
                    .map(|short| {
                        (0..chunk.len() as u32)
                            .filter(|&j| {
                                let long = &chunk[j as usize];
                                long.len() > short.len() && long.starts_with(short)
                            })
                            .collect()
                    })
                    .collect();
                return Some(InnerFinder::Packed(Box::new(PackedChunk {
                    searcher,
                    literal_ids: ids,
                    literals: chunk,
                    extensions,
                })));
            }
        }
        if literals.len() > PACKED_MAX {
            if let Some(prefixed) = PrefixedLiterals::build(seed, literals) {
                return Some(InnerFinder::Prefixed(Box::new(prefixed)));
            }
        }
        AhoCorasick::builder()
            .kind(Some(aho_corasick::AhoCorasickKind::DFA))
            .build(literals)
            .or_else(|_| AhoCorasick::new(literals))
            .ok()
            .map(InnerFinder::Automaton)
    }

    /// Calls `found` once with the id of every literal occurring in `text`.
    #[inline]
    fn each_literal(&self, text: &[u8], mut found: impl FnMut(u32)) {
        let mut seen: SmallVec<[u32; 8]> = SmallVec::new();
        let mut report = |id: u32| {
            if !seen.contains(&id) {
                seen.push(id);
                found(id);
            }
        };
        match self {
            InnerFinder::None => {}
            InnerFinder::Packed(chunk) => {
                let mut at = 0;
                while at < text.len() {
                    let Some((start, winner)) = chunk.searcher.find(text, at) else {
                        break;
                    };
                    report(chunk.literal_ids[winner]);
                    for &longer in &chunk.extensions[winner] {
                        if text[start..].starts_with(&chunk.literals[longer as usize]) {
                            report(chunk.literal_ids[longer as usize]);
                        }
                    }
                    at = start + 1;
                }
            }
            InnerFinder::Prefixed(prefixed) => prefixed.each_literal(text, &mut report),
            InnerFinder::Automaton(automaton) => {
                for m in automaton.find_overlapping_iter(text) {
                    report(m.pattern().as_u32());
                }
            }
        }
    }

    fn bytes(&self) -> usize {
        match self {
            InnerFinder::None => 0,
            InnerFinder::Packed(c) => {
                c.searcher.memory_usage()
                    + c.literals.iter().map(|l| l.len() + 16).sum::<usize>()
                    + c.extensions.iter().map(|e| e.len() * 4 + 24).sum::<usize>()
                    + c.literal_ids.len() * 4
            }
            InnerFinder::Prefixed(p) => {
                p.searcher.memory_usage()
                    + p.lengths.iter().map(|l| l.len() * 4 + 16).sum::<usize>()
                    + p.literals.bytes()
            }
            InnerFinder::Automaton(automaton) => automaton.memory_usage(),
        }
    }
}

enum Anchor {
    Prefix,
    Suffix,
    Inner,
    All,
}

impl UserAgentIndex {
    /// Builds the index from distinct pattern texts and their postings.
    pub(crate) fn build(seed: u64, patterns: Vec<(String, u32)>) -> Self {
        let (wild, exact): (Vec<_>, Vec<_>) =
            patterns.into_iter().partition(|(p, _)| p.contains('*'));
        let exact_map = ByteMap::build(
            seed,
            exact.iter().map(|(p, posting)| (p.as_bytes(), *posting)),
        );
        let patterns: Vec<Pattern> = wild
            .into_iter()
            .map(|(text, posting)| Pattern {
                pieces: text.split('*').map(|p| p.as_bytes().into()).collect(),
                posting,
            })
            .collect();

        fn first(p: &Pattern) -> &[u8] {
            p.pieces.first().map_or(&[][..], |x| &**x)
        }
        fn last(p: &Pattern) -> &[u8] {
            p.pieces.last().map_or(&[][..], |x| &**x)
        }

        let longest_literal = |p: &Pattern| -> Option<Vec<u8>> {
            p.pieces
                .iter()
                .filter(|x| !x.is_empty())
                .max_by_key(|x| x.len())
                .map(|x| x.to_vec())
        };

        let anchors: Vec<(Anchor, Vec<u8>)> = patterns
            .iter()
            .map(|p| {
                if !first(p).is_empty() {
                    (Anchor::Prefix, first(p).to_vec())
                } else if !last(p).is_empty() {
                    (Anchor::Suffix, last(p).iter().rev().copied().collect())
                } else {
                    match longest_literal(p) {
                        Some(literal) => (Anchor::Inner, literal),
                        None => (Anchor::All, Vec::new()),
                    }
                }
            })
            .collect();

        // Group pattern ids by (anchor kind, literal).
        let mut groups: std::collections::BTreeMap<(u8, Vec<u8>), Vec<u32>> = Default::default();
        let mut match_all = Vec::new();
        let mut shape = UserAgentStats {
            exact: exact.len(),
            by_prefix: 0,
            by_suffix: 0,
            by_inner_literal: 0,
            match_all: 0,
        };
        for (id, (kind, literal)) in anchors.into_iter().enumerate() {
            let code = match kind {
                Anchor::Prefix => {
                    shape.by_prefix += 1;
                    0
                }
                Anchor::Suffix => {
                    shape.by_suffix += 1;
                    1
                }
                Anchor::Inner => {
                    shape.by_inner_literal += 1;
                    2
                }
                Anchor::All => {
                    shape.match_all += 1;
                    match_all.push(id as u32);
                    continue;
                }
            };
            groups.entry((code, literal)).or_default().push(id as u32);
        }

        let mut anchored = Vec::new();
        let mut ranges = Vec::new();
        let mut prefix_keys = Vec::new();
        let mut suffix_keys = Vec::new();
        let mut inner_literals = Vec::new();
        let mut inner_groups = Vec::new();
        for ((code, literal), ids) in groups {
            let group = ranges.len() as u32;
            let start = anchored.len() as u32;
            anchored.extend_from_slice(&ids);
            ranges.push((start, anchored.len() as u32));
            match code {
                0 => prefix_keys.push((literal, group)),
                1 => suffix_keys.push((literal, group)),
                _ => {
                    inner_literals.push(literal);
                    inner_groups.push(group);
                }
            }
        }
        let inner = match InnerFinder::build(seed, &inner_literals) {
            Some(inner) => inner,
            None => {
                // No searcher could be built (cannot happen for literal bytes of this size);
                // verify those patterns on every request instead.
                for &group in &inner_groups {
                    let (s, e) = ranges[group as usize];
                    match_all.extend_from_slice(&anchored[s as usize..e as usize]);
                }
                inner_groups.clear();
                InnerFinder::None
            }
        };
        Self {
            seed,
            memo_owner: crate::memo::new_owner(),
            exact: exact_map,
            prefixes: LiteralTrie::build(&prefix_keys),
            suffixes: LiteralTrie::build(&suffix_keys),
            patterns,
            anchored,
            ranges,
            inner,
            inner_groups,
            match_all,
            shape,
        }
    }

    fn verify_group(&self, group: u32, ua: &[u8], found: &mut dyn FnMut(u32)) {
        let (s, e) = self.ranges[group as usize];
        for &id in &self.anchored[s as usize..e as usize] {
            let pattern = &self.patterns[id as usize];
            if pattern.matches(ua) {
                found(pattern.posting);
            }
        }
    }

    /// Appends the posting of every pattern `ua` matches.
    #[cfg(test)]
    pub(crate) fn lookup<const N: usize>(&self, ua: &str, out: &mut SmallVec<[u32; N]>) {
        self.each_match(ua, &mut |posting| out.push(posting));
    }

    /// Calls `found` with the posting of every pattern `ua` matches. With wildcard patterns,
    /// through the per-thread memo of results (a repeated user agent is not scanned again);
    /// exact patterns alone cost one hash probe, no more than the memo.
    #[inline]
    pub(crate) fn each_match(&self, ua: &str, found: &mut impl FnMut(u32)) {
        let ua = ua.as_bytes();
        if self.patterns.is_empty() {
            if let Some(posting) = self.exact.get(ua) {
                found(posting);
            }
            return;
        }
        let hash = crate::hash::hash_bytes(self.seed, ua);
        crate::memo::remembered(self.memo_owner, hash, ua, found, |found| {
            self.each_match_uncached(ua, found)
        });
    }

    /// [`UserAgentIndex::each_match`] without the memo.
    fn each_match_uncached(&self, ua: &[u8], found: &mut dyn FnMut(u32)) {
        if let Some(posting) = self.exact.get(ua) {
            found(posting);
        }
        self.prefixes.walk(ua.iter().copied(), |group| {
            self.verify_group(group, ua, found)
        });
        self.suffixes.walk(ua.iter().rev().copied(), |group| {
            self.verify_group(group, ua, found)
        });
        self.inner.each_literal(ua, |literal| {
            self.verify_group(self.inner_groups[literal as usize], ua, found)
        });
        for &id in &self.match_all {
            let pattern = &self.patterns[id as usize];
            if pattern.matches(ua) {
                found(pattern.posting);
            }
        }
    }

    pub(crate) fn stats(&self) -> UserAgentStats {
        self.shape
    }

    pub(crate) fn len(&self) -> usize {
        self.exact.len() + self.patterns.len()
    }

    pub(crate) fn bytes(&self) -> usize {
        self.exact.bytes()
            + self.prefixes.bytes()
            + self.suffixes.bytes()
            + self
                .patterns
                .iter()
                .map(|p| p.pieces.iter().map(|x| x.len() + 16).sum::<usize>() + 32)
                .sum::<usize>()
            + self.anchored.capacity() * 4
            + self.ranges.capacity() * 8
            + self.inner.bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn index(patterns: &[&str]) -> UserAgentIndex {
        UserAgentIndex::build(
            7,
            patterns
                .iter()
                .enumerate()
                .map(|(i, p)| (p.to_string(), i as u32))
                .collect(),
        )
    }

    fn hits(index: &UserAgentIndex, ua: &str) -> Vec<u32> {
        let mut out: SmallVec<[u32; 4]> = SmallVec::new();
        index.lookup(ua, &mut out);
        let mut v = out.to_vec();
        v.sort_unstable();
        v
    }

    #[test]
    fn every_kind_of_pattern_is_found_and_verified() {
        let idx = index(&[
            "curl/7.0",                 // 0 exact
            "badbot/*",                 // 1 prefix
            "*Headless",                // 2 suffix
            "*python*",                 // 3 inner
            "a*b*c",                    // 4 prefix, middle
            "*",                        // 5 everything
            "Mozilla/*Gecko*Firefox/*", // 6 prefix
        ]);
        assert_eq!(hits(&idx, "curl/7.0"), vec![0, 5]);
        assert_eq!(hits(&idx, "curl/7.01"), vec![5]);
        assert_eq!(hits(&idx, "badbot/1.0"), vec![1, 5]);
        assert_eq!(hits(&idx, "Badbot/1.0"), vec![5]);
        assert_eq!(hits(&idx, "Chrome Headless"), vec![2, 5]);
        assert_eq!(hits(&idx, "x-python-requests"), vec![3, 5]);
        assert_eq!(hits(&idx, "axxbyyc"), vec![4, 5]);
        assert_eq!(hits(&idx, "acb"), vec![5]);
        assert_eq!(hits(&idx, "Mozilla/5.0 Gecko/2010 Firefox/120"), vec![5, 6]);
        assert_eq!(hits(&idx, "Mozilla/5.0 Firefox/120 Gecko"), vec![5]);
        assert_eq!(hits(&idx, ""), vec![5]);
        let shape = idx.stats();
        assert_eq!(
            (
                shape.exact,
                shape.by_prefix,
                shape.by_suffix,
                shape.by_inner_literal,
                shape.match_all
            ),
            (1, 3, 1, 1, 1)
        );
    }

    #[test]
    fn nested_prefixes_and_suffixes_are_all_found() {
        let owned: Vec<String> = (1..=20)
            .map(|n| format!("{}*", "p".repeat(n)))
            .chain((1..=20).map(|n| format!("*{}", "s".repeat(n))))
            .collect();
        let refs: Vec<&str> = owned.iter().map(String::as_str).collect();
        let idx = index(&refs);
        assert_eq!(idx.stats().by_prefix, 20);
        assert_eq!(idx.stats().by_suffix, 20);
        assert_eq!(hits(&idx, "ppp"), vec![0, 1, 2]);
        assert_eq!(hits(&idx, "xppp"), Vec::<u32>::new());
        assert_eq!(hits(&idx, "pxss"), vec![0, 20, 21]);
        assert_eq!(hits(&idx, "ps"), vec![0, 20]);
        assert_eq!(hits(&idx, ""), Vec::<u32>::new());
    }

    #[test]
    fn inner_literals_are_all_found_even_when_they_overlap() {
        // "bo" is a prefix of "bot", "ot" overlaps "bot", "t" is inside; all start with `*`.
        let idx = index(&["*bo*", "*bot*", "*ot*", "*t*", "*zz*"]);
        assert_eq!(idx.stats().by_inner_literal, 5);
        assert_eq!(hits(&idx, "a bot"), vec![0, 1, 2, 3]);
        assert_eq!(hits(&idx, "bobo"), vec![0]);
        assert_eq!(hits(&idx, "xxzzz"), vec![4]);
        // Literals sharing one prefix: a single-needle search for it, then the literals.
        let idx = index(&["*crawl1*", "*crawl12*", "*crawl2*", "*crawler*"]);
        let InnerFinder::Prefixed(prefixed) = &idx.inner else {
            panic!("expected the prefix finder");
        };
        assert!(matches!(prefixed.searcher, LiteralSearcher::One(_)));
        assert_eq!(hits(&idx, "a crawl12 crawler"), vec![0, 1, 3]);
        assert_eq!(hits(&idx, "crawl2crawl1"), vec![0, 2]);
        assert_eq!(hits(&idx, "craw"), Vec::<u32>::new());
        assert_eq!(hits(&idx, "Crawl1"), Vec::<u32>::new());
        // Many literals with few prefixes ("k0" to "k9"): found through their prefixes.
        let owned: Vec<String> = (0..350).map(|n| format!("*k{n}*")).collect();
        let refs: Vec<&str> = owned.iter().map(String::as_str).collect();
        let idx = index(&refs);
        assert!(matches!(idx.inner, InnerFinder::Prefixed(_)));
        assert_eq!(hits(&idx, "xk349x"), vec![3, 34, 349]);
        assert_eq!(hits(&idx, "k1"), vec![1]);
        assert_eq!(hits(&idx, "k"), Vec::<u32>::new());
        assert_eq!(hits(&idx, "k34k3"), vec![3, 34]);
        // Many literals with many prefixes: the automaton, same answers.
        let owned: Vec<String> = (0..350)
            .map(|n| format!("*{}{n}*", char::from(b'A' + (n % 26) as u8)))
            .collect();
        let refs: Vec<&str> = owned.iter().map(String::as_str).collect();
        let idx = index(&refs);
        assert!(matches!(idx.inner, InnerFinder::Automaton(_)));
        assert_eq!(hits(&idx, "xX49x"), vec![49]);
        assert_eq!(hits(&idx, "B1B27"), vec![1, 27]);
    }

    #[test]
    fn verification_matches_the_model_semantics() {
        let cases = [
            ("ab*ba", "aba", false),
            ("ab*ba", "abba", true),
            ("*abc", "ababc", true),
            ("**x", "x", true),
            ("a**", "a", true),
            ("a*a", "a", false),
        ];
        for (pattern, ua, expected) in cases {
            let idx = index(&[pattern]);
            assert_eq!(!hits(&idx, ua).is_empty(), expected, "{pattern} vs {ua}");
        }
    }
}
