//! The `uring` back end: up to one request in flight per slot through one io_uring,
//! each submitted as it is queued (fio's iodepth_batch_submit=1) and reaped in batches.

use std::time::{Duration, Instant};

use io_uring::{IoUring, opcode, squeue, types};

use super::{Op, Reaped, Request, Source, fault, transient};
use crate::control::Cancel;
use crate::error::Error;
use crate::storage::ring::one_thread_ring;

/// Completions in a row for one request that may fail for now before it is taken as
/// failed.
const TRANSIENT_TRIES: u32 = 1000;

/// Waits for completions that fail in a row before the requests in flight are
/// cancelled.
const FAILED_WAITS_BEFORE_CANCEL: u32 = 10;

/// A ring and what each of its slots has in flight.
pub struct UringBackend {
    ring: IoUring,
    slots: usize,
}

/// What a completion leaves of its slot's request.
enum Settled {
    /// Its rest, or the same request after a failure for now, is in flight again.
    Again,
    /// It is over: whole or dropped as the run stops (`None`), or failed.
    Over(Option<Error>),
}

/// A slot's request in flight: the request, the bytes it has moved, and the completions
/// in a row that failed for now.
#[derive(Clone, Copy)]
struct InFlight {
    request: Request,
    done: usize,
    transient_tries: u32,
}

impl UringBackend {
    /// A ring for `depth` requests; `what` names the test when the kernel refuses it.
    pub fn new(depth: usize, what: &str) -> Result<UringBackend, Error> {
        let depth = depth.max(1);
        let ring = one_thread_ring(depth.next_power_of_two() as u32).map_err(|e| {
            Error::Unsupported(format!(
                "cannot set up io_uring with {depth} entries for {what}: {e}"
            ))
        })?;
        Ok(UringBackend { ring, slots: depth })
    }

    /// Requests it keeps in flight.
    pub fn slots(&self) -> usize {
        self.slots
    }

    /// Keeps every slot busy with `source`'s requests until it has no more; on a failure
    /// or a cancel it stops asking and reaps every request in flight before it returns,
    /// because the kernel may still be using their buffers.
    pub fn run(&mut self, source: &mut dyn Source, cancel: &Cancel) -> Result<(), Error> {
        let mut slots: Vec<Option<InFlight>> = vec![None; self.slots];
        let mut in_flight = 0;
        let mut failure: Option<Error> = None;
        let started = Instant::now();
        for slot in 0..self.slots {
            if let Some(request) = source.next(slot, started) {
                self.start(&mut slots, slot, request);
                in_flight += 1;
            }
        }
        let mut failed_waits = 0;
        let mut completed = Vec::with_capacity(self.slots);
        while in_flight > 0 {
            match self.ring.submit_and_wait(1) {
                Ok(_) => failed_waits = 0,
                // Interrupted, or the completion queue is full: reap, then wait again.
                Err(e) if e.raw_os_error().is_some_and(transient) => {}
                Err(e) => {
                    failed_waits += 1;
                    failure.get_or_insert(Error::io("wait for io_uring on", source.path(), e));
                    self.after_failed_wait(failed_waits, in_flight);
                }
            }
            let reaped = Instant::now();
            completed.clear();
            completed.extend(
                self.ring
                    .completion()
                    .map(|cqe| (cqe.user_data(), cqe.result())),
            );
            let stopping = failure.is_some() || cancel.is_set();
            for &(user_data, result) in &completed {
                let Some((slot, flight)) = usize::try_from(user_data)
                    .ok()
                    .and_then(|slot| Some((slot, slots.get_mut(slot)?.as_mut()?)))
                else {
                    // A cancel request's own completion.
                    continue;
                };
                let Settled::Over(error) =
                    self.settle(slot, flight, result, stopping, source, reaped)
                else {
                    continue;
                };
                if let Some(error) = error {
                    failure.get_or_insert(error);
                }
                slots[slot] = None;
                in_flight -= 1;
                if failure.is_none()
                    && !cancel.is_set()
                    && let Some(next) = source.next(slot, reaped)
                {
                    self.start(&mut slots, slot, next);
                    in_flight += 1;
                }
            }
        }
        match failure {
            Some(e) => Err(e),
            None if cancel.is_set() => Err(Error::Interrupted),
            None => Ok(()),
        }
    }

