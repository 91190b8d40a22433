/*
 * threads_multi: several threads of each rank share one TMX_THREAD_MODE_MULTI worker and its
 * endpoint to the other rank, while one more thread does nothing but tmx_worker_progress.
 * Thread t exchanges its own messages (tag t:i) with thread t of the other rank and waits for
 * its own requests in one of four ways, by t % 4:
 *
 *   0 wait      tmx_request_wait (progresses itself, between other threads' progress rounds)
 *   1 test      polls tmx_request_test and never progresses: another thread completes them
 *   2 callback  polls tmx_request_test without progressing; the completion callbacks write
 *               plain fields the thread reads once the request tests complete: tmx(3) says a
 *               request tests complete only after its callback returned
 *   3 free      frees its sends at once (released by whichever thread completes them; every
 *               send has its own buffer), receives by tmx_request_test + tmx_worker_progress
 *   4 probe     cancels a receive no message matches, then claims its message with
 *               tmx_tag_probe (no progress) and receives it with tmx_tag_msg_recv_nb + wait
 *
 * Sizes alternate eager and rendezvous, some sends are synchronous. Every message is checked
 * (status, info, payload). Run under tmxrun with 2 ranks; exits 0 when all checks passed. The
 * ThreadSanitizer build of scripts/test.sh runs it to see the request completion path race.
 *
 *   threads_multi [-t threads] [-n messages per thread]
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <tmx/tmx.h>
#include <tmx/tmx_job.h>

#define MT_MAX_THREADS 16
#define MT_LARGE       (3 * 8192 + 123) /* above the default eager limit (16 KiB): rendezvous */
#define MT_DEADLINE    90.0             /* seconds for the whole exchange */

enum { MT_WAIT, MT_TEST, MT_CALLBACK, MT_FREE, MT_PROBE, MT_MODES };
static const char *const mt_mode_names[MT_MODES] = {"wait", "test", "callback", "free", "probe"};

static int            rank = -1;
static int            nthreads = MT_MODES;
static int            nmsgs    = 200;
static tmx_worker_h   worker;
static tmx_ep_h       peer_ep;
static atomic_int     threads_done;
static atomic_int     errors;
static double         deadline;

/* What a callback saw; plain fields, read by the thread once the request tests complete. */
typedef struct mt_cb {
    int                 calls;
    tmx_status_t        status;
    tmx_tag_recv_info_t info;
} mt_cb_t;

typedef struct mt_thread {
    pthread_t  th;
    int        id;
    uint8_t  **sbufs; /* MT_FREE: one send buffer per message, freed after the endpoint close */
} mt_thread_t;

static double mt_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void mt_fail(int t, int i, const char *fmt, const char *what, tmx_status_t s)
{
    fprintf(stderr, "threads_multi: rank %d thread %d message %d: ", rank, t, i);
    fprintf(stderr, fmt, what, tmx_status_string(s));
    fputc('\n', stderr);
    atomic_fetch_add(&errors, 1);
}

static size_t mt_size(int t, int i)
{
    if (i % 8 == 7) {
        return MT_LARGE + (size_t)t;
    }
    return (size_t)(1 + (i * 37 + t * 11) % 1000);
}

static uint8_t mt_byte(int from, int t, int i, size_t j)
{
    return (uint8_t)(from * 131 + t * 17 + i * 7 + (int)j);
}

static tmx_tag_t mt_tag(int t, int i)
{
    return ((tmx_tag_t)t << 32) | (tmx_tag_t)i;
}

static void mt_send_cb(tmx_request_h req, tmx_status_t status, void *user_data)
{
    mt_cb_t *cb = user_data;

    (void)req;
    cb->calls++;
    cb->status = status;
}

static void mt_recv_cb(tmx_request_h req, tmx_status_t status, const tmx_tag_recv_info_t *info,
                       void *user_data)
{
    mt_cb_t *cb = user_data;

    (void)req;
    cb->calls++;
    cb->status = status;
    cb->info   = *info;
}

/* Polls tmx_request_test until it completes; progresses the worker too when asked. */
static tmx_status_t mt_poll(tmx_request_h req, tmx_tag_recv_info_t *info, int progress)
{
    tmx_status_t s;
    unsigned     n = 0;

    while ((s = tmx_request_test(req, info)) == TMX_INPROGRESS) {
        if (progress) {
            tmx_worker_progress(worker);
        } else {
            sched_yield();
        }
        if (++n % 1024 == 0 && mt_now() > deadline) {
            return TMX_ERR_TIMED_OUT;
        }
    }
    return s;
}

