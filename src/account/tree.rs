//! The process tree under a root, as it comes and goes: each sample lists /proc for
//! processes not seen before (a new one whose parent is a member is a member), lists
//! each member's threads, and reads each thread's times. A thread off its CPU for a
//! share of the interval is looked at closer: its state, and where it is blocked, its
//! wait. A thread seen running after a wait is charged the wait it was last seen in,
//! since a sample only classifies: the time comes from the counters.

use std::collections::{HashMap, HashSet};
use std::time::Instant;

use super::charge::{ProcessView, ThreadSpan};
use super::classify::{self, Sleep, Wait};
use super::look::Machine;
use super::step::{Step, StepKey};
use crate::platform::threads::{self, SchedTimes, ThreadFiles};

/// Threads busy all of their last interval read at one sample at most: the rest take
/// turns, so that 64 busy threads cost what 8 do.
const STEADY_READS: usize = 8;
/// The share of an interval off the CPU above which a thread's wait is looked at.
const LOOK_AT_OFF: f64 = 0.05;
/// How long the CPU a waiting thread was last seen on stands, before it is read again.
const CPU_FRESH: std::time::Duration = std::time::Duration::from_secs(1);

/// One thread followed across samples.
struct Tracked {
    files: ThreadFiles,
    /// When it was first read, and its times then.
    first: (Instant, SchedTimes),
    times: SchedTimes,
    /// Seconds charged off its CPU so far.
    off_s: f64,
    /// When its CPU was last read.
    cpu_at: Option<Instant>,
    /// The wait it was last seen blocked in.
    last_wait: Option<Wait>,
    /// How it slept in that wait.
    last_sleep: Sleep,
    /// The CPU it last ran on, where its state was read.
    cpu: Option<u32>,
    /// When it was last read.
    last_at: Instant,
    /// Its name when it was first seen.
    name: String,
    /// Its shares on a CPU and waiting for one, where it was busy all of its last
    /// interval: such a thread is read in turns with the others like it.
    steady: Option<(f64, f64)>,
    /// Whether it was runnable (on a CPU or waiting for one) when last seen.
    runnable: bool,
}

impl Tracked {
    /// Seconds off its CPU since the last sample. Its time on a CPU is brought up to
    /// date at a tick or a switch, and its wait for one when it gets one, so between
    /// two samples the counters lag by up to a tick and catch up later: what counts as
    /// off is only what the time since the first sample exceeds the counters by, beyond
    /// what was counted off before. A thread that never leaves its CPU is charged at
    /// most one tick off in all.
    fn off_since(&mut self, now: Instant, times: SchedTimes) -> f64 {
        let (first_at, first) = self.first;
        let elapsed = now.duration_since(first_at).as_secs_f64();
        let counted = (times.on_cpu_ns.saturating_sub(first.on_cpu_ns)
            + times.waiting_ns.saturating_sub(first.waiting_ns)) as f64
            / 1e9;
        let excess = elapsed - counted;
        let off = (excess - self.off_s).max(0.0);
        self.off_s = self.off_s.max(excess);
        off
    }

    /// What a thread that ended since it was last read is charged: it ran to its end out
    /// of the wait it was last seen in, which stands for its time off.
    fn ended_wait(&self) -> Wait {
        self.last_wait.clone().unwrap_or_else(running)
    }

    /// The span of a thread found gone at `now`: off its CPU since it was last read, in
    /// its last wait, so that a parent or sibling waiting on it is charged what it did.
    fn ended(&self, pid: u32, tid: u32, now: Instant) -> ThreadSpan {
        ThreadSpan {
            tid,
            pid,
            on_cpu_s: 0.0,
            cpu_wait_s: 0.0,
            off_s: now.duration_since(self.last_at).as_secs_f64(),
            off: self.ended_wait(),
            estimated: false,
            sleep: self.last_wait.as_ref().map(|_| self.last_sleep),
        }
    }

