/*
 * peer_fail: what waits on a peer that dies, or on one that never takes a message, ends (tmx(7):
 * nothing waits forever on a dead peer). Run under tmxrun with 2 ranks and a mode:
 *
 *   pending   rank 1 dies (_exit, nothing closed); rank 0's receives posted before that are
 *             told TMX_ERR_PEER_FAILED_PENDING once by wait and by test, stay posted (one
 *             still matches a later message, the others cancel), a receive posted after the
 *             failure is not told; the error handler names the endpoint to rank 1 once.
 *   blocking  rank 1 dies while rank 0 is in tmx_tag_recv: it returns TMX_ERR_PEER_FAILED.
 *   directed  rank 1 sends one message and dies: rank 0's receive directed at rank 1 completes
 *             with TMX_ERR_PEER_FAILED (not PENDING) naming rank 1, one directed at itself is
 *             not told, a wildcard is told PENDING; after the failure a directed receive takes
 *             rank 1's queued message, and the next one fails at once.
 *   passive   rank 0 has no endpoint to rank 1 (only rank 1's connection to it) when rank 1
 *             dies: the handler gets a NULL endpoint and rank 1's worker id; rank 0 closing
 *             its endpoint in order earlier was no failure for rank 1's handler.
 *   flush     rank 1 never receives rank 0's rendezvous message: rank 0's FLUSH close returns
 *             TMX_ERR_TIMED_OUT after about TMX_PEER_TIMEOUT (the script sets it small) and
 *             the send completes with it; neither side's handler is called.
 *   rndvmany [N K]  rank 0 posts N rendezvous sends (default 5000), rank 1 takes none before
 *             message K (default 4000) arrived: with N above the device's registrations
 *             (TMX_SOFT_MAX_MRS, 4096 by default) the sender waits for them, and all
 *             complete (the script counts the log lines this makes).
 *   unreachable  one process, no tmxrun, TMX_PEER_TIMEOUT small (the script): an endpoint to a
 *             worker that never progresses does not come up; its queued send completes with
 *             TMX_ERR_UNREACHABLE, a receive waiting for a match is told, the handler names
 *             the endpoint with TMX_ERR_UNREACHABLE.
 *
 * Exits 0 when every check passed and prints "rank R ok" on the ranks that finish.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <tmx/tmx.h>
#include <tmx/tmx_job.h>

static int         errors;
static int         rank = -1;
static const char *mode = "";

#define CHECK(cond, ...)                                                                       \
    do {                                                                                       \
        if (!(cond)) {                                                                         \
            fprintf(stderr, "peer_fail %s: rank %d: line %d: ", mode, rank, __LINE__);         \
            fprintf(stderr, __VA_ARGS__);                                                      \
            fprintf(stderr, "\n");                                                             \
            errors++;                                                                          \
        }                                                                                      \
    } while (0)

#define EXPECT(call, want)                                                                     \
    do {                                                                                       \
        tmx_status_t s_ = (call);                                                              \
        CHECK(s_ == (want), "%s: %s, expected %s", #call, tmx_status_string(s_),               \
              tmx_status_string(want));                                                        \
    } while (0)

/* What the worker's error handler heard. */
static struct {
    int          count;
    tmx_ep_h     ep;
    uint64_t     peer_id;
    tmx_status_t status;
} heard;

static void on_peer_error(void *arg, tmx_ep_h ep, uint64_t peer_id, tmx_status_t status)
{
    heard.count++;
    heard.ep      = ep;
    heard.peer_id = peer_id;
    heard.status  = status;
    (void)arg;
}

static int cb_calls;
static tmx_status_t cb_status;

static void on_recv(tmx_request_h req, tmx_status_t status, const tmx_tag_recv_info_t *info,
                    void *user_data)
{
    cb_calls++;
    cb_status = status;
    (void)req, (void)info, (void)user_data;
}

static double now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void progress_for(tmx_worker_h w, double sec)
{
    double end = now() + sec;

    while (now() < end) {
        tmx_worker_progress(w);
    }
}

typedef struct {
    tmx_job_h     job;
    tmx_context_h ctx;
    tmx_worker_h  w;
    tmx_ep_h      eps[2];
    uint64_t      ids[2]; /* every rank's worker id */
} env_t;

