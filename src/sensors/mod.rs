//! What the monitor reads: what the cores really did while something ran. "% CPU" is active
//! residency only; beside it the monitor reads each core's frequency, the package's
//! power and where a process's threads ran. Each source is probed once; what the
//! machine does not expose is unavailable with its reason, never a zero.

pub mod cpufreq;
pub mod frequency;
pub mod hwmon;
pub mod msr;
pub mod placement;
pub mod power;
pub mod rapl;
pub mod residency;
pub mod sources;

use frequency::Frequency;
use placement::TaskStat;
use power::{NO_CORE_POWER, Power, PowerReading};
use residency::Residency;
pub use sources::{Source, Sources};

/// One core's figures over one interval.
#[derive(Debug, Clone, PartialEq)]
pub struct CoreReading {
    /// The CPU's number.
    pub cpu: u32,
    /// The share of the interval it was active; `None` when no tick was counted.
    pub active_fraction: Option<f64>,
    /// Its frequency, in Hz; `None` when no source gives it.
    pub freq_hz: Option<f64>,
    /// Its power, in watts; `None` when no source gives it.
    pub power_w: Option<f64>,
}

/// Everything read at one sample.
#[derive(Debug, Clone, PartialEq)]
pub struct Reading {
    /// Each online core, in CPU order.
    pub cores: Vec<CoreReading>,
    /// Package or system power; `None` when no source gives it.
    pub power: Option<PowerReading>,
    /// The watched process's live threads; empty when none is watched or it is gone.
    pub threads: Vec<TaskStat>,
}

/// Every source, probed once and held open between samples.
pub struct Monitor {
    cpus: Vec<u32>,
    residency: Residency,
    frequency: Result<Frequency, String>,
    power: Result<Power, String>,
    watched: Option<u32>,
}

impl Monitor {
    /// Probes every source. Only /proc/stat is required: without it there is nothing to
    /// monitor; every other source may be unavailable.
    pub fn probe() -> std::io::Result<Monitor> {
        let residency = Residency::open()?;
        let cpus = residency.cpus();
        Ok(Monitor {
            frequency: Frequency::probe(&cpus),
            power: Power::probe(),
            cpus,
            residency,
            watched: None,
        })
    }

    /// Follows the threads of process `pid` from the next sample on.
    pub fn watch(&mut self, pid: u32) {
        self.watched = Some(pid);
    }

    /// The CPUs monitored: those online at the probe.
    pub fn cpus(&self) -> &[u32] {
        &self.cpus
    }

    /// Which source feeds each figure, or why none does.
    pub fn sources(&self) -> Sources {
        Sources {
            active_fraction: Source::fed_by(
                residency::PROC_STAT,
                format!(
                    "user+nice+system+irq+softirq+steal over all time, counted in ticks of {} s; steal counts as active",
                    tick_seconds()
                ),
            ),
            freq_hz: match &self.frequency {
                Ok(frequency) => frequency.source(),
                Err(reason) => Source::unavailable(reason.clone()),
            },
            power_w: Source::unavailable(NO_CORE_POWER),
            system_power_w: match &self.power {
                Ok(power) => power.source(),
                Err(reason) => Source::unavailable(reason.clone()),
            },
            placement: self.watched.map(|pid| {
                Source::fed_by(
                    format!("/proc/{pid}/task/*/stat"),
                    "the CPU each live thread last ran on at the sample (field 39), its policy (41) and nice (19)",
                )
            }),
        }
    }

    /// Starts every interval afresh: the next [`read`](Monitor::read) covers from now.
    pub fn restart(&mut self) -> std::io::Result<()> {
        self.read().map(drop)
    }

    /// Reads every source: each core's figures and the power since the last read, and
    /// where the watched threads are now.
    pub fn read(&mut self) -> std::io::Result<Reading> {
        let fractions = self.residency.sample(&self.cpus)?;
        let frequencies = match &mut self.frequency {
            Ok(frequency) => frequency.sample(),
            Err(_) => Vec::new(),
        };
        let cores = self
            .cpus
            .iter()
            .zip(fractions)
            .enumerate()
            .map(|(index, (&cpu, active_fraction))| CoreReading {
                cpu,
                active_fraction,
                freq_hz: frequencies.get(index).copied().flatten(),
                power_w: None,
            })
            .collect();
        Ok(Reading {
            cores,
            power: self.power.as_mut().ok().map(Power::sample),
            threads: self.watched.map(placement::threads).unwrap_or_default(),
        })
    }
}

/// The length of a /proc/stat tick (1 / USER_HZ), in seconds.
fn tick_seconds() -> f64 {
    // SAFETY: sysconf only reads a configuration value.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if hz > 0 { 1.0 / hz as f64 } else { 0.01 }
}
