//! The data phase of a test served to an iperf3 client: its connections gathered in
//! the order the server accepted them, the test's options set on each (or the test
//! refused in iperf3's words), the streams run until the client's TEST_END, and their
//! figures taken as iperf3's server takes them.

use std::io::Read;
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

use super::admit::Admitted;
use super::{Refusal, refused, write};
use crate::workload::net::iperf3::CpuClock;
use crate::workload::net::iperf3::errors::code;
use crate::workload::net::iperf3::wire::{COOKIE_BYTES, State as Wire};
use crate::workload::net::options::{self, OptionError};
use crate::workload::net::protocol::TestRequest;
use crate::workload::net::report::SideReport;
use crate::workload::net::server::closed::Closed;
use crate::workload::net::server::{Arrival, Route, State};
use crate::workload::net::session::{self, Connection, Crossed, GRACE};
use crate::workload::net::stream::{Ending, Handover};

/// Says CREATE_STREAMS and gathers the test's data connections, numbered in the order
/// the server accepted them, as iperf3's server numbers them (its client connects them
/// one by one, each once the last is up), with the test's options set on each.
pub(super) fn gather(
    state: &State,
    connection: &TcpStream,
    peer: SocketAddr,
    cookie: &str,
    admitted: &Admitted,
) -> Result<Vec<Connection>, Refusal> {
    let timeout = state.config.idle_timeout;
    let (to, arrivals) = std::sync::mpsc::channel();
    let route = Route {
        to,
        client: peer.ip(),
    };
    state.routes().insert(cookie.to_string(), route);
    let request = &admitted.request;
    let wanted = request.direction.connections(request.streams);
    state.admission.expect(peer.ip(), wanted);
    let gathered = write(connection, &[Wire::CreateStreams.byte()], timeout)
        .map_err(Refusal::from)
        .and_then(|()| arrive(admitted, connection, &arrivals, timeout));
    state.routes().remove(cookie);
    if gathered.is_err() {
        state.admission.forget(peer.ip(), wanted);
    }
    gathered
}

/// Gathers the data connections as they come, until all have, the client closes its
/// control connection (it failed on its side, as iperf3 does when it cannot set its
/// own socket options), or `timeout` passes.
fn arrive(
    admitted: &Admitted,
    connection: &TcpStream,
    arrivals: &Receiver<Arrival>,
    timeout: Duration,
) -> Result<Vec<Connection>, Refusal> {
    let request = &admitted.request;
    let wanted = request.direction.connections(request.streams);
    let deadline = Instant::now() + timeout;
    let mut arrived = Vec::new();
    while arrived.len() < wanted as usize {
        let left = deadline.saturating_duration_since(Instant::now());
        match arrivals.recv_timeout(left.min(Duration::from_millis(20))) {
            Ok(arrival) => arrived.push(arrival),
            Err(_) if left.is_zero() => {
                return Err(Refusal::from(Closed::DataMissing {
                    arrived: arrived.len(),
                    wanted,
                    timeout,
                }));
            }
            Err(_) if gave_up(connection) => {
                return Err(Refusal::from(Closed::OutOfBounds(format!(
                    "the iperf3 client gave up after {} of {wanted} data connections",
                    arrived.len()
                ))));
            }
            Err(_) => {}
        }
    }
    arrived.sort_by_key(|a| a.accepted);
    (0..wanted)
        .zip(arrived)
        .map(|(stream, Arrival { socket, .. })| {
            set_options(admitted, &socket)?;
            Ok(Connection::at_server(request, stream, socket))
        })
        .collect()
}

