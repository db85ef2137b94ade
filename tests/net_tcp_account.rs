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
        // A receiver sends only ACKs: TCP never counts it busy.
        assert_eq!(busy, 0, "{extra:?}: {stream}");
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
