//! Figures made wrong on purpose, only in a build with the `catch` feature: the proof
//! that the tests named for a figure fail when it is 20% off (tests/catch.sh).
//!
//! `RATELAB_CATCH=FAMILY:FACTOR` multiplies every figure of that family at its source
//! by FACTOR; a build without the feature reads nothing and changes nothing.

/// A family of figures the tests are named for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    /// A file's write or read rate (disk, quick, image, side by side, task's disk).
    Storage,
    /// Block I/O's operations per second.
    Iops,
    /// Block I/O's completion latencies.
    Latency,
    /// The rate a network stream carried (ratelab's protocol, iperf3's, served).
    Net,
    /// A CPU kernel's loops per second.
    Cpu,
    /// A command's wall and CPU seconds under `scale`.
    Scale,
    /// A task step's rate.
    Task,
    /// A task's what-if: the whole task with one step made free.
    TaskWhatIf,
    /// `why`'s wall time charged to each step, its device's rate, and each process's
    /// seconds on a CPU, waiting for one and in each wait.
    Why,
    /// `why --what-if`: the wall of the changed run.
    WhyWhatIf,
}

impl Family {
    /// Its name in `RATELAB_CATCH`.
    pub fn name(self) -> &'static str {
        match self {
            Family::Storage => "storage",
            Family::Iops => "iops",
            Family::Latency => "latency",
            Family::Net => "net",
            Family::Cpu => "cpu",
            Family::Scale => "scale",
            Family::Task => "task",
            Family::TaskWhatIf => "task_what_if",
            Family::Why => "why",
            Family::WhyWhatIf => "why_what_if",
        }
    }
}

/// `value` as the build reports it: multiplied by the factor `RATELAB_CATCH` names for
/// `family` in a `catch` build, unchanged otherwise.
#[cfg(feature = "catch")]
pub fn skew(family: Family, value: f64) -> f64 {
    value * factor(family)
}

/// `value` as the build reports it: unchanged, as this build has no `catch` feature.
#[cfg(not(feature = "catch"))]
#[inline(always)]
pub fn skew(_family: Family, value: f64) -> f64 {
    value
}

/// `value`, a rate of a workload of `kind` read from its series, as [`skew`] reports
/// the family that kind measures.
pub fn skew_series_rate(kind: &str, value: f64) -> f64 {
    match kind {
        "disk" | "image" => skew(Family::Storage, value),
        "iops" => skew(Family::Iops, value),
        "net" => skew(Family::Net, value),
        _ => value,
    }
}

/// The factor `RATELAB_CATCH` names for `family`, 1 where it names another.
#[cfg(feature = "catch")]
fn factor(family: Family) -> f64 {
    static SET: std::sync::OnceLock<Option<(String, f64)>> = std::sync::OnceLock::new();
    let set = SET.get_or_init(|| {
        let text = std::env::var("RATELAB_CATCH").ok()?;
        let (name, factor) = text.split_once(':')?;
        Some((name.to_string(), factor.parse().ok()?))
    });
    match set {
        Some((name, factor)) if name == family.name() => *factor,
        _ => 1.0,
    }
}
