//! The shared store: `--db postgres://…` on a throwaway PostgreSQL cluster. Several
//! processes storing at once lose nothing, every `results` verb reads the same from it
//! as from SQLite, an interrupted run is kept incomplete, and a password is found as
//! psql finds it and never printed.

mod common;

use std::path::Path;
use std::process::{Child, Command, Stdio};

use common::postgres::{Cluster, PASSWORD};
use common::{QUICK_CPU, ratelab};

/// ratelab with the cluster's password in the environment, as a team's shell has it.
fn with_password() -> Command {
    let mut command = ratelab();
    command.env("PGPASSWORD", PASSWORD).env_remove("RATELAB_DB");
    command
}

/// `ratelab ARGS --db DB` (a path or a URL), with the password; its exit code and
/// stdout, and stderr.
fn answer(db: &str, args: &[&str]) -> (Option<i32>, String, String) {
    let output = with_password()
        .args(args)
        .args(["--db", db])
        .output()
        .expect("start ratelab");
    (
        output.status.code(),
        String::from_utf8(output.stdout).unwrap(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

fn stored_runs(db: &str) -> Vec<serde_json::Value> {
    let (code, out, err) = answer(db, &["results", "list", "--json"]);
    assert_eq!(code, Some(0), "{err}");
    common::json(out.as_bytes()).as_array().unwrap().clone()
}

fn fixture(name: &str) -> String {
    format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn four_processes_storing_at_once_into_a_new_database_lose_no_run() {
    let Some(cluster) = Cluster::start("four_processes_storing_at_once") else {
        return;
    };
    // A database no ratelab has opened: the four race to create the schema too.
    let url = cluster.create("team");
    let start = |label: String| -> (String, Child) {
        let child = with_password()
            .args(QUICK_CPU)
            .args(["--json", "-q", "--label", &label, "--db", &url])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start ratelab");
        (label, child)
    };
    for burst in 0..2 {
        let children: Vec<(String, Child)> =
            (0..4).map(|p| start(format!("b{burst}p{p}"))).collect();
        for (label, child) in children {
            let output = child.wait_with_output().unwrap();
            assert!(
                output.status.success(),
                "{label}: {}",
                String::from_utf8_lossy(&output.stderr)
            );
            let printed = common::json(&output.stdout);
            let id = printed["run_id"].as_i64().expect("stored with an id");
            let (_, shown, err) = answer(&url, &["results", "show", &id.to_string(), "--json"]);
            assert_eq!(common::json(shown.as_bytes()), printed, "{label}: {err}");
            assert_eq!(printed["label"], label.as_str());
        }
    }
    let runs = stored_runs(&url);
    assert_eq!(runs.len(), 8, "{runs:#?}");
    let mut labels: Vec<&str> = runs.iter().map(|r| r["label"].as_str().unwrap()).collect();
    labels.sort();
    labels.dedup();
    assert_eq!(labels.len(), 8);
    assert!(runs.iter().all(|r| r["status"] == "complete"));

    // Four imports of one database at once store each of its runs once.
    let imports: Vec<Child> = (0..4)
        .map(|_| {
            with_password()
                .args([
                    "results",
                    "import",
                    &fixture("runs-61f461b.db"),
                    "--db",
                    &url,
                ])
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for child in imports {
        let output = child.wait_with_output().unwrap();
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    assert_eq!(stored_runs(&url).len(), 8 + 15);
}

#[test]
fn every_results_verb_reads_the_same_from_postgres_as_from_sqlite() {
    let Some(cluster) = Cluster::start("every_results_verb_reads_the_same") else {
        return;
    };
    let url = cluster.create("same");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("results.db");
    let file = file.to_str().unwrap();
    for name in ["runs-61f461b.db", "runs-a1ad702.db"] {
        // A copy: importing reads the file and must leave the committed one as it is.
        let source = dir.path().join(name);
        std::fs::copy(fixture(name), &source).unwrap();
        for db in [url.as_str(), file] {
            let (code, _, err) = answer(db, &["results", "import", source.to_str().unwrap()]);
            assert_eq!(code, Some(0), "{err}");
        }
    }
    // The same database imported twice adds nothing.
    let again = dir.path().join("runs-61f461b.db");
    let (_, said, _) = answer(&url, &["results", "import", again.to_str().unwrap()]);
    assert!(said.contains("0 of 15 runs imported"), "{said}");

    let runs = stored_runs(file);
    assert_eq!(runs.len(), 17);
    assert_eq!(stored_runs(&url), runs);
    let same = |args: &[&str]| {
        let from_file = answer(file, args);
        let from_server = answer(&url, args);
        assert_eq!(from_server, from_file, "{args:?}");
    };
    // The list's first line names where it looked; the table below it must agree.
    let table = |db: &str, args: &[&str]| {
        let (code, out, err) = answer(db, &[&["results", "list"], args].concat());
        assert_eq!(code, Some(0), "{err}");
        out.lines().skip(1).collect::<Vec<_>>().join("\n")
    };
    for filter in [
        &[][..],
        &["--machine", "XEON", "--label", "fixture-ta"],
        &["--kind", "net"],
        &["--target", "/files", "--since", "2026-11-24"],
        &["--until", "2026-11-23"],
    ] {
        assert_eq!(table(&url, filter), table(file, filter), "{filter:?}");
        same(&[&["results", "list", "--json"], filter].concat());
    }
    for run in &runs {
        let id = run["run_id"].to_string();
        same(&["results", "show", &id]);
        same(&["results", "show", &id, "--json"]);
        same(&["results", "show", &id, "--brief"]);
        same(&["results", "report", &id, "--out", "-"]);
        for format in ["json", "csv", "series"] {
            same(&["results", "export", &id, "--format", format]);
        }
    }
    same(&["results", "show", "99"]);
    let ids = |verb: &str| -> Vec<String> {
        runs.iter()
            .filter(|r| r["verb"] == verb)
            .map(|r| r["run_id"].to_string())
            .collect()
    };
    for verb in ["disk", "net", "image"] {
        let group = ids(verb);
        let args: Vec<&str> = ["results", "compare"]
            .into_iter()
            .chain(group.iter().map(String::as_str))
            .collect();
        same(&args);
    }
}

#[test]
fn an_interrupted_run_is_kept_incomplete_in_postgres() {
    let Some(cluster) = Cluster::start("an_interrupted_run_is_kept_incomplete") else {
        return;
    };
    let url = cluster.create("stops");
    let dir = common::disk_tempdir();
    let target = dir.path().join("target");
    std::fs::create_dir(&target).unwrap();
    let child = with_password()
        .arg("disk")
        .arg(&target)
        .args(["--sizes", "256M,256M", "--direct", "--block-size", "4K"])
        .args(["--phase", "write", "--json", "-q", "--db", &url])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    common::wait_for_work_folder(&target);
    std::thread::sleep(std::time::Duration::from_millis(300));
    let output = common::stop_with(child, rustix::process::Signal::INT);
    let printed = common::json(&output.stdout);
    assert_eq!(printed["status"], "incomplete");
    let (_, shown, _) = answer(&url, &["results", "show", "1", "--json"]);
    assert_eq!(common::json(shown.as_bytes()), printed);
    assert!(common::entries(&target).is_empty());
}

#[test]
fn credentials_come_from_the_url_the_environment_or_pgpass_and_are_never_printed() {
    let Some(cluster) = Cluster::start("credentials_never_printed") else {
        return;
    };
    let url = cluster.create("secrets");
    let dir = tempfile::tempdir().unwrap();
    let clean = || {
        let mut command = ratelab();
        command
            .env_remove("PGPASSWORD")
            .env_remove("RATELAB_DB")
            .env("PGPASSFILE", dir.path().join("none"));
        command
    };
    let check_silent = |output: &std::process::Output| {
        for stream in [&output.stdout, &output.stderr] {
            let text = String::from_utf8_lossy(stream);
            assert!(!text.contains(PASSWORD), "the password is printed: {text}");
            assert!(
                !text.contains("wrong-pw-5521"),
                "a password is printed: {text}"
            );
        }
    };

    // No password anywhere: refused, saying so (exit 3: the environment refused).
    let output = clean()
        .args(QUICK_CPU)
        .args(["-q", "--db", &url])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&output.stderr).contains("password missing"));

    // A wrong password in the URL: the server's refusal, without the password.
    let wrong = url.replace("postgres@", "postgres:wrong-pw-5521@");
    let output = clean()
        .args(["results", "list", "--db", &wrong])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&output.stderr).contains("password authentication failed"));
    check_silent(&output);

    // A URL that cannot be parsed: bad usage, named by the flag, without the password.
    let bad = wrong.replace(":5432/", ":54x32/");
    let output = clean()
        .args(["results", "list", "--db", &bad])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("--db"));
    check_silent(&output);

    // The password in the URL, then from ~/.pgpass (PGPASSFILE), then from RATELAB_DB.
    let with_url = url.replace("postgres@", &format!("postgres:{PASSWORD}@"));
    let output = clean()
        .args(QUICK_CPU)
        .args(["--label", "url", "--db", &with_url])
        .output()
        .unwrap();
    assert!(output.status.success());
    check_silent(&output);

    let pgpass = dir.path().join("pgpass");
    std::fs::write(
        &pgpass,
        format!("# the rig\nlocalhost:5432:secrets:postgres:{PASSWORD}\n"),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&pgpass, std::fs::Permissions::from_mode(0o600)).unwrap();
    let output = clean()
        .env("PGPASSFILE", &pgpass)
        .args(QUICK_CPU)
        .args(["--label", "pgpass", "--db", &url])
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    check_silent(&output);

    let output = clean()
        .env("RATELAB_DB", &with_url)
        .args(["results", "list"])
        .output()
        .unwrap();
    assert!(output.status.success());
    check_silent(&output);
    let listed = String::from_utf8_lossy(&output.stdout);
    assert!(
        listed.contains("2 runs in postgres://postgres@/secrets"),
        "{listed}"
    );
    let output = clean()
        .env("RATELAB_DB", &with_url)
        .args(["results", "--help"])
        .output()
        .unwrap();
    check_silent(&output);
    assert!(Path::new(&pgpass).exists());
}