/// Sets what the test asks on one data connection, or refuses it in iperf3's words.
fn set_options(admitted: &Admitted, socket: &TcpStream) -> Result<(), Refusal> {
    // The MSS of the far end's segments was agreed at the handshake; this bounds ours.
    let mss = admitted.mss.map_or(Ok(()), |m| options::set_mss(socket, m));
    let window = admitted
        .request
        .window_bytes
        .map_or(Ok(()), |w| options::set_window(socket, w));
    // Nagle's algorithm stays on unless the client asked otherwise (-N), as with iperf3.
    let nodelay = socket
        .set_nodelay(admitted.options.nodelay)
        .map_err(OptionError::Nodelay);
    mss.and(window)
        .and(nodelay)
        .and_then(|()| admitted.options.apply(socket))
        .map_err(|e| {
            let code = match &e {
                OptionError::Congestion { .. } => code::SET_CONGESTION,
                OptionError::Pacing(_) => code::SET_PACING,
                OptionError::Tos(_) => code::SET_TOS,
                OptionError::TrafficClass(_) => code::SET_CLASS,
                OptionError::Nodelay(_) => code::SET_NODELAY,
                OptionError::DontFragment(_) => code::SET_DONT_FRAGMENT,
                OptionError::Mss(_) => code::SET_MSS,
                OptionError::Window(_) => code::SET_BUFFER,
                OptionError::WindowShort { .. } => code::SET_BUFFER_SHORT,
            };
            refused(code, format!("a data connection's {e}"))
        })
}

/// Starts the test, runs the streams until the client's TEST_END, and says what they
/// measured as iperf3's server counts it: every stream's time runs from TEST_START to
/// TEST_END (bytes a stream read after it are not counted).
pub(super) fn run_streams(
    state: &State,
    connection: &TcpStream,
    admitted: &Admitted,
    connections: Vec<Connection>,
) -> Result<(SideReport, CpuClock), Refusal> {
    let timeout = state.config.idle_timeout;
    let request = &admitted.request;
    let Begun {
        start,
        planned,
        hard_stop,
        clock,
    } = begin(state, connection, request)?;
    let session_request = TestRequest {
        // A test of time: the senders stop at its end by this clock, which started
        // before the client's (at TEST_RUNNING's arrival), so what they sent is on its
        // way before the client stops counting. Sending on until its TEST_END (as iperf3's
        // server does) counted as sent what the client then drains uncounted: 1.1-1.75%
        // of a 3 s loopback test against iperf 3.12, 50 ms of sending. A test of bytes or
        // blocks ends by its count, within the bound.
        duration_ms: Some(
            request
                .duration_ms
                .unwrap_or(planned + GRACE.as_millis() as u64),
        ),
        ..request.clone()
    };
    let handover = Handover::new(None);
    let stop = AtomicBool::new(false);
    let stopping = || state.stopping.load(Ordering::SeqCst);
    let test = session::Run {
        request: &session_request,
        start,
        hard_stop,
        ending: Ending::Handover(&handover),
        options: &admitted.options,
    };
    let wire = Crossed::watch(&connections, 0, COOKIE_BYTES as u64);
    let (local, ended) = std::thread::scope(|scope| {
        let streams = scope
            .spawn(|| session::run(connections, &test, None, &|| stop.load(Ordering::Relaxed)));
        let ended = await_end(connection, hard_stop, &stopping);
        // What the senders had delivered when the client ended the test is what they
        // sent, and what had arrived for the receivers is what they received: it
        // stopped counting then.
        let sent = wire.now();
        if matches!(ended, End::Stopping) {
            tell_stopping(connection, timeout);
        }
        stop.store(true, Ordering::Relaxed);
        let mut local = streams.join().expect("the stream threads do not panic");
        Crossed::count(&mut local, &sent, &sent);
        (local, ended)
    });
    Ok((timed(ended, start, local)?, clock))
}

/// A served test's start at this end.
pub(super) struct Begun {
    /// When TEST_START was said.
    pub start: Instant,
    /// The test's planned milliseconds: its duration, or the server's bound.
    pub planned: u64,
    /// No stream runs past this, whatever the client does.
    pub hard_stop: Instant,
    /// This process's CPU time from the start.
    pub clock: CpuClock,
}

/// Says TEST_START and TEST_RUNNING, and when the test must be over.
pub(super) fn begin(
    state: &State,
    connection: &TcpStream,
    request: &TestRequest,
) -> Result<Begun, Refusal> {
    let clock = CpuClock::start();
    let start = Instant::now();
    write(
        connection,
        &[Wire::TestStart.byte(), Wire::TestRunning.byte()],
        state.config.idle_timeout,
    )?;
    let planned = request
        .duration_ms
        .unwrap_or(state.config.limits.max_duration_ms);
    Ok(Begun {
        start,
        planned,
        hard_stop: start + Duration::from_millis(planned) + GRACE,
        clock,
    })
}

