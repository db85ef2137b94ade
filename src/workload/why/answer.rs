//! The answer of a `why` run: every step's share of the command's wall time, the step
//! that limits it (the most time; the CPU and a wait for it counted across the
//! processes, a device or link each on its own), by how much (the most it could gain
//! were that step free: 1 / (1 − share)), and for a device or link its rate set
//! against what ratelab measured of it before. Pure functions of the stored run.

use super::stored::{
    Capability, CommandSummary, Limiting, StepItem, StepShare, TcpItem, WhyContext, WhyItem,
    WhySummary,
};
use crate::account::Step;
use crate::vocab::units::{format_bits_rate, format_rate, format_seconds, format_size};

/// A share of the wall time above which sampling cannot bound what freeing the step
/// gains: past 100x, one sample in a hundred decides the figure.
const WHOLE: f64 = 0.99;
/// A rate at this share of what a device or link can do or more is its pace.
const NEAR: f64 = 0.85;
/// Shares of the wall time closer than this are a tie, which a wait wins over the
/// command's own CPU work: two busy threads on one CPU share it half and half, and
/// the wait is what other work took from it.
const TIE: f64 = 0.05;

/// The summary of a stored `why` run.
pub fn summarize(context: &WhyContext, items: &[WhyItem]) -> WhySummary {
    let sampled = context.sampled_s.max(1e-9);
    let steps: Vec<&StepItem> = items
        .iter()
        .filter_map(|i| match i {
            WhyItem::Step(s) => Some(s),
            _ => None,
        })
        .collect();
    let mut shares: Vec<StepShare> = steps
        .iter()
        .map(|s| StepShare {
            step: s.step,
            place: s.place.clone(),
            seconds: s.seconds,
            share: s.seconds / sampled,
            bytes_per_sec: rate(s),
        })
        .collect();
    shares.sort_by(|a, b| b.seconds.total_cmp(&a.seconds));
    let cpu_s: f64 = items
        .iter()
        .filter_map(|i| match i {
            WhyItem::Process(p) => Some(p.cpu_s),
            _ => None,
        })
        .sum();
    WhySummary {
        command: CommandSummary {
            argv: context.argv.clone(),
            exit_code: context.exit_code,
            wall_s: context.wall_s.unwrap_or(context.sampled_s),
        },
        limiting: limiting(&steps, cpu_s, context).map(|mut limit| {
            limit.tcp = connection(items, &steps, &limit);
            limit
        }),
        measured: super::measured::measured(items, &shares, context.sampled_s),
        steps: shares,
    }
}

/// A step's device or interface rate while the command waited on it.
fn rate(step: &StepItem) -> Option<f64> {
    (step.active_seconds > 0.0 && step.bytes > 0).then(|| step.bytes as f64 / step.active_seconds)
}

/// Whether a step is judged place by place (a device, a link), rather than across
/// the processes (a CPU, memory, timers).
fn by_place(step: Step) -> bool {
    step.on_device() || step.on_link()
}

