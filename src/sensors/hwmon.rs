//! Power from hwmon sensors (`/sys/class/hwmon/hwmon*/`), where RAPL is absent: a
//! sensor's cumulative `energy*_input` in µJ where it has one (a mean over the
//! interval), else its `power*_input` in µW (the sensor's own recent average). See the
//! kernel's Documentation/hwmon/sysfs-interface.rst.

use std::fs::File;
use std::path::Path;
use std::time::Instant;

use super::power::{PowerReading, ZoneReading};
use super::sources::{cannot, read_number};

/// Where hwmon lists its devices.
pub const HWMON: &str = "/sys/class/hwmon";

/// What a sensor file counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Unit {
    /// Cumulative microjoules.
    Microjoules,
    /// Microwatts now.
    Microwatts,
}

/// One sensor held open.
struct Sensor {
    /// `device/label`, as `amdgpu/PPT` or `k10temp/power1`.
    name: String,
    file: File,
    unit: Unit,
    last: Option<u64>,
}

/// Every power or energy sensor, with the time of the last reading.
pub struct Hwmon {
    sensors: Vec<Sensor>,
    last: Instant,
}

/// The sensor files of one hwmon device: `energy1_input`, `power1_input` ...
fn sensor_files(device: &Path) -> Vec<(String, Unit)> {
    let Ok(entries) = std::fs::read_dir(device) else {
        return Vec::new();
    };
    let mut files: Vec<String> = entries
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().into_string().ok())
        .collect();
    files.sort();
    let energies: Vec<String> = files
        .iter()
        .filter(|f| f.starts_with("energy") && f.ends_with("_input"))
        .cloned()
        .collect();
    // A device with energy counters gives power as their deltas; its power files would
    // count the same watts twice.
    if !energies.is_empty() {
        return energies
            .into_iter()
            .map(|f| (f, Unit::Microjoules))
            .collect();
    }
    // Per sensor, its reading now (`_input`), else its driver's average (`_average`).
    files
        .iter()
        .filter(|f| f.starts_with("power"))
        .filter(|f| {
            f.ends_with("_input")
                || f.strip_suffix("_average")
                    .is_some_and(|stem| !files.contains(&format!("{stem}_input")))
        })
        .map(|f| (f.clone(), Unit::Microwatts))
        .collect()
}

impl Hwmon {
    /// Opens every power or energy sensor under `root`; refused, with the reason, when
    /// there is none.
    pub fn open(root: &Path) -> Result<Hwmon, String> {
        let listing = std::fs::read_dir(root)
            .map_err(|e| format!("no hwmon ({})", cannot("list", root, &e)))?;
        let mut devices: Vec<_> = listing.filter_map(Result::ok).map(|e| e.path()).collect();
        devices.sort();
        let mut sensors = Vec::new();
        let mut problem = None;
        for device in &devices {
            let device_name = std::fs::read_to_string(device.join("name"))
                .map(|n| n.trim().to_string())
                .unwrap_or_else(|_| device.display().to_string());
            for (file_name, unit) in sensor_files(device) {
                let stem = file_name.split('_').next().unwrap_or_default();
                let label = std::fs::read_to_string(device.join(format!("{stem}_label")))
                    .map(|l| l.trim().to_string())
                    .unwrap_or_else(|_| stem.to_string());
                let path = device.join(&file_name);
                match File::open(&path).and_then(|f| read_number(&f).map(|v| (f, v))) {
                    Ok((file, last)) => sensors.push(Sensor {
                        name: format!("{device_name}/{label}"),
                        file,
                        unit,
                        last: Some(last),
                    }),
                    Err(e) => {
                        problem.get_or_insert_with(|| cannot("read", &path, &e));
                    }
                }
            }
        }
        if sensors.is_empty() {
            return Err(match problem {
                Some(problem) => format!("no readable hwmon power sensor ({problem})"),
                None => format!("no hwmon power or energy sensor in {}", root.display()),
            });
        }
        Ok(Hwmon {
            sensors,
            last: Instant::now(),
        })
    }

    /// The sensors in words, for `sources`.
    pub fn describe(&self) -> String {
        let names: Vec<&str> = self.sensors.iter().map(|s| s.name.as_str()).collect();
        format!(
            "sensors {}; the total is their sum, which counts twice what two sensors both see",
            names.join(", ")
        )
    }

    /// Each sensor's power (and energy where it counts it) since the last reading.
    pub fn sample(&mut self) -> PowerReading {
        let now = Instant::now();
        let seconds = (now - self.last).as_secs_f64();
        self.last = now;
        let zones: Vec<ZoneReading> = self
            .sensors
            .iter_mut()
            .map(|sensor| {
                let value = read_number(&sensor.file).ok();
                match sensor.unit {
                    Unit::Microjoules => {
                        // A counter that went back was reset: that interval is unknown.
                        // A failed read loses the interval it ends and the next.
                        let energy_j = match value {
                            Some(uj) => {
                                let last = sensor.last.replace(uj);
                                last.and_then(|last| uj.checked_sub(last))
                                    .map(|uj| uj as f64 / 1e6)
                            }
                            None => {
                                sensor.last = None;
                                None
                            }
                        };
                        ZoneReading::of(&sensor.name, energy_j, seconds)
                    }
                    Unit::Microwatts => ZoneReading {
                        zone: sensor.name.clone(),
                        power_w: value.map(|uw| uw as f64 / 1e6),
                        energy_j: None,
                    },
                }
            })
            .collect();
        let counted: Vec<&ZoneReading> = zones.iter().collect();
        PowerReading::total_of(&counted, zones.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn energy_sensors_win_over_power_sensors_of_a_device() {
        let root = tempfile::tempdir().unwrap();
        let device = root.path().join("hwmon0");
        std::fs::create_dir(&device).unwrap();
        std::fs::write(device.join("name"), "board\n").unwrap();
        std::fs::write(device.join("energy1_input"), "5000000\n").unwrap();
        std::fs::write(device.join("energy1_label"), "SoC\n").unwrap();
        std::fs::write(device.join("power1_input"), "2000000\n").unwrap();
        let mut hwmon = Hwmon::open(root.path()).unwrap();
        assert!(hwmon.describe().starts_with("sensors board/SoC;"));
        std::fs::write(device.join("energy1_input"), "7500000\n").unwrap();
        let reading = hwmon.sample();
        assert_eq!(reading.energy_j, Some(2.5));
        assert_eq!(reading.zones.len(), 1);
    }

    #[test]
    fn no_sensor_says_so() {
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir(root.path().join("hwmon0")).unwrap();
        let reason = Hwmon::open(root.path()).err().unwrap();
        assert!(
            reason.contains("no hwmon power or energy sensor"),
            "{reason}"
        );
    }
}
