//! `net serve` and `net` against peers that do not play fair, each attack as a test, on
//! loopback (127.0.0.0/8 gives a test many source addresses): a cookie held or dropped
//! before any key, stalled hellos from many addresses, text meant for a terminal or a
//! log, a client that ends its test at once or claims what no link gives, a server that
//! claims one byte arrived, a test too big for the memory budget, key files others may
//! read, a data connection from another address, and a replayed iperf3 login.

mod common;

use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::process::Output;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::iperf3_peers::Credentials;
use common::net_server::{Background, PATIENCE, Server};
use common::{json, ratelab};

/// A key every keyed server and client here shares.
const KEY: &str = "c2VjcmV0IGtleSBvZiB0aGUgdGVzdCBzZXJ2ZXIgMTIz";
/// What a hostile peer tries to put on a terminal or in a log.
const ESCAPES: &str = "\u{1b}[2J\u{1b}]0;owned\u{7}fake\nratelab: test passed, 99 Gbit/s";

/// iperf3's control states, as bytes on the wire.
mod state {
    pub const TEST_START: u8 = 1;
    pub const TEST_RUNNING: u8 = 2;
    pub const TEST_END: u8 = 4;
    pub const PARAM_EXCHANGE: u8 = 9;
    pub const CREATE_STREAMS: u8 = 10;
    pub const EXCHANGE_RESULTS: u8 = 13;
    pub const DISPLAY_RESULTS: u8 = 14;
    pub const IPERF_DONE: u8 = 16;
    pub const SERVER_ERROR: u8 = 0xfe;
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// A client run, to its end within [`PATIENCE`].
fn client(server: SocketAddr, extra: &[&str]) -> Output {
    let mut command = ratelab();
    command
        .args([
            "net",
            &server.ip().to_string(),
            "-p",
            &server.port().to_string(),
        ])
        .args(["--json", "-q"])
        .args(extra);
    Background::spawn(&mut command).finish(PATIENCE)
}

/// A connection to `to` from the loopback address `from`.
fn connect_from(from: Ipv4Addr, to: SocketAddr) -> TcpStream {
    try_connect_from(from, to).unwrap()
}

/// A connection to `to` from the loopback address `from`, if one can be made now.
fn try_connect_from(from: Ipv4Addr, to: SocketAddr) -> std::io::Result<TcpStream> {
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)?;
    socket.bind(&SocketAddr::new(IpAddr::V4(from), 0).into())?;
    socket.connect_timeout(&to.into(), PATIENCE)?;
    let stream: TcpStream = socket.into();
    stream.set_nodelay(true)?;
    Ok(stream)
}

/// A frame of ratelab's control protocol.
fn frame(body: &str) -> Vec<u8> {
    let mut frame = (body.len() as u32).to_be_bytes().to_vec();
    frame.extend_from_slice(body.as_bytes());
    frame
}

fn hello() -> Vec<u8> {
    frame(&format!(
        r#"{{"type":"hello","protocol":1,"client_nonce":"{}"}}"#,
        "ab".repeat(32)
    ))
}

/// Reads one length-prefixed frame's body as JSON, within `limit`.
fn read_frame(stream: &mut TcpStream, limit: Duration) -> serde_json::Value {
    stream.set_read_timeout(Some(limit)).unwrap();
    let mut length = [0u8; 4];
    stream.read_exact(&mut length).expect("a frame");
    let mut body = vec![0u8; u32::from_be_bytes(length) as usize];
    stream.read_exact(&mut body).expect("the frame's body");
    json(&body)
}

/// An iperf3 cookie: 36 letters and a NUL.
fn cookie() -> Vec<u8> {
    let mut cookie: Vec<u8> = (0..36)
        .map(|_| b"abcdefghijklmnopqrstuvwxyz234567"[rand::random_range(0..32)])
        .collect();
    cookie.push(0);
    cookie
}

fn read_byte(stream: &mut TcpStream) -> u8 {
    stream.set_read_timeout(Some(PATIENCE)).unwrap();
    let mut byte = [0u8; 1];
    stream.read_exact(&mut byte).expect("a state byte");
    byte[0]
}