static int setup(env_t *e)
{
    tmx_worker_params_t wp = {.field_mask      = TMX_WORKER_PARAM_ERR_HANDLER,
                              .err_handler     = on_peer_error,
                              .err_handler_arg = NULL};
    tmx_worker_attr_t   wa = {.field_mask = TMX_WORKER_ATTR_ID};
    int                 v;

    if (tmx_job_init(&e->job) != TMX_OK) {
        fprintf(stderr, "peer_fail: tmx_job_init failed\n");
        return -1;
    }
    rank = tmx_job_rank(e->job);
    if (tmx_job_size(e->job) != 2) {
        fprintf(stderr, "peer_fail: needs 2 ranks\n");
        return -1;
    }
    EXPECT(tmx_context_create(NULL, &e->ctx), TMX_OK);
    EXPECT(tmx_worker_create(e->ctx, &wp, &e->w), TMX_OK);
    EXPECT(tmx_worker_query(e->w, &wa), TMX_OK);
    EXPECT(tmx_job_allgather(e->job, &wa.id, sizeof(wa.id), e->ids), TMX_OK);
    EXPECT(tmx_job_connect(e->job, e->w, e->eps), TMX_OK);
    if (errors > 0) {
        return -1;
    }
    /* one message each way: both connections are up and used */
    v = rank;
    EXPECT(tmx_tag_send(e->eps[1 - rank], &v, sizeof(v), 1), TMX_OK);
    EXPECT(tmx_tag_recv(e->w, &v, sizeof(v), 1, ~(tmx_tag_t)0, NULL), TMX_OK);
    return errors > 0 ? -1 : 0;
}

static int teardown(env_t *e, int peer_alive)
{
    if (peer_alive) {
        EXPECT(tmx_job_barrier(e->job), TMX_OK);
    }
    EXPECT(tmx_worker_destroy(e->w), TMX_OK); /* closes what is still open */
    EXPECT(tmx_context_destroy(e->ctx), TMX_OK);
    tmx_job_finalize(e->job);
    if (errors == 0) {
        printf("rank %d ok\n", rank);
    }
    return errors == 0 ? 0 : 1;
}

/* Rank 1 goes away without closing anything, as a crash would. */
static void die(void)
{
    fflush(NULL);
    _exit(0);
}

