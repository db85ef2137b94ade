//! Run identity and `results import`: every run carries a UUID and its machine; a
//! database or run documents import once however often they are imported, the file
//! imported is never written, and runs of other machines compare like local ones.

mod common;

use std::path::Path;

use common::{ratelab, results, run_json, stored_runs};
use serde_json::Value;

/// A quick complete run stored in `db`.
fn cpu_run(db: &Path) -> Value {
    run_json(
        ratelab()
            .args(common::QUICK_CPU)
            .args(["--json", "-q", "--db"])
            .arg(db),
    )
}

/// `ratelab results import FILE --db DB`, which must exit `code`; its stdout and stderr.
fn import(db: &Path, file: &Path, code: i32) -> (String, String) {
    let output = ratelab()
        .args(["results", "import"])
        .arg(file)
        .arg("--db")
        .arg(db)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr).to_string();
    assert_eq!(output.status.code(), Some(code), "{stderr}");
    (String::from_utf8_lossy(&output.stdout).to_string(), stderr)
}

#[test]
fn every_run_carries_a_uuid_and_its_machine() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("a.db");
    let doc = cpu_run(&db);
    let uuid = doc["run_uuid"].as_str().expect("a run_uuid");
    let parsed = uuid::Uuid::parse_str(uuid).unwrap();
    assert_eq!(parsed.get_version_num(), 7, "{uuid}");
    if Path::new("/etc/machine-id").exists() {
        let id = doc["machine"]["machine_id"].as_str().unwrap();
        assert_eq!(id.len(), 32, "{id}");
        let raw = std::fs::read_to_string("/etc/machine-id").unwrap();
        assert!(
            !id.contains(raw.trim()),
            "the machine id itself must not be shown"
        );
    }
    let listed = stored_runs(&db);
    assert_eq!(listed[0]["run_uuid"], uuid);
    assert_eq!(listed[0]["machine"], doc["machine"]["hostname"]);
    assert!(results(&db, &["list"]).contains("machine"));
}

#[test]
fn a_database_imported_twice_adds_its_runs_once_and_is_not_written() {
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("source.db");
    cpu_run(&source);
    cpu_run(&source);
    let before = std::fs::read(&source).unwrap();
    let db = dir.path().join("team.db");
    cpu_run(&db);
    let (said, _) = import(&db, &source, 0);
    assert!(
        said.ends_with(&format!("2 of 2 runs imported from {}\n", source.display())),
        "{said}"
    );
    let (said, _) = import(&db, &source, 0);
    assert!(said.contains("0 of 2 runs imported"), "{said}");
    assert_eq!(said.matches("already here").count(), 2, "{said}");
    assert_eq!(
        std::fs::read(&source).unwrap(),
        before,
        "the source was written"
    );
    let listed = stored_runs(&db);
    assert_eq!(listed.as_array().unwrap().len(), 3);
    // The imported runs keep their identity: the same UUIDs as in the source.
    let uuids = |runs: &Value| -> Vec<String> {
        let mut out: Vec<String> = runs
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["run_uuid"].as_str().unwrap().to_string())
            .collect();
        out.sort();
        out
    };
    let here = uuids(&listed);
    for uuid in uuids(&stored_runs(&source)) {
        assert!(here.contains(&uuid), "{uuid} not in {here:?}");
    }
    // An old database (no UUIDs yet) imports once too.
    let old = dir.path().join("old.db");
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/runs-61f461b.db"),
        &old,
    )
    .unwrap();
    let (said, _) = import(&db, &old, 0);
    assert!(said.contains("15 of 15 runs imported"), "{said}");
    let (said, _) = import(&db, &old, 0);
    assert!(said.contains("0 of 15 runs imported"), "{said}");
}

#[test]
fn documents_of_another_machine_import_once_and_compare_across_machines() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("team.db");
    let local = cpu_run(&db);
    let mut other = local.clone();
    other["machine"]["hostname"] = "lab-2".into();
    other["machine"]["machine_id"] = "0123456789abcdef0123456789abcdef".into();
    other["run_uuid"] = uuid::Uuid::now_v7().to_string().into();
    let file = dir.path().join("lab-2.json");
    std::fs::write(&file, serde_json::to_string(&vec![other]).unwrap()).unwrap();
    let (said, _) = import(&db, &file, 0);
    assert!(said.contains("on lab-2 as run 2"), "{said}");
    let (said, _) = import(&db, &file, 0);
    assert!(said.contains("already here"), "{said}");
    let listed = results(&db, &["list", "--json"]);
    let listed: Value = serde_json::from_str(&listed).unwrap();
    assert_eq!(listed[0]["machine"], "lab-2");
    let shown = results(&db, &["show", "2", "--json"]);
    let shown: Value = serde_json::from_str(&shown).unwrap();
    assert_eq!(
        shown["machine"]["machine_id"],
        "0123456789abcdef0123456789abcdef"
    );
    let compared = results(&db, &["compare", "1", "2"]);
    assert!(compared.contains("lab-2"), "{compared}");
}

#[test]
fn what_is_not_a_store_or_a_run_is_refused_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("team.db");
    cpu_run(&db);
    let before = results(&db, &["list", "--json"]);
    let (_, said) = import(&db, &dir.path().join("missing.json"), 2);
    assert!(
        said.contains("cannot read") && said.contains("missing.json"),
        "{said}"
    );
    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, "{\"x\": 1}").unwrap();
    let (_, said) = import(&db, &bad, 2);
    assert!(
        said.contains("document 1 is not a ratelab run document"),
        "{said}"
    );
    let text = dir.path().join("notes.txt");
    std::fs::write(&text, "hello").unwrap();
    let (_, said) = import(&db, &text, 2);
    assert!(
        said.contains("neither a results database nor a JSON run document"),
        "{said}"
    );
    assert_eq!(results(&db, &["list", "--json"]), before);
}
