#![doc = include_str!("../README.md")]
#![deny(missing_docs)]

mod proxy;
mod serve;
mod stream;

pub use proxy::{Filtered, NetaclFilter, NetaclProxy, RequestCtx, DOOR};
pub use serve::{serve, RunningPingora, ServeConfig, ServeError};
pub use stream::{begin_request, connection_info, ConnectionFacts, NetaclStream};

/// The Pingora crates this one is built with (`pingora` 0.9, features `proxy` and `rustls`).
pub use pingora;
