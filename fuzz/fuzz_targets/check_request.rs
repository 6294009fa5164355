#![no_main]
//! See `netacl_fuzzing::check_request` for what this target checks.
libfuzzer_sys::fuzz_target!(|data: &[u8]| netacl_fuzzing::check_request(data));