    /// Brings the thread of `tid` in `pid` up to its `times`, read at `now`: its span
    /// since it was last read (its wait looked at where it was off its CPU for a share of it), and
    /// whether it waited for a CPU for a share of it.
    fn advance(
        &mut self,
        pid: u32,
        tid: u32,
        (now, times): (Instant, SchedTimes),
        buffer: &mut Vec<u8>,
        machine: &mut Machine,
    ) -> (ThreadSpan, bool) {
        let moved = times != self.times;
        let ns = |a: u64, b: u64| a.saturating_sub(b) as f64 / 1e9;
        let on_cpu_s = ns(times.on_cpu_ns, self.times.on_cpu_ns);
        let cpu_wait_s = ns(times.waiting_ns, self.times.waiting_ns);
        let seconds = now.duration_since(self.last_at).as_secs_f64();
        self.times = times;
        self.last_at = now;
        let off_s = self.off_since(now, times);
        let waited = cpu_wait_s > LOOK_AT_OFF * seconds;
        let off = if off_s <= LOOK_AT_OFF * seconds {
            // Busy all along: the wait it was last seen in is over. It may have blocked
            // since it last ran: its state is known only where it is read.
            self.runnable = false;
            self.last_wait = None;
            if waited
                && self
                    .cpu_at
                    .is_none_or(|at| now.duration_since(at) > CPU_FRESH)
            {
                let _ = look_at(pid, tid, self, moved, buffer, machine);
            }
            running()
        } else if !moved && self.runnable {
            // Seen runnable and not run since: a thread blocks only by running, so it
            // still waits for a CPU.
            Wait::Step(StepKey::named(Step::CpuWait, ""))
        } else {
            look_at(pid, tid, self, moved, buffer, machine)
        };
        let queued = match &off {
            Wait::Step(key) if key.step == Step::CpuWait => off_s,
            _ => 0.0,
        };
        let busy = on_cpu_s + cpu_wait_s + queued;
        let all_along = off_s <= LOOK_AT_OFF * seconds || queued > 0.0;
        self.steady =
            (all_along && busy > 0.0).then(|| (on_cpu_s / busy, (cpu_wait_s + queued) / busy));
        let blocked =
            !matches!(&off, Wait::Step(key) if matches!(key.step, Step::Cpu | Step::CpuWait));
        let span = ThreadSpan {
            tid,
            pid,
            on_cpu_s,
            cpu_wait_s,
            off_s,
            off,
            estimated: false,
            sleep: blocked.then_some(self.last_sleep),
        };
        (span, waited)
    }
}

/// One process of the tree.
pub struct Member {
    /// Its parent.
    pub ppid: u32,
    /// Its name (`comm`).
    pub name: super::step::Text,
    /// Whether its waits can be named (wchan and syscall readable).
    pub waits_readable: bool,
    threads: HashMap<u32, Tracked>,
    /// Its `comm`, read again after its main thread ran: a child forked by a shell
    /// is named after the shell until it execs its program.
    comm: Option<std::fs::File>,
    /// Whether its main thread ran since the sample before (it may have exec'd).
    ran: bool,
    /// Whether its main thread could still be read: a process is gone when not.
    alive: bool,
    /// Its CPU time by its own `stat` against its threads' counters.
    balance: CpuBalance,
}

/// A process's CPU time by its own `stat`, which counts every thread it had, the ended
/// ones too, against what its threads' counters were seen to add up to: what is owed
/// is the CPU of threads that ran since their last sample and ended, or came and went
/// between two samples (a compiler's codegen threads live a few milliseconds each).
struct CpuBalance {
    stat: Option<std::fs::File>,
    /// Ticks when it was first read: 0 for a process that began under watch, whose
    /// every tick is the command's.
    first_ticks: u64,
    /// Seconds its threads were seen on a CPU, and given it since.
    accounted_s: f64,
}

impl CpuBalance {
    /// The balance of `pid`: from nothing where it began under watch, else from now.
    fn open(pid: u32, born_watched: bool, buffer: &mut Vec<u8>) -> CpuBalance {
        let stat = std::fs::File::open(format!("/proc/{pid}/stat")).ok();
        let mut balance = CpuBalance {
            stat,
            first_ticks: 0,
            accounted_s: 0.0,
        };
        if !born_watched {
            balance.first_ticks = balance.ticks(buffer).unwrap_or(0);
        }
        balance
    }

    fn ticks(&self, buffer: &mut Vec<u8>) -> Option<u64> {
        threads::pread_into(self.stat.as_ref()?, buffer).ok()?;
        Some(threads::parse_thread_stat(std::str::from_utf8(buffer).ok()?)?.cpu_ticks)
    }

    /// CPU seconds its `stat` counts beyond what was accounted, less one tick (what its
    /// reading in whole ticks may be short of); none where it cannot be read.
    fn owed(&self, buffer: &mut Vec<u8>, tick_s: f64) -> f64 {
        self.ticks(buffer).map_or(0.0, |ticks| {
            ticks.saturating_sub(self.first_ticks) as f64 * tick_s - self.accounted_s - tick_s
        })
    }
}

