//! A `why` run as stored: what was asked (params), how the command ended and what each
//! device or link could do (context), the account's steps, processes and series
//! (items), and the summary `summarize` makes of them. The live workload writes these
//! and the kind reads them back, through this one definition.

use serde::{Deserialize, Serialize};

use crate::account::{Bucket, ProcessTotal, Sleep, Step, StepTotal};

/// What `ratelab why` was asked to do.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WhyPlan {
    /// The command to start, program first; empty with `--pid`.
    pub command: Vec<String>,
    /// A running process to watch instead.
    pub pid: Option<u32>,
    /// How long to watch `pid` at most; null: until it exits.
    pub seconds: Option<f64>,
    /// Samples per second.
    pub hz: f64,
    /// Seconds each interval of the series holds.
    pub interval_s: f64,
    /// The measured what-ifs asked for with `--what-if`; absent where none were.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub what_if: Option<WhatIfPlan>,
}

/// What `--what-if` asked: which steps to slow and how many rounds of each.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WhatIfPlan {
    /// The steps named (`cpu`, `disk_read`, `disk_write`, `reads_free`, `net`); empty:
    /// every step with 10% of the wall time or more.
    pub steps: Vec<String>,
    /// Rounds of each: an unchanged run, then a slowed one.
    pub rounds: u32,
}

/// A step a what-if changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WhatIfStep {
    /// The command's CPU time, held to a quota.
    Cpu,
    /// Reads from one block device, throttled.
    DiskRead,
    /// Writes to one block device, throttled.
    DiskWrite,
    /// The files the command read, in the page cache before it starts.
    ReadsFree,
    /// What it sent to one TCP peer, that link held to a rate.
    NetSend,
    /// What it received from one TCP peer, that link held to a rate.
    NetReceive,
}

impl WhatIfStep {
    /// The step as users name it.
    pub fn name(self) -> &'static str {
        match self {
            WhatIfStep::Cpu => "cpu",
            WhatIfStep::DiskRead => "disk_read",
            WhatIfStep::DiskWrite => "disk_write",
            WhatIfStep::ReadsFree => "reads_free",
            WhatIfStep::NetSend => "net_send",
            WhatIfStep::NetReceive => "net_receive",
        }
    }
}

/// One round of a what-if: the command unchanged, then changed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WhatIfItem {
    /// The step changed.
    pub step: WhatIfStep,
    /// Where: the device, or the command's processes.
    #[serde(rename = "where")]
    pub place: String,
    /// How many times as long the step's own work was made to take: 2 at half
    /// speed, 0 made free.
    pub factor: f64,
    /// How it was changed, in words (`loop3 held to 52.4 MB/s and 400 reads/s`).
    pub changed_by: String,
    /// The round, from 1.
    pub round: u32,
    /// Wall seconds of the changed run.
    pub wall_s: f64,
    /// Wall seconds of the unchanged run just before it.
    pub baseline_wall_s: f64,
    /// CPU seconds of the changed run's processes (those waited for), where read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_s: Option<f64>,
    /// The same of the unchanged run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline_cpu_s: Option<f64>,
    /// For `cpu`: the quota the changed run was held to, in CPUs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quota_cpus: Option<f64>,
    /// What other work took from a round still disturbed when run the last time, in
    /// words; absent where it was not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disturbed: Option<String>,
}

/// A step `--what-if` did not measure, and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NotMeasured {
    /// The step, as users name it.
    pub step: String,
    /// Where, where known.
    #[serde(rename = "where")]
    pub place: String,
    /// Why not, and what would allow it.
    pub why: String,
}

