//! The requests a front door answered, by answer: `netacl_edge_door_requests_total{door,answer}`
//! on the edge's `/metrics` (the decisions themselves are also counted in the edge's own
//! families, since they go through its enforcer).
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use netacl_edge::AclVerdict;

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

/// One door's answer counters.
#[derive(Debug)]
pub struct DoorCounters {
    door: &'static str,
    counts: [AtomicU64; ANSWERS.len()],
}

impl DoorCounters {
    /// Counters for the door named `door` (the `door` label: `forward_auth`, ...).
    pub fn new(door: &'static str) -> Self {
        Self {
            door,
            counts: Default::default(),
        }
    }

    /// Counts one answer.
    pub fn record(&self, answer: DoorAnswer) {
        self.counts[slot(answer)].fetch_add(1, Relaxed);
    }

    /// How many requests got `answer`.
    pub fn count(&self, answer: DoorAnswer) -> u64 {
        self.counts[slot(answer)].load(Relaxed)
    }

    /// The counters in the Prometheus text format (with their `# HELP` and `# TYPE` lines).
    pub fn render(&self, out: &mut String) {
        let name = "netacl_edge_door_requests_total";
        // One family for every door: its HELP and TYPE once, before the first door's series.
        // The doors' sections are rendered one after another, so a door whose text follows
        // another door's series (the last line is one of them) continues that family.
        let last_line = out.trim_end_matches('\n').rsplit('\n').next().unwrap_or("");
        if !last_line.starts_with(name) {
            let _ = writeln!(
                out,
                "# HELP {name} Requests a front door answered, by door and answer.\n# TYPE {name} counter"
            );
        }
        for (answer, count) in ANSWERS.iter().zip(&self.counts) {
            let _ = writeln!(
                out,
                "{name}{{door=\"{}\",answer=\"{answer}\"}} {}",
                self.door,
                count.load(Relaxed)
            );
        }
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
        counters.render(&mut text);
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
    fn doors_rendered_one_after_another_share_one_family_header() {
        let mut text = String::from("# TYPE netacl_edge_other gauge\nnetacl_edge_other 1\n");
        DoorCounters::new("forward_auth").render(&mut text);
        DoorCounters::new("spoe").render(&mut text);
        DoorCounters::new("ext_authz").render(&mut text);
        assert_eq!(
            text.matches("# TYPE netacl_edge_door_requests_total counter")
                .count(),
            1
        );
        assert_eq!(
            text.matches("# HELP netacl_edge_door_requests_total")
                .count(),
            1
        );
        let header = text.find("# TYPE netacl_edge_door_requests_total").unwrap();
        let first_series = text.find("netacl_edge_door_requests_total{").unwrap();
        assert!(
            header < first_series,
            "the header comes before the family's series"
        );
        assert!(text.contains("{door=\"spoe\",answer=\"none\"} 0\n"));
    }
}
