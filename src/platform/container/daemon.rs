//! The qemu-storage-daemon that serves a qcow2 image as a plain file through a FUSE
//! export: QEMU's own qcow2 driver, with no nbd module needed. It runs as our child in
//! a process group of its own, so a Ctrl-C at the terminal reaches us and not it, and
//! it outlives nothing: stopping it also removes an export its exit left mounted.

use std::fs::File;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::tools;
use crate::error::Error;
use crate::platform::{Roots, mounts};

/// How long the daemon may take to open the image and mount its export.
const START_TIMEOUT: Duration = Duration::from_secs(10);
/// How long it may take to exit after SIGTERM before it is killed.
const STOP_TIMEOUT: Duration = Duration::from_secs(5);
/// How often a wait looks again.
const POLL: Duration = Duration::from_millis(10);

/// A running qemu-storage-daemon exporting one image.
pub(super) struct Daemon {
    child: Child,
    /// Whether the child has been waited for (its pid may be reused since).
    reaped: bool,
    image: PathBuf,
    export: PathBuf,
    log: PathBuf,
}

impl Daemon {
    /// Starts the daemon on `image` and waits until `export` (an existing empty file)
    /// is its FUSE mount; its stdout and stderr go to `log`.
    pub(super) fn start(image: &Path, export: &Path, log: &Path) -> Result<Daemon, Error> {
        let log_file = File::create(log).map_err(|e| Error::io("create", log, e))?;
        let log_err = log_file
            .try_clone()
            .map_err(|e| Error::io("open", log, e))?;
        let mut command = Command::new("qemu-storage-daemon");
        command
            .arg("--blockdev")
            .arg(format!(
                "node-name=prot,driver=file,filename={},cache.direct=on",
                escaped(image)
            ))
            .args(["--blockdev", "node-name=fmt,driver=qcow2,file=prot"])
            .arg("--export")
            .arg(format!(
                "type=fuse,id=e0,node-name=fmt,mountpoint={},writable=on",
                escaped(export)
            ))
            .stdin(Stdio::null())
            .stdout(log_file)
            .stderr(log_err)
            .process_group(0);
        let child = command
            .spawn()
            .map_err(|e| Error::io("attach", image, tools::started(&command, e)))?;
        let mut daemon = Daemon {
            child,
            reaped: false,
            image: image.to_path_buf(),
            export: export.to_path_buf(),
            log: log.to_path_buf(),
        };
        if let Err(e) = daemon.wait_for_export() {
            let _ = daemon.stop();
            return Err(e);
        }
        Ok(daemon)
    }

    fn wait_for_export(&mut self) -> Result<(), Error> {
        let started = Instant::now();
        loop {
            if export_mounted(&self.export) {
                return Ok(());
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                self.reaped = true;
                return Err(self.error(format!(
                    "qemu-storage-daemon exited ({status}) before exporting it at {}",
                    self.export.display()
                )));
            }
            if started.elapsed() > START_TIMEOUT {
                return Err(self.error(format!(
                    "qemu-storage-daemon did not export it at {} within {} s",
                    self.export.display(),
                    START_TIMEOUT.as_secs()
                )));
            }
            std::thread::sleep(POLL);
        }
    }

    /// An error attaching the image, with what the daemon said.
    fn error(&self, what: String) -> Error {
        let said = self.said();
        let message = if said.is_empty() {
            what
        } else {
            format!("{what}: {said}")
        };
        Error::io("attach", &self.image, std::io::Error::other(message))
    }

    /// What the daemon has written to its log, on one line.
    pub(super) fn said(&self) -> String {
        std::fs::read_to_string(&self.log)
            .map(|text| tools::quote(&text))
            .unwrap_or_default()
    }

    /// Its process id, while it has not been waited for.
    pub(super) fn pid(&self) -> Option<u32> {
        (!self.reaped).then(|| self.child.id())
    }

    /// CPU seconds it has used, user and system, from /proc/PID/stat (proc_pid_stat(5)).
    pub(super) fn cpu_seconds(&self) -> Option<f64> {
        let pid = self.pid()?;
        let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        let ticks = cpu_ticks(&text)?;
        Some(ticks as f64 / rustix::param::clock_ticks_per_second() as f64)
    }

    /// Stops the daemon (SIGTERM, then SIGKILL after a while) and unmounts its export
    /// if its exit left it mounted. Safe to call again after a failure.
    pub(super) fn stop(&mut self) -> Result<(), Error> {
        if !self.reaped {
            self.terminate()?;
        }
        if export_mounted(&self.export) {
            // Measured with qemu 10.0.2: a daemon that dies can leave the FUSE mount
            // behind, its connection gone; only an unmount removes it.
            super::teardown::unmount(&self.export)?;
        }
        Ok(())
    }

    fn terminate(&mut self) -> Result<(), Error> {
        let pid = rustix::process::Pid::from_child(&self.child);
        // It may have exited already; waiting below reaps it either way.
        let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
        let asked = Instant::now();
        while asked.elapsed() < STOP_TIMEOUT {
            match self.child.try_wait() {
                Ok(Some(_)) => {
                    self.reaped = true;
                    return Ok(());
                }
                Ok(None) => std::thread::sleep(POLL),
                Err(e) => return Err(Error::io("stop the daemon of", &self.image, e)),
            }
        }
        let _ = self.child.kill();
        self.child
            .wait()
            .map_err(|e| Error::io("stop the daemon of", &self.image, e))?;
        self.reaped = true;
        Ok(())
    }
}

/// Whether `path` is a FUSE mount point now.
pub(super) fn export_mounted(path: &Path) -> bool {
    mounts::read_mountinfo(&Roots::system()).is_ok_and(|entries| {
        entries
            .iter()
            .any(|entry| entry.mount_point == path && entry.fs_type.starts_with("fuse"))
    })
}

/// utime + stime, in clock ticks, from the text of /proc/PID/stat. The command name
/// (field 2) is in parentheses and may hold spaces, so fields are counted after its end.
fn cpu_ticks(stat: &str) -> Option<u64> {
    let after_name = &stat[stat.rfind(')')? + 1..];
    let mut fields = after_name.split_whitespace().skip(11);
    let user: u64 = fields.next()?.parse().ok()?;
    let system: u64 = fields.next()?.parse().ok()?;
    Some(user + system)
}

/// A path as a value in a QEMU option list, where a comma is written twice.
fn escaped(path: &Path) -> String {
    path.to_string_lossy().replace(',', ",,")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_ticks_count_fields_after_the_command_name() {
        let stat = "4242 (qemu-storage (x) d) S 1 4242 4242 0 -1 4194560 \
                    1193 0 0 0 17 5 0 0 20 0 4 0 2713 360771584 3009";
        assert_eq!(cpu_ticks(stat), Some(22));
        assert_eq!(cpu_ticks("4242 (x) S 1"), None);
    }

    #[test]
    fn commas_in_paths_are_doubled_for_qemu() {
        assert_eq!(escaped(Path::new("/a,b/c.img")), "/a,,b/c.img");
    }
}
