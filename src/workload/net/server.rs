//! `ratelab net serve`: a server that is safe to leave running. Tests are bounded in
//! streams, time and bytes; only `max_tests` run at once and the rest hear "busy"; a
//! key, when set, is proven by challenge and response; every connection has deadlines
//! for each message, so a silent or trickling peer is cut off; anything malformed
//! closes that one connection with a logged reason, and the server serves on.

use std::collections::HashMap;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::admission::{Admission, Ticket};
use super::auth::{self, Key};
use super::protocol::{self, Limits, MAX_REQUEST_BYTES, Message, PROTOCOL, TestRequest};
use super::report::Role;
use super::session::{self, Connection, GRACE};

/// Longest wait for a connection's first message: a client speaks as soon as it connects.
const FIRST_MESSAGE_TIMEOUT: Duration = Duration::from_secs(3);
/// Pause after a failed accept (out of descriptors), so the loop does not spin.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);
/// Most intervals one test may report, all streams together (bounds the results).
const MAX_INTERVALS: u64 = 50_000;
/// Largest block a client may ask for.
pub const MAX_BLOCK_BYTES: u64 = 16 << 20;

/// How a server is set up.
#[derive(Debug, Clone)]
pub struct ServeConfig {
    /// Address to listen on.
    pub bind: SocketAddr,
    /// Bounds on each test.
    pub limits: Limits,
    /// Tests that may run at once.
    pub max_tests: usize,
    /// The key clients must prove, if any.
    pub key: Option<Key>,
    /// Longest wait for any one message, or for a test's data connections.
    pub idle_timeout: Duration,
    /// Stop after one test has been served.
    pub once: bool,
}

/// What the server tells its operator, one line per event.
pub type Log = Arc<dyn Fn(&str) + Send + Sync>;

/// A bound server, ready to serve.
pub struct Server {
    listener: TcpListener,
    state: Arc<State>,
}

struct State {
    config: ServeConfig,
    log: Log,
    running: AtomicUsize,
    admission: Admission,
    served: AtomicUsize,
    routes: Mutex<HashMap<String, Sender<(u32, TcpStream)>>>,
}

/// Frees a test slot when the test ends, however it ends.
struct Slot<'a>(&'a AtomicUsize);

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Server {
    /// Binds to `config.bind`.
    pub fn bind(config: ServeConfig, log: Log) -> std::io::Result<Server> {
        let listener = TcpListener::bind(config.bind)?;
        Ok(Server {
            listener,
            state: Arc::new(State {
                config,
                log,
                running: AtomicUsize::new(0),
                admission: Admission::default(),
                served: AtomicUsize::new(0),
                routes: Mutex::new(HashMap::new()),
            }),
        })
    }

    /// The address it listens on (with the port the system chose for port 0).
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Serves until `stop` says so, or after one test with `once`.
    pub fn serve(&self, stop: &dyn Fn() -> bool) -> std::io::Result<()> {
        self.listener.set_nonblocking(true)?;
        let tick = rustix::time::Timespec {
            tv_sec: 0,
            tv_nsec: 100_000_000,
        };
        let mut refused_accepts = 0u64;
        let mut last_accept_log: Option<Instant> = None;
        loop {
            if stop() || (self.state.config.once && self.state.served.load(Ordering::SeqCst) > 0) {
                return Ok(());
            }
            let mut fds = [rustix::event::PollFd::new(
                &self.listener,
                rustix::event::PollFlags::IN,
            )];
            match rustix::event::poll(&mut fds, Some(&tick)) {
                Ok(_) | Err(rustix::io::Errno::INTR) => {}
                Err(e) => return Err(e.into()),
            }
            loop {
                match self.listener.accept() {
                    Ok((connection, peer)) => self.admit(connection, peer),
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                    // A connection that died before accept, or no descriptors left: log
                    // it (once a second at most), pause, and keep serving.
                    Err(e) => {
                        refused_accepts += 1;
                        if last_accept_log.is_none_or(|t| t.elapsed() >= Duration::from_secs(1)) {
                            (self.state.log)(&format!(
                                "accept failed {refused_accepts} time{}: {e}",
                                if refused_accepts == 1 { "" } else { "s" }
                            ));
                            last_accept_log = Some(Instant::now());
                            refused_accepts = 0;
                        }
                        std::thread::sleep(ACCEPT_BACKOFF);
                        break;
                    }
                }
            }
        }
    }

    fn admit(&self, connection: TcpStream, peer: SocketAddr) {
        let state = Arc::clone(&self.state);
        let log = Arc::clone(&state.log);
        let ticket = match state
            .admission
            .admit(&connection, peer.ip(), &|line| log(&line))
        {
            Ok(ticket) => ticket,
            Err(reason) => {
                log(&format!("{peer}: closed: {reason}"));
                return;
            }
        };
        let spawned = std::thread::Builder::new()
            .name("net-connection".into())
            .spawn(move || {
                let _ = connection.set_nonblocking(false);
                let _ = connection.set_nodelay(true);
                if let Err(reason) = handle(&state, connection, peer, ticket) {
                    (state.log)(&format!("{peer}: closed: {reason}"));
                }
            });
        if let Err(e) = spawned {
            (self.state.log)(&format!("{peer}: closed: cannot start a thread: {e}"));
        }
    }
}

