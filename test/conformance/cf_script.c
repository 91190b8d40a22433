/*
 * Scripts: one rank sends a list of messages, its peer posts a list of receives, and every
 * receive is checked against the reference model of MPI matching with one sender:
 * for each receive in post order, the earliest unmatched message in send order that matches.
 * With a single sender this result does not depend on when messages arrive, so the same
 * expectation holds for receives posted first, messages arriving first, or any interleaving.
 */
#define _GNU_SOURCE
#include "cf.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CF_GUARD      16
#define CF_GUARD_BYTE 0xa5
/* The marker of CF_ORDER_UNEXP: every other low tag of a case stays below it. */
#define CF_MARKER_LOW 0x00ffffffffffffffull

uint64_t cf_rand(uint64_t *state)
{
    /* splitmix64: tiny, and the same sequence on every rank for the same seed. */
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);

    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

size_t cf_script_model(const cf_script_t *s, long *match)
{
    char  *taken;
    size_t unmatched = 0;

    taken = calloc(s->nmsgs + 1, 1);
    if (taken == NULL) {
        abort();
    }
    for (size_t j = 0; j < s->nrcvs; j++) {
        const cf_rcv_t *r = &s->rcvs[j];

        match[j] = -1;
        for (size_t e = 0; e < s->nmsgs; e++) {
            if (!taken[e] && ((s->msgs[e].tag & r->mask) == (r->tag & r->mask))) {
                taken[e] = 1;
                match[j] = (long)e;
                break;
            }
        }
        unmatched += (match[j] < 0);
    }
    free(taken);
    return unmatched;
}

static uint64_t cf_msg_seed(const cf_script_t *s, size_t index, int sender)
{
    return s->salt * 0x100000001b3ull + s->msgs[index].tag * 31 + index * 977 +
           (uint64_t)sender * 0x10001;
}

static void cf_describe(char *out, size_t outlen, const cf_script_t *s, size_t j)
{
    snprintf(out, outlen, "recv #%zu (tag 0x%" PRIx64 " mask 0x%" PRIx64 " buf %zu)", j,
             s->rcvs[j].tag, s->rcvs[j].mask, s->rcvs[j].buflen);
}

/* Checks receive j of `in` after it completed with status/info. */
static int cf_check_recv(cf_t *cf, const cf_script_t *in, const long *match, size_t j,
                         const unsigned char *buf, tmx_status_t status,
                         const tmx_tag_recv_info_t *info, const char *label)
{
    const cf_msg_t *m     = &in->msgs[match[j]];
    size_t          bl    = in->rcvs[j].buflen;
    tmx_status_t    want  = (m->len > bl) ? TMX_ERR_TRUNCATED : TMX_OK;
    size_t          ncopy = (m->len > bl) ? bl : m->len;
    char            what[160];
    long            bad;

    cf_describe(what, sizeof(what), in, j);
    if (status != want) {
        return cf_fail(cf, "%s: %s from rank %d: expected %s (message #%ld, %zu bytes), got %s",
                       label, what, in->peer, cf_status_name(want), match[j], m->len,
                       cf_status_name(status));
    }
    if (info->tag != m->tag || info->length != m->len) {
        /* Find which message it got, to say "overtaking" rather than "garbage". */
        long got = -1;
        for (size_t e = 0; e < in->nmsgs && got < 0; e++) {
            if (in->msgs[e].tag == info->tag && in->msgs[e].len == info->length) {
                got = (long)e;
            }
        }
        return cf_fail(cf, "%s: %s from rank %d: expected message #%ld (tag 0x%" PRIx64
                           " len %zu), got tag 0x%" PRIx64 " len %zu (looks like message #%ld)",
                       label, what, in->peer, match[j], m->tag, m->len, info->tag, info->length,
                       got);
    }
    bad = cf_verify(buf, ncopy, cf_msg_seed(in, (size_t)match[j], in->peer));
    if (bad >= 0) {
        /* Same tag and length but data of another message: matched out of order. */
        long other = -1;
        for (size_t e = 0; e < in->nmsgs && other < 0; e++) {
            if ((long)e != match[j] && in->msgs[e].len >= ncopy &&
                cf_verify(buf, ncopy, cf_msg_seed(in, e, in->peer)) < 0) {
                other = (long)e;
            }
        }
        return cf_fail(cf, "%s: %s from rank %d: data of message #%ld (%zu bytes) wrong at "
                           "byte %ld%s%ld",
                       label, what, in->peer, match[j], m->len, bad,
                       other >= 0 ? ", it is the data of message #" : "", other);
    }
    for (size_t g = 0; buf != NULL && g < CF_GUARD; g++) {
        if (buf[bl + g] != CF_GUARD_BYTE) {
            return cf_fail(cf, "%s: %s: wrote past the buffer end (guard byte %zu changed; "
                               "message %zu bytes)",
                           label, what, g, m->len);
        }
    }
    return CF_PASS;
}

