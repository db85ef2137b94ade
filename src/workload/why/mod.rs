//! Which step limits any command: `ratelab why -- CMD` starts the command with its own
//! stdin, stdout and stderr (as time(1) does), or `--pid` watches a running process,
//! and the thread account (`crate::account`) follows its whole tree until it ends. The
//! account's steps, processes and series are stored as items; what each device and
//! link waited on can do, as ratelab measured it before (a lookup the verb gives) or
//! as its physics says, is stored beside them, so the kind answers from the run alone.

mod answer;
mod beside;
mod kind;
mod measured;
mod stored;
mod tables;
mod view;
mod what_if;

use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus};
use std::time::{Duration, Instant};

use serde_json::Value;

pub use answer::answer;
pub use kind::WhyKind;
pub use stored::{
    Capability, HeldBy, IntervalItem, Limiting, Measured, Moved, NotMeasured, ProcessItem,
    StepItem, StepShare, TcpItem, ThreadCpu, WaitItem, WhatIfItem, WhatIfPlan, WhatIfStep,
    WhyContext, WhyItem, WhyPlan, WhySummary,
};
pub use what_if::NAMES as WHAT_IF_NAMES;

use crate::account::{Account, Step, Watch, WatchPlan};
use crate::error::Error;
use crate::platform::StorageChain;
use crate::platform::nics::Nic;
use crate::platform::slowdown::Slowdown;
use crate::workload::{Context, Kind, Workload};
use what_if::DevicesMoved;

/// What the verb is asked of a device or link the command waited on.
#[derive(Debug, Clone)]
pub struct Ask {
    /// The step (`disk_read`, `net_send`).
    pub step: Step,
    /// The device or link as the step names it.
    pub place: String,
    /// The storage chain of a device's filesystem, where one is mounted.
    pub chain: Option<StorageChain>,
    /// The interface of a link, where known.
    pub nic: Option<Nic>,
    /// The peer's address, for a link.
    pub peer: Option<std::net::IpAddr>,
}

/// How the verb finds what ratelab measured of a device or link before.
pub type Lookup = Box<dyn Fn(&Ask) -> Option<Capability> + Send>;

/// How often a stop is looked for while the command's end is waited on.
const STOP_POLL: Duration = Duration::from_millis(100);
/// How often the command's end is looked for where it cannot be waited on: with no pidfd,
/// and in the grace after SIGTERM.
const POLL: Duration = Duration::from_millis(20);
/// How long an ended command's tree gets after SIGTERM before SIGKILL.
const GRACE: Duration = Duration::from_secs(2);

/// The `why` workload.
pub struct WhyWorkload {
    plan: WhyPlan,
    lookup: Option<Lookup>,
    program: Option<PathBuf>,
    child: Option<Child>,
    context: WhyContext,
}

impl WhyWorkload {
    /// A workload for `plan`; `lookup` finds earlier runs of a device or link.
    pub fn new(plan: WhyPlan, lookup: Option<Lookup>) -> WhyWorkload {
        WhyWorkload {
            plan,
            lookup,
            program: None,
            child: None,
            context: WhyContext::default(),
        }
    }

    /// Starts the command, or finds the process to watch: the root of the tree.
    fn start(&mut self) -> Result<(u32, Instant), Error> {
        if let Some(pid) = self.plan.pid {
            return Ok((pid, Instant::now()));
        }
        let start = Instant::now();
        let child = self.spawn(None)?;
        let pid = child.id();
        self.child = Some(child);
        Ok((pid, start))
    }

    /// Starts the command, in `group` where one is given.
    fn spawn(&self, group: Option<&Slowdown>) -> Result<Child, Error> {
        let program = self.program.as_ref().expect("resolved in prepare");
        let name = self.plan.command[0].as_str();
        // In ratelab's own process group: Ctrl-C reaches it as it would without ratelab,
        // and it may read the terminal.
        let mut command = Command::new(program);
        command.arg0(name).args(&self.plan.command[1..]);
        if let Some(group) = group {
            // SAFETY: the hook makes only async-signal-safe calls (open, write, close).
            unsafe { command.pre_exec(group.entering()) };
        }
        command.spawn().map_err(|e| match group {
            Some(group) => Error::io("start in cgroup", group.path(), e),
            None => Error::io("start", name, e),
        })
    }

