//! `ratelab why --what-if` on rigs of known truth: a reader of a loop device held to
//! 100 MiB/s is limited by that disk and not by its CPU; a compressor of a cached file
//! by its CPU and never waits on a disk; `sleep` by nothing; as a user with no cgroup
//! of their own only the reads made free are measured, with a delegated one the CPU
//! too; Ctrl-C in a round leaves no cgroup and nothing running; a command that sends
//! then receives over a shaped link moves half with each way's speed.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::rig::{self, MIB, SlowDisk, Throttle};
use common::{RIG_NEEDS, root_or_skip};
use serde_json::Value;

/// How far a sensitivity may stray from the rig's truth (issue 50).
const WITHIN: f64 = 0.15;

/// The document of `command` (ratelab why … run by it), which must succeed.
fn document(mut command: Command, out: &Path) -> Value {
    let output = command.output().expect("start ratelab why");
    assert!(
        output.status.success(),
        "ratelab why failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    common::json(&std::fs::read(out).expect("why wrote its document"))
}

/// The words before the command: `why --json --out OUT --no-store --what-if STEPS
/// --what-if-rounds 2 --`.
fn why_args(out: &Path, steps: &str) -> Vec<String> {
    [
        "why",
        "--json",
        "--out",
        out.to_str().unwrap(),
        "--no-store",
        "--what-if",
        steps,
        "--what-if-rounds",
        "2",
        "--",
    ]
    .map(String::from)
    .to_vec()
}

/// The measured what-if of `step` (`disk_read`), where there is one.
fn measured<'a>(doc: &'a Value, step: &str) -> Option<&'a Value> {
    doc["workloads"][0]["summary"]["measured"]
        .as_array()?
        .iter()
        .find(|m| m["step"] == step)
}

/// The `what_if` items of `step`, a round each.
fn rounds<'a>(doc: &'a Value, step: &str) -> Vec<&'a Value> {
    doc["workloads"][0]["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["op"] == "what_if" && i["step"] == step)
        .collect()
}

/// The sensitivity of `step`, which must have been measured over its rounds, as its
/// median ratio gives it: (ratio − 1) / (factor − 1), not held between 0 and 1 as the
/// stored one is, so that a slowdown of more than the factor shows.
fn sensitivity(doc: &Value, step: &str) -> f64 {
    let m = measured(doc, step).unwrap_or_else(|| {
        panic!(
            "{step} was not measured: {}",
            doc["workloads"][0]["context"]["what_if_skipped"]
        )
    });
    assert_eq!(m["rounds"], 2, "{m}");
    let rounds = rounds(doc, step);
    assert_eq!(rounds.len(), 2, "{step}: every round is an item");
    common::say(&format!(
        "{step}: {:.2}x the time changed ({:.2}-{:.2}) with {}",
        m["ratio"].as_f64().unwrap(),
        m["ratio_min"].as_f64().unwrap(),
        m["ratio_max"].as_f64().unwrap(),
        rounds[0]["changed_by"]
    ));
    for round in rounds.iter().filter(|r| r["disturbed"].is_string()) {
        common::say(&format!(
            "{step}: round {} disturbed: {}",
            round["round"], round["disturbed"]
        ));
    }
    (m["ratio"].as_f64().unwrap() - 1.0) / (m["factor"].as_f64().unwrap() - 1.0)
}

/// `got`, a sensitivity of `step`, lies in `range`; the document's figure is named
/// where it does not.
fn within(doc: &Value, step: &str, got: f64, range: std::ops::RangeInclusive<f64>) {
    assert!(
        range.contains(&got),
        "{step} {got:.2}, outside {range:?}: {}",
        measured(doc, step).unwrap()
    );
}

/// The share of the wall time the unchanged runs of `step`'s rounds spent on a CPU,
/// by the kernel's count (their CPU seconds from wait4), the most of any round.
fn cpu_share(doc: &Value, step: &str) -> f64 {
    rounds(doc, step)
        .into_iter()
        .map(|i| i["baseline_cpu_s"].as_f64().unwrap() / i["baseline_wall_s"].as_f64().unwrap())
        .fold(0.0, f64::max)
}

/// The range within [`WITHIN`] of a rig's `truth`.
fn near(truth: f64) -> std::ops::RangeInclusive<f64> {
    truth - WITHIN..=truth + WITHIN
}

