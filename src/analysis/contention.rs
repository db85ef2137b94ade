//! Contention: what workloads that ran at once did to each other. Rates over the time
//! all were active, the aggregate, Jain's fairness index, and, when each also ran
//! alone first, how much each slowed down and whether they share one bottleneck.

use serde::{Deserialize, Serialize};

use crate::catch::skew_series_rate;
use crate::document::{Series, Severity, Verdict, WorkloadRecord};
use crate::vocab::RateUnit;

/// Aggregate together below this share of the best alone rate means one shared limit.
const SHARED_BOTTLENECK: f64 = 1.25;
/// Aggregate together above this share of the sum alone means no shared limit.
const INDEPENDENT: f64 = 0.85;
/// Jain's index below this is an unfair share.
const UNFAIR: f64 = 0.8;
/// Verdicts need the workloads to overlap for at least this many sampling intervals.
const MIN_OVERLAP_INTERVALS: f64 = 5.0;

/// The contention report of one group of workloads that ran at once.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Contention {
    /// Seconds during which every workload of the group was active.
    pub overlap_s: f64,
    /// Start of that window, seconds from the group's start.
    pub overlap_start_s: f64,
    /// End of that window.
    pub overlap_end_s: f64,
    /// All workloads' bytes per second over the window.
    pub aggregate_bytes_per_sec: f64,
    /// The sum of their rates alone, with `--alone`.
    pub alone_sum_bytes_per_sec: Option<f64>,
    /// Jain's fairness index over their rates in the window (each as a share of its rate
    /// alone, with `--alone`): 1 is an even share.
    pub jain_index: f64,
    /// Sampling interval of the group, which bounds how short an overlap can be read.
    pub interval_s: f64,
    /// Workloads of the group that never started (stopped before their delay ran out).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub never_ran: Vec<usize>,
    /// The workload that finished first.
    pub first_finished: Option<usize>,
    /// Each workload's figures.
    pub workloads: Vec<WorkloadContention>,
}

/// One workload's part in a contention report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkloadContention {
    /// Index of the workload in the run.
    pub workload: usize,
    /// Its target.
    pub target: String,
    /// Its rate over its whole run in the group: the same work as its run alone.
    pub together_bytes_per_sec: f64,
    /// Its rate while all were active.
    pub overlap_bytes_per_sec: f64,
    /// Its rate when it ran alone, with `--alone`.
    pub alone_bytes_per_sec: Option<f64>,
    /// Alone rate over together rate, for the same work: 2 means it ran at half speed.
    pub slowdown: Option<f64>,
    /// When it started, seconds from the group's start.
    pub started_at_s: f64,
    /// When it finished.
    pub finished_at_s: Option<f64>,
}

/// The contention report for the workloads `together` of `records`, using the records
/// that ran alone for them (`alone_of`) when there are any; `None` unless two of them
/// ran.
pub fn measure(records: &[WorkloadRecord], together: &[usize]) -> Option<Contention> {
    // Workloads that move no bytes (cpu tests, a monitor) take no bandwidth to share.
    let moves_bytes = |i: &usize| {
        records
            .get(*i)
            .and_then(|r| r.series.as_ref())
            .is_none_or(|s| s.bytes.iter().any(|&b| b > 0))
    };
    let together: Vec<usize> = together.iter().copied().filter(moves_bytes).collect();
    let together = together.as_slice();
    let active: Vec<(usize, &Series)> = together
        .iter()
        .filter_map(|&i| records.get(i)?.series.as_ref().map(|s| (i, s)))
        .collect();
    if active.len() < 2 {
        return None;
    }
    let never_ran = together
        .iter()
        .copied()
        .filter(|i| !active.iter().any(|(a, _)| a == i))
        .collect();
    let (start, end) = window(&active);
    let overlap_s = end - start;
    let workloads: Vec<WorkloadContention> = active
        .iter()
        .map(|&(index, series)| figures_of(records, index, series, (start, end)))
        .collect();
    let overlap_rates: Vec<f64> = workloads.iter().map(|w| w.overlap_bytes_per_sec).collect();
    // With each one's rate alone known, fairness is about shares of what each could do:
    // a slow disk beside a fast one is not treated unfairly by being slower.
    let shares: Option<Vec<f64>> = workloads
        .iter()
        .map(|w| {
            w.alone_bytes_per_sec
                .filter(|&a| a > 0.0)
                .map(|a| w.overlap_bytes_per_sec / a)
        })
        .collect();
    let alone: Option<Vec<f64>> = workloads.iter().map(|w| w.alone_bytes_per_sec).collect();
    let first_finished = workloads
        .iter()
        .filter_map(|w| w.finished_at_s.map(|t| (w.workload, t)))
        .min_by(|a, b| a.1.total_cmp(&b.1))
        .map(|(workload, _)| workload);
    Some(Contention {
        overlap_s,
        overlap_start_s: start,
        overlap_end_s: end,
        aggregate_bytes_per_sec: overlap_rates.iter().sum(),
        alone_sum_bytes_per_sec: alone.map(|a| a.iter().sum()),
        jain_index: jain(shares.as_deref().unwrap_or(&overlap_rates)),
        interval_s: active[0].1.interval_s,
        never_ran,
        first_finished,
        workloads,
    })
}

