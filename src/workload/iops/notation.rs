//! One block I/O test in the notation storage benchmarks print (CrystalDiskMark,
//! KDiskMark): `SEQ1M-Q8T1` is sequential 1 MiB blocks, 8 in flight per thread, one
//! thread; `RND4K-Q32T16` is random 4 KiB blocks, 32 in flight per thread, 16 threads.
//! K and M are binary (KiB, MiB), as those tools mean them.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// The most requests in flight per thread.
pub const MAX_DEPTH: u32 = 4096;
/// The most threads of one test.
pub const MAX_THREADS: u32 = 1024;
/// The largest block.
pub const MAX_BLOCK: u64 = 64 << 20;

/// Where each block of a test is: one after another, or anywhere in the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Order {
    /// One block after another, as a file is streamed.
    Sequential,
    /// Uniformly over the file, each block once per pass.
    Random,
}

/// A test: its order, block size, requests in flight per thread and threads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockTest {
    /// Sequential or random.
    pub order: Order,
    /// Bytes per request.
    pub block_bytes: u64,
    /// Requests in flight per thread.
    pub queue_depth: u32,
    /// Threads, each with its own requests in flight.
    pub threads: u32,
}

impl fmt::Display for BlockTest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let order = match self.order {
            Order::Sequential => "SEQ",
            Order::Random => "RND",
        };
        let block = match self.block_bytes {
            b if b.is_multiple_of(1 << 20) => format!("{}M", b >> 20),
            b if b.is_multiple_of(1 << 10) => format!("{}K", b >> 10),
            b => b.to_string(),
        };
        write!(f, "{order}{block}-Q{}T{}", self.queue_depth, self.threads)
    }
}

impl FromStr for BlockTest {
    type Err = String;

    /// Parses `SEQ1M-Q8T1`, case-insensitively; says what is wrong in words.
    fn from_str(text: &str) -> Result<BlockTest, String> {
        let upper = text.trim().to_ascii_uppercase();
        let shape = "a test is ORDER BLOCK-Q DEPTH T THREADS, such as SEQ1M-Q8T1 or RND4K-Q32T1";
        let (head, tail) = upper
            .split_once('-')
            .ok_or_else(|| format!("no '-' between the block and the queue: {shape}"))?;
        let (order, block) = if let Some(block) = head.strip_prefix("SEQ") {
            (Order::Sequential, block)
        } else if let Some(block) = head.strip_prefix("RND") {
            (Order::Random, block)
        } else {
            return Err(format!("it must start with SEQ or RND: {shape}"));
        };
        let block_bytes = block_size(block)?;
        let rest = tail
            .strip_prefix('Q')
            .ok_or_else(|| format!("the queue depth must follow '-' as Q<number>: {shape}"))?;
        let (depth, threads) = rest.split_once('T').ok_or_else(|| {
            format!("the thread count must follow the depth as T<number>: {shape}")
        })?;
        let queue_depth = count(depth, "queue depth", MAX_DEPTH)?;
        let threads = count(threads, "thread count", MAX_THREADS)?;
        Ok(BlockTest {
            order,
            block_bytes,
            queue_depth,
            threads,
        })
    }
}

/// A block size such as `4K`, `128K`, `1M`: a multiple of 512 bytes, for direct I/O.
fn block_size(text: &str) -> Result<u64, String> {
    let (digits, unit) = match text.char_indices().find(|(_, c)| !c.is_ascii_digit()) {
        Some((at, _)) => text.split_at(at),
        None => (text, ""),
    };
    let scale = match unit {
        "K" => 1u64 << 10,
        "M" => 1 << 20,
        "" => 1,
        _ => {
            return Err(format!(
                "the block size '{text}' is not a size: give a number and K or M (4K, 128K, 1M)"
            ));
        }
    };
    let number: u64 = digits
        .parse()
        .map_err(|_| format!("the block size '{text}' is not a size (4K, 128K, 1M)"))?;
    let bytes = number.saturating_mul(scale);
    if bytes == 0 || !bytes.is_multiple_of(512) || bytes > MAX_BLOCK {
        return Err(format!(
            "the block size '{text}' must be a multiple of 512 bytes from 512 to 64M, as direct I/O needs"
        ));
    }
    Ok(bytes)
}

/// A queue depth or thread count from 1 to `most`.
fn count(text: &str, what: &str, most: u32) -> Result<u32, String> {
    let value: u32 = text
        .parse()
        .map_err(|_| format!("the {what} '{text}' is not a whole number"))?;
    if value == 0 || value > most {
        return Err(format!("the {what} must be from 1 to {most}, not {value}"));
    }
    Ok(value)
}

