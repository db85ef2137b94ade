//! The measuring loops of a task's steps alone: read a file uncached, transform bytes
//! (compress or decompress) in memory, write bytes with a sync (all three at once, the
//! whole task, are in [`super::pipeline`]). Files are opened before a timer starts; each timer stops after the last byte
//! (and, for writes, after fsync returns).

use std::fs::File;
use std::io::{self, BufRead, Read, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

use sha2::{Digest, Sha256};

use super::codec::Codec;
use super::item::Step;
use crate::control::Cancel;
use crate::error::Error;
use crate::storage::buffer::AlignedBuf;
use crate::storage::cache::{self, Eviction};
use crate::storage::layers::LayerResidency;
use crate::storage::layers::{Layer, evict_and_measure};
use crate::storage::request::{self, Op, Request};
use crate::storage::workdir::{self, WorkDir};
use crate::workload::Context;

/// Bytes per read and write call, as the disk series uses.
pub const CHUNK: usize = 1 << 20;
/// Bytes written between two requests that the kernel start writing them back.
const WRITEBACK: u64 = 2 << 20;

/// Asks the kernel to start writing a file's pages back every [`WRITEBACK`] bytes
/// written, so the device works while later bytes are made and the final fsync waits
/// only for the rest (buffered writes alone sit in the cache until the fsync).
#[derive(Default)]
pub(super) struct Writeback {
    written: u64,
    started: u64,
}

impl Writeback {
    /// Writes `bytes` at the end of what was written to `file` (at `path`), through the
    /// storage core's request engine, and counts them.
    pub(super) fn write(&mut self, file: &File, path: &Path, bytes: &[u8]) -> Result<(), Error> {
        // A write only reads its buffer.
        let buf = bytes.as_ptr().cast_mut();
        request::once(
            path,
            &Request::whole(Op::Write, file, self.written, buf, bytes.len()),
        )?;
        self.wrote(file, bytes.len());
        Ok(())
    }

    /// Counts `bytes` more written to `file`, and starts their writeback when enough
    /// have gathered. An error of the device shows at the fsync.
    fn wrote(&mut self, file: &File, bytes: usize) {
        self.written += bytes as u64;
        let gathered = self.written - self.started;
        if gathered >= WRITEBACK {
            // SAFETY: a plain system call on an open descriptor; no memory is passed.
            unsafe {
                libc::sync_file_range(
                    std::os::fd::AsRawFd::as_raw_fd(file),
                    self.started as libc::off64_t,
                    gathered as libc::off64_t,
                    libc::SYNC_FILE_RANGE_WRITE,
                );
            }
            self.started = self.written;
        }
    }
}

/// Which way a task runs its codec.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    /// Original bytes in, compressed bytes out.
    Compress,
    /// Compressed bytes in, original bytes out (`--decompress`).
    Decompress,
}

impl Direction {
    /// The middle step, as stored.
    pub fn step(self) -> Step {
        match self {
            Direction::Compress => Step::Compress,
            Direction::Decompress => Step::Decompress,
        }
    }

    /// The name of the middle step.
    pub fn as_str(self) -> &'static str {
        self.step().as_str()
    }
}

/// The codec settings of a transform.
#[derive(Debug, Clone, Copy)]
pub struct Transform {
    /// Which way.
    pub direction: Direction,
    /// The codec.
    pub codec: Codec,
    /// Its level.
    pub level: i32,
    /// Compression threads.
    pub threads: usize,
}

/// A file opened to be read uncached: direct where the filesystem allows, else
/// evicted first and read through the cache; with how much of it was resident.
pub struct Uncached {
    file: File,
    path: PathBuf,
    size: u64,
    /// Whether reads bypass the page cache (O_DIRECT).
    pub direct: bool,
    /// Fraction of the file in the page cache just before the read.
    pub cached_fraction_before: f64,
    /// What each layer below the file held (a disk image's files on the host).
    pub layers: Vec<LayerResidency>,
}