    /// Runs the command once more, in `group` where one is given, and times it from
    /// its start to its exit.
    fn once(
        &mut self,
        group: Option<&Slowdown>,
        ctx: &Context,
    ) -> Result<(f64, ExitStatus), Error> {
        let start = Instant::now();
        let child = self.spawn(group)?;
        let root = child.id();
        self.child = Some(child);
        let (ended_by, at) = self.wait(root, start, ctx);
        if ended_by == "interrupted" {
            self.end_tree(root);
            self.reap();
            return Err(Error::Interrupted);
        }
        let status = self.reap().ok_or_else(|| {
            Error::io(
                "wait for",
                &self.plan.command[0],
                std::io::Error::other("lost its child"),
            )
        })?;
        Ok((at.duration_since(start).as_secs_f64(), status))
    }

    /// Waits until the root ends, `--seconds` pass, or a stop; says which.
    fn wait(&self, root: u32, start: Instant, ctx: &Context) -> (&'static str, Instant) {
        let pidfd = rustix::process::Pid::from_raw(root as i32).and_then(|pid| {
            rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty()).ok()
        });
        let deadline = self
            .plan
            .seconds
            .map(|s| start + Duration::from_secs_f64(s));
        loop {
            if ctx.cancel.is_set() {
                return ("interrupted", Instant::now());
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return ("seconds", Instant::now());
            }
            let ended = match &pidfd {
                Some(fd) => {
                    let mut fds = [rustix::event::PollFd::new(fd, rustix::event::PollFlags::IN)];
                    let wait = deadline.map_or(STOP_POLL, |d| {
                        STOP_POLL.min(d.saturating_duration_since(Instant::now()))
                    });
                    let timeout = rustix::event::Timespec {
                        tv_sec: 0,
                        tv_nsec: wait.as_nanos() as i64,
                    };
                    matches!(rustix::event::poll(&mut fds, Some(&timeout)), Ok(n) if n > 0)
                }
                None => {
                    std::thread::sleep(POLL);
                    !std::path::Path::new(&format!("/proc/{root}")).exists()
                }
            };
            if ended {
                return ("exited", Instant::now());
            }
        }
    }

    /// Ends the command's tree, SIGTERM first, SIGKILL for what is left after a grace.
    fn end_tree(&mut self, root: u32) {
        let Some(child) = self.child.as_mut() else {
            return;
        };
        let tree = || -> Vec<u32> {
            let processes = crate::platform::procfs::processes(&|_| false);
            let mut tree = vec![root];
            loop {
                let before = tree.len();
                for p in &processes {
                    if tree.contains(&p.ppid) && !tree.contains(&p.pid) {
                        tree.push(p.pid);
                    }
                }
                if tree.len() == before {
                    return tree;
                }
            }
        };
        let signal = |pids: &[u32], signal: i32| {
            for pid in pids {
                // SAFETY: kill sends a signal to a process this run started or its child.
                unsafe { libc::kill(*pid as libc::pid_t, signal) };
            }
        };
        signal(&tree(), libc::SIGTERM);
        let until = Instant::now() + GRACE;
        while Instant::now() < until {
            if let Ok(Some(_)) = child.try_wait() {
                break;
            }
            std::thread::sleep(POLL);
        }
        signal(&tree(), libc::SIGKILL);
    }

    /// Reaps the command: how it ended.
    fn reap(&mut self) -> Option<ExitStatus> {
        self.child.take().and_then(|mut child| child.wait().ok())
    }

    /// Sends the account's steps, processes and series as items, and keeps the rest.
    fn record(&mut self, account: &Account, ctx: &Context) {
        for total in &account.steps {
            ctx.sink.item(&WhyItem::Step(StepItem::of(total)));
        }
        for process in &account.processes {
            ctx.sink.item(&WhyItem::Process(ProcessItem::of(process)));
        }
        for bucket in &account.buckets {
            ctx.sink.item(&WhyItem::Interval(IntervalItem::of(bucket)));
        }
        for connection in &account.tcp {
            ctx.sink.item(&WhyItem::Tcp(connection.clone()));
        }
        let context = &mut self.context;
        context.samples = account.samples;
        context.sampled_s = account.seconds;
        context.sampler_cpu_seconds = account.sampler_cpu_seconds;
        context.sampler_displaced_s = account.sampler_displaced_s;
        context.cpus = Some(crate::platform::cores::allowed_cpus().len()).filter(|n| *n > 0);
        context.held_by = account
            .holders
            .iter()
            .map(|h| HeldBy {
                pid: h.pid,
                name: h.name.clone(),
                cpu_seconds: h.cpu_seconds,
            })
            .collect();
        context.unreadable = account
            .processes
            .iter()
            .filter(|p| !p.waits_readable)
            .map(|p| format!("{} (pid {})", p.name, p.pid))
            .collect();
        let capabilities = account
            .steps
            .iter()
            .filter(|s| s.key.step.on_device() || s.key.step.on_link())
            .map(|s| self.capability(s.key.step, &s.key.place))
            .collect();
        self.context.capabilities = capabilities;
    }

    /// What a device or link can do: an earlier run of it, else its physics, else
    /// what to run to know.
    fn capability(&self, step: Step, place: &crate::account::Place) -> Capability {
        let chain = place
            .device()
            .and_then(crate::platform::mount_point_of_device)
            .and_then(|mount| crate::platform::probe_path(&mount).ok());
        let nic = place.interface().and_then(|name| {
            crate::platform::nics::nics()
                .into_iter()
                .find(|n| n.name == name)
        });
        let peer = place
            .peer()
            .and_then(|p| p.parse::<std::net::SocketAddr>().ok())
            .map(|a| a.ip());
        let ask = Ask {
            step,
            place: place.words(),
            chain,
            nic,
            peer,
        };
        if let Some(found) = self.lookup.as_ref().and_then(|lookup| lookup(&ask)) {
            return found;
        }
        physics(&ask)
    }
}

