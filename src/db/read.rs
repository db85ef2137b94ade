//! Reading runs back: the list of runs, and a whole run as its document.

use serde_json::Value;

use super::database::DbError;
use super::{Error, Store};
use crate::document::{RunDocument, RunStatus, Severity, Verdict, WorkloadRecord};

impl Store {
    /// Loads a whole run as its document.
    pub fn load_run(&self, run_id: i64) -> Result<RunDocument, Error> {
        let rows = self.reading(|db| {
            db.query(
                "SELECT verb, label, status, incomplete_reason, started_at, finished_at, ratelab_version,
                        machine, contention, runner_cpu_seconds, runner_wall_seconds, run_uuid, fleet,
                        interference
                 FROM runs WHERE id = ?1",
                &[run_id.into()],
            )
            .map_err(|e| self.sql(e))
        })?;
        let r = rows.first().ok_or(Error::NotFound(run_id))?;
        let row = (|| {
            Ok::<_, DbError>(StoredRun {
                verb: r.text(0)?,
                label: r.opt_text(1)?,
                status: r.text(2)?,
                incomplete_reason: r.opt_text(3)?,
                started_at: r.text(4)?,
                finished_at: r.opt_text(5)?,
                version: r.text(6)?,
                machine: r.text(7)?,
                contention: r.opt_text(8)?,
                runner_cpu_seconds: r.opt_real(9)?,
                runner_wall_seconds: r.opt_real(10)?,
                run_uuid: r.opt_text(11)?,
                fleet: r.opt_text(12)?,
                interference: r.opt_text(13)?,
            })
        })()
        .map_err(|e| self.sql(e))?;
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
            interference: row
                .interference
                .map(|i| parse(run_id, "interference", &i))
                .transpose()?,
        })
    }

    fn load_workloads(&self, run_id: i64) -> Result<Vec<WorkloadRecord>, Error> {
        let (rows, bodies) = self
            .reading(|db| {
                let rows = db.query(
                    "SELECT idx, kind, target, params, context, summary, series, alone_of, warnings, measured_by
                     FROM workloads WHERE run_id = ?1 ORDER BY idx",
                    &[run_id.into()],
                )?;
                let bodies = db.query(
                    "SELECT workload_idx, body FROM items WHERE run_id = ?1 ORDER BY workload_idx, seq",
                    &[run_id.into()],
                )?;
                Ok((rows, bodies))
            })
            .map_err(|e| self.sql(e))?;
        let rows: Vec<StoredWorkload> = rows
            .iter()
            .map(|r| {
                Ok(StoredWorkload {
                    idx: r.int(0)?,
                    kind: r.text(1)?,
                    target: r.text(2)?,
                    params: r.text(3)?,
                    context: r.text(4)?,
                    summary: r.opt_text(5)?,
                    series: r.opt_text(6)?,
                    alone_of: r.opt_int(7)?,
                    warnings: r.opt_text(8)?,
                    measured_by: r.opt_int(9)?,
                })
            })
            .collect::<Result<_, DbError>>()
            .map_err(|e| self.sql(e))?;
        let mut items: Vec<(i64, Value)> = Vec::with_capacity(bodies.len());
        for body in &bodies {
            let (idx, text) =
                (|| Ok::<_, DbError>((body.int(0)?, body.text(1)?)))().map_err(|e| self.sql(e))?;
            items.push((idx, parse(run_id, "item", &text)?));
        }
        let mut workloads = Vec::with_capacity(rows.len());
        for row in rows {
            workloads.push(WorkloadRecord {
                kind: row.kind,
                target: row.target,
                params: parse(run_id, "params", &row.params)?,
                context: parse(run_id, "context", &row.context)?,
                items: items
                    .iter()
                    .filter(|(idx, _)| *idx == row.idx)
                    .map(|(_, item)| item.clone())
                    .collect(),
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
        let rows = self.reading(|db| {
            db.query(
                "SELECT code, severity, message, workload_idx FROM verdicts WHERE run_id = ?1 ORDER BY seq",
                &[run_id.into()],
            )
            .map_err(|e| self.sql(e))
        })?;
        rows.iter()
            .map(|r| {
                let (code, severity, message, workload) =
                    (|| Ok::<_, DbError>((r.text(0)?, r.text(1)?, r.text(2)?, r.opt_int(3)?)))()
                        .map_err(|e| self.sql(e))?;
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
    interference: Option<String>,
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
