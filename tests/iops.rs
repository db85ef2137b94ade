//! Block I/O on a disk of known speed: a loop device (direct I/O) whose requests a
//! blkio cgroup limits to a known IOPS or byte rate; ratelab's figures and fio's on the
//! same rig, in the same test. Bad input is refused before anything is made. These
//! rigs need root; without it they say why they skip.

mod common;

use std::path::Path;
use std::process::Command;

use common::rig::{self, MIB, SlowDisk, Throttle};
use common::{RIG_NEEDS, entries, root_or_skip, run_json};
use serde_json::Value;

const READ_IOPS: u64 = 2000;
const WRITE_IOPS: u64 = 1000;
const TOLERANCE: f64 = 0.05;

/// The item of `test` and `op` of a run document.
fn item<'a>(doc: &'a Value, test: &str, op: &str) -> &'a Value {
    doc["workloads"][0]["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["test"] == test && i["op"] == op)
        .unwrap_or_else(|| panic!("no {test} {op} item in {doc}"))
}

fn within(what: &str, got: f64, want: f64, tolerance: f64) {
    let ratio = got / want;
    eprintln!("{what}: {got:.4} against {want:.4} ({ratio:.3}x)");
    assert!(
        (ratio - 1.0).abs() <= tolerance,
        "{what}: {got:.1} against {want:.1} ({ratio:.3}x, allowed ±{:.0}%)",
        tolerance * 100.0
    );
}

/// ratelab's IOPS `ours` against fio's `theirs` on a rig whose limit is `limit`. Where
/// fio met the limit, ratelab meets fio; where fio itself fell short of it, in its own
/// run after ratelab's, ratelab meets the limit (checked apart) or fio.
fn against_fio(what: &str, ours: f64, theirs: f64, limit: f64) {
    let what = format!("ratelab against fio, {what}");
    if theirs >= (1.0 - TOLERANCE) * limit {
        within(&what, ours, theirs, TOLERANCE);
        return;
    }
    let line = format!(
        "{what}: {ours:.1} against {theirs:.1}, where fio fell short of the rig's {limit:.0}"
    );
    assert!(
        (ours / theirs - 1.0).abs() <= TOLERANCE || (ours / limit - 1.0).abs() <= TOLERANCE,
        "{line}"
    );
    common::say(&format!(
        "{line}: ratelab was held to the limit or to fio's figure"
    ));
}

