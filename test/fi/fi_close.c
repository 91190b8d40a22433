/* fi_close of an endpoint with several peers, through libfabric's API only (fi_close.sh runs
 * it with FI_PROVIDER_PATH set).
 *
 *   fi_close silent   one process: an endpoint A connected to PEERS endpoints of the same
 *                     process, which are alive but never progressed while A closes (their CQs
 *                     are not read: peers busy elsewhere). A's close waits for them once, not
 *                     once per peer: with nothing in flight it takes about one TMX_PEER_TIMEOUT
 *                     (the disconnect), with a rendezvous send to each still in flight about
 *                     two (the flush, then the disconnect); a close of each peer's connection
 *                     after the other took PEERS and 2 x PEERS timeouts. Run with a small
 *                     TMX_PEER_TIMEOUT (fi_close.sh: 1 s); the bounds are 2.5 and 3 timeouts,
 *                     and each close must also have waited at least most of one (else the peers
 *                     were not silent and nothing was tested).
 *   fi_close data     KIDS forked processes that do progress, but start only after the parent
 *                     posted all its sends to them and went into fi_close: every message sent
 *                     before the close (injected, eager, rendezvous; more eager ones than the
 *                     flow-control credits let go at once) arrives, each byte checked by the
 *                     child, which exits 0 only then.
 */
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"

enum {
    PEERS = 4,         /* silent peers of one endpoint */
    BIG   = 2 << 20,   /* above any eager limit of tmx (at most 1 MiB): a rendezvous send */
    KIDS  = 3,         /* progressing peers (processes) */
    MSGS  = 48,        /* messages to each */
};

/* TMX_PEER_TIMEOUT as tmx reads it (tmx_config(7): default 10 s) */
static double peer_timeout(void)
{
    const char *v = getenv("TMX_PEER_TIMEOUT");
    return v != NULL && atof(v) > 0 ? atof(v) : 10.0;
}

typedef struct {
    struct fi_info    *info;
    struct fid_fabric *fabric;
    struct fid_domain *domain;
    struct fid_av     *av;
} objs_t;

static void open_objs(objs_t *o)
{
    struct fi_info   *hints = fi_allocinfo();
    struct fi_av_attr ava   = {.type = FI_AV_TABLE};

    hints->caps                   = FI_TAGGED;
    hints->ep_attr->type          = FI_EP_RDM;
    hints->fabric_attr->prov_name = strdup("tmx");
    DIE_IF(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &o->info) != 0,
           "fi_getinfo found no tmx provider (FI_PROVIDER_PATH?)");
    fi_freeinfo(hints);
    DIE_IF(strcmp(o->info->fabric_attr->prov_name, "tmx") != 0, "provider %s, not tmx",
           o->info->fabric_attr->prov_name);
    DIE_IF(fi_fabric(o->info->fabric_attr, &o->fabric, NULL) != 0, "fi_fabric");
    DIE_IF(fi_domain(o->fabric, o->info, &o->domain, NULL) != 0, "fi_domain");
    DIE_IF(fi_av_open(o->domain, &ava, &o->av, NULL) != 0, "fi_av_open");
}

static void close_objs(objs_t *o)
{
    CHECK(fi_close(&o->av->fid) == 0, "close av");
    CHECK(fi_close(&o->domain->fid) == 0, "close domain");
    CHECK(fi_close(&o->fabric->fid) == 0, "close fabric");
    fi_freeinfo(o->info);
}

/* An enabled endpoint of o with a CQ of its own (*cq_p): reading that CQ is what progresses
 * it, and nothing else does. */
static struct fid_ep *open_ep(objs_t *o, struct fid_cq **cq_p)
{
    struct fi_cq_attr cqa = {.format = FI_CQ_FORMAT_TAGGED};
    struct fid_ep    *ep;

    DIE_IF(fi_cq_open(o->domain, &cqa, cq_p, NULL) != 0, "fi_cq_open");
    DIE_IF(fi_endpoint(o->domain, o->info, &ep, NULL) != 0, "fi_endpoint");
    DIE_IF(fi_ep_bind(ep, &(*cq_p)->fid, FI_TRANSMIT | FI_RECV) != 0, "bind cq");
    DIE_IF(fi_ep_bind(ep, &o->av->fid, 0) != 0, "bind av");
    DIE_IF(fi_enable(ep) != 0, "fi_enable");
    return ep;
}

