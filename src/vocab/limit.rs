//! The physical limit a workload's figures were checked against, as reports list it.

/// A link's limit in words: the figure and where it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkLimit {
    /// The limit, scaled for people (`2.00 GB/s`, `9.41 Gbit/s`), or `unknown`.
    pub limit: String,
    /// Where it came from (`data rate of PCIe 3.0 x4`).
    pub from: String,
}

impl LinkLimit {
    /// A link that was probed but whose limit could not be derived.
    pub fn unknown() -> LinkLimit {
        LinkLimit {
            limit: "unknown".into(),
            from: "no link limit could be derived".into(),
        }
    }
}
