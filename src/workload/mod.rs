//! Workloads: each kind (disk now; net, cpu, task later) is a folder that implements
//! [`Workload`]. The runner drives them through this one trait and never needs to
//! know what a kind measures.

mod cancel;
pub mod cpu;
pub mod disk;
mod error;
pub mod monitor;
pub mod net;
pub mod readdir;
pub mod scale;
mod sink;
pub mod task;

use serde_json::Value;

pub use cancel::Cancel;
pub use error::{Error, is_interrupted};
pub use sink::{Event, Progress, Sink};

use crate::document::{Verdict, WorkloadRecord};

/// What a workload gets from the runner while it runs.
#[derive(Clone)]
pub struct Context {
    /// Set when the run must stop (SIGINT, SIGTERM, another workload failed).
    pub cancel: Cancel,
    /// Where items, stage ends and status lines go.
    pub sink: Sink,
}

/// One measuring job of a run. Hot paths live in `run`; the other hooks have defaults.
pub trait Workload: Send {
    /// The kind's name as stored (`disk`).
    fn kind(&self) -> &'static str;

    /// What it measures (a folder, a host), as shown and stored.
    fn target(&self) -> String;

    /// Its validated parameters, as stored.
    fn params(&self) -> Value;

    /// What the platform says about the target (link, limits), as stored.
    fn context(&self) -> Value {
        Value::Null
    }

    /// For a workload run alone first (`--alone`), the index of the one it stands for.
    fn alone_of(&self) -> Option<usize> {
        None
    }

    /// Bytes the workload plans to move, for progress; 0 when unknown.
    fn planned_bytes(&self) -> u64 {
        0
    }

    /// Checks the environment before anything is created (space, permissions).
    fn prepare(&mut self) -> Result<(), Error> {
        Ok(())
    }

    /// Makes what the measurement needs (folders, files to read later), after every
    /// workload is prepared and before the common start: not timed, not sampled.
    fn setup(&mut self, _ctx: &Context) -> Result<(), Error> {
        Ok(())
    }

    /// Measures, pushing every item into the context's sink; stops early on cancel.
    fn run(&mut self, ctx: &Context) -> Result<(), Error>;

    /// Removes what the workload created; called after success, error and interrupt.
    fn cleanup(&mut self) -> Result<(), Error> {
        Ok(())
    }
}

/// What ratelab knows of a kind without running it: how to summarise, judge and show
/// its stored items. Stored runs are analysed and shown through this alone.
pub trait Kind: Sync {
    /// The kind's name as stored (`disk`).
    fn name(&self) -> &'static str;

    /// Statistics over the workload's items (SPEC.md `summary`).
    fn summarize(&self, record: &WorkloadRecord) -> Value;

    /// Conclusions about the workload, in words.
    fn verdicts(&self, workload: usize, record: &WorkloadRecord) -> Vec<Verdict>;

    /// Tables for the terminal and text reports.
    fn tables(&self, record: &WorkloadRecord) -> Vec<crate::vocab::Table>;

    /// Conclusions that need the other workloads of the same run (a task beside the
    /// storage series of its folder); none by default.
    fn verdicts_beside(&self, _workload: usize, _records: &[WorkloadRecord]) -> Vec<Verdict> {
        Vec::new()
    }

    /// Lasting changes of rate in the workload's series, where the kind's runs make
    /// them meaningful (sustained runs); none by default.
    fn knees(
        &self,
        _params: &Value,
        _series: &crate::document::Series,
    ) -> Option<Vec<crate::document::Knee>> {
        None
    }
}

/// Every kind ratelab knows; a new kind adds one line here.
const KINDS: &[&dyn Kind] = &[
    &disk::DiskKind,
    &readdir::ReaddirKind,
    &net::NetKind,
    &cpu::CpuKind,
    &scale::ScaleKind,
    &task::TaskKind,
    &monitor::MonitorKind,
];

/// The kind named `name`, if ratelab knows it.
pub fn kind(name: &str) -> Option<&'static dyn Kind> {
    KINDS.iter().copied().find(|k| k.name() == name)
}
