/*
 * Eager-RDMA rings (tmx(7), "Eager-RDMA ring"), end to end on 2 ranks: rank 0 sends, rank 1
 * receives and checks. Run by ring.sh with TMX_RING=yes and small rings, in every mode.
 *
 *  order   messages of one tag that take the ring (small, synchronous, with immediate data)
 *          and the queue (larger than a slot, rendezvous) interleaved: every receive gets the
 *          next one, intact, whether it was posted first or the message arrived unexpected
 *  full    rank 1 does not call tmx while rank 0 sends 600 small messages: the ring fills,
 *          the rest go by the queue, and they arrive in order
 *  sleep   a ping-pong of 200 messages where each side polls a random while, then sleeps in
 *          tmx_worker_wait(-1) (no timeout): a ring write must wake its reader (or go by the
 *          queue); a lost wake hangs, which ring.sh's timeout turns into a failure
 *  stale   a ping-pong whose messages go for over 255 laps to the cells, then to the slots,
 *          after a few of the other kind: the position the reader waits at shows this lap's
 *          marker from 255 laps ago in the place not written since (ring.h "Cells"); it must
 *          pass over it, not take it, nor fail the connection
 *  bound   rank 1 polls but posts no receive while rank 0 sends 2000 small messages: past the
 *          unexpected budget (ring.sh sets a small TMX_UNEXP_BUDGET and RING_BOUND_MAX) a ring
 *          message's slot is not given back until a receive takes it, so rank 0 must stall
 *          (at most RING_BOUND_MAX sends done), then everything arrives in order
 *  stats   the worker query says that rings carried messages, filled up, met a sleeper, and
 *          what mode the connections into rank 1 have (RING_EXPECT_MODE)
 *
 * `ring report` (test/integration/sq_full.sh, TMX_SEND_QUEUE=4, 8 slots) runs only this:
 *
 *  report  rank 1's send queue is full of rendezvous reads that wait for rank 0 (which does
 *          not call tmx meanwhile) when rank 0's 8 ring messages come: the credit word rank 1
 *          owes after 4 finds no room. Once the reads are done it must still go: rank 0's
 *          next 8 small messages go through the ring (at least half: meet()'s answer takes a
 *          slot), not all by the queue as "ring full" (the word was written only when the next
 *          ring message came, and none could)
 *
 * `ring first` (ring.sh, TMX_RING=auto) runs only this:
 *
 *  first   rank 0 sends one small message, the only eager message of the job: rank 1, with
 *          rings to spare, lends it a ring at once, so both ranks then count one ring (lent,
 *          taken) while they progress, with no further message. Lent at the second message,
 *          as before, a short job's first exchanges met the grant midway (tmx_alltoall at 8
 *          ranks: the second and third rounds took 1-8 ms and 0.3-0.5 ms against 0.15)
 *
 * `ring window` (ring.sh, whole mode) runs only this:
 *
 *  window  rank 1, awake, stops calling tmx while rank 0 sends 3 x TMX_RING_SLOTS small
 *          messages: they fit the ring's cells (4 per slot, ring.h "Cells"), so every send
 *          completes in place (no request); then all arrive in order, intact. With one cell
 *          per slot the sends past the slots went into requests that wait for the receiver
 *          (an osu_bw window of 64 against a 32-slot ring: the sender spilled into pending
 *          requests while the receiver posted its receives)
 *
 * `ring credits` (ring.sh, whole mode, TMX_UNEXP_BUDGET=0) runs only this:
 *
 *  credits rank 1 posts TMX_RING_SLOTS receives and stops calling tmx while rank 0 sends
 *          3 x TMX_RING_SLOTS small messages (into the cells); rank 1 takes them all, the
 *          first TMX_RING_SLOTS into its receives and the rest unexpected past the budget
 *          (held: not reported free), then says so, and rank 0 sends TMX_RING_SLOTS more,
 *          past the cells it knows free. All must go by the ring, none finding it full:
 *          the receiver's count says more than a slot lap is outstanding, which is so with
 *          cells, and the cells it reported free are free. A count more than the slots behind
 *          was dropped as nonsense, so the sender kept the cells it knew taken (all of them)
 *          and waited, then took the queue (the stall that osu_bw's 8-byte windows met once
 *          every two windows)
 *
 * `ring span` (ring.sh, whole mode, the default ring) runs only this:
 *
 *  span    rank 0 sends NSPAN messages, each after rank 1's answer to the one before (a
 *          ping-pong: spans follow a receive), most of them filling more than three quarters
 *          of a slot but fitting one (1.6-2.1 KiB in the default 2176-byte slot), some
 *          smaller (a cell, a slot) or larger (the queue) in between, so that the
 *          two-position messages (ring.h "Spans") start at every position of the ring, the
 *          last included (their message then lies in the first slot), over many laps; rank 1
 *          takes them posted and, every other 500, unexpected (it answers before it
 *          receives). All must come in order, intact, and most by the ring (RING_SPAN_MIN;
 *          before spans 2 KiB went by the queue)
 *
 * Prints "rank N: ... ok" lines and exits 0 when everything held.
 */
