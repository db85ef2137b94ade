//! ratelab speaking iperf3's protocol: `net HOST --iperf3` against the real `iperf3 -s`.
//! On a shaped veth between two namespaces its receiver figure must agree with `iperf3
//! -c`'s on the same link in the same test, and with the link's goodput limit; on
//! loopback, against the newest release built from its source, forward, -R, -P 8,
//! --bidir, -P 4 --bidir, -n, -R -C reno and -R --fq-rate complete with both ends
//! agreeing stream by stream, a server's --server-max-duration and its credentials are
//! met in words, and a busy iperf3 server and a server that is not iperf3's are named,
//! and ratelab's own server answers the iperf3 client as well.

mod common;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::iperf3_peers::{self, Credentials, assert_streams_agree};
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
    for (mtu, rate, rate_bits) in [(1500, "2gbit", 2e9), (9000, "4gbit", 4e9)] {
        let mut link = Link::new(mtu, rate);
        link.serve_iperf3(IPERF3_PORT);
        let mss = f64::from(mtu - 52);
        let limit_bits = rate_bits * mss / f64::from(mtu + 14);
        for args in [&[][..], &["-R"], &["-P", "2"]] {
            common::up_to_three_tries(&format!("{test}, MTU {mtu}, {args:?}"), |_| {
                let load = common::load::Load::start();
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
                // Beside other work on two cores the link is not what limits: the test's
                // own count of other work says so. Where the peer met the link, ratelab
                // meets both the link and the peer. Where the peer itself fell short of
                // the link, in its own run after ratelab's, ratelab meets the link or,
                // where the rig did not give its rate, the peer. What ratelab's own limit
                // names excuses nothing.
                common::check(load.disturbed(), || {
                    let peer_met_the_link = theirs / limit_bits >= 0.97;
                    let agree = (ours / theirs - 1.0).abs() <= 0.03;
                    let met_the_link = (0.97..=1.03).contains(&(ours / limit_bits));
                    assert!(ours / limit_bits <= 1.03, "{line}");
                    if peer_met_the_link {
                        assert!(agree && met_the_link, "{line}");
                    } else {
                        assert!(agree || met_the_link, "{line}");
                        common::say(&format!(
                            "{test}: iperf3 itself fell short of the link, so ratelab was held to the link or to iperf3's figure: {line}"
                        ));
                    }
                    common::Try::Checked
                })
            });
        }
    }
}

/// A process killed when the test ends, however it ends.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Debian's iperf3 server on a free loopback port, with the port.
fn iperf3_server() -> (Killed, u16) {
    iperf3_server_of(Path::new("iperf3"), &[])
}