/// Why `step` was not measured, where it was not.
fn not_measured(doc: &Value, step: &str) -> Option<String> {
    doc["workloads"][0]["context"]["what_if_skipped"]
        .as_array()?
        .iter()
        .find(|s| s["step"] == step)
        .map(|s| s["why"].as_str().unwrap().to_string())
}

/// No cgroup of ratelab's what-ifs is left in any hierarchy.
fn no_cgroup_left() {
    let left: Vec<String> = walkdir_cgroups(Path::new("/sys/fs/cgroup"), 0)
        .into_iter()
        .filter(|p| p.contains("ratelab-what-if-"))
        .collect();
    assert!(left.is_empty(), "cgroups left: {left:?}");
}

/// The folders under a cgroup mount, a few levels down.
fn walkdir_cgroups(dir: &Path, depth: usize) -> Vec<String> {
    let mut out = Vec::new();
    if depth > 4 {
        return out;
    }
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if entry
            .file_type()
            .is_ok_and(|t| t.is_dir() && !t.is_symlink())
        {
            out.push(path.display().to_string());
            out.extend(walkdir_cgroups(&path, depth + 1));
        }
    }
    out
}

/// A loop device in memory held to 100 MiB/s reading, with one text file on it.
fn reading_rig(bytes: usize) -> (SlowDisk, Throttle, PathBuf) {
    let disk = SlowDisk::in_memory(1 << 30);
    let throttle = Throttle::new();
    throttle.limit(&disk, 50 * MIB, 100 * MIB);
    let path = disk.path().join("big.txt");
    common::write_text(&path, bytes);
    (disk, throttle, path)
}

#[test]
fn a_reader_of_a_throttled_disk_is_measured_limited_by_it_and_not_by_its_cpu() {
    let test = "a_reader_of_a_throttled_disk_is_measured";
    if !root_or_skip(test, RIG_NEEDS) {
        return;
    }
    let _lock = rig::exclusive();
    let (disk, throttle, file) = reading_rig(64 << 20);
    let device = disk.device().trim_start_matches("/dev/").to_string();
    let out = disk.scratch().join("why.json");
    rig::evict(&file);
    let mut command = throttle.command(common::bin());
    command
        .args(why_args(&out, "disk_read,cpu"))
        .args(["cat", file.to_str().unwrap()])
        .stdout(std::process::Stdio::null());
    let doc = document(command, &out);
    let disk_read = sensitivity(&doc, "disk_read");
    let cpu = sensitivity(&doc, "cpu");
    common::say(&format!(
        "{test}: disk_read {disk_read:.2}, cpu {cpu:.2} (truth 1 and 0)"
    ));
    let m = measured(&doc, "disk_read").unwrap();
    assert_eq!(m["where"], device, "{m}");
    within(&doc, "disk_read", disk_read, near(1.0));
    // Its CPU's truth lies between 0 (short bursts a quota never holds) and the share
    // of its wall it spent on a CPU, by the kernel's count of its unchanged runs.
    let on_cpu = cpu_share(&doc, "cpu");
    common::say(&format!(
        "{test}: on a CPU {on_cpu:.2} of its unchanged runs"
    ));
    within(&doc, "cpu", cpu, -WITHIN..=on_cpu + WITHIN);
    // Twice as fast, the command would be about twice as fast: it is all disk.
    let speedup = m["speedup"].as_f64().unwrap();
    assert!((1.74..=2.0).contains(&speedup), "{m}");
    assert_eq!(
        doc["workloads"][0]["summary"]["measured"][0]["step"], "disk_read",
        "the most sensitive step comes first"
    );
    drop(throttle);
    no_cgroup_left();
}

#[test]
fn a_compressor_of_a_cached_file_is_measured_limited_by_its_cpu() {
    let test = "a_compressor_of_a_cached_file_is_measured";
    if !root_or_skip(test, "it slows the CPU with a cgroup") || !common::have_or_skip(test, "zstd")
    {
        return;
    }
    // One at a time: each checks that no what-if cgroup is left.
    let _lock = rig::exclusive();
    let dir = common::nobody_tempdir(0o755);
    let file = dir.path().join("text.txt");
    common::write_text(&file, 3 << 20);
    let _ = std::fs::read(&file);
    let out = dir.path().join("why.json");
    let mut command = common::ratelab();
    command
        .args(why_args(&out, "cpu,disk_read"))
        .args(["zstd", "-19", "-T1", "-q", "-f", "-o", "/dev/null"])
        .arg(&file);
    let doc = document(command, &out);
    let cpu = sensitivity(&doc, "cpu");
    common::say(&format!("{test}: cpu {cpu:.2} (truth 1)"));
    within(&doc, "cpu", cpu, near(1.0));
    // It never waited on a disk: there is nothing to slow, and the run says so.
    let why = not_measured(&doc, "disk_read").expect("disk_read is said not measured");
    assert!(why.contains("not seen waiting on a block device"), "{why}");
    no_cgroup_left();
}

