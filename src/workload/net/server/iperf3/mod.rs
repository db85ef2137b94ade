//! The server's side of a test for an iperf3 client (`iperf3 -c`, 3.12 to 3.22): told
//! apart from a ratelab client by its first bytes, a cookie. The same bounds hold as
//! for ratelab's clients (streams, time, bytes, one test at a time, deadlines for every
//! message, the per-address limits). Every parameter is honoured or refused in
//! iperf3's words (`admit`), credentials are checked as `iperf3 -s` checks them, the
//! data connections are numbered in the order they were accepted, as iperf3's server
//! numbers them, and the test is measured as iperf3's server measures it: from
//! TEST_START to the client's TEST_END, counting what arrived before it. The test is
//! stored as a run with both ends, the client's from its own results, and incomplete
//! when the two ends disagree.

mod admit;

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

use serde_json::Value;

use self::admit::{Admitted, Refused};
use super::exchange::{Closed, busy, route, take_slot};
use super::{Arrival, State};
use crate::document::{RunDocument, RunStatus, WorkloadRecord, now_rfc3339};
use crate::workload::net::admission::Ticket;
use crate::workload::net::iperf3::auth::{AuthError, Padding};
use crate::workload::net::iperf3::errors::code;
use crate::workload::net::iperf3::wire::{
    self, COOKIE_BYTES, MAX_PARAMS_BYTES, MAX_RESULTS_BYTES, Params, Results, State as Wire,
};
use crate::workload::net::iperf3::{CpuClock, our_results, remote_items, remote_report};
use crate::workload::net::item::{self, Side};
use crate::workload::net::options::{self, OptionError};
use crate::workload::net::protocol::{DecodeError, TestRequest, WireError};
use crate::workload::net::report::{self, Role, SideReport};
use crate::workload::net::session::{self, Connection, GRACE, OnTheWire};
use crate::workload::net::stream::{Ending, Handover};
use crate::workload::net::{NetContext, NetPlan};

/// Serves a connection whose first bytes are an iperf3 cookie, the `accepted`-th the
/// server took: a data connection of a test gathering its streams, or a new test's
/// control connection.
pub(super) fn handle(
    state: &State,
    connection: TcpStream,
    peer: SocketAddr,
    ticket: Ticket,
    accepted: u64,
    timeout: Duration,
) -> Result<(), Closed> {
    let mut cookie = [0u8; COOKIE_BYTES];
    read_exact(&connection, &mut cookie, timeout).map_err(Closed::FirstMessage)?;
    if !wire::looks_like_cookie(&cookie) {
        return Err(Closed::Misplaced(
            "bytes that are neither ratelab's nor iperf3's",
        ));
    }
    ticket.spoken();
    let name = String::from_utf8_lossy(&cookie[..COOKIE_BYTES - 1]).into_owned();
    if state.routes().contains_key(&name) {
        drop(ticket);
        let arrival = Arrival {
            stream: None,
            accepted,
            socket: connection,
        };
        return route(state, &name, arrival);
    }
    control(state, &connection, peer, &name, ticket)
}

/// Why an iperf3 test was refused or failed: what the log says, and the code the
/// client hears, if it is told.
struct Refusal {
    closed: Closed,
    code: Option<i32>,
}

impl From<Closed> for Refusal {
    fn from(closed: Closed) -> Refusal {
        Refusal { closed, code: None }
    }
}

impl From<WireError> for Refusal {
    fn from(e: WireError) -> Refusal {
        Refusal::from(Closed::Wire(e))
    }
}

impl From<Refused> for Refusal {
    fn from(refused: Refused) -> Refusal {
        Refusal {
            closed: Closed::OutOfBounds(refused.reason),
            code: Some(refused.code),
        }
    }
}

fn refused(code: i32, reason: impl Into<String>) -> Refusal {
    Refusal::from(Refused {
        reason: reason.into(),
        code,
    })
}

