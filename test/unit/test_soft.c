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
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "prov/prov.h"
#include "prov/soft/soft.h"
#include "util/config.h"
#include "util/time.h"

extern const tmx_prov_t tmx_soft_prov;

#define MAXQ      2
#define TMX_SOFT_NAME 40 /* the segment name ends the device address blob */
#define TMX_SOFT_FD   (TMX_SOFT_NAME + 8) /* the memfd number (int32) is 8 bytes before it */
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
    cfg->soft_memfd     = -1;
    cfg->soft_cma       = cma;
    cfg->soft_ring_size = ring;
    cfg->soft_ring0_size = ring; /* all fast rings the size a test fills */
    cfg->soft_inbox_size = ring;
    cfg->soft_max_qps   = 8;
    cfg->soft_max_mrs   = 64;
    cfg->soft_xrc       = 0; /* RC and UD here; XRC is test_soft_xrc's */
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
                                  .cq = n->cq, .flags = use_srq == 2 ? TMX_SRQ_F_INPLACE : 0};
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

/* Node 0 alone here (its QPs connected to each other or to themselves); must return 0. */
static void run_alone(role_fn r, const tmx_config_t *cfg)
{
    shared_t *sh = shared_new();
    node_t   *n  = calloc(1, sizeof(*n));
    int       rc;

    cr_assert(n != NULL);
    rc = r(n, sh, 0, cfg);
    cr_assert_eq(rc, 0, "failed at line %d", rc);
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

/* ---------------------------------------------------------------- FIFO order */

#define FIFO_N   3000
#define FIFO_BUF 256

static int fifo_rx(node_t *n, shared_t *sh, int me, const tmx_config_t *cfg)
{
    uint64_t *buf = calloc(FIFO_BUF, sizeof(uint64_t));
    tmx_mr_t *mr;
    tmx_wc_t  wc;

    TRY(node_open(n, sh, me, cfg, 1, 1));
    mr = reg(n, buf, FIFO_BUF * sizeof(uint64_t), TMX_ACCESS_LOCAL_WRITE);
    CHECK(buf != NULL && mr != NULL);
    for (int k = 0; k < FIFO_BUF; k++) {
        CHECK(post_recv(n, 0, &buf[k], 8, mr->lkey, (uint64_t)k) == TMX_OK);
    }
    TRY(node_connect(n));
    for (uint64_t i = 0; i < FIFO_N; i++) {
        CHECK(node_wc(n, &wc) == 0);
        CHECK(wc.status == TMX_WC_SUCCESS && wc.byte_len == 8 && wc.wr_id < FIFO_BUF);
        CHECK(buf[wc.wr_id] == i);
        CHECK(post_recv(n, 0, &buf[wc.wr_id], 8, mr->lkey, wc.wr_id) == TMX_OK);
    }
    CHECK(node_barrier(n, 2) == 0);
    n->ops->mr_dereg(mr);
    free(buf);
    node_close(n);
    return 0;
}

static int fifo_tx(node_t *n, shared_t *sh, int me, const tmx_config_t *cfg)
{
    TRY(node_open(n, sh, me, cfg, 1, 1));
    TRY(node_connect(n));
    for (uint64_t i = 0; i < FIFO_N; i++) {
        uint64_t v = i;
        CHECK(post_send_retry(n, 0, TMX_WR_SEND, &v, 8, 0, TMX_SEND_INLINE, i, 0) == TMX_OK);
    }
    CHECK(node_barrier(n, 2) == 0);
    CHECK(n->nstash == 0); /* unsignaled sends complete silently */
    node_close(n);
    return 0;
}

Test(soft, fifo_order, .timeout = 30)
{
    tmx_config_t cfg;
    cfg_init(&cfg, -1, 8192);
    run_pair(fifo_rx, fifo_tx, &cfg);
}

/* ---------------------------------------------------------------- fast rings lent and taken back */

/*
 * One fast ring, two QPs from one sender, which take turns: in each turn, quick bursts on one
 * QP (which make the receiver ask the ring back from the other, idle one, and then lend it)
 * and slow stretches (in which the idle sender answers at its liveness check), until the
 * receiver says the ring is that QP's. Messages of one, and of three records (a switch may
 * fall between the chunks of one SEND). The receiver checks that each QP's messages come
 * whole and in order, and that the ring changed hands every turn.
 */
#define LEND_TURNS 6
#define LEND_BIG   40000 /* three records of a 64 KiB ring */
#define LEND_BUFS  256

static uint32_t lend_len(uint32_t seq)
{
    return seq % 29 == 3 ? LEND_BIG : seq % 5 == 1 ? 8 + (seq * 37) % 1500 : 8 + seq % 16;
}

static int lend_rx(node_t *n, shared_t *sh, int me, const tmx_config_t *cfg)
{
    uint8_t        *buf = calloc(LEND_BUFS, LEND_BIG);
    uint32_t        expect[MAXQ] = {0, 0};
    double          done_by = 0;
    tmx_soft_dev_t *dev;
    tmx_mr_t       *mr;
    tmx_wc_t        wc;

    CHECK(buf != NULL);
    TRY(node_open(n, sh, me, cfg, 2, 1));
    dev = (tmx_soft_dev_t *)n->dev;
    mr  = reg(n, buf, (size_t)LEND_BUFS * LEND_BIG, TMX_ACCESS_LOCAL_WRITE);
    CHECK(mr != NULL);
    for (int k = 0; k < LEND_BUFS; k++) {
        CHECK(post_recv(n, 0, buf + (size_t)k * LEND_BIG, LEND_BIG, mr->lkey, (uint64_t)k) ==
              TMX_OK);
    }
    TRY(node_connect(n));
    /* until the sender says it is done and how many it sent, and those have all come: its
     * last sends may still wait in its queue for room when it says so (it pushes them out in
     * its barrier), so an empty poll after its word is not the end */
    while (atomic_load(&sh->stage[1]) < 2 || n->nstash > 0 || expect[0] < sh->addr[1][0] ||
           expect[1] < sh->addr[1][1]) {
        uint8_t *p;
        int      q;

        if (n->nstash == 0) {
            if (atomic_load(&sh->stage[1]) >= 2) {
                if (done_by == 0) {
                    done_by = tmx_time_sec() + 10;
                }
                CHECK(tmx_time_sec() < done_by);
            }
            node_poll(n);
            continue;
        }
        CHECK(node_wc(n, &wc) == 0);
        CHECK(wc.status == TMX_WC_SUCCESS && wc.opcode == TMX_WC_RECV);
        q = wc.qp_num == n->qp[0]->qp_num ? 0 : 1;
        /* tell the sender who holds the ring (and reads it) */
        sh->addr[0][2] = dev->fast_owner[0] == NULL || !dev->fast_owner[0]->fast_on ? 0
                         : dev->fast_owner[0] == (tmx_soft_qp_t *)n->qp[0]      ? 1 : 2;
        CHECK(wc.qp_num == n->qp[q]->qp_num && wc.wr_id < LEND_BUFS);
        p = buf + wc.wr_id * LEND_BIG;
        CHECK(wc.byte_len == lend_len(expect[q]));
        CHECK(same(p, wc.byte_len, expect[q] * 2 + (unsigned)q));
        expect[q]++;
        CHECK(post_recv(n, 0, p, LEND_BIG, mr->lkey, wc.wr_id) == TMX_OK);
        if ((expect[0] + expect[1]) % 150 == 0) {
            usleep(20000); /* let records pile up in both paths, past a poll's share */
        }
    }
    CHECK(expect[0] == sh->addr[1][0] && expect[1] == sh->addr[1][1]);
    /* every turn but the first asked the ring back, and lent it again */
    CHECK(dev->stat_revokes >= LEND_TURNS - 1 && dev->stat_grants >= LEND_TURNS);
    CHECK(node_barrier(n, 3) == 0);
    n->ops->mr_dereg(mr);
    free(buf);
    node_close(n);
    return 0;
}

static int lend_send(node_t *n, uint32_t *seq, int q, uint8_t *buf, uint32_t lkey)
{
    uint32_t len = lend_len(seq[q]);
    double   end = tmx_time_sec() + 5;
    int      st;

    fill(buf, len, seq[q] * 2 + (unsigned)q);
    /* the large ones as signaled SENDs of several records, the others inline */
    while ((st = post_send(n, q, TMX_WR_SEND, buf, len, lkey,
                           len == LEND_BIG ? TMX_SEND_SIGNALED : TMX_SEND_INLINE, seq[q], 0, 0,
                           0)) == TMX_ERR_NO_RESOURCE && tmx_time_sec() < end) {
        node_poll(n);
    }
    CHECK(st == TMX_OK);
    if (len == LEND_BIG) {
        tmx_wc_t wc;
        CHECK(node_wc(n, &wc) == 0 && wc.status == TMX_WC_SUCCESS);
    }
    seq[q]++;
    node_poll(n);
    return 0;
}

static int lend_tx(node_t *n, shared_t *sh, int me, const tmx_config_t *cfg)
{
    static uint8_t buf[LEND_BIG];
    uint32_t       seq[MAXQ] = {0, 0};
    tmx_mr_t      *mr;

    TRY(node_open(n, sh, me, cfg, 2, 1));
    mr = reg(n, buf, sizeof(buf), 0);
    CHECK(mr != NULL);
    TRY(node_connect(n));
    for (int t = 0; t < LEND_TURNS; t++) {
        int    q    = t % 2;
        double stop = tmx_time_sec() + 8;

        while (*(volatile uint64_t *)&sh->addr[0][2] != (uint64_t)q + 1) {
            double end;

            CHECK(tmx_time_sec() < stop);
            for (int i = 0; i < 200; i++) {
                TRY(lend_send(n, seq, q, buf, mr->lkey));
            }
            for (end = tmx_time_sec() + 0.15; tmx_time_sec() < end;) {
                TRY(lend_send(n, seq, q, buf, mr->lkey));
                usleep(5000);
            }
        }
    }
    sh->addr[1][0] = seq[0];
    sh->addr[1][1] = seq[1];
    atomic_store(&sh->stage[1], 2);
    CHECK(node_barrier(n, 3) == 0);
    n->ops->mr_dereg(mr);
    node_close(n);
    return 0;
}

Test(soft, fast_ring_lent_and_taken_back, .timeout = 60)
{
    tmx_config_t cfg;

    cfg_init(&cfg, -1, 65536);
    cfg.soft_fast_rings = 1;
    run_pair(lend_rx, lend_tx, &cfg);
}

/* Steps without polling the device: what arrives meanwhile must stay in the ring. */
static int node_sync(node_t *n, int s)
{
    double end = tmx_time_sec() + 10;

    atomic_store(&n->sh->stage[n->me], s);
    while (atomic_load(&n->sh->stage[1 - n->me]) < s) {
        if (tmx_time_sec() > end) {
            return -1;
        }
    }
    return 0;
}

/* ---------------------------------------------------------------- records kept aside */

/*
 * Every sender shares the inbox, so a QP that cannot take its records yet must not hold up
 * the others: records for a QP still in INIT (its peer connected first) and for a QP with no
 * receive posted wait aside, in order, while another QP's records go through.
 */
#define PARK_N 5

static int park_rx(node_t *n, shared_t *sh, int me, const tmx_config_t *cfg)
{
    static uint64_t buf[MAXQ][2 * PARK_N];
    tmx_qp_attr_t   mod;
    tmx_mr_t       *mr;
    tmx_wc_t        wc;

    TRY(node_open(n, sh, me, cfg, 2, 0));
    mr = reg(n, buf, sizeof(buf), TMX_ACCESS_LOCAL_WRITE);
    CHECK(mr != NULL);
    for (int i = 0; i < 2 * PARK_N; i++) {
        CHECK(post_recv(n, 1, &buf[1][i], 8, mr->lkey, 100 + (uint64_t)i) == TMX_OK);
    }
    CHECK(node_barrier(n, 1) == 0);
    /* QP 1 connected, QP 0 left in INIT while the peer sends to both */
    memset(&mod, 0, sizeof(mod));
    mod.state           = TMX_QPS_RTR;
    mod.remote_addr     = sh->qp[1][1];
    mod.remote_addr_len = sh->qp_len[1][1];
    CHECK(n->ops->qp_modify(n->qp[1], &mod, TMX_QP_ATTR_STATE | TMX_QP_ATTR_REMOTE) == TMX_OK);
    mod.state = TMX_QPS_RTS;
    CHECK(n->ops->qp_modify(n->qp[1], &mod, TMX_QP_ATTR_STATE) == TMX_OK);
    CHECK(node_barrier(n, 2) == 0); /* the peer sent its first PARK_N on each */
    for (int i = 0; i < PARK_N; i++) {
        CHECK(node_wc(n, &wc) == 0);
        CHECK(wc.status == TMX_WC_SUCCESS && wc.qp_num == n->qp[1]->qp_num);
        CHECK(wc.wr_id == 100 + (uint64_t)i && buf[1][i] == 1000 + (uint64_t)i);
    }
    memset(&mod, 0, sizeof(mod));
    mod.state           = TMX_QPS_RTR;
    mod.remote_addr     = sh->qp[1][0];
    mod.remote_addr_len = sh->qp_len[1][0];
    CHECK(n->ops->qp_modify(n->qp[0], &mod, TMX_QP_ATTR_STATE | TMX_QP_ATTR_REMOTE) == TMX_OK);
    mod.state = TMX_QPS_RTS;
    CHECK(n->ops->qp_modify(n->qp[0], &mod, TMX_QP_ATTR_STATE) == TMX_OK);
    for (int i = 0; i < PARK_N; i++) {
        CHECK(post_recv(n, 0, &buf[0][i], 8, mr->lkey, (uint64_t)i) == TMX_OK);
    }
    for (int i = 0; i < PARK_N; i++) {
        CHECK(node_wc(n, &wc) == 0);
        CHECK(wc.status == TMX_WC_SUCCESS && wc.qp_num == n->qp[0]->qp_num);
        CHECK(wc.wr_id == (uint64_t)i && buf[0][i] == (uint64_t)i);
    }
    /* QP 0 has no receive now: its next records wait while QP 1's come through */
    CHECK(node_barrier(n, 3) == 0);
    CHECK(node_barrier(n, 4) == 0); /* the peer sent PARK_N more on each */
    for (int i = PARK_N; i < 2 * PARK_N; i++) {
        CHECK(node_wc(n, &wc) == 0);
        CHECK(wc.status == TMX_WC_SUCCESS && wc.qp_num == n->qp[1]->qp_num);
        CHECK(wc.wr_id == 100 + (uint64_t)i && buf[1][i] == 1000 + (uint64_t)i);
    }
    for (int i = PARK_N; i < 2 * PARK_N; i++) {
        CHECK(post_recv(n, 0, &buf[0][i], 8, mr->lkey, (uint64_t)i) == TMX_OK);
    }
    for (int i = PARK_N; i < 2 * PARK_N; i++) {
        CHECK(node_wc(n, &wc) == 0);
        CHECK(wc.status == TMX_WC_SUCCESS && wc.qp_num == n->qp[0]->qp_num);
        CHECK(wc.wr_id == (uint64_t)i && buf[0][i] == (uint64_t)i);
    }
    CHECK(node_barrier(n, 5) == 0);
    n->ops->mr_dereg(mr);
    node_close(n);
    return 0;
}

static int park_tx(node_t *n, shared_t *sh, int me, const tmx_config_t *cfg)
{
    TRY(node_open(n, sh, me, cfg, 2, 0));
    TRY(node_connect(n)); /* both QPs, at once: the peer's QP 0 is still in INIT */
    for (int round = 0; round < 2; round++) {
        if (round == 1) {
            CHECK(node_barrier(n, 3) == 0);
        }
        for (int i = round * PARK_N; i < (round + 1) * PARK_N; i++) {
            uint64_t v0 = (uint64_t)i, v1 = 1000 + (uint64_t)i;

            CHECK(post_send_retry(n, 0, TMX_WR_SEND, &v0, 8, 0, TMX_SEND_INLINE, 0, 0) == TMX_OK);
            CHECK(post_send_retry(n, 1, TMX_WR_SEND, &v1, 8, 0, TMX_SEND_INLINE, 0, 0) == TMX_OK);
        }
        CHECK(node_barrier(n, round == 0 ? 2 : 4) == 0);
    }
    CHECK(node_barrier(n, 5) == 0);
    node_close(n);
    return 0;
}

Test(soft, records_wait_aside_for_their_qp, .timeout = 30)
{
    tmx_config_t cfg;

    cfg_init(&cfg, -1, 65536);
    run_pair(park_rx, park_tx, &cfg);
}

/* ---------------------------------------------------------------- direct sends keep order */

/* An unsignaled inline SEND goes straight to the ring only while the send queue is empty;
 * behind a SEND still being written (larger than the ring) it is refused with NO_RESOURCE
 * even when the ring has room (queued, it would wait for progress its poster owes nothing
 * to: TMX_DEV_CAP_MANUAL_PROGRESS), and retried it keeps its place, its data and its
 * immediate. An unsignaled SEND larger than one record is refused outright. */
#define DIRECT_BIG (64 * 1024)
#define DIRECT_N   50

static int direct_rx(node_t *n, shared_t *sh, int me, const tmx_config_t *cfg)
{
    uint8_t  *big = calloc(1, DIRECT_BIG);
    uint32_t  small[DIRECT_N];
    tmx_mr_t *mr1, *mr2;
    tmx_wc_t  wc;

    TRY(node_open(n, sh, me, cfg, 1, 1));
    mr1 = reg(n, big, DIRECT_BIG, TMX_ACCESS_LOCAL_WRITE);
    mr2 = reg(n, small, sizeof(small), TMX_ACCESS_LOCAL_WRITE);
    CHECK(big != NULL && mr1 != NULL && mr2 != NULL);
    CHECK(post_recv(n, 0, big, DIRECT_BIG, mr1->lkey, 1000) == TMX_OK);
    for (uint32_t i = 0; i < DIRECT_N; i++) {
        CHECK(post_recv(n, 0, &small[i], 4, mr2->lkey, i) == TMX_OK);
    }
    TRY(node_connect(n));
    /* once the big SEND filled the ring, and not before (a ring drained while the sender
     * writes lets one post write all of it), drain what is there, then let the sender try */
    CHECK(node_sync(n, 2) == 0);
    for (double end = tmx_time_sec() + 0.05; tmx_time_sec() < end;) {
        node_poll(n);
    }
    CHECK(node_sync(n, 3) == 0);
    CHECK(node_wc(n, &wc) == 0);
    CHECK(wc.wr_id == 1000 && wc.status == TMX_WC_SUCCESS && wc.byte_len == DIRECT_BIG);
    CHECK(same(big, DIRECT_BIG, 5));
    for (uint32_t i = 0; i < DIRECT_N; i++) {
        CHECK(node_wc(n, &wc) == 0);
        CHECK(wc.wr_id == i && wc.status == TMX_WC_SUCCESS && wc.byte_len == 4);
        CHECK((wc.wc_flags & TMX_WC_WITH_IMM) && wc.imm_data == 0x5000 + i);
        CHECK(small[i] == 0x7000 + i);
    }
    CHECK(node_barrier(n, 4) == 0);
    n->ops->mr_dereg(mr1);
    n->ops->mr_dereg(mr2);
    free(big);
    node_close(n);
    return 0;
}

static int direct_tx(node_t *n, shared_t *sh, int me, const tmx_config_t *cfg)
{
    uint8_t  *big = malloc(DIRECT_BIG);
    tmx_mr_t *mr;
    tmx_wc_t  wc;
    uint32_t  v;

    TRY(node_open(n, sh, me, cfg, 1, 1));
    mr = reg(n, big, DIRECT_BIG, 0);
    CHECK(big != NULL && mr != NULL);
    fill(big, DIRECT_BIG, 5);
    TRY(node_connect(n));
    CHECK(post_send(n, 0, TMX_WR_SEND, big, DIRECT_BIG, mr->lkey, TMX_SEND_SIGNALED, 99, 0, 0,
                    0) == TMX_OK);
    /* The receiver empties the ring meanwhile: a direct send would find room, and overtake. */
    CHECK(node_sync(n, 2) == 0);
    CHECK(node_sync(n, 3) == 0);
    v = 0xdead;
    CHECK(post_send(n, 0, TMX_WR_SEND_WITH_IMM, &v, 4, 0, TMX_SEND_INLINE, 77, 0, 0, 0) ==
          TMX_ERR_NO_RESOURCE);
    CHECK(post_send(n, 0, TMX_WR_SEND, big, (uint32_t)n->dev->attr.max_inline + 1, mr->lkey, 0, 78,
                    0, 0, 0) == TMX_ERR_INVALID_PARAM);
    for (uint32_t i = 0; i < DIRECT_N; i++) {
        v = 0x7000 + i;
        CHECK(post_send_retry(n, 0, TMX_WR_SEND_WITH_IMM, &v, 4, 0, TMX_SEND_INLINE, i,
                              0x5000 + i) == TMX_OK);
        v = 0xdead; /* an inline buffer is the caller's again on return */
    }
    CHECK(node_wc(n, &wc) == 0 && wc.wr_id == 99 && wc.status == TMX_WC_SUCCESS);
    CHECK(node_barrier(n, 4) == 0);
    CHECK(n->nstash == 0); /* the unsignaled ones complete silently */
    n->ops->mr_dereg(mr);
    free(big);
    node_close(n);
    return 0;
}

Test(soft, direct_sends_wait_behind_queued, .timeout = 30)
{
    tmx_config_t cfg;
    cfg_init(&cfg, -1, 8192);
    run_pair(direct_rx, direct_tx, &cfg);
}

/* ---------------------------------------------------------------- the first fast ring */

/* The first fast ring is TMX_SOFT_RING0_SIZE bytes, the others TMX_SOFT_RING_SIZE, and a
 * sender with traffic is lent the first while it is free: 40 sends through the inbox earn the
 * sender a ring, 40 more go through it; the sender must then write a ring of the first's size,
 * and the receiver must have lent the first. Independent of the machine's load: the receiver's
 * traffic window is frozen (a ring is earned by TMX_SOFT_FAST_AFTER records in one window of
 * 10 ms, which a descheduled receiver missed), and it reads nothing before the sender posted
 * the first 40 (a receiver that read 16 while the sender was descheduled lent the ring before
 * the 40th send), and the sender sends nothing before the receiver's QP is connected. */
#define RING0_SMALL (8 * 1024)
#define RING0_BIG   (64 * 1024)
#define RING0_N     40

static int ring0_rx(node_t *n, shared_t *sh, int me, const tmx_config_t *cfg)
{
    uint32_t        got[2 * RING0_N];
    tmx_soft_dev_t *dev;
    tmx_mr_t       *mr;
    tmx_wc_t        wc;

    TRY(node_open(n, sh, me, cfg, 1, 1));
    dev             = (tmx_soft_dev_t *)n->dev;
    dev->win_frozen = 1;
    CHECK(dev->hdr->ring0_size == RING0_BIG && dev->hdr->ring_size == RING0_SMALL);
    CHECK(tmx_soft_ring(dev->base, dev->hdr, 1) - tmx_soft_ring(dev->base, dev->hdr, 0) ==
          RING0_BIG);
    CHECK(tmx_soft_ring(dev->base, dev->hdr, 2) - tmx_soft_ring(dev->base, dev->hdr, 1) ==
          RING0_SMALL);
    mr = reg(n, got, sizeof(got), TMX_ACCESS_LOCAL_WRITE);
    CHECK(mr != NULL);
    for (uint32_t i = 0; i < 2 * RING0_N; i++) {
        CHECK(post_recv(n, 0, &got[i], 4, mr->lkey, i) == TMX_OK);
    }
    TRY(node_connect(n));
    CHECK(node_sync(n, 2) == 0); /* our QP takes records: none is kept aside */
    CHECK(node_sync(n, 3) == 0); /* the first half is posted */
    for (uint32_t i = 0; i < 2 * RING0_N; i++) {
        CHECK(node_wc(n, &wc) == 0);
        CHECK(wc.wr_id == i && wc.status == TMX_WC_SUCCESS && got[i] == 0x100 + i);
        if (i + 1 == RING0_N) {
            CHECK(dev->fast_owner[0] == (tmx_soft_qp_t *)n->qp[0]); /* lent at the 16th */
            CHECK(node_sync(n, 4) == 0); /* the first half is in: the sender goes on */
        }
    }
    CHECK(dev->fast_owner[0] == (tmx_soft_qp_t *)n->qp[0]);
    CHECK(node_barrier(n, 5) == 0);
    n->ops->mr_dereg(mr);
    node_close(n);
    return 0;
}

/* Whether every page of [p, p + len) is mapped in this process (/proc/self/pagemap's present
 * bit; the frame numbers may read as 0, that bit does not): 1 yes, 0 no, -1 no pagemap to
 * tell (a kernel or sandbox without it). */
static int ring0_mapped(const uint8_t *p, size_t len)
{
    size_t   page = (size_t)sysconf(_SC_PAGESIZE);
    int      fd   = open("/proc/self/pagemap", O_RDONLY);
    int      all  = 1;
    uint64_t e;

    if (fd < 0) {
        return -1;
    }

    for (size_t off = 0; all && off < len; off += page) {
        all = pread(fd, &e, sizeof(e), (off_t)(((uintptr_t)p + off) / page * sizeof(e))) ==
                  (ssize_t)sizeof(e) &&
              (e >> 63) != 0;
    }
    close(fd);
    return all;
}

static int ring0_tx(node_t *n, shared_t *sh, int me, const tmx_config_t *cfg)
{
    tmx_soft_qp_t *qp;
    uint32_t       v;

    TRY(node_open(n, sh, me, cfg, 1, 1));
    TRY(node_connect(n));
    /* not before the receiver's QP is connected: records that find it in INIT wait aside,
     * and those are not counted toward a ring */
    CHECK(node_sync(n, 2) == 0);
    qp = (tmx_soft_qp_t *)n->qp[0];
    for (uint32_t i = 0; i < 2 * RING0_N; i++) {
        if (i == RING0_N) {
            CHECK(qp->out_fast == 0); /* all through the inbox so far */
            CHECK(node_sync(n, 3) == 0);
            CHECK(node_sync(n, 4) == 0);
        }
        v = 0x100 + i;
        CHECK(post_send_retry(n, 0, TMX_WR_SEND, &v, 4, 0, TMX_SEND_INLINE, i, 0) == TMX_OK);
    }
    CHECK(qp->out_fast == 1 && qp->out_size == RING0_BIG);
    CHECK(ring0_mapped(qp->out_ring, RING0_BIG) != 0); /* mapped at the switch, every page */
    /* with one load a page: reading every line cost a 2 MiB ring's borrower 0.10-0.17 ms on
     * the path of a message (tmx_soft_prefault) */
    CHECK(((tmx_soft_dev_t *)n->dev)->stat_pf_pages == RING0_BIG / (size_t)sysconf(_SC_PAGESIZE));
    CHECK(((tmx_soft_dev_t *)n->dev)->stat_pf_loads == ((tmx_soft_dev_t *)n->dev)->stat_pf_pages);
    CHECK(node_barrier(n, 5) == 0);
    node_close(n);
    return 0;
}

Test(soft, first_fast_ring_is_the_large_one, .timeout = 30)
{
    tmx_config_t cfg;
    cfg_init(&cfg, -1, RING0_SMALL);
    cfg.soft_ring0_size = RING0_BIG;
    cfg.soft_fast_rings = 3;
    run_pair(ring0_rx, ring0_tx, &cfg);
}

/* ---------------------------------------------------------------- the first ring made early */

/* Pages of [p, p + len) in memory; p and len whole pages. */
static size_t pages_in(uint8_t *p, size_t len)
{
    size_t         page = (size_t)sysconf(_SC_PAGESIZE), n = 0;
    unsigned char *vec  = calloc(len / page, 1);

    cr_assert(vec != NULL);
    cr_assert_eq(mincore(p, len, vec), 0, "mincore: %s", strerror(errno));
    for (size_t i = 0; i < len / page; i++) {
        n += vec[i] & 1;
    }
    free(vec);
    return n;
}

/* TMX_SOFT_RING0_EARLY: yes makes every page of the first fast ring when the device opens, so
 * that the first lap of a borrower makes none (fi_pingpong's 1000 round trips of 4 KiB took
 * 3.65x those of libfabric's shm provider when they did); no leaves them to the first lap; auto
 * makes them unless TMX_LOCAL_SIZE says that more processes share our CPUs than there are. The
 * other fast rings are never made early. */
Test(soft, first_fast_ring_made_at_open)
{
    static const struct {
        int early, local_size, made;
    } cases[] = {{1, 100000, 1}, {0, -1, 0}, {-1, -1, 1}, {-1, 1, 1}, {-1, 100000, 0}};
    size_t page = (size_t)sysconf(_SC_PAGESIZE);

    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        tmx_config_t    cfg;
        tmx_dev_t      *devs[1];
        tmx_soft_dev_t *dev;
        int             num = 0;

        cfg_init(&cfg, -1, RING0_SMALL);
        cfg.soft_ring0_size  = 4 * RING0_BIG;
        cfg.soft_fast_rings  = 2;
        cfg.soft_ring0_early = cases[c].early;
        cfg.local_size       = cases[c].local_size;
        cr_assert_eq(tmx_soft_prov.ops->dev_open(&tmx_soft_prov, &cfg, devs, 1, &num), TMX_OK);
        cr_assert_eq(num, 1);
        dev = (tmx_soft_dev_t *)devs[0];
        cr_assert_eq(pages_in(tmx_soft_ring(dev->base, dev->hdr, 0), 4 * RING0_BIG),
                     cases[c].made ? 4 * RING0_BIG / page : 0, "case %zu", c);
        cr_assert_eq(pages_in(tmx_soft_ring(dev->base, dev->hdr, 1), RING0_SMALL), 0,
                     "case %zu", c);
        tmx_soft_prov.ops->dev_close(devs[0]);
    }
}

