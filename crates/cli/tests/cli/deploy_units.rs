//! The shipped systemd units (`deploy/systemd/`), read by systemd's own tools: each verifies
//! without a warning (`systemd-analyze verify`: every directive known, the binary there), its
//! hardening keeps systemd's exposure score at 2.0 or below (`systemd-analyze security
//! --offline=yes --threshold=20`), and every `NETACL_*` variable it names is one `netacl serve`
//! or `netacl edge --help` lists. systemd cannot start a unit here (it is not PID 1), so the
//! units are not run. Without `systemd-analyze` the test is skipped locally and fails when `CI`
//! is set.
use std::path::Path;
use std::process::Command;

use crate::cluster_support::BIN;

fn analyze(args: &[&str], unit: &Path) -> (bool, String) {
    let out = Command::new("systemd-analyze")
        .args(args)
        .arg(unit)
        .output()
        .expect("systemd-analyze");
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), said)
}

#[test]
fn the_systemd_units_verify_and_are_hardened() {
    if Command::new("systemd-analyze")
        .arg("--version")
        .output()
        .is_err()
    {
        assert!(
            std::env::var_os("CI").is_none(),
            "systemd-analyze (Debian's systemd) is needed under CI"
        );
        eprintln!("skipped: systemd-analyze is not installed");
        return;
    }
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let dir = tempfile::tempdir().unwrap();
    for (unit, command) in [("netacl-serve", "serve"), ("netacl-edge", "edge")] {
        let text =
            std::fs::read_to_string(repo.join(format!("deploy/systemd/{unit}.service"))).unwrap();
        assert!(text.contains("ExecStart=/usr/local/bin/netacl "));
        // The binary where the unit expects it: this build's.
        let text = text.replace("/usr/local/bin/netacl", BIN);
        let path = dir.path().join(format!("{unit}.service"));
        std::fs::write(&path, &text).unwrap();

        let (ok, said) = analyze(&["verify", "--man=no"], &path);
        assert!(ok && said.trim().is_empty(), "{unit}: {said}");
        let (ok, said) = analyze(&["security", "--offline=yes", "--threshold=20"], &path);
        assert!(ok, "{unit}: exposure above 2.0:\n{said}");
        assert!(said.contains("Overall exposure level"), "{said}");

        let help = Command::new(BIN)
            .args([command, "--help"])
            .output()
            .unwrap()
            .stdout;
        let help = String::from_utf8_lossy(&help);
        for name in text
            .split(|c: char| !(c.is_ascii_uppercase() || c == '_'))
            .filter(|w| w.starts_with("NETACL_") && !w.ends_with('_'))
        {
            assert!(
                help.contains(&format!("env: {name}")),
                "{unit} names {name}, which `netacl {command} --help` does not list"
            );
        }
    }
    // The checks can fail: a misspelt directive is reported.
    let misspelt = dir.path().join("misspelt.service");
    let text = std::fs::read_to_string(dir.path().join("netacl-edge.service")).unwrap();
    std::fs::write(&misspelt, text.replace("ProtectClock=", "ProtectClok=")).unwrap();
    let (_, said) = analyze(&["verify", "--man=no"], &misspelt);
    assert!(said.contains("ProtectClok"), "{said}");
}
