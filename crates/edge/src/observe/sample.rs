//! The edge's traffic sample: a bounded ring of recent requests' signals, for the impact
//! preview (`POST /_netacl/v1/network-acls/preview` without `requests`).
//!
//! Every [`TrafficSample::every`]-th request a thread decides is copied into the next slot of a
//! ring of [`TrafficSample::capacity`] preallocated slots, so the ring holds the signals of the
//! last `capacity` sampled requests. The per-request path stays free of allocation and of
//! waiting: a request that is not sampled costs one thread-local countdown; a sampled one takes
//! its slot with one atomic increment and a `try_lock` (a slot being read, or written by another
//! thread that wrapped the ring, is skipped, never waited for) and copies fixed-size values into
//! it. A request carrying a value longer than a slot holds (a user agent over
//! [`MAX_USER_AGENT`] bytes, say) is not sampled (the next sampled request takes the turn), so a
//! sampled request is always replayed exactly as it was decided.
//!
//! What a slot holds is exactly what the evaluator reads ([`netacl_eval::RequestInput`]'s keys):
//! the request scope (not the path: no query string, nothing else of the target), the connecting
//! and client addresses, country, subdivision and ASN as the GeoIP databases answer for the
//! client address, JA3, JA4, the user agent, the hostname (SNI, or `Host` without SNI) and the
//! id of the key whose signature verified. No other header, no body, no signature material.
//!
//! A multi-tenant edge keeps one ring for all its tenants: each slot also holds the key of the
//! tenant whose request it copied ([`TenantRuleCounts::sample_key`](crate::TenantRuleCounts::sample_key),
//! never reused, so a tenant deleted and created again does not see its predecessor's
//! requests), and [`TrafficSample::requests_of`] reads one tenant's slots. The memory stays that
//! of the ring, whatever the number of tenants; a busy tenant's requests take more of the ring
//! than a quiet one's (the ring holds the platform's last sampled requests).
//!
//! ```
//! use netacl_edge::TrafficSample;
//!
//! let sample = TrafficSample::new(10_000, 16);
//! assert_eq!(sample.capacity(), 10_000);
//! assert!(sample.requests().is_empty());
//! assert_eq!(TrafficSample::slot_bytes() * 10_000 < 12 * 1024 * 1024, true);
//! ```
use std::cell::Cell;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;

use netacl_eval::RequestInput;
use netacl_model::RequestScope;

use crate::signals::geo::GeoInfo;

/// Default slots of a sample (`--sample-size`).
pub const DEFAULT_SAMPLE_SIZE: usize = 10_000;
/// Default sampling interval (`--sample-every`): one request in this many, per thread.
pub const DEFAULT_SAMPLE_EVERY: u32 = 16;
/// The longest user agent a slot holds (bytes).
pub const MAX_USER_AGENT: usize = 512;
/// The longest hostname a slot holds (a DNS name is at most 253 bytes).
pub const MAX_HOSTNAME: usize = 253;
/// The longest JA4 fingerprint a slot holds (a JA4 is 36 characters).
const MAX_JA4: usize = 48;
/// The longest JA3 a slot holds (32 hex digits).
const MAX_JA3: usize = 32;
/// The longest verified key id a slot holds.
const MAX_KEY_ID: usize = 64;

/// Text of at most `N` bytes held inline.
#[derive(Clone, Copy)]
struct Inline<const N: usize> {
    len: u16,
    bytes: [u8; N],
}

impl<const N: usize> Inline<N> {
    const EMPTY: Self = Self {
        len: 0,
        bytes: [0; N],
    };

    /// Whether `value` fits.
    fn fits(value: Option<&str>) -> bool {
        value.is_none_or(|v| v.len() <= N)
    }

    /// Stores `value` (which fits); `None` is stored as length `u16::MAX`.
    fn set(&mut self, value: Option<&str>) {
        match value {
            Some(v) if v.len() <= N => {
                self.bytes[..v.len()].copy_from_slice(v.as_bytes());
                self.len = v.len() as u16;
            }
            _ => self.len = u16::MAX,
        }
    }

