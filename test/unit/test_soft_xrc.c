/*
 * Unit tests of the soft device's XRC (prov.h, "XRC"; src/prov/soft/soft_xrc.c), through the
 * provider contract only: domains, XRC SRQs and their numbers, target QPs (created, opened by
 * number, destroyed by the last holder), initiators whose work requests land in the SRQ they
 * name (and nowhere else), the death of processes on either side, and the device's counts.
 *
 * The multi-process tests fork three processes: S on node "a" sends; R1 and R2 on node "b"
 * receive. R1 creates the target QP of S's initiator; R2 has none and still receives through
 * it, which is what XRC is for.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "prov/prov.h"
#include "util/config.h"
#include "util/time.h"

extern const tmx_prov_t tmx_soft_prov;
void tmx_soft_xrc_sweep(void); /* soft.h: tables whose users all died */

#define CHECK(_c)                                                                                  \
    do {                                                                                           \
        if (!(_c)) {                                                                               \
            fprintf(stderr, "[pid %d] check failed at line %d: %s\n", (int)getpid(), __LINE__,     \
                    #_c);                                                                          \
            return __LINE__;                                                                       \
        }                                                                                          \
    } while (0)
#define TRY(_x)                                                                                    \
    do {                                                                                           \
        int _r = (_x);                                                                             \
        if (_r != 0) {                                                                             \
            return _r;                                                                             \
        }                                                                                          \
    } while (0)

enum { S = 0, R1 = 1, R2 = 2, NPROC = 3 };

#define NRECV   512
#define BUFSZ   (96 * 1024)
#define STASH   4096
#define KEY     7

typedef struct shared {
    _Atomic int stage[NPROC];
    size_t      ini_len;
    uint8_t     ini[TMX_QP_ADDR_MAX]; /* S's initiator */
    size_t      tgt_len;
    uint8_t     tgt[TMX_QP_ADDR_MAX]; /* R1's target QP for it */
    uint32_t    tgt_qpn;
    uint32_t    srqn[NPROC];
    uint32_t    other_srqn;           /* R1's SRQ in another domain */
    uint64_t    raddr[NPROC];
    uint32_t    rkey[NPROC];
    uint32_t    got[NPROC];
    char        node_a[64], node_b[64];
    char        table_a[64], table_b[64]; /* the names of the nodes' tables */
    int         r2_on_a;              /* impostor test: process 2 is on node a, beside S */
} shared_t;

typedef struct proc {
    int                   me;
    shared_t             *sh;
    tmx_config_t          cfg;
    const tmx_prov_ops_t *ops;
    tmx_dev_t            *dev;
    tmx_pd_t             *pd;
    tmx_cq_t             *cq;
    tmx_xrcd_t           *xrcd;
    tmx_srq_t            *srq;
    tmx_qp_t             *qp;  /* S: the initiator; R1: the target QP; R2: an opened handle */
    uint8_t              *buf;
    tmx_mr_t             *mr;
    tmx_wc_t              stash[STASH];
    int                   nstash;
} proc_t;

static void cfg_init(tmx_config_t *cfg, const char *node)
{
    cr_assert_eq(tmx_config_load(cfg), TMX_OK);
    cfg->soft_memfd       = -1;
    cfg->soft_cma         = -1;
    cfg->soft_xrc         = 1;
    cfg->soft_max_qps     = 16;
    cfg->soft_max_mrs     = 64;
    cfg->soft_ring_size   = 64 * 1024;
    cfg->soft_ring0_size  = 64 * 1024;
    cfg->soft_inbox_size  = 64 * 1024;
    cfg->soft_xrc_streams = 8;
    snprintf(cfg->node_id, sizeof(cfg->node_id), "%s", node);
}

static void poll_once(proc_t *p)
{
    int got = p->ops->cq_poll(p->cq, STASH - p->nstash > 32 ? 32 : STASH - p->nstash,
                              p->stash + p->nstash);
    if (got > 0) {
        p->nstash += got;
    }
}

/* The next completion, within a few seconds. */
static int next_wc(proc_t *p, tmx_wc_t *wc)
{
    double end = tmx_time_sec() + 5;

    while (p->nstash == 0) {
        poll_once(p);
        if (tmx_time_sec() > end) {
            return -1;
        }
    }
    *wc = p->stash[0];
    memmove(p->stash, p->stash + 1, (size_t)(p->nstash - 1) * sizeof(*wc));
    p->nstash--;
    return 0;
}

/* Everyone at stage s (polling meanwhile). */
static int barrier(proc_t *p, int s)
{
    double end = tmx_time_sec() + 10;

    atomic_store(&p->sh->stage[p->me], s);
    for (int i = 0; i < NPROC; i++) {
        while (atomic_load(&p->sh->stage[i]) < s) {
            poll_once(p);
            if (tmx_time_sec() > end) {
                fprintf(stderr, "[pid %d] barrier %d: process %d is at %d\n", (int)getpid(), s,
                        i, atomic_load(&p->sh->stage[i]));
                return -1;
            }
        }
    }
    return 0;
}

static int proc_open(proc_t *p, shared_t *sh, int me)
{
    tmx_dev_t           *devs[1];
    int                  num = 0;
    tmx_xrcd_init_attr_t xa  = {.key = KEY};

    memset(p, 0, sizeof(*p));
    p->me  = me;
    p->sh  = sh;
    p->ops = tmx_soft_prov.ops;
    cfg_init(&p->cfg, me == S || (me == R2 && sh->r2_on_a) ? sh->node_a : sh->node_b);
    CHECK(p->ops->dev_open(&tmx_soft_prov, &p->cfg, devs, 1, &num) == TMX_OK && num == 1);
    p->dev = devs[0];
    CHECK(p->dev->attr.caps & TMX_DEV_CAP_XRC);
    CHECK(p->ops->pd_alloc(p->dev, &p->pd) == TMX_OK);
    CHECK(p->ops->cq_create(p->dev, 4096, &p->cq) == TMX_OK);
    CHECK(p->ops->xrcd_open(p->dev, &xa, &p->xrcd) == TMX_OK);
    CHECK(p->xrcd->key == KEY);
    p->buf = calloc(1, BUFSZ * 2);
    CHECK(p->buf != NULL);
    CHECK(p->ops->mr_reg(p->pd, p->buf, BUFSZ * 2,
                         TMX_ACCESS_LOCAL_WRITE | TMX_ACCESS_REMOTE_READ |
                             TMX_ACCESS_REMOTE_WRITE,
                         &p->mr) == TMX_OK);
    sh->raddr[me] = (uintptr_t)p->buf;
    sh->rkey[me]  = p->mr->rkey;
    return 0;
}

static void proc_close(proc_t *p)
{
    if (p->qp != NULL) {
        p->ops->qp_destroy(p->qp);
    }
    if (p->srq != NULL) {
        p->ops->srq_destroy(p->srq);
    }
    if (p->mr != NULL) {
        p->ops->mr_dereg(p->mr);
    }
    if (p->xrcd != NULL) {
        p->ops->xrcd_close(p->xrcd);
    }
    if (p->cq != NULL) {
        p->ops->cq_destroy(p->cq);
    }
    if (p->pd != NULL) {
        p->ops->pd_free(p->pd);
    }
    if (p->dev != NULL) {
        p->ops->dev_close(p->dev);
    }
    free(p->buf);
}

/* A receiver's XRC SRQ with NRECV receives of 128 bytes each (ids 0..NRECV-1). */
static int make_srq(proc_t *p)
{
    tmx_srq_init_attr_t sa;

    memset(&sa, 0, sizeof(sa));
    sa.type    = TMX_SRQT_XRC;
    sa.max_wr  = 2 * NRECV;
    sa.max_sge = 1;
    sa.cq      = p->cq;
    sa.xrcd    = p->xrcd;
    CHECK(p->ops->srq_create(p->pd, &sa, &p->srq) == TMX_OK);
    CHECK(p->ops->srq_get_num(p->srq, &p->sh->srqn[p->me]) == TMX_OK);
    CHECK(p->sh->srqn[p->me] != 0);
    for (uint64_t i = 0; i < NRECV; i++) {
        tmx_sge_t      sge = {.addr   = (uintptr_t)p->buf + BUFSZ + i * 128,
                              .length = 128,
                              .lkey   = p->mr->lkey};
        tmx_recv_wr_t  wr  = {.wr_id = i, .sg_list = &sge, .num_sge = 1};
        tmx_recv_wr_t *bad;

        CHECK(p->ops->srq_post_recv(p->srq, &wr, &bad) == TMX_OK);
    }
    return 0;
}

static int xsend(proc_t *p, tmx_wr_opcode_t op, uint32_t srqn, const void *buf, uint32_t len,
                 unsigned flags, uint64_t id, uint32_t imm, uint64_t raddr, uint32_t rkey)
{
    tmx_sge_t      sge = {.addr = (uintptr_t)buf, .length = len, .lkey = p->mr->lkey};
    tmx_send_wr_t  wr;
    tmx_send_wr_t *bad;
    double         end = tmx_time_sec() + 5;
    int            st;

    memset(&wr, 0, sizeof(wr));
    wr.wr_id            = id;
    wr.sg_list          = &sge;
    wr.num_sge          = 1;
    wr.opcode           = op;
    wr.send_flags       = flags;
    wr.imm_data         = imm;
    wr.remote_srqn      = srqn;
    wr.rdma.remote_addr = raddr;
    wr.rdma.rkey        = rkey;
    while ((st = p->ops->post_send(p->qp, &wr, &bad)) == TMX_ERR_NO_RESOURCE &&
           tmx_time_sec() < end) {
        poll_once(p);
    }
    return st;
}

/* ---------------------------------------------------------------- the objects, one process */

Test(soft_xrc, off_by_default)
{
    tmx_config_t        cfg;
    tmx_dev_t          *devs[1];
    tmx_xrcd_t         *xrcd = NULL;
    tmx_dev_stats_t     st;
    int                 num = 0;
    const tmx_prov_ops_t *ops = tmx_soft_prov.ops;

    cr_assert_eq(tmx_config_load(&cfg), TMX_OK);
    cfg.soft_max_qps = 8;
    cfg.soft_xrc     = 0;
    cr_assert_eq(ops->dev_open(&tmx_soft_prov, &cfg, devs, 1, &num), TMX_OK);
    cr_assert(!(devs[0]->attr.caps & TMX_DEV_CAP_XRC));
    cr_assert_eq(ops->xrcd_open(devs[0], NULL, &xrcd), TMX_ERR_UNSUPPORTED);
    cr_assert_eq(ops->dev_query_stats(devs[0], &st), TMX_OK);
    cr_assert_eq(st.xrcds + st.srqs_xrc + st.qps_xrc_ini + st.qps_xrc_tgt, 0);
    ops->dev_close(devs[0]);
    /* and without cross-memory attach there is none either: XRC RDMA needs it */
    cfg.soft_xrc = 1;
    cfg.soft_cma = 0;
    cr_assert_eq(ops->dev_open(&tmx_soft_prov, &cfg, devs, 1, &num), TMX_OK);
    cr_assert(!(devs[0]->attr.caps & TMX_DEV_CAP_XRC));
    ops->dev_close(devs[0]);
}

static int objects_role(proc_t *p, shared_t *sh)
{
    tmx_srq_init_attr_t sa;
    tmx_qp_init_attr_t  qa;
    tmx_qp_open_attr_t  oa;
    tmx_qp_attr_t       mod;
    tmx_dev_stats_t     st;
    tmx_srq_t          *srq2 = NULL, *basic = NULL;
    tmx_qp_t           *tgt = NULL, *opened = NULL, *ini = NULL, *bad = NULL;
    tmx_xrcd_t         *other = NULL;
    tmx_xrcd_init_attr_t xa = {.key = KEY + 1};
    uint32_t            n1 = 0, n2 = 0;
    uint8_t             blob[TMX_QP_ADDR_MAX];
    size_t              blen = sizeof(blob);

    TRY(proc_open(p, sh, S));
    CHECK(p->ops->dev_query_stats(p->dev, &st) == TMX_OK);
    CHECK(st.xrcds == 1 && st.cqs == 1 && st.srqs == 0);
    TRY(make_srq(p));
    memset(&sa, 0, sizeof(sa));
    sa.type   = TMX_SRQT_XRC;
    sa.max_wr = 16;
    sa.cq     = p->cq;
    CHECK(p->ops->srq_create(p->pd, &sa, &srq2) == TMX_ERR_INVALID_PARAM); /* no domain */
    CHECK(p->ops->xrcd_open(p->dev, &xa, &other) == TMX_OK);
    sa.xrcd = other;
    CHECK(p->ops->srq_create(p->pd, &sa, &srq2) == TMX_OK);
    CHECK(p->ops->srq_get_num(p->srq, &n1) == TMX_OK && p->ops->srq_get_num(srq2, &n2) == TMX_OK);
    CHECK(n1 != 0 && n2 != 0 && n1 != n2);
    sa.type = TMX_SRQT_BASIC;
    sa.xrcd = NULL;
    CHECK(p->ops->srq_create(p->pd, &sa, &basic) == TMX_OK);
    CHECK(p->ops->srq_get_num(basic, &n2) == TMX_ERR_INVALID_PARAM); /* only XRC SRQs */
    /* target QP: the domain's; opened by number in the same domain only */
    memset(&qa, 0, sizeof(qa));
    qa.type    = TMX_QPT_XRC_TGT;
    qa.send_cq = p->cq;
    CHECK(p->ops->qp_create(p->pd, &qa, &tgt) == TMX_ERR_INVALID_PARAM); /* no domain */
    qa.xrcd = p->xrcd;
    CHECK(p->ops->qp_create(p->pd, &qa, &tgt) == TMX_OK);
    CHECK(tgt->type == TMX_QPT_XRC_TGT && tgt->qp_num != 0);
    memset(&oa, 0, sizeof(oa));
    oa.xrcd    = other;
    oa.qp_num  = tgt->qp_num;
    oa.send_cq = p->cq;
    CHECK(p->ops->qp_open(p->pd, &oa, &opened) == TMX_ERR_INVALID_PARAM);
    oa.xrcd = p->xrcd;
    oa.qp_num ^= 1;
    CHECK(p->ops->qp_open(p->pd, &oa, &opened) == TMX_ERR_INVALID_PARAM);
    oa.qp_num ^= 1;
    CHECK(p->ops->qp_open(p->pd, &oa, &opened) == TMX_OK);
    CHECK(opened->qp_num == tgt->qp_num);
    /* an initiator: RTR needs a target's blob; a bad one is refused */
    memset(&qa, 0, sizeof(qa));
    qa.type        = TMX_QPT_XRC_INI;
    qa.send_cq     = p->cq;
    qa.recv_cq     = p->cq;
    qa.max_send_wr = 64;
    qa.srq         = p->srq;
    CHECK(p->ops->qp_create(p->pd, &qa, &bad) == TMX_ERR_INVALID_PARAM); /* no receive side */
    qa.srq = NULL;
    CHECK(p->ops->qp_create(p->pd, &qa, &ini) == TMX_OK);
    memset(&mod, 0, sizeof(mod));
    mod.state = TMX_QPS_INIT;
    CHECK(p->ops->qp_modify(ini, &mod, TMX_QP_ATTR_STATE) == TMX_OK);
    CHECK(p->ops->qp_modify(tgt, &mod, TMX_QP_ATTR_STATE) == TMX_OK);
    CHECK(p->ops->qp_get_addr(tgt, blob, &blen) == TMX_OK);
    blob[8] ^= 1; /* another qp number */
    mod.state           = TMX_QPS_RTR;
    mod.remote_addr     = blob;
    mod.remote_addr_len = blen;
    CHECK(p->ops->qp_modify(ini, &mod, TMX_QP_ATTR_STATE | TMX_QP_ATTR_REMOTE) ==
          TMX_ERR_INVALID_ADDR);
    blob[8] ^= 1;
    CHECK(p->ops->qp_modify(ini, &mod, TMX_QP_ATTR_STATE | TMX_QP_ATTR_REMOTE) == TMX_OK);
    CHECK(p->ops->dev_query_stats(p->dev, &st) == TMX_OK);
    CHECK(st.xrcds == 2 && st.srqs == 3 && st.srqs_xrc == 2 && st.qps_xrc_tgt == 1 &&
          st.xrc_tgt_open == 1 && st.qps_xrc_ini == 1 && st.qps_rc == 0);
    /* the last holder's destroy ends the target QP: it can no longer be opened */
    oa.qp_num = tgt->qp_num;
    p->ops->qp_destroy(tgt);
    CHECK(p->ops->dev_query_stats(p->dev, &st) == TMX_OK && st.qps_xrc_tgt == 0);
    p->ops->qp_destroy(opened);
    CHECK(p->ops->qp_open(p->pd, &oa, &opened) == TMX_ERR_INVALID_PARAM);
    p->ops->qp_destroy(ini);
    p->ops->srq_destroy(srq2);
    p->ops->srq_destroy(basic);
    p->ops->xrcd_close(other);
    CHECK(p->ops->dev_query_stats(p->dev, &st) == TMX_OK);
    CHECK(st.xrcds == 1 && st.srqs == 1 && st.srqs_xrc == 1 && st.qps_xrc_tgt == 0 &&
          st.xrc_tgt_open == 0 && st.qps_xrc_ini == 0);
    proc_close(p);
    return 0;
}

Test(soft_xrc, objects)
{
    shared_t *sh = calloc(1, sizeof(*sh));
    proc_t   *p  = calloc(1, sizeof(*p));
    int       rc;

    cr_assert(sh != NULL && p != NULL);
    snprintf(sh->node_a, sizeof(sh->node_a), "xrc-objects-%d", (int)getpid());
    rc = objects_role(p, sh);
    cr_assert_eq(rc, 0, "failed at line %d", rc);
    free(p);
    free(sh);
}

/* ---------------------------------------------------------------- S, R1, R2 */

/* The name of our node's table in /dev/shm, from a target QP's blob (its node hash is at
 * offset 16: magic, version, len, qpn, gen come first). */
static int table_name(proc_t *p, char *buf, size_t len)
{
    tmx_qp_init_attr_t qa;
    tmx_qp_t          *tgt = NULL;
    uint8_t            blob[TMX_QP_ADDR_MAX];
    size_t             blen = sizeof(blob);
    uint64_t           hash;

    memset(&qa, 0, sizeof(qa));
    qa.type    = TMX_QPT_XRC_TGT;
    qa.send_cq = p->cq;
    qa.xrcd    = p->xrcd;
    CHECK(p->ops->qp_create(p->pd, &qa, &tgt) == TMX_OK);
    CHECK(p->ops->qp_get_addr(tgt, blob, &blen) == TMX_OK && blen >= 24);
    memcpy(&hash, blob + 16, sizeof(hash));
    p->ops->qp_destroy(tgt);
    snprintf(buf, len, "/dev/shm/tmx-xrc-%u-%016llx", (unsigned)getuid(),
             (unsigned long long)hash);
    return 0;
}

/* R1 and R2: an SRQ each (R1 one more in another domain, with a receive posted so that a
 * message put there would show), R1 the target QP of S's initiator, R2 a handle to it by
 * number. */
static int recv_setup(proc_t *p, shared_t *sh, int me)
{
    tmx_qp_init_attr_t qa;
    tmx_qp_attr_t      mod;

    TRY(proc_open(p, sh, me));
    TRY(make_srq(p));
    if (me == R1) {
        tmx_xrcd_init_attr_t xa  = {.key = KEY + 1};
        tmx_xrcd_t          *x2  = NULL;
        tmx_srq_t           *s2  = NULL;
        tmx_srq_init_attr_t  sa  = {.type = TMX_SRQT_XRC, .max_wr = 16, .cq = p->cq};
        tmx_sge_t            sge = {.addr = (uintptr_t)p->buf + 8192, .length = 128,
                                    .lkey = p->mr->lkey};
        tmx_recv_wr_t        wr  = {.wr_id = 999, .sg_list = &sge, .num_sge = 1};
        tmx_recv_wr_t       *bad;

        /* kept for the life of the process: an SRQ of node b in another domain */
        CHECK(p->ops->xrcd_open(p->dev, &xa, &x2) == TMX_OK);
        sa.xrcd = x2;
        CHECK(p->ops->srq_create(p->pd, &sa, &s2) == TMX_OK);
        CHECK(p->ops->srq_get_num(s2, &sh->other_srqn) == TMX_OK);
        CHECK(p->ops->srq_post_recv(s2, &wr, &bad) == TMX_OK);
    }
    CHECK(barrier(p, 1) == 0); /* S's initiator blob is there */
    if (me == R1) {
        memset(&qa, 0, sizeof(qa));
        qa.type    = TMX_QPT_XRC_TGT;
        qa.send_cq = p->cq;
        qa.xrcd    = p->xrcd;
        CHECK(p->ops->qp_create(p->pd, &qa, &p->qp) == TMX_OK);
        memset(&mod, 0, sizeof(mod));
        mod.state = TMX_QPS_INIT;
        CHECK(p->ops->qp_modify(p->qp, &mod, TMX_QP_ATTR_STATE) == TMX_OK);
        mod.state           = TMX_QPS_RTR;
        mod.remote_addr     = sh->ini;
        mod.remote_addr_len = sh->ini_len;
        CHECK(p->ops->qp_modify(p->qp, &mod, TMX_QP_ATTR_STATE | TMX_QP_ATTR_REMOTE) ==
              TMX_OK);
        sh->tgt_len = sizeof(sh->tgt);
        CHECK(p->ops->qp_get_addr(p->qp, sh->tgt, &sh->tgt_len) == TMX_OK);
        sh->tgt_qpn = p->qp->qp_num;
        TRY(table_name(p, sh->table_b, sizeof(sh->table_b)));
    }
    CHECK(barrier(p, 2) == 0); /* the target QP exists */
    if (me == R2) {
        tmx_qp_open_attr_t oa = {.xrcd = p->xrcd, .qp_num = sh->tgt_qpn, .send_cq = p->cq};

        CHECK(p->ops->qp_open(p->pd, &oa, &p->qp) == TMX_OK);
    }
    return 0;
}

/* S's initiator to RTS toward R1's target QP (stages 1 and 2 on the first call). */
static int ini_connect(proc_t *p, shared_t *sh)
{
    tmx_qp_attr_t mod;

    memset(&mod, 0, sizeof(mod));
    mod.state           = TMX_QPS_RTR;
    mod.remote_addr     = sh->tgt;
    mod.remote_addr_len = sh->tgt_len;
    CHECK(p->ops->qp_modify(p->qp, &mod, TMX_QP_ATTR_STATE | TMX_QP_ATTR_REMOTE) == TMX_OK);
    mod.state = TMX_QPS_RTS;
    CHECK(p->ops->qp_modify(p->qp, &mod, TMX_QP_ATTR_STATE) == TMX_OK);
    return 0;
}

static int send_setup(proc_t *p, shared_t *sh)
{
    tmx_qp_init_attr_t qa;
    tmx_qp_attr_t      mod;

    TRY(proc_open(p, sh, S));
    TRY(table_name(p, sh->table_a, sizeof(sh->table_a)));
    memset(&qa, 0, sizeof(qa));
    qa.type        = TMX_QPT_XRC_INI;
    qa.send_cq     = p->cq;
    qa.recv_cq     = p->cq;
    qa.max_send_wr = 256;
    qa.max_inline  = 256;
    CHECK(p->ops->qp_create(p->pd, &qa, &p->qp) == TMX_OK);
    memset(&mod, 0, sizeof(mod));
    mod.state = TMX_QPS_INIT;
    CHECK(p->ops->qp_modify(p->qp, &mod, TMX_QP_ATTR_STATE) == TMX_OK);
    sh->ini_len = sizeof(sh->ini);
    CHECK(p->ops->qp_get_addr(p->qp, sh->ini, &sh->ini_len) == TMX_OK);
    CHECK(barrier(p, 1) == 0);
    CHECK(barrier(p, 2) == 0);
    return ini_connect(p, sh);
}

#define MSGS 300 /* per receiver: more than a fast ring is earned by, laps of the 64 KiB rings */

/* A receiver takes MSGS messages of S, in order, each with (seq, receiver) in its first bytes
 * and in its imm, through the target QP's number. */
static int recv_msgs(proc_t *p)
{
    tmx_wc_t wc;

    for (uint32_t i = 0; i < MSGS; i++) {
        const uint8_t *b = p->buf + BUFSZ + i * 128;
        uint32_t       seq;

        CHECK(next_wc(p, &wc) == 0);
        CHECK(wc.status == TMX_WC_SUCCESS && wc.opcode == TMX_WC_RECV);
        CHECK(wc.qp_num == p->sh->tgt_qpn);
        CHECK(wc.wr_id == i && (wc.wc_flags & TMX_WC_WITH_IMM));
        CHECK(wc.imm_data == (i | (uint32_t)p->me << 24));
        CHECK(wc.byte_len == 8 + i % 100);
        memcpy(&seq, b, sizeof(seq));
        CHECK(seq == i && b[4] == p->me);
        for (uint32_t k = 8; k < wc.byte_len; k++) {
            CHECK(b[k] == (uint8_t)(k + i));
        }
    }
    return 0;
}

static int send_msgs(proc_t *p, shared_t *sh)
{
    uint8_t msg[128];

    for (uint32_t i = 0; i < MSGS; i++) {
        for (int r = R1; r <= R2; r++) {
            memcpy(msg, &i, sizeof(i));
            msg[4] = (uint8_t)r;
            for (uint32_t k = 8; k < sizeof(msg); k++) {
                msg[k] = (uint8_t)(k + i);
            }
            CHECK(xsend(p, TMX_WR_SEND_WITH_IMM, sh->srqn[r], msg, 8 + i % 100,
                        TMX_SEND_INLINE, 0, i | (uint32_t)r << 24, 0, 0) == TMX_OK);
        }
    }
    return 0;
}

/* The next completion that is not a success of an unsignaled... (every one here is read) */
static int s_role(proc_t *p, shared_t *sh)
{
    tmx_dev_stats_t st;
    tmx_wc_t        wc;
    tmx_qp_attr_t   mod;
    uint8_t        *big;
    uint32_t        bad;
    int             failed = 0;
    double          end;

    TRY(send_setup(p, sh));
    big = p->buf;
    TRY(send_msgs(p, sh));
    /* a SEND of many records (above the ring's largest record), to R2 */
    for (uint32_t k = 0; k < 60000; k++) {
        big[k] = (uint8_t)(k * 13);
    }
    CHECK(xsend(p, TMX_WR_SEND, sh->srqn[R2], big, 60000, TMX_SEND_SIGNALED, 77, 0, 0, 0) ==
          TMX_OK);
    CHECK(next_wc(p, &wc) == 0);
    CHECK(wc.wr_id == 77 && wc.status == TMX_WC_SUCCESS && wc.qp_num == p->qp->qp_num);
    /* RDMA READ of R1's memory, named by its SRQ; a bad key is refused there */
    CHECK(barrier(p, 3) == 0);
    CHECK(xsend(p, TMX_WR_RDMA_READ, sh->srqn[R1], p->buf + 4096, 1000, TMX_SEND_SIGNALED, 78,
                0, sh->raddr[R1], sh->rkey[R1]) == TMX_OK);
    CHECK(next_wc(p, &wc) == 0);
    CHECK(wc.wr_id == 78 && wc.status == TMX_WC_SUCCESS && wc.opcode == TMX_WC_RDMA_READ);
    for (uint32_t k = 0; k < 1000; k++) {
        CHECK(p->buf[4096 + k] == (uint8_t)(k ^ 0x5a));
    }
    CHECK(xsend(p, TMX_WR_RDMA_READ, sh->srqn[R1], p->buf + 4096, 1000, TMX_SEND_SIGNALED, 79,
                0, sh->raddr[R1], sh->rkey[R1] ^ 0x100) == TMX_OK);
    CHECK(next_wc(p, &wc) == 0);
    CHECK(wc.wr_id == 79 && wc.status == TMX_WC_REM_ACCESS_ERR);
    CHECK(p->ops->dev_query_stats(p->dev, &st) == TMX_OK);
    CHECK(st.qps_xrc_ini == 1 && st.qps_xrc_tgt == 0 && st.xrc_routes == 2 && st.qps_rc == 0);
    /* R2 exits: sends to it fail, for it alone (src_qp names it) */
    CHECK(barrier(p, 4) == 0);
    end = tmx_time_sec() + 5;
    while (!failed && tmx_time_sec() < end) {
        CHECK(xsend(p, TMX_WR_SEND, sh->srqn[R2], big, 8, TMX_SEND_SIGNALED, 80, 0, 0, 0) ==
              TMX_OK);
        while (next_wc(p, &wc) == 0) {
            if (wc.status != TMX_WC_SUCCESS) {
                CHECK(wc.src_qp == sh->srqn[R2]);
                CHECK(wc.status == TMX_WC_RETRY_EXC_ERR || wc.status == TMX_WC_WR_FLUSH_ERR);
                failed = 1;
            }
            if (wc.wr_id == 80) {
                break;
            }
        }
        for (int k = 0; k < 300; k++) {
            poll_once(p); /* the device checks its peers' lives every 256th poll */
        }
        usleep(10000);
    }
    CHECK(failed);
    CHECK(p->qp->state == TMX_QPS_RTS); /* the initiator itself lives on */
    p->nstash = 0;                      /* later async errors of the route to R2 */
    CHECK(xsend(p, TMX_WR_SEND, sh->srqn[R1], big, 8, TMX_SEND_SIGNALED, 81, 0, 0, 0) ==
          TMX_OK);
    do {
        CHECK(next_wc(p, &wc) == 0);
    } while (wc.wr_id != 81);
    CHECK(wc.status == TMX_WC_SUCCESS);
    CHECK(barrier(p, 5) == 0);
    /* a number that names no SRQ: an error, the initiator to error (once), nothing at R1 */
    bad = sh->srqn[R1] + (1u << 16);
    CHECK(xsend(p, TMX_WR_SEND, bad, big, 8, 0, 82, 0, 0, 0) == TMX_OK);
    CHECK(next_wc(p, &wc) == 0);
    CHECK(wc.wr_id == 82 && wc.status == TMX_WC_REM_INV_REQ_ERR && wc.src_qp == bad);
    CHECK(next_wc(p, &wc) == 0);
    CHECK(wc.wr_id == TMX_WR_ID_ASYNC_ERROR && wc.qp_num == p->qp->qp_num && wc.src_qp == 0);
    CHECK(p->qp->state == TMX_QPS_ERR);
    CHECK(xsend(p, TMX_WR_SEND, sh->srqn[R1], big, 8, 0, 83, 0, 0, 0) == TMX_OK);
    CHECK(next_wc(p, &wc) == 0);
    CHECK(wc.wr_id == 83 && wc.status == TMX_WC_WR_FLUSH_ERR);
    /* back through RESET, connected again: R1 is reached; then a number of an SRQ of node b
     * in another domain is refused the same way */
    memset(&mod, 0, sizeof(mod));
    mod.state = TMX_QPS_RESET;
    CHECK(p->ops->qp_modify(p->qp, &mod, TMX_QP_ATTR_STATE) == TMX_OK);
    mod.state = TMX_QPS_INIT;
    CHECK(p->ops->qp_modify(p->qp, &mod, TMX_QP_ATTR_STATE) == TMX_OK);
    TRY(ini_connect(p, sh));
    CHECK(xsend(p, TMX_WR_SEND, sh->srqn[R1], big, 8, TMX_SEND_SIGNALED, 84, 0, 0, 0) ==
          TMX_OK);
    CHECK(next_wc(p, &wc) == 0);
    CHECK(wc.wr_id == 84 && wc.status == TMX_WC_SUCCESS);
    CHECK(xsend(p, TMX_WR_SEND, sh->other_srqn, big, 8, 0, 85, 0, 0, 0) == TMX_OK);
    CHECK(next_wc(p, &wc) == 0);
    CHECK(wc.wr_id == 85 && wc.status == TMX_WC_REM_INV_REQ_ERR && wc.src_qp == sh->other_srqn);
    CHECK(barrier(p, 6) == 0);
    return 0; /* exits without closing: R1's target QP sees it die */
}

static int r_role(proc_t *p, shared_t *sh, int me)
{
    tmx_dev_stats_t st;
    tmx_wc_t        wc;
    double          end;

    TRY(recv_setup(p, sh, me));
    TRY(recv_msgs(p));
    if (me == R2) {
        CHECK(next_wc(p, &wc) == 0); /* the 60000 bytes: too long for 128 */
        CHECK(wc.status == TMX_WC_LOC_LEN_ERR && wc.byte_len == 60000 && wc.wr_id == MSGS);
    }
    for (uint32_t k = 0; k < 1000; k++) {
        p->buf[k] = (uint8_t)(k ^ 0x5a);
    }
    CHECK(p->ops->dev_query_stats(p->dev, &st) == TMX_OK);
    CHECK(st.qps_xrc_tgt == (me == R1 ? 1u : 0u) && st.xrc_tgt_open == (me == R2 ? 1u : 0u));
    CHECK(st.xrc_streams == 1 && st.qps_xrc_ini == 0 && st.qps_rc == 0);
    CHECK(barrier(p, 3) == 0);
    if (me == R2) {
        atomic_store(&sh->stage[R2], 100); /* the others' barriers no longer wait for it */
        _exit(0);                           /* dies with everything open */
    }
    CHECK(barrier(p, 4) == 0);
    CHECK(next_wc(p, &wc) == 0); /* S's send 81 */
    CHECK(wc.status == TMX_WC_SUCCESS && wc.qp_num == sh->tgt_qpn);
    CHECK(barrier(p, 5) == 0);
    CHECK(next_wc(p, &wc) == 0); /* 84, after the reconnect */
    CHECK(wc.status == TMX_WC_SUCCESS && wc.qp_num == sh->tgt_qpn && wc.byte_len == 8);
    CHECK(barrier(p, 6) == 0);
    /* nothing else came: not 82, 83 nor 85 (the receive in the other domain included) */
    for (int k = 0; k < 100; k++) {
        poll_once(p);
    }
    CHECK(p->nstash == 0);
    /* S dies: our target QP (and the stream it held) says so */
    end = tmx_time_sec() + 5;
    while (p->nstash == 0 && tmx_time_sec() < end) {
        poll_once(p);
        usleep(1000);
    }
    CHECK(next_wc(p, &wc) == 0);
    CHECK(wc.wr_id == TMX_WR_ID_ASYNC_ERROR && wc.qp_num == sh->tgt_qpn);
    CHECK(wc.status == TMX_WC_RETRY_EXC_ERR);
    return 0;
}

Test(soft_xrc, one_initiator_two_receivers, .timeout = 60)
{
    shared_t *sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                        -1, 0);
    pid_t     pid[NPROC];
    int       status;

    cr_assert(sh != MAP_FAILED);
    memset(sh, 0, sizeof(*sh));
    snprintf(sh->node_a, sizeof(sh->node_a), "xrc-a-%d", (int)getpid());
    snprintf(sh->node_b, sizeof(sh->node_b), "xrc-b-%d", (int)getpid());
    fflush(NULL);
    for (int r = 0; r < NPROC; r++) {
        pid[r] = fork();
        cr_assert(pid[r] >= 0);
        if (pid[r] == 0) {
            proc_t *p = calloc(1, sizeof(*p));
            int     rc;

            alarm(40);
            rc = p == NULL ? __LINE__ : r == S ? s_role(p, sh) : r_role(p, sh, r);
            if (rc != 0) {
                fprintf(stderr, "process %d failed at line %d\n", r, rc);
                _exit(1);
            }
            if (r != S) {
                proc_close(p);
            }
            _exit(0);
        }
    }
    for (int r = 0; r < NPROC; r++) {
        cr_assert_eq(waitpid(pid[r], &status, 0), pid[r]);
        cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                  "process %d failed (status 0x%x, see stderr for the line)", r, status);
        if (!(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
            for (int k = 0; k < NPROC; k++) {
                kill(pid[k], SIGKILL);
            }
        }
    }
    /* node b's last user (R1) removed its table; node a's user died with it open: the sweep
     * of the next device that opens (this one's, or a test's running next to us) removes it */
    cr_expect(sh->table_b[0] != '\0' && access(sh->table_b, F_OK) != 0,
              "%s is still there", sh->table_b);
    cr_expect(sh->table_a[0] != '\0');
    tmx_soft_xrc_sweep();
    cr_expect(access(sh->table_a, F_OK) != 0, "%s is still there after the sweep", sh->table_a);
    munmap(sh, sizeof(*sh));
}

