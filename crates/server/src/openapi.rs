//! The OpenAPI 3.1 document, built from the route table ([`crate::routes`]).
use axum::extract::State;
use axum::response::Response;
use http::StatusCode;
use serde_json::{json, Map, Value};

use crate::error::json_response;
use crate::routes::{operations, BodySchema};
use crate::AppState;

/// `GET /_netacl/v1/openapi.json`.
pub(crate) async fn serve(State(state): State<AppState>) -> Response {
    json_response(StatusCode::OK, &document(&state.inner.config.tenant_domain))
}

/// The whole document for a tenant domain.
pub(crate) fn document(domain: &str) -> Value {
    let mut paths: Map<String, Value> = Map::new();
    for op in operations() {
        let mut operation = Map::new();
        operation.insert("operationId".into(), op.operation_id.into());
        operation.insert("summary".into(), op.summary.into());
        let tag = if op.path.starts_with("/api/v2/") {
            op.path.split('/').nth(3).unwrap_or("network-acls")
        } else {
            "netacl"
        };
        operation.insert("tags".into(), json!([tag]));
        let mut parameters: Vec<Value> = Vec::new();
        if let Some(params) = crate::tenant_schemas::path_parameters(op.path) {
            parameters.extend(params);
        } else if let Some(params) = crate::managed_lists::openapi::path_parameters(op.path) {
            parameters.extend(params);
        } else if let Some(params) = crate::acl_keys::openapi::path_parameters(op.path) {
            parameters.extend(params);
        } else if op.path.contains("{id}") {
            parameters.push(json!({
                "name": "id", "in": "path", "required": true,
                "description": "The network ACL id (percent-encoded).",
                "schema": {"type": "string", "pattern": "^acl_[1-9A-HJ-NP-Za-km-z]{22}$"}
            }));
        }
        for (name, kind, description) in op.query {
            parameters.push(json!({
                "name": name, "in": "query", "required": false,
                "description": description, "schema": {"type": kind}
            }));
        }
        if !parameters.is_empty() {
            operation.insert("parameters".into(), parameters.into());
        }
        if let Some(body) = op.body {
            let schema = json!({"$ref": format!("#/components/schemas/{}", schema_name(body))});
            let mut content = Map::new();
            content.insert("application/json".into(), json!({"schema": schema}));
            if op.form {
                content.insert(
                    "application/x-www-form-urlencoded".into(),
                    json!({"schema": schema}),
                );
            }
            operation.insert(
                "requestBody".into(),
                json!({"required": true, "content": content}),
            );
        }
        let mut responses = Map::new();
        let (status, description) = op.success;
        let success = match status {
            204 => json!({"description": description}),
            _ => json!({"description": description, "content": {"application/json": {
                "schema": success_schema(op.operation_id)}}}),
        };
        responses.insert(status.to_string(), success);
        let mut errors: Vec<u16> = op.errors.to_vec();
        if op.scope.is_some() {
            errors.extend([401, 403, 429]);
        }
        for code in errors {
            let reason = StatusCode::from_u16(code)
                .ok()
                .and_then(|s| s.canonical_reason())
                .unwrap_or("Error");
            let response = if code == 304 {
                json!({"description": reason})
            } else {
                json!({"description": reason, "content": {"application/json": {
                    "schema": {"$ref": "#/components/schemas/Error"}}}})
            };
            responses.insert(code.to_string(), response);
        }
        operation.insert("responses".into(), Value::Object(responses));
        match op.scope {
            Some(scope) => operation.insert(
                "security".into(),
                json!([{"bearerAuth": [scope]}, {"oAuth2ClientCredentials": [scope]}]),
            ),
            None => operation.insert("security".into(), json!([])),
        };
        let item = paths
            .entry(op.path.to_owned())
            .or_insert_with(|| Value::Object(Map::new()));
        if let Value::Object(item) = item {
            item.insert(
                op.method.as_str().to_ascii_lowercase(),
                Value::Object(operation),
            );
        }
    }
    let mut document = json!({
        "openapi": "3.1.0",
        "info": {
            "title": "netacl admin API",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "The network ACL part of the tenant management API v2, plus netacl's \
                own operations under /_netacl/v1 (a prefix the public API never uses)."
        },
        "servers": [{"url": format!("https://{domain}")}],
        "paths": paths,
        "components": {
            "securitySchemes": {
                "bearerAuth": {"type": "http", "scheme": "bearer", "bearerFormat": "JWT"},
                "oAuth2ClientCredentials": {"type": "oauth2", "flows": {"clientCredentials": {
                    "tokenUrl": "/oauth/token",
                    "scopes": {
                        "read:network_acls": "Read network ACLs",
                        "create:network_acls": "Create network ACLs",
                        "update:network_acls": "Update network ACLs",
                        "delete:network_acls": "Delete network ACLs",
                        "create:network_acl_keys": "Create network ACL keys",
                        "read:network_acl_keys": "Read network ACL keys",
                        "delete:network_acl_keys": "Delete network ACL keys"
                    }
                }}}
            },
            "schemas": schemas()
        }
    });
    crate::tenant_schemas::extend_document(&mut document);
    crate::organization_schemas::extend_document(&mut document);
    if let Some(schemas) = document
        .pointer_mut("/components/schemas")
        .and_then(Value::as_object_mut)
    {
        for (name, schema) in crate::managed_lists::openapi::components() {
            schemas.insert(name.into(), schema);
        }
        for (name, schema) in crate::acl_keys::openapi::components() {
            schemas.insert(name.into(), schema);
        }
    }
    document
}