/* ---------------------------------------------------------------- direct sends in pieces */

/* An unsignaled inline SEND above TMX_SOFT_WHOLE_MAX goes out as several records of one
 * reservation, each readable as soon as it is written: whole or not at all, the pieces in
 * order, the immediate and the length of the whole message on the one completion. Sizes
 * around the piece size, around the threshold (16 KiB + 1 KiB: one record up to it), and up
 * to the largest inline send (which may need one record: the pieces' headers would not fit
 * where it does). */
static const uint32_t frag_sizes[] = {8191, 8192, 8193, 9216, 9217, 16383, 16384, 16385,
                                      17408, 17409, 3 * 8192 + 5, 0};
#define FRAG_N (sizeof(frag_sizes) / sizeof(frag_sizes[0]))

static uint32_t frag_size(const node_t *n, size_t i)
{
    return frag_sizes[i] != 0 ? frag_sizes[i] : (uint32_t)n->dev->attr.max_inline;
}

static int frag_rx(node_t *n, shared_t *sh, int me, const tmx_config_t *cfg)
{
    size_t    cap = 64 * 1024 + 64;
    uint8_t  *buf[FRAG_N];
    tmx_mr_t *mr[FRAG_N];
    tmx_wc_t  wc;

    TRY(node_open(n, sh, me, cfg, 1, 1));
    for (size_t i = 0; i < FRAG_N; i++) {
        buf[i] = calloc(1, cap);
        mr[i]  = reg(n, buf[i], cap, TMX_ACCESS_LOCAL_WRITE);
        CHECK(buf[i] != NULL && mr[i] != NULL);
        CHECK(post_recv(n, 0, buf[i], (uint32_t)cap, mr[i]->lkey, 300 + i) == TMX_OK);
    }
    TRY(node_connect(n));
    for (size_t i = 0; i < FRAG_N; i++) {
        CHECK(node_wc(n, &wc) == 0);
        CHECK(wc.status == TMX_WC_SUCCESS && wc.opcode == TMX_WC_RECV);
        CHECK(wc.wr_id == 300 + i && wc.byte_len == frag_size(n, i));
        CHECK(same(buf[i], frag_size(n, i), 40 + (unsigned)i));
        CHECK(buf[i][frag_size(n, i)] == 0); /* nothing past the message */
        CHECK((i & 1) ? (wc.wc_flags & TMX_WC_WITH_IMM) && wc.imm_data == 0x600 + i
                      : !(wc.wc_flags & TMX_WC_WITH_IMM));
    }
    CHECK(node_barrier(n, 2) == 0);
    for (size_t i = 0; i < FRAG_N; i++) {
        n->ops->mr_dereg(mr[i]);
        free(buf[i]);
    }
    node_close(n);
    return 0;
}

static int frag_tx(node_t *n, shared_t *sh, int me, const tmx_config_t *cfg)
{
    uint8_t *buf = malloc(64 * 1024);

    TRY(node_open(n, sh, me, cfg, 1, 1));
    CHECK(buf != NULL && n->dev->attr.max_inline <= 64 * 1024);
    TRY(node_connect(n));
    for (size_t i = 0; i < FRAG_N; i++) {
        uint32_t len = frag_size(n, i);

        fill(buf, len, 40 + (unsigned)i);
        CHECK(post_send_retry(n, 0, (i & 1) ? TMX_WR_SEND_WITH_IMM : TMX_WR_SEND, buf, len, 0,
                              TMX_SEND_INLINE, 0, 0x600 + i) == TMX_OK);
        memset(buf, 0xee, len); /* inline: the buffer is the caller's again on return */
    }
    CHECK(node_barrier(n, 2) == 0);
    CHECK(n->nstash == 0); /* unsignaled: no completion */
    free(buf);
    node_close(n);
    return 0;
}

Test(soft, direct_send_in_pieces, .timeout = 30)
{
    tmx_config_t cfg;
    cfg_init(&cfg, -1, 256 * 1024);
    run_pair(frag_rx, frag_tx, &cfg);
}

/* A ring with room for some pieces of a send but not for all: the send is refused whole
 * (TMX_ERR_NO_RESOURCE) and no piece of it reaches the receiver before it is posted again.
 * 128 KiB ring: three 30 KiB sends and one of 24 KiB wait in it (no receive posted, the
 * receiver does not poll) and leave about 13 KiB, room for one 8 KiB piece of the fifth. */
static const uint32_t fragfull_len[] = {30 * 1024, 30 * 1024, 30 * 1024, 24 * 1024, 30 * 1024};
#define FRAGFULL_N 5

static int fragfull_rx(node_t *n, shared_t *sh, int me, const tmx_config_t *cfg)
{
    uint8_t  *buf = calloc(FRAGFULL_N, 32 * 1024);
    tmx_mr_t *mr;
    tmx_wc_t  wc;

    TRY(node_open(n, sh, me, cfg, 1, 1));
    mr = reg(n, buf, FRAGFULL_N * 32 * 1024, TMX_ACCESS_LOCAL_WRITE);
    CHECK(buf != NULL && mr != NULL);
    TRY(node_connect(n));
    CHECK(node_sync(n, 2) == 0); /* the sender filled the ring, its fifth send was refused */
    for (uint32_t k = 0; k < FRAGFULL_N; k++) {
        CHECK(post_recv(n, 0, buf + k * 32 * 1024, 32 * 1024, mr->lkey, k) == TMX_OK);
    }
    for (uint32_t k = 0; k + 1 < FRAGFULL_N; k++) {
        CHECK(node_wc(n, &wc) == 0 && wc.wr_id == k && wc.status == TMX_WC_SUCCESS);
        CHECK(wc.byte_len == fragfull_len[k] && same(buf + k * 32 * 1024, wc.byte_len, 60 + k));
    }
    for (double end = tmx_time_sec() + 0.02; tmx_time_sec() < end;) {
        node_poll(n);
    }
    CHECK(n->nstash == 0); /* no piece of the refused send */
    CHECK(node_sync(n, 3) == 0);
    CHECK(node_wc(n, &wc) == 0 && wc.wr_id == FRAGFULL_N - 1 && wc.status == TMX_WC_SUCCESS);
    CHECK(wc.byte_len == fragfull_len[FRAGFULL_N - 1]);
    CHECK(same(buf + (FRAGFULL_N - 1) * 32 * 1024, wc.byte_len, 70));
    CHECK(node_barrier(n, 4) == 0);
    n->ops->mr_dereg(mr);
    free(buf);
    node_close(n);
    return 0;
}

static int fragfull_tx(node_t *n, shared_t *sh, int me, const tmx_config_t *cfg)
{
    uint8_t *buf = malloc(32 * 1024);

    TRY(node_open(n, sh, me, cfg, 1, 1));
    CHECK(buf != NULL);
    TRY(node_connect(n));
    for (uint32_t k = 0; k + 1 < FRAGFULL_N; k++) {
        fill(buf, fragfull_len[k], 60 + k);
        CHECK(post_send(n, 0, TMX_WR_SEND, buf, fragfull_len[k], 0, TMX_SEND_INLINE, 0, 0, 0,
                        0) == TMX_OK);
    }
    fill(buf, fragfull_len[FRAGFULL_N - 1], 70);
    CHECK(post_send(n, 0, TMX_WR_SEND, buf, fragfull_len[FRAGFULL_N - 1], 0, TMX_SEND_INLINE, 0,
                    0, 0, 0) == TMX_ERR_NO_RESOURCE);
    CHECK(node_sync(n, 2) == 0);
    CHECK(node_sync(n, 3) == 0); /* the receiver took the four: room again */
    CHECK(post_send_retry(n, 0, TMX_WR_SEND, buf, fragfull_len[FRAGFULL_N - 1], 0,
                          TMX_SEND_INLINE, 0, 0) == TMX_OK);
    CHECK(node_barrier(n, 4) == 0);
    free(buf);
    node_close(n);
    return 0;
}

Test(soft, direct_send_in_pieces_whole_or_nothing, .timeout = 30)
{
    tmx_config_t cfg;
    cfg_init(&cfg, -1, 128 * 1024);
    run_pair(fragfull_rx, fragfull_tx, &cfg);
}

/* ---------------------------------------------------------------- receives in place */

/*
 * An SRQ with TMX_SRQ_F_INPLACE: a receive completes with wc.data pointing at the message in
 * the ring, its posted buffer untouched; only as many as the poll returns (with room for one,
 * the next message of the same poll is copied into its buffer as before); and the records
 * stay the receiver's until it polls again: a sender filling the 8 KiB ring meanwhile finds
 * it full before it reaches them (it would otherwise wrap onto the first message: the two
 * messages taken move the read position past a quarter ring, which would be published).
 */