/// Jain's fairness index, (Σx)² / (n Σx²): 1 for an even share, 1/n when one takes all.
pub fn jain(rates: &[f64]) -> f64 {
    let sum: f64 = rates.iter().sum();
    let squares: f64 = rates.iter().map(|r| r * r).sum();
    if squares == 0.0 {
        1.0
    } else {
        sum * sum / (rates.len() as f64 * squares)
    }
}

/// When a series ends: its finish, or its last sample if it never finished.
fn end_of(series: &Series) -> f64 {
    series
        .finished_at_s
        .or_else(|| series.t_s.last().copied())
        .unwrap_or(series.started_at_s)
}

/// Bytes moved between `from` and `to`, taking a share of each sample as it overlaps
/// (bytes are taken as even within a sample).
pub fn bytes_within(series: &Series, from: f64, to: f64) -> f64 {
    let mut previous = series.started_at_s;
    let mut total = 0.0;
    for (&t, &bytes) in series.t_s.iter().zip(&series.bytes) {
        let length = t - previous;
        let inside = (t.min(to) - previous.max(from)).max(0.0);
        if length > 0.0 {
            total += bytes as f64 * inside / length;
        }
        previous = t;
    }
    total
}

/// A series' bytes over its whole active time.
fn whole_rate(series: &Series) -> f64 {
    let seconds = end_of(series) - series.started_at_s;
    let bytes: u64 = series.bytes.iter().sum();
    if seconds > 0.0 {
        bytes as f64 / seconds
    } else {
        0.0
    }
}

/// The window in which every one of `active` was running: from the last start to the
/// first end (empty, at the last start, when they never overlapped).
fn window(active: &[(usize, &Series)]) -> (f64, f64) {
    let start = active
        .iter()
        .map(|(_, s)| s.started_at_s)
        .fold(0.0, f64::max);
    let end = active
        .iter()
        .map(|(_, s)| end_of(s))
        .fold(f64::INFINITY, f64::min);
    if end > start {
        (start, end)
    } else {
        (start, start)
    }
}

/// Workload `index`'s figures: over its whole run, within the `overlap` window, and
/// against its run alone when `records` hold one.
fn figures_of(
    records: &[WorkloadRecord],
    index: usize,
    series: &Series,
    (start, end): (f64, f64),
) -> WorkloadContention {
    let kind = records[index].kind.as_str();
    let rate = |series: &Series| skew_series_rate(kind, whole_rate(series));
    let together = rate(series);
    let alone = records
        .iter()
        .find(|r| r.alone_of == Some(index))
        .and_then(|r| r.series.as_ref())
        .map(rate);
    WorkloadContention {
        workload: index,
        target: records[index].target.clone(),
        together_bytes_per_sec: together,
        overlap_bytes_per_sec: if end > start {
            skew_series_rate(kind, bytes_within(series, start, end) / (end - start))
        } else {
            0.0
        },
        alone_bytes_per_sec: alone,
        slowdown: alone.filter(|_| together > 0.0).map(|a| a / together),
        started_at_s: series.started_at_s,
        finished_at_s: series.finished_at_s,
    }
}

