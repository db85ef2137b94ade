//! A series run: each pass writes the sizes in a new random order, then reads them back
//! in each read mode; and the single-file steps a sustained run shares with it.

use std::time::Instant;

use super::plan::{DIRECT_ALIGN, ReadMode};
use super::{DiskWorkload, series};
use crate::error::Error;
use crate::storage::engine::{Engine, Transfer, WriteJob};
use crate::storage::item::{DiskItem, Op};
use crate::storage::layers::{read_below, read_below_fraction};
use crate::storage::read::read_one;
use crate::storage::workdir::{self, KeptFile, WorkDir};
use crate::vocab::units::format_size;
use crate::workload::Context;

/// How one file is written.
pub(super) struct WriteSpec<'a> {
    /// Its name in the work folder.
    pub name: &'a str,
    /// Bytes to write.
    pub size: u64,
    /// Create it (true) or write over an existing one.
    pub create: bool,
    /// Stop issuing writes then (sustained runs).
    pub until: Option<Instant>,
}

impl DiskWorkload {
    /// Every pass of the series, then `--keep` or removal of the files.
    pub(super) fn run_series(
        &mut self,
        ctx: &Context,
        engine: &mut dyn Engine,
    ) -> Result<(), Error> {
        let mut kept = Vec::new();
        for pass in 1..=self.plan.repeat {
            let files = self.one_pass(ctx, engine, pass)?;
            if self.plan.phase.writes() && !self.plan.keep {
                self.remove_files(&files)?;
            }
            kept.extend(files);
        }
        if self.plan.keep && self.plan.phase.writes() {
            self.keep(&kept)?;
        }
        Ok(())
    }

    /// Writes each file of the pass again over itself, in a new random order.
    fn rewrite_pass(
        &mut self,
        ctx: &Context,
        engine: &mut dyn Engine,
        files: &[KeptFile],
        pass: u32,
    ) -> Result<(), Error> {
        let stage = self.plan.read_modes.len() as u32 + 1;
        for kept in &series::shuffled(files, self.plan.seed, pass, stage) {
            ctx.sink.status(format!(
                "pass {pass}/{}: rewrite {}",
                self.plan.repeat,
                format_size(kept.size_bytes)
            ));
            let spec = WriteSpec {
                name: &kept.name,
                size: kept.size_bytes,
                create: false,
                until: None,
            };
            let item = DiskItem {
                op: Op::Rewrite,
                ..self.write_file(ctx, engine, &spec, pass)?
            };
            ctx.sink.item(&item);
        }
        ctx.sink.stage_done(format!("pass {pass} rewrite"));
        Ok(())
    }

    /// Pass `pass` of the series: its writes, reads and rewrites; returns the files it
    /// leaves in the work folder.
    pub(super) fn one_pass(
        &mut self,
        ctx: &Context,
        engine: &mut dyn Engine,
        pass: u32,
    ) -> Result<Vec<KeptFile>, Error> {
        let files = if self.plan.phase.writes() {
            self.write_pass(ctx, engine, pass)?
        } else {
            self.kept.clone()
        };
        if self.plan.phase.reads() {
            self.read_pass(ctx, engine, &files, pass)?;
        }
        if self.plan.rewrite {
            self.rewrite_pass(ctx, engine, &files, pass)?;
        }
        Ok(files)
    }

    /// Removes files a pass left in the work folder.
    pub(super) fn remove_files(&mut self, files: &[KeptFile]) -> Result<(), Error> {
        let workdir = self.workdir();
        for file in files {
            workdir.remove_file(&workdir.path().join(&file.name))?;
        }
        Ok(())
    }

    /// Leaves `files` in the work folder with a manifest for a later `--phase read`.
    pub(super) fn keep(&mut self, files: &[KeptFile]) -> Result<(), Error> {
        let workdir = self.workdir();
        workdir.write_manifest(files)?;
        workdir.keep();
        Ok(())
    }

