//! What moved since the last profile of a machine. Only figures measured the same way
//! in both runs are set side by side, as each kind keys them (`Kind::profile_figures`):
//! the storage series of the same target with the same sizes and passes, by operation,
//! over the files of 64 MiB and more (the rates a big transfer sees, and enough items
//! for a rank test), and each block I/O test's IOPS per interval. Each is tested with a
//! Mann-Whitney U test, Holm-corrected across the figures so that several tests at
//! once do not raise false alarms, and called only when its median moved by 10% or
//! more. Other parts (one cpu item per test and thread count, a few net intervals)
//! have too few items to tell noise from change; `results compare` shows them all. A
//! change is never put down to the storage when other work disturbed either run.

use super::interference;
use super::mann_whitney::{self, holm};
use super::stats::Stats;
use crate::document::{RunDocument, Severity, Verdict};
use crate::vocab::ProfileFigure;

/// Family-wise error rate of the tests together.
const ALPHA: f64 = 0.05;
/// Smallest move of a median worth a word.
const MIN_CHANGE: f64 = 0.10;
/// Figures named in the verdict; the rest are counted.
const NAMED: usize = 6;

/// The codes of the verdicts on what moved since the last profile.
pub const CODES: [&str; 4] = [
    "since_last_profile",
    "unchanged_since_last_profile",
    "changed_since_last_profile",
    "disturbed_since_last_profile",
];

/// One figure of both runs.
struct Figure {
    words: String,
    ratio: f64,
    p_value: f64,
}

/// The verdicts on what moved from `previous` to `current`, two profiles of one machine
/// whose figures are `then` and `now`.
pub fn since(
    previous: &RunDocument,
    current: &RunDocument,
    then: &[ProfileFigure],
    now: &[ProfileFigure],
) -> Vec<Verdict> {
    let before = format!(
        "profile run {} of this machine ({})",
        previous.run_id.unwrap_or_default(),
        previous.started_at
    );
    let verdict = Verdict::about(None);
    let figures = figures(then, now);
    if figures.is_empty() {
        return vec![verdict(
            CODES[0],
            Severity::Info,
            format!(
                "{before} measured other targets or settings: no storage figure to set this one against"
            ),
        )];
    }
    let called = called(&figures);
    if called.is_empty() {
        return vec![verdict(
            CODES[1],
            Severity::Info,
            format!(
                "no storage figure moved beyond the noise since {before}: {}",
                ratio_range(&figures)
            ),
        )];
    }
    let (named, more) = named(&called);
    let disturbed = disturbed(previous, current);
    if !disturbed.is_empty() {
        return vec![verdict(
            CODES[3],
            Severity::Info,
            format!(
                "since {before}, storage figures moved ({}{more}), but other work disturbed {} \
                 (see the disturbed verdict): the change is not put down to the storage",
                named.join("; "),
                disturbed.join(" and ")
            ),
        )];
    }
    let slower = called.iter().any(|f| f.ratio < 1.0);
    vec![verdict(
        CODES[2],
        if slower {
            Severity::Warning
        } else {
            Severity::Info
        },
        format!(
            "since {before}, storage moved beyond the noise: {}{} (`ratelab results compare {} {}` shows every size and test)",
            named.join("; "),
            more,
            previous.run_id.unwrap_or_default(),
            current.run_id.unwrap_or_default(),
        ),
    )]
}

/// Factor a figure's median must move by between two runs of the same work on one
/// machine to be called moved, whatever a test says: no device's own rate wanders so.
pub const MOVED: f64 = 2.0;

/// The code of the verdict that says the same work's rate moved more than [`MOVED`]
/// times since the last run of the same verb on this machine.
pub const MOVED_CODE: &str = "rate_moved";

