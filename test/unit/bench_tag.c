/*
 * bench_tag: cost of matching a directed (exact-tag) message against the expected queue, as a
 * function of how many other receives are posted.
 *
 * Each timed step posts one exact receive for a target tag and matches a message with that
 * tag (the work a directed receive costs the engine), with depth - 1 other exact receives
 * already in the queue, so the queue holds `depth` receives at match time. The target tags
 * rotate over 64 values. With -w, 10 wildcard receives that never match the targets are
 * posted too: "older" ones (posted first, so every match walks all of them) and "younger"
 * ones (posted after the others, so the walk stops at the first).
 *
 * usage: bench_tag [-i iterations] [-r repetitions] [-b hash_bits]
 * Prints the best of the repetitions in ns per match and the ratio to depth 1.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "tag/tag.h"
#include "util/time.h"

#define N_TARGETS 64
#define N_WILD    10

typedef enum { WILD_NONE, WILD_OLDER, WILD_YOUNGER } wild_mode_t;

static const char *wild_name[] = {"none", "10 older", "10 younger"};

typedef struct bench_recv {
    tmx_tag_exp_t exp;
} bench_recv_t;

/* Target tags: bit 62 set; other receives: bit 61 set; wildcards: bit 63 (never match). */
static uint64_t target_tag(unsigned i)
{
    return (1ULL << 62) | (uint64_t)i;
}

static void post_wild(tmx_tag_engine_t *e, bench_recv_t *w)
{
    for (int i = 0; i < N_WILD; i++) {
        w[i].exp.tag  = (1ULL << 63) | ((uint64_t)i << 32);
        w[i].exp.mask = 0xffffffff00000000ULL; /* "any tag from one source" */
        tmx_tag_exp_post(e, &w[i].exp);
    }
}

/* Returns ns per post+match at this depth, or a negative value on error. */
static double run_one(unsigned hash_bits, size_t depth, wild_mode_t wild, long iters)
{
    tmx_tag_engine_t e;
    bench_recv_t    *others = NULL;
    bench_recv_t     wilds[N_WILD];
    bench_recv_t     target;
    uint64_t         t0, t1;
    double           ns = -1.0;
    size_t           i;
    long             it;

    if (tmx_tag_engine_init(&e, hash_bits) != TMX_OK) {
        fprintf(stderr, "bench_tag: engine init with %u hash bits failed\n", hash_bits);
        goto out;
    }
    others = calloc(depth, sizeof(*others));
    if (others == NULL) {
        fprintf(stderr, "bench_tag: out of memory\n");
        goto out_cleanup;
    }
    if (wild == WILD_OLDER) {
        post_wild(&e, wilds);
    }
    for (i = 0; i + 1 < depth; i++) {
        others[i].exp.tag  = (1ULL << 61) | (uint64_t)i;
        others[i].exp.mask = TMX_TAG_MASK_FULL;
        tmx_tag_exp_post(&e, &others[i].exp);
    }
    if (wild == WILD_YOUNGER) {
        post_wild(&e, wilds);
    }

    t0 = tmx_time_ns();
    for (it = 0; it < iters; it++) {
        uint64_t tag = target_tag((unsigned)it % N_TARGETS);

        target.exp.tag  = tag;
        target.exp.mask = TMX_TAG_MASK_FULL;
        tmx_tag_exp_post(&e, &target.exp);
        /* Checking the result also keeps the compiler from dropping the work. */
        if (tmx_tag_exp_match(&e, tag) != &target.exp) {
            fprintf(stderr, "bench_tag: wrong match at depth %zu\n", depth);
            goto out_free;
        }
    }
    t1 = tmx_time_ns();
    ns = (double)(t1 - t0) / (double)iters;

out_free:
    free(others);
out_cleanup:
    tmx_tag_engine_cleanup(&e);
out:
    return ns;
}

int main(int argc, char **argv)
{
    static const size_t depths[] = {1, 1000, 100000};
    long                iters    = 2000000;
    int                 reps     = 5;
    unsigned            bits     = 10; /* TMX_TAG_HASH_BITS default */
    int                 opt;

    while ((opt = getopt(argc, argv, "i:r:b:h")) != -1) {
        switch (opt) {
        case 'i':
            iters = strtol(optarg, NULL, 0);
            break;
        case 'r':
            reps = atoi(optarg);
            break;
        case 'b':
            bits = (unsigned)strtoul(optarg, NULL, 0);
            break;
        default:
            fprintf(stderr, "usage: %s [-i iterations] [-r repetitions] [-b hash_bits]\n",
                    argv[0]);
            return (opt == 'h') ? 0 : 2;
        }
    }
    if ((iters <= 0) || (reps <= 0)) {
        fprintf(stderr, "bench_tag: iterations and repetitions must be positive\n");
        return 2;
    }

    printf("# directed match (post + match of one exact receive), best of %d x %ld, "
           "initial hash bits %u\n", reps, iters, bits);
    printf("%-12s %8s %12s %10s\n", "wildcards", "depth", "ns/match", "vs depth 1");
    for (int w = WILD_NONE; w <= WILD_YOUNGER; w++) {
        double base = 0.0;
        for (size_t d = 0; d < sizeof(depths) / sizeof(depths[0]); d++) {
            double best = -1.0;
            for (int r = 0; r < reps; r++) {
                double ns = run_one(bits, depths[d], (wild_mode_t)w, iters);
                if (ns < 0.0) {
                    return 1;
                }
                if ((best < 0.0) || (ns < best)) {
                    best = ns;
                }
            }
            if (d == 0) {
                base = best;
            }
            printf("%-12s %8zu %12.1f %10.2f\n", wild_name[w], depths[d], best, best / base);
        }
    }
    return 0;
}
