//! TCP's own account on every stream: each stream end's items carry what its socket's
//! TCP_INFO says of the test (the sender's busy time and what held it back, the least
//! RTT, the peer's window, bytes sent again), read at each interval's end.

mod common;

use common::net_server::Server;
use common::{ratelab, run_json};
use serde_json::Value;

/// A loopback test of `seconds` against `server` with `extra` flags, not stored.
fn net(server: &Server, extra: &[&str]) -> Value {
    run_json(
        ratelab()
            .args(["net", "127.0.0.1", "-p"])
            .arg(server.address().port().to_string())
            .args(["--json", "--no-store", "-q"])
            .args(extra),
    )
}

/// The items of `scope` (`stream`, `interval`) whose op is `op`, at `side`.
fn items<'a>(doc: &'a Value, scope: &str, op: &str, side: &str) -> Vec<&'a Value> {
    doc["workloads"][0]["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["scope"] == scope && i["op"] == op && i["side"] == side)
        .collect()
}

fn us(item: &Value, field: &str) -> u64 {
    item[field]
        .as_u64()
        .unwrap_or_else(|| panic!("{field}: {item}"))
}

#[test]
fn every_stream_end_says_how_long_its_sender_was_busy_and_what_held_it() {
    // A sender's busy time is timed: not beside the delay line's forwarding threads.
    let _lock = common::rig::exclusive();
    let server = Server::start(&[]);
    // Each way: the client sends, then the server (-R); both ends' items are checked.
    for extra in [&["-t", "1"][..], &["-t", "1", "-R"]] {
        let doc = net(&server, extra);
        assert_eq!(doc["status"], "complete", "{doc}");
        let sender = if extra.contains(&"-R") {
            "remote"
        } else {
            "local"
        };
        let mut ends = Vec::new();
        for side in ["local", "remote"] {
            for op in ["send", "receive"] {
                for stream in items(&doc, "stream", op, side) {
                    check_stream(&doc, extra, stream, op, side);
                    ends.push((side, op));
                }
            }
        }
        assert!(ends.contains(&(sender, "send")), "{extra:?}: {ends:?}");
        assert_eq!(ends.len(), 2, "{extra:?}: {ends:?}");
    }
}

/// The TCP account of one stream end `stream` of `doc`: a sender busy nearly all of its
/// time and held back no longer than that; a receiver never busy.
fn check_stream(doc: &Value, extra: &[&str], stream: &Value, op: &str, side: &str) {
    let busy = us(stream, "busy_us");
    let limited = us(stream, "rwnd_limited_us") + us(stream, "sndbuf_limited_us");
    assert!(us(stream, "min_rtt_us") > 0, "{stream}");
    assert!(us(stream, "snd_wnd_bytes") > 0, "{stream}");
    assert!(limited <= busy, "{extra:?}: {stream}");
    if op == "receive" {
        // A receiver sends ACKs and one message (which test and stream), which TCP
        // counts busy until its ACK comes, in whole clock ticks (CI saw one, 4 ms): no
        // longer than a delayed ACK's 40 ms and a tick.
        assert!(busy <= 50_000, "{extra:?}: {stream}");
        return;
    }
    let seconds = stream["seconds"].as_f64().unwrap();
    // Busy from the first byte to the last, which the stream's time holds; over loopback
    // the sender's own thread keeps its socket fed most of that time.
    assert!(
        busy as f64 >= 0.5e6 * seconds && busy as f64 <= 1.2e6 * seconds,
        "{extra:?}: busy {busy} us in {seconds} s: {stream}"
    );
    eprintln!(
        "{extra:?}, {side} sender: busy {:.3} s of {seconds:.3} s, held by the window {:.3} s and by its buffer {:.3} s",
        busy as f64 / 1e6,
        us(stream, "rwnd_limited_us") as f64 / 1e6,
        us(stream, "sndbuf_limited_us") as f64 / 1e6,
    );
    // The intervals' counts add up to no more than the stream's, which began with the
    // connection.
    let intervals: Vec<&Value> = items(doc, "interval", op, side)
        .into_iter()
        .filter(|i| i["stream"] == stream["stream"])
        .collect();
    assert!(!intervals.is_empty(), "{stream}");
    let sum: u64 = intervals.iter().map(|i| us(i, "busy_us")).sum();
    assert!(
        sum <= busy && sum as f64 >= 0.8 * busy as f64,
        "{sum} against {busy}: {stream}"
    );
}

