//! How the corpus judges a program on a noisy machine: each try is one run watched by
//! `why` and recorded by the kernel at once, so a slow moment hits both, and a try
//! counts only where the machine was quiet by the test's own measure (steal, other
//! processes' CPU), never by ratelab's own verdict on its run. Two quiet tries that agree pass; two
//! that disagree fail; a machine never quiet passes unchecked, except under `CI`,
//! where nothing passes unchecked.

use std::path::PathBuf;

use serde_json::Value;

use super::{Program, Record, Run, compare, rows, watched};

/// Tries lost to a noisy machine before the test gives up on it.
pub const NOISY_TRIES: usize = 4;

/// A program of the corpus, with what makes each run start from the same state.
pub struct Case<'a> {
    pub test: &'a str,
    pub program: Program,
    /// A folder for perf.data and why's document: on a tmpfs, so the record does not
    /// write to the disk under test.
    pub work: PathBuf,
    /// Run before each run (watched by why and perf, or of a causal check): a clean
    /// build tree, a fresh clone.
    pub before: &'a dyn Fn(),
}

/// One quiet try.
pub struct Judged {
    pub doc: Value,
    pub record: Record,
    pub run: Run,
    /// What disagreed, in words; empty when the try passed.
    pub problems: Vec<String>,
}

/// `workloads[0].summary.limiting` of a why document.
pub fn limiting(doc: &Value) -> &Value {
    &doc["workloads"][0]["summary"]["limiting"]
}

/// ratelab's own `disturbed` verdict, in words: printed, never a cause to try again.
fn disturbed(doc: &Value) -> String {
    doc["verdicts"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|v| v["code"] == "disturbed")
        .map(|v| format!("disturbed by its own account: {}", v["message"]))
        .unwrap_or_else(|| "quiet by its own account".to_string())
}

/// A machine never quiet in [`NOISY_TRIES`] tries: the test passes unchecked, saying
/// so, except under `CI`, whose machine is quiet: there it fails.
fn never_quiet(test: &str, what: &str, noise: &[String]) {
    let line = format!(
        "{test}: {what} unchecked: the machine was not quiet in {} tries: {}",
        noise.len(),
        noise.join("; ")
    );
    if std::env::var_os("CI").is_some() {
        panic!("{line}, which CI's quiet machine does not allow");
    }
    super::super::say(&line);
}

