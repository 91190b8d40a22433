/*
 * Eager-RDMA rings taken back from idle senders (src/proto/ring.h, "Taking a ring back"), on 3
 * ranks with one ring to lend (ring_reclaim.sh: TMX_RING=yes TMX_RING_PEERS=1): rank 0
 * receives, ranks 1 and 2 send, each on its own tag; every message carries its index and a
 * pattern, and rank 0 checks both, so a message lost, torn or overtaken across a hand-over fails.
 *
 *  first   rank 1 sends RC_FIRST messages and gets the ring
 *  move    rank 1 waits in a job barrier (which progresses its worker) while rank 2 sends
 *          RC_MOVE messages in bursts spread over a few hundred milliseconds: rank 1's ring is
 *          asked back and lent to rank 2, whose later messages go through it
 *  mixed   both send RC_MIXED messages in bursts with random pauses around the idle period, so
 *          the ring changes hands while messages are on their way; rank 0 polls both tags
 *
 * After "move" the worker queries must say: rank 2 holds the ring and sent through it, rank 1
 * holds none, rank 0 lends one. Prints "rank N: ... ok" lines; exits 0 when all held.
 *
 * With the argument "dead", the holder dies instead of idling: after "first", rank 1 stops
 * progressing (so rank 0's request to give the ring back is never answered) and then exits
 * without closing anything, while rank 2 sends in bursts until it holds the ring and sent
 * DEAD_AFTER messages through it (or DEAD_SECS pass). The ring lent to the dead rank must come
 * back to rank 0 and go to rank 2; every message of rank 2 arrives intact and in order.
 */
#include <tmx/tmx.h>
#include <tmx/tmx_job.h>

#include "it.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define RC_FIRST 200
#define RC_MOVE  3000
#define RC_MIXED 3000
#define MAXLEN   240 /* within a 256-byte slot with the header, mostly */
#define LAST     0x80000000u /* dead: set in the index of rank 2's last message */
#define DEAD_AFTER 200
#define DEAD_SECS  30

static int          rank, bad;
static tmx_worker_h worker;

static size_t msg_len(unsigned i)
{
    return 8 + (i * 37u) % MAXLEN;
}

static unsigned char pat(int from, unsigned i, size_t k)
{
    return (unsigned char)((unsigned)from * 71u + i * 131u + k * 7u + 1);
}

/* Message i; its first 4 bytes say i | flags. */
static void send_flagged(tmx_ep_h ep, unsigned i, unsigned flags)
{
    unsigned char        buf[MAXLEN + 8];
    size_t               len = msg_len(i);
    unsigned             word = i | flags;
    tmx_request_h        req = NULL;
    tmx_status_t         s;

    for (size_t k = 0; k < len; k++) {
        buf[k] = pat(rank, i, k);
    }
    memcpy(buf, &word, 4);
    CHECK(s = tmx_tag_send_nb(ep, buf, len, (tmx_tag_t)rank, NULL, &req));
    if (s == TMX_INPROGRESS) {
        CHECK(tmx_request_wait(req, NULL));
        tmx_request_free(req);
    }
}

static void send_one(tmx_ep_h ep, unsigned i)
{
    send_flagged(ep, i, 0);
}

/* Sends n messages from index first in bursts of burst, pausing pause_us (random below it
 * when random is set) between bursts. */
static void send_bursts(tmx_ep_h ep, unsigned first, unsigned n, unsigned burst, long pause_us,
                        int random)
{
    for (unsigned i = 0; i < n; i++) {
        send_one(ep, first + i);
        if ((i + 1) % burst == 0) {
            long us = random ? rand() % (pause_us + 1) : pause_us;
            struct timespec ts = {.tv_sec = 0, .tv_nsec = us * 1000};

            nanosleep(&ts, NULL);
        }
    }
}

/* Checks message i from rank from; its index word's flags go to *flags (may be NULL). */
static void check_flagged(int from, unsigned i, tmx_status_t s, const tmx_tag_recv_info_t *info,
                          const unsigned char *buf, unsigned *flags)
{
    size_t   len = msg_len(i);
    unsigned got = 0;

    EXPECT(s == TMX_OK, "from %d, message %u: %s", from, i, tmx_status_string(s));
    EXPECT(info->length == len, "from %d, message %u: length %zu, expected %zu", from, i,
           info->length, len);
    if (info->length != len) {
        return;
    }
    memcpy(&got, buf, 4);
    if (flags != NULL) {
        *flags = got & LAST;
        got &= ~LAST;
    }
    EXPECT(got == i, "from %d: receive %u got message %u: order broken", from, i, got);
    for (size_t k = 4; k < len && got == i; k++) {
        if (buf[k] != pat(from, i, k)) {
            EXPECT(0, "from %d, message %u: byte %zu torn", from, i, k);
            break;
        }
    }
}

static void check(int from, unsigned i, tmx_status_t s, const tmx_tag_recv_info_t *info,
                  const unsigned char *buf)
{
    check_flagged(from, i, s, info, buf, NULL);
}

