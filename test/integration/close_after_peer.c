/*
 * close_after_peer: rank 1 closes its endpoints and destroys its worker in order while rank 0's
 * endpoint to it is still open with nothing in flight. tmx(3) promises that a FLUSH close
 * returns TMX_ERR_PEER_FAILED only when the peer died before the flush finished, so rank 0's
 * close must return TMX_OK. Run under tmxrun with 2 ranks; exits 0 when every check passed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <tmx/tmx.h>
#include <tmx/tmx_job.h>

static int errors;

#define EXPECT(call, want)                                                                     \
    do {                                                                                       \
        tmx_status_t s_ = (call);                                                              \
        if (s_ != (want)) {                                                                    \
            fprintf(stderr, "close_after_peer: rank %d: %s: %s, expected %s\n", rank, #call,  \
                    tmx_status_string(s_), tmx_status_string(want));                           \
            errors++;                                                                          \
        }                                                                                      \
    } while (0)

static double now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Progress for a while: the peer's disconnect requests are answered from here. */
static void progress_for(tmx_worker_h w, double sec)
{
    double end = now() + sec;

    while (now() < end) {
        tmx_worker_progress(w);
    }
}

int main(void)
{
    tmx_job_h     job;
    tmx_context_h ctx;
    tmx_worker_h  w;
    tmx_ep_h      eps[2];
    int           rank = -1, v = 0;

    if (tmx_job_init(&job) != TMX_OK) {
        fprintf(stderr, "close_after_peer: tmx_job_init failed\n");
        return 1;
    }
    rank = tmx_job_rank(job);
    if (tmx_job_size(job) != 2) {
        fprintf(stderr, "close_after_peer: needs 2 ranks\n");
        return 1;
    }
    EXPECT(tmx_context_create(NULL, &ctx), TMX_OK);
    EXPECT(tmx_worker_create(ctx, NULL, &w), TMX_OK);
    EXPECT(tmx_job_connect(job, w, eps), TMX_OK);
    if (errors > 0) {
        return 1;
    }
    /* one message each way: both connections are up and used */
    v = rank;
    EXPECT(tmx_tag_send(eps[1 - rank], &v, sizeof(v), 7), TMX_OK);
    EXPECT(tmx_tag_recv(w, &v, sizeof(v), 7, ~(tmx_tag_t)0, NULL), TMX_OK);
    EXPECT(tmx_job_barrier(job), TMX_OK);

    if (rank == 1) {
        EXPECT(tmx_ep_close(eps[0], TMX_EP_CLOSE_FLUSH), TMX_OK);
        EXPECT(tmx_ep_close(eps[1], TMX_EP_CLOSE_FLUSH), TMX_OK);
        EXPECT(tmx_worker_destroy(w), TMX_OK);
        EXPECT(tmx_job_barrier(job), TMX_OK);
    } else {
        progress_for(w, 1.0); /* rank 1 closes meanwhile */
        EXPECT(tmx_job_barrier(job), TMX_OK);
        progress_for(w, 0.1);
        /* the peer is gone in order and nothing of ours was in flight */
        EXPECT(tmx_ep_close(eps[1], TMX_EP_CLOSE_FLUSH), TMX_OK);
        EXPECT(tmx_ep_close(eps[0], TMX_EP_CLOSE_FLUSH), TMX_OK);
        EXPECT(tmx_worker_destroy(w), TMX_OK);
    }
    EXPECT(tmx_context_destroy(ctx), TMX_OK);
    tmx_job_finalize(job);
    if (errors == 0) {
        printf("rank %d ok\n", rank);
    }
    return errors == 0 ? 0 : 1;
}
