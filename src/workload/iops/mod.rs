//! Block I/O as every disk benchmark shows it: one test file, and tests such as
//! `SEQ1M-Q8T1` and `RND4K-Q32T1` run on it for a few seconds each, read and write,
//! in rounds (`--repeat`), each round giving IOPS, MB/s and completion-latency
//! percentiles. The file is made inside a
//! work folder under the target and filled with ratelab's unique, incompressible data
//! before anything is timed; it is removed at the end, on error and on Ctrl-C.

mod chart;
mod drive;
mod kind;
pub mod latency;
pub mod notation;
mod rounds;
mod stored;
mod table;
mod verdicts;
mod view;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use kind::IopsKind;
pub use notation::{BlockTest, Order, Rw};
pub use stored::{IopsContext, IopsItem, IopsOp, IopsSummary, TestSummary};

use self::drive::ThreadJob;
use self::latency::Intervals;
use crate::catch::{Family, skew};
use crate::error::Error;
use crate::platform::{self, StorageChain};
use crate::storage::align::DirectAlign;
use crate::storage::cache::{self, Eviction};
use crate::storage::engine::{self, EngineKind, SyncMode, WriteJob};
use crate::storage::workdir::{self, WorkDir};
use crate::vocab::units::{format_seconds, format_size};
use crate::workload::{Context, Kind, Workload};

/// The tests run when none are named: what CrystalDiskMark shows.
pub const DEFAULT_TESTS: &str = "SEQ1M-Q8T1,SEQ1M-Q1T1,RND4K-Q32T1,RND4K-Q1T1";
/// The most rounds of each test and direction.
pub const MAX_REPEAT: u32 = 100;

/// What `ratelab iops` was asked to do, validated.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IopsPlan {
    /// The folder whose storage is tested.
    pub target: PathBuf,
    /// The test file's size.
    pub size_bytes: u64,
    /// The tests, in the order run.
    pub tests: Vec<BlockTest>,
    /// What each test's requests do, each run in turn: read, write, or a mix.
    #[serde(alias = "directions")]
    pub rw: Vec<Rw>,
    /// Seconds each round of each test and direction is counted.
    pub seconds: f64,
    /// Seconds before the first round, not counted.
    pub ramp_seconds: f64,
    /// Rounds of each test and direction; a plan stored before rounds ran one.
    #[serde(default = "one_round")]
    pub repeat: u32,
    /// Whether requests bypass the page cache (O_DIRECT).
    pub direct: bool,
    /// Offsets and data follow from it.
    pub seed: u64,
}

impl IopsPlan {
    /// Says what is wrong with a plan, naming the flag.
    pub fn validate(&self) -> Result<(), String> {
        if self.tests.is_empty() {
            return Err("--tests names no test".into());
        }
        if self.rw.is_empty() {
            return Err("--rw names no direction".into());
        }
        if !(self.seconds > 0.0 && self.seconds <= 86_400.0) {
            return Err(format!(
                "--seconds {} must be above 0 and at most a day",
                self.seconds
            ));
        }
        if self.repeat == 0 {
            return Err("--repeat must be at least 1".into());
        }
        if self.repeat > MAX_REPEAT {
            return Err(format!(
                "--repeat {} is out of range (1 to {MAX_REPEAT})",
                self.repeat
            ));
        }
        if !(0.0..=3_600.0).contains(&self.ramp_seconds) {
            return Err(format!(
                "--ramp {} must be from 0 to an hour",
                self.ramp_seconds
            ));
        }
        for test in &self.tests {
            if self.size_bytes < test.block_bytes * u64::from(test.threads) {
                return Err(format!(
                    "--size {} is too small for {test}: each of its threads needs at least one block",
                    format_size(self.size_bytes)
                ));
            }
            if !self.size_bytes.is_multiple_of(test.block_bytes) {
                return Err(format!(
                    "--size {} must be a multiple of every test's block ({test} has {})",
                    format_size(self.size_bytes),
                    format_size(test.block_bytes)
                ));
            }
        }
        Ok(())
    }