/// fio's read and write IOPS for `rw` at `depth` on `file`, in `throttle`'s cgroup, with
/// `more` options.
fn fio_iops(throttle: &Throttle, file: &Path, rw: &str, depth: u32, more: &[&str]) -> [f64; 2] {
    let output = throttle
        .command("fio")
        .args([
            "--name=rig",
            &format!("--filename={}", file.display()),
            "--size=128M",
            &format!("--rw={rw}"),
            "--bs=4k",
            "--direct=1",
            "--ioengine=io_uring",
            &format!("--iodepth={depth}"),
            "--ramp_time=1",
            "--runtime=4",
            "--time_based",
            "--output-format=json",
        ])
        .args(more)
        .output()
        .expect("run fio");
    assert!(
        output.status.success(),
        "fio: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let doc: Value = serde_json::from_slice(&output.stdout).expect("fio's JSON");
    ["read", "write"].map(|side| doc["jobs"][0][side]["iops"].as_f64().unwrap())
}

#[test]
fn random_4k_on_an_iops_limited_disk_is_the_limit_and_what_fio_measures() {
    let test = "random_4k_on_an_iops_limited_disk_is_the_limit_and_what_fio_measures";
    if !root_or_skip(test, RIG_NEEDS) || !common::have_or_skip(test, "fio") {
        return;
    }
    let _lock = rig::exclusive();
    // Backed by memory: at depth 1 a 4 KiB write to this VM's disk, in a slow mood, took
    // longer than the throttle's millisecond, and fio ran 913 IOPS of the 1000.
    let disk = SlowDisk::in_memory(1 << 30);
    let throttle = Throttle::new();
    throttle.limit_iops(&disk, WRITE_IOPS, READ_IOPS);
    let iops = |tests: &str, rw: &str| {
        run_json(
            throttle
                .command(common::bin())
                .arg("iops")
                .arg(disk.path())
                .args(["--size", "128M", "--tests", tests, "--rw", rw])
                .args(["--seconds", "4", "--ramp", "1", "--repeat", "1"])
                .args(["--json", "--no-store"]),
        )
    };
    let doc = iops("RND4K-Q1T1,RND4K-Q32T1", "read,write");
    let mix = iops("RND4K-Q32T1", "mix:70");
    assert_eq!(entries(disk.path()), vec!["lost+found".to_string()]);
    for (op, limit) in [("read", READ_IOPS), ("write", WRITE_IOPS)] {
        for depth in [1, 32] {
            let test = format!("RND4K-Q{depth}T1");
            let item = item(&doc, &test, op);
            let iops = item["iops"].as_f64().unwrap();
            within(&format!("{test} {op} IOPS"), iops, limit as f64, TOLERANCE);
            if depth == 32 {
                // Little's law: requests in flight = rate x time each spends.
                let mean_us = item["latency_ns"]["mean"].as_f64().unwrap() / 1e3;
                within(
                    &format!("{test} {op} mean latency (µs)"),
                    mean_us,
                    f64::from(depth) / iops * 1e6,
                    0.15,
                );
            }
        }
    }
    // fio on the same rig: its file laid out outside the cgroup, at full speed.
    let file = disk.path().join("fio-rig");
    let made = Command::new("dd")
        .args(["if=/dev/urandom", "bs=1M", "count=128", "oflag=direct"])
        .arg(format!("of={}", file.display()))
        .output()
        .expect("run dd");
    assert!(made.status.success(), "dd failed");
    for (rw, side, op) in [("randread", 0, "read"), ("randwrite", 1, "write")] {
        for depth in [1, 32] {
            let ours = item(&doc, &format!("RND4K-Q{depth}T1"), op)["iops"]
                .as_f64()
                .unwrap();
            let theirs = fio_iops(&throttle, &file, rw, depth, &[])[side];
            let limit = if op == "read" { READ_IOPS } else { WRITE_IOPS };
            against_fio(&format!("{rw} depth {depth}"), ours, theirs, limit as f64);
        }
    }
    // A 70/30 mix: the reads run at their limit, the writes at 3/7 of it (under theirs),
    // as fio's randrw with the same share.
    let fio = fio_iops(&throttle, &file, "randrw", 32, &["--rwmixread=70"]);
    for (side, op) in ["read", "write"].into_iter().enumerate() {
        let mixed = item(&mix, "RND4K-Q32T1", op);
        assert_eq!(mixed["rw"], "mix:70");
        let ours = mixed["iops"].as_f64().unwrap();
        let want = READ_IOPS as f64 * if op == "read" { 1.0 } else { 3.0 / 7.0 };
        against_fio(&format!("mix:70 {op}, fio's randrw"), ours, fio[side], want);
        within(&format!("mix:70 {op} IOPS"), ours, want, TOLERANCE);
    }
    std::fs::remove_file(&file).unwrap();
}

#[test]
fn sequential_1m_on_a_bandwidth_limited_disk_is_the_limit() {
    let test = "sequential_1m_on_a_bandwidth_limited_disk_is_the_limit";
    if !root_or_skip(test, RIG_NEEDS) {
        return;
    }
    let _lock = rig::exclusive();
    let disk = SlowDisk::in_memory(1 << 30);
    let throttle = Throttle::new();
    throttle.limit(&disk, 200 * MIB, 300 * MIB);
    let doc = run_json(
        throttle
            .command(common::bin())
            .arg("iops")
            .arg(disk.path())
            .args(["--size", "256M", "--tests", "SEQ1M-Q8T1,SEQ1M-Q1T1"])
            .args(["--seconds", "3", "--ramp", "1", "--repeat", "1"])
            .args(["--json", "--no-store"]),
    );
    for (op, limit) in [("read", 300 * MIB), ("write", 200 * MIB)] {
        for test in ["SEQ1M-Q8T1", "SEQ1M-Q1T1"] {
            let rate = item(&doc, test, op)["bytes_per_sec"].as_f64().unwrap();
            within(&format!("{test} {op} rate"), rate, limit as f64, TOLERANCE);
        }
    }
}

#[test]
fn bad_tests_sizes_and_targets_are_refused_before_anything_is_made() {
    let dir = common::disk_tempdir();
    let refused = |args: &[&str], code: i32, expect: &str| {
        let output = common::ratelab()
            .arg("iops")
            .arg(dir.path())
            .args(args)
            .arg("--no-store")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(code), "{args:?}: {stderr}");
        assert!(stderr.contains(expect), "{args:?}: {stderr}");
        assert!(entries(dir.path()).is_empty(), "{args:?} left files behind");
    };
    refused(
        &["--tests", "RND4K-Q0T1"],
        2,
        "'RND4K-Q0T1' for '--tests <LIST>': the queue depth must be from 1",
    );
    refused(
        &["--tests", "SEQ1M-Q8T1,RND4Q-Q1T1"],
        2,
        "'RND4Q-Q1T1' for '--tests <LIST>': the block size '4Q' is not a size",
    );
    refused(&["--size", "1000T"], 3, "not enough free space");
    refused(
        &["--size", "100K", "--tests", "SEQ1M-Q1T1"],
        2,
        "--size 100 KiB is too small for SEQ1M-Q1T1",
    );
    refused(&["--seconds", "0"], 2, "--seconds 0 must be above 0");
    refused(&["--repeat", "0"], 2, "--repeat must be at least 1");
    refused(
        &["--repeat", "101"],
        2,
        "--repeat 101 is out of range (1 to 100)",
    );
    refused(
        &["--rw", "read,mix:100"],
        2,
        "'mix:100' for '--rw <LIST>': the share of reads in 'mix:100' must be a whole number from 1 to 99",
    );
}

