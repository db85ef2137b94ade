//! `ratelab results import FILE`: runs copied in from another results database or from
//! run documents (`--json` output, `results export`), each once, keeping its identity.

use std::path::Path;

use anyhow::Context as _;

use crate::db::{Store, identity};
use crate::document::RunDocument;
use crate::exit::UsageError;

/// The first bytes of every SQLite database file.
const SQLITE_HEADER: &[u8] = b"SQLite format 3\0";

/// Imports every run of `file` into `store`; says what it did, a line per run.
pub fn import(store: &mut Store, file: &Path) -> anyhow::Result<Vec<u8>> {
    let bytes = std::fs::read(file).map_err(|e| {
        UsageError(format!(
            "cannot read {} to import: {}",
            file.display(),
            e.to_string().to_lowercase()
        ))
    })?;
    let runs = if bytes.starts_with(SQLITE_HEADER) {
        from_database(file)?
    } else {
        from_documents(file, &bytes)?
    };
    let mut out = String::new();
    let mut added = 0;
    for run in &runs {
        let uuid = identity(run);
        let source = run
            .run_id
            .map_or(String::new(), |id| format!("run {id} of the file, "));
        match store
            .import_run(run)
            .with_context(|| format!("cannot import {source}{uuid}"))?
        {
            Some(id) => {
                added += 1;
                out.push_str(&format!(
                    "imported {source}{} {} on {} as run {id}\n",
                    run.verb, run.started_at, run.machine.hostname
                ));
            }
            None => out.push_str(&format!(
                "{source}{} {} on {}: already here ({uuid})\n",
                run.verb, run.started_at, run.machine.hostname
            )),
        }
    }
    out.push_str(&format!(
        "{added} of {} runs imported from {}\n",
        runs.len(),
        file.display()
    ));
    Ok(out.into_bytes())
}

/// Every run of another results database, read from a copy so that the file itself is
/// never migrated or written.
fn from_database(file: &Path) -> anyhow::Result<Vec<RunDocument>> {
    let dir = tempfile::tempdir().context("cannot make a folder to read the database in")?;
    let copy = dir.path().join("import.db");
    std::fs::copy(file, &copy).with_context(|| format!("cannot copy {}", file.display()))?;
    // A store in use keeps its latest runs in its write-ahead log until a checkpoint.
    let mut wal = file.as_os_str().to_owned();
    wal.push("-wal");
    if Path::new(&wal).exists() {
        std::fs::copy(&wal, dir.path().join("import.db-wal"))
            .with_context(|| format!("cannot copy {}", Path::new(&wal).display()))?;
    }
    let source = Store::open(&copy).with_context(|| {
        format!(
            "{} is not a results database ratelab can read",
            file.display()
        )
    })?;
    let mut runs = Vec::new();
    for listing in source.find_runs(&crate::db::RunQuery {
        oldest_first: true,
        ..Default::default()
    })? {
        runs.push(source.load_run(listing.run_id)?);
    }
    Ok(runs)
}

/// Run documents: one, or an array of them.
fn from_documents(file: &Path, bytes: &[u8]) -> anyhow::Result<Vec<RunDocument>> {
    let value: serde_json::Value = serde_json::from_slice(bytes).map_err(|e| {
        UsageError(format!(
            "{} is neither a results database nor a JSON run document: {e}",
            file.display()
        ))
    })?;
    let documents = match value {
        serde_json::Value::Array(items) => items,
        one => vec![one],
    };
    documents
        .into_iter()
        .enumerate()
        .map(|(n, doc)| {
            serde_json::from_value(doc).map_err(|e| {
                UsageError(format!(
                    "{}: document {} is not a ratelab run document: {e}",
                    file.display(),
                    n + 1
                ))
                .into()
            })
        })
        .collect()
}
