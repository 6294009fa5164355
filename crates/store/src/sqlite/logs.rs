use async_trait::async_trait;
use rusqlite::types::Value as SqlValue;
use rusqlite::{params, params_from_iter, Connection, OptionalExtension};

use super::{now_ms, to_version, SqliteStore};
use crate::logs::{first_kept, parse_record, record_text, SummaryTally};
use crate::{
    AclSummaryCounts, CountWindow, LogFilter, LogOrder, LogPage, LogRetention, LogStore,
    NewLogEvent, StoreError, StoredLogEvent, TenantId,
};

const COLUMNS: &str = "seq, date, type, client_id, record";

fn read_events(
    conn: &Connection,
    tenant: &TenantId,
    sql: &str,
    values: Vec<SqlValue>,
) -> Result<Vec<StoredLogEvent>, StoreError> {
    let mut stmt = conn.prepare_cached(sql)?;
    let rows = stmt.query_map(params_from_iter(values), |row| {
        Ok((
            row.get::<_, i64>(0)?,
            row.get::<_, i64>(1)?,
            row.get::<_, String>(2)?,
            row.get::<_, Option<String>>(3)?,
            row.get::<_, String>(4)?,
        ))
    })?;
    let mut events = Vec::new();
    for row in rows {
        let (seq, date_ms, event_type, client_id, record) = row?;
        let seq = to_version(seq);
        events.push(StoredLogEvent {
            seq,
            date_ms,
            event_type,
            client_id,
            record: parse_record(tenant, seq, &record)?,
        });
    }
    Ok(events)
}

/// `WHERE` conditions (after the tenant's) and their values for a filter.
fn conditions(filter: &LogFilter, values: &mut Vec<SqlValue>) -> String {
    let mut sql = String::new();
    if let Some(event_type) = &filter.event_type {
        values.push(SqlValue::Text(event_type.clone()));
        sql.push_str(&format!(" AND type = ?{}", values.len()));
    }
    if let Some(client_id) = &filter.client_id {
        values.push(SqlValue::Text(client_id.clone()));
        sql.push_str(&format!(" AND client_id = ?{}", values.len()));
    }
    if let Some(from) = filter.from_ms {
        values.push(SqlValue::Integer(from));
        sql.push_str(&format!(" AND date >= ?{}", values.len()));
    }
    if let Some(to) = filter.to_ms {
        values.push(SqlValue::Integer(to));
        sql.push_str(&format!(" AND date <= ?{}", values.len()));
    }
    sql
}

