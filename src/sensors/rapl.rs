//! Energy and power from powercap RAPL (`/sys/class/powercap/intel-rapl:*`, which AMD
//! CPUs fill too): each zone's cumulative `energy_uj`, which wraps at
//! `max_energy_range_uj`. Since Linux 5.10 `energy_uj` is readable by root only.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::time::Instant;

use super::power::{PowerReading, ZoneReading};
use super::sources::{cannot, read_number};

/// Where powercap lists its zones.
pub const POWERCAP: &str = "/sys/class/powercap";

/// The energy used between two readings of a counter that wraps after `max_range_uj`:
/// the counter runs 0..=max_range_uj, so a wrap adds the rest of the range plus one.
pub fn energy_delta_uj(before_uj: u64, now_uj: u64, max_range_uj: u64) -> u64 {
    if now_uj >= before_uj {
        now_uj - before_uj
    } else {
        max_range_uj.saturating_sub(before_uj) + now_uj + 1
    }
}

/// One RAPL zone held open.
struct Zone {
    /// `package-0`, or `package-0/core` for a subzone.
    name: String,
    file: File,
    max_range_uj: u64,
    last_uj: u64,
    /// The last read failed: the next delta would span two intervals, so it is unknown.
    lost: bool,
    /// Whether the zone is a package, whose energies make the package total.
    package: bool,
}

/// Every RAPL zone, with the time of the last reading.
pub struct Rapl {
    zones: Vec<Zone>,
    last: Instant,
}

fn read_text(path: &Path) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_string())
}

impl Rapl {
    /// Opens every zone under `root`; refused, with the reason, when there is none or
    /// none can be read.
    pub fn open(root: &Path) -> Result<Rapl, String> {
        let listing = std::fs::read_dir(root)
            .map_err(|e| format!("no RAPL ({})", cannot("list", root, &e)))?;
        let mut dirs: Vec<PathBuf> = listing
            .filter_map(Result::ok)
            .map(|e| e.path())
            // intel-rapl-mmio repeats the package zone through another interface.
            .filter(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with("intel-rapl:"))
            })
            .collect();
        dirs.sort();
        if dirs.is_empty() {
            return Err(format!(
                "no RAPL (no intel-rapl zone in {})",
                root.display()
            ));
        }
        let mut zones = Vec::new();
        let mut problem = None;
        for dir in &dirs {
            let id = dir.file_name().and_then(|n| n.to_str()).unwrap_or_default();
            let own = read_text(&dir.join("name")).unwrap_or_else(|| id.to_string());
            // intel-rapl:0:1 is a subzone of intel-rapl:0.
            let parent = id.rsplit_once(':').filter(|(p, _)| p.contains(':'));
            let name = match parent {
                Some((parent, _)) => {
                    let parent_name = read_text(&root.join(parent).join("name"))
                        .unwrap_or_else(|| parent.to_string());
                    format!("{parent_name}/{own}")
                }
                None => own.clone(),
            };
            let path = dir.join("energy_uj");
            match File::open(&path).and_then(|f| read_number(&f).map(|uj| (f, uj))) {
                Ok((file, last_uj)) => zones.push(Zone {
                    package: parent.is_none() && own.starts_with("package"),
                    name,
                    file,
                    max_range_uj: read_text(&dir.join("max_energy_range_uj"))
                        .and_then(|t| t.parse().ok())
                        .unwrap_or(u64::MAX),
                    last_uj,
                    lost: false,
                }),
                Err(e) => {
                    problem.get_or_insert_with(|| cannot("read", &path, &e));
                }
            }
        }
        if zones.is_empty() {
            let problem = problem.unwrap_or_default();
            return Err(format!(
                "no readable RAPL zone ({problem}; root only since Linux 5.10)"
            ));
        }
        Ok(Rapl {
            zones,
            last: Instant::now(),
        })
    }

    /// The zones in words, for `sources`.
    pub fn describe(&self) -> String {
        let names: Vec<&str> = self.zones.iter().map(|z| z.name.as_str()).collect();
        format!(
            "zones {}; the total is the package zones' sum (DRAM and psys are shown per zone only)",
            names.join(", ")
        )
    }

    /// Energy and mean power of each zone since the last reading, and the packages' total.
    pub fn sample(&mut self) -> PowerReading {
        let now = Instant::now();
        let seconds = (now - self.last).as_secs_f64();
        self.last = now;
        let zones: Vec<(bool, ZoneReading)> = self
            .zones
            .iter_mut()
            .map(|zone| {
                let energy_j = match read_number(&zone.file) {
                    Ok(uj) => {
                        let delta = energy_delta_uj(zone.last_uj, uj, zone.max_range_uj);
                        zone.last_uj = uj;
                        (!std::mem::replace(&mut zone.lost, false)).then(|| delta as f64 / 1e6)
                    }
                    Err(_) => {
                        zone.lost = true;
                        None
                    }
                };
                let reading = ZoneReading::of(&zone.name, energy_j, seconds);
                (zone.package, reading)
            })
            .collect();
        let any_package = zones.iter().any(|(package, _)| *package);
        // Without a package zone (an unusual layout), every top-level zone counts.
        let counted: Vec<&ZoneReading> = zones
            .iter()
            .filter(|(package, z)| *package || (!any_package && !z.zone.contains('/')))
            .map(|(_, z)| z)
            .collect();
        PowerReading::total_of(&counted, zones.iter().map(|(_, z)| z.clone()).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn energy_across_a_wrap() {
        assert_eq!(energy_delta_uj(100, 250, 1000), 150);
        // 990 → 1000 is 10, the wrap to 0 is 1 more, then 0 → 20.
        assert_eq!(energy_delta_uj(990, 20, 1000), 31);
        assert_eq!(energy_delta_uj(5, 5, 1000), 0);
    }

    #[test]
    fn zones_of_a_made_up_powercap_tree() {
        let root = tempfile::tempdir().unwrap();
        for (dir, name, uj) in [
            ("intel-rapl:0", "package-0", "1000"),
            ("intel-rapl:0:0", "core", "400"),
            ("intel-rapl-mmio:0", "package-0", "1000"),
        ] {
            let zone = root.path().join(dir);
            std::fs::create_dir(&zone).unwrap();
            std::fs::write(zone.join("name"), name).unwrap();
            std::fs::write(zone.join("energy_uj"), uj).unwrap();
            std::fs::write(zone.join("max_energy_range_uj"), "262143328850").unwrap();
        }
        let mut rapl = Rapl::open(root.path()).unwrap();
        assert!(rapl.describe().contains("package-0, package-0/core"));
        std::fs::write(root.path().join("intel-rapl:0/energy_uj"), "3001000").unwrap();
        let reading = rapl.sample();
        assert_eq!(reading.energy_j, Some(3.0));
        assert_eq!(reading.zones.len(), 2);
        assert_eq!(reading.zones[1].energy_j, Some(0.0));
    }

    #[test]
    fn no_powercap_says_so() {
        let reason = Rapl::open(Path::new("/nonexistent/powercap"))
            .err()
            .unwrap();
        assert!(reason.contains("/nonexistent/powercap"), "{reason}");
    }
}
