//! One operation of the route table as the document describes it, and the request bodies'
//! schemas by name.
use http::Method;

/// The JSON schema of a request body, by name (see [`crate::openapi`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BodySchema {
    NetworkAclCreate,
    NetworkAclUpdate,
    DryRun,
    Analyze,
    Preview,
    OrganizationCreate,
    OrganizationUpdate,
    EnabledConnectionAdd,
    EnabledConnectionUpdate,
    OrganizationConnectionAdd,
    OrganizationConnectionUpdate,
    BrandingUpdate,
    DirectoryImport,
    ManagedListPut,
    NetworkAclKeyCreate,
    EdgeSummaries,
    EdgeSample,
    Rollback,
}

/// One operation.
pub(crate) struct Operation {
    pub(crate) method: Method,
    /// The path in axum / OpenAPI syntax (`/api/v2/network-acls/{id}`).
    pub(crate) path: &'static str,
    pub(crate) operation_id: &'static str,
    pub(crate) summary: &'static str,
    /// The scope required; `None` for an open route (no token, no rate limit).
    pub(crate) scope: Option<&'static str>,
    /// Declared query parameters: name, JSON schema type, description.
    pub(crate) query: &'static [(&'static str, &'static str, &'static str)],
    pub(crate) body: Option<BodySchema>,
    /// Whether the body may also be a form.
    pub(crate) form: bool,
    /// Success status and description.
    pub(crate) success: (u16, &'static str),
    /// Error statuses the operation can answer besides 401/403/429.
    pub(crate) errors: &'static [u16],
}

/// The component schema of a request body.
pub(crate) fn schema_name(body: BodySchema) -> &'static str {
    match body {
        BodySchema::NetworkAclCreate => "NetworkAclCreate",
        BodySchema::NetworkAclUpdate => "NetworkAclUpdate",
        BodySchema::DryRun => "DryRun",
        BodySchema::Analyze => "Analyze",
        BodySchema::Preview => "Preview",
        BodySchema::OrganizationCreate => "OrganizationCreate",
        BodySchema::OrganizationUpdate => "OrganizationUpdate",
        BodySchema::EnabledConnectionAdd => "EnabledConnectionAdd",
        BodySchema::EnabledConnectionUpdate => "EnabledConnectionUpdate",
        BodySchema::OrganizationConnectionAdd => "OrganizationConnectionAdd",
        BodySchema::OrganizationConnectionUpdate => "OrganizationConnectionUpdate",
        BodySchema::BrandingUpdate => "BrandingUpdate",
        BodySchema::DirectoryImport => "DirectoryImport",
        BodySchema::ManagedListPut => "ManagedListPut",
        BodySchema::NetworkAclKeyCreate => "NetworkAclKeyCreate",
        BodySchema::EdgeSummaries => "EdgeSummaries",
        BodySchema::EdgeSample => "EdgeSample",
        BodySchema::Rollback => "Rollback",
    }
}
