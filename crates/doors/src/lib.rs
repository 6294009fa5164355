#![doc = include_str!("../README.md")]
#![deny(missing_docs)]

pub mod ext_authz;
pub mod forward_auth;
mod metrics;
pub mod spoe;

pub use metrics::{DoorAnswer, DoorCounters};
