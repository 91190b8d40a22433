/*
 * Unit tests of the soft device's data-in-order answer and of how RDMA writes really land
 * (TMX_SOFT_DATA_IN_ORDER), and of out-of-order data placement (TMX_SOFT_OOO), through the
 * provider contract. One process, a QP connected to itself; a write hook (soft.h) looks at the
 * target memory after every piece of a write lands, as a CPU polling it would.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "prov/prov.h"
#include "proto/fence.h"
#include "prov/soft/soft.h"
#include "util/config.h"
#include "util/time.h"

extern const tmx_prov_t tmx_soft_prov;

typedef struct loop {
    tmx_config_t          cfg;
    const tmx_prov_ops_t *ops;
    tmx_dev_t            *dev;
    tmx_pd_t             *pd;
    tmx_cq_t             *cq;
    tmx_qp_t             *qp;
} loop_t;

static void cfg_init(tmx_config_t *cfg, int cma, int dio)
{
    cr_assert_eq(tmx_config_load(cfg), TMX_OK);
    cfg->soft_memfd         = -1;
    cfg->soft_cma           = cma;
    cfg->soft_ring_size     = 64 * 1024;
    cfg->soft_inbox_size    = 64 * 1024;
    cfg->soft_max_qps       = 8;
    cfg->soft_max_mrs       = 64;
    cfg->soft_data_in_order = dio;
    cfg->soft_scramble_seed = 12345;
}

/* A QP connected to itself, in RTS (with OOO placement if ooo). */
static void loop_open(loop_t *l, const tmx_config_t *cfg, int ooo)
{
    tmx_dev_t         *devs[1];
    int                num = 0;
    tmx_qp_init_attr_t qa;
    tmx_qp_attr_t      mod;
    uint8_t            blob[TMX_QP_ADDR_MAX];
    size_t             blen = sizeof(blob);

    memset(l, 0, sizeof(*l));
    l->cfg = *cfg;
    l->ops = tmx_soft_prov.ops;
    cr_assert_eq(l->ops->dev_open(&tmx_soft_prov, &l->cfg, devs, 1, &num), TMX_OK);
    cr_assert_eq(num, 1);
    l->dev = devs[0];
    cr_assert_eq(l->ops->pd_alloc(l->dev, &l->pd), TMX_OK);
    cr_assert_eq(l->ops->cq_create(l->dev, 256, &l->cq), TMX_OK);
    memset(&qa, 0, sizeof(qa));
    qa.type        = TMX_QPT_RC;
    qa.send_cq     = l->cq;
    qa.recv_cq     = l->cq;
    qa.max_send_wr = 64;
    qa.max_recv_wr = 64;
    cr_assert_eq(l->ops->qp_create(l->pd, &qa, &l->qp), TMX_OK);
    memset(&mod, 0, sizeof(mod));
    mod.state = TMX_QPS_INIT;
    cr_assert_eq(l->ops->qp_modify(l->qp, &mod, TMX_QP_ATTR_STATE), TMX_OK);
    cr_assert_eq(l->ops->qp_get_addr(l->qp, blob, &blen), TMX_OK);
    mod.state           = TMX_QPS_RTR;
    mod.remote_addr     = blob;
    mod.remote_addr_len = blen;
    mod.ooo             = ooo;
    cr_assert_eq(l->ops->qp_modify(l->qp, &mod,
                                   TMX_QP_ATTR_STATE | TMX_QP_ATTR_REMOTE |
                                       (ooo ? TMX_QP_ATTR_OOO : 0)),
                 TMX_OK);
    cr_assert_eq(l->ops->qp_data_in_order(l->qp, TMX_WR_RDMA_WRITE), 0, "answers 0 before RTS");
    mod.state = TMX_QPS_RTS;
    cr_assert_eq(l->ops->qp_modify(l->qp, &mod, TMX_QP_ATTR_STATE), TMX_OK);
}

