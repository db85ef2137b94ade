//! What every text report of a run says, in order, before a format dresses it: the
//! run's line, the machine's line, the summary (each part's headline figures, the step
//! that limits the task, what moved since the last profile), the verdicts (errors, then
//! warnings, then the rest, with the "not measured here" notes folded into one line),
//! each workload's heading, rate shape and tables, and the contention table. The
//! terminal, Markdown and HTML reports all read it from here, so they cannot say
//! different things.

use crate::analysis::interference::DISTURBED;
use crate::analysis::since;
use crate::document::{RunDocument, Severity, Verdict, WorkloadRecord};
use crate::vocab::units::format_bytes;
use crate::vocab::{SummaryLine, Table, Unmeasured};
use crate::workload::{DecodeError, Decoded};

/// How much of each workload a report shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Detail {
    /// Every table and verdict (`results show`, a verb's own output).
    #[default]
    Full,
    /// A run of many parts at a glance (`profile`): each kind's brief tables, and no
    /// info verdict whose point the summary already makes.
    Brief,
}

/// The run's summary: whether other work disturbed it, then each workload's lines in
/// the run's order (a workload run alone first speaks through the one it stands for),
/// then what moved since the last profile.
pub fn summary(run: &Decoded) -> Result<Vec<SummaryLine>, DecodeError> {
    let doc = run.doc;
    let mut lines: Vec<SummaryLine> = doc
        .verdicts
        .iter()
        .filter(|v| v.workload.is_none() && v.code == DISTURBED)
        .map(|v| SummaryLine::new(DISTURBED, v.message.clone()))
        .collect();
    for (index, record) in doc.workloads.iter().enumerate() {
        // A record another workload measured speaks through that workload.
        if record.alone_of.is_some() || record.measured_by.is_some() {
            continue;
        }
        if let Some(view) = run.view(index)? {
            lines.extend(view.summary_lines(run)?);
        }
    }
    lines.extend(
        doc.verdicts
            .iter()
            .filter(|v| in_summary(v) && v.code != DISTURBED)
            .map(|v| SummaryLine::new(SINCE, v.message.clone())),
    );
    Ok(lines)
}

/// The summary's part that says what moved since the last profile.
pub const SINCE: &str = "since";

/// Whether a verdict is said by the summary itself: that other work disturbed the
/// run, and what moved since the last profile.
fn in_summary(verdict: &Verdict) -> bool {
    verdict.workload.is_none()
        && (verdict.code == DISTURBED || since::CODES.contains(&verdict.code.as_str()))
}

/// The verdicts as a report lists them.
#[derive(Debug)]
pub struct Listing<'a> {
    /// Errors, then warnings, then the rest, each in the run's order.
    pub verdicts: Vec<&'a Verdict>,
    /// The "not measured on this machine" notes in one line: what is missing and why.
    pub unmeasured: Option<String>,
    /// Info verdicts left out because the summary makes their point (brief only).
    pub left_out: usize,
}

/// The verdicts of `run` in the order and shape every report lists them.
pub fn listing<'a>(run: &Decoded<'a>, detail: Detail) -> Result<Listing<'a>, DecodeError> {
    let doc = run.doc;
    let mut folded: Vec<(usize, String)> = Vec::new();
    let mut missing: Vec<String> = Vec::new();
    let mut covered: Vec<(usize, String)> = Vec::new();
    for (index, record) in doc.workloads.iter().enumerate() {
        if crate::workload::kind(&record.kind).is_none() {
            continue;
        }
        if detail == Detail::Brief && record.measured_by.is_some() {
            // At a glance, the workload that measured it speaks for it: its own info
            // verdicts stay in the full report.
            covered.extend(
                doc.verdicts
                    .iter()
                    .filter(|v| v.workload == Some(index))
                    .map(|v| (index, v.code.clone())),
            );
            continue;
        }
        let Some(view) = run.view(index)? else {
            continue;
        };
        for Unmeasured { codes, what, why } in view.unmeasured() {
            // Only what a verdict of the run says is folded: the line never says more.
            if !doc
                .verdicts
                .iter()
                .any(|v| v.workload == Some(index) && codes.contains(&v.code))
            {
                continue;
            }
            folded.extend(codes.into_iter().map(|code| (index, code)));
            let words = format!("{what} ({why})");
            if !missing.contains(&words) {
                missing.push(words);
            }
        }
        if detail == Detail::Brief && record.alone_of.is_none() {
            for line in view.summary_lines(run)? {
                covered.extend(line.covers.iter().map(|&code| (index, code.to_string())));
            }
        }
    }
    let about = |v: &Verdict, set: &[(usize, String)]| {
        v.workload
            .is_some_and(|w| set.iter().any(|(i, code)| *i == w && *code == v.code))
    };
    let mut verdicts = Vec::new();
    let mut left_out = 0;
    for severity in [Severity::Error, Severity::Warning, Severity::Info] {
        for verdict in doc.verdicts.iter().filter(|v| v.severity == severity) {
            if in_summary(verdict) || (severity == Severity::Info && about(verdict, &folded)) {
                continue;
            }
            if severity == Severity::Info && about(verdict, &covered) {
                left_out += 1;
                continue;
            }
            verdicts.push(verdict);
        }
    }
    Ok(Listing {
        verdicts,
        unmeasured: (!missing.is_empty())
            .then(|| format!("not measured on this machine: {}", missing.join(", "))),
        left_out,
    })
}