static int mode_pending(env_t *e)
{
    tmx_request_params_t rp = {.field_mask = TMX_REQ_PARAM_CALLBACK, .cb.recv = on_recv};
    tmx_request_h        r_wait, r_test, r_cb, r_after;
    tmx_tag_recv_info_t  info;
    /* 64 bytes: under tag-matching offload (peer_fail_tm.sh) these receives are offered to the
     * device's tag list, so the failure and the cancels below meet receives the list holds */
    int                  a[16] = {0}, b[16] = {0}, c[16] = {0}, d[16] = {0}, v = 42;
    tmx_worker_attr_t    wattr = {.field_mask = TMX_WORKER_ATTR_TM};

    EXPECT(tmx_tag_recv_nb(e->w, a, sizeof(a), 100, ~(tmx_tag_t)0, NULL, &r_wait),
           TMX_INPROGRESS);
    EXPECT(tmx_tag_recv_nb(e->w, b, sizeof(b), 101, ~(tmx_tag_t)0, NULL, &r_test),
           TMX_INPROGRESS);
    EXPECT(tmx_tag_recv_nb(e->w, c, sizeof(c), 102, ~(tmx_tag_t)0, &rp, &r_cb),
           TMX_INPROGRESS);
    EXPECT(tmx_job_barrier(e->job), TMX_OK);
    if (rank == 1) {
        die();
    }
    /* the failure is found while waiting: told, not a wait forever */
    EXPECT(tmx_request_wait(r_wait, &info), TMX_ERR_PEER_FAILED_PENDING);
    CHECK(heard.count == 1 && heard.ep == e->eps[1] && heard.peer_id == e->ids[1] &&
              heard.status == TMX_ERR_PEER_FAILED,
          "error handler: %d calls, ep %p (want %p), peer %016llx (want %016llx), %s",
          heard.count, (void *)heard.ep, (void *)e->eps[1], (unsigned long long)heard.peer_id,
          (unsigned long long)e->ids[1], tmx_status_string(heard.status));
    progress_for(e->w, 0.5); /* the second connection to rank 1 fails too: no second report */
    CHECK(heard.count == 1, "error handler called %d times for one dead peer", heard.count);
    /* once per receive: test says it once, then the receive is in progress again */
    EXPECT(tmx_request_test(r_test, NULL), TMX_ERR_PEER_FAILED_PENDING);
    EXPECT(tmx_request_test(r_test, NULL), TMX_INPROGRESS);
    EXPECT(tmx_request_test(r_wait, NULL), TMX_INPROGRESS);
    CHECK(cb_calls == 0, "a pending receive's callback ran (%d)", cb_calls);
    /* posted after the failure: not concerned */
    EXPECT(tmx_tag_recv_nb(e->w, d, sizeof(d), 103, ~(tmx_tag_t)0, NULL, &r_after),
           TMX_INPROGRESS);
    progress_for(e->w, 0.1);
    EXPECT(tmx_request_test(r_after, NULL), TMX_INPROGRESS);
    /* still posted: a message from a live peer (ourselves) matches it */
    EXPECT(tmx_tag_send(e->eps[0], &v, sizeof(v), 100), TMX_OK);
    EXPECT(tmx_request_wait(r_wait, &info), TMX_OK);
    CHECK(a[0] == 42 && info.tag == 100 && info.length == sizeof(v), "got %d tag %llu len %zu", a[0],
          (unsigned long long)info.tag, info.length);
    /* or the application gives up on them */
    EXPECT(tmx_request_cancel(r_test), TMX_OK);
    EXPECT(tmx_request_wait(r_test, NULL), TMX_ERR_CANCELED);
    EXPECT(tmx_request_cancel(r_cb), TMX_OK);
    CHECK(cb_calls == 1 && cb_status == TMX_ERR_CANCELED, "callback: %d calls, %s", cb_calls,
          tmx_status_string(cb_status));
    EXPECT(tmx_request_cancel(r_after), TMX_OK);
    EXPECT(tmx_worker_query(e->w, &wattr), TMX_OK);
    if (wattr.tm.enabled) {
        /* r_wait, r_test, r_cb and r_after went to the list; r_wait's message was the device's */
        CHECK(wattr.tm.offered >= 4 && wattr.tm.matched >= 1,
              "tag list: %llu offered, %llu matched", (unsigned long long)wattr.tm.offered,
              (unsigned long long)wattr.tm.matched);
    }
    tmx_request_free(r_wait);
    tmx_request_free(r_test);
    tmx_request_free(r_cb);
    tmx_request_free(r_after);
    /* the endpoint to the dead peer fails sends at once */
    EXPECT(tmx_tag_send(e->eps[1], &v, sizeof(v), 5), TMX_ERR_PEER_FAILED);
    EXPECT(tmx_ep_close(e->eps[1], TMX_EP_CLOSE_FLUSH), TMX_ERR_PEER_FAILED);
    EXPECT(tmx_ep_close(e->eps[0], TMX_EP_CLOSE_FLUSH), TMX_OK);
    CHECK(heard.count == 1, "error handler called %d times", heard.count);
    return teardown(e, 0);
}

static int mode_blocking(env_t *e)
{
    int x = 0;

    EXPECT(tmx_job_barrier(e->job), TMX_OK);
    if (rank == 1) {
        die();
    }
    EXPECT(tmx_tag_recv(e->w, &x, sizeof(x), 200, ~(tmx_tag_t)0, NULL), TMX_ERR_PEER_FAILED);
    CHECK(heard.count == 1 && heard.ep == e->eps[1], "error handler: %d calls, ep %p",
          heard.count, (void *)heard.ep);
    /* nothing is left posted: a later message with that tag stays unexpected */
    EXPECT(tmx_tag_send(e->eps[0], &x, sizeof(x), 200), TMX_OK);
    progress_for(e->w, 0.1);
    EXPECT(tmx_tag_probe(e->w, 200, ~(tmx_tag_t)0, TMX_PROBE_DISCARD, NULL, NULL), TMX_OK);
    return teardown(e, 0);
}

