//! The judge's own reading of perf (tests/common/judge.rs), on text captured from
//! `perf sched record -g` of `sh -c 'sleep 0.05; echo x | cat; python3 -c ...'` (two
//! threads counting under the GIL) on Linux 6.18 with perf 6.1
//! (tests/fixtures/perf/), and its comparison with a `why` document made up for it.
//! Needs neither root nor perf.

mod common;

use common::judge::{self, Process, Record, kind_of, parse_task_events, parse_timehist};
use serde_json::json;

const EVENTS: &str = include_str!("fixtures/perf/task-events.txt");
const TIMEHIST: &str = include_str!("fixtures/perf/timehist.txt");
/// The root's pid in the fixtures.
const ROOT: u32 = 23147;

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-9
}

fn fixture_record() -> Record {
    judge::sum(ROOT, &parse_task_events(EVENTS), &parse_timehist(TIMEHIST))
}

fn process<'a>(record: &'a Record, name: &str) -> &'a Process {
    record
        .processes
        .iter()
        .find(|p| p.name == name)
        .unwrap_or_else(|| panic!("no {name} in {record:?}"))
}

#[test]
fn the_tree_comes_from_forks_of_processes_not_of_threads() {
    let tree = parse_task_events(EVENTS);
    assert_eq!(tree.parent.get(&23149), Some(&ROOT));
    assert_eq!(tree.parent.get(&23152), Some(&ROOT));
    // python3's thread 23153 names its own pid on both sides, and perf's own thread too.
    assert_eq!(tree.parent.get(&23153), None);
    assert_eq!(tree.parent.get(&23148), None);
    assert_eq!(tree.name.get(&23152).map(String::as_str), Some("python3"));
    assert_eq!(tree.name.get(&1).map(String::as_str), Some("process_api"));
    // perf's child, made up at time 0 before it became the program, starts at its exec.
    assert!(close(tree.started[&ROOT], 3486.508580));
    assert_eq!(tree.parent.get(&ROOT), Some(&23145));
    assert!(close(tree.exited[&ROOT], 3486.671992));
    assert!(close(tree.exited[&23149], 3486.566986));
}

#[test]
fn a_timehist_line_gives_the_thread_its_times_state_and_stack() {
    let switches = parse_timehist(TIMEHIST);
    // The header and the idle line are not switches of a thread.
    assert!(switches.iter().all(|s| s.tid != 0 && s.comm != "<idle>"));
    let sleep = switches.iter().find(|s| s.comm == "sleep").unwrap();
    assert_eq!((sleep.tid, sleep.pid, sleep.state), (23149, 23149, 'S'));
    assert!(close(sleep.wait_s, 0.0) && close(sleep.delay_s, 0.005937));
    assert!(close(sleep.run_s, 0.000914) && close(sleep.time, 3486.516824));
    assert_eq!(sleep.stack[..2], ["do_nanosleep", "hrtimer_nanosleep"]);
    let thread = switches.iter().find(|s| s.tid == 23153).unwrap();
    assert_eq!((thread.pid, thread.comm.as_str()), (23152, "python3"));
    // A name with a space in it.
    let lto = switches.iter().find(|s| s.comm == "lto cgu.08").unwrap();
    assert_eq!((lto.tid, lto.pid, lto.state), (15478, 15038, 'R'));
}

#[test]
fn a_kernel_stack_names_its_kind_of_wait_by_its_innermost_telling_frame() {
    let stack = |s: &str| s.split(" <- ").map(str::to_string).collect::<Vec<_>>();
    for (frames, kind) in [
        (
            "io_schedule <- folio_wait_bit_common <- filemap_fault",
            "disk",
        ),
        (
            "io_schedule <- bit_wait_io <- __wait_on_bit <- ext4_read_bh",
            "disk",
        ),
        (
            "jbd2_log_wait_commit <- ext4_sync_file <- vfs_fsync_range",
            "disk",
        ),
        ("anon_pipe_read <- vfs_read <- ksys_read", "pipe"),
        (
            "futex_do_wait <- __futex_wait <- futex_wait <- do_futex",
            "futex",
        ),
        ("do_wait <- kernel_wait4 <- __do_sys_wait4", "child"),
        (
            "wait_woken <- sk_wait_data <- tcp_recvmsg_locked <- tcp_recvmsg",
            "socket",
        ),
        ("wait_woken <- n_tty_read <- tty_read", "other"),
        (
            "do_nanosleep <- hrtimer_nanosleep <- common_nsleep",
            "timer",
        ),
        (
            "schedule_hrtimeout_range_clock <- poll_schedule_timeout.constprop.0 <- do_sys_poll",
            "poll",
        ),
        ("do_sigtimedwait <- __x64_sys_rt_sigtimedwait", "signal"),
        (
            "schedule_timeout <- __wait_for_common <- wait_for_completion_state <- kernel_clone",
            "other",
        ),
    ] {
        assert_eq!(kind_of(&stack(frames)), kind, "{frames}");
    }
}

