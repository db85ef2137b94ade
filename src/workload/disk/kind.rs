//! How ratelab summarises, judges and shows stored disk workloads, from their records
//! alone: what `results show` and every report of an old run rely on.

use super::stored::{DiskContext, DiskParams, DiskSummary};
use super::summary;
use crate::analysis;
use crate::catch::Family;
use crate::document::Knee;
use crate::storage::item::DiskItem;
use crate::workload::{Decoded, InPlace, Kind, Site, Stored};

/// How ratelab summarises, judges and shows stored disk workloads.
pub struct DiskKind;

impl Kind for DiskKind {
    fn in_place(params: DiskParams, site: Site) -> Option<Box<dyn InPlace>> {
        Some(Box::new(super::DiskWorkload::new(super::DiskPlan {
            target: site.folder,
            layers: site.layers,
            ..params.plan
        })))
    }

    const NAME: &'static str = "disk";
    type Params = DiskParams;
    type Context = DiskContext;
    type Item = DiskItem;
    type Summary = DiskSummary;

    fn summarize(w: &Stored<Self>, _run: &Decoded) -> DiskSummary {
        summary::summarize(&w.items, &w.params.plan.read_modes)
    }

    fn knees(w: &Stored<Self>) -> Option<Vec<Knee>> {
        // Only a sustained run moves data without pause; a series of files pauses
        // between them, and those pauses are not changes of level.
        w.params.plan.duration_s?;
        let knees = analysis::knees::detect(w.record.series.as_ref()?);
        Some(analysis::knees::skewed(knees, Family::Storage))
    }
}
