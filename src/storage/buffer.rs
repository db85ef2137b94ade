//! Page-aligned memory for I/O buffers, as O_DIRECT requires; buffers of 1 MiB or more
//! are backed by transparent huge pages where the kernel allows, smaller ones take only
//! the pages they need.
//!
//! A 1 MiB buffer made of 256 scattered 4 KiB pages needs 256 DMA segments; a virtio
//! disk takes at most 254 per request, so the block layer splits every such I/O in two
//! and the device sees 512 KiB requests where fio's sees 1 MiB ones. Buffers that sit in
//! one huge page are physically contiguous: one segment, no split. A buffer under 1 MiB
//! (254 pages) fits in one request scattered as it is, so it takes no huge page: a
//! deep queue of 4 KiB requests holds 4 KiB a request, not 2 MiB.

use std::ptr::NonNull;

/// Size and alignment of a transparent huge page on x86-64 and arm64 (4 KiB base pages).
const HUGE_PAGE: usize = 2 << 20;
/// The smallest buffer put in huge pages: from here on, scattered 4 KiB pages would
/// need more segments than a virtio request takes.
const HUGE_FROM: usize = 1 << 20;

/// A zeroed, aligned byte buffer that never moves.
pub struct AlignedBuf {
    ptr: NonNull<u8>,
    len: usize,
    mapped: usize,
}

// SAFETY: the buffer owns its mapping exclusively, like a Vec<u8>.
unsafe impl Send for AlignedBuf {}

impl AlignedBuf {
    /// A zeroed buffer of `len` bytes (rounded up to whole pages). One of 1 MiB or more
    /// is aligned to a huge page and advised to use them; a smaller one is a plain
    /// page-aligned mapping, so many small buffers take what their blocks take.
    pub fn new(len: usize) -> std::io::Result<AlignedBuf> {
        let len = len.max(1).next_multiple_of(rustix::param::page_size());
        if len < HUGE_FROM {
            let raw = map(len)?;
            return Ok(AlignedBuf {
                ptr: NonNull::new(raw.cast()).expect("mmap returned a non-null address"),
                len,
                mapped: len,
            });
        }
        let mapped = len.next_multiple_of(HUGE_PAGE) + HUGE_PAGE;
        let raw = map(mapped)?;
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

    /// Bytes of memory it holds mapped.
    pub fn mapped(&self) -> usize {
        self.mapped
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

    /// Where the bytes start, for a request the kernel fills.
    pub fn as_mut_ptr(&mut self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// The bytes, writable.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: ptr is valid for len bytes and borrowed mutably through self.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

/// One buffer a slot for `slots` requests in flight, each `block` bytes rounded up to a
/// page, in one mapping: what a queue of them holds is what their blocks hold.
pub struct SlotBufs {
    buf: AlignedBuf,
    stride: usize,
}

impl SlotBufs {
    /// `slots` zeroed buffers of `block` bytes.
    pub fn new(slots: usize, block: usize) -> std::io::Result<SlotBufs> {
        let stride = SlotBufs::stride(block);
        Ok(SlotBufs {
            buf: AlignedBuf::new(slots.max(1) * stride)?,
            stride,
        })
    }

    /// Bytes between one slot's buffer and the next: the block rounded up to a page.
    pub fn stride(block: usize) -> usize {
        block.max(1).next_multiple_of(rustix::param::page_size())
    }

    /// Slot `slot`'s buffer.
    pub fn slot(&mut self, slot: usize) -> &mut [u8] {
        let start = slot * self.stride;
        &mut self.buf.as_mut_slice()[start..start + self.stride]
    }
}

/// A zeroed, private anonymous mapping of `bytes`.
fn map(bytes: usize) -> std::io::Result<*mut libc::c_void> {
    // SAFETY: an anonymous private mapping; nothing else refers to it.
    let raw = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            bytes,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if raw == libc::MAP_FAILED {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(raw)
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
        let small = AlignedBuf::new(5000).unwrap();
        assert_eq!((small.len(), small.mapped()), (8192, 8192));
        assert_eq!(small.as_slice().as_ptr() as usize % 4096, 0);
        assert!(small.as_slice().iter().all(|&b| b == 0));
        let large = AlignedBuf::new(HUGE_PAGE + 1).unwrap();
        assert_eq!(large.as_slice().as_ptr() as usize % HUGE_PAGE, 0);
        assert_eq!(large.mapped(), 2 * HUGE_PAGE);
    }

    #[test]
    fn slot_buffers_are_page_aligned_and_apart() {
        let mut bufs = SlotBufs::new(3, 512).unwrap();
        let a = bufs.slot(0).as_ptr() as usize;
        let c = bufs.slot(2).as_ptr() as usize;
        assert_eq!((a % 4096, c - a), (0, 2 * 4096));
        assert_eq!(bufs.slot(1).len(), 4096);
    }

    #[test]
    fn large_buffers_are_whole_and_writable() {
        let mut buf = AlignedBuf::new(3 << 20).unwrap();
        buf.as_mut_slice().fill(7);
        assert_eq!(buf.as_slice().len(), 3 << 20);
        assert!(buf.as_slice().iter().all(|&b| b == 7));
    }
}
