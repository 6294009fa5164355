use async_trait::async_trait;
use netacl_model::{AclId, Limits, NetworkAcl, RuleSet};
use tokio_postgres::types::ToSql;
use tokio_postgres::GenericClient;

use super::history::record_version;
use super::tenants::{acl_version, bump_acl_version};
use super::{read_snapshot, to_version, unique_violation, PostgresStore};
use crate::{
    AclPage, ChangeOp, NetworkAclStore, RecordChange, RecordKind, StoreError, TenantId, WriteOrigin,
};

#[async_trait]
impl NetworkAclStore for PostgresStore {
    async fn network_acl_rule_set(&self, tenant: &TenantId) -> Result<RuleSet, StoreError> {
        let limits = self.limits;
        self.call(|mut client| async move {
            // One snapshot for the version and the records.
            let tx = read_snapshot(&mut client).await?;
            let version = acl_version(&*tx, tenant).await?;
            let acls = query_acls(
                &*tx,
                tenant,
                &limits,
                "SELECT id, record FROM network_acls WHERE tenant_id = $1
                 ORDER BY priority, id",
                &[&tenant.as_str()],
            )
            .await?;
            tx.commit().await?;
            Ok(RuleSet { version, acls })
        })
        .await
    }

    async fn list_network_acls(
        &self,
        tenant: &TenantId,
        offset: u64,
        limit: u64,
    ) -> Result<AclPage, StoreError> {
        let limits = self.limits;
        let offset = i64::try_from(offset).unwrap_or(i64::MAX);
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.call(|mut client| async move {
            let tx = read_snapshot(&mut client).await?;
            let version = acl_version(&*tx, tenant).await?;
            let total: i64 = tx
                .query_one(
                    "SELECT COUNT(*) FROM network_acls WHERE tenant_id = $1",
                    &[&tenant.as_str()],
                )
                .await?
                .get(0);
            let acls = query_acls(
                &*tx,
                tenant,
                &limits,
                "SELECT id, record FROM network_acls WHERE tenant_id = $1
                 ORDER BY priority, id LIMIT $2 OFFSET $3",
                &[&tenant.as_str(), &limit, &offset],
            )
            .await?;
            tx.commit().await?;
            Ok(AclPage {
                acls,
                total: to_version(total),
                version,
            })
        })
        .await
    }

    async fn get_network_acl(
        &self,
        tenant: &TenantId,
        id: &AclId,
    ) -> Result<NetworkAcl, StoreError> {
        let limits = self.limits;
        self.call(|client| async move {
            let mut acls = query_acls(
                &**client,
                tenant,
                &limits,
                "SELECT id, record FROM network_acls WHERE tenant_id = $1 AND id = $2",
                &[&tenant.as_str(), &id.as_str()],
            )
            .await?;
            acls.pop()
                .ok_or_else(|| StoreError::NotFound(format!("network ACL {id}")))
        })
        .await
    }

    async fn create_network_acl(
        &self,
        tenant: &TenantId,
        expected_version: u64,
        acl: &NetworkAcl,
        origin: &WriteOrigin,
    ) -> Result<u64, StoreError> {
        let row = Row::of(acl)?;
        let retention = self.retention;
        self.call(|mut client| async move {
            let tx = client.transaction().await?;
            let version = bump_acl_version(&*tx, tenant, expected_version).await?;
            row.insert(&*tx, tenant).await?;
            let change = RecordChange::network_acl(None, Some(&row.acl));
            record_version(&*tx, tenant, version, origin, &[change], &retention).await?;
            tx.commit().await?;
            Ok(version)
        })
        .await
    }

    async fn replace_network_acl(
        &self,
        tenant: &TenantId,
        expected_version: u64,
        acl: &NetworkAcl,
        origin: &WriteOrigin,
    ) -> Result<u64, StoreError> {
        let row = Row::of(acl)?;
        let retention = self.retention;
        self.call(|mut client| async move {
            let tx = client.transaction().await?;
            let version = bump_acl_version(&*tx, tenant, expected_version).await?;
            let before = stored_record(&*tx, tenant, row.acl.id.as_str())
                .await?
                .ok_or_else(|| StoreError::NotFound(format!("network ACL {}", row.acl.id)))?;
            let changed = tx
                .execute(
                    "UPDATE network_acls SET priority = $3, record = $4, updated_at = $5
                     WHERE tenant_id = $1 AND id = $2",
                    &[
                        &tenant.as_str(),
                        &row.acl.id.as_str(),
                        &i32::from(row.acl.spec.priority.get()),
                        &row.record,
                        &row.acl.updated_at.unix_millis(),
                    ],
                )
                .await
                .map_err(|err| row.constraint_error(err))?;
            if changed == 0 {
                return Err(StoreError::NotFound(format!("network ACL {}", row.acl.id)));
            }
            let change = RecordChange {
                kind: RecordKind::NetworkAcl,
                op: ChangeOp::Update,
                id: row.acl.id.to_string(),
                before: Some(before),
                after: Some(row.acl.to_json()),
            };
            record_version(&*tx, tenant, version, origin, &[change], &retention).await?;
            tx.commit().await?;
            Ok(version)
        })
        .await
    }