static int cf_script_send(cf_t *cf, const cf_script_t *out, size_t i, tmx_request_h *req_p,
                          const char *label)
{
    const cf_msg_t *m   = &out->msgs[i];
    void           *buf = cf_alloc(cf, m->len);
    tmx_status_t    status;

    cf_fill(buf, m->len, cf_msg_seed(out, i, cf->rank));
    status = cf_send(cf, cf->eps[out->peer], buf, m->len, m->tag, m->flags, req_p);
    if (status != TMX_OK && status != TMX_INPROGRESS) {
        return cf_fail(cf, "%s: send #%zu (tag 0x%" PRIx64 " len %zu) to rank %d: %s", label, i,
                       m->tag, m->len, out->peer, cf_status_name(status));
    }
    return CF_PASS;
}

static int cf_script_post(cf_t *cf, const cf_script_t *in, size_t j, void *buf,
                          tmx_request_h *req_p, const char *label)
{
    const cf_rcv_t *r = &in->rcvs[j];
    tmx_status_t    status;

    status = cf_recv(cf, buf, r->buflen, r->tag, r->mask, req_p);
    if (status != TMX_INPROGRESS) {
        return cf_fail(cf, "%s: post of recv #%zu (tag 0x%" PRIx64 " mask 0x%" PRIx64 "): %s",
                       label, j, r->tag, r->mask, cf_status_name(status));
    }
    return CF_PASS;
}

static int cf_script_run_one(cf_t *cf, const cf_script_t *out, const cf_script_t *in,
                             const char *label, uint64_t mix_seed);

/* Copies a script with every tag moved into the tag bits of this run (48..55), so that the
 * next script's messages, which the peer may send while this one finishes here, are told
 * apart by the "nothing left" check. Masks are unchanged. */
static void cf_script_shift(const cf_script_t *s, tmx_tag_t bits, cf_script_t *c, cf_msg_t *m,
                            cf_rcv_t *r)
{
    *c = *s;
    for (size_t i = 0; i < s->nmsgs; i++) {
        m[i] = s->msgs[i];
        m[i].tag ^= bits;
    }
    for (size_t j = 0; j < s->nrcvs; j++) {
        r[j] = s->rcvs[j];
        r[j].tag ^= bits;
    }
    c->msgs = m;
    c->rcvs = r;
    if (c->space_mask != 0) {
        c->space_mask |= (tmx_tag_t)0xff << 48;
    }
}

