//! Pure statistics over measured figures: summary statistics, rank tests, fitted laws,
//! knees, contention and the comparison of grouped samples. Nothing here knows a kind
//! or does I/O, so every rule can be tested with made-up numbers; what a kind's items
//! mean lives in its folder under `workload/`.

pub mod compare;
pub mod contention;
pub mod fits;
pub mod interference;
pub mod knees;
pub mod mann_whitney;
pub mod since;
pub mod stats;
