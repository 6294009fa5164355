//! The OpenAPI 3.1 document, built from the route table (`crate::routes`, which passes its
//! [`Operation`]s in).
//!
//! It states what the server really does, so that generic clients and conformance tools
//! (schemathesis runs over it in CI) can rely on it:
//!
//! - every bound and rule the server enforces that JSON Schema can state: query parameter
//!   ranges, id and cursor formats, each string format as a `pattern` accepting exactly what the
//!   validator accepts ([`netacl_model::patterns`]), the one-action rule (`oneOf`), the nesting
//!   of bodies;
//! - every status, header (the rate-limit headers, `Retry-After`, `WWW-Authenticate`) and body
//!   shape it answers;
//! - form bodies as a generic client can build them: a schema without what a form cannot carry
//!   (`null`, empty objects and arrays, fractional numbers, top-level arrays) and `deepObject`
//!   encoding of nested objects (`rule[match][asns][0]=64500`, the bracket convention);
//! - links between operations (a created record's id to its get, replace, update and delete), for
//!   stateful clients;
//! - `x-netacl-refusals-beyond-schema` on an operation whose schema-valid bodies can still be
//!   refused for a rule no schema states (references between records of one body, a connection
//!   that must exist): each item is a regular expression of the 400 `message` and why.

use http::StatusCode;
use netacl_model::{patterns, Limits, ManagedListName};
use serde_json::{json, Map, Value};

use crate::config::{DEFAULT_WATCH_TIMEOUT_MS, MAX_WATCH_TIMEOUT_MS};
use crate::http::cursor::{CURSOR_PATTERN, DEFAULT_TAKE, MAX_TAKE};
use crate::resources::groups::{fields_pattern, MAX_FIELDS_LEN, MEMBER_FIELDS};
use crate::resources::network_acls::{DEFAULT_PER_PAGE, MAX_PER_PAGE};

mod components;
mod forms;
mod operation;

use components::{schemas, success_schema};
use forms::{add_form_schemas, FORM_SUFFIX};
pub(crate) use operation::{schema_name, BodySchema, Operation};

/// The whole document for a tenant domain and the rule-set limits in force, describing
/// `operations` (the route table, `crate::routes`).
pub(crate) fn document(domain: &str, limits: &Limits, operations: &[Operation]) -> Value {
    let mut paths: Map<String, Value> = Map::new();
    for op in operations {
        let item = paths
            .entry(op.path.to_owned())
            .or_insert_with(|| Value::Object(Map::new()));
        if let Value::Object(item) = item {
            item.insert(
                op.method.as_str().to_ascii_lowercase(),
                operation_object(op),
            );
        }
    }
    let mut document = json!({
        "openapi": "3.1.0",
        "info": {
            "title": "netacl admin API",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "The network ACL part of the tenant management API v2, plus netacl's \
                own operations under /_netacl/v1 (a prefix the public API never uses). Bodies \
                nest at most 32 levels of arrays and objects. Form bodies use the bracket \
                convention (`rule[action][block]=true`, `rule[match][asns][0]=64500` or \
                `rule[match][asns][]=64500`); a property may also carry its whole value as JSON \
                text where the form schema says so."
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
                        "delete:network_acl_keys": "Delete network ACL keys",
                        "read:network_acl_key_material": "Receive network ACL key material with the watch, sealed to the edge (netacl)"
                    }
                }}}
            },
            "schemas": schemas(limits)
        }
    });
    crate::resources::tenant_schemas::extend_document(&mut document);
    crate::resources::organizations::schemas::extend_document(&mut document);
    crate::operator::openapi::extend_document(&mut document);
    if let Some(schemas) = document
        .pointer_mut("/components/schemas")
        .and_then(Value::as_object_mut)
    {
        for (name, schema) in crate::resources::managed_lists::openapi::components() {
            schemas.insert(name.into(), schema);
        }
        for (name, schema) in crate::resources::acl_keys::openapi::components() {
            schemas.insert(name.into(), schema);
        }
        for (name, schema) in crate::resources::logs::openapi::components()
            .into_iter()
            .chain(crate::resources::history::openapi::components())
        {
            schemas.insert(name.into(), schema);
        }
    }
    add_form_schemas(&mut document, operations);
    document
}

