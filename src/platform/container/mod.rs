//! Disk-image containers: an image file (raw, or qcow2 served by qemu-storage-daemon
//! through FUSE) on a loop device, with a checked filesystem mounted inside. This owns
//! making, attaching, inspecting and removing them, so the `image` workload can measure
//! inside one and be sure that nothing of it is left on the machine afterwards.

mod daemon;
mod environment;
mod leftovers;
mod make;
mod spec;
mod teardown;
mod tools;

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

pub use environment::check_environment;
pub use leftovers::leftovers;
pub use spec::{
    ContainerSpec, DEFAULT_CLUSTER_SIZE_BYTES, Filesystem, Format, MAX_CLUSTER_SIZE_BYTES,
    MIN_CLUSTER_SIZE_BYTES, MIN_EXTENDED_L2_CLUSTER_BYTES, Preallocation,
};

use crate::error::Error;
use crate::platform::block::DeviceNumber;
use crate::platform::{Roots, devices, mounts};
use daemon::Daemon;

/// A host file below a container's filesystem whose page cache could serve a read made
/// inside it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layer {
    /// `export` (qcow2's FUSE file, which the loop device reads) or `image`.
    pub name: &'static str,
    /// The file.
    pub path: PathBuf,
    /// The loop device inside is this file byte for byte: qcow2's export, or a raw
    /// image (a qcow2 image maps the device through its own tables).
    pub same_offsets: bool,
}

/// Where the files of container NAME in DIR go: known before it is made, so that a run
/// can name them in its plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Paths {
    /// The image file, `DIR/NAME.img`.
    pub image: PathBuf,
    /// qcow2's FUSE export, `DIR/NAME.export`; `None` for raw images.
    pub export: Option<PathBuf>,
    /// Where the filesystem inside is mounted, `DIR/NAME.mnt`.
    pub mount_point: PathBuf,
}

impl Paths {
    /// The files of a container of `spec` named `name` in `dir`.
    pub fn of(spec: &ContainerSpec, dir: &Path, name: &str) -> Paths {
        Paths {
            image: dir.join(format!("{name}.img")),
            export: (spec.format == Format::Qcow2).then(|| dir.join(format!("{name}.export"))),
            mount_point: dir.join(format!("{name}.mnt")),
        }
    }

    /// The host files below the filesystem whose page cache could serve a read inside:
    /// the export (which the loop device reads), then the image.
    pub fn layers(&self) -> Vec<Layer> {
        let image = Layer {
            name: "image",
            path: self.image.clone(),
            same_offsets: self.export.is_none(),
        };
        match &self.export {
            Some(export) => vec![
                Layer {
                    name: "export",
                    path: export.clone(),
                    same_offsets: true,
                },
                image,
            ],
            None => vec![image],
        }
    }
}

/// One live container: its image made, attached and mounted until it is torn down.
pub struct Container {
    spec: ContainerSpec,
    name: String,
    image: PathBuf,
    mount_point: PathBuf,
    /// qcow2's FUSE export, the loop device's backing file.
    export: Option<PathBuf>,
    loop_device: PathBuf,
    direct_io: bool,
    /// qcow2's daemon, until it is stopped.
    daemon: Option<Daemon>,
    // What is still to be undone; each is cleared when its undoing succeeds.
    /// The loop device is ours.
    attached: bool,
    /// The filesystem is mounted at `mount_point`.
    mounted: bool,
    /// `mount_point` is a folder we made.
    mount_folder_made: bool,
    /// Files we made (image, export, daemon log), still to be removed.
    files: Vec<PathBuf>,
}

