/*
 * tmx_mem_map: memory registered once for rendezvous messages. 2 ranks; rank 0 sends, rank 1
 * receives, 64 KiB messages (rendezvous at the default eager limit):
 *   - 20 from and into ranges both ranks mapped (each at another offset of a 4 MiB pool);
 *   - 5 from and into memory nobody mapped; 1 whose buffers straddle the end of the pools
 *     (partly mapped: registered per message);
 *   - 1 from a second mapping that rank 0 unmaps while the send is in flight (the send keeps
 *     it until it completes), into unmapped memory.
 * Every payload is checked. The counts (20 + 1 sends and 20 receives by a mapping, the rest
 * registered per message) come from the worker's info line at destroy, checked by mem_map.sh.
 * Bad arguments: NULL worker, address or handle, length 0, a range that wraps.
 * Prints "mem_map ok" per rank when every check held; exits non-zero otherwise.
 */
#include <tmx/tmx.h>
#include <tmx/tmx_job.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "it.h"

static int rank = -1; /* for the messages of it.h */


#define POOL   (4u << 20)
#define MSG    (64u << 10)
#define MAPPED 20
#define OTHER  5

static void xfer(int me, tmx_worker_h worker, tmx_ep_h peer, uint8_t *sbuf, uint8_t *rbuf,
                 unsigned seed)
{
    if (me == 0) {
        it_fill(sbuf, MSG, seed);
        CHECK(tmx_tag_send(peer, sbuf, MSG, seed));
    } else {
        it_recv_check(worker, rbuf, MSG, seed);
    }
}

int main(void)
{
    tmx_job_h     job;
    tmx_context_h ctx;
    tmx_worker_h  worker;
    tmx_ep_h      eps[2];
    tmx_mem_h     memh, memh2;
    uint8_t      *pool  = malloc(POOL);
    uint8_t      *other = malloc(MSG);
    uint8_t      *pool2 = malloc(MSG);
    unsigned      seed  = 1;

    REQUIRE(pool != NULL && other != NULL && pool2 != NULL);
    IT_START(job, ctx, worker, eps, 2);

    REQUIRE(tmx_mem_map(NULL, pool, POOL, &memh) == TMX_ERR_INVALID_PARAM);
    REQUIRE(tmx_mem_map(worker, NULL, POOL, &memh) == TMX_ERR_INVALID_PARAM);
    REQUIRE(tmx_mem_map(worker, pool, 0, &memh) == TMX_ERR_INVALID_PARAM);
    REQUIRE(tmx_mem_map(worker, pool, POOL, NULL) == TMX_ERR_INVALID_PARAM);
    REQUIRE(tmx_mem_map(worker, (void *)(uintptr_t)-4096, 8192, &memh) == TMX_ERR_INVALID_PARAM);
    REQUIRE(tmx_mem_unmap(NULL) == TMX_ERR_INVALID_PARAM);
    CHECK(tmx_mem_map(worker, pool, POOL, &memh));
    CHECK(tmx_job_barrier(job));

    for (unsigned i = 0; i < MAPPED; i++, seed++) {
        uint8_t *b = pool + (size_t)i * (POOL - MSG) / MAPPED;
        xfer(rank, worker, eps[1], b, b, seed);
    }
    for (unsigned i = 0; i < OTHER; i++, seed++) {
        xfer(rank, worker, eps[1], other, other, seed);
    }
    /* the last half of the message lies past the pool: not in the mapping */
    {
        uint8_t *straddle = malloc(POOL + MSG);
        REQUIRE(straddle != NULL);
        CHECK(tmx_mem_unmap(memh));
        CHECK(tmx_mem_map(worker, straddle, POOL + MSG / 2, &memh));
        xfer(rank, worker, eps[1], straddle + POOL, straddle + POOL, seed++);
        CHECK(tmx_mem_unmap(memh));
        free(straddle);
    }

    /* unmapped while the send is in flight */
    CHECK(tmx_job_barrier(job));
    if (rank == 0) {
        tmx_request_h req = NULL;
        tmx_status_t  st;

        CHECK(tmx_mem_map(worker, pool2, MSG, &memh2));
        it_fill(pool2, MSG, seed);
        st = tmx_tag_send_nb(eps[1], pool2, MSG, seed, NULL, &req);
        REQUIRE(st == TMX_INPROGRESS);
        CHECK(tmx_mem_unmap(memh2));
        CHECK(tmx_request_wait(req, NULL));
        tmx_request_free(req);
    } else {
        xfer(rank, worker, eps[1], other, other, seed);
    }
    seed++;

    IT_FINISH(job, ctx, worker, eps, 2);
    free(pool);
    free(other);
    free(pool2);
    printf("mem_map ok\n");
    return 0;
}
