//! A task's statistics: the median rate of each step at each thread count, put in the
//! task's own unit (original bytes per second) so the steps compare; the step that
//! limits the task; and how much a faster step could gain.

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};

use super::item::{Step, TaskItem};
use crate::analysis::fits::FitsSummary;
use crate::analysis::stats::Stats;

/// A task's summary: the whole task's rate fitted against threads, and each thread
/// count's steps.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskSummary {
    /// The scaling laws fitted to the whole task's rate, every run a point.
    #[serde(flatten)]
    pub fits: FitsSummary,
    /// Each thread count, fewest threads first.
    pub per_threads: Vec<ThreadsSummary>,
}

/// How far a measured gain may stray from the modelled one before it is said.
pub const MODEL_TOLERANCE: f64 = 0.15;

/// How far a whole task with a step free may run past the slowest step it still ran
/// alone before its what-if is called unstable: each is one median of a few samples,
/// which a 2-core VM moves by up to a quarter between rounds.
pub const WHAT_IF_BOUND: f64 = 0.25;

/// One step at one thread count.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepRate {
    /// Which: a step alone (`read`, the transform, `write`) or the whole task.
    pub op: Step,
    /// Median bytes per second the step moved.
    pub bytes_per_sec: f64,
    /// Median original bytes per second: the task's rate if this step were all of it.
    pub source_bytes_per_sec: f64,
    /// Median seconds.
    pub seconds: f64,
    /// Samples.
    pub n: usize,
}

/// Every step at one thread count, and what limits the task there.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ThreadsSummary {
    /// Compression threads.
    pub threads: usize,
    /// Read, transform and write alone, then the whole task.
    pub steps: Vec<StepRate>,
    /// The step that limits the whole task: the one whose freedom sped it up most where
    /// the what-if ran, else the slowest alone.
    pub rate_limiting_step: Step,
    /// For each step, in the order they run, how many times faster the whole task could
    /// be if that step took no time, the steps running side by side as they do in the
    /// task: the slowest of the others would then set the pace (1 for every step but
    /// the limiting one).
    pub speedup_if_free: IndexMap<Step, f64>,
    /// For each step, the whole task's rate with that step made free (the what-if) over
    /// its rate as it is: measured; empty where the what-if did not run.
    #[serde(default, skip_serializing_if = "IndexMap::is_empty")]
    pub measured_speedup_if_free: IndexMap<Step, f64>,
    /// The what-ifs left out, by the step made free: the whole task went faster with it
    /// free than a step it still ran goes alone, so a rate moved between them.
    #[serde(default, skip_serializing_if = "IndexMap::is_empty")]
    pub unstable_what_if: IndexMap<Step, UnstableWhatIf>,
    /// The whole task's rate over its limiting step's rate alone: what running the
    /// steps together costs (below 1) or hides (about 1).
    pub share_of_limit: f64,
    /// Original bytes over the bytes the codec put out.
    pub ratio: Option<f64>,
}

/// A what-if faster than a step it still ran: why it is left out.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UnstableWhatIf {
    /// The whole task's rate with the step free over its rate as it is.
    pub gain: f64,
    /// The whole task's original bytes per second with the step free.
    pub source_bytes_per_sec: f64,
    /// The slowest step it still ran.
    pub bound_op: Step,
    /// That step's original bytes per second alone, the fastest it was timed.
    pub bound_source_bytes_per_sec: f64,
}

impl ThreadsSummary {
    /// The step named `op`.
    pub fn step(&self, op: Step) -> Option<&StepRate> {
        self.steps.iter().find(|s| s.op == op)
    }

    /// How many times faster the task could be if `op` took no time, as measured where
    /// the what-if ran, else as modelled; NaN when unknown.
    pub fn gain_if_free(&self, op: Step) -> f64 {
        self.measured_speedup_if_free
            .get(&op)
            .or(self.speedup_if_free.get(&op))
            .copied()
            .unwrap_or(f64::NAN)
    }

