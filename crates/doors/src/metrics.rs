//! What a front door counts, on the edge's `/metrics` (the decisions themselves are also
//! counted in the edge's own families, since they go through its enforcer):
//! `netacl_edge_door_requests_total{door,answer}`, the requests answered by answer, and
//! `netacl_edge_door_check_seconds{door}`, a histogram of netacl's own time per check (from
//! the request's facts as the door received them to its answer built, without the network and
//! without the access event's write).
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;

use netacl_edge::{AclVerdict, EdgeMetrics, MetricFamily};

/// What a front door answered a request with: the verdict, or a refusal before any decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum DoorAnswer {
    /// A decision was made (see [`AclVerdict`]).
    Decided(AclVerdict),
    /// The request's facts were malformed (400, no decision made).
    BadRequest,
}

/// The answers, in the order they are rendered.
const ANSWERS: [&str; 7] = [
    "none",
    "allow",
    "block",
    "redirect",
    "invalid_path",
    "misdirected",
    "bad_request",
];

/// The histogram's upper bounds in nanoseconds (and as Prometheus writes them, in seconds):
/// fine below 10 µs, where a check's time is, coarse above, where a stall would show.
const CHECK_BOUNDS_NS: [u64; 15] = [
    250, 500, 1_000, 2_000, 3_000, 4_000, 5_000, 6_000, 7_500, 10_000, 25_000, 50_000, 100_000,
    1_000_000, 10_000_000,
];
const CHECK_BOUNDS_LABEL: [&str; 15] = [
    "2.5e-07", "5e-07", "1e-06", "2e-06", "3e-06", "4e-06", "5e-06", "6e-06", "7.5e-06", "1e-05",
    "2.5e-05", "5e-05", "0.0001", "0.001", "0.01",
];

const REQUESTS: MetricFamily = MetricFamily {
    name: "netacl_edge_door_requests_total",
    help: "Requests a front door answered, by door and answer.",
    kind: "counter",
};

const CHECK_SECONDS: MetricFamily = MetricFamily {
    name: "netacl_edge_door_check_seconds",
    help: "netacl's own time per check at a front door, from the request's facts received to the answer built.",
    kind: "histogram",
};

fn slot(answer: DoorAnswer) -> usize {
    match answer {
        DoorAnswer::Decided(AclVerdict::None) => 0,
        DoorAnswer::Decided(AclVerdict::Allow) => 1,
        DoorAnswer::Decided(AclVerdict::Block) => 2,
        DoorAnswer::Decided(AclVerdict::Redirect) => 3,
        DoorAnswer::Decided(AclVerdict::InvalidPath) => 4,
        DoorAnswer::Decided(AclVerdict::Misdirected) => 5,
        // A verdict added later is counted with the refusals until it has a slot of its own.
        DoorAnswer::Decided(_) | DoorAnswer::BadRequest => 6,
    }
}

/// One door's answer counters and check-time histogram.
#[derive(Debug)]
pub struct DoorCounters {
    door: &'static str,
    counts: [AtomicU64; ANSWERS.len()],
    /// Checks by the first bound they are within; the last slot is over every bound.
    check_buckets: [AtomicU64; CHECK_BOUNDS_NS.len() + 1],
    check_nanos: AtomicU64,
}

impl DoorCounters {
    /// Counters for the door named `door` (the `door` label: `forward_auth`, ...).
    pub fn new(door: &'static str) -> Self {
        Self {
            door,
            counts: Default::default(),
            check_buckets: Default::default(),
            check_nanos: AtomicU64::new(0),
        }
    }

    /// Adds this door's series to `metrics` (both families, beside the other doors').
    pub fn register(self: &Arc<Self>, metrics: &EdgeMetrics) {
        let counters = Arc::clone(self);
        metrics.add_series(REQUESTS, move |out| counters.render_requests(out));
        let counters = Arc::clone(self);
        metrics.add_series(CHECK_SECONDS, move |out| counters.render_check_seconds(out));
    }

    /// Counts one answer.
    pub fn record(&self, answer: DoorAnswer) {
        self.counts[slot(answer)].fetch_add(1, Relaxed);
    }

    /// Adds one check's time to the histogram.
    pub fn observe_check(&self, took: Duration) {
        let nanos = u64::try_from(took.as_nanos()).unwrap_or(u64::MAX);
        let bucket = CHECK_BOUNDS_NS
            .iter()
            .position(|&bound| nanos <= bound)
            .unwrap_or(CHECK_BOUNDS_NS.len());
        self.check_buckets[bucket].fetch_add(1, Relaxed);
        self.check_nanos.fetch_add(nanos, Relaxed);
    }

    /// How many requests got `answer`.
    pub fn count(&self, answer: DoorAnswer) -> u64 {
        self.counts[slot(answer)].load(Relaxed)
    }

    /// How many checks were timed.
    pub fn checks(&self) -> u64 {
        self.check_buckets.iter().map(|b| b.load(Relaxed)).sum()
    }

