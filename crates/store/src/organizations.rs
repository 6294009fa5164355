//! Organizations of a tenant, and their connections.
//!
//! Organizations are listed in creation order (`created_at`, then id), which never changes for a
//! record. A tenant's creates are serialised and each takes a `created_at` after every earlier
//! one (the next millisecond when the clock has not moved), so a checkpoint
//! ([`OrganizationCursor`]) stays exact while organizations are added, renamed or deleted
//! between two pages: later creates appear after it, nothing is served twice or skipped.
//!
//! An organization's connections are rows of their own (flags included), listed in the order
//! they were added; the create's `enabled_connections` become such rows.
use async_trait::async_trait;
use netacl_model::{
    AccessLevel, Connection, Organization, OrganizationConnection, OrganizationConnectionPatch,
    OrganizationId, OrganizationPatch,
};

use crate::{StoreError, TenantId};

/// A position in a tenant's organizations: the creation time (UNIX milliseconds) and id of the
/// last organization served. The next page starts strictly after it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OrganizationCursor {
    /// When the organization was created.
    pub created_at_ms: i64,
    /// Its id.
    pub id: OrganizationId,
}

/// One page of a tenant's organizations.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OrganizationPage {
    /// The organizations, in creation order.
    pub organizations: Vec<Organization>,
    /// How many organizations the tenant holds (offset pages only).
    pub total: Option<u64>,
    /// Where the next checkpoint page starts; `None` on the last page (and for offset pages).
    pub next: Option<OrganizationCursor>,
}

/// One connection of an organization, with the tenant's connection it names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OrganizationConnectionEntry {
    /// The organization's settings for the connection.
    pub settings: OrganizationConnection,
    /// The connection (`name`, `strategy` for the answer's `connection`).
    pub connection: Connection,
}

/// A page of an organization's connections, with how many match in all.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OrganizationConnectionPage {
    /// The connections, in the order they were added.
    pub entries: Vec<OrganizationConnectionEntry>,
    /// How many connections of the organization match the filter.
    pub total: u64,
}

