//! How a command a workload ran ended, as `results list` and the exit code say it.

use std::fmt;

/// How the user's command ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommandEnd {
    /// It exited with this code.
    Exit(i32),
    /// A signal of this number ended it.
    Signal(i32),
}

impl CommandEnd {
    /// The exit status a shell gives for it: the code, or 128 and the signal.
    pub fn shell_status(self) -> Option<u8> {
        match self {
            CommandEnd::Exit(code) => u8::try_from(code).ok(),
            CommandEnd::Signal(signal) => u8::try_from(128 + signal).ok(),
        }
    }
}

impl fmt::Display for CommandEnd {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CommandEnd::Exit(code) => write!(f, "exit {code}"),
            CommandEnd::Signal(signal) => write!(f, "signal {signal}"),
        }
    }
}