#[test]
fn a_process_sums_its_threads_with_each_wait_charged_to_the_switch_out_before_it() {
    let record = fixture_record();
    // The wall: from the root's first switch-in (before its exec record) to its last
    // switch-out, in state X.
    assert!(close(record.wall_s, 3486.672149 - (3486.509980 - 0.001873)));
    assert!(
        record.processes.iter().all(|p| p.pid != 23145),
        "perf is not in the tree"
    );
    let sleep = process(&record, "sleep");
    assert_eq!((sleep.ppid, sleep.threads), (ROOT, 1));
    assert!(close(sleep.cpu_s, 0.000914 + 0.000232));
    assert!(close(sleep.cpu_wait_s, 0.005937 + 0.000047));
    // The 50.098 ms before its exit belong to its sleep, less the 47 µs runnable.
    assert!(close(sleep.off("timer"), 0.050098 - 0.000047));
    let sh = record.processes.iter().find(|p| p.pid == ROOT).unwrap();
    assert_eq!(sh.ppid, 0);
    assert!(close(sh.cpu_s, 0.002528), "{sh:?}");
    // The sched delays, and 14 µs preempted (left in R) before its exit.
    assert!(close(sh.cpu_wait_s, 0.001059), "{sh:?}");
    assert!(close(sh.off("child"), 0.154408), "{sh:?}");
    // Its vfork waits for the child's exec in a completion: no kind of its own.
    assert!(close(sh.off("other"), 0.006080), "{sh:?}");
    let python = process(&record, "python3");
    assert_eq!(python.threads, 2);
    // Its threads handing the GIL over, its pages read in, its last sleep.
    assert!(
        python.off("futex") > 0.025 && python.off("disk") > 0.0005,
        "{python:?}"
    );
    assert!(
        close(python.off("timer"), 0.020034 - 0.000019),
        "{python:?}"
    );
    let groups = record.group_by_name();
    assert_eq!(groups["sh"].processes, 2);
    assert!(close(groups["sleep"].cpu_s, sleep.cpu_s));
}

/// A process item's name, cpu_s, cpu_wait_s and waits (kind, seconds).
type Item<'a> = (&'a str, f64, f64, &'a [(&'a str, f64)]);

/// A `why` document with one process item per [`Item`].
fn why_doc(processes: &[Item]) -> serde_json::Value {
    let items: Vec<_> = processes
        .iter()
        .map(|(name, cpu, wait, waits)| {
            json!({
                "op": "process", "pid": 1, "ppid": 0, "name": name, "threads": 1,
                "cpu_s": cpu, "cpu_wait_s": wait,
                "waits": waits.iter().map(|(kind, s)| json!({
                    "what": "a wait", "step": null, "seconds": s, "kind": kind,
                })).collect::<Vec<_>>(),
            })
        })
        .collect();
    json!({"workloads": [{"items": items}]})
}

fn one_process(cpu_s: f64, cpu_wait_s: f64, futex_s: f64) -> Record {
    let mut p = Process {
        pid: 10,
        name: "python3".into(),
        threads: 2,
        cpu_s,
        cpu_wait_s,
        ..Process::default()
    };
    p.off_s[judge::kind_index("futex")] = futex_s;
    Record {
        root: 10,
        wall_s: 2.0,
        processes: vec![p],
        lost: None,
    }
}

#[test]
fn the_comparison_holds_within_the_tolerances_and_names_each_miss() {
    let record = one_process(1.8, 0.10, 1.7);
    let agrees = why_doc(&[("python3", 1.75, 0.14, &[("futex", 1.5)])]);
    assert_eq!(judge::compare(&agrees, &record), Vec::<String>::new());
    let misses = why_doc(&[("python3", 1.5, 0.2, &[("other", 1.5)])]);
    let words = judge::compare(&misses, &record);
    assert_eq!(words.len(), 4, "{words:#?}");
    assert!(
        words[0].contains("1.500 s on a CPU by why against 1.800 s"),
        "{words:#?}"
    );
    assert!(words[1].contains("waiting for a CPU"), "{words:#?}");
    assert!(
        words.iter().any(|w| w.contains("in futex waits")),
        "{words:#?}"
    );
    assert!(
        words.iter().any(|w| w.contains("in other waits")),
        "{words:#?}"
    );
    // 50 ms of wait for a CPU may differ whatever the share.
    let small = why_doc(&[("python3", 1.8, 0.149, &[("futex", 1.7)])]);
    assert!(judge::compare(&small, &record).is_empty());
    // A name missing from why's account is a miss; one under 0.5 s is not judged.
    let missing = why_doc(&[("other", 1.8, 0.1, &[])]);
    assert_eq!(
        judge::compare(&missing, &one_process(0.4, 0.0, 0.0)),
        Vec::<String>::new()
    );
    assert!(judge::compare(&missing, &record)[0].contains("no process of that name"));
    let row = judge::rows(&agrees, &record);
    assert_eq!(
        row,
        [
            "python3 x1/1: cpu 1.75/1.80 s, cpu_wait 0.14/0.10+0.00 s (0.00 at ends), off \
         futex 1.50/1.70 (why/kernel; + in threads shorter than a sample; at ends: in \
         ended threads' last sample)"
        ]
    );
}