/// A folder on the filesystem mounted at `mount` that this user may write in, for the
/// command that would measure its device: the user's home, the working folder, the
/// mount point itself or a shared temporary folder, the first on that filesystem; else
/// the mount point.
fn writable_folder_on(mount: &std::path::Path) -> PathBuf {
    use std::os::unix::fs::MetadataExt;
    let Ok(device) = std::fs::metadata(mount).map(|m| m.dev()) else {
        return mount.to_path_buf();
    };
    let candidates = [
        std::env::var_os("HOME").map(PathBuf::from),
        std::env::current_dir().ok(),
        Some(mount.to_path_buf()),
        Some(PathBuf::from("/var/tmp")),
        Some(PathBuf::from("/tmp")),
    ];
    candidates
        .into_iter()
        .flatten()
        .find(|folder| {
            std::fs::metadata(folder).is_ok_and(|m| m.is_dir() && m.dev() == device)
                && rustix::fs::access(folder, rustix::fs::Access::WRITE_OK).is_ok()
        })
        .unwrap_or_else(|| mount.to_path_buf())
}

/// Characters of a watched process's command line shown before it is cut: a
/// daemon's can run to pages.
const WATCHED_CHARS: usize = 60;

/// A process watched with `--pid`, by its command line as read at the start (cut
/// where it runs long) and its pid: `postgres -D /var/lib/postgresql (pid 2226)`.
fn watched(argv: &[String], pid: u32) -> String {
    let line = argv.join(" ");
    let shown = match line.char_indices().nth(WATCHED_CHARS) {
        Some((cut, _)) => format!("{}…", line[..cut].trim_end()),
        None if line.is_empty() => "process".to_string(),
        None => line,
    };
    format!("{shown} (pid {pid})")
}

/// A device's or link's limit from its physics, else what to run to measure it.
fn physics(ask: &Ask) -> Capability {
    let limit = |bytes_per_sec: Option<f64>, source: String| Capability {
        step: ask.step,
        place: ask.place.clone(),
        bytes_per_sec,
        run_id: None,
        source,
    };
    if let Some(chain) = &ask.chain {
        if let Some(rate) = chain.max_bytes_per_sec {
            let via = chain.limit_via.clone().unwrap_or_else(|| "its link".into());
            return limit(
                Some(rate),
                format!(
                    "the {} limit of {via}",
                    crate::vocab::units::format_rate(rate)
                ),
            );
        }
        return limit(
            None,
            format!(
                "no run measured it yet; `ratelab disk {}` would measure it",
                writable_folder_on(&chain.mount_point).display()
            ),
        );
    }
    // Only a physical link's speed is physics: a veth or bridge reports a number its
    // driver makes up (10000 Mbit/s), whatever shapes it.
    if let Some(nic) = &ask.nic
        && nic.kind == "ethernet"
        && let Some(bits) = nic.speed_bits_per_sec
    {
        return limit(
            Some(bits as f64 / 8.0),
            format!(
                "the {} link speed of {} (sysfs)",
                crate::vocab::units::format_bits_rate(bits as f64 / 8.0),
                nic.name
            ),
        );
    }
    match (ask.step.on_link(), ask.peer) {
        (true, Some(peer)) => limit(
            None,
            format!("no run measured the link yet: `ratelab net {peer}` would"),
        ),
        _ => limit(None, "nothing measured it yet".into()),
    }
}