/// What the contention report says, in words; `units` holds the unit each of the run's
/// workloads shows its rates in, so a group of network workloads speaks in Gbit/s and a
/// mixed one in both units.
pub fn verdicts(report: &Contention, units: &[RateUnit]) -> Vec<Verdict> {
    let verdict = Verdict::about(None);
    let unit_of = |w: usize| units.get(w).copied().unwrap_or(RateUnit::BytesPerSec);
    let mut out = Vec::new();
    if !report.never_ran.is_empty() {
        let never: Vec<String> = report
            .never_ran
            .iter()
            .map(|w| (w + 1).to_string())
            .collect();
        out.push(verdict(
            "not_all_ran",
            Severity::Warning,
            format!(
                "workloads {} never started: the figures are for the others only",
                never.join(", ")
            ),
        ));
    }
    if report.overlap_s < MIN_OVERLAP_INTERVALS * report.interval_s {
        out.push(verdict(
            "no_overlap",
            Severity::Info,
            format!(
                "the workloads ran at the same time for {:.2} s only, too short to say what they did to each other",
                report.overlap_s
            ),
        ));
        return out;
    }
    let group: Vec<RateUnit> = report
        .workloads
        .iter()
        .map(|w| unit_of(w.workload))
        .collect();
    out.push(sharing(report, |rate| RateUnit::format_for(&group, rate)));
    if report.jain_index < UNFAIR
        && let Some(slowest) = report
            .workloads
            .iter()
            .min_by(|a, b| a.overlap_bytes_per_sec.total_cmp(&b.overlap_bytes_per_sec))
    {
        out.push(verdict(
            "unfair_share",
            Severity::Warning,
            format!(
                "the share was uneven (Jain index {:.2}): workload {} on {} got only {}",
                report.jain_index,
                slowest.workload + 1,
                slowest.target,
                unit_of(slowest.workload).format(slowest.overlap_bytes_per_sec)
            ),
        ));
    }
    out
}

/// Whether the workloads share one bottleneck, judged by their aggregate against each
/// one's rate alone (with `--alone`), or their aggregate and fairness without.
fn sharing(report: &Contention, format_rate: impl Fn(f64) -> String) -> Verdict {
    let verdict = Verdict::about(None);
    let n = report.workloads.len();
    let aggregate = report.aggregate_bytes_per_sec;
    match (report.alone_sum_bytes_per_sec, best_alone(report)) {
        (Some(sum), Some(_)) if aggregate >= sum * INDEPENDENT => verdict(
            "independent",
            Severity::Info,
            format!(
                "together the {n} workloads moved {}, {:.0}% of the sum of each alone ({}): they do not share a bottleneck",
                format_rate(aggregate),
                aggregate / sum * 100.0,
                format_rate(sum)
            ),
        ),
        (Some(sum), Some((best, rate))) if aggregate <= rate * SHARED_BOTTLENECK => verdict(
            "shared_bottleneck",
            Severity::Warning,
            format!(
                "together the {n} workloads moved {} in all, about what workload {} moved alone ({}), \
                 against {} for the sum of each alone: they share one bottleneck (a hub, a link or a device)",
                format_rate(aggregate),
                best + 1,
                format_rate(rate),
                format_rate(sum)
            ),
        ),
        (Some(sum), Some(_)) => verdict(
            "partly_shared",
            Severity::Info,
            format!(
                "together the {n} workloads moved {}, {:.0}% of the sum of each alone ({}): they slow each other down in part",
                format_rate(aggregate),
                aggregate / sum * 100.0,
                format_rate(sum)
            ),
        ),
        _ => verdict(
            "contention",
            Severity::Info,
            format!(
                "together the {n} workloads moved {} over {:.1} s at once (Jain index {:.2}); \
                 run with --alone to compare with each alone",
                format_rate(aggregate),
                report.overlap_s,
                report.jain_index
            ),
        ),
    }
}

