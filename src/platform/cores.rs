//! The kinds of core a CPU has: hybrid Intel parts list their P and E cores under
//! /sys/devices/cpu_core and /sys/devices/cpu_atom; other machines may differ in
//! cpu_capacity (Arm big.LITTLE); where neither says anything, there is one type.

use std::path::Path;

use serde::{Deserialize, Serialize};

/// A group of cores of one kind.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CoreType {
    /// Its name: `performance (cpu_core)`, `efficiency (cpu_atom)`, `capacity 1024`, `one type`.
    pub name: String,
    /// The logical CPUs of this kind.
    pub cpus: Vec<usize>,
}

/// The core types of this machine, from sysfs.
pub fn core_types() -> Vec<CoreType> {
    core_types_in(Path::new("/sys/devices"))
}

fn core_types_in(devices: &Path) -> Vec<CoreType> {
    let hybrid: Vec<CoreType> = [("cpu_core", "performance"), ("cpu_atom", "efficiency")]
        .iter()
        .filter_map(|(dir, kind)| {
            let list = std::fs::read_to_string(devices.join(dir).join("cpus")).ok()?;
            Some(CoreType {
                name: format!("{kind} ({dir})"),
                cpus: parse_list(list.trim())?,
            })
        })
        .collect();
    if !hybrid.is_empty() {
        return hybrid;
    }
    let mut by_capacity: Vec<(u64, Vec<usize>)> = Vec::new();
    let online = std::fs::read_to_string(devices.join("system/cpu/online"))
        .ok()
        .and_then(|l| parse_list(l.trim()))
        .unwrap_or_default();
    for cpu in &online {
        let capacity =
            std::fs::read_to_string(devices.join(format!("system/cpu/cpu{cpu}/cpu_capacity")))
                .ok()
                .and_then(|c| c.trim().parse().ok());
        let Some(capacity) = capacity else { continue };
        match by_capacity.iter_mut().find(|(c, _)| *c == capacity) {
            Some((_, cpus)) => cpus.push(*cpu),
            None => by_capacity.push((capacity, vec![*cpu])),
        }
    }
    if by_capacity.len() > 1 {
        by_capacity.sort_by_key(|c| std::cmp::Reverse(c.0));
        return by_capacity
            .into_iter()
            .map(|(capacity, cpus)| CoreType {
                name: format!("capacity {capacity}"),
                cpus,
            })
            .collect();
    }
    vec![CoreType {
        name: "one type".into(),
        cpus: online,
    }]
}

/// The online CPUs, from the kernel's list, else 0..(the CPUs the machine reports).
pub fn online_cpus() -> Vec<usize> {
    std::fs::read_to_string("/sys/devices/system/cpu/online")
        .ok()
        .and_then(|l| parse_list(l.trim()))
        .filter(|cpus| !cpus.is_empty())
        .unwrap_or_else(|| (0..super::probe_machine().logical_cpus).collect())
}

/// The CPUs this process may run on (its affinity, as taskset or a cpuset left it); the
/// online CPUs where the kernel does not say.
pub fn allowed_cpus() -> Vec<usize> {
    rustix::thread::sched_getaffinity(None)
        .ok()
        .map(|set| {
            (0..rustix::thread::CpuSet::MAX_CPU)
                .filter(|&cpu| set.is_set(cpu))
                .collect::<Vec<_>>()
        })
        .filter(|cpus| !cpus.is_empty())
        .unwrap_or_else(online_cpus)
}

/// The CPUs to keep threads on where none are asked for: this process's affinity where
/// it leaves out an online CPU, else none (every CPU).
pub fn inherited_cpus() -> Option<Vec<usize>> {
    let allowed = allowed_cpus();
    online_cpus()
        .iter()
        .any(|cpu| !allowed.contains(cpu))
        .then_some(allowed)
}

/// Parses a kernel CPU list: `0-3,8,10-11`.
pub fn parse_list(text: &str) -> Option<Vec<usize>> {
    let mut cpus = Vec::new();
    for part in text.split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((from, to)) => {
                let (from, to): (usize, usize) =
                    (from.trim().parse().ok()?, to.trim().parse().ok()?);
                if from > to || to - from > 1 << 16 {
                    return None;
                }
                cpus.extend(from..=to);
            }
            None => cpus.push(part.trim().parse().ok()?),
        }
    }
    Some(cpus)
}

/// CPU time (user and system) the calling thread has used so far, in seconds: what a
/// measuring thread spent, read from its own CPU clock.
pub fn calling_thread_cpu_seconds() -> f64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    t.tv_sec as f64 + t.tv_nsec as f64 / 1e9
}

/// The CPU the calling thread runs on now.
pub fn calling_thread_cpu() -> Option<u32> {
    // SAFETY: sched_getcpu takes nothing and returns a CPU number or -1.
    u32::try_from(unsafe { libc::sched_getcpu() }).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_parse() {
        assert_eq!(parse_list("0-3,8,10-11"), Some(vec![0, 1, 2, 3, 8, 10, 11]));
        assert_eq!(parse_list("1"), Some(vec![1]));
        assert_eq!(parse_list("3-1"), None);
        assert_eq!(parse_list("x"), None);
    }

    #[test]
    fn hybrid_parts_name_their_types_and_others_have_one() {
        let dir = tempfile::tempdir().unwrap();
        let devices = dir.path();
        std::fs::create_dir_all(devices.join("system/cpu/cpu0")).unwrap();
        std::fs::write(devices.join("system/cpu/online"), "0-1\n").unwrap();
        let one = core_types_in(devices);
        assert_eq!(
            one,
            vec![CoreType {
                name: "one type".into(),
                cpus: vec![0, 1]
            }]
        );
        for (dir, cpus) in [("cpu_core", "0-1"), ("cpu_atom", "2-5")] {
            std::fs::create_dir_all(devices.join(dir)).unwrap();
            std::fs::write(devices.join(dir).join("cpus"), cpus).unwrap();
        }
        let hybrid = core_types_in(devices);
        assert_eq!(hybrid.len(), 2);
        assert_eq!(hybrid[1].name, "efficiency (cpu_atom)");
        assert_eq!(hybrid[1].cpus, vec![2, 3, 4, 5]);
    }
}