/* ---------------------------------------------------------------- a target's own initiator */

/*
 * A target QP takes messages from the initiator it is connected to only, as on hardware (the
 * connection's QP number and PSN). Process X of node a connects an initiator of its own to the
 * target QP that R (node b) made for S's initiator, and sends through it: R's device refuses
 * the stream (its route fails later), and nothing reaches R, whose completions would otherwise
 * name S's target and pass X's message for S's. S's own message arrives.
 */
enum { IMP_S = S, IMP_R = R1, IMP_X = R2 };

static int imp_ini(proc_t *p, shared_t *sh, int publish)
{
    tmx_qp_init_attr_t qa;
    tmx_qp_attr_t      mod;

    memset(&qa, 0, sizeof(qa));
    qa.type        = TMX_QPT_XRC_INI;
    qa.send_cq     = p->cq;
    qa.recv_cq     = p->cq;
    qa.max_send_wr = 64;
    qa.max_inline  = 256;
    CHECK(p->ops->qp_create(p->pd, &qa, &p->qp) == TMX_OK);
    memset(&mod, 0, sizeof(mod));
    mod.state = TMX_QPS_INIT;
    CHECK(p->ops->qp_modify(p->qp, &mod, TMX_QP_ATTR_STATE) == TMX_OK);
    if (publish) {
        sh->ini_len = sizeof(sh->ini);
        CHECK(p->ops->qp_get_addr(p->qp, sh->ini, &sh->ini_len) == TMX_OK);
    }
    return 0;
}

