//! A monitor item as stored: per sample, one per core, one for the package or system,
//! and one per live thread of the watched process (the monitor section of docs/json.md).

use serde::{Deserialize, Serialize};

use crate::sensors::power::ZoneReading;

/// A core counts as active in a sample when at least this share of it was active.
pub const ACTIVE_AT: f64 = 0.5;

/// One stored monitor figure; `op` says which.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum MonitorItem {
    /// One core over one sample.
    Core {
        /// The sample's number, from 0.
        sample: u64,
        /// End of the sample, seconds from the monitor's start (monotonic clock).
        t_s: f64,
        /// The CPU's number.
        cpu: u32,
        /// Share of the sample the core was active; null when no tick was counted.
        active_fraction: Option<f64>,
        /// Its frequency, in Hz; null when unavailable (see `sources`).
        freq_hz: Option<f64>,
        /// Its power, in watts; null when unavailable (see `sources`).
        power_w: Option<f64>,
    },
    /// The package or system over one sample.
    System {
        /// The sample's number, from 0.
        sample: u64,
        /// End of the sample, seconds from the monitor's start.
        t_s: f64,
        /// Cores at least [`ACTIVE_AT`] active.
        active_cores: Option<u32>,
        /// Mean active share over the cores; null when no core counted a tick.
        active_fraction: Option<f64>,
        /// Package or system power, in watts; null when unavailable (see `sources`).
        power_w: Option<f64>,
        /// Energy used over the sample, in joules; null when unavailable.
        energy_j: Option<f64>,
        /// Each RAPL zone or hwmon sensor; absent when power is unavailable.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        zones: Vec<ZoneReading>,
    },
    /// One live thread of the watched process at the end of a sample.
    Thread {
        /// The sample's number, from 0.
        sample: u64,
        /// When it was read, seconds from the monitor's start.
        t_s: f64,
        /// The thread id.
        tid: u32,
        /// The thread's name.
        name: String,
        /// The CPU it last ran on.
        cpu: u32,
        /// Its scheduling policy (`normal`, `batch`, `idle`, `fifo`, `rr`, `deadline`).
        policy: String,
        /// Its nice value.
        nice: i32,
    },
}
