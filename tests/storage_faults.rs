//! The storage core's one request engine meeting what devices do: a 4Kn disk whose
//! direct I/O takes 4096-byte steps (what does not fit is refused before a byte is
//! written, naming the device), a filesystem that fills up midway (named ENOSPC with
//! its byte, the run stored incomplete and nothing left), and a job whose buffers would not fit in memory (refused with its figure).

mod common;

use std::path::Path;
use std::process::Stdio;

use common::rig::{self, MIB, SlowDisk, Throttle};
use common::{RIG_NEEDS, entries, root_or_skip};

/// What is left in `target` but the filesystem's own folder and `filler`.
fn left(target: &Path, filler: &str) -> Vec<String> {
    entries(target)
        .into_iter()
        .filter(|e| e != "lost+found" && e != filler)
        .collect()
}

#[test]
fn a_4kn_disk_refuses_512_byte_direct_io_before_writing_and_runs_the_rest() {
    let test = "a_4kn_disk_refuses_512_byte_direct_io_before_writing_and_runs_the_rest";
    if !root_or_skip(test, RIG_NEEDS) {
        return;
    }
    let _lock = rig::exclusive();
    let disk = SlowDisk::with_sector_size(256 * MIB, 4096);
    let device = Path::new(disk.device())
        .file_name()
        .unwrap()
        .to_str()
        .unwrap();
    let message = common::refused(
        common::ratelab()
            .arg("iops")
            .arg(disk.path())
            .args(["--size", "16M", "--tests", "RND4K-Q1T1,RND512-Q1T1"])
            .args(["--seconds", "0.2", "--ramp", "0", "--no-store"]),
        3,
        &[&format!(
            "RND512-Q1T1 needs 512-byte direct I/O; {device} takes 4096"
        )],
    );
    eprintln!("{message}");
    assert!(
        left(disk.path(), "").is_empty(),
        "{:?}",
        entries(disk.path())
    );

    let doc = common::run_json(
        common::ratelab()
            .arg("iops")
            .arg(disk.path())
            .args(["--size", "16M", "--tests", "RND4K-Q1T1,SEQ1M-Q8T1"])
            .args([
                "--seconds",
                "0.3",
                "--ramp",
                "0",
                "--json",
                "--no-store",
                "-q",
            ]),
    );
    assert_eq!(doc["status"], "complete", "{doc}");
    let items = doc["workloads"][0]["items"].as_array().unwrap();
    assert_eq!(items.len(), 4, "{doc}");
    assert!(
        items.iter().all(|i| i["ios"].as_u64().unwrap() > 0),
        "{doc}"
    );

    // The disk series reads a 10 KiB file's tail exactly with a 4096-byte request.
    let doc = common::run_json(common::ratelab().arg("disk").arg(disk.path()).args([
        "--sizes",
        "10K,1M",
        "--json",
        "--no-store",
        "-q",
    ]));
    assert_eq!(doc["status"], "complete", "{doc}");
    assert!(
        left(disk.path(), "").is_empty(),
        "{:?}",
        entries(disk.path())
    );
}

/// Runs `verb TARGET args` on a filesystem that another writer fills once ratelab's work
/// folder appears: the run must fail naming ENOSPC at a byte, be stored incomplete,
/// and leave nothing of its own.
fn fills_up_midway(verb: &str, args: &[&str]) {
    let disk = SlowDisk::new(160 * MIB);
    let throttle = Throttle::new();
    // Slow writes, so the filler takes the space while ratelab is still writing.
    throttle.limit(&disk, 16 * MIB, 64 * MIB);
    let db = disk.scratch().join("results.db");
    let child = throttle
        .command(common::bin())
        .arg(verb)
        .arg(disk.path())
        .args(args)
        .arg("--db")
        .arg(&db)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    common::wait_for_work_folder(disk.path());
    std::thread::sleep(std::time::Duration::from_millis(300));
    let free = rustix::fs::statvfs(disk.path()).unwrap();
    let filler = disk.path().join("filler");
    let status = std::process::Command::new("fallocate")
        .arg("-l")
        .arg((free.f_bavail * free.f_frsize).to_string())
        .arg(&filler)
        .status()
        .unwrap();
    assert!(status.success(), "fallocate");
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    eprintln!("{verb}: {stderr}");
    assert_eq!(output.status.code(), Some(3), "{stderr}");
    assert!(
        stderr.contains("the filesystem is full (ENOSPC)")
            && stderr.contains("at byte")
            && !stderr.contains("short write"),
        "{stderr}"
    );
    let runs = common::stored_runs(&db);
    assert_eq!(runs[0]["status"], "incomplete", "{runs}");
    assert!(
        left(disk.path(), "filler").is_empty(),
        "{:?}",
        entries(disk.path())
    );
}

#[test]
fn a_filesystem_that_fills_up_while_iops_fills_its_file_is_named_enospc() {
    // The disk series meets the same in disk_rig.rs (enospc_mid_run_...).
    let test = "a_filesystem_that_fills_up_while_iops_fills_its_file_is_named_enospc";
    if !root_or_skip(test, RIG_NEEDS) {
        return;
    }
    let _lock = rig::exclusive();
    fills_up_midway(
        "iops",
        &["--size", "96M", "--tests", "RND4K-Q1T1", "--seconds", "0.2"],
    );
}

#[test]
fn a_job_whose_buffers_would_not_fit_in_memory_is_refused_with_its_figure() {
    let dir = common::disk_tempdir();
    let message = common::refused(
        common::ratelab().arg("iops").arg(dir.path()).args([
            "--size",
            "1G",
            "--tests",
            "SEQ64M-Q64T16",
            "--no-store",
        ]),
        3,
        &[
            "SEQ64M-Q64T16 would hold 128 GiB of I/O buffers",
            "more than a quarter of the",
        ],
    );
    eprintln!("{message}");
    assert!(entries(dir.path()).is_empty(), "{:?}", entries(dir.path()));
}
