//! Writing runs: a run begins incomplete, its items arrive stage by stage, and its end
//! (status, summaries, verdicts) is one last transaction.

use serde_json::Value;

use super::database::{Database, DbError};
use super::{Error, Store, to_json};
use crate::document::RunDocument;

impl Store {
    /// Stores a run that is starting, marked incomplete until [`Store::finish_run`].
    pub fn begin_run(&mut self, doc: &RunDocument) -> Result<i64, Error> {
        self.atomically(|db| {
            insert_run(db, doc)
                .and_then(|id| {
                    id.ok_or_else(|| {
                        DbError::new(format!(
                            "a run with uuid {} is stored already",
                            doc.run_uuid.as_deref().unwrap_or_default()
                        ))
                    })
                })
                .map_err(|e| self.sql(e))
        })
    }

    /// Appends items of one workload, numbered from `first_seq`, in one transaction.
    pub fn append_items(
        &mut self,
        run_id: i64,
        workload: usize,
        first_seq: usize,
        items: &[Value],
    ) -> Result<(), Error> {
        self.atomically(|db| {
            insert_items(db, run_id, workload, first_seq, items).map_err(|e| self.sql(e))
        })
    }

    /// Stores the end of a run: status, contexts, summaries and verdicts.
    pub fn finish_run(&mut self, doc: &RunDocument) -> Result<(), Error> {
        self.atomically(|db| store_end(db, doc).map_err(|e| self.sql(e)))
    }
}

/// Inserts a run that is starting and its workloads; returns its id, or `None` when a
/// run with its UUID is here already (and then inserts nothing).
pub(super) fn insert_run(db: &mut dyn Database, doc: &RunDocument) -> Result<Option<i64>, DbError> {
    let rows = db.query(
        "INSERT INTO runs (verb, label, status, incomplete_reason, started_at, ratelab_version, hostname, machine, run_uuid, fleet)
         VALUES (?1, ?2, 'incomplete', 'did not finish', ?3, ?4, ?5, ?6, ?7, ?8)
         ON CONFLICT (run_uuid) DO NOTHING RETURNING id",
        &[
            doc.verb.as_str().into(),
            doc.label.as_deref().into(),
            doc.started_at.as_str().into(),
            doc.ratelab_version.as_str().into(),
            doc.machine.hostname.as_str().into(),
            to_json(&doc.machine).into(),
            doc.run_uuid.as_deref().into(),
            doc.fleet.as_ref().map(to_json).into(),
        ],
    )?;
    let Some(row) = rows.first() else {
        return Ok(None);
    };
    let run_id = row.int(0)?;
    for (index, workload) in doc.workloads.iter().enumerate() {
        db.execute(
            "INSERT INTO workloads (run_id, idx, kind, target, params, context, alone_of, measured_by)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
            &[
                run_id.into(),
                (index as i64).into(),
                workload.kind.as_str().into(),
                workload.target.as_str().into(),
                to_json(&workload.params).into(),
                to_json(&workload.context).into(),
                workload.alone_of.map(|i| i as i64).into(),
                workload.measured_by.map(|i| i as i64).into(),
            ],
        )?;
    }
    Ok(Some(run_id))
}

/// Items one INSERT carries: a round trip per item would cost a server on another
/// machine a millisecond each.
const ITEMS_PER_INSERT: usize = 100;

/// Inserts items of one workload, numbered from `first_seq`, many to a statement.
pub(super) fn insert_items(
    db: &mut dyn Database,
    run_id: i64,
    workload: usize,
    first_seq: usize,
    items: &[Value],
) -> Result<(), DbError> {
    for (chunk_index, chunk) in items.chunks(ITEMS_PER_INSERT).enumerate() {
        let rows: Vec<String> = (0..chunk.len())
            .map(|row| {
                let first = row * 5 + 1;
                format!(
                    "(?{}, ?{}, ?{}, ?{}, ?{})",
                    first,
                    first + 1,
                    first + 2,
                    first + 3,
                    first + 4
                )
            })
            .collect();
        let mut params = Vec::with_capacity(chunk.len() * 5);
        for (offset, item) in chunk.iter().enumerate() {
            let seq = first_seq + chunk_index * ITEMS_PER_INSERT + offset;
            params.extend([
                run_id.into(),
                (workload as i64).into(),
                (seq as i64).into(),
                item.get("op").and_then(Value::as_str).into(),
                item.to_string().into(),
            ]);
        }
        db.execute(
            &format!(
                "INSERT INTO items (run_id, workload_idx, seq, op, body) VALUES {}",
                rows.join(", ")
            ),
            &params,
        )?;
    }
    Ok(())
}

/// Stores the end of a run: status, contexts, summaries and verdicts.
pub(super) fn store_end(db: &mut dyn Database, doc: &RunDocument) -> Result<(), DbError> {
    let run_id = doc.run_id.expect("a stored run has an id");
    db.execute(
        "UPDATE runs SET status = ?2, incomplete_reason = ?3, finished_at = ?4, contention = ?5,
             runner_cpu_seconds = ?6, runner_wall_seconds = ?7, interference = ?8 WHERE id = ?1",
        &[
            run_id.into(),
            doc.status.as_str().into(),
            doc.incomplete_reason.as_deref().into(),
            doc.finished_at.as_deref().into(),
            doc.contention.as_ref().map(to_json).into(),
            doc.runner_cpu_seconds.into(),
            doc.runner_wall_seconds.into(),
            doc.interference.as_ref().map(to_json).into(),
        ],
    )?;
    for (index, workload) in doc.workloads.iter().enumerate() {
        db.execute(
            "UPDATE workloads SET context = ?3, summary = ?4, series = ?5, warnings = ?6
             WHERE run_id = ?1 AND idx = ?2",
            &[
                run_id.into(),
                (index as i64).into(),
                to_json(&workload.context).into(),
                to_json(&workload.summary).into(),
                workload.series.as_ref().map(to_json).into(),
                to_json(&workload.warnings).into(),
            ],
        )?;
    }
    db.execute("DELETE FROM verdicts WHERE run_id = ?1", &[run_id.into()])?;
    for (seq, verdict) in doc.verdicts.iter().enumerate() {
        db.execute(
            "INSERT INTO verdicts (run_id, seq, code, severity, message, workload_idx) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            &[
                run_id.into(),
                (seq as i64).into(),
                verdict.code.as_str().into(),
                to_json(&verdict.severity).trim_matches('"').into(),
                verdict.message.as_str().into(),
                verdict.workload.map(|w| w as i64).into(),
            ],
        )?;
    }
    Ok(())
}
