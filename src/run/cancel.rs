//! The stop flag handed to every worker: set by SIGINT or SIGTERM, or by the runner
//! when one workload fails. A second Ctrl-C ends the process at once.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use signal_hook::consts::{SIGINT, SIGTERM};

/// A shared stop flag.
#[derive(Debug, Clone, Default)]
pub struct Cancel {
    flag: Arc<AtomicBool>,
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
                Arc::clone(&cancel.flag),
            )?;
            signal_hook::flag::register(signal, Arc::clone(&cancel.flag))?;
        }
        Ok(cancel)
    }

    /// Asks every holder to stop.
    pub fn set(&self) {
        self.flag.store(true, Ordering::SeqCst);
    }

    /// Whether a stop was asked for.
    pub fn is_set(&self) -> bool {
        self.flag.load(Ordering::Relaxed)
    }
}
