//! Finding runs: the questions verbs ask of earlier runs (the last profile of this
//! machine, earlier checks of a target, storage series of a folder) and the filters of
//! `results list`, answered in SQL so that no run is loaded to be looked at.

use super::database::{Dialect, Row, SqlValue};
use super::{Error, RunListing, Store};
use crate::document::RunStatus;

/// Which runs to find; every condition given must hold.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunQuery {
    /// Made by one of these verbs; any verb when empty.
    pub verbs: Vec<String>,
    /// With this status.
    pub status: Option<RunStatus>,
    /// On the machine of exactly this host name.
    pub hostname: Option<String>,
    /// On a machine whose host name or CPU model contains this text, in any case.
    pub machine_contains: Option<String>,
    /// With a workload of this kind.
    pub kind: Option<String>,
    /// With a workload whose target is exactly this.
    pub target: Option<String>,
    /// With a workload whose target contains this text.
    pub target_contains: Option<String>,
    /// With a label that contains this text.
    pub label_contains: Option<String>,
    /// Started at or after this moment (RFC 3339 UTC, as stored).
    pub started_from: Option<String>,
    /// Started at or before this moment (RFC 3339 UTC, as stored).
    pub started_until: Option<String>,
    /// Started before this moment (RFC 3339 UTC, as stored).
    pub started_before: Option<String>,
    /// The oldest first instead of the newest.
    pub oldest_first: bool,
    /// At most this many.
    pub limit: Option<usize>,
}

impl RunQuery {
    /// Complete runs made by `verbs`.
    pub fn complete(verbs: &[&str]) -> RunQuery {
        RunQuery {
            verbs: verbs.iter().map(|v| v.to_string()).collect(),
            status: Some(RunStatus::Complete),
            ..RunQuery::default()
        }
    }

    /// The SQL condition in `dialect`, and its parameters.
    fn condition(&self, dialect: Dialect) -> (String, Vec<SqlValue>) {
        let mut sql = Conditions::default();
        if !self.verbs.is_empty() {
            let list = |marks: &[usize]| {
                let marks: Vec<String> = marks.iter().map(|n| format!("?{n}")).collect();
                format!("r.verb IN ({})", marks.join(", "))
            };
            sql.push(list, self.verbs.clone());
        }
        let status = self.status.map(|s| s.as_str().to_string());
        sql.one(&status, |n| format!("r.status = ?{n}"));
        sql.one(&self.hostname, |n| format!("r.hostname = ?{n}"));
        if let Some(text) = &self.machine_contains {
            let cpu = format!(
                "coalesce({}, '')",
                dialect.json_text("r.machine", "cpu_model")
            );
            let either = |m: &[usize]| {
                format!(
                    "({} OR {})",
                    dialect.contains("r.hostname", m[0], true),
                    dialect.contains(&cpu, m[1], true)
                )
            };
            sql.push(either, vec![text.clone(), text.clone()]);
        }
        let workload = |condition: String| {
            format!("EXISTS (SELECT 1 FROM workloads w WHERE w.run_id = r.id AND {condition})")
        };
        sql.one(&self.kind, |n| workload(format!("w.kind = ?{n}")));
        sql.one(&self.target, |n| workload(format!("w.target = ?{n}")));
        sql.one(&self.target_contains, |n| {
            workload(dialect.contains("w.target", n, false))
        });
        sql.one(&self.label_contains, |n| {
            dialect.contains("r.label", n, false)
        });
        sql.one(&self.started_from, |n| format!("r.started_at >= ?{n}"));
        sql.one(&self.started_until, |n| format!("r.started_at <= ?{n}"));
        sql.one(&self.started_before, |n| format!("r.started_at < ?{n}"));
        sql.finish()
    }
}

/// A WHERE condition being built: its clauses, joined by AND, and their parameters.
#[derive(Default)]
struct Conditions {
    clauses: Vec<String>,
    values: Vec<SqlValue>,
}

impl Conditions {
    /// Adds a clause of `given.len()` parameters, written from their numbers.
    fn push(&mut self, clause: impl Fn(&[usize]) -> String, given: Vec<String>) {
        let first = self.values.len() + 1;
        let marks: Vec<usize> = (first..first + given.len()).collect();
        self.clauses.push(clause(&marks));
        self.values.extend(given.into_iter().map(SqlValue::Text));
    }