impl Serialize for BlockTest {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for BlockTest {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<BlockTest, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// What a test's requests do: read, write, or a mix with a share of reads (as fio's
/// `rwmixread`), each request's direction drawn at random.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rw {
    /// Reads only.
    Read,
    /// Writes only.
    Write,
    /// Reads and writes, this percentage of them reads (1 to 99).
    Mix(u8),
}

impl Rw {
    /// The share of requests that read, in percent.
    pub fn read_percent(self) -> u8 {
        match self {
            Rw::Read => 100,
            Rw::Write => 0,
            Rw::Mix(reads) => reads,
        }
    }

    /// Whether it reads at all, and whether it writes at all.
    pub fn ops(self) -> [bool; 2] {
        [self.read_percent() > 0, self.read_percent() < 100]
    }
}

impl fmt::Display for Rw {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Rw::Read => f.write_str("read"),
            Rw::Write => f.write_str("write"),
            Rw::Mix(reads) => write!(f, "mix:{reads}"),
        }
    }
}

impl FromStr for Rw {
    type Err = String;

    /// Parses `read`, `write` or `mix:70` (70% reads); says what is wrong in words.
    fn from_str(text: &str) -> Result<Rw, String> {
        let text = text.trim().to_ascii_lowercase();
        match text.as_str() {
            "read" => return Ok(Rw::Read),
            "write" => return Ok(Rw::Write),
            _ => {}
        }
        let shape =
            "give read, write or mix:PERCENT, the share of reads (mix:70 is 70% reads, 30% writes)";
        let reads = text
            .strip_prefix("mix:")
            .ok_or_else(|| format!("'{text}' is not a direction: {shape}"))?;
        match reads.parse::<u8>() {
            Ok(reads) if (1..=99).contains(&reads) => Ok(Rw::Mix(reads)),
            _ => Err(format!(
                "the share of reads in '{text}' must be a whole number from 1 to 99: {shape}"
            )),
        }
    }
}

impl Serialize for Rw {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Rw {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Rw, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_notation_people_know_parses_and_prints_back() {
        for text in [
            "SEQ1M-Q8T1",
            "SEQ1M-Q1T1",
            "RND4K-Q32T1",
            "RND4K-Q1T1",
            "RND4K-Q32T16",
            "SEQ128K-Q32T1",
        ] {
            let test: BlockTest = text.parse().unwrap();
            assert_eq!(test.to_string(), text);
        }
        let test: BlockTest = "rnd4k-q32t16".parse().unwrap();
        assert_eq!(
            test,
            BlockTest {
                order: Order::Random,
                block_bytes: 4096,
                queue_depth: 32,
                threads: 16
            }
        );
    }

    #[test]
    fn what_is_wrong_is_said_in_words() {
        let error = |text: &str| text.parse::<BlockTest>().unwrap_err();
        assert!(
            error("RND4K-Q0T1").contains("queue depth must be from 1"),
            "{}",
            error("RND4K-Q0T1")
        );
        assert!(error("RND4Q-Q1T1").contains("block size '4Q'"));
        assert!(error("RND4K-Q1T0").contains("thread count must be from 1"));
        assert!(error("XYZ4K-Q1T1").contains("SEQ or RND"));
        assert!(error("RND4K").contains("no '-'"));
        assert!(error("RND100-Q1T1").contains("multiple of 512"));
        assert!(error("RND4K-Q1").contains("thread count must follow"));
    }

    #[test]
    fn directions_parse_with_the_share_of_reads() {
        assert_eq!("read".parse::<Rw>(), Ok(Rw::Read));
        assert_eq!("WRITE".parse::<Rw>(), Ok(Rw::Write));
        assert_eq!("mix:70".parse::<Rw>(), Ok(Rw::Mix(70)));
        assert_eq!(Rw::Mix(70).to_string(), "mix:70");
        assert_eq!(Rw::Mix(70).ops(), [true, true]);
        assert_eq!(Rw::Write.ops(), [false, true]);
        for bad in ["mix:0", "mix:100", "mix:abc", "mix", "randrw"] {
            assert!(bad.parse::<Rw>().is_err(), "{bad}");
        }
        assert!(
            "mix:100"
                .parse::<Rw>()
                .unwrap_err()
                .contains("from 1 to 99")
        );
    }
}
