//! The bytes written: random, and unique in every 512-byte sector, so neither
//! compressing nor deduplicating filesystems and SSDs can make a write look faster.
//!
//! Each buffer slot holds a pool of random bytes made once, before any timing. A block
//! is the next window of its slot's pool, walked in order, with the first 8 bytes of
//! every sector overwritten by a stamp unique to the block and sector. Storage that
//! compresses does so per record (btrfs 128 KiB extents, ZFS records, an SSD's pages):
//! any run of up to a pool's length (1 MiB or a block, whichever is larger) is random,
//! so no record shrinks; deduplication sees no two equal sectors. A stream compressor
//! with a window beyond the pool could find the repeats, as with fio's default buffers.
//!
//! DESIGN.md asked for fresh PRNG output per block. That was measured: making it on a
//! second thread cost 17% of the page-cache copy of buffered writes (4.5 against
//! 5.4 GB/s), because each block arrives cold from another core and every hand-over
//! wakes a thread. A stamp touches one cache line in eight, so stamps can be made on
//! another thread: the sync engine's data is stamped ahead of its writer (`engine/data_ahead.rs`),
//! which took the copy phase of a 1 GiB buffered write from 0.20-0.22 s to 0.17-0.19 s,
//! as fast as writing unstamped data. [`Pattern`] stamps each block as it is asked
//! for: the uring engine does so as it queues a request, while others are in flight.

use super::buffer::{AlignedBuf, SlotBufs};

/// Bytes between stamps: the smallest sector a device deduplicates.
const SECTOR: usize = 512;
/// Smallest pool per slot: longer than the records of compressing filesystems.
pub const MIN_POOL: usize = 1 << 20;

/// Write data for `slots` buffers in flight at once, each up to `block_size` bytes:
/// one pool per slot, all in one mapping.
pub struct Pattern {
    pools: AlignedBuf,
    pool_bytes: usize,
    next_window: Vec<usize>,
    block_size: usize,
    seed: u64,
    blocks: u64,
}

impl Pattern {
    /// Makes every slot's random pool; call before timing starts.
    pub fn new(slots: usize, block_size: usize, seed: u64) -> std::io::Result<Pattern> {
        let pool_bytes = block_size.max(MIN_POOL).next_multiple_of(block_size);
        Pattern::with_pools(slots, pool_bytes, block_size, seed)
    }

    /// `slots` pools of `pool_bytes` (a multiple of `block_size`), filled at random.
    fn with_pools(
        slots: usize,
        pool_bytes: usize,
        block_size: usize,
        seed: u64,
    ) -> std::io::Result<Pattern> {
        let slots = slots.max(1);
        let mut pools = AlignedBuf::new(slots * pool_bytes)?;
        for (index, pool) in pools.as_mut_slice()[..slots * pool_bytes]
            .chunks_mut(pool_bytes)
            .enumerate()
        {
            fill_random(pool, seed ^ mix(index as u64 + 1));
        }
        Ok(Pattern {
            pools,
            pool_bytes,
            next_window: vec![0; slots],
            block_size,
            seed,
            blocks: 0,
        })
    }

    /// Write data for small blocks in flight (random writes, deep queues): two blocks a
    /// slot, each block unique by its stamps, so the bytes the device is handed stay
    /// as few as fio's one buffer a request. A pool of 1 MiB shared out among the slots
    /// wrote random 4 KiB at depth 32 about 7% slower on a VM's disk (bench/iops-vs-fio).
    /// Each slot keeps the contract of [`block`].
    ///
    /// [`block`]: Pattern::block
    pub fn for_in_flight(slots: usize, block_size: usize, seed: u64) -> std::io::Result<Pattern> {
        let stride = SlotBufs::stride(block_size);
        Pattern::with_pools(slots.max(1), 2 * stride, stride, seed)
    }

