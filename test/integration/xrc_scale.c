/*
 * xrc_scale: every rank connects to every rank (itself included), sends each a small message
 * and its right neighbour a rendezvous one (striped over the XRC domains when XRC is on),
 * checks every payload, and once every connection exists reports what its device holds
 * (tmx_worker_query, TMX_WORKER_ATTR_XRC) on one line:
 *
 *   counts rank=R size=N xrc=0|1 domains=D node=<id> rc=.. ini=.. tgt=.. opened=.. srqs=..
 *          conn=.. rcv=.. rcv_qps=.. rcv_bad=.. striped=..
 *
 * rcv_bad counts the receive QPs whose report does not hold together (a state other than RTR,
 * a domain out of range, or an SRQ number that is not ours in that domain). xrc_scale.sh runs
 * it on simulated nodes (TMX_NODE_ID) and checks the sums. Public API only.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <tmx/tmx.h>
#include <tmx/tmx_job.h>

#include "it.h"

#define SMALL 64
#define BIG   (256 * 1024) /* above the eager limit, and two stripes of 64 KiB at least */

static int rank = -1, size = -1;


static void wait_all(tmx_worker_h worker, tmx_request_h *reqs, tmx_tag_recv_info_t *infos, int n)
{
    int left = n;

    while (left > 0) {
        unsigned events = tmx_worker_progress(worker);

        left = 0;
        for (int i = 0; i < n; i++) {
            tmx_status_t s;

            if (reqs[i] == NULL) {
                continue;
            }
            s = tmx_request_test(reqs[i], infos != NULL ? &infos[i] : NULL);
            if (s == TMX_INPROGRESS) {
                left++;
                continue;
            }
            if (s != TMX_OK) {
                fprintf(stderr, "xrc_scale: rank %d: request %d: %s\n", rank, i,
                        tmx_status_string(s));
                exit(1);
            }
            tmx_request_free(reqs[i]);
            reqs[i] = NULL;
        }
        if (left > 0 && events == 0) {
            struct timespec ts = {0, 50 * 1000};
            nanosleep(&ts, NULL);
        }
    }
}

static unsigned char pattern(int src, int dst, size_t i)
{
    return (unsigned char)((unsigned)src * 131u + (unsigned)dst * 31u + (unsigned)(i * 7u) +
                           (unsigned)(i >> 12));
}

