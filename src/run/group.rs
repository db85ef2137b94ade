//! One group of workloads run at once: a thread each, set up first, then released
//! together through a gate that also fixes the group's clock, while this thread samples
//! their counters on that clock, stores each finished stage, shows progress, and stops
//! the others when one fails.

use std::collections::HashMap;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::progress::ProgressDisplay;
use super::sampler::Sampler;
use super::schedule::Member;
use crate::control::Cancel;
use crate::control::Progress;
use crate::db::Store;
use crate::document::{RunDocument, Series};
use crate::error::Error;
use crate::workload::start_line::Gate;
use crate::workload::{Context, Event, Sink, Workload};

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
    /// The wall-clock moment the group starts once set up (a fleet's agreed instant).
    pub start_at: Option<std::time::SystemTime>,
}

/// Runs the members of one group at once; returns how the group ended: the first real
/// error (a workload's or the store's), or an interrupt.
pub fn run_group(
    members: &[Member],
    workloads: &mut [Box<dyn Workload>],
    shared: Shared,
) -> anyhow::Result<()> {
    let interval = shared.interval;
    let start_at = shared.start_at;
    let chosen: Vec<(Member, &mut Box<dyn Workload>)> = workloads
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
    let mut ledger = Ledger::new(shared);
    let (events, received) = channel();
    let series = std::thread::scope(|scope| {
        let mut spawned = 0;
        for (member, workload) in chosen {
            let sink = Sink::new(
                member.workload,
                events.clone(),
                Arc::clone(&counters[&member.workload]),
            );
            match spawn(scope, member, workload, sink, ledger.cancel, &gate) {
                Ok(()) => spawned += 1,
                Err(e) => {
                    ledger.fail(anyhow::anyhow!(
                        "cannot start a thread for workload {}: {e}",
                        member.workload + 1
                    ));
                    gate.abort();
                }
            }
        }
        // The workers hold the only senders left: the channel closes when all have ended.
        drop(events);
        let start = gate
            .open_at(spawned, start_at, &|| ledger.cancel.is_set())
            .unwrap_or_else(Instant::now);
        let mut sampler = Sampler::new(
            start,
            interval,
            counters.iter().map(|(&w, c)| (w, Arc::clone(c))).collect(),
        );
        ledger.follow(&received, &mut sampler, &counters);
        sampler.into_series()
    });
    ledger.close(series)
}

/// Starts one workload's thread in `scope`.
fn spawn<'scope>(
    scope: &'scope std::thread::Scope<'scope, '_>,
    member: Member,
    workload: &'scope mut Box<dyn Workload>,
    sink: Sink,
    cancel: &Cancel,
    gate: &'scope Gate,
) -> std::io::Result<()> {
    let ctx = Context {
        cancel: cancel.clone(),
        sink,
    };
    std::thread::Builder::new()
        .name(format!("ratelab-{}", member.workload + 1))
        .spawn_scoped(scope, move || worker(member, workload.as_mut(), ctx, gate))
        .map(|_| ())
}

/// What the runner's thread keeps while a group runs: the items each workload measured
/// and has yet to store, what each is doing, and how the group is going.
struct Ledger<'a> {
    cancel: &'a Cancel,
    doc: &'a mut RunDocument,
    store: Option<&'a mut Store>,
    display: &'a ProgressDisplay,
    /// Items measured since the workload's last stage, not yet stored.
    pending: HashMap<usize, Vec<Value>>,
    /// Items stored so far, per workload: the sequence number of the next.
    stored: HashMap<usize, usize>,
    /// What each workload says it is doing.
    status: HashMap<usize, String>,
    /// The first error, which ends the group and the run.
    first_error: Option<anyhow::Error>,
    /// Whether a workload stopped for a signal.
    interrupted: bool,
}

