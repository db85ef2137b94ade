//! The engine interface: one timed write or read of a whole file. An engine is one
//! file in this folder and one line in [`make`]; the kinds that use engines never change.

mod data_ahead;
mod null;
mod sync;
mod uring;

use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::Path;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::control::{Cancel, Progress};
use crate::error::Error;
use crate::storage::request::{Op, Request, Source};

/// Alignment of O_DIRECT offsets, lengths and buffers: the largest logical block
/// size in common use, so one value serves every device.
pub const DIRECT_ALIGN: usize = 4096;

/// How a written file is made durable before its timing stops.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum SyncMode {
    /// fsync(2): data and metadata.
    Fsync,
    /// fdatasync(2): data, and metadata only where needed to read it back.
    Fdatasync,
    /// No sync: the time ends when the last write returns.
    None,
}

impl SyncMode {
    /// The name stored and printed.
    pub fn as_str(self) -> &'static str {
        match self {
            SyncMode::Fsync => "fsync",
            SyncMode::Fdatasync => "fdatasync",
            SyncMode::None => "none",
        }
    }
}

/// Which I/O engine moves the data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum EngineKind {
    /// pread/pwrite, one call at a time.
    Sync,
    /// io_uring with --queue-depth requests in flight.
    Uring,
    /// No I/O at all: tests ratelab itself, as fio's null engine does (every transfer
    /// is reported at a made-up 1 GB/s).
    Null,
}

impl EngineKind {
    /// The name stored and printed.
    pub fn as_str(self) -> &'static str {
        match self {
            EngineKind::Sync => "sync",
            EngineKind::Uring => "uring",
            EngineKind::Null => "null",
        }
    }
}

/// One file to write, opened by the caller; the engine times writes and sync.
pub struct WriteJob<'a> {
    /// The file, opened for writing (with O_DIRECT when `direct`).
    pub file: &'a File,
    /// Whether `file` was opened with O_DIRECT.
    pub direct: bool,
    /// A second, buffered handle for the tail that O_DIRECT alignment does not cover.
    pub tail_file: Option<&'a File>,
    /// Its path, for error messages.
    pub path: &'a Path,
    /// Bytes to write.
    pub size: u64,
    /// How to sync after the last write.
    pub sync: SyncMode,
    /// Byte counters.
    pub progress: &'a Progress,
    /// Stop flag, checked between calls.
    pub cancel: &'a Cancel,
    /// In sustained runs, when to stop issuing calls (the file is then partly written).
    pub until: Option<Instant>,
}

/// One file to read, opened by the caller; the engine times the reads.
pub struct ReadJob<'a> {
    /// The file, opened for reading (with O_DIRECT when `direct`).
    pub file: &'a File,
    /// Its path, for error messages.
    pub path: &'a Path,
    /// Bytes expected.
    pub size: u64,
    /// Whether `file` was opened with O_DIRECT.
    pub direct: bool,
    /// Byte counters.
    pub progress: &'a Progress,
    /// Stop flag, checked between calls.
    pub cancel: &'a Cancel,
    /// In sustained runs, when to stop issuing calls.
    pub until: Option<Instant>,
}

impl WriteJob<'_> {
    /// The write calls for this file in blocks of `block` bytes, up to the deadline.
    pub fn chunks(&self, block: usize) -> impl Iterator<Item = Chunk> + use<> {
        until(write_chunks(self.size, block, self.direct), self.until)
    }
}

impl ReadJob<'_> {
    /// The read calls for this file in blocks of `block` bytes, up to the deadline.
    pub fn chunks(&self, block: usize) -> impl Iterator<Item = Chunk> + use<> {
        until(read_chunks(self.size, block, self.direct), self.until)
    }
}

/// What one timed write or read moved, and how long it took.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transfer {
    /// First call to the return of the sync (writes) or of the last read.
    pub elapsed: Duration,
    /// Bytes moved: the file's size, or less when a deadline cut it short.
    pub bytes: u64,
    /// Of `elapsed`, the time a writer waited for its unique data to be made.
    pub data_wait: Duration,
}

/// Moves a file's bytes and says how long it took.
pub trait Engine: Send {
    /// Writes the file (up to the job's deadline) and syncs it.
    fn write(&mut self, job: &WriteJob) -> Result<Transfer, Error>;

