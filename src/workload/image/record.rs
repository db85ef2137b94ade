//! The record of a workload that another one measures: an image run's series and task
//! at each place (the host folder, each container) are stored as ordinary disk and
//! task workloads, so every report, verdict and comparison of those kinds applies to
//! them, while the image workload alone runs them, round by round.

use std::sync::{Arc, Mutex};

use serde_json::Value;

use crate::error::Error;
use crate::workload::{Context, Workload};

/// A workload's record whose items another workload of the run sends.
pub struct Recorded {
    kind: &'static str,
    target: String,
    params: Value,
    context: Shared,
    measured_by: usize,
}

/// A record's context, set by the workload that measures it as it learns it.
pub type Shared = Arc<Mutex<Value>>;

impl Recorded {
    /// The record of `workload` (as planned, not run), measured by workload `measured_by`;
    /// its context is `context`, which that workload fills in.
    pub fn of(workload: &dyn Workload, measured_by: usize, context: Shared) -> Recorded {
        Recorded {
            kind: workload.kind(),
            target: workload.target(),
            params: workload.params(),
            context,
            measured_by,
        }
    }
}

impl Workload for Recorded {
    fn kind(&self) -> &'static str {
        self.kind
    }

    fn target(&self) -> String {
        self.target.clone()
    }

    fn params(&self) -> Value {
        self.params.clone()
    }

    fn context(&self) -> Value {
        self.context
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }

    fn measured_by(&self) -> Option<usize> {
        Some(self.measured_by)
    }

    fn run(&mut self, _ctx: &Context) -> Result<(), Error> {
        // Never scheduled: the workload that measures it sends its items.
        Ok(())
    }
}
