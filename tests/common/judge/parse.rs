//! Reading perf's text back: the tree from `perf script --show-task-events`, the
//! switches from `perf sched timehist --state -g`, and their sum per process.
//!
//! timehist prints one line per switch-out of a thread: its wait time (from its previous
//! switch-out to this switch-in, so the sched delay is inside it), its sched delay
//! (wakeup to switch-in; none after a preemption, which has no wakeup), its run time,
//! the state it left in and the kernel stack it left from (tools/perf/builtin-sched.c,
//! `timehist_update_runtime_stats`). A line's wait belongs to the thread's previous
//! switch-out, so each thread's last state and stack are kept.

use std::collections::BTreeMap;

use super::{KINDS, Process, Record, kind_index};

/// What `perf script --show-task-events` says of the processes.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Tree {
    /// Child pid → parent pid, for forks of processes (a new thread names its own pid
    /// on both sides and is left out).
    pub parent: BTreeMap<u32, u32>,
    /// Pid → its last name (COMM records of its main thread, after exec or a rename).
    pub name: BTreeMap<u32, String>,
    /// Pid → when it started (its fork, else its first exec).
    pub started: BTreeMap<u32, f64>,
    /// Pid → when it exited.
    pub exited: BTreeMap<u32, f64>,
    /// Tid → when the thread exited. A thread killed in its sleep (the other threads of
    /// a process that calls exit) last switches as a task perf can no longer name, so
    /// timehist has no line for its last wait: its exit closes it.
    pub thread_exited: BTreeMap<u32, f64>,
    /// Tid → the CPU it exited on, where the record says.
    pub exit_cpu: BTreeMap<u32, u32>,
}

/// Reads the FORK, COMM and EXIT records (other lines are skipped):
/// `TIME: PERF_RECORD_FORK(pid:tid):(ppid:ptid)`, `PERF_RECORD_COMM exec: NAME:pid/tid`,
/// `PERF_RECORD_EXIT(pid:tid):(ppid:ptid)`.
pub fn parse_task_events(text: &str) -> Tree {
    let mut tree = Tree::default();
    for line in text.lines() {
        let Some(at) = line.find("PERF_RECORD_") else {
            continue;
        };
        let time: f64 = line[..at]
            .split_whitespace()
            .last()
            .and_then(|t| t.trim_end_matches(':').parse().ok())
            .unwrap_or(0.0);
        let record = &line[at + "PERF_RECORD_".len()..];
        if let Some(ids) = record.strip_prefix("FORK") {
            if let Some(((pid, _), (ppid, _))) = pair_of_ids(ids)
                && pid != ppid
            {
                tree.parent.insert(pid, ppid);
                // Records at time 0 are perf's own, made up for what ran before it
                // began: perf's child that becomes the program among them.
                if time > 0.0 {
                    tree.started.insert(pid, time);
                }
            }
        } else if let Some(ids) = record.strip_prefix("EXIT") {
            if let Some(((pid, tid), _)) = pair_of_ids(ids) {
                tree.thread_exited.insert(tid, time);
                if let Some(cpu) = cpu_of(&line[..at]) {
                    tree.exit_cpu.insert(tid, cpu);
                }
                if pid == tid {
                    tree.exited.insert(pid, time);
                }
            }
        } else if let Some(rest) = record.strip_prefix("COMM") {
            let exec = rest.starts_with(" exec");
            let Some((_, named)) = rest.split_once(": ") else {
                continue;
            };
            let Some((name, ids)) = named.rsplit_once(':') else {
                continue;
            };
            let Some((pid, tid)) = ids.trim().split_once('/') else {
                continue;
            };
            let (Ok(pid), Ok(tid)) = (pid.parse::<u32>(), tid.parse::<u32>()) else {
                continue;
            };
            if pid == tid {
                tree.name.insert(pid, name.to_string());
                if exec && time > 0.0 {
                    tree.started.entry(pid).or_insert(time);
                }
            }
        }
    }
    tree
}

