/*
 * Staging buffers of many endpoints (TMX_RNDV_COPY, src/core/mem.c), run on the soft device
 * with TMX_SOFT_REG_SLOW=yes (test/integration/rndv_stage_eps.sh) so that it stages as over
 * verbs. A sender's staging pools belong to its endpoints, and at most 8 endpoints of a worker
 * and device hold one at a time. NRANKS (10) ranks; rank 0 sends, every payload is checked:
 *   1  rank 0 sends one message of LEN (40000) bytes to each of ranks 1-9 in turn: the
 *      endpoints to ranks 1-8 make a pool each, the one to rank 9 finds none left and
 *      registers the buffer
 *   2  rank 0 posts FORCED (4) sends to rank 2 from its pool, none of them received, and
 *      closes that endpoint with TMX_EP_CLOSE_FORCE: each send fails with TMX_ERR_CANCELED,
 *      its staging buffer goes back, the pool is freed. Rank 2 then posts the 4 receives: none
 *      may complete with the data of a canceled send; each must complete with an error, or
 *      not at all within a second (it is then canceled)
 *   3  rank 0 closes its endpoint to rank 1 (a flush: nothing in flight), whose pool is freed,
 *      and sends to rank 9 again: now its endpoint gets a pool (the count of pools went down)
 * Expected counts, from each worker's info line at destroy (rndv_stage_eps.sh): rank 0 staged
 * 8 + 4 + 1 = 13 and registered 1; each receiver staged what it received (rank 9: 2).
 * Prints "rndv_stage_eps ok" per rank when every check held; exits non-zero otherwise.
 */
#include <tmx/tmx.h>
#include <tmx/tmx_job.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "it.h"

static int rank = -1; /* for the messages of it.h */
static int bad;

#define NRANKS 10
#define LEN    40000u
#define FORCED 4u

static double now_sec(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int main(void)
{
    tmx_job_h     job;
    tmx_context_h ctx;
    tmx_worker_h  worker;
    tmx_ep_h      eps[NRANKS];
    uint8_t      *buf = malloc((size_t)FORCED * LEN);

    REQUIRE(buf != NULL);
    IT_START(job, ctx, worker, eps, NRANKS);

    /* 1: one message to each of 9 peers */
    for (int p = 1; p < NRANKS; p++) {
        if (rank == 0) {
            it_fill(buf, LEN, (unsigned)p);
            CHECK(tmx_tag_send(eps[p], buf, LEN, (tmx_tag_t)p));
        } else if (rank == p) {
            it_recv_check(worker, buf, LEN, (unsigned)p);
        }
    }
    CHECK(tmx_job_barrier(job));

    /* 2: a forced close with staged sends in flight */
    if (rank == 0) {
        tmx_request_h reqs[FORCED];

        for (unsigned i = 0; i < FORCED; i++) {
            it_fill(buf + (size_t)i * LEN, LEN, 200 + i);
            CHECK(tmx_tag_send_nb(eps[2], buf + (size_t)i * LEN, LEN, 200 + i, NULL, &reqs[i]));
            REQUIRE(reqs[i] != NULL); /* a rendezvous send cannot complete at once */
        }
        CHECK(tmx_ep_close(eps[2], TMX_EP_CLOSE_FORCE));
        eps[2] = NULL;
        for (unsigned i = 0; i < FORCED; i++) {
            tmx_status_t s = tmx_request_wait(reqs[i], NULL);

            EXPECT(s == TMX_ERR_CANCELED, "forced send %u: %s, not canceled", i,
                   tmx_status_string(s));
            tmx_request_free(reqs[i]);
        }
        memset(buf, 0xee, (size_t)FORCED * LEN); /* ours again: a late read must not see it */
    }
    CHECK(tmx_job_barrier(job));
    if (rank == 2) {
        for (unsigned i = 0; i < FORCED; i++) {
            tmx_request_h req;
            tmx_status_t  s;
            double        end = now_sec() + 1.0;

            memset(buf, 0, LEN);
            CHECK(tmx_tag_recv_nb(worker, buf, LEN, 200 + i, ~(tmx_tag_t)0, NULL, &req));
            /* rank 0's close failed this rank's endpoint to it: a pending receive is told once
             * (TMX_ERR_PEER_FAILED_PENDING) and stays posted */
            while (((s = tmx_request_test(req, NULL)) == TMX_INPROGRESS ||
                    s == TMX_ERR_PEER_FAILED_PENDING) &&
                   now_sec() < end) {
                tmx_worker_progress(worker);
            }
            if (s == TMX_ERR_PEER_FAILED_PENDING) {
                s = TMX_INPROGRESS;
            }
            if (s == TMX_INPROGRESS) {
                CHECK(tmx_request_cancel(req));
                s = tmx_request_wait(req, NULL);
                EXPECT(s == TMX_ERR_CANCELED, "receive %u: %s after its cancel", i,
                       tmx_status_string(s));
            } else {
                EXPECT(s != TMX_OK, "receive %u: the data of a canceled send arrived", i);
                fprintf(stderr, "rank 2: receive %u of a canceled send: %s\n", i,
                        tmx_status_string(s));
            }
            tmx_request_free(req);
        }
    }
    CHECK(tmx_job_barrier(job));

    /* 3: a pool freed by a close is one that another endpoint may make */
    if (rank == 0) {
        CHECK(tmx_ep_close(eps[1], TMX_EP_CLOSE_FLUSH));
        eps[1] = NULL;
        it_fill(buf, LEN, 300);
        CHECK(tmx_tag_send(eps[9], buf, LEN, 300));
    } else if (rank == 9) {
        it_recv_check(worker, buf, LEN, 300u);
    }

    CHECK(tmx_job_barrier(job));
    for (int r = 0; r < NRANKS; r++) {
        if (eps[r] != NULL) {
            tmx_status_t s = tmx_ep_close(eps[r], TMX_EP_CLOSE_FLUSH);

            /* rank 2's endpoint to rank 0 saw rank 0 close with sends of its outstanding */
            EXPECT(s == TMX_OK || (rank == 2 && r == 0), "close of the endpoint to %d: %s", r,
                   tmx_status_string(s));
        }
    }
    CHECK(tmx_worker_destroy(worker));
    CHECK(tmx_context_destroy(ctx));
    tmx_job_finalize(job);
    free(buf);
    if (bad > 0) {
        return 1;
    }
    printf("rndv_stage_eps ok\n");
    return 0;
}
