//! What a run concludes once its workloads have stopped: each workload's knees,
//! summary and verdicts from its kind, whether other work on the machine disturbed it,
//! then the contention of the workloads that ran at once. A pure function over the document, so a stored run concludes again to the
//! same figures.

use crate::analysis::{contention, interference};
use crate::document::RunDocument;
use crate::workload::{self, At, DecodeError};

/// Fills in what `doc`'s items say: knees, summaries and verdicts of every workload,
/// and, for `together` (the workloads that ran at once, if any did), the contention
/// report with its verdicts. A workload run alone first speaks through the contention
/// report; several targets on one filesystem would say the same thing each, which is
/// said once.
pub fn conclude(doc: &mut RunDocument, together: Option<&[usize]>) -> Result<(), DecodeError> {
    for index in 0..doc.workloads.len() {
        let Some(kind) = workload::kind(&doc.workloads[index].kind) else {
            continue;
        };
        let knees = kind.knees(At::new(doc, index))?;
        if let Some(series) = doc.workloads[index].series.as_mut() {
            series.knees = knees;
        }
        doc.workloads[index].summary = kind.summarize(At::new(doc, index))?;
    }
    // Judged before the kinds' verdicts, which say less of a change in a disturbed run.
    if let Some(account) = &doc.interference {
        let mut exposed = Vec::new();
        for (index, record) in doc.workloads.iter().enumerate() {
            if let Some(kind) = workload::kind(&record.kind) {
                exposed.push(interference::Exposed {
                    name: format!("{} {}", record.kind, index + 1),
                    exposure: kind.exposure(At::new(doc, index))?,
                    stages: interference::Stage::of(record.series.as_ref()),
                });
            }
        }
        doc.verdicts.extend(interference::judge(account, &exposed));
    }
    for index in 0..doc.workloads.len() {
        let Some(kind) = workload::kind(&doc.workloads[index].kind) else {
            continue;
        };
        if doc.workloads[index].alone_of.is_some() {
            continue;
        }
        for verdict in kind.verdicts(At::new(doc, index))? {
            if !doc
                .verdicts
                .iter()
                .any(|v| v.code == verdict.code && v.message == verdict.message)
            {
                doc.verdicts.push(verdict);
            }
        }
    }
    // Only workloads that ran at all share anything.
    if let Some(report) = together.and_then(|group| contention::measure(&doc.workloads, group)) {
        let units: Vec<_> = doc.workloads.iter().map(workload::rate_unit).collect();
        doc.verdicts.extend(contention::verdicts(&report, &units));
        doc.contention = Some(serde_json::to_value(&report).expect("contention serialises"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::document::{Severity, Verdict};

    /// The workloads that ran at once in the fixture's runs, as the runner passed them:
    /// two targets with --alone (run 2), the cpu tests beside the monitor (run 9), a
    /// scenario (run 13), and the profile's cpu tests beside the monitor (run 14).
    fn together(run: i64) -> Option<&'static [usize]> {
        match run {
            2 | 9 | 13 => Some(&[0, 1]),
            14 => Some(&[1, 2]),
            _ => None,
        }
    }

    /// Every run of the database the binary of 61f461b wrote (tests/fixtures/) concludes
    /// again to the very summaries, knees, contention and verdicts it stored.
    #[test]
    fn stored_runs_conclude_again_to_what_was_stored() {
        let (_dir, store) = crate::db::fixture();
        let runs = store.list_runs().unwrap();
        assert_eq!(runs.len(), 15);
        for listed in runs {
            let stored = store.load_run(listed.run_id).unwrap();
            let mut again = stored.clone();
            again.verdicts.clear();
            again.contention = None;
            for record in &mut again.workloads {
                record.summary = serde_json::Value::Null;
                if let Some(series) = record.series.as_mut() {
                    series.knees = None;
                }
            }
            conclude(&mut again, together(listed.run_id)).unwrap();
            for (index, (a, b)) in stored.workloads.iter().zip(&again.workloads).enumerate() {
                // Readdir's size bands moved to binary edges on purpose (one unit system
                // on every screen): its bands are concluded anew, the rest must match.
                let without_bands = |record: &crate::document::WorkloadRecord| {
                    let mut summary = record.summary.clone();
                    if record.kind == "readdir"
                        && let Some(map) = summary.as_object_mut()
                    {
                        map.remove("by_band");
                    }
                    summary
                };
                assert_eq!(
                    without_bands(a),
                    without_bands(b),
                    "run {}, workload {}: summary",
                    listed.run_id,
                    index + 1
                );
                assert_eq!(a.series, b.series, "run {}: knees", listed.run_id);
            }
            assert_eq!(stored.contention, again.contention, "run {}", listed.run_id);
            // A task's verdict beside the storage series of its folder looks the folders
            // up on the filesystem, and the fixture's are gone. Wording changes between
            // releases (the golden files show them): the judgement itself must not. A
            // virtual disk under a storage target is said since issue 38, of runs stored
            // before it too.
            let judged = |verdicts: &[Verdict]| -> Vec<(String, Severity, Option<usize>)> {
                verdicts
                    .iter()
                    .filter(|v| v.code != "disk_vs_task" && v.code != "virtual_disk")
                    .map(|v| (v.code.clone(), v.severity, v.workload))
                    .collect()
            };
            assert_eq!(
                judged(&stored.verdicts),
                judged(&again.verdicts),
                "run {}",
                listed.run_id
            );
        }
    }
}