/// The step with most of the wall time.
fn limiting(steps: &[&StepItem], cpu_s: f64, context: &WhyContext) -> Option<Limiting> {
    // Candidates: a device or link on its own; any other step across its places,
    // named by the place with most time.
    let mut candidates: Vec<(Step, &StepItem, f64)> = Vec::new();
    for step in steps {
        if by_place(step.step) {
            candidates.push((step.step, step, step.seconds));
            continue;
        }
        match candidates.iter_mut().find(|(s, _, _)| *s == step.step) {
            Some((_, top, seconds)) => {
                *seconds += step.seconds;
                if step.seconds > top.seconds {
                    *top = step;
                }
            }
            None => candidates.push((step.step, step, step.seconds)),
        }
    }
    let most = candidates.iter().map(|c| c.2).fold(0.0, f64::max);
    let tie = TIE * context.sampled_s;
    let mut close: Vec<(Step, &StepItem, f64)> = candidates
        .into_iter()
        .filter(|c| c.2 >= most - tie)
        .collect();
    close.sort_by(|a, b| {
        let own_work = |step: Step| step == Step::Cpu;
        own_work(b.0)
            .cmp(&own_work(a.0))
            .then(a.2.total_cmp(&b.2))
            .then(b.0.cmp(&a.0))
    });
    let (step, top, seconds) = close.pop()?;
    let sampled = context.sampled_s.max(1e-9);
    let tie_with = close
        .iter()
        .max_by(|a, b| a.2.total_cmp(&b.2))
        .map(|(other, item, s)| {
            format!(
                "{} {}, {:.0}%",
                other.words(),
                item.place,
                s / sampled * 100.0
            )
        });
    let share = seconds / sampled;
    let capability = capability(context, step, &top.place);
    let alongside = if step.on_device() {
        top.cpu_alongside_s / sampled
    } else {
        0.0
    };
    let whole = share + alongside;
    Some(Limiting {
        step,
        place: top.place.clone(),
        share,
        bytes_per_sec: by_place(step).then(|| rate(top)).flatten(),
        capability_bytes_per_sec: capability.and_then(|c| c.bytes_per_sec),
        capability_run: capability.and_then(|c| c.run_id),
        speedup_if_free: (share < WHOLE).then(|| 1.0 / (1.0 - share)),
        cpu_alongside_share: alongside,
        speedup_if_free_with_cpu: (alongside > 0.0 && whole < WHOLE).then(|| 1.0 / (1.0 - whole)),
        speedup_twice_cpu_speed: (step == Step::Cpu).then(|| 1.0 / (1.0 - share / 2.0)),
        cpus_busy: (step == Step::Cpu).then(|| cpu_s / sampled),
        tie_with,
        held_by: if step == Step::CpuWait {
            context
                .held_by
                .iter()
                .map(|h| format!("{} (pid {})", h.name, h.pid))
                .collect()
        } else {
            Vec::new()
        },
        tcp: None,
    })
}

/// TCP's account of the connection to a limiting link's peer, where it was read.
fn connection(items: &[WhyItem], steps: &[&StepItem], limit: &Limiting) -> Option<TcpItem> {
    if !limit.step.on_link() {
        return None;
    }
    let peer = steps
        .iter()
        .find(|s| s.step == limit.step && s.place == limit.place)?
        .peer
        .as_deref()?;
    // Several connections may go to one peer (iperf3's control and data): the one that
    // carried most, else the one watched longest.
    items
        .iter()
        .filter_map(|i| match i {
            WhyItem::Tcp(tcp) if tcp.peer == peer => Some(tcp),
            _ => None,
        })
        .max_by(|a, b| {
            (a.bytes_acked.unwrap_or(0))
                .cmp(&b.bytes_acked.unwrap_or(0))
                .then(a.seconds.total_cmp(&b.seconds))
        })
        .cloned()
}

/// TCP's account of a limiting connection in words: for a sender, where its time went
/// (busy, held by the peer's window, by its own buffer) and the round trip; for a
/// receiver, its window and what waited unread.
fn tcp_words(tcp: &TcpItem, step: Step) -> String {
    let share = |s: Option<f64>| {
        s.filter(|_| tcp.seconds > 0.0).map_or("?".into(), |s| {
            format!("{:.0}%", (s / tcp.seconds).min(1.0) * 100.0)
        })
    };
    let ms = |us: u64| {
        if us < 1000 {
            format!("{:.3} ms", us as f64 / 1e3)
        } else {
            format!("{:.1} ms", us as f64 / 1e3)
        }
    };
    let least = tcp
        .min_rtt_us
        .map_or(String::new(), |m| format!(" (least {})", ms(m)));
    match step {
        Step::NetSend => format!(
            ". TCP's account of the connection over {}: data in flight {} of the time, held \
             by the peer's window {} and by the send buffer {}; round trip {}{least}{}",
            format_seconds(tcp.seconds),
            share(tcp.busy_s),
            share(tcp.rwnd_limited_s),
            share(tcp.sndbuf_limited_s),
            ms(tcp.rtt_us),
            held(tcp)
        ),
        _ => format!(
            ". TCP's account of the connection: this end receives (the sender's account \
             is at the peer); round trip {}{least}, its window {} with {} unread at the \
             last look",
            ms(tcp.rtt_us),
            tcp.rcv_wnd_bytes.map_or("?".into(), format_size),
            tcp.receive_queue_bytes.map_or("?".into(), format_size)
        ),
    }
}

