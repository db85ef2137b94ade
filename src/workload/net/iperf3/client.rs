//! The client's side of a test against an iperf3 server: the cookie, the parameters,
//! the data connections made one by one (the server numbers them in the order they
//! come), the start, TEST_END when this end's count is done, and the results
//! exchanged, the server's becoming the test's remote end.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use super::wire::{
    self, CLIENT_VERSION, COOKIE_BYTES, MAX_RESULTS_BYTES, Params, Results, State, StreamResult,
};
use crate::error::Error;
use crate::workload::net::protocol::{DecodeError, Direction};
use crate::workload::net::report::{Datagrams, Role, SideReport, StreamReport};
use crate::workload::net::session::Connection;
use crate::workload::net::{NetPlan, socket};

/// Longest wait for each step of the server's side of the control exchange.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(10);

/// An open control connection to an iperf3 server, past the cookie.
pub struct Iperf3Control {
    socket: TcpStream,
    cookie: [u8; COOKIE_BYTES],
    peer: String,
    address: SocketAddr,
}

impl Iperf3Control {
    /// Connects to `address` (named `peer` in errors), sends the test's cookie and
    /// `plan`'s parameters, and waits for the server to ask for the streams.
    pub fn open(address: SocketAddr, peer: &str, plan: &NetPlan) -> Result<Iperf3Control, Error> {
        let socket =
            socket::connect(&address, ANSWER_TIMEOUT, None, None).map_err(|e| Error::Peer {
                peer: peer.to_string(),
                reason: format!("cannot connect: {e} (is `iperf3 -s` running there?)"),
            })?;
        let control = Iperf3Control {
            socket,
            cookie: wire::cookie(),
            peer: peer.to_string(),
            address,
        };
        let cookie = control.cookie;
        control.write(&cookie, "the cookie")?;
        control
            .expect(State::ParamExchange, "PARAM_EXCHANGE")
            .map_err(|e| match e {
                Error::Peer { peer, reason } if !reason.contains("busy") => Error::Peer {
                    peer,
                    reason: format!(
                        "{reason} (is `iperf3 -s` running there? without --iperf3, ratelab speaks its own protocol to `ratelab net serve`)"
                    ),
                },
                other => other,
            })?;
        let mut params = params(plan);
        if let Some(login) = &plan.iperf3_login {
            params.authtoken = Some(login.token().map_err(|e| control.fail(e.to_string()))?);
        }
        control.write(&wire::frame(&params), "the parameters")?;
        control
            .expect(State::CreateStreams, "CREATE_STREAMS")
            .map_err(|e| match e {
                Error::Peer { peer, reason } => Error::Peer {
                    reason: format!("{reason}{}", refusal_hint(&reason, plan)),
                    peer,
                },
                other => other,
            })?;
        Ok(control)
    }

    /// Opens the data connections one by one, each naming the test by its cookie:
    /// the client's sending streams first, as iperf3 numbers them.
    pub fn connect_streams(&self, plan: &NetPlan) -> Result<Vec<Connection>, Error> {
        (0..plan.direction.connections(plan.streams))
            .map(|stream| {
                let mut socket = socket::connect(
                    &self.address,
                    ANSWER_TIMEOUT,
                    plan.window_bytes,
                    plan.mss_bytes,
                )
                .map_err(|e| self.fail(format!("data connection {stream}: {e}")))?;
                plan.options
                    .apply(&socket)
                    .map_err(|e| self.fail(format!("data connection {stream}: {e}")))?;
                socket
                    .write_all(&self.cookie)
                    .map_err(|e| self.fail(format!("data connection {stream}: {e}")))?;
                let role = plan.direction.client_role(stream, plan.streams);
                Ok(Connection::new(
                    stream,
                    role,
                    socket,
                    plan.block_bytes as usize,
                ))
            })
            .collect()
    }

    /// The local address of the control connection, to find the NIC the test uses.
    pub fn first_local_address(&self) -> Option<std::net::IpAddr> {
        self.socket.local_addr().ok().map(|a| a.ip())
    }

    /// Waits for TEST_START and TEST_RUNNING; returns when the test started, as the
    /// server's TEST_START came.
    pub fn started(&self) -> Result<Instant, Error> {
        self.expect(State::TestStart, "TEST_START")?;
        let start = Instant::now();
        self.expect(State::TestRunning, "TEST_RUNNING")?;
        Ok(start)
    }

    /// Tells the server the test is over.
    pub fn end(&self) -> Result<(), Error> {
        self.write(&[State::TestEnd.byte()], "TEST_END")
    }

