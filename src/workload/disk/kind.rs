//! How ratelab summarises, judges and shows stored disk workloads, from their records
//! alone: what `results show` and every report of an old run rely on.

use serde_json::Value;

use super::ReadMode;
use super::item::items_of;
use super::present;
use crate::analysis;
use crate::document::{Knee, Series, Verdict, WorkloadRecord};
use crate::workload::Kind;

/// How ratelab summarises, judges and shows stored disk workloads.
pub struct DiskKind;

impl Kind for DiskKind {
    fn name(&self) -> &'static str {
        "disk"
    }

    fn summarize(&self, record: &WorkloadRecord) -> Value {
        analysis::disk::summarize(&items_of(record), &read_modes_of(record))
    }

    fn verdicts(&self, workload: usize, record: &WorkloadRecord) -> Vec<Verdict> {
        analysis::disk::verdicts(workload, record, &items_of(record))
    }

    fn tables(&self, record: &WorkloadRecord) -> Vec<crate::vocab::Table> {
        present::tables(record, &items_of(record))
    }

    fn knees(&self, params: &Value, series: &Series) -> Option<Vec<Knee>> {
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
