//! How ratelab summarises, judges and shows stored image workloads: every container's
//! rates against the host folder's, what else it cost (host writes, space, the qcow2
//! daemon's CPU), the task inside, and for a sweep of qcow2 cluster sizes, the fastest.

use super::kind::ImageKind;
use super::stored::PlaceOp;
use super::stored::{ImageSummary, OpRatio, PlaceSummary};
use crate::document::{Severity, Verdict};
use crate::vocab::Exposure;
use crate::vocab::chart::{Chart, Line, size_axis, size_x};
use crate::vocab::units::{format_bytes, format_rate, format_size};
use crate::vocab::{SummaryLine, Table};
use crate::workload::{DecodeError, Decoded, Stored, View};

impl View for Stored<'_, ImageKind> {
    fn exposure(&self) -> Exposure {
        Exposure::STORAGE
    }

    fn verdicts(&self, _run: &Decoded) -> Result<Vec<Verdict>, DecodeError> {
        let Some(summary) = &self.summary else {
            return Ok(Vec::new());
        };
        let say = Verdict::about(Some(self.index()));
        let mut out = Vec::new();
        for (place, figures) in self.params.places.iter().zip(&summary.places).skip(1) {
            if figures.loop_direct_io == Some(false) {
                out.push(say(
                    "loop_buffered",
                    Severity::Warning,
                    format!(
                        "the loop device of {} could not read its image with direct I/O: the host's page cache of the image sits between the container and the disk",
                        place.label
                    ),
                ));
            }
            let parts: Vec<String> = figures
                .ops
                .iter()
                .filter_map(|op| Some(format!("{} {}", op.op, ratio_words(op)?)))
                .collect();
            if !parts.is_empty() {
                out.push(say(
                    "container_cost",
                    Severity::Info,
                    format!(
                        "{} against the host folder, files paired by size and round: {}",
                        place.label,
                        parts.join(", ")
                    ),
                ));
            }
            if let Some(ratio) = figures.task_ratio {
                out.push(say(
                    "task_in_container",
                    Severity::Info,
                    format!(
                        "the task in {} ran at {:.0}% of its rate in the host folder",
                        place.label,
                        ratio * 100.0
                    ),
                ));
            }
            if let Some(amplification) = figures.write_amplification.filter(|&a| a > 1.5) {
                out.push(say(
                    "write_amplification",
                    Severity::Info,
                    format!(
                        "{}: the host device wrote {amplification:.2} bytes for each byte written inside (image metadata, the inner journal, and any other writer of that device)",
                        place.label
                    ),
                ));
            }
        }
        out.extend(
            sweep_verdict(self, summary)
                .map(|message| say("cluster_size_fastest", Severity::Info, message)),
        );
        Ok(out)
    }

    fn tables(&self) -> Vec<Table> {
        let Some(summary) = &self.summary else {
            return Vec::new();
        };
        let ops = op_columns(summary);
        let mut header = vec!["place".to_string()];
        header.extend(ops.iter().map(PlaceOp::to_string));
        let rows = summary
            .places
            .iter()
            .enumerate()
            .map(|(index, place)| {
                let mut row = vec![place.label.clone()];
                for op in &ops {
                    let found = place.ops.iter().find(|o| &o.op == op);
                    row.push(match (index, found) {
                        (0, Some(o)) => o.median_bytes_per_sec.map_or("-".into(), format_rate),
                        (_, Some(o)) => cell(o),
                        (_, None) => "-".into(),
                    });
                }
                row
            })
            .collect();
        let rates = Table {
            title: format!(
                "containers beside the host folder {} · {} rounds · host folder: median rate of its files of 64 MiB and more (else its largest); containers: median ratio to the host's file of the same size and round [95% interval]",
                self.record.target,
                rounds(self)
            ),
            numeric: (1..header.len()).collect(),
            header,
            rows,
        };
        let costs = Table {
            title: "what each place cost besides its rates (medians over rounds)".into(),
            header: [
                "place",
                "host writes per byte",
                "image / held",
                "daemon CPU",
                "task",
            ]
            .map(String::from)
            .to_vec(),
            numeric: vec![1, 2, 3, 4],
            rows: summary
                .places
                .iter()
                .enumerate()
                .map(|(index, place)| {
                    vec![
                        place.label.clone(),
                        place
                            .write_amplification
                            .map_or("-".into(), |a| format!("{a:.2}")),
                        match (place.image_allocated_bytes, place.inner_used_bytes) {
                            (Some(image), Some(held)) => format!(
                                "{} / {}",
                                format_bytes(image as u64),
                                format_bytes(held as u64)
                            ),
                            _ => "-".into(),
                        },
                        place
                            .daemon_seconds_per_gib
                            .map_or("-".into(), |s| format!("{s:.2} s/GiB")),
                        match (index, place.task_ratio) {
                            (0, Some(_)) => "1.00x".into(),
                            (_, Some(r)) => format!("{r:.2}x"),
                            _ => "-".into(),
                        },
                    ]
                })
                .collect(),
        };
        vec![rates, costs]
    }

    fn brief_tables(&self) -> Vec<Table> {
        // At a glance: the ratios alone (the intervals are in the full table).
        let mut tables = self.tables();
        if let (Some(rates), Some(summary)) = (tables.first_mut(), &self.summary) {
            for (row, place) in rates.rows.iter_mut().zip(&summary.places).skip(1) {
                for (cell, op) in row.iter_mut().skip(1).zip(op_columns(summary)) {
                    let ratio = place.ops.iter().find(|o| o.op == op).and_then(|o| o.ratio);
                    *cell = ratio.map_or("-".into(), |r| format!("{r:.2}x"));
                }
            }
            rates.title = format!(
                "containers beside the host folder · {} rounds · host folder: median rate of its largest files; containers: median ratio to the host's file of the same size and round",
                rounds(self)
            );
        }
        tables
    }

    fn summary_lines(
        &self,
        _run: &Decoded,
    ) -> Result<Vec<SummaryLine>, crate::workload::DecodeError> {
        let Some(summary) = &self.summary else {
            return Ok(Vec::new());
        };
        let parts: Vec<String> = summary
            .places
            .iter()
            .skip(1)
            .filter_map(|place| {
                let op = |is: fn(PlaceOp) -> bool| place.ops.iter().find(|o| is(o.op))?.ratio;
                let mut words = Vec::new();
                if let Some(r) = op(|o| o == PlaceOp::Write) {
                    words.push(format!("write {r:.2}x"));
                }
                if let Some(r) = op(|o| matches!(o, PlaceOp::Read(_))) {
                    words.push(format!("read {r:.2}x"));
                }
                if let Some(r) = place.task_ratio {
                    words.push(format!("task {r:.2}x"));
                }
                (!words.is_empty()).then(|| format!("{} {}", place.label, words.join(" ")))
            })
            .collect();
        if parts.is_empty() {
            return Ok(Vec::new());
        }
        let mut lines = vec![
            SummaryLine::new(
                "images",
                format!("against the host folder: {}", parts.join("; ")),
            )
            .covering(&["container_cost", "task_in_container"]),
        ];
        if let Some(message) = sweep_verdict(self, summary) {
            lines.push(SummaryLine::new("sweep", message).covering(&["cluster_size_fastest"]));
        }
        Ok(lines)
    }

    fn charts(&self) -> Vec<Chart> {
        let Some(summary) = &self.summary else {
            return Vec::new();
        };
        let sweep = sweep(self, summary);
        if sweep.len() < 2 {
            return Vec::new();
        }
        let (first, last) = (size_x(sweep[0].0), size_x(sweep[sweep.len() - 1].0));
        let host = &summary.places[0];
        let lines = op_columns(summary)
            .into_iter()
            .map(|op| {
                let points = sweep
                    .iter()
                    .filter_map(|(cluster, place)| {
                        let rate = place
                            .ops
                            .iter()
                            .find(|o| o.op == op)?
                            .median_bytes_per_sec?;
                        Some((size_x(*cluster), rate))
                    })
                    .collect();
                let level = host
                    .ops
                    .iter()
                    .find(|o| o.op == op)
                    .and_then(|o| o.median_bytes_per_sec);
                Line {
                    name: op.to_string(),
                    points,
                    curve: level.map(|rate| {
                        (
                            format!("{op}, host folder"),
                            vec![(first, rate), (last, rate)],
                        )
                    }),
                    ..Line::default()
                }
            })
            .collect();
        vec![Chart {
            title:
                "qcow2: rate by cluster size (files of 64 MiB and more, else the largest; dashed: the host folder)"
                    .into(),
            x_label: "cluster size".into(),
            y_label: "rate".into(),
            x_log: false,
            y_log: false,
            x_format: size_axis,
            y_format: format_rate,
            lines,
            spans: Vec::new(),
            categories: Vec::new(),
        }]
    }
}

