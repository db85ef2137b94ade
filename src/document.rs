//! The run document: one run as SPEC.md's JSON describes it. The runner builds it,
//! the store keeps it, and every report (terminal, JSON, CSV) is a view of it.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::platform::Machine;

/// Whether a run finished.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    /// Every workload ran to its end.
    Complete,
    /// Stopped early by an error or an interrupt, or still running.
    Incomplete,
}

impl RunStatus {
    /// The name stored and printed.
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Complete => "complete",
            RunStatus::Incomplete => "incomplete",
        }
    }

    /// Parses a stored name.
    pub fn parse(text: &str) -> Option<RunStatus> {
        match text {
            "complete" => Some(RunStatus::Complete),
            "incomplete" => Some(RunStatus::Incomplete),
            _ => None,
        }
    }
}

/// One run: its context, its workloads with every item, and the verdicts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunDocument {
    /// The run's id in the results database; null with `--no-store`.
    pub run_id: Option<i64>,
    /// Whether the run finished.
    pub status: RunStatus,
    /// Why an incomplete run stopped: `interrupted` or `error: ...`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub incomplete_reason: Option<String>,
    /// The ratelab version that measured it.
    pub ratelab_version: String,
    /// The verb that made the run (`disk`, `profile`).
    pub verb: String,
    /// The user's label (`--label`).
    #[serde(default)]
    pub label: Option<String>,
    /// Start time, RFC 3339 UTC.
    pub started_at: String,
    /// End time, RFC 3339 UTC; null while running.
    #[serde(default)]
    pub finished_at: Option<String>,
    /// The machine it ran on.
    pub machine: Machine,
    /// The workloads, in the order they were planned.
    pub workloads: Vec<WorkloadRecord>,
    /// Contention figures when workloads ran at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contention: Option<Value>,
    /// Conclusions in words.
    pub verdicts: Vec<Verdict>,
}

/// One workload of a run: what it was asked to do and everything it measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkloadRecord {
    /// The workload kind (`disk`, later `net`, `cpu`, `task`, `monitor`).
    pub kind: String,
    /// What it measured: a folder, a host.
    pub target: String,
    /// Its parameters, as validated.
    pub params: Value,
    /// What the platform says of the target (for disk: the storage chain and link limit).
    #[serde(default, skip_serializing_if = "Value::is_null")]
    pub context: Value,
    /// One entry per measured item (a file written or read, a stream...).
    pub items: Vec<Value>,
    /// Statistics over the items, keyed by operation.
    #[serde(default)]
    pub summary: Value,
    /// Time series from the sampler, when one ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub series: Option<Value>,
}

/// How serious a verdict is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    /// A finding worth knowing.
    Info,
    /// A figure to distrust or a condition to fix.
    Warning,
    /// A check failed; the run exits with code 1.
    Error,
}

/// A conclusion in words, with a stable code for scripts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    /// Stable identifier (`faster_than_link`, `not_evicted`...).
    pub code: String,
    /// How serious it is.
    pub severity: Severity,
    /// The finding in words.
    pub message: String,
    /// Index of the workload it is about, if one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workload: Option<usize>,
}

impl RunDocument {
    /// Whether any verdict is an error, which makes the run exit with code 1.
    pub fn has_error_verdict(&self) -> bool {
        self.verdicts.iter().any(|v| v.severity == Severity::Error)
    }
}

/// The current time as RFC 3339 UTC with seconds.
pub fn now_rfc3339() -> String {
    humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string()
}

/// A mark on one item that says its figure is not a plain measurement.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Flag {
    /// Faster than the physical limit of the target's link: served from a cache.
    FasterThanLink,
    /// More than half of the file was in the page cache before the read.
    Cached,
    /// Too short to time reliably.
    Small,
}

impl Flag {
    /// The name stored and printed.
    pub fn as_str(self) -> &'static str {
        match self {
            Flag::FasterThanLink => "faster_than_link",
            Flag::Cached => "cached",
            Flag::Small => "small",
        }
    }
}
