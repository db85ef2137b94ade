//! How one interval of a process tree's time is charged to steps. Each thread's time is
//! its own: on a CPU, waiting for one, and the rest in the wait it was seen in. A wait
//! on another member (a pipe's other end, a child, a mutex's owner, the siblings that
//! will signal a condition variable) is not a step: it is charged to what those members
//! were doing in the same interval, so `cat F | zstd -19` is limited by zstd's CPU and
//! `cat F | zstd -1` from a slow disk by cat's read. Where several members are waited
//! on, each counts alike, and work (a CPU, a device, a link, memory) outweighs chosen
//! waits (timers, signals), which outweigh waits for nothing. A pure function of the
//! interval, so that the rule is tested on made-up trees (docs/why.md states it).

use std::collections::{HashMap, HashSet};

use super::classify::{On, Sleep, Wait};
use super::step::{Place, Step, StepKey};

/// One thread's time in an interval.
#[derive(Debug, Clone, PartialEq)]
pub struct ThreadSpan {
    /// Its id.
    pub tid: u32,
    /// Its process.
    pub pid: u32,
    /// Seconds on a CPU.
    pub on_cpu_s: f64,
    /// Seconds runnable, waiting for a CPU.
    pub cpu_wait_s: f64,
    /// The rest of the interval.
    pub off_s: f64,
    /// What the rest went to (a CPU where it was seen running).
    pub off: Wait,
    /// Not read this sample (a busy thread waiting its turn): its times are its last
    /// shares, which say how it divides its time, not how much it had.
    pub estimated: bool,
    /// How it slept off its CPU, where it was blocked.
    pub sleep: Option<Sleep>,
}

/// A process of the tree as the interval saw it.
#[derive(Debug, Clone, PartialEq)]
pub struct ProcessView {
    /// Its name.
    pub name: super::step::Text,
    /// Its parent.
    pub ppid: u32,
}

/// An interval of the tree: its threads, its processes, who holds which pipe end.
pub struct Interval<'a> {
    /// Every thread seen in the interval.
    pub threads: &'a [ThreadSpan],
    /// Every process, by pid.
    pub processes: &'a HashMap<u32, ProcessView>,
    /// For each pipe, the processes that hold it and whether for writing.
    pub pipes: &'a HashMap<(u64, u64), Vec<(u32, bool)>>,
}

/// Shares of an interval, each a step at a place; they add up to 1.
pub type Shares = Vec<(StepKey, f64)>;

/// A share of time as it is resolved: a step at a place, or a wait for nothing.
#[derive(Debug, Clone)]
struct Part {
    key: StepKey,
    idle: bool,
    share: f64,
    /// A wait that came back to this thread, still waiting: settled once that thread's
    /// own share is known.
    back: Option<u32>,
    /// For time on a CPU, the device step the thread waited on in the same interval:
    /// CPU that may go with the step (its system calls' own work, a journal's).
    alongside: Option<StepKey>,
}

impl Part {
    /// 0 for work, 1 for chosen waits, 2 for waits for nothing.
    fn tier(&self) -> u8 {
        if self.idle {
            2
        } else if self.key.step.active() {
            0
        } else {
            1
        }
    }
}

/// An interval's wall time as charged: shares of steps that add up to 1, and of those
/// the shares on a CPU alongside a device step's waits, by that step.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Charged {
    /// Each step at its place.
    pub shares: Shares,
    /// Time on a CPU (already in `shares`) spent by threads in the same interval as
    /// they waited on a device step, by that step: what freeing the step may take away
    /// with it besides its waits.
    pub alongside: Shares,
}

