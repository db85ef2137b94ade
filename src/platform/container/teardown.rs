//! Undoing a container, also a half-made or crashed one: each step is tried whatever
//! failed before it, and is done once only, so a teardown can be repeated safely.

use std::fs::File;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use super::{Container, Filesystem, tools};
use crate::error::Error;
use crate::platform::{Roots, mounts, read_attr};

/// How often a busy unmount is tried before it is done lazily.
const UNMOUNT_TRIES: u32 = 5;
/// The pause between those tries.
const UNMOUNT_PAUSE: Duration = Duration::from_millis(200);
/// How long a detached loop device may take to let go of its backing file.
const DETACH_TIMEOUT: Duration = Duration::from_secs(2);

impl Container {
    /// Unmounts, detaches, stops the daemon and removes every file made, going on past
    /// failures; returns the first. Does nothing the second time.
    pub fn teardown(&mut self) -> Result<(), Error> {
        let mut first = None;
        let mut keep = |result: Result<(), Error>| {
            if let Err(e) = result {
                first.get_or_insert(e);
            }
        };
        if self.mounted {
            keep(self.unmount_inner());
        }
        if self.attached {
            keep(self.detach());
        }
        if let Some(daemon) = &mut self.daemon {
            let stopped = daemon.stop();
            if stopped.is_ok() {
                self.daemon = None;
            }
            keep(stopped);
        }
        let mut remaining = Vec::new();
        for file in std::mem::take(&mut self.files) {
            match std::fs::remove_file(&file) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    keep(Err(Error::io("remove", &file, e)));
                    remaining.push(file);
                }
                _ => {}
            }
        }
        self.files = remaining;
        if self.mount_folder_made && !self.mounted {
            match std::fs::remove_dir(&self.mount_point) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    keep(Err(Error::io("remove", &self.mount_point, e)));
                }
                _ => self.mount_folder_made = false,
            }
        }
        first.map_or(Ok(()), Err)
    }

    fn unmount_inner(&mut self) -> Result<(), Error> {
        // Write back before unmounting, so that an unmount that must go lazy loses nothing.
        if let Ok(folder) = File::open(&self.mount_point) {
            let _ = rustix::fs::syncfs(&folder);
        }
        let result = unmount(&self.mount_point);
        self.mounted = is_mount_point(&self.mount_point);
        result
    }

    fn detach(&mut self) -> Result<(), Error> {
        let sysfs = self.loop_sysfs();
        // Another process may have been given this device since ours let go of it.
        if !self.backs_our_loop(&sysfs) {
            self.attached = false;
            return Ok(());
        }
        if self.spec.fs == Filesystem::Btrfs {
            // btrfs remembers the devices it has seen; forget this one before it is reused.
            let _ = tools::output(
                Command::new("btrfs")
                    .args(["device", "scan", "--forget"])
                    .arg(&self.loop_device),
                "forget",
                &self.loop_device,
            );
        }
        tools::run(
            Command::new("losetup").arg("-d").arg(&self.loop_device),
            "detach",
            &self.loop_device,
        )?;
        self.attached = false;
        // The kernel may release the device after losetup returns; the daemon's export
        // cannot be unmounted while the loop device still holds it.
        let asked = Instant::now();
        while self.backs_our_loop(&sysfs) {
            if asked.elapsed() > DETACH_TIMEOUT {
                let still = std::io::Error::other(format!(
                    "it still holds its backing file {} s after losetup -d (the filesystem inside is still in use)",
                    DETACH_TIMEOUT.as_secs()
                ));
                return Err(Error::io("detach", &self.loop_device, still));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        Ok(())
    }

    /// Whether the loop device in `sysfs` is backed by our image or export now.
    fn backs_our_loop(&self, sysfs: &Path) -> bool {
        let Some(backing) = read_attr(&sysfs.join("loop/backing_file")) else {
            return false;
        };
        let backing = Path::new(backing.strip_suffix(" (deleted)").unwrap_or(&backing));
        backing == self.image || Some(backing) == self.export.as_deref()
    }
}

/// Whether `path` is a mount point now.
fn is_mount_point(path: &Path) -> bool {
    mounts::read_mountinfo(&Roots::system())
        .is_ok_and(|entries| entries.iter().any(|entry| entry.mount_point == path))
}

/// Unmounts `path`, trying again while it is busy; as a last resort detaches it lazily
/// (`umount -l`), which is reported as an error since its filesystem lives on.
pub(super) fn unmount(path: &Path) -> Result<(), Error> {
    let mut failure = None;
    for attempt in 0..UNMOUNT_TRIES {
        if attempt > 0 {
            std::thread::sleep(UNMOUNT_PAUSE);
        }
        let mut command = Command::new("umount");
        command.arg(path);
        let output = tools::output(&mut command, "unmount", path)?;
        if output.status.success() || !is_mount_point(path) {
            return Ok(());
        }
        failure = Some(tools::failure(&command, &output));
    }
    let failure = failure.map(|e| e.to_string()).unwrap_or_default();
    let lazy = tools::run(Command::new("umount").arg("-l").arg(path), "unmount", path);
    let message = match lazy {
        Ok(_) => format!(
            "{failure} ({UNMOUNT_TRIES} tries); detached it lazily with umount -l, its filesystem goes when its last user does"
        ),
        Err(Error::Io { source, .. }) => {
            format!("{failure} ({UNMOUNT_TRIES} tries); umount -l failed too: {source}")
        }
        Err(e) => format!("{failure} ({UNMOUNT_TRIES} tries); umount -l failed too: {e}"),
    };
    Err(Error::io("unmount", path, std::io::Error::other(message)))
}
