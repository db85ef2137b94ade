//! Running workloads: the schedule of who runs with whom, the runner and its groups,
//! the sampler's one clock and progress.

mod conclude;
mod group;
mod interference;
mod progress;
mod runner;
mod sampler;
mod schedule;

pub use conclude::conclude;
pub use interference::{LOOK_EVERY, Touched, Watch};
pub use runner::{DEFAULT_INTERVAL, Finished, Judge, RunSpec, START_AT_VARIABLE, execute};
pub use schedule::{Member, Schedule};
