//! Runs every file of `testdata/cases/` (format in `testdata/README.md`) through the reference
//! evaluator and the compiled evaluator; both must give the expected outcome.

use std::path::PathBuf;

use std::sync::Arc;

use netacl_eval::{reference, CompiledPolicy, Engine, ManagedIndex, Outcome, RequestInput};
use netacl_model::{Limits, ManagedList, ManagedListName, ManagedLists, RuleSet};
use serde::Deserialize;
use serde_json::Value;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CaseFile {
    #[allow(dead_code)]
    description: String,
    rules: Value,
    #[serde(default)]
    version: Option<u64>,
    /// Managed list content by name (`{"auth0.tor": ["192.0.2.0/24", ...]}`).
    #[serde(default)]
    managed_lists: serde_json::Map<String, Value>,
    cases: Vec<Case>,
}

/// The managed lists of a case file.
fn managed_lists(file: &CaseFile) -> ManagedLists {
    let mut lists = ManagedLists::new();
    for (name, items) in &file.managed_lists {
        let name = ManagedListName::parse(name).unwrap_or_else(|| panic!("unknown list {name}"));
        let list = ManagedList::from_json_items(items, name.as_str(), usize::MAX)
            .unwrap_or_else(|e| panic!("list {name}: {e}"));
        lists.set(name, Some(Arc::new(list)));
    }
    lists
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Case {
    name: String,
    request: RequestInput,
    expect: Outcome,
}

fn cases_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../testdata/cases")
}

#[test]
fn every_case_file_passes_on_reference_and_compiled() {
    let mut files: Vec<PathBuf> = std::fs::read_dir(cases_dir())
        .expect("testdata/cases exists")
        .map(|e| e.expect("readable entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    assert!(files.len() >= 8, "expected the case files, found {files:?}");
    let mut checked = 0;
    let mut failures = Vec::new();
    for path in &files {
        let text = std::fs::read_to_string(path).expect("readable case file");
        let file: CaseFile = serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("{}: not a case file: {e}", path.display()));
        let version = file.version.unwrap_or(1);
        let rules = RuleSet::from_json(&file.rules, version, &Limits::default())
            .unwrap_or_else(|e| panic!("{}: rules do not validate: {e}", path.display()));
        let lists = managed_lists(&file);
        let index = Arc::new(ManagedIndex::build(&lists));
        let policy = CompiledPolicy::compile_with_lists(&rules, &Limits::default(), &index)
            .expect("compiles");
        let engine = Engine::new();
        engine
            .publish_with_lists(&rules, &index)
            .expect("publishes");
        // A rule change keeps the lists in force.
        engine.publish(&rules).expect("publishes again");
        for case in &file.cases {
            let request = case
                .request
                .to_request()
                .unwrap_or_else(|e| panic!("{}: {}: bad request: {e}", path.display(), case.name));
            let by_reference = reference::evaluate_with_lists(&rules, &lists, &request);
            let decision = policy.evaluate(&request);
            let by_compiled = policy.outcome(&decision);
            let by_engine = engine.evaluate(&request).outcome();
            for (who, got) in [
                ("reference", &by_reference),
                ("compiled", &by_compiled),
                ("engine", &by_engine),
            ] {
                if got != &case.expect {
                    failures.push(format!(
                        "{} / {} [{who}]: expected {}, got {}",
                        path.file_name()
                            .map(|n| n.to_string_lossy())
                            .unwrap_or_default(),
                        case.name,
                        serde_json::to_string(&case.expect).unwrap_or_default(),
                        serde_json::to_string(got).unwrap_or_default()
                    ));
                }
            }
            // The streaming serialisation writes exactly the Outcome's JSON.
            assert_eq!(
                serde_json::to_string(&policy.outcome_ref(&decision)).expect("serialises"),
                serde_json::to_string(&by_compiled).expect("serialises"),
            );
            let mut written = Vec::new();
            policy
                .outcome_ref(&decision)
                .write_json(&mut written)
                .expect("writes");
            assert_eq!(
                String::from_utf8(written).expect("UTF-8"),
                serde_json::to_string(&by_compiled).expect("serialises"),
            );
            assert_eq!(decision.version(), version);
            checked += 1;
        }
    }
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert!(checked >= 80, "only {checked} cases");
}
