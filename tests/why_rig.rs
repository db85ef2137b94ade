//! `ratelab why` on rigs of known rate: a reader and writers of a loop device held to
//! 100 MiB/s reading and 50 MiB/s writing by a blkio cgroup are limited by that device,
//! at its rate, set against a `ratelab disk` run of it; a pipeline from it is limited
//! by the compressor or by the read, whichever is slower; an iperf3 sender over a veth
//! link shaped to 200 Mbit/s is limited by sending to its peer, at the link's rate.

mod common;

use std::path::{Path, PathBuf};

use common::rig::{self, MIB, SlowDisk, Throttle};
use common::{RIG_NEEDS, Try, check, root_or_skip, up_to_three_tries};
use serde_json::Value;

const READ_RATE: u64 = 100 * MIB;
const WRITE_RATE: u64 = 50 * MIB;
/// How far a figure may stray from the rig's rate (issue 34).
const WITHIN: f64 = 0.10;

/// `ratelab why --json --out OUT EXTRA -- COMMAND` run inside the throttle's cgroup;
/// returns its document.
fn why_throttled(throttle: &Throttle, extra: &[&str], command: &[&str], out: &Path) -> Value {
    let status = throttle
        .command(common::bin())
        .args(["why", "--json", "--out"])
        .arg(out)
        .args(extra)
        .arg("--")
        .args(command)
        .stdout(std::process::Stdio::null())
        .status()
        .expect("start ratelab why in the cgroup");
    assert!(status.success(), "ratelab why -- {command:?} failed");
    common::json(&std::fs::read(out).expect("why wrote its document"))
}

fn limiting(doc: &Value) -> &Value {
    &doc["workloads"][0]["summary"]["limiting"]
}

/// The disk's name as the kernel calls it (`loop3`).
fn device_name(disk: &SlowDisk) -> String {
    disk.device().trim_start_matches("/dev/").to_string()
}

/// Checks that `doc` is limited by `step` on `device`, for most of its time, at the
/// rig's `rate` within [`WITHIN`].
fn assert_device_limits(doc: &Value, step: &str, device: &str, rate: u64, what: &str) {
    let limit = limiting(doc);
    assert_eq!(limit["step"], step, "{what}: {limit}");
    assert_eq!(limit["where"], device, "{what}: {limit}");
    assert_share(limit, 0.85, what);
    let measured = limit["bytes_per_sec"].as_f64().unwrap() / rate as f64;
    assert!(
        (1.0 - WITHIN..=1.0 + WITHIN).contains(&measured),
        "{what}: {measured:.3}x the rig's rate: {limit}"
    );
    common::say(&format!(
        "{what}: {step} on {device}, {:.1}% of the time, {measured:.3}x the rig's rate",
        limit["share"].as_f64().unwrap() * 100.0
    ));
}

/// Checks that the limit's share of the wall is at least `least`, and no more than all
/// of it.
fn assert_share(limit: &Value, least: f64, what: &str) {
    let share = limit["share"].as_f64().unwrap();
    assert!((least..=1.0).contains(&share), "{what}: {limit}");
}

/// A slow disk in a throttle reading at `read_rate`, with `files` of text on it of
/// these sizes.
fn rig(read_rate: u64, files: &[(&str, usize)]) -> (SlowDisk, Throttle, Vec<PathBuf>) {
    // In memory: on the VM's disk a writer's fsync became the backing file's fsync, which
    // in a slow mood held the device long enough that `dd conv=fsync` wrote 0.878x the
    // rig's rate; a tmpfs file's fsync costs nothing, so the throttle alone sets it.
    let disk = SlowDisk::in_memory(1 << 30);
    let throttle = Throttle::new();
    throttle.limit(&disk, WRITE_RATE, read_rate);
    let paths = files
        .iter()
        .map(|(name, bytes)| {
            let path = disk.path().join(name);
            common::write_text(&path, *bytes);
            path
        })
        .collect();
    (disk, throttle, paths)
}