#include <tmx/tmx.h>
#include <tmx/tmx_job.h>

#include "it.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int          rank, bad;
static tmx_worker_h worker;

#define NORDER 3000
#define NFULL  600
#define NSLEEP 200
#define NBOUND 2000
#define NSPAN  3000
#define MAXLEN (64 * 1024) /* rendezvous: above the default eager limit */
#define TAG    7

/* The length of message i of the order phase: ring sizes, a slot and a half, rendezvous. */
static size_t order_len(unsigned i)
{
    static const size_t lens[] = {8, 0, 100, 8, 384, 1000, 8, 200, MAXLEN, 8, 64, 3000};

    return lens[i % (sizeof(lens) / sizeof(lens[0]))];
}

static void fill(unsigned char *b, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++) {
        b[i] = (unsigned char)(seed * 131u + i * 7u + 1);
    }
}

/* A send of message i (its index in its first 4 bytes, a pattern after) from buf. */
static tmx_request_h send_msg(tmx_ep_h ep, unsigned char *buf, unsigned i, size_t len, int sync,
                              int imm)
{
    tmx_request_params_t p;
    tmx_request_h        req = NULL;
    tmx_status_t         s;

    memset(&p, 0, sizeof(p));
    if (sync) {
        p.field_mask |= TMX_REQ_PARAM_FLAGS;
        p.flags = TMX_SEND_FLAG_SYNC;
    }
    if (imm) {
        p.field_mask |= TMX_REQ_PARAM_IMM;
        p.imm = i;
    }
    fill(buf, len, i);
    if (len >= 4) {
        memcpy(buf, &i, 4);
    }
    CHECK(s = tmx_tag_send_nb(ep, buf, len, TAG, &p, &req));
    return s == TMX_INPROGRESS ? req : NULL;
}

static void check_msg(const char *what, unsigned i, tmx_status_t s,
                      const tmx_tag_recv_info_t *info, unsigned char *buf, size_t len, int imm)
{
    unsigned got = 0;

    EXPECT(s == TMX_OK, "%s %u: %s", what, i, tmx_status_string(s));
    EXPECT(info->length == len, "%s %u: length %zu, expected %zu (another message?)", what, i,
           info->length, len);
    if (len >= 4 && info->length == len) {
        memcpy(&got, buf, 4);
        EXPECT(got == i, "%s: receive %u got message %u: order broken", what, i, got);
    }
    EXPECT(info->has_imm == imm && (!imm || info->imm == i), "%s %u: immediate data %d %u", what,
           i, info->has_imm, info->imm);
}

/* Message i's data past its index must be intact. */
static int intact(const unsigned char *buf, size_t len, unsigned i)
{
    for (size_t k = 4; k < len; k++) {
        if (buf[k] != (unsigned char)(i * 131u + k * 7u + 1)) {
            return 0;
        }
    }
    return 1;
}

/* Receives one message of tag TAG into rbuf[len]; the wait's status, *info filled. */
static tmx_status_t recv_one(unsigned char *rbuf, size_t len, tmx_tag_recv_info_t *info)
{
    tmx_request_h r;
    tmx_status_t  s;

    CHECK(tmx_tag_recv_nb(worker, rbuf, len, TAG, ~(tmx_tag_t)0, NULL, &r));
    s = tmx_request_wait(r, info);
    tmx_request_free(r);
    return s;
}

static void phase_order(tmx_job_h job, tmx_ep_h ep)
{
    static tmx_request_h reqs[NORDER];
    unsigned char       *bufs = malloc((size_t)MAXLEN * 16);

    if (bufs == NULL) {
        exit(1);
    }
    if (rank == 0) {
        /* in flight 16 at a time (one buffer each), waited in order */
        for (unsigned i = 0; i < NORDER; i++) {
            if (i >= 16) {
                if (reqs[i - 16] != NULL) {
                    CHECK(tmx_request_wait(reqs[i - 16], NULL));
                    tmx_request_free(reqs[i - 16]);
                }
            }
            if (i % 500 == 0) {
                CHECK(tmx_job_barrier(job)); /* rank 1 switches between posted and late */
            }
            reqs[i] = send_msg(ep, bufs + (size_t)(i % 16) * MAXLEN, i, order_len(i), i % 7 == 3,
                               i % 5 == 1);
        }
        for (unsigned i = NORDER - 16; i < NORDER; i++) {
            if (reqs[i] != NULL) {
                CHECK(tmx_request_wait(reqs[i], NULL));
                tmx_request_free(reqs[i]);
            }
        }
    } else {
        unsigned char *rbuf = malloc(MAXLEN);

        for (unsigned i = 0; i < NORDER; i++) {
            tmx_tag_recv_info_t info;
            tmx_status_t        s;

            if (i % 500 == 0) {
                CHECK(tmx_job_barrier(job));
                if ((i / 500) % 2 == 1) {
                    usleep(20000); /* these arrive unexpected */
                }
            }
            memset(rbuf, 0, MAXLEN);
            memset(&info, 0, sizeof(info));
            s = recv_one(rbuf, MAXLEN, &info);
            check_msg("order", i, s, &info, rbuf, order_len(i), i % 5 == 1);
            EXPECT(info.length != order_len(i) || order_len(i) < 4 ||
                       intact(rbuf, order_len(i), i),
                   "order %u: data torn", i);
            if (bad > 10) {
                break;
            }
        }
        free(rbuf);
    }
    free(bufs);
}

