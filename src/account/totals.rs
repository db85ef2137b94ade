//! What the samples add up to: the wall time charged to each step at each place, with
//! the bytes its device or interface moved while the tree waited on it; each process's
//! own time; who held the CPUs; and a series of buckets for charts and for judging a
//! run stage by stage.

use std::collections::HashMap;
use std::fs::File;
use std::time::Instant;

use super::charge::{Charged, Interval, ThreadSpan, charge, describe};
use super::classify::Wait;
use super::holders::Holders;
use super::look::{Machine, TcpTotal};
use super::step::{Place, Step, StepKey};
use super::tree::Tree;
use crate::catch::{Family, skew};
use crate::platform::cores::calling_thread_cpu_seconds;
use crate::platform::threads::pread_into;

/// The wall time charged to one step at one place.
#[derive(Debug, Clone, PartialEq)]
pub struct StepTotal {
    /// The step and where.
    pub key: StepKey,
    /// Wall seconds charged to it.
    pub seconds: f64,
    /// For a device step, wall seconds charged to time on a CPU (counted under `cpu`)
    /// in the intervals the tree waited on it: work that may go with the step, as a
    /// file system's journaling does with an fsync.
    pub cpu_alongside_s: f64,
    /// Seconds of the windows (100 ms or more) the tree waited on its device or
    /// interface for nearly all of (or, where there were none, half or more of), where
    /// that was read through them: what its bytes are a rate over.
    pub active_seconds: f64,
    /// Bytes its device or interface moved its way (read or written, received or
    /// sent) in those windows.
    pub bytes: u64,
}

impl StepTotal {
    /// The rate of its device or interface while the tree waited on it.
    pub fn bytes_per_sec(&self) -> Option<f64> {
        (self.active_seconds > 0.0 && self.bytes > 0)
            .then(|| self.bytes as f64 / self.active_seconds)
    }
}

/// What a process of the tree did with its own threads' time.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ProcessTotal {
    /// Its id.
    pub pid: u32,
    /// Its parent.
    pub ppid: u32,
    /// Its name.
    pub name: String,
    /// Most threads it had at once.
    pub threads: usize,
    /// Thread-seconds on a CPU.
    pub cpu_s: f64,
    /// Thread-seconds waiting for a CPU.
    pub cpu_wait_s: f64,
    /// Thread-seconds in each wait, most first.
    pub waits: Vec<WaitTotal>,
    /// Seconds on a CPU by thread name, most first.
    pub cpu_by_thread: Vec<(String, f64)>,
    /// Whether its waits could be named (as another user's could not).
    pub waits_readable: bool,
}

/// Thread-seconds of a process in one wait.
#[derive(Debug, Clone, PartialEq)]
pub struct WaitTotal {
    /// The wait in words (`disk_read loop3`, `its children`, `a pipe's reader`).
    pub what: String,
    /// Its step, where it is one (not for a wait on another member or on nothing).
    pub step: Option<Step>,
    /// How its threads slept in it, as the kernel's record names it.
    pub kind: Option<super::Sleep>,
    /// Thread-seconds.
    pub seconds: f64,
}

/// A process outside the tree that ran on the CPUs the tree waited for.
#[derive(Debug, Clone, PartialEq)]
pub struct Holder {
    /// Its id.
    pub pid: u32,
    /// Its name.
    pub name: String,
    /// CPU seconds it ran in the seconds the tree waited.
    pub cpu_seconds: f64,
}

/// Bytes a device or interface moved in a bucket or over the account.
#[derive(Debug, Clone, PartialEq)]
pub struct Counted {
    /// The device (`loop3`) or interface (`veth-a`).
    pub name: String,
    /// Whether it is a network interface.
    pub interface: bool,
    /// Bytes read (received).
    pub read_bytes: u64,
    /// Bytes written (sent).
    pub written_bytes: u64,
}

