/*
 * Unit tests of the soft device's tag-matching SRQ (prov.h, "tag matching"), through the
 * provider contract only. Most run in one process: a device with one TM SRQ, a sender's "tx"
 * QP (a plain RC QP attached to the TM SRQ, where FINs arrive) connected to a TM QP "rx"
 * (attached to the same TM SRQ, max_send_wr 0), both of the same device (loopback), as one
 * side of the real two-device shape; the rendezvous tests run it between two processes too.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <endian.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "prov/prov.h"
#include "util/config.h"
#include "util/time.h"

extern const tmx_prov_t tmx_soft_prov;

#define MEM        (8u << 20)
#define STAGE      0u           /* send staging: 1 MiB */
#define PLAIN      (1u << 20)   /* plain SRQ buffers */
#define PLAIN_SZ   (8u << 10)
#define NPLAIN     64
#define BUFS       (2u << 20)   /* entry buffers, rendezvous sources: 6 MiB */
#define PLAIN_ID   1000u
#define STASH      1024

typedef struct tmt {
    tmx_config_t          cfg;
    const tmx_prov_ops_t *ops;
    tmx_dev_t            *dev;
    tmx_pd_t             *pd;
    tmx_cq_t             *cq;
    tmx_srq_t            *srq;
    tmx_qp_t             *tx, *rx;   /* tx -> rx, rx a TM QP */
    tmx_qp_t             *tx2, *rx2; /* tx2 -> rx2, rx2 on the TM SRQ but not a TM QP */
    uint8_t              *mem;
    tmx_mr_t             *mr;
    tmx_wc_t              stash[STASH];
    int                   nstash;
    uint64_t              send_id;
} tm_t;

static void cfg_tm(tmx_config_t *cfg)
{
    cr_assert_eq(tmx_config_load(cfg), TMX_OK);
    cfg->soft_memfd      = -1;
    cfg->soft_cma        = -1;
    cfg->soft_ring_size  = 65536;
    cfg->soft_ring0_size = 65536;
    cfg->soft_inbox_size = 65536;
    cfg->soft_max_qps    = 8;
    cfg->soft_max_mrs    = 64;
    cfg->soft_tm         = 1;
    cfg->soft_tm_tags    = 64;
    cfg->soft_tm_ops     = 64;
    cfg->soft_tm_rndv    = 1;
}

static void qp_rts_blob(tm_t *t, tmx_qp_t *qp, const uint8_t *blob, size_t len)
{
    tmx_qp_attr_t mod;

    memset(&mod, 0, sizeof(mod));
    mod.state           = TMX_QPS_RTR;
    mod.remote_addr     = blob;
    mod.remote_addr_len = len;
    cr_assert_eq(t->ops->qp_modify(qp, &mod, TMX_QP_ATTR_STATE | TMX_QP_ATTR_REMOTE), TMX_OK);
    mod.state = TMX_QPS_RTS;
    cr_assert_eq(t->ops->qp_modify(qp, &mod, TMX_QP_ATTR_STATE), TMX_OK);
}

static void qp_rts(tm_t *t, tmx_qp_t *qp, tmx_qp_t *peer)
{
    uint8_t blob[TMX_QP_ADDR_MAX];
    size_t  len = sizeof(blob);

    cr_assert_eq(t->ops->qp_get_addr(peer, blob, &len), TMX_OK);
    qp_rts_blob(t, qp, blob, len);
}

static tmx_qp_t *qp_new(tm_t *t, uint32_t max_send_wr)
{
    tmx_qp_init_attr_t qa;
    tmx_qp_attr_t      mod;
    tmx_qp_t          *qp = NULL;

    memset(&qa, 0, sizeof(qa));
    qa.type        = TMX_QPT_RC;
    qa.send_cq     = t->cq;
    qa.recv_cq     = t->cq;
    qa.srq         = t->srq;
    qa.max_send_wr = max_send_wr;
    cr_assert_eq(t->ops->qp_create(t->pd, &qa, &qp), TMX_OK);
    memset(&mod, 0, sizeof(mod));
    mod.state = TMX_QPS_INIT;
    cr_assert_eq(t->ops->qp_modify(qp, &mod, TMX_QP_ATTR_STATE), TMX_OK);
    return qp;
}

static void plain_post(tm_t *t, unsigned i)
{
    tmx_sge_t      sge = {.addr   = (uintptr_t)(t->mem + PLAIN + i * PLAIN_SZ),
                          .length = PLAIN_SZ,
                          .lkey   = t->mr->lkey};
    tmx_recv_wr_t  wr  = {.wr_id = PLAIN_ID + i, .sg_list = &sge, .num_sge = 1};
    tmx_recv_wr_t *bad;

    cr_assert_eq(t->ops->srq_post_recv(t->srq, &wr, &bad), TMX_OK);
}

static uint8_t *plain_buf(tm_t *t, uint64_t wr_id)
{
    cr_assert(wr_id >= PLAIN_ID && wr_id < PLAIN_ID + NPLAIN, "not a plain buffer: %lu",
              (unsigned long)wr_id);
    return t->mem + PLAIN + (wr_id - PLAIN_ID) * PLAIN_SZ;
}

