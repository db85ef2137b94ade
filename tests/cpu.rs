//! `ratelab cpu` on the real machine: the empty-loop correction leaves nothing of a
//! test without work; a loop's rate doubles from 1 to 2 threads on 2 cores; idle-class
//! threads really run SCHED_IDLE; `--cpus 1` keeps every thread on core 1; repeat runs
//! agree; bad input names the flag; a baseline run is compared with.

mod common;

use std::process::Command;
use std::time::{Duration, Instant};

use common::{ratelab, refused, run_json};
use serde_json::Value;

fn cpu_doc(extra: &[&str]) -> Value {
    run_json(
        ratelab()
            .args(["cpu", "--json", "-q", "--no-store"])
            .args(extra),
    )
}

fn items(doc: &Value) -> Vec<Value> {
    doc["workloads"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["kind"] == "cpu")
        .expect("a cpu workload")["items"]
        .as_array()
        .unwrap()
        .clone()
}

/// CPU tests measure the cores: they run one at a time, never beside each other.
fn alone() -> std::sync::MutexGuard<'static, ()> {
    common::rig::exclusive()
}

fn cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// The empty test's work left per loop over the loop's own cost, and the int test's
/// loops per CPU-second, of one `cpu --test empty,int --threads 1` run.
fn empty_and_int(doc: &Value) -> (f64, f64) {
    let items = items(doc);
    let empty = &items[0];
    assert_eq!(empty["op"], "empty");
    assert!(empty["loops_per_sec"].is_null(), "{empty}");
    let left =
        empty["work_ns_per_loop"].as_f64().unwrap() / empty["empty_ns_per_loop"].as_f64().unwrap();
    (left, items[1]["loops_per_sec"].as_f64().unwrap())
}

/// `cpu --test empty,int --threads 1`, each test `seconds` long: 0.5 s or more is
/// long enough for ratelab's account to judge each stage.
fn empty_int(seconds: &str) -> Value {
    cpu_doc(&[
        "--test",
        "empty,int",
        "--threads",
        "1",
        "--seconds",
        seconds,
    ])
}

/// The median of an odd number of figures.
fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

#[test]
fn a_test_without_work_comes_out_near_zero() {
    let test = "a_test_without_work_comes_out_near_zero";
    let _alone = alone();
    common::up_to_three_tries(test, |_| {
        let load = common::load::Load::start();
        let doc = empty_int("500ms");
        let (left, _) = empty_and_int(&doc);
        eprintln!("empty test: {:.2}% of the loop's cost left", left * 100.0);
        common::check(load.disturbed(), || {
            assert!(left.abs() < 0.1, "{left}");
            // A test with work keeps nearly all of its time.
            let int = &items(&doc)[1];
            assert!(
                int["work_ns_per_loop"].as_f64().unwrap()
                    > 5.0 * int["empty_ns_per_loop"].as_f64().unwrap()
            );
            common::Try::Checked
        })
    });
}

#[test]
fn beside_a_busy_process_per_core_the_cpu_clock_keeps_the_figures_and_the_loss_is_said() {
    let test = "beside_a_busy_process_per_core";
    let _alone = alone();
    // Rounds of a quiet run then one beside a `yes` per core, compared round by round:
    // a VM's host moves one run's rate by 5-8% from the next, and a round's two runs
    // share its mood. Tests of 1 s: of 0.5 s, a round strayed up to 12%.
    common::up_to_three_tries(test, |_| {
        // The yes are the test's own: other work is what the test measures beside them.
        let others = common::load::Load::start();
        let mut ratios = Vec::new();
        let mut lefts = Vec::new();
        for _ in 0..5 {
            let doc = empty_int("1s");
            let quiet = empty_and_int(&doc).1;
            let load = common::BusyCores::start(cpus());
            let doc = empty_int("1s");
            drop(load);
            let message =
                common::disturbed(&doc).expect("a run beside a busy process per core is disturbed");
            assert!(message.contains("this run's threads waited "), "{message}");
            assert!(message.contains("yes (pid "), "{message}");
            let (left, busy) = empty_and_int(&doc);
            let wall = items(&doc)[1]["wall_loops_per_sec"].as_f64().unwrap();
            eprintln!(
                "beside yes: empty {:.2}% left, int {busy:.4e} loops per CPU-second, \
                 {wall:.4e} per wall second, quiet {quiet:.4e}: {message}",
                left * 100.0
            );
            lefts.push(left);
            // The load took the thread's CPU: on the wall clock the figure fell.
            assert!(
                wall < 0.85 * busy,
                "{wall:.4e} per wall second of {busy:.4e}"
            );
            ratios.push(busy / quiet);
        }
        let ratio = median(ratios.clone());
        common::say(&format!(
            "{test}: int per CPU-second beside yes over quiet, median of 5 rounds: {ratio:.3} \
             ({ratios:.3?})"
        ));
        // Rounds strayed 0.94-1.175 here and 1.008-1.145 on CI's machine (median
        // 1.096), where the wall clock gives about 0.6.
        // The hypervisor's steal moves the chunks' CPU clocks (the empty test came out
        // -14.85% at a steal of 8%): the test's own count of it may excuse a try.
        common::check(others.disturbed(), || {
            assert!(
                lefts.iter().all(|l| l.abs() < 0.1),
                "empty test left {lefts:?}"
            );
            assert!((0.85..=1.15).contains(&ratio), "{ratio}");
            common::Try::Checked
        })
    });
}

