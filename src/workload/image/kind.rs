//! What a stored image workload is made of (its params, context, items and summary)
//! and how a run concludes its summary; how it is judged and shown is in view.rs.

use super::ratios::op_ratios;
use super::stored::{ImageItem, ImageParams, ImageSummary, PlaceSummary};
use crate::analysis::stats::Stats;
use crate::platform::container::Format;
use crate::storage::item::DiskItem;
use crate::workload::{Decoded, Kind, Stored};

/// The image kind: its stored shapes and what a run concludes from them.
pub struct ImageKind;

impl Kind for ImageKind {
    const NAME: &'static str = "image";
    type Params = ImageParams;
    type Context = ();
    type Item = ImageItem;
    type Summary = ImageSummary;

    fn summarize(w: &Stored<Self>, run: &Decoded) -> ImageSummary {
        let host_disk = file_items(run, w.params.places[0].disk_workload);
        let host_task = whole_task_rate(run, w.params.places[0].task_workload);
        let places = w
            .params
            .places
            .iter()
            .enumerate()
            .map(|(index, place)| {
                let items: Vec<&ImageItem> = w.items.iter().filter(|i| i.place == index).collect();
                let median = |f: &dyn Fn(&ImageItem) -> Option<f64>| {
                    let values: Vec<f64> = items.iter().filter_map(|i| f(i)).collect();
                    Stats::of(&values).map(|s| s.median)
                };
                let dio: Vec<bool> = items.iter().filter_map(|i| i.loop_direct_io).collect();
                let raw = place
                    .container
                    .as_ref()
                    .is_some_and(|c| c.format != Format::Qcow2);
                PlaceSummary {
                    label: place.label.clone(),
                    ops: op_ratios(host_disk, file_items(run, place.disk_workload)),
                    write_amplification: median(&ImageItem::write_amplification),
                    image_allocated_bytes: median(&|i| i.image_allocated_bytes.map(|b| b as f64)),
                    inner_used_bytes: median(&|i| i.inner_used_bytes.map(|b| b as f64)),
                    daemon_seconds_per_gib: median(&ImageItem::daemon_seconds_per_gib),
                    task_ratio: whole_task_rate(run, place.task_workload)
                        .zip(host_task)
                        .map(|(rate, host)| rate / host),
                    loop_direct_io: (raw && !dio.is_empty()).then(|| dio.iter().all(|&d| d)),
                }
            })
            .collect();
        ImageSummary { places }
    }
}

/// The files workload `index` of the run wrote and read, as its own kind gives them;
/// none for a workload that cannot be read (its own kind names it when it is shown).
fn file_items<'r>(run: &'r Decoded, index: usize) -> &'r [DiskItem] {
    match run.view(index) {
        Ok(Some(view)) => view.file_items(),
        _ => &[],
    }
}

/// A record's whole rate (a task's at its most threads), as its own kind says.
fn whole_task_rate(run: &Decoded, index: Option<usize>) -> Option<f64> {
    run.view(index?).ok().flatten()?.whole_rate()
}