/// `(a:b):(c:d)` as ((a, b), (c, d)).
/// The CPU of a record, `[001]` among the fields before it.
fn cpu_of(fields: &str) -> Option<u32> {
    fields
        .split_whitespace()
        .find_map(|f| f.strip_prefix('[')?.strip_suffix(']')?.parse().ok())
}

fn pair_of_ids(text: &str) -> Option<((u32, u32), (u32, u32))> {
    let one = |part: &str| -> Option<(u32, u32)> {
        let (a, b) = part
            .trim_matches(|c| c == '(' || c == ')')
            .split_once(':')?;
        Some((a.parse().ok()?, b.parse().ok()?))
    };
    let (left, right) = text.trim().split_once("):(")?;
    Some((one(left)?, one(right)?))
}

/// The tid of a switch-out timehist prints as `:-1[-1/PID]`: a thread of PID that was
/// reaped as it exited (any but the main one) makes its last switch as a task perf can
/// no longer name; which thread it was, its EXIT record on that CPU says.
pub const EXITED: u32 = u32::MAX;

/// One switch-out of a thread, as timehist prints it.
#[derive(Debug, Clone, PartialEq)]
pub struct Switch {
    pub time: f64,
    pub cpu: u32,
    pub comm: String,
    pub tid: u32,
    pub pid: u32,
    pub wait_s: f64,
    pub delay_s: f64,
    pub run_s: f64,
    pub state: char,
    /// Innermost first; scheduler functions are left out by perf.
    pub stack: Vec<String>,
}

/// Reads timehist's lines: `TIME [CPU] COMM[TID] WAIT DELAY RUN STATE STACK...` (times
/// in ms; `COMM[TID/PID]` for a thread other than the main one; the name may hold
/// spaces). The header, idle lines and anything else are skipped.
pub fn parse_timehist(text: &str) -> Vec<Switch> {
    text.lines().filter_map(switch).collect()
}

fn switch(line: &str) -> Option<Switch> {
    let tokens: Vec<&str> = line.split_whitespace().collect();
    let time: f64 = tokens.first()?.parse().ok()?;
    if !tokens.get(1)?.starts_with('[') {
        return None;
    }
    // The task is the first token from the third on that ends in `[ID]` or `[ID/ID]`
    // and is followed by three numbers and a state.
    let at = (2..tokens.len().saturating_sub(4)).find(|&i| {
        ids(tokens[i]).is_some()
            && tokens[i + 1..i + 4]
                .iter()
                .all(|t| t.parse::<f64>().is_ok())
            && tokens[i + 4].chars().count() == 1
    })?;
    let (tid, pid) = ids(tokens[at])?;
    let last = tokens[at];
    let comm = tokens[2..at]
        .iter()
        .copied()
        .chain([&last[..last.rfind('[')?]])
        .collect::<Vec<_>>()
        .join(" ");
    if tid == 0 || comm == "<idle>" {
        return None;
    }
    let ms = |i: usize| tokens[i].parse::<f64>().unwrap() / 1000.0;
    let stack = tokens[at + 5..]
        .join(" ")
        .split(" <- ")
        .map(|f| f.trim().to_string())
        .filter(|f| !f.is_empty())
        .collect();
    Some(Switch {
        time,
        cpu: cpu_of(tokens[1])?,
        comm,
        tid,
        pid,
        wait_s: ms(at + 1),
        delay_s: ms(at + 2),
        run_s: ms(at + 3),
        state: tokens[at + 4].chars().next()?,
        stack,
    })
}

/// `NAME[TID]` or `NAME[TID/PID]` as (tid, pid).
fn ids(token: &str) -> Option<(u32, u32)> {
    let inside = token.strip_suffix(']')?;
    let inside = &inside[inside.rfind('[')? + 1..];
    let tid_of = |t: &str| {
        if t == "-1" {
            Some(EXITED)
        } else {
            t.parse().ok()
        }
    };
    match inside.split_once('/') {
        Some((tid, pid)) => Some((tid_of(tid)?, pid.parse().ok()?)),
        None => {
            let tid = inside.parse().ok()?;
            Some((tid, tid))
        }
    }
}

