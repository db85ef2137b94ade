//! What the kernel says of the machine's processes, CPUs, block devices and network
//! interfaces while a run runs: the facts ratelab's account of interference is made of
//! (/proc/PID/stat and io, /proc/stat, /proc/diskstats, /sys/class/net). Each reader
//! is a pure parser over the text beside a function that reads the file, so the parsers
//! are tested on made-up text.

use std::collections::HashMap;

/// The kernel's flag for its own threads (include/linux/sched.h, PF_KTHREAD).
const PF_KTHREAD: u64 = 0x0020_0000;

/// One process as a scan of /proc saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Process {
    /// Its id.
    pub pid: u32,
    /// Its parent's id.
    pub ppid: u32,
    /// Its command name (`comm`, at most 15 bytes).
    pub name: String,
    /// When it started, in clock ticks after boot: with the pid, its identity.
    pub start_ticks: u64,
    /// Clock ticks it has run, user and system, all its threads.
    pub cpu_ticks: u64,
    /// Clock ticks its reaped children ran.
    pub children_cpu_ticks: u64,
    /// Whether it is one of the kernel's own threads (kworker, ksoftirqd).
    pub kernel: bool,
    /// The CPU its main thread last ran on; `None` where the line stops short of it.
    pub last_cpu: Option<u32>,
    /// Bytes it made the storage layer read and write; `None` where this user may not
    /// read them (another user's process, without root).
    pub io: Option<Io>,
}

/// Bytes a process made the storage layer move (/proc/PID/io).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Io {
    /// Bytes read from storage (`read_bytes`).
    pub read_bytes: u64,
    /// Bytes sent to storage (`write_bytes`).
    pub written_bytes: u64,
}

/// Every process /proc lists now, with its storage bytes where `io` says they are
/// worth a read (a process that has not run since the last look has moved none); one
/// that ends while it is read is left out.
pub fn processes(io: &dyn Fn(&Process) -> bool) -> Vec<Process> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut buffer = Vec::with_capacity(512);
    entries
        .filter_map(|entry| {
            let pid: u32 = entry.ok()?.file_name().to_str()?.parse().ok()?;
            read_into(&format!("/proc/{pid}/stat"), &mut buffer)?;
            let mut process = parse_stat(pid, std::str::from_utf8(&buffer).ok()?)?;
            if !process.kernel && io(&process) {
                process.io = read_into(&format!("/proc/{pid}/io"), &mut buffer)
                    .and_then(|()| parse_io(std::str::from_utf8(&buffer).ok()?));
            }
            Some(process)
        })
        .collect()
}

/// Reads the file at `path` whole into `buffer`, which keeps its allocation.
fn read_into(path: &str, buffer: &mut Vec<u8>) -> Option<()> {
    use std::io::Read;
    buffer.clear();
    std::fs::File::open(path).ok()?.read_to_end(buffer).ok()?;
    Some(())
}

/// A process from the text of its /proc/PID/stat (proc(5)): the name sits between the
/// first `(` and the last `)`, since it may hold both; the fields after it count from 3.
pub fn parse_stat(pid: u32, text: &str) -> Option<Process> {
    let open = text.find('(')?;
    let close = text.rfind(')')?;
    let name = text.get(open + 1..close)?.to_string();
    let fields: Vec<&str> = text.get(close + 1..)?.split_whitespace().collect();
    // fields[0] is field 3 (state): field N is fields[N - 3].
    let field = |n: usize| fields.get(n - 3)?.parse::<u64>().ok();
    Some(Process {
        pid,
        ppid: u32::try_from(field(4)?).ok()?,
        name,
        kernel: field(9)? & PF_KTHREAD != 0,
        cpu_ticks: field(14)? + field(15)?,
        children_cpu_ticks: field(16)? + field(17)?,
        start_ticks: field(22)?,
        last_cpu: field(39).and_then(|c| u32::try_from(c).ok()),
        io: None,
    })
}

/// The storage bytes of a /proc/PID/io text.
pub fn parse_io(text: &str) -> Option<Io> {
    let value = |key: &str| {
        text.lines()
            .find_map(|line| line.strip_prefix(key)?.trim().parse::<u64>().ok())
    };
    Some(Io {
        read_bytes: value("read_bytes:")?,
        written_bytes: value("write_bytes:")?,
    })
}

/// Clock ticks the machine's CPUs spent, from /proc/stat, all CPUs together and each.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CpuTicks {
    /// Ticks in processes, user and system (the kernel's threads too): what processes ran.
    pub process: u64,
    /// Ticks in interrupts and softirqs, whoever caused them.
    pub interrupts: u64,
    /// Ticks a vCPU wanted to run and the hypervisor ran something else.
    pub steal: u64,
    /// Per CPU, by its number: ticks busy (anything but idle and iowait) and in all.
    pub per_cpu: HashMap<u32, (u64, u64)>,
    /// Per CPU, by its number: ticks in processes, in interrupts and softirqs, and stolen.
    pub per_cpu_split: HashMap<u32, CoreTicks>,
}

