//! The measuring loops: one thread per stream, writing or reading one TCP connection in
//! blocks, with interval figures and TCP_INFO taken as it goes. Both ends use the same
//! loops, so neither end's figures come from different code.

use std::io::{ErrorKind, Read};
use std::net::{Shutdown, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

use super::options::{self, StreamOptions};
use super::payload::{Source, pace_wait, read};
use super::report::{Interval, Role, Stall, StreamReport};
use super::socket;
use crate::control::Progress;
use crate::platform::threads::{OwnTimes, SchedTimes};

/// How often a blocked call wakes to check the stop flag and the deadline.
const POLL: Duration = Duration::from_millis(100);

/// How long a sender waits, after its last byte, for the receiver to take everything.
const DRAIN: Duration = Duration::from_secs(10);

/// How long a sender waits with nothing acknowledged, its retransmission timer fired
/// twice or more in a row, before it calls its bytes lost and ends its stream.
const STALL: Duration = Duration::from_secs(1);

/// How long a stalled sender's probe of its peer waits for a handshake.
const HANDSHAKE: Duration = Duration::from_secs(1);

/// How often a sender looks whether its bytes are all acknowledged.
const ACK_POLL: Duration = Duration::from_millis(1);

/// When a sender stops.
#[derive(Debug, Clone, Copy)]
pub enum Until {
    /// At this time.
    Deadline(Instant),
    /// After this many bytes.
    Bytes(u64),
}

/// How the end of a test is agreed with the peer.
#[derive(Debug, Clone, Copy)]
pub enum Ending<'a> {
    /// ratelab's: a sender shuts its half and waits for the receiver to close, and a
    /// receiver reads to the end of the stream, so every byte sent is counted by both.
    Drain,
    /// iperf3's: the client ends the test over the control connection. Each stream end
    /// counts up to its deadline (a sender also up to its bytes) or until the count is
    /// enough, and says so; a receiver then reads on without counting until it is
    /// stopped, so the peer's writes never block before it sees the test's end.
    Handover(&'a Handover),
}

/// What one end's streams and the thread that ends an iperf3 test share: how many
/// streams are done counting, and whether the count is enough, with a signal so the
/// thread waits for them asleep (a poll every millisecond cost the client a third more
/// CPU per GB than iperf3's).
#[derive(Debug, Default)]
pub struct Handover {
    done: AtomicUsize,
    /// Bytes the receiving streams counted, all together.
    received: AtomicU64,
    /// Bytes the receivers count together before the count is enough (iperf3 bounds a
    /// test's bytes over every stream, not per stream); none when time bounds it.
    received_bound: Option<u64>,
    enough: AtomicBool,
    changed: (Mutex<()>, Condvar),
}

impl Handover {
    /// A handover whose count is enough once the receivers have `received_bound` bytes.
    pub fn new(received_bound: Option<u64>) -> Handover {
        Handover {
            received_bound,
            ..Handover::default()
        }
    }

    /// A stream's count is done.
    fn stream_done(&self) {
        self.done.fetch_add(1, Ordering::Relaxed);
        self.signal();
    }

    /// A receiver counted `bytes` more.
    fn count(&self, bytes: u64) {
        let received = self.received.fetch_add(bytes, Ordering::Relaxed) + bytes;
        if self.received_bound.is_some_and(|bound| received >= bound) {
            self.enough.store(true, Ordering::Relaxed);
            self.signal();
        }
    }

    /// Whether every stream's count must end now.
    pub fn is_enough(&self) -> bool {
        self.enough.load(Ordering::Relaxed)
    }

    fn signal(&self) {
        let _held = self.changed.0.lock().unwrap_or_else(|p| p.into_inner());
        self.changed.1.notify_all();
    }

    /// Waits up to `timeout` until `streams` streams are done or the count is enough;
    /// says whether either happened.
    pub fn wait(&self, streams: usize, timeout: Duration) -> bool {
        let over = || self.done.load(Ordering::Relaxed) >= streams || self.is_enough();
        let held = self.changed.0.lock().unwrap_or_else(|p| p.into_inner());
        if over() {
            return true;
        }
        let _ = self.changed.1.wait_timeout(held, timeout);
        over()
    }
}

/// One stream's work.
pub struct StreamJob<'a> {
    /// The connection.
    pub socket: TcpStream,
    /// The stream's index.
    pub stream: u32,
    /// Whether this end writes or reads.
    pub role: Role,
    /// When a sender stops; a receiver reads to the end of the stream.
    pub until: Until,
    /// No stream runs past this, whatever the peer does.
    pub hard_stop: Instant,
    /// The block each call writes from or reads into; its length is the bytes per call.
    pub block: Vec<u8>,
    /// Whether a receiver sleeps until a whole block is queued (see [`receive`]).
    pub wake_per_block: bool,
    /// Length of an interval.
    pub interval: Duration,
    /// The test's start at this end.
    pub start: Instant,
    /// Set to stop every stream now.
    pub stop: &'a AtomicBool,
    /// Counters the runner samples, at the end that runs under the runner.
    pub progress: Option<&'a Progress>,
    /// How the test's end is agreed.
    pub ending: Ending<'a>,
    /// How the bytes are made, sent and taken (pacing, sendfile, MSG_TRUNC).
    pub options: &'a StreamOptions,
}