/// A key file as a key file must be, in `dir`.
fn key_file(dir: &std::path::Path) -> String {
    common::key_file(dir, "key", KEY)
        .to_str()
        .unwrap()
        .to_string()
}

#[test]
fn a_cookie_held_or_dropped_before_any_key_takes_no_slot_and_ends_no_once() {
    let dir = tempfile::tempdir().unwrap();
    let key = key_file(dir.path());
    // A keyed server refuses an iperf3 cookie at once: it cannot prove the key.
    let server = Server::start(&["--key-file", &key, "--no-store"]);
    let mut held = TcpStream::connect(server.address()).unwrap();
    held.write_all(&cookie()).unwrap();
    assert_eq!(read_byte(&mut held), state::SERVER_ERROR);
    // With no key, a cookie and silence hold no slot: parameters come first.
    let open = Server::start(&["--no-store"]);
    let mut silent = TcpStream::connect(open.address()).unwrap();
    silent.write_all(&cookie()).unwrap();
    assert_eq!(read_byte(&mut silent), state::PARAM_EXCHANGE);
    let served = client(open.address(), &["-t", "1", "--no-store"]);
    assert_eq!(served.status.code(), Some(0), "{}", stderr(&served));
    drop(silent);
    // `--once`: a cookie and a close end nothing; the keyed client's test ends it.
    let mut once = Server::start(&["--key-file", &key, "--once", "--no-store"]);
    for _ in 0..3 {
        let mut dropped = TcpStream::connect(once.address()).unwrap();
        dropped.write_all(&cookie()).unwrap();
        drop(dropped);
        let mut hello_only = TcpStream::connect(once.address()).unwrap();
        hello_only.write_all(&hello()).unwrap();
        drop(hello_only);
    }
    std::thread::sleep(Duration::from_millis(300));
    once.assert_alive();
    let keyed = client(
        once.address(),
        &["-t", "1", "--key-file", &key, "--no-store"],
    );
    assert_eq!(keyed.status.code(), Some(0), "{}", stderr(&keyed));
    assert!(once.wait_exit(PATIENCE).success());
}

