//! The sync engine's write data, made ahead of the writer: a ring of random pools, each
//! stamped for the blocks it will carry before the writer reaches it, so the timed
//! span holds write calls and nothing else (DESIGN.md, "Write").
//!
//! The pools a file needs first are stamped before its clock starts; a file longer
//! than the ring gets a helper thread for the span, which stamps each pool the writer
//! gives back. The writer gives pools back half a ring at a time and the helper sleeps
//! until then, so a hand-over costs one wake-up per half ring (a 1 GiB file in 1 MiB
//! blocks: 256 wake-ups, against 1024 blocks stamped on the writer's thread before).
//! A stamp writes 8 bytes of every 512 (one cache line in eight), so the writer's copy
//! finds most of a pool where it was, not in the helper's cache.
//!
//! Every sector written stays unique, as with [`Pattern`](crate::storage::data::Pattern): two
//! sectors at one place of one pool carry different block numbers in their stamps, and
//! sectors at different places differ in their random bytes.

use std::sync::mpsc::{Receiver, Sender, channel};

use crate::storage::buffer::AlignedBuf;
use crate::storage::data::{MIN_POOL, block_key, fill_random, mix, stamp};

/// Most memory the ring's pools take, unless two pools need more.
const RING_BYTES: usize = 16 << 20;
/// Fewest and most pools in the ring.
const MIN_POOLS: usize = 2;
const MAX_POOLS: usize = 8;

/// A pool with the block numbers its windows are stamped for.
struct Stamped {
    pool: AlignedBuf,
    /// Block number of its first window; window `w` carries block `first_block + w`.
    first_block: u64,
}

/// Write data for blocks of up to `block_size` bytes, made ahead of the writer.
pub struct Ahead {
    pools: Vec<AlignedBuf>,
    block_size: usize,
    seed: u64,
    /// The first block number no file has used.
    next_block: u64,
}

impl Ahead {
    /// Makes the ring's random pools; call before timing starts.
    pub fn new(block_size: usize, seed: u64) -> std::io::Result<Ahead> {
        let pool_bytes = block_size.max(MIN_POOL).next_multiple_of(block_size);
        let count = (RING_BYTES / pool_bytes).clamp(MIN_POOLS, MAX_POOLS);
        let pools = (0..count)
            .map(|index| {
                let mut pool = AlignedBuf::new(pool_bytes)?;
                fill_random(pool.as_mut_slice(), seed ^ mix(index as u64 + 1));
                Ok(pool)
            })
            .collect::<std::io::Result<_>>()?;
        Ok(Ahead {
            pools,
            block_size,
            seed,
            next_block: 0,
        })
    }

    /// Blocks one pool carries.
    fn windows(&self) -> usize {
        self.pools[0].len() / self.block_size
    }

    /// Runs `write` with the data of up to `blocks` blocks, handed out in order by
    /// [`Feed::next`]. The pools it needs first are stamped before `write` is called;
    /// the rest, if any, by a helper thread while it runs. Fails only when that thread
    /// cannot be started.
    pub fn run<T>(
        &mut self,
        blocks: u64,
        write: impl FnOnce(&mut Feed) -> T,
    ) -> std::io::Result<T> {
        let windows = self.windows();
        let needed = blocks.div_ceil(windows as u64);
        let stamper = Stamper {
            seed: self.seed,
            first: self.next_block,
            windows,
        };
        // Block numbers of pools not used are skipped, never handed out twice.
        self.next_block += needed * windows as u64;
        let count = self.pools.len();
        let (ready_tx, ready) = channel();
        let mut idle = self.stamp_first(needed, stamper, &ready_tx);
        let stamped_first = needed.min(count as u64);
        let outcome = std::thread::scope(|scope| {
            let (back, returned) = channel::<Vec<Stamped>>();
            let helper = if needed > stamped_first {
                let todo = stamped_first..needed;
                match start_helper(scope, returned, ready_tx.clone(), todo, stamper) {
                    Ok(helper) => Some(helper),
                    Err(e) => {
                        idle.extend(ready.try_iter().map(|s| s.pool));
                        return Err(e);
                    }
                }
            } else {
                None
            };
            let mut feed = Feed {
                ready,
                back: helper.is_some().then_some(back),
                current: None,
                window: 0,
                windows,
                left: needed,
                spent: Vec::new(),
                batch: (count / 2).max(1),
                block_size: self.block_size,
                waited: std::time::Duration::ZERO,
            };
            let result = write(&mut feed);
            Ok((result, feed.gather(helper)))
        });
        match outcome {
            Ok((result, pools)) => {
                self.pools = pools;
                self.pools.extend(idle);
                Ok(result)
            }
            Err(e) => {
                self.pools = idle;
                Err(e)
            }
        }
    }