fn to_i64(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

#[async_trait]
impl LogStore for SqliteStore {
    async fn append_log_events(
        &self,
        tenant: &TenantId,
        events: &[NewLogEvent],
        retention: LogRetention,
    ) -> Result<Vec<u64>, StoreError> {
        if events.is_empty() {
            return Ok(Vec::new());
        }
        let tenant = tenant.clone();
        let rows = events
            .iter()
            .map(|e| Ok((e.clone(), record_text(&e.record)?)))
            .collect::<Result<Vec<_>, StoreError>>()?;
        self.write(move |conn, _| {
            let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
            let count = i64::try_from(rows.len()).unwrap_or(i64::MAX);
            let last: Option<i64> = tx
                .query_row(
                    "UPDATE tenants SET log_seq = log_seq + ?2 WHERE id = ?1 RETURNING log_seq",
                    params![tenant.as_str(), count],
                    |row| row.get(0),
                )
                .optional()?;
            let Some(last) = last else {
                return Err(StoreError::NotFound(format!("tenant {tenant}")));
            };
            let first = last - count + 1;
            let mut numbers = Vec::with_capacity(rows.len());
            {
                let mut insert = tx.prepare_cached(
                    "INSERT INTO tenant_logs (tenant_id, seq, date, type, client_id, record)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                )?;
                for (offset, (event, record)) in rows.iter().enumerate() {
                    let seq = first + offset as i64;
                    insert.execute(params![
                        tenant.as_str(),
                        seq,
                        event.date_ms,
                        event.event_type,
                        event.client_id,
                        record
                    ])?;
                    numbers.push(to_version(seq));
                }
            }
            if let Some(first_kept) = first_kept(to_version(last), retention) {
                tx.execute(
                    "DELETE FROM tenant_logs WHERE tenant_id = ?1 AND seq < ?2",
                    params![tenant.as_str(), to_i64(first_kept)],
                )?;
            }
            if let Some(age) = retention.max_age_ms {
                tx.execute(
                    "DELETE FROM tenant_logs WHERE tenant_id = ?1 AND date < ?2",
                    params![tenant.as_str(), now_ms().saturating_sub(age)],
                )?;
            }
            tx.commit()?;
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
        let (tenant, filter) = (tenant.clone(), filter.clone());
        self.read(move |conn, _| {
            let tx = conn.transaction()?;
            let mut values = vec![SqlValue::Text(tenant.as_str().to_owned())];
            let conditions = conditions(&filter, &mut values);
            let total: i64 = tx.query_row(
                &format!("SELECT COUNT(*) FROM tenant_logs WHERE tenant_id = ?1{conditions}"),
                params_from_iter(values.clone()),
                |row| row.get(0),
            )?;
            let direction = match order {
                LogOrder::Ascending => "ASC",
                LogOrder::Descending => "DESC",
            };
            values.push(SqlValue::Integer(to_i64(limit)));
            values.push(SqlValue::Integer(to_i64(offset)));
            let (l, o) = (values.len() - 1, values.len());
            let events = read_events(
                &tx,
                &tenant,
                &format!(
                    "SELECT {COLUMNS} FROM tenant_logs WHERE tenant_id = ?1{conditions}
                     ORDER BY date {direction}, seq {direction} LIMIT ?{l} OFFSET ?{o}"
                ),
                values,
            )?;
            tx.commit()?;
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
        let tenant = tenant.clone();
        self.read(move |conn, _| {
            read_events(
                conn,
                &tenant,
                &format!(
                    "SELECT {COLUMNS} FROM tenant_logs
                     WHERE tenant_id = ?1 AND seq > ?2 AND date >= ?3
                     ORDER BY seq LIMIT ?4"
                ),
                vec![
                    SqlValue::Text(tenant.as_str().to_owned()),
                    SqlValue::Integer(to_i64(after)),
                    SqlValue::Integer(not_before_ms.unwrap_or(i64::MIN)),
                    SqlValue::Integer(i64::from(take)),
                ],
            )
        })
        .await
    }

    async fn log_event(
        &self,
        tenant: &TenantId,
        seq: u64,
    ) -> Result<Option<StoredLogEvent>, StoreError> {
        let tenant = tenant.clone();
        self.read(move |conn, _| {
            let mut events = read_events(
                conn,
                &tenant,
                &format!("SELECT {COLUMNS} FROM tenant_logs WHERE tenant_id = ?1 AND seq = ?2"),
                vec![
                    SqlValue::Text(tenant.as_str().to_owned()),
                    SqlValue::Integer(to_i64(seq)),
                ],
            )?;
            Ok(events.pop())
        })
        .await
    }

    async fn acl_summary_counts(
        &self,
        tenant: &TenantId,
        window: CountWindow,
    ) -> Result<AclSummaryCounts, StoreError> {
        let tenant = tenant.clone();
        self.read(move |conn, _| {
            // The events of the window: one range of the (tenant_id, date) index.
            let mut stmt = conn.prepare_cached(
                "SELECT date, record FROM tenant_logs
                 WHERE tenant_id = ?1 AND date >= ?2 AND date <= ?3 AND type = 'acls_summary'",
            )?;
            let mut rows = stmt.query(params![tenant.as_str(), window.from_ms, window.to_ms])?;
            let mut tally = SummaryTally::new(window);
            while let Some(row) = rows.next()? {
                let date: i64 = row.get(0)?;
                if let Ok(record) = row.get_ref(1)?.as_str() {
                    tally.add(date, record);
                }
            }
            Ok(tally.finish())
        })
        .await
    }
}