    /// How long the tests take, in words, before they start: `2 tests, read and write,
    /// 3 rounds of 5 s after a 1 s ramp: 32.0 s of I/O after filling a 1 GiB file`.
    pub fn time_in_words(&self) -> String {
        let directions = self.rw.len() as f64;
        let tests = self.tests.len() as f64;
        let total =
            tests * directions * (self.ramp_seconds + f64::from(self.repeat) * self.seconds);
        let rw: Vec<String> = self.rw.iter().map(Rw::to_string).collect();
        let rw = match rw.split_last() {
            Some((last, rest)) if !rest.is_empty() => format!("{} and {last}", rest.join(", ")),
            _ => rw.join(""),
        };
        let rounds = match self.repeat {
            1 => format!("{} s", self.seconds),
            n => format!("{n} rounds of {} s", self.seconds),
        };
        format!(
            "{} test{}, {rw}, {rounds} after a {} s ramp: {} of I/O after filling a {} file",
            self.tests.len(),
            if self.tests.len() == 1 { "" } else { "s" },
            self.ramp_seconds,
            format_seconds(total),
            format_size(self.size_bytes)
        )
    }
}

/// The rounds of a plan stored before rounds: one.
fn one_round() -> u32 {
    1
}

/// The iops workload: it makes the test file in setup, runs every test, and removes it.
pub struct IopsWorkload {
    plan: IopsPlan,
    target: PathBuf,
    chain: Option<StorageChain>,
    workdir: Option<WorkDir>,
    file: Option<PathBuf>,
    /// The workload this one runs alone for (`--alone`).
    alone_of: Option<usize>,
}

impl IopsWorkload {
    /// A workload for a validated plan; nothing is checked or created yet.
    pub fn new(plan: IopsPlan) -> IopsWorkload {
        IopsWorkload {
            target: plan.target.clone(),
            plan,
            chain: None,
            workdir: None,
            file: None,
            alone_of: None,
        }
    }

    /// The same tests, run alone before the group for workload `of` when it is given.
    pub fn standing_for(self, of: Option<usize>) -> IopsWorkload {
        IopsWorkload {
            alone_of: of,
            ..self
        }
    }

    /// Fills the test file with unique data and syncs it, then evicts it: untimed.
    fn fill(&mut self, ctx: &Context) -> Result<(), Error> {
        let workdir = self
            .workdir
            .as_mut()
            .expect("the work folder is made first");
        let (path, file) = workdir.create_file("iops-test-file", self.plan.direct)?;
        let mut writer = engine::make(EngineKind::Sync, 1 << 20, 1, self.plan.seed)?;
        // Not counted: the runner's clock has not started.
        let untimed = crate::control::Progress::default();
        writer.write(&WriteJob {
            file: &file,
            direct: self.plan.direct,
            tail_file: None,
            path: &path,
            size: self.plan.size_bytes,
            sync: SyncMode::Fsync,
            progress: &untimed,
            cancel: &ctx.cancel,
            until: None,
        })?;
        cache::evict(&file, &path, self.plan.size_bytes, Eviction::Advise)?;
        self.file = Some(path);
        Ok(())
    }

