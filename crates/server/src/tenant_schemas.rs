//! OpenAPI pieces of the tenant endpoints (organizations, group members, user sessions,
//! branding, directory import): path parameters, success schemas and components. Bodies are
//! closed (`additionalProperties: false`) at every level, as the model validates them.
use serde_json::{json, Value};

use netacl_model::GROUP_ID_PATTERN;

/// The path parameters of `path`, when it is one of the tenant endpoints.
pub(crate) fn path_parameters(path: &str) -> Option<Vec<Value>> {
    if let Some(parameters) = crate::organization_schemas::path_parameters(path) {
        return Some(parameters);
    }
    if path.starts_with("/api/v2/groups/") {
        return Some(vec![json!({
            "name": "id", "in": "path", "required": true,
            "description": "The group id (percent-encoded).",
            "schema": {"type": "string", "minLength": 18, "maxLength": 26, "pattern": GROUP_ID_PATTERN}
        })]);
    }
    if path.starts_with("/api/v2/users/") {
        return Some(vec![json!({
            "name": "user_id", "in": "path", "required": true,
            "description": "The user id, percent-encoded (auth0%7C123).",
            "schema": {"type": "string"}
        })]);
    }
    None
}

/// The success schema of a tenant operation.
pub(crate) fn success_schema(operation_id: &str) -> Option<Value> {
    if let Some(schema) = crate::organization_schemas::success_schema(operation_id) {
        return Some(schema);
    }
    Some(match operation_id {
        "post_organizations" => json!({"$ref": "#/components/schemas/Organization"}),
        "get_group_members" => json!({"type": "object", "required": ["members"], "properties": {
            "members": {"type": "array", "items": {"$ref": "#/components/schemas/GroupMember"}},
            "next": {"type": "string", "description": "Pass as `from` for the next page; absent on the last page."}
        }}),
        "get_user_sessions" => json!({"type": "object", "required": ["sessions"], "properties": {
            "sessions": {"type": "array", "items": {"$ref": "#/components/schemas/Session"}},
            "next": {"type": "string", "description": "Pass as `from` for the next page; absent on the last page."},
            "total": {"type": "integer", "description": "With include_totals=true."}
        }}),
        "get_branding" | "patch_branding" => json!({"$ref": "#/components/schemas/Branding"}),
        "netacl_directory_import" => json!({"type": "object",
        "required": ["inserted", "updated", "unchanged"], "properties": {
            "inserted": {"type": "integer"}, "updated": {"type": "integer"},
            "unchanged": {"type": "integer"}
        }}),
        _ => return None,
    })
}

/// The scopes of the tenant endpoints, for the security scheme.
pub(crate) const SCOPES: &[(&str, &str)] = &[
    ("create:organizations", "Create organizations"),
    (
        "create:organization_connections",
        "Enable connections for organizations",
    ),
    ("read:group_members", "Read group members"),
    ("read:sessions", "Read user sessions"),
    ("read:branding", "Read branding settings"),
    ("update:branding", "Update branding settings"),
    ("create:users", "Import directory data"),
];