static void phase_full(tmx_job_h job, tmx_ep_h ep)
{
    static tmx_request_h reqs[NFULL];
    static unsigned char bufs[NFULL][64];

    CHECK(tmx_job_barrier(job));
    if (rank == 0) {
        for (unsigned i = 0; i < NFULL; i++) {
            reqs[i] = send_msg(ep, bufs[i], i, 8 + i % 56, 0, 0);
        }
        CHECK(tmx_job_barrier(job));
        for (unsigned i = 0; i < NFULL; i++) {
            if (reqs[i] != NULL) {
                CHECK(tmx_request_wait(reqs[i], NULL));
                tmx_request_free(reqs[i]);
            }
        }
    } else {
        CHECK(tmx_job_barrier(job)); /* every send posted while we did not call tmx */
        for (unsigned i = 0; i < NFULL; i++) {
            tmx_tag_recv_info_t info;
            unsigned char       rbuf[64];
            tmx_status_t        s = recv_one(rbuf, sizeof(rbuf), &info);

            check_msg("full", i, s, &info, rbuf, 8 + i % 56, 0);
            EXPECT(info.length != 8 + i % 56 || intact(rbuf, 8 + i % 56, i), "full %u: torn",
                   i);
        }
    }
}

/* Ping-pong of n messages of len bytes from rank 0 (checked by rank 1, which answers 8 bytes),
 * numbered from first. */
static void pingpong(tmx_ep_h ep, unsigned first, unsigned n, size_t len)
{
    static unsigned char buf[MAXLEN], rbuf[MAXLEN];

    for (unsigned i = first; i < first + n; i++) {
        tmx_tag_recv_info_t info;
        tmx_request_h       r, sr;
        tmx_status_t        s;
        size_t              want = rank == 0 ? 8 : len;

        CHECK(tmx_tag_recv_nb(worker, rbuf, want, TAG, ~(tmx_tag_t)0, NULL, &r));
        if (rank == 0) {
            sr = send_msg(ep, buf, i, len, 0, 0);
            s  = tmx_request_wait(r, &info);
        } else {
            s  = tmx_request_wait(r, &info);
            sr = send_msg(ep, buf, i, 8, 0, 0);
        }
        if (sr != NULL) {
            CHECK(tmx_request_wait(sr, NULL));
            tmx_request_free(sr);
        }
        tmx_request_free(r);
        check_msg("stale", i, s, &info, rbuf, want, 0);
        EXPECT(info.length != want || intact(rbuf, want, i), "stale %u: torn", i);
    }
}

static void phase_stale(tmx_job_h job, tmx_ep_h ep)
{
    unsigned laps = 260 * 8 * 4; /* more than 255 laps of the cells of rings of up to 8 slots
                                  * (4 cells a slot) */

    CHECK(tmx_job_barrier(job));
    pingpong(ep, 0, 8, 100);        /* slots */
    pingpong(ep, 8, laps, 8);       /* cells */
    pingpong(ep, 8 + laps, 8, 8);   /* cells */
    pingpong(ep, 16 + laps, laps, 100); /* slots */
    CHECK(tmx_job_barrier(job));
}

