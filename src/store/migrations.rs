//! The results schema, one migration per version. Migrations are only ever added,
//! never edited, so every database ratelab ever wrote can still be opened.

use rusqlite_migration::{M, Migrations};

/// Every schema version, oldest first.
pub fn migrations() -> Migrations<'static> {
    Migrations::new(vec![
        M::up(
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
        ),
        // Workloads side by side: the stand-in run alone first, warnings, the runner's cost.
        M::up(
            "ALTER TABLE workloads ADD COLUMN alone_of INTEGER;
             ALTER TABLE workloads ADD COLUMN warnings TEXT;
             ALTER TABLE runs ADD COLUMN runner_cpu_seconds REAL;
             ALTER TABLE runs ADD COLUMN runner_wall_seconds REAL;",
        ),
    ])
}

#[cfg(test)]
mod tests {
    #[test]
    fn migrations_are_valid() {
        super::migrations().validate().unwrap();
    }
}
