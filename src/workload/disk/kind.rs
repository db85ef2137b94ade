//! What a stored disk workload is made of (its params, context, items and summary)
//! and how a run concludes its summary; how it is judged and shown is in view.rs.

use super::stored::{DiskContext, DiskParams, DiskSummary};
use super::summary;
use crate::analysis;
use crate::catch::Family;
use crate::document::Knee;
use crate::storage::item::DiskItem;
use crate::workload::{Decoded, InPlace, Kind, Site, Stored};

/// The disk kind: its stored shapes and what a run concludes from them.
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
