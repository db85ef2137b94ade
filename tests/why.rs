//! `ratelab why` on commands of this machine: a sleeper sleeps at little cost, a
//! compressor is limited by its CPU (in a pipeline too), and by the wait for it where
//! `yes` shares its CPU; the command's output and exit code stay its own; bad input,
//! a command that does not exist, a process that is not there and Ctrl-C are handled;
//! an ordinary user sees its own commands, and is told what it cannot see of others'.

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{Try, check, ratelab, refused, up_to_three_tries};
use serde_json::Value;

/// The run document `why` wrote to `out`.
fn document(out: &Path) -> Value {
    let text = std::fs::read(out).expect("why wrote its document");
    common::json(&text)
}

/// Runs `ratelab why --json --out OUT --no-store EXTRA -- COMMAND`, which must exit
/// `code`; returns the document.
fn why(extra: &[&str], command: &[&str], code: i32) -> Value {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("why.json");
    let output = ratelab()
        .args(["why", "--json", "--no-store", "--out"])
        .arg(&out)
        .args(extra)
        .arg("--")
        .args(command)
        .output()
        .expect("start ratelab why");
    assert_eq!(
        output.status.code(),
        Some(code),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    document(&out)
}

/// The stored summary's `limiting`.
fn limiting(doc: &Value) -> &Value {
    &doc["workloads"][0]["summary"]["limiting"]
}

/// A compressible file of `mib` MiB in `dir`.
fn text_file(dir: &Path, mib: usize) -> std::path::PathBuf {
    let path = dir.join("text.txt");
    common::write_text(&path, mib << 20);
    path
}

#[test]
fn a_sleeper_sleeps_and_watching_it_costs_little() {
    // Every test of this file runs alone: the others start and busy processes, which
    // this one's account would rightly count as other work.
    let _alone = common::rig::exclusive();
    let test = "a_sleeper_sleeps_and_watching_it_costs_little";
    // What the watch costs is CPU time, which a host that takes the vCPUs inflates (the
    // sampler took 2.4% of a core beside a steal of 40%): the test's own count of the
    // steal and of other work says when the machine was not quiet.
    common::up_to_three_tries(test, |_| {
        let load = common::load::Load::start();
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("why.json");
        // Reaped below by wait4, which std's Child does not offer with its rusage.
        #[allow(clippy::zombie_processes)]
        let child = ratelab()
            .args(["why", "--json", "--no-store", "--out"])
            .arg(&out)
            .args(["--", "sleep", "5"])
            .spawn()
            .expect("start ratelab why");
        let started = Instant::now();
        // wait4 gives the CPU time of ratelab and what it reaped: sleep, a millisecond.
        let mut status = 0;
        // SAFETY: rusage is plain data the kernel fills; the pid is this test's child.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        let pid = child.id() as libc::pid_t;
        // SAFETY: as above.
        assert_eq!(unsafe { libc::wait4(pid, &mut status, 0, &mut usage) }, pid);
        let wall = started.elapsed().as_secs_f64();
        assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0);
        let seconds = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
        let cpu = seconds(usage.ru_utime) + seconds(usage.ru_stime);
        let doc = document(&out);
        let limit = limiting(&doc);
        assert_eq!(limit["step"], "sleep", "{limit}");
        assert!(limit["share"].as_f64().unwrap() >= 0.95, "{limit}");
        let context = &doc["workloads"][0]["context"];
        let sampler = context["sampler_cpu_seconds"].as_f64().unwrap();
        let sampled = context["sampled_s"].as_f64().unwrap();
        assert!(sampled > 4.9, "{context}");
        common::say(&format!(
            "a_sleeper_sleeps: ratelab used {:.2}% of a core, its sampler {:.2}%",
            cpu / wall * 100.0,
            sampler / sampled * 100.0
        ));
        // A sleeper waits for no CPU, so no `disturbed` is said of it; but the sampler
        // lists /proc whenever a new process starts, and a machine where others start
        // and run processes (the suite's other tests) costs it more (3.5% here beside
        // them): the run's account of other processes' CPU says so.
        let account = &doc["interference"];
        let others = account["other_cpu_seconds"].as_f64().unwrap()
            / (account["seconds"].as_f64().unwrap() * account["cpus"].as_f64().unwrap());
        let busy = (others >= 0.1).then(|| {
            format!(
                "other processes used {:.0}% of the CPUs meanwhile",
                others * 100.0
            )
        });
        common::check(load.disturbed().or(busy), || {
            assert!(
                sampler <= 0.02 * sampled,
                "the sampler took {sampler} s of {sampled} s"
            );
            assert!(
                cpu <= 0.02 * wall,
                "ratelab took {cpu} s of CPU in {wall} s"
            );
            common::Try::Checked
        })
    });
}

