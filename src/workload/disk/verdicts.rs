//! Verdicts about a storage series, in words: figures that break the link's physics,
//! reads that found the cache when they should not, and what limits small files.

use std::collections::BTreeMap;

use super::stored::DiskContext;
use super::{DiskKind, ReadMode, SyncMode};
use crate::document::{Flag, Severity, Verdict};
use crate::storage::item::{DiskItem, Op};
use crate::storage::rates::{EVICTED_FRACTION, SizeRow, by_size};
use crate::vocab::units::{format_bytes, format_rate, format_seconds, format_size};
use crate::workload::Stored;

/// Verdicts about one disk workload, in the order a reader needs them: figures that
/// broke the link's physics, reads that found the cache, modes that show memory, what
/// was kept, knees, a slower destination, and what limits small files.
pub fn verdicts(w: &Stored<DiskKind>) -> Vec<Verdict> {
    let verdict = Verdict::about(Some(w.index()));
    let mut out: Vec<(&'static str, Severity, String)> = Vec::new();
    out.extend(physics(w));
    out.extend(
        w.context
            .chain
            .as_ref()
            .and_then(|chain| chain.virtual_disk_words(&w.record.target))
            .map(|words| ("virtual_disk", Severity::Warning, words)),
    );
    out.extend(not_evicted(w));
    out.extend(memory_modes(&w.items));
    out.extend(data_limited(&w.items));
    if let Some(folder) = &w.context.kept_folder {
        out.push((
            "files_kept",
            Severity::Info,
            format!("the files were kept in {folder}: read them later with --phase read, or remove the folder"),
        ));
    }
    out.extend(knees(w));
    out.extend(
        slower_than_before(w)
            .into_iter()
            .map(|message| ("slower_than_before", Severity::Warning, message)),
    );
    let headline_read = w.params.plan.read_modes.first().map(|mode| mode.as_str());
    for (op, mode, cost) in [
        (Op::Write, None, "creating and syncing each file"),
        (Op::Rewrite, None, "reaching and syncing each file"),
        (Op::Read, headline_read, "opening and reaching each file"),
    ] {
        if let Some(message) = size_effect(&w.items, op, mode, cost) {
            out.push(("small_files_slower", Severity::Info, message));
        }
    }
    out.into_iter()
        .map(|(code, severity, message)| verdict(code, severity, message))
        .collect()
}

/// A verdict before it is said of a workload: its code, severity and words.
type Said = (&'static str, Severity, String);

/// Items faster than the link allows, per operation and mode; or that the link is
/// unknown, so nothing could be checked.
fn physics(w: &Stored<DiskKind>) -> Vec<Said> {
    let target = &w.record.target;
    let via = link_words(&w.context);
    let Some(limit) = w.context.max_bytes_per_sec else {
        return vec![(
            "link_unknown",
            Severity::Info,
            format!(
                "the link limit of {target} is unknown ({via}): no figure could be checked against physics"
            ),
        )];
    };
    groups(&w.items)
        .into_iter()
        .filter_map(|((op, mode), group)| {
            let fast = group
                .iter()
                .filter(|i| i.flags.contains(&Flag::FasterThanLink))
                .count();
            (fast > 0).then(|| {
                (
                    "faster_than_link",
                    Severity::Warning,
                    format!(
                        "{fast} of {} {} ({mode}) on {target} ran faster than its link allows ({via}, at most {}): \
                         they were served from a cache, not the device",
                        group.len(),
                        plural(op),
                        format_rate(limit)
                    ),
                )
            })
        })
        .collect()
}

/// Reads that found part of their file in the page cache after it was evicted.
fn not_evicted(w: &Stored<DiskKind>) -> Vec<Said> {
    let target = &w.record.target;
    groups(&w.items)
        .into_iter()
        .filter(|((op, mode), _)| *op == Op::Read && mode != ReadMode::Cached.as_str())
        .filter_map(|((_, mode), group)| {
            let leaked: Vec<&DiskItem> = group
                .iter()
                .copied()
                .filter(|i| i.most_cached_before().is_some_and(|f| f > EVICTED_FRACTION))
                .collect();
            let worst = leaked.iter().filter_map(|i| i.most_cached_before()).reduce(f64::max)?;
            let mut layers: Vec<&str> = leaked
                .iter()
                .flat_map(|i| &i.layers)
                .filter(|l| l.cached_fraction_before > EVICTED_FRACTION)
                .map(|l| l.layer.as_str())
                .collect();
            layers.sort_unstable();
            layers.dedup();
            let cache = match layers.as_slice() {
                [] => "the page cache".to_string(),
                named => format!("the page cache (of the {} below it)", named.join(" and ")),
            };
            Some((
                "not_evicted",
                Severity::Warning,
                format!(
                    "{} of {} {mode} reads on {target} found up to {:.0}% of the file in {cache} after eviction: \
                     those figures include cache hits",
                    leaked.len(),
                    group.len(),
                    worst * 100.0
                ),
            ))
        })
        .collect()
}

/// Share of a write's span spent waiting for its data past which the data, not the
/// storage, is named as a limit.
const DATA_WAIT_NAMED: f64 = 0.05;

/// Writes whose writer waited for its unique data to be made: where the median wait is
/// a share worth naming, the data, not the storage, limited that much of the figure.
fn data_limited(items: &[DiskItem]) -> Vec<Said> {
    groups(items)
        .into_iter()
        .filter(|((op, _), _)| *op != Op::Read)
        .filter_map(|((op, mode), group)| {
            let mut shares: Vec<f64> = group
                .iter()
                .map(|i| i.data_wait_fraction.unwrap_or(0.0))
                .collect();
            shares.sort_by(f64::total_cmp);
            let median = shares[shares.len() / 2];
            (median >= DATA_WAIT_NAMED).then(|| {
                (
                    "data_limited",
                    Severity::Warning,
                    format!(
                        "{} ({mode}) waited {} of their time (median) for their data, unique in \
                         every sector, to be made on another core: that share of these figures \
                         is this machine's CPU, not the storage",
                        plural(op),
                        percent(median)
                    ),
                )
            })
        })
        .collect()
}

/// Modes whose figures show memory, not storage: cached reads and unsynced writes.
fn memory_modes(items: &[DiskItem]) -> Vec<Said> {
    let mut out = Vec::new();
    if items
        .iter()
        .any(|i| i.op == Op::Read && i.mode == ReadMode::Cached.as_str())
    {
        out.push((
            "cached_reads",
            Severity::Info,
            "reads in mode cached come from the page cache: they show memory, not storage".into(),
        ));
    }
    if items
        .iter()
        .any(|i| i.op == Op::Write && i.mode == SyncMode::None.as_str())
    {
        out.push((
            "unsynced_writes",
            Severity::Info,
            "writes with --sync none end when the data reaches the page cache: they show memory, not storage".into(),
        ));
    }
    out
}

/// Where the rate of a sustained run changed for good.
fn knees(w: &Stored<DiskKind>) -> Vec<Said> {
    let target = &w.record.target;
    w.knees
        .iter()
        .flatten()
        .map(|knee| {
            (
                "knee",
                Severity::Info,
                format!(
                    "the rate on {target} changed for good at {}, after {}: from {} to {} \
                     (a cache filling up, or a thermal or link throttle, does this)",
                    format_seconds(knee.t_s),
                    format_bytes(knee.bytes_before),
                    format_rate(knee.before_bytes_per_sec),
                    format_rate(knee.after_bytes_per_sec)
                ),
            )
        })
        .collect()
}

/// Below this share of the earlier median, a quick check is slower than before.
const SLOWER_THAN_BEFORE: f64 = 0.5;

/// For a quick check with earlier checks of the same target: which parts ran at less
/// than half their earlier median.
fn slower_than_before(w: &Stored<DiskKind>) -> Vec<String> {
    let Some(baseline) = w.context.baseline else {
        return Vec::new();
    };
    let runs = baseline.runs;
    let mut out = Vec::new();
    for (part, before, now) in [
        (
            "the 50 MiB file",
            baseline.large_bytes_per_sec,
            w.items.iter().find(|i| i.files.is_none()),
        ),
        (
            "the small files",
            baseline.small_bytes_per_sec,
            w.items.iter().find(|i| i.files.is_some()),
        ),
    ] {
        if let Some(now) = now
            && now.bytes_per_sec < before * SLOWER_THAN_BEFORE
        {
            out.push(format!(
                "{part} went to {} at {}, {:.0}% of the median of the {runs} earlier checks ({})",
                w.record.target,
                format_rate(now.bytes_per_sec),
                now.bytes_per_sec / before * 100.0,
                format_rate(before)
            ));
        }
    }
    out
}

/// Items grouped by operation and mode.
fn groups(items: &[DiskItem]) -> BTreeMap<(Op, String), Vec<&DiskItem>> {
    let mut groups: BTreeMap<(Op, String), Vec<&DiskItem>> = BTreeMap::new();
    for item in items {
        groups
            .entry((item.op, item.mode.clone()))
            .or_default()
            .push(item);
    }
    groups
}

/// Says how much slower the smallest files are than the largest, when it is a lot.
fn size_effect(items: &[DiskItem], op: Op, mode: Option<&str>, cost: &str) -> Option<String> {
    let rows: Vec<SizeRow> = by_size(items)
        .into_iter()
        .filter(|r| r.op == op && mode.is_none_or(|m| r.mode == m))
        .collect();
    let (small, large) = (rows.first()?, rows.last()?);
    if small.size_bytes == large.size_bytes || large.rates.median_bytes_per_sec <= 0.0 {
        return None;
    }
    let ratio = small.rates.median_bytes_per_sec / large.rates.median_bytes_per_sec;
    (ratio < 0.5).then(|| {
        format!(
            "{} of {} files ran at {} of the rate of {} files ({} against {}): {cost} limits small files, not the transfer",
            plural(op),
            format_size(small.size_bytes),
            percent(ratio),
            format_size(large.size_bytes),
            format_rate(small.rates.median_bytes_per_sec),
            format_rate(large.rates.median_bytes_per_sec)
        )
    })
}

/// A share as a percentage with the precision it deserves: `34%`, `0.5%`.
fn percent(share: f64) -> String {
    if share >= 0.1 {
        format!("{:.0}%", share * 100.0)
    } else {
        format!("{:.1}%", share * 100.0)
    }
}

fn plural(op: Op) -> &'static str {
    match op {
        Op::Write => "writes",
        Op::Rewrite => "rewrites",
        Op::Read => "reads",
    }
}

/// The link in words, from a disk workload's stored context.
pub fn link_words(context: &DiskContext) -> String {
    if context.limit_source.as_deref() == Some("--link-rate") {
        return "given with --link-rate".into();
    }
    if let Some(via) = context.chain.as_ref().and_then(|c| c.limit_via.as_ref()) {
        return via.clone();
    }
    let steps: Vec<String> = context
        .chain
        .iter()
        .flat_map(|chain| &chain.steps)
        .filter(|step| !step.detail.is_empty())
        .map(|step| step.detail.clone())
        .collect();
    if steps.is_empty() {
        "no link found".into()
    } else {
        steps.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::item::tests::item;

    #[test]
    fn writes_that_waited_for_their_data_name_it_and_others_do_not() {
        let waited = |share: Option<f64>| DiskItem {
            data_wait_fraction: share,
            ..item(Op::Write, "fsync", 1 << 30, 1e9, None)
        };
        let quiet = [waited(None), waited(Some(0.01)), waited(None)];
        assert!(data_limited(&quiet).is_empty());
        let limited = [waited(Some(0.2)), waited(Some(0.3)), waited(None)];
        let said = data_limited(&limited);
        assert_eq!(said.len(), 1, "{said:?}");
        assert_eq!(said[0].0, "data_limited");
        assert!(
            said[0]
                .2
                .starts_with("writes (fsync) waited 20% of their time (median)"),
            "{}",
            said[0].2
        );
    }

    #[test]
    fn small_files_verdict_names_the_sizes() {
        let items = vec![
            item(Op::Write, "fsync", 10 << 10, 2e6, None),
            item(Op::Write, "fsync", 256 << 20, 400e6, None),
        ];
        let message =
            size_effect(&items, Op::Write, None, "creating and syncing each file").unwrap();
        assert!(
            message.contains("10 KiB") && message.contains("256 MiB"),
            "{message}"
        );
        assert!(message.contains("at 0.5% of"), "{message}");
    }
}
