/*
 * Unit tests of the software tag matching engine (src/tag).
 *
 * The randomized test prints its seed; replay a failure with TMX_TAG_TEST_SEED=<seed>
 * (and TMX_TAG_TEST_OPS=<n> to change the number of operations, default 10000).
 */
#include <criterion/criterion.h>

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "tag/tag.h"
#include "util/hash.h"

/* MPI-like tag layout used by the tests: source in the high 32 bits, user tag in the low. */
#define SRC_SHIFT  32
#define MASK_ANY_SRC 0x00000000ffffffffULL /* ANY_SOURCE: compare the user tag only */
#define MASK_ANY_TAG 0xffffffff00000000ULL /* ANY_TAG: compare the source only */

static uint64_t mk_tag(uint32_t src, uint32_t tag)
{
    return ((uint64_t)src << SRC_SHIFT) | tag;
}

typedef struct test_recv {
    tmx_tag_exp_t exp;
    int           id;
} test_recv_t;

typedef struct test_msg {
    tmx_tag_unexp_t unexp;
    int             id;
} test_msg_t;

/* The sender of messages whose test does not care (the engine's senders are never 0). */
#define SENDER 1

/* A receive from src (0: any sender). */
static void post_src(tmx_tag_engine_t *e, test_recv_t *r, int id, uint64_t tag, uint64_t mask,
                     uint64_t src)
{
    r->id       = id;
    r->exp.tag  = tag;
    r->exp.mask = mask;
    r->exp.src  = src;
    tmx_tag_exp_post(e, &r->exp);
}

static void post(tmx_tag_engine_t *e, test_recv_t *r, int id, uint64_t tag, uint64_t mask)
{
    post_src(e, r, id, tag, mask, 0);
}

static void arrive_src(tmx_tag_engine_t *e, test_msg_t *m, int id, uint64_t tag, uint64_t src)
{
    m->id        = id;
    m->unexp.tag = tag;
    m->unexp.src = src;
    tmx_tag_unexp_add(e, &m->unexp);
}

static void arrive(tmx_tag_engine_t *e, test_msg_t *m, int id, uint64_t tag)
{
    arrive_src(e, m, id, tag, SENDER);
}

/* Id of the receive matched by a message (msg_tag, from src), -1 if none. */
static int match_src(tmx_tag_engine_t *e, uint64_t msg_tag, uint64_t src)
{
    tmx_tag_exp_t *x = tmx_tag_exp_match(e, msg_tag, src);
    return (x == NULL) ? -1 : tmx_container_of(x, test_recv_t, exp)->id;
}

static int match_id(tmx_tag_engine_t *e, uint64_t msg_tag)
{
    return match_src(e, msg_tag, SENDER);
}

/* Id of the message found by (tag, mask) from src (0: any), -1 if none. */
static int unexp_src(tmx_tag_engine_t *e, uint64_t tag, uint64_t mask, uint64_t src, int remove)
{
    tmx_tag_unexp_t *u = tmx_tag_unexp_match(e, tag, mask, src, remove);
    return (u == NULL) ? -1 : tmx_container_of(u, test_msg_t, unexp)->id;
}

static int unexp_id(tmx_tag_engine_t *e, uint64_t tag, uint64_t mask, int remove)
{
    return unexp_src(e, tag, mask, 0, remove);
}

/* Id of the oldest receive directed at src, taken out; -1 if none. */
static int take_src(tmx_tag_engine_t *e, uint64_t src)
{
    tmx_tag_exp_t *x = tmx_tag_exp_take_src(e, src);
    return (x == NULL) ? -1 : tmx_container_of(x, test_recv_t, exp)->id;
}

/* ---------------------------------------------------------------- basics */

Test(tag, init_rejects_bad_bits)
{
    tmx_tag_engine_t e;

    cr_assert_eq(tmx_tag_engine_init(&e, 0), TMX_ERR_INVALID_PARAM);
    cr_assert_eq(tmx_tag_engine_init(&e, 25), TMX_ERR_INVALID_PARAM);
    cr_assert_eq(tmx_tag_engine_init(NULL, 4), TMX_ERR_INVALID_PARAM);
    cr_assert_eq(tmx_tag_engine_init(&e, 1), TMX_OK);
    cr_assert_eq(e.bin_mask, 1);
    tmx_tag_engine_cleanup(&e);
    tmx_tag_engine_cleanup(&e); /* repeated cleanup is allowed */
}

