//! LZ4 at n threads: liblz4's frame API has no threads, so the input is cut into
//! blocks, each compressed into an independent frame by a pool of n threads, and the
//! frames are written in order. Concatenated frames are a valid `.lz4` stream (the
//! `lz4` tool reads them), and [`Lz4Frames`] reads them back one after another.

use std::collections::BTreeMap;
use std::io::{self, BufRead, Read, Write};
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use super::encoder::Encoder;

/// Input bytes per frame, as the lz4 tool's own multi-threaded mode cuts them.
const BLOCK: usize = 4 << 20;

type Job = (u64, Vec<u8>);
type Done = (u64, io::Result<Vec<u8>>);

/// A writer that compresses blocks into LZ4 frames on a pool of threads.
pub struct ParallelLz4<W> {
    out: W,
    block: Vec<u8>,
    jobs: Option<SyncSender<Job>>,
    done: Receiver<Done>,
    workers: Vec<JoinHandle<()>>,
    sent: u64,
    written: u64,
    waiting: BTreeMap<u64, Vec<u8>>,
}

impl<W: Write> ParallelLz4<W> {
    /// A writer to `out` at `level` with `threads` compressing threads.
    pub fn new(out: W, level: u32, threads: usize) -> ParallelLz4<W> {
        let threads = threads.max(1);
        let (jobs, queue) = sync_channel::<Job>(threads);
        let (finished, done) = sync_channel::<Done>(threads * 2);
        let queue = Arc::new(Mutex::new(queue));
        let workers = (0..threads)
            .map(|_| {
                let queue = Arc::clone(&queue);
                let finished = finished.clone();
                std::thread::spawn(move || {
                    loop {
                        let job = queue.lock().map(|q| q.recv());
                        let Ok(Ok((sequence, block))) = job else {
                            return;
                        };
                        // A panic must still answer for its block, or the writer waits.
                        let framed = std::panic::catch_unwind(|| frame(&block, level))
                            .unwrap_or_else(|_| Err(io::Error::other("an lz4 thread panicked")));
                        if finished.send((sequence, framed)).is_err() {
                            return;
                        }
                    }
                })
            })
            .collect();
        ParallelLz4 {
            out,
            block: Vec::with_capacity(BLOCK),
            jobs: Some(jobs),
            done,
            workers,
            sent: 0,
            written: 0,
            waiting: BTreeMap::new(),
        }
    }

    /// Hands the full block to the pool, first writing out what the pool has finished
    /// so that no more than a few blocks per thread are in memory.
    fn send_block(&mut self) -> io::Result<()> {
        let block = std::mem::replace(&mut self.block, Vec::with_capacity(BLOCK));
        while self.sent - self.written >= 2 * self.workers.len() as u64 {
            self.write_next()?;
        }
        self.jobs
            .as_ref()
            .expect("sending before finish")
            .send((self.sent, block))
            .map_err(|_| io::Error::other("an lz4 thread stopped"))?;
        self.sent += 1;
        Ok(())
    }

    /// Waits for the next frame in order and writes it.
    fn write_next(&mut self) -> io::Result<()> {
        while !self.waiting.contains_key(&self.written) {
            let (sequence, frame) = self
                .done
                .recv()
                .map_err(|_| io::Error::other("an lz4 thread stopped"))?;
            self.waiting.insert(sequence, frame?);
        }
        let frame = self.waiting.remove(&self.written).expect("just found");
        self.out.write_all(&frame)?;
        self.written += 1;
        Ok(())
    }
}

/// One block as a whole LZ4 frame.
fn frame(block: &[u8], level: u32) -> io::Result<Vec<u8>> {
    let mut encoder = lz4::EncoderBuilder::new()
        .level(level)
        .content_size(block.len() as u64)
        .build(Vec::with_capacity(block.len() / 2 + 64))?;
    encoder.write_all(block)?;
    let (frame, result) = encoder.finish();
    result.map(|()| frame)
}

impl<W: Write> Write for ParallelLz4<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let take = buf.len().min(BLOCK - self.block.len());
        self.block.extend_from_slice(&buf[..take]);
        if self.block.len() == BLOCK {
            self.send_block()?;
        }
        Ok(take)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }
}

impl<W: Write> Encoder<W> for ParallelLz4<W> {
    fn finish(mut self: Box<Self>) -> io::Result<W> {
        // An empty input still makes one (empty) frame, as the tool writes.
        if !self.block.is_empty() || self.sent == 0 {
            self.send_block()?;
        }
        while self.written < self.sent {
            self.write_next()?;
        }
        self.jobs = None;
        for worker in self.workers.drain(..) {
            let _ = worker.join();
        }
        self.out.flush()?;
        // Dropping the rest closes the channels; a worker still blocked is freed by it.
        Ok(self.out)
    }
}

/// Reads every LZ4 frame of a stream, one after another.
pub struct Lz4Frames<R: BufRead> {
    input: Option<R>,
    frame: Option<lz4::Decoder<R>>,
}

impl<R: BufRead> Lz4Frames<R> {
    /// A reader of the frames in `input`.
    pub fn new(input: R) -> Lz4Frames<R> {
        Lz4Frames {
            input: Some(input),
            frame: None,
        }
    }
}

impl<R: BufRead> Read for Lz4Frames<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            if let Some(frame) = self.frame.as_mut() {
                let n = frame.read(buf)?;
                if n > 0 || buf.is_empty() {
                    return Ok(n);
                }
                // liblz4's decoder reads exactly to its frame's end, so the input is
                // left at the next frame.
                let (input, ended) = self.frame.take().expect("just used").finish();
                self.input = Some(input);
                // Its error is of kind Interrupted, which readers retry: make it final.
                ended.map_err(|_| {
                    io::Error::new(io::ErrorKind::InvalidData, "an lz4 frame is cut short")
                })?;
            }
            let mut input = self.input.take().expect("input or frame");
            if input.fill_buf()?.is_empty() {
                self.input = Some(input);
                return Ok(0);
            }
            self.frame = Some(lz4::Decoder::new(input)?);
        }
    }
}
