//! Stored runs side by side: workloads matched across runs, their items grouped by
//! what they measured (a disk's writes of one size, a cpu test at one thread count),
//! and each later run's median set against the first run's with a Mann-Whitney U
//! test, so a change is called only when it stands out of the items' own spread.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;
use serde::ser::{SerializeMap, Serializer};

mod samples;

use self::samples::{samples, unit_of};
use super::mann_whitney::{self, Method};
use super::stats::Stats;
use crate::document::{RunDocument, WorkloadRecord};
pub use crate::vocab::{GroupKey, RateUnit};

/// A change is beyond noise only below this two-sided p-value.
pub const ALPHA: f64 = 0.05;
/// ...and only when the median moved by at least this fraction: a tiny change that is
/// significant (many steady items) is not worth a flag.
pub const MIN_CHANGE_FRACTION: f64 = 0.05;
/// With fewer items than this on either side no verdict is given.
pub const MIN_ITEMS: usize = 3;

/// The runs being compared, as the report names them.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunRef {
    /// Run id.
    pub run_id: i64,
    /// The verb that made it.
    pub verb: String,
    /// Start time, RFC 3339.
    pub started_at: String,
    /// The user's label.
    pub label: Option<String>,
    /// The machine's host name.
    pub hostname: String,
    /// `complete` or `incomplete`.
    pub status: String,
}

/// One run's items of a group.
#[derive(Debug, Clone, PartialEq)]
pub struct RunSample {
    /// Run id.
    pub run_id: i64,
    /// Index of the run's workload in the group, `None` when the run has no such workload.
    pub workload: Option<usize>,
    /// Rates of the items, in the group's unit.
    pub rates: Vec<f64>,
    /// Items left out as too short to time well (flag `small`): their figures are
    /// timer noise, which a test would take for a change.
    pub too_short: usize,
    /// Their median; `None` when there are none.
    pub median: Option<f64>,
    /// The group's unit, which names the median in JSON.
    pub unit: RateUnit,
}

impl Serialize for RunSample {
    // The median is named by its unit (`median_bytes_per_sec`), as every rate is.
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(5))?;
        map.serialize_entry("run_id", &self.run_id)?;
        map.serialize_entry("workload", &self.workload)?;
        map.serialize_entry("n", &self.rates.len())?;
        map.serialize_entry("too_short_items", &self.too_short)?;
        map.serialize_entry(&format!("median_{}", self.unit.as_str()), &self.median)?;
        map.end()
    }
}

/// What a later run's change against the first amounts to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Finding {
    /// p below [`ALPHA`] and a change of at least [`MIN_CHANGE_FRACTION`].
    BeyondNoise,
    /// p below [`ALPHA`], but the median moved by less than [`MIN_CHANGE_FRACTION`].
    SmallChange,
    /// Within the items' spread.
    WithinNoise,
    /// Fewer than [`MIN_ITEMS`] items timed well on one side.
    TooFewItems,
    /// One of the runs has no item at all in the group.
    Missing,
}

impl Finding {
    /// The finding in words.
    pub fn words(self) -> &'static str {
        match self {
            Finding::BeyondNoise => "beyond noise",
            Finding::SmallChange => "small change",
            Finding::WithinNoise => "within noise",
            Finding::TooFewItems => "too few items",
            Finding::Missing => "missing",
        }
    }
}

/// A later run's median against the first run's.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Change {
    /// The later run.
    pub run_id: i64,
    /// Its median over the first run's.
    pub ratio: Option<f64>,
    /// The same as a change in percent (`-50.0` for half).
    pub change_percent: Option<f64>,
    /// U of the first run's items against the later run's.
    pub u: Option<f64>,
    /// Two-sided p-value of the Mann-Whitney U test.
    pub p_value: Option<f64>,
    /// How the p-value was found.
    pub method: Option<Method>,
    /// Whether the change stands out of the noise ([`Finding::BeyondNoise`]).
    pub beyond_noise: bool,
    /// What the change amounts to.
    pub finding: Finding,
}

