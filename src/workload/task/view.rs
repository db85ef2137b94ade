//! How ratelab summarises, judges and shows stored task workloads, from their records
//! alone: what `results show` and every report of an old task run rely on.

use super::item::Step;
use super::kind::{TaskKind, title};
use super::summary::per_threads;
use super::{brief, charts, verdicts};
use crate::document::Verdict;
use crate::vocab::Exposure;
use crate::vocab::units::{format_rate, format_seconds};
use crate::vocab::{Chart, GroupKey, LinkLimit, RateUnit, Samples, SummaryLine, Table};
use crate::workload::{DecodeError, Decoded, Stored, View};

impl View for Stored<'_, TaskKind> {
    /// The whole task's median rate at its most threads.
    fn whole_rate(&self) -> Option<f64> {
        let threads = self.items.iter().map(|i| i.threads).max()?;
        let rates: Vec<f64> = self
            .items
            .iter()
            .filter(|i| i.op == Step::Total && i.threads == threads)
            .map(|i| i.source_bytes_per_sec)
            .collect();
        crate::analysis::stats::Stats::of(&rates).map(|s| s.median)
    }

    fn exposure(&self) -> Exposure {
        Exposure::STORAGE
    }

    fn verdicts(&self, run: &Decoded) -> Result<Vec<Verdict>, DecodeError> {
        let mut out = verdicts::verdicts(self);
        out.extend(verdicts::verdicts_beside(self, run)?);
        Ok(out)
    }

    fn charts(&self) -> Vec<Chart> {
        self.summary
            .as_ref()
            .and_then(charts::chart)
            .filter(Chart::has_points)
            .into_iter()
            .collect()
    }

    fn link_limit(&self) -> Option<LinkLimit> {
        // A task's rates are not checked against a link (the storage series beside it
        // are), so its link is listed, with no limit derived.
        Some(LinkLimit::unknown())
    }

    fn samples(&self) -> Option<Samples> {
        let items = self
            .items
            .iter()
            .map(|item| {
                let key = GroupKey {
                    threads: Some(item.threads),
                    ..GroupKey::new(RateUnit::BytesPerSec, item.op.as_str())
                };
                (key, Some(item.source_bytes_per_sec))
            })
            .collect();
        Some(Samples { items })
    }

    fn tables(&self) -> Vec<Table> {
        vec![step_table(self)]
    }

    fn summary_lines(&self, run: &Decoded) -> Result<Vec<SummaryLine>, DecodeError> {
        brief::summary_lines(self, run)
    }

    fn brief_tables(&self) -> Vec<Table> {
        brief::brief_tables(self)
    }
}

/// Each step at each thread count: its rate, the task's rate were it all of the task,
/// its time, the gain were it free, and which step limits.
fn step_table(w: &Stored<TaskKind>) -> Table {
    let summaries = per_threads(&w.items);
    let measured = summaries.iter().any(|s| s.measured());
    let rows = summaries
        .iter()
        .flat_map(|summary| {
            summary.steps.iter().map(|step| {
                let limit = if step.op == summary.rate_limiting_step {
                    "limit"
                } else {
                    ""
                };
                vec![
                    summary.threads.to_string(),
                    step.op.to_string(),
                    format_rate(step.bytes_per_sec),
                    format_rate(step.source_bytes_per_sec),
                    format_seconds(step.seconds),
                    Some(summary.gain_if_free(step.op))
                        .filter(|x| x.is_finite())
                        .map_or(String::new(), |x| format!("{x:.2}x")),
                    limit.to_string(),
                ]
            })
        })
        .collect();
    Table {
        title: title(w, summaries.first().and_then(|s| s.ratio)),
        header: [
            "threads",
            "step",
            "rate",
            "task rate",
            "time",
            if measured {
                "if free (measured)"
            } else {
                "if free (modelled)"
            },
            "",
        ]
        .map(String::from)
        .to_vec(),
        rows,
        numeric: vec![0, 2, 3, 4, 5],
    }
}

#[cfg(test)]
mod tests {
    use super::super::kind::*;
    use super::super::*;
    use crate::workload::Kind;
    use crate::workload::decoded::asked;
    use std::path::PathBuf;

