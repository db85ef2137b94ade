//! Stored runs side by side, for people and scripts: one table per matched workload (a
//! row per group, each run's median, each later run's change, p-value and finding) for
//! the terminal and for Markdown, and the whole comparison as JSON.

use std::fmt::Write;

use crate::analysis::compare::{
    ALPHA, Change, Comparison, Finding, Group, MIN_CHANGE_FRACTION, MIN_ITEMS, WorkloadComparison,
};
use crate::vocab::Table;
use crate::vocab::units::{format_bytes, format_size};

/// The comparison as text for a terminal.
pub fn terminal(comparison: &Comparison) -> String {
    // Every line of words wraps between words, as the run report's do.
    let wrapped = |line: &str| super::terminal::hanging("", line);
    let mut out = String::new();
    for line in header(comparison) {
        out.push_str(&wrapped(&line));
    }
    for table in tables(comparison) {
        let _ = writeln!(out, "\n{}", super::terminal::table_text(&table));
    }
    let skipped = skipped(comparison);
    if !skipped.is_empty() {
        let _ = writeln!(out);
        for line in skipped {
            out.push_str(&wrapped(&line));
        }
    }
    let _ = writeln!(out);
    out.push_str(&wrapped(&tally(comparison)));
    out.push_str(&wrapped(&legend()));
    out
}

/// The comparison as GitHub-flavoured Markdown, to paste into an issue.
pub fn markdown(comparison: &Comparison) -> String {
    use super::markdown::{escape, table_markdown};
    let mut out = String::new();
    let ids: Vec<String> = comparison
        .runs
        .iter()
        .map(|r| r.run_id.to_string())
        .collect();
    let _ = writeln!(out, "## runs {} compared\n", ids.join(", "));
    for line in header(comparison) {
        let _ = writeln!(out, "- {}", escape(&line));
    }
    let _ = writeln!(out);
    for table in tables(comparison) {
        // Flags in bold; a whole cell of these plain words cannot come from anything else.
        let mut text = table_markdown(&table);
        // One at a time: neighbouring cells share their `|`.
        while text.contains("| beyond noise |") {
            text = text.replacen("| beyond noise |", "| **beyond noise** |", 1);
        }
        let _ = writeln!(out, "{text}");
    }
    let skipped = skipped(comparison);
    for line in &skipped {
        let _ = writeln!(out, "- {}", escape(line));
    }
    if !skipped.is_empty() {
        let _ = writeln!(out);
    }
    let _ = writeln!(
        out,
        "{}\n\n_{}_",
        escape(&tally(comparison)),
        escape(&legend())
    );
    out
}

/// The comparison as one pretty JSON document with a final newline.
pub fn json(comparison: &Comparison) -> Vec<u8> {
    let mut bytes = serde_json::to_vec_pretty(comparison).expect("comparisons serialise");
    bytes.push(b'\n');
    bytes
}

/// One line per run: what it was, when, where.
fn header(comparison: &Comparison) -> Vec<String> {
    comparison
        .runs
        .iter()
        .enumerate()
        .map(|(index, run)| {
            let role = if index == 0 { " (the reference)" } else { "" };
            let label = run
                .label
                .as_deref()
                .map(|l| format!(" · {l}"))
                .unwrap_or_default();
            let disturbed = if run.disturbed {
                " · disturbed by other work (see its verdicts)"
            } else {
                ""
            };
            format!(
                "run {}{role}: {} · {} · {} · {}{label}{disturbed}",
                run.run_id, run.verb, run.status, run.started_at, run.hostname
            )
        })
        .collect()
}

/// The tables: one per matched workload that has groups.
pub fn tables(comparison: &Comparison) -> Vec<Table> {
    comparison
        .workloads
        .iter()
        .filter(|w| w.skipped.is_none() && !w.groups.is_empty())
        .map(|w| workload_table(comparison, w))
        .collect()
}

