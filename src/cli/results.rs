//! `ratelab results list|show|compare|report|export`: views of stored runs.

use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use anyhow::Context as _;
use clap::{Args, Subcommand, ValueEnum};

use super::DbArg;
use crate::analysis::compare::{Comparison, Sampled, compare};
use crate::analysis::interference::DISTURBED;
use crate::db::{Address, RunListing, RunQuery, Store};
use crate::document::RunDocument;
use crate::exit::Exit;
use crate::report::layout::Detail;
use crate::report::{self, Format};
use crate::vocab::Table;
use crate::vocab::width::one_line;
use crate::workload;

/// Options of `ratelab results`.
#[derive(Debug, Args)]
pub struct ResultsArgs {
    /// Where runs are stored.
    #[command(flatten)]
    pub db: DbArg,
    /// What to do.
    #[command(subcommand)]
    pub action: Action,
}

/// The `results` subcommands.
#[derive(Debug, Subcommand)]
pub enum Action {
    /// Every stored run: id, date, machine, verb, targets, label, status (with how the
    /// command of a `why` ended) and its answer in a line.
    List {
        /// One JSON document on stdout.
        #[arg(long)]
        json: bool,
        /// Which runs to list.
        #[command(flatten)]
        filter: ListFilter,
    },
    /// One run's tables and verdicts.
    Show {
        /// The run id (see `results list`) [default: the latest run].
        #[arg(value_name = "ID")]
        run_id: Option<i64>,
        /// The run's JSON document instead.
        #[arg(long)]
        json: bool,
        /// At a glance, as `profile` prints it: brief tables, and no info verdict whose
        /// point the summary makes.
        #[arg(long, conflicts_with = "json")]
        brief: bool,
    },
    /// Runs side by side: each later run's medians against the first run's, with a
    /// Mann-Whitney U test saying which changes stand out of the noise.
    #[command(
        long_about = "Runs side by side: workloads are matched by kind and target (then by \
kind and position), their items grouped (disk: per operation and file size; cpu: per test, \
threads and class; task: per step and threads; net: per direction, each interval's receive \
rate; readdir: per size band), and each later run's median is set against the first run's. \
A change is called beyond noise when a two-sided Mann-Whitney U test of the items' rates \
gives p < 0.05 and the median moved by 5% or more; with fewer than 3 items on a side no \
verdict is given. Items too short to time well (flag small) are left out. The test is exact (the permutation distribution, ties included) when both \
runs have at most 20 items in a group, and the normal approximation with tie and continuity \
corrections beyond."
    )]
    Compare {
        /// Run ids (see `results list`): the first is the reference the others are set against.
        #[arg(value_name = "ID", num_args = 2.., required = true)]
        run_ids: Vec<i64>,
        /// One JSON document on stdout (same as --format json).
        #[arg(long, conflicts_with = "format")]
        json: bool,
        /// Output format.
        #[arg(long, value_enum, default_value = "table")]
        format: CompareFormat,
        /// Write to this file instead of stdout.
        #[arg(long, value_name = "FILE")]
        out: Option<PathBuf>,
    },
    /// One run as a self-contained HTML page: charts (inline SVG), tables and verdicts.
    Report {
        /// The run id (see `results list`) [default: the latest run].
        #[arg(value_name = "ID")]
        run_id: Option<i64>,
        /// Write to this file (FILE.html), or `-` for stdout [default:
        /// reports/run-ID.html beside the database].
        #[arg(long, value_name = "FILE")]
        out: Option<PathBuf>,
    },
    /// One run as JSON (the document), CSV (a row per item), series (CSV, a row per
    /// sample) or Markdown (its tables and verdicts, to paste into an issue).
    Export {
        /// The run id (see `results list`).
        #[arg(value_name = "ID")]
        run_id: i64,
        /// Export format.
        #[arg(long, value_enum, default_value = "json")]
        format: ExportFormat,
        /// Write to this file instead of stdout.
        #[arg(long, value_name = "FILE")]
        out: Option<PathBuf>,
    },
    /// Copy runs in from another results database or a JSON run document (or an array
    /// of them), keeping each run's UUID: a run already here is not added again.
    Import {
        /// A results database (SQLite) or a file of run documents (`--json`, `results export`).
        #[arg(value_name = "FILE")]
        file: PathBuf,
    },
}

/// Formats `results export` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ExportFormat {
    /// The JSON run document.
    Json,
    /// One row per item.
    Csv,
    /// One row per sample of each workload's rate series.
    Series,
    /// The run's tables and verdicts as GitHub-flavoured Markdown.
    Markdown,
}