impl Uncached {
    /// Opens `path` (of `size` bytes) for an uncached read, evicting the `layers` below
    /// it too. A file that is not `ours` is only advised out of the cache, never synced
    /// or dropped with the whole cache.
    pub fn open(path: &Path, size: u64, ours: bool, layers: &[Layer]) -> Result<Uncached, Error> {
        let probe = workdir::open_for_read(path, false)?;
        let (advise, force) = if ours {
            (Eviction::Advise, Eviction::Force)
        } else {
            (Eviction::Foreign, Eviction::Foreign)
        };
        let (file, direct, how) = match workdir::open_for_read(path, true) {
            Ok(file) => (file, true, advise),
            // Refused at open: this filesystem does not take O_DIRECT.
            Err(Error::Unsupported(_)) => (
                probe.try_clone().map_err(|e| Error::io("open", path, e))?,
                false,
                force,
            ),
            Err(e) => return Err(e),
        };
        cache::evict(&probe, path, size, how)?;
        let layers = evict_and_measure(layers, &probe, size, how)?;
        let cached_fraction_before = cache::resident_fraction(&file, path, size)?;
        Ok(Uncached {
            file,
            path: path.to_path_buf(),
            size,
            direct,
            cached_fraction_before,
            layers,
        })
    }

    /// Reads `buf.len()` bytes (a multiple of the page size) at `offset`, or what is
    /// left of the file, through the storage core's request engine.
    pub(super) fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<usize, Error> {
        let left = self.size.saturating_sub(offset);
        let request = Request {
            expect: buf.len().min(usize::try_from(left).unwrap_or(usize::MAX)),
            // A direct read's rest would be unaligned: short, it is the file's end.
            short_ends: self.direct,
            ..Request::whole(Op::Read, &self.file, offset, buf.as_mut_ptr(), buf.len())
        };
        let moved = request::once(&self.path, &request)?;
        Ok(moved.min(request.expect))
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The file's size in bytes.
    pub fn size(&self) -> u64 {
        self.size
    }
}

/// Times reading the whole file, keeping its first `keep.len()` bytes in `keep`
/// (the input of the in-memory step). Returns the seconds taken.
pub fn read(ctx: &Context, source: &Uncached, keep: &mut [u8]) -> Result<f64, Error> {
    let mut scratch =
        AlignedBuf::new(CHUNK).map_err(|e| Error::io("allocate a buffer for", &source.path, e))?;
    let progress = ctx.sink.progress();
    let started = Instant::now();
    let mut offset = 0u64;
    while offset < source.size {
        if ctx.cancel.is_set() {
            return Err(Error::Interrupted);
        }
        let at = offset as usize;
        let buf = if at < keep.len() {
            let end = (at + CHUNK).min(keep.len());
            &mut keep[at..end]
        } else {
            scratch.as_mut_slice()
        };
        let n = source.read_at(buf, offset)?;
        offset += n as u64;
        progress.add(n as u64);
    }
    Ok(started.elapsed().as_secs_f64())
}

/// `Read::read` for a reader whose own buffer is the source: copy out what
/// `fill_buf` holds.
pub(super) fn read_buffered(reader: &mut impl BufRead, out: &mut [u8]) -> io::Result<usize> {
    let available = reader.fill_buf()?;
    let n = available.len().min(out.len());
    out[..n].copy_from_slice(&available[..n]);
    reader.consume(n);
    Ok(n)
}

/// Why a transform stopped early: the run was cancelled.
#[derive(Debug, thiserror::Error)]
#[error("interrupted")]
struct Cancelled;

/// A reader that counts what is consumed into the run's progress and stops on cancel.
pub(super) struct Metered<'c, R> {
    inner: R,
    ctx: &'c Context,
}

impl<'c, R: BufRead> Metered<'c, R> {
    /// `inner`, counted into `ctx`'s progress.
    pub(super) fn new(inner: R, ctx: &'c Context) -> Self {
        Metered { inner, ctx }
    }
}

impl<R: BufRead> Read for Metered<'_, R> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        read_buffered(self, out)
    }
}

