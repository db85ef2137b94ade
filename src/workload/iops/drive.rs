//! The measuring loop of one block I/O test on one thread: requests of one block size
//! at offsets one after another or shuffled, `depth` in flight (pread and pwrite at
//! depth 1, io_uring above it, as fio's psync and io_uring engines, both through the
//! storage core's one request engine), first for a ramp that is not counted, then for
//! the timed span. Each request's latency runs from the moment its slot was free to take
//! it (the call, at depth 1) to the moment its completion is reaped, so a wait to be
//! submitted while other completions are handled counts, as in fio's total latency
//! (lat), and the mean is depth / IOPS.

use std::fs::File;
use std::path::Path;
use std::time::{Duration, Instant};

use super::latency::{Intervals, Latency};
use super::notation::{BlockTest, Order, Rw};
use crate::control::Controls;
use crate::error::Error;
use crate::storage::buffer::SlotBufs;
use crate::storage::data::Pattern;
use crate::storage::engine::buffers_error;
use crate::storage::request::{Engine, Op, Request, Source};

/// One thread's share of a test.
pub struct ThreadJob<'a> {
    /// The test file, opened for reading and writing (with O_DIRECT when asked).
    pub file: &'a File,
    /// Its path, for messages.
    pub path: &'a Path,
    /// Its size.
    pub file_bytes: u64,
    /// The test.
    pub test: BlockTest,
    /// What its requests do.
    pub rw: Rw,
    /// The thread's index, from 0.
    pub thread: u32,
    /// The run's seed: offsets and write data follow from it.
    pub seed: u64,
    /// Time before the counted span.
    pub ramp: Duration,
    /// The counted span.
    pub span: Duration,
    /// Cancel flag and counters.
    pub controls: Controls<'a>,
    /// The test's intervals, of reads and of writes, where every thread's counts go.
    pub intervals: &'a [Intervals; 2],
}

/// Bytes of buffers every thread of `test` doing `rw` holds together: a block a slot to
/// read into, two a slot of write data.
pub fn buffer_bytes(test: BlockTest, rw: Rw) -> u64 {
    let [reads, writes] = rw.ops();
    let slots = test.queue_depth as usize;
    let block = test.block_bytes as usize;
    let read = if reads {
        (slots * SlotBufs::stride(block)) as u64
    } else {
        0
    };
    let write = if writes {
        Pattern::in_flight_bytes(slots, block)
    } else {
        0
    };
    u64::from(test.threads) * (read + write)
}

impl ThreadJob<'_> {
    /// Runs the thread's requests: `start` is the instant the ramp began.
    pub fn run(&self, start: Instant) -> Result<(), Error> {
        let window = Window {
            counted_from: start + self.ramp,
            until: start + self.ramp + self.span,
        };
        let depth = self.test.queue_depth as usize;
        let [reads, writes] = self.rw.ops();
        let block = self.test.block_bytes as usize;
        let mut requests = Requests {
            job: self,
            offsets: Offsets::new(self.test, self.file_bytes, self.thread, self.seed),
            chooser: Chooser::new(self.rw, self.thread_seed()),
            data: writes
                .then(|| Pattern::for_in_flight(depth, block, self.thread_seed()))
                .transpose()
                .map_err(buffers_error)?,
            bufs: reads
                .then(|| SlotBufs::new(depth, block))
                .transpose()
                .map_err(buffers_error)?,
            submitted: vec![start; depth],
            tally: Tally {
                window,
                intervals: self.intervals,
                index: 0,
                interval_ends: window.counted_from + self.intervals[0].length(),
                latency: [Latency::new(), Latency::new()],
            },
        };
        let mut engine = Engine::for_depth(depth, &self.test.to_string())?;
        let ran = engine.run(&mut requests, self.controls.cancel);
        requests.tally.flush();
        ran
    }

    fn thread_seed(&self) -> u64 {
        self.seed ^ u64::from(self.thread).wrapping_mul(0x9e37_79b9_7f4a_7c15)
    }
}

/// One thread's requests: the next offset and operation for each free slot, the slot's
/// buffer, and the tally of what completed.
struct Requests<'a, 'j> {
    job: &'a ThreadJob<'j>,
    offsets: Offsets,
    chooser: Chooser,
    data: Option<Pattern>,
    bufs: Option<SlotBufs>,
    /// When each slot's request was free to go: its latency runs from there.
    submitted: Vec<Instant>,
    tally: Tally<'a>,
}

impl Source for Requests<'_, '_> {
    fn path(&self) -> &Path {
        self.job.path
    }