/// Serves one connection from its first message to its end.
fn handle(
    state: &State,
    connection: TcpStream,
    peer: SocketAddr,
    ticket: Ticket,
) -> Result<(), String> {
    let timeout = state.config.idle_timeout;
    let first = protocol::receive(
        &connection,
        MAX_REQUEST_BYTES,
        timeout.min(FIRST_MESSAGE_TIMEOUT),
    )
    .map_err(|e| format!("first message: {e}"))?;
    ticket.spoken();
    match first {
        Message::Hello {
            protocol,
            client_nonce,
        } => control(state, &connection, peer, protocol, &client_nonce, ticket),
        Message::Data { cookie, stream } => {
            // From here the connection belongs to a test, which bounds its streams.
            drop(ticket);
            let route = state
                .routes
                .lock()
                .expect("routes lock")
                .get(&cookie)
                .cloned();
            match route {
                Some(route) => route
                    .send((stream, connection))
                    .map_err(|_| format!("data connection for stream {stream} came too late")),
                None => Err("data connection for no test running here".into()),
            }
        }
        other => {
            let reason = format!(
                "a connection must open with hello or data, not {}",
                other.name()
            );
            refuse(&connection, &reason, timeout);
            Err(reason)
        }
    }
}

fn refuse(connection: &TcpStream, reason: &str, timeout: Duration) {
    let _ = protocol::send(
        connection,
        &Message::Refused {
            reason: reason.to_string(),
        },
        timeout,
    );
}

