//! Shared test helpers: the ratelab binary, and rigs of real kernel objects (a slow
//! disk: a loop device throttled by a blkio cgroup) built and torn down by each test.
//!
//! The rule of the rig tests: a test catches a 20% error in the figure it is named
//! for, both ways. A try may be made again only for a cause the test measures itself,
//! apart from that figure: the hypervisor's steal and other processes' CPU, read from
//! /proc/stat and /proc/PID/stat by [`load::Load`], never ratelab's verdict on its own
//! run. Checks a busy CPU cannot move (counts, bookkeeping, both ends of one test
//! agreeing, eviction, exit codes, names) are made outside [`check`], never excused.
//! Every bound has two sides. Under `CI` nothing passes unchecked: a test whose every
//! try was disturbed fails, and so does a skip.

#![allow(dead_code)]

pub mod delay_line;
pub mod fuse;
pub mod golden;
pub mod iperf3_peers;
pub mod judge;
pub mod load;
pub mod net_server;
pub mod netns;
pub mod postgres;
pub mod rig;
pub mod ssh_hosts;

use std::path::Path;
use std::process::Command;

/// The ratelab binary built for these tests, kept off the user's results.
pub fn ratelab() -> Command {
    let mut command = Command::new(assert_cmd::cargo::cargo_bin!("ratelab"));
    isolated(&mut command);
    command
}

/// Where every ratelab the tests start keeps its default results: a folder of the
/// suite's own, never the user's (`$XDG_DATA_HOME` or `~/.local/share`). Tests give
/// `--db` or `--no-store`, so nothing should appear here.
pub fn data_home() -> std::path::PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("data-home")
}

/// `command`, and whatever it starts, with the suite's data folder and no RATELAB_DB
/// from the user's environment: every helper that starts a program goes through it.
pub fn isolated(command: &mut Command) -> &mut Command {
    command
        .env("XDG_DATA_HOME", data_home())
        .env_remove("RATELAB_DB")
}

/// The path of the ratelab binary, for wrappers that start it (a cgroup, a namespace).
pub fn bin() -> std::path::PathBuf {
    assert_cmd::cargo::cargo_bin!("ratelab").to_path_buf()
}

/// Whether the tests run as root.
pub fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

/// What the slow-disk rig needs root for, as skip messages say it.
pub const RIG_NEEDS: &str = "it builds a loop device and a blkio cgroup";

/// Says on stderr why `test` does not run here. Under CI (the `CI` variable set) as root,
/// where .ci/run has installed every peer and every rig can be built, a test that would
/// skip fails instead: CI never passes a test it did not run.
pub fn skip(test: &str, why: &str) {
    if std::env::var_os("CI").is_some() && is_root() {
        panic!("{test} would be skipped, which CI as root does not allow: {why}");
    }
    say(&format!("skipping {test}: {why}"));
}

/// True when the test may go on; otherwise says why it is skipped (see [`skip`]).
pub fn root_or_skip(test: &str, needs: &str) -> bool {
    if is_root() {
        true
    } else {
        skip(test, &format!("{needs}, which needs root"));
        false
    }
}

/// True when `program` is on PATH; otherwise says why `test` is skipped (see [`skip`]).
pub fn have_or_skip(test: &str, program: &str) -> bool {
    if have(program) {
        true
    } else {
        skip(
            test,
            &format!("{program} is not installed (.ci/run installs it)"),
        );
        false
    }
}

/// Whether a program is on PATH.
pub fn have(program: &str) -> bool {
    Command::new("sh")
        .arg("-c")
        .arg(format!("command -v {program}"))
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Files and folders directly under `dir`.
pub fn entries(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .map(|d| {
            d.filter_map(Result::ok)
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// A temporary folder in /tmp with permissions `mode`: one the user nobody can reach
/// (the build folder may sit in a home folder nobody cannot enter).
pub fn nobody_tempdir(mode: u32) -> tempfile::TempDir {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::Builder::new()
        .prefix("ratelab-test-")
        .tempdir_in("/tmp")
        .expect("create a temporary folder");
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(mode))
        .expect("set the folder's permissions");
    dir
}

/// `program` run as the user nobody (uid and gid 65534, no other groups).
pub fn as_nobody(program: impl AsRef<std::ffi::OsStr>) -> Command {
    let mut command = Command::new("setpriv");
    isolated(&mut command)
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(program);
    command
}

/// A temporary folder on the disk that holds the build, not on a tmpfs.
pub fn disk_tempdir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("ratelab-test-")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .expect("create a temporary folder")
}

/// Parses a run document printed with --json.
pub fn json(stdout: &[u8]) -> serde_json::Value {
    serde_json::from_slice(stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not one JSON document ({e}):\n{}",
            String::from_utf8_lossy(stdout)
        )
    })
}