/* A device with a TM SRQ of max_tags entries and max_ops ops, and its memory. */
static void tm_dev(tm_t *t, const tmx_config_t *cfg, uint32_t max_tags, uint32_t max_ops)
{
    tmx_dev_t          *devs[1];
    int                 num = 0;
    tmx_srq_init_attr_t sa;

    memset(t, 0, sizeof(*t));
    t->cfg = *cfg;
    t->ops = tmx_soft_prov.ops;
    cr_assert_eq(t->ops->dev_open(&tmx_soft_prov, &t->cfg, devs, 1, &num), TMX_OK);
    cr_assert_eq(num, 1);
    t->dev = devs[0];
    cr_assert_eq(t->ops->pd_alloc(t->dev, &t->pd), TMX_OK);
    cr_assert_eq(t->ops->cq_create(t->dev, 4096, &t->cq), TMX_OK);
    memset(&sa, 0, sizeof(sa));
    sa.type         = TMX_SRQT_TM;
    sa.max_wr       = 256;
    sa.max_sge      = 1;
    sa.cq           = t->cq;
    sa.max_num_tags = max_tags;
    sa.max_ops      = max_ops;
    cr_assert_eq(t->ops->srq_create(t->pd, &sa, &t->srq), TMX_OK);
    t->mem = mmap(NULL, MEM, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    cr_assert(t->mem != MAP_FAILED);
    cr_assert_eq(t->ops->mr_reg(t->pd, t->mem, MEM,
                                TMX_ACCESS_LOCAL_WRITE | TMX_ACCESS_REMOTE_READ, &t->mr),
                 TMX_OK);
    t->send_id = 1;
}

/* tm_dev with the loopback QPs, nplain plain buffers posted. */
static void tm_open(tm_t *t, const tmx_config_t *cfg, uint32_t max_tags, uint32_t max_ops,
                    unsigned nplain)
{
    tm_dev(t, cfg, max_tags, max_ops);
    t->tx  = qp_new(t, 64);
    t->rx  = qp_new(t, 0);
    t->tx2 = qp_new(t, 64);
    t->rx2 = qp_new(t, 64);
    qp_rts(t, t->tx, t->rx);
    qp_rts(t, t->rx, t->tx);
    qp_rts(t, t->tx2, t->rx2);
    qp_rts(t, t->rx2, t->tx2);
    for (unsigned i = 0; i < nplain; i++) {
        plain_post(t, i);
    }
    t->send_id = 1;
}

static void tm_close(tm_t *t)
{
    tmx_qp_t *qps[4] = {t->tx, t->rx, t->tx2, t->rx2};

    for (int i = 0; i < 4; i++) {
        if (qps[i] != NULL) {
            t->ops->qp_destroy(qps[i]);
        }
    }
    t->ops->srq_destroy(t->srq);
    t->ops->mr_dereg(t->mr);
    t->ops->cq_destroy(t->cq);
    t->ops->pd_free(t->pd);
    t->ops->dev_close(t->dev);
    munmap(t->mem, MEM);
}

/* Polls once; completions other than successful SENDs go to the stash. */
static int tm_poll(tm_t *t)
{
    tmx_wc_t wc[1];
    int      got = t->ops->cq_poll(t->cq, 1, wc); /* one at a time: tests count them */

    cr_assert(got >= 0);
    for (int i = 0; i < got; i++) {
        if (wc[i].opcode == TMX_WC_SEND && wc[i].status == TMX_WC_SUCCESS) {
            continue;
        }
        cr_assert(t->nstash < STASH);
        t->stash[t->nstash++] = wc[i];
    }
    return got;
}

/* The next completion that is not a successful SEND, within a few seconds. */
static tmx_wc_t tm_next(tm_t *t)
{
    double   end = tmx_time_sec() + 5;
    tmx_wc_t wc;

    while (t->nstash == 0) {
        tm_poll(t);
        cr_assert(tmx_time_sec() < end, "no completion came");
    }
    wc = t->stash[0];
    memmove(t->stash, t->stash + 1, (size_t)(t->nstash - 1) * sizeof(wc));
    t->nstash--;
    return wc;
}

/* Nothing comes in a few hundred polls. */
static void tm_none(tm_t *t)
{
    for (int i = 0; i < 300; i++) {
        tm_poll(t);
    }
    cr_assert_eq(t->nstash, 0, "unexpected completion: opcode %d status %d wr_id %lu",
                 t->stash[0].opcode, t->stash[0].status, (unsigned long)t->stash[0].wr_id);
}

static void tmh_put(uint8_t *p, uint8_t op, uint64_t tag, uint32_t ctx)
{
    tmx_tmh_t tmh;

    memset(&tmh, 0, sizeof(tmh));
    tmh.opcode  = op;
    tmh.app_ctx = htobe32(ctx);
    tmh.tag     = htobe64(tag);
    memcpy(p, &tmh, sizeof(tmh));
}

/* Progress without taking completions from the CQ (cq_poll of none): what arrives is
 * handled, and its completions wait in the CQ, not polled. */
static void tm_progress(tm_t *t)
{
    for (int i = 0; i < 20; i++) {
        cr_assert_eq(t->ops->cq_poll(t->cq, 0, NULL), 0);
    }
}

/* Sends len bytes (at most a ring record) in the staging area on qp, inline, and handles its
 * arrival without polling the CQ. */
static void tm_send_nopoll(tm_t *t, tmx_qp_t *qp, uint32_t len)
{
    tmx_sge_t      sge = {.addr = (uintptr_t)(t->mem + STAGE), .length = len,
                          .lkey = t->mr->lkey};
    tmx_send_wr_t  wr;
    tmx_send_wr_t *bad;

    memset(&wr, 0, sizeof(wr));
    wr.wr_id      = t->send_id++;
    wr.sg_list    = &sge;
    wr.num_sge    = 1;
    wr.opcode     = TMX_WR_SEND;
    wr.send_flags = TMX_SEND_INLINE;
    cr_assert_eq(t->ops->post_send(qp, &wr, &bad), TMX_OK);
    tm_progress(t);
}

/* Sends len bytes already in the staging area on qp (signaled), and waits until it left. */
static void tm_send_raw(tm_t *t, tmx_qp_t *qp, uint32_t len)
{
    tmx_sge_t      sge = {.addr = (uintptr_t)(t->mem + STAGE), .length = len,
                          .lkey = t->mr->lkey};
    tmx_send_wr_t  wr;
    tmx_send_wr_t *bad;
    double         end = tmx_time_sec() + 5;
    int            st;

    memset(&wr, 0, sizeof(wr));
    wr.wr_id      = t->send_id++;
    wr.sg_list    = &sge;
    wr.num_sge    = 1;
    wr.opcode     = TMX_WR_SEND;
    wr.send_flags = TMX_SEND_SIGNALED;
    while ((st = t->ops->post_send(qp, &wr, &bad)) == TMX_ERR_NO_RESOURCE) {
        tm_poll(t);
        cr_assert(tmx_time_sec() < end);
    }
    cr_assert_eq(st, TMX_OK);
    /* the SEND completes once all of it is in the ring: the staging area is free again */
    for (;;) {
        tmx_wc_t wc[1];
        int      got = t->ops->cq_poll(t->cq, 1, wc), done = 0;

        cr_assert(got >= 0);
        for (int i = 0; i < got; i++) {
            if (wc[i].opcode == TMX_WC_SEND && wc[i].wr_id == wr.wr_id) {
                cr_assert_eq(wc[i].status, TMX_WC_SUCCESS);
                done = 1;
            } else {
                cr_assert(t->nstash < STASH);
                t->stash[t->nstash++] = wc[i];
            }
        }
        if (done) {
            break;
        }
        cr_assert(tmx_time_sec() < end, "send did not leave");
    }
}

static uint8_t pat(size_t i, unsigned seed)
{
    return (uint8_t)(i * 13 + seed);
}

static void fill(uint8_t *p, size_t len, unsigned seed)
{
    for (size_t i = 0; i < len; i++) {
        p[i] = pat(i, seed);
    }
}

static int same(const uint8_t *p, size_t len, unsigned seed)
{
    for (size_t i = 0; i < len; i++) {
        if (p[i] != pat(i, seed)) {
            return 0;
        }
    }
    return 1;
}

/* An EAGER (or NO_TAG, FIN...) message: TMH + len bytes of pattern seed. */
static void tm_send(tm_t *t, tmx_qp_t *qp, uint8_t op, uint64_t tag, uint32_t ctx, uint32_t len,
                    unsigned seed)
{
    tmh_put(t->mem + STAGE, op, tag, ctx);
    fill(t->mem + STAGE + sizeof(tmx_tmh_t), len, seed);
    tm_send_raw(t, qp, (uint32_t)sizeof(tmx_tmh_t) + len);
}

/* A RNDV message: TMH + RVH (va, rkey, len) + 16 bytes of user header. */
static void tm_send_rndv(tm_t *t, tmx_qp_t *qp, uint64_t tag, uint32_t ctx, uint64_t va,
                         uint32_t rkey, uint32_t len)
{
    tmx_rvh_t rvh = {.va = htobe64(va), .rkey = htobe32(rkey), .len = htobe32(len)};

    tmh_put(t->mem + STAGE, TMX_TMH_RNDV, tag, ctx);
    memcpy(t->mem + STAGE + sizeof(tmx_tmh_t), &rvh, sizeof(rvh));
    memset(t->mem + STAGE + sizeof(tmx_tmh_t) + sizeof(rvh), 0xab, 16);
    tm_send_raw(t, qp, (uint32_t)(sizeof(tmx_tmh_t) + sizeof(rvh) + 16));
}

static tmx_status_t op_post(tm_t *t, tmx_srq_op_t *op, tmx_srq_op_t **bad)
{
    tmx_srq_op_t *dummy;

    return t->ops->srq_post_ops(t->srq, op, bad != NULL ? bad : &dummy);
}

/* ADD of a buffer at BUFS + off; returns the status, the handle in *h. */
static tmx_status_t tm_add(tm_t *t, uint64_t tag, uint64_t mask, size_t off, uint32_t len,
                           uint64_t recv_id, unsigned flags, uint32_t cnt, uint32_t *h)
{
    tmx_sge_t    sge = {.addr = (uintptr_t)(t->mem + BUFS + off), .length = len,
                        .lkey = t->mr->lkey};
    tmx_srq_op_t op;
    tmx_status_t st;

    memset(&op, 0, sizeof(op));
    op.wr_id          = 500 + recv_id;
    op.op             = TMX_SRQ_OP_TM_ADD;
    op.flags          = flags;
    op.unexpected_cnt = cnt;
    op.tag            = tag;
    op.mask           = mask;
    op.sg_list        = &sge;
    op.num_sge        = 1;
    op.recv_wr_id     = recv_id;
    st                = op_post(t, &op, NULL);
    if (h != NULL) {
        *h = op.handle;
    }
    return st;
}

static tmx_status_t tm_del(tm_t *t, uint32_t h, uint64_t wr_id, unsigned flags)
{
    tmx_srq_op_t op;

    memset(&op, 0, sizeof(op));
    op.wr_id  = wr_id;
    op.op     = TMX_SRQ_OP_TM_DEL;
    op.flags  = flags;
    op.handle = h;
    return op_post(t, &op, NULL);
}

static tmx_status_t tm_sync(tm_t *t, uint32_t cnt, uint64_t wr_id, unsigned flags)
{
    tmx_srq_op_t op;

    memset(&op, 0, sizeof(op));
    op.wr_id          = wr_id;
    op.op             = TMX_SRQ_OP_TM_SYNC;
    op.flags          = flags | TMX_OPS_TM_SYNC;
    op.unexpected_cnt = cnt;
    return op_post(t, &op, NULL);
}

/* The next completion is an unexpected message (counted) of tag in plain buffer; reposted. */
static tmx_wc_t expect_unexp(tm_t *t, uint64_t tag, uint32_t len)
{
    tmx_wc_t  wc = tm_next(t);
    tmx_tmh_t tmh;

    cr_assert_eq(wc.opcode, TMX_WC_TM_RECV);
    cr_assert_eq(wc.status, TMX_WC_SUCCESS);
    cr_assert_eq(wc.wc_flags & (TMX_WC_TM_MATCH | TMX_WC_TM_DATA_VALID), 0u,
                 "matched, flags 0x%x", wc.wc_flags);
    cr_assert_eq(wc.byte_len, sizeof(tmh) + len);
    memcpy(&tmh, plain_buf(t, wc.wr_id), sizeof(tmh));
    cr_assert_eq(be64toh(tmh.tag), tag);
    plain_post(t, (unsigned)(wc.wr_id - PLAIN_ID));
    return wc;
}

/* The next completion is the whole of a matched eager message of len bytes for recv_id. */
static tmx_wc_t expect_match(tm_t *t, uint64_t recv_id, uint64_t tag, uint32_t len)
{
    tmx_wc_t wc = tm_next(t);

    cr_assert_eq(wc.opcode, TMX_WC_TM_RECV);
    cr_assert_eq(wc.status, TMX_WC_SUCCESS, "status %d", wc.status);
    cr_assert_eq(wc.wr_id, recv_id, "wr_id %lu, not %lu", (unsigned long)wc.wr_id,
                 (unsigned long)recv_id);
    cr_assert_eq(wc.wc_flags, TMX_WC_TM_MATCH | TMX_WC_TM_DATA_VALID);
    cr_assert_eq(wc.byte_len, len);
    cr_assert_eq(wc.tm_info.tag, tag);
    return wc;
}

/* ---------------------------------------------------------------- caps, creation */

Test(soft_tm, caps_and_creation, .timeout = 20)
{
    tmx_config_t        cfg;
    tmx_dev_t          *devs[1];
    int                 num;
    const tmx_prov_ops_t *ops = tmx_soft_prov.ops;
    tmx_pd_t           *pd;
    tmx_cq_t           *cq;
    tmx_srq_t          *srq;
    tmx_srq_init_attr_t sa;
    tm_t               *t = calloc(1, sizeof(*t));

    /* off: no caps, no TM SRQ */
    cfg_tm(&cfg);
    cfg.soft_tm = 0;
    cr_assert_eq(ops->dev_open(&tmx_soft_prov, &cfg, devs, 1, &num), TMX_OK);
    cr_assert_eq(devs[0]->attr.caps & (TMX_DEV_CAP_TM | TMX_DEV_CAP_TM_RNDV), 0u);
    cr_assert_eq(ops->pd_alloc(devs[0], &pd), TMX_OK);
    cr_assert_eq(ops->cq_create(devs[0], 64, &cq), TMX_OK);
    memset(&sa, 0, sizeof(sa));
    sa = (tmx_srq_init_attr_t){.type = TMX_SRQT_TM, .max_wr = 16, .max_sge = 1, .cq = cq,
                               .max_num_tags = 4, .max_ops = 4};
    cr_assert_eq(ops->srq_create(pd, &sa, &srq), TMX_ERR_UNSUPPORTED);
    sa.type = TMX_SRQT_BASIC;
    cr_assert_eq(ops->srq_create(pd, &sa, &srq), TMX_OK);
    cr_assert_eq(ops->srq_post_ops(srq, NULL, NULL), TMX_ERR_UNSUPPORTED);
    ops->srq_destroy(srq);
    ops->cq_destroy(cq);
    ops->pd_free(pd);
    ops->dev_close(devs[0]);

    /* on, rendezvous offload off */
    cfg_tm(&cfg);
    cfg.soft_tm_rndv = 0;
    cfg.soft_tm_tags = 5;
    cfg.soft_tm_ops  = 7;
    cr_assert_eq(ops->dev_open(&tmx_soft_prov, &cfg, devs, 1, &num), TMX_OK);
    cr_assert_eq(devs[0]->attr.caps & (TMX_DEV_CAP_TM | TMX_DEV_CAP_TM_RNDV), TMX_DEV_CAP_TM);
    cr_assert_eq(devs[0]->attr.tm.max_num_tags, 5);
    cr_assert_eq(devs[0]->attr.tm.max_ops, 7);
    cr_assert_eq(devs[0]->attr.tm.max_sge, 1);
    cr_assert_eq(devs[0]->attr.tm.max_rndv_hdr_size, 64);
    cr_assert_eq(ops->pd_alloc(devs[0], &pd), TMX_OK);
    cr_assert_eq(ops->cq_create(devs[0], 64, &cq), TMX_OK);
    sa = (tmx_srq_init_attr_t){.type = TMX_SRQT_TM, .max_wr = 16, .max_sge = 1, .cq = NULL,
                               .max_num_tags = 5, .max_ops = 7};
    cr_assert_eq(ops->srq_create(pd, &sa, &srq), TMX_ERR_INVALID_PARAM); /* no CQ */
    sa.cq           = cq;
    sa.max_num_tags = 6;
    cr_assert_eq(ops->srq_create(pd, &sa, &srq), TMX_ERR_INVALID_PARAM);
    sa.max_num_tags = 0;
    cr_assert_eq(ops->srq_create(pd, &sa, &srq), TMX_ERR_INVALID_PARAM);
    sa.max_num_tags = 5;
    sa.max_ops      = 8;
    cr_assert_eq(ops->srq_create(pd, &sa, &srq), TMX_ERR_INVALID_PARAM);
    sa.max_ops = 0;
    cr_assert_eq(ops->srq_create(pd, &sa, &srq), TMX_ERR_INVALID_PARAM);
    sa.max_ops = 7;
    cr_assert_eq(ops->srq_create(pd, &sa, &srq), TMX_OK);
    cr_assert_eq(srq->type, TMX_SRQT_TM);
    ops->srq_destroy(srq);
    ops->cq_destroy(cq);
    ops->pd_free(pd);
    ops->dev_close(devs[0]);

    /* on, with rendezvous offload: a TM QP's send queue is the device's */
    cfg_tm(&cfg);
    tm_open(t, &cfg, 4, 4, 0);
    cr_assert_eq(t->dev->attr.caps & (TMX_DEV_CAP_TM | TMX_DEV_CAP_TM_RNDV),
                 TMX_DEV_CAP_TM | TMX_DEV_CAP_TM_RNDV);
    {
        tmx_sge_t      sge = {.addr = (uintptr_t)t->mem, .length = 8, .lkey = t->mr->lkey};
        tmx_send_wr_t  wr  = {.wr_id = 1, .sg_list = &sge, .num_sge = 1,
                              .opcode = TMX_WR_SEND, .send_flags = TMX_SEND_SIGNALED};
        tmx_send_wr_t *bad = NULL;

        cr_assert_eq(t->ops->post_send(t->rx, &wr, &bad), TMX_ERR_INVALID_PARAM);
        cr_assert_eq(bad, &wr);
    }
    tm_close(t);
    free(t);
}

Test(soft_tm, inject_spec_checked, .timeout = 10)
{
    static const char *const bad[] = {"add", "add=", "add=0", "add=x", "foo=1", "add=1,",
                                      "add=1,add=2", "add=1;del=2", ",add=1", "add=-1",
                                      "sync=99999999999"};
    static const char *const good[] = {"", "add=1", "del=3,add=7", "add=7,del=3,sync=2"};
    tmx_config_t cfg;
    tmx_dev_t   *devs[1];
    int          num;

    cfg_tm(&cfg);
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        snprintf(cfg.soft_tm_inject, sizeof(cfg.soft_tm_inject), "%s", bad[i]);
        num = -1;
        cr_assert_eq(tmx_soft_prov.ops->dev_open(&tmx_soft_prov, &cfg, devs, 1, &num),
                     TMX_ERR_INVALID_PARAM, "\"%s\" accepted", bad[i]);
    }
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        snprintf(cfg.soft_tm_inject, sizeof(cfg.soft_tm_inject), "%s", good[i]);
        cr_assert_eq(tmx_soft_prov.ops->dev_open(&tmx_soft_prov, &cfg, devs, 1, &num), TMX_OK,
                     "\"%s\" refused", good[i]);
        tmx_soft_prov.ops->dev_close(devs[0]);
    }
}

