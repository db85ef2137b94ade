//! Errors measuring can meet, each naming the path or value at fault: the workloads,
//! the storage core and the platform's containers speak it, from below them all.

use std::path::PathBuf;

/// What stopped a workload.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The target cannot be used (missing, not a folder, read-only, a device).
    #[error("cannot use {path} as a target: {reason}")]
    Target {
        /// The path at fault.
        path: PathBuf,
        /// Why, in words.
        reason: String,
    },
    /// The series does not fit in the target's free space.
    #[error(
        "not enough free space on {path}: the {} needs {needed} plus a margin of {margin}, and {available} is free ({})", about.0, about.1
    )]
    Space {
        /// What needs the space (`series`, `task`), and what the user can change,
        /// naming the flags.
        about: &'static (&'static str, &'static str),
        /// The path at fault.
        path: PathBuf,
        /// What the series needs, in words.
        needed: String,
        /// The margin kept free, in words.
        margin: String,
        /// What is free, in words.
        available: String,
    },
    /// An I/O call failed mid-run.
    #[error("cannot {op} {path}")]
    Io {
        /// What was being done.
        op: &'static str,
        /// The path at fault.
        path: PathBuf,
        /// What the system said.
        #[source]
        source: std::io::Error,
    },
    /// The target does not support what the options ask for.
    #[error("{0}")]
    Unsupported(String),
    /// The options cannot work together or name something that does not exist.
    #[error("{0}")]
    Input(String),
    /// The peer of a network test cannot be reached, refused, or broke the protocol;
    /// the reason, which may quote the peer, is shown with its control characters escaped.
    #[error("net test with {peer}: {}", crate::vocab::text::escaped(.reason))]
    Peer {
        /// The peer's address as given.
        peer: String,
        /// Why, in words.
        reason: String,
    },
    /// Stopped by SIGINT or SIGTERM.
    #[error("interrupted")]
    Interrupted,
}

impl Error {
    /// An I/O error on `path` during `op`.
    pub fn io(
        op: &'static str,
        path: impl Into<PathBuf>,
        source: impl Into<std::io::Error>,
    ) -> Error {
        Error::Io {
            op,
            path: path.into(),
            source: source.into(),
        }
    }
}

/// Whether `err` or anything behind it is [`Error::Interrupted`]: the run was stopped by a
/// signal rather than failing.
pub fn is_interrupted(err: &anyhow::Error) -> bool {
    err.chain()
        .any(|cause| matches!(cause.downcast_ref::<Error>(), Some(Error::Interrupted)))
}
