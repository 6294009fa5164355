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

use http::{Method, StatusCode};
use netacl_model::{patterns, Limits, ManagedListName};
use serde_json::{json, Map, Value};

use crate::config::{DEFAULT_WATCH_TIMEOUT_MS, MAX_WATCH_TIMEOUT_MS};
use crate::http::cursor::{CURSOR_PATTERN, DEFAULT_TAKE, MAX_TAKE};
use crate::resources::groups::{fields_pattern, MAX_FIELDS_LEN, MEMBER_FIELDS};
use crate::resources::network_acls::{DEFAULT_PER_PAGE, MAX_PER_PAGE};

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

/// The form media type.
const FORM: &str = "application/x-www-form-urlencoded";

/// Suffix of the form variant of a component schema (`NetworkAclCreateForm`).
const FORM_SUFFIX: &str = "Form";

/// Object member names a form can carry in brackets: not empty, no bracket, not all digits (a
/// digit segment is an array index).
const FORM_MEMBER_NAME: &str = "^[^\\[\\]]*[^\\[\\]0-9][^\\[\\]]*$";

/// Adds the form variant of every component a form body uses, and each form body's encoding.
fn add_form_schemas(document: &mut Value, operations: &[Operation]) {
    let Some(schemas) = document
        .pointer("/components/schemas")
        .and_then(Value::as_object)
        .cloned()
    else {
        return;
    };
    let mut bodies: Vec<String> = Vec::new();
    for op in operations {
        if let (Some(body), true) = (op.body, op.form) {
            let name = schema_name(body).to_owned();
            if !bodies.contains(&name) {
                bodies.push(name);
            }
        }
    }
    // The components reachable from the form bodies, each turned into its form variant.
    let mut pending: Vec<String> = bodies.clone();
    let mut variants = Map::new();
    while let Some(name) = pending.pop() {
        let form_name = format!("{name}{FORM_SUFFIX}");
        if variants.contains_key(&form_name) {
            continue;
        }
        let Some(schema) = schemas.get(&name) else {
            continue;
        };
        let mut variant = form_variant(schema, &mut pending);
        if bodies.contains(&name) {
            drop_top_level_arrays(&mut variant, &schemas);
            if let Value::Object(map) = &mut variant {
                // An empty form is an empty body, `{}`, read as the JSON one: the body keeps its
                // own least count of members (only a nested object that is empty sends nothing).
                match schema.get("minProperties") {
                    Some(least) => map.insert("minProperties".into(), least.clone()),
                    None => map.remove("minProperties"),
                };
                map.insert(
                    "description".into(),
                    json!(
                        "The form body: nested objects as bracketed keys \
                           (`deepObject`), array items by index or `[]`; what a form cannot \
                           carry (null, empty objects and arrays, fractional numbers, \
                           top-level arrays) is left out; the JSON body takes it."
                    ),
                );
            }
        }
        variants.insert(form_name, variant);
    }
    let encodings: Vec<(String, Value)> = bodies
        .iter()
        .map(|name| {
            let variant = &variants[&format!("{name}{FORM_SUFFIX}")];
            (name.clone(), deep_object_encoding(variant, &schemas))
        })
        .collect();
    // A body whose every member is a top-level array has no form a generic client can spell
    // (`PUT /_netacl/v1/managed-lists/{name}`: `items`); the server still takes its bracketed
    // form (`items[0]=...`), the document offers JSON only.
    let unspellable: Vec<String> = bodies
        .iter()
        .filter(|name| {
            variants[&format!("{name}{FORM_SUFFIX}")]
                .get("properties")
                .and_then(Value::as_object)
                .is_none_or(Map::is_empty)
        })
        .cloned()
        .collect();
    for name in &unspellable {
        variants.remove(&format!("{name}{FORM_SUFFIX}"));
    }
    if let Some(target) = document
        .pointer_mut("/components/schemas")
        .and_then(Value::as_object_mut)
    {
        target.extend(variants);
    }
    if let Some(paths) = document.get_mut("paths").and_then(Value::as_object_mut) {
        for item in paths.values_mut().filter_map(Value::as_object_mut) {
            for operation in item.values_mut() {
                let Some(form) = operation
                    .pointer_mut("/requestBody/content/application~1x-www-form-urlencoded")
                else {
                    continue;
                };
                let body = form
                    .pointer("/schema/$ref")
                    .and_then(Value::as_str)
                    .and_then(|r| r.rsplit('/').next())
                    .and_then(|n| n.strip_suffix(FORM_SUFFIX))
                    .map(str::to_owned);
                if let Some((_, encoding)) =
                    encodings.iter().find(|(n, _)| Some(n) == body.as_ref())
                {
                    form["encoding"] = encoding.clone();
                }
                if body.as_ref().is_some_and(|name| unspellable.contains(name)) {
                    if let Some(content) = operation
                        .pointer_mut("/requestBody/content")
                        .and_then(Value::as_object_mut)
                    {
                        content.remove(FORM);
                    }
                }
            }
        }
    }
}

