/*
 * bench_soft: the soft device's latency floor. Two processes pinned to cores 0 and 1 ping-pong
 * 8-byte SENDs through the provider API only (inline, unsignaled, receives from an SRQ) and the
 * half round trip is printed in microseconds.
 *
 *   bench_soft [iterations] [size] [nopin]
 *
 * The iterations run in 10 timed rounds; the best and the median round are printed, next to
 * the same measurement for a bare cache line bounced between the two processes (the
 * machine's floor at that moment: other load on the cores shows in both).
 *
 * nopin leaves placement to the scheduler (useful to compare when other work runs on the
 * cores).
 */
#define _GNU_SOURCE
#include <sched.h>
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

#define NRECV 64

#define ROUNDS 10

typedef struct shared {
    _Atomic long ping __attribute__((aligned(64)));
    _Atomic long pong __attribute__((aligned(64)));
    _Atomic int ready[2] __attribute__((aligned(64)));
    size_t      qp_len[2];
    uint8_t     qp[2][TMX_QP_ADDR_MAX];
} shared_t;

typedef struct side {
    const tmx_prov_ops_t *ops;
    tmx_dev_t            *dev;
    tmx_pd_t             *pd;
    tmx_cq_t             *cq;
    tmx_srq_t            *srq;
    tmx_qp_t             *qp;
    tmx_mr_t             *mr;
    uint8_t              *rbuf;
} side_t;

static int bench_pin(int cpu)
{
    cpu_set_t set;

    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    return sched_setaffinity(0, sizeof(set), &set);
}

static int bench_post_recv(side_t *s, unsigned idx, size_t size)
{
    tmx_sge_t      sge = {.addr   = (uintptr_t)(s->rbuf + idx * size),
                          .length = (uint32_t)size,
                          .lkey   = s->mr->lkey};
    tmx_recv_wr_t  wr  = {.wr_id = idx, .sg_list = &sge, .num_sge = 1};
    tmx_recv_wr_t *bad;

    return s->ops->srq_post_recv(s->srq, &wr, &bad);
}

static int bench_setup(side_t *s, const tmx_config_t *cfg, shared_t *sh, int me, size_t size)
{
    tmx_dev_t          *devs[1];
    int                 num = 0;
    tmx_srq_init_attr_t sa  = {.type = TMX_SRQT_BASIC, .max_wr = NRECV, .max_sge = 1};
    tmx_qp_init_attr_t  qa;
    tmx_qp_attr_t       mod;

    s->ops = tmx_soft_prov.ops;
    if (s->ops->dev_open(&tmx_soft_prov, cfg, devs, 1, &num) != TMX_OK || num != 1) {
        return -1;
    }
    s->dev = devs[0];
    if (s->ops->pd_alloc(s->dev, &s->pd) != TMX_OK ||
        s->ops->cq_create(s->dev, 256, &s->cq) != TMX_OK) {
        return -1;
    }
    sa.cq   = s->cq;
    s->rbuf = calloc(NRECV, size);
    if (s->rbuf == NULL || s->ops->srq_create(s->pd, &sa, &s->srq) != TMX_OK ||
        s->ops->mr_reg(s->pd, s->rbuf, NRECV * size, TMX_ACCESS_LOCAL_WRITE, &s->mr) != TMX_OK) {
        return -1;
    }
    for (unsigned i = 0; i < NRECV; i++) {
        if (bench_post_recv(s, i, size) != TMX_OK) {
            return -1;
        }
    }
    memset(&qa, 0, sizeof(qa));
    qa.type        = TMX_QPT_RC;
    qa.send_cq     = s->cq;
    qa.recv_cq     = s->cq;
    qa.srq         = s->srq;
    qa.max_send_wr = 256;
    qa.max_inline  = (uint32_t)size;
    memset(&mod, 0, sizeof(mod));
    mod.state      = TMX_QPS_INIT;
    sh->qp_len[me] = TMX_QP_ADDR_MAX;
    if (s->ops->qp_create(s->pd, &qa, &s->qp) != TMX_OK ||
        s->ops->qp_modify(s->qp, &mod, TMX_QP_ATTR_STATE) != TMX_OK ||
        s->ops->qp_get_addr(s->qp, sh->qp[me], &sh->qp_len[me]) != TMX_OK) {
        return -1;
    }
    atomic_store(&sh->ready[me], 1);
    while (atomic_load(&sh->ready[1 - me]) == 0) {
    }
    mod.state           = TMX_QPS_RTR;
    mod.remote_addr     = sh->qp[1 - me];
    mod.remote_addr_len = sh->qp_len[1 - me];
    if (s->ops->qp_modify(s->qp, &mod, TMX_QP_ATTR_STATE | TMX_QP_ATTR_REMOTE) != TMX_OK) {
        return -1;
    }
    mod.state = TMX_QPS_RTS;
    return s->ops->qp_modify(s->qp, &mod, TMX_QP_ATTR_STATE) == TMX_OK ? 0 : -1;
}

static int bench_send(side_t *s, void *buf, size_t size)
{
    tmx_sge_t      sge = {.addr = (uintptr_t)buf, .length = (uint32_t)size};
    tmx_send_wr_t  wr;
    tmx_send_wr_t *bad;

    memset(&wr, 0, sizeof(wr));
    wr.sg_list    = &sge;
    wr.num_sge    = 1;
    wr.opcode     = TMX_WR_SEND;
    wr.send_flags = TMX_SEND_INLINE;
    return s->ops->post_send(s->qp, &wr, &bad);
}

