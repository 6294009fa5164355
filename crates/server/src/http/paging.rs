//! The two ways the list endpoints of organizations, connections, clients and client grants
//! page, and their answers:
//!
//! - **offset**: `page` (from 0), `per_page` (0..100, default 50), `include_totals`: a bare
//!   array, or with `include_totals=true` the envelope `{<key>: [...], start, limit, total}`;
//!   a page past the end is an empty array.
//! - **checkpoint** (where the endpoint has it): `take` (1..100, default 50) and `from` (the
//!   `next` of the previous page): `{<key>: [...], next?}`, `next` absent on the last page. The
//!   checkpoint is opaque (base64url without padding) and bound to the tenant and the list
//!   ([`crate::http::cursor`]); anything this tenant's list did not hand out is a 400.
//!   `include_totals` is accepted and changes nothing (the official SDKs always send it).
//!
//! A request naming `from` or `take` pages by checkpoint; naming them together with `page` or
//! `per_page` is a 400.
use serde_json::{Map, Value};

use crate::http::cursor::{Cursors, Family};
use crate::http::error::ApiError;
use crate::http::query::Query;

/// `per_page` and `take` default.
pub(crate) const DEFAULT_PAGE_SIZE: u64 = 50;
/// The largest `per_page` and `take`.
pub(crate) const MAX_PAGE_SIZE: u64 = 100;

/// The offset parameters.
pub(crate) const OFFSET_PARAMETERS: [&str; 3] = ["page", "per_page", "include_totals"];
/// The offset and checkpoint parameters.
pub(crate) const ALL_PARAMETERS: [&str; 5] = ["page", "per_page", "include_totals", "from", "take"];

/// An offset page: `page`, `per_page`, `include_totals`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct OffsetPage {
    pub(crate) page: u64,
    pub(crate) per_page: u64,
    pub(crate) include_totals: bool,
}

impl OffsetPage {
    /// Reads `page` (0..2^32), `per_page` (0..100, default 50), `include_totals`.
    pub(crate) fn from_query(query: &Query<'_>) -> Result<Self, ApiError> {
        Ok(Self {
            page: query.integer("page", 0, u64::from(u32::MAX))?.unwrap_or(0),
            per_page: query
                .integer("per_page", 0, MAX_PAGE_SIZE)?
                .unwrap_or(DEFAULT_PAGE_SIZE),
            include_totals: query.boolean("include_totals")?.unwrap_or(false),
        })
    }

    /// The position of the page's first record (`page * per_page`, saturating).
    pub(crate) fn offset(&self) -> u64 {
        self.page.saturating_mul(self.per_page)
    }

    /// The answer: the bare array, or with `include_totals` the envelope under `key`.
    pub(crate) fn answer(&self, key: &str, items: Vec<Value>, total: u64) -> Value {
        if !self.include_totals {
            return Value::Array(items);
        }
        let mut body = Map::new();
        body.insert(key.into(), Value::Array(items));
        body.insert("start".into(), self.offset().into());
        body.insert("limit".into(), self.per_page.into());
        body.insert("total".into(), total.into());
        Value::Object(body)
    }
}

/// How one list request of an endpoint with both kinds of paging pages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Paging {
    /// `page`, `per_page`, `include_totals`.
    Offset(OffsetPage),
    /// `from` (as given: [`open_checkpoint`] reads it), `take`.
    Checkpoint { from: Option<String>, take: u32 },
}

impl Paging {
    /// Reads the paging parameters of `query` (which declares [`ALL_PARAMETERS`]).
    pub(crate) fn from_query(query: &Query<'_>) -> Result<Self, ApiError> {
        let offset = OffsetPage::from_query(query)?;
        let take = query.integer("take", 1, MAX_PAGE_SIZE)?;
        let from = query.string("from");
        if take.is_none() && from.is_none() {
            return Ok(Self::Offset(offset));
        }
        if query.string("page").is_some() || query.string("per_page").is_some() {
            return Err(ApiError::invalid_query(
                "page and per_page cannot be combined with from and take",
                None,
            ));
        }
        Ok(Self::Checkpoint {
            from: from.map(str::to_owned),
            take: u32::try_from(take.unwrap_or(DEFAULT_PAGE_SIZE)).unwrap_or(u32::MAX),
        })
    }
}

/// The answer of a checkpoint page: `{key: [...], next?}`, `next` the checkpoint of position
/// `next` in `family`.
pub(crate) fn checkpoint_answer(
    cursors: &Cursors<'_>,
    family: Family,
    key: &str,
    items: Vec<Value>,
    next: Option<&[u8]>,
) -> Value {
    let mut body = Map::new();
    body.insert(key.into(), Value::Array(items));
    if let Some(next) = next {
        body.insert("next".into(), cursors.seal(family, next).into());
    }
    Value::Object(body)
}