/// Which steady threads one sample reads: those whose turn it is.
#[derive(Clone, Copy)]
struct Turns {
    /// The sample's number.
    round: u64,
    /// How many samples a steady thread waits between reads, at least one.
    every: u64,
}

impl Turns {
    /// Whether the steady thread `tid` is read this sample.
    fn reads(self, tid: u32) -> bool {
        (u64::from(tid) + self.round).is_multiple_of(self.every)
    }
}

/// The span of a steady thread not read this sample: taken to do what it did when
/// last read, `on` of the time on a CPU and `wait` waiting for one.
fn as_last_read(pid: u32, tid: u32, on: f64, wait: f64) -> ThreadSpan {
    ThreadSpan {
        tid,
        pid,
        on_cpu_s: on,
        cpu_wait_s: wait,
        off_s: 0.0,
        off: running(),
        estimated: true,
        sleep: None,
    }
}

/// The thread id a process's unseen threads' CPU is given under: one no thread has.
fn unseen_threads(pid: u32) -> u32 {
    u32::MAX - pid
}

impl Member {
    /// Threads it has now.
    pub fn thread_count(&self) -> usize {
        self.threads.len()
    }

    /// Reads each of its threads (a steady one only at its turn) into `seen`, forgets
    /// those gone, and settles its CPU balance.
    fn sample(
        &mut self,
        pid: u32,
        turns: Turns,
        (buffer, tick_s): (&mut Vec<u8>, f64),
        machine: &mut Machine,
        seen: &mut Seen,
    ) {
        let mut gone = Vec::new();
        let first = seen.spans.len();
        let mut ended = Vec::new();
        for (&tid, tracked) in &mut self.threads {
            let now = Instant::now();
            if let Some((on, wait)) = tracked.steady
                && !turns.reads(tid)
            {
                // Not its turn: it is taken to do what it did when last read; its
                // counters, read at its turn, say what it did over all of them.
                seen.quiet = false;
                seen.spans.push(as_last_read(pid, tid, on, wait));
                continue;
            }
            let Some(times) = tracked.files.times(buffer) else {
                gone.push(tid);
                seen.quiet = false;
                if tid == pid {
                    self.alive = false;
                }
                ended.push(seen.spans.len());
                seen.spans.push(tracked.ended(pid, tid, now));
                continue;
            };
            if tid == pid {
                self.ran |= times.on_cpu_ns != tracked.times.on_cpu_ns;
            }
            let moved = times != tracked.times;
            let (span, waited) = tracked.advance(pid, tid, (now, times), buffer, machine);
            seen.quiet &= !moved && !tracked.runnable;
            if waited && let Some(cpu) = tracked.cpu {
                seen.waited_on_cpus.push(cpu);
            }
            seen.spans.push(span);
        }
        for tid in gone {
            self.threads.remove(&tid);
        }
        self.settle(pid, &mut seen.spans, first, &ended, (buffer, tick_s));
    }

    /// Gives the CPU its `stat` counts beyond its threads' counters (`spans[first..]`,
    /// this sample's) to its threads that ended since the last sample, as much as
    /// each was off its CPU, and the rest to its threads that came and went unseen
    /// (a span of their own). Not while a busy thread waits its turn to be read,
    /// whose CPU its counters give later.
    fn settle(
        &mut self,
        pid: u32,
        spans: &mut Vec<ThreadSpan>,
        first: usize,
        ended: &[usize],
        (buffer, tick_s): (&mut Vec<u8>, f64),
    ) {
        let mine = &spans[first..];
        self.balance.accounted_s += mine
            .iter()
            .filter(|s| !s.estimated)
            .map(|s| s.on_cpu_s)
            .sum::<f64>();
        if mine.iter().any(|s| s.estimated) {
            return;
        }
        let mut owed = self.balance.owed(buffer, tick_s);
        if owed <= 0.0 {
            return;
        }
        self.balance.accounted_s += owed;
        for &at in ended {
            let span = &mut spans[at];
            let given = owed.min(span.off_s);
            span.on_cpu_s += given;
            span.off_s -= given;
            owed -= given;
        }
        if owed > 0.0 {
            spans.push(ThreadSpan {
                tid: unseen_threads(pid),
                pid,
                on_cpu_s: owed,
                cpu_wait_s: 0.0,
                off_s: 0.0,
                off: running(),
                estimated: false,
                sleep: None,
            });
        }
    }
}