    /// Tells the server this end stopped (Ctrl-C), as iperf3's client does on a signal.
    pub fn terminate(&self) {
        let mut socket = &self.socket;
        let _ = socket.write_all(&[State::ClientTerminate.byte()]);
        let _ = self.socket.shutdown(Shutdown::Both);
    }

    /// Waits for the server's EXCHANGE_RESULTS.
    pub fn exchange_asked(&self) -> Result<(), Error> {
        self.expect(State::ExchangeResults, "EXCHANGE_RESULTS")
    }

    /// Sends this end's results and reads the server's, then ends the exchange
    /// (DISPLAY_RESULTS, IPERF_DONE) and closes.
    pub fn exchange(&self, ours: &Results) -> Result<Results, Error> {
        self.write(&wire::frame(ours), "the results")?;
        let mut prefix = [0u8; 4];
        self.read_exact(&mut prefix, "the server's results")?;
        let length = u32::from_be_bytes(prefix) as usize;
        if length > MAX_RESULTS_BYTES {
            return Err(self.fail(format!(
                "its results are {length} bytes, over the limit of {MAX_RESULTS_BYTES}"
            )));
        }
        let mut frame = prefix.to_vec();
        frame.resize(4 + length, 0);
        self.read_exact(&mut frame[4..], "the server's results")?;
        let (theirs, _): (Results, usize) = wire::decode(&frame, MAX_RESULTS_BYTES)
            .map_err(|e: DecodeError| self.fail(format!("its results are not iperf3's: {e}")))?;
        self.expect(State::DisplayResults, "DISPLAY_RESULTS")?;
        self.write(&[State::IperfDone.byte()], "IPERF_DONE")?;
        // iperf 3.21 reads its control connection to the end before it closes.
        let _ = self.socket.shutdown(Shutdown::Both);
        Ok(theirs)
    }

    fn write(&self, bytes: &[u8], what: &str) -> Result<(), Error> {
        let _ = self.socket.set_write_timeout(Some(ANSWER_TIMEOUT));
        let mut socket = &self.socket;
        socket
            .write_all(bytes)
            .map_err(|e| self.fail(format!("sending {what}: {e}")))
    }

    fn read_exact(&self, buffer: &mut [u8], what: &str) -> Result<(), Error> {
        let _ = self.socket.set_read_timeout(Some(ANSWER_TIMEOUT));
        let mut socket = &self.socket;
        socket.read_exact(buffer).map_err(|e| {
            self.fail(match e.kind() {
                std::io::ErrorKind::UnexpectedEof => {
                    format!("the server closed the connection before {what}")
                }
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => {
                    format!("no {what} within {ANSWER_TIMEOUT:?}")
                }
                _ => format!("reading {what}: {e}"),
            })
        })
    }

    /// Reads one state byte, which must be `wanted` (named `name`); a busy server, an
    /// error or a stop on the server's side say why.
    fn expect(&self, wanted: State, name: &str) -> Result<(), Error> {
        let mut byte = [0u8; 1];
        self.read_exact(&mut byte, name)?;
        match State::from_byte(byte[0]) {
            state if state == wanted => Ok(()),
            State::AccessDenied => Err(self.fail(
                "the iperf3 server is busy running a test; try again later".into(),
            )),
            State::ServerError => {
                // Two 32-bit codes follow; iperf 3.12 sends only the first on some errors.
                let mut codes = [0u8; 8];
                let mut socket = &self.socket;
                let got = socket.read(&mut codes).unwrap_or(0);
                let code = (got >= 4).then(|| i32::from_be_bytes(codes[..4].try_into().unwrap()));
                let errno = (got >= 8).then(|| i32::from_be_bytes(codes[4..].try_into().unwrap()));
                Err(self.fail(format!(
                    "the iperf3 server refused the test: {}",
                    super::errors::server_error_text(code.unwrap_or(0), errno)
                )))
            }
            State::ServerTerminate => {
                Err(self.fail("the iperf3 server was stopped during the test".into()))
            }
            other => Err(self.fail(format!(
                "expected iperf3's {name}, got state byte {} ({other:?}): is this an iperf3 server?",
                other.byte() as i8
            ))),
        }
    }

    fn fail(&self, reason: String) -> Error {
        Error::Peer {
            peer: self.peer.clone(),
            reason,
        }
    }
}

