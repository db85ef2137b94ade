//! A 16x16 f32 matrix multiply, C = A x B: each row of C built from broadcasts of A's
//! elements times B's rows, with AVX-512 (one register a row), AVX2 with FMA (two), or
//! scalar code.

use std::hint::black_box;

use super::{Kernel, Runner, has};

/// Rows and columns.
const N: usize = 16;

/// The matrix-multiply test.
pub struct Matmul;

type MatmulFn = fn(&[f32; N * N], &[f32; N * N], &mut [f32; N * N]);

struct MatmulRunner {
    a: Box<[f32; N * N]>,
    b: Box<[f32; N * N]>,
    c: Box<[f32; N * N]>,
    multiply: MatmulFn,
    isa: &'static str,
}

impl Kernel for Matmul {
    fn name(&self) -> &'static str {
        "matmul"
    }

    fn loop_is(&self) -> &'static str {
        "one 16x16 by 16x16 f32 matrix multiply: 4096 multiply-adds"
    }

    fn unavailable(&self) -> Option<String> {
        None
    }

    fn runner(&self) -> Box<dyn Runner> {
        let (multiply, isa) = widest();
        let matrix = |seed: usize| {
            let mut m = Box::new([0.0f32; N * N]);
            for (i, v) in m.iter_mut().enumerate() {
                *v = ((i * seed) % 17) as f32 / 16.0;
            }
            m
        };
        Box::new(MatmulRunner {
            a: matrix(3),
            b: matrix(5),
            c: Box::new([0.0; N * N]),
            multiply,
            isa,
        })
    }
}

fn widest() -> (MatmulFn, &'static str) {
    #[cfg(target_arch = "x86_64")]
    {
        if has("avx512f") {
            // SAFETY (of the call inside): AVX-512F is present, as just checked.
            return (|a, b, c| unsafe { x86::matmul_avx512(a, b, c) }, "avx512f");
        }
        if has("avx2") && has("fma") {
            // SAFETY: AVX2 and FMA are present, as just checked.
            return (|a, b, c| unsafe { x86::matmul_avx2(a, b, c) }, "avx2+fma");
        }
    }
    (matmul_scalar, "scalar")
}

impl Runner for MatmulRunner {
    fn work(&mut self, loops: u64) -> u64 {
        for _ in 0..loops {
            (self.multiply)(
                black_box(&self.a),
                black_box(&self.b),
                black_box(&mut self.c),
            );
        }
        u64::from(self.c[N * N - 1].to_bits())
    }

    fn empty(&mut self, loops: u64) -> u64 {
        for _ in 0..loops {
            black_box((
                black_box(&self.a),
                black_box(&self.b),
                black_box(&mut self.c),
            ));
        }
        u64::from(self.c[0].to_bits())
    }

    fn isa(&self) -> &'static str {
        self.isa
    }
}

#[inline(never)]
fn matmul_scalar(a: &[f32; N * N], b: &[f32; N * N], c: &mut [f32; N * N]) {
    for i in 0..N {
        let mut row = [0.0f32; N];
        for k in 0..N {
            let aik = a[i * N + k];
            for j in 0..N {
                row[j] += aik * b[k * N + j];
            }
        }
        c[i * N..(i + 1) * N].copy_from_slice(&row);
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::N;
    use std::arch::x86_64::*;

    /// A loop over rows whose pointers move on by a row each time, so each of A's
    /// elements is a broadcast at a fixed offset from one base register. Indexing the
    /// rows (`a[i * N + k]`) made LLVM address them base + index, which costs Intel
    /// cores a second micro-op each and ran this kernel at 0.63 of GCC's
    /// (bench/cpu-vs-c).
    #[inline(never)]
    #[target_feature(enable = "avx512f")]
    pub unsafe fn matmul_avx512(a: &[f32; N * N], b: &[f32; N * N], c: &mut [f32; N * N]) {
        // SAFETY: each row is 16 f32 inside the 256-element arrays.
        let rows: [__m512; N] =
            std::array::from_fn(|k| unsafe { _mm512_loadu_ps(b.as_ptr().add(k * N)) });
        let mut a_row = a.as_ptr();
        let mut c_row = c.as_mut_ptr();
        for _ in 0..N {
            let mut acc = _mm512_setzero_ps();
            for (k, row) in rows.iter().enumerate() {
                // SAFETY: a_row points at one of A's 16 rows of 16 f32, k < 16.
                acc = _mm512_fmadd_ps(_mm512_set1_ps(unsafe { *a_row.add(k) }), *row, acc);
            }
            // SAFETY: c_row points at one of C's rows; both pointers stay inside their
            // arrays, or one row past them after the last.
            unsafe {
                _mm512_storeu_ps(c_row, acc);
                a_row = a_row.add(N);
                c_row = c_row.add(N);
                // An empty asm hides where the pointer came from, so LLVM cannot turn
                // it back into base + index addressing.
                let mut address = a_row.expose_provenance();
                std::arch::asm!("/* {0} */", inout(reg) address, options(pure, nomem, nostack));
                a_row = std::ptr::with_exposed_provenance(address);
            }
        }
    }

    #[inline(never)]
    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn matmul_avx2(a: &[f32; N * N], b: &[f32; N * N], c: &mut [f32; N * N]) {
        for i in 0..N {
            let mut low = _mm256_setzero_ps();
            let mut high = _mm256_setzero_ps();
            for k in 0..N {
                let aik = _mm256_set1_ps(a[i * N + k]);
                // SAFETY: both halves of row k are inside the array.
                let (bl, bh) = unsafe {
                    (
                        _mm256_loadu_ps(b.as_ptr().add(k * N)),
                        _mm256_loadu_ps(b.as_ptr().add(k * N + 8)),
                    )
                };
                low = _mm256_fmadd_ps(aik, bl, low);
                high = _mm256_fmadd_ps(aik, bh, high);
            }
            // SAFETY: both halves of row i are inside the array.
            unsafe {
                _mm256_storeu_ps(c.as_mut_ptr().add(i * N), low);
                _mm256_storeu_ps(c.as_mut_ptr().add(i * N + 8), high);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_isa_gives_the_scalar_answer() {
        let a: [f32; N * N] = std::array::from_fn(|i| (i % 7) as f32);
        let b: [f32; N * N] = std::array::from_fn(|i| (i % 5) as f32);
        let mut expected = [0.0; N * N];
        matmul_scalar(&a, &b, &mut expected);
        let mut c = [0.0; N * N];
        let (multiply, isa) = widest();
        multiply(&a, &b, &mut c);
        assert_eq!(c, expected, "{isa}");
    }
}
