/*
 * Immediate data (TMX_REQ_PARAM_IMM, API 1.3): rank 0 sends, rank 1 checks that every receive
 * reports the sender's 32 bits (info.has_imm, info.imm) and only those, with the data intact
 * and in order: eager and rendezvous, receive posted first and message unexpected, standard
 * and synchronous sends, zero bytes, a truncated receive, probe (peek and claim), and sends
 * without immediate data in between (has_imm 0). Run with and without TMX_SOFT_TM=yes.
 *
 * Prints "rank 1: N checks ok" and exits 0 when everything held.
 */
#include <tmx/tmx.h>
#include <tmx/tmx_job.h>

#define IT_COUNT_CHECKS
#include "it.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int          rank, checks, bad;
static tmx_worker_h worker;

#define BIG (1u << 20) /* above any eager limit: rendezvous */
#define PREFILL 0x5a   /* what a receive buffer holds past the message: stays */

static void fill(unsigned char *b, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++) {
        b[i] = (unsigned char)(seed * 31u + i * 7u);
    }
}

static int same(const unsigned char *b, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++) {
        if (b[i] != (unsigned char)(seed * 31u + i * 7u)) {
            return 0;
        }
    }
    return 1;
}

/* rank 0: starts one send, seed = tag, with imm when has_imm; NULL when it completed */
static tmx_request_h send_start(tmx_ep_h ep, unsigned char *buf, size_t len, tmx_tag_t tag,
                                int has_imm, uint32_t imm, int sync)
{
    tmx_request_params_t p;
    tmx_request_h        req = NULL;
    tmx_status_t         s;

    memset(&p, 0, sizeof(p));
    if (has_imm) {
        p.field_mask |= TMX_REQ_PARAM_IMM;
        p.imm = imm;
    }
    if (sync) {
        p.field_mask |= TMX_REQ_PARAM_FLAGS;
        p.flags = TMX_SEND_FLAG_SYNC;
    }
    fill(buf, len, (unsigned)tag);
    CHECK(s = tmx_tag_send_nb(ep, buf, len, tag, &p, &req));
    return s == TMX_INPROGRESS ? req : NULL;
}

static void send_end(tmx_request_h req)
{
    if (req != NULL) {
        CHECK(tmx_request_wait(req, NULL));
        tmx_request_free(req);
    }
}


static void check_info(const char *what, tmx_status_t s, const tmx_tag_recv_info_t *info,
                       const unsigned char *buf, size_t blen, tmx_tag_t tag, size_t len,
                       int has_imm, uint32_t imm)
{
    size_t n = len < blen ? len : blen;

    EXPECT(s == (len > blen ? TMX_ERR_TRUNCATED : TMX_OK), "%s: status %s", what,
           tmx_status_string(s));
    EXPECT(info->tag == tag, "%s: tag %llu, expected %llu", what, (unsigned long long)info->tag,
           (unsigned long long)tag);
    EXPECT(info->length == len, "%s: length %zu, expected %zu", what, info->length, len);
    EXPECT(info->has_imm == has_imm, "%s: has_imm %d, expected %d", what, info->has_imm,
           has_imm);
    EXPECT(info->imm == (has_imm ? imm : 0), "%s: imm %#x, expected %#x", what, info->imm,
           has_imm ? imm : 0);
    EXPECT(same(buf, n, (unsigned)tag), "%s: data differs", what);
    for (size_t i = n; i < blen; i++) {
        if (buf[i] != PREFILL) {
            EXPECT(0, "%s: byte %zu past the message changed (%#x)", what, i, buf[i]);
            break;
        }
    }
}

static void recv_wait(const char *what, tmx_request_h req, const unsigned char *buf,
                      size_t blen, tmx_tag_t tag, size_t len, int has_imm, uint32_t imm)
{
    tmx_tag_recv_info_t info;
    tmx_status_t        s;

    memset(&info, 0xa5, sizeof(info));
    s = tmx_request_wait(req, &info);
    check_info(what, s, &info, buf, blen, tag, len, has_imm, imm);
    tmx_request_free(req);
}

/* The cases, in one list both ranks walk: len, imm or not, sync, receive posted first,
 * receive buffer size. */
typedef struct {
    const char *what;
    size_t      len;
    int         has_imm;
    int         sync;
    int         posted;
    size_t      blen;
} imm_case_t;

