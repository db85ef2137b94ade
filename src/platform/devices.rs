//! Walks sysfs from a block device down through partitions, loop devices and
//! stacked devices (device-mapper, md) to the whole disks at the bottom.
//!
//! Layout per Documentation/ABI/stable/sysfs-block and sysfs-class-block: a
//! partition sits inside its disk's folder, a loop device names its backing
//! file in `loop/backing_file`, and stacked devices list theirs in `slaves/`.

use std::path::{Path, PathBuf};

use super::block::{ChainStep, DeviceNumber, Prober, StepKind, limiting_step};
use super::limits::rate_words;
use super::{Roots, links, read_attr};

/// How many devices deep a chain may go (loop on loop on ...) before the walk stops.
const MAX_DEPTH: usize = 8;

/// The sysfs folder of block device `number`, resolved into /sys/devices.
pub(crate) fn device_dir(roots: &Roots, number: DeviceNumber) -> Option<PathBuf> {
    std::fs::canonicalize(roots.sys(&format!("dev/block/{number}"))).ok()
}

/// The sysfs folder of a mount source such as `/dev/sda2` or `/dev/mapper/vg-root`.
pub(crate) fn source_dir(roots: &Roots, source: &str) -> Option<PathBuf> {
    if !source.starts_with("/dev/") {
        return None;
    }
    // /dev/mapper/NAME links to /dev/dm-N, the name sysfs knows.
    let node = std::fs::canonicalize(source).unwrap_or_else(|_| PathBuf::from(source));
    let name = node.file_name()?.to_str()?;
    std::fs::canonicalize(roots.sys(&format!("class/block/{name}"))).ok()
}

/// The steps from the block device in `dir` down to its link.
pub(crate) fn walk(prober: &Prober, dir: &Path, trail: &[DeviceNumber]) -> Vec<ChainStep> {
    let name = dir_name(dir);
    let node = node_name(dir, &name);
    let number = device_number(dir);
    if trail.len() >= MAX_DEPTH {
        let detail = format!("devices nest deeper than {MAX_DEPTH}: not followed");
        return vec![ChainStep::without_limit(StepKind::Other, node, detail)];
    }
    if number.is_some_and(|number| trail.contains(&number)) {
        let detail = "already in this chain (a cycle): not followed";
        return vec![ChainStep::without_limit(StepKind::Other, node, detail)];
    }
    let mut trail = trail.to_vec();
    trail.extend(number);

    if let Some(partition) = read_attr(&dir.join("partition")) {
        let Some(disk) = dir.parent() else {
            return Vec::new();
        };
        let disk_node = node_name(disk, &dir_name(disk));
        let detail = format!("partition {partition} of {disk_node}");
        let mut steps = vec![ChainStep::without_limit(StepKind::Partition, node, detail)];
        steps.extend(walk(prober, disk, &trail));
        return steps;
    }
    if dir.join("loop").is_dir() {
        return loop_steps(prober, dir, node, &trail);
    }
    let slaves = slave_dirs(dir);
    if !slaves.is_empty() {
        return stacked_steps(prober, dir, &name, node, &slaves, &trail);
    }
    vec![links::disk_step(prober.roots, dir, &name, node)]
}

/// A loop device, then the chain of its backing file.
fn loop_steps(prober: &Prober, dir: &Path, node: String, trail: &[DeviceNumber]) -> Vec<ChainStep> {
    let Some(backing) = read_attr(&dir.join("loop/backing_file")) else {
        let detail = "no backing file attached";
        return vec![ChainStep::without_limit(StepKind::Loop, node, detail)];
    };
    let direct_io = match read_attr(&dir.join("loop/dio")).as_deref() {
        Some("1") => "direct I/O on",
        // Without direct I/O the loop driver reads through the backing file's
        // page cache, so reads can come from RAM whatever the disk below.
        Some("0") => "direct I/O off (the backing file's page cache can serve reads)",
        _ => "direct I/O unknown",
    };
    let detail = format!("backing file {backing}, {direct_io}");
    let mut steps = vec![ChainStep::without_limit(StepKind::Loop, node, detail)];
    // The kernel appends " (deleted)" to the name of a backing file since unlinked.
    if let Some(deleted) = backing.strip_suffix(" (deleted)") {
        let detail = "backing file deleted: not followed";
        steps.push(ChainStep::without_limit(StepKind::Other, deleted, detail));
        return steps;
    }
    match prober.probe(Path::new(&backing), trail) {
        Ok(chain) => steps.extend(chain.steps),
        Err(err) => {
            let detail = format!("{err}: limit unknown");
            steps.push(ChainStep::without_limit(StepKind::Other, backing, detail));
        }
    }
    steps
}