static void loop_close(loop_t *l)
{
    l->ops->qp_destroy(l->qp);
    l->ops->cq_destroy(l->cq);
    l->ops->pd_free(l->pd);
    l->ops->dev_close(l->dev);
}

static tmx_mr_t *loop_reg(loop_t *l, void *buf, size_t len)
{
    tmx_mr_t *mr = NULL;

    cr_assert_eq(l->ops->mr_reg(l->pd, buf, len,
                                TMX_ACCESS_LOCAL_WRITE | TMX_ACCESS_REMOTE_WRITE |
                                    TMX_ACCESS_REMOTE_READ,
                                &mr),
                 TMX_OK);
    return mr;
}

static tmx_status_t loop_post(loop_t *l, tmx_wr_opcode_t op, void *buf, size_t len,
                              uint32_t lkey, unsigned flags, uint64_t id, void *raddr,
                              uint32_t rkey)
{
    tmx_sge_t      sge = {.addr = (uintptr_t)buf, .length = (uint32_t)len, .lkey = lkey};
    tmx_send_wr_t  wr;
    tmx_send_wr_t *bad;

    memset(&wr, 0, sizeof(wr));
    wr.wr_id            = id;
    wr.sg_list          = &sge;
    wr.num_sge          = 1;
    wr.opcode           = op;
    wr.send_flags       = flags | TMX_SEND_SIGNALED;
    wr.imm_data         = 7;
    wr.rdma.remote_addr = (uintptr_t)raddr;
    wr.rdma.rkey        = rkey;
    return l->ops->post_send(l->qp, &wr, &bad);
}

static void loop_post_recv(loop_t *l, void *buf, size_t len, uint32_t lkey, uint64_t id)
{
    tmx_sge_t      sge = {.addr = (uintptr_t)buf, .length = (uint32_t)len, .lkey = lkey};
    tmx_recv_wr_t  wr  = {.wr_id = id, .sg_list = &sge, .num_sge = 1};
    tmx_recv_wr_t *bad;

    cr_assert_eq(l->ops->post_recv(l->qp, &wr, &bad), TMX_OK);
}

/* Polls until n completions are in wc (in 5 s). */
static void loop_wait(loop_t *l, tmx_wc_t *wc, int n)
{
    double end = tmx_time_sec() + 5;
    int    got = 0;

    while (got < n) {
        int r = l->ops->cq_poll(l->cq, n - got, wc + got);

        cr_assert(r >= 0);
        got += r;
        cr_assert(tmx_time_sec() < end, "completions did not come");
    }
}

/* ---------------------------------------------------------------- the piece plan */

static void plan_check(unsigned mode, uint64_t addr, size_t len)
{
    tmx_soft_piece_t p[TMX_SOFT_MAX_PIECES];
    uint64_t         rng = 99;
    uint8_t         *seen = calloc(len, 1);
    size_t           n = tmx_soft_scramble_plan(mode, addr, len, &rng, p), last = n;

    cr_assert(n >= 1 && n <= TMX_SOFT_MAX_PIECES);
    for (size_t i = 0; i < n; i++) {
        cr_assert(p[i].len > 0 && p[i].off + p[i].len <= len);
        for (size_t b = p[i].off; b < p[i].off + p[i].len; b++) {
            cr_assert_eq(seen[b], 0, "byte %zu twice (mode %u len %zu)", b, mode, len);
            seen[b] = 1;
        }
        if (p[i].off + p[i].len == len) {
            last = i;
        }
        if (mode == TMX_SOFT_DIO_ALIGNED128 && (addr + len - 1) / 128 - addr / 128 < 64) {
            /* every piece inside one aligned block */
            cr_assert_eq((addr + p[i].off) / 128, (addr + p[i].off + p[i].len - 1) / 128);
        }
    }
    for (size_t b = 0; b < len; b++) {
        cr_assert_eq(seen[b], 1, "byte %zu never written", b);
    }
    if (mode == TMX_SOFT_DIO_WHOLE) {
        cr_assert_eq(last, n - 1, "whole: the last byte goes last");
        cr_assert(p[last].len <= 8 &&
                  (addr + p[last].off) / 8 == (addr + len - 1) / 8);
    } else if ((mode == TMX_SOFT_DIO_NONE && n > 1) ||
               (mode == TMX_SOFT_DIO_ALIGNED128 && addr / 128 != (addr + len - 1) / 128)) {
        cr_assert(last < n - 1, "mode %u len %zu: the last byte must not land last", mode, len);
    }
    free(seen);
}

