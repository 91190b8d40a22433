/*
 * cg_small: the instructions tmx spends per small message and per idle poll, counted under
 * valgrind --tool=callgrind (load-independent, unlike timing on a shared machine). One
 * process, one thread, two workers (or two libfabric endpoints) on the soft device; only the
 * measured loop is collected (callgrind's --collect-atstart=no and a client request).
 * bench/cg_small.sh builds and runs it and prints the counts per operation.
 *
 *   cg_small tmx-idle N    N tmx_worker_progress calls with nothing to do
 *   cg_small tmx-msg N     N ping-pong round trips of SIZE bytes through tmx_tag_send_nb /
 *                          tmx_tag_recv_nb (2N messages), progress until each completes
 *   cg_small fi-idle N     N fi_cq_read calls on an empty CQ (libtmx-fi.so, FI_PROVIDER_PATH)
 *   cg_small fi-msg N      N round trips through fi_trecv / fi_tsend / fi_cq_read (2N messages)
 *   cg_small tmx-win N     N windows of the bandwidth test (osu_bw, tmx_pingpong -t bw): worker 1
 *                          posts CG_WINDOW (64) receives, worker 0 sends as many, worker 1
 *                          takes them and answers with a 0-byte ack (N * CG_WINDOW messages)
 *   cg_small fi-win N      the same through fi_trecv / fi_tsend / fi_cq_read
 *                          (both window modes run 16 windows unmeasured first, after the
 *                          ping-pong warm-up: see main)
 *
 * SIZE is the environment's CG_SIZE (default 8). Prints the number of progress / cq_read calls
 * the measured loop made, so a count per message can be told apart from idle polls.
 */
#define _GNU_SOURCE
#include <tmx/tmx.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef CG_HAVE_CALLGRIND
#include <valgrind/callgrind.h>
#else
#define CALLGRIND_TOGGLE_COLLECT
#endif

#ifdef CG_HAVE_FI
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>
#endif

#define DIE(...)                                                                                  \
    do {                                                                                          \
        fprintf(stderr, "cg_small: " __VA_ARGS__);                                                \
        fprintf(stderr, "\n");                                                                    \
        exit(1);                                                                                  \
    } while (0)

static size_t        size = 8;
static unsigned      window = 64; /* CG_WINDOW */
static unsigned long polls;
static int           warm; /* warming up: progress both sides (connection setup needs it) */
/* progress the sender too while waiting for a receive: a rendezvous message (larger than the
 * default TMX_EAGER_MAX, 16 KiB) is read from the sender, and the soft device serves a read
 * below TMX_SOFT_CMA_MIN by the target's progress, so the receive waits for it; the count of
 * such a message then includes the sender's polls (its work) */
static int           both;
static unsigned char sbuf[65536], rbuf[65536];

/* ------------------------------------------------------------------ tmx */

static tmx_worker_h wk[2];
static tmx_ep_h     ep[2]; /* ep[i]: worker i to the other */

static void tmx_setup(void)
{
    tmx_context_h      ctx;
    tmx_worker_params_t wp = {0};
    void              *addr[2];
    size_t             alen[2];

    if (tmx_context_create(NULL, &ctx) != TMX_OK) {
        DIE("tmx_context_create");
    }
    for (int i = 0; i < 2; i++) {
        if (tmx_worker_create(ctx, &wp, &wk[i]) != TMX_OK ||
            tmx_worker_get_address(wk[i], &addr[i], &alen[i]) != TMX_OK) {
            DIE("worker %d", i);
        }
    }
    for (int i = 0; i < 2; i++) {
        tmx_ep_params_t p = {.field_mask     = TMX_EP_PARAM_ADDRESS,
                             .address        = addr[1 - i],
                             .address_length = alen[1 - i]};
        if (tmx_ep_create(wk[i], &p, &ep[i]) != TMX_OK) {
            DIE("ep %d", i);
        }
    }
}

