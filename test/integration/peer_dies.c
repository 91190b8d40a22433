/*
 * peer_dies: what a dead peer leaves to the ranks that remain, under tmxrun with 2 ranks.
 *
 *   peer_dies rndv [BYTES]  (default 1 MiB) rank 1 posts a rendezvous send to rank 0 and dies (_exit) once rank 0
 *                     has its RTS queued as unexpected; rank 0 then posts the matching receive,
 *                     whose read finds the sender gone: the receive must complete with
 *                     TMX_ERR_PEER_FAILED (whatever path the read takes: cross-memory attach
 *                     or the rings). Rank 0 prints "rank 0 ok" when it does.
 *   peer_dies linger  both ranks connect, exchange a message and print "ready <pid> <ppid>",
 *                     then wait to be killed (the caller kills the whole job with SIGKILL).
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <tmx/tmx.h>
#include <tmx/tmx_job.h>

static size_t big = (size_t)1 << 20; /* far above the eager limit: rendezvous */

static int rank = -1;

#define CHECK(call, want)                                                                      \
    do {                                                                                       \
        tmx_status_t s_ = (call);                                                              \
        if (s_ != (want)) {                                                                    \
            fprintf(stderr, "peer_dies: rank %d: %s: %s, expected %s\n", rank, #call,         \
                    tmx_status_string(s_), tmx_status_string(want));                           \
            exit(1);                                                                           \
        }                                                                                      \
    } while (0)

static double now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* 1 while the process runs (a zombie has died: its parent just has not reaped it yet). */
static int running(pid_t pid)
{
    char  path[64], line[256];
    FILE *f;
    int   run = 0;

    snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
    f = fopen(path, "r");
    if (f == NULL) {
        return 0;
    }
    while (fgets(line, sizeof(line), f) != NULL) {
        if (strncmp(line, "State:", 6) == 0) {
            run = strchr(line, 'Z') == NULL && strchr(line, 'X') == NULL;
            break;
        }
    }
    fclose(f);
    return run;
}

static int rndv(tmx_job_h job, tmx_worker_h w, tmx_ep_h *eps, const pid_t *pids)
{
    tmx_request_h       req;
    tmx_tag_recv_info_t info;
    char               *buf = calloc(1, big);
    int                 v   = 0;
    double              end;

    if (buf == NULL) {
        return 1;
    }
    if (rank == 1) {
        memset(buf, 0x5a, big);
        CHECK(tmx_tag_send_nb(eps[0], buf, big, 2, NULL, &req), TMX_INPROGRESS);
        /* rank 0 says when it holds the RTS; then die with the send outstanding */
        CHECK(tmx_tag_recv(w, &v, sizeof(v), 3, ~(tmx_tag_t)0, NULL), TMX_OK);
        tmx_job_finalize(job); /* leaving is no failure for tmxrun */
        _exit(0);
    }
    end = now() + 20;
    while (tmx_tag_probe(w, 2, ~(tmx_tag_t)0, TMX_PROBE_PEEK, &info, NULL) != TMX_OK) {
        tmx_worker_progress(w);
        if (now() > end) {
            fprintf(stderr, "peer_dies: rank 0: no RTS from rank 1\n");
            return 1;
        }
    }
    CHECK(tmx_tag_send(eps[1], &v, sizeof(v), 3), TMX_OK);
    /* no progress from here until the receive: the read itself must find the sender dead */
    end = now() + 20;
    while (running(pids[1])) {
        if (now() > end) {
            fprintf(stderr, "peer_dies: rank 0: rank 1 (pid %d) did not exit\n", (int)pids[1]);
            return 1;
        }
        usleep(1000);
    }
    CHECK(tmx_tag_recv_nb(w, buf, big, 2, ~(tmx_tag_t)0, NULL, &req), TMX_INPROGRESS);
    CHECK(tmx_request_wait(req, &info), TMX_ERR_PEER_FAILED);
    tmx_request_free(req);
    printf("rank 0 ok\n");
    fflush(stdout);
    free(buf);
    return 0;
}

static int linger(tmx_worker_h w, tmx_ep_h *eps)
{
    int v = rank;

    CHECK(tmx_tag_send(eps[1 - rank], &v, sizeof(v), 7), TMX_OK);
    CHECK(tmx_tag_recv(w, &v, sizeof(v), 7, ~(tmx_tag_t)0, NULL), TMX_OK);
    printf("ready %d %d\n", (int)getpid(), (int)getppid());
    fflush(stdout);
    for (;;) {
        pause();
    }
    return 0;
}

int main(int argc, char **argv)
{
    tmx_job_h     job;
    tmx_context_h ctx;
    tmx_worker_h  w;
    tmx_ep_h      eps[2];
    pid_t         me, pids[2];
    int           rc;

    if (argc < 2 || argc > 3 ||
        (strcmp(argv[1], "rndv") != 0 && strcmp(argv[1], "linger") != 0)) {
        fprintf(stderr, "usage: peer_dies rndv [BYTES]|linger\n");
        return 2;
    }
    if (argc == 3) {
        big = strtoul(argv[2], NULL, 0);
    }
    CHECK(tmx_job_init(&job), TMX_OK);
    rank = tmx_job_rank(job);
    if (tmx_job_size(job) != 2) {
        fprintf(stderr, "peer_dies: needs 2 ranks\n");
        return 1;
    }
    me = getpid();
    CHECK(tmx_job_allgather(job, &me, sizeof(me), pids), TMX_OK);
    CHECK(tmx_context_create(NULL, &ctx), TMX_OK);
    CHECK(tmx_worker_create(ctx, NULL, &w), TMX_OK);
    CHECK(tmx_job_connect(job, w, eps), TMX_OK);
    rc = strcmp(argv[1], "rndv") == 0 ? rndv(job, w, eps, pids) : linger(w, eps);
    /* rank 1 is gone: no barrier, no flush toward it */
    tmx_ep_close(eps[1], TMX_EP_CLOSE_FORCE);
    tmx_ep_close(eps[0], TMX_EP_CLOSE_FORCE);
    tmx_worker_destroy(w);
    tmx_context_destroy(ctx);
    tmx_job_finalize(job);
    return rc;
}
