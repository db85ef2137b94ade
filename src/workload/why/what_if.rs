//! `why --what-if`: by how much a step limits the command, measured. Each step is
//! changed by a known factor while the rest stays as it was (the command's tree in a
//! cgroup of its own with half its CPU, or its device at half the rate it reached
//! while the command waited on it; or the files it read already cached), and the
//! command is run again in rounds that alternate unchanged and changed runs, so a drift
//! of the machine hits both. The rounds are items; `measured` reads them.

use std::collections::HashMap;
use std::io::Read;
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use super::WhyWorkload;
use super::beside::Beside;
use super::stored::{NotMeasured, WhatIfItem, WhatIfPlan, WhatIfStep, WhyItem};
use crate::account::{Account, Step};
use crate::catch::{Family, skew};
use crate::error::Error;
use crate::platform::diskstats::DeviceCounts;
use crate::platform::shaper::{LinkHold, Shaper, Way};
use crate::platform::slowdown::{Limit, Slowdown};
use crate::storage::cache::{Eviction, evict};
use crate::vocab::units::format_rate;
use crate::workload::Context;

/// The share of the wall time a step needs to be slowed when no step is named.
pub const LEAST_SHARE: f64 = 0.10;
/// How many times as long a slowed step's own work is made to take.
const FACTOR: f64 = 2.0;
/// How many times a round that other work disturbed is run again.
const RERUNS: u32 = 2;
/// The CPU quota's period: short, so a quota slows short bursts of work as a slower
/// CPU would, not only work longer than a period (the kernel's default is 100 ms).
const CPU_PERIOD_US: u64 = 10_000;
/// Requests smaller than this, on average, are held by their number; larger, by their
/// bytes.
const SMALL_REQUEST_BYTES: u64 = 64 << 10;
/// How long each run waits, its files cached or evicted, before it starts: a device's
/// throttle (blk-throttle's 100 ms slices, as ratelab's own device what-if uses) lends
/// or owes a run that follows another within about two slices a burst of the last one's
/// budget (64 MiB held to 100 MiB/s: 0.53-0.69 s back to back, 0.612 s each time a
/// quarter of a second apart), so each run starts from a device left idle alike.
const SETTLE: Duration = Duration::from_millis(250);
/// The steps `--what-if` may name.
pub const NAMES: [&str; 6] = [
    "cpu",
    "disk_read",
    "disk_write",
    "disk",
    "reads_free",
    "net",
];

/// What the block devices did over the watched run: each device's own counts, by
/// name, and those of the processes of ratelab's own I/O group, by `major:minor`
/// (where it is not the whole machine's).
pub struct DevicesMoved {
    /// Each device's counts, by name.
    pub devices: HashMap<String, DeviceCounts>,
    /// ratelab's own group's, by `major:minor`.
    pub own: Option<HashMap<String, DeviceCounts>>,
    /// Each network interface's bytes received and sent, by name.
    pub links: HashMap<String, (u64, u64)>,
}

impl DevicesMoved {
    /// The counts now, to be set against the counts at the watched run's end.
    pub fn start() -> DevicesMoved {
        DevicesMoved {
            devices: crate::platform::diskstats::snapshot(),
            own: crate::platform::slowdown::own_io(),
            links: interfaces(),
        }
    }

    /// What was moved from the counts of `start` to now.
    pub fn since(self) -> DevicesMoved {
        let own = self.own.and_then(|before| {
            Some(DeviceCounts::each_since(
                crate::platform::slowdown::own_io()?,
                &before,
            ))
        });
        DevicesMoved {
            devices: DeviceCounts::each_since(
                crate::platform::diskstats::snapshot(),
                &self.devices,
            ),
            own,
            links: interfaces()
                .into_iter()
                .filter_map(|(name, (rx, tx))| {
                    let (rx0, tx0) = self.links.get(&name)?;
                    Some((name, (rx.saturating_sub(*rx0), tx.saturating_sub(*tx0))))
                })
                .collect(),
        }
    }
}

