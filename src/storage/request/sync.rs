//! The `sync` back end: each request is one pread or pwrite (more where a call moves
//! part of it), made when it is queued and reaped when the call returns, as fio's psync.

use std::os::fd::BorrowedFd;
use std::path::Path;
use std::time::Instant;

use super::{Op, Reaped, Request, Source, fault, transient};
use crate::control::Cancel;
use crate::error::Error;

/// Calls in a row that may fail for now (EINTR, EAGAIN, EBUSY) before a request is
/// taken as failed.
const TRANSIENT_TRIES: u32 = 1000;

/// Runs `source`'s requests for its one slot until it has no more.
pub fn run(source: &mut dyn Source, cancel: &Cancel) -> Result<(), Error> {
    let mut since = Instant::now();
    loop {
        if cancel.is_set() {
            return Err(Error::Interrupted);
        }
        let Some(request) = source.next(0, since) else {
            return Ok(());
        };
        let moved = complete(source.path(), &request)?;
        since = Instant::now();
        source.done(0, &request, moved, since);
    }
}

/// Makes `request`'s calls, to the file at `path`, until it is whole; returns the bytes
/// it moved.
pub fn complete(path: &Path, request: &Request) -> Result<usize, Error> {
    complete_with(path, request, call)
}

/// [`complete`] with `call` making each call: a test's stand-in for the kernel.
fn complete_with(
    path: &Path,
    request: &Request,
    mut call: impl FnMut(&Request) -> i64,
) -> Result<usize, Error> {
    let mut done = 0;
    let mut transient_tries = 0;
    loop {
        let rest = request.rest(done);
        match Reaped::of(request, done, call(&rest)) {
            Reaped::Whole(moved) => return Ok(moved),
            Reaped::Partial(moved) => {
                done = moved;
                transient_tries = 0;
            }
            Reaped::Short(at) => {
                return Err(fault::short(request.op, path, request.offset + at as u64));
            }
            Reaped::Failed(errno) if transient(errno) && transient_tries < TRANSIENT_TRIES => {
                transient_tries += 1;
                if errno != libc::EINTR {
                    std::thread::sleep(std::time::Duration::from_micros(100));
                }
            }
            Reaped::Failed(errno) => {
                return Err(fault::failed(request.op, path, rest.offset, errno));
            }
        }
    }
}

/// One pread or pwrite of `request`: the bytes moved, or a negative errno.
fn call(request: &Request) -> i64 {
    // SAFETY: the source keeps the descriptor open and the buffer valid for `len` bytes
    // until the request is done, which is before `run` asks it for another.
    let (fd, bytes) = unsafe {
        (
            BorrowedFd::borrow_raw(request.fd),
            std::slice::from_raw_parts_mut(request.buf, request.len),
        )
    };
    let result = match request.op {
        Op::Read => rustix::io::pread(fd, bytes, request.offset),
        Op::Write => rustix::io::pwrite(fd, bytes, request.offset),
    };
    match result {
        Ok(n) => n as i64,
        Err(e) => -i64::from(e.raw_os_error()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request() -> Request {
        Request {
            op: Op::Write,
            fd: -1,
            offset: 1 << 20,
            buf: std::ptr::null_mut(),
            len: 8192,
            expect: 8192,
            short_ends: false,
        }
    }

    /// What `results` make of a request, and the offsets each call asked for.
    fn replay(results: &[i64]) -> (Result<usize, String>, Vec<(u64, usize)>) {
        let mut calls = Vec::new();
        let mut results = results.iter();
        let outcome = complete_with(Path::new("/t/f"), &request(), |r| {
            calls.push((r.offset, r.len));
            *results.next().expect("no more calls than results")
        });
        let words = outcome.map_err(|e| format!("{:#}", anyhow::Error::from(e)));
        (words, calls)
    }

    #[test]
    fn an_interrupted_or_busy_call_is_asked_again() {
        let eintr = -i64::from(libc::EINTR);
        let eagain = -i64::from(libc::EAGAIN);
        let (outcome, calls) = replay(&[eintr, eagain, eintr, 8192]);
        assert_eq!(outcome, Ok(8192));
        assert_eq!(calls, vec![(1 << 20, 8192); 4]);
    }

    #[test]
    fn a_partial_call_has_its_rest_asked_for() {
        let (outcome, calls) = replay(&[4096, 4096]);
        assert_eq!(outcome, Ok(8192));
        assert_eq!(calls, vec![(1 << 20, 8192), ((1 << 20) + 4096, 4096)]);
    }

    #[test]
    fn a_full_filesystem_midway_is_named_at_its_byte_not_as_a_short_write() {
        let (outcome, _) = replay(&[4096, -i64::from(libc::ENOSPC)]);
        let words = outcome.unwrap_err();
        assert!(
            words.contains("cannot write /t/f")
                && words.contains("at byte 1052672")
                && words.contains("the filesystem is full (ENOSPC)")
                && !words.contains("short"),
            "{words}"
        );
    }

    #[test]
    fn a_call_that_stays_busy_fails_in_the_end() {
        let busy = vec![-i64::from(libc::EINTR); TRANSIENT_TRIES as usize + 1];
        let (outcome, calls) = replay(&busy);
        assert!(outcome.unwrap_err().contains("Interrupted system call"));
        assert_eq!(calls.len(), TRANSIENT_TRIES as usize + 1);
    }
}