/* ---------------------------------------------------------------- list operations */

Test(soft_tm, add_del_and_bad_ops, .timeout = 20)
{
    tmx_config_t  cfg;
    tm_t         *t = calloc(1, sizeof(*t));
    uint32_t      h1, h2, h3;
    tmx_wc_t      wc;
    tmx_srq_op_t  ops[3], *bad;
    tmx_sge_t     sge[2];

    cfg_tm(&cfg);
    tm_open(t, &cfg, 8, 8, 8);
    /* signaled ADD: a completion with the op's wr_id; handles are non-zero and distinct */
    cr_assert_eq(tm_add(t, 0x10, ~0ull, 0, 64, 1, TMX_OPS_SIGNALED, 0, &h1), TMX_OK);
    cr_assert_neq(h1, 0);
    wc = tm_next(t);
    cr_assert(wc.opcode == TMX_WC_TM_ADD && wc.status == TMX_WC_SUCCESS && wc.wr_id == 501);
    cr_assert_eq(wc.wc_flags & TMX_WC_TM_SYNC_REQ, 0u);
    cr_assert_eq(tm_add(t, 0x20, ~0ull, 64, 64, 2, 0, 0, &h2), TMX_OK);
    cr_assert(h2 != 0 && h2 != h1);
    tm_none(t); /* unsignaled: no completion */
    /* signaled DEL */
    cr_assert_eq(tm_del(t, h1, 77, TMX_OPS_SIGNALED), TMX_OK);
    wc = tm_next(t);
    cr_assert(wc.opcode == TMX_WC_TM_DEL && wc.status == TMX_WC_SUCCESS && wc.wr_id == 77);
    /* the entry is gone: its tag arrives unexpected; the other still matches */
    tm_send(t, t->tx, TMX_TMH_EAGER, 0x10, 0, 8, 1);
    expect_unexp(t, 0x10, 8);
    /* entry 2, added in step with the device, stays eligible after an unexpected message */
    tm_send(t, t->tx, TMX_TMH_EAGER, 0x20, 0, 8, 2);
    expect_match(t, 2, 0x20, 8);
    tm_send(t, t->tx, TMX_TMH_EAGER, 0x20, 0, 8, 2);
    expect_unexp(t, 0x20, 8);
    /* DEL of a handle that names nothing: gone, never given, zero */
    cr_assert_eq(tm_del(t, h1, 78, 0), TMX_ERR_INVALID_PARAM);
    cr_assert_eq(tm_del(t, 0, 78, 0), TMX_ERR_INVALID_PARAM);
    cr_assert_eq(tm_del(t, 123456, 78, 0), TMX_ERR_INVALID_PARAM);
    /* ADD with tag bits outside the mask, or too many sges */
    cr_assert_eq(tm_add(t, 0x1ff, 0xff, 0, 64, 3, 0, 0, &h3), TMX_ERR_INVALID_PARAM);
    memset(ops, 0, sizeof(ops));
    sge[0] = sge[1] = (tmx_sge_t){.addr = (uintptr_t)(t->mem + BUFS), .length = 8,
                                  .lkey = t->mr->lkey};
    ops[0].op      = TMX_SRQ_OP_TM_ADD;
    ops[0].tag     = 5;
    ops[0].mask    = 0xff;
    ops[0].sg_list = sge;
    ops[0].num_sge = 1;
    ops[0].next    = &ops[1];
    ops[1]         = ops[0];
    ops[1].num_sge = 2;
    ops[1].next    = NULL;
    bad            = NULL;
    cr_assert_eq(op_post(t, ops, &bad), TMX_ERR_INVALID_PARAM);
    cr_assert_eq(bad, &ops[1]); /* the first was posted */
    cr_assert_neq(ops[0].handle, 0);
    cr_assert_eq(tm_del(t, ops[0].handle, 0, 0), TMX_OK);
    /* an op that is none */
    memset(ops, 0, sizeof(ops));
    ops[0].op = (tmx_srq_op_type_t)9;
    cr_assert_eq(op_post(t, ops, NULL), TMX_ERR_INVALID_PARAM);
    tm_none(t);
    tm_close(t);
    free(t);
}

