//! The results database: every run, its machine, every item and verdict. SQLite on a
//! file is the default (WAL mode, versioned migrations); `--db postgres://…` keeps them
//! on a PostgreSQL server a team shares, with the same migrations and queries behind
//! one trait ([`database::Database`]). Each stage of a run is its own transaction, so a
//! crash or Ctrl-C loses nothing stored before it, and other runs are never touched.

mod database;
mod import;
mod migrations;
mod pgpass;
mod postgres;
mod query;
mod read;
mod sqlite;
mod write;

pub use import::identity;

use std::cell::RefCell;
use std::path::{Path, PathBuf};

pub use query::RunQuery;

use crate::document::RunStatus;
use database::{Database, DbError};

/// What went wrong with the results database.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// `--db` (or RATELAB_DB) names a server in a way that cannot be used.
    #[error("invalid results database {text} for --db: {reason}")]
    Address {
        /// The value given, without its password.
        text: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The database could not be opened, created or reached.
    #[error("cannot open the results database {at}")]
    Open {
        /// The database at fault.
        at: Address,
        /// What the database said.
        #[source]
        source: DbError,
    },
    /// A run would be stored in a database this user cannot write.
    #[error(
        "cannot store runs in the results database {at}: {reason}; give --db PATH for a database of your own, or --no-store to keep the run out of any (`ratelab results` reads it as it is)"
    )]
    ReadOnly {
        /// The database at fault.
        at: Address,
        /// Why it cannot be written.
        reason: String,
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
    #[error("cannot upgrade the results database {at} to schema version {version}")]
    Migrate {
        /// The database at fault.
        at: Address,
        /// The version whose migration failed.
        version: usize,
        /// What the database said.
        #[source]
        source: DbError,
    },
    /// A newer ratelab wrote the database, in a schema this one does not know.
    #[error(
        "the results database {at} was written by a newer ratelab (schema version {found}; this one, ratelab {}, reads versions up to {})",
        env!("CARGO_PKG_VERSION"),
        migrations::LATEST
    )]
    TooNew {
        /// The database at fault.
        at: Address,
        /// The version the database has.
        found: i64,
    },
    /// A query failed.
    #[error("results database {at}")]
    Sql {
        /// The database at fault.
        at: Address,
        /// What the database said.
        #[source]
        source: DbError,
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

/// Where a results database is: a SQLite file, or a PostgreSQL server.
#[derive(Debug, Clone)]
pub enum Address {
    /// A SQLite file.
    File(PathBuf),
    /// A PostgreSQL database, resolved with the environment and the password file.
    Postgres(Box<postgres::Server>),
}

impl std::fmt::Display for Address {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Address::File(path) => write!(f, "{}", path.display()),
            Address::Postgres(server) => f.write_str(server.shown()),
        }
    }
}

impl Address {
    /// The database `--db` (or RATELAB_DB) names, or where results go without it:
    /// `$XDG_DATA_HOME/ratelab/results.db`.
    pub fn of(chosen: Option<&Path>) -> Result<Address, Error> {
        let Some(chosen) = chosen else {
            return dirs::data_dir()
                .map(|dir| Address::File(dir.join("ratelab").join("results.db")))
                .ok_or(Error::NoDataFolder);
        };
        match chosen.to_str().filter(|text| postgres::is_url(text)) {
            Some(url) => postgres::Server::resolve(url)
                .map(|server| Address::Postgres(Box::new(server)))
                .map_err(|reason| Error::Address {
                    text: postgres::redacted(url),
                    reason,
                }),
            None => Address::chosen_file(chosen),
        }
    }

    /// A database file named by `--db` (or RATELAB_DB): refused when it is a folder, or
    /// when its folder does not exist, since a mistyped path would start a new history
    /// in silence. Only the default folder is made.
    fn chosen_file(path: &Path) -> Result<Address, Error> {
        let refused = |reason: String| Error::Address {
            text: path.display().to_string(),
            reason,
        };
        if path.is_dir() {
            return Err(refused(format!(
                "it is a folder; --db names the database file, for example {}",
                path.join("results.db").display()
            )));
        }
        if let Some(folder) = path.parent().filter(|p| !p.as_os_str().is_empty())
            && !folder.is_dir()
        {
            return Err(refused(format!(
                "its folder {} does not exist: --db makes the database file, never its folders (mkdir -p {} first)",
                folder.display(),
                folder.display()
            )));
        }
        Ok(Address::File(path.to_path_buf()))
    }

