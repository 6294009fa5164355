//! How much work one analysis may do: a budget of work units, a deadline, and a flag that
//! stops it from outside (see the crate documentation, "Bounded work").
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// The bounds of one analysis ([`analyze_within`](crate::analyze_within)).
///
/// - `work`: work units in all (see the crate documentation, "Bounded work"): what is left
///   unproven when they run out goes to `undecided` with the reason `budget`. They do not
///   depend on the machine's speed or on the number of threads: under the same budget the
///   same rule set gets the same answer.
/// - `deadline`: a point in time past which the analysis stops, whatever it has left (a
///   backstop for a slow or busy machine; what it stops is `budget` too).
/// - `cancel`: set from another thread (a client that went away), the analysis stops within
///   a few thousand steps.
/// - `progress`: the work units done so far, added as the analysis goes (for whoever wants to
///   watch it).
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct Budget {
    /// Work units in all; `None`: no bound.
    pub work: Option<u64>,
    /// When to stop; `None`: no deadline.
    pub deadline: Option<Instant>,
    /// Stops the analysis when set.
    pub cancel: Option<Arc<AtomicBool>>,
    /// Work units done so far.
    pub progress: Option<Arc<AtomicU64>>,
}

impl Budget {
    /// No bound at all: the analysis runs to completion ([`analyze`](crate::analyze)).
    pub fn unlimited() -> Self {
        Self::default()
    }

    /// At most `units` work units.
    pub fn work(units: u64) -> Self {
        Self {
            work: Some(units),
            ..Self::default()
        }
    }

    /// With a deadline.
    pub fn with_deadline(mut self, deadline: Instant) -> Self {
        self.deadline = Some(deadline);
        self
    }

    /// With a flag that stops the analysis when set.
    pub fn with_cancel(mut self, cancel: Arc<AtomicBool>) -> Self {
        self.cancel = Some(cancel);
        self
    }

    /// With a counter of the work units done, added to as the analysis goes.
    pub fn with_progress(mut self, progress: Arc<AtomicU64>) -> Self {
        self.progress = Some(progress);
        self
    }
}

/// Why an analysis stopped before it settled every question it could.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Stopped {
    /// Its work units ran out.
    Budget,
    /// Its deadline passed.
    Deadline,
    /// Its cancellation flag was set.
    Cancelled,
}

impl Stopped {
    /// `budget`, `deadline` or `cancelled` (for logs).
    pub fn as_str(self) -> &'static str {
        match self {
            Stopped::Budget => "budget",
            Stopped::Deadline => "deadline",
            Stopped::Cancelled => "cancelled",
        }
    }
}

/// What a bounded analysis did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct WorkDone {
    /// Work units done, those of rules whose answers were not used included.
    pub units: u64,
    /// Why it stopped early; `None` when it settled every question it could.
    pub stopped: Option<Stopped>,
}

/// The deadline and the cancellation flag of one analysis, shared by its threads: once
/// either trips, [`Interrupt::check`] answers `true` for good.
#[derive(Debug)]
pub(crate) struct Interrupt {
    deadline: Option<Instant>,
    cancel: Option<Arc<AtomicBool>>,
    /// 0: not tripped; 1: the deadline; 2: cancelled.
    tripped: AtomicU8,
}

impl Interrupt {
    pub(crate) fn new(budget: &Budget) -> Self {
        Interrupt {
            deadline: budget.deadline,
            cancel: budget.cancel.clone(),
            tripped: AtomicU8::new(0),
        }
    }

    /// Whether the analysis must stop (the deadline passed, or it was cancelled).
    pub(crate) fn check(&self) -> bool {
        if self.tripped.load(Ordering::Relaxed) != 0 {
            return true;
        }
        let why = if self
            .cancel
            .as_ref()
            .is_some_and(|c| c.load(Ordering::Relaxed))
        {
            2
        } else if self.deadline.is_some_and(|d| Instant::now() >= d) {
            1
        } else {
            return false;
        };
        let _ = self
            .tripped
            .compare_exchange(0, why, Ordering::Relaxed, Ordering::Relaxed);
        true
    }

    /// Why it tripped, if it did.
    pub(crate) fn stopped(&self) -> Option<Stopped> {
        match self.tripped.load(Ordering::Relaxed) {
            1 => Some(Stopped::Deadline),
            2 => Some(Stopped::Cancelled),
            _ => None,
        }
    }
}
