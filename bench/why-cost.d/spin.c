/* THREADS busy threads for SECONDS: the process `bench/why-cost` has ratelab watch. */
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

static double seconds;

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static void *spin(void *arg) {
    volatile unsigned long n = 0;
    double end = now() + seconds;
    (void)arg;
    while (now() < end)
        for (int i = 0; i < 100000; i++)
            n++;
    return NULL;
}

int main(int argc, char **argv) {
    int threads = argc > 1 ? atoi(argv[1]) : 64;
    seconds = argc > 2 ? atof(argv[2]) : 10;
    pthread_t *ids = calloc(threads, sizeof *ids);
    for (int i = 0; i < threads; i++)
        pthread_create(&ids[i], NULL, spin, NULL);
    for (int i = 0; i < threads; i++)
        pthread_join(ids[i], NULL);
    return 0;
}