/// The verdict on the figures of `current` whose median moved more than [`MOVED`] times
/// from `previous`, the last run of its verb on this machine, measured the same way
/// (`then` and `now`); none where none did.
pub fn moved(
    previous: &RunDocument,
    current: &RunDocument,
    then: &[ProfileFigure],
    now: &[ProfileFigure],
) -> Option<Verdict> {
    let moved: Vec<Figure> = figures_of_medians(then, now)
        .into_iter()
        .filter(|f| f.ratio > MOVED || f.ratio < 1.0 / MOVED)
        .collect();
    if moved.is_empty() {
        return None;
    }
    let words: Vec<String> = moved
        .iter()
        .take(NAMED)
        .map(|f| format!("{} {:.2}x", f.words, f.ratio))
        .collect();
    let more = if moved.len() > NAMED {
        format!("; and {} more", moved.len() - NAMED)
    } else {
        String::new()
    };
    let why = if disturbed(previous, current).is_empty() {
        "a cache this machine cannot see (a virtual disk's host, a controller's), a drive \
         that throttles or other work on shared storage moves a figure so"
    } else {
        "other work disturbed one of them (see the disturbed verdict)"
    };
    Some(Verdict::about(None)(
        MOVED_CODE,
        Severity::Warning,
        format!(
            "the same work ran more than {MOVED:.0}x faster or slower than in run {} of this machine ({}): {}{more}; {why}, so neither run's figure is the device's alone (`ratelab results compare {} {}`)",
            previous.run_id.unwrap_or_default(),
            previous.started_at,
            words.join("; "),
            previous.run_id.unwrap_or_default(),
            current.run_id.unwrap_or_default(),
        ),
    ))
}

/// Each figure of `now` set against the figure of `then` measured the same way, by
/// their medians alone: one item each is enough to see a rate move twofold.
fn figures_of_medians(then: &[ProfileFigure], now: &[ProfileFigure]) -> Vec<Figure> {
    paired(then, now)
        .filter_map(|(then, now)| {
            let (x, y) = (Stats::of(&then.rates)?, Stats::of(&now.rates)?);
            (x.median > 0.0).then(|| Figure {
                words: now.words.clone(),
                ratio: y.median / x.median,
                p_value: f64::NAN,
            })
        })
        .collect()
}

/// The range of the figures' ratios, not every figure: a profile of several targets
/// has many.
fn ratio_range(figures: &[Figure]) -> String {
    let by_ratio = |a: &&Figure, b: &&Figure| a.ratio.total_cmp(&b.ratio);
    let (Some(low), Some(high)) = (
        figures.iter().min_by(by_ratio),
        figures.iter().max_by(by_ratio),
    ) else {
        return String::new();
    };
    if figures.len() == 1 {
        format!("{} {:.2}x", low.words, low.ratio)
    } else {
        format!(
            "{} figures, from {:.2}x ({}) to {:.2}x ({})",
            figures.len(),
            low.ratio,
            low.words,
            high.ratio,
            high.words
        )
    }
}

/// Which of the two runs other work disturbed, in words ("that run", "this run").
fn disturbed(previous: &RunDocument, current: &RunDocument) -> Vec<&'static str> {
    [(previous, "that run"), (current, "this run")]
        .into_iter()
        .filter(|(run, _)| interference::disturbed(run))
        .map(|(_, which)| which)
        .collect()
}

/// The figures that moved beyond the noise (Holm-corrected across all) and by
/// [`MIN_CHANGE`] or more.
fn called(figures: &[Figure]) -> Vec<&Figure> {
    let p_values: Vec<f64> = figures.iter().map(|f| f.p_value).collect();
    figures
        .iter()
        .zip(holm(&p_values, ALPHA))
        .filter(|(f, beyond)| *beyond && (f.ratio - 1.0).abs() >= MIN_CHANGE)
        .map(|(f, _)| f)
        .collect()
}

