/* The C twins of ratelab's in-core kernels (src/workload/cpu/kernels/), one file each,
 * each compiled with the -m flags of ratelab's target_feature for that kernel. A kernel
 * sets up its data once, then runs a given number of loops; the driver (main.c) times
 * that. The result of `work` depends on all the work, and goes to a volatile sink. */
#ifndef CPU_VS_C_KERNELS_H
#define CPU_VS_C_KERNELS_H

#include <stddef.h>
#include <stdint.h>

struct kernel {
    const char *name;
    const char *isa;   /* as ratelab reports it in `isa` */
    /* Data and permissions, before any timing; 0 on success, else a message on stderr. */
    int (*setup)(void);
    /* `loops` loops of the work. */
    uint64_t (*work)(uint64_t loops);
    /* What the record should say of the data: the arrays' offsets from a 64-byte
     * boundary (ratelab's come from malloc too), checksums; NULL when nothing. */
    void (*data_note)(char *buf, size_t len);
};

extern const struct kernel kernel_int, kernel_fma, kernel_dot, kernel_matmul, kernel_spmv,
    kernel_amx;

/* Where a loop sits matters on this kind of CPU: the same 27-byte inner loop of spmv
 * ran anywhere from 23k to 39k loops/s depending on its offset in a 64-byte line and
 * on where the outer loop sat (measured when bench/cpu-vs-c was written), for gcc's code
 * as for LLVM's. So that editing one file cannot move another's loop, placement here
 * is fixed: the loops written in assembly start a 64-byte line (.p2align 6; the
 * padding runs once per call), and the compiled kernel functions start one
 * (aligned(64)), their loops placed by gcc -O2 within them. The script prints where
 * each binary's loops sit. */

/* An optimisation barrier on a pointer, as Rust's std::hint::black_box: the compiler
 * must assume the value (and what it points to) changed, so it cannot hoist or drop
 * the work that uses it. */
#define BARRIER(p) __asm__ volatile("" : "+r"(p) : : "memory")

/* Offset of a pointer from the 64-byte boundary below it. */
#define OFF64(p) ((unsigned)((uintptr_t)(p) % 64))

#endif
