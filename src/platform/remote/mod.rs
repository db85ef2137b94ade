//! Reaching other hosts over OpenSSH: the ssh command and remote quoting, putting this
//! ratelab on a host, a ratelab process running there (started, followed, stopped as
//! Ctrl-C would stop it), and the far end of a network test. Nothing of ratelab listens
//! on any host for this: ssh, its keys and its config do the reaching.

pub mod deploy;
mod process;
mod serve;
pub mod ssh;

pub use process::{Ended, RemoteRun};
pub use serve::{RemoteServer, serve};

/// A host to reach.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Host {
    /// Its name in reports; the destination when none is given.
    #[serde(default)]
    pub name: String,
    /// The ssh destination (`user@host`, `ssh://user@host:port`, a Host of ssh_config).
    pub ssh: String,
}

/// The last non-empty line a program wrote, for a reason in one line.
pub fn last_line(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes)
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("(it said nothing)")
        .trim()
        .to_string()
}

/// Reads all of a child's pipe.
fn read_all(mut pipe: impl std::io::Read) -> String {
    let mut text = String::new();
    let _ = pipe.read_to_string(&mut text);
    text
}