fn schema_name(body: BodySchema) -> &'static str {
    match body {
        BodySchema::NetworkAclCreate => "NetworkAclCreate",
        BodySchema::NetworkAclUpdate => "NetworkAclUpdate",
        BodySchema::DryRun => "DryRun",
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
    }
}

fn success_schema(operation_id: &str) -> Value {
    if let Some(schema) = crate::tenant_schemas::success_schema(operation_id) {
        return schema;
    }
    if let Some(schema) = crate::managed_lists::openapi::success_schema(operation_id) {
        return schema;
    }
    if let Some(schema) = crate::acl_keys::openapi::success_schema(operation_id) {
        return schema;
    }
    match operation_id {
        "get_network-acls" => json!({"oneOf": [
            {"type": "array", "items": {"$ref": "#/components/schemas/NetworkAcl"}},
            {"type": "object", "required": ["network_acls", "start", "limit", "total"], "properties": {
                "network_acls": {"type": "array", "items": {"$ref": "#/components/schemas/NetworkAcl"}},
                "start": {"type": "integer"}, "limit": {"type": "integer"}, "total": {"type": "integer"}
            }}
        ]}),
        "netacl_watch" => {
            json!({"type": "object", "required": ["version", "network_acls"], "properties": {
                "version": {"type": "integer"},
                "network_acls": {"type": "array", "items": {"$ref": "#/components/schemas/NetworkAcl"}},
                "managed_lists": {"type": "array", "description": "With the lists query parameter: every managed list in force; items left out when the caller holds that digest.",
                    "items": {"type": "object", "required": ["name", "source", "version", "digest"], "properties": {
                        "name": {"type": "string"}, "source": {"enum": ["api", "file"]},
                        "version": {"type": "integer"}, "digest": {"type": "string"},
                        "items": {"type": "array", "items": {"type": "string"}}}}}
            }})
        }
        "netacl_dry_run" => {
            json!({"type": "object", "required": ["version", "source", "outcome"], "properties": {
                "version": {"type": "integer"},
                "source": {"enum": ["live", "body"]},
                "outcome": {"$ref": "#/components/schemas/Outcome"}
            }})
        }
        "netacl_status" | "netacl_openapi" => json!({"type": "object"}),
        _ => json!({"$ref": "#/components/schemas/NetworkAcl"}),
    }
}

