//! `ratelab task compress FILE`: a real task, timed as a whole and step by step at
//! each thread count, next to what stored disk runs measured on the same storage.

use std::path::{Path, PathBuf};

use clap::{Args, Subcommand};

use super::MeasureArgs;
use super::values::{CountList, parse_count_list, parse_size};
use crate::db::RunQuery;
use crate::document::RunStatus;
use crate::exit::{Exit, UsageError};
use crate::platform::cores;
use crate::run::Schedule;
use crate::workload::disk::{DiskKind, streaming_rate};
use crate::workload::task::{
    Codec, Direction, DiskRead, DiskRuns, DiskWrite, TaskPlan, TaskWorkload, folder_of,
};
use crate::workload::{At, Kind, Stored};

/// Compression threads allowed per online CPU.
const THREADS_PER_CPU: usize = 4;
/// Stored runs looked through for disk figures of the task's storage.
const DISK_RUNS_LOOKED_AT: usize = 30;

/// Options of `ratelab task`.
#[derive(Debug, Args)]
pub struct TaskArgs {
    /// The task.
    #[command(subcommand)]
    pub task: TaskCommand,
}

/// The tasks ratelab times.
#[derive(Debug, Subcommand)]
pub enum TaskCommand {
    /// Compress a file at 1..N threads: the whole task, and read, compress and write alone.
    Compress(CompressArgs),
}

/// Options of `ratelab task compress`.
#[derive(Debug, Args)]
#[command(
    after_long_help = "For each thread count, times four things: reading FILE \
uncached (O_DIRECT, or evicted first where the filesystem refuses it), compressing it in \
memory, writing the compressed bytes to a new file in DIR with fsync, and the whole task \
(read, compress and write at once, as `zstd -T n` does: a reader and a writer thread \
beside the codec's). Then, unless --no-what-if, the whole task again with each step made \
free in turn (FILE already in memory, bytes passed on without the codec, the output \
dropped unsynced): the step whose freedom speeds the task up most is the rate-limiting \
step, and how much is measured, not modelled. Steps are compared in the task's unit, \
original bytes per second. Every output is \
decoded and compared with FILE by SHA-256. Outputs go in a work folder ratelab makes in DIR \
and removes after."
)]
pub struct CompressArgs {
    /// The file to compress; with --make-file, the test file to make (it must not exist).
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
    /// Compression thread counts: 1..4 or 1,2,4 [default: 1..(online CPUs)].
    #[arg(long, value_name = "RANGE", value_parser = parse_count_list)]
    pub threads: Option<CountList>,
    /// The codec, through its own library.
    #[arg(long, value_enum, default_value_t = Codec::Zstd)]
    pub codec: Codec,
    /// Compression level [default: the codec's tool default: zstd 3, lz4 1, xz 6].
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    pub level: Option<i32>,
    /// Folder the outputs are written in [default: FILE's folder].
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Time decompression instead (of FILE compressed first, untimed); one thread.
    #[arg(long)]
    pub decompress: bool,
    /// Make FILE first: SIZE bytes of mixed text-like and random blocks, removed after.
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    pub make_file: Option<u64>,
    /// Keep the file --make-file made.
    #[arg(long, requires = "make_file")]
    pub keep: bool,
    /// Run the whole task again with each step made free in turn (the input in memory,
    /// no codec, the output unsynced), measuring what each step costs the task [default].
    #[arg(long, overrides_with = "no_what_if")]
    pub what_if: bool,
    /// Skip the what-if: the limiting step and its gain are then modelled from the
    /// steps alone.
    #[arg(long, overrides_with = "what_if")]
    pub no_what_if: bool,
    /// Output and storage options.
    #[command(flatten)]
    pub output: MeasureArgs,
}

/// Runs `ratelab task`.
pub fn run(args: TaskArgs) -> anyhow::Result<Exit> {
    match args.task {
        TaskCommand::Compress(args) => compress(args),
    }
}

