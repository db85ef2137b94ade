//! The chain from a path's filesystem down to its block device and link.
//!
//! A chain starts at the mount that holds the path; filesystems without a block
//! device (tmpfs, NFS, overlay) end there, the others go on through sysfs
//! (`devices.rs` for stacking, `links.rs` for the link at the bottom).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::mounts::{self, MountEntry};
use super::{Error, Roots, devices};

/// What one step of a storage chain is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StepKind {
    /// A mounted filesystem.
    Filesystem,
    /// A partition of a disk.
    Partition,
    /// A loop device, followed to its backing file.
    Loop,
    /// A device-mapper device (LVM, dm-crypt).
    DeviceMapper,
    /// A software RAID device.
    Md,
    /// An NVMe namespace on PCIe.
    Nvme,
    /// A SATA disk.
    Sata,
    /// A SCSI or SAS disk.
    Scsi,
    /// A disk behind USB.
    Usb,
    /// A virtio disk of a virtual machine.
    Virtio,
    /// Memory (tmpfs, ramfs, zram).
    Memory,
    /// Anything else.
    Other,
}

/// One step in a storage chain.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChainStep {
    /// What the step is.
    pub kind: StepKind,
    /// Its name (`/dev/nvme0n1`, `ext4`, `loop0`).
    pub name: String,
    /// Details in words (`PCIe 8.0 GT/s x4`).
    pub detail: String,
    /// The step's maximum data rate, when known.
    pub max_bytes_per_sec: Option<f64>,
}

/// A path's storage from its filesystem down to its link.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StorageChain {
    /// The path probed.
    pub path: PathBuf,
    /// The mount point of its filesystem.
    pub mount_point: PathBuf,
    /// Filesystem type.
    pub fs_type: String,
    /// Mount source (`/dev/vda`, `tmpfs`).
    pub source: String,
    /// Steps from the filesystem down to the link.
    pub steps: Vec<ChainStep>,
    /// The lowest known limit along the chain; `None` when unknown.
    pub max_bytes_per_sec: Option<f64>,
    /// Which step sets that limit, in words.
    pub limit_via: Option<String>,
}

impl ChainStep {
    /// A step whose limit is unknown.
    pub(crate) fn without_limit(
        kind: StepKind,
        name: impl Into<String>,
        detail: impl Into<String>,
    ) -> Self {
        Self {
            kind,
            name: name.into(),
            detail: detail.into(),
            max_bytes_per_sec: None,
        }
    }
}

impl StorageChain {
    /// Where the chain ends at a virtual machine's disk, what that means for figures
    /// measured on `target`, in words; none for any other chain.
    pub fn virtual_disk_words(&self, target: &str) -> Option<String> {
        let step = self.steps.iter().find(|s| s.kind == StepKind::Virtio)?;
        Some(format!(
            "{target} is on a virtual disk ({}): O_DIRECT passes only this machine's page \
             cache, and the host's cache and disks below it are out of sight, so these figures \
             may be the host's memory, not a device's, and move from run to run as its \
             cache fills and other guests work",
            step.name
        ))
    }

    /// Whether `other` is a chain down the same device: the same steps, by kind, name
    /// and detail, from the first step below the filesystem (a loop device's backing
    /// file is in its detail, so a loop number used again for another file differs).
    pub fn same_device(&self, other: &StorageChain) -> bool {
        let below = |chain: &StorageChain| -> Vec<(StepKind, String, String)> {
            chain
                .steps
                .iter()
                .skip_while(|s| s.kind == StepKind::Filesystem)
                .map(|s| (s.kind, s.name.clone(), s.detail.clone()))
                .collect()
        };
        let (mine, theirs) = (below(self), below(other));
        !mine.is_empty() && mine == theirs
    }
}

/// Filesystems served over a network or shared from a hypervisor's host.
const NETWORK_FILESYSTEMS: &[&str] = &[
    "nfs",
    "nfs4",
    "cifs",
    "smb3",
    "smbfs",
    "ceph",
    "glusterfs",
    "lustre",
    "afs",
    "9p",
    "virtiofs",
];

/// Probes the storage chain under `path`.
pub fn probe_path(path: &Path) -> Result<StorageChain, super::Error> {
    let roots = Roots::system();
    Prober::new(&roots)?.probe(path, &[])
}

/// Probes every mounted filesystem that stores data (not proc, sysfs, cgroup...).
pub fn probe_mounts() -> Vec<StorageChain> {
    probe_mounts_in(&Roots::system())
}

