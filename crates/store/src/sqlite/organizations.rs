use async_trait::async_trait;
use netacl_model::{Connection, Organization};
use rusqlite::{params, ErrorCode, OptionalExtension};

use super::{now_ms, SqliteStore};
use crate::{OrganizationStore, StoreError, TenantId};

#[async_trait]
impl OrganizationStore for SqliteStore {
    async fn create_organization(
        &self,
        tenant: &TenantId,
        organization: &Organization,
    ) -> Result<Vec<Connection>, StoreError> {
        let (tenant, org) = (tenant.clone(), organization.clone());
        let record = organization.to_json(&[]).to_string();
        self.write(move |conn, _| {
            let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
            let enabled = org.spec.enabled_connections.as_deref().unwrap_or(&[]);
            let mut connections = Vec::with_capacity(enabled.len());
            for e in enabled {
                let found = tx
                    .query_row(
                        "SELECT name, strategy FROM connections WHERE tenant_id = ?1 AND id = ?2",
                        params![tenant.as_str(), e.connection_id],
                        |row| Ok((row.get::<_, String>(0)?, row.get::<_, String>(1)?)),
                    )
                    .optional()?;
                let Some((name, strategy)) = found else {
                    return Err(StoreError::UnknownConnection(e.connection_id.clone()));
                };
                connections.push(Connection {
                    id: e.connection_id.clone(),
                    name,
                    strategy,
                });
            }
            tx.execute(
                "INSERT INTO organizations (tenant_id, id, name, record, created_at)
                 VALUES (?1, ?2, ?3, ?4, ?5)",
                params![
                    tenant.as_str(),
                    org.id.as_str(),
                    org.spec.name,
                    record,
                    now_ms()
                ],
            )
            .map_err(|err| match &err {
                rusqlite::Error::SqliteFailure(e, Some(message))
                    if e.code == ErrorCode::ConstraintViolation
                        && message.contains("organizations.name") =>
                {
                    StoreError::NameTaken(format!("organization name {}", org.spec.name))
                }
                _ => StoreError::from(err),
            })?;
            for (position, e) in enabled.iter().enumerate() {
                tx.execute(
                    "INSERT INTO organization_connections
                     (tenant_id, organization_id, connection_id, position) VALUES (?1, ?2, ?3, ?4)",
                    params![
                        tenant.as_str(),
                        org.id.as_str(),
                        e.connection_id,
                        position as i64
                    ],
                )?;
            }
            tx.commit()?;
            Ok(connections)
        })
        .await
    }
}