impl<'a> Ledger<'a> {
    fn new(shared: Shared<'a>) -> Ledger<'a> {
        Ledger {
            cancel: shared.cancel,
            doc: shared.doc,
            store: shared.store,
            display: shared.display,
            pending: HashMap::new(),
            stored: HashMap::new(),
            status: HashMap::new(),
            first_error: None,
            interrupted: false,
        }
    }

    /// Takes the workloads' events and samples their counters on the group's clock until
    /// every workload has ended, redrawing the progress between.
    fn follow(
        &mut self,
        events: &Receiver<Event>,
        sampler: &mut Sampler,
        counters: &HashMap<usize, Arc<Progress>>,
    ) {
        loop {
            let now = Instant::now();
            if now >= sampler.next_tick() {
                sampler.sample(now);
            }
            let wait = sampler
                .next_tick()
                .saturating_duration_since(now)
                .min(REDRAW);
            match events.recv_timeout(wait) {
                Ok(event) => self.record(event, sampler),
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => break,
            }
            let moved: u64 = counters.values().map(|c| c.bytes()).sum();
            self.display.update(moved, || status_line(&self.status));
        }
    }

    /// One event from a workload.
    fn record(&mut self, event: Event, sampler: &mut Sampler) {
        match event {
            Event::Item { workload, item } => {
                self.doc.workloads[workload].items.push(item.clone());
                self.pending.entry(workload).or_default().push(item);
            }
            Event::StageDone {
                workload,
                stage,
                at,
            } => {
                sampler.stage_done(workload, at, stage);
                if let Err(e) = self.flush(workload) {
                    // Stop measuring what can no longer be stored.
                    self.fail(e);
                }
            }
            Event::Status { workload, text } => {
                self.status.insert(workload, text);
            }
            Event::Warning { workload, text } => {
                self.display.warn(&text);
                self.doc.workloads[workload].warnings.push(text);
            }
            Event::Started { workload, at } => sampler.started(workload, at),
            Event::Finished {
                workload,
                at,
                result,
            } => {
                sampler.finished(workload, at);
                self.finished(workload, result);
            }
        }
    }

    /// A workload's run returned: an error ends the group, and the others stop cleanly.
    fn finished(&mut self, workload: usize, result: Result<(), Error>) {
        match result {
            Ok(()) => {}
            Err(Error::Interrupted) => self.interrupted = true,
            Err(e) => {
                let record = &self.doc.workloads[workload];
                let what = format!(
                    "{} workload {} on {}",
                    record.kind,
                    workload + 1,
                    record.target
                );
                self.fail(anyhow::Error::new(e).context(what));
            }
        }
    }

    /// Stops the group; the first error stays its reason.
    fn fail(&mut self, error: anyhow::Error) {
        self.cancel.stop();
        self.first_error.get_or_insert(error);
    }

    /// Stores the items `workload` measured since its last stage, in one transaction.
    fn flush(&mut self, workload: usize) -> anyhow::Result<()> {
        let pending = self.pending.entry(workload).or_default();
        let first = self.stored.entry(workload).or_insert(0);
        if let (Some(store), Some(run_id)) = (self.store.as_deref_mut(), self.doc.run_id)
            && !pending.is_empty()
        {
            store.append_items(run_id, workload, *first, pending)?;
        }
        *first += pending.len();
        pending.clear();
        Ok(())
    }

    /// Ends the group: whatever was measured before an error or interrupt is stored, the
    /// series go into the document, and the group's outcome is said.
    fn close(mut self, series: Vec<(usize, Series)>) -> anyhow::Result<()> {
        let workloads: Vec<usize> = self.pending.keys().copied().collect();
        for workload in workloads {
            if let Err(e) = self.flush(workload) {
                self.first_error.get_or_insert(e);
            }
        }
        for (workload, series) in series {
            self.doc.workloads[workload].series = Some(series);
        }
        match self.first_error {
            Some(e) => Err(e),
            None if self.interrupted => Err(Error::Interrupted.into()),
            None => Ok(()),
        }
    }
}

/// One workload's thread: set up, wait at the gate and for the member's delay, run,
/// and always report the end, also when any step panics.
fn worker(member: Member, workload: &mut dyn Workload, ctx: Context, gate: &Gate) {
    let result = guarded(|| {
        if let Err(e) = workload.setup(&ctx) {
            // Others need not finish setting up for a run that will not happen.
            ctx.cancel.stop();
            gate.arrive();
            return Err(e);
        }
        if gate.arrive().is_none() || !wait_out(member.delay, &ctx.cancel) {
            return Err(Error::Interrupted);
        }
        ctx.sink.started(Instant::now());
        workload.run(&ctx)
    });
    ctx.sink.finished(Instant::now(), result);
}

/// Runs `step`, turning a panic into an error: a bug, not the user's doing, and the run
/// must still end with cleanup and storage.
fn guarded(step: impl FnOnce() -> Result<(), Error>) -> Result<(), Error> {
    std::panic::catch_unwind(AssertUnwindSafe(step)).unwrap_or_else(|panic| {
        let what = panic
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_default();
        Err(Error::Unsupported(format!(
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