#[test]
fn a_receiver_with_a_small_buffer_on_a_long_path_holds_the_sender_by_its_window() {
    let test = "a_receiver_with_a_small_buffer_on_a_long_path_holds_the_sender_by_its_window";
    if !common::root_or_skip(test, "it builds network namespaces and TUN devices") {
        return;
    }
    if std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/net/tun")
        .is_err()
    {
        common::skip(test, "/dev/net/tun cannot be opened here");
        return;
    }
    let _lock = common::rig::exclusive();
    let line = common::delay_line::DelayLine::new(std::time::Duration::from_millis(10), 0.0, 1500);
    // Cubic, whose window alone holds a sender with no loss: BBR paces below the window
    // by its own estimate of the path, and on CI it held ratelab to 0.78 and iperf3 to
    // 0.89 of what the window allows.
    let allowed = common::delay_line::Allowed::add("cubic");
    line.congestion(&allowed, "cubic");
    // The receiver's TCP may buffer 64 KiB at most: its window about 40 KB, at 20 ms a
    // round trip about 2 MB/s.
    line.sysctl(&line.server, "net.ipv4.tcp_rmem", "4096 65536 65536");
    let mut server = common::netns::serve_ratelab_in(&line.server, &line.server_address, 5301, &[]);
    // The delay line is the test's own threads: where other work takes the CPUs, the
    // round trip grows past the line's, and ratelab's account says so.
    common::up_to_three_tries(test, |_| {
        let load = common::load::Load::start();
        let doc = run_json(
            line.run_in(&line.client, common::bin())
                .args(["net", &line.server_address, "-t", "3"])
                .args(["--json", "--no-store", "-q"]),
        );
        let peer = iperf3_over(&line);
        assert_eq!(doc["status"], "complete", "{doc}");
        let stream = items(&doc, "stream", "send", "local")[0].clone();
        common::check(load.disturbed(), || {
            held_by_the_window(test, &stream, peer);
            common::Try::Checked
        })
    });
    let _ = server.kill();
    let _ = server.wait();
}

/// iperf3's received rate over `line` in 3 s, bytes per second, for comparison.
fn iperf3_over(line: &common::delay_line::DelayLine) -> f64 {
    let mut iperf3 = line
        .run_in(&line.server, "iperf3")
        .args(["-s", "-1", "-p", "5201"])
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("start iperf3 -s");
    std::thread::sleep(std::time::Duration::from_millis(500));
    let theirs = common::json(
        &line
            .run_in(&line.client, "iperf3")
            .args(["-c", &line.server_address, "-p", "5201", "-t", "3", "-J"])
            .output()
            .unwrap()
            .stdout,
    );
    let _ = iperf3.wait();
    let peer = theirs["end"]["sum_received"]["bits_per_second"]
        .as_f64()
        .unwrap()
        / 8.0;
    eprintln!("iperf3 on the same line: {:.2} MB/s received", peer / 1e6);
    peer
}

/// The sender's stream end `stream`, beside iperf3's rate `peer`: held by the window most
/// of its busy time, at what the window allows over the line's round trip.
fn held_by_the_window(test: &str, stream: &Value, peer: f64) {
    let (busy, rwnd) = (us(stream, "busy_us"), us(stream, "rwnd_limited_us"));
    let rate = stream["bytes_per_sec"].as_f64().unwrap();
    // What the window allows: the peer's window over the least round trip, the line's
    // own (the smoothed one at the end moves with one sample).
    let window = us(stream, "snd_wnd_bytes") as f64 / (us(stream, "min_rtt_us") as f64 / 1e6);
    eprintln!(
        "{test}: {:.2} MB/s, sender busy {:.2} s, window-limited {:.2} s ({:.0}%); window {} B over min rtt {} us (rtt {} us at the end) = {:.2} MB/s, {:.3}x the rate",
        rate / 1e6,
        busy as f64 / 1e6,
        rwnd as f64 / 1e6,
        100.0 * rwnd as f64 / busy as f64,
        us(stream, "snd_wnd_bytes"),
        us(stream, "min_rtt_us"),
        us(stream, "rtt_us"),
        window / 1e6,
        window / rate
    );
    assert!(us(stream, "min_rtt_us") >= 20_000, "{stream}");
    // The window held the sender most of its busy time (98% here), and the rate is what
    // the window allows (above it only by how the window moved), as iperf3's on the same
    // line is.
    assert!(rwnd as f64 >= 0.5 * busy as f64, "{stream}");
    assert!((0.85..=1.10).contains(&(rate / window)), "{stream}");
    assert!(rate / peer >= 0.9, "ratelab {rate} B/s, iperf3 {peer} B/s");
}
