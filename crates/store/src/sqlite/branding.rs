use async_trait::async_trait;
use netacl_model::{BrandingPatch, BrandingSettings};
use rusqlite::{params, Connection, OptionalExtension};

use super::{now_ms, SqliteStore};
use crate::{BrandingStore, StoreError, TenantId};

/// The stored settings, re-validated; empty when never set.
fn load(conn: &Connection, tenant: &TenantId) -> Result<BrandingSettings, StoreError> {
    let record: Option<String> = conn
        .query_row(
            "SELECT record FROM branding WHERE tenant_id = ?1",
            [tenant.as_str()],
            |row| row.get(0),
        )
        .optional()?;
    let Some(record) = record else {
        return Ok(BrandingSettings::default());
    };
    let corrupt = |reason: String| StoreError::Corrupt {
        tenant: tenant.to_string(),
        id: "branding".into(),
        reason,
    };
    let value: serde_json::Value =
        serde_json::from_str(&record).map_err(|err| corrupt(err.to_string()))?;
    BrandingSettings::from_json(&value).map_err(|err| corrupt(err.to_string()))
}

#[async_trait]
impl BrandingStore for SqliteStore {
    async fn branding(&self, tenant: &TenantId) -> Result<BrandingSettings, StoreError> {
        let tenant = tenant.clone();
        self.read(move |conn, _| load(conn, &tenant)).await
    }

    async fn update_branding(
        &self,
        tenant: &TenantId,
        patch: &BrandingPatch,
    ) -> Result<BrandingSettings, StoreError> {
        let (tenant, patch) = (tenant.clone(), patch.clone());
        self.write(move |conn, _| {
            let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
            let merged = load(&tx, &tenant)?.apply(&patch);
            tx.execute(
                "INSERT INTO branding (tenant_id, record, updated_at) VALUES (?1, ?2, ?3)
                 ON CONFLICT (tenant_id) DO UPDATE
                 SET record = excluded.record, updated_at = excluded.updated_at",
                params![tenant.as_str(), merged.to_json().to_string(), now_ms()],
            )?;
            tx.commit()?;
            Ok(merged)
        })
        .await
    }
}