Test(soft_order, plan_covers_once_and_orders)
{
    static const size_t lens[]  = {1, 7, 8, 9, 100, 128, 129, 1000, 4096, 8191, 65536, 1 << 20};
    static const uint64_t addrs[] = {0x10000, 0x10001, 0x10007, 0x1007f, 0x10080};

    for (unsigned mode = 0; mode < 3; mode++) {
        for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
            for (size_t j = 0; j < sizeof(addrs) / sizeof(addrs[0]); j++) {
                plan_check(mode, addrs[j], lens[i]);
            }
        }
    }
}

/* ---------------------------------------------------------------- what a polling reader sees */

/* The hook's view: the target, and what a reader polling it found after each piece. */
static struct {
    const uint8_t *dst;
    size_t         len;
    int            early;      /* the last byte was there while an earlier one was not */
    int            torn_block; /* a block's last byte was there without its earlier bytes */
    int            calls;
} watch;

static uint8_t val(size_t i)
{
    return (uint8_t)(i % 251 + 1);
}

static void watch_hook(void *arg, uint64_t addr, size_t len)
{
    (void)arg;
    (void)addr;
    (void)len;
    watch.calls++;
    if (watch.dst[watch.len - 1] == val(watch.len - 1)) {
        for (size_t i = 0; i < watch.len - 1; i++) {
            if (watch.dst[i] != val(i)) {
                watch.early = 1;
                break;
            }
        }
    }
    for (size_t b = 0; b < watch.len; b += 128) { /* dst is 128-aligned */
        size_t e = b + 128 < watch.len ? b + 128 : watch.len;

        if (watch.dst[e - 1] == val(e - 1)) {
            for (size_t i = b; i < e; i++) {
                if (watch.dst[i] != val(i)) {
                    watch.torn_block = 1;
                }
            }
        }
    }
}

/* Where the target of writes_seen_at is: a registered heap buffer (written by CMA or through
 * the rings), or the device's memory (mem_alloc: written by the initiator's stores), by WRs
 * that go through the send queue (signaled) or straight from post_send (unsignaled). */
enum { AT_HEAP = 0, AT_DM = 1, AT_DM_UNSIGNALED = 2 };

/* Writes of several sizes; the hook records what a reader polling the target saw. Returns the
 * number of writes in which the reader saw the last byte early, and sets *torn if a 128-byte
 * block ever showed its end without all of it. */