/// One operation of the route table.
fn operation_object(op: &Operation) -> Value {
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
    if let Some(params) = crate::resources::tenant_schemas::path_parameters(op.path) {
        parameters.extend(params);
    } else if let Some(params) = crate::resources::signing_keys::path_parameters(op.path) {
        parameters.extend(params);
    } else if let Some(params) = crate::resources::acl_keys::openapi::path_parameters(op.path) {
        parameters.extend(params);
    } else if let Some(params) = crate::resources::managed_lists::openapi::path_parameters(op.path)
    {
        parameters.extend(params);
    } else if let Some(params) = crate::resources::logs::openapi::path_parameters(op.path) {
        parameters.extend(params);
    } else if let Some(params) = crate::resources::history::openapi::path_parameters(op.path) {
        parameters.extend(params);
    } else if op.path.contains("{id}") {
        parameters.push(json!({
            "name": "id", "in": "path", "required": true,
            "description": "The network ACL id (percent-encoded).",
            "schema": {"type": "string", "pattern": patterns::ACL_ID}
        }));
    }
    for (name, kind, description) in op.query {
        parameters.push(json!({
            "name": name, "in": "query",
            "required": op.operation_id == "netacl_version_diff" && *name == "against",
            "description": description, "schema": query_schema(op.operation_id, name, kind)
        }));
    }
    if !parameters.is_empty() {
        operation.insert("parameters".into(), parameters.into());
    }
    if let Some(body) = op.body {
        let name = schema_name(body);
        let mut content = Map::new();
        content.insert(
            "application/json".into(),
            json!({"schema": {"$ref": format!("#/components/schemas/{name}")}}),
        );
        if op.form {
            // The form schema and its encoding are filled in by `add_form_schemas`.
            content.insert(
                "application/x-www-form-urlencoded".into(),
                json!({"schema": {"$ref": format!("#/components/schemas/{name}{FORM_SUFFIX}")}}),
            );
        }
        // The analysis takes no body at all for the live rules.
        let required = op.operation_id != "netacl_analyze";
        operation.insert(
            "requestBody".into(),
            json!({"required": required, "content": content}),
        );
    }
    let guarded = op.scope.is_some();
    let mut responses = Map::new();
    let (status, description) = op.success;
    let mut success = json!({"description": description});
    if status != 204 {
        success["content"] =
            json!({"application/json": {"schema": success_schema(op.operation_id)}});
    }
    if guarded {
        success["headers"] = rate_limit_headers(false);
    }
    if let Some(links) = links(op.operation_id) {
        success["links"] = links;
    }
    responses.insert(status.to_string(), success);
    let mut errors: Vec<u16> = op.errors.to_vec();
    if guarded {
        errors.extend([401, 403, 429]);
    }
    for code in errors {
        let reason = StatusCode::from_u16(code)
            .ok()
            .and_then(|s| s.canonical_reason())
            .unwrap_or("Error");
        let mut response = json!({"description": reason});
        if code == 429 && crate::http::work::EXPENSIVE_OPERATIONS.contains(&op.operation_id) {
            response["description"] = json!(
                "Too Many Requests: the caller's rate limit, or too many expensive requests \
                 (analysis, preview, dry run, managed-list upload, directory import) at once, of \
                 the tenant (`--expensive-requests-per-tenant`, default 1) or of the process \
                 (`--expensive-requests`); `errorCode` `too_many_requests`, with `Retry-After`."
            );
        }
        if code != 304 {
            response["content"] = json!({"application/json": {
                "schema": {"$ref": "#/components/schemas/Error"}}});
        }
        if guarded {
            let mut headers = rate_limit_headers(code == 429);
            if code == 401 || code == 403 {
                headers["WWW-Authenticate"] = json!({
                    "description": "The bearer challenge (RFC 6750), with the error.",
                    "required": true, "schema": {"type": "string", "pattern": "^Bearer"}
                });
            }
            response["headers"] = headers;
        }
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
    let mut refusals = refusals_beyond_schema(op.operation_id).unwrap_or_else(|| json!([]));
    if op.body.is_some() {
        if let Value::Array(list) = &mut refusals {
            list.push(crate::http::integral_numbers::large_fraction_refusal());
        }
    }
    let names: Vec<&str> = op.query.iter().map(|(name, _, _)| *name).collect();
    if names.contains(&"page") && names.contains(&"from") {
        if let Value::Array(list) = &mut refusals {
            list.push(json!({
                "message": "^Query validation error: 'page and per_page cannot be combined \
                            with from and take'",
                "why": "Offset paging (page, per_page) and checkpoint paging (from, take) \
                        are not combined in one request."
            }));
            list.push(json!({
                "message": "^Query validation error: 'Invalid checkpoint: ",
                "why": "A checkpoint names a position this tenant's list handed out (a `next`, \
                        bound to the tenant and the list by an HMAC tag); its content is opaque."
            }));
        }
    }
    if refusals.as_array().is_some_and(|list| !list.is_empty()) {
        operation.insert("x-netacl-refusals-beyond-schema".into(), refusals);
    }
    Value::Object(operation)
}

/// The schema of a query parameter: its type, with the bounds the server enforces. A name means
/// the same on every operation (as in the public API), so the bounds go by name.
fn query_schema(operation_id: &str, name: &str, kind: &str) -> Value {
    if let Some(schema) = crate::resources::logs::openapi::query_schema(operation_id, name) {
        return schema;
    }
    match name {
        "page" => json!({"type": "integer", "minimum": 0, "maximum": u32::MAX, "default": 0}),
        "per_page" => json!({"type": "integer", "minimum": 0, "maximum": MAX_PER_PAGE,
                             "default": DEFAULT_PER_PAGE}),
        "take" => json!({"type": "integer", "minimum": 1, "maximum": MAX_TAKE,
                         "default": DEFAULT_TAKE}),
        "since" => json!({"type": "integer", "minimum": 0, "maximum": u64::MAX}),
        "timeout_ms" => json!({"type": "integer", "minimum": 0, "maximum": MAX_WATCH_TIMEOUT_MS,
                               "default": DEFAULT_WATCH_TIMEOUT_MS}),
        "from" if operation_id == "netacl_versions" => {
            json!({"type": "string", "pattern": "^[0-9]{1,20}$",
                   "description": "The `next` value of the previous page (a version number)."})
        }
        "against" => json!({"type": "integer", "minimum": 0, "maximum": i64::MAX}),
        "minutes" => json!({"type": "integer", "minimum": 1,
            "maximum": crate::resources::rule_counts::MAX_MINUTES,
            "default": crate::resources::rule_counts::DEFAULT_MINUTES}),
        "from" if CURSOR_OPERATIONS.contains(&operation_id) => {
            json!({"type": "string", "pattern": CURSOR_PATTERN,
                   "description": "The `next` value of the previous page."})
        }
        "from" => json!({"type": "string", "minLength": 1, "maxLength": 512,
            "pattern": BASE64URL_PATTERN,
            "description": "The `next` value of the previous page (base64url without padding); \
                            a checkpoint this server did not hand out is refused."}),
        "fields" => {
            let known: &[&str] = match operation_id {
                "get_clients" => &crate::resources::clients::CLIENT_FIELDS,
                "get_connections" => &crate::resources::connections::CONNECTION_FIELDS,
                id => crate::resources::logs::openapi::fields(id).unwrap_or(&MEMBER_FIELDS),
            };
            json!({"type": "string", "maxLength": MAX_FIELDS_LEN, "pattern": fields_pattern(known)})
        }
        "lists" => {
            let names: Vec<String> = ManagedListName::ALL
                .iter()
                .map(|name| name.as_str().replace('.', "\\."))
                .collect();
            let pair = format!("(?:{}):[0-9A-Fa-f]{{1,64}}", names.join("|"));
            json!({"type": "string", "pattern": format!("^,*(?:{pair}(?:,+{pair})*)?,*$"),
                   "description": "NAME:DIGEST pairs, comma-separated."})
        }
        // 32 bytes of base64url without padding; a low-order point is declared apart.
        "keys" => json!({"type": "string", "pattern": "^[A-Za-z0-9_-]{42}[AEIMQUYcgkosw048]$"}),
        _ => json!({"type": kind}),
    }
}

/// The operations whose `from` is a member cursor ([`crate::http::cursor`]); the other `from`s are
/// checkpoints ([`crate::http::paging`]).
const CURSOR_OPERATIONS: [&str; 2] = ["get_group_members", "get_user_sessions"];

/// Base64url without padding, as the `base64` crate decodes it (the unused bits of the last
/// character zero).
const BASE64URL_PATTERN: &str =
    "^(?:[A-Za-z0-9_-]{4})*(?:[A-Za-z0-9_-][AQgw]|[A-Za-z0-9_-]{2}[AEIMQUYcgkosw048])?$";

/// The rate-limit headers every answer of an authenticated route carries while limiting is on
/// (`--rate-limit-burst 0` turns both off); `Retry-After` on a 429.
fn rate_limit_headers(too_many: bool) -> Value {
    let seconds = |description: &str| {
        json!({"description": description, "required": too_many,
               "schema": {"type": "integer", "minimum": 0}})
    };
    let mut headers = json!({
        "X-RateLimit-Limit": seconds("Requests the caller may send at once (the burst)."),
        "X-RateLimit-Remaining": seconds("Requests left in the caller's bucket."),
        "X-RateLimit-Reset": seconds("UNIX time, in seconds, when the bucket is full again."),
    });
    if too_many {
        headers["Retry-After"] = seconds("Seconds until a request will be let through.");
    }
    headers
}

/// Links from an operation's success to the operations its answer (or request) names.
fn links(operation_id: &str) -> Option<Value> {
    let by_id = |id: &str, except: &str| {
        let mut links = Map::new();
        for (name, target) in [
            ("GetNetworkAcl", "get_network-acls_by_id"),
            ("ReplaceNetworkAcl", "put_network-acls_by_id"),
            ("UpdateNetworkAcl", "patch_network-acls_by_id"),
            ("DeleteNetworkAcl", "delete_network-acls_by_id"),
        ] {
            if target != except {
                links.insert(
                    name.into(),
                    json!({"operationId": target, "parameters": {"id": id}}),
                );
            }
        }
        Value::Object(links)
    };
    Some(match operation_id {
        "post_network-acls" => by_id("$response.body#/id", ""),
        "get_network-acls_by_id" => by_id("$response.body#/id", "get_network-acls_by_id"),
        "put_network-acls_by_id" => by_id("$response.body#/id", "put_network-acls_by_id"),
        "patch_network-acls_by_id" => by_id("$response.body#/id", "patch_network-acls_by_id"),
        "delete_network-acls_by_id" => json!({"GetDeletedNetworkAcl": {
            "operationId": "get_network-acls_by_id", "parameters": {"id": "$request.path.id"}}}),
        "netacl_watch" => json!({"WatchForTheNextVersion": {
            "operationId": "netacl_watch",
            "parameters": {"since": "$response.body#/version", "timeout_ms": 0}}}),
        "patch_branding" => json!({"GetBranding": {"operationId": "get_branding"}}),
        "netacl_directory_import" => json!({
            "GetImportedGroupMembers": {"operationId": "get_group_members",
                "parameters": {"id": "$request.body#/groups/0/id"}},
            "GetImportedUserSessions": {"operationId": "get_user_sessions",
                "parameters": {"user_id": "$request.body#/users/0/user_id"}}
        }),
        "get_group_members" => json!({"NextPageOfMembers": {"operationId": "get_group_members",
            "parameters": {"id": "$request.path.id", "from": "$response.body#/next"}}}),
        "get_user_sessions" => json!({"NextPageOfSessions": {"operationId": "get_user_sessions",
            "parameters": {"user_id": "$request.path.user_id", "from": "$response.body#/next"}}}),
        _ => return None,
    })
}

/// The refusals of schema-valid bodies no JSON Schema can state, by operation: regular
/// expressions of the 400 `message`, and why (see the module docs).
fn refusals_beyond_schema(operation_id: &str) -> Option<Value> {
    let refusal = |message: &str, why: &str| json!({"message": message, "why": why});
    let unknown_key = || {
        refusal(
            "^Payload validation error: 'No network ACL key with id \\S+' on property \
             (network_acls\\[[0-9]+\\]\\.)?rule\\.(match|not_match)\\.http_message_signature\\.keys\\[[0-9]+\\]\\.id\\.$",
            "A rule's http_message_signature names keys of the tenant (/api/v2/keys/network-acls).",
        )
    };
    Some(match operation_id {
        "netacl_analyze" => json!([refusal(
            "^The analysis takes at most [0-9]+ rules; this rule set has [0-9]+\\.$",
            "Without network_acls the live rules are analysed, and a live rule set larger than \
             the analysis's bound (network_acls' maxItems; rule files can make one) is refused \
             (README, Rule analysis).",
        )]),
        "netacl_preview" => json!([refusal(
            "^No edge has a traffic sample for this tenant yet ",
            "Without requests the preview replays the edges' traffic samples; while no edge \
             has posted one (no edge, no traffic yet, a server just restarted) it is refused \
             rather than answered over nothing (README, Rule analysis and impact preview).",
        )]),
        "netacl_dry_run" => json!([
            refusal(
                "^Payload validation error: 'Cannot compile: rule id \\S+ appears twice",
                "Two records of `network_acls` carry the same id (records without one get \
                 acl_1111111111111111111111, acl_1111111111111111111112, ... by position)."
            ),
            refusal(
                // The path as Rust's `{:?}` writes it: quoted, `"` and `\` escaped.
                "^Payload validation error: 'path \"(?:[^\"\\\\]|\\\\[\\s\\S])*\": ambiguous path: \
                 [\\s\\S]*' on property request\\.$",
                "A path servers would route to different scopes (merging `//` before dot \
                 segments, decoding `%2F`, stripping `;` parameters) is refused, as the edge \
                 refuses it."
            ),
            unknown_key()
        ]),
        "get_logs" => json!([
            refusal(
                "^Query validation error: 'Invalid search query at character [0-9]+: ",
                "q (or search) is a query: type:X, client_id:X, date:[A TO B] joined by AND."
            ),
            refusal(
                "^Query validation error: 'q and search are the same parameter",
                "q and search are two names of one parameter."
            ),
            refusal(
                "^Query validation error: 'from and take page by log id and take no search or sort'",
                "Checkpoint pages (from, take) follow log ids; q, search and sort do not apply."
            )
        ]),
        "post_network-acls" | "put_network-acls_by_id" | "patch_network-acls_by_id" => {
            json!([unknown_key()])
        }
        "get_group_members" | "get_user_sessions" => json!([refusal(
            "^Query validation error: 'Invalid cursor: ",
            "A cursor carries a tag (HMAC) binding it to the tenant and the list that handed it \
             out; one this tenant's list did not hand out (forged, altered, another tenant's) is \
             refused."
        )]),
        "netacl_watch" => json!([refusal(
            "^Query validation error: 'Expected an X25519 public key in base64url \\(43 \
             characters\\)' on property keys\\.$",
            "A low-order X25519 point (all zeros, ...) gives an all-zero shared secret, which \
             RFC 9180 refuses."
        )]),
        "post_organizations" => json!([
            refusal(
                "^Payload validation error: 'Connection [\\s\\S]+ does not exist' on property \
                 enabled_connections\\[[0-9]+\\]\\.connection_id\\.$",
                "An enabled connection must be one the directory holds."
            ),
            refusal(
                "^Payload validation error: 'Connection [\\s\\S]+ is already enabled by \
                 enabled_connections\\[[0-9]+\\]' on property \
                 enabled_connections\\[[0-9]+\\]\\.connection_id\\.$",
                "Each connection is enabled once."
            )
        ]),
        "post_enabled_connections" | "post_organization_connections" => json!([refusal(
            "^Payload validation error: 'Connection [\\s\\S]+ does not exist' on property \
             connection_id\\.$",
            "The connection must be one the directory holds."
        )]),
        "netacl_directory_import" => json!([
            refusal(
                "^Payload validation error: 'duplicate [a-z_ ]+ ",
                "Ids (and connection names) are unique within their list."
            ),
            refusal(
                "^Payload validation error: 'unknown (user|group|connection) ",
                "Every reference names a record of the same file."
            ),
            refusal(
                "^Payload validation error: 'group [\\s\\S]+ cannot be a member of itself'",
                "A group is not its own member."
            )
        ]),
        _ => return None,
    })
}

/// The document checked against what the server does: its forms, bounds, links and refusals.
/// (Inline: the module-circle check reads a test module only when it is inline.)
#[cfg(test)]
mod tests {
    use super::forms::{is_array, is_object, resolved, FORM};
    use super::*;

    /// The document of the route table.
    fn document(domain: &str, limits: &Limits) -> Value {
        super::document(domain, limits, &crate::routes::described())
    }

    /// The route table's operations.
    fn operations() -> Vec<Operation> {
        crate::routes::described()
    }
    use crate::http::body::FormShape;
    use crate::resources::branding::BRANDING_FORM;
    use crate::resources::network_acls::NETWORK_ACL_FORM;
    use crate::resources::organizations::ORGANIZATION_FORM;

    /// The form reader of each operation that takes forms.
    fn form_shape(operation_id: &str) -> &'static FormShape {
        match operation_id {
            "post_network-acls" | "put_network-acls_by_id" | "patch_network-acls_by_id" => {
                &NETWORK_ACL_FORM
            }
            "post_organizations" | "patch_organizations_by_id" => &ORGANIZATION_FORM,
            "post_enabled_connections"
            | "patch_enabled_connections_by_connection_id"
            | "post_organization_connections"
            | "patch_organization_connections_by_connection_id" => {
                &crate::resources::organizations::connections::CONNECTION_FORM
            }
            "patch_branding" => &BRANDING_FORM,
            "post_network-acl-keys" => &crate::resources::acl_keys::KEY_FORM,
            other => panic!("{other} takes forms: name its FormShape here"),
        }
    }

    /// Every leaf of `schema` (at `path`, in the form reader's spelling) whose type is boolean
    /// or integer, into `booleans` and `integers`.
    fn typed_leaves(
        schema: &Value,
        path: &str,
        schemas: &Map<String, Value>,
        booleans: &mut Vec<String>,
        integers: &mut Vec<String>,
    ) {
        let schema = resolved(schema, schemas);
        let join = |name: &str| {
            if path.is_empty() {
                name.to_owned()
            } else {
                format!("{path}.{name}")
            }
        };
        if let Some(props) = schema.get("properties").and_then(Value::as_object) {
            for (name, prop) in props {
                typed_leaves(prop, &join(name), schemas, booleans, integers);
            }
        }
        if let Some(items) = schema.get("items") {
            typed_leaves(items, &format!("{path}[]"), schemas, booleans, integers);
        }
        for key in ["oneOf", "anyOf"] {
            for branch in schema
                .get(key)
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                typed_leaves(branch, path, schemas, booleans, integers);
            }
        }
        let kind = schema.get("type");
        if kind == Some(&json!("boolean")) || schema.get("const") == Some(&json!(true)) {
            booleans.push(path.to_owned());
        }
        if kind == Some(&json!("integer")) {
            integers.push(path.to_owned());
        }
    }

    /// The form schemas carry only what a form can: no null, no top-level array, and every
    /// boolean and integer they declare is one the form reader coerces (else `true` would stay
    /// the string "true" and the server would refuse what the document declares valid).
    #[test]
    fn form_schemas_are_what_the_form_readers_read() {
        let doc = document("tenant.test", &Limits::default());
        let schemas = doc["components"]["schemas"].as_object().expect("schemas");
        let mut checked = 0;
        for op in operations().into_iter().filter(|op| op.form) {
            let content = &doc["paths"][op.path][op.method.as_str().to_ascii_lowercase()]
                ["requestBody"]["content"];
            let media = &content[FORM];
            if media.is_null() {
                // Offered as JSON only: every member is an array at the top of the body.
                let json_body = resolved(&content["application/json"]["schema"], schemas);
                let members = json_body["properties"].as_object().expect("properties");
                assert!(
                    !members.is_empty() && members.values().all(|p| is_array(resolved(p, schemas))),
                    "{}: a form body left out of the document",
                    op.operation_id
                );
                continue;
            }
            let body = resolved(&media["schema"], schemas);
            assert!(body.is_object(), "{}", op.operation_id);
            let text = body.to_string();
            assert!(
                !text.contains("\"null\""),
                "{}: null in {text}",
                op.operation_id
            );
            for (name, prop) in body["properties"].as_object().expect("properties") {
                let prop = resolved(prop, schemas);
                assert!(
                    !is_array(prop),
                    "{}: top-level array {name}",
                    op.operation_id
                );
                assert_eq!(
                    media["encoding"].get(name).is_some(),
                    is_object(prop, schemas),
                    "{}: {name} is deepObject-encoded exactly when it is an object",
                    op.operation_id
                );
            }
            let (mut booleans, mut integers) = (Vec::new(), Vec::new());
            typed_leaves(body, "", schemas, &mut booleans, &mut integers);
            let shape = form_shape(op.operation_id);
            for path in &booleans {
                assert!(
                    shape.booleans.contains(&path.as_str()),
                    "{}: boolean {path}",
                    op.operation_id
                );
            }
            for path in &integers {
                assert!(
                    shape.integers.contains(&path.as_str()),
                    "{}: integer {path}",
                    op.operation_id
                );
            }
            checked += booleans.len() + integers.len();
        }
        assert!(checked >= 10, "only {checked} typed leaves");
    }

    /// A form body's variant is no member of another form variant: its least count of members
    /// is the body's own (an empty form is `{}`), which a member's could not be.
    #[test]
    fn form_bodies_are_not_nested_in_forms() {
        let doc = document("tenant.test", &Limits::default());
        let schemas = doc["components"]["schemas"].as_object().expect("schemas");
        let bodies: Vec<String> = operations()
            .into_iter()
            .filter(|op| op.form)
            .filter_map(|op| op.body)
            .map(|body| format!("#/components/schemas/{}{FORM_SUFFIX}", schema_name(body)))
            .collect();
        for (name, schema) in schemas.iter().filter(|(n, _)| n.ends_with(FORM_SUFFIX)) {
            for body in &bodies {
                assert!(
                    !schema.to_string().contains(&format!("\"{body}\"")),
                    "{name} nests {body}"
                );
            }
        }
        assert!(!bodies.is_empty());
    }

    /// Every `$ref` of the document names a component.
    #[test]
    fn every_reference_resolves() {
        fn walk(value: &Value, schemas: &Map<String, Value>) {
            match value {
                Value::Object(map) => {
                    if let Some(target) = map.get("$ref").and_then(Value::as_str) {
                        let name = target.trim_start_matches("#/components/schemas/");
                        assert!(schemas.contains_key(name), "{target}");
                    }
                    map.values().for_each(|v| walk(v, schemas));
                }
                Value::Array(items) => items.iter().for_each(|v| walk(v, schemas)),
                _ => {}
            }
        }
        let doc = document("tenant.test", &Limits::default());
        walk(
            &doc,
            doc["components"]["schemas"].as_object().expect("schemas"),
        );
    }
}
