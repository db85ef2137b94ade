//! Ctrl-C mid-run: the workers stop, the files go, the run is kept as incomplete,
//! earlier runs are untouched, and the exit code is 130.

mod common;

use std::time::Duration;

use common::{
    disk_tempdir, earlier_run, entries, ratelab, stop_with, stored_run, wait_for_work_folder,
};

#[test]
fn sigint_cleans_up_and_stores_the_run_as_interrupted() {
    let dir = disk_tempdir();
    let target = dir.path().join("target");
    std::fs::create_dir(&target).unwrap();
    let db = dir.path().join("results.db");
    earlier_run(&target, &db);

    // Small direct writes keep the run busy for seconds without needing much space.
    let child = ratelab()
        .args([
            "disk",
            target.to_str().unwrap(),
            "--sizes",
            "256M,256M",
            "--direct",
            "--block-size",
            "4K",
        ])
        .args(["--phase", "write", "--json", "-q", "--db"])
        .arg(&db)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    wait_for_work_folder(&target);
    std::thread::sleep(Duration::from_millis(300));
    let output = stop_with(child, rustix::process::Signal::INT);
    let message = String::from_utf8_lossy(&output.stderr);
    assert!(
        message.contains("interrupted") && message.contains("stored as incomplete"),
        "{message}"
    );
    assert!(
        entries(&target).is_empty(),
        "files left: {:?}",
        entries(&target)
    );

    // --json still prints the run, marked incomplete, as SPEC.md's document says.
    let printed = common::json(&output.stdout);
    assert_eq!(printed["status"], "incomplete");
    assert_eq!(printed["incomplete_reason"], "interrupted");
    let doc = stored_run(&db, 2);
    assert_eq!(doc, printed);
    let first = stored_run(&db, 1);
    assert_eq!(first["status"], "complete");
    assert_eq!(first["workloads"][0]["items"].as_array().unwrap().len(), 2);
}

#[test]
fn sigterm_is_handled_like_sigint() {
    let dir = disk_tempdir();
    let child = ratelab()
        .args([
            "disk",
            dir.path().to_str().unwrap(),
            "--sizes",
            "256M,256M",
            "--direct",
            "--block-size",
            "4K",
        ])
        .args(["--phase", "write", "-q", "--no-store"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    wait_for_work_folder(dir.path());
    std::thread::sleep(Duration::from_millis(200));
    stop_with(child, rustix::process::Signal::TERM);
    assert!(
        entries(dir.path()).is_empty(),
        "files left: {:?}",
        entries(dir.path())
    );
}
