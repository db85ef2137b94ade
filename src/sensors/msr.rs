//! Per-core frequency from the APERF and MPERF registers (MSRs 0xE8 and 0xE7) read
//! through the msr device (`/dev/cpu/N/msr`, root only), where cpufreq is absent.
//!
//! While a core is in C0, MPERF counts at a fixed rate and APERF at the rate the core
//! really runs, so the core's mean frequency while active over an interval is
//! `ΔAPERF / ΔMPERF × the MPERF rate`. The MPERF rate is the TSC rate (Intel SDM vol. 3,
//! 14.2; AMD's P0 rate, which its invariant TSC also runs at). The base is that TSC rate,
//! measured once against the monotonic clock by reading the TSC register (0x10) twice,
//! not /proc/cpuinfo's "cpu MHz": without cpufreq the kernel fills that from APERF/MPERF
//! too, so it is a recent frequency, not the base.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use super::sources::cannot;

/// Cycles at the frequency the core ran at, counted in C0.
const APERF: u64 = 0xE8;
/// Cycles at the fixed (TSC) rate, counted in C0.
const MPERF: u64 = 0xE7;
/// The time stamp counter.
const TSC: u64 = 0x10;
/// How long the TSC rate is measured over: long enough for a pread's microsecond of
/// jitter to stay under 1e-4 of it.
const TSC_SPAN: Duration = Duration::from_millis(20);

/// The msr device of a CPU.
pub fn msr_path(cpu: u32) -> PathBuf {
    PathBuf::from(format!("/dev/cpu/{cpu}/msr"))
}

/// Reads one 64-bit MSR: the msr device takes the register number as the file offset.
fn read_msr(file: &File, register: u64) -> std::io::Result<u64> {
    let mut bytes = [0u8; 8];
    file.read_exact_at(&mut bytes, register)?;
    Ok(u64::from_ne_bytes(bytes))
}

/// The mean frequency while active over an interval, from its APERF and MPERF deltas
/// and the MPERF rate; `None` when MPERF did not move (the core stayed idle).
pub fn frequency_hz(aperf_delta: u64, mperf_delta: u64, mperf_hz: f64) -> Option<f64> {
    (mperf_delta > 0).then(|| aperf_delta as f64 / mperf_delta as f64 * mperf_hz)
}

/// One core's msr device and its last APERF and MPERF.
struct Core {
    file: File,
    last: Option<(u64, u64)>,
}

/// APERF/MPERF of every core, held open.
pub struct Msr {
    cores: Vec<Option<Core>>,
    tsc_hz: f64,
}

impl Msr {
    /// Opens the msr device of `cpus` and measures the TSC rate; refused, with the
    /// reason, when the device is missing, closed to this user, or lacks APERF/MPERF.
    pub fn open(cpus: &[u32]) -> Result<Msr, String> {
        let first = *cpus.first().ok_or("no CPU to read")?;
        let path = msr_path(first);
        let file = File::open(&path).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => format!(
                "no {} for APERF/MPERF (the msr module is not loaded: modprobe msr)",
                path.display()
            ),
            std::io::ErrorKind::PermissionDenied => format!(
                "{} for APERF/MPERF is open to root only (CAP_SYS_RAWIO)",
                path.display()
            ),
            _ => cannot("open", &path, &e),
        })?;
        read_msr(&file, APERF)
            .and_then(|_| read_msr(&file, MPERF))
            .map_err(|e| {
                format!(
                    "the CPU does not expose APERF/MPERF ({})",
                    cannot("read MSR 0xE8/0xE7 from", &path, &e)
                )
            })?;
        let tsc_hz =
            measure_tsc_hz(&file).map_err(|e| cannot("read the TSC (MSR 0x10) from", &path, &e))?;
        let mut msr = Msr {
            cores: cpus
                .iter()
                .map(|&cpu| {
                    File::open(msr_path(cpu))
                        .ok()
                        .map(|file| Core { file, last: None })
                })
                .collect(),
            tsc_hz,
        };
        msr.sample();
        Ok(msr)
    }

    /// The TSC rate the frequencies are scaled by, in Hz.
    pub fn tsc_hz(&self) -> f64 {
        self.tsc_hz
    }

    /// Each core's mean frequency while active since the last sample, in Hz; `None` for
    /// a core that stayed idle, could not be read, or has no earlier reading.
    pub fn sample(&mut self) -> Vec<Option<f64>> {
        let tsc_hz = self.tsc_hz;
        self.cores
            .iter_mut()
            .map(|core| {
                let core = core.as_mut()?;
                let now = (
                    read_msr(&core.file, APERF).ok()?,
                    read_msr(&core.file, MPERF).ok()?,
                );
                let (aperf, mperf) = core.last.replace(now)?;
                // 64-bit counters wrap after centuries, but a wrapping delta costs nothing.
                frequency_hz(now.0.wrapping_sub(aperf), now.1.wrapping_sub(mperf), tsc_hz)
            })
            .collect()
    }
}

/// The TSC rate, in Hz: two readings of the TSC register against the monotonic clock.
fn measure_tsc_hz(file: &File) -> std::io::Result<f64> {
    let (start, tsc_start) = (Instant::now(), read_msr(file, TSC)?);
    std::thread::sleep(TSC_SPAN);
    let (end, tsc_end) = (Instant::now(), read_msr(file, TSC)?);
    Ok(tsc_end.wrapping_sub(tsc_start) as f64 / (end - start).as_secs_f64())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frequency_is_the_aperf_share_of_the_tsc_rate() {
        let hz = frequency_hz(3_000_000, 2_000_000, 2.0e9).unwrap();
        assert!((hz - 3.0e9).abs() < 1.0);
        assert_eq!(frequency_hz(10, 0, 2.0e9), None);
    }
}
