//! Whether other work on the machine could have moved a run's figures, from the run's
//! account of interference and what each workload's figures depend on. The thresholds
//! below come from runs on a quiet 2-core VM and beside known loads (two `yes`, a
//! second `profile --quick`, a `dd` to the same disk); docs/json.md lists them.
//!
//! - **CPU**: other processes used at least [`OTHER_CORES`] cores while the machine was
//!   at least [`BUSY_SHARE`] busy (anything but idle: interrupts and softirqs count),
//!   for at least [`CONTENDED_SHARE`] of the run. Work
//!   beside idle cores takes nothing from the run; on a quiet VM other processes used
//!   0.01-0.05 cores. A run shorter than [`CPU_SECONDS`] is not judged on CPU: the
//!   kernel counts CPU time in 10 ms ticks, too coarse to tell over less.
//! - **Steal**: the hypervisor took at least [`STEAL_SHARE`] of the CPUs' time, judged
//!   over [`CPU_SECONDS`] or more for the same reason.
//! - **Storage**: a device under a target moved at least [`OTHER_SHARE`] of its bytes,
//!   and at least [`OTHER_BYTES`], beyond what the run's processes made storage move
//!   (a journal and metadata add a few percent).
//! - **Network**: an interface carried at least [`OTHER_SHARE`] of its bytes, and at
//!   least [`OTHER_BYTES`], beyond the run's own payload with its headers and ACKs.

use crate::document::{Interference, OtherProcess, RunDocument, Severity, Verdict};
use crate::vocab::Exposure;
use crate::vocab::units::format_bytes;

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

/// One workload as the judgement needs it: its name in words (`cpu 1`) and exposure.
pub struct Exposed {
    /// `kind N`, as reports name workloads.
    pub name: String,
    /// What can move its figures.
    pub exposure: Exposure,
}

/// The `disturbed` verdict of a run, when other work took a share that can move the
/// figures of the workloads exposed to it; none when it did not.
pub fn judge(account: &Interference, workloads: &[Exposed]) -> Option<Verdict> {
    let mut what = Vec::new();
    let mut touched = Vec::new();
    let cpu = contended(account);
    // Steal comes in whole ticks (10 ms): in a run shorter than CPU_SECONDS one tick
    // is a share of the CPUs' time that means nothing (8% of a 63 ms run on 2 CPUs).
    let steal = account.seconds >= CPU_SECONDS
        && account.steal_seconds >= STEAL_SHARE * account.seconds * f64::from(account.cpus.max(1));
    if cpu || steal {
        touched.push("cpu");
    }
    if cpu {
        what.push(format!(
            "{} while this run needed the CPUs",
            cpu_users(account)
        ));
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

/// Whether other processes took CPUs the run needed, for long enough to count.
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
        }
    }

    fn workloads() -> Vec<Exposed> {
        vec![
            Exposed {
                name: "cpu 1".into(),
                exposure: Exposure::CPU,
            },
            Exposed {
                name: "disk 2".into(),
                exposure: Exposure::STORAGE,
            },
        ]
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
                .contains("629 MB more on vda than this run moved, 608 MB by dd (pid 9)"),
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
