//! `ratelab net serve` stopped by SIGTERM or Ctrl-C while a test runs: it tells the
//! client why before it exits 130, so the client stores its run as incomplete with the
//! server's stop as the reason and exits 3 (its peer went away, as for any peer that
//! fails mid-test). A test still waiting for its client's go hears it too; a client of
//! an older build, which does not know that message, only sees the connection close, as
//! it always did.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Output, Stdio};
use std::time::{Duration, Instant};

use common::net_server::{PATIENCE, Server};
use common::{json, ratelab, results, stored_run, stored_runs};
use rustix::process::Signal;

/// How soon the server must exit once signalled: its tests stop within a tenth of a second.
const PROMPT: Duration = Duration::from_secs(3);

/// Established TCP connections whose local port is `port`: the server's ends of a
/// test's control and data connections, counted without touching them.
fn established_at(port: u16) -> usize {
    ["/proc/net/tcp", "/proc/net/tcp6"]
        .iter()
        .filter_map(|table| std::fs::read_to_string(table).ok())
        .map(|text| {
            text.lines()
                .skip(1)
                .filter(|line| {
                    let fields: Vec<&str> = line.split_whitespace().collect();
                    // Local address (hex ip:port), then the state: 01 is ESTABLISHED.
                    fields.len() > 3
                        && fields[3] == "01"
                        && fields[1]
                            .rsplit(':')
                            .next()
                            .and_then(|p| u16::from_str_radix(p, 16).ok())
                            == Some(port)
                })
                .count()
        })
        .sum()
}

/// Waits until a test with `connections` connections runs on `server`, then a little
/// more, so a signal lands mid-test.
fn wait_for_test(server: &Server, connections: usize) {
    let started = Instant::now();
    while established_at(server.address().port()) < connections {
        assert!(
            started.elapsed() < PATIENCE,
            "no test started on the server:\n{}",
            server.log().join("\n")
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    std::thread::sleep(Duration::from_millis(500));
}

/// Waits up to `limit` for `child` to end, reading its output as it goes.
fn finish_within(mut child: Child, limit: Duration) -> Output {
    let drain = |mut pipe: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            let _ = pipe.read_to_end(&mut bytes);
            bytes
        })
    };
    let stdout = drain(Box::new(child.stdout.take().unwrap()));
    let stderr = drain(Box::new(child.stderr.take().unwrap()));
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the client still runs {limit:?} after the server stopped");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    Output {
        status,
        stdout: stdout.join().unwrap(),
        stderr: stderr.join().unwrap(),
    }
}

/// A client test of 8 s storing in a fresh database; the server is stopped by `signal`
/// a moment into it.
fn stop_mid_test(signal: Signal) {
    let mut server = Server::start(&[]);
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("results.db");
    let client = ratelab()
        .args([
            "net",
            "127.0.0.1",
            "-p",
            &server.address().port().to_string(),
        ])
        .args(["-t", "8", "--json", "-q", "--db"])
        .arg(&db)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the client");
    wait_for_test(&server, 2);

    let (status, took) = server.stop_with(signal, PATIENCE);
    eprintln!("the server exited {status} {took:?} after {signal:?}");
    assert_eq!(status.code(), Some(130), "{}", server.log().join("\n"));
    assert!(took < PROMPT, "the server took {took:?} to exit");
    let log = server.log().join("\n");
    assert!(
        log.contains("closed: the server is stopping (the client was told)")
            && log.contains("interrupted: stopped"),
        "{log}"
    );

    let output = finish_within(client, PATIENCE);
    let stderr = String::from_utf8_lossy(&output.stderr);
    eprintln!("the client said: {stderr}");
    assert_eq!(output.status.code(), Some(3), "{stderr}");
    let reason = "the server stopped before the test ended: it was interrupted (SIGINT or SIGTERM)";
    assert!(
        stderr.contains("run 1 stored as incomplete") && stderr.contains(reason),
        "{stderr}"
    );
    let printed = json(&output.stdout);
    assert_eq!(printed["status"], "incomplete");
    let stored_reason = printed["incomplete_reason"].as_str().unwrap();
    assert!(
        stored_reason.starts_with("error: ") && stored_reason.contains(reason),
        "{stored_reason}"
    );
    // What the client measured before the server stopped is kept.
    let sent = printed["workloads"][0]["summary"]["send"]["bytes"]
        .as_u64()
        .unwrap();
    assert!(sent > 0, "{}", printed["workloads"][0]["summary"]);
    assert_eq!(stored_run(&db, 1), printed);
    assert_eq!(stored_runs(&db)[0]["status"], "incomplete");
    // Wrapped to be read: the words, whatever lines they fall on.
    let shown = results(&db, &["show", "1"]);
    let words = shown.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(words.contains(reason), "{shown}");
}

