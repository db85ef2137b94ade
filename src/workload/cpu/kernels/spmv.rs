//! Sparse matrix times vector in CSR form: 4096 rows of 16 non-zeros at scattered
//! columns (544 KiB in all, in L2), so the loads and their indirection are timed.

use std::hint::black_box;

use super::{Kernel, Runner};

const ROWS: usize = 4096;
const PER_ROW: usize = 16;

/// The sparse matrix-vector test.
pub struct Spmv;

struct SpmvRunner {
    row_starts: Vec<u32>,
    columns: Vec<u32>,
    values: Vec<f32>,
    x: Vec<f32>,
    y: Vec<f32>,
}

impl Kernel for Spmv {
    fn name(&self) -> &'static str {
        "spmv"
    }

    fn loop_is(&self) -> &'static str {
        "one CSR sparse matrix times vector, 4096 rows of 16 non-zeros: 65536 multiply-adds"
    }

    fn unavailable(&self) -> Option<String> {
        None
    }

    fn runner(&self) -> Box<dyn Runner> {
        // A fixed linear congruential sequence, so every run multiplies the same matrix.
        let mut state = 0x2545_f491_4f6c_dd1d_u64;
        let mut next = || {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1);
            (state >> 33) as u32
        };
        let row_starts = (0..=ROWS).map(|r| (r * PER_ROW) as u32).collect();
        let columns = (0..ROWS * PER_ROW).map(|_| next() % ROWS as u32).collect();
        let values = (0..ROWS * PER_ROW)
            .map(|_| (next() % 1000) as f32 / 1000.0)
            .collect();
        Box::new(SpmvRunner {
            row_starts,
            columns,
            values,
            x: (0..ROWS).map(|i| 1.0 + (i % 3) as f32).collect(),
            y: vec![0.0; ROWS],
        })
    }
}

/// y = A x for A in CSR form.
#[inline(never)]
pub fn spmv(row_starts: &[u32], columns: &[u32], values: &[f32], x: &[f32], y: &mut [f32]) {
    for (row, out) in y.iter_mut().enumerate() {
        let (start, end) = (row_starts[row] as usize, row_starts[row + 1] as usize);
        let mut sum = 0.0f32;
        for (column, value) in columns[start..end].iter().zip(&values[start..end]) {
            sum += value * x[*column as usize];
        }
        *out = sum;
    }
}

impl Runner for SpmvRunner {
    fn work(&mut self, loops: u64) -> u64 {
        for _ in 0..loops {
            spmv(
                black_box(&self.row_starts),
                black_box(&self.columns),
                black_box(&self.values),
                black_box(&self.x),
                black_box(&mut self.y),
            );
        }
        u64::from(self.y[ROWS - 1].to_bits())
    }

    fn empty(&mut self, loops: u64) -> u64 {
        for _ in 0..loops {
            black_box((
                black_box(&self.row_starts),
                black_box(&self.columns),
                black_box(&self.values),
                black_box(&self.x),
                black_box(&mut self.y),
            ));
        }
        u64::from(self.y[0].to_bits())
    }

    fn isa(&self) -> &'static str {
        "scalar"
    }
}
