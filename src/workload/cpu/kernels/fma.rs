//! Floating-point FMA chains: eight independent chains of 256-bit fused multiply-adds
//! per loop, in assembly, enough to keep two FMA units busy through their latency.

use super::{Kernel, Runner, has};

/// The FMA test.
pub struct Fma;

struct FmaRunner;

impl Kernel for Fma {
    fn name(&self) -> &'static str {
        "fma"
    }

    fn loop_is(&self) -> &'static str {
        "8 independent 8-wide f32 fused multiply-adds (vfmadd231ps ymm): 128 flops"
    }

    fn unavailable(&self) -> Option<String> {
        (!(has("avx2") && has("fma")))
            .then(|| "the CPU has no AVX2 and FMA units (cpuid flags avx2, fma)".to_string())
    }

    fn runner(&self) -> Box<dyn Runner> {
        Box::new(FmaRunner)
    }
}

impl Runner for FmaRunner {
    fn work(&mut self, loops: u64) -> u64 {
        // SAFETY: `unavailable` said the CPU has AVX2 and FMA before a runner was made.
        #[cfg(target_arch = "x86_64")]
        unsafe {
            fma_loop(loops, true)
        }
        #[cfg(not(target_arch = "x86_64"))]
        loops
    }

    fn empty(&mut self, loops: u64) -> u64 {
        // SAFETY: as in `work`.
        #[cfg(target_arch = "x86_64")]
        unsafe {
            fma_loop(loops, false)
        }
        #[cfg(not(target_arch = "x86_64"))]
        loops
    }

    fn isa(&self) -> &'static str {
        "avx2+fma"
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx,avx2,fma")]
unsafe fn fma_loop(loops: u64, work: bool) -> u64 {
    if loops == 0 {
        return 0;
    }
    let factors = std::hint::black_box([0.999_999_f32, 1e-7_f32]);
    let lane: u32;
    macro_rules! chain_loop {
        ($($body:literal),*) => {
            // SAFETY: vector registers are declared clobbered; `factors` is read only.
            unsafe {
                std::arch::asm!(
                    "vbroadcastss ymm8, dword ptr [{f}]",
                    "vbroadcastss ymm9, dword ptr [{f} + 4]",
                    "vmovaps ymm0, ymm8",
                    "vmovaps ymm1, ymm8",
                    "vmovaps ymm2, ymm8",
                    "vmovaps ymm3, ymm8",
                    "vmovaps ymm4, ymm8",
                    "vmovaps ymm5, ymm8",
                    "vmovaps ymm6, ymm8",
                    "vmovaps ymm7, ymm8",
                    "2:",
                    $($body,)*
                    "dec {n}",
                    "jnz 2b",
                    "vaddps ymm0, ymm0, ymm7",
                    "vmovd {lane:e}, xmm0",
                    "vzeroupper",
                    f = in(reg) factors.as_ptr(),
                    n = inout(reg) loops => _,
                    lane = out(reg) lane,
                    out("ymm0") _, out("ymm1") _, out("ymm2") _, out("ymm3") _,
                    out("ymm4") _, out("ymm5") _, out("ymm6") _, out("ymm7") _,
                    out("ymm8") _, out("ymm9") _,
                    // vzeroupper clears the upper halves of every ymm register.
                    out("ymm10") _, out("ymm11") _, out("ymm12") _, out("ymm13") _,
                    out("ymm14") _, out("ymm15") _,
                    options(nostack, readonly),
                );
            }
        };
    }
    if work {
        chain_loop!(
            "vfmadd231ps ymm0, ymm8, ymm9",
            "vfmadd231ps ymm1, ymm8, ymm9",
            "vfmadd231ps ymm2, ymm8, ymm9",
            "vfmadd231ps ymm3, ymm8, ymm9",
            "vfmadd231ps ymm4, ymm8, ymm9",
            "vfmadd231ps ymm5, ymm8, ymm9",
            "vfmadd231ps ymm6, ymm8, ymm9",
            "vfmadd231ps ymm7, ymm8, ymm9"
        );
    } else {
        chain_loop!();
    }
    u64::from(lane)
}
