//! The steps that make a container, in order: the image file, the daemon's export for
//! qcow2, the loop device, the filesystem and its check.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::daemon::Daemon;
use super::{Container, DEFAULT_CLUSTER_SIZE_BYTES, Filesystem, Format, tools};
use crate::error::Error;
use crate::platform::read_attr;

impl Container {
    /// Makes, attaches, formats, checks and mounts, recording each step for teardown.
    pub(super) fn build(&mut self, dir: &Path) -> Result<(), Error> {
        self.make_image()?;
        let backing = match self.spec.format {
            Format::RawSparse | Format::RawPrealloc => self.image.clone(),
            Format::Qcow2 => self.export(dir)?,
        };
        self.attach(&backing)?;
        self.make_filesystem()?;
        self.check_filesystem()?;
        std::fs::create_dir(&self.mount_point)
            .map_err(|e| Error::io("create", &self.mount_point, e))?;
        self.mount_folder_made = true;
        tools::run(
            Command::new("mount")
                .arg(&self.loop_device)
                .arg(&self.mount_point),
            "mount",
            &self.mount_point,
        )?;
        self.mounted = true;
        Ok(())
    }

    fn make_image(&mut self) -> Result<(), Error> {
        let image = self.image.clone();
        let size = self.spec.image_size_bytes;
        if self.spec.format == Format::Qcow2 {
            // qemu-img would overwrite a file of the same name.
            if image.symlink_metadata().is_ok() {
                let exists = std::io::Error::from(std::io::ErrorKind::AlreadyExists);
                return Err(Error::io("create", &image, exists));
            }
            self.files.push(image.clone());
            let cluster = self
                .spec
                .cluster_bytes()
                .unwrap_or(DEFAULT_CLUSTER_SIZE_BYTES);
            let options = format!(
                "cluster_size={cluster},extended_l2={},preallocation={}",
                if self.spec.extended_l2 { "on" } else { "off" },
                self.spec.preallocation
            );
            tools::run(
                Command::new("qemu-img")
                    .args(["create", "-q", "-f", "qcow2", "-o", &options])
                    .arg(&image)
                    .arg(size.to_string()),
                "create",
                &image,
            )?;
            return Ok(());
        }
        let file = File::options()
            .write(true)
            .create_new(true)
            .open(&image)
            .map_err(|e| Error::io("create", &image, e))?;
        self.files.push(image.clone());
        file.set_len(size)
            .map_err(|e| Error::io("size", &image, e))?;
        if self.spec.format == Format::RawPrealloc {
            rustix::fs::fallocate(&file, rustix::fs::FallocateFlags::empty(), 0, size)
                .map_err(|e| Error::io("preallocate", &image, e))?;
        }
        Ok(())
    }

    /// Starts the daemon that exports the qcow2 image as a plain file; returns that file.
    fn export(&mut self, dir: &Path) -> Result<PathBuf, Error> {
        let export = dir.join(format!("{}.export", self.name));
        let log = dir.join(format!("{}.daemon.log", self.name));
        File::options()
            .write(true)
            .create_new(true)
            .open(&export)
            .map_err(|e| Error::io("create", &export, e))?;
        self.files.push(export.clone());
        self.export = Some(export.clone());
        if log.symlink_metadata().is_ok() {
            let exists = std::io::Error::from(std::io::ErrorKind::AlreadyExists);
            return Err(Error::io("create", &log, exists));
        }
        self.files.push(log.clone());
        self.daemon = Some(Daemon::start(&self.image, &export, &log)?);
        Ok(export)
    }

    /// A loop device on `backing`: with direct I/O for a raw image, buffered on the FUSE
    /// export, where direct I/O was measured to corrupt silently (mkfs.ext4 exits 0, then
    /// mount says "Structure needs cleaning"; qemu 10.0.2, kernel 6.18).
    fn attach(&mut self, backing: &Path) -> Result<(), Error> {
        let mut command = Command::new("losetup");
        if self.spec.format != Format::Qcow2 {
            command.arg("--direct-io=on");
        }
        command.args(["-f", "--show"]).arg(backing);
        let device = tools::run(&mut command, "attach", &self.image)?;
        self.loop_device = PathBuf::from(device.trim());
        self.attached = true;
        // The kernel keeps direct I/O off when the backing file's filesystem cannot do it.
        self.direct_io = read_attr(&self.loop_sysfs().join("loop/dio")).as_deref() == Some("1");
        Ok(())
    }

    /// Makes the filesystem without discarding the device first: on a loop device a
    /// discard punches holes in the image, and a preallocated 256 MiB image was measured
    /// to keep 28 MiB after a plain mkfs.ext4.
    fn make_filesystem(&self) -> Result<(), Error> {
        let (program, args): (&str, &[&str]) = match self.spec.fs {
            Filesystem::Ext4 => ("mkfs.ext4", &["-q", "-F", "-E", "nodiscard"]),
            Filesystem::Xfs => ("mkfs.xfs", &["-q", "-f", "-K"]),
            Filesystem::Btrfs => ("mkfs.btrfs", &["-q", "-f", "-K"]),
        };
        tools::run(
            Command::new(program).args(args).arg(&self.loop_device),
            "make a filesystem on",
            &self.loop_device,
        )?;
        Ok(())
    }

    /// Checks the new filesystem read-only: a container that is damaged from the start
    /// (as the direct-I/O loop on FUSE was) must not be measured.
    fn check_filesystem(&self) -> Result<(), Error> {
        let (program, args): (&str, &[&str]) = match self.spec.fs {
            Filesystem::Ext4 => ("e2fsck", &["-fn"]),
            Filesystem::Xfs => ("xfs_repair", &["-n"]),
            Filesystem::Btrfs => ("btrfs", &["check", "--readonly"]),
        };
        let mut command = Command::new(program);
        command.args(args).arg(&self.loop_device);
        let output = tools::output(&mut command, "check the new filesystem in", &self.image)?;
        if output.status.success() {
            return Ok(());
        }
        let failure = tools::failure(&command, &output);
        Err(Error::io(
            "check the new filesystem in",
            &self.image,
            std::io::Error::other(format!(
                "container {} ({}): {} is damaged right after mkfs: {failure}",
                self.name,
                self.spec.label(),
                self.spec.fs
            )),
        ))
    }

    /// Adds what the daemon said to an error, when it said something.
    pub(super) fn with_daemon_message(&self, err: Error) -> Error {
        let said = self.daemon.as_ref().map(Daemon::said).unwrap_or_default();
        match err {
            Error::Io { op, path, source } if !said.is_empty() => {
                let message = format!("{source}; qemu-storage-daemon said: {said}");
                Error::io(op, path, std::io::Error::other(message))
            }
            other => other,
        }
    }
}