/* Polls until one receive completed, reposts it. */
static int bench_recv(side_t *s, size_t size)
{
    tmx_wc_t wc;
    int      n;

    while ((n = s->ops->cq_poll(s->cq, 1, &wc)) == 0) {
    }
    if (n < 0 || wc.status != TMX_WC_SUCCESS || wc.opcode != TMX_WC_RECV) {
        return -1;
    }
    return bench_post_recv(s, (unsigned)wc.wr_id, size);
}

static int bench_cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* A bare cache line bounced between the two processes, per round. */
static void bench_raw(int me, shared_t *sh, long iters, double *usec)
{
    long per = iters / ROUNDS, v = 0;

    for (int r = 0; r < ROUNDS; r++) {
        double t0 = tmx_time_sec();
        for (long i = 0; i < per; i++) {
            v++;
            if (me == 0) {
                atomic_store_explicit(&sh->ping, v, memory_order_release);
                while (atomic_load_explicit(&sh->pong, memory_order_acquire) != v) {
                }
            } else {
                while (atomic_load_explicit(&sh->ping, memory_order_acquire) != v) {
                }
                atomic_store_explicit(&sh->pong, v, memory_order_release);
            }
        }
        usec[r] = (tmx_time_sec() - t0) * 1e6 / (double)per / 2;
    }
}

static int bench_run(int me, shared_t *sh, long iters, size_t size, int pin, double *usec)
{
    tmx_config_t cfg;
    side_t       s;
    uint8_t      msg[4096];
    long         warmup = iters / 10 + 100, per = iters / ROUNDS;
    double       t0     = 0;

    memset(&s, 0, sizeof(s));
    memset(msg, me, sizeof(msg));
    if (pin && bench_pin(me) != 0) {
        fprintf(stderr, "bench_soft: cannot pin to core %d (continuing unpinned)\n", me);
    }
    if (tmx_config_load(&cfg) != TMX_OK || bench_setup(&s, &cfg, sh, me, size) != 0) {
        fprintf(stderr, "bench_soft: setup failed on side %d\n", me);
        return -1;
    }
    bench_raw(me, sh, iters, usec + ROUNDS);
    for (long i = 0; i < warmup + per * ROUNDS; i++) {
        if (i >= warmup && (i - warmup) % per == 0) {
            if (i > warmup) {
                usec[(i - warmup) / per - 1] = (tmx_time_sec() - t0) * 1e6 / (double)per / 2;
            }
            t0 = tmx_time_sec();
        }
        if (me == 0) {
            if (bench_send(&s, msg, size) != TMX_OK || bench_recv(&s, size) != 0) {
                return -1;
            }
        } else {
            if (bench_recv(&s, size) != 0 || bench_send(&s, msg, size) != TMX_OK) {
                return -1;
            }
        }
    }
    usec[ROUNDS - 1] = (tmx_time_sec() - t0) * 1e6 / (double)per / 2;
    /* Let the peer see the last message before the rings go away. */
    atomic_store(&sh->ready[me], 2);
    while (atomic_load(&sh->ready[1 - me]) != 2) {
    }
    s.ops->qp_destroy(s.qp);
    s.ops->srq_destroy(s.srq);
    s.ops->mr_dereg(s.mr);
    s.ops->cq_destroy(s.cq);
    s.ops->pd_free(s.pd);
    s.ops->dev_close(s.dev);
    free(s.rbuf);
    return 0;
}

int main(int argc, char **argv)
{
    long      iters = argc > 1 ? atol(argv[1]) : 200000;
    size_t    size  = argc > 2 ? (size_t)atol(argv[2]) : 8;
    shared_t *sh;
    pid_t     pid;
    int       status = 0, rc;
    double    usec[2 * ROUNDS];
    int       pin    = !(argc > 3 && strcmp(argv[3], "nopin") == 0);

    if (iters < ROUNDS || size > 4096) {
        fprintf(stderr, "usage: bench_soft [iterations] [size <= 4096] [nopin]\n");
        return 2;
    }
    sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (sh == MAP_FAILED) {
        return 1;
    }
    memset(sh, 0, sizeof(*sh));
    fflush(NULL);
    pid = fork();
    if (pid < 0) {
        return 1;
    }
    if (pid == 0) {
        alarm(120);
        _exit(bench_run(1, sh, iters, size, pin, usec) == 0 ? 0 : 1);
    }
    rc = bench_run(0, sh, iters, size, pin, usec);
    if (rc != 0) {
        kill(pid, SIGKILL);
    }
    waitpid(pid, &status, 0);
    if (rc != 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "bench_soft: failed\n");
        return 1;
    }
    qsort(usec, ROUNDS, sizeof(double), bench_cmp);
    qsort(usec + ROUNDS, ROUNDS, sizeof(double), bench_cmp);
    printf("soft shm ping-pong, %zu bytes, %ld iterations in %d rounds, %s\n", size, iters,
           ROUNDS, pin ? "pinned to cores 0,1" : "not pinned");
    printf("  soft device half round trip: best %.3f us, median %.3f us\n", usec[0],
           usec[ROUNDS / 2]);
    printf("  bare cache line (floor)    : best %.3f us, median %.3f us\n", usec[ROUNDS],
           usec[ROUNDS + ROUNDS / 2]);
    return 0;
}