    /// Whether the database is there to be read: a file that exists, or any server
    /// (whether it answers is for opening to say).
    pub fn exists(&self) -> bool {
        match self {
            Address::File(path) => path.exists(),
            Address::Postgres(_) => true,
        }
    }

    /// The folder HTML reports go to by default: `reports/` beside a database file, or
    /// beside where a file would be for a server.
    pub fn reports_folder(&self) -> PathBuf {
        let beside = |db: &Path| {
            db.parent()
                .filter(|p| !p.as_os_str().is_empty())
                .map_or_else(|| PathBuf::from("reports"), |p| p.join("reports"))
        };
        match self {
            Address::File(path) => beside(path),
            Address::Postgres(_) => dirs::data_dir()
                .map_or_else(|| PathBuf::from("reports"), |d| d.join("ratelab/reports")),
        }
    }

    /// Opens (creating a file if needed) and migrates the database, to store runs in it.
    pub fn open(&self) -> Result<Store, Error> {
        let open_err = |source| Error::Open {
            at: self.clone(),
            source,
        };
        let mut db: Box<dyn Database> = match self {
            Address::File(path) => {
                if let Some(folder) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
                    std::fs::create_dir_all(folder).map_err(|source| Error::Folder {
                        path: folder.to_path_buf(),
                        source,
                    })?;
                }
                if let Some(reason) = unwritable(path) {
                    return Err(Error::ReadOnly {
                        at: self.clone(),
                        reason,
                    });
                }
                Box::new(sqlite::Sqlite::open(path).map_err(|e| open_err(e.into()))?)
            }
            Address::Postgres(server) => Box::new(server.connect().map_err(open_err)?),
        };
        migrations::to_latest(db.as_mut(), self)?;
        Ok(Store {
            db: RefCell::new(db),
            at: self.clone(),
            _copy: None,
            older: None,
        })
    }

    /// Opens the database to read it only, never changing it: a file in place when this
    /// user could write it (queries only), else a copy in a temporary folder (another
    /// user's file, where SQLite cannot even make its shared-memory file beside it). A
    /// database of an older schema is read as it is, never upgraded: [`Store::older`]
    /// says so.
    pub fn open_to_read(&self) -> Result<Store, Error> {
        let Address::File(path) = self else {
            return self.open();
        };
        let db = match unwritable(path) {
            None => sqlite::Sqlite::open_query_only(path).ok(),
            Some(_) => None,
        };
        let (db, copy) = match db {
            Some(db) => (db, None),
            None => {
                let (db, copy) = self.copied(path)?;
                (db, Some(copy))
            }
        };
        let mut db: Box<dyn Database> = Box::new(db);
        let version = migrations::checked_version(db.as_mut(), self)?;
        if version < migrations::LATEST {
            migrations::read_as_latest(db.as_mut(), self)?;
        }
        db.batch("PRAGMA query_only = 1")
            .map_err(|e| sql_err(self, e))?;
        Ok(Store {
            db: RefCell::new(db),
            at: self.clone(),
            _copy: copy,
            older: (version < migrations::LATEST).then_some(version),
        })
    }

    /// The database file at `path` copied, with its write-ahead log (where a store in
    /// use keeps its latest runs until a checkpoint), into a fresh temporary folder,
    /// writable there whatever the original's mode, and opened.
    fn copied(&self, path: &Path) -> Result<(sqlite::Sqlite, tempfile::TempDir), Error> {
        use std::os::unix::fs::PermissionsExt;
        let open_err = |source: std::io::Error| Error::Open {
            at: self.clone(),
            source: DbError::new(format!("cannot read it, or a copy of it: {source}")),
        };
        let copy = tempfile::tempdir().map_err(open_err)?;
        let file = copy.path().join("results.db");
        let mut wal = path.as_os_str().to_owned();
        wal.push("-wal");
        let wal = PathBuf::from(wal);
        for (from, to) in [
            (path, file.clone()),
            (&wal, copy.path().join("results.db-wal")),
        ] {
            if from == wal && !wal.exists() {
                continue;
            }
            std::fs::copy(from, &to).map_err(open_err)?;
            // A copy keeps the original's mode: a 0444 file would stay unopenable.
            std::fs::set_permissions(&to, std::fs::Permissions::from_mode(0o600))
                .map_err(open_err)?;
        }
        let db = sqlite::Sqlite::open(&file).map_err(|e| Error::Open {
            at: self.clone(),
            source: e.into(),
        })?;
        Ok((db, copy))
    }
}

