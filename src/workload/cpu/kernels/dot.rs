//! SIMD dot product of two 1024-element f32 vectors (8 KiB, in L1), with the widest
//! vector unit the CPU has, chosen at run time: AVX-512, AVX2 with FMA, SSE2, or scalar.

use std::hint::black_box;

use super::{Kernel, Runner, has};

/// Elements per vector.
const N: usize = 1024;

/// The dot-product test.
pub struct Dot;

type DotFn = fn(&[f32], &[f32]) -> f32;

struct DotRunner {
    a: Vec<f32>,
    b: Vec<f32>,
    dot: DotFn,
    isa: &'static str,
}

impl Kernel for Dot {
    fn name(&self) -> &'static str {
        "dot"
    }

    fn loop_is(&self) -> &'static str {
        "one dot product of two 1024-element f32 vectors: 1024 multiply-adds"
    }

    fn unavailable(&self) -> Option<String> {
        None
    }

    fn runner(&self) -> Box<dyn Runner> {
        let (dot, isa) = widest();
        let a = (0..N).map(|i| 1.0 + (i % 7) as f32 * 1e-3).collect();
        let b = (0..N).map(|i| 1.0 - (i % 5) as f32 * 1e-3).collect();
        Box::new(DotRunner { a, b, dot, isa })
    }
}

fn widest() -> (DotFn, &'static str) {
    #[cfg(target_arch = "x86_64")]
    {
        if has("avx512f") {
            // SAFETY (of the call inside): AVX-512F is present, as just checked.
            return (|a, b| unsafe { x86::dot_avx512(a, b) }, "avx512f");
        }
        if has("avx2") && has("fma") {
            // SAFETY: AVX2 and FMA are present, as just checked.
            return (|a, b| unsafe { x86::dot_avx2(a, b) }, "avx2+fma");
        }
        if has("sse2") {
            // SAFETY: SSE2 is present, as just checked.
            return (|a, b| unsafe { x86::dot_sse2(a, b) }, "sse2");
        }
    }
    (dot_scalar, "scalar")
}

impl Runner for DotRunner {
    fn work(&mut self, loops: u64) -> u64 {
        let mut sum = 0.0f32;
        for _ in 0..loops {
            sum += (self.dot)(black_box(&self.a), black_box(&self.b));
        }
        u64::from(sum.to_bits())
    }

    fn empty(&mut self, loops: u64) -> u64 {
        let mut sum = 0.0f32;
        for _ in 0..loops {
            sum += black_box(0.0f32);
        }
        u64::from(sum.to_bits())
    }

    fn isa(&self) -> &'static str {
        self.isa
    }
}

#[inline(never)]
fn dot_scalar(a: &[f32], b: &[f32]) -> f32 {
    let mut sums = [0.0f32; 4];
    for (a, b) in a.chunks_exact(4).zip(b.chunks_exact(4)) {
        for lane in 0..4 {
            sums[lane] += a[lane] * b[lane];
        }
    }
    sums.iter().sum()
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    /// Four 16-wide accumulators, 64 elements a step.
    #[inline(never)]
    #[target_feature(enable = "avx512f")]
    pub unsafe fn dot_avx512(a: &[f32], b: &[f32]) -> f32 {
        let n = a.len().min(b.len()) / 64 * 64;
        let mut acc = [_mm512_setzero_ps(); 4];
        let mut i = 0;
        while i < n {
            for (k, acc) in acc.iter_mut().enumerate() {
                // SAFETY: i + 16k + 16 <= n <= both lengths.
                let (x, y) = unsafe {
                    (
                        _mm512_loadu_ps(a.as_ptr().add(i + 16 * k)),
                        _mm512_loadu_ps(b.as_ptr().add(i + 16 * k)),
                    )
                };
                *acc = _mm512_fmadd_ps(x, y, *acc);
            }
            i += 64;
        }
        let sum = _mm512_add_ps(_mm512_add_ps(acc[0], acc[1]), _mm512_add_ps(acc[2], acc[3]));
        _mm512_reduce_add_ps(sum)
    }

    /// Four 8-wide accumulators, 32 elements a step.
    #[inline(never)]
    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn dot_avx2(a: &[f32], b: &[f32]) -> f32 {
        let n = a.len().min(b.len()) / 32 * 32;
        let mut acc = [_mm256_setzero_ps(); 4];
        let mut i = 0;
        while i < n {
            for (k, acc) in acc.iter_mut().enumerate() {
                // SAFETY: i + 8k + 8 <= n <= both lengths.
                let (x, y) = unsafe {
                    (
                        _mm256_loadu_ps(a.as_ptr().add(i + 8 * k)),
                        _mm256_loadu_ps(b.as_ptr().add(i + 8 * k)),
                    )
                };
                *acc = _mm256_fmadd_ps(x, y, *acc);
            }
            i += 32;
        }
        let sum = _mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3]));
        let mut lanes = [0.0f32; 8];
        // SAFETY: eight f32 fit in `lanes`.
        unsafe { _mm256_storeu_ps(lanes.as_mut_ptr(), sum) };
        lanes.iter().sum()
    }

    /// Four 4-wide accumulators of multiplies and adds, 16 elements a step.
    #[inline(never)]
    #[target_feature(enable = "sse2")]
    pub unsafe fn dot_sse2(a: &[f32], b: &[f32]) -> f32 {
        let n = a.len().min(b.len()) / 16 * 16;
        let mut acc = [_mm_setzero_ps(); 4];
        let mut i = 0;
        while i < n {
            for (k, acc) in acc.iter_mut().enumerate() {
                // SAFETY: i + 4k + 4 <= n <= both lengths.
                let (x, y) = unsafe {
                    (
                        _mm_loadu_ps(a.as_ptr().add(i + 4 * k)),
                        _mm_loadu_ps(b.as_ptr().add(i + 4 * k)),
                    )
                };
                *acc = _mm_add_ps(*acc, _mm_mul_ps(x, y));
            }
            i += 16;
        }
        let sum = _mm_add_ps(_mm_add_ps(acc[0], acc[1]), _mm_add_ps(acc[2], acc[3]));
        let mut lanes = [0.0f32; 4];
        // SAFETY: four f32 fit in `lanes`.
        unsafe { _mm_storeu_ps(lanes.as_mut_ptr(), sum) };
        lanes.iter().sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_isa_gives_the_scalar_answer() {
        let a: Vec<f32> = (0..N).map(|i| (i % 13) as f32).collect();
        let b: Vec<f32> = (0..N).map(|i| (i % 11) as f32).collect();
        let expected = dot_scalar(&a, &b);
        let (dot, isa) = widest();
        assert_eq!(dot(&a, &b), expected, "{isa}");
    }
}
