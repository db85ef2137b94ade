//! A results database written by the ratelab of commit 61f461b (tests/fixtures/: one run
//! of every verb and kind, made by make-db-61f461b.sh) opened by this binary: every run
//! must show, export and report, its exported document and items must be what that
//! binary exported, and what users read must match the golden files.

mod common;

use std::path::{Path, PathBuf};

use common::{golden, ratelab, results};
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

/// Whether two documents hold the same figures: equal, but for numbers that differ in
/// their last bit. The binary of 61f461b read stored numbers back with serde_json's fast
/// float parser, which can miss by one unit in the last place; this one reads them back
/// exactly (`float_roundtrip`), so its exports are the stored figures to the bit.
fn same_figures(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) if x != y => {
            let (x, y) = (x.as_f64().unwrap(), y.as_f64().unwrap());
            (x - y).abs() <= 4.0 * f64::EPSILON * x.abs().max(y.abs())
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| same_figures(x, y))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(key, x)| y.get(key).is_some_and(|y| same_figures(x, y)))
        }
        _ => a == b,
    }
}

/// Whether two CSV texts hold the same cells, numbers (also inside cells that hold
/// JSON) compared as [`same_figures`] does.
fn same_csv(a: &str, b: &str) -> bool {
    let rows = |text: &str| -> Vec<Vec<String>> {
        csv::ReaderBuilder::new()
            .has_headers(false)
            .flexible(true)
            .from_reader(text.as_bytes())
            .records()
            .map(|r| r.expect("CSV").iter().map(str::to_string).collect())
            .collect()
    };
    // A cell may hold several JSON values joined by ";" (a cpu test's threads).
    let cell = |text: &str| -> Value {
        text.split(';')
            .map(|part| {
                serde_json::from_str(part).unwrap_or_else(|_| Value::String(part.to_string()))
            })
            .collect()
    };
    let (a, b) = (rows(a), rows(b));
    a.len() == b.len()
        && a.iter().zip(&b).all(|(x, y)| {
            x.len() == y.len()
                && x.iter()
                    .zip(y)
                    .all(|(x, y)| same_figures(&cell(x), &cell(y)))
        })
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
            for part in ["items", "summary", "params", "context", "series"] {
                assert!(
                    same_figures(&a[part], &b[part]),
                    "run {id}, workload {}: {part}:\n{:#}\nagainst\n{:#}",
                    index + 1,
                    a[part],
                    b[part]
                );
            }
        }
        assert!(same_figures(&then, &now), "run {id}: the exported document");
        for (format, suffix) in [("csv", "csv"), ("series", "series.csv")] {
            let now = results(&db, &["export", &id_text, "--format", format]);
            let then = old_export(&format!("run-{id}.{suffix}"));
            assert!(
                same_csv(&then, &now),
                "run {id}: export --format {format}:\n{now}"
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
        golden::check(
            &format!("runs-61f461b/run-{id}-brief.txt"),
            &results(&db, &["show", &id_text, "--brief"]),
        );
    }
}

