//! Why a network runs at its rate: on rigs that make each cause real (a shaped veth,
//! a delay line with small buffers or loss, a receiver held to a CPU quota, loopback),
//! `ratelab net` stores the cause that binds in its summary's `limit`, with the
//! ceilings it computed and advice that names what to change.

mod common;

use std::process::Command;
use std::time::Duration;

use common::delay_line::{Allowed, DelayLine};
use common::iperf3_peers::{self, Iperf3};
use common::netns::{Link, serve_ratelab_in};
use common::run_json;
use serde_json::Value;

/// Whether this test can build its rig here; says why not when it cannot.
fn rig_or_skip(test: &str, tun: bool) -> bool {
    if !common::root_or_skip(test, "it builds network namespaces") {
        return false;
    }
    if tun
        && std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open("/dev/net/tun")
            .is_err()
    {
        common::skip(test, "/dev/net/tun cannot be opened here");
        return false;
    }
    true
}

/// A CPU cgroup (v1 or v2) with a quota of `share` of one core, removed on drop.
struct Quota {
    path: std::path::PathBuf,
}

impl Quota {
    fn new(share: f64) -> Quota {
        let v1 = std::path::Path::new("/sys/fs/cgroup/cpu/cpu.cfs_quota_us").exists();
        let name = format!("ratelab-test-quota-{}", std::process::id());
        let path = if v1 {
            std::path::Path::new("/sys/fs/cgroup/cpu").join(name)
        } else {
            let _ = std::fs::write("/sys/fs/cgroup/cgroup.subtree_control", "+cpu");
            std::path::Path::new("/sys/fs/cgroup").join(name)
        };
        std::fs::create_dir(&path).expect("make a cpu cgroup");
        let quota = (100_000.0 * share) as u64;
        if v1 {
            std::fs::write(path.join("cpu.cfs_period_us"), "100000").unwrap();
            std::fs::write(path.join("cpu.cfs_quota_us"), quota.to_string()).unwrap();
        } else {
            std::fs::write(path.join("cpu.max"), format!("{quota} 100000")).unwrap();
        }
        Quota { path }
    }

    /// Moves process `pid`, all its threads, into the group.
    fn hold(&self, pid: u32) {
        std::fs::write(self.path.join("cgroup.procs"), pid.to_string()).expect("join the cgroup");
    }
}