Test(soft_tm, list_full, .timeout = 20)
{
    tmx_config_t cfg;
    tm_t        *t = calloc(1, sizeof(*t));
    uint32_t     h[3];
    tmx_srq_op_t ops[2], *bad = NULL;
    tmx_sge_t    sge = {0};

    cfg_tm(&cfg);
    cfg.soft_tm_tags = 2;
    tm_open(t, &cfg, 2, 8, 8);
    cr_assert_eq(tm_add(t, 1, ~0ull, 0, 64, 1, 0, 0, &h[0]), TMX_OK);
    cr_assert_eq(tm_add(t, 2, ~0ull, 64, 64, 2, 0, 0, &h[1]), TMX_OK);
    h[2] = 0;
    cr_assert_eq(tm_add(t, 3, ~0ull, 128, 64, 3, TMX_OPS_SIGNALED, 0, &h[2]),
                 TMX_ERR_NO_RESOURCE);
    cr_assert_eq(h[2], 0);
    tm_none(t); /* nothing of it posted: no completion */
    /* in a chain: the ops before it were posted */
    memset(ops, 0, sizeof(ops));
    ops[0].op      = TMX_SRQ_OP_TM_DEL;
    ops[0].handle  = h[0];
    ops[0].next    = &ops[1];
    ops[1].op      = TMX_SRQ_OP_TM_ADD;
    ops[1].tag     = 3;
    ops[1].mask    = ~0ull;
    ops[1].sg_list = &sge;
    ops[1].num_sge = 0;
    ops[1].next    = NULL;
    cr_assert_eq(op_post(t, ops, &bad), TMX_OK);
    cr_assert_neq(ops[1].handle, 0);
    cr_assert_eq(tm_add(t, 4, ~0ull, 0, 64, 4, 0, 0, NULL), TMX_ERR_NO_RESOURCE);
    /* a message consumes an entry: room again */
    tm_send(t, t->tx, TMX_TMH_EAGER, 2, 0, 8, 1);
    expect_match(t, 2, 2, 8);
    cr_assert_eq(tm_add(t, 4, ~0ull, 0, 64, 4, 0, 0, NULL), TMX_OK);
    cr_assert_eq(tm_add(t, 5, ~0ull, 0, 64, 5, 0, 0, NULL), TMX_ERR_NO_RESOURCE);
    tm_close(t);
    free(t);
}

Test(soft_tm, max_ops_busy, .timeout = 20)
{
    tmx_config_t cfg;
    tm_t        *t = calloc(1, sizeof(*t));
    uint32_t     h;
    tmx_wc_t     wc;

    cfg_tm(&cfg);
    cfg.soft_tm_ops = 2;
    tm_open(t, &cfg, 16, 2, 8);
    cr_assert_eq(tm_add(t, 1, ~0ull, 0, 64, 1, TMX_OPS_SIGNALED, 0, &h), TMX_OK);
    cr_assert_eq(tm_sync(t, 0, 9, TMX_OPS_SIGNALED), TMX_OK);
    /* two outstanding: a third signaled op is refused, nothing of it done */
    cr_assert_eq(tm_add(t, 2, ~0ull, 64, 64, 2, TMX_OPS_SIGNALED, 0, NULL), TMX_ERR_BUSY);
    cr_assert_eq(tm_del(t, h, 10, TMX_OPS_SIGNALED), TMX_ERR_BUSY);
    cr_assert_eq(tm_sync(t, 0, 11, TMX_OPS_SIGNALED), TMX_ERR_BUSY);
    /* an unsignaled op that succeeds retires at once: not refused */
    cr_assert_eq(tm_add(t, 3, ~0ull, 128, 64, 3, 0, 0, NULL), TMX_OK);
    /* the entry the refused DEL named is still there */
    tmh_put(t->mem + STAGE, TMX_TMH_EAGER, 1, 0);
    tm_send_nopoll(t, t->tx, 24);
    /* polling one op completion makes room for one */
    wc = tm_next(t);
    cr_assert(wc.opcode == TMX_WC_TM_ADD && wc.wr_id == 501);
    cr_assert_eq(tm_add(t, 2, ~0ull, 64, 64, 2, TMX_OPS_SIGNALED, 0, NULL), TMX_OK);
    cr_assert_eq(tm_sync(t, 0, 12, TMX_OPS_SIGNALED), TMX_ERR_BUSY);
    wc = tm_next(t);
    cr_assert(wc.opcode == TMX_WC_TM_SYNC && wc.wr_id == 9);
    expect_match(t, 1, 1, 8);
    wc = tm_next(t);
    cr_assert(wc.opcode == TMX_WC_TM_ADD && wc.wr_id == 502);
    /* a DEL of a consumed entry always completes: it counts too */
    cr_assert_eq(tm_sync(t, 0, 13, TMX_OPS_SIGNALED), TMX_OK);
    cr_assert_eq(tm_add(t, 7, ~0ull, 256, 64, 7, 0, 0, &h), TMX_OK);
    tmh_put(t->mem + STAGE, TMX_TMH_EAGER, 7, 0);
    tm_send_nopoll(t, t->tx, 24); /* consumed; its completion waits in the CQ */
    cr_assert_eq(tm_del(t, h, 14, 0), TMX_OK); /* unsignaled, but it will fail: counted */
    cr_assert_eq(tm_sync(t, 0, 15, TMX_OPS_SIGNALED), TMX_ERR_BUSY);
    tm_close(t);
    free(t);
}

/* A DEL that a message beat: it fails (TM_ERR) after the receive completion, signaled or not;
 * the handle is no longer valid once every completion was polled. */
