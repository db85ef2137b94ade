//! The account of interference: while a run runs, a thread looks at the whole machine
//! once a second and tells this run's work from everyone else's. Other processes' CPU
//! is the machine's process time (/proc/stat) less this run's process tree and less the
//! kernel's own threads (whose work is largely this run's I/O), so a process that comes
//! and goes between two looks still counts; each process's share is its own counters
//! between the looks that saw it. A device under a run's target moved what /proc/diskstats
//! says, of which the run's own processes made storage move what their /proc/PID/io
//! says: the rest was someone else's (or the filesystem's journal). An interface carried
//! what its counters say; whose it was, the net kind judges against its own streams.
//! Looking costs about 20 µs a process: a machine with many is looked at less often,
//! so the account never takes more than [`MAX_COST_SHARE`] of a core.

use std::collections::HashMap;
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime};

use crate::account::{self, WatchPlan};
use crate::document::{
    DeviceTraffic, InterfaceTraffic, Interference, InterferenceSeries, OtherProcess, ThreadAccount,
};
use crate::platform::cores::calling_thread_cpu_seconds;
use crate::platform::procfs::{self, CpuTicks, Io, Process};
use crate::platform::{diskstats, fds, sockets};

/// How often the machine is looked at.
pub const LOOK_EVERY: Duration = Duration::from_secs(1);

/// Most of a core the account may take: a look that costs more spaces the next out.
const MAX_COST_SHARE: f64 = 0.003;

/// Other processes named in the account, most first.
const TOP: usize = 5;

/// What a run's workloads use besides the CPUs: block devices and network interfaces.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Touched {
    /// Block device names (`vda`, `loop3`).
    pub devices: Vec<String>,
    /// Network interface names (`lo`, `eth0`).
    pub interfaces: Vec<String>,
}

impl Touched {
    /// The block devices and interfaces of what the workloads touch: each path's
    /// filesystem's device (the whole disk too, for a partition), each interface.
    pub fn of(touches: &[crate::workload::Touches]) -> Touched {
        let mut touched = Touched::default();
        for path in touches.iter().flat_map(|t| &t.paths) {
            // A file yet to be made is on its folder's filesystem.
            let Some(existing) = path.ancestors().find(|p| p.exists()) else {
                continue;
            };
            let Ok(chain) = crate::platform::probe_path(existing) else {
                continue;
            };
            let Some(device) = diskstats::device_name(&chain.source) else {
                continue;
            };
            let parent = diskstats::parent_disk(&device);
            for name in std::iter::once(device).chain(parent) {
                if !touched.devices.contains(&name) {
                    touched.devices.push(name);
                }
            }
        }
        for interface in touches.iter().flat_map(|t| &t.interfaces) {
            if !touched.interfaces.contains(interface) {
                touched.interfaces.push(interface.clone());
            }
        }
        touched
    }
}

/// How often the run's own threads are sampled: often enough that a stage of half a
/// second has ten samples, at about 0.1% of a core for a dozen threads.
const THREADS_HZ: f64 = 20.0;

/// Seconds each bucket of the thread account holds.
const THREADS_BUCKET_S: f64 = 0.1;

/// The thread that keeps the account while a run runs. It sleeps between looks until
/// told to stop (dropping the sender wakes it), so it costs nothing between them.
pub struct Watch {
    stop: Option<Sender<()>>,
    thread: Option<JoinHandle<Option<Interference>>>,
    threads: Option<(account::Watch, f64)>,
}

impl Watch {
    /// Starts looking at the machine, now and every `every`, for what `touched` names;
    /// with `threads`, samples this process's own threads and children too.
    pub fn start(touched: Touched, every: Duration, threads: bool) -> Watch {
        let (stop, stopped) = std::sync::mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("ratelab-interference".into())
            .spawn(move || keep(&touched, every, &stopped))
            .ok();
        let plan = WatchPlan {
            hz: THREADS_HZ,
            bucket_s: THREADS_BUCKET_S,
        };
        let threads = threads
            .then(|| {
                let clock_unix_s = unix_now();
                let watch = account::Watch::start(std::process::id(), plan).ok()?;
                Some((watch, clock_unix_s))
            })
            .flatten();
        Watch {
            stop: Some(stop),
            thread,
            threads,
        }
    }

