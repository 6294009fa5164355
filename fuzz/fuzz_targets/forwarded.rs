#![no_main]
//! See `netacl_fuzzing::forwarded` for what this target checks.
libfuzzer_sys::fuzz_target!(|data: &[u8]| netacl_fuzzing::forwarded(data));
