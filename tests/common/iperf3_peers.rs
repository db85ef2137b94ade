//! The iperf3 releases the interoperability tests run against: Debian's (3.12, the
//! `iperf3` on PATH) and the newest release, built from its source. esnet/iperf 3.22
//! comes from crates.io, the registry every machine that builds ratelab reaches, in the
//! crate iperf3-rs 1.0.4, which carries the release's source whole; it is checked
//! against the registry's SHA-256, configured and made once into target/tmp/peers
//! (under a lock, so test programs running at once build it once), and kept there for
//! later runs. RATELAB_IPERF3_NEWEST names another build to use instead.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

use sha2::Digest as _;

/// The newest iperf3 release, and where its source comes from.
const NEWEST: &str = "3.22";
const CRATE: &str = "iperf3-rs-1.0.4";
const CRATE_SHA256: &str = "c070710237c4a9cd1be2c1c1fa25abb5399cdf5b4fd4e3477f07ef7054e12056";

/// One iperf3 build.
#[derive(Debug, Clone)]
pub struct Iperf3 {
    /// The program.
    pub path: PathBuf,
    /// Its version, as `iperf3 --version` says it (`3.12`).
    pub version: String,
    /// Whether it was built with authentication (OpenSSL).
    pub authenticates: bool,
}

impl Iperf3 {
    fn of(path: PathBuf) -> Result<Iperf3, String> {
        let output = Command::new(&path)
            .arg("--version")
            .output()
            .map_err(|e| format!("cannot run {}: {e}", path.display()))?;
        let text = String::from_utf8_lossy(&output.stdout).into_owned();
        let version = text
            .split_whitespace()
            .nth(1)
            .ok_or_else(|| format!("{} --version said {text:?}", path.display()))?
            .to_string();
        Ok(Iperf3 {
            authenticates: text.contains("authentication"),
            path,
            version,
        })
    }

    /// A command running this iperf3.
    pub fn command(&self) -> Command {
        Command::new(&self.path)
    }

    /// Whether it is a release of at least `major.minor`.
    pub fn at_least(&self, major: u32, minor: u32) -> bool {
        let mut parts = self
            .version
            .split('.')
            .map(|p| p.parse::<u32>().unwrap_or(0));
        (parts.next().unwrap_or(0), parts.next().unwrap_or(0)) >= (major, minor)
    }
}

/// Debian's iperf3, on PATH.
pub fn debian() -> Result<Iperf3, String> {
    let found = std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .map(|dir| dir.join("iperf3"))
        .find(|p| p.is_file())
        .ok_or("iperf3 is not installed (apt-get install iperf3)")?;
    Iperf3::of(found)
}

/// The newest release: RATELAB_IPERF3_NEWEST, or built from its source once.
pub fn newest() -> Result<Iperf3, String> {
    if let Some(path) = std::env::var_os("RATELAB_IPERF3_NEWEST") {
        return Iperf3::of(PathBuf::from(path));
    }
    let peers = Path::new(env!("CARGO_TARGET_TMPDIR")).join("peers");
    std::fs::create_dir_all(&peers).map_err(|e| e.to_string())?;
    let program = peers.join(format!("iperf3-{NEWEST}"));
    let lock = std::fs::File::create(peers.join(".lock")).map_err(|e| e.to_string())?;
    rustix::fs::flock(&lock, rustix::fs::FlockOperation::LockExclusive)
        .map_err(|e| e.to_string())?;
    if !program.is_file() {
        build(&peers, &program)?;
    }
    Iperf3::of(program)
}

/// Both releases, Debian's first; a test that lacks one says why and goes on without
/// it (or fails, under CI: see [`super::skip`]).
pub fn both_or_skip(test: &str) -> Vec<Iperf3> {
    [debian(), newest()]
        .into_iter()
        .filter_map(|got| {
            got.map_err(|why| super::skip(test, &format!("an iperf3 release: {why}")))
                .ok()
        })
        .collect()
}

/// The newest release, or none after saying why (see [`super::skip`]).
pub fn newest_or_skip(test: &str) -> Option<Iperf3> {
    newest()
        .map_err(|why| super::skip(test, &format!("the newest iperf3: {why}")))
        .ok()
}

