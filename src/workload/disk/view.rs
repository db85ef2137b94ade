//! How ratelab summarises, judges and shows stored disk workloads, from their records
//! alone: what `results show` and every report of an old run rely on.

use super::kind::DiskKind;
use super::{brief, tables, verdicts};
use crate::document::Verdict;
use crate::storage::item::{DiskItem, Op};
use crate::storage::rates;
use crate::vocab::Exposure;
use crate::vocab::{
    Chart, GroupKey, LinkLimit, ProfileFigure, RateUnit, Samples, SummaryLine, Table, Unmeasured,
};
use crate::workload::{DecodeError, Decoded, Stored, View};

impl View for Stored<'_, DiskKind> {
    fn streaming_rate(&self, op: &str) -> Option<f64> {
        rates::streaming_rate(&self.items, op)
    }

    fn file_items(&self) -> &[DiskItem] {
        &self.items
    }

    /// The streaming rates of writes and of reads, keyed by everything that makes two
    /// series one series measured twice: the target, sizes, passes, read modes, sync,
    /// engine and block size.
    fn profile_figures(&self) -> Vec<ProfileFigure> {
        let plan = &self.params.plan;
        let settings = serde_json::to_string(&(
            &self.record.target,
            &plan.sizes_bytes,
            plan.repeat,
            &plan.read_modes,
            &plan.sync,
            plan.direct_writes,
            &plan.engine,
            plan.block_size_bytes,
        ))
        .expect("settings serialise");
        ["write", "read"]
            .into_iter()
            .map(|op| ProfileFigure {
                key: format!("disk {op} {settings}"),
                words: format!("streaming {op} on {}", self.record.target),
                rates: rates::streaming_rates(&self.items, op),
            })
            .collect()
    }

    fn exposure(&self) -> Exposure {
        // The null engine makes its figures up: no other work can move them.
        if self.params.plan.engine == super::EngineKind::Null {
            return Exposure::NONE;
        }
        Exposure::STORAGE
    }

    fn verdicts(&self, _run: &Decoded) -> Result<Vec<Verdict>, DecodeError> {
        Ok(verdicts::verdicts(self))
    }

    fn tables(&self) -> Vec<Table> {
        tables::tables(self)
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

    fn charts(&self) -> Vec<Chart> {
        rates::by_size_chart(&self.record.target, &self.items)
            .into_iter()
            .collect()
    }

    fn link_limit(&self) -> Option<LinkLimit> {
        Some(rates::link_limit(
            self.context.max_bytes_per_sec,
            self.context.chain.as_ref(),
        ))
    }

    fn samples(&self) -> Option<Samples> {
        let items = self
            .items
            .iter()
            .map(|item| {
                // One run may read each file in several modes: each is its own group.
                let op = match item.op {
                    Op::Write | Op::Rewrite => item.op.as_str().to_string(),
                    Op::Read => format!("read {}", item.mode),
                };
                let key = GroupKey {
                    size_bytes: Some(item.size_bytes),
                    ..GroupKey::new(RateUnit::BytesPerSec, op)
                };
                // Every item, as the table's median takes it: leaving out only those too
                // short to time (the fastest) would leave the slow ones, a figure lower
                // than the table's. The table's notes say how many were short.
                (key, Some(item.bytes_per_sec))
            })
            .collect();
        Some(Samples { items })
    }
}