/// What a server's answer to the parameters leaves unsaid: a server with
/// --server-max-duration refuses every test of bytes, and iperf 3.21 and later refuse
/// credentials without the code for it (with none, or with one left over from an
/// earlier test), or close when they want credentials that were not sent.
fn refusal_hint(reason: &str, plan: &NetPlan) -> &'static str {
    // Codes that cannot answer a test's parameters: the cookie was read, no stream is
    // open yet. A 3.21 or later server leaves one over from an earlier test.
    let stale = reason
        .split_once("(iperf3 error ")
        .and_then(|(_, rest)| rest.split(')').next()?.parse::<i32>().ok())
        .is_some_and(|code| (104..=112).contains(&code) || (200..=208).contains(&code));
    let closed = reason.contains("closed the connection") || stale;
    if plan.bytes.is_some() && reason.contains("(iperf3 error 37)") {
        ": an iperf3 server with --server-max-duration refuses every test of bytes (-n); \
         give a time (-t) instead"
    } else if plan.iperf3_login.is_some() && (closed || reason.contains("refused the test")) {
        ": the server may have refused the credentials of --username (iperf 3.21 and later \
         refuse them without saying so, or with an unrelated code)"
    } else if closed {
        ": it may check credentials (--username)"
    } else {
        ""
    }
}

/// The parameters iperf3's client would send for `plan`.
pub fn params(plan: &NetPlan) -> Params {
    let seconds = plan.duration_ms.map_or(0, |ms| ms.div_ceil(1000) as i64);
    Params {
        tcp: Some(true),
        omit: 0,
        time: if plan.bytes.is_some() { 0 } else { seconds },
        num: plan.bytes.map_or(0, |b| b as i64),
        blockcount: 0,
        mss: plan.mss_bytes.map(i64::from),
        parallel: i64::from(plan.streams),
        reverse: (plan.direction == Direction::Reverse).then_some(true),
        bidirectional: (plan.direction == Direction::Bidir).then_some(true),
        window: plan.window_bytes.map(|w| w as i64),
        len: plan.block_bytes as i64,
        pacing_timer: Some(1000),
        congestion: plan.options.congestion.clone(),
        fqrate: plan
            .options
            .pacing_bytes_per_sec
            .map(|r| r.saturating_mul(8) as i64),
        client_version: Some(CLIENT_VERSION.into()),
        ..Params::default()
    }
}

/// This end's results as iperf3 reads them: per stream its bytes and retransmissions
/// (-1 for a stream it received on), a UDP stream's datagrams (sent, or the highest
/// count received), lost datagrams and jitter, its CPU time over the test's wall time split as
/// `user_share` says, and its congestion control.
pub fn our_results(local: &SideReport, user_share: f64) -> Results {
    let wall = local.wall_seconds.max(1e-9);
    let total = 100.0 * local.cpu_seconds / wall;
    let sends = local.streams.iter().any(|s| s.role == Role::Send);
    Results {
        cpu_util_total: total,
        cpu_util_user: total * user_share,
        cpu_util_system: total * (1.0 - user_share),
        sender_has_retransmits: if sends { 1 } else { -1 },
        congestion_used: local.streams.iter().find_map(|s| s.congestion.clone()),
        streams: local
            .streams
            .iter()
            .map(|s| StreamResult {
                id: wire::stream_id(s.stream),
                bytes: s.bytes as i64,
                retransmits: match s.role {
                    Role::Send => s.tcp.map_or(0, |t| t.retransmits as i64),
                    Role::Receive => -1,
                },
                jitter: s.datagrams.map_or(0.0, |d| d.jitter_s),
                errors: s.datagrams.map_or(0, |d| d.lost as i64),
                packets: s.datagrams.map_or(0, |d| match s.role {
                    Role::Send => d.count as i64,
                    Role::Receive => d.highest as i64,
                }),
                // This end leaves no seconds out: none of its figures were omitted.
                omitted_errors: s.datagrams.map(|_| 0),
                omitted_packets: s.datagrams.map(|_| 0),
                start_time: 0.0,
                end_time: s.seconds,
            })
            .collect(),
        server_output_text: None,
    }
}

/// A UDP stream's datagrams as the far end's results give them: a sender's count, a
/// receiver's highest count, lost datagrams and jitter. A receiver's count of what
/// came is its highest count less the lost (out-of-order datagrams took back their
/// loss as they came); iperf3 sends no out-of-order count.
fn datagrams_of(result: &StreamResult, role: Role) -> Datagrams {
    let count = |n: i64| u64::try_from(n).unwrap_or(0);
    let (packets, lost) = (count(result.packets), count(result.errors));
    match role {
        Role::Send => Datagrams {
            count: packets,
            ..Datagrams::default()
        },
        Role::Receive => Datagrams {
            count: packets.saturating_sub(lost),
            highest: packets,
            lost,
            out_of_order: None,
            jitter_s: result.jitter.max(0.0),
            send_errors: 0,
        },
    }
}

