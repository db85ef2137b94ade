//! iperf3's TCP protocol, so a ratelab end tests a link whose other end runs iperf3
//! (`net HOST --iperf3` against `iperf3 -s`). The wire format and its decoders are pure
//! (`wire`); the client drives one test (`client`); the streams are ratelab's own
//! loops, ended as iperf3 ends a test: by the client, over the control connection.

mod client;
pub mod errors;
pub mod login;
pub(super) mod server;
pub mod wire;

pub use client::{Iperf3Control, our_results, remote_report};

use crate::platform::usage::{Who, cpu_seconds};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::item::{self, NetItem, Scope, Side};
use super::report::{Role, SideReport};
use super::session::{self, Crossed, GRACE};
use super::stream::{Ending, Handover};
use super::{NetPlan, protocol::Direction};
use crate::error::Error;
use crate::workload::Context;

/// What one test against an iperf3 server measured.
pub struct Outcome {
    /// This end's streams.
    pub local: SideReport,
    /// The server's, from its results; an error when they did not come.
    pub remote: Result<(SideReport, wire::Results), Error>,
}

/// Runs the test `control` set up: opens the streams, moves data from TEST_START until
/// every stream's count is done (or Ctrl-C), sends TEST_END, and exchanges results.
pub fn run(control: &Iperf3Control, plan: &NetPlan, ctx: &Context) -> Result<Outcome, Error> {
    let connections = control.connect_streams(plan)?;
    let start = control.started()?;
    let request = plan.request();
    let planned = request.duration_ms.unwrap_or(3_600_000);
    let hard_stop = start + Duration::from_millis(planned) + GRACE;
    let expected = connections.len();
    let receivers = connections.iter().any(|c| c.role == Role::Receive);
    let handover = Handover::new(plan.bytes.filter(|_| receivers));
    let stop = AtomicBool::new(false);
    let clock = CpuClock::start();
    let wire = Crossed::watch(&connections, wire::COOKIE_BYTES as u64, 0);
    let test = session::Run {
        request: &request,
        start,
        hard_stop,
        ending: Ending::Handover(&handover),
        options: &plan.options,
    };
    let (local, ended) = std::thread::scope(|scope| {
        let streams = scope.spawn(|| {
            session::run(connections, &test, Some(ctx.sink.progress()), &|| {
                stop.load(Ordering::Relaxed) || ctx.cancel.is_set()
            })
        });
        // Asleep until every stream's count is done (a test of bytes: taken by the
        // server's TCP), or the receivers have the test's bytes together (iperf3's
        // client counts them so): then TEST_END at once.
        while !handover.wait(expected, Duration::from_millis(50))
            && !ctx.cancel.is_set()
            && !streams.is_finished()
            && Instant::now() < hard_stop
        {}
        // What had arrived for the receivers as TEST_END goes is what they received;
        // they read on, uncounted, until the server has stopped sending.
        let received = wire.now();
        let ended = if ctx.cancel.is_set() {
            control.terminate();
            Ok(())
        } else {
            control.end().and_then(|()| control.exchange_asked())
        };
        // The server counts what it reads until it takes TEST_END: once it asks for the
        // results, what the senders have delivered is all it could have counted.
        let sent = wire.now();
        stop.store(true, Ordering::Relaxed);
        let mut local = streams.join().expect("the stream threads do not panic");
        if ended.is_ok() {
            Crossed::count(&mut local, &sent, &received);
        }
        (local, ended)
    });
    if ctx.cancel.is_set() {
        return Ok(Outcome {
            local,
            remote: Err(Error::Interrupted),
        });
    }
    let remote = ended.and_then(|()| {
        let theirs = control.exchange(&client::our_results(&local, clock.user_share()))?;
        let report = client::remote_report(&theirs, plan.direction, plan.streams, true, false)
            .map_err(|reason| Error::Peer {
                peer: plan.host_port(),
                reason,
            })?;
        Ok((report, theirs))
    });
    Ok(Outcome { local, remote })
}

/// The items of the far end: its streams' totals, its retransmissions as it counted
/// them (none where it received), its congestion control, and its CPU time.
pub fn remote_items(
    report: &SideReport,
    theirs: &wire::Results,
    direction: Direction,
    streams: u32,
) -> Vec<NetItem> {
    let mut items = item::items_of_report(report, Side::Remote, direction, streams);
    for stream_item in items.iter_mut().filter(|i| i.scope == Scope::Stream) {
        let id = stream_item.stream.map(wire::stream_id);
        let result = theirs.streams.iter().find(|s| Some(s.id) == id);
        stream_item.retransmits = result.and_then(|s| u64::try_from(s.retransmits).ok());
        stream_item.congestion = theirs
            .congestion_used
            .as_deref()
            .map(|c| crate::vocab::text::escaped(c).into_owned());
        // iperf3 gives its CPU time for the whole end, not per stream.
        stream_item.cpu_seconds = None;
    }
    items
}

/// This process's CPU time from a start, to split an end's CPU into user and system
/// as iperf3 reports it (from getrusage, as iperf3's cpu_util).
pub struct CpuClock {
    user_s: f64,
    system_s: f64,
}

impl CpuClock {
    /// Starts counting now.
    pub fn start() -> CpuClock {
        let (user_s, system_s) = cpu_seconds(Who::Own);
        CpuClock { user_s, system_s }
    }

    /// The user part of the CPU time spent since the start.
    pub fn user_share(&self) -> f64 {
        let (user_s, system_s) = cpu_seconds(Who::Own);
        let user = (user_s - self.user_s).max(0.0);
        let system = (system_s - self.system_s).max(0.0);
        if user + system > 0.0 {
            user / (user + system)
        } else {
            0.0
        }
    }
}
