//! The OpenAPI parts of the logs operations.
use serde_json::{json, Value};

use super::{LOG_FIELDS, LOG_ID_PATTERN, MAX_SUMMARIES};
use crate::http::paging::MAX_PAGE_SIZE;

/// The path parameter of `/api/v2/logs/{id}`.
pub(crate) fn path_parameters(path: &str) -> Option<Vec<Value>> {
    (path == "/api/v2/logs/{id}").then(|| {
        vec![json!({
            "name": "id", "in": "path", "required": true,
            "description": "The log id (log_id).",
            "schema": {"type": "string", "pattern": LOG_ID_PATTERN}
        })]
    })
}

/// The schema of a query parameter of `GET /api/v2/logs`, where it differs from the same name
/// elsewhere.
pub(crate) fn query_schema(operation_id: &str, name: &str) -> Option<Value> {
    if operation_id != "get_logs" {
        return None;
    }
    Some(match name {
        "from" => json!({"type": "string", "pattern": LOG_ID_PATTERN,
            "description": "A log id: the events recorded after it, by log id."}),
        "sort" => json!({"enum": ["date:1", "date:-1"], "default": "date:-1"}),
        "q" | "search" => json!({"type": "string", "maxLength": super::search::MAX_QUERY_LEN,
            "description": "type:X, client_id:X and date:[A TO B] joined by AND."}),
        _ => return None,
    })
}

/// The `fields` a logs listing may name.
pub(crate) fn fields(operation_id: &str) -> Option<&'static [&'static str]> {
    (operation_id == "get_logs").then_some(&LOG_FIELDS[..])
}

/// The success schema of a logs operation.
pub(crate) fn success_schema(operation_id: &str) -> Option<Value> {
    Some(match operation_id {
        "get_logs" => json!({"oneOf": [
            {"type": "array", "items": {"$ref": "#/components/schemas/LogEvent"}},
            {"type": "object", "additionalProperties": false,
             "required": ["logs", "start", "limit", "length", "total"], "properties": {
                "logs": {"type": "array", "items": {"$ref": "#/components/schemas/LogEvent"}},
                "start": {"type": "integer", "minimum": 0},
                "limit": {"type": "integer", "minimum": 0, "maximum": MAX_PAGE_SIZE},
                "length": {"type": "integer", "minimum": 0, "maximum": MAX_PAGE_SIZE},
                "total": {"type": "integer", "minimum": 0}
            }}
        ]}),
        "get_logs_by_id" => json!({"$ref": "#/components/schemas/LogEvent"}),
        "netacl_edge_summaries" => json!({"type": "object", "additionalProperties": false,
            "required": ["recorded"],
            "properties": {"recorded": {"type": "integer", "minimum": 0}}}),
        "netacl_edge_sample" => json!({"type": "object", "additionalProperties": false,
            "required": ["kept"],
            "properties": {"kept": {"type": "integer", "minimum": 0,
                                    "maximum": super::sample::MAX_SAMPLE_REQUESTS}}}),
        _ => return None,
    })
}

/// The schema of one edge summary (`AclSummary`).
pub(crate) fn summary_schema() -> Value {
    json!({
        "type": "object", "additionalProperties": false,
        "required": ["rule_id", "action", "scope", "policy_version", "interval_s",
                     "evaluated", "matched", "connections_refused"],
        "properties": {
            "rule_id": {"type": "string", "pattern": netacl_model::patterns::ACL_ID},
            "action": {"enum": netacl_model::SUMMARY_ACTIONS},
            "scope": {"enum": netacl_model::RuleScope::ALL.map(|s| s.as_str())},
            "policy_version": {"type": "integer", "minimum": 0, "maximum": u64::MAX},
            "interval_s": {"type": "integer", "minimum": 1,
                           "maximum": netacl_model::MAX_SUMMARY_INTERVAL_S},
            "evaluated": {"type": "integer", "minimum": 0, "maximum": u64::MAX},
            "matched": {"type": "integer", "minimum": 0, "maximum": u64::MAX},
            "connections_refused": {"type": "integer", "minimum": 0, "maximum": u64::MAX}
        }
    })
}

/// The component schemas.
pub(crate) fn components() -> Vec<(&'static str, Value)> {
    vec![
        (
            "LogEvent",
            json!({"type": "object", "additionalProperties": false, "properties": {
                "date": {"type": "string", "format": "date-time"},
                "type": {"type": "string", "description": "sapi, fapi or acls_summary."},
                "description": {"type": "string"},
                "client_id": {"type": "string"},
                "client_name": {"type": "string"},
                "ip": {"type": "string"},
                "user_agent": {"type": "string"},
                "hostname": {"type": "string"},
                "details": {"type": "object"},
                "log_id": {"type": "string", "pattern": LOG_ID_PATTERN}
            }}),
        ),
        (
            "EdgeSummaries",
            json!({"type": "object", "additionalProperties": false,
            "required": ["summaries"], "properties": {
                "summaries": {"type": "array", "maxItems": MAX_SUMMARIES,
                              "items": summary_schema()}
            }}),
        ),
        (
            "EdgeSample",
            json!({"type": "object", "additionalProperties": false,
            "required": ["requests"], "properties": {
                "requests": {"type": "array", "maxItems": super::sample::MAX_SAMPLE_REQUESTS,
                    "description": "The edge's sampled requests, newest first; replaces its last sample.",
                    "items": {"$ref": "#/components/schemas/RequestInput"}}
            }}),
        ),
    ]
}
