//! What each kind's items are compared by: the key of an item's group (a disk's op and
//! size, a cpu test's threads and class, a task's step, a net direction) and its rate,
//! or no rate for an item too short to time well.

use std::collections::BTreeMap;

use super::{GroupKey, RateUnit};
use crate::document::{Flag, WorkloadRecord};
use crate::workload::cpu::cpu_items;
use crate::workload::disk::item::{self as disk_item, DiskItem, Op};
use crate::workload::net::{Scope, net_items};
use crate::workload::task;

/// The unit a kind's groups are compared in; `None` for kinds not compared.
pub(super) fn unit_of(kind: &str) -> Option<RateUnit> {
    match kind {
        "disk" | "readdir" | "task" => Some(RateUnit::BytesPerSec),
        "net" => Some(RateUnit::BytesPerSecInBits),
        "cpu" => Some(RateUnit::LoopsPerSec),
        _ => None,
    }
}

/// Every item of a workload as its group's key and its rate; no rate for an item too
/// short to time well.
pub(super) fn samples(record: &WorkloadRecord) -> Vec<(GroupKey, Option<f64>)> {
    match record.kind.as_str() {
        "disk" => disk_item::items_of(record)
            .into_iter()
            .map(|item| {
                // One run may read each file in several modes: each is its own group.
                let op = match item.op {
                    Op::Write => "write".to_string(),
                    Op::Read => format!("read {}", item.mode),
                };
                let key = GroupKey {
                    size_bytes: Some(item.size_bytes),
                    ..GroupKey::op(op)
                };
                (key, timed_well(&item))
            })
            .collect(),
        "readdir" => readdir_samples(record),
        "cpu" => cpu_items(&record.items)
            .into_iter()
            .filter_map(|item| {
                let key = GroupKey {
                    threads: Some(item.threads),
                    class: Some(item.class),
                    ..GroupKey::op(item.op)
                };
                Some((key, Some(item.loops_per_sec?)))
            })
            .collect(),
        "task" => task::items_of(record)
            .into_iter()
            .map(|item| {
                let key = GroupKey {
                    threads: Some(item.threads),
                    ..GroupKey::op(item.op)
                };
                (key, Some(item.source_bytes_per_sec))
            })
            .collect(),
        "net" => net_samples(record),
        _ => Vec::new(),
    }
}

/// Readdir files by the size bands the run's summary holds (`summary.by_band`).
fn readdir_samples(record: &WorkloadRecord) -> Vec<(GroupKey, Option<f64>)> {
    let bands: Vec<(u64, Option<u64>)> = record.summary["by_band"]
        .as_array()
        .map(|bands| {
            bands
                .iter()
                .filter_map(|b| Some((b["from_bytes"].as_u64()?, b["to_bytes"].as_u64())))
                .collect()
        })
        .unwrap_or_default();
    disk_item::items_of(record)
        .into_iter()
        .filter_map(|item| {
            let &(from, to) = bands.iter().find(|(from, to)| {
                item.size_bytes >= *from && to.is_none_or(|to| item.size_bytes < to)
            })?;
            let key = GroupKey {
                size_bytes: Some(from),
                size_to_bytes: to,
                banded: true,
                ..GroupKey::op("read")
            };
            Some((key, timed_well(&item)))
        })
        .collect()
}

/// A disk item's rate, unless it is flagged too short to time well.
fn timed_well(item: &DiskItem) -> Option<f64> {
    (!item.flags.contains(&Flag::Small)).then_some(item.bytes_per_sec)
}

/// A net workload's receive rate in each interval, all streams of a direction together.
fn net_samples(record: &WorkloadRecord) -> Vec<(GroupKey, Option<f64>)> {
    let mut by_interval: BTreeMap<(String, u64), f64> = BTreeMap::new();
    for item in net_items(&record.items) {
        if item.scope != Scope::Interval || item.op != "receive" {
            continue;
        }
        let direction = item.direction.unwrap_or_else(|| "?".into());
        *by_interval
            .entry((direction, item.interval.unwrap_or(0)))
            .or_default() += item.bytes_per_sec;
    }
    by_interval
        .into_iter()
        .map(|((direction, _), rate)| (GroupKey::op(format!("receive {direction}")), Some(rate)))
        .collect()
}
