//! `ratelab fleet` over hosts made of network namespaces, each with its own host name and
//! sshd: the verb runs on each, ratelab is copied where it is missing, every run comes
//! back and is stored with its machine, and a host that is down is reported while the
//! others finish. These need root; without it they say why they skip.

mod common;

use std::process::Output;

use common::ssh_hosts::Hosts;
use common::{ratelab, root_or_skip, stored_runs};

const NEEDS: &str = "it makes network namespaces with their own sshd";

/// `ratelab fleet ARGS -- cpu ...` through the rig's ssh, storing into `db`.
fn fleet(hosts: &Hosts, args: &[String], db: &std::path::Path) -> Output {
    ratelab()
        .env("RATELAB_SSH", hosts.ssh())
        .arg("fleet")
        .args(args)
        .arg("--db")
        .arg(db)
        .arg("--")
        .args(common::QUICK_CPU)
        .output()
        .unwrap()
}

/// Runs a fleet of a 30 s cpu test with `args` on `hosts` (its own process group, as a
/// shell runs it), waits until ratelab runs on each host of `running`, then `settle`
/// more, and presses Ctrl-C (SIGINT to the group). Checks it exits 130 well before the
/// test's end and leaves no ratelab on any host; returns its stderr.
fn interrupt(
    hosts: &Hosts,
    count: usize,
    args: &[&str],
    db: &std::path::Path,
    running: &[usize],
    settle: std::time::Duration,
) -> String {
    use std::os::unix::process::CommandExt;
    let mut command = ratelab();
    command
        .env("RATELAB_SSH", hosts.ssh())
        .arg("fleet")
        .args(args);
    for index in 0..count {
        command.args(["--host", &hosts.destination(index)]);
    }
    let child = command
        .arg("--db")
        .arg(db)
        .args([
            "--",
            "cpu",
            "--test",
            "int",
            "--threads",
            "1",
            "--seconds",
            "30",
        ])
        .process_group(0)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let started = std::time::Instant::now();
    while running
        .iter()
        .any(|&i| hosts.ratelab_processes(i).is_empty())
    {
        assert!(started.elapsed().as_secs() < 30, "the runs never started");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    std::thread::sleep(settle);
    // Ctrl-C in a terminal signals the whole foreground process group.
    let group = rustix::process::Pid::from_child(&child);
    rustix::process::kill_process_group(group, rustix::process::Signal::INT).unwrap();
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr).to_string();
    assert_eq!(output.status.code(), Some(130), "{stderr}");
    assert!(
        started.elapsed().as_secs() < 25,
        "it waited for the runs to end: {stderr}"
    );
    for index in 0..count {
        assert!(
            hosts.ratelab_processes(index).is_empty(),
            "ratelab left on host {index}"
        );
    }
    stderr
}

#[test]
fn a_verb_runs_on_each_host_and_a_host_that_is_down_is_reported() {
    if !root_or_skip(
        "a_verb_runs_on_each_host_and_a_host_that_is_down_is_reported",
        NEEDS,
    ) {
        return;
    }
    let hosts = Hosts::new(3, &[2]);
    let dir = common::disk_tempdir();
    let db = dir.path().join("fleet.db");
    let args: Vec<String> = (0..3)
        .flat_map(|i| ["--host".to_string(), hosts.destination(i)])
        .collect();
    let output = fleet(&hosts, &args, &db);
    let (stdout, stderr) = (
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr),
    );
    eprintln!("{stdout}\n{stderr}");
    assert_eq!(output.status.code(), Some(3), "{stderr}");
    // Each reachable host got this ratelab; the one that is down is named with its reason.
    for index in 0..2 {
        assert!(
            stderr.contains(&format!("{}: copying ratelab", hosts.destination(index))),
            "{stderr}"
        );
        assert_eq!(std::fs::read_dir(hosts.cache(index)).unwrap().count(), 1);
    }
    let down = hosts.destination(2);
    assert!(
        stderr.contains(&format!(
            "ratelab: fleet: {down} ({down}): cannot reach it over ssh"
        )),
        "{stderr}"
    );
    // Two runs, stored with their machines, side by side.
    let runs = stored_runs(&db);
    let mut machines: Vec<&str> = runs
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["machine"].as_str().unwrap())
        .collect();
    machines.sort_unstable();
    assert_eq!(machines, ["host-1", "host-2"]);
    assert!(
        stdout.contains(&format!("host {}", hosts.destination(0))),
        "{stdout}"
    );
    assert!(stdout.contains("machine: host-2"), "{stdout}");
    assert!(
        stdout.contains("run 2:"),
        "the hosts side by side: {stdout}"
    );
}