    /// Reads the file (up to the job's deadline).
    fn read(&mut self, job: &ReadJob) -> Result<Transfer, Error>;
}

/// The chunks issued before `until`, if there is a deadline.
pub fn until(
    chunks: impl Iterator<Item = Chunk>,
    until: Option<Instant>,
) -> impl Iterator<Item = Chunk> {
    chunks.take_while(move |_| until.is_none_or(|end| Instant::now() < end))
}

/// The engine a plan asks for, with its write data made (outside any timing).
pub fn make(
    kind: EngineKind,
    block_size: usize,
    queue_depth: u32,
    seed: u64,
) -> Result<Box<dyn Engine>, Error> {
    Ok(match kind {
        EngineKind::Sync => {
            Box::new(sync::SyncEngine::new(block_size, seed).map_err(buffers_error)?)
        }
        EngineKind::Uring => Box::new(uring::UringEngine::new(block_size, queue_depth, seed)?),
        EngineKind::Null => Box::new(null::NullEngine),
    })
}

/// A `sync` engine moving `block_size` bytes per call, for workloads that only read.
pub fn sync_engine(block_size: usize) -> Result<Box<dyn Engine>, Error> {
    Ok(Box::new(
        sync::SyncEngine::reader(block_size).map_err(buffers_error)?,
    ))
}

/// The error for I/O buffers the system would not give.
pub fn buffers_error(e: std::io::Error) -> Error {
    Error::Unsupported(format!(
        "cannot allocate the I/O buffers (--block-size times --queue-depth, and a pool per slot): {e}"
    ))
}

/// One I/O call of a file: `len` bytes at `offset`, on the tail handle or not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Chunk {
    /// Byte offset in the file.
    pub offset: u64,
    /// Bytes to ask for (a read's request may reach past the end of the file).
    pub len: usize,
    /// Bytes this call must move.
    pub expect: usize,
    /// Whether it goes through the buffered tail handle.
    pub tail: bool,
}

/// The write calls for a file: blocks of `block` bytes; with O_DIRECT the part past
/// the last aligned boundary goes through the buffered handle, so sizes stay exact.
/// Made lazily: a large file in small blocks would otherwise need gigabytes of list.
pub fn write_chunks(size: u64, block: usize, direct: bool) -> impl Iterator<Item = Chunk> {
    let aligned_end = if direct {
        size - size % DIRECT_ALIGN as u64
    } else {
        size
    };
    blocks(0, aligned_end, block, false).chain(blocks(aligned_end, size, block, true))
}

/// How many write calls [`write_chunks`] makes, without walking them.
pub fn write_calls(size: u64, block: usize, direct: bool) -> u64 {
    let aligned_end = if direct {
        size - size % DIRECT_ALIGN as u64
    } else {
        size
    };
    aligned_end.div_ceil(block as u64) + (size - aligned_end).div_ceil(block as u64)
}

/// The read calls for a file. With O_DIRECT the last request is rounded up to the
/// alignment and returns short at the end of the file, which reads the tail exactly.
pub fn read_chunks(size: u64, block: usize, direct: bool) -> impl Iterator<Item = Chunk> {
    blocks(0, size, block, false).map(move |mut chunk| {
        if direct && chunk.offset + chunk.len as u64 == size {
            chunk.len = chunk.len.next_multiple_of(DIRECT_ALIGN);
        }
        chunk
    })
}

/// Blocks of at most `block` bytes covering `start..end`.
fn blocks(start: u64, end: u64, block: usize, tail: bool) -> impl Iterator<Item = Chunk> {
    (start..end).step_by(block).map(move |offset| {
        let len = (end - offset).min(block as u64) as usize;
        Chunk {
            offset,
            len,
            expect: len,
            tail,
        }
    })
}

pub use crate::storage::short_file;

/// A file's chunks as requests of the storage core's request engine: each chunk's bytes
/// come from `buffer` (given its slot and length), and what completes is counted.
pub struct FileChunks<'a, B> {
    chunks: Box<dyn Iterator<Item = Chunk>>,
    op: Op,
    file: &'a File,
    tail_file: Option<&'a File>,
    direct: bool,
    path: &'a Path,
    buffer: B,
    progress: &'a Progress,
    /// Bytes moved so far.
    pub moved: u64,
}