/// A tenant's organizations. Names are unique per tenant, enforced by the database. Every write
/// is one transaction; when an error comes back, nothing was written.
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

    /// The organizations at `offset` (at most `limit` of them) in creation order, with the
    /// tenant's count, read from one snapshot.
    async fn list_organizations(
        &self,
        tenant: &TenantId,
        offset: u64,
        limit: u64,
    ) -> Result<OrganizationPage, StoreError>;

    /// Up to `take` organizations strictly after `after` (from the first without it), in
    /// creation order; `next` is set when more follow.
    async fn organizations_after(
        &self,
        tenant: &TenantId,
        after: Option<&OrganizationCursor>,
        take: u32,
    ) -> Result<OrganizationPage, StoreError>;

    /// One organization; [`StoreError::UnknownOrganization`] when there is none with the id.
    async fn organization(
        &self,
        tenant: &TenantId,
        id: &OrganizationId,
    ) -> Result<Organization, StoreError>;

    /// The organization with this name; [`StoreError::UnknownOrganization`] when there is none.
    async fn organization_by_name(
        &self,
        tenant: &TenantId,
        name: &str,
    ) -> Result<Organization, StoreError>;

    /// Applies `patch` to the stored organization and returns the result, in one transaction
    /// (concurrent updates of one organization apply one after the other).
    /// [`StoreError::UnknownOrganization`], or [`StoreError::NameTaken`] for a new name another
    /// organization of the tenant has.
    async fn update_organization(
        &self,
        tenant: &TenantId,
        id: &OrganizationId,
        patch: &OrganizationPatch,
    ) -> Result<Organization, StoreError>;

    /// Deletes the organization and its connections (not the tenant's connections they name).
    /// [`StoreError::UnknownOrganization`] when there is none.
    async fn delete_organization(
        &self,
        tenant: &TenantId,
        id: &OrganizationId,
    ) -> Result<(), StoreError>;

    /// The organization's connections at `offset` (at most `limit`), in the order they were
    /// added, keeping only those whose `is_enabled` equals `enabled` when it is given, with the
    /// count of those; [`StoreError::UnknownOrganization`] when there is no such organization.
    async fn organization_connections(
        &self,
        tenant: &TenantId,
        organization: &OrganizationId,
        enabled: Option<bool>,
        offset: u64,
        limit: u64,
    ) -> Result<OrganizationConnectionPage, StoreError>;

    /// One connection of the organization; with `enabled_only`, a disabled one is as absent.
    /// [`StoreError::UnknownOrganization`], or [`StoreError::ConnectionNotInOrganization`].
    async fn organization_connection(
        &self,
        tenant: &TenantId,
        organization: &OrganizationId,
        connection_id: &str,
        enabled_only: bool,
    ) -> Result<OrganizationConnectionEntry, StoreError>;

    /// Adds a connection to the organization (after its others).
    /// [`StoreError::UnknownOrganization`], [`StoreError::UnknownConnection`] when the tenant
    /// has no such connection, [`StoreError::ConnectionAlreadyInOrganization`] when the
    /// organization has it already (enabled or not).
    async fn add_organization_connection(
        &self,
        tenant: &TenantId,
        organization: &OrganizationId,
        connection: &OrganizationConnection,
    ) -> Result<OrganizationConnectionEntry, StoreError>;

    /// Applies `patch` to one connection of the organization and returns it, in one
    /// transaction; with `enabled_only`, a disabled connection is as absent. Errors as
    /// [`OrganizationStore::organization_connection`].
    async fn update_organization_connection(
        &self,
        tenant: &TenantId,
        organization: &OrganizationId,
        connection_id: &str,
        patch: &OrganizationConnectionPatch,
        enabled_only: bool,
    ) -> Result<OrganizationConnectionEntry, StoreError>;

    /// Removes one connection from the organization; with `enabled_only`, a disabled
    /// connection is as absent. Errors as [`OrganizationStore::organization_connection`].
    async fn remove_organization_connection(
        &self,
        tenant: &TenantId,
        organization: &OrganizationId,
        connection_id: &str,
        enabled_only: bool,
    ) -> Result<(), StoreError>;
}

/// Reads a stored organization record back; [`StoreError::Corrupt`] when it no longer
/// validates or holds another id than its row.
pub(crate) fn parse_organization(
    tenant: &TenantId,
    id: &str,
    record: &str,
) -> Result<Organization, StoreError> {
    let corrupt = |reason: String| StoreError::Corrupt {
        tenant: tenant.to_string(),
        id: id.to_owned(),
        reason,
    };
    let value: serde_json::Value =
        serde_json::from_str(record).map_err(|err| corrupt(err.to_string()))?;
    let organization =
        Organization::from_stored_json(&value).map_err(|err| corrupt(err.to_string()))?;
    if organization.id.as_str() != id {
        return Err(corrupt(format!("the record holds id {}", organization.id)));
    }
    Ok(organization)
}

/// A stored `organization_access_level`; [`StoreError::Corrupt`] for a value this build does
/// not know.
pub(crate) fn stored_access_level(
    tenant: &TenantId,
    connection_id: &str,
    level: Option<&str>,
) -> Result<Option<AccessLevel>, StoreError> {
    match level {
        None => Ok(None),
        Some(text) => AccessLevel::parse(text)
            .map(Some)
            .ok_or_else(|| StoreError::Corrupt {
                tenant: tenant.to_string(),
                id: connection_id.to_owned(),
                reason: format!("unknown organization_access_level {text:?}"),
            }),
    }
}

/// What the release before per-connection settings wrote (organizations whose record holds the
/// create's `enabled_connections`, connection rows without flags), for the migration tests of
/// both backends.
#[cfg(test)]
pub(crate) mod earlier_release {
    use netacl_model::{
        ConnectionView, Organization, OrganizationConnection, OrganizationId, OrganizationSpec,
    };
    use serde_json::json;

