//! What ratelab concludes of a stored task: whether its outputs decoded, the step that
//! limits it at each thread count, whether its input came from the page cache, and what
//! storage series of its folders say next to its read and write steps.

use super::item::Step;
use std::path::Path;

use super::kind::TaskKind;
use super::stored::{DiskRate, DiskRead, DiskRuns, DiskWrite};
use super::summary::{
    MODEL_TOLERANCE, StepRate, ThreadsSummary, UnstableWhatIf, per_threads, summarize,
};
use crate::document::{Severity, Verdict};
use crate::platform;
use crate::vocab::units::format_rate;
use crate::workload::{DecodeError, Decoded, Stored};

/// A stored disk rate within this factor of the task's step rate is the same rate.
const SAME_RATE: f64 = 1.5;

/// The task's own verdicts, from its items and context.
pub fn verdicts(w: &Stored<TaskKind>) -> Vec<Verdict> {
    let verdict = Verdict::about(Some(w.index()));
    let mut out = Vec::new();
    let failed: Vec<usize> = w
        .items
        .iter()
        .filter(|i| i.round_trip_ok == Some(false))
        .map(|i| i.threads)
        .collect();
    if !failed.is_empty() {
        out.push(verdict(
            "round_trip_failed",
            Severity::Error,
            format!(
                "the output at {failed:?} threads does not decode to the original bytes: the codec or the storage corrupted it"
            ),
        ));
    }
    let summaries = per_threads(&w.items);
    for summary in &summaries {
        out.push(verdict(
            "rate_limiting_step",
            Severity::Info,
            limiting_sentence(summary),
        ));
        if let Some(words) = model_sentence(summary) {
            out.push(verdict("what_if_differs", Severity::Info, words));
        }
        for (free, unstable) in &summary.unstable_what_if {
            out.push(verdict(
                "what_if_unstable",
                Severity::Warning,
                unstable_sentence(summary, *free, unstable),
            ));
        }
    }
    if let Some(words) = cached_input(w) {
        out.push(verdict("input_cached", Severity::Info, words));
    }
    if let (Some(most), Some(disk_runs)) = (summaries.last(), &w.context.disk_runs) {
        out.extend(
            disk_sentences(disk_runs, most)
                .into_iter()
                .map(|words| verdict("disk_vs_task", Severity::Info, words)),
        );
    }
    // Two or three thread counts fit any law: only more say something.
    if summaries.len() > 3
        && let Some(sentence) = summarize(&w.items)
            .fits
            .sentence(&crate::vocab::units::format_rate)
    {
        out.push(verdict("scaling_law", Severity::Info, sentence));
    }
    out
}

/// In words, when more than half the input was in the page cache before a read that
/// went through it (or the input lives in memory).
fn cached_input(w: &Stored<TaskKind>) -> Option<String> {
    let in_memory = w
        .context
        .read_chain
        .as_ref()
        .is_some_and(|chain| matches!(chain.fs_type.as_str(), "tmpfs" | "ramfs"));
    let cached = w
        .items
        .iter()
        .filter_map(|i| {
            // A direct read passes its own cache, never the layers below it.
            let own = i
                .cached_fraction_before
                .filter(|_| i.direct == Some(false) || in_memory);
            let layers = i.layers.iter().map(|l| l.cached_fraction_before);
            // What the image's daemon did not read came from a cache between.
            let unread = i.read_below_fraction.map(|f| 1.0 - f);
            own.into_iter().chain(layers).chain(unread).reduce(f64::max)
        })
        .find(|&f| f > 0.5)?;
    Some(format!(
        "{:.0}% of the input was in the page cache before it was read (tmpfs, or a file that could not be evicted): the read rate is memory's, not a storage device's",
        cached * 100.0
    ))
}

/// What the storage series of the task's own run, on the folders it read and wrote,
/// say next to its read and write steps at the most threads.
pub fn verdicts_beside(w: &Stored<TaskKind>, run: &Decoded) -> Result<Vec<Verdict>, DecodeError> {
    // Stored runs were looked up before the run; a series of this run is newer.
    let Some(most) = per_threads(&w.items).pop() else {
        return Ok(Vec::new());
    };
    Ok(disk_sentences(&series_beside(w, run)?, &most)
        .into_iter()
        .map(|words| Verdict::about(Some(w.index()))("disk_vs_task", Severity::Info, words))
        .collect())
}