/// The form variant of a schema: `null` left out (forms cannot carry it), objects and arrays
/// not empty (an empty one sends nothing; [`add_form_schemas`] gives a body its own count back), numbers as integers (the form reader coerces 64-bit
/// integers only), member names a bracket key can spell; `$ref`s to form variants, queued in
/// `pending`.
fn form_variant(schema: &Value, pending: &mut Vec<String>) -> Value {
    let Value::Object(map) = schema else {
        return schema.clone();
    };
    let mut out = Map::new();
    for (key, value) in map {
        let value = match key.as_str() {
            "$ref" => {
                let target = value.as_str().unwrap_or("");
                let name = target.rsplit('/').next().unwrap_or("").to_owned();
                let form = format!("#/components/schemas/{name}{FORM_SUFFIX}");
                pending.push(name);
                Value::String(form)
            }
            "properties" => Value::Object(
                value
                    .as_object()
                    .map(|props| {
                        props
                            .iter()
                            .map(|(k, v)| (k.clone(), form_variant(v, pending)))
                            .collect()
                    })
                    .unwrap_or_default(),
            ),
            "items" | "not" => form_variant(value, pending),
            "additionalProperties" if value.is_object() => form_variant(value, pending),
            "oneOf" | "anyOf" | "allOf" => Value::Array(
                value
                    .as_array()
                    .map(|branches| {
                        branches
                            .iter()
                            .filter(|b| b.get("type") != Some(&json!("null")))
                            .map(|b| form_variant(b, pending))
                            .collect()
                    })
                    .unwrap_or_default(),
            ),
            "type" => match value {
                Value::Array(types) => {
                    let kept: Vec<Value> = types
                        .iter()
                        .filter(|t| *t != "null")
                        .map(|t| {
                            if t == "number" {
                                json!("integer")
                            } else {
                                t.clone()
                            }
                        })
                        .collect();
                    match kept.as_slice() {
                        [one] => one.clone(),
                        _ => Value::Array(kept),
                    }
                }
                Value::String(t) if t == "number" => json!("integer"),
                other => other.clone(),
            },
            "enum" => Value::Array(
                value
                    .as_array()
                    .map(|v| v.iter().filter(|x| !x.is_null()).cloned().collect())
                    .unwrap_or_default(),
            ),
            _ => value.clone(),
        };
        out.insert(key.clone(), value);
    }
    let kind = out.get("type").cloned();
    let is = |name: &str| kind.as_ref().is_some_and(|k| k == name);
    if is("object") || out.contains_key("properties") {
        let least = out
            .get("minProperties")
            .and_then(Value::as_u64)
            .unwrap_or(0);
        out.insert("minProperties".into(), least.max(1).into());
        if out
            .get("additionalProperties")
            .is_some_and(Value::is_object)
        {
            out.insert("propertyNames".into(), json!({"pattern": FORM_MEMBER_NAME}));
        }
    }
    if is("array") {
        let least = out.get("minItems").and_then(Value::as_u64).unwrap_or(0);
        out.insert("minItems".into(), least.max(1).into());
    }
    if is("integer") {
        out.entry("minimum").or_insert(json!(i64::MIN));
        out.entry("maximum").or_insert(json!(i64::MAX));
    }
    Value::Object(out)
}

