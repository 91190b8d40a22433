/*
 * A soft device with few memory registrations (TMX_SOFT_MAX_MRS=8, the fewest it takes) and
 * eager-RDMA rings lent from the first message (TMX_RING=yes): every rank first sends a small
 * message to every rank (each may lend a ring to each sender and take one from each receiver;
 * a ring's memory and a sender's control block are registrations of the device), then ranks
 * 0 and 1 exchange one rendezvous message each way, blocking, its data checked. The rings
 * took every registration before (a worker keeps 3 for its own buffers), and the rendezvous
 * send waited for ever for one ("the device has none left (0 outstanding sends ...)"); now
 * rings keep to a quarter of the device's table. Run by config_limits.sh with 4 ranks.
 */
#include <tmx/tmx.h>
#include <tmx/tmx_job.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank;

#include "it.h"

#define BIG (64 * 1024)

int main(void)
{
    tmx_job_h      job;
    tmx_context_h  ctx;
    tmx_worker_h   w;
    tmx_ep_h      *eps;
    tmx_request_h *reqs;
    uint8_t        sbuf[64], rbuf[64], *big;
    int            size;

    CHECK(tmx_job_init(&job));
    rank = tmx_job_rank(job);
    size = tmx_job_size(job);
    REQUIRE(size >= 2);
    CHECK(tmx_context_create(NULL, &ctx));
    CHECK(tmx_worker_create(ctx, NULL, &w));
    eps  = calloc((size_t)size, sizeof(*eps));
    reqs = calloc((size_t)size, sizeof(*reqs));
    big  = malloc(BIG);
    REQUIRE(eps != NULL && reqs != NULL && big != NULL);
    CHECK(tmx_job_connect(job, w, eps));
    /* every pair: rings lent and taken everywhere */
    for (int round = 0; round < 4; round++) {
        it_fill(sbuf, sizeof(sbuf), (unsigned)(rank * 16 + round));
        for (int d = 0; d < size; d++) {
            tmx_status_t s = tmx_tag_send_nb(eps[d], sbuf, sizeof(sbuf),
                                             (tmx_tag_t)(rank * 16 + round), NULL, &reqs[d]);
            CHECK(s);
            if (s == TMX_OK) {
                reqs[d] = NULL;
            }
        }
        for (int src = 0; src < size; src++) {
            it_recv_check(w, rbuf, sizeof(rbuf), (unsigned)(src * 16 + round));
        }
        for (int d = 0; d < size; d++) {
            if (reqs[d] != NULL) {
                CHECK(tmx_request_wait(reqs[d], NULL));
                tmx_request_free(reqs[d]);
            }
        }
    }
    CHECK(tmx_job_barrier(job));
    /* one rendezvous message each way between ranks 0 and 1 */
    if (rank == 0) {
        it_fill(big, BIG, 1000);
        CHECK(tmx_tag_send(eps[1], big, BIG, 1000));
        it_recv_check(w, big, BIG, 1001);
    } else if (rank == 1) {
        it_recv_check(w, big, BIG, 1000);
        it_fill(big, BIG, 1001);
        CHECK(tmx_tag_send(eps[0], big, BIG, 1001));
    }
    CHECK(tmx_job_barrier(job));
    for (int d = 0; d < size; d++) {
        CHECK(tmx_ep_close(eps[d], TMX_EP_CLOSE_FLUSH));
    }
    CHECK(tmx_worker_destroy(w));
    CHECK(tmx_context_destroy(ctx));
    tmx_job_finalize(job);
    if (rank == 0) {
        printf("mr_few: rendezvous both ways after rings to %d ranks ok\n", size);
    }
    free(big);
    free(reqs);
    free(eps);
    return 0;
}