/// The far end's results as the test's remote end: per stream its bytes over its time
/// (no intervals: iperf3 does not send them), and its CPU time. The far end is the
/// server when `remote_is_server`, else the client. Streams are matched by iperf3's
/// ids; one the test did not open is refused. A `udp` test's streams carry their
/// datagrams as the far end counted them.
pub fn remote_report(
    theirs: &Results,
    direction: Direction,
    streams: u32,
    remote_is_server: bool,
    udp: bool,
) -> Result<SideReport, String> {
    let connections = direction.connections(streams);
    let mut reports = Vec::with_capacity(theirs.streams.len());
    for result in &theirs.streams {
        let stream = (0..connections)
            .find(|&i| wire::stream_id(i) == result.id)
            .ok_or_else(|| {
                format!(
                    "its results name stream id {}, which this test did not open",
                    result.id
                )
            })?;
        let role = if remote_is_server {
            direction.server_role(stream, streams)
        } else {
            direction.client_role(stream, streams)
        };
        reports.push(StreamReport {
            congestion: theirs.congestion_used.clone(),
            datagrams: udp.then(|| datagrams_of(result, role)),
            ..StreamReport::moved(
                stream,
                role,
                u64::try_from(result.bytes).unwrap_or(0),
                (result.end_time - result.start_time).max(0.0),
            )
        });
    }
    reports.sort_by_key(|r| r.stream);
    let wall_seconds = reports.iter().map(|r| r.seconds).fold(0.0, f64::max);
    Ok(SideReport {
        cpu_seconds: theirs.cpu_util_total.max(0.0) / 100.0 * wall_seconds,
        wall_seconds,
        streams: reports,
        host: None,
    }
    .with_text_escaped())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(direction: Direction) -> NetPlan {
        NetPlan {
            direction,
            iperf3: true,
            port: wire::DEFAULT_PORT,
            ..NetPlan::loopback(Duration::from_secs(3), 2)
        }
    }

    #[test]
    fn params_say_what_iperf3_reads_and_leave_out_what_is_off() {
        let forward = params(&plan(Direction::Forward));
        assert_eq!(
            (forward.time, forward.parallel, forward.len),
            (3, 2, 128 << 10)
        );
        assert_eq!((forward.reverse, forward.bidirectional), (None, None));
        assert_eq!(params(&plan(Direction::Reverse)).reverse, Some(true));
        let bytes = NetPlan {
            bytes: Some(1 << 30),
            duration_ms: None,
            ..plan(Direction::Bidir)
        };
        let p = params(&bytes);
        assert_eq!((p.time, p.num, p.bidirectional), (0, 1 << 30, Some(true)));
    }

    #[test]
    fn the_servers_results_become_the_remote_end_by_stream_id() {
        let theirs = Results {
            cpu_util_total: 50.0,
            cpu_util_user: 5.0,
            cpu_util_system: 45.0,
            sender_has_retransmits: -1,
            congestion_used: None,
            streams: [(1, 100), (3, 200), (4, 300), (5, 400)]
                .into_iter()
                .map(|(id, bytes)| StreamResult {
                    id,
                    bytes,
                    retransmits: -1,
                    jitter: 0.0,
                    errors: 0,
                    packets: 0,
                    omitted_errors: None,
                    omitted_packets: None,
                    start_time: 0.0,
                    end_time: 2.0,
                })
                .collect(),
            server_output_text: None,
        };
        let report = remote_report(&theirs, Direction::Bidir, 2, true, false).unwrap();
        let roles: Vec<(u32, Role, u64)> = report
            .streams
            .iter()
            .map(|s| (s.stream, s.role, s.bytes))
            .collect();
        assert_eq!(
            roles,
            vec![
                (0, Role::Receive, 100),
                (1, Role::Receive, 200),
                (2, Role::Send, 300),
                (3, Role::Send, 400)
            ]
        );
        assert!((report.cpu_seconds - 1.0).abs() < 1e-9);
        let as_client = remote_report(&theirs, Direction::Bidir, 2, false, false).unwrap();
        assert_eq!(as_client.streams[0].role, Role::Send);
        let err = remote_report(&theirs, Direction::Forward, 1, true, false).unwrap_err();
        assert!(err.contains("stream id 3"), "{err}");
    }
}