/// What an interval of a stream holds beyond its bytes and its thread's CPU, read as
/// the interval closes: a TCP connection's state, or a UDP stream's datagrams.
pub(super) trait Reading {
    /// Puts what it reads into the interval closing now.
    fn fill(&mut self, interval: &mut Interval);
}

impl Reading for &TcpStream {
    fn fill(&mut self, interval: &mut Interval) {
        interval.tcp = socket::tcp_stats(self);
    }
}

/// Interval bookkeeping shared by the measuring loops, TCP's and UDP's.
pub(super) struct Ticker {
    start: Instant,
    interval: Duration,
    next: Instant,
    /// The nominal interval open now: boundaries passed since the start.
    index: u64,
    last_s: f64,
    last_bytes: u64,
    /// The stream thread's CPU time at the last interval's end.
    last_cpu_s: f64,
    /// Its scheduler times, and what they were at the last interval's end.
    sched: Option<(OwnTimes, SchedTimes)>,
    intervals: Vec<Interval>,
}

impl Ticker {
    /// Intervals of `interval` from `start`.
    pub(super) fn new(start: Instant, interval: Duration) -> Ticker {
        Ticker {
            start,
            interval,
            next: start + interval,
            index: 0,
            last_s: 0.0,
            last_bytes: 0,
            last_cpu_s: crate::platform::cores::calling_thread_cpu_seconds(),
            sched: OwnTimes::open().and_then(|mut own| {
                let times = own.times()?;
                Some((own, times))
            }),
            intervals: Vec::new(),
        }
    }

    /// Closes the interval when its time has come.
    pub(super) fn tick(&mut self, now: Instant, bytes: u64, reading: &mut impl Reading) {
        if now >= self.next {
            self.close(now, bytes, reading);
            // A stall past several boundaries leaves their intervals inside this one.
            while self.next <= now {
                self.next += self.interval;
                self.index += 1;
            }
        }
    }

    fn close(&mut self, now: Instant, bytes: u64, reading: &mut impl Reading) {
        let end_s = now.duration_since(self.start).as_secs_f64();
        let cpu_s = crate::platform::cores::calling_thread_cpu_seconds();
        let cpu_wait_seconds = self.sched.as_mut().and_then(|(own, last)| {
            let now = own.times()?;
            let waited = now.waiting_ns.saturating_sub(last.waiting_ns);
            *last = now;
            Some(waited as f64 / 1e9)
        });
        let mut interval = Interval {
            index: self.index,
            start_s: self.last_s,
            end_s,
            bytes: bytes - self.last_bytes,
            tcp: None,
            cpu_seconds: Some(cpu_s - self.last_cpu_s),
            cpu_wait_seconds,
            cpu: crate::platform::cores::calling_thread_cpu(),
            datagrams: None,
        };
        reading.fill(&mut interval);
        self.intervals.push(interval);
        self.last_cpu_s = cpu_s;
        self.last_s = end_s;
        self.last_bytes = bytes;
    }

