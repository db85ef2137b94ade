//! The empty test: the loop with no work, timed and corrected like every test, so the
//! correction itself can be checked (it must come out near zero).

use super::{Kernel, Runner};

/// The test with no work.
pub struct Empty;

struct EmptyRunner;

impl Kernel for Empty {
    fn name(&self) -> &'static str {
        "empty"
    }

    fn loop_is(&self) -> &'static str {
        "nothing: the loop alone, to check the empty-loop correction"
    }

    fn unavailable(&self) -> Option<String> {
        None
    }

    fn runner(&self) -> Box<dyn Runner> {
        Box::new(EmptyRunner)
    }

    fn has_work(&self) -> bool {
        false
    }
}

impl Runner for EmptyRunner {
    fn work(&mut self, loops: u64) -> u64 {
        empty_loop(loops)
    }

    fn empty(&mut self, loops: u64) -> u64 {
        empty_loop(loops)
    }

    fn isa(&self) -> &'static str {
        "none"
    }
}

/// A counted loop whose every pass the compiler must keep.
#[inline(never)]
pub fn empty_loop(loops: u64) -> u64 {
    let mut count = 0u64;
    for _ in 0..loops {
        count = std::hint::black_box(count + 1);
    }
    count
}
