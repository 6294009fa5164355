#![no_main]
//! See `netacl_fuzzing::spoe_frames` for what this target checks.
libfuzzer_sys::fuzz_target!(|data: &[u8]| netacl_fuzzing::spoe_frames(data));
