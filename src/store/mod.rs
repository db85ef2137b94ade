//! The results database: every run, its machine, every item and verdict, in SQLite
//! (WAL mode, versioned migrations). Each stage of a run is its own transaction, so a
//! crash or Ctrl-C loses nothing stored before it, and other runs are never touched.

mod import;
mod migrations;
mod query;
mod read;
mod write;

pub use import::identity;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rusqlite::Connection;

pub use query::RunQuery;

use crate::document::RunStatus;

/// What went wrong with the results database.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The database file could not be opened or created.
    #[error("cannot open the results database {path}")]
    Open {
        /// The path at fault.
        path: PathBuf,
        /// What SQLite said.
        #[source]
        source: rusqlite::Error,
    },
    /// Its folder could not be created.
    #[error("cannot create the folder of the results database {path}")]
    Folder {
        /// The path at fault.
        path: PathBuf,
        /// What the system said.
        #[source]
        source: std::io::Error,
    },
    /// The schema could not be brought up to date.
    #[error("cannot upgrade the results database {path} to schema version {version}")]
    Migrate {
        /// The path at fault.
        path: PathBuf,
        /// The version whose migration failed.
        version: usize,
        /// What SQLite said.
        #[source]
        source: rusqlite::Error,
    },
    /// A newer ratelab wrote the database, in a schema this one does not know.
    #[error(
        "the results database {path} was written by a newer ratelab (schema version {found}; this one reads up to {})",
        migrations::LATEST
    )]
    TooNew {
        /// The path at fault.
        path: PathBuf,
        /// The version the database has.
        found: i64,
    },
    /// A query failed.
    #[error("results database {path}")]
    Sql {
        /// The path at fault.
        path: PathBuf,
        /// What SQLite said.
        #[source]
        source: rusqlite::Error,
    },
    /// Neither $XDG_DATA_HOME nor $HOME says where results go.
    #[error(
        "cannot tell where to keep results: $XDG_DATA_HOME and $HOME are unset (use --db PATH)"
    )]
    NoDataFolder,
    /// No run has that id.
    #[error("no run {0} in the results database (see `ratelab results list`)")]
    NotFound(i64),
    /// A stored value could not be read back.
    #[error("run {run}: stored {what} is unreadable: {detail}")]
    Corrupt {
        /// The run.
        run: i64,
        /// Which stored value.
        what: &'static str,
        /// What is wrong with it.
        detail: String,
    },
}

/// One line of `results list`.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct RunListing {
    /// Run id.
    pub run_id: i64,
    /// The run's identity across stores; absent for runs stored before it existed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run_uuid: Option<String>,
    /// Start time, RFC 3339.
    pub started_at: String,
    /// The host name of the machine it ran on.
    pub machine: String,
    /// The verb that made it.
    pub verb: String,
    /// Targets of its workloads.
    pub targets: Vec<String>,
    /// The user's label.
    pub label: Option<String>,
    /// Whether it finished.
    pub status: RunStatus,
}

/// An open results database.
pub struct Store {
    pub(crate) conn: Connection,
    pub(crate) path: PathBuf,
}

impl Store {
    /// The database `--db` names, or where results go without it:
    /// `$XDG_DATA_HOME/ratelab/results.db`.
    pub fn path(chosen: Option<&Path>) -> Result<PathBuf, Error> {
        match chosen {
            Some(path) => Ok(path.to_path_buf()),
            None => dirs::data_dir()
                .map(|dir| dir.join("ratelab").join("results.db"))
                .ok_or(Error::NoDataFolder),
        }
    }

    /// The database `--db` names (or the default one) if it exists and opens, to look
    /// up earlier runs; never creates one.
    pub fn open_existing(chosen: Option<&Path>) -> Option<Store> {
        let path = Store::path(chosen).ok()?;
        path.exists().then(|| Store::open(&path).ok()).flatten()
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
        conn.busy_timeout(BUSY_TIMEOUT).map_err(open_err)?;
        wal(&conn).map_err(open_err)?;
        conn.pragma_update(None, "foreign_keys", "ON")
            .map_err(open_err)?;
        // Every transaction of the store writes: taking the write lock at BEGIN lets the
        // busy timeout wait for it, where a read lock upgraded later would fail at once.
        conn.set_transaction_behavior(rusqlite::TransactionBehavior::Immediate);
        migrations::to_latest(&mut conn, path)?;
        Ok(Store {
            conn,
            path: path.to_path_buf(),
        })
    }

    pub(crate) fn sql(&self, source: rusqlite::Error) -> Error {
        Error::Sql {
            path: self.path.clone(),
            source,
        }
    }
}

/// How long a process waits for another one's write lock (a migration, a stage of a
/// run) before it gives up: each holds it for milliseconds, but a loaded machine can
/// deschedule the holder.
const BUSY_TIMEOUT: Duration = Duration::from_secs(30);

/// Puts the database in WAL mode, so readers never wait for writers. Several processes
/// creating one database at once race to convert it; SQLite can answer SQLITE_BUSY to
/// the losers without calling the busy handler, so this tries again until the timeout,
/// and a database another process already converted needs no change at all.
fn wal(conn: &Connection) -> rusqlite::Result<()> {
    let started = Instant::now();
    loop {
        let result = conn
            .query_row("PRAGMA journal_mode", [], |row| row.get::<_, String>(0))
            .and_then(|mode| {
                if mode.eq_ignore_ascii_case("wal") {
                    Ok(())
                } else {
                    conn.pragma_update(None, "journal_mode", "WAL")
                }
            });
        match result {
            Err(rusqlite::Error::SqliteFailure(err, _))
                if err.code == rusqlite::ErrorCode::DatabaseBusy
                    && started.elapsed() < BUSY_TIMEOUT =>
            {
                std::thread::sleep(Duration::from_millis(10));
            }
            other => return other,
        }
    }
}

/// A copy, in a fresh folder, of the database the binary of 61f461b wrote
/// (tests/fixtures/runs-61f461b.db: a run of every verb and kind), opened: opening
/// migrates it, and the committed file must stay as that binary wrote it.
#[cfg(test)]
pub(crate) fn fixture() -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    let fixture = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/runs-61f461b.db"
    );
    std::fs::copy(fixture, &db).unwrap();
    let store = Store::open(&db).unwrap();
    (dir, store)
}

/// A query error on the database at `path`.
pub(crate) fn sql_err(path: &Path, source: rusqlite::Error) -> Error {
    Error::Sql {
        path: path.to_path_buf(),
        source,
    }
}

pub(crate) fn to_json<T: serde::Serialize>(value: &T) -> String {
    serde_json::to_string(value).expect("stored values serialise")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::document::{RunDocument, RunStatus, Severity, Verdict, WorkloadRecord};
    use crate::platform::Machine;
    use serde_json::Value;
    use serde_json::json;

    fn doc() -> RunDocument {
        RunDocument {
            run_id: None,
            run_uuid: None,
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
                alone_of: None,
                measured_by: None,
                warnings: vec![],
            }],
            contention: None,
            verdicts: vec![],
            runner_cpu_seconds: None,
            runner_wall_seconds: None,
            fleet: None,
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
