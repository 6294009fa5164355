//! Managed lists (`auth0_managed`) compiled into lookup tables once, shared by every policy
//! compiled with them.
//!
//! One set of tables holds every configured list: the client-address tables map each address
//! to the set of lists whose networks hold it (a bit mask, bit `i` for
//! [`ManagedListName::ALL`]`[i]`), the JA3 and JA4 tables each fingerprint to the lists that
//! name it. The masks of nested networks are folded into the inner network when the tables are
//! built, so a lookup reads the innermost network only. A policy maps each of the 32 masks to
//! one posting (the rules naming any list of the mask, in their roles), so a request costs one
//! address lookup, two fingerprint lookups and one array read, however many lists or rules
//! there are, and a list named by ten rules is stored once.
//!
//! The tables depend on the lists' content only, not on the rules: a rule change recompiles
//! the policy over the same [`ManagedIndex`] (an `Arc`), and only a list change rebuilds it.
use std::hint::select_unpredictable;
use std::net::IpAddr;
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use netacl_model::{ManagedEntry, ManagedListName, ManagedLists};
use serde::Serialize;

use crate::hash::{ja3_key, random_seed, ByteMap, FixedMap, EMPTY};
use crate::range::{RangeTable, NONE};
use crate::request::{v4_bits, Request};

/// The masks a lookup can give: one bit per list name.
pub(crate) const MASKS: usize = 1 << ManagedListName::ALL.len();

/// What the tables hold about one list (for the status view and `netacl bench`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ManagedListStats {
    /// The public name.
    pub name: &'static str,
    /// Whether the list has content (an empty list is configured).
    pub configured: bool,
    /// Entries of each kind.
    pub ipv4: usize,
    /// IPv6 entries.
    pub ipv6: usize,
    /// JA3 entries.
    pub ja3: usize,
    /// JA4 entries.
    pub ja4: usize,
    /// The content's digest ([`netacl_model::ManagedList::digest`]); absent when unconfigured.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
}

/// Every configured managed list, compiled. Immutable; share it in an `Arc`.
#[derive(Debug)]
pub struct ManagedIndex {
    lists: ManagedLists,
    v4: RangeTable<u32>,
    v6: RangeTable<u128>,
    ja3: Option<FixedMap<[u64; 2]>>,
    ja4: Option<ByteMap>,
    /// Per list: the expected share of requests whose client address or fingerprint is on it
    /// (the anchor cost model of `compile.rs`); 0 for an unconfigured or empty list.
    shares: [f64; ManagedListName::ALL.len()],
    build_micros: u64,
    bytes: usize,
}

/// The share of addresses a network covers, as the compiler's cost model counts it.
fn v4_share(len: u8) -> f64 {
    (-f64::from(len)).exp2().max((-24f64).exp2())
}

fn v6_share(len: u8) -> f64 {
    (3.0 - f64::from(len)).exp2().clamp((-24f64).exp2(), 1.0)
}

/// Folds the masks of enclosing networks into each network: with `nets` sorted by first
/// address, outer networks first, each network's value becomes its own mask OR'd with every
/// network that holds it. CIDR blocks are nested or disjoint, so a stack of the open networks
/// suffices.
fn fold_nested<A: Copy + Ord>(nets: &mut [(A, A, u32)]) {
    let mut open: Vec<(A, u32)> = Vec::new();
    for net in nets.iter_mut() {
        while open.last().is_some_and(|&(last, _)| last < net.0) {
            open.pop();
        }
        if let Some(&(_, outer)) = open.last() {
            net.2 |= outer;
        }
        open.push((net.1, net.2));
    }
}

