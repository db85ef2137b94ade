//! The whole task as today's tools run it (zstd's command-line tool with its
//! asynchronous I/O): a reader thread reads the input ahead of the codec into a few
//! aligned buffers, a writer thread writes the codec's output behind it, each through
//! a bounded queue, so reading, transforming and writing overlap. Each of the three
//! can be made free (the input already in memory, bytes passed on without a codec,
//! the output dropped unsynced) to measure what the task would gain without it.

use std::fs::File;
use std::io::{self, BufRead, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{Receiver, Sender, SyncSender, channel, sync_channel};
use std::thread::{Scope, ScopedJoinHandle};
use std::time::Instant;

use super::steps::{CHUNK, Transform, Uncached, Writeback, transform};
use crate::error::Error;
use crate::storage::buffer::AlignedBuf;
use crate::storage::workdir::WorkDir;
use crate::workload::Context;

/// Buffers of [`CHUNK`] bytes the reader may fill ahead of the codec, and the writer
/// may hold behind it: 8 MiB each way, the job size of zstd's workers at its default
/// level, so neither thread waits on the other while a job is cut.
const DEPTH: usize = 8;

/// Where the whole task's input comes from.
pub enum Input<'a> {
    /// The file, read uncached by a reader thread.
    File(Uncached),
    /// Bytes already in memory, repeated until `total` bytes were given (the read free).
    Memory {
        /// The bytes.
        bytes: &'a [u8],
        /// How many bytes to give in all.
        total: u64,
    },
}

/// What happens between the input and the output.
pub enum Middle<'a> {
    /// The codec.
    Codec(Transform),
    /// No work (the transform free): for every `per` bytes in, `output`'s bytes out,
    /// as the codec put them out, so that the output is as large as the codec's.
    Free {
        /// What the codec made of `per` bytes of input.
        output: &'a [u8],
        /// The input bytes `output` stands for.
        per: u64,
    },
}

/// Where the whole task's output goes.
pub enum Output<'a> {
    /// A new file `name` in a work folder, written by a writer thread and synced.
    File(&'a mut WorkDir, &'a str),
    /// Nowhere: counted and dropped, never synced (the write free).
    Dropped,
}

/// What the whole task did.
pub struct Whole {
    /// Seconds from the first read to the return of the output's fsync.
    pub seconds: f64,
    /// Bytes written to the output.
    pub output_bytes: u64,
    /// The output file, kept for the round-trip check (`None` when it was dropped).
    pub output: Option<PathBuf>,
}

/// Runs the whole task from `input` through `middle` to `output`, timed from the
/// first read to the return of the output's fsync; `size` is the original bytes where
/// known (stored in a compressed frame, as the tools do).
pub fn run(
    ctx: &Context,
    input: Input,
    middle: Middle,
    output: Output,
    size: Option<u64>,
) -> Result<Whole, Error> {
    let file = match output {
        Output::File(dir, name) => Some(dir.create_file(name, false)?),
        Output::Dropped => None,
    };
    let input_path = match &input {
        Input::File(source) => source.path().to_path_buf(),
        Input::Memory { .. } => PathBuf::from("memory"),
    };
    // Every buffer is made before the clock starts.
    let read_pool = match &input {
        Input::File(_) => (0..DEPTH)
            .map(|_| AlignedBuf::new(CHUNK))
            .collect::<io::Result<Vec<_>>>()
            .map_err(|e| Error::io("allocate a buffer for", &input_path, e))?,
        Input::Memory { .. } => Vec::new(),
    };
    let write_pool: Vec<Vec<u8>> = match &file {
        Some(_) => (0..DEPTH).map(|_| Vec::with_capacity(CHUNK)).collect(),
        None => Vec::new(),
    };
    let started = Instant::now();
    let (output_bytes, path) = std::thread::scope(|scope| {
        let (source, reader) = start_reading(scope, ctx, input, read_pool);
        let (sink, writer) = start_writing(scope, file, write_pool);
        let made = match middle {
            Middle::Codec(how) => transform(ctx, how, size, source, sink, &input_path),
            Middle::Free { output, per } => pass(ctx, source, sink, output, per, &input_path),
        };
        let made = made.and_then(|(sink, bytes)| {
            sink.finish()
                .map_err(|e| Error::io("write", &input_path, e))?;
            Ok(bytes)
        });
        // A thread that stopped makes the codec fail on its queue: its own error says
        // why, unless the run was cancelled.
        let read = reader.map(|r| r.join().expect("the reader does not panic"));
        let written = writer.map(|w| w.join().expect("the writer does not panic"));
        let cause = |r: Option<Result<_, Error>>| match r {
            Some(Err(e)) if !matches!(e, Error::Interrupted) => Some(e),
            _ => None,
        };
        match made {
            Err(e) if ctx.cancel.is_set() => Err(e),
            Err(e) => Err(cause(written.map(|w| w.map(drop)))
                .or(cause(read))
                .unwrap_or(e)),
            Ok(bytes) => Ok((bytes, written.transpose()?)),
        }
    })?;
    Ok(Whole {
        seconds: started.elapsed().as_secs_f64(),
        output_bytes,
        output: path,
    })
}