    /// Takes a last look and gives the account; none where the machine could not be
    /// looked at.
    pub fn finish(mut self) -> Option<Interference> {
        self.stop.take();
        let threads = self
            .threads
            .take()
            .map(|(watch, clock_unix_s)| thread_account(watch.finish(), clock_unix_s));
        let mut account = self.thread.take()?.join().ok().flatten()?;
        account.threads = threads;
        Some(account)
    }
}

/// Seconds since the Unix epoch now.
fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// What the thread account keeps of a run's own threads.
fn thread_account(account: account::Account, clock_unix_s: f64) -> ThreadAccount {
    let buckets = &account.buckets;
    ThreadAccount {
        clock_unix_s,
        hz: THREADS_HZ,
        samples: account.samples,
        t_s: buckets.iter().map(|b| b.t_s).collect(),
        bucket_s: buckets.iter().map(|b| b.seconds).collect(),
        cpu_s: buckets.iter().map(|b| b.cpu_s).collect(),
        cpu_wait_s: buckets.iter().map(|b| b.cpu_wait_s).collect(),
        holders: account
            .holders
            .iter()
            .map(|h| OtherProcess {
                pid: h.pid,
                name: h.name.clone(),
                cpu_seconds: h.cpu_seconds,
                read_bytes: None,
                written_bytes: None,
            })
            .collect(),
        sampler_cpu_seconds: account.sampler_cpu_seconds,
    }
}

/// One look at the machine.
#[derive(Clone)]
struct Look {
    at: Instant,
    cpu: CpuTicks,
    processes: HashMap<(u32, u64), Process>,
    devices: Vec<(String, u64, u64)>,
    interfaces: Vec<(String, u64, u64)>,
    /// The pids of this run's processes: this one and every descendant it had then.
    own: std::collections::HashSet<u32>,
}

impl Look {
    /// A look now; `before` is the last one, whose storage counters another process
    /// that has not run since keeps (reading them costs as much as the rest of a
    /// look). The run's own are always read: a direct write held by a throttle moves
    /// 40 MiB/s on less than a tick of CPU a second, so an unchanged CPU time is no
    /// sign its counters stood still (half of a run's writes were put down to others).
    fn take(touched: &Touched, before: Option<&Look>) -> Look {
        let idle = |p: &Process| {
            before
                .filter(|b| !b.own.contains(&p.pid))
                .and_then(|b| b.processes.get(&(p.pid, p.start_ticks)))
                .filter(|then| then.cpu_ticks == p.cpu_ticks && then.io.is_some())
        };
        let mut processes: HashMap<(u32, u64), Process> = procfs::processes(&|p| idle(p).is_none())
            .into_iter()
            .map(|p| ((p.pid, p.start_ticks), p))
            .collect();
        for process in processes.values_mut().filter(|p| p.io.is_none()) {
            process.io = idle(process).and_then(|then| then.io);
        }
        Look {
            at: Instant::now(),
            cpu: procfs::cpu_ticks(),
            own: own(&processes),
            processes,
            devices: touched
                .devices
                .iter()
                .filter_map(|d| {
                    let (read, written) = diskstats::bytes_moved(d)?;
                    Some((d.clone(), read, written))
                })
                .collect(),
            interfaces: touched
                .interfaces
                .iter()
                .filter_map(|i| {
                    let (received, sent) = procfs::interface_bytes(i)?;
                    Some((i.clone(), received, sent))
                })
                .collect(),
        }
    }
}

/// The pids of this run among `processes`: this one and every descendant.
fn own(processes: &HashMap<(u32, u64), Process>) -> std::collections::HashSet<u32> {
    let me = std::process::id();
    let parent: HashMap<u32, u32> = processes.values().map(|p| (p.pid, p.ppid)).collect();
    parent
        .keys()
        .copied()
        .filter(|&pid| {
            let mut at = pid;
            // Walk up to init; a parent cycle cannot happen, but bound the walk.
            for _ in 0..64 {
                if at == me {
                    return true;
                }
                match parent.get(&at) {
                    Some(&up) if up != 0 && up != at => at = up,
                    _ => return false,
                }
            }
            false
        })
        .collect()
}

