//! Linux probes of the machine and of storage paths: what a run was measured on,
//! and the physical limit of each target's link; and the disk-image containers that
//! runs measure inside (`container`). Linux specifics stay in here.

pub mod block;
pub mod cgroup;
pub mod container;
pub mod cores;
pub mod diskstats;
pub mod extents;
pub mod fds;
pub mod ioprio;
pub mod limits;
pub mod machine;
pub mod nics;
pub mod procfs;
pub mod programs;
pub mod remote;
pub mod shaper;
pub mod slowdown;
pub mod sock_diag;
pub mod sockets;
pub mod tcp_info;
pub mod threads;
pub mod usage;

mod devices;
mod links;
mod mounts;

#[cfg(test)]
mod tests;

use std::path::{Path, PathBuf};

pub use block::{ChainStep, StepKind, StorageChain, probe_mounts, probe_path};
pub use machine::{Machine, probe_machine};

/// Whether two existing paths are on one filesystem.
pub fn same_filesystem(a: &Path, b: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    let device = |p: &Path| std::fs::metadata(p).map(|m| m.dev()).ok();
    device(a).is_some() && device(a) == device(b)
}

/// Whether `folder` lies inside `target` on the same filesystem: what a storage series
/// of `target` measured is the storage `folder` is on. Paths of a stored run that are
/// gone (its temporary folders) are compared as written, as they were when it ran.
pub fn measured_by(folder: &Path, target: &Path) -> bool {
    match (std::fs::canonicalize(folder), std::fs::canonicalize(target)) {
        (Ok(folder), Ok(target)) => {
            folder.starts_with(&target) && same_filesystem(&folder, &target)
        }
        _ => folder.starts_with(target),
    }
}

/// Where a filesystem on block device `name` (`loop3`) is mounted, its root first;
/// `None` where none is mounted here.
pub fn mount_point_of_device(name: &str) -> Option<PathBuf> {
    let dev = read_attr(&Path::new("/sys/class/block").join(name).join("dev"))?;
    let (major, minor) = dev.split_once(':')?;
    let (major, minor): (u32, u32) = (major.parse().ok()?, minor.parse().ok()?);
    let entries = mounts::read_mountinfo(&Roots::system()).ok()?;
    let mut on_device: Vec<&mounts::MountEntry> = entries
        .iter()
        .filter(|e| e.major == major && e.minor == minor)
        .collect();
    on_device.sort_by_key(|e| e.root != Path::new("/"));
    on_device.first().map(|e| e.mount_point.clone())
}

/// Errors from probing the platform.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A path could not be inspected.
    #[error("cannot inspect {path}")]
    Inspect {
        /// The path that could not be inspected.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// No mounted filesystem holds a path.
    #[error("cannot find the mount holding {path} in {mountinfo}")]
    NoMount {
        /// The path probed, canonicalized.
        path: PathBuf,
        /// The mount table that was searched.
        mountinfo: PathBuf,
    },
}

/// Where the kernel's interfaces live: `/` on a real system, a fake tree in tests.
#[derive(Debug, Clone)]
pub(crate) struct Roots {
    root: PathBuf,
}

impl Roots {
    /// The running system's `/sys`, `/proc` and `/etc`.
    pub(crate) fn system() -> Self {
        Self::at(Path::new("/"))
    }

    /// A tree whose `sys/`, `proc/` and `etc/` stand in for the system's.
    pub(crate) fn at(root: &Path) -> Self {
        Self {
            root: root.to_path_buf(),
        }
    }

    /// A path under sysfs (`sys("block")` is `/sys/block`).
    pub(crate) fn sys(&self, relative: &str) -> PathBuf {
        self.root.join("sys").join(relative)
    }

    /// A path under procfs.
    pub(crate) fn proc(&self, relative: &str) -> PathBuf {
        self.root.join("proc").join(relative)
    }

    /// Any other system file, relative to the root (`file("etc/os-release")`).
    pub(crate) fn file(&self, relative: &str) -> PathBuf {
        self.root.join(relative)
    }
}

/// Reads a one-value sysfs or procfs file, trimmed; `None` when absent or empty.
pub(crate) fn read_attr(path: &Path) -> Option<String> {
    let text = std::fs::read_to_string(path).ok()?;
    let value = text.trim();
    (!value.is_empty()).then(|| value.to_string())
}
