/*
 * The conformance cases. Most run on a ring (each rank sends to rank+1 and receives from
 * rank-1, so every receiver has exactly one sender and the expected matching is
 * deterministic); with one rank the ring is a self-send. Rules the cases keep:
 * - never enter a job barrier while a peer may still need this rank's progress (own
 *   rendezvous sends outstanding): the barrier does not progress the worker;
 * - every tag carries the case number in its top byte (cf_tag).
 */
#define _GNU_SOURCE
#include "cf.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CF_ARRAY_LEN(_a) (sizeof(_a) / sizeof((_a)[0]))

static const char *const cf_order_name[] = {"posted", "unexpected", "mixed"};

static uint64_t cf_seed_of(tmx_tag_t tag, size_t len, int sender)
{
    return tag * 0x9e37 + len * 131 + (uint64_t)sender * 0x10001;
}

/* Runs the same script on the ring: send msgs to dst, receive rcvs from src. */
static int cf_ring(cf_t *cf, const cf_msg_t *msgs, size_t nm, const cf_rcv_t *rcvs, size_t nr,
                   cf_order_t order, const char *what)
{
    cf_script_t out = {msgs, nm, rcvs, nr, order, cf->dst, cf->case_id, 0, CF_CASE_MASK};
    cf_script_t in  = out;
    char        label[96];

    in.peer = cf->src;
    snprintf(label, sizeof(label), "%s/%s", what, cf_order_name[order]);
    return cf_script_run(cf, &out, &in, label, cf->seed ^ ((uint64_t)cf->rank << 32));
}

static int cf_ring_all(cf_t *cf, const cf_msg_t *msgs, size_t nm, const cf_rcv_t *rcvs,
                       size_t nr, const char *what)
{
    int rc = CF_PASS;

    for (int o = CF_ORDER_POSTED; o <= CF_ORDER_MIXED && rc == CF_PASS; o++) {
        rc = cf_ring(cf, msgs, nm, rcvs, nr, (cf_order_t)o, what);
    }
    return rc;
}

static size_t cf_rndv_len(const cf_t *cf)
{
    return 2 * cf->eager_max + 5;
}

/* ------------------------------------------------------------------ matching */

static int cf_case_exact(cf_t *cf)
{
    const cf_msg_t msgs[] = {
        {cf_tag(cf, 0x101), 10, 0}, {cf_tag(cf, 0x102), 20, 0},
        {cf_tag(cf, 0x103), 0, 0},  {cf_tag(cf, 0x104), 33, 0},
    };
    /* Posted in another order than sent: each must still get its own tag. */
    const cf_rcv_t rcvs[] = {
        {cf_tag(cf, 0x104), CF_FULL_MASK, 64}, {cf_tag(cf, 0x102), CF_FULL_MASK, 64},
        {cf_tag(cf, 0x101), CF_FULL_MASK, 64}, {cf_tag(cf, 0x103), CF_FULL_MASK, 64},
    };
    tmx_request_h       never;
    tmx_tag_recv_info_t info;
    tmx_status_t        status;
    int                 rc = CF_PASS;

    /* A receive for a tag nobody sends, posted first, must see none of the traffic. */
    status = cf_recv(cf, cf_alloc(cf, 64), 64, cf_tag(cf, 0x1ff), CF_FULL_MASK, &never);
    CF_REQUIRE(cf, status == TMX_INPROGRESS, "post: %s", cf_status_name(status));
    rc = cf_ring_all(cf, msgs, CF_ARRAY_LEN(msgs), rcvs, CF_ARRAY_LEN(rcvs), "exact");
    if (rc != CF_PASS) {
        goto out;
    }
    status = tmx_request_test(never, &info);
    CF_REQUIRE(cf, status == TMX_INPROGRESS,
               "receive for unsent tag 0x1ff completed with %s (tag 0x%" PRIx64 ")",
               cf_status_name(status), info.tag);
    status = tmx_request_cancel(never);
    CF_REQUIRE(cf, status == TMX_OK, "cancel of unmatched receive: %s", cf_status_name(status));
    status = cf_wait(cf, never, NULL);
    CF_REQUIRE(cf, status == TMX_ERR_CANCELED, "canceled receive completed with %s",
               cf_status_name(status));
out:
    return rc;
}

static int cf_case_masked(cf_t *cf)
{
    const tmx_tag_t cm     = CF_CASE_MASK;
    const cf_msg_t  msgs[] = {
        {cf_tag(cf, 0xab37), 11, 0},
        {cf_tag(cf, 0xac37), 12, 0},
        {cf_tag(cf, 0x12ab), 13, 0},
        {cf_tag(cf, 0x5a5a), 14, 0},
        {cf_tag(cf, 0x00ab000000000001ull), 15, 0},
    };
    const cf_rcv_t rcvs[] = {
        {cf_tag(cf, 0xab00), cm | 0xff00, 64},                        /* takes 0xab37 */
        {cf_tag(cf, 0x0037), cm | 0x00ff, 64},                        /* 0xac37 (0xab37 taken) */
        {cf_tag(cf, 0x00ab), cm | 0x00ff, 64},                        /* 0x12ab */
        {cf_tag(cf, 0x5050), cm | 0xf0f0, 64},                        /* 0x5a5a: nibbles */
        {cf_tag(cf, 0x00ab00000000ffffull), cm | 0x00ff000000000000ull, 64}, /* high bits */
    };

    return cf_ring_all(cf, msgs, CF_ARRAY_LEN(msgs), rcvs, CF_ARRAY_LEN(rcvs), "masked");
}

static int cf_case_wildcard(cf_t *cf)
{
    const cf_msg_t msgs[] = {{cf_tag(cf, 0x3c3c3c), 17, 0}, {cf_tag(cf, 0x777), 0, 0}};
    /* mask 0 matches any tag whatever the receive's tag bits are */
    const cf_rcv_t rcvs[] = {{0, 0, 64}, {0xdeadbeefcafef00dull, 0, 64}};

    return cf_ring_all(cf, msgs, CF_ARRAY_LEN(msgs), rcvs, CF_ARRAY_LEN(rcvs), "wildcard");
}

static int cf_case_post_order(cf_t *cf)
{
    const tmx_tag_t t1     = cf_tag(cf, 0x11);
    const tmx_tag_t t2     = cf_tag(cf, 0x21);
    const cf_msg_t  msgs[] = {{t1, 5, 0}, {t1, 6, 0}, {t2, 7, 0}, {t1, 8, 0}, {t2, 9, 0}};
    /* model: r0<-m0, r1 (wildcard, before r2)<-m1, r2<-m3, r3<-m2, r4<-m4 */
    const cf_rcv_t rcvs[] = {
        {t1, CF_FULL_MASK, 64},
        {0, 0, 64},
        {t1, CF_FULL_MASK, 64},
        {cf_tag(cf, 0x20), CF_CASE_MASK | 0xf0, 64},
        {t2, CF_FULL_MASK, 64},
    };

    return cf_ring_all(cf, msgs, CF_ARRAY_LEN(msgs), rcvs, CF_ARRAY_LEN(rcvs), "post-order");
}

static int cf_case_send_order(cf_t *cf)
{
    const tmx_tag_t t  = cf_tag(cf, 0x31);
    const tmx_tag_t ta = cf_tag(cf, 0x41);
    const tmx_tag_t tb = cf_tag(cf, 0x42);
    const size_t    e  = cf->eager_max;
    /* One stream with eager and rendezvous sizes mixed: a large message must not be
     * overtaken by the small ones after it, nor the other way round. */
    const cf_msg_t msgs[] = {
        {t, 3, 0}, {t, e + 1, 0}, {t, 100, 0}, {t, e, 0}, {t, 1, 0}, {t, 2 * e + 7, 0},
        {t, 0, 0}, {t, e > 0 ? e - 1 : 2, 0},
    };
    const cf_rcv_t rcv     = {t, CF_FULL_MASK, 2 * e + 64};
    cf_rcv_t       rcvs[CF_ARRAY_LEN(msgs)];
    /* Two tags interleaved, received tag by tag: order holds per matching receive. */
    const cf_msg_t msgs2[] = {{ta, 10, 0}, {tb, e + 2, 0}, {ta, e + 3, 0}, {tb, 11, 0},
                              {ta, 12, 0}, {tb, 2 * e, 0}};
    const cf_rcv_t rcvs2[] = {
        {tb, CF_FULL_MASK, 2 * e + 64}, {tb, CF_FULL_MASK, 2 * e + 64},
        {ta, CF_FULL_MASK, 2 * e + 64}, {cf_tag(cf, 0x40), CF_CASE_MASK | 0xf0, 2 * e + 64},
        {ta, CF_FULL_MASK, 2 * e + 64}, {0, 0, 2 * e + 64},
    };
    int rc;

    for (size_t i = 0; i < CF_ARRAY_LEN(rcvs); i++) {
        rcvs[i] = rcv;
        if (i % 3 == 2) {
            rcvs[i].mask = CF_CASE_MASK; /* wildcards in the stream change nothing */
        }
    }
    rc = cf_ring_all(cf, msgs, CF_ARRAY_LEN(msgs), rcvs, CF_ARRAY_LEN(rcvs), "one-tag");
    if (rc == CF_PASS) {
        rc = cf_ring_all(cf, msgs2, CF_ARRAY_LEN(msgs2), rcvs2, CF_ARRAY_LEN(rcvs2), "two-tags");
    }
    return rc;
}

static int cf_case_unexpected(cf_t *cf)
{
    const cf_msg_t msgs[] = {
        {cf_tag(cf, 1), 100, 0},
        {cf_tag(cf, 2), cf_rndv_len(cf), 0},
        {cf_tag(cf, 3), 1u << 20, 0},
        {cf_tag(cf, 4), 0, 0},
    };
    const cf_rcv_t rcvs[] = {
        {cf_tag(cf, 3), CF_FULL_MASK, 1u << 20},
        {cf_tag(cf, 1), CF_FULL_MASK, 100},
        {cf_tag(cf, 4), CF_FULL_MASK, 0},
        {cf_tag(cf, 2), CF_FULL_MASK, cf_rndv_len(cf)},
    };

    return cf_ring(cf, msgs, CF_ARRAY_LEN(msgs), rcvs, CF_ARRAY_LEN(rcvs), CF_ORDER_UNEXP,
                   "unexpected");
}