static int mode_passive(env_t *e)
{
    tmx_request_h r;
    int           x = 0;

    EXPECT(tmx_job_barrier(e->job), TMX_OK);
    if (rank == 0) {
        /* in order: not a failure for rank 1, which answers the disconnect meanwhile */
        EXPECT(tmx_ep_close(e->eps[1], TMX_EP_CLOSE_FLUSH), TMX_OK);
    } else {
        progress_for(e->w, 1.0);
    }
    EXPECT(tmx_job_barrier(e->job), TMX_OK);
    EXPECT(tmx_tag_recv_nb(e->w, &x, sizeof(x), 300, ~(tmx_tag_t)0, NULL, &r), TMX_INPROGRESS);
    EXPECT(tmx_job_barrier(e->job), TMX_OK);
    if (rank == 1) {
        if (heard.count != 0) {
            fprintf(stderr, "peer_fail passive: rank 1: an orderly close was reported (%s)\n",
                    tmx_status_string(heard.status));
            fflush(NULL);
            _exit(1);
        }
        die();
    }
    EXPECT(tmx_request_wait(r, NULL), TMX_ERR_PEER_FAILED_PENDING);
    CHECK(heard.count == 1 && heard.ep == NULL && heard.peer_id == e->ids[1] &&
              heard.status == TMX_ERR_PEER_FAILED,
          "error handler: %d calls, ep %p (want NULL), peer %016llx (want %016llx), %s",
          heard.count, (void *)heard.ep, (unsigned long long)heard.peer_id,
          (unsigned long long)e->ids[1], tmx_status_string(heard.status));
    EXPECT(tmx_request_cancel(r), TMX_OK);
    tmx_request_free(r);
    return teardown(e, 0);
}

static int mode_flush(env_t *e)
{
    static char   big[64 * 1024];
    tmx_request_h s;
    double        t0, secs;

    EXPECT(tmx_job_barrier(e->job), TMX_OK);
    if (rank == 0) {
        EXPECT(tmx_tag_send_nb(e->eps[1], big, sizeof(big), 400, NULL, &s), TMX_INPROGRESS);
        t0 = now();
        EXPECT(tmx_ep_close(e->eps[1], TMX_EP_CLOSE_FLUSH), TMX_ERR_TIMED_OUT);
        secs = now() - t0;
        /* TMX_PEER_TIMEOUT=1 (the script); far above it on a loaded machine is still a bound */
        CHECK(secs > 0.9 && secs < 30.0, "FLUSH close took %.1f s", secs);
        EXPECT(tmx_request_wait(s, NULL), TMX_ERR_TIMED_OUT);
        tmx_request_free(s);
    } else {
        progress_for(e->w, 3.0); /* alive, answering, never receiving tag 400 */
    }
    EXPECT(tmx_job_barrier(e->job), TMX_OK);
    if (rank == 1) {
        /* The message the sender gave up on: once the disconnect (in the ring by now) is
         * read, taking it fails at once. */
        progress_for(e->w, 0.2);
        EXPECT(tmx_tag_recv(e->w, big, sizeof(big), 400, ~(tmx_tag_t)0, NULL),
               TMX_ERR_PEER_FAILED);
    }
    CHECK(heard.count == 0, "error handler called (%s) without a failure",
          tmx_status_string(heard.status));
    return teardown(e, 1);
}

#define MANY_SIZE 20000 /* above the default eager limit (16k) */

/* many sends, and the receiver takes nothing before message wait_for arrived */
static int mode_rndvmany(env_t *e, int many, int wait_for)
{
    static char    buf[MANY_SIZE];
    tmx_request_h *reqs = calloc((size_t)many, sizeof(*reqs));
    int            done = 0;

    if (reqs == NULL || wait_for >= many) {
        return 1;
    }
    if (rank == 0) {
        memset(buf, 0x5a, sizeof(buf));
        for (int i = 0; i < many; i++) {
            EXPECT(tmx_tag_send_nb(e->eps[1], buf, sizeof(buf), (tmx_tag_t)(1000 + i), NULL,
                                   &reqs[i]),
                   TMX_INPROGRESS);
        }
        for (int i = 0; i < many; i++) {
            if (tmx_request_wait(reqs[i], NULL) == TMX_OK) {
                done++;
            }
            tmx_request_free(reqs[i]);
        }
        CHECK(done == many, "%d of %d rendezvous sends completed", done, many);
    } else {
        static char in[MANY_SIZE];
        double      end = now() + 60.0;

        /* Take nothing until the sender is close to the device's registrations
         * (TMX_SOFT_MAX_MRS), then a little longer: it retries on every progress meanwhile. */
        while (now() < end && tmx_tag_probe(e->w, (tmx_tag_t)(1000 + wait_for), ~(tmx_tag_t)0,
                                            TMX_PROBE_PEEK, NULL, NULL) != TMX_OK) {
            tmx_worker_progress(e->w);
        }
        progress_for(e->w, 0.5);
        for (int i = 0; i < many; i++) {
            memset(in, 0, 16);
            if (tmx_tag_recv(e->w, in, sizeof(in), (tmx_tag_t)(1000 + i), ~(tmx_tag_t)0, NULL) ==
                    TMX_OK &&
                in[0] == 0x5a && in[MANY_SIZE - 1] == 0x5a) {
                done++;
            }
        }
        CHECK(done == many, "%d of %d rendezvous messages received", done, many);
    }
    free(reqs);
    return teardown(e, 1);
}