/// The position a `from` checkpoint of `family` names; 400 `invalid_query_string` for text
/// this tenant's list did not hand out (its shape is checked again by whoever reads the
/// position).
pub(crate) fn open_checkpoint(
    cursors: &Cursors<'_>,
    family: Family,
    text: &str,
) -> Result<Vec<u8>, ApiError> {
    cursors.open(family, text, invalid_checkpoint)
}

/// 400 for a `from` this server did not hand out.
pub(crate) fn invalid_checkpoint() -> ApiError {
    ApiError::invalid_query(
        "Invalid checkpoint: pass the `next` value of the previous page",
        Some("from"),
    )
}

/// A text checkpoint position (a client id, a connection id) read back.
pub(crate) fn decode_text(position: Vec<u8>) -> Result<String, ApiError> {
    String::from_utf8(position).map_err(|_| invalid_checkpoint())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paging(raw: &str) -> Result<Paging, ApiError> {
        Paging::from_query(&Query::parse(Some(raw), &ALL_PARAMETERS)?)
    }

    #[test]
    fn modes_defaults_and_bounds() {
        assert_eq!(
            paging("").expect("empty"),
            Paging::Offset(OffsetPage {
                page: 0,
                per_page: 50,
                include_totals: false
            })
        );
        assert_eq!(
            paging("include_totals=true&take=50").expect("sdk"),
            Paging::Checkpoint {
                from: None,
                take: 50
            }
        );
        assert_eq!(
            paging("from=YWJj").expect("from"),
            Paging::Checkpoint {
                from: Some("YWJj".to_owned()),
                take: 50
            }
        );
        for bad in [
            "take=0",
            "take=101",
            "take=x",
            "per_page=101",
            "page=-1",
            "page=1&take=5",
            "per_page=5&from=YWJj",
        ] {
            let err = paging(bad).expect_err(bad);
            assert_eq!(err.error_code(), Some("invalid_query_string"), "{bad}");
        }
        let offset = |raw| OffsetPage::from_query(&Query::parse(Some(raw), &OFFSET_PARAMETERS)?);
        assert_eq!(
            offset("page=2&per_page=0&include_totals=true").expect("offset"),
            OffsetPage {
                page: 2,
                per_page: 0,
                include_totals: true
            }
        );
        // Without checkpoint paging, from/take are unknown parameters.
        assert!(offset("take=5").is_err());
    }

    #[test]
    fn answers() {
        let items = vec![Value::from(1), Value::from(2)];
        let page = |page, per_page, include_totals| OffsetPage {
            page,
            per_page,
            include_totals,
        };
        assert_eq!(
            page(3, 2, true).answer("things", items.clone(), 9),
            serde_json::json!({"things": [1, 2], "start": 6, "limit": 2, "total": 9})
        );
        assert_eq!(
            page(0, 2, false).answer("things", items.clone(), 9),
            serde_json::json!([1, 2])
        );
        assert_eq!(page(u64::MAX, 100, true).offset(), u64::MAX);
        let kek = netacl_secrets::Kek::from_bytes(&[1u8; 32]).expect("kek");
        let cursors = Cursors::new(&kek, "acme");
        let answer = checkpoint_answer(&cursors, Family::Connections, "things", items, Some(b"x"));
        assert_eq!(answer["things"], serde_json::json!([1, 2]));
        let next = answer["next"].as_str().expect("next");
        assert_eq!(
            open_checkpoint(&cursors, Family::Connections, next).expect("open"),
            b"x"
        );
        // Checkpoints of another tenant or list, or no checkpoint at all: refused alike.
        for (cursors, family, text) in [
            (Cursors::new(&kek, "beta"), Family::Connections, next),
            (Cursors::new(&kek, "acme"), Family::ClientGrants, next),
            (Cursors::new(&kek, "acme"), Family::Connections, "eA"),
            (Cursors::new(&kek, "acme"), Family::Connections, ""),
            (Cursors::new(&kek, "acme"), Family::Connections, "a+b"),
            (Cursors::new(&kek, "acme"), Family::Connections, "AAAA="),
        ] {
            let err = open_checkpoint(&cursors, family, text).expect_err(text);
            assert_eq!(err.error_code(), Some("invalid_query_string"), "{text}");
            assert!(err.message().contains("checkpoint"), "{}", err.message());
        }
        assert_eq!(
            checkpoint_answer(&cursors, Family::Connections, "things", vec![], None),
            serde_json::json!({"things": []})
        );
    }
}
