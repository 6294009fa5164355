use async_trait::async_trait;
use netacl_model::{Connection, DirectoryData, GroupId};
use serde_json::Value;
use tokio_postgres::types::ToSql;
use tokio_postgres::GenericClient;

use super::{read_snapshot, to_version, unique_violation, PostgresStore};
use crate::{DirectoryStore, ImportReport, Page, StoreError, TenantId};

/// The first key of the two-key advisory lock that serialises a tenant's imports: sequence
/// numbers are then committed in order, and name checks cannot race.
const DIRECTORY_LOCK: i32 = 0x6469_7263; // "dirc"

/// Counts one upserted record and writes it when it is new or differs from `existing`.
async fn upsert(
    tx: &impl GenericClient,
    report: &mut ImportReport,
    existing: Option<String>,
    record: &str,
    sql: &str,
    params: &[&(dyn ToSql + Sync)],
) -> Result<(), StoreError> {
    let unchanged = matches!(&existing, Some(old) if old == record);
    if unchanged {
        report.unchanged += 1;
        return Ok(());
    }
    tx.execute(sql, params)
        .await
        .map_err(|err| match unique_violation(&err) {
            // Backstop behind the name check: the database's unique constraint.
            Some("connections_name_key") => StoreError::NameTaken("connection name".into()),
            _ => StoreError::from(err),
        })?;
    if existing.is_some() {
        report.updated += 1;
    } else {
        report.inserted += 1;
    }
    Ok(())
}

/// The stored `record` column of the row `sql` selects, if any.
async fn stored(
    tx: &impl GenericClient,
    sql: &str,
    params: &[&(dyn ToSql + Sync)],
) -> Result<Option<String>, StoreError> {
    Ok(tx.query_opt(sql, params).await?.map(|row| row.get(0)))
}

async fn import(
    tx: &impl GenericClient,
    tenant: &TenantId,
    data: &DirectoryData,
) -> Result<ImportReport, StoreError> {
    let t = tenant.as_str();
    let mut report = ImportReport::default();
    for (i, c) in data.connections.iter().enumerate() {
        let holder = tx
            .query_opt(
                "SELECT id FROM connections WHERE tenant_id = $1 AND name = $2 AND id <> $3",
                &[&t, &c.name, &c.id],
            )
            .await?;
        if let Some(holder) = holder {
            let holder: String = holder.get(0);
            return Err(StoreError::NameTaken(format!(
                "connections[{i}].name: {} is the name of stored connection {holder}",
                c.name
            )));
        }
        let record = c.to_json().to_string();
        let existing = stored(
            tx,
            "SELECT record FROM connections WHERE tenant_id = $1 AND id = $2",
            &[&t, &c.id],
        )
        .await?;
        upsert(
            tx,
            &mut report,
            existing,
            &record,
            "INSERT INTO connections (tenant_id, id, name, strategy, record)
             VALUES ($1, $2, $3, $4, $5)
             ON CONFLICT (tenant_id, id) DO UPDATE
             SET name = excluded.name, strategy = excluded.strategy, record = excluded.record",
            &[&t, &c.id, &c.name, &c.strategy, &record],
        )
        .await
        .map_err(|err| match err {
            StoreError::NameTaken(_) => {
                StoreError::NameTaken(format!("connections[{i}].name: {}", c.name))
            }
            other => other,
        })?;
    }
    for u in &data.users {
        let record = u.record.to_string();
        let existing = stored(
            tx,
            "SELECT record FROM directory_users WHERE tenant_id = $1 AND user_id = $2",
            &[&t, &u.user_id],
        )
        .await?;
        upsert(
            tx,
            &mut report,
            existing,
            &record,
            "INSERT INTO directory_users (tenant_id, user_id, record) VALUES ($1, $2, $3)
             ON CONFLICT (tenant_id, user_id) DO UPDATE SET record = excluded.record",
            &[&t, &u.user_id, &record],
        )
        .await?;
    }
    for g in &data.groups {
        let record = g.record.to_string();
        let existing = stored(
            tx,
            "SELECT record FROM directory_groups WHERE tenant_id = $1 AND id = $2",
            &[&t, &g.id.as_str()],
        )
        .await?;
        upsert(
            tx,
            &mut report,
            existing,
            &record,
            "INSERT INTO directory_groups (tenant_id, id, record) VALUES ($1, $2, $3)
             ON CONFLICT (tenant_id, id) DO UPDATE SET record = excluded.record",
            &[&t, &g.id.as_str(), &record],
        )
        .await?;
    }
    for m in &data.members {
        let record = m.record.to_string();
        let existing = stored(
            tx,
            "SELECT record FROM group_members
             WHERE tenant_id = $1 AND group_id = $2 AND member_id = $3",
            &[&t, &m.group_id.as_str(), &m.member_id],
        )
        .await?;
        upsert(
            tx,
            &mut report,
            existing,
            &record,
            "INSERT INTO group_members (tenant_id, group_id, member_id, record)
             VALUES ($1, $2, $3, $4)
             ON CONFLICT (tenant_id, group_id, member_id) DO UPDATE SET record = excluded.record",
            &[&t, &m.group_id.as_str(), &m.member_id, &record],
        )
        .await?;
    }
    for s in &data.sessions {
        let record = s.record.to_string();
        let existing = stored(
            tx,
            "SELECT record FROM user_sessions WHERE tenant_id = $1 AND id = $2",
            &[&t, &s.id],
        )
        .await?;
        upsert(
            tx,
            &mut report,
            existing,
            &record,
            "INSERT INTO user_sessions (tenant_id, id, user_id, record) VALUES ($1, $2, $3, $4)
             ON CONFLICT (tenant_id, id) DO UPDATE
             SET user_id = excluded.user_id, record = excluded.record",
            &[&t, &s.id, &s.user_id, &record],
        )
        .await?;
    }
    Ok(report)
}

