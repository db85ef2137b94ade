//! One end's part of a test: a thread per stream, started together, watched until the
//! last one ends or the test must stop, and their reports gathered. The client and the
//! server both run their streams through here.

use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::host::HostWatch;
use super::options::{self, StreamOptions};
use super::protocol::TestRequest;
use super::report::{Role, SideReport};
use super::stream::{self, Ending, StreamJob, Until};
use crate::control::Progress;

/// Time past a test's planned end before an end gives up on its peer.
pub const GRACE: Duration = Duration::from_secs(10);

/// One data connection and what this end does on it.
pub struct Connection {
    /// The stream's index.
    pub stream: u32,
    /// Whether this end sends or receives on it.
    pub role: Role,
    /// The socket.
    pub socket: TcpStream,
    /// The block it writes from or reads into, made before the test starts.
    pub block: Vec<u8>,
}

impl Connection {
    /// Stream `stream`'s connection, with its block of `block_bytes` made now: random
    /// bytes to send (so a compressing path cannot inflate the rate), or touched pages to
    /// read into, so neither costs time once the test runs.
    pub fn new(stream: u32, role: Role, socket: TcpStream, block_bytes: usize) -> Connection {
        let mut block = vec![1u8; block_bytes];
        if role == Role::Send {
            rand::fill(&mut block[..]);
        }
        Connection {
            stream,
            role,
            socket,
            block,
        }
    }
}

impl Connection {
    /// Stream `stream` of `request` at the server: the server's half of the stream.
    pub fn at_server(request: &TestRequest, stream: u32, socket: TcpStream) -> Connection {
        let role = request.direction.server_role(stream, request.streams);
        Connection::new(stream, role, socket, request.block_bytes as usize)
    }
}

/// Clones of a test's connections, to read what crossed each at the instant the test
/// ends at this end: what a sender had delivered (its peer acknowledged) and what had
/// arrived for a receiver (read or still queued). iperf3 ends a test over the control
/// connection, and its receivers count nothing that comes after: what a sender wrote
/// that was still queued or in flight then, or written later, is not sent as far as
/// the test goes; what had arrived was received in time, though read later.
pub struct Crossed {
    streams: Vec<(u32, Role, TcpStream)>,
    preamble_sent: u64,
    preamble_received: u64,
}

impl Crossed {
    /// Watches `connections`, on which this end wrote `preamble_sent` bytes before the
    /// test's data and read `preamble_received` (an iperf3 client's cookie).
    pub fn watch(
        connections: &[Connection],
        preamble_sent: u64,
        preamble_received: u64,
    ) -> Crossed {
        let streams = connections
            .iter()
            .filter_map(|c| Some((c.stream, c.role, c.socket.try_clone().ok()?)))
            .collect();
        Crossed {
            streams,
            preamble_sent,
            preamble_received,
        }
    }

    /// The data bytes each stream has delivered (a sender) or taken in (a receiver) now.
    pub fn now(&self) -> Vec<(u32, u64)> {
        self.streams
            .iter()
            .filter_map(|(stream, role, socket)| {
                let bytes =
                    match role {
                        Role::Send => super::socket::bytes_delivered(socket)?
                            .saturating_sub(self.preamble_sent),
                        Role::Receive => super::socket::bytes_arrived(socket)?
                            .saturating_sub(self.preamble_received),
                    };
                Some((*stream, bytes))
            })
            .collect()
    }

    /// Counts each stream of `report` as what had crossed it: a sender no more than it
    /// had delivered at `sent`, a receiver all that had arrived at `received` (two
    /// readings, where the ends stop counting at different instants).
    pub fn count(report: &mut SideReport, sent: &[(u32, u64)], received: &[(u32, u64)]) {
        for stream in &mut report.streams {
            let at = match stream.role {
                Role::Send => sent,
                Role::Receive => received,
            };
            if let Some((_, bytes)) = at.iter().find(|(s, _)| *s == stream.stream) {
                stream.bytes = match stream.role {
                    Role::Send => stream.bytes.min(*bytes),
                    Role::Receive => stream.bytes.max(*bytes),
                };
            }
        }
    }
}

/// How one end runs its part of a test.
pub struct Run<'a> {
    /// The test.
    pub request: &'a TestRequest,
    /// Its start at this end.
    pub start: Instant,
    /// No stream runs past this, whatever the peer does.
    pub hard_stop: Instant,
    /// How the streams' end is agreed with the peer.
    pub ending: Ending<'a>,
    /// How the streams' bytes are made, sent and taken.
    pub options: &'a StreamOptions,
}

/// Runs `connections` as `test` says, until they end, its hard stop passes, or
/// `cancelled` says so; `progress` counts bytes for the runner's sampler.
pub fn run(
    connections: Vec<Connection>,
    test: &Run<'_>,
    progress: Option<&Progress>,
    cancelled: &dyn Fn() -> bool,
) -> SideReport {
    let Run {
        request,
        start,
        hard_stop,
        ending,
        options,
    } = *test;
    let until = match (request.duration_ms, request.bytes_per_stream) {
        (_, Some(bytes)) => Until::Bytes(bytes),
        (Some(ms), None) => Until::Deadline(start + Duration::from_millis(ms)),
        (None, None) => Until::Deadline(start),
    };
    // A lone stream's receiver sleeps between segments, and waking it is much of its
    // sender's work (see `stream::receive`): it waits for whole blocks. Receivers of
    // several streams at once barely sleep (on loopback, 800 wake-ups per GB against
    // 10,000 for one stream), so waiting saves nothing there, and two streams on two
    // cores ran 4% slower with it. Nor with a window set by hand: a 64 KiB window ran
    // 15% slower, its reader asleep while the window was full. Nor where TCP may not
    // buffer 32 blocks for the reader: a block held unread is then a share of a window
    // that may be what limits (net.ipv4.tcp_rmem's max at 64 KiB on a 20 ms path: 1.17
    // MB/s waiting for blocks, iperf3 1.85 MB/s, the window's ceiling 1.94).
    let roomy =
        super::socket::receive_buffer_max().is_none_or(|max| max >= 32 * request.block_bytes);
    let wake_per_block = roomy
        && request.window_bytes.is_none()
        && request.direction.connections(request.streams) == 1;
    let stop = AtomicBool::new(false);
    let host = HostWatch::start();
    let mut reports = std::thread::scope(|scope| {
        let handles: Vec<_> = connections
            .into_iter()
            .map(|mut connection| {
                if options.repeating_payload && connection.role == Role::Send {
                    options::fill_repeating(&mut connection.block);
                }
                let job = StreamJob {
                    socket: connection.socket,
                    block: connection.block,
                    wake_per_block,
                    stream: connection.stream,
                    role: connection.role,
                    until,
                    hard_stop,
                    interval: Duration::from_millis(request.interval_ms.max(1)),
                    start,
                    stop: &stop,
                    progress,
                    ending,
                    options,
                };
                scope.spawn(move || stream::run(job))
            })
            .collect();
        while !handles.iter().all(|h| h.is_finished()) {
            if cancelled() {
                stop.store(true, Ordering::Relaxed);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        handles
            .into_iter()
            .filter_map(|h| h.join().ok())
            .collect::<Vec<_>>()
    });
    reports.sort_by_key(|r| r.stream);
    SideReport {
        host: Some(host.finish()),
        ..SideReport::of(reports)
    }
}
