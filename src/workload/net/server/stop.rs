//! A server told to stop while tests run: a test's long wait (for the client's go) looks
//! at the stop between ticks, its streams stop at once, and its client hears why, when
//! the client's build knows the message, before the server exits.

use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::State;
use super::closed::Closed;
use crate::workload::net::protocol::{self, Message, WireError};

/// What a client is told when the server stops mid-test. Only `net serve` stops with
/// tests running, on SIGINT or SIGTERM: the loopback server stops after its client.
const STOP_REASON: &str = "it was interrupted (SIGINT or SIGTERM)";
/// How often a wait for the client's go looks whether the server is stopping.
const STOP_POLL: Duration = Duration::from_millis(100);
/// Longest wait, once told to stop, for running tests to end and tell their clients:
/// streams notice within a tenth of a second, so this is only a bound.
const STOP_WAIT: Duration = Duration::from_secs(2);

/// Tells running tests to stop and waits until they have told their clients.
pub(super) fn wind_down(state: &State) {
    state.stopping.store(true, Ordering::SeqCst);
    let started = Instant::now();
    while state.running.load(Ordering::SeqCst) > 0 && started.elapsed() < STOP_WAIT {
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Tells the client of a test the server stopped, when its build knows the message, and
/// logs it. Called while the test's slot is held: a stopping server exits once none is,
/// so the message and the log line are out before it does.
pub(super) fn tell(state: &State, connection: &TcpStream, peer: SocketAddr, hears_stopping: bool) {
    let told = if hears_stopping {
        let stopping = Message::Stopping {
            reason: STOP_REASON.into(),
        };
        match protocol::send(connection, &stopping, state.config.idle_timeout) {
            Ok(()) => "the client was told".to_string(),
            Err(e) => format!("telling the client failed: {e}"),
        }
    } else {
        // A client of an older build sees the connection close, as it did before the
        // message existed.
        "the client's build does not know the message: it sees the connection close".into()
    };
    state
        .journal
        .say(&format!("{peer}: closed: {} ({told})", Closed::Stopping));
}

/// Waits up to `timeout` for bytes (or the end) on `connection`, looking every
/// [`STOP_POLL`] whether the server is stopping; returns the time left.
pub(super) fn readable(
    connection: &TcpStream,
    timeout: Duration,
    stopping: &dyn Fn() -> bool,
) -> Result<Duration, Closed> {
    let deadline = Instant::now() + timeout;
    loop {
        if stopping() {
            return Err(Closed::Stopping);
        }
        let left = deadline.saturating_duration_since(Instant::now());
        let tick = left.min(STOP_POLL);
        let tick = rustix::time::Timespec {
            tv_sec: tick.as_secs() as i64,
            tv_nsec: i64::from(tick.subsec_nanos()),
        };
        let mut fds = [rustix::event::PollFd::new(
            connection,
            rustix::event::PollFlags::IN,
        )];
        match rustix::event::poll(&mut fds, Some(&tick)) {
            Ok(0) | Err(rustix::io::Errno::INTR) => {}
            // Readable, closed or failed: the receive that follows says which, given a
            // moment for a frame that has begun to arrive whole.
            Ok(_) => return Ok(left.max(STOP_POLL)),
            Err(e) => return Err(WireError::Io(e.into()).into()),
        }
        if left.is_zero() {
            return Err(WireError::Timeout(timeout).into());
        }
    }
}