    /// Stamps the first `needed` pools of the ring (all of it, at most) and queues them
    /// on `ready`; returns the pools the file does not need.
    fn stamp_first(
        &mut self,
        needed: u64,
        stamper: Stamper,
        ready: &Sender<Stamped>,
    ) -> Vec<AlignedBuf> {
        let mut idle = Vec::new();
        for (nth, pool) in std::mem::take(&mut self.pools).into_iter().enumerate() {
            if (nth as u64) < needed {
                let _ = ready.send(stamper.stamp(pool, nth as u64));
            } else {
                idle.push(pool);
            }
        }
        idle
    }
}

/// How one file's pools are stamped: the `nth` pool carries the blocks from `first`
/// on, `windows` to a pool.
#[derive(Clone, Copy)]
struct Stamper {
    seed: u64,
    /// The file's first block number.
    first: u64,
    /// Blocks one pool carries.
    windows: usize,
}

impl Stamper {
    /// `pool`, stamped as the file's `nth` pool.
    fn stamp(self, pool: AlignedBuf, nth: u64) -> Stamped {
        let mut stamped = Stamped {
            pool,
            first_block: self.first + nth * self.windows as u64,
        };
        stamp_windows(&mut stamped, self.windows, self.seed);
        stamped
    }
}

/// Starts the helper that stamps the pools of `todo` as the writer gives pools back on
/// `returned`, and sends them on to `ready`.
fn start_helper<'scope>(
    scope: &'scope std::thread::Scope<'scope, '_>,
    returned: Receiver<Vec<Stamped>>,
    ready: Sender<Stamped>,
    todo: std::ops::Range<u64>,
    stamper: Stamper,
) -> std::io::Result<std::thread::ScopedJoinHandle<'scope, Vec<AlignedBuf>>> {
    std::thread::Builder::new()
        .name("disk-stamp".into())
        .spawn_scoped(scope, move || {
            refill(returned, ready, todo, move |pool, nth| {
                stamper.stamp(pool, nth)
            })
        })
}

/// The helper's loop: stamps each pool given back for the next pool number of `todo`
/// and sends it on; ends when the writer closes the way back. Returns the pools it
/// kept once every needed pool was made.
fn refill(
    returned: Receiver<Vec<Stamped>>,
    ready: Sender<Stamped>,
    mut todo: std::ops::Range<u64>,
    stamp_pool: impl Fn(AlignedBuf, u64) -> Stamped,
) -> Vec<AlignedBuf> {
    let mut kept = Vec::new();
    while let Ok(batch) = returned.recv() {
        for spent in batch {
            match todo.next() {
                Some(nth) => {
                    if let Err(unsent) = ready.send(stamp_pool(spent.pool, nth)) {
                        kept.push(unsent.0.pool);
                    }
                }
                None => kept.push(spent.pool),
            }
        }
    }
    kept
}

/// Stamps every window of `stamped.pool` with its block's key.
fn stamp_windows(stamped: &mut Stamped, windows: usize, seed: u64) {
    let block_size = stamped.pool.len() / windows;
    for (w, window) in stamped
        .pool
        .as_mut_slice()
        .chunks_mut(block_size)
        .enumerate()
    {
        stamp(window, block_key(seed, stamped.first_block + w as u64));
    }
}

/// The writer's side of [`Ahead::run`]: stamped blocks, in order.
pub struct Feed {
    ready: Receiver<Stamped>,
    back: Option<Sender<Vec<Stamped>>>,
    current: Option<Stamped>,
    /// The next window of `current`.
    window: usize,
    windows: usize,
    /// Pools not yet handed to the writer.
    left: u64,
    /// Pools written, not yet given back.
    spent: Vec<Stamped>,
    /// Pools given back at once.
    batch: usize,
    block_size: usize,
    /// How long the writer waited for a pool to be stamped.
    waited: std::time::Duration,
}

