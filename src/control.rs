//! How a measuring loop is told to stop and what it counts as it goes: the cancel flag
//! (SIGINT, SIGTERM, a failed neighbour) and the byte and operation counters the
//! runner samples on its clock. Below the workloads and the storage core, which use
//! them, it imports neither.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use signal_hook::consts::{SIGINT, SIGTERM};

/// A shared stop flag.
#[derive(Debug, Clone, Default)]
pub struct Cancel {
    signalled: Arc<AtomicBool>,
    stopped: Arc<AtomicBool>,
}

impl Cancel {
    /// A flag that only the program sets.
    pub fn new() -> Cancel {
        Cancel::default()
    }

    /// A flag that SIGINT and SIGTERM set; a second signal exits with code 130
    /// without waiting for cleanup.
    pub fn on_signals() -> std::io::Result<Cancel> {
        let cancel = Cancel::new();
        for signal in [SIGINT, SIGTERM] {
            // Registered first, so it sees the flag as it was before this signal.
            signal_hook::flag::register_conditional_shutdown(
                signal,
                130,
                Arc::clone(&cancel.signalled),
            )?;
            signal_hook::flag::register(signal, Arc::clone(&cancel.signalled))?;
        }
        Ok(cancel)
    }

    /// Asks every holder to stop, for a reason other than a signal.
    pub fn stop(&self) {
        self.stopped.store(true, Ordering::SeqCst);
    }

    /// Whether a stop was asked for, by a signal or by the program.
    pub fn is_set(&self) -> bool {
        self.signalled.load(Ordering::Relaxed) || self.stopped.load(Ordering::Relaxed)
    }

    /// Whether SIGINT or SIGTERM arrived.
    pub fn interrupted(&self) -> bool {
        self.signalled.load(Ordering::Relaxed)
    }
}

/// Counters a workload bumps as it moves data; read by the runner on its clock.
#[derive(Debug, Default)]
pub struct Progress {
    bytes: AtomicU64,
    ops: AtomicU64,
}

impl Progress {
    /// Counts `bytes` moved by one completed operation.
    pub fn add(&self, bytes: u64) {
        self.bytes.fetch_add(bytes, Ordering::Relaxed);
        self.ops.fetch_add(1, Ordering::Relaxed);
    }

    /// Bytes moved so far.
    pub fn bytes(&self) -> u64 {
        self.bytes.load(Ordering::Relaxed)
    }

    /// Operations completed so far.
    pub fn ops(&self) -> u64 {
        self.ops.load(Ordering::Relaxed)
    }
}

/// What a measuring loop stops on and counts into, together.
#[derive(Clone, Copy)]
pub struct Controls<'a> {
    /// The run's cancel flag.
    pub cancel: &'a Cancel,
    /// The run's counters.
    pub progress: &'a Progress,
}