Test(tag, exact_match)
{
    tmx_tag_engine_t e;
    test_recv_t      r[3];

    cr_assert_eq(tmx_tag_engine_init(&e, 4), TMX_OK);
    post(&e, &r[0], 0, 100, TMX_TAG_MASK_FULL);
    post(&e, &r[1], 1, 200, TMX_TAG_MASK_FULL);
    post(&e, &r[2], 2, 100, TMX_TAG_MASK_FULL);
    cr_assert_eq(e.exp_count, 3);
    cr_assert(r[0].exp.exact);
    cr_assert_eq(match_id(&e, 200), 1);
    cr_assert_eq(match_id(&e, 200), -1);
    cr_assert_eq(match_id(&e, 100), 0);
    cr_assert_eq(match_id(&e, 100), 2);
    cr_assert_eq(match_id(&e, 100), -1);
    cr_assert_eq(e.exp_count, 0);
    tmx_tag_engine_cleanup(&e);
}

Test(tag, masked_match)
{
    tmx_tag_engine_t e;
    test_recv_t      r[3];

    cr_assert_eq(tmx_tag_engine_init(&e, 4), TMX_OK);
    /* The caller's tag may carry bits outside the mask: they must be ignored. */
    post(&e, &r[0], 0, mk_tag(7, 5), MASK_ANY_TAG);
    post(&e, &r[1], 1, mk_tag(99, 9), MASK_ANY_SRC);
    post(&e, &r[2], 2, 0xdeadbeef, 0);
    cr_assert_not(r[0].exp.exact);
    cr_assert_eq(r[0].exp.tag, mk_tag(7, 0));
    cr_assert_eq(match_id(&e, mk_tag(3, 9)), 1);  /* any source, tag 9 */
    cr_assert_eq(match_id(&e, mk_tag(7, 1234)), 0); /* source 7, any tag */
    cr_assert_eq(match_id(&e, mk_tag(7, 1234)), 2); /* only the full wildcard left */
    cr_assert_eq(match_id(&e, 0), -1);
    tmx_tag_engine_cleanup(&e);
}

Test(tag, message_matching_nothing)
{
    tmx_tag_engine_t e;
    test_recv_t      r[3];
    test_msg_t       m;

    cr_assert_eq(tmx_tag_engine_init(&e, 3), TMX_OK);
    post(&e, &r[0], 0, mk_tag(1, 1), TMX_TAG_MASK_FULL);
    post(&e, &r[1], 1, mk_tag(2, 0), MASK_ANY_TAG);
    post(&e, &r[2], 2, mk_tag(0, 3), MASK_ANY_SRC);
    cr_assert_eq(match_id(&e, mk_tag(1, 2)), -1);
    cr_assert_eq(match_id(&e, mk_tag(3, 1)), -1);
    cr_assert_eq(e.exp_count, 3);
    arrive(&e, &m, 0, mk_tag(5, 5));
    cr_assert_eq(unexp_id(&e, mk_tag(5, 6), TMX_TAG_MASK_FULL, 1), -1);
    cr_assert_eq(unexp_id(&e, mk_tag(4, 5), MASK_ANY_TAG, 1), -1);
    cr_assert_eq(unexp_id(&e, mk_tag(5, 4), MASK_ANY_SRC, 0), -1);
    cr_assert_eq(e.unexp_count, 1);
    tmx_tag_engine_cleanup(&e);
}

/* ---------------------------------------------------------------- ordering */

Test(tag, post_order_with_wildcards)
{
    tmx_tag_engine_t e;
    test_recv_t      r[6];

    cr_assert_eq(tmx_tag_engine_init(&e, 4), TMX_OK);
    post(&e, &r[0], 0, 0, 0);                        /* any */
    post(&e, &r[1], 1, 5, TMX_TAG_MASK_FULL);        /* exact 5 */
    post(&e, &r[2], 2, 5, MASK_ANY_SRC);             /* tag 5 from anyone */
    post(&e, &r[3], 3, 5, TMX_TAG_MASK_FULL);        /* exact 5 */
    post(&e, &r[4], 4, 6, TMX_TAG_MASK_FULL);        /* exact 6 */
    post(&e, &r[5], 5, mk_tag(1, 5), MASK_ANY_SRC); /* tag 5 from anyone */
    cr_assert_eq(match_id(&e, 5), 0);
    cr_assert_eq(match_id(&e, 5), 1);
    cr_assert_eq(match_id(&e, 5), 2);
    cr_assert_eq(match_id(&e, 5), 3);
    /* The exact 6 is older than the remaining wildcard, which does not match 6 anyway. */
    cr_assert_eq(match_id(&e, 6), 4);
    cr_assert_eq(match_id(&e, 5), 5);
    cr_assert_eq(e.exp_count, 0);

    /* An exact receive older than a matching wildcard wins, and vice versa. */
    post(&e, &r[0], 10, 7, TMX_TAG_MASK_FULL);
    post(&e, &r[1], 11, 0, 0);
    post(&e, &r[2], 12, 7, TMX_TAG_MASK_FULL);
    cr_assert_eq(match_id(&e, 7), 10);
    cr_assert_eq(match_id(&e, 7), 11);
    cr_assert_eq(match_id(&e, 7), 12);
    tmx_tag_engine_cleanup(&e);
}