/// A what-if as measured over its rounds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Measured {
    /// The step changed.
    pub step: WhatIfStep,
    /// Where.
    #[serde(rename = "where")]
    pub place: String,
    /// How many times as long the step's own work was made to take.
    pub factor: f64,
    /// The changed runs' wall time over the unchanged ones, median of the rounds.
    pub ratio: f64,
    /// The least of the rounds' ratios.
    pub ratio_min: f64,
    /// The most of the rounds' ratios.
    pub ratio_max: f64,
    /// (ratio − 1) / (factor − 1), held between 0 (not limited by the step) and 1
    /// (limited by it alone).
    pub sensitivity: f64,
    /// The sensitivities of the least and most ratios.
    pub sensitivity_min: f64,
    /// The sensitivities of the least and most ratios.
    pub sensitivity_max: f64,
    /// Rounds measured.
    pub rounds: u32,
    /// The share of the wall time the samples charged to the step.
    pub sampled_share: f64,
    /// What the command gains were the step twice as fast, from the sensitivity:
    /// 1 / (1 − s / 2); for `reads_free`, what it gained with the reads cached.
    pub speedup: f64,
    /// The speedups of the sensitivities' range.
    pub speedup_min: f64,
    /// The speedups of the sensitivities' range.
    pub speedup_max: f64,
}

/// How the command ended and what the run knew beside its samples.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct WhyContext {
    /// The command's words as run, or as `/proc/PID/cmdline` gave them with `--pid`.
    pub argv: Vec<String>,
    /// The program the command resolved to.
    pub program: Option<String>,
    /// The root process watched.
    pub pid: Option<u32>,
    /// The command's exit code; null while it ran, with `--pid`, or when a signal ended it.
    pub exit_code: Option<i32>,
    /// The signal that ended the command, if one did.
    pub signal: Option<i32>,
    /// Wall seconds from the command's start to its exit (or of the watch, with `--pid`).
    pub wall_s: Option<f64>,
    /// Seconds from the first sample to the last: what the shares are of.
    pub sampled_s: f64,
    /// Samples taken.
    pub samples: u64,
    /// CPU seconds ratelab's sampler used.
    pub sampler_cpu_seconds: f64,
    /// Thread-seconds the command waited for a CPU the sampler held, taken out of its
    /// waits (where the command asked for every CPU); 0 in runs stored before.
    #[serde(default)]
    pub sampler_displaced_s: f64,
    /// Why watching ended: `exited`, `seconds`, `interrupted`.
    pub ended_by: Option<String>,
    /// Processes outside the tree that ran on the CPUs its threads waited for, most first.
    pub held_by: Vec<HeldBy>,
    /// What each device and link the command waited on can do, as measured before.
    pub capabilities: Vec<Capability>,
    /// Processes of the tree whose waits could not be named (another user's, setuid),
    /// in words.
    pub unreadable: Vec<String>,
    /// CPUs ratelab's process could run on, as the command inherited them.
    #[serde(default)]
    pub cpus: Option<usize>,
    /// The steps `--what-if` did not measure, and why.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub what_if_skipped: Vec<NotMeasured>,
    /// Why the what-ifs stopped before their last round, where they did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub what_if_stopped: Option<String>,
}

/// A process that held the CPUs the tree waited for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HeldBy {
    /// Its id.
    pub pid: u32,
    /// Its name.
    pub name: String,
    /// CPU seconds it ran while the tree waited.
    pub cpu_seconds: f64,
}

/// What a device or link can do, and where that figure comes from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Capability {
    /// The step it is for (`disk_read`).
    pub step: Step,
    /// The device or link, as the step names it.
    #[serde(rename = "where")]
    pub place: String,
    /// Bytes per second it moved in that direction; null where nothing measured it.
    pub bytes_per_sec: Option<f64>,
    /// The stored run that measured it; null for a link's physics or nothing.
    pub run_id: Option<i64>,
    /// Where the figure comes from, in words (`run 12 (disk, direct reads of the
    /// largest files)`, `the link's goodput limit`), or what to run to know it.
    pub source: String,
}

/// One measured item of a `why` run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum WhyItem {
    /// The wall time charged to a step at a place.
    Step(StepItem),
    /// A process of the tree and its own threads' time.
    Process(ProcessItem),
    /// An interval of the series.
    Interval(IntervalItem),
    /// TCP's own account of a connection the command waited on.
    Tcp(TcpItem),
    /// A round of a measured what-if.
    WhatIf(WhatIfItem),
}

/// TCP's own account of a connection the command waited on, stored as the account
/// keeps it.
pub type TcpItem = crate::account::TcpTotal;