/// What held a sending connection, from its account: its peer's window or its own
/// buffer (a tenth of the time or more), else the link or a queue on the way where it
/// had data in flight nearly all the time.
fn held(tcp: &TcpItem) -> &'static str {
    let share = |s: Option<f64>| s.map_or(0.0, |s| s / tcp.seconds.max(1e-9));
    if share(tcp.rwnd_limited_s) >= 0.1 {
        ": the peer's window held it (the receiver's buffer, or a reader behind)"
    } else if share(tcp.sndbuf_limited_s) >= 0.1 {
        ": its own send buffer held it (net.ipv4.tcp_wmem)"
    } else if share(tcp.busy_s) >= 0.9 {
        ": neither window held it, so the link or a queue on the way did"
    } else {
        ""
    }
}

/// What the run knew of `place`'s capability for `step`.
pub fn capability<'a>(context: &'a WhyContext, step: Step, place: &str) -> Option<&'a Capability> {
    context
        .capabilities
        .iter()
        .find(|c| c.step == step && c.place == place)
}

/// The answer in one line: the step, where, its share of the wall time, its rate
/// against what the device or link can do, and what freeing it (or, for the CPU, a
/// faster or larger one) would gain.
pub fn answer(summary: &WhySummary, context: &WhyContext) -> Option<String> {
    let limit = summary.limiting.as_ref()?;
    let wall = format_seconds(summary.command.wall_s);
    let percent = format!("{:.0}%", limit.share * 100.0);
    let gain = gain(limit, context);
    let what = limit.step.words();
    let mut words = match limit.step {
        Step::Cpu => format!(
            "{what} limits this command: {percent} of {wall} on a CPU, most in {} ({gain})",
            limit.place
        ),
        Step::CpuWait => {
            let held = match limit.held_by.first() {
                Some(first) => format!(", while {first} held the CPU"),
                None => String::new(),
            };
            format!(
                "{what} limits this command: {percent} of {wall} runnable but not running, most in {}{held} ({gain})",
                limit.place
            )
        }
        step if by_place(step) => {
            let shown = |bytes_per_sec: f64| {
                if step.on_link() {
                    format_bits_rate(bytes_per_sec)
                } else {
                    format_rate(bytes_per_sec)
                }
            };
            let at = limit
                .bytes_per_sec
                .map_or(String::new(), |r| format!(" at {}", shown(r)));
            let against = against(limit, context, step);
            let tcp = limit
                .tcp
                .as_ref()
                .map_or(String::new(), |tcp| tcp_words(tcp, step));
            format!(
                "{what} limits this command: {percent} of {wall} waiting on {}{at} ({gain}){against}{tcp}",
                limit.place
            )
        }
        Step::Memory => format!(
            "{what} limits this command: {percent} of {wall} in {} ({gain})",
            limit.place
        ),
        Step::Sleep => {
            format!("{what} limits this command: {percent} of {wall} in timers: it waits by choice")
        }
        _ => format!(
            "{what} limit this command: {percent} of {wall} waiting on {}",
            limit.place
        ),
    };
    if let Some(tie) = &limit.tie_with {
        words.push_str(&format!(
            "; a tie with {tie} (within 5% of the time a wait is named before the command's own CPU work)"
        ));
    }
    Some(words)
}