impl Workload for WhyWorkload {
    fn kind(&self) -> &'static str {
        WhyKind::NAME
    }

    fn touches(&self) -> crate::workload::Touches {
        crate::workload::Touches {
            accounts_threads: true,
            ..Default::default()
        }
    }

    fn target(&self) -> String {
        match (&self.plan.command[..], self.plan.pid) {
            ([], Some(pid)) => watched(&self.context.argv, pid),
            (command, _) => command.join(" "),
        }
    }

    fn params(&self) -> Value {
        serde_json::to_value(&self.plan).expect("plans serialise")
    }

    fn context(&self) -> Value {
        serde_json::to_value(&self.context).expect("contexts serialise")
    }

    fn prepare(&mut self) -> Result<(), Error> {
        if let Some(pid) = self.plan.pid {
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).map_err(|e| {
                let gone = e.kind() == std::io::ErrorKind::NotFound;
                let e = if gone {
                    std::io::Error::other("no such process")
                } else {
                    e
                };
                Error::io("watch", format!("process {pid} (--pid)"), e)
            })?;
            self.context.argv = cmdline
                .split(|b| *b == 0)
                .filter(|w| !w.is_empty())
                .map(|w| String::from_utf8_lossy(w).into_owned())
                .collect();
            if self.context.argv.is_empty() {
                // A kernel thread, or a process between fork and exec: its name.
                let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
                self.context.argv = vec![format!("[{}]", comm.trim())];
            }
            self.context.pid = Some(pid);
            return Ok(());
        }
        let program = crate::platform::programs::resolve(&self.plan.command[0])?;
        self.context.program = Some(program.display().to_string());
        self.context.argv = self.plan.command.clone();
        self.program = Some(program);
        Ok(())
    }

    fn run(&mut self, ctx: &Context) -> Result<(), Error> {
        // What the devices moved is read only for the what-ifs.
        let counting = self.plan.what_if.is_some().then(DevicesMoved::start);
        let (root, start) = self.start()?;
        self.context.pid = Some(root);
        let plan = WatchPlan {
            hz: self.plan.hz,
            bucket_s: self.plan.interval_s,
        };
        let watch =
            Watch::start(root, plan).map_err(|e| Error::io("start the sampler of", "why", e));
        let (mut ended_by, at) = self.wait(root, start, ctx);
        if ended_by == "interrupted" {
            self.end_tree(root);
        }
        // The last sample sees the ended command before it is reaped.
        let account = watch.map(Watch::finish).unwrap_or_default();
        let moved = counting.map(DevicesMoved::since);
        if let Some(status) = self.reap() {
            self.context.exit_code = status.code();
            self.context.signal = status.signal();
        }
        // A Ctrl-C at the terminal reaches the command too, in ratelab's process group:
        // it may have ended of it before the stop was seen, interrupted all the same.
        if ctx.cancel.is_set() {
            ended_by = "interrupted";
        }
        self.context.wall_s = Some(at.duration_since(start).as_secs_f64());
        self.context.ended_by = Some(ended_by.to_string());
        self.record(&account, ctx);
        ctx.sink.stage_done("command");
        if ended_by == "interrupted" {
            return Err(Error::Interrupted);
        }
        if let (Some(asked), Some(moved)) = (self.plan.what_if.clone(), moved) {
            let outcome = what_if::measure(self, &asked, &account, &moved, ctx);
            ctx.sink.stage_done("what-ifs");
            outcome?;
        }
        Ok(())
    }

    fn cleanup(&mut self) -> Result<(), Error> {
        if let Some(root) = self.child.as_ref().map(Child::id) {
            self.end_tree(root);
            self.reap();
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_watched_process_is_named_by_its_command_line_and_pid() {
        let argv = |words: &[&str]| words.iter().map(|w| w.to_string()).collect::<Vec<_>>();
        assert_eq!(
            watched(&argv(&["sleep", "30"]), 2226),
            "sleep 30 (pid 2226)"
        );
        assert_eq!(watched(&[], 7), "process (pid 7)");
        let long = watched(&argv(&["java", &"-Dx=é".repeat(40)]), 9);
        assert!(long.ends_with("… (pid 9)"), "{long}");
        assert_eq!(
            long.chars().count(),
            WATCHED_CHARS + "… (pid 9)".chars().count()
        );
    }
}
