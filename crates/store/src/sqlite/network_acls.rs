use async_trait::async_trait;
use netacl_model::{AclId, NetworkAcl, RuleSet};
use rusqlite::{params, Connection, ErrorCode, OptionalExtension, Transaction};

use super::history::record_version;
use super::tenants::{acl_version, bump_acl_version};
use super::SqliteStore;
use crate::{
    AclPage, NetworkAclStore, RecordChange, RecordKind, StoreError, TenantId, WriteOrigin,
};

#[async_trait]
impl NetworkAclStore for SqliteStore {
    async fn network_acl_rule_set(&self, tenant: &TenantId) -> Result<RuleSet, StoreError> {
        let tenant = tenant.clone();
        self.read(move |conn, limits| {
            let tx = conn.transaction()?;
            let version = acl_version(&tx, &tenant)?;
            let acls = query_acls(
                &tx,
                &tenant,
                limits,
                "SELECT id, record FROM network_acls WHERE tenant_id = ?1 ORDER BY priority, id",
                params![tenant.as_str()],
            )?;
            tx.commit()?;
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
        let tenant = tenant.clone();
        let offset = i64::try_from(offset).unwrap_or(i64::MAX);
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.read(move |conn, limits| {
            let tx = conn.transaction()?;
            let version = acl_version(&tx, &tenant)?;
            let total: i64 = tx.query_row(
                "SELECT COUNT(*) FROM network_acls WHERE tenant_id = ?1",
                [tenant.as_str()],
                |row| row.get(0),
            )?;
            let acls = query_acls(
                &tx,
                &tenant,
                limits,
                "SELECT id, record FROM network_acls WHERE tenant_id = ?1
                 ORDER BY priority, id LIMIT ?2 OFFSET ?3",
                params![tenant.as_str(), limit, offset],
            )?;
            tx.commit()?;
            Ok(AclPage {
                acls,
                total: super::to_version(total),
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
        let (tenant, id) = (tenant.clone(), id.clone());
        self.read(move |conn, limits| {
            let mut acls = query_acls(
                conn,
                &tenant,
                limits,
                "SELECT id, record FROM network_acls WHERE tenant_id = ?1 AND id = ?2",
                params![tenant.as_str(), id.as_str()],
            )?;
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
        let (tenant, row, origin) = (tenant.clone(), Row::of(acl)?, origin.clone());
        let retention = self.retention;
        self.write(move |conn, _| {
            let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
            let version = bump_acl_version(&tx, &tenant, expected_version)?;
            row.insert(&tx, &tenant)?;
            let change = RecordChange::network_acl(None, Some(&row.acl));
            record_version(&tx, &tenant, version, &origin, &[change], &retention)?;
            tx.commit()?;
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
        let (tenant, row, origin) = (tenant.clone(), Row::of(acl)?, origin.clone());
        let retention = self.retention;
        self.write(move |conn, _| {
            let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
            let version = bump_acl_version(&tx, &tenant, expected_version)?;
            let before = stored_record(&tx, &tenant, row.acl.id.as_str())?
                .ok_or_else(|| StoreError::NotFound(format!("network ACL {}", row.acl.id)))?;
            // Deleted then inserted rather than updated: SQLite writes an updated row's new
            // overflow pages before it frees the old ones, so updating a large record (100,000
            // CIDRs) in place leaves the file a copy of it larger; the delete frees the pages
            // first and the insert reuses them.
            tx.prepare_cached("DELETE FROM network_acls WHERE tenant_id = ?1 AND id = ?2")?
                .execute(params![tenant.as_str(), row.acl.id.as_str()])?;
            row.insert(&tx, &tenant)?;
            let change = RecordChange {
                kind: RecordKind::NetworkAcl,
                op: crate::ChangeOp::Update,
                id: row.acl.id.to_string(),
                before: Some(before),
                after: Some(row.acl.to_json()),
            };
            record_version(&tx, &tenant, version, &origin, &[change], &retention)?;
            tx.commit()?;
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
        let (tenant, id, origin) = (tenant.clone(), id.clone(), origin.clone());
        let retention = self.retention;
        self.write(move |conn, _| {
            let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
            let version = bump_acl_version(&tx, &tenant, expected_version)?;
            let before = stored_record(&tx, &tenant, id.as_str())?
                .ok_or_else(|| StoreError::NotFound(format!("network ACL {id}")))?;
            tx.execute(
                "DELETE FROM network_acls WHERE tenant_id = ?1 AND id = ?2",
                params![tenant.as_str(), id.as_str()],
            )?;
            let change = RecordChange {
                kind: RecordKind::NetworkAcl,
                op: crate::ChangeOp::Delete,
                id: id.to_string(),
                before: Some(before),
                after: None,
            };
            record_version(&tx, &tenant, version, &origin, &[change], &retention)?;
            tx.commit()?;
            Ok(version)
        })
        .await
    }
}

/// The stored JSON of a record (for its history entry), `None` when it does not exist.
fn stored_record(
    tx: &Transaction<'_>,
    tenant: &TenantId,
    id: &str,
) -> Result<Option<serde_json::Value>, StoreError> {
    let text: Option<String> = tx
        .prepare_cached("SELECT record FROM network_acls WHERE tenant_id = ?1 AND id = ?2")?
        .query_row(params![tenant.as_str(), id], |row| row.get(0))
        .optional()?;
    text.map(|text| {
        serde_json::from_str(&text).map_err(|err| StoreError::Corrupt {
            tenant: tenant.to_string(),
            id: id.to_owned(),
            reason: err.to_string(),
        })
    })
    .transpose()
}

/// A record ready to be written: the validated value and its JSON text.
pub(super) struct Row {
    acl: NetworkAcl,
    record: String,
}

impl Row {
    /// Inserts the record (a unique-constraint failure mapped to what it means).
    pub(super) fn insert(&self, tx: &Transaction<'_>, tenant: &TenantId) -> Result<(), StoreError> {
        tx.prepare_cached(
            "INSERT INTO network_acls (tenant_id, id, priority, record, created_at, updated_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        )?
        .execute(params![
            tenant.as_str(),
            self.acl.id.as_str(),
            self.acl.spec.priority.get(),
            self.record,
            self.acl.created_at.unix_millis(),
            self.acl.updated_at.unix_millis()
        ])
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

    /// Maps a unique-constraint failure to the error it means.
    fn constraint_error(&self, err: rusqlite::Error) -> StoreError {
        match constraint_message(&err) {
            Some(message) if message.contains("priority") => {
                StoreError::PriorityTaken(self.acl.spec.priority)
            }
            Some(_) => StoreError::DuplicateId(self.acl.id.clone()),
            None => err.into(),
        }
    }
}

/// The message of a UNIQUE / PRIMARY KEY constraint failure, `None` for any other error.
pub(super) fn constraint_message(err: &rusqlite::Error) -> Option<String> {
    match err {
        rusqlite::Error::SqliteFailure(code, message)
            if code.code == ErrorCode::ConstraintViolation
                && matches!(
                    code.extended_code,
                    rusqlite::ffi::SQLITE_CONSTRAINT_UNIQUE
                        | rusqlite::ffi::SQLITE_CONSTRAINT_PRIMARYKEY
                ) =>
        {
            Some(message.clone().unwrap_or_default())
        }
        _ => None,
    }
}

/// Runs a query returning `(id, record)` rows and re-validates every record.
pub(super) fn query_acls(
    conn: &Connection,
    tenant: &TenantId,
    limits: &netacl_model::Limits,
    sql: &str,
    params: impl rusqlite::Params,
) -> Result<Vec<NetworkAcl>, StoreError> {
    let mut stmt = conn.prepare_cached(sql)?;
    let rows = stmt.query_map(params, |row| {
        Ok((row.get::<_, String>(0)?, row.get::<_, String>(1)?))
    })?;
    let mut acls = Vec::new();
    for row in rows {
        let (id, record) = row?;
        let corrupt = |reason: String| StoreError::Corrupt {
            tenant: tenant.to_string(),
            id: id.clone(),
            reason,
        };
        let value: serde_json::Value =
            serde_json::from_str(&record).map_err(|err| corrupt(err.to_string()))?;
        let acl = NetworkAcl::from_json(&value, limits).map_err(|err| corrupt(err.to_string()))?;
        if acl.id.as_str() != id {
            return Err(corrupt(format!("the record holds id {}", acl.id)));
        }
        acls.push(acl);
    }
    Ok(acls)
}
