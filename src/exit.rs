//! Exit codes of SPEC.md, and the one place where an error becomes one of them.

use std::process::ExitCode;

/// How the process ends, as SPEC.md numbers it.
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

/// The run was stopped by SIGINT or SIGTERM; cleanup is done.
#[derive(Debug, thiserror::Error)]
#[error("interrupted")]
pub struct Interrupted;

/// Chooses the exit code for an error by the first typed error in its chain.
pub fn code_for(err: &anyhow::Error) -> Exit {
    for cause in err.chain() {
        if cause.is::<Interrupted>() {
            return Exit::Interrupted;
        }
        if cause.is::<UsageError>() {
            return Exit::Usage;
        }
        if let Some(err) = cause.downcast_ref::<crate::workload::Error>() {
            return err.exit();
        }
        if let Some(err) = cause.downcast_ref::<crate::store::Error>() {
            return err.exit();
        }
        if cause.is::<crate::platform::Error>() {
            return Exit::Environment;
        }
    }
    Exit::Environment
}
