//! A monitor run at a glance, as `profile` shows it beside the cpu tests: the cores'
//! residency (one row for all cores), power where measured, and the
//! watched threads grouped by what they do (`cpu-*` for every thread of the cpu tests,
//! `cpu-int` where only that test ran) rather than one row per thread id; and the
//! figures this machine does not expose.

use std::collections::BTreeSet;

use super::kind::MonitorKind;
use super::summary::{CoreSummary, ThreadPlacement, cores, placements};
use super::tables;
use crate::analysis::stats::Stats;
use crate::sensors::Sources;
use crate::vocab::{Table, Unmeasured};
use crate::workload::Stored;

/// What each figure of a sample is, in words.
fn figure_words(name: &str) -> &str {
    match name {
        "active_fraction" => "active residency",
        "freq_hz" => "CPU frequency",
        "power_w" => "per-core power",
        "system_power_w" => "package power",
        "placement" => "thread placement",
        other => other,
    }
}

/// The figures no source could feed, and why; power in one entry when neither the
/// cores' nor the package's could be read (the package's reason says what is missing).
pub fn unmeasured(w: &Stored<MonitorKind>) -> Vec<Unmeasured> {
    let mut out: Vec<Unmeasured> = w
        .context
        .sources
        .iter()
        .flat_map(Sources::named)
        .filter_map(|(name, source)| {
            let reason = source.unavailable.as_ref()?;
            Some(Unmeasured::new(
                format!("{name}_unavailable"),
                figure_words(name),
                reason,
            ))
        })
        .collect();
    let code = |name: &str| vec![format!("{name}_unavailable")];
    if let Some(cores) = out.iter().position(|u| u.codes == code("power_w"))
        && out.iter().any(|u| u.codes == code("system_power_w"))
    {
        let cores = out.remove(cores);
        if let Some(package) = out.iter_mut().find(|u| u.codes == code("system_power_w")) {
            package.what = "power".into();
            package.codes.extend(cores.codes);
        }
    }
    out
}

/// The threads grouped by name under a line of every core's residency (a table of
/// it when there is one core or no thread), and power where measured.
pub fn brief_tables(w: &Stored<MonitorKind>) -> Vec<Table> {
    let per_core = cores(&w.items);
    let sources = w.context.sources.as_ref();
    let threads = grouped(&placements(&w.items), true);
    let residency = all_cores(&per_core, w.context.samples).filter(|_| threads.is_some());
    let mut out = Vec::new();
    if residency.is_none() {
        let freq_unavailable = sources.and_then(|s| s.freq_hz.unavailable.as_ref());
        out.push(tables::per_core(
            &per_core,
            w.context.samples,
            freq_unavailable,
        ));
    }
    out.extend(tables::power_table(&w.items, sources));
    out.extend(threads.map(|mut threads| {
        if let Some(line) = residency {
            threads.title = format!("{}; {line}", threads.title);
        }
        threads
    }));
    out
}

/// Every core's residency in words: the share of the time the cores were active on
/// average (the mean: a median of bursty samples reads 0% while work ran in bursts),
/// with the spread over cores; `None` for one core.
fn all_cores(per_core: &[CoreSummary], samples: u64) -> Option<String> {
    if per_core.len() < 2 {
        return None;
    }
    let means: Vec<f64> = per_core
        .iter()
        .filter_map(|c| c.active_fraction.as_ref().map(|s| s.mean))
        .collect();
    let mean = Stats::of(&means)?;
    let all = means.iter().sum::<f64>() / means.len() as f64;
    let percent = |x: f64| format!("{:.0}%", x * 100.0);
    Some(format!(
        "the {} cores were active {} of the time on average (each from {} to {}; {samples} samples)",
        per_core.len(),
        percent(all),
        percent(mean.min),
        percent(mean.max),
    ))
}

/// CPU numbers as ranges: `0-3,8,10-11`.
fn cpu_ranges(cpus: &BTreeSet<u32>) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut run: Option<(u32, u32)> = None;
    for &cpu in cpus {
        run = match run {
            Some((from, to)) if cpu == to + 1 => Some((from, cpu)),
            Some(done) => {
                out.push(range_words(done));
                Some((cpu, cpu))
            }
            None => Some((cpu, cpu)),
        };
    }
    out.extend(run.map(range_words));
    out.join(",")
}