static double now_ms(void)
{
    struct timespec t;

    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static void phase_bound(tmx_job_h job, tmx_ep_h ep, long max_done)
{
    static tmx_request_h reqs[NBOUND];
    static unsigned char bufs[NBOUND][8];
    double               t0;

    CHECK(tmx_job_barrier(job));
    t0 = now_ms();
    if (rank == 0) {
        unsigned done = 0;

        for (unsigned i = 0; i < NBOUND; i++) {
            reqs[i] = send_msg(ep, bufs[i], i, sizeof(bufs[i]), 0, 0);
        }
        while (now_ms() - t0 < 300) {
            tmx_worker_progress(worker);
        }
        for (unsigned i = 0; i < NBOUND; i++) {
            done += reqs[i] == NULL || tmx_request_test(reqs[i], NULL) != TMX_INPROGRESS;
        }
        CHECK(tmx_job_barrier(job));
        printf("rank 0: bound: %u of %u sends done while the receiver took none\n", done,
               NBOUND);
        EXPECT(max_done < 0 || done <= (unsigned long)max_done,
               "bound: %u sends done while the receiver posted no receive (at most %ld)", done,
               max_done);
        for (unsigned i = 0; i < NBOUND; i++) {
            if (reqs[i] != NULL) {
                CHECK(tmx_request_wait(reqs[i], NULL));
                tmx_request_free(reqs[i]);
            }
        }
    } else {
        while (now_ms() - t0 < 500) {
            tmx_worker_progress(worker); /* takes messages in, receives none */
        }
        CHECK(tmx_job_barrier(job));
        for (unsigned i = 0; i < NBOUND; i++) {
            tmx_tag_recv_info_t info;
            unsigned char       rbuf[8];
            tmx_status_t        s = recv_one(rbuf, sizeof(rbuf), &info);

            check_msg("bound", i, s, &info, rbuf, sizeof(rbuf), 0);
        }
    }
}

/* Waits for the receive r, polling for up to spin_us, then asleep in tmx_worker_wait with no
 * timeout: a ring write that wakes nobody hangs here. */
static tmx_status_t wait_asleep(tmx_request_h r, tmx_tag_recv_info_t *info, long spin_us)
{
    struct timespec t0, t;
    tmx_status_t    s;

    clock_gettime(CLOCK_MONOTONIC, &t0);
    while ((s = tmx_request_test(r, info)) == TMX_INPROGRESS) {
        clock_gettime(CLOCK_MONOTONIC, &t);
        if (tmx_worker_progress(worker) == 0 &&
            (t.tv_sec - t0.tv_sec) * 1000000 + (t.tv_nsec - t0.tv_nsec) / 1000 > spin_us) {
            CHECK(tmx_worker_wait(worker, -1));
        }
    }
    return s;
}

/* Ping-pong where each side waits asleep after polling a random while, and the sender pauses a
 * random while first: rings are written as their readers fall asleep. Each message must be
 * answered before the next goes, so one lost wake hangs the phase. */
static void phase_sleep(tmx_job_h job, tmx_ep_h ep)
{
    CHECK(tmx_job_barrier(job));
    srand(rank == 0 ? 12345 : 54321);
    for (unsigned i = 0; i < NSLEEP; i++) {
        tmx_tag_recv_info_t info;
        tmx_request_h       r, sr;
        unsigned char       buf[8], rbuf[8];
        tmx_status_t        s;
        long                spin_us = rand() % 3000;

        if (rank == 0) {
            struct timespec ts = {.tv_sec = 0, .tv_nsec = (long)(rand() % 3000) * 1000};

            nanosleep(&ts, NULL);
        }
        CHECK(tmx_tag_recv_nb(worker, rbuf, sizeof(rbuf), TAG, ~(tmx_tag_t)0, NULL, &r));
        if (rank == 0) {
            sr = send_msg(ep, buf, i, sizeof(buf), 0, 0);
            s  = wait_asleep(r, &info, spin_us);
        } else {
            s  = wait_asleep(r, &info, spin_us);
            sr = send_msg(ep, buf, i, sizeof(buf), 0, 0);
        }
        if (sr != NULL) {
            CHECK(tmx_request_wait(sr, NULL));
            tmx_request_free(sr);
        }
        tmx_request_free(r);
        check_msg("sleep", i, s, &info, rbuf, sizeof(rbuf), 0);
    }
    CHECK(tmx_job_barrier(job));
}

#define NREP 8 /* rendezvous messages, and small ones of the second burst: a ring of 8 */
#define NFILL 16 /* small messages of the first burst: more than the ring holds */

static tmx_worker_attr_t ring_query(void)
{
    tmx_worker_attr_t a;

    memset(&a, 0, sizeof(a));
    a.field_mask = TMX_WORKER_ATTR_RING;
    CHECK(tmx_worker_query(worker, &a));
    return a;
}

/* Rank 1 says it is there and rank 0 answers: both sides polling, neither asleep. */
static void meet(tmx_ep_h ep)
{
    unsigned char b[8] = {0};

    if (rank == 1) {
        CHECK(tmx_tag_send(ep, b, sizeof(b), TAG + 4));
        CHECK(tmx_tag_recv(worker, b, sizeof(b), TAG + 5, ~(tmx_tag_t)0, NULL));
    } else {
        CHECK(tmx_tag_recv(worker, b, sizeof(b), TAG + 4, ~(tmx_tag_t)0, NULL));
        CHECK(tmx_tag_send(ep, b, sizeof(b), TAG + 5));
    }
}

static void phase_report(tmx_job_h job, tmx_ep_h ep)
{
    static unsigned char big[NREP][MAXLEN], small[NFILL][8];
    tmx_request_h        big_r[NREP], small_r[NFILL];
    tmx_worker_attr_t    a0, a1;

    /* the ring lent and taken (TMX_RING=yes: from the first message). The two sides meet by
     * messages, not job barriers, in this phase: a barrier may sleep, and a receiver asleep
     * has its senders send by the queue */
    for (unsigned i = 0; i < 8; i++) {
        if (rank == 0) {
            CHECK(tmx_tag_send(ep, small[0], 8, TAG + 1));
        } else {
            CHECK(tmx_tag_recv(worker, small[0], 8, TAG + 1, ~(tmx_tag_t)0, NULL));
        }
    }
    meet(ep);
    if (rank == 0) {
        for (unsigned i = 0; i < NREP; i++) {
            big_r[i] = send_msg(ep, big[i], i, MAXLEN, 0, 0); /* RTS: rendezvous */
        }
        usleep(200000); /* rank 1 takes the RTSs: its reads wait for us (no tmx call here;
                         * a job barrier would progress this worker) */
        a0 = ring_query();
        for (unsigned i = 0; i < NFILL; i++) {
            /* through the ring until it is full (done when written), then the queue */
            CHECK(tmx_tag_send(ep, small[i], 8, TAG + 2));
        }
        a1 = ring_query();
        EXPECT(a1.ring.sent > a0.ring.sent, "report: no message of the first burst in the ring");
        usleep(300000); /* no tmx call: rank 1's reads cannot finish */
        for (unsigned i = 0; i < NREP; i++) {
            if (big_r[i] != NULL) {
                CHECK(tmx_request_wait(big_r[i], NULL));
                tmx_request_free(big_r[i]);
            }
        }
        meet(ep); /* rank 1 has every message; the word is written */
        a0 = ring_query();
        for (unsigned i = 0; i < NREP; i++) {
            CHECK(tmx_tag_send(ep, small[i], 8, TAG + 3));
        }
        a1 = ring_query();
        /* all but the slots meet()'s answer took: without the word, none */
        EXPECT(a1.ring.sent - a0.ring.sent >= NREP / 2,
               "report: %llu of the next %d small messages through the ring, %llu by the "
               "queue as ring full: the receiver's credit word never came",
               (unsigned long long)(a1.ring.sent - a0.ring.sent), NREP,
               (unsigned long long)(a1.ring.full - a0.ring.full));
    } else {
        for (unsigned i = 0; i < NREP; i++) {
            CHECK(tmx_tag_recv_nb(worker, big[i], MAXLEN, TAG, ~(tmx_tag_t)0, NULL, &big_r[i]));
        }
        for (unsigned i = 0; i < NFILL; i++) {
            CHECK(tmx_tag_recv_nb(worker, small[i], 8, TAG + 2, ~(tmx_tag_t)0, NULL,
                                  &small_r[i]));
        }
        /* the RTSs match: 4 reads posted, the rest queued; then the small messages come */
        for (unsigned i = 0; i < NFILL; i++) {
            CHECK(tmx_request_wait(small_r[i], NULL));
            tmx_request_free(small_r[i]);
        }
        for (unsigned i = 0; i < NREP; i++) {
            tmx_tag_recv_info_t info;
            tmx_status_t        s = tmx_request_wait(big_r[i], &info);

            tmx_request_free(big_r[i]);
            check_msg("report", i, s, &info, big[i], MAXLEN, 0);
            EXPECT(info.length != MAXLEN || intact(big[i], MAXLEN, i), "report %u: torn", i);
        }
        for (int k = 0; k < 200; k++) { /* what is still queued goes */
            tmx_worker_progress(worker);
            usleep(100);
        }
        meet(ep);
        for (unsigned i = 0; i < NREP; i++) {
            CHECK(tmx_tag_recv(worker, small[i], 8, TAG + 3, ~(tmx_tag_t)0, NULL));
        }
    }
    CHECK(tmx_job_barrier(job));
    printf("rank %d: report %s\n", rank, bad ? "FAILED" : "ok");
}

static void phase_first(tmx_job_h job, tmx_ep_h ep)
{
    char              msg[8] = "first";
    tmx_worker_attr_t a;
    struct timespec   t0, t;
    double            waited = 0;

    if (rank == 0) {
        CHECK(tmx_tag_send(ep, msg, sizeof(msg), TAG));
    } else {
        CHECK(tmx_tag_recv(worker, msg, sizeof(msg), TAG, ~(tmx_tag_t)0, NULL));
        EXPECT(strcmp(msg, "first") == 0, "first: the message came torn");
    }
    /* the grant and its ack go while both progress; the clock only bounds the wait */
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        a = ring_query();
        if ((rank == 0 ? a.ring.tx_rings : a.ring.rx_rings) >= 1 || waited > 5) {
            break;
        }
        tmx_worker_progress(worker);
        usleep(100);
        clock_gettime(CLOCK_MONOTONIC, &t);
        waited = (double)(t.tv_sec - t0.tv_sec) + (double)(t.tv_nsec - t0.tv_nsec) * 1e-9;
    }
    printf("rank %d: first: after one eager message, rings lent %u taken %u\n", rank,
           a.ring.rx_rings, a.ring.tx_rings);
    EXPECT(rank == 0 ? a.ring.tx_rings == 1 : a.ring.rx_rings == 1,
           "first: no ring after the sender's first eager message (TMX_RING=auto, rings to "
           "spare)");
    CHECK(tmx_job_barrier(job)); /* progresses the worker: rank 0's ack reaches rank 1 */
    printf("rank %d: first %s\n", rank, bad ? "FAILED" : "ok");
}