/// Serves one control connection: handshake, one test, its results.
fn control(
    state: &State,
    connection: &TcpStream,
    peer: SocketAddr,
    version: u32,
    client_nonce: &str,
    ticket: Ticket,
) -> Result<(), String> {
    let timeout = state.config.idle_timeout;
    let fail = |reason: String| {
        refuse(connection, &reason, timeout);
        Err(reason)
    };
    if version != PROTOCOL {
        return fail(format!(
            "protocol version {version} is not spoken here (this server speaks {PROTOCOL})"
        ));
    }
    if client_nonce.len() != 64 || !client_nonce.bytes().all(|b| b.is_ascii_hexdigit()) {
        return fail("the client nonce must be 32 bytes in hex".into());
    }
    if let Some(reason) = busy(state) {
        return tell_busy(connection, reason, timeout);
    }
    let receive =
        || protocol::receive(connection, MAX_REQUEST_BYTES, timeout).map_err(|e| e.to_string());
    let send =
        |message: &Message| protocol::send(connection, message, timeout).map_err(|e| e.to_string());
    let server_proof = match &state.config.key {
        Some(key) => {
            let server_nonce = auth::nonce();
            send(&Message::Challenge {
                server_nonce: server_nonce.clone(),
            })?;
            match receive()? {
                Message::Auth { client_proof }
                    if key.verify("client", client_nonce, &server_nonce, &client_proof) =>
                {
                    Some(key.proof("server", client_nonce, &server_nonce))
                }
                Message::Auth { .. } => return fail("wrong key".into()),
                other => return fail(format!("expected auth, got {}", other.name())),
            }
        }
        None => None,
    };
    send(&Message::Welcome {
        server_proof,
        limits: state.config.limits,
    })?;
    let request = match receive()? {
        Message::Start(request) => request,
        other => return fail(format!("expected start, got {}", other.name())),
    };
    if let Err(reason) = check(&request, &state.config.limits) {
        return fail(reason);
    }
    let Some(slot) = take_slot(state) else {
        let reason = busy(state).unwrap_or_else(|| "no test slot is free".into());
        return tell_busy(connection, reason, timeout);
    };
    // The test slot bounds this connection from here on.
    drop(ticket);
    let cookie = auth::nonce()[..32].to_string();
    let (route, arrivals) = channel();
    state
        .routes
        .lock()
        .expect("routes lock")
        .insert(cookie.clone(), route);
    // Announced before the client hears the cookie, so its data connections get in.
    let wanted = request.direction.connections(request.streams);
    state.admission.expect(peer.ip(), wanted);
    let gathered = send(&Message::Accepted {
        cookie: cookie.clone(),
    })
    .and_then(|()| gather(&request, &arrivals, timeout));
    state.routes.lock().expect("routes lock").remove(&cookie);
    let connections = match gathered {
        Ok(connections) => connections,
        Err(reason) => {
            state.admission.forget(peer.ip(), wanted);
            return fail(reason);
        }
    };
    // The client may set up other workloads (a disk's files) before it says go: wait
    // as long as a test may last, not just an idle spell.
    let go_timeout = timeout.max(Duration::from_millis(state.config.limits.max_duration_ms));
    match protocol::receive(connection, MAX_REQUEST_BYTES, go_timeout).map_err(|e| e.to_string())? {
        Message::Go => {}
        other => return fail(format!("expected go, got {}", other.name())),
    }
    let start = Instant::now();
    let planned = match request.duration_ms {
        Some(ms) if request.bytes_per_stream.is_none() => ms,
        _ => state.config.limits.max_duration_ms,
    };
    let hard_stop = start + Duration::from_millis(planned) + GRACE;
    // The client's control connection closing mid-test means it is gone: stop.
    let _ = connection.set_nonblocking(true);
    let client_gone = || {
        let mut byte = [0u8; 1];
        matches!(connection.peek(&mut byte), Ok(0))
            || matches!(&connection.peek(&mut byte), Err(e) if e.kind() != std::io::ErrorKind::WouldBlock)
    };
    let report = session::run(connections, &request, start, hard_stop, None, &client_gone);
    let _ = connection.set_nonblocking(false);
    drop(slot);
    let received: u64 = report
        .streams
        .iter()
        .filter(|s| s.role == Role::Receive)
        .map(|s| s.bytes)
        .sum();
    let sent: u64 = report
        .streams
        .iter()
        .filter(|s| s.role == Role::Send)
        .map(|s| s.bytes)
        .sum();
    (state.log)(&format!(
        "{peer}: test of {} streams {:?}: received {received} bytes, sent {sent} bytes in {:.2} s",
        request.streams, request.direction, report.wall_seconds
    ));
    let sent = send(&Message::Results(Box::new(report)));
    // Counted once the results are out, so `--once` never exits while sending them.
    state.served.fetch_add(1, Ordering::SeqCst);
    sent
}

/// Answers "busy" with `reason`; the connection then closes, as the result says.
fn tell_busy(connection: &TcpStream, reason: String, timeout: Duration) -> Result<(), String> {
    let logged = format!("busy: {reason}");
    let _ = protocol::send(connection, &Message::Busy { reason }, timeout);
    Err(logged)
}

/// Why no test can start now, if none can.
fn busy(state: &State) -> Option<String> {
    let running = state.running.load(Ordering::SeqCst);
    (running >= state.config.max_tests).then(|| {
        format!(
            "{running} test{} running; this server runs {} at a time",
            if running == 1 { " is" } else { "s are" },
            state.config.max_tests
        )
    })
}

fn take_slot(state: &State) -> Option<Slot<'_>> {
    state
        .running
        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
            (n < state.config.max_tests).then_some(n + 1)
        })
        .ok()
        .map(|_| Slot(&state.running))
}

