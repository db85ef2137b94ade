//! Package or system power: powercap RAPL where the kernel has it, else hwmon sensors,
//! else unavailable with the reasons both were refused. A VM usually has neither, and
//! its power is then unknown, never zero.

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::hwmon::{HWMON, Hwmon};
use super::rapl::{POWERCAP, Rapl};
use super::sources::Source;

/// One zone's or sensor's figures over one interval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ZoneReading {
    /// The zone (`package-0`, `package-0/core`) or sensor (`amdgpu/PPT`).
    pub zone: String,
    /// Mean power over the interval, in watts.
    pub power_w: Option<f64>,
    /// Energy used over the interval, in joules; null for a sensor that gives power only.
    pub energy_j: Option<f64>,
}

impl ZoneReading {
    /// A zone's reading from the energy it used over `seconds`.
    pub fn of(zone: &str, energy_j: Option<f64>, seconds: f64) -> ZoneReading {
        ZoneReading {
            zone: zone.to_string(),
            power_w: energy_j.filter(|_| seconds > 0.0).map(|j| j / seconds),
            energy_j,
        }
    }
}

/// Power over one interval: the total and each zone.
#[derive(Debug, Clone, PartialEq)]
pub struct PowerReading {
    /// Total power, in watts; `None` when a counted zone could not be read.
    pub power_w: Option<f64>,
    /// Total energy, in joules; `None` when a counted zone gave power only, or failed.
    pub energy_j: Option<f64>,
    /// Every zone.
    pub zones: Vec<ZoneReading>,
}

impl PowerReading {
    /// The totals of the `counted` zones, beside all `zones`.
    pub fn total_of(counted: &[&ZoneReading], zones: Vec<ZoneReading>) -> PowerReading {
        let sum = |f: fn(&ZoneReading) -> Option<f64>| -> Option<f64> {
            if counted.is_empty() {
                return None;
            }
            counted.iter().map(|z| f(z)).sum()
        };
        PowerReading {
            power_w: sum(|z| z.power_w),
            energy_j: sum(|z| z.energy_j),
            zones,
        }
    }
}

/// The source package or system power comes from.
pub enum Power {
    /// powercap RAPL zones.
    Rapl(Rapl),
    /// hwmon power and energy sensors.
    Hwmon(Hwmon),
}

impl Power {
    /// The first source that works, or why none does.
    pub fn probe() -> Result<Power, String> {
        let rapl = match Rapl::open(Path::new(POWERCAP)) {
            Ok(rapl) => return Ok(Power::Rapl(rapl)),
            Err(reason) => reason,
        };
        let hwmon = match Hwmon::open(Path::new(HWMON)) {
            Ok(hwmon) => return Ok(Power::Hwmon(hwmon)),
            Err(reason) => reason,
        };
        Err(format!("{rapl}; {hwmon}"))
    }

    /// What feeds the figures, for `sources`.
    pub fn source(&self) -> Source {
        match self {
            Power::Rapl(rapl) => Source::fed_by("powercap RAPL energy_uj", rapl.describe()),
            Power::Hwmon(hwmon) => Source::fed_by("hwmon", hwmon.describe()),
        }
    }

    /// Power over the interval just ended.
    pub fn sample(&mut self) -> PowerReading {
        match self {
            Power::Rapl(rapl) => rapl.sample(),
            Power::Hwmon(hwmon) => hwmon.sample(),
        }
    }
}

/// Why no figure is given per core, whatever the machine has: RAPL and hwmon report
/// per package, die or board, and per-core energy counters are not read here.
pub const NO_CORE_POWER: &str =
    "no per-core energy counter is read: RAPL and hwmon report per package, zone or sensor";