/// Each network interface's bytes received and sent since it came up, by name.
fn interfaces() -> HashMap<String, (u64, u64)> {
    std::fs::read_dir("/sys/class/net")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let bytes = crate::platform::procfs::interface_bytes(&name)?;
            Some((name, bytes))
        })
        .collect()
}

/// One step changed: how, and what is done before each run.
struct Variant {
    step: WhatIfStep,
    place: String,
    changed_by: String,
    group: Option<Slowdown>,
    /// The CPU quota, in CPUs, for the `cpu` step.
    quota_cpus: Option<f64>,
    /// For a link: the peer's traffic held to a rate while each changed run runs.
    link: Option<LinkHold>,
}

/// Measures each asked step's what-if in rounds, sending each round as an item; stops
/// at a failed round (said in the context) and at a stop (an error).
pub(super) fn measure(
    w: &mut WhyWorkload,
    asked: &WhatIfPlan,
    account: &Account,
    moved: &DevicesMoved,
    ctx: &Context,
) -> Result<(), Error> {
    if let Some(failed) = failed(w.context.exit_code, w.context.signal) {
        w.context.what_if_stopped = Some(format!("the command {failed}: no what-if was run"));
        return Ok(());
    }
    let (variants, skipped) = choose(asked, account, moved, w.context.cpus.unwrap_or(1));
    w.context.what_if_skipped = skipped;
    // Every run starts as the watched one did: where it read from a disk, the files it
    // read are not in the page cache.
    let files = regular_files(&account.files);
    let cold = account.share(Step::DiskRead) > 0.0;
    for variant in &variants {
        for round in 1..=asked.rounds {
            let mut rerun = 0;
            let (walls, cpus, disturbed) = loop {
                let Some((walls, cpus, disturbed)) =
                    round_of(w, variant, round, (&files, cold), ctx)?
                else {
                    return Ok(());
                };
                if disturbed.is_none() || rerun == RERUNS {
                    break (walls, cpus, disturbed);
                }
                rerun += 1;
            };
            let ([baseline, wall], [baseline_cpu, cpu]) = (walls, cpus);
            ctx.sink.item(&WhyItem::WhatIf(WhatIfItem {
                step: variant.step,
                place: variant.place.clone(),
                factor: factor(variant.step),
                changed_by: variant.changed_by.clone(),
                round,
                wall_s: skew(Family::WhyWhatIf, wall),
                baseline_wall_s: baseline,
                cpu_s: Some(cpu),
                baseline_cpu_s: Some(baseline_cpu),
                quota_cpus: variant.quota_cpus,
                disturbed: disturbed.map(|why| format!("run {} times: {why}", RERUNS + 1)),
            }));
        }
    }
    Ok(())
}

/// The walls and CPU seconds of one round (unchanged, changed), with what disturbed
/// either run, in words; none where the command failed (said in the context).
type Round = ([f64; 2], [f64; 2], Option<String>);

