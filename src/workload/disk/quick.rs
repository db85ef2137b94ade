//! The destination check backup tools make: one 50 MiB file, then 500 files of 4 KiB
//! written at once by several threads, each timed as a whole, and compared with earlier
//! checks of the same target.

use std::os::unix::fs::OpenOptionsExt;
use std::panic::AssertUnwindSafe;
use std::path::PathBuf;
use std::sync::Barrier;
use std::time::Instant;

use serde_json::Value;

use super::stored::{QuickBaseline, QuickShape};
use super::{DiskKind, DiskPlan, DiskWorkload, Phase, SyncMode, flagged};
use crate::error::Error;
use crate::storage::data::Pattern;
use crate::storage::engine::Transfer;
use crate::storage::item::{DiskItem, Op};
use crate::storage::request::{self, Request};
use crate::storage::workdir;
use crate::workload::{Context, Kind, Workload};

/// The large file: 50 MiB (the check is usually described as 50 MB).
pub const LARGE_BYTES: u64 = 50 << 20;
/// The small files.
pub const SMALL_FILES: u64 = 500;
/// Each small file's size.
pub const SMALL_BYTES: u64 = 4096;
/// Threads writing small files at once.
pub const THREADS: usize = 16;

/// The quick destination check on one target.
pub struct QuickWorkload {
    large: DiskWorkload,
    baseline: Option<QuickBaseline>,
}

impl QuickWorkload {
    /// A check of `target`; `baseline` holds earlier checks' medians for the verdict.
    pub fn new(target: PathBuf, seed: u64, baseline: Option<QuickBaseline>) -> QuickWorkload {
        let plan = DiskPlan {
            phase: Phase::Write,
            ..DiskPlan::new(target, vec![LARGE_BYTES], seed)
        };
        QuickWorkload {
            large: DiskWorkload::new(plan),
            baseline,
        }
    }

    /// Writes the small files from `THREADS` threads at once, each file created, written
    /// and synced; returns the whole span. Every file created is handed to the work
    /// folder for removal, also when a thread fails.
    fn small_files(&mut self, ctx: &Context) -> Result<Transfer, Error> {
        let folder = self.large.workdir().path().to_path_buf();
        // The data is made before the clock starts; the threads start on a barrier.
        let patterns = (0..THREADS)
            .map(|thread| {
                Pattern::new(
                    1,
                    SMALL_BYTES as usize,
                    self.large.plan.seed ^ thread as u64,
                )
            })
            .collect::<std::io::Result<Vec<_>>>()
            .map_err(crate::storage::engine::buffers_error)?;
        let go = Barrier::new(THREADS + 1);
        let (results, elapsed) = std::thread::scope(|scope| {
            let handles: Vec<_> = patterns
                .into_iter()
                .enumerate()
                .map(|(thread, mut data)| {
                    let (folder, go) = (&folder, &go);
                    scope.spawn(move || {
                        let mut created = Vec::new();
                        go.wait();
                        let result = std::panic::catch_unwind(AssertUnwindSafe(|| {
                            write_small(folder, thread, &mut data, ctx, &mut created)
                        }))
                        .unwrap_or_else(|_| {
                            Err(Error::Unsupported(
                                "internal error in a small-file writer".into(),
                            ))
                        });
                        (created, result)
                    })
                })
                .collect();
            go.wait();
            let start = Instant::now();
            let results: Vec<(Vec<PathBuf>, Result<(), Error>)> = handles
                .into_iter()
                .map(|h| {
                    h.join()
                        .unwrap_or_else(|_| (Vec::new(), Err(Error::Interrupted)))
                })
                .collect();
            (results, start.elapsed())
        });
        let mut outcome = Ok(());
        for (created, result) in results {
            self.large.workdir().adopt(created);
            if let Err(e) = result {
                outcome = outcome.and(Err(e));
            }
        }
        outcome.map(|()| Transfer {
            elapsed,
            bytes: SMALL_FILES * SMALL_BYTES,
            data_wait: std::time::Duration::ZERO,
        })
    }
}

/// One thread's share of the small files: every `THREADS`-th of them.
fn write_small(
    folder: &std::path::Path,
    thread: usize,
    data: &mut Pattern,
    ctx: &Context,
    created: &mut Vec<PathBuf>,
) -> Result<(), Error> {
    for index in (thread as u64..SMALL_FILES).step_by(THREADS) {
        if ctx.cancel.is_set() {
            return Err(Error::Interrupted);
        }
        let path = folder.join(format!("small-{index:04}.dat"));
        created.push(path.clone());
        let file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o644)
            .open(&path)
            .map_err(|e| Error::io("create", &path, e))?;
        let block = data.block(0, SMALL_BYTES as usize);
        let write = Request::whole(
            request::Op::Write,
            &file,
            0,
            block.as_mut_ptr(),
            block.len(),
        );
        request::once(&path, &write)?;
        rustix::fs::fsync(&file).map_err(|e| Error::io("sync", &path, e))?;
        ctx.sink.progress().add(SMALL_BYTES);
    }
    Ok(())
}

impl Workload for QuickWorkload {
    fn kind(&self) -> &'static str {
        DiskKind::NAME
    }

    fn target(&self) -> String {
        self.large.target()
    }

    fn touches(&self) -> crate::workload::Touches {
        self.large.touches()
    }

    fn params(&self) -> Value {
        let quick = QuickShape {
            large_bytes: LARGE_BYTES,
            small_files: SMALL_FILES,
            small_bytes: SMALL_BYTES,
            threads: THREADS,
        };
        serde_json::to_value(self.large.stored_params(Some(quick))).expect("params serialise")
    }

    fn context(&self) -> Value {
        serde_json::to_value(self.large.stored_context(self.baseline)).expect("contexts serialise")
    }

    fn planned_bytes(&self) -> u64 {
        LARGE_BYTES + SMALL_FILES * SMALL_BYTES
    }

    fn prepare(&mut self) -> Result<(), Error> {
        self.large.prepare()?;
        workdir::check_space(
            &self.large.target,
            LARGE_BYTES + SMALL_FILES * SMALL_BYTES,
            SMALL_FILES + 1,
        )
    }

    fn setup(&mut self, ctx: &Context) -> Result<(), Error> {
        self.large.setup(ctx)
    }

    fn run(&mut self, ctx: &Context) -> Result<(), Error> {
        ctx.sink.status("write one 50 MiB file");
        self.large.run(ctx)?;
        ctx.sink
            .status(format!("write {SMALL_FILES} files of 4 KiB at once"));
        let transfer = self.small_files(ctx)?;
        let item = DiskItem {
            files: Some(SMALL_FILES),
            size_bytes: SMALL_BYTES,
            ..DiskItem::timed(
                Op::Write,
                SyncMode::Fsync.as_str(),
                transfer,
                1,
                "small-*.dat",
            )
        };
        ctx.sink.item(&flagged(item, self.large.limit().0));
        ctx.sink.stage_done("small files");
        Ok(())
    }

    fn cleanup(&mut self) -> Result<(), Error> {
        self.large.cleanup()
    }
}