#[test]
fn stalled_hellos_from_many_addresses_leave_a_keyed_client_served_or_told_busy() {
    let dir = tempfile::tempdir().unwrap();
    let key = key_file(dir.path());
    let server = Server::start(&["--key-file", &key, "--no-store"]);
    // Eight addresses, sixteen connections each, each a hello and then silence, and
    // again as soon as the server closes one.
    let stop = Arc::new(AtomicBool::new(false));
    let opened = Arc::new(Mutex::new(0usize));
    let flood: Vec<_> = (2..10u8)
        .map(|last| {
            let (stop, opened, to) = (Arc::clone(&stop), Arc::clone(&opened), server.address());
            std::thread::spawn(move || {
                let mut held = Vec::new();
                while !stop.load(Ordering::SeqCst) {
                    // One the server closed, or told busy, goes; a silent one stays.
                    held.retain(|s: &TcpStream| {
                        let mut byte = [0u8; 64];
                        s.set_nonblocking(true).unwrap();
                        matches!((&*s).read(&mut byte),
                            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock)
                    });
                    while held.len() < 16 {
                        let Ok(mut s) = try_connect_from(Ipv4Addr::new(127, 0, 0, last), to) else {
                            break;
                        };
                        let _ = s.write_all(&hello());
                        held.push(s);
                        *opened.lock().unwrap() += 1;
                    }
                    std::thread::sleep(Duration::from_millis(5));
                }
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    // The flood pushes out its own connections, never the client's one on its way.
    for _ in 0..2 {
        let keyed = client(
            server.address(),
            &["-t", "1", "--key-file", &key, "--no-store"],
        );
        assert_eq!(keyed.status.code(), Some(0), "{}", stderr(&keyed));
    }
    stop.store(true, Ordering::SeqCst);
    for thread in flood {
        thread.join().unwrap();
    }
    let opened = *opened.lock().unwrap();
    // The log sums the churn up: a few lines per address, not one per connection.
    let log = server.log();
    let per_address = |last: u8| {
        log.iter()
            .filter(|l| l.contains(&format!(" 127.0.0.{last}:")) && l.contains("closed"))
            .count()
    };
    eprintln!("{opened} connections opened; {} log lines", log.len());
    for last in 2..10 {
        assert!(per_address(last) <= 5, "{}", log.join("\n"));
    }
    assert!(log.len() < 200, "{} lines:\n{}", log.len(), log.join("\n"));
}

#[test]
fn text_from_the_wire_reaches_no_log_or_terminal_raw() {
    // A hello whose type holds a newline and an escape: the log line stays one line.
    let server = Server::start(&["--no-store"]);
    let mut forger = TcpStream::connect(server.address()).unwrap();
    let forged = "x\n2026-01-01T00:00:00Z 10.9.9.9:1: test of 1 stream \u{1b}[2J";
    let body = serde_json::json!({ "type": forged }).to_string();
    forger.write_all(&frame(&body)).unwrap();
    let line = server.wait_for_line(&["closed", "10.9.9.9"]);
    assert!(
        line.contains("\\n2026-01-01T00:00:00Z") && line.contains("\\x1b[2J"),
        "{line}"
    );
    assert!(
        !server
            .log()
            .iter()
            .any(|l| l.starts_with("2026-01-01T00:00:00Z 10.9.9.9")),
        "{:?}",
        server.log()
    );
    // A server whose refusal holds escapes: the client's terminal sees them written out.
    let fake = FakeServer::start(Behaviour::Refuse);
    let refused = client(fake.address, &["-t", "1", "--no-store"]);
    let said = stderr(&refused);
    assert_eq!(refused.status.code(), Some(3), "{said}");
    assert!(
        said.contains("\\x1b[2J\\x1b]0;owned\\x07fake\\nratelab"),
        "{said}"
    );
    assert!(
        !said.contains('\u{1b}') && !said.contains('\u{7}'),
        "{said:?}"
    );
    // A stream error from the server: the same.
    let fake = FakeServer::start(Behaviour::StreamError);
    let failed = client(fake.address, &["-t", "1", "--no-store"]);
    let said = stderr(&failed);
    assert_eq!(failed.status.code(), Some(3), "{said}");
    assert!(said.contains("\\x1b[2J"), "{said}");
    assert!(!said.contains('\u{1b}'), "{said:?}");
}

#[test]
fn a_server_that_claims_one_byte_arrived_leaves_the_run_incomplete() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    let fake = FakeServer::start(Behaviour::OneByte);
    let claimed = client(fake.address, &["-t", "1", "--db", db.to_str().unwrap()]);
    let said = stderr(&claimed);
    assert_eq!(claimed.status.code(), Some(3), "{said}");
    assert!(
        said.contains("the other end received 1 B, further apart than the socket buffers"),
        "{said}"
    );
    let stored = common::stored_run(&db, 1);
    assert_eq!(stored["status"], "incomplete", "{stored}");
}

#[test]
fn an_iperf3_client_that_ends_at_once_or_claims_the_impossible_is_stored_incomplete() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("served.db");
    let server = Server::start(&["--db", db.to_str().unwrap()]);
    let cases = [
        // Asks for 10 s, moves nothing, ends after 1 ms.
        (
            Fake3 {
                time: 10,
                send_for: Duration::ZERO,
                retransmits: 0,
            },
            "no bytes crossed",
        ),
        // Asks for 10 s, ends after 50 ms.
        (
            Fake3 {
                time: 10,
                send_for: Duration::from_millis(50),
                retransmits: 0,
            },
            "the client ended the test after 0.",
        ),
        // A second's test with a billion retransmissions claimed.
        (
            Fake3 {
                time: 1,
                send_for: Duration::from_millis(1050),
                retransmits: 1_000_000_000,
            },
            "the client's results cannot be: stream id 1 retransmitted 1000000000 segments",
        ),
    ];
    for (id, (fake, reason)) in cases.into_iter().enumerate() {
        fake.run(server.address());
        server.wait_for_line(&[&format!("stored as run {} ", id + 1)]);
        let stored = common::stored_run(&db, id as i64 + 1);
        assert_eq!(stored["status"], "incomplete", "{reason}: {stored}");
        let said = stored["incomplete_reason"].as_str().unwrap_or_default();
        assert!(said.contains(reason), "{reason:?} not in {said:?}");
    }
    // A time whose milliseconds wrap is refused before any stream.
    let mut wraps = iperf3_params(
        server.address(),
        r#"{"tcp":true,"time":18446744073709552,"parallel":1,"len":131072,"client_version":"3.22"}"#,
    );
    assert_eq!(read_byte(&mut wraps), state::SERVER_ERROR);
    server.wait_for_line(&["a test of 18446744073709552 s asked for"]);
}

#[test]
fn a_test_past_the_memory_budget_is_refused_and_the_largest_allowed_fits_it() {
    let mut server = Server::start(&["--no-store"]);
    let refused = client(
        server.address(),
        &["-t", "1", "-P", "16", "--bidir", "-l", "16M", "--no-store"],
    );
    // The client reads the server's bounds first and refuses before the test starts.
    let said = stderr(&refused);
    assert_eq!(refused.status.code(), Some(2), "{said}");
    assert!(
        said.contains("a test of 32 connections with 16 MiB blocks would take 512 MiB of memory; this server allows 128 MiB per test"),
        "{said}"
    );
    // The largest test the default allows: 32 connections of 4 MiB blocks.
    let largest = client(
        server.address(),
        &["-t", "1", "-P", "16", "--bidir", "-l", "4M", "--no-store"],
    );
    assert_eq!(largest.status.code(), Some(0), "{}", stderr(&largest));
    let status = std::fs::read_to_string(format!("/proc/{}/status", server.pid())).unwrap();
    let peak_kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap();
    eprintln!("the server's peak resident memory: {} MiB", peak_kb / 1024);
    assert!(peak_kb < 200 * 1024, "peak {peak_kb} kB");
    server.assert_alive();
}

#[test]
fn key_files_others_may_read_or_that_repeat_are_refused() {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = tempfile::tempdir().unwrap();
    let open = dir.path().join("open-key");
    std::fs::write(&open, format!("{KEY}\n")).unwrap();
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o644)).unwrap();
    let weak = common::key_file(dir.path(), "weak-key", "aaaaaaaaaaaaaaaa");
    for path in [&open, &weak] {
        let served = common::refused(
            ratelab()
                .args([
                    "net",
                    "serve",
                    "--port",
                    "0",
                    "--bind",
                    "127.0.0.1",
                    "--key-file",
                ])
                .arg(path),
            2,
            &[path.to_str().unwrap()],
        );
        let asked = common::refused(
            ratelab()
                .args(["net", "127.0.0.1", "-t", "1", "--no-store", "--key-file"])
                .arg(path),
            2,
            &[path.to_str().unwrap()],
        );
        for said in [served, asked] {
            assert!(
                said.contains("chmod 600") || said.contains("too little variety"),
                "{said}"
            );
        }
    }
    // With no key on a reachable address, the server says who may use it.
    let mut open_server = Server::start_on(IpAddr::V4(Ipv4Addr::UNSPECIFIED), &["--no-store"]);
    open_server.wait_for_line(&["warning: no key: anyone who can reach"]);
    open_server.assert_alive();
}

