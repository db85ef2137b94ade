//! How ratelab summarises, judges and shows a stored cpu run: per test and class, the
//! rate at each thread count, its speedup and efficiency (and what each added thread
//! brought), the share of a baseline run, and where the threads ran.

use super::kind::CpuKind;
use super::scaling::{Scaling, scaling};
use super::{brief, charts, physics, tables};
use crate::document::{Severity, Verdict};
use crate::vocab::{Chart, GroupKey, RateUnit, Samples, SummaryLine, Table, Unmeasured};
use crate::workload::{DecodeError, Decoded, Stored, View};

impl View for Stored<'_, CpuKind> {
    fn verdicts(&self, run: &Decoded) -> Result<Vec<Verdict>, DecodeError> {
        let verdict = Verdict::about(Some(self.index()));
        let mut out: Vec<Verdict> = self
            .context
            .unavailable
            .iter()
            .map(|missing| {
                verdict(
                    "test_unavailable",
                    Severity::Info,
                    format!("{} is not available: {}", missing.test, missing.reason),
                )
            })
            .collect();
        for scaling in scaling(&self.items, self.params.baseline.as_ref()) {
            out.extend(physics::verdicts(self, &scaling, run.disturbed));
            if let Some(baseline) = &self.params.baseline {
                // A slower figure is not put down to the machine when other work took
                // the CPUs from either run.
                let disturbed: Vec<String> = [
                    (baseline.disturbed, format!("run {}", baseline.run_id)),
                    (run.disturbed, "this run".to_string()),
                ]
                .into_iter()
                .filter_map(|(d, which)| d.then_some(which))
                .collect();
                out.extend(slower_than_baseline(&scaling, baseline.run_id).map(|words| {
                    if disturbed.is_empty() {
                        verdict("slower_than_baseline", Severity::Warning, words)
                    } else {
                        verdict(
                            "slower_than_baseline_disturbed",
                            Severity::Info,
                            format!(
                                "{words}, but other work disturbed {}: not put down to the machine",
                                disturbed.join(" and ")
                            ),
                        )
                    }
                }));
            }
        }
        out.extend(physics::shared_cpus(self));
        Ok(out)
    }

    fn charts(&self) -> Vec<Chart> {
        self.summary
            .as_ref()
            .map(charts::chart)
            .filter(Chart::has_points)
            .into_iter()
            .collect()
    }

    fn samples(&self) -> Option<Samples> {
        // A test with no rate left once the empty loop is taken off (the empty test)
        // has nothing to compare.
        let items = self
            .items
            .iter()
            .filter_map(|item| {
                let key = GroupKey {
                    threads: Some(item.threads),
                    class: Some(item.class.clone()),
                    ..GroupKey::new(RateUnit::LoopsPerSec, item.test.clone())
                };
                Some((key, Some(item.loops_per_sec?)))
            })
            .collect();
        Some(Samples { items })
    }

    fn tables(&self) -> Vec<Table> {
        let scalings = scaling(&self.items, self.params.baseline.as_ref());
        vec![tables::table(
            &self.items,
            &scalings,
            &self.context,
            self.params.baseline.as_ref().map(|b| b.run_id),
        )]
    }

    fn summary_lines(&self, _run: &Decoded) -> Result<Vec<SummaryLine>, DecodeError> {
        Ok(brief::summary_lines(self))
    }

    fn unmeasured(&self) -> Vec<Unmeasured> {
        brief::unmeasured(self)
    }

    fn brief_tables(&self) -> Vec<Table> {
        brief::brief_tables(self)
    }
}

/// Each point of `scaling` that ran under [`SLOWER_THAN_BASELINE`] of baseline run
/// `run_id`, in words.
fn slower_than_baseline(scaling: &Scaling, run_id: i64) -> impl Iterator<Item = String> + '_ {
    scaling.points.iter().filter_map(move |point| {
        let share = point
            .share_of_baseline
            .filter(|s| *s < SLOWER_THAN_BASELINE)?;
        Some(format!(
            "{} ({}, {} thread{}) ran at {:.0}% of run {run_id}",
            scaling.test,
            scaling.class,
            point.threads,
            if point.threads == 1 { "" } else { "s" },
            share * 100.0,
        ))
    })
}

/// Share of the baseline under which a rate is called slower.
const SLOWER_THAN_BASELINE: f64 = 0.9;

