//! The one shape every codec's encoder takes, so a task drives zstd, xz and the lz4
//! pool alike: a writer that, once finished, flushes its last frame and hands its
//! own writer back.

use std::io::{self, Write};

/// A streaming encoder that hands its writer back when finished.
pub trait Encoder<W>: Write {
    /// Flushes the last frame and returns the writer.
    fn finish(self: Box<Self>) -> io::Result<W>;
}

impl<W: Write> Encoder<W> for zstd::stream::Encoder<'static, W> {
    fn finish(self: Box<Self>) -> io::Result<W> {
        zstd::stream::Encoder::finish(*self)
    }
}

impl<W: Write> Encoder<W> for liblzma::write::XzEncoder<W> {
    fn finish(self: Box<Self>) -> io::Result<W> {
        liblzma::write::XzEncoder::finish(*self)
    }
}
