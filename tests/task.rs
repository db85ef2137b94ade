//! `ratelab task compress`: the slow step is named correctly on real parts (a loop
//! device throttled to 25 MiB/s makes write the limit; tmpfs leaves compression as the
//! limit), every codec round-trips, stored disk runs are set beside the task's steps,
//! bad input is refused with the flag or path named, and Ctrl-C leaves nothing behind.

mod common;

use std::path::{Path, PathBuf};

use common::rig::{self, MIB, SlowDisk, Throttle};
use common::{entries, ratelab, refused, root_or_skip, run_json, stop_with, stored_runs};
use serde_json::Value;

/// The rig's write rate: slow enough that writing, not compressing, sets the pace.
/// The measured-limit tests compress with 2 threads: on this 2-core VM one thread of
/// level 3 ran anywhere from 117 to 180 MB/s, too near the rigs' rates for a limit and
/// its gain to stand out of one round's noise; two ran at 250-300 MB/s then, and at
/// 136-161 MB/s on the same VM a month later (the build of that time too) and on CI's,
/// where a rig at 50 MiB/s (a compressed stream of half that, so 100 MB/s of source)
/// left freeing the limit a gain of 1.23-1.44x. At half those rates the gain is about 3x.
const WRITE_BPS: u64 = 25 * MIB;
/// The rig's read rate, for a source on a slow disk.
const READ_BPS: u64 = 50 * MIB;
/// How far the write step may stray from the rig's rate.
const TOLERANCE: f64 = 0.15;
/// How far a measured gain's median over the rounds may stray from the modelled one:
/// the two are separate passes of the codec, a second or two each, and on this VM the
/// codec's passes within one run on tmpfs ran 96-147 MB/s at 2 threads. The check
/// catches a model off by half, not one pass's luck.
const MODEL_TOLERANCE: f64 = 0.5;

/// A scratch folder on tmpfs, where reads and writes run at memory speed.
fn memory_dir() -> Option<tempfile::TempDir> {
    let shm = Path::new("/dev/shm");
    shm.is_dir()
        .then(|| tempfile::tempdir_in(shm).ok())
        .flatten()
}

fn task(file: &Path, out: &Path, extra: &[&str]) -> std::process::Command {
    let mut command = ratelab();
    command
        .args(["task", "compress"])
        .arg(file)
        .arg("--out")
        .arg(out)
        .args(["--json", "-q"])
        .args(extra);
    command
}

fn per_threads(doc: &Value) -> Vec<Value> {
    doc["workloads"][0]["summary"]["per_threads"]
        .as_array()
        .unwrap()
        .clone()
}