#[cfg(test)]
mod tests {
    use super::super::kind::*;
    use super::super::*;
    use crate::analysis::interference;
    use crate::workload::Kind;
    use crate::workload::decoded::asked;
    use serde_json::{Value, json};

    use super::*;
    use crate::document::{RunDocument, WorkloadRecord};
    use crate::workload::cpu::{Budget, SchedClass};

    /// A stored item of `op` at `threads`, with `loops_per_sec` left once the empty loop
    /// is taken off.
    fn item(op: &str, threads: usize, loops_per_sec: Option<f64>) -> Value {
        item_on(op, threads, loops_per_sec, (0..threads).collect())
    }

    /// As [`item`], its threads seen on `cpus_seen`.
    fn item_on(
        op: &str,
        threads: usize,
        loops_per_sec: Option<f64>,
        cpus_seen: Vec<usize>,
    ) -> Value {
        let item = CpuItem {
            test: op.into(),
            threads,
            class: "normal".into(),
            isa: "x86_64".into(),
            loops_per_sec,
            wall_loops_per_sec: loops_per_sec,
            loops_per_sec_per_thread: loops_per_sec.map(|r| r / threads as f64),
            raw_loops_per_sec: 6.0,
            work_ns_per_loop: 1.0,
            empty_ns_per_loop: 0.1,
            cpus_seen,
            migrations: 0,
            started_at_s: 0.0,
            seconds: 1.0,
            energy_j: None,
            joules_per_loop: None,
            per_thread: Vec::new(),
        };
        serde_json::to_value(item).unwrap()
    }

    /// A run of one cpu workload with `items`, stored with a real plan.
    fn run(items: Vec<Value>) -> RunDocument {
        let plan = CpuPlan {
            tests: vec!["int".into(), "empty".into()],
            threads: vec![1, 2],
            classes: vec![SchedClass::Normal],
            cpus: None,
            budget: Budget::Seconds(1.0),
            baseline: None,
        };
        let mut record = WorkloadRecord::for_test(CpuKind::NAME, "all cpus", items);
        record.params = serde_json::to_value(plan).unwrap();
        RunDocument::for_test(vec![record])
    }

    #[test]
    fn a_tests_threads_and_class_make_its_key_and_the_empty_test_has_no_rate() {
        let doc = run(vec![item("int", 2, Some(5.0)), item("empty", 1, None)]);
        let samples = asked::of(&doc, 0, |w, _| w.samples()).unwrap().unwrap();
        let key = GroupKey {
            threads: Some(2),
            class: Some("normal".into()),
            ..GroupKey::new(RateUnit::LoopsPerSec, "int")
        };
        assert_eq!(
            samples.items,
            [(key, Some(5.0))],
            "the empty test has no rate"
        );
    }

    #[test]
    fn a_test_that_ran_slower_on_more_threads_is_called_slower() {
        let doc = run(vec![item("int", 1, Some(10.0)), item("int", 2, Some(8.7))]);
        let verdicts = asked::verdicts(&doc, 0).unwrap();
        let poor = verdicts
            .iter()
            .find(|v| v.code == "poor_scaling")
            .expect("a poor_scaling verdict");
        assert!(
            poor.message
                .starts_with("int (normal) ran 13% slower on 2 threads than on one: 43% of linear"),
            "{}",
            poor.message
        );
    }

    /// The verdicts of `doc`'s cpu workload, by code.
    fn codes(doc: &RunDocument) -> Vec<(String, String)> {
        asked::verdicts(doc, 0)
            .unwrap()
            .into_iter()
            .map(|v| (v.code, v.message))
            .collect()
    }