    /// Bytes of memory `slots` slots of `block_size`-byte blocks in flight take
    /// ([`for_in_flight`](Pattern::for_in_flight)).
    pub fn in_flight_bytes(slots: usize, block_size: usize) -> u64 {
        (slots.max(1) * 2 * SlotBufs::stride(block_size)) as u64
    }

    /// The data of the next block written through slot `slot`: `len` bytes (at most
    /// the block size). They stay valid and unchanged until this slot is asked again.
    pub fn block(&mut self, slot: usize, len: usize) -> &mut [u8] {
        assert!(
            len <= self.block_size,
            "a block larger than the pattern's block size"
        );
        let key = block_key(self.seed, self.blocks);
        self.blocks += 1;
        let windows = self.pool_bytes / self.block_size;
        let window = self.next_window[slot] % windows;
        self.next_window[slot] += 1;
        let start = slot * self.pool_bytes + window * self.block_size;
        let bytes = &mut self.pools.as_mut_slice()[start..start + len];
        stamp(bytes, key);
        bytes
    }
}

/// The key of block number `block` of a stream seeded with `seed`.
pub fn block_key(seed: u64, block: u64) -> u64 {
    mix(seed ^ block.wrapping_mul(0x9e37_79b9_7f4a_7c15))
}

/// Overwrites the first 8 bytes of every sector of `window` with a stamp made from
/// `key` and the sector's index; hashed, so stamps look as random as the bytes around
/// them.
pub fn stamp(window: &mut [u8], key: u64) {
    for (index, sector) in window.chunks_mut(SECTOR).enumerate() {
        let stamp = mix(key ^ index as u64).to_le_bytes();
        let n = sector.len().min(stamp.len());
        sector[..n].copy_from_slice(&stamp[..n]);
    }
}

/// Fills `bytes` from a splitmix64 stream seeded with `seed`.
pub(crate) fn fill_random(bytes: &mut [u8], seed: u64) {
    let mut state = seed;
    for chunk in bytes.chunks_mut(8) {
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let word = mix(state).to_le_bytes();
        chunk.copy_from_slice(&word[..chunk.len()]);
    }
}

/// The splitmix64 finaliser: a cheap, well-mixed 64-bit hash.
pub(crate) fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    /// What one slot writes for `blocks` blocks of `block_size` bytes, in order.
    fn written(block_size: usize, blocks: usize, slots: usize) -> Vec<u8> {
        let mut pattern = Pattern::new(slots, block_size, 42).unwrap();
        let mut out = Vec::with_capacity(block_size * blocks);
        for index in 0..blocks {
            out.extend_from_slice(pattern.block(index % slots, block_size));
        }
        out
    }

    #[test]
    fn every_sector_is_unique() {
        for (block_size, blocks, slots) in [(1 << 20, 24, 1), (4096, 2048, 1), (1 << 20, 16, 4)] {
            let data = written(block_size, blocks, slots);
            let mut seen = HashSet::new();
            for sector in data.chunks(SECTOR) {
                assert!(
                    seen.insert(sector),
                    "a sector repeated with blocks of {block_size}"
                );
            }
        }
    }

    #[test]
    fn records_do_not_compress() {
        // As a compressing filesystem sees the file: records of 128 KiB, each alone.
        for block_size in [1 << 20, 4096, 64 << 10] {
            let data = written(block_size, (8 << 20) / block_size, 1);
            for record in data.chunks(128 << 10) {
                let compressed = zstd::bulk::compress(record, 19).unwrap();
                assert!(
                    compressed.len() as f64 >= 0.99 * record.len() as f64,
                    "a 128 KiB record of {block_size}-byte blocks compressed to {}",
                    compressed.len()
                );
            }
        }
    }

    #[test]
    fn tails_are_exact() {
        let mut pattern = Pattern::new(2, 8192, 3).unwrap();
        assert_eq!(pattern.block(1, 100).len(), 100);
        assert_eq!(pattern.block(1, 8192).len(), 8192);
        assert_eq!(pattern.block(0, 1).len(), 1);
    }
}