/* Four round trips before a phase: rank 1 is awake (its word in rank 0's memory says so)
 * and rank 0 has its ring. */
static void warm_round_trips(tmx_ep_h ep)
{
    char go[8] = "go";

    for (int k = 0; k < 4; k++) {
        if (rank == 0) {
            CHECK(tmx_tag_send(ep, go, sizeof(go), TAG + 1));
            CHECK(tmx_tag_recv(worker, go, sizeof(go), TAG + 1, ~(tmx_tag_t)0, NULL));
        } else {
            CHECK(tmx_tag_recv(worker, go, sizeof(go), TAG + 1, ~(tmx_tag_t)0, NULL));
            CHECK(tmx_tag_send(ep, go, sizeof(go), TAG + 1));
        }
    }
}

static void phase_window(tmx_job_h job, tmx_ep_h ep)
{
    static tmx_request_h reqs[1024];
    static unsigned char bufs[1024][8];
    tmx_worker_attr_t    a = ring_query();
    unsigned             n = 3 * a.ring.slots, inplace = 0;

    EXPECT(n >= 3 && n <= 1024, "window: %u messages", n);
    CHECK(tmx_job_barrier(job));
    warm_round_trips(ep);
    if (rank == 0) {
        for (unsigned i = 0; i < n; i++) {
            reqs[i] = send_msg(ep, bufs[i], i, sizeof(bufs[i]), 0, 0);
            inplace += reqs[i] == NULL;
        }
        for (unsigned i = 0; i < n; i++) {
            if (reqs[i] != NULL) {
                CHECK(tmx_request_wait(reqs[i], NULL));
                tmx_request_free(reqs[i]);
            }
        }
        printf("rank 0: window: %u of %u small sends done in place (%u slots)\n", inplace, n,
               a.ring.slots);
        /* the positions rank 1 took and has not reported yet: fewer than half the slots */
        EXPECT(inplace >= n - a.ring.slots / 2,
               "window: only %u of %u sends done in place: the ring's cells did not take them",
               inplace, n);
    } else {
        usleep(100 * 1000); /* no tmx call while rank 0 sends */
        for (unsigned i = 0; i < n; i++) {
            tmx_tag_recv_info_t info;
            unsigned char       rb[8];
            tmx_status_t        st = tmx_tag_recv(worker, rb, sizeof(rb), TAG, ~(tmx_tag_t)0,
                                                  &info);

            check_msg("window", i, st, &info, rb, sizeof(rb), 0);
            EXPECT(intact(rb, sizeof(rb), i), "window %u: torn", i);
        }
    }
    CHECK(tmx_job_barrier(job));
    printf("rank %d: window %s\n", rank, bad ? "FAILED" : "ok");
}