#[test]
fn a_reader_of_a_throttled_disk_is_limited_by_it_and_set_against_its_run() {
    let test = "a_reader_of_a_throttled_disk";
    if !root_or_skip(test, RIG_NEEDS) {
        return;
    }
    let _lock = rig::exclusive();
    let (disk, throttle, files) = rig(READ_RATE, &[("big.txt", 256 << 20)]);
    let file = files[0].to_str().unwrap();
    let device = device_name(&disk);
    let db = disk.scratch().join("results.db");
    let db_arg = ["--db", db.to_str().unwrap()];
    let out = disk.scratch().join("why.json");
    up_to_three_tries(test, |_| {
        let load = common::load::Load::start();
        rig::evict(&files[0]);
        let doc = why_throttled(&throttle, &db_arg, &["cat", file], &out);
        check(load.disturbed(), || {
            assert_device_limits(&doc, "disk_read", &device, READ_RATE, "cat");
            // Nothing measured the device yet: the answer says what would.
            let words = doc["workloads"][0]["context"]["capabilities"].to_string();
            assert!(words.contains("ratelab disk"), "{words}");
            Try::Checked
        })
    });
    // What ratelab measured of the device reading, then the reader set against it.
    let series = throttle
        .command(common::bin())
        .args([
            "disk",
            disk.path().to_str().unwrap(),
            "--sizes",
            "128M,128M",
            "--direct",
            "-q",
        ])
        .args(db_arg)
        .status()
        .expect("start ratelab disk");
    assert!(series.success());
    let disk_run = common::stored_runs(&db)[0]["run_id"].as_i64().unwrap();
    up_to_three_tries(test, |_| {
        let load = common::load::Load::start();
        rig::evict(&files[0]);
        let doc = why_throttled(&throttle, &db_arg, &["cat", file], &out);
        check(load.disturbed(), || {
            let limit = limiting(&doc);
            assert_eq!(limit["capability_run"], disk_run, "{limit}");
            let ratio = limit["bytes_per_sec"].as_f64().unwrap()
                / limit["capability_bytes_per_sec"].as_f64().unwrap();
            assert!((0.85..=1.15).contains(&ratio), "{ratio:.3}: {limit}");
            common::say(&format!(
                "{test}: cat read at {ratio:.3}x what run {disk_run} measured of {device}"
            ));
            Try::Checked
        })
    });
}

#[test]
fn direct_and_buffered_writers_of_a_throttled_disk_are_limited_by_it() {
    let test = "writers_of_a_throttled_disk";
    if !root_or_skip(test, RIG_NEEDS) {
        return;
    }
    let _lock = rig::exclusive();
    let (disk, throttle, _) = rig(READ_RATE, &[]);
    let device = device_name(&disk);
    let target = format!("of={}", disk.path().join("written").display());
    let out = disk.scratch().join("why.json");
    for (what, flag) in [("dd direct", "oflag=direct"), ("dd fsync", "conv=fsync")] {
        up_to_three_tries(test, |_| {
            let load = common::load::Load::start();
            let command = [
                "dd",
                "if=/dev/zero",
                &target,
                "bs=1M",
                "count=200",
                flag,
                "status=none",
            ];
            let doc = why_throttled(&throttle, &["--no-store"], &command, &out);
            check(load.disturbed(), || {
                assert_device_limits(&doc, "disk_write", &device, WRITE_RATE, what);
                Try::Checked
            })
        });
    }
}

