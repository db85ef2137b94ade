//! Thread placement: for each thread of a process, the CPU it last ran on, its
//! scheduling policy and nice value, from /proc/PID/task/*/stat (proc(5)). Sampled at
//! each tick, this shows where the scheduler put the threads and how often it moved them.

use std::path::PathBuf;

/// One thread's state as its stat line gives it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskStat {
    /// The thread id (field 1).
    pub tid: u32,
    /// The thread's name (field 2, `comm`), without its parentheses.
    pub name: String,
    /// Its state letter (field 3): `R` running, `S` sleeping, `Z` zombie ...
    pub state: char,
    /// Its nice value (field 19).
    pub nice: i32,
    /// The CPU it last ran on (field 39, `processor`).
    pub cpu: u32,
    /// Its scheduling policy (field 41), as SCHED_* numbers it.
    pub policy: u32,
}

/// Parses one /proc/PID/task/TID/stat line. The name may hold spaces and parentheses
/// (a thread can name itself `a) (b`), so it ends at the last `)` of the line.
pub fn parse_task_stat(line: &str) -> Option<TaskStat> {
    let (head, rest) = line.trim_end().rsplit_once(')')?;
    let (tid, name) = head.split_once(" (")?;
    let fields: Vec<&str> = rest.split_ascii_whitespace().collect();
    // fields[0] is field 3 of proc(5), so field N is fields[N - 3].
    let field = |n: usize| fields.get(n - 3).copied();
    Some(TaskStat {
        tid: tid.trim().parse().ok()?,
        name: name.to_string(),
        state: field(3)?.chars().next()?,
        nice: field(19)?.parse().ok()?,
        cpu: field(39)?.parse().ok()?,
        policy: field(41)?.parse().ok()?,
    })
}

/// The name of a SCHED_* policy number, as `ratelab cpu --class` spells the classes.
pub fn policy_name(policy: u32) -> String {
    match policy {
        0 => "normal".into(),
        1 => "fifo".into(),
        2 => "rr".into(),
        3 => "batch".into(),
        5 => "idle".into(),
        6 => "deadline".into(),
        other => format!("policy {other}"),
    }
}

/// The live threads of process `pid`, by thread id; empty once the process is gone.
/// Zombie and dead threads are left out: they run nowhere.
pub fn threads(pid: u32) -> Vec<TaskStat> {
    let dir = PathBuf::from(format!("/proc/{pid}/task"));
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Vec::new();
    };
    let mut line = String::with_capacity(512);
    let mut found: Vec<TaskStat> = entries
        .filter_map(Result::ok)
        .filter_map(|entry| {
            line.clear();
            // A thread that ended since the listing has no stat any more: skip it.
            let mut file = std::fs::File::open(entry.path().join("stat")).ok()?;
            std::io::Read::read_to_string(&mut file, &mut line).ok()?;
            parse_task_stat(&line)
        })
        .filter(|t| !matches!(t.state, 'Z' | 'X' | 'x'))
        .collect();
    found.sort_by_key(|t| t.tid);
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stat line with `name` as comm, nice 5, last CPU 1 and SCHED_BATCH.
    fn line(name: &str) -> String {
        format!(
            "4242 ({name}) R 1 4242 4242 0 -1 4194304 100 0 0 0 7 3 0 0 25 5 3 0 1459720 \
             3133440 382 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 3 0 0 0"
        )
    }

    #[test]
    fn fields_are_counted_after_the_name() {
        let stat = parse_task_stat(&line("cat")).unwrap();
        assert_eq!(
            stat,
            TaskStat {
                tid: 4242,
                name: "cat".into(),
                state: 'R',
                nice: 5,
                cpu: 1,
                policy: 3,
            }
        );
        assert_eq!(policy_name(stat.policy), "batch");
    }

    #[test]
    fn a_name_with_spaces_and_parentheses_ends_at_the_last_paren() {
        let stat = parse_task_stat(&line("a) (b c) R 9")).unwrap();
        assert_eq!(stat.name, "a) (b c) R 9");
        assert_eq!(
            (stat.tid, stat.cpu, stat.nice, stat.policy),
            (4242, 1, 5, 3)
        );
    }

    #[test]
    fn the_real_stat_of_this_thread_parses() {
        let text = std::fs::read_to_string("/proc/thread-self/stat").unwrap();
        let stat = parse_task_stat(&text).unwrap();
        assert_eq!(stat.state, 'R');
        assert!(
            threads(std::process::id())
                .iter()
                .any(|t| t.tid == stat.tid)
        );
    }

    #[test]
    fn truncated_lines_are_refused() {
        assert_eq!(parse_task_stat("12 (x) R 1 2 3"), None);
        assert_eq!(parse_task_stat("no parenthesis"), None);
    }
}
