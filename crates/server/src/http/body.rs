//! Request bodies: the size limit, the content types, and how a form carries a nested body.
//!
//! How a form carries a nested body, and how its values are coerced: the book's "Bodies and
//! forms" chapter (`docs/src/api/bodies.md`).
//!
//! # Nesting
//!
//! JSON bodies, form keys, and form keys together with the JSON text they hold are refused
//! above [`MAX_NESTING_DEPTH`] levels of arrays and objects (400 `invalid_body` naming the
//! limit), before any value is built: a key `x[a][a]…[a]` of 50,000 levels once built a value
//! whose drop overflowed the stack.
use axum::body::Body;
use http::header::{CONTENT_LENGTH, CONTENT_TYPE};
use http::HeaderMap;
use http_body_util::{BodyExt, LengthLimitError, Limited};
use netacl_model::{parse_json, JsonTextError, MAX_NESTING_DEPTH};
use serde_json::{Map, Value};

use crate::http::error::ApiError;
use crate::http::query::Query;
use crate::AppState;

/// How a resource's form bodies map to JSON (property paths use `.` and `[]` for array items).
#[derive(Debug, Clone, Copy)]
pub(crate) struct FormShape {
    /// Properties that take `true` / `false`.
    pub(crate) booleans: &'static [&'static str],
    /// Properties that take a decimal integer.
    pub(crate) integers: &'static [&'static str],
    /// Properties that may carry their whole value as JSON text.
    pub(crate) json_fields: &'static [&'static str],
}

/// Reads a body of at most `limit` bytes and turns it into JSON. `form` is the shape of form
/// bodies, `None` when the endpoint takes JSON only. In a JSON body, a number written with a
/// zero fraction where the operation's schema says integer becomes that integer
/// (`crate::http::integral_numbers`).
pub(crate) async fn read_json_body(
    headers: &HeaderMap,
    body: Body,
    limit: usize,
    form: Option<&FormShape>,
) -> Result<Value, ApiError> {
    match (read_body(headers, body, limit, form.is_some()).await?, form) {
        (BodyText::Form(bytes), Some(shape)) => form_to_json(&bytes, shape),
        (BodyText::Form(bytes) | BodyText::Json(bytes), _) => json_value(&bytes),
    }
}

/// A body read whole, by its content type.
pub(crate) enum BodyText {
    /// `application/json` (or `+json`, or no content type).
    Json(bytes::Bytes),
    /// `application/x-www-form-urlencoded` (only where `forms` was set).
    Form(bytes::Bytes),
}

/// Reads a body of at most `limit` bytes (413 above: refused by its `Content-Length` before
/// anything is read), JSON or, when `forms` is set, a form (415 for any other content type).
pub(crate) async fn read_body(
    headers: &HeaderMap,
    body: Body,
    limit: usize,
    forms: bool,
) -> Result<BodyText, ApiError> {
    let declared = headers
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    if declared.is_some_and(|len| len > limit as u64) {
        return Err(ApiError::body_too_large(limit));
    }
    let kind = match headers.get(CONTENT_TYPE) {
        None => Kind::Json,
        Some(value) => {
            let text = value.to_str().unwrap_or("");
            let essence = text
                .split(';')
                .next()
                .unwrap_or("")
                .trim()
                .to_ascii_lowercase();
            if essence == "application/json" || essence.ends_with("+json") {
                Kind::Json
            } else if essence == "application/x-www-form-urlencoded" && forms {
                Kind::Form
            } else {
                return Err(ApiError::unsupported_media_type(text));
            }
        }
    };
    let bytes = match Limited::new(body, limit).collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(err) if err.downcast_ref::<LengthLimitError>().is_some() => {
            return Err(ApiError::body_too_large(limit))
        }
        Err(err) => {
            return Err(ApiError::malformed_body(format!(
                "The request body could not be read: {err}"
            )))
        }
    };
    Ok(match kind {
        Kind::Form => BodyText::Form(bytes),
        Kind::Json => BodyText::Json(bytes),
    })
}

