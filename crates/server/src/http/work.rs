//! Bounded work for the expensive endpoints: the analysis's budget and deadline, and how many
//! expensive requests run at once.
//!
//! - The analysis (`POST /_netacl/v1/network-acls/analyze`) runs within
//!   [`WorkLimits::analysis_work`] work units and [`WorkLimits::analysis_deadline`] (see
//!   `netacl_analysis::Budget`), and stops when its client goes away: the handler's future is
//!   dropped when the connection closes, and a [`CancelOnDrop`] it holds sets the analysis's
//!   cancellation flag.
//! - The expensive requests (the analysis, the impact preview, the dry run, managed-list
//!   uploads, the directory import) each hold a [`WorkPermit`] while they run: at most
//!   [`WorkLimits::per_tenant`] at once per tenant and [`WorkLimits::per_process`] at once in
//!   the process. The permit is taken before the body is read, so a refused request costs no
//!   more than its headers and a waiting upload does not hold its bytes; over either limit
//!   the answer is at once `429 too_many_requests` with `Retry-After` (nothing waits in a
//!   queue). A permit taken for work handed to a blocking thread goes with the work, so it is
//!   released when the work ends, not when the client leaves.
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use http::StatusCode;
use netacl_store::TenantId;

use crate::http::error::ApiError;

/// Default work units of one analysis through the API (`--analysis-work`): the synthetic
/// tenant of 1,000 rules takes 0.8 million with 10,000 CIDRs and 21 million with 100,000; the
/// overlapping rule set (`netacl_eval::synthetic::overlapping`) 12 million at 100 rules, 127
/// million at 200 and a few billion at 1,000. 50 million is 2.5 to 6 s of one core of the
/// README's 2-vCPU machine.
pub const DEFAULT_ANALYSIS_WORK: u64 = 50_000_000;

/// Default deadline of one analysis through the API (`--analysis-deadline`): the backstop when
/// the machine is slower or busier than the budget assumes.
pub const DEFAULT_ANALYSIS_DEADLINE: Duration = Duration::from_secs(10);

/// Work units of the analysis behind the `Netacl-Findings` header of a rule write (on the write
/// path, after the commit): a twenty-fifth of the default analysis, a fraction of a second.
/// Findings it does not reach are left out of the header (which never claims what is not
/// proven).
pub const FINDINGS_HEADER_WORK: u64 = 2_000_000;

/// Default of [`WorkLimits::per_tenant`] (`--expensive-requests-per-tenant`).
pub const DEFAULT_EXPENSIVE_PER_TENANT: usize = 1;

/// The operations that hold a [`WorkPermit`] while they run (their 429 in the OpenAPI
/// document says so).
pub(crate) const EXPENSIVE_OPERATIONS: [&str; 5] = [
    "netacl_analyze",
    "netacl_preview",
    "netacl_dry_run",
    "netacl_managed_list_put",
    "netacl_directory_import",
];

/// How long a client refused for too many expensive requests is told to wait (`Retry-After`).
pub const EXPENSIVE_RETRY_AFTER_SECS: u64 = 1;

/// The bounds of the expensive endpoints (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct WorkLimits {
    /// Work units of one analysis through the API.
    pub analysis_work: u64,
    /// Longest time one analysis through the API runs.
    pub analysis_deadline: Duration,
    /// Expensive requests of one tenant at once (at least 1).
    pub per_tenant: usize,
    /// Expensive requests of every tenant at once (at least 1).
    pub per_process: usize,
}

impl WorkLimits {
    /// The defaults: [`DEFAULT_ANALYSIS_WORK`], [`DEFAULT_ANALYSIS_DEADLINE`],
    /// [`DEFAULT_EXPENSIVE_PER_TENANT`], and per process [`default_per_process`].
    pub fn new() -> Self {
        Self {
            analysis_work: DEFAULT_ANALYSIS_WORK,
            analysis_deadline: DEFAULT_ANALYSIS_DEADLINE,
            per_tenant: DEFAULT_EXPENSIVE_PER_TENANT,
            per_process: default_per_process(),
        }
    }

    /// With other analysis bounds.
    pub fn with_analysis(mut self, work: u64, deadline: Duration) -> Self {
        self.analysis_work = work;
        self.analysis_deadline = deadline;
        self
    }

    /// With other concurrency limits (each at least 1).
    pub fn with_concurrency(mut self, per_tenant: usize, per_process: usize) -> Self {
        self.per_tenant = per_tenant.max(1);
        self.per_process = per_process.max(1);
        self
    }

    /// The budget of one analysis starting now, stopped when `cancel` is set.
    pub(crate) fn analysis_budget(&self, cancel: Arc<AtomicBool>) -> netacl_analysis::Budget {
        netacl_analysis::Budget::work(self.analysis_work)
            .with_deadline(Instant::now() + self.analysis_deadline)
            .with_cancel(cancel)
    }
}

impl Default for WorkLimits {
    fn default() -> Self {
        Self::new()
    }
}

/// Default of [`WorkLimits::per_process`] (`--expensive-requests`): the number of cores, at
/// least 2 (so that one tenant, at one request, never holds every permit).
pub fn default_per_process() -> usize {
    std::thread::available_parallelism()
        .map_or(2, |n| n.get())
        .max(2)
}

/// How many expensive requests run, in all and per tenant: one for the whole process, shared
/// by every tenant's copy of the configuration.
#[derive(Debug, Default)]
pub(crate) struct WorkGate {
    running: Mutex<Running>,
}

