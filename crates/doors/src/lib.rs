//! Front doors: the ways a proxy that operators already run asks `netacl edge` for a decision,
//! each an enforcement point like the edge's own proxy, deciding through the same
//! [`Enforcer`](netacl_edge::Enforcer) (policy sources, per-rule counts, traffic sample,
//! access events).
//!
//! - [`forward_auth`]: HTTP forward authentication, as nginx `auth_request`, Caddy
//!   `forward_auth`, Traefik ForwardAuth and Envoy's HTTP `ext_authz` mode call it
//!   (`netacl edge --forward-auth-listen ADDR`).
//!
//! ```
//! use std::sync::Arc;
//! use netacl_doors::forward_auth::{read_facts, FactsOptions};
//! use netacl_edge::{ClientAddrResolver, ConnectionInfo, Enforcer, ForwardedHeader, TrustedProxies};
//!
//! // An enforcer with no rule: every request gets no decision (allowed).
//! let trusted = TrustedProxies::parse(["127.0.0.1"]).unwrap();
//! let addrs = ClientAddrResolver::new(trusted, ForwardedHeader::XForwardedFor);
//! let enforcer = Enforcer::new(Arc::new(netacl_eval::Engine::new()), addrs);
//!
//! // What nginx sends for a client 203.0.113.7 asking for GET app.example/login?next=/.
//! let mut headers = http::HeaderMap::new();
//! headers.insert("x-forwarded-method", "GET".parse().unwrap());
//! headers.insert("x-forwarded-uri", "/login?next=/".parse().unwrap());
//! headers.insert("x-forwarded-host", "app.example".parse().unwrap());
//! headers.insert("x-forwarded-for", "203.0.113.7".parse().unwrap());
//! let peer = "127.0.0.1:40000".parse().unwrap();
//! let facts = read_facts(
//!     &http::Method::GET, &"/auth".parse().unwrap(), &headers,
//!     &FactsOptions::default(), enforcer.addrs().trusts(peer.ip()),
//! ).unwrap();
//! assert_eq!(facts.uri.path(), "/login");
//! let headers = facts.decision_headers(headers);
//! let conn = facts.connection(peer);
//! let decision = enforcer.decide_request(Some(&conn), &facts.method, &facts.uri, &headers);
//! assert_eq!(decision.client_ip, Some("203.0.113.7".parse().unwrap()));
//! ```
#![deny(missing_docs)]

pub mod forward_auth;
mod metrics;

pub use metrics::{DoorAnswer, DoorCounters};
