//! `ratelab image TARGET`: what a disk image costs. The storage series (and with
//! --task, the compression task) runs in the host folder and inside each container —
//! raw images on loop devices, qcow2 images at each cluster size — round by round in
//! one run, so every container is compared with its host measured at the same time.

use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::Args;

use super::series::SeriesArgs;
use super::values::{SizeList, parse_size, parse_size_list};
use super::{MeasureArgs, profile};
use crate::error::Error;
use crate::exit::{Exit, UsageError};
use crate::platform::container::{ContainerSpec, Filesystem, Format, Preallocation};
use crate::report::layout::Detail;
use crate::run::{Member, Schedule};
use crate::workload::disk::{DiskPlan, DiskWorkload};
use crate::workload::image::{self, ImagePlan};
use crate::workload::task::{Codec, Direction, TaskPlan, TaskWorkload};
use crate::workload::{InPlace, Workload};

/// The series of an image run: small files, where a container's metadata shows, up to
/// files large enough to stream.
pub const DEFAULT_SIZES: &str = "10K,100K,1M,10M,64M,256M";
/// The task's test file.
const TASK_BYTES: u64 = 128 << 20;

/// Options of `ratelab image`.
#[derive(Debug, Args)]
#[command(
    after_long_help = "Needs root: images are attached with losetup (raw: --direct-io=on) and \
qcow2 through qemu-storage-daemon's FUSE export (Debian package qemu-utils) and a buffered loop \
device, formatted, checked with fsck -n and mounted in a work folder under TARGET. Each round \
makes every container afresh, so its first writes go into fresh space; --rewrite adds writes \
over the files in place. Before every uncached read the file is evicted at every layer (the file \
inside, the FUSE export, the image file) and what each layer still holds is stored with the item. \
On success, error, Ctrl-C or SIGTERM every mount, loop device, daemon and image is removed."
)]
pub struct ImageArgs {
    /// The folder whose storage holds the images; its own series is the baseline.
    #[arg(value_name = "TARGET")]
    pub target: PathBuf,
    /// Containers, comma-separated: raw-sparse, raw-prealloc, qcow2 (one per --cluster-size).
    #[arg(long, value_name = "LIST", value_delimiter = ',', default_value = "raw-sparse,qcow2", value_parser = parse_format)]
    pub format: Vec<Format>,
    /// qcow2 cluster sizes, comma-separated (512 to 2M, powers of two) [default: 64K].
    #[arg(long, value_name = "LIST", value_parser = parse_size_list)]
    pub cluster_size: Option<SizeList>,
    /// qcow2 with subclusters (extended_l2=on; cluster sizes of 16K and more).
    #[arg(long)]
    pub extended_l2: bool,
    /// qcow2 preallocation: off, metadata, falloc or full [default: off].
    #[arg(long, value_name = "MODE", value_parser = parse_preallocation)]
    pub preallocation: Option<Preallocation>,
    /// The filesystem made inside each container: ext4, xfs or btrfs.
    #[arg(long, value_name = "FS", default_value = "ext4", value_parser = parse_fs)]
    pub fs: Filesystem,
    /// Each image's size [default: room for the series and the task, twice over, at least 1G].
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    pub image_size: Option<u64>,
    /// File sizes of the series, comma-separated (K M G = KiB MiB GiB; KB MB GB = 10^3...).
    #[arg(long, value_name = "LIST", default_value = DEFAULT_SIZES, value_parser = parse_size_list)]
    pub sizes: SizeList,
    /// Rounds: each runs the series once in every place, in a rotated order.
    #[arg(long, value_name = "N", default_value_t = 3)]
    pub repeat: u32,
    /// How each file is written and read.
    #[command(flatten)]
    pub series: SeriesArgs,
    /// Also run the compression task (zstd, a 128 MiB file) in every place, every round.
    #[arg(long)]
    pub task: bool,
    /// Write the HTML report here [default: reports/run-ID.html beside the database].
    #[arg(long, value_name = "FILE")]
    pub report: Option<PathBuf>,
    /// Output and storage options.
    #[command(flatten)]
    pub output: MeasureArgs,
}

fn parse_format(text: &str) -> Result<Format, String> {
    text.parse().map_err(|e: Error| e.to_string())
}

fn parse_preallocation(text: &str) -> Result<Preallocation, String> {
    text.parse().map_err(|e: Error| e.to_string())
}

fn parse_fs(text: &str) -> Result<Filesystem, String> {
    text.parse().map_err(|e: Error| e.to_string())
}