Test(tag, per_sender_order)
{
    tmx_tag_engine_t e;
    test_recv_t      r[8];
    test_msg_t       m[8];
    int              i;

    cr_assert_eq(tmx_tag_engine_init(&e, 2), TMX_OK);
    /* Expected side: receives for (source 1, tag 3), messages from source 1 in send order. */
    for (i = 0; i < 4; i++) {
        post(&e, &r[i], i, mk_tag(1, 3), TMX_TAG_MASK_FULL);
    }
    for (i = 0; i < 4; i++) {
        cr_assert_eq(match_id(&e, mk_tag(1, 3)), i);
    }

    /* Unexpected side: sources 0 and 1 interleaved, same user tag. */
    for (i = 0; i < 8; i++) {
        arrive(&e, &m[i], i, mk_tag((uint32_t)(i % 2), 3));
    }
    /* A directed receive for source 1 takes source 1's messages in arrival order. */
    cr_assert_eq(unexp_id(&e, mk_tag(1, 3), TMX_TAG_MASK_FULL, 1), 1);
    cr_assert_eq(unexp_id(&e, mk_tag(1, 3), TMX_TAG_MASK_FULL, 1), 3);
    /* ANY_SOURCE takes the oldest of all. */
    cr_assert_eq(unexp_id(&e, mk_tag(0, 3), MASK_ANY_SRC, 1), 0);
    cr_assert_eq(unexp_id(&e, mk_tag(0, 3), MASK_ANY_SRC, 1), 2);
    cr_assert_eq(unexp_id(&e, mk_tag(1, 0), MASK_ANY_TAG, 1), 5);
    cr_assert_eq(unexp_id(&e, mk_tag(0, 3), MASK_ANY_SRC, 1), 4);
    cr_assert_eq(unexp_id(&e, mk_tag(0, 3), TMX_TAG_MASK_FULL, 1), 6);
    cr_assert_eq(unexp_id(&e, 0, 0, 1), 7);
    cr_assert_eq(e.unexp_count, 0);
    tmx_tag_engine_cleanup(&e);
}

Test(tag, unexpected_then_posted)
{
    tmx_tag_engine_t e;
    test_msg_t       m[4];

    cr_assert_eq(tmx_tag_engine_init(&e, 4), TMX_OK);
    arrive(&e, &m[0], 0, mk_tag(2, 1));
    arrive(&e, &m[1], 1, mk_tag(3, 1));
    arrive(&e, &m[2], 2, mk_tag(2, 1));
    arrive(&e, &m[3], 3, mk_tag(2, 2));
    cr_assert_eq(e.unexp_count, 4);
    /* Nothing was posted: the expected queue must not match anything. */
    cr_assert_eq(match_id(&e, mk_tag(2, 1)), -1);
    cr_assert_eq(unexp_id(&e, mk_tag(2, 1), TMX_TAG_MASK_FULL, 1), 0);
    cr_assert_eq(unexp_id(&e, mk_tag(9, 1), MASK_ANY_SRC, 1), 1);
    cr_assert_eq(unexp_id(&e, mk_tag(2, 1), TMX_TAG_MASK_FULL, 1), 2);
    cr_assert_eq(unexp_id(&e, mk_tag(2, 1), TMX_TAG_MASK_FULL, 1), -1);
    cr_assert_eq(unexp_id(&e, mk_tag(2, 77), MASK_ANY_TAG, 1), 3);
    cr_assert_eq(e.unexp_count, 0);
    tmx_tag_engine_cleanup(&e);
}

Test(tag, peek_vs_claim)
{
    tmx_tag_engine_t e;
    test_msg_t       m[2];

    cr_assert_eq(tmx_tag_engine_init(&e, 4), TMX_OK);
    arrive(&e, &m[0], 0, 42);
    arrive(&e, &m[1], 1, 42);
    cr_assert_eq(unexp_id(&e, 42, TMX_TAG_MASK_FULL, 0), 0);
    cr_assert_eq(unexp_id(&e, 42, TMX_TAG_MASK_FULL, 0), 0);
    cr_assert_eq(unexp_id(&e, 0, 0, 0), 0);
    cr_assert_eq(e.unexp_count, 2);
    cr_assert_eq(unexp_id(&e, 42, TMX_TAG_MASK_FULL, 1), 0);
    cr_assert_eq(e.unexp_count, 1);
    cr_assert_eq(unexp_id(&e, 0, 0, 0), 1);
    cr_assert_eq(unexp_id(&e, 0, 0, 1), 1);
    cr_assert_eq(unexp_id(&e, 42, TMX_TAG_MASK_FULL, 0), -1);
    cr_assert_eq(unexp_id(&e, 0, 0, 0), -1);
    cr_assert_eq(e.unexp_count, 0);
    tmx_tag_engine_cleanup(&e);
}

