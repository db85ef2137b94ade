//! The results database on a PostgreSQL server a team shares (`--db postgres://…`):
//! where it is, as libpq's clients find it (the URL, then the PG* environment, then the
//! password file), and the connection behind the store's one trait. A password is used
//! to connect and never shown: every place a store names itself uses [`shown`].

use std::collections::HashMap;
use std::error::Error as StdError;
use std::str::FromStr;
use std::time::Duration;

use bytes::BytesMut;
use postgres::config::Host;
use postgres::types::{IsNull, ToSql, Type, to_sql_checked};
use postgres::{Client, Config, NoTls, Statement};

use super::database::{Database, DbError, Dialect, Row, SqlValue};
use super::pgpass;

/// Whether `text` (a `--db` value) names a PostgreSQL server rather than a file.
pub fn is_url(text: &str) -> bool {
    text.starts_with("postgres://") || text.starts_with("postgresql://")
}

/// `url` with any password in it replaced by `***`, to name it in an error.
pub fn redacted(url: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
    let (authority, tail) = rest.split_at(rest.find(['/', '?']).unwrap_or(rest.len()));
    let authority = match authority.rsplit_once('@') {
        Some((userinfo, host)) => match userinfo.split_once(':') {
            Some((user, _)) => format!("{user}:***@{host}"),
            None => authority.to_string(),
        },
        None => authority.to_string(),
    };
    let tail = tail
        .split_inclusive(['?', '&'])
        .map(|part| match part.strip_prefix("password=") {
            Some(rest) => format!("password=***{}", if rest.ends_with('&') { "&" } else { "" }),
            None => part.to_string(),
        })
        .collect::<String>();
    format!("{scheme}://{authority}{tail}")
}

/// A server's address, resolved: what to connect with, and how to name it.
#[derive(Clone)]
pub struct Server {
    config: Config,
    shown: String,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.shown)
    }
}

impl Server {
    /// Resolves `url` with the environment and the password file, as libpq would;
    /// the error names what is wrong without the password.
    pub fn resolve(url: &str) -> Result<Server, String> {
        let mut config = Config::from_str(url).map_err(|e| {
            // The parser says what is wrong in the error's source.
            let mut reason = e.to_string();
            let mut cause = e.source();
            while let Some(inner) = cause {
                reason.push_str(&format!(": {inner}"));
                cause = inner.source();
            }
            reason
        })?;
        let env = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
        if config.get_hosts().is_empty() {
            match env("PGHOST") {
                Some(host) => {
                    config.host(&host);
                }
                None => {
                    // libpq's default on Debian; the upstream default is /tmp.
                    let debian = std::path::Path::new("/var/run/postgresql");
                    config.host_path(if debian.is_dir() {
                        debian
                    } else {
                        std::path::Path::new("/tmp")
                    });
                }
            }
        }
        if config.get_ports().is_empty()
            && let Some(port) = env("PGPORT")
        {
            let port = port
                .parse()
                .map_err(|_| format!("PGPORT {port:?} is not a port number"))?;
            config.port(port);
        }
        if config.get_user().is_none() {
            let user = env("PGUSER")
                .or_else(|| whoami::username().ok())
                .ok_or("no user: give one in the URL or in PGUSER")?;
            config.user(&user);
        }
        if config.get_dbname().is_none() {
            let db = env("PGDATABASE").unwrap_or_else(|| config.get_user().unwrap().to_string());
            config.dbname(&db);
        }
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(CONNECT_TIMEOUT);
        }
        if config.get_ssl_mode() == postgres::config::SslMode::Require {
            return Err(
                "sslmode=require: this ratelab connects without TLS (reach a server \
                        elsewhere through an ssh tunnel, or give sslmode=disable)"
                    .into(),
            );
        }
        if config.get_password().is_none() {
            if let Some(password) = env("PGPASSWORD") {
                config.password(password);
            } else if let Some(password) = from_password_file(&config) {
                config.password(password);
            }
        }
        config.application_name("ratelab");
        let shown = shown(&config);
        Ok(Server { config, shown })
    }

    /// Connects.
    pub fn connect(&self) -> Result<Postgres, DbError> {
        let client = self.config.connect(NoTls).map_err(|err| {
            if err.to_string().contains("password missing") {
                DbError::new(format!(
                    "{err} (the server asks for one: give it in the URL, PGPASSWORD or ~/.pgpass)"
                ))
            } else {
                err.into()
            }
        })?;
        Ok(Postgres {
            client,
            statements: HashMap::new(),
        })
    }

    /// The server as users read it: the URL without its password.
    pub fn shown(&self) -> &str {
        &self.shown
    }
}

/// How long connecting may take before the store gives up, unless the URL says.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The password file's password for this connection, when it has one.
fn from_password_file(config: &Config) -> Option<String> {
    let text = pgpass::read(&pgpass::location()?)?;
    let host = match config.get_hosts().first()? {
        Host::Tcp(name) => name.clone(),
        // libpq matches a Unix socket's connection with the host name localhost.
        Host::Unix(_) => "localhost".to_string(),
    };
    let port = config
        .get_ports()
        .first()
        .copied()
        .unwrap_or(5432)
        .to_string();
    pgpass::find(
        &text,
        &pgpass::Wanted {
            host: &host,
            port: &port,
            database: config.get_dbname()?,
            user: config.get_user()?,
        },
    )
}