impl<R: BufRead> BufRead for Metered<'_, R> {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        if self.ctx.cancel.is_set() {
            return Err(io::Error::other(Cancelled));
        }
        // At most a chunk at a time, so an in-memory input still reports progress.
        let buf = self.inner.fill_buf()?;
        Ok(&buf[..buf.len().min(CHUNK)])
    }

    fn consume(&mut self, amount: usize) {
        self.inner.consume(amount);
        self.ctx.sink.progress().add(amount as u64);
    }
}

/// A writer that counts the bytes through it.
struct Counted<W> {
    inner: W,
    bytes: u64,
}

impl<W: Write> Write for Counted<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.bytes += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// Runs the codec over all of `input` into `output`; returns the writer and the bytes
/// written to it.
pub fn transform<W: Write + 'static>(
    ctx: &Context,
    how: Transform,
    size: Option<u64>,
    input: impl BufRead,
    output: W,
    input_path: &Path,
) -> Result<(W, u64), Error> {
    let mut input = Metered::new(input, ctx);
    let counted = Counted {
        inner: output,
        bytes: 0,
    };
    let result = match how.direction {
        Direction::Compress => (|| {
            let mut encoder = how.codec.encoder(counted, how.level, how.threads, size)?;
            loop {
                let buf = input.fill_buf()?;
                if buf.is_empty() {
                    break;
                }
                encoder.write_all(buf)?;
                let n = buf.len();
                input.consume(n);
            }
            encoder.finish()
        })(),
        Direction::Decompress => (|| {
            let mut counted = counted;
            let mut decoder = how.codec.decoder(&mut input)?;
            let mut buf = vec![0u8; CHUNK];
            loop {
                let n = decoder.read(&mut buf)?;
                if n == 0 {
                    break;
                }
                counted.write_all(&buf[..n])?;
            }
            Ok(counted)
        })(),
    };
    match result {
        Ok(counted) => Ok((counted.inner, counted.bytes)),
        Err(_) if ctx.cancel.is_set() => Err(Error::Interrupted),
        Err(e) => Err(Error::io(
            match how.direction {
                Direction::Compress => "compress",
                Direction::Decompress => "decompress",
            },
            input_path,
            e,
        )),
    }
}

/// Times writing `data` to a new file `name` in `dir`, synced; removes it after.
pub fn write(ctx: &Context, dir: &mut WorkDir, name: &str, data: &[u8]) -> Result<f64, Error> {
    let (path, file) = dir.create_file(name, false)?;
    let progress = ctx.sink.progress();
    let mut writeback = Writeback::default();
    let started = Instant::now();
    for piece in data.chunks(CHUNK) {
        if ctx.cancel.is_set() {
            return Err(Error::Interrupted);
        }
        writeback.write(&file, &path, piece)?;
        progress.add(piece.len() as u64);
    }
    file.sync_all().map_err(|e| Error::io("sync", &path, e))?;
    let seconds = started.elapsed().as_secs_f64();
    drop(file);
    dir.remove_file(&path)?;
    Ok(seconds)
}

/// SHA-256 of everything `input` gives.
pub fn digest(mut input: impl Read, path: &Path, cancel: &Cancel) -> Result<[u8; 32], Error> {
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; CHUNK];
    loop {
        if cancel.is_set() {
            return Err(Error::Interrupted);
        }
        match input.read(&mut buf) {
            Ok(0) => return Ok(hasher.finalize().into()),
            Ok(n) => hasher.update(&buf[..n]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(Error::io("read back", path, e)),
        }
    }
}

/// SHA-256 of a file's content, after decoding it with `codec` when given.
pub fn file_digest(path: &Path, codec: Option<Codec>, cancel: &Cancel) -> Result<[u8; 32], Error> {
    let file = File::open(path).map_err(|e| Error::io("open", path, e))?;
    let input = io::BufReader::with_capacity(CHUNK, file);
    match codec {
        Some(codec) => digest(
            codec
                .decoder(input)
                .map_err(|e| Error::io("decompress", path, e))?,
            path,
            cancel,
        ),
        None => digest(input, path, cancel),
    }
}
