//! The one request engine every storage kind moves its bytes with, on fio's model: a
//! kind's [`Source`] hands out requests for free slots and hears of each completion;
//! the [`Engine`] queues them, commits them and reaps what completes, with pread and
//! pwrite one at a time (`sync`) or with io_uring, many in flight (`uring`).
//!
//! What every kind needs done the same way is done here, once: an interrupted call
//! (EINTR) is asked again; a full queue (EAGAIN, EBUSY) is reaped, then asked again; a
//! partial completion has its rest asked for in the same slot; a failed request stops
//! new ones, every request in flight is reaped, and the failure is named with its
//! errno in words, the file, the offset and the device ([`fault`]). A kind keeps what
//! is its own: which offsets, which mix of reads and writes, and the tally.

pub mod fault;
mod sync;
mod uring;

use std::fs::File;
use std::os::fd::{AsRawFd, RawFd};
use std::path::Path;
use std::time::Instant;

use crate::control::Cancel;
use crate::error::Error;

/// What a request does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// Read into the request's buffer.
    Read,
    /// Write the request's buffer.
    Write,
}

impl Op {
    /// The verb messages use.
    pub fn verb(self) -> &'static str {
        match self {
            Op::Read => "read",
            Op::Write => "write",
        }
    }
}

/// One request: `len` bytes at `offset` of a file, from or into `buf`.
#[derive(Debug, Clone, Copy)]
pub struct Request {
    /// Read or write.
    pub op: Op,
    /// The file's descriptor; it stays open until the request's completion is heard.
    pub fd: RawFd,
    /// Byte offset in the file.
    pub offset: u64,
    /// The bytes: `len` of them stay valid, and untouched by the kind, until the
    /// request's completion is heard.
    pub buf: *mut u8,
    /// Bytes asked for.
    pub len: usize,
    /// Bytes the request must move to be whole: a direct read of a file's last block
    /// asks for a whole aligned block and the file ends within it.
    pub expect: usize,
    /// Whether a short transfer is the file's end rather than a part to ask again for
    /// (a direct read: its rest would be unaligned).
    pub short_ends: bool,
}

// SAFETY: a request's buffer is owned by its source, which keeps it for the request.
unsafe impl Send for Request {}

impl Request {
    /// A request of `op` for the whole of `buf` at `offset` of `file`.
    pub fn whole(op: Op, file: &File, offset: u64, buf: *mut u8, len: usize) -> Request {
        Request {
            op,
            fd: file.as_raw_fd(),
            offset,
            buf,
            len,
            expect: len,
            short_ends: false,
        }
    }

    /// The same request with its first `done` bytes moved: the rest to ask for.
    fn rest(&self, done: usize) -> Request {
        Request {
            offset: self.offset + done as u64,
            // SAFETY: done < len, so the pointer stays inside the request's buffer.
            buf: unsafe { self.buf.add(done) },
            len: self.len - done,
            expect: self.expect.saturating_sub(done),
            ..*self
        }
    }
}

/// What a kind gives the engine: requests for free slots, and what to do as each one
/// completes.
pub trait Source {
    /// The file requests go to, for messages.
    fn path(&self) -> &Path;

    /// The next request for slot `slot`, free since `since` (when the engine reaped its
    /// last completion, or started); `None` when the source has no more.
    fn next(&mut self, slot: usize, since: Instant) -> Option<Request>;

    /// Slot `slot`'s request moved `moved` bytes, whole, and was reaped at `reaped`.
    fn done(&mut self, slot: usize, request: &Request, moved: usize, reaped: Instant);
}

/// The way requests reach the kernel.
enum Backend {
    Sync,
    Uring(Box<uring::UringBackend>),
}

/// Moves a source's requests: one at a time with pread and pwrite, or `depth` in flight
/// through io_uring.
pub struct Engine {
    backend: Backend,
}

impl Engine {
    /// pread and pwrite, one request at a time.
    pub fn sync() -> Engine {
        Engine {
            backend: Backend::Sync,
        }
    }

    /// io_uring with up to `depth` requests in flight; `what` names the test in the error
    /// when the kernel refuses a ring.
    pub fn uring(depth: usize, what: &str) -> Result<Engine, Error> {
        Ok(Engine {
            backend: Backend::Uring(Box::new(uring::UringBackend::new(depth, what)?)),
        })
    }

    /// io_uring where `depth` is above 1, else pread and pwrite, as fio's psync and
    /// io_uring engines.
    pub fn for_depth(depth: usize, what: &str) -> Result<Engine, Error> {
        if depth > 1 {
            Engine::uring(depth, what)
        } else {
            Ok(Engine::sync())
        }
    }

    /// Slots the engine keeps in flight.
    pub fn depth(&self) -> usize {
        match &self.backend {
            Backend::Sync => 1,
            Backend::Uring(ring) => ring.slots(),
        }
    }

    /// Runs `source`'s requests until it has no more, a request fails, or `cancel` is
    /// set; returns only when no request is in flight.
    pub fn run(&mut self, source: &mut dyn Source, cancel: &Cancel) -> Result<(), Error> {
        match &mut self.backend {
            Backend::Sync => sync::run(source, cancel),
            Backend::Uring(ring) => ring.run(source, cancel),
        }
    }
}

/// Makes one request now, with pread or pwrite, for a kind whose reads and writes are
/// steps of a stream (a task's reader and writer threads): the same retries, rests and
/// named failures as every request. Returns the bytes it moved.
pub fn once(path: &Path, request: &Request) -> Result<usize, Error> {
    sync::complete(path, request)
}

/// What a completion means for its request.
#[derive(Debug, PartialEq, Eq)]
enum Reaped {
    /// The request moved all it had to.
    Whole(usize),
    /// Part of it moved: this many bytes in all, the rest still to ask for.
    Partial(usize),
    /// It ended this many bytes in, short of what it had to move.
    Short(usize),
    /// The call failed with this errno.
    Failed(i32),
}

impl Reaped {
    /// What a call's `result` (bytes, or a negative errno) means for `request`, `done`
    /// bytes of which had moved before it.
    fn of(request: &Request, done: usize, result: i64) -> Reaped {
        if result < 0 {
            return Reaped::Failed((-result) as i32);
        }
        let done = done + result as usize;
        if done >= request.expect {
            Reaped::Whole(done.min(request.len))
        } else if result == 0 || request.short_ends {
            Reaped::Short(done)
        } else {
            Reaped::Partial(done)
        }
    }
}

/// Whether a call failed only for now: asked again, it can succeed.
fn transient(errno: i32) -> bool {
    matches!(errno, libc::EINTR | libc::EAGAIN | libc::EBUSY)
}

#[cfg(test)]
mod tests;