    /// Puts `request` in flight in slot `slot`.
    fn start(&mut self, slots: &mut [Option<InFlight>], slot: usize, request: Request) {
        self.push(slot, &request);
        slots[slot] = Some(InFlight {
            request,
            done: 0,
            transient_tries: 0,
        });
    }

    /// What slot `slot`'s completion `result` leaves of `flight`: its rest asked for (or
    /// the same request asked again, after a failure for now) while the run goes on, or
    /// the request over: whole (told to `source`), or failed with its error in words.
    fn settle(
        &mut self,
        slot: usize,
        flight: &mut InFlight,
        result: i32,
        stopping: bool,
        source: &mut dyn Source,
        reaped: Instant,
    ) -> Settled {
        let request = flight.request;
        match Reaped::of(&request, flight.done, i64::from(result)) {
            Reaped::Partial(moved) if !stopping => {
                flight.done = moved;
                flight.transient_tries = 0;
                self.push(slot, &request.rest(moved));
                Settled::Again
            }
            Reaped::Failed(errno)
                if transient(errno) && !stopping && flight.transient_tries < TRANSIENT_TRIES =>
            {
                flight.transient_tries += 1;
                self.push(slot, &request.rest(flight.done));
                Settled::Again
            }
            Reaped::Whole(moved) => {
                source.done(slot, &request, moved, reaped);
                Settled::Over(None)
            }
            // The run stops: the rest is not asked for, and what moved is not counted; a
            // request that failed only for now (or was cancelled) is no fault of its own.
            Reaped::Partial(_) => Settled::Over(None),
            Reaped::Failed(errno) if stopping && (transient(errno) || errno == libc::ECANCELED) => {
                Settled::Over(None)
            }
            Reaped::Short(at) => Settled::Over(Some(fault::short(
                request.op,
                source.path(),
                request.offset + at as u64,
            ))),
            Reaped::Failed(errno) => {
                let at = request.offset + flight.done as u64;
                Settled::Over(Some(fault::failed(request.op, source.path(), at, errno)))
            }
        }
    }

    /// After waits that failed `failed` times in a row with `in_flight` requests out:
    /// cancel them all once, then keep waiting, a little apart. A ring that never answers
    /// again would leave the kernel free to write to buffers about to be freed; rather
    /// than that the process ends, saying why (no kernel here has been seen to do it).
    fn after_failed_wait(&mut self, failed: u32, in_flight: usize) {
        if failed == FAILED_WAITS_BEFORE_CANCEL {
            let cancel = opcode::AsyncCancel2::new(types::CancelBuilder::any())
                .build()
                .user_data(u64::MAX);
            // SAFETY: a cancel request points to no buffer.
            let _ = unsafe { self.ring.submission().push(&cancel) };
        }
        if failed > 1000 {
            eprintln!(
                "ratelab: io_uring stopped answering with {in_flight} requests in flight; \
                 their buffers cannot be freed safely, so ratelab stops here"
            );
            std::process::abort();
        }
        std::thread::sleep(Duration::from_millis(10));
    }

    /// Queues `request` for slot `slot` and submits it at once: held back until a batch
    /// of completions is handled, requests leave the device's queue short (76k IOPS
    /// against 90k at depth 32 on this VM's disk). A submission that fails leaves the
    /// request queued: the next wait submits it and says what went wrong.
    fn push(&mut self, slot: usize, request: &Request) {
        let fd = types::Fd(request.fd);
        let entry: squeue::Entry = match request.op {
            Op::Read => opcode::Read::new(fd, request.buf, request.len as u32)
                .offset(request.offset)
                .build(),
            Op::Write => opcode::Write::new(fd, request.buf, request.len as u32)
                .offset(request.offset)
                .build(),
        };
        // SAFETY: the source keeps the buffer valid and the descriptor open until the
        // request's completion is reaped in `run`, which never returns with requests in
        // flight. The queue has room: one entry per slot, and one cancel, at most.
        unsafe {
            self.ring
                .submission()
                .push(&entry.user_data(slot as u64))
                .expect("the submission queue has room for every slot");
        }
        let _ = self.ring.submit();
    }
}
