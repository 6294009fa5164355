//! Beyond the public API, under `/_netacl/v1` (a prefix the public API can never use): dry runs,
//! the live policy's status, the long-poll watch the edge follows, and the OpenAPI document.
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::RawQuery;
use axum::response::{IntoResponse, Response};
use http::{HeaderMap, StatusCode};
use netacl_eval::ManagedIndex;
use netacl_model::{ManagedList, ManagedListName, ManagedLists, RuleSet, ValidationError};
use serde_json::{json, Value};

use crate::auth::Principal;
use crate::config::{DEFAULT_WATCH_TIMEOUT_MS, MAX_WATCH_TIMEOUT_MS};
use crate::http::body::read_write_body;
use crate::http::error::{json_response, ApiError, JSON_UTF8};
use crate::http::guard::{Authorized, ReadNetworkAcls};
use crate::http::query::Query;
use crate::tenant::policy::Policy;
use crate::tenant::{AclSnapshot, KEY_TRANSIT_PURPOSE};
use crate::{AppState, TlsTransport, KEY_MATERIAL_SCOPE};
use axum::extract::ConnectInfo;
use netacl_secrets::transit::TransitPublicKey;
use netacl_secrets::SecretContext;
use std::net::SocketAddr;

/// `POST /_netacl/v1/dry-run`: `{"request": {...}, "network_acls": [...]?, "managed_lists":
/// {NAME: [...]}?}` → `{"version", "source", "outcome"}`. Lists given replace, for this dry run,
/// the content in force for their names; `source` says where the rules came from.
pub(crate) async fn dry_run(
    _: Authorized<ReadNetworkAcls>,
    state: AppState,
    RawQuery(raw): RawQuery,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let permit = state.expensive()?;
    let value = read_write_body(&state, raw.as_deref(), &headers, body, None).await?;
    let config = &state.inner.config;
    let Value::Object(mut fields) = value else {
        return Err(ValidationError::new("", "Expected type object").into());
    };
    if let Some(unknown) = fields
        .keys()
        .find(|k| !["request", "network_acls", "managed_lists"].contains(&k.as_str()))
    {
        return Err(ValidationError::new(
            "",
            format!("Additional properties not allowed: {unknown}"),
        )
        .into());
    }
    let request = fields
        .remove("request")
        .ok_or_else(|| ValidationError::new("", "Missing required property: request"))?;
    let live = state.inner.tenant.policy();
    let lists = match fields.remove("managed_lists") {
        None => None,
        Some(lists) => Some(lists_from_body(
            &lists,
            live.managed_index().lists(),
            config.limits.max_entries_per_set,
        )?),
    };
    let (policy, source) = match (fields.remove("network_acls"), lists) {
        (None, None) => (live, "live"),
        (acls, lists) => {
            let source = if acls.is_some() { "body" } else { "live" };
            let rules = match &acls {
                Some(acls) => {
                    crate::resources::rule_sets::rule_set_from_body(acls, &config.limits)?
                }
                None => {
                    let snapshot = state.inner.tenant.snapshot();
                    RuleSet {
                        version: snapshot.version,
                        acls: snapshot.ordered.iter().map(|s| s.acl.clone()).collect(),
                    }
                }
            };
            let limits = config.limits;
            let index = Arc::clone(live.managed_index());
            let policy = tokio::task::spawn_blocking(move || {
                // The permit goes with the work: released when the compile ends.
                let _permit = permit;
                let index = match lists {
                    Some(lists) => Arc::new(ManagedIndex::build(&lists)),
                    None => index,
                };
                Policy::compile(&rules, &limits, &index)
            })
            .await
            .map_err(|_| ApiError::internal())?
            .map_err(|err| {
                ValidationError::new("network_acls", format!("Cannot compile: {err}"))
            })?;
            (Arc::new(policy), source)
        }
    };
    let outcome = policy
        .dry_run(&request)
        .map_err(|err| ApiError::from(ValidationError::new("request", err.to_string())))?;
    Ok(json_response(
        StatusCode::OK,
        &json!({"version": policy.version(), "source": source, "outcome": outcome}),
    ))
}

/// `{NAME: [items]}` over the lists in force: the names given get that content.
fn lists_from_body(
    value: &Value,
    live: &ManagedLists,
    max_items: usize,
) -> Result<ManagedLists, ApiError> {
    let Value::Object(given) = value else {
        return Err(ValidationError::new("managed_lists", "Expected type object").into());
    };
    let mut lists = live.clone();
    for (name, items) in given {
        let Some(parsed) = ManagedListName::parse(name) else {
            return Err(ValidationError::new(
                "managed_lists",
                format!("Additional properties not allowed: {name}"),
            )
            .into());
        };
        let list =
            ManagedList::from_json_items(items, &format!("managed_lists.{name}"), max_items)?;
        lists.set(parsed, Some(Arc::new(list)));
    }
    Ok(lists)
}

