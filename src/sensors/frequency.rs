//! Per-core frequency: cpufreq where the kernel has it, else APERF/MPERF through the msr
//! device, else unavailable with the reasons both were refused. A VM usually has
//! neither, and its frequency is then unknown, never zero.

use super::cpufreq::Cpufreq;
use super::msr::Msr;
use super::sources::Source;

/// The source per-core frequencies come from.
pub enum Frequency {
    /// cpufreq's `scaling_cur_freq`.
    Cpufreq(Cpufreq),
    /// APERF/MPERF deltas scaled by the TSC rate.
    Msr(Msr),
}

impl Frequency {
    /// The first source that works for `cpus`, or why none does.
    pub fn probe(cpus: &[u32]) -> Result<Frequency, String> {
        let cpufreq = match Cpufreq::open(cpus) {
            Ok(cpufreq) => return Ok(Frequency::Cpufreq(cpufreq)),
            Err(reason) => reason,
        };
        let msr = match Msr::open(cpus) {
            Ok(msr) => return Ok(Frequency::Msr(msr)),
            Err(reason) => reason,
        };
        Err(format!("{cpufreq}; {msr}"))
    }

    /// What feeds the figures, for `sources`.
    pub fn source(&self) -> Source {
        match self {
            Frequency::Cpufreq(cpufreq) => Source::fed_by(
                "cpufreq scaling_cur_freq",
                format!(
                    "the kernel's current frequency of {} cores at each sample, not a mean over the interval",
                    cpufreq.cores()
                ),
            ),
            Frequency::Msr(msr) => Source::fed_by(
                "APERF/MPERF (/dev/cpu/N/msr)",
                format!(
                    "mean frequency while active over each interval, scaled by the TSC rate measured at {:.1} MHz; null for a core that stayed idle",
                    msr.tsc_hz() / 1e6
                ),
            ),
        }
    }

    /// Each core's frequency for the interval just ended, in Hz.
    pub fn sample(&mut self) -> Vec<Option<f64>> {
        match self {
            Frequency::Cpufreq(cpufreq) => cpufreq.sample(),
            Frequency::Msr(msr) => msr.sample(),
        }
    }
}