/// Sorts `(first, last, mask)` networks outer-first, merges equal networks (OR of their masks)
/// and folds nested masks inward: the input of [`RangeTable::build`].
fn networks<A: Copy + Ord>(mut nets: Vec<(A, A, u32)>) -> Vec<(A, A, u32)> {
    nets.sort_unstable_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)));
    let mut merged: Vec<(A, A, u32)> = Vec::with_capacity(nets.len());
    for net in nets {
        match merged.last_mut() {
            Some(last) if last.0 == net.0 && last.1 == net.1 => last.2 |= net.2,
            _ => merged.push(net),
        }
    }
    fold_nested(&mut merged);
    merged
}

/// Keys with their masks OR'd, for the hash tables.
fn merged_keys<K: Ord + Copy>(mut keys: Vec<(K, u32)>) -> Vec<(K, u32)> {
    keys.sort_unstable();
    let mut merged: Vec<(K, u32)> = Vec::with_capacity(keys.len());
    for (key, mask) in keys {
        match merged.last_mut() {
            Some(last) if last.0 == key => last.1 |= mask,
            _ => merged.push((key, mask)),
        }
    }
    merged
}

impl ManagedIndex {
    /// Compiles `lists`. Costs time linear in the entries (a sort); a million CIDRs take a
    /// few hundred milliseconds.
    pub fn build(lists: &ManagedLists) -> ManagedIndex {
        let started = Instant::now();
        let mut v4 = Vec::new();
        let mut v6 = Vec::new();
        let mut ja3 = Vec::new();
        let mut ja4: Vec<(String, u32)> = Vec::new();
        let mut shares = [0.0f64; ManagedListName::ALL.len()];
        for (name, list) in lists.iter() {
            let bit = 1u32 << name.index();
            let mut share = 0.0;
            let counts = list.counts();
            v4.reserve(counts.ipv4);
            for entry in list.items() {
                match entry {
                    ManagedEntry::Ipv4(e) => {
                        let net = e.net();
                        share += v4_share(net.prefix_len());
                        v4.push((u32::from(net.network()), u32::from(net.broadcast()), bit));
                    }
                    ManagedEntry::Ipv6(e) => {
                        let net = e.net();
                        share += v6_share(net.prefix_len());
                        v6.push((u128::from(net.network()), u128::from(net.broadcast()), bit));
                    }
                    ManagedEntry::Ja3(f) => {
                        share += 1.0 / 50.0;
                        ja3.push((ja3_key(f.bytes()), bit));
                    }
                    ManagedEntry::Ja4(f) => {
                        share += 1.0 / 50.0;
                        ja4.push((f.canonical(), bit));
                    }
                }
            }
            shares[name.index()] = share.min(1.0);
        }
        let seed = random_seed();
        let ja3 = (!ja3.is_empty()).then(|| FixedMap::build(seed, &merged_keys(ja3)));
        let ja4 = (!ja4.is_empty()).then(|| {
            let merged = merged_keys(
                ja4.iter()
                    .map(|(k, m)| (k.as_str(), *m))
                    .collect::<Vec<_>>(),
            );
            ByteMap::build_caseless(seed, merged.iter().map(|(k, m)| (k.as_bytes(), *m)))
        });
        let v4 = RangeTable::build(networks(v4));
        let v6 = RangeTable::build(networks(v6));
        let bytes = v4.bytes()
            + v6.bytes()
            + ja3.as_ref().map_or(0, FixedMap::bytes)
            + ja4.as_ref().map_or(0, ByteMap::bytes);
        ManagedIndex {
            lists: lists.clone(),
            v4,
            v6,
            ja3,
            ja4,
            shares,
            build_micros: started.elapsed().as_micros() as u64,
            bytes,
        }
    }

    /// The index of no list (shared: every call gives the same `Arc`).
    pub fn empty() -> Arc<ManagedIndex> {
        static EMPTY_INDEX: OnceLock<Arc<ManagedIndex>> = OnceLock::new();
        Arc::clone(EMPTY_INDEX.get_or_init(|| Arc::new(ManagedIndex::build(&ManagedLists::new()))))
    }

    /// The lists it was built from.
    pub fn lists(&self) -> &ManagedLists {
        &self.lists
    }