/// The schema `value` names (a `$ref` to a component, resolved once), or itself.
fn resolved<'a>(value: &'a Value, schemas: &'a Map<String, Value>) -> &'a Value {
    value
        .get("$ref")
        .and_then(Value::as_str)
        .and_then(|r| r.rsplit('/').next())
        .and_then(|name| {
            schemas
                .get(name)
                .or_else(|| schemas.get(name.strip_suffix(FORM_SUFFIX).unwrap_or(name)))
        })
        .unwrap_or(value)
}

/// Whether a schema describes an array.
fn is_array(schema: &Value) -> bool {
    schema.get("type") == Some(&json!("array"))
        || schema
            .get("type")
            .and_then(Value::as_array)
            .is_some_and(|t| t.contains(&json!("array")))
}

/// Whether a schema describes (or may describe) an object.
fn is_object(schema: &Value, schemas: &Map<String, Value>) -> bool {
    let schema = resolved(schema, schemas);
    schema.get("type") == Some(&json!("object"))
        || schema.get("properties").is_some()
        || ["oneOf", "anyOf"].iter().any(|k| {
            schema
                .get(*k)
                .and_then(Value::as_array)
                .is_some_and(|b| b.iter().any(|b| is_object(b, schemas)))
        })
}

/// Leaves out the top-level array properties of a form body: no generic form encoding spells
/// an array at the top (OpenAPI's `deepObject` is for objects).
fn drop_top_level_arrays(body: &mut Value, schemas: &Map<String, Value>) {
    let Some(properties) = body.get_mut("properties").and_then(Value::as_object_mut) else {
        return;
    };
    let arrays: Vec<String> = properties
        .iter()
        .filter(|(_, schema)| is_array(resolved(schema, schemas)))
        .map(|(name, _)| name.clone())
        .collect();
    for name in &arrays {
        properties.remove(name);
    }
    if let Some(required) = body.get_mut("required").and_then(Value::as_array_mut) {
        required.retain(|r| !arrays.iter().any(|a| r == a));
    }
}

/// `deepObject` encoding of every object property of a form body.
fn deep_object_encoding(body: &Value, schemas: &Map<String, Value>) -> Value {
    let mut encoding = Map::new();
    if let Some(properties) = body.get("properties").and_then(Value::as_object) {
        for (name, schema) in properties {
            if is_object(schema, schemas) {
                encoding.insert(
                    name.clone(),
                    json!({"style": "deepObject", "explode": true}),
                );
            }
        }
    }
    Value::Object(encoding)
}

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

