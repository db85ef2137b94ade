//! The server's side of a test for an iperf3 client (`iperf3 -c`): told apart from a
//! ratelab client by its first bytes, a cookie. The same bounds hold as for ratelab's
//! clients (streams, time, bytes, one test at a time, deadlines for every message, the
//! per-address limits); a refusal is said in iperf3's words (ACCESS_DENIED, or
//! SERVER_ERROR with iperf3's error code), so the client prints its usual message. The
//! test is stored as a run with both ends, the client's from its own results.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, channel};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::exchange::{Closed, busy, take_slot};
use super::{State, check};
use crate::document::{RunDocument, RunStatus, WorkloadRecord, now_rfc3339};
use crate::workload::net::admission::Ticket;
use crate::workload::net::iperf3::wire::{
    self, COOKIE_BYTES, MAX_PARAMS_BYTES, MAX_RESULTS_BYTES, Params, Results, State as Wire,
};
use crate::workload::net::iperf3::{our_results, remote_items, remote_report};
use crate::workload::net::item::{self, Side};
use crate::workload::net::protocol::{DecodeError, TestRequest, WireError};
use crate::workload::net::report::{Role, SideReport};
use crate::workload::net::session::{self, Connection, GRACE};
use crate::workload::net::stream::{Ending, Handover};
use crate::workload::net::{NetContext, NetPlan};

/// iperf3's error codes (src/iperf_api.h) this server answers with.
mod code {
    /// IEDURATION: the test is too long (or unbounded).
    pub const DURATION: i32 = 5;
    /// IENUMSTREAMS: too many streams.
    pub const STREAMS: i32 = 6;
    /// IEBLOCKSIZE: the block is too large.
    pub const BLOCK: i32 = 7;
    /// IEUNIMP: an option this server does not do (UDP, -O, -b).
    pub const UNIMPLEMENTED: i32 = 13;
    /// IETOTALRATE: more bytes than the server allows.
    pub const TOTAL: i32 = 27;
    /// IEAUTHTEST: the test is not authorized (a key is required).
    pub const AUTH: i32 = 142;
}

/// Serves a connection whose first bytes are an iperf3 cookie: a data connection of a
/// test gathering its streams, or a new test's control connection.
pub(super) fn handle(
    state: &State,
    connection: TcpStream,
    peer: SocketAddr,
    ticket: Ticket,
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
    let route = state.routes().get(&name).cloned();
    if let Some(route) = route {
        drop(ticket);
        return route
            .send((u32::MAX, connection))
            .map_err(|_| Closed::DataTooLate(u32::MAX));
    }
    control(state, &connection, peer, &name, ticket)
}

/// Why an iperf3 test was refused: what the log says, and the code the client hears.
struct Refusal {
    closed: Closed,
    code: Option<i32>,
}

impl Refusal {
    fn new(closed: Closed, code: i32) -> Refusal {
        Refusal {
            closed,
            code: Some(code),
        }
    }
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

/// One iperf3 test on its control connection, from the parameters to the results.
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
    match test(state, connection, peer, cookie) {
        Ok(done) => {
            drop(slot);
            (state.log)(&format!(
                "{peer}: iperf3 test of {}: received {} bytes, sent {} bytes in {:.2} s",
                super::test_words(&done.request),
                done.local.moved(Role::Receive),
                done.local.moved(Role::Send),
                done.local.wall_seconds
            ));
            if let Some(record) = &state.recorder {
                record(document(peer, &done, started_at));
            }
            // Counted once the run is stored, so `--once` never exits while storing it.
            state.served.fetch_add(1, Ordering::SeqCst);
            Ok(())
        }
        Err(refusal) => {
            if let Some(code) = refusal.code {
                let mut bytes = vec![Wire::ServerError.byte()];
                bytes.extend_from_slice(&code.to_be_bytes());
                bytes.extend_from_slice(&0i32.to_be_bytes());
                let _ = write(connection, &bytes, timeout);
            }
            Err(refusal.closed)
        }
    }
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
}

