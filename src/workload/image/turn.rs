//! One place's turn in one round: make and mount the container (not timed), run the
//! series' pass of the round in it, note what the host device wrote and what the
//! image holds, run the task, then take everything down again.

use std::path::PathBuf;
use std::time::Instant;

use super::record::Shared;
use super::shapes::{ImageItem, ImagePlan, Place};
use super::{series_at, task_at};
use crate::platform::container::Container;
use crate::platform::diskstats;
use crate::workload::disk::DiskWorkload;
use crate::workload::task::TaskWorkload;
use crate::workload::{Context, Error, Workload};

/// One place in one round.
pub(super) struct Turn<'a> {
    /// The run's plan.
    pub plan: &'a ImagePlan,
    /// The place.
    pub place: &'a Place,
    /// Its index among the places (0 is the host folder).
    pub index: usize,
    /// The folder it runs in.
    pub folder: PathBuf,
    /// The container's file name, for a container.
    pub name: Option<String>,
    /// Its records' contexts.
    pub contexts: &'a (Shared, Option<Shared>),
    /// The round, from 1.
    pub round: u32,
}

impl Turn<'_> {
    /// Runs the turn; whatever happens, the container is taken down before it returns.
    pub fn run(self, ctx: &Context) -> Result<ImageItem, Error> {
        let started = Instant::now();
        let mut container = match (&self.place.container, &self.name) {
            (Some(spec), Some(name)) => {
                ctx.sink
                    .status(format!("round {}: make {}", self.round, self.place.label));
                Some(Container::create(spec, &self.plan.work_folder, name)?)
            }
            _ => None,
        };
        let setup_seconds = container
            .as_ref()
            .map_or(0.0, |_| started.elapsed().as_secs_f64());
        let measured = self.measure(ctx, container.as_ref(), setup_seconds);
        let down = container.as_mut().map_or(Ok(()), Container::teardown);
        let item = measured?;
        down?;
        Ok(item)
    }

    /// The series (and the task) in the mounted place.
    fn measure(
        &self,
        ctx: &Context,
        container: Option<&Container>,
        setup_seconds: f64,
    ) -> Result<ImageItem, Error> {
        let disk_ctx = Context {
            cancel: ctx.cancel.clone(),
            sink: ctx.sink.for_record(self.place.disk_workload),
        };
        let host_device = match container {
            Some(c) => c.host_device(),
            None => crate::platform::probe_path(&self.folder)
                .ok()
                .and_then(|chain| diskstats::device_name(&chain.source)),
        };
        let daemon_before = container.and_then(Container::daemon_cpu_seconds);
        let mut series = series_at(self.plan, self.index, &self.folder);
        // The daemon reads the image: what it reads proves each read inside reached it.
        for layer in series.layers.iter_mut().filter(|l| l.name == "image") {
            layer.reader_pid = container.and_then(Container::daemon_pid);
        }
        let mut disk = DiskWorkload::new(series);
        disk.prepare()?;
        set(&self.contexts.0, disk.context());
        disk.setup(&disk_ctx)?;
        let written_before = host_device.as_deref().and_then(diskstats::bytes_written);
        let files = match disk.run_pass(&disk_ctx, self.round) {
            Ok(files) => files,
            Err(e) => {
                let _ = disk.cleanup();
                return Err(e);
            }
        };
        // The pass synced each file; what the host device wrote for them is written.
        let written_after = host_device.as_deref().and_then(diskstats::bytes_written);
        let daemon_after = container.and_then(Container::daemon_cpu_seconds);
        let (allocated, used) = match container {
            Some(c) => (c.allocated_bytes().ok(), c.inner_used_bytes().ok()),
            None => (None, None),
        };
        let removed = disk.remove_files(&files);
        let cleaned = disk.cleanup();
        removed?;
        cleaned?;
        if let (Some(task), Some(index), Some(shared)) =
            (&self.plan.task, self.place.task_workload, &self.contexts.1)
        {
            let task_ctx = Context {
                cancel: ctx.cancel.clone(),
                sink: ctx.sink.for_record(index),
            };
            let mut plan = task_at(self.plan, task, self.index, &self.folder);
            for layer in plan.layers.iter_mut().filter(|l| l.name == "image") {
                layer.reader_pid = container.and_then(Container::daemon_pid);
            }
            let mut task = TaskWorkload::new(plan, None);
            let ran = task
                .prepare()
                .and_then(|()| {
                    set(shared, task.context());
                    task.setup(&task_ctx)
                })
                .and_then(|()| task.run(&task_ctx));
            set(shared, task.context());
            let cleaned = task.cleanup();
            ran?;
            cleaned?;
        }
        let (written, read) = self.plan.series.pass_bytes();
        Ok(ImageItem {
            place: self.index,
            round: self.round,
            setup_seconds,
            loop_direct_io: container.map(Container::direct_io),
            host_device,
            written_bytes: written,
            moved_bytes: written + read,
            device_written_bytes: written_before
                .zip(written_after)
                .map(|(before, after)| after.saturating_sub(before)),
            image_allocated_bytes: allocated,
            inner_used_bytes: used,
            daemon_cpu_seconds: daemon_after
                .zip(daemon_before)
                .map(|(after, before)| after - before),
        })
    }
}

/// Sets a record's context.
fn set(shared: &Shared, value: serde_json::Value) {
    *shared.lock().unwrap_or_else(|p| p.into_inner()) = value;
}
