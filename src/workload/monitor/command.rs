//! The command a monitor watches, found on PATH before the run starts
//! (`platform::programs`): started when sampling starts, its stdout sent to ratelab's
//! stderr so that ratelab's stdout holds results only.

use std::os::fd::AsFd;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};

use crate::error::Error;

/// Starts `command` (its program already resolved to `program`), with its stdout on
/// ratelab's stderr, its stdin and stderr shared with ratelab.
pub fn spawn(program: &Path, command: &[String]) -> Result<Child, Error> {
    let name = command.first().map(String::as_str).unwrap_or_default();
    let stderr = std::io::stderr()
        .as_fd()
        .try_clone_to_owned()
        .map_err(|e| Error::io("duplicate stderr for", name, e))?;
    // In a process group of its own, so stopping it stops its children too.
    Command::new(program)
        .process_group(0)
        .arg0(name)
        .args(&command[1..])
        .stdout(Stdio::from(stderr))
        .spawn()
        .map_err(|e| Error::io("start", name, e))
}

/// Stops the command's process group: SIGTERM, and SIGKILL for what is left after a
/// moment, so children it started (a shell's) do not outlive the monitor.
pub fn stop_group(child: &mut Child) {
    let group = -(child.id() as libc::pid_t);
    // SAFETY: kill sends a signal; a negative pid names the process group the command leads.
    unsafe { libc::kill(group, libc::SIGTERM) };
    for _ in 0..20 {
        if let Ok(Some(_)) = child.try_wait() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    // SAFETY: as above; the group may be gone already, which is fine.
    unsafe { libc::kill(group, libc::SIGKILL) };
}