/// A stretch of the series.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Bucket {
    /// Its end, seconds after the first sample.
    pub t_s: f64,
    /// Its length.
    pub seconds: f64,
    /// Wall seconds charged to each step, in [`Step::ALL`] order.
    pub steps: [f64; 9],
    /// Thread-seconds on a CPU, all threads.
    pub cpu_s: f64,
    /// Thread-seconds waiting for a CPU, all threads.
    pub cpu_wait_s: f64,
    /// What each device and interface read moved.
    pub counted: Vec<Counted>,
}

/// The account of a watched tree.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Account {
    /// Seconds from the first sample to the last.
    pub seconds: f64,
    /// Samples taken.
    pub samples: u64,
    /// Wall time by step and place, most first.
    pub steps: Vec<StepTotal>,
    /// Each process of the tree, in the order seen.
    pub processes: Vec<ProcessTotal>,
    /// Who held the CPUs the tree waited for, most first.
    pub holders: Vec<Holder>,
    /// The series.
    pub buckets: Vec<Bucket>,
    /// What each device and interface waited on moved over the account.
    pub counted: Vec<Counted>,
    /// TCP's own account of each connection the tree waited on.
    pub tcp: Vec<TcpTotal>,
    /// CPU seconds the sampler's thread used.
    pub sampler_cpu_seconds: f64,
    /// Thread-seconds the tree waited for a CPU because the sampler held one, taken
    /// out of its waits.
    pub sampler_displaced_s: f64,
    /// The files (by path) a thread of the tree was seen waiting on.
    pub files: Vec<String>,
}

impl Account {
    /// The share of the wall time charged to `step`, every place together.
    pub fn share(&self, step: Step) -> f64 {
        if self.seconds <= 0.0 {
            return 0.0;
        }
        self.steps
            .iter()
            .filter(|s| s.key.step == step)
            .map(|s| s.seconds)
            .sum::<f64>()
            / self.seconds
    }
}

/// A device or interface whose counters are read at every sample once a wait names it.
struct Counter {
    name: String,
    interface: bool,
    files: Vec<File>,
    first: (u64, u64),
    last: (u64, u64),
    /// Opened at this sample, with no figure before it.
    fresh: bool,
}

impl Counter {
    fn open(name: &str, interface: bool) -> Option<Counter> {
        let files = if interface {
            let stat = |c: &str| File::open(format!("/sys/class/net/{name}/statistics/{c}"));
            vec![stat("rx_bytes").ok()?, stat("tx_bytes").ok()?]
        } else {
            vec![File::open(format!("/sys/class/block/{name}/stat")).ok()?]
        };
        let mut counter = Counter {
            name: name.to_string(),
            interface,
            files,
            first: (0, 0),
            last: (0, 0),
            fresh: true,
        };
        counter.first = counter.read(&mut Vec::new())?;
        counter.last = counter.first;
        Some(counter)
    }

    /// Bytes read and written (received and sent) since boot.
    fn read(&self, buffer: &mut Vec<u8>) -> Option<(u64, u64)> {
        let mut number = |file: &File| -> Option<Vec<u64>> {
            pread_into(file, buffer).ok()?;
            Some(
                std::str::from_utf8(buffer)
                    .ok()?
                    .split_ascii_whitespace()
                    .filter_map(|f| f.parse().ok())
                    .collect(),
            )
        };
        if self.interface {
            Some((
                *number(&self.files[0])?.first()?,
                *number(&self.files[1])?.first()?,
            ))
        } else {
            // Sectors of 512 bytes read (3rd field) and written (7th), block/stat.rst.
            let fields = number(&self.files[0])?;
            Some((fields.get(2)? * 512, fields.get(6)? * 512))
        }
    }
}

/// Seconds a rate window holds at least (the bucket's length, where longer).
const RATE_WINDOW_S: f64 = 0.1;
/// The share of a window a step must be waited on in for its rate to be taken from
/// the full windows alone.
const FULL_WINDOW: f64 = 0.9;

