//! iperf3's UDP test served by `ratelab net serve` to the real `iperf3 -c -u`, Debian's
//! 3.12 and the newest release: forward, -R, --bidir, -P with 64-bit counts and a test
//! of bytes complete with iperf3's own output, and the receiver's datagrams, loss and
//! jitter the client prints are the ones ratelab stored; on a veth shaped to 200
//! Mbit/s, a test at half the link is carried whole at the rate asked and one at 1.5
//! times the link loses a third, as `iperf3 -s` on the same link says; and a datagram
//! size past 65507 bytes is refused before any datagram, in iperf3's words.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Output;
use std::time::Duration;

use common::iperf3_peers::{self, Iperf3};
use common::net_server::Server;
use common::{json, wait_stored};

/// The stored receiving stream ends' datagrams of `stored`, summed: received, lost,
/// highest count, and their mean jitter in seconds.
fn received(stored: &serde_json::Value) -> (u64, u64, u64, f64) {
    let ends: Vec<&serde_json::Value> = stored["workloads"][0]["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["scope"] == "stream" && i["op"] == "receive")
        .collect();
    let sum = |key: &str| {
        ends.iter()
            .map(|i| i["datagrams"][key].as_u64().unwrap())
            .sum()
    };
    let jitter = ends
        .iter()
        .map(|i| i["datagrams"]["jitter_s"].as_f64().unwrap())
        .sum::<f64>()
        / ends.len() as f64;
    (sum("count"), sum("lost"), sum("highest"), jitter)
}

fn run(iperf3: &Iperf3, port: u16, args: &[&str]) -> Output {
    let output = iperf3
        .command()
        .args(["-c", "127.0.0.1", "-p", &port.to_string(), "-J"])
        .args(args)
        .output()
        .expect("run iperf3 -c");
    assert!(
        output.status.success(),
        "iperf3 {} -c {args:?}: {}",
        iperf3.version,
        String::from_utf8_lossy(&output.stdout)
    );
    output
}

#[test]
fn every_release_runs_its_udp_tests_against_net_serve_and_is_told_what_was_stored() {
    let test = "every_release_runs_its_udp_tests_against_net_serve_and_is_told_what_was_stored";
    let releases = iperf3_peers::both_or_skip(test);
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("udp.db");
    let server = Server::start(&["--db", db.to_str().unwrap()]);
    let port = server.address().port();
    let mut id = 0;
    for iperf3 in &releases {
        for args in [
            &["-u", "-b", "40M", "-t", "2"][..],
            &["-u", "-b", "40M", "-t", "2", "-R"],
            &["-u", "-b", "20M", "-t", "2", "--bidir"],
            &[
                "-u",
                "-b",
                "10M",
                "-t",
                "2",
                "-P",
                "3",
                "--udp-counters-64bit",
            ],
            &["-u", "-b", "40M", "-n", "4M", "-l", "1400"],
        ] {
            let what = format!("iperf3 {} -c -u {args:?}", iperf3.version);
            let doc = json(&run(iperf3, port, args).stdout);
            id += 1;
            let stored = wait_stored(&db, id);
            assert_eq!(stored["status"], "complete", "{what}: {stored}");
            assert!(
                stored["workloads"][0]["params"]["udp"].is_object(),
                "{what}: {stored}"
            );
            let (count, lost, highest, jitter) = received(&stored);
            // What iperf3 printed of the receivers: ratelab's own counts where ratelab
            // received, and in -R what iperf3 received is what ratelab stored of it.
            let end = &doc["end"];
            // iperf3's UDP `sum` counts the bytes sent; `sum_received` those received.
            let sums = if args.contains(&"--bidir") {
                vec![&end["sum_received"], &end["sum_received_bidir_reverse"]]
            } else {
                vec![&end["sum_received"]]
            };
            let printed_lost: u64 = sums
                .iter()
                .map(|s| s["lost_packets"].as_u64().unwrap())
                .sum();
            assert_eq!(printed_lost, lost, "{what}: lost, iperf3 said {sums:?}");
            let printed_jitter = sums
                .iter()
                .map(|s| s["jitter_ms"].as_f64().unwrap())
                .sum::<f64>()
                / sums.len() as f64;
            assert!(
                (printed_jitter - jitter * 1e3).abs() <= 1e-6 + 1e-3 * printed_jitter,
                "{what}: jitter {printed_jitter} ms printed, {} ms stored",
                jitter * 1e3
            );
            assert!(
                count <= highest && count + lost >= highest,
                "{what}: {count} {lost} {highest}"
            );
            assert!(count > 0, "{what}: nothing received");
            // The stored headline is the receivers' bytes, as iperf3's receiver line.
            let stored_bits = stored["workloads"][0]["summary"]["receive"]["bytes_per_sec"]
                .as_f64()
                .unwrap()
                * 8.0;
            let printed_bits: f64 = sums
                .iter()
                .map(|s| s["bits_per_second"].as_f64().unwrap())
                .sum();
            assert!(
                (stored_bits / printed_bits - 1.0).abs() <= 0.01,
                "{what}: stored {stored_bits} bit/s, iperf3 printed {printed_bits}"
            );
            eprintln!(
                "{what}: received {:.2} Mbit/s stored, {:.2} printed; lost {lost} of {highest}; jitter {:.3} ms",
                stored_bits / 1e6,
                printed_bits / 1e6,
                jitter * 1e3
            );
        }
    }
}

#[test]
fn a_udp_datagram_past_65507_bytes_is_refused_before_any_datagram_in_iperf3s_words() {
    let server = Server::start(&["--no-store"]);
    let mut control = TcpStream::connect(server.address()).unwrap();
    control
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    control
        .write_all(b"abcdefghijklmnopqrstuvwxyz2345672345\0")
        .unwrap();
    let mut state = [0u8; 1];
    control.read_exact(&mut state).unwrap();
    assert_eq!(state[0], 9, "PARAM_EXCHANGE");
    let params = br#"{"udp":true,"time":2,"parallel":1,"len":70000,"bandwidth":1048576}"#;
    control
        .write_all(&(params.len() as u32).to_be_bytes())
        .unwrap();
    control.write_all(params).unwrap();
    let mut answer = [0u8; 9];
    control.read_exact(&mut answer).unwrap();
    assert_eq!(answer[0] as i8, -2, "SERVER_ERROR");
    assert_eq!(
        i32::from_be_bytes(answer[1..5].try_into().unwrap()),
        20,
        "IEUDPBLOCKSIZE"
    );
    // No UDP socket was bound for it: the port answers no datagram.
    let probe = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    probe.connect(server.address()).unwrap();
    probe
        .set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    probe.send(b"9876").unwrap();
    let mut reply = [0u8; 4];
    assert!(
        probe.recv(&mut reply).is_err(),
        "a UDP reply came: {reply:?}"
    );
}

#[test]
fn on_a_200_mbit_link_half_is_carried_whole_and_one_and_a_half_loses_a_third() {
    let test = "on_a_200_mbit_link_half_is_carried_whole_and_one_and_a_half_loses_a_third";
    if !common::root_or_skip(
        test,
        "it builds network namespaces, a veth pair and tbf qdiscs",
    ) {
        return;
    }
    let releases = iperf3_peers::both_or_skip(test);
    let _lock = common::rig::exclusive();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("udp.db");
    // Shaped between the hosts: a sender shaped at its own interface is held to the
    // rate by its own queue (its socket waits), and loses nothing.
    let mut link = common::netns::Link::through_bridge(1500, 1500, 1500);
    link.shape_bridge("200mbit");
    link.serve_ratelab_with(5311, &["--iperf3", "--db", db.to_str().unwrap()]);
    let mut id = 0;
    for (index, iperf3) in releases.iter().enumerate() {
        let iperf3_port = 5312 + index as u16;
        link.serve_iperf3_with(&iperf3.path, iperf3_port);
        for (rate, reverse) in [
            ("100M", false),
            ("100M", true),
            ("300M", false),
            ("300M", true),
        ] {
            let mut args = vec!["-u", "-b", rate, "-t", "4"];
            if reverse {
                args.push("-R");
            }
            let what = format!("iperf3 {} -c {args:?} on a 200 Mbit/s veth", iperf3.version);
            let receiver = |port: u16| {
                // Each test finds the link idle and its token bucket full (2 MB, 80 ms
                // to fill again), as the other did: the first of two run back to back
                // would carry its burst and the second a part of it.
                std::thread::sleep(Duration::from_millis(500));
                let output = link
                    .in_client(&iperf3.path)
                    .args(["-c", &link.server_address, "-p", &port.to_string(), "-J"])
                    .args(&args)
                    .output()
                    .unwrap();
                let doc = json(&output.stdout);
                assert!(doc.get("error").is_none(), "{what}: {doc}");
                let sum = doc["end"]["sum_received"].clone();
                (
                    sum["bits_per_second"].as_f64().unwrap(),
                    sum["lost_percent"].as_f64().unwrap() / 100.0,
                )
            };
            common::up_to_three_tries(&what, |_| {
                let load = common::load::Load::start();
                let (theirs, theirs_lost) = receiver(iperf3_port);
                let (ours, ours_lost) = receiver(5311);
                id += 1;
                let stored = wait_stored(&db, id);
                assert_eq!(stored["status"], "complete", "{what}: {stored}");
                let share = stored["workloads"][0]["summary"]["receive"]["datagrams"]["lost_share"]
                    .as_f64()
                    .unwrap();
                assert!(
                    (share - ours_lost).abs() < 1e-3,
                    "{what}: stored {share}, printed {ours_lost}"
                );
                eprintln!(
                    "{what}: iperf3 -s received {:.1} Mbit/s, lost {:.1}%; ratelab {:.1} Mbit/s, lost {:.1}%",
                    theirs / 1e6,
                    theirs_lost * 100.0,
                    ours / 1e6,
                    ours_lost * 100.0
                );
                common::check(load.disturbed(), || {
                    assert!(
                        (ours / theirs - 1.0).abs() <= 0.02,
                        "{what}: ratio {:.4}",
                        ours / theirs
                    );
                    if rate == "100M" {
                        assert!((ours / 100e6 - 1.0).abs() <= 0.02, "{what}: {ours} bit/s");
                        assert!(ours_lost < 0.01 && theirs_lost < 0.01, "{what}: lost");
                    } else {
                        for lost in [ours_lost, theirs_lost] {
                            assert!((lost - 1.0 / 3.0).abs() <= 0.05, "{what}: lost {lost}");
                        }
                    }
                    common::Try::Checked
                })
            });
        }
    }
}
