//! The operator API's part of the OpenAPI document: its operations (security: the operator
//! token) and schemas.
use serde_json::{json, Value};

use super::MAX_TAKE;
use crate::provisioning;

/// The operator operations in the OpenAPI document (security: the operator token).
pub(crate) fn extend_document(document: &mut Value) {
    let error = |description: &str| {
        json!({"description": description, "content": {"application/json": {
            "schema": {"$ref": "#/components/schemas/Error"}}}})
    };
    let unauthorized = json!({
        "description": "The operator token is missing or wrong.",
        "headers": {"WWW-Authenticate": {"required": true, "schema": {"type": "string", "pattern": "^Bearer"}}},
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}
    });
    let tenant_ref = json!({"$ref": "#/components/schemas/netacl_tenant"});
    let id_parameter = json!({"name": "id", "in": "path", "required": true,
        "schema": {"type": "string"}});
    let security = json!([{"operatorToken": []}]);
    let paths = json!({
        "/_netacl/v1/tenants": {
            "get": {
                "operationId": "netacl_list_tenants",
                "summary": "List the tenants (operator API, served whatever the host)",
                "security": security,
                "parameters": [
                    {"name": "from", "in": "query", "required": false,
                     "schema": {"type": "string", "pattern": "^[A-Za-z0-9_-]{1,64}$"}},
                    {"name": "take", "in": "query", "required": false,
                     "schema": {"type": "integer", "minimum": 1, "maximum": MAX_TAKE}}
                ],
                "responses": {
                    "200": {"description": "One page of tenants, by id", "content": {"application/json": {"schema": {
                        "type": "object", "required": ["tenants"], "additionalProperties": false,
                        "properties": {"tenants": {"type": "array", "items": tenant_ref},
                                       "next": {"type": "string"}}}}}},
                    "400": error("Bad query parameter"),
                    "401": unauthorized,
                    "503": error("The database is unavailable")
                }
            },
            "post": {
                "operationId": "netacl_create_tenant",
                "summary": "Create a tenant: signing key and bootstrap client (its secret shown once)",
                "security": security,
                "requestBody": {"required": true, "content": {"application/json": {"schema": {
                    "type": "object", "required": ["tenant", "domains"], "additionalProperties": false,
                    "properties": {
                        "tenant": {"type": "string", "pattern": "^[A-Za-z0-9_-]{1,64}$"},
                        "domains": {"type": "array", "minItems": 1, "maxItems": provisioning::MAX_TENANT_DOMAINS,
                                    "items": {"type": "string", "minLength": 1, "maxLength": 253}}
                    }}}}},
                "responses": {
                    "201": {"description": "The tenant, with the bootstrap client's secret", "content": {"application/json": {"schema": {
                        "allOf": [tenant_ref, {"type": "object", "required": ["client_id", "client_secret"],
                            "properties": {"client_id": {"type": "string"}, "client_secret": {"type": "string"}}}]}}}},
                    "400": error("Invalid id or domains (with the property path)"),
                    "401": unauthorized,
                    "409": error("The id or a domain is taken"),
                    "413": error("Body too large"),
                    "415": error("Not JSON"),
                    "503": error("The database is unavailable")
                }
            }
        },
        "/_netacl/v1/tenants/watch": {
            "get": {
                "operationId": "netacl_watch_tenants",
                "summary": "Long poll for every tenant's changes (remote multi-tenant edges): tenants added, removed, and each changed tenant's rules, lists and sealed keys",
                "security": security,
                "parameters": [
                    {"name": "since", "in": "query", "required": false,
                     "description": "The cursor of the previous answer; absent, another process's or too old: the full snapshot",
                     "schema": {"type": "string", "pattern": "^[0-9a-f]{16}\\.[0-9]{1,20}(\\.[0-9]{1,20}\\.[A-Za-z0-9_-]{1,64})?$"}},
                    {"name": "timeout_ms", "in": "query", "required": false,
                     "schema": {"type": "integer", "minimum": 0, "maximum": crate::config::MAX_WATCH_TIMEOUT_MS}},
                    {"name": "lists", "in": "query", "required": false,
                     "description": "true: each tenant's managed lists in force (items only where the edge may not hold them)",
                     "schema": {"type": "boolean"}},
                    {"name": "keys", "in": "query", "required": false,
                     "description": "The edge's X25519 public key (base64url): the network ACL keys live rules name, sealed to it (over TLS or loopback only)",
                     "schema": {"type": "string", "pattern": "^[A-Za-z0-9_-]{42}[AEIMQUYcgkosw048]$"}}
                ],
                "responses": {
                    "200": {"description": "What changed since the cursor", "content": {"application/json": {"schema": {
                        "type": "object", "required": ["tenants", "removed", "cursor", "full", "more"],
                        "properties": {
                            "tenants": {"type": "array", "items": {"type": "object",
                                "required": ["tenant", "domains", "version", "network_acls"],
                                "properties": {
                                    "tenant": {"type": "string"},
                                    "domains": {"type": "array", "items": {"type": "string"}},
                                    "version": {"type": "integer", "minimum": 0},
                                    "network_acls": {"type": "array", "items": {"$ref": "#/components/schemas/NetworkAcl"}},
                                    "managed_lists": {"type": "array", "items": {"type": "object"}},
                                    "network_acl_keys": {"type": "array", "items": {"type": "object",
                                        "required": ["id", "sealed"],
                                        "properties": {"id": {"type": "string"}, "sealed": {"type": "string"}}}}
                                }}},
                            "removed": {"type": "array", "items": {"type": "string"}},
                            "cursor": {"type": "string"},
                            "full": {"type": "boolean"},
                            "more": {"type": "boolean"},
                            "network_acl_keys_withheld": {"type": "string", "enum": ["transport"]}
                        }}}}},
                    "304": {"description": "Nothing changed within timeout_ms"},
                    "400": error("Bad query parameter (a malformed cursor, key or timeout)"),
                    "401": unauthorized,
                    "503": error("The service is stopping")
                }
            }
        },
        "/_netacl/v1/tenants/edge/summaries": {
            "post": {
                "operationId": "netacl_tenant_edge_summaries",
                "summary": "Record a multi-tenant edge's per-rule counts of one interval in each tenant's log (acls_summary events)",
                "description": "The report of a remote edge enforcing every tenant (netacl edge --platform-url), keyed by tenant id. Every member is checked before anything is recorded. A tenant this server does not serve, and a summary naming a rule-set version its tenant has not reached, are skipped (counted in skipped, named in unknown_tenants), never created.",
                "security": security,
                "requestBody": {"required": true, "content": {"application/json": {"schema": {
                    "$ref": "#/components/schemas/netacl_tenant_edge_summaries"}}}},
                "responses": {
                    "200": {"description": "What was recorded", "content": {"application/json": {"schema": {
                        "type": "object", "additionalProperties": false,
                        "required": ["recorded", "skipped", "unknown_tenants"],
                        "properties": {
                            "recorded": {"type": "integer", "minimum": 0, "maximum": crate::operator::edge::MAX_PLATFORM_SUMMARIES},
                            "skipped": {"type": "integer", "minimum": 0, "maximum": crate::operator::edge::MAX_PLATFORM_SUMMARIES},
                            "unknown_tenants": {"type": "array", "items": {"type": "string"}}
                        }}}}},
                    "400": error("A member is invalid (with its property path); nothing recorded"),
                    "401": unauthorized,
                    "413": error("Body too large"),
                    "415": error("Not JSON"),
                    "500": error("The log could not be written"),
                    "503": error("The database is unavailable; nothing recorded")
                },
                "x-netacl-refusals-beyond-schema": [
                    {"message": "^Payload validation error: 'Too many items in all tenants together, maximum [0-9]+' on property tenants\\.$",
                     "why": "The bound is on the summaries of all tenants together."},
                    crate::http::integral_numbers::large_fraction_refusal()
                ]
            }
        },
        "/_netacl/v1/tenants/edge/sample": {
            "post": {
                "operationId": "netacl_tenant_edge_sample",
                "summary": "Keep a multi-tenant edge's traffic sample, per tenant, for the impact preview",
                "description": "Each tenant's requests replace that edge's last sample of the tenant (in memory). Every member is checked before anything is kept. A tenant this server does not serve is skipped (counted in skipped, named in unknown_tenants), never created.",
                "security": security,
                "requestBody": {"required": true, "content": {"application/json": {"schema": {
                    "$ref": "#/components/schemas/netacl_tenant_edge_sample"}}}},
                "responses": {
                    "200": {"description": "What was kept", "content": {"application/json": {"schema": {
                        "type": "object", "additionalProperties": false,
                        "required": ["kept", "skipped", "unknown_tenants"],
                        "properties": {
                            "kept": {"type": "integer", "minimum": 0, "maximum": crate::resources::logs::sample::MAX_SAMPLE_REQUESTS},
                            "skipped": {"type": "integer", "minimum": 0, "maximum": crate::resources::logs::sample::MAX_SAMPLE_REQUESTS},
                            "unknown_tenants": {"type": "array", "items": {"type": "string"}}
                        }}}}},
                    "400": error("A member is invalid (with its property path); nothing kept"),
                    "401": unauthorized,
                    "413": error("Body too large"),
                    "415": error("Not JSON")
                },
                "x-netacl-refusals-beyond-schema": [
                    {"message": "^Payload validation error: 'Too many items in all tenants together, maximum [0-9]+' on property tenants\\.$",
                     "why": "The bound is on the requests of all tenants together."},
                    crate::http::integral_numbers::large_fraction_refusal()
                ]
            }
        },
        "/_netacl/v1/tenants/{id}": {
            "get": {
                "operationId": "netacl_get_tenant",
                "summary": "One tenant (no secret)",
                "security": security,
                "parameters": [id_parameter],
                "responses": {
                    "200": {"description": "The tenant", "content": {"application/json": {"schema": tenant_ref}}},
                    "401": unauthorized,
                    "404": error("No such tenant"),
                    "503": error("The database is unavailable")
                }
            },
            "delete": {
                "operationId": "netacl_delete_tenant",
                "summary": "Delete a tenant and everything it owns (the default tenant: 409)",
                "security": security,
                "parameters": [id_parameter],
                "responses": {
                    "204": {"description": "Deleted; its hosts answer 421 from now on"},
                    "401": unauthorized,
                    "404": error("No such tenant"),
                    "409": error("The default tenant cannot be deleted"),
                    "503": error("The database is unavailable")
                }
            }
        },
        "/_netacl/v1/tenants/{id}/edge-clients": {
            "post": {
                "operationId": "netacl_create_edge_client",
                "summary": "Create an edge client of the tenant (its secret shown once): the watch, network ACL key material sealed to the edge, the edge's reports",
                "description": "The only clients that receive network ACL key material are those created here (scopes read:network_acls, read:network_acl_key_material, create:edge_summaries): give its id and secret to netacl edge --rules-url. The default tenant's id is default.",
                "security": security,
                "parameters": [id_parameter],
                "responses": {
                    "201": {"description": "The edge client, with its secret", "content": {"application/json": {"schema": {
                        "type": "object", "additionalProperties": false,
                        "required": ["tenant", "client_id", "client_secret", "scopes"],
                        "properties": {
                            "tenant": {"type": "string"},
                            "client_id": {"type": "string"},
                            "client_secret": {"type": "string"},
                            "scopes": {"type": "array", "items": {"type": "string"}}
                        }}}}},
                    "400": error("Bad query parameter"),
                    "401": unauthorized,
                    "404": error("No such tenant"),
                    "503": error("The database is unavailable")
                }
            }
        }
    });
    if let (Some(target), Value::Object(add)) = (
        document.get_mut("paths").and_then(Value::as_object_mut),
        paths,
    ) {
        target.extend(add);
    }
    if let Some(schemes) = document
        .pointer_mut("/components/securitySchemes")
        .and_then(Value::as_object_mut)
    {
        schemes.insert(
            "operatorToken".into(),
            json!({"type": "http", "scheme": "bearer",
                   "description": "The operator token (--operator-token-file), not a tenant token"}),
        );
    }
    if let Some(schemas) = document
        .pointer_mut("/components/schemas")
        .and_then(Value::as_object_mut)
    {
        let report = |items: Value, max: usize| {
            json!({"type": "object", "additionalProperties": false, "required": ["edge", "tenants"],
            "properties": {
                "edge": {"type": "string", "pattern": crate::operator::edge::EDGE_NAME_PATTERN,
                         "description": "The reporting edge's name (netacl edge draws edge- and 16 hexadecimal digits at start)"},
                "tenants": {"type": "object", "maxProperties": crate::operator::edge::MAX_REPORTED_TENANTS,
                            "description": format!("Per tenant id, its items (at most {max} in all tenants together)"),
                            "propertyNames": {"pattern": crate::operator::edge::TENANT_ID_PATTERN},
                            "additionalProperties": {"type": "array", "maxItems": max, "items": items}}
            }})
        };
        schemas.insert(
            "netacl_tenant_edge_summaries".into(),
            report(
                crate::resources::logs::openapi::summary_schema(),
                crate::operator::edge::MAX_PLATFORM_SUMMARIES,
            ),
        );
        schemas.insert(
            "netacl_tenant_edge_sample".into(),
            report(
                json!({"$ref": "#/components/schemas/RequestInput"}),
                crate::resources::logs::sample::MAX_SAMPLE_REQUESTS,
            ),
        );
        schemas.insert(
            "netacl_tenant".into(),
            json!({"type": "object", "required": ["tenant", "domains", "issuer", "audience", "created_at"],
                   "properties": {
                       "tenant": {"type": "string"},
                       "domains": {"type": "array", "items": {"type": "string"}},
                       "issuer": {"type": "string"},
                       "audience": {"type": "string"},
                       "created_at": {"type": "string", "format": "date-time"}
                   }}),
        );
    }
}
