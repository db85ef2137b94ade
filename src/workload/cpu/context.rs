//! What a cpu run says of the machine beside its items (its `context`): the core types,
//! the tests it could not run and why, where energy figures come from, and what one loop
//! of each test does. The live workload writes it and the kind reads it back, through
//! this one definition.

use serde::{Deserialize, Serialize};

use crate::platform::cores::CoreType;
use crate::sensors::Source;

/// The context of a cpu workload as stored.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CpuContext {
    /// The kinds of core the machine has, each with its CPUs.
    pub core_types: Vec<CoreType>,
    /// The tests asked for that this machine cannot run.
    pub unavailable: Vec<UnavailableTest>,
    /// Where the energy of each test comes from, or why it is unknown.
    pub power: Option<PowerSource>,
    /// What one loop of each test does, in the order the tests run.
    pub loops: Vec<LoopOfTest>,
}

/// A test this machine cannot run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UnavailableTest {
    /// The test.
    pub test: String,
    /// Why it cannot run.
    pub reason: String,
}

/// Where energy figures come from, or why there are none.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
// Untagged, as first stored: a source's fields, or `{"unavailable": reason}`. The latter
// is tried first: every field of a source may be absent, so it would read as one.
#[serde(untagged)]
pub enum PowerSource {
    /// No source: why.
    Unavailable {
        /// Why no energy is measured.
        unavailable: String,
    },
    /// The source that measures energy.
    Fed(Source),
}

/// What one loop of a test does.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoopOfTest {
    /// The test.
    pub test: String,
    /// One loop's work, in words.
    pub loop_is: String,
}
