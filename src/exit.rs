//! Exit codes (docs/exit-codes.md) and the usage error; which code an error ends the
//! process with is chosen at the top, in `cli::exit_code`, where every error type is known.

use std::process::ExitCode;

/// How the process ends, as docs/exit-codes.md numbers it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// Everything ran and every check passed.
    Success,
    /// The measurement ran, but a check failed or a verdict is an error.
    CheckFailed,
    /// Bad usage or bad input.
    Usage,
    /// The environment refused: no space, no permission, target missing.
    Environment,
    /// Interrupted by a signal, after cleanup.
    Interrupted,
    /// `why -- CMD` ran to the command's end: its exit code, passed on as time(1) does
    /// (128 + N where signal N ended it).
    Command(u8),
}

impl Exit {
    /// The numeric code the process returns.
    pub fn code(self) -> u8 {
        match self {
            Exit::Success => 0,
            Exit::CheckFailed => 1,
            Exit::Usage => 2,
            Exit::Environment => 3,
            Exit::Interrupted => 130,
            Exit::Command(code) => code,
        }
    }
}

impl From<Exit> for ExitCode {
    fn from(exit: Exit) -> ExitCode {
        ExitCode::from(exit.code())
    }
}

/// Bad input found after the command line parsed (a conflicting option, a bad file).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);