/// What changing the limiting step would gain, in words: for the CPU, CPUs twice as
/// fast and whether more of them would help; for a device, its waits alone and, with
/// the CPU spent around them, the far end of the bracket; else the step made free.
fn gain(limit: &Limiting, context: &WhyContext) -> String {
    let free = match limit.step {
        Step::DiskRead => "were reads free",
        Step::DiskWrite => "were writes free",
        Step::NetReceive | Step::NetSend => "were the network free",
        Step::CpuWait => "without the wait for a CPU",
        _ => "without it",
    };
    let bound = |speedup: Option<f64>| match speedup {
        Some(speedup) => format!("up to {} faster {free}", times(speedup)),
        None => "nearly all of its time".to_string(),
    };
    match limit.step {
        Step::Cpu => {
            let faster = limit.speedup_twice_cpu_speed.map_or(String::new(), |x| {
                format!("{} faster with CPUs twice as fast", times(x))
            });
            match (limit.cpus_busy, context.cpus) {
                (Some(busy), Some(cpus)) if busy >= cpus as f64 - 0.25 => format!(
                    "{faster}; it kept {busy:.1} of its {cpus} CPUs busy, so more CPUs would help too"
                ),
                (Some(busy), Some(cpus)) => format!(
                    "{faster}; it kept {busy:.1} of its {cpus} CPUs busy: more CPUs would not help unless it ran more at once"
                ),
                _ => faster,
            }
        }
        step if step.on_device() && limit.cpu_alongside_share >= 0.01 => {
            let waits = match limit.speedup_if_free {
                Some(x) => format!("{} faster for their waits alone", times(x)),
                None => "nearly all of its time in their waits alone".to_string(),
            };
            let around = format!(
                "the CPU around them, {:.0}% of the time",
                limit.cpu_alongside_share * 100.0
            );
            match limit.speedup_if_free_with_cpu {
                Some(x) => format!("{free}: {waits}, up to {} with {around}", times(x)),
                None if limit.speedup_if_free.is_some() => {
                    format!("{free}: {waits}; with {around}, nearly all of its time")
                }
                None => format!("{free}: {waits}"),
            }
        }
        _ => bound(limit.speedup_if_free),
    }
}

/// A speedup as a factor: `14x`, `1.35x`.
fn times(speedup: f64) -> String {
    if speedup >= 10.0 {
        format!("{speedup:.0}x")
    } else {
        format!("{speedup:.2}x")
    }
}