Test(tag, cancel_from_middle)
{
    tmx_tag_engine_t e;
    test_recv_t      r[6];
    test_msg_t       m[5];
    int              i;

    cr_assert_eq(tmx_tag_engine_init(&e, 4), TMX_OK);
    /* Exact and wildcard receives alternate; cancel one of each from the middle. */
    for (i = 0; i < 6; i++) {
        if (i % 2 == 0) {
            post(&e, &r[i], i, 8, TMX_TAG_MASK_FULL);
        } else {
            post(&e, &r[i], i, 8, MASK_ANY_SRC);
        }
    }
    tmx_tag_exp_remove(&e, &r[2].exp);
    tmx_tag_exp_remove(&e, &r[3].exp);
    cr_assert_eq(e.exp_count, 4);
    tmx_tag_exp_remove(&e, &r[3].exp); /* a second cancel is a no-op */
    cr_assert_eq(e.exp_count, 4);
    cr_assert_eq(match_id(&e, 8), 0);
    cr_assert_eq(match_id(&e, 8), 1);
    cr_assert_eq(match_id(&e, 8), 4);
    tmx_tag_exp_remove(&e, &r[4].exp); /* already matched: no-op */
    cr_assert_eq(e.exp_count, 1);
    cr_assert_eq(match_id(&e, 8), 5);
    cr_assert_eq(match_id(&e, 8), -1);

    for (i = 0; i < 5; i++) {
        arrive(&e, &m[i], i, 9);
    }
    tmx_tag_unexp_remove(&e, &m[2].unexp);
    tmx_tag_unexp_remove(&e, &m[2].unexp);
    cr_assert_eq(e.unexp_count, 4);
    /* Gone from both the bin (exact search) and the arrival list (masked search). */
    cr_assert_eq(unexp_id(&e, 9, TMX_TAG_MASK_FULL, 1), 0);
    cr_assert_eq(unexp_id(&e, 9, TMX_TAG_MASK_FULL, 1), 1);
    cr_assert_eq(unexp_id(&e, 0, 0, 1), 3);
    tmx_tag_unexp_remove(&e, &m[4].unexp);
    cr_assert_eq(unexp_id(&e, 9, TMX_TAG_MASK_FULL, 0), -1);
    cr_assert_eq(unexp_id(&e, 0, 0, 0), -1);
    cr_assert_eq(e.unexp_count, 0);
    tmx_tag_engine_cleanup(&e);
}

/* ---------------------------------------------------------------- bins */

/*
 * Many distinct tags in one bin. The bins double as entries are added, so the tags are chosen
 * to share the low COLL_BITS bits of their hash: they stay in one bin as long as there are
 * at most 2^COLL_BITS bins, which 2 * COLL_TAGS entries cannot exceed.
 */
#define COLL_BITS 8
#define COLL_TAGS 100

Test(tag, colliding_tags)
{
    tmx_tag_engine_t e;
    static test_recv_t r[2 * COLL_TAGS];
    static test_msg_t  m[2 * COLL_TAGS];
    uint64_t         tags[COLL_TAGS];
    uint64_t         t = 0;
    int              n = 0, i;

    while (n < COLL_TAGS) {
        if ((tmx_hash_u64(t) & ((1u << COLL_BITS) - 1)) == 0) {
            tags[n++] = t;
        }
        t++;
    }
    cr_assert_eq(tmx_tag_engine_init(&e, 1), TMX_OK);
    /* Two receives per tag, in two rounds: bin chains interleave tags. */
    for (i = 0; i < 2 * COLL_TAGS; i++) {
        post(&e, &r[i], i, tags[i % COLL_TAGS], TMX_TAG_MASK_FULL);
    }
    cr_assert_gt(e.bin_mask, 1, "bins did not grow");
    cr_assert_leq(e.bin_mask, (1u << COLL_BITS) - 1);
    /* All in bin 0, one chain of 2 * COLL_TAGS entries. */
    for (i = 0; i < COLL_TAGS; i++) {
        cr_assert_eq(tmx_hash_u64(tags[i]) & e.bin_mask, 0);
    }
    {
        tmx_list_t *pos;
        n = 0;
        tmx_list_for_each(pos, &e.exp_bins[0]) {
            n++;
        }
        cr_assert_eq(n, 2 * COLL_TAGS);
    }
    /* Match newest tags first: each match must skip all the other tags of the chain. */
    for (i = COLL_TAGS - 1; i >= 0; i--) {
        cr_assert_eq(match_id(&e, tags[i]), i);
        cr_assert_eq(match_id(&e, tags[i]), i + COLL_TAGS);
        cr_assert_eq(match_id(&e, tags[i]), -1);
    }
    cr_assert_eq(e.exp_count, 0);

    for (i = 0; i < 2 * COLL_TAGS; i++) {
        arrive(&e, &m[i], i, tags[i % COLL_TAGS]);
    }
    for (i = COLL_TAGS - 1; i >= 0; i--) {
        cr_assert_eq(unexp_id(&e, tags[i], TMX_TAG_MASK_FULL, 1), i);
        cr_assert_eq(unexp_id(&e, tags[i], TMX_TAG_MASK_FULL, 0), i + COLL_TAGS);
    }
    cr_assert_eq(e.unexp_count, COLL_TAGS);
    tmx_tag_engine_cleanup(&e);
}

