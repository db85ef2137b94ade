//! ratelab speaking iperf3's protocol: `net HOST --iperf3` against the real `iperf3 -s`.
//! On a shaped veth between two namespaces its receiver figure must agree with `iperf3
//! -c`'s on the same link in the same test, and with the link's goodput limit; on
//! loopback a busy iperf3 server and a server that is not iperf3's are named, and
//! ratelab's own server answers the iperf3 client as well.

mod common;

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::netns::Link;
use common::{json, rig, root_or_skip, run_json};

const NETNS_NEEDS: &str = "it builds network namespaces, a veth pair and tbf qdiscs";
const IPERF3_PORT: u16 = 5201;
const SECONDS: &str = "3";

/// iperf3 -c's receiver rate with `args`, bits per second (its sender's for -R is the
/// server's; the receiver's line is what both tools put first).
fn iperf3_receiver_bits(link: &Link, args: &[&str]) -> f64 {
    let output = link
        .in_client("iperf3")
        .args(["-c", &link.server_address, "-p", &IPERF3_PORT.to_string()])
        .args(["-t", SECONDS, "-J"])
        .args(args)
        .output()
        .expect("run iperf3 -c");
    let doc = json(&output.stdout);
    assert!(doc.get("error").is_none(), "iperf3 -c {args:?}: {doc}");
    doc["end"]["sum_received"]["bits_per_second"]
        .as_f64()
        .expect("iperf3 reports sum_received")
}

/// ratelab's stored run of a test against the iperf3 server with `args`.
fn ratelab_run(link: &Link, args: &[&str]) -> serde_json::Value {
    run_json(
        link.in_client(common::bin())
            .args(["net", &link.server_address, "--iperf3", "-t", SECONDS])
            .args(args)
            .args(["--json", "--no-store", "-q"]),
    )
}

