//! Every run keeps an account of what else used the machine while it ran, and says
//! `disturbed` when that can move its figures: cpu tests beside a busy process per
//! core, a storage series beside a writer to the same device, two profiles at once in
//! one folder (each names the other, and the later one's `since` does not blame the
//! storage, nor does `results compare`). Quiet runs say nothing: where one does, its
//! own account must name someone else's load, or it is a false alarm.

mod common;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::{disturbed, ratelab, run_json};
use serde_json::Value;

/// Processes killed when the test ends, however it ends.
struct Killed(Vec<Child>);

impl Drop for Killed {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// `yes > /dev/null`, once per CPU: every core busy.
fn busy_cores() -> common::BusyCores {
    common::BusyCores::start(std::thread::available_parallelism().map_or(2, |n| n.get()))
}

/// Whether a run's own account names another process's load large enough to count:
/// a quiet run that is disturbed all the same must show whose work it was.
fn names_a_real_load(doc: &Value) -> bool {
    let account = &doc["interference"];
    let seconds = account["seconds"].as_f64().unwrap().max(1e-9);
    let me = std::process::id();
    let strangers = |list: &str| {
        account[list]
            .as_array()
            .unwrap()
            .iter()
            .filter(|p| p["pid"].as_u64() != Some(u64::from(me)))
            .cloned()
            .collect::<Vec<Value>>()
    };
    let busy = strangers("top_cpu")
        .iter()
        .any(|p| p["cpu_seconds"].as_f64().unwrap() / seconds >= 0.25);
    let moving = strangers("top_io").iter().any(|p| {
        p["read_bytes"].as_u64().unwrap_or(0) + p["written_bytes"].as_u64().unwrap_or(0) >= 16 << 20
    });
    // The hypervisor taking the CPUs is a load too, if no process's.
    let cpus = account["cpus"].as_f64().unwrap().max(1.0);
    let steal = account["steal_seconds"].as_f64().unwrap() >= 0.05 * seconds * cpus;
    busy || moving || steal
}

fn stored(db: &Path, id: u64) -> Value {
    run_json(
        ratelab()
            .args(["results", "show", &id.to_string(), "--json", "--db"])
            .arg(db),
    )
}

#[test]
fn cpu_tests_beside_a_busy_process_per_core_are_disturbed_and_name_them() {
    // One at a time: each is the others' load.
    let _lock = common::rig::exclusive();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    let cpu = |extra: &[&str]| {
        run_json(
            ratelab()
                .args([
                    "cpu",
                    "--test",
                    "int",
                    "--threads",
                    "1,2",
                    "--seconds",
                    "0.5",
                ])
                .args(["--json", "-q", "--db"])
                .arg(&db)
                .args(extra),
        )
    };
    let quiet = cpu(&[]);
    let _load = busy_cores();
    let busy = cpu(&["--baseline", &quiet["run_id"].to_string()]);
    drop(_load);
    let message = disturbed(&busy).expect("a cpu run beside busy cores is disturbed");
    eprintln!("{message}");
    assert!(message.contains("yes (pid "), "{message}");
    assert!(message.contains("the figures of cpu 1"), "{message}");
    let account = &busy["interference"];
    assert!(
        account["other_cpu_seconds"].as_f64().unwrap() / account["seconds"].as_f64().unwrap()
            >= 0.5,
        "{account}"
    );
    // The stored run says so too, and its summary opens with it.
    let again = stored(&db, busy["run_id"].as_u64().unwrap());
    assert_eq!(disturbed(&again), Some(message));
    let text = common::stdout_with_db(&["results", "show", &busy["run_id"].to_string()], &db);
    let summary = text.split("summary:\n").nth(1).unwrap();
    assert!(summary.trim_start().starts_with("disturbed"), "{text}");
    // Its rates, each thread timed on its own CPU clock, hold beside the load; were
    // it slower than its quiet baseline, that is not put down to the machine.
    let codes: Vec<&str> = busy["verdicts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["code"].as_str().unwrap())
        .collect();
    assert!(!codes.contains(&"slower_than_baseline"), "{codes:?}");
}

#[test]
fn a_storage_series_beside_a_writer_to_its_device_is_disturbed_and_names_the_bytes() {
    // One at a time: each is the others' load.
    let _lock = common::rig::exclusive();
    // On the disk the tests build on (target/tmp), not a tmpfs /tmp.
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let target = dir.path().join("target");
    std::fs::create_dir(&target).unwrap();
    let series = || {
        run_json(
            ratelab()
                .arg("disk")
                .arg(&target)
                .args(["--sizes", "64M", "--repeat", "3", "--direct"])
                .args(["--json", "--no-store", "-q"]),
        )
    };
    let _writer = Killed(vec![
        Command::new("dd")
            .args(["if=/dev/zero", "bs=1M", "count=4000", "oflag=direct"])
            .arg(format!("of={}", dir.path().join("other").display()))
            .stderr(Stdio::null())
            .spawn()
            .expect("start dd"),
    ]);
    std::thread::sleep(Duration::from_millis(300));
    let doc = series();
    drop(_writer);
    let message = disturbed(&doc).expect("a series beside a writer to its device is disturbed");
    eprintln!("{message}");
    assert!(message.contains("more on "), "{message}");
    assert!(message.contains("by dd (pid "), "{message}");
    assert!(message.contains("the figures of disk 1"), "{message}");
}

#[test]
fn quiet_runs_raise_no_false_alarm() {
    // One at a time: each is the others' load. Each run is long enough for the
    // judgement to apply (0.5 s or more at all threads): cpu at 2 threads on 2 cores for
    // 1 s, a storage series of 256 MiB, a loopback net test of 1 s against a server
    // this test started (the run's peer, not another's load).
    let _lock = common::rig::exclusive();
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let server = common::net_server::Server::start(&[]);
    let mut alarms = Vec::new();
    let mut judged = 0;
    for round in 0..6 {
        let cpu = run_json(
            ratelab()
                .args(["cpu", "--test", "int", "--threads", "2", "--seconds", "1"])
                .args(["--json", "--no-store", "-q"]),
        );
        let disk = run_json(
            ratelab()
                .arg("disk")
                .arg(dir.path())
                .args(["--sizes", "256M", "--repeat", "1"])
                .args(["--json", "--no-store", "-q"]),
        );
        let net = run_json(&mut server.client(&["-t", "1", "-q"]));
        for (what, doc) in [("cpu", cpu), ("disk", disk), ("net", net)] {
            let account = &doc["interference"];
            // The sampler's count follows the run's length: half its ticks at least (a
            // fast disk writes and reads the 256 MiB in 0.3 s, 6 ticks at 20 Hz).
            let threads = &account["threads"];
            let ticks =
                account["seconds"].as_f64().unwrap_or(0.0) * threads["hz"].as_f64().unwrap_or(0.0);
            assert!(
                threads["samples"].as_u64().unwrap_or(0) as f64 >= (ticks / 2.0).clamp(3.0, 10.0),
                "round {round}, {what}: no account of its threads: {account}"
            );
            judged += 1;
            if let Some(message) = disturbed(&doc) {
                if names_a_real_load(&doc) {
                    eprintln!("round {round}, {what}: the machine was busy: {message}");
                } else {
                    alarms.push(format!("round {round}, {what}: {message}: {account}"));
                }
            }
        }
    }
    common::say(&format!(
        "quiet_runs_raise_no_false_alarm: {judged} runs judged, {} false alarms",
        alarms.len()
    ));
    assert!(alarms.is_empty(), "false alarms: {alarms:#?}");
}

#[test]
fn two_profiles_at_once_name_each_other_and_since_and_compare_blame_no_hardware() {
    let _lock = common::rig::exclusive();
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let folder = dir.path().join("work");
    std::fs::create_dir(&folder).unwrap();
    let (first_db, second_db) = (dir.path().join("first.db"), dir.path().join("second.db"));
    let profile = |db: &Path| {
        let mut command = ratelab();
        command
            .arg("profile")
            .arg("--quick")
            .args(["--json", "-q", "--db"])
            .arg(db)
            .current_dir(&folder)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        command
    };
    // A profile alone first: what the later one in the same store sets itself against.
    let alone = run_json(&mut profile(&first_db));
    let other = profile(&second_db).spawn().unwrap();
    let this = profile(&first_db).spawn().unwrap();
    let (other_pid, this_pid) = (other.id(), this.id());
    let (other, this) = (
        other.wait_with_output().unwrap(),
        this.wait_with_output().unwrap(),
    );
    assert!(other.status.success() && this.status.success());
    let (other, this) = (common::json(&other.stdout), common::json(&this.stdout));
    for (doc, them) in [(&this, other_pid), (&other, this_pid)] {
        let message = disturbed(doc).expect("two profiles at once disturb each other");
        eprintln!("{message}");
        assert!(
            message.contains(&format!("another ratelab (pid {them})")),
            "{message}"
        );
    }
    // The later profile in the store is set against the one alone: whatever moved, it
    // is not put down to the storage.
    let codes: Vec<&str> = this["verdicts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["code"].as_str().unwrap())
        .collect();
    assert!(!codes.contains(&"changed_since_last_profile"), "{codes:?}");
    assert!(
        codes.iter().any(|c| c.ends_with("since_last_profile")),
        "{codes:?}"
    );
    let compared = run_json(
        ratelab()
            .args(["results", "compare"])
            .arg(alone["run_id"].to_string())
            .arg(this["run_id"].to_string())
            .args(["--json", "--db"])
            .arg(&first_db),
    );
    assert_eq!(
        compared["runs"][1]["disturbed"], true,
        "{}",
        compared["runs"]
    );
    for workload in compared["workloads"].as_array().unwrap() {
        for group in workload["groups"].as_array().unwrap() {
            for change in group["changes"].as_array().unwrap() {
                assert_eq!(change["beyond_noise"], false, "{group}");
            }
        }
    }
}