/// `program -s` with `extra` options on a free loopback port, with the port.
fn iperf3_server_of(program: &Path, extra: &[&str]) -> (Killed, u16) {
    let port = {
        let probe = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        probe.local_addr().unwrap().port()
    };
    let child = Killed(
        Command::new(program)
            .args(["-s", "-B", "127.0.0.1", "-p", &port.to_string()])
            .args(extra)
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
    // A profile is a load of its own: the rate tests of this file, which judge what
    // other work took from them, run apart from it (seen: every try of the shaped-link
    // test disturbed by this test's ratelab).
    let _lock = rig::exclusive();
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

/// Waits as a client of iperf 3.21 or later must between tests: such a server closes
/// and opens its listener again after each, and cuts off a client that comes meanwhile.
fn settle() {
    std::thread::sleep(Duration::from_millis(1000));
}

#[test]
fn net_iperf3_runs_its_tests_against_the_newest_iperf3_s_and_both_ends_agree() {
    let test = "net_iperf3_runs_its_tests_against_the_newest_iperf3_s_and_both_ends_agree";
    let Some(newest) = iperf3_peers::newest_or_skip(test) else {
        return;
    };
    let _lock = rig::exclusive();
    let (_server, port) = iperf3_server_of(&newest.path, &[]);
    let cases: [&[&str]; 8] = [
        &["-t", "3"],
        &["-t", "3", "-R"],
        &["-t", "3", "-P", "8"],
        &["-t", "3", "--bidir"],
        &["-t", "3", "-P", "4", "--bidir"],
        &["-n", "1G"],
        &["-t", "3", "-R", "-C", "reno"],
        &["-t", "3", "-R", "--fq-rate", "2Gbit/s"],
    ];
    for args in cases {
        let what = format!("net --iperf3 {args:?} to iperf3 {}", newest.version);
        common::up_to_three_tries(&format!("{test}: {what}"), |_| {
            let load = common::load::Load::start();
            let doc = run_json(
                common::ratelab()
                    .args(["net", "127.0.0.1", "--iperf3", "-p", &port.to_string()])
                    .args(args)
                    .args(["--json", "--no-store", "-q"]),
            );
            assert_eq!(doc["status"], "complete", "{what}: {doc}");
            // Names and counts no busy CPU moves, checked every try.
            let workload = &doc["workloads"][0];
            if args.contains(&"reno") {
                let congestion: Vec<&serde_json::Value> = workload["items"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .filter(|i| i["scope"] == "stream")
                    .map(|i| &i["congestion"])
                    .collect();
                // Both ends said reno: the server's sender, as its results name it.
                assert!(
                    congestion.iter().all(|c| *c == "reno"),
                    "{what}: {congestion:?}"
                );
            }
            if args.contains(&"-n") {
                // A test of bytes ends once the server's TCP has them all: it counted each.
                let sum = &workload["summary"]["receive"];
                assert_eq!(sum["bytes"], 1u64 << 30, "{what}: {sum}");
            }
            // Rates, and what a sender wrote that its receiver had not read when the
            // clock ended, move with the CPUs: beside other work the ends get less.
            common::check(load.disturbed(), || {
                let server_sends = args.contains(&"-R") || args.contains(&"--bidir");
                let worst = assert_streams_agree(
                    &what,
                    &doc,
                    if server_sends {
                        iperf3_peers::buffers()
                    } else {
                        0
                    },
                );
                let received = workload["summary"]["receive"]["bytes_per_sec"]
                    .as_f64()
                    .unwrap()
                    * 8.0;
                eprintln!(
                    "{what}: received {:.3} Gbit/s, both ends within {:.3}% stream by stream",
                    received / 1e9,
                    100.0 * worst
                );
                if args.contains(&"--fq-rate") {
                    iperf3_peers::assert_paced(&what, received, 2e9);
                }
                common::Try::Checked
            })
        });
        settle();
    }
}

#[test]
fn an_iperf3_server_with_a_maximum_duration_or_credentials_is_met_in_words() {
    let test = "an_iperf3_server_with_a_maximum_duration_or_credentials_is_met_in_words";
    let Some(newest) = iperf3_peers::newest_or_skip(test) else {
        return;
    };
    let _lock = rig::exclusive();
    let net = |port: u16, args: &[&str]| {
        let mut command = common::ratelab();
        command
            .args([
                "net",
                "127.0.0.1",
                "--iperf3",
                "--no-store",
                "-p",
                &port.to_string(),
            ])
            .args(args);
        command
    };
    // iperf 3.20 and later bound a test's time; they refuse any test of bytes.
    let (_bounded, port) = iperf3_server_of(&newest.path, &["--server-max-duration", "5"]);
    common::refused(
        &mut net(port, &["-t", "10"]),
        3,
        &["longer than the server allows (its --server-max-duration) (iperf3 error 37)"],
    );
    settle();
    common::refused(
        &mut net(port, &["-n", "10M"]),
        3,
        &["refuses every test of bytes (-n); give a time (-t) instead"],
    );
    settle();
    let doc = run_json(&mut net(port, &["-t", "2", "--json", "-q"]));
    assert_eq!(doc["status"], "complete", "{doc}");
    settle();
    if !newest.authenticates {
        common::skip(test, "the newest iperf3 was built without authentication");
        return;
    }
    let credentials = Credentials::make();
    let server_args = credentials.server_args();
    let server_args: Vec<&str> = server_args.iter().map(String::as_str).collect();
    let (_checking, port) = iperf3_server_of(&newest.path, &server_args);
    let login = |password: Option<&str>| {
        let mut command = net(port, &["-t", "1", "--json", "-q"]);
        command
            .args(["--username", "mario", "--rsa-public-key-path"])
            .arg(credentials.path("public.pem"));
        match password {
            Some(password) => command.env("IPERF3_PASSWORD", password),
            None => command.env_remove("IPERF3_PASSWORD").stdin(Stdio::null()),
        };
        command
    };
    let doc = run_json(&mut login(Some("rossi")));
    assert_eq!(doc["status"], "complete", "{doc}");
    settle();
    let output = login(Some("verdi")).output().unwrap();
    let said = String::from_utf8_lossy(&output.stderr).into_owned();
    assert_eq!(output.status.code(), Some(3), "{said}");
    assert!(
        said.contains("the server may have refused the credentials of --username"),
        "{said}"
    );
    assert!(!said.contains("verdi"), "{said}");
    common::refused(&mut login(None), 2, &["IPERF3_PASSWORD"]);
    settle();
    // Without credentials, the same words.
    common::refused(
        &mut net(port, &["-t", "1"]),
        3,
        &["it may check credentials (--username)"],
    );
}
