//! One entry of the route table, and the query parameters that many list operations share
//! (`routes` and its families of operations read both; neither reads the other's table).
use axum::routing::MethodRouter;

use crate::openapi::Operation;

/// One entry of the route table: an operation as the OpenAPI document describes it, and the
/// handler that answers it.
pub(crate) struct Route {
    pub(crate) operation: Operation,
    pub(crate) route: fn() -> MethodRouter,
}

/// One declared query parameter: name, JSON schema type, description.
pub(crate) type QueryParam = (&'static str, &'static str, &'static str);

/// Offset paging's three parameters, shared by the list operations that page by offset only.
pub(crate) const PAGE: QueryParam = ("page", "integer", "Page index, from 0.");
pub(crate) const PER_PAGE: QueryParam = (
    "per_page",
    "integer",
    "Records per page, 0..100 (default 50).",
);
pub(crate) const INCLUDE_TOTALS: QueryParam = (
    "include_totals",
    "boolean",
    "Answer an envelope with start, limit and total.",
);

/// `include_fields` beside a `fields` list.
pub(crate) const INCLUDE_FIELDS: QueryParam = (
    "include_fields",
    "boolean",
    "true (default): answer only the listed fields; false: all but them.",
);

/// Offset paging alone.
pub(crate) const PAGING: &[QueryParam] = &[PAGE, PER_PAGE, INCLUDE_TOTALS];

/// Offset paging beside checkpoint paging (`from`/`take`), which takes precedence.
pub(crate) const CHECKPOINT_PAGING: &[QueryParam] = &[
    OFFSET_PAGE,
    OFFSET_PER_PAGE,
    OFFSET_INCLUDE_TOTALS,
    FROM,
    TAKE,
];
pub(crate) const OFFSET_PAGE: QueryParam =
    ("page", "integer", "Page index, from 0 (offset paging).");
pub(crate) const OFFSET_PER_PAGE: QueryParam = (
    "per_page",
    "integer",
    "Records per page, 0..100 (default 50; offset paging).",
);
pub(crate) const OFFSET_INCLUDE_TOTALS: QueryParam = (
    "include_totals",
    "boolean",
    "Offset paging: answer an envelope with start, limit and total. Ignored with from/take.",
);
pub(crate) const FROM: QueryParam = (
    "from",
    "string",
    "Checkpoint paging: the `next` of the previous page.",
);
pub(crate) const TAKE: QueryParam = (
    "take",
    "integer",
    "Checkpoint paging: records per page, 1..100 (default 50).",
);
