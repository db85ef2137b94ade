//! One connection of the server, from its first message to its end: a control
//! connection's exchange (hello, key, request, data connections, go, results), or a
//! data connection handed to the test its cookie names. Each way a connection ends is
//! a [`Closed`], which is both what the server logs and what the client is told.

use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::Ordering;
use std::sync::mpsc::{Receiver, channel};
use std::time::{Duration, Instant};

use super::closed::Closed;
use super::routes::route;
use super::slots::{busy, take_slot};
use super::{Arrival, State, check, stop};
use crate::workload::net::admission::Ticket;
use crate::workload::net::iperf3::wire;
use crate::workload::net::key::{self, Key};
use crate::workload::net::options::StreamOptions;
use crate::workload::net::protocol::{
    self, MAX_REQUEST_BYTES, Message, PROTOCOL, STOPPING, TestRequest, WireError,
};
use crate::workload::net::report::{Role, SideReport};
use crate::workload::net::session::{self, Connection, GRACE};
use crate::workload::net::socket;
use crate::workload::net::stream::Ending;

/// Longest wait for a connection's first message: a client speaks as soon as it connects.
const FIRST_MESSAGE_TIMEOUT: Duration = Duration::from_secs(3);

/// Serves `connection` from `peer`, the `accepted`-th the server took, to its end, and
/// logs why it closed.
pub(in crate::workload::net) fn serve(
    state: &State,
    connection: TcpStream,
    peer: SocketAddr,
    ticket: Ticket,
    accepted: u64,
) {
    let _ = connection.set_nonblocking(false);
    let _ = connection.set_nodelay(true);
    let proven = ticket.witness();
    if let Err(closed) = handle(state, connection, peer, ticket, accepted) {
        let line = format!("{peer}: closed: {closed}");
        if proven.load(Ordering::SeqCst) {
            state.journal.say(&line);
        } else {
            state.journal.unproven(peer.ip(), &line);
        }
    }
}

/// Tells the peer why its connection closes, where it is told, and hands `closed` on.
fn answer(connection: &TcpStream, closed: Closed, timeout: Duration) -> Closed {
    if let Some(answer) = closed.answer() {
        let _ = protocol::send(connection, &answer, timeout);
    }
    closed
}

/// Serves one connection from its first message to its end.
fn handle(
    state: &State,
    connection: TcpStream,
    peer: SocketAddr,
    ticket: Ticket,
    accepted: u64,
) -> Result<(), Closed> {
    let timeout = state.config.idle_timeout;
    // An iperf3 client opens with its cookie, a letter or digit; ratelab's frames with
    // a length whose first byte is 0.
    let mut first_byte = [0u8; 1];
    let _ = connection.set_read_timeout(Some(timeout.min(FIRST_MESSAGE_TIMEOUT)));
    if matches!(connection.peek(&mut first_byte), Ok(1)) && wire::looks_like_cookie(&first_byte) {
        return crate::workload::net::iperf3::server::handle(
            state,
            connection,
            peer,
            ticket,
            accepted,
            timeout.min(FIRST_MESSAGE_TIMEOUT),
        );
    }
    let first = protocol::receive(
        &connection,
        MAX_REQUEST_BYTES,
        timeout.min(FIRST_MESSAGE_TIMEOUT),
    )
    .map_err(Closed::FirstMessage)?;
    match first {
        Message::Hello {
            protocol,
            client_nonce,
            understands,
        } => {
            let hello = Hello {
                version: protocol,
                client_nonce: &client_nonce,
                hears_stopping: understands.iter().any(|name| name == STOPPING),
            };
            control(state, &connection, peer, &hello, ticket)
        }
        Message::Data { cookie, stream } => {
            // From here the connection belongs to a test, which bounds its streams.
            drop(ticket);
            let arrival = Arrival {
                stream: Some(stream),
                peer: peer.ip(),
                accepted,
                socket: connection,
            };
            route(state, &cookie, arrival)
        }
        other => Err(answer(
            &connection,
            Closed::Misplaced(other.name()),
            timeout,
        )),
    }
}

/// What a client's hello said.
struct Hello<'a> {
    /// The protocol version it speaks.
    version: u32,
    /// Its nonce, for the key's proof.
    client_nonce: &'a str,
    /// Whether it understands [`Message::Stopping`].
    hears_stopping: bool,
}

