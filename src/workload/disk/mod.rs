//! The storage series: files of a series of sizes written with sync and read back
//! uncached, each one an item; or, in sustained mode, writing or reading without pause
//! for a while. Engines (sync, uring, null) move the bytes; this module decides what is
//! written, in what order, and what state the cache is in before a read.

mod brief;
mod kind;
mod passes;
pub mod plan;
pub mod quick;
pub mod series;
pub mod stored;
mod summary;
mod sustained;
mod tables;
mod verdicts;
mod view;

use std::path::PathBuf;

use serde_json::Value;

use crate::error::Error;
use crate::platform::{self, StorageChain};
use crate::storage::engine::{self, Engine};
pub use crate::storage::rates::link_limit;
pub use crate::storage::rates::{Headline, flagged, streaming_rate};
pub use crate::storage::read::read_one;
use crate::storage::workdir::{self, KeptFile, WorkDir};
use crate::workload::{Context, InPlace, Kind, RoundBytes, Workload};
pub use kind::DiskKind;
pub use plan::{DiskPlan, EngineKind, Phase, ReadMode, SyncMode};
use stored::{DiskContext, DiskParams, QuickBaseline, QuickShape};

/// Most files a sustained run cycles through before it writes over the first again.
pub(crate) const MAX_RING: u64 = 64;

/// A storage series on one target folder.
pub struct DiskWorkload {
    plan: DiskPlan,
    target: PathBuf,
    chain: Option<StorageChain>,
    workdir: Option<WorkDir>,
    engine: Option<Box<dyn Engine>>,
    /// Files of an earlier `--keep` run (`--phase read`), or laid out for a sustained read.
    kept: Vec<KeptFile>,
    /// Files a sustained run cycles through.
    ring: usize,
    /// Files the last round run in a place wrote, removed when the round ends.
    in_round: Vec<KeptFile>,
    /// The workload this one runs alone for (`--alone`).
    alone_of: Option<usize>,
}

impl DiskWorkload {
    /// A workload for a validated plan; nothing is checked or created yet.
    pub fn new(plan: DiskPlan) -> DiskWorkload {
        let target = plan.target.clone();
        DiskWorkload {
            plan,
            target,
            chain: None,
            workdir: None,
            engine: None,
            kept: Vec::new(),
            ring: 1,
            in_round: Vec::new(),
            alone_of: None,
        }
    }

    /// The same series, run alone before the group, standing for workload `of`.
    pub fn alone_for(plan: DiskPlan, of: usize) -> DiskWorkload {
        DiskWorkload {
            alone_of: Some(of),
            ..DiskWorkload::new(plan)
        }
    }

    /// The link limit the figures are checked against, and where it came from.
    fn limit(&self) -> (Option<f64>, Option<&'static str>) {
        match (
            self.plan.link_rate_bytes_per_sec,
            self.chain.as_ref().and_then(|c| c.max_bytes_per_sec),
        ) {
            (Some(rate), _) => (Some(rate), Some("--link-rate")),
            (None, Some(rate)) => (Some(rate), Some("sysfs")),
            (None, None) => (None, None),
        }
    }

    /// Its params as stored; a destination check adds what it writes besides.
    fn stored_params(&self, quick: Option<QuickShape>) -> DiskParams {
        DiskParams {
            plan: self.plan.clone(),
            quick,
        }
    }

    /// Its context as stored; a destination check adds the earlier checks' medians.
    fn stored_context(&self, baseline: Option<QuickBaseline>) -> DiskContext {
        let (limit, source) = self.limit();
        DiskContext {
            chain: self.chain.clone(),
            max_bytes_per_sec: limit,
            limit_source: source.map(str::to_string),
            kept_folder: self
                .workdir
                .as_ref()
                .filter(|w| w.is_kept())
                .map(|w| w.path().display().to_string()),
            baseline,
        }
    }

    fn passes(&self) -> u64 {
        u64::from(self.plan.repeat)
    }

    /// The work folder, which exists from `setup` on.
    fn workdir(&mut self) -> &mut WorkDir {
        self.workdir
            .as_mut()
            .expect("the work folder exists once set up")
    }

    /// Checks that a series fits, or sizes the ring of a sustained run to what fits.
    fn check_space(&mut self) -> Result<(), Error> {
        if self.plan.engine == EngineKind::Null {
            // The null engine writes no data, only empty files.
            return Ok(());
        }
        match self
            .plan
            .file_size_bytes
            .filter(|_| self.plan.sustained().is_some())
        {
            Some(file_size) => {
                let ring = if self.plan.phase.writes() {
                    MAX_RING
                } else {
                    2
                };
                self.ring = workdir::files_that_fit(&self.target, file_size, ring)? as usize;
            }
            None if self.plan.phase.writes() => {
                let series: u64 = self.plan.sizes_bytes.iter().sum();
                let copies = if self.plan.keep { self.passes() } else { 1 };
                let files = self.plan.sizes_bytes.len() as u64 * copies;
                workdir::check_space(&self.target, series * copies, files)?;
            }
            None => {}
        }
        Ok(())
    }
}