Test(tag, growth_keeps_order)
{
    tmx_tag_engine_t   e;
    static test_recv_t r[4096];
    static test_msg_t  m[4096];
    int                i, k;

    cr_assert_eq(tmx_tag_engine_init(&e, 1), TMX_OK);
    /* 16 tags, each posted 256 times while the bins grow from 2 to 2048. */
    for (i = 0; i < 4096; i++) {
        post(&e, &r[i], i, (uint64_t)(i % 16), TMX_TAG_MASK_FULL);
        arrive(&e, &m[i], i, (uint64_t)(i % 16));
    }
    cr_assert_eq(e.bin_mask, 2047);
    for (k = 0; k < 16; k++) {
        for (i = k; i < 4096; i += 16) {
            cr_assert_eq(match_id(&e, (uint64_t)k), i);
            cr_assert_eq(unexp_id(&e, (uint64_t)k, TMX_TAG_MASK_FULL, 1), i);
        }
    }
    cr_assert_eq(e.exp_count, 0);
    cr_assert_eq(e.unexp_count, 0);
    tmx_tag_engine_cleanup(&e);
}

/* ---------------------------------------------------------------- directed receives */

/* Receives naming senders 2 and 1 (in that order) for one tag, then an undirected exact one
 * and an undirected masked one: each message goes to the oldest receive that takes its
 * sender. */
Test(tag, directed_post_order)
{
    tmx_tag_engine_t e;
    test_recv_t      r[4];

    cr_assert_eq(tmx_tag_engine_init(&e, 4), TMX_OK);
    post_src(&e, &r[0], 0, 5, TMX_TAG_MASK_FULL, 2);
    post_src(&e, &r[1], 1, 5, TMX_TAG_MASK_FULL, 1);
    post_src(&e, &r[2], 2, 5, TMX_TAG_MASK_FULL, 0);
    post_src(&e, &r[3], 3, 0, 0, 0);
    cr_assert_eq(match_src(&e, 5, 1), 1); /* skips the receive of sender 2 */
    cr_assert_eq(match_src(&e, 5, 1), 2); /* sender 1's is taken: the undirected one */
    cr_assert_eq(match_src(&e, 5, 2), 0); /* the oldest of all, kept for sender 2 */
    cr_assert_eq(match_src(&e, 5, 3), 3);
    cr_assert_eq(match_src(&e, 5, 3), -1);
    cr_assert_eq(e.exp_count, 0);
    tmx_tag_engine_cleanup(&e);
}

/* Post order across the bins and the wildcard list with directed receives on both sides. */
Test(tag, directed_bins_and_wildcards)
{
    tmx_tag_engine_t e;
    test_recv_t      r[4];

    cr_assert_eq(tmx_tag_engine_init(&e, 4), TMX_OK);
    post_src(&e, &r[0], 0, 5, MASK_ANY_SRC, 2);     /* wildcard list, sender 2 */
    post_src(&e, &r[1], 1, 5, TMX_TAG_MASK_FULL, 3); /* bin, sender 3 */
    post_src(&e, &r[2], 2, 5, TMX_TAG_MASK_FULL, 0); /* bin, anyone */
    post_src(&e, &r[3], 3, 5, MASK_ANY_SRC, 0);     /* wildcard list, anyone */
    cr_assert_eq(match_src(&e, 5, 1), 2);
    cr_assert_eq(match_src(&e, 5, 3), 1); /* older than the wildcard r[3] */
    cr_assert_eq(match_src(&e, 5, 3), 3);
    cr_assert_eq(match_src(&e, 5, 3), -1);
    cr_assert_eq(match_src(&e, 5, 2), 0);
    cr_assert_eq(e.exp_count, 0);
    tmx_tag_engine_cleanup(&e);
}

