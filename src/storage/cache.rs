//! The page cache state of a file: how much of it is resident (the proof stored with
//! every read), and how to evict or warm it before a read.

use std::fs::File;
use std::ops::Range;
use std::os::fd::AsRawFd;
use std::path::Path;

use crate::error::Error;

/// cachestat(2), Linux 6.5+; the same number on every architecture.
const SYS_CACHESTAT: libc::c_long = 451;

#[repr(C)]
struct CachestatRange {
    off: u64,
    len: u64,
}

#[repr(C)]
#[derive(Default)]
struct Cachestat {
    nr_cache: u64,
    nr_dirty: u64,
    nr_writeback: u64,
    nr_evicted: u64,
    nr_recently_evicted: u64,
}

/// The fraction of the file's pages in the page cache, 0.0 to 1.0.
pub fn resident_fraction(file: &File, path: &Path, size: u64) -> Result<f64, Error> {
    if size == 0 {
        return Ok(0.0);
    }
    let page = rustix::param::page_size() as u64;
    let pages = size.div_ceil(page);
    let resident = resident_pages(file, path, 0, size)?;
    Ok((resident as f64 / pages as f64).min(1.0))
}

/// Bytes of the file (of `size` bytes) in the page cache.
pub fn resident_bytes(file: &File, path: &Path, size: u64) -> Result<u64, Error> {
    if size == 0 {
        return Ok(0);
    }
    resident_bytes_in(file, path, std::slice::from_ref(&(0..size)))
}

/// Bytes of the file in the page cache within `ranges` of it (each widened to whole
/// pages, and cut at the file's end).
pub fn resident_bytes_in(file: &File, path: &Path, ranges: &[Range<u64>]) -> Result<u64, Error> {
    let page = rustix::param::page_size() as u64;
    let length = file
        .metadata()
        .map_err(|e| Error::io("inspect", path, e))?
        .len();
    let mut pages = 0;
    for range in ranges {
        let start = range.start / page * page;
        let end = range.end.min(length);
        if start < end {
            pages += resident_pages(file, path, start, end - start)?;
        }
    }
    Ok(pages * page)
}

/// Resident pages of the `len` bytes of the file from `off` (a page boundary).
fn resident_pages(file: &File, path: &Path, off: u64, len: u64) -> Result<u64, Error> {
    match cachestat_pages(file, off, len) {
        Some(cached) => Ok(cached),
        None => mincore_pages(file, path, off, len),
    }
}

/// Resident pages by cachestat(2); `None` where the kernel lacks it.
fn cachestat_pages(file: &File, off: u64, len: u64) -> Option<u64> {
    let range = CachestatRange { off, len };
    let mut stat = Cachestat::default();
    // SAFETY: both pointers are to live, correctly laid out structs.
    let rc = unsafe {
        libc::syscall(
            SYS_CACHESTAT,
            file.as_raw_fd(),
            &range as *const CachestatRange,
            &mut stat as *mut Cachestat,
            0u32,
        )
    };
    (rc == 0).then_some(stat.nr_cache)
}

/// Resident pages by mapping the file's `len` bytes from `off` and asking mincore(2).
fn mincore_pages(file: &File, path: &Path, off: u64, len: u64) -> Result<u64, Error> {
    let page = rustix::param::page_size();
    let len = len as usize;
    // SAFETY: a fresh shared read-only mapping of a file we hold open; never dereferenced.
    let addr = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ,
            libc::MAP_SHARED,
            file.as_raw_fd(),
            off as libc::off_t,
        )
    };
    if addr == libc::MAP_FAILED {
        return Err(Error::io("map", path, std::io::Error::last_os_error()));
    }
    let mut vec = vec![0u8; len.div_ceil(page)];
    // SAFETY: addr..addr+len is the mapping made above; vec has one byte per page.
    let rc = unsafe { libc::mincore(addr, len, vec.as_mut_ptr()) };
    let err = std::io::Error::last_os_error();
    // SAFETY: unmapping exactly the mapping made above.
    unsafe { libc::munmap(addr, len) };
    if rc != 0 {
        return Err(Error::io("measure the page cache of", path, err));
    }
    Ok(vec.iter().filter(|&&b| b & 1 == 1).count() as u64)
}

/// How hard to evict.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Eviction {
    /// posix_fadvise(DONTNEED) after a sync: enough to prove a direct read uncached.
    Advise,
    /// Also, as root, drop_caches(1) when pages remain: a buffered read must find none.
    /// It drops every clean page of the machine, so it is kept for `flushed` reads.
    Force,
    /// posix_fadvise(DONTNEED) alone, for files that are not ratelab's (`readdir`): no
    /// sync of someone else's dirty pages, no drop of the machine's cache. What stays
    /// resident shows in the measured fraction.
    Foreign,
}