/// A ratio with its interval: `0.62x [0.55-0.70]`.
fn cell(op: &OpRatio) -> String {
    match (op.ratio, op.ratio_low, op.ratio_high) {
        (Some(r), Some(low), Some(high)) => format!("{r:.2}x [{low:.2}-{high:.2}]"),
        (Some(r), _, _) => format!("{r:.2}x"),
        _ => "-".into(),
    }
}

/// The rounds its places ran.
fn rounds(w: &Stored<ImageKind>) -> u32 {
    w.items.iter().map(|item| item.round).max().unwrap_or(0)
}

/// The operations of every place, in the order first met.
fn op_columns(summary: &ImageSummary) -> Vec<PlaceOp> {
    let mut ops: Vec<PlaceOp> = Vec::new();
    for op in summary.places.iter().flat_map(|p| &p.ops) {
        if !ops.contains(&op.op) {
            ops.push(op.op);
        }
    }
    ops
}

/// The fastest cluster size of a sweep by the geometric mean of its ratios, and how much
/// slower the smallest and largest sizes ran.
fn sweep_verdict(w: &Stored<ImageKind>, summary: &ImageSummary) -> Option<String> {
    let sweep = sweep(w, summary);
    if sweep.len() < 2 {
        return None;
    }
    let score = |place: &PlaceSummary| -> Option<f64> {
        let ratios: Vec<f64> = place
            .ops
            .iter()
            .filter_map(|o| o.ratio)
            .filter(|r| *r > 0.0)
            .collect();
        (!ratios.is_empty())
            .then(|| (ratios.iter().map(|r| r.ln()).sum::<f64>() / ratios.len() as f64).exp())
    };
    let scored: Vec<(u64, f64)> = sweep
        .iter()
        .filter_map(|(cluster, place)| Some((*cluster, score(place)?)))
        .collect();
    let &(best, best_score) = scored.iter().max_by(|a, b| a.1.total_cmp(&b.1))?;
    let extremes: Vec<String> = [scored.first()?, scored.last()?]
        .iter()
        .filter(|(cluster, _)| *cluster != best)
        .map(|(cluster, s)| {
            format!(
                "{} {:.0}% slower",
                format_size(*cluster),
                (1.0 - s / best_score) * 100.0
            )
        })
        .collect();
    let mut message = format!(
        "qcow2 clusters of {} ran fastest of {} ({best_score:.2}x the host folder: the geometric mean of its operations' ratios)",
        format_size(best),
        scored
            .iter()
            .map(|(c, _)| format_size(*c))
            .collect::<Vec<_>>()
            .join(", "),
    );
    if !extremes.is_empty() {
        message.push_str(&format!("; {} than it", extremes.join(", ")));
    }
    // The runner-up, when every operation's interval overlaps the fastest's: no size
    // is shown faster than it.
    let fastest = sweep.iter().find(|(c, _)| *c == best)?.1;
    let close: Vec<String> = sweep
        .iter()
        .filter(|(cluster, place)| *cluster != best && overlapping(fastest, place))
        .map(|(cluster, _)| format_size(*cluster))
        .collect();
    if !close.is_empty() {
        message.push_str(&format!(
            "; within noise of {} (every operation's 95% intervals overlap)",
            close.join(" and ")
        ));
    }
    Some(message)
}

