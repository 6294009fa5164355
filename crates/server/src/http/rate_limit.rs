//! Per-client rate limiting of the admin API: a token bucket per key.
//!
//! ```
//! use netacl_server::rate_limit::{RateLimitConfig, RateLimiter};
//!
//! let limiter = RateLimiter::new(RateLimitConfig { burst: 2, per_second: 1.0 })?;
//! assert!(limiter.check("client-a").allowed);
//! assert!(limiter.check("client-a").allowed);
//! let refused = limiter.check("client-a");
//! assert!(!refused.allowed);
//! assert!(refused.retry_after_secs >= 1);
//! assert!(limiter.check("client-b").allowed); // every key has its own bucket
//!
//! let mut headers = http::HeaderMap::new();
//! refused.apply_headers(&mut headers);
//! assert_eq!(headers["x-ratelimit-limit"], "2");
//! assert_eq!(headers["x-ratelimit-remaining"], "0");
//! assert!(headers.contains_key("retry-after"));
//! # Ok::<(), netacl_server::rate_limit::RateLimitConfigError>(())
//! ```
//!
//! Each key (the server uses the token's client id, or the peer address for requests without
//! a valid token and for `POST /oauth/token`: IPv4 by address, IPv6 by its /64) has a bucket of `burst` tokens refilled at `per_second`. A request takes one token or is
//! refused. The buckets live in 32 shards, each a `Mutex<HashMap>` locked only for the few
//! arithmetic steps of one check (never across an await), so concurrent requests of
//! different clients rarely meet on a lock. Memory is bounded: a shard holds at most
//! `max_keys / 32` buckets; when a new key arrives at a full shard, the buckets that have
//! refilled completely are dropped (a full bucket carries no state: a new one is
//! identical), and if none has, the least recently used one is.

use http::{HeaderMap, HeaderName, HeaderValue};
use std::collections::hash_map::RandomState;
use std::collections::HashMap;
use std::fmt;
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Default burst: requests a client may send at once.
pub const DEFAULT_BURST: u32 = 100;
/// Default sustained rate, requests per second.
pub const DEFAULT_PER_SECOND: f64 = 50.0;
/// Default bound on the number of tracked keys.
pub const DEFAULT_MAX_KEYS: usize = 100_000;

const SHARDS: usize = 32;

/// `X-RateLimit-Limit`: the bucket size.
pub static X_RATELIMIT_LIMIT: HeaderName = HeaderName::from_static("x-ratelimit-limit");
/// `X-RateLimit-Remaining`: requests left right now.
pub static X_RATELIMIT_REMAINING: HeaderName = HeaderName::from_static("x-ratelimit-remaining");
/// `X-RateLimit-Reset`: UNIX seconds when the bucket is full again.
pub static X_RATELIMIT_RESET: HeaderName = HeaderName::from_static("x-ratelimit-reset");

/// The limit applied to every key.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RateLimitConfig {
    /// Bucket size: how many requests may be sent at once. `0` disables limiting.
    /// Default 100.
    pub burst: u32,
    /// Refill rate in requests per second; must be finite and positive unless disabled.
    /// Default 50.
    pub per_second: f64,
}

impl RateLimitConfig {
    /// No limiting at all (load tests): every check is allowed and no headers are written.
    pub const fn disabled() -> Self {
        Self {
            burst: 0,
            per_second: 0.0,
        }
    }

    /// Whether this configuration disables limiting.
    pub fn is_disabled(&self) -> bool {
        self.burst == 0
    }
}

impl Default for RateLimitConfig {
    fn default() -> Self {
        Self {
            burst: DEFAULT_BURST,
            per_second: DEFAULT_PER_SECOND,
        }
    }
}

/// Why a rate-limit configuration was refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum RateLimitConfigError {
    /// `per_second` is zero, negative, NaN or infinite while `burst` is not 0.
    #[error("rate limit refill rate must be a finite positive number, got {0}")]
    InvalidRate(f64),
    /// `max_keys` is smaller than the number of shards (32).
    #[error("rate limiter must track at least {SHARDS} keys, got {0}")]
    TooFewKeys(usize),
}

/// A source of the current time, injectable for tests.
pub trait Clock: Send + Sync + 'static {
    /// Time since the UNIX epoch.
    fn now(&self) -> Duration;
}

/// The system clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Duration {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
    }
}

/// A clock that moves only when told to (tests, simulations). Clones share the time.
#[derive(Debug, Clone, Default)]
pub struct ManualClock {
    nanos: Arc<AtomicU64>,
}

impl ManualClock {
    /// A clock showing `since_epoch`.
    pub fn new(since_epoch: Duration) -> Self {
        let clock = Self::default();
        clock.set(since_epoch);
        clock
    }

