#![doc = include_str!("../README.md")]
#![deny(missing_docs)]

mod door;
pub mod ext_authz;
pub mod forward_auth;
mod metrics;
#[cfg(test)]
mod signing_fixture;
pub mod spoe;

pub use door::{DoorError, RunningDoor};
pub use metrics::{DoorAnswer, DoorCounters};