static int mode_unreachable(void)
{
    tmx_worker_params_t wp = {.field_mask  = TMX_WORKER_PARAM_ERR_HANDLER,
                              .err_handler = on_peer_error};
    tmx_worker_attr_t   wa = {.field_mask = TMX_WORKER_ATTR_ID};
    tmx_context_h       ctx;
    tmx_worker_h        w, silent;
    tmx_ep_params_t     ep_params = {.field_mask = TMX_EP_PARAM_ADDRESS};
    tmx_ep_h            ep = NULL;
    tmx_request_h       s = NULL, r = NULL;
    void               *addr = NULL;
    size_t              len = 0;
    int                 v = 1, x = 0;

    rank = 0;
    EXPECT(tmx_context_create(NULL, &ctx), TMX_OK);
    EXPECT(tmx_worker_create(ctx, &wp, &w), TMX_OK);
    EXPECT(tmx_worker_create(ctx, NULL, &silent), TMX_OK); /* never progressed */
    EXPECT(tmx_worker_query(silent, &wa), TMX_OK);
    EXPECT(tmx_worker_get_address(silent, &addr, &len), TMX_OK);
    if (errors > 0) {
        return 1;
    }
    ep_params.address        = addr;
    ep_params.address_length = len;
    EXPECT(tmx_ep_create(w, &ep_params, &ep), TMX_OK);
    EXPECT(tmx_tag_send_nb(ep, &v, sizeof(v), 7, NULL, &s), TMX_INPROGRESS);
    EXPECT(tmx_tag_recv_nb(w, &x, sizeof(x), 7, ~(tmx_tag_t)0, NULL, &r), TMX_INPROGRESS);
    EXPECT(tmx_request_wait(r, NULL), TMX_ERR_PEER_FAILED_PENDING);
    EXPECT(tmx_request_test(s, NULL), TMX_ERR_UNREACHABLE);
    CHECK(heard.count == 1 && heard.ep == ep && heard.peer_id == wa.id &&
              heard.status == TMX_ERR_UNREACHABLE,
          "error handler: %d calls, ep %p (want %p), peer %016llx (want %016llx), %s",
          heard.count, (void *)heard.ep, (void *)ep, (unsigned long long)heard.peer_id,
          (unsigned long long)wa.id, tmx_status_string(heard.status));
    EXPECT(tmx_request_cancel(r), TMX_OK);
    tmx_request_free(r);
    tmx_request_free(s);
    EXPECT(tmx_ep_close(ep, TMX_EP_CLOSE_FLUSH), TMX_ERR_PEER_FAILED); /* it never connected */
    tmx_worker_release_address(silent, addr);
    EXPECT(tmx_worker_destroy(silent), TMX_OK);
    EXPECT(tmx_worker_destroy(w), TMX_OK);
    EXPECT(tmx_context_destroy(ctx), TMX_OK);
    if (errors == 0) {
        printf("rank 0 ok\n");
    }
    return errors == 0 ? 0 : 1;
}

static tmx_status_t recv_from(env_t *e, tmx_ep_h src, int *buf, tmx_tag_t tag,
                              tmx_request_h *req)
{
    tmx_request_params_t rp = {.field_mask = TMX_REQ_PARAM_SOURCE, .source = src};

    return tmx_tag_recv_nb(e->w, buf, sizeof(*buf), tag, ~(tmx_tag_t)0, &rp, req);
}

