/* amx: 4 independent tdpbf16ps per loop (tiles 0-3 += tile 4 x tile 5, 16 rows of 64
 * bytes each), dec/jnz, with ldtilecfg, the tile loads, tilezero before and
 * tilestored, tilerelease after: the same instructions as ratelab's kernels/amx.rs.
 * Assembly, like ratelab's (which has no target_feature for it), so no -m flags: the
 * assembler knows the instructions. Tile state is asked for first (arch_prctl
 * ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA; Documentation/arch/x86/xstate.rst). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "kernels.h"

#define ARCH_REQ_XCOMP_PERM 0x1023
#define XFEATURE_XTILEDATA 18

static unsigned char config[64];
static unsigned char *ta, *tb, *tc;

static unsigned char *bf16_tile(uint16_t value)
{
    unsigned char *t = malloc(1024);
    if (t)
        for (int i = 0; i < 1024; i += 2)
            memcpy(t + i, &value, 2); /* little-endian, as to_le_bytes */
    return t;
}

static int amx_setup(void)
{
    if (syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) != 0) {
        fprintf(stderr, "amx: the kernel refused AMX tile state (arch_prctl): %s\n",
                strerror(errno));
        return -1;
    }
    config[0] = 1; /* palette 1 */
    for (int tile = 0; tile < 6; tile++) {
        config[16 + 2 * tile] = 64; /* bytes per row */
        config[48 + tile] = 16;     /* rows */
    }
    ta = bf16_tile(0x3c00);
    tb = bf16_tile(0x3c00);
    tc = calloc(1024, 1);
    if (!ta || !tb || !tc) {
        fprintf(stderr, "amx: out of memory\n");
        return -1;
    }
    return 0;
}

static uint64_t amx_work(uint64_t loops)
{
    if (loops == 0)
        return 0;
    __asm__ volatile(
        "ldtilecfg (%[config])\n\t"
        "tileloadd (%[a],%[stride],1), %%tmm4\n\t"
        "tileloadd (%[b],%[stride],1), %%tmm5\n\t"
        "tilezero %%tmm0\n\t"
        "tilezero %%tmm1\n\t"
        "tilezero %%tmm2\n\t"
        "tilezero %%tmm3\n\t"
        ".p2align 6\n\t" /* the loop starts a 64-byte line (kernels.h) */
        "2:\n\t"
        "tdpbf16ps %%tmm5, %%tmm4, %%tmm0\n\t"
        "tdpbf16ps %%tmm5, %%tmm4, %%tmm1\n\t"
        "tdpbf16ps %%tmm5, %%tmm4, %%tmm2\n\t"
        "tdpbf16ps %%tmm5, %%tmm4, %%tmm3\n\t"
        "dec %[n]\n\t"
        "jnz 2b\n\t"
        "tilestored %%tmm0, (%[c],%[stride],1)\n\t"
        "tilerelease"
        : [n] "+r"(loops)
        : [config] "r"(config), [a] "r"(ta), [b] "r"(tb), [c] "r"(tc), [stride] "r"((size_t)64)
        : "cc", "memory");
    uint32_t first;
    memcpy(&first, tc, sizeof first);
    return first;
}

const struct kernel kernel_amx = {"amx", "amx-bf16", amx_setup, amx_work, NULL};
