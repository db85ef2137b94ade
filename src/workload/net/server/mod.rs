//! `ratelab net serve`: a server that is safe to leave running. Tests are bounded in
//! streams, time, bytes and memory; only `max_tests` run at once and the rest hear
//! "busy"; a key, when set, is proven by challenge and response, and nothing (a slot,
//! a place in the admission book, a `--once` count) is held for a connection before it
//! proves itself; every connection has deadlines for each message, so a silent or
//! trickling peer is cut off; anything malformed closes that one connection with a
//! logged reason, text from the wire escaped, and the server serves on. When it is
//! told to stop, its tests end at once and their clients hear why before it returns.

pub(in crate::workload::net) mod closed;
mod exchange;
mod journal;
pub(in crate::workload::net) mod routes;
pub(in crate::workload::net) mod slots;
mod stop;

use std::collections::HashMap;
use std::io::Write as _;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use self::journal::Journal;
use super::admission::Admission;
use super::iperf3::login::Authority;
use super::key::Key;
use super::protocol::{Direction, Limits, Message, TestRequest};
use super::session::GRACE;

/// Pause after a failed accept (out of descriptors), so the loop does not spin.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);
/// Refused connections being told "busy" at once, at most; past that they are closed.
const MAX_ANSWERING: usize = 8;
/// Longest wait for a refused connection's first bytes, to answer in its protocol.
const ANSWER_WAIT: Duration = Duration::from_millis(300);
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
    /// Stop after one test asked for by a client that proved itself, served or refused,
    /// as `iperf3 -s -1` does.
    pub once: bool,
    /// The credentials iperf3 clients must present, as `iperf3 -s` checks them; with a
    /// `key` and none of these, iperf3 clients are refused.
    pub iperf3_authority: Option<Arc<Authority>>,
}

/// Begins the record of each test served to an iperf3 client as the test starts, given
/// this end's address (ratelab's own clients store their runs themselves).
pub type Recorder = Arc<dyn Fn(Option<std::net::IpAddr>) -> Record + Send + Sync>;

/// Where one served test's run goes, as measured and not yet concluded; dropped unused
/// when the test is refused.
pub type Record = Box<dyn FnOnce(crate::document::RunDocument) + Send>;

/// What the server tells its operator, one line per event.
pub type Log = Arc<dyn Fn(&str) + Send + Sync>;

/// A bound server, ready to serve.
pub struct Server {
    listener: TcpListener,
    state: Arc<State>,
}

/// A data connection on its way to the test its cookie names. Each connection is
/// served by its own thread, so connections reach their test in the order their
/// threads get there, not the order they came: `accepted` keeps the latter.
pub(in crate::workload::net) struct Arrival {
    /// The stream it carries, as a ratelab client names it; iperf3's clients do not
    /// name it, and their streams are numbered in the order they were accepted.
    pub(in crate::workload::net) stream: Option<u32>,
    /// Where it came from: a test takes data connections from its client's address only.
    pub(in crate::workload::net) peer: std::net::IpAddr,
    /// Its place in the order the server accepted connections.
    pub(in crate::workload::net) accepted: u64,
    pub(in crate::workload::net) socket: TcpStream,
}

/// What the accept loop shares with every connection's thread.
pub(in crate::workload::net) struct State {
    pub(in crate::workload::net) config: ServeConfig,
    pub(in crate::workload::net) journal: Journal,
    pub(in crate::workload::net) running: AtomicUsize,
    pub(in crate::workload::net) admission: Admission,
    /// Refused connections being told so.
    pub(in crate::workload::net) answering: AtomicUsize,
    /// Tests asked for by clients that proved themselves, ended, served or refused.
    pub(in crate::workload::net) ended: AtomicUsize,
    pub(in crate::workload::net) routes: Mutex<HashMap<String, Route>>,
    /// Set when the server is told to stop: running tests end and say so.
    pub(in crate::workload::net) stopping: AtomicBool,
    /// Where iperf3 clients' tests are stored, if anywhere.
    pub(in crate::workload::net) recorder: Option<Recorder>,
}

