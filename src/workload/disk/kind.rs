//! How ratelab summarises, judges and shows stored disk workloads, from their records
//! alone: what `results show` and every report of an old run rely on.

use crate::workload::Stored;
use serde_json::Value;

use super::ReadMode;
use super::item::{Op, items_of};
use super::present;
use crate::analysis;
use crate::document::{Knee, Verdict, WorkloadRecord};
use crate::vocab::{Chart, GroupKey, RateUnit, Samples, Table};

/// How ratelab summarises, judges and shows stored disk workloads.
pub struct DiskKind;

impl crate::workload::Kind for DiskKind {
    const NAME: &'static str = "disk";
    type Params = Value;
    type Context = Value;
    type Item = Value;
    type Summary = Value;

    fn summarize(&self, w: &Stored<Self>) -> Value {
        let record = w.record;
        analysis::disk::summarize(&items_of(record), &read_modes_of(record))
    }

    fn verdicts(&self, w: &Stored<Self>) -> Vec<Verdict> {
        let (workload, record) = (w.index(), w.record);
        analysis::disk::verdicts(workload, record, &items_of(record))
    }

    fn tables(&self, w: &Stored<Self>) -> Vec<Table> {
        let record = w.record;
        present::tables(record, &items_of(record))
    }

    fn charts(&self, w: &Stored<Self>) -> Vec<Chart> {
        super::charts::by_size_chart(w.record).into_iter().collect()
    }

    fn samples(&self, w: &Stored<Self>) -> Option<Samples> {
        let items = items_of(w.record)
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
                (key, item.timed_rate())
            })
            .collect();
        Some(Samples {
            unit: RateUnit::BytesPerSec,
            items,
        })
    }

    fn knees(&self, w: &Stored<Self>) -> Option<Vec<Knee>> {
        let (params, series) = (&w.record.params, w.record.series.as_ref()?);
        // Only a sustained run moves data without pause; a series of files pauses
        // between them, and those pauses are not changes of level.
        params
            .get("duration_s")
            .and_then(Value::as_f64)
            .map(|_| analysis::knees::detect(series))
    }
}

/// The read modes a stored plan asked for, in order.
pub fn read_modes_of(record: &WorkloadRecord) -> Vec<ReadMode> {
    record
        .params
        .get("read_modes")
        .and_then(|v| serde_json::from_value(v.clone()).ok())
        .unwrap_or_default()
}
