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

pub(crate) const PAGING: &[(&str, &str, &str)] = &[
    ("page", "integer", "Page index, from 0."),
    (
        "per_page",
        "integer",
        "Records per page, 0..100 (default 50).",
    ),
    (
        "include_totals",
        "boolean",
        "Answer an envelope with start, limit and total.",
    ),
];
