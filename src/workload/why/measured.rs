//! What the rounds of `why --what-if` measured: each step's changed runs over its
//! unchanged ones, the sensitivity that ratio gives (how much of the command's time
//! moves with the step's speed), what that means forward, and where the samples' share
//! disagrees with it.

use super::stored::{Measured, StepShare, WhatIfItem, WhatIfStep, WhyItem};
use crate::account::Step;
use crate::analysis::stats::Stats;

/// How far the sampled share and the measured sensitivity may differ before the run
/// says which to believe.
pub const DISAGREE: f64 = 0.2;

/// Each step's what-if over its rounds, most sensitive first.
pub fn measured(items: &[WhyItem], steps: &[StepShare], sampled_s: f64) -> Vec<Measured> {
    let mut groups: Vec<(WhatIfStep, String, f64, Vec<&WhatIfItem>)> = Vec::new();
    for item in items {
        let WhyItem::WhatIf(round) = item else {
            continue;
        };
        match groups
            .iter_mut()
            .find(|(step, place, _, _)| *step == round.step && *place == round.place)
        {
            Some(group) => group.3.push(round),
            None => groups.push((round.step, round.place.clone(), round.factor, vec![round])),
        }
    }
    let mut out: Vec<Measured> = groups
        .into_iter()
        .filter_map(|(step, place, factor, rounds)| {
            let ratios: Vec<f64> = rounds.iter().filter_map(|r| ratio(r)).collect();
            let stats = Stats::of(&ratios)?;
            let s = |ratio: f64| sensitivity(ratio, factor);
            let (low, high) = {
                let (a, b) = (s(stats.min), s(stats.max));
                (a.min(b), a.max(b))
            };
            let forward = |sensitivity: f64, ratio: f64| {
                if step == WhatIfStep::ReadsFree {
                    1.0 / ratio.max(1e-9)
                } else {
                    twice_as_fast(sensitivity)
                }
            };
            let (speed_a, speed_b) = (forward(low, stats.max), forward(high, stats.min));
            Some(Measured {
                step,
                sampled_share: sampled_share(step, &place, steps, sampled_s),
                place,
                factor,
                ratio: stats.median,
                ratio_min: stats.min,
                ratio_max: stats.max,
                sensitivity: s(stats.median),
                sensitivity_min: low,
                sensitivity_max: high,
                rounds: ratios.len() as u32,
                speedup: forward(s(stats.median), stats.median),
                speedup_min: speed_a.min(speed_b),
                speedup_max: speed_a.max(speed_b),
            })
        })
        .collect();
    out.sort_by(|a, b| b.sensitivity.total_cmp(&a.sensitivity));
    out
}

/// A round's changed run over its unchanged one, in wall time. For `cpu`, at the
/// unchanged run's CPU speed: the changed run's wall less what its CPU seconds beyond
/// the unchanged run's cost at the quota (the same work took more CPU seconds where
/// the host ran its CPUs slower meanwhile: 1.0-1.6 s for one zstd from run to run on
/// the project's VM). Rounds stored before CPU seconds were kept give their walls.
pub fn ratio(r: &WhatIfItem) -> Option<f64> {
    if r.baseline_wall_s <= 0.0 {
        return None;
    }
    let wall = match (r.step, r.cpu_s, r.baseline_cpu_s, r.quota_cpus) {
        (WhatIfStep::Cpu, Some(cpu), Some(baseline), Some(quota)) if quota > 0.0 => {
            r.wall_s - (cpu - baseline) / quota
        }
        _ => r.wall_s,
    };
    Some(wall / r.baseline_wall_s)
}

/// (ratio − 1) / (factor − 1), held between 0 and 1: the share of the command's time
/// that grows and shrinks with the step's speed.
pub fn sensitivity(ratio: f64, factor: f64) -> f64 {
    if (factor - 1.0).abs() < 1e-9 {
        return 0.0;
    }
    ((ratio - 1.0) / (factor - 1.0)).clamp(0.0, 1.0)
}

