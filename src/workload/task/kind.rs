//! What a stored task workload is made of (its params, context, items and summary)
//! and how a run concludes its summary; how it is judged and shown is in view.rs.

use super::TaskPlan;
use super::item::TaskItem;
use super::stored::TaskContext;
use super::summary::TaskSummary;
use super::summary::summarize;
use crate::vocab::units::format_bytes;
use crate::workload::{Decoded, InPlace, Kind, Site, Stored};

/// The task kind: its stored shapes and what a run concludes from them.
pub struct TaskKind;

impl Kind for TaskKind {
    fn in_place(params: TaskPlan, site: Site) -> Option<Box<dyn InPlace>> {
        let plan = TaskPlan {
            out: site.folder,
            layers: site.layers,
            ..params
        };
        Some(Box::new(super::TaskWorkload::new(plan, None)))
    }

    const NAME: &'static str = "task";
    type Params = TaskPlan;
    type Context = TaskContext;
    type Item = TaskItem;
    type Summary = TaskSummary;

    fn summarize(w: &Stored<Self>, _run: &Decoded) -> TaskSummary {
        summarize(&w.items)
    }
}

/// The table's title: what was done to which file, and the ratio it got (`ratio`, at
/// the fewest threads).
pub(super) fn title(w: &Stored<TaskKind>, ratio: Option<f64>) -> String {
    let (params, context) = (&w.params, &w.context);
    format!(
        "{} of {} with {} level {} ({}{})",
        params.direction.as_str(),
        if context.made_file {
            "a made test file"
        } else {
            w.record.target.as_str()
        },
        params.codec.as_str(),
        params.level,
        context.source_bytes.map_or("-".into(), format_bytes),
        ratio.map_or(String::new(), |r| format!(", ratio {r:.2}:1")),
    )
}