#[test]
fn the_commands_output_and_exit_code_stay_its_own() {
    let _alone = common::rig::exclusive();
    let output = ratelab()
        .args([
            "why",
            "--no-store",
            "--",
            "sh",
            "-c",
            "echo out; echo err >&2; exit 7",
        ])
        .output()
        .expect("start ratelab why");
    assert_eq!(output.status.code(), Some(7));
    assert_eq!(String::from_utf8_lossy(&output.stdout), "out\n");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.starts_with("err\n"), "{stderr}");
    assert!(stderr.contains("command_failed"), "{stderr}");
    assert!(
        stderr.contains("why "),
        "the report goes to stderr: {stderr}"
    );
    let killed = ratelab()
        .args(["why", "--no-store", "--", "sh", "-c", "kill -TERM $$"])
        .output()
        .expect("start ratelab why");
    assert_eq!(killed.status.code(), Some(128 + 15));
}

#[test]
fn the_json_document_goes_to_stderr_to_a_file_or_to_stdout_as_asked() {
    let _alone = common::rig::exclusive();
    let help = ratelab().args(["why", "--help"]).output().unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    let json = help
        .split("\n      --json\n")
        .nth(1)
        .and_then(|after| after.split("\n\n").next())
        .unwrap_or_default();
    assert!(
        json.contains("stderr") && !json.contains("stdout"),
        "{help}"
    );
    assert!(help.contains("`-` for stdout"), "{help}");
    let command = ["--", "sh", "-c", "echo out"];
    // By default on stderr: stdout is the command's alone.
    let output = ratelab()
        .args(["why", "--json", "--no-store"])
        .args(command)
        .output()
        .unwrap();
    assert!(output.status.success());
    assert_eq!(String::from_utf8_lossy(&output.stdout), "out\n");
    let doc = common::json(&output.stderr);
    assert_eq!(doc["workloads"][0]["kind"], "why", "{doc}");
    // `--out -`: on stdout, after what the command printed there.
    let output = ratelab()
        .args(["why", "--json", "--no-store", "--out", "-"])
        .args(command)
        .output()
        .unwrap();
    assert!(output.status.success());
    let stdout = String::from_utf8_lossy(&output.stdout);
    let after = stdout
        .strip_prefix("out\n")
        .expect("the command's output first");
    assert_eq!(
        common::json(after.as_bytes())["workloads"][0]["kind"],
        "why"
    );
    assert!(
        output.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    // `--out FILE`: there, and nothing of ratelab's on either stream.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("why.json");
    let output = ratelab()
        .args(["why", "--json", "--no-store", "--out"])
        .arg(&file)
        .args(command)
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&output.stdout), "out\n");
    assert!(output.stderr.is_empty());
    assert_eq!(document(&file)["workloads"][0]["kind"], "why");
}

