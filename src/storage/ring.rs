//! An io_uring for one thread's requests, set up as fio sets up its own: the kernel
//! hands completions over when the thread asks for them (at its next wait or submit)
//! instead of interrupting it for each, which on a fast device is most of the cost.

use io_uring::IoUring;

/// A ring of `entries` whose requests are all submitted by the thread that calls this.
/// Kernels older than 6.1 lack some of the set-up: the ring then falls back to what they
/// have, down to a plain one.
pub fn one_thread_ring(entries: u32) -> std::io::Result<IoUring> {
    let deferred = IoUring::builder()
        .setup_coop_taskrun()
        .setup_single_issuer()
        .setup_defer_taskrun()
        .build(entries);
    match deferred {
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
            match IoUring::builder().setup_coop_taskrun().build(entries) {
                Err(e) if e.raw_os_error() == Some(libc::EINVAL) => IoUring::new(entries),
                cooperative => cooperative,
            }
        }
        deferred => deferred,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ring_is_made_on_this_kernel() {
        // Where io_uring is refused altogether (a sandbox's seccomp) there is nothing to check.
        if let Ok(ring) = one_thread_ring(32) {
            assert_eq!(ring.params().sq_entries(), 32);
        }
    }
}