/// Waits until ratelab has created its work folder under `dir`.
pub fn wait_for_work_folder(dir: &Path) {
    let started = std::time::Instant::now();
    while !entries(dir).iter().any(|e| e.starts_with("ratelab-")) {
        assert!(
            started.elapsed() < std::time::Duration::from_secs(20),
            "no work folder appeared in {}",
            dir.display()
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

/// Sends `signal` to a running ratelab, waits for it, checks it exited 130 (SPEC.md's
/// code for an interrupted run) and returns its output.
pub fn stop_with(
    child: std::process::Child,
    signal: rustix::process::Signal,
) -> std::process::Output {
    let pid = rustix::process::Pid::from_child(&child);
    rustix::process::kill_process(pid, signal).expect("signal the child");
    let output = child.wait_with_output().expect("wait for the child");
    assert_eq!(
        output.status.code(),
        Some(130),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

/// Runs ratelab with `args` and `--db DB`, which must succeed; returns stdout.
pub fn stdout_with_db(args: &[&str], db: &Path) -> String {
    let output = ratelab()
        .args(args)
        .arg("--db")
        .arg(db)
        .output()
        .expect("start ratelab");
    assert!(
        output.status.success(),
        "{args:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).expect("stdout is UTF-8")
}

/// `ratelab results ARGS... --db DB`, which must succeed; returns stdout.
pub fn results(db: &Path, args: &[&str]) -> String {
    stdout_with_db(&[&["results"], args].concat(), db)
}

/// Runs a command that must succeed and print one JSON document; returns it.
pub fn run_json(command: &mut Command) -> serde_json::Value {
    let output = command.output().expect("start the command");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{command:?} failed: {stderr}");
    json(&output.stdout)
}

/// Writes a line to stderr past the test harness's capture, so that the suite's output
/// shows it for a test that passes (how it passed).
#[allow(dead_code)]
pub fn say(line: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr().lock(), "{line}");
}

/// The `disturbed` verdict of a run document (its message), if it has one.
#[allow(dead_code)]
pub fn disturbed(doc: &serde_json::Value) -> Option<String> {
    doc["verdicts"]
        .as_array()?
        .iter()
        .find(|v| v["code"] == "disturbed")
        .map(|v| v["message"].as_str().unwrap_or_default().to_string())
}

/// The stored run `id` as its JSON document.
pub fn stored_run(db: &Path, id: i64) -> serde_json::Value {
    run_json(
        ratelab()
            .args(["results", "show", &id.to_string(), "--json", "--db"])
            .arg(db),
    )
}

/// The run stored as `id` in `db` (by a server, in its own time), once it is there.
#[allow(dead_code)]
pub fn wait_stored(db: &Path, id: usize) -> serde_json::Value {
    let started = std::time::Instant::now();
    loop {
        let output = ratelab()
            .args(["results", "show", &id.to_string(), "--json", "--db"])
            .arg(db)
            .output()
            .unwrap();
        if output.status.success() {
            return json(&output.stdout);
        }
        assert!(
            started.elapsed() < net_server::PATIENCE,
            "run {id} was never stored"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// Every stored run, newest first, as `results list --json` prints them.
pub fn stored_runs(db: &Path) -> serde_json::Value {
    run_json(
        ratelab()
            .args(["results", "list", "--json", "--db"])
            .arg(db),
    )
}

/// A quick complete run with the null engine, stored in `db`: the earlier run that
/// later failures must leave untouched.
pub fn earlier_run(target: &Path, db: &Path) {
    run_json(
        ratelab()
            .args([
                "disk",
                target.to_str().unwrap(),
                "--engine",
                "null",
                "--sizes",
                "1M",
                "--json",
                "-q",
                "--db",
            ])
            .arg(db),
    );
}

/// Runs a command that must fail with exit `code`, print nothing on stdout and name
/// every one of `expect` on stderr; returns stderr.
pub fn refused(command: &mut Command, code: i32, expect: &[&str]) -> String {
    let output = command.output().expect("start the command");
    let message = String::from_utf8_lossy(&output.stderr).into_owned();
    assert_eq!(output.status.code(), Some(code), "{command:?}: {message}");
    for text in expect {
        assert!(
            message.contains(text),
            "{command:?}: {text:?} missing from: {message}"
        );
    }
    assert!(
        output.stdout.is_empty(),
        "stdout holds: {}",
        String::from_utf8_lossy(&output.stdout)
    );
    message
}

/// Runs `ratelab disk TARGET --no-store EXTRA...`, which must be refused (see [`refused`]).
pub fn disk_refused(target: &Path, extra: &[&str], code: i32, expect: &[&str]) -> String {
    refused(
        ratelab()
            .arg("disk")
            .arg(target)
            .arg("--no-store")
            .args(extra),
        code,
        expect,
    )
}

/// A verb that stores a complete run in a fraction of a second: one short cpu test.
pub const QUICK_CPU: [&str; 7] = [
    "cpu",
    "--test",
    "int",
    "--threads",
    "1",
    "--seconds",
    "0.05",
];

/// Writes `key` (and a newline) to `dir/name` as a key file must be: its owner's alone
/// (mode 0600); gives its path.
pub fn key_file(dir: &Path, name: &str, key: &str) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt as _;
    let path = dir.join(name);
    std::fs::write(&path, format!("{key}\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    path
}

/// Writes a compressible text of `bytes` bytes or a few more to `path`: lines of
/// words and numbers, as logs are.
pub fn write_text(path: &Path, bytes: usize) {
    std::fs::write(path, text(bytes)).expect("write the test file");
}

/// A compressible text of `bytes` bytes or a few more: lines of words and numbers, as
/// logs are.
pub fn text(bytes: usize) -> String {
    let words = [
        "rate", "limit", "step", "disk", "wait", "thread", "core", "link",
    ];
    let mut text = String::with_capacity(bytes + 64);
    let mut n: u64 = 7;
    while text.len() < bytes {
        n = n
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        text.push_str(words[(n >> 61) as usize]);
        text.push_str(if n & 7 == 0 { "\n" } else { " " });
        text.push_str(&(n >> 48).to_string());
        text.push(' ');
    }
    text
}

/// `yes > /dev/null` processes keeping cores busy, killed when dropped, however the
/// test ends.
#[allow(dead_code)]
pub struct BusyCores(Vec<std::process::Child>);

#[allow(dead_code)]
impl BusyCores {
    /// `n` of them, each free to run on any core.
    pub fn start(n: usize) -> BusyCores {
        BusyCores(
            (0..n)
                .map(|_| {
                    std::process::Command::new("yes")
                        .stdout(std::process::Stdio::null())
                        .spawn()
                        .expect("start yes")
                })
                .collect(),
        )
    }
}

impl Drop for BusyCores {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// How one try of a test whose figures need the machine's CPUs went.
#[allow(dead_code)]
pub enum Try {
    /// Its figures were checked.
    Checked,
    /// Its figures were checked and held though other work took the machine, in words.
    Held(String),
    /// Other work took the machine, measured by the test (its words), and a figure
    /// failed.
    Disturbed(String),
}

/// One try's checks of a run's figures, with what other work took from the machine
/// while it ran, as [`load::Load::disturbed`] measured it: a try whose figures hold is
/// checked, whatever the machine did; one whose checks fail while other work took the
/// machine is a disturbed try, the failed check in its words; on a machine other work
/// left alone a failed check fails the test. Only figures belong in `checks`: counts,
/// names and both ends' agreement are asserted before it.
#[allow(dead_code)]
pub fn check(disturbed: Option<String>, checks: impl FnOnce() -> Try) -> Try {
    let Some(why) = disturbed else {
        return checks();
    };
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(checks)) {
        Ok(Try::Checked | Try::Held(_)) => Try::Held(why),
        Ok(Try::Disturbed(also)) => Try::Disturbed(format!("{why}; {also}")),
        Err(panic) => {
            let failed = panic
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| panic.downcast_ref::<&str>().copied())
                .unwrap_or("a check failed");
            Try::Disturbed(format!("{why}; and a check failed: {failed}"))
        }
    }
}

/// Runs a test up to three times while other work, measured by the test, took the
/// machine from a try whose figures failed, saying so on the terminal each time;
/// passes at the first try checked. When every try was disturbed it passes as
/// disturbed, except under `CI`: there a figure must be checked. Whether a try was
/// checked.
#[allow(dead_code)]
pub fn up_to_three_tries(test: &str, mut attempt: impl FnMut(u32) -> Try) -> bool {
    let mut reasons = Vec::new();
    for n in 1..=3 {
        match attempt(n) {
            Try::Checked => {
                if n > 1 {
                    say(&format!("{test}: checked at try {n} of 3"));
                }
                return true;
            }
            Try::Held(why) => {
                say(&format!(
                    "{test}: checked at try {n} of 3, and the figures held though other work took the machine: {why}"
                ));
                return true;
            }
            Try::Disturbed(why) => {
                say(&format!(
                    "{test}: try {n} of 3 disturbed by other work: {why}"
                ));
                reasons.push(why);
            }
        }
    }
    if std::env::var_os("CI").is_some() {
        panic!(
            "{test}: every try was disturbed by other work, and under CI a figure must be checked: {}",
            reasons.join("; ")
        );
    }
    say(&format!(
        "{test}: passes as disturbed: other work took the machine in every try"
    ));
    false
}

/// The processes under `pid` now (children, theirs, and so on), with their names.
#[allow(dead_code)]
pub fn descendants(pid: u32) -> Vec<(u32, String)> {
    let processes: Vec<(u32, u32, String)> = std::fs::read_dir("/proc")
        .map(|entries| {
            entries
                .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
                .filter_map(|p| {
                    let stat = std::fs::read_to_string(format!("/proc/{p}/stat")).ok()?;
                    let close = stat.rfind(')')?;
                    let name = stat.get(stat.find('(')? + 1..close)?.to_string();
                    let ppid = stat.get(close + 2..)?.split(' ').nth(1)?.parse().ok()?;
                    Some((p, ppid, name))
                })
                .collect()
        })
        .unwrap_or_default();
    let mut found: Vec<(u32, String)> = Vec::new();
    let mut parents = vec![pid];
    while let Some(parent) = parents.pop() {
        for (p, ppid, name) in &processes {
            if *ppid == parent && !found.iter().any(|(f, _)| f == p) {
                found.push((*p, name.clone()));
                parents.push(*p);
            }
        }
    }
    found
}

/// The folder of the newest registry crate whose folder name starts with `prefix`, in
/// cargo's registry cache (`$CARGO_HOME`, or ~/.cargo): every machine that built
/// ratelab has its dependencies' sources there.
#[allow(dead_code)]
pub fn registry_crate(prefix: &str) -> std::path::PathBuf {
    let home = std::env::var_os("CARGO_HOME")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| {
            std::path::PathBuf::from(std::env::var_os("HOME").unwrap()).join(".cargo")
        });
    let src = home.join("registry").join("src");
    let mut found: Vec<std::path::PathBuf> = std::fs::read_dir(&src)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", src.display()))
        .filter_map(Result::ok)
        .flat_map(|index| std::fs::read_dir(index.path()).into_iter().flatten())
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().starts_with(prefix))
        .map(|e| e.path())
        .collect();
    found.sort();
    found
        .pop()
        .unwrap_or_else(|| panic!("no {prefix}* in {}", src.display()))
}

/// A Python program committing argv[2] rows of one each into the sqlite database
/// argv[1], every commit synced (`synchronous=FULL`): a journal written and synced, the
/// database written and synced, the journal deleted. With argv[3], each row's text is
/// first worked out by a loop of that many steps (CPU that stays where the disk goes).
/// The table stays, so it may run again on the same database.
#[allow(dead_code)]
pub const SQLITE_COMMITS: &str = "import sqlite3, sys\n\
db = sqlite3.connect(sys.argv[1], isolation_level=None)\n\
db.execute('PRAGMA synchronous=FULL')\n\
db.execute('CREATE TABLE IF NOT EXISTS t (id INTEGER PRIMARY KEY, v TEXT)')\n\
steps = int(sys.argv[3]) if len(sys.argv) > 3 else 0\n\
for i in range(int(sys.argv[2])):\n    \
v = str(sum(k * k for k in range(steps))) + 'x' * 100\n    \
db.execute('BEGIN')\n    \
db.execute('INSERT INTO t (v) VALUES (?)', (v,))\n    \
db.execute('COMMIT')\n";
