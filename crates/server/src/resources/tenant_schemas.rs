//! OpenAPI pieces of the tenant endpoints (organizations, group members, user sessions,
//! branding, directory import): path parameters, success schemas and components. Bodies are
//! closed (`additionalProperties: false`) at every level, as the model validates them.
use serde_json::{json, Value};

use netacl_model::{patterns, GROUP_ID_PATTERN, MAX_ENABLED_CONNECTIONS, MAX_METADATA_PROPERTIES};

/// The path parameters of `path`, when it is one of the tenant endpoints.
pub(crate) fn path_parameters(path: &str) -> Option<Vec<Value>> {
    if let Some(parameters) = crate::resources::organizations::schemas::path_parameters(path) {
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
            "schema": {"type": "string", "minLength": 1}
        })]);
    }
    None
}

/// The success schema of a tenant operation.
pub(crate) fn success_schema(operation_id: &str) -> Option<Value> {
    if let Some(schema) = crate::resources::organizations::schemas::success_schema(operation_id) {
        return Some(schema);
    }
    Some(match operation_id {
        "post_organizations" => json!({"$ref": "#/components/schemas/Organization"}),
        "get_group_members" => json!({"type": "object", "additionalProperties": false,
            "required": ["members"], "properties": {
            "members": {"type": "array", "items": {"$ref": "#/components/schemas/GroupMember"}},
            "next": {"type": "string", "pattern": crate::http::cursor::CURSOR_PATTERN,
                     "description": "Pass as `from` for the next page; absent on the last page."}
        }}),
        "get_user_sessions" => json!({"type": "object", "additionalProperties": false,
            "required": ["sessions"], "properties": {
            "sessions": {"type": "array", "items": {"$ref": "#/components/schemas/Session"}},
            "next": {"type": "string", "pattern": crate::http::cursor::CURSOR_PATTERN,
                     "description": "Pass as `from` for the next page; absent on the last page."},
            "total": {"type": "integer", "minimum": 0, "description": "With include_totals=true."}
        }}),
        "get_branding" | "patch_branding" => json!({"$ref": "#/components/schemas/Branding"}),
        "netacl_directory_import" => json!({"type": "object", "additionalProperties": false,
        "required": ["inserted", "updated", "unchanged"], "properties": {
            "inserted": {"type": "integer", "minimum": 0},
            "updated": {"type": "integer", "minimum": 0},
            "unchanged": {"type": "integer", "minimum": 0}
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
    let pattern = |pattern: &str| json!({"type": "string", "pattern": pattern});
    let sized = |pattern: &str, min: usize, max: usize| json!({"type": "string", "minLength": min, "maxLength": max, "pattern": pattern});
    let between =
        |min: usize, max: usize| json!({"type": "string", "minLength": min, "maxLength": max});
    let color = pattern(patterns::HTML_COLOR);
    let https_or_null = json!({"anyOf": [{"$ref": "#/components/schemas/HttpsUri"},
                                          {"type": "null"}]});
    let timestamp = json!({"$ref": "#/components/schemas/Timestamp"});
    let string = json!({"type": "string"});
    let printable_id = sized(&patterns::printable(), 1, 255);
    let org_branding = json!({"type": "object", "additionalProperties": false, "properties": {
        "logo_url": https_or_null,
        "colors": {"type": "object", "additionalProperties": false,
                   "required": ["primary", "page_background"],
                   "properties": {"primary": color, "page_background": color}}
    }});
    let metadata = json!({"type": "object", "maxProperties": MAX_METADATA_PROPERTIES,
        "additionalProperties": {"type": ["string", "null"], "maxLength": 255}});
    let quota = json!({"type": "object", "additionalProperties": false, "required": ["client_credentials"],
    "properties": {"client_credentials": {"type": "object", "additionalProperties": false, "minProperties": 1,
        "properties": {
            "enforce": {"type": "boolean"},
            "per_day": {"type": "integer", "minimum": 1, "maximum": 2147483647u32},
            "per_hour": {"type": "integer", "minimum": 1, "maximum": 2147483647u32}
        }}}});
    let connection_flags = json!({
        "connection_id": between(1, 50),
        "assign_membership_on_login": {"type": "boolean", "default": false},
        "show_as_button": {"type": "boolean", "default": true},
        "is_signup_enabled": {"type": "boolean", "default": false}
    });
    let mut enabled_props = connection_flags.clone();
    enabled_props["connection"] = json!({"type": "object", "additionalProperties": false,
        "required": ["name", "strategy"], "properties": {"name": string, "strategy": string}});
    let name = json!({"type": "string", "minLength": 1, "maxLength": 50,
        "pattern": patterns::ORGANIZATION_NAME,
        "not": {"pattern": patterns::ORGANIZATION_NAME_NOT},
        "description": "Lowercase letters, digits, - and _, starting and ending with a letter \
                        or digit; not starting with org_."});
    let display_name = between(1, 255);
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
    let device_text = between(0, 1024);
    let session = json!({"type": "object",
        "required": ["id", "user_id", "created_at", "updated_at", "authenticated_at"],
        "properties": {
        "id": printable_id, "user_id": printable_id, "created_at": timestamp,
        "updated_at": timestamp, "authenticated_at": timestamp, "idle_expires_at": timestamp,
        "expires_at": timestamp, "last_interacted_at": timestamp,
        "device": {"type": "object", "properties": {
            "initial_user_agent": device_text, "initial_ip": device_text,
            "initial_asn": device_text, "last_user_agent": device_text, "last_ip": device_text,
            "last_asn": device_text}},
        "clients": {"type": "array", "maxItems": 1000, "items": {"type": "object",
            "required": ["client_id"], "properties": {"client_id": printable_id}}},
        "authentication": {"type": "object", "properties": {"methods": {"type": "array",
            "maxItems": 100, "items": {"type": "object", "required": ["name", "timestamp"],
            "properties": {"name": between(1, 255), "timestamp": timestamp,
                           "type": between(1, 255)}}}}},
        "cookie": {"type": "object", "required": ["mode"],
                   "properties": {"mode": {"enum": ["persistent", "non-persistent"]}}},
        "session_metadata": {"type": "object"}
    }});
    let member_type = json!({"enum": ["user", "group"]});
    let membership_type = json!({"enum": ["connection", "organization", "tenant"]});
    // An imported member, of the membership types `types`; `connection_id` required or not.
    let member = |types: Value, by_connection: bool| {
        let mut required = vec!["group_id", "id", "member_type", "type", "created_at"];
        if by_connection {
            required.push("connection_id");
        }
        json!({"type": "object", "additionalProperties": false, "required": required,
            "properties": {
                "group_id": pattern(GROUP_ID_PATTERN),
                "id": printable_id, "member_type": member_type, "type": types,
                "connection_id": pattern(patterns::CONNECTION_ID), "created_at": timestamp}})
    };
    vec![
        (
            "HttpsUri",
            json!({"type": "string", "maxLength": 2000, "pattern": patterns::https_uri(),
                   "description": "An absolute https URI (any case in the scheme, a host)."}),
        ),
        (
            "OrganizationCreate",
            json!({"type": "object", "additionalProperties": false,
            "required": ["name"], "properties": {
                "name": name, "display_name": display_name, "branding": org_branding,
                "metadata": metadata,
                "enabled_connections": {"type": "array", "maxItems": MAX_ENABLED_CONNECTIONS,
                    "description": "Each connection once, and one the directory holds.",
                    "items": {
                    "type": "object", "additionalProperties": false, "required": ["connection_id"],
                    "properties": connection_flags}},
                "token_quota": quota
            }}),
        ),
        (
            "Organization",
            json!({"type": "object", "additionalProperties": false, "required": ["id", "name"],
            "properties": {
                "id": {"type": "string", "pattern": "^org_[a-zA-Z0-9]{16}$"},
                "name": name, "display_name": display_name, "branding": org_branding,
                "metadata": metadata,
                "enabled_connections": {"type": "array", "items": {"type": "object",
                    "additionalProperties": false,
                    "required": ["connection_id", "assign_membership_on_login", "show_as_button",
                                 "is_signup_enabled"],
                    "properties": enabled_props}},
                "token_quota": quota
            }}),
        ),
        (
            "GroupMember",
            json!({"type": "object", "additionalProperties": false, "properties": {
                "id": string, "member_type": member_type, "type": membership_type,
                "connection_id": pattern(patterns::CONNECTION_ID), "created_at": timestamp
            }}),
        ),
        ("Session", closed(session.clone())),
        (
            "BrandingUpdate",
            json!({"type": "object", "additionalProperties": false,
            "minProperties": 1, "properties": branding_props.clone()}),
        ),
        (
            "Branding",
            json!({"type": "object", "additionalProperties": false, "properties": branding_props}),
        ),
        (
            "DirectoryImport",
            json!({"type": "object", "additionalProperties": false,
            "description": "Upserted by id in one transaction; every reference must name a record of the same file.",
            "properties": {
                "connections": {"type": "array", "items": {"type": "object", "additionalProperties": false,
                    "required": ["id", "name", "strategy"], "properties": {
                        "id": pattern(patterns::CONNECTION_ID),
                        "name": sized(patterns::CONNECTION_NAME, 1, 128),
                        "strategy": sized(patterns::STRATEGY, 1, 64)}}},
                "users": {"type": "array", "items": {"type": "object", "additionalProperties": false,
                    "required": ["user_id"], "properties": {
                        "user_id": printable_id,
                        "email": sized(&patterns::email(), 3, 254),
                        "name": between(1, 255),
                        "created_at": timestamp}}},
                "groups": {"type": "array", "items": {"type": "object", "additionalProperties": false,
                    "required": ["id", "name"], "properties": {
                        "id": pattern(GROUP_ID_PATTERN),
                        "name": between(1, 255),
                        "description": between(0, 1000), "created_at": timestamp}}},
                "members": {"type": "array", "items": {
                    "description": "A member through a connection names it (connection_id).",
                    "oneOf": [
                        member(json!({"enum": ["organization", "tenant"]}), false),
                        member(json!({"const": "connection"}), true)
                    ]}},
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
