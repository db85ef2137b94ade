//! `ratelab net serve` speaking iperf3's protocol to the real `iperf3 -c` (Debian's
//! 3.12): forward, -R, -P 4 and --bidir tests complete with iperf3's own output and
//! JSON, and iperf3's receiver figure is the one ratelab stored for the same test; a
//! server at its bounds answers in iperf3's words (busy, too many streams, too long),
//! never with a hang; and garbage, silence and trickling in iperf3's framing are cut
//! off while the server serves on.

mod common;

use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::net_server::{PATIENCE, Server, wait_closed};
use common::{json, ratelab, run_json};

/// iperf3 -c against `server` with `args`; must end within `limit`.
fn iperf3(server: &Server, args: &[&str], limit: Duration) -> Output {
    let mut child = Command::new("iperf3")
        .args([
            "-c",
            "127.0.0.1",
            "-p",
            &server.address().port().to_string(),
        ])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start iperf3 -c");
    let started = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("iperf3 -c {args:?} still running after {limit:?}: the server hung it");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

fn text(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

#[test]
fn iperf3_clients_run_their_tests_and_ratelab_stores_the_same_receiver_figure() {
    let test = "iperf3_clients_run_their_tests_and_ratelab_stores_the_same_receiver_figure";
    if !common::have_or_skip(test, "iperf3") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("served.db");
    let mut server = Server::start(&["--db", db.to_str().unwrap()]);
    let cases: [&[&str]; 4] = [&[], &["-R"], &["-P", "4"], &["--bidir"]];
    for (index, args) in cases.iter().enumerate() {
        let output = iperf3(
            &server,
            &[&["-t", "2", "-J"], *args].concat(),
            Duration::from_secs(20),
        );
        assert!(output.status.success(), "{args:?}: {}", text(&output));
        let doc = json(&output.stdout);
        assert!(doc.get("error").is_none(), "{args:?}: {doc}");
        let end = &doc["end"];
        let id = (index + 1).to_string();
        server.wait_for_line(&[&format!("stored as run {id} ")]);
        let stored = run_json(
            ratelab()
                .args(["results", "show", &id, "--json", "--db"])
                .arg(&db),
        );
        assert_eq!(stored["status"], "complete");
        let summary = &stored["workloads"][0]["summary"];
        // For --bidir, iperf3's first figure is the client's sending streams (up),
        // the second its receiving streams (down).
        let pairs = if *args == ["--bidir"] {
            vec![
                (&end["sum_received"], &summary["up"]["receive"]),
                (
                    &end["sum_received_bidir_reverse"],
                    &summary["down"]["receive"],
                ),
            ]
        } else {
            vec![(&end["sum_received"], &summary["receive"])]
        };
        for (theirs, ours) in pairs {
            let theirs_bits = theirs["bits_per_second"].as_f64().unwrap();
            let ours_bits = ours["bytes_per_sec"].as_f64().unwrap() * 8.0;
            eprintln!(
                "iperf3 -c {args:?}: iperf3's receiver {:.3} Gbit/s, ratelab stored {:.3} Gbit/s, ratio {:.4}",
                theirs_bits / 1e9,
                ours_bits / 1e9,
                ours_bits / theirs_bits
            );
            assert!(
                (ours_bits / theirs_bits - 1.0).abs() <= 0.01,
                "{args:?}: iperf3 {theirs} against stored {ours}"
            );
        }
    }
    // iperf3's text output, and a ratelab client, are served as before.
    let output = iperf3(&server, &["-t", "1"], Duration::from_secs(20));
    assert!(
        text(&output).contains("receiver") && text(&output).contains("iperf Done"),
        "{}",
        text(&output)
    );
    run_json(
        ratelab()
            .args(["net", "127.0.0.1", "-t", "1", "--json", "--no-store", "-p"])
            .arg(server.address().port().to_string()),
    );
    server.assert_alive();
}

#[test]
fn a_server_at_its_bounds_answers_iperf3_in_its_own_words() {
    let test = "a_server_at_its_bounds_answers_iperf3_in_its_own_words";
    if !common::have_or_skip(test, "iperf3") {
        return;
    }
    let mut server = Server::start(&["--no-store", "--max-streams", "4", "--max-duration", "5s"]);
    let said = |args: &[&str], expect: &str| {
        let output = iperf3(&server, args, Duration::from_secs(15));
        let all = text(&output);
        assert!(
            all.contains(expect),
            "iperf3 -c {args:?}: {expect:?} missing from {all}"
        );
    };
    said(&["-P", "8", "-t", "1"], "parallel streams too large");
    said(&["-t", "60"], "test duration too long");
    said(&["-u", "-t", "1"], "not implemented");

    // A second client while a test runs hears busy, at once.
    let mut running = Command::new("iperf3")
        .args([
            "-c",
            "127.0.0.1",
            "-p",
            &server.address().port().to_string(),
            "-t",
            "3",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(700));
    let started = Instant::now();
    said(&["-t", "1"], "busy");
    assert!(started.elapsed() < Duration::from_secs(3));
    assert!(running.wait().unwrap().success());
    server.assert_alive();
    // A key on the server turns iperf3 clients away, unless --iperf3 lets them in.
    let key = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(key.path(), "11".repeat(32)).unwrap();
    let keyed = Server::start(&["--no-store", "--key-file", key.path().to_str().unwrap()]);
    let output = iperf3(&keyed, &["-t", "1"], Duration::from_secs(10));
    assert!(
        text(&output).contains("authorization failed"),
        "{}",
        text(&output)
    );
    let open = Server::start(&[
        "--no-store",
        "--iperf3",
        "--key-file",
        key.path().to_str().unwrap(),
    ]);
    let output = iperf3(&open, &["-t", "1"], Duration::from_secs(10));
    assert!(output.status.success(), "{}", text(&output));
}

/// The cookie an iperf3 client opens with.
const COOKIE: &[u8; 37] = b"abcdefghijklmnopqrstuvwxyz234567abcd\0";

fn frame(body: &[u8]) -> Vec<u8> {
    let mut frame = (body.len() as u32).to_be_bytes().to_vec();
    frame.extend_from_slice(body);
    frame
}

#[test]
fn garbage_silence_and_trickling_in_iperf3s_framing_are_cut_off_and_the_server_serves_on() {
    let mut server = Server::start(&["--no-store", "--idle-timeout", "1s"]);
    let connect = || {
        let stream = TcpStream::connect_timeout(&server.address(), PATIENCE).unwrap();
        stream.set_nodelay(true).unwrap();
        stream
    };
    let params = br#"{"tcp":true,"omit":0,"time":1,"num":0,"blockcount":0,"parallel":1,"len":131072,"pacing_timer":1000,"client_version":"3.12"}"#;
    // (what, bytes sent after connecting, whether the sender then closes its half,
    // what the server answers before it closes).
    let cases: Vec<(&str, Vec<u8>, bool, Vec<u8>)> = vec![
        (
            "a cookie, then garbage JSON",
            [&COOKIE[..], &frame(b"{\"tcp\": tru")].concat(),
            true,
            vec![9],
        ),
        (
            "a cookie, then a 4 GiB length",
            [&COOKIE[..], b"\xff\xff\xff\xff{"].concat(),
            true,
            vec![9],
        ),
        (
            "a cookie, then an empty message",
            [&COOKIE[..], &frame(b"")].concat(),
            true,
            vec![9],
        ),
        ("a cookie cut short", COOKIE[..20].to_vec(), true, vec![]),
        (
            "a cookie without its NUL",
            [&COOKIE[..36], b"x"].concat(),
            true,
            vec![],
        ),
        ("a cookie, then silence", COOKIE.to_vec(), false, vec![9]),
        (
            "a UDP test",
            [
                &COOKIE[..],
                &frame(br#"{"udp":true,"time":1,"parallel":1,"len":1400}"#),
            ]
            .concat(),
            true,
            [&[9u8, 0xfe][..], &13i32.to_be_bytes(), &0i32.to_be_bytes()].concat(),
        ),
        (
            "parameters, then no streams",
            [&COOKIE[..], &frame(params)].concat(),
            false,
            vec![9, 10],
        ),
    ];
    for (what, bytes, close, answer) in cases {
        let mut stream = connect();
        stream.write_all(&bytes).unwrap();
        if close {
            let _ = stream.shutdown(Shutdown::Write);
        }
        let (took, reply) = wait_closed(&mut stream, what, Duration::from_secs(4));
        assert_eq!(reply, answer, "{what}: answered {reply:?}");
        if !close {
            assert!(
                took >= Duration::from_millis(800),
                "{what}: cut off after {took:?}, before the idle timeout"
            );
        }
    }
    // Parameters trickled a byte every 300 ms are cut off by the idle timeout.
    let mut stream = connect();
    stream.write_all(COOKIE).unwrap();
    let started = Instant::now();
    let mut state = [0u8; 1];
    stream.read_exact(&mut state).unwrap();
    assert_eq!(state, [9]);
    for byte in frame(params) {
        if stream.write_all(&[byte]).is_err() {
            break;
        }
        std::thread::sleep(Duration::from_millis(300));
        assert!(
            started.elapsed() < Duration::from_secs(4),
            "trickled parameters were not cut off"
        );
        let mut probe = [0u8; 1];
        stream
            .set_read_timeout(Some(Duration::from_millis(1)))
            .unwrap();
        if matches!(stream.read(&mut probe), Ok(0)) {
            break;
        }
    }
    assert!(started.elapsed() >= Duration::from_millis(800));
    // Mid-test, an unknown state byte ends the test; the server serves on.
    let mut stream = connect();
    stream.write_all(COOKIE).unwrap();
    stream.write_all(&frame(params)).unwrap();
    let mut got = [0u8; 2];
    stream.read_exact(&mut got).unwrap();
    assert_eq!(got, [9, 10]);
    let mut data = connect();
    data.write_all(COOKIE).unwrap();
    let mut started_bytes = [0u8; 2];
    stream.read_exact(&mut started_bytes).unwrap();
    assert_eq!(started_bytes, [1, 2]);
    data.write_all(&[0u8; 65536]).unwrap();
    stream.write_all(&[7]).unwrap();
    let (_, reply) = wait_closed(
        &mut stream,
        "a test sent state byte 7",
        Duration::from_secs(4),
    );
    assert!(reply.is_empty(), "{reply:?}");
    drop(data);
    server.wait_for_line(&["sent state byte 7"]);

    if common::have("iperf3") {
        let output = iperf3(&server, &["-t", "1"], Duration::from_secs(15));
        assert!(output.status.success(), "{}", text(&output));
    }
    server.assert_alive();
}

#[test]
fn ctrl_c_on_the_server_tells_the_iperf3_client_it_terminated() {
    let test = "ctrl_c_on_the_server_tells_the_iperf3_client_it_terminated";
    if !common::have_or_skip(test, "iperf3") {
        return;
    }
    let mut server = Server::start(&["--no-store"]);
    let client = Command::new("iperf3")
        .args([
            "-c",
            "127.0.0.1",
            "-p",
            &server.address().port().to_string(),
        ])
        .args(["-t", "10"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start iperf3 -c");
    // Well into the test.
    std::thread::sleep(Duration::from_millis(1500));
    let (status, took) = server.stop_with(rustix::process::Signal::INT, Duration::from_secs(5));
    assert_eq!(status.code(), Some(130));
    assert!(took < Duration::from_secs(3), "{took:?}");
    let output = client.wait_with_output().unwrap();
    assert!(
        text(&output).contains("the server has terminated"),
        "{}",
        text(&output)
    );
}