int cf_script_run(cf_t *cf, const cf_script_t *out, const cf_script_t *in, const char *label,
                  uint64_t mix_seed)
{
    tmx_tag_t   bits = (tmx_tag_t)(cf->script_seq++ & 0xff) << 48;
    cf_script_t o, i;
    cf_msg_t   *om = calloc(out->nmsgs + 1, sizeof(*om));
    cf_rcv_t   *orc = calloc(out->nrcvs + 1, sizeof(*orc));
    cf_msg_t   *im = calloc(in->nmsgs + 1, sizeof(*im));
    cf_rcv_t   *irc = calloc(in->nrcvs + 1, sizeof(*irc));
    int         rc;

    if (om == NULL || orc == NULL || im == NULL || irc == NULL) {
        abort();
    }
    cf_script_shift(out, bits, &o, om, orc);
    cf_script_shift(in, bits, &i, im, irc);
    rc = cf_script_run_one(cf, &o, &i, label, mix_seed);
    free(om);
    free(orc);
    free(im);
    free(irc);
    return rc;
}

static int cf_script_run_one(cf_t *cf, const cf_script_t *out, const cf_script_t *in,
                             const char *label, uint64_t mix_seed)
{
    long               *match = calloc(in->nrcvs + 1, sizeof(*match));
    char               *matched = calloc(in->nmsgs + 1, 1);
    tmx_request_h      *sreq  = calloc(out->nmsgs + 1, sizeof(*sreq));
    tmx_request_h      *rreq  = calloc(in->nrcvs + 1, sizeof(*rreq));
    unsigned char     **rbuf  = calloc(in->nrcvs + 1, sizeof(*rbuf));
    tmx_ep_h            to    = cf->eps[out->peer];
    tmx_tag_t           marker = cf_tag(cf, CF_MARKER_LOW);
    tmx_request_h       mreq = NULL;
    tmx_tag_recv_info_t info;
    tmx_status_t        status;
    size_t              ns = 0, nr = 0;
    uint64_t            mix = mix_seed;
    int                 rc  = CF_PASS;

    if (match == NULL || matched == NULL || sreq == NULL || rreq == NULL || rbuf == NULL) {
        abort();
    }
    CF_REQUIRE(cf, cf_script_model(in, match) == 0, "%s: bad script: a receive matches nothing",
               label);
    for (size_t j = 0; j < in->nrcvs; j++) {
        matched[match[j]] = 1;
        if (in->rcvs[j].buflen > 0) {
            rbuf[j] = cf_alloc(cf, in->rcvs[j].buflen + CF_GUARD);
            memset(rbuf[j], CF_GUARD_BYTE, in->rcvs[j].buflen + CF_GUARD);
        }
    }
    if (out->order == CF_ORDER_UNEXP) {
        /* Nothing is posted until all of the peer's messages arrived: its marker follows
         * them, and one sender's messages arrive in order. */
        for (ns = 0; ns < out->nmsgs; ns++) {
            rc = cf_script_send(cf, out, ns, &sreq[ns], label);
            if (rc != CF_PASS) {
                goto out;
            }
        }
        status = cf_send(cf, to, NULL, 0, marker, 0, &mreq);
        CF_REQUIRE(cf, status == TMX_OK || status == TMX_INPROGRESS, "%s: marker send: %s",
                   label, cf_status_name(status));
        status = cf_probe_wait(cf, marker, CF_FULL_MASK, TMX_PROBE_DISCARD, &info, NULL);
        CF_REQUIRE(cf, status == TMX_OK, "%s: waiting for rank %d's messages: %s", label,
                   in->peer, cf_status_name(status));
    }
    if (out->order == CF_ORDER_POSTED) {
        for (nr = 0; nr < in->nrcvs; nr++) {
            rc = cf_script_post(cf, in, nr, rbuf[nr], &rreq[nr], label);
            if (rc != CF_PASS) {
                goto out;
            }
        }
        /* Every rank has posted its receives before anyone sends. */
        CF_REQUIRE(cf, tmx_job_barrier(cf->job) == TMX_OK, "%s: barrier failed", label);
    }
    while (ns < out->nmsgs || nr < in->nrcvs) {
        int do_send = (nr == in->nrcvs) ||
                      (out->order == CF_ORDER_MIXED && ns < out->nmsgs && (cf_rand(&mix) & 1));

        if (do_send) {
            rc = cf_script_send(cf, out, ns, &sreq[ns], label);
            ns++;
        } else {
            rc = cf_script_post(cf, in, nr, rbuf[nr], &rreq[nr], label);
            nr++;
        }
        if (rc != CF_PASS) {
            goto out;
        }
        for (uint64_t k = (out->order == CF_ORDER_MIXED) ? cf_rand(&mix) % 3 : 0; k > 0; k--) {
            tmx_worker_progress(cf->worker);
        }
    }
    for (size_t j = 0; j < in->nrcvs; j++) {
        memset(&info, 0, sizeof(info));
        status = cf_wait(cf, rreq[j], &info);
        rc     = cf_check_recv(cf, in, match, j, rbuf[j], status, &info, label);
        if (rc != CF_PASS) {
            goto out;
        }
    }
    /* Leftovers, in send order: an exact receive or an exact probe takes the earliest. */
    for (size_t e = 0; e < in->nmsgs; e++) {
        const cf_msg_t *m = &in->msgs[e];

        if (matched[e]) {
            continue;
        }
        memset(&info, 0, sizeof(info));
        if (in->drain_by_recv) {
            unsigned char *buf = cf_alloc(cf, m->len);
            status             = cf_recv_wait(cf, buf, m->len, m->tag, CF_FULL_MASK, &info);
            CF_REQUIRE(cf, status == TMX_OK && info.tag == m->tag && info.length == m->len &&
                               cf_verify(buf, m->len, cf_msg_seed(in, e, in->peer)) < 0,
                       "%s: leftover message #%zu (tag 0x%" PRIx64 " len %zu) by exact recv: "
                       "%s, tag 0x%" PRIx64 " len %zu%s",
                       label, e, m->tag, m->len, cf_status_name(status), info.tag, info.length,
                       status == TMX_OK ? " (or wrong data)" : "");
        } else {
            status = cf_probe_wait(cf, m->tag, CF_FULL_MASK, TMX_PROBE_DISCARD, &info, NULL);
            CF_REQUIRE(cf, status == TMX_OK && info.tag == m->tag && info.length == m->len,
                       "%s: leftover message #%zu (tag 0x%" PRIx64 " len %zu) by probe discard: "
                       "%s, tag 0x%" PRIx64 " len %zu",
                       label, e, m->tag, m->len, cf_status_name(status), info.tag, info.length);
        }
    }
    /* Every message was received or drained: nothing of the script may stay queued (a
     * message delivered and still listed as unexpected would poison later receives). */
    if (in->space_mask != 0 && in->nmsgs > 0) {
        for (int k = 0; k < 4; k++) {
            tmx_worker_progress(cf->worker);
        }
        memset(&info, 0, sizeof(info));
        status = tmx_tag_probe(cf->worker, in->msgs[0].tag, in->space_mask, TMX_PROBE_PEEK,
                               &info, NULL);
        CF_REQUIRE(cf, status == TMX_ERR_NO_MESSAGE,
                   "%s: after every message was received or drained, a message is still "
                   "queued: tag 0x%" PRIx64 " len %zu (%s)",
                   label, info.tag, info.length, cf_status_name(status));
    }
    for (size_t i = 0; i < out->nmsgs; i++) {
        status = cf_wait(cf, sreq[i], NULL);
        CF_REQUIRE(cf, status == TMX_OK,
                   "%s: send #%zu (tag 0x%" PRIx64 " len %zu%s) to rank %d completed with %s",
                   label, i, out->msgs[i].tag, out->msgs[i].len,
                   (out->msgs[i].flags & TMX_SEND_FLAG_SYNC) ? " sync" : "", out->peer,
                   cf_status_name(status));
    }
    status = cf_wait(cf, mreq, NULL);
    CF_REQUIRE(cf, status == TMX_OK, "%s: marker send completed with %s", label,
               cf_status_name(status));
out:
    free(match);
    free(matched);
    free(sreq);
    free(rreq);
    free(rbuf);
    return rc;
}
