use async_trait::async_trait;
use tokio_postgres::types::ToSql;
use tokio_postgres::Row;

use super::{now_ms, read_snapshot, to_version, PostgresStore};
use crate::logs::{first_kept, parse_record, record_text, SummaryTally};
use crate::{
    AclSummaryCounts, CountWindow, LogFilter, LogOrder, LogPage, LogRetention, LogStore,
    NewLogEvent, StoreError, StoredLogEvent, TenantId,
};

const COLUMNS: &str = "seq, date, type, client_id, record";

fn event(tenant: &TenantId, row: &Row) -> Result<StoredLogEvent, StoreError> {
    let seq = to_version(row.get(0));
    let record: &str = row.get(4);
    Ok(StoredLogEvent {
        seq,
        date_ms: row.get(1),
        event_type: row.get(2),
        client_id: row.get(3),
        record: parse_record(tenant, seq, record)?,
    })
}

fn to_i64(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

/// `WHERE` conditions (after the tenant's, `$1`) for a filter, with their values.
fn conditions(filter: &LogFilter) -> (String, Vec<Box<dyn ToSql + Sync + Send>>) {
    let mut sql = String::new();
    let mut values: Vec<Box<dyn ToSql + Sync + Send>> = Vec::new();
    let mut add = |column: &str, op: &str, value: Box<dyn ToSql + Sync + Send>| {
        values.push(value);
        sql.push_str(&format!(" AND {column} {op} ${}", values.len() + 1));
    };
    if let Some(event_type) = &filter.event_type {
        add("type", "=", Box::new(event_type.clone()));
    }
    if let Some(client_id) = &filter.client_id {
        add("client_id", "=", Box::new(client_id.clone()));
    }
    if let Some(from) = filter.from_ms {
        add("date", ">=", Box::new(from));
    }
    if let Some(to) = filter.to_ms {
        add("date", "<=", Box::new(to));
    }
    (sql, values)
}

#[async_trait]
impl LogStore for PostgresStore {
    async fn append_log_events(
        &self,
        tenant: &TenantId,
        events: &[NewLogEvent],
        retention: LogRetention,
    ) -> Result<Vec<u64>, StoreError> {
        if events.is_empty() {
            return Ok(Vec::new());
        }
        let records = events
            .iter()
            .map(|e| record_text(&e.record))
            .collect::<Result<Vec<_>, _>>()?;
        self.call(|mut client| async move {
            let tx = client.transaction().await?;
            let count = i64::try_from(events.len()).unwrap_or(i64::MAX);
            // The tenant row's lock is held until commit: the tenant's events commit in order.
            let row = tx
                .query_opt(
                    "UPDATE tenants SET log_seq = log_seq + $2 WHERE id = $1 RETURNING log_seq",
                    &[&tenant.as_str(), &count],
                )
                .await?;
            let Some(row) = row else {
                return Err(StoreError::NotFound(format!("tenant {tenant}")));
            };
            let last: i64 = row.get(0);
            let first = last - count + 1;
            let insert = tx
                .prepare(
                    "INSERT INTO tenant_logs (tenant_id, seq, date, type, client_id, record)
                     VALUES ($1, $2, $3, $4, $5, $6)",
                )
                .await?;
            let mut numbers = Vec::with_capacity(events.len());
            for (offset, (event, record)) in events.iter().zip(&records).enumerate() {
                let seq = first + offset as i64;
                tx.execute(
                    &insert,
                    &[
                        &tenant.as_str(),
                        &seq,
                        &event.date_ms,
                        &event.event_type,
                        &event.client_id,
                        record,
                    ],
                )
                .await?;
                numbers.push(to_version(seq));
            }
            if let Some(first_kept) = first_kept(to_version(last), retention) {
                tx.execute(
                    "DELETE FROM tenant_logs WHERE tenant_id = $1 AND seq < $2",
                    &[&tenant.as_str(), &to_i64(first_kept)],
                )
                .await?;
            }
            if let Some(age) = retention.max_age_ms {
                tx.execute(
                    "DELETE FROM tenant_logs WHERE tenant_id = $1 AND date < $2",
                    &[&tenant.as_str(), &now_ms().saturating_sub(age)],
                )
                .await?;
            }
            tx.commit().await?;
            Ok(numbers)
        })
        .await
    }

    async fn list_log_events(
        &self,
        tenant: &TenantId,
        filter: &LogFilter,
        order: LogOrder,
        offset: u64,
        limit: u64,
    ) -> Result<LogPage, StoreError> {
        let (conditions, values) = conditions(filter);
        self.call(|mut client| async move {
            let tx = read_snapshot(&mut client).await?;
            let tenant_id = tenant.as_str();
            let mut params: Vec<&(dyn ToSql + Sync)> = vec![&tenant_id];
            params.extend(values.iter().map(|v| v.as_ref() as &(dyn ToSql + Sync)));
            let total: i64 = tx
                .query_one(
                    &format!("SELECT COUNT(*) FROM tenant_logs WHERE tenant_id = $1{conditions}"),
                    &params,
                )
                .await?
                .get(0);
            let direction = match order {
                LogOrder::Ascending => "ASC",
                LogOrder::Descending => "DESC",
            };
            let (limit, offset) = (to_i64(limit), to_i64(offset));
            params.push(&limit);
            params.push(&offset);
            let (l, o) = (params.len() - 1, params.len());
            let rows = tx
                .query(
                    &format!(
                        "SELECT {COLUMNS} FROM tenant_logs WHERE tenant_id = $1{conditions}
                         ORDER BY date {direction}, seq {direction} LIMIT ${l} OFFSET ${o}"
                    ),
                    &params,
                )
                .await?;
            tx.commit().await?;
            let events = rows
                .iter()
                .map(|row| event(tenant, row))
                .collect::<Result<_, _>>()?;
            Ok(LogPage {
                events,
                total: to_version(total),
            })
        })
        .await
    }

    async fn log_events_after(
        &self,
        tenant: &TenantId,
        after: u64,
        take: u32,
        not_before_ms: Option<i64>,
    ) -> Result<Vec<StoredLogEvent>, StoreError> {
        self.call(|client| async move {
            let rows = client
                .query(
                    &format!(
                        "SELECT {COLUMNS} FROM tenant_logs
                         WHERE tenant_id = $1 AND seq > $2 AND date >= $3
                         ORDER BY seq LIMIT $4"
                    ),
                    &[
                        &tenant.as_str(),
                        &to_i64(after),
                        &not_before_ms.unwrap_or(i64::MIN),
                        &i64::from(take),
                    ],
                )
                .await?;
            rows.iter().map(|row| event(tenant, row)).collect()
        })
        .await
    }

    async fn log_event(
        &self,
        tenant: &TenantId,
        seq: u64,
    ) -> Result<Option<StoredLogEvent>, StoreError> {
        self.call(|client| async move {
            let row = client
                .query_opt(
                    &format!("SELECT {COLUMNS} FROM tenant_logs WHERE tenant_id = $1 AND seq = $2"),
                    &[&tenant.as_str(), &to_i64(seq)],
                )
                .await?;
            row.map(|row| event(tenant, &row)).transpose()
        })
        .await
    }

    async fn acl_summary_counts(
        &self,
        tenant: &TenantId,
        window: CountWindow,
    ) -> Result<AclSummaryCounts, StoreError> {
        self.call(|client| async move {
            // The events of the window: one range of the (tenant_id, date) index.
            let rows = client
                .query(
                    "SELECT date, record FROM tenant_logs
                     WHERE tenant_id = $1 AND date >= $2 AND date <= $3
                       AND type = 'acls_summary'",
                    &[&tenant.as_str(), &window.from_ms, &window.to_ms],
                )
                .await?;
            let mut tally = SummaryTally::new(window);
            for row in &rows {
                tally.add(row.get(0), row.get(1));
            }
            Ok(tally.finish())
        })
        .await
    }
}