/// Formats `results compare` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum CompareFormat {
    /// Tables for people.
    Table,
    /// One JSON document: runs, and per group the medians, ratio, p-value, U and verdict.
    Json,
    /// GitHub-flavoured Markdown tables, to paste into an issue.
    Markdown,
}

/// Which runs `results list` shows; every filter given must hold.
#[derive(Debug, Clone, Default, Args)]
pub struct ListFilter {
    /// Only runs on a machine whose host name or CPU model contains TEXT (any case).
    #[arg(long, value_name = "TEXT")]
    pub machine: Option<String>,
    /// Only runs with a workload whose target contains TEXT.
    #[arg(long, value_name = "TEXT")]
    pub target: Option<String>,
    /// Only runs with a workload of this kind.
    #[arg(long, value_name = "KIND", value_parser = clap::builder::PossibleValuesParser::new(workload::kind_names()))]
    pub kind: Option<String>,
    /// Only runs whose label contains TEXT.
    #[arg(long, value_name = "TEXT")]
    pub label: Option<String>,
    /// Only runs started at or after DATE (RFC 3339: 2026-11-23 or 2026-11-23T10:00:00Z;
    /// UTC when no offset is given).
    #[arg(long, value_name = "DATE", value_parser = parse_date)]
    pub since: Option<Date>,
    /// Only runs started at or before DATE (a date alone includes that whole day).
    #[arg(long, value_name = "DATE", value_parser = parse_date)]
    pub until: Option<Date>,
}

/// A date or date-time given on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Date {
    /// The moment it names: midnight UTC for a date alone.
    pub at: SystemTime,
    /// Whether only a date was given, which stands for the whole day.
    pub whole_day: bool,
}

impl ListFilter {
    /// The query of the runs the filters admit, answered by the store in SQL.
    fn query(&self) -> RunQuery {
        let stamp = |at: SystemTime| humantime::format_rfc3339_seconds(at).to_string();
        // A date alone for --until runs to the next midnight; a date-time is the last moment.
        let (started_until, started_before) = match self.until {
            Some(until) if until.whole_day => {
                (None, Some(stamp(until.at + Duration::from_secs(86_400))))
            }
            Some(until) => (Some(stamp(until.at)), None),
            None => (None, None),
        };
        RunQuery {
            machine_contains: self.machine.clone(),
            kind: self.kind.clone(),
            target_contains: self.target.clone(),
            label_contains: self.label.clone(),
            started_from: self.since.map(|since| stamp(since.at)),
            started_until,
            started_before,
            ..RunQuery::default()
        }
    }

    /// Whether any filter is given.
    fn is_empty(&self) -> bool {
        self.machine.is_none()
            && self.target.is_none()
            && self.kind.is_none()
            && self.label.is_none()
            && self.since.is_none()
            && self.until.is_none()
    }
}

/// Parses an RFC 3339 date (`2026-11-23`) or date-time (`2026-11-23T10:00:00Z`,
/// `2026-11-23T12:00:00+02:00`, `2026-11-23 10:00:00`); no offset means UTC.
pub fn parse_date(text: &str) -> Result<Date, String> {
    let invalid = || {
        format!(
            "invalid date \"{text}\": use an RFC 3339 date or date-time such as 2026-11-23 or \
             2026-11-23T10:00:00Z"
        )
    };
    let trimmed = text.trim();
    let is_date = trimmed.len() == 10
        && trimmed.char_indices().all(|(i, c)| {
            if i == 4 || i == 7 {
                c == '-'
            } else {
                c.is_ascii_digit()
            }
        });
    if is_date {
        let at =
            humantime::parse_rfc3339(&format!("{trimmed}T00:00:00Z")).map_err(|_| invalid())?;
        return Ok(Date {
            at,
            whole_day: true,
        });
    }
    // humantime reads UTC date-times only: take a numeric offset off first.
    let (local, offset_seconds) = split_offset(trimmed).ok_or_else(invalid)?;
    let local = humantime::parse_rfc3339_weak(local).map_err(|_| invalid())?;
    let at = if offset_seconds >= 0 {
        local.checked_sub(Duration::from_secs(offset_seconds.unsigned_abs()))
    } else {
        local.checked_add(Duration::from_secs(offset_seconds.unsigned_abs()))
    }
    .ok_or_else(invalid)?;
    Ok(Date {
        at,
        whole_day: false,
    })
}

