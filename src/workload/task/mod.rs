//! Real tasks split into their steps: compressing a file (or decompressing it) at each
//! thread count, timed as a whole (read uncached, compress, write synced) and step by
//! step (read alone, compress in memory, write alone), so that the step that sets the
//! task's pace has a name. Every output is decoded and compared with the original.

mod at_threads;
mod brief;
mod charts;
mod codec;
mod encoder;
mod frames;
mod item;
mod kind;
mod pipeline;
mod steps;
mod stored;
mod summary;
mod test_file;
mod verdicts;
mod view;
mod what_if;

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use codec::Codec;
pub use item::{Step, TaskItem};
pub use kind::TaskKind;
pub use steps::Direction;
pub use stored::{DiskRate, DiskRead, DiskRuns, DiskWrite, TaskContext};
pub use summary::{StepRate, TaskSummary, ThreadsSummary};

use self::steps::{Transform, Uncached};
use crate::error::Error;
use crate::platform::{self, StorageChain};
use crate::storage::buffer::AlignedBuf;
use crate::storage::workdir::{self, WorkDir};
use crate::vocab::units::format_bytes;
use crate::workload::{Context, InPlace, Kind, RoundBytes, Workload};

/// Share of the available memory the in-memory steps may hold, input and output
/// together (each gets half).
const MEMORY_SHARE: u64 = 4;
/// What a task tells the user to change when it does not fit.
const SPACE_HINT: (&str, &str) = (
    TaskKind::NAME,
    "use a smaller --make-file, or --out on a filesystem with more room",
);

/// What `ratelab task compress` was asked to do.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskPlan {
    /// The file to compress; `None` makes one in the work folder (with `make_file_bytes`).
    pub file: Option<PathBuf>,
    /// Size of the test file to make first (`--make-file`), removed after the run.
    pub make_file_bytes: Option<u64>,
    /// The folder outputs are written in (inside a work folder ratelab makes there).
    pub out: PathBuf,
    /// The codec.
    pub codec: Codec,
    /// Its level.
    pub level: i32,
    /// Compression thread counts, each run in turn.
    pub threads: Vec<usize>,
    /// Compress, or decompress what ratelab compressed first.
    pub direction: Direction,
    /// Keep the made file (`--make-file`) after the run.
    pub keep: bool,
    /// Seed of the made file.
    pub seed: u64,
    /// Run the whole task again with each step made free in turn (`--what-if`).
    #[serde(default)]
    pub what_if: bool,
    /// Files of the host below the folders whose caches are evicted and measured before
    /// each uncached read (a disk image's); none for a plain folder.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub layers: Vec<crate::storage::layers::Layer>,
}

/// The task workload.
pub struct TaskWorkload {
    plan: TaskPlan,
    /// What stored disk runs say of the source's and the output's storage.
    disk_runs: Option<DiskRuns>,
    chains: [Option<StorageChain>; 2],
    workdir: Option<WorkDir>,
    /// The original file and its size.
    source: Option<(PathBuf, u64)>,
    /// Whether ratelab made the source (and so may sync and evict it hard).
    made: bool,
    /// The file the read steps read: the source, or its compressed copy.
    input: Option<(PathBuf, u64)>,
    digest: [u8; 32],
    /// The input's first bytes (all of it, memory allowing), for the in-memory step.
    memory: Option<(AlignedBuf, usize)>,
    /// The in-memory step's output buffer, reused at every thread count.
    output: Option<Vec<u8>>,
}

impl TaskWorkload {
    /// A workload for `plan`; `disk_runs` is what stored disk runs measured on the
    /// source's and output's storage (`None` when none did).
    pub fn new(plan: TaskPlan, disk_runs: Option<DiskRuns>) -> TaskWorkload {
        TaskWorkload {
            plan,
            disk_runs,
            chains: [None, None],
            workdir: None,
            source: None,
            made: false,
            input: None,
            digest: [0; 32],
            memory: None,
            output: None,
        }
    }

    /// The codec settings of the plan at `threads`.
    fn how(&self, threads: usize) -> Transform {
        Transform {
            direction: self.plan.direction,
            codec: self.plan.codec,
            level: self.plan.level,
            threads,
        }
    }