#define INPL_BUF 2048
#define INPL_LEN 1900
#define INPL_N   8

static int inplace_rx(node_t *n, shared_t *sh, int me, const tmx_config_t *cfg)
{
    uint8_t  *buf = malloc(INPL_N * INPL_BUF);
    tmx_mr_t *mr;
    tmx_wc_t  wc, w2;
    int       got = 0;
    uint64_t  more;

    TRY(node_open(n, sh, me, cfg, 1, 2));
    CHECK(n->dev->attr.caps & TMX_DEV_CAP_RECV_INPLACE);
    mr = reg(n, buf, INPL_N * INPL_BUF, TMX_ACCESS_LOCAL_WRITE);
    CHECK(buf != NULL && mr != NULL);
    memset(buf, 0x55, INPL_N * INPL_BUF);
    for (uint32_t k = 0; k < INPL_N; k++) {
        CHECK(post_recv(n, 0, buf + k * INPL_BUF, INPL_BUF, mr->lkey, k) == TMX_OK);
    }
    TRY(node_connect(n));
    CHECK(node_sync(n, 2) == 0); /* our QP takes records: none is kept aside */
    CHECK(node_sync(n, 3) == 0); /* A (INPL_LEN bytes) and B (100) sent */
    for (double end = tmx_time_sec() + 5; got == 0 && tmx_time_sec() < end;) {
        got = n->ops->cq_poll(n->cq, 1, &wc);
    }
    CHECK(got == 1 && wc.status == TMX_WC_SUCCESS && wc.opcode == TMX_WC_RECV);
    CHECK(wc.wr_id == 0 && wc.byte_len == INPL_LEN && wc.data != NULL);
    CHECK(same(wc.data, INPL_LEN, 1));
    CHECK(buf[0] == 0x55 && buf[1499] == 0x55); /* the posted buffer was not written */
    CHECK(node_sync(n, 4) == 0);
    CHECK(node_sync(n, 5) == 0); /* the sender filled the ring */
    more = sh->addr[1][0];
    CHECK(more >= 1 && more + 2 <= INPL_N);
    CHECK(same(wc.data, INPL_LEN, 1)); /* still ours: nothing was written over it */
    /* B came in the same poll as A, with no room left in the caller's array: copied */
    CHECK(node_wc(n, &w2) == 0 && w2.wr_id == 1 && w2.status == TMX_WC_SUCCESS);
    CHECK(w2.byte_len == 100 && w2.data == NULL && same(buf + INPL_BUF, 100, 2));
    for (uint64_t k = 0; k < more; k++) {
        const uint8_t *p;

        CHECK(node_wc(n, &w2) == 0 && w2.wr_id == 2 + k && w2.status == TMX_WC_SUCCESS);
        p = w2.data != NULL ? (const uint8_t *)w2.data : buf + (2 + k) * INPL_BUF;
        CHECK(w2.byte_len == INPL_LEN && same(p, INPL_LEN, 10 + (unsigned)k));
    }
    CHECK(node_barrier(n, 6) == 0);
    n->ops->mr_dereg(mr);
    free(buf);
    node_close(n);
    return 0;
}

static int inplace_tx(node_t *n, shared_t *sh, int me, const tmx_config_t *cfg)
{
    uint8_t  v[INPL_LEN];
    uint64_t k;
    int      st = TMX_OK;

    TRY(node_open(n, sh, me, cfg, 1, 0));
    TRY(node_connect(n));
    /* Not before the receiver's QP is connected: a record that finds it in INIT waits aside
     * as a copy (the receiver polled in node_connect's barrier, descheduled, while we went
     * on), which is then not received in place. */
    CHECK(node_sync(n, 2) == 0);
    fill(v, INPL_LEN, 1);
    CHECK(post_send(n, 0, TMX_WR_SEND, v, INPL_LEN, 0, TMX_SEND_INLINE, 0, 0, 0, 0) == TMX_OK);
    fill(v, 100, 2);
    CHECK(post_send(n, 0, TMX_WR_SEND, v, 100, 0, TMX_SEND_INLINE, 0, 0, 0, 0) == TMX_OK);
    CHECK(node_sync(n, 3) == 0);
    CHECK(node_sync(n, 4) == 0); /* the receiver holds A in place */
    for (k = 0; k < INPL_N; k++) {
        fill(v, INPL_LEN, 10 + (unsigned)k);
        st = post_send(n, 0, TMX_WR_SEND, v, INPL_LEN, 0, TMX_SEND_INLINE, 0, 0, 0, 0);
        if (st != TMX_OK) {
            break;
        }
    }
    CHECK(st == TMX_ERR_NO_RESOURCE);
    sh->addr[1][0] = k;
    CHECK(node_sync(n, 5) == 0);
    CHECK(node_barrier(n, 6) == 0);
    node_close(n);
    return 0;
}

Test(soft, recv_in_place, .timeout = 30)
{
    tmx_config_t cfg;
    cfg_init(&cfg, -1, 8192);
    run_pair(inplace_rx, inplace_tx, &cfg);
}

/* Asked of a device without it (TMX_SOFT_INPLACE=no), or with a TM SRQ: refused. */
static int inplace_refused(node_t *n, shared_t *sh, int me, const tmx_config_t *cfg)
{
    tmx_srq_init_attr_t sa = {.type = TMX_SRQT_BASIC, .max_wr = 4, .max_sge = 1,
                              .flags = TMX_SRQ_F_INPLACE};
    tmx_srq_t          *srq = NULL;

    TRY(node_open(n, sh, me, cfg, 0, 0));
    CHECK(!(n->dev->attr.caps & TMX_DEV_CAP_RECV_INPLACE));
    sa.cq = n->cq;
    CHECK(n->ops->srq_create(n->pd, &sa, &srq) == TMX_ERR_INVALID_PARAM && srq == NULL);
    sa.flags = 1u << 7; /* unknown */
    CHECK(n->ops->srq_create(n->pd, &sa, &srq) == TMX_ERR_INVALID_PARAM && srq == NULL);
    node_close(n);
    return 0;
}

Test(soft, recv_in_place_refused, .timeout = 10)
{
    tmx_config_t cfg;
    cfg_init(&cfg, -1, 4096);
    cfg.soft_inplace = 0;
    run_alone(inplace_refused, &cfg);
}

/* ---------------------------------------------------------------- SRQ shared by two QPs */

static int srq2_rx(node_t *n, shared_t *sh, int me, const tmx_config_t *cfg)
{
    uint32_t  buf[40];
    tmx_mr_t *mr;
    tmx_wc_t  wc;
    uint32_t  next[2] = {0, 0};

    TRY(node_open(n, sh, me, cfg, 2, 1));
    mr = reg(n, buf, sizeof(buf), TMX_ACCESS_LOCAL_WRITE);
    CHECK(mr != NULL);
    for (int k = 0; k < 40; k++) {
        CHECK(post_recv(n, 0, &buf[k], 4, mr->lkey, (uint64_t)k) == TMX_OK);
    }
    TRY(node_connect(n));
    for (int i = 0; i < 40; i++) {
        int q;
        CHECK(node_wc(n, &wc) == 0 && wc.status == TMX_WC_SUCCESS && wc.wr_id < 40);
        q = wc.qp_num == n->qp[0]->qp_num ? 0 : wc.qp_num == n->qp[1]->qp_num ? 1 : -1;
        CHECK(q >= 0);
        CHECK(buf[wc.wr_id] == ((uint32_t)q << 16 | next[q]));
        next[q]++;
    }
    CHECK(next[0] == 20 && next[1] == 20);
    CHECK(node_barrier(n, 2) == 0);
    n->ops->mr_dereg(mr);
    node_close(n);
    return 0;
}

static int srq2_tx(node_t *n, shared_t *sh, int me, const tmx_config_t *cfg)
{
    TRY(node_open(n, sh, me, cfg, 2, 1));
    TRY(node_connect(n));
    for (uint32_t i = 0; i < 20; i++) {
        for (int q = 0; q < 2; q++) {
            uint32_t v = (uint32_t)q << 16 | i;
            CHECK(post_send_retry(n, q, TMX_WR_SEND, &v, 4, 0, TMX_SEND_INLINE, i, 0) ==
                  TMX_OK);
        }
    }
    CHECK(node_barrier(n, 2) == 0);
    node_close(n);
    return 0;
}

Test(soft, srq_two_qps, .timeout = 30)
{
    tmx_config_t cfg;
    cfg_init(&cfg, -1, 65536);
    run_pair(srq2_rx, srq2_tx, &cfg);
}

/* ---------------------------------------------------------------- RNR, ring full */

static int rnr_rx(node_t *n, shared_t *sh, int me, const tmx_config_t *cfg)
{
    uint8_t   buf[4][64];
    tmx_mr_t *mr;
    tmx_wc_t  wc;
    double    end;

    TRY(node_open(n, sh, me, cfg, 1, 0)); /* the QP's own receive queue */
    mr = reg(n, buf, sizeof(buf), TMX_ACCESS_LOCAL_WRITE);
    CHECK(mr != NULL);
    TRY(node_connect(n));
    CHECK(node_barrier(n, 2) == 0); /* the peer sent 3 */
    end = tmx_time_sec() + 0.05;
    while (tmx_time_sec() < end) {
        node_poll(n);
    }
    CHECK(n->nstash == 0); /* nothing to receive into: the records wait */
    for (int k = 0; k < 3; k++) {
        CHECK(post_recv(n, 0, buf[k], 64, mr->lkey, (uint64_t)k) == TMX_OK);
    }
    for (int k = 0; k < 3; k++) {
        CHECK(node_wc(n, &wc) == 0 && wc.status == TMX_WC_SUCCESS && wc.wr_id == (uint64_t)k);
        CHECK(wc.byte_len == 10 && same(buf[k], 10, (unsigned)k));
    }
    CHECK(node_barrier(n, 3) == 0);
    n->ops->mr_dereg(mr);
    node_close(n);
    return 0;
}

static int rnr_tx(node_t *n, shared_t *sh, int me, const tmx_config_t *cfg)
{
    uint8_t  v[10];
    tmx_wc_t wc;

    TRY(node_open(n, sh, me, cfg, 1, 0));
    TRY(node_connect(n));
    for (int k = 0; k < 3; k++) {
        fill(v, sizeof(v), (unsigned)k);
        CHECK(post_send(n, 0, TMX_WR_SEND, v, 10, 0, TMX_SEND_INLINE | TMX_SEND_SIGNALED,
                        (uint64_t)k, 0, 0, 0) == TMX_OK);
        CHECK(node_wc(n, &wc) == 0 && wc.status == TMX_WC_SUCCESS && wc.wr_id == (uint64_t)k);
    }
    CHECK(node_barrier(n, 2) == 0);
    CHECK(node_barrier(n, 3) == 0);
    node_close(n);
    return 0;
}

Test(soft, rnr_waits_for_receive, .timeout = 30)
{
    tmx_config_t cfg;
    cfg_init(&cfg, -1, 65536);
    run_pair(rnr_rx, rnr_tx, &cfg);
}

static int full_rx(node_t *n, shared_t *sh, int me, const tmx_config_t *cfg)
{
    uint8_t  *buf = calloc(512, 64);
    tmx_mr_t *mr;
    tmx_wc_t  wc;
    uint64_t  count;

    TRY(node_open(n, sh, me, cfg, 1, 1));
    mr = reg(n, buf, 512 * 64, TMX_ACCESS_LOCAL_WRITE);
    CHECK(buf != NULL && mr != NULL);
    TRY(node_connect(n));
    CHECK(node_barrier(n, 2) == 0); /* the peer filled the ring */
    count = sh->addr[1][0];
    CHECK(count > 0 && count < 500);
    for (uint64_t k = 0; k <= count; k++) {
        CHECK(post_recv(n, 0, buf + k * 64, 64, mr->lkey, k) == TMX_OK);
    }
    CHECK(node_barrier(n, 3) == 0);
    for (uint64_t k = 0; k <= count; k++) {
        CHECK(node_wc(n, &wc) == 0 && wc.status == TMX_WC_SUCCESS && wc.wr_id == k);
        CHECK(same(buf + k * 64, 64, (unsigned)k));
    }
    CHECK(node_barrier(n, 4) == 0);
    n->ops->mr_dereg(mr);
    free(buf);
    node_close(n);
    return 0;
}

static int full_tx(node_t *n, shared_t *sh, int me, const tmx_config_t *cfg)
{
    uint8_t  v[64];
    uint64_t k;
    int      st = TMX_OK;

    TRY(node_open(n, sh, me, cfg, 1, 1));
    TRY(node_connect(n));
    for (k = 0; k < 500; k++) {
        fill(v, sizeof(v), (unsigned)k);
        st = post_send(n, 0, TMX_WR_SEND, v, 64, 0, TMX_SEND_INLINE, k, 0, 0, 0);
        if (st != TMX_OK) {
            break;
        }
    }
    CHECK(st == TMX_ERR_NO_RESOURCE);
    sh->addr[1][0] = k;
    CHECK(node_barrier(n, 2) == 0);
    CHECK(node_barrier(n, 3) == 0); /* receives posted: the ring drains */
    CHECK(post_send_retry(n, 0, TMX_WR_SEND, v, 64, 0, TMX_SEND_INLINE, k, 0) == TMX_OK);
    CHECK(node_barrier(n, 4) == 0);
    node_close(n);
    return 0;
}

Test(soft, ring_full_then_success, .timeout = 30)
{
    tmx_config_t cfg;
    cfg_init(&cfg, -1, 4096);
    run_pair(full_rx, full_tx, &cfg);
}

/* ---------------------------------------------------------------- LOC_LEN_ERR, LOC_PROT_ERR */

/* A receive too short for its message completes LOC_LEN_ERR; one whose key does not cover its
 * buffer completes LOC_PROT_ERR and its buffer stays untouched; the receives after them work. */
static int len_rx(node_t *n, shared_t *sh, int me, const tmx_config_t *cfg)
{
    uint8_t   small[16], big[256];
    tmx_mr_t *mr1, *mr2;
    tmx_wc_t  wc;

    memset(big, 0, sizeof(big));
    TRY(node_open(n, sh, me, cfg, 1, 1));
    mr1 = reg(n, small, sizeof(small), TMX_ACCESS_LOCAL_WRITE);
    mr2 = reg(n, big, sizeof(big), TMX_ACCESS_LOCAL_WRITE);
    CHECK(mr1 != NULL && mr2 != NULL);
    CHECK(post_recv(n, 0, small, sizeof(small), mr1->lkey, 1) == TMX_OK);
    CHECK(post_recv(n, 0, big, 64, mr2->lkey, 2) == TMX_OK);
    CHECK(post_recv(n, 0, big + 128, 64, mr2->lkey + 1, 3) == TMX_OK); /* stale generation */
    CHECK(post_recv(n, 0, big + 192, 64, mr2->lkey, 4) == TMX_OK);
    TRY(node_connect(n));
    CHECK(node_wc(n, &wc) == 0 && wc.wr_id == 1);
    CHECK(wc.status == TMX_WC_LOC_LEN_ERR && wc.byte_len == 100);
    CHECK(node_wc(n, &wc) == 0 && wc.wr_id == 2);
    CHECK(wc.status == TMX_WC_SUCCESS && wc.byte_len == 50 && same(big, 50, 2));
    CHECK(node_wc(n, &wc) == 0 && wc.wr_id == 3 && wc.status == TMX_WC_LOC_PROT_ERR);
    for (int i = 128; i < 192; i++) {
        CHECK(big[i] == 0);
    }
    CHECK(node_wc(n, &wc) == 0 && wc.wr_id == 4);
    CHECK(wc.status == TMX_WC_SUCCESS && wc.byte_len == 30 && same(big + 192, 30, 4));
    CHECK(node_barrier(n, 2) == 0);
    n->ops->mr_dereg(mr1);
    n->ops->mr_dereg(mr2);
    node_close(n);
    return 0;
}

static int len_tx(node_t *n, shared_t *sh, int me, const tmx_config_t *cfg)
{
    uint8_t v[100];

    TRY(node_open(n, sh, me, cfg, 1, 1));
    TRY(node_connect(n));
    fill(v, 100, 1);
    CHECK(post_send_retry(n, 0, TMX_WR_SEND, v, 100, 0, TMX_SEND_INLINE, 1, 0) == TMX_OK);
    fill(v, 50, 2);
    CHECK(post_send_retry(n, 0, TMX_WR_SEND, v, 50, 0, TMX_SEND_INLINE, 2, 0) == TMX_OK);
    fill(v, 20, 3);
    CHECK(post_send_retry(n, 0, TMX_WR_SEND, v, 20, 0, TMX_SEND_INLINE, 3, 0) == TMX_OK);
    fill(v, 30, 4);
    CHECK(post_send_retry(n, 0, TMX_WR_SEND, v, 30, 0, TMX_SEND_INLINE, 4, 0) == TMX_OK);
    CHECK(node_barrier(n, 2) == 0);
    node_close(n);
    return 0;
}

Test(soft, loc_len_err, .timeout = 30)
{
    tmx_config_t cfg;
    cfg_init(&cfg, -1, 65536);
    run_pair(len_rx, len_tx, &cfg);
}

/* ---------------------------------------------------------------- RDMA, keys */

#define TSZ 65536

static int rdma_target(node_t *n, shared_t *sh, int me, const tmx_config_t *cfg)
{
    uint8_t  *t  = malloc(TSZ), *ro = malloc(4096), *gone = malloc(4096), imm_buf[8];
    tmx_mr_t *mr, *mro, *mgone, *mimm;
    tmx_wc_t  wc;

    TRY(node_open(n, sh, me, cfg, 1, 1));
    CHECK(t != NULL && ro != NULL && gone != NULL);
    fill(t, TSZ, 1);
    fill(ro, 4096, 2);
    fill(gone, 4096, 3);
    mr    = reg(n, t, TSZ, TMX_ACCESS_LOCAL_WRITE | TMX_ACCESS_REMOTE_READ |
                           TMX_ACCESS_REMOTE_WRITE);
    mro   = reg(n, ro, 4096, TMX_ACCESS_REMOTE_READ);
    mgone = reg(n, gone, 4096, TMX_ACCESS_REMOTE_READ | TMX_ACCESS_REMOTE_WRITE);
    mimm  = reg(n, imm_buf, 8, TMX_ACCESS_LOCAL_WRITE);
    CHECK(mr != NULL && mro != NULL && mgone != NULL && mimm != NULL);
    sh->addr[0][0] = (uintptr_t)t;
    sh->rkey[0][0] = mr->rkey;
    sh->addr[0][1] = (uintptr_t)ro;
    sh->rkey[0][1] = mro->rkey;
    sh->addr[0][2] = (uintptr_t)gone;
    sh->rkey[0][2] = mgone->rkey;
    n->ops->mr_dereg(mgone);
    CHECK(post_recv(n, 0, imm_buf, 8, mimm->lkey, 42) == TMX_OK);
    TRY(node_connect(n));
    CHECK(node_barrier(n, 3) == 0); /* polling meanwhile serves the fallback */
    CHECK(same(t, 40000, 9));
    CHECK(t[60000] == 0x5a && t[60007] == 0x5a);
    for (size_t i = 40000; i < TSZ; i++) {
        if (i < 60000 || i >= 60008) {
            CHECK(t[i] == pattern(i, 1)); /* includes the out-of-bounds target */
        }
    }
    CHECK(same(ro, 4096, 2));
    CHECK(same(gone, 4096, 3));
    CHECK(node_wc(n, &wc) == 0 && wc.wr_id == 42 && wc.status == TMX_WC_SUCCESS);
    CHECK(wc.opcode == TMX_WC_RECV_RDMA_WITH_IMM && (wc.wc_flags & TMX_WC_WITH_IMM));
    CHECK(wc.imm_data == 77 && wc.byte_len == 8);
    CHECK(n->nstash == 0);
    CHECK(node_barrier(n, 4) == 0);
    n->ops->mr_dereg(mr);
    n->ops->mr_dereg(mro);
    n->ops->mr_dereg(mimm);
    free(t);
    free(ro);
    free(gone);
    node_close(n);
    return 0;
}