impl Case<'_> {
    /// A folder of the work folder.
    pub fn scratch(&self, name: &str) -> PathBuf {
        let path = self.work.join(name);
        std::fs::create_dir_all(&path).expect("create a scratch folder");
        path
    }

    /// Runs `program` plain, after `before`, and checks it succeeded.
    fn plain(&self, program: &Program) -> Run {
        (self.before)();
        let run = super::timed(&mut program.plain(), &self.work.join("plain.stderr"));
        assert!(
            run.success,
            "{}: {:?} failed: {}",
            self.test, program.argv, run.stderr_tail
        );
        run
    }

    /// Runs each of `programs` plain, in turn, until all ran on a quiet machine (up
    /// to [`NOISY_TRIES`] times); their runs, or None where the machine never was
    /// quiet (which fails under CI).
    pub fn quiet_runs(&self, what: &str, programs: &[&Program]) -> Option<Vec<Run>> {
        let mut noise = Vec::new();
        while noise.len() < NOISY_TRIES {
            let runs: Vec<Run> = programs.iter().map(|p| self.plain(p)).collect();
            let worst = runs
                .iter()
                .fold(super::Quiet::default(), |q, r| q.worst(r.quiet));
            match worst.noisy() {
                None => return Some(runs),
                Some(why) => {
                    let walls: Vec<String> =
                        runs.iter().map(|r| format!("{:.2} s", r.wall_s)).collect();
                    super::super::say(&format!(
                        "{}: {what}: walls {} not counted, the machine was noisy: {why}",
                        self.test,
                        walls.join(", ")
                    ));
                    noise.push(why);
                }
            }
        }
        never_quiet(self.test, what, &noise);
        None
    }

    /// Tries `why` and the kernel's record on one run each try, until two quiet tries
    /// (see [`Quiet`](super::Quiet)) agree with each other's figures and with `expect`
    /// (the step named, in words of what is wrong), or two disagree (which fails the
    /// test). Prints a line per try.
    pub fn judged(&self, expect: impl Fn(&Value, &Record) -> Vec<String>) -> Vec<Judged> {
        let mut quiet: Vec<Judged> = Vec::new();
        let mut noise = Vec::new();
        loop {
            let passed = quiet.iter().filter(|j| j.problems.is_empty()).count();
            if passed >= 2 || quiet.len() - passed >= 2 || noise.len() >= NOISY_TRIES {
                break;
            }
            (self.before)();
            let (doc, record, run) = watched(&self.program, &self.work);
            let n = quiet.len() + noise.len() + 1;
            let mut problems = compare(&doc, &record);
            problems.extend(expect(&doc, &record));
            self.say_try(n, &doc, &record, &run, &problems);
            if let Some(why) = run.quiet.noisy() {
                super::super::say(&format!(
                    "{}: try {n} not counted, the machine was noisy: {why}",
                    self.test
                ));
                noise.push(why);
                continue;
            }
            quiet.push(Judged {
                doc,
                record,
                run,
                problems,
            });
        }
        let passed = quiet.iter().filter(|j| j.problems.is_empty()).count();
        if passed >= 2 {
            return quiet;
        }
        if quiet.len() - passed >= 2 {
            let failed: Vec<String> = quiet
                .iter()
                .enumerate()
                .filter(|(_, j)| !j.problems.is_empty())
                .map(|(i, j)| format!("quiet try {}: {}", i + 1, j.problems.join("; ")))
                .collect();
            panic!(
                "{}: {} of {} quiet tries disagree: {}",
                self.test,
                quiet.len() - passed,
                quiet.len(),
                failed.join(" | ")
            );
        }
        never_quiet(self.test, "why against the kernel's record", &noise);
        quiet
    }

    fn say_try(&self, n: usize, doc: &Value, record: &Record, run: &Run, problems: &[String]) {
        let limit = limiting(doc);
        let (top, figures) = record.top().unwrap_or_default();
        let (kind, off) = figures.main_off();
        let machine = run.quiet;
        let context = &doc["workloads"][0]["context"];
        // What freeing the step gains, by why: its waits alone, and with the CPU spent
        // alongside them (absent from documents before it was kept).
        let gain = |field: &str| match limit.get(field) {
            None => "absent".to_string(),
            Some(Value::Null) => "null".to_string(),
            Some(v) => format!("{:.2}x", v.as_f64().unwrap_or(f64::NAN)),
        };
        super::super::say(&format!(
            "{}: try {n}: why: {} in {}{} {:.1}% of {:.2} s, if free {} to {} ({}; its \
             sampler {:.3} s) | kernel: {top} on a CPU {:.2} s = {:.0}% of the {:.2} s \
             wall, most off-CPU in {kind} {:.2} s (perf {:.2} s, ratelab and the program \
             {:.2} s by rusage) | steal {:.1}%, others {:.1}% | {}",
            self.test,
            limit["step"],
            limit["where"],
            limit["bytes_per_sec"]
                .as_f64()
                .map(|r| format!(" at {:.2} MB/s", r / 1e6))
                .unwrap_or_default(),
            limit["share"].as_f64().unwrap_or(f64::NAN) * 100.0,
            context["wall_s"].as_f64().unwrap_or(f64::NAN),
            gain("speedup_if_free"),
            gain("speedup_if_free_with_cpu"),
            disturbed(doc),
            context["sampler_cpu_seconds"].as_f64().unwrap_or(f64::NAN),
            figures.cpu_s,
            figures.cpu_s / record.wall_s * 100.0,
            record.wall_s,
            off,
            run.own_cpu_s,
            run.program_cpu_s(),
            machine.steal * 100.0,
            machine.others * 100.0,
            if problems.is_empty() {
                "agrees".to_string()
            } else {
                format!("DISAGREES: {}", problems.join("; "))
            }
        ));
        for row in rows(doc, record) {
            super::super::say(&format!("{}:   {row}", self.test));
        }
    }
}

/// Problems with `doc`'s limiting step against `step` at `place` with at least
/// `share` of the time.
pub fn limit_is(doc: &Value, step: &str, place: &str, share: f64) -> Vec<String> {
    let limit = limiting(doc);
    let mut problems = Vec::new();
    if limit["step"] != step || limit["where"] != place {
        problems.push(format!(
            "why names {} in {} where {step} in {place} was expected: {limit}",
            limit["step"], limit["where"]
        ));
    }
    let got = limit["share"].as_f64().unwrap_or(0.0);
    if got < share {
        problems.push(format!(
            "why's limiting share {:.1}% is under {:.0}%",
            got * 100.0,
            share * 100.0
        ));
    }
    problems
}

/// For a `cpu` step: problems where the kernel's record does not agree that `name`
/// is the process with the most CPU.
pub fn kernel_top_is(record: &Record, name: &str) -> Vec<String> {
    match record.top() {
        Some((top, _)) if top == name => Vec::new(),
        other => vec![format!(
            "the kernel's record has {:?} on a CPU most, not {name}",
            other.map(|(n, f)| (n, f.cpu_s))
        )],
    }
}

/// A folder under /dev/shm for a case's work, removed when dropped.
pub fn work_folder() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("ratelab-corpus-")
        .tempdir_in("/dev/shm")
        .expect("create a folder on /dev/shm")
}
