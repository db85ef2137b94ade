//! A verb on many hosts over OpenSSH, one host after another: ratelab is copied to a
//! host when its copy there is missing or differs, the verb runs there with `--json`,
//! and each host's run document comes back to be stored here with its machine. No agent
//! of ours listens anywhere: ssh, its keys and its config do the reaching.

mod deploy;
pub mod inventory;
mod remote;
pub mod ssh;

use std::time::Duration;

use crate::document::RunDocument;
use crate::workload::Cancel;
pub use inventory::Host;
use remote::RemoteRun;

/// How often a running host is looked at.
const POLL: Duration = Duration::from_millis(50);

/// What became of one host.
#[derive(Debug)]
pub enum Outcome {
    /// Its run came back (complete or not) as this document.
    Ran(Box<RunDocument>),
    /// It could not run the verb, and why.
    Failed(String),
}

/// The flags the fleet adds to every verb: the document on stdout, nothing stored there.
const ADDED: [&str; 3] = ["--json", "--no-store", "--quiet"];

/// Runs `verb` (its name and flags) on `host`, saying what it does through `say`; on
/// `cancel` (Ctrl-C, SIGTERM) the remote run is stopped and what it measured comes back.
pub fn run_on(host: &Host, verb: &[String], say: &dyn Fn(&str), cancel: &Cancel) -> Outcome {
    let binary = match deploy::ensure(host, say) {
        Ok(binary) => binary,
        Err(reason) => return Outcome::Failed(reason),
    };
    if cancel.is_set() {
        return Outcome::Failed("not started: interrupted".into());
    }
    let mut argv: Vec<String> = verb.to_vec();
    for flag in ADDED {
        let given = argv
            .iter()
            .any(|a| a == flag || (flag == "--quiet" && a == "-q"));
        if !given {
            argv.push(flag.to_string());
        }
    }
    say(&format!("{}: ratelab {}", host.name, verb.join(" ")));
    let mut run = match RemoteRun::start(host, &binary.remote_path(), &argv) {
        Ok(run) => run,
        Err(reason) => return Outcome::Failed(reason),
    };
    while !run.ended() {
        if cancel.is_set() {
            say(&format!("{}: stopping the run there", host.name));
            run.stop();
        }
        std::thread::sleep(POLL);
    }
    run.finish()
}

/// The last non-empty line a program wrote, for a reason in one line.
fn last_line(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes)
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("(it said nothing)")
        .trim()
        .to_string()
}

/// Reads all of a child's pipe, for the deploy steps.
fn read_all(mut pipe: impl std::io::Read) -> String {
    let mut text = String::new();
    let _ = pipe.read_to_string(&mut text);
    text
}