    /// Whether `name` has content (possibly empty).
    pub fn is_configured(&self, name: ManagedListName) -> bool {
        self.lists.get(name).is_some()
    }

    /// Whether `name` holds at least one entry.
    pub fn has_entries(&self, name: ManagedListName) -> bool {
        self.lists.get(name).is_some_and(|l| !l.is_empty())
    }

    /// The bits of the lists holding at least one entry (the only bits a lookup can set).
    pub(crate) fn masks_with_entries(&self) -> usize {
        ManagedListName::ALL
            .into_iter()
            .filter(|&name| self.has_entries(name))
            .fold(0, |m, name| m | 1 << name.index())
    }

    /// Time the build took.
    pub fn build_time(&self) -> std::time::Duration {
        std::time::Duration::from_micros(self.build_micros)
    }

    /// Approximate bytes of the tables.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Per list name: whether it is configured and what it holds.
    pub fn stats(&self) -> Vec<ManagedListStats> {
        ManagedListName::ALL
            .into_iter()
            .map(|name| {
                let list = self.lists.get(name);
                let counts = list.map(|l| l.counts()).unwrap_or_default();
                ManagedListStats {
                    name: name.as_str(),
                    configured: list.is_some(),
                    ipv4: counts.ipv4,
                    ipv6: counts.ipv6,
                    ja3: counts.ja3,
                    ja4: counts.ja4,
                    digest: list.map(|l| l.digest().to_owned()),
                }
            })
            .collect()
    }

    pub(crate) fn v4(&self) -> &RangeTable<u32> {
        &self.v4
    }

    pub(crate) fn v6(&self) -> &RangeTable<u128> {
        &self.v6
    }

    pub(crate) fn ja3(&self) -> Option<&FixedMap<[u64; 2]>> {
        self.ja3.as_ref()
    }

    pub(crate) fn ja4(&self) -> Option<&ByteMap> {
        self.ja4.as_ref()
    }

    /// The anchor cost of naming `names` (see `compile.rs`).
    pub(crate) fn share(&self, names: &[ManagedListName]) -> f64 {
        names
            .iter()
            .map(|n| self.shares[n.index()])
            .sum::<f64>()
            .min(1.0)
    }

    /// Starts loading the block a lookup of the client address reads (large IPv4 tables).
    #[inline(always)]
    pub(crate) fn prefetch(&self, request: &Request<'_>) {
        if let Some(IpAddr::V4(a)) = request.client_ip() {
            self.v4.prefetch(v4_bits(a));
        }
    }

