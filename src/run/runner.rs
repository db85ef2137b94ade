//! The runner: prepares every workload before anything is created, runs the groups of
//! the schedule, cleans up whatever happens, analyses, and stores the finished document.

use std::time::{Duration, Instant, SystemTime};

use anyhow::Context as _;
use serde_json::Value;

use super::group::{Shared, run_group};
use super::interference::{LOOK_EVERY, Touched, Watch};
use super::progress::ProgressDisplay;
use super::schedule::Schedule;
use crate::control::Cancel;
use crate::db::Store;
use crate::document::{RunDocument, RunStatus, Verdict, WorkloadRecord, now_rfc3339};
use crate::error::{Error, is_interrupted};
use crate::platform::cores::calling_thread_cpu_seconds;
use crate::workload::{self, Apart, Decoded, Workload};

/// The environment variable that holds a fleet's agreed start, in seconds since the
/// Unix epoch on this host's clock (`ratelab fleet --together` sets it on each host).
pub const START_AT_VARIABLE: &str = "RATELAB_START_AT";

/// The sampling interval when none is given.
pub const DEFAULT_INTERVAL: Duration = Duration::from_millis(100);

/// What a run is, beyond its workloads.
pub struct RunSpec {
    /// The verb that asked for it (`disk`, `profile`).
    pub verb: String,
    /// The user's label.
    pub label: Option<String>,
    /// Where to store it; `None` with --no-store.
    pub store: Option<Store>,
    /// Whether to draw progress on stderr.
    pub show_progress: bool,
    /// Which workloads run at once, and in what order.
    pub schedule: Schedule,
    /// The sampler's interval.
    pub interval: Duration,
    /// Verdicts over the whole finished run that only the verb can give (profile's
    /// changes since the last profile), added before the run is stored.
    pub judge: Option<Judge>,
    /// The moment the workloads start, once prepared (a fleet's agreed instant); at once
    /// when `None`.
    pub start_at: Option<SystemTime>,
}

/// A verb's own verdicts over a finished run, its workloads decoded.
pub type Judge = Box<dyn FnOnce(&Decoded) -> anyhow::Result<Vec<Verdict>>>;

/// A run that started: its document, and the error or interrupt that stopped it early.
pub struct Finished {
    /// The run as stored (complete, or incomplete with the reason).
    pub doc: RunDocument,
    /// Why it stopped early; `None` when it completed.
    pub error: Option<anyhow::Error>,
    /// Its workloads as they were decoded to conclude it; `None` where they could not be.
    views: Option<Apart>,
}

impl Finished {
    /// The run and its workloads, each decoded once, as the report shows them.
    pub fn decoded(&mut self) -> Decoded<'_> {
        match self.views.take() {
            Some(views) => views.attach(&self.doc),
            None => Decoded::of(&self.doc),
        }
    }
}

/// Runs `workloads` as the schedule says: prepare them all, run the groups, conclude,
/// store. Errors before anything is created come back as `Err`; once the run has
/// started it always comes back as [`Finished`], stored, with what stopped it.
pub fn execute(
    mut spec: RunSpec,
    mut workloads: Vec<Box<dyn Workload>>,
) -> anyhow::Result<Finished> {
    let cancel = Cancel::on_signals().context("cannot install signal handlers")?;
    for workload in &mut workloads {
        workload.prepare()?;
    }
    if cancel.interrupted() {
        return Err(Error::Interrupted.into());
    }
    let mut doc = begin(&mut spec, &workloads)?;
    let mut outcome = run_groups(&mut spec, &mut workloads, &mut doc, &cancel);
    let together: Option<Vec<usize>> = spec
        .schedule
        .shared()
        .next()
        .map(|group| group.iter().map(|m| m.workload).collect());
    let mut views = match super::conclude::conclude(&mut doc, together.as_deref()) {
        Ok(views) => Some(views),
        Err(e) => {
            // Items the kinds cannot read back are a bug; what was measured is still
            // stored.
            keep_first(&mut outcome, e.into());
            None
        }
    };
    // Only a run that completed is judged as a whole.
    if let Some(judge) = spec.judge.take().filter(|_| outcome.is_ok()) {
        let run = views
            .take()
            .map_or_else(|| Decoded::of(&doc), |v| v.attach(&doc));
        let judged = judge(&run);
        views = Some(run.apart());
        match judged {
            Ok(verdicts) => doc.verdicts.extend(verdicts),
            Err(e) => keep_first(&mut outcome, e),
        }
    }
    end(&mut doc, &outcome);
    let error = store(spec.store.as_mut(), &doc, outcome);
    Ok(Finished { doc, error, views })
}