/// The tree under one root.
pub struct Tree {
    root: u32,
    /// This process: never a member unless it is the root.
    own: u32,
    /// A thread never followed (the sampler's own, when the root is its process).
    skip_tid: Option<u32>,
    members: HashMap<u32, Member>,
    strangers: HashSet<u32>,
    /// Holders of each pipe end, by process; read again when a wait names a pipe not in it.
    pub pipes: HashMap<(u64, u64), Vec<(u32, bool)>>,
    buffer: Vec<u8>,
    /// /proc/loadavg, whose last pid says whether anything new was made.
    loadavg: Option<std::fs::File>,
    last_pid: Option<u32>,
    /// Samples taken, for the turns of steady threads.
    round: u64,
    /// Seconds a clock tick of `stat` holds.
    tick_s: f64,
}

/// What one sample saw.
pub struct Seen {
    /// Each thread's time since its last sample.
    pub spans: Vec<ThreadSpan>,
    /// The CPUs where a thread waited for one.
    pub waited_on_cpus: Vec<u32>,
    /// Whether nothing in the tree ran, waited for a CPU, came or went since the last
    /// sample: every thread is still in the wait it was seen in.
    pub quiet: bool,
}

impl Tree {
    /// The tree under `root`, with no thread followed yet; `skip_tid` is never followed.
    pub fn new(root: u32, skip_tid: Option<u32>) -> Tree {
        Tree {
            root,
            own: std::process::id(),
            skip_tid,
            members: HashMap::new(),
            strangers: HashSet::new(),
            pipes: HashMap::new(),
            buffer: Vec::with_capacity(1024),
            loadavg: std::fs::File::open("/proc/loadavg").ok(),
            last_pid: None,
            round: 0,
            tick_s: 1.0 / threads::ticks_per_sec(),
        }
    }

    /// Whether the root is still there.
    pub fn root_alive(&self) -> bool {
        self.members.contains_key(&self.root)
    }

    /// The members, by pid.
    pub fn members(&self) -> &HashMap<u32, Member> {
        &self.members
    }

    /// The name of thread `tid` of `pid`, as first seen.
    pub fn thread_name(&self, pid: u32, tid: u32) -> Option<&str> {
        if tid == unseen_threads(pid) {
            return Some("threads unseen as they began or ended");
        }
        Some(self.members.get(&pid)?.threads.get(&tid)?.name.as_str())
    }

    /// The processes as the charge sees them.
    pub fn views(&self) -> HashMap<u32, ProcessView> {
        self.members
            .iter()
            .map(|(pid, m)| {
                (
                    *pid,
                    ProcessView {
                        name: m.name.clone(),
                        ppid: m.ppid,
                    },
                )
            })
            .collect()
    }

    /// Takes a sample: finds new members and threads, reads every thread's times, and
    /// classifies the waits of those off their CPU.
    pub fn sample(&mut self, machine: &mut Machine) -> Seen {
        let before = self.members.len();
        let ended = self.discover();
        let quiet = ended.is_empty() && self.members.len() == before;
        for pid in &ended {
            machine.forget(*pid);
        }
        self.share_threads(machine, !ended.is_empty());
        let mut seen = Seen {
            spans: Vec::new(),
            waited_on_cpus: Vec::new(),
            quiet,
        };
        self.round += 1;
        let turns = self.turns();
        for (&pid, member) in &mut self.members {
            member.sample(
                pid,
                turns,
                (&mut self.buffer, self.tick_s),
                machine,
                &mut seen,
            );
        }
        seen
    }

    /// Tells `machine` which threads are the tree's, where their number changed or a
    /// member `ended`.
    fn share_threads(&self, machine: &mut Machine, ended: bool) {
        let threads = self
            .members
            .values()
            .map(|m| m.threads.len())
            .sum::<usize>();
        if threads != machine.member_threads.len() || ended {
            machine.member_threads = self
                .members
                .values()
                .flat_map(|m| m.threads.keys().copied())
                .collect();
        }
    }

    /// This sample's turn of the steady threads, so that at most [`STEADY_READS`] of
    /// them are read.
    fn turns(&self) -> Turns {
        let steady = self
            .members
            .values()
            .flat_map(|m| m.threads.values())
            .filter(|t| t.steady.is_some())
            .count();
        Turns {
            round: self.round,
            every: steady.div_ceil(STEADY_READS).max(1) as u64,
        }
    }

