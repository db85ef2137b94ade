//! The bytes written: fresh pseudo-random data for every block, so compressing or
//! deduplicating filesystems and SSDs cannot make a write look faster than it is.
//!
//! Generating a block costs about 50 µs per MiB on one core, which would sit inside
//! the timed span of a pwrite loop and slow it by several percent against fio (whose
//! buffers are filled once and only scrambled). So a filler thread makes blocks ahead
//! into a ring of aligned buffers: the writer takes a full buffer, writes it and hands
//! it back, and generation overlaps the I/O instead of adding to it.

use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::thread::JoinHandle;

use super::buffer::AlignedBuf;

/// A ring of aligned buffers kept full of fresh random data by a filler thread.
pub struct DataStream {
    full: Receiver<AlignedBuf>,
    empty: Option<SyncSender<AlignedBuf>>,
    filler: Option<JoinHandle<()>>,
}

impl DataStream {
    /// Fills `buffers` buffers of `block_size` bytes, then starts the filler thread
    /// that refills each one handed back. Returns with every buffer full, so no timed
    /// write waits for its first blocks.
    pub fn start(buffers: usize, block_size: usize, seed: u64) -> DataStream {
        let buffers = buffers.max(2);
        // Capacity for every buffer: the filler never blocks on sending.
        let (full_tx, full) = sync_channel(buffers);
        let (empty, empty_rx) = sync_channel::<AlignedBuf>(buffers);
        let mut block = 0u64;
        for _ in 0..buffers {
            let mut buf = AlignedBuf::new(block_size);
            fill_random(buf.as_mut_slice(), seed ^ mix(block));
            block += 1;
            full_tx
                .send(buf)
                .expect("the queue has room for every buffer");
        }
        let filler = std::thread::Builder::new()
            .name("ratelab-data".into())
            .spawn(move || {
                while let Ok(mut buf) = empty_rx.recv() {
                    fill_random(buf.as_mut_slice(), seed ^ mix(block));
                    block += 1;
                    if full_tx.send(buf).is_err() {
                        break;
                    }
                }
            })
            .expect("spawn the data filler thread");
        DataStream {
            full,
            empty: Some(empty),
            filler: Some(filler),
        }
    }

    /// The next buffer of fresh data; waits for the filler when the writer is ahead.
    pub fn next(&self) -> AlignedBuf {
        self.full.recv().expect("the data filler thread stopped")
    }

    /// Hands a written buffer back for refilling.
    pub fn recycle(&self, buf: AlignedBuf) {
        if let Some(empty) = &self.empty {
            let _ = empty.send(buf);
        }
    }
}

impl Drop for DataStream {
    fn drop(&mut self) {
        // Closing the empty queue ends the filler's loop.
        self.empty.take();
        if let Some(filler) = self.filler.take() {
            let _ = filler.join();
        }
    }
}

/// Fills `bytes` with xorshift128+ output from eight independent lanes, which the
/// compiler turns into vector code (about 20 GB/s on one core with SSE2 alone).
fn fill_random(bytes: &mut [u8], seed: u64) {
    const LANES: usize = 8;
    let mut s0 = [0u64; LANES];
    let mut s1 = [0u64; LANES];
    for lane in 0..LANES {
        // xorshift states must not be zero.
        s0[lane] = mix(seed ^ lane as u64) | 1;
        s1[lane] = mix(seed.wrapping_add(0x5851_f42d_4c95_7f2d ^ lane as u64)) | 1;
    }
    let mut chunks = bytes.chunks_exact_mut(LANES * 8);
    for chunk in &mut chunks {
        for lane in 0..LANES {
            let word = step(&mut s0[lane], &mut s1[lane]);
            chunk[lane * 8..lane * 8 + 8].copy_from_slice(&word.to_le_bytes());
        }
    }
    let rest = chunks.into_remainder();
    for (index, byte) in rest.iter_mut().enumerate() {
        let lane = index / 8 % LANES;
        *byte = step(&mut s0[lane], &mut s1[lane]) as u8;
    }
}

/// One xorshift128+ step (Vigna, "Further scramblings of Marsaglia's xorshift generators").
#[inline(always)]
fn step(s0: &mut u64, s1: &mut u64) -> u64 {
    let mut x = *s0;
    let y = *s1;
    *s0 = y;
    x ^= x << 23;
    x ^= x >> 17;
    x ^= y ^ (y >> 26);
    *s1 = x;
    x.wrapping_add(y)
}

/// The splitmix64 finaliser: a cheap, well-mixed 64-bit hash for seeds.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn blocks_are_fresh_and_sectors_unique() {
        let stream = DataStream::start(3, 1 << 16, 7);
        let mut seen = HashSet::new();
        for _ in 0..20 {
            let buf = stream.next();
            for sector in buf.as_slice().chunks(4096) {
                assert!(seen.insert(sector.to_vec()), "a 4 KiB sector repeated");
            }
            stream.recycle(buf);
        }
    }

    #[test]
    fn data_does_not_compress() {
        let stream = DataStream::start(4, 1 << 20, 1);
        let mut data = Vec::new();
        for _ in 0..8 {
            let buf = stream.next();
            data.extend_from_slice(buf.as_slice());
            stream.recycle(buf);
        }
        let compressed = zstd::bulk::compress(&data, 19).unwrap();
        assert!(
            compressed.len() as f64 >= 0.999 * data.len() as f64,
            "{} bytes compressed to {}",
            data.len(),
            compressed.len()
        );
    }

    #[test]
    fn odd_lengths_are_filled() {
        let mut bytes = vec![0u8; 1001];
        fill_random(&mut bytes, 5);
        assert!(bytes[990..].iter().any(|&b| b != 0));
    }
}