static int rdma_one(node_t *n, tmx_wr_opcode_t op, void *buf, uint32_t len, uint32_t lkey,
                    uint64_t raddr, uint32_t rkey, tmx_wc_status_t expect)
{
    tmx_wc_t wc;
    double   end = tmx_time_sec() + 5;
    int      st;

    while ((st = post_send(n, 0, op, buf, len, lkey, TMX_SEND_SIGNALED, 5, raddr, rkey, 77)) ==
           TMX_ERR_NO_RESOURCE && tmx_time_sec() < end) {
        node_poll(n);
    }
    CHECK(st == TMX_OK);
    CHECK(node_wc(n, &wc) == 0 && wc.wr_id == 5);
    CHECK(wc.status == expect || (fprintf(stderr, "status %d\n", wc.status), 0));
    CHECK(wc.opcode == (op == TMX_WR_RDMA_READ ? TMX_WC_RDMA_READ : TMX_WC_RDMA_WRITE));
    return 0;
}

static int rdma_initiator(node_t *n, shared_t *sh, int me, const tmx_config_t *cfg)
{
    uint8_t  *l = malloc(TSZ);
    tmx_mr_t *mr;
    uint64_t  t, ro, gone;
    uint32_t  tk, rok, gonek;

    TRY(node_open(n, sh, me, cfg, 1, 1));
    CHECK(l != NULL);
    mr = reg(n, l, TSZ, TMX_ACCESS_LOCAL_WRITE);
    CHECK(mr != NULL);
    TRY(node_connect(n));
    t = sh->addr[0][0], tk = sh->rkey[0][0];
    ro = sh->addr[0][1], rok = sh->rkey[0][1];
    gone = sh->addr[0][2], gonek = sh->rkey[0][2];

    fill(l, 40000, 9);
    TRY(rdma_one(n, TMX_WR_RDMA_WRITE, l, 40000, mr->lkey, t, tk, TMX_WC_SUCCESS));
    memset(l, 0, TSZ);
    TRY(rdma_one(n, TMX_WR_RDMA_READ, l, 40000, mr->lkey, t, tk, TMX_WC_SUCCESS));
    CHECK(same(l, 40000, 9));
    TRY(rdma_one(n, TMX_WR_RDMA_READ, l, 100, mr->lkey, t + 50000, tk, TMX_WC_SUCCESS));
    for (size_t i = 0; i < 100; i++) {
        CHECK(l[i] == pattern(50000 + i, 1));
    }
    TRY(rdma_one(n, TMX_WR_RDMA_READ, l, 4096, mr->lkey, ro, rok, TMX_WC_SUCCESS));
    CHECK(same(l, 4096, 2));
    memset(l, 0x5a, 8);
    TRY(rdma_one(n, TMX_WR_RDMA_WRITE_WITH_IMM, l, 8, mr->lkey, t + 60000, tk, TMX_WC_SUCCESS));

    /* refused at the target: bounds, overflow, rights, deregistered, unknown key */
    memset(l, 0xee, TSZ);
    TRY(rdma_one(n, TMX_WR_RDMA_WRITE, l, 100, mr->lkey, t + TSZ - 10, tk,
                 TMX_WC_REM_ACCESS_ERR));
    TRY(rdma_one(n, TMX_WR_RDMA_READ, l, 100, mr->lkey, t + TSZ - 10, tk,
                 TMX_WC_REM_ACCESS_ERR));
    TRY(rdma_one(n, TMX_WR_RDMA_WRITE, l, 100, mr->lkey, UINT64_MAX - 10, tk,
                 TMX_WC_REM_ACCESS_ERR));
    TRY(rdma_one(n, TMX_WR_RDMA_WRITE, l, 100, mr->lkey, ro, rok, TMX_WC_REM_ACCESS_ERR));
    TRY(rdma_one(n, TMX_WR_RDMA_WRITE, l, 100, mr->lkey, gone, gonek, TMX_WC_REM_ACCESS_ERR));
    TRY(rdma_one(n, TMX_WR_RDMA_READ, l, 100, mr->lkey, gone, gonek, TMX_WC_REM_ACCESS_ERR));
    TRY(rdma_one(n, TMX_WR_RDMA_WRITE, l, 100, mr->lkey, t, tk ^ 0x1000000,
                 TMX_WC_REM_ACCESS_ERR));
    /* a bad local key fails locally */
    TRY(rdma_one(n, TMX_WR_RDMA_READ, l, 100, mr->lkey + 1, t, tk, TMX_WC_LOC_PROT_ERR));
    CHECK(node_barrier(n, 3) == 0);
    CHECK(node_barrier(n, 4) == 0);
    n->ops->mr_dereg(mr);
    free(l);
    node_close(n);
    return 0;
}

Test(soft, rdma_cma, .timeout = 30)
{
    tmx_config_t cfg;
    cfg_init(&cfg, 1, 65536);
    cfg.soft_cma_min = 0; /* every read and write by cross-memory attach */
    run_pair(rdma_target, rdma_initiator, &cfg);
}

/* TMX_SOFT_CMA_MIN: a target that does not poll until stage 2, for cma_min_initiator. */
static int cma_min_target(node_t *n, shared_t *sh, int me, const tmx_config_t *cfg)
{
    uint8_t  *t = malloc(TSZ);
    tmx_mr_t *mr;
    double    end;

    TRY(node_open(n, sh, me, cfg, 1, 1));
    CHECK(t != NULL);
    fill(t, TSZ, 5);
    mr = reg(n, t, TSZ, TMX_ACCESS_REMOTE_READ);
    CHECK(mr != NULL);
    sh->addr[0][0] = (uintptr_t)t;
    sh->rkey[0][0] = mr->rkey;
    TRY(node_connect(n));
    CHECK(node_barrier(n, 1) == 0);
    /* no progress of ours until the initiator says so: only cross-memory attach reads now */
    end = tmx_time_sec() + 10;
    while (atomic_load(&sh->stage[1 - me]) < 2) {
        CHECK(tmx_time_sec() < end);
        usleep(1000);
    }
    CHECK(node_barrier(n, 3) == 0); /* polling meanwhile serves the read through the rings */
    n->ops->mr_dereg(mr);
    free(t);
    node_close(n);
    return 0;
}

static int cma_min_initiator(node_t *n, shared_t *sh, int me, const tmx_config_t *cfg)
{
    uint8_t  *l = calloc(1, TSZ);
    tmx_mr_t *mr;
    tmx_wc_t  wc;
    double    end;

    TRY(node_open(n, sh, me, cfg, 1, 1));
    CHECK(l != NULL);
    mr = reg(n, l, TSZ, TMX_ACCESS_LOCAL_WRITE);
    CHECK(mr != NULL);
    TRY(node_connect(n));
    CHECK(node_barrier(n, 1) == 0);
    /* at TMX_SOFT_CMA_MIN (8 KiB here): read by us alone while the target does not poll */
    TRY(rdma_one(n, TMX_WR_RDMA_READ, l, 8192, mr->lkey, sh->addr[0][0], sh->rkey[0][0],
                 TMX_WC_SUCCESS));
    CHECK(same(l, 8192, 5));
    /* below it: through the rings, so it waits for the target's progress */
    CHECK(post_send(n, 0, TMX_WR_RDMA_READ, l + 8192, 8191, mr->lkey, TMX_SEND_SIGNALED, 6,
                    sh->addr[0][0] + 8192, sh->rkey[0][0], 0) == TMX_OK);
    end = tmx_time_sec() + 0.3;
    while (tmx_time_sec() < end) {
        node_poll(n);
    }
    CHECK(n->nstash == 0);
    atomic_store(&sh->stage[me], 2); /* the target polls from now on */
    CHECK(node_wc(n, &wc) == 0 && wc.wr_id == 6 && wc.status == TMX_WC_SUCCESS);
    CHECK(wc.opcode == TMX_WC_RDMA_READ);
    for (size_t i = 0; i < 8191; i++) {
        CHECK(l[8192 + i] == pattern(8192 + i, 5));
    }
    CHECK(node_barrier(n, 3) == 0);
    n->ops->mr_dereg(mr);
    free(l);
    node_close(n);
    return 0;
}

Test(soft, rdma_cma_min, .timeout = 30)
{
    tmx_config_t cfg;
    cfg_init(&cfg, 1, 65536);
    cfg.soft_cma_min = 8192;
    run_pair(cma_min_target, cma_min_initiator, &cfg);
}

Test(soft, rdma_fallback, .timeout = 30)
{
    tmx_config_t cfg;
    cfg_init(&cfg, 0, 65536);
    run_pair(rdma_target, rdma_initiator, &cfg);
}

/* ---------------------------------------------------------------- single-process checks */

static int count_segments(pid_t pid)
{
    char           prefix[64];
    DIR           *d = opendir("/dev/shm");
    struct dirent *e;
    int            count = 0;

    if (d == NULL) {
        return -1;
    }
    snprintf(prefix, sizeof(prefix), "tmx-%u-%d-", (unsigned)getuid(), (int)pid);
    while ((e = readdir(d)) != NULL) {
        count += strncmp(e->d_name, prefix, strlen(prefix)) == 0;
    }
    closedir(d);
    return count;
}

static int garbage_role(node_t *n, shared_t *sh, int me, const tmx_config_t *cfg)
{
    uint8_t       junk[TMX_DEV_ADDR_MAX], blob[TMX_DEV_ADDR_MAX];
    tmx_ah_t     *ah = NULL;
    tmx_qp_attr_t mod;
    size_t        len;

    TRY(node_open(n, sh, me, cfg, 1, 0));
    len = sh->dev_len[me];
    memcpy(blob, sh->dev[me], len);
    for (size_t i = 0; i < sizeof(junk); i++) {
        junk[i] = (uint8_t)(i * 31 + 5);
    }
    CHECK(n->ops->dev_reachable(n->dev, blob, len) == 1);
    CHECK(n->ops->dev_reachable(n->dev, junk, len) == 0);
    CHECK(n->ops->dev_reachable(n->dev, blob, len - 1) == 0);
    CHECK(n->ops->ah_create(n->pd, junk, len, &ah) == TMX_ERR_INVALID_ADDR);
    CHECK(n->ops->ah_create(n->pd, blob, 3, &ah) == TMX_ERR_INVALID_ADDR);
    CHECK(n->ops->ah_create(n->pd, NULL, 0, &ah) == TMX_ERR_INVALID_ADDR);
    if (cfg->soft_memfd == 1) {
        int32_t fd, devnull = open("/dev/null", O_RDWR);

        memcpy(&fd, blob + len - TMX_SOFT_FD, sizeof(fd));
        CHECK(fd >= 0 && fd == ((tmx_soft_dev_t *)n->dev)->fd && devnull >= 0);
        fd = 1000000; /* a descriptor that is not open */
        memcpy(blob + len - TMX_SOFT_FD, &fd, sizeof(fd));
        CHECK(n->ops->ah_create(n->pd, blob, len, &ah) == TMX_ERR_UNREACHABLE);
        memcpy(blob + len - TMX_SOFT_FD, &devnull, sizeof(devnull)); /* not a file */
        CHECK(n->ops->ah_create(n->pd, blob, len, &ah) == TMX_ERR_UNREACHABLE);
        close(devnull);
        blob[len - TMX_SOFT_NAME] = '/'; /* a memfd and a name */
        CHECK(n->ops->ah_create(n->pd, blob, len, &ah) == TMX_ERR_INVALID_ADDR);
        fd = -2;
        memcpy(blob + len - TMX_SOFT_FD, &fd, sizeof(fd));
        CHECK(n->ops->ah_create(n->pd, blob, len, &ah) == TMX_ERR_INVALID_ADDR);
    } else {
        blob[len - TMX_SOFT_NAME + 6] ^= 1; /* a segment that does not exist */
        CHECK(n->ops->ah_create(n->pd, blob, len, &ah) == TMX_ERR_UNREACHABLE);
    }
    memset(blob + len - TMX_SOFT_NAME, 'x', TMX_SOFT_NAME); /* a name without its NUL */
    CHECK(n->ops->dev_reachable(n->dev, blob, len) == 0);
    CHECK(n->ops->ah_create(n->pd, blob, len, &ah) == TMX_ERR_INVALID_ADDR);
    CHECK(ah == NULL);
    memset(&mod, 0, sizeof(mod));
    mod.state           = TMX_QPS_RTR;
    mod.remote_addr     = junk;
    mod.remote_addr_len = sizeof(junk);
    CHECK(n->ops->qp_modify(n->qp[0], &mod, TMX_QP_ATTR_STATE | TMX_QP_ATTR_REMOTE) ==
          TMX_ERR_INVALID_ADDR);
    CHECK(n->qp[0]->state == TMX_QPS_INIT);
    node_close(n);
    return 0;
}

Test(soft, garbage_address, .timeout = 10)
{
    tmx_config_t cfg;
    shared_t    *sh = shared_new();
    node_t      *n  = calloc(1, sizeof(*n));
    int          rc;

    for (int memfd = 0; memfd <= 1; memfd++) {
        cfg_init(&cfg, -1, 65536);
        cfg.soft_memfd = memfd;
        rc = garbage_role(n, sh, 0, &cfg);
        cr_assert_eq(rc, 0, "memfd %d: failed at line %d", memfd, rc);
    }
    free(n);
}

/* A memfd that could shrink under our mapping (SIGBUS) is no segment: the same header in an
 * unsealed copy is refused, and taken once sealed. */
Test(soft, unsealed_memfd_refused, .timeout = 10)
{
    tmx_config_t    cfg;
    shared_t       *sh = shared_new();
    node_t         *n  = calloc(1, sizeof(*n));
    tmx_soft_dev_t *dev;
    tmx_ah_t       *ah = NULL;
    uint8_t         blob[TMX_DEV_ADDR_MAX];
    size_t          len;
    int32_t         fd;
    int             rc;

    cfg_init(&cfg, -1, 65536);
    cfg.soft_memfd = 1;
    rc = node_open(n, sh, 0, &cfg, 0, 0);
    cr_assert_eq(rc, 0, "failed at line %d", rc);
    dev = (tmx_soft_dev_t *)n->dev;
    fd  = memfd_create("copy", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    cr_assert(fd >= 0);
    cr_assert_eq(fchmod(fd, 0600), 0);
    cr_assert_eq(ftruncate(fd, (off_t)dev->size), 0);
    cr_assert_eq(pwrite(fd, dev->hdr, sizeof(*dev->hdr), 0), (ssize_t)sizeof(*dev->hdr));
    len = sh->dev_len[0];
    memcpy(blob, sh->dev[0], len);
    memcpy(blob + len - TMX_SOFT_FD, &fd, sizeof(fd));
    cr_expect_eq(n->ops->ah_create(n->pd, blob, len, &ah), TMX_ERR_INVALID_ADDR);
    cr_assert_eq(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL), 0);
    cr_expect_eq(n->ops->ah_create(n->pd, blob, len, &ah), TMX_OK);
    if (ah != NULL) {
        n->ops->ah_destroy(ah);
    }
    node_close(n);
    close(fd);
    free(n);
}

static int transitions_role(node_t *n, shared_t *sh, int me, const tmx_config_t *cfg)
{
    tmx_qp_attr_t       mod;
    tmx_qp_init_attr_t  qa;
    tmx_srq_init_attr_t sa;
    tmx_qp_t           *qp, *xqp = NULL;
    tmx_srq_t          *srq = NULL;
    uint8_t             blob[TMX_QP_ADDR_MAX], buf[8] = {1, 2, 3, 4, 5, 6, 7, 8}, rbuf[8];
    size_t              blen = sizeof(blob);
    tmx_mr_t           *mr;
    tmx_wc_t            wc;
    uint64_t            caps;

    TRY(node_open(n, sh, me, cfg, 0, 0));
    caps = n->dev->attr.caps;
    CHECK((caps & (TMX_DEV_CAP_RC | TMX_DEV_CAP_UD | TMX_DEV_CAP_SRQ | TMX_DEV_CAP_RMA |
                   TMX_DEV_CAP_LOCAL_ONLY)) ==
          (TMX_DEV_CAP_RC | TMX_DEV_CAP_UD | TMX_DEV_CAP_SRQ | TMX_DEV_CAP_RMA |
           TMX_DEV_CAP_LOCAL_ONLY));
    CHECK(!(caps & (TMX_DEV_CAP_TM | TMX_DEV_CAP_XRC)));
    CHECK(n->dev->attr.max_qp == 8 && n->dev->attr.max_mr == 64);
    CHECK(n->dev->attr.max_ud_msg >= 1024 && n->dev->attr.max_inline >= 32);
    memset(&sa, 0, sizeof(sa));
    sa.type   = TMX_SRQT_TM;
    sa.max_wr = 16;
    sa.cq     = n->cq;
    CHECK(n->ops->srq_create(n->pd, &sa, &srq) == TMX_ERR_UNSUPPORTED);
    sa.type = TMX_SRQT_XRC;
    CHECK(n->ops->srq_create(n->pd, &sa, &srq) == TMX_ERR_UNSUPPORTED);
    memset(&qa, 0, sizeof(qa));
    qa.type    = TMX_QPT_XRC_INI;
    qa.send_cq = n->cq;
    qa.recv_cq = n->cq;
    CHECK(n->ops->qp_create(n->pd, &qa, &xqp) == TMX_ERR_UNSUPPORTED);
    qa.type        = TMX_QPT_RC;
    qa.max_send_wr = 16;
    qa.max_recv_wr = 16;
    CHECK(n->ops->qp_create(n->pd, &qa, &qp) == TMX_OK);
    n->qp[0] = qp;
    n->nqp   = 1;
    CHECK(n->ops->qp_get_addr(qp, blob, &blen) == TMX_OK);
    memset(&mod, 0, sizeof(mod));
    mod.state = TMX_QPS_RTR;
    CHECK(n->ops->qp_modify(qp, &mod, TMX_QP_ATTR_STATE) == TMX_ERR_INVALID_PARAM);
    mod.state = TMX_QPS_RTS;
    CHECK(n->ops->qp_modify(qp, &mod, TMX_QP_ATTR_STATE) == TMX_ERR_INVALID_PARAM);
    mod.state = TMX_QPS_INIT;
    CHECK(n->ops->qp_modify(qp, &mod, 0) == TMX_ERR_INVALID_PARAM);
    CHECK(n->ops->qp_modify(qp, &mod, TMX_QP_ATTR_STATE) == TMX_OK);
    CHECK(n->ops->qp_modify(qp, &mod, TMX_QP_ATTR_STATE) == TMX_ERR_INVALID_PARAM);
    mod.state = TMX_QPS_RTS;
    CHECK(n->ops->qp_modify(qp, &mod, TMX_QP_ATTR_STATE) == TMX_ERR_INVALID_PARAM);
    CHECK(post_send(n, 0, TMX_WR_SEND, buf, 8, 0, TMX_SEND_INLINE, 1, 0, 0, 0) ==
          TMX_ERR_INVALID_PARAM);
    mod.state = TMX_QPS_RTR;
    CHECK(n->ops->qp_modify(qp, &mod, TMX_QP_ATTR_STATE) == TMX_ERR_INVALID_PARAM);
    /* loopback: the QP connected to itself */
    mod.remote_addr     = blob;
    mod.remote_addr_len = blen;
    CHECK(n->ops->qp_modify(qp, &mod, TMX_QP_ATTR_STATE | TMX_QP_ATTR_REMOTE) == TMX_OK);
    CHECK(post_send(n, 0, TMX_WR_SEND, buf, 8, 0, TMX_SEND_INLINE, 1, 0, 0, 0) ==
          TMX_ERR_INVALID_PARAM); /* RTR is not RTS */
    mod.state = TMX_QPS_INIT;
    CHECK(n->ops->qp_modify(qp, &mod, TMX_QP_ATTR_STATE) == TMX_ERR_INVALID_PARAM);
    mod.state = TMX_QPS_RTS;
    CHECK(n->ops->qp_modify(qp, &mod, TMX_QP_ATTR_STATE) == TMX_OK);
    CHECK(n->ops->qp_modify(qp, &mod, TMX_QP_ATTR_STATE) == TMX_ERR_INVALID_PARAM);
    mr = reg(n, rbuf, sizeof(rbuf), TMX_ACCESS_LOCAL_WRITE);
    CHECK(mr != NULL);
    CHECK(post_recv(n, 0, rbuf, 8, mr->lkey, 9) == TMX_OK);
    CHECK(post_send(n, 0, TMX_WR_SEND, buf, 8, 0, TMX_SEND_INLINE | TMX_SEND_SIGNALED, 1, 0, 0,
                    0) == TMX_OK);
    CHECK(node_wc(n, &wc) == 0 && wc.wr_id == 1 && wc.opcode == TMX_WC_SEND);
    CHECK(node_wc(n, &wc) == 0 && wc.wr_id == 9 && wc.opcode == TMX_WC_RECV);
    CHECK(wc.status == TMX_WC_SUCCESS && memcmp(rbuf, buf, 8) == 0);
    /* to ERR: a posted receive is flushed */
    CHECK(post_recv(n, 0, rbuf, 8, mr->lkey, 10) == TMX_OK);
    mod.state = TMX_QPS_ERR;
    CHECK(n->ops->qp_modify(qp, &mod, TMX_QP_ATTR_STATE) == TMX_OK);
    CHECK(node_wc(n, &wc) == 0 && wc.wr_id == 10 && wc.status == TMX_WC_WR_FLUSH_ERR);
    CHECK(post_send(n, 0, TMX_WR_SEND, buf, 8, 0, TMX_SEND_INLINE, 1, 0, 0, 0) ==
          TMX_ERR_INVALID_PARAM);
    n->ops->mr_dereg(mr);
    node_close(n);
    return 0;
}