#[test]
fn a_loop_scales_about_twice_from_one_to_two_threads_on_two_cores() {
    let _alone = alone();
    if cpus() < 2 {
        common::skip(
            "a_loop_scales_about_twice_from_one_to_two_threads_on_two_cores",
            "this machine has one CPU",
        );
        return;
    }
    let test = "a_loop_scales_about_twice";
    // Three rounds, each 1 thread then 2, and the median of their speedups: this VM's
    // host moved a single round's 1-thread rate from 2.14e8 to 1.80e8 loops per CPU
    // second between one run and the next (2.23x in one round of a full suite).
    common::up_to_three_tries(test, |_| {
        let load = common::load::Load::start();
        let mut speedups = Vec::new();
        for _ in 0..3 {
            let doc = cpu_doc(&["--test", "int", "--threads", "1,2", "--seconds", "1"]);
            let items = items(&doc);
            let rate = |i: usize| items[i]["loops_per_sec"].as_f64().unwrap();
            eprintln!(
                "int: {:.3e} loops/s on 1 thread, {:.3e} on 2: {:.3}x",
                rate(0),
                rate(1),
                rate(1) / rate(0)
            );
            speedups.push(rate(1) / rate(0));
        }
        let speedup = median(speedups.clone());
        // Two threads need two cores: beside other work they share them.
        common::check(load.disturbed(), || {
            assert!(
                (1.7..=2.2).contains(&speedup),
                "median {speedup:.3} of {speedups:.3?}"
            );
            common::Try::Checked
        })
    });
}

/// The scheduling policy (field 41 of /proc/PID/task/TID/stat) of every thread of `pid`
/// but the main one.
fn worker_policies(pid: u32) -> Vec<i64> {
    let mut policies = Vec::new();
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return policies;
    };
    for task in tasks.filter_map(Result::ok) {
        if task.file_name().to_string_lossy() == pid.to_string() {
            continue;
        }
        let Ok(stat) = std::fs::read_to_string(task.path().join("stat")) else {
            continue;
        };
        let after_comm = &stat[stat.rfind(')').unwrap() + 2..];
        // Fields from 3 on; policy is field 41.
        if let Some(policy) = after_comm.split_whitespace().nth(41 - 3) {
            policies.push(policy.parse().unwrap());
        }
    }
    policies
}