/// A reader or writer thread of the pipeline, and what it gives when it ends.
type Thread<'scope, T> = ScopedJoinHandle<'scope, Result<T, Error>>;

/// The codec's input: a file read ahead by a reader thread started in `scope` (with
/// `pool`'s buffers), or bytes in memory, which need none.
fn start_reading<'scope, 'env: 'scope>(
    scope: &'scope Scope<'scope, 'env>,
    ctx: &'env Context,
    input: Input<'env>,
    pool: Vec<AlignedBuf>,
) -> (Box<dyn BufRead + Send + 'env>, Option<Thread<'scope, ()>>) {
    match input {
        Input::File(uncached) => {
            let (full_tx, full_rx) = channel();
            let (free_tx, free_rx) = channel();
            let reader = scope.spawn(move || read_ahead(ctx, &uncached, pool, full_tx, free_rx));
            let queue = Ahead {
                full: full_rx,
                free: free_tx,
                current: None,
            };
            (Box::new(queue), Some(reader))
        }
        Input::Memory { bytes, total } => (
            Box::new(Cycle {
                bytes,
                at: 0,
                left: total,
            }),
            None,
        ),
    }
}

/// Where the codec writes: the queue of a writer thread started in `scope` for `file`
/// (with `pool`'s buffers), or nowhere.
fn start_writing<'scope>(
    scope: &'scope Scope<'scope, '_>,
    file: Option<(PathBuf, File)>,
    pool: Vec<Vec<u8>>,
) -> (
    Drain,
    Option<ScopedJoinHandle<'scope, Result<PathBuf, Error>>>,
) {
    let Some((path, file)) = file else {
        return (Drain::Dropped, None);
    };
    let (full_tx, full_rx) = sync_channel(DEPTH);
    let (free_tx, free_rx) = channel();
    let writer = scope.spawn(move || write_behind(file, path, full_rx, free_tx));
    let sink = Behind {
        full: full_tx,
        free: free_rx,
        pool,
        current: Vec::new(),
    };
    (Drain::Behind(sink), Some(writer))
}

/// The reader thread: fills each free buffer from `source` in turn and queues it,
/// until the file ends, the codec stops taking buffers, or the run is cancelled.
fn read_ahead(
    ctx: &Context,
    source: &Uncached,
    pool: Vec<AlignedBuf>,
    full: Sender<io::Result<(AlignedBuf, usize)>>,
    free: Receiver<AlignedBuf>,
) -> Result<(), Error> {
    let mut pool = pool;
    let mut offset = 0u64;
    while offset < source.size() {
        let Some(mut buf) = pool.pop().or_else(|| free.recv().ok()) else {
            // The codec stopped.
            return Err(Error::Interrupted);
        };
        if ctx.cancel.is_set() {
            let _ = full.send(Err(io::Error::other("interrupted")));
            return Err(Error::Interrupted);
        }
        match source.read_at(buf.as_mut_slice(), offset) {
            Ok(n) => {
                offset += n as u64;
                if full.send(Ok((buf, n))).is_err() {
                    return Err(Error::Interrupted);
                }
            }
            Err(e) => {
                let _ = full.send(Err(io::Error::other(e.to_string())));
                return Err(e);
            }
        }
    }
    Ok(())
}

/// The codec's side of the reader's queue: each buffer in turn, given back when used.
struct Ahead {
    full: Receiver<io::Result<(AlignedBuf, usize)>>,
    free: Sender<AlignedBuf>,
    /// The buffer being used, its length and how much of it is used.
    current: Option<(AlignedBuf, usize, usize)>,
}

impl Read for Ahead {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        super::steps::read_buffered(self, out)
    }
}