/// Runs one round of `variant`: the unchanged run, then the changed one, each started
/// with the files it read cached or not as the round needs.
fn round_of(
    w: &mut WhyWorkload,
    variant: &Variant,
    round: u32,
    (files, cold): (&[PathBuf], bool),
    ctx: &Context,
) -> Result<Option<Round>, Error> {
    let (mut walls, mut cpus, mut disturbed) = ([0.0; 2], [0.0; 2], Vec::new());
    for (changed, group) in [(false, None), (true, variant.group.as_ref())] {
        if changed && variant.step == WhatIfStep::ReadsFree {
            warm_all(files);
        } else if cold {
            evict_all(files);
        }
        let held = match variant.link.as_ref().filter(|_| changed) {
            Some(link) => match Shaper::hold(link) {
                Ok(held) => Some(held),
                Err(e) => {
                    w.context.what_if_stopped =
                        Some(format!("the link could not be held in round {round}: {e}"));
                    return Ok(None);
                }
            },
            None => None,
        };
        settle(ctx)?;
        let beside = Beside::start();
        let (wall, status) = w.once(group, ctx)?;
        drop(held);
        cpus[usize::from(changed)] = beside.children_cpu_s();
        walls[usize::from(changed)] = wall;
        let run = if changed {
            format!("with {}", variant.changed_by)
        } else {
            format!("of {} unchanged", variant.step.name())
        };
        if let Some(failed) = failed(status.code(), status.signal()) {
            w.context.what_if_stopped =
                Some(format!("the command {failed} in round {round} {run}"));
            return Ok(None);
        }
        let quota = changed && variant.quota_cpus.is_some();
        if let Some(why) = beside.disturbed(quota) {
            disturbed.push(format!("the run {run}: {why}"));
        }
    }
    let disturbed = (!disturbed.is_empty()).then(|| disturbed.join("; "));
    Ok(Some((walls, cpus, disturbed)))
}

/// Waits [`SETTLE`], or until a stop (an error).
fn settle(ctx: &Context) -> Result<(), Error> {
    let until = Instant::now() + SETTLE;
    while let Some(left) = until.checked_duration_since(Instant::now()) {
        if ctx.cancel.is_set() {
            return Err(Error::Interrupted);
        }
        std::thread::sleep(left.min(Duration::from_millis(20)));
    }
    Ok(())
}

/// How many times as long a step's own work is made to take: [`FACTOR`] slowed, 0
/// made free.
fn factor(step: WhatIfStep) -> f64 {
    if step == WhatIfStep::ReadsFree {
        0.0
    } else {
        FACTOR
    }
}

/// How a run failed, in words: `exited 1`, `was ended by signal 9`; none for success.
fn failed(code: Option<i32>, signal: Option<i32>) -> Option<String> {
    match (code, signal) {
        (Some(0), _) => None,
        (Some(code), _) => Some(format!("exited {code}")),
        (None, Some(signal)) => Some(format!("was ended by signal {signal}")),
        (None, None) => None,
    }
}

/// What `--what-if` asked for, over the account of the watched run.
struct Wants<'a> {
    /// The steps named, none for those worth it.
    asked: &'a WhatIfPlan,
    /// The watched run's account.
    account: &'a Account,
    /// Its wall time, never zero.
    seconds: f64,
}

impl Wants<'_> {
    /// Whether `--what-if` named `name`.
    fn named(&self, name: &str) -> bool {
        self.asked.steps.iter().any(|s| s == name)
    }

    /// Whether no step was named, so each step worth it is chosen.
    fn auto(&self) -> bool {
        self.asked.steps.is_empty()
    }

    /// Whether a step that took `seconds` of the run is worth changing unasked.
    fn worth(&self, seconds: f64) -> bool {
        self.auto() && seconds / self.seconds >= LEAST_SHARE
    }
}

/// The steps chosen to change, and those that cannot be.
#[derive(Default)]
struct Chosen {
    /// The changes to run.
    variants: Vec<Variant>,
    /// Those asked for or worth it that cannot be made, and why.
    skipped: Vec<NotMeasured>,
}

impl Chosen {
    /// Notes that `step` at `place` cannot be changed, and why.
    fn skip(&mut self, step: &str, place: &str, why: String) {
        self.skipped.push(NotMeasured {
            step: step.into(),
            place: place.into(),
            why,
        })
    }
}