/// A device's or link's rate set against what it can do, in words: against a run
/// that measured it, who sets the pace; against its physics, only how close it came.
fn against(limit: &Limiting, context: &WhyContext, step: Step) -> String {
    let Some(known) = capability(context, step, &limit.place) else {
        return String::new();
    };
    let device = if step.on_link() { "link" } else { "device" };
    match (limit.bytes_per_sec, known.bytes_per_sec) {
        (Some(rate), Some(can)) if can > 0.0 => {
            let percent = format!("{:.0}%", rate / can * 100.0);
            let near = rate / can >= NEAR;
            if known.run_id.is_some() {
                let pace = if near {
                    format!("the {device}, not the command, sets the pace")
                } else {
                    format!(
                        "the {device} can do more: the command's own requests (their size, their number at once) set the pace"
                    )
                };
                format!(", {percent} of what {} measured: {pace}", known.source)
            } else if near {
                format!(
                    ", {percent} of {}: the {device} itself sets the pace",
                    known.source
                )
            } else {
                format!(", {percent} of {}", known.source)
            }
        }
        _ => format!("; {}", known.source),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::why::stored::ProcessItem;

    fn step(step: Step, place: &str, seconds: f64, bytes: u64) -> WhyItem {
        WhyItem::Step(StepItem {
            step,
            place: place.into(),
            device: None,
            interface: None,
            peer: None,
            seconds,
            cpu_alongside_s: 0.0,
            active_seconds: if bytes > 0 { seconds } else { 0.0 },
            bytes,
        })
    }

    fn context() -> WhyContext {
        WhyContext {
            argv: vec!["cat".into(), "big".into()],
            wall_s: Some(8.1),
            sampled_s: 8.0,
            ..WhyContext::default()
        }
    }

    #[test]
    fn a_slow_device_limits_a_reader_and_is_set_against_its_run() {
        let mut context = context();
        context.capabilities.push(Capability {
            step: Step::DiskRead,
            place: "loop3".into(),
            bytes_per_sec: Some(105e6),
            run_id: Some(12),
            source: "run 12".into(),
        });
        let items = vec![
            step(Step::DiskRead, "loop3", 7.44, 774_000_000),
            step(Step::Cpu, "cat", 0.56, 0),
        ];
        let summary = summarize(&context, &items);
        let limit = summary.limiting.clone().unwrap();
        assert_eq!(limit.step, Step::DiskRead);
        assert!((limit.share - 0.93).abs() < 1e-9);
        assert_eq!(limit.capability_run, Some(12));
        assert!((limit.speedup_if_free.unwrap() - 1.0 / 0.07).abs() < 1e-9);
        let words = answer(&summary, &context).unwrap();
        assert!(
            words.starts_with(
                "disk read limits this command: 93% of 8.10 s waiting on loop3 at 104 MB/s \
                 (up to 14x faster were reads free), 99% of what run 12 measured: the device"
            ),
            "{words}"
        );
    }

    /// sqlite committing row by row: its fsyncs wait on the disk half of the time, and
    /// the CPU around them (the file system's journaling) is most of the rest.
    #[test]
    fn a_device_s_gain_is_bracketed_by_its_waits_and_the_cpu_around_them() {
        let mut write = step(Step::DiskWrite, "vda", 4.4, 0);
        if let WhyItem::Step(s) = &mut write {
            s.cpu_alongside_s = 3.2;
        }
        let items = vec![write, step(Step::Cpu, "python3", 3.4, 0)];
        let summary = summarize(&context(), &items);
        let limit = summary.limiting.clone().unwrap();
        assert_eq!(limit.step, Step::DiskWrite);
        assert!((limit.speedup_if_free.unwrap() - 1.0 / (1.0 - 0.55)).abs() < 1e-9);
        assert!((limit.cpu_alongside_share - 0.4).abs() < 1e-9);
        assert!((limit.speedup_if_free_with_cpu.unwrap() - 20.0).abs() < 1e-6);
        // 0.55 against 0.425 of CPU: no tie.
        assert_eq!(limit.tie_with, None);
        let words = answer(&summary, &context()).unwrap();
        assert!(
            words.contains(
                "(were writes free: 2.22x faster for their waits alone, up to 20x with the \
                 CPU around them, 40% of the time)"
            ),
            "{words}"
        );
        // Waits and the CPU around them are all of the time: no far end to state.
        if let WhyItem::Step(s) = &mut items.clone()[0] {
            s.cpu_alongside_s = 3.6;
            let summary = summarize(&context(), &[WhyItem::Step(s.clone())]);
            let limit = summary.limiting.unwrap();
            assert_eq!(limit.speedup_if_free_with_cpu, None);
        }
    }

    #[test]
    fn a_cpu_limit_says_what_faster_and_more_cpus_would_do_and_a_tie_is_said() {
        let mut context = context();
        context.cpus = Some(2);
        let process = |name: &str, cpu_s: f64| {
            WhyItem::Process(ProcessItem {
                pid: 1,
                ppid: 0,
                name: name.into(),
                threads: 1,
                cpu_s,
                cpu_wait_s: 0.0,
                waits: Vec::new(),
                cpu_by_thread: Vec::new(),
                waits_readable: true,
            })
        };
        let items = vec![step(Step::Cpu, "cc1", 7.6, 0), process("cc1", 15.0)];
        let summary = summarize(&context, &items);
        let limit = summary.limiting.clone().unwrap();
        assert!((limit.speedup_twice_cpu_speed.unwrap() - 1.0 / 0.525).abs() < 1e-9);
        let words = answer(&summary, &context).unwrap();
        assert!(
            words.contains(
                "(1.90x faster with CPUs twice as fast; it kept 1.9 of its 2 CPUs busy, so \
                 more CPUs would help too)"
            ),
            "{words}"
        );
        assert!(!words.contains("free"), "{words}");
        // One busy thread of two CPUs; and a disk wait within 5% of it.
        let items = vec![
            step(Step::Cpu, "dd", 3.9, 0),
            step(Step::DiskWrite, "vda", 4.0, 0),
            process("dd", 3.9),
        ];
        let summary = summarize(&context, &items);
        let limit = summary.limiting.clone().unwrap();
        assert_eq!(limit.step, Step::DiskWrite);
        assert_eq!(limit.tie_with.as_deref(), Some("CPU dd, 49%"));
        let items = vec![step(Step::Cpu, "python3", 7.6, 0), process("python3", 7.6)];
        let words = answer(&summarize(&context, &items), &context).unwrap();
        assert!(
            words.contains("it kept 0.9 of its 2 CPUs busy: more CPUs would not help"),
            "{words}"
        );
    }

    #[test]
    fn the_cpu_counts_across_processes_and_a_device_on_its_own() {
        let items = vec![
            step(Step::DiskRead, "loop3", 3.0, 1),
            step(Step::Cpu, "zstd", 2.5, 0),
            step(Step::Cpu, "cat", 1.0, 0),
        ];
        let summary = summarize(&context(), &items);
        let limit = summary.limiting.unwrap();
        assert_eq!((limit.step, limit.place.as_str()), (Step::Cpu, "zstd"));
        assert!((limit.share - 3.5 / 8.0).abs() < 1e-9);
        assert_eq!(summary.steps[0].place, "loop3");
    }

    #[test]
    fn a_limiting_link_carries_tcp_s_account_of_its_connection_in_words() {
        let mut send = step(Step::NetSend, "10.0.0.2:5201 via veth0", 7.0, 87_500_000);
        if let WhyItem::Step(s) = &mut send {
            s.peer = Some("10.0.0.2:5201".into());
        }
        let tcp = |peer: &str| {
            WhyItem::Tcp(TcpItem {
                peer: peer.into(),
                seconds: 7.0,
                busy_s: Some(7.0),
                rwnd_limited_s: Some(4.2),
                sndbuf_limited_s: Some(0.0),
                bytes_acked: Some(87_500_000),
                bytes_retrans: Some(0),
                rtt_us: 20_900,
                min_rtt_us: Some(20_000),
                snd_wnd_bytes: Some(65_536),
                rcv_wnd_bytes: None,
                delivery_rate_bytes_per_sec: None,
                receive_queue_bytes: None,
                send_queue_bytes: None,
            })
        };
        // iperf3's control connection to the same peer carried nothing.
        let mut control = tcp("10.0.0.2:5201");
        if let WhyItem::Tcp(c) = &mut control {
            (c.bytes_acked, c.busy_s, c.rwnd_limited_s) = (Some(300), Some(0.0), Some(0.0));
        }
        let items = vec![
            send,
            step(Step::Cpu, "iperf3", 0.5, 0),
            tcp("10.0.0.9:22"),
            control,
            tcp("10.0.0.2:5201"),
        ];
        let summary = summarize(&context(), &items);
        let limit = summary.limiting.clone().unwrap();
        assert_eq!(limit.tcp.as_ref().unwrap().peer, "10.0.0.2:5201");
        let words = answer(&summary, &context()).unwrap();
        assert!(
            words.ends_with(
                "data in flight 100% of the time, held by the peer's window 60% and by the send \
                 buffer 0%; round trip 20.9 ms (least 20.0 ms): the peer's window held it (the \
                 receiver's buffer, or a reader behind)"
            ),
            "{words}"
        );
    }
}
