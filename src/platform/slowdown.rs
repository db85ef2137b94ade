//! A cgroup that holds a command's process tree to a known slowdown: a CPU quota, or
//! one block device's bytes and requests per second (cgroup v1's cpu and blkio
//! controllers, or v2's cpu and io). It is made beside what this process may write,
//! nested under the group ratelab runs in where it can be, and removed, with anything
//! still in it ended, when dropped.

use std::collections::HashMap;
use std::ffi::CString;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::cgroup::{Own, own_group};
use super::diskstats::DeviceCounts;

/// What a slowdown holds a tree to.
#[derive(Debug, Clone, PartialEq)]
pub enum Limit {
    /// CPU time: `cores` CPUs' worth per period of `period_us` microseconds.
    Cpu {
        /// CPUs' worth of time per period.
        cores: f64,
        /// The period, microseconds.
        period_us: u64,
    },
    /// One block device, in one direction.
    Device {
        /// Its `major:minor`.
        major_minor: String,
        /// Reads (else writes).
        reads: bool,
        /// Bytes per second; none: unlimited.
        bytes_per_sec: Option<u64>,
        /// Requests per second; none: unlimited.
        requests_per_sec: Option<u64>,
    },
}

impl Limit {
    /// The controller that sets it, as v1 and v2 name it.
    fn controller(&self, v1: bool) -> &'static str {
        match (self, v1) {
            (Limit::Cpu { .. }, _) => "cpu",
            (Limit::Device { .. }, true) => "blkio",
            (Limit::Device { .. }, false) => "io",
        }
    }
}

/// Why a slowdown cannot be made.
#[derive(Debug, thiserror::Error)]
pub enum SlowdownError {
    /// The controller is mounted nowhere this process can see.
    #[error("the {0} controller of cgroups is not mounted here")]
    NoController(&'static str),
    /// No group of the controller is this user's to make a group in.
    #[error(
        "no cgroup of the {controller} controller is this user's ({group} is not): it needs root, or a delegated cgroup (v2: a folder this user owns with {controller} in its cgroup.subtree_control; v1: a folder of the controller this user owns)"
    )]
    NotDelegated {
        /// The controller.
        controller: &'static str,
        /// The group ratelab runs in.
        group: String,
    },
    /// A cgroup file could not be written.
    #[error("cannot {what} {path}: {source}")]
    Io {
        /// What was being done.
        what: &'static str,
        /// The file or folder.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
}

/// A cgroup made to hold one command's tree to a limit.
#[derive(Debug)]
pub struct Slowdown {
    path: PathBuf,
    procs: CString,
}

