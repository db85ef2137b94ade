//! The CPU quota that holds this process, from its cgroups (v1's cpu controller or v2),
//! and how long the scheduler throttled the group that sets it.

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

/// This process's cpu controller: where it is mounted, its group's path under that,
/// and whether it is v1's (`cpu` or `cpu,cpuacct`) rather than v2's.
fn own_group() -> Option<(PathBuf, PathBuf, bool)> {
    let text = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    for line in text.lines() {
        let mut fields = line.splitn(3, ':');
        let (_, controllers, path) = (fields.next()?, fields.next()?, fields.next()?);
        if controllers.split(',').any(|c| c == "cpu") {
            let path = PathBuf::from(path.trim_start_matches('/'));
            for mount in ["/sys/fs/cgroup/cpu", "/sys/fs/cgroup/cpu,cpuacct"] {
                if Path::new(mount)
                    .join(&path)
                    .join("cpu.cfs_quota_us")
                    .exists()
                {
                    return Some((PathBuf::from(mount), path, true));
                }
            }
        }
    }
    let path = PathBuf::from(
        text.lines()
            .find_map(|l| l.strip_prefix("0::"))?
            .trim_start_matches('/'),
    );
    let mount = PathBuf::from("/sys/fs/cgroup");
    mount
        .join(&path)
        .join("cpu.stat")
        .exists()
        .then_some((mount, path, false))
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
    let (mount, mut path, v1) = own_group()?;
    let mut tightest: Option<(f64, PathBuf)> = None;
    loop {
        let group = mount.join(&path);
        if let Some(cores) = quota_cores(&group, v1)
            && tightest.as_ref().is_none_or(|(least, _)| cores < *least)
        {
            tightest = Some((cores, group));
        }
        if !path.pop() {
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
}
