/* c2c.c: the phase probe of bench/compare.sh. Two threads, pinned to two cores (0 and 1 by
 * default), ping-pong one cache line for a few tens of milliseconds; prints the median round
 * trip in nanoseconds. This VM moves a cache line between its cores in one of (at least) two
 * modes, about 30 ns and about 200 ns a round trip, and switches between them over minutes;
 * every shared-memory latency follows. compare.sh runs this before and after every benchmark
 * run to record which mode that run saw. Not part of tmx; built with `cc -O2 -pthread`.
 *
 *   c2c [-a CORE] [-b CORE] [-t MS] [-k ROUNDTRIPS]
 *
 * Output, one line: median_ns p10_ns p90_ns batches
 * (a batch is K round trips timed together; the percentiles are over the batches, so a
 * preemption of either thread spoils one batch, not the median). Exit 1 on error, and when
 * the partner thread does not answer within one second (its core is taken). */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_BATCHES 65536

static struct {
    _Alignas(64) atomic_long seq; /* odd: A's turn done, B must answer; <0: stop */
    char pad[64 - sizeof(atomic_long)];
} line;

static int core_b = 1;

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int pin(pthread_t t, int core)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(core, &set);
    return pthread_setaffinity_np(t, sizeof(set), &set);
}

static void *partner(void *arg)
{
    long v;
    uint64_t spins = 0, deadline = 0;
    (void)arg;
    for (;;) {
        v = atomic_load_explicit(&line.seq, memory_order_acquire);
        if (v < 0) {
            break;
        }
        if (v & 1) {
            atomic_store_explicit(&line.seq, v + 1, memory_order_release);
            spins = 0;
            deadline = 0;
            continue;
        }
        if ((++spins & 0xffff) == 0) { /* idle for long: give up after a second */
            uint64_t t = now_ns();
            if (deadline == 0) {
                deadline = t + 1000000000u;
            } else if (t > deadline) {
                break;
            }
        }
    }
    return NULL;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

static void usage(const char *argv0)
{
    fprintf(stderr, "usage: %s [-a CORE] [-b CORE] [-t MS] [-k ROUNDTRIPS]\n"
                    "  ping-pongs one cache line between two threads pinned to cores A "
                    "(default 0)\n  and B (default 1) for MS milliseconds (default 30), in "
                    "batches of K round trips\n  (default 200); prints: median_ns p10_ns "
                    "p90_ns batches (ns per round trip)\n", argv0);
}

int main(int argc, char **argv)
{
    int core_a = 0, ms = 30, k = 200, i, rc, timed_out = 0;
    size_t n = 0;
    static uint64_t batch[MAX_BATCHES];
    pthread_t b;
    uint64_t end, t0, t1, spins;
    long v = 0;

    for (i = 1; i < argc; i++) {
        if (i + 1 < argc && strcmp(argv[i], "-a") == 0) {
            core_a = atoi(argv[++i]);
        } else if (i + 1 < argc && strcmp(argv[i], "-b") == 0) {
            core_b = atoi(argv[++i]);
        } else if (i + 1 < argc && strcmp(argv[i], "-t") == 0) {
            ms = atoi(argv[++i]);
        } else if (i + 1 < argc && strcmp(argv[i], "-k") == 0) {
            k = atoi(argv[++i]);
        } else {
            usage(argv[0]);
            return 2;
        }
    }
    if (ms <= 0 || ms > 10000 || k <= 0 || k > 1000000 || core_a < 0 || core_b < 0 ||
        core_a >= CPU_SETSIZE || core_b >= CPU_SETSIZE || core_a == core_b) {
        usage(argv[0]);
        return 2;
    }
    rc = pin(pthread_self(), core_a);
    if (rc != 0) {
        fprintf(stderr, "c2c: cannot pin to core %d: %s\n", core_a, strerror(rc));
        return 1;
    }
    {
        pthread_attr_t attr;
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(core_b, &set);
        pthread_attr_init(&attr);
        pthread_attr_setaffinity_np(&attr, sizeof(set), &set);
        rc = pthread_create(&b, &attr, partner, NULL);
        pthread_attr_destroy(&attr);
        if (rc != 0) {
            fprintf(stderr, "c2c: cannot start a thread on core %d: %s\n", core_b,
                    strerror(rc));
            return 1;
        }
    }
    end = now_ns() + (uint64_t)ms * 1000000u;
    while (n < MAX_BATCHES && !timed_out) {
        t0 = now_ns();
        if (t0 >= end) {
            break;
        }
        for (i = 0; i < k; i++) {
            atomic_store_explicit(&line.seq, ++v, memory_order_release); /* odd */
            ++v;
            spins = 0;
            while (atomic_load_explicit(&line.seq, memory_order_acquire) != v) {
                if ((++spins & 0xffff) == 0 && now_ns() > t0 + 1000000000u) {
                    timed_out = 1;
                    break;
                }
            }
            if (timed_out) {
                break;
            }
        }
        t1 = now_ns();
        if (!timed_out) {
            batch[n++] = t1 - t0;
        }
    }
    atomic_store_explicit(&line.seq, -1, memory_order_release);
    pthread_join(b, NULL);
    if (timed_out || n == 0) {
        fprintf(stderr, "c2c: the thread on core %d did not answer (core busy?)\n", core_b);
        return 1;
    }
    qsort(batch, n, sizeof(batch[0]), cmp_u64);
    printf("%.1f %.1f %.1f %zu\n", (double)batch[n / 2] / k, (double)batch[n / 10] / k,
           (double)batch[n * 9 / 10] / k, n);
    return 0;
}