#[test]
fn a_round_beside_other_work_is_run_again_and_said_disturbed() {
    let test = "a_round_beside_other_work";
    if !root_or_skip(test, "it slows the CPU with a cgroup") {
        return;
    }
    let _lock = rig::exclusive();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("why.json");
    // Other work of the test's own, a CPU's worth, for the whole of the what-ifs.
    let mut yes = Command::new("yes")
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("start yes");
    let started = std::time::Instant::now();
    let mut command = common::ratelab();
    command.args(why_args(&out, "cpu")).args(["sleep", "0.6"]);
    let doc = document(command, &out);
    let took = started.elapsed().as_secs_f64();
    let _ = yes.kill();
    let _ = yes.wait();
    let rounds = rounds(&doc, "cpu");
    assert_eq!(rounds.len(), 2, "a round an item, reruns not: {rounds:?}");
    for round in &rounds {
        let said = round["disturbed"].as_str().unwrap_or_default();
        assert!(
            said.starts_with("run 3 times") && said.contains("other processes used"),
            "{round}"
        );
    }
    // The watched run and 2 rounds of 2 runs, each round run 3 times: 13 runs.
    assert!(took >= 13.0 * 0.6, "{took:.1} s for 13 runs of sleep 0.6");
    let verdicts = doc["verdicts"].as_array().unwrap();
    let disturbed = verdicts
        .iter()
        .filter(|v| v["code"] == "what_if_disturbed")
        .count();
    assert_eq!(disturbed, 2, "{verdicts:?}");
    // Sleep's time is the clock's: other work does not move it.
    let cpu = sensitivity(&doc, "cpu");
    within(&doc, "cpu", cpu, -0.05..=0.05);
}

#[test]
fn sleep_is_limited_by_nothing_a_what_if_slows() {
    let test = "sleep_is_limited_by_nothing";
    if !root_or_skip(test, "it slows the CPU with a cgroup") {
        return;
    }
    // One at a time: each checks that no what-if cgroup is left.
    let _lock = rig::exclusive();
    let dir = common::nobody_tempdir(0o755);
    let out = dir.path().join("why.json");
    let mut command = common::ratelab();
    command.args(why_args(&out, "cpu")).args(["sleep", "1"]);
    let doc = document(command, &out);
    let cpu = sensitivity(&doc, "cpu");
    within(&doc, "cpu", cpu, -0.05..=0.05);
    // Unnamed, no step of sleep is one a what-if changes.
    let mut command = common::ratelab();
    command
        .args(why_args(&out, "").into_iter().filter(|a| !a.is_empty()))
        .args(["sleep", "0.3"]);
    let doc = document(command, &out);
    assert_eq!(doc["workloads"][0]["summary"]["measured"], Value::Null);
    let items = doc["workloads"][0]["items"].as_array().unwrap();
    assert!(!items.iter().any(|i| i["op"] == "what_if"));
}

#[test]
fn without_a_cgroup_of_its_own_a_user_gets_the_reads_made_free_and_the_rest_named() {
    let test = "without_a_cgroup_a_user_gets_reads_free";
    if !root_or_skip(
        test,
        "it runs ratelab as the user nobody beside a loop device",
    ) {
        return;
    }
    let _lock = rig::exclusive();
    // Not throttled: the loop device in memory is fast, but a read from it still waits
    // on it; made free, the reads are memory copies.
    let disk = SlowDisk::in_memory(1 << 30);
    let file = disk.path().join("big.txt");
    common::write_text(&file, 256 << 20);
    rig::evict(&file);
    let dir = common::nobody_tempdir(0o777);
    let out = dir.path().join("why.json");
    let mut command = common::as_nobody(common::bin());
    command
        .args(why_args(&out, "cpu,reads_free"))
        .args(["cat", file.to_str().unwrap()])
        .stdout(std::process::Stdio::null());
    let doc = document(command, &out);
    let why = not_measured(&doc, "cpu").expect("cpu is said not measured");
    assert!(
        why.contains("needs root, or a delegated cgroup"),
        "the refusal says what would allow it: {why}"
    );
    let free = measured(&doc, "reads_free").expect("reads_free runs without root");
    assert_eq!(free["rounds"], 2, "{free}");
    assert!(
        free["ratio"].as_f64().unwrap() < 0.9,
        "cached reads are faster: {free}"
    );
    no_cgroup_left();
}