/// What one other process did during the run, summed over the looks that saw it.
#[derive(Default)]
struct Other {
    name: String,
    cpu_ticks: u64,
    io: Option<Io>,
    /// Ticks it ran between the last two looks, for a peer that ends before the next.
    last_ticks: u64,
}

/// The account so far.
struct Account {
    first: Look,
    ticks_per_second: f64,
    own_ticks: u64,
    kernel_ticks: u64,
    other_ticks: u64,
    own_io: Io,
    others: HashMap<(u32, u64), Other>,
    /// Processes found serving the run's own connections over loopback.
    peers: HashMap<(u32, u64), Other>,
    /// Whether to look for them: the run's tests use a network.
    find_peers: bool,
    series: InterferenceSeries,
}

fn keep(touched: &Touched, every: Duration, stop: &Receiver<()>) -> Option<Interference> {
    let clock_unix_s = unix_now();
    let first = Look::take(touched, None);
    if first.cpu.per_cpu.is_empty() {
        return None;
    }
    let mut account = Account {
        ticks_per_second: procfs::ticks_per_second(),
        own_ticks: 0,
        kernel_ticks: 0,
        other_ticks: 0,
        own_io: Io::default(),
        others: HashMap::new(),
        peers: HashMap::new(),
        find_peers: !touched.interfaces.is_empty(),
        series: InterferenceSeries::default(),
        first: first.clone(),
    };
    let mut last = first;
    let mut next = Instant::now() + every;
    loop {
        let stopping = matches!(
            stop.recv_timeout(next.saturating_duration_since(Instant::now())),
            Ok(()) | Err(RecvTimeoutError::Disconnected)
        );
        let cpu_before = calling_thread_cpu_seconds();
        // The last look reads every process's counters, so none ends the run stale.
        let look = Look::take(touched, (!stopping).then_some(&last));
        account.add(&last, &look);
        last = look;
        let cost = calling_thread_cpu_seconds() - cpu_before;
        if stopping {
            break;
        }
        // A machine with many processes is looked at less often, so that looking
        // never costs more than a share of a core.
        next = Instant::now() + every.max(Duration::from_secs_f64(cost / MAX_COST_SHARE));
    }
    Some(account.close(&last, clock_unix_s))
}