    /// The answer counters' sample lines (Prometheus text format).
    pub fn render_requests(&self, out: &mut String) {
        for (answer, count) in ANSWERS.iter().zip(&self.counts) {
            let _ = writeln!(
                out,
                "{}{{door=\"{}\",answer=\"{answer}\"}} {}",
                REQUESTS.name,
                self.door,
                count.load(Relaxed)
            );
        }
    }

    /// The check-time histogram's sample lines (cumulative buckets, `_sum` in seconds,
    /// `_count`).
    pub fn render_check_seconds(&self, out: &mut String) {
        let name = CHECK_SECONDS.name;
        let door = self.door;
        let mut cumulative = 0;
        for (i, label) in CHECK_BOUNDS_LABEL.iter().enumerate() {
            cumulative += self.check_buckets[i].load(Relaxed);
            let _ = writeln!(
                out,
                "{name}_bucket{{door=\"{door}\",le=\"{label}\"}} {cumulative}"
            );
        }
        cumulative += self.check_buckets[CHECK_BOUNDS_NS.len()].load(Relaxed);
        let _ = writeln!(
            out,
            "{name}_bucket{{door=\"{door}\",le=\"+Inf\"}} {cumulative}"
        );
        let seconds = self.check_nanos.load(Relaxed) as f64 / 1e9;
        let _ = writeln!(out, "{name}_sum{{door=\"{door}\"}} {seconds}");
        let _ = writeln!(out, "{name}_count{{door=\"{door}\"}} {cumulative}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_counted_under_their_label() {
        let counters = DoorCounters::new("forward_auth");
        counters.record(DoorAnswer::Decided(AclVerdict::Block));
        counters.record(DoorAnswer::Decided(AclVerdict::Block));
        counters.record(DoorAnswer::BadRequest);
        let mut text = String::new();
        counters.render_requests(&mut text);
        assert!(text.contains(
            "netacl_edge_door_requests_total{door=\"forward_auth\",answer=\"block\"} 2\n"
        ));
        assert!(text.contains(
            "netacl_edge_door_requests_total{door=\"forward_auth\",answer=\"bad_request\"} 1\n"
        ));
        assert!(text.contains(
            "netacl_edge_door_requests_total{door=\"forward_auth\",answer=\"allow\"} 0\n"
        ));
    }

    #[test]
    fn each_bucket_label_is_its_bound_in_seconds() {
        for (bound, label) in CHECK_BOUNDS_NS.iter().zip(CHECK_BOUNDS_LABEL) {
            let seconds: f64 = label.parse().unwrap();
            assert_eq!((seconds * 1e9).round() as u64, *bound, "{label}");
        }
        assert!(CHECK_BOUNDS_NS.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn check_times_fall_in_cumulative_buckets() {
        let counters = DoorCounters::new("spoe");
        counters.observe_check(Duration::from_nanos(400));
        counters.observe_check(Duration::from_nanos(500));
        counters.observe_check(Duration::from_micros(4));
        counters.observe_check(Duration::from_nanos(6_500));
        counters.observe_check(Duration::from_secs(1));
        let mut text = String::new();
        counters.render_check_seconds(&mut text);
        let bucket = |le: &str| {
            let prefix =
                format!("netacl_edge_door_check_seconds_bucket{{door=\"spoe\",le=\"{le}\"}} ");
            text.lines()
                .find_map(|l| l.strip_prefix(prefix.as_str()))
                .unwrap_or_else(|| panic!("no bucket {le} in {text}"))
                .to_owned()
        };
        assert_eq!(bucket("2.5e-07"), "0");
        assert_eq!(bucket("5e-07"), "2", "a bound is inclusive");
        assert_eq!(bucket("3e-06"), "2");
        assert_eq!(bucket("4e-06"), "3");
        assert_eq!(bucket("5e-06"), "3");
        assert_eq!(bucket("6e-06"), "3");
        assert_eq!(bucket("7.5e-06"), "4");
        assert_eq!(bucket("0.01"), "4");
        assert_eq!(bucket("+Inf"), "5");
        assert!(text.contains("netacl_edge_door_check_seconds_count{door=\"spoe\"} 5\n"));
        assert!(text.contains("netacl_edge_door_check_seconds_sum{door=\"spoe\"} 1.0000114\n"));
        assert_eq!(counters.checks(), 5);
    }

    #[test]
    fn doors_share_one_header_per_family() {
        let metrics = EdgeMetrics::new();
        for door in ["forward_auth", "spoe", "ext_authz"] {
            Arc::new(DoorCounters::new(door)).register(&metrics);
        }
        let text = metrics.render_prometheus();
        for family in [REQUESTS.name, CHECK_SECONDS.name] {
            assert_eq!(
                text.matches(&format!("# TYPE {family} ")).count(),
                1,
                "{family}"
            );
        }
        // Each family's series are together: the histogram's header follows the last door's
        // request counters.
        let histogram = text.find("# HELP netacl_edge_door_check_seconds").unwrap();
        let last_request = text
            .rfind("netacl_edge_door_requests_total{door=\"ext_authz\",answer=\"bad_request\"}")
            .unwrap();
        assert!(last_request < histogram);
        assert!(!text[histogram..].contains("netacl_edge_door_requests_total{"));
    }
}
