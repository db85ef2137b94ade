//! How ratelab summarises, judges and shows stored disk workloads, from their records
//! alone: what `results show` and every report of an old run rely on.

use super::stored::{DiskContext, DiskParams, DiskSummary};
use super::{brief, summary, tables, verdicts};
use crate::analysis;
use crate::catch::Family;
use crate::document::{Knee, Verdict};
use crate::storage::item::{DiskItem, Op};
use crate::storage::rates;
use crate::vocab::Exposure;
use crate::vocab::{
    Chart, GroupKey, LinkLimit, ProfileFigure, RateUnit, Samples, SummaryLine, Table, Unmeasured,
};
use crate::workload::{DecodeError, InPlace, Kind, Site, Stored};

/// How ratelab summarises, judges and shows stored disk workloads.
pub struct DiskKind;

impl Kind for DiskKind {
    fn in_place(&self, params: DiskParams, site: Site) -> Option<Box<dyn InPlace>> {
        Some(Box::new(super::DiskWorkload::new(super::DiskPlan {
            target: site.folder,
            layers: site.layers,
            ..params.plan
        })))
    }

    fn streaming_rate(&self, w: &Stored<Self>, op: &str) -> Option<f64> {
        rates::streaming_rate(&w.items, op)
    }

    /// The streaming rates of writes and of reads, keyed by everything that makes two
    /// series one series measured twice: the target, sizes, passes, read modes, sync,
    /// engine and block size.
    fn profile_figures(&self, w: &Stored<Self>) -> Vec<ProfileFigure> {
        let plan = &w.params.plan;
        let settings = serde_json::to_string(&(
            &w.record.target,
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
                words: format!("streaming {op} on {}", w.record.target),
                rates: rates::streaming_rates(&w.items, op),
            })
            .collect()
    }

    fn exposure(&self, w: &Stored<Self>) -> Exposure {
        // The null engine makes its figures up: no other work can move them.
        if w.params.plan.engine == super::EngineKind::Null {
            return Exposure::NONE;
        }
        Exposure::STORAGE
    }

    const NAME: &'static str = "disk";
    type Params = DiskParams;
    type Context = DiskContext;
    type Item = DiskItem;
    type Summary = DiskSummary;

    fn summarize(&self, w: &Stored<Self>) -> DiskSummary {
        summary::summarize(&w.items, &w.params.plan.read_modes)
    }

    fn verdicts(&self, w: &Stored<Self>) -> Vec<Verdict> {
        verdicts::verdicts(w)
    }

    fn tables(&self, w: &Stored<Self>) -> Vec<Table> {
        tables::tables(w)
    }

    fn summary_lines(&self, w: &Stored<Self>) -> Result<Vec<SummaryLine>, DecodeError> {
        Ok(brief::summary_lines(w))
    }

    fn unmeasured(&self, w: &Stored<Self>) -> Vec<Unmeasured> {
        brief::unmeasured(w)
    }

    fn brief_tables(&self, w: &Stored<Self>) -> Vec<Table> {
        brief::brief_tables(w)
    }

    fn charts(&self, w: &Stored<Self>) -> Vec<Chart> {
        rates::by_size_chart(&w.record.target, &w.items)
            .into_iter()
            .collect()
    }

    fn link_limit(&self, w: &Stored<Self>) -> Option<LinkLimit> {
        Some(rates::link_limit(
            w.context.max_bytes_per_sec,
            w.context.chain.as_ref(),
        ))
    }

    fn samples(&self, w: &Stored<Self>) -> Option<Samples> {
        let items = w
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

    fn knees(&self, w: &Stored<Self>) -> Option<Vec<Knee>> {
        // Only a sustained run moves data without pause; a series of files pauses
        // between them, and those pauses are not changes of level.
        w.params.plan.duration_s?;
        let knees = analysis::knees::detect(w.record.series.as_ref()?);
        Some(analysis::knees::skewed(knees, Family::Storage))
    }
}
