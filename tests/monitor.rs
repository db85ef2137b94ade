//! `ratelab monitor` on this machine: sources it lacks are null with a reason, never
//! zero; a pinned busy command is seen on its core, which is busy; bad input is refused
//! with the flag or command named.

mod common;

use std::path::Path;

use common::{ratelab, refused, run_json};
use serde_json::Value;

/// The items of the run's only workload with `op`.
fn items<'a>(doc: &'a Value, op: &str) -> Vec<&'a Value> {
    doc["workloads"][0]["items"]
        .as_array()
        .expect("items")
        .iter()
        .filter(|i| i["op"] == op)
        .collect()
}

/// Whether a sysfs or device file can be read by this process.
fn readable(path: &str) -> bool {
    std::fs::File::open(path).is_ok()
}

/// Whether any hwmon device has a power or energy sensor.
fn has_hwmon_power() -> bool {
    let Ok(devices) = std::fs::read_dir("/sys/class/hwmon") else {
        return false;
    };
    devices.filter_map(Result::ok).any(|device| {
        std::fs::read_dir(device.path()).is_ok_and(|files| {
            files.filter_map(Result::ok).any(|f| {
                let name = f.file_name().to_string_lossy().into_owned();
                (name.starts_with("power") || name.starts_with("energy"))
                    && name.ends_with("_input")
            })
        })
    })
}

#[test]
fn missing_sources_are_null_with_a_reason_never_zero() {
    let doc = run_json(ratelab().args(["monitor", "--samples", "5", "--json", "--no-store", "-q"]));
    let workload = &doc["workloads"][0];
    let sources = &workload["context"]["sources"];
    let cpus = workload["context"]["cpus"].as_array().expect("cpus").len();
    let cores = items(&doc, "core");
    let systems = items(&doc, "system");
    assert_eq!(cores.len(), 5 * cpus);
    assert_eq!(systems.len(), 5);
    for core in &cores {
        let active = core["active_fraction"].as_f64().expect("active_fraction");
        assert!((0.0..=1.0).contains(&active), "{core}");
        // No per-core power source exists: always null, never 0.
        assert!(core["power_w"].is_null(), "{core}");
    }
    assert!(sources["power_w"]["unavailable"].is_string(), "{sources}");

    let cpufreq = readable("/sys/devices/system/cpu/cpu0/cpufreq/scaling_cur_freq");
    let msr = Path::new("/dev/cpu/0/msr").exists() && common::is_root();
    if cpufreq {
        assert!(
            cores
                .iter()
                .all(|c| c["freq_hz"].as_f64().is_some_and(|f| f > 1e8))
        );
        assert_eq!(sources["freq_hz"]["source"], "cpufreq scaling_cur_freq");
    } else if msr {
        // APERF/MPERF: a core that stayed idle through a sample has no frequency.
        assert!(
            cores
                .iter()
                .all(|c| c["freq_hz"].is_null() || c["freq_hz"].as_f64() > Some(1e8))
        );
        assert!(sources["freq_hz"]["source"].is_string(), "{sources}");
    } else {
        assert!(
            cores.iter().all(|c| c["freq_hz"].is_null()),
            "a frequency of no source"
        );
        let reason = sources["freq_hz"]["unavailable"]
            .as_str()
            .expect("a reason");
        assert!(
            reason.contains("cpufreq") && reason.contains("/dev/cpu/0/msr"),
            "{reason}"
        );
        let fit = &workload["summary"]["freq_vs_active_cores"]["unavailable"];
        assert!(fit.as_str().is_some_and(|r| r.contains("cpufreq")), "{fit}");
    }

    let rapl = readable("/sys/class/powercap/intel-rapl:0/energy_uj");
    if rapl || has_hwmon_power() {
        assert!(
            systems.iter().all(|s| s["power_w"].as_f64().is_some()),
            "{systems:?}"
        );
    } else {
        assert!(
            systems
                .iter()
                .all(|s| s["power_w"].is_null() && s["energy_j"].is_null())
        );
        let reason = sources["system_power_w"]["unavailable"]
            .as_str()
            .expect("a reason");
        assert!(
            reason.contains("RAPL") && reason.contains("hwmon"),
            "{reason}"
        );
        assert!(
            doc["verdicts"]
                .as_array()
                .unwrap()
                .iter()
                .any(|v| { v["code"] == "system_power_w_unavailable" && v["severity"] == "info" })
        );
    }
}

#[test]
fn a_pinned_busy_command_is_seen_on_its_core_and_keeps_it_busy() {
    let online = std::thread::available_parallelism().map_or(1, |n| n.get());
    if online < 2 {
        common::skip(
            "a_pinned_busy_command_is_seen_on_its_core_and_keeps_it_busy",
            &format!("this machine has {online} CPU, and the test pins a command to CPU 1"),
        );
        return;
    }
    let output = ratelab()
        .args([
            "monitor",
            "--interval",
            "50ms",
            "--json",
            "--no-store",
            "-q",
            "--",
        ])
        .args(["taskset", "-c", "1", "sh", "-c"])
        .arg("i=0; while [ $i -lt 1500000 ]; do i=$((i+1)); done; echo busy-done")
        .output()
        .expect("start ratelab");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    // The command's stdout went to stderr, and stdout is the JSON document alone.
    assert!(stderr.contains("busy-done"), "{stderr}");
    let doc = common::json(&output.stdout);
    let context = &doc["workloads"][0]["context"];
    assert_eq!(context["ended_by"], "command exited");
    assert_eq!(context["command_exit_code"], 0);

    let threads: Vec<&Value> = items(&doc, "thread")
        .into_iter()
        .filter(|t| t["name"] == "sh")
        .collect();
    assert!(threads.len() >= 5, "only {} samples of sh", threads.len());
    let mut fractions = Vec::new();
    for thread in &threads {
        assert_eq!(thread["cpu"], 1, "{thread}");
        let core = items(&doc, "core")
            .into_iter()
            .find(|c| c["sample"] == thread["sample"] && c["cpu"] == 1)
            .expect("core 1 in the thread's sample");
        fractions.push(core["active_fraction"].as_f64().expect("a fraction"));
    }
    fractions.sort_by(f64::total_cmp);
    let median = fractions[fractions.len() / 2];
    assert!(
        median >= 0.95 && fractions[0] >= 0.7,
        "core 1 active: {fractions:?}"
    );
    let placement = &doc["workloads"][0]["summary"]["threads"][0];
    assert_eq!(
        placement["cpus_seen"],
        serde_json::json!([1]),
        "{placement}"
    );
    assert_eq!(placement["migrations"], 0);
}

#[test]
fn bad_input_is_refused_naming_the_flag_or_command() {
    refused(
        ratelab().args([
            "monitor",
            "--interval",
            "2ms",
            "--samples",
            "3",
            "--no-store",
        ]),
        2,
        &["--interval 2ms", "10 ms tick"],
    );
    refused(
        ratelab().args(["monitor", "--samples", "0", "--no-store"]),
        2,
        &["--samples"],
    );
    refused(
        ratelab().args(["monitor", "--samples", "5", "--seconds", "2", "--no-store"]),
        2,
        &["--samples", "--seconds"],
    );
    refused(
        ratelab().args([
            "monitor",
            "--seconds",
            "50ms",
            "--interval",
            "100ms",
            "--no-store",
        ]),
        2,
        &["--seconds", "--interval"],
    );
    refused(
        ratelab().args([
            "monitor",
            "--no-store",
            "--",
            "ratelab-no-such-command",
            "-x",
        ]),
        3,
        &["ratelab-no-such-command"],
    );
}
