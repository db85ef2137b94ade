//! How ratelab summarises, judges and shows a stored `why` run: the answer in one line,
//! the steps and the processes, and what could not be seen.

use super::answer::{answer, summarize};
use super::stored::{WhyContext, WhyItem, WhyPlan, WhySummary};
use super::tables;
use crate::document::{Severity, Verdict};
use crate::vocab::{Chart, Exposure, SummaryLine, Table};
use crate::workload::{DecodeError, Kind, Stored};

/// How ratelab summarises, judges and shows stored `why` runs.
pub struct WhyKind;

impl Kind for WhyKind {
    const NAME: &'static str = "why";
    type Params = WhyPlan;
    type Context = WhyContext;
    type Item = WhyItem;
    type Summary = WhySummary;
    const RATE_SERIES: bool = false;

    fn summarize(&self, w: &Stored<Self>) -> WhySummary {
        summarize(&w.context, &w.items)
    }

    fn verdicts(&self, w: &Stored<Self>) -> Vec<Verdict> {
        let verdict = Verdict::about(Some(w.index()));
        let mut out = Vec::new();
        let context = &w.context;
        let command = &w.record.target;
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
                    context.unreadable.join(", ")
                ),
            ));
        }
        out
    }

    fn summary_lines(&self, w: &Stored<Self>) -> Result<Vec<SummaryLine>, DecodeError> {
        let summary = self.summarize(w);
        Ok(answer(&summary, &w.context)
            .map(|line| SummaryLine::new("why", line))
            .into_iter()
            .collect())
    }

    fn tables(&self, w: &Stored<Self>) -> Vec<Table> {
        let summary = self.summarize(w);
        let mut out = vec![tables::steps(
            &summary,
            &w.context,
            &w.params,
            &w.record.target,
        )];
        out.extend(tables::processes(&w.items));
        out
    }

    fn charts(&self, w: &Stored<Self>) -> Vec<Chart> {
        tables::charts(&w.items)
    }

    fn exposure(&self, _w: &Stored<Self>) -> Exposure {
        // Other work is part of the answer (a wait for a CPU names who held it).
        Exposure::NONE
    }
}