/* A freed QP slot (its control line) is given out again as late as possible (next fit): a
 * peer QP that was never told its partner went away (a failure, a timeout) then finds the new
 * generation before its records could be taken for the new QP's. */
static int next_fit_role(node_t *n, shared_t *sh, int me, const tmx_config_t *cfg)
{
    tmx_qp_init_attr_t qa;
    tmx_qp_t          *qp[8];
    uint32_t           first;

    TRY(node_open(n, sh, me, cfg, 0, 0));
    memset(&qa, 0, sizeof(qa));
    qa.type        = TMX_QPT_RC;
    qa.send_cq     = n->cq;
    qa.recv_cq     = n->cq;
    qa.max_send_wr = 16;
    qa.max_recv_wr = 16;
    CHECK(n->ops->qp_create(n->pd, &qa, &qp[0]) == TMX_OK);
    first = qp[0]->qp_num;
    n->ops->qp_destroy(qp[0]);
    CHECK(n->ops->qp_create(n->pd, &qa, &qp[0]) == TMX_OK);
    CHECK(qp[0]->qp_num != first); /* not the ring just freed, while others are free */
    n->ops->qp_destroy(qp[0]);
    /* every ring is still usable: the search wraps */
    for (int i = 0; i < 8; i++) {
        CHECK(n->ops->qp_create(n->pd, &qa, &qp[i]) == TMX_OK);
    }
    CHECK(n->ops->qp_create(n->pd, &qa, &qp[0]) == TMX_ERR_NO_RESOURCE);
    for (int i = 0; i < 8; i++) {
        n->ops->qp_destroy(qp[i]);
    }
    node_close(n);
    return 0;
}

Test(soft, freed_ring_reused_last, .timeout = 10)
{
    tmx_config_t cfg;

    cfg_init(&cfg, -1, 65536);
    run_alone(next_fit_role, &cfg);
}

Test(soft, qp_transitions_and_caps, .timeout = 10)
{
    tmx_config_t cfg;

    cfg_init(&cfg, -1, 65536);
    run_alone(transitions_role, &cfg);
}

Test(soft, no_leftover_segment_after_close, .timeout = 10)
{
    tmx_config_t cfg;
    shared_t    *sh = shared_new();
    node_t      *n  = calloc(1, sizeof(*n));
    int          rc;

    for (int memfd = 0; memfd <= 1; memfd++) {
        cfg_init(&cfg, -1, 65536);
        cfg.soft_memfd = memfd;
        cr_assert_eq(count_segments(getpid()), 0);
        rc = node_open(n, sh, 0, &cfg, 1, 1);
        cr_assert_eq(rc, 0, "failed at line %d", rc);
        /* a memfd is never in /dev/shm; a named segment is, until close */
        cr_assert_eq(count_segments(getpid()), memfd ? 0 : 1);
        cr_assert_eq(((tmx_soft_dev_t *)n->dev)->fd >= 0, memfd);
        node_close(n);
        cr_assert_eq(count_segments(getpid()), 0);
    }
    free(n);
}

/* The sweep at device open removes a dead process's named segment, and nothing that only
 * looks like one. */
Test(soft, sweep_takes_only_segments, .timeout = 10)
{
    static const char *const names[] = {"0", "test", "0x", ""};
    tmx_config_t cfg;
    shared_t    *sh = shared_new();
    node_t      *n  = calloc(1, sizeof(*n));
    char         path[4][96];
    pid_t        dead;
    int          rc;

    fflush(NULL);
    dead = fork();
    cr_assert(dead >= 0);
    if (dead == 0) {
        _exit(0);
    }
    cr_assert_eq(waitpid(dead, NULL, 0), dead);
    for (int i = 0; i < 4; i++) {
        int fd;

        snprintf(path[i], sizeof(path[i]), "/tmx-%u-%d-%s", (unsigned)getuid(), (int)dead,
                 names[i]);
        fd = shm_open(path[i], O_RDWR | O_CREAT | O_EXCL, 0600);
        cr_assert(fd >= 0, "%s: %s", path[i], strerror(errno));
        close(fd);
    }
    cfg_init(&cfg, -1, 65536);
    rc = node_open(n, sh, 0, &cfg, 0, 0);
    cr_assert_eq(rc, 0, "failed at line %d", rc);
    node_close(n);
    for (int i = 0; i < 4; i++) {
        int gone = shm_unlink(path[i]) != 0;

        cr_expect_eq(gone, i == 0, "%s %s", path[i], gone ? "removed" : "kept");
    }
    free(n);
}

/* ---------------------------------------------------------------- UD */

static int ud_open(node_t *n, shared_t *sh, int me, const tmx_config_t *cfg)
{
    tmx_qp_init_attr_t qa;
    tmx_qp_attr_t      mod;
    tmx_qp_t          *second = NULL;

    TRY(node_open(n, sh, me, cfg, 0, 0));
    memset(&qa, 0, sizeof(qa));
    qa.type        = TMX_QPT_UD;
    qa.send_cq     = n->cq;
    qa.recv_cq     = n->cq;
    qa.max_send_wr = 16;
    qa.max_recv_wr = 16;
    CHECK(n->ops->qp_create(n->pd, &qa, &n->qp[0]) == TMX_OK);
    n->nqp = 1;
    CHECK(n->ops->qp_create(n->pd, &qa, &second) == TMX_ERR_NO_RESOURCE);
    memset(&mod, 0, sizeof(mod));
    for (tmx_qp_state_t s = TMX_QPS_INIT; s <= TMX_QPS_RTS; s++) {
        mod.state = s;
        CHECK(n->ops->qp_modify(n->qp[0], &mod, TMX_QP_ATTR_STATE) == TMX_OK);
    }
    sh->ud_qpn[me] = n->qp[0]->qp_num;
    return 0;
}

static int ud_rx(node_t *n, shared_t *sh, int me, const tmx_config_t *cfg)
{
    uint8_t   buf[2][1024];
    tmx_mr_t *mr;
    tmx_wc_t  wc;

    TRY(ud_open(n, sh, me, cfg));
    mr = reg(n, buf, sizeof(buf), TMX_ACCESS_LOCAL_WRITE);
    CHECK(mr != NULL);
    CHECK(post_recv(n, 0, buf[0], 1024, mr->lkey, 1) == TMX_OK);
    CHECK(post_recv(n, 0, buf[1], 16, mr->lkey, 2) == TMX_OK);
    CHECK(node_barrier(n, 1) == 0);
    CHECK(node_wc(n, &wc) == 0 && wc.wr_id == 1 && wc.status == TMX_WC_SUCCESS);
    CHECK(wc.opcode == TMX_WC_RECV && wc.byte_len == 300 && same(buf[0], 300, 4));
    CHECK(wc.src_qp == sh->ud_qpn[1] && wc.qp_num == n->qp[0]->qp_num);
    CHECK(node_wc(n, &wc) == 0 && wc.wr_id == 2 && wc.status == TMX_WC_LOC_LEN_ERR);
    CHECK(node_barrier(n, 2) == 0);
    CHECK(n->nstash == 0); /* the datagram for another qp number was dropped */
    n->ops->mr_dereg(mr);
    node_close(n);
    return 0;
}

static int ud_tx(node_t *n, shared_t *sh, int me, const tmx_config_t *cfg)
{
    uint8_t        v[300];
    tmx_ah_t      *ah;
    tmx_sge_t      sge = {.addr = (uintptr_t)v, .length = 300};
    tmx_send_wr_t  wr, *bad;
    tmx_wc_t       wc;

    TRY(ud_open(n, sh, me, cfg));
    CHECK(node_barrier(n, 1) == 0);
    CHECK(n->ops->ah_create(n->pd, sh->dev[0], sh->dev_len[0], &ah) == TMX_OK);
    fill(v, sizeof(v), 4);
    memset(&wr, 0, sizeof(wr));
    wr.wr_id         = 3;
    wr.sg_list       = &sge;
    wr.num_sge       = 1;
    wr.opcode        = TMX_WR_SEND;
    wr.send_flags    = TMX_SEND_INLINE | TMX_SEND_SIGNALED;
    wr.ud.ah         = ah;
    wr.ud.remote_qpn = sh->ud_qpn[0] + 1; /* nobody: dropped */
    CHECK(n->ops->post_send(n->qp[0], &wr, &bad) == TMX_OK);
    CHECK(node_wc(n, &wc) == 0 && wc.wr_id == 3 && wc.status == TMX_WC_SUCCESS);
    wr.ud.remote_qpn = sh->ud_qpn[0];
    CHECK(n->ops->post_send(n->qp[0], &wr, &bad) == TMX_OK);
    CHECK(n->ops->post_send(n->qp[0], &wr, &bad) == TMX_OK); /* into a 16-byte buffer */
    sge.length = (uint32_t)n->dev->attr.max_ud_msg + 1;
    CHECK(n->ops->post_send(n->qp[0], &wr, &bad) == TMX_ERR_INVALID_PARAM);
    CHECK(node_barrier(n, 2) == 0);
    n->ops->ah_destroy(ah);
    node_close(n);
    return 0;
}

Test(soft, ud_datagrams, .timeout = 30)
{
    tmx_config_t cfg;
    cfg_init(&cfg, -1, 65536);
    run_pair(ud_rx, ud_tx, &cfg);
}

/* ---------------------------------------------------------------- peer death */

static int victim_role(node_t *n, shared_t *sh, int me, const tmx_config_t *cfg)
{
    TRY(node_open(n, sh, me, cfg, 1, 1));
    TRY(node_connect(n));
    atomic_store(&sh->stage[me], 2);
    for (;;) {
        pause(); /* never polls: the survivor's READ stays outstanding until we die */
    }
    return 0;
}

static int survivor_role(node_t *n, shared_t *sh, int me, const tmx_config_t *cfg)
{
    uint8_t   l[64];
    tmx_mr_t *mr;
    tmx_wc_t  wc;
    int       got_read = 0, got_async = 0;
    double    end;
    pid_t     victim;

    TRY(node_open(n, sh, me, cfg, 1, 1));
    TRY(node_connect(n));
    while (atomic_load(&sh->stage[1]) < 2) {
        node_poll(n);
    }
    victim = sh->pid[1];
    mr     = reg(n, l, sizeof(l), TMX_ACCESS_LOCAL_WRITE);
    CHECK(mr != NULL);
    CHECK(post_send(n, 0, TMX_WR_RDMA_READ, l, 64, mr->lkey, TMX_SEND_SIGNALED, 11, 4096, 256,
                    0) == TMX_OK);
    CHECK(count_segments(victim) == (((tmx_soft_dev_t *)n->dev)->fd >= 0 ? 0 : 1));
    CHECK(kill(victim, SIGKILL) == 0);
    CHECK(waitpid(victim, NULL, 0) == victim);
    end = tmx_time_sec() + 5;
    while ((!got_read || !got_async) && tmx_time_sec() < end) {
        if (node_wc(n, &wc) != 0) {
            continue;
        }
        if (wc.wr_id == 11) {
            CHECK(wc.status == TMX_WC_RETRY_EXC_ERR || wc.status == TMX_WC_WR_FLUSH_ERR);
            got_read = 1;
        } else if (wc.wr_id == TMX_WR_ID_ASYNC_ERROR) {
            CHECK(wc.status == TMX_WC_RETRY_EXC_ERR && wc.qp_num == n->qp[0]->qp_num);
            got_async = 1;
        }
    }
    CHECK(got_read && got_async);
    CHECK(n->qp[0]->state == TMX_QPS_ERR);
    CHECK(post_send(n, 0, TMX_WR_SEND, l, 8, 0, TMX_SEND_INLINE, 1, 0, 0, 0) ==
          TMX_ERR_INVALID_PARAM);
    n->ops->mr_dereg(mr);
    node_close(n);
    /* The killed process left its segment; the next device open sweeps it (or another
     * test running in parallel did already). */
    TRY(node_open(n, sh, me, cfg, 0, 0));
    CHECK(count_segments(victim) == 0);
    node_close(n);
    CHECK(count_segments(getpid()) == 0);
    return 0;
}

Test(soft, peer_killed, .timeout = 30)
{
    tmx_config_t cfg;
    shared_t    *sh = shared_new();
    node_t      *n  = calloc(1, sizeof(*n));
    pid_t        pid;
    int          rc;

    cfg_init(&cfg, 0, 65536); /* fallback: the READ waits for the peer */
    fflush(NULL);
    pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        alarm(20);
        _exit(victim_role(n, sh, 1, &cfg) == 0 ? 0 : 1);
    }
    rc = survivor_role(n, sh, 0, &cfg);
    if (rc != 0) {
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
    }
    cr_assert_eq(rc, 0, "failed at line %d", rc);
    free(n);
}

/* Registers memory for the peer to read, connects and exits without closing anything. */
static int dying_target(node_t *n, shared_t *sh, int me, const tmx_config_t *cfg)
{
    static uint8_t t[4096];
    tmx_mr_t      *mr;

    TRY(node_open(n, sh, me, cfg, 1, 1));
    mr = reg(n, t, sizeof(t), TMX_ACCESS_REMOTE_READ);
    CHECK(mr != NULL);
    sh->addr[me][0] = (uintptr_t)t;
    sh->rkey[me][0] = mr->rkey;
    TRY(node_connect(n));
    CHECK(node_barrier(n, 2) == 0);
    _exit(0);
}

/* A READ by cross-memory attach from a process that died (a zombie still: its parent has not
 * reaped it) fails as a dead peer does, not as a remote access error. */
static int dead_reader(node_t *n, shared_t *sh, int me, const tmx_config_t *cfg)
{
    uint8_t   l[4096];
    tmx_mr_t *mr;
    tmx_wc_t  wc;
    double    end;

    TRY(node_open(n, sh, me, cfg, 1, 1));
    mr = reg(n, l, sizeof(l), TMX_ACCESS_LOCAL_WRITE);
    CHECK(mr != NULL);
    TRY(node_connect(n));
    CHECK(((tmx_soft_qp_t *)n->qp[0])->cma == 1);
    CHECK(node_barrier(n, 2) == 0);
    end = tmx_time_sec() + 10;
    while (!tmx_soft_pid_dead(sh->pid[1 - me]) && tmx_time_sec() < end) {
        usleep(1000); /* no polling: the READ itself must find the peer gone */
    }
    CHECK(tmx_soft_pid_dead(sh->pid[1 - me]));
    CHECK(post_send(n, 0, TMX_WR_RDMA_READ, l, sizeof(l), mr->lkey, TMX_SEND_SIGNALED, 11,
                    sh->addr[1 - me][0], sh->rkey[1 - me][0], 0) == TMX_OK);
    CHECK(node_wc(n, &wc) == 0 && wc.wr_id == 11);
    CHECK(wc.status == TMX_WC_RETRY_EXC_ERR || (fprintf(stderr, "status %d\n", wc.status), 0));
    CHECK(node_wc(n, &wc) == 0 && wc.wr_id == TMX_WR_ID_ASYNC_ERROR);
    CHECK(wc.status == TMX_WC_RETRY_EXC_ERR && n->qp[0]->state == TMX_QPS_ERR);
    n->ops->mr_dereg(mr);
    node_close(n);
    return 0;
}

Test(soft, cma_read_from_dead_peer, .timeout = 30)
{
    tmx_config_t cfg;
    cfg_init(&cfg, 1, 65536);
    run_pair(dead_reader, dying_target, &cfg);
}

/* ---------------------------------------------------------------- a reused pid */

/* struct clone_args of <linux/sched.h> up to set_tid (Linux 5.5), without its macros */
struct test_clone_args {
    uint64_t flags, pidfd, child_tid, parent_tid, exit_signal, stack, stack_size, tls;
    uint64_t set_tid, set_tid_size;
};

/* A child that waits to be killed, with the pid want (clone3's set_tid, which needs
 * CAP_SYS_ADMIN): a dead peer's pid reused at once. -1 with errno when that cannot be. */