fn compress(args: CompressArgs) -> anyhow::Result<Exit> {
    let codec = args.codec;
    let level = args.level.unwrap_or(codec.default_level());
    if !codec.levels().contains(&level) {
        return Err(UsageError(format!(
            "--level {level} is out of range for {} ({} to {})",
            codec.as_str(),
            codec.levels().start(),
            codec.levels().end()
        ))
        .into());
    }
    let threads = match (&args.threads, args.decompress) {
        (Some(list), true) if list.0 != [1] => {
            return Err(UsageError(
                "--threads with --decompress: decompression runs on one thread (the zstd, lz4 and xz decoders here have no threads)".into(),
            )
            .into());
        }
        (Some(list), _) => list.0.clone(),
        (None, true) => vec![1],
        (None, false) => (1..=cores::online_cpus().len().max(1)).collect(),
    };
    // More threads than that only measure the codec's memory and queueing (xz at level
    // 6 takes over 100 MiB per thread) and keep Ctrl-C waiting on busy workers.
    let most = THREADS_PER_CPU * cores::online_cpus().len().max(1);
    if let Some(bad) = threads.iter().find(|&&n| n == 0 || n > most) {
        return Err(UsageError(format!(
            "--threads {bad} is out of range (1 to {most}: {THREADS_PER_CPU} per online CPU)"
        ))
        .into());
    }
    if args.make_file == Some(0) {
        return Err(UsageError(
            "--make-file 0 makes an empty file: give a size such as 256M".into(),
        )
        .into());
    }
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| folder_of(&args.file).to_path_buf());
    // Decompressing reads the compressed copy ratelab makes in the output folder.
    let read_folder = if args.decompress {
        Some(out.as_path())
    } else {
        args.file.parent()
    };
    let disk_runs = disk_runs(&args.output, read_folder, &out);
    let plan = TaskPlan {
        file: Some(args.file),
        make_file_bytes: args.make_file,
        out,
        codec,
        level,
        threads,
        direction: if args.decompress {
            Direction::Decompress
        } else {
            Direction::Compress
        },
        keep: args.keep,
        seed: rand::random(),
        what_if: !args.no_what_if,
        layers: Vec::new(),
    };
    super::measure(
        "task",
        &args.output,
        vec![Box::new(TaskWorkload::new(plan, disk_runs))],
        Schedule::together(1, &[]),
    )
}

/// What the newest stored disk runs of the folders a task reads and writes measured,
/// each part absent when no run covers it; `None` when no run covers either.
pub fn disk_runs(output: &MeasureArgs, read_folder: Option<&Path>, out: &Path) -> Option<DiskRuns> {
    let store = output.history()?;
    let read_folder = read_folder
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let mut found = DiskRuns::default();
    // The newest complete runs that hold a storage series, whatever verb made them.
    let query = RunQuery {
        kind: Some(DiskKind::NAME.into()),
        status: Some(RunStatus::Complete),
        limit: Some(DISK_RUNS_LOOKED_AT),
        ..RunQuery::default()
    };
    let runs = store.find_runs(&query).unwrap_or_default();
    for run in &runs {
        let Ok(doc) = store.load_run(run.run_id) else {
            continue;
        };
        for index in 0..doc.workloads.len() {
            if doc.workloads[index].kind != DiskKind::NAME {
                continue;
            }
            // A series whose items no longer read is not set beside the task.
            let Ok(series) = Stored::<DiskKind>::decode(At::new(&doc, index)) else {
                continue;
            };
            let target = &series.record.target;
            let covers = |folder: &Path| crate::platform::measured_by(folder, Path::new(target));
            if found.read.is_none()
                && covers(read_folder)
                && let Some(rate) = streaming_rate(&series.items, "read")
            {
                found.read = Some(DiskRead {
                    run_id: Some(run.run_id),
                    target: target.clone(),
                    read_bytes_per_sec: rate,
                });
            }
            if found.write.is_none()
                && covers(out)
                && let Some(rate) = streaming_rate(&series.items, "write")
            {
                found.write = Some(DiskWrite {
                    run_id: Some(run.run_id),
                    target: target.clone(),
                    write_bytes_per_sec: rate,
                });
            }
        }
    }
    (!found.is_empty()).then_some(found)
}
