//! Each tenant's requests by verdict ([`TenantCounters`]).
use crate::decision::AclVerdict;
use crate::observe::metrics::Stripes;

/// Requests of one tenant (or of all tenants without their own series), by verdict: written
/// per request by every core, so striped (one stripe per thread slot, each on cache lines of its
/// own, as the per-rule counters are); a read sums the stripes.
#[derive(Debug)]
pub struct TenantCounters {
    pub(super) verdicts: Stripes,
}

impl Default for TenantCounters {
    fn default() -> Self {
        Self {
            verdicts: Stripes::new(6),
        }
    }
}

pub(super) fn verdict_slot(verdict: AclVerdict) -> usize {
    match verdict {
        AclVerdict::None => 0,
        AclVerdict::Allow => 1,
        AclVerdict::Block => 2,
        AclVerdict::Redirect => 3,
        AclVerdict::InvalidPath => 4,
        _ => 5,
    }
}

pub(super) const COUNTED: [AclVerdict; 5] = [
    AclVerdict::None,
    AclVerdict::Allow,
    AclVerdict::Block,
    AclVerdict::Redirect,
    AclVerdict::InvalidPath,
];

impl TenantCounters {
    pub(crate) fn record(&self, verdict: AclVerdict) {
        self.verdicts.add(verdict_slot(verdict));
    }

    /// Requests counted with `verdict`.
    pub fn count(&self, verdict: AclVerdict) -> u64 {
        self.verdicts.sum(verdict_slot(verdict))
    }
}
