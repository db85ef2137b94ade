//! A run's summary in words: each part's headline figures against their limits, and
//! what a part could not measure on this machine and why, so every report can open
//! with the answer and fold the "not measured" notes into one line.

/// One line of a run's summary: a part of the run and its figures in words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SummaryLine {
    /// The part it is about, one word: `storage`, `network`, `cores`, `task`, `limit`.
    pub part: String,
    /// Its headline figures, against their limits where one is known.
    pub text: String,
    /// Codes of the workload's info verdicts whose point this line already makes: a
    /// brief listing leaves them out (they stay in the run and every full report).
    pub covers: Vec<&'static str>,
}

impl SummaryLine {
    /// A line about `part` that makes the point of no verdict.
    pub fn new(part: &str, text: String) -> SummaryLine {
        SummaryLine {
            part: part.into(),
            text,
            covers: Vec::new(),
        }
    }

    /// The same line, making the point of the verdicts `codes` too.
    pub fn covering(mut self, codes: &[&'static str]) -> SummaryLine {
        self.covers.extend_from_slice(codes);
        self
    }
}

/// A figure a workload could not measure on this machine, and why in a few words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unmeasured {
    /// The codes of the info verdicts that say it at length.
    pub codes: Vec<String>,
    /// What is missing: `frequency`, `the amx test`, `the link limit of /mnt/a`.
    pub what: String,
    /// Why, in a few words: `no cpufreq`.
    pub why: String,
}

impl Unmeasured {
    /// What `code` says is missing, and why: `reason` without its parenthesised detail.
    pub fn new(code: impl Into<String>, what: impl Into<String>, reason: &str) -> Unmeasured {
        Unmeasured {
            codes: vec![code.into()],
            what: what.into(),
            why: without_details(reason),
        }
    }
}

/// `reason` without its parenthesised details and final period, which the verdict
/// keeps: `no cpufreq (cannot read …); no msr (…)` becomes `no cpufreq; no msr`.
pub fn without_details(reason: &str) -> String {
    let mut out = String::with_capacity(reason.len());
    let mut depth = 0usize;
    for c in reason.chars() {
        match c {
            '(' => depth += 1,
            ')' if depth > 0 => depth -= 1,
            _ if depth == 0 => out.push(c),
            _ => {}
        }
    }
    let words: Vec<&str> = out.split_whitespace().collect();
    words
        .join(" ")
        .replace(" ;", ";")
        .replace(" ,", ",")
        .replace(" :", ":")
        .trim_end_matches(['.', ';', ':', ','])
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn details_in_parentheses_are_left_out() {
        assert_eq!(
            without_details(
                "no cpufreq (cannot read /sys/x: missing); no /dev/cpu/0/msr for APERF/MPERF (the msr module is not loaded: modprobe msr)"
            ),
            "no cpufreq; no /dev/cpu/0/msr for APERF/MPERF"
        );
        assert_eq!(
            without_details("the CPU has no AMX matrix unit (cpuid flags amx_tile, amx_bf16)"),
            "the CPU has no AMX matrix unit"
        );
        assert_eq!(without_details("plain words."), "plain words");
    }
}
