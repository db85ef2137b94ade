//! Per-core active residency from /proc/stat: the share of an interval each core was not
//! idle. This is what "% CPU" means; it says nothing of how fast the core ran. The
//! kernel counts in USER_HZ ticks (10 ms on most kernels), so an interval of 100 ms
//! resolves a fraction to about 0.1.

use std::fs::File;
use std::path::Path;

use super::sources::read_at_start;

/// Where the kernel keeps the per-CPU time counters.
pub const PROC_STAT: &str = "/proc/stat";

/// The time counters of one CPU line of /proc/stat, in USER_HZ ticks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CpuTimes {
    /// The CPU's number (`cpu3` is 3).
    pub cpu: u32,
    /// Ticks spent doing anything: user, nice, system, irq, softirq and steal.
    pub active: u64,
    /// Ticks spent idle, iowait included.
    pub idle: u64,
}

/// Parses the per-CPU lines of /proc/stat (`cpuN user nice system idle iowait irq
/// softirq steal guest guest_nice`, see proc(5)); the all-CPU `cpu` line is skipped.
pub fn parse_stat(text: &str) -> Vec<CpuTimes> {
    text.lines()
        .filter_map(|line| {
            let mut fields = line.split_ascii_whitespace();
            let cpu = fields.next()?.strip_prefix("cpu")?.parse().ok()?;
            let ticks: Vec<u64> = fields.map_while(|f| f.parse().ok()).collect();
            let at = |i: usize| ticks.get(i).copied().unwrap_or(0);
            // Older kernels stop after idle; with fewer than four fields it is not a CPU line.
            if ticks.len() < 4 {
                return None;
            }
            let (user, nice, system, idle, iowait) = (at(0), at(1), at(2), at(3), at(4));
            let (irq, softirq, steal) = (at(5), at(6), at(7));
            // guest and guest_nice (fields 9 and 10) are already inside user and nice.
            // Steal counts as active: the vCPU had work and wanted to run, but the host
            // ran something else. From the guest's side the core was not idle, and a busy
            // loop keeps its fraction at 1 however crowded the host is.
            // iowait counts as idle: the core had nothing to run while it waited.
            Some(CpuTimes {
                cpu,
                active: user + nice + system + irq + softirq + steal,
                idle: idle + iowait,
            })
        })
        .collect()
}

/// The share of the time between `before` and `after` the CPU was active; `None` when
/// no tick was counted between them (an interval shorter than a tick, or an offline CPU).
pub fn active_fraction(before: &CpuTimes, after: &CpuTimes) -> Option<f64> {
    // Each counter on its own: NO_HZ idle accounting has been seen to step back a tick.
    let active = after.active.saturating_sub(before.active);
    let idle = after.idle.saturating_sub(before.idle);
    let total = active + idle;
    (total > 0).then(|| active as f64 / total as f64)
}

/// /proc/stat held open, with the counters of the last read.
pub struct Residency {
    file: File,
    buffer: Vec<u8>,
    last: Vec<CpuTimes>,
}

impl Residency {
    /// Opens /proc/stat and takes the first reading.
    pub fn open() -> std::io::Result<Residency> {
        let mut residency = Residency {
            file: File::open(Path::new(PROC_STAT))?,
            buffer: Vec::new(),
            last: Vec::new(),
        };
        residency.last = residency.read()?;
        if residency.last.is_empty() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                "no per-cpu lines",
            ));
        }
        Ok(residency)
    }

    /// The CPUs /proc/stat listed at the first reading: the online ones.
    pub fn cpus(&self) -> Vec<u32> {
        self.last.iter().map(|t| t.cpu).collect()
    }

    fn read(&mut self) -> std::io::Result<Vec<CpuTimes>> {
        read_at_start(&self.file, &mut self.buffer)?;
        Ok(parse_stat(&String::from_utf8_lossy(&self.buffer)))
    }

    /// Reads the counters again and returns each of `cpus`' active fraction since the
    /// last read; `None` for a CPU that went offline or counted no tick.
    pub fn sample(&mut self, cpus: &[u32]) -> std::io::Result<Vec<Option<f64>>> {
        let now = self.read()?;
        let find = |all: &[CpuTimes], cpu: u32| all.iter().find(|t| t.cpu == cpu).copied();
        let fractions = cpus
            .iter()
            .map(|&cpu| {
                let before = find(&self.last, cpu)?;
                active_fraction(&before, &find(&now, cpu)?)
            })
            .collect();
        self.last = now;
        Ok(fractions)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const STAT: &str = "cpu  591259 0 175987 1688772 406980 0 35898 440 0 0\n\
                        cpu0 276034 0 76353 886469 194163 0 16921 194 0 0\n\
                        cpu1 315224 5 99633 802302 212816 3 18976 245 7 0\n\
                        intr 1 2 3\n\
                        cpufreq 1\n";

    #[test]
    fn per_cpu_lines_are_parsed_and_the_total_line_skipped() {
        let times = parse_stat(STAT);
        assert_eq!(times.len(), 2);
        assert_eq!(
            times[1],
            CpuTimes {
                cpu: 1,
                active: 315224 + 5 + 99633 + 3 + 18976 + 245,
                idle: 802302 + 212816,
            }
        );
    }

    #[test]
    fn short_lines_of_old_kernels_still_count() {
        let times = parse_stat("cpu7 10 0 5 85\n");
        assert_eq!(times[0].cpu, 7);
        assert_eq!((times[0].active, times[0].idle), (15, 85));
        assert!(parse_stat("cpu7 10 0\n").is_empty());
    }

    #[test]
    fn fraction_of_deltas_with_steal_as_active() {
        let before = parse_stat("cpu0 100 0 0 100 0 0 0 0 0 0\n")[0];
        let after = parse_stat("cpu0 160 0 10 120 0 0 0 10 0 0\n")[0];
        assert_eq!(active_fraction(&before, &after), Some(0.8));
        assert_eq!(active_fraction(&before, &before), None);
    }

    #[test]
    fn a_counter_stepping_back_does_not_underflow() {
        let before = parse_stat("cpu0 100 0 0 100 5 0 0 0 0 0\n")[0];
        let after = parse_stat("cpu0 110 0 0 100 4 0 0 0 0 0\n")[0];
        assert_eq!(active_fraction(&before, &after), Some(1.0));
    }
}
