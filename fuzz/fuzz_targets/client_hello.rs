#![no_main]
//! See `netacl_fuzzing::client_hello` for what this target checks.
libfuzzer_sys::fuzz_target!(|data: &[u8]| netacl_fuzzing::client_hello(data));
