//! What other work took from the machine while one try of a test ran, measured by the
//! test itself apart from every figure of ratelab's: the hypervisor's steal, and the
//! CPU of processes that are not the test's own (this process with its threads, the
//! children it waited for, and every live process under it: ratelab, its peers, the
//! rig's servers), from /proc/stat and /proc/PID/stat. It is the one cause a try may be
//! made again for (the rule at the top of tests/common/mod.rs).

use std::collections::HashMap;
use std::time::Instant;

/// Other processes' CPU, in CPUs over the try, from which a try is disturbed.
pub const OTHER_CPUS: f64 = 0.25;
/// The hypervisor's steal, a share of all CPUs' time, from which a try is disturbed.
pub const STEAL_SHARE: f64 = 0.05;
/// Tries shorter than this are never called disturbed: the kernel's ticks are 10 ms.
pub const LEAST_SECONDS: f64 = 0.5;

/// The machine's counts at a try's start.
pub struct Load {
    at: Instant,
    stat: Stat,
    own_s: f64,
    tree: HashMap<u32, u64>,
}

/// /proc/stat's first line, in ticks: busy (user, nice, system, irq, softirq), steal,
/// and all of it.
#[derive(Clone, Copy)]
struct Stat {
    busy: u64,
    steal: u64,
    all: u64,
}

fn stat() -> Stat {
    let text = std::fs::read_to_string("/proc/stat").expect("read /proc/stat");
    let fields: Vec<u64> = text
        .lines()
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .skip(1)
        .take(8)
        .map(|f| f.parse().unwrap_or(0))
        .collect();
    let field = |i: usize| fields.get(i).copied().unwrap_or(0);
    Stat {
        busy: field(0) + field(1) + field(2) + field(5) + field(6),
        steal: field(7),
        all: fields.iter().sum(),
    }
}

/// This process's CPU seconds with those of the children it waited for.
fn own_seconds() -> f64 {
    let seconds = |who: libc::c_int| {
        // SAFETY: getrusage fills the zeroed struct it is given.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        unsafe { libc::getrusage(who, &mut usage) };
        let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
        tv(usage.ru_utime) + tv(usage.ru_stime)
    };
    seconds(libc::RUSAGE_SELF) + seconds(libc::RUSAGE_CHILDREN)
}

/// Every live process under this one, with its ticks (its own and those of the
/// children it waited for).
fn tree() -> HashMap<u32, u64> {
    let me = std::process::id();
    let mut parent: HashMap<u32, (u32, u64)> = HashMap::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // Fields after the name, which may hold spaces: state ppid … utime (14) stime
        // cutime cstime (17).
        let Some(rest) = text.rsplit_once(')').map(|(_, r)| r) else {
            continue;
        };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let number = |i: usize| fields.get(i - 3).and_then(|f| f.parse::<u64>().ok());
        let (Some(ppid), Some(u), Some(s), Some(cu), Some(cs)) =
            (number(4), number(14), number(15), number(16), number(17))
        else {
            continue;
        };
        parent.insert(pid, (ppid as u32, u + s + cu + cs));
    }
    let under_me = |mut pid: u32| {
        for _ in 0..64 {
            match parent.get(&pid) {
                Some(&(ppid, _)) if ppid == me => return true,
                Some(&(ppid, _)) if ppid > 1 => pid = ppid,
                _ => return false,
            }
        }
        false
    };
    parent
        .iter()
        .filter(|(pid, _)| under_me(**pid))
        .map(|(pid, (_, ticks))| (*pid, *ticks))
        .collect()
}

fn ticks_per_second() -> f64 {
    // SAFETY: sysconf reads a constant.
    unsafe { libc::sysconf(libc::_SC_CLK_TCK) as f64 }
}

impl Load {
    /// Counts from now.
    pub fn start() -> Load {
        Load {
            at: Instant::now(),
            stat: stat(),
            own_s: own_seconds(),
            tree: tree(),
        }
    }

    /// What other work took since the start, in words; none where it took less than
    /// [`OTHER_CPUS`] and the steal was under [`STEAL_SHARE`], or the try was shorter
    /// than [`LEAST_SECONDS`].
    pub fn disturbed(&self) -> Option<String> {
        let wall = self.at.elapsed().as_secs_f64();
        if wall < LEAST_SECONDS {
            return None;
        }
        let now = stat();
        let hz = ticks_per_second();
        let tree_s = tree()
            .into_iter()
            .map(|(pid, ticks)| ticks.saturating_sub(self.tree.get(&pid).copied().unwrap_or(0)))
            .sum::<u64>() as f64
            / hz;
        let own_s = own_seconds() - self.own_s + tree_s;
        let busy_s = now.busy.saturating_sub(self.stat.busy) as f64 / hz;
        let others = (busy_s - own_s).max(0.0) / wall;
        let all = now.all.saturating_sub(self.stat.all).max(1) as f64;
        let steal = now.steal.saturating_sub(self.stat.steal) as f64 / all;
        let mut causes = Vec::new();
        if others >= OTHER_CPUS {
            causes.push(format!(
                "other processes used {others:.2} CPUs (by /proc/stat, less this test's own processes)"
            ));
        }
        if steal >= STEAL_SHARE {
            causes.push(format!(
                "the hypervisor took {:.0}% of the CPUs' time",
                steal * 100.0
            ));
        }
        (!causes.is_empty()).then(|| format!("over {wall:.1} s, {}", causes.join(" and ")))
    }
}
