//! The monitor workload: every core's residency, frequency and power, and a watched
//! process's thread placement, sampled on a fixed grid until a sample count, a time, the
//! watched command's exit, a companion's stop flag, or a cancel. It runs alone
//! (`ratelab monitor`) or beside another workload of its group (`ratelab cpu`).

mod brief;
mod charts;
mod command;
mod context;
mod item;
mod kind;
mod sampling;
mod summary;
mod tables;
mod view;

use std::path::PathBuf;
use std::process::Child;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use context::{Ended, MonitorContext};
pub use item::{ACTIVE_AT, MonitorItem};
pub use kind::MonitorKind;
pub use summary::{
    CoreSummary, FreqAtCount, FreqFit, FreqVsActiveCores, MonitorSummary, ThreadPlacement,
    ZonePower, placements,
};

use crate::error::Error;
use crate::platform::cores::calling_thread_cpu_seconds;
use crate::sensors::Monitor;
use crate::sensors::residency::PROC_STAT;
use crate::workload::{Context, Kind, Workload};

/// What a monitor was asked to do.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MonitorPlan {
    /// Seconds between samples.
    pub interval_s: f64,
    /// Stop after this many samples.
    pub samples: Option<u64>,
    /// Stop after this many seconds.
    pub seconds: Option<f64>,
    /// A command to start and watch, program first; the monitor ends when it exits.
    /// Empty: none.
    pub command: Vec<String>,
    /// A running process whose threads to watch (the cpu verb passes its own).
    pub pid: Option<u32>,
}

impl MonitorPlan {
    /// A plan that samples every `interval` until stopped, watching no process.
    pub fn every(interval: Duration) -> MonitorPlan {
        MonitorPlan {
            interval_s: interval.as_secs_f64(),
            samples: None,
            seconds: None,
            command: Vec::new(),
            pid: None,
        }
    }
}

/// The monitor workload.
pub struct MonitorWorkload {
    plan: MonitorPlan,
    stop: Option<Arc<AtomicBool>>,
    monitor: Option<Monitor>,
    program: Option<PathBuf>,
    child: Option<Child>,
    command_status: Option<std::process::ExitStatus>,
    ended: Option<Ended>,
    samples: u64,
    cpu_seconds: Option<f64>,
    wall_seconds: Option<f64>,
}

impl MonitorWorkload {
    /// A workload for `plan`; its sources are probed in `prepare`.
    pub fn new(plan: MonitorPlan) -> MonitorWorkload {
        MonitorWorkload {
            plan,
            stop: None,
            monitor: None,
            program: None,
            child: None,
            command_status: None,
            ended: None,
            samples: 0,
            cpu_seconds: None,
            wall_seconds: None,
        }
    }

    /// Also stops, after one last sample, when `flag` is set: how a companion workload
    /// of the same group (the cpu tests) ends the monitor when it is done.
    pub fn until(mut self, flag: Arc<AtomicBool>) -> MonitorWorkload {
        self.stop = Some(flag);
        self
    }

    /// What the run says beside its samples.
    fn stored_context(&self) -> MonitorContext {
        let status = self.command_status.as_ref();
        MonitorContext {
            sources: self.monitor.as_ref().map(Monitor::sources),
            cpus: self.monitor.as_ref().map(|m| m.cpus().to_vec()),
            samples: self.samples,
            ended_by: self.ended,
            command_exit_code: status.and_then(|s| s.code()),
            command_signal: status.and_then(std::os::unix::process::ExitStatusExt::signal),
            monitor_cpu_seconds: self.cpu_seconds,
            monitor_wall_seconds: self.wall_seconds,
        }
    }

    /// Stops the watched command if it still runs, and reaps it.
    fn stop_command(&mut self) {
        if let Some(mut child) = self.child.take() {
            if let Ok(None) = child.try_wait() {
                command::stop_group(&mut child);
            }
            self.command_status = child.wait().ok();
        }
    }
}

impl Workload for MonitorWorkload {
    fn kind(&self) -> &'static str {
        MonitorKind::NAME
    }

    fn target(&self) -> String {
        match (&self.plan.command[..], self.plan.pid) {
            ([], Some(pid)) => format!("process {pid}"),
            ([], None) => "every core".to_string(),
            (command, _) => command.join(" "),
        }
    }

    fn params(&self) -> Value {
        serde_json::to_value(&self.plan).expect("plans serialise")
    }

    fn context(&self) -> Value {
        serde_json::to_value(self.stored_context()).expect("contexts serialise")
    }

    fn prepare(&mut self) -> Result<(), Error> {
        if let Some(program) = self.plan.command.first() {
            self.program = Some(crate::platform::programs::resolve(program)?);
        }
        let mut monitor = Monitor::probe().map_err(|e| Error::io("read", PROC_STAT, e))?;
        if let Some(pid) = self.plan.pid {
            monitor.watch(pid);
        }
        self.monitor = Some(monitor);
        Ok(())
    }

    fn run(&mut self, ctx: &Context) -> Result<(), Error> {
        let cpu_start = calling_thread_cpu_seconds();
        let start = Instant::now();
        if let Some(program) = &self.program {
            let child = command::spawn(program, &self.plan.command)?;
            if let Some(monitor) = self.monitor.as_mut() {
                monitor.watch(child.id());
            }
            self.child = Some(child);
        }
        let monitor = self
            .monitor
            .as_mut()
            .expect("the monitor is probed in prepare");
        monitor
            .restart()
            .map_err(|e| Error::io("read", PROC_STAT, e))?;
        let ended = self.sample_until_ended(ctx, start);
        self.stop_command();
        ctx.sink.stage_done("samples");
        self.wall_seconds = Some(start.elapsed().as_secs_f64());
        self.cpu_seconds = Some(calling_thread_cpu_seconds() - cpu_start);
        self.ended = ended.as_ref().ok().copied();
        match ended? {
            Ended::Cancelled => Err(Error::Interrupted),
            _ => Ok(()),
        }
    }

    fn cleanup(&mut self) -> Result<(), Error> {
        self.stop_command();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::control::Cancel;
    use crate::control::Progress;
    use crate::workload::{Event, Sink};
    use std::sync::atomic::Ordering;

    #[test]
    fn a_companion_stop_flag_ends_the_monitor_after_a_last_sample() {
        let (events, received) = std::sync::mpsc::channel();
        let progress = Arc::new(Progress::default());
        let ctx = Context {
            cancel: Cancel::new(),
            sink: Sink::new(0, events, Arc::clone(&progress)),
        };
        let flag = Arc::new(AtomicBool::new(false));
        let plan = MonitorPlan::every(Duration::from_millis(20));
        let mut workload = MonitorWorkload::new(plan).until(Arc::clone(&flag));
        workload.prepare().unwrap();
        let setter = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(110));
            flag.store(true, Ordering::Relaxed);
        });
        workload.run(&ctx).unwrap();
        setter.join().unwrap();
        let context = workload.stored_context();
        let samples = context.samples;
        assert_eq!(context.ended_by, Some(Ended::StopFlag));
        assert!((4..=7).contains(&samples), "{samples} samples");
        assert_eq!(progress.ops(), samples);
        drop(ctx);
        let systems = received
            .iter()
            .filter(|e| match e {
                Event::Item { item, .. } => matches!(
                    MonitorItem::deserialize(item),
                    Ok(MonitorItem::System { .. })
                ),
                _ => false,
            })
            .count();
        assert_eq!(systems as u64, samples);
    }
}
