//! The component schemas (the request bodies' and the answers') and each operation's success
//! schema.
use netacl_model::{patterns, Limits, ManagedListName};
use serde_json::{json, Map, Value};

use crate::resources::network_acls::MAX_PER_PAGE;

pub(super) fn success_schema(operation_id: &str) -> Value {
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

pub(super) fn schemas(limits: &Limits) -> Value {
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