/// The samples of the current rate window: the seconds charged to each step at a
/// device or link, and what each counter moved.
#[derive(Default)]
struct Window {
    seconds: f64,
    charged: HashMap<StepKey, f64>,
    moved: HashMap<String, (u64, u64)>,
    /// Counters opened in the window: what they moved before is not known, so the
    /// window gives them no rate (an iperf3 sender's first 2 MB, out in the sample
    /// that named its link, read 186 Mbit/s of a link of 216).
    opened: Vec<String>,
}

/// The running totals of a watch.
pub struct Totals {
    root: u32,
    tree: Tree,
    machine: Machine,
    first: Option<Instant>,
    last: Option<Instant>,
    samples: u64,
    bucket_s: f64,
    steps: HashMap<StepKey, StepTotal>,
    processes: HashMap<u32, ProcessTotal>,
    order: Vec<u32>,
    counters: Vec<Counter>,
    bucket: Bucket,
    buckets: Vec<Bucket>,
    window: Window,
    /// Each step's windows waited nearly all of: seconds and bytes.
    full: HashMap<StepKey, (f64, u64)>,
    holders: Holders,
    buffer: Vec<u8>,
    /// CPUs the tree may run on.
    cpus: usize,
    /// The sampler thread's own CPU seconds at the last sample.
    own_cpu_s: f64,
    /// Thread-seconds of waiting for a CPU the sampler's own CPU caused, taken out.
    displaced_s: f64,
}

impl Totals {
    /// Nothing counted yet of the tree under `root`; thread `skip_tid` is never counted.
    pub fn new(root: u32, skip_tid: u32, bucket_s: f64) -> Totals {
        Totals {
            root,
            tree: Tree::new(root, Some(skip_tid)),
            machine: Machine::default(),
            first: None,
            last: None,
            samples: 0,
            bucket_s,
            steps: HashMap::new(),
            processes: HashMap::new(),
            order: Vec::new(),
            counters: Vec::new(),
            bucket: Bucket::default(),
            buckets: Vec::new(),
            window: Window::default(),
            full: HashMap::new(),
            holders: Holders::new(),
            buffer: Vec::with_capacity(256),
            cpus: crate::platform::cores::allowed_cpus().len().max(1),
            own_cpu_s: calling_thread_cpu_seconds(),
            displaced_s: 0.0,
        }
    }

    /// Whether the root is still there.
    pub fn root_alive(&self) -> bool {
        self.tree.root_alive()
    }

