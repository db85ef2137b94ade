//! Whether other work on the machine could have moved a run's figures, from the run's
//! account of interference and what each workload's figures depend on. The thresholds
//! below come from runs on a quiet 2-core VM and beside known loads (two `yes`, a
//! second `profile --quick`, a `dd` to the same disk); docs/json.md lists them.
//!
//! - **CPU**, judged per timed stage of each workload whose figures need the CPUs:
//!   the run's own threads (its children's too) waited for a CPU at least
//!   [`LOST_SHARE`] of their time in the stage, by the kernel's count of each thread
//!   (schedstat), and other processes used at least [`OTHER_CORES`] cores meanwhile;
//!   threads of the run queued behind each other (more threads than cores) are not
//!   another's work. A stage shorter than [`STAGE_SECONDS`] is judged with the rest of
//!   its workload's time. Runs stored before the thread account was kept are judged
//!   as they were: other processes used at least [`OTHER_CORES`] cores while the
//!   machine was at least [`BUSY_SHARE`] busy, for at least [`CONTENDED_SHARE`] of
//!   the run, over at least [`CPU_SECONDS`].
//! - **Steal**: the hypervisor took at least [`STEAL_SHARE`] of the CPUs' time, judged
//!   over [`CPU_SECONDS`] or more for the same reason.
//! - **Storage**: a device under a target moved at least [`OTHER_SHARE`] of its bytes,
//!   and at least [`OTHER_BYTES`], beyond what the run's processes made storage move
//!   (a journal and metadata add a few percent).
//! - **Network**: an interface carried at least [`OTHER_SHARE`] of its bytes, and at
//!   least [`OTHER_BYTES`], beyond the run's own payload with its headers and ACKs.

use crate::document::{Interference, OtherProcess, RunDocument, Severity, ThreadAccount, Verdict};
use crate::vocab::Exposure;
use crate::vocab::units::{format_bytes, format_seconds};

/// The code of the verdict that says other work disturbed a run.
pub const DISTURBED: &str = "disturbed";

/// Whether other work disturbed `run`, as its verdicts say.
pub fn disturbed(run: &RunDocument) -> bool {
    run.verdicts
        .iter()
        .any(|v| v.workload.is_none() && v.code == DISTURBED)
}

/// Cores other processes must use at once to count.
pub const OTHER_CORES: f64 = 0.25;
/// How busy the machine must be, all its CPUs together, for their use to count.
pub const BUSY_SHARE: f64 = 0.9;
/// The shortest run whose CPU contention is judged.
pub const CPU_SECONDS: f64 = 0.5;
/// Share of the run's samples that must be contended.
pub const CONTENDED_SHARE: f64 = 0.1;
/// Share of the CPUs' time the hypervisor may take before it counts.
pub const STEAL_SHARE: f64 = 0.05;
/// Share of a device's or interface's bytes others must move to count.
pub const OTHER_SHARE: f64 = 0.1;
/// Bytes others must move on a device or interface to count.
pub const OTHER_BYTES: u64 = 16 << 20;
/// Wire bytes per payload byte of TCP: headers at an MTU of 1500 and the ACKs back.
const WIRE_PER_PAYLOAD: f64 = 1.08;
/// Share of a stage's thread time spent waiting for a CPU from which it counts: on a
/// quiet 2-core VM a run's threads waited 0.1-1% of theirs, beside two `yes` 30-50%.
pub const LOST_SHARE: f64 = 0.05;
/// The shortest stage judged on its own.
pub const STAGE_SECONDS: f64 = 0.25;
/// Seconds of waiting below which a stage lost nothing worth a verdict.
const LOST_SECONDS: f64 = 0.02;

/// One workload as the judgement needs it: its name in words (`cpu 1`), exposure and
/// timed stages.
pub struct Exposed {
    /// `kind N`, as reports name workloads.
    pub name: String,
    /// What can move its figures.
    pub exposure: Exposure,
    /// Its timed stages, in order; its whole time where it has none.
    pub stages: Vec<Stage>,
}

