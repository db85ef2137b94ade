//! How ratelab summarises, judges and shows a stored `why` run: the answer in one line,
//! the steps and the processes, and what could not be seen.

use super::answer::{answer, summarize};
use super::kind::WhyKind;
use super::measured;
use super::stored::{WhatIfItem, WhyContext, WhyItem, WhySummary};
use super::tables;
use crate::account::Step;
use crate::document::{Severity, Verdict};
use crate::vocab::units::format_seconds;
use crate::vocab::{Chart, CommandEnd, Exposure, GroupKey, RateUnit, Samples, SummaryLine, Table};
use crate::workload::{DecodeError, Decoded, Stored, View};

impl View for Stored<'_, WhyKind> {
    fn command_end(&self) -> Option<CommandEnd> {
        match (self.context.exit_code, self.context.signal) {
            (Some(code), _) => Some(CommandEnd::Exit(code)),
            (None, Some(signal)) => Some(CommandEnd::Signal(signal)),
            (None, None) => None,
        }
    }

    fn verdicts(&self, _run: &Decoded) -> Result<Vec<Verdict>, DecodeError> {
        let verdict = Verdict::about(Some(self.index()));
        let mut out = Vec::new();
        let context = &self.context;
        let command = &self.record.target;
        // Interrupted, the command was ended by ratelab's SIGTERM (or the terminal's
        // SIGINT, which reached it too): how it ended says nothing of it.
        let interrupted = context.ended_by.as_deref() == Some("interrupted");
        if let Some(code) = context.exit_code.filter(|c| *c != 0 && !interrupted) {
            out.push(verdict(
                "command_failed",
                Severity::Warning,
                format!("`{command}` exited {code}: its time may not be that of the whole work"),
            ));
        }
        if let Some(signal) = context.signal.filter(|_| !interrupted) {
            out.push(verdict(
                "command_failed",
                Severity::Warning,
                format!("`{command}` was ended by signal {signal}"),
            ));
        }
        if !context.unreadable.is_empty() {
            out.push(verdict(
                "waits_unreadable",
                Severity::Warning,
                format!(
                    "the waits of {} cannot be read as this user (wchan, the system call and the descriptors need the access ptrace needs: the same user, or root): their time off a CPU is charged to `other`, only their CPU time and their wait for a CPU are known",
                    named(&context.unreadable, NAMED_IN_WORDS)
                ),
            ));
        }
        let summary = summarize(&self.context, &self.items);
        for m in &summary.measured {
            if let Some(words) = measured::disagreement(m) {
                out.push(verdict("what_if_disagrees", Severity::Info, words));
            }
        }
        for skipped in &context.what_if_skipped {
            let place = if skipped.place.is_empty() {
                String::new()
            } else {
                format!(" on {}", skipped.place)
            };
            out.push(verdict(
                "what_if_not_measured",
                Severity::Info,
                format!("{}{place} was not measured: {}", skipped.step, skipped.why),
            ));
        }
        for item in &self.items {
            if let WhyItem::WhatIf(round) = item
                && let Some(why) = &round.disturbed
            {
                out.push(verdict(
                    "what_if_disturbed",
                    Severity::Warning,
                    format!(
                        "round {} of {} was disturbed by other work each time it ran ({why}): its ratio is the machine's as much as the command's",
                        round.round,
                        measured::step_named(round.step, &round.place),
                    ),
                ));
            }
        }
        if let Some(stopped) = &context.what_if_stopped {
            out.push(verdict(
                "what_if_stopped",
                Severity::Warning,
                format!("the what-ifs stopped: {stopped}"),
            ));
        }
        Ok(out)
    }

    fn summary_lines(&self, _run: &Decoded) -> Result<Vec<SummaryLine>, DecodeError> {
        let summary = summarize(&self.context, &self.items);
        let sampled = unseen(&summary, &self.context).or_else(|| answer(&summary, &self.context));
        // Measured, the answer is the measurement; the samples' answer stays beside it.
        Ok(match measured::answer(&summary.measured) {
            Some(line) => std::iter::once(SummaryLine::new("why", line))
                .chain(sampled.map(|l| SummaryLine::new("sampled", l)))
                .collect(),
            None => sampled
                .map(|line| SummaryLine::new("why", line))
                .into_iter()
                .collect(),
        })
    }

    fn tables(&self) -> Vec<Table> {
        let summary = summarize(&self.context, &self.items);
        let mut out = vec![tables::steps(
            &summary,
            &self.context,
            &self.params,
            &self.record.target,
        )];
        out.extend(tables::what_ifs(&summary));
        out.extend(tables::processes(&self.items));
        out
    }

    fn charts(&self) -> Vec<Chart> {
        let mut charts = tables::charts(&self.items);
        charts.extend(tables::what_ifs_chart(
            &summarize(&self.context, &self.items).measured,
        ));
        charts
    }

    fn samples(&self) -> Option<Samples> {
        // What a later run is compared by: the command's unchanged runs' wall time, and
        // each what-if's rounds' ratios; a run without what-ifs has one wall time alone.
        let rounds: Vec<&WhatIfItem> = self
            .items
            .iter()
            .filter_map(|i| match i {
                WhyItem::WhatIf(r) => Some(r),
                _ => None,
            })
            .collect();
        let items = rounds
            .iter()
            .map(|r| {
                (
                    GroupKey::new(RateUnit::Seconds, "the command unchanged"),
                    Some(r.baseline_wall_s),
                )
            })
            .chain(rounds.iter().map(|r| {
                let op = format!("{} what-if", measured::step_named(r.step, &r.place));
                (GroupKey::new(RateUnit::Ratio, &op), measured::ratio(r))
            }))
            .collect::<Vec<_>>();
        (!items.is_empty()).then_some(Samples { items })
    }

    fn exposure(&self) -> Exposure {
        // Other work is part of the answer (a wait for a CPU names who held it).
        Exposure::NONE
    }
}