    fn get(&self) -> Option<String> {
        let len = usize::from(self.len);
        if len > N {
            return None;
        }
        std::str::from_utf8(&self.bytes[..len])
            .ok()
            .map(str::to_owned)
    }
}

/// One sampled request's signals.
#[derive(Clone, Copy)]
struct Slot {
    filled: bool,
    /// The tenant's sample key (0: the single-tenant edge's requests).
    key: u64,
    scope: RequestScope,
    connecting_ip: Option<IpAddr>,
    client_ip: Option<IpAddr>,
    geo: GeoInfo,
    ja3: Inline<MAX_JA3>,
    ja4: Inline<MAX_JA4>,
    user_agent: Inline<MAX_USER_AGENT>,
    hostname: Inline<MAX_HOSTNAME>,
    key_id: Inline<MAX_KEY_ID>,
}

impl Slot {
    const EMPTY: Slot = Slot {
        filled: false,
        key: 0,
        scope: RequestScope::Management,
        connecting_ip: None,
        client_ip: None,
        geo: GeoInfo {
            country: None,
            subdivision: None,
            asn: None,
        },
        ja3: Inline::EMPTY,
        ja4: Inline::EMPTY,
        user_agent: Inline::EMPTY,
        hostname: Inline::EMPTY,
        key_id: Inline::EMPTY,
    };

    fn to_input(self) -> Option<RequestInput> {
        if !self.filled {
            return None;
        }
        Some(RequestInput {
            scope: Some(self.scope.as_str().to_owned()),
            path: None,
            client_ip: self.client_ip.map(|ip| ip.to_string()),
            connecting_ip: self.connecting_ip.map(|ip| ip.to_string()),
            asn: self.geo.asn,
            country: self.geo.country_str().map(str::to_owned),
            subdivision: self.geo.subdivision.as_ref().map(|s| s.as_str().to_owned()),
            ja3: self.ja3.get(),
            ja4: self.ja4.get(),
            user_agent: self.user_agent.get(),
            hostname: self.hostname.get(),
            http_message_signature: self.key_id.get(),
        })
    }
}

/// The signals of one decided request, borrowed from the decision path (see the module docs).
#[derive(Debug, Clone, Copy)]
pub(crate) struct SampledSignals<'a> {
    /// The tenant's sample key (0 in single-tenant mode).
    pub key: u64,
    pub scope: RequestScope,
    pub connecting_ip: Option<IpAddr>,
    pub client_ip: Option<IpAddr>,
    pub geo: GeoInfo,
    pub ja3: Option<&'a str>,
    pub ja4: Option<&'a str>,
    pub user_agent: Option<&'a str>,
    pub hostname: Option<&'a str>,
    pub key_id: Option<&'a str>,
}

thread_local! {
    /// Requests this thread still decides before it samples one.
    static COUNTDOWN: Cell<u32> = const { Cell::new(0) };
}

/// A bounded ring of recent requests' signals (see the module docs).
pub struct TrafficSample {
    slots: Box<[Mutex<Slot>]>,
    every: u32,
    /// Slots taken so far (the next slot is this modulo the capacity).
    next: AtomicU64,
    /// Sampled requests not kept: a value too long for a slot, or the slot busy.
    skipped: AtomicU64,
}

impl std::fmt::Debug for TrafficSample {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TrafficSample")
            .field("capacity", &self.capacity())
            .field("every", &self.every)
            .field("sampled", &self.sampled())
            .finish_non_exhaustive()
    }
}

impl TrafficSample {
    /// A sample of `capacity` slots (allocated now, [`slot_bytes`](Self::slot_bytes) each)
    /// taking one request in `every` (per deciding thread; 0 is taken as 1).
    pub fn new(capacity: usize, every: u32) -> Self {
        Self {
            slots: (0..capacity).map(|_| Mutex::new(Slot::EMPTY)).collect(),
            every: every.max(1),
            next: AtomicU64::new(0),
            skipped: AtomicU64::new(0),
        }
    }

