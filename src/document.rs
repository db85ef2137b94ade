//! The run document: one run as docs/json.md describes it. The runner builds it,
//! the store keeps it, and every report (terminal, JSON, CSV) is a view of it.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::platform::Machine;

/// Whether a run finished.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    /// Every workload ran to its end.
    Complete,
    /// Stopped early by an error or an interrupt, or still running.
    Incomplete,
}

impl RunStatus {
    /// The name stored and printed.
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Complete => "complete",
            RunStatus::Incomplete => "incomplete",
        }
    }

    /// Parses a stored name.
    pub fn parse(text: &str) -> Option<RunStatus> {
        match text {
            "complete" => Some(RunStatus::Complete),
            "incomplete" => Some(RunStatus::Incomplete),
            _ => None,
        }
    }
}

impl std::fmt::Display for RunStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One run: its context, its workloads with every item, and the verdicts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunDocument {
    /// The run's id in the results database; null with `--no-store`.
    pub run_id: Option<i64>,
    /// The run's identity wherever it is stored or imported (a UUID, version 7);
    /// absent in runs stored before it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_uuid: Option<String>,
    /// Whether the run finished.
    pub status: RunStatus,
    /// Why an incomplete run stopped: `interrupted` or `error: ...`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub incomplete_reason: Option<String>,
    /// The ratelab version that measured it.
    pub ratelab_version: String,
    /// The verb that made the run (`disk`, `profile`).
    pub verb: String,
    /// The user's label (`--label`).
    #[serde(default)]
    pub label: Option<String>,
    /// Start time, RFC 3339 UTC.
    pub started_at: String,
    /// End time, RFC 3339 UTC; null while running.
    #[serde(default)]
    pub finished_at: Option<String>,
    /// The machine it ran on.
    pub machine: Machine,
    /// The workloads, in the order they were planned.
    pub workloads: Vec<WorkloadRecord>,
    /// Contention figures when workloads ran at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contention: Option<Value>,
    /// Conclusions in words.
    pub verdicts: Vec<Verdict>,
    /// CPU seconds the runner's own thread (the sampler, storing, progress) used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runner_cpu_seconds: Option<f64>,
    /// Wall seconds the workloads ran for, start to end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runner_wall_seconds: Option<f64>,
    /// For a run started with others of a fleet at one agreed instant, how well it kept
    /// to it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fleet: Option<FleetStart>,
    /// What else used the machine while the run ran; absent in runs stored before it
    /// was measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interference: Option<Interference>,
}

/// What else used the machine while a run ran: other processes' CPU, the hypervisor's
/// steal, bytes on the devices under the run's targets that were not its own, traffic
/// on its network interfaces, and the other processes that did most, on the run's clock.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Interference {
    /// Seconds it covers: from the first workload's setup to the end of the last.
    pub seconds: f64,
    /// When it started, seconds since the Unix epoch: the clock its series is on.
    pub clock_unix_s: f64,
    /// The machine's logical CPUs.
    pub cpus: u32,
    /// CPU seconds this run's process and its children used.
    pub own_cpu_seconds: f64,
    /// CPU seconds every other process used: the machine's process time less this
    /// run's and less the kernel's own threads'.
    pub other_cpu_seconds: f64,
    /// CPU seconds the kernel's own threads used (kworker, ksoftirqd, jbd2): much of it
    /// is the work of this run's I/O, so it is not counted as another's.
    pub kernel_cpu_seconds: f64,
    /// CPU seconds of interrupts and softirqs, whoever caused them.
    pub interrupt_cpu_seconds: f64,
    /// CPU seconds a vCPU wanted to run while the hypervisor ran something else.
    pub steal_seconds: f64,
    /// Each CPU's busy share over the run, every process counted, by CPU number.
    pub busy_fraction_per_cpu: Vec<f64>,
    /// Bytes this run's processes made storage read and write.
    pub own_read_bytes: u64,
    /// See `own_read_bytes`.
    pub own_written_bytes: u64,
    /// The block devices under the run's storage targets.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub devices: Vec<DeviceTraffic>,
    /// The network interfaces the run's tests used.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub interfaces: Vec<InterfaceTraffic>,
    /// The other processes that used most CPU, most first.
    pub top_cpu: Vec<OtherProcess>,
    /// The other processes that made storage move most bytes, most first (only those
    /// this user may read).
    pub top_io: Vec<OtherProcess>,
    /// The account sample by sample.
    pub series: InterferenceSeries,
    /// CPU seconds keeping the account cost (its thread's own time).
    #[serde(default)]
    pub watch_cpu_seconds: f64,
    /// Processes that served this run's own tests over loopback (a `net serve` or
    /// `iperf3 -s` on this machine): their work is the run's, not another's.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub peers: Vec<OtherProcess>,
    /// What the run's own threads did and lost, sampled; absent in runs stored before
    /// it was kept, and in `why` runs, whose account is their command's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threads: Option<ThreadAccount>,
}

