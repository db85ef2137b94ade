//! The main job end to end: `ratelab profile --quick` stores its run and writes the HTML
//! report; `results report` of the stored run gives the same page from the database;
//! headless Chromium renders it with its charts (the screenshot is kept under target/
//! for CI to keep as an artifact).

mod common;

use std::path::{Path, PathBuf};

use common::{ratelab, stored_runs};

/// Where the screenshot stays after the test, for CI to pick up.
fn artifacts() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .expect("target/tmp has a parent")
        .join("report-screenshot");
    std::fs::create_dir_all(&dir).expect("create target/report-screenshot");
    dir
}

/// The colours of the first two chart lines (charts.rs), as a browser paints them.
const LINE_COLOURS: [[u8; 3]; 2] = [[31, 119, 180], [214, 39, 40]];

/// Renders `page` in headless Chromium to a PNG of `width` x `height`.
fn screenshot(page: &Path, png: &Path, profile: &Path) -> bool {
    let status = std::process::Command::new("chromium")
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
            "--window-size=1000,6000",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg(format!("--screenshot={}", png.display()))
        .arg(format!("file://{}", page.display()))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .expect("start chromium");
    status.success() && png.exists()
}

/// Pixel counts of the screenshot: distinct colours, and pixels of each line colour.
fn pixels(png: &Path) -> (usize, [usize; 2]) {
    let decoder = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(png).unwrap()));
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut buf).unwrap();
    let channels = info.color_type.samples();
    let mut colours = std::collections::HashSet::new();
    let mut lines = [0usize; 2];
    for pixel in buf[..info.buffer_size()].chunks(channels) {
        let rgb = [pixel[0], pixel[1], pixel[2]];
        colours.insert(rgb);
        for (count, colour) in lines.iter_mut().zip(LINE_COLOURS) {
            if rgb == colour {
                *count += 1;
            }
        }
    }
    (colours.len(), lines)
}

/// The number in attribute `name` of an SVG element's text.
fn attribute(element: &str, name: &str) -> Option<f64> {
    let start = element.find(&format!(" {name}=\""))? + name.len() + 3;
    let rest = &element[start..];
    rest[..rest.find('"')?].parse().ok()
}

/// Asserts that no chart of `page` has a point under its legend: the legend's box
/// (plotters' white, 0.85 opaque) ends above every point (circle) of its chart, so the
/// lines between them stay below it too. Returns the charts with a legend.
fn legends_cover_nothing(page: &str, what: &str) -> usize {
    let mut legends = 0;
    for chart in page.split("<svg").skip(1) {
        let chart = &chart[..chart.find("</svg>").unwrap_or(chart.len())];
        let Some(legend) = chart
            .split('<')
            .find(|e| e.starts_with("rect") && e.contains("opacity=\"0.85\""))
        else {
            continue;
        };
        legends += 1;
        let bottom = attribute(legend, "y").unwrap() + attribute(legend, "height").unwrap();
        let ys: Vec<f64> = chart
            .split('<')
            .filter(|e| e.starts_with("circle"))
            .filter_map(|e| Some(attribute(e, "cy")? - attribute(e, "r")?))
            .collect();
        let highest = ys.iter().copied().fold(f64::INFINITY, f64::min);
        assert!(
            highest > bottom,
            "{what}: a chart's legend (down to y {bottom}) covers a point at y {highest}"
        );
    }
    legends
}