/// A timed stage of a workload, on the wall clock.
#[derive(Debug, Clone, PartialEq)]
pub struct Stage {
    /// Its name (`int normal`, `pass 1 write`).
    pub name: String,
    /// When it began, seconds since the Unix epoch.
    pub from_unix_s: f64,
    /// When it ended.
    pub to_unix_s: f64,
}

impl Stage {
    /// The timed stages of a workload's series, or its whole time where it has none;
    /// none without a series.
    pub fn of(series: Option<&crate::document::Series>) -> Vec<Stage> {
        let Some(series) = series else {
            return Vec::new();
        };
        let at = |t: f64| series.clock_unix_s + t;
        let spans = series.stage_spans();
        if spans.is_empty() {
            let end = series
                .finished_at_s
                .or(series.t_s.last().copied())
                .unwrap_or(series.started_at_s);
            return vec![Stage {
                name: String::new(),
                from_unix_s: at(series.started_at_s),
                to_unix_s: at(end),
            }];
        }
        spans
            .into_iter()
            .map(|(name, from, to)| Stage {
                name: name.to_string(),
                from_unix_s: at(from),
                to_unix_s: at(to),
            })
            .collect()
    }
}

/// The `disturbed` verdict of a run, when other work took a share that can move the
/// figures of the workloads exposed to it; none when it did not.
pub fn judge(account: &Interference, workloads: &[Exposed]) -> Option<Verdict> {
    let mut what = Vec::new();
    let mut touched = Vec::new();
    let lost = account
        .threads
        .as_ref()
        .map(|threads| lost_in_stages(account, threads, workloads));
    let cpu = match &lost {
        Some(lost) => !lost.stages.is_empty(),
        None => contended(account),
    };
    // Steal comes in whole ticks (10 ms): in a run shorter than CPU_SECONDS one tick
    // is a share of the CPUs' time that means nothing (8% of a 63 ms run on 2 CPUs).
    let steal = account.seconds >= CPU_SECONDS
        && account.steal_seconds >= STEAL_SHARE * account.seconds * f64::from(account.cpus.max(1));
    if cpu || steal {
        touched.push("cpu");
    }
    match &lost {
        Some(lost) if cpu => what.push(lost.words(account)),
        _ if cpu => what.push(format!(
            "{} while this run needed the CPUs",
            cpu_users(account)
        )),
        _ => {}
    }
    if steal {
        what.push(format!(
            "the hypervisor took {:.0}% of the CPUs' time (steal)",
            100.0 * account.steal_seconds / (account.seconds * f64::from(account.cpus.max(1)))
        ));
    }
    let storage = busy_devices(account);
    if !storage.is_empty() {
        touched.push("storage");
        what.push(with_writers(storage.join(", "), account));
    }
    let network = busy_interfaces(account, workloads);
    if !network.is_empty() {
        touched.push("network");
        what.extend(network);
    }
    let hit: Vec<&str> = workloads
        .iter()
        .filter(|w| {
            (w.exposure.cpu && touched.contains(&"cpu"))
                || (w.exposure.storage && touched.contains(&"storage"))
                || (w.exposure.network_bytes.is_some() && touched.contains(&"network"))
        })
        .map(|w| w.name.as_str())
        .collect();
    if hit.is_empty() {
        return None;
    }
    Some(Verdict::about(None)(
        DISTURBED,
        Severity::Warning,
        format!(
            "other work used this machine during the run: {}; the figures of {} may be lower than this machine gives",
            what.join("; "),
            hit.join(", ")
        ),
    ))
}

/// The devices others moved enough bytes on, in words.
fn busy_devices(account: &Interference) -> Vec<String> {
    account
        .devices
        .iter()
        .filter(|d| {
            let all = d.read_bytes + d.written_bytes;
            d.other_bytes >= OTHER_BYTES && d.other_bytes as f64 >= OTHER_SHARE * all as f64
        })
        .map(|d| {
            format!(
                "{} more on {} than this run moved",
                format_bytes(d.other_bytes),
                d.name
            )
        })
        .collect()
}

