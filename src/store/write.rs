//! Writing runs: a run begins incomplete, its items arrive stage by stage, and its end
//! (status, summaries, verdicts) is one last transaction.

use rusqlite::params;
use serde_json::Value;

use super::{Error, Store, sql_err, to_json};
use crate::document::RunDocument;

impl Store {
    /// Stores a run that is starting, marked incomplete until [`Store::finish_run`].
    pub fn begin_run(&mut self, doc: &RunDocument) -> Result<i64, Error> {
        let tx = self.conn.savepoint().map_err(|e| sql_err(&self.path, e))?;
        tx.execute(
            "INSERT INTO runs (verb, label, status, incomplete_reason, started_at, ratelab_version, hostname, machine, run_uuid, fleet)
             VALUES (?1, ?2, 'incomplete', 'did not finish', ?3, ?4, ?5, ?6, ?7, ?8)",
            params![
                doc.verb,
                doc.label,
                doc.started_at,
                doc.ratelab_version,
                doc.machine.hostname,
                to_json(&doc.machine),
                doc.run_uuid,
                doc.fleet.as_ref().map(to_json)
            ],
        )
        .map_err(|e| sql_err(&self.path, e))?;
        let run_id = tx.last_insert_rowid();
        for (index, workload) in doc.workloads.iter().enumerate() {
            tx.execute(
                "INSERT INTO workloads (run_id, idx, kind, target, params, context, alone_of, measured_by)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                params![
                    run_id,
                    index as i64,
                    workload.kind,
                    workload.target,
                    to_json(&workload.params),
                    to_json(&workload.context),
                    workload.alone_of.map(|i| i as i64),
                    workload.measured_by.map(|i| i as i64)
                ],
            )
            .map_err(|e| sql_err(&self.path, e))?;
        }
        tx.commit().map_err(|e| sql_err(&self.path, e))?;
        Ok(run_id)
    }

    /// Appends items of one workload, numbered from `first_seq`, in one transaction.
    pub fn append_items(
        &mut self,
        run_id: i64,
        workload: usize,
        first_seq: usize,
        items: &[Value],
    ) -> Result<(), Error> {
        let tx = self.conn.savepoint().map_err(|e| sql_err(&self.path, e))?;
        {
            let mut insert = tx
                .prepare_cached("INSERT INTO items (run_id, workload_idx, seq, op, body) VALUES (?1, ?2, ?3, ?4, ?5)")
                .map_err(|e| sql_err(&self.path, e))?;
            for (offset, item) in items.iter().enumerate() {
                insert
                    .execute(params![
                        run_id,
                        workload as i64,
                        (first_seq + offset) as i64,
                        item.get("op").and_then(Value::as_str),
                        item.to_string()
                    ])
                    .map_err(|e| sql_err(&self.path, e))?;
            }
        }
        tx.commit().map_err(|e| sql_err(&self.path, e))
    }

    /// Stores the end of a run: status, contexts, summaries and verdicts.
    pub fn finish_run(&mut self, doc: &RunDocument) -> Result<(), Error> {
        let run_id = doc.run_id.expect("a stored run has an id");
        let tx = self.conn.savepoint().map_err(|e| sql_err(&self.path, e))?;
        tx.execute(
            "UPDATE runs SET status = ?2, incomplete_reason = ?3, finished_at = ?4, contention = ?5,
                 runner_cpu_seconds = ?6, runner_wall_seconds = ?7 WHERE id = ?1",
            params![
                run_id,
                doc.status.as_str(),
                doc.incomplete_reason,
                doc.finished_at,
                doc.contention.as_ref().map(to_json),
                doc.runner_cpu_seconds,
                doc.runner_wall_seconds
            ],
        )
        .map_err(|e| sql_err(&self.path, e))?;
        for (index, workload) in doc.workloads.iter().enumerate() {
            tx.execute(
                "UPDATE workloads SET context = ?3, summary = ?4, series = ?5, warnings = ?6
                 WHERE run_id = ?1 AND idx = ?2",
                params![
                    run_id,
                    index as i64,
                    to_json(&workload.context),
                    to_json(&workload.summary),
                    workload.series.as_ref().map(to_json),
                    to_json(&workload.warnings)
                ],
            )
            .map_err(|e| sql_err(&self.path, e))?;
        }
        tx.execute("DELETE FROM verdicts WHERE run_id = ?1", params![run_id])
            .map_err(|e| sql_err(&self.path, e))?;
        for (seq, verdict) in doc.verdicts.iter().enumerate() {
            tx.execute(
                "INSERT INTO verdicts (run_id, seq, code, severity, message, workload_idx) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                params![
                    run_id,
                    seq as i64,
                    verdict.code,
                    to_json(&verdict.severity).trim_matches('"'),
                    verdict.message,
                    verdict.workload.map(|w| w as i64)
                ],
            )
            .map_err(|e| sql_err(&self.path, e))?;
        }
        tx.commit().map_err(|e| sql_err(&self.path, e))
    }
}