    /// The measured and modelled gain of freeing `op`, where they differ by more than
    /// [`MODEL_TOLERANCE`]; `None` where they agree or nothing was measured.
    pub fn model_strays(&self, op: Step) -> Option<(f64, f64)> {
        let measured = *self.measured_speedup_if_free.get(&op)?;
        let model = *self.speedup_if_free.get(&op)?;
        ((measured / model - 1.0).abs() > MODEL_TOLERANCE).then_some((measured, model))
    }

    /// Whether the gains are measured (the what-if ran).
    pub fn measured(&self) -> bool {
        !self.measured_speedup_if_free.is_empty()
    }
}

/// The summary of a task's items: the whole task's rate fitted against threads, every
/// run a point, and each thread count's steps.
pub fn summarize(items: &[TaskItem]) -> TaskSummary {
    let points: Vec<(f64, f64)> = items
        .iter()
        .filter(|i| i.op == Step::Total)
        .map(|i| (i.threads as f64, i.source_bytes_per_sec))
        .collect();
    TaskSummary {
        fits: FitsSummary::of(&points),
        per_threads: per_threads(items),
    }
}

/// The summary of each thread count, fewest threads first.
pub fn per_threads(items: &[TaskItem]) -> Vec<ThreadsSummary> {
    let mut counts: Vec<usize> = items.iter().map(|i| i.threads).collect();
    counts.sort_unstable();
    counts.dedup();
    counts
        .into_iter()
        .filter_map(|threads| summarize_threads(threads, items))
        .collect()
}

/// The middle step (`compress` or `decompress`).
fn transform_op(items: &[TaskItem]) -> Step {
    items
        .iter()
        .map(|i| i.op)
        .find(|op| op.is_transform())
        .unwrap_or(Step::Compress)
}

/// The summary at `threads`; `None` until the whole task ran there.
pub(super) fn summarize_threads(threads: usize, items: &[TaskItem]) -> Option<ThreadsSummary> {
    let middle = transform_op(items);
    // The steps in the order they run, then the whole task.
    let steps: Vec<StepRate> = [Step::Read, middle, Step::Write, Step::Total]
        .into_iter()
        .filter_map(|op| step_rate(threads, op, items))
        .collect();
    let parts: Vec<&StepRate> = steps.iter().filter(|s| s.op != Step::Total).collect();
    let total = steps.iter().find(|s| s.op == Step::Total)?;
    let slowest = parts
        .iter()
        .min_by(|a, b| a.source_bytes_per_sec.total_cmp(&b.source_bytes_per_sec))?;
    let (measured, unstable) = measured_speedup_if_free(threads, &parts, total, items);
    let model = speedup_if_free(&parts, slowest);
    // The measurement names the limit where there is one: the step whose freedom gained
    // most, a step whose what-if was unstable standing in with its modelled gain (on
    // tmpfs, compress at 130 MB/s lost to write's measured 0.91x once its own what-if,
    // 20x, was set aside).
    let gain = |op: Step| {
        measured
            .get(&op)
            .or_else(|| model.get(&op).filter(|_| unstable.contains_key(&op)))
            .copied()
    };
    let limit = parts
        .iter()
        .filter(|_| !measured.is_empty())
        .filter_map(|p| Some((p, gain(p.op)?)))
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .map_or(*slowest, |(p, _)| *p);
    Some(ThreadsSummary {
        threads,
        rate_limiting_step: limit.op,
        share_of_limit: total.source_bytes_per_sec / limit.source_bytes_per_sec,
        speedup_if_free: model,
        measured_speedup_if_free: measured,
        unstable_what_if: unstable,
        steps: steps.clone(),
        ratio: ratio(threads, middle, items),
    })
}