static int writes_seen_at(int at, int cma, int dio, int ooo, tmx_wr_opcode_t op, int *torn)
{
    static const size_t lens[] = {16, 200, 1000, 4096, 40000};
    tmx_config_t        cfg;
    loop_t              l;
    uint8_t            *src, *dst, rbuf[8];
    tmx_mr_t           *smr, *dmr, *rmr;
    tmx_wc_t            wc[2];
    int                 early = 0;
    unsigned            unsig = at == AT_DM_UNSIGNALED;

    cfg_init(&cfg, cma, dio);
    cfg.soft_ooo = ooo;
    loop_open(&l, &cfg, ooo);
    cr_assert_eq(posix_memalign((void **)&src, 4096, 65536), 0);
    for (size_t i = 0; i < 65536; i++) {
        src[i] = val(i);
    }
    smr = loop_reg(&l, src, 65536);
    if (at == AT_HEAP) {
        cr_assert_eq(posix_memalign((void **)&dst, 4096, 65536), 0);
        dmr = loop_reg(&l, dst, 65536);
    } else {
        cr_assert(l.dev->attr.caps & TMX_DEV_CAP_MEM_DIRECT);
        cr_assert_eq(l.ops->mem_alloc(l.pd, 65536, TMX_ACCESS_LOCAL_WRITE |
                                                       TMX_ACCESS_REMOTE_WRITE, &dmr),
                     TMX_OK);
        dst = dmr->addr;
    }
    rmr = loop_reg(&l, rbuf, sizeof(rbuf));
    *torn = 0;
    for (size_t k = 0; k < sizeof(lens) / sizeof(lens[0]); k++) {
        memset(dst, 0, 65536);
        memset(&watch, 0, sizeof(watch));
        watch.dst               = dst;
        watch.len               = lens[k];
        tmx_soft_write_hook     = watch_hook;
        tmx_soft_write_hook_arg = NULL;
        if (op == TMX_WR_RDMA_WRITE_WITH_IMM) {
            loop_post_recv(&l, rbuf, sizeof(rbuf), rmr->lkey, 9);
        }
        if (unsig && op == TMX_WR_RDMA_WRITE) {
            tmx_sge_t      sge = {.addr = (uintptr_t)src, .length = (uint32_t)lens[k],
                                  .lkey = smr->lkey};
            tmx_send_wr_t  wr, *bad;

            memset(&wr, 0, sizeof(wr));
            wr.sg_list          = &sge;
            wr.num_sge          = 1;
            wr.opcode           = op;
            wr.rdma.remote_addr = (uintptr_t)dst;
            wr.rdma.rkey        = dmr->rkey;
            cr_assert_eq(l.ops->post_send(l.qp, &wr, &bad), TMX_OK);
            if (ooo) {
                double end = tmx_time_sec() + 5;

                /* OOO placement holds a write back for what is posted behind it */
                while (memcmp(dst, src, lens[k]) != 0) {
                    cr_assert_eq(l.ops->cq_poll(l.cq, 2, wc), 0);
                    cr_assert(tmx_time_sec() < end, "the write never landed");
                }
            }
            tmx_soft_write_hook = NULL;
            cr_assert_eq(memcmp(dst, src, lens[k]), 0, "placed when post_send returns");
            cr_assert_eq(l.ops->cq_poll(l.cq, 2, wc), 0, "an unsignaled write completes nothing");
        } else {
            cr_assert_eq(loop_post(&l, op, src, lens[k], smr->lkey, 0, 1, dst, dmr->rkey),
                         TMX_OK);
            loop_wait(&l, wc, op == TMX_WR_RDMA_WRITE_WITH_IMM ? 2 : 1);
            tmx_soft_write_hook = NULL;
            cr_assert_eq(wc[0].status, TMX_WC_SUCCESS);
        }
        cr_assert_eq(memcmp(dst, src, lens[k]), 0, "the data is all there at the completion");
        cr_assert(watch.calls >= 1);
        early += watch.early;
        *torn |= watch.torn_block;
    }
    l.ops->mr_dereg(smr);
    if (at == AT_HEAP) {
        l.ops->mr_dereg(dmr);
        free(dst);
    } else {
        l.ops->mem_free(dmr);
    }
    l.ops->mr_dereg(rmr);
    loop_close(&l);
    free(src);
    return early;
}

static int writes_seen_early(int cma, int dio, int ooo, tmx_wr_opcode_t op, int *torn)
{
    return writes_seen_at(AT_HEAP, cma, dio, ooo, op, torn);
}

static const unsigned whole_bits = TMX_DATA_IN_ORDER_WHOLE_MSG |
                                   TMX_DATA_IN_ORDER_ALIGNED_128_BYTES;

