//! What a stored iops workload is made of (its params, context, items and summary)
//! and how a run concludes its summary; how it is judged and shown is in view.rs.

use super::IopsPlan;
use super::rounds::Rounds;
use super::stored::{IopsContext, IopsItem, IopsSummary, TestSummary};
use crate::workload::{Decoded, Kind, Stored};

/// The iops kind: its stored shapes and what a run concludes from them.
pub struct IopsKind;

impl Kind for IopsKind {
    const NAME: &'static str = "iops";
    type Params = IopsPlan;
    type Context = IopsContext;
    type Item = IopsItem;
    type Summary = IopsSummary;

    /// Each test and op's median round, with the range of its rounds.
    fn summarize(w: &Stored<Self>, _run: &Decoded) -> IopsSummary {
        IopsSummary {
            tests: Rounds::of(&w.items)
                .iter()
                .map(|rounds| {
                    let median = rounds.median();
                    let (min_iops, max_iops) = rounds.iops_range();
                    TestSummary {
                        test: median.test.clone(),
                        op: median.op,
                        iops: median.iops,
                        bytes_per_sec: median.bytes_per_sec,
                        latency_ns: median.latency_ns,
                        rounds: rounds.count(),
                        min_iops,
                        max_iops,
                    }
                })
                .collect(),
        }
    }
}