    /// Set the time.
    pub fn set(&self, since_epoch: Duration) {
        let nanos = u64::try_from(since_epoch.as_nanos()).unwrap_or(u64::MAX);
        self.nanos.store(nanos, Ordering::SeqCst);
    }

    /// Move the time forward.
    pub fn advance(&self, by: Duration) {
        let by = u64::try_from(by.as_nanos()).unwrap_or(u64::MAX);
        let _ = self
            .nanos
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                Some(n.saturating_add(by))
            });
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Duration {
        Duration::from_nanos(self.nanos.load(Ordering::SeqCst))
    }
}

/// The outcome of one [`RateLimiter::check`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use]
pub struct RateLimitDecision {
    /// Whether the request may proceed.
    pub allowed: bool,
    /// Whether limiting is active; `false` when disabled (then no headers are written).
    pub enforced: bool,
    /// The bucket size (`X-RateLimit-Limit`).
    pub limit: u32,
    /// Whole requests left after this one (`X-RateLimit-Remaining`).
    pub remaining: u32,
    /// UNIX seconds when the bucket will be full again (`X-RateLimit-Reset`).
    pub reset_unix_secs: u64,
    /// Seconds until a request would be allowed (`Retry-After`); 0 when allowed.
    pub retry_after_secs: u64,
}

impl RateLimitDecision {
    /// Write `X-RateLimit-Limit`, `X-RateLimit-Remaining` and `X-RateLimit-Reset`, plus
    /// `Retry-After` when refused. Writes nothing when limiting is disabled.
    pub fn apply_headers(&self, headers: &mut HeaderMap) {
        if !self.enforced {
            return;
        }
        headers.insert(X_RATELIMIT_LIMIT.clone(), HeaderValue::from(self.limit));
        headers.insert(
            X_RATELIMIT_REMAINING.clone(),
            HeaderValue::from(self.remaining),
        );
        headers.insert(
            X_RATELIMIT_RESET.clone(),
            HeaderValue::from(self.reset_unix_secs),
        );
        if !self.allowed {
            headers.insert(
                http::header::RETRY_AFTER,
                HeaderValue::from(self.retry_after_secs),
            );
        }
    }
}

/// One shard of the bucket map.
type Shard = Mutex<HashMap<Box<str>, Bucket>>;

#[derive(Debug, Clone, Copy)]
struct Bucket {
    /// Tokens available at `updated` (fractional).
    tokens: f64,
    /// Clock time of the last update (integer nanoseconds keep refill arithmetic exact).
    updated: Duration,
}

/// Token-bucket rate limiter keyed by client; see the [module docs](self).
pub struct RateLimiter {
    config: RateLimitConfig,
    shards: Box<[Shard]>,
    per_shard: usize,
    hasher: RandomState,
    clock: Arc<dyn Clock>,
}

impl fmt::Debug for RateLimiter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RateLimiter")
            .field("config", &self.config)
            .field("max_keys", &(self.per_shard * SHARDS))
            .field("tracked_keys", &self.tracked_keys())
            .finish_non_exhaustive()
    }
}

impl RateLimiter {
    /// A limiter on the system clock tracking at most [`DEFAULT_MAX_KEYS`] keys.
    pub fn new(config: RateLimitConfig) -> Result<Self, RateLimitConfigError> {
        Self::with_clock(config, DEFAULT_MAX_KEYS, Arc::new(SystemClock))
    }

    /// A limiter with an explicit key bound and clock.
    pub fn with_clock(
        config: RateLimitConfig,
        max_keys: usize,
        clock: Arc<dyn Clock>,
    ) -> Result<Self, RateLimitConfigError> {
        let rate_ok = config.per_second.is_finite() && config.per_second > 0.0;
        if !config.is_disabled() && !rate_ok {
            return Err(RateLimitConfigError::InvalidRate(config.per_second));
        }
        if max_keys < SHARDS {
            return Err(RateLimitConfigError::TooFewKeys(max_keys));
        }
        let shards = (0..SHARDS).map(|_| Mutex::new(HashMap::new())).collect();
        Ok(Self {
            config,
            shards,
            per_shard: max_keys / SHARDS,
            hasher: RandomState::new(),
            clock,
        })
    }

    /// The configuration in force.
    pub fn config(&self) -> RateLimitConfig {
        self.config
    }

    /// How many keys currently have a bucket.
    pub fn tracked_keys(&self) -> usize {
        self.shards
            .iter()
            .map(|s| s.lock().unwrap_or_else(PoisonError::into_inner).len())
            .sum()
    }