    use crate::{Store, TenantId};

    pub(crate) const CON_A: &str = "con_AAAAAAAAAAAAAAAA";
    pub(crate) const CON_B: &str = "con_BBBBBBBBBBBBBBBB";
    /// Both organizations' `created_at`: one millisecond, so the order falls to the ids.
    pub(crate) const CREATED_AT: i64 = 1_700_000_000_000;

    /// `(id, name, strategy, record)` of the two connections.
    pub(crate) fn connections() -> Vec<(&'static str, &'static str, &'static str, String)> {
        [(CON_A, "db-main", "auth0"), (CON_B, "saml-main", "samlp")]
            .into_iter()
            .map(|(id, name, strategy)| {
                let record = json!({"id": id, "name": name, "strategy": strategy}).to_string();
                (id, name, strategy, record)
            })
            .collect()
    }

    /// `acme` (both connections; flags off their defaults on the first) and `beta` (none), the
    /// second with the smaller id.
    pub(crate) fn organizations() -> Vec<Organization> {
        let acme = OrganizationSpec::from_json(&json!({
            "name": "acme", "display_name": "Acme", "metadata": {"tier": "gold"},
            "enabled_connections": [
                {"connection_id": CON_A, "assign_membership_on_login": true,
                 "show_as_button": false, "is_signup_enabled": true},
                {"connection_id": CON_B}
            ]
        }))
        .expect("spec");
        let beta = OrganizationSpec::from_json(&json!({"name": "beta"})).expect("spec");
        vec![
            Organization {
                id: OrganizationId::parse("org_ZZZZZZZZZZZZZZZZ").expect("id"),
                spec: acme,
            },
            Organization {
                id: OrganizationId::parse("org_AAAAAAAAAAAAAAAA").expect("id"),
                spec: beta,
            },
        ]
    }

    /// The record that release stored: the create's answer without `connection`.
    pub(crate) fn record(organization: &Organization) -> String {
        organization.to_json(&[]).to_string()
    }

    /// After the migration: both organizations read back, listed by id within their shared
    /// millisecond, with acme's connections and their flags as the record had them.
    pub(crate) async fn check_migrated(store: &dyn Store, tenant: &TenantId) {
        let [acme, beta] = <[Organization; 2]>::try_from(organizations()).expect("two");
        let page = store.list_organizations(tenant, 0, 10).await.expect("list");
        let names: Vec<&str> = page
            .organizations
            .iter()
            .map(|o| o.spec.name.as_str())
            .collect();
        assert_eq!(names, ["beta", "acme"]);
        let read = store.organization(tenant, &acme.id).await.expect("acme");
        assert_eq!(read.spec.display_name.as_deref(), Some("Acme"));
        assert_eq!(read.spec.enabled_connections, None);
        assert_eq!(
            store
                .organization(tenant, &beta.id)
                .await
                .expect("beta")
                .spec
                .name,
            "beta"
        );
        let listed = store
            .organization_connections(tenant, &acme.id, None, 0, 10)
            .await
            .expect("connections");
        let want = |body| OrganizationConnection::from_json(&body, ConnectionView::All).expect("c");
        let settings: Vec<_> = listed.entries.iter().map(|e| e.settings.clone()).collect();
        assert_eq!(
            settings,
            [
                want(
                    json!({"connection_id": CON_A, "assign_membership_on_login": true,
                            "show_as_button": false, "is_signup_enabled": true})
                ),
                want(json!({"connection_id": CON_B})),
            ]
        );
        assert_eq!(listed.entries[1].connection.name, "saml-main");
        // A create after the migration lists last (its time is later), and the writes work.
        store
            .add_organization_connection(tenant, &beta.id, &want(json!({"connection_id": CON_A})))
            .await
            .expect("add");
    }
}
