//! The tenant's API clients and their grants, read-only, as the deploy CLI's organizations
//! handler reads them (to turn client ids into names):
//!
//! - `GET /clients` (`read:clients`): the registered clients, by client id, offset-paged; never a
//!   secret or its hash. A client has no name of its own here: its `name` is its client id.
//! - `GET /client-grants` (`read:client_grants`): one grant per client, on the management API
//!   audience, with the client's scopes; checkpoint- or offset-paged; filters `audience`,
//!   `client_id`. A grant's id (`cgr_` + 16 letters and digits) is derived from its client id,
//!   so it is the same on every node and across restarts.
//! - `GET /organizations/{id}/client-grants` (`read:organization_client_grants`): netacl keeps
//!   no grants of organizations, so the list of an existing organization is empty; an unknown
//!   organization is a 404.
use axum::extract::RawQuery;
use axum::response::Response;
use http::StatusCode;
use netacl_store::StoredClient;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use crate::http::cursor::Family;
use crate::http::error::{json_response, ApiError};
use crate::http::guard::{Authorized, ReadClientGrants, ReadClients, ReadOrganizationClientGrants};
use crate::http::paging::{self, OffsetPage, Paging};
use crate::http::query::Query;
use crate::resources::groups::Projection;
use crate::resources::organizations::OrganizationPath;
use crate::AppState;

/// The fields of a client, the only names `fields` may list.
pub(crate) const CLIENT_FIELDS: [&str; 5] = [
    "client_id",
    "name",
    "app_type",
    "grant_types",
    "is_first_party",
];

const BASE62: &[u8; 62] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/// A client as `GET /clients` answers it.
fn client_json(client: &StoredClient) -> Value {
    json!({
        "client_id": client.client_id,
        "name": client.client_id,
        "app_type": "non_interactive",
        "grant_types": ["client_credentials"],
        "is_first_party": true,
    })
}

/// The id of a client's grant: `cgr_` and 16 base-62 digits of the SHA-256 of its client id.
pub(crate) fn grant_id(client_id: &str) -> String {
    let digest = Sha256::digest(client_id.as_bytes());
    let mut bits = u128::from_be_bytes(digest[..16].try_into().unwrap_or([0; 16]));
    let mut id = String::with_capacity(20);
    id.push_str("cgr_");
    for _ in 0..16 {
        id.push(BASE62[(bits % 62) as usize] as char);
        bits /= 62;
    }
    id
}

fn grant_json(client: &StoredClient, audience: &str) -> Value {
    json!({
        "id": grant_id(&client.client_id),
        "client_id": client.client_id,
        "audience": audience,
        "scope": client.scopes,
        "allow_any_organization": false,
        "is_system": false,
        "subject_type": "client",
    })
}

/// The tenant's clients, ordered by client id.
async fn stored_clients(state: &AppState) -> Result<Vec<StoredClient>, ApiError> {
    let tenant = &state.inner.tenant;
    let mut clients = tenant.store().clients(&tenant.id).await?;
    clients.sort_by(|a, b| a.client_id.cmp(&b.client_id));
    Ok(clients)
}

/// `GET /clients?page&per_page&include_totals&fields&include_fields`: a bare array or
/// `{clients, start, limit, total}`.
pub(crate) async fn list_clients(
    _: Authorized<ReadClients>,
    state: AppState,
    RawQuery(raw): RawQuery,
) -> Result<Response, ApiError> {
    let query = Query::parse(
        raw.as_deref(),
        &[
            "page",
            "per_page",
            "include_totals",
            "fields",
            "include_fields",
        ],
    )?;
    let page = OffsetPage::from_query(&query)?;
    let projection = Projection::from_query(&query, &CLIENT_FIELDS)?;
    let clients = stored_clients(&state).await?;
    let items = clients
        .iter()
        .skip(usize::try_from(page.offset()).unwrap_or(usize::MAX))
        .take(usize::try_from(page.per_page).unwrap_or(usize::MAX))
        .map(|c| projection.apply(client_json(c)))
        .collect();
    let body = page.answer("clients", items, clients.len() as u64);
    Ok(json_response(StatusCode::OK, &body))
}