static pid_t spawn_at(pid_t want)
{
#ifdef SYS_clone3
    struct test_clone_args ca;
    pid_t                  tid = want, parent = getpid();
    long                   r;

    memset(&ca, 0, sizeof(ca));
    ca.exit_signal  = SIGCHLD;
    ca.set_tid      = (uint64_t)(uintptr_t)&tid;
    ca.set_tid_size = 1;
    fflush(NULL);
    r = syscall(SYS_clone3, &ca, sizeof(ca));
    if (r == 0) {
        /* dies with the test, even one that the runner kills on a timeout */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent) {
            _exit(0);
        }
        alarm(20);
        for (;;) {
            pause();
        }
    }
    return (pid_t)r;
#else
    (void)want;
    errno = ENOSYS;
    return -1;
#endif
}

/* Node 1 in a child that connects its QP, says so with stage 2, and waits to be killed. */
static pid_t fork_sleeper(node_t *n, shared_t *sh, const tmx_config_t *cfg, int connect)
{
    pid_t pid;

    fflush(NULL);
    pid = fork();
    if (pid == 0) {
        alarm(20);
        if (node_open(n, sh, 1, cfg, 1, 1) != 0 || (connect && node_connect(n) != 0)) {
            _exit(1);
        }
        atomic_store(&sh->stage[1], 2);
        for (;;) {
            pause();
        }
    }
    return pid;
}

static void reap(pid_t pid)
{
    if (pid > 0) {
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
    }
}

/* The peer dies and a new process takes its pid at once: the liveness check must still see
 * the peer gone (its pidfd, not its pid) and fail the QP. */
Test(soft, liveness_survives_pid_reuse, .timeout = 30)
{
    tmx_config_t cfg;
    shared_t    *sh = shared_new();
    node_t      *n  = calloc(2, sizeof(*n));
    pid_t        victim, again;
    tmx_wc_t     wc;
    int          rc, got = 0;

    cfg_init(&cfg, -1, 65536);
    victim = fork_sleeper(&n[1], sh, &cfg, 1);
    cr_assert(victim > 0);
    rc = node_open(&n[0], sh, 0, &cfg, 1, 1);
    rc = rc != 0 ? rc : node_connect(&n[0]);
    while (rc == 0 && atomic_load(&sh->stage[1]) < 2) {
        node_poll(&n[0]);
    }
    reap(victim);
    cr_assert_eq(rc, 0, "failed at line %d", rc);
    again = spawn_at(victim);
    if (again < 0) {
        node_close(&n[0]);
        cr_skip_test("cannot create a process with pid %d: %s", (int)victim, strerror(errno));
    }
    cr_expect(!tmx_soft_pid_dead(victim), "the pid names a live process again");
    cr_expect(tmx_soft_rseg_dead(((tmx_soft_qp_t *)n[0].qp[0])->rseg), "the peer is gone");
    while (got == 0 && node_wc(&n[0], &wc) == 0) { /* within seconds of the next check */
        got += wc.wr_id == TMX_WR_ID_ASYNC_ERROR && wc.status == TMX_WC_RETRY_EXC_ERR;
    }
    reap(again);
    cr_expect_eq(got, 1, "the QP to the dead peer failed");
    cr_expect_eq(n[0].qp[0]->state, TMX_QPS_ERR);
    node_close(&n[0]);
    free(n);
}

/* Field 22 of /proc/<pid>/stat, the start time. */
static unsigned long long start_time_of(pid_t pid)
{
    char               buf[1024], *p;
    FILE              *f;
    unsigned long long t = 0;

    snprintf(buf, sizeof(buf), "/proc/%d/stat", (int)pid);
    f = fopen(buf, "r");
    cr_assert(f != NULL && fgets(buf, sizeof(buf), f) != NULL);
    fclose(f);
    p = strrchr(buf, ')');
    cr_assert(p != NULL);
    cr_assert_eq(sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d "
                               "%*d %*d %*d %llu", &t), 1);
    cr_assert(t != 0);
    return t;
}

/* Registers a static buffer (at the same address in every process of this program), connects
 * and waits to be killed. */
static uint8_t reuse_buf[4096];

static pid_t fork_reader_target(node_t *n, shared_t *sh, const tmx_config_t *cfg)
{
    pid_t pid;

    fflush(NULL);
    pid = fork();
    if (pid == 0) {
        tmx_mr_t *mr;

        alarm(20);
        memset(reuse_buf, 0x11, sizeof(reuse_buf));
        if (node_open(n, sh, 1, cfg, 1, 1) != 0) {
            _exit(1);
        }
        mr = reg(n, reuse_buf, sizeof(reuse_buf), TMX_ACCESS_REMOTE_READ);
        if (mr == NULL) {
            _exit(1);
        }
        sh->addr[1][0] = (uintptr_t)reuse_buf;
        sh->rkey[1][0] = mr->rkey;
        if (node_connect(n) != 0) {
            _exit(1);
        }
        atomic_store(&sh->stage[1], 2);
        for (;;) {
            pause();
        }
    }
    return pid;
}

/* A READ by cross-memory attach after the peer died and its pid went to another process
 * (which has the same buffer at the same address: a fork of this program) must not read
 * that process: it fails as on a dead peer. */
Test(soft, cma_read_after_pid_reuse, .timeout = 30)
{
    tmx_config_t cfg;
    shared_t    *sh = shared_new();
    node_t      *n  = calloc(2, sizeof(*n));
    uint8_t      l[4096];
    tmx_mr_t    *mr;
    pid_t        victim, again;
    tmx_wc_t     wc;
    int          rc;

    cfg_init(&cfg, 1, 65536);
    memset(reuse_buf, 0x22, sizeof(reuse_buf)); /* what the new process has there */
    victim = fork_reader_target(&n[1], sh, &cfg);
    cr_assert(victim > 0);
    rc = node_open(&n[0], sh, 0, &cfg, 1, 1);
    rc = rc != 0 ? rc : node_connect(&n[0]);
    while (rc == 0 && atomic_load(&sh->stage[1]) < 2) {
        node_poll(&n[0]);
    }
    reap(victim);
    cr_assert_eq(rc, 0, "failed at line %d", rc);
    mr = reg(&n[0], l, sizeof(l), TMX_ACCESS_LOCAL_WRITE);
    cr_assert(mr != NULL);
    again = spawn_at(victim);
    if (again < 0) {
        node_close(&n[0]);
        cr_skip_test("cannot create a process with pid %d: %s", (int)victim, strerror(errno));
    }
    memset(l, 0, sizeof(l));
    rc = post_send(&n[0], 0, TMX_WR_RDMA_READ, l, sizeof(l), mr->lkey, TMX_SEND_SIGNALED, 7,
                   sh->addr[1][0], sh->rkey[1][0], 0);
    rc = rc != TMX_OK ? rc : node_wc(&n[0], &wc);
    reap(again);
    cr_assert_eq(rc, 0);
    cr_expect(wc.wr_id == 7 && wc.status == TMX_WC_RETRY_EXC_ERR, "status %d", wc.status);
    cr_expect(l[0] == 0, "read 0x%02x from the process that has the pid now", l[0]);
    n[0].ops->mr_dereg(mr);
    node_close(&n[0]);
    free(n);
}

/* The address of a process that died, whose pid a new process has: no connection to it. */
static void reused_pid_unreachable(int memfd)
{
    tmx_config_t cfg;
    shared_t    *sh = shared_new();
    node_t      *n  = calloc(2, sizeof(*n));
    tmx_ah_t    *ah = NULL;
    pid_t        victim, again;
    int          rc;

    cfg_init(&cfg, -1, 65536);
    cfg.soft_memfd = memfd;
    rc = node_open(&n[0], sh, 0, &cfg, 1, 1); /* first: its sweep must not see the dead */
    cr_assert_eq(rc, 0, "failed at line %d", rc);
    cr_assert_eq(((tmx_soft_dev_t *)n[0].dev)->hdr->start_time, start_time_of(getpid()));
    victim = fork_sleeper(&n[1], sh, &cfg, 0);
    cr_assert(victim > 0);
    while (atomic_load(&sh->stage[1]) < 2) {
    }
    /* Start times count clock ticks (10 ms): a pid cannot come round again that fast
     * without help, so the test lets a few ticks pass as nature would. */
    usleep(50000);
    reap(victim); /* the segment was not closed */
    again = spawn_at(victim);
    if (again < 0) {
        node_close(&n[0]);
        cr_skip_test("cannot create a process with pid %d: %s", (int)victim, strerror(errno));
    }
    rc = n[0].ops->ah_create(n[0].pd, sh->dev[1], sh->dev_len[1], &ah);
    reap(again);
    cr_expect_eq(rc, TMX_ERR_UNREACHABLE, "status %d", rc);
    if (ah != NULL) {
        n[0].ops->ah_destroy(ah);
    }
    node_close(&n[0]);
    if (!memfd) {
        shm_unlink((const char *)sh->dev[1] + sh->dev_len[1] - TMX_SOFT_NAME);
    }
    free(n);
}

Test(soft, reused_pid_is_not_the_peer_named, .timeout = 30)
{
    reused_pid_unreachable(0);
}

Test(soft, reused_pid_is_not_the_peer_memfd, .timeout = 30)
{
    reused_pid_unreachable(1);
}

/* A peer that rewrites its segment header after we mapped it cannot move us out of bounds:
 * the device keeps the header it checked. Loopback: the peer is this process. */
Test(soft, peer_header_rewritten_after_checks, .timeout = 10)
{
    tmx_config_t    cfg;
    shared_t       *sh = shared_new();
    node_t         *n  = calloc(1, sizeof(*n));
    tmx_soft_dev_t *dev;
    tmx_ah_t       *ah = NULL;
    tmx_qp_attr_t   mod;
    uint64_t        rings_off, ring_size;
    uint8_t         buf[8] = {0}, v[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    tmx_mr_t       *mr;
    tmx_wc_t        wc;
    int             rc;

    cfg_init(&cfg, -1, 65536);
    rc = node_open(n, sh, 0, &cfg, 1, 0);
    cr_assert_eq(rc, 0, "failed at line %d", rc);
    dev = (tmx_soft_dev_t *)n->dev;
    cr_assert_eq(n->ops->ah_create(n->pd, sh->dev[0], sh->dev_len[0], &ah), TMX_OK);
    rings_off           = dev->hdr->rings_off;
    ring_size           = dev->hdr->ring_size;
    dev->hdr->rings_off = 1ull << 40; /* as a peer could, after our checks */
    dev->hdr->ring_size = 1ull << 31;
    memset(&mod, 0, sizeof(mod));
    mod.state           = TMX_QPS_RTR;
    mod.remote_addr     = sh->qp[0][0];
    mod.remote_addr_len = sh->qp_len[0][0];
    rc = n->ops->qp_modify(n->qp[0], &mod, TMX_QP_ATTR_STATE | TMX_QP_ATTR_REMOTE);
    dev->hdr->rings_off = rings_off;
    dev->hdr->ring_size = ring_size;
    cr_assert_eq(rc, TMX_OK);
    mod.state = TMX_QPS_RTS;
    cr_assert_eq(n->ops->qp_modify(n->qp[0], &mod, TMX_QP_ATTR_STATE), TMX_OK);
    mr = reg(n, buf, sizeof(buf), TMX_ACCESS_LOCAL_WRITE);
    cr_assert(mr != NULL);
    cr_assert_eq(post_recv(n, 0, buf, sizeof(buf), mr->lkey, 1), TMX_OK);
    cr_assert_eq(post_send(n, 0, TMX_WR_SEND, v, 8, 0, TMX_SEND_INLINE, 2, 0, 0, 0), TMX_OK);
    cr_assert_eq(node_wc(n, &wc), 0);
    cr_expect(wc.wr_id == 1 && wc.status == TMX_WC_SUCCESS && memcmp(buf, v, 8) == 0);
    n->ops->mr_dereg(mr);
    n->ops->ah_destroy(ah);
    node_close(n);
    free(n);
}

/* A datagram producer that died holding a mailbox's lock, whose pid went to a new process:
 * the lock is still taken over (the start time tells the holder is gone), no hang. */
Test(soft, ud_lock_of_a_dead_holder_with_a_reused_pid, .timeout = 10)
{
    tmx_config_t          cfg;
    shared_t             *sh = shared_new();
    node_t               *n  = calloc(1, sizeof(*n));
    tmx_soft_dev_t       *dev;
    tmx_soft_ring_ctrl_t *ctrl;
    tmx_ah_t             *ah = NULL;
    uint8_t               v[8] = {0};
    tmx_sge_t             sge = {.addr = (uintptr_t)v, .length = sizeof(v)};
    tmx_send_wr_t         wr, *bad;
    unsigned long long    start;
    pid_t                 victim, again;
    int                   rc;

    fflush(NULL);
    victim = fork();
    cr_assert(victim >= 0);
    if (victim == 0) {
        alarm(20);
        for (;;) {
            pause();
        }
    }
    start = start_time_of(victim);
    usleep(30000); /* the new process starts at a later clock tick, as nature would have it */
    reap(victim);
    again = spawn_at(victim);
    if (again < 0) {
        cr_skip_test("cannot create a process with pid %d: %s", (int)victim, strerror(errno));
    }
    cfg_init(&cfg, -1, 65536);
    rc = ud_open(n, sh, 0, &cfg);
    cr_assert_eq(rc, 0, "failed at line %d", rc);
    dev  = (tmx_soft_dev_t *)n->dev;
    ctrl = tmx_soft_inbox_ctrl(dev->base, dev->hdr);
    atomic_store(&ctrl->lock, (uint32_t)victim | (uint64_t)(uint32_t)start << 32);
    cr_assert_eq(n->ops->ah_create(n->pd, sh->dev[0], sh->dev_len[0], &ah), TMX_OK);
    memset(&wr, 0, sizeof(wr));
    wr.sg_list       = &sge;
    wr.num_sge       = 1;
    wr.opcode        = TMX_WR_SEND;
    wr.send_flags    = TMX_SEND_INLINE;
    wr.ud.ah         = ah;
    wr.ud.remote_qpn = sh->ud_qpn[0];
    rc = n->ops->post_send(n->qp[0], &wr, &bad); /* spins on the lock until taken over */
    reap(again);
    cr_expect_eq(rc, TMX_OK);
    cr_expect_eq(atomic_load(&ctrl->lock), 0);
    n->ops->ah_destroy(ah);
    node_close(n);
    free(n);
}

/* ---------------------------------------------------------------- a lying peer */

/* Writes a record for a QP into the inbox as a peer could, then polls. */
static int bogus_role(node_t *n, shared_t *sh, int me, const tmx_config_t *cfg, uint8_t op,
                      uint32_t len)
{
    tmx_qp_attr_t   mod;
    tmx_soft_qp_t  *qp;
    tmx_soft_dev_t *dev;
    tmx_soft_rec_t *rec;
    tmx_wc_t        wc;

    TRY(node_open(n, sh, me, cfg, 1, 1));
    memset(&mod, 0, sizeof(mod));
    mod.state           = TMX_QPS_RTR;
    mod.remote_addr     = sh->qp[me][0];
    mod.remote_addr_len = sh->qp_len[me][0];
    CHECK(n->ops->qp_modify(n->qp[0], &mod, TMX_QP_ATTR_STATE | TMX_QP_ATTR_REMOTE) == TMX_OK);
    qp       = (tmx_soft_qp_t *)n->qp[0];
    dev      = qp->dev;
    rec      = (tmx_soft_rec_t *)dev->inbox;
    rec->len = len;
    rec->op  = op;
    rec->seq = 12345;
    rec->dst = qp->index;
    rec->gen = qp->my_gen;
    ((tmx_soft_rec_ext_t *)(rec + 1))->rkey = 3; /* SWITCH: the ring taken + 1 */
    atomic_store(&rec->stamp, 1);
    CHECK(node_wc(n, &wc) == 0);
    CHECK(wc.wr_id == TMX_WR_ID_ASYNC_ERROR && wc.status == TMX_WC_REM_INV_REQ_ERR);
    CHECK(wc.qp_num == n->qp[0]->qp_num && n->qp[0]->state == TMX_QPS_ERR);
    node_close(n);
    return 0;
}

Test(soft, malformed_records_fail_the_qp, .timeout = 10)
{
    static const struct {
        uint8_t  op;
        uint32_t len;
    } bad[] = {
        {TMX_SOFT_OP_SEND, 0xffffffffu},          /* longer than the ring */
        {TMX_SOFT_OP_SEND, 65536},                /* crosses the end of the ring */
        {99, 8},                                  /* unknown opcode */
        {TMX_SOFT_OP_RRESP, 8},                   /* a response nobody asked for */
        {TMX_SOFT_OP_ACK, 0},
        {TMX_SOFT_OP_SWITCH, 0},                  /* takes a ring that was never lent */
    };
    tmx_config_t cfg;

    cfg_init(&cfg, -1, 65536);
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        shared_t *sh = shared_new();
        node_t   *n  = calloc(1, sizeof(*n));
        int       rc = bogus_role(n, sh, 0, &cfg, bad[i].op, bad[i].len);

        cr_assert_eq(rc, 0, "case %zu failed at line %d", i, rc);
        free(n);
        munmap(sh, sizeof(*sh));
    }
}

/* ---------------------------------------------------------------- stale payload */

/* Sends len bytes of buf on the QP as one unsignaled inline SEND (one record). */
static int send_one(node_t *n, int q, void *buf, uint32_t len)
{
    return post_send_retry(n, q, TMX_WR_SEND, buf, len, 0, TMX_SEND_INLINE, 0, 0);
}

/*
 * A 4096-byte inbox, a QP connected to itself and no fast ring. In the first lap a 128-byte
 * record at 64 carries in its second line (ring offset 128, payload bytes 64 - header ..) the
 * value 4096 + 128 + 1, followed by zeros: what the stamp of a record at position 4224 would
 * be. In the second lap two 64-byte records take the reader to 4224, offset 128, before
 * anything is written there.
 * The reader must not take the payload of the first lap for a stamp (a rendezvous header's
 * MR key did, in peer_fail rndvmany: "malformed record (op 0, len 0)").
 */