    /// The bytes one slot takes (the sample's memory is this times the capacity).
    pub fn slot_bytes() -> usize {
        std::mem::size_of::<Mutex<Slot>>()
    }

    /// How many requests the ring holds at most.
    pub fn capacity(&self) -> usize {
        self.slots.len()
    }

    /// One request in how many is sampled (per thread).
    pub fn every(&self) -> u32 {
        self.every
    }

    /// Requests sampled since the start (kept or skipped).
    pub fn sampled(&self) -> u64 {
        self.next.load(Relaxed)
    }

    /// Sampled requests that were not kept (a value longer than a slot holds, or a busy slot).
    pub fn skipped(&self) -> u64 {
        self.skipped.load(Relaxed)
    }

    /// Whether this request is to be sampled: the thread's countdown (one in `every`).
    #[inline]
    pub(crate) fn due(&self) -> bool {
        if self.slots.is_empty() {
            return false;
        }
        COUNTDOWN.with(|left| match left.get() {
            0 => {
                left.set(self.every - 1);
                true
            }
            n => {
                left.set(n - 1);
                false
            }
        })
    }

    /// Copies `signals` into the next slot (no allocation, no waiting).
    pub(crate) fn record(&self, signals: &SampledSignals<'_>) {
        let fits = Inline::<MAX_JA3>::fits(signals.ja3)
            && Inline::<MAX_JA4>::fits(signals.ja4)
            && Inline::<MAX_USER_AGENT>::fits(signals.user_agent)
            && Inline::<MAX_HOSTNAME>::fits(signals.hostname)
            && Inline::<MAX_KEY_ID>::fits(signals.key_id);
        let position = self.next.fetch_add(1, Relaxed);
        let Some(slot) = self
            .slots
            .get((position % self.slots.len() as u64) as usize)
        else {
            return;
        };
        let guard = if fits { slot.try_lock().ok() } else { None };
        let Some(mut slot) = guard else {
            self.skipped.fetch_add(1, Relaxed);
            return;
        };
        slot.filled = true;
        slot.key = signals.key;
        slot.scope = signals.scope;
        slot.connecting_ip = signals.connecting_ip;
        slot.client_ip = signals.client_ip;
        slot.geo = signals.geo;
        slot.ja3.set(signals.ja3);
        slot.ja4.set(signals.ja4);
        slot.user_agent.set(signals.user_agent);
        slot.hostname.set(signals.hostname);
        slot.key_id.set(signals.key_id);
    }

    /// The requests held, newest first, as request objects (`netacl eval`'s keys: what the
    /// preview replays), whatever tenant they came from. Reads each slot under its lock (a
    /// request being sampled meanwhile waits for nothing: it skips that slot).
    pub fn requests(&self) -> Vec<RequestInput> {
        self.collect(|_| true)
            .into_iter()
            .map(|(_, input)| input)
            .collect()
    }

    /// The requests of the tenant with sample `key` (see the module docs), newest first.
    pub fn requests_of(&self, key: u64) -> Vec<RequestInput> {
        self.collect(|k| k == key)
            .into_iter()
            .map(|(_, input)| input)
            .collect()
    }

    /// Every request held with its tenant's sample key, newest first.
    pub fn keyed_requests(&self) -> Vec<(u64, RequestInput)> {
        self.collect(|_| true)
    }

