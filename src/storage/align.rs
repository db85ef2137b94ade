//! What direct I/O needs on a target, asked of the system rather than assumed: `statx`
//! with `STATX_DIOALIGN` (Linux 6.1, ext4, xfs, btrfs, f2fs) on a file there, else the
//! logical block size of the block device that holds it.

use std::os::fd::AsFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use crate::error::Error;

/// The alignment direct I/O takes on a target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirectAlign {
    /// Offsets and lengths must be multiples of this many bytes.
    pub offset: u32,
    /// Buffers must start at a multiple of this many bytes.
    pub memory: u32,
    /// The block device that holds the target (`loop3`), where it has one.
    pub device: Option<String>,
}

impl DirectAlign {
    /// What direct I/O takes in the folder `target`; `None` where neither the
    /// filesystem nor a block device says.
    pub fn of(target: &Path) -> Option<DirectAlign> {
        let device = super::request::fault::device_of(target);
        if let Some((offset, memory)) = statx_dioalign(target) {
            return Some(DirectAlign {
                offset,
                memory,
                device,
            });
        }
        let block = logical_block_size(target)?;
        Some(DirectAlign {
            offset: block,
            memory: block,
            device,
        })
    }

    /// What the target is called in a message: its device, else the folder.
    fn name(&self, target: &Path) -> String {
        self.device
            .clone()
            .unwrap_or_else(|| target.display().to_string())
    }

    /// Refuses `what` (a test's name) whose requests move `block` bytes at offsets that
    /// are multiples of it, where direct I/O on `target` takes larger steps, or buffers
    /// aligned wider than a page.
    pub fn check(&self, target: &Path, what: &str, block: u64) -> Result<(), Error> {
        let page = rustix::param::page_size() as u64;
        if !block.is_multiple_of(u64::from(self.offset.max(1))) {
            return Err(Error::Unsupported(format!(
                "{what} needs {block}-byte direct I/O; {} takes {} (direct reads and writes \
                 there start and end on multiples of {} bytes): choose blocks of {} or more, \
                 or give --buffered",
                self.name(target),
                self.offset,
                self.offset,
                crate::vocab::units::format_size(u64::from(self.offset)),
            )));
        }
        if u64::from(self.memory) > page {
            return Err(Error::Unsupported(format!(
                "direct I/O on {} needs buffers aligned to {} bytes, more than a page ({page}); \
                 give --buffered",
                self.name(target),
                self.memory
            )));
        }
        Ok(())
    }
}

/// `STATX_DIOALIGN` of an unnamed file in `target` (or of `target` itself where the
/// filesystem has no O_TMPFILE): offset and memory alignment, where the filesystem
/// gives them.
fn statx_dioalign(target: &Path) -> Option<(u32, u32)> {
    use rustix::fs::{AtFlags, StatxFlags};
    let probe = std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_TMPFILE)
        .open(target)
        .or_else(|_| std::fs::File::open(target))
        .ok()?;
    let stx =
        rustix::fs::statx(probe.as_fd(), "", AtFlags::EMPTY_PATH, StatxFlags::DIOALIGN).ok()?;
    let given = StatxFlags::from_bits_retain(stx.stx_mask).contains(StatxFlags::DIOALIGN);
    (given && stx.stx_dio_offset_align > 0)
        .then_some((stx.stx_dio_offset_align, stx.stx_dio_mem_align))
}

/// The logical block size of the block device that holds `path` (a partition's is its
/// disk's).
fn logical_block_size(path: &Path) -> Option<u32> {
    use std::os::unix::fs::MetadataExt;
    let dev = std::fs::metadata(path).ok()?.dev();
    let base = format!("/sys/dev/block/{}:{}", libc::major(dev), libc::minor(dev));
    ["queue/logical_block_size", "../queue/logical_block_size"]
        .iter()
        .find_map(|file| {
            std::fs::read_to_string(format!("{base}/{file}"))
                .ok()?
                .trim()
                .parse()
                .ok()
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_block_that_does_not_fit_is_refused_naming_both() {
        let align = DirectAlign {
            offset: 4096,
            memory: 512,
            device: Some("loop3".into()),
        };
        let target = Path::new("/mnt/x");
        let e = align.check(target, "RND512-Q1T1", 512).unwrap_err();
        assert_eq!(
            e.to_string(),
            "RND512-Q1T1 needs 512-byte direct I/O; loop3 takes 4096 (direct reads and \
             writes there start and end on multiples of 4096 bytes): choose blocks of 4 KiB \
             or more, or give --buffered"
        );
        assert!(align.check(target, "RND4K-Q1T1", 4096).is_ok());
        assert!(align.check(target, "SEQ1M-Q8T1", 1 << 20).is_ok());
    }

    #[test]
    fn this_machine_s_temp_folder_says_something_or_nothing() {
        // Whatever the filesystem, an answer is a power of two no larger than a page.
        if let Some(align) = DirectAlign::of(&std::env::temp_dir()) {
            assert!(
                align.offset.is_power_of_two() && align.offset <= 65536,
                "{align:?}"
            );
        }
    }
}
