//! How ratelab summarises, judges and shows a stored task: the median rate of each step
//! at each thread count, put in the task's own unit (original bytes per second) so the
//! steps compare; the step that limits the task; how much a faster step could gain;
//! and what stored disk runs say of the storage the task read and wrote.

use crate::workload::{At, DecodeError, Stored};
use std::path::Path;

use serde::Serialize;
use serde_json::{Value, json};

use super::item::{TaskItem, items_of};
use crate::analysis::fits::{fits_sentence, fits_summary};
use crate::analysis::stats::Stats;
use crate::document::{Severity, Verdict, WorkloadRecord};
use crate::platform;
use crate::vocab::units::{format_bytes, format_rate, format_seconds};
use crate::vocab::{Chart, GroupKey, LinkLimit, RateUnit, Samples, Table};
use crate::workload::disk::{DiskKind, streaming_rate};

/// The steps a task is split into, in the order they run.
const STEPS: [&str; 3] = ["read", "transform", "write"];

/// A stored disk rate within this factor of the task's step rate is the same rate.
const SAME_RATE: f64 = 1.5;

/// One step at one thread count.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StepRate {
    /// `read`, `compress`/`decompress`, `write` or `total`.
    pub op: String,
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
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ThreadsSummary {
    /// Compression threads.
    pub threads: usize,
    /// Read, transform and write alone, then the whole task.
    pub steps: Vec<StepRate>,
    /// The slowest of read, transform and write.
    pub rate_limiting_step: String,
    /// For each step, how many times faster the whole task could be if that step took
    /// no time, the steps running side by side as they do in the task: the slowest of
    /// the others would then set the pace (1 for every step but the limiting one).
    pub speedup_if_free: serde_json::Map<String, Value>,
    /// The whole task's rate over its limiting step's rate alone: what running the
    /// steps together costs (below 1) or hides (about 1).
    pub share_of_limit: f64,
    /// Original bytes over the bytes the codec put out.
    pub ratio: Option<f64>,
}

impl ThreadsSummary {
    /// The step named `op`.
    pub fn step(&self, op: &str) -> Option<&StepRate> {
        self.steps.iter().find(|s| s.op == op)
    }
}

/// The summary of each thread count, fewest threads first.
pub fn per_threads(record: &WorkloadRecord) -> Vec<ThreadsSummary> {
    let items = items_of(record);
    let mut counts: Vec<usize> = items.iter().map(|i| i.threads).collect();
    counts.sort_unstable();
    counts.dedup();
    counts
        .into_iter()
        .filter_map(|threads| summarize_threads(threads, &items))
        .collect()
}

/// The op of the middle step (`compress` or `decompress`).
fn transform_op(items: &[TaskItem]) -> &str {
    items
        .iter()
        .map(|i| i.op.as_str())
        .find(|op| !matches!(*op, "read" | "write" | "total"))
        .unwrap_or("compress")
}

fn summarize_threads(threads: usize, items: &[TaskItem]) -> Option<ThreadsSummary> {
    let middle = transform_op(items);
    let ops = STEPS.map(|s| if s == "transform" { middle } else { s });
    let rate = |op: &str| {
        let of: Vec<&TaskItem> = items
            .iter()
            .filter(|i| i.threads == threads && i.op == op)
            .collect();
        let median = |f: fn(&TaskItem) -> f64| {
            Stats::of(&of.iter().map(|i| f(i)).collect::<Vec<_>>()).map(|s| s.median)
        };
        Some(StepRate {
            op: op.to_string(),
            bytes_per_sec: median(|i| i.bytes_per_sec)?,
            source_bytes_per_sec: median(|i| i.source_bytes_per_sec)?,
            seconds: median(|i| i.seconds)?,
            n: of.len(),
        })
    };
    let steps: Vec<StepRate> = ops
        .iter()
        .chain(&["total"])
        .filter_map(|op| rate(op))
        .collect();
    let parts: Vec<&StepRate> = steps.iter().filter(|s| s.op != "total").collect();
    let total = steps.iter().find(|s| s.op == "total")?;
    let slowest = parts
        .iter()
        .min_by(|a, b| a.source_bytes_per_sec.total_cmp(&b.source_bytes_per_sec))?;
    let speedup_if_free = parts
        .iter()
        .map(|freed| {
            let others = parts
                .iter()
                .filter(|p| p.op != freed.op)
                .map(|p| p.source_bytes_per_sec)
                .fold(f64::INFINITY, f64::min);
            let gain = (others / slowest.source_bytes_per_sec).max(1.0);
            (freed.op.clone(), json!(gain))
        })
        .collect();
    // The compressed size: what the whole task wrote, or (decompressing) what it read.
    let (op, compressed): (&str, fn(&TaskItem) -> Option<u64>) = if middle == "decompress" {
        ("read", |i| Some(i.bytes))
    } else {
        ("total", |i| i.output_bytes)
    };
    let ratio = items
        .iter()
        .filter(|i| i.threads == threads && i.op == op)
        .find_map(|i| {
            compressed(i)
                .filter(|&c| c > 0)
                .map(|c| i.source_bytes as f64 / c as f64)
        });
    Some(ThreadsSummary {
        threads,
        rate_limiting_step: slowest.op.clone(),
        share_of_limit: total.source_bytes_per_sec / slowest.source_bytes_per_sec,
        steps: steps.clone(),
        speedup_if_free,
        ratio,
    })
}

