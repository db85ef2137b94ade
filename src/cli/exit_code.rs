//! Which exit code (docs/exit-codes.md) an error ends the process with: the one place
//! an error becomes a code, up here where every layer's error type is known.

use crate::error::Error;
use crate::exit::{Exit, UsageError};
use crate::{db, platform};

/// Chooses the exit code for an error by the first typed error in its chain; an error
/// of no known type is the environment's.
pub fn code_for(err: &anyhow::Error) -> Exit {
    for cause in err.chain() {
        if cause.is::<UsageError>() {
            return Exit::Usage;
        }
        if let Some(err) = cause.downcast_ref::<Error>() {
            return match err {
                Error::Interrupted => Exit::Interrupted,
                Error::Input(_) => Exit::Usage,
                Error::Target { .. }
                | Error::Space { .. }
                | Error::Io { .. }
                | Error::Peer { .. }
                | Error::Unsupported(_) => Exit::Environment,
            };
        }
        if let Some(err) = cause.downcast_ref::<db::Error>() {
            return match err {
                db::Error::NotFound(_) | db::Error::NoDataFolder | db::Error::Address { .. } => {
                    Exit::Usage
                }
                _ => Exit::Environment,
            };
        }
        if cause.is::<platform::Error>() {
            return Exit::Environment;
        }
    }
    Exit::Environment
}