    /// The folder the read steps read from: FILE's, or (decompressing) the output
    /// folder, where the compressed copy is made.
    fn read_folder(&self) -> Option<PathBuf> {
        match (self.plan.direction, &self.plan.file) {
            (Direction::Compress, Some(file)) => file.parent().map(Path::to_path_buf),
            // A file made in the work folder is on the output folder's storage.
            _ => Some(self.plan.out.clone()),
        }
    }

    /// Makes the test file of `--make-file` at `path`.
    fn make_source(&mut self, ctx: &Context, path: &Path, size: u64) -> Result<(), Error> {
        ctx.sink
            .status(format!("make a {} test file", format_bytes(size)));
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(path)
            .map_err(|e| Error::io("create", path, e))?;
        self.made = true;
        test_file::make(&mut file, path, size, self.plan.seed, &ctx.cancel)
    }

    /// Checks the output folder, saying in its error which flag chose it.
    fn check_out(&mut self) -> Result<(), Error> {
        let by_default = self
            .plan
            .file
            .as_ref()
            .is_some_and(|file| folder_of(file) == self.plan.out);
        self.plan.out = workdir::check_target(&self.plan.out).map_err(|e| match e {
            Error::Target { path, reason } if by_default => Error::Target {
                path,
                reason: format!(
                    "{reason} (the file's folder, where the outputs go: give --out DIR for another)"
                ),
            },
            Error::Target { path, reason } => Error::Target {
                path,
                reason: format!("{reason} (the --out folder)"),
            },
            e => e,
        })?;
        Ok(())
    }

    /// Settles the source's full path and size: FILE's (`input_size`, checked), or the
    /// one `--make-file` will make, where it can be made.
    fn resolve_source(&mut self, input_size: Option<u64>) -> Result<u64, Error> {
        match (&self.plan.file, self.plan.make_file_bytes) {
            (Some(file), Some(size)) => {
                let file = file.clone();
                self.place_made_file(&file, size)?;
                Ok(size)
            }
            (Some(file), None) => {
                let size = input_size.expect("checked above");
                self.plan.file =
                    Some(std::fs::canonicalize(file).map_err(|e| Error::io("resolve", file, e))?);
                Ok(size)
            }
            (None, Some(size)) => Ok(size),
            (None, None) => Err(Error::Input(
                "a task needs a file to compress, or --make-file SIZE".into(),
            )),
        }
    }

    /// Checks that `--make-file` can make `file` of `size` bytes, a new file in a
    /// folder with room for it, and keeps its full path.
    fn place_made_file(&mut self, file: &Path, size: u64) -> Result<(), Error> {
        if file.symlink_metadata().is_ok() {
            return Err(Error::Target {
                path: file.to_path_buf(),
                reason: "it exists, and --make-file makes a new file: give a path that does not exist, or drop --make-file to compress it".into(),
            });
        }
        let parent = workdir::check_target(folder_of(file))?;
        if !platform::same_filesystem(&parent, &self.plan.out) {
            workdir::check_space_for(&parent, size, 1, &SPACE_HINT)?;
        }
        self.plan.file = Some(parent.join(file.file_name().unwrap_or_default()));
        Ok(())
    }

    /// Checks the room a task on `size` bytes needs: space on the output's filesystem,
    /// and, decompressing, memory for the original and its compressed copy.
    fn check_room(&self, size: u64) -> Result<(), Error> {
        // On the output's filesystem: one output at a time (the write step's, then the
        // whole task's), at most the size and a bit; the compressed copy --decompress
        // reads; the made file, when it is made there.
        let made_there = self.plan.make_file_bytes.is_some()
            && self.plan.file.as_ref().is_none_or(|f| {
                f.parent()
                    .is_some_and(|p| platform::same_filesystem(p, &self.plan.out))
            });
        let decompress = self.plan.direction == Direction::Decompress;
        let one_output = size + size / 64 + (1 << 20);
        let needed = one_output * (1 + decompress as u64) + made_there as u64 * size;
        workdir::check_space_for(
            &self.plan.out,
            needed,
            2 + decompress as u64 + made_there as u64,
            &SPACE_HINT,
        )?;
        if decompress && size > memory_budget() {
            return Err(Error::Unsupported(format!(
                "--decompress holds the original and its compressed copy in memory: {} is more than an {}th of the available memory ({})",
                format_bytes(size),
                2 * MEMORY_SHARE,
                format_bytes(available_memory())
            )));
        }
        Ok(())
    }
}

