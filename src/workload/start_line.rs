//! The start line of threads that must begin at once: each arrives when it is set up and
//! waits; the opener waits for them all and lets them go together with one start time,
//! or the start is called off and every thread goes without one, so none waits forever
//! for one that will not come. The runner starts a group's workloads through it, and the
//! cpu tests their threads.

use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::Instant;

/// A start line, opened or called off once.
#[derive(Debug, Default)]
pub struct Gate {
    state: Mutex<State>,
    changed: Condvar,
}

#[derive(Debug, Default)]
struct State {
    arrived: usize,
    /// `None` while the gate is shut.
    outcome: Option<Outcome>,
}

#[derive(Debug, Clone, Copy)]
enum Outcome {
    Opened(Instant),
    CalledOff,
}

impl Outcome {
    fn start(self) -> Option<Instant> {
        match self {
            Outcome::Opened(start) => Some(start),
            Outcome::CalledOff => None,
        }
    }
}

impl Gate {
    /// A shut gate.
    pub fn new() -> Gate {
        Gate::default()
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A thread that panicked while holding the lock left the counts whole.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A thread is set up: waits at the gate and gets the start, or `None` when the
    /// start is called off (also when it was called off before this thread came).
    pub fn arrive(&self) -> Option<Instant> {
        let mut state = self.lock();
        state.arrived += 1;
        self.changed.notify_all();
        loop {
            if let Some(outcome) = state.outcome {
                return outcome.start();
            }
            state = self.changed.wait(state).unwrap_or_else(|p| p.into_inner());
        }
    }

    /// Waits until `threads` have arrived, then takes the start just before it lets them
    /// go and returns it; `None` as soon as the start is called off instead.
    pub fn open(&self, threads: usize) -> Option<Instant> {
        self.open_at(threads, None, &|| false)
    }

    /// As [`Gate::open`], but once every thread is set up, holds the start until `at` on
    /// the wall clock (a fleet's agreed instant), or until `stop` says so.
    pub fn open_at(
        &self,
        threads: usize,
        at: Option<std::time::SystemTime>,
        stop: &dyn Fn() -> bool,
    ) -> Option<Instant> {
        let mut state = self.lock();
        while state.arrived < threads && state.outcome.is_none() {
            state = self.changed.wait(state).unwrap_or_else(|p| p.into_inner());
        }
        if let Some(at) = at {
            drop(state);
            while let Ok(left) = at.duration_since(std::time::SystemTime::now()) {
                if stop() {
                    break;
                }
                std::thread::sleep(left.min(std::time::Duration::from_millis(10)));
            }
            state = self.lock();
        }
        if state.outcome.is_none() {
            state.outcome = Some(Outcome::Opened(Instant::now()));
            self.changed.notify_all();
        }
        state.outcome.and_then(Outcome::start)
    }

    /// Calls the start off: every thread waiting, or still to come, goes without one. A
    /// gate already open stays open.
    pub fn abort(&self) {
        let mut state = self.lock();
        state.outcome.get_or_insert(Outcome::CalledOff);
        self.changed.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_opener_lets_every_arrival_go_with_one_start() {
        let gate = Gate::new();
        let (opened, starts) = std::thread::scope(|scope| {
            let threads: Vec<_> = (0..3).map(|_| scope.spawn(|| gate.arrive())).collect();
            let opened = gate.open(3);
            let starts: Vec<_> = threads.into_iter().map(|t| t.join().unwrap()).collect();
            (opened, starts)
        });
        assert!(opened.is_some());
        assert_eq!(starts, vec![opened; 3]);
        // One that comes late is let through with the same start.
        assert_eq!(gate.arrive(), opened);
    }

    #[test]
    fn an_abort_lets_every_thread_go_without_a_start() {
        let gate = Gate::new();
        let (opened, starts) = std::thread::scope(|scope| {
            let threads: Vec<_> = (0..2).map(|_| scope.spawn(|| gate.arrive())).collect();
            // The opener waits for three, one of which never comes.
            let opener = scope.spawn(|| gate.open(3));
            gate.abort();
            let starts: Vec<_> = threads.into_iter().map(|t| t.join().unwrap()).collect();
            (opener.join().unwrap(), starts)
        });
        assert_eq!(opened, None);
        assert_eq!(starts, vec![None, None]);
        assert_eq!(gate.arrive(), None);
        assert_eq!(gate.open(0), None);
    }
}
