//! How ratelab summarises, judges and shows a stored `why` run: the answer in one line,
//! the steps and the processes, and what could not be seen.

use super::answer::summarize;
use super::stored::{WhyContext, WhyItem, WhyPlan, WhySummary};
use crate::workload::{Decoded, Kind, Stored};

/// How ratelab summarises, judges and shows stored `why` runs.
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