#[test]
fn a_data_connection_from_another_address_is_refused() {
    let server = Server::start(&["--no-store", "--idle-timeout", "2s"]);
    let mut control = connect_from(Ipv4Addr::new(127, 0, 0, 1), server.address());
    control.write_all(&hello()).unwrap();
    assert_eq!(read_frame(&mut control, PATIENCE)["type"], "welcome");
    control
        .write_all(&frame(
            r#"{"type":"start","streams":1,"direction":"forward","duration_ms":1000,"bytes_per_stream":null,"block_bytes":131072,"window_bytes":null,"interval_ms":1000}"#,
        ))
        .unwrap();
    let accepted = read_frame(&mut control, PATIENCE);
    let cookie = accepted["cookie"].as_str().expect("a cookie").to_string();
    let mut data = connect_from(Ipv4Addr::new(127, 0, 0, 7), server.address());
    let body = serde_json::json!({"type": "data", "cookie": cookie, "stream": 0}).to_string();
    data.write_all(&frame(&body)).unwrap();
    server.wait_for_line(&[
        "127.0.0.7",
        "data connection from another address than its test's client (127.0.0.1)",
    ]);
    server.wait_for_line(&["0 of 1 data connections arrived"]);
}

#[test]
fn an_iperf3_login_is_good_once() {
    let credentials = Credentials::make();
    let args = credentials.server_args();
    let mut args: Vec<&str> = args.iter().map(String::as_str).collect();
    // The first login's test still gathers its streams when the second comes.
    args.extend(["--no-store", "--max-tests", "2"]);
    let server = Server::start(&args);
    use ratelab::workload::net::iperf3::login as iperf3_login;
    let public =
        iperf3_login::read_public_key(std::path::Path::new(&credentials.path("public.pem")))
            .unwrap();
    let login = iperf3_login::Credentials {
        user: "mario".into(),
        password: "rossi".into(),
        time_s: iperf3_login::now_s(),
    };
    let token = iperf3_login::token(&public, iperf3_login::Padding::Oaep, &login).unwrap();
    let params = serde_json::json!({
        "tcp": true, "time": 1, "parallel": 1, "len": 131072,
        "client_version": "3.22", "authtoken": token,
    })
    .to_string();
    let mut first = iperf3_params(server.address(), &params);
    assert_eq!(read_byte(&mut first), state::CREATE_STREAMS);
    drop(first);
    let mut replayed = iperf3_params(server.address(), &params);
    assert_eq!(read_byte(&mut replayed), state::SERVER_ERROR);
    server.wait_for_line(&["the token was used before"]);
}