/// The most bytes a receiver's kernel holds that its program has not read
/// (net.ipv4.tcp_rmem's maximum): what a reader that falls behind, as iperf 3.12's one
/// thread does when it also sends, leaves unread when a test ends.
pub fn receive_buffer_max() -> u64 {
    std::fs::read_to_string("/proc/sys/net/ipv4/tcp_rmem")
        .ok()
        .and_then(|t| t.split_whitespace().nth(2)?.parse().ok())
        .unwrap_or(6 << 20)
}

/// Bytes a stream's two counts may differ by where an iperf3 sends and the test ends
/// before the receiver has drained: it counts as sent what it wrote, its send buffer
/// included (net.ipv4.tcp_wmem's maximum), and a receiver that falls behind on two busy
/// cores leaves a receive buffer unread.
pub fn buffers() -> u64 {
    let wmem = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_wmem")
        .ok()
        .and_then(|t| t.split_whitespace().nth(2)?.parse::<u64>().ok())
        .unwrap_or(4 << 20);
    wmem + receive_buffer_max()
}

/// Downloads the crate, checks it, and makes iperf3 from the release's source.
fn build(peers: &Path, program: &Path) -> Result<(), String> {
    let work = tempfile::tempdir_in(peers).map_err(|e| e.to_string())?;
    let archive = work.path().join(format!("{CRATE}.crate"));
    let url = format!("https://static.crates.io/crates/iperf3-rs/{CRATE}.crate");
    run(
        Command::new("curl")
            .args(["-fsSL", "--retry", "3", "-o"])
            .arg(&archive)
            .arg(&url),
        "download the iperf3 source (curl)",
    )?;
    let bytes = std::fs::read(&archive).map_err(|e| e.to_string())?;
    let sum = sha2::Sha256::digest(&bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect::<String>();
    if sum != CRATE_SHA256 {
        return Err(format!(
            "{url} has SHA-256 {sum}, not the registry's {CRATE_SHA256}"
        ));
    }
    run(
        Command::new("tar")
            .arg("xzf")
            .arg(&archive)
            .arg("-C")
            .arg(work.path()),
        "unpack the iperf3 source",
    )?;
    let source = work.path().join(CRATE).join("iperf3");
    run(
        Command::new("./configure")
            .args(["--disable-shared", "--without-sctp"])
            .current_dir(&source),
        "configure iperf3 (needs a C compiler and libssl-dev)",
    )?;
    run(
        Command::new("make")
            .args(["-j2", "-C", "src", "iperf3"])
            .current_dir(&source),
        "make iperf3",
    )?;
    // Renamed into place whole, so a build cut short leaves no program behind.
    let part = peers.join(format!(".iperf3-{NEWEST}.part"));
    std::fs::copy(source.join("src/iperf3"), &part).map_err(|e| e.to_string())?;
    std::fs::rename(&part, program).map_err(|e| e.to_string())
}

fn run(command: &mut Command, what: &str) -> Result<(), String> {
    let output = command
        .output()
        .map_err(|e| format!("cannot {what}: {e}"))?;
    if output.status.success() {
        return Ok(());
    }
    let stderr = String::from_utf8_lossy(&output.stderr);
    let tail: Vec<&str> = stderr.lines().rev().take(5).collect();
    Err(format!(
        "cannot {what}: {}: {}",
        output.status,
        tail.into_iter().rev().collect::<Vec<_>>().join(" | ")
    ))
}

/// Checks that a stored net run's two ends agree stream by stream: each stream's local
/// and remote bytes within 1% of the larger, or within `allowance_bytes` where a case
/// leaves buffers behind at its end (see [`receive_buffer_max`]); says the worst gap as
/// a share, for the test's log.
pub fn assert_streams_agree(what: &str, doc: &serde_json::Value, allowance_bytes: u64) -> f64 {
    let items = doc["workloads"][0]["items"].as_array().expect("items");
    let bytes_of = |stream: u64, side: &str| {
        items
            .iter()
            .find(|i| i["scope"] == "stream" && i["stream"] == stream && i["side"] == side)
            .map(|i| {
                (
                    i["op"].as_str().unwrap().to_string(),
                    i["bytes"].as_u64().unwrap(),
                )
            })
    };
    let streams = items
        .iter()
        .filter(|i| i["scope"] == "stream")
        .filter_map(|i| i["stream"].as_u64())
        .max()
        .expect("stream items");
    let mut worst: f64 = 0.0;
    for stream in 0..=streams {
        let (local_op, local) = bytes_of(stream, "local").expect("a local stream end");
        let (remote_op, remote) = bytes_of(stream, "remote").expect("a remote stream end");
        assert_ne!(
            local_op, remote_op,
            "{what}: stream {stream} has one role at both ends"
        );
        assert!(
            local > 0 && remote > 0,
            "{what}: stream {stream}: {local} and {remote} bytes"
        );
        let gap = local.abs_diff(remote);
        let larger = local.max(remote);
        worst = worst.max(gap as f64 / larger as f64);
        assert!(
            gap * 100 <= larger || gap <= allowance_bytes,
            "{what}: stream {stream}: local {local_op} {local} bytes, remote {remote_op} {remote}: \
             {:.2}% apart",
            100.0 * gap as f64 / larger as f64
        );
    }
    worst
}

/// An RSA key pair and an authorized-users file as iperf3's documentation makes them,
/// for user `mario` with password `rossi`.
pub struct Credentials {
    dir: tempfile::TempDir,
}

impl Credentials {
    /// Makes them in a folder of their own.
    pub fn make() -> Credentials {
        let dir = tempfile::tempdir().unwrap();
        let key = rsa::PrivateKey::new(&mut rand::rng(), 2048).unwrap();
        use rsa::pkcs8::{EncodePrivateKey, EncodePublicKey, LineEnding};
        std::fs::write(
            dir.path().join("private.pem"),
            key.to_pkcs8_pem(LineEnding::LF).unwrap().as_bytes(),
        )
        .unwrap();
        std::fs::write(
            dir.path().join("public.pem"),
            key.to_public_key()
                .to_public_key_pem(LineEnding::LF)
                .unwrap(),
        )
        .unwrap();
        std::fs::write(
            dir.path().join("users.csv"),
            // sha256("{mario}rossi"), as iperf3's documentation has it.
            "# user,sha256 of {user}password\nmario,bf7a49a846d44b454a5d11e7acfaf13d138bbe0b7483aa3e050879700572709b\n",
        )
        .unwrap();
        Credentials { dir }
    }

    /// A file of theirs: `private.pem`, `public.pem` or `users.csv`.
    pub fn path(&self, name: &str) -> String {
        self.dir.path().join(name).to_str().unwrap().to_string()
    }

    /// The server's options that check them.
    pub fn server_args(&self) -> Vec<String> {
        vec![
            "--rsa-private-key-path".into(),
            self.path("private.pem"),
            "--authorized-users-path".into(),
            self.path("users.csv"),
        ]
    }

    /// An iperf3 client of 127.0.0.1:`port` that presents them, with `password`.
    pub fn client(&self, iperf3: &Iperf3, port: u16, password: &str) -> Command {
        let mut command = iperf3.command();
        command
            .args(["-c", "127.0.0.1", "-p", &port.to_string()])
            .args(["-t", "1", "--username", "mario", "--rsa-public-key-path"])
            .arg(self.path("public.pem"))
            .env("IPERF3_PASSWORD", password);
        command
    }
}

/// Checks a test paced with --fq-rate at `pace` bits per second: never above it (the
/// pace took effect: unpaced, loopback carries 24-35 Gbit/s here) and near it. The
/// kernel paces on timers, which fire late on a host that steals the CPUs: beside 9-12%
/// steal this VM paced 2 Gbit/s at 0.85-0.91 of it, and CI at 0.91. A 20% shortfall
/// fails; the steal that makes one is the test's own cause to try again
/// (`load::Load`).
#[allow(dead_code)]
pub fn assert_paced(what: &str, bits: f64, pace: f64) {
    assert!(
        (0.85..=1.05).contains(&(bits / pace)),
        "{what}: paced at {pace} bit/s, it moved {bits} ({:.3} of the pace)",
        bits / pace
    );
}
