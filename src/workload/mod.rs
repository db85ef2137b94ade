//! Workloads: each kind is a folder that implements [`Workload`] (how it measures,
//! driven by the runner) and [`Kind`] (how its stored runs are summarised, judged,
//! shown and compared). The runner and the reports reach kinds through these two traits
//! and [`KINDS`] alone, and never need to know what a kind measures.

pub mod cpu;
mod decoded;
pub mod disk;
pub mod image;
mod in_place;
pub mod iops;
mod kind;
pub mod monitor;
pub mod net;
pub mod readdir;
pub mod scale;
mod sink;
pub mod start_line;
pub mod task;
pub mod why;

use serde_json::Value;

pub use decoded::{Apart, Decoded};
pub use in_place::{InPlace, RoundBytes, Site};
#[cfg(test)]
pub use kind::decodes;
pub use kind::{At, Conclude, Concluded, DecodeError, Kind, KindEntry, Stored, View};
pub use sink::{Event, Sink};

use crate::control::Cancel;
use crate::document::{RunDocument, WorkloadRecord};
use crate::error::Error;
use crate::vocab::{ProfileFigure, RateUnit, Samples};

/// The storage and network a workload's figures depend on: the folders (or files) it
/// moves bytes to and from, and the network interfaces its tests use.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Touches {
    /// Folders or files whose storage it uses.
    pub paths: Vec<std::path::PathBuf>,
    /// Network interface names (`lo`, `eth0`).
    pub interfaces: Vec<String>,
    /// Whether it keeps an account of the threads it runs itself (`why`): the run's
    /// account of its own threads would count them again.
    pub accounts_threads: bool,
}

/// What a workload gets from the runner while it runs.
#[derive(Clone)]
pub struct Context {
    /// Set when the run must stop (SIGINT, SIGTERM, another workload failed).
    pub cancel: Cancel,
    /// Where items, stage ends and status lines go.
    pub sink: Sink,
}

impl Context {
    /// The same run's context for workload `index`, whose items this workload sends.
    pub fn for_record(&self, index: usize) -> Context {
        Context {
            cancel: self.cancel.clone(),
            sink: self.sink.for_record(index),
        }
    }

    /// The cancel flag and the counters, as the storage core's loops take them.
    pub fn controls(&self) -> crate::control::Controls<'_> {
        crate::control::Controls {
            cancel: &self.cancel,
            progress: self.sink.progress(),
        }
    }
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

    /// For a record whose items another workload of the run measures and sends (an
    /// image's places), that workload's index: such a record is never scheduled.
    fn measured_by(&self) -> Option<usize> {
        None
    }

    /// Bytes the workload plans to move, for progress; 0 when unknown.
    fn planned_bytes(&self) -> u64 {
        0
    }

    /// The storage and network its figures depend on besides the CPUs, known once it
    /// is prepared: what other work does on them is accounted as interference. None by
    /// default.
    fn touches(&self) -> Touches {
        Touches::default()
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

/// Every kind ratelab knows; a new kind adds one line here.
const KINDS: &[&dyn KindEntry] = &[
    &disk::DiskKind,
    &readdir::ReaddirKind,
    &net::NetKind,
    &cpu::CpuKind,
    &scale::ScaleKind,
    &task::TaskKind,
    &monitor::MonitorKind,
    &image::ImageKind,
    &iops::IopsKind,
    &why::WhyKind,
];

/// The kind named `name`, if ratelab knows it.
pub fn kind(name: &str) -> Option<&'static dyn KindEntry> {
    KINDS.iter().copied().find(|k| k.name() == name)
}

/// The unit a stored workload's rates are shown in (bytes per second for a kind this
/// version does not know).
pub fn rate_unit(record: &WorkloadRecord) -> RateUnit {
    kind(&record.kind).map_or(RateUnit::BytesPerSec, |k| k.rate_unit())
}

/// Each workload's items of `run` as `results compare` groups them; `None` for a
/// workload whose kind is not compared or not known to this version.
pub fn samples_of(doc: &RunDocument) -> Result<Vec<Option<Samples>>, DecodeError> {
    let run = Decoded::of(doc);
    (0..doc.workloads.len())
        .map(|index| Ok(run.view(index)?.and_then(|view| view.samples())))
        .collect()
}

/// The figures of every workload of `run` a later profile sets against this one's, in
/// the run's order; those run alone first (`--alone`) are left out.
pub fn profile_figures(run: &Decoded) -> Result<Vec<ProfileFigure>, DecodeError> {
    let mut figures = Vec::new();
    for (index, record) in run.doc.workloads.iter().enumerate() {
        if record.alone_of.is_some() {
            continue;
        }
        if let Some(view) = run.view(index)? {
            figures.extend(view.profile_figures());
        }
    }
    Ok(figures)
}

/// The names of every kind ratelab knows, in the order of [`KINDS`].
pub fn kind_names() -> impl Iterator<Item = &'static str> {
    KINDS.iter().map(|k| k.name())
}