impl Feed {
    /// The data of the next block: `len` bytes (at most the block size), unchanged
    /// until the next call. `None` once the pools of the blocks asked for are used up.
    pub fn next(&mut self, len: usize) -> Option<&[u8]> {
        assert!(
            len <= self.block_size,
            "a block larger than the data's block size"
        );
        if self.current.is_none() || self.window == self.windows {
            if let Some(done) = self.current.take() {
                self.spent.push(done);
                if self.spent.len() >= self.batch {
                    self.give_back();
                }
            }
            if self.left == 0 {
                return None;
            }
            self.left -= 1;
            let next = match self.ready.try_recv() {
                Ok(next) => next,
                Err(_) => {
                    // The helper may be waiting for these: never sleep holding them.
                    self.give_back();
                    let waiting = std::time::Instant::now();
                    let next = self.ready.recv().ok();
                    self.waited += waiting.elapsed();
                    next?
                }
            };
            self.current = Some(next);
            self.window = 0;
        }
        let start = self.window * self.block_size;
        self.window += 1;
        let pool = &self.current.as_ref()?.pool;
        Some(&pool.as_slice()[start..start + len])
    }

    /// How long the writer has waited for its data so far.
    pub fn waited(&self) -> std::time::Duration {
        self.waited
    }

    /// Every pool, once the writer is done: those it holds, those the `helper` kept,
    /// and those stamped but never taken.
    fn gather(
        &mut self,
        helper: Option<std::thread::ScopedJoinHandle<'_, Vec<AlignedBuf>>>,
    ) -> Vec<AlignedBuf> {
        // The writer is done: close the way back so the helper ends, then gather
        // every pool, wherever it is.
        let mut pools: Vec<AlignedBuf> = self.spent.drain(..).map(|s| s.pool).collect();
        pools.extend(self.current.take().map(|s| s.pool));
        self.back = None;
        if let Some(helper) = helper {
            pools.extend(helper.join().expect("the stamping helper does not panic"));
        }
        pools.extend(self.ready.try_iter().map(|s| s.pool));
        pools
    }

    fn give_back(&mut self) {
        if self.spent.is_empty() {
            return;
        }
        if let Some(back) = &self.back {
            // A helper that has ended keeps nothing: the pools come back with `spent`.
            if let Err(unsent) = back.send(std::mem::take(&mut self.spent)) {
                self.spent = unsent.0;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    const SECTOR: usize = 512;

    /// What the writer is given for files of `files` blocks each, in order.
    fn written(block_size: usize, files: &[u64]) -> Vec<u8> {
        let mut ahead = Ahead::new(block_size, 42).unwrap();
        let pools = ahead.pools.len();
        let mut out = Vec::new();
        for &blocks in files {
            ahead
                .run(blocks, |feed| {
                    for _ in 0..blocks {
                        out.extend_from_slice(feed.next(block_size).unwrap());
                    }
                })
                .unwrap();
            assert_eq!(ahead.pools.len(), pools, "every pool came back");
        }
        out
    }

    #[test]
    fn every_sector_is_unique_within_and_across_files() {
        // Files shorter than the ring (no helper), and longer (the helper refills it).
        for (block_size, files) in [
            (1 << 20, vec![3, 40, 1]),
            (4096, vec![5000, 7, 300]),
            (4 << 20, vec![11]),
            (1000, vec![4000]),
        ] {
            let data = written(block_size, &files);
            let mut seen = HashSet::new();
            for sector in data.chunks_exact(SECTOR) {
                assert!(
                    seen.insert(sector),
                    "a sector repeated with blocks of {block_size}"
                );
            }
        }
    }

    #[test]
    fn a_writer_that_stops_early_gets_every_pool_back() {
        let mut ahead = Ahead::new(1 << 20, 7).unwrap();
        let pools = ahead.pools.len();
        ahead
            .run(100, |feed| {
                for _ in 0..20 {
                    feed.next(1 << 20).unwrap();
                }
            })
            .unwrap();
        assert_eq!(ahead.pools.len(), pools);
        // The next file's blocks are numbered after every block the first could use.
        assert_eq!(ahead.next_block, 100);
    }

    #[test]
    fn tails_are_exact_and_the_end_is_none() {
        let mut ahead = Ahead::new(8192, 3).unwrap();
        ahead
            .run(2, |feed| {
                assert_eq!(feed.next(100).unwrap().len(), 100);
                assert_eq!(feed.next(8192).unwrap().len(), 8192);
            })
            .unwrap();
        let mut ahead = Ahead::new(1 << 20, 3).unwrap();
        ahead
            .run(1, |feed| {
                assert_eq!(feed.next(1).unwrap().len(), 1);
                assert!(
                    feed.next(1 << 20).is_none(),
                    "one block asked for, one pool made"
                );
            })
            .unwrap();
    }
}