/// One CPU's ticks by what took them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CoreTicks {
    /// In processes, user and system.
    pub process: u64,
    /// In interrupts and softirqs.
    pub interrupts: u64,
    /// Wanted by the vCPU while the hypervisor ran something else.
    pub steal: u64,
}

/// The CPU ticks of a /proc/stat text (`cpuN user nice system idle iowait irq softirq
/// steal guest guest_nice`; guest time is already inside user and nice).
pub fn parse_cpu_ticks(text: &str) -> CpuTicks {
    let mut ticks = CpuTicks::default();
    for line in text.lines() {
        let mut fields = line.split_ascii_whitespace();
        let Some(name) = fields.next().and_then(|f| f.strip_prefix("cpu")) else {
            continue;
        };
        let values: Vec<u64> = fields.map_while(|f| f.parse().ok()).collect();
        if values.len() < 4 {
            continue;
        }
        let at = |i: usize| values.get(i).copied().unwrap_or(0);
        let busy = at(0) + at(1) + at(2) + at(5) + at(6) + at(7);
        let all = busy + at(3) + at(4);
        match name.parse::<u32>() {
            Ok(cpu) => {
                ticks.per_cpu.insert(cpu, (busy, all));
                ticks.per_cpu_split.insert(
                    cpu,
                    CoreTicks {
                        process: at(0) + at(1) + at(2),
                        interrupts: at(5) + at(6),
                        steal: at(7),
                    },
                );
            }
            Err(_) if name.is_empty() => {
                ticks.process = at(0) + at(1) + at(2);
                ticks.interrupts = at(5) + at(6);
                ticks.steal = at(7);
            }
            Err(_) => {}
        }
    }
    ticks
}

/// The machine's CPU ticks now.
pub fn cpu_ticks() -> CpuTicks {
    std::fs::read_to_string("/proc/stat")
        .map(|t| parse_cpu_ticks(&t))
        .unwrap_or_default()
}

/// Clock ticks per second, for the tick counts above (USER_HZ).
pub fn ticks_per_second() -> f64 {
    rustix::param::clock_ticks_per_second() as f64
}

/// Bytes a network interface has received and sent since it came up; `None` when
/// there is no such interface here.
pub fn interface_bytes(name: &str) -> Option<(u64, u64)> {
    let read = |counter: &str| {
        std::fs::read_to_string(format!("/sys/class/net/{name}/statistics/{counter}"))
            .ok()?
            .trim()
            .parse::<u64>()
            .ok()
    };
    Some((read("rx_bytes")?, read("tx_bytes")?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stat_line_with_spaces_and_parentheses_in_its_name_reads() {
        let text = "4312 (my (odd) name) S 1 4312 4312 0 -1 4194560 100 0 0 0 \
                    250 50 7 3 20 0 3 0 123456 1000000 200 18446744073709551615";
        let process = parse_stat(4312, text).unwrap();
        assert_eq!(process.name, "my (odd) name");
        assert_eq!(process.ppid, 1);
        assert_eq!(process.cpu_ticks, 300);
        assert_eq!(process.children_cpu_ticks, 10);
        assert_eq!(process.start_ticks, 123456);
        assert!(!process.kernel);
        let kworker = "57 (kworker/0:1-events) I 2 0 0 0 -1 69238880 0 0 0 0 \
                       3 40 0 0 20 0 1 0 500 0 0";
        assert!(parse_stat(57, kworker).unwrap().kernel);
        assert_eq!(parse_stat(1, "1 (init) S"), None);
    }

    #[test]
    fn io_counts_storage_bytes_only() {
        let text = "rchar: 900\nwchar: 800\nsyscr: 3\nsyscw: 2\nread_bytes: 4096\n\
                    write_bytes: 8192\ncancelled_write_bytes: 0\n";
        assert_eq!(
            parse_io(text),
            Some(Io {
                read_bytes: 4096,
                written_bytes: 8192
            })
        );
        assert_eq!(parse_io("rchar: 1\n"), None);
    }

    #[test]
    fn cpu_ticks_split_process_time_from_interrupts_and_steal() {
        let text = "cpu  100 5 30 900 10 2 8 4 0 0\n\
                    cpu0 60 5 10 400 5 1 4 2 0 0\n\
                    cpu1 40 0 20 500 5 1 4 2 0 0\n\
                    intr 1 2\n";
        let ticks = parse_cpu_ticks(text);
        assert_eq!((ticks.process, ticks.interrupts, ticks.steal), (135, 10, 4));
        assert_eq!(ticks.per_cpu[&0], (60 + 5 + 10 + 1 + 4 + 2, 82 + 405));
        assert_eq!(ticks.per_cpu.len(), 2);
    }

    #[test]
    fn this_process_is_found_with_its_io() {
        let me = std::process::id();
        let seen = processes(&|_| true);
        let this = seen.iter().find(|p| p.pid == me).expect("this process");
        assert!(this.io.is_some());
        assert!(!this.kernel);
        assert!(cpu_ticks().process > 0);
        assert!(interface_bytes("lo").is_some());
        assert!(ticks_per_second() >= 100.0);
    }
}
