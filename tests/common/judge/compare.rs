//! `ratelab why`'s `process` items set against the kernel's record, name by name
//! (issue 49's tolerances): for each name with 0.5 s or more on a CPU in the record,
//! why's CPU seconds within 10% of the kernel's, its seconds waiting for a CPU within
//! 25% or 50 ms (above, at most what threads that lived less than a sample add; below,
//! at most what ended threads waited in their last sample, after why's last read), and
//! its seconds off the CPUs in each kind of wait within 15% of the wall time. A wait stored without its `kind` (runs before it was kept) leaves that
//! name's kinds unjudged, and says so.

use std::collections::BTreeMap;

use serde_json::Value;

use super::{Figures, KINDS, Record, kind_index};

/// Names with less CPU than this in the kernel's record are not judged.
pub const CPU_AT_LEAST_S: f64 = 0.5;
/// How far why's CPU seconds may stray from the kernel's, as a share of them.
pub const CPU_WITHIN: f64 = 0.10;
/// How far its seconds waiting for a CPU may stray: a share of the kernel's, or seconds.
pub const CPU_WAIT_WITHIN: f64 = 0.25;
pub const CPU_WAIT_WITHIN_S: f64 = 0.05;
/// How far its off-CPU seconds of one kind may stray, as a share of the wall time.
pub const OFF_WITHIN_WALL: f64 = 0.15;

/// why's figures for one name, with whether every wait named its kind.
#[derive(Debug, Clone, Default)]
struct WhyFigures {
    figures: Figures,
    kinds_known: bool,
}

/// why's `process` items summed per name.
fn why_by_name(doc: &Value) -> BTreeMap<String, WhyFigures> {
    let mut groups: BTreeMap<String, WhyFigures> = BTreeMap::new();
    let items = doc["workloads"][0]["items"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    for item in items.iter().filter(|i| i["op"] == "process") {
        let name = item["name"].as_str().unwrap_or_default().to_string();
        let group = groups.entry(name).or_insert_with(|| WhyFigures {
            kinds_known: true,
            ..WhyFigures::default()
        });
        group.figures.processes += 1;
        group.figures.cpu_s += item["cpu_s"].as_f64().unwrap_or(0.0);
        group.figures.cpu_wait_s += item["cpu_wait_s"].as_f64().unwrap_or(0.0);
        for wait in item["waits"].as_array().into_iter().flatten() {
            let seconds = wait["seconds"].as_f64().unwrap_or(0.0);
            match wait["kind"].as_str() {
                Some(kind) => group.figures.off_s[kind_index(kind)] += seconds,
                None => group.kinds_known = false,
            }
        }
    }
    groups
}

/// Where why's account of `doc` and the kernel's `record` disagree beyond the
/// tolerances, in words; empty when they agree.
pub fn compare(doc: &Value, record: &Record) -> Vec<String> {
    let why = why_by_name(doc);
    let wall = record.wall_s;
    let mut mismatches = Vec::new();
    if let Some(lost) = &record.lost {
        mismatches.push(format!("the kernel's record is incomplete: {lost}"));
    }
    for (name, kernel) in record.group_by_name() {
        if kernel.cpu_s < CPU_AT_LEAST_S {
            continue;
        }
        let Some(seen) = why.get(&name) else {
            mismatches.push(format!(
                "{name}: no process of that name in why's account, {:.2} s on a CPU in \
                 the kernel's record",
                kernel.cpu_s
            ));
            continue;
        };
        let w = &seen.figures;
        if (w.cpu_s - kernel.cpu_s).abs() > CPU_WITHIN * kernel.cpu_s {
            mismatches.push(format!(
                "{name}: {:.3} s on a CPU by why against {:.3} s in the kernel's record \
                 ({:+.1}%, beyond {:.0}%)",
                w.cpu_s,
                kernel.cpu_s,
                (w.cpu_s / kernel.cpu_s - 1.0) * 100.0,
                CPU_WITHIN * 100.0
            ));
        }
        // Threads that lived less than a sample's interval may have been seen, or not;
        // what ended threads waited after why last read them, it cannot have.
        let allowed = (CPU_WAIT_WITHIN * kernel.cpu_wait_s).max(CPU_WAIT_WITHIN_S);
        let (low, high) = (
            kernel.cpu_wait_s - kernel.cpu_wait_tail_s - allowed,
            kernel.cpu_wait_s + kernel.cpu_wait_unseen_s + allowed,
        );
        if w.cpu_wait_s < low || w.cpu_wait_s > high {
            mismatches.push(format!(
                "{name}: {:.3} s waiting for a CPU by why against {:.3} s in the kernel's \
                 record, {:.3} s more in threads shorter than a sample, {:.3} s of it in \
                 ended threads' last sample (beyond {:.0}% or {:.0} ms)",
                w.cpu_wait_s,
                kernel.cpu_wait_s,
                kernel.cpu_wait_unseen_s,
                kernel.cpu_wait_tail_s,
                CPU_WAIT_WITHIN * 100.0,
                CPU_WAIT_WITHIN_S * 1000.0
            ));
        }
        if !seen.kinds_known {
            continue;
        }
        for kind in KINDS {
            let (a, b) = (w.off(kind), kernel.off(kind));
            if (a - b).abs() > OFF_WITHIN_WALL * wall {
                mismatches.push(format!(
                    "{name}: {a:.3} s off the CPUs in {kind} waits by why against {b:.3} s \
                     in the kernel's record, {:.3} s apart, beyond {:.0}% of the {wall:.2} s \
                     wall",
                    (a - b).abs(),
                    OFF_WITHIN_WALL * 100.0
                ));
            }
        }
    }
    mismatches
}

/// One line per name judged (why / the kernel): processes, CPU, wait for a CPU, and
/// the kinds of off-CPU wait either side has 50 ms or more of (`?` where why's waits
/// carry no kind).
pub fn rows(doc: &Value, record: &Record) -> Vec<String> {
    let why = why_by_name(doc);
    record
        .group_by_name()
        .into_iter()
        .filter(|(_, k)| k.cpu_s >= CPU_AT_LEAST_S)
        .map(|(name, kernel)| {
            let seen = why.get(&name).cloned().unwrap_or_default();
            let w = &seen.figures;
            let kinds: Vec<String> = KINDS
                .iter()
                .filter(|k| w.off(k) >= 0.05 || kernel.off(k) >= 0.05)
                .map(|k| {
                    let ours = if seen.kinds_known {
                        format!("{:.2}", w.off(k))
                    } else {
                        "?".to_string()
                    };
                    format!("{k} {ours}/{:.2}", kernel.off(k))
                })
                .collect();
            format!(
                "{name} x{}/{}: cpu {:.2}/{:.2} s, cpu_wait {:.2}/{:.2}+{:.2} s ({:.2} at \
                 ends), off {} (why/kernel; + in threads shorter than a sample; at ends: in \
                 ended threads' last sample)",
                w.processes,
                kernel.processes,
                w.cpu_s,
                kernel.cpu_s,
                w.cpu_wait_s,
                kernel.cpu_wait_s,
                kernel.cpu_wait_unseen_s,
                kernel.cpu_wait_tail_s,
                if kinds.is_empty() {
                    "-".to_string()
                } else {
                    kinds.join(", ")
                }
            )
        })
        .collect()
}