/// For each of `parts` whose what-if ran at `threads`, the median whole-task rate with
/// it free over the whole task's median rate; then the what-ifs left out, which went
/// faster than the slowest step they still ran alone (beyond [`WHAT_IF_BOUND`]).
fn measured_speedup_if_free(
    threads: usize,
    parts: &[&StepRate],
    total: &StepRate,
    items: &[TaskItem],
) -> (IndexMap<Step, f64>, IndexMap<Step, UnstableWhatIf>) {
    let mut unstable = IndexMap::new();
    let measured = parts
        .iter()
        .filter_map(|part| {
            let rates: Vec<f64> = items
                .iter()
                .filter(|i| i.threads == threads && i.op == Step::WhatIf && i.free == Some(part.op))
                .map(|i| i.source_bytes_per_sec)
                .collect();
            let free = Stats::of(&rates)?.median;
            let gain = free / total.source_bytes_per_sec;
            // Each other step at the fastest it was seen alone: other work only slows
            // a step, so its fastest sample is the least it can do.
            let bound = parts
                .iter()
                .filter(|p| p.op != part.op)
                .filter_map(|p| Some((p.op, fastest(threads, p.op, items)?)))
                .min_by(|a, b| a.1.total_cmp(&b.1));
            if let Some((bound_op, bound)) = bound.filter(|(_, b)| free > b * (1.0 + WHAT_IF_BOUND))
            {
                unstable.insert(
                    part.op,
                    UnstableWhatIf {
                        gain,
                        source_bytes_per_sec: free,
                        bound_op,
                        bound_source_bytes_per_sec: bound,
                    },
                );
                return None;
            }
            Some((part.op, gain))
        })
        .collect();
    (measured, unstable)
}

/// The fastest original bytes per second of step `op` alone at `threads`.
fn fastest(threads: usize, op: Step, items: &[TaskItem]) -> Option<f64> {
    items
        .iter()
        .filter(|i| i.threads == threads && i.op == op)
        .map(|i| i.source_bytes_per_sec)
        .max_by(f64::total_cmp)
}

/// The medians of step `op` at `threads`; `None` when it did not run there.
fn step_rate(threads: usize, op: Step, items: &[TaskItem]) -> Option<StepRate> {
    let of: Vec<&TaskItem> = items
        .iter()
        .filter(|i| i.threads == threads && i.op == op)
        .collect();
    let median = |f: fn(&TaskItem) -> f64| {
        Stats::of(&of.iter().map(|i| f(i)).collect::<Vec<_>>()).map(|s| s.median)
    };
    Some(StepRate {
        op,
        bytes_per_sec: median(|i| i.bytes_per_sec)?,
        source_bytes_per_sec: median(|i| i.source_bytes_per_sec)?,
        seconds: median(|i| i.seconds)?,
        n: of.len(),
    })
}

/// For each of `parts`, the task's gain were it free: the slowest of the others over
/// the `slowest` part, never below 1.
fn speedup_if_free(parts: &[&StepRate], slowest: &StepRate) -> IndexMap<Step, f64> {
    parts
        .iter()
        .map(|freed| {
            let others = parts
                .iter()
                .filter(|p| p.op != freed.op)
                .map(|p| p.source_bytes_per_sec)
                .fold(f64::INFINITY, f64::min);
            let gain = (others / slowest.source_bytes_per_sec).max(1.0);
            (freed.op, gain)
        })
        .collect()
}

/// Original bytes over compressed bytes at `threads`, the transform being `middle`.
fn ratio(threads: usize, middle: Step, items: &[TaskItem]) -> Option<f64> {
    // The compressed size: what the whole task wrote, or (decompressing) what it read.
    let (op, compressed): (Step, fn(&TaskItem) -> Option<u64>) = if middle == Step::Decompress {
        (Step::Read, |i| Some(i.bytes))
    } else {
        (Step::Total, |i| i.output_bytes)
    };
    items
        .iter()
        .filter(|i| i.threads == threads && i.op == op)
        .find_map(|i| {
            compressed(i)
                .filter(|&c| c > 0)
                .map(|c| i.source_bytes as f64 / c as f64)
        })
}
