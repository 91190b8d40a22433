/*
 * Unit tests of the soft device, shared-memory fabric, through the provider contract only.
 * Most tests fork: the parent is node 0, the child node 1; they exchange address blobs and
 * step through a test in shared anonymous memory. Each role returns 0 or the line of the
 * check that failed; the child alarms out so that nothing can hang.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
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

#define MAXQ      2
#define STASH     4096
#define CHECK(_c)                                                                                  \
    do {                                                                                           \
        if (!(_c)) {                                                                               \
            fprintf(stderr, "[pid %d] check failed at line %d: %s\n", (int)getpid(), __LINE__,     \
                    #_c);                                                                          \
            return __LINE__;                                                                       \
        }                                                                                          \
    } while (0)

typedef struct shared {
    _Atomic int stage[2];
    size_t      dev_len[2];
    uint8_t     dev[2][TMX_DEV_ADDR_MAX];
    size_t      qp_len[2][MAXQ];
    uint8_t     qp[2][MAXQ][TMX_QP_ADDR_MAX];
    uint32_t    ud_qpn[2];
    uint64_t    addr[2][4];
    uint32_t    rkey[2][4];
    int         pid[2];
} shared_t;

typedef struct node {
    int                   me;
    shared_t             *sh;
    tmx_config_t          cfg;
    const tmx_prov_ops_t *ops;
    tmx_dev_t            *dev;
    tmx_pd_t             *pd;
    tmx_cq_t             *cq;
    tmx_srq_t            *srq;
    tmx_qp_t             *qp[MAXQ];
    int                   nqp;
    tmx_wc_t              stash[STASH];
    int                   nstash;
} node_t;

static shared_t *shared_new(void)
{
    shared_t *sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                        -1, 0);
    cr_assert(sh != MAP_FAILED);
    memset(sh, 0, sizeof(*sh));
    return sh;
}

static void cfg_init(tmx_config_t *cfg, int cma, size_t ring)
{
    cr_assert_eq(tmx_config_load(cfg), TMX_OK);
    cfg->soft_cma       = cma;
    cfg->soft_ring_size = ring;
    cfg->soft_max_qps   = 8;
    cfg->soft_max_mrs   = 64;
}

/* Polls once; completions go to the stash. */
static void node_poll(node_t *n)
{
    int got = n->ops->cq_poll(n->cq, STASH - n->nstash > 16 ? 16 : STASH - n->nstash,
                              n->stash + n->nstash);
    if (got > 0) {
        n->nstash += got;
    }
}

/* Waits (polling) for the peer to reach stage s after announcing it ourselves. */
static int node_barrier(node_t *n, int s)
{
    double end = tmx_time_sec() + 10;

    atomic_store(&n->sh->stage[n->me], s);
    while (atomic_load(&n->sh->stage[1 - n->me]) < s) {
        node_poll(n);
        if (tmx_time_sec() > end) {
            return -1;
        }
    }
    return 0;
}

/* The next completion (any CQ entry), within a few seconds. */
static int node_wc(node_t *n, tmx_wc_t *wc)
{
    double end = tmx_time_sec() + 5;

    while (n->nstash == 0) {
        node_poll(n);
        if (tmx_time_sec() > end) {
            return -1;
        }
    }
    *wc = n->stash[0];
    memmove(n->stash, n->stash + 1, (size_t)(n->nstash - 1) * sizeof(*wc));
    n->nstash--;
    return 0;
}

static int node_open(node_t *n, shared_t *sh, int me, const tmx_config_t *cfg, int nqp,
                     int use_srq)
{
    tmx_dev_t         *devs[1];
    int                num = 0;
    tmx_qp_init_attr_t qa;
    tmx_qp_attr_t      mod;

    memset(n, 0, sizeof(*n));
    n->me  = me;
    n->sh  = sh;
    n->cfg = *cfg;
    n->ops = tmx_soft_prov.ops;
    n->nqp = nqp;
    CHECK(n->ops->dev_open(&tmx_soft_prov, &n->cfg, devs, 1, &num) == TMX_OK && num == 1);
    n->dev = devs[0];
    CHECK(n->ops->pd_alloc(n->dev, &n->pd) == TMX_OK);
    CHECK(n->ops->cq_create(n->dev, 256, &n->cq) == TMX_OK);
    if (use_srq) {
        tmx_srq_init_attr_t sa = {.type = TMX_SRQT_BASIC, .max_wr = 512, .max_sge = 1,
                                  .cq = n->cq};
        CHECK(n->ops->srq_create(n->pd, &sa, &n->srq) == TMX_OK);
    }
    for (int i = 0; i < nqp; i++) {
        memset(&qa, 0, sizeof(qa));
        qa.type        = TMX_QPT_RC;
        qa.send_cq     = n->cq;
        qa.recv_cq     = n->cq;
        qa.srq         = n->srq;
        qa.max_send_wr = 512;
        qa.max_recv_wr = 512;
        CHECK(n->ops->qp_create(n->pd, &qa, &n->qp[i]) == TMX_OK);
        memset(&mod, 0, sizeof(mod));
        mod.state = TMX_QPS_INIT;
        CHECK(n->ops->qp_modify(n->qp[i], &mod, TMX_QP_ATTR_STATE) == TMX_OK);
        sh->qp_len[me][i] = TMX_QP_ADDR_MAX;
        CHECK(n->ops->qp_get_addr(n->qp[i], sh->qp[me][i], &sh->qp_len[me][i]) == TMX_OK);
    }
    sh->dev_len[me] = TMX_DEV_ADDR_MAX;
    CHECK(n->ops->dev_get_addr(n->dev, sh->dev[me], &sh->dev_len[me]) == TMX_OK);
    CHECK(sh->dev_len[me] == n->dev->attr.addr_len);
    sh->pid[me] = (int)getpid();
    return 0;
}