/// One iperf3 test on its control connection, from the parameters to the results.
/// Whatever happens once the client asked for a test ends it, served or not, so
/// `--once` stops after it as `iperf3 -s -1` does.
fn control(
    state: &State,
    connection: &TcpStream,
    peer: SocketAddr,
    cookie: &str,
    ticket: Ticket,
) -> Result<(), Closed> {
    let timeout = state.config.idle_timeout;
    // As iperf3 does, a busy server says so at once, before the parameters.
    let Some(slot) = take_slot(state) else {
        let _ = write(connection, &[Wire::AccessDenied.byte()], timeout);
        return Err(Closed::Busy(
            busy(state).unwrap_or_else(|| "no test slot is free".into()) + " (iperf3 client)",
        ));
    };
    drop(ticket);
    let started_at = now_rfc3339();
    let outcome = test(state, connection, peer, cookie);
    drop(slot);
    if let Err(Refusal {
        code: Some(code), ..
    }) = &outcome
    {
        let mut bytes = vec![Wire::ServerError.byte()];
        bytes.extend_from_slice(&code.to_be_bytes());
        bytes.extend_from_slice(&0i32.to_be_bytes());
        let _ = write(connection, &bytes, timeout);
    }
    // A 3.21 or later client waits for this end to close before it returns.
    let _ = connection.shutdown(Shutdown::Both);
    let ended = match outcome {
        Ok(done) => {
            (state.log)(&format!(
                "{peer}: iperf3 test of {}: received {} bytes, sent {} bytes in {:.2} s",
                super::test_words(&done.request),
                done.local.moved(Role::Receive),
                done.local.moved(Role::Send),
                done.local.wall_seconds
            ));
            if let Some(reason) = &done.disagreement {
                (state.log)(&format!("{peer}: stored incomplete: {reason}"));
            }
            if let Some(record) = &state.recorder {
                record(document(peer, &done, started_at));
            }
            Ok(())
        }
        Err(refusal) => Err(refusal.closed),
    };
    // Counted once the run is stored, so `--once` never exits while storing it.
    state.ended.fetch_add(1, Ordering::SeqCst);
    ended
}

/// What an iperf3 test served here measured.
struct Served {
    /// This end's address on the connection, to find the interface the test used.
    local_ip: Option<std::net::IpAddr>,
    request: TestRequest,
    plan: NetPlan,
    local: SideReport,
    remote: SideReport,
    theirs: Results,
    /// Where the two ends disagree, if they do.
    disagreement: Option<String>,
}

/// The parameters, the credentials, the streams, the test until the client's
/// TEST_END, the results.
fn test(
    state: &State,
    connection: &TcpStream,
    peer: SocketAddr,
    cookie: &str,
) -> Result<Served, Refusal> {
    let timeout = state.config.idle_timeout;
    write(connection, &[Wire::ParamExchange.byte()], timeout)?;
    let params: Params = receive(connection, MAX_PARAMS_BYTES, timeout).map_err(|e| match e {
        WireError::Decode(_) => Refusal {
            closed: Closed::Wire(e),
            code: Some(code::RECEIVE_PARAMS),
        },
        other => Refusal::from(other),
    })?;
    authorize(state, &params)?;
    let ipv6 = connection.local_addr().is_ok_and(|a| a.is_ipv6());
    let admitted = admit::admit(&params, &state.config.limits, ipv6)?;
    probe(&admitted)?;
    let connections = gather(state, connection, peer, cookie, &admitted)?;
    let (local, clock) = run_streams(state, connection, &admitted, connections)?;
    write(connection, &[Wire::ExchangeResults.byte()], timeout)?;
    let theirs: Results = receive(connection, MAX_RESULTS_BYTES, timeout)?;
    let request = admitted.request;
    let remote = remote_report(&theirs, request.direction, request.streams, false)
        .map_err(|reason| Refusal::from(Closed::OutOfBounds(reason)))?;
    let mut ours = our_results(&local, clock.user_share());
    if params.get_server_output.is_some_and(|on| on != 0) {
        ours.server_output_text = Some(format!(
            "ratelab net serve: {}: received {} bytes, sent {} bytes in {:.2} s\n",
            super::test_words(&request),
            local.moved(Role::Receive),
            local.moved(Role::Send),
            local.wall_seconds
        ));
    }
    let mut frame = wire::frame(&ours);
    frame.push(Wire::DisplayResults.byte());
    write(connection, &frame, timeout)?;
    // IPERF_DONE, or the client closing, ends the test.
    let mut done = [0u8; 1];
    let _ = read_exact(connection, &mut done, timeout);
    let mut plan = plan_of(peer, &params, &request, admitted.mss);
    plan.options = admitted.options;
    Ok(Served {
        local_ip: connection.local_addr().ok().map(|a| a.ip()),
        disagreement: report::disagreement(&local, &remote, request.block_bytes),
        request,
        plan,
        local,
        remote,
        theirs,
    })
}