impl Drop for Quota {
    fn drop(&mut self) {
        for _ in 0..100 {
            if std::fs::remove_dir(&self.path).is_ok() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// `ratelab net ADDRESS` with `extra`, run by `command` (in the client's namespace).
fn net(mut command: Command, address: &str, extra: &[&str]) -> Value {
    run_json(
        command
            .args(["net", address, "--json", "--no-store", "-q"])
            .args(extra),
    )
}

/// The first workload's summary.
fn summary(doc: &Value) -> &Value {
    &doc["workloads"][0]["summary"]
}

/// Prints what a test's limit says, for the test's log.
fn show(test: &str, doc: &Value) {
    let summary = summary(doc);
    eprintln!(
        "{test}: received {:.2} MB/s; limit {}",
        summary["receive"]["bytes_per_sec"].as_f64().unwrap_or(0.0) / 1e6,
        serde_json::to_string_pretty(&summary["limit"]).unwrap()
    );
    if std::env::var("ITEMS").is_ok() {
        for item in doc["workloads"][0]["items"].as_array().unwrap() {
            eprintln!("  {item}");
        }
    }
}

/// The stored limit of a test.
fn limit(doc: &Value) -> &Value {
    &summary(doc)["limit"]
}

/// A ceiling of the limit, bytes per second.
fn ceiling(doc: &Value, name: &str) -> f64 {
    limit(doc)["ceilings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no {name} ceiling: {}", limit(doc)))["bytes_per_sec"]
        .as_f64()
        .unwrap()
}

/// The received rate, bytes per second.
fn received(doc: &Value) -> f64 {
    summary(doc)["receive"]["bytes_per_sec"].as_f64().unwrap()
}

/// Asserts the received rate is within 15% of the stored window ceiling.
fn assert_near_the_window(test: &str, doc: &Value) {
    let (rate, window) = (received(doc), ceiling(doc, "window"));
    eprintln!("{test}: {:.3} of the window's ceiling", rate / window);
    assert!(
        (0.85..=1.15).contains(&(rate / window)),
        "{rate} against {window}"
    );
}

/// Runs `attempt` up to three times, as every test whose figures other work can move,
/// and checks `check` of its document where the run was quiet or the figures held.
fn tries(test: &str, mut attempt: impl FnMut() -> Value, check: impl Fn(&Value)) {
    common::up_to_three_tries(test, |_| {
        let load = common::load::Load::start();
        let doc = attempt();
        assert_eq!(doc["status"], "complete", "{doc}");
        show(test, &doc);
        common::check(load.disturbed(), || {
            check(&doc);
            common::Try::Checked
        })
    });
}

/// Asserts the stored cause is one of `causes`.
fn assert_cause(doc: &Value, causes: &[&str]) {
    let cause = limit(doc)["cause"].as_str().unwrap_or("null");
    assert!(
        causes.contains(&cause),
        "{cause}, not {causes:?}: {}",
        limit(doc)
    );
}

#[test]
fn a_shaped_link_is_limited_by_the_path() {
    let test = "a_shaped_link_is_limited_by_the_path";
    if !rig_or_skip(test, false) {
        return;
    }
    let _lock = common::rig::exclusive();
    let mut link = Link::new(1500, "300mbit");
    link.serve_ratelab(5301);
    let address = link.server_address.clone();
    tries(
        test,
        || net(link.in_client(common::bin()), &address, &["-t", "3"]),
        |doc| {
            assert_cause(doc, &["path"]);
            assert!(
                limit(doc)["evidence"]
                    .as_str()
                    .unwrap()
                    .contains("a queue stood on the path"),
                "{doc}"
            );
        },
    );
}

/// A delay line of 10 ms each way (a 20 ms round trip) with `loss`, whose server's and
/// client's sysctls are set by `setup`, and a ratelab server on it.
fn delay_line(loss: f64, setup: impl Fn(&DelayLine)) -> (DelayLine, Served) {
    let line = DelayLine::new(Duration::from_millis(10), loss, 1500);
    setup(&line);
    let server = Served(serve_ratelab_in(
        &line.server,
        &line.server_address,
        5301,
        &[],
    ));
    (line, server)
}

/// A test on `line` from its client, with `extra`.
fn over(line: &DelayLine, extra: &[&str]) -> Value {
    net(
        line.run_in(&line.client, common::bin()),
        &line.server_address,
        extra,
    )
}

#[test]
fn a_small_receive_buffer_on_a_long_path_is_limited_by_the_window() {
    let test = "a_small_receive_buffer_on_a_long_path_is_limited_by_the_window";
    if !rig_or_skip(test, true) {
        return;
    }
    let _lock = common::rig::exclusive();
    let (line, _server) = delay_line(0.0, |line| {
        line.sysctl(&line.server, "net.ipv4.tcp_rmem", "4096 65536 65536");
    });
    // Stored, to show its summary as a user reads it.
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    // The delay line has no wire speed: the link's rate is given, as a user would.
    tries(
        test,
        || {
            run_json(
                line.run_in(&line.client, common::bin())
                    .args([
                        "net",
                        &line.server_address,
                        "-t",
                        "3",
                        "--link-rate",
                        "100mbit",
                    ])
                    .args(["--json", "-q", "--db"])
                    .arg(&db),
            )
        },
        |doc| {
            let id = doc["run_id"].to_string();
            let shown = common::results(&db, &["show", &id]);
            let summary: String = shown
                .lines()
                .skip_while(|l| !l.starts_with("summary:"))
                .take_while(|l| !l.is_empty())
                .collect::<Vec<_>>()
                .join("\n");
            common::say(&format!("{test}, as `results show` says it:\n{summary}"));
            assert_cause(doc, &["receive_window"]);
            assert_near_the_window(test, doc);
            // The advice names a buffer of at least the bandwidth-delay product: 100
            // Mbit/s over the least round trip.
            let advice = limit(doc)["advice"].as_str().unwrap();
            let bytes: u64 = advice
                .split_once("tcp_rmem's max on the receiver to ")
                .and_then(|(_, rest)| rest.split_whitespace().next()?.parse().ok())
                .unwrap_or_else(|| panic!("{advice}"));
            let min_rtt_s = doc["workloads"][0]["items"]
                .as_array()
                .unwrap()
                .iter()
                .find(|i| i["scope"] == "stream" && i["op"] == "send")
                .unwrap()["min_rtt_us"]
                .as_f64()
                .unwrap()
                / 1e6;
            let bdp = 100e6 / 8.0 * min_rtt_s;
            assert!(bytes as f64 >= bdp, "{bytes} under the BDP {bdp}: {advice}");
        },
    );
}

#[test]
fn a_small_send_buffer_on_a_long_path_is_limited_by_it() {
    let test = "a_small_send_buffer_on_a_long_path_is_limited_by_it";
    if !rig_or_skip(test, true) {
        return;
    }
    let _lock = common::rig::exclusive();
    let (line, _server) = delay_line(0.0, |line| {
        line.sysctl(&line.client, "net.ipv4.tcp_wmem", "4096 65536 65536");
    });
    tries(
        test,
        || over(&line, &["-t", "3", "--link-rate", "100mbit"]),
        |doc| {
            assert_cause(doc, &["send_buffer"]);
            assert!(
                limit(doc)["advice"].as_str().unwrap().contains("tcp_wmem"),
                "{doc}"
            );
        },
    );
}

#[test]
fn one_percent_loss_on_a_long_path_limits_cubic() {
    let test = "one_percent_loss_on_a_long_path_limits_cubic";
    if !rig_or_skip(test, true) {
        return;
    }
    let _lock = common::rig::exclusive();
    let allowed = Allowed::add("cubic");
    let (line, _server) = delay_line(0.01, |line| line.congestion(&allowed, "cubic"));
    tries(
        test,
        || over(&line, &["-t", "3"]),
        |doc| {
            assert_cause(doc, &["loss"]);
            // The share sent again, as a rate: about the line's 1%.
            let share = limit(doc)["share"].as_f64().unwrap();
            assert!((0.003..=0.03).contains(&share), "{share}");
            assert!(
                limit(doc)["evidence"]
                    .as_str()
                    .unwrap()
                    .contains("% of segments were sent again")
            );
        },
    );
}

#[test]
fn a_short_test_on_a_long_path_is_still_in_slow_start() {
    let test = "a_short_test_on_a_long_path_is_still_in_slow_start";
    if !rig_or_skip(test, true) {
        return;
    }
    let _lock = common::rig::exclusive();
    let (line, _server) = delay_line(0.0, |_| {});
    tries(
        test,
        || over(&line, &["-t", "1"]),
        |doc| assert_cause(doc, &["slow_start"]),
    );
}

#[test]
fn a_receiver_held_to_a_cpu_quota_is_limited_by_its_cpu() {
    let test = "a_receiver_held_to_a_cpu_quota_is_limited_by_its_cpu";
    if !rig_or_skip(test, false) {
        return;
    }
    let _lock = common::rig::exclusive();
    let link = Link::new(1500, "2gbit");
    let quota = Quota::new(0.02);
    // nsenter, not ip netns exec: the server keeps this machine's /sys, so it sees its
    // cgroup and can name the quota.
    let mut server = common::isolated(&mut Command::new("nsenter"))
        .arg(format!("--net=/run/netns/{}", link_server(&link)))
        .arg(common::bin())
        .args([
            "net",
            "serve",
            "--bind",
            &link.server_address,
            "--port",
            "5301",
        ])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(server.stderr.as_mut().unwrap()),
        &mut line,
    )
    .unwrap();
    assert!(line.contains("listening on"), "{line}");
    let server = Served(server);
    quota.hold(server.0.id());
    tries(
        test,
        || {
            net(
                link.in_client(common::bin()),
                &link.server_address,
                &["-t", "3"],
            )
        },
        |doc| {
            assert_cause(doc, &["receiver_cpu"]);
            let evidence = limit(doc)["evidence"].as_str().unwrap();
            assert!(evidence.contains("under a CPU quota of 2.0%"), "{evidence}");
        },
    );
}

#[test]
fn loopback_is_limited_by_a_cpu_and_names_it() {
    let test = "loopback_is_limited_by_a_cpu_and_names_it";
    let _lock = common::rig::exclusive();
    let server = common::net_server::Server::start(&[]);
    let port = server.address().port().to_string();
    tries(
        test,
        || net(common::ratelab(), "127.0.0.1", &["-p", &port, "-t", "2"]),
        |doc| {
            assert_cause(doc, &["sender_cpu", "receiver_cpu"]);
            let at = limit(doc)["where"].as_str().unwrap();
            assert!(at.starts_with("cpu "), "{at}");
        },
    );
}

#[test]
fn an_iperf3_sender_on_one_core_is_limited_by_the_peer() {
    let test = "an_iperf3_sender_on_one_core_is_limited_by_the_peer";
    let Some(iperf3) = iperf3_peers::newest_or_skip(test) else {
        return;
    };
    if !common::have_or_skip(test, "taskset") || cpus() < 2 {
        common::skip(test, "it needs two cores and taskset");
        return;
    }
    let _lock = common::rig::exclusive();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("served.db");
    // ratelab's receiver on core 1; two threads of the newest iperf3 (a stream each)
    // sending blocks of 128 bytes on core 0, over loopback, where a sender's system
    // calls also carry the receiver's side of TCP: the sender's core is full while the
    // receiver's has room (with blocks of 1 KiB it read 900 MB/s, on its CPU 35% and
    // waiting for it 58% while other work took 0.4 of a CPU, and was named). iperf3
    // says only its process's CPU time, which is that core: the peer.
    let mut wrapper = Command::new("sh");
    wrapper.args(["-c", "exec taskset -c 1 \"$@\"", "sh"]);
    let server = common::net_server::Server::start_with(
        wrapper,
        &["--iperf3", "--db", db.to_str().unwrap()],
    );
    let port = server.address().port().to_string();
    let mut id = 0;
    tries(
        test,
        || {
            let output = Command::new("taskset")
                .args(["-c", "0"])
                .arg(&iperf3.path)
                .args([
                    "-c",
                    "127.0.0.1",
                    "-p",
                    &port,
                    "-P",
                    "2",
                    "-l",
                    "128",
                    "-t",
                    "3",
                ])
                .output()
                .expect("run iperf3 -c");
            assert!(output.status.success(), "{output:?}");
            id += 1;
            common::wait_stored(&db, id)
        },
        |doc| {
            assert_cause(doc, &["peer"]);
            let evidence = limit(doc)["evidence"].as_str().unwrap();
            eprintln!("{test}: {evidence}");
        },
    );
}

fn cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Starts `iperf3 -s` of `iperf3` in `line`'s server namespace on `port`, and waits
/// until it listens.
fn serve_iperf3_on(line: &DelayLine, iperf3: &Iperf3, port: u16) -> Served {
    let served = Served(
        line.run_in(&line.server, &iperf3.path)
            .args(["-s", "-p", &port.to_string()])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("start iperf3 -s"),
    );
    for _ in 0..100 {
        let listening = line
            .run_in(&line.server, "ss")
            .args(["-ltnH", &format!("sport = :{port}")])
            .output()
            .expect("run ss");
        if !listening.stdout.is_empty() {
            return served;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("iperf3 {} -s never listened on {port}", iperf3.version);
}

#[test]
fn sending_to_iperf3_over_a_small_receive_buffer_is_limited_by_the_window() {
    let test = "sending_to_iperf3_over_a_small_receive_buffer_is_limited_by_the_window";
    if !rig_or_skip(test, true) {
        return;
    }
    let releases = iperf3_peers::both_or_skip(test);
    let _lock = common::rig::exclusive();
    let line = DelayLine::new(Duration::from_millis(10), 0.0, 1500);
    line.sysctl(&line.server, "net.ipv4.tcp_rmem", "4096 65536 65536");
    for (index, iperf3) in releases.iter().enumerate() {
        let port = (5201 + index).to_string();
        let _server = serve_iperf3_on(&line, iperf3, 5201 + index as u16);
        // iperf3 sends no account of its end: ratelab's own, as the sender, decides.
        tries(
            &format!("{test} (iperf3 {})", iperf3.version),
            || {
                over(
                    &line,
                    &["--iperf3", "-p", &port, "-t", "3", "--link-rate", "100mbit"],
                )
            },
            |doc| {
                assert_cause(doc, &["receive_window"]);
                assert_near_the_window(test, doc);
            },
        );
    }
}

#[test]
fn an_iperf3_client_receiving_from_net_serve_on_a_shaped_link_is_limited_by_the_path() {
    let test = "an_iperf3_client_receiving_from_net_serve_on_a_shaped_link_is_limited_by_the_path";
    if !rig_or_skip(test, false) {
        return;
    }
    let releases = iperf3_peers::both_or_skip(test);
    let _lock = common::rig::exclusive();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("served.db");
    let mut link = Link::new(1500, "300mbit");
    link.serve_ratelab_with(5301, &["--iperf3", "--db", db.to_str().unwrap()]);
    let mut id = 0;
    for iperf3 in &releases {
        // ratelab sends (-R): its own account, as the sender, decides.
        tries(
            &format!("{test} (iperf3 {})", iperf3.version),
            || {
                let output = link
                    .in_client(&iperf3.path)
                    .args(["-c", &link.server_address, "-p", "5301", "-R", "-t", "3"])
                    .output()
                    .expect("run iperf3 -c");
                assert!(output.status.success(), "{output:?}");
                id += 1;
                common::wait_stored(&db, id)
            },
            |doc| assert_cause(doc, &["path"]),
        );
    }
}

#[test]
fn jumbo_ends_across_a_1500_byte_bridge_port_stall_in_an_mtu_black_hole() {
    let test = "jumbo_ends_across_a_1500_byte_bridge_port_stall_in_an_mtu_black_hole";
    if !rig_or_skip(test, false) {
        return;
    }
    let _lock = common::rig::exclusive();
    let mut link = Link::through_bridge(9000, 9000, 1500);
    link.serve_ratelab(5301);
    let address = link.server_address.clone();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    let started = std::time::Instant::now();
    let output = link
        .in_client(common::bin())
        .args(["net", &address, "-t", "3", "-q", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    let took = started.elapsed();
    let stderr = String::from_utf8_lossy(&output.stderr);
    eprintln!("{test}: {took:?}, {stderr}");
    // The stream gives up 1 s after its bytes stop being acknowledged, and the client
    // waits 2 s for a report that cannot cross: the run ends within the test's time
    // and a little more, not at its 10 s grace.
    assert!(took < Duration::from_secs(7), "{took:?}");
    assert_eq!(output.status.code(), Some(3), "{stderr}");
    assert!(
        stderr.contains("small packets arrive and the stream's full segments do not"),
        "{stderr}"
    );
    let doc = common::stored_run(&db, 1);
    assert_eq!(doc["status"], "incomplete", "{doc}");
    show(test, &doc);
    assert_cause(&doc, &["mtu_black_hole"]);
    let evidence = limit(&doc)["evidence"].as_str().unwrap();
    assert!(evidence.contains("(path MTU 9000)"), "{evidence}");
    let shown = common::results(&db, &["show", "1"]);
    assert!(shown.contains("stalled in an MTU black hole"), "{shown}");
    // The advice's -M 1448: segments that fit the port cross, and so does the report.
    // The veths say 10 Gbit/s and carry more: the link's rate is given, as a user
    // would.
    let doc = net(
        link.in_client(common::bin()),
        &address,
        &["-t", "1", "-M", "1448", "--link-rate", "100gbit"],
    );
    assert_eq!(doc["status"], "complete", "{doc}");
    // The other way (-R), the port toward the client at 1500: the server's sender gives
    // up and resets its stream. The reset, a small packet, crosses, and the client waits
    // 2 s, not its 10 s grace and more, for a report the same hop holds.
    drop(link);
    let mut back = Link::through_bridge(9000, 1500, 9000);
    back.serve_ratelab(5301);
    let address = back.server_address.clone();
    let started = std::time::Instant::now();
    let output = back
        .in_client(common::bin())
        .args(["net", &address, "-t", "3", "-R", "-q", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    let took = started.elapsed();
    let stderr = String::from_utf8_lossy(&output.stderr);
    eprintln!("{test}: -R {took:?}, {stderr}");
    assert!(took < Duration::from_secs(7), "{took:?}");
    assert_eq!(output.status.code(), Some(3), "{stderr}");
    assert!(
        stderr.contains("the sender reset it during the test"),
        "{stderr}"
    );
    assert_eq!(common::stored_run(&db, 2)["status"], "incomplete");
}

fn link_server(link: &Link) -> String {
    link.client_namespace().trim_end_matches('c').to_string() + "s"
}

/// A server process, killed when dropped.
struct Served(std::process::Child);

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