fn workload_table(comparison: &Comparison, workload: &WorkloadComparison) -> Table {
    let first_id = comparison.runs.first().map_or(0, |r| r.run_id);
    // One unit for every group names it in the heading; groups of several (IOPS and
    // latency) each say theirs in their cells.
    let unit = workload
        .groups
        .first()
        .map(|g| g.rate_unit)
        .filter(|&unit| workload.groups.iter().all(|g| g.rate_unit == unit));
    let unit_words = unit.map_or(String::new(), |unit| format!(" {}", unit.words()));
    let columns = KeyColumns::of(&workload.groups);
    let mut header = columns.header();
    let key_count = header.len();
    header.push("n".into());
    header.extend(
        comparison
            .runs
            .iter()
            .map(|r| format!("run {}{unit_words}", r.run_id)),
    );
    let several = comparison.runs.len() > 2;
    for run in comparison.runs.iter().skip(1) {
        let (change, p, finding) = if several {
            (
                format!("run {} vs {first_id}", run.run_id),
                format!("p ({})", run.run_id),
                format!("verdict ({})", run.run_id),
            )
        } else {
            ("change".into(), "p".into(), "verdict".into())
        };
        header.extend([change, p, finding]);
    }
    let rows = workload
        .groups
        .iter()
        .map(|group| {
            let mut row = columns.cells(group);
            row.push(
                group
                    .runs
                    .iter()
                    .map(|r| r.rates.len().to_string())
                    .collect::<Vec<_>>()
                    .join("/"),
            );
            row.extend(group.runs.iter().map(|r| match (r.median, unit) {
                (None, _) => "-".into(),
                (Some(m), Some(unit)) => unit.cell(m),
                (Some(m), None) => group.rate_unit.format(m),
            }));
            for change in &group.changes {
                row.extend(change_cells(change));
            }
            row
        })
        .collect();
    let mut numeric: Vec<usize> = (key_count..header.len())
        .filter(|&i| !header[i].starts_with("verdict"))
        .chain(columns.numeric())
        .collect();
    numeric.sort_unstable();
    Table {
        title: format!(
            "{} · {} · medians of the items' rates",
            workload.kind,
            targets(comparison, workload)
        ),
        header,
        rows,
        numeric,
    }
}

/// The targets of a matched workload: one when all runs share it, else each with its run.
fn targets(comparison: &Comparison, workload: &WorkloadComparison) -> String {
    // Workloads run alone first (--alone) stand apart from the same targets together.
    let alone = if workload.alone { " (alone)" } else { "" };
    format!("{}{alone}", target_names(comparison, workload))
}

/// The workload's target, or each run's where they differ.
fn target_names(comparison: &Comparison, workload: &WorkloadComparison) -> String {
    let mut distinct: Vec<&str> = workload
        .targets
        .iter()
        .flatten()
        .map(String::as_str)
        .collect();
    distinct.dedup();
    if distinct.len() <= 1 {
        return distinct.first().copied().unwrap_or("?").to_string();
    }
    workload
        .targets
        .iter()
        .zip(&comparison.runs)
        .map(|(target, run)| {
            format!(
                "{} (run {})",
                target.as_deref().unwrap_or("none"),
                run.run_id
            )
        })
        .collect::<Vec<_>>()
        .join(" vs ")
}

/// Which key fields a workload's groups use, as leading columns.
struct KeyColumns {
    size: bool,
    banded: bool,
    threads: bool,
    class: bool,
}

impl KeyColumns {
    fn of(groups: &[Group]) -> KeyColumns {
        KeyColumns {
            size: groups.iter().any(|g| g.key.size_bytes.is_some()),
            banded: groups.iter().any(|g| g.key.banded),
            threads: groups.iter().any(|g| g.key.threads.is_some()),
            class: groups.iter().any(|g| g.key.class.is_some()),
        }
    }

    fn header(&self) -> Vec<String> {
        let mut header = vec!["op".to_string()];
        if self.size {
            header.push(if self.banded { "size band" } else { "size" }.into());
        }
        if self.threads {
            header.push("threads".into());
        }
        if self.class {
            header.push("class".into());
        }
        header
    }