/// The run's own threads (and its children's) as the kernel accounts them, bucket by
/// bucket: time on a CPU and time runnable but waiting for one.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ThreadAccount {
    /// When the first sample was taken, seconds since the Unix epoch.
    pub clock_unix_s: f64,
    /// Samples per second.
    pub hz: f64,
    /// Samples taken.
    pub samples: u64,
    /// End of each bucket, seconds from `clock_unix_s`.
    pub t_s: Vec<f64>,
    /// Each bucket's length, seconds.
    pub bucket_s: Vec<f64>,
    /// Thread-seconds on a CPU in each bucket, all threads.
    pub cpu_s: Vec<f64>,
    /// Thread-seconds runnable but waiting for a CPU in each bucket, all threads.
    pub cpu_wait_s: Vec<f64>,
    /// Other processes that ran on the CPUs while the run's threads waited for one,
    /// most first, with the CPU seconds they ran then.
    pub holders: Vec<OtherProcess>,
    /// CPU seconds the sampler's thread used.
    pub sampler_cpu_seconds: f64,
}

/// Bytes one block device moved during a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeviceTraffic {
    /// Its name (`vda`, `loop3`).
    pub name: String,
    /// Bytes it read.
    pub read_bytes: u64,
    /// Bytes it wrote.
    pub written_bytes: u64,
    /// What it moved beyond what this run's processes made storage move, its journal
    /// and metadata included.
    pub other_bytes: u64,
}

/// Bytes one network interface carried during a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InterfaceTraffic {
    /// Its name (`eth0`, `lo`).
    pub name: String,
    /// Bytes it received, headers included.
    pub received_bytes: u64,
    /// Bytes it sent, headers included.
    pub sent_bytes: u64,
}

/// A process other than the run's own, and what it did during the run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OtherProcess {
    /// Its id.
    pub pid: u32,
    /// Its command name.
    pub name: String,
    /// CPU seconds it used during the run.
    pub cpu_seconds: f64,
    /// Bytes it made storage read, where this user may read them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_bytes: Option<u64>,
    /// Bytes it made storage write, likewise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub written_bytes: Option<u64>,
}

/// The interference account sample by sample, on the run's clock.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct InterferenceSeries {
    /// End of each sample, seconds from `clock_unix_s`.
    pub t_s: Vec<f64>,
    /// Cores this run's processes used during each sample, on average.
    #[serde(default)]
    pub own_cores: Vec<f64>,
    /// Cores other processes used during each sample, on average.
    pub other_cores: Vec<f64>,
    /// Cores busy with anything during each sample (processes, the kernel's threads,
    /// interrupts and softirqs, steal): how little was left idle. Absent in runs stored
    /// before it was kept.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub busy_cores: Vec<f64>,
    /// Bytes the run's devices moved beyond its own during each sample.
    pub other_device_bytes: Vec<u64>,
}

