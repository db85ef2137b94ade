//! Reading runs back: the list of runs, and a whole run as its document.

use rusqlite::{OptionalExtension, params};
use serde_json::Value;

use super::{Error, RunListing, Store};
use crate::document::{RunDocument, RunStatus, Severity, Verdict, WorkloadRecord};

impl Store {
    /// Every run, newest first.
    pub fn list_runs(&self) -> Result<Vec<RunListing>, Error> {
        let mut query = self
            .conn
            .prepare(
                "SELECT r.id, r.started_at, r.verb, r.label, r.status,
                        (SELECT group_concat(target, char(10)) FROM
                           (SELECT target FROM workloads w WHERE w.run_id = r.id ORDER BY idx))
                 FROM runs r ORDER BY r.id DESC",
            )
            .map_err(|e| self.sql(e))?;
        let rows = query
            .query_map([], |row| {
                let targets: Option<String> = row.get(5)?;
                Ok(RunListing {
                    run_id: row.get(0)?,
                    started_at: row.get(1)?,
                    verb: row.get(2)?,
                    label: row.get(3)?,
                    status: row.get(4)?,
                    targets: targets
                        .map(|t| t.lines().map(str::to_string).collect())
                        .unwrap_or_default(),
                })
            })
            .map_err(|e| self.sql(e))?;
        rows.collect::<Result<_, _>>().map_err(|e| self.sql(e))
    }

    /// Loads a whole run as its document.
    pub fn load_run(&self, run_id: i64) -> Result<RunDocument, Error> {
        type RunRow = (
            String,
            Option<String>,
            String,
            Option<String>,
            String,
            Option<String>,
            String,
            String,
            Option<String>,
        );
        let row: Option<RunRow> = self
            .conn
            .query_row(
                "SELECT verb, label, status, incomplete_reason, started_at, finished_at, ratelab_version, machine, contention
                 FROM runs WHERE id = ?1",
                params![run_id],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?, r.get(6)?, r.get(7)?, r.get(8)?)),
            )
            .optional()
            .map_err(|e| self.sql(e))?;
        let Some((
            verb,
            label,
            status,
            incomplete_reason,
            started_at,
            finished_at,
            version,
            machine,
            contention,
        )) = row
        else {
            return Err(Error::NotFound(run_id));
        };
        let corrupt = |what, detail: String| Error::Corrupt {
            run: run_id,
            what,
            detail,
        };
        Ok(RunDocument {
            run_id: Some(run_id),
            status: RunStatus::parse(&status).ok_or_else(|| corrupt("status", status.clone()))?,
            incomplete_reason,
            ratelab_version: version,
            verb,
            label,
            started_at,
            finished_at,
            machine: serde_json::from_str(&machine)
                .map_err(|e| corrupt("machine", e.to_string()))?,
            workloads: self.load_workloads(run_id)?,
            contention: contention
                .map(|c| serde_json::from_str(&c).map_err(|e| corrupt("contention", e.to_string())))
                .transpose()?,
            verdicts: self.load_verdicts(run_id)?,
        })
    }

    fn load_workloads(&self, run_id: i64) -> Result<Vec<WorkloadRecord>, Error> {
        let parse = |what, text: &str| {
            serde_json::from_str::<Value>(text).map_err(|e| Error::Corrupt {
                run: run_id,
                what,
                detail: e.to_string(),
            })
        };
        let mut query = self
            .conn
            .prepare("SELECT idx, kind, target, params, context, summary, series FROM workloads WHERE run_id = ?1 ORDER BY idx")
            .map_err(|e| self.sql(e))?;
        type WorkloadRow = (
            i64,
            String,
            String,
            String,
            String,
            Option<String>,
            Option<String>,
        );
        let rows: Vec<WorkloadRow> = query
            .query_map(params![run_id], |r| {
                Ok((
                    r.get(0)?,
                    r.get(1)?,
                    r.get(2)?,
                    r.get(3)?,
                    r.get(4)?,
                    r.get(5)?,
                    r.get(6)?,
                ))
            })
            .map_err(|e| self.sql(e))?
            .collect::<Result<_, _>>()
            .map_err(|e| self.sql(e))?;
        let mut items_query = self
            .conn
            .prepare("SELECT body FROM items WHERE run_id = ?1 AND workload_idx = ?2 ORDER BY seq")
            .map_err(|e| self.sql(e))?;
        let mut workloads = Vec::with_capacity(rows.len());
        for (idx, kind, target, params, context, summary, series) in rows {
            let bodies: Vec<String> = items_query
                .query_map(params![run_id, idx], |r| r.get(0))
                .map_err(|e| self.sql(e))?
                .collect::<Result<_, _>>()
                .map_err(|e| self.sql(e))?;
            workloads.push(WorkloadRecord {
                kind,
                target,
                params: parse("params", &params)?,
                context: parse("context", &context)?,
                items: bodies
                    .iter()
                    .map(|b| parse("item", b))
                    .collect::<Result<_, _>>()?,
                summary: summary
                    .map(|s| parse("summary", &s))
                    .transpose()?
                    .unwrap_or(Value::Null),
                series: series.map(|s| parse("series", &s)).transpose()?,
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
