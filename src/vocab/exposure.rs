//! What other work on the machine can move a workload's figures: its kind says, and the
//! account of interference judges a run by it.

/// What other work can move a workload's figures.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Exposure {
    /// Its figures depend on getting the CPUs (a loop's rate, a codec's, the CPU a
    /// transfer costs).
    pub cpu: bool,
    /// Its figures are rates of the storage under its target.
    pub storage: bool,
    /// Payload bytes it moved over its network interfaces (sent and received at this
    /// end), for a kind that tests a network; none otherwise.
    pub network_bytes: Option<u64>,
}

impl Exposure {
    /// A workload whose figures depend on the CPUs alone.
    pub const CPU: Exposure = Exposure {
        cpu: true,
        storage: false,
        network_bytes: None,
    };

    /// A workload whose figures are storage rates, which the CPUs move too.
    pub const STORAGE: Exposure = Exposure {
        cpu: true,
        storage: true,
        network_bytes: None,
    };

    /// A workload that only watches the machine: other work is what it shows.
    pub const NONE: Exposure = Exposure {
        cpu: false,
        storage: false,
        network_bytes: None,
    };
}