impl<'a, B: FnMut(usize, usize) -> *mut u8> FileChunks<'a, B> {
    /// The write calls of `job` in blocks of `block`, their data from `buffer`.
    pub fn writes(job: &'a WriteJob<'a>, block: usize, buffer: B) -> Self {
        FileChunks {
            chunks: Box::new(job.chunks(block)),
            op: Op::Write,
            file: job.file,
            tail_file: job.tail_file,
            direct: job.direct,
            path: job.path,
            buffer,
            progress: job.progress,
            moved: 0,
        }
    }

    /// The read calls of `job` in blocks of `block`, into `buffer`.
    pub fn reads(job: &'a ReadJob<'a>, block: usize, buffer: B) -> Self {
        FileChunks {
            chunks: Box::new(job.chunks(block)),
            op: Op::Read,
            file: job.file,
            tail_file: None,
            direct: job.direct,
            path: job.path,
            buffer,
            progress: job.progress,
            moved: 0,
        }
    }
}

impl<B: FnMut(usize, usize) -> *mut u8> Source for FileChunks<'_, B> {
    fn path(&self) -> &Path {
        self.path
    }

    fn next(&mut self, slot: usize, _since: Instant) -> Option<Request> {
        let chunk = self.chunks.next()?;
        let file = match (chunk.tail, self.tail_file) {
            (true, Some(tail)) => tail,
            _ => self.file,
        };
        Some(Request {
            op: self.op,
            fd: file.as_raw_fd(),
            offset: chunk.offset,
            buf: (self.buffer)(slot, chunk.len),
            len: chunk.len,
            expect: chunk.expect,
            // A direct read's rest would be unaligned: short, it is the file's end.
            short_ends: self.op == Op::Read && self.direct,
        })
    }

    fn done(&mut self, _slot: usize, request: &Request, _moved: usize, _reaped: Instant) {
        self.progress.add(request.expect as u64);
        self.moved += request.expect as u64;
    }
}

/// Syncs a written file as the job asks; part of the timed span.
pub fn sync_file(job: &WriteJob) -> Result<(), Error> {
    let result = match job.sync {
        SyncMode::Fsync => rustix::fs::fsync(job.file),
        SyncMode::Fdatasync => rustix::fs::fdatasync(job.file),
        SyncMode::None => Ok(()),
    };
    result.map_err(|e| Error::io("sync", job.path, e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn direct_write_tail_goes_buffered() {
        let chunks: Vec<Chunk> = write_chunks(10 * 1024, 8192, true).collect();
        assert_eq!(
            chunks,
            vec![
                Chunk {
                    offset: 0,
                    len: 8192,
                    expect: 8192,
                    tail: false
                },
                Chunk {
                    offset: 8192,
                    len: 2048,
                    expect: 2048,
                    tail: true
                },
            ]
        );
    }

    #[test]
    fn direct_read_rounds_the_last_request_up() {
        let chunks: Vec<Chunk> = read_chunks(10 * 1024, 8192, true).collect();
        assert_eq!(
            chunks[1],
            Chunk {
                offset: 8192,
                len: 4096,
                expect: 2048,
                tail: false
            }
        );
    }

    proptest! {
        #[test]
        fn chunks_cover_the_file_exactly(size in 1u64..50_000_000, block_pages in 1usize..512, direct: bool) {
            let block = block_pages * DIRECT_ALIGN;
            let writes: Vec<Chunk> = write_chunks(size, block, direct).collect();
            prop_assert_eq!(writes.len() as u64, write_calls(size, block, direct));
            let reads: Vec<Chunk> = read_chunks(size, block, direct).collect();
            for chunks in [writes, reads] {
                let mut next = 0;
                for chunk in &chunks {
                    prop_assert_eq!(chunk.offset, next);
                    prop_assert!(chunk.expect <= chunk.len && chunk.len <= block);
                    if direct && !chunk.tail {
                        prop_assert_eq!(chunk.offset % DIRECT_ALIGN as u64, 0);
                        prop_assert_eq!(chunk.len % DIRECT_ALIGN, 0);
                    }
                    next += chunk.expect as u64;
                }
                prop_assert_eq!(next, size);
            }
        }
    }
}