    /// Indexes of the numeric key columns.
    fn numeric(&self) -> Vec<usize> {
        let mut index = 1;
        let mut numeric = Vec::new();
        if self.size {
            if !self.banded {
                numeric.push(index);
            }
            index += 1;
        }
        if self.threads {
            numeric.push(index);
        }
        numeric
    }

    fn cells(&self, group: &Group) -> Vec<String> {
        let key = &group.key;
        let mut cells = vec![key.op.clone()];
        if self.size {
            cells.push(match (key.size_bytes, key.banded) {
                (None, _) => "-".into(),
                (Some(size), false) => format_size(size),
                (Some(from), true) => match key.size_to_bytes {
                    Some(to) => format!("{} to {}", format_bytes(from), format_bytes(to)),
                    None => format!("{} and up", format_bytes(from)),
                },
            });
        }
        if self.threads {
            cells.push(key.threads.map_or("-".into(), |t| t.to_string()));
        }
        if self.class {
            cells.push(key.class.clone().unwrap_or_else(|| "-".into()));
        }
        cells
    }
}

/// The change, p-value and finding of a later run.
fn change_cells(change: &Change) -> [String; 3] {
    [
        match (change.ratio, change.change_percent) {
            (Some(ratio), Some(percent)) => format!("{ratio:.2}x ({percent:+.1}%)"),
            _ => "-".into(),
        },
        change.p_value.map_or("-".into(), p_cell),
        change.finding.words().to_string(),
    ]
}

/// A p-value to two significant digits: `0.31`, `0.048`, `1.6e-4`.
fn p_cell(p: f64) -> String {
    if p >= 0.1 {
        format!("{p:.2}")
    } else if p >= 0.001 {
        format!("{p:.3}")
    } else {
        format!("{p:.1e}")
    }
}

/// Lines for workloads that were not compared, and why, and for items left out.
fn skipped(comparison: &Comparison) -> Vec<String> {
    let mut lines = Vec::new();
    for workload in &comparison.workloads {
        let why = workload.skipped.as_deref().or_else(|| {
            workload
                .groups
                .is_empty()
                .then_some("no items to compare in any run")
        });
        if let Some(why) = why {
            lines.push(format!(
                "not compared: {} · {}: {why}",
                workload.kind,
                targets(comparison, workload)
            ));
        }
        let too_short: Vec<String> = comparison
            .runs
            .iter()
            .enumerate()
            .filter_map(|(index, run)| {
                let count: usize = workload
                    .groups
                    .iter()
                    .map(|g| g.runs[index].too_short)
                    .sum();
                (count > 0).then(|| format!("{count} in run {}", run.run_id))
            })
            .collect();
        if !too_short.is_empty() {
            lines.push(format!(
                "left out: {} · {}: items with no figure (an interval in which nothing completed): {}",
                workload.kind,
                targets(comparison, workload),
                too_short.join(", ")
            ));
        }
    }
    lines
}

/// How many groups changed beyond noise, out of how many were tested.
fn tally(comparison: &Comparison) -> String {
    let changes: Vec<&Change> = comparison
        .workloads
        .iter()
        .flat_map(|w| &w.groups)
        .flat_map(|g| &g.changes)
        .collect();
    let beyond = changes.iter().filter(|c| c.beyond_noise).count();
    let tested = changes.iter().filter(|c| c.p_value.is_some()).count();
    let disturbed = changes
        .iter()
        .filter(|c| c.finding == Finding::Disturbed)
        .count();
    let set_aside = if disturbed > 0 {
        format!(
            "; {disturbed} set aside as disturbed run: other work on the machine disturbed a run, \
             so the change is not put down to the machine"
        )
    } else {
        String::new()
    };
    format!(
        "{beyond} of {} changes beyond noise ({tested} tested, {} with too few items or missing){set_aside}",
        changes.len(),
        changes.len() - tested
    )
}