impl Container {
    /// Makes `dir/NAME.img` as `spec` says, attaches it, makes and checks its filesystem
    /// and mounts it at `dir/NAME.mnt`; on failure, removes what it had made.
    pub fn create(spec: &ContainerSpec, dir: &Path, name: &str) -> Result<Container, Error> {
        spec.validate()?;
        let dir = std::fs::canonicalize(dir).map_err(|e| Error::io("inspect", dir, e))?;
        let paths = Paths::of(spec, &dir, name);
        let mut container = Container {
            spec: spec.clone(),
            name: name.to_string(),
            image: paths.image,
            mount_point: paths.mount_point,
            export: None,
            loop_device: PathBuf::new(),
            direct_io: false,
            daemon: None,
            attached: false,
            mounted: false,
            mount_folder_made: false,
            files: Vec::new(),
        };
        match container.build(&dir) {
            Ok(()) => Ok(container),
            Err(e) => {
                let e = container.with_daemon_message(e);
                // What cannot be removed now is still found by `leftovers`.
                let _ = container.teardown();
                Err(e)
            }
        }
    }

    /// What the container was made as.
    pub fn spec(&self) -> &ContainerSpec {
        &self.spec
    }

    /// The name its files are called by (`NAME.img`, `NAME.mnt`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Where its filesystem is mounted.
    pub fn mount_point(&self) -> &Path {
        &self.mount_point
    }

    /// The image file on the host.
    pub fn image_path(&self) -> &Path {
        &self.image
    }

    /// The loop device its filesystem sits on (`/dev/loopN`).
    pub fn loop_device(&self) -> &Path {
        &self.loop_device
    }

    /// Whether the loop device does direct I/O on its backing file, as the kernel reports.
    pub fn direct_io(&self) -> bool {
        self.direct_io
    }

    /// The host files below the filesystem whose page cache could serve a read inside.
    pub fn layers(&self) -> Vec<Layer> {
        Paths {
            image: self.image.clone(),
            export: self.export.clone(),
            mount_point: self.mount_point.clone(),
        }
        .layers()
    }

    /// The qemu-storage-daemon's process id; `None` for raw images.
    pub fn daemon_pid(&self) -> Option<u32> {
        self.daemon.as_ref().and_then(Daemon::pid)
    }

    /// CPU seconds the qemu-storage-daemon has used so far; `None` for raw images.
    pub fn daemon_cpu_seconds(&self) -> Option<f64> {
        self.daemon.as_ref().and_then(Daemon::cpu_seconds)
    }

    /// Bytes the image file takes on the host.
    pub fn allocated_bytes(&self) -> Result<u64, Error> {
        let meta =
            std::fs::metadata(&self.image).map_err(|e| Error::io("inspect", &self.image, e))?;
        // st_blocks counts 512-byte units whatever the filesystem's block size (stat(2)).
        Ok(meta.blocks() * 512)
    }

    /// Bytes the filesystem inside holds, data and metadata.
    pub fn inner_used_bytes(&self) -> Result<u64, Error> {
        let vfs = rustix::fs::statvfs(&self.mount_point)
            .map_err(|e| Error::io("inspect", &self.mount_point, e))?;
        Ok(vfs.f_blocks.saturating_sub(vfs.f_bfree) * vfs.f_frsize)
    }

    /// The host block device holding the image, as /proc/diskstats names it (`vda`).
    pub fn host_device(&self) -> Option<String> {
        let folder = self.image.parent()?;
        let dev = std::fs::metadata(folder).ok()?.dev();
        let (major, minor) = (rustix::fs::major(dev), rustix::fs::minor(dev));
        let roots = Roots::system();
        let sysfs = if major != 0 {
            devices::device_dir(&roots, DeviceNumber { major, minor })?
        } else {
            // btrfs gives its files an anonymous device number: go by the mount's source.
            let entries = mounts::read_mountinfo(&roots).ok()?;
            let mount = mounts::mount_of(&entries, folder)?;
            devices::source_dir(&roots, &mount.source)?
        };
        let name = sysfs.file_name()?.to_str()?.to_string();
        let diskstats = std::fs::read_to_string("/proc/diskstats").ok()?;
        diskstats
            .lines()
            .any(|line| line.split_whitespace().nth(2) == Some(name.as_str()))
            .then_some(name)
    }

    /// The loop device's folder in sysfs.
    fn loop_sysfs(&self) -> PathBuf {
        let name = self.loop_device.file_name().unwrap_or_default();
        Path::new("/sys/block").join(name)
    }
}

impl Drop for Container {
    fn drop(&mut self) {
        let _ = self.teardown();
    }
}