#[test]
fn a_read_only_target_is_refused_saying_so() {
    let test = "a_read_only_target_is_refused_saying_so";
    if !root_or_skip(test, "it mounts a read-only tmpfs") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mounted = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "ro,size=1m", "tmpfs"])
        .arg(dir.path())
        .status()
        .unwrap();
    assert!(mounted.success());
    let output = common::ratelab()
        .arg("iops")
        .arg(dir.path())
        .arg("--no-store")
        .output()
        .unwrap();
    let _ = Command::new("umount").arg(dir.path()).status();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(3), "{stderr}");
    assert!(stderr.contains("read-only file system"), "{stderr}");
}

#[test]
fn ctrl_c_mid_test_stores_the_run_incomplete_and_removes_the_file() {
    let dir = common::disk_tempdir();
    let db = dir.path().join("results.db");
    let target = dir.path().join("target");
    std::fs::create_dir(&target).unwrap();
    common::earlier_run(&target, &db);
    let child = common::ratelab()
        .arg("iops")
        .arg(&target)
        .args(["--size", "16M", "--tests", "RND4K-Q4T1", "--seconds", "60"])
        .arg("--db")
        .arg(&db)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    common::wait_for_work_folder(&target);
    std::thread::sleep(std::time::Duration::from_millis(1500));
    common::stop_with(child, rustix::process::Signal::INT);
    assert!(entries(&target).is_empty(), "{:?}", entries(&target));
    let runs = common::stored_runs(&db);
    let runs = runs.as_array().unwrap();
    assert_eq!(runs.len(), 2, "{runs:?}");
    assert_eq!(runs[0]["status"], "incomplete", "{:?}", runs[0]);
    assert_eq!(
        runs[1]["status"], "complete",
        "the earlier run is untouched"
    );
}

