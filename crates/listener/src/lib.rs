//! Every listener's protection against clients that hold connections: a global and a
//! per-client connection cap, header, idle and body timeouts, and a graceful shutdown. The
//! admin API, the console, the operator API, the edge's proxy and its metrics listener all
//! accept and serve their connections through it.
//!
//! ```
//! use std::convert::Infallible;
//! use std::time::Duration;
//!
//! use netacl_listener::{ConnectionGate, ConnectionLimits, RequestBody};
//! use tokio::io::{AsyncReadExt, AsyncWriteExt};
//!
//! # #[tokio::main]
//! # async fn main() -> std::io::Result<()> {
//! let mut limits = ConnectionLimits::default();
//! limits.max_connections = 1_000;
//! limits.header_read_timeout = Duration::from_secs(5);
//! let gate = ConnectionGate::new(limits);
//!
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
//! let addr = listener.local_addr()?;
//! let server = tokio::spawn({
//!     let gate = gate.clone();
//!     async move {
//!         // Refused connections are closed inside `accept`; `None` once the gate closes.
//!         while let Some((stream, peer, admitted)) = gate.accept(&listener).await {
//!             let service = hyper::service::service_fn(move |_: http::Request<RequestBody>| {
//!                 std::future::ready(Ok::<_, Infallible>(http::Response::new(format!("hello {}", peer.ip()))))
//!             });
//!             // A TLS listener would run its handshake first: `admitted.handshake(...)`.
//!             tokio::spawn(admitted.serve(stream, service));
//!         }
//!     }
//! });
//!
//! let mut client = tokio::net::TcpStream::connect(addr).await?;
//! client.write_all(b"GET / HTTP/1.1\r\nHost: example\r\nConnection: close\r\n\r\n").await?;
//! let mut answer = String::new();
//! client.read_to_string(&mut answer).await?;
//! assert!(answer.starts_with("HTTP/1.1 200 OK"));
//! assert!(answer.ends_with("hello 127.0.0.1"));
//!
//! // Shutdown: stop accepting, let requests in flight finish for a bounded time.
//! gate.close();
//! let _ = tokio::time::timeout(Duration::from_secs(5), gate.drained()).await;
//! server.await.expect("the accept loop ends");
//! assert_eq!(gate.stats().accepted, 1);
//! # Ok(())
//! # }
//! ```
//!
//! # Admission
//!
//! A [`ConnectionGate`] holds the open connections of one service's listeners. A new
//! connection is admitted or closed right after `accept`, before any TLS handshake or byte of
//! HTTP, at the cost of a lock and a table lookup (nothing allocated for a refused one):
//!
//! - **Per client** (IPv4 address, IPv6 /64, IPv4-mapped as IPv4; peers in
//!   [`ConnectionLimits::trusted_proxies`], the reverse proxies, are not counted): over
//!   [`max_connections_per_client`](ConnectionLimits::max_connections_per_client), that
//!   client's own longest-idle connection is closed to admit the new one; when all of its
//!   connections are serving requests, the new one is closed.
//! - **Globally**: over [`max_connections`](ConnectionLimits::max_connections), idle
//!   connections are closed to make room, as nginx reuses its keep-alive connections when it
//!   runs out: first those that have not completed a request head (fresh or half-sent), oldest
//!   first, then kept-alive ones, longest idle first; never one with a request in flight. One
//!   scan closes up to one in 256 of the cap (at most 16), so the next new connections find
//!   room without scanning. When nothing is idle, the new connection is closed (and for 20 ms
//!   further ones are closed without scanning). So thousands of idle or half-sent connections
//!   from many addresses cannot lock a client out, and a connection serving a request keeps
//!   working.
//!
//! # Timeouts
//!
//! Each connection is watched by one timer of its own (no per-request timer):
//!
//! - [`header_read_timeout`](ConnectionLimits::header_read_timeout): the first request head
//!   must arrive in full within it from the start of the connection (after a TLS handshake),
//!   and each later HTTP/1.1 head within it from its first byte. hyper's own HTTP/1 header
//!   timeout is not used: it also runs while a kept-alive connection waits for its next
//!   request, so it would close kept-alive connections at the header timeout.
//! - [`idle_timeout`](ConnectionLimits::idle_timeout): a connection with no request in flight
//!   and none begun (HTTP/1.1 keep-alive, HTTP/2 with no open stream) closes after it. A
//!   request in flight (a long poll) is never idle; its response body counts as in flight
//!   until it is sent. A client that reads nothing of its answer (its socket stays full) for
//!   the idle timeout is closed too, so a busy connection cannot be held by not reading.
//! - [`body_timeout`](ConnectionLimits::body_timeout) and
//!   [`min_body_rate`](ConnectionLimits::min_body_rate): every request body is a
//!   [`RequestBody`], which fails with [`BodyError::TimedOut`] once it is late: it must arrive
//!   within `body_timeout` of its head, plus one second for every `min_body_rate` bytes
//!   received. A trickled body fails at about `body_timeout`; a large body sent at a decent
//!   rate is never cut. The service sees the error when it reads the body (an axum handler
//!   answers its error; a proxy fails the upstream request).
//! - HTTP/2: at most [`h2_max_concurrent_streams`](ConnectionLimits::h2_max_concurrent_streams)
//!   streams per connection, and a `PING` after 30 s without traffic (the connection closes
//!   when it is not answered within 20 s), so a vanished peer does not hold a stream open.
//!
//! # Shutdown
//!
//! [`ConnectionGate::close`] stops the accept loops and closes every connection with nothing in
//! flight (HTTP/2 after a `GOAWAY`); a connection serving a request finishes it and closes.
//! [`ConnectionGate::drained`] waits for the last one: bound it with a timeout (the grace
//! period), then let the process exit.
//!
//! # Descriptors
//!
//! [`raise_descriptor_limit`] lifts the soft `RLIMIT_NOFILE` to the hard limit;
//! [`connection_budget`] is what connections may use of it, keeping a reserve for the database,
//! files and outgoing connections. Give every gate a cap that fits.
//!
//! [`ListenerStats`] counts what the gate refused, evicted and timed out, for metrics and logs.
#![deny(missing_docs)]

mod body;
mod connection;
mod gate;
mod limits;
mod serve;
mod stats;

pub use body::{BodyError, RequestBody, ResponseBody, ResponseFuture};
pub use gate::{Admitted, ConnectionGate, Refused};
pub use limits::{
    connection_budget, raise_descriptor_limit, ConnectionLimits, DEFAULT_BODY_TIMEOUT,
    DEFAULT_H2_MAX_CONCURRENT_STREAMS, DEFAULT_HEADER_READ_TIMEOUT, DEFAULT_IDLE_TIMEOUT,
    DEFAULT_MAX_CONNECTIONS, DEFAULT_MAX_CONNECTIONS_PER_CLIENT, DEFAULT_MIN_BODY_RATE,
};
pub use stats::ListenerStats;