Test(soft_tm, del_after_consumed_fails_after_the_receive, .timeout = 20)
{
    tmx_config_t cfg;
    tm_t        *t = calloc(1, sizeof(*t));
    uint32_t     h;
    tmx_wc_t     wc;

    cfg_tm(&cfg);
    tm_open(t, &cfg, 16, 16, 8);
    /* the receive completion not yet polled */
    cr_assert_eq(tm_add(t, 0x42, ~0ull, 0, 64, 1, 0, 0, &h), TMX_OK);
    tmh_put(t->mem + STAGE, TMX_TMH_EAGER, 0x42, 0);
    fill(t->mem + STAGE + 16, 16, 3);
    tm_send_nopoll(t, t->tx, 32);
    cr_assert_eq(tm_del(t, h, 88, 0), TMX_OK);
    cr_assert_eq(tm_del(t, h, 89, 0), TMX_ERR_INVALID_PARAM); /* one DEL per entry */
    wc = expect_match(t, 1, 0x42, 16);
    cr_assert(same(t->mem + BUFS, 16, 3));
    wc = tm_next(t);
    cr_assert(wc.opcode == TMX_WC_TM_DEL && wc.status == TMX_WC_TM_ERR && wc.wr_id == 88);
    tm_none(t);
    cr_assert_eq(tm_del(t, h, 90, 0), TMX_ERR_INVALID_PARAM);

    /* a receive that is still arriving (a large message in many records): the DEL fails after
     * its last completion */
    cr_assert_eq(tm_add(t, 0x43, ~0ull, 0, 300000, 2, 0, 0, &h), TMX_OK);
    tmh_put(t->mem + STAGE, TMX_TMH_EAGER, 0x43, 5);
    fill(t->mem + STAGE + 16, 300000, 4);
    {
        tmx_sge_t      sge = {.addr = (uintptr_t)(t->mem + STAGE), .length = 300016,
                              .lkey = t->mr->lkey};
        tmx_send_wr_t  wr  = {.wr_id = 5000, .sg_list = &sge, .num_sge = 1,
                              .opcode = TMX_WR_SEND, .send_flags = TMX_SEND_SIGNALED};
        tmx_send_wr_t *bad;
        double         end = tmx_time_sec() + 5;

        cr_assert_eq(t->ops->post_send(t->tx, &wr, &bad), TMX_OK);
        /* until the MATCH completion shows the entry consumed, data still to come */
        while (t->nstash == 0) {
            tm_poll(t);
            cr_assert(tmx_time_sec() < end);
        }
        cr_assert_eq(t->stash[0].wc_flags, TMX_WC_TM_MATCH);
        cr_assert_eq(tm_del(t, h, 91, TMX_OPS_SIGNALED), TMX_OK);
    }
    wc = tm_next(t);
    cr_assert(wc.wr_id == 2 && wc.wc_flags == TMX_WC_TM_MATCH && wc.byte_len == 0);
    cr_assert_eq(wc.tm_info.tag, 0x43);
    cr_assert_eq(wc.tm_info.priv, 5);
    wc = tm_next(t);
    cr_assert(wc.wr_id == 2 && wc.wc_flags == TMX_WC_TM_DATA_VALID && wc.byte_len == 300000);
    cr_assert_eq(wc.status, TMX_WC_SUCCESS);
    cr_assert(same(t->mem + BUFS, 300000, 4));
    wc = tm_next(t);
    cr_assert(wc.opcode == TMX_WC_TM_DEL && wc.status == TMX_WC_TM_ERR && wc.wr_id == 91);
    tm_close(t);
    free(t);
}

/* A handle comes back only once every completion of its entry was polled. */
Test(soft_tm, handle_reused_only_after_polling, .timeout = 20)
{
    tmx_config_t cfg;
    tm_t        *t = calloc(1, sizeof(*t));
    uint32_t     h1, h;
    int          reused = 0;

    cfg_tm(&cfg);
    tm_open(t, &cfg, 2, 16, 8);
    cr_assert_eq(tm_add(t, 0x7, ~0ull, 0, 64, 1, 0, 0, &h1), TMX_OK);
    tmh_put(t->mem + STAGE, TMX_TMH_EAGER, 0x7, 0);
    tm_send_nopoll(t, t->tx, 24); /* consumed, its completion not polled */
    for (int i = 0; i < 20; i++) {
        cr_assert_eq(tm_add(t, 100 + (uint64_t)i, ~0ull, 64, 64, 2, 0, 0, &h), TMX_OK);
        cr_assert_neq(h, h1, "handle %u given again before its completion was polled", h1);
        cr_assert_eq(tm_del(t, h, 0, 0), TMX_OK);
    }
    expect_match(t, 1, 0x7, 8);
    for (int i = 0; i < 20; i++) {
        cr_assert_eq(tm_add(t, 100 + (uint64_t)i, ~0ull, 64, 64, 2, 0, 0, &h), TMX_OK);
        reused += h == h1;
        cr_assert_eq(tm_del(t, h, 0, 0), TMX_OK);
    }
    cr_assert(reused > 0, "handle %u never came back", h1);
    tm_close(t);
    free(t);
}

/* ---------------------------------------------------------------- receiving */

/* Matched eager: straight into the entry's buffer (no plain buffer used), list order, masks;
 * one completion up to the MTU (4 KiB), two above it; LOC_LEN_ERR fills the buffer. */
Test(soft_tm, matched_eager, .timeout = 30)
{
    static const uint32_t lens[] = {0, 1, 100, 4096, 4097, 65536, 300000};
    tmx_config_t cfg;
    tm_t        *t = calloc(1, sizeof(*t));
    tmx_wc_t     wc;

    cfg_tm(&cfg);
    tm_open(t, &cfg, 16, 16, 1);
    memset(t->mem + PLAIN, 0x5a, PLAIN_SZ);
    /* list order: the first eligible entry that matches takes it; the mask applies */
    cr_assert_eq(tm_add(t, 0x1200, 0xff00, 0, 64, 1, 0, 0, NULL), TMX_OK);
    cr_assert_eq(tm_add(t, 0x12ab, ~0ull, 64, 64, 2, 0, 0, NULL), TMX_OK);
    tm_send(t, t->tx, TMX_TMH_EAGER, 0x12ab, 0xc0ffee, 20, 1);
    wc = expect_match(t, 1, 0x12ab, 20);
    cr_assert_eq(wc.tm_info.priv, 0xc0ffee);
    cr_assert_eq(wc.qp_num, t->rx->qp_num);
    cr_assert(same(t->mem + BUFS, 20, 1));
    tm_send(t, t->tx, TMX_TMH_EAGER, 0x12ab, 0, 20, 2);
    expect_match(t, 2, 0x12ab, 20);
    cr_assert(same(t->mem + BUFS + 64, 20, 2));
    for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
        memset(t->mem + BUFS, 0, lens[i] + 16);
        cr_assert_eq(tm_add(t, 0x99, ~0ull, 0, lens[i], 10 + i, 0, 0, NULL), TMX_OK);
        tm_send(t, t->tx, TMX_TMH_EAGER, 0x99, 7, lens[i], (unsigned)i);
        wc = tm_next(t);
        cr_assert_eq(wc.wr_id, 10 + i);
        cr_assert_eq(wc.status, TMX_WC_SUCCESS);
        cr_assert_eq(wc.opcode, TMX_WC_TM_RECV);
        if (lens[i] > 4096) {
            cr_assert_eq(wc.wc_flags, TMX_WC_TM_MATCH, "len %u: flags 0x%x", lens[i],
                         wc.wc_flags);
            cr_assert_eq(wc.byte_len, 0);
            cr_assert(wc.tm_info.tag == 0x99 && wc.tm_info.priv == 7);
            wc = tm_next(t);
            cr_assert_eq(wc.wr_id, 10 + i);
            cr_assert_eq(wc.status, TMX_WC_SUCCESS);
            cr_assert_eq(wc.wc_flags, TMX_WC_TM_DATA_VALID);
        } else {
            cr_assert_eq(wc.wc_flags, TMX_WC_TM_MATCH | TMX_WC_TM_DATA_VALID);
            cr_assert(wc.tm_info.tag == 0x99 && wc.tm_info.priv == 7);
        }
        cr_assert_eq(wc.byte_len, lens[i]);
        cr_assert(same(t->mem + BUFS, lens[i], (unsigned)i), "len %u: data", lens[i]);
        cr_assert_eq(t->mem[BUFS + lens[i]], 0); /* nothing past the payload */
    }
    /* too long for the buffer: filled, LOC_LEN_ERR, byte_len the payload's */
    memset(t->mem + BUFS, 0, 256);
    cr_assert_eq(tm_add(t, 0x77, ~0ull, 0, 64, 30, 0, 0, NULL), TMX_OK);
    tm_send(t, t->tx, TMX_TMH_EAGER, 0x77, 0, 100, 9);
    wc = tm_next(t);
    cr_assert(wc.wr_id == 30 && wc.status == TMX_WC_LOC_LEN_ERR && wc.byte_len == 100);
    cr_assert_eq(wc.wc_flags, TMX_WC_TM_MATCH | TMX_WC_TM_DATA_VALID);
    cr_assert(same(t->mem + BUFS, 64, 9));
    cr_assert_eq(t->mem[BUFS + 64], 0);
    /* no bounce copy: the plain buffer was never touched */
    for (unsigned i = 0; i < PLAIN_SZ; i++) {
        cr_assert_eq(t->mem[PLAIN + i], 0x5a);
    }
    tm_close(t);
    free(t);
}

/* NO_TAG, FIN, a message too short for a TMH and an unknown opcode land in plain buffers as
 * TMX_WC_TM_NO_TAG, whole; they are not counted (an ADD in step with 0 stays eligible). */