/* Claims message t:i by probing (which does not progress: other threads do). */
static tmx_status_t mt_claim(int t, int i, tmx_message_h *msg_p)
{
    tmx_tag_recv_info_t info;
    tmx_status_t        s;
    unsigned            n = 0;

    while ((s = tmx_tag_probe(worker, mt_tag(t, i), ~(tmx_tag_t)0, TMX_PROBE_CLAIM, &info,
                              msg_p)) == TMX_ERR_NO_MESSAGE) {
        sched_yield();
        if (++n % 1024 == 0 && mt_now() > deadline) {
            return TMX_ERR_TIMED_OUT;
        }
    }
    if (s != TMX_OK || info.tag != mt_tag(t, i) || info.length != mt_size(t, i)) {
        mt_fail(t, i, "%s: %s", "probe", s);
        return s == TMX_OK ? TMX_ERR_INVALID_PARAM : s;
    }
    return TMX_OK;
}

static void mt_check_recv(int t, int i, const uint8_t *rbuf, tmx_status_t s,
                          const tmx_tag_recv_info_t *info)
{
    size_t len = mt_size(t, i);

    if (s != TMX_OK) {
        mt_fail(t, i, "%s: %s", "receive", s);
        return;
    }
    if (info->tag != mt_tag(t, i) || info->length != len) {
        fprintf(stderr, "threads_multi: rank %d thread %d message %d: info tag %llx length %zu,"
                        " expected %llx %zu\n", rank, t, i, (unsigned long long)info->tag,
                info->length, (unsigned long long)mt_tag(t, i), len);
        atomic_fetch_add(&errors, 1);
        return;
    }
    for (size_t j = 0; j < len; j++) {
        if (rbuf[j] != mt_byte(1 - rank, t, i, j)) {
            fprintf(stderr, "threads_multi: rank %d thread %d message %d: byte %zu wrong\n", rank,
                    t, i, j);
            atomic_fetch_add(&errors, 1);
            return;
        }
    }
}

