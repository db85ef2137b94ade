//! The results database: every run, its machine, every item and verdict, in SQLite
//! (WAL mode, versioned migrations). Each stage of a run is its own transaction, so a
//! crash or Ctrl-C loses nothing stored before it, and other runs are never touched.

mod migrations;

use std::path::{Path, PathBuf};

use rusqlite::{Connection, OptionalExtension, params};
use serde_json::Value;

use crate::document::{RunDocument, RunStatus, Severity, Verdict, WorkloadRecord};
use crate::exit::Exit;

/// What went wrong with the results database.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The database file could not be opened or created.
    #[error("cannot open the results database {path}: {source}")]
    Open {
        path: PathBuf,
        #[source]
        source: rusqlite::Error,
    },
    /// Its folder could not be created.
    #[error("cannot create the folder of the results database {path}: {source}")]
    Folder {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The schema could not be brought up to date.
    #[error("cannot upgrade the results database {path}: {source}")]
    Migrate {
        path: PathBuf,
        #[source]
        source: rusqlite_migration::Error,
    },
    /// A query failed.
    #[error("results database {path}: {source}")]
    Sql {
        path: PathBuf,
        #[source]
        source: rusqlite::Error,
    },
    /// No run has that id.
    #[error("no run {0} in the results database (see `ratelab results list`)")]
    NotFound(i64),
    /// A stored value could not be read back.
    #[error("run {run}: stored {what} is unreadable: {detail}")]
    Corrupt {
        run: i64,
        what: &'static str,
        detail: String,
    },
}

impl Error {
    /// The exit code this error ends the process with.
    pub fn exit(&self) -> Exit {
        match self {
            Error::NotFound(_) => Exit::Usage,
            _ => Exit::Environment,
        }
    }
}

/// One line of `results list`.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct RunListing {
    /// Run id.
    pub run_id: i64,
    /// Start time, RFC 3339.
    pub started_at: String,
    /// The verb that made it.
    pub verb: String,
    /// Targets of its workloads.
    pub targets: Vec<String>,
    /// The user's label.
    pub label: Option<String>,
    /// `complete` or `incomplete`.
    pub status: String,
}

/// An open results database.
pub struct Store {
    conn: Connection,
    path: PathBuf,
}

impl Store {
    /// Where results go without `--db`: `$XDG_DATA_HOME/ratelab/results.db`.
    pub fn default_path() -> PathBuf {
        dirs::data_dir()
            .unwrap_or_else(|| PathBuf::from(".local/share"))
            .join("ratelab")
            .join("results.db")
    }

