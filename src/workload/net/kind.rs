//! What a stored net workload is made of (its params, context, items and summary)
//! and how a run concludes its summary; how it is judged and shown is in view.rs.

use super::NetPlan;
use super::context::NetContext;
use super::item::NetItem;
use super::summary::{self, NetSummary};
use crate::vocab::RateUnit;
use crate::workload::{Decoded, Kind, Stored};

/// The net kind: its stored shapes and what a run concludes from them.
pub struct NetKind;

impl Kind for NetKind {
    const NAME: &'static str = "net";
    type Params = NetPlan;
    type Context = NetContext;
    type Item = NetItem;
    type Summary = NetSummary;

    const RATE_UNIT: RateUnit = RateUnit::BytesPerSecInBits;

    fn summarize(w: &Stored<Self>, _run: &Decoded) -> NetSummary {
        summary::summarize(&w.params, &w.context, &w.items)
    }
}

/// A share of one core in words: `92%`, or `?` where it is not known.
pub(super) fn share_of_core(fraction: Option<f64>) -> String {
    fraction.map_or("?".into(), |f| format!("{:.0}%", f * 100.0))
}
