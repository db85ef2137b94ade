//! Ctrl-C mid-run: the workers stop, the files go, the run is kept as incomplete,
//! earlier runs are untouched, and the exit code is 130.

mod common;

use std::time::{Duration, Instant};

use common::{disk_tempdir, entries, json, ratelab};

#[test]
fn sigint_cleans_up_and_stores_the_run_as_interrupted() {
    let dir = disk_tempdir();
    let target = dir.path().join("target");
    std::fs::create_dir(&target).unwrap();
    let db = dir.path().join("results.db");
    let earlier = ratelab()
        .args([
            "disk",
            target.to_str().unwrap(),
            "--engine",
            "null",
            "--sizes",
            "1M",
            "-q",
            "--db",
        ])
        .arg(&db)
        .output()
        .unwrap();
    assert!(earlier.status.success());

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
        .args(["--phase", "write", "-q", "--db"])
        .arg(&db)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    while !entries(&target).iter().any(|e| e.starts_with("ratelab-")) {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "no work folder appeared"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    std::thread::sleep(Duration::from_millis(300));
    rustix::process::kill_process(
        rustix::process::Pid::from_child(&child),
        rustix::process::Signal::INT,
    )
    .unwrap();
    let output = child.wait_with_output().unwrap();
    let message = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(130), "{message}");
    assert!(
        message.contains("interrupted") && message.contains("stored as incomplete"),
        "{message}"
    );
    assert!(
        entries(&target).is_empty(),
        "files left: {:?}",
        entries(&target)
    );

    let shown = ratelab()
        .args(["results", "show", "2", "--json", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    let doc = json(&shown.stdout);
    assert_eq!(doc["status"], "incomplete");
    assert_eq!(doc["incomplete_reason"], "interrupted");
    let first = ratelab()
        .args(["results", "show", "1", "--json", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    let first = json(&first.stdout);
    assert_eq!(first["status"], "complete");
    assert_eq!(first["workloads"][0]["items"].as_array().unwrap().len(), 2);
}