    /// The message of the verdict `code` among `verdicts`.
    fn message<'a>(verdicts: &'a [(String, String)], code: &str) -> &'a str {
        verdicts
            .iter()
            .find(|(c, _)| c == code)
            .map(|(_, m)| m.as_str())
            .unwrap_or_else(|| panic!("no {code} verdict in {verdicts:?}"))
    }

    #[test]
    fn a_speedup_beyond_what_the_threads_can_give_is_a_slowed_one_thread_run_not_scaling() {
        // Seen in `profile --quick` on 2 cores: fma 2.59x, "efficiency 130%".
        let doc = run(vec![item("int", 1, Some(10.0)), item("int", 2, Some(26.0))]);
        let verdicts = codes(&doc);
        let beyond = message(&verdicts, "beyond_linear");
        assert!(
            beyond.starts_with("int (normal) ran 2.60x on 2 threads (130% of linear), more than they can give: each thread went 1.30x as fast as the one thread alone, so the one-thread run was slowed"),
            "{beyond}"
        );
        assert!(beyond.ends_with("not a scaling result"), "{beyond}");
        assert!(verdicts.iter().all(|(code, _)| code != "poor_scaling"));
        // The summary and both tables do not show it as a scaling result.
        let lines = asked::summary_lines(&doc, 0).unwrap();
        assert!(
            lines[0]
                .text
                .contains("(2.60x, beyond linear: not a scaling result)"),
            "{}",
            lines[0].text
        );
        let tables = asked::of(&doc, 0, |w, _| w.tables()).unwrap();
        let efficiency = tables[0]
            .header
            .iter()
            .position(|h| h == "efficiency")
            .unwrap();
        assert_eq!(tables[0].rows[1][efficiency], "130%?");
        let brief = asked::of(&doc, 0, |w, _| w.brief_tables()).unwrap();
        assert_eq!(brief[0].rows[0].last().unwrap(), "130%?");
    }

    #[test]
    fn the_other_tests_range_leaves_out_one_beyond_linear_and_names_it() {
        let doc = run(vec![
            item("int", 1, Some(10.0)),
            item("int", 2, Some(19.9)),
            item("fma", 1, Some(10.0)),
            item("fma", 2, Some(25.9)),
            item("dot", 1, Some(10.0)),
            item("dot", 2, Some(19.0)),
            item("spmv", 1, Some(10.0)),
            item("spmv", 2, Some(19.5)),
        ]);
        let lines = asked::summary_lines(&doc, 0).unwrap();
        assert!(
            lines[0].text.ends_with(
                "; the other 2 tests 1.90x (dot) to 1.95x (spmv); fma beyond linear (a slowed one-thread run, see its verdict)"
            ),
            "{}",
            lines[0].text
        );
    }

    #[test]
    fn threads_that_shared_a_cpu_are_named_and_not_called_poor_scaling() {
        let doc = run(vec![
            item("int", 1, Some(10.0)),
            item_on("int", 2, Some(9.9), vec![1]),
        ]);
        let verdicts = codes(&doc);
        let shared = message(&verdicts, "threads_shared_cpus");
        assert_eq!(
            shared,
            "threads took turns on fewer CPUs than there were threads: int (normal, 2 threads on cpu 1); those figures say nothing of that many cores"
        );
        assert!(verdicts.iter().all(|(code, _)| code != "poor_scaling"));
        // CPU-clock timing sums two threads that took turns to 2x, or more (dot ran 3.19x
        // under `taskset -c 0`): the summary says so, and no verdict blames a slowed
        // one-thread run.
        let doc = run(vec![
            item("int", 1, Some(10.0)),
            item_on("int", 2, Some(20.0), vec![0]),
            item("fma", 1, Some(10.0)),
            item("fma", 2, Some(19.5)),
            item("dot", 1, Some(10.0)),
            item_on("dot", 2, Some(31.9), vec![1]),
        ]);
        assert!(codes(&doc).iter().all(|(code, _)| code != "beyond_linear"));
        let lines = asked::summary_lines(&doc, 0).unwrap();
        assert_eq!(
            lines[0].text,
            "int 10.0 loops/s on 1 thread, 20.0 on 2 threads (2.00x, on shared CPUs: not a scaling result); fma 1.95x; dot on shared CPUs (see threads_shared_cpus)"
        );
    }

    #[test]
    fn a_disturbed_run_is_not_called_poor_scaling() {
        let mut doc = run(vec![item("int", 1, Some(10.0)), item("int", 2, Some(8.7))]);
        doc.verdicts.push(Verdict::about(None)(
            interference::DISTURBED,
            Severity::Warning,
            "other work used this machine during the run".into(),
        ));
        assert!(codes(&doc).iter().all(|(code, _)| code != "poor_scaling"));
    }

    #[test]
    fn a_corrupt_item_is_reported_with_its_run_workload_and_number() {
        let corrupt = json!({"op": "int", "threads": "two", "class": "normal"});
        let doc = run(vec![item("int", 1, Some(5.0)), corrupt]);
        let error = asked::of(&doc, 0, |w, _| w.tables()).unwrap_err();
        assert_eq!(error.place, "run 1, workload 1 (cpu)");
        assert_eq!(error.what, "item 2");
        let message = error.to_string();
        assert!(
            message.starts_with("run 1, workload 1 (cpu): the stored item 2 cannot be read ("),
            "{message}"
        );
    }
}