    /// Closes the last, partial interval, unless nothing happened in it.
    pub(super) fn finish(
        mut self,
        end: Instant,
        bytes: u64,
        reading: &mut impl Reading,
    ) -> Vec<Interval> {
        let end_s = end.duration_since(self.start).as_secs_f64();
        if bytes > self.last_bytes || end_s > self.last_s + 1e-3 {
            self.close(end.max(self.start), bytes, reading);
            if let Some(last) = self.intervals.last_mut() {
                last.end_s = end_s.max(last.start_s);
            }
        }
        self.intervals
    }
}

/// Runs one stream to its end and reports it.
pub fn run(mut job: StreamJob<'_>) -> StreamReport {
    let mut block = std::mem::take(&mut job.block);
    let cpu_before = crate::platform::cores::calling_thread_cpu_seconds();
    let mss_bytes = socket::mss_bytes(&job.socket);
    let mtu_bytes = socket::path_mtu_bytes(&job.socket);
    let Outcome {
        bytes,
        end,
        intervals,
        error,
        stalled,
        reset,
    } = match job.role {
        Role::Send => send(&job, &block),
        Role::Receive => receive(&job, &mut block),
    };
    StreamReport {
        stream: job.stream,
        role: job.role,
        bytes,
        seconds: end.duration_since(job.start).as_secs_f64(),
        intervals,
        reset,
        tcp: socket::tcp_stats(&job.socket),
        mss_bytes,
        mtu_bytes,
        cpu_seconds: crate::platform::cores::calling_thread_cpu_seconds() - cpu_before,
        error,
        congestion: options::congestion_of(&job.socket),
        stalled,
        datagrams: None,
    }
}

/// What a stream end did.
struct Outcome {
    /// Bytes moved.
    bytes: u64,
    /// The last byte's time.
    end: Instant,
    /// Its intervals.
    intervals: Vec<Interval>,
    /// Why it stopped early.
    error: Option<String>,
    /// Where a sender gave up on bytes that did not arrive.
    stalled: Option<Stall>,
    /// Whether its peer reset it during the test (a sender that gave up on it).
    reset: bool,
}

fn timed_out(e: &std::io::Error) -> bool {
    matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut)
}

impl Outcome {
    /// A stream end that moved nothing, for `error`.
    fn failed(start: Instant, error: String) -> Outcome {
        Outcome {
            bytes: 0,
            end: start,
            intervals: Vec::new(),
            error: Some(error),
            stalled: None,
            reset: false,
        }
    }
}

fn send(job: &StreamJob<'_>, buffer: &[u8]) -> Outcome {
    let mut ticker = Ticker::new(job.start, job.interval);
    let mut sent = 0u64;
    let mut error = None;
    let _ = job.socket.set_write_timeout(Some(POLL));
    let source = match Source::of(buffer, job.options.zerocopy) {
        Ok(source) => source,
        Err(e) => {
            let error = format!("stream {}: a file to send from: {e}", job.stream);
            return Outcome::failed(job.start, error);
        }
    };
    let mut now = Instant::now();
    let mut last_write = job.start;
    let mut watch = StallWatch::new(now);
    let mut stall = None;
    while let Some(want) = next_write(job, sent, source.len(), now) {
        let wait = pace_wait(
            job.options,
            sent,
            source.len(),
            now.duration_since(job.start),
        );
        if !wait.is_zero() {
            std::thread::sleep(wait.min(POLL));
            now = Instant::now();
            ticker.tick(now, sent, &mut &job.socket);
            continue;
        }
        match source.write(&job.socket, want) {
            Ok(n) => {
                sent += n as u64;
                if let Some(progress) = job.progress {
                    progress.add(n as u64);
                }
                now = Instant::now();
                last_write = now;
            }
            Err(e) if timed_out(&e) || e.kind() == ErrorKind::Interrupted => {
                now = Instant::now();
                if let Some(found) = watch.stalled(&job.socket, now) {
                    (error, stall) = stalled(job, found);
                    break;
                }
            }
            Err(e) => {
                error = Some(format!("stream {}: send: {e}", job.stream));
                break;
            }
        }
        ticker.tick(now, sent, &mut &job.socket);
    }
    // A stream that gave up on its bytes ran until it did.
    let end = if stall.is_some() { now } else { last_write };
    let intervals = ticker.finish(end, sent, &mut &job.socket);
    let (end, error, stall) = end_sending(job, &mut watch, end, error, stall);
    Outcome {
        bytes: sent,
        end,
        intervals,
        error,
        stalled: stall,
        reset: false,
    }
}