Test(soft_tm, no_tag_fin_short, .timeout = 20)
{
    tmx_config_t cfg;
    tm_t        *t = calloc(1, sizeof(*t));
    tmx_wc_t     wc;
    tmx_tmh_t    tmh;

    cfg_tm(&cfg);
    tm_open(t, &cfg, 16, 16, 8);
    cr_assert_eq(tm_add(t, 0x5, ~0ull, 0, 64, 1, 0, 0, NULL), TMX_OK);
    tm_send(t, t->tx, TMX_TMH_NO_TAG, 0x5, 3, 40, 1); /* NO_TAG: never matched */
    wc = tm_next(t);
    cr_assert(wc.opcode == TMX_WC_TM_NO_TAG && wc.status == TMX_WC_SUCCESS);
    cr_assert(wc.byte_len == 56 && wc.wc_flags == 0);
    memcpy(&tmh, plain_buf(t, wc.wr_id), sizeof(tmh));
    cr_assert(tmh.opcode == TMX_TMH_NO_TAG && be32toh(tmh.app_ctx) == 3);
    cr_assert(same(plain_buf(t, wc.wr_id) + 16, 40, 1));
    tm_send(t, t->tx, TMX_TMH_FIN, 0x5, 4, 0, 1);
    wc = tm_next(t);
    cr_assert(wc.opcode == TMX_WC_TM_NO_TAG && wc.byte_len == 16 && wc.wc_flags == 0);
    memset(t->mem + STAGE, 0xee, 8);
    tm_send_raw(t, t->tx, 8);
    wc = tm_next(t);
    cr_assert(wc.opcode == TMX_WC_TM_NO_TAG && wc.byte_len == 8 && wc.status == 0);
    cr_assert_eq(plain_buf(t, wc.wr_id)[7], 0xee);
    tm_send_raw(t, t->tx, 0);
    wc = tm_next(t);
    cr_assert(wc.opcode == TMX_WC_TM_NO_TAG && wc.byte_len == 0);
    tm_send(t, t->tx, 77, 0x5, 4, 0, 1);
    wc = tm_next(t);
    cr_assert(wc.opcode == TMX_WC_TM_NO_TAG && wc.byte_len == 16);
    /* none counted: an ADD reporting 0 is eligible, the entry added first still is */
    cr_assert_eq(tm_add(t, 0x6, ~0ull, 64, 64, 2, TMX_OPS_TM_SYNC, 0, NULL), TMX_OK);
    tm_send(t, t->tx, TMX_TMH_EAGER, 0x6, 0, 8, 1);
    expect_match(t, 2, 0x6, 8);
    tm_send(t, t->tx, TMX_TMH_EAGER, 0x5, 0, 8, 1);
    expect_match(t, 1, 0x5, 8);
    tm_close(t);
    free(t);
}

/* The phase-sync case of DESIGN.md: m1 and m2 both match b1 and b2; b1 is added between their
 * arrivals, before software saw m1: m2 must not take b1 (software gives m1 to b1). */
Test(soft_tm, phase_sync, .timeout = 20)
{
    tmx_config_t cfg;
    tm_t        *t = calloc(1, sizeof(*t));
    tmx_wc_t     wc;
    uint32_t     b1;

    cfg_tm(&cfg);
    tm_open(t, &cfg, 16, 16, 8);
    tmh_put(t->mem + STAGE, TMX_TMH_EAGER, 0x33, 1);
    tm_send_nopoll(t, t->tx, 16); /* m1: unexpected, software has not seen it */
    cr_assert_eq(tm_add(t, 0x33, ~0ull, 0, 64, 1, TMX_OPS_TM_SYNC, 0, &b1), TMX_OK); /* b1 */
    tmh_put(t->mem + STAGE, TMX_TMH_EAGER, 0x33, 2);
    tm_send_nopoll(t, t->tx, 16); /* m2 */
    wc = expect_unexp(t, 0x33, 0);
    cr_assert_eq(wc.wc_flags, 0u);
    wc = expect_unexp(t, 0x33, 0); /* m2 did not take b1 */
    /* software matches m1 to b1 itself (DEL), reporting it handled 1 of the 2: b2 added now
     * is not eligible either */
    cr_assert_eq(tm_del(t, b1, 0, 0), TMX_OK);
    cr_assert_eq(tm_add(t, 0x33, ~0ull, 64, 64, 2, TMX_OPS_TM_SYNC, 1, NULL), TMX_OK); /* b2 */
    tm_send(t, t->tx, TMX_TMH_EAGER, 0x33, 0, 0, 0); /* m3 */
    expect_unexp(t, 0x33, 0);
    /* software reports all 3 (m2 matched to b2 in software, say, m3 to a later receive): a
     * count equal to the device's makes every entry eligible, the ones added before too */
    cr_assert_eq(tm_add(t, 0x34, ~0ull, 128, 64, 3, 0, 0, NULL), TMX_OK); /* not eligible */
    cr_assert_eq(tm_sync(t, 3, 40, TMX_OPS_SIGNALED), TMX_OK);
    wc = tm_next(t);
    cr_assert(wc.opcode == TMX_WC_TM_SYNC && wc.wr_id == 40 && wc.wc_flags == 0);
    tm_send(t, t->tx, TMX_TMH_EAGER, 0x34, 0, 8, 0);
    expect_match(t, 3, 0x34, 8);
    tm_send(t, t->tx, TMX_TMH_EAGER, 0x33, 0, 8, 0);
    expect_match(t, 2, 0x33, 8);
    tm_close(t);
    free(t);
}

/* SYNC_REQ: on unexpected receives and list op completions once the device runs more than the
 * sync gap (here 2) ahead of what software reported. */
Test(soft_tm, sync_req_tiny_gap, .timeout = 20)
{
    tmx_config_t cfg;
    tm_t        *t = calloc(1, sizeof(*t));
    tmx_wc_t     wc;

    cfg_tm(&cfg);
    cfg.soft_tm_sync_gap = 2;
    tm_open(t, &cfg, 16, 16, 8);
    for (unsigned i = 1; i <= 4; i++) {
        tm_send(t, t->tx, TMX_TMH_EAGER, 0x1, 0, 0, 0);
        wc = expect_unexp(t, 0x1, 0);
        cr_assert_eq(wc.wc_flags & TMX_WC_TM_SYNC_REQ, i > 2 ? TMX_WC_TM_SYNC_REQ : 0u,
                     "unexpected %u: flags 0x%x", i, wc.wc_flags);
    }
    cr_assert_eq(tm_add(t, 0x2, ~0ull, 0, 64, 1, TMX_OPS_SIGNALED | TMX_OPS_TM_SYNC, 1, NULL),
                 TMX_OK);
    wc = tm_next(t);
    cr_assert(wc.opcode == TMX_WC_TM_ADD && (wc.wc_flags & TMX_WC_TM_SYNC_REQ));
    cr_assert_eq(tm_sync(t, 2, 41, TMX_OPS_SIGNALED), TMX_OK); /* lag 2: not more than 2 */
    wc = tm_next(t);
    cr_assert(wc.opcode == TMX_WC_TM_SYNC && wc.wc_flags == 0);
    tm_send(t, t->tx, TMX_TMH_EAGER, 0x1, 0, 0, 0);
    wc = expect_unexp(t, 0x1, 0);
    cr_assert_eq(wc.wc_flags, TMX_WC_TM_SYNC_REQ); /* lag 3 */
    cr_assert_eq(tm_sync(t, 5, 42, TMX_OPS_SIGNALED), TMX_OK);
    wc = tm_next(t);
    cr_assert(wc.opcode == TMX_WC_TM_SYNC && wc.wc_flags == 0);
    tm_send(t, t->tx, TMX_TMH_EAGER, 0x1, 0, 0, 0);
    wc = expect_unexp(t, 0x1, 0);
    cr_assert_eq(wc.wc_flags, 0u);
    tm_close(t);
    free(t);
}

/* The device's count is 16 bits: past 65536 unexpected messages it wraps, and a report is
 * compared modulo 2^16. SYNC_REQ follows the 16-bit lag. */
Test(soft_tm, unexpected_counter_wraps, .timeout = 120)
{
    tmx_config_t cfg;
    tm_t        *t = calloc(1, sizeof(*t));
    tmx_wc_t     wc;
    const unsigned n = 65536 + 3;

    cfg_tm(&cfg);
    cfg.soft_tm_sync_gap = 16383;
    tm_open(t, &cfg, 16, 16, 8);
    tmh_put(t->mem + STAGE, TMX_TMH_EAGER, 0x9, 0);
    for (unsigned i = 1; i <= n; i++) {
        tm_send_raw(t, t->tx, 16);
        wc = tm_next(t);
        cr_assert(wc.opcode == TMX_WC_TM_RECV && !(wc.wc_flags & TMX_WC_TM_MATCH));
        cr_assert_eq(wc.wc_flags & TMX_WC_TM_SYNC_REQ,
                     (uint16_t)i > 16383 ? TMX_WC_TM_SYNC_REQ : 0u, "unexpected %u", i);
        plain_post(t, (unsigned)(wc.wr_id - PLAIN_ID));
    }
    /* a report one short (mod 2^16) leaves an ADD ineligible */
    cr_assert_eq(tm_add(t, 0x9, ~0ull, 0, 64, 1, TMX_OPS_TM_SYNC, n - 1, NULL), TMX_OK);
    tm_send(t, t->tx, TMX_TMH_EAGER, 0x9, 0, 0, 0);
    expect_unexp(t, 0x9, 0);
    /* the full count, as software's 32-bit counter has it: eligible */
    cr_assert_eq(tm_sync(t, n + 1, 0, 0), TMX_OK);
    tm_send(t, t->tx, TMX_TMH_EAGER, 0x9, 0, 8, 0);
    expect_match(t, 1, 0x9, 8);
    /* the same count modulo 2^16 works as well */
    tm_send(t, t->tx, TMX_TMH_EAGER, 0x9, 0, 0, 0);
    expect_unexp(t, 0x9, 0);
    cr_assert_eq(tm_add(t, 0x9, ~0ull, 0, 64, 2, TMX_OPS_TM_SYNC, (n + 2) & 0xffff, NULL),
                 TMX_OK);
    tm_send(t, t->tx, TMX_TMH_EAGER, 0x9, 0, 8, 0);
    expect_match(t, 2, 0x9, 8);
    tm_close(t);
    free(t);
}