impl Account {
    /// Adds what happened between two looks.
    fn add(&mut self, before: &Look, after: &Look) {
        let own = &after.own;
        if self.find_peers {
            self.find_loopback_peers(before, after, own);
        }
        let (mut own_ticks, mut kernel_ticks, mut peer_ticks) = (0u64, 0u64, 0u64);
        let mut own_io = Io::default();
        for (key, now) in &after.processes {
            let then = before.processes.get(key);
            let cpu = now
                .cpu_ticks
                .saturating_sub(then.map_or(0, |p| p.cpu_ticks));
            let io = now.io.map(|n| {
                let t = then.and_then(|p| p.io).unwrap_or_default();
                Io {
                    read_bytes: n.read_bytes.saturating_sub(t.read_bytes),
                    written_bytes: n.written_bytes.saturating_sub(t.written_bytes),
                }
            });
            if own.contains(&now.pid) {
                // A child reaped meanwhile is in its parent's children's time.
                let children = now
                    .children_cpu_ticks
                    .saturating_sub(then.map_or(now.children_cpu_ticks, |p| p.children_cpu_ticks));
                own_ticks += cpu + children;
                if let Some(io) = io {
                    own_io.read_bytes += io.read_bytes;
                    own_io.written_bytes += io.written_bytes;
                }
            } else if now.kernel {
                kernel_ticks += cpu;
            } else if let Some(peer) = self.peers.get_mut(key) {
                peer.cpu_ticks += cpu;
                peer.last_ticks = cpu;
                peer_ticks += cpu;
            } else if cpu > 0 || io.is_some_and(|i| i.read_bytes + i.written_bytes > 0) {
                let other = self.others.entry(*key).or_insert_with(|| Other {
                    name: now.name.clone(),
                    ..Other::default()
                });
                other.cpu_ticks += cpu;
                if let Some(io) = io {
                    let sum = other.io.get_or_insert_default();
                    sum.read_bytes += io.read_bytes;
                    sum.written_bytes += io.written_bytes;
                }
            }
        }
        let machine = after.cpu.process.saturating_sub(before.cpu.process);
        let seconds = after.at.duration_since(before.at).as_secs_f64().max(1e-3);
        // Ticks are counted in whole ticks per CPU: over a short look they can add up to
        // more than the CPUs had.
        let capacity =
            (after.cpu.per_cpu.len().max(1) as f64 * seconds * self.ticks_per_second).ceil() as u64;
        let unaccounted = machine.saturating_sub(own_ticks + kernel_ticks + peer_ticks);
        let ended_ticks = self.credit_ended_peers(before, after, unaccounted);
        let other_ticks = (unaccounted - ended_ticks).min(capacity);
        self.own_ticks += own_ticks;
        self.kernel_ticks += kernel_ticks;
        self.other_ticks += other_ticks;
        self.own_io.read_bytes += own_io.read_bytes;
        self.own_io.written_bytes += own_io.written_bytes;
        let moved = |look: &Look| look.devices.iter().map(|(_, r, w)| r + w).sum::<u64>();
        let device_bytes = moved(after).saturating_sub(moved(before));
        self.series
            .t_s
            .push(after.at.duration_since(self.first.at).as_secs_f64());
        self.series
            .own_cores
            .push(own_ticks as f64 / self.ticks_per_second / seconds);
        self.series
            .other_cores
            .push(other_ticks as f64 / self.ticks_per_second / seconds);
        let busy: f64 = busy_fractions(&before.cpu, &after.cpu).iter().sum();
        self.series.busy_cores.push(busy);
        self.series
            .other_device_bytes
            .push(device_bytes.saturating_sub(own_io.read_bytes + own_io.written_bytes));
    }

    /// Credits each peer that ended between two looks (the iperf3 client of a served
    /// test) with the ticks it took with it, taken at its last rate until it ended,
    /// within the `unaccounted` ticks no live process accounts for; gives their sum.
    fn credit_ended_peers(&mut self, before: &Look, after: &Look, unaccounted: u64) -> u64 {
        let mut ended_ticks = 0;
        for (key, peer) in &mut self.peers {
            if before.processes.contains_key(key) && !after.processes.contains_key(key) {
                let ticks = peer.last_ticks.min(unaccounted - ended_ticks);
                peer.cpu_ticks += ticks;
                ended_ticks += ticks;
            }
        }
        ended_ticks
    }

    /// Other processes that ran since the last look and hold a TCP socket connected to
    /// one of the run's own on this machine: a `net serve` or `iperf3 -s` serving its
    /// loopback tests. The looks before they were found count them as another's.
    fn find_loopback_peers(
        &mut self,
        before: &Look,
        after: &Look,
        own: &std::collections::HashSet<u32>,
    ) {
        let ran: Vec<(&(u32, u64), &Process)> = after
            .processes
            .iter()
            .filter(|(key, p)| {
                !own.contains(&p.pid)
                    && !p.kernel
                    && !self.peers.contains_key(*key)
                    && before
                        .processes
                        .get(*key)
                        .is_none_or(|then| then.cpu_ticks != p.cpu_ticks)
            })
            .collect();
        if ran.is_empty() {
            return;
        }
        let table = sockets::tcp_sockets(std::process::id());
        let own_ends: std::collections::HashSet<std::net::SocketAddr> = own
            .iter()
            .flat_map(|&pid| fds::socket_inodes(pid))
            .filter_map(|inode| table.get(&inode))
            .filter(|s| !s.listening)
            .map(|s| s.local)
            .collect();
        if own_ends.is_empty() {
            return;
        }
        for (key, process) in ran {
            let serves = fds::socket_inodes(process.pid)
                .iter()
                .filter_map(|inode| table.get(inode))
                .any(|s| !s.listening && own_ends.contains(&s.remote));
            if serves {
                self.others.remove(key);
                self.peers.insert(
                    *key,
                    Other {
                        name: process.name.clone(),
                        ..Other::default()
                    },
                );
            }
        }
    }