impl BufRead for Ahead {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        if self.current.as_ref().is_none_or(|(_, len, at)| at == len) {
            if let Some((buf, _, _)) = self.current.take() {
                // The reader has gone when the file has been read.
                let _ = self.free.send(buf);
            }
            // A closed queue is the end of the file; the reader queues its errors.
            if let Ok(next) = self.full.recv() {
                let (buf, len) = next?;
                self.current = Some((buf, len, 0));
            }
        }
        Ok(match &self.current {
            Some((buf, len, at)) => &buf.as_slice()[*at..*len],
            None => &[],
        })
    }

    fn consume(&mut self, amount: usize) {
        if let Some((_, len, at)) = self.current.as_mut() {
            *at = (*at + amount).min(*len);
        }
    }
}

/// Bytes in memory given over and over until `left` bytes were given.
struct Cycle<'a> {
    bytes: &'a [u8],
    at: usize,
    left: u64,
}

impl Read for Cycle<'_> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        super::steps::read_buffered(self, out)
    }
}

impl BufRead for Cycle<'_> {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        if self.at == self.bytes.len() {
            self.at = 0;
        }
        let end = (self.bytes.len() as u64).min(self.at as u64 + self.left) as usize;
        Ok(&self.bytes[self.at..end])
    }

    fn consume(&mut self, amount: usize) {
        self.at += amount;
        self.left -= amount as u64;
    }
}

/// A full output buffer, or the end of the output.
enum Block {
    Data(Vec<u8>),
    End,
}

/// Where the codec writes: the writer thread's queue, or nowhere.
enum Drain {
    Behind(Behind),
    Dropped,
}

impl Write for Drain {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Drain::Behind(behind) => behind.write(buf),
            Drain::Dropped => Ok(buf.len()),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Drain {
    /// Queues what is left and tells the writer the output is whole.
    fn finish(self) -> io::Result<()> {
        match self {
            Drain::Behind(mut behind) => {
                behind.ship()?;
                behind.send(Block::End)
            }
            Drain::Dropped => Ok(()),
        }
    }
}

/// The codec's side of the writer's queue: fills a buffer and queues it when full.
struct Behind {
    full: SyncSender<Block>,
    free: Receiver<Vec<u8>>,
    /// Buffers not yet queued once.
    pool: Vec<Vec<u8>>,
    current: Vec<u8>,
}

impl Behind {
    /// Queues `block`; fails when the writer has stopped.
    fn send(&self, block: Block) -> io::Result<()> {
        self.full
            .send(block)
            .map_err(|_| io::Error::other("the writer stopped"))
    }

