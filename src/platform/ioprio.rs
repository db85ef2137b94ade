//! I/O priority of the calling thread (ioprio_set(2)), so a background workload can be
//! measured at idle priority against a foreground one, as backup tools run themselves.

use serde::{Deserialize, Serialize};

/// An I/O priority: a class, and a level within it (0 highest, 7 lowest).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "class", content = "level")]
pub enum IoPriority {
    /// Real time: served first (needs CAP_SYS_ADMIN).
    Rt(u8),
    /// Best effort, the default class.
    Be(u8),
    /// Idle: served only when no one else wants the disk.
    Idle,
}

/// IOPRIO_WHO_PROCESS: with id 0, the calling thread.
const WHO_PROCESS: libc::c_int = 1;
const CLASS_SHIFT: u32 = 13;

impl IoPriority {
    /// Parses `idle`, `be:N` or `rt:N` (N from 0 to 7).
    pub fn parse(text: &str) -> Result<IoPriority, String> {
        let bad =
            || format!("invalid I/O priority \"{text}\" (use idle, be:0 to be:7, or rt:0 to rt:7)");
        let level = |n: &str| n.parse::<u8>().ok().filter(|&n| n <= 7).ok_or_else(bad);
        match text.split_once(':') {
            None if text == "idle" => Ok(IoPriority::Idle),
            Some(("be", n)) => Ok(IoPriority::Be(level(n)?)),
            Some(("rt", n)) => Ok(IoPriority::Rt(level(n)?)),
            _ => Err(bad()),
        }
    }

    /// The value ioprio_set(2) takes.
    fn value(self) -> libc::c_int {
        let (class, level) = match self {
            IoPriority::Rt(level) => (1, level),
            IoPriority::Be(level) => (2, level),
            IoPriority::Idle => (3, 0),
        };
        (class << CLASS_SHIFT) | libc::c_int::from(level)
    }

    /// Sets this priority on the calling thread.
    pub fn apply(self) -> std::io::Result<()> {
        // SAFETY: a plain syscall on integers.
        let rc = unsafe { libc::syscall(libc::SYS_ioprio_set, WHO_PROCESS, 0, self.value()) };
        if rc == 0 {
            Ok(())
        } else {
            Err(std::io::Error::last_os_error())
        }
    }

    /// The calling thread's priority.
    pub fn current() -> std::io::Result<IoPriority> {
        // SAFETY: a plain syscall on integers.
        let rc = unsafe { libc::syscall(libc::SYS_ioprio_get, WHO_PROCESS, 0) };
        if rc < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let level = (rc & 0xff) as u8;
        Ok(match rc >> CLASS_SHIFT {
            1 => IoPriority::Rt(level),
            3 => IoPriority::Idle,
            // 0 is "none": best effort at a level taken from the CPU nice value.
            _ => IoPriority::Be(level),
        })
    }
}

impl std::fmt::Display for IoPriority {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            IoPriority::Rt(level) => write!(f, "rt:{level}"),
            IoPriority::Be(level) => write!(f, "be:{level}"),
            IoPriority::Idle => write!(f, "idle"),
        }
    }
}

impl IoPriority {
    /// Whether this process may use the priority: tried on a short-lived thread, so
    /// the answer comes before any workload starts.
    pub fn check(self) -> std::io::Result<()> {
        std::thread::spawn(move || self.apply())
            .join()
            .unwrap_or_else(|_| Err(std::io::Error::other("the check thread failed")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_refuses() {
        assert_eq!(IoPriority::parse("idle"), Ok(IoPriority::Idle));
        assert_eq!(IoPriority::parse("be:4"), Ok(IoPriority::Be(4)));
        assert_eq!(IoPriority::parse("rt:0"), Ok(IoPriority::Rt(0)));
        assert!(IoPriority::parse("be:9").unwrap_err().contains("\"be:9\""));
        assert!(IoPriority::parse("low").is_err());
    }

    #[test]
    fn a_thread_gets_the_priority_it_asks_for() {
        let seen = std::thread::spawn(|| {
            IoPriority::Idle.apply().unwrap();
            IoPriority::current().unwrap()
        })
        .join()
        .unwrap();
        assert_eq!(seen, IoPriority::Idle);
        let seen = std::thread::spawn(|| {
            IoPriority::Be(6).apply().unwrap();
            IoPriority::current().unwrap()
        })
        .join()
        .unwrap();
        assert_eq!(seen, IoPriority::Be(6));
    }
}
