//! How a command is held to n CPUs: an affinity mask it and its children inherit (the
//! first n online CPUs), or a CFS quota of n CPUs' time in a cgroup of its own, as a VM
//! with n vCPUs would see it (`--vcpus`).

use std::ffi::CString;
use std::path::PathBuf;

use crate::error::Error;

/// The CFS period the quota is a share of, microseconds.
const PERIOD_US: u64 = 100_000;

/// A cgroup whose CPU time is limited, made for one run and removed after it.
pub struct QuotaGroup {
    path: PathBuf,
    v1: bool,
    /// `cgroup.procs` as a C string, ready for the child to write itself into.
    procs: CString,
}

impl QuotaGroup {
    /// Makes a cgroup for this process's runs; root only.
    pub fn create() -> Result<QuotaGroup, Error> {
        let name = format!("ratelab-scale-{}", std::process::id());
        let v1_root = PathBuf::from("/sys/fs/cgroup/cpu");
        let v1 = v1_root.join("cpu.cfs_quota_us").exists();
        let path = if v1 {
            v1_root.join(name)
        } else {
            let root = PathBuf::from("/sys/fs/cgroup");
            let _ = std::fs::write(root.join("cgroup.subtree_control"), "+cpu");
            root.join(name)
        };
        std::fs::create_dir(&path).map_err(|e| {
            Error::Unsupported(format!(
                "--vcpus needs a cpu cgroup of its own and cannot make {}: {e} (it needs root)",
                path.display()
            ))
        })?;
        let procs = CString::new(path.join("cgroup.procs").as_os_str().as_encoded_bytes())
            .expect("cgroup paths hold no NUL");
        Ok(QuotaGroup { path, v1, procs })
    }

    /// Limits the group to `cpus` CPUs' worth of time.
    pub fn limit(&self, cpus: usize) -> Result<(), Error> {
        let quota = PERIOD_US * cpus as u64;
        let result = if self.v1 {
            std::fs::write(self.path.join("cpu.cfs_period_us"), PERIOD_US.to_string()).and_then(
                |()| std::fs::write(self.path.join("cpu.cfs_quota_us"), quota.to_string()),
            )
        } else {
            std::fs::write(self.path.join("cpu.max"), format!("{quota} {PERIOD_US}"))
        };
        result.map_err(|e| Error::io("set the CPU quota of", &self.path, e))
    }

    /// The path of `cgroup.procs`, for the child to join before it executes.
    pub fn procs(&self) -> &CString {
        &self.procs
    }
}

impl Drop for QuotaGroup {
    fn drop(&mut self) {
        // The runs have been reaped; retry briefly while the kernel lets go of them.
        for _ in 0..50 {
            if std::fs::remove_dir(&self.path).is_ok() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
}

/// Moves the calling process into the cgroup whose `cgroup.procs` is `procs`. Called in
/// the child between fork and exec, so it uses only async-signal-safe calls.
pub fn join(procs: &CString) -> std::io::Result<()> {
    // SAFETY: open, write and close with a valid C string and a static buffer.
    unsafe {
        let fd = libc::open(procs.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let written = libc::write(fd, b"0\n".as_ptr().cast(), 2);
        libc::close(fd);
        if written < 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}
