//! Several ratelab processes on one results database at once, as a script or a fleet
//! starts them: a database that does not exist yet is created and migrated by one of
//! them while the others wait, and every run is stored.

mod common;

use std::path::Path;
use std::process::{Child, Stdio};

use common::{ratelab, stored_runs};

/// Processes started together in each burst.
const PROCESSES: usize = 5;
/// Bursts, each on a new database: one burst can miss the race by luck.
const BURSTS: usize = 3;

/// Starts a quick null-engine run on `target` storing into `db`, labelled `label`.
fn start(target: &Path, db: &Path, label: &str) -> Child {
    ratelab()
        .arg("disk")
        .arg(target)
        .args(["--engine", "null", "--sizes", "1M", "-q", "--json"])
        .args(["--label", label, "--db"])
        .arg(db)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start ratelab")
}

#[test]
fn processes_started_together_on_a_new_database_all_store_their_runs() {
    let dir = tempfile::tempdir().expect("create a temporary folder");
    let target = dir.path().join("target");
    std::fs::create_dir(&target).expect("create the target");
    for burst in 0..BURSTS {
        // A new database in a folder of its own (`--db` makes the file, not its folder).
        let folder = dir.path().join(format!("new-{burst}"));
        std::fs::create_dir(&folder).expect("create the database's folder");
        let db = folder.join("results.db");
        let labels: Vec<String> = (0..PROCESSES).map(|p| format!("b{burst}p{p}")).collect();
        let children: Vec<Child> = labels.iter().map(|l| start(&target, &db, l)).collect();
        for (label, child) in labels.iter().zip(children) {
            let output = child.wait_with_output().expect("wait for ratelab");
            assert!(
                output.status.success(),
                "burst {burst}: run {label} exited {:?}: {}",
                output.status.code(),
                String::from_utf8_lossy(&output.stderr)
            );
        }
        let runs = stored_runs(&db);
        let mut stored: Vec<&str> = runs
            .as_array()
            .expect("a list of runs")
            .iter()
            .map(|run| {
                assert_eq!(run["status"], "complete", "{run}");
                run["label"].as_str().expect("a label")
            })
            .collect();
        stored.sort_unstable();
        assert_eq!(stored, labels, "burst {burst}: runs stored");
    }
}