fn success_schema(operation_id: &str) -> Value {
    if let Some(schema) = crate::resources::tenant_schemas::success_schema(operation_id) {
        return schema;
    }
    if let Some(schema) = crate::resources::managed_lists::openapi::success_schema(operation_id) {
        return schema;
    }
    if let Some(schema) = crate::resources::signing_keys::success_schema(operation_id) {
        return schema;
    }
    if let Some(schema) = crate::resources::acl_keys::openapi::success_schema(operation_id) {
        return schema;
    }
    if let Some(schema) = crate::resources::logs::openapi::success_schema(operation_id) {
        return schema;
    }
    if let Some(schema) = crate::resources::history::openapi::success_schema(operation_id) {
        return schema;
    }
    if let Some(schema) = crate::resources::rule_counts::success_schema(operation_id) {
        return schema;
    }
    match operation_id {
        "get_network-acls" => json!({"oneOf": [
            {"type": "array", "items": {"$ref": "#/components/schemas/NetworkAcl"}},
            {"type": "object", "additionalProperties": false,
             "required": ["network_acls", "start", "limit", "total"], "properties": {
                "network_acls": {"type": "array", "items": {"$ref": "#/components/schemas/NetworkAcl"}},
                "start": {"type": "integer", "minimum": 0},
                "limit": {"type": "integer", "minimum": 0, "maximum": MAX_PER_PAGE},
                "total": {"type": "integer", "minimum": 0}
            }}
        ]}),
        "netacl_watch" => json!({"type": "object", "additionalProperties": false,
        "required": ["version", "network_acls"], "properties": {
            "version": {"type": "integer", "minimum": 0},
            "network_acls": {"type": "array", "items": {"$ref": "#/components/schemas/NetworkAcl"}},
            "managed_lists": {"type": "array", "description": "With the lists query parameter: every managed list in force; items left out when the caller holds that digest.",
                "items": {"type": "object", "additionalProperties": false,
                    "required": ["name", "source", "version", "digest"], "properties": {
                    "name": {"enum": ManagedListName::ALL.map(|n| n.as_str())},
                    "source": {"enum": ["api", "file"]},
                    "version": {"type": "integer", "minimum": 0},
                    "digest": {"type": "string", "pattern": "^[0-9a-f]{32}$"},
                    "items": {"type": "array", "items": {"type": "string"}}}}},
            "tenant": {"type": "string",
                "description": "With the keys query parameter: the tenant the sealed keys are bound to."},
            "network_acl_keys": {"type": "array",
                "description": "With the keys query parameter: the material of the keys live rules name, sealed to the caller's key with HPKE.",
                "items": {"type": "object", "additionalProperties": false,
                    "required": ["id", "sealed"], "properties": {
                    "id": {"type": "string"},
                    "sealed": {"type": "string", "pattern": "^hpke-v1:[A-Za-z0-9_-]+$"}}}},
            "network_acl_keys_withheld": {"enum": ["scope", "transport"],
                "description": "With the keys query parameter: why no material was sent."}
        }}),
        "netacl_dry_run" => json!({"type": "object", "additionalProperties": false,
        "required": ["version", "source", "outcome"], "properties": {
            "version": {"type": "integer", "minimum": 0},
            "source": {"enum": ["live", "body"]},
            "outcome": {"$ref": "#/components/schemas/Outcome"}
        }}),
        "netacl_analyze" => json!({"type": "object", "additionalProperties": false,
        "required": ["findings", "undecided"], "properties": {
            "findings": {"type": "array", "items": {"type": "object", "additionalProperties": false,
                "required": ["kind", "rule_id", "by", "detail"], "properties": {
                "kind": {"enum": ["shadowed", "redundant", "conflict"]},
                "rule_id": {"type": "string", "pattern": patterns::ACL_ID},
                "by": {"type": "array", "items": {"type": "string", "pattern": patterns::ACL_ID}},
                "detail": {"type": "string"}}}},
            "undecided": {"type": "array", "items": {"type": "object", "additionalProperties": false,
                "required": ["rule_id", "reason"], "properties": {
                "rule_id": {"type": "string", "pattern": patterns::ACL_ID},
                "reason": {"type": "string", "examples": [netacl_analysis::BUDGET_REASON],
                    "description": "Which questions about the rule are open and why, `; `-separated \
                        sentences (`whether it conflicts: ...`, `whether it is shadowed: too many \
                        cases ...`); or exactly `budget`: the analysis's work budget or deadline \
                        ran out (or the client went away) before the rule was settled (README, \
                        Rule analysis)."}}}}
        }}),
        "netacl_preview" => json!({"type": "object", "additionalProperties": false,
        "required": ["requests", "changed", "transitions", "by_rule", "examples"], "properties": {
            "requests": {"type": "integer", "minimum": 0},
            "changed": {"type": "integer", "minimum": 0},
            "transitions": {"type": "array", "items": {"type": "object", "additionalProperties": false,
                "required": ["from", "to", "count"], "properties": {
                "from": {"$ref": "#/components/schemas/Effect"},
                "to": {"$ref": "#/components/schemas/Effect"},
                "count": {"type": "integer", "minimum": 1}}}},
            "by_rule": {"type": "array", "items": {"type": "object", "additionalProperties": false,
                "required": ["rule_id", "gained", "lost"], "properties": {
                "rule_id": {"type": "string", "pattern": patterns::ACL_ID},
                "gained": {"type": "integer", "minimum": 0},
                "lost": {"type": "integer", "minimum": 0}}}},
            "examples": {"type": "array", "maxItems": netacl_analysis::MAX_EXAMPLES, "items": {
                "type": "object", "additionalProperties": false,
                "required": ["request", "from", "to"], "properties": {
                "request": {"type": "object"},
                "from": {"$ref": "#/components/schemas/Outcome"},
                "to": {"$ref": "#/components/schemas/Outcome"}}}},
            "sample": {"type": "object", "additionalProperties": false,
                "description": "Present when the edges' traffic samples were replayed (no requests given).",
                "required": ["edges", "requests"], "properties": {
                "edges": {"type": "integer", "minimum": 1},
                "requests": {"type": "integer", "minimum": 1}}}
        }}),
        "netacl_status" => json!({"type": "object", "additionalProperties": false,
        "required": ["tenant", "version", "network_acls", "policy"], "properties": {
            "tenant": {"type": "string"},
            "version": {"type": "integer", "minimum": 0},
            "network_acls": {"type": "integer", "minimum": 0},
            "managed_lists": {"type": "array",
                "items": {"$ref": "#/components/schemas/ManagedListInfo"}},
            "policy": {"type": "object",
                       "description": "Compile time, rule count and index sizes."}
        }}),
        "netacl_openapi" => json!({"type": "object", "required": ["openapi", "paths"]}),
        _ => json!({"$ref": "#/components/schemas/NetworkAcl"}),
    }
}