/// The run's document before anything runs, stored as an incomplete run when the run
/// is stored.
fn begin(spec: &mut RunSpec, workloads: &[Box<dyn Workload>]) -> anyhow::Result<RunDocument> {
    let mut doc = RunDocument::begin(
        &spec.verb,
        spec.label.clone(),
        crate::platform::probe_machine(),
        workloads.iter().map(|w| record_of(w.as_ref())).collect(),
    );
    if let Some(store) = spec.store.as_mut() {
        doc.run_id = Some(store.begin_run(&doc)?);
    }
    Ok(doc)
}

/// Runs the schedule's groups one after another, each cleaned up before the next, and
/// says how the run went: the first error, or an interrupt, stops it.
fn run_groups(
    spec: &mut RunSpec,
    workloads: &mut [Box<dyn Workload>],
    doc: &mut RunDocument,
    cancel: &Cancel,
) -> anyhow::Result<()> {
    let display = ProgressDisplay::new(
        workloads.iter().map(|w| w.planned_bytes()).sum(),
        spec.show_progress,
    );
    let mut outcome: anyhow::Result<()> = Ok(());
    let touches: Vec<workload::Touches> = workloads.iter().map(|w| w.touches()).collect();
    let threads = !touches.iter().any(|t| t.accounts_threads);
    let watch = Watch::start(Touched::of(&touches), LOOK_EVERY, threads);
    let cpu_before = calling_thread_cpu_seconds();
    let wall = Instant::now();
    let parts = spec.schedule.groups.len();
    for (part, group) in spec.schedule.groups.iter().enumerate() {
        if outcome.is_err() {
            break;
        }
        let names: Vec<&str> = group.iter().map(|m| workloads[m.workload].kind()).collect();
        display.part(part, parts, &names.join(" + "));
        let shared = Shared {
            cancel,
            doc: &mut *doc,
            store: spec.store.as_mut(),
            display: &display,
            interval: spec.interval,
            // Only the first group waits for an agreed start: the others follow it.
            start_at: spec.start_at.filter(|_| part == 0),
        };
        outcome = run_group(group, workloads, shared);
        // Each group cleans up before the next: workloads run alone first must not hold
        // their files while the group after them needs the space.
        for member in group {
            clean(
                &mut workloads[member.workload],
                member.workload,
                doc,
                &mut outcome,
                &display,
            );
        }
    }
    doc.interference = watch.finish();
    doc.runner_cpu_seconds = Some(calling_thread_cpu_seconds() - cpu_before);
    doc.runner_wall_seconds = Some(wall.elapsed().as_secs_f64());
    display.finish();
    // Groups that never ran (after an error) still clean up what prepare found.
    for (index, workload) in workloads.iter_mut().enumerate() {
        clean(workload, index, doc, &mut outcome, &display);
    }
    // A signal that came during the last sync or the cleanup still ends the run.
    if outcome.is_ok() && cancel.interrupted() {
        outcome = Err(Error::Interrupted.into());
    }
    outcome
}

/// Keeps the first thing that went wrong as the run's reason.
fn keep_first(outcome: &mut anyhow::Result<()>, error: anyhow::Error) {
    if outcome.is_ok() {
        *outcome = Err(error);
    }
}

/// Marks the run's end: complete, or incomplete with the reason.
fn end(doc: &mut RunDocument, outcome: &anyhow::Result<()>) {
    doc.finished_at = Some(now_rfc3339());
    match outcome {
        Ok(()) => doc.status = RunStatus::Complete,
        Err(e) => {
            doc.status = RunStatus::Incomplete;
            doc.incomplete_reason = Some(if is_interrupted(e) {
                "interrupted".to_string()
            } else {
                format!("error: {e:#}")
            });
        }
    }
}