#[test]
fn an_inventory_names_the_hosts_and_ratelab_is_copied_only_once() {
    if !root_or_skip(
        "an_inventory_names_the_hosts_and_ratelab_is_copied_only_once",
        NEEDS,
    ) {
        return;
    }
    let hosts = Hosts::new(2, &[]);
    let inventory = hosts.folder().join("lab.toml");
    std::fs::write(
        &inventory,
        format!(
            "[[host]]\nname = \"left\"\nssh = \"{}\"\n[[host]]\nname = \"right\"\nssh = \"{}\"\n",
            hosts.destination(0),
            hosts.destination(1)
        ),
    )
    .unwrap();
    let dir = common::disk_tempdir();
    let db = dir.path().join("fleet.db");
    let args = vec![inventory.display().to_string()];
    let first = fleet(&hosts, &args, &db);
    assert!(
        first.status.success(),
        "{}",
        String::from_utf8_lossy(&first.stderr)
    );
    let again = fleet(&hosts, &args, &db);
    let stderr = String::from_utf8_lossy(&again.stderr);
    assert!(again.status.success(), "{stderr}");
    assert!(!stderr.contains("copying"), "copied again: {stderr}");
    assert!(String::from_utf8_lossy(&again.stdout).contains("host left ("));
    assert_eq!(stored_runs(&db).as_array().unwrap().len(), 4);
}

#[test]
fn bad_fleet_input_is_refused_before_any_host_is_reached() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("fleet.db");
    let refused = |args: &[&str], words: &str| {
        let output = ratelab()
            .env("RATELAB_SSH", "false")
            .arg("fleet")
            .arg("--db")
            .arg(&db)
            .args(args)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(words), "{args:?}: {stderr}");
    };
    refused(
        &["--host", "x", "--", "results", "list"],
        "fleet runs a measuring verb",
    );
    refused(
        &["--host", "x", "--", "cpu", "--threads", "zero"],
        "the verb after --",
    );
    refused(
        &["--host", "x", "--", "cpu", "--db", "y.db"],
        "--db belongs to the fleet",
    );
    refused(&["--", "cpu"], "no hosts");
    let inventory = dir.path().join("bad.toml");
    std::fs::write(&inventory, "[[host]]\nname = \"a\"\nsssh = \"b\"\n").unwrap();
    refused(&[inventory.to_str().unwrap(), "--", "cpu"], "sssh");
}

#[test]
fn together_the_hosts_start_at_one_instant_and_the_skew_is_stored() {
    if !root_or_skip(
        "together_the_hosts_start_at_one_instant_and_the_skew_is_stored",
        NEEDS,
    ) {
        return;
    }
    let hosts = Hosts::new(3, &[]);
    let dir = common::disk_tempdir();
    let db = dir.path().join("fleet.db");
    let mut args: Vec<String> = vec!["--together".into()];
    args.extend((0..3).flat_map(|i| ["--host".to_string(), hosts.destination(i)]));
    let output = fleet(&hosts, &args, &db);
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    eprintln!("{stdout}\n{stderr}");
    assert!(output.status.success(), "{stderr}");
    assert!(stdout.contains("started together:"), "{stdout}");
    let runs = stored_runs(&db);
    assert_eq!(runs.as_array().unwrap().len(), 3);
    for id in 1..=3 {
        let doc = common::stored_run(&db, id);
        let fleet = &doc["fleet"];
        let skew = fleet["skew_s"].as_f64().unwrap();
        assert!(skew < 0.050, "skew {skew} s: {fleet}");
        // One kernel's clock: each offset is within its error of zero, plus a little.
        let offset = fleet["clock_offset_s"].as_f64().unwrap();
        assert!(offset.abs() < 0.005, "{fleet}");
        assert!(
            fleet["start_error_s"].as_f64().unwrap().abs() < 0.050,
            "{fleet}"
        );
        assert_eq!(fleet["hosts"].as_array().unwrap().len(), 3);
    }
}

#[test]
fn ctrl_c_during_a_together_run_stops_every_host_and_stores_them_incomplete() {
    let test = "ctrl_c_during_a_together_run_stops_every_host_and_stores_them_incomplete";
    if !root_or_skip(test, NEEDS) {
        return;
    }
    let hosts = Hosts::new(3, &[]);
    let dir = common::disk_tempdir();
    let db = dir.path().join("fleet.db");
    // Past the agreed instant (2 s after the start): every run is measuring.
    let settle = std::time::Duration::from_millis(2500);
    interrupt(&hosts, 3, &["--together"], &db, &[0, 1, 2], settle);
    let runs = stored_runs(&db);
    let runs = runs.as_array().unwrap();
    assert_eq!(runs.len(), 3, "{runs:?}");
    for run in runs {
        assert_eq!(run["status"], "incomplete", "{run}");
    }
}
#[test]
fn ctrl_c_stops_the_remote_run_which_comes_back_incomplete() {
    if !root_or_skip(
        "ctrl_c_stops_the_remote_run_which_comes_back_incomplete",
        NEEDS,
    ) {
        return;
    }
    let hosts = Hosts::new(2, &[]);
    let dir = common::disk_tempdir();
    let db = dir.path().join("fleet.db");
    let settle = std::time::Duration::from_millis(500);
    let stderr = interrupt(&hosts, 2, &[], &db, &[0], settle);
    assert!(stderr.contains("not run: interrupted"), "{stderr}");
    let runs = stored_runs(&db);
    let runs = runs.as_array().unwrap();
    assert_eq!(runs.len(), 1, "{runs:?}");
    assert_eq!(runs[0]["machine"], "host-1");
    assert_eq!(runs[0]["status"], "incomplete");
    let doc = common::stored_run(&db, 1);
    assert_eq!(doc["incomplete_reason"], "interrupted");
}
