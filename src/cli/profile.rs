//! `ratelab profile`: the main job. A storage series in the current folder, the cpu
//! tests at one and all threads, a loopback network test against a server ratelab runs
//! itself, and a compression task on a file it makes in the same folder, set beside the
//! storage series. The parts run one after another, so none takes from another.

use std::time::Duration;

use clap::Args;
use serde_json::Value;

use super::MeasureArgs;
use super::disk::DEFAULT_SIZES;
use super::values::parse_size_list;
use crate::exit::{Exit, UsageError};
use crate::run::Schedule;
use crate::workload::Error;
use crate::workload::Workload;
use crate::workload::cpu::kernels::DEFAULT_TESTS;
use crate::workload::cpu::{Budget, CpuPlan, CpuWorkload, SchedClass};
use crate::workload::disk::{DiskPlan, DiskWorkload};
use crate::workload::net::{NetPlan, NetWorkload};
use crate::workload::task::{Codec, Direction, TaskPlan, TaskWorkload};

/// The quick profile's storage series: up to 256 MiB, three passes.
const QUICK_SIZES: &str = "10K,100K,1M,10M,64M,256M";
const QUICK_PASSES: u32 = 3;
/// The compression task's test file, quick and full.
const QUICK_TASK_BYTES: u64 = 128 << 20;
const TASK_BYTES: u64 = 1 << 30;

/// Options of `ratelab profile`.
#[derive(Debug, Args)]
pub struct ProfileArgs {
    /// A short profile (about a minute): files up to 256 MiB.
    #[arg(long)]
    pub quick: bool,
    /// Output and storage options.
    #[command(flatten)]
    pub output: MeasureArgs,
}

/// Runs `ratelab profile`.
pub fn run(args: ProfileArgs) -> anyhow::Result<Exit> {
    let (sizes, repeat) = if args.quick {
        (QUICK_SIZES, QUICK_PASSES)
    } else {
        (DEFAULT_SIZES, 1)
    };
    let target = std::env::current_dir().map_err(|e| Error::Target {
        path: ".".into(),
        reason: e.to_string(),
    })?;
    let sizes = parse_size_list(sizes).expect("built-in sizes parse").0;
    let task = TaskPlan {
        file: None,
        make_file_bytes: Some(if args.quick {
            QUICK_TASK_BYTES
        } else {
            TASK_BYTES
        }),
        out: target.clone(),
        codec: Codec::Zstd,
        level: Codec::Zstd.default_level(),
        threads: Vec::new(),
        direction: Direction::Compress,
        keep: false,
        seed: rand::random(),
    };
    let plan = DiskPlan {
        repeat,
        ..DiskPlan::new(target, sizes, rand::random())
    };
    plan.validate().map_err(UsageError)?;
    let net_seconds = if args.quick { 3 } else { 10 };
    let cpus = crate::platform::probe_machine().logical_cpus.max(1);
    let one_and_all = if cpus > 1 { vec![1, cpus] } else { vec![1] };
    let task = TaskPlan {
        threads: one_and_all.clone(),
        ..task
    };
    let cpu = CpuPlan {
        tests: DEFAULT_TESTS.iter().map(|t| t.to_string()).collect(),
        threads: one_and_all.clone(),
        classes: vec![SchedClass::Normal],
        cpus: None,
        budget: Budget::Seconds(if args.quick { 0.3 } else { 1.0 }),
        baseline: None,
    };
    let workloads: Vec<Box<dyn Workload>> = vec![
        Box::new(DiskWorkload::new(plan)),
        Box::new(CpuWorkload::new(cpu)),
        Box::new(NetWorkload::new(NetPlan::loopback(
            Duration::from_secs(net_seconds),
            // A sender and a receiver thread per stream: one stream per two CPUs.
            (crate::platform::probe_machine().logical_cpus / 2).clamp(1, 16) as u32,
        ))),
        Box::new(TaskWorkload::new(task, Value::Null)),
    ];
    let n = workloads.len();
    super::measure("profile", &args.output, workloads, Schedule::one_by_one(n))
}
