//! CPU seconds the kernel charged this process, or the children it has waited for
//! (getrusage).

/// Whose CPU time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Who {
    /// This process, its threads together.
    Own,
    /// Its children and their descendants that it, or they, waited for.
    Children,
}

/// User and system CPU seconds of `who` so far; zeros where the kernel refuses.
pub fn cpu_seconds(who: Who) -> (f64, f64) {
    let which = match who {
        Who::Own => libc::RUSAGE_SELF,
        Who::Children => libc::RUSAGE_CHILDREN,
    };
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage fills the struct it is given.
    let rc = unsafe { libc::getrusage(which, usage.as_mut_ptr()) };
    if rc != 0 {
        return (0.0, 0.0);
    }
    // SAFETY: filled by the successful call above (and zeroed before it).
    let usage = unsafe { usage.assume_init() };
    let seconds = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    (seconds(usage.ru_utime), seconds(usage.ru_stime))
}
