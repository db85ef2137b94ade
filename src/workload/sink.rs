//! The path from a running workload to the runner: items, stage ends and status
//! lines as events on a channel, and byte counters that the runner samples.

use std::sync::Arc;
use std::sync::mpsc::Sender;
use std::time::Instant;

use serde::Serialize;
use serde_json::Value;

use crate::control::Progress;
use crate::error::Error;

/// Something a workload tells the runner.
#[derive(Debug)]
pub enum Event {
    /// A measured item, already serialised.
    Item {
        /// Index of the workload.
        workload: usize,
        /// The item as JSON.
        item: Value,
    },
    /// A stage (a pass's writes, a read mode) ended: what came before may be stored.
    StageDone {
        /// Index of the workload.
        workload: usize,
        /// The stage that ended.
        stage: String,
        /// When.
        at: Instant,
    },
    /// What the workload is doing now, for the progress display.
    Status {
        /// Index of the workload.
        workload: usize,
        /// The status in words.
        text: String,
    },
    /// A problem that does not stop the workload (an unreadable file).
    Warning {
        /// Index of the workload.
        workload: usize,
        /// The problem in words.
        text: String,
    },
    /// The workload began measuring, after its start delay (sent by the runner).
    Started {
        /// Index of the workload.
        workload: usize,
        /// When.
        at: Instant,
    },
    /// The workload's run returned (sent by the runner).
    Finished {
        /// Index of the workload.
        workload: usize,
        /// When.
        at: Instant,
        /// How it ended.
        result: Result<(), Error>,
    },
}

/// A workload's handle on the runner: events out, counters shared.
#[derive(Clone)]
pub struct Sink {
    /// Index of the workload.
    workload: usize,
    events: Sender<Event>,
    progress: Arc<Progress>,
}

impl Sink {
    /// A sink for workload number `workload`.
    pub fn new(workload: usize, events: Sender<Event>, progress: Arc<Progress>) -> Sink {
        Sink {
            workload,
            events,
            progress,
        }
    }

    /// A sink for workload `workload` of the same run, whose items this workload
    /// measures (an image's places), sharing this one's counters.
    pub fn for_record(&self, workload: usize) -> Sink {
        Sink {
            workload,
            ..self.clone()
        }
    }

    /// The byte counters the runner samples.
    pub fn progress(&self) -> &Progress {
        &self.progress
    }

    /// Records one measured item.
    pub fn item<T: Serialize>(&self, item: &T) {
        let item = serde_json::to_value(item).expect("items serialise to JSON");
        // The runner outlives every workload; a closed channel only means it is gone.
        let _ = self.events.send(Event::Item {
            workload: self.workload,
            item,
        });
    }

    /// Marks the end of a stage, so the runner can store what came before.
    pub fn stage_done(&self, stage: impl Into<String>) {
        let _ = self.events.send(Event::StageDone {
            workload: self.workload,
            stage: stage.into(),
            at: Instant::now(),
        });
    }

    /// Reports a problem that does not stop the workload.
    pub fn warning(&self, text: impl Into<String>) {
        let _ = self.events.send(Event::Warning {
            workload: self.workload,
            text: text.into(),
        });
    }

    /// Says the workload began measuring at `at`, after its start delay (the runner's
    /// worker says it).
    pub fn started(&self, at: Instant) {
        let _ = self.events.send(Event::Started {
            workload: self.workload,
            at,
        });
    }

    /// Says the workload's run returned at `at`, and how (the runner's worker says it).
    pub fn finished(&self, at: Instant, result: Result<(), Error>) {
        let _ = self.events.send(Event::Finished {
            workload: self.workload,
            at,
            result,
        });
    }

    /// Says what the workload is doing now.
    pub fn status(&self, text: impl Into<String>) {
        let _ = self.events.send(Event::Status {
            workload: self.workload,
            text: text.into(),
        });
    }
}