    /// Takes one sample and adds it up; says whether the tree was quiet since the last.
    pub fn sample(&mut self) -> bool {
        let now = Instant::now();
        let mut seen = self.tree.sample(&mut self.machine);
        let seconds = self
            .last
            .map_or(0.0, |l| now.duration_since(l).as_secs_f64());
        self.take_out_own_cpu(&mut seen.spans, seconds);
        let unknown_pipe = seen.spans.iter().any(|s| {
            matches!(&s.off, Wait::On(super::On::Pipe { key, .. }) if !self.tree.pipes.contains_key(key))
        });
        if unknown_pipe {
            self.tree.read_pipes(&mut self.machine);
        }
        let views = self.tree.views();
        let interval = Interval {
            threads: &seen.spans,
            processes: &views,
            pipes: &self.tree.pipes,
        };
        let Charged { shares, alongside } = if self.last.is_some() {
            charge(&interval, self.root)
        } else {
            Charged::default()
        };
        self.count_places(&shares);
        let moved = self.read_counters();
        for (key, share) in &alongside {
            self.step_total(key).cpu_alongside_s += share * seconds;
        }
        for (key, share) in &shares {
            let total = self.step_total(key);
            total.seconds += share * seconds;
            self.bucket.steps[key.step.index()] += share * seconds;
            if key.place.device().or(key.place.interface()).is_some() {
                *self.window.charged.entry(key.clone()).or_default() += share * seconds;
            }
        }
        self.window.seconds += seconds;
        for (name, read, written) in &moved {
            let sum = self.window.moved.entry(name.clone()).or_default();
            sum.0 += read;
            sum.1 += written;
        }
        if self.window.seconds >= RATE_WINDOW_S.max(self.bucket_s) {
            self.close_window();
        }
        self.add_processes(&seen.spans, &views);
        let measured = || seen.spans.iter().filter(|s| !s.estimated);
        let cpu_wait_s: f64 = measured().map(|s| s.cpu_wait_s).sum();
        self.bucket.cpu_s += measured().map(|s| s.on_cpu_s).sum::<f64>();
        self.bucket.cpu_wait_s += cpu_wait_s;
        self.bucket.seconds += seconds;
        self.add_moved(&moved);
        let first = *self.first.get_or_insert(now);
        if self.bucket.seconds >= self.bucket_s {
            self.bucket.t_s = now.duration_since(first).as_secs_f64();
            self.buckets.push(std::mem::take(&mut self.bucket));
        }
        let members = self.tree.members();
        let cpu_s: f64 = measured().map(|s| s.on_cpu_s).sum();
        self.holders
            .after_sample(now, cpu_s, cpu_wait_s, &seen.waited_on_cpus, &|pid| {
                members.contains_key(&pid)
            });
        self.samples += 1;
        self.last = Some(now);
        seen.quiet
    }

    /// Takes out of the threads' waits for a CPU what the sampler's own CPU since the
    /// last sample caused: where the tree asked for nearly every CPU (on one or waiting
    /// for one) all along, each slice the sampler ran was a slice one of its threads waited
    /// (on a 2-core machine, a build's compilers waited about the sampler's 2% of a
    /// core). The account is of the command as it runs unwatched.
    fn take_out_own_cpu(&mut self, spans: &mut [ThreadSpan], seconds: f64) {
        let own = calling_thread_cpu_seconds();
        let used = (own - std::mem::replace(&mut self.own_cpu_s, own)).max(0.0);
        let measured = || spans.iter().filter(|s| !s.estimated);
        let waited: f64 = measured().map(|s| s.cpu_wait_s).sum();
        let demand: f64 = measured().map(|s| s.on_cpu_s).sum::<f64>() + waited;
        // Nearly every CPU: its counters lag a switch behind, and a compiler that ends
        // or starts in the interval leaves part of it to the next.
        if seconds <= 0.0 || waited <= 0.0 || demand < (self.cpus as f64 - 0.5) * seconds {
            return;
        }
        let displaced = used.min(waited);
        let keep = 1.0 - displaced / waited;
        for span in spans.iter_mut().filter(|s| !s.estimated) {
            span.cpu_wait_s *= keep;
        }
        self.displaced_s += displaced;
    }

    /// The running total of `key`, made where there is none yet.
    fn step_total(&mut self, key: &StepKey) -> &mut StepTotal {
        self.steps.entry(key.clone()).or_insert_with(|| StepTotal {
            key: key.clone(),
            seconds: 0.0,
            cpu_alongside_s: 0.0,
            active_seconds: 0.0,
            bytes: 0,
        })
    }

