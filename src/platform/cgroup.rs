//! The cgroups this process is in (v1's controllers or v2's hierarchy, where each is
//! mounted), the CPU quota that holds it, and how long the scheduler throttled the
//! group that sets it.

use std::path::{Path, PathBuf};

/// The tightest CPU quota over this process's cgroup and its parents, read at one time.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CpuQuota {
    /// Cores' worth of CPU time the group may use (quota over period).
    pub cores: f64,
    /// Periods the group has run in since it was made.
    pub periods: u64,
    /// Of them, those whose quota ran out.
    pub throttled_periods: u64,
    /// Time the group's threads were held back, microseconds.
    pub throttled_us: u64,
}

/// Where a controller's hierarchy is mounted and the group this process is in.
pub struct Own {
    /// The mount point of the hierarchy.
    pub mount: PathBuf,
    /// This process's group, as a folder.
    pub group: PathBuf,
}

/// The mount points of cgroup filesystems: v1's with their controllers, v2's with none.
fn cgroup_mounts() -> Vec<(PathBuf, Vec<String>, String)> {
    let text = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    text.lines()
        .filter_map(|line| {
            let (before, after) = line.split_once(" - ")?;
            let fields: Vec<&str> = before.split(' ').collect();
            let mut after = after.split(' ');
            let fstype = after.next()?;
            let _source = after.next()?;
            let options = after.next().unwrap_or("");
            if fstype != "cgroup" && fstype != "cgroup2" {
                return None;
            }
            let root = fields.get(3)?.to_string();
            let controllers = if fstype == "cgroup" {
                options.split(',').map(str::to_string).collect()
            } else {
                Vec::new()
            };
            Some((PathBuf::from(fields.get(4)?), controllers, root))
        })
        .collect()
}

/// The group folder of a path as /proc/self/cgroup gives it, under a mount whose root
/// is `root`.
fn folder(mount: &Path, root: &str, path: &str) -> PathBuf {
    let relative = path
        .strip_prefix(root)
        .unwrap_or(path)
        .trim_start_matches('/');
    if relative.is_empty() {
        return mount.to_path_buf();
    }
    mount.join(relative)
}

/// This process's group of v1's `controller`, where that hierarchy is mounted.
fn v1_group(controller: &str) -> Option<Own> {
    let text = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let path = text.lines().find_map(|line| {
        let mut fields = line.splitn(3, ':');
        let (_, controllers, path) = (fields.next()?, fields.next()?, fields.next()?);
        controllers
            .split(',')
            .any(|c| c == controller)
            .then(|| path.to_string())
    })?;
    let (mount, _, root) = cgroup_mounts()
        .into_iter()
        .find(|(_, controllers, _)| controllers.iter().any(|c| c == controller))?;
    Some(Own {
        group: folder(&mount, &root, &path),
        mount,
    })
}

/// This process's group of the v2 hierarchy, where it is mounted.
fn v2_group() -> Option<Own> {
    let text = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let path = text
        .lines()
        .find_map(|l| l.strip_prefix("0::"))?
        .to_string();
    let (mount, _, root) = cgroup_mounts()
        .into_iter()
        .find(|(_, controllers, _)| controllers.is_empty())?;
    Some(Own {
        group: folder(&mount, &root, &path),
        mount,
    })
}

/// This process's group of v1's controller `v1_name` and whether it is v1's; else its
/// group of the v2 hierarchy, where one is mounted.
pub fn own_group(v1_name: &str) -> Option<(Own, bool)> {
    match v1_group(v1_name) {
        Some(own) => Some((own, true)),
        None => v2_group().map(|own| (own, false)),
    }
}

/// A group's quota in cores, where it has one.
fn quota_cores(group: &Path, v1: bool) -> Option<f64> {
    let read = |name: &str| std::fs::read_to_string(group.join(name)).ok();
    let (quota, period) = if v1 {
        let quota: i64 = read("cpu.cfs_quota_us")?.trim().parse().ok()?;
        let period: f64 = read("cpu.cfs_period_us")?.trim().parse().ok()?;
        (u64::try_from(quota).ok()? as f64, period)
    } else {
        let max = read("cpu.max")?;
        let mut fields = max.split_whitespace();
        let quota: u64 = fields.next()?.parse().ok()?;
        (quota as f64, fields.next()?.parse().ok()?)
    };
    (period > 0.0).then(|| quota / period)
}

/// The throttling counters of a `cpu.stat` text: periods, throttled periods, and the
/// time throttled in microseconds (v1 counts it in nanoseconds as `throttled_time`).
pub fn parse_cpu_stat(text: &str) -> Option<(u64, u64, u64)> {
    let value = |key: &str| {
        text.lines().find_map(|line| {
            let (name, value) = line.split_once(' ')?;
            (name == key).then(|| value.trim().parse::<u64>().ok())?
        })
    };
    let throttled_us = value("throttled_usec").or_else(|| Some(value("throttled_time")? / 1000))?;
    Some((value("nr_periods")?, value("nr_throttled")?, throttled_us))
}

/// The tightest CPU quota on this process now, with its group's throttling so far;
/// `None` where no group up to the root has one.
pub fn cpu_quota() -> Option<CpuQuota> {
    let (own, v1) = own_group("cpu")?;
    let mut tightest: Option<(f64, PathBuf)> = None;
    let mut group = own.group.clone();
    loop {
        if let Some(cores) = quota_cores(&group, v1)
            && tightest.as_ref().is_none_or(|(least, _)| cores < *least)
        {
            tightest = Some((cores, group.clone()));
        }
        if group == own.mount || !group.pop() {
            break;
        }
    }
    let (cores, group) = tightest?;
    let stat = std::fs::read_to_string(group.join("cpu.stat")).ok()?;
    let (periods, throttled_periods, throttled_us) = parse_cpu_stat(&stat)?;
    Some(CpuQuota {
        cores,
        periods,
        throttled_periods,
        throttled_us,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_versions_of_cpu_stat_are_read_in_microseconds() {
        let v1 = "nr_periods 40\nnr_throttled 12\nthrottled_time 3500000\nnr_bursts 0\n";
        assert_eq!(parse_cpu_stat(v1), Some((40, 12, 3500)));
        let v2 = "usage_usec 10\nuser_usec 5\nsystem_usec 5\nnr_periods 40\n\
                  nr_throttled 12\nthrottled_usec 3500\nnr_bursts 0\nburst_usec 0\n";
        assert_eq!(parse_cpu_stat(v2), Some((40, 12, 3500)));
        assert_eq!(parse_cpu_stat("usage_usec 10\n"), None);
    }

    #[test]
    fn a_group_path_is_found_under_its_mount_s_root() {
        assert_eq!(
            folder(Path::new("/sys/fs/cgroup/cpu"), "/", "/a/b"),
            PathBuf::from("/sys/fs/cgroup/cpu/a/b")
        );
        assert_eq!(
            folder(Path::new("/sys/fs/cgroup"), "/docker/x", "/docker/x/y"),
            PathBuf::from("/sys/fs/cgroup/y")
        );
        assert_eq!(
            folder(Path::new("/sys/fs/cgroup/cpu"), "/", "/"),
            PathBuf::from("/sys/fs/cgroup/cpu")
        );
    }
}
