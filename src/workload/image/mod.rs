//! Disk images: the storage series (and the compression task) inside containers —
//! raw images on loop devices, qcow2 images through QEMU's own driver — beside the
//! host folder that holds them, in one run, round by round, so that every container
//! has a baseline measured at the same time. Each round makes every container afresh
//! (its first writes go into fresh space), measures, and removes it.

mod kind;
mod ratios;
mod record;
mod shapes;
mod turn;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde_json::Value;

pub use kind::ImageKind;
pub use shapes::{ImageItem, ImageParams, ImagePlan, ImageSummary, Place};

use self::record::{Recorded, Shared};
use crate::platform::container::{self, ContainerSpec};
use crate::storage::workdir;
use crate::workload::disk::{DiskPlan, DiskWorkload};
use crate::workload::task::{TaskPlan, TaskWorkload};
use crate::workload::{Context, Error, Kind, Workload};

/// The image workload: it owns the containers and runs every place's series and task.
pub struct ImageWorkload {
    params: ImageParams,
    /// Each place's disk and task record contexts, filled in as they are learnt.
    contexts: Vec<(Shared, Option<Shared>)>,
    /// Whether the work folder was made (and so must be removed).
    made_folder: bool,
}

/// The image workload at index `first` of a run, followed by the records of every
/// place's series and task, in the order [`ImageParams::places`] names them.
pub fn workloads(plan: ImagePlan, first: usize) -> Vec<Box<dyn Workload>> {
    let mut places = Vec::new();
    let mut disks: Vec<Box<dyn Workload>> = Vec::new();
    let mut tasks: Vec<Box<dyn Workload>> = Vec::new();
    let mut contexts = Vec::new();
    let count = plan.containers.len() + 1;
    for index in 0..count {
        let container = index.checked_sub(1).map(|c| plan.containers[c].clone());
        let folder = place_folder(&plan, index);
        let disk_context: Shared = Arc::new(Mutex::new(Value::Null));
        let disk = DiskWorkload::new(series_at(&plan, index, &folder));
        disks.push(Box::new(Recorded::of(
            &disk,
            first,
            Arc::clone(&disk_context),
        )));
        let task_context = plan.task.as_ref().map(|task| {
            let shared: Shared = Arc::new(Mutex::new(Value::Null));
            let task = TaskWorkload::new(task_at(&plan, task, index, &folder), None);
            tasks.push(Box::new(Recorded::of(&task, first, Arc::clone(&shared))));
            shared
        });
        places.push(Place {
            label: container
                .as_ref()
                .map_or("host folder".to_string(), ContainerSpec::label),
            container,
            disk_workload: first + 1 + index,
            task_workload: task_context.as_ref().map(|_| first + 1 + count + index),
        });
        contexts.push((disk_context, task_context));
    }
    let driver = ImageWorkload {
        params: ImageParams { plan, places },
        contexts,
        made_folder: false,
    };
    let mut out: Vec<Box<dyn Workload>> = vec![Box::new(driver)];
    out.extend(disks);
    out.extend(tasks);
    out
}

/// The short name of container `index` (from 1) in file names: `c2-qcow2-64k`.
fn container_name(plan: &ImagePlan, index: usize) -> String {
    let label = plan.containers[index - 1].label().to_lowercase();
    let words: Vec<&str> = label
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|word| !word.is_empty())
        .collect();
    format!("c{index}-{}", words.join("-"))
}

/// The folder place `index` runs in: the host folder, or a container's mount point.
fn place_folder(plan: &ImagePlan, index: usize) -> PathBuf {
    match index {
        0 => plan.target.clone(),
        _ => paths(plan, index).mount_point,
    }
}

/// The series place `index` runs, with the layers below it.
fn series_at(plan: &ImagePlan, index: usize, folder: &Path) -> DiskPlan {
    DiskPlan {
        target: folder.to_path_buf(),
        layers: layers_at(plan, index),
        ..plan.series.clone()
    }
}

/// The task place `index` runs.
fn task_at(plan: &ImagePlan, task: &TaskPlan, index: usize, folder: &Path) -> TaskPlan {
    TaskPlan {
        out: folder.to_path_buf(),
        layers: layers_at(plan, index),
        ..task.clone()
    }
}

/// The host files below place `index` whose caches could serve its reads.
fn layers_at(plan: &ImagePlan, index: usize) -> Vec<crate::storage::layers::Layer> {
    match index {
        0 => Vec::new(),
        _ => paths(plan, index)
            .layers()
            .into_iter()
            .map(|layer| crate::storage::layers::Layer {
                name: layer.name.to_string(),
                path: layer.path,
                reader_pid: None,
            })
            .collect(),
    }
}