/// Why this user cannot write the database file at `path` (or make its journal beside
/// it); `None` when it can, or when the file does not exist yet.
fn unwritable(path: &Path) -> Option<String> {
    use rustix::fs::{Access, access};
    let folder = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    if path.exists() && access(path, Access::WRITE_OK).is_err() {
        Some("the file is not writable by this user".into())
    } else if access(folder, Access::WRITE_OK).is_err() {
        Some(format!(
            "its folder {} is not writable by this user, and SQLite keeps its journal there",
            folder.display()
        ))
    } else {
        None
    }
}

/// An open results database.
pub struct Store {
    db: RefCell<Box<dyn Database>>,
    at: Address,
    /// The temporary folder of the copy read instead of the file, if any.
    _copy: Option<tempfile::TempDir>,
    /// The schema version of a database older than this ratelab's, read as it is.
    older: Option<usize>,
}

impl Store {
    /// The database `--db` names (or the default one) if it exists and opens, to look
    /// up earlier runs; never creates one.
    pub fn open_existing(chosen: Option<&Path>) -> Option<Store> {
        let at = Address::of(chosen).ok()?;
        at.exists().then(|| at.open_to_read().ok()).flatten()
    }

    /// Opens (creating if needed) and migrates the database file at `path`.
    pub fn open(path: &Path) -> Result<Store, Error> {
        Address::File(path.to_path_buf()).open()
    }

    /// Where the database is.
    pub fn address(&self) -> &Address {
        &self.at
    }

    /// The notice for a database of an older schema read as it is: its version, and
    /// how to bring it up to date; `None` for one of this ratelab's schema.
    pub fn older(&self) -> Option<String> {
        self.older.map(|found| {
            format!(
                "the results database {} has schema version {found}, from an older ratelab: it is read as it is, not upgraded; ratelab {} upgrades it to version {} the next time a run is stored in it where it can be written (--db {})",
                self.at,
                env!("CARGO_PKG_VERSION"),
                migrations::LATEST,
                self.at
            )
        })
    }

    /// Runs `work` on the database in one transaction: all of it is stored, or none.
    fn atomically<T>(
        &self,
        work: impl FnOnce(&mut dyn Database) -> Result<T, Error>,
    ) -> Result<T, Error> {
        let mut db = self.db.borrow_mut();
        database::atomically(db.as_mut(), |e| sql_err(&self.at, e), work)
    }

    /// Runs `work` on the database, outside any transaction of the store's own.
    fn reading<T, E>(&self, work: impl FnOnce(&mut dyn Database) -> Result<T, E>) -> Result<T, E> {
        work(self.db.borrow_mut().as_mut())
    }

    pub(crate) fn sql(&self, source: DbError) -> Error {
        sql_err(&self.at, source)
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

/// A query error on the database at `at`.
pub(crate) fn sql_err(at: &Address, source: DbError) -> Error {
    Error::Sql {
        at: at.clone(),
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
            interference: None,
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

    #[test]
    fn items_stored_many_to_a_statement_come_back_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(&dir.path().join("results.db")).unwrap();
        let id = store.begin_run(&doc()).unwrap();
        let items: Vec<Value> = (0..250).map(|i| json!({"op": "write", "n": i})).collect();
        store.append_items(id, 0, 0, &items[..7]).unwrap();
        store.append_items(id, 0, 7, &items[7..]).unwrap();
        assert_eq!(store.load_run(id).unwrap().workloads[0].items, items);
    }
}
