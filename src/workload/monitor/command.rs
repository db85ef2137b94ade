//! The command a monitor watches: found on PATH before the run starts (so a typo is
//! refused before anything is measured), started when sampling starts, its stdout sent
//! to ratelab's stderr so that ratelab's stdout holds results only.

use std::os::fd::AsFd;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use crate::workload::Error;

/// The program `program` names: a path as given, or the first executable of that name
/// on PATH, as a shell would find it.
pub fn resolve(program: &str) -> Result<PathBuf, Error> {
    let refused = |why: &str| {
        Error::io(
            "start",
            program,
            std::io::Error::new(std::io::ErrorKind::NotFound, why.to_string()),
        )
    };
    let executable = |path: &Path| {
        path.is_file() && rustix::fs::access(path, rustix::fs::Access::EXEC_OK).is_ok()
    };
    if program.is_empty() {
        return Err(refused("the command is empty"));
    }
    if program.contains('/') {
        let path = PathBuf::from(program);
        return if executable(&path) {
            Ok(path)
        } else if path.exists() {
            Err(refused("not an executable file"))
        } else {
            Err(refused("no such file"))
        };
    }
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .map(|dir| dir.join(program))
        .find(|path| executable(path))
        .ok_or_else(|| refused("no such program on PATH"))
}

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