/// The steps to change, and those asked for or worth it that cannot be.
fn choose(
    asked: &WhatIfPlan,
    account: &Account,
    moved: &DevicesMoved,
    cpus: usize,
) -> (Vec<Variant>, Vec<NotMeasured>) {
    let wants = Wants {
        asked,
        account,
        seconds: account.seconds.max(1e-9),
    };
    let mut chosen = Chosen::default();
    if wants.named("cpu") || wants.auto() && account.share(Step::Cpu) >= LEAST_SHARE {
        match cpu_variant(account, cpus) {
            Ok(variant) => chosen.variants.push(variant),
            Err(why) => chosen.skip("cpu", "its processes", why),
        }
    }
    for (step, name) in [
        (Step::DiskRead, "disk_read"),
        (Step::DiskWrite, "disk_write"),
    ] {
        choose_devices(&wants, step, name, moved, &mut chosen);
    }
    choose_reads_free(&wants, &mut chosen);
    choose_links(&wants, moved, &mut chosen);
    if wants.auto() && account.share(Step::CpuWait) >= LEAST_SHARE {
        chosen.skip(
            "cpu_wait",
            "",
            "its wait for a CPU is time other work took: not a step of its own to slow".into(),
        );
    }
    (chosen.variants, chosen.skipped)
}

/// The device what-ifs of `step` (`name` to `--what-if`): each device the run waited
/// on for it, where asked for or worth it.
fn choose_devices(
    wants: &Wants<'_>,
    step: Step,
    name: &str,
    moved: &DevicesMoved,
    chosen: &mut Chosen,
) {
    let wanted = wants.named(name) || wants.named("disk");
    let on_devices: Vec<_> = wants
        .account
        .steps
        .iter()
        .filter(|s| s.key.step == step && s.key.place.device().is_some())
        .filter(|s| wanted || wants.worth(s.seconds))
        .collect();
    if wanted && on_devices.is_empty() {
        chosen.skip(
            name,
            "",
            format!(
                "it was not seen waiting on a block device for {}",
                words(step)
            ),
        );
    }
    for total in on_devices {
        let device = total.key.place.device().unwrap_or_default();
        match device_variant(total, moved, wants.account.seconds) {
            Ok(variant) => chosen.variants.push(variant),
            Err(why) => chosen.skip(name, device, why),
        }
    }
}

/// The what-if of the files the run read already cached, where asked for or worth it.
fn choose_reads_free(wants: &Wants<'_>, chosen: &mut Chosen) {
    let reads = wants.account.share(Step::DiskRead);
    if !(wants.named("reads_free") || wants.auto() && reads >= LEAST_SHARE) {
        return;
    }
    if regular_files(&wants.account.files).is_empty() {
        chosen.skip(
            "reads_free",
            "",
            "it was not seen waiting on a file it read".into(),
        );
    } else {
        chosen.variants.push(Variant {
            step: WhatIfStep::ReadsFree,
            place: "the files it read".into(),
            changed_by: "the files it read in the page cache".into(),
            group: None,
            quota_cpus: None,
            link: None,
        });
    }
}

/// The link what-ifs: each TCP peer and way the run waited on, where asked for or
/// worth it.
fn choose_links(wants: &Wants<'_>, moved: &DevicesMoved, chosen: &mut Chosen) {
    let on_links: Vec<_> = wants
        .account
        .steps
        .iter()
        .filter(|s| matches!(s.key.step, Step::NetSend | Step::NetReceive))
        .filter(|s| wants.named("net") || wants.worth(s.seconds))
        .collect();
    if wants.named("net") && on_links.is_empty() {
        chosen.skip(
            "net",
            "",
            "it was not seen waiting on a TCP connection".into(),
        );
    }
    for total in on_links {
        match net_variant(total, moved, wants.account.seconds) {
            Ok(variant) => chosen.variants.push(variant),
            Err(why) => chosen.skip(total.key.step.name(), &total.key.place.words(), why),
        }
    }
}

/// Reads or writes, in words.
fn words(step: Step) -> &'static str {
    if step == Step::DiskRead {
        "reads"
    } else {
        "writes"
    }
}

