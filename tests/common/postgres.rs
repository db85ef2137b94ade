//! A throwaway PostgreSQL cluster for the shared store's tests: `initdb` into the test's
//! temporary folder (with a password, so credentials are handled as on a real server),
//! started by `pg_ctl` on a private socket folder and no TCP port, stopped and removed
//! when the test ends, even when it fails.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The password of the cluster's `postgres` user.
pub const PASSWORD: &str = "rig-pw-7f3a91c2";

/// A running cluster.
pub struct Cluster {
    dir: tempfile::TempDir,
    bin: PathBuf,
}

/// The folder of PostgreSQL's server programs (Debian keeps them out of PATH).
fn server_bin() -> Option<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path().join("bin")))
        .filter(|bin| bin.join("initdb").exists() && bin.join("pg_ctl").exists())
        .collect();
    found.sort();
    found.pop()
}

impl Cluster {
    /// Makes and starts a cluster, or says why `test` is skipped.
    pub fn start(test: &str) -> Option<Cluster> {
        let Some(bin) = server_bin() else {
            super::skip(
                test,
                "PostgreSQL's server is not installed (.ci/run installs postgresql)",
            );
            return None;
        };
        let dir = tempfile::tempdir().expect("make the cluster's folder");
        let password = dir.path().join("password");
        std::fs::write(&password, PASSWORD).unwrap();
        if super::is_root() {
            // initdb refuses root: the cluster belongs to the postgres user.
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
            let chown = Command::new("chown")
                .args(["-R", "postgres"])
                .arg(dir.path())
                .status()
                .unwrap();
            assert!(chown.success());
        }
        let cluster = Cluster { dir, bin };
        cluster.server(
            "initdb",
            &[
                "-D",
                cluster.data().to_str().unwrap(),
                "-U",
                "postgres",
                "-A",
                "scram-sha-256",
                "--pwfile",
                password.to_str().unwrap(),
                "--no-sync",
            ],
        );
        let options = format!(
            "-k {} -c listen_addresses= -c fsync=off",
            cluster.dir.path().display()
        );
        let log = cluster.dir.path().join("log");
        cluster.server(
            "pg_ctl",
            &[
                "-D",
                cluster.data().to_str().unwrap(),
                "-o",
                &options,
                "-l",
                log.to_str().unwrap(),
                "-w",
                "start",
            ],
        );
        Some(cluster)
    }

    fn data(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    /// Runs a server program as the cluster's owner; it must succeed.
    fn server(&self, program: &str, args: &[&str]) {
        let path = self.bin.join(program);
        let mut command = if super::is_root() {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(path);
            c
        } else {
            Command::new(path)
        };
        let output = command
            .args(args)
            .output()
            .expect("run a PostgreSQL program");
        assert!(
            output.status.success(),
            "{program} {args:?}: {}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }

    /// The URL of database `name`, without the password.
    pub fn url(&self, name: &str) -> String {
        let socket = self.dir.path().to_str().unwrap().replace('/', "%2F");
        format!("postgres://postgres@{socket}:5432/{name}")
    }

    /// The socket folder (PostgreSQL's host for a Unix socket).
    pub fn socket(&self) -> &Path {
        self.dir.path()
    }

    /// Creates database `name` and returns its URL.
    pub fn create(&self, name: &str) -> String {
        let output = Command::new("psql")
            .args(["-v", "ON_ERROR_STOP=1", "-h"])
            .arg(self.dir.path())
            .args(["-U", "postgres", "-d", "postgres", "-c"])
            .arg(format!("CREATE DATABASE {name}"))
            .env("PGPASSWORD", PASSWORD)
            .output()
            .expect("run psql");
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        self.url(name)
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let data = self.data();
        let path = self.bin.join("pg_ctl");
        let mut command = if super::is_root() {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(path);
            c
        } else {
            Command::new(path)
        };
        let _ = command
            .arg("-D")
            .arg(data)
            .args(["-m", "immediate", "-w", "stop"])
            .output();
    }
}
