//! A verb on many hosts over OpenSSH, one host after another: ratelab is copied to a
//! host when its copy there is missing or differs, the verb runs there with `--json`,
//! and each host's run document comes back to be stored here with its machine. No agent
//! of ours listens anywhere: ssh, its keys and its config do the reaching.

mod clock;
pub mod inventory;
mod together;

pub use together::run_together;

use std::time::Duration;

use crate::control::Cancel;
use crate::document::RunDocument;
pub use crate::platform::remote::Host;
use crate::platform::remote::{Ended, RemoteRun, deploy, ssh};

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
        return Outcome::Failed("not run: interrupted".into());
    }
    match start(host, &binary, verb, None, say) {
        Ok(mut run) => {
            follow(std::slice::from_mut(&mut run), say, cancel);
            outcome(run.finish())
        }
        Err(reason) => Outcome::Failed(reason),
    }
}

/// Starts `verb` on `host` as `binary`, with the flags the fleet adds, to start its
/// workloads at `start_at` (seconds since the Unix epoch on the host's clock) if given.
fn start(
    host: &Host,
    binary: &deploy::Binary,
    verb: &[String],
    start_at: Option<f64>,
    say: &dyn Fn(&str),
) -> Result<RemoteRun, String> {
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
    let env = start_at.map(|at| (crate::run::START_AT_VARIABLE, format!("{at:.6}")));
    RemoteRun::start(host, &binary.remote_path(), &argv, env)
}

/// Waits for every run to end, stopping them all on `cancel`.
fn follow(runs: &mut [RemoteRun], say: &dyn Fn(&str), cancel: &Cancel) {
    while runs.iter_mut().any(|run| !run.ended()) {
        if cancel.is_set() {
            for run in runs.iter_mut().filter(|r| !r.stopping()) {
                say(&format!("{}: stopping the run there", run.host().name));
                run.stop();
            }
        }
        std::thread::sleep(POLL);
    }
}

/// What a host's run came to: its run document, or why there is none.
fn outcome(ended: Ended) -> Outcome {
    if ended.code == Some(ssh::SSH_FAILED) {
        return Outcome::Failed(format!("ssh failed mid-run: {}", ended.last_error_line));
    }
    // A run that started prints its document even when it stops early.
    match serde_json::from_slice::<RunDocument>(&ended.stdout) {
        Ok(doc) => Outcome::Ran(Box::new(doc)),
        Err(_) => Outcome::Failed(format!(
            "ratelab {} exited {} there without a run document: {}",
            ended.verb,
            ended
                .code
                .map_or("on a signal".to_string(), |c| c.to_string()),
            ended.last_error_line
        )),
    }
}
