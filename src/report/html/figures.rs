//! The chart every report of workloads that ran at once shares: their rate series on
//! one clock. Each kind's own charts come from its [`crate::workload::Kind::charts`].

use crate::document::WorkloadRecord;
use crate::vocab::RateUnit;
use crate::vocab::chart::{Chart, Line, Span, plain_axis};
use crate::vocab::units::{format_bits_rate, format_rate};
use crate::workload;

/// An axis of rates for storage and network at once: each mark in both units.
fn both_units(rate: f64) -> String {
    RateUnit::format_for(&[RateUnit::BytesPerSec, RateUnit::BytesPerSecInBits], rate)
}

/// The rate series of workloads that started together, on their common clock, in
/// their unit (Gbit/s for the network), or in both when storage and network mix.
pub fn series(records: &[(usize, &WorkloadRecord)]) -> Option<Chart> {
    let units: Vec<RateUnit> = records
        .iter()
        .map(|(_, record)| workload::rate_unit(record))
        .collect();
    let y_format: fn(f64) -> String = match units.first() {
        Some(&first) if units.iter().any(|&u| u != first) => both_units,
        Some(RateUnit::BytesPerSecInBits) => format_bits_rate,
        _ => format_rate,
    };
    let mut lines = Vec::new();
    let mut spans = Vec::new();
    for (index, record) in records {
        let Some(series) = record.series.as_ref() else {
            continue;
        };
        let rates = series.bytes_per_sec();
        let mut points: Vec<(f64, f64)> = series.t_s.iter().copied().zip(rates).collect();
        // Samples after the last byte moved are the workload's end (its streams shut,
        // its files closed), not a rate that fell to nothing.
        while points.len() > 1 && points.last().is_some_and(|p| p.1 == 0.0) {
            points.pop();
        }
        if !points.iter().any(|p| p.1 > 0.0) {
            continue;
        }
        // One stage alone is the whole workload: nothing to tell apart.
        let stages = series.stage_spans();
        if stages.len() > 1 {
            spans.extend(stages.into_iter().map(|(label, from, to)| Span {
                label: label.to_string(),
                from,
                to,
                line: lines.len(),
            }));
        }
        lines.push(Line {
            name: format!("{} {}: {}", record.kind, index + 1, record.target),
            points,
            ..Line::default()
        });
    }
    Some(Chart {
        title: if lines.len() > 1 {
            "rate over time, on one clock".into()
        } else {
            "rate over time".into()
        },
        x_label: "seconds from the common start".into(),
        y_label: "rate".into(),
        x_log: false,
        y_log: false,
        x_format: plain_axis,
        y_format,
        lines,
        spans,
        categories: Vec::new(),
    })
    .filter(|c| !c.lines.is_empty())
}
