//! The storage series: files of a series of sizes written with sync and read back
//! uncached, each one an item. Engines (sync, uring, null) move the bytes; this module
//! decides what is written, in what order, and what state the cache is in before a read.

mod buffer;
pub mod cache;
mod data;
pub mod engine;
pub mod item;
mod null;
pub mod plan;
mod present;
pub mod series;
mod sync;
mod uring;
pub mod workdir;

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::analysis;
use crate::document::{Verdict, WorkloadRecord};
use crate::platform::{self, StorageChain};
use crate::report::units::format_size;
use crate::workload::{Context, Error, Kind, Workload};
use cache::Eviction;
use engine::{Engine, ReadJob, WriteJob};
use item::{DiskItem, Op};
pub use plan::{DiskPlan, EngineKind, Phase, ReadMode, SyncMode};
use workdir::{KeptFile, WorkDir};

/// A storage series on one target folder.
pub struct DiskWorkload {
    plan: DiskPlan,
    target: PathBuf,
    chain: Option<StorageChain>,
    workdir: Option<WorkDir>,
    /// Files of an earlier `--keep` run, for `--phase read`.
    kept: Vec<KeptFile>,
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
            kept: Vec::new(),
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

    fn passes(&self) -> u64 {
        u64::from(self.plan.repeat)
    }

    fn write_pass(
        &mut self,
        ctx: &Context,
        engine: &mut dyn Engine,
        pass: u32,
    ) -> Result<Vec<KeptFile>, Error> {
        let order = series::shuffled(&self.plan.sizes_bytes, self.plan.seed, pass, 0);
        let limit = self.limit().0;
        let workdir = self
            .workdir
            .as_mut()
            .expect("the work folder exists while writing");
        let mut written = Vec::with_capacity(order.len());
        for (index, &size) in order.iter().enumerate() {
            let name = format!("p{pass}-{:03}-{size}.dat", index + 1);
            ctx.sink.status(format!(
                "pass {pass}/{}: write {}",
                self.plan.repeat,
                format_size(size)
            ));
            let direct = self.plan.direct_writes;
            let (path, file) = workdir.create_file(&name, direct)?;
            let tail = if direct && size % plan::DIRECT_ALIGN as u64 != 0 {
                Some(workdir::open_for_tail(&path)?)
            } else {
                None
            };
            let job = WriteJob {
                file: &file,
                direct,
                tail_file: tail.as_ref(),
                path: &path,
                size,
                sync: self.plan.sync,
                progress: ctx.sink.progress(),
                cancel: &ctx.cancel,
            };
            let elapsed = engine.write(&job)?;
            drop((file, tail));
            let item = DiskItem {
                direct,
                ..DiskItem::timed(
                    Op::Write,
                    self.plan.sync.as_str(),
                    size,
                    elapsed,
                    pass,
                    &name,
                )
            };
            ctx.sink.item(&analysis::disk::flagged(item, limit));
            written.push(KeptFile {
                name,
                size_bytes: size,
            });
        }
        ctx.sink.stage_done(format!("pass {pass} write"));
        Ok(written)
    }

    fn read_pass(
        &mut self,
        ctx: &Context,
        engine: &mut dyn Engine,
        files: &[KeptFile],
        pass: u32,
    ) -> Result<(), Error> {
        let folder = self
            .workdir
            .as_ref()
            .expect("the work folder exists while reading")
            .path()
            .to_path_buf();
        let limit = self.limit().0;
        for (stage, &mode) in self.plan.read_modes.iter().enumerate() {
            let order = series::shuffled(files, self.plan.seed, pass, stage as u32 + 1);
            for kept in &order {
                ctx.sink.status(format!(
                    "pass {pass}/{}: read {} {}",
                    self.plan.repeat,
                    mode.as_str(),
                    format_size(kept.size_bytes)
                ));
                let item = read_one(ctx, engine, &folder.join(&kept.name), kept, mode, pass)?;
                ctx.sink.item(&analysis::disk::flagged(item, limit));
            }
            ctx.sink
                .stage_done(format!("pass {pass} read {}", mode.as_str()));
        }
        Ok(())
    }
}

/// Puts one file in the cache state `mode` asks for, proves it, and times its read.
fn read_one(
    ctx: &Context,
    engine: &mut dyn Engine,
    path: &Path,
    kept: &KeptFile,
    mode: ReadMode,
    pass: u32,
) -> Result<DiskItem, Error> {
    let probe = workdir::open_for_read(path, false)?;
    match mode {
        ReadMode::Direct => cache::evict(&probe, path, kept.size_bytes, Eviction::Advise)?,
        ReadMode::Flushed => cache::evict(&probe, path, kept.size_bytes, Eviction::Force)?,
        ReadMode::Cached => cache::warm(&probe, path, kept.size_bytes)?,
    }
    let fraction = cache::resident_fraction(&probe, path, kept.size_bytes)?;
    let direct = mode == ReadMode::Direct;
    let reader = if direct {
        workdir::open_for_read(path, true)?
    } else {
        probe
    };
    let job = ReadJob {
        file: &reader,
        path,
        size: kept.size_bytes,
        direct,
        progress: ctx.sink.progress(),
        cancel: &ctx.cancel,
    };
    let elapsed = engine.read(&job)?;
    Ok(DiskItem {
        cached_fraction_before: Some(fraction),
        direct,
        ..DiskItem::timed(
            Op::Read,
            mode.as_str(),
            kept.size_bytes,
            elapsed,
            pass,
            &kept.name,
        )
    })
}

