//! What the kernel says of one thread now (/proc/PID/task/TID): its state, its time on
//! a CPU and runnable but waiting for one (schedstat, in ns), the kernel function it
//! waits in (wchan), its system call with its arguments, its major faults. The files
//! are kept open and read again with pread: 1-3 µs a file, against 7-9 µs to open and
//! read (measured on this project's VMs). Each reader is a pure parser beside the read,
//! so the parsers are tested on made-up text.

use std::fs::File;
use std::os::unix::fs::FileExt;

/// A thread's time from `schedstat`: on a CPU, and runnable but waiting for one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SchedTimes {
    /// Nanoseconds it has run on a CPU.
    pub on_cpu_ns: u64,
    /// Nanoseconds it was runnable and waited for a CPU (run delay).
    pub waiting_ns: u64,
}

/// What a thread's `stat` says of it now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThreadStat {
    /// Its state letter: R running, S sleeping, D in an uninterruptible wait, T, Z, I.
    pub state: u8,
    /// Its name (`comm`, at most 15 bytes).
    pub name: String,
    /// Major page faults so far.
    pub major_faults: u64,
    /// The CPU it last ran on.
    pub cpu: u32,
    /// Whether it has begun to exit (`PF_EXITING`), which comes before it gives up its
    /// memory and long before it is a zombie.
    pub exiting: bool,
    /// Clock ticks on a CPU, user and system (fields 14 and 15): read from a process's
    /// own `stat`, those of all its threads, the ended ones too.
    pub cpu_ticks: u64,
}

/// Clock ticks a second, as `stat` counts them (`_SC_CLK_TCK`).
pub fn ticks_per_sec() -> f64 {
    // SAFETY: sysconf reads a constant of the system.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if hz > 0 { hz as f64 } else { 100.0 }
}

/// `PF_EXITING` among a task's flags (include/linux/sched.h).
const PF_EXITING: u64 = 0x4;

/// What a thread's `syscall` file says it is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Syscall {
    /// On a CPU now.
    Running,
    /// Blocked outside a system call: in a page fault.
    Fault,
    /// In system call `number` with these arguments.
    Call {
        /// The x86_64 system call number.
        number: u64,
        /// Its six arguments.
        args: [u64; 6],
    },
}

/// One thread's files, open.
#[derive(Debug)]
pub struct ThreadFiles {
    stat: File,
    schedstat: File,
    /// None where this user may not read it (another user's thread).
    wchan: Option<File>,
    /// None where this user may not read it (needs ptrace access).
    syscall: Option<File>,
    /// Whether this user was refused its wait files while it lived: another user's
    /// thread, or a setuid or otherwise non-dumpable one.
    refused: bool,
}

impl ThreadFiles {
    /// Opens thread `tid` of process `pid`; fails when the thread is gone.
    pub fn open(pid: u32, tid: u32) -> std::io::Result<ThreadFiles> {
        let dir = format!("/proc/{pid}/task/{tid}");
        let mut scratch = Vec::with_capacity(64);
        let mut refused = false;
        let mut readable = |name: &str, scratch: &mut Vec<u8>| {
            let file = File::open(format!("{dir}/{name}"));
            // Opening may succeed where reading is refused (ptrace access is checked
            // at read): try once.
            let read = file.and_then(|file| pread_into(&file, scratch).map(|()| file));
            refused |= read.as_ref().is_err_and(is_refusal);
            read.ok()
        };
        let wchan = readable("wchan", &mut scratch);
        let syscall = readable("syscall", &mut scratch);
        let mut files = ThreadFiles {
            stat: File::open(format!("{dir}/stat"))?,
            schedstat: File::open(format!("{dir}/schedstat"))?,
            wchan,
            syscall,
            refused,
        };
        // A thread that is exiting gives up its memory before it becomes a zombie, and
        // one without memory has its files given to root (proc(5), /proc/PID
        // ownership): a refusal then hides nothing of this user's.
        files.refused &= files
            .stat(&mut scratch)
            .is_some_and(|stat| !stat.exiting && !matches!(stat.state, b'Z' | b'X'));
        Ok(files)
    }

    /// Whether its waits can be named: this user was not refused wchan or syscall
    /// while it lived (a thread that ended first hides nothing).
    pub fn waits_readable(&self) -> bool {
        !self.refused
    }

    /// Its CPU times now; `None` when the thread is gone.
    pub fn times(&self, buffer: &mut Vec<u8>) -> Option<SchedTimes> {
        pread_into(&self.schedstat, buffer).ok()?;
        parse_schedstat(std::str::from_utf8(buffer).ok()?)
    }

    /// Its state now; `None` when the thread is gone.
    pub fn stat(&self, buffer: &mut Vec<u8>) -> Option<ThreadStat> {
        pread_into(&self.stat, buffer).ok()?;
        parse_thread_stat(std::str::from_utf8(buffer).ok()?)
    }

