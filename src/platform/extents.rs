//! Where a file's bytes lie on the block device below its filesystem (FS_IOC_FIEMAP):
//! inside a disk image whose file holds the device byte for byte, the only part of
//! that file a read inside can be served from.

use std::fs::File;
use std::ops::Range;
use std::os::fd::AsRawFd;

/// `_IOWR('f', 11, struct fiemap)`: the same number on every architecture Linux runs.
const FS_IOC_FIEMAP: libc::c_ulong = 0xC020_660B;
/// Write back delayed allocations first, so that every extent has its place.
const FIEMAP_FLAG_SYNC: u32 = 0x1;
/// The file's last extent.
const FIEMAP_EXTENT_LAST: u32 = 0x1;
/// Extents whose bytes do not lie, as they are, at `fe_physical` on the device: place
/// unknown, not yet allocated, compressed or encrypted, not block-aligned, inline in
/// metadata, packed into a shared tail.
const ELSEWHERE: u32 = 0x2 | 0x4 | 0x8 | 0x80 | 0x100 | 0x200 | 0x400;
/// Extents asked for in one call.
const BATCH: usize = 128;

const EXT4_SUPER_MAGIC: i64 = 0xEF53;
const XFS_SUPER_MAGIC: i64 = 0x5846_5342;

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct FiemapExtent {
    fe_logical: u64,
    fe_physical: u64,
    fe_length: u64,
    fe_reserved64: [u64; 2],
    fe_flags: u32,
    fe_reserved: [u32; 3],
}

#[repr(C)]
struct Fiemap {
    fm_start: u64,
    fm_length: u64,
    fm_flags: u32,
    fm_mapped_extents: u32,
    fm_extent_count: u32,
    fm_reserved: u32,
    fm_extents: [FiemapExtent; BATCH],
}

/// The byte ranges of the block device below `file`'s filesystem that hold its first
/// `size` bytes, merged where they touch; `None` where the filesystem's offsets are not
/// the device's (only ext4 and xfs are taken at their word: btrfs maps into its own
/// address space) or where any extent's bytes lie elsewhere (inline, encoded).
pub fn on_device(file: &File, size: u64) -> Option<Vec<Range<u64>>> {
    if !device_offsets(file) {
        return None;
    }
    let mut ranges: Vec<Range<u64>> = Vec::new();
    let mut start = 0u64;
    while start < size {
        let (extents, last) = batch(file, start, size - start)?;
        let Some(end) = extents.last().map(|e| e.fe_logical + e.fe_length) else {
            break; // A hole to the end.
        };
        for extent in &extents {
            if extent.fe_flags & ELSEWHERE != 0 {
                return None;
            }
            // Only the part of the extent that holds the first `size` bytes.
            let within = extent.fe_length.min(size.saturating_sub(extent.fe_logical));
            let range = extent.fe_physical..extent.fe_physical + within;
            match ranges.last_mut() {
                Some(previous) if previous.end == range.start => previous.end = range.end,
                _ if range.is_empty() => {}
                _ => ranges.push(range),
            }
        }
        if last || end <= start {
            break;
        }
        start = end;
    }
    Some(ranges)
}

/// Whether `file`'s filesystem reports extents at offsets of its block device.
// f_type is i64 here but narrower on 32-bit targets.
#[allow(clippy::unnecessary_cast)]
fn device_offsets(file: &File) -> bool {
    rustix::fs::fstatfs(file)
        .is_ok_and(|s| matches!(s.f_type as i64, EXT4_SUPER_MAGIC | XFS_SUPER_MAGIC))
}

/// Up to [`BATCH`] extents of `file` from byte `start` on, `length` bytes at most, and
/// whether the file's last extent is among them; `None` where the call fails.
fn batch(file: &File, start: u64, length: u64) -> Option<(Vec<FiemapExtent>, bool)> {
    let mut map = Box::new(Fiemap {
        fm_start: start,
        fm_length: length,
        fm_flags: FIEMAP_FLAG_SYNC,
        fm_mapped_extents: 0,
        fm_extent_count: BATCH as u32,
        fm_reserved: 0,
        fm_extents: [FiemapExtent::default(); BATCH],
    });
    // SAFETY: the kernel writes at most fm_extent_count extents into the array that
    // follows the header, which is how `Fiemap` is laid out.
    let rc = unsafe { libc::ioctl(file.as_raw_fd(), FS_IOC_FIEMAP, &mut *map as *mut Fiemap) };
    if rc != 0 {
        return None;
    }
    let mapped = (map.fm_mapped_extents as usize).min(BATCH);
    let extents = map.fm_extents[..mapped].to_vec();
    let last = extents
        .last()
        .is_none_or(|e| e.fe_flags & FIEMAP_EXTENT_LAST != 0);
    Some((extents, last))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn a_synced_file_on_ext4_or_xfs_lies_in_ranges_as_long_as_it_is() {
        let dir = tempfile::tempdir_in(concat!(env!("CARGO_MANIFEST_DIR"), "/target")).unwrap();
        let path = dir.path().join("file");
        let mut file = File::create(&path).unwrap();
        file.write_all(&vec![7u8; 3 << 20]).unwrap();
        file.sync_all().unwrap();
        let file = File::open(&path).unwrap();
        let Some(ranges) = on_device(&file, 3 << 20) else {
            assert!(!device_offsets(&file), "ext4 and xfs say where a file lies");
            return;
        };
        let total: u64 = ranges.iter().map(|r| r.end - r.start).sum();
        assert_eq!(total, 3 << 20, "{ranges:?}");
        // Only the first part, when asked for less.
        let part: u64 = on_device(&file, 4096)
            .unwrap()
            .iter()
            .map(|r| r.end - r.start)
            .sum();
        assert_eq!(part, 4096);
    }
}
