//! `GET /api/v2/connections` (`read:connections`): the directory's connections (what
//! `netacl directory import` loaded), `{id, name, strategy}` each, in id order; checkpoint
//! (`from`, `take`: `{connections, next?}`) or offset paging (a bare array or
//! `{connections, start, limit, total}`); filters `strategy` and `name` (exact), and a field
//! projection (`fields`, `include_fields`).
use axum::extract::RawQuery;
use axum::response::Response;
use http::StatusCode;
use netacl_model::Connection;

use crate::http::cursor::Family;
use crate::http::error::{json_response, ApiError};
use crate::http::guard::{Authorized, ReadConnections};
use crate::http::paging::{self, Paging};
use crate::http::query::Query;
use crate::resources::groups::Projection;
use crate::AppState;

/// The fields of a connection, the only names `fields` may list.
pub(crate) const CONNECTION_FIELDS: [&str; 3] = ["id", "name", "strategy"];

/// `GET /connections`.
pub(crate) async fn list(
    _: Authorized<ReadConnections>,
    state: AppState,
    RawQuery(raw): RawQuery,
) -> Result<Response, ApiError> {
    let mut allowed = paging::ALL_PARAMETERS.to_vec();
    allowed.extend(["strategy", "name", "fields", "include_fields"]);
    let query = Query::parse(raw.as_deref(), &allowed)?;
    let paging = Paging::from_query(&query)?;
    let projection = Projection::from_query(&query, &CONNECTION_FIELDS)?;
    let tenant = &state.inner.tenant;
    let mut connections: Vec<Connection> = tenant
        .store()
        .connections(&tenant.id)
        .await?
        .into_iter()
        .filter(|c| query.string("strategy").is_none_or(|s| s == c.strategy))
        .filter(|c| query.string("name").is_none_or(|n| n == c.name))
        .collect();
    connections.sort_by(|a, b| a.id.cmp(&b.id));
    let render = |c: &Connection| projection.apply(c.to_json());
    let body = match paging {
        Paging::Offset(page) => {
            let items = connections
                .iter()
                .skip(usize::try_from(page.offset()).unwrap_or(usize::MAX))
                .take(usize::try_from(page.per_page).unwrap_or(usize::MAX))
                .map(render)
                .collect();
            page.answer("connections", items, connections.len() as u64)
        }
        Paging::Checkpoint { from, take } => {
            let cursors = state.cursors();
            let after = from
                .map(|text| paging::open_checkpoint(&cursors, Family::Connections, &text))
                .transpose()?
                .map(paging::decode_text)
                .transpose()?;
            let rest: Vec<&Connection> = connections
                .iter()
                .filter(|c| after.as_deref().is_none_or(|a| c.id.as_str() > a))
                .collect();
            let served = &rest[..rest.len().min(take as usize)];
            let next = (rest.len() > served.len())
                .then(|| served.last().map(|c| c.id.as_bytes()))
                .flatten();
            let items = served.iter().map(|c| render(c)).collect();
            paging::checkpoint_answer(&cursors, Family::Connections, "connections", items, next)
        }
    };
    Ok(json_response(StatusCode::OK, &body))
}