static void *mt_worker_thread(void *arg)
{
    mt_thread_t *me   = arg;
    int          t    = me->id, mode = t % MT_MODES;
    uint8_t     *rbuf = malloc(MT_LARGE + MT_MAX_THREADS);
    uint8_t     *own  = malloc(MT_LARGE + MT_MAX_THREADS);

    if (rbuf == NULL || own == NULL) {
        mt_fail(t, 0, "%s: %s", "malloc", TMX_ERR_NO_MEMORY);
        goto out;
    }
    for (int i = 0; i < nmsgs && atomic_load(&errors) == 0; i++) {
        size_t               len  = mt_size(t, i);
        uint8_t             *sbuf = mode == MT_FREE ? me->sbufs[i] : own;
        mt_cb_t              scb  = {0}, rcb = {0};
        tmx_request_params_t sp = {0}, rp = {0};
        tmx_request_h        sreq = NULL, rreq = NULL;
        tmx_message_h        msg  = NULL;
        tmx_tag_recv_info_t  info = {0};
        tmx_status_t         s;

        for (size_t j = 0; j < len; j++) {
            sbuf[j] = mt_byte(rank, t, i, j);
        }
        memset(rbuf, 0, len);
        if (i % 5 == 3) {
            sp.field_mask |= TMX_REQ_PARAM_FLAGS;
            sp.flags = TMX_SEND_FLAG_SYNC;
        }
        if (mode == MT_CALLBACK) {
            sp.field_mask |= TMX_REQ_PARAM_CALLBACK | TMX_REQ_PARAM_USER_DATA;
            sp.cb.send    = mt_send_cb;
            sp.user_data  = &scb;
            rp.field_mask = TMX_REQ_PARAM_CALLBACK | TMX_REQ_PARAM_USER_DATA;
            rp.cb.recv    = mt_recv_cb;
            rp.user_data  = &rcb;
        }
        if (mode == MT_PROBE) {
            /* a receive no message matches (tag t:nmsgs+i), canceled while others progress */
            s = tmx_tag_recv_nb(worker, rbuf, len, mt_tag(t, nmsgs + i), ~(tmx_tag_t)0, NULL,
                                &rreq);
            if (s != TMX_INPROGRESS || (s = tmx_request_cancel(rreq)) != TMX_OK ||
                (s = tmx_request_test(rreq, NULL)) != TMX_ERR_CANCELED) {
                mt_fail(t, i, "%s: %s", "cancel", s);
                break;
            }
            tmx_request_free(rreq);
            rreq = NULL;
        } else {
            s = tmx_tag_recv_nb(worker, rbuf, len, mt_tag(t, i), ~(tmx_tag_t)0, &rp, &rreq);
            if (s != TMX_INPROGRESS) {
                mt_fail(t, i, "%s: %s", "tmx_tag_recv_nb", s);
                break;
            }
        }
        s = tmx_tag_send_nb(peer_ep, sbuf, len, mt_tag(t, i), &sp, &sreq);
        if (s == TMX_OK) {
            sreq = NULL; /* completed in place: no callback */
        } else if (s != TMX_INPROGRESS) {
            mt_fail(t, i, "%s: %s", "tmx_tag_send_nb", s);
            if (rreq != NULL) {
                tmx_request_cancel(rreq);
                tmx_request_wait(rreq, NULL);
                tmx_request_free(rreq);
            }
            break;
        }
        switch (mode) {
        case MT_WAIT:
            if (sreq != NULL && (s = tmx_request_wait(sreq, NULL)) != TMX_OK) {
                mt_fail(t, i, "%s: %s", "send wait", s);
            }
            s = tmx_request_wait(rreq, &info);
            break;
        case MT_TEST:
            if (sreq != NULL && (s = mt_poll(sreq, NULL, 0)) != TMX_OK) {
                mt_fail(t, i, "%s: %s", "send test", s);
            }
            s = mt_poll(rreq, &info, 0);
            break;
        case MT_CALLBACK:
            if (sreq != NULL) {
                if ((s = mt_poll(sreq, NULL, 0)) != TMX_OK) {
                    mt_fail(t, i, "%s: %s", "send test", s);
                } else if (scb.calls != 1 || scb.status != s) {
                    mt_fail(t, i, "%s: %s", "send tests complete, its callback had not run", s);
                }
            }
            s = mt_poll(rreq, &info, 0);
            if (s != TMX_ERR_TIMED_OUT &&
                (rcb.calls != 1 || rcb.status != s || rcb.info.tag != info.tag ||
                 rcb.info.length != info.length)) {
                mt_fail(t, i, "%s: %s", "receive tests complete, its callback had not run", s);
            }
            break;
        case MT_FREE:
            tmx_request_free(sreq); /* sreq may be NULL: a no-op */
            sreq = NULL;
            s    = mt_poll(rreq, &info, 1);
            break;
        default: /* MT_PROBE */
            s = mt_claim(t, i, &msg);
            if (s == TMX_OK) {
                s = tmx_tag_msg_recv_nb(worker, rbuf, len, msg, NULL, &rreq);
                if (s != TMX_INPROGRESS) {
                    mt_fail(t, i, "%s: %s", "tmx_tag_msg_recv_nb", s);
                    break;
                }
                s = tmx_request_wait(rreq, &info);
            }
            if (sreq != NULL && s != TMX_ERR_TIMED_OUT) {
                tmx_status_t ss = tmx_request_wait(sreq, NULL);
                if (ss != TMX_OK) {
                    mt_fail(t, i, "%s: %s", "send wait", ss);
                }
            }
            break;
        }
        if (s == TMX_ERR_TIMED_OUT) {
            mt_fail(t, i, "%s: %s", "deadline passed", s);
            break; /* the requests may still be in use: leak them */
        }
        mt_check_recv(t, i, rbuf, s, &info);
        tmx_request_free(sreq);
        tmx_request_free(rreq);
    }
out:
    free(rbuf);
    free(own);
    atomic_fetch_add(&threads_done, 1);
    return NULL;
}

static void *mt_progress_thread(void *arg)
{
    (void)arg;
    while (atomic_load_explicit(&threads_done, memory_order_relaxed) < nthreads) {
        if (tmx_worker_progress(worker) == 0) {
            sched_yield();
        }
    }
    return NULL;
}

