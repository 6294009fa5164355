//! OpenAPI pieces of the organization endpoints beyond create (list, get, get by name, update,
//! delete, an organization's connections in their two views, its client grants) and of the
//! tenant's connections, clients and client grants: path parameters, success schemas, scopes and
//! components. Request bodies are closed (`additionalProperties: false`) at every level, as the
//! model validates them; the update body is derived from the create body's component, so the two
//! cannot drift apart.
use serde_json::{json, Map, Value};

use crate::resources::organizations::ORGANIZATION_ID_PATTERN;

/// The path parameters of `path`, when it is one of these endpoints.
pub(crate) fn path_parameters(path: &str) -> Option<Vec<Value>> {
    if let Some(rest) = path.strip_prefix("/api/v2/organizations/name/") {
        debug_assert_eq!(rest, "{name}");
        return Some(vec![json!({
            "name": "name", "in": "path", "required": true,
            "description": "The organization's name.",
            "schema": {"type": "string", "minLength": 1, "maxLength": 50,
                "pattern": netacl_model::patterns::ORGANIZATION_NAME,
                "not": {"pattern": netacl_model::patterns::ORGANIZATION_NAME_NOT}}
        })]);
    }
    if !path.starts_with("/api/v2/organizations/{id}") {
        return None;
    }
    let mut parameters = vec![json!({
        "name": "id", "in": "path", "required": true,
        "description": "The organization id.",
        "schema": {"type": "string", "pattern": ORGANIZATION_ID_PATTERN}
    })];
    if path.ends_with("{connection_id}") {
        parameters.push(json!({
            "name": "connection_id", "in": "path", "required": true,
            "description": "The connection id (percent-encoded).",
            "schema": {"type": "string", "minLength": 1, "maxLength": 50}
        }));
    }
    Some(parameters)
}

fn schema_ref(name: &str) -> Value {
    json!({"$ref": format!("#/components/schemas/{name}")})
}

/// A list answer: a bare array, the offset envelope, or (with `checkpoint`) the checkpoint page.
fn list_schema(key: &str, item: &str, checkpoint: bool) -> Value {
    let items = json!({"type": "array", "items": schema_ref(item)});
    let mut shapes = vec![
        items.clone(),
        json!({"type": "object", "required": [key, "start", "limit", "total"], "properties": {
            key: items.clone(), "start": {"type": "integer"}, "limit": {"type": "integer"},
            "total": {"type": "integer"}
        }}),
    ];
    if checkpoint {
        shapes.push(json!({"type": "object", "required": [key], "properties": {
            key: items,
            "next": {"type": "string", "description": "Pass as `from` for the next page; absent on the last page."}
        }}));
    }
    // anyOf: a checkpoint page is also an object with the list member, so the shapes overlap.
    json!({"anyOf": shapes})
}

/// The success schema of one of these operations.
pub(crate) fn success_schema(operation_id: &str) -> Option<Value> {
    Some(match operation_id {
        "get_organizations" => list_schema("organizations", "Organization", true),
        "get_organizations_by_id" | "patch_organizations_by_id" | "get_name_by_name" => {
            schema_ref("Organization")
        }
        "get_enabled_connections" => list_schema(
            "enabled_connections",
            "OrganizationEnabledConnection",
            false,
        ),
        "post_enabled_connections"
        | "get_enabled_connections_by_connection_id"
        | "patch_enabled_connections_by_connection_id" => {
            schema_ref("OrganizationEnabledConnection")
        }
        "get_organization_connections" => {
            list_schema("connections", "OrganizationConnection", false)
        }
        "post_organization_connections"
        | "get_organization_connections_by_connection_id"
        | "patch_organization_connections_by_connection_id" => schema_ref("OrganizationConnection"),
        "get_organization_client_grants" => list_schema("client_grants", "ClientGrant", false),
        "get_connections" => list_schema("connections", "Connection", true),
        "get_clients" => list_schema("clients", "Client", false),
        "get_client-grants" => list_schema("client_grants", "ClientGrant", true),
        _ => return None,
    })
}

/// The scopes of these endpoints, for the security scheme.
pub(crate) const SCOPES: &[(&str, &str)] = &[
    ("read:organizations", "Read organizations"),
    ("update:organizations", "Update organizations"),
    ("delete:organizations", "Delete organizations"),
    (
        "read:organization_connections",
        "Read the connections of organizations",
    ),
    (
        "update:organization_connections",
        "Update the connections of organizations",
    ),
    (
        "delete:organization_connections",
        "Remove connections from organizations",
    ),
    (
        "read:organization_client_grants",
        "Read the client grants of organizations",
    ),
    ("read:connections", "Read connections"),
    ("read:clients", "Read clients (never their secrets)"),
    ("read:client_grants", "Read client grants"),
];

/// The flags of an organization connection, as the enabled view has them.
fn enabled_flags() -> Map<String, Value> {
    let Value::Object(map) = json!({
        "assign_membership_on_login": {"type": "boolean", "default": false},
        "show_as_button": {"type": "boolean", "default": true},
        "is_signup_enabled": {"type": "boolean", "default": false}
    }) else {
        return Map::new();
    };
    map
}

