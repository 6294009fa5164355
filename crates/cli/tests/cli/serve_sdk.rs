//! The official Python SDK (auth0-python 6.x), unchanged, against the real binary on loopback:
//! runs `tests/sdk/test_network_acls.py`. Without Python or the package the test is skipped
//! locally and FAILS when `CI` is set (never a silent skip in CI).

use crate::serve_support::{python_sdk_or_skip, run_sdk_script, start_for_sdk};

#[test]
fn the_python_sdk_drives_network_acls() {
    if !python_sdk_or_skip() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let server = start_for_sdk(dir.path());
    let stdout = run_sdk_script(&server, "tests/sdk/test_network_acls.py", &[]);
    assert!(stdout.contains("sdk: all checks passed"), "{stdout}");
    server.kill();
}
