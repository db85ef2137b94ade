//! The runner: prepares every workload before anything is created, runs them, stores
//! items as each stage ends, cleans up whatever happens, and finishes the document.

use std::sync::Arc;
use std::sync::mpsc::{RecvTimeoutError, channel};
use std::time::Duration;

use anyhow::Context as _;
use serde_json::Value;

use super::Cancel;
use super::progress::ProgressDisplay;
use crate::document::{RunDocument, RunStatus, WorkloadRecord, now_rfc3339};
use crate::exit::Interrupted;
use crate::store::Store;
use crate::workload::{self, Context, Event, Progress, Sink, Workload};

/// How often the runner wakes to redraw progress when no event arrives.
const TICK: Duration = Duration::from_millis(100);

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
}

/// A run that started: its document, and the error or interrupt that stopped it early.
pub struct Finished {
    /// The run as stored (complete, or incomplete with the reason).
    pub doc: RunDocument,
    /// Why it stopped early; `None` when it completed.
    pub error: Option<anyhow::Error>,
}

/// Runs `workloads` one after another. Errors before anything is created come back as
/// `Err`; once the run has started it always comes back as [`Finished`], stored, with
/// what stopped it.
pub fn execute(
    mut spec: RunSpec,
    mut workloads: Vec<Box<dyn Workload>>,
) -> anyhow::Result<Finished> {
    let cancel = Cancel::on_signals().context("cannot install signal handlers")?;
    for workload in &mut workloads {
        workload.prepare()?;
    }
    if cancel.interrupted() {
        return Err(Interrupted.into());
    }
    let mut doc = RunDocument {
        run_id: None,
        status: RunStatus::Incomplete,
        incomplete_reason: None,
        ratelab_version: env!("CARGO_PKG_VERSION").to_string(),
        verb: spec.verb.clone(),
        label: spec.label.clone(),
        started_at: now_rfc3339(),
        finished_at: None,
        machine: crate::platform::probe_machine(),
        workloads: workloads.iter().map(|w| record_of(w.as_ref())).collect(),
        contention: None,
        verdicts: Vec::new(),
    };
    if let Some(store) = spec.store.as_mut() {
        doc.run_id = Some(store.begin_run(&doc)?);
    }

    let display = ProgressDisplay::new(
        workloads.iter().map(|w| w.planned_bytes()).sum(),
        spec.show_progress,
    );
    let mut outcome: anyhow::Result<()> = Ok(());
    let mut moved_before = 0;
    for (index, workload) in workloads.iter_mut().enumerate() {
        if outcome.is_err() {
            break;
        }
        outcome = drive(
            index,
            workload.as_mut(),
            &cancel,
            &mut doc,
            spec.store.as_mut(),
            &display,
            moved_before,
        );
        moved_before += doc.workloads[index]
            .items
            .iter()
            .filter_map(|i| i.get("bytes").and_then(Value::as_u64))
            .sum::<u64>();
    }
    display.finish();

    for (index, workload) in workloads.iter_mut().enumerate() {
        if let Err(e) = workload.cleanup() {
            // The first error stays the run's reason; a later cleanup failure is still said.
            match outcome {
                Ok(()) => outcome = Err(e.into()),
                Err(_) => eprintln!("ratelab: warning: {:#}", anyhow::Error::new(e)),
            }
        }
        doc.workloads[index].context = workload.context();
    }
    // A signal that came during the last sync or the cleanup still ends the run.
    if outcome.is_ok() && cancel.interrupted() {
        outcome = Err(Interrupted.into());
    }

    for (index, record) in doc.workloads.iter_mut().enumerate() {
        if let Some(kind) = workload::kind(&record.kind) {
            record.summary = kind.summarize(record);
            doc.verdicts.extend(kind.verdicts(index, record));
        }
    }
    doc.finished_at = Some(now_rfc3339());
    match &outcome {
        Ok(()) => doc.status = RunStatus::Complete,
        Err(e) => {
            doc.status = RunStatus::Incomplete;
            doc.incomplete_reason = Some(
                if crate::exit::code_for(e) == crate::exit::Exit::Interrupted {
                    "interrupted".to_string()
                } else {
                    format!("error: {e:#}")
                },
            );
        }
    }
    let stored = match spec.store.as_mut() {
        Some(store) => store.finish_run(&doc),
        None => Ok(()),
    };
    let error = match (outcome, stored) {
        (Ok(()), Ok(())) => None,
        (Ok(()), Err(e)) => Some(e.into()),
        (Err(e), stored) => {
            if let Err(store_error) = stored {
                eprintln!("ratelab: warning: {:#}", anyhow::Error::new(store_error));
            }
            Some(match doc.run_id {
                Some(id) => e.context(format!("run {id} stored as incomplete")),
                None => e,
            })
        }
    };
    Ok(Finished { doc, error })
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
    }
}

/// Runs one workload on its own thread while this one collects its events, stores
/// each finished stage and draws progress.
fn drive(
    index: usize,
    workload: &mut dyn Workload,
    cancel: &Cancel,
    doc: &mut RunDocument,
    mut store: Option<&mut Store>,
    display: &ProgressDisplay,
    moved_before: u64,
) -> anyhow::Result<()> {
    let (events, received) = channel();
    let progress = Arc::new(Progress::default());
    let ctx = Context {
        cancel: cancel.clone(),
        sink: Sink::new(index, events, Arc::clone(&progress)),
    };
    let run_id = doc.run_id;
    let mut pending: Vec<Value> = Vec::new();
    let mut stored = 0;
    let mut store_error: Option<anyhow::Error> = None;
    let mut status = String::from("starting");
    let mut flush =
        |pending: &mut Vec<Value>, store: &mut Option<&mut Store>| -> anyhow::Result<()> {
            if let (Some(store), Some(run_id)) = (store.as_deref_mut(), run_id)
                && !pending.is_empty()
            {
                store.append_items(run_id, index, stored, pending)?;
            }
            stored += pending.len();
            pending.clear();
            Ok(())
        };
    let result = std::thread::scope(|scope| {
        let worker = scope.spawn(move || workload.run(&ctx));
        loop {
            match received.recv_timeout(TICK) {
                Ok(Event::Item { item, .. }) => {
                    doc.workloads[index].items.push(item.clone());
                    pending.push(item);
                }
                Ok(Event::StageDone { .. }) => {
                    if let Err(e) = flush(&mut pending, &mut store) {
                        // Stop measuring what can no longer be stored.
                        cancel.stop();
                        store_error.get_or_insert(e);
                    }
                }
                Ok(Event::Status { text, .. }) => status = text,
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => break,
            }
            display.update(moved_before + progress.bytes(), &status);
        }
        worker.join().unwrap_or_else(|panic| {
            // A bug, not the user's doing; the run still ends with cleanup and storage.
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            Err(workload::Error::Unsupported(format!(
                "internal error, please report it: {what}"
            )))
        })
    });
    // Whatever was measured before an error or interrupt is kept. The workload's own
    // error comes first; a store error is the outcome only when the workload succeeded.
    let flushed = flush(&mut pending, &mut store);
    if let Some(e) = store_error {
        return Err(e);
    }
    result?;
    flushed
}
