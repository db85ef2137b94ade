//! One group of workloads run at once: a thread each, set up first, then released
//! together through a gate that also fixes the group's clock, while this thread samples
//! their counters on that clock, stores each finished stage, shows progress, and stops
//! the others when one fails.

use std::collections::HashMap;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::mpsc::{RecvTimeoutError, Sender, channel};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::progress::ProgressDisplay;
use super::sampler::Sampler;
use super::schedule::Member;
use crate::document::RunDocument;
use crate::store::Store;
use crate::workload::Cancel;
use crate::workload::gate::Gate;
use crate::workload::{self, Context, Event, Progress, Sink, Workload};

/// Longest wait between two looks at the progress display.
const REDRAW: Duration = Duration::from_millis(100);

/// What the group shares with the rest of the run.
pub struct Shared<'a> {
    /// Stop flag.
    pub cancel: &'a Cancel,
    /// The run document, which receives items, warnings and series.
    pub doc: &'a mut RunDocument,
    /// The results database, if the run is stored.
    pub store: Option<&'a mut Store>,
    /// The progress bar.
    pub display: &'a ProgressDisplay,
    /// Sampling interval.
    pub interval: Duration,
}

/// Runs the members of one group at once; returns how the group ended: the first real
/// error (a workload's or the store's), or an interrupt.
pub fn run_group(
    members: &[Member],
    workloads: &mut [Box<dyn Workload>],
    shared: Shared,
) -> anyhow::Result<()> {
    let Shared {
        cancel,
        doc,
        mut store,
        display,
        interval,
    } = shared;
    let (events, received) = channel();
    let mut chosen: Vec<(Member, &mut Box<dyn Workload>)> = workloads
        .iter_mut()
        .enumerate()
        .filter_map(|(index, w)| {
            members
                .iter()
                .find(|m| m.workload == index)
                .map(|m| (*m, w))
        })
        .collect();
    let counters: HashMap<usize, Arc<Progress>> = chosen
        .iter()
        .map(|(m, _)| (m.workload, Arc::new(Progress::default())))
        .collect();
    let gate = Gate::new();

    let mut pending: HashMap<usize, Vec<Value>> = HashMap::new();
    let mut stored: HashMap<usize, usize> = HashMap::new();
    let mut status: HashMap<usize, String> = HashMap::new();
    let mut first_error: Option<anyhow::Error> = None;
    let mut interrupted = false;
    let run_id = doc.run_id;
    let mut flush = |workload: usize, pending: &mut Vec<Value>, store: &mut Option<&mut Store>| {
        let first = stored.entry(workload).or_insert(0);
        if let (Some(store), Some(run_id)) = (store.as_deref_mut(), run_id)
            && !pending.is_empty()
        {
            store.append_items(run_id, workload, *first, pending)?;
        }
        *first += pending.len();
        pending.clear();
        anyhow::Ok(())
    };

    let series = std::thread::scope(|scope| {
        let mut spawned = 0;
        for (member, workload) in chosen.drain(..) {
            let ctx = Context {
                cancel: cancel.clone(),
                sink: Sink::new(
                    member.workload,
                    events.clone(),
                    Arc::clone(&counters[&member.workload]),
                ),
            };
            let events = events.clone();
            let gate = &gate;
            let thread = std::thread::Builder::new()
                .name(format!("ratelab-{}", member.workload + 1))
                .spawn_scoped(scope, move || {
                    worker(member, workload.as_mut(), ctx, events, gate)
                });
            match thread {
                Ok(_) => spawned += 1,
                Err(e) => {
                    cancel.stop();
                    first_error.get_or_insert(anyhow::anyhow!(
                        "cannot start a thread for workload {}: {e}",
                        member.workload + 1
                    ));
                }
            }
        }
        drop(events);
        if first_error.is_some() {
            gate.abort();
        }
        let start = gate.open(spawned).unwrap_or_else(Instant::now);
        let mut sampler = Sampler::new(
            start,
            interval,
            counters.iter().map(|(&w, c)| (w, Arc::clone(c))).collect(),
        );
        loop {
            let now = Instant::now();
            if now >= sampler.next_tick() {
                sampler.sample(now);
            }
            let wait = sampler
                .next_tick()
                .saturating_duration_since(now)
                .min(REDRAW);
            match received.recv_timeout(wait) {
                Ok(Event::Item { workload, item }) => {
                    doc.workloads[workload].items.push(item.clone());
                    pending.entry(workload).or_default().push(item);
                }
                Ok(Event::StageDone { workload, .. }) => {
                    let batch = pending.entry(workload).or_default();
                    if let Err(e) = flush(workload, batch, &mut store) {
                        // Stop measuring what can no longer be stored.
                        cancel.stop();
                        first_error.get_or_insert(e);
                    }
                }
                Ok(Event::Status { workload, text }) => {
                    status.insert(workload, text);
                }
                Ok(Event::Warning { workload, text }) => {
                    display.warn(&text);
                    doc.workloads[workload].warnings.push(text);
                }
                Ok(Event::Started { workload, at }) => sampler.started(workload, at),
                Ok(Event::Finished {
                    workload,
                    at,
                    result,
                }) => {
                    sampler.finished(workload, at);
                    match result {
                        Ok(()) => {}
                        Err(workload::Error::Interrupted) => interrupted = true,
                        Err(e) => {
                            // One failure ends the group: the others stop cleanly.
                            cancel.stop();
                            first_error.get_or_insert(anyhow::Error::new(e).context(format!(
                                "{} workload {} on {}",
                                doc.workloads[workload].kind,
                                workload + 1,
                                doc.workloads[workload].target
                            )));
                        }
                    }
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => break,
            }
            let moved: u64 = counters.values().map(|c| c.bytes()).sum();
            display.update(moved, || status_line(&status));
        }
        sampler.into_series()
    });

    // Whatever was measured before an error or interrupt is kept.
    for (workload, mut batch) in pending {
        if let Err(e) = flush(workload, &mut batch, &mut store) {
            first_error.get_or_insert(e);
        }
    }
    for (workload, series) in series {
        doc.workloads[workload].series = Some(series);
    }
    match first_error {
        Some(e) => Err(e),
        None if interrupted => Err(workload::Error::Interrupted.into()),
        None => Ok(()),
    }
}

/// One workload's thread: set up, wait at the gate and for the member's delay, run,
/// and always report the end, also when any step panics.
fn worker(
    member: Member,
    workload: &mut dyn Workload,
    ctx: Context,
    events: Sender<Event>,
    gate: &Gate,
) {
    let result = guarded(|| {
        if let Err(e) = workload.setup(&ctx) {
            // Others need not finish setting up for a run that will not happen.
            ctx.cancel.stop();
            gate.arrive();
            return Err(e);
        }
        if gate.arrive().is_none() || !wait_out(member.delay, &ctx.cancel) {
            return Err(workload::Error::Interrupted);
        }
        let _ = events.send(Event::Started {
            workload: member.workload,
            at: Instant::now(),
        });
        workload.run(&ctx)
    });
    let _ = events.send(Event::Finished {
        workload: member.workload,
        at: Instant::now(),
        result,
    });
}

/// Runs `step`, turning a panic into an error: a bug, not the user's doing, and the run
/// must still end with cleanup and storage.
fn guarded(step: impl FnOnce() -> Result<(), workload::Error>) -> Result<(), workload::Error> {
    std::panic::catch_unwind(AssertUnwindSafe(step)).unwrap_or_else(|panic| {
        let what = panic
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_default();
        Err(workload::Error::Unsupported(format!(
            "internal error, please report it: {what}"
        )))
    })
}

/// Sleeps for `delay` unless a stop comes first; true when the delay ran out.
fn wait_out(delay: Duration, cancel: &Cancel) -> bool {
    let started = Instant::now();
    while started.elapsed() < delay {
        if cancel.is_set() {
            return false;
        }
        std::thread::sleep(
            delay
                .saturating_sub(started.elapsed())
                .min(Duration::from_millis(10)),
        );
    }
    !cancel.is_set()
}

/// What each running workload is doing, in one line.
fn status_line(status: &HashMap<usize, String>) -> String {
    let mut parts: Vec<(&usize, &String)> = status.iter().collect();
    parts.sort();
    match parts.as_slice() {
        [(_, only)] => only.to_string(),
        _ => parts
            .iter()
            .map(|(workload, text)| format!("{}: {text}", *workload + 1))
            .collect::<Vec<_>>()
            .join(" | "),
    }
}
