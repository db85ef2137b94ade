//! The judge of issue 49: the kernel's own record of where a program's time went,
//! `perf record -g` of `perf sched record`'s events (every switch, with the kernel
//! stack each thread left from),
//! summed per process of the program's tree, to set `ratelab why`'s account against.
//! shared/WHY.md's last section says how the record reads on these kernels. Both
//! watch the same run ([`watched`]): two runs of one build differ by more than the
//! tolerances, and what perf costs the program is then in both accounts.

mod compare;
mod machine;
mod parse;
mod tries;

#[allow(unused_imports)]
pub use compare::{compare, rows};
#[allow(unused_imports)]
pub use machine::{Quiet, Run, timed};
#[allow(unused_imports)]
pub use parse::{Switch, Tree, kind_of, parse_task_events, parse_timehist, sum};
#[allow(unused_imports)]
pub use tries::{Case, Judged, kernel_top_is, limit_is, limiting, work_folder};

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The kinds of wait a kernel stack names, as `why`'s waits name them too.
pub const KINDS: [&str; 9] = [
    "disk", "pipe", "futex", "child", "socket", "timer", "poll", "signal", "other",
];

/// A program to judge, as the test starts it.
#[derive(Debug, Clone)]
pub struct Program {
    /// What puts it where it must run (a cgroup's or a network namespace's wrapper,
    /// which ends by exec'ing its arguments): `ratelab why` runs inside it, and under
    /// perf the program does (perf itself stays outside, where tracefs is mounted).
    pub prefix: Vec<OsString>,
    /// The program and its arguments.
    pub argv: Vec<OsString>,
    /// Its working folder.
    pub dir: PathBuf,
    /// Variables set for it.
    pub env: Vec<(OsString, OsString)>,
}

impl Program {
    /// `argv` run in `dir`.
    pub fn new(dir: &Path, argv: &[&str]) -> Program {
        Program {
            prefix: Vec::new(),
            argv: argv.iter().map(OsString::from).collect(),
            dir: dir.to_path_buf(),
            env: Vec::new(),
        }
    }

    /// The same, started through `prefix` (it must exec its arguments).
    pub fn within(mut self, prefix: &[&OsStr]) -> Program {
        self.prefix = prefix.iter().map(OsString::from).collect();
        self
    }

    /// The same with `key=value` in its environment.
    pub fn env(mut self, key: &str, value: impl AsRef<OsStr>) -> Program {
        self.env.push((key.into(), value.as_ref().to_owned()));
        self
    }

    /// The same behind `taskset -c CPUS` (inside its prefix).
    pub fn on_cpus(&self, cpus: &str) -> Program {
        let mut held = self.clone();
        held.argv
            .splice(0..0, ["taskset", "-c", cpus].map(OsString::from));
        held
    }

    /// The program as it is, nothing watching (through its prefix).
    pub fn plain(&self) -> Command {
        self.started_by(&[], &[])
    }

    /// `outer...` (outside the prefix), the prefix, `inner...`, then the program, in
    /// its folder, with its environment and the suite's data folder, reading nothing.
    fn started_by(&self, outer: &[&OsStr], inner: &[&OsStr]) -> Command {
        let mut argv = outer
            .iter()
            .copied()
            .chain(self.prefix.iter().map(OsString::as_os_str))
            .chain(inner.iter().copied())
            .chain(self.argv.iter().map(OsString::as_os_str));
        let mut command = Command::new(argv.next().expect("a program"));
        super::isolated(&mut command)
            .args(argv)
            .current_dir(&self.dir)
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(Stdio::null());
        command
    }
}

