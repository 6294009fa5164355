#![no_main]
//! See `netacl_fuzzing::forward_auth_facts` for what this target checks.
libfuzzer_sys::fuzz_target!(|data: &[u8]| netacl_fuzzing::forward_auth_facts(data));
