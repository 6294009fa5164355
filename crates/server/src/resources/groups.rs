//! `GET /api/v2/groups/{id}/members`: cursor-paged, with a field projection.
use axum::extract::{FromRequestParts, Path, RawQuery};
use axum::response::Response;
use http::request::Parts;
use http::StatusCode;
use netacl_model::{GroupId, GROUP_ID_PATTERN};
use serde_json::{Map, Value};

use crate::http::cursor::{Family, DEFAULT_TAKE, MAX_TAKE};
use crate::http::error::{json_response, ApiError};
use crate::http::guard::{Authorized, ReadGroupMembers};
use crate::http::query::Query;
use crate::AppState;

/// The fields a member has, the only names `fields` may list.
pub(crate) const MEMBER_FIELDS: [&str; 5] =
    ["id", "member_type", "type", "connection_id", "created_at"];

/// The longest `fields` value.
pub(crate) const MAX_FIELDS_LEN: usize = 256;

/// The `fields` values [`Projection::from_query`] takes (up to [`MAX_FIELDS_LEN`] characters),
/// as a regular expression: comma-separated names among `known`, each with optional
/// whitespace around it (trimmed as `str::trim` does), empty pieces allowed.
pub(crate) fn fields_pattern(known: &[&str]) -> String {
    let space = "[\\t-\\r \\u0085\\u00A0\\u1680\\u2000-\\u200A\\u2028\\u2029\\u202F\\u205F\\u3000]";
    let piece = format!("{space}*(?:(?:{}){space}*)?", known.join("|"));
    format!("^{piece}(?:,{piece})*$")
}

/// A group id from the path: percent-decoded, then checked (400 `invalid_uri`).
pub(crate) struct GroupPath(GroupId);

impl<S: Send + Sync> FromRequestParts<S> for GroupPath {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let Path(raw) = Path::<String>::from_request_parts(parts, state)
            .await
            .map_err(|err| ApiError::invalid_uri(err.body_text(), "id"))?;
        GroupId::parse(&raw).map(GroupPath).ok_or_else(|| {
            ApiError::invalid_uri(
                format!("String does not match pattern {GROUP_ID_PATTERN}"),
                "id",
            )
        })
    }
}

/// Which fields of each record to answer.
pub(crate) struct Projection {
    fields: Vec<String>,
    include: bool,
}

impl Projection {
    /// From `fields` (comma-separated names among `known`, at most 256 characters; empty: all)
    /// and `include_fields` (default true).
    pub(crate) fn from_query(query: &Query<'_>, known: &[&str]) -> Result<Self, ApiError> {
        let include = query.boolean("include_fields")?.unwrap_or(true);
        let text = query.string("fields").unwrap_or("");
        let len = text.chars().count();
        if len > MAX_FIELDS_LEN {
            return Err(ApiError::invalid_query(
                format!("String is too long ({len} chars), maximum {MAX_FIELDS_LEN}"),
                Some("fields"),
            ));
        }
        let mut fields = Vec::new();
        for name in text.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            if !known.contains(&name) {
                return Err(ApiError::invalid_query(
                    format!(
                        "Unknown field {name:?}; the fields are {}",
                        known.join(", ")
                    ),
                    Some("fields"),
                ));
            }
            fields.push(name.to_owned());
        }
        Ok(Self { fields, include })
    }

    /// The record with only the chosen fields.
    pub(crate) fn apply(&self, record: Value) -> Value {
        if self.fields.is_empty() {
            return record;
        }
        match record {
            Value::Object(map) => Value::Object(
                map.into_iter()
                    .filter(|(k, _)| self.fields.contains(k) == self.include)
                    .collect::<Map<String, Value>>(),
            ),
            other => other,
        }
    }
}

/// `GET /groups/{id}/members?fields&include_fields&from&take`.
pub(crate) async fn members(
    _: Authorized<ReadGroupMembers>,
    GroupPath(group): GroupPath,
    state: AppState,
    RawQuery(raw): RawQuery,
) -> Result<Response, ApiError> {
    let query = Query::parse(
        raw.as_deref(),
        &["fields", "include_fields", "from", "take"],
    )?;
    let projection = Projection::from_query(&query, &MEMBER_FIELDS)?;
    let take = query.integer("take", 1, MAX_TAKE)?.unwrap_or(DEFAULT_TAKE);
    let cursors = state.cursors();
    let after = query
        .string("from")
        .map(|text| cursors.decode_seq(Family::GroupMembers, text))
        .transpose()?;
    let tenant = &state.inner.tenant;
    let page = tenant
        .store()
        .group_members(&tenant.id, &group, after, take as u32)
        .await?
        .ok_or_else(|| {
            ApiError::new(
                StatusCode::NOT_FOUND,
                Some("inexistent_group"),
                "The group does not exist.",
            )
        })?;
    let members: Vec<Value> = page
        .items
        .into_iter()
        .map(|m| projection.apply(m))
        .collect();
    let mut body = Map::new();
    body.insert("members".into(), Value::Array(members));
    if let Some(next) = page.next_after {
        body.insert(
            "next".into(),
            cursors.encode_seq(Family::GroupMembers, next).into(),
        );
    }
    Ok(json_response(StatusCode::OK, &Value::Object(body)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The document's pattern takes exactly the `fields` values the projection takes.
    #[test]
    fn the_fields_pattern_is_the_projection() {
        let pattern = regex::Regex::new(&fields_pattern(&MEMBER_FIELDS)).expect("pattern");
        let pieces = [
            "id",
            "type",
            "member_type",
            "created_at",
            "connection_id",
            "ids",
            "Type",
            "",
            " ",
            "\u{a0}",
            "\u{3000}",
            "\t",
            ",",
            "x",
            "i d",
            "\u{200b}",
            "\u{85}",
        ];
        let mut state = 0x2545_F491_4F6C_DD1Du64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let (mut accepted, mut refused) = (0, 0);
        for _ in 0..100_000 {
            let count = next() % 6;
            let text: String = (0..count)
                .map(|_| pieces[(next() % pieces.len() as u64) as usize])
                .collect();
            let raw = format!("fields={}&include_fields=true", encode(&text));
            let query = Query::parse(Some(&raw), &["fields", "include_fields"]).expect("query");
            let projected = Projection::from_query(&query, &MEMBER_FIELDS).is_ok();
            let documented = text.chars().count() <= MAX_FIELDS_LEN && pattern.is_match(&text);
            assert_eq!(documented, projected, "{text:?}");
            if projected {
                accepted += 1;
            } else {
                refused += 1;
            }
        }
        assert!(accepted > 1000 && refused > 1000, "{accepted} {refused}");
    }

    fn encode(text: &str) -> String {
        text.bytes().map(|b| format!("%{b:02X}")).collect()
    }
}
