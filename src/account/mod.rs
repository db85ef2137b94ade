//! The thread account: where each thread of a process tree spent its time, from what
//! the kernel keeps of every thread (docs/why.md), and how the tree's wall time is
//! charged to steps. A sampler thread reads the tree's threads at a fixed rate; their
//! time on a CPU and waiting for one comes from the kernel's counters, and a sample
//! only says what the rest was (a disk, a socket, a timer, another member). It serves
//! `ratelab why`, and every run's account of what its own threads lost.

mod charge;
mod classify;
mod holders;
mod look;
mod step;
mod totals;
mod tree;

use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

pub use charge::{Charged, Interval, ProcessView, Shares, ThreadSpan, charge, describe};
pub use classify::{On, Sleep, Wait};
pub use look::TcpTotal;
pub use step::{Place, Step, StepKey};
pub use totals::{Account, Bucket, Counted, Holder, ProcessTotal, StepTotal, WaitTotal};

use crate::platform::cores::calling_thread_cpu_seconds;

/// How a tree is watched.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WatchPlan {
    /// Samples per second.
    pub hz: f64,
    /// Seconds each bucket of the series holds.
    pub bucket_s: f64,
}

/// The sampler of one tree, on a thread of its own until finished.
pub struct Watch {
    stop: Option<Sender<()>>,
    thread: Option<JoinHandle<Account>>,
}

impl Watch {
    /// Starts watching the tree under `root` (its threads, its children as they come):
    /// a first sample now, then one every 1/hz seconds. The sampler's own thread is
    /// never counted, so a process may watch itself.
    pub fn start(root: u32, plan: WatchPlan) -> std::io::Result<Watch> {
        let (stop, stopped) = std::sync::mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("ratelab-account".into())
            .spawn(move || keep(root, plan, &stopped))?;
        Ok(Watch {
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    /// Takes a last sample and gives the account.
    pub fn finish(mut self) -> Account {
        self.stop.take();
        self.thread
            .take()
            .and_then(|t| t.join().ok())
            .unwrap_or_default()
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        self.stop.take();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The longest gap between samples of a quiet tree (one where nothing ran): a thread
/// changes what it waits for only by running, so a quiet tree's samples say nothing new.
const QUIET_GAP: Duration = Duration::from_millis(50);

/// The sampler's loop: samples every 1/hz seconds until told to stop or the root ends.
/// While the tree stays quiet the gap doubles up to [`QUIET_GAP`]; the first sample that
/// sees a thread run brings it back.
fn keep(root: u32, plan: WatchPlan, stop: &Receiver<()>) -> Account {
    let me = rustix::thread::gettid().as_raw_nonzero().get() as u32;
    let cpu_before = calling_thread_cpu_seconds();
    let every = Duration::from_secs_f64(1.0 / plan.hz.max(0.1));
    let mut totals = totals::Totals::new(root, me, plan.bucket_s);
    let mut gap = every;
    let mut next = Instant::now();
    loop {
        let quiet = totals.sample();
        if !totals.root_alive() {
            break;
        }
        gap = if quiet {
            (gap * 2).min(QUIET_GAP.max(every))
        } else {
            every
        };
        next += gap;
        let now = Instant::now();
        if next < now {
            // Behind (a slow look, a busy machine): keep the grid, skip what was missed.
            let behind = now.duration_since(next).as_secs_f64();
            next += gap.mul_f64((behind / gap.as_secs_f64()).ceil());
        }
        match stop.recv_timeout(next.saturating_duration_since(Instant::now())) {
            Err(RecvTimeoutError::Timeout) => {}
            Ok(()) | Err(RecvTimeoutError::Disconnected) => {
                totals.sample();
                break;
            }
        }
    }
    totals.close(calling_thread_cpu_seconds() - cpu_before)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan() -> WatchPlan {
        WatchPlan {
            hz: 100.0,
            bucket_s: 0.1,
        }
    }

    /// Watches `sh -c SCRIPT` to its end.
    fn watch_shell(script: &str) -> Account {
        let mut child = std::process::Command::new("sh")
            .args(["-c", script])
            .spawn()
            .unwrap();
        let watch = Watch::start(child.id(), plan()).unwrap();
        child.wait().unwrap();
        watch.finish()
    }

    #[test]
    fn a_sleeping_child_sleeps_and_a_spinning_one_runs() {
        let mut child = std::process::Command::new("sleep")
            .arg("0.4")
            .spawn()
            .unwrap();
        let watch = Watch::start(child.id(), plan()).unwrap();
        // The last sample sees it ended and not yet reaped, as `why`'s does.
        let stat = format!("/proc/{}/stat", child.id());
        let ended = || {
            std::fs::read_to_string(&stat).is_ok_and(|s| {
                s.rsplit(')')
                    .next()
                    .is_some_and(|r| r.trim_start().starts_with('Z'))
            })
        };
        while !ended() {
            std::thread::sleep(Duration::from_millis(5));
        }
        let account = watch.finish();
        child.wait().unwrap();
        let sleep = account.share(Step::Sleep);
        assert!(sleep > 0.8, "{account:#?}");
        // Its end is charged to its sleep, not to the fault its ended thread reads as.
        assert!(account.share(Step::Memory) < 0.02, "{account:#?}");
        // Nothing ran: the samples spread out to one every QUIET_GAP, where 100 Hz
        // would take 40.
        let quiet = account.seconds / QUIET_GAP.as_secs_f64();
        assert!(account.samples as f64 <= quiet + 6.0, "{account:#?}");
        let account = watch_shell("i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done");
        let busy = account.share(Step::Cpu) + account.share(Step::CpuWait);
        assert!(busy > 0.8, "{account:#?}");
        // A busy tree is sampled at the plan's rate, give or take a busy machine's misses.
        let planned = account.seconds * plan().hz;
        assert!(account.samples as f64 >= 0.5 * planned, "{account:#?}");
    }

    #[test]
    fn a_shell_waiting_on_a_pipeline_is_charged_what_the_pipeline_does() {
        // The reader sleeps; the writer spins: the shell, which waits for both, and
        // the reader, which waits on the pipe, are charged the writer's CPU.
        let account = watch_shell(
            "sh -c 'i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done; echo x' | cat > /dev/null",
        );
        let busy = account.share(Step::Cpu) + account.share(Step::CpuWait);
        assert!(busy > 0.8, "{account:#?}");
        let cat = account.processes.iter().find(|p| p.name == "cat");
        assert!(
            cat.is_some_and(|c| c.waits.iter().any(|w| w.what == "a pipe's writer")),
            "{account:#?}"
        );
    }
}
