//! Which source fed each figure of a monitor run, or why none could: what makes a
//! `null` in the samples an honest "not measured" rather than a zero.

use serde::{Deserialize, Serialize};

/// Where one figure came from, or the reason it is missing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Source {
    /// The source that fed the figure (`/proc/stat`, `cpufreq scaling_cur_freq`); null
    /// when none could.
    pub source: Option<String>,
    /// Why no source could feed the figure; absent when one did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unavailable: Option<String>,
    /// What to know about the figure as the source gives it (resolution, coverage).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

impl Source {
    /// A figure fed by `source`, with what to know about it.
    pub fn fed_by(source: impl Into<String>, note: impl Into<String>) -> Source {
        Source {
            source: Some(source.into()),
            unavailable: None,
            note: Some(note.into()),
        }
    }

    /// A figure no source could feed, and why.
    pub fn unavailable(reason: impl Into<String>) -> Source {
        Source {
            source: None,
            unavailable: Some(reason.into()),
            note: None,
        }
    }
}

/// The source of every figure a monitor sample holds (`sources` in docs/json.md).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Sources {
    /// Per-core active residency.
    pub active_fraction: Source,
    /// Per-core frequency.
    pub freq_hz: Source,
    /// Per-core power.
    pub power_w: Source,
    /// Package or system power and energy.
    pub system_power_w: Source,
    /// Where the watched process's threads ran; absent when none was watched.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement: Option<Source>,
}

impl Sources {
    /// Every figure with its name, in the order the samples hold them.
    pub fn named(&self) -> Vec<(&'static str, &Source)> {
        let mut all = vec![
            ("active_fraction", &self.active_fraction),
            ("freq_hz", &self.freq_hz),
            ("power_w", &self.power_w),
            ("system_power_w", &self.system_power_w),
        ];
        if let Some(placement) = &self.placement {
            all.push(("placement", placement));
        }
        all
    }
}

/// Why `path` could not be used, in lowercase words: `cannot read PATH: permission denied`.
pub fn cannot(op: &str, path: &std::path::Path, err: &std::io::Error) -> String {
    let what = match err.kind() {
        std::io::ErrorKind::NotFound => "missing".to_string(),
        std::io::ErrorKind::PermissionDenied => "permission denied".to_string(),
        _ => {
            let text = err.to_string().to_lowercase();
            // "input/output error (os error 5)" says no more without its number.
            text.split(" (os error").next().unwrap_or(&text).to_string()
        }
    };
    format!("cannot {op} {}: {what}", path.display())
}

/// Reads a whole small file (procfs, sysfs) from its start with pread, so one open file
/// serves every sample: seq_file regenerates the text at offset 0. The buffer keeps its
/// size between calls, so a file is read whole in one call after the first.
pub fn read_at_start(file: &std::fs::File, into: &mut Vec<u8>) -> std::io::Result<()> {
    use std::os::unix::fs::FileExt;
    into.resize(into.capacity().max(4096), 0);
    let mut filled = 0;
    loop {
        if filled == into.len() {
            into.resize(into.len() * 2, 0);
        }
        let n = file.read_at(&mut into[filled..], filled as u64)?;
        if n == 0 {
            into.truncate(filled);
            return Ok(());
        }
        filled += n;
    }
}

/// The number in a small sysfs file (`2300000\n`), read from its start.
pub fn read_number(file: &std::fs::File) -> std::io::Result<u64> {
    use std::os::unix::fs::FileExt;
    let mut buffer = [0u8; 64];
    let n = file.read_at(&mut buffer, 0)?;
    std::str::from_utf8(&buffer[..n])
        .ok()
        .and_then(|text| text.trim().parse().ok())
        .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::InvalidData, "not a number"))
}
