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
mod record;
mod streams;
mod udp;

use std::io::Write;
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use self::admit::{Admitted, Refused};
use crate::document::now_rfc3339;
use crate::workload::net::NetPlan;
use crate::workload::net::admission::Ticket;
use crate::workload::net::iperf3::errors::code;
use crate::workload::net::iperf3::login::{AuthError, Padding};
use crate::workload::net::iperf3::wire::{
    self, COOKIE_BYTES, MAX_PARAMS_BYTES, MAX_RESULTS_BYTES, Params, Results, State as Wire,
};
use crate::workload::net::iperf3::{our_results, remote_report};
use crate::workload::net::protocol::{self, DecodeError, ReadBy, TestRequest, WireError};
use crate::workload::net::report::{self, Role, SideReport};
use crate::workload::net::server::closed::Closed;
use crate::workload::net::server::routes::route;
use crate::workload::net::server::slots::{busy, take_slot};
use crate::workload::net::server::{Arrival, State};
use crate::workload::net::{plausible, socket};

/// Serves a connection whose first bytes are an iperf3 cookie, the `accepted`-th the
/// server took: a data connection of a test gathering its streams, or a new test's
/// control connection.
pub(in crate::workload::net) fn handle(
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
    let name = String::from_utf8_lossy(&cookie[..COOKIE_BYTES - 1]).into_owned();
    if state.routes().contains_key(&name) {
        drop(ticket);
        let arrival = Arrival {
            stream: None,
            peer: peer.ip(),
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
/// The client holds no test slot until it has proven itself: its credentials where
/// the server checks them, else parameters within the bounds. A test asked for by a
/// client that proved itself ends `--once`, served or not, as `iperf3 -s -1` does.
fn control(
    state: &State,
    connection: &TcpStream,
    peer: SocketAddr,
    cookie: &str,
    ticket: Ticket,
) -> Result<(), Closed> {
    let timeout = state.config.idle_timeout;
    let proven = ticket.witness();
    let outcome = refuse_at_once(state).and_then(|()| {
        let heard = hear(state, connection, &ticket)?;
        let Some(slot) = take_slot(state) else {
            return Err(Refusal::from(busy_closed(state)));
        };
        // The test slot bounds this connection from here on.
        drop(ticket);
        let started_at = now_rfc3339();
        let local_ip = connection.local_addr().ok().map(|a| a.ip());
        let begun = state.recorder.as_ref().map(|begin| begin(local_ip));
        let served = test(state, connection, peer, cookie, heard);
        drop(slot);
        served.map(|done| (done, begun, started_at))
    });
    match &outcome {
        Err(Refusal {
            closed: Closed::Busy(_),
            ..
        }) => {
            // As iperf3 does, a busy server says so (at once, or after the parameters).
            let _ = write(connection, &[Wire::AccessDenied.byte()], timeout);
        }
        Err(Refusal {
            code: Some(code), ..
        }) => {
            let mut bytes = vec![Wire::ServerError.byte()];
            bytes.extend_from_slice(&code.to_be_bytes());
            bytes.extend_from_slice(&0i32.to_be_bytes());
            let _ = write(connection, &bytes, timeout);
        }
        _ => {}
    }
    // A 3.21 or later client waits for this end to close before it returns.
    let _ = connection.shutdown(Shutdown::Both);
    let ended = match outcome {
        Ok((done, begun, started_at)) => {
            state.journal.say(&format!(
                "{peer}: iperf3 test of {}: received {}, sent {} in {:.2} s",
                crate::workload::net::server::test_words(&done.request),
                crate::vocab::units::format_bytes(done.local.moved(Role::Receive)),
                crate::vocab::units::format_bytes(done.local.moved(Role::Send)),
                done.local.wall_seconds
            ));
            if let Some(reason) = &done.disagreement {
                state
                    .journal
                    .say(&format!("{peer}: stored incomplete: {reason}"));
            }
            if let Some(store) = begun {
                store(record::document(peer, &done, started_at));
            }
            Ok(())
        }
        Err(refusal) => Err(refusal.closed),
    };
    // Counted once the run is stored, so `--once` never exits while storing it.
    if proven.load(Ordering::SeqCst) {
        state.ended.fetch_add(1, Ordering::SeqCst);
    }
    ended
}

/// Refuses an iperf3 client before it says anything more: one that can prove nothing
/// to a server with a key and no iperf3 credentials, and any while no slot is free.
fn refuse_at_once(state: &State) -> Result<(), Refusal> {
    if state.config.key.is_some() && state.config.iperf3_authority.is_none() {
        return Err(refused(
            code::AUTH,
            "an iperf3 client cannot prove the key of --key-file (give iperf3 credentials: \
             --rsa-private-key-path and --authorized-users-path)",
        ));
    }
    match busy(state) {
        Some(_) => Err(Refusal::from(busy_closed(state))),
        None => Ok(()),
    }
}

/// Why an iperf3 client hears "busy".
fn busy_closed(state: &State) -> Closed {
    Closed::Busy(busy(state).unwrap_or_else(|| "no test slot is free".into()) + " (iperf3 client)")
}

/// What an iperf3 client asked for, once it proved itself.
struct Heard {
    params: Params,
    admitted: Admitted,
}

/// The parameters and the credentials: the ticket is marked proven once the
/// credentials are (where the server checks them), else once the parameters are
/// within the bounds.
fn hear(state: &State, connection: &TcpStream, ticket: &Ticket) -> Result<Heard, Refusal> {
    let timeout = state.config.idle_timeout;
    write(connection, &[Wire::ParamExchange.byte()], timeout)?;
    let params: Params = receive(connection, MAX_PARAMS_BYTES, timeout).map_err(|e| match e {
        WireError::Decode(_) => Refusal {
            closed: Closed::Wire(e),
            code: Some(code::RECEIVE_PARAMS),
        },
        other => Refusal::from(other),
    })?;
    if authorize(state, &params)? {
        ticket.proven();
    }
    let ipv6 = connection.local_addr().is_ok_and(|a| a.is_ipv6());
    let admitted = admit::admit(&params, &state.config.limits, ipv6)?;
    probe(&admitted)?;
    ticket.proven();
    Ok(Heard { params, admitted })
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

/// The streams, the test until the client's TEST_END, the results.
fn test(
    state: &State,
    connection: &TcpStream,
    peer: SocketAddr,
    cookie: &str,
    heard: Heard,
) -> Result<Served, Refusal> {
    let timeout = state.config.idle_timeout;
    let Heard { params, admitted } = heard;
    let (local, clock) = if admitted.request.udp.is_some() {
        let streams = udp::gather(state, connection, peer, &admitted)?;
        udp::run(state, connection, &admitted, streams)?
    } else {
        let connections = streams::gather(state, connection, peer, cookie, &admitted)?;
        streams::run_streams(state, connection, &admitted, connections)?
    };
    write(connection, &[Wire::ExchangeResults.byte()], timeout)?;
    let theirs: Results = receive(connection, MAX_RESULTS_BYTES, timeout)?;
    let request = admitted.request;
    let udp = request.udp.is_some();
    let remote = remote_report(&theirs, request.direction, request.streams, false, udp)
        .map_err(|reason| Refusal::from(Closed::OutOfBounds(reason)))?;
    let mut ours = our_results(&local, clock.user_share());
    if params.get_server_output.is_some_and(|on| on != 0) {
        ours.server_output_text = Some(format!(
            "ratelab net serve: {}: received {}, sent {} in {:.2} s\n",
            crate::workload::net::server::test_words(&request),
            crate::vocab::units::format_bytes(local.moved(Role::Receive)),
            crate::vocab::units::format_bytes(local.moved(Role::Send)),
            local.wall_seconds
        ));
    }
    let mut frame = wire::frame(&ours);
    frame.push(Wire::DisplayResults.byte());
    write(connection, &frame, timeout)?;
    // IPERF_DONE, or the client closing, ends the test.
    let mut done = [0u8; 1];
    let _ = read_exact(connection, &mut done, timeout);
    let mut plan = record::plan_of(peer, &params, &request, admitted.mss);
    plan.options = admitted.options;
    Ok(Served {
        local_ip: connection.local_addr().ok().map(|a| a.ip()),
        disagreement: plausible::results(&theirs)
            .map(|reason| format!("the client's results cannot be: {reason}"))
            .or_else(|| short_of_plan(&request, &local))
            .or_else(|| {
                report::disagreement(&local, &remote, request.block_bytes, socket::held_between())
            }),
        request,
        plan,
        local,
        remote,
        theirs,
    })
}

/// How far short of what it asked for a test the client ended falls, where it falls
/// far short: no bytes at all, under 90% of its time, or under 90% of its bytes in a
/// direction. iperf3's client ends a test at its own clock or its own count, so a
/// test it ended early is not one it ran.
fn short_of_plan(request: &TestRequest, local: &SideReport) -> Option<String> {
    if local.streams.iter().all(|s| s.bytes == 0) {
        return Some("no bytes crossed in the test".into());
    }
    let short = |what: String, of: String| {
        Some(format!(
            "the client ended the test after {what} of the {of} it asked for"
        ))
    };
    match (request.duration_ms, request.bytes_per_stream) {
        (Some(ms), _) if local.wall_seconds < 0.9 * ms as f64 / 1000.0 => short(
            format!("{:.3} s", local.wall_seconds),
            format!("{} s", ms as f64 / 1000.0),
        ),
        (None, Some(per_stream)) => [Role::Send, Role::Receive].into_iter().find_map(|role| {
            let streams = local.streams.iter().filter(|s| s.role == role).count() as u64;
            let asked = per_stream.saturating_mul(streams);
            let moved = how_far(local, role, request.block_bytes);
            if (moved as f64) < 0.9 * asked as f64 {
                short(
                    crate::vocab::units::format_bytes(moved),
                    crate::vocab::units::format_bytes(asked),
                )
            } else {
                None
            }
        }),
        _ => None,
    }
}

/// How far the test got in `role`'s streams, in bytes: what they moved, or, for UDP
/// receivers, what their senders had sent up to the last datagram that came (the
/// highest count, in datagrams of `block_bytes`), since lost datagrams are a figure of
/// the test, not a test cut short.
fn how_far(local: &SideReport, role: Role, block_bytes: u64) -> u64 {
    local
        .streams
        .iter()
        .filter(|s| s.role == role)
        .map(|s| match (role, s.datagrams) {
            // The highest count is the peer's number, whatever it sent.
            (Role::Receive, Some(d)) => d.highest.saturating_mul(block_bytes).max(s.bytes),
            _ => s.bytes,
        })
        .fold(0u64, u64::saturating_add)
}

/// Takes the client's credentials as `iperf3 -s` does when it has a private key and
/// authorized users; says whether it checked any (with none set up, there are none to
/// check: a server with --key-file and no iperf3 credentials refused the client at once).
fn authorize(state: &State, params: &Params) -> Result<bool, Refusal> {
    let Some(authority) = &state.config.iperf3_authority else {
        return Ok(false);
    };
    let Some(token) = params.authtoken.as_deref() else {
        return Err(refused(
            code::AUTH,
            "an iperf3 client without credentials (iperf3 --username)",
        ));
    };
    match authority.check(token, crate::workload::net::iperf3::login::now_s()) {
        Ok(user) => {
            state
                .journal
                .say(&format!("iperf3 user {user:?} authenticated"));
            Ok(true)
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
    let mut filled = 0;
    while filled < buffer.len() {
        match protocol::read_by(connection, &mut buffer[filled..], deadline)? {
            ReadBy::Read(0) => return Err(WireError::Closed),
            ReadBy::Read(n) => filled += n,
            ReadBy::Late => return Err(WireError::Timeout(timeout)),
        }
    }
    Ok(())
}

/// Writes `bytes` whole within `timeout`.
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::net::protocol::{Direction, Udp};
    use crate::workload::net::report::{Datagrams, StreamReport};

    fn received(bytes: u64, datagrams: Option<Datagrams>) -> SideReport {
        SideReport::of(vec![StreamReport {
            datagrams,
            ..StreamReport::moved(0, Role::Receive, bytes, 1.0)
        }])
    }

    /// A test of 1000 blocks of 1000 bytes from the client.
    fn of_bytes(udp: Option<Udp>) -> TestRequest {
        TestRequest {
            streams: 1,
            direction: Direction::Forward,
            duration_ms: None,
            bytes_per_stream: Some(1_000_000),
            block_bytes: 1000,
            window_bytes: None,
            interval_ms: 1000,
            udp,
        }
    }

    #[test]
    fn a_udp_test_of_bytes_that_lost_datagrams_ran_whole_and_one_cut_short_did_not() {
        let udp = Some(Udp { wide_counts: false });
        // A third lost on the way, the last count seen 1000: the client sent it all.
        let lossy = Datagrams {
            count: 667,
            highest: 1000,
            lost: 333,
            ..Datagrams::default()
        };
        assert_eq!(
            short_of_plan(&of_bytes(udp), &received(667_000, Some(lossy))),
            None
        );
        // Ended at count 500: half of what it asked for.
        let cut = Datagrams {
            count: 500,
            highest: 500,
            ..Datagrams::default()
        };
        let why = short_of_plan(&of_bytes(udp), &received(500_000, Some(cut))).unwrap();
        assert!(why.contains("after 488 KiB"), "{why}");
        // TCP has no datagrams: what arrived is how far it got.
        assert!(short_of_plan(&of_bytes(None), &received(667_000, None)).is_some());
    }
}