/// One process of the tree, by the kernel's record.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Process {
    pub pid: u32,
    /// 0 for the root.
    pub ppid: u32,
    /// Its last name (a COMM record: exec, or a thread's own name for its main thread).
    pub name: String,
    /// Threads seen switching.
    pub threads: usize,
    /// Seconds on a CPU, its threads together.
    pub cpu_s: f64,
    /// Seconds runnable waiting for a CPU: the delay from a wakeup to running, and the
    /// whole time off the CPU after a switch-out while still runnable (preempted); of
    /// threads that lived at least [`parse::UNSEEN_UNDER_S`].
    pub cpu_wait_s: f64,
    /// The same of threads that lived less: between two samples of why's.
    pub cpu_wait_unseen_s: f64,
    /// Of `cpu_wait_s`, what threads that ended waited in their last
    /// [`parse::UNSEEN_UNDER_S`]: after why's last read of them, which no later read
    /// can give (an ended thread's schedstat is gone with it).
    pub cpu_wait_tail_s: f64,
    /// Seconds off the CPUs asleep, by the kind of wait ([`KINDS`], in that order) the
    /// stack it left from names.
    pub off_s: [f64; KINDS.len()],
}

impl Process {
    /// Off-CPU seconds in waits of `kind`.
    pub fn off(&self, kind: &str) -> f64 {
        self.off_s[kind_index(kind)]
    }
}

/// Where `kind` sits in [`KINDS`].
pub fn kind_index(kind: &str) -> usize {
    KINDS
        .iter()
        .position(|k| *k == kind)
        .unwrap_or(KINDS.len() - 1)
}

/// The kernel's record of one run of a program.
#[derive(Debug, Clone, Default)]
pub struct Record {
    pub root: u32,
    /// From the root's start (its exec, or its fork where recorded) to its exit.
    pub wall_s: f64,
    pub processes: Vec<Process>,
    /// What perf said it lost (chunks, events), where it lost any: such a record
    /// undercounts.
    pub lost: Option<String>,
}

/// The figures of the processes of one name, summed.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Figures {
    pub processes: usize,
    pub cpu_s: f64,
    pub cpu_wait_s: f64,
    pub cpu_wait_unseen_s: f64,
    pub cpu_wait_tail_s: f64,
    pub off_s: [f64; KINDS.len()],
}

impl Figures {
    /// Off-CPU seconds in waits of `kind`.
    pub fn off(&self, kind: &str) -> f64 {
        self.off_s[kind_index(kind)]
    }

    /// The kind of wait with the most seconds, and them.
    pub fn main_off(&self) -> (&'static str, f64) {
        KINDS.iter().zip(self.off_s).fold(
            ("other", 0.0),
            |best, (k, s)| {
                if s > best.1 { (k, s) } else { best }
            },
        )
    }
}

impl Record {
    /// The same figures summed over the processes of one name: a build runs a cc1 per
    /// file, and two runs never have the same pids.
    pub fn group_by_name(&self) -> BTreeMap<String, Figures> {
        let mut groups: BTreeMap<String, Figures> = BTreeMap::new();
        for p in &self.processes {
            let group = groups.entry(p.name.clone()).or_default();
            group.processes += 1;
            group.cpu_s += p.cpu_s;
            group.cpu_wait_s += p.cpu_wait_s;
            group.cpu_wait_unseen_s += p.cpu_wait_unseen_s;
            group.cpu_wait_tail_s += p.cpu_wait_tail_s;
            for (sum, s) in group.off_s.iter_mut().zip(p.off_s) {
                *sum += s;
            }
        }
        groups
    }

    /// The name with the most seconds on a CPU, and its figures.
    pub fn top(&self) -> Option<(String, Figures)> {
        self.group_by_name()
            .into_iter()
            .max_by(|a, b| a.1.cpu_s.total_cmp(&b.1.cpu_s))
    }
}

/// Mounts tracefs where perf looks for it, as root, unless it is there: it is not
/// mounted at boot on the project's VMs.
fn tracefs() {
    if Path::new("/sys/kernel/tracing/events").exists() {
        return;
    }
    let status = Command::new("mount")
        .args(["-t", "tracefs", "nodev", "/sys/kernel/tracing"])
        .status()
        .expect("run mount");
    assert!(
        status.success(),
        "cannot mount tracefs at /sys/kernel/tracing"
    );
}