int main(int argc, char **argv)
{
    tmx_worker_params_t wp = {.field_mask  = TMX_WORKER_PARAM_THREAD_MODE,
                              .thread_mode = TMX_THREAD_MODE_MULTI};
    mt_thread_t         threads[MT_MAX_THREADS];
    tmx_ep_h            eps[2];
    tmx_job_h           job;
    tmx_context_h       ctx;
    pthread_t           progress;
    tmx_status_t        s;
    int                 opt;

    while ((opt = getopt(argc, argv, "t:n:")) != -1) {
        switch (opt) {
        case 't': nthreads = atoi(optarg); break;
        case 'n': nmsgs = atoi(optarg); break;
        default:
            fprintf(stderr, "usage: threads_multi [-t threads] [-n messages]\n");
            return 2;
        }
    }
    if (nthreads < 1 || nthreads > MT_MAX_THREADS || nmsgs < 1) {
        fprintf(stderr, "threads_multi: threads 1..%d, messages > 0\n", MT_MAX_THREADS);
        return 2;
    }
    if ((s = tmx_job_init(&job)) != TMX_OK) {
        fprintf(stderr, "threads_multi: tmx_job_init: %s\n", tmx_status_string(s));
        return 1;
    }
    rank = tmx_job_rank(job);
    if (tmx_job_size(job) != 2) {
        fprintf(stderr, "threads_multi: needs 2 ranks\n");
        return 1;
    }
    if ((s = tmx_context_create(NULL, &ctx)) != TMX_OK ||
        (s = tmx_worker_create(ctx, &wp, &worker)) != TMX_OK ||
        (s = tmx_job_connect(job, worker, eps)) != TMX_OK) {
        fprintf(stderr, "threads_multi: rank %d: setup: %s\n", rank, tmx_status_string(s));
        return 1;
    }
    peer_ep  = eps[1 - rank];
    deadline = mt_now() + MT_DEADLINE;
    for (int t = 0; t < nthreads; t++) {
        threads[t].id    = t;
        threads[t].sbufs = NULL;
        if (t % MT_MODES == MT_FREE) {
            threads[t].sbufs = calloc((size_t)nmsgs, sizeof(*threads[t].sbufs));
            for (int i = 0; threads[t].sbufs != NULL && i < nmsgs; i++) {
                threads[t].sbufs[i] = malloc(mt_size(t, i));
                if (threads[t].sbufs[i] == NULL) {
                    fprintf(stderr, "threads_multi: out of memory\n");
                    return 1;
                }
            }
            if (threads[t].sbufs == NULL) {
                fprintf(stderr, "threads_multi: out of memory\n");
                return 1;
            }
        }
    }
    if (pthread_create(&progress, NULL, mt_progress_thread, NULL) != 0) {
        fprintf(stderr, "threads_multi: pthread_create failed\n");
        return 1;
    }
    for (int t = 0; t < nthreads; t++) {
        if (pthread_create(&threads[t].th, NULL, mt_worker_thread, &threads[t]) != 0) {
            fprintf(stderr, "threads_multi: pthread_create failed\n");
            return 1;
        }
    }
    for (int t = 0; t < nthreads; t++) {
        pthread_join(threads[t].th, NULL);
    }
    pthread_join(progress, NULL);

    if ((s = tmx_job_barrier(job)) != TMX_OK) {
        fprintf(stderr, "threads_multi: rank %d: barrier: %s\n", rank, tmx_status_string(s));
        atomic_fetch_add(&errors, 1);
    }
    /* FLUSH: the freed sends still waiting for their acknowledgement finish first. */
    for (int r = 0; r < 2; r++) {
        if ((s = tmx_ep_close(eps[r], TMX_EP_CLOSE_FLUSH)) != TMX_OK &&
            s != TMX_ERR_PEER_FAILED) {
            fprintf(stderr, "threads_multi: rank %d: close: %s\n", rank, tmx_status_string(s));
            atomic_fetch_add(&errors, 1);
        }
    }
    tmx_worker_destroy(worker);
    tmx_context_destroy(ctx);
    for (int t = 0; t < nthreads; t++) {
        for (int i = 0; threads[t].sbufs != NULL && i < nmsgs; i++) {
            free(threads[t].sbufs[i]);
        }
        free(threads[t].sbufs);
    }
    tmx_job_finalize(job);
    if (atomic_load(&errors) != 0) {
        return 1;
    }
    printf("rank %d ok: %d threads (", rank, nthreads);
    for (int m = 0; m < MT_MODES && m < nthreads; m++) {
        printf("%s%s", m > 0 ? ", " : "", mt_mode_names[m]);
    }
    printf(") x %d messages\n", nmsgs);
    return 0;
}