    fn write_pass(
        &mut self,
        ctx: &Context,
        engine: &mut dyn Engine,
        pass: u32,
    ) -> Result<Vec<KeptFile>, Error> {
        let order = series::shuffled(&self.plan.sizes_bytes, self.plan.seed, pass, 0);
        let mut written = Vec::with_capacity(order.len());
        for (index, &size) in order.iter().enumerate() {
            let name = format!("p{pass}-{:03}-{size}.dat", index + 1);
            ctx.sink.status(format!(
                "pass {pass}/{}: write {}",
                self.plan.repeat,
                format_size(size)
            ));
            let spec = WriteSpec {
                name: &name,
                size,
                create: true,
                until: None,
            };
            let item = self.write_file(ctx, engine, &spec, pass)?;
            ctx.sink.item(&item);
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
        for (stage, &mode) in self.plan.read_modes.clone().iter().enumerate() {
            let order = series::shuffled(files, self.plan.seed, pass, stage as u32 + 1);
            for kept in &order {
                ctx.sink.status(format!(
                    "pass {pass}/{}: read {} {}",
                    self.plan.repeat,
                    mode.as_str(),
                    format_size(kept.size_bytes)
                ));
                let item = self.read_file(ctx, engine, kept, mode, pass, None)?;
                ctx.sink.item(&item);
            }
            ctx.sink
                .stage_done(format!("pass {pass} read {}", mode.as_str()));
        }
        Ok(())
    }

    /// Writes one file (the part O_DIRECT cannot cover goes through a buffered handle)
    /// and returns its item, flagged.
    pub(super) fn write_file(
        &mut self,
        ctx: &Context,
        engine: &mut dyn Engine,
        spec: &WriteSpec,
        pass: u32,
    ) -> Result<DiskItem, Error> {
        let (direct, sync) = (self.plan.direct_writes, self.plan.sync);
        let transfer = write_one(self.workdir(), ctx, engine, spec, direct, sync)?;
        let item = DiskItem {
            direct,
            size_bytes: spec.size,
            ..DiskItem::timed(
                Op::Write,
                self.plan.sync.as_str(),
                transfer,
                pass,
                spec.name,
            )
        };
        Ok(super::flagged(item, self.limit().0))
    }

    /// Puts one file in the cache state `mode` asks for, proves it, times its read and
    /// returns its item, flagged.
    pub(super) fn read_file(
        &mut self,
        ctx: &Context,
        engine: &mut dyn Engine,
        kept: &KeptFile,
        mode: ReadMode,
        pass: u32,
        until: Option<Instant>,
    ) -> Result<DiskItem, Error> {
        let path = self.workdir().path().join(&kept.name);
        let layers = self.plan.layers.clone();
        let below_before = read_below(&layers);
        let (transfer, fraction) = read_one(
            ctx.controls(),
            engine,
            &path,
            kept.size_bytes,
            mode,
            until,
            Some(&layers),
        )?;
        let read_below_fraction = read_below_fraction(below_before, &layers, kept.size_bytes);
        let item = DiskItem {
            cached_fraction_before: Some(fraction.file),
            layers: fraction.layers,
            read_below_fraction,
            direct: mode == ReadMode::Direct,
            size_bytes: kept.size_bytes,
            ..DiskItem::timed(Op::Read, mode.as_str(), transfer, pass, &kept.name)
        };
        Ok(super::flagged(item, self.limit().0))
    }
}

/// Opens, writes and closes one file; open and close stay outside the timed span.
pub(super) fn write_one(
    workdir: &mut WorkDir,
    ctx: &Context,
    engine: &mut dyn Engine,
    spec: &WriteSpec,
    direct: bool,
    sync: super::SyncMode,
) -> Result<Transfer, Error> {
    let (path, file) = if spec.create {
        workdir.create_file(spec.name, direct)?
    } else {
        let path = workdir.path().join(spec.name);
        let file = workdir::open_for_overwrite(&path, direct)?;
        (path, file)
    };
    let tail = if direct && !spec.size.is_multiple_of(DIRECT_ALIGN as u64) {
        Some(workdir::open_for_tail(&path)?)
    } else {
        None
    };
    let job = WriteJob {
        file: &file,
        direct,
        tail_file: tail.as_ref(),
        path: &path,
        size: spec.size,
        sync,
        progress: ctx.sink.progress(),
        cancel: &ctx.cancel,
        until: spec.until,
    };
    engine.write(&job)
}