    /// Ends a rate window: a device or link the tree waited on for half of it or more
    /// is charged the window's time and what its counter moved in it, and apart, for
    /// nearly all of it ([`FULL_WINDOW`]), so that a transfer starting or ending inside
    /// a window does not read its idle part as time at the rate (on an iperf3 sender
    /// over a veth the full windows alone moved its rate by under 1%; the window in
    /// which the counter opened was what read it low). A device moves in bursts (a throttle's
    /// slices, a writeback's chunks) that land in the one sample where the waiter is
    /// already at work on them, so bytes are set against time a window at a time,
    /// never a sample at a time.
    fn close_window(&mut self) {
        let window = std::mem::take(&mut self.window);
        for (key, charged) in window.charged {
            if charged < 0.5 * window.seconds {
                continue;
            }
            let Some(name) = key.place.device().or(key.place.interface()) else {
                continue;
            };
            let Some(&(read, written)) = window.moved.get(name) else {
                continue;
            };
            if window.opened.iter().any(|n| n == name) {
                continue;
            }
            let bytes = match key.step {
                Step::DiskRead | Step::NetReceive => read,
                _ => written,
            };
            if charged >= FULL_WINDOW * window.seconds {
                let full = self.full.entry(key.clone()).or_default();
                full.0 += window.seconds;
                full.1 += bytes;
            }
            if let Some(total) = self.steps.get_mut(&key) {
                total.active_seconds += window.seconds;
                total.bytes += bytes;
            }
        }
    }

    /// Starts reading the devices and interfaces the shares name.
    fn count_places(&mut self, shares: &[(StepKey, f64)]) {
        for (key, _) in shares {
            let (name, interface) = match (&key.place, key.step) {
                (Place::Device(name), _) => (&**name, false),
                (
                    Place::Link {
                        interface: Some(i), ..
                    },
                    _,
                ) => (&**i, true),
                _ => continue,
            };
            if self
                .counters
                .iter()
                .any(|c| c.name == name && c.interface == interface)
            {
                continue;
            }
            if let Some(counter) = Counter::open(name, interface) {
                self.counters.push(counter);
            }
        }
    }

    /// What each counter moved since the last sample: name, read, written. A counter
    /// opened at this sample has no last sample: what its device moved before is not
    /// known, and it is left out.
    fn read_counters(&mut self) -> Vec<(String, u64, u64)> {
        let mut moved = Vec::new();
        for counter in &mut self.counters {
            if std::mem::take(&mut counter.fresh) {
                self.window.opened.push(counter.name.clone());
                continue;
            }
            let Some(now) = counter.read(&mut self.buffer) else {
                continue;
            };
            let (read, written) = (
                now.0.saturating_sub(counter.last.0),
                now.1.saturating_sub(counter.last.1),
            );
            counter.last = now;
            moved.push((counter.name.clone(), read, written));
        }
        moved
    }

    fn add_moved(&mut self, moved: &[(String, u64, u64)]) {
        for (name, read, written) in moved {
            let interface = self.counters.iter().any(|c| c.name == *name && c.interface);
            match self.bucket.counted.iter_mut().find(|c| c.name == *name) {
                Some(c) => {
                    c.read_bytes += read;
                    c.written_bytes += written;
                }
                None => self.bucket.counted.push(Counted {
                    name: name.clone(),
                    interface,
                    read_bytes: *read,
                    written_bytes: *written,
                }),
            }
        }
    }

