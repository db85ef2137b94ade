/* fma: 8 independent chains of vfmadd231ps ymm per loop, dec/jnz: the same
 * instructions as ratelab's kernels/fma.rs (set-up, loop and tail). Compiled with
 * -mavx2 -mfma, as ratelab's fma_loop has target_feature "avx,avx2,fma". */
#include "kernels.h"

static int fma_setup(void) { return 0; }

static uint64_t fma_work(uint64_t loops)
{
    if (loops == 0)
        return 0;
    float factors[2] = {0.999999f, 1e-7f};
    const float *f = factors;
    uint32_t lane;
    BARRIER(f);
    __asm__ volatile(
        "vbroadcastss (%[f]), %%ymm8\n\t"
        "vbroadcastss 4(%[f]), %%ymm9\n\t"
        "vmovaps %%ymm8, %%ymm0\n\t"
        "vmovaps %%ymm8, %%ymm1\n\t"
        "vmovaps %%ymm8, %%ymm2\n\t"
        "vmovaps %%ymm8, %%ymm3\n\t"
        "vmovaps %%ymm8, %%ymm4\n\t"
        "vmovaps %%ymm8, %%ymm5\n\t"
        "vmovaps %%ymm8, %%ymm6\n\t"
        "vmovaps %%ymm8, %%ymm7\n\t"
        ".p2align 6\n\t" /* the loop starts a 64-byte line (kernels.h) */
        "2:\n\t"
        "vfmadd231ps %%ymm9, %%ymm8, %%ymm0\n\t"
        "vfmadd231ps %%ymm9, %%ymm8, %%ymm1\n\t"
        "vfmadd231ps %%ymm9, %%ymm8, %%ymm2\n\t"
        "vfmadd231ps %%ymm9, %%ymm8, %%ymm3\n\t"
        "vfmadd231ps %%ymm9, %%ymm8, %%ymm4\n\t"
        "vfmadd231ps %%ymm9, %%ymm8, %%ymm5\n\t"
        "vfmadd231ps %%ymm9, %%ymm8, %%ymm6\n\t"
        "vfmadd231ps %%ymm9, %%ymm8, %%ymm7\n\t"
        "dec %[n]\n\t"
        "jnz 2b\n\t"
        "vaddps %%ymm7, %%ymm0, %%ymm0\n\t"
        "vmovd %%xmm0, %[lane]\n\t"
        "vzeroupper"
        : [n] "+r"(loops), [lane] "=r"(lane)
        : [f] "r"(f)
        : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9",
          "cc", "memory");
    return lane;
}

const struct kernel kernel_fma = {"fma", "avx2+fma", fma_setup, fma_work, NULL};