/// A date-time without its offset, and the offset east of UTC in seconds; `None` for a
/// malformed offset.
fn split_offset(text: &str) -> Option<(&str, i64)> {
    if let Some(local) = text.strip_suffix(['Z', 'z']) {
        return Some((local, 0));
    }
    // `+HH:MM` or `-HH:MM` after the time (a date's own dashes come before the `T`).
    let time_at = text.find(['T', 't', ' '])?;
    let sign_at = text[time_at..].rfind(['+', '-']).map(|i| i + time_at);
    let Some(sign_at) = sign_at else {
        return Some((text, 0));
    };
    let offset = &text[sign_at + 1..];
    let (hours, minutes) = offset.split_once(':')?;
    let valid = |part: &str, max: i64| {
        (part.len() == 2)
            .then(|| part.parse::<i64>().ok())
            .flatten()
            .filter(|&v| v <= max)
    };
    let seconds = valid(hours, 23)? * 3600 + valid(minutes, 59)? * 60;
    let sign = if text[sign_at..].starts_with('-') {
        -1
    } else {
        1
    };
    Some((&text[..sign_at], sign * seconds))
}

/// The run `run_id` names, or the latest stored when it names none.
fn chosen_or_latest(store: &Store, run_id: Option<i64>) -> anyhow::Result<i64> {
    if let Some(id) = run_id {
        return Ok(id);
    }
    let newest = RunQuery {
        limit: Some(1),
        ..RunQuery::default()
    };
    match store.find_runs(&newest)?.first() {
        Some(latest) => Ok(latest.run_id),
        None => Err(crate::exit::UsageError(format!(
            "no run is stored in {} yet: give a run id once there is one",
            store.address()
        ))
        .into()),
    }
}

/// Runs `ratelab results`.
pub fn run(args: ResultsArgs) -> anyhow::Result<Exit> {
    let at = Address::of(args.db.path.as_deref())?;
    let action = match args.action {
        Action::Import { file } => {
            // Importing is how a new store may start.
            let mut store = at.open()?;
            report::emit(&super::import::import(&mut store, &file)?, None)?;
            return Ok(Exit::Success);
        }
        other => other,
    };
    let store = open_to_read(&at)?;
    let (bytes, out) = match action {
        Action::List { json, filter } => (list(&store, &filter, json)?, None),
        Action::Show {
            run_id,
            json,
            brief,
        } => {
            let run_id = chosen_or_latest(&store, run_id)?;
            let format = show_format(json, brief);
            (report::render(&store.load_run(run_id)?, format)?, None)
        }
        Action::Compare {
            run_ids,
            json,
            format,
            out,
        } => {
            let format = if json { CompareFormat::Json } else { format };
            (compared(&store, &run_ids, format)?, out)
        }
        Action::Report { run_id, out } => {
            report_page(&at, &store, run_id, out)?;
            return Ok(Exit::Success);
        }
        Action::Export {
            run_id,
            format,
            out,
        } => {
            let doc = store.load_run(run_id)?;
            let bytes = match format {
                ExportFormat::Json => report::render(&doc, Format::Json)?,
                ExportFormat::Csv => report::render(&doc, Format::Csv)?,
                ExportFormat::Series => report::render(&doc, Format::SeriesCsv)?,
                ExportFormat::Markdown => report::markdown::render(&doc)?.into_bytes(),
            };
            (bytes, out)
        }
        Action::Import { .. } => (Vec::new(), None),
    };
    report::emit(&bytes, out.as_deref())?;
    Ok(Exit::Success)
}

/// The store at `at`, opened to read: a usage error where there is none, and a note
/// where an older ratelab wrote it.
fn open_to_read(at: &Address) -> anyhow::Result<Store> {
    if !at.exists() {
        return Err(crate::exit::UsageError(format!(
            "no results database at {at} (runs are stored there by default; use --db PATH for another)"
        ))
        .into());
    }
    // Reading never writes: a database of another user's, or an older one, reads as it is.
    let store = at.open_to_read()?;
    if let Some(notice) = store.older() {
        crate::report::terminal::say("ratelab: note: ", &notice);
    }
    Ok(store)
}

/// How `results show` shows a run: JSON, at a glance, or in full.
fn show_format(json: bool, brief: bool) -> Format {
    match (json, brief) {
        (true, _) => Format::Json,
        (false, true) => Format::Table(Detail::Brief),
        (false, false) => Format::Table(Detail::Full),
    }
}

