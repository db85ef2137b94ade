//! The measuring loops of a UDP stream: a sender paced to its rate, each datagram with
//! iperf3's header, and a receiver keeping iperf3's tally, both with interval figures
//! on the test's clock. Both ends use them, as both use the TCP loops.

use std::io::ErrorKind;
use std::net::UdpSocket;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::datagram::{Header, Tally};
use super::options::StreamOptions;
use super::payload::pace_wait;
use super::report::{Datagrams, Interval, Role, StreamReport};
use super::stream::{Reading, Ticker, Until};

/// How long a blocked receive waits before it looks at the stop flag again.
const POLL: Duration = Duration::from_millis(50);

/// One UDP stream's work.
pub struct UdpJob<'a> {
    /// The socket, connected to the far end's.
    pub socket: UdpSocket,
    /// The stream's index.
    pub stream: u32,
    /// Whether this end sends or receives.
    pub role: Role,
    /// Bytes of each datagram (iperf3's -l).
    pub datagram_bytes: usize,
    /// Whether the count is 64 bits (`--udp-counters-64bit`).
    pub wide: bool,
    /// When a sender stops; a receiver counts until it is stopped.
    pub until: Until,
    /// No stream runs past this, whatever the peer does.
    pub hard_stop: Instant,
    /// Length of an interval.
    pub interval: Duration,
    /// The test's start at this end.
    pub start: Instant,
    /// Set to stop the stream now.
    pub stop: &'a AtomicBool,
    /// The sender's rate (`bitrate_bits_per_sec`, none: as fast as the socket takes).
    pub options: &'a StreamOptions,
}

/// The clock iperf3 stamps its datagrams with (CLOCK_MONOTONIC), so that on one host
/// the transit of a datagram from iperf3 to ratelab, or back, is its real delay.
fn clock() -> Duration {
    let now = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    Duration::new(now.tv_sec as u64, now.tv_nsec as u32)
}

/// Runs one UDP stream to its end and reports it.
pub fn run(job: UdpJob<'_>) -> StreamReport {
    let cpu_before = crate::platform::cores::calling_thread_cpu_seconds();
    let (bytes, end, intervals, datagrams, error) = match job.role {
        Role::Send => send(&job),
        Role::Receive => receive(&job),
    };
    let seconds = end.duration_since(job.start).as_secs_f64();
    StreamReport {
        intervals,
        cpu_seconds: crate::platform::cores::calling_thread_cpu_seconds() - cpu_before,
        error,
        datagrams: Some(datagrams),
        ..StreamReport::moved(job.stream, job.role, bytes, seconds)
    }
}

/// What a stream end did: bytes, the last datagram's time, intervals, datagrams, and
/// why it stopped early.
type Outcome = (u64, Instant, Vec<Interval>, Datagrams, Option<String>);

/// A UDP stream's datagrams as its intervals close: each interval's since the last.
#[derive(Default)]
struct Counted {
    now: Datagrams,
    last: Datagrams,
}

impl Reading for Counted {
    fn fill(&mut self, interval: &mut Interval) {
        interval.datagrams = Some(self.now.since(&self.last));
        self.last = self.now;
    }
}

/// Sends datagrams at the stream's rate until its deadline or its bytes, or the stop.
fn send(job: &UdpJob<'_>) -> Outcome {
    let mut datagram = vec![0u8; job.datagram_bytes];
    rand::fill(&mut datagram[..]);
    let mut ticker = Ticker::new(job.start, job.interval);
    let mut counted = Counted::default();
    let mut sent = 0u64;
    let mut last = job.start;
    let mut error = None;
    let _ = job.socket.set_write_timeout(Some(POLL));
    loop {
        let now = Instant::now();
        ticker.tick(now, sent, &mut counted);
        let done = match job.until {
            Until::Deadline(at) => now >= at,
            Until::Bytes(bytes) => sent >= bytes,
        };
        if done || now >= job.hard_stop || job.stop.load(Ordering::Relaxed) {
            break;
        }
        let wait = pace_wait(job.options, sent, datagram.len(), now - job.start);
        if !wait.is_zero() {
            std::thread::sleep(wait.min(POLL));
            continue;
        }
        let figures = &mut counted.now;
        Header::at(clock(), figures.count + 1).write(&mut datagram, job.wide);
        match job.socket.send(&datagram) {
            Ok(n) => {
                figures.count += 1;
                sent += n as u64;
                last = Instant::now();
            }
            // The socket's buffer was full (or the device's queue): the datagram was
            // never sent, and its count is used again, as iperf3 does.
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                figures.send_errors += 1;
            }
            Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => figures.send_errors += 1,
            // The far end's port closed (ICMP unreachable from an earlier datagram).
            Err(e) if e.kind() == ErrorKind::ConnectionRefused => {
                error = Some(format!("stream {}: the receiver's port closed", job.stream));
                break;
            }
            Err(e) => {
                error = Some(format!("stream {}: send: {e}", job.stream));
                break;
            }
        }
    }
    let intervals = ticker.finish(last, sent, &mut counted);
    (sent, last, intervals, counted.now, error)
}

/// Receives datagrams, counting them as iperf3's receiver does, until the stop.
fn receive(job: &UdpJob<'_>) -> Outcome {
    let mut buffer = vec![0u8; job.datagram_bytes.max(super::datagram::WIDE_HEADER_BYTES)];
    let mut ticker = Ticker::new(job.start, job.interval);
    let mut counted = Counted::default();
    let mut tally = Tally::default();
    let mut last = job.start;
    let mut error = None;
    let _ = job.socket.set_read_timeout(Some(POLL));
    loop {
        let now = Instant::now();
        counted.now = Datagrams::of(&tally);
        ticker.tick(now, tally.bytes, &mut counted);
        if now >= job.hard_stop || job.stop.load(Ordering::Relaxed) {
            break;
        }
        match job.socket.recv(&mut buffer) {
            Ok(n) => {
                let arrival = clock().as_secs_f64();
                tally.take(n, Header::read(&buffer[..n], job.wide), arrival);
                last = Instant::now();
            }
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            // An ICMP error for this socket (the sender's port closed): it sends no more.
            Err(e) if e.kind() == ErrorKind::ConnectionRefused => {}
            Err(e) => {
                error = Some(format!("stream {}: receive: {e}", job.stream));
                break;
            }
        }
    }
    counted.now = Datagrams::of(&tally);
    let intervals = ticker.finish(last, tally.bytes, &mut counted);
    (tally.bytes, last, intervals, counted.now, error)
}