/// A JSON body's value: 400 for a body of whitespace only, text that is not JSON, or nesting
/// over [`MAX_NESTING_DEPTH`].
fn json_value(bytes: &[u8]) -> Result<Value, ApiError> {
    check_not_empty(bytes)?;
    let mut value = parse_json(bytes, MAX_NESTING_DEPTH).map_err(json_text_error)?;
    // `635.0` where the operation's schema says integer is that integer.
    crate::http::integral_numbers::apply_current(&mut value);
    Ok(value)
}

/// 400 for a JSON body of whitespace only.
pub(crate) fn check_not_empty(bytes: &[u8]) -> Result<(), ApiError> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(ApiError::malformed_body("Request body is empty"));
    }
    Ok(())
}

/// The 400 for a JSON body that is not JSON, or nests too deep.
pub(crate) fn json_text_error(err: JsonTextError) -> ApiError {
    match err {
        JsonTextError::Syntax(err) => ApiError::malformed_body(format!("Invalid JSON: {err}")),
        too_deep => ApiError::malformed_body(too_deep),
    }
}

/// The body of a write endpoint that takes no query parameters: refuses any query parameter
/// first, then reads the body within the configured limit (see [`read_json_body`]).
pub(crate) async fn read_write_body(
    state: &AppState,
    raw_query: Option<&str>,
    headers: &HeaderMap,
    body: Body,
    form: Option<&FormShape>,
) -> Result<Value, ApiError> {
    Query::parse(raw_query, &[])?;
    read_json_body(headers, body, state.inner.config.body_limit, form).await
}

enum Kind {
    Json,
    Form,
}

/// Turns a form body into JSON as the module docs describe.
pub(crate) fn form_to_json(bytes: &[u8], shape: &FormShape) -> Result<Value, ApiError> {
    let pairs: Vec<(String, String)> = serde_urlencoded::from_bytes(bytes)
        .map_err(|err| ApiError::malformed_body(format!("Invalid form body: {err}")))?;
    let mut root = Value::Object(Map::new());
    for (key, value) in pairs {
        let segments = parse_key(&key)?;
        insert(&mut root, &segments, value, shape, &key)?;
    }
    Ok(root)
}

/// The 400 for a body nested deeper than [`MAX_NESTING_DEPTH`].
pub(crate) fn too_deep() -> ApiError {
    ApiError::malformed_body(JsonTextError::TooDeep {
        limit: MAX_NESTING_DEPTH,
    })
}

/// `rule[match][asns][]` → `["rule", "match", "asns", ""]`; at most [`MAX_NESTING_DEPTH`]
/// segments (each is a level of the body).
fn parse_key(key: &str) -> Result<Vec<&str>, ApiError> {
    let bad = || ApiError::malformed_body(format!("Invalid form key {key:?}"));
    let (head, mut rest) = match key.find('[') {
        Some(at) => (&key[..at], &key[at..]),
        None => (key, ""),
    };
    if head.is_empty() {
        return Err(bad());
    }
    let mut segments = vec![head];
    while !rest.is_empty() {
        if segments.len() == MAX_NESTING_DEPTH {
            return Err(too_deep());
        }
        let inner = rest.strip_prefix('[').ok_or_else(bad)?;
        let close = inner.find(']').ok_or_else(bad)?;
        let segment = &inner[..close];
        if segment.contains('[') {
            return Err(bad());
        }
        segments.push(segment);
        rest = &inner[close + 1..];
    }
    // `[]` may only come last.
    if segments[..segments.len() - 1].iter().any(|s| s.is_empty()) {
        return Err(bad());
    }
    Ok(segments)
}

/// What a bracketed segment names.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Segment<'a> {
    /// An object member.
    Name(&'a str),
    /// `[]`: a new array item (last segment only).
    Append,
    /// `[7]`: the array item at that index (decimal, no leading zero).
    Index(usize),
}

impl<'a> Segment<'a> {
    /// The segment at position `at` of a key (the head, before any bracket, is always a name).
    fn of(text: &'a str, at: usize) -> Self {
        let index = !text.is_empty()
            && text.bytes().all(|b| b.is_ascii_digit())
            && (text == "0" || !text.starts_with('0'));
        match text {
            _ if at == 0 => Segment::Name(text),
            "" => Segment::Append,
            _ if index => text.parse().map_or(Segment::Name(text), Segment::Index),
            _ => Segment::Name(text),
        }
    }
}

