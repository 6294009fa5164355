#![no_main]
//! See `netacl_fuzzing::bodies` for what this target checks.
libfuzzer_sys::fuzz_target!(|data: &[u8]| netacl_fuzzing::bodies(data));