#[test]
fn processes_of_one_name_are_one_row_of_the_table_and_apart_in_the_document() {
    let _alone = common::rig::exclusive();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    let output = ratelab()
        .env("COLUMNS", "80")
        .args(["why", "--db"])
        .arg(&db)
        .args(["--", "sh", "-c", "sleep 0.3 & sleep 0.3 & sleep 0.3 & wait"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let rows: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with('│') && l.contains("┆ sleep "))
        .collect();
    assert!(
        rows.len() == 1 && rows[0].contains("×3"),
        "one row of three sleeps: {stderr}"
    );
    assert!(
        stderr.contains("most waited on") && !stderr.contains("left out to fit"),
        "{stderr}"
    );
    let doc = common::json(common::results(&db, &["export", "1"]).as_bytes());
    let sleeps = doc["workloads"][0]["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["op"] == "process" && i["name"] == "sleep")
        .count();
    assert_eq!(sleeps, 3, "{doc}");
}

#[test]
fn a_short_command_s_account_agrees_with_itself() {
    let _alone = common::rig::exclusive();
    for command in ["false", "true"] {
        let output = ratelab()
            .env("COLUMNS", "200")
            .args(["why", "--no-store", "--hz", "1000", "--", command])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        // A command of a millisecond or two holds too few of the plan's intervals for
        // a rate of samples to mean anything.
        let title = stderr
            .lines()
            .find(|l| l.starts_with("where the "))
            .expect("the steps table");
        assert!(!title.contains("a second"), "{stderr}");
        // Its wall time is the base of the answer, the title and the rows alike.
        let wall = title
            .strip_prefix("where the ")
            .and_then(|t| t.split(" of `").next())
            .unwrap();
        assert!(stderr.contains(&format!("% of {wall} ")), "{stderr}");
        for row in stderr.lines().filter(|l| l.contains("┆ 100.0% ┆")) {
            assert!(row.contains(&format!(" {wall} ┆")), "{stderr}");
        }
    }
}

#[test]
fn a_compressor_is_limited_by_its_cpu_alone_and_in_a_pipeline() {
    let _alone = common::rig::exclusive();
    if !common::have_or_skip("a_compressor_is_limited_by_its_cpu", "zstd") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let file = text_file(dir.path(), 6);
    let file = file.to_str().unwrap();
    let _ = std::fs::read(file);
    let pipeline = format!("cat {file} | zstd -19 -T1 > /dev/null");
    for (test, command) in [
        (
            "zstd -19 -T1",
            vec!["zstd", "-19", "-T1", "-q", "-f", file, "-o", "/dev/null"],
        ),
        ("cat | zstd -19 -T1", vec!["sh", "-c", &pipeline]),
    ] {
        up_to_three_tries(test, |_| {
            let load = common::load::Load::start();
            let doc = why(&[], &command, 0);
            check(load.disturbed(), || {
                let limit = limiting(&doc);
                assert_eq!(limit["step"], "cpu", "{test}: {limit}");
                assert_eq!(limit["where"], "zstd", "{test}: {limit}");
                // A share of the wall, which zstd spent on its CPU nearly all of: no
                // more than all of it, nor much less.
                let share = limit["share"].as_f64().unwrap();
                common::say(&format!(
                    "{test}: on its CPU {:.1}% of the wall",
                    share * 100.0
                ));
                assert!((0.9..=1.0).contains(&share), "{test}: {limit}");
                Try::Checked
            })
        });
    }
}

#[test]
fn a_compressor_sharing_its_cpu_with_yes_waits_for_it_and_names_yes() {
    let _alone = common::rig::exclusive();
    if !common::have_or_skip("a_compressor_sharing_its_cpu", "zstd") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let file = text_file(dir.path(), 3);
    let _ = std::fs::read(&file);
    let test = "a_compressor_sharing_its_cpu_with_yes";
    up_to_three_tries(test, |_| {
        let mut yes = Command::new("taskset")
            .args(["-c", "0", "yes"])
            .stdout(Stdio::null())
            .spawn()
            .expect("start yes");
        std::thread::sleep(Duration::from_millis(200));
        let load = common::load::Load::start();
        let doc = why(
            &[],
            &[
                "taskset",
                "-c",
                "0",
                "zstd",
                "-19",
                "-T1",
                "-q",
                "-f",
                file.to_str().unwrap(),
                "-o",
                "/dev/null",
            ],
            0,
        );
        let disturbed = load.disturbed();
        let _ = yes.kill();
        let _ = yes.wait();
        let limit = limiting(&doc);
        assert_eq!(limit["step"], "cpu_wait", "{limit}");
        assert!(
            limit["held_by"].as_array().unwrap().iter().any(|h| h
                .as_str()
                .unwrap()
                .starts_with(&format!("yes (pid {})", yes.id()))),
            "{limit}"
        );
        // Two busy processes of one weight on one core: the scheduler gives each half
        // of it, so zstd waits for it about half its wall.
        let share = limit["share"].as_f64().unwrap();
        common::say(&format!(
            "{test}: waiting for its CPU {:.1}% of the wall",
            share * 100.0
        ));
        check(disturbed, || {
            assert!((0.42..=0.58).contains(&share), "{limit}");
            Try::Checked
        })
    });
}

#[test]
fn a_watched_process_is_followed_for_its_seconds() {
    let _alone = common::rig::exclusive();
    let mut sleeper = Command::new("sleep").arg("30").spawn().unwrap();
    let pid = sleeper.id().to_string();
    // Until it has become sleep, it is this test's copy.
    while std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap() != "sleep\n" {
        std::thread::sleep(Duration::from_millis(5));
    }
    let dir = tempfile::tempdir().unwrap();
    let (db, out) = (dir.path().join("r.db"), dir.path().join("why.json"));
    let status = ratelab()
        .args(["why", "--json", "--db"])
        .arg(&db)
        .arg("--out")
        .arg(&out)
        .args(["--pid", &pid, "--seconds", "1"])
        .status()
        .unwrap();
    let _ = sleeper.kill();
    let _ = sleeper.wait();
    assert!(status.success());
    let doc = document(&out);
    assert_eq!(limiting(&doc)["step"], "sleep", "{doc}");
    let context = &doc["workloads"][0]["context"];
    assert_eq!(context["ended_by"], "seconds");
    assert_eq!(context["argv"][0], "sleep");
    assert!(context["exit_code"].is_null());
    // Named by its command line, its pid beside it, in the report and the listing.
    let name = format!("sleep 30 (pid {pid})");
    assert_eq!(doc["workloads"][0]["target"], name.as_str());
    let listed = common::results(&db, &["list"]);
    assert!(listed.contains(&name), "{listed}");
    let shown = common::results(&db, &["show", "1"]);
    assert!(shown.contains(&format!("why 1: {name}")), "{shown}");
}

#[test]
fn ratelab_is_never_one_of_the_processes_it_watches() {
    let _alone = common::rig::exclusive();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("why.json");
    // The shell runs ratelab, which watches the shell: ratelab descends from what it
    // watches, as from init with --pid 1. The exit after it keeps the shell from
    // becoming ratelab by exec.
    let status = Command::new("sh")
        .args([
            "-c",
            "\"$0\" why --json --no-store --out \"$1\" --pid $$ --seconds 1; exit $?",
        ])
        .arg(common::bin())
        .arg(&out)
        .status()
        .unwrap();
    assert!(status.success());
    let doc = document(&out);
    let processes: Vec<&Value> = doc["workloads"][0]["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["op"] == "process")
        .collect();
    let pid = &doc["workloads"][0]["context"]["pid"];
    assert!(
        processes.len() == 1 && processes[0]["pid"] == *pid,
        "only the shell is watched: {processes:?}"
    );
}

#[test]
fn bad_input_is_refused_and_nothing_is_stored_complete() {
    let _alone = common::rig::exclusive();
    refused(ratelab().args(["why", "--no-store"]), 2, &["COMMAND"]);
    refused(
        ratelab().args(["why", "--no-store", "--hz", "0", "--", "true"]),
        2,
        &["--hz"],
    );
    refused(
        ratelab().args(["why", "--no-store", "--seconds", "1", "--", "true"]),
        2,
        &["--pid"],
    );
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    refused(
        ratelab()
            .args(["why", "--db"])
            .arg(&db)
            .args(["--", "no-such-program-ratelab"]),
        3,
        &["no-such-program-ratelab"],
    );
    // The highest pid there can be is not a process.
    refused(
        ratelab()
            .args(["why", "--db"])
            .arg(&db)
            .args(["--pid", "4194304"]),
        3,
        &["4194304"],
    );
    if db.exists() {
        let runs = common::stored_runs(&db);
        assert!(
            runs.as_array()
                .unwrap()
                .iter()
                .all(|r| r["status"] != "complete"),
            "{runs}"
        );
    }
}

#[test]
fn ctrl_c_ends_the_command_and_keeps_the_run_incomplete() {
    let _alone = common::rig::exclusive();
    // SIGINT to ratelab alone (it ends the command with SIGTERM), and to its process
    // group, as a terminal's Ctrl-C, which ends the command by itself.
    for group in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("r.db");
        let mut command = ratelab();
        if group {
            std::os::unix::process::CommandExt::process_group(&mut command, 0);
        }
        let child = command
            .args(["why", "--db"])
            .arg(&db)
            .args(["--", "sh", "-c", "sleep 30; echo survived"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start ratelab why");
        let ratelab_pid = child.id();
        // Wait until the command's sleep runs: the tree is watched by then.
        let started = Instant::now();
        let sleeper = loop {
            let found = common::descendants(ratelab_pid)
                .into_iter()
                .find(|(_, name)| name == "sleep");
            if let Some((pid, _)) = found {
                break pid;
            }
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "sleep never started"
            );
            std::thread::sleep(Duration::from_millis(20));
        };
        std::thread::sleep(Duration::from_millis(200));
        let output = if group {
            let pid = rustix::process::Pid::from_child(&child);
            rustix::process::kill_process_group(pid, rustix::process::Signal::INT).unwrap();
            let output = child.wait_with_output().unwrap();
            assert_eq!(output.status.code(), Some(130), "{output:?}");
            output
        } else {
            common::stop_with(child, rustix::process::Signal::INT)
        };
        assert!(!String::from_utf8_lossy(&output.stdout).contains("survived"));
        // Ended: gone, or dead and not yet reaped by whoever inherited it.
        let state = std::fs::read_to_string(format!("/proc/{sleeper}/stat")).unwrap_or_default();
        let state = state.rsplit(')').next().unwrap_or_default().trim_start();
        assert!(
            state.is_empty() || state.starts_with('Z'),
            "the command's sleep outlived ratelab: {state}"
        );
        let runs = common::stored_runs(&db);
        assert_eq!(runs[0]["status"], "incomplete", "{runs}");
        let run = common::stored_run(&db, runs[0]["run_id"].as_i64().unwrap());
        assert_eq!(run["incomplete_reason"], "interrupted");
        // The signal that ended it was ratelab's own or the terminal's, not a failure
        // of the command's.
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            !stderr.contains("command_failed"),
            "group {group}: {stderr}"
        );
        assert!(
            !run["verdicts"].to_string().contains("command_failed"),
            "group {group}: {}",
            run["verdicts"]
        );
    }
}

#[test]
fn an_ordinary_user_sees_its_own_commands_and_is_told_what_it_cannot_see() {
    let _alone = common::rig::exclusive();
    if !common::root_or_skip(
        "an_ordinary_user_sees_its_own_commands",
        "it runs ratelab as the user nobody",
    ) {
        return;
    }
    let dir = common::nobody_tempdir(0o777);
    let out = dir.path().join("own.json");
    let status = common::as_nobody(common::bin())
        .args(["why", "--json", "--no-store", "--out"])
        .arg(&out)
        .args(["--", "sh", "-c", "sleep 0.5 | cat"])
        .status()
        .unwrap();
    assert!(status.success());
    let own = document(&out);
    assert_eq!(limiting(&own)["step"], "sleep", "{}", limiting(&own));
    assert!(
        own["workloads"][0]["context"]["unreadable"]
            .as_array()
            .unwrap()
            .is_empty()
    );
    // Commands that end before the sampler reads them, as zombies whose files the
    // kernel hands to root: ended, not hidden.
    for command in [&["false"][..], &["ls", "/usr"], &["sh", "-c", "true"]] {
        for _ in 0..3 {
            let output = common::as_nobody(common::bin())
                .args(["why", "--json", "--no-store", "--out"])
                .arg(&out)
                .arg("--")
                .args(command)
                .stdout(Stdio::null())
                .output()
                .unwrap();
            assert!(output.status.code().is_some_and(|c| c <= 1), "{command:?}");
            let doc = document(&out);
            let context = &doc["workloads"][0]["context"];
            assert_eq!(context["unreadable"], serde_json::json!([]), "{command:?}");
            assert!(
                !doc["verdicts"].to_string().contains("waits_unreadable"),
                "{command:?}: {}",
                doc["verdicts"]
            );
        }
    }
    // init is root's: its CPU time can be read, not its waits.
    let out = dir.path().join("init.json");
    let output = common::as_nobody(common::bin())
        .args([
            "why",
            "--json",
            "--no-store",
            "--pid",
            "1",
            "--seconds",
            "1",
            "--out",
        ])
        .arg(&out)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // setpriv execs ratelab: the child is ratelab.
    let ratelab_pid = output.id();
    let output = output.wait_with_output().unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let init = document(&out);
    let itself = init["workloads"][0]["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["op"] == "process" && i["pid"] == ratelab_pid);
    assert!(itself.is_none(), "ratelab watched itself: {itself:?}");
    let unreadable = init["workloads"][0]["context"]["unreadable"].to_string();
    assert!(unreadable.contains("(pid 1)"), "{unreadable}");
    let verdicts = init["verdicts"].to_string();
    assert!(verdicts.contains("waits_unreadable"), "{verdicts}");
    // Root's sleeper, watched by nobody: that it cannot see is the answer, with what it
    // can see, not a step called other that limits it.
    let mut sleeper = Command::new("sleep").arg("30").spawn().unwrap();
    let pid = sleeper.id().to_string();
    while std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap() != "sleep\n" {
        std::thread::sleep(Duration::from_millis(5));
    }
    let output = common::as_nobody(common::bin())
        .env("COLUMNS", "200")
        .args(["why", "--no-store", "--pid", &pid, "--seconds", "1"])
        .output()
        .unwrap();
    let _ = sleeper.kill();
    let _ = sleeper.wait();
    let report = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{report}");
    let answer = report
        .split("summary:")
        .nth(1)
        .and_then(|s| s.split("\n\n").next())
        .unwrap_or_default()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    assert!(
        answer.contains("what limits this command cannot be seen")
            && answer.contains(&format!("of sleep (pid {pid})"))
            && answer.contains("on a CPU and")
            && !answer.contains("-0"),
        "{report}"
    );
    assert!(!report.contains("other waits limit"), "{report}");
    assert!(
        report.contains(&format!("why 1: sleep 30 (pid {pid})")),
        "{report}"
    );
}