impl InPlace for DiskWorkload {
    fn rounds(&self) -> u32 {
        self.plan.repeat
    }

    fn held_bytes(&self) -> u64 {
        self.plan.sizes_bytes.iter().sum()
    }

    /// One pass of the series; its files stay in the work folder until the round ends.
    fn run_round(&mut self, ctx: &Context, round: u32) -> Result<RoundBytes, Error> {
        let mut engine = self.engine.take().expect("the engine is made in setup");
        let result = self.one_pass(ctx, engine.as_mut(), round);
        self.engine = Some(engine);
        self.in_round = result?;
        let (written, read) = self.plan.pass_bytes();
        Ok(RoundBytes {
            written,
            moved: written + read,
        })
    }

    fn end_round(&mut self) -> Result<(), Error> {
        let files = std::mem::take(&mut self.in_round);
        self.remove_files(&files)
    }
}

impl Workload for DiskWorkload {
    fn kind(&self) -> &'static str {
        DiskKind::NAME
    }

    fn target(&self) -> String {
        self.target.display().to_string()
    }

    fn touches(&self) -> crate::workload::Touches {
        crate::workload::Touches {
            paths: vec![self.target.clone()],
            ..Default::default()
        }
    }

    fn alone_of(&self) -> Option<usize> {
        self.alone_of
    }

    fn params(&self) -> Value {
        serde_json::to_value(self.stored_params(None)).expect("params serialise")
    }

    fn context(&self) -> Value {
        serde_json::to_value(self.stored_context(None)).expect("contexts serialise")
    }

    fn planned_bytes(&self) -> u64 {
        if self.plan.sustained().is_some() {
            return 0;
        }
        let (written, read) = self.plan.pass_bytes();
        written.saturating_add(read).saturating_mul(self.passes())
    }

    fn prepare(&mut self) -> Result<(), Error> {
        self.target = workdir::check_target(&self.plan.target)?;
        if self.plan.uses_direct() {
            workdir::check_direct(
                &self.target,
                "use --read flushed, and writes without --direct",
            )?;
            if let Some(align) = crate::storage::align::DirectAlign::of(&self.target) {
                align.check(&self.target, "the series", engine::DIRECT_ALIGN as u64)?;
                align.check(
                    &self.target,
                    &format!("--block-size {}", self.plan.block_size_bytes),
                    self.plan.block_size_bytes as u64,
                )?;
            }
        }
        self.chain = platform::probe_path(&self.target).ok();
        if let Some(priority) = self.plan.ioprio {
            priority.check().map_err(|e| ioprio_refused(priority, e))?;
        }
        self.check_space()?;
        if !self.plan.phase.writes() && self.plan.sustained().is_none() {
            let (workdir, files) = WorkDir::open_kept(&self.target)?;
            self.plan.sizes_bytes = files.iter().map(|f| f.size_bytes).collect();
            self.workdir = Some(workdir);
            self.kept = files;
        }
        Ok(())
    }

    fn setup(&mut self, ctx: &Context) -> Result<(), Error> {
        self.engine = Some(engine::make(
            self.plan.engine,
            self.plan.block_size_bytes,
            self.plan.queue_depth,
            self.plan.seed,
        )?);
        if self.workdir.is_none() {
            self.workdir = Some(WorkDir::create(&self.target)?);
        }
        if self.plan.sustained().is_some() && self.plan.phase.reads() {
            self.lay_out(ctx)?;
        }
        Ok(())
    }

    fn run(&mut self, ctx: &Context) -> Result<(), Error> {
        if let Some(priority) = self.plan.ioprio {
            // Per thread: this workload's own, not the other workloads'.
            priority.apply().map_err(|e| {
                Error::Unsupported(format!(
                    "cannot set --ioprio {priority:?} on this thread: {e}"
                ))
            })?;
        }
        let mut engine = self.engine.take().expect("the engine is made in setup");
        let result = match self.plan.sustained() {
            Some(duration) => self.run_sustained(ctx, engine.as_mut(), duration),
            None => self.run_series(ctx, engine.as_mut()),
        };
        self.engine = Some(engine);
        result
    }

    fn cleanup(&mut self) -> Result<(), Error> {
        match self.workdir.as_mut() {
            Some(workdir) => workdir.remove_all(),
            None => Ok(()),
        }
    }
}

/// The error for an I/O priority the system refuses.
fn ioprio_refused(priority: crate::platform::ioprio::IoPriority, e: std::io::Error) -> Error {
    Error::Unsupported(format!(
        "cannot run at --ioprio {priority}: {e} (the rt class needs root)"
    ))
}