#[test]
fn a_user_with_a_delegated_cgroup_gets_the_cpu_what_if() {
    let test = "a_user_with_a_delegated_cgroup";
    if !root_or_skip(test, "it makes a cgroup for the user nobody")
        || !common::have_or_skip(test, "zstd")
    {
        return;
    }
    // One at a time: each checks that no what-if cgroup is left.
    let _lock = rig::exclusive();
    let Some(delegated) = Delegated::new() else {
        common::skip(
            test,
            "neither cgroup v1's cpu controller nor v2's is mounted here",
        );
        return;
    };
    let dir = common::nobody_tempdir(0o777);
    let file = dir.path().join("text.txt");
    common::write_text(&file, 2 << 20);
    let out = dir.path().join("why.json");
    // Root puts the shell in the delegated group, then it becomes nobody.
    let mut command = Command::new("sh");
    common::isolated(&mut command)
        .args(["-c", "echo $$ > \"$1\" && shift && exec \"$@\"", "sh"])
        .arg(delegated.procs())
        .args([
            "setpriv",
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
        ])
        .arg(common::bin())
        .args(why_args(&out, "cpu"))
        .args(["zstd", "-19", "-T1", "-q", "-f", "-o", "/dev/null"])
        .arg(&file);
    let doc = document(command, &out);
    let cpu = sensitivity(&doc, "cpu");
    within(&doc, "cpu", cpu, near(1.0));
    drop(delegated);
    no_cgroup_left();
}

/// A cgroup of the cpu controller handed to the user nobody, removed when dropped.
struct Delegated {
    path: PathBuf,
}

impl Delegated {
    fn new() -> Option<Delegated> {
        let name = format!("ratelab-test-delegated-{}", std::process::id());
        let v1 = Path::new("/sys/fs/cgroup/cpu");
        let path = if v1.join("cpu.cfs_quota_us").exists() {
            v1.join(name)
        } else if Path::new("/sys/fs/cgroup/cgroup.controllers").exists() {
            let root = Path::new("/sys/fs/cgroup");
            let _ = std::fs::write(root.join("cgroup.subtree_control"), "+cpu");
            root.join(name)
        } else {
            return None;
        };
        std::fs::create_dir(&path).ok()?;
        // Delegation, as systemd does it: the folder and the files that move processes
        // and hand controllers down are the user's.
        let mut files = vec![path.clone()];
        for file in [
            "cgroup.procs",
            "tasks",
            "cgroup.subtree_control",
            "cgroup.threads",
        ] {
            if path.join(file).exists() {
                files.push(path.join(file));
            }
        }
        for file in files {
            std::os::unix::fs::chown(&file, Some(65534), Some(65534)).ok()?;
        }
        let delegated = Delegated { path };
        if !v1.join("cpu.cfs_quota_us").exists() {
            // v2: processes live in a leaf; the delegated folder hands cpu down.
            std::fs::create_dir(delegated.path.join("leaf")).ok()?;
            std::os::unix::fs::chown(
                delegated.path.join("leaf/cgroup.procs"),
                Some(65534),
                Some(65534),
            )
            .ok()?;
            std::fs::write(delegated.path.join("cgroup.subtree_control"), "+cpu").ok()?;
        }
        Some(delegated)
    }

    /// Where a process is put to run in it.
    fn procs(&self) -> PathBuf {
        let leaf = self.path.join("leaf");
        if leaf.exists() {
            leaf.join("cgroup.procs")
        } else {
            self.path.join("cgroup.procs")
        }
    }
}

impl Drop for Delegated {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir(self.path.join("leaf"));
        let _ = std::fs::remove_dir(&self.path);
    }
}