    use super::*;
    use crate::document::{RunDocument, WorkloadRecord};
    use crate::workload::task::summary::summarize_threads;
    use crate::workload::task::verdicts::limiting_sentence;
    use crate::workload::task::{Codec, Direction};

    fn item(op: Step, source_bytes_per_sec: f64) -> TaskItem {
        TaskItem::timed(op, 2, 1000, 1000, 1000.0 / source_bytes_per_sec)
    }

    /// A stored task workload with `items`, its params a real plan.
    fn stored(items: Vec<serde_json::Value>) -> RunDocument {
        let plan = TaskPlan {
            file: Some(PathBuf::from("/f")),
            make_file_bytes: None,
            out: PathBuf::from("/out"),
            codec: Codec::Zstd,
            level: 3,
            threads: vec![4],
            direction: Direction::Compress,
            keep: false,
            seed: 1,
            what_if: false,
            layers: Vec::new(),
        };
        let mut record = WorkloadRecord::for_test(TaskKind::NAME, "/f", items);
        record.params = serde_json::to_value(plan).unwrap();
        RunDocument::for_test(vec![record])
    }

    #[test]
    fn the_slowest_step_limits_and_only_it_gains_from_being_faster() {
        let items = [
            item(Step::Read, 400.0),
            item(Step::Compress, 100.0),
            item(Step::Write, 250.0),
            item(Step::Total, 90.0),
        ];
        let summary = summarize_threads(2, &items).unwrap();
        assert_eq!(summary.rate_limiting_step, Step::Compress);
        let gain = |op: Step| summary.speedup_if_free[&op];
        // Compress instant: write (250) sets the pace, 2.5 times compress's rate.
        assert!((gain(Step::Compress) - 2.5).abs() < 1e-9);
        assert_eq!(gain(Step::Read), 1.0);
        assert_eq!(gain(Step::Write), 1.0);
        assert!((summary.share_of_limit - 0.9).abs() < 1e-9);
        let words = limiting_sentence(&summary);
        assert!(words.contains("until write limits it"), "{words}");
        assert!(
            words.contains("a faster read or write gains nothing"),
            "{words}"
        );
    }

    #[test]
    fn a_what_if_faster_than_a_step_it_still_ran_is_left_out_as_unstable() {
        // Seen at 2 threads: compress free, the whole task took 245 ms where the write
        // step alone took 418 ms of the same bytes.
        let mut free = item(Step::WhatIf, 1000.0 / 0.245);
        free.free = Some(Step::Compress);
        let items = [
            item(Step::Read, 1000.0 / 0.08),
            item(Step::Compress, 1000.0 / 1.2),
            item(Step::Write, 1000.0 / 0.418),
            item(Step::Total, 1000.0 / 1.281),
            free,
        ];
        let summary = summarize_threads(2, &items).unwrap();
        assert!(summary.measured_speedup_if_free.is_empty());
        let unstable = &summary.unstable_what_if[&Step::Compress];
        assert_eq!(unstable.bound_op, Step::Write);
        assert!((unstable.gain - 1.281 / 0.245).abs() < 1e-9);
        // Its gain is the model's, not the unstable figure: write's pace over compress's.
        assert!((summary.gain_if_free(Step::Compress) - 1.2 / 0.418).abs() < 1e-9);
        let doc = stored(
            items
                .iter()
                .map(|i| serde_json::to_value(i).unwrap())
                .collect(),
        );
        let verdicts = asked::verdicts(&doc, 0).unwrap();
        let words = verdicts
            .iter()
            .find(|v| v.code == "what_if_unstable")
            .map(|v| v.message.as_str())
            .expect("a what_if_unstable verdict");
        assert!(
            words.starts_with("at 2 threads with compress free the task went at 4.08 kB/s of original bytes (5.23x), faster than write alone (2.39 kB/s), which it still ran"),
            "{words}"
        );
        assert!(
            words.ends_with("compress's gain modelled (2.87x)"),
            "{words}"
        );
        let limit = verdicts
            .iter()
            .find(|v| v.code == "rate_limiting_step")
            .map(|v| v.message.as_str())
            .unwrap();
        assert!(
            limit.ends_with("(modelled: the what-if was unstable)"),
            "{limit}"
        );
        let lines = asked::summary_lines(&doc, 0).unwrap();
        assert!(
            lines[1].text.contains(
                "2.87x faster were it free (modelled; the measured what-if was unstable)"
            ),
            "{}",
            lines[1].text
        );
        // With the other steps' what-ifs measured (each a little under 1x), the step
        // whose what-if was unstable still limits, by its modelled gain: on tmpfs,
        // compress at 130 MB/s was named below write's measured 0.91x.
        let mut more = items.to_vec();
        for (op, seconds) in [(Step::Read, 1.4), (Step::Write, 1.35)] {
            let mut free = item(Step::WhatIf, 1000.0 / seconds);
            free.free = Some(op);
            more.push(free);
        }
        let summary = summarize_threads(2, &more).unwrap();
        assert_eq!(summary.measured_speedup_if_free.len(), 2);
        assert!(summary.unstable_what_if.contains_key(&Step::Compress));
        assert_eq!(summary.rate_limiting_step, Step::Compress);
    }

