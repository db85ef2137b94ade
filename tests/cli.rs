//! The command-line contract of SPEC.md, run on the real binary: exit codes, messages
//! that name what was wrong, stdout that holds only results, and the results database.

mod common;

use common::{disk_refused, disk_tempdir, entries, json, ratelab, refused, run_json};

/// A quick series with the null engine: real files, no timed I/O.
fn null_run(dir: &std::path::Path, db: &std::path::Path, extra: &[&str]) -> std::process::Output {
    ratelab()
        .args([
            "disk",
            dir.to_str().unwrap(),
            "--engine",
            "null",
            "--sizes",
            "10K,1M",
            "--db",
        ])
        .arg(db)
        .args(extra)
        .output()
        .unwrap()
}

fn stderr(output: &std::process::Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn bad_size_is_a_usage_error_quoting_the_text() {
    let dir = disk_tempdir();
    let expect = ["\"10Q\"", "--sizes", "unknown suffix Q"];
    disk_refused(dir.path(), &["--sizes", "10K,10Q"], 2, &expect);
    assert!(
        entries(dir.path()).is_empty(),
        "files left: {:?}",
        entries(dir.path())
    );
}

#[test]
fn missing_target_is_refused_with_its_path() {
    let dir = disk_tempdir();
    let missing = dir.path().join("not-here");
    let message = disk_refused(
        &missing,
        &[],
        3,
        &[missing.to_str().unwrap(), "no such file"],
    );
    // Checks come before plans: no word of what would be written.
    assert!(!message.contains("in all"), "{message}");
}

#[test]
fn file_as_target_is_refused() {
    let dir = disk_tempdir();
    let file = dir.path().join("a-file");
    std::fs::write(&file, b"x").unwrap();
    disk_refused(&file, &[], 3, &[file.to_str().unwrap(), "not a directory"]);
    assert_eq!(entries(dir.path()), vec!["a-file".to_string()]);
}

#[test]
fn block_device_is_refused() {
    let Some(device) = std::fs::read_dir("/sys/block")
        .ok()
        .and_then(|mut d| d.find_map(|e| e.ok()))
        .map(|e| std::path::Path::new("/dev").join(e.file_name()))
        .filter(|p| p.exists())
    else {
        common::skip(
            "block_device_is_refused",
            "this machine shows no block device in /sys/block",
        );
        return;
    };
    disk_refused(&device, &[], 3, &[device.to_str().unwrap(), "device"]);
}

#[test]
fn a_series_that_does_not_fit_is_refused_with_the_figures() {
    let dir = disk_tempdir();
    // Sizes in binary units, as the plan line's "GiB free" says them.
    let expect = ["not enough free space", "needs 3 TiB", "iB is free"];
    let message = disk_refused(dir.path(), &["--sizes", "1T,1T,1T"], 3, &expect);
    assert!(
        !message.contains(" GB") && !message.contains(" TB"),
        "{message}"
    );
    assert!(entries(dir.path()).is_empty());
}

#[test]
fn options_that_do_not_fit_together_are_usage_errors() {
    let dir = disk_tempdir();
    for (args, expect) in [
        (
            &["--direct", "--block-size", "1000"][..],
            "--block-size 1000 B",
        ),
        (&["--random", "3", "--min", "2G", "--max", "1G"], "--min"),
        (&["--repeat", "0"], "--repeat"),
        (&["--read", "sideways"], "sideways"),
        (&["--sizes", "1M", "--random", "2"], "--random"),
        (
            &["--block-size", "1T"],
            "--block-size 1 TiB is out of range",
        ),
        (
            &[
                "--engine",
                "uring",
                "--queue-depth",
                "64",
                "--block-size",
                "256M",
            ],
            "16 GiB of I/O buffers",
        ),
        (
            &["--sizes", "8000000T,8000000T,8000000T"],
            "more than 16 EiB",
        ),
        (
            &["--random", "2", "--min", "0"],
            "--min must be at least 1 byte",
        ),
    ] {
        disk_refused(dir.path(), args, 2, &[expect]);
    }
    assert!(entries(dir.path()).is_empty());
}

#[test]
fn json_is_the_only_thing_on_stdout_and_matches_the_stored_run() {
    let dir = disk_tempdir();
    let db = dir.path().join("results.db");
    let target = dir.path().join("target");
    std::fs::create_dir(&target).unwrap();
    let output = null_run(
        &target,
        &db,
        &["--json", "--label", "first", "--repeat", "2"],
    );
    assert!(output.status.success(), "{}", stderr(&output));
    let doc = json(&output.stdout);
    assert_eq!(doc["status"], "complete");
    assert_eq!(doc["label"], "first");
    assert_eq!(doc["workloads"][0]["kind"], "disk");
    // Two sizes, two passes, a write and a direct read each.
    assert_eq!(doc["workloads"][0]["items"].as_array().unwrap().len(), 8);
    let summary = &doc["workloads"][0]["summary"];
    for key in [
        "median_bytes_per_sec",
        "min_bytes_per_sec",
        "max_bytes_per_sec",
        "mean_bytes_per_sec",
        "n",
    ] {
        assert!(
            summary["write"].get(key).is_some(),
            "summary.write lacks {key}"
        );
        assert!(
            summary["read"].get(key).is_some(),
            "summary.read lacks {key}"
        );
    }
    let id = doc["run_id"].as_i64().unwrap();
    assert_eq!(common::stored_run(&db, id), doc);
    assert!(
        entries(&target).is_empty(),
        "files left: {:?}",
        entries(&target)
    );
}

#[test]
fn results_list_show_and_export() {
    let dir = disk_tempdir();
    let db = dir.path().join("results.db");
    let target = dir.path().join("target");
    std::fs::create_dir(&target).unwrap();
    assert!(
        null_run(&target, &db, &["--label", "alpha", "-q"])
            .status
            .success()
    );
    assert!(
        null_run(&target, &db, &["--label", "beta", "-q"])
            .status
            .success()
    );

    let list = ratelab()
        .args(["results", "list", "--json", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    let runs = json(&list.stdout);
    let runs = runs.as_array().unwrap();
    assert_eq!(runs.len(), 2);
    assert_eq!(runs[0]["label"], "beta");
    assert_eq!(runs[0]["status"], "complete");
    assert_eq!(runs[0]["verb"], "disk");
    assert!(runs[0]["targets"][0].as_str().unwrap().ends_with("target"));

    let text = ratelab()
        .args(["results", "list", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    let text = String::from_utf8(text.stdout).unwrap();
    assert!(
        text.contains("alpha") && text.contains("beta") && text.contains("complete"),
        "{text}"
    );

    let shown = ratelab()
        .args(["results", "show", "1", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    let shown = String::from_utf8(shown.stdout).unwrap();
    assert!(
        shown.contains("median MB/s") && shown.contains("10 KiB") && shown.contains("1 MiB"),
        "{shown}"
    );

    let csv_path = dir.path().join("run1.csv");
    let export = ratelab()
        .args(["results", "export", "1", "--format", "csv", "--out"])
        .arg(&csv_path)
        .arg("--db")
        .arg(&db)
        .output()
        .unwrap();
    assert!(export.status.success(), "{}", stderr(&export));
    let csv = std::fs::read_to_string(&csv_path).unwrap();
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    for column in [
        "run_id",
        "op",
        "mode",
        "size_bytes",
        "bytes",
        "seconds",
        "bytes_per_sec",
        "cached_fraction_before",
    ] {
        assert!(header.contains(&column), "CSV lacks {column}: {header:?}");
    }
    assert_eq!(lines.count(), 4);

    let series = ratelab()
        .args(["results", "export", "1", "--format", "series", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    let series = String::from_utf8(series.stdout).unwrap();
    let mut rows = series.lines();
    assert_eq!(
        rows.next(),
        Some("run_id,workload,target,t_s,bytes,ops,bytes_per_sec")
    );
    let moved: u64 = rows
        .map(|r| r.split(',').nth(4).unwrap().parse::<u64>().unwrap())
        .sum();
    assert_eq!(
        moved,
        2 * ((10 << 10) + (1 << 20)),
        "the series add up to the bytes written and read"
    );

    let mut show = ratelab();
    show.args(["results", "show", "99", "--db"]).arg(&db);
    refused(&mut show, 2, &["no run 99"]);
}

#[test]
fn read_modes_prove_the_cache_state() {
    let dir = disk_tempdir();
    let doc = run_json(
        ratelab()
            .args([
                "disk",
                dir.path().to_str().unwrap(),
                "--sizes",
                "4M,16M",
                "--read",
                "cached,flushed,direct",
            ])
            .args(["--json", "--no-store", "-q"]),
    );
    let items = doc["workloads"][0]["items"].as_array().unwrap();
    let reads: Vec<_> = items.iter().filter(|i| i["op"] == "read").collect();
    assert_eq!(reads.len(), 6);
    for item in reads {
        let fraction = item["cached_fraction_before"].as_f64().unwrap();
        let flags: Vec<&str> = item["flags"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|f| f.as_str())
            .collect();
        match item["mode"].as_str().unwrap() {
            "cached" => {
                assert!(fraction > 0.99, "cached read with {fraction} resident");
                assert!(flags.contains(&"cached"), "{item}");
            }
            "flushed" | "direct" => {
                assert!(
                    fraction < 0.01,
                    "{} read with {fraction} resident",
                    item["mode"]
                );
                assert!(!flags.contains(&"cached"), "{item}");
            }
            other => panic!("unexpected mode {other}"),
        }
    }
    for key in ["read", "read_cached", "read_flushed", "read_direct"] {
        assert!(
            doc["workloads"][0]["summary"][key]["n"].as_u64() == Some(2),
            "summary.{key}"
        );
    }
}

#[test]
fn exact_sizes_with_tails_for_both_engines() {
    let dir = disk_tempdir();
    for engine in ["sync", "uring"] {
        let doc = run_json(
            ratelab()
                .args([
                    "disk",
                    dir.path().to_str().unwrap(),
                    "--sizes",
                    "1,4097,1000001",
                    "--direct",
                    "--engine",
                    engine,
                ])
                .args([
                    "--queue-depth",
                    "3",
                    "--block-size",
                    "64K",
                    "--read",
                    "direct,flushed",
                    "--json",
                    "--no-store",
                    "-q",
                ]),
        );
        for item in doc["workloads"][0]["items"].as_array().unwrap() {
            assert_eq!(item["bytes"], item["size_bytes"], "{engine}: {item}");
        }
        assert!(entries(dir.path()).is_empty());
    }
}

#[test]
fn keep_then_read_phase() {
    let dir = disk_tempdir();
    let target = dir.path().to_str().unwrap();
    let write = run_json(
        ratelab()
            .args([
                "disk", target, "--sizes", "1M,3M", "--phase", "write", "--keep",
            ])
            .args(["--json", "--no-store", "-q"]),
    );
    assert_eq!(entries(dir.path()).len(), 1, "the kept work folder");
    let kept: Vec<_> = write["verdicts"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|v| v["code"] == "files_kept")
        .collect();
    assert_eq!(kept.len(), 1, "{:?}", write["verdicts"]);
    let doc = run_json(ratelab().args([
        "disk",
        target,
        "--phase",
        "read",
        "--read",
        "flushed",
        "--json",
        "--no-store",
        "-q",
    ]));
    let sizes: Vec<u64> = doc["workloads"][0]["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["size_bytes"].as_u64().unwrap())
        .collect();
    assert_eq!(sizes.len(), 2);
    assert!(sizes.contains(&(1 << 20)) && sizes.contains(&(3 << 20)));

    let empty = disk_tempdir();
    disk_refused(
        empty.path(),
        &["--phase", "read"],
        3,
        &["--phase write --keep"],
    );
}

/// DESIGN.md: written data is unique in every 512-byte sector, so neither deduplication
/// nor compression can inflate a rate. Checked on the files themselves, with each
/// engine, files shorter and longer than the sync engine's ring of pools, and a direct
/// write whose tail goes through the buffered handle.
#[test]
fn every_sector_written_is_unique() {
    for extra in [
        &["--engine", "sync"][..],
        &["--engine", "sync", "--direct"],
        &["--engine", "uring", "--queue-depth", "4"],
    ] {
        let dir = disk_tempdir();
        run_json(
            ratelab()
                .arg("disk")
                .arg(dir.path())
                .args(["--sizes", "1M,20M,3000001", "--block-size", "1M"])
                .args(["--phase", "write", "--keep", "--json", "--no-store", "-q"])
                .args(extra),
        );
        let work = dir.path().join(&entries(dir.path())[0]);
        let mut seen = std::collections::HashSet::new();
        let mut files = 0;
        for name in entries(&work).iter().filter(|n| n.ends_with(".dat")) {
            let bytes = std::fs::read(work.join(name)).unwrap();
            for sector in bytes.chunks_exact(512) {
                assert!(
                    seen.insert(sector.to_vec()),
                    "{extra:?}: a sector of {name} repeats one written before"
                );
            }
            files += 1;
        }
        assert_eq!(files, 3, "{extra:?}: files in {}", work.display());
    }
}

#[test]
fn info_shows_the_machine_and_the_chain() {
    let dir = disk_tempdir();
    let doc = run_json(ratelab().args(["info", "--json"]).arg(dir.path()));
    assert!(doc["machine"]["logical_cpus"].as_u64().unwrap() >= 1);
    assert!(
        doc["machine"]["kernel"]
            .as_str()
            .is_some_and(|k| !k.is_empty())
    );
    let chain = &doc["storage"][0];
    assert_eq!(chain["steps"][0]["kind"], "filesystem");
    let text = ratelab().arg("info").arg(dir.path()).output().unwrap();
    let text = String::from_utf8(text.stdout).unwrap();
    assert!(text.contains("link limit"), "{text}");
}

#[test]
fn completions_and_man_page_come_from_the_definitions() {
    let man = ratelab().arg("man").output().unwrap();
    assert!(man.status.success());
    assert!(String::from_utf8_lossy(&man.stdout).contains(".TH ratelab"));
    let bash = ratelab().args(["completions", "bash"]).output().unwrap();
    assert!(String::from_utf8_lossy(&bash.stdout).contains("--sizes"));
}

#[test]
fn reads_faster_than_the_link_are_flagged_and_named_in_a_verdict() {
    let dir = disk_tempdir();
    let doc = run_json(
        ratelab()
            .args([
                "disk",
                dir.path().to_str().unwrap(),
                "--sizes",
                "8M,16M",
                "--read",
                "cached,direct",
            ])
            .args(["--link-rate", "1Mbit/s", "--json", "--no-store", "-q"]),
    );
    let workload = &doc["workloads"][0];
    assert_eq!(workload["context"]["max_bytes_per_sec"], 125_000.0);
    assert_eq!(workload["context"]["limit_source"], "--link-rate");
    for item in workload["items"].as_array().unwrap() {
        assert!(
            item["flags"]
                .as_array()
                .unwrap()
                .iter()
                .any(|f| f == "faster_than_link"),
            "every item beats a 1 Mbit/s link: {item}"
        );
    }
    let verdicts: Vec<&serde_json::Value> = doc["verdicts"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|v| v["code"] == "faster_than_link")
        .collect();
    assert!(!verdicts.is_empty());
    assert!(
        verdicts.iter().any(|v| v["message"]
            .as_str()
            .unwrap()
            .contains("served from a cache")),
        "{verdicts:?}"
    );
}

#[test]
fn profile_quick_prints_its_tables_and_stores_the_run() {
    let dir = disk_tempdir();
    let work = dir.path().join("work");
    std::fs::create_dir(&work).unwrap();
    let db = dir.path().join("results.db");
    let output = ratelab()
        .current_dir(&work)
        .env("COLUMNS", "80")
        .args(["profile", "--quick", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    let text = String::from_utf8(output.stdout).unwrap();
    for expect in [
        "· profile · complete",
        "256 MiB",
        "10 KiB",
        "summary:",
        "  storage  ",
        "  block I/O  random 4 KiB: read ",
        "  cores    ",
        "  network  ",
        "  task     ",
        "  limit      compress limits the task",
        "not measured on this machine:",
    ] {
        assert!(text.contains(expect), "{expect:?} missing from:\n{text}");
    }
    // The answer first: the summary comes before any workload's tables, and opens
    // within the first 20 lines.
    let at = |words: &str| text.find(words).unwrap();
    assert!(at("summary:") < at("disk 1:"), "{text}");
    let lines: Vec<&str> = text.lines().collect();
    let storage = lines.iter().position(|l| l.starts_with("  storage "));
    assert!(storage.is_some_and(|n| n < 20), "{text}");
    // It reads on an 80-column terminal in one screen and a bit: 83-89 lines here,
    // quiet or beside other work (whose account is cut to two lines at a glance,
    // as what moved since the last profile is, and whose verdicts fold into a line
    // per code).
    assert!(lines.len() <= 90, "{} lines:\n{text}", lines.len());
    for line in &lines {
        assert!(line.chars().count() <= 80, "wider than 80: {line:?}");
    }
    // Each verdict in one line, and where to read them in full.
    let verdicts = text
        .split("\nverdicts:\n")
        .nth(1)
        .and_then(|rest| rest.split("\n\n").next())
        .unwrap_or_default();
    assert!(
        verdicts
            .lines()
            .last()
            .is_some_and(|l| l.starts_with("  each in full: `ratelab results show ")),
        "{verdicts}"
    );
    let runs = common::stored_runs(&db);
    assert_eq!(runs[0]["verb"], "profile");
    assert_eq!(runs[0]["status"], "complete");
    assert!(
        entries(&work).is_empty(),
        "files left: {:?}",
        entries(&work)
    );
}

#[test]
fn the_same_target_twice_gets_two_work_folders() {
    let dir = disk_tempdir();
    let target = dir.path().to_str().unwrap();
    let doc = run_json(ratelab().args([
        "disk",
        target,
        target,
        "--sizes",
        "1M",
        "--json",
        "--no-store",
        "-q",
    ]));
    assert_eq!(doc["workloads"].as_array().unwrap().len(), 2);
    assert!(
        entries(dir.path()).is_empty(),
        "files left: {:?}",
        entries(dir.path())
    );
}

#[test]
fn every_line_keeps_to_columns_where_asked_and_is_whole_where_not() {
    let dir = disk_tempdir();
    let long = dir
        .path()
        .join("a-folder-whose-name-alone-is-long-enough")
        .join("and-then-another-one-that-does-not-exist-either");
    let runs: [Vec<std::ffi::OsString>; 2] = [
        // A plan on stderr, the tables on stdout.
        vec![
            "disk".into(),
            dir.path().into(),
            "--sizes".into(),
            "1M,4M".into(),
            "--no-store".into(),
        ],
        // An error naming a long path.
        vec!["disk".into(), long.clone().into(), "--no-store".into()],
    ];
    for args in runs {
        let run = |columns: Option<&str>| {
            let mut command = ratelab();
            command.args(&args);
            match columns {
                Some(columns) => command.env("COLUMNS", columns),
                None => command.env_remove("COLUMNS"),
            };
            command.output().unwrap()
        };
        let (narrow, whole) = (run(Some("80")), run(None));
        assert_eq!(narrow.status.code(), whole.status.code(), "{args:?}");
        for (stream, narrow, whole) in [
            ("stdout", &narrow.stdout, &whole.stdout),
            ("stderr", &narrow.stderr, &whole.stderr),
        ] {
            let (narrow, whole) = (
                String::from_utf8_lossy(narrow),
                String::from_utf8_lossy(whole),
            );
            for line in narrow.lines() {
                assert!(
                    line.chars().count() <= 80,
                    "{args:?} {stream} at COLUMNS=80: {line:?}"
                );
            }
            if stream == "stderr" {
                // Without a width the first line is whole, and wider than 80 columns.
                let first = whole.lines().next().unwrap_or_default();
                assert!(first.chars().count() > 80, "{args:?}: {whole}");
            }
            // The error says the same at either width: only where its lines break
            // moved (the plan's free space may move between the two runs).
            if args[1] == long.as_os_str() {
                let unbroken = |text: &str| text.split_whitespace().collect::<String>();
                assert_eq!(unbroken(&narrow), unbroken(&whole), "{args:?} {stream}");
            }
        }
    }
    // The error names the whole path on one line where nothing asked for a width.
    let output = ratelab()
        .env_remove("COLUMNS")
        .args(["disk"])
        .arg(&long)
        .arg("--no-store")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(3), "{}", stderr(&output));
    let said = stderr(&output);
    assert_eq!(said.lines().count(), 1, "{said}");
    assert!(said.contains(&long.display().to_string()), "{said}");
}

#[test]
fn disk_says_what_it_will_write_before_it_starts() {
    let dir = disk_tempdir();
    let output = ratelab()
        .arg("disk")
        .arg(dir.path())
        .args(["--sizes", "1M,4M", "--repeat", "2", "--no-store"])
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    let said = stderr(&output);
    let first = said.lines().next().unwrap_or_default();
    assert!(
        first.contains(
            "writes 2 files of 1 MiB to 4 MiB, 2 passes: 10 MiB in all, 5 MiB on disk at once; "
        ) && first.ends_with(" free there"),
        "{said}"
    );
    // Quiet is quiet.
    let output = ratelab()
        .arg("disk")
        .arg(dir.path())
        .args(["--sizes", "1M", "--no-store", "-q"])
        .output()
        .unwrap();
    assert!(
        !stderr(&output).contains("writes 1 file"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn a_db_in_a_missing_folder_or_a_folder_is_refused_before_anything_runs() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nowhere/sub/r.db");
    let cpu = common::QUICK_CPU;
    let folder = format!(
        "its folder {} does not exist",
        missing.parent().unwrap().display()
    );
    // As --db, and as RATELAB_DB: the message names the path and what is wrong, nothing
    // runs (stdout stays empty), and no folder is made.
    common::refused(
        common::ratelab().args(cpu).arg("--db").arg(&missing),
        2,
        &[&missing.display().to_string(), &folder, "never its folders"],
    );
    common::refused(
        common::ratelab().args(cpu).env("RATELAB_DB", &missing),
        2,
        &[&folder],
    );
    assert!(!dir.path().join("nowhere").exists());
    // Before a word of the plan.
    let said = common::refused(
        common::ratelab()
            .arg("disk")
            .arg(dir.path())
            .args(["--sizes", "1M", "--db"])
            .arg(&missing),
        2,
        &[&folder],
    );
    assert!(!said.contains("in all"), "{said}");
    let message = common::refused(
        common::ratelab().args(cpu).arg("--db").arg(dir.path()),
        2,
        &["it is a folder", "results.db"],
    );
    assert!(!message.contains("Error code"), "{message}");
    // Reading one is refused the same way.
    common::refused(
        common::ratelab()
            .args(["results", "list", "--db"])
            .arg(&missing),
        2,
        &[&folder],
    );
    // A file in a folder that exists is made, as before.
    let made = dir.path().join("r.db");
    let output = common::ratelab()
        .args(cpu)
        .args(["-q", "--db"])
        .arg(&made)
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(made.exists());
}

#[test]
fn a_skip_is_said_on_the_terminal_even_where_the_harness_captures_output() {
    let test = "a_skip_is_said_on_the_terminal_even_where_the_harness_captures_output";
    if std::env::var_os("RATELAB_TEST_SKIP_PROBE").is_some() {
        common::skip("the probe", "it was asked to skip");
        return;
    }
    // This test binary, running this test alone as `cargo test` does: output captured.
    let output = std::process::Command::new(std::env::current_exe().unwrap())
        .args([test, "--exact", "--test-threads", "1"])
        .env("RATELAB_TEST_SKIP_PROBE", "1")
        .env_remove("CI")
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("skipping the probe: it was asked to skip"),
        "stderr: {}\nstdout: {}",
        stderr(&output),
        String::from_utf8_lossy(&output.stdout)
    );
}

#[test]
fn results_show_and_report_without_an_id_take_the_latest_run() {
    let dir = disk_tempdir();
    let db = dir.path().join("r.db");
    for label in ["first", "second"] {
        let output = null_run(dir.path(), &db, &["-q", "--label", label]);
        assert!(output.status.success(), "{}", stderr(&output));
    }
    let shown = run_json(
        ratelab()
            .args(["results", "show", "--json", "--db"])
            .arg(&db),
    );
    assert_eq!(shown["run_id"], 2, "{shown}");
    assert_eq!(shown["label"], "second");
    let page = ratelab()
        .args(["results", "report", "--out", "-", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    assert!(page.status.success(), "{}", stderr(&page));
    assert!(String::from_utf8_lossy(&page.stdout).contains("second"));
}

#[test]
fn an_error_on_an_80_column_terminal_wraps_between_words() {
    let test = "an_error_on_an_80_column_terminal_wraps_between_words";
    if !common::have_or_skip(test, "script") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("a-folder-that-is-not-here");
    let shown = on_80_columns(&format!(
        "exec {} disk {} --no-store",
        common::bin().display(),
        missing.display()
    ));
    let shown = String::from_utf8_lossy(&shown).replace('\r', "");
    let lines: Vec<&str> = shown.lines().filter(|l| !l.is_empty()).collect();
    assert!(lines.len() >= 2, "the message fits one line: {shown:?}");
    for l in &lines {
        assert!(l.chars().count() <= 80, "a line over 80 columns: {l:?}");
    }
    assert!(lines[0].starts_with("ratelab: cannot use"), "{shown}");
    // Later lines sit under the message's first word.
    assert!(lines[1].starts_with("         ") && !lines[1].starts_with("          "));
    // Joined at the breaks, it is the one-line message a pipe gets.
    let joined = lines.iter().map(|l| l.trim()).collect::<Vec<_>>().join(" ");
    let piped = disk_refused(&missing, &[], 3, &[]);
    assert_eq!(joined, piped.trim(), "{shown}");
}

/// What a pseudo-terminal showed, cut into the lines it drew: escape sequences taken
/// out, and a progress bar's redraws (`\r`) each a line of their own.
fn drawn_lines(shown: &[u8]) -> Vec<String> {
    let text = String::from_utf8_lossy(shown);
    let mut plain = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            // CSI: ESC [ parameters, ending in a letter; other escapes: one more char.
            if chars.peek() == Some(&'[') {
                chars.next();
                for c in chars.by_ref() {
                    if c.is_ascii_alphabetic() {
                        break;
                    }
                }
            } else {
                chars.next();
            }
            continue;
        }
        plain.push(c);
    }
    plain
        .split(['\n', '\r'])
        .map(|l| l.trim_end().to_string())
        .filter(|l| !l.is_empty())
        .collect()
}

/// `line` for sh on a pseudo-terminal of 80 columns (script's, sized by stty).
fn script_80(line: &str) -> std::process::Command {
    let mut script = std::process::Command::new("script");
    common::isolated(&mut script).args([
        "-qec",
        &format!("stty cols 80 rows 24; {line}"),
        "/dev/null",
    ]);
    script
}

/// Runs `line` in sh on a pseudo-terminal of 80 columns; what it drew.
fn on_80_columns(line: &str) -> Vec<u8> {
    script_80(line).output().unwrap().stdout
}

#[test]
fn every_line_ratelab_draws_fits_an_80_column_terminal() {
    let test = "every_line_ratelab_draws_fits_an_80_column_terminal";
    if !common::have_or_skip(test, "script") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("target");
    std::fs::create_dir(&target).unwrap();
    let db = dir.path().join("r.db");
    let bin = common::bin();
    let (bin, target, db) = (bin.display(), target.display(), db.display());
    let long = dir
        .path()
        .join("a-folder-with-a-long-name-that-is-not-here/and-one-more-below-it/and-a-third");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    // The server on a terminal of its own, its log read when it ends (--once).
    let server = script_80(&format!(
        "exec {bin} net serve --bind 127.0.0.1 --port {port} --once --no-store"
    ))
    .stdout(std::process::Stdio::piped())
    .stderr(std::process::Stdio::null())
    .spawn()
    .unwrap();
    let mut shown = on_80_columns(&format!(
        "{bin} profile --quick --target {target} --db {db}; \
         {bin} disk {target} --sizes 10K,1M --db {db}; \
         {bin} iops {target} --size 8M --tests RND4K-Q1T1,RND4K-Q4T1 --seconds 0.2 --ramp 0 --db {db}; \
         {bin} results list --db {db}; \
         {bin} results show --db {db}; \
         {bin} results show 1 --db {db}; \
         {bin} results compare 1 2 3 --db {db}; \
         {bin} disk {} --db {db}; \
         sleep 0.3; {bin} net 127.0.0.1:{port} -t 1 --db {db}",
        long.display()
    ));
    let server = server.wait_with_output().unwrap();
    shown.extend_from_slice(&server.stdout);
    let lines = drawn_lines(&shown);
    let text = lines.join("\n");
    for part in [
        "summary:",
        "runs in",
        "ratelab: cannot use",
        "and-a-third",
        "listening on 127.0.0.1",
        "test of 1 stream",
        // The progress bar's line, drawn as the runs went.
        " moved",
    ] {
        assert!(
            text.contains(part),
            "no {part:?} in what was drawn:\n{text}"
        );
    }
    let over: Vec<&String> = lines.iter().filter(|l| l.chars().count() > 80).collect();
    assert!(over.is_empty(), "lines over 80 columns: {over:#?}");
}
