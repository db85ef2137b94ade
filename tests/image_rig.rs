//! Disk images on real parts: containers made in a folder on a slow disk of known speed
//! (a throttled loop device) never measure faster than that disk, and every uncached
//! read inside proves each layer evicted; a run stopped by Ctrl-C, or failing inside
//! when its qcow2 daemon dies, leaves no loop device, mount, daemon or image behind.
//! These need root; without it they say why they skip.

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::rig::{self, MIB, SlowDisk, Throttle};
use common::{entries, ratelab, root_or_skip, stored_run};
use serde_json::Value;

const WRITE_BPS: u64 = 100 * MIB;
const READ_BPS: u64 = 150 * MIB;
/// How far above its rate a median of files may be once the slice's credit is taken
/// back (the clock's ticks and the noise of a busy machine).
const MARGIN: f64 = 1.05;
/// ...and one file.
const BURST: f64 = 1.25;
/// The least a place's median may reach of the rig's rate: a 20% shortfall fails.
const LEAST: f64 = 0.85;
const NEEDS: &str = "it makes loop devices, FUSE exports and a blkio cgroup";

/// What of ours is left anywhere on the machine in an image run's work folder under
/// `dir`: loop devices on its files, mounts in it, daemons naming it.
fn leftovers(dir: &Path) -> Vec<String> {
    let dir = dir.join("ratelab-image-");
    let dir = dir.to_str().unwrap();
    let mut left = Vec::new();
    let loops = Command::new("losetup").arg("-a").output().unwrap();
    left.extend(
        String::from_utf8_lossy(&loops.stdout)
            .lines()
            .filter(|l| l.contains(dir))
            .map(|l| format!("loop: {l}")),
    );
    let mounts = std::fs::read_to_string("/proc/mounts").unwrap();
    left.extend(
        mounts
            .lines()
            .filter(|l| l.contains(dir))
            .map(|l| format!("mount: {l}")),
    );
    let daemons = Command::new("pgrep")
        .args(["-af", "qemu-storage-daemon"])
        .output()
        .unwrap();
    left.extend(
        String::from_utf8_lossy(&daemons.stdout)
            .lines()
            .filter(|l| l.contains(dir))
            .map(|l| format!("daemon: {l}")),
    );
    left
}

/// The work folder's entries other than the filesystem's own.
fn files_in(dir: &Path) -> Vec<String> {
    entries(dir)
        .into_iter()
        .filter(|e| e != "lost+found" && e != "results.db" && !e.starts_with("results.db-"))
        .collect()
}

/// Asserts that nothing of an image run is left under `dir`: no loop device, mount or
/// daemon of its work folder, and no file. `what` names the case in the message.
fn assert_clean(dir: &Path, what: &str) {
    let left = leftovers(dir);
    assert!(left.is_empty(), "{what}: {left:?}");
    let files = files_in(dir);
    assert!(files.is_empty(), "{what}: {files:?}");
}

