//! A failed request in words: what it did, to which file, at which byte, on which
//! device, and what the errno means for the user (a full filesystem, a quota, a device
//! error, a read-only mount).

use std::path::Path;

use super::Op;
use crate::error::Error;

/// The error for `op` of `path` failing at byte `offset` with `errno`.
pub fn failed(op: Op, path: &Path, offset: u64, errno: i32) -> Error {
    let source = std::io::Error::from_raw_os_error(errno);
    let device = device_of(path)
        .map(|name| format!(" on {name}"))
        .unwrap_or_default();
    let meaning = match errno {
        libc::ENOSPC => ": the filesystem is full (ENOSPC)",
        libc::EDQUOT => ": the user's disk quota is used up (EDQUOT)",
        libc::EIO => ": the device reported an I/O error (EIO)",
        libc::EROFS => ": the filesystem is read-only (EROFS)",
        libc::EINVAL => ": the request's offset, length or buffer does not suit the file (EINVAL)",
        _ => "",
    };
    Error::Io {
        op: op.verb(),
        path: path.to_path_buf(),
        source: std::io::Error::new(
            source.kind(),
            format!("at byte {offset}{device}{meaning}: {source}"),
        ),
    }
}

/// The error for `op` of `path` ending at byte `at`, short of what it had to move: a
/// read past the file's end, or a write the system took none of.
pub fn short(op: Op, path: &Path, at: u64) -> Error {
    crate::storage::short_file(op.verb(), path, at)
}

/// The name of the block device that holds `path` (`loop3`, `vda1`), where it has one.
pub fn device_of(path: &Path) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let dev = std::fs::metadata(path).ok()?.dev();
    crate::platform::fds::block_device_name((libc::major(dev), libc::minor(dev)))
}
