//! Shared test helpers: the ratelab binary, and rigs of real kernel objects (a slow
//! disk: a loop device throttled by a blkio cgroup) built and torn down by each test.

#![allow(dead_code)]

pub mod rig;

use std::path::Path;
use std::process::Command;

/// The ratelab binary built for these tests.
pub fn ratelab() -> Command {
    Command::new(assert_cmd::cargo::cargo_bin!("ratelab"))
}

/// Whether the tests run as root.
pub fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

/// True when the test may go on; otherwise says on stderr why it is skipped.
pub fn root_or_skip(test: &str) -> bool {
    if is_root() {
        true
    } else {
        eprintln!("skipping {test}: it builds a loop device and a blkio cgroup, which needs root");
        false
    }
}

/// Whether a program is on PATH.
pub fn have(program: &str) -> bool {
    Command::new("sh")
        .arg("-c")
        .arg(format!("command -v {program}"))
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Files and folders directly under `dir`.
pub fn entries(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .map(|d| {
            d.filter_map(Result::ok)
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// A temporary folder on the disk that holds the build, not on a tmpfs.
pub fn disk_tempdir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("ratelab-test-")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .expect("create a temporary folder")
}

/// Parses a run document printed with --json.
pub fn json(stdout: &[u8]) -> serde_json::Value {
    serde_json::from_slice(stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not one JSON document ({e}):\n{}",
            String::from_utf8_lossy(stdout)
        )
    })
}