/// How ratelab summarises, judges and shows stored task workloads.
pub struct TaskKind;

impl crate::workload::Kind for TaskKind {
    const NAME: &'static str = "task";
    type Params = Value;
    type Context = Value;
    type Item = Value;
    type Summary = Value;

    fn summarize(&self, w: &Stored<Self>) -> Value {
        let record = w.record;
        // The whole task's rate against threads, every run a point.
        let points: Vec<(f64, f64)> = items_of(record)
            .iter()
            .filter(|i| i.op == "total")
            .map(|i| (i.threads as f64, i.source_bytes_per_sec))
            .collect();
        let mut summary = fits_summary(&points);
        summary.insert("per_threads".into(), json!(per_threads(record)));
        Value::Object(summary)
    }

    fn verdicts(&self, w: &Stored<Self>) -> Vec<Verdict> {
        let (workload, record) = (w.index(), w.record);
        let verdict = Verdict::about(Some(workload));
        let mut out = Vec::new();
        let items = items_of(record);
        let failed: Vec<usize> = items
            .iter()
            .filter(|i| i.round_trip_ok == Some(false))
            .map(|i| i.threads)
            .collect();
        if !failed.is_empty() {
            out.push(verdict(
                "round_trip_failed",
                Severity::Error,
                format!(
                    "the output at {failed:?} threads does not decode to the original bytes: the codec or the storage corrupted it"
                ),
            ));
        }
        let summaries = per_threads(record);
        for summary in &summaries {
            out.push(verdict(
                "rate_limiting_step",
                Severity::Info,
                limiting_sentence(summary),
            ));
        }
        let in_memory = matches!(
            record.context["read_chain"]["fs_type"].as_str(),
            Some("tmpfs" | "ramfs")
        );
        if let Some(cached) = items
            .iter()
            .filter(|i| i.direct == Some(false) || in_memory)
            .filter_map(|i| i.cached_fraction_before)
            .find(|&f| f > 0.5)
        {
            out.push(verdict(
                "input_cached",
                Severity::Info,
                format!(
                    "{:.0}% of the input was in the page cache before it was read (tmpfs, or a file that could not be evicted): the read rate is memory's, not a storage device's",
                    cached * 100.0
                ),
            ));
        }
        if let Some(most) = summaries.last() {
            out.extend(
                disk_sentences(&record.context["disk_runs"], most)
                    .into_iter()
                    .map(|words| verdict("disk_vs_task", Severity::Info, words)),
            );
        }
        // Two or three thread counts fit any law: only more say something.
        if summaries.len() > 3
            && let Some(sentence) = fits_sentence(&self.summarize(w))
        {
            out.push(verdict("scaling_law", Severity::Info, sentence));
        }
        out
    }

    fn verdicts_beside(&self, w: &Stored<Self>) -> Result<Vec<Verdict>, DecodeError> {
        let (workload, records) = (w.index(), &w.at.run.workloads[..]);
        let record = &records[workload];
        // Stored runs were looked up before the run; a series of this run is newer.
        let Some(most) = per_threads(record).pop() else {
            return Ok(Vec::new());
        };
        let mut beside = serde_json::Map::new();
        for (key, folder, op) in [
            ("read", "read_folder", "read"),
            ("write", "write_folder", "write"),
        ] {
            let Some(folder) = record.context[folder].as_str() else {
                continue;
            };
            let mut rate = None;
            for (index, r) in records.iter().enumerate() {
                if r.kind != DiskKind::NAME
                    || !platform::measured_by(Path::new(folder), Path::new(&r.target))
                {
                    continue;
                }
                let series = Stored::<DiskKind>::decode(At::new(w.at.run, index))?;
                if let Some(found) = streaming_rate(&series.items, op) {
                    rate = Some((r, found));
                    break;
                }
            }
            if let Some((disk, rate)) = rate {
                beside.insert(
                    key.into(),
                    json!({ "target": disk.target, format!("{op}_bytes_per_sec"): rate }),
                );
            }
        }
        Ok(disk_sentences(&Value::Object(beside), &most)
            .into_iter()
            .map(|words| Verdict::about(Some(workload))("disk_vs_task", Severity::Info, words))
            .collect())
    }

