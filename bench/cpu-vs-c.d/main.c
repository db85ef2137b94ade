/* The C reference of bench/cpu-vs-c: runs one kernel on the calling thread for about
 * SECONDS and prints one JSON line with its loops per second.
 *
 * Timing: the loop count is calibrated by doubling from 16 until one call takes at
 * least CALIBRATE_SECONDS (which also warms up caches, predictors and the vector
 * units), scaled to SECONDS, and then that many loops run in one call of `work`, with
 * clock_gettime(CLOCK_MONOTONIC) read just before and just after: a plain C loop, its
 * own cost (the loop counter, the call) left in, as ratelab's raw_loops_per_sec. The
 * thread's CPU clock over the same call is printed too (cpu_seconds), for a rate that
 * other work sharing the core does not move, as ratelab's own.
 *
 * Usage: cpu-vs-c-kernels --test NAME [--seconds S]   (S default 1) */
#define _GNU_SOURCE
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels.h"

#define CALIBRATE_SECONDS 0.02

static const struct kernel *const KERNELS[] = {
    &kernel_int, &kernel_fma, &kernel_dot, &kernel_matmul, &kernel_spmv, &kernel_amx,
};

/* Where every result goes, so that no work can be dropped. */
static volatile uint64_t sink;

static double clock_s(clockid_t clock)
{
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double now(void)
{
    return clock_s(CLOCK_MONOTONIC);
}

static int usage(FILE *out, int code)
{
    fprintf(out, "usage: cpu-vs-c-kernels --test NAME [--seconds S]\n  NAME:");
    for (size_t i = 0; i < sizeof KERNELS / sizeof *KERNELS; i++)
        fprintf(out, " %s", KERNELS[i]->name);
    fprintf(out, "\n");
    return code;
}

int main(int argc, char **argv)
{
    const char *name = NULL;
    double seconds = 1.0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--test") && i + 1 < argc) {
            name = argv[++i];
        } else if (!strcmp(argv[i], "--seconds") && i + 1 < argc) {
            char *end;
            seconds = strtod(argv[++i], &end);
            if (*end || !(seconds > 0.0)) {
                fprintf(stderr, "cpu-vs-c-kernels: invalid --seconds \"%s\"\n", argv[i]);
                return 2;
            }
        } else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            return usage(stdout, 0);
        } else {
            fprintf(stderr, "cpu-vs-c-kernels: unknown argument \"%s\"\n", argv[i]);
            return usage(stderr, 2);
        }
    }
    const struct kernel *k = NULL;
    for (size_t i = 0; name && i < sizeof KERNELS / sizeof *KERNELS; i++)
        if (!strcmp(KERNELS[i]->name, name))
            k = KERNELS[i];
    if (!k) {
        fprintf(stderr, "cpu-vs-c-kernels: unknown or missing --test \"%s\"\n", name ? name : "");
        return usage(stderr, 2);
    }
    if (k->setup() != 0)
        return 1;

    int cpu_first = sched_getcpu();
    uint64_t chunk = 16;
    double took;
    for (;;) {
        double t0 = now();
        sink ^= k->work(chunk);
        took = now() - t0;
        if (took >= CALIBRATE_SECONDS || chunk >= (1ull << 40))
            break;
        chunk *= 2;
    }
    uint64_t loops = (uint64_t)((double)chunk * seconds / took);
    if (loops < 1)
        loops = 1;

    double c0 = clock_s(CLOCK_THREAD_CPUTIME_ID);
    double t0 = now();
    sink ^= k->work(loops);
    double t1 = now();
    double c1 = clock_s(CLOCK_THREAD_CPUTIME_ID);
    int cpu_last = sched_getcpu();

    char note[256] = "";
    if (k->data_note)
        k->data_note(note, sizeof note);
    printf("{\"test\": \"%s\", \"isa\": \"%s\", \"loops\": %llu, \"seconds\": %.9f, "
           "\"loops_per_sec\": %.6e, \"cpu_seconds\": %.9f, \"calibration_loops\": %llu, \"cpu_first\": %d, "
           "\"cpu_last\": %d, \"data\": \"%s\", \"sink\": %llu}\n",
           k->name, k->isa, (unsigned long long)loops, t1 - t0, (double)loops / (t1 - t0), c1 - c0,
           (unsigned long long)chunk, cpu_first, cpu_last, note, (unsigned long long)sink);
    return 0;
}