/// The interfaces that carried enough bytes beyond the run's own tests, in words.
fn busy_interfaces(account: &Interference, workloads: &[Exposed]) -> Vec<String> {
    let own_network: u64 = workloads
        .iter()
        .filter_map(|w| w.exposure.network_bytes)
        .sum();
    account
        .interfaces
        .iter()
        .filter_map(|i| {
            let all = i.received_bytes + i.sent_bytes;
            // Loopback carries each packet out and in: twice on one interface.
            let copies = if i.name == "lo" { 2.0 } else { 1.0 };
            let own = (own_network as f64 * WIRE_PER_PAYLOAD * copies) as u64;
            let other = all.saturating_sub(own);
            (other >= OTHER_BYTES && other as f64 >= OTHER_SHARE * all as f64).then(|| {
                format!(
                    "{} more on {} than this run's tests",
                    format_bytes(other),
                    i.name
                )
            })
        })
        .collect()
}

/// What the run's threads lost waiting for a CPU in the stages where it counts.
struct Lost {
    /// `cpu 1 (int normal)`, one for each stage that lost enough.
    stages: Vec<String>,
    /// Thread-seconds waited in those stages.
    waited_s: f64,
    /// Thread-seconds on a CPU and waiting in them.
    busy_s: f64,
}

impl Lost {
    /// In words: `this run's threads waited 0.52 s for a CPU, 45% of their time, while
    /// yes (pid 3028) 0.61 s held them, in cpu 1 (int normal)`: who held them before
    /// the stages, which can be many, so that a line cut short still names them.
    fn words(&self, account: &Interference) -> String {
        let holders = held_by(account);
        format!(
            "this run's threads waited {} for a CPU, {:.0}% of their time, while {}, in {}",
            format_seconds(self.waited_s),
            100.0 * self.waited_s / self.busy_s.max(1e-9),
            if holders.is_empty() {
                cpu_users(account)
            } else {
                format!("{holders} held them")
            },
            self.stages.join(", "),
        )
    }
}

/// The stages of CPU-exposed workloads whose threads lost enough time waiting for a
/// CPU while other processes ran; a stage too short to judge alone is judged with the
/// rest of its workload's short stages.
fn lost_in_stages(account: &Interference, threads: &ThreadAccount, workloads: &[Exposed]) -> Lost {
    let mut lost = Lost {
        stages: Vec::new(),
        waited_s: 0.0,
        busy_s: 0.0,
    };
    // A workload without a series is judged over the whole account.
    let whole = [Stage {
        name: String::new(),
        from_unix_s: account.clock_unix_s,
        to_unix_s: account.clock_unix_s + account.seconds,
    }];
    for workload in workloads.iter().filter(|w| w.exposure.cpu) {
        let stages = if workload.stages.is_empty() {
            &whole[..]
        } else {
            &workload.stages[..]
        };
        let (long, short): (Vec<&Stage>, Vec<&Stage>) = stages
            .iter()
            .partition(|s| s.to_unix_s - s.from_unix_s >= STAGE_SECONDS);
        let mut judged: Vec<(String, Vec<&Stage>)> = long
            .into_iter()
            .map(|s| (s.name.clone(), vec![s]))
            .collect();
        let short_s: f64 = short.iter().map(|s| s.to_unix_s - s.from_unix_s).sum();
        if short_s >= STAGE_SECONDS || (judged.is_empty() && !short.is_empty()) {
            judged.push(("its short stages".into(), short));
        }
        for (name, stages) in judged {
            let (mut cpu, mut waited, mut others, mut seconds) = (0.0, 0.0, 0.0, 0.0);
            for stage in &stages {
                let (c, w) = threads_in(threads, stage);
                cpu += c;
                waited += w;
                let length = stage.to_unix_s - stage.from_unix_s;
                others += other_cores_in(account, stage) * length;
                seconds += length;
            }
            let counts = waited >= LOST_SECONDS
                && waited >= LOST_SHARE * (cpu + waited)
                && others >= OTHER_CORES * seconds;
            if counts {
                lost.stages.push(if name.is_empty() {
                    workload.name.clone()
                } else {
                    format!("{} ({name})", workload.name)
                });
                lost.waited_s += waited;
                lost.busy_s += cpu + waited;
            }
        }
    }
    lost
}