/// A device built on others (device-mapper, md, bcache). Over one member, the chain
/// goes on down that member. Over several, striping can use every member's link at
/// once, so the only limit that holds for every layout is the sum of the members'
/// limits (unknown if any member's is); the members are named in the detail.
fn stacked_steps(
    prober: &Prober,
    dir: &Path,
    name: &str,
    node: String,
    slaves: &[PathBuf],
    trail: &[DeviceNumber],
) -> Vec<ChainStep> {
    let (kind, what) = stacked_kind(dir, name);
    let mut below: Vec<(String, Vec<ChainStep>)> = slaves
        .iter()
        .map(|slave| (dir_name(slave), walk(prober, slave, trail)))
        .collect();
    if below.len() == 1 {
        let (slave, member_steps) = below.swap_remove(0);
        let mut steps = vec![ChainStep::without_limit(
            kind,
            node,
            format!("{what} over {slave}"),
        )];
        steps.extend(member_steps);
        return steps;
    }
    let lowest = |steps: &[ChainStep]| limiting_step(steps).and_then(|step| step.max_bytes_per_sec);
    let limits: Vec<Option<f64>> = below.iter().map(|(_, steps)| lowest(steps)).collect();
    let listed: Vec<String> = below
        .iter()
        .zip(&limits)
        .map(|((slave, _), limit)| match limit {
            Some(rate) => format!("{slave} ({})", rate_words(*rate)),
            None => format!("{slave} (limit unknown)"),
        })
        .collect();
    let total: Option<f64> = limits.iter().copied().sum();
    let detail = match total {
        Some(total) => format!(
            "{what} over {}: at most their sum, {}",
            listed.join(", "),
            rate_words(total)
        ),
        None => format!("{what} over {}: limit unknown", listed.join(", ")),
    };
    let mut step = ChainStep::without_limit(kind, node, detail);
    step.max_bytes_per_sec = total;
    vec![step]
}

/// What a stacked device is, as a step kind and in words.
fn stacked_kind(dir: &Path, name: &str) -> (StepKind, String) {
    if name.starts_with("dm-") {
        let mapped = read_attr(&dir.join("dm/name")).unwrap_or_else(|| name.to_string());
        let uuid = read_attr(&dir.join("dm/uuid")).unwrap_or_default();
        // Prefixes set by lvm2, cryptsetup, multipathd and kpartx.
        let label = [
            ("LVM-", "LVM volume"),
            ("CRYPT-", "dm-crypt volume"),
            ("mpath-", "multipath device"),
            ("part", "partition mapping"),
        ]
        .iter()
        .find(|(prefix, _)| uuid.starts_with(prefix))
        .map_or("device-mapper device", |(_, label)| label);
        (StepKind::DeviceMapper, format!("{label} {mapped}"))
    } else if name.starts_with("md") {
        let level = read_attr(&dir.join("md/level"));
        let what = level.map_or("software RAID array".to_string(), |level| {
            format!("software RAID {level} array")
        });
        (StepKind::Md, what)
    } else {
        (StepKind::Other, "stacked device".to_string())
    }
}

/// The devices listed in `slaves/`, resolved and sorted.
fn slave_dirs(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir.join("slaves")) else {
        return Vec::new();
    };
    let mut slaves: Vec<PathBuf> = entries
        .flatten()
        .filter_map(|entry| std::fs::canonicalize(entry.path()).ok())
        .collect();
    slaves.sort_by_key(|slave| dir_name(slave));
    slaves
}

/// The device number in a block device's `dev` file.
fn device_number(dir: &Path) -> Option<DeviceNumber> {
    let text = read_attr(&dir.join("dev"))?;
    let (major, minor) = text.split_once(':')?;
    Some(DeviceNumber {
        major: major.parse().ok()?,
        minor: minor.parse().ok()?,
    })
}

/// The last component of a sysfs folder (`sda1`).
pub(crate) fn dir_name(dir: &Path) -> String {
    dir.file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// The /dev node of a block device, from `DEVNAME` in its uevent file.
fn node_name(dir: &Path, name: &str) -> String {
    let from_uevent = std::fs::read_to_string(dir.join("uevent"))
        .ok()
        .and_then(|text| {
            text.lines()
                .find_map(|line| line.strip_prefix("DEVNAME=").map(str::to_string))
        });
    // sysfs writes '/' in names as '!' (cciss!c0d0 is /dev/cciss/c0d0).
    let devname = from_uevent.unwrap_or_else(|| name.replace('!', "/"));
    format!("/dev/{devname}")
}