/// Whether a thread that left in `state` was still runnable (preempted): `R`, and
/// `W` where perf 6.1 decodes a newer kernel's preemption bit (TASK_REPORT_MAX, 0x100,
/// the tenth letter of its "RSDTtZXxKWP"); later perfs print `p`.
fn runnable(state: char) -> bool {
    matches!(state, 'R' | 'W' | 'p')
}

/// The kind of wait a kernel stack (innermost first) names: the first frame that
/// names one decides.
pub fn kind_of(stack: &[String]) -> &'static str {
    let names: Vec<&str> = stack
        .iter()
        .map(|f| f.split(['.', '+', ' ']).next().unwrap_or(f))
        .collect();
    let socket_frames = names
        .iter()
        .any(|f| ["tcp_", "inet_", "sk_"].iter().any(|p| f.starts_with(p)));
    names
        .iter()
        .find_map(|f| frame_kind(f, socket_frames))
        .unwrap_or("other")
}

fn frame_kind(f: &str, socket_frames: bool) -> Option<&'static str> {
    let starts = |prefixes: &[&str]| prefixes.iter().any(|p| f.starts_with(p));
    let is = |names: &[&str]| names.contains(&f);
    if starts(&[
        "io_schedule",
        "folio_wait",
        "wait_on_page",
        "__lock_page",
        "jbd2",
        "blk_",
        "xlog_",
        "xfs_log_force",
    ]) || is(&[
        "bit_wait_io",
        "__wait_on_buffer",
        "submit_bio_wait",
        "wb_wait_for_completion",
        "balance_dirty_pages",
        "rq_qos_wait",
        "wbt_wait",
        "__iomap_dio_rw",
    ]) {
        Some("disk")
    } else if is(&[
        "anon_pipe_read",
        "anon_pipe_write",
        "pipe_read",
        "pipe_write",
    ]) || starts(&["pipe_wait"])
    {
        Some("pipe")
    } else if starts(&["futex_"]) {
        Some("futex")
    } else if is(&["do_wait", "kernel_wait4"]) {
        Some("child")
    } else if is(&[
        "sk_wait_data",
        "sk_stream_wait_memory",
        "inet_csk_accept",
        "__skb_wait_for_more_packets",
        "sock_alloc_send_pskb",
    ]) || starts(&["unix_stream_"])
        || (f == "wait_woken" && socket_frames)
    {
        Some("socket")
    } else if is(&["do_nanosleep", "hrtimer_nanosleep"]) {
        Some("timer")
    } else if is(&[
        "do_poll",
        "do_select",
        "ep_poll",
        "do_epoll_wait",
        "poll_schedule_timeout",
        "do_sys_poll",
    ]) {
        Some("poll")
    } else if is(&[
        "do_sigtimedwait",
        "sys_pause",
        "__do_sys_pause",
        "do_signal_stop",
    ]) {
        Some("signal")
    } else {
        None
    }
}

/// What one thread did, summed over its switches.
#[derive(Default)]
struct Thread {
    last: Option<(char, &'static str)>,
    last_time: f64,
    /// When it began: its first switch less the run and the wait that led to it.
    born: Option<f64>,
    cpu_s: f64,
    cpu_wait_s: f64,
    /// Its waits for a CPU, from and to: the part of them at its end is what why
    /// cannot read.
    waits: Vec<(f64, f64)>,
    off_s: [f64; KINDS.len()],
}

impl Thread {
    /// Counts a wait for a CPU from `from` to `to`.
    fn waited(&mut self, from: f64, to: f64) {
        self.cpu_wait_s += (to - from).max(0.0);
        self.waits.push((from, to));
    }

    /// Of its waits for a CPU, the seconds from `from` to `to`.
    fn waited_within(&self, from: f64, to: f64) -> f64 {
        self.waits
            .iter()
            .map(|&(a, b)| (b.min(to) - a.max(from)).max(0.0))
            .sum()
    }
}

/// Which of a switch's slices: the tree on a CPU, the tree waiting for one, the watcher
/// (the root's parent: ratelab, which perf records too) on a CPU.
#[derive(Clone, Copy)]
enum Slice {
    Running,
    Waiting,
    Watcher,
}

/// The seconds of each kind of slice in each 10 ms window of the record.
#[derive(Default)]
struct Load {
    origin: Option<f64>,
    windows: Vec<[f64; 3]>,
}

impl Load {
    const WINDOW_S: f64 = 0.01;

