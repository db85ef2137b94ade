//! The data phase of a UDP test served to an iperf3 client (`iperf3 -c HOST -u`): each
//! stream opened by the client's connect datagram to the server's port and answered
//! as iperf3's server answers it (the socket that heard it connected to the client's,
//! a new one bound for the next stream), heard only from the address of the client's
//! control connection; then the streams run until the client's TEST_END, counted as
//! iperf3's server counts them.

use std::net::{IpAddr, SocketAddr, TcpStream, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::admit::Admitted;
use super::streams::{Begun, End, await_end, begin, gave_up, tell_stopping, timed};
use super::{Refusal, refused, write};
use crate::workload::net::datagram::{CONNECT, LEGACY_CONNECT, REPLY};
use crate::workload::net::host::HostWatch;
use crate::workload::net::iperf3::CpuClock;
use crate::workload::net::iperf3::errors::code;
use crate::workload::net::iperf3::wire::State as Wire;
use crate::workload::net::options::{self, OptionError};
use crate::workload::net::report::{Role, SideReport};
use crate::workload::net::server::State;
use crate::workload::net::server::closed::Closed;
use crate::workload::net::stream::Until;
use crate::workload::net::udp::{self, UdpJob};

/// One stream's socket at this end, connected to the client's.
pub(super) struct UdpStream {
    stream: u32,
    role: Role,
    socket: UdpSocket,
}

/// Binds the server's port for UDP, says CREATE_STREAMS, and takes each stream's
/// connect datagram in turn: the client opens them one by one, each once the last was
/// answered, so they are numbered in the order heard, as iperf3's server numbers them.
pub(super) fn gather(
    state: &State,
    connection: &TcpStream,
    peer: SocketAddr,
    admitted: &Admitted,
) -> Result<Vec<UdpStream>, Refusal> {
    let timeout = state.config.idle_timeout;
    let request = &admitted.request;
    let wanted = request.direction.connections(request.streams);
    let here = connection
        .local_addr()
        .map_err(|e| Refusal::from(Closed::OutOfBounds(format!("the server's address: {e}"))))?;
    // Bound before the client is told to connect, so its first datagram finds it.
    let mut listener = listen(here)?;
    write(connection, &[Wire::CreateStreams.byte()], timeout)?;
    let deadline = Instant::now() + timeout;
    let mut streams = Vec::with_capacity(wanted as usize);
    for stream in 0..wanted {
        let from = hear(&listener, peer.ip(), deadline, connection).map_err(|why| {
            Refusal::from(match why {
                Heard::Late => Closed::DataMissing {
                    arrived: stream as usize,
                    wanted,
                    timeout,
                },
                Heard::GaveUp => Closed::OutOfBounds(format!(
                    "the iperf3 client gave up after {stream} of {wanted} UDP streams"
                )),
                Heard::Failed(e) => Closed::OutOfBounds(format!("the UDP port: {e}")),
            })
        })?;
        let socket = std::mem::replace(&mut listener, listen(here)?);
        let failed = |e: std::io::Error| {
            Refusal::from(Closed::OutOfBounds(format!("UDP stream {stream}: {e}")))
        };
        socket.connect(from).map_err(failed)?;
        set_options(admitted, &socket)?;
        socket.send(&REPLY).map_err(failed)?;
        streams.push(UdpStream {
            stream,
            role: request.direction.server_role(stream, request.streams),
            socket,
        });
    }
    Ok(streams)
}

/// A UDP socket on the server's address and port, which another may share (the
/// streams' sockets stay bound there, each connected to its client's).
fn listen(here: SocketAddr) -> Result<UdpSocket, Refusal> {
    let bound = || -> std::io::Result<UdpSocket> {
        let socket = socket2::Socket::new(
            socket2::Domain::for_address(here),
            socket2::Type::DGRAM,
            Some(socket2::Protocol::UDP),
        )?;
        socket.set_reuse_address(true)?;
        socket.bind(&here.into())?;
        Ok(socket.into())
    };
    bound().map_err(|e| {
        Refusal::from(Closed::OutOfBounds(format!(
            "UDP port {} for the test's streams: {e}",
            here.port()
        )))
    })
}

/// Why no connect datagram was heard.
enum Heard {
    /// None came in time.
    Late,
    /// The client closed or spoke on its control connection.
    GaveUp,
    /// The socket failed.
    Failed(std::io::Error),
}

/// Waits for a connect datagram from `client`'s address; any other datagram, or one
/// from another address, is let go.
fn hear(
    listener: &UdpSocket,
    client: IpAddr,
    deadline: Instant,
    connection: &TcpStream,
) -> Result<SocketAddr, Heard> {
    let _ = listener.set_read_timeout(Some(Duration::from_millis(20)));
    let mut message = [0u8; 8];
    loop {
        if Instant::now() >= deadline {
            return Err(Heard::Late);
        }
        match listener.recv_from(&mut message) {
            Ok((4, from))
                if from.ip() == client
                    && [CONNECT, LEGACY_CONNECT].contains(&message_of(&message)) =>
            {
                return Ok(from);
            }
            Ok(_) => {}
            Err(e) if waiting(&e) => {
                if gave_up(connection) {
                    return Err(Heard::GaveUp);
                }
            }
            Err(e) => return Err(Heard::Failed(e)),
        }
    }
}

fn message_of(bytes: &[u8; 8]) -> [u8; 4] {
    [bytes[0], bytes[1], bytes[2], bytes[3]]
}

fn waiting(e: &std::io::Error) -> bool {
    use std::io::ErrorKind::{Interrupted, TimedOut, WouldBlock};
    matches!(e.kind(), WouldBlock | TimedOut | Interrupted)
}

/// Sets what the test asks on one stream's socket (its buffers, TOS, pacing, the
/// don't-fragment flag), or refuses it in iperf3's words.
fn set_options(admitted: &Admitted, socket: &UdpSocket) -> Result<(), Refusal> {
    let window = admitted
        .request
        .window_bytes
        .map_or(Ok(()), |w| options::set_window(socket, w));
    window
        .and_then(|()| admitted.options.apply(socket))
        .map_err(|e| {
            let code = match &e {
                OptionError::Pacing(_) => code::SET_PACING,
                OptionError::Tos(_) => code::SET_TOS,
                OptionError::TrafficClass(_) => code::SET_CLASS,
                OptionError::DontFragment(_) => code::SET_DONT_FRAGMENT,
                OptionError::Window(_) => code::SET_BUFFER,
                OptionError::WindowShort { .. } => code::SET_BUFFER_SHORT,
                // Refused at admission: TCP's options in a UDP test.
                OptionError::Congestion { .. } | OptionError::Nodelay(_) | OptionError::Mss(_) => {
                    code::UNIMPLEMENTED
                }
            };
            refused(code, format!("a UDP stream's {e}"))
        })
}

/// Starts the test, runs the streams until the client's TEST_END, and says what they
/// measured as iperf3's server counts it: every stream's time runs from TEST_START to
/// TEST_END, and a receiver counts what came before it.
pub(super) fn run(
    state: &State,
    connection: &TcpStream,
    admitted: &Admitted,
    streams: Vec<UdpStream>,
) -> Result<(SideReport, CpuClock), Refusal> {
    let timeout = state.config.idle_timeout;
    let request = &admitted.request;
    let host = HostWatch::start();
    let Begun {
        start,
        planned: _,
        hard_stop,
        clock,
    } = begin(state, connection, request)?;
    // As for TCP (see streams.rs): a sender of a timed test stops at its end by this
    // clock, which started before the client's; one of bytes stops at its count.
    let until = match (request.duration_ms, request.bytes_per_stream) {
        (_, Some(bytes)) => Until::Bytes(bytes),
        (Some(ms), None) => Until::Deadline(start + Duration::from_millis(ms)),
        (None, None) => Until::Deadline(hard_stop),
    };
    let wide = request.udp.is_some_and(|u| u.wide_counts);
    let stop = AtomicBool::new(false);
    let stopping = || state.stopping.load(Ordering::SeqCst);
    let (reports, ended) = std::thread::scope(|scope| {
        let handles: Vec<_> = streams
            .into_iter()
            .map(|s| {
                let job = UdpJob {
                    socket: s.socket,
                    stream: s.stream,
                    role: s.role,
                    datagram_bytes: request.block_bytes as usize,
                    wide,
                    until,
                    hard_stop,
                    interval: Duration::from_millis(request.interval_ms.max(1)),
                    start,
                    stop: &stop,
                    options: &admitted.options,
                };
                scope.spawn(move || udp::run(job))
            })
            .collect();
        let ended = await_end(connection, hard_stop, &stopping);
        // The receivers stop counting at once: iperf3's server counts nothing that
        // comes after TEST_END.
        stop.store(true, Ordering::Relaxed);
        if matches!(ended, End::Stopping) {
            tell_stopping(connection, timeout);
        }
        let mut reports: Vec<_> = handles.into_iter().filter_map(|h| h.join().ok()).collect();
        reports.sort_by_key(|r| r.stream);
        (reports, ended)
    });
    let local = SideReport {
        host: Some(host.finish()),
        ..SideReport::of(reports)
    };
    Ok((timed(ended, start, local)?, clock))
}
