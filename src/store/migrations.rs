//! The results schema, one migration per version, and the one function that brings a
//! database up to date. Migrations are only ever added, never edited, so every database
//! ratelab ever wrote can still be opened. The schema version is SQLite's `user_version`,
//! the number of migrations applied (as the rusqlite_migration crate of earlier
//! binaries counted it).
//!
//! Several ratelab processes may open a database that does not exist yet at the same
//! moment. Each migrates inside one `BEGIN IMMEDIATE` transaction and reads the version
//! again once it holds the write lock, so the first one creates the schema and the
//! others, having waited for the lock, find it done.

use std::path::Path;

use rusqlite::{Connection, TransactionBehavior};

use super::Error;

/// Every schema version, oldest first: `MIGRATIONS[n]` takes a database from version
/// `n` to `n + 1`.
const MIGRATIONS: [&str; 5] = [
    "CREATE TABLE runs (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            verb TEXT NOT NULL,
            label TEXT,
            status TEXT NOT NULL,
            incomplete_reason TEXT,
            started_at TEXT NOT NULL,
            finished_at TEXT,
            ratelab_version TEXT NOT NULL,
            hostname TEXT NOT NULL,
            machine TEXT NOT NULL,
            contention TEXT
        );
        CREATE INDEX runs_by_start ON runs (started_at);
        CREATE TABLE workloads (
            run_id INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
            idx INTEGER NOT NULL,
            kind TEXT NOT NULL,
            target TEXT NOT NULL,
            params TEXT NOT NULL,
            context TEXT NOT NULL,
            summary TEXT,
            series TEXT,
            PRIMARY KEY (run_id, idx)
        );
        CREATE TABLE items (
            run_id INTEGER NOT NULL,
            workload_idx INTEGER NOT NULL,
            seq INTEGER NOT NULL,
            op TEXT,
            body TEXT NOT NULL,
            PRIMARY KEY (run_id, workload_idx, seq),
            FOREIGN KEY (run_id, workload_idx) REFERENCES workloads (run_id, idx) ON DELETE CASCADE
        );
        CREATE TABLE verdicts (
            run_id INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
            seq INTEGER NOT NULL,
            code TEXT NOT NULL,
            severity TEXT NOT NULL,
            message TEXT NOT NULL,
            workload_idx INTEGER,
            PRIMARY KEY (run_id, seq)
        );",
    // Workloads side by side: the stand-in run alone first, warnings, the runner's cost.
    "ALTER TABLE workloads ADD COLUMN alone_of INTEGER;
             ALTER TABLE workloads ADD COLUMN warnings TEXT;
             ALTER TABLE runs ADD COLUMN runner_cpu_seconds REAL;
             ALTER TABLE runs ADD COLUMN runner_wall_seconds REAL;",
    // Records whose items another workload measures (an image run's places).
    "ALTER TABLE workloads ADD COLUMN measured_by INTEGER;",
    // Run identity across stores: a run keeps its UUID wherever it is imported.
    "ALTER TABLE runs ADD COLUMN run_uuid TEXT;
             CREATE UNIQUE INDEX runs_by_uuid ON runs (run_uuid);",
    // How a fleet's run kept to the agreed start.
    "ALTER TABLE runs ADD COLUMN fleet TEXT;",
];

/// The schema version this binary writes.
pub const LATEST: usize = MIGRATIONS.len();

/// Brings the database at `path`, open on `conn`, to [`LATEST`]; does nothing, and
/// takes no write lock, when it is there already.
pub fn to_latest(conn: &mut Connection, path: &Path) -> Result<(), Error> {
    let sql = |source| Error::Sql {
        path: path.to_path_buf(),
        source,
    };
    if checked_version(conn, path)? == LATEST {
        return Ok(());
    }
    // IMMEDIATE takes the write lock before the version is read (waiting out the busy
    // timeout for it), so no other process can migrate between the read and the writes.
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(sql)?;
    let found = checked_version(&tx, path)?;
    for (version, up) in MIGRATIONS.iter().enumerate().skip(found) {
        tx.execute_batch(up).map_err(|source| Error::Migrate {
            path: path.to_path_buf(),
            version: version + 1,
            source,
        })?;
    }
    tx.pragma_update(None, "user_version", LATEST as i64)
        .map_err(sql)?;
    tx.commit().map_err(sql)
}

/// The database's schema version, refused when a newer ratelab wrote it.
fn checked_version(conn: &Connection, path: &Path) -> Result<usize, Error> {
    let found: i64 = conn
        .query_row("PRAGMA user_version", [], |row| row.get(0))
        .map_err(|source| Error::Sql {
            path: path.to_path_buf(),
            source,
        })?;
    match usize::try_from(found) {
        Ok(found) if found <= LATEST => Ok(found),
        _ => Err(Error::TooNew {
            path: path.to_path_buf(),
            found,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tables(conn: &Connection) -> Vec<String> {
        let mut stmt = conn
            .prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
            .unwrap();
        stmt.query_map([], |row| row.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect()
    }

    #[test]
    fn a_new_database_gets_every_table_once() {
        let mut conn = Connection::open_in_memory().unwrap();
        let path = Path::new("new.db");
        to_latest(&mut conn, path).unwrap();
        to_latest(&mut conn, path).unwrap();
        let version: i64 = conn
            .query_row("PRAGMA user_version", [], |row| row.get(0))
            .unwrap();
        assert_eq!(version, LATEST as i64);
        assert!(tables(&conn).contains(&"runs".to_string()));
        conn.execute_batch("SELECT alone_of, warnings FROM workloads")
            .unwrap();
    }

    #[test]
    fn a_database_at_version_one_gets_only_what_it_lacks() {
        let mut conn = Connection::open_in_memory().unwrap();
        conn.execute_batch(MIGRATIONS[0]).unwrap();
        conn.pragma_update(None, "user_version", 1).unwrap();
        to_latest(&mut conn, Path::new("v1.db")).unwrap();
        conn.execute_batch("SELECT runner_cpu_seconds FROM runs")
            .unwrap();
    }

    #[test]
    fn a_database_from_a_newer_ratelab_is_refused_by_its_path() {
        let mut conn = Connection::open_in_memory().unwrap();
        conn.pragma_update(None, "user_version", LATEST as i64 + 1)
            .unwrap();
        let err = to_latest(&mut conn, Path::new("later.db")).unwrap_err();
        let message = err.to_string();
        assert!(message.contains("later.db"), "{message}");
        assert!(message.contains("newer ratelab"), "{message}");
    }
}