/* Exchanges blobs (stage 1) and takes every QP to RTS toward the peer's QP of the same
 * index. */
static int node_connect(node_t *n)
{
    tmx_qp_attr_t mod;

    CHECK(node_barrier(n, 1) == 0);
    for (int i = 0; i < n->nqp; i++) {
        memset(&mod, 0, sizeof(mod));
        mod.state           = TMX_QPS_RTR;
        mod.remote_addr     = n->sh->qp[1 - n->me][i];
        mod.remote_addr_len = n->sh->qp_len[1 - n->me][i];
        CHECK(n->ops->qp_modify(n->qp[i], &mod, TMX_QP_ATTR_STATE | TMX_QP_ATTR_REMOTE) ==
              TMX_OK);
        mod.state = TMX_QPS_RTS;
        CHECK(n->ops->qp_modify(n->qp[i], &mod, TMX_QP_ATTR_STATE) == TMX_OK);
    }
    return 0;
}

static void node_close(node_t *n)
{
    for (int i = 0; i < n->nqp; i++) {
        if (n->qp[i] != NULL) {
            n->ops->qp_destroy(n->qp[i]);
        }
    }
    if (n->srq != NULL) {
        n->ops->srq_destroy(n->srq);
    }
    if (n->cq != NULL) {
        n->ops->cq_destroy(n->cq);
    }
    if (n->pd != NULL) {
        n->ops->pd_free(n->pd);
    }
    if (n->dev != NULL) {
        n->ops->dev_close(n->dev);
    }
}

static int post_recv(node_t *n, int q, void *buf, uint32_t len, uint32_t lkey, uint64_t id)
{
    tmx_sge_t      sge = {.addr = (uintptr_t)buf, .length = len, .lkey = lkey};
    tmx_recv_wr_t  wr  = {.wr_id = id, .sg_list = &sge, .num_sge = 1};
    tmx_recv_wr_t *bad;

    if (n->srq != NULL) {
        return n->ops->srq_post_recv(n->srq, &wr, &bad);
    }
    return n->ops->post_recv(n->qp[q], &wr, &bad);
}

static int post_send(node_t *n, int q, tmx_wr_opcode_t op, void *buf, uint32_t len,
                     uint32_t lkey, unsigned flags, uint64_t id, uint64_t raddr, uint32_t rkey,
                     uint32_t imm)
{
    tmx_sge_t      sge = {.addr = (uintptr_t)buf, .length = len, .lkey = lkey};
    tmx_send_wr_t  wr;
    tmx_send_wr_t *bad;

    memset(&wr, 0, sizeof(wr));
    wr.wr_id            = id;
    wr.sg_list          = &sge;
    wr.num_sge          = 1;
    wr.opcode           = op;
    wr.send_flags       = flags;
    wr.imm_data         = imm;
    wr.rdma.remote_addr = raddr;
    wr.rdma.rkey        = rkey;
    return n->ops->post_send(n->qp[q], &wr, &bad);
}

/* Posts, polling while the ring is full. */
static int post_send_retry(node_t *n, int q, tmx_wr_opcode_t op, void *buf, uint32_t len,
                           uint32_t lkey, unsigned flags, uint64_t id, uint32_t imm)
{
    double end = tmx_time_sec() + 5;
    int    st;

    while ((st = post_send(n, q, op, buf, len, lkey, flags, id, 0, 0, imm)) ==
           TMX_ERR_NO_RESOURCE) {
        node_poll(n);
        if (tmx_time_sec() > end) {
            break;
        }
    }
    return st;
}

typedef int (*role_fn)(node_t *n, shared_t *sh, int me, const tmx_config_t *cfg);