/* TMX_SOFT_TM_INJECT: every Nth op of a kind fails (TMX_ERR_IO) with nothing of it done. */
Test(soft_tm, inject_fails_every_nth, .timeout = 20)
{
    tmx_config_t cfg;
    tm_t        *t = calloc(1, sizeof(*t));
    uint32_t     h[6];
    tmx_wc_t     wc;

    cfg_tm(&cfg);
    snprintf(cfg.soft_tm_inject, sizeof(cfg.soft_tm_inject), "add=3,del=2,sync=1");
    tm_open(t, &cfg, 16, 16, 8);
    for (int i = 0; i < 6; i++) {
        h[i] = 0;
        cr_assert_eq(tm_add(t, 0x100 + (uint64_t)i, ~0ull, 64 * (size_t)i, 64, 1 + (uint64_t)i,
                            TMX_OPS_SIGNALED, 0, &h[i]),
                     i % 3 == 2 ? TMX_ERR_IO : TMX_OK, "add %d", i);
        cr_assert_eq(h[i] == 0, i % 3 == 2);
        if (i % 3 != 2) {
            wc = tm_next(t);
            cr_assert(wc.opcode == TMX_WC_TM_ADD && wc.wr_id == 501 + (uint64_t)i);
        }
    }
    tm_none(t);
    /* the failed ADD is not on the list: its tag arrives unexpected */
    tm_send(t, t->tx, TMX_TMH_EAGER, 0x102, 0, 0, 0);
    expect_unexp(t, 0x102, 0);
    /* a SYNC always fails here, and does nothing: the count is not taken (ADD stays behind) */
    cr_assert_eq(tm_sync(t, 1, 50, TMX_OPS_SIGNALED), TMX_ERR_IO);
    tm_none(t);
    /* DEL: the 2nd fails and the entry stays; the 1st and 3rd remove theirs */
    cr_assert_eq(tm_del(t, h[0], 60, TMX_OPS_SIGNALED), TMX_OK);
    cr_assert_eq(tm_del(t, h[1], 61, TMX_OPS_SIGNALED), TMX_ERR_IO);
    cr_assert_eq(tm_del(t, h[1], 62, TMX_OPS_SIGNALED), TMX_OK);
    wc = tm_next(t);
    cr_assert(wc.opcode == TMX_WC_TM_DEL && wc.wr_id == 60 && wc.status == TMX_WC_SUCCESS);
    wc = tm_next(t);
    cr_assert(wc.opcode == TMX_WC_TM_DEL && wc.wr_id == 62 && wc.status == TMX_WC_SUCCESS);
    tm_send(t, t->tx, TMX_TMH_EAGER, 0x103, 0, 8, 0);
    expect_match(t, 4, 0x103, 8); /* added in step, before the unexpected one */
    tm_close(t);
    free(t);
}

/* ---------------------------------------------------------------- rendezvous */

#define SRC   (BUFS + (3u << 20)) /* a sender's buffer, in the same arena */
#define RLEN  ((1u << 20) + 5)

/* The FIN of an offloaded rendezvous, in a plain buffer of the sender's TM SRQ. */
static void check_fin(tm_t *t, tmx_wc_t wc, tmx_qp_t *tx, uint32_t ctx, uint64_t tag)
{
    tmx_tmh_t tmh;

    cr_assert_eq(wc.opcode, TMX_WC_TM_NO_TAG, "opcode %d status %d", wc.opcode, wc.status);
    cr_assert_eq(wc.status, TMX_WC_SUCCESS);
    cr_assert_eq(wc.byte_len, sizeof(tmh));
    cr_assert_eq(wc.qp_num, tx->qp_num);
    memcpy(&tmh, plain_buf(t, wc.wr_id), sizeof(tmh));
    cr_assert_eq(tmh.opcode, TMX_TMH_FIN);
    cr_assert_eq(be32toh(tmh.app_ctx), ctx);
    cr_assert_eq(be64toh(tmh.tag), tag);
    plain_post(t, (unsigned)(wc.wr_id - PLAIN_ID));
}

static void expect_fin(tm_t *t, tmx_qp_t *tx, uint32_t ctx, uint64_t tag)
{
    check_fin(t, tm_next(t), tx, ctx, tag);
}

/* Matched RNDV on a TM QP: the device reads the data into the entry's buffer, sends the FIN to
 * the sender's tx QP (through its TM SRQ), and completes MATCH then DATA_VALID. */
static void rndv_offload(int cma)
{
    tmx_config_t cfg;
    tm_t        *t = calloc(1, sizeof(*t));
    tmx_wc_t     wc;
    uint32_t     h;

    cfg_tm(&cfg);
    cfg.soft_cma = cma;
    tm_open(t, &cfg, 16, 16, 8);
    for (int round = 0; round < 3; round++) {
        uint32_t len = round == 0 ? RLEN : round == 1 ? 0 : 4000;

        fill(t->mem + SRC, len, 40 + (unsigned)round);
        memset(t->mem + BUFS, 0, RLEN + 1);
        cr_assert_eq(tm_add(t, 0xabc, ~0ull, 0, 2u << 20, 7, 0, 0, &h), TMX_OK);
        tm_send_rndv(t, t->tx, 0xabc, 0x1234 + (uint32_t)round, (uintptr_t)(t->mem + SRC),
                     t->mr->rkey, len);
        wc = tm_next(t);
        cr_assert(wc.wr_id == 7 && wc.status == TMX_WC_SUCCESS && wc.byte_len == 0);
        cr_assert_eq(wc.wc_flags, TMX_WC_TM_MATCH);
        cr_assert(wc.tm_info.tag == 0xabc && wc.tm_info.priv == 0x1234 + (uint32_t)round);
        if (round == 0) {
            /* the DEL comes too late: it fails after the DATA_VALID completion */
            cr_assert_eq(tm_del(t, h, 66, 0), TMX_OK);
        }
        wc = tm_next(t);
        cr_assert_eq(wc.status, TMX_WC_SUCCESS, "status %d", wc.status);
        cr_assert(wc.wr_id == 7 && wc.wc_flags == TMX_WC_TM_DATA_VALID && wc.byte_len == len);
        cr_assert(same(t->mem + BUFS, len, 40 + (unsigned)round));
        cr_assert_eq(t->mem[BUFS + len], 0);
        if (round == 0) {
            /* the DEL's failure and the FIN, in either order */
            for (int k = 0; k < 2; k++) {
                wc = tm_next(t);
                if (wc.opcode == TMX_WC_TM_NO_TAG) {
                    check_fin(t, wc, t->tx, 0x1234, 0xabc);
                } else {
                    cr_assert(wc.opcode == TMX_WC_TM_DEL && wc.status == TMX_WC_TM_ERR &&
                              wc.wr_id == 66);
                }
            }
            tm_none(t);
            continue;
        }
        expect_fin(t, t->tx, 0x1234 + (uint32_t)round, 0xabc);
        tm_none(t);
    }
    tm_close(t);
    free(t);
}

Test(soft_tm, rndv_offload_cma, .timeout = 30)
{
    rndv_offload(-1);
}

Test(soft_tm, rndv_offload_fallback_reads, .timeout = 30)
{
    rndv_offload(0);
}

/* RNDV_INCOMPLETE: a buffer too small, arrival on a QP that is not a TM QP, offload off.
 * The buffer holds RVH + user header; no FIN goes. */
static void expect_incomplete(tm_t *t, uint64_t recv_id, uint32_t len)
{
    tmx_wc_t  wc = tm_next(t);
    tmx_rvh_t rvh;

    cr_assert_eq(wc.status, TMX_WC_TM_RNDV_INCOMPLETE, "status %d", wc.status);
    cr_assert(wc.wr_id == recv_id && wc.opcode == TMX_WC_TM_RECV);
    cr_assert_eq(wc.wc_flags & (TMX_WC_TM_MATCH | TMX_WC_TM_DATA_VALID), TMX_WC_TM_MATCH);
    cr_assert_eq(wc.byte_len, sizeof(rvh) + 16);
    cr_assert_eq(wc.tm_info.tag, 0x51);
    memcpy(&rvh, t->mem + BUFS, sizeof(rvh));
    cr_assert_eq(be64toh(rvh.va), (uint64_t)(uintptr_t)(t->mem + SRC));
    cr_assert_eq(be32toh(rvh.len), len);
    cr_assert_eq(t->mem[BUFS + sizeof(rvh)], 0xab);
    tm_none(t); /* no FIN */
}