    fn collect(&self, wanted: impl Fn(u64) -> bool) -> Vec<(u64, RequestInput)> {
        let len = self.slots.len();
        if len == 0 {
            return Vec::new();
        }
        let taken = self.next.load(Relaxed);
        let next = (taken % len as u64) as usize;
        let mut out = Vec::with_capacity(len.min(usize::try_from(taken).unwrap_or(len)));
        for back in 1..=len {
            let index = (next + len - back) % len;
            let slot = *self.slots[index]
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if !wanted(slot.key) {
                continue;
            }
            if let Some(input) = slot.to_input() {
                out.push((slot.key, input));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn signals(ua: &str) -> SampledSignals<'_> {
        SampledSignals {
            key: 0,
            scope: RequestScope::Authentication,
            connecting_ip: Some("10.0.0.1".parse().unwrap()),
            client_ip: Some("192.0.2.7".parse().unwrap()),
            geo: GeoInfo {
                country: Some(*b"US"),
                subdivision: None,
                asn: Some(64500),
            },
            ja3: None,
            ja4: Some("t13d1516h2_8daaf6152771_b186095e22b6"),
            user_agent: Some(ua),
            hostname: Some("acme.test"),
            key_id: None,
        }
    }

    #[test]
    fn the_ring_keeps_the_last_requests_newest_first() {
        let sample = TrafficSample::new(3, 1);
        for ua in ["a/1", "b/1", "c/1", "d/1"] {
            sample.record(&signals(ua));
        }
        let uas: Vec<_> = sample
            .requests()
            .into_iter()
            .map(|r| r.user_agent.unwrap())
            .collect();
        assert_eq!(uas, ["d/1", "c/1", "b/1"]);
        let first = &sample.requests()[0];
        assert_eq!(first.scope.as_deref(), Some("authentication"));
        assert_eq!(first.client_ip.as_deref(), Some("192.0.2.7"));
        assert_eq!(first.country.as_deref(), Some("US"));
        assert_eq!(first.asn, Some(64500));
        assert_eq!(first.path, None);
        assert_eq!(first.ja3, None);
        assert!(first.to_request().is_ok());
    }

    #[test]
    fn one_ring_many_tenants() {
        let sample = TrafficSample::new(4, 1);
        for (key, ua) in [(7, "a/1"), (8, "b/1"), (7, "c/1"), (8, "d/1"), (7, "e/1")] {
            sample.record(&SampledSignals { key, ..signals(ua) });
        }
        let of = |key| -> Vec<String> {
            sample
                .requests_of(key)
                .into_iter()
                .map(|r| r.user_agent.unwrap())
                .collect()
        };
        // The ring holds the last four: "a/1" is gone.
        assert_eq!(of(7), ["e/1", "c/1"]);
        assert_eq!(of(8), ["d/1", "b/1"]);
        assert!(of(9).is_empty());
        assert_eq!(sample.requests().len(), 4);
        let keys: Vec<u64> = sample.keyed_requests().iter().map(|(k, _)| *k).collect();
        assert_eq!(keys, [7, 8, 7, 8]);
    }

    #[test]
    fn values_too_long_are_not_sampled() {
        let sample = TrafficSample::new(4, 1);
        let long = "x".repeat(MAX_USER_AGENT + 1);
        sample.record(&signals(&long));
        sample.record(&signals(&"y".repeat(MAX_USER_AGENT)));
        assert_eq!(sample.skipped(), 1);
        let kept = sample.requests();
        assert_eq!(kept.len(), 1);
        assert_eq!(
            kept[0].user_agent.as_ref().map(String::len),
            Some(MAX_USER_AGENT)
        );
    }

    #[test]
    fn one_in_every() {
        let sample = TrafficSample::new(10, 4);
        // A fresh thread: its countdown starts at zero.
        let due = std::thread::scope(|s| {
            s.spawn(|| (0..12).filter(|_| sample.due()).count())
                .join()
                .unwrap()
        });
        assert_eq!(due, 3);
        assert!(!TrafficSample::new(0, 1).due(), "no slots: nothing sampled");
    }

    #[test]
    fn a_slot_takes_at_most_a_kibibyte() {
        eprintln!("slot: {} bytes", TrafficSample::slot_bytes());
        assert!(TrafficSample::slot_bytes() <= 1024);
    }
}
