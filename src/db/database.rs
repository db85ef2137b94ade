//! The one trait both kinds of results database stand behind (SQLite on a file,
//! PostgreSQL a team shares), the values that cross it, and the few places their SQL
//! differs. Every query of the store is written once, with `?N` placeholders, over
//! this trait.

/// A value bound to a query or read from a row.
#[derive(Debug, Clone, PartialEq)]
pub enum SqlValue {
    /// SQL NULL.
    Null,
    /// A 64-bit integer.
    Int(i64),
    /// A double.
    Real(f64),
    /// Text.
    Text(String),
}

impl From<i64> for SqlValue {
    fn from(value: i64) -> SqlValue {
        SqlValue::Int(value)
    }
}

impl From<f64> for SqlValue {
    fn from(value: f64) -> SqlValue {
        SqlValue::Real(value)
    }
}

impl From<String> for SqlValue {
    fn from(value: String) -> SqlValue {
        SqlValue::Text(value)
    }
}

impl From<&str> for SqlValue {
    fn from(value: &str) -> SqlValue {
        SqlValue::Text(value.to_string())
    }
}

impl<T: Into<SqlValue>> From<Option<T>> for SqlValue {
    fn from(value: Option<T>) -> SqlValue {
        value.map_or(SqlValue::Null, Into::into)
    }
}

/// What the database said when a statement failed.
#[derive(Debug, thiserror::Error)]
#[error(transparent)]
pub struct DbError(Box<dyn std::error::Error + Send + Sync>);

impl DbError {
    /// A failure described by the store itself.
    pub fn new(message: String) -> DbError {
        DbError(message.into())
    }
}

impl From<rusqlite::Error> for DbError {
    fn from(err: rusqlite::Error) -> DbError {
        DbError(Box::new(err))
    }
}

impl From<postgres::Error> for DbError {
    fn from(err: postgres::Error) -> DbError {
        DbError(Box::new(err))
    }
}

/// One row of a result, its columns in the order the query named them.
#[derive(Debug, Clone, PartialEq)]
pub struct Row(pub Vec<SqlValue>);

impl Row {
    fn column(&self, index: usize) -> Result<&SqlValue, DbError> {
        self.0
            .get(index)
            .ok_or_else(|| DbError::new(format!("no column {index} in the row")))
    }

    /// The integer in column `index`, or `None` for NULL.
    pub fn opt_int(&self, index: usize) -> Result<Option<i64>, DbError> {
        match self.column(index)? {
            SqlValue::Null => Ok(None),
            SqlValue::Int(value) => Ok(Some(*value)),
            other => Err(mismatch(index, "an integer", other)),
        }
    }

    /// The integer in column `index`.
    pub fn int(&self, index: usize) -> Result<i64, DbError> {
        self.opt_int(index)?
            .ok_or_else(|| mismatch(index, "an integer", &SqlValue::Null))
    }

    /// The number in column `index`, or `None` for NULL.
    pub fn opt_real(&self, index: usize) -> Result<Option<f64>, DbError> {
        match self.column(index)? {
            SqlValue::Null => Ok(None),
            SqlValue::Real(value) => Ok(Some(*value)),
            // SQLite keeps a REAL that is a whole number as an integer when asked to.
            SqlValue::Int(value) => Ok(Some(*value as f64)),
            other => Err(mismatch(index, "a number", other)),
        }
    }

    /// The text in column `index`, or `None` for NULL.
    pub fn opt_text(&self, index: usize) -> Result<Option<String>, DbError> {
        match self.column(index)? {
            SqlValue::Null => Ok(None),
            SqlValue::Text(value) => Ok(Some(value.clone())),
            other => Err(mismatch(index, "text", other)),
        }
    }

    /// The text in column `index`.
    pub fn text(&self, index: usize) -> Result<String, DbError> {
        self.opt_text(index)?
            .ok_or_else(|| mismatch(index, "text", &SqlValue::Null))
    }
}

fn mismatch(index: usize, wanted: &str, found: &SqlValue) -> DbError {
    DbError::new(format!("column {index} holds {found:?}, not {wanted}"))
}

/// Which SQL a database speaks, where the two differ.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    /// SQLite, the file on this machine.
    Sqlite,
    /// PostgreSQL, a server.
    Postgres,
}

impl Dialect {
    /// `sql` with its `?N` placeholders as this dialect writes them.
    pub fn placeholders(self, sql: &str) -> String {
        match self {
            Dialect::Sqlite => sql.to_string(),
            Dialect::Postgres => sql.replace('?', "$"),
        }
    }

