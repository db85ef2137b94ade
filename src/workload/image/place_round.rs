//! One place's turn in one round: make and mount the container (not timed), run the
//! series' pass of the round in it, note what the host device wrote and what the
//! image holds, run the task, then take everything down again.

use std::path::PathBuf;
use std::time::Instant;

use super::record::Shared;
use super::stored::{ImageItem, ImagePlan, Place};
use super::{SERIES, TASK};
use crate::error::Error;
use crate::platform::container::Container;
use crate::platform::diskstats;
use crate::workload::{Context, InPlace, RoundBytes};

/// One place in one round.
pub(super) struct Turn<'a> {
    /// The run's plan.
    pub plan: &'a ImagePlan,
    /// The place.
    pub place: &'a Place,
    /// Its index among the places (0 is the host folder).
    pub index: usize,
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
        let host_device = match container {
            Some(c) => c.host_device(),
            None => crate::platform::probe_path(&self.folder())
                .ok()
                .and_then(|chain| diskstats::device_name(&chain.source)),
        };
        // The daemon reads the image: what it reads proves each read inside reached it.
        let site = || {
            super::site(
                self.plan,
                self.index,
                container.and_then(Container::daemon_pid),
            )
        };
        let daemon_before = container.and_then(Container::daemon_cpu_seconds);
        let written = || host_device.as_deref().and_then(diskstats::bytes_written);
        let mut series = super::work(SERIES, &self.plan.series, site())?;
        let (bytes, written_before, (written_after, daemon_after, allocated, used)) = round_of(
            series.as_mut(),
            &self.contexts.0,
            &ctx.for_record(self.place.disk_workload),
            self.round,
            written,
            // The round synced each file; what the host device wrote for them is written.
            || {
                let (allocated, used) = match container {
                    Some(c) => (c.allocated_bytes().ok(), c.inner_used_bytes().ok()),
                    None => (None, None),
                };
                let daemon_after = container.and_then(Container::daemon_cpu_seconds);
                (written(), daemon_after, allocated, used)
            },
        )?;
        if let (Some(params), Some(index), Some(shared)) =
            (&self.plan.task, self.place.task_workload, &self.contexts.1)
        {
            let mut task = super::work(TASK, params, site())?;
            round_of(
                task.as_mut(),
                shared,
                &ctx.for_record(index),
                self.round,
                || (),
                || (),
            )?;
        }
        Ok(ImageItem {
            place: self.index,
            round: self.round,
            setup_seconds,
            loop_direct_io: container.map(Container::direct_io),
            host_device,
            written_bytes: bytes.written,
            moved_bytes: bytes.moved,
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

    /// The folder the place runs in.
    fn folder(&self) -> PathBuf {
        super::place_folder(self.plan, self.index)
    }
}

/// Runs `work`'s round `round` from its checks to its cleanup, its record's context kept
/// in `shared`: `before` looks at the place just before the round, `after` once it is
/// done and before what it left is removed.
fn round_of<B, A>(
    work: &mut dyn InPlace,
    shared: &Shared,
    ctx: &Context,
    round: u32,
    before: impl FnOnce() -> B,
    after: impl FnOnce() -> A,
) -> Result<(RoundBytes, B, A), Error> {
    let ran = work
        .prepare()
        .and_then(|()| {
            set(shared, work.context());
            work.setup(ctx)
        })
        .and_then(|()| {
            let seen = before();
            let bytes = work.run_round(ctx, round)?;
            Ok((bytes, seen, after()))
        });
    set(shared, work.context());
    let ended = match ran {
        Ok(_) => work.end_round(),
        Err(_) => Ok(()),
    };
    let cleaned = work.cleanup();
    let out = ran?;
    ended?;
    cleaned?;
    Ok(out)
}

/// Sets a record's context.
fn set(shared: &Shared, value: serde_json::Value) {
    *shared.lock().unwrap_or_else(|p| p.into_inner()) = value;
}
