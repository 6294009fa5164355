#![doc = include_str!("../README.md")]
#![deny(missing_docs)]

mod compile;
mod engine;
mod geo;
mod geo_table;
mod hash;
mod lines;
mod managed;
mod memo;
mod packed;
mod pages;
mod policy;
mod postings;
mod range;
pub mod reference;
mod request;
mod search;
pub mod synthetic;
mod units;
mod useragent;

pub use compile::CompileError;
pub use engine::{Engine, Evaluation};
pub use geo::{GeoAnswer, GeoIntervalStats, GeoIntervals, GeoIntervalsBuilder, GeoValues};
pub use geo_table::{GeoDatabase, GeoLookup, GeoTable, GeoTableBuilder, GeoTableStats};
pub use managed::{ManagedIndex, ManagedListStats};
pub use policy::{
    signal_name, CompiledPolicy, Decision, EmptyListRule, IndexKind, IndexStats, ManagedListUse,
    Outcome, OutcomeRef, PolicyStats, RuleIndex, SignalSet, Verdict,
};
pub use request::{Request, RequestError, RequestInput, RequestInputRef};
pub use useragent::UserAgentStats;
