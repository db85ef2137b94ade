//! Any command at 1..N CPUs: each run held to n CPUs by affinity (inherited by its
//! children) or by a CFS quota (`--vcpus`, as a VM with n vCPUs), timed from spawn to
//! exit with its CPU time from wait4, in R rounds of every n. Speedup, efficiency and throughput
//! are worked out from the stored runs by the kind.

mod charts;
mod kind;
mod limit;
mod view;

use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use kind::{ScaleKind, ScalePoint, ScaleSummary};

use self::limit::QuotaGroup;
use crate::catch::{Family, skew};
use crate::error::Error;
use crate::workload::{Context, Kind, Workload};

/// How a run is held to n CPUs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Limit {
    /// An affinity mask of the first n online CPUs.
    Affinity,
    /// A CFS quota of n CPUs' time in a cgroup (`--vcpus`).
    Quota,
}

/// What `ratelab scale` was asked to do.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScalePlan {
    /// The command and its arguments.
    pub command: Vec<String>,
    /// CPU counts, each run in turn.
    pub cpus: Vec<usize>,
    /// Runs per CPU count.
    pub repeat: u32,
    /// Bytes one run processes, for throughput.
    pub bytes: Option<u64>,
    /// How runs are held to n CPUs.
    pub limit: Limit,
    /// The online CPUs, the first n of which a run with affinity may use.
    pub online: Vec<usize>,
}

/// What a scale item is: one run of the command, the only kind there is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ScaleOp {
    /// One run of the command at one CPU count.
    Run,
}

/// One run of the command.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScaleItem {
    /// Always [`ScaleOp::Run`].
    pub op: ScaleOp,
    /// CPUs it was held to.
    pub cpus: usize,
    /// Which run of that count (0-based).
    pub repeat: u32,
    /// Wall seconds from spawn to exit.
    pub seconds: f64,
    /// User CPU seconds of the command and its children.
    pub user_seconds: f64,
    /// System CPU seconds of the command and its children.
    pub system_seconds: f64,
    /// Its exit code; null when a signal ended it.
    pub exit_code: Option<i32>,
    /// Bytes per second, with `--bytes`.
    pub bytes_per_sec: Option<f64>,
}

/// What a scale run says beside its items: the program its command resolved to.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ScaleContext {
    /// The program run; null before it was resolved.
    pub program: Option<String>,
}

/// The scale workload.
pub struct ScaleWorkload {
    plan: ScalePlan,
    program: Option<PathBuf>,
    group: Option<QuotaGroup>,
}

impl ScaleWorkload {
    /// A workload for `plan`.
    pub fn new(plan: ScalePlan) -> ScaleWorkload {
        ScaleWorkload {
            plan,
            program: None,
            group: None,
        }
    }

    fn run_once(&self, cpus: usize, ctx: &Context) -> Result<ScaleItem, Error> {
        let program = self.program.as_ref().expect("prepared");
        let name = self.plan.command[0].clone();
        let mut command = Command::new(program);
        command
            .args(&self.plan.command[1..])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .process_group(0);
        match self.plan.limit {
            Limit::Affinity => {
                let mut set = rustix::thread::CpuSet::new();
                for &cpu in self.plan.online.iter().take(cpus) {
                    set.set(cpu);
                }
                // SAFETY: sched_setaffinity is a plain system call, safe between fork and exec.
                unsafe {
                    command.pre_exec(move || {
                        rustix::thread::sched_setaffinity(None, &set).map_err(Into::into)
                    });
                }
            }
            Limit::Quota => {
                let group = self.group.as_ref().expect("made in setup");
                group.limit(cpus)?;
                let procs = group.procs().clone();
                // SAFETY: `join` uses only open, write and close.
                unsafe {
                    command.pre_exec(move || limit::join(&procs));
                }
            }
        }
        let started = Instant::now();
        let child = command.spawn().map_err(|e| Error::io("start", &name, e))?;
        let pid = child.id() as libc::pid_t;
        let mut status = 0;
        let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
        loop {
            // SAFETY: wait4 on our own child, filling `status` and `usage`.
            let rc = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, usage.as_mut_ptr()) };
            if rc == pid {
                break;
            }
            if rc < 0 {
                return Err(Error::io(
                    "wait for",
                    &name,
                    std::io::Error::last_os_error(),
                ));
            }
            if ctx.cancel.is_set() {
                // SAFETY: a signal to the command's own process group.
                unsafe { libc::kill(-pid, libc::SIGKILL) };
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        let seconds = skew(Family::Scale, started.elapsed().as_secs_f64());
        if ctx.cancel.is_set() {
            return Err(Error::Interrupted);
        }
        // SAFETY: wait4 returned the child, so it filled `usage`.
        let usage = unsafe { usage.assume_init() };
        let time = |t: libc::timeval| skew(Family::Scale, t.tv_sec as f64 + t.tv_usec as f64 / 1e6);
        Ok(ScaleItem {
            op: ScaleOp::Run,
            cpus,
            repeat: 0,
            seconds,
            user_seconds: time(usage.ru_utime),
            system_seconds: time(usage.ru_stime),
            exit_code: libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status)),
            bytes_per_sec: self.plan.bytes.map(|b| b as f64 / seconds.max(1e-9)),
        })
    }
}

/// The program `name` resolves to: a path as given, or the first match on PATH.
fn resolve(name: &str) -> Option<PathBuf> {
    if name.contains('/') {
        return Some(PathBuf::from(name)).filter(|p| p.is_file());
    }
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join(name))
            .find(|p| p.is_file())
    })
}

impl Workload for ScaleWorkload {
    fn kind(&self) -> &'static str {
        ScaleKind::NAME
    }

    fn target(&self) -> String {
        self.plan.command.join(" ")
    }

    fn params(&self) -> Value {
        serde_json::to_value(&self.plan).expect("plans serialise")
    }

    fn context(&self) -> Value {
        let context = ScaleContext {
            // Lossy rather than failing on a path that is not UTF-8: it is shown, not run.
            program: self
                .program
                .as_ref()
                .map(|p| p.to_string_lossy().into_owned()),
        };
        serde_json::to_value(context).expect("contexts serialise")
    }

    fn prepare(&mut self) -> Result<(), Error> {
        let name = &self.plan.command[0];
        self.program = Some(resolve(name).ok_or_else(|| Error::Target {
            path: name.into(),
            reason: "no such program (not a file, nor on PATH)".into(),
        })?);
        if self.plan.limit == Limit::Quota {
            self.group = Some(QuotaGroup::create()?);
        }
        Ok(())
    }

    /// Runs in rounds, each of every CPU count in turn, so that a machine whose speed
    /// drifts (a host's other guests, a warming CPU) moves every count alike.
    fn run(&mut self, ctx: &Context) -> Result<(), Error> {
        for repeat in 0..self.plan.repeat {
            for &cpus in &self.plan.cpus {
                ctx.sink.status(format!(
                    "{} on {cpus} CPU{}, run {} of {}",
                    self.plan.command[0],
                    if cpus == 1 { "" } else { "s" },
                    repeat + 1,
                    self.plan.repeat
                ));
                let item = ScaleItem {
                    repeat,
                    ..self.run_once(cpus, ctx)?
                };
                ctx.sink.progress().add(0);
                ctx.sink.item(&item);
            }
            ctx.sink.stage_done(format!("round {}", repeat + 1));
        }
        Ok(())
    }

    fn cleanup(&mut self) -> Result<(), Error> {
        self.group = None;
        Ok(())
    }
}
