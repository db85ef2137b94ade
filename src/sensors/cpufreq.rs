//! Per-core frequency from cpufreq's `scaling_cur_freq`: the kernel's view of each core's
//! current frequency, in kHz. It is a reading at the moment of the sample (on x86 the
//! kernel derives it from APERF/MPERF over a recent tick), not an average over the
//! interval.

use std::fs::File;
use std::path::PathBuf;

use super::sources::{cannot, read_number};

/// The file cpufreq keeps a core's current frequency in.
pub fn cur_freq_path(cpu: u32) -> PathBuf {
    PathBuf::from(format!(
        "/sys/devices/system/cpu/cpu{cpu}/cpufreq/scaling_cur_freq"
    ))
}

/// Every core's `scaling_cur_freq`, held open.
pub struct Cpufreq {
    files: Vec<Option<File>>,
}

impl Cpufreq {
    /// Opens the files of `cpus`; refused, with the reason, when none can be read.
    pub fn open(cpus: &[u32]) -> Result<Cpufreq, String> {
        let mut first_problem = None;
        let files: Vec<Option<File>> = cpus
            .iter()
            .map(|&cpu| {
                let path = cur_freq_path(cpu);
                let opened = File::open(&path).and_then(|f| read_number(&f).map(|_| f));
                match opened {
                    Ok(file) => Some(file),
                    Err(e) => {
                        first_problem.get_or_insert_with(|| cannot("read", &path, &e));
                        None
                    }
                }
            })
            .collect();
        if files.iter().all(Option::is_none) {
            let problem = first_problem.unwrap_or_else(|| "no CPU to read".into());
            return Err(format!("no cpufreq ({problem})"));
        }
        Ok(Cpufreq { files })
    }

    /// Each core's frequency now, in Hz; `None` for a core without a readable file.
    pub fn sample(&mut self) -> Vec<Option<f64>> {
        self.files
            .iter()
            .map(|file| {
                let khz = read_number(file.as_ref()?).ok()?;
                Some(khz as f64 * 1e3)
            })
            .collect()
    }

    /// How many cores have a readable file, for the sources' note.
    pub fn cores(&self) -> usize {
        self.files.iter().flatten().count()
    }
}