#[test]
fn a_pipeline_from_a_throttled_disk_is_limited_by_its_slower_step() {
    let test = "a_pipeline_from_a_throttled_disk";
    if !root_or_skip(test, RIG_NEEDS) || !common::have_or_skip(test, "zstd") {
        return;
    }
    let _lock = rig::exclusive();
    // zstd -1 compresses text at 150 MB/s and more here: a read at 25 MiB/s paces it.
    let (disk, throttle, files) = rig(25 * MIB, &[("small.txt", 6 << 20), ("big.txt", 64 << 20)]);
    let device = device_name(&disk);
    let out = disk.scratch().join("why.json");
    // zstd -19 compresses a few MB a second: the read of 6 MiB is a small part.
    let slow = format!("cat {} | zstd -19 -T1 > /dev/null", files[0].display());
    let fast = format!("cat {} | zstd -1 -T1 > /dev/null", files[1].display());
    for (what, file, pipeline) in [
        ("cat | zstd -19", &files[0], slow),
        ("cat | zstd -1", &files[1], fast),
    ] {
        up_to_three_tries(test, |_| {
            let load = common::load::Load::start();
            rig::evict(file);
            let doc = why_throttled(&throttle, &["--no-store"], &["sh", "-c", &pipeline], &out);
            check(load.disturbed(), || {
                let limit = limiting(&doc);
                if what.ends_with("-19") {
                    assert_eq!(limit["step"], "cpu", "{what}: {limit}");
                    assert_eq!(limit["where"], "zstd", "{what}: {limit}");
                    // zstd -19 is on its CPU nearly all the pipeline's wall.
                    assert_share(limit, 0.85, what);
                } else {
                    // The read paces zstd -1: cat waits for it most of the wall (76-85%
                    // here), zstd compressing the rest. (Its rate, read over the windows
                    // cat waited on, came to 0.64x the rig's once: not yet a figure to
                    // hold it to.)
                    assert_eq!(limit["step"], "disk_read", "{what}: {limit}");
                    assert_eq!(limit["where"], device, "{what}: {limit}");
                    assert_share(limit, 0.6, what);
                }
                common::say(&format!(
                    "{what}: {} on {}, {:.1}% of the time",
                    limit["step"],
                    limit["where"],
                    limit["share"].as_f64().unwrap() * 100.0
                ));
                Try::Checked
            })
        });
    }
}

#[test]
fn an_iperf3_sender_over_a_shaped_link_is_limited_by_sending_to_its_peer() {
    let test = "an_iperf3_sender_over_a_shaped_link";
    if !root_or_skip(test, "it builds two network namespaces joined by veth")
        || !common::have_or_skip(test, "iperf3")
    {
        return;
    }
    let _lock = rig::exclusive();
    let mut link = common::netns::Link::new(1500, "200mbit");
    link.serve_iperf3(5201);
    let dir = common::disk_tempdir();
    let out = dir.path().join("why.json");
    up_to_three_tries(test, |_| {
        let load = common::load::Load::start();
        let status = link
            .in_client(common::bin())
            .args(["why", "--json", "--no-store", "--out"])
            .arg(&out)
            .args(["--", "iperf3", "-c", &link.server_address, "-t", "3"])
            .stdout(std::process::Stdio::null())
            .status()
            .expect("start ratelab why");
        assert!(status.success());
        let doc = common::json(&std::fs::read(&out).unwrap());
        check(load.disturbed(), || {
            let limit = limiting(&doc);
            assert_eq!(limit["step"], "net_send", "{limit}");
            assert_share(limit, 0.85, test);
            let place = limit["where"].as_str().unwrap();
            assert!(
                place.starts_with(&format!("{}:5201 via ", link.server_address)),
                "{limit}"
            );
            let measured = limit["bytes_per_sec"].as_f64().unwrap() * 8.0 / 200e6;
            assert!(
                (1.0 - WITHIN..=1.0 + WITHIN).contains(&measured),
                "{measured:.3}x the link: {limit}"
            );
            // TCP's own account of the connection, read through sock_diag: a sender
            // with data in flight nearly all the time, held by neither the peer's
            // window nor its own buffer (the link's queue holds it).
            let tcp = &limit["tcp"];
            let seconds = tcp["seconds"]
                .as_f64()
                .expect("TCP's account of the connection");
            let share = |field: &str| tcp[field].as_f64().unwrap() / seconds;
            assert!(seconds >= 1.0 && share("busy_s") >= 0.8, "{tcp}");
            assert!(share("rwnd_limited_s") < 0.2, "{tcp}");
            assert!(share("sndbuf_limited_s") < 0.2, "{tcp}");
            assert_eq!(
                tcp["peer"],
                format!("{}:5201", link.server_address),
                "{tcp}"
            );
            common::say(&format!(
                "{test}: net_send to {place}, {:.1}% of the time, {measured:.3}x the link; \
                 TCP busy {:.0}%, window {:.0}%, buffer {:.0}% of {seconds:.1} s, rtt {} us",
                limit["share"].as_f64().unwrap() * 100.0,
                share("busy_s") * 100.0,
                share("rwnd_limited_s") * 100.0,
                share("sndbuf_limited_s") * 100.0,
                tcp["rtt_us"]
            ));
            Try::Checked
        })
    });
}
