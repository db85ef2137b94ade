//! `ratelab fleet [INVENTORY] [--host DEST]... -- VERB ...`: a verb on every host of an
//! inventory over OpenSSH, one host after another; each host's run is stored here with
//! its machine, its summary shown, and the hosts set side by side as `results compare`
//! sets runs.

use std::path::PathBuf;

use anyhow::Context as _;
use clap::{Args, Parser};

use super::{Cli, DbArg};
use crate::control::Cancel;
use crate::db::Address;
use crate::exit::{Exit, UsageError};
use crate::fleet::{self, Outcome, inventory};
use crate::report;
use crate::report::fleet::HostRun;

/// Options of `ratelab fleet`.
#[derive(Debug, Args)]
#[command(
    after_long_help = "Each host is reached with `ssh DEST` (or the command in RATELAB_SSH, such as \
`ssh -F FILE`), so ~/.ssh/config, keys and jump hosts apply; nothing of ratelab listens on any \
host. This ratelab is copied to ${XDG_CACHE_HOME:-~/.cache}/ratelab/ on a host where it is \
missing or differs (named by version and hash); a host of another CPU architecture is refused. \
The verb runs there with --json --no-store; its run document comes back and is stored here with \
the host's machine and run UUID. A host that cannot be reached or fails is reported with its \
reason and the others go on (exit 3 when any failed). Ctrl-C or SIGTERM stops the run on \
its host as Ctrl-C there would (SIGINT to its process group, over another ssh connection): \
it cleans up and sends back what it measured, stored here marked incomplete; the hosts after \
it are not run (exit 130).\n\nInventory (TOML):\n  [[host]]\n  name = \
\"nas\"\n  ssh = \"admin@nas.local\"\n  [[host]]\n  name = \"pc\"\n  ssh = \"ssh://me@10.0.0.5:2222\""
)]
pub struct FleetArgs {
    /// An inventory file: a [[host]] table per host, with `name` and `ssh`.
    #[arg(value_name = "INVENTORY")]
    pub inventory: Option<PathBuf>,
    /// A host's ssh destination, as you would give it to ssh (repeat for more hosts).
    #[arg(long = "host", value_name = "DEST")]
    pub hosts: Vec<String>,
    /// Start every host's run at one agreed instant (each host's clock offset measured
    /// over ssh first), instead of one host after another.
    #[arg(long)]
    pub together: bool,
    /// Where runs are stored.
    #[command(flatten)]
    pub db: DbArg,
    /// The verb and its flags, after `--`: `-- profile --quick`.
    #[arg(last = true, required = true, value_name = "VERB")]
    pub verb: Vec<String>,
}

/// The verbs a fleet may run: those that store a run (they take `--no-store`, one of
/// the options every measuring verb takes), as the one clap definition of the commands
/// says.
fn measuring_verbs() -> Vec<String> {
    use clap::CommandFactory;
    Cli::command()
        .get_subcommands()
        .filter(|verb| verb.get_arguments().any(|arg| arg.get_id() == "no_store"))
        .map(|verb| verb.get_name().to_string())
        .collect()
}

/// Runs `ratelab fleet`.
pub fn run(args: FleetArgs) -> anyhow::Result<Exit> {
    check_verb(&args.verb)?;
    let hosts = inventory::hosts(args.inventory.as_deref(), &args.hosts)?;
    let mut store = Address::of(args.db.path.as_deref())?.open()?;
    let cancel = Cancel::on_signals().context("cannot install signal handlers")?;
    let outcomes = outcomes(&args, &hosts, &cancel);
    let mut runs = Vec::new();
    let mut failed = Vec::new();
    for (host, outcome) in hosts.iter().zip(outcomes) {
        match outcome {
            Outcome::Ran(doc) => {
                let id = match store.import_run(&doc)? {
                    Some(id) => id,
                    None => anyhow::bail!(
                        "{}: its run {} is already stored here",
                        host.name,
                        crate::db::identity(&doc)
                    ),
                };
                runs.push((host, store.load_run(id)?));
            }
            Outcome::Failed(reason) => failed.push((host, reason)),
        }
    }
    let brought: Vec<HostRun> = runs
        .iter()
        .map(|(host, doc)| HostRun {
            name: &host.name,
            ssh: &host.ssh,
            doc,
        })
        .collect();
    let mut out = report::fleet::terminal(&brought)?;
    if runs.len() > 1 {
        let docs: Vec<_> = runs.iter().map(|(_, doc)| doc.clone()).collect();
        let comparison = super::results::comparison_of(&docs)?;
        out.push_str(&report::compare::terminal(&comparison));
    }
    report::emit(out.as_bytes(), None)?;
    for (host, reason) in &failed {
        crate::report::terminal::say(
            "ratelab: fleet: ",
            &format!("{} ({}): {reason}", host.name, host.ssh),
        );
    }
    Ok(if cancel.interrupted() {
        Exit::Interrupted
    } else if !failed.is_empty() {
        Exit::Environment
    } else if runs.iter().any(|(_, doc)| doc.has_error_verdict()) {
        Exit::CheckFailed
    } else {
        Exit::Success
    })
}

/// What each host's run came to: all started together, or one host after another until
/// a Ctrl-C.
fn outcomes(args: &FleetArgs, hosts: &[inventory::Host], cancel: &Cancel) -> Vec<Outcome> {
    let say = |text: &str| crate::report::terminal::say("", text);
    if args.together {
        return fleet::run_together(hosts, &args.verb, &say, cancel);
    }
    hosts
        .iter()
        .map(|host| {
            if cancel.is_set() {
                Outcome::Failed("not run: interrupted".into())
            } else {
                fleet::run_on(host, &args.verb, &say, cancel)
            }
        })
        .collect()
}

/// Refuses, before any host is reached, a verb that does not measure or whose flags do
/// not parse: clap's own message, as the hosts would give it.
fn check_verb(verb: &[String]) -> Result<(), UsageError> {
    let name = verb.first().map(String::as_str).unwrap_or_default();
    let measuring = measuring_verbs();
    if !measuring.iter().any(|v| v == name) {
        return Err(UsageError(format!(
            "fleet runs a measuring verb ({}), not {name:?}",
            measuring.join(", ")
        )));
    }
    if verb.iter().any(|a| a == "--db" || a.starts_with("--db=")) {
        return Err(UsageError(
            "--db belongs to the fleet (where the hosts' runs are stored), not to the verb".into(),
        ));
    }
    let argv = std::iter::once("ratelab").chain(verb.iter().map(String::as_str));
    Cli::try_parse_from(argv).map(|_| ()).map_err(|e| {
        UsageError(format!(
            "the verb after --: {}",
            e.render().to_string().trim()
        ))
    })
}
