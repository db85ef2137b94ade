//! `ratelab scale -- CMD`: a CPU-bound command runs about twice as fast on 2 CPUs as on
//! one, held by affinity or by a CFS quota; a command that sleeps does not speed up; bad
//! input names the flag or the program.

mod common;

use common::{ratelab, refused, root_or_skip, run_json};
use serde_json::Value;
use std::ops::RangeInclusive;

/// Two shell loops of fixed work at once: CPU-bound, and able to use two CPUs.
const TWO_BUSY_LOOPS: &str =
    "busy() { i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done; }; busy & busy & wait";

fn cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// One run's points, and what ratelab's own account said where its figures cannot
/// be taken as the machine's steady speed: other work took the CPUs it timed on (its
/// `disturbed` verdict), or the same work's CPU time moved between runs
/// (`cpu_time_moved`: a host's other guests slowing its vCPUs).
struct Scaled {
    points: Vec<Value>,
    items: Vec<Value>,
    unsteady: Option<String>,
}

fn scaled(extra: &[&str], repeat: u32, command: &[&str]) -> Scaled {
    let doc = run_json(
        ratelab()
            .args(["scale", "--cpus", "1,2", "--repeat"])
            .arg(repeat.to_string())
            .args(["--json", "-q", "--no-store"])
            .args(extra)
            .arg("--")
            .args(command),
    );
    let verdicts = doc["verdicts"].as_array().unwrap();
    let said = |code: &str| {
        verdicts
            .iter()
            .find(|v| v["code"] == code)
            .map(|v| v["message"].as_str().unwrap_or_default().to_string())
    };
    let unsteady: Vec<String> = ["disturbed", "cpu_time_moved"]
        .into_iter()
        .filter_map(said)
        .collect();
    Scaled {
        points: doc["workloads"][0]["summary"]["points"]
            .as_array()
            .unwrap()
            .clone(),
        items: doc["workloads"][0]["items"].as_array().unwrap().clone(),
        unsteady: (!unsteady.is_empty()).then(|| unsteady.join("; ")),
    }
}

/// The most CPUs' worth of time any run at `cpus` used at once: its CPU time over its
/// wall time.
fn most_cpus_used(run: &Scaled, cpus: u64) -> f64 {
    run.items
        .iter()
        .filter(|i| i["cpus"] == cpus)
        .map(|i| {
            (i["user_seconds"].as_f64().unwrap() + i["system_seconds"].as_f64().unwrap())
                / i["seconds"].as_f64().unwrap()
        })
        .fold(0.0, f64::max)
}

/// Runs `command` at 1 and 2 CPUs up to three times, while ratelab's own account says
/// a try's figures are not the machine's steady speed and its speedup at 2 CPUs falls
/// outside `range`; a run held to one CPU never uses more than one.
fn speedup_in(test: &str, extra: &[&str], command: &[&str], range: RangeInclusive<f64>) {
    common::up_to_three_tries(test, |_| {
        let run = scaled(extra, 9, command);
        let speedup = run.points[1]["speedup"].as_f64().unwrap();
        eprintln!("{test}: {speedup:.3}x on 2 CPUs");
        if extra.is_empty() {
            // Affinity holds whatever the host does: one CPU's time at most.
            let used = most_cpus_used(&run, 1);
            assert!(used <= 1.05, "a run held to 1 CPU used {used:.2} CPUs");
        }
        common::check(run.unsteady, || {
            assert!(
                range.contains(&speedup),
                "{speedup:.3}x on 2 CPUs, outside {range:?}"
            );
            common::Try::Checked
        })
    });
}

#[test]
fn cpu_bound_work_runs_about_twice_as_fast_on_two_cpus_and_sleep_does_not() {
    let test = "cpu_bound_work_runs_about_twice_as_fast_on_two_cpus_and_sleep_does_not";
    let _alone = common::rig::exclusive();
    if cpus() < 2 {
        common::skip(test, "this machine has one CPU");
        return;
    }
    // Earlier tests leave dirty pages whose writeback takes CPU from one of the two
    // timed CPUs: flush them first.
    let _ = std::process::Command::new("sync").status();
    speedup_in(test, &[], &["sh", "-c", TWO_BUSY_LOOPS], 1.6..=2.2);
    // A sleeper's time is the host's clock, not its CPUs': it holds however they move.
    let sleep = scaled(&[], 5, &["sleep", "0.3"]).points;
    let speedup = sleep[1]["speedup"].as_f64().unwrap();
    eprintln!("sleep 0.3: {speedup:.3}x on 2 CPUs");
    assert!((0.9..=1.1).contains(&speedup), "{sleep:?}");
}

#[test]
fn a_cpu_quota_holds_a_command_as_a_vm_of_that_many_vcpus() {
    let test = "a_cpu_quota_holds_a_command_as_a_vm_of_that_many_vcpus";
    let _alone = common::rig::exclusive();
    if !root_or_skip(test, "it makes a cpu cgroup") || cpus() < 2 {
        return;
    }
    speedup_in(test, &["--vcpus"], &["sh", "-c", TWO_BUSY_LOOPS], 1.4..=2.2);
    // The cgroup is gone after the run.
    let left = std::fs::read_dir("/sys/fs/cgroup/cpu")
        .map(|d| {
            d.filter_map(Result::ok)
                .filter(|e| {
                    e.file_name()
                        .to_string_lossy()
                        .starts_with("ratelab-scale-")
                })
                .count()
        })
        .unwrap_or(0);
    assert_eq!(left, 0, "a ratelab-scale cgroup was left behind");
}

#[test]
fn bad_input_names_the_flag_or_program() {
    // Its short runs would take CPU from the timed ones beside it.
    let _alone = common::rig::exclusive();
    let scale = |args: &[&str]| {
        let mut command = ratelab();
        command.args(["scale", "--no-store"]).args(args);
        command
    };
    refused(&mut scale(&["--cpus", "0", "--", "true"]), 2, &["--cpus 0"]);
    refused(
        &mut scale(&["--cpus", "4096", "--", "true"]),
        2,
        &["--cpus 4096"],
    );
    refused(
        &mut scale(&["--repeat", "0", "--", "true"]),
        2,
        &["--repeat 0"],
    );
    refused(
        &mut scale(&["--", "no-such-program-here"]),
        3,
        &["no-such-program-here", "no such program"],
    );
    refused(&mut scale(&[]), 2, &["CMD"]);
}