static int cf_case_expected(cf_t *cf)
{
    const cf_msg_t msgs[] = {
        {cf_tag(cf, 1), 100, 0},
        {cf_tag(cf, 2), cf_rndv_len(cf), 0},
        {cf_tag(cf, 3), 1u << 20, 0},
        {cf_tag(cf, 4), 0, 0},
    };
    const cf_rcv_t rcvs[] = {
        {cf_tag(cf, 3), CF_FULL_MASK, 1u << 20},
        {cf_tag(cf, 1), CF_FULL_MASK, 100},
        {cf_tag(cf, 4), CF_FULL_MASK, 0},
        {cf_tag(cf, 2), CF_FULL_MASK, cf_rndv_len(cf)},
    };

    return cf_ring(cf, msgs, CF_ARRAY_LEN(msgs), rcvs, CF_ARRAY_LEN(rcvs), CF_ORDER_POSTED,
                   "expected");
}

/* ------------------------------------------------------------------ probe */

/* Sends n messages (tags[i], lens[i]) to dst with data from cf_seed_of. */
static int cf_send_list(cf_t *cf, const tmx_tag_t *tags, const size_t *lens, size_t n,
                        tmx_request_h *reqs)
{
    for (size_t i = 0; i < n; i++) {
        void        *buf = cf_alloc(cf, lens[i]);
        tmx_status_t status;

        cf_fill(buf, lens[i], cf_seed_of(tags[i], lens[i], cf->rank));
        status = cf_send(cf, cf->eps[cf->dst], buf, lens[i], tags[i], 0, &reqs[i]);
        if (status != TMX_OK && status != TMX_INPROGRESS) {
            return cf_fail(cf, "send of tag 0x%" PRIx64 " len %zu to rank %d: %s", tags[i],
                           lens[i], cf->dst, cf_status_name(status));
        }
    }
    return CF_PASS;
}

static int cf_wait_list(cf_t *cf, const tmx_tag_t *tags, const size_t *lens, size_t n,
                        tmx_request_h *reqs)
{
    for (size_t i = 0; i < n; i++) {
        tmx_status_t status = cf_wait(cf, reqs[i], NULL);
        if (status != TMX_OK) {
            return cf_fail(cf, "send of tag 0x%" PRIx64 " len %zu to rank %d completed with %s",
                           tags[i], lens[i], cf->dst, cf_status_name(status));
        }
    }
    return CF_PASS;
}

/* Receives into a fresh buffer of buflen and checks status, tag, length and data of a
 * message (tag, len) from src. */
static int cf_recv_check(cf_t *cf, tmx_tag_t tag, tmx_tag_t mask, size_t buflen,
                         tmx_tag_t want_tag, size_t want_len, const char *what)
{
    unsigned char      *buf = cf_alloc(cf, buflen);
    tmx_tag_recv_info_t info = {0};
    tmx_status_t        status;
    tmx_status_t        want = (want_len > buflen) ? TMX_ERR_TRUNCATED : TMX_OK;
    size_t              n    = (want_len > buflen) ? buflen : want_len;
    long                bad;

    status = cf_recv_wait(cf, buf, buflen, tag, mask, &info);
    if (status != want || info.tag != want_tag || info.length != want_len) {
        return cf_fail(cf, "%s: expected %s tag 0x%" PRIx64 " len %zu, got %s tag 0x%" PRIx64
                           " len %zu",
                       what, cf_status_name(want), want_tag, want_len, cf_status_name(status),
                       info.tag, info.length);
    }
    bad = cf_verify(buf, n, cf_seed_of(want_tag, want_len, cf->src));
    if (bad >= 0) {
        return cf_fail(cf, "%s: data wrong at byte %ld of %zu", what, bad, want_len);
    }
    return CF_PASS;
}

/* Receives exactly (tag, len) from `from` and checks status, info and data. */
static int cf_recv_check_from(cf_t *cf, int from, tmx_tag_t tag, size_t len, const char *what)
{
    unsigned char      *buf  = cf_alloc(cf, len);
    tmx_tag_recv_info_t info = {0};
    tmx_status_t        status;

    status = cf_recv_wait(cf, buf, len, tag, CF_FULL_MASK, &info);
    if (status != TMX_OK || info.tag != tag || info.length != len) {
        return cf_fail(cf, "%s: expected TMX_OK tag 0x%" PRIx64 " len %zu, got %s tag 0x%" PRIx64
                           " len %zu", what, tag, len, cf_status_name(status), info.tag,
                       info.length);
    }
    if (cf_verify(buf, len, cf_seed_of(tag, len, from)) >= 0) {
        return cf_fail(cf, "%s: wrong data", what);
    }
    return CF_PASS;
}

static int cf_case_probe_peek(cf_t *cf)
{
    const tmx_tag_t     tags[] = {cf_tag(cf, 0x10), cf_tag(cf, 0x11)};
    const size_t        lens[] = {50, cf_rndv_len(cf)};
    tmx_request_h       reqs[2];
    tmx_tag_recv_info_t info;
    tmx_message_h       msg = NULL;
    tmx_status_t        status;
    int                 rc;

    rc = cf_send_list(cf, tags, lens, 2, reqs);
    if (rc != CF_PASS) {
        goto out;
    }
    for (int i = 0; i < 2; i++) {
        memset(&info, 0, sizeof(info));
        status = cf_probe_wait(cf, tags[i], CF_FULL_MASK, TMX_PROBE_PEEK, &info, &msg);
        CF_REQUIRE(cf, status == TMX_OK && info.tag == tags[i] && info.length == lens[i],
                   "peek #%d: expected tag 0x%" PRIx64 " len %zu, got %s tag 0x%" PRIx64
                   " len %zu",
                   i, tags[i], lens[i], cf_status_name(status), info.tag, info.length);
        /* The message stays: the same peek again, without progress, finds it again. */
        memset(&info, 0, sizeof(info));
        status = tmx_tag_probe(cf->worker, tags[i], CF_FULL_MASK, TMX_PROBE_PEEK, &info, NULL);
        CF_REQUIRE(cf, status == TMX_OK && info.tag == tags[i] && info.length == lens[i],
                   "second peek #%d: %s tag 0x%" PRIx64 " len %zu", i, cf_status_name(status),
                   info.tag, info.length);
    }
    /* A masked peek reports the earliest matching message. */
    memset(&info, 0, sizeof(info));
    status = tmx_tag_probe(cf->worker, cf_tag(cf, 0x10), CF_CASE_MASK | 0xf0, TMX_PROBE_PEEK,
                           &info, NULL);
    CF_REQUIRE(cf, status == TMX_OK && info.tag == tags[0] && info.length == lens[0],
               "masked peek: expected the first message, got %s tag 0x%" PRIx64 " len %zu",
               cf_status_name(status), info.tag, info.length);
    for (int i = 1; i >= 0; i--) {
        rc = cf_recv_check(cf, tags[i], CF_FULL_MASK, lens[i], tags[i], lens[i],
                           "receive after peek");
        if (rc != CF_PASS) {
            goto out;
        }
    }
    status = tmx_tag_probe(cf->worker, cf_tag(cf, 0x10), CF_CASE_MASK | 0xf0, TMX_PROBE_PEEK,
                           &info, NULL);
    CF_REQUIRE(cf, status == TMX_ERR_NO_MESSAGE, "peek after both received: %s",
               cf_status_name(status));
    rc = cf_wait_list(cf, tags, lens, 2, reqs);
out:
    return rc;
}

static int cf_case_probe_claim(cf_t *cf)
{
    const tmx_tag_t     t      = cf_tag(cf, 0x20);
    const tmx_tag_t     tags[] = {t, t, cf_tag(cf, 0x21)};
    const size_t        lens[] = {40, 41, cf_rndv_len(cf)};
    tmx_request_h       reqs[3];
    tmx_tag_recv_info_t info;
    tmx_message_h       msg[2] = {NULL, NULL};
    tmx_request_h       mreq;
    tmx_status_t        status;
    unsigned char      *buf;
    int                 rc;

    rc = cf_send_list(cf, tags, lens, 3, reqs);
    if (rc != CF_PASS) {
        goto out;
    }
    memset(&info, 0, sizeof(info));
    status = cf_probe_wait(cf, t, CF_FULL_MASK, TMX_PROBE_CLAIM, &info, &msg[0]);
    CF_REQUIRE(cf, status == TMX_OK && msg[0] != NULL && info.length == 40 && info.tag == t,
               "claim: expected the first message (len 40), got %s len %zu handle %p",
               cf_status_name(status), info.length, (void *)msg[0]);
    status = cf_probe_wait(cf, tags[2], CF_FULL_MASK, TMX_PROBE_CLAIM, &info, &msg[1]);
    CF_REQUIRE(cf, status == TMX_OK && msg[1] != NULL && info.length == lens[2],
               "claim of the rendezvous message: %s len %zu", cf_status_name(status),
               info.length);
    /* Claimed messages are gone from the queue: a peek finds none, a receive takes the next. */
    status = tmx_tag_probe(cf->worker, tags[2], CF_FULL_MASK, TMX_PROBE_PEEK, &info, NULL);
    CF_REQUIRE(cf, status == TMX_ERR_NO_MESSAGE, "peek for a claimed message: %s",
               cf_status_name(status));
    rc = cf_recv_check(cf, t, CF_FULL_MASK, 64, t, 41, "receive after claim (the second)");
    if (rc != CF_PASS) {
        goto out;
    }
    for (int i = 0; i < 2; i++) {
        size_t len = (i == 0) ? 40 : lens[2];

        buf = cf_alloc(cf, len);
        memset(&info, 0, sizeof(info));
        status = tmx_tag_msg_recv_nb(cf->worker, buf, len, msg[i], NULL, &mreq);
        CF_REQUIRE(cf, status == TMX_INPROGRESS, "tmx_tag_msg_recv_nb #%d: %s", i,
                   cf_status_name(status));
        cf_track(cf, mreq);
        status = cf_wait(cf, mreq, &info);
        CF_REQUIRE(cf, status == TMX_OK && info.length == len && info.tag == tags[i == 0 ? 0 : 2],
                   "claimed message #%d: %s tag 0x%" PRIx64 " len %zu (expected len %zu)", i,
                   cf_status_name(status), info.tag, info.length, len);
        CF_REQUIRE(cf, cf_verify(buf, len, cf_seed_of(info.tag, len, cf->src)) < 0,
                   "claimed message #%d: wrong data", i);
    }
    rc = cf_wait_list(cf, tags, lens, 3, reqs);
out:
    return rc;
}

