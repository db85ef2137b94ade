//! `ratelab quick` and `ratelab readdir` on a made folder, on tmpfs and on the rig;
//! and `--ioprio` seen on the workload's own thread.

mod common;

use std::path::Path;

use common::rig::{self, MIB, SlowDisk, Throttle};
use common::{RIG_NEEDS, disk_tempdir, entries, json, ratelab, root_or_skip, run_json};
use serde_json::Value;

fn items(doc: &Value) -> &Vec<Value> {
    doc["workloads"][0]["items"].as_array().unwrap()
}

fn codes(doc: &Value) -> Vec<&str> {
    doc["verdicts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["code"].as_str().unwrap())
        .collect()
}

/// A folder holding files that readdir must read, and files and things it must not.
fn made_folder(dir: &Path) {
    // Files at rest: synced, as a folder someone reads later would be.
    let write = |name: &str, size: usize| {
        std::fs::write(dir.join(name), vec![7u8; size]).unwrap();
        std::fs::File::open(dir.join(name))
            .unwrap()
            .sync_all()
            .unwrap();
    };
    write("exactly-10KB", 10_000);
    write("just-under", 9_999);
    write("small", 5_000);
    write("one-MiB", 1 << 20);
    std::fs::create_dir(dir.join("sub")).unwrap();
    write("sub/two-MiB", 2 << 20);
    std::os::unix::fs::symlink(dir.join("one-MiB"), dir.join("link-to-one-MiB")).unwrap();
    let fifo = std::ffi::CString::new(dir.join("fifo").to_str().unwrap()).unwrap();
    // SAFETY: mkfifo on a NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o644) }, 0);
}

fn files_read(doc: &Value) -> Vec<String> {
    let mut names: Vec<String> = items(doc)
        .iter()
        .map(|i| i["file"].as_str().unwrap().to_string())
        .collect();
    names.sort();
    names
}

#[test]
fn readdir_reads_all_and_only_the_files_it_should() {
    let dir = disk_tempdir();
    made_folder(dir.path());
    let before = entries(dir.path());
    let flat =
        run_json(
            ratelab()
                .arg("readdir")
                .arg(dir.path())
                .args(["--json", "--no-store", "-q"]),
        );
    assert_eq!(files_read(&flat), vec!["exactly-10KB", "one-MiB"]);
    let deep = run_json(ratelab().arg("readdir").arg(dir.path()).args([
        "-r",
        "--json",
        "--no-store",
        "-q",
    ]));
    assert_eq!(
        files_read(&deep),
        vec!["exactly-10KB", "one-MiB", "sub/two-MiB"]
    );
    for item in items(&deep) {
        assert_eq!(item["bytes"], item["size_bytes"], "{item}");
        assert!(
            item["cached_fraction_before"].as_f64().unwrap() < 0.01,
            "{item}"
        );
    }
    let context = &deep["workloads"][0]["context"];
    assert_eq!(context["skipped_too_small"], 2);
    assert_eq!(
        context["skipped_not_regular"], 2,
        "the symlink and the fifo"
    );
    assert_eq!(
        deep["workloads"][0]["summary"]["by_band"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
    let mut after = entries(dir.path());
    after.sort();
    let mut before = before;
    before.sort();
    assert_eq!(after, before, "readdir wrote nothing");
}

#[test]
fn readdir_warns_about_unreadable_files_and_goes_on() {
    if !common::root_or_skip(
        "readdir_warns_about_unreadable_files_and_goes_on",
        "it runs ratelab as nobody",
    ) {
        return;
    }
    // In /tmp, which nobody can always reach: the build folder may sit in a home folder
    // that nobody cannot enter.
    let dir = tempfile::Builder::new()
        .prefix("ratelab-test-")
        .tempdir_in("/tmp")
        .expect("create a temporary folder");
    made_folder(dir.path());
    std::fs::write(dir.path().join("secret"), vec![1u8; 50_000]).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(
        dir.path().join("secret"),
        std::fs::Permissions::from_mode(0o000),
    )
    .unwrap();
    for path in [dir.path().to_path_buf(), dir.path().join("sub")] {
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    // The tempdir's parents must let nobody through.
    let output = common::as_nobody(common::bin())
        .arg("readdir")
        .arg(dir.path())
        .args(["--json", "--no-store", "-q"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    if stderr.contains("Permission denied") && !stderr.contains("secret") {
        common::skip(
            "readdir_warns_about_unreadable_files_and_goes_on",
            &format!("nobody cannot reach {}: {stderr}", dir.path().display()),
        );
        return;
    }
    assert!(output.status.success(), "{stderr}");
    assert!(
        stderr.contains("warning") && stderr.contains("secret"),
        "{stderr}"
    );
    let doc = json(&output.stdout);
    assert_eq!(files_read(&doc), vec!["exactly-10KB", "one-MiB"]);
    assert!(
        codes(&doc).contains(&"unreadable_files"),
        "{:?}",
        codes(&doc)
    );
}

#[test]
fn quick_and_readdir_work_on_tmpfs() {
    if !root_or_skip("quick_and_readdir_work_on_tmpfs", "it mounts a tmpfs") {
        return;
    }
    let dir = disk_tempdir();
    let mount = dir.path().join("tmpfs");
    std::fs::create_dir(&mount).unwrap();
    let mounted = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=256m", "tmpfs"])
        .arg(&mount)
        .status()
        .unwrap();
    assert!(mounted.success());
    let result = std::panic::catch_unwind(|| {
        let quick =
            run_json(
                ratelab()
                    .arg("quick")
                    .arg(&mount)
                    .args(["--json", "--no-store", "-q"]),
            );
        let small = items(&quick)
            .iter()
            .find(|i| i.get("files").is_some())
            .expect("the small files item");
        assert_eq!(small["files"], 500);
        assert_eq!(small["bytes"], 500 * 4096);
        assert!(
            entries(&mount).is_empty(),
            "quick left {:?}",
            entries(&mount)
        );
        made_folder(&mount);
        let read = run_json(ratelab().arg("readdir").arg(&mount).args([
            "-r",
            "--json",
            "--no-store",
            "-q",
        ]));
        assert_eq!(
            files_read(&read),
            vec!["exactly-10KB", "one-MiB", "sub/two-MiB"]
        );
    });
    let _ = std::process::Command::new("umount").arg(&mount).status();
    result.unwrap();
}

#[test]
fn quick_says_when_a_target_is_slower_than_before() {
    if !root_or_skip("quick_says_when_a_target_is_slower_than_before", RIG_NEEDS) {
        return;
    }
    let _lock = rig::exclusive();
    let disk = SlowDisk::new(512 * MIB);
    let db = disk.scratch().join("results.db");
    let fast = run_json(
        ratelab()
            .arg("quick")
            .arg(disk.path())
            .args(["--json", "-q", "--db"])
            .arg(&db),
    );
    assert!(!codes(&fast).contains(&"slower_than_before"));
    let throttle = Throttle::new();
    throttle.limit(&disk, 5 * MIB, 300 * MIB);
    let slow = run_json(
        throttle
            .command(assert_cmd::cargo::cargo_bin!("ratelab"))
            .arg("quick")
            .arg(disk.path())
            .args(["--json", "-q", "--db"])
            .arg(&db),
    );
    assert!(
        codes(&slow).contains(&"slower_than_before"),
        "{:?}",
        slow["verdicts"]
    );
    assert_eq!(slow["workloads"][0]["context"]["baseline"]["runs"], 1);
    assert!(entries(disk.path()).iter().all(|e| e == "lost+found"));

    // readdir on the same rig, its reads held to 10 MiB/s: uncached, so at the limit.
    let folder = disk.path().join("made");
    std::fs::create_dir(&folder).unwrap();
    made_folder(&folder);
    throttle.limit(&disk, 300 * MIB, 10 * MIB);
    let read = run_json(
        throttle
            .command(assert_cmd::cargo::cargo_bin!("ratelab"))
            .arg("readdir")
            .arg(&folder)
            .args(["-r", "--json", "--no-store", "-q"]),
    );
    assert_eq!(
        files_read(&read),
        vec!["exactly-10KB", "one-MiB", "sub/two-MiB"]
    );
    let two = items(&read)
        .iter()
        .find(|i| i["file"] == "sub/two-MiB")
        .unwrap();
    let rate = two["bytes_per_sec"].as_f64().unwrap() / MIB as f64;
    eprintln!("readdir on the rig: a 2 MiB file at {rate:.1} MiB/s through a 10 MiB/s limit");
    assert!(
        rate < 15.0,
        "a 2 MiB file read at {rate:.1} MiB/s through a 10 MiB/s limit: not uncached?"
    );
}

#[test]
fn ioprio_is_set_on_the_workload_thread() {
    let dir = disk_tempdir();
    let mut child = ratelab()
        .arg("disk")
        .arg(dir.path())
        .args([
            "--sizes",
            "256M",
            "--direct",
            "--block-size",
            "4K",
            "--phase",
            "write",
            "--ioprio",
            "idle",
        ])
        .args(["--no-store", "-q"])
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    common::wait_for_work_folder(dir.path());
    let pid = child.id();
    // ioprio_get(IOPRIO_WHO_PROCESS, tid): class 3 is idle.
    let idle = (0..100).any(|_| {
        std::thread::sleep(std::time::Duration::from_millis(20));
        std::fs::read_dir(format!("/proc/{pid}/task"))
            .into_iter()
            .flatten()
            .flatten()
            .any(|task| {
                let tid: i32 = task.file_name().to_string_lossy().parse().unwrap_or(0);
                // SAFETY: a plain syscall on integers.
                let value = unsafe { libc::syscall(libc::SYS_ioprio_get, 1, tid) };
                value >= 0 && value >> 13 == 3
            })
    });
    let _ = child.kill();
    let _ = child.wait();
    assert!(idle, "no thread of ratelab ran at idle I/O priority");
}
