//! The API's resources, one module per family: each owns its handlers, its form shape and its
//! schemas (the route table, `crate::routes`, names its handlers; the OpenAPI document,
//! `crate::openapi`, takes its schemas). The resources whose write endpoints take form bodies are
//! registered here, in one list ([`FormResource`]); body handling (`crate::http::body`) reads a
//! form by the shape it is given and knows no resource.
use serde_json::Value;

use crate::http::body::{form_to_json, FormShape};
use crate::http::error::ApiError;

pub(crate) mod acl_keys;
pub(crate) mod analysis;
pub(crate) mod branding;
pub(crate) mod clients;
pub(crate) mod connections;
pub(crate) mod directory;
pub(crate) mod groups;
pub(crate) mod history;
pub(crate) mod logs;
pub(crate) mod managed_lists;
pub(crate) mod network_acls;
pub(crate) mod organizations;
pub(crate) mod rule_counts;
pub(crate) mod rule_sets;
pub(crate) mod sessions;
pub(crate) mod signing_keys;
pub(crate) mod tenant_schemas;

/// The resources whose write endpoints take form bodies, each with its own [`FormShape`]: what
/// [`form_body_to_json`] reads a form as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum FormResource {
    /// `POST`/`PUT`/`PATCH /api/v2/network-acls`.
    NetworkAcl,
    /// `POST`/`PATCH /api/v2/organizations`.
    Organization,
    /// An organization's connection (add, `PATCH`).
    OrganizationConnection,
    /// `PATCH /api/v2/branding`.
    Branding,
    /// `PUT /_netacl/v1/managed-lists/{name}`.
    ManagedList,
    /// `POST /api/v2/keys/network-acls`.
    NetworkAclKey,
}

impl FormResource {
    /// Every resource, for tests and fuzzing.
    pub const ALL: [FormResource; 6] = [
        FormResource::NetworkAcl,
        FormResource::Organization,
        FormResource::OrganizationConnection,
        FormResource::Branding,
        FormResource::ManagedList,
        FormResource::NetworkAclKey,
    ];

    fn shape(self) -> &'static FormShape {
        match self {
            FormResource::NetworkAcl => &crate::resources::network_acls::NETWORK_ACL_FORM,
            FormResource::Organization => &crate::resources::organizations::ORGANIZATION_FORM,
            FormResource::OrganizationConnection => {
                &crate::resources::organizations::connections::CONNECTION_FORM
            }
            FormResource::Branding => &crate::resources::branding::BRANDING_FORM,
            FormResource::ManagedList => &crate::resources::managed_lists::MANAGED_LIST_FORM,
            FormResource::NetworkAclKey => &crate::resources::acl_keys::KEY_FORM,
        }
    }
}

/// Turns an `application/x-www-form-urlencoded` body into the JSON value the admin API then
/// validates, exactly as the write endpoints of `resource` do (the book's "Bodies and forms",
/// `docs/src/api/bodies.md`): bracketed keys, coercion by position, JSON text in the fields that
/// take it, at most [`MAX_NESTING_DEPTH`](netacl_model::MAX_NESTING_DEPTH) levels in all.
///
/// The public entry point for fuzzing (`fuzz/`, target `form_body`) and tests: the body comes
/// from the network, so this never panics, and a value it returns nests at most
/// [`MAX_NESTING_DEPTH`](netacl_model::MAX_NESTING_DEPTH) levels deep.
///
/// # Errors
///
/// The admin API's 400 (`invalid_body`) for a body that is not a form, a malformed or
/// conflicting key, invalid JSON text in a field, or nesting over the limit.
pub fn form_body_to_json(bytes: &[u8], resource: FormResource) -> Result<Value, ApiError> {
    form_to_json(bytes, resource.shape())
}