impl Change {
    fn between(first: &RunSample, later: &RunSample) -> Change {
        let ratio = match (first.median, later.median) {
            (Some(a), Some(b)) if a > 0.0 => Some(b / a),
            _ => None,
        };
        let test = if first.rates.len() >= MIN_ITEMS && later.rates.len() >= MIN_ITEMS {
            mann_whitney::test(&first.rates, &later.rates)
        } else {
            None
        };
        let absent = |sample: &RunSample| sample.rates.is_empty() && sample.too_short == 0;
        let finding = if absent(first) || absent(later) {
            Finding::Missing
        } else if let Some(test) = test {
            let moved = ratio.is_none_or(|r| (r - 1.0).abs() >= MIN_CHANGE_FRACTION);
            match (test.p_value < ALPHA, moved) {
                (true, true) => Finding::BeyondNoise,
                (true, false) => Finding::SmallChange,
                (false, _) => Finding::WithinNoise,
            }
        } else {
            Finding::TooFewItems
        };
        Change {
            run_id: later.run_id,
            ratio,
            change_percent: ratio.map(|r| (r - 1.0) * 100.0),
            u: test.map(|t| t.u),
            p_value: test.map(|t| t.p_value),
            method: test.map(|t| t.method),
            beyond_noise: finding == Finding::BeyondNoise,
            finding,
        }
    }
}

/// One group of items, across the runs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Group {
    /// What the items measured.
    #[serde(flatten)]
    pub key: GroupKey,
    /// What their rates count.
    pub rate_unit: RateUnit,
    /// Each run's items, in the order of the runs.
    pub runs: Vec<RunSample>,
    /// Each later run against the first.
    pub changes: Vec<Change>,
}

/// Workloads of the runs matched to one another, with their groups.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WorkloadComparison {
    /// Their kind.
    pub kind: String,
    /// Each run's target (`None` where a run has no such workload).
    pub targets: Vec<Option<String>>,
    /// Each run's workload index.
    pub workloads: Vec<Option<usize>>,
    /// Whether these ran alone first (`--alone`), apart from the same targets together.
    pub alone: bool,
    /// Why the items are not compared (a kind without a natural key); `None` when they are.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub skipped: Option<String>,
    /// The groups, in order.
    pub groups: Vec<Group>,
}

/// Stored runs side by side.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Comparison {
    /// The runs, the first being the one the others are set against.
    pub runs: Vec<RunRef>,
    /// The thresholds of the verdicts.
    pub thresholds: Thresholds,
    /// Matched workloads.
    pub workloads: Vec<WorkloadComparison>,
}

/// The thresholds the findings use, stated in the JSON so a reader need not guess.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Thresholds {
    /// [`ALPHA`].
    pub alpha: f64,
    /// [`MIN_CHANGE_FRACTION`].
    pub min_change_fraction: f64,
    /// [`MIN_ITEMS`].
    pub min_items: usize,
}

/// Compares `runs`: the first against each of the others.
pub fn compare(runs: &[RunDocument]) -> Comparison {
    let workloads = match_workloads(runs)
        .into_iter()
        .map(|slot| compare_slot(runs, slot))
        .collect();
    Comparison {
        runs: runs
            .iter()
            .map(|run| RunRef {
                run_id: run.run_id.unwrap_or_default(),
                verb: run.verb.clone(),
                started_at: run.started_at.clone(),
                label: run.label.clone(),
                hostname: run.machine.hostname.clone(),
                status: run.status.as_str().to_string(),
            })
            .collect(),
        thresholds: Thresholds {
            alpha: ALPHA,
            min_change_fraction: MIN_CHANGE_FRACTION,
            min_items: MIN_ITEMS,
        },
        workloads,
    }
}

/// One workload per run (or none), matched.
struct Slot {
    kind: String,
    /// The target of the workload that opened the slot.
    target: String,
    alone: bool,
    members: Vec<Option<usize>>,
}

impl Slot {
    /// Whether `record` is of the slot's kind and, like it, alone or not, with the slot
    /// still free in run `run`.
    fn takes(&self, run: usize, record: &WorkloadRecord) -> bool {
        self.members[run].is_none()
            && self.kind == record.kind
            && self.alone == record.alone_of.is_some()
    }
}