/// Serves one control connection: handshake, one test, its results. A refusal is
/// answered while the connection still holds its ticket or its test slot.
fn control(
    state: &State,
    connection: &TcpStream,
    peer: SocketAddr,
    hello: &Hello<'_>,
    ticket: Ticket,
) -> Result<(), Closed> {
    let timeout = state.config.idle_timeout;
    let answered = |closed| answer(connection, closed, timeout);
    // A test asked for by a client that proved itself ends `--once`, served or
    // refused, as `iperf3 -s -1` ends; a connection that proved nothing does not.
    let proven = ticket.witness();
    let ended = || {
        if proven.load(Ordering::SeqCst) {
            state.ended.fetch_add(1, Ordering::SeqCst);
        }
    };
    let request = handshake(state, connection, hello, &ticket).map_err(|closed| {
        // A client that checks the server closes after the welcome: no test was asked.
        if matches!(closed, Closed::OutOfBounds(_)) {
            ended();
        }
        answered(closed)
    })?;
    let slot = take_slot(state)
        .ok_or_else(|| Closed::Busy(busy(state).unwrap_or_else(|| "no test slot is free".into())))
        .map_err(answered)?;
    // The test slot bounds this connection from here on.
    drop(ticket);
    let report = match test(state, connection, peer, &request) {
        Ok(report) => report,
        Err(Closed::Stopping) => {
            stop::tell(state, connection, peer, hello.hears_stopping);
            ended();
            return Ok(());
        }
        Err(closed) => {
            let closed = answered(closed);
            ended();
            return Err(closed);
        }
    };
    drop(slot);
    // Sizes in binary units and rates in bits, as the client prints them.
    let moved = |role: Role| {
        let bytes = report.moved(role);
        let mut words = crate::vocab::units::format_bytes(bytes);
        if bytes > 0 && report.wall_seconds > 0.0 {
            words.push_str(&format!(
                " ({})",
                crate::vocab::units::format_bits_rate(bytes as f64 / report.wall_seconds)
            ));
        }
        words
    };
    state.journal.say(&format!(
        "{peer}: test of {}: received {}, sent {} in {:.2} s",
        super::test_words(&request),
        moved(Role::Receive),
        moved(Role::Send),
        report.wall_seconds
    ));
    let sent = protocol::send(connection, &Message::Results(Box::new(report)), timeout);
    // Counted once the results are out, so `--once` never exits while sending them.
    ended();
    sent.map_err(Closed::from)
}

/// From hello to the test asked for: the client's version and nonce, a free slot, the
/// key, and a request within the bounds. The ticket is marked proven once the key is
/// (or, with no key, once the request is within the bounds).
fn handshake(
    state: &State,
    connection: &TcpStream,
    hello: &Hello<'_>,
    ticket: &Ticket,
) -> Result<TestRequest, Closed> {
    let timeout = state.config.idle_timeout;
    if hello.version != PROTOCOL {
        return Err(Closed::Version(hello.version));
    }
    let client_nonce = hello.client_nonce;
    if client_nonce.len() != 64 || !client_nonce.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(Closed::Nonce);
    }
    if let Some(reason) = busy(state) {
        return Err(Closed::Busy(reason));
    }
    let server_proof = match &state.config.key {
        Some(key) => {
            let proof = authenticate(connection, key, client_nonce, timeout)?;
            ticket.proven();
            Some(proof)
        }
        None => None,
    };
    let welcome = Message::Welcome {
        server_proof,
        limits: state.config.limits,
    };
    protocol::send(connection, &welcome, timeout)?;
    let request = match protocol::receive(connection, MAX_REQUEST_BYTES, timeout) {
        Ok(Message::Start(request)) => request,
        Ok(other) => return Err(Closed::unexpected("start", &other)),
        Err(WireError::Closed) => return Err(Closed::Checked),
        Err(e) => return Err(e.into()),
    };
    check(&request, &state.config.limits).map_err(Closed::OutOfBounds)?;
    if request.udp.is_some() {
        return Err(Closed::OutOfBounds(
            "a UDP test in ratelab's own protocol is not served by this version".into(),
        ));
    }
    ticket.proven();
    Ok(request)
}