/// `results report`: run `run_id` (the latest by default) as an HTML page, written to
/// `out` (`-` for stdout), or into the store's reports folder.
fn report_page(
    at: &Address,
    store: &Store,
    run_id: Option<i64>,
    out: Option<PathBuf>,
) -> anyhow::Result<()> {
    let run_id = chosen_or_latest(store, run_id)?;
    let page = report::html::render(&workload::Decoded::of(&store.load_run(run_id)?))?;
    let path = match out {
        Some(path) if path.as_os_str() == "-" => None,
        Some(path) => Some(path),
        None => {
            let folder = at.reports_folder();
            std::fs::create_dir_all(&folder).with_context(|| {
                format!(
                    "cannot make {} for the report (give --out FILE, or --out - for stdout)",
                    folder.display()
                )
            })?;
            Some(folder.join(format!("run-{run_id}.html")))
        }
    };
    report::emit(page.as_bytes(), path.as_deref())?;
    if let Some(path) = path {
        crate::report::terminal::say("report: ", &path.display().to_string());
    }
    Ok(())
}

/// `results list`: the runs the filter admits, each with its answer, as a table or JSON.
fn list(store: &Store, filter: &ListFilter, json: bool) -> anyhow::Result<Vec<u8>> {
    let runs: Vec<Listed> = store
        .find_runs(&filter.query())?
        .into_iter()
        .map(|listing| Listed::of(store, listing))
        .collect();
    if json {
        let mut bytes = serde_json::to_vec_pretty(&runs)?;
        bytes.push(b'\n');
        return Ok(bytes);
    }
    let title = if filter.is_empty() {
        format!("{} runs in {}", runs.len(), store.address())
    } else {
        let total = store.list_runs()?.len();
        format!(
            "{} of {total} runs in {} match",
            runs.len(),
            store.address()
        )
    };
    Ok(format!(
        "{}\n",
        report::terminal::table_text(&list_table(title, &runs))
    )
    .into_bytes())
}

/// A run as `results list` shows it: its listing, what it found in one line, and how
/// the user's command it ran ended.
#[derive(Debug, serde::Serialize)]
struct Listed {
    #[serde(flatten)]
    listing: RunListing,
    /// The first line of its summary, without the target the listing names (the step
    /// that limits a `why`, the headline figures of the others); absent when it has
    /// none.
    #[serde(skip_serializing_if = "Option::is_none")]
    answer: Option<String>,
    /// How the command a `why` ran ended: `exit 7`, `signal 9`.
    #[serde(skip_serializing_if = "Option::is_none")]
    command_end: Option<String>,
}

impl Listed {
    /// `listing` with what its stored run says; a run that cannot be read (or decoded)
    /// is listed without them, as `results show` would say why.
    fn of(store: &Store, listing: RunListing) -> Listed {
        let doc = store.load_run(listing.run_id).ok();
        let run = doc.as_ref().map(workload::Decoded::of);
        let answer = run.as_ref().and_then(|run| {
            let doc = run.doc;
            let lines = report::layout::summary(run).ok()?;
            let first = lines.into_iter().find(|l| l.part != DISTURBED)?;
            // The listing names the targets already.
            let text = doc
                .workloads
                .iter()
                .find_map(|w| first.text.strip_prefix(&format!("{}: ", w.target)))
                .unwrap_or(&first.text);
            Some(text.to_string())
        });
        let command_end = run.as_ref().and_then(|run| {
            (0..run.doc.workloads.len())
                .find_map(|index| run.view(index).ok().flatten()?.command_end())
                .map(|end| end.to_string())
        });
        Listed {
            listing,
            answer,
            command_end,
        }
    }
}

/// `results compare`: the runs `run_ids`, each workload's items grouped by its kind, the
/// first run against the others, in `format`.
fn compared(store: &Store, run_ids: &[i64], format: CompareFormat) -> anyhow::Result<Vec<u8>> {
    let runs = run_ids
        .iter()
        .map(|&id| store.load_run(id))
        .collect::<Result<Vec<_>, _>>()?;
    let comparison = comparison_of(&runs)?;
    Ok(match format {
        CompareFormat::Table => report::compare::terminal(&comparison).into_bytes(),
        CompareFormat::Json => report::compare::json(&comparison),
        CompareFormat::Markdown => report::compare::markdown(&comparison).into_bytes(),
    })
}

