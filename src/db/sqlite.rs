//! The results database in a SQLite file, the default: WAL mode so readers never wait
//! for writers, and a busy timeout so several processes can store at once.

use std::path::Path;
use std::time::{Duration, Instant};

use rusqlite::Connection;
use rusqlite::types::{ToSqlOutput, ValueRef};

use super::database::{Database, DbError, Dialect, Row, SqlValue};

/// How long a process waits for another one's write lock (a migration, a stage of a
/// run) before it gives up: each holds it for milliseconds, but a loaded machine can
/// deschedule the holder.
const BUSY_TIMEOUT: Duration = Duration::from_secs(30);

/// An open SQLite results database.
pub struct Sqlite(Connection);

impl Sqlite {
    /// Opens the existing database file at `path`, which this user can write, to read
    /// it in place: its journal mode is left as it is, and, unlike a read-only
    /// connection, closing it removes the write-ahead log and shared-memory files it
    /// made, as any writer's does. The caller makes it `query_only` once it has shaped
    /// its temporary views.
    pub fn open_query_only(path: &Path) -> Result<Sqlite, rusqlite::Error> {
        use rusqlite::OpenFlags;
        let conn = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )?;
        conn.busy_timeout(BUSY_TIMEOUT)?;
        // Opening is lazy: the first read says whether the file can be read.
        conn.query_row("SELECT count(*) FROM sqlite_master", [], |_| Ok(()))?;
        Ok(Sqlite(conn))
    }

    /// An empty database in memory.
    pub fn in_memory() -> Result<Sqlite, rusqlite::Error> {
        Connection::open_in_memory().map(Sqlite)
    }

    /// Opens (creating if needed) the database file at `path`.
    pub fn open(path: &Path) -> Result<Sqlite, rusqlite::Error> {
        let conn = Connection::open(path)?;
        conn.busy_timeout(BUSY_TIMEOUT)?;
        wal(&conn)?;
        conn.pragma_update(None, "foreign_keys", "ON")?;
        Ok(Sqlite(conn))
    }
}

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

impl rusqlite::ToSql for SqlValue {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(match self {
            SqlValue::Null => ToSqlOutput::Borrowed(ValueRef::Null),
            SqlValue::Int(value) => ToSqlOutput::Borrowed(ValueRef::Integer(*value)),
            SqlValue::Real(value) => ToSqlOutput::Borrowed(ValueRef::Real(*value)),
            SqlValue::Text(value) => ToSqlOutput::Borrowed(ValueRef::Text(value.as_bytes())),
        })
    }
}

fn value(cell: ValueRef<'_>) -> Result<SqlValue, DbError> {
    Ok(match cell {
        ValueRef::Null => SqlValue::Null,
        ValueRef::Integer(value) => SqlValue::Int(value),
        ValueRef::Real(value) => SqlValue::Real(value),
        ValueRef::Text(bytes) => SqlValue::Text(
            String::from_utf8(bytes.to_vec())
                .map_err(|e| DbError::new(format!("stored text is not UTF-8: {e}")))?,
        ),
        ValueRef::Blob(_) => return Err(DbError::new("a blob where text belongs".into())),
    })
}

impl Database for Sqlite {
    fn dialect(&self) -> Dialect {
        Dialect::Sqlite
    }

    fn batch(&mut self, sql: &str) -> Result<(), DbError> {
        Ok(self.0.execute_batch(sql)?)
    }

    fn execute(&mut self, sql: &str, params: &[SqlValue]) -> Result<u64, DbError> {
        let mut statement = self.0.prepare_cached(sql)?;
        Ok(statement.execute(rusqlite::params_from_iter(params))? as u64)
    }

    fn query(&mut self, sql: &str, params: &[SqlValue]) -> Result<Vec<Row>, DbError> {
        let mut statement = self.0.prepare_cached(sql)?;
        let columns = statement.column_count();
        let mut rows = statement.query(rusqlite::params_from_iter(params))?;
        let mut out = Vec::new();
        while let Some(row) = rows.next()? {
            let cells = (0..columns)
                .map(|i| value(row.get_ref(i)?))
                .collect::<Result<_, DbError>>()?;
            out.push(Row(cells));
        }
        Ok(out)
    }
}
