//! What a run concludes once its workloads have stopped: each workload's knees,
//! summary and verdicts from its kind, whether other work on the machine disturbed it,
//! then the contention of the workloads that ran at once. A pure function over the document, so a stored run concludes again to the
//! same figures.

use crate::analysis::{contention, interference};
use crate::document::{RunDocument, Verdict};
use crate::workload::{self, Apart, DecodeError, Decoded};

/// Fills in what `doc`'s items say: knees, summaries and verdicts of every workload,
/// and, for `together` (the workloads that ran at once, if any did), the contention
/// report with its verdicts. A workload run alone first speaks through the contention
/// report; several targets on one filesystem would say the same thing each, which is
/// said once. Each workload is decoded once, and its view comes back set apart, to be
/// attached to the concluded run.
pub fn conclude(doc: &mut RunDocument, together: Option<&[usize]>) -> Result<Apart, DecodeError> {
    let (concluded, disturbed, verdicts, apart) = {
        let mut run = Decoded::of(doc);
        let concluded = run.conclude()?;
        // Judged before the kinds' verdicts, which say less of a change in a disturbed
        // run.
        let disturbed = disturbance(&run)?;
        run.disturbed |= disturbed
            .iter()
            .any(|v| v.workload.is_none() && v.code == interference::DISTURBED);
        let mut verdicts = Vec::new();
        for (index, record) in doc.workloads.iter().enumerate() {
            if record.alone_of.is_some() {
                continue;
            }
            if let Some(view) = run.view(index)? {
                verdicts.extend(view.verdicts(&run)?);
            }
        }
        (concluded, disturbed, verdicts, run.apart())
    };
    for (record, concluded) in doc.workloads.iter_mut().zip(concluded) {
        let Some(concluded) = concluded else { continue };
        if let Some(series) = record.series.as_mut() {
            series.knees = concluded.knees;
        }
        record.summary = concluded.summary;
    }
    doc.verdicts.extend(disturbed);
    for verdict in verdicts {
        if !doc
            .verdicts
            .iter()
            .any(|v| v.code == verdict.code && v.message == verdict.message)
        {
            doc.verdicts.push(verdict);
        }
    }
    // Only workloads that ran at all share anything.
    if let Some(report) = together.and_then(|group| contention::measure(&doc.workloads, group)) {
        let units: Vec<_> = doc.workloads.iter().map(workload::rate_unit).collect();
        doc.verdicts.extend(contention::verdicts(&report, &units));
        doc.contention = Some(serde_json::to_value(&report).expect("contention serialises"));
    }
    Ok(apart)
}

/// The verdicts of the run's account of other work, judged against what each
/// workload's figures are exposed to.
fn disturbance(run: &Decoded) -> Result<Vec<Verdict>, DecodeError> {
    let Some(account) = &run.doc.interference else {
        return Ok(Vec::new());
    };
    let mut exposed = Vec::new();
    for (index, record) in run.doc.workloads.iter().enumerate() {
        if let Some(view) = run.view(index)? {
            exposed.push(interference::Exposed {
                name: format!("{} {}", record.kind, index + 1),
                exposure: view.exposure(),
                stages: interference::Stage::of(record.series.as_ref()),
            });
        }
    }
    Ok(interference::judge(account, &exposed).into_iter().collect())
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
            let before = crate::workload::decodes();
            conclude(&mut again, together(listed.run_id)).unwrap();
            // Each workload of a kind this version knows is decoded once.
            let known = again
                .workloads
                .iter()
                .filter(|w| crate::workload::kind(&w.kind).is_some())
                .count();
            assert_eq!(
                crate::workload::decodes() - before,
                known,
                "run {}: decodes while concluding",
                listed.run_id
            );
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

    /// A sustained disk run whose rate stepped down is told of its knee, in its
    /// series and in its verdicts: the verdicts read the knees the run just concluded.
    #[test]
    fn a_sustained_run_that_stepped_down_has_its_knee_said() {
        let (_dir, store) = crate::db::fixture();
        let mut doc = store
            .list_runs()
            .unwrap()
            .into_iter()
            .map(|listed| store.load_run(listed.run_id).unwrap())
            .find(|doc| doc.workloads.len() == 1 && doc.workloads[0].kind == "disk")
            .expect("a run of one disk workload");
        doc.verdicts.clear();
        let record = &mut doc.workloads[0];
        record.params["duration_s"] = serde_json::json!(7.0);
        // 400 MB/s for 3 s, then 100 MB/s for 4 s, sampled every 0.1 s.
        let rates = (0..70).map(|n| if n < 30 { 400e6 } else { 100e6 });
        let series = record.series.as_mut().expect("a series");
        series.t_s = (1..=70).map(|n| f64::from(n) * 0.1).collect();
        series.bytes = rates.map(|rate| (rate * 0.1) as u64).collect();
        series.ops = Vec::new();
        series.knees = None;
        conclude(&mut doc, None).unwrap();
        let knees = doc.workloads[0].series.as_ref().unwrap().knees.clone();
        assert_eq!(knees.map(|k| k.len()), Some(1));
        assert!(
            doc.verdicts
                .iter()
                .any(|v| v.code == "knee" && v.workload == Some(0)),
            "{:#?}",
            doc.verdicts
        );
    }
}