    fn charts(&self, w: &Stored<Self>) -> Vec<Chart> {
        super::charts::chart(&w.record.summary)
            .filter(Chart::has_points)
            .into_iter()
            .collect()
    }

    fn link_limit(&self, w: &Stored<Self>) -> Option<LinkLimit> {
        let context = &w.record.context;
        if let Some(limit) = context["max_bytes_per_sec"].as_f64() {
            let via = context["chain"]["limit_via"].as_str().unwrap_or("its link");
            return Some(LinkLimit {
                limit: format_rate(limit),
                from: format!("data rate of {via}"),
            });
        }
        (context.get("chain").is_some() || context.get("write_chain").is_some())
            .then(LinkLimit::unknown)
    }

    fn samples(&self, w: &Stored<Self>) -> Option<Samples> {
        let items = items_of(w.record)
            .into_iter()
            .map(|item| {
                let key = GroupKey {
                    threads: Some(item.threads),
                    ..GroupKey::op(item.op)
                };
                (key, Some(item.source_bytes_per_sec))
            })
            .collect();
        Some(Samples {
            unit: RateUnit::BytesPerSec,
            items,
        })
    }

    fn tables(&self, w: &Stored<Self>) -> Vec<Table> {
        let record = w.record;
        let params = &record.params;
        let title = format!(
            "{} of {} with {} level {} ({}{})",
            params["direction"].as_str().unwrap_or("compress"),
            if record.context["made_file"] == true {
                "a made test file"
            } else {
                record.target.as_str()
            },
            params["codec"].as_str().unwrap_or("?"),
            params["level"],
            record.context["source_bytes"]
                .as_u64()
                .map_or("-".into(), format_bytes),
            per_threads(record)
                .first()
                .and_then(|s| s.ratio)
                .map_or(String::new(), |r| format!(", ratio {r:.2}:1")),
        );
        let mut rows = Vec::new();
        for summary in per_threads(record) {
            for step in &summary.steps {
                let limit = if step.op == summary.rate_limiting_step {
                    "limit"
                } else {
                    ""
                };
                rows.push(vec![
                    summary.threads.to_string(),
                    step.op.clone(),
                    format_rate(step.bytes_per_sec),
                    format_rate(step.source_bytes_per_sec),
                    format_seconds(step.seconds),
                    summary
                        .speedup_if_free
                        .get(&step.op)
                        .and_then(Value::as_f64)
                        .map_or(String::new(), |x| format!("{x:.2}x")),
                    limit.to_string(),
                ]);
            }
        }
        vec![Table {
            title,
            header: [
                "threads",
                "step",
                "rate",
                "task rate",
                "time",
                "if it took no time",
                "",
            ]
            .map(String::from)
            .to_vec(),
            rows,
            numeric: vec![0, 2, 3, 4, 5],
        }]
    }
}

/// The limiting step of one thread count in words.
fn limiting_sentence(summary: &ThreadsSummary) -> String {
    let limit = &summary.rate_limiting_step;
    let rate_of = |op: &str| {
        summary
            .step(op)
            .map_or(f64::NAN, |s| s.source_bytes_per_sec)
    };
    let others: Vec<&StepRate> = summary
        .steps
        .iter()
        .filter(|s| s.op != *limit && s.op != "total")
        .collect();
    let next = others
        .iter()
        .min_by(|a, b| a.source_bytes_per_sec.total_cmp(&b.source_bytes_per_sec))
        .map_or("nothing", |s| s.op.as_str());
    let gain = summary
        .speedup_if_free
        .get(limit.as_str())
        .and_then(Value::as_f64)
        .unwrap_or(f64::NAN);
    let together = if summary.share_of_limit < 0.9 {
        format!(
            "; running the steps together cost {:.0}% of it",
            (1.0 - summary.share_of_limit) * 100.0
        )
    } else {
        String::new()
    };
    format!(
        "at {} thread{} {limit} limits this task: alone it goes at {} of original bytes ({}), and the whole task went at {}{together}; \
         a faster {limit} could make the task up to {gain:.2}x faster, until {next} limits it, and a faster {} gains nothing while {limit} limits it",
        summary.threads,
        if summary.threads == 1 { "" } else { "s" },
        format_rate(rate_of(limit)),
        others
            .iter()
            .map(|s| format!("{} {}", s.op, format_rate(s.source_bytes_per_sec)))
            .collect::<Vec<_>>()
            .join(", "),
        format_rate(rate_of("total")),
        others
            .iter()
            .map(|s| s.op.as_str())
            .collect::<Vec<_>>()
            .join(" or "),
    )
}