/// Has the client prove `key` by challenge and response; returns the server's proof.
fn authenticate(
    connection: &TcpStream,
    key: &Key,
    client_nonce: &str,
    timeout: Duration,
) -> Result<String, Closed> {
    let server_nonce = key::nonce();
    let challenge = Message::Challenge {
        server_nonce: server_nonce.clone(),
    };
    protocol::send(connection, &challenge, timeout)?;
    match protocol::receive(connection, MAX_REQUEST_BYTES, timeout)? {
        Message::Auth { client_proof }
            if key.verify("client", client_nonce, &server_nonce, &client_proof) =>
        {
            Ok(key.proof("server", client_nonce, &server_nonce))
        }
        Message::Auth { .. } => Err(Closed::WrongKey),
        other => Err(Closed::unexpected("auth", &other)),
    }
}

/// Runs an accepted test: its data connections, the client's go, then the streams.
fn test(
    state: &State,
    connection: &TcpStream,
    peer: SocketAddr,
    request: &TestRequest,
) -> Result<SideReport, Closed> {
    let stopping = || state.stopping.load(Ordering::SeqCst);
    let connections = open_data(state, connection, peer, request)?;
    // The client may set up other workloads (a disk's files) before it says go: wait
    // as long as a test may last, not just an idle spell.
    let limits = &state.config.limits;
    let go_timeout = state
        .config
        .idle_timeout
        .max(Duration::from_millis(limits.max_duration_ms));
    let left = stop::readable(connection, go_timeout, &stopping)?;
    match protocol::receive(connection, MAX_REQUEST_BYTES, left)? {
        Message::Go => {}
        other => return Err(Closed::unexpected("go", &other)),
    }
    let start = Instant::now();
    let planned = match request.duration_ms {
        Some(ms) if request.bytes_per_stream.is_none() => ms,
        _ => limits.max_duration_ms,
    };
    let hard_stop = start + Duration::from_millis(planned) + GRACE;
    // The client's control connection closing mid-test means it is gone: stop.
    let _ = connection.set_nonblocking(true);
    let client_gone = || {
        let mut byte = [0u8; 1];
        matches!(connection.peek(&mut byte), Ok(0))
            || matches!(&connection.peek(&mut byte), Err(e) if e.kind() != std::io::ErrorKind::WouldBlock)
    };
    let test = session::Run {
        request,
        start,
        hard_stop,
        ending: Ending::Drain,
        options: &StreamOptions::default(),
    };
    let report = session::run(connections, &test, None, &|| stopping() || client_gone());
    let _ = connection.set_nonblocking(false);
    if stopping() {
        // What this end measured goes nowhere: the client keeps what its end measured.
        return Err(Closed::Stopping);
    }
    Ok(report)
}

/// Gives the client the test's cookie and gathers the data connections that present it.
fn open_data(
    state: &State,
    connection: &TcpStream,
    peer: SocketAddr,
    request: &TestRequest,
) -> Result<Vec<Connection>, Closed> {
    let timeout = state.config.idle_timeout;
    let cookie = key::nonce()[..32].to_string();
    let (to, arrivals) = channel();
    let route = super::Route {
        to,
        client: peer.ip(),
    };
    state.routes().insert(cookie.clone(), route);
    // Announced before the client hears the cookie, so its data connections get in.
    let wanted = request.direction.connections(request.streams);
    state.admission.expect(peer.ip(), wanted);
    let accepted = Message::Accepted {
        cookie: cookie.clone(),
    };
    let gathered = protocol::send(connection, &accepted, timeout)
        .map_err(Closed::Announce)
        .and_then(|()| gather(request, &arrivals, timeout));
    state.routes().remove(&cookie);
    if gathered.is_err() {
        state.admission.forget(peer.ip(), wanted);
    }
    gathered
}

/// Waits for every data connection of a test, each stream once.
fn gather(
    request: &TestRequest,
    arrivals: &Receiver<Arrival>,
    timeout: Duration,
) -> Result<Vec<Connection>, Closed> {
    let wanted = request.direction.connections(request.streams);
    let deadline = Instant::now() + timeout;
    let mut connections: Vec<Connection> = Vec::new();
    while connections.len() < wanted as usize {
        let left = deadline.saturating_duration_since(Instant::now());
        let Arrival { stream, socket, .. } =
            arrivals
                .recv_timeout(left)
                .map_err(|_| Closed::DataMissing {
                    arrived: connections.len(),
                    wanted,
                    timeout,
                })?;
        let stream = stream.unwrap_or(u32::MAX);
        if stream >= wanted || connections.iter().any(|c| c.stream == stream) {
            return Err(Closed::DataTaken(stream));
        }
        if let Some(window) = request.window_bytes {
            let _ = socket::set_window(&socket, window);
        }
        connections.push(Connection::at_server(request, stream, socket));
    }
    Ok(connections)
}