/// How many bytes of a source of `len` a sender that has sent `sent` writes next; none
/// once its time or bytes are done, the test stopped, or the receivers' count is met.
fn next_write(job: &StreamJob<'_>, sent: u64, len: usize, now: Instant) -> Option<usize> {
    let want = match job.until {
        Until::Deadline(deadline) if now >= deadline => return None,
        Until::Deadline(_) => len,
        Until::Bytes(total) if sent >= total => return None,
        Until::Bytes(total) => len.min((total - sent) as usize),
    };
    if job.stop.load(Ordering::Relaxed) || now >= job.hard_stop {
        return None;
    }
    if let Ending::Handover(handover) = job.ending
        && handover.is_enough()
    {
        return None;
    }
    Some(want)
}

/// Ends a sender's stream as its test agreed with the peer, from its last byte's time
/// `end`, `error` and `stall`; says the stream's end and why it stopped early.
fn end_sending(
    job: &StreamJob<'_>,
    watch: &mut StallWatch,
    end: Instant,
    error: Option<String>,
    stall: Option<Stall>,
) -> (Instant, Option<String>, Option<Stall>) {
    match job.ending {
        Ending::Drain if error.is_none() => {
            let (error, stall) = drain(job, watch);
            (end, error, stall)
        }
        Ending::Drain => (end, error, stall),
        Ending::Handover(handover) => {
            // A test of bytes is done once they are all taken, not once they are all
            // written: the other end counts no byte that comes after the test's end.
            let end = if matches!(job.until, Until::Bytes(_)) && error.is_none() {
                acknowledged(job).unwrap_or(end)
            } else {
                end
            };
            handover.stream_done();
            (end, error, stall)
        }
    }
}

/// Waits until the receiver's TCP has acknowledged every byte written, and says when;
/// none if the test stopped or its time ran out first.
fn acknowledged(job: &StreamJob<'_>) -> Option<Instant> {
    loop {
        if socket::unacknowledged_bytes(&job.socket) == Some(0) {
            return Some(Instant::now());
        }
        if job.stop.load(Ordering::Relaxed) || Instant::now() >= job.hard_stop {
            return None;
        }
        std::thread::sleep(ACK_POLL);
    }
}

/// Ends the sending half and waits for the receiver to close, so every byte sent was
/// taken and the final TCP_INFO counts every retransmission. Where nothing is
/// acknowledged for [`STALL`] while the retransmission timer fires, the bytes are
/// not arriving (segments of the path's MTU dropped on the way, a path gone): the
/// stream ends with a reset, which the receiver gets, and says so.
fn drain(job: &StreamJob<'_>, watch: &mut StallWatch) -> (Option<String>, Option<Stall>) {
    if let Err(e) = job.socket.shutdown(Shutdown::Write) {
        return (Some(format!("stream {}: shutdown: {e}", job.stream)), None);
    }
    let until = (Instant::now() + DRAIN).min(job.hard_stop.max(Instant::now() + POLL));
    let mut socket = &job.socket;
    let mut scrap = [0u8; 512];
    loop {
        let now = Instant::now();
        if job.stop.load(Ordering::Relaxed) || now >= until {
            return (None, None);
        }
        if let Some(found) = watch.stalled(&job.socket, now) {
            return stalled(job, found);
        }
        let _ = job.socket.set_read_timeout(Some(POLL));
        match socket.read(&mut scrap) {
            Ok(0) => return (None, None),
            Ok(_) => {}
            Err(e) if timed_out(&e) || e.kind() == ErrorKind::Interrupted => {}
            // The receiver closed first, or reset: everything it needed has arrived.
            Err(_) => return (None, None),
        }
    }
}

/// Whether a sender's bytes are still being acknowledged.
struct StallWatch {
    unacknowledged: Option<u64>,
    since: Instant,
}