/// The first [`NAMED`] of `called` in words, and how many more there are in words.
fn named(called: &[&Figure]) -> (Vec<String>, String) {
    let named = called
        .iter()
        .take(NAMED)
        .map(|f| format!("{} {:.2}x (p {:.2e})", f.words, f.ratio, f.p_value))
        .collect();
    let more = if called.len() > NAMED {
        format!("; and {} more", called.len() - NAMED)
    } else {
        String::new()
    };
    (named, more)
}

/// Each figure of `now` with the figure of `then` measured the same way (its key).
fn paired<'a>(
    then: &'a [ProfileFigure],
    now: &'a [ProfileFigure],
) -> impl Iterator<Item = (&'a ProfileFigure, &'a ProfileFigure)> {
    now.iter()
        .filter_map(|now| Some((then.iter().find(|then| then.key == now.key)?, now)))
}

/// Each figure of `now` set against the figure of `then` measured the same way, with a
/// rank test.
fn figures(then: &[ProfileFigure], now: &[ProfileFigure]) -> Vec<Figure> {
    paired(then, now)
        .filter_map(|(then, now)| {
            let (a, b) = (&then.rates, &now.rates);
            let test = mann_whitney::test(a, b)?;
            let (x, y) = (Stats::of(a)?, Stats::of(b)?);
            Some(Figure {
                words: now.words.clone(),
                ratio: y.median / x.median,
                p_value: test.p_value,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn figure(key: &str, rate: f64) -> ProfileFigure {
        ProfileFigure {
            key: key.into(),
            words: format!("write on {key}"),
            // Twelve files whose rates spread by a few percent, as a quiet disk's do.
            rates: (0..12).map(|i| rate * (1.0 + 0.004 * i as f64)).collect(),
        }
    }

    #[test]
    fn the_same_work_at_a_rate_moved_more_than_twofold_is_said_and_less_is_not() {
        let doc = RunDocument::for_test(Vec::new());
        // Seen on a virtual disk: O_DIRECT writes at 2.40 GB/s, the next run 389 MB/s.
        let verdict = moved(&doc, &doc, &[figure("/a", 2.40e9)], &[figure("/a", 389e6)])
            .expect("a sixfold move");
        assert_eq!(verdict.code, MOVED_CODE);
        assert!(
            verdict.message.contains("write on /a 0.16x;"),
            "{}",
            verdict.message
        );
        assert!(
            verdict.message.contains("a virtual disk's host"),
            "{}",
            verdict.message
        );
        assert!(moved(&doc, &doc, &[figure("/a", 2.40e9)], &[figure("/a", 1.3e9)]).is_none());
        // Another target's figure is not the same work.
        assert!(moved(&doc, &doc, &[figure("/b", 2.40e9)], &[figure("/a", 389e6)]).is_none());
    }

    fn code(then: &[ProfileFigure], now: &[ProfileFigure]) -> (String, String) {
        let doc = RunDocument::for_test(Vec::new());
        let verdicts = since(&doc, &doc, then, now);
        assert_eq!(verdicts.len(), 1);
        (verdicts[0].code.clone(), verdicts[0].message.clone())
    }

    #[test]
    fn a_figure_is_set_only_against_one_measured_the_same_way() {
        let (code, _) = code(&[figure("/a", 100.0)], &[figure("/b", 50.0)]);
        assert_eq!(code, CODES[0]);
    }

    #[test]
    fn a_move_beyond_the_noise_is_called_and_a_slower_one_warns() {
        let (same, _) = code(&[figure("/a", 100.0)], &[figure("/a", 100.5)]);
        assert_eq!(same, CODES[1]);
        let (moved, words) = code(&[figure("/a", 100.0)], &[figure("/a", 70.0)]);
        assert_eq!(moved, CODES[2]);
        assert!(words.contains("write on /a 0.70x"), "{words}");
        // Beyond the noise but under 10%: not worth a word.
        let (small, _) = code(&[figure("/a", 100.0)], &[figure("/a", 95.0)]);
        assert_eq!(small, CODES[1]);
    }
}
