//! A results database written by the ratelab of commit 61f461b (tests/fixtures/: one run
//! of every verb and kind, made by make-db-61f461b.sh) opened by this binary: every run
//! must show, export and report, its exported document and items must be what that
//! binary exported, and what users read must match the golden files.

mod common;

use std::path::{Path, PathBuf};

use common::{golden, ratelab};
use serde_json::Value;

/// The runs in the fixture database.
const RUNS: std::ops::RangeInclusive<i64> = 1..=15;
/// Pairs of runs compared: storage before and after, two net runs, cpu and profile,
/// a scenario and a profile, readdir with itself.
const COMPARED: [(i64, i64); 5] = [(1, 15), (7, 8), (9, 14), (12, 14), (5, 5)];

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// A copy of the fixture database in a fresh folder: opening a database migrates it,
/// and the committed file must stay as the old binary wrote it.
fn database() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("create a temporary folder");
    let db = dir.path().join("runs-61f461b.db");
    std::fs::copy(fixtures().join("runs-61f461b.db"), &db).expect("copy the fixture");
    (dir, db)
}

/// `results ARGS... --db DB`, which must succeed; returns stdout.
fn results(db: &Path, args: &[&str]) -> String {
    let output = ratelab()
        .arg("results")
        .args(args)
        .arg("--db")
        .arg(db)
        .output()
        .expect("start ratelab");
    assert!(
        output.status.success(),
        "results {args:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).expect("stdout is UTF-8")
}

fn old_export(name: &str) -> String {
    std::fs::read_to_string(fixtures().join("runs-61f461b").join(name))
        .unwrap_or_else(|e| panic!("cannot read fixture {name}: {e}"))
}

#[test]
fn every_old_run_exports_the_document_and_items_the_old_binary_exported() {
    let (_dir, db) = database();
    for id in RUNS {
        let id_text = id.to_string();
        let now: Value =
            serde_json::from_str(&results(&db, &["export", &id_text, "--format", "json"]))
                .expect("export json is JSON");
        let then: Value =
            serde_json::from_str(&old_export(&format!("run-{id}.json"))).expect("fixture JSON");
        for (index, (a, b)) in then["workloads"]
            .as_array()
            .unwrap()
            .iter()
            .zip(now["workloads"].as_array().unwrap())
            .enumerate()
        {
            assert_eq!(
                a["items"],
                b["items"],
                "run {id}, workload {}: items",
                index + 1
            );
            assert_eq!(
                a["summary"],
                b["summary"],
                "run {id}, workload {}: summary",
                index + 1
            );
            assert_eq!(
                a["params"],
                b["params"],
                "run {id}, workload {}: params",
                index + 1
            );
        }
        assert_eq!(then, now, "run {id}: the exported document");
        for (format, suffix) in [("csv", "csv"), ("series", "series.csv")] {
            assert_eq!(
                results(&db, &["export", &id_text, "--format", format]),
                old_export(&format!("run-{id}.{suffix}")),
                "run {id}: export --format {format}"
            );
        }
    }
}

#[test]
fn every_old_run_shows_as_the_golden_files_say() {
    let (_dir, db) = database();
    for id in RUNS {
        let id_text = id.to_string();
        golden::check(
            &format!("runs-61f461b/run-{id}.txt"),
            &results(&db, &["show", &id_text]),
        );
        golden::check(
            &format!("runs-61f461b/run-{id}.md"),
            &results(&db, &["export", &id_text, "--format", "markdown"]),
        );
    }
}

#[test]
fn every_old_run_has_a_report_page() {
    let (_dir, db) = database();
    for id in RUNS {
        let page = results(&db, &["report", &id.to_string()]);
        let doc: Value =
            serde_json::from_str(&old_export(&format!("run-{id}.json"))).expect("fixture JSON");
        assert!(page.starts_with("<!DOCTYPE html>"), "run {id}: {page:.200}");
        assert!(page.contains("<svg"), "run {id} has no chart");
        for workload in doc["workloads"].as_array().unwrap() {
            let kind = workload["kind"].as_str().unwrap();
            assert!(
                page.contains(&format!("class=\"workload {kind}\"")),
                "run {id}: no section for its {kind} workload"
            );
        }
    }
}

#[test]
fn old_runs_compare_and_list_as_the_golden_files_say() {
    let (_dir, db) = database();
    for (a, b) in COMPARED {
        let (a, b) = (a.to_string(), b.to_string());
        golden::check(
            &format!("runs-61f461b/compare-{a}-{b}.txt"),
            &results(&db, &["compare", &a, &b]),
        );
        golden::check(
            &format!("runs-61f461b/compare-{a}-{b}.json"),
            &results(&db, &["compare", &a, &b, "--json"]),
        );
    }
    golden::check("runs-61f461b/list.json", &results(&db, &["list", "--json"]));
}