/// Takes the client's credentials as `iperf3 -s` does when it has a private key and
/// authorized users; with ratelab's --key-file and no iperf3 credentials set up, an
/// iperf3 client cannot prove anything and is refused.
fn authorize(state: &State, params: &Params) -> Result<(), Refusal> {
    let Some(authority) = &state.config.iperf3_authority else {
        if state.config.key.is_some() {
            return Err(refused(
                code::AUTH,
                "an iperf3 client cannot prove the key of --key-file (give iperf3 credentials: \
                 --rsa-private-key-path and --authorized-users-path)",
            ));
        }
        return Ok(());
    };
    let Some(token) = params.authtoken.as_deref() else {
        return Err(refused(
            code::AUTH,
            "an iperf3 client without credentials (iperf3 --username)",
        ));
    };
    match authority.check(token, crate::workload::net::iperf3::auth::now_s()) {
        Ok(user) => {
            (state.log)(&format!("iperf3 user {user:?} authenticated"));
            Ok(())
        }
        Err(why) => {
            let hint = match why {
                AuthError::Decrypt(_) if authority.padding() == Padding::Oaep => {
                    " (clients before iperf 3.17 pad with PKCS#1 v1.5: serve with --use-pkcs1-padding)"
                }
                _ => "",
            };
            Err(refused(
                code::AUTH,
                format!("iperf3 credentials refused: {why}{hint}"),
            ))
        }
    }
}

/// Refuses, before the client opens its streams, a congestion control this kernel
/// will not set (not built, not loaded, or not allowed to this user).
fn probe(admitted: &Admitted) -> Result<(), Refusal> {
    let Some(name) = &admitted.options.congestion else {
        return Ok(());
    };
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)
        .map_err(|e| Refusal::from(Closed::OutOfBounds(format!("a socket to try {name}: {e}"))))?;
    socket.set_tcp_congestion(name.as_bytes()).map_err(|e| {
        refused(
            code::SET_CONGESTION,
            format!("congestion control {name}: {e}"),
        )
    })
}