/// How the interval's wall time is shared among steps, seen from process `root`: what
/// its threads did, waits on members charged to what they did.
pub fn charge(interval: &Interval, root: u32) -> Charged {
    let mut resolver = Resolver {
        interval,
        by_tid: interval.threads.iter().map(|t| (t.tid, t)).collect(),
        memo: HashMap::new(),
        stack: HashSet::new(),
        uncovered: HashMap::new(),
    };
    resolver.uncovered = resolver.cycles();
    let threads: Vec<u32> = interval
        .threads
        .iter()
        .filter(|t| t.pid == root)
        .map(|t| t.tid)
        .collect();
    let parts = merge(
        resolver
            .set(&threads)
            .into_iter()
            .map(|p| Part { back: None, ..p })
            .collect(),
    );
    let mut charged = Charged::default();
    for part in parts {
        if let Some(step) = &part.alongside {
            match charged.alongside.iter_mut().find(|(k, _)| k == step) {
                Some((_, share)) => *share += part.share,
                None => charged.alongside.push((step.clone(), part.share)),
            }
        }
        let key = if part.idle {
            StepKey::new(Step::Other, part.key.place)
        } else {
            part.key
        };
        match charged.shares.iter_mut().find(|(k, _)| *k == key) {
            Some((_, share)) => *share += part.share,
            None => charged.shares.push((key, part.share)),
        }
    }
    charged
}

/// The members a wait is on, in words: `cat (pid 41) through a pipe`.
pub fn describe(on: &On, processes: &HashMap<u32, ProcessView>) -> String {
    let name = |pid: u32| {
        processes
            .get(&pid)
            .map_or(format!("pid {pid}"), |p| format!("{} (pid {pid})", p.name))
    };
    match on {
        On::Thread(tid) => format!("thread {tid}"),
        On::Siblings { .. } => "its other threads".to_string(),
        On::Children {
            child: Some(child), ..
        } => format!("child {}", name(*child)),
        On::Children { .. } => "its children".to_string(),
        On::Pipe { writers, .. } => {
            if *writers {
                "a pipe's writer".to_string()
            } else {
                "a pipe's reader".to_string()
            }
        }
    }
}

struct Resolver<'a> {
    interval: &'a Interval<'a>,
    by_tid: HashMap<u32, &'a ThreadSpan>,
    memo: HashMap<u32, Vec<Part>>,
    stack: HashSet<u32>,
    /// For each thread in a cycle of waits, the share of the interval in which no
    /// thread of its cycle was at work (see [`Resolver::cycles`]).
    uncovered: HashMap<u32, f64>,
}

