use async_trait::async_trait;
use netacl_model::{Connection, Organization};

use super::{now_ms, unique_violation, PostgresStore};
use crate::{OrganizationStore, StoreError, TenantId};

#[async_trait]
impl OrganizationStore for PostgresStore {
    async fn create_organization(
        &self,
        tenant: &TenantId,
        organization: &Organization,
    ) -> Result<Vec<Connection>, StoreError> {
        let record = organization.to_json(&[]).to_string();
        self.call(|mut client| async move {
            let tx = client.transaction().await?;
            let t = tenant.as_str();
            let enabled = organization
                .spec
                .enabled_connections
                .as_deref()
                .unwrap_or(&[]);
            let mut connections = Vec::with_capacity(enabled.len());
            for e in enabled {
                // FOR SHARE: the connection cannot change name or strategy until we commit.
                let found = tx
                    .query_opt(
                        "SELECT name, strategy FROM connections
                         WHERE tenant_id = $1 AND id = $2 FOR SHARE",
                        &[&t, &e.connection_id],
                    )
                    .await?;
                let Some(row) = found else {
                    return Err(StoreError::UnknownConnection(e.connection_id.clone()));
                };
                connections.push(Connection {
                    id: e.connection_id.clone(),
                    name: row.get(0),
                    strategy: row.get(1),
                });
            }
            tx.execute(
                "INSERT INTO organizations (tenant_id, id, name, record, created_at)
                 VALUES ($1, $2, $3, $4, $5)",
                &[
                    &t,
                    &organization.id.as_str(),
                    &organization.spec.name,
                    &record,
                    &now_ms(),
                ],
            )
            .await
            .map_err(|err| match unique_violation(&err) {
                Some("organizations_name_key") => {
                    StoreError::NameTaken(format!("organization name {}", organization.spec.name))
                }
                _ => StoreError::from(err),
            })?;
            for (position, e) in enabled.iter().enumerate() {
                let position = i32::try_from(position).unwrap_or(i32::MAX);
                tx.execute(
                    "INSERT INTO organization_connections
                     (tenant_id, organization_id, connection_id, position) VALUES ($1, $2, $3, $4)",
                    &[&t, &organization.id.as_str(), &e.connection_id, &position],
                )
                .await?;
            }
            tx.commit().await?;
            Ok(connections)
        })
        .await
    }
}