#[test]
fn ctrl_c_in_a_what_if_round_leaves_no_cgroup_and_nothing_running() {
    let test = "ctrl_c_in_a_what_if_round";
    if !root_or_skip(test, "it slows the CPU with a cgroup") {
        return;
    }
    // One at a time: each checks that no what-if cgroup is left.
    let _lock = rig::exclusive();
    let dir = common::nobody_tempdir(0o755);
    let db = dir.path().join("results.db");
    let mut command = common::ratelab();
    let child = command
        .args([
            "why",
            "--db",
            db.to_str().unwrap(),
            "--what-if",
            "cpu",
            "--",
        ])
        .args(["sh", "-c", "while :; do :; done & sleep 0.5; kill $!"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start ratelab why");
    let ratelab = child.id();
    // Wait until a changed round runs: a what-if cgroup holds the command.
    let until = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let group = loop {
        let found = walkdir_cgroups(Path::new("/sys/fs/cgroup"), 0)
            .into_iter()
            .find(|p| p.contains(&format!("ratelab-what-if-{ratelab}-")));
        if let Some(group) = found
            && !std::fs::read_to_string(Path::new(&group).join("cgroup.procs"))
                .unwrap_or_default()
                .trim()
                .is_empty()
        {
            break group;
        }
        assert!(std::time::Instant::now() < until, "no what-if round began");
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    common::stop_with(child, rustix::process::Signal::INT);
    assert!(!Path::new(&group).exists(), "{group} was left");
    no_cgroup_left();
    let left: Vec<u32> = std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).contains("while :; do :; done"))
        })
        .collect();
    assert!(
        left.is_empty(),
        "the command's loop is left running: {left:?}"
    );
    let run = common::stored_run(&db, 1);
    assert_eq!(run["status"], "incomplete", "{}", run["status"]);
}

#[test]
fn a_pipeline_from_a_throttled_disk_is_measured_limited_by_the_read() {
    let test = "a_pipeline_from_a_throttled_disk_is_measured";
    if !root_or_skip(test, RIG_NEEDS) || !common::have_or_skip(test, "zstd") {
        return;
    }
    let _lock = rig::exclusive();
    // zstd -1 compresses text at 150 MB/s and more here: a read at 25 MiB/s paces it.
    let disk = SlowDisk::in_memory(1 << 30);
    let throttle = Throttle::new();
    throttle.limit(&disk, 50 * MIB, 25 * MIB);
    let file = disk.path().join("big.txt");
    common::write_text(&file, 48 << 20);
    rig::evict(&file);
    let out = disk.scratch().join("why.json");
    let pipeline = format!("cat {} | zstd -1 -T1 > /dev/null", file.display());
    let mut command = throttle.command(common::bin());
    command
        .args(why_args(&out, "disk_read"))
        .args(["sh", "-c", &pipeline]);
    let doc = document(command, &out);
    let disk_read = sensitivity(&doc, "disk_read");
    common::say(&format!("{test}: disk_read {disk_read:.2} (truth 1)"));
    // zstd -1 runs many times faster than the device: the reads are the whole time.
    within(&doc, "disk_read", disk_read, near(1.0));
}

#[test]
fn make_of_a_c_project_is_measured_limited_by_its_cpu() {
    let test = "make_of_a_c_project_is_measured";
    if !root_or_skip(test, "it slows the CPU with a cgroup")
        || !common::have_or_skip(test, "make")
        || !common::have_or_skip(test, "cc")
    {
        return;
    }
    let _lock = rig::exclusive();
    let tree = common::disk_tempdir();
    let source = tree.path().join("lz4");
    let copied = Command::new("cp")
        .arg("-a")
        .arg(common::registry_crate("lz4-sys-").join("liblz4"))
        .arg(&source)
        .status()
        .expect("run cp");
    assert!(copied.success());
    let programs = source.join("programs");
    let build = format!(
        "make -s -C {0} clean >/dev/null && make -s -j2 -C {0} lz4 >/dev/null",
        programs.display()
    );
    let out = tree.path().join("why.json");
    let mut command = common::ratelab();
    command
        .args(why_args(&out, "cpu"))
        .args(["sh", "-c", &build]);
    let doc = document(command, &out);
    let cpu = sensitivity(&doc, "cpu");
    common::say(&format!("{test}: cpu {cpu:.2} (truth 1)"));
    // Its links and make's own work run one at a time: issue 50's floor, 0.7.
    within(&doc, "cpu", cpu, 0.7..=1.0 + WITHIN);
}

/// Write requests a second the rig allows.
const SQLITE_WRITE_IOPS: u64 = 3000;