#[test]
fn every_old_run_has_a_report_page() {
    let (_dir, db) = database();
    for id in RUNS {
        let page = results(&db, &["report", &id.to_string(), "--out", "-"]);
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

/// The kinds this binary knows, as `results list --help` lists them for `--kind`.
fn known_kinds() -> Vec<String> {
    let output = ratelab()
        .args(["results", "list", "--help"])
        .output()
        .expect("start ratelab");
    let help = String::from_utf8_lossy(&output.stdout).replace('\n', " ");
    let start = help
        .find("[possible values: ")
        .expect("--kind lists its possible values")
        + "[possible values: ".len();
    let end = start + help[start..].find(']').expect("the list ends");
    help[start..end]
        .split(',')
        .map(|k| k.split_whitespace().collect::<String>())
        .collect()
}

#[test]
fn every_kind_walks_through_list_show_compare_export_and_report() {
    // Every fixture database, each copied: a kind newer than the first fixture is in a
    // newer one (docs/adding-a-kind.md).
    let dir = tempfile::tempdir().expect("create a temporary folder");
    let mut databases = Vec::new();
    for entry in std::fs::read_dir(fixtures()).expect("list the fixtures") {
        let path = entry.expect("a fixture").path();
        if path.extension().is_some_and(|e| e == "db") {
            let copy = dir.path().join(path.file_name().unwrap());
            std::fs::copy(&path, &copy).expect("copy a fixture");
            databases.push(copy);
        }
    }
    let kinds = known_kinds();
    assert!(kinds.len() >= 7, "{kinds:?}");
    for kind in &kinds {
        let found = databases.iter().find_map(|db| {
            let listed: Value =
                serde_json::from_str(&results(db, &["list", "--kind", kind, "--json"])).unwrap();
            let ids: Vec<String> = listed
                .as_array()
                .unwrap()
                .iter()
                .map(|r| r["run_id"].to_string())
                .collect();
            Some((db, ids.first()?.clone(), ids.last()?.clone()))
        });
        let Some((db, newest, oldest)) = found else {
            panic!(
                "no fixture database holds a {kind} run: add one (docs/adding-a-kind.md) so \
                 that every kind is walked through every view"
            );
        };
        let (newest, oldest) = (&newest, &oldest);
        let heading = format!("{kind} ");
        let show = results(db, &["show", newest]);
        assert!(
            show.lines().any(|l| l.starts_with(&heading)),
            "{kind}: {show}"
        );
        let markdown = results(db, &["export", newest, "--format", "markdown"]);
        assert!(
            markdown.contains(&format!("### {heading}")),
            "{kind}: {markdown}"
        );
        let csv = results(db, &["export", newest, "--format", "csv"]);
        assert!(csv.contains(&format!(",{kind},")), "{kind}: {csv:.300}");
        let document: Value =
            serde_json::from_str(&results(db, &["export", newest, "--format", "json"])).unwrap();
        assert!(
            document["workloads"]
                .as_array()
                .unwrap()
                .iter()
                .any(|w| w["kind"] == kind.as_str()),
            "{kind}: run {newest}"
        );
        let page = results(db, &["report", newest, "--out", "-"]);
        assert!(
            page.contains(&format!("class=\"workload {kind}\"")),
            "{kind}"
        );
        let compared: Value =
            serde_json::from_str(&results(db, &["compare", oldest, newest, "--json"])).unwrap();
        assert!(
            compared["workloads"]
                .as_array()
                .unwrap()
                .iter()
                .any(|w| w["kind"] == kind.as_str()),
            "{kind}: compare {oldest} {newest}"
        );
    }
}

#[test]
fn a_corrupt_item_is_named_not_dropped() {
    let (_dir, db) = database();
    rusqlite::Connection::open(&db)
        .expect("open the copy")
        .execute(
            "UPDATE items SET body = '{\"op\": \"write\", \"size_bytes\": \"big\"}' \
             WHERE run_id = 1 AND workload_idx = 0 AND seq = 4",
            [],
        )
        .expect("corrupt one item");
    for args in [
        vec!["show", "1"],
        vec!["export", "1", "--format", "markdown"],
        vec!["report", "1", "--out", "-"],
        vec!["compare", "1", "15"],
    ] {
        let message = common::refused(
            ratelab().arg("results").args(&args).arg("--db").arg(&db),
            3,
            &[
                "run 1, workload 1 (disk)",
                "item 5",
                "ratelab results export 1 --format json",
            ],
        );
        assert!(message.contains("\"big\""), "{args:?}: {message}");
    }
    // The document as stored still comes out, corrupt item and all.
    let stored: Value =
        serde_json::from_str(&results(&db, &["export", "1", "--format", "json"])).unwrap();
    assert_eq!(stored["workloads"][0]["items"][4]["size_bytes"], "big");
    assert_eq!(
        stored["workloads"][0]["items"].as_array().unwrap().len(),
        36,
        "no item is dropped"
    );
}

#[test]
fn image_runs_show_as_the_golden_files_say() {
    // A newer fixture (tests/fixtures/make-db-a1ad702.sh): a cluster-size sweep, and
    // containers with a task, rewrites and two read modes.
    let dir = tempfile::tempdir().expect("create a temporary folder");
    let db = dir.path().join("runs-a1ad702.db");
    std::fs::copy(fixtures().join("runs-a1ad702.db"), &db).expect("copy the fixture");
    for id in ["1", "2"] {
        golden::check(
            &format!("runs-a1ad702/run-{id}.txt"),
            &results(&db, &["show", id]),
        );
        golden::check(
            &format!("runs-a1ad702/run-{id}-brief.txt"),
            &results(&db, &["show", id, "--brief"]),
        );
    }
}

#[test]
fn iops_runs_show_as_the_golden_files_say() {
    // A newer fixture (tests/fixtures/make-db-feaf4b2.sh): block I/O tests at several
    // depths and threads, and a buffered write.
    let dir = tempfile::tempdir().expect("create a temporary folder");
    let db = dir.path().join("runs-feaf4b2.db");
    std::fs::copy(fixtures().join("runs-feaf4b2.db"), &db).expect("copy the fixture");
    for id in ["1", "2"] {
        golden::check(
            &format!("runs-feaf4b2/run-{id}.txt"),
            &results(&db, &["show", id]),
        );
    }
}

#[test]
fn why_runs_show_as_the_golden_files_say() {
    // A newer fixture (tests/fixtures/make-db-bae589c.sh): a sleep, a pipeline its
    // compressor's CPU limits, and a command that fails.
    let dir = tempfile::tempdir().expect("create a temporary folder");
    let db = dir.path().join("runs-bae589c.db");
    std::fs::copy(fixtures().join("runs-bae589c.db"), &db).expect("copy the fixture");
    for id in ["1", "2", "3"] {
        golden::check(
            &format!("runs-bae589c/run-{id}.txt"),
            &results(&db, &["show", id]),
        );
    }
    golden::check(
        "runs-bae589c/run-2-brief.txt",
        &results(&db, &["show", "2", "--brief"]),
    );
}

#[test]
fn a_database_another_user_owns_is_read_as_it_is_and_never_written() {
    let test = "a_database_another_user_owns_is_read_as_it_is_and_never_written";
    if !common::root_or_skip(test, "it runs ratelab as nobody")
        || !common::have_or_skip(test, "setpriv")
    {
        return;
    }
    use std::os::unix::fs::PermissionsExt;
    // Root's folder and files, readable by all.
    let dir = common::nobody_tempdir(0o755);
    let nobody = |args: &[&str]| {
        common::as_nobody(common::bin())
            .env("HOME", "/nonexistent")
            .args(args)
            .output()
            .unwrap()
    };
    // A store of every schema version ratelab has had, read-only to all: the older ones
    // read as they are through views, never upgraded; the newest from a copy, since
    // SQLite cannot make its shared-memory file beside it.
    for (fixture, version) in SCHEMAS {
        let db = dir.path().join(fixture);
        std::fs::copy(fixtures().join(fixture), &db).unwrap();
        std::fs::set_permissions(&db, std::fs::Permissions::from_mode(0o444)).unwrap();
        let before = std::fs::read(&db).unwrap();
        let db_arg = db.to_str().unwrap();
        for args in [
            vec!["results", "list"],
            vec!["results", "show", "1"],
            vec!["results", "report", "1", "--out", "-"],
            vec!["results", "compare", "1", "2"],
            vec!["results", "export", "1", "--format", "json"],
            vec!["results", "export", "2", "--format", "markdown"],
        ] {
            let output = nobody(&[&args[..], &["--db", db_arg]].concat());
            let stderr = String::from_utf8_lossy(&output.stderr);
            assert!(output.status.success(), "{fixture}: {args:?}: {stderr}");
            assert!(
                !output.stdout.is_empty(),
                "{fixture}: {args:?} printed nothing"
            );
            // An older store says so once, and how to bring it up to date.
            let notices = stderr.matches("from an older ratelab").count();
            if version < LATEST_SCHEMA {
                assert_eq!(notices, 1, "{fixture}: {args:?}: {stderr}");
                for words in [
                    format!("has schema version {version}"),
                    "the next time a run is stored in it where it can be written".into(),
                ] {
                    assert!(stderr.contains(&words), "{fixture}: {words:?}: {stderr}");
                }
            } else {
                assert_eq!(notices, 0, "{fixture}: {args:?}: {stderr}");
            }
        }
        assert!(
            std::fs::read(&db).unwrap() == before,
            "{fixture} was written"
        );
        // Storing a run there is refused before anything runs, saying what to do.
        let target = common::nobody_tempdir(0o777);
        let output = nobody(&[
            "disk",
            target.path().to_str().unwrap(),
            "--sizes",
            "1M",
            "--db",
            db_arg,
        ]);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(3), "{stderr}");
        for words in [
            "cannot store runs in the results database",
            "--db PATH",
            "--no-store",
        ] {
            assert!(stderr.contains(words), "{words:?} missing: {stderr}");
        }
        assert!(
            common::entries(target.path()).is_empty(),
            "the disk run began"
        );
        assert!(
            std::fs::read(&db).unwrap() == before,
            "{fixture} was written"
        );
    }
    let mut left = common::entries(dir.path());
    left.sort();
    let mut fixtures: Vec<&str> = SCHEMAS.iter().map(|(f, _)| *f).collect();
    fixtures.sort();
    assert_eq!(left, fixtures, "nothing was made beside the databases");
}

/// The schema version this ratelab writes.
const LATEST_SCHEMA: usize = 6;

/// A fixture of every schema version ratelab has had, with its version: each written
/// by the ratelab of the commit in its name (tests/fixtures/make-db-COMMIT.sh).
const SCHEMAS: [(&str, usize); 6] = [
    ("runs-5721a9e.db", 1),
    ("runs-61f461b.db", 2),
    ("runs-a1ad702.db", 3),
    ("runs-3ec291d.db", 4),
    ("runs-7cea1f4.db", 5),
    ("runs-feaf4b2.db", 6),
];

#[test]
fn every_schema_fixture_has_the_version_it_is_named_for() {
    // Each read from a copy: SQLite makes its shared-memory file beside a WAL database.
    let dir = tempfile::tempdir().unwrap();
    for (fixture, version) in SCHEMAS {
        let db = dir.path().join(fixture);
        std::fs::copy(fixtures().join(fixture), &db).unwrap();
        let conn = rusqlite::Connection::open(&db).unwrap();
        let found: i64 = conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .unwrap();
        assert_eq!(found, version as i64, "{fixture}");
    }
}

#[test]
fn a_database_from_a_newer_ratelab_is_refused_naming_both_versions() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("newer.db");
    std::fs::copy(fixtures().join("runs-feaf4b2.db"), &db).unwrap();
    let conn = rusqlite::Connection::open(&db).unwrap();
    conn.pragma_update(None, "user_version", LATEST_SCHEMA as i64 + 1)
        .unwrap();
    drop(conn);
    let before = std::fs::read(&db).unwrap();
    for args in [vec!["results", "list"], vec!["results", "show", "1"]] {
        let output = ratelab().args(&args).arg("--db").arg(&db).output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        // Refused with 3, as docs/exit-codes.md says.
        assert_eq!(output.status.code(), Some(3), "{args:?}: {stderr}");
        for words in [
            format!("schema version {}", LATEST_SCHEMA + 1),
            format!("reads versions up to {LATEST_SCHEMA}"),
            "written by a newer ratelab".into(),
        ] {
            assert!(stderr.contains(&words), "{words:?}: {stderr}");
        }
    }
    assert!(
        std::fs::read(&db).unwrap() == before,
        "the database was written"
    );
}

