//! Bytes a block device has moved, from /proc/diskstats: what a layer below a
//! filesystem really wrote, against what was written above it (write amplification),
//! and what a device under a run's target moved that the run did not (interference).

use std::path::Path;

/// Bytes the block device `name` (`vda`, `loop3`) has written since boot; `None` when
/// /proc/diskstats does not list it.
pub fn bytes_written(name: &str) -> Option<u64> {
    let text = std::fs::read_to_string("/proc/diskstats").ok()?;
    written_in(&text, name)
}

/// Bytes the block device `name` has read and written since boot; `None` when
/// /proc/diskstats does not list it.
pub fn bytes_moved(name: &str) -> Option<(u64, u64)> {
    let text = std::fs::read_to_string("/proc/diskstats").ok()?;
    moved_in(&text, name)
}

/// What a block device has done since boot, as /proc/diskstats counts it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DeviceCounts {
    /// Reads completed (requests, after merging).
    pub reads: u64,
    /// Writes completed.
    pub writes: u64,
    /// Bytes read.
    pub read_bytes: u64,
    /// Bytes written.
    pub written_bytes: u64,
}

impl DeviceCounts {
    /// What was counted from `before` to these counts.
    pub fn since(&self, before: &DeviceCounts) -> DeviceCounts {
        DeviceCounts {
            reads: self.reads.saturating_sub(before.reads),
            writes: self.writes.saturating_sub(before.writes),
            read_bytes: self.read_bytes.saturating_sub(before.read_bytes),
            written_bytes: self.written_bytes.saturating_sub(before.written_bytes),
        }
    }

    /// Each device's counts in `now` less those in `before` (a device not there before
    /// counts from zero).
    pub fn each_since(
        now: std::collections::HashMap<String, DeviceCounts>,
        before: &std::collections::HashMap<String, DeviceCounts>,
    ) -> std::collections::HashMap<String, DeviceCounts> {
        now.into_iter()
            .map(|(name, counts)| {
                let was = before.get(&name).copied().unwrap_or_default();
                (name, counts.since(&was))
            })
            .collect()
    }
}

/// Every block device's counts now, by name.
pub fn snapshot() -> std::collections::HashMap<String, DeviceCounts> {
    let text = std::fs::read_to_string("/proc/diskstats").unwrap_or_default();
    text.lines()
        .filter_map(|line| {
            let (name, counts) = counts_in(line)?;
            Some((name.to_string(), counts))
        })
        .collect()
}

/// A device's name and counts in one line of /proc/diskstats: its fourth and eighth
/// fields count requests completed, its sixth and tenth 512-byte sectors
/// (Documentation/admin-guide/iostats.rst), whatever the device's block size.
fn counts_in(line: &str) -> Option<(&str, DeviceCounts)> {
    let fields: Vec<&str> = line.split_whitespace().collect();
    let count = |i: usize| fields.get(i)?.parse::<u64>().ok();
    let counts = DeviceCounts {
        reads: count(3)?,
        read_bytes: count(5)? * 512,
        writes: count(7)?,
        written_bytes: count(9)? * 512,
    };
    Some((fields.get(2)?, counts))
}

/// The `major:minor` of block device `name`, as sysfs gives it.
pub fn major_minor(name: &str) -> Option<String> {
    let text =
        std::fs::read_to_string(Path::new("/sys/class/block").join(name).join("dev")).ok()?;
    Some(text.trim().to_string()).filter(|t| t.contains(':'))
}

/// The whole disk a partition is part of (`vda1` → `vda`), as sysfs links it; none for
/// a device that is not a partition.
pub fn parent_disk(name: &str) -> Option<String> {
    let link = Path::new("/sys/class/block").join(name);
    if !link.join("partition").exists() {
        return None;
    }
    let resolved = std::fs::canonicalize(&link).ok()?;
    resolved.parent()?.file_name()?.to_str().map(str::to_string)
}

/// The device name of a mount source (`/dev/vda1` → `vda1`), as /proc/diskstats names it.
pub fn device_name(source: &str) -> Option<String> {
    let path = Path::new(source);
    let resolved = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    resolved
        .strip_prefix("/dev")
        .ok()
        .and_then(|name| name.to_str())
        .map(str::to_string)
}

/// Bytes written by `name` in a /proc/diskstats text.
fn written_in(text: &str, name: &str) -> Option<u64> {
    moved_in(text, name).map(|(_, written)| written)
}

/// Bytes read and written by `name` in a /proc/diskstats text.
fn moved_in(text: &str, name: &str) -> Option<(u64, u64)> {
    text.lines().find_map(|line| {
        let (device, counts) = counts_in(line)?;
        (device == name).then_some((counts.read_bytes, counts.written_bytes))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sectors_written_are_read_from_the_tenth_field() {
        let text = "   7       0 loop0 10 0 80 1 5 0 40 2 0 3 3 0 0 0 0 0 0\n \
                    253       0 vda 900 12 54000 300 700 80 123456 900 0 800 1200 0 0 0 0 0 0\n";
        assert_eq!(written_in(text, "vda"), Some(123456 * 512));
        assert_eq!(written_in(text, "loop0"), Some(40 * 512));
        assert_eq!(written_in(text, "sdb"), None);
        assert_eq!(moved_in(text, "vda"), Some((54000 * 512, 123456 * 512)));
        let (_, vda) = counts_in(text.lines().nth(1).unwrap()).unwrap();
        assert_eq!((vda.reads, vda.writes), (900, 700));
    }
}