fn range_words((from, to): (u32, u32)) -> String {
    match to - from {
        0 => from.to_string(),
        1 => format!("{from},{to}"),
        _ => format!("{from}-{to}"),
    }
}

/// What a thread does: its name without a trailing `-N` (`cpu-int-1` is `cpu-int`).
fn stem(name: &str) -> &str {
    match name.rsplit_once('-') {
        Some((head, tail)) if !tail.is_empty() && tail.bytes().all(|b| b.is_ascii_digit()) => head,
        _ => name,
    }
}

/// The family a thread belongs to: its stem up to the first `-` (`cpu` for `cpu-int`
/// and `cpu-fma`, `ratelab` for its helpers); the stem where it has none.
fn family(name: &str) -> &str {
    let stem = stem(name);
    stem.split_once('-').map_or(stem, |(head, _)| head)
}

/// The watched threads, one row per group in the order first seen: per stem, or with
/// `by_family` per family, named by its stem where every thread has the same
/// (`cpu-int`), else `cpu-*`.
pub fn grouped(placements: &[ThreadPlacement], by_family: bool) -> Option<Table> {
    let key = |name: &str| match by_family {
        true => family(name).to_string(),
        false => stem(name).to_string(),
    };
    let mut groups: Vec<(String, Vec<&ThreadPlacement>)> = Vec::new();
    for p in placements {
        match groups
            .iter_mut()
            .find(|(_, members)| key(&members[0].name) == key(&p.name))
        {
            Some((name, members)) => {
                if stem(&members[0].name) != stem(&p.name) {
                    *name = format!("{}-*", family(&p.name));
                }
                members.push(p);
            }
            None => groups.push((stem(&p.name).to_string(), vec![p])),
        }
    }
    let rows: Vec<Vec<String>> = groups
        .iter()
        .map(|(name, members)| {
            let cpus: BTreeSet<u32> = members
                .iter()
                .flat_map(|p| p.cpus_seen.iter().copied())
                .collect();
            let policies: BTreeSet<String> = members
                .iter()
                .map(|p| format!("{} {}", p.policy, p.nice))
                .collect();
            vec![
                name.clone(),
                members.len().to_string(),
                members.iter().map(|p| p.samples).sum::<usize>().to_string(),
                cpu_ranges(&cpus),
                members
                    .iter()
                    .map(|p| p.migrations)
                    .sum::<usize>()
                    .to_string(),
                policies.into_iter().collect::<Vec<_>>().join(", "),
            ]
        })
        .collect();
    (!rows.is_empty()).then(|| Table {
        title: "where the watched threads ran, by what they do".into(),
        header: [
            "threads",
            "n",
            "samples",
            "CPUs seen",
            "migrations",
            "policy nice",
        ]
        .map(String::from)
        .to_vec(),
        rows,
        numeric: vec![1, 2, 4],
    })
}

#[cfg(test)]
mod tests {
    use super::{BTreeSet, cpu_ranges, family, stem};

    #[test]
    fn a_thread_is_named_by_what_it_does() {
        assert_eq!(family("cpu-int-1"), "cpu");
        assert_eq!(family("ratelab-interfe"), "ratelab");
        assert_eq!(family("ratelab"), "ratelab");
        assert_eq!(stem("cpu-int-1"), "cpu-int");
        assert_eq!(stem("ratelab-2"), "ratelab");
        assert_eq!(stem("net-own-server"), "net-own-server");
        assert_eq!(stem("ratelab"), "ratelab");
        assert_eq!(stem("x-"), "x-");
    }

    #[test]
    fn cpus_read_as_ranges() {
        let set = |cpus: &[u32]| cpus.iter().copied().collect::<BTreeSet<u32>>();
        assert_eq!(cpu_ranges(&set(&[0, 1, 2, 3, 8, 10, 11])), "0-3,8,10,11");
        assert_eq!(cpu_ranges(&set(&[0, 1])), "0,1");
        assert_eq!(cpu_ranges(&set(&[5])), "5");
        assert_eq!(cpu_ranges(&set(&(0..16).collect::<Vec<_>>())), "0-15");
    }
}