static const imm_case_t cases[] = {
    {"eager posted",             100, 1, 0, 1, 4096},
    {"eager unexpected",         100, 1, 0, 0, 4096},
    {"eager without imm",        100, 0, 0, 1, 4096},
    {"zero bytes posted",          0, 1, 0, 1, 4096},
    {"zero bytes unexpected",      0, 1, 0, 0, 4096},
    {"eager sync posted",       2000, 1, 1, 1, 4096},
    {"eager sync unexpected",   2000, 1, 1, 0, 4096},
    {"small buffer posted",       40, 1, 0, 1, 64},
    {"8 bytes, small buffer",        8, 1, 0, 1, 64},
    {"8 bytes, sync, small buffer",  8, 1, 1, 1, 64},
    {"8 bytes without imm",          8, 0, 0, 1, 64},
    {"truncated posted",         100, 1, 0, 1, 64},
    {"truncated unexpected",     100, 1, 0, 0, 64},
    {"rndv posted",              BIG, 1, 0, 1, BIG},
    {"rndv unexpected",          BIG, 1, 0, 0, BIG},
    {"rndv sync posted",         BIG, 1, 1, 1, BIG},
    {"rndv without imm",         BIG, 0, 0, 1, BIG},
    {"rndv truncated posted",    BIG, 1, 0, 1, 4096},
};
#define NCASES (sizeof(cases) / sizeof(cases[0]))

static uint32_t imm_of(unsigned i)
{
    return 0xfedcba00u ^ (i * 0x01010101u); /* the top bit set: a full 32 bits */
}