#[test]
fn sigterm_mid_test_tells_the_client_and_the_server_exits_130() {
    stop_mid_test(Signal::TERM);
}

#[test]
fn ctrl_c_mid_test_tells_the_client_and_the_server_exits_130() {
    stop_mid_test(Signal::INT);
}

/// A frame of the control protocol: a 4-byte big-endian length, then the body.
fn frame(body: &str) -> Vec<u8> {
    let mut frame = (body.len() as u32).to_be_bytes().to_vec();
    frame.extend_from_slice(body.as_bytes());
    frame
}

/// Reads one frame's body as JSON.
fn read_frame(stream: &mut TcpStream) -> serde_json::Value {
    stream.set_read_timeout(Some(PATIENCE)).unwrap();
    let mut length = [0u8; 4];
    stream.read_exact(&mut length).expect("a frame");
    let mut body = vec![0u8; u32::from_be_bytes(length) as usize];
    stream.read_exact(&mut body).expect("a whole frame");
    json(&body)
}

/// A test started by hand on `server`, as a client of protocol 1 does it: hello (naming
/// the later messages in `understands`, when given), a reverse test of one stream, its
/// data connection, and the go when `go`. Returns the control connection and a thread
/// that reads the data connection to its end.
fn raw_test(
    server: &Server,
    understands: Option<&str>,
    go: bool,
) -> (TcpStream, std::thread::JoinHandle<()>) {
    let mut control = TcpStream::connect(server.address()).unwrap();
    let understands = understands
        .map(|names| format!(r#","understands":{names}"#))
        .unwrap_or_default();
    control
        .write_all(&frame(&format!(
            r#"{{"type":"hello","protocol":1,"client_nonce":"{}"{understands}}}"#,
            "ab".repeat(32)
        )))
        .unwrap();
    assert_eq!(read_frame(&mut control)["type"], "welcome");
    control
        .write_all(&frame(
            r#"{"type":"start","streams":1,"direction":"reverse","duration_ms":8000,"bytes_per_stream":null,"block_bytes":65536,"window_bytes":null,"interval_ms":1000}"#,
        ))
        .unwrap();
    let accepted = read_frame(&mut control);
    let cookie = accepted["cookie"].as_str().expect("a cookie");
    let mut data = TcpStream::connect(server.address()).unwrap();
    data.write_all(&frame(&format!(
        r#"{{"type":"data","cookie":"{cookie}","stream":0}}"#
    )))
    .unwrap();
    if go {
        control.write_all(&frame(r#"{"type":"go"}"#)).unwrap();
    }
    // The server sends on the data connection once it has the go: read to the end.
    let reader = std::thread::spawn(move || {
        let mut scrap = vec![0u8; 1 << 16];
        while data.read(&mut scrap).is_ok_and(|n| n > 0) {}
    });
    wait_for_test(server, 2);
    (control, reader)
}

/// Stops `server` with SIGTERM, which must end it with 130 within [`PROMPT`].
fn sigterm(server: &mut Server) {
    let (status, took) = server.stop_with(Signal::TERM, PATIENCE);
    assert_eq!(status.code(), Some(130), "{}", server.log().join("\n"));
    assert!(took < PROMPT, "the server took {took:?} to exit");
}

/// Everything the server sends on `control` until it closes it.
fn rest_of(mut control: TcpStream) -> Vec<u8> {
    control.set_read_timeout(Some(PATIENCE)).unwrap();
    let mut rest = Vec::new();
    let _ = control.read_to_end(&mut rest);
    rest
}

#[test]
fn a_client_of_an_older_build_sees_the_connection_close_as_before() {
    let mut server = Server::start(&[]);
    // A hello as builds before the stopping message sent it: no `understands`.
    let (control, reader) = raw_test(&server, None, true);
    sigterm(&mut server);
    // Nothing but the close: no message this client could not read.
    let rest = rest_of(control);
    assert!(rest.is_empty(), "the server sent {rest:?}");
    reader.join().unwrap();
    let log = server.log().join("\n");
    assert!(
        log.contains("the client's build does not know the message"),
        "{log}"
    );
}

#[test]
fn a_test_waiting_for_its_go_hears_the_server_stop_too() {
    let mut server = Server::start(&[]);
    // A client that names later messages this build does not know as well.
    let (control, reader) = raw_test(&server, Some(r#"["later","stopping"]"#), false);
    sigterm(&mut server);
    let rest = rest_of(control);
    assert!(rest.len() > 4, "no frame before the close: {rest:?}");
    assert_eq!(
        u32::from_be_bytes(rest[..4].try_into().unwrap()) as usize,
        rest.len() - 4,
        "not one frame: {rest:?}"
    );
    let message = json(&rest[4..]);
    assert_eq!(message["type"], "stopping", "{message}");
    assert_eq!(message["reason"], "it was interrupted (SIGINT or SIGTERM)");
    reader.join().unwrap();
}
