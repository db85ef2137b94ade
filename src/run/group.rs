//! One group of workloads run at once: a thread each, released together by a barrier,
//! while this thread samples their counters on one clock, stores each finished stage,
//! shows progress, and stops the others when one fails.

use std::collections::HashMap;
use std::panic::AssertUnwindSafe;
use std::sync::mpsc::{RecvTimeoutError, Sender, channel};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::Cancel;
use super::progress::ProgressDisplay;
use super::sampler::Sampler;
use super::schedule::Member;
use crate::document::RunDocument;
use crate::store::Store;
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
    /// Bytes moved by earlier groups, for the progress bar.
    pub moved_before: u64,
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
        moved_before,
        interval,
    } = shared;
    let (events, received) = channel();
    let counters: HashMap<usize, Arc<Progress>> = members
        .iter()
        .map(|m| (m.workload, Arc::new(Progress::default())))
        .collect();
    let barrier = Barrier::new(members.len() + 1);
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
            let barrier = &barrier;
            scope.spawn(move || worker(member, workload.as_mut(), ctx, events, barrier));
        }
        drop(events);
        barrier.wait();
        let start = Instant::now();
        let mut sampler = Sampler::new(
            start,
            interval,
            members
                .iter()
                .map(|m| (m.workload, Arc::clone(&counters[&m.workload])))
                .collect(),
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
                    eprintln!("ratelab: warning: {text}");
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
            display.update(moved_before + moved, &status_line(&status));
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

/// One workload's thread: set up, wait for the common start and the member's delay,
/// run, and always report the end, also when the workload panics.
fn worker(
    member: Member,
    workload: &mut dyn Workload,
    ctx: Context,
    events: Sender<Event>,
    barrier: &Barrier,
) {
    let set_up = guarded(|| workload.setup(&ctx));
    // Every worker reaches the barrier, so one that failed to set up holds no one back.
    barrier.wait();
    let result = match set_up {
        Err(e) => Err(e),
        Ok(()) if !wait_out(member.delay, &ctx.cancel) => Err(workload::Error::Interrupted),
        Ok(()) => {
            let _ = events.send(Event::Started {
                workload: member.workload,
                at: Instant::now(),
            });
            guarded(|| workload.run(&ctx))
        }
    };
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
    let end = Instant::now() + delay;
    while Instant::now() < end {
        if cancel.is_set() {
            return false;
        }
        std::thread::sleep((end - Instant::now()).min(Duration::from_millis(10)));
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
