//! `--no-store` opens no database, and the suite never touches the results of the user
//! running it: both proved with another user's read-only results database where the
//! default one would be.

mod common;

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};

use common::net_server::Server;

/// A home folder whose default results database is root's, read-only (0644), as a user
/// meets it when root ran ratelab with HOME unchanged. Gives the folder and the file.
fn home_with_roots_database() -> (tempfile::TempDir, PathBuf) {
    let home = tempfile::tempdir().unwrap();
    std::fs::set_permissions(home.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let folder = home.path().join(".local/share/ratelab");
    std::fs::create_dir_all(&folder).unwrap();
    for dir in [".local", ".local/share", ".local/share/ratelab"] {
        std::fs::set_permissions(
            home.path().join(dir),
            std::fs::Permissions::from_mode(0o755),
        )
        .unwrap();
    }
    let db = folder.join("results.db");
    let made = common::ratelab()
        .args([
            "cpu",
            "--test",
            "int",
            "--threads",
            "1",
            "--seconds",
            "100ms",
        ])
        .args(["-q", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
    std::fs::set_permissions(&db, std::fs::Permissions::from_mode(0o644)).unwrap();
    (home, db)
}

/// The file's bytes and modification time.
fn fingerprint(path: &Path) -> (Vec<u8>, std::time::SystemTime) {
    (
        std::fs::read(path).unwrap(),
        std::fs::metadata(path).unwrap().modified().unwrap(),
    )
}

#[test]
fn no_store_runs_as_a_user_whose_default_database_is_another_users() {
    let test = "no_store_runs_as_a_user_whose_default_database_is_another_users";
    if !common::root_or_skip(test, "another user to run as (setpriv)") {
        return;
    }
    let (home, db) = home_with_roots_database();
    let before = fingerprint(&db);
    let target = common::nobody_tempdir(0o777);
    let server = Server::start(&["--no-store"]);
    let port = server.address().port().to_string();
    let verbs: [&[&str]; 4] = [
        &[
            "cpu",
            "--test",
            "int",
            "--threads",
            "1",
            "--seconds",
            "200ms",
        ],
        &[
            "disk",
            target.path().to_str().unwrap(),
            "--sizes",
            "1M",
            "--repeat",
            "1",
        ],
        &[
            "iops",
            target.path().to_str().unwrap(),
            "--size",
            "8M",
            "--tests",
            "RND4K-Q1T1",
            "--seconds",
            "0.2",
        ],
        &["net", "127.0.0.1", "-p", &port, "-t", "1"],
    ];
    for verb in verbs {
        // As that user would run it: HOME is the folder with root's database, and no
        // XDG_DATA_HOME says otherwise.
        let output = common::as_nobody(common::bin())
            .env("HOME", home.path())
            .env_remove("XDG_DATA_HOME")
            .args(verb)
            .args(["--no-store", "-q"])
            .output()
            .unwrap();
        assert_eq!(
            output.status.code(),
            Some(0),
            "{verb:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    assert!(fingerprint(&db) == before, "root's database changed");
    assert_eq!(common::entries(target.path()), Vec::<String>::new());
}

#[test]
fn the_suites_ratelab_keeps_its_results_apart_from_the_users() {
    let (home, db) = home_with_roots_database();
    let before = fingerprint(&db);
    // A run stored the default way, by the helper every test starts ratelab with, with
    // HOME at the folder holding root's database: it goes to the suite's own folder.
    let stored = common::ratelab()
        .env("HOME", home.path())
        .args([
            "cpu",
            "--test",
            "int",
            "--threads",
            "1",
            "--seconds",
            "100ms",
            "-q",
        ])
        .output()
        .unwrap();
    assert!(
        stored.status.success(),
        "{}",
        String::from_utf8_lossy(&stored.stderr)
    );
    assert!(fingerprint(&db) == before, "the user's database changed");
    assert!(common::data_home().join("ratelab/results.db").exists());
    // And the user's RATELAB_DB does not reach it either.
    let mut command = common::ratelab();
    let envs: Vec<_> = command.get_envs().collect();
    assert!(envs.contains(&(std::ffi::OsStr::new("RATELAB_DB"), None)));
    assert!(envs.contains(&(
        std::ffi::OsStr::new("XDG_DATA_HOME"),
        Some(common::data_home().as_os_str())
    )));
    let _ = command.arg("--version").output();
}