/// The folder `file` is in: where its outputs go without --out, and where --make-file
/// makes it (`.` for a bare name).
pub fn folder_of(file: &Path) -> &Path {
    match file.parent() {
        Some(folder) if !folder.as_os_str().is_empty() => folder,
        _ => Path::new("."),
    }
}

/// Refuses a source that is not a readable, non-empty regular file; gives its size.
fn source_size(path: &Path) -> Result<u64, Error> {
    let refuse = |reason: String| Error::Target {
        path: path.to_path_buf(),
        reason,
    };
    let why = |e: std::io::Error| match e.kind() {
        std::io::ErrorKind::NotFound => "no such file or directory".to_string(),
        std::io::ErrorKind::PermissionDenied => "permission denied".to_string(),
        _ => e.to_string().to_lowercase(),
    };
    let meta = std::fs::metadata(path).map_err(|e| refuse(why(e)))?;
    if !meta.is_file() {
        return Err(refuse("not a regular file".into()));
    }
    if meta.len() == 0 {
        return Err(refuse(
            "the file is empty: give a file with data, or make one with --make-file SIZE".into(),
        ));
    }
    std::fs::File::open(path).map_err(|e| refuse(why(e)))?;
    Ok(meta.len())
}

impl InPlace for TaskWorkload {
    /// The input it makes, its output and the write step's copy.
    fn held_bytes(&self) -> u64 {
        self.plan.make_file_bytes.map_or(0, |bytes| bytes * 3)
    }

    /// The whole task again: every round measures it afresh.
    fn run_round(&mut self, ctx: &Context, _round: u32) -> Result<RoundBytes, Error> {
        self.run(ctx)?;
        Ok(RoundBytes::default())
    }
}