/// The qcow2 places that differ only by cluster size, by cluster size: a sweep.
fn sweep<'a>(w: &Stored<ImageKind>, summary: &'a ImageSummary) -> Vec<(u64, &'a PlaceSummary)> {
    let mut out: Vec<(u64, &PlaceSummary)> = w
        .params
        .places
        .iter()
        .zip(&summary.places)
        .filter_map(|(place, figures)| {
            let spec = place.container.as_ref()?;
            Some((spec.cluster_bytes()?, figures))
        })
        .collect();
    out.sort_by_key(|(cluster, _)| *cluster);
    out.dedup_by_key(|(cluster, _)| *cluster);
    out
}

/// A ratio in words, with whether it is beyond noise: `0.62x the host's (95% 0.55-0.70)`.
fn ratio_words(op: &OpRatio) -> Option<String> {
    let ratio = op.ratio?;
    Some(match (op.ratio_low, op.ratio_high) {
        (Some(low), Some(high)) if low > 1.0 || high < 1.0 => {
            format!("{ratio:.2}x (95% {low:.2}-{high:.2})")
        }
        (Some(low), Some(high)) => format!("{ratio:.2}x (95% {low:.2}-{high:.2}, within noise)"),
        _ => format!("{ratio:.2}x (too few files for an interval)"),
    })
}

/// Whether every operation both places ran has overlapping 95% intervals.
fn overlapping(a: &PlaceSummary, b: &PlaceSummary) -> bool {
    let interval = |o: &OpRatio| o.ratio_low.zip(o.ratio_high);
    a.ops.iter().all(|x| {
        let Some(y) = b.ops.iter().find(|y| y.op == x.op) else {
            return true;
        };
        match (interval(x), interval(y)) {
            (Some((x_low, x_high)), Some((y_low, y_high))) => x_low <= y_high && y_low <= x_high,
            // Without intervals nothing can be told apart.
            _ => true,
        }
    })
}

#[cfg(test)]
mod tests {

    use super::*;

    fn place(low: f64, high: f64) -> PlaceSummary {
        PlaceSummary {
            label: "qcow2".into(),
            ops: vec![OpRatio {
                op: PlaceOp::Write,
                median_bytes_per_sec: None,
                ratio: Some((low + high) / 2.0),
                ratio_low: Some(low),
                ratio_high: Some(high),
                pairs: 18,
                p_value: None,
            }],
            write_amplification: None,
            image_allocated_bytes: None,
            inner_used_bytes: None,
            daemon_seconds_per_gib: None,
            task_ratio: None,
            loop_direct_io: None,
        }
    }

    #[test]
    fn sizes_are_told_apart_only_when_their_intervals_do_not_overlap() {
        assert!(overlapping(&place(0.24, 0.35), &place(0.29, 0.51)));
        assert!(!overlapping(&place(0.20, 0.25), &place(0.29, 0.51)));
    }
}
