//! HAProxy's SPOE agent: SPOP 2.0 over TCP (`netacl edge --spoe-listen ADDR`).
//!
//! HAProxy's SPOE filter sends one NOTIFY per request carrying the message
//! [`MESSAGE_NAME`]; the agent decides it with the edge's [`Enforcer`](netacl_edge::Enforcer)
//! and answers with an ACK setting `txn.netacl.action`, `txn.netacl.rule`,
//! `txn.netacl.location` (see [`serve_spoe`]). Frames are read and written with the `spop`
//! crate's codec; payload fragmentation is not announced, and a fragmented frame is refused.
mod agent;
mod message;

pub use agent::{decode_frame, serve_spoe, Refusal, SpoeConfig, DEFAULT_MAX_FRAME_SIZE};
pub use message::{MessageError, SpoeRequest, MESSAGE_NAME};
