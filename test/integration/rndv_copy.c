/*
 * Rendezvous through staging buffers (TMX_RNDV_COPY, src/core/mem.c): on a device where
 * registering is a system call (verbs), a rendezvous message of up to TMX_RNDV_COPY bytes is
 * copied into a staging buffer of the sender's endpoint (registered once, read by that peer
 * only), read from there into the receiver's staging buffer and copied out; larger ones, and
 * all of them once the staging buffers are held, register the user's buffers. 2 ranks, rank
 * 0 sends to rank 1, every payload checked:
 *   1  one message each of 16385 (just past the default eager limit), 40000, 65535, 65536 bytes
 *      (staged at the default 64k), 65537 and 200000 bytes (registered); each send buffer is
 *      overwritten once its send completed, before the next message
 *   2  60000 bytes into a receive of 30000: TMX_ERR_TRUNCATED, the first 30000 bytes right and
 *      the guard bytes after the receive's buffer untouched
 *   3  MANY (100) sends of 20000 bytes each from their own buffers, all posted before rank 1
 *      posts a receive (run with TMX_EAGER_CREDITS above MANY, so that every RTS goes at once):
 *      the sender's endpoint pool (8) and the receiver's reads hold their 8 staging buffers,
 *      the other 92 are registered at each end
 * test/integration/rndv_copy.sh checks the counts of each worker's info line at destroy.
 * Prints "rndv_copy ok" per rank when every check held; exits non-zero otherwise.
 */
#include <tmx/tmx.h>
#include <tmx/tmx_job.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "it.h"

static int rank = -1; /* for the messages of it.h */

#define MANY   100u
#define MANY_N 20000u
#define GUARD  64u

static const size_t sizes[] = {16385, 40000, 65535, 65536, 65537, 200000};
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))

int main(void)
{
    tmx_job_h     job;
    tmx_context_h ctx;
    tmx_worker_h  worker;
    tmx_ep_h      eps[2];
    uint8_t      *buf  = malloc(200000 + GUARD);
    uint8_t      *many = malloc((size_t)MANY * MANY_N);

    REQUIRE(buf != NULL && many != NULL);
    IT_START(job, ctx, worker, eps, 2);

    /* 1: sizes on both sides of TMX_RNDV_COPY */
    for (unsigned i = 0; i < NSIZES; i++) {
        unsigned seed = 1 + i;

        if (rank == 0) {
            it_fill(buf, sizes[i], seed);
            CHECK(tmx_tag_send(eps[1], buf, sizes[i], seed));
            memset(buf, 0xee, sizes[i]); /* the send completed: the buffer is ours again */
        } else {
            it_recv_check(worker, buf, sizes[i], seed);
        }
    }

    /* 2: truncated: the read and the copy out stop at the receive's length */
    if (rank == 0) {
        it_fill(buf, 60000, 20);
        CHECK(tmx_tag_send(eps[1], buf, 60000, 20));
    } else {
        tmx_tag_recv_info_t info;
        tmx_request_h       req;

        memset(buf, 0x5a, 30000 + GUARD);
        CHECK(tmx_tag_recv_nb(worker, buf, 30000, 20, ~(tmx_tag_t)0, NULL, &req));
        REQUIRE(tmx_request_wait(req, &info) == TMX_ERR_TRUNCATED);
        tmx_request_free(req);
        REQUIRE(info.length == 60000);
        it_check(buf, 30000, 20);
        for (unsigned g = 0; g < GUARD; g++) {
            REQUIRE(buf[30000 + g] == 0x5a);
        }
    }

    /* 3: more sends in flight than staging buffers */
    if (rank == 0) {
        tmx_request_h reqs[MANY];

        for (unsigned i = 0; i < MANY; i++) {
            it_fill(many + (size_t)i * MANY_N, MANY_N, 100 + i);
            CHECK(tmx_tag_send_nb(eps[1], many + (size_t)i * MANY_N, MANY_N, 100 + i, NULL,
                                  &reqs[i]));
        }
        CHECK(tmx_job_barrier(job)); /* every RTS is out before rank 1 receives */
        for (unsigned i = 0; i < MANY; i++) {
            if (reqs[i] != NULL) {
                CHECK(tmx_request_wait(reqs[i], NULL));
                tmx_request_free(reqs[i]);
            }
        }
    } else {
        tmx_request_h reqs[MANY];

        memset(many, 0, (size_t)MANY * MANY_N);
        CHECK(tmx_job_barrier(job));
        for (unsigned i = 0; i < MANY; i++) {
            CHECK(tmx_tag_recv_nb(worker, many + (size_t)i * MANY_N, MANY_N, 100 + i,
                                  ~(tmx_tag_t)0, NULL, &reqs[i]));
        }
        for (unsigned i = 0; i < MANY; i++) {
            tmx_tag_recv_info_t info;

            CHECK(tmx_request_wait(reqs[i], &info));
            tmx_request_free(reqs[i]);
            REQUIRE(info.length == MANY_N);
            it_check(many + (size_t)i * MANY_N, MANY_N, 100 + i);
        }
    }
    IT_FINISH(job, ctx, worker, eps, 2);
    free(buf);
    free(many);
    printf("rndv_copy ok\n");
    return 0;
}