/* Reads cq until the completion of ctx (1, its length in *len_p unless NULL), an error entry
 * of it (0) or secs passed (0). */
static int wait_ctx(struct fid_cq *cq, void *ctx, double secs, size_t *len_p)
{
    double t0 = now();

    while (now() - t0 < secs) {
        struct fi_cq_tagged_entry e;
        struct fi_cq_err_entry    err;
        ssize_t                   n = fi_cq_read(cq, &e, 1);

        if (n == 1 && e.op_context == ctx) {
            if (len_p != NULL) {
                *len_p = e.len;
            }
            return 1;
        }
        if (n == -FI_EAVAIL) {
            memset(&err, 0, sizeof(err));
            DIE_IF(fi_cq_readerr(cq, &err, 0) != 1, "fi_cq_readerr");
            if (err.op_context == ctx) {
                printf("error entry %d (%s)\n", err.err, fi_strerror(err.err));
                return 0;
            }
        }
    }
    return 0;
}

/* A of one process closed while its PEERS peers stay silent; with_sends: a rendezvous send to
 * each is still in flight then (none of them posted a receive). */
static void test_silent(int with_sends)
{
    objs_t         o;
    struct fid_ep *a, *b[PEERS];
    struct fid_cq *acq, *bcq[PEERS];
    fi_addr_t      addr[PEERS];
    char           small[8] = {1, 2, 3, 4, 5, 6, 7, 8}, in[8];
    char          *big      = with_sends ? calloc(PEERS, BIG) : NULL;
    int            sctx[PEERS], rctx[PEERS], bctx[PEERS];
    double         t0, dt, tmo = peer_timeout(), bound = (with_sends ? 3.0 : 2.5) * tmo;

    DIE_IF(with_sends && big == NULL, "no memory");
    open_objs(&o);
    a = open_ep(&o, &acq);
    for (int i = 0; i < PEERS; i++) {
        char   name[FI_NAME_MAX];
        size_t len = sizeof(name);

        b[i] = open_ep(&o, &bcq[i]);
        DIE_IF(fi_getname(&b[i]->fid, name, &len) != 0, "fi_getname");
        DIE_IF(fi_av_insert(o.av, name, 1, &addr[i], 0, NULL) != 1, "fi_av_insert");
    }
    /* every connection up: a message to each peer, taken there, its send completed */
    for (int i = 0; i < PEERS; i++) {
        double t1 = now();
        int    got = 0, sent = 0;

        CHECK(fi_trecv(b[i], in, sizeof(in), NULL, FI_ADDR_UNSPEC, 0x1, 0, &rctx[i]) == 0,
              "trecv of peer %d", i);
        CHECK(fi_tsend(a, small, sizeof(small), NULL, addr[i], 0x1, &sctx[i]) == 0,
              "tsend to peer %d", i);
        while ((!got || !sent) && now() - t1 < 20) {
            got  = got || wait_ctx(bcq[i], &rctx[i], 0.001, NULL);
            sent = sent || wait_ctx(acq, &sctx[i], 0.001, NULL);
        }
        DIE_IF(!got || !sent, "peer %d: message %s, send %s", i, got ? "taken" : "not taken",
               sent ? "completed" : "not completed");
    }
    if (with_sends) {
        for (int i = 0; i < PEERS; i++) {
            CHECK(fi_tsend(a, big + (size_t)i * BIG, BIG, NULL, addr[i], 0x2, &bctx[i]) == 0,
                  "rendezvous tsend to peer %d", i);
        }
    }
    t0 = now();
    CHECK(fi_close(&a->fid) == 0, "close A");
    dt = now() - t0;
    printf("close of an endpoint with %d silent peers%s: %.2f s (TMX_PEER_TIMEOUT %.1f s; "
           "bound %.1f s)\n", PEERS, with_sends ? " and a rendezvous send to each" : "", dt, tmo,
           bound);
    CHECK(dt < bound,
          "close took %.2f s: more than %.1f s, one timeout per peer (%d peers, %.1f s each)?",
          dt, bound, PEERS, tmo);
    CHECK(dt > 0.8 * tmo,
          "close took %.2f s, not the %.1f s a silent peer costs: were the peers silent?", dt,
          tmo);
    /* the peers wake up and close (A's disconnect waits in their queues) */
    for (int i = 0; i < PEERS; i++) {
        CHECK(fi_close(&b[i]->fid) == 0, "close peer %d", i);
        CHECK(fi_close(&bcq[i]->fid) == 0, "close cq of peer %d", i);
    }
    CHECK(fi_close(&acq->fid) == 0, "close cq of A");
    close_objs(&o);
    free(big);
}