    /// Runs round `round` of `test` doing `rw` on every thread at once: an item for its
    /// reads and one for its writes, those it has, of what every thread counted.
    fn run_test(
        &self,
        ctx: &Context,
        test: BlockTest,
        rw: Rw,
        round: u32,
    ) -> Result<Vec<IopsItem>, Error> {
        let path = self.file.as_ref().expect("the test file is made in setup");
        let [reads, writes] = rw.ops();
        let file = match (reads, writes) {
            (true, true) => workdir::open_for_read_write(path, self.plan.direct)?,
            (false, _) => workdir::open_for_overwrite(path, self.plan.direct)?,
            (true, false) => workdir::open_for_read(path, self.plan.direct)?,
        };
        let cached_before = reads
            .then(|| cache::resident_fraction(&file, path, self.plan.size_bytes))
            .transpose()?;
        let span = Duration::from_secs_f64(self.plan.seconds);
        // One ramp, before the first round: the rounds follow one another at once, so the
        // device is as busy at the start of the next as at the end of the last. fio ramps
        // a job once however many --loops it runs (ramp_time_over is set once, time.c),
        // and CrystalDiskMark's runs have no ramp of their own.
        let ramp = match round {
            1 => Duration::from_secs_f64(self.plan.ramp_seconds),
            _ => Duration::ZERO,
        };
        let intervals = [Intervals::over(span), Intervals::over(span)];
        let interval_seconds = intervals[0].length().as_secs_f64();
        let jobs: Vec<ThreadJob> = (0..test.threads)
            .map(|thread| ThreadJob {
                file: &file,
                path,
                file_bytes: self.plan.size_bytes,
                test,
                rw,
                thread,
                seed: self.plan.seed,
                ramp,
                span,
                controls: ctx.controls(),
                intervals: &intervals,
            })
            .collect();
        run_together(&jobs)?;
        if writes && !self.plan.direct {
            // As fio's end_fsync, outside the counted span: a writeback error fails the
            // test by name instead of passing unseen.
            rustix::fs::fsync(&file).map_err(|e| Error::io("sync", path, e))?;
        }
        let counted = Counted {
            test,
            rw,
            round,
            seconds: span.as_secs_f64(),
            interval_seconds,
            cached_before,
        };
        self.items(counted, intervals)
    }

    /// The items of one test's round from its intervals, one per op it did.
    fn items(&self, counted: Counted, intervals: [Intervals; 2]) -> Result<Vec<IopsItem>, Error> {
        let Counted {
            test,
            rw,
            round,
            seconds,
            interval_seconds,
            cached_before,
        } = counted;
        let mut items = Vec::new();
        for ((op, does), intervals) in [IopsOp::Read, IopsOp::Write]
            .into_iter()
            .zip(rw.ops())
            .zip(intervals)
        {
            if !does {
                continue;
            }
            let (latency, intervals) = intervals.into_figures();
            let figures = latency.figures().ok_or_else(|| {
                Error::Unsupported(format!("{test} {rw}: no {op} completed in {seconds} s"))
            })?;
            let ios = latency.count();
            let seconds = seconds / skew(Family::Iops, 1.0);
            items.push(IopsItem {
                test: test.to_string(),
                op,
                rw: rw.to_string(),
                round,
                order: test.order,
                block_bytes: test.block_bytes,
                queue_depth: test.queue_depth,
                threads: test.threads,
                seconds,
                ios,
                iops: ios as f64 / seconds,
                bytes_per_sec: (ios * test.block_bytes) as f64 / seconds,
                latency_ns: figures,
                histogram: latency.encode(),
                interval_seconds,
                intervals,
                cached_fraction_before: cached_before.filter(|_| op == IopsOp::Read),
                direct: self.plan.direct,
            });
        }
        Ok(items)
    }
}

/// What one test's round counted, beside its intervals.
struct Counted {
    test: BlockTest,
    rw: Rw,
    round: u32,
    seconds: f64,
    interval_seconds: f64,
    cached_before: Option<f64>,
}