/// Reads `(seq, record)` rows into a page of at most `limit` records.
async fn page(
    tx: &impl GenericClient,
    tenant: &TenantId,
    sql: &str,
    owner: &str,
    after: Option<u64>,
    limit: u32,
) -> Result<Page, StoreError> {
    let after = after.map_or(0, |a| i64::try_from(a).unwrap_or(i64::MAX));
    let fetch = i64::from(limit) + 1;
    let rows = tx
        .query(sql, &[&tenant.as_str(), &owner, &after, &fetch])
        .await?;
    let mut items = Vec::with_capacity(limit as usize);
    let mut last = None;
    let mut more = false;
    for row in rows {
        let seq: i64 = row.get(0);
        let record: &str = row.get(1);
        if items.len() == limit as usize {
            more = true;
            break;
        }
        let value: Value = serde_json::from_str(record).map_err(|err| StoreError::Corrupt {
            tenant: tenant.to_string(),
            id: format!("{owner} #{seq}"),
            reason: err.to_string(),
        })?;
        items.push(value);
        last = Some(to_version(seq));
    }
    Ok(Page {
        items,
        next_after: if more { last } else { None },
        total: None,
    })
}

#[async_trait]
impl DirectoryStore for PostgresStore {
    async fn import_directory(
        &self,
        tenant: &TenantId,
        data: &DirectoryData,
    ) -> Result<ImportReport, StoreError> {
        self.call(|mut client| async move {
            let tx = client.transaction().await?;
            tx.execute(
                "SELECT pg_advisory_xact_lock($1, hashtext($2))",
                &[&DIRECTORY_LOCK, &tenant.as_str()],
            )
            .await?;
            let report = import(&*tx, tenant, data).await?;
            tx.commit().await?;
            Ok(report)
        })
        .await
    }

    async fn connections(&self, tenant: &TenantId) -> Result<Vec<Connection>, StoreError> {
        self.call(|client| async move {
            let rows = client
                .query(
                    "SELECT id, name, strategy FROM connections WHERE tenant_id = $1
                     ORDER BY name",
                    &[&tenant.as_str()],
                )
                .await?;
            Ok(rows
                .into_iter()
                .map(|row| Connection {
                    id: row.get(0),
                    name: row.get(1),
                    strategy: row.get(2),
                })
                .collect())
        })
        .await
    }

    async fn group_members(
        &self,
        tenant: &TenantId,
        group: &GroupId,
        after: Option<u64>,
        limit: u32,
    ) -> Result<Option<Page>, StoreError> {
        self.call(|mut client| async move {
            let tx = read_snapshot(&mut client).await?;
            let exists = tx
                .query_opt(
                    "SELECT 1 FROM directory_groups WHERE tenant_id = $1 AND id = $2",
                    &[&tenant.as_str(), &group.as_str()],
                )
                .await?
                .is_some();
            if !exists {
                return Ok(None);
            }
            let page = page(
                &*tx,
                tenant,
                "SELECT seq, record FROM group_members
                 WHERE tenant_id = $1 AND group_id = $2 AND seq > $3 ORDER BY seq LIMIT $4",
                group.as_str(),
                after,
                limit,
            )
            .await?;
            tx.commit().await?;
            Ok(Some(page))
        })
        .await
    }

    async fn user_sessions(
        &self,
        tenant: &TenantId,
        user_id: &str,
        after: Option<u64>,
        limit: u32,
        with_total: bool,
    ) -> Result<Option<Page>, StoreError> {
        self.call(|mut client| async move {
            let tx = read_snapshot(&mut client).await?;
            let exists = tx
                .query_opt(
                    "SELECT 1 FROM directory_users WHERE tenant_id = $1 AND user_id = $2",
                    &[&tenant.as_str(), &user_id],
                )
                .await?
                .is_some();
            if !exists {
                return Ok(None);
            }
            let mut page = page(
                &*tx,
                tenant,
                "SELECT seq, record FROM user_sessions
                 WHERE tenant_id = $1 AND user_id = $2 AND seq > $3 ORDER BY seq LIMIT $4",
                user_id,
                after,
                limit,
            )
            .await?;
            if with_total {
                let total: i64 = tx
                    .query_one(
                        "SELECT COUNT(*) FROM user_sessions WHERE tenant_id = $1 AND user_id = $2",
                        &[&tenant.as_str(), &user_id],
                    )
                    .await?
                    .get(0);
                page.total = Some(to_version(total));
            }
            tx.commit().await?;
            Ok(Some(page))
        })
        .await
    }
}
