//! The progress bar on stderr: hidden when stderr is not a terminal or with --quiet.
//! Warnings go through it, so they do not garble the bar.

use std::sync::atomic::{AtomicU64, Ordering};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::vocab::units::format_size;

/// A progress display for one run.
pub struct ProgressDisplay {
    bar: ProgressBar,
    /// Bytes the parts before this one moved, counted live as they ran.
    earlier_parts: AtomicU64,
}

impl ProgressDisplay {
    /// A bar for `total_bytes`, drawn only when `visible` and stderr is a terminal.
    pub fn new(total_bytes: u64, visible: bool) -> ProgressDisplay {
        let target = if visible {
            ProgressDrawTarget::stderr()
        } else {
            ProgressDrawTarget::hidden()
        };
        let bar = ProgressBar::with_draw_target(Some(total_bytes), target);
        bar.set_style(
            // The message is cut at the terminal's width: a wrapped line would be drawn
            // again below itself at every update.
            ProgressStyle::with_template(
                "{elapsed:>4} {prefix}[{bar:30}] {percent:>3}% {wide_msg}",
            )
            .expect("a valid progress template")
            .progress_chars("=> "),
        );
        ProgressDisplay {
            bar,
            earlier_parts: AtomicU64::new(0),
        }
    }

    /// Shows `bytes` moved by this part so far and what is running now (worked out
    /// only when shown).
    pub fn update(&self, bytes: u64, status: impl FnOnce() -> String) {
        if self.bar.is_hidden() {
            return;
        }
        let bytes = self.earlier_parts.load(Ordering::Relaxed) + bytes;
        self.bar.set_position(bytes);
        self.bar
            .set_message(format!("{} · {} moved", status(), format_size(bytes)));
    }

    /// Shows which part of a run of several runs now, and how many there are.
    pub fn part(&self, index: usize, parts: usize, names: &str) {
        self.earlier_parts
            .store(self.bar.position(), Ordering::Relaxed);
        if parts > 1 {
            self.bar
                .set_prefix(format!("part {} of {parts}, {names} ", index + 1));
        }
    }

    /// Prints a warning on stderr above the bar.
    pub fn warn(&self, text: &str) {
        self.bar
            .suspend(|| crate::report::terminal::say("ratelab: warning: ", text));
    }

    /// Removes the bar before results are printed.
    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}