    /// The account of the whole run, up to the `last` look.
    fn close(self, last: &Look, clock_unix_s: f64) -> Interference {
        let first = &self.first;
        let tps = self.ticks_per_second;
        let own_bytes = self.own_io.read_bytes + self.own_io.written_bytes;
        let devices = moved_since(&first.devices, &last.devices)
            .map(|(name, read, written)| DeviceTraffic {
                name,
                read_bytes: read,
                written_bytes: written,
                other_bytes: (read + written).saturating_sub(own_bytes),
            })
            .collect();
        let interfaces = moved_since(&first.interfaces, &last.interfaces)
            .map(|(name, received, sent)| InterfaceTraffic {
                name,
                received_bytes: received,
                sent_bytes: sent,
            })
            .collect();
        let (top_cpu, top_io) = self.top_others();
        let busy_fraction_per_cpu = busy_fractions(&first.cpu, &last.cpu);
        let delta =
            |f: fn(&CpuTicks) -> u64| f(&last.cpu).saturating_sub(f(&first.cpu)) as f64 / tps;
        Interference {
            seconds: last.at.duration_since(first.at).as_secs_f64(),
            clock_unix_s,
            cpus: busy_fraction_per_cpu.len() as u32,
            own_cpu_seconds: self.own_ticks as f64 / tps,
            other_cpu_seconds: self.other_ticks as f64 / tps,
            kernel_cpu_seconds: self.kernel_ticks as f64 / tps,
            interrupt_cpu_seconds: delta(|c| c.interrupts),
            steal_seconds: delta(|c| c.steal),
            busy_fraction_per_cpu,
            own_read_bytes: self.own_io.read_bytes,
            own_written_bytes: self.own_io.written_bytes,
            devices,
            interfaces,
            top_cpu,
            top_io,
            series: self.series,
            watch_cpu_seconds: calling_thread_cpu_seconds(),
            peers: self
                .peers
                .iter()
                .map(|(&(pid, _), peer)| OtherProcess {
                    pid,
                    name: peer.name.clone(),
                    cpu_seconds: peer.cpu_ticks as f64 / tps,
                    read_bytes: None,
                    written_bytes: None,
                })
                .collect(),
            threads: None,
        }
    }

    /// The other processes that used most CPU, and those that moved most bytes.
    fn top_others(&self) -> (Vec<OtherProcess>, Vec<OtherProcess>) {
        let others: Vec<OtherProcess> = self
            .others
            .iter()
            .map(|(&(pid, _), other)| OtherProcess {
                pid,
                name: other.name.clone(),
                cpu_seconds: other.cpu_ticks as f64 / self.ticks_per_second,
                read_bytes: other.io.map(|i| i.read_bytes),
                written_bytes: other.io.map(|i| i.written_bytes),
            })
            .collect();
        let mut top_cpu: Vec<OtherProcess> = others
            .iter()
            .filter(|o| o.cpu_seconds > 0.0)
            .cloned()
            .collect();
        top_cpu.sort_by(|a, b| b.cpu_seconds.total_cmp(&a.cpu_seconds));
        top_cpu.truncate(TOP);
        let io_of = |o: &OtherProcess| o.read_bytes.unwrap_or(0) + o.written_bytes.unwrap_or(0);
        let mut top_io: Vec<OtherProcess> = others.into_iter().filter(|o| io_of(o) > 0).collect();
        top_io.sort_by_key(|o| std::cmp::Reverse(io_of(o)));
        top_io.truncate(TOP);
        (top_cpu, top_io)
    }
}

/// Each named counter pair of `last` (a device's read and written bytes, an
/// interface's received and sent) less its value in `first`; a name missing from
/// `first` counts as unchanged.
fn moved_since<'a>(
    first: &'a [(String, u64, u64)],
    last: &'a [(String, u64, u64)],
) -> impl Iterator<Item = (String, u64, u64)> + 'a {
    last.iter().map(|(name, a, b)| {
        let (a0, b0) = first
            .iter()
            .find(|(n, _, _)| n == name)
            .map_or((*a, *b), |(_, a0, b0)| (*a0, *b0));
        (name.clone(), a.saturating_sub(a0), b.saturating_sub(b0))
    })
}