/* Rank 0: n messages from one sender, in order, each with a blocking wait (which may sleep). */
static void recv_from(int from, unsigned first, unsigned n)
{
    unsigned char       buf[MAXLEN + 8];
    tmx_tag_recv_info_t info;
    tmx_request_h       r;
    tmx_status_t        s;

    for (unsigned i = first; i < first + n; i++) {
        CHECK(tmx_tag_recv_nb(worker, buf, sizeof(buf), (tmx_tag_t)from, ~(tmx_tag_t)0, NULL,
                              &r));
        memset(&info, 0, sizeof(info));
        s = tmx_request_wait(r, &info);
        tmx_request_free(r);
        check(from, i, s, &info, buf);
    }
}

/* Rank 0: n messages from each of ranks 1 and 2, one receive posted per sender, polled. */
static void recv_both(unsigned first, unsigned n)
{
    unsigned char       buf[3][MAXLEN + 8];
    tmx_request_h       r[3] = {NULL, NULL, NULL};
    unsigned            next[3] = {0, first, first};
    tmx_tag_recv_info_t info;
    tmx_status_t        s;

    while (next[1] < first + n || next[2] < first + n || r[1] != NULL || r[2] != NULL) {
        for (int f = 1; f <= 2; f++) {
            if (r[f] == NULL && next[f] < first + n) {
                CHECK(tmx_tag_recv_nb(worker, buf[f], sizeof(buf[f]), (tmx_tag_t)f,
                                      ~(tmx_tag_t)0, NULL, &r[f]));
            }
            if (r[f] == NULL) {
                continue;
            }
            memset(&info, 0, sizeof(info));
            s = tmx_request_test(r[f], &info);
            if (s == TMX_INPROGRESS) {
                continue;
            }
            tmx_request_free(r[f]);
            r[f] = NULL;
            check(f, next[f]++, s, &info, buf[f]);
        }
        tmx_worker_progress(worker);
    }
}

static tmx_ring_attr_t rings(void)
{
    tmx_worker_attr_t attr;

    memset(&attr, 0, sizeof(attr));
    attr.field_mask = TMX_WORKER_ATTR_RING;
    CHECK(tmx_worker_query(worker, &attr));
    return attr.ring;
}

static int failures_heard;

static void on_peer_error(void *arg, tmx_ep_h ep, uint64_t peer_id, tmx_status_t status)
{
    (void)arg;
    (void)ep;
    (void)peer_id;
    (void)status;
    failures_heard++;
}