    /// Adds a clause of one parameter, `value`, where it is given.
    fn one(&mut self, value: &Option<String>, clause: impl Fn(usize) -> String) {
        if let Some(value) = value {
            self.push(|marks| clause(marks[0]), vec![value.clone()]);
        }
    }

    /// The condition (`1 = 1` for none) and its parameters.
    fn finish(self) -> (String, Vec<SqlValue>) {
        let condition = if self.clauses.is_empty() {
            "1 = 1".to_string()
        } else {
            self.clauses.join(" AND ")
        };
        (condition, self.values)
    }
}

impl Store {
    /// The runs `query` asks for, newest first unless it asks for the oldest.
    pub fn find_runs(&self, query: &RunQuery) -> Result<Vec<RunListing>, Error> {
        let rows = self.reading(|db| {
            let dialect = db.dialect();
            let (condition, values) = query.condition(dialect);
            let order = if query.oldest_first { "ASC" } else { "DESC" };
            let limit = query.limit.map_or(String::new(), |n| format!(" LIMIT {n}"));
            let targets = dialect.lines("target", "workloads w", "w.run_id = r.id", "idx");
            db.query(
                &format!(
                    "SELECT r.id, r.started_at, r.verb, r.label, r.status, {targets}, r.run_uuid, r.hostname
                     FROM runs r WHERE {condition} ORDER BY r.id {order}{limit}"
                ),
                &values,
            )
        });
        let listing = |row: &Row| {
            let status = row.text(4)?;
            Ok(RunListing {
                run_id: row.int(0)?,
                run_uuid: row.opt_text(6)?,
                started_at: row.text(1)?,
                machine: row.text(7)?,
                verb: row.text(2)?,
                label: row.opt_text(3)?,
                status: RunStatus::parse(&status).unwrap_or(RunStatus::Incomplete),
                targets: row
                    .opt_text(5)?
                    .map(|t| t.lines().map(str::to_string).collect())
                    .unwrap_or_default(),
            })
        };
        rows.and_then(|rows| rows.iter().map(listing).collect())
            .map_err(|e| self.sql(e))
    }

    /// Every run, newest first.
    pub fn list_runs(&self) -> Result<Vec<RunListing>, Error> {
        self.find_runs(&RunQuery::default())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::fixture;

    fn ids(store: &Store, query: RunQuery) -> Vec<i64> {
        store
            .find_runs(&query)
            .unwrap()
            .iter()
            .map(|r| r.run_id)
            .collect()
    }

    #[test]
    fn queries_filter_in_sql_as_the_listing_would() {
        let (_dir, store) = fixture();
        assert_eq!(
            ids(&store, RunQuery::default()),
            (1..=15).rev().collect::<Vec<_>>()
        );
        assert_eq!(ids(&store, RunQuery::complete(&["disk"])), [4, 3, 2, 1]);
        let incomplete = RunQuery {
            status: Some(RunStatus::Incomplete),
            ..RunQuery::default()
        };
        assert_eq!(ids(&store, incomplete), [15]);
        let net = RunQuery {
            kind: Some("net".into()),
            oldest_first: true,
            limit: Some(2),
            ..RunQuery::default()
        };
        assert_eq!(ids(&store, net), [7, 8]);
        let machine = RunQuery {
            machine_contains: Some("XEON".into()),
            label_contains: Some("fixture-ta".into()),
            ..RunQuery::default()
        };
        assert_eq!(ids(&store, machine), [12]);
        let nowhere = RunQuery {
            hostname: Some("no such host".into()),
            ..RunQuery::default()
        };
        assert!(ids(&store, nowhere).is_empty());
        let folder = RunQuery {
            target_contains: Some("/files".into()),
            started_from: Some("2026-11-24T00:00:00Z".into()),
            started_before: Some("2026-11-25T00:00:00Z".into()),
            ..RunQuery::default()
        };
        assert_eq!(ids(&store, folder), [5]);
        let before = RunQuery {
            started_until: Some("2026-11-23T23:59:59Z".into()),
            ..RunQuery::default()
        };
        assert!(ids(&store, before).is_empty());
    }
}