int main(void)
{
    tmx_context_params_t  cparams = {.field_mask = 0};
    tmx_worker_params_t   wparams = {.field_mask = 0};
    tmx_worker_attr_t     attr;
    tmx_xrc_rcv_qp_attr_t *rcv;
    tmx_tag_recv_info_t  *infos;
    tmx_request_h        *reqs;
    tmx_context_h         ctx;
    tmx_worker_h          worker;
    tmx_job_h             job;
    tmx_ep_h             *eps;
    unsigned char        *in, *out, *bin, *bout;
    unsigned              bad = 0, errors = 0;
    int                   right, left;

    CHECK(tmx_job_init(&job));
    rank  = tmx_job_rank(job);
    size  = tmx_job_size(job);
    right = (rank + 1) % size;
    left  = (rank + size - 1) % size;
    CHECK(tmx_context_create(&cparams, &ctx));
    CHECK(tmx_worker_create(ctx, &wparams, &worker));
    eps   = calloc((size_t)size, sizeof(*eps));
    reqs  = calloc(2 * (size_t)size + 2, sizeof(*reqs));
    infos = calloc(2 * (size_t)size + 2, sizeof(*infos));
    in    = malloc((size_t)size * SMALL);
    out   = malloc((size_t)size * SMALL);
    bin   = malloc(BIG);
    bout  = malloc(BIG);
    rcv   = calloc(64 * (size_t)size, sizeof(*rcv));
    if (eps == NULL || reqs == NULL || infos == NULL || in == NULL || out == NULL ||
        bin == NULL || bout == NULL || rcv == NULL) {
        return 1;
    }
    CHECK(tmx_job_connect(job, worker, eps));
    for (int r = 0; r < size; r++) {
        CHECK(tmx_tag_recv_nb(worker, in + (size_t)r * SMALL, SMALL, (tmx_tag_t)r, ~(tmx_tag_t)0,
                              NULL, &reqs[r]));
    }
    CHECK(tmx_tag_recv_nb(worker, bin, BIG, (tmx_tag_t)(size + left), ~(tmx_tag_t)0, NULL,
                          &reqs[2 * size]));
    for (int k = 0; k < size; k++) {
        int r = (rank + k) % size; /* each starts with itself, then to its right */

        for (size_t i = 0; i < SMALL; i++) {
            out[(size_t)r * SMALL + i] = pattern(rank, r, i);
        }
        CHECK(tmx_tag_send_nb(eps[r], out + (size_t)r * SMALL, SMALL, (tmx_tag_t)rank, NULL,
                              &reqs[size + r]));
    }
    for (size_t i = 0; i < BIG; i++) {
        bout[i] = pattern(rank, right, i);
    }
    CHECK(tmx_tag_send_nb(eps[right], bout, BIG, (tmx_tag_t)(size + rank), NULL,
                          &reqs[2 * size + 1]));
    wait_all(worker, reqs, infos, 2 * size + 2);
    for (int r = 0; r < size; r++) {
        for (size_t i = 0; i < SMALL; i++) {
            errors += in[(size_t)r * SMALL + i] != pattern(r, rank, i);
        }
    }
    for (size_t i = 0; i < BIG; i++) {
        errors += bin[i] != pattern(left, rank, i);
    }
    if (errors != 0) {
        fprintf(stderr, "xrc_scale: rank %d: %u bytes differ\n", rank, errors);
        return 1;
    }
    /* every rank has sent to every rank: every connection exists, on every side */
    CHECK(tmx_job_barrier(job));
    memset(&attr, 0, sizeof(attr));
    attr.field_mask      = TMX_WORKER_ATTR_XRC;
    attr.xrc.rcv_qps     = rcv;
    attr.xrc.max_rcv_qps = 64 * (unsigned)size;
    CHECK(tmx_worker_query(worker, &attr));
    for (unsigned i = 0; i < attr.xrc.num_rcv_qps && i < attr.xrc.max_rcv_qps; i++) {
        bad += rcv[i].state != TMX_XRC_QP_RTR || rcv[i].domain >= attr.xrc.domains ||
               rcv[i].srq_num != attr.xrc.srq_num[rcv[i].domain] || rcv[i].peer_id == 0;
    }
    printf("counts rank=%d size=%d xrc=%d domains=%u node=%016llx rc=%u ini=%u tgt=%u "
           "opened=%u srqs=%u conn=%u rcv=%u rcv_qps=%u rcv_bad=%u striped=%llu\n",
           rank, size, attr.xrc.enabled, attr.xrc.domains,
           (unsigned long long)attr.xrc.node_id, attr.xrc.rc_qps, attr.xrc.ini_qps,
           attr.xrc.tgt_qps, attr.xrc.tgt_opened, attr.xrc.srqs, attr.xrc.connections,
           attr.xrc.rcv_contexts, attr.xrc.num_rcv_qps, bad,
           (unsigned long long)attr.xrc.rndv_striped);
    fflush(stdout);
    CHECK(tmx_job_barrier(job)); /* nobody closes while the others still query */
    for (int r = 0; r < size; r++) {
        CHECK(tmx_ep_close(eps[r], TMX_EP_CLOSE_FLUSH));
    }
    CHECK(tmx_worker_destroy(worker));
    CHECK(tmx_context_destroy(ctx));
    tmx_job_finalize(job);
    free(eps);
    free(reqs);
    free(infos);
    free(in);
    free(out);
    free(bin);
    free(bout);
    free(rcv);
    return 0;
}
