/*
 * Messages received in another order than they were sent, past the unexpected budget: rank 1
 * sends N eager messages (tags 0..N-1, nonblocking) to rank 0, both ranks meet in a barrier,
 * and rank 0 receives them last first, each checked. With TMX_UNEXP_BUDGET=0 every one of
 * them holds its sender's credit until it is received; with fewer than TMX_EAGER_CREDITS of
 * them the job completes, and the process says once that it went past the budget
 * (config_limits.sh). Usage: unexp_order [N] (default 8).
 */
#include <tmx/tmx.h>
#include <tmx/tmx_job.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank;

#include "it.h"

#define LEN 256

int main(int argc, char **argv)
{
    tmx_job_h     job;
    tmx_context_h ctx;
    tmx_worker_h  w;
    tmx_ep_h      eps[2];
    int           n = argc > 1 ? atoi(argv[1]) : 8;
    uint8_t      *buf;

    CHECK(tmx_job_init(&job));
    rank = tmx_job_rank(job);
    REQUIRE(tmx_job_size(job) == 2 && n > 0);
    CHECK(tmx_context_create(NULL, &ctx));
    CHECK(tmx_worker_create(ctx, NULL, &w));
    CHECK(tmx_job_connect(job, w, eps));
    buf = calloc((size_t)n, LEN);
    REQUIRE(buf != NULL);
    if (rank == 1) {
        tmx_request_h *reqs = calloc((size_t)n, sizeof(*reqs));

        REQUIRE(reqs != NULL);
        for (int i = 0; i < n; i++) {
            it_fill(buf + (size_t)i * LEN, LEN, (unsigned)i);
            CHECK(tmx_tag_send_nb(eps[0], buf + (size_t)i * LEN, LEN, (tmx_tag_t)i, NULL,
                                  &reqs[i]));
        }
        CHECK(tmx_job_barrier(job));
        for (int i = 0; i < n; i++) {
            if (reqs[i] != NULL) {
                CHECK(tmx_request_wait(reqs[i], NULL));
                tmx_request_free(reqs[i]);
            }
        }
        free(reqs);
    } else {
        CHECK(tmx_job_barrier(job));
        for (int i = n - 1; i >= 0; i--) {
            it_recv_check(w, buf, LEN, (unsigned)i);
        }
    }
    CHECK(tmx_job_barrier(job));
    CHECK(tmx_ep_close(eps[0], TMX_EP_CLOSE_FLUSH));
    CHECK(tmx_ep_close(eps[1], TMX_EP_CLOSE_FLUSH));
    CHECK(tmx_worker_destroy(w));
    CHECK(tmx_context_destroy(ctx));
    tmx_job_finalize(job);
    if (rank == 0) {
        printf("unexp_order: %d messages received last first ok\n", n);
    }
    free(buf);
    return 0;
}