Test(soft_tm, rndv_incomplete, .timeout = 30)
{
    tmx_config_t cfg;
    tm_t        *t = calloc(1, sizeof(*t));

    cfg_tm(&cfg);
    tm_open(t, &cfg, 16, 16, 8);
    cr_assert_eq(tm_add(t, 0x51, ~0ull, 0, 100, 1, 0, 0, NULL), TMX_OK);
    tm_send_rndv(t, t->tx, 0x51, 1, (uintptr_t)(t->mem + SRC), t->mr->rkey, 101);
    expect_incomplete(t, 1, 101);
    cr_assert_eq(tm_add(t, 0x51, ~0ull, 0, 1000, 2, 0, 0, NULL), TMX_OK);
    tm_send_rndv(t, t->tx2, 0x51, 1, (uintptr_t)(t->mem + SRC), t->mr->rkey, 100);
    expect_incomplete(t, 2, 100);
    tm_close(t);
    cfg.soft_tm_rndv = 0;
    tm_open(t, &cfg, 16, 16, 8);
    cr_assert_eq(t->dev->attr.caps & TMX_DEV_CAP_TM_RNDV, 0u);
    cr_assert_eq(tm_add(t, 0x51, ~0ull, 0, 1000, 3, 0, 0, NULL), TMX_OK);
    tm_send_rndv(t, t->tx, 0x51, 1, (uintptr_t)(t->mem + SRC), t->mr->rkey, 100);
    expect_incomplete(t, 3, 100);
    /* unexpected RNDV: whole, with its TMH, in a plain buffer; counted */
    tm_send_rndv(t, t->tx, 0x51, 1, (uintptr_t)(t->mem + SRC), t->mr->rkey, 100);
    expect_unexp(t, 0x51, 32);
    tm_close(t);
    free(t);
}

/* An RVH naming memory the sender did not open for reading (a bad key, out of bounds): the
 * READ fails, DATA_VALID carries its error, no FIN goes. */
static void rndv_bad_key(int cma)
{
    tmx_config_t cfg;
    tm_t        *t = calloc(1, sizeof(*t));
    tmx_wc_t     wc;
    tmx_mr_t    *local;
    struct {
        uint64_t va;
        uint32_t rkey, len;
    } bad[3];

    cfg_tm(&cfg);
    cfg.soft_cma = cma;
    tm_open(t, &cfg, 16, 16, 8);
    /* a registration without REMOTE_READ */
    cr_assert_eq(t->ops->mr_reg(t->pd, t->mem + SRC, 4096, TMX_ACCESS_LOCAL_WRITE, &local),
                 TMX_OK);
    bad[0].va   = (uintptr_t)(t->mem + SRC);
    bad[0].rkey = t->mr->rkey ^ 0x1; /* wrong generation */
    bad[0].len  = 100;
    bad[1].va   = (uintptr_t)(t->mem + MEM - 64); /* past the end */
    bad[1].rkey = t->mr->rkey;
    bad[1].len  = 100;
    bad[2].va   = (uintptr_t)(t->mem + SRC);
    bad[2].rkey = local->rkey;
    bad[2].len  = 100;
    for (int i = 0; i < 3; i++) {
        cr_assert_eq(tm_add(t, 0x61, ~0ull, 0, 4096, 1 + (uint64_t)i, 0, 0, NULL), TMX_OK);
        tm_send_rndv(t, t->tx, 0x61, 9, bad[i].va, bad[i].rkey, bad[i].len);
        wc = tm_next(t);
        cr_assert(wc.wc_flags == TMX_WC_TM_MATCH && wc.status == TMX_WC_SUCCESS);
        wc = tm_next(t);
        cr_assert_eq(wc.status, TMX_WC_REM_ACCESS_ERR, "case %d: status %d", i, wc.status);
        cr_assert(wc.wr_id == 1 + (uint64_t)i && wc.wc_flags == TMX_WC_TM_DATA_VALID);
        tm_none(t); /* no FIN */
        cr_assert_eq(t->tx->state, TMX_QPS_RTS);
        cr_assert_eq(t->rx->state, TMX_QPS_RTS);
    }
    t->ops->mr_dereg(local);
    tm_close(t);
    free(t);
}

Test(soft_tm, rndv_bad_rkey_cma, .timeout = 30)
{
    rndv_bad_key(-1);
}

Test(soft_tm, rndv_bad_rkey_fallback, .timeout = 30)
{
    rndv_bad_key(0);
}

/* ---------------------------------------------------------------- two processes */

typedef struct pair_sh {
    _Atomic int stage[2];
    size_t      len[2][2];
    uint8_t     blob[2][2][TMX_QP_ADDR_MAX]; /* [node][0: tx, 1: rx] */
    uint64_t    va;
    uint32_t    rkey;
} pair_sh_t;

static void pair_wait(pair_sh_t *sh, int me, int s, tm_t *t)
{
    double end = tmx_time_sec() + 10;

    atomic_store(&sh->stage[me], s);
    while (atomic_load(&sh->stage[1 - me]) < s) {
        if (t != NULL) {
            tm_progress(t);
        }
        cr_assert(tmx_time_sec() < end, "peer did not come to stage %d", s);
    }
}

/* Each node: a TM SRQ, a tx QP connected to the peer's TM QP and a TM QP connected to the
 * peer's tx QP: the two connections per direction of prov.h. */
static void pair_open(tm_t *t, pair_sh_t *sh, int me, const tmx_config_t *cfg)
{
    tm_dev(t, cfg, 16, 16);
    t->tx = qp_new(t, 64);
    t->rx = qp_new(t, 0);
    sh->len[me][0] = sh->len[me][1] = TMX_QP_ADDR_MAX;
    cr_assert_eq(t->ops->qp_get_addr(t->tx, sh->blob[me][0], &sh->len[me][0]), TMX_OK);
    cr_assert_eq(t->ops->qp_get_addr(t->rx, sh->blob[me][1], &sh->len[me][1]), TMX_OK);
    for (unsigned i = 0; i < 8; i++) {
        plain_post(t, i);
    }
    pair_wait(sh, me, 1, NULL);
    qp_rts_blob(t, t->tx, sh->blob[1 - me][1], sh->len[1 - me][1]);
    qp_rts_blob(t, t->rx, sh->blob[1 - me][0], sh->len[1 - me][0]);
    pair_wait(sh, me, 2, NULL);
}

/* Node 1 (a child) sends a RNDV of its buffer to node 0, which offloads it; with die, node 1
 * exits at once without serving anything: node 0 gets an error, not a hang. */
static void rndv_pair(int cma, int die)
{
    pair_sh_t  *sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE,
                          MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    tmx_config_t cfg;
    tm_t        *t = calloc(1, sizeof(*t));
    tmx_wc_t     wc;
    pid_t        pid;
    int          status;

    cr_assert(sh != MAP_FAILED && t != NULL);
    memset(sh, 0, sizeof(*sh));
    cfg_tm(&cfg);
    cfg.soft_cma = cma;
    fflush(NULL);
    pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        alarm(20);
        pair_open(t, sh, 1, &cfg);
        fill(t->mem + SRC, RLEN, 77);
        pair_wait(sh, 1, 3, t); /* node 0 added its entry */
        tm_send_rndv(t, t->tx, 0xfeed, 0x4321, (uintptr_t)(t->mem + SRC), t->mr->rkey, RLEN);
        if (die) {
            _exit(0);
        }
        expect_fin(t, t->tx, 0x4321, 0xfeed);
        pair_wait(sh, 1, 4, t);
        tm_close(t);
        _exit(0);
    }
    pair_open(t, sh, 0, &cfg);
    cr_assert_eq(tm_add(t, 0xfeed, ~0ull, 0, 2u << 20, 3, 0, 0, NULL), TMX_OK);
    pair_wait(sh, 0, 3, t);
    wc = tm_next(t);
    cr_assert(wc.wr_id == 3 && wc.wc_flags == TMX_WC_TM_MATCH && wc.status == 0);
    cr_assert(wc.tm_info.tag == 0xfeed && wc.tm_info.priv == 0x4321);
    for (;;) {
        wc = tm_next(t);
        if (wc.wr_id != TMX_WR_ID_ASYNC_ERROR) {
            break;
        }
        cr_assert(die, "async error %d", wc.status);
    }
    cr_assert(wc.wr_id == 3 && wc.wc_flags == TMX_WC_TM_DATA_VALID);
    if (die) {
        cr_assert_eq(wc.status, TMX_WC_RETRY_EXC_ERR, "status %d", wc.status);
    } else {
        cr_assert_eq(wc.status, TMX_WC_SUCCESS, "status %d", wc.status);
        cr_assert_eq(wc.byte_len, RLEN);
        cr_assert(same(t->mem + BUFS, RLEN, 77));
        pair_wait(sh, 0, 4, t);
    }
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "node 1 failed: 0x%x", status);
    tm_close(t);
    free(t);
    munmap(sh, sizeof(*sh));
}

Test(soft_tm, rndv_between_processes_cma, .timeout = 30)
{
    rndv_pair(-1, 0);
}

Test(soft_tm, rndv_between_processes_fallback, .timeout = 30)
{
    rndv_pair(0, 0);
}

Test(soft_tm, rndv_sender_dies, .timeout = 30)
{
    rndv_pair(0, 1);
}
