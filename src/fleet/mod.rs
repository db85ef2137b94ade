//! A verb on many hosts over OpenSSH, one host after another: ratelab is copied to a
//! host when its copy there is missing or differs, the verb runs there with `--json`,
//! and each host's run document comes back to be stored here with its machine. No agent
//! of ours listens anywhere: ssh, its keys and its config do the reaching.

mod deploy;
pub mod inventory;
pub mod ssh;

use std::process::Stdio;

use crate::document::RunDocument;
pub use inventory::Host;

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

/// Runs `verb` (its name and flags) on `host`, saying what it does through `say`.
pub fn run_on(host: &Host, verb: &[String], say: &dyn Fn(&str)) -> Outcome {
    let binary = match deploy::ensure(host, say) {
        Ok(binary) => binary,
        Err(reason) => return Outcome::Failed(reason),
    };
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
    let remote = format!("exec {} {}", binary.remote_path(), ssh::quote_all(&argv));
    let mut command = ssh::command(&host.ssh, &remote);
    command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let output = match command.output() {
        Ok(output) => output,
        Err(e) => return Outcome::Failed(format!("cannot start ssh: {e}")),
    };
    let stderr = last_line(&output.stderr);
    if output.status.code() == Some(ssh::SSH_FAILED) {
        return Outcome::Failed(format!("ssh failed mid-run: {stderr}"));
    }
    // A run that started prints its document even when it stops early.
    match serde_json::from_slice::<RunDocument>(&output.stdout) {
        Ok(doc) => Outcome::Ran(Box::new(doc)),
        Err(_) => Outcome::Failed(format!(
            "ratelab {} exited {} there without a run document: {stderr}",
            verb.first().map_or("", String::as_str),
            output
                .status
                .code()
                .map_or("on a signal".to_string(), |c| c.to_string())
        )),
    }
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