static void phase_credits(tmx_job_h job, tmx_ep_h ep)
{
    static tmx_request_h reqs[1024];
    static unsigned char bufs[1024][8];
    static tmx_request_h rreqs[1024];
    static unsigned char rbufs[1024][8];
    tmx_worker_attr_t    a      = ring_query();
    /* 3 x slots: they fit the cells whatever the warm-up left unreported (fewer than half
     * the slots); then slots more, which need the receiver's count */
    unsigned             posted = a.ring.slots, n = 3 * a.ring.slots, extra = a.ring.slots;
    unsigned             inplace = 0;
    char                 go[8]  = "go";

    EXPECT(n + extra <= 1024, "credits: %u messages", n + extra);
    if (n + extra > 1024) {
        return;
    }
    CHECK(tmx_job_barrier(job));
    warm_round_trips(ep);
    if (rank == 1) {
        for (unsigned i = 0; i < posted; i++) {
            CHECK(tmx_tag_recv_nb(worker, rbufs[i], sizeof(rbufs[i]), TAG, ~(tmx_tag_t)0, NULL,
                                  &rreqs[i]));
        }
        /* no barrier from here on: rank 1 must stay awake (TMX_WAIT=spin), or rank 0's
         * small sends take the queue, which wakes it */
        CHECK(tmx_tag_send(ep, go, sizeof(go), TAG + 1));
        usleep(100 * 1000); /* no tmx call while rank 0 fills the cells */
    }
    if (rank == 0) {
        tmx_worker_attr_t b;

        CHECK(tmx_tag_recv(worker, go, sizeof(go), TAG + 1, ~(tmx_tag_t)0, NULL));
        b = ring_query();
        for (unsigned i = 0; i < n; i++) {
            reqs[i] = send_msg(ep, bufs[i], i, sizeof(bufs[i]), 0, 0);
        }
        /* rank 1 took them all (reported: those its receives took) */
        CHECK(tmx_tag_recv(worker, go, sizeof(go), TAG + 1, ~(tmx_tag_t)0, NULL));
        for (unsigned i = n; i < n + extra; i++) {
            reqs[i] = send_msg(ep, bufs[i], i, sizeof(bufs[i]), 0, 0);
        }
        a       = ring_query();
        inplace = (unsigned)(a.ring.sent - b.ring.sent);
        CHECK(tmx_tag_send(ep, go, sizeof(go), TAG + 1)); /* rank 1 may receive the rest */
        printf("rank 0: credits: %u of %u small sends by the ring (%llu found it full) after "
               "the receiver took %u of %u (%u slots)\n", inplace, n + extra,
               (unsigned long long)(a.ring.full - b.ring.full), posted, n, a.ring.slots);
        EXPECT(inplace == n + extra && a.ring.full == b.ring.full,
               "credits: %u of %u sends by the ring: the receiver's count was dropped",
               inplace, n + extra);
        for (unsigned i = 0; i < n + extra; i++) {
            if (reqs[i] != NULL) {
                CHECK(tmx_request_wait(reqs[i], NULL));
                tmx_request_free(reqs[i]);
            }
        }
    } else {
        double t0;

        for (unsigned i = 0; i < posted; i++) {
            tmx_tag_recv_info_t info;

            check_msg("credits", i, tmx_request_wait(rreqs[i], &info), &info, rbufs[i],
                      sizeof(rbufs[i]), 0);
            EXPECT(intact(rbufs[i], sizeof(rbufs[i]), i), "credits %u: torn", i);
            tmx_request_free(rreqs[i]);
        }
        t0 = now_ms();
        while (now_ms() - t0 < 100) {
            tmx_worker_progress(worker); /* takes the rest in, unexpected */
        }
        CHECK(tmx_tag_send(ep, go, sizeof(go), TAG + 1));
        /* no receive of a held message (which reports its position free) until rank 0 sent
         * the rest: the count rank 0 reads is the one that says more than the slots */
        CHECK(tmx_tag_recv(worker, go, sizeof(go), TAG + 1, ~(tmx_tag_t)0, NULL));
        for (unsigned i = posted; i < n + extra; i++) {
            tmx_tag_recv_info_t info;
            unsigned char       rb[8];
            tmx_status_t        st = recv_one(rb, sizeof(rb), &info);

            check_msg("credits", i, st, &info, rb, sizeof(rb), 0);
            EXPECT(intact(rb, sizeof(rb), i), "credits %u: torn", i);
        }
    }
    CHECK(tmx_job_barrier(job));
    printf("rank %d: credits %s\n", rank, bad ? "FAILED" : "ok");
}