#[test]
fn waits_without_a_kind_leave_the_kinds_unjudged() {
    let record = one_process(1.8, 0.10, 1.7);
    let mut doc = why_doc(&[("python3", 1.8, 0.1, &[("futex", 0.1)])]);
    doc["workloads"][0]["items"][0]["waits"][0]
        .as_object_mut()
        .unwrap()
        .remove("kind");
    assert!(judge::compare(&doc, &record).is_empty());
    assert!(judge::rows(&doc, &record)[0].contains("futex ?/1.70"));
}

/// A thread of process 100 that sleeps in a futex, wakes, is preempted as it exits
/// and dies: its last switch-outs are timehist's nameless `:-1` lines on the CPU its
/// EXIT record names; another of 2 ms lives less than a sample.
const EXITING_EVENTS: &str = "\
      sh 100 [000] 10.000000: PERF_RECORD_COMM exec: py:100/100
      py 101 [001] 10.500300: PERF_RECORD_EXIT(100:101):(1:1)
      py 102 [000] 10.603200: PERF_RECORD_EXIT(100:102):(1:1)
      py 100 [000] 10.700000: PERF_RECORD_EXIT(100:100):(1:1)
";
const EXITING_TIMEHIST: &str = "\
   10.050000 [0000]  py[100]                   0.000      0.000     50.000      S  do_wait <- kernel_wait4
   10.100000 [0001]  py[101/100]               0.000      0.001    100.000      S  futex_wait_queue <- futex_wait
   10.500500 [0001]  :-1[-1/1]                 9.000      0.000      0.300      W
   10.500600 [0001]  :-1[-1/1]                 0.000      0.000      0.050      Z
   10.601000 [0000]  py[102/100]               0.000      0.500      1.000      R
   10.603500 [0000]  :-1[-1/1]                 0.000      0.000      0.400      Z
   10.700000 [0000]  py[100]                 649.000      0.000      1.000      Z
";

#[test]
fn an_exiting_threads_last_run_is_its_own_and_a_short_threads_wait_is_apart() {
    let record = judge::sum(
        100,
        &parse_task_events(EXITING_EVENTS),
        &parse_timehist(EXITING_TIMEHIST),
    );
    let py = process(&record, "py");
    // 50 + 1 ms of the main thread, 100 + 0.3 + 0.05 of 101, 1 + 0.4 of 102.
    assert!((py.cpu_s - 0.15275).abs() < 1e-6, "{py:?}");
    // 101 slept from 10.1 to the start of its last run (10.5002); the main thread from
    // 10.05 to 10.699.
    assert!((py.off("futex") - 0.4002).abs() < 1e-6, "{py:?}");
    // 101 waited 1 µs to first run and 50 µs between its two last runs (preempted);
    // 102 lived 3.7 ms: its 0.5 ms delay and the 2.1 ms it was preempted for are apart.
    assert!((py.cpu_wait_s - 0.000051).abs() < 1e-9, "{py:?}");
    assert!((py.cpu_wait_unseen_s - 0.0026).abs() < 1e-6, "{py:?}");
    // Of 101's, the 50 µs in its last 10 ms, after why's last read of it.
    assert!((py.cpu_wait_tail_s - 0.000050).abs() < 1e-9, "{py:?}");
}

#[test]
fn what_ended_threads_waited_after_why_last_read_them_may_be_missing_from_why() {
    let mut record = one_process(1.8, 0.30, 1.7);
    let why = why_doc(&[("python3", 1.8, 0.15, &[("futex", 1.7)])]);
    // 0.30 s less 25%: 0.15 s is a miss...
    assert!(judge::compare(&why, &record)[0].contains("waiting for a CPU"));
    // ...unless 0.10 s of it was in ended threads' last sample.
    record.processes[0].cpu_wait_tail_s = 0.10;
    assert_eq!(judge::compare(&why, &record), Vec::<String>::new());
    // Above, the tail allows nothing.
    let above = why_doc(&[("python3", 1.8, 0.45, &[("futex", 1.7)])]);
    assert!(judge::compare(&above, &record)[0].contains("waiting for a CPU"));
}
