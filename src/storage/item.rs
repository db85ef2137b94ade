//! One measured file: the item a storage series stores for every write and read.

use serde::{Deserialize, Serialize};

use crate::storage::layers::LayerResidency;

use crate::catch::{Family, skew};
use crate::document::Flag;
use crate::storage::engine::Transfer;

/// What an item did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Op {
    /// A file written and synced.
    Write,
    /// A file written again over itself, in place, and synced (`--rewrite`).
    Rewrite,
    /// A file read back.
    Read,
}

impl Op {
    /// The name stored and printed.
    pub fn as_str(self) -> &'static str {
        match self {
            Op::Write => "write",
            Op::Rewrite => "rewrite",
            Op::Read => "read",
        }
    }
}

/// One file written or read, with its timing and the cache state before it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DiskItem {
    /// Write or read.
    pub op: Op,
    /// For writes the sync mode (`fsync`, `fdatasync`, `none`); for reads the read mode.
    pub mode: String,
    /// The file's size.
    pub size_bytes: u64,
    /// Bytes moved (equal to the size for a whole file).
    pub bytes: u64,
    /// Timed span: first call to the return of the sync (writes) or last read.
    pub seconds: f64,
    /// `bytes / seconds`.
    pub bytes_per_sec: f64,
    /// Fraction of the file in the page cache just before a read; null for writes.
    pub cached_fraction_before: Option<f64>,
    /// For a target stacked on files of the host (a disk image), how much of each such
    /// layer's cache could have served the read, as a fraction of the file.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub layers: Vec<LayerResidency>,
    /// Inside a qcow2 image: the bytes qemu-storage-daemon read from the image during the
    /// read, over the bytes read (at most 1). Below 1, a cache between served the rest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_below_fraction: Option<f64>,
    /// Marks on figures that are not plain measurements.
    pub flags: Vec<Flag>,
    /// Whether the I/O used O_DIRECT.
    pub direct: bool,
    /// Pass number, from 1.
    pub pass: u32,
    /// The file's name in the work folder.
    pub file: String,
    /// For an item that stands for many small files written at once, how many.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub files: Option<u64>,
    /// For a write: the share of its timed span the writer waited for its unique data
    /// to be made (none where it never waited).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_wait_fraction: Option<f64>,
}

impl DiskItem {
    /// A file of which `transfer` moved some or all bytes, buffered, with no cache
    /// state and no flags yet; its size is what was moved unless the caller says more.
    pub fn timed(op: Op, mode: &str, transfer: Transfer, pass: u32, file: &str) -> DiskItem {
        let seconds = transfer.elapsed.as_secs_f64() / skew(Family::Storage, 1.0);
        DiskItem {
            op,
            mode: mode.to_string(),
            size_bytes: transfer.bytes,
            bytes: transfer.bytes,
            seconds,
            bytes_per_sec: transfer.bytes as f64 / seconds.max(1e-9),
            cached_fraction_before: None,
            layers: Vec::new(),
            read_below_fraction: None,
            flags: Vec::new(),
            direct: false,
            pass,
            file: file.to_string(),
            files: None,
            data_wait_fraction: (!transfer.data_wait.is_zero())
                .then(|| transfer.data_wait.as_secs_f64() / seconds.max(1e-9)),
        }
    }
}

impl DiskItem {
    /// The most of the file any cache below the read held before it: its own page cache
    /// or a layer's; `None` for writes.
    pub fn most_cached_before(&self) -> Option<f64> {
        let layers = self.layers.iter().map(|l| l.cached_fraction_before);
        // What the image's daemon did not read came from a cache between.
        let unread = self.read_below_fraction.map(|f| 1.0 - f);
        self.cached_fraction_before
            .into_iter()
            .chain(layers)
            .chain(unread)
            .reduce(f64::max)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// An item of `op` in `mode` of `size` bytes at `rate`, `fraction` resident before.
    pub(crate) fn item(
        op: Op,
        mode: &str,
        size: u64,
        rate: f64,
        fraction: Option<f64>,
    ) -> DiskItem {
        DiskItem {
            op,
            mode: mode.into(),
            size_bytes: size,
            bytes: size,
            seconds: size as f64 / rate,
            bytes_per_sec: rate,
            cached_fraction_before: fraction,
            layers: vec![],
            read_below_fraction: None,
            flags: vec![],
            direct: false,
            pass: 1,
            file: "f".into(),
            files: None,
            data_wait_fraction: None,
        }
    }
}