    /// A condition: `haystack` contains the text of parameter `needle`, in any case
    /// when `fold` says so.
    pub fn contains(self, haystack: &str, needle: usize, fold: bool) -> String {
        let (hay, pin) = if fold {
            (
                format!("lower({haystack})"),
                format!("lower(CAST(?{needle} AS TEXT))"),
            )
        } else {
            (haystack.to_string(), format!("CAST(?{needle} AS TEXT)"))
        };
        match self {
            Dialect::Sqlite => format!("instr({hay}, {pin}) > 0"),
            Dialect::Postgres => format!("strpos({hay}, {pin}) > 0"),
        }
    }

    /// The text of `field` in the JSON object stored as text in `column`.
    pub fn json_text(self, column: &str, field: &str) -> String {
        match self {
            Dialect::Sqlite => format!("json_extract({column}, '$.{field}')"),
            Dialect::Postgres => format!("(CAST({column} AS jsonb) ->> '{field}')"),
        }
    }

    /// A scalar subquery: the values of `column` of `table` rows matching `condition`,
    /// one per line in the order of `order`.
    pub fn lines(self, column: &str, table: &str, condition: &str, order: &str) -> String {
        match self {
            Dialect::Sqlite => format!(
                "(SELECT group_concat({column}, char(10)) FROM \
                 (SELECT {column} FROM {table} WHERE {condition} ORDER BY {order}))"
            ),
            Dialect::Postgres => format!(
                "(SELECT string_agg({column}, chr(10) ORDER BY {order}) FROM {table} WHERE {condition})"
            ),
        }
    }

    /// The statement that begins a transaction that will write.
    fn begin(self) -> &'static str {
        match self {
            // The write lock at BEGIN lets the busy timeout wait for it, where a read
            // lock upgraded later would fail at once.
            Dialect::Sqlite => "BEGIN IMMEDIATE",
            Dialect::Postgres => "BEGIN",
        }
    }
}

/// A connection to a results database: the statements the store's queries need.
pub trait Database: Send {
    /// The SQL this database speaks.
    fn dialect(&self) -> Dialect;
    /// Runs statements that take no parameters and return no rows.
    fn batch(&mut self, sql: &str) -> Result<(), DbError>;
    /// Runs one statement with `params` bound to `?1`, `?2`, …; returns the rows it
    /// changed.
    fn execute(&mut self, sql: &str, params: &[SqlValue]) -> Result<u64, DbError>;
    /// Runs one query with `params` bound to `?1`, `?2`, …; returns its rows.
    fn query(&mut self, sql: &str, params: &[SqlValue]) -> Result<Vec<Row>, DbError>;
}

/// Runs `work` in one transaction on `db`: all of it is stored, or none. `fail` says
/// where a failure to begin or commit happened.
pub fn atomically<T, E>(
    db: &mut dyn Database,
    fail: impl Fn(DbError) -> E,
    work: impl FnOnce(&mut dyn Database) -> Result<T, E>,
) -> Result<T, E> {
    db.batch(db.dialect().begin()).map_err(&fail)?;
    match work(db) {
        Ok(value) => {
            if let Err(err) = db.batch("COMMIT") {
                let _ = db.batch("ROLLBACK");
                return Err(fail(err));
            }
            Ok(value)
        }
        Err(err) => {
            // The error that stopped the work is the one to report; a failed rollback
            // (the connection is gone) loses nothing more.
            let _ = db.batch("ROLLBACK");
            Err(err)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_and_functions_follow_the_dialect() {
        let sql = "SELECT id FROM runs WHERE verb = ?1 AND label = ?12";
        assert_eq!(Dialect::Sqlite.placeholders(sql), sql);
        assert_eq!(
            Dialect::Postgres.placeholders(sql),
            "SELECT id FROM runs WHERE verb = $1 AND label = $12"
        );
        assert_eq!(
            Dialect::Postgres.contains("r.hostname", 3, true),
            "strpos(lower(r.hostname), lower(CAST(?3 AS TEXT))) > 0"
        );
        assert_eq!(
            Dialect::Sqlite.contains("w.target", 1, false),
            "instr(w.target, CAST(?1 AS TEXT)) > 0"
        );
    }

    #[test]
    fn rows_read_back_by_type_and_name_a_mismatch() {
        let row = Row(vec![
            SqlValue::Int(4),
            SqlValue::Null,
            SqlValue::Text("x".into()),
            SqlValue::Int(2),
        ]);
        assert_eq!(row.int(0).unwrap(), 4);
        assert_eq!(row.opt_text(1).unwrap(), None);
        assert_eq!(row.text(2).unwrap(), "x");
        assert_eq!(row.opt_real(3).unwrap(), Some(2.0));
        assert!(row.int(2).unwrap_err().to_string().contains("column 2"));
        assert!(row.text(1).is_err());
        assert!(row.int(9).is_err());
    }
}
