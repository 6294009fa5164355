//! A tenant's log events (`GET /api/v2/logs`): one row per event, numbered by the tenant's own
//! counter, kept within a bounded retention.
//!
//! An event's number (`seq`) comes from a per-tenant counter that is only ever incremented (it
//! survives every event ageing out), inside the transaction that inserts the event, so numbers
//! are never reused and, per tenant, commit in order: paging forward from a number
//! ([`LogStore::log_events_after`]) never skips an event committed later.
use async_trait::async_trait;

use crate::{StoreError, TenantId};

/// An event to append. Its number is assigned by the store.
#[derive(Debug, Clone, PartialEq)]
pub struct NewLogEvent {
    /// When it happened, in milliseconds since the UNIX epoch.
    pub date_ms: i64,
    /// Its type (`sapi`, `fapi`, `acls_summary`).
    pub event_type: String,
    /// The API client it concerns, if any.
    pub client_id: Option<String>,
    /// Every other member of the event (description, ip, user agent, details...), a JSON
    /// object.
    pub record: serde_json::Value,
}

/// A stored event.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredLogEvent {
    /// Its number in the tenant's log (from 1, in commit order).
    pub seq: u64,
    /// When it happened, in milliseconds since the UNIX epoch.
    pub date_ms: i64,
    /// Its type.
    pub event_type: String,
    /// The API client it concerns, if any.
    pub client_id: Option<String>,
    /// Its other members, as appended.
    pub record: serde_json::Value,
}

/// How much of a tenant's log is kept. Applied in the transaction that appends: afterwards the
/// tenant holds at most `max_events` events and none older than `max_age_ms` before the newest
/// appended event's time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogRetention {
    /// The most events kept per tenant (`None`: no bound by count).
    pub max_events: Option<u64>,
    /// The oldest event kept, in milliseconds before now (`None`: no bound by age).
    pub max_age_ms: Option<i64>,
}

/// Which events a listing returns: every condition given must hold.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LogFilter {
    /// Events of this type only.
    pub event_type: Option<String>,
    /// Events of this client only.
    pub client_id: Option<String>,
    /// Events at or after this time (milliseconds since the UNIX epoch).
    pub from_ms: Option<i64>,
    /// Events at or before this time.
    pub to_ms: Option<i64>,
}

/// The order of a listing: by date, then by number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogOrder {
    /// Oldest first.
    Ascending,
    /// Newest first.
    Descending,
}

/// One page of a listing.
#[derive(Debug, Clone, PartialEq)]
pub struct LogPage {
    /// The events.
    pub events: Vec<StoredLogEvent>,
    /// How many events match the filter in all.
    pub total: u64,
}

/// A time window split into equal buckets, for [`LogStore::acl_summary_counts`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CountWindow {
    /// The window's start (milliseconds since the UNIX epoch, included).
    pub from_ms: i64,
    /// Its end (included; after `from_ms`).
    pub to_ms: i64,
    /// How many buckets of equal length split it (at least 1). An event dated `date` falls in
    /// bucket `(date - from_ms) * buckets / (to_ms - from_ms)` (integer division), the last
    /// bucket also holding `to_ms` itself.
    pub buckets: u32,
}

/// One rule's sums over one bucket (see [`LogStore::acl_summary_counts`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleBucketCounts {
    /// The rule, as the events name it.
    pub rule_id: String,
    /// Its action, as the events name it (a rule whose action changed in the window has one
    /// entry per action).
    pub action: String,
    /// The bucket (0 = the oldest).
    pub bucket: u32,
    /// The sum of the events' `evaluated`.
    pub evaluated: u64,
    /// The sum of the events' `matched`.
    pub matched: u64,
}

/// The sums of a tenant's `acls_summary` events over a window.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AclSummaryCounts {
    /// Per rule, action and bucket (only the buckets some event falls in; each once).
    pub rules: Vec<RuleBucketCounts>,
    /// Per bucket (only those some event falls in): the requests the edges saw, counted as, for
    /// each report (the events of one edge with one date), the largest `evaluated` among its
    /// rules, summed over the reports.
    pub requests: Vec<(u32, u64)>,
}

/// A tenant's log.
#[async_trait]
pub trait LogStore: Send + Sync {
    /// Appends `events` (in order, one transaction: durable when this returns) and applies
    /// `retention`; returns their numbers. [`StoreError::NotFound`] when the tenant does not
    /// exist.
    async fn append_log_events(
        &self,
        tenant: &TenantId,
        events: &[NewLogEvent],
        retention: LogRetention,
    ) -> Result<Vec<u64>, StoreError>;

    /// The events matching `filter`, ordered by date (then number) as `order` says, from
    /// position `offset`, at most `limit`, with the number of matching events.
    async fn list_log_events(
        &self,
        tenant: &TenantId,
        filter: &LogFilter,
        order: LogOrder,
        offset: u64,
        limit: u64,
    ) -> Result<LogPage, StoreError>;

    /// At most `take` events numbered after `after` (0: from the first), ascending by number,
    /// none older than `not_before_ms`.
    async fn log_events_after(
        &self,
        tenant: &TenantId,
        after: u64,
        take: u32,
        not_before_ms: Option<i64>,
    ) -> Result<Vec<StoredLogEvent>, StoreError>;

