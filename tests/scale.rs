//! `ratelab scale -- CMD`: each run held to the CPUs asked (the mask or the quota its
//! command reads from the kernel itself), timed as the command's own clock times it,
//! and the speedup worked out as the test works it out from those clocks; a command
//! that sleeps does not speed up; bad input names the flag or the program. What the
//! speedup is on this machine (2x, or less where the host or other work takes a CPU)
//! is the machine's: the test proves what ratelab controls and measures, on a busy
//! machine too.

mod common;

use common::{ratelab, refused, root_or_skip, run_json};
use serde_json::Value;
use std::path::Path;

/// Two shell loops of fixed work at once, CPU-bound and able to use two CPUs, that
/// append to the file `$1` what the run saw: its own clock at start and end (ns), the
/// CPUs its mask allows, its cpu cgroup's quota and period (v1's, or v2's `cpu.max`;
/// `-` where it has none), then `times` (the shell's and its children's CPU time).
const TWO_BUSY_LOOPS: &str = "busy() { i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done; }\n\
m=-; while read -r k v; do [ \"$k\" = Cpus_allowed_list: ] && m=$v; done < /proc/$$/status\n\
q=-; while IFS=: read -r n c p; do case \",$c,\" in *,cpu,*) \
read -r a < /sys/fs/cgroup/cpu$p/cpu.cfs_quota_us; \
read -r b < /sys/fs/cgroup/cpu$p/cpu.cfs_period_us; q=$a/$b;; \
,,) { read -r a b < /sys/fs/cgroup$p/cpu.max; } 2>/dev/null && q=$a/$b;; esac; \
done < /proc/$$/cgroup\n\
s=$(date +%s%N); busy & busy & wait; times > \"$1.t\"; e=$(date +%s%N)\n\
echo \"$s $e $m $q\" >> \"$1\"; while read -r l; do echo \"$l\"; done < \"$1.t\" >> \"$1\"\n";

fn cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// One run as the command saw it.
#[derive(Debug)]
struct Seen {
    wall_s: f64,
    /// The CPUs its mask allowed, as the kernel lists them (`0`, `0-1`).
    mask: String,
    /// Its cpu cgroup's quota over its period, in CPUs; None without a quota.
    quota: Option<f64>,
    cpu_s: f64,
}

/// `times`' `0m1.234000s` in seconds.
fn minutes_seconds(field: &str) -> f64 {
    let (m, s) = field.trim_end_matches('s').split_once('m').unwrap();
    m.parse::<f64>().unwrap() * 60.0 + s.parse::<f64>().unwrap()
}

/// The runs recorded in `file`, in the order they ran.
fn seen(file: &Path) -> Vec<Seen> {
    let text = std::fs::read_to_string(file).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    lines
        .chunks(3)
        .map(|run| {
            let f: Vec<&str> = run[0].split(' ').collect();
            let ns = |i: usize| f[i].parse::<f64>().unwrap() / 1e9;
            let quota = f[3].split_once('/').and_then(|(q, p)| {
                let (q, p) = (q.parse::<f64>().ok()?, p.parse::<f64>().ok()?);
                (q > 0.0).then(|| q / p)
            });
            let cpu_s: f64 = run[1..]
                .iter()
                .flat_map(|l| l.split(' '))
                .map(minutes_seconds)
                .sum();
            Seen {
                wall_s: ns(1) - ns(0),
                mask: f[2].to_string(),
                quota,
                cpu_s,
            }
        })
        .collect()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// `ratelab scale --cpus 1,2 --repeat R` of `command`, as JSON.
fn scale_doc(extra: &[&str], repeat: u32, command: &[&str]) -> Value {
    run_json(
        ratelab()
            .args(["scale", "--cpus", "1,2", "--repeat"])
            .arg(repeat.to_string())
            .args(["--json", "-q", "--no-store"])
            .args(extra)
            .arg("--")
            .args(command),
    )
}

/// Runs the busy loops at 1 and 2 CPUs, 5 rounds, and checks each run against what
/// it saw: held as asked (`held` says how, from the run's own view), timed and
/// charged as its own clock and `times` say, and the speedup at 2 CPUs the one its
/// clocks give (median over median), within 10%: a 20% error in any is caught.
fn runs_as_the_command_saw_them(test: &str, extra: &[&str], held: impl Fn(usize, &Seen)) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("seen");
    let doc = scale_doc(
        extra,
        5,
        &["sh", "-c", TWO_BUSY_LOOPS, "sh", file.to_str().unwrap()],
    );
    let workload = &doc["workloads"][0];
    let items = workload["items"].as_array().unwrap();
    let seen = seen(&file);
    assert_eq!(items.len(), 10, "5 rounds of 1 and 2 CPUs: {items:?}");
    assert_eq!(seen.len(), items.len(), "a record a run: {seen:?}");
    let mut own: [Vec<f64>; 2] = [Vec::new(), Vec::new()];
    for (item, run) in items.iter().zip(&seen) {
        let cpus = item["cpus"].as_u64().unwrap() as usize;
        held(cpus, run);
        let wall = item["seconds"].as_f64().unwrap();
        // Its own clock starts after sh, its reads of /proc and date start, and stops
        // after the work and `times`, before the few builtins that write its record:
        // under a quota the work spends the period's CPU, and the first fork after it
        // waits for the next period, inside its own clock (62 ms outside it, once,
        // where `times` and the reads came after it).
        assert!(
            wall >= run.wall_s && wall <= run.wall_s * 1.05 + 0.03,
            "{test}: ratelab timed a run at {cpus} CPUs {wall:.3} s, its own clock {:.3} s",
            run.wall_s
        );
        let cpu = item["user_seconds"].as_f64().unwrap() + item["system_seconds"].as_f64().unwrap();
        assert!(
            (cpu - run.cpu_s).abs() <= 0.05 * run.cpu_s + 0.03,
            "{test}: ratelab charged a run at {cpus} CPUs {cpu:.3} s of CPU, `times` {:.3} s",
            run.cpu_s
        );
        own[cpus - 1].push(run.wall_s);
    }
    let [one, two] = own;
    let expected = median(one) / median(two);
    let speedup = workload["summary"]["points"][1]["speedup"]
        .as_f64()
        .unwrap();
    common::say(&format!(
        "{test}: {speedup:.3}x on 2 CPUs, {expected:.3}x by the runs' own clocks"
    ));
    assert!(
        (speedup / expected - 1.0).abs() <= 0.10,
        "{test}: ratelab says {speedup:.3}x on 2 CPUs, the runs' own clocks {expected:.3}x"
    );
}