static double seconds(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* A blocking receive of tag that goes on waiting when told that a peer failed (rank 1's
 * failure is told to every receive pending then: none of them is rank 1's). */
static tmx_status_t recv_told(void *buf, size_t len, tmx_tag_t tag, tmx_tag_recv_info_t *info)
{
    tmx_tag_recv_info_t scratch;
    tmx_request_h       r;
    tmx_status_t        s;

    CHECK(tmx_tag_recv_nb(worker, buf, len, tag, ~(tmx_tag_t)0, NULL, &r));
    if (info == NULL) {
        info = &scratch;
    }
    memset(info, 0, sizeof(*info));
    do {
        s = tmx_request_wait(r, info);
    } while (s == TMX_ERR_PEER_FAILED_PENDING);
    tmx_request_free(r);
    return s;
}

/* The "dead" mode (the header comment), after "first". */
static void dead_holder(tmx_ep_h *eps)
{
    tmx_ring_attr_t a;
    int             done = 0;

    if (rank == 1) {
        /* asked for the ring back meanwhile, and never answers */
        struct timespec ts = {.tv_sec = 0, .tv_nsec = 300 * 1000 * 1000};

        nanosleep(&ts, NULL);
        printf("rank 1: dies\n");
        fflush(NULL);
        _exit(0);
    }
    if (rank == 2) {
        unsigned i = 0, through = 0;
        double   end = seconds() + DEAD_SECS;

        for (;;) {
            a = rings();
            if (a.tx_rings == 1 && a.sent > 0) {
                through++;
            }
            if (through >= DEAD_AFTER || seconds() > end) {
                break;
            }
            send_one(eps[0], i++);
            if (i % 20 == 0) {
                struct timespec ts = {.tv_sec = 0, .tv_nsec = 2 * 1000 * 1000};

                nanosleep(&ts, NULL);
            }
        }
        send_flagged(eps[0], i, LAST);
        /* rank 0 took everything when it says so */
        recv_told(&done, sizeof(done), 98, NULL);
        a = rings();
        EXPECT(a.tx_rings == 1 && a.sent > 0,
               "rank 2 holds %u rings, sent %llu through them: the dead rank's ring never came "
               "back", a.tx_rings, (unsigned long long)a.sent);
        printf("rank 2: dead ok? %s (%u messages, rings taken %u, sent %llu through them)\n",
               bad ? "no" : "yes", i + 1, a.tx_rings, (unsigned long long)a.sent);
        return;
    }
    /* rank 0 */
    for (unsigned i = 0, flags = 0; !flags; i++) {
        unsigned char       buf[MAXLEN + 8];
        tmx_tag_recv_info_t info;
        tmx_status_t        s;

        s = recv_told(buf, sizeof(buf), 2, &info);
        check_flagged(2, i, s, &info, buf, &flags);
        if (bad) {
            break;
        }
    }
    done = 1;
    CHECK(tmx_tag_send(eps[2], &done, sizeof(done), 98));
    a = rings();
    EXPECT(failures_heard == 1, "rank 0 heard of %d failures, expected 1", failures_heard);
    EXPECT(a.rx_rings == 1, "rank 0 lends %u rings", a.rx_rings);
    printf("rank 0: dead ok? %s (rings lent %u, received %llu through them)\n",
           bad ? "no" : "yes", a.rx_rings, (unsigned long long)a.received);
}

int main(int argc, char **argv)
{
    tmx_job_h           job;
    tmx_context_h       ctx;
    tmx_ep_h            eps[3];
    tmx_ring_attr_t     a;
    int                 dead = argc > 1 && strcmp(argv[1], "dead") == 0;
    tmx_worker_params_t wp   = {.field_mask      = TMX_WORKER_PARAM_ERR_HANDLER,
                                .err_handler     = on_peer_error,
                                .err_handler_arg = NULL};

    CHECK(tmx_job_init(&job));
    rank = tmx_job_rank(job);
    if (tmx_job_size(job) != 3) {
        fprintf(stderr, "ring_reclaim: needs 3 ranks\n");
        return 2;
    }
    srand((unsigned)rank * 7919u + (unsigned)time(NULL));
    CHECK(tmx_context_create(NULL, &ctx));
    CHECK(tmx_worker_create(ctx, &wp, &worker));
    CHECK(tmx_job_connect(job, worker, eps));

    /* first: rank 1 takes the only ring */
    if (rank == 0) {
        recv_from(1, 0, RC_FIRST);
    } else if (rank == 1) {
        send_bursts(eps[0], 0, RC_FIRST, 50, 0, 0);
    }
    CHECK(tmx_job_barrier(job));
    a = rings();
    if (rank == 1) {
        EXPECT(a.tx_rings == 1 && a.sent > 0, "rank 1 holds %u rings, sent %llu through them",
               a.tx_rings, (unsigned long long)a.sent);
    }
    printf("rank %d: first %s\n", rank, bad ? "FAILED" : "ok");
    CHECK(tmx_job_barrier(job));
    if (dead) {
        dead_holder(eps);
        /* no barrier with a dead rank: each closes what it has */
        for (int i = 0; i < 3; i++) {
            tmx_ep_close(eps[i], TMX_EP_CLOSE_FORCE);
        }
        tmx_worker_destroy(worker);
        tmx_context_destroy(ctx);
        tmx_job_finalize(job);
        printf("rank %d: %s\n", rank, bad ? "FAILED" : "all ok");
        return bad ? 1 : 0;
    }

    /* move: rank 1 idles in a barrier, rank 2 sends */
    if (rank == 0) {
        recv_from(2, 0, RC_MOVE);
    } else if (rank == 2) {
        send_bursts(eps[0], 0, RC_MOVE, 30, 2000, 0);
    }
    CHECK(tmx_job_barrier(job));
    a = rings();
    if (rank == 0) {
        EXPECT(a.rx_rings == 1, "rank 0 lends %u rings (TMX_RING_PEERS=1)", a.rx_rings);
    } else if (rank == 1) {
        EXPECT(a.tx_rings == 0, "rank 1 still holds %u rings", a.tx_rings);
    } else {
        EXPECT(a.tx_rings == 1 && a.sent > 0, "rank 2 holds %u rings, sent %llu through them",
               a.tx_rings, (unsigned long long)a.sent);
    }
    printf("rank %d: move %s (rings lent %u taken %u; sent %llu received %llu)\n", rank,
           bad ? "FAILED" : "ok", a.rx_rings, a.tx_rings, (unsigned long long)a.sent,
           (unsigned long long)a.received);
    CHECK(tmx_job_barrier(job));

    /* mixed: both send, with pauses around the idle period, while rank 0 polls both */
    if (rank == 0) {
        recv_both(RC_MOVE, RC_MIXED);
    } else {
        send_bursts(eps[0], RC_MOVE, RC_MIXED, 40, 25000, 1);
    }
    CHECK(tmx_job_barrier(job));
    a = rings();
    printf("rank %d: mixed %s (rings lent %u taken %u; sent %llu received %llu)\n", rank,
           bad ? "FAILED" : "ok", a.rx_rings, a.tx_rings, (unsigned long long)a.sent,
           (unsigned long long)a.received);

    CHECK(tmx_job_barrier(job));
    for (int i = 0; i < 3; i++) {
        tmx_ep_close(eps[i], TMX_EP_CLOSE_FLUSH);
    }
    tmx_worker_destroy(worker);
    tmx_context_destroy(ctx);
    tmx_job_finalize(job);
    printf("rank %d: %s\n", rank, bad ? "FAILED" : "all ok");
    return bad ? 1 : 0;
}