/// `GET /_netacl/v1/status`: the live policy's figures.
pub(crate) async fn status(
    _: Authorized<ReadNetworkAcls>,
    state: AppState,
    RawQuery(raw): RawQuery,
) -> Result<Response, ApiError> {
    Query::parse(raw.as_deref(), &[])?;
    let tenant = &state.inner.tenant;
    let policy = tenant.policy();
    let snapshot = tenant.snapshot();
    let lists: Vec<Value> = ManagedListName::ALL
        .into_iter()
        .map(|name| crate::resources::managed_lists::describe(&snapshot, name))
        .collect();
    Ok(json_response(
        StatusCode::OK,
        &json!({
            "tenant": tenant.id.as_str(),
            "version": snapshot.version,
            "network_acls": snapshot.ordered.len(),
            "managed_lists": lists,
            "policy": policy.stats(),
        }),
    ))
}

/// The `lists` parameter of the watch: `NAME:DIGEST` pairs, comma-separated (empty: none).
fn held_lists(text: &str) -> Result<Vec<(ManagedListName, String)>, ApiError> {
    let mut held = Vec::new();
    for pair in text.split(',').filter(|p| !p.is_empty()) {
        let parsed = pair.split_once(':').and_then(|(name, digest)| {
            let digest_ok = !digest.is_empty()
                && digest.len() <= 64
                && digest.bytes().all(|b| b.is_ascii_hexdigit());
            ManagedListName::parse(name)
                .filter(|_| digest_ok)
                .map(|name| (name, digest.to_owned()))
        });
        match parsed {
            Some(entry) => held.push(entry),
            None => {
                return Err(ApiError::invalid_query(
                    format!("Expected NAME:DIGEST pairs, found {pair:?}"),
                    Some("lists"),
                ))
            }
        }
    }
    held.sort();
    Ok(held)
}

/// `(name, digest)` of every list in force, sorted.
fn lists_in_force(snapshot: &AclSnapshot) -> Vec<(ManagedListName, String)> {
    ManagedListName::ALL
        .into_iter()
        .filter_map(|name| {
            snapshot
                .lists
                .effective(name)
                .map(|e| (name, e.list.digest().to_owned()))
        })
        .collect()
}

/// The `network_acl_keys` member of a watch answer (as a one-member JSON object): the keys the
/// snapshot's active rules name, each sealed to `edge_key` (HPKE, bound to the tenant and the
/// key id), when the caller holds [`KEY_MATERIAL_SCOPE`] and the request came over TLS or from
/// a loopback address; otherwise `network_acl_keys_withheld` says why (`scope`, `transport`).
fn sealed_keys(
    state: &AppState,
    parts: &http::request::Parts,
    snapshot: &AclSnapshot,
    edge_key: &TransitPublicKey,
) -> Result<Vec<u8>, ApiError> {
    let holds_scope = parts
        .extensions
        .get::<Principal>()
        .is_some_and(|p| p.has_scope(KEY_MATERIAL_SCOPE));
    let withheld = if !holds_scope {
        Some("scope")
    } else if !key_transport_allowed(parts) {
        Some("transport")
    } else {
        None
    };
    if let Some(reason) = withheld {
        return Ok(json!({"network_acl_keys_withheld": reason})
            .to_string()
            .into_bytes());
    }
    let tenant = state.inner.tenant.id.as_str();
    let keys = seal_network_acl_keys(tenant, snapshot, edge_key)?;
    Ok(json!({"tenant": tenant, "network_acl_keys": keys})
        .to_string()
        .into_bytes())
}

/// Whether key material may travel on this request's connection: TLS, or a loopback peer (a
/// warning is logged when not).
pub(crate) fn key_transport_allowed(parts: &http::request::Parts) -> bool {
    let tls = parts.extensions.get::<TlsTransport>().is_some();
    let loopback = parts
        .extensions
        .get::<ConnectInfo<SocketAddr>>()
        .is_some_and(|ConnectInfo(peer)| canonical_loopback(peer.ip()));
    if !(tls || loopback) {
        tracing::warn!(
            "network ACL key material withheld from a watch over plain HTTP from off loopback \
             (serve the admin API over TLS for remote edges)"
        );
    }
    tls || loopback
}