/// Waits until a container of ours is mounted under `dir`.
fn wait_for_container(dir: &Path) {
    let started = Instant::now();
    loop {
        let mounts = std::fs::read_to_string("/proc/mounts").unwrap();
        if mounts
            .lines()
            .any(|l| l.contains(dir.to_str().unwrap()) && l.contains(".mnt"))
        {
            return;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "no container was mounted under {}",
            dir.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The disk records of the image run: (label, record) for each place, host first.
fn places(doc: &Value) -> Vec<(String, Value)> {
    let image = &doc["workloads"][0];
    assert_eq!(image["kind"], "image", "{image}");
    image["params"]["places"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            let index = p["disk_workload"].as_u64().unwrap() as usize;
            (
                p["label"].as_str().unwrap().to_string(),
                doc["workloads"][index].clone(),
            )
        })
        .collect()
}

#[test]
fn containers_on_a_slow_disk_stay_under_its_limit_and_prove_every_layer_evicted() {
    let test = "containers_on_a_slow_disk_stay_under_its_limit_and_prove_every_layer_evicted";
    if !root_or_skip(test, NEEDS) {
        return;
    }
    let _lock = rig::exclusive();
    // In memory, so the throttle alone sets each place's rate, never the VM's disk in a
    // slow mood: the figures are held to it both ways.
    let disk = SlowDisk::in_memory(3 << 30);
    let throttle = Throttle::new();
    throttle.limit(&disk, WRITE_BPS, READ_BPS);
    let output = throttle
        .command(common::bin())
        .arg("image")
        .arg(disk.path())
        .args(["--format", "raw-sparse,qcow2", "--cluster-size", "64K"])
        .args([
            "--sizes",
            "1M,128M,256M",
            "--repeat",
            "2",
            "--image-size",
            "1G",
        ])
        // Direct writes: a blkio throttle (v1) holds back what a process submits, and
        // buffered writes are submitted by the kernel's flusher threads.
        .args([
            "--direct",
            "--read",
            "direct,flushed",
            "--json",
            "--no-store",
            "-q",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let doc = common::json(&output.stdout);
    let places = places(&doc);
    assert_eq!(places.len(), 3, "host, raw-sparse, qcow2");
    for (label, record) in &places {
        let items = record["items"].as_array().unwrap();
        assert_eq!(
            items.len(),
            2 * 3 * 3,
            "{label}: 2 rounds of 3 writes and 6 reads"
        );
        for item in items {
            let rate = item["bytes_per_sec"].as_f64().unwrap();
            let size = item["size_bytes"].as_u64().unwrap();
            let limit = if item["op"] == "read" {
                READ_BPS
            } else {
                WRITE_BPS
            } as f64;
            if size >= 128 * MIB {
                // One file may catch the throttle's slack; a median may not (below).
                assert!(
                    rate <= limit * BURST,
                    "{label}: {} {} MiB at {:.0} MiB/s, over the rig's {:.0} MiB/s",
                    item["op"],
                    size / MIB,
                    rate / MIB as f64,
                    limit / MIB as f64
                );
            }
            if item["op"] == "read" {
                assert!(
                    item["cached_fraction_before"].as_f64().unwrap() < 0.01,
                    "{item}"
                );
                let layers = item["layers"].as_array().cloned().unwrap_or_default();
                let expected = match label.as_str() {
                    "host folder" => 0,
                    "raw-sparse" => 1,
                    _ => 2,
                };
                assert_eq!(layers.len(), expected, "{label}: {item}");
                // cachestat sees no page cache on the FUSE export, evicted or not; the
                // daemon's own reads prove each read reached the image.
                if label.starts_with("qcow2") {
                    let below = item["read_below_fraction"].as_f64().unwrap();
                    assert!(
                        below >= 0.99,
                        "{label}: the daemon read {below} of it: {item}"
                    );
                }
                for layer in layers {
                    assert!(
                        layer["cached_fraction_before"].as_f64().unwrap() < 0.01,
                        "{label}: {layer}"
                    );
                }
            }
        }
        // Each place's median of the larger files: at least the rig's rate within
        // [`LEAST`], and with the throttle's one slice of credit taken back at most it
        // within [`MARGIN`] (0.94-1.00 of it seen here, containers included).
        for (op, limit) in [("write", WRITE_BPS), ("read", READ_BPS)] {
            let median_of = |of: &dyn Fn(f64, f64) -> f64| {
                let mut rates: Vec<f64> = items
                    .iter()
                    .filter(|i| i["op"] == op && i["size_bytes"].as_u64().unwrap() >= 128 * MIB)
                    .map(|i| {
                        let size = i["size_bytes"].as_u64().unwrap() as f64;
                        of(size, i["bytes_per_sec"].as_f64().unwrap()) / limit as f64
                    })
                    .collect();
                rates.sort_by(f64::total_cmp);
                rates[rates.len() / 2]
            };
            let figure = median_of(&|_, rate| rate);
            let less_slice = median_of(&rig::less_one_slice);
            eprintln!(
                "{label}: {op} of 128 MiB and more at {figure:.3}x the rig's rate, \
                 {less_slice:.3}x with one throttle slice taken back (medians)"
            );
            assert!(
                figure >= LEAST && less_slice <= MARGIN,
                "{label}: {op} median at {figure:.3}x the rig's rate, {less_slice:.3}x \
                 less one slice"
            );
        }
    }
    let costs = doc["workloads"][0]["items"].as_array().unwrap();
    assert_eq!(costs.len(), 2 * 3, "one item per place and round");
    assert_clean(disk.path(), "after the run");
}

/// Starts an image run with a qcow2 container in its own process group, as a shell
/// starts a command, storing into `db`.
fn start(target: &Path, db: &Path) -> std::process::Child {
    use std::os::unix::process::CommandExt;
    ratelab()
        .arg("image")
        .arg(target)
        .args(["--format", "qcow2", "--sizes", "64M,64M", "--repeat", "3"])
        .args(["--block-size", "4K", "--json", "-q", "--db"])
        .arg(db)
        .process_group(0)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

#[test]
fn ctrl_c_or_sigterm_mid_run_leaves_nothing_and_stores_the_run_incomplete() {
    let test = "ctrl_c_or_sigterm_mid_run_leaves_nothing_and_stores_the_run_incomplete";
    if !root_or_skip(test, NEEDS) {
        return;
    }
    let _lock = rig::exclusive();
    use rustix::process::{Pid, Signal, kill_process, kill_process_group};
    for signal in [Signal::INT, Signal::TERM] {
        let dir = common::disk_tempdir();
        let elsewhere = common::disk_tempdir();
        let db = elsewhere.path().join("results.db");
        let child = start(dir.path(), &db);
        wait_for_container(dir.path());
        std::thread::sleep(Duration::from_millis(500));
        let pid = Pid::from_child(&child);
        if signal == Signal::INT {
            // Ctrl-C in a terminal signals the whole foreground process group.
            kill_process_group(pid, signal).unwrap();
        } else {
            kill_process(pid, signal).unwrap();
        }
        let output = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(130), "{signal:?}: {stderr}");
        assert_clean(dir.path(), &format!("{signal:?}"));
        let doc = stored_run(&db, 1);
        assert_eq!(doc["status"], "incomplete");
        assert_eq!(doc["incomplete_reason"], "interrupted");
    }
}

#[test]
fn profile_images_adds_a_raw_and_a_qcow2_container_beside_the_first_target() {
    let test = "profile_images_adds_a_raw_and_a_qcow2_container_beside_the_first_target";
    if !root_or_skip(test, NEEDS) {
        return;
    }
    let _lock = rig::exclusive();
    let dir = common::disk_tempdir();
    let doc = common::run_json(ratelab().current_dir(dir.path()).args([
        "profile",
        "--quick",
        "--images",
        "--json",
        "--no-store",
        "-q",
    ]));
    assert_eq!(doc["status"], "complete");
    let workloads = doc["workloads"].as_array().unwrap();
    let image = workloads
        .iter()
        .position(|w| w["kind"] == "image")
        .expect("an image workload");
    let labels: Vec<&str> = workloads[image]["params"]["places"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["label"].as_str().unwrap())
        .collect();
    assert_eq!(labels, ["host folder", "raw-sparse", "qcow2 64 KiB"]);
    // Its places' records follow it, measured by it, each with items.
    for record in &workloads[image + 1..] {
        assert_eq!(record["measured_by"], image, "{}", record["kind"]);
        assert!(!record["items"].as_array().unwrap().is_empty());
    }
    assert_clean(dir.path(), "after the profile");
}

#[test]
fn a_daemon_dying_mid_run_fails_the_run_and_leaves_nothing() {
    if !root_or_skip(
        "a_daemon_dying_mid_run_fails_the_run_and_leaves_nothing",
        NEEDS,
    ) {
        return;
    }
    let _lock = rig::exclusive();
    let dir = common::disk_tempdir();
    let elsewhere = common::disk_tempdir();
    let db = elsewhere.path().join("results.db");
    let child = start(dir.path(), &db);
    wait_for_container(dir.path());
    std::thread::sleep(Duration::from_millis(500));
    // The qcow2 driver crashes: everything on top of it fails with it.
    let killed = Command::new("pkill")
        .args([
            "-KILL",
            "-f",
            &format!("qemu-storage-daemon.*{}", dir.path().display()),
        ])
        .status()
        .unwrap();
    assert!(killed.success(), "no daemon of the run was found");
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(3), "{stderr}");
    assert!(stderr.contains("stored as incomplete"), "{stderr}");
    assert_clean(dir.path(), "after the daemon died");
    let doc = stored_run(&db, 1);
    assert_eq!(doc["status"], "incomplete");
    assert!(
        doc["incomplete_reason"]
            .as_str()
            .unwrap()
            .starts_with("error:"),
        "{}",
        doc["incomplete_reason"]
    );
}

/// Runs `ratelab image` with `args` in `command`, which must fail with `code` and say
/// `words`, leaving `dir` as it was.
fn refused(mut command: Command, dir: &Path, args: &[&str], code: i32, words: &str) {
    let output = command
        .arg("image")
        .arg(dir)
        .args(args)
        .arg("--no-store")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(code), "{args:?}: {stderr}");
    assert!(stderr.contains(words), "{args:?}: {stderr}");
    assert!(files_in(dir).is_empty(), "{args:?}: {:?}", files_in(dir));
}

#[test]
fn refusals_name_the_cause_and_make_nothing() {
    let dir = common::disk_tempdir();
    let target = dir.path();
    let bin = common::bin();
    // Bad input: exit 2, naming the flag.
    refused(
        ratelab(),
        target,
        &["--cluster-size", "3K"],
        2,
        "--cluster-size 3072",
    );
    refused(ratelab(), target, &["--format", "qcow3"], 2, "qcow3");
    refused(
        ratelab(),
        target,
        &["--format", "raw-sparse", "--cluster-size", "4K"],
        2,
        "--cluster-size applies to qcow2",
    );
    refused(
        ratelab(),
        target,
        &["--fs", "xfs", "--image-size", "100M", "--sizes", "1M"],
        2,
        "xfs",
    );
    if !common::is_root() {
        refused(ratelab(), target, &[], 3, "need root");
        return;
    }
    // The environment: exit 3 before anything is made.
    let nobody = common::as_nobody(&bin);
    let open = tempfile::tempdir_in(target.parent().unwrap()).unwrap();
    std::fs::set_permissions(
        open.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o777),
    )
    .unwrap();
    refused(nobody, open.path(), &[], 3, "need root");
    // A PATH with every tool but qemu-storage-daemon.
    let tools = tempfile::tempdir().unwrap();
    for tool in [
        "losetup",
        "mount",
        "umount",
        "mkfs.ext4",
        "e2fsck",
        "qemu-img",
    ] {
        let found = Command::new("sh")
            .args(["-c", &format!("command -v {tool}")])
            .output()
            .unwrap();
        let path = String::from_utf8_lossy(&found.stdout).trim().to_string();
        std::os::unix::fs::symlink(path, tools.path().join(tool)).unwrap();
    }
    let mut without_daemon = Command::new(&bin);
    common::isolated(&mut without_daemon).env("PATH", tools.path());
    refused(without_daemon, target, &[], 3, "qemu-utils");
    refused(
        ratelab(),
        target,
        &["--format", "raw-prealloc", "--image-size", "100T"],
        3,
        "not enough free space",
    );
}