/* one message from worker i to the other, received there */
static void tmx_one(int i, tmx_tag_t tag)
{
    tmx_request_h r, s = NULL;
    tmx_status_t  st;

    if (tmx_tag_recv_nb(wk[1 - i], rbuf, size, tag, ~(tmx_tag_t)0, NULL, &r) != TMX_INPROGRESS) {
        DIE("recv_nb");
    }
    st = tmx_tag_send_nb(ep[i], sbuf, size, tag, NULL, &s);
    if (st != TMX_OK && st != TMX_INPROGRESS) {
        DIE("send_nb: %s", tmx_status_string(st));
    }
    while ((st = tmx_request_test(r, NULL)) == TMX_INPROGRESS) {
        tmx_worker_progress(wk[1 - i]);
        if (warm || both) {
            tmx_worker_progress(wk[i]);
        }
        polls++;
    }
    if (st != TMX_OK) {
        DIE("recv: %s", tmx_status_string(st));
    }
    tmx_request_free(r);
    if (s != NULL) {
        while (tmx_request_test(s, NULL) == TMX_INPROGRESS) {
            tmx_worker_progress(wk[i]);
            polls++;
        }
        tmx_request_free(s);
    }
}

static void tmx_msg(long n, int measure)
{
    if (measure) {
        CALLGRIND_TOGGLE_COLLECT;
    }
    for (long k = 0; k < n; k++) {
        tmx_one(0, 7);
        tmx_one(1, 7);
    }
    if (measure) {
        CALLGRIND_TOGGLE_COLLECT;
    }
}

/* one window of the bandwidth test: worker 1 posts the receives, worker 0 sends, worker 1
 * completes them and acks */
static void tmx_win(long n, int measure)
{
    tmx_request_h rr[256], sr[256];

    if (measure) {
        CALLGRIND_TOGGLE_COLLECT;
    }
    for (long k = 0; k < n; k++) {
        tmx_request_h ack;

        for (unsigned w = 0; w < window; w++) {
            if (tmx_tag_recv_nb(wk[1], rbuf, size, 9, ~(tmx_tag_t)0, NULL, &rr[w]) !=
                TMX_INPROGRESS) {
                DIE("recv_nb");
            }
        }
        if (tmx_tag_recv_nb(wk[0], rbuf, 0, 10, ~(tmx_tag_t)0, NULL, &ack) != TMX_INPROGRESS) {
            DIE("recv_nb");
        }
        for (unsigned w = 0; w < window; w++) {
            tmx_status_t st;

            sr[w] = NULL;
            while ((st = tmx_tag_send_nb(ep[0], sbuf, size, 9, NULL, &sr[w])) ==
                   TMX_ERR_NO_RESOURCE) {
                tmx_worker_progress(wk[0]);
                tmx_worker_progress(wk[1]); /* the receiver, on its own core in a real run */
                polls++;
            }
            if (st != TMX_OK && st != TMX_INPROGRESS) {
                DIE("send_nb: %s", tmx_status_string(st));
            }
            if (st == TMX_OK) {
                sr[w] = NULL;
            }
            if (w % 8 == 7) {
                /* the receiver polls meanwhile, on its own core in a real run: without it
                 * the ring (TMX_RING_SLOTS 32) fills and half the window takes the queue */
                tmx_worker_progress(wk[1]);
            }
        }
        for (unsigned w = 0; w < window; w++) {
            while (tmx_request_test(rr[w], NULL) == TMX_INPROGRESS) {
                /* a message the device has not moved yet may wait for its sender's
                 * progress (the soft device moves data inside calls) */
                if (tmx_worker_progress(wk[1]) == 0) {
                    tmx_worker_progress(wk[0]);
                }
                polls++;
            }
            tmx_request_free(rr[w]);
        }
        for (unsigned w = 0; w < window; w++) {
            if (sr[w] != NULL) {
                while (tmx_request_test(sr[w], NULL) == TMX_INPROGRESS) {
                    if (tmx_worker_progress(wk[0]) == 0) {
                        tmx_worker_progress(wk[1]);
                    }
                    polls++;
                }
                tmx_request_free(sr[w]);
            }
        }
        {
            tmx_request_h s = NULL;
            tmx_status_t  st = tmx_tag_send_nb(ep[1], sbuf, 0, 10, NULL, &s);

            if (st != TMX_OK && st != TMX_INPROGRESS) {
                DIE("ack send_nb: %s", tmx_status_string(st));
            }
            while (tmx_request_test(ack, NULL) == TMX_INPROGRESS) {
                if (tmx_worker_progress(wk[0]) == 0) {
                    tmx_worker_progress(wk[1]);
                }
                polls++;
            }
            tmx_request_free(ack);
            if (s != NULL) {
                while (tmx_request_test(s, NULL) == TMX_INPROGRESS) {
                    if (tmx_worker_progress(wk[1]) == 0) {
                        tmx_worker_progress(wk[0]);
                    }
                    polls++;
                }
                tmx_request_free(s);
            }
        }
    }
    if (measure) {
        CALLGRIND_TOGGLE_COLLECT;
    }
}

