//! The codecs a task can time, each through its own well-kept library: zstd (libzstd's
//! worker threads), xz (liblzma's multi-threaded encoder) and lz4 (liblz4 frames, made
//! in parallel by [`super::frames`] since liblz4 has no threads of its own). Each gives a
//! streaming encoder over any writer and a decoder over any buffered reader, so the
//! in-memory step, the whole task and the round-trip check share one path.

use std::io::{self, BufRead, Read, Write};

use serde::{Deserialize, Serialize};

use super::encoder::Encoder;
use super::frames::{Lz4Frames, ParallelLz4};

/// A compression format and its library.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum Codec {
    /// Zstandard (libzstd).
    Zstd,
    /// LZ4 frames (liblz4).
    Lz4,
    /// xz / LZMA2 (liblzma).
    Xz,
}

impl Codec {
    /// The name as given to `--codec`.
    pub fn as_str(self) -> &'static str {
        match self {
            Codec::Zstd => "zstd",
            Codec::Lz4 => "lz4",
            Codec::Xz => "xz",
        }
    }

    /// The level its command-line tool uses by default.
    pub fn default_level(self) -> i32 {
        match self {
            Codec::Zstd => 3,
            Codec::Lz4 => 1,
            Codec::Xz => 6,
        }
    }

    /// The levels its library takes.
    pub fn levels(self) -> std::ops::RangeInclusive<i32> {
        match self {
            Codec::Zstd => 1..=22,
            Codec::Lz4 => 1..=12,
            Codec::Xz => 0..=9,
        }
    }

    /// An encoder at `level` with `threads` compression threads, writing to `out`.
    /// `size` is the input's length where known, stored in the frame as the tools do.
    pub fn encoder<W: Write + 'static>(
        self,
        out: W,
        level: i32,
        threads: usize,
        size: Option<u64>,
    ) -> io::Result<Box<dyn Encoder<W>>> {
        Ok(match self {
            Codec::Zstd => {
                let mut encoder = zstd::stream::Encoder::new(out, level)?;
                // As `zstd -T n`: n workers compress while the caller reads and writes.
                encoder.multithread(threads as u32)?;
                encoder.set_pledged_src_size(size)?;
                // The CLI checksums every frame by default; so does ratelab, for equal work.
                encoder.include_checksum(true)?;
                Box::new(encoder)
            }
            Codec::Xz => {
                let stream = liblzma::stream::MtStreamBuilder::new()
                    .preset(level as u32)
                    .threads(threads as u32)
                    .check(liblzma::stream::Check::Crc64)
                    .encoder()
                    .map_err(io::Error::other)?;
                Box::new(liblzma::write::XzEncoder::new_stream(out, stream))
            }
            Codec::Lz4 => Box::new(ParallelLz4::new(out, level as u32, threads)),
        })
    }

    /// A decoder of everything `input` holds (concatenated frames or streams included).
    pub fn decoder<'a, R: BufRead + 'a>(self, input: R) -> io::Result<Box<dyn Read + 'a>> {
        Ok(match self {
            Codec::Zstd => Box::new(zstd::stream::read::Decoder::with_buffer(input)?),
            Codec::Xz => Box::new(liblzma::bufread::XzDecoder::new_multi_decoder(input)),
            Codec::Lz4 => Box::new(Lz4Frames::new(input)),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(codec: Codec, threads: usize, data: &[u8]) -> Vec<u8> {
        let mut encoder = codec
            .encoder(
                Vec::new(),
                codec.default_level(),
                threads,
                Some(data.len() as u64),
            )
            .unwrap();
        for piece in data.chunks(100_000) {
            encoder.write_all(piece).unwrap();
        }
        let compressed = encoder.finish().unwrap();
        let mut out = Vec::new();
        codec
            .decoder(&compressed[..])
            .unwrap()
            .read_to_end(&mut out)
            .unwrap();
        assert!(
            data.is_empty() || compressed.len() < data.len() / 2,
            "{codec:?} did not compress"
        );
        out
    }

    #[test]
    fn every_codec_round_trips_at_one_and_more_threads() {
        let data: Vec<u8> = (0..9_000_000u32)
            .map(|i| b"the quick brown fox "[(i % 20) as usize] ^ ((i / 4096) % 3) as u8)
            .collect();
        for codec in [Codec::Zstd, Codec::Lz4, Codec::Xz] {
            for threads in [1, 3] {
                assert!(
                    round_trip(codec, threads, &data) == data,
                    "{codec:?} at {threads} threads"
                );
            }
            assert!(round_trip(codec, 2, b"").is_empty());
        }
    }
}