/// The members the `connections` view adds.
fn all_view_members(nullable: bool) -> Map<String, Value> {
    let or_null = |schema: Value| {
        if nullable {
            json!({"oneOf": [schema, {"type": "null"}]})
        } else {
            schema
        }
    };
    let mut map = Map::new();
    map.insert(
        "is_enabled".into(),
        or_null(json!({"type": "boolean", "default": true})),
    );
    map.insert(
        "organization_connection_name".into(),
        or_null(json!({"type": "string", "minLength": 1, "maxLength": 128})),
    );
    map.insert(
        "organization_access_level".into(),
        or_null(json!({"enum": ["none", "readonly", "limited", "full"]})),
    );
    map
}

fn closed(properties: Map<String, Value>, required: &[&str]) -> Value {
    json!({"type": "object", "additionalProperties": false, "required": required,
           "properties": properties})
}

/// The component schemas, by name; `create` is the organization create body's component.
fn components(create: Option<&Value>) -> Vec<(&'static str, Value)> {
    let connection_id = json!({"type": "string", "minLength": 1, "maxLength": 50});
    let connection = json!({"type": "object", "properties": {
        "name": {"type": "string"}, "strategy": {"type": "string"}}});
    let mut add_enabled = enabled_flags();
    add_enabled.insert("connection_id".into(), connection_id.clone());
    let mut add_all = add_enabled.clone();
    add_all.extend(all_view_members(false));
    let mut update_all = enabled_flags();
    update_all.extend(all_view_members(true));
    let mut enabled_record = add_enabled.clone();
    enabled_record.insert("connection".into(), connection.clone());
    let mut all_record = add_all.clone();
    all_record.insert("connection".into(), connection);

    // The update body: the create body's members but `enabled_connections`, none required, at
    // least one given, `token_quota` also null.
    let mut update = create.cloned().unwrap_or_else(|| json!({"type": "object"}));
    if let Value::Object(map) = &mut update {
        map.remove("required");
        map.insert("minProperties".into(), 1.into());
        map.insert("additionalProperties".into(), false.into());
        if let Some(Value::Object(properties)) = map.get_mut("properties") {
            properties.remove("enabled_connections");
            if let Some(quota) = properties.remove("token_quota") {
                properties.insert(
                    "token_quota".into(),
                    json!({"oneOf": [quota, {"type": "null"}]}),
                );
            }
        }
    }
    vec![
        ("OrganizationUpdate", update),
        (
            "EnabledConnectionAdd",
            closed(add_enabled, &["connection_id"]),
        ),
        ("EnabledConnectionUpdate", closed(enabled_flags(), &[])),
        (
            "OrganizationConnectionAdd",
            closed(add_all, &["connection_id"]),
        ),
        ("OrganizationConnectionUpdate", closed(update_all, &[])),
        (
            "OrganizationEnabledConnection",
            json!({"type": "object", "required": ["connection_id"], "properties": enabled_record}),
        ),
        (
            "OrganizationConnection",
            json!({"type": "object", "required": ["connection_id", "is_enabled"], "properties": all_record}),
        ),
        (
            "Connection",
            // No member is required: `fields` projects any of them away.
            json!({"type": "object", "description": "A connection: id, name and strategy (with \
                `fields`, only those asked for, or all but them).", "properties": {
                "id": {"type": "string"}, "name": {"type": "string"}, "strategy": {"type": "string"}
            }}),
        ),
        (
            "Client",
            json!({"type": "object", "description": "A registered API client; never its secret.",
            "properties": {
                "client_id": {"type": "string"},
                "name": {"type": "string", "description": "The client id (clients have no name of their own here)."},
                "app_type": {"const": "non_interactive"},
                "grant_types": {"type": "array", "items": {"type": "string"}},
                "is_first_party": {"type": "boolean"}
            }}),
        ),
        (
            "ClientGrant",
            json!({"type": "object", "required": ["id", "client_id", "audience", "scope"],
            "properties": {
                "id": {"type": "string", "pattern": "^cgr_[a-zA-Z0-9]{16}$"},
                "client_id": {"type": "string"},
                "audience": {"type": "string"},
                "scope": {"type": "array", "items": {"type": "string"}},
                "allow_any_organization": {"type": "boolean"},
                "is_system": {"type": "boolean"},
                "subject_type": {"const": "client"}
            }}),
        ),
    ]
}

/// Adds these endpoints' scopes and component schemas to the document (after the tenant
/// endpoints' own, whose organization create body it derives the update body from).
pub(crate) fn extend_document(document: &mut Value) {
    if let Some(scopes) = document
        .pointer_mut(
            "/components/securitySchemes/oAuth2ClientCredentials/flows/clientCredentials/scopes",
        )
        .and_then(Value::as_object_mut)
    {
        for (scope, description) in SCOPES {
            scopes.insert((*scope).into(), (*description).into());
        }
    }
    let create = document
        .pointer("/components/schemas/OrganizationCreate")
        .cloned();
    if let Some(schemas) = document
        .pointer_mut("/components/schemas")
        .and_then(Value::as_object_mut)
    {
        for (name, schema) in components(create.as_ref()) {
            schemas.insert(name.into(), schema);
        }
    }
}
