//! Who held the CPUs while the tree's threads waited for one: once a second while they
//! wait, every process's CPU time (/proc/PID/stat); a process outside the tree that ran
//! on a CPU where a member waited, between two such looks, held it. Reading every
//! process costs 20-30 µs each on a busy machine, so it is done once a second, and only
//! where the machine's CPU time (/proc/stat) says others ran at all.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use super::totals::Holder;
use crate::platform::procfs;
use crate::platform::threads::process_ids;

/// How often every process is read.
const EVERY: Duration = Duration::from_secs(1);
/// Seconds of waiting for a CPU in a second below which nobody is said to hold it.
const WAITED_S: f64 = 0.001;
/// Cores others must have used in a second for their processes to be looked at.
const OTHERS_CORES: f64 = 0.02;

/// One process as a look saw it.
struct Seen {
    start_ticks: u64,
    cpu_ticks: u64,
    cpu: Option<u32>,
    name: String,
}

/// The holders found so far, and the last look.
pub struct Holders {
    last: Option<(Instant, HashMap<u32, Seen>)>,
    /// When the machine's CPU time was last read, and its busy ticks then.
    machine: Option<(Instant, u64)>,
    /// CPU seconds the tree used since.
    own_s: f64,
    waited_s: f64,
    cpus: Vec<u32>,
    found: HashMap<(u32, u64), Holder>,
    ticks_per_second: f64,
}

impl Holders {
    /// None found yet.
    pub fn new() -> Holders {
        Holders {
            last: None,
            machine: None,
            own_s: 0.0,
            waited_s: 0.0,
            cpus: Vec::new(),
            found: HashMap::new(),
            ticks_per_second: procfs::ticks_per_second(),
        }
    }

    /// After a sample in which members ran `cpu_s` and waited `cpu_wait_s` for a CPU,
    /// on `cpus`: once a second, reads the machine's CPU time, and where others used
    /// some while members waited, looks at every process.
    pub fn after_sample(
        &mut self,
        now: Instant,
        cpu_s: f64,
        cpu_wait_s: f64,
        cpus: &[u32],
        member: &dyn Fn(u32) -> bool,
    ) {
        self.waited_s += cpu_wait_s;
        self.own_s += cpu_s;
        for cpu in cpus {
            if !self.cpus.contains(cpu) {
                self.cpus.push(*cpu);
            }
        }
        if self
            .machine
            .is_some_and(|(at, _)| now.duration_since(at) < EVERY)
        {
            return;
        }
        let busy = procfs::cpu_ticks();
        let ticks = busy.process + busy.interrupts;
        let Some((at, before)) = self.machine else {
            self.machine = Some((now, ticks));
            return;
        };
        let seconds = now.duration_since(at).as_secs_f64();
        let machine_s = ticks.saturating_sub(before) as f64 / self.ticks_per_second;
        let others = (machine_s - self.own_s).max(0.0);
        self.machine = Some((now, ticks));
        self.own_s = 0.0;
        if self.waited_s >= WAITED_S && others >= OTHERS_CORES * seconds {
            self.look(now, member);
        } else {
            // Nobody else to name: the next look starts afresh.
            self.last = None;
            self.waited_s = 0.0;
            self.cpus.clear();
        }
    }

    /// Looks once more if members waited since the last look, and gives the holders,
    /// most first.
    pub fn close(mut self, member: &dyn Fn(u32) -> bool) -> Vec<Holder> {
        if self.waited_s >= WAITED_S {
            self.look(Instant::now(), member);
        }
        let mut holders: Vec<Holder> = self.found.into_values().collect();
        holders.sort_by(|a, b| b.cpu_seconds.total_cmp(&a.cpu_seconds));
        holders.truncate(5);
        holders
    }

    fn look(&mut self, now: Instant, member: &dyn Fn(u32) -> bool) {
        let seen: HashMap<u32, Seen> = process_ids()
            .into_iter()
            .filter(|pid| !member(*pid))
            .filter_map(|pid| {
                let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
                let p = procfs::parse_stat(pid, &text)?;
                Some((
                    pid,
                    Seen {
                        start_ticks: p.start_ticks,
                        cpu_ticks: p.cpu_ticks,
                        cpu: p.last_cpu,
                        name: p.name,
                    },
                ))
            })
            .collect();
        if let Some((_, before)) = &self.last
            && self.waited_s >= WAITED_S
        {
            for (pid, now) in &seen {
                let Some(then) = before.get(pid).filter(|t| t.start_ticks == now.start_ticks)
                else {
                    continue;
                };
                let ticks = now.cpu_ticks.saturating_sub(then.cpu_ticks);
                let on_our_cpus = self.cpus.is_empty()
                    || now.cpu.is_some_and(|c| self.cpus.contains(&c))
                    || then.cpu.is_some_and(|c| self.cpus.contains(&c));
                if ticks == 0 || !on_our_cpus {
                    continue;
                }
                let holder = self
                    .found
                    .entry((*pid, now.start_ticks))
                    .or_insert_with(|| Holder {
                        pid: *pid,
                        name: now.name.clone(),
                        cpu_seconds: 0.0,
                    });
                holder.cpu_seconds += ticks as f64 / self.ticks_per_second;
            }
        }
        self.last = Some((now, seen));
        self.waited_s = 0.0;
        self.cpus.clear();
    }
}
