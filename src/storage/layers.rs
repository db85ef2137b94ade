//! The caches below a target that sits on files of the host (a disk image attached
//! through a loop device, a qcow2 image exported through FUSE): a read inside can be
//! served by the page cache of any of those files, so each layer is evicted with the
//! file read and what it still holds is measured and stored with the item.

use std::fs::File;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::cache::{self, Eviction};
use crate::error::Error;
use crate::platform::extents;

/// What one layer below a read (a disk image's file on the host) held in its page cache
/// before the read: at most its resident bytes, as a fraction of the file read.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LayerResidency {
    /// The layer's name (`image`, `export`).
    pub layer: String,
    /// Resident bytes of the layer's file over the bytes read, at most 1.
    pub cached_fraction_before: f64,
}

/// A file of the host below the target whose page cache could serve its reads.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Layer {
    /// What it is (`image`, `export`).
    pub name: String,
    /// The file.
    pub path: PathBuf,
    /// The device inside is this file byte for byte (a raw image, qcow2's export), so a
    /// read's residency is measured where its file lies; over the whole file otherwise.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub same_offsets: bool,
    /// The process that serves the layer's reads from the storage below it (a qcow2
    /// image's qemu-storage-daemon), while the run lasts: what it reads during a read
    /// inside proves that the read reached the image. Never stored.
    #[serde(skip)]
    pub reader_pid: Option<u32>,
}

/// Bytes the processes serving `layers` have read from their storage so far
/// (`read_bytes` of /proc/PID/io, which counts what reached the block layer); `None`
/// when no layer names one, or one cannot be read.
pub fn read_below(layers: &[Layer]) -> Option<u64> {
    let mut pids: Vec<u32> = layers.iter().filter_map(|l| l.reader_pid).collect();
    pids.dedup();
    if pids.is_empty() {
        return None;
    }
    pids.iter().try_fold(0u64, |sum, pid| {
        let text = std::fs::read_to_string(format!("/proc/{pid}/io")).ok()?;
        let bytes = text
            .lines()
            .find_map(|l| l.strip_prefix("read_bytes:"))?
            .trim()
            .parse::<u64>()
            .ok()?;
        Some(sum + bytes)
    })
}

/// What the processes serving `layers` read during a read of `size` bytes that began
/// when they had read `before` bytes: a fraction of the size, at most 1 (the image's own
/// tables are read beside the data); `None` when no layer names such a process.
pub fn read_below_fraction(before: Option<u64>, layers: &[Layer], size: u64) -> Option<f64> {
    before
        .zip(read_below(layers))
        .map(|(before, after)| (after.saturating_sub(before) as f64 / size.max(1) as f64).min(1.0))
}

/// Evicts every layer as `how` says and measures what each still holds of the read of
/// `size` bytes of `inside` (the file inside, already evicted): its resident bytes over
/// the size, at most 1. Where the layer holds the device byte for byte and the
/// filesystem inside says where the file lies, only those bytes count; otherwise the
/// whole layer does: an upper bound, never an underestimate.
pub fn evict_and_measure(
    layers: &[Layer],
    inside: &File,
    size: u64,
    how: Eviction,
) -> Result<Vec<LayerResidency>, Error> {
    let placed = layers.iter().any(|l| l.same_offsets);
    let on_device = placed.then(|| extents::on_device(inside, size)).flatten();
    layers
        .iter()
        .map(|layer| {
            let file =
                File::open(&layer.path).map_err(|e| Error::io("open the layer", &layer.path, e))?;
            let length = file
                .metadata()
                .map_err(|e| Error::io("inspect the layer", &layer.path, e))?
                .len();
            cache::evict(&file, &layer.path, length, how)?;
            let resident = match on_device.as_deref().filter(|_| layer.same_offsets) {
                Some(ranges) => cache::resident_bytes_in(&file, &layer.path, ranges)?,
                None => cache::resident_bytes(&file, &layer.path, length)?,
            };
            Ok(LayerResidency {
                layer: layer.name.clone(),
                cached_fraction_before: if size == 0 {
                    0.0
                } else {
                    (resident as f64 / size as f64).min(1.0)
                },
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn an_evicted_layer_holds_nothing_and_a_warm_one_is_counted_against_the_read() {
        let dir = tempfile::tempdir_in(concat!(env!("CARGO_MANIFEST_DIR"), "/target")).unwrap();
        let path = dir.path().join("image");
        let mut file = File::create(&path).unwrap();
        file.write_all(&vec![7u8; 4 << 20]).unwrap();
        file.sync_all().unwrap();
        let layers = [Layer {
            name: "image".into(),
            path: path.clone(),
            same_offsets: false,
            reader_pid: None,
        }];
        let inside = File::open(&path).unwrap();
        let cold = evict_and_measure(&layers, &inside, 1 << 20, Eviction::Advise).unwrap();
        assert_eq!(cold[0].layer, "image");
        assert!(cold[0].cached_fraction_before < 0.01, "{cold:?}");
        cache::warm(&File::open(&path).unwrap(), &path, 4 << 20).unwrap();
        let file = File::open(&path).unwrap();
        let resident = cache::resident_bytes(&file, &path, 4 << 20).unwrap();
        assert!(resident >= 2 << 20, "warm layer holds {resident} bytes");
    }
}