#[test]
fn idle_class_threads_really_run_sched_idle() {
    let _alone = alone();
    let child = ratelab()
        .args([
            "cpu",
            "--test",
            "int",
            "--threads",
            "2",
            "--class",
            "idle",
            "--seconds",
            "3",
        ])
        .args(["--json", "-q", "--no-store"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let started = Instant::now();
    let mut seen = Vec::new();
    while started.elapsed() < Duration::from_secs(20) {
        let policies = worker_policies(pid);
        // The two test threads, and any other the process has, once they are set.
        if policies.iter().filter(|&&p| p == 5).count() >= 2 {
            seen = policies;
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success());
    assert!(
        seen.iter().filter(|&&p| p == 5).count() >= 2,
        "SCHED_IDLE (5) not seen on two threads: {seen:?}"
    );
    let doc = common::json(&output.stdout);
    let item = &doc["workloads"][0]["items"][0];
    assert_eq!(item["class"], "idle");
    for thread in item["per_thread"].as_array().unwrap() {
        assert_eq!(thread["class_seen"], "idle", "{item}");
    }
}

#[test]
fn cpus_1_keeps_every_thread_on_core_1_and_the_monitor_says_so() {
    let _alone = alone();
    if cpus() < 2 {
        common::skip(
            "cpus_1_keeps_every_thread_on_core_1_and_the_monitor_says_so",
            "this machine has one CPU",
        );
        return;
    }
    common::up_to_three_tries("cpus_1_keeps_every_thread_on_core_1", |_| {
        let doc = run_json(
            ratelab()
                .args([
                    "cpu",
                    "--test",
                    "int,dot",
                    "--threads",
                    "1,2",
                    "--cpus",
                    "1",
                ])
                .args(["--seconds", "500ms", "--json", "-q", "--no-store"]),
        );
        let workload = |kind: &str| {
            doc["workloads"]
                .as_array()
                .unwrap()
                .iter()
                .find(|w| w["kind"] == kind)
                .unwrap_or_else(|| panic!("no {kind} workload"))
        };
        let items = workload("cpu")["items"].as_array().unwrap();
        for item in items {
            assert_eq!(item["cpus_seen"], serde_json::json!([1]), "{item}");
            assert_eq!(item["migrations"], 0, "{item}");
        }
        // The monitor saw every test thread on core 1, and core 1 busy.
        let samples = workload("monitor")["items"].as_array().unwrap();
        let test_threads: Vec<&Value> = samples
            .iter()
            .filter(|s| {
                s["op"] == "thread" && s["name"].as_str().is_some_and(|n| n.starts_with("cpu-"))
            })
            .collect();
        assert!(
            test_threads.len() >= 5,
            "too few samples of the test threads: {}",
            test_threads.len()
        );
        for sample in &test_threads {
            assert_eq!(sample["cpu"], 1, "{sample}");
        }
        let mean_active = |cpu: u64| {
            let active: Vec<f64> = samples
                .iter()
                .filter(|s| s["op"] == "core" && s["cpu"] == cpu)
                .filter_map(|s| s["active_fraction"].as_f64())
                .collect();
            active.iter().sum::<f64>() / active.len().max(1) as f64
        };
        eprintln!(
            "mean active: core 0 {:.2}, core 1 {:.2}",
            mean_active(0),
            mean_active(1)
        );
        assert!(
            mean_active(1) > 0.8,
            "core 1 was not busy: {}",
            mean_active(1)
        );
        // Two threads on one core share it: their rate is what they did in wall time,
        // not the sum of their CPU clocks (2x), beside other work on core 1 or not.
        // Where other work ran (core 0 too) is not the test's to control.
        let rate = |i: usize, field: &str| items[i][field].as_f64().unwrap();
        assert!(
            (rate(1, "loops_per_sec") / rate(1, "wall_loops_per_sec") - 1.0).abs() < 0.01,
            "{}",
            items[1]
        );
        let speedup = rate(1, "loops_per_sec") / rate(0, "loops_per_sec");
        assert!(speedup < 1.15, "{speedup}");
        common::Try::Checked
    });
}

#[test]
fn under_taskset_the_threads_keep_to_its_cpu_and_more_threads_are_warned_of() {
    let test = "under_taskset_the_threads_keep_to_its_cpu_and_more_threads_are_warned_of";
    let _alone = alone();
    if cpus() < 2 {
        common::skip(test, "this machine has one CPU");
        return;
    }
    let in_taskset = |args: &[&str]| {
        let mut command = Command::new("taskset");
        common::isolated(&mut command)
            .args(["-c", "1"])
            .arg(common::bin())
            .args(["cpu", "--test", "int", "--json", "--no-store"])
            .args(args);
        let output = command.output().expect("run taskset");
        let stderr = String::from_utf8_lossy(&output.stderr).to_string();
        assert!(output.status.success(), "{stderr}");
        (common::json(&output.stdout), stderr)
    };
    // Its default threads are the CPUs it may use: one, on cpu 1, and no warning.
    let (doc, stderr) = in_taskset(&["--seconds", "100ms"]);
    assert!(!stderr.contains("warning"), "{stderr}");
    assert_eq!(doc["workloads"][0]["target"], "cpus 1", "{doc}");
    let threads: Vec<u64> = items(&doc)
        .iter()
        .map(|i| i["threads"].as_u64().unwrap())
        .collect();
    assert_eq!(threads, [1]);
    common::up_to_three_tries(test, |_| {
        let load = common::load::Load::start();
        let (doc, stderr) = in_taskset(&["--threads", "1,2", "--seconds", "300ms"]);
        assert!(
            stderr
                .contains("2 threads on 1 CPU this process may use (cpu 1): they will take turns"),
            "{stderr}"
        );
        let items = items(&doc);
        for item in &items {
            assert_eq!(item["cpus_seen"], serde_json::json!([1]), "{item}");
        }
        let codes: Vec<&str> = doc["verdicts"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|v| v["code"].as_str())
            .collect();
        assert!(codes.contains(&"threads_shared_cpus"), "{codes:?}");
        assert!(!codes.contains(&"beyond_linear"), "{codes:?}");
        // Two threads taking turns on one CPU get no more done than one: the rate is
        // what they did in wall time, not the sum of their CPU clocks (2x).
        common::check(load.disturbed(), || {
            let speedup = items[1]["loops_per_sec"].as_f64().unwrap()
                / items[0]["loops_per_sec"].as_f64().unwrap();
            assert!(speedup < 1.4, "{speedup}");
            common::Try::Checked
        })
    });
}

#[test]
fn repeat_runs_agree_median_to_median() {
    let test = "repeat_runs_agree_median_to_median";
    let _alone = alone();
    let median = |runs: usize| -> f64 {
        let mut rates = Vec::new();
        for _ in 0..runs {
            let doc = cpu_doc(&["--test", "int", "--threads", "1", "--seconds", "500ms"]);
            rates.push(items(&doc)[0]["loops_per_sec"].as_f64().unwrap());
        }
        median(rates)
    };
    // The issue asks for 3% on an idle machine; tests share this one, so the bound is
    // generous. A VM's host can take its core for a while (12% between two medians was
    // seen once in a full suite): a second pair is allowed, and both pairs are printed.
    common::up_to_three_tries(test, |_| {
        let load = common::load::Load::start();
        let mut changes = Vec::new();
        for _ in 0..2 {
            let (first, second) = (median(3), median(3));
            let change = (second / first - 1.0).abs();
            common::say(&format!(
                "{test}: int, 1 thread: medians {first:.4e} and {second:.4e} loops/s: {:.2}% apart",
                change * 100.0
            ));
            changes.push(change);
            if change < 0.10 {
                break;
            }
        }
        common::check(load.disturbed(), || {
            assert!(
                changes.iter().any(|&c| c < 0.10),
                "two pairs of medians apart by {changes:?}"
            );
            common::Try::Checked
        })
    });
}

#[test]
fn bad_input_names_the_flag() {
    let _alone = alone();
    let cpu = |extra: &[&str]| {
        let mut command = ratelab();
        command.args(["cpu", "--no-store"]).args(extra);
        command
    };
    refused(
        &mut cpu(&["--test", "nope"]),
        2,
        &["no test named \"nope\" for --test"],
    );
    refused(&mut cpu(&["--threads", "0"]), 2, &["--threads 0"]);
    refused(
        &mut cpu(&["--threads", "4..2"]),
        2,
        &["invalid range \"4..2\""],
    );
    refused(
        &mut cpu(&["--class", "fast"]),
        2,
        &["invalid class \"fast\""],
    );
    refused(
        &mut cpu(&["--cpus", "4096"]),
        2,
        &["--cpus 4096", "not online"],
    );
    refused(&mut cpu(&["--seconds", "1ms"]), 2, &["--seconds 1ms"]);
    refused(&mut cpu(&["--loops", "0"]), 2, &["--loops 0"]);
}

#[test]
fn a_baseline_run_is_compared_with() {
    let _alone = alone();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("results.db");
    let run = |extra: &[&str]| {
        run_json(
            ratelab()
                .args([
                    "cpu",
                    "--test",
                    "int",
                    "--threads",
                    "1",
                    "--seconds",
                    "500ms",
                    "--json",
                    "-q",
                    "--db",
                ])
                .arg(&db)
                .args(extra),
        )
    };
    let test = "a_baseline_run_is_compared_with";
    let first = run(&[]);
    assert!(first["workloads"][0]["params"]["baseline"].is_null());
    // Without --baseline the first cpu run of this machine that nothing disturbed is the
    // baseline: beside other work, none.
    let second = run(&[]);
    let baseline = &second["workloads"][0]["params"]["baseline"]["run_id"];
    // Bookkeeping, whatever the machine did: a run ratelab called disturbed is never
    // the baseline, and one it did not is.
    if let Some(why) = common::disturbed(&first) {
        common::say(&format!(
            "{test}: the first run was called disturbed ({why}): no baseline"
        ));
        assert!(
            baseline.is_null(),
            "a disturbed run was taken as the baseline"
        );
    } else {
        assert_eq!(*baseline, 1);
        // Its share of the baseline is the second run's rate over the first's, as
        // each stored it: a figure no busy machine moves.
        let share =
            second["workloads"][0]["summary"]["scaling"][0]["points"][0]["share_of_baseline"]
                .as_f64()
                .unwrap();
        let rate = |doc: &serde_json::Value| items(doc)[0]["loops_per_sec"].as_f64().unwrap();
        let expected = rate(&second) / rate(&first);
        assert!(
            (share / expected - 1.0).abs() < 0.01,
            "share {share:.4}, the runs' rates give {expected:.4}"
        );
    }
    refused(
        ratelab().args(["cpu", "--baseline", "99", "--db"]).arg(&db),
        2,
        &["--baseline 99"],
    );
    // A run kept on other cores is no baseline: it is not picked, and asking for it fails.
    if cpus() >= 2 {
        let pinned = run(&["--cpus", "1"]);
        assert!(
            pinned["workloads"][0]["params"]["baseline"].is_null(),
            "{pinned}"
        );
        refused(
            ratelab()
                .args([
                    "cpu",
                    "--test",
                    "int",
                    "--cpus",
                    "1",
                    "--baseline",
                    "1",
                    "--db",
                ])
                .arg(&db),
            2,
            &["--baseline 1", "all cpus", "give the same --cpus"],
        );
    }
}

#[test]
fn a_thread_that_cannot_start_stops_the_test_instead_of_hanging_it() {
    let _alone = alone();
    let test = "a_thread_that_cannot_start_stops_the_test_instead_of_hanging_it";
    if !common::root_or_skip(test, "it runs ratelab as nobody under a process limit")
        || !common::have_or_skip(test, "setpriv")
        || !common::have_or_skip(test, "prlimit")
    {
        return;
    }
    // A copy nobody may run, outside the build folder.
    let dir = tempfile::Builder::new()
        .prefix("ratelab-nproc-")
        .tempdir_in("/tmp")
        .unwrap();
    std::fs::set_permissions(
        dir.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let binary = dir.path().join("ratelab");
    std::fs::copy(assert_cmd::cargo::cargo_bin!("ratelab"), &binary).unwrap();
    let child = common::isolated(&mut std::process::Command::new("setpriv"))
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "prlimit",
            "--nproc=8",
        ])
        .arg(&binary)
        .args([
            "cpu",
            "--test",
            "int",
            "--threads",
            "12",
            "--seconds",
            "200ms",
            "--no-store",
            "-q",
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let waiter = std::thread::spawn(move || child.wait_with_output().unwrap());
    let started = Instant::now();
    while !waiter.is_finished() {
        if started.elapsed() > Duration::from_secs(30) {
            // SAFETY: a signal to the child this test started.
            unsafe { libc::kill(pid as i32, libc::SIGKILL) };
            panic!("ratelab cpu hung when a test thread could not start");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let output = waiter.join().unwrap();
    let message = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(3), "{message}");
    assert!(message.contains("cannot start test thread"), "{message}");
}

#[test]
fn a_class_that_needs_root_is_refused_before_anything_runs() {
    let test = "a_class_that_needs_root_is_refused_before_anything_runs";
    if !common::root_or_skip(test, "it runs ratelab as nobody")
        || !common::have_or_skip(test, "setpriv")
    {
        return;
    }
    let dir = common::nobody_tempdir(0o777);
    let db = dir.path().join("results.db");
    let output = common::as_nobody(common::bin())
        .args(["cpu", "--test", "int", "--class", "normal,nice:-5", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(3), "{stderr}");
    assert!(
        stderr.contains("--class nice:-5 needs root or CAP_SYS_NICE"),
        "{stderr}"
    );
    assert!(
        output.stdout.is_empty(),
        "something ran: {}",
        String::from_utf8_lossy(&output.stdout)
    );
    // The database may exist, but holds no run.
    if db.exists() {
        let runs = common::stored_runs(&db);
        assert_eq!(runs.as_array().map_or(0, Vec::len), 0, "{runs}");
    }
}

/// The C twin of ratelab's kernels (bench/cpu-vs-c.d), built with `cc -O2` into `dir`.
fn c_twin(dir: &std::path::Path) -> std::path::PathBuf {
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("bench/cpu-vs-c.d");
    let mut objects = Vec::new();
    for (file, flags) in [
        ("main", &[][..]),
        ("int", &[]),
        ("fma", &["-mavx2", "-mfma"]),
        ("dot", &["-mavx512f"]),
        ("matmul", &["-mavx512f"]),
        ("spmv", &[]),
        ("amx", &[]),
    ] {
        let object = dir.join(format!("{file}.o"));
        let out = Command::new("cc")
            .arg("-O2")
            .args(flags)
            .arg("-c")
            .arg(src.join(format!("{file}.c")))
            .arg("-o")
            .arg(&object)
            .output()
            .expect("cc runs");
        assert!(out.status.success(), "cc {file}.c: {out:?}");
        objects.push(object);
    }
    let twin = dir.join("twin");
    let out = Command::new("cc")
        .args(&objects)
        .arg("-o")
        .arg(&twin)
        .output()
        .expect("cc links");
    assert!(out.status.success(), "cc link: {out:?}");
    twin
}

#[test]
fn the_int_loop_runs_as_fast_as_its_c_twin() {
    let test = "the_int_loop_runs_as_fast_as_its_c_twin";
    if !common::have_or_skip(test, "cc") || !common::have_or_skip(test, "taskset") {
        return;
    }
    let _alone = alone();
    let dir = tempfile::tempdir().unwrap();
    let twin = c_twin(dir.path());
    let core = (cpus() - 1).to_string();
    // The same four dependent imul + add a loop as ratelab's int kernel, in C, timed on
    // its thread's CPU clock around one call, as ratelab times its own: a loop rate of
    // ratelab's that is 20% off is 20% off this one, which ratelab did not measure, and
    // other work sharing the core moves neither.
    let c_rate = || {
        let out = Command::new("taskset")
            .args(["-c", &core])
            .arg(&twin)
            .args(["--test", "int", "--seconds", "0.5"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        let run = common::json(&out.stdout);
        run["loops"].as_f64().unwrap() / run["cpu_seconds"].as_f64().unwrap()
    };
    let ratelab_rate = || {
        let doc = run_json(
            Command::new("taskset")
                .args(["-c", &core])
                .arg(common::bin())
                .args(["cpu", "--json", "-q", "--no-store"])
                .args(["--test", "int", "--threads", "1", "--seconds", "500ms"]),
        );
        items(&doc)[0]["raw_loops_per_sec"].as_f64().unwrap()
    };
    common::up_to_three_tries(test, |_| {
        let load = common::load::Load::start();
        let ratios: Vec<f64> = (0..3).map(|_| ratelab_rate() / c_rate()).collect();
        common::say(&format!("{test}: ratelab/C loop rates {ratios:.3?}"));
        common::check(load.disturbed(), || {
            let ratio = median(ratios.clone());
            // bench/cpu-vs-c reads 0.99-1.02 here.
            assert!(
                (0.9..1.1).contains(&ratio),
                "ratelab's int loop at {ratio:.3} times its C twin's rate ({ratios:.3?})"
            );
            common::Try::Checked
        })
    });
}
