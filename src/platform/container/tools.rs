//! Runs the external tools that make and attach containers (qemu-img, losetup, mkfs,
//! fsck, mount): they are the interfaces the kernel and QEMU support, and their own
//! messages say best what went wrong, so a failure quotes them.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use crate::error::Error;

/// How much of a tool's message an error quotes.
const QUOTE_CHARS: usize = 600;

/// Runs `command` to completion; on failure, an error saying it could not `op` `path`
/// and quoting the tool. Returns its stdout.
pub(super) fn run(command: &mut Command, op: &'static str, path: &Path) -> Result<String, Error> {
    let output = output(command, op, path)?;
    if output.status.success() {
        return Ok(String::from_utf8_lossy(&output.stdout).into_owned());
    }
    Err(Error::io(op, path, failure(command, &output)))
}

/// Runs `command` to completion and returns what it did, failed or not; only a tool
/// that cannot be started is an error.
pub(super) fn output(
    command: &mut Command,
    op: &'static str,
    path: &Path,
) -> Result<Output, Error> {
    command
        .stdin(Stdio::null())
        .output()
        .map_err(|e| Error::io(op, path, started(command, e)))
}

/// The error of a tool that could not be started.
pub(super) fn started(command: &Command, e: std::io::Error) -> std::io::Error {
    let program = program(command);
    match e.kind() {
        std::io::ErrorKind::NotFound => {
            std::io::Error::other(format!("{program} is not installed"))
        }
        _ => std::io::Error::other(format!("cannot run {program}: {e}")),
    }
}

/// What a tool that failed said: its command line, exit status and message.
pub(super) fn failure(command: &Command, output: &Output) -> std::io::Error {
    let status = match output.status.code() {
        Some(code) => format!("exited with {code}"),
        None => "was killed by a signal".to_string(),
    };
    let mut said = String::from_utf8_lossy(&output.stderr).trim().to_string();
    if said.is_empty() {
        said = String::from_utf8_lossy(&output.stdout).trim().to_string();
    }
    let line = command_line(command);
    if said.is_empty() {
        std::io::Error::other(format!("{line} {status}"))
    } else {
        std::io::Error::other(format!("{line} {status}: {}", quote(&said)))
    }
}

/// `program arg...` as a person would type it.
pub(super) fn command_line(command: &Command) -> String {
    std::iter::once(command.get_program())
        .chain(command.get_args())
        .map(|part| part.to_string_lossy())
        .collect::<Vec<_>>()
        .join(" ")
}

/// A tool's message on one line, its end kept when it is long (the cause is last).
pub(super) fn quote(text: &str) -> String {
    let one_line = text
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty())
        .collect::<Vec<_>>()
        .join("; ");
    let chars = one_line.chars().count();
    if chars <= QUOTE_CHARS {
        return one_line;
    }
    let tail: String = one_line.chars().skip(chars - QUOTE_CHARS).collect();
    format!("...{tail}")
}

/// Whether `program` is an executable file on PATH (or a path to one).
pub(super) fn on_path(program: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let executable = |path: &Path| {
        std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if program.contains('/') {
        let path = PathBuf::from(program);
        return executable(&path).then_some(path);
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|candidate| executable(candidate))
}

fn program(command: &Command) -> String {
    command.get_program().to_string_lossy().into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_messages_keep_their_end_on_one_line() {
        assert_eq!(quote("first\n\n  second  \n"), "first; second");
        let long = format!("{}cause", "x".repeat(1000));
        let quoted = quote(&long);
        assert!(quoted.starts_with("...") && quoted.ends_with("cause"));
        assert_eq!(quoted.chars().count(), QUOTE_CHARS + 3);
    }

    #[test]
    fn a_failing_tool_is_quoted_with_its_command_line() {
        let mut command = Command::new("sh");
        command.args(["-c", "echo bad thing >&2; exit 4"]);
        let err = run(&mut command, "format", Path::new("/dev/loop9")).unwrap_err();
        let Error::Io { op, path, source } = err else {
            panic!("not an I/O error");
        };
        assert_eq!((op, path.as_path()), ("format", Path::new("/dev/loop9")));
        assert_eq!(
            source.to_string(),
            "sh -c echo bad thing >&2; exit 4 exited with 4: bad thing"
        );
    }

    #[test]
    fn a_missing_tool_is_named() {
        let mut command = Command::new("ratelab-no-such-tool");
        let err = run(&mut command, "run", Path::new("x")).unwrap_err();
        let Error::Io { source, .. } = err else {
            panic!("not an I/O error");
        };
        assert_eq!(source.to_string(), "ratelab-no-such-tool is not installed");
        assert!(on_path("ratelab-no-such-tool").is_none());
        assert!(on_path("sh").is_some());
    }
}
