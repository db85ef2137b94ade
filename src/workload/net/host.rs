//! What one end's machine did over a test besides its streams: each CPU's share in
//! processes and in interrupts and softirqs, the CPU quota holding the end and how long
//! it was throttled, and the buffer limits its TCP allows. Each end measures its own and
//! sends it with its report.

use std::time::Instant;

use serde::{Deserialize, Serialize};

use crate::platform::cgroup::{self, CpuQuota};
use crate::platform::procfs::{self, CpuTicks};

/// One end's machine over a test.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HostAccount {
    /// Each CPU's time over the test.
    pub cores: Vec<CoreTime>,
    /// The CPU quota holding the end, where one does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quota: Option<QuotaTime>,
    /// What its TCP lets a socket buffer.
    pub buffers: BufferLimits,
}

/// One CPU's time over a test, as shares of the wall time.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CoreTime {
    /// The CPU's number.
    pub cpu: u32,
    /// Its share in processes (user and system).
    pub process: f64,
    /// Its share in interrupts and softirqs, where received packets are handled.
    pub softirq: f64,
    /// Its share the hypervisor gave to another guest while this vCPU wanted to run
    /// (steal); 0 where an older peer did not say.
    #[serde(default)]
    pub steal: f64,
}

/// A CPU quota over a test.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct QuotaTime {
    /// Cores' worth of CPU time the end's group may use.
    pub cores: f64,
    /// The share of the test's periods whose quota ran out.
    pub throttled_periods_share: f64,
    /// Time the group's threads were held back, microseconds.
    pub throttled_us: u64,
}

/// The most a TCP socket may buffer at one end: its sysctls, where they could be read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct BufferLimits {
    /// `net.ipv4.tcp_rmem`'s maximum: what receive autotuning may grow to.
    pub tcp_rmem_max: Option<u64>,
    /// `net.ipv4.tcp_wmem`'s maximum: what send autotuning may grow to.
    pub tcp_wmem_max: Option<u64>,
    /// `net.core.rmem_max`: the most SO_RCVBUF may ask for (`-w`).
    pub rmem_max: Option<u64>,
    /// `net.core.wmem_max`: the most SO_SNDBUF may ask for.
    pub wmem_max: Option<u64>,
    /// `net.ipv4.tcp_window_scaling`: whether windows may pass 64 KiB.
    pub window_scaling: Option<bool>,
}

impl BufferLimits {
    /// This network namespace's limits now.
    pub fn here() -> BufferLimits {
        let read = |path: &str, field: usize| -> Option<u64> {
            std::fs::read_to_string(path)
                .ok()?
                .split_whitespace()
                .nth(field)?
                .parse()
                .ok()
        };
        BufferLimits {
            tcp_rmem_max: read("/proc/sys/net/ipv4/tcp_rmem", 2),
            tcp_wmem_max: read("/proc/sys/net/ipv4/tcp_wmem", 2),
            rmem_max: read("/proc/sys/net/core/rmem_max", 0),
            wmem_max: read("/proc/sys/net/core/wmem_max", 0),
            window_scaling: read("/proc/sys/net/ipv4/tcp_window_scaling", 0).map(|v| v != 0),
        }
    }
}

/// An end's machine watched from a test's start.
pub struct HostWatch {
    start: Instant,
    ticks: CpuTicks,
    quota: Option<CpuQuota>,
}

impl HostWatch {
    /// Starts watching now.
    pub fn start() -> HostWatch {
        HostWatch {
            start: Instant::now(),
            ticks: procfs::cpu_ticks(),
            quota: cgroup::cpu_quota(),
        }
    }

    /// What the machine did since the start.
    pub fn finish(self) -> HostAccount {
        let ticks = procfs::cpu_ticks();
        let wall_ticks = self.start.elapsed().as_secs_f64() * procfs::ticks_per_second();
        let mut cores: Vec<CoreTime> = ticks
            .per_cpu_split
            .iter()
            .map(|(&cpu, &now)| {
                let then = self.ticks.per_cpu_split.get(&cpu).copied().unwrap_or(now);
                let share = |now: u64, then: u64| {
                    (now.saturating_sub(then) as f64 / wall_ticks.max(1.0)).min(1.0)
                };
                CoreTime {
                    cpu,
                    process: share(now.process, then.process),
                    softirq: share(now.interrupts, then.interrupts),
                    steal: share(now.steal, then.steal),
                }
            })
            .collect();
        cores.sort_by_key(|c| c.cpu);
        let quota = self.quota.zip(cgroup::cpu_quota()).map(|(then, now)| {
            let periods = now.periods.saturating_sub(then.periods);
            QuotaTime {
                cores: now.cores,
                throttled_periods_share: if periods == 0 {
                    0.0
                } else {
                    now.throttled_periods.saturating_sub(then.throttled_periods) as f64
                        / periods as f64
                },
                throttled_us: now.throttled_us.saturating_sub(then.throttled_us),
            }
        });
        HostAccount {
            cores,
            quota,
            buffers: BufferLimits::here(),
        }
    }
}