/// Evicts the file from the page cache: write back dirty pages, drop them with
/// posix_fadvise(DONTNEED), and with [`Eviction::Force`] as root, drop clean caches if
/// pages remain. Files on tmpfs or ramfs are their pages and cannot be evicted.
pub fn evict(file: &File, path: &Path, size: u64, how: Eviction) -> Result<(), Error> {
    if how != Eviction::Foreign {
        rustix::fs::fdatasync(file).map_err(|e| Error::io("sync", path, e))?;
    }
    rustix::fs::fadvise(file, 0, None, rustix::fs::Advice::DontNeed)
        .map_err(|e| Error::io("evict from the page cache", path, e))?;
    if how == Eviction::Force
        && rustix::process::geteuid().is_root()
        && !in_memory(file)
        && resident_fraction(file, path, size)? > 0.0
    {
        let _ = std::fs::write("/proc/sys/vm/drop_caches", "1");
    }
    Ok(())
}

/// Whether the file lives on a filesystem whose pages are the file (tmpfs, ramfs).
// f_type and the magic numbers are i64 here but narrower on 32-bit targets.
#[allow(clippy::unnecessary_cast)]
fn in_memory(file: &File) -> bool {
    const RAMFS_MAGIC: i64 = 0x8584_58f6;
    rustix::fs::fstatfs(file).is_ok_and(|s| {
        let kind = s.f_type as i64;
        kind == libc::TMPFS_MAGIC as i64 || kind == RAMFS_MAGIC
    })
}

/// Reads the file through the page cache without timing, so it is resident: its first
/// `size` bytes, or all it has.
pub fn warm(file: &File, path: &Path, size: u64) -> Result<(), Error> {
    use crate::storage::request::{self, Op, Request};
    let has = file
        .metadata()
        .map_err(|e| Error::io("stat", path, e))?
        .len();
    let size = size.min(has);
    let mut buf = vec![0u8; 1 << 20];
    let mut offset = 0u64;
    while offset < size {
        let want = (size - offset).min(buf.len() as u64) as usize;
        let read = Request::whole(Op::Read, file, offset, buf.as_mut_ptr(), want);
        offset += request::once(path, &read)? as u64;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn written_file_is_resident_and_evicted_one_is_not() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let mut file = File::create(&path).unwrap();
        file.write_all(&vec![7u8; 1 << 20]).unwrap();
        let file = File::open(&path).unwrap();
        warm(&file, &path, 1 << 20).unwrap();
        let warm_fraction = resident_fraction(&file, &path, 1 << 20).unwrap();
        assert!(warm_fraction > 0.99, "resident {warm_fraction}");
        evict(&file, &path, 1 << 20, Eviction::Force).unwrap();
        let cold = resident_fraction(&file, &path, 1 << 20).unwrap();
        // tmpfs cannot evict: its pages are the file.
        if !is_tmpfs(dir.path()) {
            assert!(cold < 0.01, "resident {cold}");
        }
        assert_eq!(
            mincore_pages(&file, &path, 0, 1 << 20).unwrap() as f64 / 256.0,
            cold
        );
    }

    #[test]
    fn only_the_pages_within_the_ranges_asked_for_are_counted() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, vec![7u8; 1 << 20]).unwrap();
        let file = File::open(&path).unwrap();
        warm(&file, &path, 1 << 20).unwrap();
        let page = rustix::param::page_size() as u64;
        let ranges = [0..page, 8 * page + 1..10 * page, (1 << 20) - 1..(4 << 20)];
        // One page, two pages (the first widened to its start), and the last page only.
        assert_eq!(resident_bytes_in(&file, &path, &ranges).unwrap(), 4 * page);
        assert_eq!(
            resident_bytes_in(&file, &path, std::slice::from_ref(&(2 << 20..3 << 20))).unwrap(),
            0
        );
        for (off, len) in [(0, page), (8 * page, 2 * page)] {
            let by_cachestat = cachestat_pages(&file, off, len);
            let by_mincore = mincore_pages(&file, &path, off, len).unwrap();
            assert!(by_cachestat.is_none_or(|pages| pages == by_mincore));
            assert_eq!(by_mincore, len / page);
        }
    }

    fn is_tmpfs(path: &Path) -> bool {
        rustix::fs::statfs(path).is_ok_and(|s| s.f_type == libc::TMPFS_MAGIC)
    }
}