int main(void)
{
    tmx_job_h      job;
    tmx_context_h  ctx;
    tmx_ep_h      *eps;
    unsigned char *buf;
    int            size;

    CHECK(tmx_job_init(&job));
    rank = tmx_job_rank(job);
    size = tmx_job_size(job);
    if (size != 2) {
        fprintf(stderr, "imm: needs 2 ranks\n");
        return 2;
    }
    CHECK(tmx_context_create(NULL, &ctx));
    CHECK(tmx_worker_create(ctx, NULL, &worker));
    eps = calloc(2, sizeof(*eps));
    buf = malloc(BIG);
    if (eps == NULL || buf == NULL) {
        return 1;
    }
    CHECK(tmx_job_connect(job, worker, eps));

    for (unsigned i = 0; i < NCASES; i++) {
        const imm_case_t *c   = &cases[i];
        tmx_tag_t         tag = 100 + i;
        tmx_request_h     req = NULL;

        if (getenv("IMM_TRACE") != NULL) {
            fprintf(stderr, "rank %d: case %u %s\n", rank, i, c->what);
        }

        if (rank == 0) {
            CHECK(tmx_job_barrier(job)); /* rank 1 posted its receive (or not) */
            req = send_start(eps[1], buf, c->len, tag, c->has_imm, imm_of(i), c->sync);
            if (!c->posted) {
                CHECK(tmx_job_barrier(job)); /* the barrier progresses: it arrives unexpected */
            }
            send_end(req);
        } else if (rank == 1) {
            memset(buf, PREFILL, c->blen);
            if (c->posted) {
                CHECK(tmx_tag_recv_nb(worker, buf, c->blen, tag, ~(tmx_tag_t)0, NULL, &req));
            }
            CHECK(tmx_job_barrier(job));
            if (!c->posted) {
                CHECK(tmx_job_barrier(job));
                CHECK(tmx_tag_recv_nb(worker, buf, c->blen, tag, ~(tmx_tag_t)0, NULL, &req));
            }
            recv_wait(c->what, req, buf, c->blen, tag, c->len, c->has_imm, imm_of(i));
        }
    }

    /* Probe: peek and claim report the immediate data; a message without reports none. Then
     * order: messages with and without it, one tag, a wildcard receive each. */
    if (rank == 0) {
        /* one buffer per send: they are all in flight at once */
        tmx_request_h  reqs[15];
        unsigned char *bufs = malloc(15 * (size_t)BIG);
        if (bufs == NULL) {
            return 1;
        }
        reqs[0] = send_start(eps[1], bufs, 10, 500, 1, 0x80000001u, 0);
        reqs[1] = send_start(eps[1], bufs + BIG, BIG, 501, 1, 0x7fffffffu, 0);
        reqs[2] = send_start(eps[1], bufs + 2 * (size_t)BIG, 10, 502, 0, 0, 0);
        for (unsigned i = 0; i < 12; i++) {
            reqs[3 + i] = send_start(eps[1], bufs + (3 + i) * (size_t)BIG,
                                     i % 3 == 2 ? BIG : 8 * i, 600, i % 2, i, 0);
        }
        CHECK(tmx_job_barrier(job));
        for (unsigned i = 0; i < 15; i++) {
            send_end(reqs[i]);
        }
        free(bufs);
    } else if (rank == 1) {
        static const struct { tmx_tag_t tag; size_t len; int has; uint32_t imm; } pr[] = {
            {500, 10, 1, 0x80000001u}, {501, BIG, 1, 0x7fffffffu}, {502, 10, 0, 0}};
        CHECK(tmx_job_barrier(job));
        for (unsigned i = 0; i < 3; i++) {
            tmx_tag_recv_info_t info;
            tmx_message_h       msg;
            tmx_request_h       req;
            tmx_status_t        s;

            do {
                tmx_worker_progress(worker);
                s = tmx_tag_probe(worker, pr[i].tag, ~(tmx_tag_t)0, TMX_PROBE_PEEK, &info, NULL);
            } while (s == TMX_ERR_NO_MESSAGE);
            CHECK(s);
            EXPECT(info.has_imm == pr[i].has && info.imm == pr[i].imm,
                   "peek %u: has_imm %d imm %#x", i, info.has_imm, info.imm);
            memset(&info, 0, sizeof(info));
            CHECK(tmx_tag_probe(worker, pr[i].tag, ~(tmx_tag_t)0, TMX_PROBE_CLAIM, &info, &msg));
            EXPECT(info.has_imm == pr[i].has && info.imm == pr[i].imm,
                   "claim %u: has_imm %d imm %#x", i, info.has_imm, info.imm);
            memset(buf, PREFILL, BIG);
            CHECK(tmx_tag_msg_recv_nb(worker, buf, BIG, msg, NULL, &req));
            recv_wait("probe then receive", req, buf, BIG, pr[i].tag, pr[i].len, pr[i].has,
                      pr[i].imm);
        }
        for (unsigned i = 0; i < 12; i++) {
            tmx_request_h req;
            size_t        len = i % 3 == 2 ? BIG : 8 * i;
            memset(buf, PREFILL, BIG);
            CHECK(tmx_tag_recv_nb(worker, buf, BIG, 0, 0, NULL, &req));
            recv_wait("in order", req, buf, BIG, 600, len, (int)(i % 2), i);
        }
    }

    /* a receive takes no immediate data */
    if (rank == 1) {
        tmx_request_params_t p = {.field_mask = TMX_REQ_PARAM_IMM, .imm = 1};
        tmx_request_h        req;
        EXPECT(tmx_tag_recv_nb(worker, buf, 1, 0, 0, &p, &req) == TMX_ERR_INVALID_PARAM,
               "a receive with TMX_REQ_PARAM_IMM was not refused");
    }
    CHECK(tmx_job_barrier(job));
    if (rank == 1) {
        tmx_worker_attr_t attr = {.field_mask = TMX_WORKER_ATTR_TM};
        CHECK(tmx_worker_query(worker, &attr));
        if (attr.tm.enabled) {
            /* the device matched receives and left immediate data to software */
            printf("rank 1: tag list matched %llu, unexpected %llu\n",
                   (unsigned long long)attr.tm.matched, (unsigned long long)attr.tm.unexpected);
        }
        printf("rank 1: %d checks, %d failed\n", checks, bad);
        if (bad == 0) {
            printf("rank 1: %d checks ok\n", checks);
        }
    }
    for (int r = 0; r < size; r++) {
        if (eps[r] != NULL) {
            CHECK(tmx_ep_close(eps[r], TMX_EP_CLOSE_FLUSH));
        }
    }
    CHECK(tmx_worker_destroy(worker));
    CHECK(tmx_context_destroy(ctx));
    tmx_job_finalize(job);
    free(buf);
    free(eps);
    return bad == 0 ? 0 : 1;
}