/// Thread-seconds the run's threads spent on a CPU and waiting for one in `stage`,
/// each bucket counted by its overlap with the stage.
fn threads_in(threads: &ThreadAccount, stage: &Stage) -> (f64, f64) {
    let (from, to) = (
        stage.from_unix_s - threads.clock_unix_s,
        stage.to_unix_s - threads.clock_unix_s,
    );
    let mut sums = (0.0, 0.0);
    for (i, end) in threads.t_s.iter().enumerate() {
        let length = threads.bucket_s.get(i).copied().unwrap_or(0.0);
        let overlap = (end.min(to) - (end - length).max(from)).max(0.0);
        if length > 0.0 && overlap > 0.0 {
            let share = overlap / length;
            sums.0 += share * threads.cpu_s.get(i).copied().unwrap_or(0.0);
            sums.1 += share * threads.cpu_wait_s.get(i).copied().unwrap_or(0.0);
        }
    }
    sums
}

/// Cores other processes used during `stage` on average, from the looks that overlap
/// it, each weighed by its overlap.
/// Cores other processes used on average from `from_unix_s` to `to_unix_s`, by the
/// run's account.
pub fn other_cores_between(account: &Interference, from_unix_s: f64, to_unix_s: f64) -> f64 {
    let stage = Stage {
        name: String::new(),
        from_unix_s,
        to_unix_s,
    };
    other_cores_in(account, &stage)
}

fn other_cores_in(account: &Interference, stage: &Stage) -> f64 {
    let series = &account.series;
    let (from, to) = (
        stage.from_unix_s - account.clock_unix_s,
        stage.to_unix_s - account.clock_unix_s,
    );
    let (mut sum, mut weight) = (0.0, 0.0);
    let mut start = 0.0;
    for (end, cores) in series.t_s.iter().zip(&series.other_cores) {
        let overlap = (end.min(to) - f64::max(start, from)).max(0.0);
        sum += cores * overlap;
        weight += overlap;
        start = *end;
    }
    if weight > 0.0 { sum / weight } else { 0.0 }
}