#[test]
fn sqlite_commits_are_measured_limited_by_the_disk_s_writes_and_the_forecast_holds() {
    let test = "sqlite_commits_are_measured";
    if !root_or_skip(test, RIG_NEEDS) || !common::have_or_skip(test, "/usr/bin/python3") {
        return;
    }
    let _lock = rig::exclusive();
    let disk = SlowDisk::in_memory(256 * MIB);
    let throttle = Throttle::new();
    throttle.limit_iops(&disk, SQLITE_WRITE_IOPS, 1_000_000);
    let script = disk.scratch().join("commits.py");
    std::fs::write(&script, common::SQLITE_COMMITS).unwrap();
    let db = disk.path().join("t.db");
    let python = [
        "/usr/bin/python3",
        script.to_str().unwrap(),
        db.to_str().unwrap(),
        "1000",
    ];
    let out = disk.scratch().join("why.json");
    let mut command = throttle.command(common::bin());
    command.args(why_args(&out, "disk_write")).args(python);
    let doc = document(command, &out);
    let disk_write =
        measured(&doc, "disk_write").map_or(0.0, |m| m["sensitivity"].as_f64().unwrap());
    let forecast = measured(&doc, "disk_write").map_or(1.0, |m| m["speedup"].as_f64().unwrap());
    // The truth: the same commits with the device held to twice the requests.
    let timed = |iops: u64| {
        throttle.limit_iops(&disk, iops, 1_000_000);
        let start = std::time::Instant::now();
        let status = throttle
            .command(python[0])
            .args(&python[1..])
            .status()
            .unwrap();
        assert!(status.success());
        start.elapsed().as_secs_f64()
    };
    let mut ratios = Vec::new();
    for _ in 0..3 {
        let slow = timed(SQLITE_WRITE_IOPS);
        let fast = timed(2 * SQLITE_WRITE_IOPS);
        ratios.push(slow / fast);
    }
    ratios.sort_by(f64::total_cmp);
    let actual = ratios[1];
    common::say(&format!(
        "{test}: disk_write {disk_write:.2}; twice as fast: {forecast:.2}x forecast, {actual:.2}x measured on the rig"
    ));
    let disk_write = sensitivity(&doc, "disk_write");
    within(&doc, "disk_write", disk_write, 0.7..=1.0 + WITHIN);
    let off = forecast / actual;
    assert!(
        (0.85..=1.15).contains(&off),
        "forecast {forecast:.2} against {actual:.2}"
    );
}

#[test]
fn a_sender_then_receiver_over_a_shaped_link_is_measured_half_limited_by_each_way() {
    let test = "a_sender_then_receiver_over_a_shaped_link";
    if !root_or_skip(test, "it builds two network namespaces joined by veth")
        || !common::have_or_skip(test, "iperf3")
    {
        return;
    }
    let _lock = rig::exclusive();
    // A small burst: the link holds each transfer to its rate from the first byte, as
    // a link does, so each half of the command takes its share of the time.
    let mut link = common::netns::Link::with_burst(1500, "200mbit", "128kb");
    link.serve_iperf3(5201);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("why.json");
    let server = &link.server_address;
    let script = format!("iperf3 -c {server} -n 25M && iperf3 -c {server} -n 25M -R");
    let mut command = link.in_client(common::bin());
    command
        .args(why_args(&out, "net"))
        .args(["sh", "-c", &script])
        .stdout(std::process::Stdio::null());
    let doc = document(command, &out);
    // It sends 25 MiB, then receives 25 MiB, over one link of one rate: half its time
    // moves with each way's speed.
    for step in ["net_send", "net_receive"] {
        let s = sensitivity(&doc, step);
        common::say(&format!("{test}: {step} {s:.2} (truth 0.5)"));
        within(&doc, step, s, near(0.5));
        let m = measured(&doc, step).unwrap();
        assert_eq!(
            m["where"],
            format!("{server}:5201 via {}", link.client_namespace())
        );
        for round in rounds(&doc, step) {
            let words = round["changed_by"].as_str().unwrap();
            assert!(words.contains(&format!("{server}:5201")), "{words}");
        }
    }
    // Nothing of the holds is left: no ifb device, no clsact queue on the link.
    let left = Command::new("ip")
        .args(["netns", "exec", link.client_namespace(), "sh", "-c"])
        .arg("ip -o link show; tc qdisc show")
        .output()
        .unwrap();
    let left = String::from_utf8_lossy(&left.stdout);
    assert!(
        !left.contains("rlwi") && !left.contains("clsact"),
        "left behind: {left}"
    );
}
