//! Stored runs side by side: workloads matched across runs, their items grouped by
//! what they measured (a disk's writes of one size, a cpu test at one thread count),
//! and each later run's median set against the first run's with a Mann-Whitney U
//! test, so a change is called only when it stands out of the items' own spread, and
//! never put down to the machine when other work disturbed either run.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;
use serde::ser::{SerializeMap, Serializer};

use super::mann_whitney::{self, Method};
use super::stats::Stats;
use crate::document::{RunDocument, RunStatus, WorkloadRecord};
pub use crate::vocab::{GroupKey, RateUnit, Samples};

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
    /// Whether it finished.
    pub status: RunStatus,
    /// Whether other work on its machine disturbed it (its `disturbed` verdict).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub disturbed: bool,
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
    /// Items with no figure to compare, left out: an iops interval in which no request
    /// completed has no latency.
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
    /// The medians differ beyond [`MIN_CHANGE_FRACTION`] or the noise, but other work
    /// disturbed one of the runs: not put down to the machine.
    Disturbed,
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
            Finding::Disturbed => "disturbed run",
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
    /// `later` against `first`; `disturbed` when other work disturbed either run.
    fn between(first: &RunSample, later: &RunSample, disturbed: bool) -> Change {
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
        let finding = match finding {
            Finding::BeyondNoise | Finding::SmallChange if disturbed => Finding::Disturbed,
            other => other,
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

/// One run as compared: its document, and each workload's items as its kind groups
/// them (`None` for a workload whose kind has no key to group them by).
#[derive(Debug, Clone, Copy)]
pub struct Sampled<'a> {
    /// The run.
    pub run: &'a RunDocument,
    /// Its workloads' samples, in the order of its workloads.
    pub samples: &'a [Option<Samples>],
}

/// Compares `runs`: the first against each of the others.
pub fn compare(runs: &[Sampled]) -> Comparison {
    let documents: Vec<&RunDocument> = runs.iter().map(|r| r.run).collect();
    let workloads = match_workloads(&documents)
        .into_iter()
        .map(|slot| compare_slot(runs, slot))
        .collect();
    Comparison {
        runs: documents
            .iter()
            .map(|run| RunRef {
                run_id: run.run_id.unwrap_or_default(),
                verb: run.verb.clone(),
                started_at: run.started_at.clone(),
                label: run.label.clone(),
                hostname: run.machine.hostname.clone(),
                status: run.status,
                disturbed: super::interference::disturbed(run),
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
fn match_workloads(runs: &[&RunDocument]) -> Vec<Slot> {
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

fn compare_slot(runs: &[Sampled], slot: Slot) -> WorkloadComparison {
    let records: Vec<Option<&WorkloadRecord>> = slot
        .members
        .iter()
        .zip(runs)
        .map(|(member, sampled)| member.map(|w| &sampled.run.workloads[w]))
        .collect();
    let samples: Vec<Option<&Samples>> = slot
        .members
        .iter()
        .zip(runs)
        .map(|(member, sampled)| member.and_then(|w| sampled.samples.get(w)?.as_ref()))
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
    if samples.iter().all(Option::is_none) {
        comparison.skipped = Some(format!(
            "{} items have no key to group them by across runs: not compared",
            slot.kind
        ));
        return comparison;
    }
    let (keys, per_run) = grouped(&samples);
    for key in keys {
        let unit = key.unit;
        let samples: Vec<RunSample> = runs
            .iter()
            .zip(&per_run)
            .zip(&slot.members)
            .map(|((sampled, groups), &workload)| {
                let (rates, too_short) = groups.get(&key).cloned().unwrap_or_default();
                RunSample {
                    run_id: sampled.run.run_id.unwrap_or_default(),
                    workload,
                    median: Stats::of(&rates).map(|s| s.median),
                    rates,
                    too_short,
                    unit,
                }
            })
            .collect();
        let disturbed = |sample: &RunSample| {
            runs.iter().any(|r| {
                r.run.run_id.unwrap_or_default() == sample.run_id
                    && super::interference::disturbed(r.run)
            })
        };
        let changes = samples
            .iter()
            .skip(1)
            .map(|later| {
                Change::between(
                    &samples[0],
                    later,
                    disturbed(&samples[0]) || disturbed(later),
                )
            })
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

/// Compares runs made up for tests, each with its workloads' samples.
#[cfg(test)]
pub(crate) fn compared(runs: &[(RunDocument, Vec<Option<Samples>>)]) -> Comparison {
    let sampled: Vec<Sampled> = runs
        .iter()
        .map(|(run, samples)| Sampled { run, samples })
        .collect();
    compare(&sampled)
}

/// One run's items per group: their rates, and how many were too short to time.
type RunGroups = BTreeMap<GroupKey, (Vec<f64>, usize)>;

/// Each run's items per group, with every key any run has, in the order of their
/// operations as first met over the runs.
fn grouped(samples: &[Option<&Samples>]) -> (Vec<GroupKey>, Vec<RunGroups>) {
    let mut order: Vec<String> = Vec::new();
    let mut per_run: Vec<RunGroups> = Vec::new();
    for sampled in samples {
        let mut groups = RunGroups::new();
        for (key, rate) in sampled.map_or(&[][..], |s| &s.items[..]).iter().cloned() {
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
    (keys, per_run)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A made-up item: an operation, a file size, a rate; `None` for too short to time.
    type Item = (&'static str, u64, Option<f64>);

    fn workload(kind: &str, target: &str) -> WorkloadRecord {
        WorkloadRecord::for_test(kind, target, vec![])
    }

    fn run(id: i64, workloads: Vec<WorkloadRecord>) -> RunDocument {
        RunDocument {
            run_id: Some(id),
            ..RunDocument::for_test(workloads)
        }
    }

    /// Samples keyed by operation and size, as storage items are.
    fn samples(items: &[Item]) -> Option<Samples> {
        Some(Samples {
            items: items
                .iter()
                .map(|&(op, size, rate)| {
                    let key = GroupKey {
                        size_bytes: Some(size),
                        ..GroupKey::new(RateUnit::BytesPerSec, op)
                    };
                    (key, rate)
                })
                .collect(),
        })
    }

    /// Writes of 1 MiB at `rates`, reads of 1 MiB at 500 MB/s, on `target`.
    fn disk_run(id: i64, target: &str, rates: &[f64]) -> (RunDocument, Vec<Option<Samples>>) {
        let mut items: Vec<Item> = rates.iter().map(|&r| ("write", 1 << 20, Some(r))).collect();
        items.extend((0..3).map(|_| ("read direct", 1 << 20, Some(5e8))));
        (
            run(id, vec![workload("disk", target)]),
            vec![samples(&items)],
        )
    }

    #[test]
    fn a_halved_write_rate_is_beyond_noise() {
        let first: Vec<f64> = (0..10).map(|i| 4e7 + f64::from(i) * 1e5).collect();
        let later: Vec<f64> = first.iter().map(|r| r / 2.0).collect();
        let comparison = compared(&[disk_run(1, "/a", &first), disk_run(2, "/a", &later)]);
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
        let comparison = compared(&[disk_run(1, "/a", &first), disk_run(2, "/a", &later)]);
        let change = &comparison.workloads[0].groups[0].changes[0];
        assert_eq!(change.finding, Finding::SmallChange);
        assert!(!change.beyond_noise);
        let comparison = compared(&[disk_run(1, "/a", &[1e8, 1e8]), disk_run(2, "/a", &[5e7; 2])]);
        let change = &comparison.workloads[0].groups[0].changes[0];
        assert_eq!(change.finding, Finding::TooFewItems);
        assert_eq!(change.p_value, None);
        assert_eq!(change.ratio, Some(0.5));
    }

    #[test]
    fn items_too_short_to_time_are_left_out() {
        let short = |id| {
            let (run, _) = disk_run(id, "/a", &[]);
            (run, vec![samples(&[("write", 1 << 20, None); 5])])
        };
        let comparison = compared(&[short(1), short(2)]);
        let group = &comparison.workloads[0].groups[0];
        assert_eq!(group.runs[0].too_short, 5);
        assert!(group.runs[0].rates.is_empty());
        assert_eq!(group.runs[0].median, None);
        assert_eq!(group.changes[0].finding, Finding::TooFewItems);
    }

    #[test]
    fn workloads_match_by_target_then_by_kind_and_position() {
        let write = |rate| samples(&[("write", 4096, Some(rate))]);
        let a = (
            run(
                1,
                vec![
                    workload("disk", "/x"),
                    workload("disk", "/y"),
                    workload("monitor", "machine"),
                ],
            ),
            vec![write(1e6), write(2e6), None],
        );
        let b = (
            run(
                2,
                vec![
                    workload("disk", "/y"),
                    workload("disk", "/z"),
                    workload("cpu", "cores"),
                ],
            ),
            vec![write(2e6), write(1e6), samples(&[])],
        );
        let comparison = compared(&[a, b]);
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
    fn json_names_the_median_by_its_unit() {
        let comparison = compared(&[disk_run(1, "/a", &[1e8; 3]), disk_run(2, "/a", &[1e8; 3])]);
        let json = serde_json::to_value(&comparison).unwrap();
        let group = &json["workloads"][0]["groups"][0];
        assert_eq!(group["op"], "write");
        assert_eq!(group["size_bytes"], 1 << 20);
        assert_eq!(group["rate_unit"], json!("bytes_per_sec"));
        assert_eq!(group["runs"][1]["median_bytes_per_sec"], 1e8);
        assert_eq!(group["runs"][1]["n"], 3);
        assert_eq!(group["changes"][0]["beyond_noise"], false);
        assert_eq!(group["changes"][0]["p_value"], 1.0);
    }
}