Test(soft_order, answers_per_knob)
{
    static const unsigned expect[3] = {TMX_DATA_IN_ORDER_WHOLE_MSG |
                                           TMX_DATA_IN_ORDER_ALIGNED_128_BYTES,
                                       TMX_DATA_IN_ORDER_ALIGNED_128_BYTES, 0};
    tmx_config_t cfg;
    loop_t       l;

    for (int dio = 0; dio < 3; dio++) {
        cfg_init(&cfg, 0, dio);
        loop_open(&l, &cfg, 0);
        cr_assert(!(l.dev->attr.caps & TMX_DEV_CAP_OOO));
        cr_assert_eq(l.ops->qp_data_in_order(l.qp, TMX_WR_RDMA_WRITE), expect[dio]);
        cr_assert_eq(l.ops->qp_data_in_order(l.qp, TMX_WR_RDMA_WRITE_WITH_IMM), expect[dio]);
        cr_assert_eq(l.ops->qp_data_in_order(l.qp, TMX_WR_RDMA_READ), 0);
        cr_assert_eq(l.ops->qp_data_in_order(l.qp, TMX_WR_SEND), 0);
        loop_close(&l);
    }
    cr_assert_eq(expect[0], whole_bits);
}

Test(soft_order, whole_last_byte_implies_all, .timeout = 30)
{
    int torn;

    for (int cma = 0; cma < 2; cma++) {
        cr_assert_eq(writes_seen_early(cma, TMX_SOFT_DIO_WHOLE, 0, TMX_WR_RDMA_WRITE, &torn), 0);
        cr_assert_eq(torn, 0);
        cr_assert_eq(writes_seen_early(cma, TMX_SOFT_DIO_WHOLE, 0, TMX_WR_RDMA_WRITE_WITH_IMM,
                                       &torn),
                     0);
    }
}

Test(soft_order, aligned128_blocks_whole_but_scrambled, .timeout = 30)
{
    int torn;

    for (int cma = 0; cma < 2; cma++) {
        /* every write of more than one block: 200, 1000, 4096, 40000 bytes */
        cr_assert_eq(
            writes_seen_early(cma, TMX_SOFT_DIO_ALIGNED128, 0, TMX_WR_RDMA_WRITE, &torn), 4,
            "cma %d", cma);
        cr_assert_eq(torn, 0, "a 128-byte block showed its end before the rest");
        cr_assert(writes_seen_early(cma, TMX_SOFT_DIO_ALIGNED128, 0,
                                    TMX_WR_RDMA_WRITE_WITH_IMM, &torn) >= 3);
    }
}

Test(soft_order, none_scrambles_bytes, .timeout = 30)
{
    int torn;

    for (int cma = 0; cma < 2; cma++) {
        cr_assert_eq(writes_seen_early(cma, TMX_SOFT_DIO_NONE, 0, TMX_WR_RDMA_WRITE, &torn), 5,
                     "cma %d", cma);
        cr_assert_eq(torn, 1, "pieces smaller than a block");
    }
}

Test(soft_order, ooo_qp_answers_none_and_scrambles, .timeout = 30)
{
    tmx_config_t cfg;
    loop_t       l;
    int          torn;

    cfg_init(&cfg, 0, TMX_SOFT_DIO_WHOLE);
    cfg.soft_ooo = 1;
    loop_open(&l, &cfg, 1);
    cr_assert(l.dev->attr.caps & TMX_DEV_CAP_OOO);
    cr_assert_eq(l.ops->qp_data_in_order(l.qp, TMX_WR_RDMA_WRITE), 0);
    loop_close(&l);
    for (int cma = 0; cma < 2; cma++) {
        cr_assert_eq(writes_seen_early(cma, TMX_SOFT_DIO_WHOLE, 1, TMX_WR_RDMA_WRITE, &torn), 5);
    }
}

