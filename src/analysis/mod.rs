//! Pure functions over measured items: statistics, flags and verdicts. Nothing here
//! does I/O, so every rule can be tested with made-up numbers.

pub mod compare;
pub mod contention;
pub mod disk;
pub mod fits;
pub mod knees;
pub mod mann_whitney;
pub mod since;
pub mod stats;