static int imp_role(proc_t *p, shared_t *sh, int me)
{
    tmx_wc_t wc;
    uint8_t  msg[16] = {0};
    double   end;

    TRY(proc_open(p, sh, me));
    if (me == IMP_R) {
        tmx_qp_init_attr_t qa;
        tmx_qp_attr_t      mod;

        TRY(make_srq(p));
        CHECK(barrier(p, 1) == 0); /* S's initiator blob is there */
        memset(&qa, 0, sizeof(qa));
        qa.type    = TMX_QPT_XRC_TGT;
        qa.send_cq = p->cq;
        qa.xrcd    = p->xrcd;
        CHECK(p->ops->qp_create(p->pd, &qa, &p->qp) == TMX_OK);
        memset(&mod, 0, sizeof(mod));
        mod.state = TMX_QPS_INIT;
        CHECK(p->ops->qp_modify(p->qp, &mod, TMX_QP_ATTR_STATE) == TMX_OK);
        mod.state           = TMX_QPS_RTR;
        mod.remote_addr     = sh->ini;
        mod.remote_addr_len = sh->ini_len;
        CHECK(p->ops->qp_modify(p->qp, &mod, TMX_QP_ATTR_STATE | TMX_QP_ATTR_REMOTE) ==
              TMX_OK);
        sh->tgt_len = sizeof(sh->tgt);
        CHECK(p->ops->qp_get_addr(p->qp, sh->tgt, &sh->tgt_len) == TMX_OK);
        sh->tgt_qpn = p->qp->qp_num;
        CHECK(barrier(p, 2) == 0);
        CHECK(next_wc(p, &wc) == 0); /* S's */
        CHECK(wc.status == TMX_WC_SUCCESS && wc.qp_num == sh->tgt_qpn && wc.imm_data == 1);
        CHECK(barrier(p, 3) == 0);
        CHECK(barrier(p, 4) == 0); /* X has sent, and seen its send fail */
        end = tmx_time_sec() + 0.5;
        while (tmx_time_sec() < end) {
            poll_once(p);
        }
        for (int i = 0; i < p->nstash; i++) {
            CHECK(!(p->stash[i].status == TMX_WC_SUCCESS && p->stash[i].imm_data == 2));
        }
        CHECK(barrier(p, 5) == 0);
        return 0;
    }
    TRY(imp_ini(p, sh, me == IMP_S));
    CHECK(barrier(p, 1) == 0);
    CHECK(barrier(p, 2) == 0); /* R's target for S's initiator exists */
    TRY(ini_connect(p, sh));   /* X too: to the target that is not its initiator's */
    if (me == IMP_S) {
        CHECK(xsend(p, TMX_WR_SEND_WITH_IMM, sh->srqn[IMP_R], msg, 8,
                    TMX_SEND_INLINE | TMX_SEND_SIGNALED, 1, 1, 0, 0) == TMX_OK);
        CHECK(next_wc(p, &wc) == 0);
        CHECK(wc.wr_id == 1 && wc.status == TMX_WC_SUCCESS);
        CHECK(barrier(p, 3) == 0);
        CHECK(barrier(p, 4) == 0);
        CHECK(barrier(p, 5) == 0);
        return 0;
    }
    CHECK(barrier(p, 3) == 0);
    CHECK(xsend(p, TMX_WR_SEND_WITH_IMM, sh->srqn[IMP_R], msg, 8,
                TMX_SEND_INLINE | TMX_SEND_SIGNALED, 2, 2, 0, 0) == TMX_OK);
    /* the record is written, so the send completes (the soft device, like a NAK arriving
     * later on hardware, fails the route afterwards): what counts is that R takes nothing */
    end = tmx_time_sec() + 5;
    do {
        CHECK(next_wc(p, &wc) == 0);
    } while (wc.wr_id != 2 && tmx_time_sec() < end);
    CHECK(wc.wr_id == 2);
    end = tmx_time_sec() + 0.3;
    while (tmx_time_sec() < end) {
        poll_once(p);
    }
    CHECK(barrier(p, 4) == 0);
    CHECK(barrier(p, 5) == 0);
    return 0;
}

