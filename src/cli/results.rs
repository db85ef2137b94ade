//! `ratelab results list|show|export`: views of stored runs.

use std::path::PathBuf;

use clap::{Args, Subcommand, ValueEnum};

use crate::exit::Exit;
use crate::report::{self, Format, Table};
use crate::store::Store;

/// Options of `ratelab results`.
#[derive(Debug, Args)]
pub struct ResultsArgs {
    /// Results database [default: $XDG_DATA_HOME/ratelab/results.db].
    #[arg(long, value_name = "PATH", global = true)]
    pub db: Option<PathBuf>,
    /// What to do.
    #[command(subcommand)]
    pub action: Action,
}

/// The `results` subcommands.
#[derive(Debug, Subcommand)]
pub enum Action {
    /// Every stored run: id, date, verb, targets, label and status.
    List {
        /// One JSON document on stdout.
        #[arg(long)]
        json: bool,
    },
    /// One run's tables and verdicts.
    Show {
        /// The run id (see `results list`).
        #[arg(value_name = "ID")]
        run_id: i64,
        /// The run's JSON document instead.
        #[arg(long)]
        json: bool,
    },
    /// One run as JSON (the document), CSV (a row per item) or series (CSV, a row per sample).
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
}

/// Runs `ratelab results`.
pub fn run(args: ResultsArgs) -> anyhow::Result<Exit> {
    let path = Store::path(args.db.as_deref())?;
    if !path.exists() {
        return Err(crate::exit::UsageError(format!(
            "no results database at {} (runs are stored there by default; use --db PATH for another)",
            path.display()
        ))
        .into());
    }
    let store = Store::open(&path)?;
    match args.action {
        Action::List { json } => {
            let runs = store.list_runs()?;
            let bytes = if json {
                let mut bytes = serde_json::to_vec_pretty(&runs)?;
                bytes.push(b'\n');
                bytes
            } else {
                let table = Table {
                    title: format!("{} runs in {}", runs.len(), path.display()),
                    header: ["id", "started", "verb", "targets", "label", "status"]
                        .map(String::from)
                        .to_vec(),
                    rows: runs
                        .iter()
                        .map(|r| {
                            vec![
                                r.run_id.to_string(),
                                r.started_at.clone(),
                                r.verb.clone(),
                                r.targets.join(", "),
                                r.label.clone().unwrap_or_default(),
                                r.status.clone(),
                            ]
                        })
                        .collect(),
                    numeric: vec![0],
                };
                format!("{}\n", report::terminal::table_text(&table)).into_bytes()
            };
            report::emit(&bytes, None)?;
        }
        Action::Show { run_id, json } => {
            let doc = store.load_run(run_id)?;
            let format = if json { Format::Json } else { Format::Table };
            report::emit(&report::render(&doc, format)?, None)?;
        }
        Action::Export {
            run_id,
            format,
            out,
        } => {
            let doc = store.load_run(run_id)?;
            let format = match format {
                ExportFormat::Json => Format::Json,
                ExportFormat::Csv => Format::Csv,
                ExportFormat::Series => Format::SeriesCsv,
            };
            report::emit(&report::render(&doc, format)?, out.as_deref())?;
        }
    }
    Ok(Exit::Success)
}