/// A verdict's finding without what follows it: its message up to the first `: ` or
/// `; ` outside parentheses, where the explanation begins; the whole message where it
/// has neither.
pub fn gist(message: &str) -> &str {
    let mut depth = 0usize;
    for (at, c) in message.char_indices() {
        match c {
            '(' | '[' => depth += 1,
            ')' | ']' => depth = depth.saturating_sub(1),
            ':' | ';' if depth == 0 && message[at + 1..].starts_with(' ') => {
                return &message[..at];
            }
            _ => {}
        }
    }
    message
}

/// Verdicts with one code folded into one at a glance: each code once, where it first
/// comes in `verdicts`, with the first of them and how many there are.
pub fn folded<'a>(verdicts: &[&'a Verdict]) -> Vec<(&'a Verdict, usize)> {
    let mut folded: Vec<(&'a Verdict, usize)> = Vec::new();
    for &verdict in verdicts {
        match folded.iter_mut().find(|(v, _)| v.code == verdict.code) {
            Some((_, count)) => *count += 1,
            None => folded.push((verdict, 1)),
        }
    }
    folded
}

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

/// `machine: host · CPU · 2 CPUs · 23.5 GiB memory · Linux 6.1`.
pub fn machine_line(doc: &RunDocument) -> String {
    format!("machine: {}", machine_parts(doc).join(" · "))
}

/// The machine line for a terminal: broken between its parts where it would be wider
/// than `width` columns, the rest indented under the first; one line without a width.
pub fn machine_lines(doc: &RunDocument, width: Option<usize>) -> String {
    let limit = width.unwrap_or(usize::MAX);
    const HEAD: &str = "machine: ";
    let mut text = String::from(HEAD);
    let mut width = HEAD.len();
    for (index, part) in machine_parts(doc).iter().enumerate() {
        let part_width = textwrap::core::display_width(part);
        if index > 0 && width.saturating_add(3 + part_width) > limit {
            text.push_str(" ·\n");
            text.push_str(&" ".repeat(HEAD.len()));
            width = HEAD.len();
        } else if index > 0 {
            text.push_str(" · ");
            width += 3;
        }
        text.push_str(part);
        width += part_width;
    }
    text
}

/// The machine's parts as the machine line says them.
fn machine_parts(doc: &RunDocument) -> [String; 5] {
    let m = &doc.machine;
    [
        m.hostname.clone(),
        m.cpu_model.as_deref().unwrap_or("unknown CPU").to_string(),
        format!("{} CPUs", m.logical_cpus),
        format!(
            "{} memory",
            m.memory_bytes.map_or("unknown".into(), format_bytes)
        ),
        format!("Linux {}", m.kernel),
    ]
}

/// `disk 1: /mnt/a`, `disk 3 (alone, for disk 1): /mnt/a`, or `disk 2 (measured by
/// workload 1): /mnt/a`.
pub fn workload_heading(index: usize, record: &WorkloadRecord) -> String {
    let alone = match (record.alone_of, record.measured_by) {
        (Some(of), _) => format!(" (alone, for {} {})", record.kind, of + 1),
        (None, Some(by)) => format!(" (measured by workload {})", by + 1),
        (None, None) => String::new(),
    };
    format!("{} {}{alone}: {}", record.kind, index + 1, record.target)
}

/// The tables a workload's kind makes of it at `detail`, leaving out empty ones (a
/// run stopped before its first item); `None` when this version does not know the kind
/// (see [`unknown_kind`]).
pub fn workload_tables(
    run: &Decoded,
    index: usize,
    detail: Detail,
) -> Result<Option<Vec<Table>>, DecodeError> {
    let Some(view) = run.view(index)? else {
        return Ok(None);
    };
    let tables = match detail {
        Detail::Full => view.tables(),
        Detail::Brief => view.brief_tables(),
    };
    Ok(Some(
        tables.into_iter().filter(|t| !t.rows.is_empty()).collect(),
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

#[cfg(test)]
mod tests {
    use super::gist;

    #[test]
    fn a_gist_ends_where_the_explanation_begins() {
        assert_eq!(
            gist(
                "writes of 10 KiB files ran at 2.0% of the rate (36.1 MB/s: low): creating and syncing limits them"
            ),
            "writes of 10 KiB files ran at 2.0% of the rate (36.1 MB/s: low)"
        );
        assert_eq!(gist("a; b: c"), "a");
        assert_eq!(gist("at 12:30 nothing"), "at 12:30 nothing");
        assert_eq!(gist("no explanation"), "no explanation");
    }
}
