//! The storage core every storage kind measures with: aligned buffers, work folders
//! and their cleanup, unique data, cache residency and eviction at every layer below a
//! target. It sits below the workloads (disk, task, image, readdir) and imports none of
//! them; a new storage kind builds on these and never on another kind's folder.

pub mod align;
pub mod buffer;
pub mod cache;
pub mod data;
pub mod engine;
pub mod item;
pub mod layers;
pub mod rates;
pub mod read;
pub mod request;
pub mod ring;
pub mod workdir;

use std::path::Path;

use crate::error::Error;

/// The error for a file that ends before the bytes expected of it.
pub fn short_file(op: &'static str, path: &Path, at: u64) -> Error {
    Error::io(
        op,
        path,
        std::io::Error::new(
            std::io::ErrorKind::UnexpectedEof,
            format!("short {op} at byte {at}"),
        ),
    )
}