/* Node 1 in a child, node 0 here; both must return 0. */
static void run_pair(role_fn r0, role_fn r1, const tmx_config_t *cfg)
{
    shared_t *sh = shared_new();
    node_t   *n  = calloc(1, sizeof(*n));
    int       rc0, status = 0;
    pid_t     pid;

    cr_assert(n != NULL);
    fflush(NULL);
    pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        alarm(20);
        _exit(r1(n, sh, 1, cfg) == 0 ? 0 : 1);
    }
    rc0 = r0(n, sh, 0, cfg);
    if (rc0 != 0) {
        kill(pid, SIGKILL);
    }
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_expect_eq(rc0, 0, "node 0 failed at line %d", rc0);
    cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 0,
              "node 1 failed (status 0x%x, see stderr for the line)", status);
    free(n);
    munmap(sh, sizeof(*sh));
}

#define TRY(_x)                                                                                    \
    do {                                                                                           \
        int _r = (_x);                                                                             \
        if (_r != 0) {                                                                             \
            return _r;                                                                             \
        }                                                                                          \
    } while (0)

static uint8_t pattern(size_t i, unsigned seed)
{
    return (uint8_t)(i * 7 + seed);
}

static void fill(uint8_t *p, size_t len, unsigned seed)
{
    for (size_t i = 0; i < len; i++) {
        p[i] = pattern(i, seed);
    }
}

static int same(const uint8_t *p, size_t len, unsigned seed)
{
    for (size_t i = 0; i < len; i++) {
        if (p[i] != pattern(i, seed)) {
            return 0;
        }
    }
    return 1;
}

static tmx_mr_t *reg(node_t *n, void *buf, size_t len, unsigned access)
{
    tmx_mr_t *mr = NULL;
    if (n->ops->mr_reg(n->pd, buf, len, access, &mr) != TMX_OK) {
        return NULL;
    }
    return mr;
}

/* ---------------------------------------------------------------- SEND sizes */

static const uint32_t sizes[] = {0, 1, 8, 64, 4096, 1u << 20};
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))

static int sizes_rx(node_t *n, shared_t *sh, int me, const tmx_config_t *cfg)
{
    uint8_t  *buf[NSIZES];
    tmx_mr_t *mr[NSIZES];
    tmx_wc_t  wc;

    TRY(node_open(n, sh, me, cfg, 1, 1));
    for (size_t i = 0; i < NSIZES; i++) {
        buf[i] = calloc(1, sizes[i] + 64);
        mr[i]  = reg(n, buf[i], sizes[i] + 64, TMX_ACCESS_LOCAL_WRITE);
        CHECK(buf[i] != NULL && mr[i] != NULL);
        CHECK(post_recv(n, 0, buf[i], sizes[i] + 64, mr[i]->lkey, 100 + i) == TMX_OK);
    }
    TRY(node_connect(n));
    for (size_t i = 0; i < NSIZES; i++) {
        CHECK(node_wc(n, &wc) == 0);
        CHECK(wc.status == TMX_WC_SUCCESS && wc.opcode == TMX_WC_RECV);
        CHECK(wc.wr_id == 100 + i && wc.byte_len == sizes[i]);
        CHECK(wc.qp_num == n->qp[0]->qp_num);
        CHECK(same(buf[i], sizes[i], (unsigned)i));
        CHECK(sizes[i] == 8 ? (wc.wc_flags & TMX_WC_WITH_IMM) && wc.imm_data == 0xabc
                            : !(wc.wc_flags & TMX_WC_WITH_IMM));
    }
    CHECK(node_barrier(n, 2) == 0);
    for (size_t i = 0; i < NSIZES; i++) {
        n->ops->mr_dereg(mr[i]);
        free(buf[i]);
    }
    node_close(n);
    return 0;
}

static int sizes_tx(node_t *n, shared_t *sh, int me, const tmx_config_t *cfg)
{
    uint8_t  *buf = malloc(1u << 20);
    tmx_mr_t *mr;
    tmx_wc_t  wc;

    TRY(node_open(n, sh, me, cfg, 1, 1));
    mr = reg(n, buf, 1u << 20, 0);
    CHECK(buf != NULL && mr != NULL);
    TRY(node_connect(n));
    for (size_t i = 0; i < NSIZES; i++) {
        fill(buf, sizes[i], (unsigned)i);
        CHECK(post_send_retry(n, 0, sizes[i] == 8 ? TMX_WR_SEND_WITH_IMM : TMX_WR_SEND, buf,
                              sizes[i], mr->lkey, TMX_SEND_SIGNALED, 7 + i, 0xabc) == TMX_OK);
        CHECK(node_wc(n, &wc) == 0);
        CHECK(wc.status == TMX_WC_SUCCESS && wc.opcode == TMX_WC_SEND && wc.wr_id == 7 + i);
    }
    CHECK(node_barrier(n, 2) == 0);
    n->ops->mr_dereg(mr);
    free(buf);
    node_close(n);
    return 0;
}

Test(soft, send_sizes, .timeout = 30)
{
    tmx_config_t cfg;
    cfg_init(&cfg, -1, 64 * 1024);
    run_pair(sizes_rx, sizes_tx, &cfg);
}
