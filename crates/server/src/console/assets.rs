//! The console's files, compiled into the binary (no CDN, no second server: it works offline).

use axum::response::{IntoResponse, Response};
use http::{header, HeaderValue};

/// Every file: name, content type, bytes.
const FILES: &[(&str, &str, &str)] = &[
    (
        "index.html",
        "text/html; charset=utf-8",
        include_str!("assets/index.html"),
    ),
    (
        "console.js",
        "text/javascript; charset=utf-8",
        include_str!("assets/console.js"),
    ),
    (
        "console.css",
        "text/css; charset=utf-8",
        include_str!("assets/console.css"),
    ),
    // Change safety (history and rollback, findings, impact preview).
    (
        "findings.js",
        "text/javascript; charset=utf-8",
        include_str!("assets/findings.js"),
    ),
    (
        "history.js",
        "text/javascript; charset=utf-8",
        include_str!("assets/history.js"),
    ),
    (
        "preview.js",
        "text/javascript; charset=utf-8",
        include_str!("assets/preview.js"),
    ),
    (
        "safety.css",
        "text/css; charset=utf-8",
        include_str!("assets/safety.css"),
    ),
    // The overview, per-rule counts, keys and managed lists (README, "The console").
    (
        "counts.js",
        "text/javascript; charset=utf-8",
        include_str!("assets/counts.js"),
    ),
    (
        "overview.js",
        "text/javascript; charset=utf-8",
        include_str!("assets/overview.js"),
    ),
    (
        "keys.js",
        "text/javascript; charset=utf-8",
        include_str!("assets/keys.js"),
    ),
    (
        "lists.js",
        "text/javascript; charset=utf-8",
        include_str!("assets/lists.js"),
    ),
];

/// The answer for the file `name`, or `None` when there is no such file.
pub(super) fn respond(name: &str) -> Option<Response> {
    let (_, content_type, body) = FILES.iter().find(|(n, _, _)| *n == name)?;
    let mut response = (*body).into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    // Revalidated on every load: a new binary serves new files at once.
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    Some(response)
}