/// The streaming rates the storage series of `w`'s own run measured on the folders it
/// read and wrote.
pub(super) fn series_beside(w: &Stored<TaskKind>, run: &Decoded) -> Result<DiskRuns, DecodeError> {
    let read = series_rate(run, w.context.read_folder.as_deref(), "read")?;
    let write = series_rate(run, w.context.write_folder.as_deref(), "write")?;
    Ok(DiskRuns {
        read: read.map(|(target, rate)| DiskRead {
            run_id: None,
            target,
            read_bytes_per_sec: rate,
        }),
        write: write.map(|(target, rate)| DiskWrite {
            run_id: None,
            target,
            write_bytes_per_sec: rate,
        }),
    })
}

/// The target and streaming rate of `op` of the storage series of `w`'s run that
/// measured `folder`, the nearest first (a disk image mounted inside a folder is its
/// own storage, not the folder's); `None` when none did, or the folder is unknown.
fn series_rate(
    run: &Decoded,
    folder: Option<&Path>,
    op: &str,
) -> Result<Option<(String, f64)>, DecodeError> {
    let Some(folder) = folder else {
        return Ok(None);
    };
    let mut candidates: Vec<(usize, &crate::document::WorkloadRecord)> = run
        .doc
        .workloads
        .iter()
        .enumerate()
        .filter(|(_, record)| platform::measured_by(folder, Path::new(&record.target)))
        .collect();
    // The deepest target is the nearest storage; among equals, the run's order.
    candidates.sort_by_key(|(index, record)| {
        (
            std::cmp::Reverse(Path::new(&record.target).components().count()),
            *index,
        )
    });
    for (index, record) in candidates {
        // Each kind says whether it streamed files there (a storage series does).
        let Some(view) = run.view(index)? else {
            continue;
        };
        if let Some(rate) = view.streaming_rate(op) {
            return Ok(Some((record.target.clone(), rate)));
        }
    }
    Ok(None)
}

/// The limiting step of one thread count in words.
pub(super) fn limiting_sentence(summary: &ThreadsSummary) -> String {
    let limit = summary.rate_limiting_step;
    let rate_of = |op: Step| {
        summary
            .step(op)
            .map_or(f64::NAN, |s| s.source_bytes_per_sec)
    };
    let others: Vec<&StepRate> = summary
        .steps
        .iter()
        .filter(|s| s.op != limit && s.op != Step::Total)
        .collect();
    let gain = summary.gain_if_free(limit);
    let together = if summary.share_of_limit < 0.9 {
        format!(
            ", {:.0}% below {limit} alone",
            (1.0 - summary.share_of_limit) * 100.0
        )
    } else {
        String::new()
    };
    let names = others
        .iter()
        .map(|s| s.op.as_str())
        .collect::<Vec<_>>()
        .join(" or ");
    let what_if = if summary.measured() {
        let rest = others
            .iter()
            .map(|s| format!("{} {:.2}x", s.op, summary.gain_if_free(s.op)))
            .collect::<Vec<_>>()
            .join(", ");
        let most = others
            .iter()
            .map(|s| summary.gain_if_free(s.op))
            .fold(1.0, f64::max);
        format!(
            "made free in turn (measured), {limit} sped the task up {gain:.2}x, {rest}: a faster {limit} could make the task up to {gain:.2}x faster, a faster {names} at most {most:.2}x"
        )
    } else {
        let next = others
            .iter()
            .min_by(|a, b| a.source_bytes_per_sec.total_cmp(&b.source_bytes_per_sec))
            .map_or("nothing", |s| s.op.as_str());
        format!(
            "a faster {limit} could make the task up to {gain:.2}x faster, until {next} limits it, and a faster {names} gains nothing while {limit} limits it (modelled: {})",
            if summary.unstable_what_if.is_empty() {
                "the what-if did not run"
            } else {
                "the what-if was unstable"
            }
        )
    };
    format!(
        "at {} thread{} {limit} limits this task: alone it goes at {} of original bytes ({}), and the whole task went at {}{together}; {what_if}",
        summary.threads,
        if summary.threads == 1 { "" } else { "s" },
        format_rate(rate_of(limit)),
        others
            .iter()
            .map(|s| format!("{} {}", s.op, format_rate(s.source_bytes_per_sec)))
            .collect::<Vec<_>>()
            .join(", "),
        format_rate(rate_of(Step::Total)),
    )
}

/// A what-if faster than a step it still ran, in words.
fn unstable_sentence(summary: &ThreadsSummary, free: Step, unstable: &UnstableWhatIf) -> String {
    let bound = unstable.bound_op;
    format!(
        "at {} thread{} with {free} free the task went at {} of original bytes ({:.2}x), faster than {bound} alone ({}), which it still ran: {bound}'s rate moved between the two, so this what-if is left out and {free}'s gain modelled ({:.2}x)",
        summary.threads,
        if summary.threads == 1 { "" } else { "s" },
        format_rate(unstable.source_bytes_per_sec),
        unstable.gain,
        format_rate(unstable.bound_source_bytes_per_sec),
        summary.gain_if_free(free),
    )
}