Test(soft_order, ooo_refused_without_cap)
{
    tmx_config_t       cfg;
    tmx_dev_t         *devs[1];
    int                num = 0;
    const tmx_prov_ops_t *ops = tmx_soft_prov.ops;
    tmx_pd_t          *pd;
    tmx_cq_t          *cq;
    tmx_qp_t          *qp;
    tmx_qp_init_attr_t qa;
    tmx_qp_attr_t      mod;
    uint8_t            blob[TMX_QP_ADDR_MAX];
    size_t             blen = sizeof(blob);

    cfg_init(&cfg, 0, TMX_SOFT_DIO_WHOLE);
    cr_assert_eq(ops->dev_open(&tmx_soft_prov, &cfg, devs, 1, &num), TMX_OK);
    cr_assert_eq(ops->pd_alloc(devs[0], &pd), TMX_OK);
    cr_assert_eq(ops->cq_create(devs[0], 16, &cq), TMX_OK);
    memset(&qa, 0, sizeof(qa));
    qa.type        = TMX_QPT_RC;
    qa.send_cq     = cq;
    qa.recv_cq     = cq;
    qa.max_send_wr = 4;
    qa.max_recv_wr = 4;
    cr_assert_eq(ops->qp_create(pd, &qa, &qp), TMX_OK);
    memset(&mod, 0, sizeof(mod));
    mod.state = TMX_QPS_INIT;
    mod.ooo   = 1;
    cr_assert_eq(ops->qp_modify(qp, &mod, TMX_QP_ATTR_STATE | TMX_QP_ATTR_OOO),
                 TMX_ERR_INVALID_PARAM, "OOO only at INIT -> RTR");
    cr_assert_eq(ops->qp_modify(qp, &mod, TMX_QP_ATTR_STATE), TMX_OK);
    cr_assert_eq(ops->qp_get_addr(qp, blob, &blen), TMX_OK);
    mod.state           = TMX_QPS_RTR;
    mod.remote_addr     = blob;
    mod.remote_addr_len = blen;
    cr_assert_eq(ops->qp_modify(qp, &mod,
                                TMX_QP_ATTR_STATE | TMX_QP_ATTR_REMOTE | TMX_QP_ATTR_OOO),
                 TMX_ERR_UNSUPPORTED);
    cr_assert_eq(qp->state, TMX_QPS_INIT);
    ops->qp_destroy(qp);
    ops->cq_destroy(cq);
    ops->pd_free(pd);
    ops->dev_close(devs[0]);
}

/* ---------------------------------------------------------------- OOO placement */

/* READ of the "sender's" buffer, then a SEND (the FIN of a rendezvous) on an OOO QP; when the
 * SEND arrives, the sender reuses its buffer. Returns how many of iters reads saw the reused
 * buffer (the SEND was placed first); checks that completions came in post order. */
static int read_then_send_corrupt(int cma, unsigned fin_flags, int iters)
{
    tmx_config_t cfg;
    loop_t       l;
    uint8_t      src[4096], dst[4096], msg[8] = {1}, rbuf[8];
    tmx_mr_t    *smr, *dmr, *mmr, *rmr;
    int          corrupt = 0;

    cfg_init(&cfg, cma, TMX_SOFT_DIO_WHOLE);
    cfg.soft_ooo = 1;
    loop_open(&l, &cfg, 1);
    smr = loop_reg(&l, src, sizeof(src));
    dmr = loop_reg(&l, dst, sizeof(dst));
    mmr = loop_reg(&l, msg, sizeof(msg));
    rmr = loop_reg(&l, rbuf, sizeof(rbuf));
    for (int it = 0; it < iters; it++) {
        double end = tmx_time_sec() + 5;
        int    got_read = 0, got_send = 0, got_recv = 0;

        memset(src, 0xaa, sizeof(src));
        memset(dst, 0, sizeof(dst));
        loop_post_recv(&l, rbuf, sizeof(rbuf), rmr->lkey, 30);
        cr_assert_eq(loop_post(&l, TMX_WR_RDMA_READ, dst, sizeof(dst), dmr->lkey, 0, 10, src,
                               smr->rkey),
                     TMX_OK);
        cr_assert_eq(loop_post(&l, TMX_WR_SEND, msg, sizeof(msg), mmr->lkey, fin_flags, 20,
                               NULL, 0),
                     TMX_OK);
        while (!got_read || !got_send || !got_recv) {
            tmx_wc_t wc;
            int      r = l.ops->cq_poll(l.cq, 1, &wc);

            cr_assert(r >= 0 && tmx_time_sec() < end);
            if (r == 0) {
                continue;
            }
            cr_assert_eq(wc.status, TMX_WC_SUCCESS);
            if (wc.wr_id == 30) {
                got_recv = 1;
                memset(src, 0x55, sizeof(src)); /* the sender reuses its buffer */
            } else if (wc.wr_id == 10) {
                got_read = 1;
            } else {
                cr_assert_eq(wc.wr_id, 20);
                cr_assert(got_read, "send completions come in post order");
                got_send = 1;
            }
        }
        corrupt += dst[0] != 0xaa || dst[sizeof(dst) - 1] != 0xaa;
    }
    l.ops->mr_dereg(smr);
    l.ops->mr_dereg(dmr);
    l.ops->mr_dereg(mmr);
    l.ops->mr_dereg(rmr);
    loop_close(&l);
    return corrupt;
}

