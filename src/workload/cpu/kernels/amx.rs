//! Intel AMX tile multiply: four independent bf16 tile products (tdpbf16ps) per loop,
//! each a 16x32 by 32x16 multiply into a 16x16 f32 tile. Linux hands out tile state only
//! on request (arch_prctl ARCH_REQ_XCOMP_PERM, see the kernel's Documentation/arch/x86/
//! xstate.rst), so the kernel asks for it before any thread runs.

use super::{Kernel, Runner, has};

/// arch_prctl request for permission to use an extended state component.
const ARCH_REQ_XCOMP_PERM: libc::c_int = 0x1023;
/// The xstate component of AMX tile data.
const XFEATURE_XTILEDATA: libc::c_ulong = 18;

/// The AMX test.
pub struct Amx;

struct AmxRunner {
    /// Tile configuration (palette 1): tiles 0-3 accumulators, 4 = A, 5 = B.
    config: [u8; 64],
    a: Box<[u8; 1024]>,
    b: Box<[u8; 1024]>,
    c: Box<[u8; 1024]>,
}

impl Kernel for Amx {
    fn name(&self) -> &'static str {
        "amx"
    }

    fn loop_is(&self) -> &'static str {
        "4 independent AMX bf16 tile products (tdpbf16ps 16x32 by 32x16): 32768 multiply-adds"
    }

    fn unavailable(&self) -> Option<String> {
        (!(has("amx-tile") && has("amx-bf16")))
            .then(|| "the CPU has no AMX matrix unit (cpuid flags amx_tile, amx_bf16)".to_string())
    }

    fn permit(&self) -> Result<(), String> {
        // SAFETY: arch_prctl with these arguments only changes the process's xstate permissions.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_arch_prctl,
                ARCH_REQ_XCOMP_PERM,
                XFEATURE_XTILEDATA,
            )
        };
        if rc == 0 {
            Ok(())
        } else {
            Err(format!(
                "the kernel refused AMX tile state (arch_prctl ARCH_REQ_XCOMP_PERM): {}",
                std::io::Error::last_os_error()
            ))
        }
    }

    fn runner(&self) -> Box<dyn Runner> {
        let mut config = [0u8; 64];
        config[0] = 1; // palette 1
        for tile in 0..6 {
            // 16 rows of 64 bytes each: 16 f32, or 32 bf16, or 16 bf16 pairs.
            config[16 + 2 * tile] = 64;
            config[48 + tile] = 16;
        }
        // bf16 1.0 is 0x3f80; small values keep the sums finite.
        let bf16 = |value: u16| {
            let mut tile = Box::new([0u8; 1024]);
            for pair in tile.chunks_exact_mut(2) {
                pair.copy_from_slice(&value.to_le_bytes());
            }
            tile
        };
        Box::new(AmxRunner {
            config,
            a: bf16(0x3c00),
            b: bf16(0x3c00),
            c: Box::new([0u8; 1024]),
        })
    }
}

impl Runner for AmxRunner {
    fn work(&mut self, loops: u64) -> u64 {
        self.run(loops, true)
    }

    fn empty(&mut self, loops: u64) -> u64 {
        self.run(loops, false)
    }

    fn isa(&self) -> &'static str {
        "amx-bf16"
    }
}

impl AmxRunner {
    #[cfg(target_arch = "x86_64")]
    fn run(&mut self, loops: u64, work: bool) -> u64 {
        if loops == 0 {
            return 0;
        }
        macro_rules! tiles {
            ($($body:literal),*) => {
                // SAFETY: `permit` obtained tile state and `unavailable` checked AMX; the
                // tiles are configured, used and released within this block; the
                // pointers are to 1 KiB buffers that hold 16 rows of 64 bytes.
                unsafe {
                    std::arch::asm!(
                        "ldtilecfg [{config}]",
                        "tileloadd tmm4, [{a} + {stride} * 1]",
                        "tileloadd tmm5, [{b} + {stride} * 1]",
                        "tilezero tmm0",
                        "tilezero tmm1",
                        "tilezero tmm2",
                        "tilezero tmm3",
                        "2:",
                        $($body,)*
                        "dec {n}",
                        "jnz 2b",
                        "tilestored [{c} + {stride} * 1], tmm0",
                        "tilerelease",
                        config = in(reg) self.config.as_ptr(),
                        a = in(reg) self.a.as_ptr(),
                        b = in(reg) self.b.as_ptr(),
                        c = in(reg) self.c.as_mut_ptr(),
                        stride = in(reg) 64usize,
                        n = inout(reg) loops => _,
                        out("tmm0") _, out("tmm1") _, out("tmm2") _, out("tmm3") _,
                        out("tmm4") _, out("tmm5") _,
                        options(nostack),
                    );
                }
            };
        }
        if work {
            tiles!(
                "tdpbf16ps tmm0, tmm4, tmm5",
                "tdpbf16ps tmm1, tmm4, tmm5",
                "tdpbf16ps tmm2, tmm4, tmm5",
                "tdpbf16ps tmm3, tmm4, tmm5"
            );
        } else {
            tiles!();
        }
        u64::from(u32::from_le_bytes(self.c[..4].try_into().expect("4 bytes")))
    }

    #[cfg(not(target_arch = "x86_64"))]
    fn run(&mut self, loops: u64, _work: bool) -> u64 {
        loops
    }
}
