use async_trait::async_trait;
use netacl_model::{BrandingPatch, BrandingSettings};
use tokio_postgres::GenericClient;

use super::{now_ms, PostgresStore};
use crate::{BrandingStore, StoreError, TenantId};

/// The first key of the two-key advisory lock that serialises a tenant's branding updates.
const BRANDING_LOCK: i32 = 0x6272_616e; // "bran"

/// The stored settings, re-validated; empty when never set.
async fn load(
    client: &impl GenericClient,
    tenant: &TenantId,
) -> Result<BrandingSettings, StoreError> {
    let row = client
        .query_opt(
            "SELECT record FROM branding WHERE tenant_id = $1",
            &[&tenant.as_str()],
        )
        .await?;
    let Some(row) = row else {
        return Ok(BrandingSettings::default());
    };
    let record: &str = row.get(0);
    let corrupt = |reason: String| StoreError::Corrupt {
        tenant: tenant.to_string(),
        id: "branding".into(),
        reason,
    };
    let value: serde_json::Value =
        serde_json::from_str(record).map_err(|err| corrupt(err.to_string()))?;
    BrandingSettings::from_json(&value).map_err(|err| corrupt(err.to_string()))
}

#[async_trait]
impl BrandingStore for PostgresStore {
    async fn branding(&self, tenant: &TenantId) -> Result<BrandingSettings, StoreError> {
        self.call(|client| async move { load(&**client, tenant).await })
            .await
    }

    async fn update_branding(
        &self,
        tenant: &TenantId,
        patch: &BrandingPatch,
    ) -> Result<BrandingSettings, StoreError> {
        self.call(|mut client| async move {
            let tx = client.transaction().await?;
            // Read, merge, write under the tenant's branding lock (a row lock cannot cover the
            // first update, when there is no row yet).
            tx.execute(
                "SELECT pg_advisory_xact_lock($1, hashtext($2))",
                &[&BRANDING_LOCK, &tenant.as_str()],
            )
            .await?;
            let merged = load(&*tx, tenant).await?.apply(patch);
            tx.execute(
                "INSERT INTO branding (tenant_id, record, updated_at) VALUES ($1, $2, $3)
                 ON CONFLICT (tenant_id) DO UPDATE
                 SET record = excluded.record, updated_at = excluded.updated_at",
                &[&tenant.as_str(), &merged.to_json().to_string(), &now_ms()],
            )
            .await?;
            tx.commit().await?;
            Ok(merged)
        })
        .await
    }
}