#[derive(Debug, Default)]
struct Running {
    total: usize,
    by_tenant: HashMap<TenantId, usize>,
}

impl WorkGate {
    /// A permit for one expensive request of `tenant`, or the 429 that refuses it.
    pub(crate) fn acquire(
        self: &Arc<Self>,
        tenant: &TenantId,
        limits: &WorkLimits,
    ) -> Result<WorkPermit, ApiError> {
        let mut running = self.running.lock().unwrap_or_else(PoisonError::into_inner);
        let mine = running.by_tenant.get(tenant).copied().unwrap_or(0);
        if mine >= limits.per_tenant {
            return Err(too_many(format!(
                "Too many expensive requests of this tenant at once (analysis, preview, dry run, \
                 managed-list upload, directory import: at most {} at a time); retry after the \
                 number of seconds in Retry-After.",
                limits.per_tenant
            )));
        }
        if running.total >= limits.per_process {
            return Err(too_many(format!(
                "Too many expensive requests on this server at once (analysis, preview, dry run, \
                 managed-list upload, directory import: at most {} at a time for all tenants); \
                 retry after the number of seconds in Retry-After.",
                limits.per_process
            )));
        }
        running.total += 1;
        *running.by_tenant.entry(tenant.clone()).or_insert(0) += 1;
        Ok(WorkPermit {
            gate: Arc::clone(self),
            tenant: tenant.clone(),
        })
    }

    /// How many expensive requests run now (for tests).
    #[cfg(test)]
    fn running(&self) -> usize {
        self.running
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .total
    }
}

fn too_many(message: String) -> ApiError {
    ApiError::new(
        StatusCode::TOO_MANY_REQUESTS,
        Some("too_many_requests"),
        message,
    )
    .with_retry_after(EXPENSIVE_RETRY_AFTER_SECS)
}

/// One running expensive request: released when dropped.
#[derive(Debug)]
pub(crate) struct WorkPermit {
    gate: Arc<WorkGate>,
    tenant: TenantId,
}

impl Drop for WorkPermit {
    fn drop(&mut self) {
        let mut running = self
            .gate
            .running
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        running.total = running.total.saturating_sub(1);
        if let Some(mine) = running.by_tenant.get_mut(&self.tenant) {
            *mine = mine.saturating_sub(1);
            if *mine == 0 {
                running.by_tenant.remove(&self.tenant);
            }
        }
    }
}

/// Sets its flag when dropped: held by a handler across the `await` of work handed to a
/// blocking thread, it tells that work its client went away (the handler's future is dropped
/// when the connection closes) or that nobody waits for it any more.
#[derive(Debug, Default)]
pub(crate) struct CancelOnDrop(Arc<AtomicBool>);

impl CancelOnDrop {
    /// The flag the work watches.
    pub(crate) fn flag(&self) -> Arc<AtomicBool> {
        Arc::clone(&self.0)
    }
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn permits_count_per_tenant_and_per_process_and_are_released_on_drop() {
        let gate = Arc::new(WorkGate::default());
        let limits = WorkLimits::new().with_concurrency(1, 2);
        let (a, b, c) = (
            TenantId::new("acme").expect("id"),
            TenantId::new("beta").expect("id"),
            TenantId::new("gamma").expect("id"),
        );
        let first = gate.acquire(&a, &limits).expect("a's first");
        let refused = gate.acquire(&a, &limits).expect_err("a's second");
        assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(refused.error_code(), Some("too_many_requests"));
        let second = gate.acquire(&b, &limits).expect("b's first");
        let refused = gate.acquire(&c, &limits).expect_err("the process is full");
        assert!(
            refused.message().contains("at most 2"),
            "{}",
            refused.message()
        );
        assert_eq!(gate.running(), 2);
        drop(first);
        assert_eq!(gate.running(), 1);
        let again = gate.acquire(&a, &limits).expect("a again");
        drop((again, second));
        assert_eq!(gate.running(), 0);
        assert!(gate.running.lock().expect("lock").by_tenant.is_empty());
    }

    /// The OpenAPI document's 429 of every expensive operation says what it limits, with
    /// `Retry-After` among its headers.
    #[test]
    fn the_expensive_operations_document_their_429() {
        let document = crate::openapi_document("example.test");
        let mut found = Vec::new();
        for methods in document["paths"].as_object().expect("paths").values() {
            for operation in methods.as_object().expect("methods").values() {
                let id = operation["operationId"].as_str().unwrap_or_default();
                if !EXPENSIVE_OPERATIONS.contains(&id) {
                    continue;
                }
                let too_many = &operation["responses"]["429"];
                let description = too_many["description"].as_str().unwrap_or_default();
                assert!(
                    description.contains("expensive requests")
                        && description.contains("too_many_requests"),
                    "{id}: {description}"
                );
                assert_eq!(too_many["headers"]["Retry-After"]["required"], true, "{id}");
                found.push(id);
            }
        }
        found.sort_unstable();
        let mut expected = EXPENSIVE_OPERATIONS.to_vec();
        expected.sort_unstable();
        assert_eq!(found, expected);
    }

    #[test]
    fn the_cancellation_flag_is_set_when_the_guard_is_dropped() {
        let guard = CancelOnDrop::default();
        let flag = guard.flag();
        assert!(!flag.load(Ordering::Relaxed));
        drop(guard);
        assert!(flag.load(Ordering::Relaxed));
    }
}