    /// Adds the slice from `from` to `to` (seconds) to the windows it overlaps.
    fn add(&mut self, slice: Slice, from: f64, to: f64) {
        if to <= from {
            return;
        }
        // The watcher's slices begin before the program: every window is after the first.
        let origin = *self.origin.get_or_insert(from - 10.0);
        let start = (from - origin).max(0.0);
        let end = to - origin;
        if end <= start {
            return;
        }
        let (first, last) = (
            (start / Self::WINDOW_S) as usize,
            (end / Self::WINDOW_S) as usize,
        );
        if self.windows.len() <= last {
            self.windows.resize(last + 1, [0.0; 3]);
        }
        for window in first..=last {
            let (a, b) = (
                window as f64 * Self::WINDOW_S,
                (window + 1) as f64 * Self::WINDOW_S,
            );
            let part = end.min(b) - start.max(a);
            if part > 0.0 {
                self.windows[window][slice as usize] += part;
            }
        }
    }

    /// The tree's seconds waiting for a CPU that the watcher's slices took: in each
    /// window where the tree ran or waited for nearly every CPU, the least of the two.
    fn displaced(&self) -> f64 {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
        self.windows
            .iter()
            .filter(|w| w[0] + w[1] >= (cpus - 0.5) * Self::WINDOW_S)
            .map(|w| w[1].min(w[2]))
            .sum()
    }
}

/// A thread that lived less than this began and ended between two of why's samples (at
/// its 100 a second): its CPU is in its process's own `stat`, which why reads, but its
/// waits for a CPU are in no file an ordinary user can read once it is gone (rustc's
/// codegen threads: 110 in one build, each a few milliseconds, 0.05 s of waiting
/// between them).
pub const UNSEEN_UNDER_S: f64 = 0.01;

/// Sums the switches of `root`'s tree per process; the root's wall from its start to
/// its exit.
pub fn sum(root: u32, tree: &Tree, switches: &[Switch]) -> Record {
    let in_tree = |pid: u32| {
        let mut p = pid;
        for _ in 0..64 {
            if p == root {
                return true;
            }
            match tree.parent.get(&p) {
                Some(&parent) => p = parent,
                None => return false,
            }
        }
        false
    };
    let mut threads: BTreeMap<(u32, u32), Thread> = BTreeMap::new();
    let mut names: BTreeMap<u32, String> = BTreeMap::new();
    let (mut first, mut last) = (f64::MAX, 0.0f64);
    let watcher = tree.parent.get(&root).copied();
    let mut load = Load::default();
    for s in switches.iter().filter(|s| Some(s.pid) == watcher) {
        load.add(Slice::Watcher, s.time - s.run_s, s.time);
    }
    for s in switches
        .iter()
        .filter(|s| in_tree(s.pid) && s.tid != EXITED)
    {
        names.insert(s.pid, s.comm.clone());
        if s.pid == root {
            first = first.min(s.time - s.run_s);
            if s.state == 'X' || s.state == 'Z' {
                last = last.max(s.time);
            }
        }
        let t = threads.entry((s.pid, s.tid)).or_default();
        t.born
            .get_or_insert(s.time - s.run_s - s.wait_s.max(s.delay_s));
        t.cpu_s += s.run_s;
        let ran = s.time - s.run_s;
        load.add(Slice::Running, ran, s.time);
        match t.last {
            Some((state, _)) if runnable(state) => {
                t.waited(ran - s.wait_s, ran);
                load.add(Slice::Waiting, ran - s.wait_s, ran);
            }
            Some((_, kind)) => {
                t.waited(ran - s.delay_s, ran);
                load.add(Slice::Waiting, ran - s.delay_s, ran);
                t.off_s[kind_index(kind)] += (s.wait_s - s.delay_s).max(0.0);
            }
            None => {
                t.waited(ran - s.delay_s, ran);
                load.add(Slice::Waiting, ran - s.delay_s, ran);
            }
        }
        t.last = Some((s.state, kind_of(&s.stack)));
        t.last_time = s.time;
    }
    // A thread that exited ran from its last wait to its exit: its last switch-outs, on
    // the CPU it exited on, are nameless ones just after (one, or more where it was
    // preempted as it exited, up to the one that leaves it dead). timehist gives them
    // the pid of its process's parent, or of no process, and waits that are not its.
    let mut nameless: Vec<Option<&Switch>> = switches
        .iter()
        .filter(|s| s.tid == EXITED)
        .map(Some)
        .collect();
    for ((_, tid), t) in threads.iter_mut() {
        let Some(&exit) = tree.thread_exited.get(tid) else {
            continue;
        };
        let mut until = exit;
        if let Some(&cpu) = tree.exit_cpu.get(tid) {
            let mine = nameless.iter_mut().filter(|s| {
                s.is_some_and(|s| s.cpu == cpu && s.time >= exit && s.time - exit < 0.05)
            });
            let mut previous: Option<f64> = None;
            for slot in mine {
                let s = slot.take().expect("filtered on Some");
                let ran = s.time - s.run_s;
                t.cpu_s += s.run_s;
                load.add(Slice::Running, ran, s.time);
                match previous {
                    None => until = until.min(ran),
                    Some(out) => t.waited(out, ran),
                }
                previous = Some(s.time);
                if !runnable(s.state) {
                    break;
                }
            }
        }
        match t.last {
            Some((state, _)) if runnable(state) && until > t.last_time => {
                t.waited(t.last_time, until);
            }
            Some((state, kind)) if !matches!(state, 'X' | 'Z') && until > t.last_time => {
                t.off_s[kind_index(kind)] += until - t.last_time;
            }
            _ => {}
        }
    }
    let mut processes: BTreeMap<u32, Process> = BTreeMap::new();
    for ((pid, tid), t) in threads {
        let p = processes.entry(pid).or_insert_with(|| Process {
            pid,
            ppid: if pid == root {
                0
            } else {
                tree.parent.get(&pid).copied().unwrap_or(0)
            },
            name: tree
                .name
                .get(&pid)
                .or(names.get(&pid))
                .cloned()
                .unwrap_or_default(),
            ..Process::default()
        });
        p.threads += 1;
        p.cpu_s += t.cpu_s;
        let exited = tree.thread_exited.get(&tid).copied();
        let ended = exited.unwrap_or(t.last_time);
        if ended - t.born.unwrap_or(t.last_time) < UNSEEN_UNDER_S {
            p.cpu_wait_unseen_s += t.cpu_wait_s;
        } else {
            p.cpu_wait_s += t.cpu_wait_s;
            if let Some(exit) = exited {
                // Its last runs may be recorded just after its exit record.
                let end = t.waits.last().map_or(exit, |w| w.1.max(exit));
                p.cpu_wait_tail_s += t.waited_within(end - UNSEEN_UNDER_S, end);
            }
        }
        for (sum, s) in p.off_s.iter_mut().zip(t.off_s) {
            *sum += s;
        }
    }
    // The watcher's own CPU kept the tree's threads waiting where they asked for nearly
    // every CPU: taken out, as why takes out its sampler's.
    let displaced = load.displaced();
    let waited: f64 = processes
        .values()
        .map(|p| p.cpu_wait_s + p.cpu_wait_unseen_s)
        .sum();
    if waited > 0.0 {
        let keep = 1.0 - displaced.min(waited) / waited;
        for p in processes.values_mut() {
            p.cpu_wait_s *= keep;
            p.cpu_wait_unseen_s *= keep;
            p.cpu_wait_tail_s *= keep;
        }
    }
    let start = tree.started.get(&root).copied().unwrap_or(first).min(first);
    let end = tree.exited.get(&root).copied().unwrap_or(last).max(last);
    Record {
        root,
        wall_s: (end - start).max(0.0),
        processes: processes.into_values().collect(),
        lost: None,
    }
}
