/* spmv: y = A x for A in CSR form, 4096 rows of 16 non-zeros, the columns and values
 * drawn from the same linear congruential sequence as ratelab's kernels/spmv.rs (same
 * seed, same order: all columns, then all values), so it is the same matrix. Scalar
 * code; compiled with no -m flags (so no FMA contraction, as in Rust). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels.h"

#define ROWS 4096
#define PER_ROW 16

static uint32_t *row_starts, *columns;
static float *values, *x, *y;
static uint64_t state = 0x2545f4914f6cdd1dull;

static uint32_t next(void)
{
    state = state * 6364136223846793005ull + 1;
    return (uint32_t)(state >> 33);
}

static int spmv_setup(void)
{
    row_starts = malloc((ROWS + 1) * sizeof *row_starts);
    columns = malloc(ROWS * PER_ROW * sizeof *columns);
    values = malloc(ROWS * PER_ROW * sizeof *values);
    x = malloc(ROWS * sizeof *x);
    y = calloc(ROWS, sizeof *y);
    if (!row_starts || !columns || !values || !x || !y) {
        fprintf(stderr, "spmv: out of memory\n");
        return -1;
    }
    for (uint32_t r = 0; r <= ROWS; r++)
        row_starts[r] = r * PER_ROW;
    for (size_t i = 0; i < ROWS * PER_ROW; i++)
        columns[i] = next() % ROWS;
    for (size_t i = 0; i < ROWS * PER_ROW; i++)
        values[i] = (float)(next() % 1000) / 1000.0f;
    for (size_t i = 0; i < ROWS; i++)
        x[i] = 1.0f + (float)(i % 3);
    return 0;
}

/* noipa and aligned(64): as dot_avx512 in dot.c. */
__attribute__((noipa, aligned(64))) static void spmv(const uint32_t *starts,
                                                     const uint32_t *cols, const float *vals,
                                                     const float *in, float *out, size_t rows)
{
    for (size_t r = 0; r < rows; r++) {
        size_t start = starts[r], end = starts[r + 1];
        float sum = 0.0f;
        for (size_t k = start; k < end; k++)
            sum += vals[k] * in[cols[k]];
        out[r] = sum;
    }
}

static uint64_t spmv_work(uint64_t loops)
{
    for (uint64_t i = 0; i < loops; i++) {
        const uint32_t *s = row_starts, *cl = columns;
        const float *v = values, *in = x;
        float *out = y;
        BARRIER(s);
        BARRIER(cl);
        BARRIER(v);
        BARRIER(in);
        BARRIER(out);
        spmv(s, cl, v, in, out, ROWS);
    }
    uint32_t bits;
    memcpy(&bits, &y[ROWS - 1], sizeof bits);
    return bits;
}

/* Offsets, and a checksum (FNV-1a over column, value bits) of the matrix and y[4095],
 * to check that the generator matches ratelab's (by a Rust copy of it, once). */
static void spmv_data_note(char *buf, size_t len)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < ROWS * PER_ROW; i++) {
        uint32_t v;
        memcpy(&v, &values[i], sizeof v);
        h = (h ^ columns[i]) * 1099511628211ull;
        h = (h ^ v) * 1099511628211ull;
    }
    uint32_t last;
    memcpy(&last, &y[ROWS - 1], sizeof last);
    snprintf(buf, len, "columns %u, values %u, x %u; matrix fnv1a %016llx, y[4095] bits %08x",
             OFF64(columns), OFF64(values), OFF64(x), (unsigned long long)h, last);
}

const struct kernel kernel_spmv = {"spmv", "scalar", spmv_setup, spmv_work, spmv_data_note};