impl Resolver<'_> {
    /// What thread `tid` did, its waits on members resolved; shares add up to 1.
    fn thread(&mut self, tid: u32) -> Vec<Part> {
        if let Some(parts) = self.memo.get(&tid) {
            return parts.clone();
        }
        let Some(&span) = self.by_tid.get(&tid) else {
            return Vec::new();
        };
        // A thread that waits on no member is its own account: nothing to follow.
        let follows = matches!(span.off, Wait::On(_)) && span.off_s > 0.0;
        if !follows {
            return self.own(span, Vec::new());
        }
        if !self.stack.insert(tid) {
            // A wait that comes back to a thread already waiting: settled when that
            // thread's share is known.
            return vec![Part {
                back: Some(tid),
                ..each_other()
            }];
        }
        let followed = match &span.off {
            Wait::On(on) => self.on(on, span),
            _ => Vec::new(),
        };
        let parts = self.close_loop(tid, self.own(span, followed));
        self.stack.remove(&tid);
        self.settle_memo(tid, &parts);
        self.memo.insert(tid, parts.clone());
        parts
    }

    /// Threads resolved while `tid` was still waiting kept its loops open: now that
    /// what `tid` did is known, their loops to it stand for that.
    fn settle_memo(&mut self, tid: u32, settled: &[Part]) {
        for parts in self.memo.values_mut() {
            let looped: f64 = parts
                .iter()
                .filter(|p| p.back == Some(tid))
                .map(|p| p.share)
                .sum();
            if looped <= 0.0 {
                continue;
            }
            parts.retain(|p| p.back != Some(tid));
            parts.extend(settled.iter().map(|p| Part {
                share: p.share * looped,
                ..p.clone()
            }));
            *parts = merge(std::mem::take(parts));
        }
    }

    /// Settles the waits that came back to `tid`: threads that take turns (a lock, a
    /// GIL handed over, a condition variable signalled back and forth) wait on each
    /// other only while none of them is at work, so a loop is charged to the work
    /// along it, and to [`each_other`] for the share of the interval in which no
    /// thread of the cycle was at work, as far as its loops reach.
    fn close_loop(&self, tid: u32, parts: Vec<Part>) -> Vec<Part> {
        let stuck_now = |p: &Part| {
            p.back == Some(tid) || (p.back.is_none() && p.idle && p.key == each_other().key)
        };
        let looped: f64 = parts.iter().filter(|p| stuck_now(p)).map(|p| p.share).sum();
        if !parts.iter().any(|p| p.back == Some(tid)) {
            return parts;
        }
        let rest = parts.iter().map(|p| p.share).sum::<f64>() - looped;
        let uncovered = self.uncovered.get(&tid).copied().unwrap_or(1.0);
        let stuck = if rest > 0.0 {
            looped.min(uncovered)
        } else {
            1.0
        };
        let mut settled: Vec<Part> = parts
            .into_iter()
            .filter(|p| !stuck_now(p))
            .map(|p| Part {
                share: p.share * (1.0 - stuck) / rest,
                ..p
            })
            .collect();
        if stuck > 0.0 {
            settled.push(Part {
                share: stuck,
                ..each_other()
            });
        }
        settled
    }

    /// all wait on each other leave it uncovered.
    fn cycles(&self) -> HashMap<u32, f64> {
        let threads = self.interval.threads;
        let edges: HashMap<u32, Vec<u32>> = threads
            .iter()
            .filter(|t| t.off_s > 0.0)
            .filter_map(|t| match &t.off {
                Wait::On(on) => Some((t.tid, self.members(on, t))),
                _ => None,
            })
            .collect();
        let mut uncovered = HashMap::new();
        for cycle in strongly_connected(threads.iter().map(|t| t.tid), &edges) {
            if cycle.len() < 2 {
                continue;
            }
            let inside = |tid: &u32| cycle.contains(tid);
            let mut work = 0.0;
            let mut span = 0.0_f64;
            for &tid in &cycle {
                let t = self.by_tid[&tid];
                span = span.max(t.on_cpu_s + t.cpu_wait_s + t.off_s);
                let off_works = match &t.off {
                    Wait::Step(_) => true,
                    Wait::On(_) => edges.get(&tid).is_some_and(|m| !m.iter().all(inside)),
                    Wait::Idle(_) => false,
                };
                work += t.on_cpu_s + t.cpu_wait_s + if off_works { t.off_s } else { 0.0 };
            }
            let share = if span > 0.0 {
                (1.0 - work / span).max(0.0)
            } else {
                1.0
            };
            uncovered.extend(cycle.iter().map(|&tid| (tid, share)));
        }
        uncovered
    }

    /// A thread's shares: on a CPU, waiting for one, and its off time as its wait says
    /// (`followed`: what the members it waits on did, where it waits on members).
    fn own(&self, span: &ThreadSpan, followed: Vec<Part>) -> Vec<Part> {
        let total = span.on_cpu_s + span.cpu_wait_s + span.off_s;
        let mut parts = Vec::with_capacity(3);
        if total > 0.0 {
            let process = self
                .interval
                .processes
                .get(&span.pid)
                .map_or_else(|| "".into(), |p| p.name.clone());
            let mut add = |part: Part, seconds: f64| {
                if seconds > 0.0 {
                    parts.push(Part {
                        share: seconds / total,
                        ..part
                    });
                }
            };
            let alongside = match &span.off {
                Wait::Step(key) if key.step.on_device() && span.off_s > 0.0 => Some(key.clone()),
                _ => None,
            };
            add(
                Part {
                    alongside,
                    ..step_part(Step::Cpu, Place::Process(process.clone()))
                },
                span.on_cpu_s,
            );
            add(
                step_part(Step::CpuWait, Place::Process(process.clone())),
                span.cpu_wait_s,
            );
            if span.off_s > 0.0 {
                let off = match &span.off {
                    // Running, or runnable: the thread's own process is the place.
                    Wait::Step(key)
                        if matches!(key.step, Step::Cpu | Step::CpuWait)
                            && key.place == Place::Named("".into()) =>
                    {
                        vec![step_part(key.step, Place::Process(process))]
                    }
                    Wait::Step(key) => vec![step_part(key.step, key.place.clone())],
                    Wait::Idle(reason) => vec![idle(reason)],
                    Wait::On(_) => followed,
                };
                for part in off {
                    let seconds = part.share * span.off_s;
                    add(part, seconds);
                }
            }
        }
        parts
    }

    /// What the members a wait is on did.
    fn on(&mut self, on: &On, waiter: &ThreadSpan) -> Vec<Part> {
        let members = self.members(on, waiter);
        if members.is_empty() {
            let own_pipe = |key: &(u64, u64), writers: bool| {
                self.interval.pipes.get(key).is_some_and(|h| {
                    h.iter()
                        .any(|&(pid, writing)| pid == waiter.pid && writing == writers)
                })
            };
            return vec![match on {
                On::Pipe { key, writers, .. } if own_pipe(key, *writers) => {
                    idle("a pipe only it holds, with no child at work")
                }
                On::Pipe { writers: true, .. } => step_part(
                    Step::Other,
                    Place::Named("a pipe from outside the command".into()),
                ),
                On::Pipe { writers: false, .. } => step_part(
                    Step::Other,
                    Place::Named("a pipe to outside the command".into()),
                ),
                On::Thread(_) | On::Siblings { .. } => idle("a thread with nothing to do"),
                On::Children { .. } => idle("a child that had ended"),
            }];
        }
        self.set(&members)
    }

    /// The threads a wait is on, the waiting thread left out.
    fn members(&self, on: &On, waiter: &ThreadSpan) -> Vec<u32> {
        let threads = self.interval.threads;
        let of = |pids: &[u32]| -> Vec<u32> {
            threads
                .iter()
                .filter(|t| pids.contains(&t.pid) && t.tid != waiter.tid)
                .map(|t| t.tid)
                .collect()
        };
        match on {
            On::Thread(tid) => threads
                .iter()
                .filter(|t| t.tid == *tid && t.tid != waiter.tid)
                .map(|t| t.tid)
                .collect(),
            On::Siblings { pid, .. } => of(&[*pid]),
            On::Children { pid, child } => {
                let children: Vec<u32> = self
                    .interval
                    .processes
                    .iter()
                    .filter(|(c, p)| p.ppid == *pid && child.is_none_or(|only| only == **c))
                    .map(|(c, _)| *c)
                    .collect();
                of(&children)
            }
            On::Pipe { key, writers, .. } => {
                let mut holders: Vec<u32> = self
                    .interval
                    .pipes
                    .get(key)
                    .map(|h| {
                        h.iter()
                            .filter(|(_, writing)| writing == writers)
                            .map(|(pid, _)| *pid)
                            .collect()
                    })
                    .unwrap_or_default();
                if holders.contains(&waiter.pid) {
                    // Its own end (make's jobserver, a self-pipe a signal handler
                    // writes): what comes through it comes of its descendants' work.
                    holders.extend(self.descendants(waiter.pid));
                }
                of(&holders)
            }
        }
    }

    /// Every process below `pid` in the tree.
    fn descendants(&self, pid: u32) -> Vec<u32> {
        let processes = self.interval.processes;
        let mut found = vec![pid];
        let mut next = 0;
        while next < found.len() {
            let parent = found[next];
            found.extend(
                processes
                    .iter()
                    .filter(|(child, p)| p.ppid == parent && **child != pid)
                    .map(|(child, _)| *child),
            );
            next += 1;
        }
        found.remove(0);
        found
    }

    /// What a set of threads did: each counts by the share of its time in work (a
    /// CPU, a device, a link, memory), so that the members at work set the pace and a
    /// thread idle or asleep beside them does not; where none works, by the share not
    /// waiting for nothing; where all wait for nothing, alike.
    fn set(&mut self, tids: &[u32]) -> Vec<Part> {
        let members: Vec<Vec<Part>> = tids.iter().map(|&tid| self.thread(tid)).collect();
        let weigh = |tier: u8| -> Vec<f64> {
            members
                .iter()
                .map(|parts| {
                    parts
                        .iter()
                        .filter(|p| p.tier() <= tier)
                        .map(|p| p.share)
                        .sum()
                })
                .collect()
        };
        let weights = [0, 1, 2]
            .into_iter()
            .map(weigh)
            .find(|w| w.iter().sum::<f64>() > 0.0)
            .unwrap_or_default();
        let mut all = Vec::new();
        for (parts, weight) in members.into_iter().zip(weights) {
            all.extend(parts.into_iter().map(|p| Part {
                share: p.share * weight,
                ..p
            }));
        }
        merge(all)
    }
}