    fn next(&mut self, slot: usize, since: Instant) -> Option<Request> {
        if since >= self.tally.window.until {
            return None;
        }
        let block = self.job.test.block_bytes as usize;
        let offset = self.offsets.next();
        let (op, buf) = match self.data.as_mut().filter(|_| self.chooser.writes()) {
            Some(data) => (Op::Write, data.block(slot, block).as_mut_ptr()),
            None => {
                let bufs = self
                    .bufs
                    .as_mut()
                    .expect("a test that reads has read buffers");
                (Op::Read, bufs.slot(slot).as_mut_ptr())
            }
        };
        // Its time runs from the moment its slot was freed: the wait while a batch of
        // completions is handled is the request's too (as fio's lat counts it), so the
        // mean keeps Little's law (depth / IOPS).
        self.submitted[slot] = since;
        Some(Request::whole(op, self.job.file, offset, buf, block))
    }

    fn done(&mut self, slot: usize, request: &Request, _moved: usize, reaped: Instant) {
        self.job.controls.progress.add(self.job.test.block_bytes);
        let write = request.op == Op::Write;
        self.tally.count(write, self.submitted[slot], reaped);
    }
}

/// The counted span of a thread.
#[derive(Debug, Clone, Copy)]
struct Window {
    counted_from: Instant,
    until: Instant,
}

/// A thread's counts of the interval it is in, reads and writes apart, handed to the
/// test's intervals as each one ends.
struct Tally<'a> {
    window: Window,
    intervals: &'a [Intervals; 2],
    index: usize,
    /// When interval `index` ends (for the last, when the next would).
    interval_ends: Instant,
    latency: [Latency; 2],
}

impl Tally<'_> {
    /// Counts a request that completed at `done` if it did so within the span.
    fn count(&mut self, write: bool, submitted: Instant, done: Instant) {
        if done < self.window.counted_from || done >= self.window.until {
            return;
        }
        // Most completions fall in the interval of the last: a comparison, no division.
        if done >= self.interval_ends || done < self.interval_ends - self.intervals[0].length() {
            self.flush();
            let since = done - self.window.counted_from;
            self.index = self.intervals[0].index(since);
            self.interval_ends =
                self.window.counted_from + self.intervals[0].length() * (self.index as u32 + 1);
        }
        self.latency[usize::from(write)].record(done - submitted);
    }

    /// Hands the interval's counts to the test's.
    fn flush(&mut self) {
        for (latency, intervals) in self.latency.iter_mut().zip(self.intervals) {
            if latency.count() > 0 {
                intervals.add(self.index, latency);
                latency.reset();
            }
        }
    }
}

/// Which of a thread's requests write: none, all, or a share of them in a random order.
/// A mix deals from a deck of 100 requests with exactly the share of writes, shuffled
/// anew (a xorshift generator of the thread's seed) each time it runs out: drawing each
/// request alone would let the share stray by a few percent over a short test.
struct Chooser {
    reads: u8,
    state: u64,
    deck: [bool; 100],
    dealt: usize,
}

impl Chooser {
    fn new(rw: Rw, seed: u64) -> Chooser {
        let reads = rw.read_percent();
        Chooser {
            reads,
            state: seed | 1,
            deck: std::array::from_fn(|card| card >= usize::from(reads)),
            dealt: 100,
        }
    }

    /// Whether the next request writes.
    fn writes(&mut self) -> bool {
        match self.reads {
            100 => false,
            0 => true,
            _ => {
                if self.dealt == self.deck.len() {
                    self.shuffle();
                }
                self.dealt += 1;
                self.deck[self.dealt - 1]
            }
        }
    }

    /// Puts the deck in a new order (Fisher-Yates).
    fn shuffle(&mut self) {
        for card in (1..self.deck.len()).rev() {
            self.state ^= self.state << 13;
            self.state ^= self.state >> 7;
            self.state ^= self.state << 17;
            let other = (self.state % (card as u64 + 1)) as usize;
            self.deck.swap(card, other);
        }
        self.dealt = 0;
    }
}

/// The offsets of one thread's requests: for a sequential test, block after block from
/// the thread's own share of the file, wrapping at its end; for a random one, every
/// block once per pass in a shuffled order of the thread's own.
pub struct Offsets {
    block_bytes: u64,
    blocks: u64,
    next: u64,
    shuffle: Option<Shuffle>,
}

impl Offsets {
    /// The offsets of thread `thread` of `test` over a file of `file_bytes`.
    pub fn new(test: BlockTest, file_bytes: u64, thread: u32, seed: u64) -> Offsets {
        let blocks = (file_bytes / test.block_bytes).max(1);
        let thread_seed = crate::storage::data::block_key(seed, u64::from(thread));
        Offsets {
            block_bytes: test.block_bytes,
            blocks,
            next: blocks / u64::from(test.threads) * u64::from(thread),
            shuffle: (test.order == Order::Random).then(|| Shuffle::new(blocks, thread_seed)),
        }
    }

    /// The next request's offset.
    pub fn next(&mut self) -> u64 {
        let block = match self.shuffle.as_mut() {
            Some(shuffle) => shuffle.next(),
            None => {
                let block = self.next % self.blocks;
                self.next = block + 1;
                block
            }
        };
        block * self.block_bytes
    }
}

