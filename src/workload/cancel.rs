//! The stop flag handed to every worker: set by SIGINT or SIGTERM, or by the runner
//! when the run cannot go on (the results database failed). A second signal ends the
//! process at once; a stop the runner asked for does not count as the first signal.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

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