    /// Opens (creating if needed) and migrates the database at `path`.
    pub fn open(path: &Path) -> Result<Store, Error> {
        if let Some(folder) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(folder).map_err(|source| Error::Folder {
                path: folder.to_path_buf(),
                source,
            })?;
        }
        let open_err = |source| Error::Open {
            path: path.to_path_buf(),
            source,
        };
        let mut conn = Connection::open(path).map_err(open_err)?;
        conn.busy_timeout(std::time::Duration::from_secs(10))
            .map_err(open_err)?;
        conn.pragma_update(None, "journal_mode", "WAL")
            .map_err(open_err)?;
        conn.pragma_update(None, "foreign_keys", "ON")
            .map_err(open_err)?;
        migrations::migrations()
            .to_latest(&mut conn)
            .map_err(|source| Error::Migrate {
                path: path.to_path_buf(),
                source,
            })?;
        Ok(Store {
            conn,
            path: path.to_path_buf(),
        })
    }

    fn sql(&self, source: rusqlite::Error) -> Error {
        Error::Sql {
            path: self.path.clone(),
            source,
        }
    }

    /// Stores a run that is starting, marked incomplete until [`Store::finish_run`].
    pub fn begin_run(&mut self, doc: &RunDocument) -> Result<i64, Error> {
        let tx = self
            .conn
            .transaction()
            .map_err(|e| sql_err(&self.path, e))?;
        tx.execute(
            "INSERT INTO runs (verb, label, status, incomplete_reason, started_at, ratelab_version, hostname, machine)
             VALUES (?1, ?2, 'incomplete', 'did not finish', ?3, ?4, ?5, ?6)",
            params![
                doc.verb,
                doc.label,
                doc.started_at,
                doc.ratelab_version,
                doc.machine.hostname,
                to_json(&doc.machine)
            ],
        )
        .map_err(|e| sql_err(&self.path, e))?;
        let run_id = tx.last_insert_rowid();
        for (index, workload) in doc.workloads.iter().enumerate() {
            tx.execute(
                "INSERT INTO workloads (run_id, idx, kind, target, params, context) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                params![
                    run_id,
                    index as i64,
                    workload.kind,
                    workload.target,
                    to_json(&workload.params),
                    to_json(&workload.context)
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
        let tx = self
            .conn
            .transaction()
            .map_err(|e| sql_err(&self.path, e))?;
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
        let tx = self
            .conn
            .transaction()
            .map_err(|e| sql_err(&self.path, e))?;
        tx.execute(
            "UPDATE runs SET status = ?2, incomplete_reason = ?3, finished_at = ?4, contention = ?5 WHERE id = ?1",
            params![
                run_id,
                doc.status.as_str(),
                doc.incomplete_reason,
                doc.finished_at,
                doc.contention.as_ref().map(to_json)
            ],
        )
        .map_err(|e| sql_err(&self.path, e))?;
        for (index, workload) in doc.workloads.iter().enumerate() {
            tx.execute(
                "UPDATE workloads SET context = ?3, summary = ?4, series = ?5 WHERE run_id = ?1 AND idx = ?2",
                params![
                    run_id,
                    index as i64,
                    to_json(&workload.context),
                    to_json(&workload.summary),
                    workload.series.as_ref().map(to_json)
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

fn sql_err(path: &Path, source: rusqlite::Error) -> Error {
    Error::Sql {
        path: path.to_path_buf(),
        source,
    }
}

fn to_json<T: serde::Serialize>(value: &T) -> String {
    serde_json::to_string(value).expect("stored values serialise")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::platform::Machine;
    use serde_json::json;

    fn doc() -> RunDocument {
        RunDocument {
            run_id: None,
            status: RunStatus::Incomplete,
            incomplete_reason: None,
            ratelab_version: "0.1.0".into(),
            verb: "disk".into(),
            label: Some("test".into()),
            started_at: "2026-11-22T10:00:00Z".into(),
            finished_at: None,
            machine: Machine::default(),
            workloads: vec![WorkloadRecord {
                kind: "disk".into(),
                target: "/tmp/x".into(),
                params: json!({"repeat": 1}),
                context: json!({"max_bytes_per_sec": null}),
                items: vec![],
                summary: Value::Null,
                series: None,
            }],
            contention: None,
            verdicts: vec![],
        }
    }

    #[test]
    fn a_run_round_trips_and_stays_incomplete_until_finished() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(&dir.path().join("sub/results.db")).unwrap();
        let mut doc = doc();
        let id = store.begin_run(&doc).unwrap();
        doc.run_id = Some(id);
        let items = vec![
            json!({"op": "write", "bytes": 1}),
            json!({"op": "read", "bytes": 2}),
        ];
        store.append_items(id, 0, 0, &items).unwrap();
        let stored = store.load_run(id).unwrap();
        assert_eq!(stored.status, RunStatus::Incomplete);
        assert_eq!(stored.incomplete_reason.as_deref(), Some("did not finish"));
        doc.workloads[0].items = items;
        doc.status = RunStatus::Complete;
        doc.finished_at = Some("2026-11-22T10:01:00Z".into());
        doc.verdicts.push(Verdict {
            code: "x".into(),
            severity: Severity::Warning,
            message: "m".into(),
            workload: Some(0),
        });
        store.finish_run(&doc).unwrap();
        assert_eq!(store.load_run(id).unwrap(), doc);
        assert_eq!(
            store.list_runs().unwrap()[0].targets,
            vec!["/tmp/x".to_string()]
        );
        assert!(matches!(store.load_run(id + 1), Err(Error::NotFound(_))));
    }
}