    async fn delete_network_acl(
        &self,
        tenant: &TenantId,
        expected_version: u64,
        id: &AclId,
        origin: &WriteOrigin,
    ) -> Result<u64, StoreError> {
        let retention = self.retention;
        self.call(|mut client| async move {
            let tx = client.transaction().await?;
            let version = bump_acl_version(&*tx, tenant, expected_version).await?;
            let before: String = tx
                .query_opt(
                    "DELETE FROM network_acls WHERE tenant_id = $1 AND id = $2 RETURNING record",
                    &[&tenant.as_str(), &id.as_str()],
                )
                .await?
                .ok_or_else(|| StoreError::NotFound(format!("network ACL {id}")))?
                .get(0);
            let change = RecordChange {
                kind: RecordKind::NetworkAcl,
                op: ChangeOp::Delete,
                id: id.to_string(),
                before: Some(parse_record(tenant, id.as_str(), &before)?),
                after: None,
            };
            record_version(&*tx, tenant, version, origin, &[change], &retention).await?;
            tx.commit().await?;
            Ok(version)
        })
        .await
    }
}

/// A stored record's JSON.
fn parse_record(tenant: &TenantId, id: &str, text: &str) -> Result<serde_json::Value, StoreError> {
    serde_json::from_str(text).map_err(|err| StoreError::Corrupt {
        tenant: tenant.to_string(),
        id: id.to_owned(),
        reason: err.to_string(),
    })
}

/// The stored JSON of a record (for its history entry), `None` when it does not exist.
async fn stored_record(
    tx: &impl GenericClient,
    tenant: &TenantId,
    id: &str,
) -> Result<Option<serde_json::Value>, StoreError> {
    let row = tx
        .query_opt(
            "SELECT record FROM network_acls WHERE tenant_id = $1 AND id = $2",
            &[&tenant.as_str(), &id],
        )
        .await?;
    row.map(|row| parse_record(tenant, id, row.get(0)))
        .transpose()
}

/// A record ready to be written: the validated value and its JSON text.
pub(super) struct Row {
    acl: NetworkAcl,
    record: String,
}

impl Row {
    /// Inserts the record (a unique-constraint violation mapped to what it means).
    pub(super) async fn insert(
        &self,
        tx: &impl GenericClient,
        tenant: &TenantId,
    ) -> Result<(), StoreError> {
        tx.execute(
            "INSERT INTO network_acls (tenant_id, id, priority, record, created_at, updated_at)
             VALUES ($1, $2, $3, $4, $5, $6)",
            &[
                &tenant.as_str(),
                &self.acl.id.as_str(),
                &i32::from(self.acl.spec.priority.get()),
                &self.record,
                &self.acl.created_at.unix_millis(),
                &self.acl.updated_at.unix_millis(),
            ],
        )
        .await
        .map_err(|err| self.constraint_error(err))?;
        Ok(())
    }

    pub(super) fn of(acl: &NetworkAcl) -> Result<Self, StoreError> {
        let record = serde_json::to_string(&acl.to_json())
            .map_err(|err| StoreError::Unavailable(format!("cannot serialise record: {err}")))?;
        Ok(Self {
            acl: acl.clone(),
            record,
        })
    }

    /// Maps a unique-constraint violation to the error it means.
    fn constraint_error(&self, err: tokio_postgres::Error) -> StoreError {
        match unique_violation(&err) {
            Some("network_acls_priority_key") => StoreError::PriorityTaken(self.acl.spec.priority),
            Some(_) => StoreError::DuplicateId(self.acl.id.clone()),
            None => err.into(),
        }
    }
}

/// Runs a query returning `(id, record)` rows and re-validates every record.
pub(super) async fn query_acls(
    client: &impl GenericClient,
    tenant: &TenantId,
    limits: &Limits,
    sql: &str,
    params: &[&(dyn ToSql + Sync)],
) -> Result<Vec<NetworkAcl>, StoreError> {
    let statement = client.prepare(sql).await?;
    let rows = client.query(&statement, params).await?;
    let mut acls = Vec::with_capacity(rows.len());
    for row in rows {
        let id: String = row.get(0);
        let record: &str = row.get(1);
        let corrupt = |reason: String| StoreError::Corrupt {
            tenant: tenant.to_string(),
            id: id.clone(),
            reason,
        };
        let value: serde_json::Value =
            serde_json::from_str(record).map_err(|err| corrupt(err.to_string()))?;
        let acl = NetworkAcl::from_json(&value, limits).map_err(|err| corrupt(err.to_string()))?;
        if acl.id.as_str() != id {
            return Err(corrupt(format!("the record holds id {}", acl.id)));
        }
        acls.push(acl);
    }
    Ok(acls)
}