static int stale_role(node_t *n, shared_t *sh, int me, const tmx_config_t *cfg)
{
    static uint8_t rx[80][128];
    uint8_t        b[128 - sizeof(tmx_soft_rec_t) - 6], s[8];
    uint64_t       forged = 4096 + 128 + 1;
    tmx_qp_attr_t  mod;
    tmx_mr_t      *mr;
    tmx_wc_t       wc;
    int            sent = 0;

    TRY(node_open(n, sh, me, cfg, 1, 1));
    memset(&mod, 0, sizeof(mod));
    mod.state           = TMX_QPS_RTR;
    mod.remote_addr     = sh->qp[me][0];
    mod.remote_addr_len = sh->qp_len[me][0];
    CHECK(n->ops->qp_modify(n->qp[0], &mod, TMX_QP_ATTR_STATE | TMX_QP_ATTR_REMOTE) == TMX_OK);
    mod.state = TMX_QPS_RTS;
    CHECK(n->ops->qp_modify(n->qp[0], &mod, TMX_QP_ATTR_STATE) == TMX_OK);
    mr = reg(n, rx, sizeof(rx), TMX_ACCESS_LOCAL_WRITE);
    CHECK(mr != NULL);
    for (int i = 0; i < 80; i++) {
        CHECK(post_recv(n, 0, rx[i], sizeof(rx[i]), mr->lkey, (uint64_t)i) == TMX_OK);
    }
    memset(s, 0x11, sizeof(s));
    memset(b, 0, sizeof(b));
    memcpy(b + 64 - sizeof(tmx_soft_rec_t), &forged, sizeof(forged));
    CHECK(send_one(n, 0, s, sizeof(s)) == TMX_OK); /* [0, 64) */
    CHECK(send_one(n, 0, b, sizeof(b)) == TMX_OK); /* [64, 192) */
    sent = 2;
    for (uint64_t pos = 192; pos < 4096 + 128; pos += 64, sent++) {
        CHECK(send_one(n, 0, s, sizeof(s)) == TMX_OK);
    }
    CHECK(((tmx_soft_qp_t *)n->qp[0])->out_fast == 0);
    CHECK(atomic_load(&((tmx_soft_qp_t *)n->qp[0])->dev->inbox_ctrl->tail) == 4096 + 128);
    /* The reader takes every record, then finds the head at 4224 with nothing written. */
    for (int i = 0; i < sent; i++) {
        CHECK(node_wc(n, &wc) == 0);
        CHECK(wc.wr_id == (uint64_t)i && wc.status == TMX_WC_SUCCESS);
        CHECK(wc.byte_len == (i == 1 ? sizeof(b) : sizeof(s)));
    }
    for (int i = 0; i < 1000; i++) {
        node_poll(n);
    }
    CHECK(n->nstash == 0 && n->qp[0]->state == TMX_QPS_RTS);
    /* The record that does land there arrives whole. */
    fill(b, sizeof(b), 9);
    CHECK(send_one(n, 0, b, 60) == TMX_OK);
    CHECK(node_wc(n, &wc) == 0);
    CHECK(wc.wr_id == (uint64_t)sent && wc.status == TMX_WC_SUCCESS && wc.byte_len == 60);
    CHECK(same(rx[sent], 60, 9));
    n->ops->mr_dereg(mr);
    node_close(n);
    return 0;
}

Test(soft, stale_payload_is_no_stamp, .timeout = 10)
{
    tmx_config_t cfg;

    cfg_init(&cfg, -1, 4096);
    cfg.soft_fast_rings = 0;
    run_alone(stale_role, &cfg);
}

/* ---------------------------------------------------------------- peer QP in error */

/*
 * Two QPs of one device connected to each other, RDMA through the rings. QP 0 writes a record
 * QP 1 refuses (unknown opcode), then asks QP 1 for a READ that it will never serve: QP 1 goes
 * to error, and QP 0 must learn it (the READ fails, the QP goes to error) rather than wait
 * for ever.
 */
static int refused_role(node_t *n, shared_t *sh, int me, const tmx_config_t *cfg)
{
    uint8_t         t[64], l[64];
    tmx_mr_t       *mr, *mrl;
    tmx_qp_attr_t   mod;
    tmx_soft_qp_t  *q0;
    tmx_soft_rec_t *rec;
    tmx_wc_t        wc;
    int             async1 = 0, read0 = 0, async0 = 0;
    double          end;

    TRY(node_open(n, sh, me, cfg, 2, 1));
    for (int i = 0; i < 2; i++) {
        memset(&mod, 0, sizeof(mod));
        mod.state           = TMX_QPS_RTR;
        mod.remote_addr     = sh->qp[me][1 - i];
        mod.remote_addr_len = sh->qp_len[me][1 - i];
        CHECK(n->ops->qp_modify(n->qp[i], &mod, TMX_QP_ATTR_STATE | TMX_QP_ATTR_REMOTE) ==
              TMX_OK);
        mod.state = TMX_QPS_RTS;
        CHECK(n->ops->qp_modify(n->qp[i], &mod, TMX_QP_ATTR_STATE) == TMX_OK);
    }
    mr  = reg(n, t, sizeof(t), TMX_ACCESS_REMOTE_READ);
    mrl = reg(n, l, sizeof(l), TMX_ACCESS_LOCAL_WRITE);
    CHECK(mr != NULL && mrl != NULL);
    q0       = (tmx_soft_qp_t *)n->qp[0];
    CHECK(q0->cma == 0 && q0->out_fast == 0 && atomic_load(&q0->dev->inbox_ctrl->tail) == 0);
    rec      = (tmx_soft_rec_t *)q0->dev->inbox; /* as QP 0 would write it */
    rec->len = 0;
    rec->op  = 99;
    rec->dst = q0->remote_index;
    rec->gen = q0->out_gen;
    atomic_store(&rec->stamp, 1);
    atomic_store(&q0->dev->inbox_ctrl->tail, TMX_SOFT_LINE);
    CHECK(post_send(n, 0, TMX_WR_RDMA_READ, l, sizeof(l), mrl->lkey, TMX_SEND_SIGNALED, 7,
                    (uintptr_t)t, mr->rkey, 0) == TMX_OK);
    end = tmx_time_sec() + 5;
    while (n->qp[0]->state != TMX_QPS_ERR || n->nstash > 0) {
        if (n->nstash == 0) {
            node_poll(n);
            CHECK(tmx_time_sec() < end);
            continue;
        }
        CHECK(node_wc(n, &wc) == 0);
        if (wc.qp_num == n->qp[1]->qp_num) {
            CHECK(wc.wr_id == TMX_WR_ID_ASYNC_ERROR && wc.status == TMX_WC_REM_INV_REQ_ERR);
            async1++;
        } else if (wc.wr_id == 7) {
            CHECK(wc.status == TMX_WC_REM_INV_REQ_ERR && async0 == 0);
            read0++;
        } else {
            CHECK(wc.wr_id == TMX_WR_ID_ASYNC_ERROR && wc.status == TMX_WC_REM_INV_REQ_ERR);
            async0++;
        }
    }
    CHECK(async1 == 1 && read0 == 1 && async0 == 1);
    CHECK(n->qp[1]->state == TMX_QPS_ERR);
    n->ops->mr_dereg(mr);
    n->ops->mr_dereg(mrl);
    node_close(n);
    return 0;
}

Test(soft, peer_qp_in_error_fails_ours, .timeout = 20)
{
    tmx_config_t cfg;

    cfg_init(&cfg, 0, 65536);
    run_alone(refused_role, &cfg);
}

/* ---------------------------------------------------------------- FENCE */

static int fence_target(node_t *n, shared_t *sh, int me, const tmx_config_t *cfg)
{
    uint8_t   t[256], r[64];
    tmx_mr_t *mr, *mrr;
    tmx_wc_t  wc;

    fill(t, sizeof(t), 6);
    TRY(node_open(n, sh, me, cfg, 1, 1));
    mr  = reg(n, t, sizeof(t), TMX_ACCESS_REMOTE_READ);
    mrr = reg(n, r, sizeof(r), TMX_ACCESS_LOCAL_WRITE);
    CHECK(mr != NULL && mrr != NULL);
    sh->addr[0][0] = (uintptr_t)t;
    sh->rkey[0][0] = mr->rkey;
    CHECK(post_recv(n, 0, r, sizeof(r), mrr->lkey, 1) == TMX_OK);
    TRY(node_connect(n));
    /* Not polling until the initiator has looked at its queue. */
    while (atomic_load(&sh->stage[1]) < 2) {
    }
    CHECK(node_wc(n, &wc) == 0 && wc.wr_id == 1 && wc.status == TMX_WC_SUCCESS);
    CHECK(wc.byte_len == 8 && same(r, 8, 7));
    CHECK(node_barrier(n, 3) == 0);
    n->ops->mr_dereg(mr);
    n->ops->mr_dereg(mrr);
    node_close(n);
    return 0;
}

static int fence_initiator(node_t *n, shared_t *sh, int me, const tmx_config_t *cfg)
{
    uint8_t        l[256], v[8];
    tmx_mr_t      *mr;
    tmx_wc_t       wc;
    tmx_soft_qp_t *qp;

    TRY(node_open(n, sh, me, cfg, 1, 1));
    mr = reg(n, l, sizeof(l), TMX_ACCESS_LOCAL_WRITE);
    CHECK(mr != NULL);
    TRY(node_connect(n));
    qp = (tmx_soft_qp_t *)n->qp[0];
    CHECK(post_send(n, 0, TMX_WR_RDMA_READ, l, sizeof(l), mr->lkey, TMX_SEND_SIGNALED, 1,
                    sh->addr[0][0], sh->rkey[0][0], 0) == TMX_OK);
    fill(v, sizeof(v), 7);
    CHECK(post_send(n, 0, TMX_WR_SEND, v, 8, 0,
                    TMX_SEND_INLINE | TMX_SEND_FENCE | TMX_SEND_SIGNALED, 2, 0, 0, 0) == TMX_OK);
    CHECK(qp->tx_seq != qp->next_seq); /* the fenced SEND waits for the READ */
    atomic_store(&sh->stage[1], 2);
    CHECK(node_wc(n, &wc) == 0 && wc.wr_id == 1 && wc.status == TMX_WC_SUCCESS);
    CHECK(wc.opcode == TMX_WC_RDMA_READ && same(l, sizeof(l), 6));
    CHECK(node_wc(n, &wc) == 0 && wc.wr_id == 2 && wc.status == TMX_WC_SUCCESS);
    CHECK(node_barrier(n, 3) == 0);
    n->ops->mr_dereg(mr);
    node_close(n);
    return 0;
}

Test(soft, fence_waits_for_reads, .timeout = 30)
{
    tmx_config_t cfg;
    cfg_init(&cfg, 0, 65536); /* through the rings: the READ takes the target's help */
    run_pair(fence_target, fence_initiator, &cfg);
}

/* ---------------------------------------------------------------- peer QP destroyed */

static int qpgone_target(node_t *n, shared_t *sh, int me, const tmx_config_t *cfg)
{
    TRY(node_open(n, sh, me, cfg, 1, 1));
    TRY(node_connect(n));
    while (atomic_load(&sh->stage[1]) < 2) {
    }
    n->ops->qp_destroy(n->qp[0]); /* never served the READ */
    n->qp[0] = NULL;
    CHECK(node_barrier(n, 3) == 0);
    node_close(n);
    return 0;
}

static int qpgone_initiator(node_t *n, shared_t *sh, int me, const tmx_config_t *cfg)
{
    uint8_t   l[64];
    tmx_mr_t *mr;
    tmx_wc_t  wc;

    TRY(node_open(n, sh, me, cfg, 1, 1));
    mr = reg(n, l, sizeof(l), TMX_ACCESS_LOCAL_WRITE);
    CHECK(mr != NULL);
    TRY(node_connect(n));
    CHECK(post_send(n, 0, TMX_WR_RDMA_READ, l, sizeof(l), mr->lkey, TMX_SEND_SIGNALED, 1, 4096,
                    256, 0) == TMX_OK);
    atomic_store(&sh->stage[1], 2);
    CHECK(node_wc(n, &wc) == 0 && wc.wr_id == 1 && wc.status == TMX_WC_RETRY_EXC_ERR);
    CHECK(node_wc(n, &wc) == 0 && wc.wr_id == TMX_WR_ID_ASYNC_ERROR);
    CHECK(node_barrier(n, 3) == 0);
    n->ops->mr_dereg(mr);
    node_close(n);
    return 0;
}

Test(soft, peer_qp_destroyed_fails_outstanding, .timeout = 30)
{
    tmx_config_t cfg;
    cfg_init(&cfg, 0, 65536);
    run_pair(qpgone_target, qpgone_initiator, &cfg);
}

/* ---------------------------------------------------------------- completion channel */

/* 1 when fd polls readable within ms milliseconds. */
static int readable(int fd, int ms)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    return poll(&p, 1, ms) == 1 && (p.revents & POLLIN) != 0;
}

static int chan_rx(node_t *n, shared_t *sh, int me, const tmx_config_t *cfg)
{
    uint64_t            buf[4] = {0};
    tmx_comp_channel_t *ch, *ch2;
    tmx_soft_dev_t     *dev;
    tmx_mr_t           *mr;
    tmx_wc_t            wc;
    struct sockaddr_un  sa;
    socklen_t           salen;
    int                 s;

    TRY(node_open(n, sh, me, cfg, 1, 1));
    dev = (tmx_soft_dev_t *)n->dev;
    mr  = reg(n, buf, sizeof(buf), TMX_ACCESS_LOCAL_WRITE);
    CHECK(mr != NULL);
    for (int k = 0; k < 4; k++) {
        CHECK(post_recv(n, 0, &buf[k], 8, mr->lkey, (uint64_t)k) == TMX_OK);
    }
    CHECK(n->ops->channel_create(n->dev, &ch) == TMX_OK && ch->fd >= 0);
    CHECK(n->ops->channel_create(n->dev, &ch2) == TMX_ERR_NO_RESOURCE); /* one per device */
    TRY(node_connect(n));

    /* nothing pending: armed, and the fd stays quiet */
    CHECK(n->ops->channel_get_events(ch) >= 0);
    CHECK(n->ops->cq_req_notify(n->cq, ch) == TMX_OK);
    CHECK(atomic_load(&dev->hdr->armed) == 1);
    CHECK(!readable(ch->fd, 0));

    /* the peer sends while we do not poll: the fd wakes us, the producer disarmed us */
    CHECK(node_sync(n, 2) == 0);
    CHECK(readable(ch->fd, 5000));
    CHECK(atomic_load(&dev->hdr->armed) == 0);
    CHECK(n->ops->channel_get_events(ch) == 1);
    CHECK(!readable(ch->fd, 0));
    /* the record waits in the ring: arming says so instead of sleeping on it */
    CHECK(n->ops->cq_req_notify(n->cq, ch) == TMX_ERR_BUSY);
    CHECK(node_wc(n, &wc) == 0);
    CHECK(wc.status == TMX_WC_SUCCESS && wc.byte_len == 8 && buf[wc.wr_id] == 0x1111);
    CHECK(n->ops->cq_req_notify(n->cq, ch) == TMX_OK);

    /* a stray datagram to the wake socket: readable, nothing to poll, armed again */
    s = socket(AF_UNIX, SOCK_DGRAM, 0);
    tmx_soft_wake_name(dev->hdr->uid, dev->hdr->pid, dev->hdr->probe, &sa, &salen);
    CHECK(s >= 0 && sendto(s, "x", 1, 0, (struct sockaddr *)&sa, salen) == 1);
    close(s);
    CHECK(readable(ch->fd, 5000));
    CHECK(n->ops->channel_get_events(ch) == 1);
    CHECK(n->ops->cq_poll(n->cq, 1, &wc) == 0);
    CHECK(n->ops->cq_req_notify(n->cq, ch) == TMX_OK);
    CHECK(!readable(ch->fd, 0));

    /* and the next real arrival still wakes us */
    CHECK(node_sync(n, 3) == 0);
    CHECK(readable(ch->fd, 5000));
    CHECK(node_wc(n, &wc) == 0);
    CHECK(wc.status == TMX_WC_SUCCESS && buf[wc.wr_id] == 0x2222);
    CHECK(node_sync(n, 4) == 0);
    n->ops->channel_destroy(ch);
    n->ops->mr_dereg(mr);
    node_close(n);
    return 0;
}

static int chan_tx(node_t *n, shared_t *sh, int me, const tmx_config_t *cfg)
{
    uint64_t v;

    TRY(node_open(n, sh, me, cfg, 1, 1));
    TRY(node_connect(n));
    CHECK(node_sync(n, 2) == 0);
    v = 0x1111;
    CHECK(post_send(n, 0, TMX_WR_SEND, &v, 8, 0, TMX_SEND_INLINE, 1, 0, 0, 0) == TMX_OK);
    CHECK(node_sync(n, 3) == 0);
    usleep(100 * 1000); /* the receiver is asleep by now, most likely */
    v = 0x2222;
    CHECK(post_send(n, 0, TMX_WR_SEND, &v, 8, 0, TMX_SEND_INLINE, 2, 0, 0, 0) == TMX_OK);
    CHECK(node_sync(n, 4) == 0);
    node_close(n);
    return 0;
}

Test(soft, channel_wakes_a_sleeper, .timeout = 30)
{
    tmx_config_t cfg;
    cfg_init(&cfg, -1, 64 * 1024);
    run_pair(chan_rx, chan_tx, &cfg);
}

/* A sleeper polls rarely: arming checks its peers' liveness (every 100 ms at most, like the
 * polls' check every 256th time), so a peer that died is found before we sleep, not after
 * hundreds of wakeups. */
static int chan_dead_rx(node_t *n, shared_t *sh, int me, const tmx_config_t *cfg)
{
    tmx_comp_channel_t *ch;
    tmx_wc_t            wc;
    int                 st;

    TRY(node_open(n, sh, me, cfg, 1, 1));
    CHECK(n->ops->channel_create(n->dev, &ch) == TMX_OK);
    TRY(node_connect(n));
    CHECK(n->ops->cq_req_notify(n->cq, ch) == TMX_OK);
    CHECK(node_sync(n, 2) == 0);
    usleep(300 * 1000); /* the peer exits meanwhile; more than the check period passes */
    st = n->ops->cq_req_notify(n->cq, ch);
    CHECK(st == TMX_ERR_BUSY);
    CHECK(node_wc(n, &wc) == 0);
    CHECK(wc.wr_id == TMX_WR_ID_ASYNC_ERROR && wc.status == TMX_WC_RETRY_EXC_ERR);
    n->ops->channel_destroy(ch);
    node_close(n);
    return 0;
}

static int chan_dead_tx(node_t *n, shared_t *sh, int me, const tmx_config_t *cfg)
{
    TRY(node_open(n, sh, me, cfg, 1, 1));
    TRY(node_connect(n));
    CHECK(node_sync(n, 2) == 0);
    return 0; /* and exits, QP and all */
}

Test(soft, arming_finds_a_dead_peer, .timeout = 30)
{
    tmx_config_t cfg;
    cfg_init(&cfg, -1, 64 * 1024);
    run_pair(chan_dead_rx, chan_dead_tx, &cfg);
}

/* An armed sleeper wakes when a peer dies, with no message and no timeout: the channel's fd
 * turns readable (the peer's pidfd is in its set), and the next arm finds the dead peer at
 * once (its QP fails: an event). The pidfd then leaves the set: the fd is quiet again. */
static int chan_death_rx(node_t *n, shared_t *sh, int me, const tmx_config_t *cfg)
{
    tmx_comp_channel_t *ch;
    struct pollfd       p;
    tmx_wc_t            wc;

    TRY(node_open(n, sh, me, cfg, 1, 1));
    CHECK(n->ops->channel_create(n->dev, &ch) == TMX_OK);
    TRY(node_connect(n));
    CHECK(n->ops->channel_get_events(ch) >= 0);
    CHECK(n->ops->cq_req_notify(n->cq, ch) == TMX_OK);
    p.fd     = ch->fd;
    p.events = POLLIN;
    CHECK(poll(&p, 1, 0) == 0); /* quiet while the peer lives */
    CHECK(node_sync(n, 2) == 0);
    CHECK(poll(&p, 1, 10000) == 1); /* the peer exits: we wake */
    CHECK(n->ops->channel_get_events(ch) >= 1);
    CHECK(n->ops->cq_req_notify(n->cq, ch) == TMX_ERR_BUSY); /* within the check period */
    CHECK(node_wc(n, &wc) == 0);
    CHECK(wc.wr_id == TMX_WR_ID_ASYNC_ERROR && wc.status == TMX_WC_RETRY_EXC_ERR);
    CHECK(n->ops->channel_get_events(ch) >= 0);
    CHECK(n->ops->cq_req_notify(n->cq, ch) == TMX_OK);
    CHECK(poll(&p, 1, 0) == 0); /* the dead peer no longer wakes us */
    n->ops->channel_destroy(ch);
    node_close(n);
    return 0;
}

