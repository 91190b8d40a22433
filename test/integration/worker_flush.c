/*
 * tmx_worker_flush (API 1.6): every send of every endpoint of a worker flushed at once.
 *
 *   worker_flush silent   one process, no launcher: a worker W with endpoints to PEERS workers
 *                         that are alive but never progressed (peers busy elsewhere). Bad
 *                         handles are refused; a flush with nothing in flight returns at once;
 *                         with a rendezvous send to each peer in flight it fails them with
 *                         TMX_ERR_TIMED_OUT after one TMX_PEER_TIMEOUT for all the peers
 *                         together (less than 2.5 timeouts; a flush of each endpoint after the
 *                         other, as tmx_ep_close does, takes PEERS), and at least most of one
 *                         (else the peers were not silent); the endpoints stay open (a message
 *                         sent after it arrives); tmx_worker_destroy then disconnects them all
 *                         within 2.5 timeouts too. Run with a small TMX_PEER_TIMEOUT
 *                         (worker_flush.sh: 1 s).
 *   worker_flush data     under tmxrun with 4 ranks: rank 0 sends MSGS messages (eager,
 *                         rendezvous, more than the eager credits let go at once) to each of
 *                         the others, which start to receive only a while later, and flushes:
 *                         TMX_OK, every send completed with TMX_OK, and every message arrived,
 *                         each byte checked by its receiver.
 *
 * Prints "worker_flush: N checks ok" (each rank, for data) and exits 0 when everything held.
 */
#include <tmx/tmx.h>
#include <tmx/tmx_job.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int rank, bad, checks; /* rank: it.h's messages */

#define IT_COUNT_CHECKS
#include "it.h"

#define PEERS 4
#define BIG   (2u << 20) /* above any eager limit (at most 1 MiB): rendezvous */
#define MSGS  48

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* TMX_PEER_TIMEOUT as tmx reads it (tmx_config(7): default 10 s) */
static double peer_timeout(void)
{
    const char *v = getenv("TMX_PEER_TIMEOUT");
    return v != NULL && atof(v) > 0 ? atof(v) : 10.0;
}

static int          sends_done;
static tmx_status_t sends_status[PEERS * MSGS];

static void send_cb(tmx_request_h req, tmx_status_t status, void *user_data)
{
    (void)req;
    sends_status[(int)(intptr_t)user_data] = status;
    sends_done++;
}

/* A send whose completion send_cb records in sends_status[slot] (TMX_OK at once when it
 * completed in place). */
static void send_one(tmx_ep_h ep, const void *buf, size_t len, tmx_tag_t tag, int slot)
{
    tmx_request_params_t p = {.field_mask = TMX_REQ_PARAM_CALLBACK | TMX_REQ_PARAM_USER_DATA,
                              .cb.send    = send_cb,
                              .user_data  = (void *)(intptr_t)slot};
    tmx_request_h        req = NULL;
    tmx_status_t         s   = tmx_tag_send_nb(ep, buf, len, tag, &p, &req);

    REQUIRE(s == TMX_OK || s == TMX_INPROGRESS);
    if (s == TMX_OK) {
        sends_status[slot] = TMX_OK;
        sends_done++;
    } else {
        tmx_request_free(req); /* released after its callback */
    }
}

/* Receives one message of tag on w into buf (len bytes), progressing w and also: the sender's
 * worker in this process. */
static tmx_status_t recv_two(tmx_worker_h w, tmx_worker_h also, void *buf, size_t len,
                             tmx_tag_t tag)
{
    tmx_request_h req;
    tmx_status_t  s  = tmx_tag_recv_nb(w, buf, len, tag, ~(tmx_tag_t)0, NULL, &req);
    double        t0 = now();

    if (s != TMX_INPROGRESS) {
        return s;
    }
    while ((s = tmx_request_test(req, NULL)) == TMX_INPROGRESS && now() - t0 < 20) {
        tmx_worker_progress(w);
        tmx_worker_progress(also);
    }
    if (s == TMX_INPROGRESS) {
        tmx_request_cancel(req);
        s = TMX_ERR_TIMED_OUT;
    }
    tmx_request_free(req);
    return s;
}