/// `runs` compared: each workload's items grouped by its kind, the first run against
/// the others.
pub(super) fn comparison_of(runs: &[RunDocument]) -> anyhow::Result<Comparison> {
    let samples = runs
        .iter()
        .map(workload::samples_of)
        .collect::<Result<Vec<_>, _>>()?;
    let sampled: Vec<Sampled> = runs
        .iter()
        .zip(&samples)
        .map(|(run, samples)| Sampled { run, samples })
        .collect();
    Ok(compare(&sampled))
}

/// An RFC 3339 UTC time to the minute, as a listing shows it: `2026-11-30 01:50`.
fn minutes(rfc3339: &str) -> String {
    match rfc3339.get(..16) {
        Some(head) if rfc3339.ends_with('Z') => head.replacen('T', " ", 1),
        _ => rfc3339.to_string(),
    }
}

/// Columns a run's answer takes in the table of `results list`, cut at a space
/// beyond them (`--json` has it whole, and `results show ID` says it in full).
const ANSWER: usize = 48;

/// The table of `results list`.
fn list_table(title: String, runs: &[Listed]) -> Table {
    Table {
        title,
        header: [
            "id",
            "started (UTC)",
            "machine",
            "verb",
            "targets",
            "label",
            "status",
            "answer",
        ]
        .map(String::from)
        .to_vec(),
        rows: runs
            .iter()
            .map(|listed| {
                let r = &listed.listing;
                // A target measured by several workloads (a profile's) is named once.
                let mut targets: Vec<&str> = Vec::new();
                for target in &r.targets {
                    if !targets.contains(&target.as_str()) {
                        targets.push(target);
                    }
                }
                // A command that failed is no plain `complete`.
                let status = match listed.command_end.as_deref() {
                    Some(end) if end != "exit 0" => format!("{}, {end}", r.status.as_str()),
                    _ => r.status.as_str().to_string(),
                };
                vec![
                    r.run_id.to_string(),
                    minutes(&r.started_at),
                    r.machine.clone(),
                    r.verb.clone(),
                    targets.join(", "),
                    r.label.clone().unwrap_or_default(),
                    status,
                    one_line(listed.answer.as_deref().unwrap_or_default(), Some(ANSWER)),
                ]
            })
            .collect(),
        numeric: vec![0],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> SystemTime {
        humantime::parse_rfc3339(text).unwrap()
    }

    #[test]
    fn dates_and_date_times() {
        let day = parse_date("2026-11-23").unwrap();
        assert_eq!(day.at, at("2026-11-23T00:00:00Z"));
        assert!(day.whole_day);
        let utc = parse_date("2026-11-23T10:00:00Z").unwrap();
        assert_eq!(utc.at, at("2026-11-23T10:00:00Z"));
        assert!(!utc.whole_day);
        assert_eq!(
            parse_date("2026-11-23T12:30:00+02:30").unwrap().at,
            at("2026-11-23T10:00:00Z")
        );
        assert_eq!(
            parse_date("2026-11-23T08:00:00-02:00").unwrap().at,
            at("2026-11-23T10:00:00Z")
        );
        assert_eq!(
            parse_date("2026-11-23 10:00:00").unwrap().at,
            at("2026-11-23T10:00:00Z")
        );
        for bad in [
            "yesterday",
            "2026-13-01",
            "2026-11-23T25:00:00Z",
            "2026-11-23T10:00:00+2",
            "2026-11-23 10:00",
            "",
        ] {
            let err = parse_date(bad).unwrap_err();
            assert!(err.contains(&format!("\"{bad}\"")), "{err}");
        }
    }

    #[test]
    fn a_date_alone_for_until_holds_the_whole_day() {
        let filter = ListFilter {
            since: Some(parse_date("2026-11-23").unwrap()),
            until: Some(parse_date("2026-11-23").unwrap()),
            ..ListFilter::default()
        };
        let query = filter.query();
        assert_eq!(query.started_from.as_deref(), Some("2026-11-23T00:00:00Z"));
        assert_eq!(
            query.started_before.as_deref(),
            Some("2026-11-24T00:00:00Z")
        );
        assert_eq!(query.started_until, None);
        let filter = ListFilter {
            until: Some(parse_date("2026-11-23T10:00:00Z").unwrap()),
            label: Some("fix".into()),
            target: Some("ssd".into()),
            ..ListFilter::default()
        };
        let query = filter.query();
        assert_eq!(query.started_until.as_deref(), Some("2026-11-23T10:00:00Z"));
        assert_eq!(query.started_before, None);
        assert_eq!(query.label_contains.as_deref(), Some("fix"));
        assert_eq!(query.target_contains.as_deref(), Some("ssd"));
    }
}