Test(soft, a_dying_peer_wakes_a_sleeper, .timeout = 30)
{
    tmx_config_t cfg;
    cfg_init(&cfg, -1, 64 * 1024);
    run_pair(chan_death_rx, chan_dead_tx, &cfg);
}

/* ---------------------------------------------------------------- device memory (mem_alloc) */

Test(soft, mem_alloc_gives_zeroed_lines_of_the_segment, .timeout = 10)
{
    tmx_config_t          cfg;
    tmx_dev_t            *devs[1];
    int                   num = 0;
    const tmx_prov_ops_t *ops = tmx_soft_prov.ops;
    tmx_soft_dev_t       *dev;
    tmx_pd_t             *pd;
    tmx_mr_t             *a, *b, *c, *d, *h;
    unsigned              acc = TMX_ACCESS_LOCAL_WRITE | TMX_ACCESS_REMOTE_WRITE;

    cfg_init(&cfg, 0, 65536);
    cfg.soft_dm_size = 8192;
    cr_assert_eq(ops->dev_open(&tmx_soft_prov, &cfg, devs, 1, &num), TMX_OK);
    dev = (tmx_soft_dev_t *)devs[0];
    cr_assert(devs[0]->attr.caps & TMX_DEV_CAP_MEM_DIRECT);
    cr_assert_eq(ops->pd_alloc(devs[0], &pd), TMX_OK);
    cr_assert_eq(ops->mem_alloc(pd, 0, acc, &a), TMX_ERR_INVALID_PARAM);
    cr_assert_eq(ops->mem_alloc(pd, 100, acc, &a), TMX_OK);
    cr_assert_eq(ops->mem_alloc(pd, 4000, acc, &b), TMX_OK);
    for (tmx_mr_t **m = (tmx_mr_t *[]){a, b, NULL}; *m != NULL; m++) {
        uint8_t *p = (*m)->addr;

        cr_assert(p >= (uint8_t *)dev->base + dev->hdr->dm_off &&
                  p + (*m)->length <= (uint8_t *)dev->base + dev->hdr->dm_off + 8192,
                  "inside the segment's device memory");
        cr_assert_eq((uintptr_t)p % 128, 0);
        cr_assert((*m)->access == acc && (*m)->rkey != 0);
        for (size_t i = 0; i < (*m)->length; i++) {
            cr_assert_eq(p[i], 0);
        }
        memset(p, 0xab, (*m)->length);
    }
    cr_assert((uint8_t *)b->addr >= (uint8_t *)a->addr + 128, "no overlap");
    /* 8192 - 128 - 4032 left: 4000 more does not fit at a 128-byte boundary after b */
    cr_assert_eq(ops->mem_alloc(pd, 4096, acc, &c), TMX_ERR_NO_RESOURCE);
    cr_assert_eq(ops->mem_alloc(pd, 64, acc, &c), TMX_OK);
    ops->mem_free(a);
    cr_assert_eq(ops->mem_alloc(pd, 128, acc, &d), TMX_OK);
    cr_assert_eq(d->addr, (void *)((uint8_t *)dev->base + dev->hdr->dm_off), "freed lines reused");
    for (size_t i = 0; i < 128; i++) {
        cr_assert_eq(((uint8_t *)d->addr)[i], 0, "zeroed again");
    }
    ops->mem_free(b);
    ops->mem_free(c);
    ops->mem_free(d);
    cr_assert_eq(ops->mem_alloc(pd, 8192, acc, &a), TMX_OK, "everything is free again");
    /* lines given out before (written above) and lines never given out, zero alike: the
     * first are cleared, the second were never written (mem_alloc clears only the first) */
    for (size_t i = 0; i < 8192; i++) {
        cr_assert_eq(((uint8_t *)a->addr)[i], 0, "byte %zu of a reused area is not zero", i);
    }
    memset(a->addr, 0xcd, 8192);
    ops->mem_free(a);
    cr_assert_eq(ops->mem_alloc(pd, 4096, acc, &a), TMX_OK);
    for (size_t i = 0; i < 4096; i++) {
        cr_assert_eq(((uint8_t *)a->addr)[i], 0, "byte %zu after a whole reuse", i);
    }
    ops->mem_free(a);
    /* the generic host fallback: zeroed, page-aligned, registered */
    cr_assert_eq(tmx_prov_host_mem_alloc(pd, 5000, acc, &h), TMX_OK);
    cr_assert_eq((uintptr_t)h->addr % 4096, 0);
    cr_assert(h->length == 5000 && ((uint8_t *)h->addr)[4999] == 0);
    tmx_prov_host_mem_free(h);
    ops->pd_free(pd);
    ops->dev_close(devs[0]);

    cfg.soft_dm_size = 0;
    cr_assert_eq(ops->dev_open(&tmx_soft_prov, &cfg, devs, 1, &num), TMX_OK);
    cr_assert(!(devs[0]->attr.caps & TMX_DEV_CAP_MEM_DIRECT));
    cr_assert_eq(ops->pd_alloc(devs[0], &pd), TMX_OK);
    cr_assert_eq(ops->mem_alloc(pd, 64, acc, &a), TMX_ERR_NO_RESOURCE);
    ops->pd_free(pd);
    ops->dev_close(devs[0]);
}

/*
 * RDMA writes into the target's device memory land without the target polling at all (it only
 * reads its memory), unsignaled ones when post_send returns. Cross-memory attach is off, so a
 * write to the target's ordinary memory goes through its rings and lands only when the target
 * polls: the fallback for anything outside device memory. Keys and bounds are checked as for
 * any remote access, a refused write completing with REM_ACCESS_ERR even when unsignaled.
 */
#define DM_LEN 4096

static int dm_target(node_t *n, shared_t *sh, int me, const tmx_config_t *cfg)
{
    tmx_mr_t *dm, *ro, *heap, *rmr;
    uint8_t  *h = calloc(1, DM_LEN), imm_buf[8];
    double    end;
    tmx_wc_t  wc;

    TRY(node_open(n, sh, me, cfg, 1, 1));
    CHECK(h != NULL);
    CHECK(n->ops->mem_alloc(n->pd, DM_LEN, TMX_ACCESS_LOCAL_WRITE | TMX_ACCESS_REMOTE_WRITE,
                            &dm) == TMX_OK);
    CHECK(n->ops->mem_alloc(n->pd, 256, TMX_ACCESS_REMOTE_READ, &ro) == TMX_OK);
    heap = reg(n, h, DM_LEN, TMX_ACCESS_LOCAL_WRITE | TMX_ACCESS_REMOTE_WRITE);
    rmr  = reg(n, imm_buf, sizeof(imm_buf), TMX_ACCESS_LOCAL_WRITE);
    CHECK(heap != NULL && rmr != NULL);
    sh->addr[0][0] = (uintptr_t)dm->addr;
    sh->rkey[0][0] = dm->rkey;
    sh->addr[0][1] = (uintptr_t)ro->addr;
    sh->rkey[0][1] = ro->rkey;
    sh->addr[0][2] = (uintptr_t)h;
    sh->rkey[0][2] = heap->rkey;
    CHECK(post_recv(n, 0, imm_buf, sizeof(imm_buf), rmr->lkey, 77) == TMX_OK);
    TRY(node_connect(n));
    /* no poll from here on: the writes must show in memory by themselves */
    CHECK(node_sync(n, 2) == 0);
    end = tmx_time_sec() + 5;
    while (!same(dm->addr, 1000, 4) || !same((uint8_t *)dm->addr + 1024, 1000, 5) ||
           !same((uint8_t *)dm->addr + 2048, 8, 6)) {
        CHECK(tmx_time_sec() < end);
    }
    CHECK(node_sync(n, 3) == 0); /* the initiator tried its refused writes meanwhile */
    for (size_t i = 3072; i < DM_LEN; i++) {
        CHECK(((uint8_t *)dm->addr)[i] == 0); /* nothing out of bounds */
    }
    CHECK(((uint8_t *)ro->addr)[0] == 0);
    CHECK(h[0] == 0); /* the heap write waits for our poll (no cross-memory attach) */
    usleep(20 * 1000);
    CHECK(h[0] == 0);
    end = tmx_time_sec() + 5;
    while (!same(h, 1000, 7)) {
        node_poll(n);
        CHECK(tmx_time_sec() < end);
    }
    CHECK(node_wc(n, &wc) == 0); /* the WRITE_WITH_IMM's notice */
    CHECK(wc.wr_id == 77 && wc.status == TMX_WC_SUCCESS &&
          wc.opcode == TMX_WC_RECV_RDMA_WITH_IMM && wc.imm_data == 99 && wc.byte_len == 8);
    CHECK(node_barrier(n, 4) == 0);
    n->ops->mem_free(dm);
    n->ops->mem_free(ro);
    n->ops->mr_dereg(heap);
    n->ops->mr_dereg(rmr);
    free(h);
    node_close(n);
    return 0;
}

static int dm_initiator(node_t *n, shared_t *sh, int me, const tmx_config_t *cfg)
{
    uint8_t  *l = malloc(DM_LEN);
    tmx_mr_t *mr;
    uint64_t  dm, ro, heap;
    uint32_t  dmk, rok, heapk;
    tmx_wc_t  wc;

    TRY(node_open(n, sh, me, cfg, 1, 1));
    CHECK(l != NULL);
    mr = reg(n, l, DM_LEN, TMX_ACCESS_LOCAL_WRITE);
    CHECK(mr != NULL);
    TRY(node_connect(n));
    dm = sh->addr[0][0], dmk = sh->rkey[0][0];
    ro = sh->addr[0][1], rok = sh->rkey[0][1];
    heap = sh->addr[0][2], heapk = sh->rkey[0][2];
    CHECK(node_sync(n, 2) == 0);
    /* unsignaled (straight from post_send), inline, and signaled through the queue */
    fill(l, 1000, 4);
    CHECK(post_send(n, 0, TMX_WR_RDMA_WRITE, l, 1000, mr->lkey, 0, 1, dm, dmk, 0) == TMX_OK);
    CHECK(n->nstash == 0);
    fill(l, 8, 6);
    CHECK(post_send(n, 0, TMX_WR_RDMA_WRITE, l, 8, 0, TMX_SEND_INLINE, 2, dm + 2048, dmk, 0) ==
          TMX_OK);
    fill(l, 1000, 5);
    TRY(rdma_one(n, TMX_WR_RDMA_WRITE, l, 1000, mr->lkey, dm + 1024, dmk, TMX_WC_SUCCESS));
    /* refused: past the region (still inside device memory), rights, key; unsignaled too */
    memset(l, 0xee, DM_LEN);
    TRY(rdma_one(n, TMX_WR_RDMA_WRITE, l, 200, mr->lkey, dm + DM_LEN - 100, dmk,
                 TMX_WC_REM_ACCESS_ERR));
    TRY(rdma_one(n, TMX_WR_RDMA_WRITE, l, 100, mr->lkey, ro, rok, TMX_WC_REM_ACCESS_ERR));
    TRY(rdma_one(n, TMX_WR_RDMA_WRITE, l, 100, mr->lkey, dm + 3072, dmk ^ 0x100,
                 TMX_WC_REM_ACCESS_ERR));
    CHECK(post_send(n, 0, TMX_WR_RDMA_WRITE, l, 100, mr->lkey, 0, 9, dm + 3072, dmk + 1, 0) ==
          TMX_OK);
    CHECK(node_wc(n, &wc) == 0 && wc.wr_id == 9 && wc.status == TMX_WC_REM_ACCESS_ERR);
    CHECK(node_sync(n, 3) == 0);
    /* outside device memory: through the target's rings */
    fill(l, 1000, 7);
    CHECK(post_send(n, 0, TMX_WR_RDMA_WRITE, l, 1000, mr->lkey, 0, 3, heap, heapk, 0) == TMX_OK);
    fill(l, 8, 8);
    CHECK(post_send(n, 0, TMX_WR_RDMA_WRITE_WITH_IMM, l, 8, mr->lkey, 0, 4, dm + 3000, dmk,
                    99) == TMX_OK);
    CHECK(node_barrier(n, 4) == 0);
    n->ops->mr_dereg(mr);
    free(l);
    node_close(n);
    return 0;
}

Test(soft, dm_writes_land_without_target_poll, .timeout = 30)
{
    tmx_config_t cfg;
    cfg_init(&cfg, 0, 65536);
    run_pair(dm_target, dm_initiator, &cfg);
}

/* An unsignaled WRITE_WITH_IMM into device memory goes whole or not at all: with the target's
 * ring full its notice cannot go, so post_send refuses it (TMX_ERR_NO_RESOURCE) and writes
 * nothing; once the target drained its ring it goes. */
static int wimm_full_target(node_t *n, shared_t *sh, int me, const tmx_config_t *cfg)
{
    tmx_mr_t *dm, *rmr;
    uint8_t  *rbuf = malloc(64 * 1024);
    tmx_wc_t  wc;
    int       imm_seen = 0;
    double    end;

    TRY(node_open(n, sh, me, cfg, 1, 1));
    CHECK(rbuf != NULL);
    CHECK(n->ops->mem_alloc(n->pd, 256, TMX_ACCESS_LOCAL_WRITE | TMX_ACCESS_REMOTE_WRITE,
                            &dm) == TMX_OK);
    rmr = reg(n, rbuf, 64 * 1024, TMX_ACCESS_LOCAL_WRITE);
    CHECK(rmr != NULL);
    for (int k = 0; k < 500; k++) {
        CHECK(post_recv(n, 0, rbuf + k * 128, 128, rmr->lkey, 1000 + k) == TMX_OK);
    }
    sh->addr[0][0] = (uintptr_t)dm->addr;
    sh->rkey[0][0] = dm->rkey;
    TRY(node_connect(n));
    CHECK(node_sync(n, 2) == 0); /* the initiator fills our ring, tries the write */
    CHECK(node_sync(n, 3) == 0);
    for (int i = 0; i < 256; i++) {
        CHECK(((uint8_t *)dm->addr)[i] == 0); /* nothing of the refused write */
    }
    end = tmx_time_sec() + 5;
    while (!imm_seen) {
        CHECK(node_wc(n, &wc) == 0 && wc.status == TMX_WC_SUCCESS);
        if (wc.opcode == TMX_WC_RECV_RDMA_WITH_IMM) {
            CHECK(wc.imm_data == 55 && same(dm->addr, 256, 3));
            imm_seen = 1;
        }
        CHECK(tmx_time_sec() < end);
    }
    CHECK(node_barrier(n, 4) == 0);
    n->ops->mem_free(dm);
    n->ops->mr_dereg(rmr);
    free(rbuf);
    node_close(n);
    return 0;
}

static int wimm_full_initiator(node_t *n, shared_t *sh, int me, const tmx_config_t *cfg)
{
    uint8_t  l[256], small[64];
    tmx_mr_t *mr;
    int       sent = 0, st;
    double    end;

    TRY(node_open(n, sh, me, cfg, 1, 1));
    mr = reg(n, l, sizeof(l), TMX_ACCESS_LOCAL_WRITE);
    CHECK(mr != NULL);
    TRY(node_connect(n));
    CHECK(node_sync(n, 2) == 0);
    memset(small, 1, sizeof(small));
    while (post_send(n, 0, TMX_WR_SEND, small, 8, 0, TMX_SEND_INLINE, 1, 0, 0, 0) ==
           TMX_OK) {
        sent++;
        CHECK(sent < 10000);
    }
    fill(l, sizeof(l), 3);
    CHECK(post_send(n, 0, TMX_WR_RDMA_WRITE_WITH_IMM, l, sizeof(l), mr->lkey, 0, 2,
                    sh->addr[0][0], sh->rkey[0][0], 55) == TMX_ERR_NO_RESOURCE);
    CHECK(n->nstash == 0);
    CHECK(node_sync(n, 3) == 0); /* the target looks, then drains */
    end = tmx_time_sec() + 5;
    while ((st = post_send(n, 0, TMX_WR_RDMA_WRITE_WITH_IMM, l, sizeof(l), mr->lkey, 0, 2,
                           sh->addr[0][0], sh->rkey[0][0], 55)) == TMX_ERR_NO_RESOURCE) {
        node_poll(n);
        CHECK(tmx_time_sec() < end);
    }
    CHECK(st == TMX_OK);
    CHECK(node_barrier(n, 4) == 0);
    n->ops->mr_dereg(mr);
    node_close(n);
    return 0;
}

Test(soft, dm_write_with_imm_whole_or_nothing, .timeout = 30)
{
    tmx_config_t cfg;
    cfg_init(&cfg, 0, 16384);
    run_pair(wimm_full_target, wimm_full_initiator, &cfg);
}

/* A peer's header that puts its device memory outside its segment (or off the 128-byte
 * grain) is refused when the segment is mapped; the copy checked then is what stores use. */
Test(soft, dm_bounds_checked_when_mapping, .timeout = 10)
{
    tmx_config_t          cfg;
    const tmx_prov_ops_t *ops = tmx_soft_prov.ops;
    tmx_dev_t            *a[1], *b[1];
    tmx_soft_dev_t       *da;
    tmx_pd_t             *pd;
    tmx_ah_t             *ah;
    uint8_t               addr[TMX_DEV_ADDR_MAX];
    size_t                len = sizeof(addr);
    uint64_t              off, size;
    int                   num;

    cfg_init(&cfg, -1, 65536);
    cr_assert_eq(ops->dev_open(&tmx_soft_prov, &cfg, a, 1, &num), TMX_OK);
    cr_assert_eq(ops->dev_open(&tmx_soft_prov, &cfg, b, 1, &num), TMX_OK);
    cr_assert_eq(ops->dev_get_addr(a[0], addr, &len), TMX_OK);
    cr_assert_eq(ops->pd_alloc(b[0], &pd), TMX_OK);
    da   = (tmx_soft_dev_t *)a[0];
    off  = da->hdr->dm_off;
    size = da->hdr->dm_size;
    cr_assert(size > 0 && off + size <= da->hdr->total);
    da->hdr->dm_size = da->hdr->total - off + 64; /* past the segment's end */
    cr_assert_eq(ops->ah_create(pd, addr, len, &ah), TMX_ERR_INVALID_ADDR);
    da->hdr->dm_size = size;
    da->hdr->dm_off  = off + 64; /* not on the grain */
    cr_assert_eq(ops->ah_create(pd, addr, len, &ah), TMX_ERR_INVALID_ADDR);
    da->hdr->dm_off  = UINT64_MAX - 127; /* wraps */
    cr_assert_eq(ops->ah_create(pd, addr, len, &ah), TMX_ERR_INVALID_ADDR);
    da->hdr->dm_off  = da->hdr->rings_off; /* over the rings */
    cr_assert_eq(ops->ah_create(pd, addr, len, &ah), TMX_ERR_INVALID_ADDR);
    da->hdr->dm_off = off;
    cr_assert_eq(ops->ah_create(pd, addr, len, &ah), TMX_OK);
    ops->ah_destroy(ah);
    ops->pd_free(pd);
    ops->dev_close(b[0]);
    ops->dev_close(a[0]);
}
