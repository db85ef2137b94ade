//! The command line: one clap definition per flag, from which help, the man page and
//! shell completions are generated. Each verb is one file that turns its flags into a
//! validated plan and hands it to the library.

pub mod cpu;
pub mod disk;
pub mod exit_code;
pub mod fleet;
pub mod generate;
pub mod image;
mod import;
pub mod info;
pub mod iops;
pub mod monitor;
pub mod net;
pub mod profile;
pub mod quick;
pub mod readdir;
pub mod results;
pub mod run;
pub mod scale;
pub mod scenario;
mod series;
pub mod task;
pub mod values;
pub mod why;

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::db::{Address, Store};
use crate::exit::Exit;
use crate::report::layout::Detail;
use crate::report::{self, Format};
use crate::run::{RunSpec, Schedule};
use crate::workload::Workload;

/// ratelab: which step limits the rate of the work you wait for, and by how much.
#[derive(Debug, Parser)]
#[command(name = "ratelab", version, about, max_term_width = 100)]
#[command(
    long_about = "ratelab measures storage across a series of file sizes with honest, \
uncached reads, TCP throughput between two hosts, in-core loop rates at 1..N threads beside a \
monitor of residency, frequency and power, and real tasks (compression) split into read, \
compress and write. It runs several at once on one clock to show who steals bandwidth from \
whom, checks every figure against the physical limit of its link, and keeps every run in a \
results database so disks, settings and machines can be compared. `ratelab profile --quick` \
does all of it for this machine."
)]
pub struct Cli {
    /// The verb.
    #[command(subcommand)]
    pub command: Command,
}