static int cf_case_probe_discard(cf_t *cf)
{
    const tmx_tag_t     t      = cf_tag(cf, 0x30);
    const tmx_tag_t     tags[] = {t, cf_tag(cf, 0x31), t};
    const size_t        lens[] = {30, cf_rndv_len(cf), 31};
    tmx_request_h       reqs[3];
    tmx_tag_recv_info_t info;
    tmx_status_t        status;
    int                 rc;

    rc = cf_send_list(cf, tags, lens, 3, reqs);
    if (rc != CF_PASS) {
        goto out;
    }
    for (int i = 0; i < 2; i++) {
        memset(&info, 0, sizeof(info));
        status = cf_probe_wait(cf, tags[i], CF_FULL_MASK, TMX_PROBE_DISCARD, &info, NULL);
        CF_REQUIRE(cf, status == TMX_OK && info.tag == tags[i] && info.length == lens[i],
                   "discard #%d: expected len %zu, got %s len %zu", i, lens[i],
                   cf_status_name(status), info.length);
    }
    status = tmx_tag_probe(cf->worker, tags[1], CF_FULL_MASK, TMX_PROBE_PEEK, &info, NULL);
    CF_REQUIRE(cf, status == TMX_ERR_NO_MESSAGE, "peek for a discarded message: %s",
               cf_status_name(status));
    /* The next message with the discarded one's tag is the third one sent. */
    rc = cf_recv_check(cf, t, CF_FULL_MASK, 64, t, 31, "receive after discard");
    if (rc != CF_PASS) {
        goto out;
    }
    /* Senders of discarded messages (eager and rendezvous) still complete, successfully. */
    rc = cf_wait_list(cf, tags, lens, 3, reqs);
out:
    return rc;
}

static int cf_case_probe_none(cf_t *cf)
{
    tmx_message_h       sentinel = (tmx_message_h)(uintptr_t)0x5a5a5a50;
    tmx_message_h       msg;
    tmx_tag_recv_info_t info;
    tmx_status_t        status;
    int                 rc = CF_PASS;

    for (int mode = TMX_PROBE_PEEK; mode <= TMX_PROBE_DISCARD; mode++) {
        for (int m = 0; m < 2; m++) {
            tmx_tag_t mask = (m == 0) ? CF_FULL_MASK : CF_CASE_MASK;

            msg    = sentinel;
            info.tag = 0x1234;
            info.length = 77;
            cf_progress_for(cf, 0.001);
            status = tmx_tag_probe(cf->worker, cf_tag(cf, 0x40), mask, (tmx_probe_mode_t)mode,
                                   &info, &msg);
            CF_REQUIRE(cf, status == TMX_ERR_NO_MESSAGE,
                       "probe mode %d mask 0x%" PRIx64 " with nothing sent: %s", mode, mask,
                       cf_status_name(status));
            CF_REQUIRE(cf, msg == sentinel && info.tag == 0x1234 && info.length == 77,
                       "probe mode %d returned NO_MESSAGE but wrote its outputs", mode);
        }
    }
out:
    return rc;
}

/* ------------------------------------------------------------------ cancel */

static int cf_case_cancel_posted(cf_t *cf)
{
    const tmx_tag_t     t = cf_tag(cf, 0x50);
    const tmx_tag_t     u = cf_tag(cf, 0x51);
    tmx_request_h       r0, r1, r2, r3, sreq[3];
    unsigned char      *b0 = cf_alloc(cf, 16);
    tmx_tag_recv_info_t info;
    tmx_status_t        status;
    const tmx_tag_t     tags[] = {t, u, u};
    const size_t        lens[] = {8, 9, 10};
    int                 rc     = CF_PASS;

    memset(b0, 0xa5, 16);
    status = cf_recv(cf, b0, 16, t, CF_FULL_MASK, &r0);
    CF_REQUIRE(cf, status == TMX_INPROGRESS, "post: %s", cf_status_name(status));
    status = tmx_request_cancel(r0);
    CF_REQUIRE(cf, status == TMX_OK, "cancel of a posted receive returned %s",
               cf_status_name(status));
    status = cf_wait(cf, r0, &info);
    CF_REQUIRE(cf, status == TMX_ERR_CANCELED, "canceled receive completed with %s",
               cf_status_name(status));
    /* A canceled receive between two others leaves the post order of the rest intact. */
    CF_REQUIRE(cf, cf_recv(cf, cf_alloc(cf, 16), 16, u, CF_FULL_MASK, &r1) == TMX_INPROGRESS,
               "post r1");
    CF_REQUIRE(cf, cf_recv(cf, cf_alloc(cf, 16), 16, 0, 0, &r2) == TMX_INPROGRESS, "post r2");
    CF_REQUIRE(cf, cf_recv(cf, cf_alloc(cf, 16), 16, u, CF_FULL_MASK, &r3) == TMX_INPROGRESS,
               "post r3");
    status = tmx_request_cancel(r2);
    CF_REQUIRE(cf, status == TMX_OK, "cancel of a posted wildcard receive returned %s",
               cf_status_name(status));
    status = cf_wait(cf, r2, NULL);
    CF_REQUIRE(cf, status == TMX_ERR_CANCELED, "canceled wildcard receive completed with %s",
               cf_status_name(status));
    CF_REQUIRE(cf, tmx_job_barrier(cf->job) == TMX_OK, "barrier");
    rc = cf_send_list(cf, tags, lens, 3, sreq);
    if (rc != CF_PASS) {
        goto out;
    }
    /* t must not land in the canceled buffer: a new receive gets it. */
    rc = cf_recv_check(cf, t, CF_FULL_MASK, 16, t, 8, "receive after cancel");
    if (rc != CF_PASS) {
        goto out;
    }
    for (int i = 0; i < 16; i++) {
        CF_REQUIRE(cf, b0[i] == 0xa5, "the canceled receive's buffer was written (byte %d)", i);
    }
    memset(&info, 0, sizeof(info));
    status = cf_wait(cf, r1, &info);
    CF_REQUIRE(cf, status == TMX_OK && info.length == 9, "r1 (posted before the canceled "
               "wildcard): %s len %zu, expected len 9", cf_status_name(status), info.length);
    memset(&info, 0, sizeof(info));
    status = cf_wait(cf, r3, &info);
    CF_REQUIRE(cf, status == TMX_OK && info.length == 10, "r3 (posted after the canceled "
               "wildcard): %s len %zu, expected len 10", cf_status_name(status), info.length);
    rc = cf_wait_list(cf, tags, lens, 3, sreq);
out:
    return rc;
}

static int cf_case_cancel_matched(cf_t *cf)
{
    const tmx_tag_t     tags[] = {cf_tag(cf, 0x60), cf_tag(cf, 0x61)};
    const size_t        lens[] = {20, cf_rndv_len(cf)};
    const tmx_tag_t     tp     = cf_tag(cf, 0x62);
    tmx_request_h       sreq[2], preq, rreq;
    tmx_tag_recv_info_t info;
    tmx_status_t        status;
    int                 rc;

    rc = cf_send_list(cf, tags, lens, 2, sreq);
    if (rc != CF_PASS) {
        goto out;
    }
    for (int i = 0; i < 2; i++) {
        unsigned char *buf = cf_alloc(cf, lens[i]);

        status = cf_probe_wait(cf, tags[i], CF_FULL_MASK, TMX_PROBE_PEEK, &info, NULL);
        CF_REQUIRE(cf, status == TMX_OK, "waiting for message #%d: %s", i,
                   cf_status_name(status));
        /* The receive matches the arrived message when it is posted: too late to cancel,
         * also while the rendezvous data is still on its way. */
        status = cf_recv(cf, buf, lens[i], tags[i], CF_FULL_MASK, &rreq);
        CF_REQUIRE(cf, status == TMX_INPROGRESS, "post: %s", cf_status_name(status));
        status = tmx_request_cancel(rreq);
        CF_REQUIRE(cf, status == TMX_ERR_BUSY,
                   "cancel of a receive matched at post (%zu bytes): expected TMX_ERR_BUSY, "
                   "got %s", lens[i], cf_status_name(status));
        memset(&info, 0, sizeof(info));
        status = cf_wait(cf, rreq, &info);
        CF_REQUIRE(cf, status == TMX_OK && info.length == lens[i] &&
                           cf_verify(buf, lens[i], cf_seed_of(tags[i], lens[i], cf->src)) < 0,
                   "receive after a refused cancel: %s len %zu (or wrong data)",
                   cf_status_name(status), info.length);
    }
    rc = cf_wait_list(cf, tags, lens, 2, sreq);
    if (rc != CF_PASS) {
        goto out;
    }
    /* Posted, then the message arrives and completes it: cancel after completion is BUSY. */
    status = cf_recv(cf, cf_alloc(cf, 8), 8, tp, CF_FULL_MASK, &rreq);
    CF_REQUIRE(cf, status == TMX_INPROGRESS, "post: %s", cf_status_name(status));
    CF_REQUIRE(cf, tmx_job_barrier(cf->job) == TMX_OK, "barrier");
    status = cf_send(cf, cf->eps[cf->dst], NULL, 0, tp, 0, &preq);
    CF_REQUIRE(cf, status == TMX_OK || status == TMX_INPROGRESS, "send: %s",
               cf_status_name(status));
    status = cf_wait(cf, rreq, NULL);
    CF_REQUIRE(cf, status == TMX_OK, "posted receive: %s", cf_status_name(status));
    status = tmx_request_cancel(rreq);
    CF_REQUIRE(cf, status == TMX_ERR_BUSY,
               "cancel of a completed receive: expected TMX_ERR_BUSY, got %s",
               cf_status_name(status));
    CF_REQUIRE(cf, tmx_request_test(rreq, NULL) == TMX_OK,
               "a refused cancel changed the request's status");
    status = cf_wait(cf, preq, NULL);
    CF_REQUIRE(cf, status == TMX_OK, "send: %s", cf_status_name(status));
    /* Sends cannot be canceled. */
    {
        unsigned char *big = cf_alloc(cf, cf_rndv_len(cf));
        tmx_tag_t      tb  = cf_tag(cf, 0x63);

        cf_fill(big, cf_rndv_len(cf), cf_seed_of(tb, cf_rndv_len(cf), cf->rank));

        status = cf_send(cf, cf->eps[cf->dst], big, cf_rndv_len(cf), tb, 0, &preq);
        CF_REQUIRE(cf, status == TMX_OK || status == TMX_INPROGRESS, "send: %s",
                   cf_status_name(status));
        if (preq != NULL) {
            status = tmx_request_cancel(preq);
            CF_REQUIRE(cf, status == TMX_ERR_UNSUPPORTED || status == TMX_ERR_BUSY,
                       "cancel of a send: expected TMX_ERR_UNSUPPORTED, got %s",
                       cf_status_name(status));
        }
        rc = cf_recv_check(cf, tb, CF_FULL_MASK, cf_rndv_len(cf), tb, cf_rndv_len(cf),
                           "rendezvous after a refused send cancel");
        if (rc != CF_PASS) {
            goto out;
        }
        status = cf_wait(cf, preq, NULL);
        CF_REQUIRE(cf, status == TMX_OK, "send after a refused cancel: %s",
                   cf_status_name(status));
    }
out:
    return rc;
}

