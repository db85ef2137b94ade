//! What a stored `why` workload is made of (its params, context, items and summary)
//! and how a run concludes its summary; how it is judged and shown is in view.rs.

use super::answer::summarize;
use super::stored::{WhyContext, WhyItem, WhyPlan, WhySummary};
use crate::workload::{Decoded, Kind, Stored};

/// The `why` kind: its stored shapes and what a run concludes from them.
pub struct WhyKind;

impl Kind for WhyKind {
    const NAME: &'static str = "why";
    type Params = WhyPlan;
    type Context = WhyContext;
    type Item = WhyItem;
    type Summary = WhySummary;
    const RATE_SERIES: bool = false;

    fn summarize(w: &Stored<Self>, _run: &Decoded) -> WhySummary {
        summarize(&w.context, &w.items)
    }
}