/// Says CREATE_STREAMS and gathers the test's data connections, numbered in the order
/// the server accepted them, as iperf3's server numbers them (its client connects them
/// one by one, each once the last is up), with the test's options set on each.
fn gather(
    state: &State,
    connection: &TcpStream,
    peer: SocketAddr,
    cookie: &str,
    admitted: &Admitted,
) -> Result<Vec<Connection>, Refusal> {
    let timeout = state.config.idle_timeout;
    let (route, arrivals) = std::sync::mpsc::channel();
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
            let role = Role::at_server(request.direction, stream, request.streams);
            Ok(Connection::new(
                stream,
                role,
                socket,
                request.block_bytes as usize,
            ))
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
fn run_streams(
    state: &State,
    connection: &TcpStream,
    admitted: &Admitted,
    connections: Vec<Connection>,
) -> Result<(SideReport, CpuClock), Refusal> {
    let timeout = state.config.idle_timeout;
    let request = &admitted.request;
    let clock = CpuClock::start();
    let start = Instant::now();
    write(
        connection,
        &[Wire::TestStart.byte(), Wire::TestRunning.byte()],
        timeout,
    )?;
    let planned = request
        .duration_ms
        .unwrap_or(state.config.limits.max_duration_ms);
    let hard_stop = start + Duration::from_millis(planned) + GRACE;
    let session_request = TestRequest {
        // The server's senders send until the client's TEST_END.
        duration_ms: Some(planned + GRACE.as_millis() as u64),
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
    let wire = OnTheWire::watch(&connections, 0);
    let (mut local, ended) = std::thread::scope(|scope| {
        let streams = scope
            .spawn(|| session::run(connections, &test, None, &|| stop.load(Ordering::Relaxed)));
        let ended = await_end(connection, hard_stop, &stopping);
        // What the senders had on the wire when the client ended the test is what they
        // sent: it stopped counting then.
        let sent = wire.now();
        if matches!(ended, End::Stopping) {
            // Told before its streams close, as iperf3's server does on a signal, so
            // the client reports the stop rather than a broken stream.
            let _ = write(connection, &[Wire::ServerTerminate.byte()], timeout);
        }
        stop.store(true, Ordering::Relaxed);
        let mut local = streams.join().expect("the stream threads do not panic");
        OnTheWire::count(&mut local, &sent);
        (local, ended)
    });
    match ended {
        End::Asked(at) => {
            let seconds = at.duration_since(start).as_secs_f64();
            for stream in &mut local.streams {
                stream.seconds = seconds;
            }
            local.wall_seconds = seconds;
            Ok((local, clock))
        }
        End::Stopping => Err(Closed::Stopping.into()),
        End::Gone(why) => Err(Closed::OutOfBounds(format!("the iperf3 client {why}")).into()),
    }
}

/// How the test's data phase ended.
enum End {
    /// The client sent TEST_END, read at this instant.
    Asked(Instant),
    /// The server is stopping.
    Stopping,
    /// The client left, or said something else; says what.
    Gone(String),
}

/// Watches the control connection for the client's TEST_END, until the hard stop.
fn await_end(connection: &TcpStream, hard_stop: Instant, stopping: &dyn Fn() -> bool) -> End {
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
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock
                        | std::io::ErrorKind::TimedOut
                        | std::io::ErrorKind::Interrupted
                ) => {}
            Err(e) => return End::Gone(format!("failed: {e}")),
        }
    }
}

/// Whether the client closed `connection` or said anything on it while its streams
/// gather: it says nothing then unless it failed on its side (iperf3 does when it
/// cannot set its own socket options).
fn gave_up(connection: &TcpStream) -> bool {
    let _ = connection.set_nonblocking(true);
    let mut byte = [0u8; 1];
    let said = !matches!(
        connection.peek(&mut byte),
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock
    );
    let _ = connection.set_nonblocking(false);
    said
}

/// Reads one length-prefixed JSON message of type `T`, whole within `timeout`.
fn receive<T: for<'de> serde::Deserialize<'de>>(
    connection: &TcpStream,
    limit: usize,
    timeout: Duration,
) -> Result<T, WireError> {
    let deadline = Instant::now() + timeout;
    let mut prefix = [0u8; 4];
    read_exact(connection, &mut prefix, timeout)?;
    let length = u32::from_be_bytes(prefix) as usize;
    if length > limit {
        return Err(DecodeError::Oversized { length, limit }.into());
    }
    let mut frame = prefix.to_vec();
    frame.resize(4 + length, 0);
    let left = deadline.saturating_duration_since(Instant::now());
    read_exact(connection, &mut frame[4..], left)?;
    Ok(wire::decode(&frame, limit)?.0)
}

