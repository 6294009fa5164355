//! Every input kept for the fuzz targets, fed to its target as a plain test: the crashes found
//! so far (`fuzz/regressions/TARGET/`, each minimised and fixed in the product) and the seed
//! corpus (`fuzz/corpus/TARGET/`; for `maxmind` also the project's test databases). A target
//! that panics on any of them fails this test, naming the file.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};

use netacl_fuzzing::TARGETS;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn files(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = entries
        .map(|e| e.expect("directory entry").path())
        .filter(|p| p.is_file() && p.extension().is_none_or(|e| e != "md"))
        .collect();
    files.sort();
    files
}

/// Runs `target` on each file, returning the failures (file and panic message).
fn run(name: &str, target: fn(&[u8]), inputs: &[PathBuf]) -> Vec<String> {
    let mut failures = Vec::new();
    for path in inputs {
        let data = std::fs::read(path).expect("readable input");
        if let Err(panic) = catch_unwind(AssertUnwindSafe(|| target(&data))) {
            let message = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                .unwrap_or_default();
            failures.push(format!("{name}: {}: {message}", path.display()));
        }
    }
    failures
}

#[test]
fn every_kept_crash_and_seed_passes_its_target() {
    let root = root();
    let mut failures = Vec::new();
    let mut counted = Vec::new();
    for (name, target) in TARGETS {
        let seeds = files(&root.join("fuzz/corpus").join(name));
        assert!(
            !seeds.is_empty(),
            "fuzz/corpus/{name}/ holds no seed: every target starts from a few valid inputs"
        );
        let mut inputs = seeds;
        inputs.extend(files(&root.join("fuzz/regressions").join(name)));
        if name == "maxmind" {
            inputs.extend(
                files(&root.join("testdata/mmdb"))
                    .into_iter()
                    .filter(|p| p.extension().is_some_and(|e| e == "mmdb")),
            );
        }
        counted.push(format!("{name}: {}", inputs.len()));
        failures.extend(run(name, target, &inputs));
    }
    eprintln!("inputs per target: {}", counted.join(", "));
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Every folder under `fuzz/regressions/` and `fuzz/corpus/` names a target, and every target
/// has a file in `fuzz/fuzz_targets/` and a `[[bin]]` in `fuzz/Cargo.toml`: an input kept for a
/// renamed target would otherwise silently stop being run.
#[test]
fn folders_and_fuzz_targets_match_the_target_list() {
    let root = root();
    let names: Vec<&str> = TARGETS.iter().map(|(name, _)| *name).collect();
    for folder in ["fuzz/regressions", "fuzz/corpus"] {
        for entry in std::fs::read_dir(root.join(folder)).expect(folder) {
            let entry = entry.expect("entry");
            if entry.path().is_dir() {
                let name = entry.file_name().into_string().expect("utf-8");
                assert!(
                    names.contains(&name.as_str()),
                    "{folder}/{name} is no target"
                );
            }
        }
    }
    let manifest = std::fs::read_to_string(root.join("fuzz/Cargo.toml")).expect("fuzz/Cargo.toml");
    for name in &names {
        let source = root.join(format!("fuzz/fuzz_targets/{name}.rs"));
        let text = std::fs::read_to_string(&source).expect("a fuzz target file");
        assert!(
            text.contains(&format!("netacl_fuzzing::{name}")),
            "{} does not call netacl_fuzzing::{name}",
            source.display()
        );
        assert!(
            manifest.contains(&format!("name = \"{name}\"")),
            "fuzz/Cargo.toml has no [[bin]] {name}"
        );
    }
}

/// The crash inputs of issue 11 that reach these targets, written out here so that they are
/// checked even if a regression folder were emptied: the branding URL that panicked on a UTF-8
/// boundary, a form key nested 50,000 levels, a JSON array as a request line.
#[test]
fn issue_11_inputs() {
    netacl_fuzzing::bodies(r#"{"logo_url": "https:/é"}"#.as_bytes());
    netacl_fuzzing::bodies(r#"{"font": {"url": "https:/é"}}"#.as_bytes());
    let deep = format!("x{}=1", "[a]".repeat(50_000));
    netacl_fuzzing::form_body(deep.as_bytes());
    netacl_fuzzing::request_line(br#"["management",null,"198.51.100.7"]"#);
    netacl_fuzzing::paths(b"/%%361pi/v2/users");
    netacl_fuzzing::paths(b"/api/v2//../users");
    netacl_fuzzing::forwarded("\x00café".as_bytes());
    netacl_fuzzing::forwarded(b"\x01for=\"");
}
