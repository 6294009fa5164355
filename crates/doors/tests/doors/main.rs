//! The front doors over real sockets: the SPOE agent driven frame by frame and by the real
//! HAProxy with the shipped configuration (plain and TLS), and the ext_authz service called as
//! Envoy calls it (a gRPC client of Envoy's own protos).
mod ext_authz;
mod haproxy;
mod haproxy_tls;
mod spoe;

use netacl_edge::{ClientAddrResolver, Enforcer, ForwardedHeader, TrustedProxies};
use netacl_eval::Engine;
use netacl_model::AclId;
use serde_json::{json, Value};

/// A stored network ACL record: rule `n` at `priority`, tenant-wide.
pub(crate) fn rule(n: u128, priority: u64, action: Value, criteria: Value) -> Value {
    let mut rule = json!({"action": action, "scope": "tenant"});
    if let Value::Object(c) = criteria {
        for (k, v) in c {
            rule[k] = v;
        }
    }
    json!({
        "id": AclId::from_random(n).to_string(), "description": "t", "active": true,
        "priority": priority, "rule": rule,
        "created_at": "2026-01-01T00:00:00.000Z", "updated_at": "2026-01-01T00:00:00.000Z"
    })
}

/// An enforcer with no rule yet and no trusted proxy (a door's own peer is the client it names).
pub(crate) fn enforcer() -> Enforcer {
    Enforcer::new(
        std::sync::Arc::new(Engine::new()),
        ClientAddrResolver::new(TrustedProxies::default(), ForwardedHeader::XForwardedFor),
    )
}