/// Needs two CPUs: a skip says so (which fails under CI as root).
fn two_cpus_or_skip(test: &str) -> bool {
    if cpus() < 2 {
        common::skip(test, "this machine has one CPU");
        return false;
    }
    true
}

#[test]
fn runs_held_by_affinity_are_timed_as_their_own_clocks_say_and_sleep_does_not_speed_up() {
    let test =
        "runs_held_by_affinity_are_timed_as_their_own_clocks_say_and_sleep_does_not_speed_up";
    let _alone = common::rig::exclusive();
    if !two_cpus_or_skip(test) {
        return;
    }
    runs_as_the_command_saw_them(test, &[], |cpus, run| {
        let want = if cpus == 1 { "0" } else { "0-1" };
        assert_eq!(
            run.mask, want,
            "{test}: a run at {cpus} CPUs was allowed {}",
            run.mask
        );
        // Affinity holds whatever the host does: one CPU's time at most.
        if cpus == 1 {
            assert!(
                run.cpu_s <= run.wall_s * 1.05 + 0.01,
                "{test}: a run held to 1 CPU took {:.3} s of CPU in {:.3} s",
                run.cpu_s,
                run.wall_s
            );
        }
    });
    // A sleeper's time is the host's clock, not its CPUs': it holds however they move.
    let sleep = scale_doc(&[], 5, &["sleep", "0.3"]);
    let speedup = sleep["workloads"][0]["summary"]["points"][1]["speedup"]
        .as_f64()
        .unwrap();
    common::say(&format!("sleep 0.3: {speedup:.3}x on 2 CPUs"));
    assert!((0.9..=1.1).contains(&speedup), "{sleep}");
}

#[test]
fn a_cpu_quota_holds_a_command_as_a_vm_of_that_many_vcpus() {
    let test = "a_cpu_quota_holds_a_command_as_a_vm_of_that_many_vcpus";
    let _alone = common::rig::exclusive();
    if !root_or_skip(test, "it makes a cpu cgroup") || !two_cpus_or_skip(test) {
        return;
    }
    runs_as_the_command_saw_them(test, &["--vcpus"], |cpus, run| {
        let quota = run.quota.unwrap_or(0.0);
        assert!(
            (quota - cpus as f64).abs() < 0.01,
            "{test}: a run at {cpus} vCPUs ran under a quota of {quota} CPUs"
        );
        // A quota holds per period: a run at 1 vCPU took one CPU's time at most, and
        // one period's more where it began a period and ended in another.
        if cpus == 1 {
            assert!(
                run.cpu_s <= run.wall_s + 0.11,
                "{test}: a run held to 1 vCPU took {:.3} s of CPU in {:.3} s",
                run.cpu_s,
                run.wall_s
            );
        }
    });
    // The cgroup is gone after the run.
    let left = std::fs::read_dir("/sys/fs/cgroup/cpu")
        .map(|d| {
            d.filter_map(Result::ok)
                .filter(|e| {
                    e.file_name()
                        .to_string_lossy()
                        .starts_with("ratelab-scale-")
                })
                .count()
        })
        .unwrap_or(0);
    assert_eq!(left, 0, "a ratelab-scale cgroup was left behind");
}

#[test]
fn bad_input_names_the_flag_or_program() {
    // Its short runs would take CPU from the timed ones beside it.
    let _alone = common::rig::exclusive();
    let scale = |args: &[&str]| {
        let mut command = ratelab();
        command.args(["scale", "--no-store"]).args(args);
        command
    };
    refused(&mut scale(&["--cpus", "0", "--", "true"]), 2, &["--cpus 0"]);
    refused(
        &mut scale(&["--cpus", "4096", "--", "true"]),
        2,
        &["--cpus 4096"],
    );
    refused(
        &mut scale(&["--repeat", "0", "--", "true"]),
        2,
        &["--repeat 0"],
    );
    refused(
        &mut scale(&["--", "no-such-program-here"]),
        3,
        &["no-such-program-here", "no such program"],
    );
    refused(&mut scale(&[]), 2, &["CMD"]);
}