/// Where container `index` (from 1) keeps its files.
fn paths(plan: &ImagePlan, index: usize) -> container::Paths {
    container::Paths::of(
        &plan.containers[index - 1],
        &plan.work_folder,
        &container_name(plan, index),
    )
}

/// The most a place holds at once: a pass's files, and the task's input, its output
/// and the write step's copy.
pub fn held_bytes(series: &DiskPlan, task: Option<&TaskPlan>) -> u64 {
    let files: u64 = series.sizes_bytes.iter().sum();
    files
        + task
            .and_then(|t| t.make_file_bytes)
            .map_or(0, |bytes| bytes * 3)
}

impl ImageWorkload {
    /// The bytes a container must be able to hold: the series' files and the task's.
    fn needed_bytes(&self) -> u64 {
        let plan = &self.params.plan;
        held_bytes(&plan.series, plan.task.as_ref())
    }
}

impl Workload for ImageWorkload {
    fn kind(&self) -> &'static str {
        ImageKind::NAME
    }

    fn target(&self) -> String {
        self.params.plan.target.display().to_string()
    }

    fn touches(&self) -> crate::workload::Touches {
        crate::workload::Touches {
            paths: vec![self.params.plan.target.clone()],
            ..Default::default()
        }
    }

    fn params(&self) -> Value {
        serde_json::to_value(&self.params).expect("params serialise")
    }

    fn planned_bytes(&self) -> u64 {
        let plan = &self.params.plan.series;
        let (written, read) = plan.pass_bytes();
        (written + read) * u64::from(plan.repeat) * self.params.places.len() as u64
    }

    fn prepare(&mut self) -> Result<(), Error> {
        let plan = &self.params.plan;
        let target = workdir::check_target(&plan.target)?;
        if plan.work_folder.exists() {
            return Err(Error::Target {
                path: plan.work_folder.clone(),
                reason: "the work folder already exists".into(),
            });
        }
        // Images are made one at a time: the largest of them, beside the host's files.
        let largest = plan
            .containers
            .iter()
            .map(|spec| spec.host_bytes(self.needed_bytes()))
            .max()
            .unwrap_or(0);
        container::check_environment(&plan.containers, &target, self.needed_bytes())?;
        workdir::check_space(&target, self.needed_bytes() + largest, 2)?;
        Ok(())
    }

    fn setup(&mut self, _ctx: &Context) -> Result<(), Error> {
        let folder = &self.params.plan.work_folder;
        std::fs::create_dir(folder).map_err(|e| Error::io("create the work folder", folder, e))?;
        self.made_folder = true;
        Ok(())
    }

    fn run(&mut self, ctx: &Context) -> Result<(), Error> {
        let rounds = self.params.plan.series.repeat;
        let count = self.params.places.len();
        for round in 1..=rounds {
            // Each round starts at another place, so that none always runs first.
            for step in 0..count {
                let place = (step + round as usize - 1) % count;
                if ctx.cancel.is_set() {
                    return Err(Error::Interrupted);
                }
                let result = turn::Turn {
                    plan: &self.params.plan,
                    place: &self.params.places[place],
                    index: place,
                    folder: place_folder(&self.params.plan, place),
                    name: (place > 0).then(|| container_name(&self.params.plan, place)),
                    contexts: &self.contexts[place],
                    round,
                }
                .run(ctx);
                match result {
                    Ok(item) => {
                        ctx.sink.item(&item);
                        ctx.sink.stage_done(format!(
                            "round {round} {}",
                            self.params.places[place].label
                        ));
                    }
                    // A child killed by the same Ctrl-C fails its own way: the cause is the signal.
                    Err(_) if ctx.cancel.is_set() => return Err(Error::Interrupted),
                    Err(e) => return Err(e),
                }
            }
        }
        Ok(())
    }

    fn cleanup(&mut self) -> Result<(), Error> {
        if !self.made_folder {
            return Ok(());
        }
        let folder = &self.params.plan.work_folder;
        let left = container::leftovers(folder);
        if !left.is_empty() {
            return Err(Error::Unsupported(format!(
                "could not remove everything under {}: {}",
                folder.display(),
                left.join("; ")
            )));
        }
        match std::fs::remove_dir(folder) {
            Ok(()) => {
                self.made_folder = false;
                Ok(())
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(Error::io("remove the work folder", folder, e)),
        }
    }
}