/// What the command gains were the step twice as fast, at sensitivity `s`: its time
/// becomes 1 − s + s / 2 of what it was.
pub fn twice_as_fast(s: f64) -> f64 {
    1.0 / (1.0 - s / 2.0)
}

/// The share of the wall time the samples charged to what a what-if changed.
fn sampled_share(step: WhatIfStep, place: &str, steps: &[StepShare], sampled_s: f64) -> f64 {
    let sum = |keep: &dyn Fn(&StepShare) -> bool| {
        steps
            .iter()
            .filter(|s| keep(s))
            .map(|s| s.seconds)
            .sum::<f64>()
            / sampled_s.max(1e-9)
    };
    match step {
        WhatIfStep::Cpu => sum(&|s| s.step == Step::Cpu),
        WhatIfStep::DiskRead => sum(&|s| s.step == Step::DiskRead && s.place == place),
        WhatIfStep::DiskWrite => sum(&|s| s.step == Step::DiskWrite && s.place == place),
        WhatIfStep::ReadsFree => sum(&|s| s.step == Step::DiskRead),
        WhatIfStep::NetSend => sum(&|s| s.step == Step::NetSend && s.place == place),
        WhatIfStep::NetReceive => sum(&|s| s.step == Step::NetReceive && s.place == place),
    }
}

/// A step measured, in words for the answer: `disk_read on loop3`, `cpu`.
pub fn named(m: &Measured) -> String {
    step_named(m.step, &m.place)
}

/// A step changed at `place`, in words: a device's or a link's name follows its step.
pub fn step_named(step: WhatIfStep, place: &str) -> String {
    match step {
        WhatIfStep::DiskRead | WhatIfStep::DiskWrite => format!("{} on {place}", step.name()),
        WhatIfStep::NetSend => format!("net_send to {place}"),
        WhatIfStep::NetReceive => format!("net_receive from {place}"),
        _ => step.name().to_string(),
    }
}

/// The answer measured: the step the command's time moves with most, by how much, and
/// what it would gain twice as fast (or, for reads, cached).
pub fn answer(measured: &[Measured]) -> Option<String> {
    let m = measured.first()?;
    let range = |a: f64, b: f64| format!("{a:.2}–{b:.2}");
    if m.step == WhatIfStep::ReadsFree {
        return Some(format!(
            "measured: with the files it read already cached it took {:.2}× the time ({}, {} rounds): {:.1}× faster",
            m.ratio,
            range(m.ratio_min, m.ratio_max),
            m.rounds,
            m.speedup
        ));
    }
    Some(format!(
        "measured: {} limits it most: at half speed the command took {:.2}× as long ({}, {} rounds), a sensitivity of {:.2}; twice as fast, it would be about {:.2}× faster ({})",
        named(m),
        m.ratio,
        range(m.ratio_min, m.ratio_max),
        m.rounds,
        m.sensitivity,
        m.speedup,
        range(m.speedup_min, m.speedup_max),
    ))
}

