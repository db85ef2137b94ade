//! How ratelab judges and shows a stored net test: the received rate against the
//! link's goodput limit, the stream ends whose CPU core was the limit, and tables of
//! the intervals and of each stream end.

use super::NetPlan;
use super::context::NetContext;
use super::item::NetItem;
use super::summary::{self, NetSummary};
use crate::vocab::RateUnit;
use crate::workload::{Decoded, Kind, Stored};

/// How ratelab summarises, judges and shows stored net workloads.
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