impl ImageArgs {
    /// The containers asked for, each once, in the order given.
    fn containers(&self, image_size_bytes: u64) -> Result<Vec<ContainerSpec>, UsageError> {
        if !self.format.contains(&Format::Qcow2) {
            let given = [
                ("--cluster-size", self.cluster_size.is_some()),
                ("--extended-l2", self.extended_l2),
                ("--preallocation", self.preallocation.is_some()),
            ];
            if let Some((flag, _)) = given.iter().find(|(_, given)| *given) {
                return Err(UsageError(format!(
                    "{flag} applies to qcow2 images, and --format has none: add qcow2 to --format"
                )));
            }
        }
        let clusters_given = self
            .cluster_size
            .as_ref()
            .map_or(vec![64 << 10], |l| l.0.clone());
        let mut out: Vec<ContainerSpec> = Vec::new();
        for &format in &self.format {
            let clusters: Vec<Option<u64>> = match format {
                Format::Qcow2 => clusters_given.iter().copied().map(Some).collect(),
                _ => vec![None],
            };
            for cluster_size_bytes in clusters {
                let spec = ContainerSpec {
                    format,
                    cluster_size_bytes,
                    extended_l2: self.extended_l2 && format == Format::Qcow2,
                    preallocation: if format == Format::Qcow2 {
                        self.preallocation.unwrap_or(Preallocation::Off)
                    } else {
                        Preallocation::Off
                    },
                    fs: self.fs,
                    image_size_bytes,
                };
                spec.validate().map_err(|e| UsageError(e.to_string()))?;
                if !out.contains(&spec) {
                    out.push(spec);
                }
            }
        }
        Ok(out)
    }
}

/// Room for what a container holds, twice over, in whole GiB, at least 1 GiB.
fn default_image_size(held: u64) -> u64 {
    (2 * held).max(1 << 30).next_multiple_of(1 << 30)
}

/// The plan of an image run in `target`, its work folder named for this process.
fn plan(
    target: &Path,
    containers: Vec<ContainerSpec>,
    series: DiskPlan,
    task: Option<TaskPlan>,
) -> ImagePlan {
    // Records name their folders before the run: the target as the kernel names it.
    let target = std::fs::canonicalize(target).unwrap_or_else(|_| target.to_path_buf());
    ImagePlan {
        work_folder: target.join(format!("ratelab-image-{}", std::process::id())),
        target,
        containers,
        series: serde_json::to_value(series).expect("plans serialise"),
        task: task.map(|t| serde_json::to_value(t).expect("plans serialise")),
    }
}

/// The most a place holds at once: the series' files, and the task's.
fn held_bytes(series: &DiskPlan, task: Option<&TaskPlan>) -> u64 {
    DiskWorkload::new(series.clone()).held_bytes()
        + task.map_or(0, |t| TaskWorkload::new(t.clone(), None).held_bytes())
}

/// What `profile --images` adds: a raw-sparse and a qcow2 container (64 KiB clusters)
/// at the default sizes, beside `target`, as workloads from index `first` on.
pub(super) fn for_profile(target: &Path, first: usize) -> anyhow::Result<Vec<Box<dyn Workload>>> {
    let sizes = super::values::parse_size_list(DEFAULT_SIZES).map_err(UsageError)?;
    let series = DiskPlan {
        repeat: 3,
        ..DiskPlan::new(target.to_path_buf(), sizes.0, rand::random())
    };
    let image_size_bytes = default_image_size(held_bytes(&series, None));
    let containers = [Format::RawSparse, Format::Qcow2]
        .into_iter()
        .map(|format| ContainerSpec {
            format,
            cluster_size_bytes: (format == Format::Qcow2).then_some(64 << 10),
            extended_l2: false,
            preallocation: Preallocation::Off,
            fs: Filesystem::Ext4,
            image_size_bytes,
        })
        .collect();
    Ok(image::workloads(
        plan(target, containers, series, None),
        first,
    )?)
}

/// Runs `ratelab image`.
pub fn run(args: ImageArgs) -> anyhow::Result<Exit> {
    if args.repeat == 0 {
        return Err(UsageError("--repeat must be at least 1".into()).into());
    }
    let seed = args.series.seed.unwrap_or_else(rand::random);
    let mut series = DiskPlan {
        repeat: args.repeat,
        ..DiskPlan::new(args.target.clone(), args.sizes.0.clone(), seed)
    };
    args.series.apply(&mut series)?;
    series.validate().map_err(UsageError)?;
    let cpus = crate::platform::probe_machine().logical_cpus.max(1);
    let task = args.task.then(|| TaskPlan {
        file: None,
        make_file_bytes: Some(TASK_BYTES),
        out: args.target.clone(),
        codec: Codec::Zstd,
        level: Codec::Zstd.default_level(),
        threads: profile::thread_counts(cpus),
        direction: Direction::Compress,
        keep: false,
        seed,
        // Inside images the task compares places; what a step costs is task's question.
        what_if: false,
        layers: Vec::new(),
    });
    let held = held_bytes(&series, task.as_ref());
    let image_size = args.image_size.unwrap_or_else(|| default_image_size(held));
    if image_size < held + (held >> 3) {
        return Err(UsageError(format!(
            "--image-size {} cannot hold the series and the task ({} and room for the filesystem): give a larger --image-size or smaller --sizes",
            crate::vocab::units::format_size(image_size),
            crate::vocab::units::format_size(held)
        ))
        .into());
    }
    let containers = args.containers(image_size)?;
    let plan = plan(&args.target, containers, series, task);
    let workloads = image::workloads(plan, 0)?;
    // The image workload runs every place; the places' records are never scheduled.
    let schedule = Schedule {
        groups: vec![vec![Member {
            workload: 0,
            delay: Duration::ZERO,
        }]],
    };
    let report = profile::report_path(args.report.as_ref(), &args.output)?;
    let extras = super::Extras {
        judge: None,
        then: Some(Box::new(move |run| profile::write_report(report, run))),
        detail: Detail::Brief,
        ..super::Extras::default()
    };
    super::measure_with("image", &args.output, workloads, schedule, extras)
}
