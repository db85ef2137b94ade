//! The server's test slots: at most `max_tests` tests run at once, whichever protocol
//! asked for them, and a slot is freed however its test ends.

use std::sync::atomic::{AtomicUsize, Ordering};

use super::State;

/// Frees a test slot when the test ends, however it ends.
pub(in crate::workload::net) struct Slot<'a>(&'a AtomicUsize);

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Why no test can start now, if none can.
pub(in crate::workload::net) fn busy(state: &State) -> Option<String> {
    let running = state.running.load(Ordering::SeqCst);
    (running >= state.config.max_tests).then(|| {
        format!(
            "{running} test{} running; this server runs {} at a time",
            if running == 1 { " is" } else { "s are" },
            state.config.max_tests
        )
    })
}

/// A test slot, if one is free.
pub(in crate::workload::net) fn take_slot(state: &State) -> Option<Slot<'_>> {
    state
        .running
        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
            (n < state.config.max_tests).then_some(n + 1)
        })
        .ok()
        .map(|_| Slot(&state.running))
}
