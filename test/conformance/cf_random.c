/*
 * Random schedules: for each schedule k and each ring pair (src -> me -> dst), a few messages
 * with random tags from a small alphabet (so that receives compete for them), random sizes
 * (mostly small, some at and across the eager limit, a few rendezvous) and random
 * synchronous sends; receives with random tags and masks, generated so that the reference
 * model matches every one of them. Sends and receives are posted in a random interleaving
 * with progress; the leftovers are drained by exact receives or probe-discard. Both ranks of a
 * pair derive the same schedule from (seed, k, sender).
 */
#define _GNU_SOURCE
#include "cf.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CF_RND_MAX_MSGS 8

typedef struct cf_sched {
    cf_msg_t    msgs[CF_RND_MAX_MSGS];
    cf_rcv_t    rcvs[CF_RND_MAX_MSGS];
    cf_script_t s;
} cf_sched_t;

static size_t cf_rnd_len(const cf_t *cf, uint64_t *st)
{
    uint64_t p = cf_rand(st) % 100;
    size_t   e = cf->eager_max;

    if (p < 80) {
        return cf_rand(st) % 65;
    }
    if (p < 90) {
        return 65 + cf_rand(st) % 2000;
    }
    if (p < 97) {
        return (e > 0 ? e - 1 : 0) + cf_rand(st) % 3; /* e-1, e, e+1 */
    }
    return e + 1 + cf_rand(st) % (64u << 10);
}

static void cf_sched_gen(const cf_t *cf, long k, int sender, int peer, cf_sched_t *sc)
{
    uint64_t  st    = cf->seed ^ ((uint64_t)k * 0x9e3779b97f4a7c15ull) ^
                      ((uint64_t)sender * 0xc2b2ae3d27d4eb4full);
    tmx_tag_t space = cf_tag(cf, (uint64_t)(k & 0xffff) << 32);
    tmx_tag_t smask = CF_CASE_MASK | (0xffffull << 32);
    size_t    nm, nr = 0, maxlen = 0;
    char      taken[CF_RND_MAX_MSGS] = {0};
    size_t    want;

    (void)cf_rand(&st);
    nm = 1 + cf_rand(&st) % CF_RND_MAX_MSGS;
    for (size_t i = 0; i < nm; i++) {
        uint64_t r   = cf_rand(&st);
        uint64_t low = (r % 8) | (((r >> 8) % 4 == 0) ? 0x100 : 0);

        sc->msgs[i].tag   = space | low;
        sc->msgs[i].len   = cf_rnd_len(cf, &st);
        sc->msgs[i].flags = (cf_rand(&st) % 20 == 0) ? TMX_SEND_FLAG_SYNC : 0;
        maxlen            = (sc->msgs[i].len > maxlen) ? sc->msgs[i].len : maxlen;
    }
    want = 1 + cf_rand(&st) % nm;
    for (size_t tries = 0; nr < want && tries < 4 * want; tries++) {
        cf_rcv_t  *rv   = &sc->rcvs[nr];
        uint64_t   r    = cf_rand(&st);
        tmx_tag_t  base = sc->msgs[r % nm].tag;
        tmx_tag_t  mask;
        long       hit  = -1;

        switch ((r >> 16) % 6) {
        case 0:  mask = CF_FULL_MASK; break;
        case 1:  mask = smask | 0x7; break;
        case 2:  mask = smask | 0x100; break;
        case 3:  mask = smask; break; /* any tag of this schedule */
        case 4:  mask = smask | 0xff; break;
        default: mask = smask | (cf_rand(&st) & 0x1ff); break;
        }
        rv->mask = mask;
        /* Bits outside the mask must not matter: scramble them. */
        rv->tag    = base ^ (cf_rand(&st) & ~mask & 0x1ff);
        rv->buflen = (cf_rand(&st) % 20 == 0) ? (size_t)(cf_rand(&st) % (maxlen + 1)) : maxlen;
        for (size_t e = 0; e < nm && hit < 0; e++) {
            if (!taken[e] && (sc->msgs[e].tag & mask) == (rv->tag & mask)) {
                hit = (long)e;
            }
        }
        if (hit >= 0) {
            taken[hit] = 1;
            nr++;
        }
    }
    sc->s.msgs          = sc->msgs;
    sc->s.nmsgs         = nm;
    sc->s.rcvs          = sc->rcvs;
    sc->s.nrcvs         = nr;
    sc->s.order         = CF_ORDER_MIXED;
    sc->s.peer          = peer;
    sc->s.salt          = cf->seed + (uint64_t)k;
    sc->s.drain_by_recv = (int)(cf_rand(&st) & 1);
    sc->s.space_mask    = smask;
}

static void cf_sched_dump(const cf_t *cf, const char *dir, const cf_script_t *s)
{
    fprintf(stderr, "tmx_conformance: rank %d: %s rank %d: %zu messages, %zu receives, "
                    "leftovers by %s\n", cf->rank, dir, s->peer, s->nmsgs, s->nrcvs,
            s->drain_by_recv ? "exact receive" : "probe discard");
    for (size_t i = 0; i < s->nmsgs; i++) {
        fprintf(stderr, "  msg  #%zu tag 0x%016" PRIx64 " len %zu%s\n", i, s->msgs[i].tag,
                s->msgs[i].len, (s->msgs[i].flags & TMX_SEND_FLAG_SYNC) ? " sync" : "");
    }
    for (size_t j = 0; j < s->nrcvs; j++) {
        fprintf(stderr, "  recv #%zu tag 0x%016" PRIx64 " mask 0x%016" PRIx64 " buf %zu\n", j,
                s->rcvs[j].tag, s->rcvs[j].mask, s->rcvs[j].buflen);
    }
}

int cf_case_random(cf_t *cf)
{
    cf_sched_t out, in;
    int        rc = CF_PASS;
    char       label[96];
    double     t0 = cf_now();

    for (long k = 0; k < cf->schedules && rc == CF_PASS; k++) {
        cf_sched_gen(cf, k, cf->rank, cf->dst, &out);
        cf_sched_gen(cf, k, cf->src, cf->src, &in);
        snprintf(label, sizeof(label), "seed %" PRIu64 " schedule %ld", cf->seed, k);
        rc = cf_script_run(cf, &out.s, &in.s, label,
                           cf->seed ^ ((uint64_t)k << 20) ^ (uint64_t)cf->rank);
        if (rc != CF_PASS || cf->verbose) {
            fprintf(stderr, "tmx_conformance: rank %d: schedule %ld %s\n", cf->rank, k,
                    rc == CF_PASS ? "passed" : "FAILED");
            cf_sched_dump(cf, "to", &out.s);
            cf_sched_dump(cf, "from", &in.s);
        }
        cf_release(cf);
    }
    if (cf->rank == 0) {
        printf("# random: %ld schedules in %.1f s\n", cf->schedules, cf_now() - t0);
    }
    return rc;
}