/// Where the samples' share and the measurement disagree by more than [`DISAGREE`]:
/// which to believe, and why they can differ.
pub fn disagreement(m: &Measured) -> Option<String> {
    if m.step == WhatIfStep::ReadsFree || (m.sensitivity - m.sampled_share).abs() <= DISAGREE {
        return None;
    }
    let why = if m.sensitivity > m.sampled_share {
        "work that goes with the step was charged elsewhere (CPU inside an fsync or a \
         read, a cache the changed run emptied)"
    } else {
        "the step overlaps other work of the command (a pipeline's reader and writer run \
         at once), so its waits are not all on the path the command waits for"
    };
    Some(format!(
        "the samples charged {:.0}% of the time to {}, slowing it measured a sensitivity of {:.2}: \
         believe the measurement; {why}",
        m.sampled_share * 100.0,
        named(m),
        m.sensitivity
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round(step: WhatIfStep, place: &str, factor: f64, wall_s: f64, base: f64) -> WhyItem {
        WhyItem::WhatIf(WhatIfItem {
            step,
            place: place.into(),
            factor,
            changed_by: String::new(),
            round: 1,
            wall_s,
            baseline_wall_s: base,
            cpu_s: None,
            baseline_cpu_s: None,
            quota_cpus: None,
            disturbed: None,
        })
    }

    #[test]
    fn a_cpu_round_is_taken_at_the_unchanged_run_s_cpu_speed() {
        // One CPU-bound thread: 1.0 s of CPU unchanged; under a quota of half a CPU the
        // host ran slower, so the same work took 1.3 s of CPU and 2.6 s of wall.
        let WhyItem::WhatIf(mut r) = round(WhatIfStep::Cpu, "its processes", 2.0, 2.6, 1.0) else {
            unreachable!()
        };
        assert!(
            (ratio(&r).unwrap() - 2.6).abs() < 1e-9,
            "no CPU seconds: walls"
        );
        (r.cpu_s, r.baseline_cpu_s, r.quota_cpus) = (Some(1.3), Some(1.0), Some(0.5));
        assert!((ratio(&r).unwrap() - 2.0).abs() < 1e-9);
        // A device round is its walls, whatever its CPU did.
        r.step = WhatIfStep::DiskRead;
        assert!((ratio(&r).unwrap() - 2.6).abs() < 1e-9);
        r.baseline_wall_s = 0.0;
        assert_eq!(ratio(&r), None);
    }

    #[test]
    fn a_step_s_sensitivity_is_its_rounds_median_ratio_over_the_factor() {
        let items = vec![
            round(WhatIfStep::Cpu, "its processes", 2.0, 1.02, 1.0),
            round(WhatIfStep::Cpu, "its processes", 2.0, 1.10, 1.0),
            round(WhatIfStep::Cpu, "its processes", 2.0, 1.04, 1.0),
            round(WhatIfStep::DiskRead, "loop3", 2.0, 3.9, 2.0),
            round(WhatIfStep::DiskRead, "loop3", 2.0, 3.8, 2.0),
            round(WhatIfStep::DiskRead, "loop3", 2.0, 4.0, 2.0),
        ];
        let steps = vec![StepShare {
            step: Step::DiskRead,
            place: "loop3".into(),
            seconds: 1.0,
            share: 0.5,
            bytes_per_sec: None,
        }];
        let m = measured(&items, &steps, 2.0);
        assert_eq!(m[0].step, WhatIfStep::DiskRead);
        assert!((m[0].ratio - 1.95).abs() < 1e-9);
        assert!((m[0].sensitivity - 0.95).abs() < 1e-9);
        assert!((m[0].sensitivity_min - 0.9).abs() < 1e-9);
        assert!((m[0].sensitivity_max - 1.0).abs() < 1e-9);
        assert!((m[0].speedup - 1.0 / 0.525).abs() < 1e-9);
        assert_eq!(m[0].rounds, 3);
        assert!((m[0].sampled_share - 0.5).abs() < 1e-9);
        assert!((m[1].sensitivity - 0.04).abs() < 1e-9);
        assert!(
            disagreement(&m[0])
                .unwrap()
                .contains("believe the measurement")
        );
        assert_eq!(disagreement(&m[1]), None);
        let said = answer(&m).unwrap();
        assert!(
            said.starts_with("measured: disk_read on loop3 limits it most"),
            "{said}"
        );
    }

    #[test]
    fn reads_made_free_give_their_gain_directly() {
        let items = vec![round(
            WhatIfStep::ReadsFree,
            "the files it read",
            0.0,
            0.5,
            2.0,
        )];
        let m = measured(&items, &[], 2.0);
        assert!((m[0].sensitivity - 0.75).abs() < 1e-9);
        assert!((m[0].speedup - 4.0).abs() < 1e-9);
        assert_eq!(sensitivity(0.5, 2.0), 0.0);
        assert_eq!(sensitivity(3.0, 2.0), 1.0);
    }
}