impl StallWatch {
    fn new(now: Instant) -> StallWatch {
        StallWatch {
            unacknowledged: None,
            since: now,
        }
    }

    /// The bytes left, how long nothing was acknowledged and the timeouts in a row,
    /// once nothing was for [`STALL`] while the retransmission timer fired twice or
    /// more in a row (a receiver that stops reading closes its window instead, and
    /// the sender's zero-window probes are no timeouts).
    fn stalled(&mut self, socket: &TcpStream, now: Instant) -> Option<(u64, Duration, u8)> {
        let left = socket::unacknowledged_bytes(socket);
        if left != self.unacknowledged {
            (self.unacknowledged, self.since) = (left, now);
            return None;
        }
        let bytes = left.filter(|&b| b > 0)?;
        let waited = now.duration_since(self.since);
        let timeouts = socket::timeouts_in_a_row(socket).filter(|&t| t >= 2)?;
        (waited >= STALL).then_some((bytes, waited, timeouts))
    }
}

/// What a sender that gave up says: its bytes, and whether a new connection's
/// handshake with the same peer crosses, which tells an MTU black hole (small packets
/// arrive, full segments do not) from a path that carries nothing. The stream's close
/// then resets it, so the receiver learns of it at once.
fn stalled(
    job: &StreamJob<'_>,
    (bytes, waited, timeouts): (u64, Duration, u8),
) -> (Option<String>, Option<Stall>) {
    socket::reset_on_close(&job.socket);
    let handshake_crossed = job.socket.peer_addr().is_ok_and(|peer| {
        match TcpStream::connect_timeout(&peer, HANDSHAKE) {
            Ok(_) => true,
            // A reset answering the SYN crossed the path too (a client's port has no
            // listener).
            Err(e) => e.kind() == ErrorKind::ConnectionRefused,
        }
    });
    let stall = Stall {
        unacknowledged_bytes: bytes,
        seconds: waited.as_secs_f64(),
        timeouts,
        handshake_crossed,
    };
    let why = if handshake_crossed {
        "while a new connection's handshake crossed: small packets arrive and the \
         stream's full segments do not"
    } else {
        "and a new connection's handshake did not cross either"
    };
    let error = format!(
        "stream {}: {bytes} bytes sent went unacknowledged for {:.1} s, the \
         retransmission timer fired {timeouts} times in a row, {why}",
        job.stream, stall.seconds
    );
    (Some(error), Some(stall))
}

/// Receives one stream to its end: reads it, ticking its intervals, then discards what
/// comes after the receivers' count, and closes it.
fn receive(job: &StreamJob<'_>, buffer: &mut [u8]) -> Outcome {
    let mut ticker = Ticker::new(job.start, job.interval);
    let _ = job.socket.set_read_timeout(Some(POLL));
    // Woken at every segment that arrives, a receiver that keeps up wakes about every
    // 100 KB (10,000 times per GB on loopback), and the sender pays for each wake-up:
    // on loopback the data lands in the sender's softirq, which must wake this thread
    // on the other core. Woken once a whole block is queued, it reads a block per
    // wake-up (3,900 per GB with 128 KiB blocks), and a single loopback stream ran 8%
    // faster for 7% less CPU per GB. A slow stream still reads at every POLL, since a
    // read that times out returns what has come; the end of the stream wakes it too.
    if job.wake_per_block {
        let _ = socket::set_receive_low_water(&job.socket, buffer.len());
    }
    let got = read_to_end(job, buffer, &mut ticker);
    let intervals = ticker.finish(got.last_read, got.bytes, &mut &job.socket);
    if got.handed_over {
        discard(job, buffer);
    } else if let Ending::Handover(handover) = job.ending {
        // Stopped, failed or closed before its count was done: the test is over for it.
        handover.stream_done();
    }
    let _ = job.socket.shutdown(Shutdown::Both);
    Outcome {
        bytes: got.bytes,
        end: got.last_read,
        intervals,
        error: got.error,
        stalled: None,
        reset: got.reset,
    }
}