/// Matches workloads across runs: by kind and target first, the n-th such workload of
/// a run with the n-th of the others; then what is left by kind alone, in order, so two
/// runs on two different disks still line up; what is still left gets a slot of its own.
fn match_workloads(runs: &[RunDocument]) -> Vec<Slot> {
    let mut slots: Vec<Slot> = Vec::new();
    for (r, run) in runs.iter().enumerate() {
        let mut left: Vec<usize> = Vec::new();
        for (w, record) in run.workloads.iter().enumerate() {
            match slots
                .iter_mut()
                .find(|slot| slot.takes(r, record) && slot.target == record.target)
            {
                Some(slot) => slot.members[r] = Some(w),
                None => left.push(w),
            }
        }
        for w in left {
            let record = &run.workloads[w];
            match slots.iter_mut().find(|slot| slot.takes(r, record)) {
                Some(slot) => slot.members[r] = Some(w),
                None => {
                    let mut members = vec![None; runs.len()];
                    members[r] = Some(w);
                    slots.push(Slot {
                        kind: record.kind.clone(),
                        target: record.target.clone(),
                        alone: record.alone_of.is_some(),
                        members,
                    });
                }
            }
        }
    }
    slots
}

fn compare_slot(runs: &[RunDocument], slot: Slot) -> WorkloadComparison {
    let records: Vec<Option<&WorkloadRecord>> = slot
        .members
        .iter()
        .zip(runs)
        .map(|(member, run)| member.map(|w| &run.workloads[w]))
        .collect();
    let mut comparison = WorkloadComparison {
        kind: slot.kind.clone(),
        targets: records
            .iter()
            .map(|r| r.map(|r| r.target.clone()))
            .collect(),
        workloads: slot.members.clone(),
        alone: slot.alone,
        skipped: None,
        groups: Vec::new(),
    };
    let Some(unit) = unit_of(&slot.kind) else {
        comparison.skipped = Some(format!(
            "{} items have no key to group them by across runs: not compared",
            slot.kind
        ));
        return comparison;
    };
    // Keys in the order first met over the runs, each run's rates per key.
    let mut order: Vec<String> = Vec::new();
    let mut per_run: Vec<BTreeMap<GroupKey, (Vec<f64>, usize)>> = Vec::new();
    for record in &records {
        let mut groups: BTreeMap<GroupKey, (Vec<f64>, usize)> = BTreeMap::new();
        for (key, rate) in record.map(samples).unwrap_or_default() {
            if !order.contains(&key.op) {
                order.push(key.op.clone());
            }
            let (rates, too_short) = groups.entry(key).or_default();
            match rate {
                Some(rate) => rates.push(rate),
                None => *too_short += 1,
            }
        }
        per_run.push(groups);
    }
    let keys: BTreeSet<GroupKey> = per_run.iter().flat_map(|g| g.keys().cloned()).collect();
    let mut keys: Vec<GroupKey> = keys.into_iter().collect();
    // Stable: keys of one operation keep their natural order (size, threads, class).
    keys.sort_by_key(|key| order.iter().position(|op| *op == key.op));
    for key in keys {
        let samples: Vec<RunSample> = runs
            .iter()
            .zip(&per_run)
            .zip(&slot.members)
            .map(|((run, groups), &workload)| {
                let (rates, too_short) = groups.get(&key).cloned().unwrap_or_default();
                RunSample {
                    run_id: run.run_id.unwrap_or_default(),
                    workload,
                    median: Stats::of(&rates).map(|s| s.median),
                    rates,
                    too_short,
                    unit,
                }
            })
            .collect();
        let changes = samples
            .iter()
            .skip(1)
            .map(|later| Change::between(&samples[0], later))
            .collect();
        comparison.groups.push(Group {
            key,
            rate_unit: unit,
            runs: samples,
            changes,
        });
    }
    comparison
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::document::RunStatus;
    use crate::platform::Machine;
    use serde_json::{Value, json};

    fn disk_item(op: &str, size: u64, rate: f64) -> Value {
        json!({
            "op": op, "mode": if op == "write" { "fsync" } else { "direct" },
            "size_bytes": size, "bytes": size, "seconds": size as f64 / rate,
            "bytes_per_sec": rate, "cached_fraction_before": null, "flags": [],
            "direct": true, "pass": 1, "file": "f"
        })
    }

    fn workload(kind: &str, target: &str, items: Vec<Value>) -> WorkloadRecord {
        WorkloadRecord {
            kind: kind.into(),
            target: target.into(),
            params: json!({}),
            context: Value::Null,
            items,
            summary: Value::Null,
            series: None,
            alone_of: None,
            warnings: vec![],
        }
    }

    fn run(id: i64, workloads: Vec<WorkloadRecord>) -> RunDocument {
        RunDocument {
            run_id: Some(id),
            status: RunStatus::Complete,
            incomplete_reason: None,
            ratelab_version: "0.1.0".into(),
            verb: "disk".into(),
            label: None,
            started_at: "2026-11-22T10:00:00Z".into(),
            finished_at: None,
            machine: Machine::default(),
            workloads,
            contention: None,
            verdicts: vec![],
            runner_cpu_seconds: None,
            runner_wall_seconds: None,
        }
    }

    /// Writes of 1 MiB at `rates`, reads of 1 MiB at 500 MB/s, on `target`.
    fn disk_run(id: i64, target: &str, rates: &[f64]) -> RunDocument {
        let mut items: Vec<Value> = rates
            .iter()
            .map(|&r| disk_item("write", 1 << 20, r))
            .collect();
        items.extend((0..3).map(|_| disk_item("read", 1 << 20, 5e8)));
        run(id, vec![workload("disk", target, items)])
    }

    #[test]
    fn a_halved_write_rate_is_beyond_noise() {
        let first: Vec<f64> = (0..10).map(|i| 4e7 + f64::from(i) * 1e5).collect();
        let later: Vec<f64> = first.iter().map(|r| r / 2.0).collect();
        let comparison = compare(&[disk_run(1, "/a", &first), disk_run(2, "/a", &later)]);
        assert_eq!(comparison.workloads.len(), 1);
        let groups = &comparison.workloads[0].groups;
        assert_eq!(
            groups.iter().map(|g| g.key.op.as_str()).collect::<Vec<_>>(),
            ["write", "read direct"]
        );
        let write = &groups[0].changes[0];
        assert_eq!(write.finding, Finding::BeyondNoise);
        assert!((write.ratio.unwrap() - 0.5).abs() < 1e-9);
        assert!(write.p_value.unwrap() < 1e-4);
        let read = &groups[1].changes[0];
        assert_eq!(read.finding, Finding::WithinNoise);
        assert_eq!(read.p_value, Some(1.0));
    }

    #[test]
    fn small_or_thin_changes_are_not_flagged() {
        let first: Vec<f64> = (0..10).map(|i| 1e8 + f64::from(i)).collect();
        // Every item 2% faster: significant, but under 5%.
        let later: Vec<f64> = first.iter().map(|r| r * 1.02).collect();
        let comparison = compare(&[disk_run(1, "/a", &first), disk_run(2, "/a", &later)]);
        let change = &comparison.workloads[0].groups[0].changes[0];
        assert_eq!(change.finding, Finding::SmallChange);
        assert!(!change.beyond_noise);
        let comparison = compare(&[disk_run(1, "/a", &[1e8, 1e8]), disk_run(2, "/a", &[5e7; 2])]);
        let change = &comparison.workloads[0].groups[0].changes[0];
        assert_eq!(change.finding, Finding::TooFewItems);
        assert_eq!(change.p_value, None);
        assert_eq!(change.ratio, Some(0.5));
    }

    #[test]
    fn items_too_short_to_time_are_left_out() {
        let mut a = disk_run(1, "/a", &[1e8; 5]);
        let mut b = disk_run(2, "/a", &[5e7; 5]);
        for run in [&mut a, &mut b] {
            for item in &mut run.workloads[0].items {
                item["flags"] = json!(["small"]);
            }
        }
        let comparison = compare(&[a, b]);
        let group = &comparison.workloads[0].groups[0];
        assert_eq!(group.runs[0].too_short, 5);
        assert!(group.runs[0].rates.is_empty());
        assert_eq!(group.runs[0].median, None);
        assert_eq!(group.changes[0].finding, Finding::TooFewItems);
    }

    #[test]
    fn workloads_match_by_target_then_by_kind_and_position() {
        let a = run(
            1,
            vec![
                workload("disk", "/x", vec![disk_item("write", 4096, 1e6)]),
                workload("disk", "/y", vec![disk_item("write", 4096, 2e6)]),
                workload("monitor", "machine", vec![]),
            ],
        );
        let b = run(
            2,
            vec![
                workload("disk", "/y", vec![disk_item("write", 4096, 2e6)]),
                workload("disk", "/z", vec![disk_item("write", 4096, 1e6)]),
                workload("cpu", "cores", vec![]),
            ],
        );
        let comparison = compare(&[a, b]);
        let pairs: Vec<(&str, Vec<Option<usize>>)> = comparison
            .workloads
            .iter()
            .map(|w| (w.kind.as_str(), w.workloads.clone()))
            .collect();
        assert_eq!(
            pairs,
            [
                ("disk", vec![Some(0), Some(1)]),
                ("disk", vec![Some(1), Some(0)]),
                ("monitor", vec![Some(2), None]),
                ("cpu", vec![None, Some(2)]),
            ]
        );
        assert!(comparison.workloads[2].skipped.is_some());
        assert!(comparison.workloads[3].skipped.is_none());
    }

    #[test]
    fn cpu_task_and_net_items_have_their_keys() {
        let cpu_item = |op: &str, threads: usize, loops_per_sec: Option<f64>| {
            json!({"op": op, "threads": threads, "class": "normal", "isa": "x86_64",
                   "loops_per_sec": loops_per_sec, "raw_loops_per_sec": 6.0,
                   "work_ns_per_loop": 1.0, "empty_ns_per_loop": 0.1, "cpus_seen": [0],
                   "migrations": 0, "started_at_s": 0.0, "seconds": 1.0, "per_thread": []})
        };
        let cpu = workload(
            "cpu",
            "cores",
            vec![cpu_item("int", 2, Some(5.0)), cpu_item("empty", 1, None)],
        );
        let key = GroupKey {
            threads: Some(2),
            class: Some("normal".into()),
            ..GroupKey::op("int")
        };
        assert_eq!(
            samples(&cpu),
            [(key, Some(5.0))],
            "the empty test has no rate"
        );
        let net = workload(
            "net",
            "host",
            vec![
                json!({"op": "receive", "scope": "interval", "side": "remote", "direction": "up",
                       "stream": 0, "interval": 0, "start_s": 0.0, "end_s": 1.0, "bytes": 10,
                       "seconds": 1.0, "bytes_per_sec": 10.0}),
                json!({"op": "receive", "scope": "interval", "side": "remote", "direction": "up",
                       "stream": 1, "interval": 0, "start_s": 0.0, "end_s": 1.0, "bytes": 20,
                       "seconds": 1.0, "bytes_per_sec": 20.0}),
                json!({"op": "send", "scope": "interval", "side": "local", "direction": "up",
                       "stream": 0, "interval": 0, "start_s": 0.0, "end_s": 1.0, "bytes": 10,
                       "seconds": 1.0, "bytes_per_sec": 10.0}),
            ],
        );
        assert_eq!(
            samples(&net),
            [(GroupKey::op("receive up"), Some(30.0))],
            "streams of one interval add up"
        );
        let task = workload(
            "task",
            "/f",
            vec![
                json!({"op": "compress", "threads": 4, "bytes": 10, "seconds": 1.0,
                        "bytes_per_sec": 10.0, "source_bytes": 20, "source_bytes_per_sec": 20.0}),
            ],
        );
        let key = GroupKey {
            threads: Some(4),
            ..GroupKey::op("compress")
        };
        assert_eq!(samples(&task), [(key, Some(20.0))]);
    }

    #[test]
    fn readdir_items_fall_in_the_stored_bands() {
        let mut record = workload(
            "readdir",
            "/d",
            vec![
                disk_item("read", 50_000, 1e8),
                disk_item("read", 2_000_000, 2e8),
            ],
        );
        record.summary = json!({"by_band": [
            {"from_bytes": 10_000, "to_bytes": 100_000},
            {"from_bytes": 1_000_000, "to_bytes": null},
        ]});
        let keys: Vec<(Option<u64>, Option<u64>)> = samples(&record)
            .into_iter()
            .map(|(k, _)| (k.size_bytes, k.size_to_bytes))
            .collect();
        assert_eq!(
            keys,
            [(Some(10_000), Some(100_000)), (Some(1_000_000), None)]
        );
    }

    #[test]
    fn json_names_the_median_by_its_unit() {
        let comparison = compare(&[disk_run(1, "/a", &[1e8; 3]), disk_run(2, "/a", &[1e8; 3])]);
        let json = serde_json::to_value(&comparison).unwrap();
        let group = &json["workloads"][0]["groups"][0];
        assert_eq!(group["op"], "write");
        assert_eq!(group["size_bytes"], 1 << 20);
        assert_eq!(group["runs"][1]["median_bytes_per_sec"], 1e8);
        assert_eq!(group["runs"][1]["n"], 3);
        assert_eq!(group["changes"][0]["beyond_noise"], false);
        assert_eq!(group["changes"][0]["p_value"], 1.0);
    }
}