/* ------------------------------------------------------------------ sizes */

static int cf_case_truncate(cf_t *cf)
{
    const size_t   e      = cf->eager_max;
    const cf_msg_t msgs[] = {
        {cf_tag(cf, 1), 100, 0},
        {cf_tag(cf, 2), 2 * e + 5, 0},
        {cf_tag(cf, 3), e, 0},
        {cf_tag(cf, 4), 1u << 20, 0},
        {cf_tag(cf, 5), e + 1, 0},
        {cf_tag(cf, 6), 7, 0},
    };
    const cf_rcv_t rcvs[] = {
        {cf_tag(cf, 1), CF_FULL_MASK, 10},
        {cf_tag(cf, 2), CF_FULL_MASK, e / 2 > 0 ? e / 2 : 1},
        {cf_tag(cf, 3), CF_FULL_MASK, e > 0 ? e - 1 : 0},
        {cf_tag(cf, 4), CF_FULL_MASK, 4096},
        {cf_tag(cf, 5), CF_FULL_MASK, e},
        {cf_tag(cf, 6), CF_FULL_MASK, 0}, /* NULL buffer: nothing delivered, real length */
    };

    return cf_ring_all(cf, msgs, CF_ARRAY_LEN(msgs), rcvs, CF_ARRAY_LEN(rcvs), "truncate");
}

static int cf_case_zero_byte(cf_t *cf)
{
    const cf_msg_t msgs[] = {
        {cf_tag(cf, 1), 0, 0},
        {cf_tag(cf, 2), 0, TMX_SEND_FLAG_SYNC},
        {cf_tag(cf, 3), 0, 0},
        {cf_tag(cf, 4), 0, 0},
    };
    const cf_rcv_t rcvs[] = {
        {cf_tag(cf, 1), CF_FULL_MASK, 0},
        {cf_tag(cf, 2), CF_FULL_MASK, 0},
        {cf_tag(cf, 3), CF_FULL_MASK, 16}, /* a real buffer is fine too */
        {0, 0, 0},
    };

    return cf_ring_all(cf, msgs, CF_ARRAY_LEN(msgs), rcvs, CF_ARRAY_LEN(rcvs), "zero-byte");
}

static int cf_case_sizes(cf_t *cf)
{
    const size_t e       = cf->eager_max;
    const size_t cand[] = {0,     1,     7,         8,         63,        64,      4095, 4096,
                           e - 1, e,     e + 1,     64u << 10, 1u << 20,  4u << 20};
    size_t       sizes[CF_ARRAY_LEN(cand)];
    size_t       n  = 0;
    int          rc = CF_PASS;

    for (size_t i = 0; i < CF_ARRAY_LEN(cand); i++) {
        int dup = (e == 0 && i == 8) || cand[i] > cf->max_msg;
        for (size_t k = 0; k < n; k++) {
            dup |= (sizes[k] == cand[i]);
        }
        if (!dup) {
            sizes[n++] = cand[i];
        }
    }
    for (size_t i = 0; i < n && rc == CF_PASS; i++) {
        cf_msg_t m = {cf_tag(cf, 0x1000 + i), sizes[i], 0};
        cf_rcv_t r = {cf_tag(cf, 0x1000 + i), CF_FULL_MASK, sizes[i]};
        char     what[48];

        snprintf(what, sizeof(what), "size %zu", sizes[i]);
        rc = cf_ring(cf, &m, 1, &r, 1, CF_ORDER_POSTED, what);
        if (rc == CF_PASS) {
            rc = cf_ring(cf, &m, 1, &r, 1, CF_ORDER_UNEXP, what);
        }
        if (rc == CF_PASS) {
            /* Synchronous variant of every size. */
            m.flags = TMX_SEND_FLAG_SYNC;
            snprintf(what, sizeof(what), "size %zu sync", sizes[i]);
            rc = cf_ring(cf, &m, 1, &r, 1, CF_ORDER_MIXED, what);
        }
    }
    return rc;
}

/* ------------------------------------------------------------------ many-to-one */

/* Rank 0's receives of one many-to-one round: directed ones first, then the wildcards
 * (alternately a true wildcard, mask 0, and a source wildcard). */
static int cf_m21_post(cf_t *cf, int round, size_t big, tmx_request_h *dreq,
                       tmx_request_h *wreq, unsigned char **dbuf, unsigned char **wbuf)
{
    tmx_status_t status;

    for (int r = 0; r < cf->size; r++) {
        tmx_tag_t t = cf_tag(cf, ((uint64_t)round << 32) | ((uint64_t)r << 8));
        size_t    l = (size_t)r * 3 + 1;

        dbuf[r] = cf_alloc(cf, l);
        status  = cf_recv(cf, dbuf[r], l, t, CF_FULL_MASK, &dreq[r]);
        if (status != TMX_INPROGRESS) {
            return cf_fail(cf, "post directed receive: %s", cf_status_name(status));
        }
    }
    /* a wildcard takes any rank's (r, 1): big from odd ranks, r * 3 + 2 bytes from even ones,
     * which is more than big where the eager limit is tiny (TMX_EAGER_MAX=0: big is 5) */
    size_t wlen = big > (size_t)cf->size * 3 + 2 ? big : (size_t)cf->size * 3 + 2;

    for (int w = 0; w < cf->size; w++) {
        tmx_tag_t t    = cf_tag(cf, ((uint64_t)round << 32) | 1);
        tmx_tag_t mask = ((w % 2) == 0) ? 0 : (CF_CASE_MASK | (0xffull << 32) | 0xff);

        wbuf[w] = cf_alloc(cf, wlen);
        status  = cf_recv(cf, wbuf[w], wlen, t, mask, &wreq[w]);
        if (status != TMX_INPROGRESS) {
            return cf_fail(cf, "post wildcard receive: %s", cf_status_name(status));
        }
    }
    return CF_PASS;
}