/// `GET /client-grants?audience&client_id` with checkpoint (`from`, `take`: `{client_grants,
/// next?}`) or offset paging (a bare array or `{client_grants, start, limit, total}`).
pub(crate) async fn list_grants(
    _: Authorized<ReadClientGrants>,
    state: AppState,
    RawQuery(raw): RawQuery,
) -> Result<Response, ApiError> {
    let mut allowed = paging::ALL_PARAMETERS.to_vec();
    allowed.extend(["audience", "client_id"]);
    let query = Query::parse(raw.as_deref(), &allowed)?;
    let paging = Paging::from_query(&query)?;
    let audience = state.inner.authority.management_audience().to_owned();
    let clients: Vec<StoredClient> = stored_clients(&state)
        .await?
        .into_iter()
        .filter(|_| query.string("audience").is_none_or(|a| a == audience))
        .filter(|c| query.string("client_id").is_none_or(|id| id == c.client_id))
        .collect();
    let body = match paging {
        Paging::Offset(page) => {
            let items = clients
                .iter()
                .skip(usize::try_from(page.offset()).unwrap_or(usize::MAX))
                .take(usize::try_from(page.per_page).unwrap_or(usize::MAX))
                .map(|c| grant_json(c, &audience))
                .collect();
            page.answer("client_grants", items, clients.len() as u64)
        }
        Paging::Checkpoint { from, take } => {
            let cursors = state.cursors();
            let after = from
                .map(|text| paging::open_checkpoint(&cursors, Family::ClientGrants, &text))
                .transpose()?
                .map(paging::decode_text)
                .transpose()?;
            let rest: Vec<&StoredClient> = clients
                .iter()
                .filter(|c| after.as_deref().is_none_or(|a| c.client_id.as_str() > a))
                .collect();
            let served = &rest[..rest.len().min(take as usize)];
            let next = (rest.len() > served.len())
                .then(|| served.last().map(|c| c.client_id.as_bytes()))
                .flatten();
            let items = served.iter().map(|c| grant_json(c, &audience)).collect();
            paging::checkpoint_answer(&cursors, Family::ClientGrants, "client_grants", items, next)
        }
    };
    Ok(json_response(StatusCode::OK, &body))
}

/// `GET /organizations/{id}/client-grants` (`audience`, `client_id`, `grant_ids`, `page`,
/// `per_page`, `include_totals`): always empty for an existing organization (a bare array or
/// `{client_grants: [], start, limit, total: 0}`); 404 `inexistent_organization` otherwise.
pub(crate) async fn list_organization_grants(
    _: Authorized<ReadOrganizationClientGrants>,
    OrganizationPath(id): OrganizationPath,
    state: AppState,
    RawQuery(raw): RawQuery,
) -> Result<Response, ApiError> {
    let query = Query::parse(
        raw.as_deref(),
        &[
            "page",
            "per_page",
            "include_totals",
            "audience",
            "client_id",
            "grant_ids",
        ],
    )?;
    let page = OffsetPage::from_query(&query)?;
    let tenant = &state.inner.tenant;
    tenant.store().organization(&tenant.id, &id).await?;
    Ok(json_response(
        StatusCode::OK,
        &page.answer("client_grants", Vec::new(), 0),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grant_ids_are_stable_and_distinct() {
        let id = grant_id("deploy-cli");
        assert_eq!(id, grant_id("deploy-cli"));
        assert_ne!(id, grant_id("deploy-clj"));
        assert!(
            id.len() == 20
                && id.starts_with("cgr_")
                && id[4..].bytes().all(|c| c.is_ascii_alphanumeric()),
            "{id}"
        );
    }
}