/* A directed receive or probe takes the oldest matching message of its sender. */
Test(tag, directed_unexpected)
{
    tmx_tag_engine_t e;
    test_msg_t       m[4];

    cr_assert_eq(tmx_tag_engine_init(&e, 4), TMX_OK);
    arrive_src(&e, &m[0], 0, 5, 1);
    arrive_src(&e, &m[1], 1, 5, 2);
    arrive_src(&e, &m[2], 2, 6, 2);
    arrive_src(&e, &m[3], 3, 5, 2);
    cr_assert_eq(unexp_src(&e, 5, TMX_TAG_MASK_FULL, 3, 1), -1);
    cr_assert_eq(unexp_src(&e, 5, TMX_TAG_MASK_FULL, 2, 0), 1); /* peek */
    cr_assert_eq(unexp_src(&e, 5, TMX_TAG_MASK_FULL, 2, 1), 1);
    cr_assert_eq(unexp_src(&e, 0, 0, 2, 1), 2);                 /* any tag from 2 */
    cr_assert_eq(unexp_src(&e, 0, 0, 1, 0), 0);
    cr_assert_eq(unexp_src(&e, 5, TMX_TAG_MASK_FULL, 0, 1), 0); /* anyone: the oldest */
    cr_assert_eq(unexp_src(&e, 5, TMX_TAG_MASK_FULL, 1, 1), -1);
    cr_assert_eq(unexp_src(&e, 5, TMX_TAG_MASK_FULL, 2, 1), 3);
    cr_assert_eq(e.unexp_count, 0);
    tmx_tag_engine_cleanup(&e);
}

/* A failed sender's receives: the directed ones, oldest first, none taken twice. */
Test(tag, directed_take_src)
{
    tmx_tag_engine_t e;
    test_recv_t      r[5];

    cr_assert_eq(tmx_tag_engine_init(&e, 4), TMX_OK);
    post_src(&e, &r[0], 0, 5, TMX_TAG_MASK_FULL, 2);
    post_src(&e, &r[1], 1, 5, 0, 2);
    post_src(&e, &r[2], 2, 5, TMX_TAG_MASK_FULL, 1);
    post_src(&e, &r[3], 3, 5, TMX_TAG_MASK_FULL, 0);
    post_src(&e, &r[4], 4, 7, TMX_TAG_MASK_FULL, 2);
    cr_assert_eq(match_src(&e, 5, 2), 0);
    tmx_tag_exp_remove(&e, &r[4].exp); /* canceled */
    tmx_tag_exp_remove(&e, &r[4].exp);
    cr_assert_eq(take_src(&e, 0), -1);
    cr_assert_eq(take_src(&e, 3), -1);
    cr_assert_eq(take_src(&e, 2), 1);
    cr_assert_eq(take_src(&e, 2), -1);
    cr_assert_eq(e.exp_count, 2);
    cr_assert_eq(match_src(&e, 5, 2), 3);
    cr_assert_eq(take_src(&e, 1), 2);
    cr_assert_eq(e.exp_count, 0);
    tmx_tag_engine_cleanup(&e);
}

/* ---------------------------------------------------------------- randomized */

/*
 * Random operations checked step by step against a naive model: plain arrays searched
 * linearly, in post order (receives) and arrival order (messages).
 */
typedef struct rnd_state {
    tmx_tag_engine_t e;
    test_recv_t     *recvs; /* object pools, one slot per operation */
    test_msg_t      *msgs;
    int             *model_exp;   /* ids of posted receives, in post order */
    int              n_exp;
    int             *model_unexp; /* ids of queued messages, in arrival order */
    int              n_unexp;
    uint64_t         rng;
} rnd_state_t;

static uint64_t rnd_next(uint64_t *s)
{
    *s += 0x9e3779b97f4a7c15ULL;
    return tmx_hash_u64(*s);
}

/* Small tag space so that matches are frequent: 4 sources x 6 user tags. */
static uint64_t rnd_tag(uint64_t *s)
{
    return mk_tag((uint32_t)(rnd_next(s) % 4), (uint32_t)(rnd_next(s) % 6));
}

static uint64_t rnd_mask(uint64_t *s)
{
    static const uint64_t masks[] = {TMX_TAG_MASK_FULL, TMX_TAG_MASK_FULL, TMX_TAG_MASK_FULL,
                                     MASK_ANY_SRC, MASK_ANY_TAG, 0, 0xffffffff00000001ULL};
    return masks[rnd_next(s) % (sizeof(masks) / sizeof(masks[0]))];
}

/* Senders 1..3; a receive names one in 2 cases of 5 (0: any). */
static uint64_t rnd_sender(uint64_t *s)
{
    return 1 + rnd_next(s) % 3;
}

static uint64_t rnd_recv_src(uint64_t *s)
{
    uint64_t r = rnd_next(s) % 5;
    return (r < 3) ? 0 : 1 + rnd_next(s) % 3;
}