/// What a receiver read before it stopped reading.
struct Received {
    /// Bytes counted.
    bytes: u64,
    /// When its last counted read returned (or it saw the stream's end).
    last_read: Instant,
    /// Whether it stopped because the receivers' count was done.
    handed_over: bool,
    /// Whether the sender reset the stream.
    reset: bool,
    /// Why it stopped early, if it did.
    error: Option<String>,
}

/// Reads the stream until it ends, fails, is stopped, its count is done or the test's
/// time runs out, ticking `ticker` at each read.
fn read_to_end(job: &StreamJob<'_>, buffer: &mut [u8], ticker: &mut Ticker) -> Received {
    let mut socket = &job.socket;
    let mut got = Received {
        bytes: 0,
        last_read: job.start,
        handed_over: false,
        reset: false,
        error: None,
    };
    let mut now;
    while !job.stop.load(Ordering::Relaxed) {
        match read(&mut socket, buffer, job.options.skip_rx_copy) {
            Ok(0) => {
                got.last_read = Instant::now();
                break;
            }
            Ok(n) => {
                if let Some(enough) = read_after_the_end(job) {
                    // Bytes a read returns once the test is over came at a poll, after
                    // its end (a receiver waiting for a whole block): not counted.
                    got.handed_over = enough;
                    break;
                }
                got.bytes += n as u64;
                if let Some(progress) = job.progress {
                    progress.add(n as u64);
                }
                if let Ending::Handover(handover) = job.ending {
                    handover.count(n as u64);
                }
                now = Instant::now();
                got.last_read = now;
            }
            Err(e) if timed_out(&e) || e.kind() == ErrorKind::Interrupted => now = Instant::now(),
            Err(e) => {
                let why;
                (why, got.reset) = receive_failed(job, &e);
                got.error = Some(why);
                break;
            }
        }
        if done_counting(job, now) {
            got.handed_over = true;
            break;
        }
        if now >= job.hard_stop {
            got.error = Some(format!(
                "stream {}: the test's time limit passed before the stream ended",
                job.stream
            ));
            break;
        }
        ticker.tick(now, got.bytes, &mut &job.socket);
    }
    got
}

/// Whether the bytes a read returned came once the test was over for this receiver,
/// which leaves them uncounted: `Some(true)` where the receivers' count was enough (its
/// own end told to the handover), `Some(false)` where the test stopped.
fn read_after_the_end(job: &StreamJob<'_>) -> Option<bool> {
    let Ending::Handover(handover) = job.ending else {
        return None;
    };
    let stopped = job.stop.load(Ordering::Relaxed);
    if !stopped && !handover.is_enough() {
        return None;
    }
    if !stopped {
        handover.stream_done();
    }
    Some(!stopped)
}

/// Whether a receiver of an iperf3 test is done counting at `now` (its deadline passed
/// or the receivers' count is enough), told to the handover where it is.
fn done_counting(job: &StreamJob<'_>, now: Instant) -> bool {
    let Ending::Handover(handover) = job.ending else {
        return false;
    };
    let past = matches!(job.until, Until::Deadline(deadline) if now >= deadline);
    let done = past || handover.is_enough();
    if done {
        handover.stream_done();
    }
    done
}

/// Why a receiver's read failed, and whether its sender reset the stream.
fn receive_failed(job: &StreamJob<'_>, e: &std::io::Error) -> (String, bool) {
    if e.kind() == ErrorKind::ConnectionReset {
        let why = format!(
            "stream {}: the sender reset it during the test (a ratelab sender does so \
             when nothing it sends is acknowledged for a second): {e}",
            job.stream
        );
        (why, true)
    } else {
        (format!("stream {}: receive: {e}", job.stream), false)
    }
}

/// Reads and drops what still comes once the stream's count is done, until the test
/// stops it, the peer closes, or the hard stop passes.
fn discard(job: &StreamJob<'_>, buffer: &mut [u8]) {
    let mut socket = &job.socket;
    while !job.stop.load(Ordering::Relaxed) && Instant::now() < job.hard_stop {
        match socket.read(buffer) {
            Ok(0) => return,
            Ok(_) => {}
            Err(e) if timed_out(&e) || e.kind() == ErrorKind::Interrupted => {}
            // A peer that closes at the test's end may reset: nothing counted is lost.
            Err(_) => return,
        }
    }
}