    /// Finds members and threads gone and new: a member whose main thread can no
    /// longer be read has ended; a listing of /proc and of each member's tasks happens
    /// only when the kernel has given out a new id since the last one (listing /proc
    /// costs about 100 µs, most of a sample, and finds nothing new otherwise).
    fn discover(&mut self) -> Vec<u32> {
        let mut ended = self.renamed_and_ended();
        let last_pid = self.loadavg.as_ref().and_then(|file| {
            threads::pread_into(file, &mut self.buffer).ok()?;
            threads::parse_last_pid(std::str::from_utf8(&self.buffer).ok()?)
        });
        if last_pid.is_some() && last_pid == self.last_pid {
            return ended;
        }
        self.last_pid = last_pid;
        let listed: HashSet<u32> = threads::process_ids().into_iter().collect();
        for pid in self.members.keys().copied().collect::<Vec<_>>() {
            if !listed.contains(&pid) {
                self.members.remove(&pid);
                ended.push(pid);
            }
        }
        self.strangers.retain(|pid| listed.contains(pid));
        self.adopt(&listed);
        self.track_threads();
        ended
    }

    /// Members whose main thread could no longer be read, taken out; the others that
    /// ran since the last sample named again, as a program may rename itself.
    fn renamed_and_ended(&mut self) -> Vec<u32> {
        let mut ended = Vec::new();
        for (&pid, member) in &mut self.members {
            if !member.alive {
                ended.push(pid);
                continue;
            }
            if !std::mem::take(&mut member.ran) {
                continue;
            }
            if let Some(comm) = &member.comm
                && threads::pread_into(comm, &mut self.buffer).is_ok()
                && let Ok(name) = std::str::from_utf8(&self.buffer)
                && !name.trim().is_empty()
                && name.trim() != &*member.name
            {
                member.name = name.trim().into();
            }
        }
        for pid in &ended {
            self.members.remove(pid);
        }
        ended
    }

    /// The processes of `listed` not seen before whose parent is a member (or which
    /// are the root), as members; the rest as strangers, not read again.
    fn adopt(&mut self, listed: &HashSet<u32>) {
        let mut new: Vec<(u32, u32, String)> = listed
            .iter()
            .copied()
            .filter(|pid| !self.members.contains_key(pid) && !self.strangers.contains(pid))
            .filter_map(|pid| {
                let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
                let process = crate::platform::procfs::parse_stat(pid, &stat)?;
                Some((pid, process.ppid, process.name))
            })
            .collect();
        // A child may be listed before its parent: add until nothing more joins.
        // ratelab itself descends from what --pid may name (its shell, init): it and
        // what it starts are a stranger, unless it is the root it watches.
        loop {
            let before = new.len();
            new.retain(|(pid, ppid, name)| {
                let joins = *pid != self.own && self.members.contains_key(ppid);
                if *pid == self.root || joins {
                    self.members.insert(
                        *pid,
                        Member {
                            ppid: *ppid,
                            name: name.as_str().into(),
                            waits_readable: true,
                            threads: HashMap::new(),
                            comm: std::fs::File::open(format!("/proc/{pid}/comm")).ok(),
                            ran: true,
                            alive: true,
                            balance: CpuBalance::open(*pid, self.round > 0, &mut self.buffer),
                        },
                    );
                    false
                } else {
                    true
                }
            });
            if new.len() == before {
                break;
            }
        }
        self.strangers
            .extend(new.into_iter().map(|(pid, _, _)| pid));
    }