/// Fills `buffer` within `timeout` (a peer that trickles is cut off as surely as a
/// silent one).
fn read_exact(
    connection: &TcpStream,
    buffer: &mut [u8],
    timeout: Duration,
) -> Result<(), WireError> {
    let deadline = Instant::now() + timeout;
    let mut reader = connection;
    let mut filled = 0;
    while filled < buffer.len() {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(WireError::Timeout(timeout));
        }
        connection.set_read_timeout(Some(left))?;
        match reader.read(&mut buffer[filled..]) {
            Ok(0) => return Err(WireError::Closed),
            Ok(n) => filled += n,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                return Err(WireError::Timeout(timeout));
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

fn write(connection: &TcpStream, bytes: &[u8], timeout: Duration) -> Result<(), WireError> {
    connection.set_write_timeout(Some(timeout))?;
    let mut writer = connection;
    writer.write_all(bytes).map_err(|e| match e.kind() {
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => {
            WireError::Timeout(timeout)
        }
        _ => WireError::Io(e),
    })
}

/// The test as a plan, from the client's side as ratelab's own plans are: its host is
/// the iperf3 client, and this end served it.
fn plan_of(peer: SocketAddr, params: &Params, request: &TestRequest, mss: Option<u32>) -> NetPlan {
    NetPlan {
        host: peer.ip().to_string(),
        port: peer.port(),
        streams: request.streams,
        direction: request.direction,
        duration_ms: request.duration_ms,
        bytes: params.bytes(),
        interval_ms: request.interval_ms,
        block_bytes: request.block_bytes,
        window_bytes: request.window_bytes,
        mss_bytes: mss,
        iperf3: true,
        served: true,
        own_server: false,
        ..NetPlan::loopback(Duration::ZERO, 1)
    }
}

/// The run a served iperf3 test is stored as: this end local, the client remote;
/// incomplete, with the reason, when the two ends disagree. The client's title
/// (iperf3 -T) is its label.
fn document(peer: SocketAddr, done: &Served, started_at: String) -> RunDocument {
    let plan = &done.plan;
    let mut items: Vec<Value> =
        item::items_of_report(&done.local, Side::Local, plan.direction, plan.streams)
            .iter()
            .chain(&remote_items(
                &done.remote,
                &done.theirs,
                plan.direction,
                plan.streams,
            ))
            .map(|i| serde_json::to_value(i).expect("items serialise"))
            .collect();
    items.shrink_to_fit();
    let first = done.local.streams.first();
    let mss = first.and_then(|s| s.mss_bytes);
    let mtu = first.and_then(|s| s.mtu_bytes);
    let nic = done.local_ip.and_then(crate::platform::nics::nic_of);
    let link = nic
        .as_ref()
        .and_then(|n| n.speed_bits_per_sec)
        .map(|s| (s as f64, "sysfs"));
    let context = NetContext::of(Some(peer.to_string()), nic, link, mss, mtu);
    let (status, incomplete_reason) = match &done.disagreement {
        Some(reason) => (
            RunStatus::Incomplete,
            Some(format!("error: the two ends disagree: {reason}")),
        ),
        None => (RunStatus::Complete, None),
    };
    let mut doc = RunDocument {
        run_id: None,
        run_uuid: Some(uuid::Uuid::now_v7().to_string()),
        status,
        incomplete_reason,
        ratelab_version: env!("CARGO_PKG_VERSION").to_string(),
        verb: "net".into(),
        label: Some("iperf3 client".into()),
        started_at,
        finished_at: Some(now_rfc3339()),
        machine: crate::platform::probe_machine(),
        workloads: vec![WorkloadRecord {
            kind: "net".into(),
            target: format!("iperf3 client {peer}"),
            params: serde_json::to_value(plan).expect("plans serialise"),
            context: serde_json::to_value(context).expect("contexts serialise"),
            items,
            summary: Value::Null,
            series: None,
            alone_of: None,
            measured_by: None,
            warnings: Vec::new(),
        }],
        contention: None,
        verdicts: Vec::new(),
        runner_cpu_seconds: None,
        runner_wall_seconds: None,
        fleet: None,
    };
    let _ = crate::run::conclude(&mut doc, None);
    doc
}