/* The messages of the data test: size and content by child and number. */
static size_t msg_len(int seq)
{
    static const size_t lens[] = {8, 1000, 40 << 10, (1 << 20) + 3, 0, 100};
    return lens[seq % 6];
}

static uint8_t msg_byte(int kid, int seq, size_t j)
{
    return (uint8_t)(j * 7 + (size_t)seq * 13 + (size_t)kid * 29 + (j >> 12));
}

static int to_kid[KIDS][2], from_kid[KIDS][2];
static pid_t kid_pid[KIDS];

/* A child: its name to the parent, then, once told, (after a while: the parent is in
 * fi_close by then) every message received and checked in order; then it progresses until
 * the parent says its close returned, and closes. Exit 0 only when every message was right. */
static void kid_main(int kid)
{
    objs_t         o;
    struct fid_ep *ep;
    struct fid_cq *cq;
    char           name[FI_NAME_MAX], c;
    size_t         len = sizeof(name);
    uint8_t       *buf = malloc((1 << 20) + 4); /* the longest message and a byte */
    int            ctx, bad = 0;

    DIE_IF(buf == NULL, "no memory");
    /* the parent's ends (of the earlier children's pipes too, which it still held at our
     * fork): only it holds them, so that if it dies our reads see end of file */
    for (int k = 0; k <= kid; k++) {
        close(to_kid[k][1]);
        close(from_kid[k][0]);
    }
    open_objs(&o);
    ep = open_ep(&o, &cq);
    DIE_IF(fi_getname(&ep->fid, name, &len) != 0, "fi_getname");
    DIE_IF(write(from_kid[kid][1], name, sizeof(name)) != (ssize_t)sizeof(name), "write name");
    DIE_IF(read(to_kid[kid][0], &c, 1) != 1, "the parent is gone");
    usleep(300 * 1000); /* the parent is in fi_close now, its sends waiting for us */
    for (int seq = 0; seq < MSGS && !bad; seq++) {
        size_t want = msg_len(seq), got = 0;

        memset(buf, 0xee, want + 1);
        DIE_IF(fi_trecv(ep, buf, want + 1, NULL, FI_ADDR_UNSPEC, (uint64_t)seq, 0, &ctx) != 0,
               "trecv");
        if (!wait_ctx(cq, &ctx, 60, &got)) {
            printf("FAIL child %d: message %d (%zu bytes) never came\n", kid, seq, want);
            bad = 1;
            break;
        }
        if (got != want) {
            printf("FAIL child %d: message %d has %zu bytes, not %zu\n", kid, seq, got, want);
            bad = 1;
            break;
        }
        for (size_t j = 0; j < want; j++) {
            if (buf[j] != msg_byte(kid, seq, j)) {
                printf("FAIL child %d: message %d byte %zu is %u, not %u\n", kid, seq, j, buf[j],
                       msg_byte(kid, seq, j));
                bad = 1;
                break;
            }
        }
    }
    /* the parent's close disconnects from us: answer until it returned */
    for (;;) {
        struct pollfd p = {.fd = to_kid[kid][0], .events = POLLIN};
        struct fi_cq_tagged_entry e;

        (void)fi_cq_read(cq, &e, 1);
        if (poll(&p, 1, 0) == 1) {
            break; /* told, or the parent is gone */
        }
    }
    CHECK(fi_close(&ep->fid) == 0, "close");
    CHECK(fi_close(&cq->fid) == 0, "close cq");
    close_objs(&o);
    free(buf);
    _exit(bad || fails ? 1 : 0);
}