/// Stores the finished run; returns what stopped it, or a failure to store it. When both
/// happened, the failure to store is said as a warning and the run's own reason stays.
fn store(
    store: Option<&mut Store>,
    doc: &RunDocument,
    outcome: anyhow::Result<()>,
) -> Option<anyhow::Error> {
    let stored = match store {
        Some(store) => store.finish_run(doc),
        None => Ok(()),
    };
    match (outcome, stored) {
        (Ok(()), Ok(())) => None,
        (Ok(()), Err(e)) => Some(e.into()),
        (Err(e), stored) => {
            if let Err(store_error) = stored {
                crate::report::terminal::say(
                    "ratelab: warning: ",
                    &format!("{:#}", anyhow::Error::new(store_error)),
                );
            }
            Some(match doc.run_id {
                Some(id) => e.context(format!("run {id} stored as incomplete")),
                None => e,
            })
        }
    }
}

/// Cleans up one workload and records its context as it ends. The first error stays
/// the run's reason; a later cleanup failure is still said. Cleaning twice is harmless.
fn clean(
    workload: &mut Box<dyn Workload>,
    index: usize,
    doc: &mut RunDocument,
    outcome: &mut anyhow::Result<()>,
    display: &ProgressDisplay,
) {
    if let Err(e) = workload.cleanup() {
        match outcome {
            Ok(()) => *outcome = Err(e.into()),
            Err(_) => display.warn(&format!("{:#}", anyhow::Error::new(e))),
        }
    }
    doc.workloads[index].context = workload.context();
}

/// The record of a workload before it runs.
fn record_of(workload: &dyn Workload) -> WorkloadRecord {
    WorkloadRecord {
        kind: workload.kind().to_string(),
        target: workload.target(),
        params: workload.params(),
        context: workload.context(),
        items: Vec::new(),
        summary: Value::Null,
        series: None,
        alone_of: workload.alone_of(),
        measured_by: workload.measured_by(),
        warnings: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::read::ReadMode;
    use crate::workload::readdir::{ReaddirPlan, ReaddirWorkload};

    /// A measuring run decodes each of its workloads once, from its conclusion through
    /// the verb's judge to the report the user reads.
    #[test]
    fn a_run_decodes_each_workload_once_from_conclusion_to_report() {
        let dir = tempfile::tempdir().unwrap();
        for n in 0..4 {
            std::fs::write(dir.path().join(format!("f{n}")), vec![7u8; 256 << 10]).unwrap();
        }
        let plan = ReaddirPlan {
            folder: dir.path().into(),
            recursive: false,
            min_size_bytes: 1,
            read_mode: ReadMode::Flushed,
            block_size_bytes: 1 << 20,
        };
        let judged = std::rc::Rc::new(std::cell::Cell::new(0));
        let seen = std::rc::Rc::clone(&judged);
        let spec = RunSpec {
            verb: "readdir".into(),
            label: None,
            store: None,
            show_progress: false,
            schedule: Schedule::together(2, &[]),
            interval: DEFAULT_INTERVAL,
            judge: Some(Box::new(move |run| {
                // The judge is handed the concluded views: their summaries are there.
                seen.set(workload::profile_figures(run)?.len() + 1);
                Ok(Vec::new())
            })),
            start_at: None,
        };
        let before = workload::decodes();
        let mut finished = execute(
            spec,
            vec![
                Box::new(ReaddirWorkload::new(plan.clone())),
                Box::new(ReaddirWorkload::new(plan)),
            ],
        )
        .unwrap();
        assert!(finished.error.is_none(), "{:?}", finished.error);
        assert!(judged.get() > 0, "the judge was not asked");
        let run = finished.decoded();
        let shown = crate::report::render_run(
            &run,
            crate::report::Format::Table(crate::report::layout::Detail::Full),
        )
        .unwrap();
        let shown = String::from_utf8(shown).unwrap();
        assert!(shown.contains("readdir"), "{shown}");
        for record in &run.doc.workloads {
            assert_eq!(record.items.len(), 4, "every file read once");
            assert!(!record.summary.is_null(), "concluded");
        }
        assert_eq!(workload::decodes() - before, 2, "decodes of two workloads");
    }
}
