/*
 * A completed operation needs nothing more from its process: after it, the process may stop
 * calling tmx (a barrier, a sleep, a wait on something else) and its peer still gets
 * everything.
 *
 *   no_strand eager SIZE COUNT   rank 0 sends COUNT messages of SIZE bytes with tmx_tag_send
 *                                and goes straight into tmx_job_barrier; rank 1 receives them
 *                                all (each wait bounded) and checks every byte.
 *
 *   no_strand barrier            MPI's Irecv, Barrier, Wait against Send, Ssend, Barrier: rank 0
 *                                posts its receives and enters tmx_job_barrier; rank 1's blocking
 *                                rendezvous and synchronous sends need rank 0 to match and read
 *                                them, so the barrier must progress rank 0's worker.
 *
 * Prints "rank R ok" per rank that checked everything; exits non-zero otherwise.
 */
#include <tmx/tmx.h>
#include <tmx/tmx_job.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "it.h"


static int          rank;
static tmx_worker_h worker;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Waits for req with progress, at most secs seconds: its status, or TMX_ERR_TIMED_OUT. */
static tmx_status_t wait_bounded(tmx_request_h req, double secs)
{
    double       end = now() + secs;
    tmx_status_t s;

    while ((s = tmx_request_test(req, NULL)) == TMX_INPROGRESS) {
        tmx_worker_progress(worker);
        if (now() > end) {
            return TMX_ERR_TIMED_OUT;
        }
    }
    return s;
}

/* Waits outside tmx (no progress) until path exists, at most secs seconds. */
static int run_eager(tmx_job_h job, tmx_ep_h *eps, size_t size, int count)
{
    unsigned char *buf = malloc(size);
    int            good = 0;

    if (buf == NULL) {
        return 1;
    }
    if (rank == 0) {
        for (int i = 0; i < count; i++) {
            memset(buf, i + 1, size);
            CHECK(tmx_tag_send(eps[1], buf, size, (tmx_tag_t)i));
        }
        /* Everything reported sent: no more progress from here until rank 1 has it all. */
        CHECK(tmx_job_barrier(job));
        good = count;
    } else if (rank == 1) {
        for (int i = 0; i < count; i++) {
            tmx_request_h req;
            tmx_status_t  s;
            size_t        k;

            memset(buf, 0, size);
            s = tmx_tag_recv_nb(worker, buf, size, (tmx_tag_t)i, ~(tmx_tag_t)0, NULL, &req);
            if (s == TMX_INPROGRESS) {
                s = wait_bounded(req, 20);
                if (s == TMX_ERR_TIMED_OUT) {
                    fprintf(stderr, "rank 1: message %d of %d never arrived\n", i + 1, count);
                    tmx_request_cancel(req);
                }
                tmx_request_free(req);
            }
            for (k = 0; s == TMX_OK && k < size && buf[k] == (unsigned char)(i + 1); k++) {
            }
            if (s == TMX_OK && k == size) {
                good++;
            } else if (s != TMX_ERR_TIMED_OUT) {
                fprintf(stderr, "rank 1: message %d: %s, bad byte at %zu\n", i + 1,
                        tmx_status_string(s), k);
            }
        }
        printf("rank 1 received %d of %d\n", good, count);
        CHECK(tmx_job_barrier(job));
    }
    free(buf);
    return good == count ? 0 : 1;
}

static int run_barrier(tmx_job_h job, tmx_ep_h *eps)
{
    size_t         big = (size_t)1 << 20;
    unsigned char *buf = malloc(big);
    int            small = 0, rc = 0;

    if (buf == NULL) {
        return 1;
    }
    if (rank == 0) {
        tmx_request_h req[2];
        tmx_status_t  s[2];

        memset(buf, 0, big);
        s[0] = tmx_tag_recv_nb(worker, buf, big, 1, ~(tmx_tag_t)0, NULL, &req[0]);
        s[1] = tmx_tag_recv_nb(worker, &small, sizeof(small), 2, ~(tmx_tag_t)0, NULL, &req[1]);
        CHECK(s[0]);
        CHECK(s[1]);
        CHECK(tmx_job_barrier(job));
        for (int i = 0; i < 2; i++) {
            if (s[i] == TMX_INPROGRESS) {
                s[i] = wait_bounded(req[i], 20);
                tmx_request_free(req[i]);
            }
        }
        for (size_t k = 0; k < big; k++) {
            rc |= buf[k] != (unsigned char)(k * 7);
        }
        rc |= s[0] != TMX_OK || s[1] != TMX_OK || small != 4242;
        printf("rank 0 received the rendezvous and the synchronous message: %s\n",
               rc == 0 ? "intact" : "no");
    } else if (rank == 1) {
        for (size_t k = 0; k < big; k++) {
            buf[k] = (unsigned char)(k * 7);
        }
        small = 4242;
        CHECK(tmx_tag_send(eps[0], buf, big, 1));
        CHECK(tmx_tag_send_sync(eps[0], &small, sizeof(small), 2));
        CHECK(tmx_job_barrier(job));
    }
    free(buf);
    return rc;
}

int main(int argc, char **argv)
{
    tmx_job_h     job;
    tmx_context_h ctx;
    tmx_ep_h     *eps;
    int           size, rc;

    if (!((argc >= 4 && strcmp(argv[1], "eager") == 0) ||
          (argc >= 2 && strcmp(argv[1], "barrier") == 0))) {
        fprintf(stderr, "usage: no_strand eager SIZE COUNT | no_strand barrier\n");
        return 2;
    }
    CHECK(tmx_job_init(&job));
    rank = tmx_job_rank(job);
    size = tmx_job_size(job);
    if (size != 2) {
        fprintf(stderr, "no_strand needs 2 ranks\n");
        return 2;
    }
    CHECK(tmx_context_create(NULL, &ctx));
    CHECK(tmx_worker_create(ctx, NULL, &worker));
    eps = calloc((size_t)size, sizeof(*eps));
    CHECK(tmx_job_connect(job, worker, eps));
    { /* connections come up in the background: up both ways before the test stops progress */
        tmx_request_h req;
        int           in = -1, out = rank;
        tmx_status_t  s  = tmx_tag_recv_nb(worker, &in, sizeof(in), 1u << 30, ~(tmx_tag_t)0,
                                           NULL, &req);
        CHECK(s);
        CHECK(tmx_tag_send(eps[1 - rank], &out, sizeof(out), 1u << 30));
        if (s == TMX_INPROGRESS) {
            CHECK(tmx_request_wait(req, NULL));
            tmx_request_free(req);
        }
    }
    if (strcmp(argv[1], "eager") == 0) {
        rc = run_eager(job, eps, strtoul(argv[2], NULL, 0), atoi(argv[3]));
    } else {
        rc = run_barrier(job, eps);
    }
    CHECK(tmx_job_barrier(job));
    for (int r = 0; r < size; r++) {
        CHECK(tmx_ep_close(eps[r], TMX_EP_CLOSE_FLUSH));
    }
    free(eps);
    CHECK(tmx_worker_destroy(worker));
    CHECK(tmx_context_destroy(ctx));
    tmx_job_finalize(job);
    if (rc == 0) {
        printf("rank %d ok\n", rank);
    }
    return rc;
}