#[test]
fn net_iperf3_agrees_with_iperf3_c_on_a_shaped_link() {
    let test = "net_iperf3_agrees_with_iperf3_c_on_a_shaped_link";
    if !root_or_skip(test, NETNS_NEEDS) || !common::have_or_skip(test, "iperf3") {
        return;
    }
    let _lock = rig::exclusive();
    let mut failures = Vec::new();
    for (mtu, rate, rate_bits) in [(1500, "2gbit", 2e9), (9000, "4gbit", 4e9)] {
        let mut link = Link::new(mtu, rate);
        link.serve_iperf3(IPERF3_PORT);
        let mss = f64::from(mtu - 52);
        let limit_bits = rate_bits * mss / f64::from(mtu + 14);
        for args in [&[][..], &["-R"], &["-P", "2"]] {
            let doc = ratelab_run(&link, args);
            let workload = &doc["workloads"][0];
            assert_eq!(doc["status"], "complete", "{doc}");
            let summary = &workload["summary"];
            let ours = summary["receive"]["bytes_per_sec"].as_f64().unwrap() * 8.0;
            // The receiver of a forward test is the server: its own count is stored as
            // the remote end and is the headline, as iperf3 prints it.
            let remote_received: u64 = workload["items"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|i| i["scope"] == "stream" && i["op"] == "receive")
                .map(|i| i["bytes"].as_u64().unwrap())
                .sum();
            assert_eq!(summary["receive"]["bytes"], remote_received, "{summary}");
            let sides: Vec<&str> = workload["items"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|i| i["scope"] == "stream" && i["op"] == "receive")
                .map(|i| i["side"].as_str().unwrap())
                .collect();
            let expected_side = if args == ["-R"] { "local" } else { "remote" };
            assert!(sides.iter().all(|s| *s == expected_side), "{sides:?}");
            let theirs = iperf3_receiver_bits(&link, args);
            let line = format!(
                "MTU {mtu}, tbf {rate}, {args:?}: limit {:.3} Gbit/s, ratelab --iperf3 {:.3} ({:.3} of the limit), iperf3 -c {:.3} ({:.3}), ratio {:.3}",
                limit_bits / 1e9,
                ours / 1e9,
                ours / limit_bits,
                theirs / 1e9,
                theirs / limit_bits,
                ours / theirs
            );
            eprintln!("{line}");
            if (ours / theirs - 1.0).abs() > 0.03 || !(0.97..=1.03).contains(&(ours / limit_bits)) {
                failures.push(line);
            }
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

/// A process killed when the test ends, however it ends.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// An iperf3 server on a free loopback port, with the port.
fn iperf3_server() -> (Killed, u16) {
    let port = {
        let probe = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        probe.local_addr().unwrap().port()
    };
    let child = Killed(
        Command::new("iperf3")
            .args(["-s", "-B", "127.0.0.1", "-p", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start iperf3 -s"),
    );
    for _ in 0..100 {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            // That connection was a client to it: let the server forget it.
            std::thread::sleep(Duration::from_millis(100));
            return (child, port);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("iperf3 -s did not listen on {port}");
}

#[test]
fn a_busy_iperf3_server_and_a_server_that_is_not_iperf3_are_named() {
    let test = "a_busy_iperf3_server_and_a_server_that_is_not_iperf3_are_named";
    if !common::have_or_skip(test, "iperf3") {
        return;
    }
    let (server, port) = iperf3_server();
    let busy = Killed(
        Command::new("iperf3")
            .args(["-c", "127.0.0.1", "-p", &port.to_string(), "-t", "5"])
            .stdout(Stdio::null())
            .spawn()
            .unwrap(),
    );
    std::thread::sleep(Duration::from_millis(700));
    common::refused(
        common::ratelab()
            .args(["net", "127.0.0.1", "--iperf3", "-t", "1", "-p"])
            .arg(port.to_string())
            .arg("--no-store"),
        3,
        &["busy running a test"],
    );
    drop(busy);
    drop(server);

    // A server that is not iperf3's (here one that answers like HTTP) is named as such.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let http = listener.local_addr().unwrap().port();
    let answering = std::thread::spawn(move || {
        if let Ok((mut connection, _)) = listener.accept() {
            use std::io::{Read, Write};
            let mut cookie = [0u8; 37];
            let _ = connection.read_exact(&mut cookie);
            let _ = connection.write_all(b"HTTP/1.1 400 Bad Request\r\n\r\n");
        }
    });
    common::refused(
        common::ratelab()
            .args(["net", "127.0.0.1", "--iperf3", "-t", "1", "-p"])
            .arg(http.to_string())
            .arg("--no-store"),
        3,
        &["is this an iperf3 server?"],
    );
    answering.join().unwrap();
    // ratelab's own server speaks iperf3 too: both ends of the test are ratelab's.
    let mut native = common::net_server::Server::start(&["--no-store"]);
    run_json(
        common::ratelab()
            .args([
                "net",
                "127.0.0.1",
                "--iperf3",
                "-t",
                "1",
                "--json",
                "--no-store",
                "-p",
            ])
            .arg(native.address().port().to_string()),
    );
    native.assert_alive();
    // Flags iperf3 has no use for are refused before anything is sent.
    common::refused(
        common::ratelab().args([
            "net",
            "127.0.0.1",
            "--iperf3",
            "--key-file",
            "k",
            "--no-store",
        ]),
        2,
        &["--key-file"],
    );
}

#[test]
fn a_scenario_and_a_profile_test_the_network_to_an_iperf3_server() {
    let test = "a_scenario_and_a_profile_test_the_network_to_an_iperf3_server";
    if !common::have_or_skip(test, "iperf3") {
        return;
    }
    let (_server, port) = iperf3_server();
    let dir = tempfile::tempdir().unwrap();
    let scenario = dir.path().join("s.toml");
    std::fs::write(
        &scenario,
        format!(
            "[[workload]]\nkind = \"net\"\ntarget = \"127.0.0.1:{port}\"\niperf3 = true\ntime = \"1s\"\nreverse = true\n"
        ),
    )
    .unwrap();
    let doc =
        run_json(
            common::ratelab()
                .arg("run")
                .arg(&scenario)
                .args(["--json", "--no-store", "-q"]),
        );
    let workload = &doc["workloads"][0];
    assert_eq!(doc["status"], "complete", "{doc}");
    assert_eq!(workload["params"]["iperf3"], true);
    assert_eq!(workload["params"]["direction"], "reverse");
    let remote_sent = workload["items"]
        .as_array()
        .unwrap()
        .iter()
        .any(|i| i["side"] == "remote" && i["op"] == "send" && i["bytes"].as_u64() > Some(0));
    assert!(remote_sent, "no remote send item: {workload}");

    let doc = run_json(
        common::ratelab()
            .args(["profile", "--quick", "--iperf3", "--peer"])
            .arg(format!("127.0.0.1:{port}"))
            .arg("--target")
            .arg(dir.path())
            .args(["--json", "--no-store", "-q"]),
    );
    let net = doc["workloads"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["kind"] == "net")
        .expect("a net workload");
    assert_eq!(net["params"]["iperf3"], true, "{net}");
    assert!(net["summary"]["receive"]["bytes_per_sec"].as_f64() > Some(0.0));
}