    #[test]
    fn a_what_if_is_bounded_by_the_fastest_sample_of_each_step_it_still_ran() {
        // Seen in a suite: compress alone once at 267 MB/s (a slice of CPU taken), the
        // task with read free at 355 MB/s. Two more samples of compress alone at 380
        // and 372 MB/s show the what-if was within what compress can do.
        let mut free = item(Step::WhatIf, 355.0);
        free.free = Some(Step::Read);
        let once = [
            item(Step::Read, 100.0),
            item(Step::Compress, 267.0),
            item(Step::Write, 900.0),
            item(Step::Total, 98.0),
            free,
        ];
        let summary = summarize_threads(2, &once).unwrap();
        assert_eq!(
            summary.unstable_what_if[&Step::Read].bound_op,
            Step::Compress
        );
        assert!(
            (summary.unstable_what_if[&Step::Read].bound_source_bytes_per_sec - 267.0).abs() < 1e-6
        );
        let mut thrice = once.to_vec();
        thrice.insert(2, item(Step::Compress, 380.0));
        thrice.insert(3, item(Step::Compress, 372.0));
        let summary = summarize_threads(2, &thrice).unwrap();
        assert!(summary.unstable_what_if.is_empty(), "{summary:?}");
        assert!((summary.measured_speedup_if_free[&Step::Read] - 355.0 / 98.0).abs() < 1e-9);
        assert_eq!(summary.rate_limiting_step, Step::Read);
        // The step's own rate is the median of its samples.
        let compress = summary.step(Step::Compress).unwrap();
        assert_eq!(compress.n, 3);
        assert!((compress.source_bytes_per_sec - 372.0).abs() < 1e-6);
    }

    #[test]
    fn a_step_and_its_threads_make_the_key_and_the_task_rate_is_compared() {
        let doc = stored(vec![serde_json::json!({
            "op": "compress", "threads": 4, "bytes": 10, "seconds": 1.0,
            "bytes_per_sec": 10.0, "source_bytes": 20, "source_bytes_per_sec": 20.0,
        })]);
        let samples = asked::of(&doc, 0, |w, _| w.samples()).unwrap().unwrap();
        let key = GroupKey {
            threads: Some(4),
            ..GroupKey::new(RateUnit::BytesPerSec, "compress")
        };
        assert_eq!(samples.items, [(key, Some(20.0))]);
    }

    #[test]
    fn a_corrupt_item_is_named_not_dropped() {
        let good = serde_json::to_value(item(Step::Read, 400.0)).unwrap();
        let doc = stored(vec![
            good,
            serde_json::json!({"op": "total", "threads": "two"}),
        ]);
        let Err(e) = asked::of(&doc, 0, |w, _| w.tables()) else {
            panic!("a corrupt item was read");
        };
        let words = e.to_string();
        assert!(
            words.starts_with("run 1, workload 1 (task): the stored item 2 cannot be read"),
            "{words}"
        );
    }
}
