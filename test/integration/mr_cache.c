/*
 * The registration cache (TMX_MR_CACHE): a rendezvous buffer's registration is kept after its
 * message and used again, and dropped when its memory leaves the process. 2 ranks; rank 0
 * sends 64 KiB messages (rendezvous at the default eager limit) from a buffer it mapped
 * itself, rank 1 receives them into one of its own. Each side, between messages:
 *   1  -                                                         registered for the cache
 *   2  -                                                         the cached registration
 *   3  munmap the buffer, map new memory at the same address     registered again
 *   4  -                                                         cached
 *   5  madvise(MADV_DONTNEED) the buffer (its pages are dropped) registered again
 *   6  -                                                         cached
 * Every payload is checked: without the cache's invalidation, messages 3 and 5 would be sent
 * from (or received into) the old, pinned pages over a device that reads through the
 * registration (verbs), and on any device the counts that mr_cache.sh checks would be 5
 * cached messages and 1 registration instead of 3 and 3.
 * With an argument N, then N messages more, each from and into another 64 KiB slice of one
 * mapping: with TMX_SOFT_MAX_MRS low, the device runs out of registrations while the cache
 * holds them, and the cache must give its idle ones back (else the sends wait forever).
 * Prints "mr_cache ok" per rank when every check held; exits non-zero otherwise.
 */
#define _GNU_SOURCE
#include <tmx/tmx.h>
#include <tmx/tmx_job.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "it.h"

static int rank = -1; /* for the messages of it.h */

#define MSG (64u << 10)

static uint8_t *map_at(void *addr)
{
    uint8_t *p = mmap(addr, MSG, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | (addr != NULL ? MAP_FIXED : 0), -1, 0);

    REQUIRE(p != MAP_FAILED && (addr == NULL || p == addr));
    return p;
}

int main(int argc, char **argv)
{
    tmx_job_h     job;
    tmx_context_h ctx;
    tmx_worker_h  worker;
    tmx_ep_h      eps[2];
    uint8_t      *buf;
    unsigned      many = argc > 1 ? (unsigned)atoi(argv[1]) : 0;

    IT_START(job, ctx, worker, eps, 2);
    buf = map_at(NULL);

    for (unsigned seed = 1; seed <= 6; seed++) {
        if (seed == 3) {
            /* the same address, other memory (the old pages stay pinned while registered) */
            REQUIRE(munmap(buf, MSG) == 0);
            REQUIRE(map_at(buf) == buf);
        } else if (seed == 5) {
            REQUIRE(madvise(buf, MSG, MADV_DONTNEED) == 0);
        }
        CHECK(tmx_job_barrier(job));
        if (rank == 0) {
            it_fill(buf, MSG, seed);
            CHECK(tmx_tag_send(eps[1], buf, MSG, seed));
        } else {
            it_recv_check(worker, buf, MSG, seed);
        }
    }

    if (many > 0) {
        uint8_t *pool = map_at(NULL);

        REQUIRE(munmap(pool, MSG) == 0);
        pool = mmap(NULL, (size_t)many * MSG, PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        REQUIRE(pool != MAP_FAILED);
        CHECK(tmx_job_barrier(job));
        for (unsigned i = 0; i < many; i++) {
            tmx_tag_recv_info_t info;
            uint8_t            *b = pool + (size_t)i * MSG;

            if (rank == 0) {
                it_fill(b, MSG, 100 + i);
                CHECK(tmx_tag_send(eps[1], b, MSG, 100 + i));
            } else {
                CHECK(tmx_tag_recv(worker, b, MSG, 100 + i, ~(tmx_tag_t)0, &info));
                REQUIRE(info.length == MSG);
                it_check(b, MSG, 100 + i);
            }
        }
        munmap(pool, (size_t)many * MSG);
    }
    IT_FINISH(job, ctx, worker, eps, 2);
    munmap(buf, MSG);
    printf("mr_cache ok\n");
    return 0;
}