    /// Queues the current buffer, if it holds anything, and takes a free one.
    fn ship(&mut self) -> io::Result<()> {
        if self.current.is_empty() {
            return Ok(());
        }
        let next = match self.pool.pop() {
            Some(buf) => buf,
            None => self
                .free
                .recv()
                .map_err(|_| io::Error::other("the writer stopped"))?,
        };
        let full = std::mem::replace(&mut self.current, next);
        self.send(Block::Data(full))
    }
}

impl Write for Behind {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.current.capacity() == 0 {
            self.current = self.pool.pop().unwrap_or_else(|| Vec::with_capacity(CHUNK));
        }
        let n = buf.len().min(CHUNK - self.current.len());
        self.current.extend_from_slice(&buf[..n]);
        if self.current.len() == CHUNK {
            self.ship()?;
        }
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// The writer thread: writes each queued buffer to `file`, starting its writeback as
/// the write step alone does, and gives it back; syncs the file once the output is
/// whole. Gives the file's path.
fn write_behind(
    file: File,
    path: PathBuf,
    full: Receiver<Block>,
    free: Sender<Vec<u8>>,
) -> Result<PathBuf, Error> {
    let mut writeback = Writeback::default();
    loop {
        match full.recv() {
            Ok(Block::Data(mut buf)) => {
                writeback.write(&file, &path, &buf)?;
                buf.clear();
                // The codec has stopped when it takes no more buffers.
                let _ = free.send(buf);
            }
            Ok(Block::End) => break,
            // The codec stopped before the end.
            Err(_) => return Err(Error::Interrupted),
        }
    }
    file.sync_all().map_err(|e| Error::io("sync", &path, e))?;
    Ok(path)
}

/// The transform free: takes every byte of `source` and writes `output`'s bytes in
/// proportion (`output.len()` for every `per` in), over and over; gives the writer and
/// the bytes written.
fn pass<W: Write>(
    ctx: &Context,
    source: impl BufRead,
    mut sink: W,
    output: &[u8],
    per: u64,
    input_path: &Path,
) -> Result<(W, u64), Error> {
    let mut source = super::steps::Metered::new(source, ctx);
    let (mut taken, mut written, mut at) = (0u64, 0u64, 0usize);
    let per = per.max(1) as u128;
    loop {
        let n = match source.fill_buf() {
            Ok([]) => break,
            Ok(buf) => buf.len(),
            Err(_) if ctx.cancel.is_set() => return Err(Error::Interrupted),
            Err(e) => return Err(Error::io("read", input_path, e)),
        };
        source.consume(n);
        taken += n as u64;
        let due = (taken as u128 * output.len() as u128 / per) as u64;
        while written < due && !output.is_empty() {
            if at == output.len() {
                at = 0;
            }
            let end = output.len().min(at + (due - written) as usize);
            sink.write_all(&output[at..end])
                .map_err(|e| Error::io("write", input_path, e))?;
            written += (end - at) as u64;
            at = end;
        }
    }
    Ok((sink, written))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::control::{Cancel, Progress};
    use crate::workload::Sink;
    use crate::workload::task::Codec;
    use crate::workload::task::steps::Direction;

    fn context() -> Context {
        let (events, _) = channel();
        Context {
            cancel: Cancel::new(),
            sink: Sink::new(0, events, Arc::new(Progress::default())),
        }
    }

    fn zstd(threads: usize) -> Transform {
        Transform {
            direction: Direction::Compress,
            codec: Codec::Zstd,
            level: 3,
            threads,
        }
    }

    /// Bytes that compress, but not to nothing.
    fn data(len: usize) -> Vec<u8> {
        (0..len)
            .map(|i| (i as u32).wrapping_mul(2654435761).to_le_bytes()[3] & 0x1f)
            .collect()
    }

    #[test]
    fn a_file_to_file_task_round_trips_through_both_queues() {
        let dir = tempfile::tempdir().unwrap();
        let source = dir.path().join("source");
        let original = data(9 * CHUNK + 12_345);
        std::fs::write(&source, &original).unwrap();
        let mut work = WorkDir::create(dir.path()).unwrap();
        let ctx = context();
        let mut moved = 0;
        for threads in [1, 3] {
            let input = Uncached::open(&source, original.len() as u64, true, &[]).unwrap();
            let whole = run(
                &ctx,
                Input::File(input),
                Middle::Codec(zstd(threads)),
                Output::File(&mut work, "out.zst"),
                Some(original.len() as u64),
            )
            .unwrap();
            let path = whole.output.unwrap();
            let written = std::fs::read(&path).unwrap();
            assert_eq!(written.len() as u64, whole.output_bytes);
            assert_eq!(zstd::decode_all(&written[..]).unwrap(), original);
            moved += original.len() as u64;
            assert_eq!(
                ctx.sink.progress().bytes(),
                moved,
                "every byte counted once"
            );
            work.remove_file(&path).unwrap();
        }
        work.remove_all().unwrap();
    }

    #[test]
    fn free_steps_move_as_many_bytes_as_the_codec_would() {
        let ctx = context();
        let input = data(3 * CHUNK);
        let made = vec![7u8; 1000];
        // The input given twice over, as a file larger than memory would be.
        let whole = run(
            &ctx,
            Input::Memory {
                bytes: &input,
                total: 2 * input.len() as u64,
            },
            Middle::Free {
                output: &made,
                per: input.len() as u64,
            },
            Output::Dropped,
            None,
        )
        .unwrap();
        assert_eq!(whole.output_bytes, 2000);
        assert!(whole.output.is_none());
        assert_eq!(ctx.sink.progress().bytes(), 2 * input.len() as u64);
    }

    #[test]
    fn a_reader_that_fails_names_its_cause_and_leaves_no_thread() {
        let dir = tempfile::tempdir().unwrap();
        let source = dir.path().join("source");
        std::fs::write(&source, data(2 * CHUNK)).unwrap();
        // Said to be longer than it is: the reader finds the file short.
        let input = Uncached::open(&source, 4 * CHUNK as u64, true, &[]).unwrap();
        let mut work = WorkDir::create(dir.path()).unwrap();
        let error = run(
            &context(),
            Input::File(input),
            Middle::Codec(zstd(2)),
            Output::File(&mut work, "out.zst"),
            None,
        )
        .err()
        .unwrap();
        assert!(error.to_string().contains("source"), "{error}");
        work.remove_all().unwrap();
    }
}