static void tmx_idle(long n)
{
    CALLGRIND_TOGGLE_COLLECT;
    for (long k = 0; k < n; k++) {
        tmx_worker_progress(wk[0]);
    }
    CALLGRIND_TOGGLE_COLLECT;
    polls = (unsigned long)n;
}

/* ------------------------------------------------------------------ libfabric */

#ifdef CG_HAVE_FI
static struct fid_ep *fep[2];
static struct fid_cq *fcq[2];
static fi_addr_t      fpeer[2]; /* fpeer[i]: the other endpoint in endpoint i's AV */

static void cg_fi_setup(void)
{
    struct fi_info    *hints = fi_allocinfo(), *info;
    struct fid_fabric *fab;
    struct fid_domain *dom;
    char               name[2][FI_NAME_MAX];

    hints->ep_attr->type          = FI_EP_RDM;
    hints->caps                   = FI_TAGGED;
    hints->mode                   = FI_CONTEXT;
    hints->fabric_attr->prov_name = strdup("tmx");
    hints->domain_attr->threading = FI_THREAD_DOMAIN; /* what Open MPI's mtl ofi asks */
    if (fi_getinfo(FI_VERSION(1, 11), NULL, NULL, 0, hints, &info) != 0 ||
        strcmp(info->fabric_attr->prov_name, "tmx") != 0) {
        DIE("fi_getinfo: no provider tmx (FI_PROVIDER_PATH?)");
    }
    if (fi_fabric(info->fabric_attr, &fab, NULL) || fi_domain(fab, info, &dom, NULL)) {
        DIE("fabric/domain");
    }
    for (int i = 0; i < 2; i++) {
        struct fi_cq_attr ca = {.format = FI_CQ_FORMAT_TAGGED, .size = 128};
        struct fi_av_attr aa = {.type = FI_AV_MAP};
        struct fid_av    *av;
        size_t            len = FI_NAME_MAX;

        if (fi_endpoint(dom, info, &fep[i], NULL) || fi_cq_open(dom, &ca, &fcq[i], NULL) ||
            fi_av_open(dom, &aa, &av, NULL) ||
            fi_ep_bind(fep[i], &fcq[i]->fid, FI_TRANSMIT | FI_RECV) ||
            fi_ep_bind(fep[i], &av->fid, 0) || fi_enable(fep[i]) ||
            fi_getname(&fep[i]->fid, name[i], &len)) {
            DIE("endpoint %d", i);
        }
        /* the AV is filled below, once both names exist */
        fpeer[i] = (fi_addr_t)(uintptr_t)av; /* parked */
    }
    for (int i = 0; i < 2; i++) {
        struct fid_av *av = (struct fid_av *)(uintptr_t)fpeer[i];
        if (fi_av_insert(av, name[1 - i], 1, &fpeer[i], 0, NULL) != 1) {
            DIE("av_insert");
        }
    }
    fi_freeinfo(hints);
}

static void cg_fi_wait(int i, struct fi_context *ctx)
{
    struct fi_cq_tagged_entry e;
    ssize_t                   n;

    for (;;) {
        n = fi_cq_read(fcq[i], &e, 1);
        polls++;
        if (n == 1) {
            if (e.op_context != ctx) {
                DIE("unexpected completion");
            }
            return;
        }
        if (n != -FI_EAGAIN) {
            DIE("fi_cq_read: %zd", n);
        }
        if (warm || both) {
            fi_cq_read(fcq[1 - i], NULL, 0);
        }
    }
}