/* The span phase's lengths (payload; the default slot carries spans of up to 2145 bytes
 * behind a 16-byte header): 13 a round, so a span starts at every position. */
static size_t span_len(unsigned i)
{
    static const size_t lens[] = {2048, 1617, 2145, 8, 2047, 1700, 2041, 1000, 2049, 2146,
                                  1999, 2100, 40};

    return lens[i % (sizeof(lens) / sizeof(lens[0]))];
}

static void phase_span(tmx_job_h job, tmx_ep_h ep, unsigned long long min)
{
    static unsigned char buf[4096];
    tmx_worker_attr_t    a, b;
    unsigned char        ack[8];

    CHECK(tmx_job_barrier(job));
    warm_round_trips(ep);
    a = ring_query();
    if (rank == 0) {
        /* each send after a receive (rank 1's answer), as a ping-pong's: spans are taken then */
        for (unsigned i = 0; i < NSPAN; i++) {
            tmx_request_h r = send_msg(ep, buf, i, span_len(i), i % 11 == 4, i % 3 == 1);

            if (r != NULL) {
                CHECK(tmx_request_wait(r, NULL));
                tmx_request_free(r);
            }
            CHECK(tmx_tag_recv(worker, ack, sizeof(ack), TAG + 1, ~(tmx_tag_t)0, NULL));
        }
        b = ring_query();
        printf("rank 0: span: %llu of %u sends by the ring (%llu found it full)\n",
               (unsigned long long)(b.ring.sent - a.ring.sent), NSPAN,
               (unsigned long long)(b.ring.full - a.ring.full));
        EXPECT(b.ring.sent - a.ring.sent >= min, "span: %llu of %u sends by the ring, "
               "expected at least %llu", (unsigned long long)(b.ring.sent - a.ring.sent), NSPAN,
               min);
    } else {
        static unsigned char rbuf[4096];

        for (unsigned i = 0; i < NSPAN; i++) {
            tmx_tag_recv_info_t info;
            int                 late = (i / 500) % 2 == 1;

            if (late) {
                /* the answer first: message i arrives before its receive (unexpected) */
                CHECK(tmx_tag_send(ep, ack, sizeof(ack), TAG + 1));
                usleep(50);
            }
            check_msg("span", i, recv_one(rbuf, span_len(i), &info), &info, rbuf, span_len(i),
                      i % 3 == 1);
            EXPECT(intact(rbuf, span_len(i), i), "span %u (%zu bytes): torn", i, span_len(i));
            if (!late) {
                CHECK(tmx_tag_send(ep, ack, sizeof(ack), TAG + 1));
            }
        }
    }
    CHECK(tmx_job_barrier(job));
    printf("rank %d: span %s\n", rank, bad ? "FAILED" : "ok");
}