/// Puts `value` at the place `segments` name, creating the objects and arrays on the way: a
/// name makes an object member, `[]` appends an array item, `[N]` is the item at index `N` (the
/// next one, or one already made, which the following segments go into).
fn insert(
    root: &mut Value,
    segments: &[&str],
    value: String,
    shape: &FormShape,
    key: &str,
) -> Result<(), ApiError> {
    let conflict = || ApiError::malformed_body(format!("Conflicting form keys at {key:?}"));
    let duplicate = || ApiError::malformed_body(format!("Duplicate form key {key:?}"));
    let levels = segments.len();
    // The property path the coercion tables use: names joined by `.`, array items as `[]`.
    let mut path = String::new();
    let mut current = root;
    let mut value = Some(value);
    for (at, text) in segments.iter().enumerate() {
        let segment = Segment::of(text, at);
        // What the slot this segment names holds: a value, or the container the next segment
        // goes into.
        let child: Option<Value> = match segments.get(at + 1).map(|t| Segment::of(t, at + 1)) {
            None => None,
            Some(Segment::Name(_)) => Some(Value::Object(Map::new())),
            Some(Segment::Append | Segment::Index(_)) => Some(Value::Array(Vec::new())),
        };
        let slot = match (current, segment) {
            (Value::Object(map), Segment::Name(name)) => {
                if !path.is_empty() {
                    path.push('.');
                }
                path.push_str(name);
                match child {
                    None => {
                        if map.contains_key(name) {
                            return Err(duplicate());
                        }
                        let leaf = value.take().ok_or_else(conflict)?;
                        map.insert(name.to_owned(), coerce(&path, leaf, shape, levels)?);
                        return Ok(());
                    }
                    Some(empty) => map.entry(name.to_owned()).or_insert(empty),
                }
            }
            (Value::Array(items), Segment::Append | Segment::Index(_)) => {
                path.push_str("[]");
                let index = match segment {
                    Segment::Index(index) => index,
                    _ => items.len(),
                };
                if index > items.len() {
                    return Err(ApiError::malformed_body(format!(
                        "Form key {key:?} skips array items (indexes count from 0, in order)"
                    )));
                }
                match child {
                    None if index == items.len() => {
                        let leaf = value.take().ok_or_else(conflict)?;
                        items.push(coerce(&path, leaf, shape, levels)?);
                        return Ok(());
                    }
                    None => return Err(duplicate()),
                    Some(empty) => {
                        if index == items.len() {
                            items.push(empty);
                        }
                        &mut items[index]
                    }
                }
            }
            _ => return Err(conflict()),
        };
        current = slot;
    }
    Err(conflict())
}