/// The other processes that ran where the run's threads waited, in words, peers
/// serving its tests left out: `yes (pid 3028) 0.61 s, yes (pid 3029) 0.58 s`.
fn held_by(account: &Interference) -> String {
    let Some(threads) = &account.threads else {
        return String::new();
    };
    threads
        .holders
        .iter()
        .filter(|h| account.peers.iter().all(|p| p.pid != h.pid))
        .filter(|h| h.cpu_seconds >= 0.01)
        .take(3)
        .map(|h| format!("{} {}", who(h), format_seconds(h.cpu_seconds)))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Whether other processes took CPUs the run needed, for long enough to count, in a
/// run stored before its threads' account was kept.
fn contended(account: &Interference) -> bool {
    let series = &account.series;
    let cpus = f64::from(account.cpus.max(1));
    let samples = series.other_cores.len();
    if samples == 0 || account.seconds < CPU_SECONDS {
        return false;
    }
    // How busy the machine was: every CPU's non-idle time where the account kept it
    // (interrupts and softirqs, a fast network's share, belong to no process), else
    // the processes' (runs stored before), else all of it.
    let busy = |index: usize, other: f64| match series.busy_cores.get(index) {
        Some(busy) => *busy,
        None => series.own_cores.get(index).map_or(cpus, |own| own + other),
    };
    let contended = series
        .other_cores
        .iter()
        .enumerate()
        .filter(|(index, other)| {
            **other >= OTHER_CORES && busy(*index, **other) >= BUSY_SHARE * cpus
        })
        .count();
    contended as f64 >= CONTENDED_SHARE * samples as f64
}

/// The other processes that used the CPUs, in words: `yes (pid 3028) used 0.60 of a
/// core, another ratelab (pid 4312) 0.97`.
fn cpu_users(account: &Interference) -> String {
    let seconds = account.seconds.max(1e-9);
    let named: Vec<String> = account
        .top_cpu
        .iter()
        .filter(|p| p.cpu_seconds / seconds >= 0.05)
        .take(3)
        .enumerate()
        .map(|(index, p)| {
            let cores = p.cpu_seconds / seconds;
            if index == 0 {
                format!("{} used {cores:.2} of a core", who(p))
            } else {
                format!("{} {cores:.2}", who(p))
            }
        })
        .collect();
    if named.is_empty() {
        format!(
            "other processes used {:.2} cores",
            (account.other_cpu_seconds / seconds).min(f64::from(account.cpus.max(1)))
        )
    } else {
        named.join(", ")
    }
}

/// Appends who wrote or read most, where that is known: `…, most by dd (pid 9)`.
fn with_writers(text: String, account: &Interference) -> String {
    match account.top_io.first() {
        Some(p) => {
            let bytes = p.read_bytes.unwrap_or(0) + p.written_bytes.unwrap_or(0);
            format!("{text}, {} by {}", format_bytes(bytes), who(p))
        }
        None => text,
    }
}

/// A process in words: `yes (pid 3028)`, or `another ratelab (pid 4312)`.
fn who(p: &OtherProcess) -> String {
    if p.name == "ratelab" {
        format!("another ratelab (pid {})", p.pid)
    } else {
        format!("{} (pid {})", p.name, p.pid)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::document::{DeviceTraffic, InterfaceTraffic, InterferenceSeries};

    fn quiet() -> Interference {
        Interference {
            seconds: 10.0,
            clock_unix_s: 0.0,
            cpus: 2,
            own_cpu_seconds: 19.0,
            other_cpu_seconds: 0.3,
            kernel_cpu_seconds: 0.1,
            interrupt_cpu_seconds: 0.0,
            steal_seconds: 0.0,
            busy_fraction_per_cpu: vec![0.97, 0.97],
            own_read_bytes: 0,
            own_written_bytes: 1 << 30,
            devices: vec![DeviceTraffic {
                name: "vda".into(),
                read_bytes: 0,
                written_bytes: (1 << 30) + (20 << 20),
                other_bytes: 20 << 20,
            }],
            interfaces: vec![],
            top_cpu: vec![OtherProcess {
                pid: 7,
                name: "sshd".into(),
                cpu_seconds: 0.3,
                read_bytes: None,
                written_bytes: None,
            }],
            top_io: vec![],
            series: InterferenceSeries {
                t_s: (1..=10).map(f64::from).collect(),
                own_cores: vec![1.9; 10],
                other_cores: vec![0.03; 10],
                other_device_bytes: vec![2 << 20; 10],
                busy_cores: vec![1.94; 10],
            },
            watch_cpu_seconds: 0.01,
            peers: vec![],
            threads: None,
        }
    }

    fn workloads() -> Vec<Exposed> {
        vec![
            Exposed {
                name: "cpu 1".into(),
                exposure: Exposure::CPU,
                stages: vec![],
            },
            Exposed {
                name: "disk 2".into(),
                exposure: Exposure::STORAGE,
                stages: vec![],
            },
        ]
    }

    /// A run of 10 s whose own threads ran 0.9 of a thread-second and waited
    /// `waited` every 0.1 s bucket, beside others using `others` cores.
    fn threads(waited: f64, others: f64) -> Interference {
        let mut account = quiet();
        account.series.other_cores = vec![others; 10];
        account.threads = Some(ThreadAccount {
            clock_unix_s: 0.0,
            hz: 20.0,
            samples: 200,
            t_s: (1..=100).map(|i| f64::from(i) / 10.0).collect(),
            bucket_s: vec![0.1; 100],
            cpu_s: vec![0.09; 100],
            cpu_wait_s: vec![waited; 100],
            holders: vec![
                OtherProcess {
                    pid: 3028,
                    name: "yes".into(),
                    cpu_seconds: 3.5,
                    read_bytes: None,
                    written_bytes: None,
                },
                OtherProcess {
                    pid: 77,
                    name: "iperf3".into(),
                    cpu_seconds: 1.0,
                    read_bytes: None,
                    written_bytes: None,
                },
            ],
            sampler_cpu_seconds: 0.02,
        });
        account
    }

    /// A cpu workload whose stages are `spans`, seconds from the account's start.
    fn staged(spans: &[(&str, f64, f64)]) -> Vec<Exposed> {
        vec![Exposed {
            name: "cpu 1".into(),
            exposure: Exposure::CPU,
            stages: spans
                .iter()
                .map(|(name, from, to)| Stage {
                    name: (*name).into(),
                    from_unix_s: *from,
                    to_unix_s: *to,
                })
                .collect(),
        }]
    }

    #[test]
    fn threads_that_waited_for_a_cpu_while_others_ran_are_disturbed_naming_what_was_lost() {
        let mut busy = threads(0.04, 1.0);
        busy.peers = vec![OtherProcess {
            pid: 77,
            name: "iperf3".into(),
            cpu_seconds: 1.0,
            read_bytes: None,
            written_bytes: None,
        }];
        let verdict = judge(&busy, &staged(&[("int normal", 0.0, 10.0)])).unwrap();
        assert!(
            verdict.message.contains(
                "this run's threads waited 4.00 s for a CPU, 31% of their time, while yes \
                 (pid 3028) 3.50 s held them, in cpu 1 (int normal)"
            ),
            "{}",
            verdict.message
        );
        // A peer serving the run's own tests is not named as a holder.
        assert!(!verdict.message.contains("iperf3"), "{}", verdict.message);
    }

    #[test]
    fn threads_queued_behind_each_other_or_waiting_little_are_not_disturbed() {
        // More threads than cores, nobody else running: the run's own queue.
        assert_eq!(
            judge(&threads(0.04, 0.03), &staged(&[("int", 0.0, 10.0)])),
            None
        );
        // Others busy, but the run's threads waited 1% of their time.
        assert_eq!(
            judge(&threads(0.001, 1.0), &staged(&[("int", 0.0, 10.0)])),
            None
        );
    }

    #[test]
    fn waits_are_judged_stage_by_stage_and_short_stages_together() {
        let mut account = threads(0.0, 0.03);
        let mut series = account.threads.take().unwrap();
        // Waits in the second half only, while others ran then.
        for i in 50..100 {
            series.cpu_wait_s[i] = 0.05;
        }
        account.threads = Some(series);
        account.series.other_cores = [vec![0.03; 5], vec![1.5; 5]].concat();
        let verdict = judge(
            &account,
            &staged(&[("empty", 0.0, 5.0), ("int", 5.0, 10.0)]),
        )
        .unwrap();
        assert!(
            verdict.message.contains("held them, in cpu 1 (int);"),
            "{}",
            verdict.message
        );
        // Stages of 0.1 s each are judged together.
        let short: Vec<(String, f64, f64)> = (50..100)
            .map(|i| {
                (
                    format!("s{i}"),
                    f64::from(i) / 10.0,
                    f64::from(i + 1) / 10.0,
                )
            })
            .collect();
        let short: Vec<(&str, f64, f64)> =
            short.iter().map(|(n, a, b)| (n.as_str(), *a, *b)).collect();
        let verdict = judge(&account, &staged(&short)).unwrap();
        assert!(
            verdict.message.contains("cpu 1 (its short stages)"),
            "{}",
            verdict.message
        );
    }

    #[test]
    fn one_tick_of_steal_in_a_short_run_is_not_interference_and_steal_in_a_long_one_is() {
        // Seen in a full suite: 10 ms of steal in a 63 ms run on 2 CPUs, "8%".
        let short = Interference {
            seconds: 0.063,
            steal_seconds: 0.01,
            ..quiet()
        };
        assert!(judge(&short, &workloads()).is_none());
        let long = Interference {
            steal_seconds: 2.0,
            ..quiet()
        };
        let verdict = judge(&long, &workloads()).expect("10% steal over 10 s");
        assert!(verdict.message.contains("(steal)"), "{}", verdict.message);
    }

    #[test]
    fn a_quiet_run_and_a_journal_are_not_interference() {
        assert_eq!(judge(&quiet(), &workloads()), None);
    }

    #[test]
    fn busy_strangers_beside_a_busy_run_are_named_with_the_figures_they_move() {
        let mut busy = quiet();
        busy.series.other_cores = vec![1.2; 10];
        busy.other_cpu_seconds = 12.0;
        busy.top_cpu = vec![
            OtherProcess {
                pid: 3028,
                name: "yes".into(),
                cpu_seconds: 6.0,
                read_bytes: Some(0),
                written_bytes: Some(0),
            },
            OtherProcess {
                pid: 4312,
                name: "ratelab".into(),
                cpu_seconds: 9.7,
                read_bytes: None,
                written_bytes: None,
            },
        ];
        let verdict = judge(&busy, &workloads()).unwrap();
        assert_eq!(
            (verdict.code.as_str(), verdict.severity),
            ("disturbed", Severity::Warning)
        );
        assert!(
            verdict
                .message
                .contains("yes (pid 3028) used 0.60 of a core, another ratelab (pid 4312) 0.97"),
            "{}",
            verdict.message
        );
        assert!(
            verdict.message.contains("the figures of cpu 1, disk 2"),
            "{}",
            verdict.message
        );
        // Strangers beside idle cores take nothing from the run.
        busy.series.own_cores = vec![0.3; 10];
        busy.series.busy_cores = vec![1.5; 10];
        assert_eq!(judge(&busy, &workloads()), None);
    }

    #[test]
    fn cores_busy_with_interrupts_are_no_idle_cores() {
        // Seen beside two `yes`: a 4 Gbit/s receive used 0.05 of a core as a process
        // and much of the rest in softirqs, which no process is charged for.
        let mut busy = quiet();
        busy.series.own_cores = vec![0.05; 10];
        busy.series.other_cores = vec![1.6; 10];
        busy.series.busy_cores = vec![2.0; 10];
        assert!(judge(&busy, &workloads()).is_some());
        // A run stored before busy_cores was kept is judged by its processes alone.
        busy.series.busy_cores.clear();
        assert_eq!(judge(&busy, &workloads()), None);
    }

    #[test]
    fn other_bytes_on_the_device_touch_storage_figures_only() {
        let mut shared = quiet();
        shared.devices[0].other_bytes = 600 << 20;
        shared.devices[0].written_bytes += 580 << 20;
        shared.top_io = vec![OtherProcess {
            pid: 9,
            name: "dd".into(),
            cpu_seconds: 0.5,
            read_bytes: Some(0),
            written_bytes: Some(580 << 20),
        }];
        let verdict = judge(&shared, &workloads()).unwrap();
        assert!(
            verdict
                .message
                .contains("600 MiB more on vda than this run moved, 580 MiB by dd (pid 9)"),
            "{}",
            verdict.message
        );
        assert!(
            verdict
                .message
                .contains("the figures of disk 2 may be lower"),
            "{}",
            verdict.message
        );
        let cpu_only = [Exposed {
            name: "cpu 1".into(),
            exposure: Exposure::CPU,
            stages: vec![],
        }];
        assert_eq!(judge(&shared, &cpu_only), None);
    }

    #[test]
    fn loopback_traffic_is_the_tests_own_twice_over() {
        let mut net = quiet();
        net.devices.clear();
        net.interfaces = vec![InterfaceTraffic {
            name: "lo".into(),
            received_bytes: 1_050_000_000,
            sent_bytes: 1_050_000_000,
        }];
        let test = [Exposed {
            name: "net 1".into(),
            exposure: Exposure {
                network_bytes: Some(1_000_000_000),
                ..Exposure::CPU
            },
            stages: vec![],
        }];
        assert_eq!(judge(&net, &test), None);
        net.interfaces[0].received_bytes += 400_000_000;
        net.interfaces[0].sent_bytes += 400_000_000;
        let verdict = judge(&net, &test).unwrap();
        assert!(
            verdict.message.contains("more on lo than this run's tests"),
            "{}",
            verdict.message
        );
    }
}