/// How a run of `ratelab fleet --together` started beside the fleet's other runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FleetStart {
    /// The fleet's hosts, by name, in order.
    pub hosts: Vec<String>,
    /// The agreed start, seconds since the Unix epoch on the fleet's clock.
    pub requested_unix_s: f64,
    /// This host's clock minus the fleet's, seconds, estimated over the ssh channel.
    pub clock_offset_s: f64,
    /// Half the round trip of the exchange the offset came from: its uncertainty, seconds.
    pub clock_offset_error_s: f64,
    /// When its workloads started, on the fleet's clock, minus the agreed start, seconds.
    pub start_error_s: f64,
    /// The widest gap between the starts of the fleet's runs, seconds.
    pub skew_s: f64,
}

/// One workload of a run: what it was asked to do and everything it measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkloadRecord {
    /// The workload kind (`disk`, `net`, `cpu`...), as its kind names itself.
    pub kind: String,
    /// What it measured: a folder, a host.
    pub target: String,
    /// Its parameters, as validated.
    pub params: Value,
    /// What the platform says of the target (for disk: the storage chain and link limit).
    #[serde(default, skip_serializing_if = "Value::is_null")]
    pub context: Value,
    /// One entry per measured item (a file written or read, a stream...).
    pub items: Vec<Value>,
    /// Statistics over the items, keyed by operation.
    #[serde(default)]
    pub summary: Value,
    /// Time series from the sampler, on the clock of the workloads that ran with it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub series: Option<Series>,
    /// For a workload run alone first (`--alone`), the index of the one it stands for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alone_of: Option<usize>,
    /// For a record whose items another workload measured (an image run's places),
    /// that workload's index.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub measured_by: Option<usize>,
    /// Problems that did not stop the workload (an unreadable file), in words.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

impl WorkloadRecord {
    /// A record of `kind` on `target` with `items`, as stored before its summary, made up
    /// for tests.
    #[cfg(test)]
    pub fn for_test(kind: &str, target: &str, items: Vec<Value>) -> WorkloadRecord {
        WorkloadRecord {
            kind: kind.into(),
            target: target.into(),
            params: Value::Object(Default::default()),
            context: Value::Null,
            items,
            summary: Value::Null,
            series: None,
            alone_of: None,
            measured_by: None,
            warnings: vec![],
        }
    }
}

/// A workload's progress sampled on one clock shared with the workloads that ran beside it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Series {
    /// The sampling interval asked for.
    pub interval_s: f64,
    /// Wall-clock time of the group's common start (t_s = 0), seconds since the Unix
    /// epoch: what lines a series up with logs and other hosts.
    pub clock_unix_s: f64,
    /// When the workload started, in seconds from the group's common start.
    pub started_at_s: f64,
    /// When it finished, in seconds from the same start; null if it never did.
    pub finished_at_s: Option<f64>,
    /// End of each sample, in seconds from the group's common start.
    pub t_s: Vec<f64>,
    /// Bytes moved during each sample.
    pub bytes: Vec<u64>,
    /// Operations completed during each sample.
    pub ops: Vec<u64>,
    /// Times where the rate changed level for good: present, maybe empty, for runs that
    /// look for them (sustained runs); absent for the others.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub knees: Option<Vec<Knee>>,
    /// The stages the workload went through (a pass's writes, its reads, a test), each
    /// as it ended; empty in runs stored before stages were timed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stages: Vec<StageEnd>,
}

impl Series {
    /// The rate of each sample, bytes per second (the first sample starts at `started_at_s`).
    pub fn bytes_per_sec(&self) -> Vec<f64> {
        let mut previous = self.started_at_s;
        self.t_s
            .iter()
            .zip(&self.bytes)
            .map(|(&t, &bytes)| {
                let seconds = (t - previous).max(1e-9);
                previous = t;
                bytes as f64 / seconds
            })
            .collect()
    }
}

/// The end of one stage of a workload, on its group's clock.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StageEnd {
    /// The stage as the workload names it ("pass 1 write", "RND4K-Q32T1 read").
    pub stage: String,
    /// When it ended, in seconds from the group's start.
    pub t_s: f64,
}

