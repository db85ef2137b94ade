//! What a cpu run's scaling may claim: a speedup beyond what its threads can give is a
//! slowed one-thread run (or caches split across cores), not a scaling result; threads
//! that ran on fewer CPUs than there were threads shared them; and a run other work
//! disturbed says nothing of how this machine scales.

use super::item::CpuItem;
use super::kind::CpuKind;
use super::scaling::{Scaling, ScalingPoint};
use crate::analysis::interference;
use crate::document::{Severity, Verdict};
use crate::vocab::units::format_speedup;
use crate::workload::Stored;

/// Efficiency above which a speedup is more than its threads can give: the margin is
/// the spread of one test's rate from run to run on a quiet VM (a few percent) twice.
pub const BEYOND_LINEAR: f64 = 1.10;
/// Efficiency under which scaling is called out.
const POOR_SCALING: f64 = 0.75;
/// Cores other processes must use during the one-thread run to be named as its cause.
const OTHER_CORES: f64 = 0.25;

impl ScalingPoint {
    /// Whether this point's speedup is more than its threads can give.
    pub fn beyond_linear(&self) -> bool {
        self.threads > 1 && self.efficiency > BEYOND_LINEAR
    }

    /// Its efficiency as a table shows it: `98%`, or `130%?` where it is beyond linear.
    pub fn efficiency_cell(&self) -> String {
        let mark = if self.beyond_linear() { "?" } else { "" };
        format!("{:.0}%{mark}", self.efficiency * 100.0)
    }
}

/// The verdicts on how `scaling` may be read: beyond linear, CPUs shared, or poor
/// (unless other work `disturbed` the run).
pub fn verdicts(w: &Stored<CpuKind>, scaling: &Scaling, disturbed: bool) -> Vec<Verdict> {
    let verdict = Verdict::about(Some(w.index()));
    let mut out = Vec::new();
    let same = |threads: usize| {
        w.items.iter().find(|i| {
            i.test == scaling.test
                && i.class == scaling.class
                && i.threads == threads
                && i.loops_per_sec.is_some()
        })
    };
    let crowded: Vec<&CpuItem> = crowded(&w.items)
        .filter(|i| i.test == scaling.test && i.class == scaling.class)
        .collect();
    // Threads that took turns on fewer CPUs are named by their own verdict: their
    // speedup is no sign of a slowed one-thread run.
    let shared = |threads: usize| crowded.iter().any(|i| i.threads == threads);
    if let Some(point) = scaling
        .points
        .iter()
        .rev()
        .find(|p| p.beyond_linear() && !shared(p.threads))
    {
        let first = scaling.points.first().expect("a point beyond linear");
        let slowed = same(first.threads).map_or(String::new(), |one| cause(w, one));
        out.push(verdict(
            "beyond_linear",
            Severity::Warning,
            format!(
                "{} ({}) ran {:.2}x on {} threads ({:.0}% of linear), more than they can give: \
                 each thread went {:.2}x as fast as {}, so {} was slowed{slowed} or caches \
                 split across cores helped; not a scaling result",
                scaling.test,
                scaling.class,
                point.speedup,
                point.threads,
                point.efficiency * 100.0,
                point.loops_per_sec_per_thread / first.loops_per_sec_per_thread,
                if first.threads == 1 {
                    "the one thread alone".to_string()
                } else {
                    format!("a thread of the {}-thread run", first.threads)
                },
                threads_words(first.threads),
            ),
        ));
        return out;
    }
    let Some(last) = scaling.points.last().filter(|p| p.threads > 1) else {
        return out;
    };
    // A run other work disturbed, or whose threads shared CPUs, says nothing of how
    // this machine's cores scale: the verdicts that say so stand instead.
    if last.efficiency < POOR_SCALING && !shared(last.threads) && !disturbed {
        out.push(verdict(
            "poor_scaling",
            Severity::Info,
            format!(
                "{} ({}) ran {} on {} threads than on one: {:.0}% of linear; \
                 the threads share a core or a unit, or were not all given a core",
                scaling.test,
                scaling.class,
                format_speedup(last.speedup),
                last.threads,
                last.efficiency * 100.0
            ),
        ));
    }
    out
}

/// The items of `w` whose threads were seen on fewer CPUs than there were threads.
fn crowded(items: &[CpuItem]) -> impl Iterator<Item = &CpuItem> {
    items.iter().filter(|i| {
        i.threads > 1
            && i.loops_per_sec.is_some()
            && !i.cpus_seen.is_empty()
            && i.cpus_seen.len() < i.threads
    })
}

/// Whether the threads of `test` (`class`) at `threads` took turns on fewer CPUs than
/// there were threads: their speedup says nothing of that many cores.
pub fn shared(items: &[CpuItem], test: &str, class: &str, threads: usize) -> bool {
    crowded(items).any(|i| i.test == test && i.class == class && i.threads == threads)
}

/// One verdict naming every test whose threads took turns on fewer CPUs than there
/// were threads: `int (normal, 2 threads on cpu 0)`; none where none did.
pub fn shared_cpus(w: &Stored<CpuKind>) -> Option<Verdict> {
    let named: Vec<String> = crowded(&w.items)
        .map(|i| {
            format!(
                "{} ({}, {} threads on {} {})",
                i.test,
                i.class,
                i.threads,
                if i.cpus_seen.len() == 1 {
                    "cpu"
                } else {
                    "cpus"
                },
                i.cpus_seen
                    .iter()
                    .map(usize::to_string)
                    .collect::<Vec<_>>()
                    .join(",")
            )
        })
        .collect();
    (!named.is_empty()).then(|| {
        Verdict::about(Some(w.index()))(
            "threads_shared_cpus",
            Severity::Info,
            format!(
                "threads took turns on fewer CPUs than there were threads: {}; those figures say nothing of that many cores",
                named.join(", ")
            ),
        )
    })
}

/// What the run's account says of the time `one` ran: `: other processes used 0.93 of
/// a core meanwhile`, or that nothing in it was busy.
fn cause(w: &Stored<CpuKind>, one: &CpuItem) -> String {
    let (Some(account), Some(series)) = (&w.at.run.interference, &w.record.series) else {
        return String::new();
    };
    let from = series.clock_unix_s + series.started_at_s + one.started_at_s;
    let others = interference::other_cores_between(account, from, from + one.seconds);
    if others >= OTHER_CORES {
        format!(" (other processes used {others:.2} of a core meanwhile)")
    } else {
        " (by the run's account no other process was busy then: a lower clock or the \
         hypervisor)"
            .into()
    }
}

/// `the one-thread run`, `the 3-thread run`.
fn threads_words(threads: usize) -> String {
    if threads == 1 {
        "the one-thread run".to_string()
    } else {
        format!("the {threads}-thread run")
    }
}
