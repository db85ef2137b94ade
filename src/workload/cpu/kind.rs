//! What a stored cpu workload is made of (its params, context, items and summary)
//! and how a run concludes its summary; how it is judged and shown is in view.rs.

use serde::{Deserialize, Serialize};

use super::CpuPlan;
use super::context::{CpuContext, PowerSource, UnavailableTest};
use super::item::CpuItem;
use super::scaling::{Scaling, scaling};
use crate::platform::cores::CoreType;
use crate::workload::{Decoded, Kind, Stored};

/// The summary of a cpu workload as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CpuSummary {
    /// How each test scales with threads, per class.
    pub scaling: Vec<Scaling>,
    /// The tests this machine could not run (from the context).
    pub unavailable: Vec<UnavailableTest>,
    /// The machine's core types (from the context).
    pub core_types: Vec<CoreType>,
    /// The run compared with, if any.
    pub baseline_run_id: Option<i64>,
    /// Where the tests' energy comes from (from the context).
    pub power: Option<PowerSource>,
}

/// The cpu kind: its stored shapes and what a run concludes from them.
pub struct CpuKind;

impl Kind for CpuKind {
    const NAME: &'static str = "cpu";
    type Params = CpuPlan;
    type Context = CpuContext;
    type Item = CpuItem;
    type Summary = CpuSummary;

    fn summarize(w: &Stored<Self>, _run: &Decoded) -> CpuSummary {
        CpuSummary {
            scaling: scaling(&w.items, w.params.baseline.as_ref()),
            unavailable: w.context.unavailable.clone(),
            core_types: w.context.core_types.clone(),
            baseline_run_id: w.params.baseline.as_ref().map(|b| b.run_id),
            power: w.context.power.clone(),
        }
    }
}