    /// Adds each thread's own time to its process.
    fn add_processes(&mut self, spans: &[ThreadSpan], views: &HashMap<u32, super::ProcessView>) {
        for (pid, member) in self.tree.members() {
            let total = self.processes.entry(*pid).or_insert_with(|| {
                self.order.push(*pid);
                ProcessTotal {
                    pid: *pid,
                    ppid: member.ppid,
                    name: member.name.to_string(),
                    waits_readable: true,
                    ..ProcessTotal::default()
                }
            });
            // A forked child is named after its parent until it execs.
            if *total.name != *member.name {
                total.name = member.name.to_string();
            }
            total.threads = total.threads.max(member.thread_count());
            total.waits_readable &= member.waits_readable;
        }
        for span in spans.iter().filter(|s| !s.estimated) {
            let Some(total) = self.processes.get_mut(&span.pid) else {
                continue;
            };
            total.cpu_s += span.on_cpu_s;
            total.cpu_wait_s += span.cpu_wait_s;
            let thread = self
                .tree
                .thread_name(span.pid, span.tid)
                .unwrap_or_default();
            let (what, step, on_cpu) = match &span.off {
                Wait::Step(key) if key.step == Step::Cpu => (String::new(), None, true),
                Wait::Step(key) if key.step == Step::CpuWait => {
                    total.cpu_wait_s += span.off_s;
                    (String::new(), None, false)
                }
                Wait::Step(key) => (
                    format!("{} {}", key.step.name(), key.place.words()),
                    Some(key.step),
                    false,
                ),
                Wait::On(on) => (describe(on, views), None, false),
                Wait::Idle(reason) => (reason.clone(), None, false),
            };
            let cpu_s = span.on_cpu_s + if on_cpu { span.off_s } else { 0.0 };
            if on_cpu {
                total.cpu_s += span.off_s;
            } else if span.off_s > 0.0 && !what.is_empty() {
                let kind = span.sleep;
                match total
                    .waits
                    .iter_mut()
                    .find(|w| w.what == what && w.kind == kind)
                {
                    Some(w) => w.seconds += span.off_s,
                    None => total.waits.push(WaitTotal {
                        what,
                        step,
                        kind,
                        seconds: span.off_s,
                    }),
                }
            }
            if cpu_s > 0.0 {
                match total.cpu_by_thread.iter_mut().find(|(n, _)| *n == thread) {
                    Some((_, s)) => *s += cpu_s,
                    None => total.cpu_by_thread.push((thread.to_string(), cpu_s)),
                }
            }
        }
    }

    /// The account, with the sampler's own CPU seconds.
    pub fn close(mut self, sampler_cpu_seconds: f64) -> Account {
        self.close_window();
        if self.bucket.seconds > 0.0
            && let (Some(first), Some(last)) = (self.first, self.last)
        {
            self.bucket.t_s = last.duration_since(first).as_secs_f64();
            self.buckets.push(std::mem::take(&mut self.bucket));
        }
        let members = self.tree.members();
        let holders = self.holders.close(&|pid| members.contains_key(&pid));
        let mut steps: Vec<StepTotal> = self.steps.into_values().collect();
        for step in &mut steps {
            if let Some(&(seconds, bytes)) = self.full.get(&step.key).filter(|f| f.0 > 0.0) {
                (step.active_seconds, step.bytes) = (seconds, bytes);
            }
            step.seconds = skew(Family::Why, step.seconds);
            step.active_seconds /= skew(Family::Why, 1.0);
        }
        steps.sort_by(|a, b| b.seconds.total_cmp(&a.seconds).then(a.key.cmp(&b.key)));
        let mut processes: Vec<ProcessTotal> = self
            .order
            .iter()
            .filter_map(|pid| self.processes.remove(pid))
            .collect();
        for p in &mut processes {
            p.cpu_s = skew(Family::Why, p.cpu_s);
            p.cpu_wait_s = skew(Family::Why, p.cpu_wait_s);
            for wait in &mut p.waits {
                wait.seconds = skew(Family::Why, wait.seconds);
            }
            p.waits.sort_by(|a, b| b.seconds.total_cmp(&a.seconds));
            p.cpu_by_thread.sort_by(|a, b| b.1.total_cmp(&a.1));
        }
        Account {
            seconds: match (self.first, self.last) {
                (Some(first), Some(last)) => last.duration_since(first).as_secs_f64(),
                _ => 0.0,
            },
            samples: self.samples,
            steps,
            processes,
            holders,
            buckets: self.buckets,
            counted: self
                .counters
                .iter()
                .map(|c| Counted {
                    name: c.name.clone(),
                    interface: c.interface,
                    read_bytes: c.last.0.saturating_sub(c.first.0),
                    written_bytes: c.last.1.saturating_sub(c.first.1),
                })
                .collect(),
            tcp: self.machine.tcp.totals(),
            sampler_cpu_seconds,
            sampler_displaced_s: self.displaced_s,
            files: std::mem::take(&mut self.machine.files)
                .into_iter()
                .collect(),
        }
    }
}