#[test]
fn profile_quick_stores_the_run_and_its_report_shows_the_charts() {
    let _alone = common::rig::exclusive();
    let dir = common::disk_tempdir();
    let db = dir.path().join("results.db");
    let target = dir.path().join("target");
    std::fs::create_dir(&target).unwrap();
    let output = ratelab()
        .current_dir(&target)
        .args(["profile", "--quick", "-q", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    // The report is written beside the database and named on stderr.
    let report = dir.path().join("reports").join("run-1.html");
    assert!(
        stderr.contains(&format!("report: {}", report.display())),
        "{stderr}"
    );
    let page = std::fs::read_to_string(&report).unwrap();
    assert!(
        common::entries(&target).is_empty(),
        "{:?}",
        common::entries(&target)
    );
    let runs = stored_runs(&db);
    assert_eq!(runs[0]["verb"], "profile");
    assert_eq!(runs[0]["status"], "complete");

    // Every part is on the page, with its charts: storage by size, block I/O latency
    // by percentile, cpu and task by threads, monitor residency, rates over time.
    // The task is set beside the storage series of the same run, for reading and writing.
    for step in ["of read on", "of write on"] {
        assert!(
            page.contains(step) && page.contains("the storage series of this run"),
            "no disk_vs_task verdict {step:?}"
        );
    }
    for part in [
        "disk 1",
        "iops 2",
        "cpu 3",
        "monitor 4",
        "net 5",
        "task 6",
        "Verdicts",
    ] {
        assert!(page.contains(part), "{part} missing from the report");
    }
    for chart in [
        "rate by file size",
        "speedup over the first thread count",
        "active residency per core",
        "task: rate of original bytes by thread count",
        "latency by percentile",
        "rate over time",
    ] {
        assert!(page.contains(chart), "chart {chart:?} missing");
    }
    assert!(page.matches("<svg").count() >= 6, "too few charts");
    assert!(legends_cover_nothing(&page, "profile --quick") >= 6);
    // The rate-over-time charts name the stages wide enough for their names: the block
    // I/O tests' (2.5 s each of 10). The disk's stages are timed too, though a busy
    // machine can leave them too narrow to name.
    assert!(
        page.contains("\nRND4K-Q32T1 read\n</text>"),
        "the block I/O tests' stages are not named on a chart"
    );
    let stored = common::stored_run(&db, 1);
    // Which verdicts a run has depends on what it met (a write test's knee, or a span
    // too short to outlast a write cache): those that name a flag or a command in
    // backticks show it as code.
    let quoting = stored["verdicts"]
        .as_array()
        .unwrap()
        .iter()
        .any(|v| v["message"].as_str().is_some_and(|m| m.contains('`')));
    assert_eq!(code_spans(&page) > 0, quoting, "code spans in the verdicts");
    let stages = stored["workloads"][0]["series"]["stages"].to_string();
    assert!(stages.contains("\"pass 1 write\""), "{stages}");
    assert!(!page.contains("<script"), "the report runs no script");
    assert!(!page.contains(" src=\"http"), "the report fetches nothing");

    // The page comes from the database: `results report` of the stored run is the same.
    let again = dir.path().join("again.html");
    common::results(&db, &["report", "1", "--out", again.to_str().unwrap()]);
    assert_eq!(std::fs::read_to_string(&again).unwrap(), page);
    // Without --out it writes the page where profile did and names it; `--out -` is stdout.
    std::fs::remove_file(&report).unwrap();
    let output = ratelab()
        .args(["results", "report", "1", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(output.stdout.is_empty(), "the page went to the terminal");
    assert!(
        stderr.contains(&format!("report: {}", report.display())),
        "{stderr}"
    );
    assert_eq!(std::fs::read_to_string(&report).unwrap(), page);
    let output = ratelab()
        .args(["results", "report", "1", "--out", "-", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&output.stdout), page);

    // A second profile of the machine says what moved since the first.
    let output = ratelab()
        .current_dir(&target)
        .args(["profile", "--quick", "-q", "--json", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let second = common::json(&output.stdout);
    let since: Vec<&serde_json::Value> = second["verdicts"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|v| {
            // A profile other work disturbed says so instead of blaming the storage.
            ["unchanged", "changed", "disturbed"]
                .iter()
                .any(|what| v["code"] == format!("{what}_since_last_profile"))
        })
        .collect();
    assert_eq!(since.len(), 1, "{}", second["verdicts"]);
    assert!(
        since[0]["message"]
            .as_str()
            .unwrap()
            .contains("profile run 1"),
        "{}",
        since[0]
    );

    if !common::have_or_skip("the screenshot", "chromium") {
        return;
    }
    let png = artifacts().join("profile-quick.png");
    let _ = std::fs::remove_file(&png);
    assert!(
        screenshot(&report, &png, &dir.path().join("chromium")),
        "chromium made no screenshot"
    );
    let (colours, lines) = pixels(&png);
    eprintln!(
        "screenshot {}: {colours} colours, line pixels {lines:?}",
        png.display()
    );
    assert!(
        colours > 50,
        "the screenshot is nearly blank: {colours} colours"
    );
    assert!(
        lines.iter().all(|&n| n > 200),
        "chart lines not drawn: {lines:?}"
    );
}

#[test]
fn every_fixture_run_s_report_renders_with_its_charts() {
    if !common::have_or_skip("the fixture screenshots", "chromium") {
        return;
    }
    let dir = common::disk_tempdir();
    let shots = artifacts().join("fixtures");
    std::fs::create_dir_all(&shots).unwrap();
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let (mut taken, mut spans) = (0, 0);
    for name in ["runs-61f461b.db", "runs-a1ad702.db", "runs-feaf4b2.db"] {
        let db = dir.path().join(name);
        std::fs::copy(fixtures.join(name), &db).expect("copy the fixture");
        let runs = stored_runs(&db);
        for run in runs.as_array().unwrap() {
            let id = run["run_id"].to_string();
            let stem = format!("{}-run-{id}", name.trim_end_matches(".db"));
            let page = dir.path().join(format!("{stem}.html"));
            common::results(&db, &["report", &id, "--out", page.to_str().unwrap()]);
            let html = std::fs::read_to_string(&page).unwrap();
            legends_cover_nothing(&html, &stem);
            spans += code_spans(&html);
            let png = shots.join(format!("{stem}.png"));
            let _ = std::fs::remove_file(&png);
            assert!(
                screenshot(&page, &png, &dir.path().join("chromium")),
                "{stem}: chromium made no screenshot"
            );
            let (colours, lines) = pixels(&png);
            eprintln!(
                "{}: {} charts, {colours} colours, line pixels {lines:?}",
                png.display(),
                html.matches("<svg").count()
            );
            assert!(colours > 30, "{stem}: the page is nearly blank");
            if html.contains("<svg") {
                let drawn: usize = lines.iter().sum();
                assert!(drawn > 100, "{stem}: no chart line drawn: {lines:?}");
            }
            taken += 1;
        }
    }
    assert!(taken >= 19, "only {taken} fixture runs");
    // runs-61f461b.db holds a verdict that names a command in backticks.
    assert!(
        spans > 0,
        "no fixture page sets a verdict's command as code"
    );
}

/// The code spans of a page's verdicts, asserting none is left as raw backticks.
fn code_spans(page: &str) -> usize {
    let Some(at) = page.find("Verdicts</h2>") else {
        return 0;
    };
    let verdicts = &page[at..];
    let verdicts = &verdicts[..verdicts.find("</ul>").unwrap_or(verdicts.len())];
    assert!(!verdicts.contains('`'), "a raw backtick in the verdicts");
    verdicts.matches("<code>").count()
}

#[test]
fn a_report_path_that_cannot_be_written_is_refused_before_measuring() {
    let dir = common::disk_tempdir();
    let db = dir.path().join("results.db");
    let started = std::time::Instant::now();
    common::refused(
        ratelab()
            .current_dir(dir.path())
            .args([
                "profile",
                "--quick",
                "--report",
                "/proc/none/report.html",
                "--db",
            ])
            .arg(&db),
        3,
        &["/proc/none/report.html", "--report"],
    );
    assert!(
        started.elapsed().as_secs() < 5,
        "refused only after measuring"
    );
    assert!(!db.exists(), "a run was stored");
    common::refused(
        ratelab().args(["profile", "--quick", "--peer", "host:99999"]),
        2,
        &["--peer", "host:99999", "65535"],
    );
}