static int mode_directed(env_t *e)
{
    tmx_request_h       r_dead = NULL, r_self = NULL, r_wild = NULL, r_after = NULL;
    tmx_tag_recv_info_t info;
    int                 a = 0, b = 0, c = 0, d = 0, v = 7;
    double              end;

    if (rank == 1) {
        EXPECT(tmx_tag_send(e->eps[0], &v, sizeof(v), 302), TMX_OK);
    } else {
        EXPECT(recv_from(e, e->eps[1], &a, 300, &r_dead), TMX_INPROGRESS);
        EXPECT(recv_from(e, e->eps[0], &b, 300, &r_self), TMX_INPROGRESS);
        EXPECT(tmx_tag_recv_nb(e->w, &c, sizeof(c), 301, ~(tmx_tag_t)0, NULL, &r_wild),
               TMX_INPROGRESS);
        /* rank 1's message is queued before it dies */
        end = now() + 30;
        while (tmx_tag_probe_ex(e->w, 302, ~(tmx_tag_t)0, e->eps[1], TMX_PROBE_PEEK, NULL,
                                NULL) != TMX_OK && now() < end) {
            tmx_worker_progress(e->w);
        }
    }
    EXPECT(tmx_job_barrier(e->job), TMX_OK);
    if (rank == 1) {
        die();
    }
    memset(&info, 0, sizeof(info));
    EXPECT(tmx_request_wait(r_dead, &info), TMX_ERR_PEER_FAILED);
    CHECK(info.sender == e->ids[1], "failed directed receive names %016llx, want %016llx",
          (unsigned long long)info.sender, (unsigned long long)e->ids[1]);
    EXPECT(tmx_request_test(r_self, NULL), TMX_INPROGRESS); /* not PENDING: not from rank 1 */
    EXPECT(tmx_request_test(r_wild, NULL), TMX_ERR_PEER_FAILED_PENDING);
    /* what rank 1 sent before dying is still delivered to a receive directed at it */
    EXPECT(recv_from(e, e->eps[1], &d, 302, &r_after), TMX_INPROGRESS);
    memset(&info, 0, sizeof(info));
    EXPECT(tmx_request_wait(r_after, &info), TMX_OK);
    CHECK(d == 7 && info.sender == e->ids[1], "queued message: %d from %016llx", d,
          (unsigned long long)info.sender);
    tmx_request_free(r_after);
    /* nothing more will come from it */
    EXPECT(recv_from(e, e->eps[1], &d, 302, &r_after), TMX_INPROGRESS);
    EXPECT(tmx_request_test(r_after, NULL), TMX_ERR_PEER_FAILED);
    tmx_request_free(r_after);
    EXPECT(tmx_tag_probe_ex(e->w, 0, 0, e->eps[1], TMX_PROBE_PEEK, NULL, NULL),
           TMX_ERR_NO_MESSAGE);
    /* the receive directed at ourselves still matches */
    EXPECT(tmx_tag_send(e->eps[0], &v, sizeof(v), 300), TMX_OK);
    memset(&info, 0, sizeof(info));
    EXPECT(tmx_request_wait(r_self, &info), TMX_OK);
    CHECK(b == 7 && info.sender == e->ids[0], "self: %d from %016llx", b,
          (unsigned long long)info.sender);
    EXPECT(tmx_request_cancel(r_wild), TMX_OK);
    tmx_request_free(r_dead);
    tmx_request_free(r_self);
    tmx_request_free(r_wild);
    return teardown(e, 0);
}

int main(int argc, char **argv)
{
    env_t e;

    if (argc < 2) {
        fprintf(stderr, "usage: peer_fail pending|blocking|directed|passive|flush|rndvmany [N K]|unreachable\n");
        return 2;
    }
    mode = argv[1];
    if (strcmp(mode, "unreachable") == 0) {
        return mode_unreachable();
    }
    memset(&e, 0, sizeof(e));
    if (setup(&e) != 0) {
        return 1;
    }
    if (strcmp(mode, "pending") == 0) {
        return mode_pending(&e);
    } else if (strcmp(mode, "blocking") == 0) {
        return mode_blocking(&e);
    } else if (strcmp(mode, "directed") == 0) {
        return mode_directed(&e);
    } else if (strcmp(mode, "passive") == 0) {
        return mode_passive(&e);
    } else if (strcmp(mode, "flush") == 0) {
        return mode_flush(&e);
    } else if (strcmp(mode, "rndvmany") == 0) {
        return mode_rndvmany(&e, argc > 2 ? atoi(argv[2]) : 5000,
                             argc > 3 ? atoi(argv[3]) : 4000);
    }
    fprintf(stderr, "peer_fail: unknown mode %s\n", mode);
    return 2;
}