static int silent(void)
{
    tmx_context_h ctx;
    tmx_worker_h  w, peer[PEERS];
    tmx_ep_h      ep[PEERS];
    uint64_t      v = 0x1234, got;
    uint8_t      *big = calloc(PEERS, BIG);
    double        tmo = peer_timeout(), t0, dt;
    tmx_status_t  s;

    REQUIRE(big != NULL);
    CHECK(tmx_context_create(NULL, &ctx));
    CHECK(tmx_worker_create(ctx, NULL, &w));
    EXPECT(tmx_worker_flush(NULL) == TMX_ERR_INVALID_PARAM, "flush of NULL");
    EXPECT(tmx_worker_flush(w) == TMX_OK, "flush of a worker without endpoints");
    for (int i = 0; i < PEERS; i++) {
        void           *addr;
        size_t          alen;
        tmx_ep_params_t p;

        CHECK(tmx_worker_create(ctx, NULL, &peer[i]));
        CHECK(tmx_worker_get_address(peer[i], &addr, &alen));
        p.field_mask     = TMX_EP_PARAM_ADDRESS;
        p.address        = addr;
        p.address_length = alen;
        CHECK(tmx_ep_create(w, &p, &ep[i]));
        tmx_worker_release_address(peer[i], addr);
        /* connected: a message taken by the peer */
        send_one(ep[i], &v, sizeof(v), 1, i);
        got = 0;
        s   = recv_two(peer[i], w, &got, sizeof(got), 1);
        REQUIRE(s == TMX_OK && got == v);
    }
    while (sends_done < PEERS) {
        tmx_worker_progress(w);
    }

    /* nothing in flight: at once */
    t0 = now();
    s  = tmx_worker_flush(w);
    dt = now() - t0;
    EXPECT(s == TMX_OK && dt < 0.5 * tmo, "flush with nothing in flight: %s after %.2f s",
           tmx_status_string(s), dt);

    /* a rendezvous send to each silent peer: one timeout for all */
    sends_done = 0;
    for (int i = 0; i < PEERS; i++) {
        sends_status[i] = TMX_INPROGRESS;
        send_one(ep[i], big + (size_t)i * BIG, BIG, 2, i);
    }
    t0 = now();
    s  = tmx_worker_flush(w);
    dt = now() - t0;
    printf("worker_flush: %d silent peers, a rendezvous send to each: %s after %.2f s "
           "(TMX_PEER_TIMEOUT %.1f s)\n", PEERS, tmx_status_string(s), dt, tmo);
    EXPECT(s == TMX_ERR_TIMED_OUT, "flush with silent peers: %s", tmx_status_string(s));
    EXPECT(dt < 2.5 * tmo, "flush took %.2f s: one timeout per peer (%d of %.1f s)?", dt, PEERS,
           tmo);
    EXPECT(dt > 0.8 * tmo, "flush took %.2f s, less than the %.1f s timeout: not silent?", dt,
           tmo);
    EXPECT(sends_done == PEERS, "%d of %d sends completed", sends_done, PEERS);
    for (int i = 0; i < PEERS; i++) {
        EXPECT(sends_status[i] == TMX_ERR_TIMED_OUT, "send to peer %d: %s", i,
               tmx_status_string(sends_status[i]));
    }

    /* the endpoints stay open */
    sends_done = 0;
    v          = 0x5678;
    send_one(ep[0], &v, sizeof(v), 3, 0);
    got = 0;
    s   = recv_two(peer[0], w, &got, sizeof(got), 3);
    EXPECT(s == TMX_OK && got == v, "a message after the flush: %s, %llx",
           tmx_status_string(s), (unsigned long long)got);
    while (sends_done < 1) {
        tmx_worker_progress(w);
    }

    /* and the destroy disconnects every silent peer at once */
    t0 = now();
    CHECK(tmx_worker_destroy(w));
    dt = now() - t0;
    printf("worker_flush: destroy with %d silent peers: %.2f s\n", PEERS, dt);
    EXPECT(dt < 2.5 * tmo, "destroy took %.2f s: one timeout per peer (%d of %.1f s)?", dt,
           PEERS, tmo);
    EXPECT(tmx_worker_flush(w) == TMX_ERR_INVALID_HANDLE, "flush of a destroyed worker");
    for (int i = 0; i < PEERS; i++) {
        CHECK(tmx_worker_destroy(peer[i]));
    }
    CHECK(tmx_context_destroy(ctx));
    free(big);
    return 0;
}

