//! Organizations of a tenant.
use async_trait::async_trait;
use netacl_model::{Connection, Organization};

use crate::{StoreError, TenantId};

/// A tenant's organizations. Names are unique per tenant, enforced by the database.
#[async_trait]
pub trait OrganizationStore: Send + Sync {
    /// Inserts a new organization in one transaction and returns its enabled connections as
    /// stored (in the organization's order), for the answer's `connection: {name, strategy}`.
    ///
    /// [`StoreError::UnknownConnection`] names the first enabled connection the tenant does not
    /// have; [`StoreError::NameTaken`] when another organization of the tenant has the name (the
    /// database's unique index decides, so two concurrent creates cannot both win). Nothing is
    /// written when an error comes back.
    async fn create_organization(
        &self,
        tenant: &TenantId,
        organization: &Organization,
    ) -> Result<Vec<Connection>, StoreError>;
}