    /// One event, if the tenant holds it.
    async fn log_event(
        &self,
        tenant: &TenantId,
        seq: u64,
    ) -> Result<Option<StoredLogEvent>, StoreError>;

    /// The sums of the tenant's `acls_summary` events dated within `window`, by rule and
    /// bucket (the work is bounded by the events of the window: one range of the
    /// `(tenant, date)` index, each record parsed once). Sums saturate at `u64::MAX`.
    async fn acl_summary_counts(
        &self,
        tenant: &TenantId,
        window: CountWindow,
    ) -> Result<AclSummaryCounts, StoreError>;
}

/// The members of an `acls_summary` record the counts read (borrowed from the record's text).
#[derive(serde::Deserialize)]
struct SummaryRecord<'a> {
    #[serde(borrow)]
    details: SummaryDetails<'a>,
}

#[derive(serde::Deserialize)]
struct SummaryDetails<'a> {
    #[serde(borrow)]
    rule_id: std::borrow::Cow<'a, str>,
    #[serde(borrow, default)]
    action: std::borrow::Cow<'a, str>,
    #[serde(borrow, default)]
    edge: std::borrow::Cow<'a, str>,
    #[serde(default)]
    evaluated: u64,
    #[serde(default)]
    matched: u64,
}

/// Sums `acls_summary` records into [`AclSummaryCounts`], one record at a time: the backends
/// read the window's rows (date and record text) and hand them here, so both count alike. A
/// rule id, action or edge is copied once, when first seen.
pub(crate) struct SummaryTally {
    window: CountWindow,
    /// rule → (action, bucket, evaluated, matched), one entry per action and bucket.
    rules: std::collections::HashMap<String, Vec<(String, u32, u64, u64)>>,
    /// date → (edge, bucket, largest evaluated), one entry per edge reporting at that date.
    reports: std::collections::HashMap<i64, Vec<(String, u32, u64)>>,
}

impl SummaryTally {
    pub(crate) fn new(window: CountWindow) -> Self {
        Self {
            window,
            rules: std::collections::HashMap::new(),
            reports: std::collections::HashMap::new(),
        }
    }

    /// The bucket of an event's date (the last bucket also holds the window's end).
    fn bucket(&self, date_ms: i64) -> u32 {
        let buckets = i128::from(self.window.buckets.max(1));
        let span = i128::from(self.window.to_ms.saturating_sub(self.window.from_ms).max(1));
        let offset = i128::from(date_ms.saturating_sub(self.window.from_ms)).max(0);
        u32::try_from((offset * buckets / span).min(buckets - 1)).unwrap_or(0)
    }

    /// Adds one event (a record that is not a summary's is skipped).
    pub(crate) fn add(&mut self, date_ms: i64, record: &str) {
        let Ok(SummaryRecord { details: d }) = serde_json::from_str::<SummaryRecord<'_>>(record)
        else {
            return;
        };
        let bucket = self.bucket(date_ms);
        let entries = match self.rules.get_mut(d.rule_id.as_ref()) {
            Some(entries) => entries,
            None => self.rules.entry(d.rule_id.into_owned()).or_default(),
        };
        match entries
            .iter_mut()
            .find(|(action, b, _, _)| *b == bucket && *action == d.action)
        {
            Some(entry) => {
                entry.2 = entry.2.saturating_add(d.evaluated);
                entry.3 = entry.3.saturating_add(d.matched);
            }
            None => entries.push((d.action.into_owned(), bucket, d.evaluated, d.matched)),
        }
        let edges = self.reports.entry(date_ms).or_default();
        match edges.iter_mut().find(|(edge, _, _)| *edge == d.edge) {
            Some(report) => report.2 = report.2.max(d.evaluated),
            None => edges.push((d.edge.into_owned(), bucket, d.evaluated)),
        }
    }

    pub(crate) fn finish(self) -> AclSummaryCounts {
        let mut rules = Vec::with_capacity(self.rules.len());
        for (rule_id, entries) in self.rules {
            for (action, bucket, evaluated, matched) in entries {
                rules.push(RuleBucketCounts {
                    rule_id: rule_id.clone(),
                    action,
                    bucket,
                    evaluated,
                    matched,
                });
            }
        }
        let mut requests: std::collections::BTreeMap<u32, u64> = Default::default();
        for (_, bucket, seen) in self.reports.into_values().flatten() {
            let sum = requests.entry(bucket).or_default();
            *sum = sum.saturating_add(seen);
        }
        AclSummaryCounts {
            rules,
            requests: requests.into_iter().collect(),
        }
    }
}

/// The record column's text.
pub(crate) fn record_text(record: &serde_json::Value) -> Result<String, StoreError> {
    serde_json::to_string(record)
        .map_err(|err| StoreError::Unavailable(format!("cannot encode a log event: {err}")))
}

/// A record column read back.
pub(crate) fn parse_record(
    tenant: &TenantId,
    seq: u64,
    text: &str,
) -> Result<serde_json::Value, StoreError> {
    serde_json::from_str(text).map_err(|err| StoreError::Corrupt {
        tenant: tenant.to_string(),
        id: format!("log event {seq}"),
        reason: err.to_string(),
    })
}

/// The first number the retention keeps after the tenant's counter reached `last`.
pub(crate) fn first_kept(last: u64, retention: LogRetention) -> Option<u64> {
    let max = retention.max_events?;
    Some(last.saturating_sub(max).saturating_add(1))
}