    /// The lists holding the request's client address, JA3 or JA4, as a mask (0: none).
    #[inline(always)]
    pub(crate) fn mask_of(&self, request: &Request<'_>) -> u32 {
        let present = |value: u32| select_unpredictable(value == NONE, 0, value);
        let mut mask = match request.client_ip() {
            Some(IpAddr::V4(a)) => present(self.v4.innermost(v4_bits(a)).0),
            Some(IpAddr::V6(a)) => present(self.v6.innermost(u128::from(a)).0),
            None => 0,
        };
        if let (Some(map), Some(ja3)) = (&self.ja3, request.ja3()) {
            mask |= present(map.find(ja3_key(ja3)));
        }
        if let (Some(map), Some(ja4)) = (&self.ja4, request.ja4()) {
            mask |= present(map.find_caseless(ja4.as_bytes()));
        }
        const { assert!(EMPTY == NONE, "hash misses and range misses read alike") };
        mask & (MASKS as u32 - 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use netacl_model::{ManagedList, RequestScope};

    fn list(lines: &str) -> Arc<ManagedList> {
        Arc::new(ManagedList::from_lines(lines, 100).unwrap())
    }

    #[test]
    fn masks_fold_nested_networks_and_merge_lists() {
        let mut lists = ManagedLists::new();
        lists.set(
            ManagedListName::Tor,
            Some(list("10.0.0.0/8\n192.0.2.1\n2001:db8::/32\n")),
        );
        lists.set(
            ManagedListName::Vpn,
            Some(list(
                "10.1.0.0/16\n10.1.2.3/8\ne7d705a3286e19ea42f587b344ee6865\n\
                 t13d1516h2_8daaf6152771_b186095e22b6\n",
            )),
        );
        lists.set(ManagedListName::Proxy, Some(list("")));
        let index = ManagedIndex::build(&lists);
        let tor = 1 << ManagedListName::Tor.index();
        let vpn = 1 << ManagedListName::Vpn.index();
        let mask = |ip: &str| {
            index.mask_of(
                &Request::new(RequestScope::Authentication).with_client_ip(ip.parse().unwrap()),
            )
        };
        // 10.0.0.0/8 is on both lists (vpn wrote it with host bits), 10.1/16 on vpn only.
        assert_eq!(mask("10.9.9.9"), tor | vpn);
        assert_eq!(mask("10.1.9.9"), tor | vpn);
        assert_eq!(mask("192.0.2.1"), tor);
        assert_eq!(mask("::ffff:192.0.2.1"), tor, "IPv4-mapped is IPv4");
        assert_eq!(mask("192.0.2.2"), 0);
        assert_eq!(mask("2001:db8:1::1"), tor);
        assert_eq!(mask("2001:db9::1"), 0);
        let fingerprinted = Request::new(RequestScope::Management)
            .with_ja3("E7D705A3286E19EA42F587B344EE6865")
            .with_ja4("T13D1516H2_8DAAF6152771_B186095E22B6");
        assert_eq!(index.mask_of(&fingerprinted), vpn);
        assert!(index.is_configured(ManagedListName::Proxy));
        assert!(!index.has_entries(ManagedListName::Proxy));
        assert!(!index.is_configured(ManagedListName::LowReputation));
        let stats = index.stats();
        assert_eq!(stats[ManagedListName::Vpn.index()].ja4, 1);
        assert_eq!(stats[ManagedListName::Vpn.index()].ipv4, 2);
        assert!(stats[ManagedListName::LowReputation.index()]
            .digest
            .is_none());
        assert_eq!(
            ManagedIndex::empty().mask_of(&fingerprinted),
            0,
            "no list, no mask"
        );
    }

    #[test]
    fn nested_masks_agree_with_a_scan() {
        // Random nested networks over a small space, on random lists: every address's mask is
        // the OR of the lists of the networks holding it.
        let mut state = 0x9e37_79b9_u64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for _ in 0..50 {
            let mut lists = ManagedLists::new();
            let mut nets: Vec<(u32, u8, u32)> = Vec::new();
            for name in ManagedListName::ALL {
                let mut lines = String::new();
                for _ in 0..next() % 6 {
                    let len = 20 + (next() % 13) as u8;
                    let addr = 0x0a00_0000 | (next() as u32 & 0x000f_ffff);
                    let net = ipnet::Ipv4Net::new(addr.into(), len).unwrap().trunc();
                    lines.push_str(&format!("{net}\n"));
                    nets.push((u32::from(net.network()), len, 1 << name.index()));
                }
                lists.set(name, Some(list(&lines)));
            }
            let index = ManagedIndex::build(&lists);
            for _ in 0..200 {
                let addr = 0x0a00_0000 | (next() as u32 & 0x000f_ffff);
                let want = nets
                    .iter()
                    .filter(|(net, len, _)| {
                        let mask = u32::MAX.checked_shl(32 - u32::from(*len)).unwrap_or(0);
                        addr & mask == *net
                    })
                    .fold(0, |m, (_, _, bit)| m | bit);
                let request = Request::new(RequestScope::Authentication)
                    .with_client_ip(std::net::Ipv4Addr::from(addr).into());
                assert_eq!(index.mask_of(&request), want, "{addr:#x}");
            }
        }
    }
}