/// Runs `program` under `ratelab why --json --no-store --out OUT` (inside the
/// program's prefix, as the program would run there), the whole under `perf sched
/// record -g --kernel-callchains` (the stacks a wait is read from are the kernel's),
/// the program started as `sh -c 'echo $$ > ROOT; exec "$@"'` so that its root's pid
/// is known. Both watch the very same run: two runs of a parallel build differ by more
/// than the tolerances (rustc's threads waited 0.13-0.19 s for a CPU under why, 0.24-0.30
/// s in the next run, under perf), and perf's own cost is in both accounts. Reads the
/// record back (the tree from `perf script --show-task-events`, the time from `perf
/// sched timehist --state -g`) and why's document; `work` holds perf.data (put it on a
/// tmpfs: it is written while the program runs). Also says how quiet the machine was.
pub fn watched(program: &Program, work: &Path) -> (serde_json::Value, Record, Run) {
    tracefs();
    let data = work.join("perf.data");
    let out = work.join("why.json");
    let root_file = work.join("root.pid");
    for stale in [&out, &root_file] {
        let _ = std::fs::remove_file(stale);
    }
    let script = format!("echo $$ > '{}'; exec \"$@\"", root_file.display());
    let bin = super::bin();
    // perf sched record's events, with sched_wakeup where it takes sched_waking: a
    // wait for a CPU starts when the woken thread is queued (schedstat's run delay,
    // which why reads), not when its waker began, before the wakeup reached an idle
    // vCPU (tens of µs a wakeup on these VMs: sqlite's 1500 commits 0.15 s).
    let perf = [
        "perf",
        "record",
        "-a",
        "-R",
        "-c",
        "1",
        "-m",
        "1024",
        "-e",
        "sched:sched_switch,sched:sched_stat_runtime,sched:sched_process_fork,\
         sched:sched_wakeup_new,sched:sched_migrate_task,sched:sched_wakeup",
        "-g",
        "--kernel-callchains",
        "-o",
    ];
    let why = ["why", "--json", "--no-store", "--out"];
    let mut command = program.started_by(
        &perf
            .map(OsStr::new)
            .into_iter()
            .chain([data.as_os_str(), OsStr::new("--")])
            .collect::<Vec<_>>(),
        &[bin.as_os_str()]
            .into_iter()
            .chain(why.map(OsStr::new))
            .chain([out.as_os_str(), OsStr::new("--")])
            .chain(["sh", "-c", &script, "sh"].map(OsStr::new))
            .collect::<Vec<_>>(),
    );
    let run = timed(&mut command, &work.join("watched.stderr"));
    assert!(
        run.success,
        "perf sched record or ratelab why failed: {}",
        run.stderr_tail
    );
    let text = std::fs::read(&out).unwrap_or_else(|e| {
        panic!(
            "ratelab why wrote no document ({e}); it said: {}",
            run.stderr_tail
        )
    });
    let root: u32 = std::fs::read_to_string(&root_file)
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .expect("the program wrote its pid");
    let events = perf_output(
        &[
            "script",
            "--show-task-events",
            "-G",
            "-F",
            "comm,tid,time,cpu",
        ],
        &data,
    );
    let timehist = perf_output(
        &["sched", "timehist", "--state", "-g", "--max-stack", "16"],
        &data,
    );
    let tree = parse_task_events(&events.0);
    let lines = parse_timehist(&timehist.0);
    let mut record = sum(root, &tree, &lines);
    record.lost = [events.1, timehist.1]
        .iter()
        .flat_map(|e| e.lines())
        .find(|l| l.contains("lost"))
        .map(str::to_string);
    (super::json(&text), record, run)
}

/// `perf ARGS -i DATA`'s stdout and stderr.
fn perf_output(args: &[&str], data: &Path) -> (String, String) {
    let output = Command::new("perf")
        .args(&args[..1])
        .args(&args[1..])
        .arg("-i")
        .arg(data)
        .output()
        .expect("run perf");
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(output.status.success(), "perf {args:?} failed: {stderr}");
    (String::from_utf8_lossy(&output.stdout).into_owned(), stderr)
}