/// How busy each CPU was between two looks, in CPU order.
fn busy_fractions(first: &CpuTicks, last: &CpuTicks) -> Vec<f64> {
    let mut cpus: Vec<&u32> = last.per_cpu.keys().collect();
    cpus.sort();
    cpus.iter()
        .map(|cpu| {
            let (busy, all) = last.per_cpu[cpu];
            let (busy0, all0) = first.per_cpu.get(cpu).copied().unwrap_or((busy, all));
            let all = all.saturating_sub(all0);
            if all == 0 {
                0.0
            } else {
                busy.saturating_sub(busy0) as f64 / all as f64
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_busy_child_is_this_runs_and_a_busy_stranger_is_anothers() {
        // A stranger: a shell spinning in its own session, not this process's child...
        // which the test cannot make without a child. So the child is the test's own
        // work here, and the account must call it so.
        let watch = Watch::start(Touched::default(), Duration::from_millis(200), true);
        let mut child = std::process::Command::new("sh")
            .args(["-c", "i=0; while [ $i -lt 400000 ]; do i=$((i+1)); done"])
            .spawn()
            .unwrap();
        child.wait().unwrap();
        let account = watch.finish().expect("an account");
        assert!(account.own_cpu_seconds >= 0.1, "{account:?}");
        assert!(
            account.top_cpu.iter().all(|o| o.name != "sh"),
            "{account:?}"
        );
        assert!(account.seconds > 0.0 && account.cpus >= 1);
        assert_eq!(account.series.t_s.len(), account.series.other_cores.len());
    }

    /// A look `seconds` after `start`, the machine's processes having run `machine`
    /// ticks in all, with `peer` (pid 7) still there at `peer_ticks` or gone.
    fn look(start: Instant, seconds: u64, machine: u64, peer: Option<u64>) -> Look {
        let process = |cpu_ticks| Process {
            pid: 7,
            ppid: 1,
            name: "iperf3".into(),
            start_ticks: 5,
            cpu_ticks,
            children_cpu_ticks: 0,
            kernel: false,
            last_cpu: None,
            io: None,
        };
        Look {
            at: start + Duration::from_secs(seconds),
            cpu: CpuTicks {
                process: machine,
                per_cpu: [(0, (machine, 100 * seconds)), (1, (0, 100 * seconds))].into(),
                ..CpuTicks::default()
            },
            processes: peer.map(|t| ((7, 5), process(t))).into_iter().collect(),
            devices: Vec::new(),
            interfaces: Vec::new(),
            own: Default::default(),
        }
    }

    #[test]
    fn a_peer_that_ends_between_looks_is_taken_at_its_last_rate_not_as_anothers() {
        let start = Instant::now();
        let first = look(start, 0, 0, Some(0));
        let mut account = Account {
            ticks_per_second: 100.0,
            own_ticks: 0,
            kernel_ticks: 0,
            other_ticks: 0,
            own_io: Io::default(),
            others: HashMap::new(),
            peers: [((7, 5), Other::default())].into(),
            find_peers: false,
            series: InterferenceSeries::default(),
            first: first.clone(),
        };
        // A second of 80 ticks, then the peer ends: of the next second's 90 ticks, 80
        // are the peer's at its last rate and 10 another's.
        let second = look(start, 1, 80, Some(80));
        account.add(&first, &second);
        let third = look(start, 2, 170, None);
        account.add(&second, &third);
        assert_eq!(account.peers[&(7, 5)].cpu_ticks, 160);
        assert_eq!(account.other_ticks, 10);
        // Where less is unaccounted for than its last rate, it is taken, no more.
        let fourth = look(start, 3, 175, Some(0));
        let mut short = Account {
            other_ticks: 0,
            ..account
        };
        short.peers.get_mut(&(7, 5)).unwrap().last_ticks = 80;
        short.add(&fourth, &look(start, 4, 180, None));
        assert_eq!(short.other_ticks, 0);
    }
}
