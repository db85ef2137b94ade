/* matmul: one 16x16 f32 C = A x B per loop, AVX-512: B's 16 rows held in registers,
 * each row of C a chain of 16 FMAs of a broadcast element of A times a row of B:
 * ratelab's kernels/matmul.rs (matmul_avx512). Written out, not as a loop over an
 * array of registers, so that gcc -O2 keeps the rows in registers as LLVM does.
 * The matrices come from malloc, as ratelab's Box<[f32; 256]> do. Compiled with
 * -mavx512f. */
#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels.h"

#define N 16

static float *a, *b, *c;

static float *matrix(unsigned seed)
{
    float *m = malloc(N * N * sizeof *m);
    if (m)
        for (unsigned i = 0; i < N * N; i++)
            m[i] = (float)((i * seed) % 17) / 16.0f;
    return m;
}

static int matmul_setup(void)
{
    a = matrix(3);
    b = matrix(5);
    c = calloc(N * N, sizeof *c);
    if (!a || !b || !c) {
        fprintf(stderr, "matmul: out of memory\n");
        return -1;
    }
    return 0;
}

/* noipa and aligned(64): as dot_avx512 in dot.c. */
__attribute__((noipa, aligned(64))) static void matmul_avx512(const float *x, const float *y,
                                                              float *z)
{
#define ROW(k) const __m512 r##k = _mm512_loadu_ps(y + (k) * N)
    ROW(0); ROW(1); ROW(2); ROW(3); ROW(4); ROW(5); ROW(6); ROW(7);
    ROW(8); ROW(9); ROW(10); ROW(11); ROW(12); ROW(13); ROW(14); ROW(15);
#undef ROW
    for (int i = 0; i < N; i++) {
        const float *xi = x + i * N;
        __m512 acc = _mm512_setzero_ps();
#define STEP(k) acc = _mm512_fmadd_ps(_mm512_set1_ps(xi[k]), r##k, acc)
        STEP(0); STEP(1); STEP(2); STEP(3); STEP(4); STEP(5); STEP(6); STEP(7);
        STEP(8); STEP(9); STEP(10); STEP(11); STEP(12); STEP(13); STEP(14); STEP(15);
#undef STEP
        _mm512_storeu_ps(z + i * N, acc);
    }
}

static uint64_t matmul_work(uint64_t loops)
{
    for (uint64_t i = 0; i < loops; i++) {
        const float *x = a, *y = b;
        float *z = c;
        BARRIER(x);
        BARRIER(y);
        BARRIER(z);
        matmul_avx512(x, y, z);
    }
    uint32_t bits;
    memcpy(&bits, &c[N * N - 1], sizeof bits);
    return bits;
}

static void matmul_data_note(char *buf, size_t len)
{
    snprintf(buf, len, "a %u, b %u, c %u", OFF64(a), OFF64(b), OFF64(c));
}

const struct kernel kernel_matmul = {"matmul", "avx512f", matmul_setup, matmul_work,
                                     matmul_data_note};
