/* dot: one dot product of two 1024-element f32 vectors per loop, AVX-512 with four
 * 16-wide accumulators, 64 elements a step, then _mm512_reduce_add_ps: ratelab's
 * kernels/dot.rs (dot_avx512, the isa it reports as avx512f). The vectors come from
 * malloc, as ratelab's Vec<f32> do. Compiled with -mavx512f. */
#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels.h"

#define N 1024

static float *a, *b;

static int dot_setup(void)
{
    a = malloc(N * sizeof *a);
    b = malloc(N * sizeof *b);
    if (!a || !b) {
        fprintf(stderr, "dot: out of memory\n");
        return -1;
    }
    for (int i = 0; i < N; i++) {
        a[i] = 1.0f + (float)(i % 7) * 1e-3f;
        b[i] = 1.0f - (float)(i % 5) * 1e-3f;
    }
    return 0;
}

/* noipa: the caller knows nothing of it (not even that it is pure), as ratelab's
 * #[inline(never)] function reached through a pointer; aligned(64): see kernels.h. */
__attribute__((noipa, aligned(64))) static float dot_avx512(const float *x, const float *y,
                                                            size_t len)
{
    size_t n = len / 64 * 64;
    __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
    __m512 acc2 = _mm512_setzero_ps(), acc3 = _mm512_setzero_ps();
    for (size_t i = 0; i < n; i += 64) {
        acc0 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i), _mm512_loadu_ps(y + i), acc0);
        acc1 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i + 16), _mm512_loadu_ps(y + i + 16), acc1);
        acc2 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i + 32), _mm512_loadu_ps(y + i + 32), acc2);
        acc3 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i + 48), _mm512_loadu_ps(y + i + 48), acc3);
    }
    __m512 sum = _mm512_add_ps(_mm512_add_ps(acc0, acc1), _mm512_add_ps(acc2, acc3));
    return _mm512_reduce_add_ps(sum);
}

static uint64_t dot_work(uint64_t loops)
{
    float sum = 0.0f;
    for (uint64_t i = 0; i < loops; i++) {
        const float *x = a, *y = b;
        BARRIER(x);
        BARRIER(y);
        sum += dot_avx512(x, y, N);
    }
    uint32_t bits;
    memcpy(&bits, &sum, sizeof bits);
    return bits;
}

static void dot_data_note(char *buf, size_t len)
{
    snprintf(buf, len, "a %u, b %u", OFF64(a), OFF64(b));
}

const struct kernel kernel_dot = {"dot", "avx512f", dot_setup, dot_work, dot_data_note};