/// The component schemas of the tenant endpoints, by name.
pub(crate) fn components() -> Vec<(&'static str, Value)> {
    let color = json!({"type": "string", "pattern": "^#([0-9a-fA-F]{3}|[0-9a-fA-F]{4}|[0-9a-fA-F]{6}|[0-9a-fA-F]{8})$"});
    let https_or_null = json!({"type": ["string", "null"], "format": "uri", "pattern": "^[hH][tT][tT][pP][sS]://", "maxLength": 2000});
    let timestamp = json!({"type": "string", "format": "date-time"});
    let string = json!({"type": "string"});
    let org_branding = json!({"type": "object", "additionalProperties": false, "properties": {
        "logo_url": https_or_null,
        "colors": {"type": "object", "additionalProperties": false,
                   "required": ["primary", "page_background"],
                   "properties": {"primary": color, "page_background": color}}
    }});
    let metadata = json!({"type": "object", "maxProperties": 25,
        "additionalProperties": {"type": ["string", "null"], "maxLength": 255}});
    let quota = json!({"type": "object", "additionalProperties": false, "required": ["client_credentials"],
    "properties": {"client_credentials": {"type": "object", "additionalProperties": false, "minProperties": 1,
        "properties": {
            "enforce": {"type": "boolean"},
            "per_day": {"type": "integer", "minimum": 1, "maximum": 2147483647u32},
            "per_hour": {"type": "integer", "minimum": 1, "maximum": 2147483647u32}
        }}}});
    let connection_flags = json!({
        "connection_id": {"type": "string", "minLength": 1, "maxLength": 50},
        "assign_membership_on_login": {"type": "boolean", "default": false},
        "show_as_button": {"type": "boolean", "default": true},
        "is_signup_enabled": {"type": "boolean", "default": false}
    });
    let mut enabled_props = connection_flags.clone();
    enabled_props["connection"] =
        json!({"type": "object", "properties": {"name": string, "strategy": string}});
    let name = json!({"type": "string", "minLength": 1, "maxLength": 50,
        "pattern": "^(?!org_)[a-z0-9]([a-z0-9_-]*[a-z0-9])?$"});
    let display_name = json!({"type": "string", "minLength": 1, "maxLength": 255});
    let gradient = json!({"type": "object", "additionalProperties": false,
        "required": ["type", "start", "end", "angle_deg"], "properties": {
            "type": {"const": "linear-gradient"}, "start": color, "end": color,
            "angle_deg": {"type": "number"}}});
    let branding_props = json!({
        "colors": {"type": "object", "additionalProperties": false, "properties": {
            "primary": {"oneOf": [color, {"type": "null"}]},
            "page_background": {"oneOf": [color, gradient, {"type": "null"}]}
        }},
        "favicon_url": https_or_null,
        "logo_url": https_or_null,
        "font": {"type": "object", "additionalProperties": false, "properties": {"url": https_or_null}}
    });
    let session = json!({"type": "object", "properties": {
        "id": string, "user_id": string, "created_at": timestamp, "updated_at": timestamp,
        "authenticated_at": timestamp, "idle_expires_at": timestamp, "expires_at": timestamp,
        "last_interacted_at": timestamp,
        "device": {"type": "object", "properties": {
            "initial_user_agent": string, "initial_ip": string, "initial_asn": string,
            "last_user_agent": string, "last_ip": string, "last_asn": string}},
        "clients": {"type": "array", "items": {"type": "object", "properties": {"client_id": string}}},
        "authentication": {"type": "object", "properties": {"methods": {"type": "array", "items": {
            "type": "object", "properties": {"name": string, "timestamp": timestamp, "type": string}}}}},
        "cookie": {"type": "object", "properties": {"mode": {"enum": ["persistent", "non-persistent"]}}},
        "session_metadata": {"type": "object"}
    }});
    vec![
        (
            "OrganizationCreate",
            json!({"type": "object", "additionalProperties": false,
            "required": ["name"], "properties": {
                "name": name, "display_name": display_name, "branding": org_branding,
                "metadata": metadata,
                "enabled_connections": {"type": "array", "maxItems": 10, "items": {
                    "type": "object", "additionalProperties": false, "required": ["connection_id"],
                    "properties": connection_flags}},
                "token_quota": quota
            }}),
        ),
        (
            "Organization",
            json!({"type": "object", "required": ["id", "name"], "properties": {
                "id": {"type": "string", "pattern": "^org_[a-zA-Z0-9]{16}$", "maxLength": 50},
                "name": name, "display_name": display_name, "branding": org_branding,
                "metadata": metadata,
                "enabled_connections": {"type": "array", "items": {"type": "object", "properties": enabled_props}},
                "token_quota": quota
            }}),
        ),
        (
            "GroupMember",
            json!({"type": "object", "properties": {
                "id": string, "member_type": {"enum": ["user", "group"]},
                "type": {"enum": ["connection", "organization", "tenant"]},
                "connection_id": string, "created_at": timestamp
            }}),
        ),
        ("Session", session.clone()),
        (
            "BrandingUpdate",
            json!({"type": "object", "additionalProperties": false,
            "minProperties": 1, "properties": branding_props.clone()}),
        ),
        (
            "Branding",
            json!({"type": "object", "properties": branding_props}),
        ),
        (
            "DirectoryImport",
            json!({"type": "object", "additionalProperties": false,
            "description": "Upserted by id in one transaction; every reference must name a record of the same file.",
            "properties": {
                "connections": {"type": "array", "items": {"type": "object", "additionalProperties": false,
                    "required": ["id", "name", "strategy"], "properties": {
                        "id": {"type": "string", "pattern": "^con_[a-zA-Z0-9]{16}$"},
                        "name": {"type": "string", "minLength": 1, "maxLength": 128},
                        "strategy": {"type": "string", "minLength": 1, "maxLength": 64}}}},
                "users": {"type": "array", "items": {"type": "object", "additionalProperties": false,
                    "required": ["user_id"], "properties": {
                        "user_id": {"type": "string", "minLength": 1, "maxLength": 255},
                        "email": {"type": "string"}, "name": {"type": "string"},
                        "created_at": timestamp}}},
                "groups": {"type": "array", "items": {"type": "object", "additionalProperties": false,
                    "required": ["id", "name"], "properties": {
                        "id": {"type": "string", "pattern": GROUP_ID_PATTERN},
                        "name": {"type": "string", "minLength": 1, "maxLength": 255},
                        "description": {"type": "string"}, "created_at": timestamp}}},
                "members": {"type": "array", "items": {"type": "object", "additionalProperties": false,
                    "required": ["group_id", "id", "member_type", "type", "created_at"], "properties": {
                        "group_id": {"type": "string", "pattern": GROUP_ID_PATTERN},
                        "id": string, "member_type": {"enum": ["user", "group"]},
                        "type": {"enum": ["connection", "organization", "tenant"]},
                        "connection_id": string, "created_at": timestamp}}},
                "sessions": {"type": "array", "items": closed(session)}
            }}),
        ),
    ]
}

/// Adds the tenant endpoints' scopes and component schemas to the document.
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
    if let Some(schemas) = document
        .pointer_mut("/components/schemas")
        .and_then(Value::as_object_mut)
    {
        for (name, schema) in components() {
            schemas.insert(name.into(), schema);
        }
    }
}

/// `schema` with `additionalProperties: false` on every object schema that lists properties.
fn closed(mut schema: Value) -> Value {
    fn walk(value: &mut Value) {
        match value {
            Value::Object(map) => {
                if map.contains_key("properties") && !map.contains_key("additionalProperties") {
                    map.insert("additionalProperties".into(), Value::Bool(false));
                }
                map.values_mut().for_each(walk);
            }
            Value::Array(items) => items.iter_mut().for_each(walk),
            _ => {}
        }
    }
    walk(&mut schema);
    schema
}
