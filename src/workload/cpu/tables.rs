//! The cpu tests' table: one row per test, class and thread count, with its rate, its
//! scaling, where its threads ran, and, where known, its energy and share of a baseline.

use super::context::CpuContext;
use super::item::CpuItem;
use super::scaling::{Scaling, ScalingPoint};
use crate::platform::cores::CoreType;
use crate::vocab::Table;
use crate::vocab::units::format_loops;

/// Columns beyond the ones every run has.
struct Columns {
    /// Energy per loop, where any test's energy is known.
    energy: bool,
    /// The baseline run, where the run is compared with one.
    baseline: Option<i64>,
}

/// The table of `items`, with their `scalings`.
pub fn table(
    items: &[CpuItem],
    scalings: &[Scaling],
    context: &CpuContext,
    baseline: Option<i64>,
) -> Table {
    let columns = Columns {
        energy: items.iter().any(|i| i.joules_per_loop.is_some()),
        baseline,
    };
    let header = columns.header();
    let rows = items
        .iter()
        .map(|item| columns.row(item, point_of(scalings, item)))
        .collect();
    // Every column from threads on is a number, except the list of cpus seen.
    let numeric = (2..header.len()).filter(|&i| i != 8).collect();
    Table {
        title: format!(
            "in-core loops, the empty loop's time taken off · core types: {}",
            core_types(&context.core_types)
        ),
        header,
        rows,
        numeric,
    }
}

/// The point of `item`'s test, class and threads.
fn point_of<'a>(scalings: &'a [Scaling], item: &CpuItem) -> Option<&'a ScalingPoint> {
    scalings
        .iter()
        .find(|s| s.test == item.test && s.class == item.class)
        .and_then(|s| s.points.iter().find(|p| p.threads == item.threads))
}

impl Columns {
    fn header(&self) -> Vec<String> {
        let mut header: Vec<String> = [
            "test",
            "class",
            "threads",
            "loops/s",
            "per thread",
            "speedup",
            "efficiency",
            "ns/loop",
            "cpus seen",
            "migrations",
        ]
        .map(String::from)
        .to_vec();
        if self.energy {
            header.push("nJ/loop".into());
        }
        if let Some(run) = self.baseline {
            header.push(format!("of run {run}"));
        }
        header
    }

    fn row(&self, item: &CpuItem, point: Option<&ScalingPoint>) -> Vec<String> {
        let mut row = vec![
            format!("{} ({})", item.test, item.isa),
            item.class.clone(),
            item.threads.to_string(),
            item.loops_per_sec.map_or("-".into(), format_loops),
            item.loops_per_sec_per_thread
                .map_or("-".into(), format_loops),
            point.map_or("-".into(), |p| format!("{:.2}x", p.speedup)),
            point.map_or("-".into(), ScalingPoint::efficiency_cell),
            format!("{:.2}", item.work_ns_per_loop),
            join(&item.cpus_seen),
            item.migrations.to_string(),
        ];
        if self.energy {
            row.push(
                item.joules_per_loop
                    .map_or("-".into(), |j| format!("{:.3}", j * 1e9)),
            );
        }
        if self.baseline.is_some() {
            row.push(
                point
                    .and_then(|p| p.share_of_baseline)
                    .map_or("-".into(), |s| format!("{:.0}%", s * 100.0)),
            );
        }
        row
    }
}

/// The core types in a line: `performance (cpu_core) on cpus 0,1; efficiency ...`.
fn core_types(types: &[CoreType]) -> String {
    types
        .iter()
        .map(|t| format!("{} on cpus {}", t.name, join(&t.cpus)))
        .collect::<Vec<_>>()
        .join("; ")
}

/// CPU numbers as `0,2,3`.
fn join(cpus: &[usize]) -> String {
    cpus.iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(",")
}
