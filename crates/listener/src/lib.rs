#![doc = include_str!("../README.md")]
#![deny(missing_docs)]

mod body;
mod connection;
mod duration;
mod gate;
mod limits;
mod serve;
mod stats;

pub use body::{BodyError, RequestBody, ResponseBody, ResponseFuture};
pub use duration::parse_duration;
pub use gate::{Admitted, ConnectionGate, Refused, RequestGuard, RequestTracker};
pub use limits::{
    connection_budget, raise_descriptor_limit, ConnectionLimits, DEFAULT_BODY_TIMEOUT,
    DEFAULT_H2_MAX_CONCURRENT_STREAMS, DEFAULT_HEADER_READ_TIMEOUT, DEFAULT_IDLE_TIMEOUT,
    DEFAULT_MAX_CONNECTIONS, DEFAULT_MAX_CONNECTIONS_PER_CLIENT, DEFAULT_MIN_BODY_RATE,
};
pub use stats::ListenerStats;