static void test_data(void)
{
    objs_t         o;
    struct fid_ep *a;
    struct fid_cq *acq;
    fi_addr_t      addr[KIDS];
    uint8_t       *out[KIDS][MSGS];
    int            ctx[KIDS][MSGS];
    double         t0;
    char           c = 'g';

    open_objs(&o);
    a = open_ep(&o, &acq);
    for (int k = 0; k < KIDS; k++) {
        char name[FI_NAME_MAX];

        DIE_IF(read(from_kid[k][0], name, sizeof(name)) != (ssize_t)sizeof(name),
               "name of child %d", k);
        DIE_IF(fi_av_insert(o.av, name, 1, &addr[k], 0, NULL) != 1, "fi_av_insert");
    }
    for (int k = 0; k < KIDS; k++) {
        for (int seq = 0; seq < MSGS; seq++) {
            size_t  len = msg_len(seq);
            ssize_t r;

            out[k][seq] = malloc(len + 1);
            DIE_IF(out[k][seq] == NULL, "no memory");
            for (size_t j = 0; j < len; j++) {
                out[k][seq][j] = msg_byte(k, seq, j);
            }
            do {
                r = seq % 2 == 0 && len <= 64
                        ? fi_tinject(a, out[k][seq], len, addr[k], (uint64_t)seq)
                        : fi_tsend(a, out[k][seq], len, NULL, addr[k], (uint64_t)seq,
                                   &ctx[k][seq]);
                if (r == -FI_EAGAIN) {
                    struct fi_cq_tagged_entry e;
                    (void)fi_cq_read(acq, &e, 1);
                }
            } while (r == -FI_EAGAIN);
            CHECK(r == 0, "send %d to child %d: %zd (%s)", seq, k, r, fi_strerror((int)-r));
        }
    }
    for (int k = 0; k < KIDS; k++) {
        DIE_IF(write(to_kid[k][1], &c, 1) != 1, "go to child %d", k);
    }
    t0 = now();
    CHECK(fi_close(&a->fid) == 0, "close A");
    printf("close of an endpoint with %d peers that progress, %d messages to each in flight: "
           "%.2f s\n", KIDS, MSGS, now() - t0);
    for (int k = 0; k < KIDS; k++) {
        int st = -1;

        DIE_IF(write(to_kid[k][1], &c, 1) != 1, "done to child %d", k);
        DIE_IF(waitpid(kid_pid[k], &st, 0) != kid_pid[k], "waitpid");
        CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0,
              "child %d did not receive every message sent before the close (status %#x)", k,
              st);
    }
    CHECK(fi_close(&acq->fid) == 0, "close cq of A");
    close_objs(&o);
    for (int k = 0; k < KIDS; k++) {
        for (int seq = 0; seq < MSGS; seq++) {
            free(out[k][seq]);
        }
    }
}

int main(int argc, char **argv)
{
    const char *what = argc > 1 ? argv[1] : "";

    setvbuf(stdout, NULL, _IOLBF, 0);
    if (strcmp(what, "silent") == 0) {
        test_silent(0);
        test_silent(1);
    } else if (strcmp(what, "data") == 0) {
        /* the children fork from a process that used nothing yet */
        for (int k = 0; k < KIDS; k++) {
            DIE_IF(pipe(to_kid[k]) != 0 || pipe(from_kid[k]) != 0, "pipe");
            kid_pid[k] = fork();
            DIE_IF(kid_pid[k] < 0, "fork");
            if (kid_pid[k] == 0) {
                kid_main(k);
            }
            close(to_kid[k][0]);
            close(from_kid[k][1]);
        }
        test_data();
    } else {
        fprintf(stderr, "usage: fi_close silent|data\n");
        return 2;
    }
    printf("%s\n", fails ? "FAIL" : "PASS");
    return fails ? 1 : 0;
}