/// The one sealing path of network ACL key material to an edge (the tenant watch and the
/// operator's tenants watch): `[{"id", "sealed"}]`, the keys the snapshot's active rules name,
/// each sealed to `edge_key` (HPKE, bound to the tenant and the key id).
pub(crate) fn seal_network_acl_keys(
    tenant: &str,
    snapshot: &AclSnapshot,
    edge_key: &TransitPublicKey,
) -> Result<Vec<Value>, ApiError> {
    let mut keys = Vec::new();
    for key in snapshot
        .keys
        .named_by(snapshot.ordered.iter().map(|s| &s.acl))
    {
        let id = key.record.id.as_str();
        let context = SecretContext::new(tenant, KEY_TRANSIT_PURPOSE, id);
        let sealed = edge_key
            .seal(&context, key.material.expose())
            .map_err(|err| {
                tracing::error!(error = %err, key_id = id, "cannot seal a network ACL key to an edge");
                ApiError::internal()
            })?;
        keys.push(json!({"id": id, "sealed": sealed}));
    }
    Ok(keys)
}

fn canonical_loopback(ip: std::net::IpAddr) -> bool {
    match ip {
        std::net::IpAddr::V6(v6) => v6
            .to_ipv4_mapped()
            .map_or(v6.is_loopback(), |v4| v4.is_loopback()),
        std::net::IpAddr::V4(v4) => v4.is_loopback(),
    }
}

/// Every list in force in `snapshot` (`name`, `source`, `version`, `digest`), with its `items`
/// unless `held(name, digest)` says the caller holds that content.
pub(crate) fn lists_json(
    snapshot: &AclSnapshot,
    held: impl Fn(ManagedListName, &str) -> bool,
) -> Vec<Value> {
    ManagedListName::ALL
        .into_iter()
        .filter_map(|name| {
            let entry = snapshot.lists.effective(name)?;
            let mut out = json!({
                "name": name.as_str(),
                "source": entry.source.as_str(),
                "version": entry.version,
                "digest": entry.list.digest(),
            });
            if !held(name, entry.list.digest()) {
                out["items"] = entry.list.items_json();
            }
            Some(out)
        })
        .collect()
}

/// `GET /_netacl/v1/network-acls/watch?since=V&timeout_ms=N`: 200 with the whole set as soon as
/// its version differs from `since`, or 304 after `timeout_ms` without a change.
pub(crate) async fn watch(
    _: Authorized<ReadNetworkAcls>,
    state: AppState,
    parts: http::request::Parts,
    RawQuery(raw): RawQuery,
) -> Result<Response, ApiError> {
    let query = Query::parse(raw.as_deref(), &["since", "timeout_ms", "lists", "keys"])?;
    let since = query.integer("since", 0, u64::MAX)?;
    let held = query.string("lists").map(held_lists).transpose()?;
    let edge_key = query
        .string("keys")
        .map(|text| {
            TransitPublicKey::parse(text).ok_or_else(|| {
                ApiError::invalid_query(
                    "Expected an X25519 public key in base64url (43 characters)".to_owned(),
                    Some("keys"),
                )
            })
        })
        .transpose()?;
    let timeout_ms = query
        .integer("timeout_ms", 0, MAX_WATCH_TIMEOUT_MS)?
        .unwrap_or(DEFAULT_WATCH_TIMEOUT_MS);
    let tenant = &state.inner.tenant;
    // Subscribe before reading, so a change in between is not missed.
    let mut installed = tenant.subscribe();
    if let Some(since) = since {
        let current = tenant.snapshot();
        let lists_differ = held
            .as_ref()
            .is_some_and(|held| *held != lists_in_force(&current));
        if current.version == since && !lists_differ {
            let waited = tokio::time::timeout(
                Duration::from_millis(timeout_ms),
                installed.wait_for(|rules| rules.version != since),
            )
            .await;
            match waited {
                Ok(Ok(_)) => {}
                Ok(Err(_)) => return Err(ApiError::unavailable()),
                Err(_) => return Ok(StatusCode::NOT_MODIFIED.into_response()),
            }
        }
    }
    let snapshot = tenant.snapshot();
    let array = snapshot.json_array(0, snapshot.ordered.len());
    let mut body = Vec::with_capacity(array.len() + 48);
    body.extend_from_slice(
        format!("{{\"version\":{},\"network_acls\":", snapshot.version).as_bytes(),
    );
    body.extend_from_slice(&array);
    if let Some(held) = &held {
        // Every list in force; its items only where the caller does not hold that digest.
        let lists = lists_json(&snapshot, |name, digest| {
            held.iter().any(|(n, d)| *n == name && d == digest)
        });
        body.extend_from_slice(b",\"managed_lists\":");
        body.extend_from_slice(Value::Array(lists).to_string().as_bytes());
    }
    if let Some(edge_key) = &edge_key {
        let field = sealed_keys(&state, &parts, &snapshot, edge_key)?;
        body.push(b',');
        body.extend_from_slice(&field[1..field.len() - 1]);
    }
    body.push(b'}');
    let mut response = (StatusCode::OK, body).into_response();
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static(JSON_UTF8),
    );
    Ok(response)
}