/// The answer where most of the time went to waits this user may not read (`--pid` of
/// another user's process, a tree of setuid members): that what limits the command
/// cannot be seen, whose waits hide it, and what can be seen (its time on a CPU and
/// waiting for one), rather than a step called `other` that limits it.
fn unseen(summary: &WhySummary, context: &WhyContext) -> Option<String> {
    let limit = summary.limiting.as_ref()?;
    if limit.step != Step::Other || limit.place != UNREADABLE_PLACE {
        return None;
    }
    let share = |step: Step| -> f64 {
        summary
            .steps
            .iter()
            .filter(|s| s.step == step)
            .map(|s| s.share)
            .sum::<f64>()
            .max(0.0)
    };
    let percent = |share: f64| {
        if share >= 0.1 {
            format!("{:.0}%", share * 100.0)
        } else {
            format!("{:.1}%", share * 100.0)
        }
    };
    let whose = if context.unreadable.is_empty() {
        String::new()
    } else {
        format!(", of {}", named(&context.unreadable, 1))
    };
    Some(format!(
        "what limits this command cannot be seen: {} of {} went to waits this user may not \
         read{whose} (root, or their own user, can read them); what can be seen: {} on a CPU \
         and {} waiting for one",
        percent(limit.share),
        format_seconds(summary.command.wall_s),
        percent(share(Step::Cpu)),
        percent(share(Step::CpuWait)),
    ))
}

/// The first `most` of `names`, and how many more.
fn named(names: &[String], most: usize) -> String {
    match names.len().checked_sub(most) {
        Some(more) if more > 0 => format!("{} and {more} more", names[..most].join(", ")),
        _ => names.join(", "),
    }
}

/// Unreadable processes named in words before the rest are counted.
const NAMED_IN_WORDS: usize = 6;

/// Where the account charges the time off a CPU of threads whose waits may not be read
/// (`crate::account::classify`).
const UNREADABLE_PLACE: &str = "waits not readable";

#[cfg(test)]
mod tests {
    use super::super::kind::*;
    use super::super::*;
    use super::*;
    use crate::workload::Kind;
    use crate::workload::decoded::asked;

    #[test]
    fn waits_that_cannot_be_read_are_the_answer_not_a_step_that_limits() {
        let step = |step: &str, place: &str, seconds: f64| {
            serde_json::json!({"op": "step", "step": step, "where": place, "device": null,
                "interface": null, "peer": null, "seconds": seconds, "active_seconds": 0.0,
                "bytes": 0})
        };
        let items: Vec<WhyItem> = serde_json::from_value(serde_json::json!([
            step("other", UNREADABLE_PLACE, 0.97),
            step("cpu", "init", 0.025),
            step("cpu_wait", "init", 0.005),
        ]))
        .unwrap();
        let context = WhyContext {
            wall_s: Some(1.0),
            sampled_s: 1.0,
            unreadable: vec!["init (pid 1)".into(), "sshd (pid 812)".into()],
            ..WhyContext::default()
        };
        let summary = summarize(&context, &items);
        assert_eq!(
            unseen(&summary, &context).unwrap(),
            "what limits this command cannot be seen: 97% of 1.00 s went to waits this user \
             may not read, of init (pid 1) and 1 more (root, or their own user, can read them); \
             what can be seen: 2.5% on a CPU and 0.5% waiting for one"
        );
        let readable = summarize(&context, &items[1..]);
        assert_eq!(unseen(&readable, &context), None);
        assert_eq!(
            named(&context.unreadable, 6),
            "init (pid 1), sshd (pid 812)"
        );
    }

    #[test]
    fn a_run_is_compared_by_its_unchanged_walls_and_each_what_if_s_ratios() {
        use crate::document::{RunDocument, WorkloadRecord};
        let round = |step: &str, place: &str, wall: f64, base: f64| {
            serde_json::json!({"op": "what_if", "step": step, "where": place, "factor": 2.0,
                "changed_by": "", "round": 1, "wall_s": wall, "baseline_wall_s": base})
        };
        let items = vec![
            round("cpu", "its processes", 3.0, 2.0),
            round("disk_read", "loop3", 3.8, 2.0),
        ];
        let plan = WhyPlan {
            command: vec!["cat".into()],
            pid: None,
            seconds: None,
            hz: 100.0,
            interval_s: 1.0,
            what_if: None,
        };
        let mut record = WorkloadRecord::for_test(WhyKind::NAME, "cat", items);
        record.params = serde_json::to_value(plan).unwrap();
        let doc = RunDocument::for_test(vec![record]);
        let samples = asked::of(&doc, 0, |w, _| w.samples()).unwrap().unwrap();
        let unchanged = GroupKey::new(RateUnit::Seconds, "the command unchanged");
        assert_eq!(
            samples.items,
            [
                (unchanged.clone(), Some(2.0)),
                (unchanged, Some(2.0)),
                (GroupKey::new(RateUnit::Ratio, "cpu what-if"), Some(1.5)),
                (
                    GroupKey::new(RateUnit::Ratio, "disk_read on loop3 what-if"),
                    Some(1.9)
                ),
            ]
        );
        // Without what-ifs, one wall time: nothing to compare by.
        let mut record = doc.workloads[0].clone();
        record.items.clear();
        let doc = RunDocument::for_test(vec![record]);
        assert_eq!(asked::of(&doc, 0, |w, _| w.samples()).unwrap(), None);
    }
}