Test(soft_order, ooo_send_overtakes_read_without_fence, .timeout = 60)
{
    for (int cma = 0; cma < 2; cma++) {
        cr_assert_eq(read_then_send_corrupt(cma, TMX_SEND_FENCE, 8), 0, "cma %d", cma);
        cr_assert_gt(read_then_send_corrupt(cma, 0, 8), 0, "cma %d: never overtaken", cma);
    }
}

static struct {
    uint64_t first[2];
    int      n;
} landed;

static void landed_hook(void *arg, uint64_t addr, size_t len)
{
    (void)arg;
    (void)len;
    if (landed.n < 2 && (landed.n == 0 || landed.first[0] != addr)) {
        landed.first[landed.n++] = addr;
    }
}

/* Two RDMA WRITEs (data, then a flag) on an OOO QP: how many of iters times the flag landed
 * first. */
static int write_then_write_swapped(int cma, unsigned flag_flags, int iters)
{
    tmx_config_t cfg;
    loop_t       l;
    uint8_t      src[256], dst[256], one = 1, flag = 0;
    tmx_mr_t    *smr, *dmr, *omr, *fmr;
    tmx_wc_t     wc[2];
    int          swapped = 0;

    cfg_init(&cfg, cma, TMX_SOFT_DIO_WHOLE);
    cfg.soft_ooo = 1;
    loop_open(&l, &cfg, 1);
    memset(src, 3, sizeof(src));
    smr = loop_reg(&l, src, sizeof(src));
    dmr = loop_reg(&l, dst, sizeof(dst));
    omr = loop_reg(&l, &one, 1);
    fmr = loop_reg(&l, &flag, 1);
    for (int it = 0; it < iters; it++) {
        memset(&landed, 0, sizeof(landed));
        tmx_soft_write_hook = landed_hook;
        cr_assert_eq(loop_post(&l, TMX_WR_RDMA_WRITE, src, 8, smr->lkey, 0, 1, dst, dmr->rkey),
                     TMX_OK);
        cr_assert_eq(loop_post(&l, TMX_WR_RDMA_WRITE, &one, 1, omr->lkey, flag_flags, 2, &flag,
                               fmr->rkey),
                     TMX_OK);
        loop_wait(&l, wc, 2);
        tmx_soft_write_hook = NULL;
        cr_assert(wc[0].wr_id == 1 && wc[1].wr_id == 2, "completions in post order");
        cr_assert_eq(landed.n, 2);
        swapped += landed.first[0] == (uintptr_t)&flag;
    }
    l.ops->mr_dereg(smr);
    l.ops->mr_dereg(dmr);
    l.ops->mr_dereg(omr);
    l.ops->mr_dereg(fmr);
    loop_close(&l);
    return swapped;
}

