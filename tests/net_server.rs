//! `ratelab net serve` under abuse, run on the real binary over loopback: it survives a
//! thousand malformed, truncated, oversized, silent and trickling connections, answers
//! busy to a second client, refuses a wrong key or protocol version, and still serves a
//! good client afterwards.

mod common;

use std::borrow::BorrowMut;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};
use std::process::Output;
use std::time::{Duration, Instant};

use common::net_server::{Background, PATIENCE, Server, wait_closed};
use common::{json, ratelab};

/// Bad connections thrown at the server in the flood test.
const BAD_CONNECTIONS: usize = 1000;
/// Threads that throw them.
const FLOOD_THREADS: usize = 8;

/// Runs `command` to its end, within `limit`.
fn run_within(mut command: impl BorrowMut<std::process::Command>, limit: Duration) -> Output {
    Background::spawn(command.borrow_mut()).finish(limit)
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// A client's run must succeed and report bytes received by the server.
fn assert_served(output: &Output) {
    assert_eq!(output.status.code(), Some(0), "client: {}", stderr(output));
    let doc = json(&output.stdout);
    let rate = doc["workloads"][0]["summary"]["receive"]["bytes_per_sec"]
        .as_f64()
        .unwrap_or_else(|| panic!("no receive rate in: {doc}"));
    assert!(rate > 0.0, "receive rate {rate} in: {doc}");
}

/// A client's run must fail with `code`, nothing on stdout, and every one of `expect`
/// on stderr.
fn assert_refused(output: &Output, code: i32, expect: &[&str]) -> String {
    let message = stderr(output);
    assert_eq!(output.status.code(), Some(code), "{message}");
    for text in expect {
        assert!(message.contains(text), "{text:?} missing from: {message}");
    }
    assert!(
        output.stdout.is_empty(),
        "stdout holds: {}",
        String::from_utf8_lossy(&output.stdout)
    );
    message
}

/// A frame of the control protocol: a 4-byte big-endian length, then the body.
fn frame(body: &[u8]) -> Vec<u8> {
    let mut frame = (body.len() as u32).to_be_bytes().to_vec();
    frame.extend_from_slice(body);
    frame
}

/// A hello frame with `protocol` and a well-formed nonce.
fn hello(protocol: u32) -> Vec<u8> {
    let body = format!(
        r#"{{"type":"hello","protocol":{protocol},"client_nonce":"{}"}}"#,
        "ab".repeat(32)
    );
    frame(body.as_bytes())
}

fn connect(server: &Server) -> TcpStream {
    let stream = TcpStream::connect_timeout(&server.address(), PATIENCE)
        .unwrap_or_else(|e| panic!("cannot connect to the server: {e}"));
    stream.set_nodelay(true).unwrap();
    stream
}

/// Reads one frame's body as JSON, within `limit`.
fn read_frame(stream: &mut TcpStream, limit: Duration) -> serde_json::Value {
    stream.set_read_timeout(Some(limit)).unwrap();
    let mut length = [0u8; 4];
    stream
        .read_exact(&mut length)
        .unwrap_or_else(|e| panic!("no frame from the server: {e}"));
    let mut body = vec![0u8; u32::from_be_bytes(length) as usize];
    stream
        .read_exact(&mut body)
        .unwrap_or_else(|e| panic!("truncated frame from the server: {e}"));
    json(&body)
}

/// The type and reason of the one frame in `reply`.
fn refusal(reply: &[u8]) -> (String, String) {
    assert!(reply.len() >= 4, "no frame in the reply {reply:?}");
    let length = u32::from_be_bytes(reply[..4].try_into().unwrap()) as usize;
    assert_eq!(reply.len(), 4 + length, "not one frame: {reply:?}");
    let message = json(&reply[4..]);
    (
        message["type"].as_str().unwrap_or_default().to_string(),
        message["reason"].as_str().unwrap_or_default().to_string(),
    )
}

/// A small deterministic generator, so a failing flood can be replayed exactly.
fn xorshift(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

/// What bad connection number `i` of the flood does.
#[derive(Debug, Clone, Copy)]
enum Bad {
    /// Random bytes, then end of stream.
    Garbage,
    /// A length prefix for a hello, half of it sent, then end of stream.
    Truncated,
    /// A length prefix of 0xFFFFFFFF.
    Oversized,
    /// A length one byte over the server's request limit.
    JustOverLimit,
    /// A zero-length frame.
    Empty,
    /// A well-formed frame of a type the protocol does not have: malformed, so closed
    /// without an answer.
    UnknownType,
    /// A well-formed hello of protocol 999.
    WrongVersion,
    /// A data connection for a cookie no test has.
    UnknownCookie,
    /// A hello whose nonce is not 32 bytes in hex.
    MalformedNonce,
    /// A server's message sent by a client as its first.
    Misplaced,
    /// A good hello, then garbage where the start request should be.
    GarbageAfterHello,
    /// Connects and sends nothing: cut off by --idle-timeout.
    Silent,
    /// Trickles a hello one byte every 300 ms: cut off by --idle-timeout.
    Slow,
}

impl Bad {
    fn of(i: usize) -> Bad {
        match (i % 50, i % 11) {
            (0, _) => Bad::Silent,
            (25, _) => Bad::Slow,
            (_, 0) => Bad::Garbage,
            (_, 1) => Bad::Truncated,
            (_, 2) => Bad::Oversized,
            (_, 3) => Bad::JustOverLimit,
            (_, 4) => Bad::Empty,
            (_, 5) => Bad::UnknownType,
            (_, 6) => Bad::WrongVersion,
            (_, 7) => Bad::UnknownCookie,
            (_, 8) => Bad::MalformedNonce,
            (_, 9) => Bad::Misplaced,
            _ => Bad::GarbageAfterHello,
        }
    }
}

/// Writes `bytes`, which may fail once the server has closed (an oversized frame is cut
/// off at its prefix); the close is what the flood checks.
fn send(stream: &mut TcpStream, bytes: &[u8]) {
    let _ = stream.write_all(bytes);
}

/// Throws bad connection `i` at the server and checks that the server closes it, with
/// the answer this kind deserves.
fn bad_connection(server: &Server, i: usize) {
    let kind = Bad::of(i);
    // Each from an address of its own: the server sums up what one address does again
    // and again, and here every connection's reason is to be read in the log.
    let source = [127, 1, (i / 250) as u8, (i % 250) as u8 + 1];
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    socket
        .bind(&std::net::SocketAddr::from((source, 0)).into())
        .unwrap();
    socket
        .connect_timeout(&server.address().into(), PATIENCE)
        .unwrap_or_else(|e| panic!("cannot connect to the server: {e}"));
    let mut stream: TcpStream = socket.into();
    stream.set_nodelay(true).unwrap();
    let mut seed = 0x9e37_79b9_7f4a_7c15 ^ (i as u64 + 1);
    match kind {
        Bad::Garbage => {
            let length = 1 + (xorshift(&mut seed) % 300) as usize;
            let bytes: Vec<u8> = (0..length).map(|_| xorshift(&mut seed) as u8).collect();
            send(&mut stream, &bytes);
        }
        Bad::Truncated => {
            let whole = hello(1);
            send(&mut stream, &whole[..4 + (whole.len() - 4) / 2]);
        }
        Bad::Oversized => send(&mut stream, b"\xff\xff\xff\xff{\"type\":\"hello\""),
        Bad::JustOverLimit => {
            let mut bytes = (16u32 * 1024 + 1).to_be_bytes().to_vec();
            bytes.extend_from_slice(&[b' '; 1024]);
            send(&mut stream, &bytes);
        }
        Bad::Empty => send(&mut stream, &frame(b"")),
        Bad::UnknownType => send(&mut stream, &frame(br#"{"type":"launch","streams":1}"#)),
        Bad::WrongVersion => send(&mut stream, &hello(999)),
        Bad::UnknownCookie => send(
            &mut stream,
            &frame(br#"{"type":"data","cookie":"00112233445566778899aabbccddeeff","stream":0}"#),
        ),
        Bad::MalformedNonce => send(
            &mut stream,
            &frame(br#"{"type":"hello","protocol":1,"client_nonce":"zz"}"#),
        ),
        Bad::Misplaced => send(&mut stream, &frame(br#"{"type":"go"}"#)),
        Bad::GarbageAfterHello => {
            send(&mut stream, &hello(1));
            let answer = read_frame(&mut stream, PATIENCE);
            assert_eq!(
                answer["type"], "welcome",
                "answer to a good hello: {answer}"
            );
            send(
                &mut stream,
                &frame(b"{\"type\":\"start\",\"streams\":\"lots\"}"),
            );
        }
        Bad::Silent => {}
        Bad::Slow => {
            let started = Instant::now();
            let whole = hello(1);
            stream
                .set_read_timeout(Some(Duration::from_millis(300)))
                .unwrap();
            let mut byte = [0u8; 1];
            for next in whole.iter().cycle() {
                assert!(
                    started.elapsed() < Duration::from_secs(3),
                    "connection {i} trickling a byte every 300 ms was not cut off within 3 s"
                );
                if stream.write_all(std::slice::from_ref(next)).is_err() {
                    break;
                }
                match stream.read(&mut byte) {
                    Ok(0) => break,
                    Ok(_) => panic!("connection {i}: the server answered a partial frame"),
                    Err(e)
                        if matches!(
                            e.kind(),
                            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                        ) => {}
                    Err(_) => break,
                }
            }
            let took = started.elapsed();
            // The idle timeout is 1 s; cut off much sooner means for another reason.
            assert!(
                took >= Duration::from_millis(800),
                "connection {i} trickling bytes was cut off after {took:?}, before the idle timeout"
            );
            return;
        }
    }
    // End of stream where the kind allows it, so the server sees a truncated frame at
    // once rather than waiting for its idle timeout.
    if !matches!(kind, Bad::Silent) {
        let _ = stream.shutdown(Shutdown::Write);
    }
    let (took, reply) = wait_closed(
        &mut stream,
        &format!("connection {i} ({kind:?})"),
        Duration::from_secs(3),
    );
    match kind {
        Bad::WrongVersion | Bad::MalformedNonce | Bad::Misplaced => {
            let (kind_name, reason) = refusal(&reply);
            assert_eq!(kind_name, "refused", "connection {i} ({kind:?}): {reason}");
            let expect = match kind {
                Bad::WrongVersion => "protocol version 999",
                Bad::MalformedNonce => "nonce",
                _ => "not go",
            };
            assert!(
                reason.contains(expect),
                "connection {i} ({kind:?}): {expect:?} missing from {reason:?}"
            );
        }
        Bad::Silent => assert!(
            took >= Duration::from_millis(800),
            "connection {i} sending nothing was cut off after {took:?}, before the idle timeout"
        ),
        // Garbage that happens to decode as a message could earn a refusal; nothing else
        // may answer anything.
        Bad::Garbage => {}
        _ => assert!(
            reply.is_empty(),
            "connection {i} ({kind:?}) was answered {:?}",
            String::from_utf8_lossy(&reply)
        ),
    }
}

/// Open descriptors of process `pid`.
fn open_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| d.count())
        .unwrap_or(0)
}

#[test]
fn server_survives_a_thousand_bad_connections_and_serves_on() {
    let mut server = Server::start(&["--idle-timeout", "1s"]);
    let pid = server.pid();
    let fds_at_start = open_fds(pid);
    let started = Instant::now();
    std::thread::scope(|scope| {
        for thread in 0..FLOOD_THREADS {
            let server = &server;
            scope.spawn(move || {
                for i in (thread..BAD_CONNECTIONS).step_by(FLOOD_THREADS) {
                    bad_connection(server, i);
                }
            });
        }
    });
    eprintln!(
        "{BAD_CONNECTIONS} bad connections took {:.1} s",
        started.elapsed().as_secs_f64()
    );
    server.assert_alive();

    // Every bad connection was closed with a logged reason.
    let started = Instant::now();
    let closed = loop {
        let closed: Vec<String> = server
            .log()
            .into_iter()
            .filter(|line| line.contains(": closed: "))
            .collect();
        if closed.len() >= BAD_CONNECTIONS || started.elapsed() > PATIENCE {
            break closed;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(
        closed.len(),
        BAD_CONNECTIONS,
        "closed connections logged:\n{}",
        server.log().join("\n")
    );
    for reason in [
        "over the limit of 16384",
        "malformed message",
        "connection closed by the peer",
        "timed out after 1s",
        "protocol version 999",
        "data connection for no test running here",
        "must open with hello or data, not go",
    ] {
        assert!(
            closed.iter().any(|line| line.contains(reason)),
            "no connection closed for {reason:?}:\n{}",
            closed.join("\n")
        );
    }

    // And a real client is still served.
    let output = run_within(server.client(&["-t", "1"]), PATIENCE);
    assert_served(&output);
    server.assert_alive();

    // Nothing leaked: the flood's sockets are all closed again.
    let started = Instant::now();
    while open_fds(pid) > fds_at_start {
        assert!(
            started.elapsed() < PATIENCE,
            "the server holds {} descriptors, {fds_at_start} at start",
            open_fds(pid)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn second_client_hears_busy_while_a_test_runs() {
    let server = Server::start(&[]);
    let first = Background::spawn(&mut server.client(&["-t", "4"]));

    // Wait until the first test holds the slot: a bare hello is then answered busy.
    let started = Instant::now();
    loop {
        let mut probe = connect(&server);
        probe.write_all(&hello(1)).unwrap();
        let answer = read_frame(&mut probe, PATIENCE);
        if answer["type"] == "busy" {
            break;
        }
        assert_eq!(answer["type"], "welcome", "answer to a hello: {answer}");
        assert!(
            started.elapsed() < PATIENCE,
            "the first client's test never started"
        );
        drop(probe);
        std::thread::sleep(Duration::from_millis(100));
    }

    let second = run_within(server.client(&["-t", "1"]), PATIENCE);
    assert_refused(&second, 3, &["busy", "1 test is running"]);
    server.wait_for_line(&["closed: busy"]);

    assert_served(&first.finish(PATIENCE));
}

#[test]
fn key_is_checked_both_ways() {
    let dir = tempfile::tempdir().unwrap();
    let key = common::key_file(
        dir.path(),
        "key",
        "c2VjcmV0IGtleSBvZiB0aGUgdGVzdCBzZXJ2ZXIgMTIz",
    );
    let other = common::key_file(
        dir.path(),
        "other-key",
        "YW5vdGhlciBrZXksIG5vdCB0aGUgc2VydmVyJ3Mgb25l",
    );
    let short = common::key_file(dir.path(), "short-key", "tooshort");

    let server = Server::start(&["--key-file", key.to_str().unwrap()]);
    assert!(
        server.log()[0].contains("key required"),
        "{:?}",
        server.log()
    );

    let wrong = run_within(
        server.client(&["-t", "1", "--key-file", other.to_str().unwrap()]),
        PATIENCE,
    );
    assert_refused(&wrong, 3, &["refused: wrong key"]);
    server.wait_for_line(&["closed: wrong key"]);

    let none = run_within(server.client(&["-t", "1"]), PATIENCE);
    assert_refused(&none, 3, &["the server checks a key", "--key-file"]);

    let short_client = run_within(
        server.client(&["-t", "1", "--key-file", short.to_str().unwrap()]),
        PATIENCE,
    );
    assert_refused(
        &short_client,
        2,
        &[short.to_str().unwrap(), "holds 8 bytes"],
    );

    let right = run_within(
        server.client(&["-t", "1", "--key-file", key.to_str().unwrap()]),
        PATIENCE,
    );
    assert_served(&right);

    // A client with a key does not trust a server that cannot prove it.
    let open = Server::start(&[]);
    let unproven = run_within(
        open.client(&["-t", "1", "--key-file", key.to_str().unwrap()]),
        PATIENCE,
    );
    assert_refused(&unproven, 3, &["did not prove the key"]);

    // A server with a short key refuses to start: a usage error naming the file.
    let short_server = run_within(
        ratelab()
            .args(["net", "serve", "--port", "0", "--bind", "127.0.0.1"])
            .arg("--key-file")
            .arg(&short),
        PATIENCE,
    );
    assert_refused(
        &short_server,
        2,
        &[short.to_str().unwrap(), "holds 8 bytes"],
    );
}

#[test]
fn other_protocol_version_is_refused_with_the_versions() {
    let mut server = Server::start(&[]);
    let mut stream = connect(&server);
    stream.write_all(&hello(2)).unwrap();
    let answer = read_frame(&mut stream, PATIENCE);
    assert_eq!(
        answer["type"], "refused",
        "answer to a hello of protocol 2: {answer}"
    );
    let reason = answer["reason"].as_str().unwrap_or_default();
    assert!(
        reason.contains("protocol version 2") && reason.contains("speaks 1"),
        "{reason}"
    );
    wait_closed(&mut stream, "the refused connection", PATIENCE);
    server.wait_for_line(&["closed: protocol version 2"]);
    server.assert_alive();
    assert_served(&run_within(server.client(&["-t", "1"]), PATIENCE));
}