fn schemas() -> Value {
    let string_list = |format: &str| {
        json!({"type": "array", "minItems": 1, "uniqueItems": true,
               "items": {"type": "string", "format": format}})
    };
    let criteria = json!({
        "type": "object", "additionalProperties": false, "minProperties": 1,
        "properties": {
            "asns": {"type": "array", "minItems": 1, "uniqueItems": true, "items": {"type": "integer", "minimum": 0, "maximum": 4294967295u64}},
            "geo_country_codes": string_list("iso-3166-1-alpha-2"),
            "geo_subdivision_codes": string_list("iso-3166-2"),
            "ipv4_cidrs": string_list("ipv4-or-cidr"),
            "ipv6_cidrs": string_list("ipv6-or-cidr"),
            "connecting_ipv4_cidrs": string_list("ipv4-or-cidr"),
            "connecting_ipv6_cidrs": string_list("ipv6-or-cidr"),
            "ja3_fingerprints": string_list("ja3"),
            "ja4_fingerprints": string_list("ja4"),
            "user_agents": string_list("user-agent-pattern"),
            "hostnames": string_list("hostname"),
            "auth0_managed": {"type": "array", "minItems": 1, "uniqueItems": true,
                "description": "Managed lists (content supplied by the operator); in match or in not_match, not both.",
                "items": {"enum": netacl_model::ManagedListName::ALL.map(|n| n.as_str())}},
            "http_message_signature": {"type": "object", "additionalProperties": false,
                "required": ["keys"],
                "description": "Holds when the request carries a valid RFC 9421 signature (HMAC-SHA256; created, expires and keyid required) made with one of these network ACL keys. Each id must name a key of the tenant.",
                "properties": {"keys": {"type": "array", "minItems": 1, "uniqueItems": true,
                    "items": {"type": "object", "additionalProperties": false, "required": ["id"],
                        "properties": {"id": {"type": "string", "minLength": 1, "maxLength": 64,
                            "pattern": "^[A-Za-z0-9_.-]+$"}}}}}}
        }
    });
    let action = json!({
        "type": "object", "additionalProperties": false, "minProperties": 1,
        "description": "Exactly one of block, allow, log, redirect, set to true; redirect also takes redirect_uri.",
        "properties": {
            "block": {"const": true}, "allow": {"const": true}, "log": {"const": true},
            "redirect": {"const": true},
            "redirect_uri": {"type": "string", "format": "uri", "minLength": 1, "maxLength": 2000}
        }
    });
    let rule = json!({
        "type": "object", "additionalProperties": false, "required": ["action", "scope"],
        "description": "At least one of match and not_match, or match_all alone.",
        "properties": {
            "action": {"$ref": "#/components/schemas/NetworkAclAction"},
            "match_all": {"const": true, "description": "Matches every request of the scope; excludes match and not_match."},
            "match": {"$ref": "#/components/schemas/NetworkAclCriteria"},
            "not_match": {"$ref": "#/components/schemas/NetworkAclCriteria"},
            "scope": {"enum": ["tenant", "management", "authentication", "dynamic_client_registration"]}
        }
    });
    let fields = json!({
        "description": {"type": "string", "maxLength": 255},
        "active": {"type": "boolean"},
        "priority": {"type": "number", "minimum": 1, "maximum": 100, "default": 50},
        "rule": {"$ref": "#/components/schemas/NetworkAclRule"}
    });
    let mut record_fields = fields.clone();
    if let Value::Object(map) = &mut record_fields {
        map.insert(
            "id".into(),
            json!({"type": "string", "pattern": "^acl_[1-9A-HJ-NP-Za-km-z]{22}$"}),
        );
        map.insert(
            "created_at".into(),
            json!({"type": "string", "format": "date-time"}),
        );
        map.insert(
            "updated_at".into(),
            json!({"type": "string", "format": "date-time"}),
        );
    }
    let request_input = json!({
        "type": "object", "additionalProperties": false,
        "description": "Request signals; give scope or path (default: an authentication request).",
        "properties": {
            "scope": {"enum": ["management", "authentication", "dynamic_client_registration"]},
            "path": {"type": "string"},
            "client_ip": {"type": "string"}, "connecting_ip": {"type": "string"},
            "asn": {"type": "integer"}, "country": {"type": "string"},
            "subdivision": {"type": "string"}, "ja3": {"type": "string"},
            "ja4": {"type": "string"}, "user_agent": {"type": "string"},
            "hostname": {"type": "string"}
        }
    });
    json!({
        "NetworkAclCreate": {"type": "object", "additionalProperties": false,
            "required": ["description", "active", "rule"], "properties": fields},
        "NetworkAclUpdate": {"type": "object", "additionalProperties": false,
            "minProperties": 1, "properties": fields},
        "NetworkAcl": {"type": "object",
            "required": ["id", "description", "active", "priority", "rule", "created_at", "updated_at"],
            "properties": record_fields},
        "NetworkAclRule": rule,
        "NetworkAclAction": action,
        "NetworkAclCriteria": criteria,
        "RequestInput": request_input,
        "DryRun": {"type": "object", "additionalProperties": false, "required": ["request"],
            "properties": {
                "request": {"$ref": "#/components/schemas/RequestInput"},
                "network_acls": {"type": "array", "items": {"oneOf": [
                    {"$ref": "#/components/schemas/NetworkAcl"},
                    {"$ref": "#/components/schemas/NetworkAclCreate"}
                ]}},
                "managed_lists": {"type": "object", "additionalProperties": false,
                    "description": "Managed list content for this dry run only, by name (replaces the content in force for the names given).",
                    "properties": {"auth0.low_reputation": {"type": "array"}, "auth0.tor": {"type": "array"},
                        "auth0.proxy": {"type": "array"}, "auth0.vpn": {"type": "array"},
                        "auth0.icloud_relay_proxy": {"type": "array"}}}
            }},
        "Outcome": {"type": "object", "required": ["action", "rule_id", "monitored"], "properties": {
            "action": {"enum": ["block", "allow", "redirect", "none"]},
            "rule_id": {"type": ["string", "null"]},
            "redirect_uri": {"type": "string"},
            "monitored": {"type": "array", "items": {"type": "string"}}
        }},
        "Error": {"type": "object", "required": ["statusCode", "error", "message"], "properties": {
            "statusCode": {"type": "integer"}, "error": {"type": "string"},
            "message": {"type": "string"}, "errorCode": {"type": "string"}
        }}
    })
}
