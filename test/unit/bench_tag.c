/*
 * bench_tag: cost of matching a directed (exact-tag) message against the expected queue, as a
 * function of how many other receives are posted.
 *
 * Each timed step posts one exact receive for a target tag and matches a message with that
 * tag (the work a directed receive costs the engine), with depth - 1 other exact receives
 * already in the queue, so the queue holds `depth` receives at match time (plus the
 * wildcards). The target tags rotate over 64 values. In the "10 wild" rows, 10 wildcard
 * receives that never match the targets are posted first: they are older than every target,
 * so each match walks all 10 (the worst case for a directed message).
 *
 * All queues are built first; the timed rounds then go round-robin over them, so a burst of
 * load from other processes hits every configuration alike; the best round is reported, with
 * the median beside it.
 *
 * usage: bench_tag [-i iterations per round] [-r rounds] [-b initial hash_bits]
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "tag/tag.h"
#include "util/hash.h"
#include "util/time.h"

#define N_TARGETS 64
#define N_WILD    10
#define N_DEPTHS  3
#define N_CONFIGS (2 * N_DEPTHS)
#define MAX_ROUNDS 1000

static const size_t depths[N_DEPTHS] = {1, 1000, 100000};

typedef struct bench_queue {
    tmx_tag_engine_t e;
    tmx_tag_exp_t   *others; /* depth - 1 exact receives that the targets never match */
    tmx_tag_exp_t    wild[N_WILD];
    size_t           depth;
    int              n_wild;
    double           ns[MAX_ROUNDS];
} bench_queue_t;

/* Target tags: bit 62 set; other receives: bit 61 set; wildcards: bit 63 (never match). */
static uint64_t target_tag(unsigned i)
{
    return (1ULL << 62) | (uint64_t)i;
}

static int queue_build(bench_queue_t *q, unsigned hash_bits, size_t depth, int n_wild)
{
    int    ret = -1;
    size_t i;

    q->depth  = depth;
    q->n_wild = n_wild;
    if (tmx_tag_engine_init(&q->e, hash_bits) != TMX_OK) {
        fprintf(stderr, "bench_tag: engine init with %u hash bits failed\n", hash_bits);
        goto out;
    }
    q->others = calloc(depth, sizeof(*q->others));
    if (q->others == NULL) {
        fprintf(stderr, "bench_tag: out of memory\n");
        goto out_cleanup;
    }
    for (i = 0; i < (size_t)n_wild; i++) {
        q->wild[i].tag  = (1ULL << 63) | ((uint64_t)i << 32);
        q->wild[i].mask = 0xffffffff00000000ULL; /* "any tag from one source" */
        q->wild[i].src  = 0;
        tmx_tag_exp_post(&q->e, &q->wild[i]);
    }
    for (i = 0; i + 1 < depth; i++) {
        q->others[i].tag  = (1ULL << 61) | (uint64_t)i;
        q->others[i].mask = TMX_TAG_MASK_FULL;
        q->others[i].src  = 0;
        tmx_tag_exp_post(&q->e, &q->others[i]);
    }
    ret = 0;
    goto out;

out_cleanup:
    tmx_tag_engine_cleanup(&q->e);
out:
    return ret;
}

static void queue_free(bench_queue_t *q)
{
    tmx_tag_engine_cleanup(&q->e);
    free(q->others);
}

/* Other receives sharing a bin with the targets: what a directed match walks past. */
static double queue_chain(const bench_queue_t *q)
{
    size_t walked = 0;

    for (unsigned t = 0; t < N_TARGETS; t++) {
        const tmx_list_t *bin = &q->e.exp_bins[tmx_hash_u64(target_tag(t)) & q->e.bin_mask];
        const tmx_list_t *pos;
        tmx_list_for_each(pos, bin) {
            walked++;
        }
    }
    return (double)walked / N_TARGETS;
}

/* One timed round: ns per post + match, or a negative value if a match went wrong. */
static double queue_round(bench_queue_t *q, long iters)
{
    tmx_tag_exp_t target;
    uint64_t      t0, t1;
    long          it;

    t0 = tmx_time_ns();
    for (it = 0; it < iters; it++) {
        uint64_t tag = target_tag((unsigned)it % N_TARGETS);

        target.tag  = tag;
        target.mask = TMX_TAG_MASK_FULL;
        target.src  = 0;
        tmx_tag_exp_post(&q->e, &target);
        /* Checking the result also keeps the compiler from dropping the work. */
        if (tmx_tag_exp_match(&q->e, tag, 1) != &target) {
            fprintf(stderr, "bench_tag: wrong match at depth %zu\n", q->depth);
            return -1.0;
        }
    }
    t1 = tmx_time_ns();
    return (double)(t1 - t0) / (double)iters;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    static bench_queue_t q[N_CONFIGS];
    long                 iters = 200000;
    int                  rounds = 31;
    unsigned             bits   = 10; /* TMX_TAG_HASH_BITS default */
    int                  opt, c, r, ret = 1, built = 0;

    while ((opt = getopt(argc, argv, "i:r:b:h")) != -1) {
        switch (opt) {
        case 'i':
            iters = strtol(optarg, NULL, 0);
            break;
        case 'r':
            rounds = atoi(optarg);
            break;
        case 'b':
            bits = (unsigned)strtoul(optarg, NULL, 0);
            break;
        default:
            fprintf(stderr, "usage: %s [-i iterations per round] [-r rounds] [-b hash_bits]\n",
                    argv[0]);
            return (opt == 'h') ? 0 : 2;
        }
    }
    if ((iters <= 0) || (rounds <= 0) || (rounds > MAX_ROUNDS)) {
        fprintf(stderr, "bench_tag: iterations > 0 and rounds in 1..%d please\n", MAX_ROUNDS);
        return 2;
    }
    for (built = 0; built < N_CONFIGS; built++) {
        if (queue_build(&q[built], bits, depths[built % N_DEPTHS],
                        (built < N_DEPTHS) ? 0 : N_WILD) != 0) {
            goto out;
        }
    }
    for (r = 0; r < rounds; r++) {
        for (c = 0; c < N_CONFIGS; c++) {
            q[c].ns[r] = queue_round(&q[c], iters);
            if (q[c].ns[r] < 0.0) {
                goto out;
            }
        }
    }

    printf("# directed match = post + match of one exact receive; %d rounds x %ld, "
           "initial hash bits %u\n", rounds, iters, bits);
    printf("%-9s %7s %7s %11s %10s %11s %11s\n", "wildcard", "depth", "bins", "bin walk",
           "ns best", "vs depth 1", "ns median");
    for (c = 0; c < N_CONFIGS; c++) {
        double best;
        qsort(q[c].ns, (size_t)rounds, sizeof(double), cmp_double);
        best = q[c].ns[0];
        printf("%-9s %7zu %7zu %11.2f %10.1f %11.2f %11.1f\n", (q[c].n_wild != 0) ? "10 wild" :
               "none", q[c].depth, (size_t)q[c].e.bin_mask + 1, queue_chain(&q[c]), best,
               best / q[(c / N_DEPTHS) * N_DEPTHS].ns[0], q[c].ns[rounds / 2]);
    }
    ret = 0;
out:
    while (built-- > 0) {
        queue_free(&q[built]);
    }
    return ret;
}
