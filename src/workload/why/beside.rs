//! Whether a what-if run had the machine to itself: what other processes and the
//! hypervisor took while it ran, from /proc/stat less the CPU of the run's own
//! processes and of ratelab (getrusage), by the thresholds of the `disturbed` verdict.

use std::time::Instant;

use crate::analysis::interference::{CPU_SECONDS, OTHER_CORES, STEAL_SHARE};
use crate::platform::procfs::{CpuTicks, cpu_ticks, ticks_per_second};
use crate::platform::usage::{Who, cpu_seconds};

/// The machine's counts at a run's start.
pub struct Beside {
    at: Instant,
    ticks: CpuTicks,
    own_s: f64,
    children_s: f64,
}

/// User and system seconds of `who`, together.
fn seconds(who: Who) -> f64 {
    let (user, system) = cpu_seconds(who);
    user + system
}

/// Every CPU's ticks, busy or not.
fn all(ticks: &CpuTicks) -> u64 {
    ticks.per_cpu.values().map(|(_, all)| all).sum()
}

impl Beside {
    /// Counts from now.
    pub fn start() -> Beside {
        Beside {
            at: Instant::now(),
            ticks: cpu_ticks(),
            own_s: seconds(Who::Own),
            children_s: seconds(Who::Children),
        }
    }

    /// CPU seconds of the children waited for since the start: the run's processes.
    pub fn children_cpu_s(&self) -> f64 {
        seconds(Who::Children) - self.children_s
    }

    /// What took the machine from the run since the start, in words; none where
    /// nothing did, or the run was too short to tell (under [`CPU_SECONDS`]: the
    /// kernel's ticks are 10 ms apart). Where `quota` held the run, only the steal is
    /// judged: the kernel's ticks of a task in 10 ms quota periods run ahead of its
    /// exact CPU time (zstd and make: 0.27-0.47 CPUs more), so other processes' CPU
    /// cannot be told from them.
    pub fn disturbed(&self, quota: bool) -> Option<String> {
        let wall = self.at.elapsed().as_secs_f64();
        if wall < CPU_SECONDS {
            return None;
        }
        let now = cpu_ticks();
        let hz = ticks_per_second();
        let processes = now.process.saturating_sub(self.ticks.process) as f64 / hz;
        let ours = (seconds(Who::Own) - self.own_s) + self.children_cpu_s();
        let others = (processes - ours).max(0.0) / wall;
        let stolen = now.steal.saturating_sub(self.ticks.steal) as f64
            / all(&now).saturating_sub(all(&self.ticks)).max(1) as f64;
        let mut said = Vec::new();
        if others >= OTHER_CORES && !quota {
            said.push(format!("other processes used {others:.2} CPUs"));
        }
        if stolen >= STEAL_SHARE {
            said.push(format!(
                "the hypervisor took {:.0}% of the CPUs' time",
                stolen * 100.0
            ));
        }
        (!said.is_empty()).then(|| said.join(" and "))
    }
}