/// The wall time charged to a step at a place.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepItem {
    /// The step.
    pub step: Step,
    /// Where, in words.
    #[serde(rename = "where")]
    pub place: String,
    /// The block device, for a disk step.
    pub device: Option<String>,
    /// The interface, for a network step where known.
    pub interface: Option<String>,
    /// The peer, for a network step.
    pub peer: Option<String>,
    /// Wall seconds charged.
    pub seconds: f64,
    /// For a device step, wall seconds on a CPU (charged to `cpu`) in the intervals the
    /// command waited on it: work that may go with the step; 0 in runs stored before.
    #[serde(default)]
    pub cpu_alongside_s: f64,
    /// Seconds of the samples in which it was charged, its device or interface read.
    pub active_seconds: f64,
    /// Bytes its device or interface moved its way in those samples.
    pub bytes: u64,
}

/// A process of the tree.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProcessItem {
    /// Its id.
    pub pid: u32,
    /// Its parent.
    pub ppid: u32,
    /// Its name.
    pub name: String,
    /// Most threads at once.
    pub threads: usize,
    /// Thread-seconds on a CPU.
    pub cpu_s: f64,
    /// Thread-seconds waiting for a CPU.
    pub cpu_wait_s: f64,
    /// Thread-seconds in each wait, most first.
    pub waits: Vec<WaitItem>,
    /// Seconds on a CPU by thread name, most first.
    pub cpu_by_thread: Vec<ThreadCpu>,
    /// Whether its waits could be named.
    pub waits_readable: bool,
}

/// Thread-seconds in one wait.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WaitItem {
    /// The wait in words.
    pub what: String,
    /// Its step, where it is one.
    pub step: Option<Step>,
    /// How its threads slept in it, as the kernel's own record names it (`disk`,
    /// `pipe`, `futex`, `child`, `socket`, `timer`, `poll`, `signal`, `other`); null in
    /// runs stored before it was kept.
    #[serde(default)]
    pub kind: Option<Sleep>,
    /// Thread-seconds.
    pub seconds: f64,
}

/// A thread name's time on a CPU.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ThreadCpu {
    /// The thread's name.
    pub thread: String,
    /// Seconds on a CPU.
    pub seconds: f64,
}

/// An interval of the series.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IntervalItem {
    /// Its end, seconds after the first sample.
    pub t_s: f64,
    /// Its length.
    pub seconds: f64,
    /// Wall seconds charged to each step in it (only the steps charged).
    pub steps: Vec<(Step, f64)>,
    /// Thread-seconds on a CPU.
    pub cpu_s: f64,
    /// Thread-seconds waiting for a CPU.
    pub cpu_wait_s: f64,
    /// Bytes each device and interface waited on moved in it.
    pub moved: Vec<Moved>,
}

/// Bytes a device or interface moved.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Moved {
    /// The device or interface.
    pub name: String,
    /// Whether it is an interface.
    pub interface: bool,
    /// Bytes read (received).
    pub read_bytes: u64,
    /// Bytes written (sent).
    pub written_bytes: u64,
}

/// The command as the summary names it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CommandSummary {
    /// Its words.
    pub argv: Vec<String>,
    /// Its exit code; null with `--pid`, or when a signal ended it.
    pub exit_code: Option<i32>,
    /// Wall seconds.
    pub wall_s: f64,
}

/// A step's share of the wall time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepShare {
    /// The step.
    pub step: Step,
    /// Where.
    #[serde(rename = "where")]
    pub place: String,
    /// Wall seconds.
    pub seconds: f64,
    /// Share of the wall time (of the sampled span).
    pub share: f64,
    /// Its device's or interface's rate while the command waited on it.
    pub bytes_per_sec: Option<f64>,
}

