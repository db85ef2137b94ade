/* int: 4 dependent 64-bit imul + add pairs per loop, the loop closed by dec/jnz: the
 * same instructions as ratelab's kernels/int.rs. Compiled with no -m flags. */
#include "kernels.h"

static int int_setup(void) { return 0; }

static uint64_t int_work(uint64_t loops)
{
    if (loops == 0)
        return 0;
    uint64_t x = 0x9e3779b97f4a7c15ull;
    uint64_t m = 6364136223846793005ull;
    uint64_t a = 1442695040888963407ull;
    /* As black_box in ratelab: values the compiler cannot know. */
    __asm__ volatile("" : "+r"(x), "+r"(m), "+r"(a));
    __asm__ volatile(
        ".p2align 6\n\t" /* the loop starts a 64-byte line (kernels.h) */
        "2:\n\t"
        "imul %[m], %[x]\n\t"
        "add %[a], %[x]\n\t"
        "imul %[m], %[x]\n\t"
        "add %[a], %[x]\n\t"
        "imul %[m], %[x]\n\t"
        "add %[a], %[x]\n\t"
        "imul %[m], %[x]\n\t"
        "add %[a], %[x]\n\t"
        "dec %[n]\n\t"
        "jnz 2b"
        : [x] "+r"(x), [n] "+r"(loops)
        : [m] "r"(m), [a] "r"(a)
        : "cc");
    return x;
}

const struct kernel kernel_int = {"int", "x86-64", int_setup, int_work, NULL};