    /// The kernel function it waits in, its suffixes stripped; `None` when it runs, is
    /// gone or may not be read.
    pub fn wchan(&self, buffer: &mut Vec<u8>) -> Option<String> {
        pread_into(self.wchan.as_ref()?, buffer).ok()?;
        parse_wchan(std::str::from_utf8(buffer).ok()?)
    }

    /// Its system call now; `None` when it is gone or may not be read.
    pub fn syscall(&self, buffer: &mut Vec<u8>) -> Option<Syscall> {
        pread_into(self.syscall.as_ref()?, buffer).ok()?;
        parse_syscall(std::str::from_utf8(buffer).ok()?)
    }
}

/// The calling thread's `schedstat`, open, to be read again and again by that thread.
#[derive(Debug)]
pub struct OwnTimes {
    file: File,
    buffer: Vec<u8>,
}

impl OwnTimes {
    /// Opens the calling thread's file; `None` where the kernel keeps no schedstat.
    pub fn open() -> Option<OwnTimes> {
        Some(OwnTimes {
            file: File::open("/proc/thread-self/schedstat").ok()?,
            buffer: Vec::with_capacity(64),
        })
    }

    /// The thread's times now.
    pub fn times(&mut self) -> Option<SchedTimes> {
        pread_into(&self.file, &mut self.buffer).ok()?;
        parse_schedstat(std::str::from_utf8(&self.buffer).ok()?)
    }
}

/// Whether reading a /proc file failed for want of permission, not because its
/// thread is gone.
fn is_refusal(error: &std::io::Error) -> bool {
    matches!(error.raw_os_error(), Some(libc::EACCES | libc::EPERM))
}

/// Reads a /proc file whole from its start into `buffer`, which keeps its allocation.
pub fn pread_into(file: &File, buffer: &mut Vec<u8>) -> std::io::Result<()> {
    buffer.clear();
    if buffer.capacity() < 512 {
        buffer.reserve(512);
    }
    loop {
        let filled = buffer.len();
        let spare = buffer.capacity() - filled;
        buffer.resize(filled + spare, 0);
        let read = file.read_at(&mut buffer[filled..], filled as u64);
        match read {
            Ok(0) => {
                buffer.truncate(filled);
                return Ok(());
            }
            Ok(n) => {
                buffer.truncate(filled + n);
                if buffer.len() < buffer.capacity() {
                    return Ok(());
                }
                buffer.reserve(buffer.capacity());
            }
            Err(e) => {
                buffer.truncate(filled);
                return Err(e);
            }
        }
    }
}

/// The thread ids of process `pid` now; empty when it is gone.
pub fn thread_ids(pid: u32) -> Vec<u32> {
    numbered_entries(&format!("/proc/{pid}/task"))
}

/// Every process id /proc lists now.
pub fn process_ids() -> Vec<u32> {
    numbered_entries("/proc")
}

/// The entries of a folder whose names are numbers.
fn numbered_entries(dir: &str) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect()
}

/// The last process or thread id the kernel gave out, from a /proc/loadavg text
/// (`0.10 0.05 0.01 1/123 4567`): while it stays the same, no process or thread was
/// made anywhere, and a listing of /proc would find nothing new.
pub fn parse_last_pid(text: &str) -> Option<u32> {
    text.split_ascii_whitespace().nth(4)?.parse().ok()
}

/// The two times of a `schedstat` text: `on_cpu_ns waiting_ns timeslices`.
pub fn parse_schedstat(text: &str) -> Option<SchedTimes> {
    let mut fields = text.split_ascii_whitespace();
    Some(SchedTimes {
        on_cpu_ns: fields.next()?.parse().ok()?,
        waiting_ns: fields.next()?.parse().ok()?,
    })
}

/// A thread's `stat` text (proc(5)): the name between the first `(` and the last `)`,
/// the state after it, major faults in field 12 and the last CPU in field 39.
pub fn parse_thread_stat(text: &str) -> Option<ThreadStat> {
    let open = text.find('(')?;
    let close = text.rfind(')')?;
    let name = text.get(open + 1..close)?.to_string();
    let mut fields = text.get(close + 1..)?.split_ascii_whitespace();
    let state = *fields.next()?.as_bytes().first()?;
    // fields now starts at field 4: field N is the (N - 4)th of what is left.
    let rest: Vec<&str> = fields.take(36).collect();
    let field = |n: usize| rest.get(n - 4)?.parse::<u64>().ok();
    Some(ThreadStat {
        state,
        name,
        major_faults: field(12)?,
        cpu: u32::try_from(field(39)?).ok()?,
        exiting: field(9)? & PF_EXITING != 0,
        cpu_ticks: field(14)? + field(15)?,
    })
}