/// Where a test gathering its data connections takes them: from its client's address.
pub(in crate::workload::net) struct Route {
    pub(in crate::workload::net) to: Sender<Arrival>,
    pub(in crate::workload::net) client: std::net::IpAddr,
}

impl State {
    /// The tests gathering their data connections, by cookie. A thread that panicked
    /// while holding them left them whole, so the server serves on.
    pub(in crate::workload::net) fn routes(
        &self,
    ) -> std::sync::MutexGuard<'_, HashMap<String, Route>> {
        self.routes
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
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
                journal: Journal::new(log),
                running: AtomicUsize::new(0),
                admission: Admission::default(),
                answering: AtomicUsize::new(0),
                ended: AtomicUsize::new(0),
                routes: Mutex::new(HashMap::new()),
                stopping: AtomicBool::new(false),
                recorder: None,
            }),
        })
    }

    /// The server, storing the run of each test it serves to an iperf3 client through
    /// `recorder`.
    pub fn recording(mut self, recorder: Recorder) -> Server {
        if let Some(state) = Arc::get_mut(&mut self.state) {
            state.recorder = Some(recorder);
        }
        self
    }

    /// The address it listens on (with the port the system chose for port 0).
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Serves until `stop` says so, or after one test with `once`. A stop ends the tests
    /// running, which tell their clients the server is stopping, and returns once they
    /// have (or after a bound of a few seconds).
    pub fn serve(&self, stop: &dyn Fn() -> bool) -> std::io::Result<()> {
        self.listener.set_nonblocking(true)?;
        let tick = rustix::time::Timespec {
            tv_sec: 0,
            tv_nsec: 100_000_000,
        };
        let mut refused_accepts = 0u64;
        let mut accepted = 0u64;
        let mut last_accept_log: Option<Instant> = None;
        loop {
            self.state.journal.settle(false);
            if stop() {
                stop::wind_down(&self.state);
                self.state.journal.settle(true);
                return Ok(());
            }
            if self.state.config.once && self.state.ended.load(Ordering::SeqCst) > 0 {
                self.state.journal.settle(true);
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
                    Ok((connection, peer)) => {
                        self.admit(connection, peer, accepted);
                        accepted += 1;
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                    // A connection that died before accept, or no descriptors left: log
                    // it (once a second at most), pause, and keep serving.
                    Err(e) => {
                        refused_accepts += 1;
                        if last_accept_log.is_none_or(|t| t.elapsed() >= Duration::from_secs(1)) {
                            self.state.journal.say(&format!(
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

    /// Lets in the `accepted`-th connection, served by a thread of its own; one the
    /// server has no room for hears "busy", in its own protocol.
    fn admit(&self, connection: TcpStream, peer: SocketAddr, accepted: u64) {
        let state = Arc::clone(&self.state);
        let ticket = match state
            .admission
            .admit(&connection, peer.ip(), &|from, line| {
                state.journal.unproven(from, &line)
            }) {
            Ok(ticket) => ticket,
            Err(reason) => {
                state
                    .journal
                    .unproven(peer.ip(), &format!("{peer}: closed: busy: {reason}"));
                answer_busy(&state, connection, reason);
                return;
            }
        };
        let spawned = std::thread::Builder::new()
            .name("net-connection".into())
            .spawn(move || exchange::serve(&state, connection, peer, ticket, accepted));
        if let Err(e) = spawned {
            self.state
                .journal
                .say(&format!("{peer}: closed: cannot start a thread: {e}"));
        }
    }
}

/// Tells a connection the server has no room for that it is busy, as its protocol
/// says it (iperf3's ACCESS_DENIED, or ratelab's busy with `reason`), from a thread of
/// its own, a few at a time; past that it is closed unanswered.
fn answer_busy(state: &Arc<State>, connection: TcpStream, reason: String) {
    let taken = state
        .answering
        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
            (n < MAX_ANSWERING).then_some(n + 1)
        });
    if taken.is_err() {
        return;
    }
    let held = Arc::clone(state);
    let spawned = std::thread::Builder::new()
        .name("net-busy".into())
        .spawn(move || {
            let _ = connection.set_nonblocking(false);
            let _ = connection.set_read_timeout(Some(ANSWER_WAIT));
            let mut first = [0u8; 1];
            let iperf3 = matches!(connection.peek(&mut first), Ok(1))
                && super::iperf3::wire::looks_like_cookie(&first);
            if iperf3 {
                let _ = connection.set_write_timeout(Some(ANSWER_WAIT));
                let _ = (&connection).write_all(&[super::iperf3::wire::State::AccessDenied.byte()]);
            } else {
                let _ = super::protocol::send(&connection, &Message::Busy { reason }, ANSWER_WAIT);
            }
            held.answering.fetch_sub(1, Ordering::SeqCst);
        });
    if spawned.is_err() {
        state.answering.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A test as the log says it: `1 stream, client to server`, `4 streams each way`.
pub(in crate::workload::net) fn test_words(request: &TestRequest) -> String {
    let n = request.streams;
    let streams = format!("{n} stream{}", if n == 1 { "" } else { "s" });
    match request.direction {
        Direction::Forward => format!("{streams}, client to server"),
        Direction::Reverse => format!("{streams}, server to client"),
        Direction::Bidir => format!("{streams} each way"),
    }
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
                    "a test of {} asked for; this server allows up to {}",
                    crate::vocab::units::format_size(total),
                    crate::vocab::units::format_size(limits.max_bytes)
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
    memory(request, limits)?;
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

/// Checks the memory a request's blocks take (one block per connection) against the
/// server's budget for a test; the reason gives both figures.
pub fn memory(request: &TestRequest, limits: &Limits) -> Result<(), String> {
    let connections = u64::from(request.direction.connections(request.streams));
    let needed = request.block_bytes.saturating_mul(connections);
    if needed > limits.max_memory_bytes {
        return Err(format!(
            "a test of {connections} connection{} with {} blocks would take {} of memory; \
             this server allows {} per test (--max-memory)",
            if connections == 1 { "" } else { "s" },
            crate::vocab::units::format_size(request.block_bytes),
            crate::vocab::units::format_size(needed),
            crate::vocab::units::format_size(limits.max_memory_bytes)
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request() -> TestRequest {
        TestRequest {
            streams: 2,
            direction: Direction::Forward,
            duration_ms: Some(10_000),
            bytes_per_stream: None,
            block_bytes: 128 << 10,
            window_bytes: None,
            interval_ms: 1000,
            udp: None,
        }
    }

    const LIMITS: Limits = Limits {
        max_streams: 4,
        max_duration_ms: 60_000,
        max_bytes: 1 << 30,
        max_memory_bytes: 64 << 20,
    };

    #[test]
    fn a_test_is_logged_in_words() {
        let said = |streams, direction| {
            test_words(&TestRequest {
                streams,
                direction,
                ..request()
            })
        };
        assert_eq!(said(1, Direction::Forward), "1 stream, client to server");
        assert_eq!(said(2, Direction::Reverse), "2 streams, server to client");
        assert_eq!(said(4, Direction::Bidir), "4 streams each way");
    }

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
            .contains("a test of 2 GiB asked for")
        );
        assert!(refused(&|r| r.bytes_per_stream = Some(1)).contains("one of the two"));
        assert!(refused(&|r| r.block_bytes = 0).contains("block"));
        assert_eq!(
            refused(&|r| {
                r.streams = 4;
                r.direction = Direction::Bidir;
                r.block_bytes = 16 << 20;
            }),
            "a test of 8 connections with 16 MiB blocks would take 128 MiB of memory; \
             this server allows 64 MiB per test (--max-memory)"
        );
        assert!(
            refused(&|r| {
                r.duration_ms = Some(60_000);
                r.interval_ms = 1;
            })
            .contains("too many reports")
        );
    }
}