/// Lines over 80 columns, and words of `narrow` that are no word of `wide` (a word
/// broken across lines), as complaints.
fn not_fitting(narrow: &str, wide: &str) -> Vec<String> {
    let words: std::collections::BTreeSet<&str> = wide.split_whitespace().collect();
    let mut complaints: Vec<String> = narrow
        .lines()
        .filter(|l| l.chars().count() > 80)
        .map(|l| format!("{} columns: {l}", l.chars().count()))
        .collect();
    // What a narrow table says it left out is its own; borders are as wide as the table.
    let mut said = narrow.split_whitespace().collect::<Vec<_>>().join(" ");
    while let Some(from) = said.find("· left out to fit") {
        let to = said[from..]
            .find("has them)")
            .map_or(said.len(), |at| from + at + "has them)".len());
        said.replace_range(from..to, "");
    }
    // A verdict at a glance is cut at a space, and says so with an ellipsis of its own.
    let border = |w: &str| w.chars().all(|c| "─═┌┐└┘├┤┬┴┼╞╡╪│┆…".contains(c));
    complaints.extend(
        said.split_whitespace()
            .filter(|w| !words.contains(w) && !border(w))
            .map(|w| format!("broken word {w:?}")),
    );
    complaints
}

#[test]
fn at_80_columns_no_line_is_wider_and_no_word_is_broken() {
    let dir = tempfile::tempdir().unwrap();
    let at = |columns: &str, command: &mut std::process::Command| {
        let output = command.env("COLUMNS", columns).output().unwrap();
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8(output.stdout).unwrap()
    };
    for fixture in [
        "runs-61f461b.db",
        "runs-a1ad702.db",
        "runs-feaf4b2.db",
        "runs-bae589c.db",
    ] {
        let db = dir.path().join(fixture);
        std::fs::copy(fixtures().join(fixture), &db).unwrap();
        let list = results(&db, &["list", "--json"]);
        let runs: Value = serde_json::from_str(&list).unwrap();
        for run in runs.as_array().unwrap() {
            let id = run["run_id"].to_string();
            for brief in [false, true] {
                let show = || {
                    let mut c = ratelab();
                    c.args(["results", "show", &id, "--db"]).arg(&db);
                    if brief {
                        c.arg("--brief");
                    }
                    c
                };
                let narrow = at("80", &mut show());
                let wide = at("1000", &mut show());
                let complaints = not_fitting(&narrow, &wide);
                assert!(
                    complaints.is_empty(),
                    "{fixture} run {id} (brief {brief}):\n{}\n\n{narrow}",
                    complaints.join("\n")
                );
            }
        }
    }
    // A live cpu run, whose widest table is its own.
    let cpu = || {
        let mut c = ratelab();
        c.args(["cpu", "--seconds", "100ms", "--json", "--db"])
            .arg(dir.path().join("cpu.db"));
        c
    };
    at("80", &mut cpu());
    let shown = |columns| {
        at(
            columns,
            ratelab()
                .args(["results", "show", "1", "--db"])
                .arg(dir.path().join("cpu.db")),
        )
    };
    let (narrow, wide) = (shown("80"), shown("1000"));
    let complaints = not_fitting(&narrow, &wide);
    assert!(
        complaints.is_empty(),
        "{}\n\n{narrow}",
        complaints.join("\n")
    );
    assert!(narrow.contains("left out to fit 80 columns"), "{narrow}");
}