int main(int argc, char **argv)
{
    tmx_job_h         job;
    tmx_context_h     ctx;
    tmx_ep_h          eps[2];
    tmx_worker_attr_t attr;
    const char       *want = getenv("RING_EXPECT_MODE");
    const char       *min  = getenv("RING_EXPECT_MIN");
    unsigned long long least = min != NULL ? strtoull(min, NULL, 10) : NORDER / 4;
    int               none   = want != NULL && strcmp(want, "none") == 0;
    const char       *bmax   = getenv("RING_BOUND_MAX");

    CHECK(tmx_job_init(&job));
    rank = tmx_job_rank(job);
    if (tmx_job_size(job) != 2) {
        fprintf(stderr, "ring: needs 2 ranks\n");
        return 2;
    }
    CHECK(tmx_context_create(NULL, &ctx));
    CHECK(tmx_worker_create(ctx, NULL, &worker));
    CHECK(tmx_job_connect(job, worker, eps));

    if (argc > 1 && strcmp(argv[1], "report") == 0) {
        phase_report(job, eps[1 - rank]);
        goto out;
    }
    if (argc > 1 && strcmp(argv[1], "first") == 0) {
        phase_first(job, eps[1 - rank]);
        goto out;
    }
    if (argc > 1 && strcmp(argv[1], "window") == 0) {
        phase_window(job, eps[1 - rank]);
        goto out;
    }
    if (argc > 1 && strcmp(argv[1], "credits") == 0) {
        phase_credits(job, eps[1 - rank]);
        goto out;
    }
    if (argc > 1 && strcmp(argv[1], "span") == 0) {
        const char *smin = getenv("RING_SPAN_MIN");

        phase_span(job, eps[1 - rank], smin != NULL ? strtoull(smin, NULL, 10) : NSPAN / 2);
        goto out;
    }
    phase_order(job, eps[1 - rank]);
    printf("rank %d: order %s\n", rank, bad ? "FAILED" : "ok");
    phase_full(job, eps[1 - rank]);
    printf("rank %d: full %s\n", rank, bad ? "FAILED" : "ok");
    phase_sleep(job, eps[1 - rank]);
    printf("rank %d: sleep %s\n", rank, bad ? "FAILED" : "ok");
    phase_stale(job, eps[1 - rank]);
    printf("rank %d: stale %s\n", rank, bad ? "FAILED" : "ok");
    phase_bound(job, eps[1 - rank], bmax != NULL ? strtol(bmax, NULL, 10) : -1);
    printf("rank %d: bound %s\n", rank, bad ? "FAILED" : "ok");

    memset(&attr, 0, sizeof(attr));
    attr.field_mask = TMX_WORKER_ATTR_RING;
    CHECK(tmx_worker_query(worker, &attr));
    printf("rank %d: rings lent %u taken %u; sent %llu received %llu full %llu asleep %llu "
           "wakes %llu; connections in: whole %u aligned128 %u imm %u none %u\n",
           rank, attr.ring.rx_rings, attr.ring.tx_rings, (unsigned long long)attr.ring.sent,
           (unsigned long long)attr.ring.received, (unsigned long long)attr.ring.full,
           (unsigned long long)attr.ring.asleep, (unsigned long long)attr.ring.wakes,
           attr.ring.eps_whole, attr.ring.eps_aligned128, attr.ring.eps_imm, attr.ring.eps_none);
    if (rank == 0 && none) {
        EXPECT(attr.ring.tx_rings == 0 && attr.ring.sent == 0,
               "rank 0 sent %llu messages through rings", (unsigned long long)attr.ring.sent);
    } else if (rank == 0) {
        EXPECT(attr.ring.tx_rings >= 1 && attr.ring.sent >= least,
               "rank 0 sent %llu messages through rings", (unsigned long long)attr.ring.sent);
        EXPECT(attr.ring.full > 0, "the ring never filled");
    } else if (want != NULL) {
        unsigned n = strcmp(want, "whole") == 0        ? attr.ring.eps_whole
                     : strcmp(want, "aligned128") == 0 ? attr.ring.eps_aligned128
                     : strcmp(want, "imm") == 0        ? attr.ring.eps_imm
                                                       : attr.ring.eps_none;

        EXPECT(n >= 1, "no connection into rank 1 in mode %s", want);
        EXPECT(none || attr.ring.received >= least,
               "rank 1 received %llu messages through rings",
               (unsigned long long)attr.ring.received);
    }
out:
    CHECK(tmx_job_barrier(job));
    tmx_ep_close(eps[0], TMX_EP_CLOSE_FLUSH);
    tmx_ep_close(eps[1], TMX_EP_CLOSE_FLUSH);
    tmx_worker_destroy(worker);
    tmx_context_destroy(ctx);
    tmx_job_finalize(job);
    printf("rank %d: %s\n", rank, bad ? "FAILED" : "all ok");
    return bad ? 1 : 0;
}