static int cf_case_many_to_one(cf_t *cf)
{
    const size_t        big = cf_rndv_len(cf);
    tmx_tag_t           tag[2];
    size_t              len[2];
    tmx_request_h       sreq[2];
    int                 rc = CF_PASS;
    tmx_tag_recv_info_t info;
    tmx_status_t        status;

    for (int round = 0; round < 2; round++) {
        /* Each rank r sends (r, 0) that rank 0 receives with a directed (exact) receive, and
         * (r, 1) that only source wildcards can take. Directed receives are posted first, so
         * they win every (r, 0) whenever it arrives; the wildcards get every (r, 1). */
        tmx_request_h *dreq = NULL, *wreq = NULL;
        unsigned char **dbuf = NULL, **wbuf = NULL;
        char          *seen  = NULL;

        for (int k = 0; k < 2; k++) {
            tag[k] = cf_tag(cf, ((uint64_t)round << 32) | ((uint64_t)cf->rank << 8) | (uint64_t)k);
            len[k] = (k == 1 && (cf->rank % 2) == 1) ? big : (size_t)cf->rank * 3 + 1 + k;
        }
        if (cf->rank == 0) {
            dreq = calloc((size_t)cf->size, sizeof(*dreq));
            wreq = calloc((size_t)cf->size, sizeof(*wreq));
            dbuf = calloc((size_t)cf->size, sizeof(*dbuf));
            wbuf = calloc((size_t)cf->size, sizeof(*wbuf));
            seen = calloc((size_t)cf->size, 1);
            if (dreq == NULL || wreq == NULL || dbuf == NULL || wbuf == NULL || seen == NULL) {
                abort();
            }
        }
        if (cf->rank == 0 && round == 0) {
            rc = cf_m21_post(cf, round, big, dreq, wreq, dbuf, wbuf);
        }
        if (rc == CF_PASS && tmx_job_barrier(cf->job) != TMX_OK) {
            rc = cf_fail(cf, "barrier");
        }
        for (int k = 0; k < 2 && rc == CF_PASS; k++) {
            void *buf = cf_alloc(cf, len[k]);
            cf_fill(buf, len[k], cf_seed_of(tag[k], len[k], cf->rank));
            status = cf_send(cf, cf->eps[0], buf, len[k], tag[k], 0, &sreq[k]);
            if (status != TMX_OK && status != TMX_INPROGRESS) {
                rc = cf_fail(cf, "send to rank 0: %s", cf_status_name(status));
            }
        }
        if (rc == CF_PASS && cf->rank == 0 && round == 1) {
            rc = cf_m21_post(cf, round, big, dreq, wreq, dbuf, wbuf);
        }
        for (int r = 0; cf->rank == 0 && r < cf->size && rc == CF_PASS; r++) {
            tmx_tag_t want = cf_tag(cf, ((uint64_t)round << 32) | ((uint64_t)r << 8));
            size_t    wlen = (size_t)r * 3 + 1;

            memset(&info, 0, sizeof(info));
            status = cf_wait(cf, dreq[r], &info);
            if (status != TMX_OK || info.tag != want || info.length != wlen ||
                cf_verify(dbuf[r], wlen, cf_seed_of(want, wlen, r)) >= 0) {
                rc = cf_fail(cf, "round %d: directed receive for rank %d: %s tag 0x%" PRIx64
                                 " len %zu (expected tag 0x%" PRIx64 " len %zu, or bad data)",
                             round, r, cf_status_name(status), info.tag, info.length, want,
                             wlen);
            }
        }
        for (int w = 0; cf->rank == 0 && w < cf->size && rc == CF_PASS; w++) {
            int    from;
            size_t wlen;

            memset(&info, 0, sizeof(info));
            status = cf_wait(cf, wreq[w], &info);
            from   = (int)((info.tag >> 8) & 0xffffff);
            if (status != TMX_OK || (info.tag & 0xff) != 1 || from >= cf->size || seen[from]) {
                rc = cf_fail(cf, "round %d: wildcard receive #%d: %s tag 0x%" PRIx64
                                 " len %zu (expected a (rank, 1) message not seen before)",
                             round, w, cf_status_name(status), info.tag, info.length);
                break;
            }
            seen[from] = 1;
            wlen       = (from % 2 == 1) ? big : (size_t)from * 3 + 2;
            if (info.length != wlen ||
                cf_verify(wbuf[w], wlen, cf_seed_of(info.tag, wlen, from)) >= 0) {
                rc = cf_fail(cf, "round %d: wildcard receive #%d from rank %d: len %zu "
                                 "(expected %zu) or bad data",
                             round, w, from, info.length, wlen);
            }
        }
        for (int k = 0; k < 2 && rc == CF_PASS; k++) {
            status = cf_wait(cf, sreq[k], NULL);
            if (status != TMX_OK) {
                rc = cf_fail(cf, "round %d: send %d to rank 0 completed with %s", round, k,
                             cf_status_name(status));
            }
        }
        free(dreq);
        free(wreq);
        free(dbuf);
        free(wbuf);
        free(seen);
        if (rc != CF_PASS) {
            break;
        }
    }
    return rc;
}

/* ------------------------------------------------------------------ sync send */

/* Sender side of one synchronous send to `peer`: the send must stay in progress while the
 * receiver holds the message unexpected, and complete once it posts. */
static int cf_sync_sender(cf_t *cf, int peer, size_t len, tmx_tag_t tag)
{
    const tmx_tag_t     t_arr = cf_tag(cf, 0x7a);
    const tmx_tag_t     t_go  = cf_tag(cf, 0x7b);
    void               *buf   = cf_alloc(cf, len);
    tmx_request_h       sreq, areq, greq;
    tmx_status_t        status;
    double              deadline;
    int                 rc = CF_PASS;

    cf_fill(buf, len, cf_seed_of(tag, len, cf->rank));
    status = cf_recv(cf, NULL, 0, t_arr, CF_FULL_MASK, &areq);
    CF_REQUIRE(cf, status == TMX_INPROGRESS, "post: %s", cf_status_name(status));
    status = cf_send(cf, cf->eps[peer], buf, len, tag, TMX_SEND_FLAG_SYNC, &sreq);
    CF_REQUIRE(cf, status == TMX_INPROGRESS,
               "sync send of %zu bytes returned %s before any receive was posted (expected "
               "TMX_INPROGRESS)", len, cf_status_name(status));
    /* Until the receiver says the message arrived (and it has posted nothing), the
     * synchronous send must stay in progress. */
    deadline = cf_now() + cf->timeout_s;
    while ((status = tmx_request_test(areq, NULL)) == TMX_INPROGRESS && cf_now() < deadline) {
        tmx_worker_progress(cf->worker);
        status = tmx_request_test(sreq, NULL);
        CF_REQUIRE(cf, status == TMX_INPROGRESS,
                   "sync send of %zu bytes completed (%s) before the receiver posted a receive",
                   len, cf_status_name(status));
    }
    CF_REQUIRE(cf, status == TMX_OK, "waiting for the receiver's 'arrived': %s",
               cf_status_name(status == TMX_INPROGRESS ? CF_TIMED_OUT : status));
    cf_progress_for(cf, 0.02);
    status = tmx_request_test(sreq, NULL);
    CF_REQUIRE(cf, status == TMX_INPROGRESS,
               "sync send of %zu bytes completed (%s) while the message sat unexpected at the "
               "receiver", len, cf_status_name(status));
    status = cf_send(cf, cf->eps[peer], NULL, 0, t_go, 0, &greq);
    CF_REQUIRE(cf, status == TMX_OK || status == TMX_INPROGRESS, "send 'go': %s",
               cf_status_name(status));
    status = cf_wait(cf, sreq, NULL);
    CF_REQUIRE(cf, status == TMX_OK, "sync send of %zu bytes after the receive was posted: %s",
               len, cf_status_name(status));
    status = cf_wait(cf, greq, NULL);
    CF_REQUIRE(cf, status == TMX_OK, "send 'go': %s", cf_status_name(status));
out:
    return rc;
}

static int cf_sync_receiver(cf_t *cf, int peer, size_t len, tmx_tag_t tag)
{
    const tmx_tag_t     t_arr = cf_tag(cf, 0x7a);
    const tmx_tag_t     t_go  = cf_tag(cf, 0x7b);
    tmx_tag_recv_info_t info;
    tmx_status_t        status;
    int                 rc = CF_PASS;

    status = cf_probe_wait(cf, tag, CF_FULL_MASK, TMX_PROBE_PEEK, &info, NULL);
    CF_REQUIRE(cf, status == TMX_OK && info.length == len, "waiting for the sync message: %s",
               cf_status_name(status));
    status = cf_send_wait(cf, cf->eps[peer], NULL, 0, t_arr);
    CF_REQUIRE(cf, status == TMX_OK, "send 'arrived': %s", cf_status_name(status));
    status = cf_recv_wait(cf, NULL, 0, t_go, CF_FULL_MASK, &info);
    CF_REQUIRE(cf, status == TMX_OK, "receive 'go': %s", cf_status_name(status));
    rc = cf_recv_check_from(cf, peer, tag, len, "sync message");
out:
    return rc;
}

static int cf_case_sync_send(cf_t *cf)
{
    const size_t lens[] = {64, cf_rndv_len(cf), 0};
    int          peer   = (cf->rank % 2 == 0) ? cf->rank + 1 : cf->rank - 1;
    int          sender = (cf->rank % 2 == 0);
    int          rc     = CF_PASS;
    tmx_status_t status;

    if (peer >= cf->size) {
        return cf_skip(cf, "no partner rank (odd number of ranks)");
    }
    for (size_t k = 0; k < sizeof(lens) / sizeof(lens[0]) && rc == CF_PASS; k++) {
        tmx_tag_t tag = cf_tag(cf, 0x70 + k);

        rc = sender ? cf_sync_sender(cf, peer, lens[k], tag)
                    : cf_sync_receiver(cf, peer, lens[k], tag);
    }
    if (rc != CF_PASS) {
        goto out;
    }
    /* The blocking helper: the receiver posts at once, the helper must return TMX_OK. */
    if (sender) {
        void *buf = cf_alloc(cf, 100);
        cf_fill(buf, 100, cf_seed_of(cf_tag(cf, 0x7c), 100, cf->rank));
        status = tmx_tag_send_sync(cf->eps[peer], buf, 100, cf_tag(cf, 0x7c));
        CF_REQUIRE(cf, status == TMX_OK, "tmx_tag_send_sync: %s", cf_status_name(status));
    } else {
        rc = cf_recv_check_from(cf, peer, cf_tag(cf, 0x7c), 100, "tmx_tag_send_sync message");
    }
out:
    return rc;
}

/* A synchronous message behind a standard one that stays unexpected, received by an exact
 * receive; the standard one is drained afterwards (found by the random schedules: seed 1,
 * schedule 0, 4 ranks). Nothing may stay queued. */
static int cf_case_sync_unexpected(cf_t *cf)
{
    const size_t   e      = cf->eager_max;
    const cf_msg_t msgs[] = {{cf_tag(cf, 0), 53, 0}, {cf_tag(cf, 7), 2, TMX_SEND_FLAG_SYNC}};
    const cf_rcv_t rcvs[] = {{cf_tag(cf, 7), CF_FULL_MASK, 53}};
    const cf_msg_t big[]  = {{cf_tag(cf, 0), e + 1, 0}, {cf_tag(cf, 7), 2, TMX_SEND_FLAG_SYNC},
                             {cf_tag(cf, 8), e + 2, TMX_SEND_FLAG_SYNC}};
    const cf_rcv_t brcv[] = {{cf_tag(cf, 8), CF_FULL_MASK, e + 2},
                             {cf_tag(cf, 7), CF_FULL_MASK, 53}};
    /* A synchronous message first, standard ones behind it on the same endpoint, taken by
     * wildcards (found by seed 4, schedule 0, 2 ranks). */
    const cf_msg_t first[] = {{cf_tag(cf, 4), 59, TMX_SEND_FLAG_SYNC}, {cf_tag(cf, 2), 33, 0},
                              {cf_tag(cf, 6), 40, 0}, {cf_tag(cf, 0), 5, 0}};
    const cf_rcv_t frcv[]  = {{cf_tag(cf, 0x8c), CF_CASE_MASK, 64},
                              {cf_tag(cf, 0x1f1), CF_CASE_MASK, 64},
                              {cf_tag(cf, 0), CF_FULL_MASK, 64},
                              {cf_tag(cf, 6), CF_FULL_MASK, 64}};
    int            rc;

    rc = cf_ring_all(cf, first, CF_ARRAY_LEN(first), frcv, CF_ARRAY_LEN(frcv), "sync-first");
    if (rc == CF_PASS) {
        rc = cf_ring_all(cf, msgs, CF_ARRAY_LEN(msgs), rcvs, CF_ARRAY_LEN(rcvs), "eager");
    }
    if (rc == CF_PASS) {
        rc = cf_ring_all(cf, big, CF_ARRAY_LEN(big), brcv, CF_ARRAY_LEN(brcv), "rndv");
    }
    return rc;
}

