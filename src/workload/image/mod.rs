//! Disk images: the storage series (and the compression task) inside containers —
//! raw images on loop devices, qcow2 images through QEMU's own driver — beside the
//! host folder that holds them, in one run, round by round, so that every container
//! has a baseline measured at the same time. Each round makes every container afresh
//! (its first writes go into fresh space), measures, and removes it.

mod kind;
mod place_round;
mod ratios;
mod record;
mod stored;
mod view;

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use serde_json::Value;

pub use kind::ImageKind;
pub use stored::{ImageItem, ImageParams, ImagePlan, ImageSummary, Place};

use self::record::{Recorded, Shared};
use crate::error::Error;
use crate::platform::container::{self, ContainerSpec};
use crate::storage::workdir;
use crate::workload::{Context, InPlace, Kind, Site, Workload};

/// The image workload: it owns the containers and runs every place's series and task.
pub struct ImageWorkload {
    params: ImageParams,
    /// Each place's disk and task record contexts, filled in as they are learnt.
    contexts: Vec<(Shared, Option<Shared>)>,
    /// Whether the work folder was made (and so must be removed).
    made_folder: bool,
    /// The rounds its series plans, known once prepared.
    rounds: u32,
}

/// The kind whose work every place runs as its storage series.
const SERIES: &str = "disk";
/// The kind of the task every place runs, when asked.
const TASK: &str = "task";

/// The image workload at index `first` of a run, followed by the records of every
/// place's series and task, in the order [`ImageParams::places`] names them.
pub fn workloads(plan: ImagePlan, first: usize) -> Result<Vec<Box<dyn Workload>>, Error> {
    let mut places = Vec::new();
    let mut disks: Vec<Box<dyn Workload>> = Vec::new();
    let mut tasks: Vec<Box<dyn Workload>> = Vec::new();
    let mut contexts = Vec::new();
    let count = plan.containers.len() + 1;
    for index in 0..count {
        let container = index.checked_sub(1).map(|c| plan.containers[c].clone());
        let disk_context: Shared = Arc::new(Mutex::new(Value::Null));
        let disk = work(SERIES, &plan.series, site(&plan, index, None))?;
        disks.push(Box::new(Recorded::of(
            disk.as_ref(),
            first,
            Arc::clone(&disk_context),
        )));
        let task_context = match &plan.task {
            Some(params) => {
                let shared: Shared = Arc::new(Mutex::new(Value::Null));
                let task = work(TASK, params, site(&plan, index, None))?;
                tasks.push(Box::new(Recorded::of(
                    task.as_ref(),
                    first,
                    Arc::clone(&shared),
                )));
                Some(shared)
            }
            None => None,
        };
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
        rounds: 0,
    };
    let mut out: Vec<Box<dyn Workload>> = vec![Box::new(driver)];
    out.extend(disks);
    out.extend(tasks);
    Ok(out)
}

/// The work of kind `kind`, made from its `params` for `site`.
fn work(kind: &str, params: &Value, site: Site) -> Result<Box<dyn InPlace>, Error> {
    let made = crate::workload::kind(kind).map(|k| k.in_place(params, site));
    match made {
        Some(Ok(Some(work))) => Ok(work),
        Some(Err(e)) => Err(Error::Unsupported(format!(
            "the image's {kind} params cannot be read: {e}"
        ))),
        _ => Err(Error::Unsupported(format!(
            "a {kind} workload cannot run inside a container"
        ))),
    }
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

/// Place `index`: its folder and the host files below it whose caches could serve its
/// reads, the image's read by `daemon` where a daemon serves it.
fn site(plan: &ImagePlan, index: usize, daemon: Option<u32>) -> Site {
    let layers = match index {
        0 => Vec::new(),
        _ => paths(plan, index)
            .layers()
            .into_iter()
            .map(|layer| crate::storage::layers::Layer {
                reader_pid: daemon.filter(|_| layer.name == "image"),
                name: layer.name.to_string(),
                path: layer.path,
                same_offsets: layer.same_offsets,
            })
            .collect(),
    };
    Site {
        folder: place_folder(plan, index),
        layers,
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

impl ImageWorkload {
    /// The series' and the task's work at the host folder.
    fn host_works(&self) -> Result<Vec<Box<dyn InPlace>>, Error> {
        let plan = &self.params.plan;
        let mut works = vec![work(SERIES, &plan.series, site(plan, 0, None))?];
        if let Some(task) = &plan.task {
            works.push(work(TASK, task, site(plan, 0, None))?);
        }
        Ok(works)
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
        let series = work(SERIES, &self.params.plan.series, Site::default());
        series.map_or(0, |s| s.planned_bytes()) * self.params.places.len() as u64
    }

    fn prepare(&mut self) -> Result<(), Error> {
        let works = self.host_works()?;
        self.rounds = works[0].rounds();
        let needed: u64 = works.iter().map(|w| w.held_bytes()).sum();
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
            .map(|spec| spec.host_bytes(needed))
            .max()
            .unwrap_or(0);
        container::check_environment(&plan.containers, &target, needed)?;
        workdir::check_space(&target, needed + largest, 2)?;
        Ok(())
    }

    fn setup(&mut self, _ctx: &Context) -> Result<(), Error> {
        let folder = &self.params.plan.work_folder;
        std::fs::create_dir(folder).map_err(|e| Error::io("create the work folder", folder, e))?;
        self.made_folder = true;
        Ok(())
    }

    fn run(&mut self, ctx: &Context) -> Result<(), Error> {
        let rounds = self.rounds;
        let count = self.params.places.len();
        for round in 1..=rounds {
            // Each round starts at another place, so that none always runs first.
            for step in 0..count {
                let place = (step + round as usize - 1) % count;
                if ctx.cancel.is_set() {
                    return Err(Error::Interrupted);
                }
                let result = place_round::Turn {
                    plan: &self.params.plan,
                    place: &self.params.places[place],
                    index: place,
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