/// What the findings mean.
fn legend() -> String {
    format!(
        "beyond noise: p < {ALPHA} in a two-sided Mann-Whitney U test of the items' rates \
         against the first run's, and a change of {:.0}% or more in median; small change: \
         p < {ALPHA} but under {:.0}%; too few items: under {MIN_ITEMS} items on a side",
        MIN_CHANGE_FRACTION * 100.0,
        MIN_CHANGE_FRACTION * 100.0
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::compare::{Samples, compared};
    use crate::document::{RunDocument, WorkloadRecord};
    use crate::vocab::{GroupKey, RateUnit};

    /// Run `id` with one storage workload whose 4 MiB writes ran at `rates`.
    fn run(id: i64, rates: &[f64]) -> (RunDocument, Vec<Option<Samples>>) {
        let key = GroupKey {
            size_bytes: Some(4 << 20),
            ..GroupKey::new(RateUnit::BytesPerSec, "write")
        };
        let samples = Samples {
            items: rates.iter().map(|&r| (key.clone(), Some(r))).collect(),
        };
        let doc = RunDocument {
            run_id: Some(id),
            verb: "disk".into(),
            label: Some(format!("label {id}")),
            ..RunDocument::for_test(vec![WorkloadRecord::for_test("disk", "/mnt/x", vec![])])
        };
        (doc, vec![Some(samples)])
    }

    fn halved() -> Comparison {
        let first: Vec<f64> = (0..8).map(|i| 4e7 + f64::from(i) * 1e5).collect();
        let later: Vec<f64> = first.iter().map(|r| r / 2.0).collect();
        compared(&[run(1, &first), run(2, &later)])
    }

    #[test]
    fn the_table_has_a_row_per_group_and_a_cell_per_column() {
        let tables = tables(&halved());
        assert_eq!(tables.len(), 1);
        let table = &tables[0];
        assert_eq!(
            table.header,
            [
                "op",
                "size",
                "n",
                "run 1 MB/s",
                "run 2 MB/s",
                "change",
                "p",
                "verdict"
            ]
        );
        assert_eq!(
            table.rows,
            [[
                "write",
                "4 MiB",
                "8/8",
                "40.4",
                "20.2",
                "0.50x (-50.0%)",
                "1.6e-4",
                "beyond noise"
            ]]
        );
        assert_eq!(table.numeric, [1, 2, 3, 4, 5, 6]);
    }

    #[test]
    fn markdown_flags_in_bold_and_text_names_the_reference() {
        let comparison = halved();
        let markdown = markdown(&comparison);
        assert!(
            markdown.starts_with("## runs 1, 2 compared\n"),
            "{markdown}"
        );
        assert!(
            markdown.contains(
                "| write | 4 MiB | 8/8 | 40.4 | 20.2 | 0.50x (-50.0%) | 1.6e-4 | **beyond noise** |"
            ),
            "{markdown}"
        );
        assert!(markdown.contains("| --- | ---: | ---: |"), "{markdown}");
        let text = terminal(&comparison);
        assert!(text.contains("run 1 (the reference): disk"), "{text}");
        assert!(text.contains("1 of 1 changes beyond noise"), "{text}");
    }

    #[test]
    fn three_runs_get_columns_per_later_run() {
        let rates = [1e8, 1.1e8, 0.9e8];
        let comparison = compared(&[run(4, &rates), run(5, &rates), run(6, &rates)]);
        let table = &tables(&comparison)[0];
        assert!(table.header.contains(&"run 6 vs 4".to_string()));
        assert!(table.header.contains(&"verdict (5)".to_string()));
        assert!(table.rows.iter().all(|r| r.len() == table.header.len()));
    }

    #[test]
    fn p_values_read_well() {
        assert_eq!(p_cell(1.0), "1.00");
        assert_eq!(p_cell(0.048), "0.048");
        assert_eq!(p_cell(0.000_155_4), "1.6e-4");
    }
}
