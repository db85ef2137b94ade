//! Reading a folder as it is: every regular file of at least `--min-size`, uncached
//! (direct, or evicted first), each an item; summarised by size band. Nothing is
//! written. Files that cannot be read are warnings, not failures.

mod kind;
mod view;

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use kind::ReaddirKind;

use crate::error::Error;
use crate::platform::{self, StorageChain};
use crate::storage::engine::{self, Engine};
use crate::storage::item::{DiskItem, Op};
use crate::storage::read::{ReadMode, read_one};
use crate::workload::{Context, Kind, Workload};

/// What `readdir` was asked to do.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReaddirPlan {
    /// The folder read.
    pub folder: PathBuf,
    /// Whether subfolders are read too.
    pub recursive: bool,
    /// Smallest file read.
    pub min_size_bytes: u64,
    /// `direct` or `flushed`.
    pub read_mode: ReadMode,
    /// Bytes per read call.
    pub block_size_bytes: usize,
}

/// What the platform and the walk said of the folder, as stored.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ReaddirContext {
    /// The folder's storage down to its link; null if not probed.
    #[serde(default)]
    pub chain: Option<StorageChain>,
    /// The link's limit; null when unknown.
    #[serde(default)]
    pub max_bytes_per_sec: Option<f64>,
    /// Files found to read.
    #[serde(default)]
    pub files_found: usize,
    /// Files left out as smaller than `--min-size`.
    #[serde(default)]
    pub skipped_too_small: u64,
    /// Entries left out as not regular files (links, devices, sockets).
    #[serde(default)]
    pub skipped_not_regular: u64,
    /// Subfolders left out as on another filesystem.
    #[serde(default)]
    pub skipped_other_filesystems: u64,
}

/// One file found to read.
#[derive(Debug, Clone, PartialEq)]
struct Found {
    path: PathBuf,
    size: u64,
}

/// What a walk of the folder found.
#[derive(Debug, Default)]
struct Walk {
    files: Vec<Found>,
    too_small: u64,
    not_regular: u64,
    other_filesystems: u64,
    problems: Vec<String>,
}

/// The readdir workload.
pub struct ReaddirWorkload {
    plan: ReaddirPlan,
    chain: Option<StorageChain>,
    walk: Walk,
    engine: Option<Box<dyn Engine>>,
}

impl ReaddirWorkload {
    /// A workload for `plan`; the folder is walked in `prepare`.
    pub fn new(plan: ReaddirPlan) -> ReaddirWorkload {
        ReaddirWorkload {
            plan,
            chain: None,
            walk: Walk::default(),
            engine: None,
        }
    }
}

/// Lists the files to read under `folder`, in path order; never follows symlinks and,
/// like `find -xdev`, never leaves the filesystem of `device`.
fn walk(folder: &Path, device: u64, recursive: bool, min_size: u64, into: &mut Walk) {
    let entries = match std::fs::read_dir(folder) {
        Ok(entries) => entries,
        Err(e) => {
            into.problems
                .push(format!("cannot list {}: {e}", folder.display()));
            return;
        }
    };
    let mut entries: Vec<_> = entries.filter_map(Result::ok).collect();
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let path = entry.path();
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            into.problems
                .push(format!("cannot inspect {}", path.display()));
            continue;
        };
        if meta.is_dir() {
            if recursive && std::os::unix::fs::MetadataExt::dev(&meta) != device {
                into.other_filesystems += 1;
            } else if recursive {
                walk(&path, device, recursive, min_size, into);
            }
        } else if !meta.is_file() {
            into.not_regular += 1;
        } else if meta.len() < min_size {
            into.too_small += 1;
        } else {
            into.files.push(Found {
                path,
                size: meta.len(),
            });
        }
    }
}