/* ------------------------------------------------------------------ callbacks */

typedef struct cf_cb_rec {
    int                 calls;
    tmx_status_t        status;
    tmx_tag_recv_info_t info;
    void               *user_data;
    tmx_request_h       req;
} cf_cb_rec_t;

/* Static: a callback of a request leaked by a failed case may still run later. */
static cf_cb_rec_t cf_cb_recs[16];

static void cf_cb_send(tmx_request_h req, tmx_status_t status, void *user_data)
{
    cf_cb_rec_t *rec = user_data;

    rec->calls++;
    rec->status    = status;
    rec->user_data = user_data;
    rec->req       = req;
}

static void cf_cb_recv(tmx_request_h req, tmx_status_t status, const tmx_tag_recv_info_t *info,
                       void *user_data)
{
    cf_cb_rec_t *rec = user_data;

    rec->calls++;
    rec->status    = status;
    rec->user_data = user_data;
    rec->req       = req;
    if (info != NULL) {
        rec->info = *info;
    } else {
        rec->info.length = (size_t)-1;
    }
}

static int cf_case_callbacks(cf_t *cf)
{
    const size_t    big     = cf_rndv_len(cf);
    const size_t    slen[]  = {10, 100, big};
    const size_t    rlen[]  = {64, 8, big, 16};
    const int       nsend   = 3, nrecv = 4;
    tmx_request_h   rreq[4] = {NULL}, sreq[3] = {NULL};
    tmx_status_t    status;
    int             rc = CF_PASS;

    for (int round = 0; round < 2; round++) {
        /* round 0: receives posted first; round 1: messages arrive first. */
        memset(cf_cb_recs, 0, sizeof(cf_cb_recs));
        for (int phase = 0; phase < 2; phase++) {
            if ((phase == 0) == (round == 0)) {
                for (int j = 0; j < nrecv; j++) {
                    tmx_request_params_t p = {
                        .field_mask = TMX_REQ_PARAM_CALLBACK | TMX_REQ_PARAM_USER_DATA,
                        .cb.recv    = cf_cb_recv,
                        .user_data  = &cf_cb_recs[j],
                    };
                    tmx_tag_t t = cf_tag(cf, ((uint64_t)round << 16) | (0x80 + (uint64_t)j));
                    void     *b = cf_alloc(cf, rlen[j]);

                    if (round == 1 && j < nsend) {
                        status = cf_probe_wait(cf, t, CF_FULL_MASK, TMX_PROBE_PEEK, NULL, NULL);
                        CF_REQUIRE(cf, status == TMX_OK, "round 1: waiting for message %d: %s",
                                   j, cf_status_name(status));
                    }
                    status = tmx_tag_recv_nb(cf->worker, b, rlen[j], t, CF_FULL_MASK, &p,
                                             &rreq[j]);
                    CF_REQUIRE(cf, status == TMX_INPROGRESS, "post with callback: %s",
                               cf_status_name(status));
                    cf_track(cf, rreq[j]);
                }
                if (round == 0) {
                    CF_REQUIRE(cf, tmx_job_barrier(cf->job) == TMX_OK, "barrier");
                }
            } else {
                for (int i = 0; i < nsend; i++) {
                    tmx_request_params_t p = {
                        .field_mask = TMX_REQ_PARAM_CALLBACK | TMX_REQ_PARAM_USER_DATA,
                        .cb.send    = cf_cb_send,
                        .user_data  = &cf_cb_recs[8 + i],
                    };
                    tmx_tag_t t = cf_tag(cf, ((uint64_t)round << 16) | (0x80 + (uint64_t)i));
                    void     *b = cf_alloc(cf, slen[i]);

                    cf_fill(b, slen[i], cf_seed_of(t, slen[i], cf->rank));
                    sreq[i] = NULL;
                    status  = tmx_tag_send_nb(cf->eps[cf->dst], b, slen[i], t, &p, &sreq[i]);
                    CF_REQUIRE(cf, status == TMX_OK || status == TMX_INPROGRESS,
                               "send with callback: %s", cf_status_name(status));
                    if (status == TMX_OK) {
                        CF_REQUIRE(cf, sreq[i] == NULL, "send completed in place (TMX_OK) but "
                                   "set a request");
                        sreq[i] = NULL;
                    }
                    cf_track(cf, sreq[i]);
                    cf_cb_recs[12 + i].calls = (status == TMX_INPROGRESS); /* expected calls */
                }
            }
        }
        /* The receive for tag 0x83 gets no message: cancel it, its callback says so. */
        status = tmx_request_cancel(rreq[3]);
        CF_REQUIRE(cf, status == TMX_OK, "cancel: %s", cf_status_name(status));
        for (int j = 0; j < nrecv; j++) {
            CF_REQUIRE(cf, cf_wait(cf, rreq[j], NULL) != CF_TIMED_OUT, "recv %d timed out", j);
        }
        for (int i = 0; i < nsend; i++) {
            CF_REQUIRE(cf, cf_wait(cf, sreq[i], NULL) != CF_TIMED_OUT, "send %d timed out", i);
        }
        /* Extra progress: a second call of a callback would show up here. */
        cf_progress_for(cf, 0.01);
        for (int j = 0; j < nrecv; j++) {
            cf_cb_rec_t *c    = &cf_cb_recs[j];
            tmx_status_t want = (j == 1) ? TMX_ERR_TRUNCATED
                                         : (j == 3) ? TMX_ERR_CANCELED : TMX_OK;
            tmx_tag_t    t    = cf_tag(cf, ((uint64_t)round << 16) | (0x80 + (uint64_t)j));

            CF_REQUIRE(cf, c->calls == 1, "round %d: recv %d callback called %d times", round,
                       j, c->calls);
            CF_REQUIRE(cf, c->status == want && c->user_data == &cf_cb_recs[j] &&
                               c->req == rreq[j],
                       "round %d: recv %d callback: status %s (expected %s), user_data %s, "
                       "request %s", round, j, cf_status_name(c->status), cf_status_name(want),
                       c->user_data == &cf_cb_recs[j] ? "ok" : "WRONG",
                       c->req == rreq[j] ? "ok" : "WRONG");
            if (j < nsend) {
                CF_REQUIRE(cf, c->info.tag == t && c->info.length == slen[j],
                           "round %d: recv %d callback info: tag 0x%" PRIx64 " len %zu "
                           "(expected 0x%" PRIx64 " len %zu)", round, j, c->info.tag,
                           c->info.length, t, slen[j]);
            }
        }
        for (int i = 0; i < nsend; i++) {
            cf_cb_rec_t *c    = &cf_cb_recs[8 + i];
            int          want = cf_cb_recs[12 + i].calls;

            CF_REQUIRE(cf, c->calls == want, "round %d: send %d (%zu bytes, %s) callback "
                       "called %d times, expected %d", round, i, slen[i],
                       want ? "returned TMX_INPROGRESS" : "completed in place", c->calls, want);
            CF_REQUIRE(cf, want == 0 || (c->status == TMX_OK && c->user_data == c &&
                                         c->req == sreq[i]),
                       "round %d: send %d callback: status %s, user_data %s, request %s", round,
                       i, cf_status_name(c->status), c->user_data == c ? "ok" : "WRONG",
                       c->req == sreq[i] ? "ok" : "WRONG");
        }
        /* Before the next round's barrier: everything of this round is complete. */
    }
out:
    return rc;
}

/* ------------------------------------------------------------------ self */