/// The parameters, the streams, the test until the client's TEST_END, the results.
fn test(
    state: &State,
    connection: &TcpStream,
    peer: SocketAddr,
    cookie: &str,
) -> Result<Served, Refusal> {
    let timeout = state.config.idle_timeout;
    if state.config.key.is_some() && !state.config.iperf3_without_key {
        return Err(Refusal::new(
            Closed::OutOfBounds(
                "an iperf3 client cannot prove the key of --key-file (serve with --iperf3 to let them in)"
                    .into(),
            ),
            code::AUTH,
        ));
    }
    write(connection, &[Wire::ParamExchange.byte()], timeout)?;
    let params: Params = receive(connection, MAX_PARAMS_BYTES, timeout)?;
    let request = request_of(&params)
        .map_err(|(reason, code)| Refusal::new(Closed::OutOfBounds(reason), code))?;
    check(&request, &state.config.limits).map_err(|reason| {
        let code = if request.streams > state.config.limits.max_streams {
            code::STREAMS
        } else if request.block_bytes > super::MAX_BLOCK_BYTES {
            code::BLOCK
        } else if request.duration_ms.is_some() {
            code::DURATION
        } else {
            code::TOTAL
        };
        Refusal::new(Closed::OutOfBounds(reason), code)
    })?;
    let connections = gather(state, connection, peer, cookie, &request, params.mss)?;
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
    let (local, ended) = std::thread::scope(|scope| {
        let streams = scope.spawn(|| {
            session::run(
                connections,
                &session_request,
                start,
                hard_stop,
                None,
                &|| stop.load(Ordering::Relaxed),
                Ending::Handover(&handover),
            )
        });
        let ended = await_end(connection, hard_stop, &stopping);
        if matches!(ended, End::Stopping) {
            // Told before its streams close, as iperf3's server does on a signal, so
            // the client reports the stop rather than a broken stream.
            let _ = write(connection, &[Wire::ServerTerminate.byte()], timeout);
        }
        stop.store(true, Ordering::Relaxed);
        (
            streams.join().expect("the stream threads do not panic"),
            ended,
        )
    });
    match ended {
        End::Asked => {}
        End::Stopping => return Err(Closed::Stopping.into()),
        End::Gone(why) => {
            return Err(Closed::OutOfBounds(format!("the iperf3 client {why}")).into());
        }
    }
    write(connection, &[Wire::ExchangeResults.byte()], timeout)?;
    let theirs: Results = receive(connection, MAX_RESULTS_BYTES, timeout)?;
    let remote = remote_report(&theirs, request.direction, request.streams, false)
        .map_err(|reason| Refusal::from(Closed::OutOfBounds(reason)))?;
    let mut ours = our_results(&local, 0.0);
    if params.get_server_output.is_some() {
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
    // IPERF_DONE, or the client closing, ends the test; iperf 3.21 waits for our close.
    let mut done = [0u8; 1];
    let _ = read_exact(connection, &mut done, timeout);
    let plan = plan_of(peer, &params, &request);
    Ok(Served {
        local_ip: connection.local_addr().ok().map(|a| a.ip()),
        request,
        plan,
        local,
        remote,
        theirs,
    })
}

/// The test `params` ask for, as ratelab's bounds read it; what cannot be done here is
/// refused with iperf3's code for it.
fn request_of(params: &Params) -> Result<TestRequest, (String, i32)> {
    let unimplemented =
        |what: &str| Err((format!("{what} is not served here"), code::UNIMPLEMENTED));
    if params.udp.is_some() || params.sctp.is_some() || params.tcp == Some(false) {
        return unimplemented("a UDP or SCTP test (iperf3 -u, --sctp)");
    }
    if params.omit != 0 {
        return unimplemented("omitting the start (iperf3 -O)");
    }
    if params.bandwidth.is_some_and(|b| b != 0) {
        return unimplemented("a paced test (iperf3 -b)");
    }
    let streams = u32::try_from(params.parallel).unwrap_or(0);
    let direction = params.direction();
    let block_bytes = u64::try_from(params.len).unwrap_or(0);
    let bytes = params.bytes();
    let duration_ms = match (bytes, params.time) {
        (None, t) if t > 0 => Some(t as u64 * 1000),
        (None, _) => {
            return Err((
                "a test bounded by neither time nor bytes".into(),
                code::DURATION,
            ));
        }
        (Some(_), _) => None,
    };
    Ok(TestRequest {
        streams,
        direction,
        duration_ms,
        // iperf3 bounds bytes over every stream: each sending stream takes its share.
        bytes_per_stream: bytes.map(|b| b.div_ceil(u64::from(streams.max(1)))),
        block_bytes,
        window_bytes: params.window.and_then(|w| u64::try_from(w).ok()),
        interval_ms: 1000,
    })
}

/// Says CREATE_STREAMS and gathers the test's data connections, numbered in the order
/// they come, as iperf3 numbers them.
fn gather(
    state: &State,
    connection: &TcpStream,
    peer: SocketAddr,
    cookie: &str,
    request: &TestRequest,
    mss: Option<i64>,
) -> Result<Vec<Connection>, Refusal> {
    let timeout = state.config.idle_timeout;
    let (route, arrivals) = channel();
    state.routes().insert(cookie.to_string(), route);
    let wanted = request.direction.connections(request.streams);
    state.admission.expect(peer.ip(), wanted);
    let gathered = write(connection, &[Wire::CreateStreams.byte()], timeout)
        .map_err(Refusal::from)
        .and_then(|()| arrive(request, &arrivals, timeout, mss));
    state.routes().remove(cookie);
    if gathered.is_err() {
        state.admission.forget(peer.ip(), wanted);
    }
    gathered
}

fn arrive(
    request: &TestRequest,
    arrivals: &Receiver<(u32, TcpStream)>,
    timeout: Duration,
    mss: Option<i64>,
) -> Result<Vec<Connection>, Refusal> {
    let wanted = request.direction.connections(request.streams);
    let deadline = Instant::now() + timeout;
    let mut connections = Vec::new();
    for stream in 0..wanted {
        let left = deadline.saturating_duration_since(Instant::now());
        let (_, socket) = arrivals.recv_timeout(left).map_err(|_| {
            Refusal::from(Closed::DataMissing {
                arrived: connections.len(),
                wanted,
                timeout,
            })
        })?;
        // The MSS of the far end's segments was agreed at the handshake; this bounds ours.
        if let Some(mss) = mss.and_then(|m| u32::try_from(m).ok()) {
            let _ = socket2::SockRef::from(&socket).set_tcp_mss(mss);
        }
        connections.push(Connection::at_server(request, stream, socket));
    }
    Ok(connections)
}

/// How the test's data phase ended.
enum End {
    /// The client sent TEST_END.
    Asked,
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
                    Wire::TestEnd => End::Asked,
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
fn plan_of(peer: SocketAddr, params: &Params, request: &TestRequest) -> NetPlan {
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
        mss_bytes: params.mss.and_then(|m| u32::try_from(m).ok()),
        link_rate_bytes_per_sec: None,
        key: false,
        own_server: false,
        key_file: None,
        ssh: None,
        iperf3: true,
        served: true,
    }
}

/// The run a served iperf3 test is stored as: this end local, the client remote.
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
    let mut doc = RunDocument {
        run_id: None,
        run_uuid: Some(uuid::Uuid::now_v7().to_string()),
        status: RunStatus::Complete,
        incomplete_reason: None,
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
