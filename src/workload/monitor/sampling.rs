//! The monitor's sampling loop: wait for the next tick on a fixed grid (or for a cancel,
//! the companion's stop flag, or the command's exit), read every source, send the
//! sample's items, and decide whether it was the last.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::MonitorWorkload;
use super::context::Ended;
use super::item::{ACTIVE_AT, MonitorItem};
use crate::error::Error;
use crate::sensors::Reading;
use crate::sensors::residency::PROC_STAT;
use crate::workload::Context;

/// What the wait for the next sample ended with.
enum Wake {
    /// The next tick is due.
    Due,
    /// Something ended the wait before it.
    Ended(Ended),
}

impl MonitorWorkload {
    /// Sleeps until `due` in steps of at most 100 ms, so a cancel, the stop flag or the
    /// command's exit end the wait early.
    fn wait(&mut self, due: Instant, ctx: &Context) -> Result<Wake, Error> {
        loop {
            if ctx.cancel.is_set() {
                return Ok(Wake::Ended(Ended::Cancelled));
            }
            if self
                .stop
                .as_ref()
                .is_some_and(|f| f.load(Ordering::Relaxed))
            {
                return Ok(Wake::Ended(Ended::StopFlag));
            }
            if self.command_exited()? {
                return Ok(Wake::Ended(Ended::CommandExited));
            }
            let now = Instant::now();
            if now >= due {
                return Ok(Wake::Due);
            }
            std::thread::sleep((due - now).min(Duration::from_millis(100)));
        }
    }

    /// Whether the watched command has exited (and is reaped).
    fn command_exited(&mut self) -> Result<bool, Error> {
        let Some(child) = self.child.as_mut() else {
            return Ok(false);
        };
        let status = child
            .try_wait()
            .map_err(|e| Error::io("wait for", &self.plan.command[0], e))?;
        if let Some(status) = status {
            self.command_status = Some(status);
            self.child = None;
        }
        Ok(status.is_some())
    }

    /// Sends one sample's items; threads only while the watched process lives.
    fn emit(&self, ctx: &Context, sample: u64, t_s: f64, reading: &Reading, threads: bool) {
        for core in &reading.cores {
            ctx.sink.item(&MonitorItem::Core {
                sample,
                t_s,
                cpu: core.cpu,
                active_fraction: core.active_fraction,
                freq_hz: core.freq_hz,
                power_w: core.power_w,
            });
        }
        let fractions: Vec<f64> = reading
            .cores
            .iter()
            .filter_map(|c| c.active_fraction)
            .collect();
        ctx.sink.item(&MonitorItem::System {
            sample,
            t_s,
            // Unknown, not 0, when no core's residency could be measured this sample.
            active_cores: (!fractions.is_empty())
                .then(|| fractions.iter().filter(|&&f| f >= ACTIVE_AT).count() as u32),
            active_fraction: (!fractions.is_empty())
                .then(|| fractions.iter().sum::<f64>() / fractions.len() as f64),
            power_w: reading.power.as_ref().and_then(|p| p.power_w),
            energy_j: reading.power.as_ref().and_then(|p| p.energy_j),
            zones: reading
                .power
                .as_ref()
                .map(|p| p.zones.clone())
                .unwrap_or_default(),
        });
        for thread in reading.threads.iter().filter(|_| threads) {
            ctx.sink.item(&MonitorItem::Thread {
                sample,
                t_s,
                tid: thread.tid,
                name: thread.name.clone(),
                cpu: thread.cpu,
                policy: crate::sensors::placement::policy_name(thread.policy),
                nice: thread.nice,
            });
        }
        // One operation per sample, so the runner's series shows the monitor live.
        ctx.sink.progress().add(0);
    }

    /// Whether the sample just taken, number `sample` at tick `tick`, is the last.
    fn limit_reached(&self, sample: u64, tick: u64) -> Option<Ended> {
        if self.plan.samples.is_some_and(|n| sample + 1 >= n) {
            return Some(Ended::Samples);
        }
        let next_due_s = self.plan.interval_s * (tick + 2) as f64;
        self.plan
            .seconds
            .filter(|&s| next_due_s > s + 1e-9)
            .map(|_| Ended::Seconds)
    }

    /// Samples on the grid until something ends it.
    pub(super) fn sample_until_ended(
        &mut self,
        ctx: &Context,
        start: Instant,
    ) -> Result<Ended, Error> {
        let interval_s = self.plan.interval_s;
        // Stored about once a second, so an interrupt loses little.
        let flush_every = (1.0 / interval_s).ceil().max(1.0) as u64;
        let mut tick = 0u64;
        loop {
            let due = start + Duration::from_secs_f64(interval_s * (tick + 1) as f64);
            let wake = self.wait(due, ctx)?;
            if let Wake::Ended(Ended::Cancelled) = wake {
                return Ok(Ended::Cancelled);
            }
            let monitor = self
                .monitor
                .as_mut()
                .expect("the monitor is probed in prepare");
            let reading = monitor
                .read()
                .map_err(|e| Error::io("read", PROC_STAT, e))?;
            let t_s = start.elapsed().as_secs_f64();
            // A process that ended during the wait has no threads left to place.
            let alive = matches!(wake, Wake::Due) && !self.command_exited()?;
            self.emit(ctx, self.samples, t_s, &reading, alive);
            self.samples += 1;
            if self.samples.is_multiple_of(flush_every) {
                ctx.sink.stage_done("samples");
            }
            if let Wake::Ended(ended) = wake {
                return Ok(ended);
            }
            if !alive {
                return Ok(Ended::CommandExited);
            }
            if let Some(ended) = self.limit_reached(self.samples - 1, tick) {
                return Ok(ended);
            }
            // Ticks missed while the machine was too busy to wake us are skipped.
            tick = (tick + 1).max((start.elapsed().as_secs_f64() / interval_s) as u64);
        }
    }
}