Test(soft_order, ooo_write_overtakes_write_without_fence, .timeout = 60)
{
    for (int cma = 0; cma < 2; cma++) {
        cr_assert_eq(write_then_write_swapped(cma, TMX_SEND_FENCE, 8), 0, "cma %d", cma);
        cr_assert_gt(write_then_write_swapped(cma, 0, 8), 0, "cma %d: never overtaken", cma);
    }
}

/* Writes into device memory (mem_alloc) are the initiator's stores, through the queue or
 * straight from post_send, and keep each mode's promise exactly as the other paths do. */
Test(soft_order, dm_writes_keep_each_mode, .timeout = 60)
{
    int torn;

    for (int at = AT_DM; at <= AT_DM_UNSIGNALED; at++) {
        for (int cma = 0; cma < 2; cma++) {
            cr_assert_eq(writes_seen_at(at, cma, TMX_SOFT_DIO_WHOLE, 0, TMX_WR_RDMA_WRITE, &torn),
                         0, "at %d", at);
            cr_assert_eq(torn, 0);
            cr_assert_eq(writes_seen_at(at, cma, TMX_SOFT_DIO_ALIGNED128, 0, TMX_WR_RDMA_WRITE,
                                        &torn),
                         4, "at %d", at);
            cr_assert_eq(torn, 0, "a 128-byte block showed its end before the rest");
            cr_assert_eq(writes_seen_at(at, cma, TMX_SOFT_DIO_NONE, 0, TMX_WR_RDMA_WRITE, &torn),
                         5, "at %d", at);
            cr_assert_eq(torn, 1);
            /* OOO on: no promise, whatever the device's answer would be */
            cr_assert_eq(writes_seen_at(at, cma, TMX_SOFT_DIO_WHOLE, 1, TMX_WR_RDMA_WRITE, &torn),
                         5, "at %d", at);
        }
        cr_assert_eq(writes_seen_at(AT_DM, 0, TMX_SOFT_DIO_WHOLE, 0, TMX_WR_RDMA_WRITE_WITH_IMM,
                                    &torn),
                     0);
        cr_assert(writes_seen_at(AT_DM, 0, TMX_SOFT_DIO_ALIGNED128, 0,
                                 TMX_WR_RDMA_WRITE_WITH_IMM, &torn) >= 3);
        cr_assert_eq(torn, 0);
    }
}

/* Without OOO the same sequences stay in order. */
Test(soft_order, ooo_offered_not_enabled_answers_whole, .timeout = 60)
{
    tmx_config_t cfg;
    loop_t       l;

    cfg_init(&cfg, 1, TMX_SOFT_DIO_WHOLE);
    cfg.soft_ooo = 1; /* offered, not enabled */
    loop_open(&l, &cfg, 0);
    cr_assert_eq(l.ops->qp_data_in_order(l.qp, TMX_WR_RDMA_WRITE), whole_bits);
    loop_close(&l);
}

/* The planner's fence for a FIN posted right behind its READ (Read then Send: F) keeps the
 * data safe on the OOO soft device; TMX_FENCE_DROP, which removes it, shows as corruption. */
Test(soft_order, planner_fence_needed_and_drop_corrupts, .timeout = 60)
{
    tmx_config_t cfg;
    unsigned     with, without;

    cfg_init(&cfg, 1, TMX_SOFT_DIO_WHOLE);
    with = tmx_fence_flags(1, TMX_FENCE_OP_READ, TMX_WR_SEND, cfg.fence_drop);
    cr_assert_eq(with, TMX_SEND_FENCE);
    cr_assert_eq(tmx_config_set(&cfg, "FENCE_DROP", "yes"), TMX_OK);
    without = tmx_fence_flags(1, TMX_FENCE_OP_READ, TMX_WR_SEND, cfg.fence_drop);
    cr_assert_eq(without, 0);
    for (int cma = 0; cma < 2; cma++) {
        cr_assert_eq(read_then_send_corrupt(cma, with, 8), 0);
        cr_assert_gt(read_then_send_corrupt(cma, without, 8), 0);
    }
}