/// Where the measured what-if and the model of overlapping steps differ by more than
/// [`MODEL_TOLERANCE`], in words; `None` where they agree or nothing was measured.
fn model_sentence(summary: &ThreadsSummary) -> Option<String> {
    let differ: Vec<String> = summary
        .measured_speedup_if_free
        .keys()
        .filter_map(|op| {
            let (measured, model) = summary.model_strays(*op)?;
            Some(format!(
                "with {op} free the task went {measured:.2}x faster where the model said {model:.2}x"
            ))
        })
        .collect();
    if differ.is_empty() {
        return None;
    }
    let slowest = summary
        .steps
        .iter()
        .filter(|s| s.op != Step::Total)
        .min_by(|a, b| a.source_bytes_per_sec.total_cmp(&b.source_bytes_per_sec))
        .map(|s| s.op);
    let named = if let Some(slowest) = slowest.filter(|s| *s != summary.rate_limiting_step) {
        format!(
            "; alone, {slowest} is the slowest step, yet freeing {} gained most",
            summary.rate_limiting_step
        )
    } else {
        String::new()
    };
    Some(format!(
        "at {} thread{} the measured what-if and the model (the steps fully overlapped, the slowest alone setting the pace) differ by more than {:.0}%: {}{named}; the measured figures are the ones this task shows",
        summary.threads,
        if summary.threads == 1 { "" } else { "s" },
        MODEL_TOLERANCE * 100.0,
        differ.join("; "),
    ))
}

/// What storage series of the task's folders say next to its read and write steps.
fn disk_sentences(series: &DiskRuns, summary: &ThreadsSummary) -> Vec<String> {
    series
        .rates()
        .into_iter()
        .filter_map(|disk| Some(disk_sentence(disk, summary.step(disk.op)?, summary)))
        .collect()
}

/// A storage series' rate next to the task's step of the same op, in words, with the
/// unit its rates are in.
fn disk_sentence(disk: DiskRate, step: &StepRate, summary: &ThreadsSummary) -> String {
    let unit = if (step.bytes_per_sec / step.source_bytes_per_sec - 1.0).abs() < 0.01 {
        "original bytes, as in the task's table".to_string()
    } else {
        format!(
            "bytes on the disk, compressed: the {} step's {} carry {} of original bytes",
            disk.op,
            format_rate(step.bytes_per_sec),
            format_rate(step.source_bytes_per_sec)
        )
    };
    format!("{} (rates in {unit})", disk_words(disk, step, summary))
}

/// [`disk_sentence`] without its unit.
fn disk_words(disk: DiskRate, step: &StepRate, summary: &ThreadsSummary) -> String {
    let DiskRate {
        op,
        run_id,
        target: place,
        bytes_per_sec: disk,
    } = disk;
    let run = run_id.map_or("of this run".to_string(), |id| format!("(run {id})"));
    let task = step.bytes_per_sec;
    let close = disk / task < SAME_RATE && task / disk < SAME_RATE;
    let verb = if op == Step::Read { "read" } else { "wrote" };
    if summary.rate_limiting_step != op {
        let needed = summary
            .step(summary.rate_limiting_step)
            .map_or(f64::NAN, |l| l.source_bytes_per_sec)
            * step.bytes_per_sec
            / step.source_bytes_per_sec;
        return format!(
            "the task needs {} of {op} on {place}; the storage series {run} {verb} {} there and the {op} step alone {}: the limit is {}, not the disk",
            format_rate(needed),
            format_rate(disk),
            format_rate(task),
            summary.rate_limiting_step
        );
    }
    if close {
        format!(
            "{op} at {} on {place} limits this task, and the storage series {run} {verb} {} there: the disk is the limit, and a faster one would speed the task up to {:.2}x",
            format_rate(task),
            format_rate(disk),
            summary.gain_if_free(op)
        )
    } else if task > disk {
        format!(
            "{op} at {} on {place} limits this task, yet it ran faster than the storage series {run} {verb} there ({}): the disk has changed since, or the task's {op} was served by a cache",
            format_rate(task),
            format_rate(disk),
        )
    } else {
        format!(
            "{op} at {} on {place} limits this task, but the storage series {run} {verb} {} there: the task's {op} pattern, not the disk, is the limit",
            format_rate(task),
            format_rate(disk),
        )
    }
}