impl Workload for ReaddirWorkload {
    fn kind(&self) -> &'static str {
        ReaddirKind::NAME
    }

    fn target(&self) -> String {
        self.plan.folder.display().to_string()
    }

    fn touches(&self) -> crate::workload::Touches {
        crate::workload::Touches {
            paths: vec![self.plan.folder.clone()],
            ..Default::default()
        }
    }

    fn params(&self) -> Value {
        serde_json::to_value(&self.plan).expect("plans serialise")
    }

    fn context(&self) -> Value {
        serde_json::to_value(ReaddirContext {
            chain: self.chain.clone(),
            max_bytes_per_sec: self.chain.as_ref().and_then(|c| c.max_bytes_per_sec),
            files_found: self.walk.files.len(),
            skipped_too_small: self.walk.too_small,
            skipped_not_regular: self.walk.not_regular,
            skipped_other_filesystems: self.walk.other_filesystems,
        })
        .expect("contexts serialise")
    }

    fn planned_bytes(&self) -> u64 {
        self.walk.files.iter().map(|f| f.size).sum()
    }

    fn prepare(&mut self) -> Result<(), Error> {
        let meta = std::fs::metadata(&self.plan.folder).map_err(|e| Error::Target {
            path: self.plan.folder.clone(),
            reason: e.to_string().to_lowercase(),
        })?;
        if !meta.is_dir() {
            return Err(Error::Target {
                path: self.plan.folder.clone(),
                reason: "not a directory".into(),
            });
        }
        self.plan.folder = std::fs::canonicalize(&self.plan.folder)
            .map_err(|e| Error::io("resolve", &self.plan.folder, e))?;
        self.chain = platform::probe_path(&self.plan.folder).ok();
        let device = std::os::unix::fs::MetadataExt::dev(&meta);
        walk(
            &self.plan.folder,
            device,
            self.plan.recursive,
            self.plan.min_size_bytes,
            &mut self.walk,
        );
        Ok(())
    }

    fn setup(&mut self, ctx: &Context) -> Result<(), Error> {
        for problem in self.walk.problems.drain(..) {
            ctx.sink.warning(problem);
        }
        self.engine = Some(engine::sync_engine(self.plan.block_size_bytes)?);
        Ok(())
    }

    fn run(&mut self, ctx: &Context) -> Result<(), Error> {
        let engine = self.engine.as_mut().expect("the engine is made in setup");
        let limit = self.chain.as_ref().and_then(|c| c.max_bytes_per_sec);
        for (index, found) in self.walk.files.iter().enumerate() {
            if ctx.cancel.is_set() {
                return Err(Error::Interrupted);
            }
            let name = found
                .path
                .strip_prefix(&self.plan.folder)
                .unwrap_or(&found.path);
            ctx.sink.status(format!(
                "read {} of {}: {}",
                index + 1,
                self.walk.files.len(),
                name.display()
            ));
            match read_file(ctx, engine.as_mut(), found, self.plan.read_mode) {
                Ok((item_mode, transfer, fraction)) => {
                    let item = DiskItem {
                        cached_fraction_before: Some(fraction),
                        direct: item_mode == ReadMode::Direct,
                        size_bytes: found.size,
                        ..DiskItem::timed(
                            Op::Read,
                            item_mode.as_str(),
                            transfer,
                            1,
                            &name.display().to_string(),
                        )
                    };
                    ctx.sink.item(&crate::storage::rates::flagged(item, limit));
                }
                Err(Error::Interrupted) => return Err(Error::Interrupted),
                Err(e) => ctx.sink.warning(format!("{:#}", anyhow::Error::new(e))),
            }
        }
        ctx.sink.stage_done("read");
        Ok(())
    }
}

/// Reads one file uncached: direct, or, where the filesystem refuses O_DIRECT, evicted
/// first and read through the cache. Says which mode it used.
fn read_file(
    ctx: &Context,
    engine: &mut dyn Engine,
    found: &Found,
    mode: ReadMode,
) -> Result<(ReadMode, engine::Transfer, f64), Error> {
    match read_one(
        ctx.controls(),
        engine,
        &found.path,
        found.size,
        mode,
        None,
        None,
    ) {
        // Refused at open, before any byte was read: the folder's filesystem does not
        // take O_DIRECT.
        Err(Error::Unsupported(_)) if mode == ReadMode::Direct => {
            let (transfer, fraction) = read_one(
                ctx.controls(),
                engine,
                &found.path,
                found.size,
                ReadMode::Flushed,
                None,
                None,
            )?;
            Ok((ReadMode::Flushed, transfer, fraction.file))
        }
        result => result.map(|(transfer, fraction)| (mode, transfer, fraction.file)),
    }
}