/// The value of the property at `path`, `levels` deep in the body.
fn coerce(path: &str, value: String, shape: &FormShape, levels: usize) -> Result<Value, ApiError> {
    if shape.booleans.contains(&path) {
        return Ok(match value.as_str() {
            "true" => Value::Bool(true),
            "false" => Value::Bool(false),
            _ => Value::String(value),
        });
    }
    if shape.integers.contains(&path) {
        if let Ok(number) = value.parse::<i64>() {
            return Ok(Value::from(number));
        }
        return Ok(Value::String(value));
    }
    if shape.json_fields.contains(&path) {
        let room = MAX_NESTING_DEPTH.saturating_sub(levels);
        return parse_json(value.as_bytes(), room).map_err(|err| match err {
            JsonTextError::Syntax(err) => ApiError::invalid_body(format!(
                "Payload validation error: 'Invalid JSON in form field: {err}' on property {path}."
            )),
            _ => too_deep(),
        });
    }
    Ok(Value::String(value))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::network_acls::NETWORK_ACL_FORM;
    use serde_json::json;

    #[test]
    fn bracketed_keys_build_the_nested_body() {
        let body = "description=edge+block&active=true&priority=7\
                    &rule[action][block]=true&rule[scope]=tenant\
                    &rule[match][ipv4_cidrs][]=192.0.2.0%2F24&rule[match][ipv4_cidrs][]=10.0.0.1\
                    &rule[not_match][asns][]=64500";
        let value = form_to_json(body.as_bytes(), &NETWORK_ACL_FORM).expect("form");
        assert_eq!(
            value,
            json!({
                "description": "edge block", "active": true, "priority": 7,
                "rule": {"action": {"block": true}, "scope": "tenant",
                         "match": {"ipv4_cidrs": ["192.0.2.0/24", "10.0.0.1"]},
                         "not_match": {"asns": [64500]}}
            })
        );
    }

    #[test]
    fn a_rule_field_may_hold_json_text() {
        let body = "description=x&active=false&rule=%7B%22action%22%3A%7B%22log%22%3Atrue%7D%7D";
        let value = form_to_json(body.as_bytes(), &NETWORK_ACL_FORM).expect("form");
        assert_eq!(value["rule"], json!({"action": {"log": true}}));
        assert_eq!(value["active"], json!(false));
    }

    #[test]
    fn coercion_is_by_position_only() {
        let body = "description=true&priority=high&active=yes";
        let value = form_to_json(body.as_bytes(), &NETWORK_ACL_FORM).expect("form");
        assert_eq!(
            value,
            json!({"description": "true", "priority": "high", "active": "yes"})
        );
    }

    #[test]
    fn indexed_keys_build_arrays_in_order() {
        // The bracket convention of generic clients (qs, Rails, schemathesis): items by index.
        let body = "description=x&active=true&rule[action][allow]=true&rule[scope]=tenant\
                    &rule[match][asns][0]=64500&rule[match][asns][1]=64501\
                    &rule[match][hostnames][0]=a.example&rule[match][hostnames][]=b.example";
        let value = form_to_json(body.as_bytes(), &NETWORK_ACL_FORM).expect("form");
        assert_eq!(
            value["rule"]["match"],
            json!({"asns": [64500, 64501], "hostnames": ["a.example", "b.example"]})
        );
        let shape = FormShape {
            booleans: &["items[].on"],
            integers: &[],
            json_fields: &[],
        };
        let body = "items[0][name]=a&items[0][on]=true&items[1][name]=b&items[01]=x";
        assert_eq!(
            form_to_json(body.as_bytes(), &shape).err(),
            Some(ApiError::malformed_body(
                "Conflicting form keys at \"items[01]\""
            ))
        );
        let body = "items[0][name]=a&items[0][on]=true&items[1][name]=b";
        assert_eq!(
            form_to_json(body.as_bytes(), &shape).expect("form"),
            json!({"items": [{"name": "a", "on": true}, {"name": "b"}]})
        );
        // `[01]` is a name, not an index.
        let body = "m[01]=x&m[a]=y";
        assert_eq!(
            form_to_json(body.as_bytes(), &shape).expect("form"),
            json!({"m": {"01": "x", "a": "y"}})
        );
        for (body, reason) in [
            (
                "a[1]=x",
                "Form key \"a[1]\" skips array items (indexes count from 0, in order)",
            ),
            (
                "a[0]=x&a[2]=y",
                "Form key \"a[2]\" skips array items (indexes count from 0, in order)",
            ),
            ("a[0]=x&a[0]=y", "Duplicate form key \"a[0]\""),
            ("a[0]=x&a[0][b]=y", "Conflicting form keys at \"a[0][b]\""),
            ("a[0][b]=x&a[0]=y", "Duplicate form key \"a[0]\""),
            ("a[0]=x&a[b]=y", "Conflicting form keys at \"a[b]\""),
        ] {
            assert_eq!(
                form_to_json(body.as_bytes(), &shape).err(),
                Some(ApiError::malformed_body(reason)),
                "{body}"
            );
        }
    }

    #[test]
    fn malformed_and_conflicting_keys_are_refused() {
        for body in [
            "a=1&a=2",
            "rule=x&rule[scope]=tenant",
            "rule[scope]=tenant&rule=%7B%7D",
            "rule[=1",
            "[x]=1",
            "rule[][x]=1",
            "rule=not-json",
        ] {
            let err = form_to_json(body.as_bytes(), &NETWORK_ACL_FORM).expect_err(body);
            assert_eq!(err.error_code(), Some("invalid_body"), "{body}");
        }
    }
}
