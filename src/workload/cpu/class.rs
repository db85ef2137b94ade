//! Scheduling classes a test's threads run in (`--class normal,batch,idle,nice:N`), set
//! on each thread itself, and read back so the report says what the kernel applied.

use std::fmt;

use serde::{Deserialize, Serialize};

/// How a test thread is scheduled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(into = "String", try_from = "String")]
pub enum SchedClass {
    /// SCHED_OTHER at the nice value the process has.
    Normal,
    /// SCHED_BATCH: CPU-bound, never preferred for wakeups.
    Batch,
    /// SCHED_IDLE: runs only when nothing else wants the core.
    Idle,
    /// SCHED_OTHER at nice N (-20..19; below 0 needs root).
    Nice(i32),
}

impl fmt::Display for SchedClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SchedClass::Normal => f.write_str("normal"),
            SchedClass::Batch => f.write_str("batch"),
            SchedClass::Idle => f.write_str("idle"),
            SchedClass::Nice(n) => write!(f, "nice:{n}"),
        }
    }
}

impl From<SchedClass> for String {
    fn from(class: SchedClass) -> String {
        class.to_string()
    }
}

impl TryFrom<String> for SchedClass {
    type Error = String;

    fn try_from(text: String) -> Result<SchedClass, String> {
        SchedClass::parse(&text)
    }
}

impl SchedClass {
    /// Parses `normal`, `batch`, `idle` or `nice:N`.
    pub fn parse(text: &str) -> Result<SchedClass, String> {
        match text.trim() {
            "normal" | "other" => Ok(SchedClass::Normal),
            "batch" => Ok(SchedClass::Batch),
            "idle" => Ok(SchedClass::Idle),
            other => {
                let Some(level) = other.strip_prefix("nice:") else {
                    return Err(format!(
                        "invalid class \"{text}\" (use normal, batch, idle or nice:N)"
                    ));
                };
                match level.parse::<i32>() {
                    Ok(n) if (-20..=19).contains(&n) => Ok(SchedClass::Nice(n)),
                    _ => Err(format!("invalid class \"{text}\": nice takes -20 to 19")),
                }
            }
        }
    }

    /// Puts the calling thread in this class.
    pub fn apply(self) -> std::io::Result<()> {
        let policy = match self {
            SchedClass::Normal | SchedClass::Nice(_) => libc::SCHED_OTHER,
            SchedClass::Batch => libc::SCHED_BATCH,
            SchedClass::Idle => libc::SCHED_IDLE,
        };
        let param = libc::sched_param { sched_priority: 0 };
        // SAFETY: pid 0 is the calling thread; `param` is a valid sched_param.
        if unsafe { libc::sched_setscheduler(0, policy, &param) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        if let SchedClass::Nice(n) = self {
            // SAFETY: on Linux, PRIO_PROCESS with a thread id sets that thread's nice value.
            let tid = unsafe { libc::gettid() };
            if unsafe { libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, n) } != 0 {
                return Err(std::io::Error::last_os_error());
            }
        }
        Ok(())
    }

    /// Whether this process may put a thread in this class, asked of the kernel on a
    /// thread made for the question; says why not, and what would allow it.
    pub fn permitted(self) -> Result<(), String> {
        let tried = std::thread::spawn(move || self.apply())
            .join()
            .unwrap_or_else(|_| Err(std::io::Error::other("the probe thread panicked")));
        match tried {
            Ok(()) => Ok(()),
            Err(e) if matches!(e.raw_os_error(), Some(libc::EPERM | libc::EACCES)) => Err(format!(
                "--class {self} needs root or CAP_SYS_NICE: an ordinary user may only lower \
                 a thread's priority (nice 0 to 19, or below 0 down to what RLIMIT_NICE \
                 allows)"
            )),
            Err(e) => Err(format!("--class {self} cannot be set here: {e}")),
        }
    }

    /// The class the calling thread is in, as the kernel reports it.
    pub fn current() -> String {
        // SAFETY: both calls only read the calling thread's scheduling state.
        let policy = unsafe { libc::sched_getscheduler(0) };
        let tid = unsafe { libc::gettid() };
        let nice = unsafe { libc::getpriority(libc::PRIO_PROCESS, tid as libc::id_t) };
        match policy {
            libc::SCHED_OTHER if nice == 0 => "normal".into(),
            libc::SCHED_OTHER => format!("nice:{nice}"),
            libc::SCHED_BATCH => "batch".into(),
            libc::SCHED_IDLE => "idle".into(),
            libc::SCHED_FIFO => "fifo".into(),
            libc::SCHED_RR => "rr".into(),
            other => format!("policy {other}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_parse_and_print_back() {
        for text in ["normal", "batch", "idle", "nice:5", "nice:-3"] {
            assert_eq!(SchedClass::parse(text).unwrap().to_string(), text);
        }
        assert!(
            SchedClass::parse("nice:40")
                .unwrap_err()
                .contains("-20 to 19")
        );
        assert!(SchedClass::parse("fast").unwrap_err().contains("\"fast\""));
    }

    #[test]
    fn classes_anyone_may_take_are_permitted() {
        for class in [
            SchedClass::Normal,
            SchedClass::Batch,
            SchedClass::Idle,
            SchedClass::Nice(5),
        ] {
            assert_eq!(class.permitted(), Ok(()), "{class}");
        }
    }

    #[test]
    fn a_thread_in_the_idle_class_reads_back_idle() {
        let seen = std::thread::spawn(|| {
            SchedClass::Idle.apply().unwrap();
            SchedClass::current()
        })
        .join()
        .unwrap();
        assert_eq!(seen, "idle");
    }
}
