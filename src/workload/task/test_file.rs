//! The test file of `--make-file`: what people compress is neither random nor endlessly
//! repetitive, so it mixes blocks of text-like words and numbers (which zstd -3 shrinks
//! about threefold) with blocks of random bytes (which no codec shrinks), one in four:
//! zstd -3 makes the whole about half its size.
//! The ratio the codec reaches is measured and shown, never assumed.

use std::io::Write;
use std::path::Path;

use crate::control::Cancel;
use crate::error::Error;
use crate::storage::data::{fill_random, mix};

/// Bytes of one block of a kind.
const BLOCK: usize = 64 << 10;

/// Words of the text-like blocks; frequent words come first and are drawn more often.
const WORDS: &[&str] = &[
    "the",
    "of",
    "and",
    "to",
    "in",
    "a",
    "is",
    "that",
    "for",
    "it",
    "as",
    "was",
    "with",
    "be",
    "by",
    "on",
    "not",
    "he",
    "this",
    "are",
    "or",
    "his",
    "from",
    "at",
    "which",
    "but",
    "have",
    "an",
    "had",
    "they",
    "you",
    "were",
    "their",
    "one",
    "all",
    "we",
    "can",
    "her",
    "has",
    "there",
    "been",
    "if",
    "more",
    "when",
    "will",
    "would",
    "who",
    "so",
    "no",
    "disk",
    "rate",
    "file",
    "read",
    "write",
    "block",
    "thread",
    "cache",
    "link",
    "queue",
    "latency",
    "throughput",
    "storage",
    "network",
    "kernel",
    "memory",
    "compress",
    "measure",
    "median",
    "series",
    "sample",
    "buffer",
    "device",
    "driver",
    "request",
    "machine",
    "profile",
    "result",
    "report",
    "limit",
    "physics",
    "sector",
    "stream",
    "packet",
    "window",
    "socket",
    "server",
    "client",
    "frequency",
    "residency",
    "power",
];

/// Writes `size` bytes of the mixed test data to `file` (synced), seeded by `seed`.
pub fn make(
    file: &mut std::fs::File,
    path: &Path,
    size: u64,
    seed: u64,
    cancel: &Cancel,
) -> Result<(), Error> {
    let mut out = std::io::BufWriter::with_capacity(1 << 20, &mut *file);
    let mut block = Vec::with_capacity(BLOCK + 64);
    let mut written = 0u64;
    let mut index = 0u64;
    while written < size {
        if cancel.is_set() {
            return Err(Error::Interrupted);
        }
        block.clear();
        let key = mix(seed ^ index.wrapping_mul(0x9e37_79b9_7f4a_7c15));
        if key.is_multiple_of(4) {
            block.resize(BLOCK, 0);
            fill_random(&mut block, key);
        } else {
            text(&mut block, key);
        }
        let take = (size - written).min(BLOCK as u64) as usize;
        out.write_all(&block[..take])
            .map_err(|e| Error::io("write", path, e))?;
        written += take as u64;
        index += 1;
    }
    out.flush().map_err(|e| Error::io("write", path, e))?;
    drop(out);
    file.sync_all().map_err(|e| Error::io("sync", path, e))
}

/// Fills `block` with a block of text-like lines: skewed words, with numbers now and then.
fn text(block: &mut Vec<u8>, seed: u64) {
    let mut state = seed;
    let mut on_line = 0;
    while block.len() < BLOCK {
        state = mix(state.wrapping_add(0x9e37_79b9_7f4a_7c15));
        // The product of two uniform draws favours small indices: a few words are common.
        let pick = ((state & 0xff) * ((state >> 8) & 0xff)) as usize * WORDS.len() / (256 * 256);
        if (state >> 16).is_multiple_of(16) {
            let _ = write!(block, "{}", (state >> 24) % 100_000);
        } else {
            block.extend_from_slice(WORDS[pick].as_bytes());
        }
        on_line += 1;
        if on_line == 12 || (state >> 40).is_multiple_of(29) {
            block.extend_from_slice(b".\n");
            on_line = 0;
        } else {
            block.push(b' ');
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn made_file_has_the_size_asked_and_compresses_about_twofold() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("made");
        let mut file = std::fs::File::create(&path).unwrap();
        make(&mut file, &path, 8_000_001, 7, &Cancel::new()).unwrap();
        let data = std::fs::read(&path).unwrap();
        assert_eq!(data.len(), 8_000_001);
        let compressed = zstd::bulk::compress(&data, 3).unwrap();
        let ratio = data.len() as f64 / compressed.len() as f64;
        assert!((1.6..2.6).contains(&ratio), "ratio {ratio:.2}");
        // The same seed makes the same file; another seed another.
        let again = dir.path().join("again");
        let mut file = std::fs::File::create(&again).unwrap();
        make(&mut file, &again, 1 << 20, 7, &Cancel::new()).unwrap();
        assert_eq!(std::fs::read(&again).unwrap(), data[..1 << 20]);
    }
}