/* The data test's messages: length and content by receiver and number. */
static size_t msg_len(int seq)
{
    static const size_t lens[] = {8, 1000, 40 << 10, (1 << 20) + 3, 0, 100};
    return lens[seq % 6];
}

static uint8_t msg_byte(int to, int seq, size_t j)
{
    return (uint8_t)(j * 7 + (size_t)seq * 13 + (size_t)to * 29 + (j >> 12));
}

static int data(void)
{
    tmx_job_h     job;
    tmx_context_h ctx;
    tmx_worker_h  w;
    tmx_ep_h      eps[PEERS];
    uint8_t      *out[PEERS][MSGS];
    tmx_status_t  s;
    int           size, n = 0;

    IT_START(job, ctx, w, eps, PEERS);
    size = tmx_job_size(job);
    if (rank == 0) {
        for (int to = 1; to < size; to++) {
            for (int seq = 0; seq < MSGS; seq++) {
                size_t len = msg_len(seq);

                out[to][seq] = malloc(len + 1);
                REQUIRE(out[to][seq] != NULL);
                for (size_t j = 0; j < len; j++) {
                    out[to][seq][j] = msg_byte(to, seq, j);
                }
                sends_status[n] = TMX_INPROGRESS;
                send_one(eps[to], out[to][seq], len, (tmx_tag_t)seq, n++);
            }
        }
        s = tmx_worker_flush(w); /* the receivers start a while later */
        EXPECT(s == TMX_OK, "flush: %s", tmx_status_string(s));
        EXPECT(sends_done == n, "%d of %d sends completed", sends_done, n);
        for (int i = 0; i < n; i++) {
            EXPECT(sends_status[i] == TMX_OK, "send %d: %s", i,
                   tmx_status_string(sends_status[i]));
        }
    } else {
        uint8_t *buf = malloc((1 << 20) + 4); /* the longest message and a byte */

        REQUIRE(buf != NULL);
        usleep(300 * 1000); /* rank 0 is in the flush by now, its sends waiting for us */
        for (int seq = 0; seq < MSGS; seq++) {
            size_t              want = msg_len(seq);
            tmx_tag_recv_info_t info;

            memset(&info, 0, sizeof(info));
            memset(buf, 0xee, want + 1);
            s = tmx_tag_recv(w, buf, want + 1, (tmx_tag_t)seq, ~(tmx_tag_t)0, &info);
            EXPECT(s == TMX_OK && info.length == want, "message %d: %s, %zu bytes of %zu", seq,
                   tmx_status_string(s), info.length, want);
            for (size_t j = 0; j < want; j++) {
                if (buf[j] != msg_byte(rank, seq, j)) {
                    EXPECT(0, "message %d: byte %zu is %u, not %u", seq, j, buf[j],
                           msg_byte(rank, seq, j));
                    break;
                }
            }
        }
        free(buf);
    }
    IT_FINISH(job, ctx, w, eps, PEERS);
    if (rank == 0) {
        for (int to = 1; to < size; to++) {
            for (int seq = 0; seq < MSGS; seq++) {
                free(out[to][seq]);
            }
        }
    }
    return 0;
}

int main(int argc, char **argv)
{
    const char *what = argc > 1 ? argv[1] : "";

    setvbuf(stdout, NULL, _IOLBF, 0);
    if (strcmp(what, "silent") == 0) {
        silent();
    } else if (strcmp(what, "data") == 0) {
        data();
    } else {
        fprintf(stderr, "usage: worker_flush silent|data\n");
        return 2;
    }
    if (bad == 0) {
        printf("worker_flush: %d checks ok\n", checks);
    }
    return bad == 0 ? 0 : 1;
}