/// An iperf3 control connection to `server` that has sent its cookie and `params`.
fn iperf3_params(server: SocketAddr, params: &str) -> TcpStream {
    let mut control = TcpStream::connect(server).unwrap();
    control.write_all(&cookie()).unwrap();
    assert_eq!(read_byte(&mut control), state::PARAM_EXCHANGE);
    control.write_all(&frame(params)).unwrap();
    control
}

/// An iperf3 client that asks for `time` seconds, sends for `send_for`, ends the test
/// and claims `retransmits` in its results.
struct Fake3 {
    time: u64,
    send_for: Duration,
    retransmits: u64,
}

impl Fake3 {
    fn run(&self, server: SocketAddr) {
        let cookie = cookie();
        let mut control = TcpStream::connect(server).unwrap();
        control.write_all(&cookie).unwrap();
        assert_eq!(read_byte(&mut control), state::PARAM_EXCHANGE);
        let params = format!(
            r#"{{"tcp":true,"time":{},"parallel":1,"len":131072,"client_version":"3.22"}}"#,
            self.time
        );
        control.write_all(&frame(&params)).unwrap();
        assert_eq!(read_byte(&mut control), state::CREATE_STREAMS);
        let mut data = TcpStream::connect(server).unwrap();
        data.write_all(&cookie).unwrap();
        assert_eq!(read_byte(&mut control), state::TEST_START);
        assert_eq!(read_byte(&mut control), state::TEST_RUNNING);
        let started = Instant::now();
        let block = vec![7u8; 128 << 10];
        let mut sent = 0u64;
        while started.elapsed() < self.send_for {
            data.write_all(&block).unwrap();
            sent += block.len() as u64;
        }
        std::thread::sleep(Duration::from_millis(1));
        control.write_all(&[state::TEST_END]).unwrap();
        assert_eq!(read_byte(&mut control), state::EXCHANGE_RESULTS);
        let results = serde_json::json!({
            "cpu_util_total": 1.0, "cpu_util_user": 0.5, "cpu_util_system": 0.5,
            "sender_has_retransmits": 1,
            "streams": [{
                "id": 1, "bytes": sent, "retransmits": self.retransmits, "jitter": 0,
                "errors": 0, "packets": 0, "start_time": 0,
                "end_time": started.elapsed().as_secs_f64(),
            }],
        })
        .to_string();
        control.write_all(&frame(&results)).unwrap();
        read_frame(&mut control, PATIENCE);
        assert_eq!(read_byte(&mut control), state::DISPLAY_RESULTS);
        let _ = control.write_all(&[state::IPERF_DONE]);
    }
}