impl Workload for TaskWorkload {
    fn kind(&self) -> &'static str {
        TaskKind::NAME
    }

    fn target(&self) -> String {
        match &self.plan.file {
            Some(file) => file.display().to_string(),
            None => self.plan.out.display().to_string(),
        }
    }

    fn touches(&self) -> crate::workload::Touches {
        crate::workload::Touches {
            paths: self
                .plan
                .file
                .iter()
                .chain([&self.plan.out])
                .cloned()
                .collect(),
            ..Default::default()
        }
    }

    fn params(&self) -> Value {
        serde_json::to_value(&self.plan).expect("plans serialise")
    }

    fn context(&self) -> Value {
        serde_json::to_value(TaskContext {
            source_bytes: self.source.as_ref().map(|s| s.1),
            made_file: self.made,
            read_folder: self.read_folder(),
            write_folder: Some(self.plan.out.clone()),
            read_chain: self.chains[0].clone(),
            write_chain: self.chains[1].clone(),
            disk_runs: self.disk_runs.clone(),
        })
        .expect("contexts serialise")
    }

    fn planned_bytes(&self) -> u64 {
        let size = self.source.as_ref().map_or(0, |s| s.1);
        // Per thread count: the read, the in-memory step, a write of about a third, the
        // whole task, and the whole task three times more with a step free.
        let what_if = if self.plan.what_if { 3 * size } else { 0 };
        self.plan.threads.len() as u64 * (size * 3 + size / 3 + what_if)
    }

    fn prepare(&mut self) -> Result<(), Error> {
        // The file to read is checked first: an unreadable one is named as itself, not
        // as the folder the outputs would go to.
        let input_size = match (&self.plan.file, self.plan.make_file_bytes) {
            (Some(file), None) => Some(source_size(file)?),
            _ => None,
        };
        self.check_out()?;
        let size = self.resolve_source(input_size)?;
        self.check_room(size)?;
        let file = self.plan.file.clone();
        self.source = Some((file.unwrap_or_default(), size));
        self.chains = [
            self.read_folder()
                .and_then(|f| platform::probe_path(&f).ok()),
            platform::probe_path(&self.plan.out).ok(),
        ];
        Ok(())
    }

    fn setup(&mut self, ctx: &Context) -> Result<(), Error> {
        let mut workdir = WorkDir::create(&self.plan.out)?;
        let (mut source, size) = self.source.clone().expect("set in prepare");
        let result = (|| {
            match (self.plan.file.clone(), self.plan.make_file_bytes) {
                (None, Some(size)) => {
                    source = workdir.path().join("source.dat");
                    workdir.adopt([source.clone()]);
                    let path = source.clone();
                    self.make_source(ctx, &path, size)?;
                }
                (Some(file), Some(size)) => self.make_source(ctx, &file, size)?,
                _ => {}
            }
            self.source = Some((source.clone(), size));
            ctx.sink.status("hash the original".to_string());
            self.digest = steps::file_digest(&source, None, &ctx.cancel)?;
            let input = match self.plan.direction {
                Direction::Compress => (source.clone(), size),
                Direction::Decompress => {
                    ctx.sink
                        .status(format!("compress {} to decompress", source.display()));
                    let how = Transform {
                        direction: Direction::Compress,
                        ..self.how(crate::platform::cores::online_cpus().len().max(1))
                    };
                    // Made as the whole task makes its output: read, compress, sync.
                    let reader = Uncached::open(&source, size, self.made, &self.plan.layers)?;
                    let name = format!("input.{}", how.codec.as_str());
                    let copy = pipeline::run(
                        ctx,
                        pipeline::Input::File(reader),
                        pipeline::Middle::Codec(how),
                        pipeline::Output::File(&mut workdir, &name),
                        Some(size),
                    )?;
                    (copy.output.expect("written to a file"), copy.output_bytes)
                }
            };
            let page = rustix::param::page_size() as u64;
            // A part kept in memory ends on a page, where the read goes on with O_DIRECT.
            let kept = if input.1 <= memory_budget() {
                input.1
            } else {
                (memory_budget() / page * page).max(page)
            } as usize;
            if kept < input.1 as usize {
                ctx.sink.warning(format!(
                    "the in-memory step uses the first {} of {}: memory allows no more",
                    format_bytes(kept as u64),
                    format_bytes(input.1)
                ));
            }
            let mut memory =
                AlignedBuf::new(kept).map_err(|e| Error::io("allocate memory for", &input.0, e))?;
            // Both buffers are touched now, and the output is as large as any codec's
            // output can be, so no step times the kernel's first faults or a realloc.
            for piece in memory.as_mut_slice().chunks_mut(steps::CHUNK) {
                if ctx.cancel.is_set() {
                    return Err(Error::Interrupted);
                }
                piece.fill(1);
            }
            let capacity = match self.plan.direction {
                Direction::Compress => kept + kept / 64 + (1 << 20),
                Direction::Decompress => size as usize,
            };
            let mut output = vec![1u8; capacity];
            output.clear();
            self.output = Some(output);
            self.memory = Some((memory, kept));
            self.input = Some(input);
            Ok(())
        })();
        self.workdir = Some(workdir);
        result
    }

    fn run(&mut self, ctx: &Context) -> Result<(), Error> {
        for threads in self.plan.threads.clone() {
            self.run_threads(ctx, threads)?;
        }
        Ok(())
    }

    fn cleanup(&mut self) -> Result<(), Error> {
        self.memory = None;
        self.output = None;
        let mut result = Ok(());
        if self.made
            && !self.plan.keep
            && let Some(file) = &self.plan.file
            && let Err(e) = std::fs::remove_file(file)
            && e.kind() != std::io::ErrorKind::NotFound
        {
            result = Err(Error::io("remove", file, e));
        }
        if let Some(workdir) = self.workdir.as_mut() {
            result = result.and(workdir.remove_all());
        }
        result
    }
}

/// The memory the kernel could give without swapping; 1 GiB when it does not say.
fn available_memory() -> u64 {
    platform::machine::available_memory_bytes().unwrap_or(1 << 30)
}

/// Bytes of input the in-memory step may hold (its output gets as much again).
fn memory_budget() -> u64 {
    available_memory() / MEMORY_SHARE / 2
}