/// The CPU what-if: the tree held to half the CPUs it kept busy at its busiest (the
/// 90th percentile of its intervals, CPU and wait for one together), so each of its
/// threads that runs gets half a CPU, as on CPUs half as fast. Half of its average
/// would slow any steady command by half, whatever limits it.
fn cpu_variant(account: &Account, cpus: usize) -> Result<Variant, String> {
    let mut demand: Vec<f64> = account
        .buckets
        .iter()
        .filter(|b| b.seconds > 0.0)
        .map(|b| (b.cpu_s + b.cpu_wait_s) / b.seconds)
        .collect();
    demand.sort_by(f64::total_cmp);
    let busiest = demand
        .get((demand.len() * 9 / 10).min(demand.len().saturating_sub(1)))
        .copied()
        .unwrap_or(1.0);
    let threads = busiest.round().clamp(1.0, cpus.max(1) as f64);
    let cores = threads / FACTOR;
    let limit = Limit::Cpu {
        cores,
        period_us: CPU_PERIOD_US,
    };
    let group = Slowdown::make(&limit).map_err(|e| e.to_string())?;
    let cpus_word = if threads == 1.0 { "CPU" } else { "CPUs" };
    Ok(Variant {
        step: WhatIfStep::Cpu,
        place: "its processes".into(),
        changed_by: format!(
            "a CPU quota of {cores} (half of the {threads} {cpus_word} it kept busy), in {} ms periods",
            CPU_PERIOD_US / 1000
        ),
        group: Some(group),
        quota_cpus: Some(cores),
        link: None,
    })
}

/// A link what-if: the command's TCP traffic with one peer, that way, held to half the
/// rate its interface moved while the command waited on it, or what the interface
/// moved over the whole run, where that is more (each is at most the link's rate for
/// it: windows the command waited in for part of their length read low, as they do
/// for a device). An `ifb` queue of its own holds it: every other flow keeps its
/// speed. Tried once here, so a what-if that cannot hold it is said not measured
/// before any run.
fn net_variant(
    total: &crate::account::StepTotal,
    moved: &DevicesMoved,
    wall_s: f64,
) -> Result<Variant, String> {
    let crate::account::Place::Link { peer, interface } = &total.key.place else {
        return Err("it is not a TCP connection's".into());
    };
    let interface = interface
        .as_ref()
        .ok_or("the interface that carries it is not known")?;
    let peer: std::net::SocketAddr = peer
        .parse()
        .map_err(|_| format!("its peer {peer} is not an address and port"))?;
    let sends = total.key.step == Step::NetSend;
    let whole = moved
        .links
        .get(interface.as_ref())
        .map(|&(received, sent)| if sends { sent } else { received } as f64 / wall_s.max(1e-9));
    let rate = total
        .bytes_per_sec()
        .into_iter()
        .chain(whole)
        .fold(0.0, f64::max);
    if rate <= 0.0 {
        return Err("its interface's rate while the command waited on it is not known".into());
    }
    // Held as a queue counts bytes: each segment's headers too.
    let queued = crate::platform::nics::describe(interface).queued_per_counted(peer.is_ipv6());
    let link = LinkHold {
        interface: interface.to_string(),
        peer,
        way: if sends { Way::Send } else { Way::Receive },
        bytes_per_sec: (rate * queued / FACTOR).round() as u64,
    };
    drop(Shaper::hold(&link).map_err(|e| e.to_string())?);
    Ok(Variant {
        step: if sends {
            WhatIfStep::NetSend
        } else {
            WhatIfStep::NetReceive
        },
        place: total.key.place.words(),
        changed_by: format!(
            "its traffic {} {peer} via {interface} held to {} (half the rate it moved)",
            if sends { "to" } else { "from" },
            crate::vocab::units::format_bits_rate(rate / FACTOR)
        ),
        group: None,
        quota_cpus: None,
        link: Some(link),
    })
}

