//! Running workloads: cancellation, progress and the runner that drives workloads,
//! stores each stage as it ends and turns the result into a run document.

mod cancel;
mod progress;
mod runner;

pub use cancel::Cancel;
pub use runner::{Finished, RunSpec, execute};
