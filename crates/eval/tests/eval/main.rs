//! Integration tests of netacl-eval: data-driven cases, the differential property test against
//! the reference evaluator, the engine's atomic swap, and compiled-policy behaviour.

mod cases;
mod compiled;
mod differential;
mod engine;
mod geo_intervals;
mod request_lines;
mod support;