    /// Each member's threads as listed now: those gone dropped, those new opened.
    fn track_threads(&mut self) {
        for (&pid, member) in &mut self.members {
            let tids = threads::thread_ids(pid);
            member.threads.retain(|tid, _| tids.contains(tid));
            for tid in tids {
                if Some(tid) == self.skip_tid || member.threads.contains_key(&tid) {
                    continue;
                }
                let Ok(files) = ThreadFiles::open(pid, tid) else {
                    continue;
                };
                member.waits_readable &= files.waits_readable();
                let times = files.times(&mut self.buffer).unwrap_or_default();
                let name = files
                    .stat(&mut self.buffer)
                    .map(|s| s.name)
                    .unwrap_or_default();
                let now = Instant::now();
                // A thread begun under watch (after the first sample) is the command's
                // from its start: its time on a CPU and waiting for one before it was
                // first seen (a new thread's first wait for a CPU among them) counts,
                // as though it had been read as it began.
                let (first_at, base) = if self.round > 0 {
                    let before = std::time::Duration::from_nanos(
                        times.on_cpu_ns.saturating_add(times.waiting_ns),
                    );
                    (
                        now.checked_sub(before).unwrap_or(now),
                        SchedTimes::default(),
                    )
                } else {
                    (now, times)
                };
                member.threads.insert(
                    tid,
                    Tracked {
                        files,
                        first: (first_at, base),
                        times: base,
                        off_s: 0.0,
                        cpu_at: None,
                        last_wait: None,
                        last_sleep: Sleep::Other,
                        cpu: None,
                        last_at: first_at,
                        name,
                        steady: None,
                        runnable: false,
                    },
                );
            }
        }
    }

    /// Reads again which members hold which pipes, and which way.
    pub fn read_pipes(&mut self, machine: &mut Machine) {
        use crate::platform::fds::{FdTarget, descriptors, opened_for_writing};
        use classify::Lookup;
        let mut pipes: HashMap<(u64, u64), Vec<(u32, bool)>> = HashMap::new();
        for &pid in self.members.keys() {
            for fd in descriptors(pid) {
                if let Some(FdTarget::Pipe(key)) = machine.fd(pid, fd)
                    && let Some(writing) = opened_for_writing(pid, fd)
                {
                    let holders = pipes.entry(key).or_default();
                    if !holders.contains(&(pid, writing)) {
                        holders.push((pid, writing));
                    }
                }
            }
        }
        self.pipes = pipes;
    }
}

/// Time on a CPU: what a thread that ran all along is charged.
fn running() -> Wait {
    Wait::Step(StepKey::named(Step::Cpu, ""))
}

/// What a thread off its CPU for a share of the interval waited for: its wait now if
/// it is blocked, else the wait it was last seen in. A thread that has not run since
/// the last sample cannot have changed what it waits for: still blocked, it waits for
/// the same; runnable, it waits for a CPU, which its counters say only once it runs.
fn look_at(
    pid: u32,
    tid: u32,
    tracked: &mut Tracked,
    ran: bool,
    buffer: &mut Vec<u8>,
    machine: &mut Machine,
) -> Wait {
    let Some(stat) = tracked.files.stat(buffer) else {
        return running();
    };
    tracked.cpu = Some(stat.cpu);
    tracked.cpu_at = Some(Instant::now());
    tracked.name = stat.name;
    if matches!(stat.state, b'Z' | b'X') {
        // Ended since it was last read (its system call then reads as a fault).
        tracked.runnable = false;
        return tracked.ended_wait();
    }
    let was_runnable = std::mem::replace(&mut tracked.runnable, stat.state == b'R');
    if stat.state == b'R' {
        if !ran && was_runnable {
            // Runnable at the last look too, and not run since: waiting for a CPU.
            return Wait::Step(StepKey::named(Step::CpuWait, ""));
        }
        // Runnable now: whatever it waited for is over (a reader woken by its disk
        // just now, or between two reads); the last wait it was seen in stands for
        // it, else it was preempted.
        return tracked.last_wait.clone().unwrap_or_else(|| {
            if ran {
                running()
            } else {
                Wait::Step(StepKey::named(Step::CpuWait, ""))
            }
        });
    }
    if !ran
        && let Some(wait) = &tracked.last_wait
        && !wait.raced()
    {
        return wait.clone();
    }
    let mut read = || {
        let wchan = tracked.files.wchan(buffer);
        let syscall = tracked.files.syscall(buffer);
        let sleep = classify::sleep_of(wchan.as_deref(), syscall);
        let wait = classify::classify(pid, tid, wchan.as_deref(), syscall, machine);
        (wait, sleep)
    };
    let (mut wait, mut sleep) = read();
    if wait.raced() {
        // Its call named a descriptor closed since: it has moved on, to what it does now.
        (wait, sleep) = read();
    }
    if let Wait::Step(key) = &wait
        && key.step == Step::Cpu
    {
        // Read between two files: it was running again.
        return tracked.last_wait.clone().unwrap_or(wait);
    }
    tracked.last_wait = Some(wait.clone());
    tracked.last_sleep = sleep;
    wait
}