static int cf_case_self_send(cf_t *cf)
{
    const size_t    big = 2 * cf->eager_max_self + 5;
    const tmx_tag_t t1 = cf_tag(cf, 1), t2 = cf_tag(cf, 2), t3 = cf_tag(cf, 3);
    const tmx_tag_t t4     = cf_tag(cf, 4);
    const cf_msg_t  msgs[] = {{t1, 10, 0}, {t2, big, 0}, {t3, 0, 0}, {t4, 1u << 20, 0},
                              {t1, 11, TMX_SEND_FLAG_SYNC}};
    const cf_rcv_t  rcvs[] = {{t1, CF_FULL_MASK, 64}, {cf_tag(cf, 0), CF_CASE_MASK, big},
                              {t4, CF_FULL_MASK, 1u << 20}, {t1, CF_FULL_MASK, 64},
                              {t3, CF_FULL_MASK, 0}};
    cf_script_t         s = {msgs, 5, rcvs, 5, CF_ORDER_POSTED, cf->rank, 7, 1, CF_CASE_MASK};
    tmx_request_h       sreq, rreq;
    tmx_tag_recv_info_t info;
    tmx_status_t        status;
    unsigned char       buf[32], rbuf[32];
    int                 rc = CF_PASS;

    for (int o = CF_ORDER_POSTED; o <= CF_ORDER_MIXED && rc == CF_PASS; o++) {
        char label[32];
        s.order = (cf_order_t)o;
        snprintf(label, sizeof(label), "self/%s", cf_order_name[o]);
        rc = cf_script_run(cf, &s, &s, label, cf->seed + (uint64_t)o);
    }
    if (rc != CF_PASS) {
        goto out;
    }
    /* Synchronous send to oneself: in progress until the receive is posted. */
    cf_fill(buf, sizeof(buf), 5);
    status = cf_send(cf, cf->eps[cf->rank], buf, sizeof(buf), cf_tag(cf, 9), TMX_SEND_FLAG_SYNC,
                     &sreq);
    CF_REQUIRE(cf, status == TMX_INPROGRESS, "sync send to self returned %s",
               cf_status_name(status));
    status = cf_probe_wait(cf, cf_tag(cf, 9), CF_FULL_MASK, TMX_PROBE_PEEK, &info, NULL);
    CF_REQUIRE(cf, status == TMX_OK, "sync message to self never arrived: %s",
               cf_status_name(status));
    cf_progress_for(cf, 0.01);
    status = tmx_request_test(sreq, NULL);
    CF_REQUIRE(cf, status == TMX_INPROGRESS, "sync send to self completed (%s) before a "
               "receive was posted", cf_status_name(status));
    status = cf_recv(cf, rbuf, sizeof(rbuf), cf_tag(cf, 9), CF_FULL_MASK, &rreq);
    CF_REQUIRE(cf, status == TMX_INPROGRESS, "post: %s", cf_status_name(status));
    status = cf_wait(cf, rreq, &info);
    CF_REQUIRE(cf, status == TMX_OK && info.length == sizeof(buf) &&
                       cf_verify(rbuf, sizeof(rbuf), 5) < 0,
               "receive of the sync message to self: %s len %zu", cf_status_name(status),
               info.length);
    status = cf_wait(cf, sreq, NULL);
    CF_REQUIRE(cf, status == TMX_OK, "sync send to self: %s", cf_status_name(status));
    /* Blocking helpers to self (eager, so the send can finish before the receive; not where
     * 16 bytes go by rendezvous, TMX_EAGER_MAX below 16: the send would wait for ever for
     * the receive after it, as an MPI_Send to self would) */
    if (cf->eager_max_self < 16) {
        goto out;
    }
    status = tmx_tag_send(cf->eps[cf->rank], buf, 16, cf_tag(cf, 10));
    CF_REQUIRE(cf, status == TMX_OK, "tmx_tag_send to self: %s", cf_status_name(status));
    memset(&info, 0, sizeof(info));
    status = tmx_tag_recv(cf->worker, rbuf, sizeof(rbuf), cf_tag(cf, 10), CF_FULL_MASK, &info);
    CF_REQUIRE(cf, status == TMX_OK && info.length == 16 && info.tag == cf_tag(cf, 10),
               "tmx_tag_recv from self: %s len %zu", cf_status_name(status), info.length);
out:
    return rc;
}

/* ------------------------------------------------------------------ directed receives */

/* Every rank's worker id (what tmx_tag_recv_info_t.sender reports). */
static int cf_ids(cf_t *cf, uint64_t *ids)
{
    tmx_worker_attr_t wa = {.field_mask = TMX_WORKER_ATTR_ID};

    if (tmx_worker_query(cf->worker, &wa) != TMX_OK ||
        tmx_job_allgather(cf->job, &wa.id, sizeof(wa.id), ids) != TMX_OK) {
        return cf_fail(cf, "worker ids: query or allgather failed");
    }
    return CF_PASS;
}

/* A receive of one 8-byte value, into a buffer of CF_DIR_BUF values (large enough for a
 * device's tag list under run_tm.sh), that takes messages of rank `from` only (-1: anyone). */
#define CF_DIR_BUF 8
static tmx_status_t cf_recv_from(cf_t *cf, int from, uint64_t *v, tmx_tag_t tag, tmx_tag_t mask,
                                 tmx_request_h *req_p)
{
    tmx_request_params_t rp = {.field_mask = TMX_REQ_PARAM_SOURCE};
    tmx_request_h        req = NULL;
    tmx_status_t         status;

    *v = 0;
    if (from < 0) {
        return cf_recv(cf, v, CF_DIR_BUF * sizeof(*v), tag, mask, req_p);
    }
    rp.source = cf->eps[from];
    status    = tmx_tag_recv_nb(cf->worker, v, CF_DIR_BUF * sizeof(*v), tag, mask, &rp, &req);
    if (status == TMX_INPROGRESS) {
        cf_track(cf, req);
    } else {
        req = NULL;
    }
    *req_p = req;
    return status;
}

/* Sends the 8-byte values vals[0..n) with tag to rank 0. */
static int cf_send_vals(cf_t *cf, const uint64_t *vals, size_t n, tmx_tag_t tag)
{
    for (size_t i = 0; i < n; i++) {
        uint64_t     *buf = cf_alloc(cf, sizeof(*buf));
        tmx_request_h req;
        tmx_status_t  status;

        *buf   = vals[i];
        status = cf_send(cf, cf->eps[0], buf, sizeof(*buf), tag, 0, &req);
        if (status != TMX_OK && status != TMX_INPROGRESS) {
            return cf_fail(cf, "send to rank 0: %s", cf_status_name(status));
        }
        status = cf_wait(cf, req, NULL);
        if (status != TMX_OK) {
            return cf_fail(cf, "send to rank 0 completed with %s", cf_status_name(status));
        }
    }
    return CF_PASS;
}

/* Rank 0 posts receives directed at ranks 2 and 1, in that order, for one tag; rank 1 sends
 * first, and rank 2 only after rank 1's message matched: the receive of rank 2, the older,
 * must let rank 1's message pass. Then directed and undirected receives interleaved: every
 * receive gets a message of a sender it accepts, each sender's messages in post order. */
static int cf_case_directed(cf_t *cf)
{
    const tmx_tag_t     t1 = cf_tag(cf, 1), t2 = cf_tag(cf, 2);
    uint64_t           *ids = NULL;
    uint64_t            vb[5][CF_DIR_BUF];
    tmx_request_h       r[5];
    tmx_tag_recv_info_t info[5];
    tmx_status_t        status;
    int                 rc;

    if (cf->size < 3) {
        return cf_skip(cf, "needs 3 ranks");
    }
    ids = calloc((size_t)cf->size, sizeof(*ids));
    if (ids == NULL) {
        abort();
    }
    rc = cf_ids(cf, ids);
    if (rc != CF_PASS) {
        goto out;
    }
    /* Part 1: the older directed receive is passed over. */
    if (cf->rank == 0) {
        status = cf_recv_from(cf, 2, vb[0], t1, CF_FULL_MASK, &r[0]);
        CF_REQUIRE(cf, status == TMX_INPROGRESS, "post from 2: %s", cf_status_name(status));
        status = cf_recv_from(cf, 1, vb[1], t1, CF_FULL_MASK, &r[1]);
        CF_REQUIRE(cf, status == TMX_INPROGRESS, "post from 1: %s", cf_status_name(status));
    }
    CF_REQUIRE(cf, tmx_job_barrier(cf->job) == TMX_OK, "barrier");
    if (cf->rank == 1) {
        rc = cf_send_vals(cf, (const uint64_t[]){0x100}, 1, t1);
    }
    if (cf->rank == 0) {
        double deadline = cf_now() + cf->timeout_s;
        int    done0 = 0, done1 = 0;

        while (!done0 && !done1 && cf_now() < deadline) {
            tmx_worker_progress(cf->worker);
            done0 = tmx_request_test(r[0], NULL) != TMX_INPROGRESS;
            done1 = tmx_request_test(r[1], NULL) != TMX_INPROGRESS;
        }
        CF_REQUIRE(cf, !done0, "the receive directed at rank 2 took rank 1's message (0x%" PRIx64
                   ")", vb[0][0]);
        CF_REQUIRE(cf, done1, "the receive directed at rank 1 never completed");
        memset(&info[1], 0, sizeof(info[1]));
        status = cf_wait(cf, r[1], &info[1]);
        CF_REQUIRE(cf, status == TMX_OK && vb[1][0] == 0x100 && info[1].sender == ids[1] &&
                           info[1].tag == t1 && info[1].length == 8,
                   "receive from 1: %s value 0x%" PRIx64 " sender %016" PRIx64 " (want %016"
                   PRIx64 ")", cf_status_name(status), vb[1][0], info[1].sender, ids[1]);
    }
    CF_REQUIRE(cf, tmx_job_barrier(cf->job) == TMX_OK, "barrier");
    if (rc == CF_PASS && cf->rank == 2) {
        rc = cf_send_vals(cf, (const uint64_t[]){0x200}, 1, t1);
    }
    if (cf->rank == 0) {
        status = cf_wait(cf, r[0], &info[0]);
        CF_REQUIRE(cf, status == TMX_OK && vb[0][0] == 0x200 && info[0].sender == ids[2],
                   "receive from 2: %s value 0x%" PRIx64 " sender %016" PRIx64,
                   cf_status_name(status), vb[0][0], info[0].sender);
    }
    /* Part 2: from 2, anyone, from 1, from 2, anyone; rank 1 sends 2 messages, rank 2 three,
     * in any interleaving. */
    if (cf->rank == 0) {
        static const int from[5] = {2, -1, 1, 2, -1};
        for (int i = 0; i < 5; i++) {
            status = cf_recv_from(cf, from[i], vb[i], t2, CF_FULL_MASK, &r[i]);
            CF_REQUIRE(cf, status == TMX_INPROGRESS, "post %d: %s", i, cf_status_name(status));
        }
    }
    CF_REQUIRE(cf, tmx_job_barrier(cf->job) == TMX_OK, "barrier");
    if (rc == CF_PASS && cf->rank == 1) {
        rc = cf_send_vals(cf, (const uint64_t[]){0x110, 0x111}, 2, t2);
    } else if (rc == CF_PASS && cf->rank == 2) {
        rc = cf_send_vals(cf, (const uint64_t[]){0x210, 0x211, 0x212}, 3, t2);
    }
    if (cf->rank == 0) {
        uint64_t last[3] = {0, 0x10f, 0x20f}; /* each sender's last value seen */
        for (int i = 0; i < 5; i++) {
            int s;
            memset(&info[i], 0, sizeof(info[i]));
            status = cf_wait(cf, r[i], &info[i]);
            s      = (int)(vb[i][0] >> 8);
            CF_REQUIRE(cf, status == TMX_OK && (s == 1 || s == 2) && info[i].sender == ids[s],
                       "receive %d: %s value 0x%" PRIx64 " sender %016" PRIx64,
                       i, cf_status_name(status), vb[i][0], info[i].sender);
            CF_REQUIRE(cf, vb[i][0] == last[s] + 1, "receive %d got 0x%" PRIx64 " after 0x%" PRIx64
                       " (per-sender order in post order)", i, vb[i][0], last[s]);
            last[s] = vb[i][0];
        }
        CF_REQUIRE(cf, vb[0][0] == 0x210 && (vb[2][0] >> 8) == 1 && (vb[3][0] >> 8) == 2,
                   "directed receives took 0x%" PRIx64 ", 0x%" PRIx64 ", 0x%" PRIx64, vb[0][0],
                   vb[2][0], vb[3][0]);
    }
out:
    free(ids);
    return rc;
}

