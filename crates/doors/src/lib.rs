#![doc = include_str!("../README.md")]
#![deny(missing_docs)]

pub mod ext_authz;
pub mod spoe;
