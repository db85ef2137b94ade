//! `ratelab net HOST` pointed at a server that is not ratelab's: within a few seconds,
//! not after the usual timeout, it says the peer does not speak ratelab's protocol and
//! what it looks like (a real iperf3 server, a web server, a silent listener), exits 3
//! as for any peer that refuses, and stores nothing, as for a refused connection.

mod common;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use common::{have_or_skip, ratelab, refused, stored_runs};

/// How soon the client must name a foreign server: its own deadline is 3 s.
const PROMPT: Duration = Duration::from_secs(5);

/// `ratelab net 127.0.0.1 -p PORT` storing in a fresh database: fails with exit 3 and
/// `expect` on stderr, within [`PROMPT`], and stores no run; returns stderr.
fn refused_promptly(port: u16, expect: &[&str]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("results.db");
    let started = Instant::now();
    let message = refused(
        ratelab()
            .args(["net", "127.0.0.1", "-p", &port.to_string(), "-t", "2"])
            .arg("--db")
            .arg(&db),
        3,
        expect,
    );
    let took = started.elapsed();
    assert!(took < PROMPT, "took {took:?} to say: {message}");
    eprintln!("after {took:?}: {message}");
    assert!(
        !db.exists() || stored_runs(&db).as_array().is_none_or(Vec::is_empty),
        "a run was stored"
    );
    message
}

/// A port nothing listens on now.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Whether something listens on TCP `port` of any IPv4 or IPv6 address, as the kernel's
/// socket tables say: asked without connecting, which would count as a client.
fn listening(port: u16) -> bool {
    ["/proc/net/tcp", "/proc/net/tcp6"].iter().any(|table| {
        std::fs::read_to_string(table).is_ok_and(|text| {
            text.lines().skip(1).any(|line| {
                let fields: Vec<&str> = line.split_whitespace().collect();
                // Local address (hex ip:port), then the state: 0A is LISTEN.
                fields.len() > 3
                    && fields[3] == "0A"
                    && fields[1]
                        .rsplit(':')
                        .next()
                        .and_then(|p| u16::from_str_radix(p, 16).ok())
                        == Some(port)
            })
        })
    })
}

/// An `iperf3 -s` on `port`, killed when dropped.
struct Iperf3(Child);

impl Iperf3 {
    fn start(port: u16) -> Iperf3 {
        let child = std::process::Command::new("iperf3")
            .args(["-s", "-p", &port.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start iperf3 -s");
        let server = Iperf3(child);
        let started = Instant::now();
        while !listening(port) {
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "iperf3 -s never listened on {port}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        server
    }
}

impl Drop for Iperf3 {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn an_iperf3_server_is_named_with_what_to_run_instead() {
    let test = "an_iperf3_server_is_named_with_what_to_run_instead";
    if !have_or_skip(test, "iperf3") {
        return;
    }
    let port = free_port();
    let _iperf3 = Iperf3::start(port);
    refused_promptly(
        port,
        &[
            &format!("net test with 127.0.0.1:{port}: it does not speak ratelab's protocol"),
            "it looks like an iperf3 server",
            "run `ratelab net serve` there (or use iperf3 -c)",
        ],
    );
}

#[test]
fn a_web_server_is_named_by_its_status_line() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    // Answers whatever comes first as a web server answers a request it cannot parse.
    let server = std::thread::spawn(move || {
        let (mut connection, _) = listener.accept().unwrap();
        let mut request = [0u8; 256];
        let _ = connection.read(&mut request);
        connection
            .write_all(b"HTTP/1.1 400 Bad Request\r\n\r\n")
            .unwrap();
    });
    refused_promptly(
        port,
        &[
            "it does not speak ratelab's protocol",
            "it looks like an HTTP server (it answered `HTTP/1.1 400 Bad Request`)",
            "check --port, or run `ratelab net serve` there",
        ],
    );
    server.join().unwrap();
}

#[test]
fn a_silent_listener_is_named_after_the_hello_deadline() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    // Takes the connection and its bytes, and never says a word.
    let server = std::thread::spawn(move || {
        let (mut connection, _): (TcpStream, _) = listener.accept().unwrap();
        let mut scrap = [0u8; 256];
        while connection.read(&mut scrap).is_ok_and(|n| n > 0) {}
    });
    refused_promptly(
        port,
        &[
            "it accepted the connection but did not answer ratelab's hello within 3 s",
            "it does not speak ratelab's protocol",
        ],
    );
    server.join().unwrap();
}