impl Slowdown {
    /// Makes a group that holds its members to `limit`.
    pub fn make(limit: &Limit) -> Result<Slowdown, SlowdownError> {
        let (own, v1) = own_group(limit.controller(true))
            .ok_or(SlowdownError::NoController(limit.controller(false)))?;
        let controller = limit.controller(v1);
        let parent =
            place_for(&own, controller, v1).ok_or_else(|| SlowdownError::NotDelegated {
                controller,
                group: own.group.display().to_string(),
            })?;
        static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let path = parent.join(format!(
            "ratelab-what-if-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        ));
        std::fs::create_dir(&path).map_err(|source| SlowdownError::Io {
            what: "make the cgroup",
            path: path.clone(),
            source,
        })?;
        let procs = CString::new(path.join("cgroup.procs").as_os_str().as_encoded_bytes())
            .expect("cgroup paths hold no NUL");
        let group = Slowdown { path, procs };
        for (file, text) in settings(limit, v1) {
            let file = group.path.join(file);
            std::fs::write(&file, &text).map_err(|source| SlowdownError::Io {
                what: "set",
                path: file,
                source,
            })?;
        }
        Ok(group)
    }

    /// The group's folder.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// A hook that moves the calling process into the group, for a child between
    /// fork and exec (`CommandExt::pre_exec`).
    pub fn entering(&self) -> impl FnMut() -> std::io::Result<()> + Send + Sync + 'static {
        let procs = self.procs.clone();
        move || enter(&procs)
    }

    /// The processes in the group now.
    fn members(&self) -> Vec<i32> {
        std::fs::read_to_string(self.path.join("cgroup.procs"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.trim().parse().ok())
            .collect()
    }
}

impl Drop for Slowdown {
    fn drop(&mut self) {
        // Whatever the command left running in it is ended: a group cannot be removed
        // while it holds a process.
        let until = Instant::now() + Duration::from_secs(2);
        loop {
            let members = self.members();
            if members.is_empty() || Instant::now() >= until {
                break;
            }
            for pid in members {
                // SAFETY: kill sends a signal to a process of the group this run made.
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let until = Instant::now() + Duration::from_secs(2);
        while std::fs::remove_dir(&self.path).is_err() && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

/// What the processes of this process's own I/O group (v1's blkio, or v2's) have read
/// and written on each device (by `major:minor`), as the block layer's throttle counts
/// it (requests before merging); `None` where the group is its hierarchy's root, whose
/// counts are the whole machine's.
pub fn own_io() -> Option<HashMap<String, DeviceCounts>> {
    let (own, _) = own_group("blkio")?;
    if own.group == own.mount {
        return None;
    }
    let mut out: HashMap<String, DeviceCounts> = HashMap::new();
    if own.group.join("blkio.throttle.io_serviced").exists() {
        let read = |name: &str| std::fs::read_to_string(own.group.join(name)).unwrap_or_default();
        for (file, bytes) in [
            ("blkio.throttle.io_serviced", false),
            ("blkio.throttle.io_service_bytes", true),
        ] {
            for line in read(file).lines() {
                let mut fields = line.split_whitespace();
                let (Some(device), Some(way), Some(value)) =
                    (fields.next(), fields.next(), fields.next())
                else {
                    continue;
                };
                let Ok(value) = value.parse::<u64>() else {
                    continue;
                };
                let counts = out.entry(device.to_string()).or_default();
                match (way, bytes) {
                    ("Read", false) => counts.reads = value,
                    ("Write", false) => counts.writes = value,
                    ("Read", true) => counts.read_bytes = value,
                    ("Write", true) => counts.written_bytes = value,
                    _ => {}
                }
            }
        }
        return Some(out);
    }
    let text = std::fs::read_to_string(own.group.join("io.stat")).ok()?;
    for line in text.lines() {
        let mut fields = line.split_whitespace();
        let Some(device) = fields.next() else {
            continue;
        };
        let counts = out.entry(device.to_string()).or_default();
        for field in fields {
            let Some((key, value)) = field.split_once('=') else {
                continue;
            };
            let value = value.parse().unwrap_or(0);
            match key {
                "rbytes" => counts.read_bytes = value,
                "wbytes" => counts.written_bytes = value,
                "rios" => counts.reads = value,
                "wios" => counts.writes = value,
                _ => {}
            }
        }
    }
    Some(out)
}

/// Moves the calling process into the group whose `cgroup.procs` is `procs`, with only
/// async-signal-safe calls: it runs between fork and exec.
fn enter(procs: &std::ffi::CStr) -> std::io::Result<()> {
    // SAFETY: open, write and close on a NUL-terminated path; "0" names the caller.
    unsafe {
        let fd = libc::open(procs.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let written = libc::write(fd, b"0".as_ptr().cast(), 1);
        let error = std::io::Error::last_os_error();
        libc::close(fd);
        if written != 1 {
            return Err(error);
        }
    }
    Ok(())
}

/// The files that set `limit` and what is written to them.
fn settings(limit: &Limit, v1: bool) -> Vec<(String, String)> {
    match limit {
        Limit::Cpu { cores, period_us } => {
            // The kernel's least quota is 1 ms.
            let quota = ((cores * *period_us as f64).round() as u64).max(1000);
            if v1 {
                vec![
                    ("cpu.cfs_period_us".into(), period_us.to_string()),
                    ("cpu.cfs_quota_us".into(), quota.to_string()),
                ]
            } else {
                vec![("cpu.max".into(), format!("{quota} {period_us}"))]
            }
        }
        Limit::Device {
            major_minor,
            reads,
            bytes_per_sec,
            requests_per_sec,
        } => {
            let way = if *reads { "read" } else { "write" };
            let limits = [("bps", *bytes_per_sec), ("iops", *requests_per_sec)];
            let set = limits
                .iter()
                .filter_map(|(unit, value)| Some((*unit, (*value)?.max(1))));
            if v1 {
                set.map(|(unit, value)| {
                    (
                        format!("blkio.throttle.{way}_{unit}_device"),
                        format!("{major_minor} {value}"),
                    )
                })
                .collect()
            } else {
                let x = &way[..1];
                let keys: Vec<String> = set
                    .map(|(unit, value)| format!("{x}{unit}={value}"))
                    .collect();
                vec![("io.max".into(), format!("{major_minor} {}", keys.join(" ")))]
            }
        }
    }
}

/// The group to make the slowdown's group in: this process's own, else the nearest
/// above it, that this user may write and (v2) that hands `controller` to its
/// children.
fn place_for(own: &Own, controller: &str, v1: bool) -> Option<PathBuf> {
    let mut at = Some(own.group.as_path());
    while let Some(folder) = at {
        let writable = rustix::fs::access(folder, rustix::fs::Access::WRITE_OK).is_ok();
        let hands_down = v1
            || std::fs::read_to_string(folder.join("cgroup.subtree_control"))
                .is_ok_and(|t| t.split_whitespace().any(|c| c == controller));
        if writable && hands_down {
            return Some(folder.to_path_buf());
        }
        if folder == own.mount {
            return None;
        }
        at = folder.parent();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_limit_is_written_in_each_version_s_words() {
        let cpu = Limit::Cpu {
            cores: 0.5,
            period_us: 10_000,
        };
        assert_eq!(
            settings(&cpu, true),
            vec![
                ("cpu.cfs_period_us".to_string(), "10000".to_string()),
                ("cpu.cfs_quota_us".to_string(), "5000".to_string())
            ]
        );
        assert_eq!(
            settings(&cpu, false),
            vec![("cpu.max".to_string(), "5000 10000".into())]
        );
        let disk = Limit::Device {
            major_minor: "7:3".into(),
            reads: false,
            bytes_per_sec: Some(52_428_800),
            requests_per_sec: Some(400),
        };
        assert_eq!(
            settings(&disk, false),
            vec![("io.max".to_string(), "7:3 wbps=52428800 wiops=400".into())]
        );
        assert_eq!(
            settings(&disk, true)[1],
            (
                "blkio.throttle.write_iops_device".to_string(),
                "7:3 400".into()
            )
        );
        let bytes_alone = Limit::Device {
            major_minor: "7:3".into(),
            reads: true,
            bytes_per_sec: Some(1000),
            requests_per_sec: None,
        };
        assert_eq!(
            settings(&bytes_alone, true),
            vec![(
                "blkio.throttle.read_bps_device".to_string(),
                "7:3 1000".into()
            )]
        );
        assert_eq!(
            settings(&bytes_alone, false),
            vec![("io.max".to_string(), "7:3 rbps=1000".into())]
        );
    }
}
