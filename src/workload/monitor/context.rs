//! What a monitor run says beside its samples (its `context`): the source of each
//! figure, the CPUs watched, how many samples were taken and why sampling ended, how the
//! watched command ended, and what the monitor itself cost. The live workload writes it
//! and the kind reads it back, through this one definition.

use serde::{Deserialize, Serialize};

use crate::sensors::Sources;

/// The context of a monitor workload as stored.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MonitorContext {
    /// Which source feeds each figure, or why none does; null before the sources were
    /// probed.
    pub sources: Option<Sources>,
    /// The CPUs sampled; null before they were probed.
    pub cpus: Option<Vec<u32>>,
    /// Samples taken.
    pub samples: u64,
    /// Why sampling ended; null when it never ran to an end.
    pub ended_by: Option<Ended>,
    /// The watched command's exit code; null when none was watched, or a signal ended it.
    pub command_exit_code: Option<i32>,
    /// The signal that ended the watched command, if one did.
    pub command_signal: Option<i32>,
    /// CPU seconds the monitor's own thread used while sampling.
    pub monitor_cpu_seconds: Option<f64>,
    /// Wall seconds the monitor sampled for.
    pub monitor_wall_seconds: Option<f64>,
}

/// Why sampling ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Ended {
    /// The plan's sample count was reached.
    #[serde(rename = "samples")]
    Samples,
    /// The plan's time ran out.
    #[serde(rename = "seconds")]
    Seconds,
    /// The watched command exited.
    #[serde(rename = "command exited")]
    CommandExited,
    /// The companion workload set the stop flag.
    #[serde(rename = "stopped by its companion")]
    StopFlag,
    /// The run was cancelled (a signal, or another workload failed).
    #[serde(rename = "interrupted")]
    Cancelled,
}