/// The same keys added together, shares scaled to add up to 1.
fn merge(parts: Vec<Part>) -> Vec<Part> {
    let total: f64 = parts.iter().map(|p| p.share).sum();
    let mut out: Vec<Part> = Vec::new();
    for part in parts {
        match out.iter_mut().find(|p| {
            p.key == part.key
                && p.idle == part.idle
                && p.back == part.back
                && p.alongside == part.alongside
        }) {
            Some(p) => p.share += part.share,
            None => out.push(part),
        }
    }
    if total > 0.0 {
        for part in &mut out {
            part.share /= total;
        }
    }
    out
}

/// What threads that wait on each other with none at work are charged.
fn each_other() -> Part {
    idle("threads waiting on each other")
}

fn step_part(step: Step, place: Place) -> Part {
    Part {
        key: StepKey::new(step, place),
        idle: false,
        share: 1.0,
        back: None,
        alongside: None,
    }
}

fn idle(reason: &str) -> Part {
    Part {
        key: StepKey::named(Step::Other, reason),
        idle: true,
        share: 1.0,
        back: None,
        alongside: None,
    }
}

/// The strongly connected sets of `nodes` under `edges` (Tarjan's algorithm).
fn strongly_connected(
    nodes: impl Iterator<Item = u32>,
    edges: &HashMap<u32, Vec<u32>>,
) -> Vec<Vec<u32>> {
    struct State<'e> {
        edges: &'e HashMap<u32, Vec<u32>>,
        index: HashMap<u32, usize>,
        low: HashMap<u32, usize>,
        stack: Vec<u32>,
        on_stack: HashSet<u32>,
        found: Vec<Vec<u32>>,
    }
    fn visit(s: &mut State, node: u32) {
        let n = s.index.len();
        s.index.insert(node, n);
        s.low.insert(node, n);
        s.stack.push(node);
        s.on_stack.insert(node);
        for &next in s.edges.get(&node).map_or(&[][..], Vec::as_slice) {
            if !s.index.contains_key(&next) {
                visit(s, next);
                let low = s.low[&node].min(s.low[&next]);
                s.low.insert(node, low);
            } else if s.on_stack.contains(&next) {
                let low = s.low[&node].min(s.index[&next]);
                s.low.insert(node, low);
            }
        }
        if s.low[&node] == s.index[&node] {
            let mut set = Vec::new();
            while let Some(top) = s.stack.pop() {
                s.on_stack.remove(&top);
                set.push(top);
                if top == node {
                    break;
                }
            }
            s.found.push(set);
        }
    }
    let mut state = State {
        edges,
        index: HashMap::new(),
        low: HashMap::new(),
        stack: Vec::new(),
        on_stack: HashSet::new(),
        found: Vec::new(),
    };
    for node in nodes {
        if !state.index.contains_key(&node) {
            visit(&mut state, node);
        }
    }
    state.found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn span(tid: u32, pid: u32, on: f64, wait: f64, off: f64, what: Wait) -> ThreadSpan {
        ThreadSpan {
            tid,
            pid,
            on_cpu_s: on,
            cpu_wait_s: wait,
            off_s: off,
            off: what,
            estimated: false,
            sleep: None,
        }
    }

    /// A shell of pid `pid` waiting for its children the whole interval.
    fn waiting_for_children(pid: u32) -> ThreadSpan {
        let children = Wait::On(On::Children { pid, child: None });
        span(pid, pid, 0.0, 0.0, 0.01, children)
    }

    fn disk(step: Step, name: &str) -> Wait {
        Wait::Step(StepKey::new(step, Place::Device(name.into())))
    }

    fn share(shares: &Shares, step: Step) -> f64 {
        shares
            .iter()
            .filter(|(k, _)| k.step == step)
            .map(|(_, s)| s)
            .sum()
    }

    fn processes(list: &[(u32, &str, u32)]) -> HashMap<u32, ProcessView> {
        list.iter()
            .map(|&(pid, name, ppid)| {
                (
                    pid,
                    ProcessView {
                        name: name.into(),
                        ppid,
                    },
                )
            })
            .collect()
    }

    /// `sh -c 'cat F | zstd'`: sh (1) waits for its children, cat (2) writes the pipe
    /// zstd (3) reads.
    fn pipeline(cat: ThreadSpan, zstd: ThreadSpan) -> Shares {
        let procs = processes(&[(1, "sh", 0), (2, "cat", 1), (3, "zstd", 1)]);
        let pipes = HashMap::from([((9, 9), vec![(2, true), (3, false)])]);
        let threads = vec![waiting_for_children(1), cat, zstd];
        let interval = Interval {
            threads: &threads,
            processes: &procs,
            pipes: &pipes,
        };
        charge(&interval, 1).shares
    }

    #[test]
    fn a_pipeline_is_limited_by_the_compressor_when_it_is_slow() {
        let full_pipe = Wait::On(On::Pipe {
            key: (9, 9),
            writers: false,
            pid: 2,
        });
        let shares = pipeline(
            span(2, 2, 0.0005, 0.0, 0.0095, full_pipe),
            span(
                3,
                3,
                0.0098,
                0.0002,
                0.0,
                Wait::Step(StepKey::named(Step::Cpu, "")),
            ),
        );
        assert!(share(&shares, Step::Cpu) > 0.97, "{shares:?}");
        assert!(
            shares
                .iter()
                .any(|(k, _)| k.place == Place::Process("zstd".into()))
        );
        let total: f64 = shares.iter().map(|(_, s)| s).sum();
        assert!((total - 1.0).abs() < 1e-9);
    }

    #[test]
    fn a_pipeline_is_limited_by_the_disk_when_the_reader_waits_on_it() {
        let empty_pipe = Wait::On(On::Pipe {
            key: (9, 9),
            writers: true,
            pid: 3,
        });
        let shares = pipeline(
            span(2, 2, 0.0003, 0.0, 0.0097, disk(Step::DiskRead, "loop3")),
            span(3, 3, 0.001, 0.0, 0.009, empty_pipe),
        );
        assert!(share(&shares, Step::DiskRead) > 0.9, "{shares:?}");
    }

    #[test]
    fn a_condition_variable_is_charged_to_the_busy_siblings_not_the_idle_ones() {
        let procs = processes(&[(5, "zstd", 0)]);
        let pipes = HashMap::new();
        let threads = vec![
            span(
                5,
                5,
                0.0,
                0.0,
                0.01,
                Wait::On(On::Siblings { pid: 5, tid: 5 }),
            ),
            span(
                6,
                5,
                0.006,
                0.004,
                0.0,
                Wait::Step(StepKey::named(Step::Cpu, "")),
            ),
            span(7, 5, 0.0, 0.0, 0.01, Wait::Idle("pool".into())),
        ];
        let interval = Interval {
            threads: &threads,
            processes: &procs,
            pipes: &pipes,
        };
        let shares = charge(&interval, 5).shares;
        assert!((share(&shares, Step::Cpu) - 0.6).abs() < 1e-9, "{shares:?}");
        assert!((share(&shares, Step::CpuWait) - 0.4).abs() < 1e-9);
    }

    #[test]
    fn waits_that_come_back_around_or_lead_nowhere_are_not_work() {
        let procs = processes(&[(1, "a", 0), (2, "b", 1)]);
        let pipes = HashMap::from([((1, 1), vec![(2, true)]), ((2, 2), vec![(1, false)])]);
        let threads = vec![
            waiting_for_children(1),
            span(
                2,
                2,
                0.0,
                0.0,
                0.01,
                Wait::On(On::Pipe {
                    key: (7, 7),
                    writers: true,
                    pid: 2,
                }),
            ),
        ];
        let interval = Interval {
            threads: &threads,
            processes: &procs,
            pipes: &pipes,
        };
        // b reads a pipe no member writes: its input comes from outside.
        let shares = charge(&interval, 1).shares;
        assert_eq!(shares.len(), 1);
        assert_eq!(
            shares[0].0,
            StepKey::named(Step::Other, "a pipe from outside the command")
        );
        let looped = vec![
            span(1, 1, 0.0, 0.0, 0.01, Wait::On(On::Thread(2))),
            span(2, 2, 0.0, 0.0, 0.01, Wait::On(On::Thread(1))),
        ];
        let interval = Interval {
            threads: &looped,
            processes: &procs,
            pipes: &pipes,
        };
        let shares = charge(&interval, 1).shares;
        assert_eq!(share(&shares, Step::Other), 1.0, "{shares:?}");
    }

    /// `make -j2`: make (1) waits in poll on its jobserver pipe, whose both ends only
    /// it holds; its child sh (2) waits for cc1 (3), at work on a CPU.
    #[test]
    fn a_jobserver_that_only_make_holds_waits_on_what_its_children_do() {
        let procs = processes(&[(1, "make", 0), (2, "sh", 1), (3, "cc1", 2)]);
        let pipes = HashMap::from([((9, 9), vec![(1, true), (1, false)])]);
        let jobserver = Wait::On(On::Pipe {
            key: (9, 9),
            writers: true,
            pid: 1,
        });
        let mut threads = vec![
            span(1, 1, 0.0001, 0.0, 0.0099, jobserver),
            waiting_for_children(2),
            span(
                3,
                3,
                0.009,
                0.001,
                0.0,
                Wait::Step(StepKey::named(Step::Cpu, "")),
            ),
        ];
        let interval = Interval {
            threads: &threads,
            processes: &procs,
            pipes: &pipes,
        };
        let shares = charge(&interval, 1).shares;
        assert!(share(&shares, Step::Cpu) > 0.89, "{shares:?}");
        assert!(
            shares
                .iter()
                .any(|(k, s)| k.place == Place::Process("cc1".into()) && *s > 0.8),
            "{shares:?}"
        );
        // With no child left, the wait is on nothing: not on the world outside.
        threads.truncate(1);
        let interval = Interval {
            threads: &threads,
            processes: &processes(&[(1, "make", 0)]),
            pipes: &pipes,
        };
        let shares = charge(&interval, 1).shares;
        let words: Vec<String> = shares.iter().map(|(k, _)| k.place.words()).collect();
        assert!(!words.iter().any(|w| w.contains("outside")), "{shares:?}");
    }

    /// Two threads that hand a lock back and forth (CPython's GIL): each runs half of
    /// the interval and waits on the other the rest, and the main thread waits on
    /// both; at every moment one of them is at work.
    #[test]
    fn threads_that_take_turns_are_charged_their_work_and_a_deadlock_is_not() {
        let procs = processes(&[(1, "python3", 0)]);
        let pipes = HashMap::new();
        let siblings = |tid| Wait::On(On::Siblings { pid: 1, tid });
        let turns = vec![
            span(1, 1, 0.0, 0.0, 0.01, siblings(1)),
            span(2, 1, 0.005, 0.0, 0.005, siblings(2)),
            span(3, 1, 0.0048, 0.0002, 0.005, siblings(3)),
        ];
        let interval = Interval {
            threads: &turns,
            processes: &procs,
            pipes: &pipes,
        };
        let shares = charge(&interval, 1).shares;
        let busy = share(&shares, Step::Cpu) + share(&shares, Step::CpuWait);
        assert!(busy > 0.99, "{shares:?}");
        // Each ran a tenth of the interval and waited on the other the rest: 80% of
        // the interval neither was at work, which each thread's own account says; the
        // process's threads together weigh those at work more (0.73).
        let stuck = vec![
            span(1, 1, 0.0, 0.0, 0.01, siblings(1)),
            span(2, 1, 0.001, 0.0, 0.009, siblings(2)),
            span(3, 1, 0.001, 0.0, 0.009, siblings(3)),
        ];
        let interval = Interval {
            threads: &stuck,
            processes: &procs,
            pipes: &pipes,
        };
        let shares = charge(&interval, 1).shares;
        let other = share(&shares, Step::Other);
        assert!((0.7..0.82).contains(&other), "{shares:?}");
        let total: f64 = shares.iter().map(|(_, s)| s).sum();
        assert!((total - 1.0).abs() < 1e-9);
    }

    #[test]
    fn a_sleeping_command_sleeps() {
        let procs = processes(&[(1, "sleep", 0)]);
        let pipes = HashMap::new();
        let threads = vec![span(
            1,
            1,
            0.00001,
            0.0,
            0.00999,
            Wait::Step(StepKey::named(Step::Sleep, "timer")),
        )];
        let interval = Interval {
            threads: &threads,
            processes: &procs,
            pipes: &pipes,
        };
        assert!(share(&charge(&interval, 1).shares, Step::Sleep) > 0.99);
    }
}