static void cg_fi_one(int i)
{
    struct fi_context rc, sc;

    while (fi_trecv(fep[1 - i], rbuf, size, NULL, FI_ADDR_UNSPEC, 7, 0, &rc) == -FI_EAGAIN) {
        fi_cq_read(fcq[1 - i], NULL, 0);
    }
    while (fi_tsend(fep[i], sbuf, size, NULL, fpeer[i], 7, &sc) == -FI_EAGAIN) {
        fi_cq_read(fcq[i], NULL, 0);
    }
    cg_fi_wait(1 - i, &rc);
    cg_fi_wait(i, &sc);
}

static void cg_fi_msg(long n, int measure)
{
    if (measure) {
        CALLGRIND_TOGGLE_COLLECT;
    }
    for (long k = 0; k < n; k++) {
        cg_fi_one(0);
        cg_fi_one(1);
    }
    if (measure) {
        CALLGRIND_TOGGLE_COLLECT;
    }
}

static void cg_fi_win(long n, int measure)
{
    static struct fi_context rc[256], sc[256];
    struct fi_context        ac, kc;

    if (measure) {
        CALLGRIND_TOGGLE_COLLECT;
    }
    for (long k = 0; k < n; k++) {
        unsigned rgot, sgot;

        for (unsigned w = 0; w < window; w++) {
            while (fi_trecv(fep[1], rbuf, size, NULL, FI_ADDR_UNSPEC, 9, 0, &rc[w]) ==
                   -FI_EAGAIN) {
                fi_cq_read(fcq[1], NULL, 0);
            }
        }
        while (fi_trecv(fep[0], rbuf, 0, NULL, FI_ADDR_UNSPEC, 10, 0, &ac) == -FI_EAGAIN) {
            fi_cq_read(fcq[0], NULL, 0);
        }
        rgot = 0;
        for (unsigned w = 0; w < window; w++) {
            while (fi_tsend(fep[0], sbuf, size, NULL, fpeer[0], 9, &sc[w]) == -FI_EAGAIN) {
                fi_cq_read(fcq[0], NULL, 0);
                fi_cq_read(fcq[1], NULL, 0);
                polls++;
            }
            if (w % 8 == 7) {
                /* the receiver polls meanwhile (tmx_win): a CQ holding entries is not
                 * progressed, so it takes them */
                struct fi_cq_tagged_entry e[16];
                ssize_t                   r = fi_cq_read(fcq[1], e, 16);

                if (r > 0) {
                    rgot += (unsigned)r;
                } else if (r != -FI_EAGAIN) {
                    DIE("fi_cq_read: %zd", r);
                }
            }
        }
        /* the receiver: its window's completions, read 16 at a time (and, when it has none,
         * the sender's, whose reads progress the sender: the soft device moves data inside
         * calls, and a CQ holding entries is not progressed) */
        for (sgot = 0; rgot < window;) {
            struct fi_cq_tagged_entry e[16];
            ssize_t                   r = fi_cq_read(fcq[1], e, 16);

            polls++;
            if (r > 0) {
                rgot += (unsigned)r;
            } else if (r != -FI_EAGAIN) {
                DIE("fi_cq_read: %zd", r);
            } else if ((r = fi_cq_read(fcq[0], e, 16)) > 0) {
                sgot += (unsigned)r;
            } else if (r != -FI_EAGAIN) {
                DIE("fi_cq_read: %zd", r);
            }
        }
        while (fi_tsend(fep[1], sbuf, 0, NULL, fpeer[1], 10, &kc) == -FI_EAGAIN) {
            fi_cq_read(fcq[1], NULL, 0);
        }
        /* the sender: its sends' completions, and the ack */
        while (sgot < window + 1) {
            struct fi_cq_tagged_entry e[16];
            ssize_t                   r = fi_cq_read(fcq[0], e, 16);

            polls++;
            if (r > 0) {
                sgot += (unsigned)r;
            } else if (r != -FI_EAGAIN) {
                DIE("fi_cq_read: %zd", r);
            } else {
                fi_cq_read(fcq[1], NULL, 0);
            }
        }
        cg_fi_wait(1, &kc);
    }
    if (measure) {
        CALLGRIND_TOGGLE_COLLECT;
    }
}

