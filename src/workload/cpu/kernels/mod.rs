//! In-core kernels: loops of known work that the compiler cannot remove or reshape
//! (inline assembly, or `std::arch` intrinsics with `black_box` at the edges). Each has
//! an empty twin of the same loop shape, whose time is taken off, and says when the CPU
//! lacks its unit. A kernel is one file here and one line in [`KERNELS`].

mod amx;
mod dot;
mod empty;
mod fma;
mod int;
mod matmul;
mod spmv;

/// One thread's instance of a kernel, holding its data.
pub trait Runner: Send {
    /// Runs `loops` loops of the work; the result depends on all of it.
    fn work(&mut self, loops: u64) -> u64;

    /// Runs `loops` loops of the same shape without the work.
    fn empty(&mut self, loops: u64) -> u64;

    /// The instruction set the runner chose (`avx512f`, `avx2+fma`, `scalar`).
    fn isa(&self) -> &'static str;
}

/// A kind of in-core work.
pub trait Kernel: Sync {
    /// The test's name (`int`, `fma`, `dot`).
    fn name(&self) -> &'static str;

    /// What one loop does, in words.
    fn loop_is(&self) -> &'static str;

    /// Why this CPU cannot run it, if it cannot.
    fn unavailable(&self) -> Option<String>;

    /// Asks the kernel for what the process needs once (AMX asks for tile state).
    fn permit(&self) -> Result<(), String> {
        Ok(())
    }

    /// A runner for one thread, set up before the timed loops.
    fn runner(&self) -> Box<dyn Runner>;

    /// Whether its loop does work, so that its rate is a figure (the empty test's is not).
    fn has_work(&self) -> bool {
        true
    }
}

/// Every kernel, in the order tests run; `empty` is not a default test.
pub const KERNELS: &[&dyn Kernel] = &[
    &int::Int,
    &fma::Fma,
    &dot::Dot,
    &matmul::Matmul,
    &spmv::Spmv,
    &amx::Amx,
    &empty::Empty,
];

/// The tests run when `--test` is not given.
pub const DEFAULT_TESTS: &[&str] = &["int", "fma", "dot", "matmul", "spmv", "amx"];

/// The kernel named `name`.
pub fn kernel(name: &str) -> Option<&'static dyn Kernel> {
    KERNELS.iter().copied().find(|k| k.name() == name)
}

/// Whether the CPU has `feature` (as `is_x86_feature_detected!` names it).
#[cfg(target_arch = "x86_64")]
fn has(feature: &str) -> bool {
    match feature {
        "avx512f" => std::arch::is_x86_feature_detected!("avx512f"),
        "avx2" => std::arch::is_x86_feature_detected!("avx2"),
        "fma" => std::arch::is_x86_feature_detected!("fma"),
        "sse2" => std::arch::is_x86_feature_detected!("sse2"),
        // std's detection of AMX is not stable yet: CPUID leaf 7 says it (EDX bit 24
        // AMX-TILE, bit 22 AMX-BF16; Intel SDM vol. 2A, CPUID).
        "amx-tile" => cpuid_7_edx() & (1 << 24) != 0,
        "amx-bf16" => cpuid_7_edx() & (1 << 22) != 0,
        _ => false,
    }
}

#[cfg(target_arch = "x86_64")]
fn cpuid_7_edx() -> u32 {
    // CPUID is always available on x86-64; leaf 7 exists where the maximum leaf allows.
    let max_leaf = std::arch::x86_64::__cpuid(0).eax;
    if max_leaf < 7 {
        return 0;
    }
    std::arch::x86_64::__cpuid_count(7, 0).edx
}

#[cfg(not(target_arch = "x86_64"))]
fn has(_feature: &str) -> bool {
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    fn time(mut f: impl FnMut() -> u64) -> std::time::Duration {
        let started = std::time::Instant::now();
        std::hint::black_box(f());
        started.elapsed()
    }

    #[test]
    fn every_available_kernel_runs_and_its_work_takes_longer_than_its_empty_loop() {
        for kernel in KERNELS {
            if kernel.unavailable().is_some() || kernel.permit().is_err() {
                continue;
            }
            let mut runner = kernel.runner();
            // Enough loops for a couple of milliseconds, and the best of five runs of
            // each, so a cold start or a neighbour cannot swap the two.
            let mut loops = 1_000u64;
            while time(|| runner.work(loops)) < std::time::Duration::from_millis(2) {
                loops *= 2;
            }
            let best = |f: &mut dyn FnMut() -> u64| (0..5).map(|_| time(&mut *f)).min().unwrap();
            let work = best(&mut || runner.work(loops));
            let empty = best(&mut || runner.empty(loops));
            if kernel.name() != "empty" {
                assert!(
                    work > empty,
                    "{}: work {work:?} empty {empty:?}",
                    kernel.name()
                );
            }
        }
    }
}