/// A device what-if: the tree held to half the bytes (or, for small requests, the
/// requests) per second the device moved for it: the device's rate in the samples it
/// waited in, less the share of the device's bytes that were not the command's (a
/// journal's commits, other work's), where ratelab's own group counts the command's
/// apart; or its own bytes over the whole run where that is more. Each is at most what
/// the device does for it, so the larger is the nearer: a sample the command waited in
/// for part of its length reads low, and a throttle lets a reader that paused (a pipe
/// full) catch up in a burst, which samples of waiting read high, as they read it
/// while the average over the run holds the throttle's rate.
fn device_variant(
    total: &crate::account::StepTotal,
    moved: &DevicesMoved,
    wall_s: f64,
) -> Result<Variant, String> {
    let device = total.key.place.device().unwrap_or_default();
    let reads = total.key.step == Step::DiskRead;
    let rate = total
        .bytes_per_sec()
        .filter(|r| *r > 0.0)
        .ok_or_else(|| format!("{device} moved nothing it could be seen moving while the command waited on it: there is no rate to halve"))?;
    let major_minor = crate::platform::diskstats::major_minor(device)
        .ok_or_else(|| format!("{device} is not a block device sysfs knows"))?;
    let way = |c: &DeviceCounts| {
        if reads {
            (c.reads, c.read_bytes)
        } else {
            (c.writes, c.written_bytes)
        }
    };
    let all = moved.devices.get(device).map(way);
    let own = moved
        .own
        .as_ref()
        .and_then(|own| own.get(&major_minor))
        .map(way)
        .or(all);
    let share = match (own, all) {
        (Some((_, own)), Some((_, all))) if all > 0 => (own as f64 / all as f64).min(1.0),
        _ => 1.0,
    };
    let whole = own.map_or(0.0, |(_, bytes)| bytes as f64 / wall_s.max(1e-9));
    let bytes_per_sec = ((rate * share).max(whole) / FACTOR) as u64;
    // One dimension: blk-throttle delays each request by the larger of its two waits,
    // so both limits at half of the average slow requests of mixed sizes more than
    // twice (`cat` from a loop device took 2.8x as long). Requests are what a device
    // spends its time on where they are small; bytes, where they are large.
    let requests_per_sec = own.and_then(|(requests, bytes)| {
        (requests > 0 && bytes / requests < SMALL_REQUEST_BYTES)
            .then(|| (bytes_per_sec as f64 * requests as f64 / bytes as f64).ceil() as u64)
    });
    let limit = Limit::Device {
        major_minor,
        reads,
        bytes_per_sec: requests_per_sec.is_none().then_some(bytes_per_sec),
        requests_per_sec,
    };
    let group = Slowdown::make(&limit).map_err(|e| e.to_string())?;
    let held_to = match requests_per_sec {
        Some(r) => format!("{r} {}/s", words(total.key.step)),
        None => format_rate(bytes_per_sec as f64),
    };
    Ok(Variant {
        step: if reads {
            WhatIfStep::DiskRead
        } else {
            WhatIfStep::DiskWrite
        },
        place: device.to_string(),
        changed_by: format!(
            "{device} held to {held_to} for its processes (half the rate it moved for them)"
        ),
        group: Some(group),
        quota_cpus: None,
        link: None,
    })
}

/// The regular files among `paths`.
fn regular_files(paths: &[String]) -> Vec<PathBuf> {
    paths
        .iter()
        .map(PathBuf::from)
        .filter(|p| std::fs::metadata(p).is_ok_and(|m| m.is_file()))
        .collect()
}

/// Takes each file's pages out of the page cache (what is dirty stays).
fn evict_all(files: &[PathBuf]) {
    for path in files {
        if let Ok(file) = std::fs::File::open(path) {
            let size = file.metadata().map(|m| m.len()).unwrap_or(0);
            let _ = evict(&file, path, size, Eviction::Foreign);
        }
    }
}

/// Reads each file whole, so its pages are in the page cache.
fn warm_all(files: &[PathBuf]) {
    let mut buffer = vec![0u8; 1 << 20];
    for path in files {
        if let Ok(mut file) = std::fs::File::open(path) {
            while matches!(file.read(&mut buffer), Ok(n) if n > 0) {}
        }
    }
}