static void cg_fi_idle(long n)
{
    struct fi_cq_tagged_entry e;

    CALLGRIND_TOGGLE_COLLECT;
    for (long k = 0; k < n; k++) {
        if (fi_cq_read(fcq[0], &e, 1) != -FI_EAGAIN) {
            DIE("idle cq_read found something");
        }
    }
    CALLGRIND_TOGGLE_COLLECT;
    polls = (unsigned long)n;
}
#endif

int main(int argc, char **argv)
{
    const char *mode;
    long        n;

    if (argc != 3) {
        fprintf(stderr, "usage: cg_small tmx-idle|tmx-msg|tmx-win|fi-idle|fi-msg|fi-win N\n");
        return 2;
    }
    mode = argv[1];
    n    = atol(argv[2]);
    alarm(600); /* a loop that never completes (a connection that never came up) ends */
    if (getenv("CG_WINDOW") != NULL) {
        window = (unsigned)atol(getenv("CG_WINDOW"));
        if (window == 0 || window > 256) {
            DIE("CG_WINDOW must be 1..256");
        }
    }
    if (getenv("CG_SIZE") != NULL) {
        size = (size_t)atol(getenv("CG_SIZE"));
        if (size > sizeof(sbuf)) {
            DIE("CG_SIZE too large");
        }
    }
    both = size > 16384;
    memset(sbuf, 0x5a, sizeof(sbuf));
    if (strncmp(mode, "tmx-", 4) == 0) {
        tmx_setup();
        warm = 1;
        tmx_msg(2000, 0); /* connect, rings up, pools warm */
        warm  = 0;
        polls = 0;
        if (strcmp(mode, "tmx-idle") == 0) {
            tmx_idle(n);
        } else if (strcmp(mode, "tmx-win") == 0) {
            /* 16 windows first: their queue sends (2 KiB: all but a span after the ack)
             * earn the soft device's fast ring, which the ping-pong above, by the
             * eager-RDMA ring, did not; its grant and the prefault of its 2 MiB (about
             * 330,000 instructions) otherwise land in the measured loop (with 4 windows
             * first, one switch still did) */
            tmx_win(16, 0);
            polls = 0;
            tmx_win(n, 1);
        } else {
            tmx_msg(n, 1);
        }
#ifdef CG_HAVE_FI
    } else if (strncmp(mode, "fi-", 3) == 0) {
        cg_fi_setup();
        warm = 1;
        cg_fi_msg(2000, 0);
        warm  = 0;
        polls = 0;
        if (strcmp(mode, "fi-idle") == 0) {
            cg_fi_idle(n);
        } else if (strcmp(mode, "fi-win") == 0) {
            cg_fi_win(16, 0); /* as tmx-win */
            polls = 0;
            cg_fi_win(n, 1);
        } else {
            cg_fi_msg(n, 1);
        }
#endif
    } else {
        DIE("unknown mode %s", mode);
    }
    printf("mode %s n %ld size %zu polls %lu\n", mode, n, size, polls);
    if (strncmp(mode, "tmx-", 4) == 0) {
        /* where the messages went (counts include the warm-up) */
        for (int i = 0; i < 2; i++) {
            tmx_worker_attr_t a;

            memset(&a, 0, sizeof(a));
            a.field_mask = TMX_WORKER_ATTR_RING;
            if (tmx_worker_query(wk[i], &a) == TMX_OK) {
                printf("worker %d ring sent %llu received %llu full %llu asleep %llu\n", i,
                       (unsigned long long)a.ring.sent, (unsigned long long)a.ring.received,
                       (unsigned long long)a.ring.full, (unsigned long long)a.ring.asleep);
            }
        }
    }
    return 0;
}