/// Checks a request against the server's bounds; the reason names the bound.
pub fn check(request: &TestRequest, limits: &Limits) -> Result<(), String> {
    if request.streams == 0 || request.streams > limits.max_streams {
        return Err(format!(
            "{} streams asked for; this server allows 1 to {}",
            request.streams, limits.max_streams
        ));
    }
    let connections = u64::from(request.direction.connections(request.streams));
    let duration_ms = match (request.duration_ms, request.bytes_per_stream) {
        (Some(ms), None) => {
            if ms == 0 || ms > limits.max_duration_ms {
                return Err(format!(
                    "a test of {ms} ms asked for; this server allows up to {} ms",
                    limits.max_duration_ms
                ));
            }
            ms
        }
        (None, Some(bytes)) => {
            let total = bytes.saturating_mul(connections);
            if bytes == 0 || total > limits.max_bytes {
                return Err(format!(
                    "a test of {total} bytes asked for; this server allows up to {}",
                    limits.max_bytes
                ));
            }
            limits.max_duration_ms
        }
        _ => return Err("a test is bounded by a duration or by bytes, one of the two".into()),
    };
    if request.block_bytes == 0 || request.block_bytes > MAX_BLOCK_BYTES {
        return Err(format!(
            "a block of {} bytes asked for; this server allows 1 to {MAX_BLOCK_BYTES}",
            request.block_bytes
        ));
    }
    if request.window_bytes.is_some_and(|w| w == 0 || w > 1 << 30) {
        return Err("a window must be 1 byte to 1 GiB".into());
    }
    if request.interval_ms == 0
        // Receivers keep reporting until their streams end, up to the grace past the test.
        || ((duration_ms + GRACE.as_millis() as u64) / request.interval_ms + 2)
            .saturating_mul(connections)
            > MAX_INTERVALS
    {
        return Err(format!(
            "an interval of {} ms gives too many reports; this server allows {MAX_INTERVALS} in all",
            request.interval_ms
        ));
    }
    Ok(())
}

/// Waits for every data connection of a test, each stream once.
fn gather(
    request: &TestRequest,
    arrivals: &Receiver<(u32, TcpStream)>,
    timeout: Duration,
) -> Result<Vec<Connection>, String> {
    let wanted = request.direction.connections(request.streams);
    let deadline = Instant::now() + timeout;
    let mut connections: Vec<Connection> = Vec::new();
    while connections.len() < wanted as usize {
        let left = deadline.saturating_duration_since(Instant::now());
        let (stream, socket) = arrivals.recv_timeout(left).map_err(|_| {
            format!(
                "{} of {wanted} data connections arrived within {timeout:?}",
                connections.len()
            )
        })?;
        if stream >= wanted || connections.iter().any(|c| c.stream == stream) {
            return Err(format!(
                "data connection for stream {stream}, which is out of range or taken"
            ));
        }
        if let Some(window) = request.window_bytes {
            let _ = super::socket::set_window(&socket, window);
        }
        let role = if request.direction.client_sends(stream, request.streams) {
            Role::Receive
        } else {
            Role::Send
        };
        connections.push(Connection::new(
            stream,
            role,
            socket,
            request.block_bytes as usize,
        ));
    }
    Ok(connections)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::net::Direction;

    fn request() -> TestRequest {
        TestRequest {
            streams: 2,
            direction: Direction::Forward,
            duration_ms: Some(10_000),
            bytes_per_stream: None,
            block_bytes: 128 << 10,
            window_bytes: None,
            interval_ms: 1000,
        }
    }

    const LIMITS: Limits = Limits {
        max_streams: 4,
        max_duration_ms: 60_000,
        max_bytes: 1 << 30,
    };

    #[test]
    fn requests_within_the_bounds_pass_and_others_name_the_bound() {
        assert_eq!(check(&request(), &LIMITS), Ok(()));
        let refused = |change: &dyn Fn(&mut TestRequest)| {
            let mut r = request();
            change(&mut r);
            check(&r, &LIMITS).unwrap_err()
        };
        assert!(refused(&|r| r.streams = 5).contains("1 to 4"));
        assert!(refused(&|r| r.duration_ms = Some(120_000)).contains("up to 60000 ms"));
        assert!(
            refused(&|r| {
                r.duration_ms = None;
                r.bytes_per_stream = Some(1 << 29);
                r.direction = Direction::Bidir;
            })
            .contains("2147483648 bytes")
        );
        assert!(refused(&|r| r.bytes_per_stream = Some(1)).contains("one of the two"));
        assert!(refused(&|r| r.block_bytes = 0).contains("block"));
        assert!(
            refused(&|r| {
                r.duration_ms = Some(60_000);
                r.interval_ms = 1;
            })
            .contains("too many reports")
        );
    }
}