/// What storage series of the task's folders (`{read: {target, read_bytes_per_sec,
/// run_id}, write: {target, write_bytes_per_sec, run_id}}`, the run absent for this one)
/// say next to its read and write steps.
fn disk_sentences(series: &Value, summary: &ThreadsSummary) -> Vec<String> {
    let mut out = Vec::new();
    for (op, rate_key) in [
        ("read", "read_bytes_per_sec"),
        ("write", "write_bytes_per_sec"),
    ] {
        let stored = &series[op];
        let (Some(disk), Some(step)) = (stored[rate_key].as_f64(), summary.step(op)) else {
            continue;
        };
        let place = stored["target"].as_str().unwrap_or("?");
        let run = stored["run_id"]
            .as_i64()
            .map_or("of this run".to_string(), |id| format!("(run {id})"));
        let task = step.bytes_per_sec;
        let close = disk / task < SAME_RATE && task / disk < SAME_RATE;
        let verb = if op == "read" { "read" } else { "wrote" };
        let sentence = if summary.rate_limiting_step == op {
            if close {
                format!(
                    "{op} at {} on {place} limits this task, and the storage series {run} {verb} {} there: the disk is the limit, and a faster one would speed the task up to {:.2}x",
                    format_rate(task),
                    format_rate(disk),
                    summary
                        .speedup_if_free
                        .get(op)
                        .and_then(Value::as_f64)
                        .unwrap_or(f64::NAN)
                )
            } else if task > disk {
                format!(
                    "{op} at {} on {place} limits this task, yet it ran faster than the storage series {run} {verb} there ({}): the disk has changed since, or the task's {op} was served by a cache",
                    format_rate(task),
                    format_rate(disk),
                )
            } else {
                format!(
                    "{op} at {} on {place} limits this task, but the storage series {run} {verb} {} there: the task's {op} pattern, not the disk, is the limit",
                    format_rate(task),
                    format_rate(disk),
                )
            }
        } else {
            let needed = summary
                .step(&summary.rate_limiting_step)
                .map_or(f64::NAN, |l| l.source_bytes_per_sec)
                * step.bytes_per_sec
                / step.source_bytes_per_sec;
            format!(
                "the task needs {} of {op} on {place}; the storage series {run} {verb} {} there and the {op} step alone {}: the limit is {}, not the disk",
                format_rate(needed),
                format_rate(disk),
                format_rate(task),
                summary.rate_limiting_step
            )
        };
        out.push(sentence);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(op: &str, source_bytes_per_sec: f64) -> TaskItem {
        TaskItem::timed(op, 2, 1000, 1000, 1000.0 / source_bytes_per_sec)
    }

    #[test]
    fn the_slowest_step_limits_and_only_it_gains_from_being_faster() {
        let items = [
            item("read", 400.0),
            item("compress", 100.0),
            item("write", 250.0),
            item("total", 90.0),
        ];
        let summary = summarize_threads(2, &items).unwrap();
        assert_eq!(summary.rate_limiting_step, "compress");
        let gain = |op: &str| summary.speedup_if_free[op].as_f64().unwrap();
        // Compress instant: write (250) sets the pace, 2.5 times compress's rate.
        assert!((gain("compress") - 2.5).abs() < 1e-9);
        assert_eq!(gain("read"), 1.0);
        assert_eq!(gain("write"), 1.0);
        assert!((summary.share_of_limit - 0.9).abs() < 1e-9);
        let words = limiting_sentence(&summary);
        assert!(words.contains("until write limits it"), "{words}");
        assert!(
            words.contains("a faster read or write gains nothing"),
            "{words}"
        );
    }
}