static int model_exp_find(rnd_state_t *st, uint64_t msg_tag, uint64_t src)
{
    for (int i = 0; i < st->n_exp; i++) {
        test_recv_t *r = &st->recvs[st->model_exp[i]];
        if ((msg_tag & r->exp.mask) == (r->exp.tag & r->exp.mask) &&
            (r->exp.src == 0 || r->exp.src == src)) {
            return i;
        }
    }
    return -1;
}

static int model_unexp_find(rnd_state_t *st, uint64_t tag, uint64_t mask, uint64_t src)
{
    for (int i = 0; i < st->n_unexp; i++) {
        test_msg_t *m = &st->msgs[st->model_unexp[i]];
        if ((m->unexp.tag & mask) == (tag & mask) && (src == 0 || m->unexp.src == src)) {
            return i;
        }
    }
    return -1;
}

static void model_drop(int *arr, int *n, int idx)
{
    for (int i = idx; i + 1 < *n; i++) {
        arr[i] = arr[i + 1];
    }
    (*n)--;
}

static void run_random(unsigned hash_bits)
{
    rnd_state_t st;
    const char *env;
    uint64_t    seed;
    long        nops = 10000;
    long        op;
    int         idx;
    long        n_hit_exp = 0, n_hit_unexp = 0, n_miss = 0; /* shows what the run covered */
    int         max_exp = 0, max_unexp = 0;

    env  = getenv("TMX_TAG_TEST_SEED");
    seed = (env != NULL) ? strtoull(env, NULL, 0)
                         : ((uint64_t)time(NULL) << 20) ^ (uint64_t)getpid();
    env  = getenv("TMX_TAG_TEST_OPS");
    if (env != NULL) {
        nops = strtol(env, NULL, 0);
    }
    fprintf(stderr, "tag random test: hash_bits=%u ops=%ld TMX_TAG_TEST_SEED=%" PRIu64 "\n",
            hash_bits, nops, seed);
    cr_log_info("TMX_TAG_TEST_SEED=%" PRIu64, seed);

    st.rng         = seed;
    st.recvs       = calloc((size_t)nops, sizeof(*st.recvs));
    st.msgs        = calloc((size_t)nops, sizeof(*st.msgs));
    st.model_exp   = calloc((size_t)nops, sizeof(int));
    st.model_unexp = calloc((size_t)nops, sizeof(int));
    cr_assert((st.recvs != NULL) && (st.msgs != NULL) && (st.model_exp != NULL) &&
              (st.model_unexp != NULL));
    st.n_exp = st.n_unexp = 0;
    cr_assert_eq(tmx_tag_engine_init(&st.e, hash_bits), TMX_OK);

    for (op = 0; op < nops; op++) {
        unsigned kind = (unsigned)(rnd_next(&st.rng) % 100);
        int      id   = (int)op;
        int      want, got;

        /*
         * Phases of 500 operations alternate between mostly receives and mostly messages, so
         * both queues get deep and both match paths (posted first, arrived first) run a lot.
         */
        if ((op / 500) % 2 == 0) {
            kind = (kind < 55) ? 0 : (kind < 70) ? 40 : kind;
        } else {
            kind = (kind < 15) ? 0 : (kind < 70) ? 40 : kind;
        }
        if (kind < 35) {
            /* Post a receive the way the core does: unexpected queue first. */
            uint64_t tag  = rnd_tag(&st.rng);
            uint64_t mask = rnd_mask(&st.rng);
            uint64_t src  = rnd_recv_src(&st.rng);
            idx           = model_unexp_find(&st, tag, mask, src);
            want          = (idx < 0) ? -1 : st.model_unexp[idx];
            got           = unexp_src(&st.e, tag, mask, src, 1);
            cr_assert_eq(got, want, "seed %" PRIu64 " op %ld: recv %#" PRIx64 "/%#" PRIx64
                         " from %" PRIu64 " took message %d, model says %d", seed, op, tag, mask,
                         src, got, want);
            if (idx >= 0) {
                n_hit_unexp++;
                model_drop(st.model_unexp, &st.n_unexp, idx);
            } else {
                post_src(&st.e, &st.recvs[id], id, tag, mask, src);
                st.model_exp[st.n_exp++] = id;
            }
        } else if (kind < 75) {
            /* A message arrives: expected queue first, else it is queued unexpected. */
            uint64_t tag = rnd_tag(&st.rng);
            uint64_t src = rnd_sender(&st.rng);
            idx          = model_exp_find(&st, tag, src);
            want         = (idx < 0) ? -1 : st.model_exp[idx];
            got          = match_src(&st.e, tag, src);
            cr_assert_eq(got, want, "seed %" PRIu64 " op %ld: message %#" PRIx64 " from %" PRIu64
                         " matched receive %d, model says %d", seed, op, tag, src, got, want);
            if (idx >= 0) {
                n_hit_exp++;
                model_drop(st.model_exp, &st.n_exp, idx);
            } else {
                n_miss++;
                arrive_src(&st.e, &st.msgs[id], id, tag, src);
                st.model_unexp[st.n_unexp++] = id;
            }
        } else if (kind < 77) {
            /* A sender fails: its directed receives leave, oldest first. */
            uint64_t src = rnd_sender(&st.rng);
            for (;;) {
                for (idx = 0; idx < st.n_exp; idx++) {
                    if (st.recvs[st.model_exp[idx]].exp.src == src) {
                        break;
                    }
                }
                want = (idx < st.n_exp) ? st.model_exp[idx] : -1;
                got  = take_src(&st.e, src);
                cr_assert_eq(got, want, "seed %" PRIu64 " op %ld: sender %" PRIu64 " failed: "
                             "took receive %d, model says %d", seed, op, src, got, want);
                if (want < 0) {
                    break;
                }
                model_drop(st.model_exp, &st.n_exp, idx);
            }
        } else if (kind < 85) {
            /* Cancel a random posted receive. */
            if (st.n_exp > 0) {
                idx = (int)(rnd_next(&st.rng) % (uint64_t)st.n_exp);
                tmx_tag_exp_remove(&st.e, &st.recvs[st.model_exp[idx]].exp);
                model_drop(st.model_exp, &st.n_exp, idx);
            }
        } else if (kind < 90) {
            /* Discard a random queued message (e.g. a claimed message being freed). */
            if (st.n_unexp > 0) {
                idx = (int)(rnd_next(&st.rng) % (uint64_t)st.n_unexp);
                tmx_tag_unexp_remove(&st.e, &st.msgs[st.model_unexp[idx]].unexp);
                model_drop(st.model_unexp, &st.n_unexp, idx);
            }
        } else {
            /* Probe: peek or claim. */
            uint64_t tag    = rnd_tag(&st.rng);
            uint64_t mask   = rnd_mask(&st.rng);
            uint64_t src    = rnd_recv_src(&st.rng);
            int      remove = (int)(rnd_next(&st.rng) % 2);
            idx             = model_unexp_find(&st, tag, mask, src);
            want            = (idx < 0) ? -1 : st.model_unexp[idx];
            got             = unexp_src(&st.e, tag, mask, src, remove);
            cr_assert_eq(got, want, "seed %" PRIu64 " op %ld: probe %#" PRIx64 "/%#" PRIx64
                         " remove=%d found %d, model says %d", seed, op, tag, mask, remove,
                         got, want);
            if ((idx >= 0) && remove) {
                model_drop(st.model_unexp, &st.n_unexp, idx);
            }
        }
        max_exp   = (st.n_exp > max_exp) ? st.n_exp : max_exp;
        max_unexp = (st.n_unexp > max_unexp) ? st.n_unexp : max_unexp;
        cr_assert_eq(st.e.exp_count, (size_t)st.n_exp, "seed %" PRIu64 " op %ld", seed, op);
        cr_assert_eq(st.e.unexp_count, (size_t)st.n_unexp, "seed %" PRIu64 " op %ld", seed, op);
    }
    fprintf(stderr, "tag random test: seed %" PRIu64 ": %ld messages matched a posted receive, "
            "%ld went unexpected, %ld receives found one; queue depth up to %d posted, %d "
            "unexpected; %zu bins at the end\n", seed, n_hit_exp, n_miss, n_hit_unexp, max_exp,
            max_unexp, (size_t)st.e.bin_mask + 1);
    /* Drain: every remaining receive and message must still be found, in order. */
    while (st.n_exp > 0) {
        test_recv_t *r = &st.recvs[st.model_exp[0]];
        uint64_t     t = r->exp.tag; /* already masked: matches its own receive */
        uint64_t     s = (r->exp.src != 0) ? r->exp.src : SENDER;
        idx            = model_exp_find(&st, t, s);
        cr_assert_eq(match_src(&st.e, t, s), st.model_exp[idx], "seed %" PRIu64 " drain", seed);
        model_drop(st.model_exp, &st.n_exp, idx);
    }
    while (st.n_unexp > 0) {
        cr_assert_eq(unexp_id(&st.e, 0, 0, 1), st.model_unexp[0], "seed %" PRIu64, seed);
        model_drop(st.model_unexp, &st.n_unexp, 0);
    }
    cr_assert_eq(unexp_id(&st.e, 0, 0, 0), -1);
    cr_assert_eq(st.e.exp_count, 0);
    tmx_tag_engine_cleanup(&st.e);
    free(st.recvs);
    free(st.msgs);
    free(st.model_exp);
    free(st.model_unexp);
}

Test(tag_random, small_bins)
{
    run_random(1); /* start at 2 bins: collisions, then growth during the run */
}

Test(tag_random, default_bins)
{
    run_random(10);
}
