//! Work that one kind runs inside a place another kind made (an image's containers run
//! the storage series and the task): the place, and the rounds the work runs there.
//! A kind offers its work through [`Kind::in_place`](super::Kind::in_place), from its
//! stored parameters, so the kind that makes the places never names it.

use std::path::PathBuf;

use super::{Context, Workload};
use crate::error::Error;
use crate::storage::layers::Layer;

/// A place made for another kind's work: a folder, and the host files below it whose
/// caches could serve its reads.
#[derive(Debug, Clone, Default)]
pub struct Site {
    /// The folder the work runs in.
    pub folder: PathBuf,
    /// The host files below the folder (none for a host folder).
    pub layers: Vec<Layer>,
}

/// What one round wrote and moved in its place.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RoundBytes {
    /// Bytes written (writes and rewrites).
    pub written: u64,
    /// Bytes moved (written and read).
    pub moved: u64,
}

/// A workload run a round at a time in a place another workload made and looks at:
/// prepared and set up as usual, then one round, then what the round left is removed
/// (once the place was looked at), then cleaned up.
pub trait InPlace: Workload {
    /// The rounds it plans.
    fn rounds(&self) -> u32 {
        1
    }

    /// The most bytes it keeps in its place at once.
    fn held_bytes(&self) -> u64;

    /// Runs round `round` (from 1), its items sent as `run` sends them.
    fn run_round(&mut self, ctx: &Context, round: u32) -> Result<RoundBytes, Error>;

    /// Removes what the round left in its place; nothing by default.
    fn end_round(&mut self) -> Result<(), Error> {
        Ok(())
    }
}