/// What a fake ratelab server does wrong.
#[derive(Clone, Copy, PartialEq)]
enum Behaviour {
    /// Refuses the hello with a reason full of escapes.
    Refuse,
    /// Runs the test and reports a stream error full of escapes.
    StreamError,
    /// Runs the test and claims its one stream received 1 byte.
    OneByte,
}

/// A server that speaks ratelab's protocol and lies, on a port of its own.
struct FakeServer {
    address: SocketAddr,
}

impl FakeServer {
    fn start(behaviour: Behaviour) -> FakeServer {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap();
        std::thread::spawn(move || {
            let mut data = Vec::new();
            for connection in listener.incoming() {
                let Ok(mut connection) = connection else {
                    continue;
                };
                let Ok(first) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    read_frame(&mut connection, PATIENCE)
                })) else {
                    continue;
                };
                match first["type"].as_str() {
                    Some("hello") if behaviour == Behaviour::Refuse => {
                        let body = serde_json::json!({"type": "refused", "reason": ESCAPES});
                        let _ = connection.write_all(&frame(&body.to_string()));
                    }
                    Some("hello") => {
                        std::thread::spawn(move || control(connection, behaviour));
                    }
                    // A data connection: drained until the client closes it.
                    Some("data") => {
                        data.push(std::thread::spawn(move || {
                            let mut sink = vec![0u8; 1 << 20];
                            while matches!(connection.read(&mut sink), Ok(n) if n > 0) {}
                        }));
                    }
                    _ => {}
                }
            }
        });
        FakeServer { address }
    }
}

/// One control connection of the fake server, after its hello: welcome, the test asked
/// for (if any), and the lying results once the client's streams have had their time.
fn control(mut connection: TcpStream, behaviour: Behaviour) {
    let welcome = r#"{"type":"welcome","server_proof":null,"limits":{"max_streams":16,"max_duration_ms":60000,"max_bytes":107374182400}}"#;
    connection.write_all(&frame(welcome)).unwrap();
    connection.set_read_timeout(Some(PATIENCE)).unwrap();
    let mut length = [0u8; 4];
    if connection.read_exact(&mut length).is_err() {
        return; // a client that checks the server closes here
    }
    let mut body = vec![0u8; u32::from_be_bytes(length) as usize];
    connection.read_exact(&mut body).unwrap();
    let accepted = format!(r#"{{"type":"accepted","cookie":"{}"}}"#, "cd".repeat(16));
    connection.write_all(&frame(&accepted)).unwrap();
    assert_eq!(read_frame(&mut connection, PATIENCE)["type"], "go");
    std::thread::sleep(Duration::from_millis(1300));
    let (bytes, error) = match behaviour {
        Behaviour::OneByte => (1, serde_json::Value::Null),
        _ => (0, serde_json::Value::String(ESCAPES.into())),
    };
    let results = serde_json::json!({
        "type": "results", "cpu_seconds": 0.1, "wall_seconds": 1.0,
        "streams": [{
            "stream": 0, "role": "receive", "bytes": bytes, "seconds": 1.0,
            "intervals": [], "tcp": null, "mss_bytes": null, "mtu_bytes": null,
            "cpu_seconds": 0.1, "error": error,
        }],
    });
    let _ = connection.write_all(&frame(&results.to_string()));
    std::thread::sleep(Duration::from_millis(500));
}