/// The step that limits the command, and by how much.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Limiting {
    /// The step.
    pub step: Step,
    /// Where: the device, link or process (the one with most time, where the step
    /// spans several processes).
    #[serde(rename = "where")]
    pub place: String,
    /// Share of the wall time.
    pub share: f64,
    /// Its device's or interface's rate while the command waited on it.
    pub bytes_per_sec: Option<f64>,
    /// What the device or link can do, as measured before (or its physics).
    pub capability_bytes_per_sec: Option<f64>,
    /// The run that measured it; null for physics or none.
    pub capability_run: Option<i64>,
    /// What freeing the step gains for its waits alone, the rest of the command as it
    /// was: 1 / (1 − share); null where the step is the whole of its time. For `cpu`,
    /// what the command gains were its CPU work free.
    pub speedup_if_free: Option<f64>,
    /// For a device step, the share of the wall time on a CPU in the intervals the
    /// command waited on it (a file system's work in an fsync, and the command's own
    /// between its waits).
    #[serde(default)]
    pub cpu_alongside_share: f64,
    /// For a device step, what freeing it gains were that CPU to go with it:
    /// 1 / (1 − share − cpu_alongside_share), the other end of the bracket whose near
    /// end is `speedup_if_free`; null where the two leave under 1% of the time.
    #[serde(default)]
    pub speedup_if_free_with_cpu: Option<f64>,
    /// For `cpu`, what the command gains with CPUs twice as fast: 1 / (1 − share / 2).
    #[serde(default)]
    pub speedup_twice_cpu_speed: Option<f64>,
    /// For `cpu`, the CPUs the command kept busy on average (its CPU seconds over the
    /// wall time), beside those it could use.
    #[serde(default)]
    pub cpus_busy: Option<f64>,
    /// The other step within 5% of the wall time of this one, where the choice was a
    /// tie, in words (`cpu in dd, 49%`).
    #[serde(default)]
    pub tie_with: Option<String>,
    /// For a wait for a CPU, who held it.
    pub held_by: Vec<String>,
    /// For a link, TCP's own account of the connection to its peer, where it was read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp: Option<TcpItem>,
}

/// The summary of a `why` run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WhySummary {
    /// The command.
    pub command: CommandSummary,
    /// Every step at every place, most time first.
    pub steps: Vec<StepShare>,
    /// The step that limits it; null when nothing was sampled.
    pub limiting: Option<Limiting>,
    /// The what-ifs measured with `--what-if`, most sensitive first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub measured: Vec<Measured>,
}

impl StepItem {
    /// The item of a step's total.
    pub fn of(total: &StepTotal) -> StepItem {
        StepItem {
            step: total.key.step,
            place: total.key.place.words(),
            device: total.key.place.device().map(str::to_string),
            interface: total.key.place.interface().map(str::to_string),
            peer: total.key.place.peer().map(str::to_string),
            seconds: total.seconds,
            cpu_alongside_s: total.cpu_alongside_s,
            active_seconds: total.active_seconds,
            bytes: total.bytes,
        }
    }
}

impl ProcessItem {
    /// The item of a process's total.
    pub fn of(process: &ProcessTotal) -> ProcessItem {
        ProcessItem {
            pid: process.pid,
            ppid: process.ppid,
            name: process.name.clone(),
            threads: process.threads,
            cpu_s: process.cpu_s,
            cpu_wait_s: process.cpu_wait_s,
            waits: process
                .waits
                .iter()
                .map(|w| WaitItem {
                    what: w.what.clone(),
                    step: w.step,
                    kind: w.kind,
                    seconds: w.seconds,
                })
                .collect(),
            cpu_by_thread: process
                .cpu_by_thread
                .iter()
                .map(|(thread, seconds)| ThreadCpu {
                    thread: thread.clone(),
                    seconds: *seconds,
                })
                .collect(),
            waits_readable: process.waits_readable,
        }
    }
}

impl IntervalItem {
    /// The item of a bucket of the series.
    pub fn of(bucket: &Bucket) -> IntervalItem {
        IntervalItem {
            t_s: bucket.t_s,
            seconds: bucket.seconds,
            steps: Step::ALL
                .iter()
                .map(|s| (*s, bucket.steps[s.index()]))
                .filter(|(_, seconds)| *seconds > 0.0)
                .collect(),
            cpu_s: bucket.cpu_s,
            cpu_wait_s: bucket.cpu_wait_s,
            moved: bucket
                .counted
                .iter()
                .map(|c| Moved {
                    name: c.name.clone(),
                    interface: c.interface,
                    read_bytes: c.read_bytes,
                    written_bytes: c.written_bytes,
                })
                .collect(),
        }
    }
}
