//! Page-aligned memory for I/O buffers, as O_DIRECT requires, backed by transparent
//! huge pages where the kernel allows.
//!
//! A 1 MiB buffer made of 256 scattered 4 KiB pages needs 256 DMA segments; a virtio
//! disk takes at most 254 per request, so the block layer splits every such I/O in two
//! and the device sees 512 KiB requests where fio's sees 1 MiB ones. Buffers that sit in
//! one huge page are physically contiguous: one segment, no split.

use std::ptr::NonNull;

/// Size and alignment of a transparent huge page on x86-64 and arm64 (4 KiB base pages).
const HUGE_PAGE: usize = 2 << 20;

/// A zeroed, aligned byte buffer that never moves.
pub struct AlignedBuf {
    ptr: NonNull<u8>,
    len: usize,
    mapped: usize,
}

// SAFETY: the buffer owns its mapping exclusively, like a Vec<u8>.
unsafe impl Send for AlignedBuf {}

impl AlignedBuf {
    /// A zeroed buffer of `len` bytes (rounded up to whole pages), aligned to a huge
    /// page and advised to use huge pages.
    pub fn new(len: usize) -> std::io::Result<AlignedBuf> {
        let len = len.max(1).next_multiple_of(rustix::param::page_size());
        let mapped = len.next_multiple_of(HUGE_PAGE) + HUGE_PAGE;
        // SAFETY: an anonymous private mapping; nothing else refers to it.
        let raw = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                mapped,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if raw == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        // Trim the mapping to a huge-page-aligned window of `used` bytes.
        let start = (raw as usize).next_multiple_of(HUGE_PAGE);
        let used = len.next_multiple_of(HUGE_PAGE);
        let head = start - raw as usize;
        let tail = mapped - head - used;
        // SAFETY: both ranges lie inside the mapping made above and are not used.
        unsafe {
            if head > 0 {
                libc::munmap(raw, head);
            }
            if tail > 0 {
                libc::munmap((start + used) as *mut libc::c_void, tail);
            }
            // Advice only: without THP the buffer still works, split I/O and all.
            libc::madvise(start as *mut libc::c_void, used, libc::MADV_HUGEPAGE);
        }
        Ok(AlignedBuf {
            ptr: NonNull::new(start as *mut u8).expect("mmap returned a non-null address"),
            len,
            mapped: used,
        })
    }

    /// Its length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the buffer holds no bytes (never: buffers are a page at least).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The bytes.
    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: ptr is valid for len bytes for the buffer's lifetime.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    /// The bytes, writable.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: ptr is valid for len bytes and borrowed mutably through self.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        // SAFETY: unmapping exactly the window kept in `new`.
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.mapped) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligned_and_rounded() {
        let buf = AlignedBuf::new(5000).unwrap();
        assert_eq!(buf.len(), 8192);
        assert_eq!(buf.as_slice().as_ptr() as usize % HUGE_PAGE, 0);
        assert!(buf.as_slice().iter().all(|&b| b == 0));
    }

    #[test]
    fn large_buffers_are_whole_and_writable() {
        let mut buf = AlignedBuf::new(3 << 20).unwrap();
        buf.as_mut_slice().fill(7);
        assert_eq!(buf.as_slice().len(), 3 << 20);
        assert!(buf.as_slice().iter().all(|&b| b == 7));
    }
}