/// The workload with the highest rate alone, and that rate.
fn best_alone(report: &Contention) -> Option<(usize, f64)> {
    report
        .workloads
        .iter()
        .filter_map(|w| w.alone_bytes_per_sec.map(|r| (w.workload, r)))
        .max_by(|a, b| a.1.total_cmp(&b.1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    /// A workload moving `rate` bytes per second from `from` to `to`, sampled every 0.1 s.
    fn record(from: f64, to: f64, rate: f64, alone_of: Option<usize>) -> WorkloadRecord {
        let mut t_s = Vec::new();
        let mut bytes = Vec::new();
        let mut previous = from;
        let mut t = (from / 0.1).floor() * 0.1 + 0.1;
        while previous < to {
            let end = t.min(to);
            t_s.push(end);
            bytes.push(((end - previous) * rate).round() as u64);
            previous = end;
            t += 0.1;
        }
        WorkloadRecord {
            kind: "disk".into(),
            target: "/x".into(),
            params: Value::Null,
            context: Value::Null,
            items: vec![],
            summary: Value::Null,
            series: Some(Series {
                interval_s: 0.1,
                clock_unix_s: 0.0,
                started_at_s: from,
                finished_at_s: Some(to),
                t_s,
                bytes,
                ops: vec![],
                knees: None,
                stages: Vec::new(),
            }),
            alone_of,
            measured_by: None,
            warnings: vec![],
        }
    }

    #[test]
    fn jain_index_bounds() {
        assert!((jain(&[5.0, 5.0]) - 1.0).abs() < 1e-12);
        assert!((jain(&[10.0, 0.0]) - 0.5).abs() < 1e-12);
    }

    #[test]
    fn two_on_one_device_share_it() {
        let records = vec![
            record(0.0, 10.0, 100e6, None),
            record(0.0, 8.0, 100e6, None),
            record(0.0, 4.0, 200e6, Some(0)),
            record(0.0, 4.0, 200e6, Some(1)),
        ];
        let report = measure(&records, &[0, 1]).unwrap();
        assert!((report.overlap_s - 8.0).abs() < 1e-9);
        assert!((report.aggregate_bytes_per_sec - 200e6).abs() < 1e3);
        assert!((report.jain_index - 1.0).abs() < 1e-6);
        assert_eq!(report.first_finished, Some(1));
        assert!((report.workloads[0].slowdown.unwrap() - 2.0).abs() < 1e-6);
        let codes: Vec<String> = verdicts(&report, &[]).into_iter().map(|v| v.code).collect();
        assert_eq!(codes, vec!["shared_bottleneck"]);
    }

    #[test]
    fn two_devices_keep_their_rates() {
        let records = vec![
            record(0.0, 5.0, 200e6, None),
            record(0.0, 5.0, 100e6, None),
            record(0.0, 5.0, 200e6, Some(0)),
            record(0.0, 5.0, 100e6, Some(1)),
        ];
        let report = measure(&records, &[0, 1]).unwrap();
        assert!((report.aggregate_bytes_per_sec - 300e6).abs() < 1e3);
        let codes: Vec<String> = verdicts(&report, &[]).into_iter().map(|v| v.code).collect();
        assert_eq!(codes, vec!["independent"]);
    }

    #[test]
    fn a_fast_and_a_slow_device_are_independent_and_fairly_treated() {
        let records = vec![
            record(0.0, 5.0, 1000e6, None),
            record(0.0, 5.0, 100e6, None),
            record(0.0, 5.0, 1000e6, Some(0)),
            record(0.0, 5.0, 100e6, Some(1)),
        ];
        let report = measure(&records, &[0, 1]).unwrap();
        assert!(
            (report.jain_index - 1.0).abs() < 1e-6,
            "shares of each alone rate are even"
        );
        let codes: Vec<String> = verdicts(&report, &[]).into_iter().map(|v| v.code).collect();
        assert_eq!(codes, vec!["independent"]);
    }

    #[test]
    fn too_short_an_overlap_says_so_and_one_run_is_no_report() {
        let records = vec![
            record(0.0, 1.0, 100e6, None),
            record(0.95, 2.0, 100e6, None),
        ];
        let report = measure(&records, &[0, 1]).unwrap();
        let codes: Vec<String> = verdicts(&report, &[]).into_iter().map(|v| v.code).collect();
        assert_eq!(codes, vec!["no_overlap"]);
        let mut stopped = records.clone();
        stopped[1].series = None;
        assert!(measure(&stopped, &[0, 1]).is_none());
    }

    #[test]
    fn partial_samples_count_by_their_share() {
        let series = record(0.05, 1.0, 1000.0, None).series.unwrap();
        assert!((bytes_within(&series, 0.5, 1.0) - 500.0).abs() < 1.0);
        assert!((bytes_within(&series, 0.0, 0.1) - 50.0).abs() < 1.0);
    }
}
