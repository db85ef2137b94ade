//! A cpu run at a glance: its line of the run's summary (each test's rate at one and at
//! the most threads), its brief table (a row per test and class), and the tests this
//! machine could not run.

use super::kind::CpuKind;
use super::physics;
use super::scaling::{Scaling, ScalingPoint, scaling};
use crate::vocab::units::{format_loops, format_loops_short};
use crate::vocab::{SummaryLine, Table, Unmeasured};
use crate::workload::Stored;

/// Each test's first and last points, in the first class measured.
fn ends(scalings: &[Scaling]) -> Vec<(&Scaling, &ScalingPoint, &ScalingPoint)> {
    let first_class = scalings.first().map(|s| s.class.as_str());
    scalings
        .iter()
        .filter(|s| Some(s.class.as_str()) == first_class)
        .filter_map(|s| Some((s, s.points.first()?, s.points.last()?)))
        .collect()
}

/// The run's line of the summary: the first test's loops per second at the fewest and
/// the most threads, then how far the other tests scaled.
pub fn summary_lines(w: &Stored<CpuKind>) -> Vec<SummaryLine> {
    let scalings = scaling(&w.items, w.params.baseline.as_ref());
    let ends = ends(&scalings);
    let Some((headline, first, last)) = ends.first() else {
        return Vec::new();
    };
    let mut text = format!(
        "{} {} loops/s {}",
        headline.test,
        format_loops_short(first.loops_per_sec),
        on(first.threads)
    );
    if first.threads == last.threads {
        return vec![SummaryLine::new("cores", text)];
    }
    text.push_str(&format!(
        ", {} {} ({:.2}x{})",
        format_loops_short(last.loops_per_sec),
        on(last.threads),
        speedup(first, last),
        match unscaled(w, headline, last) {
            Some(Unscaled::BeyondLinear) => ", beyond linear: not a scaling result",
            Some(Unscaled::SharedCpus) => ", on shared CPUs: not a scaling result",
            None => "",
        }
    ));
    text.push_str(&others(w, &ends[1..], first, last));
    vec![SummaryLine::new("cores", text).covering(&["poor_scaling"])]
}

/// `on 4 threads`.
fn on(threads: usize) -> String {
    format!("on {threads} thread{}", plural(threads))
}

/// How many times faster `last` ran than `first`.
fn speedup(first: &ScalingPoint, last: &ScalingPoint) -> f64 {
    last.loops_per_sec / first.loops_per_sec
}

/// Why test `s`'s speedup at `l` is not a scaling result, if it is not: a speedup
/// beyond what the threads can give, or of threads that took turns on fewer CPUs, is
/// named, never put in the range.
fn unscaled(w: &Stored<CpuKind>, s: &Scaling, l: &ScalingPoint) -> Option<Unscaled> {
    if physics::shared(&w.items, &s.test, &s.class, l.threads) {
        Some(Unscaled::SharedCpus)
    } else if l.beyond_linear() {
        Some(Unscaled::BeyondLinear)
    } else {
        None
    }
}

/// The words on the other tests run over the headline's thread counts (`first` to
/// `last`): the range of their speedups, then those named apart and why.
fn others(
    w: &Stored<CpuKind>,
    rest: &[(&Scaling, &ScalingPoint, &ScalingPoint)],
    first: &ScalingPoint,
    last: &ScalingPoint,
) -> String {
    let comparable: Vec<_> = rest
        .iter()
        .filter(|(_, f, l)| f.threads == first.threads && l.threads == last.threads)
        .collect();
    let scaled: Vec<(f64, &str)> = comparable
        .iter()
        .filter(|(s, _, l)| unscaled(w, s, l).is_none())
        .map(|(s, f, l)| (speedup(f, l), s.test.as_str()))
        .collect();
    let least = scaled.iter().min_by(|a, b| a.0.total_cmp(&b.0));
    let most = scaled.iter().max_by(|a, b| a.0.total_cmp(&b.0));
    let mut text = match (least, most) {
        (Some(least), Some(most)) if least.1 != most.1 => format!(
            "; the other {} tests {:.2}x ({}) to {:.2}x ({})",
            scaled.len(),
            least.0,
            least.1,
            most.0,
            most.1
        ),
        (Some(only), _) => format!("; {} {:.2}x", only.1, only.0),
        _ => String::new(),
    };
    for (why, words) in [
        (
            Unscaled::BeyondLinear,
            "beyond linear (a slowed one-thread run, see its verdict)",
        ),
        (
            Unscaled::SharedCpus,
            "on shared CPUs (see threads_shared_cpus)",
        ),
    ] {
        let tests: Vec<&str> = comparable
            .iter()
            .filter(|(s, _, l)| unscaled(w, s, l) == Some(why))
            .map(|(s, _, _)| s.test.as_str())
            .collect();
        if !tests.is_empty() {
            text.push_str(&format!("; {} {words}", tests.join(", ")));
        }
    }
    text
}

/// Why a speedup is not a scaling result.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Unscaled {
    /// More than its threads can give.
    BeyondLinear,
    /// Its threads took turns on fewer CPUs than there were threads.
    SharedCpus,
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// The tests it could not run, and why.
pub fn unmeasured(w: &Stored<CpuKind>) -> Vec<Unmeasured> {
    w.context
        .unavailable
        .iter()
        .map(|missing| {
            Unmeasured::new(
                "test_unavailable",
                format!("the {} test", missing.test),
                &missing.reason,
            )
        })
        .collect()
}

/// A row per test and class: the rate at the fewest and the most threads, the speedup
/// and the efficiency.
pub fn brief_tables(w: &Stored<CpuKind>) -> Vec<Table> {
    let scalings = scaling(&w.items, w.params.baseline.as_ref());
    let classes = scalings.iter().any(|s| s.class != scalings[0].class);
    let (fewest, most) = scalings
        .iter()
        .flat_map(|s| &s.points)
        .fold((usize::MAX, 0), |(lo, hi), p| {
            (lo.min(p.threads), hi.max(p.threads))
        });
    let mut header = vec!["test".to_string()];
    if classes {
        header.push("class".into());
    }
    header.extend([
        format!("{fewest} thread{}", plural(fewest)),
        format!("{most} thread{}", plural(most)),
        "speedup".into(),
        "efficiency".into(),
    ]);
    let rows = scalings
        .iter()
        .map(|s| {
            let at = |threads: usize| s.points.iter().find(|p| p.threads == threads);
            let isa = w
                .items
                .iter()
                .find(|i| i.test == s.test)
                .map_or(String::new(), |i| format!(" ({})", i.isa));
            let mut row = vec![format!("{}{isa}", s.test)];
            if classes {
                row.push(s.class.clone());
            }
            row.push(at(fewest).map_or("-".into(), |p| format_loops(p.loops_per_sec)));
            match at(most).filter(|_| most != fewest) {
                Some(p) => row.extend([
                    format_loops(p.loops_per_sec),
                    format!("{:.2}x", p.speedup),
                    p.efficiency_cell(),
                ]),
                None => row.extend(["-".to_string(), "-".to_string(), "-".to_string()]),
            }
            row
        })
        .collect();
    let first = usize::from(classes) + 1;
    vec![Table {
        title: "loops/s in all threads, the empty loop's time taken off".into(),
        numeric: (first..header.len()).collect(),
        header,
        rows,
    }]
}