fn step_rate(point: &Value, op: &str) -> f64 {
    point["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["op"] == op)
        .unwrap()["bytes_per_sec"]
        .as_f64()
        .unwrap()
}

/// Runs a task `ROUNDS` times and checks that `op` is the measured limit at every
/// thread count each time, and that its measured gain, the median over the rounds, is
/// within [`MODEL_TOLERANCE`] of the modelled one (one round's steps and what-ifs are
/// one sample each, and a 2-core VM moves a single one by up to a quarter: nine quiet
/// rounds of the read test were off by -14% to +20%; later, with the compressor slower
/// and the rigs at half the rate, five rounds of the write test were off by +2% to +40%
/// and of the read test by -1% to +55%, a median of +34%, where the measured limit and
/// its gain held every time). Gives the last run.
fn measured_limit_is(run: impl Fn() -> Value, op: &str) -> (Value, bool) {
    const ROUNDS: usize = 3;
    let mut off: std::collections::BTreeMap<u64, Vec<f64>> = Default::default();
    let mut last = Value::Null;
    let mut checked = true;
    for _ in 0..ROUNDS {
        checked &= common::up_to_three_tries(&format!("the measured limit is {op}"), |_| {
            let load = common::load::Load::start();
            last = run();
            // Beside other work on two cores the codec gets less of them, and which step
            // limits moves with it: a round the test saw other work in is that, not a
            // figure. A what-if ratelab sets aside as unstable has no measured gain:
            // where it is the limit's own, the check below fails on it.
            common::check(load.disturbed(), || {
                for point in per_threads(&last) {
                    let measured = point["measured_speedup_if_free"][op]
                        .as_f64()
                        .unwrap_or_else(|| panic!("{op} free has no measured gain: {point}"));
                    let model = point["speedup_if_free"][op].as_f64().unwrap();
                    eprintln!(
                        "{} threads: the measured limit is {}; {op} free: {measured:.2}x measured, {model:.2}x modelled; the whole task at {:.0} MB/s",
                        point["threads"],
                        point["rate_limiting_step"],
                        step_rate(&point, "total") / 1e6
                    );
                    assert_eq!(point["rate_limiting_step"], op, "{point}");
                    assert!(measured > 1.3, "{op} free gained little: {point}");
                    off.entry(point["threads"].as_u64().unwrap())
                        .or_default()
                        .push(measured / model - 1.0);
                }
                common::Try::Checked
            })
        });
    }
    for (threads, mut offs) in off {
        offs.sort_by(f64::total_cmp);
        let median = offs[offs.len() / 2];
        assert!(
            median.abs() <= MODEL_TOLERANCE,
            "{threads} threads: {op} free measured {:+.0}% off the model (median of {offs:?})",
            median * 100.0
        );
    }
    (last, checked)
}

/// A task at 2 threads inside `throttle`, on a file of `size` it makes at `source`,
/// writing in `out`.
fn throttled_task(throttle: &Throttle, source: &Path, out: &Path, size: &str) -> Value {
    run_json(
        throttle
            .command(common::bin())
            .args(["task", "compress"])
            .arg(source)
            .arg("--out")
            .arg(out)
            .args(["--make-file", size, "--threads", "2"])
            .args(["--json", "-q", "--no-store"]),
    )
}

fn round_trips(doc: &Value) -> Vec<bool> {
    doc["workloads"][0]["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["op"] == "total")
        .map(|i| i["round_trip_ok"] == true)
        .collect()
}

#[test]
fn a_throttled_destination_makes_write_the_limit() {
    if !root_or_skip(
        "a_throttled_destination_makes_write_the_limit",
        "a loop device and a blkio cgroup",
    ) {
        return;
    }
    let Some(memory) = memory_dir() else {
        common::skip(
            "a_throttled_destination_makes_write_the_limit",
            "no /dev/shm for the source file",
        );
        return;
    };
    let _lock = rig::exclusive();
    let disk = SlowDisk::new(512 * MIB);
    let throttle = Throttle::new();
    throttle.limit(&disk, WRITE_BPS, 400 * MIB);
    let source = memory.path().join("source.dat");
    let (doc, checked) = measured_limit_is(
        || throttled_task(&throttle, &source, disk.path(), "64M"),
        "write",
    );
    for point in per_threads(&doc) {
        let write = step_rate(&point, "write") / WRITE_BPS as f64;
        eprintln!(
            "{} threads: the limit is {}, write at {write:.3}x the rig's rate, compress at {:.0} MB/s",
            point["threads"],
            point["rate_limiting_step"],
            step_rate(&point, "compress") / 1e6
        );
        // Which step limits holds where the last run was checked (measured_limit_is
        // said which way it passed); the write step alone keeps to the rig's rate
        // either way.
        if checked {
            assert_eq!(point["rate_limiting_step"], "write", "{point}");
        }
        assert!((write - 1.0).abs() <= TOLERANCE, "{point}");
    }
    assert_eq!(round_trips(&doc), [true]);
    assert!(
        !checked
            || doc["verdicts"]
                .as_array()
                .unwrap()
                .iter()
                .any(|v| v["code"] == "rate_limiting_step"
                    && v["message"].as_str().unwrap().contains("write limits")),
        "{}",
        doc["verdicts"]
    );
    assert!(
        entries(disk.path()).iter().all(|e| e == "lost+found"),
        "{:?}",
        entries(disk.path())
    );
    assert!(
        entries(memory.path()).is_empty(),
        "{:?}",
        entries(memory.path())
    );
}

#[test]
fn a_throttled_source_makes_read_the_measured_limit() {
    let test = "a_throttled_source_makes_read_the_measured_limit";
    if !root_or_skip(test, "a loop device and a blkio cgroup") {
        return;
    }
    let Some(memory) = memory_dir() else {
        common::skip(test, "no /dev/shm for the output");
        return;
    };
    let _lock = rig::exclusive();
    let disk = SlowDisk::new(512 * MIB);
    let throttle = Throttle::new();
    throttle.limit(&disk, 400 * MIB, READ_BPS);
    let source = disk.path().join("source.dat");
    let (doc, _) = measured_limit_is(
        || throttled_task(&throttle, &source, memory.path(), "96M"),
        "read",
    );
    for point in per_threads(&doc) {
        let read = step_rate(&point, "read") / READ_BPS as f64;
        assert!(
            (read - 1.0).abs() <= TOLERANCE,
            "read at {read:.3}x: {point}"
        );
    }
    assert_eq!(round_trips(&doc), [true]);
    assert!(
        entries(disk.path()).iter().all(|e| e == "lost+found"),
        "{:?}",
        entries(disk.path())
    );
    assert!(
        entries(memory.path()).is_empty(),
        "{:?}",
        entries(memory.path())
    );
}

#[test]
fn decompressing_between_two_throttles_gains_by_freeing_write_what_their_rates_say() {
    let test = "decompressing_between_two_throttles_gains_by_freeing_write_what_their_rates_say";
    if !root_or_skip(test, "a loop device and a blkio cgroup") {
        return;
    }
    let Some(memory) = memory_dir() else {
        common::skip(test, "no /dev/shm for the source file");
        return;
    };
    let _lock = rig::exclusive();
    // The compressed copy is made, read and decompressed on a disk that reads its bytes
    // at READ and writes the output at WRITE; one zstd thread decompresses at hundreds
    // of MB/s, so the two throttles alone set the task's pace: write limits, and with
    // it free the task reads compressed bytes at READ, each standing for `ratio` bytes
    // of the file. The what-if's gain is then the rigs' figure, not a codec's pass.
    const READ: u64 = 20 * MIB;
    const WRITE: u64 = 10 * MIB;
    let disk = SlowDisk::in_memory(512 * MIB);
    let throttle = Throttle::new();
    throttle.limit(&disk, WRITE, READ);
    let source = memory.path().join("source.dat");
    common::up_to_three_tries(test, |_| {
        let load = common::load::Load::start();
        let doc = run_json(
            throttle
                .command(common::bin())
                .args(["task", "compress"])
                .arg(&source)
                .arg("--out")
                .arg(disk.path())
                .args(["--make-file", "64M", "--decompress"])
                .args(["--json", "-q", "--no-store"]),
        );
        assert_eq!(round_trips(&doc), [true]);
        let point = &per_threads(&doc)[0];
        // Bytes of the file over bytes of its compressed copy: counts, not timings.
        let ratio = point["ratio"].as_f64().unwrap();
        let truth = READ as f64 * ratio / WRITE as f64;
        let measured = point["measured_speedup_if_free"]["write"].as_f64();
        eprintln!(
            "{test}: the limit is {}; write free {measured:?}x measured, {truth:.2}x by the rigs (ratio {ratio:.2})",
            point["rate_limiting_step"]
        );
        common::check(load.disturbed(), || {
            assert_eq!(point["rate_limiting_step"], "write", "{point}");
            let measured = measured.unwrap_or_else(|| panic!("no measured gain: {point}"));
            assert!(
                (measured / truth - 1.0).abs() <= 0.1,
                "write free gained {measured:.2}x where the rigs give {truth:.2}x: {point}"
            );
            common::Try::Checked
        })
    });
    assert!(
        entries(disk.path()).iter().all(|e| e == "lost+found"),
        "{:?}",
        entries(disk.path())
    );
}

#[test]
fn on_tmpfs_compression_is_the_limit_and_every_codec_round_trips() {
    let Some(memory) = memory_dir() else {
        common::skip(
            "on_tmpfs_compression_is_the_limit_and_every_codec_round_trips",
            "no /dev/shm to stand for storage at memory speed",
        );
        return;
    };
    let _lock = rig::exclusive();
    let source = memory.path().join("source.dat");
    let doc = run_json(&mut task(
        &source,
        memory.path(),
        &["--make-file", "64M", "--threads", "1,2", "--no-store"],
    ));
    for point in per_threads(&doc) {
        eprintln!(
            "{} threads on tmpfs: the limit is {}",
            point["threads"], point["rate_limiting_step"]
        );
        assert_eq!(point["rate_limiting_step"], "compress", "{point}");
        let ratio = point["ratio"].as_f64().unwrap();
        assert!((1.6..2.6).contains(&ratio), "{point}");
    }
    assert_eq!(round_trips(&doc), [true, true]);
    for (codec, extra) in [
        ("lz4", "--threads=2"),
        ("xz", "--level=1"),
        ("zstd", "--decompress"),
    ] {
        let doc = run_json(&mut task(
            &source,
            memory.path(),
            &["--make-file", "8M", "--codec", codec, extra, "--no-store"],
        ));
        let trips = round_trips(&doc);
        assert!(
            !trips.is_empty() && trips.iter().all(|&ok| ok),
            "{codec} {extra}: {doc}"
        );
        let mut ops: Vec<&str> = doc["workloads"][0]["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["op"].as_str().unwrap())
            .collect();
        let middle = if extra == "--decompress" {
            "decompress"
        } else {
            "compress"
        };
        // The transform alone is timed up to three times, one after another.
        let transforms = ops
            .iter()
            .take_while(|&&op| op != "write")
            .filter(|&&op| op == middle)
            .count();
        assert!((1..=3).contains(&transforms), "{codec}: {ops:?}");
        ops.dedup();
        assert_eq!(&ops[..4], ["read", middle, "write", "total"], "{codec}");
    }
    assert!(
        entries(memory.path()).is_empty(),
        "{:?}",
        entries(memory.path())
    );
}

#[test]
fn a_stored_disk_run_of_the_destination_is_set_beside_the_write_step() {
    let Some(memory) = memory_dir() else {
        common::skip(
            "a_stored_disk_run_of_the_destination_is_set_beside_the_write_step",
            "no /dev/shm",
        );
        return;
    };
    let _lock = rig::exclusive();
    let db = memory.path().join("results.db");
    let out = memory.path().join("out");
    std::fs::create_dir(&out).unwrap();
    run_json(
        ratelab()
            .arg("disk")
            .arg(memory.path())
            .args(["--sizes", "64M", "--json", "-q", "--db"])
            .arg(&db),
    );
    let doc = run_json(
        task(
            &memory.path().join("source.dat"),
            &out,
            &["--make-file", "16M", "--threads", "1", "--db"],
        )
        .arg(&db),
    );
    let stored = &doc["workloads"][0]["context"]["disk_runs"]["write"];
    assert_eq!(stored["run_id"], 1, "{stored}");
    assert!(stored["write_bytes_per_sec"].as_f64().unwrap() > 0.0);
    let words: Vec<&str> = doc["verdicts"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|v| v["code"] == "disk_vs_task")
        .map(|v| v["message"].as_str().unwrap())
        .collect();
    assert!(
        words
            .iter()
            .any(|w| w.contains("storage series (run 1)") && w.contains("write")),
        "{words:?}"
    );
    // The task is stored, and `results show` gives the same verdicts from the database.
    let shown = common::stored_run(&db, doc["run_id"].as_i64().unwrap());
    assert_eq!(shown["verdicts"], doc["verdicts"]);
}

#[test]
fn bad_input_names_the_flag_or_path_and_changes_nothing() {
    let dir = common::disk_tempdir();
    let db = dir.path().join("results.db");
    common::earlier_run(dir.path(), &db);
    let before = stored_runs(&db);
    let file = dir.path().join("data.bin");
    std::fs::write(&file, vec![7u8; 1 << 20]).unwrap();
    let empty = dir.path().join("empty.bin");
    std::fs::write(&empty, b"").unwrap();
    let missing = dir.path().join("missing.bin");
    let f = file.to_str().unwrap();
    let cases: Vec<(Vec<&str>, i32, Vec<&str>)> = vec![
        (vec![missing.to_str().unwrap()], 3, vec!["missing.bin"]),
        (
            vec![dir.path().to_str().unwrap()],
            3,
            vec!["not a regular file"],
        ),
        (
            vec![empty.to_str().unwrap()],
            3,
            vec!["empty.bin", "--make-file"],
        ),
        (
            vec![f, "--level", "30"],
            2,
            vec!["--level 30", "zstd (1 to 22)"],
        ),
        (
            vec![f, "--codec", "xz", "--level", "10"],
            2,
            vec!["--level 10", "xz"],
        ),
        (vec![f, "--threads", "0"], 2, vec!["--threads 0"]),
        (vec![f, "--threads", "1..x"], 2, vec!["1..x"]),
        (vec![f, "--codec", "brotli"], 2, vec!["brotli"]),
        (
            vec![f, "--decompress", "--threads", "2"],
            2,
            vec!["--threads", "--decompress"],
        ),
        (
            vec![f, "--make-file", "1M"],
            3,
            vec!["data.bin", "--make-file"],
        ),
        (
            vec![missing.to_str().unwrap(), "--make-file", "0"],
            2,
            vec!["--make-file 0"],
        ),
        (
            vec![missing.to_str().unwrap(), "--make-file", "5Q"],
            2,
            vec!["5Q"],
        ),
        (
            vec![f, "--out", missing.to_str().unwrap()],
            3,
            vec!["missing.bin"],
        ),
    ];
    for (args, code, expect) in cases {
        refused(
            ratelab()
                .args(["task", "compress"])
                .args(&args)
                .arg("--db")
                .arg(&db),
            code,
            &expect,
        );
    }
    assert_eq!(stored_runs(&db), before);
    let mut left: Vec<String> = entries(dir.path());
    left.sort();
    assert_eq!(
        left,
        ["data.bin", "empty.bin", "results.db"].map(String::from),
        "{left:?}"
    );
}

#[test]
fn ctrl_c_stores_the_run_incomplete_and_removes_what_it_made() {
    let Some(memory) = memory_dir() else {
        common::skip(
            "ctrl_c_stores_the_run_incomplete_and_removes_what_it_made",
            "no /dev/shm",
        );
        return;
    };
    let _lock = rig::exclusive();
    let db = memory.path().join("results.db");
    let out = memory.path().join("out");
    std::fs::create_dir(&out).unwrap();
    let source: PathBuf = memory.path().join("source.dat");
    let child = ratelab()
        .args(["task", "compress"])
        .arg(&source)
        .args([
            "--make-file",
            "400M",
            "--codec",
            "xz",
            "--threads",
            "1",
            "-q",
            "--out",
        ])
        .arg(&out)
        .arg("--db")
        .arg(&db)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    common::wait_for_work_folder(&out);
    std::thread::sleep(std::time::Duration::from_millis(1500));
    stop_with(child, rustix::process::Signal::INT);
    let runs = stored_runs(&db);
    assert_eq!(runs[0]["status"], "incomplete", "{runs}");
    assert!(entries(&out).is_empty(), "{:?}", entries(&out));
    assert!(!source.exists(), "the made file was left behind");
}

#[test]
fn a_file_of_odd_size_on_a_disk_reads_direct_and_decompresses() {
    // O_DIRECT reads whole sectors: a size that is not a multiple of one, and the
    // compressed copy --decompress makes (of any size), must still be read direct.
    let dir = common::disk_tempdir();
    let file = dir.path().join("odd.dat");
    let data: Vec<u8> = (0..3_000_001u32)
        .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
        .collect();
    std::fs::write(&file, &data).unwrap();
    for extra in [&["--threads", "1"][..], &["--decompress"][..]] {
        let doc = run_json(&mut task(
            &file,
            dir.path(),
            &[extra, &["--no-store"]].concat(),
        ));
        let items = doc["workloads"][0]["items"].as_array().unwrap().clone();
        let read = items.iter().find(|i| i["op"] == "read").unwrap();
        assert_eq!(read["direct"], true, "{read}");
        assert_eq!(round_trips(&doc), [true], "{extra:?}");
    }
    let mut left = entries(dir.path());
    left.sort();
    assert_eq!(left, ["odd.dat"]);
}

#[test]
fn an_unreadable_file_is_named_before_the_folder_its_outputs_go_to() {
    let test = "an_unreadable_file_is_named_before_the_folder_its_outputs_go_to";
    if !common::root_or_skip(test, "another user to run as (setpriv)") {
        return;
    }
    use std::os::unix::fs::PermissionsExt;
    // A folder this user may read but not write, as /etc is: a secret file in it, and
    // one anyone may read.
    let dir = common::nobody_tempdir(0o755);
    let secret = dir.path().join("secret.bin");
    let open = dir.path().join("open.bin");
    for (file, mode) in [(&secret, 0o600), (&open, 0o644)] {
        std::fs::write(file, vec![7u8; 1 << 20]).unwrap();
        std::fs::set_permissions(file, std::fs::Permissions::from_mode(mode)).unwrap();
    }
    let said = |file: &std::path::Path| {
        let output = common::as_nobody(common::bin())
            .args(["task", "compress"])
            .arg(file)
            .args(["--threads", "1", "--no-store", "-q"])
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(3));
        String::from_utf8_lossy(&output.stderr).into_owned()
    };
    let message = said(&secret);
    assert!(
        message.contains("secret.bin") && message.contains("permission denied"),
        "{message}"
    );
    assert!(!message.contains("--out folder"), "{message}");
    // Readable, but no --out and a folder it cannot write: the folder is named as the
    // file's, with the flag that chooses another.
    let message = said(&open);
    assert!(
        message.contains("the file's folder") && message.contains("--out DIR"),
        "{message}"
    );
    let mut left = common::entries(dir.path());
    left.sort();
    assert_eq!(left, ["open.bin", "secret.bin"]);
}