/// A `wchan` text as a function name, with the compiler's suffixes (`.isra.0`,
/// `.constprop.0`, `.cold`) stripped; `None` for "0" (running, or not readable).
pub fn parse_wchan(text: &str) -> Option<String> {
    let name = text.trim();
    if name.is_empty() || name == "0" {
        return None;
    }
    Some(name.split('.').next().unwrap_or(name).to_string())
}

/// A `syscall` text: `running`, `-1 SP PC` in a fault, or `NR A0 … A5 SP PC`, the
/// numbers in hex after the first.
pub fn parse_syscall(text: &str) -> Option<Syscall> {
    let text = text.trim();
    if text == "running" {
        return Some(Syscall::Running);
    }
    let mut fields = text.split_ascii_whitespace();
    let number = fields.next()?;
    if number.starts_with('-') {
        return Some(Syscall::Fault);
    }
    let number: u64 = number.parse().ok()?;
    let mut args = [0u64; 6];
    for arg in &mut args {
        let field = fields.next()?;
        *arg = u64::from_str_radix(field.trim_start_matches("0x"), 16).ok()?;
    }
    Some(Syscall::Call { number, args })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedstat_gives_on_cpu_and_waiting() {
        assert_eq!(
            parse_schedstat("670000000 830000000 412\n"),
            Some(SchedTimes {
                on_cpu_ns: 670_000_000,
                waiting_ns: 830_000_000
            })
        );
        assert_eq!(parse_schedstat("12"), None);
    }

    #[test]
    fn a_thread_stat_gives_state_name_faults_and_cpu() {
        let text = "4313 (zstd (w) 1) D 4312 4312 4312 34816 4312 4194368 120 0 7 0 \
                    250 50 0 0 20 0 3 0 123456 1000000 200 18446744073709551615 1 1 0 0 0 0 \
                    0 0 0 0 0 0 17 1 0 0 0 0 0";
        let stat = parse_thread_stat(text).unwrap();
        assert_eq!(stat.state, b'D');
        assert_eq!(stat.name, "zstd (w) 1");
        assert_eq!(stat.major_faults, 7);
        assert_eq!(stat.cpu, 1);
        assert!(!stat.exiting);
        assert_eq!(stat.cpu_ticks, 300);
        let exiting = text.replacen(" 4194368 ", " 4194372 ", 1);
        assert!(parse_thread_stat(&exiting).unwrap().exiting);
        assert_eq!(parse_thread_stat("1 (init) S 0"), None);
    }

    #[test]
    fn loadavg_gives_the_last_pid() {
        assert_eq!(parse_last_pid("0.10 0.05 0.01 1/123 4567\n"), Some(4567));
        assert_eq!(parse_last_pid("0.10 0.05"), None);
    }

    #[test]
    fn wchan_names_lose_their_suffixes() {
        assert_eq!(
            parse_wchan("folio_wait_bit_common.isra.0"),
            Some("folio_wait_bit_common".into())
        );
        assert_eq!(parse_wchan("do_wait"), Some("do_wait".into()));
        assert_eq!(parse_wchan("0"), None);
    }

    #[test]
    fn syscall_texts_read_as_running_fault_or_call() {
        assert_eq!(parse_syscall("running\n"), Some(Syscall::Running));
        assert_eq!(parse_syscall("-1 0x7ffd1 0x401000\n"), Some(Syscall::Fault));
        let call = parse_syscall("74 0x1 0x0 0x0 0x0 0x0 0x0 0x7ffd 0x7f12\n").unwrap();
        assert_eq!(
            call,
            Syscall::Call {
                number: 74,
                args: [1, 0, 0, 0, 0, 0]
            }
        );
        assert_eq!(parse_syscall("0 0x3"), None);
    }

    #[test]
    fn this_threads_files_read() {
        let pid = std::process::id();
        let tid = rustix::thread::gettid().as_raw_nonzero().get() as u32;
        let files = ThreadFiles::open(pid, tid).unwrap();
        let mut buffer = Vec::new();
        // The time on a CPU is brought up to date at a tick or a switch: a new thread
        // reads 0 until then, so it works and yields first.
        let until = std::time::Instant::now() + std::time::Duration::from_millis(20);
        while std::time::Instant::now() < until {}
        std::thread::yield_now();
        assert!(files.times(&mut buffer).unwrap().on_cpu_ns > 0);
        assert_eq!(files.stat(&mut buffer).unwrap().state, b'R');
        // A thread that reads its own syscall file is in that read: pread64.
        assert!(matches!(
            files.syscall(&mut buffer),
            Some(Syscall::Call { number: 17, .. })
        ));
        assert!(thread_ids(pid).contains(&tid));
        assert!(process_ids().contains(&pid));
    }
}