impl Series {
    /// Each stage with the span it took: from the workload's start or the stage before's
    /// end, to its own end; a stage ended more than once in a row (a monitor's samples,
    /// stored as they come) is one span.
    pub fn stage_spans(&self) -> Vec<(&str, f64, f64)> {
        let mut spans: Vec<(&str, f64, f64)> = Vec::new();
        for end in &self.stages {
            match spans.last_mut() {
                Some(last) if last.0 == end.stage => last.2 = end.t_s,
                last => {
                    let from = last.map_or(self.started_at_s, |l| l.2);
                    spans.push((end.stage.as_str(), from, end.t_s));
                }
            }
        }
        spans
    }
}

/// A lasting change of rate level in a series.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Knee {
    /// When the level changed, in seconds from the group's start.
    pub t_s: f64,
    /// Bytes moved by then.
    pub bytes_before: u64,
    /// The level before, bytes per second (median of its samples).
    pub before_bytes_per_sec: f64,
    /// The level after.
    pub after_bytes_per_sec: f64,
}

/// How serious a verdict is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    /// A finding worth knowing.
    Info,
    /// A figure to distrust or a condition to fix.
    Warning,
    /// A check failed; the run exits with code 1.
    Error,
}

/// A conclusion in words, with a stable code for scripts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    /// Stable identifier (`faster_than_link`, `not_evicted`...).
    pub code: String,
    /// How serious it is.
    pub severity: Severity,
    /// The finding in words.
    pub message: String,
    /// Index of the workload it is about, if one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workload: Option<usize>,
}

impl Verdict {
    /// What a kind's verdicts about `workload` (the whole run when `None`) are made with.
    pub fn about(workload: Option<usize>) -> impl Fn(&str, Severity, String) -> Verdict {
        move |code, severity, message| Verdict {
            code: code.to_string(),
            severity,
            message,
            workload,
        }
    }
}

impl RunDocument {
    /// A new run of `verb` on `machine`, started now and incomplete until concluded:
    /// how the runner and the servers that store runs of their own begin one.
    pub fn begin(
        verb: &str,
        label: Option<String>,
        machine: Machine,
        workloads: Vec<WorkloadRecord>,
    ) -> RunDocument {
        RunDocument {
            run_id: None,
            run_uuid: Some(uuid::Uuid::now_v7().to_string()),
            status: RunStatus::Incomplete,
            incomplete_reason: None,
            ratelab_version: env!("CARGO_PKG_VERSION").to_string(),
            verb: verb.to_string(),
            label,
            started_at: now_rfc3339(),
            finished_at: None,
            machine,
            workloads,
            contention: None,
            verdicts: Vec::new(),
            runner_cpu_seconds: None,
            runner_wall_seconds: None,
            fleet: None,
            interference: None,
        }
    }

    /// A complete run of `workloads` made up for tests: run 1, on no machine in particular.
    #[cfg(test)]
    pub fn for_test(workloads: Vec<WorkloadRecord>) -> RunDocument {
        RunDocument {
            run_id: Some(1),
            run_uuid: None,
            status: RunStatus::Complete,
            incomplete_reason: None,
            ratelab_version: "0.1.0".into(),
            verb: "test".into(),
            label: None,
            started_at: "2026-11-22T10:00:00Z".into(),
            finished_at: None,
            machine: Machine::default(),
            workloads,
            contention: None,
            verdicts: vec![],
            runner_cpu_seconds: None,
            runner_wall_seconds: None,
            fleet: None,
            interference: None,
        }
    }

    /// Whether any verdict is an error, which makes the run exit with code 1.
    pub fn has_error_verdict(&self) -> bool {
        self.verdicts.iter().any(|v| v.severity == Severity::Error)
    }
}

/// The current time as RFC 3339 UTC with seconds.
pub fn now_rfc3339() -> String {
    humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string()
}

/// A mark on one item that says its figure is not a plain measurement.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Flag {
    /// Faster than the physical limit of the target's link: served from a cache.
    FasterThanLink,
    /// More than half of the file was in the page cache before the read.
    Cached,
    /// Too short to time reliably.
    Small,
}

impl Flag {
    /// The name stored and printed.
    pub fn as_str(self) -> &'static str {
        match self {
            Flag::FasterThanLink => "faster_than_link",
            Flag::Cached => "cached",
            Flag::Small => "small",
        }
    }
}