/// `config` as a URL without its password.
fn shown(config: &Config) -> String {
    let user = config.get_user().unwrap_or_default();
    let db = config.get_dbname().unwrap_or_default();
    let port = config.get_ports().first().copied().unwrap_or(5432);
    match config.get_hosts().first() {
        Some(Host::Tcp(host)) => format!("postgres://{user}@{host}:{port}/{db}"),
        Some(Host::Unix(dir)) => {
            format!("postgres://{user}@/{db}?host={}&port={port}", dir.display())
        }
        None => format!("postgres://{user}@/{db}"),
    }
}

/// An open connection to a PostgreSQL results database.
pub struct Postgres {
    client: Client,
    /// Each statement prepared once per connection, as SQLite's statement cache does.
    statements: HashMap<String, Statement>,
}

impl Postgres {
    fn prepared(&mut self, sql: &str) -> Result<Statement, DbError> {
        if let Some(statement) = self.statements.get(sql) {
            return Ok(statement.clone());
        }
        let statement = self.client.prepare(&Dialect::Postgres.placeholders(sql))?;
        self.statements.insert(sql.to_string(), statement.clone());
        Ok(statement)
    }
}

fn bound(params: &[SqlValue]) -> Vec<&(dyn ToSql + Sync)> {
    params.iter().map(|p| p as &(dyn ToSql + Sync)).collect()
}

impl Database for Postgres {
    fn dialect(&self) -> Dialect {
        Dialect::Postgres
    }

    fn batch(&mut self, sql: &str) -> Result<(), DbError> {
        Ok(self.client.batch_execute(sql)?)
    }

    fn execute(&mut self, sql: &str, params: &[SqlValue]) -> Result<u64, DbError> {
        let statement = self.prepared(sql)?;
        Ok(self.client.execute(&statement, &bound(params))?)
    }

    fn query(&mut self, sql: &str, params: &[SqlValue]) -> Result<Vec<Row>, DbError> {
        let statement = self.prepared(sql)?;
        let rows = self.client.query(&statement, &bound(params))?;
        rows.iter()
            .map(|row| {
                (0..row.len())
                    .map(|i| cell(row, i))
                    .collect::<Result<_, _>>()
                    .map(Row)
            })
            .collect()
    }
}

/// Column `i` of `row` as a value of the store's few types.
fn cell(row: &postgres::Row, i: usize) -> Result<SqlValue, DbError> {
    let ty = row.columns()[i].type_().clone();
    let value = match ty {
        Type::INT8 => row.try_get::<_, Option<i64>>(i)?.into(),
        // A truth is 1 or 0, as SQLite answers it.
        Type::BOOL => row.try_get::<_, Option<bool>>(i)?.map(i64::from).into(),
        Type::INT4 => row.try_get::<_, Option<i32>>(i)?.map(i64::from).into(),
        Type::INT2 => row.try_get::<_, Option<i16>>(i)?.map(i64::from).into(),
        Type::FLOAT8 => row.try_get::<_, Option<f64>>(i)?.into(),
        Type::FLOAT4 => row.try_get::<_, Option<f32>>(i)?.map(f64::from).into(),
        Type::TEXT | Type::VARCHAR | Type::NAME | Type::BPCHAR => {
            row.try_get::<_, Option<String>>(i)?.into()
        }
        other => {
            return Err(DbError::new(format!(
                "column {i} has type {other}, which the store does not read"
            )));
        }
    };
    Ok(value)
}

impl ToSql for SqlValue {
    fn to_sql(
        &self,
        ty: &Type,
        out: &mut BytesMut,
    ) -> Result<IsNull, Box<dyn StdError + Sync + Send>> {
        match self {
            SqlValue::Null => Ok(IsNull::Yes),
            SqlValue::Int(value) => match *ty {
                Type::INT4 => i32::try_from(*value)?.to_sql(ty, out),
                Type::INT2 => i16::try_from(*value)?.to_sql(ty, out),
                Type::FLOAT8 => (*value as f64).to_sql(ty, out),
                _ => value.to_sql(ty, out),
            },
            SqlValue::Real(value) => match *ty {
                Type::FLOAT4 => (*value as f32).to_sql(ty, out),
                _ => value.to_sql(ty, out),
            },
            SqlValue::Text(value) => value.as_str().to_sql(ty, out),
        }
    }

    fn accepts(ty: &Type) -> bool {
        [
            Type::INT2,
            Type::INT4,
            Type::INT8,
            Type::FLOAT4,
            Type::FLOAT8,
            Type::TEXT,
            Type::VARCHAR,
            Type::NAME,
            Type::BPCHAR,
        ]
        .contains(ty)
    }

    to_sql_checked!();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_url_is_shown_without_its_password() {
        let server = Server::resolve("postgres://ann:s3cret@db.lab:6543/lab").unwrap();
        assert_eq!(server.shown(), "postgres://ann@db.lab:6543/lab");
        assert!(!format!("{server:?}").contains("s3cret"));
        let socket = Server::resolve("postgres://ann@%2Frun%2Fpg/lab").unwrap();
        assert_eq!(socket.shown(), "postgres://ann@/lab?host=/run/pg&port=5432");
    }

    #[test]
    fn a_password_never_reaches_an_error() {
        assert_eq!(
            redacted("postgres://ann:s3cret@db.lab:5432/lab?password=x2&sslmode=disable"),
            "postgres://ann:***@db.lab:5432/lab?password=***&sslmode=disable"
        );
        assert_eq!(redacted("postgres://db.lab/lab"), "postgres://db.lab/lab");
    }

    #[test]
    fn a_bad_url_or_tls_demand_is_refused_with_its_reason() {
        assert!(Server::resolve("postgres://ann@db.lab:notaport/lab").is_err());
        let tls = Server::resolve("postgres://ann@db.lab/lab?sslmode=require").unwrap_err();
        assert!(tls.contains("sslmode=require"), "{tls}");
    }
}