    /// Take one request from `key`'s bucket.
    pub fn check(&self, key: &str) -> RateLimitDecision {
        let now = self.clock.now();
        if self.config.is_disabled() {
            return RateLimitDecision {
                allowed: true,
                enforced: false,
                limit: 0,
                remaining: 0,
                reset_unix_secs: now.as_secs(),
                retry_after_secs: 0,
            };
        }
        let burst = f64::from(self.config.burst);
        let rate = self.config.per_second;
        let shard = &self.shards[self.shard_of(key)];
        let mut buckets = shard.lock().unwrap_or_else(PoisonError::into_inner);
        let tokens = match buckets.get_mut(key) {
            Some(bucket) => {
                bucket.tokens = refilled(bucket, now, burst, rate);
                bucket.updated = bucket.updated.max(now);
                take(&mut bucket.tokens)
            }
            None => {
                if buckets.len() >= self.per_shard {
                    evict(&mut buckets, now, burst, rate);
                }
                let mut bucket = Bucket {
                    tokens: burst,
                    updated: now,
                };
                let outcome = take(&mut bucket.tokens);
                buckets.insert(key.into(), bucket);
                outcome
            }
        };
        drop(buckets);
        let (allowed, left) = tokens;
        // Whole requests left; clamp to the limit against float noise.
        let remaining = left.floor().clamp(0.0, burst) as u32;
        let full_in = (burst - left).max(0.0) / rate;
        let reset_at =
            now.saturating_add(Duration::try_from_secs_f64(full_in).unwrap_or(Duration::MAX));
        let reset_unix_secs = reset_at.as_secs() + u64::from(reset_at.subsec_nanos() > 0);
        let retry_after_secs = if allowed {
            0
        } else {
            ((1.0 - left) / rate).ceil().max(1.0) as u64
        };
        RateLimitDecision {
            allowed,
            enforced: true,
            limit: self.config.burst,
            remaining,
            reset_unix_secs,
            retry_after_secs,
        }
    }

    fn shard_of(&self, key: &str) -> usize {
        // The modulo keeps the value below SHARDS, so the cast back cannot truncate.
        (self.hasher.hash_one(key) % SHARDS as u64) as usize
    }
}

/// The bucket's tokens at `now` (a clock going backwards refills nothing).
fn refilled(bucket: &Bucket, now: Duration, burst: f64, rate: f64) -> f64 {
    let elapsed = now.saturating_sub(bucket.updated).as_secs_f64();
    (bucket.tokens + elapsed * rate).min(burst)
}

/// Take a token if one is there; returns (allowed, tokens left).
fn take(tokens: &mut f64) -> (bool, f64) {
    if *tokens >= 1.0 {
        *tokens -= 1.0;
        (true, *tokens)
    } else {
        (false, *tokens)
    }
}

