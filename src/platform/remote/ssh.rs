//! Reaching a host: the ssh program (`ssh` from PATH, or the command in `RATELAB_SSH`,
//! as rsync's `-e` and `GIT_SSH_COMMAND` allow, so that `-F FILE` or another client can
//! be given), and a fixed argv quoted for the remote shell, so that nothing from an
//! inventory reaches a shell unquoted.

use std::process::Command;

/// The environment variable that names the ssh command.
pub const SSH_VARIABLE: &str = "RATELAB_SSH";

/// `ssh`'s own exit status for a connection or authentication failure (ssh(1)).
pub const SSH_FAILED: i32 = 255;

/// The ssh command to run `remote` (a command line for the remote shell) on `destination`.
pub fn command(destination: &str, remote: &str) -> Command {
    let program = std::env::var(SSH_VARIABLE).unwrap_or_else(|_| "ssh".to_string());
    let mut words = program.split_whitespace();
    let mut command = Command::new(words.next().unwrap_or("ssh"));
    command.args(words);
    // `--` ends ssh's options: a destination that starts with `-` is not one of them.
    command.arg("--").arg(destination).arg(remote);
    command
}

/// One word quoted for a POSIX shell: in single quotes, each `'` closed, escaped and
/// reopened.
pub fn quote(word: &str) -> String {
    format!("'{}'", word.replace('\'', r"'\''"))
}

/// An argv as one command line for a POSIX shell.
pub fn quote_all<S: AsRef<str>>(argv: &[S]) -> String {
    argv.iter()
        .map(|w| quote(w.as_ref()))
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_word_reaches_the_remote_shell_as_one_literal_word() {
        let argv = ["profile", "--label", "it's $HOME; rm -rf / `x` \"y\""];
        let line = quote_all(&argv);
        let output = std::process::Command::new("sh")
            .arg("-c")
            .arg(format!("for w in {line}; do printf '%s\\n' \"$w\"; done"))
            .output()
            .unwrap();
        let words: Vec<String> = String::from_utf8(output.stdout)
            .unwrap()
            .lines()
            .map(str::to_string)
            .collect();
        assert_eq!(words, argv);
    }
}
