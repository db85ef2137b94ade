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

/// Runs `workloads` one after another and returns the finished run document. An
/// error or interrupt after the run started leaves it stored as incomplete.
pub fn execute(
    mut spec: RunSpec,
    mut workloads: Vec<Box<dyn Workload>>,
) -> anyhow::Result<RunDocument> {
    let cancel = Cancel::on_signals().context("cannot install signal handlers")?;
    for workload in &mut workloads {
        workload.prepare()?;
    }
    if cancel.is_set() {
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

    let mut cleanup_error = None;
    for (index, workload) in workloads.iter_mut().enumerate() {
        if let Err(e) = workload.cleanup() {
            cleanup_error.get_or_insert(e);
        }
        doc.workloads[index].context = workload.context();
    }
    if outcome.is_ok()
        && let Some(e) = cleanup_error
    {
        outcome = Err(e.into());
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
    if let Some(store) = spec.store.as_mut() {
        store.finish_run(&doc)?;
    }
    match outcome {
        Ok(()) => Ok(doc),
        Err(e) => Err(match doc.run_id {
            Some(id) => e.context(format!("run {id} stored as incomplete")),
            None => e,
        }),
    }
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
                        cancel.set();
                        store_error.get_or_insert(e);
                    }
                }
                Ok(Event::Status { text, .. }) => status = text,
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => break,
            }
            display.update(moved_before + progress.bytes(), &status);
        }
        worker.join().expect("a workload thread panicked")
    });
    // Whatever was measured before an error or interrupt is kept.
    let flushed = flush(&mut pending, &mut store);
    if let Some(e) = store_error {
        return Err(e);
    }
    flushed?;
    Ok(result?)
}