/// Declares the verbs once, each on one line: its clap variant (whose doc is its help
/// line), the function that runs it, and, for a kind that runs in scenarios, how it
/// does. `Command`, `dispatch` and the scenario kinds all come from this list.
macro_rules! verbs {
    ($($(#[$doc:meta])* $verb:ident($args:ty) => $run:path $(, scenario $scenario:path)?;)*) => {
        /// The verbs.
        #[derive(Debug, Subcommand)]
        pub enum Command {
            $($(#[$doc])* $verb($args),)*
        }

        /// Runs a parsed command line.
        pub fn dispatch(cli: Cli) -> anyhow::Result<Exit> {
            match cli.command {
                $(Command::$verb(args) => $run(args),)*
            }
        }

        /// The kinds a scenario can run, each offered by the verb whose flags its fields are.
        const SCENARIO_KINDS: &[scenario::ScenarioKind] = &[$($($scenario,)?)*];
    };
}

verbs! {
    /// Storage series: write files of a series of sizes, then read them back uncached.
    Disk(disk::DiskArgs) => disk::run, scenario disk::SCENARIO;
    /// A verb on every host of an inventory over OpenSSH; runs stored here with their machines.
    Fleet(fleet::FleetArgs) => fleet::run;
    /// Disk images: the series (and a task) inside raw and qcow2 containers, beside the host folder.
    Image(image::ImageArgs) => image::run;
    /// The main job: a profile of this machine, stored, with verdicts.
    Profile(profile::ProfileArgs) => profile::run;
    /// A scenario: the workloads of a TOML file side by side, with the contention report.
    Run(run::RunArgs) => run::run;
    /// Block I/O as disk benchmarks show it: SEQ1M-Q8T1, RND4K-Q32T1..., IOPS and latency.
    Iops(iops::IopsArgs) => iops::run, scenario iops::SCENARIO;
    /// Destination check: one 50 MiB file, then 500 files of 4 KiB written at once.
    Quick(quick::QuickArgs) => quick::run;
    /// In-core loop tests at 1..N threads, by scheduling class and affinity.
    Cpu(cpu::CpuArgs) => cpu::run;
    /// Sample each core's residency, frequency and power, and where a command's threads ran.
    Monitor(monitor::MonitorArgs) => monitor::run;
    /// TCP throughput between two hosts: `net serve` on one, `net HOST` on the other.
    Net(Box<net::NetArgs>) => net::run, scenario net::SCENARIO;
    /// Read every file (10 KB and up) of a folder uncached, summarised by size band.
    Readdir(readdir::ReaddirArgs) => readdir::run;
    /// The machine: CPU, memory, kernel, and each filesystem's chain down to its link.
    Info(info::InfoArgs) => info::run;
    /// The results database: list, show, compare, report, export and import stored runs.
    Results(results::ResultsArgs) => results::run;
    /// Time any command held to 1..N CPUs, R times each: speedup and efficiency.
    Scale(scale::ScaleArgs) => scale::run;
    /// Time a real task (compression) at 1..N threads, split into read, compress and write.
    Task(task::TaskArgs) => task::run;
    /// Which step limits any command: run it (or watch --pid) and charge its time to steps.
    Why(why::WhyArgs) => why::run;
    /// Print a shell completion script.
    Completions(generate::CompletionsArgs) => generate::completions;
    /// Print the man page (roff).
    Man(generate::ManArgs) => generate::man;
}

/// The one `--db` flag of every verb that stores or reads runs.
#[derive(Debug, Clone, Args)]
pub struct DbArg {
    /// Results database: a file, or postgres://… for a store a team shares [default: $XDG_DATA_HOME/ratelab/results.db].
    #[arg(
        long = "db",
        value_name = "PATH|URL",
        env = "RATELAB_DB",
        hide_env_values = true,
        global = true,
        long_help = "Results database: a SQLite file [default: $XDG_DATA_HOME/ratelab/results.db], \
                     or postgres://USER@HOST:PORT/DB for a PostgreSQL store a team shares. A \
                     server's password comes from the URL, PGPASSWORD or ~/.pgpass (PGPASSFILE), \
                     and is never printed; PGHOST, PGPORT, PGUSER and PGDATABASE fill what the \
                     URL leaves out, as for psql. The server is reached without TLS."
    )]
    pub path: Option<PathBuf>,
}

/// Options every measuring verb takes.
#[derive(Debug, Clone, Args)]
pub struct MeasureArgs {
    /// Print the run as one JSON document on stdout, and nothing else there.
    #[arg(long)]
    pub json: bool,
    /// Where runs are stored.
    #[command(flatten)]
    pub db: DbArg,
    /// A label stored with the run, to find and compare it later.
    #[arg(long, value_name = "TEXT")]
    pub label: Option<String>,
    /// Do not store the run: no results database is opened, checked or created.
    #[arg(long)]
    pub no_store: bool,
    /// No progress display on stderr.
    #[arg(long, short)]
    pub quiet: bool,
    /// Sampling interval of the workloads' rate series, one clock for all [default: 100ms].
    #[arg(long, value_name = "TIME", value_parser = values::parse_interval)]
    pub interval: Option<std::time::Duration>,
}

impl MeasureArgs {
    /// Opens the results database unless --no-store.
    fn store(&self) -> anyhow::Result<Option<Store>> {
        if self.no_store {
            return Ok(None);
        }
        Ok(Some(Address::of(self.db.path.as_deref())?.open()?))
    }

    /// Refuses a `--db` (or RATELAB_DB) that names no usable place, before anything is
    /// said of the run: a folder, or a file in a folder that does not exist.
    pub(super) fn check_db(&self) -> anyhow::Result<()> {
        if !self.no_store {
            Address::of(self.db.path.as_deref())?;
        }
        Ok(())
    }

    /// The database to look up earlier runs in, read only: none with --no-store (no
    /// database is opened, checked or created then), nor where none exists or opens.
    pub(super) fn history(&self) -> Option<Store> {
        if self.no_store {
            return None;
        }
        Store::open_existing(self.db.path.as_deref())
    }
}

/// Runs workloads as one stored run, in the order `schedule` gives, prints the report
/// and says how to exit.
fn measure(
    verb: &str,
    output: &MeasureArgs,
    workloads: Vec<Box<dyn Workload>>,
    schedule: Schedule,
) -> anyhow::Result<Exit> {
    let judge = last_run(verb, output).map(moved_since);
    measure_with(
        verb,
        output,
        workloads,
        schedule,
        Extras {
            judge,
            ..Extras::default()
        },
    )
}

/// The last complete run of `verb` on this machine, where results are kept.
fn last_run(verb: &str, output: &MeasureArgs) -> Option<crate::document::RunDocument> {
    let store = output.history()?;
    let query = crate::db::RunQuery {
        hostname: Some(crate::platform::probe_machine().hostname),
        limit: Some(1),
        ..crate::db::RunQuery::complete(&[verb])
    };
    let last = store.find_runs(&query).ok()?.pop()?;
    store.load_run(last.run_id).ok()
}

/// The verdict on the same work's figures that moved more than twofold since
/// `previous` (see [`crate::analysis::since::moved`]).
fn moved_since(previous: crate::document::RunDocument) -> crate::run::Judge {
    Box::new(move |run| {
        let then = crate::workload::profile_figures(&crate::workload::Decoded::of(&previous))?;
        let now = crate::workload::profile_figures(run)?;
        Ok(
            crate::analysis::since::moved(&previous, run.doc, &then, &now)
                .into_iter()
                .collect(),
        )
    })
}

/// What a verb adds to a run: its own verdicts over the whole run, and work once the
/// run is over (complete or not) before the exit is decided (profile's HTML page).
#[derive(Default)]
struct Extras {
    judge: Option<crate::run::Judge>,
    then: Option<Then>,
    /// How much of the run the terminal shows.
    detail: Detail,
    /// Where the report goes instead of stdout: a file, or stderr (`why`, whose
    /// command owns stdout).
    out: Option<PathBuf>,
    /// Whether the report goes to stderr when no file is given.
    to_stderr: bool,
}

/// Work a verb does once its run is over, its workloads decoded.
type Then = Box<dyn FnOnce(&crate::workload::Decoded) -> anyhow::Result<()>>;

/// As [`measure`], with the verb's [`Extras`].
fn measure_with(
    verb: &str,
    output: &MeasureArgs,
    workloads: Vec<Box<dyn Workload>>,
    schedule: Schedule,
    extras: Extras,
) -> anyhow::Result<Exit> {
    let interval = output.interval.unwrap_or(crate::run::DEFAULT_INTERVAL);
    let spec = RunSpec {
        verb: verb.to_string(),
        label: output.label.clone(),
        store: output.store()?,
        show_progress: !output.quiet,
        schedule,
        interval,
        judge: extras.judge,
        start_at: start_at()?,
    };
    let mut finished = crate::run::execute(spec, workloads)?;
    let error = finished.error.take();
    let run = finished.decoded();
    // An incomplete run is shown too: what it measured before it stopped is real.
    let format = if output.json {
        Format::Json
    } else {
        Format::Table(extras.detail)
    };
    report::emit_to(
        &report::render_run(&run, format)?,
        extras.out.as_deref(),
        extras.to_stderr,
    )?;
    let after = extras.then.map_or(Ok(()), |then| then(&run));
    match error {
        Some(error) => Err(error),
        None => after.map(|()| {
            if run.doc.has_error_verdict() {
                Exit::CheckFailed
            } else {
                Exit::Success
            }
        }),
    }
}

/// The start a fleet agreed on, if one is given.
fn start_at() -> Result<Option<std::time::SystemTime>, crate::exit::UsageError> {
    use crate::run::START_AT_VARIABLE;
    let Ok(text) = std::env::var(START_AT_VARIABLE) else {
        return Ok(None);
    };
    let seconds: f64 = text
        .trim()
        .parse()
        .ok()
        .filter(|s: &f64| s.is_finite() && *s > 0.0)
        .ok_or_else(|| {
            crate::exit::UsageError(format!(
                "{START_AT_VARIABLE}={text:?} is not a time in seconds since the Unix epoch"
            ))
        })?;
    Ok(Some(
        std::time::UNIX_EPOCH + std::time::Duration::from_secs_f64(seconds),
    ))
}

#[cfg(test)]
mod tests {
    #[test]
    fn clap_definition_is_consistent() {
        use clap::CommandFactory;
        super::Cli::command().debug_assert();
    }
}
