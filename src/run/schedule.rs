//! The order a run's workloads go in: groups run one after another, and the members of
//! a group start together on a barrier (each after its own delay) on one clock.

use std::time::Duration;

/// One workload of a group and how long after the group's start it begins.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Member {
    /// Index of the workload in the run.
    pub workload: usize,
    /// Wait after the common start.
    pub delay: Duration,
}

/// Groups of workloads, run in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schedule {
    /// The groups; the members of each run at once.
    pub groups: Vec<Vec<Member>>,
}

impl Schedule {
    /// Workloads `0..n` all at once, with these start delays (none when empty).
    pub fn together(n: usize, delays: &[Duration]) -> Schedule {
        let members = (0..n)
            .map(|workload| Member {
                workload,
                delay: delays.get(workload).copied().unwrap_or_default(),
            })
            .collect();
        Schedule {
            groups: vec![members],
        }
    }

    /// Workloads `0..n` one after another, none beside another: parts of a profile.
    pub fn one_by_one(n: usize) -> Schedule {
        Schedule {
            groups: (0..n)
                .map(|workload| {
                    vec![Member {
                        workload,
                        delay: Duration::ZERO,
                    }]
                })
                .collect(),
        }
    }

    /// Workloads `n..2n` one at a time (each the alone run of workload `i - n`), then
    /// `0..n` all at once: the order `--alone` asks for.
    pub fn alone_then_together(n: usize, delays: &[Duration]) -> Schedule {
        let mut groups: Vec<Vec<Member>> = Schedule::one_by_one(2 * n).groups.split_off(n);
        groups.extend(Schedule::together(n, delays).groups);
        Schedule { groups }
    }

    /// The groups whose members ran at once: the ones contention is measured on.
    pub fn shared(&self) -> impl Iterator<Item = &[Member]> {
        self.groups
            .iter()
            .filter(|g| g.len() > 1)
            .map(Vec::as_slice)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alone_runs_come_first_one_by_one() {
        let schedule = Schedule::alone_then_together(2, &[]);
        let workloads: Vec<Vec<usize>> = schedule
            .groups
            .iter()
            .map(|g| g.iter().map(|m| m.workload).collect())
            .collect();
        assert_eq!(workloads, vec![vec![2], vec![3], vec![0, 1]]);
        assert_eq!(schedule.shared().count(), 1);
    }
}