fn schemas(limits: &Limits) -> Value {
    let list = |item: Value| {
        json!({"type": "array", "minItems": 1, "maxItems": limits.max_entries_per_member,
               "uniqueItems": true, "items": item})
    };
    let pattern = |pattern: &str| json!({"type": "string", "pattern": pattern});
    let component = |name: &str| json!({"$ref": format!("#/components/schemas/{name}")});
    let ipv4 = component("Ipv4Cidr");
    let ipv6 = component("Ipv6Cidr");
    let hostname = json!({"type": "string", "anyOf": [
        {"maxLength": 253, "pattern": patterns::HOSTNAME},
        {"maxLength": 254, "pattern": patterns::HOSTNAME_WITH_DOT}
    ]});
    let criteria = json!({
        "type": "object", "additionalProperties": false, "minProperties": 1,
        "description": format!("At most {} entries in one rule (match and not_match \
            together) and {} in the rule set; those totals are no schema's to state.",
            limits.max_entries_per_rule, limits.max_entries_per_set),
        "properties": {
            "ipv4_cidrs": list(ipv4.clone()),
            "ipv6_cidrs": list(ipv6.clone()),
            "connecting_ipv4_cidrs": list(ipv4),
            "connecting_ipv6_cidrs": list(ipv6),
            "asns": list(json!({"type": "integer", "minimum": 0, "maximum": u32::MAX})),
            "geo_country_codes": list(pattern(patterns::COUNTRY_CODE)),
            "geo_subdivision_codes": list(pattern(patterns::SUBDIVISION_CODE)),
            "ja3_fingerprints": list(pattern(patterns::JA3)),
            "ja4_fingerprints": list(pattern(patterns::JA4)),
            "user_agents": list(json!({"type": "string", "minLength": 1, "maxLength": 1024,
                "pattern": patterns::NO_CONTROL,
                "description": "Compared exactly; `*` matches any run of characters."})),
            "hostnames": list(hostname),
            "auth0_managed": {"type": "array", "minItems": 1, "uniqueItems": true,
                "description": "Managed lists (content supplied by the operator); in match or \
                                in not_match, not both.",
                "items": {"enum": ManagedListName::ALL.map(|n| n.as_str())}},
            "http_message_signature": {"type": "object", "additionalProperties": false,
                "required": ["keys"],
                "description": "Holds when the request carries a valid RFC 9421 signature (HMAC-SHA256; created, expires and keyid required) made with one of these network ACL keys. Each id must name a key of the tenant.",
                "properties": {"keys": {"type": "array", "minItems": 1, "uniqueItems": true,
                    "items": {"type": "object", "additionalProperties": false, "required": ["id"],
                        "properties": {"id": {"type": "string", "minLength": 1, "maxLength": 64,
                            "pattern": "^[A-Za-z0-9_.-]+$"}}}}}}
        }
    });
    let one_action = |name: &str| {
        json!({"type": "object", "additionalProperties": false, "required": [name],
               "properties": {name: {"const": true}}})
    };
    let action = json!({
        "description": "Exactly one of block, allow, log, redirect, set to true; redirect also \
                        takes redirect_uri.",
        "oneOf": [
            one_action("block"), one_action("allow"), one_action("log"),
            {"type": "object", "additionalProperties": false,
             "required": ["redirect", "redirect_uri"], "properties": {
                "redirect": {"const": true},
                "redirect_uri": {"type": "string", "minLength": 1, "maxLength": 2000,
                                 "pattern": patterns::absolute_uri()}
            }}
        ]
    });
    let rule = json!({
        "type": "object", "additionalProperties": false, "required": ["action", "scope"],
        "oneOf": [
            {"required": ["match_all"]},
            {"anyOf": [{"required": ["match"]}, {"required": ["not_match"]}]}
        ],
        "not": {"required": ["match", "not_match"], "properties": {
            "match": {"required": ["auth0_managed"]},
            "not_match": {"required": ["auth0_managed"]}
        }},
        "description": "At least one of match and not_match, or match_all alone; \
                        auth0_managed in match or in not_match, not both.",
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
        "priority": {"type": "integer", "minimum": 1, "maximum": 100, "default": 50},
        "rule": {"$ref": "#/components/schemas/NetworkAclRule"}
    });
    let mut record_fields = fields.clone();
    if let Value::Object(map) = &mut record_fields {
        map.insert("id".into(), pattern(patterns::ACL_ID));
        map.insert("created_at".into(), component("Timestamp"));
        map.insert("updated_at".into(), component("Timestamp"));
    }
    let any_string = json!({"type": ["string", "null"]});
    let address = json!({"anyOf": [component("IpAddress"), {"type": "null"}]});
    let request_input = json!({
        "type": "object", "additionalProperties": false,
        "description": "Request signals; give scope or path (default: an authentication \
                        request). A key given null is absent.",
        "not": {"required": ["scope", "path"], "properties": {
            "scope": {"type": "string"}, "path": {"type": "string"}}},
        "properties": {
            "scope": {"enum": ["management", "authentication", "dynamic_client_registration", null]},
            "path": {"type": ["string", "null"], "pattern": patterns::REQUEST_PATH,
                "description": "The request target's path, read as the edge reads it: a `%` \
                                not followed by two hex digits and a backslash are refused \
                                before any `?` or `#`, and so is a path servers would route \
                                to different scopes (`/api/v2//../users`)."},
            "client_ip": address, "connecting_ip": address,
            "asn": {"type": ["integer", "null"], "minimum": 0, "maximum": u32::MAX},
            "country": any_string, "subdivision": any_string, "ja3": any_string,
            "ja4": any_string, "user_agent": any_string, "hostname": any_string
        }
    });
    let record_required = ["id", "description", "active", "rule"];
    let list_overrides: Map<String, Value> = ManagedListName::ALL
        .iter()
        .map(|name| (name.as_str().to_owned(), component("ManagedListItems")))
        .collect();
    json!({
        "Ipv4Cidr": pattern(&patterns::ipv4_cidr()),
        "Ipv6Cidr": {"type": "string", "pattern": patterns::ipv6_cidr(),
            "not": {"pattern": patterns::ipv6_cidr_ipv4_mapped()},
            "description": "An IPv6 address or CIDR; entries inside ::ffff:0:0/96 (IPv4-mapped) \
                            are refused: list them as IPv4."},
        "ManagedListItems": {"type": "array", "uniqueItems": true,
            "maxItems": limits.max_entries_per_set,
            "description": "IPv4/IPv6 addresses or CIDRs, JA3 (32 lowercase hex digits) or JA4 \
                            fingerprints.",
            "items": {"anyOf": [
                component("Ipv4Cidr"), component("Ipv6Cidr"),
                pattern(patterns::JA3), pattern(patterns::JA4)
            ]}},
        "IpAddress": {"type": "string", "pattern": patterns::ip_address(),
            "description": "An IPv4 or IPv6 address; IPv6 also in brackets."},
        "Timestamp": {"type": "string", "pattern": patterns::TIMESTAMP,
            "description": "UTC with milliseconds, exactly as netacl writes it: \
                            2026-07-30T11:42:25.354Z."},
        "NetworkAclCreate": {"type": "object", "additionalProperties": false,
            "required": ["description", "active", "rule"], "properties": fields},
        "NetworkAclUpdate": {"type": "object", "additionalProperties": false,
            "minProperties": 1, "properties": fields},
        "NetworkAcl": {"type": "object", "additionalProperties": false,
            "required": ["id", "description", "active", "priority", "rule", "created_at", "updated_at"],
            "properties": record_fields},
        "NetworkAclRecord": {"type": "object", "additionalProperties": false,
            "description": "A stored record as the list answers it; priority defaults to 50, \
                            the timestamps to the epoch.",
            "required": record_required, "properties": record_fields},
        "NetworkAclRule": rule,
        "NetworkAclAction": action,
        "NetworkAclCriteria": criteria,
        "RequestInput": request_input,
        "DryRun": {"type": "object", "additionalProperties": false, "required": ["request"],
            "properties": {
                "request": {"$ref": "#/components/schemas/RequestInput"},
                "network_acls": {"type": "array", "maxItems": limits.max_rules_per_set,
                    "items": {"oneOf": [
                        {"$ref": "#/components/schemas/NetworkAclRecord"},
                        {"$ref": "#/components/schemas/NetworkAclCreate"}
                    ]}},
                "managed_lists": {"type": "object", "additionalProperties": false,
                    "description": "Managed list content for this dry run only, by name \
                                    (replaces the content in force for the names given).",
                    "properties": list_overrides}
            }},
        "Analyze": {"type": "object", "additionalProperties": false,
            "description": "The rule set to analyse; without network_acls, the live rules.",
            "properties": {
                "network_acls": {"type": "array",
                    "maxItems": limits.max_rules_per_set.min(crate::resources::analysis::MAX_ANALYZED_RULES),
                    "items": {"oneOf": [
                        {"$ref": "#/components/schemas/NetworkAclRecord"},
                        {"$ref": "#/components/schemas/NetworkAclCreate"}
                    ]}}
            }},
        "Preview": {"type": "object", "additionalProperties": false,
            "required": ["changes"],
            "properties": {
                "changes": {"type": "array", "description": "Applied in order to the live rules, in memory.",
                    "items": {"oneOf": [
                        {"type": "object", "additionalProperties": false,
                         "required": ["op", "network_acl"], "properties": {
                            "op": {"enum": ["create"]},
                            "network_acl": {"$ref": "#/components/schemas/NetworkAclCreate"}}},
                        {"type": "object", "additionalProperties": false,
                         "required": ["op", "id", "network_acl"], "properties": {
                            "op": {"enum": ["replace"]}, "id": pattern(patterns::ACL_ID),
                            "network_acl": {"$ref": "#/components/schemas/NetworkAclCreate"}}},
                        {"type": "object", "additionalProperties": false,
                         "required": ["op", "id", "network_acl"], "properties": {
                            "op": {"enum": ["update"]}, "id": pattern(patterns::ACL_ID),
                            "network_acl": {"$ref": "#/components/schemas/NetworkAclUpdate"}}},
                        {"type": "object", "additionalProperties": false,
                         "required": ["op", "id"], "properties": {
                            "op": {"enum": ["delete"]}, "id": pattern(patterns::ACL_ID)}}
                    ]}},
                "requests": {"type": "array", "description": "The requests to replay, with netacl eval's keys; absent: the edges' traffic samples.",
                    "items": {"$ref": "#/components/schemas/RequestInput"}}
            }},
        "Effect": {"type": "object", "additionalProperties": false, "required": ["action"],
            "properties": {
                "action": {"enum": ["block", "allow", "redirect", "none"]},
                "redirect_uri": {"type": "string"}
            }},
        "Outcome": {"type": "object", "additionalProperties": false,
            "required": ["action", "rule_id", "monitored"], "properties": {
            "action": {"enum": ["block", "allow", "redirect", "none"]},
            "rule_id": {"oneOf": [pattern(patterns::ACL_ID), {"type": "null"}]},
            "redirect_uri": {"type": "string"},
            "monitored": {"type": "array", "items": pattern(patterns::ACL_ID)}
        }},
        "Error": {"type": "object", "additionalProperties": false,
            "required": ["statusCode", "error", "message"], "properties": {
            "statusCode": {"type": "integer", "minimum": 400, "maximum": 599},
            "error": {"type": "string"},
            "message": {"type": "string"}, "errorCode": {"type": "string"}
        }}
    })
}

#[cfg(test)]
mod tests {
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
