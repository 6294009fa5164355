//! A tenant's branding settings.
use async_trait::async_trait;
use netacl_model::{BrandingPatch, BrandingSettings};

use crate::{StoreError, TenantId};

/// A tenant's branding settings: one record per tenant, empty until first updated.
#[async_trait]
pub trait BrandingStore: Send + Sync {
    /// The current settings (empty when never set).
    async fn branding(&self, tenant: &TenantId) -> Result<BrandingSettings, StoreError>;

    /// Merges `patch` into the stored settings in one transaction (read, merge, write) and
    /// returns the whole result, so concurrent patches never lose each other's members.
    async fn update_branding(
        &self,
        tenant: &TenantId,
        patch: &BrandingPatch,
    ) -> Result<BrandingSettings, StoreError>;
}