impl Workload for DiskWorkload {
    fn kind(&self) -> &'static str {
        "disk"
    }

    fn target(&self) -> String {
        self.target.display().to_string()
    }

    fn params(&self) -> Value {
        serde_json::to_value(&self.plan).expect("plans serialise")
    }

    fn context(&self) -> Value {
        let (limit, source) = self.limit();
        json!({
            "chain": self.chain,
            "max_bytes_per_sec": limit,
            "limit_source": source,
            "kept_folder": self
                .workdir
                .as_ref()
                .filter(|w| w.is_kept())
                .map(|w| w.path().display().to_string()),
        })
    }

    fn planned_bytes(&self) -> u64 {
        // Saturating: this only sizes a progress bar.
        let series: u64 = self
            .plan
            .sizes_bytes
            .iter()
            .fold(0, |sum, &size| sum.saturating_add(size));
        let reads = if self.plan.phase.reads() {
            self.plan.read_modes.len() as u64
        } else {
            0
        };
        let copies = u64::from(self.plan.phase.writes()) + reads;
        series.saturating_mul(copies).saturating_mul(self.passes())
    }

    fn prepare(&mut self) -> Result<(), Error> {
        self.target = workdir::check_target(&self.plan.target)?;
        if self.plan.uses_direct() {
            workdir::check_direct(&self.target)?;
        }
        self.chain = platform::probe_path(&self.target).ok();
        if self.plan.phase.writes() {
            let series: u64 = self.plan.sizes_bytes.iter().sum();
            let copies = if self.plan.keep { self.passes() } else { 1 };
            let files = self.plan.sizes_bytes.len() as u64 * copies;
            workdir::check_space(&self.target, series * copies, files)?;
        } else {
            let (workdir, files) = WorkDir::open_kept(&self.target)?;
            self.plan.sizes_bytes = files.iter().map(|f| f.size_bytes).collect();
            self.workdir = Some(workdir);
            self.kept = files;
        }
        Ok(())
    }

    fn run(&mut self, ctx: &Context) -> Result<(), Error> {
        let mut engine = engine::make(&self.plan)?;

        if self.plan.phase.writes() {
            self.workdir = Some(WorkDir::create(&self.target)?);
        }
        let mut kept = Vec::new();
        for pass in 1..=self.plan.repeat {
            let files = if self.plan.phase.writes() {
                self.write_pass(ctx, engine.as_mut(), pass)?
            } else {
                self.kept.clone()
            };
            if self.plan.phase.reads() {
                self.read_pass(ctx, engine.as_mut(), &files, pass)?;
            }
            if self.plan.phase.writes() && !self.plan.keep {
                let workdir = self.workdir.as_mut().expect("the work folder exists");
                for file in &files {
                    workdir.remove_file(&workdir.path().join(&file.name))?;
                }
            }
            kept.extend(files);
        }
        if self.plan.keep
            && self.plan.phase.writes()
            && let Some(workdir) = self.workdir.as_mut()
        {
            workdir.write_manifest(&kept)?;
            workdir.keep();
        }
        Ok(())
    }

    fn cleanup(&mut self) -> Result<(), Error> {
        match self.workdir.as_mut() {
            Some(workdir) => workdir.remove_all(),
            None => Ok(()),
        }
    }
}

/// How ratelab summarises, judges and shows stored disk workloads.
pub struct DiskKind;

impl Kind for DiskKind {
    fn name(&self) -> &'static str {
        "disk"
    }

    fn summarize(&self, record: &WorkloadRecord) -> Value {
        analysis::disk::summarize(&items_of(record), &read_modes_of(record))
    }

    fn verdicts(&self, workload: usize, record: &WorkloadRecord) -> Vec<Verdict> {
        analysis::disk::verdicts(workload, record, &items_of(record))
    }

    fn tables(&self, record: &WorkloadRecord) -> Vec<crate::report::Table> {
        present::tables(record, &items_of(record))
    }
}

/// The stored items of a disk workload, typed; items that do not parse are skipped.
fn items_of(record: &WorkloadRecord) -> Vec<DiskItem> {
    record
        .items
        .iter()
        .filter_map(|v| serde_json::from_value(v.clone()).ok())
        .collect()
}

/// The read modes a stored plan asked for, in order.
fn read_modes_of(record: &WorkloadRecord) -> Vec<ReadMode> {
    record
        .params
        .get("read_modes")
        .and_then(|v| serde_json::from_value(v.clone()).ok())
        .unwrap_or_default()
}
