//! What every text report of a run says, in order, before a format dresses it: the
//! run's line, the machine's line, each workload's heading, rate shape and tables, the
//! contention table and the verdicts. The terminal, Markdown and HTML reports all read
//! it from here, so they cannot say different things.

use crate::document::{RunDocument, Severity, WorkloadRecord};
use crate::vocab::Table;
use crate::vocab::units::format_bytes;
use crate::workload::{self, At, DecodeError};

/// `run 12 · disk · complete · 2026-11-22T10:00:00Z · label`.
pub fn run_line(doc: &RunDocument) -> String {
    let id = doc
        .run_id
        .map_or("not stored".to_string(), |id| format!("run {id}"));
    let reason = doc
        .incomplete_reason
        .as_deref()
        .map(|r| format!(" ({r})"))
        .unwrap_or_default();
    let label = doc
        .label
        .as_deref()
        .map(|l| format!(" · {l}"))
        .unwrap_or_default();
    format!(
        "{id} · {} · {}{reason} · {}{label}",
        doc.verb,
        doc.status.as_str(),
        doc.started_at
    )
}

/// `machine: host · CPU · 2 CPUs · 25.3 GB memory · Linux 6.1`.
pub fn machine_line(doc: &RunDocument) -> String {
    let m = &doc.machine;
    format!(
        "machine: {} · {} · {} CPUs · {} memory · Linux {}",
        m.hostname,
        m.cpu_model.as_deref().unwrap_or("unknown CPU"),
        m.logical_cpus,
        m.memory_bytes.map_or("unknown".into(), format_bytes),
        m.kernel
    )
}

/// `disk 1: /mnt/a`, or `disk 3 (alone, for disk 1): /mnt/a`.
pub fn workload_heading(index: usize, record: &WorkloadRecord) -> String {
    let alone = record
        .alone_of
        .map(|of| format!(" (alone, for {} {})", record.kind, of + 1))
        .unwrap_or_default();
    format!("{} {}{alone}: {}", record.kind, index + 1, record.target)
}

/// The tables a workload's kind makes of it, leaving out empty ones (a run stopped
/// before its first item); `None` when this version does not know the kind (see
/// [`unknown_kind`]).
pub fn workload_tables(at: At) -> Result<Option<Vec<Table>>, DecodeError> {
    let Some(kind) = workload::kind(&at.record().kind) else {
        return Ok(None);
    };
    Ok(Some(
        kind.tables(at)?
            .into_iter()
            .filter(|t| !t.rows.is_empty())
            .collect(),
    ))
}

/// What a report says in place of the tables of a kind this version does not know.
pub fn unknown_kind(record: &WorkloadRecord) -> String {
    format!("kind {} is not known to this ratelab version", record.kind)
}

/// The name of a verdict's severity.
pub fn severity_name(severity: Severity) -> &'static str {
    match severity {
        Severity::Info => "info",
        Severity::Warning => "warning",
        Severity::Error => "error",
    }
}