#[test]
fn two_stored_runs_of_two_rounds_compare_by_iops_and_latency_percentiles_per_interval() {
    let dir = common::disk_tempdir();
    let target = dir.path().join("target");
    std::fs::create_dir(&target).unwrap();
    let db = dir.path().join("results.db");
    for _ in 0..2 {
        run_json(
            common::ratelab()
                .arg("iops")
                .arg(&target)
                .args(["--size", "4M", "--tests", "RND4K-Q4T1", "--rw", "mix:70"])
                .args(["--seconds", "0.5", "--ramp", "0.2", "--repeat", "2"])
                .args(["--json", "--db"])
                .arg(&db),
        );
    }
    // Each round of each test and op is stored as its own item.
    let stored = run_json(
        common::ratelab()
            .args(["results", "show", "2", "--json", "--db"])
            .arg(&db),
    );
    let rounds: Vec<(&str, u64)> = stored["workloads"][0]["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| (i["op"].as_str().unwrap(), i["round"].as_u64().unwrap()))
        .collect();
    assert_eq!(
        rounds,
        [("read", 1), ("write", 1), ("read", 2), ("write", 2)]
    );
    let summary = &stored["workloads"][0]["summary"]["tests"];
    assert_eq!(summary.as_array().unwrap().len(), 2, "{summary:#}");
    assert_eq!(summary[0]["rounds"], 2, "{summary:#}");
    let comparison = run_json(
        common::ratelab()
            .args(["results", "compare", "1", "2", "--json", "--db"])
            .arg(&db),
    );
    let groups = comparison["workloads"][0]["groups"].as_array().unwrap();
    let ops: Vec<(&str, &str)> = groups
        .iter()
        .map(|g| (g["op"].as_str().unwrap(), g["rate_unit"].as_str().unwrap()))
        .collect();
    let mut want = Vec::new();
    for op in ["read", "write"] {
        want.push((format!("RND4K-Q4T1 {op} in mix:70 IOPS"), "iops"));
        want.push((format!("RND4K-Q4T1 {op} in mix:70 p50"), "ns"));
        want.push((format!("RND4K-Q4T1 {op} in mix:70 p99"), "ns"));
    }
    let want: Vec<(&str, &str)> = want.iter().map(|(o, u)| (o.as_str(), *u)).collect();
    assert_eq!(ops, want);
    for group in groups {
        for run in group["runs"].as_array().unwrap() {
            // Each round cut into ten intervals, every round's compared as one
            // group; an interval in which no I/O completed (the disk stalled) has
            // no latency to compare and is counted as too short instead.
            let n = run["n"].as_u64().unwrap();
            let too_short = run["too_short_items"].as_u64().unwrap();
            assert_eq!(n + too_short, 20, "{group:#}");
            assert!(n >= 5, "{group:#}");
        }
        let change = &group["changes"][0];
        assert!(change["p_value"].as_f64().is_some(), "{group:#}");
    }
    // People read the figures in their units.
    let text = common::ratelab()
        .args(["results", "compare", "1", "2", "--db"])
        .arg(&db)
        .env("COLUMNS", "160")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains(" IOPS "), "{text}");
    assert!(text.contains(" µs ") || text.contains(" ms "), "{text}");
}

#[test]
fn a_write_rate_that_drops_mid_test_is_called_a_knee() {
    let test = "a_write_rate_that_drops_mid_test_is_called_a_knee";
    if !root_or_skip(test, RIG_NEEDS) {
        return;
    }
    let _lock = rig::exclusive();
    let disk = SlowDisk::new(256 << 20);
    let throttle = Throttle::new();
    throttle.limit_iops(&disk, WRITE_IOPS, READ_IOPS);
    // A device whose write cache fills: a quarter of the rate from some seconds in.
    let child = throttle
        .command(common::bin())
        .arg("iops")
        .arg(disk.path())
        .args(["--size", "16M", "--tests", "RND4K-Q1T1", "--rw", "write"])
        .args(["--seconds", "10", "--ramp", "0.5", "--repeat", "1"])
        .args(["--json", "--no-store"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start ratelab");
    std::thread::sleep(std::time::Duration::from_secs(5));
    throttle.limit_iops(&disk, WRITE_IOPS / 4, READ_IOPS);
    let output = child.wait_with_output().unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let doc = common::json(&output.stdout);
    let verdicts = doc["verdicts"].as_array().unwrap();
    let knee = verdicts
        .iter()
        .find(|v| v["code"] == "iops_knee")
        .unwrap_or_else(|| panic!("no knee in {verdicts:#?}"));
    let message = knee["message"].as_str().unwrap();
    eprintln!("{message}");
    assert!(message.contains("RND4K-Q1T1 write"), "{message}");
    // The rates before and after, as the message rounds them: the throttle's credit at
    // the start may lift the first (1010 IOPS once).
    let rate = |after: &str| -> f64 {
        let rest =
            &message[message.find(after).unwrap_or_else(|| panic!("{message}")) + after.len()..];
        rest.split(' ')
            .next()
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("{message}"))
    };
    within(
        "the rate before the knee",
        rate(": from "),
        WRITE_IOPS as f64,
        TOLERANCE,
    );
    within(
        "the rate after it",
        rate(" IOPS to "),
        WRITE_IOPS as f64 / 4.0,
        TOLERANCE,
    );
    assert!(
        !verdicts.iter().any(|v| v["code"] == "iops_write_short"),
        "a knee was found: the writes did not all fit a cache"
    );
}