/* Probes naming a sender: peek, claim and discard see only that sender's messages, and report
 * it; a directed receive takes an unexpected message of its sender past older ones. */
static int cf_case_directed_probe(cf_t *cf)
{
    const tmx_tag_t      t3 = cf_tag(cf, 3), t4 = cf_tag(cf, 4);
    uint64_t            *ids = NULL;
    uint64_t             vb[CF_DIR_BUF] = {0};
    tmx_request_params_t rp  = {.field_mask = TMX_REQ_PARAM_SOURCE, .source = NULL};
    tmx_tag_recv_info_t  info;
    tmx_message_h        msg;
    tmx_request_h        req;
    tmx_status_t         status;
    int                  rc;

    if (cf->size < 3) {
        return cf_skip(cf, "needs 3 ranks");
    }
    if (cf->eager_max < sizeof(uint64_t)) {
        /* rank 1's first send completes only once rank 0 receives it, which rank 0 does only
         * after it saw rank 1's second one */
        return cf_skip(cf, "needs 8-byte messages to go eagerly (TMX_EAGER_MAX)");
    }
    ids = calloc((size_t)cf->size, sizeof(*ids));
    if (ids == NULL) {
        abort();
    }
    rc = cf_ids(cf, ids);
    if (rc != CF_PASS) {
        goto out;
    }
    if (cf->rank == 1) {
        rc = cf_send_vals(cf, (const uint64_t[]){0x120}, 1, t3);
        if (rc == CF_PASS) {
            rc = cf_send_vals(cf, (const uint64_t[]){0x121}, 1, t4);
        }
    } else if (cf->rank == 2) {
        rc = cf_send_vals(cf, (const uint64_t[]){0x220}, 1, t3);
    } else if (cf->rank == 0) {
        double deadline = cf_now() + cf->timeout_s;
        int    got1 = 0, got2 = 0;

        /* bad input first: a source with nothing in it, a source for a send or a claim */
        status = tmx_tag_recv_nb(cf->worker, vb, sizeof(vb), t3, CF_FULL_MASK, &rp, &req);
        CF_REQUIRE(cf, status == TMX_ERR_INVALID_PARAM, "receive with a NULL source: %s",
                   cf_status_name(status));
        rp.source = cf->eps[1];
        status    = tmx_tag_send_nb(cf->eps[0], vb, sizeof(vb), t3, &rp, &req);
        CF_REQUIRE(cf, status == TMX_ERR_INVALID_PARAM, "send with a source: %s",
                   cf_status_name(status));
        /* rank 1's second message arrived after its first (per-sender order) */
        while (!(got1 && got2) && cf_now() < deadline) {
            tmx_worker_progress(cf->worker);
            got1 = tmx_tag_probe_ex(cf->worker, t4, CF_FULL_MASK, cf->eps[1], TMX_PROBE_PEEK,
                                    NULL, NULL) == TMX_OK;
            got2 = tmx_tag_probe_ex(cf->worker, t3, CF_FULL_MASK, cf->eps[2], TMX_PROBE_PEEK,
                                    NULL, NULL) == TMX_OK;
        }
        CF_REQUIRE(cf, got1 && got2, "messages never arrived (rank 1: %d, rank 2: %d)", got1,
                   got2);
        memset(&info, 0, sizeof(info));
        status = tmx_tag_probe_ex(cf->worker, t3, CF_FULL_MASK, cf->eps[2], TMX_PROBE_PEEK,
                                  &info, NULL);
        CF_REQUIRE(cf, status == TMX_OK && info.sender == ids[2] && info.tag == t3 &&
                           info.length == 8,
                   "peek from 2: %s sender %016" PRIx64, cf_status_name(status), info.sender);
        status = tmx_tag_probe_ex(cf->worker, cf_tag(cf, 0), CF_CASE_MASK, cf->eps[1],
                                  TMX_PROBE_PEEK, &info, NULL);
        CF_REQUIRE(cf, status == TMX_OK && info.sender == ids[1] && info.tag == t3,
                   "peek any tag from 1: %s sender %016" PRIx64 " tag 0x%" PRIx64,
                   cf_status_name(status), info.sender, info.tag);
        status = tmx_tag_probe_ex(cf->worker, t4, CF_FULL_MASK, cf->eps[2], TMX_PROBE_PEEK,
                                  &info, NULL);
        CF_REQUIRE(cf, status == TMX_ERR_NO_MESSAGE, "peek of t4 from 2: %s",
                   cf_status_name(status));
        status = tmx_tag_probe_ex(cf->worker, t3, CF_FULL_MASK, cf->eps[2], TMX_PROBE_CLAIM,
                                  &info, &msg);
        CF_REQUIRE(cf, status == TMX_OK && info.sender == ids[2], "claim from 2: %s",
                   cf_status_name(status));
        status = tmx_tag_msg_recv_nb(cf->worker, vb, sizeof(vb), msg, &rp, &req);
        CF_REQUIRE(cf, status == TMX_ERR_INVALID_PARAM, "receive of a claimed message with a "
                   "source: %s", cf_status_name(status));
        status = tmx_tag_msg_recv_nb(cf->worker, vb, sizeof(vb), msg, NULL, &req);
        CF_REQUIRE(cf, status == TMX_INPROGRESS, "receive of the claimed message: %s",
                   cf_status_name(status));
        cf_track(cf, req);
        memset(&info, 0, sizeof(info));
        status = cf_wait(cf, req, &info);
        CF_REQUIRE(cf, status == TMX_OK && vb[0] == 0x220 && info.sender == ids[2],
                   "claimed message: %s value 0x%" PRIx64 " sender %016" PRIx64,
                   cf_status_name(status), vb[0], info.sender);
        status = tmx_tag_probe_ex(cf->worker, cf_tag(cf, 0), CF_CASE_MASK, cf->eps[2],
                                  TMX_PROBE_PEEK, &info, NULL);
        CF_REQUIRE(cf, status == TMX_ERR_NO_MESSAGE, "peek from 2 after the claim: %s",
                   cf_status_name(status));
        /* directed receive of an unexpected message: any case tag from 1 is its oldest */
        status = cf_recv_from(cf, 1, vb, cf_tag(cf, 0), CF_CASE_MASK, &req);
        CF_REQUIRE(cf, status == TMX_INPROGRESS, "post from 1: %s", cf_status_name(status));
        status = cf_wait(cf, req, &info);
        CF_REQUIRE(cf, status == TMX_OK && vb[0] == 0x120 && info.sender == ids[1],
                   "receive from 1: %s value 0x%" PRIx64, cf_status_name(status), vb[0]);
        status = tmx_tag_probe_ex(cf->worker, t4, CF_FULL_MASK, cf->eps[1], TMX_PROBE_DISCARD,
                                  &info, NULL);
        CF_REQUIRE(cf, status == TMX_OK && info.sender == ids[1], "discard from 1: %s",
                   cf_status_name(status));
        status = tmx_tag_probe(cf->worker, cf_tag(cf, 0), CF_CASE_MASK, TMX_PROBE_PEEK, &info,
                               NULL);
        CF_REQUIRE(cf, status == TMX_ERR_NO_MESSAGE, "left over: %s", cf_status_name(status));
    }
out:
    free(ids);
    return rc;
}

const cf_case_t cf_cases[] = {
    {"exact", "exact tag send/recv, posted in another order than sent", cf_case_exact},
    {"masked", "partial masks (bytes, nibbles, high bits)", cf_case_masked},
    {"wildcard", "mask 0 receives", cf_case_wildcard},
    {"post_order", "receives match in post order, wildcards included", cf_case_post_order},
    {"send_order", "non-overtaking, eager and rendezvous mixed in one stream",
     cf_case_send_order},
    {"unexpected", "messages arrive before the receives are posted", cf_case_unexpected},
    {"expected", "receives posted before the messages arrive", cf_case_expected},
    {"probe_peek", "probe peek: the message stays", cf_case_probe_peek},
    {"probe_claim", "probe claim + tmx_tag_msg_recv_nb", cf_case_probe_claim},
    {"probe_discard", "probe discard: sender completes, message gone", cf_case_probe_discard},
    {"probe_none", "probe of nothing: TMX_ERR_NO_MESSAGE", cf_case_probe_none},
    {"cancel_posted", "cancel of a posted receive: TMX_ERR_CANCELED", cf_case_cancel_posted},
    {"cancel_matched", "cancel after match: TMX_ERR_BUSY", cf_case_cancel_matched},
    {"truncate", "message longer than the buffer: TMX_ERR_TRUNCATED", cf_case_truncate},
    {"zero_byte", "zero-byte messages, NULL buffers", cf_case_zero_byte},
    {"sizes", "every size class across the eager/rendezvous threshold", cf_case_sizes},
    {"many_to_one", "all ranks send to rank 0: directed and wildcard receives",
     cf_case_many_to_one},
    {"sync_send", "synchronous send completes only after the match", cf_case_sync_send},
    {"sync_unexpected", "sync message received exactly while an earlier one stays queued",
     cf_case_sync_unexpected},
    {"callbacks", "completion callbacks: once, status, info, user_data", cf_case_callbacks},
    {"self_send", "messages to one's own worker", cf_case_self_send},
    {"directed", "receives naming their source (3+ ranks): order, mixed with wildcards",
     cf_case_directed},
    {"directed_probe", "probes naming their source (3+ ranks): peek, claim, discard",
     cf_case_directed_probe},
    {"random", "random schedules checked against the reference model (-s, -n)",
     cf_case_random},
};
const size_t cf_ncases = sizeof(cf_cases) / sizeof(cf_cases[0]);