Test(soft_xrc, target_takes_its_own_initiator_only, .timeout = 60)
{
    shared_t *sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                        -1, 0);
    pid_t     pid[NPROC];
    int       status;

    cr_assert(sh != MAP_FAILED);
    memset(sh, 0, sizeof(*sh));
    sh->r2_on_a = 1;
    snprintf(sh->node_a, sizeof(sh->node_a), "xrc-ia-%d", (int)getpid());
    snprintf(sh->node_b, sizeof(sh->node_b), "xrc-ib-%d", (int)getpid());
    fflush(NULL);
    for (int r = 0; r < NPROC; r++) {
        pid[r] = fork();
        cr_assert(pid[r] >= 0);
        if (pid[r] == 0) {
            proc_t *p = calloc(1, sizeof(*p));
            int     rc;

            alarm(40);
            rc = p == NULL ? __LINE__ : imp_role(p, sh, r);
            if (rc != 0) {
                fprintf(stderr, "process %d failed at line %d\n", r, rc);
                _exit(1);
            }
            proc_close(p);
            _exit(0);
        }
    }
    for (int r = 0; r < NPROC; r++) {
        cr_assert_eq(waitpid(pid[r], &status, 0), pid[r]);
        cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                  "process %d failed (status 0x%x, see stderr for the line)", r, status);
        if (!(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
            for (int k = 0; k < NPROC; k++) {
                kill(pid[k], SIGKILL);
            }
        }
    }
    munmap(sh, sizeof(*sh));
}