/// Tells the client the server is stopping, before its streams close, as iperf3's
/// server does on a signal, so the client reports the stop rather than a broken
/// stream; its streams run on until the client has read that and hung up (closed at
/// once, they would break the client's writes before it reads the news).
pub(super) fn tell_stopping(connection: &TcpStream, timeout: Duration) {
    let _ = write(connection, &[Wire::ServerTerminate.byte()], timeout);
    await_hangup(connection, Instant::now() + TOLD);
}

/// This end's streams as iperf3's server times them, each from TEST_START (`start`)
/// to the client's TEST_END; or why the test did not end so.
pub(super) fn timed(
    ended: End,
    start: Instant,
    mut local: SideReport,
) -> Result<SideReport, Refusal> {
    match ended {
        End::Asked(at) => {
            let seconds = at.duration_since(start).as_secs_f64();
            for stream in &mut local.streams {
                stream.seconds = seconds;
            }
            local.wall_seconds = seconds;
            Ok(local)
        }
        End::Stopping => Err(Closed::Stopping.into()),
        End::Gone(why) => Err(Closed::OutOfBounds(format!("the iperf3 client {why}")).into()),
    }
}

/// How the test's data phase ended.
pub(super) enum End {
    /// The client sent TEST_END, read at this instant.
    Asked(Instant),
    /// The server is stopping.
    Stopping,
    /// The client left, or said something else; says what.
    Gone(String),
}

/// Watches the control connection for the client's TEST_END, until the hard stop.
pub(super) fn await_end(
    connection: &TcpStream,
    hard_stop: Instant,
    stopping: &dyn Fn() -> bool,
) -> End {
    let _ = connection.set_read_timeout(Some(Duration::from_millis(50)));
    let mut byte = [0u8; 1];
    let mut reader = connection;
    loop {
        if stopping() {
            return End::Stopping;
        }
        if Instant::now() >= hard_stop {
            return End::Gone("did not end the test in time".into());
        }
        match reader.read(&mut byte) {
            // A stop that came while this waited is the reason, whatever the client did.
            _ if stopping() => return End::Stopping,
            Ok(0) => return End::Gone("closed the connection during the test".into()),
            Ok(_) => {
                return match Wire::from_byte(byte[0]) {
                    Wire::TestEnd => End::Asked(Instant::now()),
                    Wire::ClientTerminate => End::Gone("was stopped (CLIENT_TERMINATE)".into()),
                    Wire::IperfDone => End::Gone("ended early (IPERF_DONE)".into()),
                    other => End::Gone(format!(
                        "sent state byte {} ({other:?}) during the test",
                        byte[0] as i8
                    )),
                };
            }
            Err(e) if waiting(&e) => {}
            Err(e) => return End::Gone(format!("failed: {e}")),
        }
    }
}

/// How long a client told SERVER_TERMINATE has to hang up before its streams close.
const TOLD: Duration = Duration::from_secs(1);

/// Waits until the client closes `connection` (or it fails), or until `deadline`.
fn await_hangup(connection: &TcpStream, deadline: Instant) {
    let _ = connection.set_read_timeout(Some(Duration::from_millis(20)));
    let mut byte = [0u8; 1];
    let mut reader = connection;
    while Instant::now() < deadline {
        match reader.read(&mut byte) {
            Ok(0) => return,
            Ok(_) => {}
            Err(e) if waiting(&e) => {}
            Err(_) => return,
        }
    }
}

/// Whether a read failed only because nothing came in time.
fn waiting(e: &std::io::Error) -> bool {
    use std::io::ErrorKind::{Interrupted, TimedOut, WouldBlock};
    matches!(e.kind(), WouldBlock | TimedOut | Interrupted)
}

/// Whether the client closed `connection` or said anything on it while its streams
/// gather: it says nothing then unless it failed on its side (iperf3 does when it
/// cannot set its own socket options).
pub(super) fn gave_up(connection: &TcpStream) -> bool {
    let _ = connection.set_nonblocking(true);
    let mut byte = [0u8; 1];
    let said = !matches!(
        connection.peek(&mut byte),
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock
    );
    let _ = connection.set_nonblocking(false);
    said
}
