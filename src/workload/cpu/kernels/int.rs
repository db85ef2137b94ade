//! Integer chain: four dependent 64-bit multiply-adds per loop, in assembly, so the
//! latency of the multiplier and adder is what is timed.

use std::hint::black_box;

use super::{Kernel, Runner};

/// The integer chain test.
pub struct Int;

struct IntRunner;

impl Kernel for Int {
    fn name(&self) -> &'static str {
        "int"
    }

    fn loop_is(&self) -> &'static str {
        "4 dependent 64-bit multiply-adds (imul + add)"
    }

    fn unavailable(&self) -> Option<String> {
        (!cfg!(target_arch = "x86_64")).then(|| "written for x86-64 only".to_string())
    }

    fn runner(&self) -> Box<dyn Runner> {
        Box::new(IntRunner)
    }
}

impl Runner for IntRunner {
    #[cfg(target_arch = "x86_64")]
    fn work(&mut self, loops: u64) -> u64 {
        if loops == 0 {
            return 0;
        }
        let mut x: u64 = black_box(0x9e37_79b9_7f4a_7c15);
        let multiplier: u64 = black_box(6_364_136_223_846_793_005);
        let addend: u64 = black_box(1_442_695_040_888_963_407);
        // SAFETY: registers only; the loop counts `n` down to zero.
        unsafe {
            std::arch::asm!(
                "2:",
                "imul {x}, {m}",
                "add {x}, {a}",
                "imul {x}, {m}",
                "add {x}, {a}",
                "imul {x}, {m}",
                "add {x}, {a}",
                "imul {x}, {m}",
                "add {x}, {a}",
                "dec {n}",
                "jnz 2b",
                x = inout(reg) x,
                m = in(reg) multiplier,
                a = in(reg) addend,
                n = inout(reg) loops => _,
                options(nomem, nostack),
            );
        }
        x
    }

    #[cfg(target_arch = "x86_64")]
    fn empty(&mut self, loops: u64) -> u64 {
        if loops == 0 {
            return 0;
        }
        // SAFETY: registers only; the same loop without its body.
        unsafe {
            std::arch::asm!(
                "2:",
                "dec {n}",
                "jnz 2b",
                n = inout(reg) loops => _,
                options(nomem, nostack),
            );
        }
        loops
    }

    #[cfg(not(target_arch = "x86_64"))]
    fn work(&mut self, _loops: u64) -> u64 {
        0
    }

    #[cfg(not(target_arch = "x86_64"))]
    fn empty(&mut self, _loops: u64) -> u64 {
        0
    }

    fn isa(&self) -> &'static str {
        "x86-64"
    }
}