/// Make room in a full shard. Buckets that have refilled completely go first (a full
/// bucket carries no state: a new one is identical). If that frees less than an eighth of
/// the shard, the least recently updated buckets go too, up to an eighth, so that a flood
/// of new keys costs one scan per `len / 8` insertions rather than one per insertion.
fn evict(buckets: &mut HashMap<Box<str>, Bucket>, now: Duration, burst: f64, rate: f64) {
    let before = buckets.len();
    buckets.retain(|_, b| refilled(b, now, burst, rate) < burst);
    let wanted = (before / 8).max(1);
    let freed = before - buckets.len();
    let count = wanted.saturating_sub(freed).min(buckets.len());
    if count == 0 {
        return;
    }
    let mut times: Vec<Duration> = buckets.values().map(|b| b.updated).collect();
    let (_, cutoff, _) = times.select_nth_unstable(count - 1);
    let cutoff = *cutoff;
    // Everything older than the cutoff goes, and as many at the cutoff as still needed.
    let older = times.iter().filter(|t| **t < cutoff).count();
    let mut ties_to_drop = count - older;
    buckets.retain(|_, b| {
        if b.updated < cutoff {
            false
        } else if b.updated == cutoff && ties_to_drop > 0 {
            ties_to_drop -= 1;
            false
        } else {
            true
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limiter(burst: u32, per_second: f64) -> (RateLimiter, ManualClock) {
        let clock = ManualClock::new(Duration::from_secs(1_700_000_000));
        let limiter = RateLimiter::with_clock(
            RateLimitConfig { burst, per_second },
            1_000,
            Arc::new(clock.clone()),
        )
        .expect("valid config");
        (limiter, clock)
    }

    #[test]
    fn invalid_configs_are_refused() {
        for rate in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            assert!(RateLimiter::new(RateLimitConfig {
                burst: 5,
                per_second: rate
            })
            .is_err());
        }
        assert!(RateLimiter::new(RateLimitConfig::disabled()).is_ok());
        assert!(matches!(
            RateLimiter::with_clock(RateLimitConfig::default(), 3, Arc::new(SystemClock)),
            Err(RateLimitConfigError::TooFewKeys(3))
        ));
    }

    #[test]
    fn disabled_allows_everything_and_writes_no_headers() {
        let limiter = RateLimiter::new(RateLimitConfig::disabled()).expect("valid");
        for _ in 0..1_000 {
            let d = limiter.check("k");
            assert!(d.allowed && !d.enforced);
        }
        let mut headers = HeaderMap::new();
        limiter.check("k").apply_headers(&mut headers);
        assert!(headers.is_empty());
        assert_eq!(limiter.tracked_keys(), 0);
    }

    #[test]
    fn fractional_refill_and_reset_time() {
        let (limiter, clock) = limiter(2, 0.5); // one token every two seconds
        let start = clock.now().as_secs();
        assert!(limiter.check("k").allowed);
        let d = limiter.check("k");
        assert!(d.allowed);
        assert_eq!(d.remaining, 0);
        assert_eq!(d.reset_unix_secs, start + 4);
        let d = limiter.check("k");
        assert!(!d.allowed);
        assert_eq!(d.retry_after_secs, 2);
        clock.advance(Duration::from_secs(1));
        let d = limiter.check("k");
        assert!(!d.allowed);
        assert_eq!(d.retry_after_secs, 1);
        clock.advance(Duration::from_secs(1));
        assert!(limiter.check("k").allowed);
    }

    #[test]
    fn a_clock_going_backwards_does_not_refill() {
        let (limiter, clock) = limiter(1, 1.0);
        assert!(limiter.check("k").allowed);
        clock.set(clock.now() - Duration::from_secs(100));
        assert!(!limiter.check("k").allowed);
    }

    #[test]
    fn memory_stays_bounded() {
        let (limiter, _clock) = limiter(3, 1.0);
        // max_keys 1000 → 31 per shard → at most 992 buckets.
        for i in 0..5_000 {
            let _ = limiter.check(&format!("peer-{i}"));
        }
        let tracked = limiter.tracked_keys();
        assert!(tracked <= 992 && tracked > 500, "{tracked}");
    }

    #[test]
    fn eviction_drops_refilled_buckets_first_then_the_oldest() {
        let keys = |m: &HashMap<Box<str>, Bucket>| {
            let mut k: Vec<String> = m.keys().map(|k| k.to_string()).collect();
            k.sort();
            k
        };
        let mut m: HashMap<Box<str>, Bucket> = HashMap::new();
        m.insert(
            "full".into(),
            Bucket {
                tokens: 3.0,
                updated: Duration::from_millis(100000),
            },
        );
        m.insert(
            "refilled".into(),
            Bucket {
                tokens: 0.0,
                updated: Duration::from_millis(90000),
            },
        );
        m.insert(
            "busy".into(),
            Bucket {
                tokens: 0.0,
                updated: Duration::from_millis(99500),
            },
        );
        evict(&mut m, Duration::from_secs(100), 3.0, 1.0);
        assert_eq!(keys(&m), ["busy"]);
        m.insert(
            "older".into(),
            Bucket {
                tokens: 0.0,
                updated: Duration::from_millis(99000),
            },
        );
        evict(&mut m, Duration::from_secs(100), 3.0, 1.0);
        assert_eq!(keys(&m), ["busy"]);
    }

    #[test]
    fn eviction_under_a_flood_drops_the_oldest_eighth() {
        let mut m: HashMap<Box<str>, Bucket> = HashMap::new();
        for i in 0..16u64 {
            m.insert(
                format!("k{i}").into(),
                Bucket {
                    tokens: 0.0,
                    updated: Duration::from_secs(1_000 + i),
                },
            );
        }
        // Nothing has refilled (rate is tiny), so the two oldest go.
        evict(&mut m, Duration::from_secs(1_016), 3.0, 1e-9);
        assert_eq!(m.len(), 14);
        assert!(!m.contains_key("k0") && !m.contains_key("k1") && m.contains_key("k2"));
        // Equal times: exactly the wanted number goes, not every tie.
        let mut m: HashMap<Box<str>, Bucket> = (0..16)
            .map(|i| {
                (
                    format!("t{i}").into(),
                    Bucket {
                        tokens: 0.0,
                        updated: Duration::from_secs(5),
                    },
                )
            })
            .collect();
        evict(&mut m, Duration::from_secs(5), 3.0, 1.0);
        assert_eq!(m.len(), 14);
    }
}
