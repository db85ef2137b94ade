//! Reading runs back: the list of runs, and a whole run as its document.

use rusqlite::{OptionalExtension, params};
use serde_json::Value;

use super::{Error, Store};
use crate::document::{RunDocument, RunStatus, Severity, Verdict, WorkloadRecord};

impl Store {
    /// Loads a whole run as its document.
    pub fn load_run(&self, run_id: i64) -> Result<RunDocument, Error> {
        let row = self
            .conn
            .query_row(
                "SELECT verb, label, status, incomplete_reason, started_at, finished_at, ratelab_version,
                        machine, contention, runner_cpu_seconds, runner_wall_seconds, run_uuid, fleet
                 FROM runs WHERE id = ?1",
                params![run_id],
                |r| {
                    Ok(StoredRun {
                        verb: r.get(0)?,
                        label: r.get(1)?,
                        status: r.get(2)?,
                        incomplete_reason: r.get(3)?,
                        started_at: r.get(4)?,
                        finished_at: r.get(5)?,
                        version: r.get(6)?,
                        machine: r.get(7)?,
                        contention: r.get(8)?,
                        runner_cpu_seconds: r.get(9)?,
                        runner_wall_seconds: r.get(10)?,
                        run_uuid: r.get(11)?,
                        fleet: r.get(12)?,
                    })
                },
            )
            .optional()
            .map_err(|e| self.sql(e))?
            .ok_or(Error::NotFound(run_id))?;
        Ok(RunDocument {
            run_id: Some(run_id),
            run_uuid: row.run_uuid,
            status: RunStatus::parse(&row.status).ok_or_else(|| Error::Corrupt {
                run: run_id,
                what: "status",
                detail: row.status.clone(),
            })?,
            incomplete_reason: row.incomplete_reason,
            ratelab_version: row.version,
            verb: row.verb,
            label: row.label,
            started_at: row.started_at,
            finished_at: row.finished_at,
            machine: parse(run_id, "machine", &row.machine)?,
            workloads: self.load_workloads(run_id)?,
            contention: row
                .contention
                .map(|c| parse(run_id, "contention", &c))
                .transpose()?,
            verdicts: self.load_verdicts(run_id)?,
            runner_cpu_seconds: row.runner_cpu_seconds,
            runner_wall_seconds: row.runner_wall_seconds,
            fleet: row.fleet.map(|f| parse(run_id, "fleet", &f)).transpose()?,
        })
    }

    fn load_workloads(&self, run_id: i64) -> Result<Vec<WorkloadRecord>, Error> {
        let mut query = self
            .conn
            .prepare(
                "SELECT idx, kind, target, params, context, summary, series, alone_of, warnings, measured_by
                 FROM workloads WHERE run_id = ?1 ORDER BY idx",
            )
            .map_err(|e| self.sql(e))?;
        let rows: Vec<StoredWorkload> = query
            .query_map(params![run_id], |r| {
                Ok(StoredWorkload {
                    idx: r.get(0)?,
                    kind: r.get(1)?,
                    target: r.get(2)?,
                    params: r.get(3)?,
                    context: r.get(4)?,
                    summary: r.get(5)?,
                    series: r.get(6)?,
                    alone_of: r.get(7)?,
                    warnings: r.get(8)?,
                    measured_by: r.get(9)?,
                })
            })
            .map_err(|e| self.sql(e))?
            .collect::<Result<_, _>>()
            .map_err(|e| self.sql(e))?;
        let mut items_query = self
            .conn
            .prepare("SELECT body FROM items WHERE run_id = ?1 AND workload_idx = ?2 ORDER BY seq")
            .map_err(|e| self.sql(e))?;
        let mut workloads = Vec::with_capacity(rows.len());
        for row in rows {
            let bodies: Vec<String> = items_query
                .query_map(params![run_id, row.idx], |r| r.get(0))
                .map_err(|e| self.sql(e))?
                .collect::<Result<_, _>>()
                .map_err(|e| self.sql(e))?;
            let items: Result<Vec<Value>, Error> =
                bodies.iter().map(|b| parse(run_id, "item", b)).collect();
            workloads.push(WorkloadRecord {
                kind: row.kind,
                target: row.target,
                params: parse(run_id, "params", &row.params)?,
                context: parse(run_id, "context", &row.context)?,
                items: items?,
                summary: row
                    .summary
                    .map(|s| parse(run_id, "summary", &s))
                    .transpose()?
                    .unwrap_or(Value::Null),
                series: row
                    .series
                    .map(|s| parse(run_id, "series", &s))
                    .transpose()?,
                alone_of: row.alone_of.map(|i| i as usize),
                measured_by: row.measured_by.map(|i| i as usize),
                warnings: row
                    .warnings
                    .map(|w| parse(run_id, "warnings", &w))
                    .transpose()?
                    .unwrap_or_default(),
            });
        }
        Ok(workloads)
    }

    fn load_verdicts(&self, run_id: i64) -> Result<Vec<Verdict>, Error> {
        let mut query = self
            .conn
            .prepare("SELECT code, severity, message, workload_idx FROM verdicts WHERE run_id = ?1 ORDER BY seq")
            .map_err(|e| self.sql(e))?;
        let rows: Vec<(String, String, String, Option<i64>)> = query
            .query_map(params![run_id], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
            })
            .map_err(|e| self.sql(e))?
            .collect::<Result<_, _>>()
            .map_err(|e| self.sql(e))?;
        rows.into_iter()
            .map(|(code, severity, message, workload)| {
                Ok(Verdict {
                    code,
                    severity: serde_json::from_value::<Severity>(Value::String(severity.clone()))
                        .map_err(|_| Error::Corrupt {
                        run: run_id,
                        what: "verdict severity",
                        detail: severity,
                    })?,
                    message,
                    workload: workload.map(|w| w as usize),
                })
            })
            .collect()
    }
}

/// One row of the runs table, as stored.
struct StoredRun {
    verb: String,
    label: Option<String>,
    status: String,
    incomplete_reason: Option<String>,
    started_at: String,
    finished_at: Option<String>,
    version: String,
    machine: String,
    contention: Option<String>,
    runner_cpu_seconds: Option<f64>,
    runner_wall_seconds: Option<f64>,
    fleet: Option<String>,
    run_uuid: Option<String>,
}

/// One row of the workloads table, as stored.
struct StoredWorkload {
    idx: i64,
    kind: String,
    target: String,
    params: String,
    context: String,
    summary: Option<String>,
    series: Option<String>,
    alone_of: Option<i64>,
    measured_by: Option<i64>,
    warnings: Option<String>,
}

/// A stored JSON value read back as `T`.
fn parse<T: serde::de::DeserializeOwned>(
    run: i64,
    what: &'static str,
    text: &str,
) -> Result<T, Error> {
    serde_json::from_str(text).map_err(|e| Error::Corrupt {
        run,
        what,
        detail: e.to_string(),
    })
}