/// Runs every thread's job from one start, together; the first error found.
fn run_together(jobs: &[ThreadJob<'_>]) -> Result<(), Error> {
    let start = std::sync::Barrier::new(jobs.len());
    std::thread::scope(|scope| {
        let threads: Vec<_> = jobs
            .iter()
            .map(|job| {
                let start = &start;
                scope.spawn(move || {
                    start.wait();
                    job.run(Instant::now())
                })
            })
            .collect();
        // Every thread joined before the first error is taken.
        let outcomes: Vec<Result<(), Error>> = threads
            .into_iter()
            .map(|t| t.join().expect("the I/O threads do not panic"))
            .collect();
        outcomes.into_iter().collect()
    })
}

impl Workload for IopsWorkload {
    fn kind(&self) -> &'static str {
        IopsKind::NAME
    }

    fn target(&self) -> String {
        self.target.display().to_string()
    }

    fn params(&self) -> Value {
        serde_json::to_value(&self.plan).expect("plans serialise")
    }

    fn context(&self) -> Value {
        serde_json::to_value(IopsContext {
            chain: self.chain.clone(),
        })
        .expect("contexts serialise")
    }

    fn alone_of(&self) -> Option<usize> {
        self.alone_of
    }

    fn touches(&self) -> crate::workload::Touches {
        crate::workload::Touches {
            paths: vec![self.target.clone()],
            ..Default::default()
        }
    }

    fn prepare(&mut self) -> Result<(), Error> {
        self.target = workdir::check_target(&self.plan.target)?;
        if self.plan.direct {
            workdir::check_direct(&self.target, "give --buffered")?;
            if let Some(align) = DirectAlign::of(&self.target) {
                for test in &self.plan.tests {
                    align.check(&self.target, &test.to_string(), test.block_bytes)?;
                }
            }
        }
        check_memory(&self.plan, platform::machine::available_memory_bytes())?;
        workdir::check_space_for(&self.target, self.plan.size_bytes, 1, &SPACE_HINT)?;
        self.chain = platform::probe_path(&self.target).ok();
        Ok(())
    }

    fn setup(&mut self, ctx: &Context) -> Result<(), Error> {
        self.workdir = Some(WorkDir::create(&self.target)?);
        ctx.sink.status(format!(
            "fill the test file ({})",
            format_size(self.plan.size_bytes)
        ));
        self.fill(ctx)
    }

    fn run(&mut self, ctx: &Context) -> Result<(), Error> {
        for test in self.plan.tests.clone() {
            for rw in self.plan.rw.clone() {
                for round in 1..=self.plan.repeat {
                    if ctx.cancel.is_set() {
                        return Err(Error::Interrupted);
                    }
                    ctx.sink.status(match self.plan.repeat {
                        1 => format!("{test} {rw}"),
                        n => format!("{test} {rw} round {round} of {n}"),
                    });
                    for item in self.run_test(ctx, test, rw, round)? {
                        ctx.sink.item(&item);
                    }
                }
                // A stage a test and direction, its rounds together: stages are what the
                // rate chart marks and a disturbance names, in the tests people know. An
                // interrupted run still stores every round that ended.
                ctx.sink.stage_done(format!("{test} {rw}"));
            }
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

/// Refuses a plan whose buffers would take more than a quarter of the memory
/// `available` (MemAvailable), naming the test and the figure.
fn check_memory(plan: &IopsPlan, available: Option<u64>) -> Result<(), Error> {
    let Some(available) = available else {
        return Ok(());
    };
    let largest = plan
        .tests
        .iter()
        .flat_map(|&test| {
            plan.rw
                .iter()
                .map(move |&rw| (test, drive::buffer_bytes(test, rw)))
        })
        .max_by_key(|&(_, bytes)| bytes);
    match largest {
        Some((test, bytes)) if bytes > available / 4 => Err(Error::Unsupported(format!(
            "{test} would hold {} of I/O buffers ({} threads × {} requests in flight × {} \
             blocks, with their write data), more than a quarter of the {} of memory \
             available: give fewer threads, a shallower queue or smaller blocks",
            format_size(bytes),
            test.threads,
            test.queue_depth,
            format_size(test.block_bytes),
            format_size(available)
        ))),
        _ => Ok(()),
    }
}

/// What the space check names: the test file, and the flag that sizes it.
const SPACE_HINT: (&str, &str) = ("test file", "give a smaller --size");
