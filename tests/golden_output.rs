//! What users read, to the letter: a fixed run (the null engine, which reports every
//! transfer at a made-up 1 GB/s, a fixed seed and a fixed link limit) printed by the
//! measuring verb, by `results show` and as Markdown, against the golden files in
//! tests/golden/. The run's date, its machine and its temporary folder are the only
//! words that change from run to run; they are replaced before the comparison.
//! `RATELAB_BLESS=1 cargo test --test golden_output --test stored_runs` rewrites the
//! golden files when a change to the output is meant, so review shows the change.

mod common;

use std::path::Path;

use common::{golden, stdout_with_db as stdout};

/// `text` with what differs between runs replaced: the target folder, the machine
/// line and every RFC 3339 time.
fn steady(text: &str, target: &Path) -> String {
    let text = text.replace(&target.display().to_string(), "TARGET");
    let mut lines: Vec<String> = Vec::new();
    let mut in_machine = false;
    for line in text.lines() {
        // The machine line goes on below when it is wider than 80 columns.
        if in_machine && line.starts_with("         ") {
            continue;
        }
        in_machine = line.starts_with("machine: ");
        lines.push(if in_machine {
            "machine: MACHINE".to_string()
        } else {
            without_times(line)
        });
    }
    lines.join("\n") + "\n"
}

/// `line` with each `YYYY-MM-DDTHH:MM:SSZ` replaced by `TIME`.
fn without_times(line: &str) -> String {
    const SHAPE: &str = "dddd-dd-ddTdd:dd:ddZ";
    let chars: Vec<char> = line.chars().collect();
    let mut out = String::new();
    let mut i = 0;
    while i < chars.len() {
        let fits = chars.len() - i >= SHAPE.len()
            && SHAPE
                .chars()
                .zip(&chars[i..])
                .all(|(shape, &c)| match shape {
                    'd' => c.is_ascii_digit(),
                    other => other == c,
                });
        if fits {
            out.push_str("TIME");
            i += SHAPE.len();
        } else {
            out.push(chars[i]);
            i += 1;
        }
    }
    out
}

#[test]
fn a_null_engine_series_reads_as_the_golden_files_say() {
    let dir = tempfile::tempdir().expect("create a temporary folder");
    let target = dir.path().join("target");
    std::fs::create_dir(&target).expect("create the target");
    let db = dir.path().join("results.db");
    let target_text = target.display().to_string();
    let measured = stdout(
        &[
            "disk",
            &target_text,
            "--engine",
            "null",
            "--sizes",
            "10K,1M,64M",
            "--repeat",
            "2",
            "--read",
            "direct,flushed,cached",
            "--seed",
            "7",
            "--link-rate",
            "2GB/s",
            "-q",
        ],
        &db,
    );
    golden::check("null-series/disk.txt", &steady(&measured, &target));
    let shown = stdout(&["results", "show", "1"], &db);
    assert_eq!(shown, measured, "results show prints what the run printed");
    let markdown = stdout(&["results", "export", "1", "--format", "markdown"], &db);
    golden::check("null-series/disk.md", &steady(&markdown, &target));
    assert!(
        common::entries(&target).is_empty(),
        "the run left files in its target"
    );
}

#[test]
fn times_are_found_anywhere_in_a_line() {
    assert_eq!(
        without_times("run 1 · disk · 2026-11-24T08:29:17Z · x"),
        "run 1 · disk · TIME · x"
    );
    assert_eq!(without_times("2026-11-24T08:29:1"), "2026-11-24T08:29:1");
}
