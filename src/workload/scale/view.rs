//! How ratelab summarises, judges and shows a stored scale run: the median time at each
//! CPU count, the speedup over the fewest CPUs, efficiency, throughput, and the failures.

use super::kind::{ScaleKind, ScalePoint, points, summary_of};
use super::{Limit, ScaleItem, charts};
use crate::analysis::stats::Stats;
use crate::document::{Severity, Verdict};
use crate::vocab::units::{format_rate, format_seconds, format_speedup};
use crate::vocab::{Chart, Table};
use crate::workload::{DecodeError, Decoded, Stored, View};

impl View for Stored<'_, ScaleKind> {
    fn verdicts(&self, _run: &Decoded) -> Result<Vec<Verdict>, DecodeError> {
        let target = &self.record.target;
        let verdict = Verdict::about(Some(self.index()));
        let mut out = Vec::new();
        let failed = self.items.iter().filter(|i| i.exit_code != Some(0)).count();
        if failed > 0 {
            out.push(verdict(
                "command_failed",
                Severity::Warning,
                format!(
                    "{failed} runs of `{target}` did not exit 0: their times may not be of the whole work"
                ),
            ));
        }
        if let Some(sentence) = summary_of(&self.items)
            .fits
            .sentence(&|runs| format!("{runs:.3} runs/s"))
        {
            out.push(verdict("scaling_law", Severity::Info, sentence));
        }
        let points = points(&self.items);
        if let Some(moved) = cpu_time_moved(&self.items, &points) {
            out.push(verdict(
                "cpu_time_moved",
                Severity::Warning,
                format!(
                    "the same work took {moved}: its CPUs did not keep one speed (a host's other guests, cores or hyperthreads shared with other work, a clock that moves with how many cores are busy) or its work was not the same each run, so its times and speedups carry that spread"
                ),
            ));
        }
        if let (Some(first), Some(last)) = (points.first(), points.last())
            && last.cpus > first.cpus
        {
            let (code, words) = if last.speedup < NO_SCALING {
                (
                    "does_not_scale",
                    "it does not use more CPUs: something else sets its pace (one thread, waiting, I/O)",
                )
            } else {
                ("scales", "more CPUs shorten it")
            };
            out.push(verdict(
                code,
                Severity::Info,
                format!(
                    "`{target}` ran {} on {} CPUs than on {} ({:.0}% efficiency): {words}",
                    format_speedup(last.speedup),
                    last.cpus,
                    first.cpus,
                    last.efficiency * 100.0
                ),
            ));
        }
        Ok(out)
    }

    fn charts(&self) -> Vec<Chart> {
        self.summary
            .as_ref()
            .and_then(|summary| charts::chart(summary, &self.record.target))
            .filter(Chart::has_points)
            .into_iter()
            .collect()
    }

    fn tables(&self) -> Vec<Table> {
        let limit = match self.params.limit {
            Limit::Quota => "a CFS quota of n CPUs (--vcpus)",
            Limit::Affinity => "affinity to the first n CPUs",
        };
        vec![Table {
            title: format!("`{}` held by {limit}", self.record.target),
            header: [
                "cpus",
                "runs",
                "median",
                "min",
                "max",
                "speedup",
                "efficiency",
                "throughput",
            ]
            .map(String::from)
            .to_vec(),
            rows: points(&self.items)
                .into_iter()
                .map(|p| {
                    vec![
                        p.cpus.to_string(),
                        p.runs.to_string(),
                        format_seconds(p.seconds),
                        format_seconds(p.min_seconds),
                        format_seconds(p.max_seconds),
                        format!("{:.2}x", p.speedup),
                        format!("{:.0}%", p.efficiency * 100.0),
                        p.bytes_per_sec.map_or("-".into(), format_rate),
                    ]
                })
                .collect(),
            numeric: vec![0, 1, 2, 3, 4, 5, 6, 7],
        }]
    }
}

/// Where the same command's CPU time moved: between runs at one count, or from the
/// fewest CPUs to more, in words; `None` where it kept still or the command is not
/// CPU-bound (its CPU time then says little of its work).
pub(super) fn cpu_time_moved(items: &[ScaleItem], points: &[ScalePoint]) -> Option<String> {
    let first = points.first()?;
    let base = cpu_seconds(items, first.cpus)?;
    if base.median < CPU_BOUND * first.seconds {
        return None;
    }
    let mut moved = Vec::new();
    for point in points {
        let cpu = cpu_seconds(items, point.cpus)?;
        if cpu.n > 1 && cpu.max - cpu.min > CPU_TIME_MOVED * cpu.median {
            moved.push(format!(
                "{}-{} of CPU time from run to run at {} CPU{}",
                format_seconds(cpu.min),
                format_seconds(cpu.max),
                point.cpus,
                if point.cpus == 1 { "" } else { "s" }
            ));
        }
        if point.cpus != first.cpus && cpu.median > (1.0 + CPU_TIME_MOVED) * base.median {
            moved.push(format!(
                "{:.2}x the CPU time at {} CPUs that it took at {}",
                cpu.median / base.median,
                point.cpus,
                first.cpus
            ));
        }
    }
    (!moved.is_empty()).then(|| moved.join(", and "))
}

/// Speedup at the most CPUs under which a command is said not to scale.
const NO_SCALING: f64 = 1.2;

/// CPU seconds (user and system) of each run at `cpus`.
fn cpu_seconds(items: &[ScaleItem], cpus: usize) -> Option<Stats> {
    let cpu: Vec<f64> = items
        .iter()
        .filter(|i| i.cpus == cpus)
        .map(|i| i.user_seconds + i.system_seconds)
        .collect();
    Stats::of(&cpu)
}

/// The least share of its wall time a command spends on a CPU for its CPU time to
/// stand for its work.
const CPU_BOUND: f64 = 0.5;

/// How far the CPU time of the same command may move, between runs at one count
/// ((max - min) / median) or from the fewest CPUs to another (median over median),
/// before its CPUs are said not to have kept one speed.
const CPU_TIME_MOVED: f64 = 0.15;