/// [`probe_mounts`] against the kernel interfaces under `roots`.
pub(crate) fn probe_mounts_in(roots: &Roots) -> Vec<StorageChain> {
    let Ok(prober) = Prober::new(roots) else {
        return Vec::new();
    };
    mounts::data_mounts(&prober.mounts)
        .iter()
        .filter_map(|mount| prober.probe(&mount.mount_point, &[]).ok())
        .collect()
}

/// A block device number, as in `st_dev` and `/sys/dev/block/MAJ:MIN`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct DeviceNumber {
    /// Major number (the driver).
    pub(crate) major: u32,
    /// Minor number (the device of that driver).
    pub(crate) minor: u32,
}

impl std::fmt::Display for DeviceNumber {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.major, self.minor)
    }
}

/// The step with the lowest known limit, the first of equals.
pub(crate) fn limiting_step(steps: &[ChainStep]) -> Option<&ChainStep> {
    steps
        .iter()
        .filter_map(|step| step.max_bytes_per_sec.map(|rate| (rate, step)))
        .min_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, step)| step)
}

/// Probes paths against one reading of the mount table.
pub(crate) struct Prober<'a> {
    /// Where sysfs and procfs are.
    pub(crate) roots: &'a Roots,
    mounts: Vec<MountEntry>,
}

impl<'a> Prober<'a> {
    /// Reads the mount table under `roots`.
    pub(crate) fn new(roots: &'a Roots) -> Result<Self, Error> {
        Ok(Self {
            roots,
            mounts: mounts::read_mountinfo(roots)?,
        })
    }

    /// The chain under `path`; `trail` holds the devices already being walked
    /// above it (a loop device's, when `path` is its backing file).
    pub(crate) fn probe(&self, path: &Path, trail: &[DeviceNumber]) -> Result<StorageChain, Error> {
        let canonical = std::fs::canonicalize(path).map_err(|source| Error::Inspect {
            path: path.to_path_buf(),
            source,
        })?;
        let mount = mounts::mount_of(&self.mounts, &canonical).ok_or_else(|| Error::NoMount {
            path: canonical.clone(),
            mountinfo: mounts::mountinfo_path(self.roots),
        })?;
        let mut steps = vec![ChainStep::without_limit(
            StepKind::Filesystem,
            mount.fs_type.clone(),
            format!(
                "{} on {} at {}",
                mount.fs_type,
                mount.source,
                mount.mount_point.display()
            ),
        )];
        steps.extend(self.below_filesystem(mount, trail));
        let limit = limiting_step(&steps);
        Ok(StorageChain {
            path: path.to_path_buf(),
            mount_point: mount.mount_point.clone(),
            fs_type: mount.fs_type.clone(),
            source: mount.source.clone(),
            max_bytes_per_sec: limit.and_then(|step| step.max_bytes_per_sec),
            limit_via: limit.map(|step| format!("{}: {}", step.name, step.detail)),
            steps,
        })
    }

    fn below_filesystem(&self, mount: &MountEntry, trail: &[DeviceNumber]) -> Vec<ChainStep> {
        let number = DeviceNumber {
            major: mount.major,
            minor: mount.minor,
        };
        if number.major != 0 {
            return match devices::device_dir(self.roots, number) {
                Some(dir) => devices::walk(self, &dir, trail),
                None => vec![ChainStep::without_limit(
                    StepKind::Other,
                    format!("block device {number}"),
                    "no sysfs entry: limit unknown",
                )],
            };
        }
        // Major 0 is an anonymous device number: usually no block device holds
        // the files, but btrfs (and others) use one even though a disk does.
        if mount.fs_type == "tmpfs" || mount.fs_type == "ramfs" {
            return vec![ChainStep::without_limit(
                StepKind::Memory,
                "memory",
                format!("{} keeps files in RAM: limit unknown", mount.fs_type),
            )];
        }
        if let Some(dir) = devices::source_dir(self.roots, &mount.source) {
            return devices::walk(self, &dir, trail);
        }
        vec![virtual_filesystem_step(mount)]
    }
}

/// The step below a filesystem that has no block device of its own.
fn virtual_filesystem_step(mount: &MountEntry) -> ChainStep {
    let fs_type = mount.fs_type.as_str();
    let detail = if NETWORK_FILESYSTEMS.contains(&fs_type) {
        format!("{fs_type} is served over a network or by a VM host: limit unknown")
    } else if fs_type == "overlay" || fs_type == "aufs" {
        format!("{fs_type} joins other filesystems: limit unknown")
    } else if fs_type.starts_with("fuse") {
        format!("{fs_type} is served by a FUSE process: limit unknown")
    } else if fs_type == "zfs" {
        "ZFS dataset, pool devices not followed: limit unknown".to_string()
    } else {
        format!("no block device behind {fs_type}: limit unknown")
    };
    ChainStep::without_limit(StepKind::Other, mount.source.clone(), detail)
}