/// A permutation of `0..n` walked without a table: a full-period linear congruential
/// generator modulo the next power of two, its outputs scattered by a bijection of that
/// range and those at or above `n` skipped, so every number below `n` comes once per
/// period.
struct Shuffle {
    n: u64,
    mask: u64,
    scramble: u64,
    increment: u64,
    state: u64,
}

impl Shuffle {
    /// Multiplier of the generator: 1 modulo 4, as a full period needs.
    const MULTIPLIER: u64 = 0x5851_f42d_4c95_7f2d;

    fn new(n: u64, seed: u64) -> Shuffle {
        let mask = n.next_power_of_two() - 1;
        Shuffle {
            n,
            mask,
            scramble: crate::storage::data::block_key(seed, 1) & mask,
            // Odd, as a full period needs.
            increment: (seed << 1) | 1,
            state: seed & mask,
        }
    }

    fn next(&mut self) -> u64 {
        loop {
            self.state = Self::MULTIPLIER
                .wrapping_mul(self.state)
                .wrapping_add(self.increment)
                & self.mask;
            let value = self.scatter(self.state);
            if value < self.n {
                return value;
            }
        }
    }

    /// A bijection of `0..=mask` that mixes high bits into low ones: the generator's low
    /// bits repeat with short periods (the lowest alternates), which would make
    /// neighbouring requests land on blocks of a fixed stride. XOR with a constant,
    /// xor-shifts right and odd multipliers modulo a power of two each map the range
    /// onto itself, one to one.
    fn scatter(&self, state: u64) -> u64 {
        let shift = self.mask.count_ones().div_ceil(2).max(1);
        let mut x = state ^ self.scramble;
        x ^= x >> shift;
        x = x.wrapping_mul(0xbf58_476d_1ce4_e5b9) & self.mask;
        x ^= x >> shift;
        x = x.wrapping_mul(0x94d0_49bb_1331_11eb) & self.mask;
        x ^ (x >> shift)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn test(order: Order, threads: u32) -> BlockTest {
        BlockTest {
            order,
            block_bytes: 4096,
            queue_depth: 1,
            threads,
        }
    }

    #[test]
    fn a_random_pass_reads_every_block_once() {
        for blocks in [1u64, 2, 3, 1000, 4096, 5000] {
            let mut offsets = Offsets::new(test(Order::Random, 1), blocks * 4096, 0, 42);
            let mut seen: Vec<u64> = (0..blocks).map(|_| offsets.next() / 4096).collect();
            seen.sort_unstable();
            assert_eq!(seen, (0..blocks).collect::<Vec<_>>(), "{blocks} blocks");
        }
    }

    #[test]
    fn neighbouring_random_requests_keep_no_fixed_stride() {
        // 2^18 blocks: the generator's own low bits would alternate and cycle.
        let mut offsets = Offsets::new(test(Order::Random, 1), 1 << 30, 0, 42);
        let blocks: Vec<u64> = (0..1 << 16).map(|_| offsets.next() / 4096).collect();
        let pairs = blocks.len() - 1;
        let parity_flips = blocks.windows(2).filter(|w| (w[0] ^ w[1]) & 1 == 1).count();
        assert!(
            (0.45..0.55).contains(&(parity_flips as f64 / pairs as f64)),
            "{parity_flips} of {pairs} neighbours differ in parity"
        );
        // Blocks 16 MiB apart in the file (bits 0..12 of the index) repeat no cycle.
        let low = |b: u64| b & 4095;
        let repeats = blocks
            .windows(4097)
            .filter(|w| low(w[0]) == low(w[4096]))
            .count();
        assert!(
            repeats < pairs / 100,
            "{repeats} low-bit repeats at 4096 apart"
        );
    }

    #[test]
    fn threads_shuffle_differently_and_sequential_threads_start_apart() {
        let first = |thread| {
            let mut o = Offsets::new(test(Order::Random, 2), 1 << 30, thread, 7);
            (0..8).map(|_| o.next()).collect::<Vec<_>>()
        };
        assert_ne!(first(0), first(1));
        let mut second = Offsets::new(test(Order::Sequential, 2), 1 << 20, 1, 7);
        assert_eq!(second.next(), 512 << 10);
        assert_eq!(second.next(), (512 << 10) + 4096);
        // And it wraps at the end of the file.
        let mut last = Offsets::new(test(Order::Sequential, 1), 8192, 0, 7);
        assert_eq!([last.next(), last.next(), last.next()], [0, 4096, 0]);
    }

    #[test]
    fn a_mix_writes_its_share_of_requests() {
        let mut chooser = Chooser::new(Rw::Mix(70), 12345);
        let writes = (0..100_000).filter(|_| chooser.writes()).count();
        assert!(
            (29_000..31_000).contains(&writes),
            "{writes} writes of 100000"
        );
        let mut reads = Chooser::new(Rw::Read, 1);
        assert!((0..100).all(|_| !reads.writes()));
        let mut all = Chooser::new(Rw::Write, 1);
        assert!((0..100).all(|_| all.writes()));
    }
}
