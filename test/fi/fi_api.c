/* libtmx-fi.so through libfabric's own API, between two processes (a fork): tagged
 * send/receive at eager and rendezvous sizes, wildcards through `ignore`, order, FI_MSG,
 * vectors, peek/claim/discard, cancel, truncation, inject, CQ error entries, counters, and bad
 * use answered with libfabric's error codes. fi_api.sh runs it with FI_PROVIDER_PATH set;
 * fi_getinfo must return the tmx provider itself (no silent fallback to another one). */
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int                rank, ctl;
static struct fi_info    *info;
static struct fid_fabric *fabric;
static struct fid_domain *domain;
static struct fid_av     *av;
static struct fid_cq     *cq;
static struct fid_cntr   *txc, *rxc;
static struct fid_ep     *ep;
static struct fid_ep     *ep2;   /* rank 0's second endpoint: another source for rank 1 */
static fi_addr_t          peer;
static fi_addr_t          peer2; /* rank 1: rank 0's ep2 */
static struct fi_cq_err_entry last_err;

#define CHECK_WHO() printf("rank %d ", rank)
#define CHECK_EXIT exit
#include "check.h"

static void ctl_send(int v)
{
    char c = (char)v;
    DIE_IF(write(ctl, &c, 1) != 1, "control write");
}

static int ctl_recv(void)
{
    char c;
    DIE_IF(read(ctl, &c, 1) != 1, "control read (peer gone)");
    return c;
}

static void sync_peers(void)
{
    ctl_send('s');
    DIE_IF(ctl_recv() != 's', "out of step");
}

/* One completion: 1 (entry in *e), -FI_EAVAIL (error in last_err), 0 on timeout. */
static int get_comp(struct fi_cq_tagged_entry *e, double secs)
{
    double t0 = now();
    for (;;) {
        ssize_t n = fi_cq_read(cq, e, 1);
        if (n == 1) {
            return 1;
        }
        if (n == -FI_EAVAIL) {
            memset(&last_err, 0, sizeof(last_err));
            DIE_IF(fi_cq_readerr(cq, &last_err, 0) != 1, "readerr");
            return -FI_EAVAIL;
        }
        DIE_IF(n != -FI_EAGAIN, "fi_cq_read: %s", fi_strerror((int)-n));
        if (now() - t0 > secs) {
            return 0;
        }
    }
}

static void expect_comp(void *ctx, uint64_t flags, size_t len, uint64_t tag, int check_tag,
                        const char *what)
{
    struct fi_cq_tagged_entry e;
    int                       r = get_comp(&e, 20);
    CHECK(r == 1, "%s: no completion (%d, err %d %s)", what, r, last_err.err,
          fi_strerror(last_err.err));
    if (r != 1) {
        return;
    }
    CHECK(e.op_context == ctx, "%s: context %p, expected %p", what, e.op_context, ctx);
    CHECK((e.flags & flags) == flags, "%s: flags %#llx lack %#llx", what,
          (unsigned long long)e.flags, (unsigned long long)flags);
    if (flags & FI_RECV) {
        CHECK(e.len == len, "%s: len %zu, expected %zu", what, e.len, len);
    }
    if (check_tag) {
        CHECK(e.tag == tag, "%s: tag %#llx, expected %#llx", what, (unsigned long long)e.tag,
              (unsigned long long)tag);
    }
}

static void expect_err(void *ctx, int err, const char *what)
{
    struct fi_cq_tagged_entry e;
    int                       r = get_comp(&e, 20);
    CHECK(r == -FI_EAVAIL, "%s: expected an error entry, got %d", what, r);
    if (r == -FI_EAVAIL) {
        CHECK(last_err.err == err, "%s: err %d (%s), expected %d (%s)", what, last_err.err,
              fi_strerror(last_err.err), err, fi_strerror(err));
        CHECK(last_err.op_context == ctx, "%s: error context %p, expected %p", what,
              last_err.op_context, ctx);
        char        buf[128];
        const char *s = fi_cq_strerror(cq, last_err.prov_errno, last_err.err_data, buf,
                                       sizeof(buf));
        CHECK(s != NULL && s[0] != '\0', "%s: fi_cq_strerror gave nothing", what);
    }
}

static void expect_nothing(const char *what)
{
    struct fi_cq_tagged_entry e;
    int                       r = get_comp(&e, 0.05);
    CHECK(r == 0, "%s: unexpected completion (%d, context %p)", what, r,
          r == 1 ? e.op_context : last_err.op_context);
}

static void fill(char *buf, size_t len, int seed)
{
    for (size_t i = 0; i < len; i++) {
        buf[i] = (char)(i * 7 + (size_t)seed);
    }
}

static int check_fill(const char *buf, size_t len, int seed)
{
    for (size_t i = 0; i < len; i++) {
        if (buf[i] != (char)(i * 7 + (size_t)seed)) {
            return 0;
        }
    }
    return 1;
}

static void send_wait_on(struct fid_ep *e, const void *buf, size_t len, uint64_t tag, void *ctx)
{
    ssize_t r;
    while ((r = fi_tsend(e, buf, len, NULL, peer, tag, ctx)) == -FI_EAGAIN) {
        struct fi_cq_tagged_entry e;
        (void)fi_cq_read(cq, &e, 0);
    }
    CHECK(r == 0, "fi_tsend %zu: %s", len, fi_strerror((int)-r));
    expect_comp(ctx, FI_SEND | FI_TAGGED, 0, 0, 0, "send completion");
}

static void send_wait(const void *buf, size_t len, uint64_t tag, void *ctx)
{
    send_wait_on(ep, buf, len, tag, ctx);
}

static void setup(void)
{
    struct fi_info   *hints = fi_allocinfo();
    struct fi_cq_attr cqa;
    struct fi_av_attr ava;
    struct fi_cntr_attr cna;
    char              name[FI_NAME_MAX], pname[FI_NAME_MAX];
    size_t            len;

    hints->caps                 = FI_TAGGED | FI_MSG | FI_DIRECTED_RECV;
    hints->ep_attr->type        = FI_EP_RDM;
    hints->mode                 = FI_CONTEXT;
    hints->fabric_attr->prov_name = strdup("tmx");
    DIE_IF(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &info) != 0,
           "fi_getinfo found no tmx provider (FI_PROVIDER_PATH?)");
    DIE_IF(strcmp(info->fabric_attr->prov_name, "tmx") != 0, "provider %s, not tmx",
           info->fabric_attr->prov_name);
    CHECK(info->ep_attr->mem_tag_format == ~(1ULL << 63), "mem_tag_format %#llx",
          (unsigned long long)info->ep_attr->mem_tag_format);
    fi_freeinfo(hints);

    /* what the provider does not offer is not promised */
    {
        struct fi_info *h = fi_allocinfo(), *i = NULL;
        h->caps                      = FI_TAGGED | FI_SOURCE;
        h->fabric_attr->prov_name    = strdup("tmx");
        CHECK(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, h, &i) == -FI_ENODATA,
              "FI_SOURCE offered");
        h->caps = FI_TAGGED | FI_DIRECTED_RECV;
        CHECK(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, h, &i) == 0 && i != NULL &&
                  (i->caps & FI_DIRECTED_RECV),
              "FI_DIRECTED_RECV not offered");
        fi_freeinfo(i);
        i                           = NULL;
        h->caps                     = FI_TAGGED;
        h->domain_attr->cq_data_size = 8;
        CHECK(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, h, &i) == -FI_ENODATA,
              "8 bytes of remote CQ data offered");
        /* what Open MPI's ofi_tag_full asks: FI_DIRECTED_RECV and 4 bytes of CQ data */
        h->caps                      = FI_TAGGED | FI_DIRECTED_RECV;
        h->domain_attr->cq_data_size = 4;
        CHECK(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, h, &i) == 0 && i != NULL &&
                  i->domain_attr->cq_data_size == 4 && (i->caps & FI_DIRECTED_RECV),
              "4 bytes of remote CQ data not offered");
        fi_freeinfo(i);
        i                            = NULL;
        h->caps                      = FI_TAGGED;
        h->domain_attr->cq_data_size = 0;
        CHECK(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, h, &i) == 0 && i != NULL &&
                  i->ep_attr->mem_tag_format == ~0ULL && !(i->caps & FI_MSG),
              "tagged-only info: all 64 tag bits");
        fi_freeinfo(i);
        fi_freeinfo(h);
    }

    DIE_IF(fi_fabric(info->fabric_attr, &fabric, NULL) != 0, "fi_fabric");
    DIE_IF(fi_domain(fabric, info, &domain, NULL) != 0, "fi_domain");
    memset(&cqa, 0, sizeof(cqa));
    cqa.format = FI_CQ_FORMAT_TAGGED;
    DIE_IF(fi_cq_open(domain, &cqa, &cq, NULL) != 0, "fi_cq_open");
    memset(&ava, 0, sizeof(ava));
    ava.type = rank ? FI_AV_MAP : FI_AV_TABLE; /* both kinds */
    DIE_IF(fi_av_open(domain, &ava, &av, NULL) != 0, "fi_av_open");
    memset(&cna, 0, sizeof(cna));
    cna.events = FI_CNTR_EVENTS_COMP;
    DIE_IF(fi_cntr_open(domain, &cna, &txc, NULL) != 0, "fi_cntr_open");
    DIE_IF(fi_cntr_open(domain, &cna, &rxc, NULL) != 0, "fi_cntr_open");
    /* as Open MPI does: completions only for operations with FI_COMPLETION, which the
     * endpoint's default op_flags give */
    info->tx_attr->op_flags = FI_COMPLETION;
    info->rx_attr->op_flags = FI_COMPLETION;
    DIE_IF(fi_endpoint(domain, info, &ep, NULL) != 0, "fi_endpoint");
    CHECK(fi_enable(ep) == -FI_ENOAV, "enable without an address vector");
    DIE_IF(fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV | FI_SELECTIVE_COMPLETION) != 0,
           "bind cq");
    DIE_IF(fi_ep_bind(ep, &av->fid, 0) != 0, "bind av");
    DIE_IF(fi_ep_bind(ep, &txc->fid, FI_SEND) != 0, "bind tx counter");
    DIE_IF(fi_ep_bind(ep, &rxc->fid, FI_RECV) != 0, "bind rx counter");
    DIE_IF(fi_enable(ep) != 0, "fi_enable");
    len = 8;
    CHECK(fi_getname(&ep->fid, name, &len) == -FI_ETOOSMALL && len == FI_NAME_MAX,
          "getname with a short buffer: len %zu", len);
    len = sizeof(name);
    DIE_IF(fi_getname(&ep->fid, name, &len) != 0 || len != FI_NAME_MAX, "fi_getname");
    DIE_IF(write(ctl, name, len) != (ssize_t)len, "send name");
    DIE_IF(read(ctl, pname, len) != (ssize_t)len, "receive name");
    DIE_IF(fi_av_insert(av, pname, 1, &peer, 0, NULL) != 1, "fi_av_insert");
    /* rank 0 opens a second endpoint (its own tmx worker): rank 1 sees two sources */
    if (rank == 0) {
        DIE_IF(fi_endpoint(domain, info, &ep2, NULL) != 0, "fi_endpoint 2");
        DIE_IF(fi_ep_bind(ep2, &cq->fid, FI_TRANSMIT | FI_RECV | FI_SELECTIVE_COMPLETION) != 0,
               "bind cq 2");
        DIE_IF(fi_ep_bind(ep2, &av->fid, 0) != 0, "bind av 2");
        DIE_IF(fi_enable(ep2) != 0, "fi_enable 2");
        len = sizeof(name);
        DIE_IF(fi_getname(&ep2->fid, name, &len) != 0, "fi_getname 2");
        DIE_IF(write(ctl, name, len) != (ssize_t)len, "send name 2");
    } else {
        DIE_IF(read(ctl, pname, len) != (ssize_t)len, "receive name 2");
        DIE_IF(fi_av_insert(av, pname, 1, &peer2, 0, NULL) != 1, "fi_av_insert 2");
    }
}

static void teardown(void)
{
    CHECK(fi_close(&domain->fid) == -FI_EBUSY, "domain closed with objects open");
    CHECK(fi_close(&ep->fid) == 0, "close ep");
    CHECK(ep2 == NULL || fi_close(&ep2->fid) == 0, "close ep 2");
    CHECK(fi_close(&cq->fid) == 0, "close cq");
    CHECK(fi_close(&av->fid) == 0, "close av");
    CHECK(fi_close(&txc->fid) == 0, "close counter");
    CHECK(fi_close(&rxc->fid) == 0, "close counter");
    CHECK(fi_close(&domain->fid) == 0, "close domain");
    CHECK(fi_close(&fabric->fid) == 0, "close fabric");
    fi_freeinfo(info);
}

static void test_send_recv(size_t len, const char *what)
{
    char *buf = calloc(1, len + 1);
    int   ctx;
    if (rank == 1) {
        CHECK(fi_trecv(ep, buf, len, NULL, FI_ADDR_UNSPEC, 0x42, 0, &ctx) == 0, "trecv");
        sync_peers();
        expect_comp(&ctx, FI_RECV | FI_TAGGED, len, 0x42, 1, what);
        CHECK(check_fill(buf, len, (int)len), "%s: data", what);
    } else {
        fill(buf, len, (int)len);
        sync_peers();
        send_wait(buf, len, 0x42, &ctx);
    }
    sync_peers();
    free(buf);
}

static void test_wildcard_order(void)
{
    int a, b, c, got[3] = {0, 0, 0}, ctx[3];
    if (rank == 1) {
        /* ignore the low byte; three messages of one tag arrive in order */
        for (int i = 0; i < 3; i++) {
            CHECK(fi_trecv(ep, &got[i], sizeof(int), NULL, FI_ADDR_UNSPEC, 0x700, 0xff, &ctx[i]) ==
                      0,
                  "trecv wildcard");
        }
        sync_peers();
        for (int i = 0; i < 3; i++) {
            expect_comp(&ctx[i], FI_RECV | FI_TAGGED, sizeof(int), 0x7a0 + (uint64_t)i, 1,
                        "wildcard receive");
            CHECK(got[i] == i + 1, "order: receive %d got %d", i, got[i]);
        }
    } else {
        a = 1, b = 2, c = 3;
        sync_peers();
        send_wait(&a, sizeof(a), 0x7a0, &ctx[0]);
        send_wait(&b, sizeof(b), 0x7a1, &ctx[1]);
        send_wait(&c, sizeof(c), 0x7a2, &ctx[2]);
    }
    sync_peers();
}

static void test_msg_and_iov(void)
{
    char big[3000], part[3][1000];
    int  ctx, tctx;
    if (rank == 1) {
        struct iovec iov[3];
        for (int i = 0; i < 3; i++) {
            iov[i].iov_base = part[i];
            iov[i].iov_len  = sizeof(part[i]);
        }
        /* a tagged receive that ignores every bit still never takes an untagged message */
        CHECK(fi_trecv(ep, big, sizeof(big), NULL, FI_ADDR_UNSPEC, 0, ~0ULL, &tctx) == 0,
              "trecv any");
        CHECK(fi_recvv(ep, iov, NULL, 3, FI_ADDR_UNSPEC, &ctx) == 0, "recvv");
        sync_peers();
        expect_comp(&ctx, FI_RECV | FI_MSG, sizeof(big), 0, 0, "untagged vector receive");
        char joined[3000];
        for (int i = 0; i < 3; i++) {
            memcpy(joined + i * 1000, part[i], 1000);
        }
        CHECK(check_fill(joined, sizeof(joined), 9), "vector data");
        CHECK(fi_cancel(&ep->fid, &tctx) == 0, "cancel the tagged receive");
        expect_err(&tctx, FI_ECANCELED, "canceled wildcard receive");
    } else {
        struct iovec iov[3];
        fill(big, sizeof(big), 9);
        for (int i = 0; i < 3; i++) {
            iov[i].iov_base = big + i * 1000;
            iov[i].iov_len  = 1000;
        }
        sync_peers();
        CHECK(fi_sendv(ep, iov, NULL, 3, peer, &ctx) == 0, "sendv");
        expect_comp(&ctx, FI_SEND | FI_MSG, 0, 0, 0, "untagged send");
    }
    sync_peers();
}

static struct fi_msg_tagged tmsg(struct iovec *iov, size_t n, uint64_t tag, uint64_t ignore,
                                 void *ctx)
{
    struct fi_msg_tagged m;
    memset(&m, 0, sizeof(m));
    m.msg_iov   = iov;
    m.iov_count = n;
    m.addr      = FI_ADDR_UNSPEC;
    m.tag       = tag;
    m.ignore    = ignore;
    m.context   = ctx;
    return m;
}

/* Peeks until the message is there (it may still be on its way). */
static int peek_until(uint64_t tag, uint64_t flags, void *ctx, size_t *len)
{
    double t0 = now();
    while (now() - t0 < 20) {
        struct iovec         iov = {NULL, 0};
        struct fi_msg_tagged m   = tmsg(&iov, 0, tag, 0, ctx);
        struct fi_cq_tagged_entry e;
        CHECK(fi_trecvmsg(ep, &m, FI_PEEK | FI_COMPLETION | flags) == 0, "peek");
        int r = get_comp(&e, 20);
        if (r == 1) {
            CHECK(e.op_context == ctx && e.tag == tag, "peek entry");
            *len = e.len;
            return 1;
        }
        if (r != -FI_EAVAIL || last_err.err != FI_ENOMSG) {
            CHECK(0, "peek: %d err %d", r, last_err.err);
            return 0;
        }
    }
    return 0;
}

static void test_peek_claim_discard(void)
{
    char   buf[64], out[64];
    int    ctx, ctx2;
    size_t len = 0;
    if (rank == 1) {
        struct iovec         iov = {NULL, 0};
        struct fi_msg_tagged m   = tmsg(&iov, 0, 0x999, 0, &ctx);
        CHECK(fi_trecvmsg(ep, &m, FI_PEEK | FI_COMPLETION) == 0, "peek for nothing");
        expect_err(&ctx, FI_ENOMSG, "peek finds nothing");
        sync_peers();
        /* peek: it stays */
        CHECK(peek_until(0x5, 0, &ctx, &len) && len == 64, "peek tag 5: len %zu", len);
        /* peek + claim, then receive the claimed message */
        CHECK(peek_until(0x5, FI_CLAIM, &ctx2, &len) && len == 64, "claim tag 5");
        struct iovec riov = {buf, sizeof(buf)};
        m                 = tmsg(&riov, 1, 0x5, 0, &ctx2);
        CHECK(fi_trecvmsg(ep, &m, FI_CLAIM | FI_COMPLETION) == 0, "receive claimed");
        expect_comp(&ctx2, FI_RECV | FI_TAGGED, 64, 0x5, 1, "claimed receive");
        CHECK(check_fill(buf, 64, 5), "claimed data");
        m = tmsg(&riov, 1, 0x5, 0, &ctx2);
        CHECK(fi_trecvmsg(ep, &m, FI_CLAIM | FI_COMPLETION) == -FI_EINVAL, "claim twice");
        /* peek + discard: gone afterwards */
        CHECK(peek_until(0x6, FI_DISCARD, &ctx, &len) && len == 64, "discard tag 6");
        m = tmsg(&iov, 0, 0x6, 0, &ctx);
        CHECK(fi_trecvmsg(ep, &m, FI_PEEK | FI_COMPLETION) == 0, "peek discarded");
        expect_err(&ctx, FI_ENOMSG, "discarded message is gone");
        /* claim, then discard the claimed message */
        CHECK(peek_until(0x8, FI_CLAIM, &ctx2, &len) && len == 64, "claim tag 8");
        m = tmsg(&riov, 1, 0x8, 0, &ctx2);
        CHECK(fi_trecvmsg(ep, &m, FI_CLAIM | FI_DISCARD | FI_COMPLETION) == 0, "claim+discard");
        expect_comp(&ctx2, FI_RECV | FI_TAGGED, 0, 0x8, 1, "claimed, discarded");
        /* the message after them all is received normally */
        CHECK(fi_trecv(ep, buf, sizeof(buf), NULL, FI_ADDR_UNSPEC, 0x9, 0, &ctx) == 0, "trecv");
        expect_comp(&ctx, FI_RECV | FI_TAGGED, 64, 0x9, 1, "after discards");
    } else {
        fill(out, sizeof(out), 5);
        sync_peers();
        send_wait(out, 64, 0x5, &ctx);
        send_wait(out, 64, 0x6, &ctx);
        send_wait(out, 64, 0x8, &ctx);
        send_wait(out, 64, 0x9, &ctx);
    }
    sync_peers();
}

/* A peek (flags: FI_CLAIM, FI_DISCARD or 0) of messages from src only, until one is there. */
static int peek_from_until(fi_addr_t src, uint64_t tag, uint64_t flags, void *ctx)
{
    double t0 = now();
    while (now() - t0 < 20) {
        struct iovec              iov = {NULL, 0};
        struct fi_msg_tagged      m   = tmsg(&iov, 0, tag, 0, ctx);
        struct fi_cq_tagged_entry e;
        m.addr = src;
        CHECK(fi_trecvmsg(ep, &m, FI_PEEK | FI_COMPLETION | flags) == 0, "directed peek");
        int r = get_comp(&e, 20);
        if (r == 1) {
            return e.op_context == ctx && e.tag == tag && e.len == sizeof(int);
        }
        if (r != -FI_EAVAIL || last_err.err != FI_ENOMSG) {
            CHECK(0, "directed peek: %d err %d", r, last_err.err);
            return 0;
        }
    }
    return 0;
}

/* FI_DIRECTED_RECV: receives and peeks naming a source take only its messages. Rank 1 posts a
 * receive from rank 0's ep2, then one from its ep, for one tag; ep sends first: the older
 * receive must let that message pass. */
static void test_directed(void)
{
    int a = 0, b = 0, c = 0, one = 1, two = 2, three = 3, four = 4, ctx_a, ctx_b, ctx_c;
    if (rank == 1) {
        CHECK(info->caps & FI_DIRECTED_RECV, "FI_DIRECTED_RECV not in the endpoint's caps");
        CHECK(fi_trecv(ep, &a, sizeof(a), NULL, peer2, 0x33, 0, &ctx_a) == 0, "trecv from ep2");
        CHECK(fi_trecv(ep, &b, sizeof(b), NULL, peer, 0x33, 0, &ctx_b) == 0, "trecv from ep");
        sync_peers();
        expect_comp(&ctx_b, FI_RECV | FI_TAGGED, sizeof(int), 0x33, 1, "directed receive (ep)");
        CHECK(b == 1 && a == 0, "directed receives: from ep got %d, from ep2 got %d", b, a);
        sync_peers();
        expect_comp(&ctx_a, FI_RECV | FI_TAGGED, sizeof(int), 0x33, 1, "directed receive (ep2)");
        CHECK(a == 2, "directed receive from ep2 got %d", a);
        sync_peers();
        sync_peers(); /* both 0x34 messages sent: ep's first */
        CHECK(peek_from_until(peer2, 0x34, FI_CLAIM, &ctx_c), "directed peek+claim from ep2");
        struct iovec         riov = {&c, sizeof(c)};
        struct fi_msg_tagged m    = tmsg(&riov, 1, 0x34, 0, &ctx_c);
        CHECK(fi_trecvmsg(ep, &m, FI_CLAIM | FI_COMPLETION) == 0, "receive claimed");
        expect_comp(&ctx_c, FI_RECV | FI_TAGGED, sizeof(int), 0x34, 1, "claimed from ep2");
        CHECK(c == 3, "claimed from ep2: got %d", c);
        struct iovec         iov = {NULL, 0};
        m                        = tmsg(&iov, 0, 0x34, 0, &ctx_c);
        m.addr                   = peer2;
        CHECK(fi_trecvmsg(ep, &m, FI_PEEK | FI_COMPLETION) == 0, "peek from ep2");
        expect_err(&ctx_c, FI_ENOMSG, "nothing more from ep2");
        CHECK(fi_trecv(ep, &c, sizeof(c), NULL, FI_ADDR_UNSPEC, 0x34, 0, &ctx_c) == 0, "trecv");
        expect_comp(&ctx_c, FI_RECV | FI_TAGGED, sizeof(int), 0x34, 1, "any source");
        CHECK(c == 4, "any source: got %d", c);
        CHECK(fi_trecv(ep, &c, sizeof(c), NULL, 1000, 0x34, 0, &ctx_c) == -FI_EINVAL,
              "receive from an address not in the AV");
    } else {
        sync_peers();
        send_wait(&one, sizeof(one), 0x33, &ctx_a);
        sync_peers();
        send_wait_on(ep2, &two, sizeof(two), 0x33, &ctx_b);
        sync_peers();
        send_wait(&four, sizeof(four), 0x34, &ctx_a);
        send_wait_on(ep2, &three, sizeof(three), 0x34, &ctx_b);
        sync_peers();
    }
    sync_peers();
}

static void test_truncation(size_t len, size_t room)
{
    char *buf = malloc(len);
    int   ctx;
    if (rank == 1) {
        memset(buf, 0, len);
        CHECK(fi_trecv(ep, buf, room, NULL, FI_ADDR_UNSPEC, 0x10, 0, &ctx) == 0, "trecv");
        sync_peers();
        expect_err(&ctx, FI_ETRUNC, "truncation");
        CHECK(last_err.len == room && last_err.olen == len - room && last_err.tag == 0x10,
              "truncation: len %zu olen %zu tag %#llx", last_err.len, last_err.olen,
              (unsigned long long)last_err.tag);
        CHECK(check_fill(buf, room, 3), "truncated data");
    } else {
        fill(buf, len, 3);
        sync_peers();
        send_wait(buf, len, 0x10, &ctx);
    }
    sync_peers();
    free(buf);
}

static void test_inject(void)
{
    char buf[256];
    int  ctx;
    if (rank == 1) {
        CHECK(fi_trecv(ep, buf, sizeof(buf), NULL, FI_ADDR_UNSPEC, 0x11, 0, &ctx) == 0, "trecv");
        sync_peers();
        expect_comp(&ctx, FI_RECV | FI_TAGGED, sizeof(buf), 0x11, 1, "injected");
        CHECK(check_fill(buf, sizeof(buf), 11), "injected data");
        /* zero bytes from a NULL buffer (Open MPI's barrier does it), also in a vector */
        CHECK(fi_trecv(ep, NULL, 0, NULL, FI_ADDR_UNSPEC, 0x13, 0, &ctx) == 0, "trecv NULL");
        expect_comp(&ctx, FI_RECV | FI_TAGGED, 0, 0x13, 1, "zero-byte inject");
        struct iovec z[2] = {{NULL, 0}, {buf, 8}};
        memset(buf, 0, 8);
        CHECK(fi_trecvv(ep, z, NULL, 2, FI_ADDR_UNSPEC, 0x14, 0, &ctx) == 0, "trecvv NULL");
        expect_comp(&ctx, FI_RECV | FI_TAGGED, 8, 0x14, 1, "vector with a NULL element");
        CHECK(check_fill(buf, 8, 14), "vector data");
    } else {
        fill(buf, sizeof(buf), 11);
        sync_peers();
        CHECK(fi_tinject(ep, buf, sizeof(buf), peer, 0x11) == 0, "tinject");
        memset(buf, 0, sizeof(buf)); /* the buffer is ours again at once */
        expect_nothing("inject has no completion");
        CHECK(fi_tinject(ep, NULL, 0, peer, 0x13) == 0, "tinject of nothing");
        fill(buf, 8, 14);
        struct iovec z[2] = {{NULL, 0}, {buf, 8}};
        CHECK(fi_tsendv(ep, z, NULL, 2, peer, 0x14, &ctx) == 0, "tsendv with a NULL element");
        expect_comp(&ctx, FI_SEND | FI_TAGGED, 0, 0, 0, "vector send");
        size_t isz = info->tx_attr->inject_size;
        char  *big = calloc(1, isz + 1);
        DIE_IF(big == NULL, "calloc");
        CHECK(fi_tinject(ep, big, isz + 1, peer, 0x12) == -FI_EINVAL, "inject too big");
        free(big);
    }
    sync_peers();
}

/* A burst of injects of sz bytes to a receiver that posts its receives meanwhile: past tmx's
 * eager credits the provider must copy (tmx refuses to send in place, TMX_SEND_FLAG_TRY), into
 * the operation or, above 512 bytes, a buffer of its own; every inject reuses one buffer,
 * rewritten after each call, so data kept instead of copied arrives with a later value. */
static void test_inject_many(size_t sz, int n)
{
    enum { MAXN = 1000 };
    static int     ctxs[MAXN];
    static char    sbuf[4096];
    char          *vals = malloc((size_t)n * sz);
    const uint64_t tag  = 0x17 + sz;

    DIE_IF(vals == NULL || n > MAXN || sz < sizeof(int) || sz > sizeof(sbuf), "test setup");
    if (rank == 1) {
        sync_peers();
        /* posted while the burst runs: no progress until the last is posted, so most come
         * unexpected and the sender runs out of credits */
        for (int i = 0; i < n; i++) {
            CHECK(fi_trecv(ep, vals + (size_t)i * sz, sz, NULL, FI_ADDR_UNSPEC, tag, 0,
                           &ctxs[i]) == 0,
                  "trecv %d", i);
        }
        for (int i = 0; i < n; i++) {
            struct fi_cq_tagged_entry e;
            int                       first, last;
            if (get_comp(&e, 20) != 1) {
                CHECK(0, "inject %zu B: completion %d missing", sz, i);
                break;
            }
            memcpy(&first, vals + (size_t)i * sz, sizeof(int));
            memcpy(&last, vals + (size_t)i * sz + sz - sizeof(int), sizeof(int));
            CHECK(e.op_context == &ctxs[i] && e.len == sz && first == 1000 + i &&
                      last == 1000 + i,
                  "inject %zu B %d: context %p, len %zu, values %d %d", sz, i, e.op_context,
                  e.len, first, last);
        }
    } else {
        uint64_t base = fi_cntr_read(txc);
        double   t0;
        sync_peers();
        for (int i = 0; i < n; i++) {
            ssize_t r;
            int     v = 1000 + i;
            memcpy(sbuf, &v, sizeof(v));
            memcpy(sbuf + sz - sizeof(v), &v, sizeof(v));
            while ((r = fi_tinject(ep, sbuf, sz, peer, tag)) == -FI_EAGAIN) {
            }
            CHECK(r == 0, "tinject %zu B %d: %zd", sz, i, r);
            memset(sbuf, 0xff, sz); /* ours again */
        }
        /* the injects tmx queued go out as credits come back: progress (the counter) */
        t0 = now();
        while (fi_cntr_read(txc) < base + (uint64_t)n && now() - t0 < 20) {
        }
        CHECK(fi_cntr_read(txc) == base + (uint64_t)n, "injects of %zu B counted: %llu of %d",
              sz, (unsigned long long)(fi_cntr_read(txc) - base), n);
        expect_nothing("injects have no completion");
    }
    free(vals);
    sync_peers();
}

/* FI_SELECTIVE_COMPLETION: *msg calls without FI_COMPLETION complete silently (counters
 * still count); errors are reported all the same */
static void test_selective(void)
{
    char                 buf[32];
    int                  ctx;
    struct iovec         iov = {buf, sizeof(buf)};
    struct fi_msg_tagged m   = tmsg(&iov, 1, 0x15, 0, &ctx);
    m.addr                   = rank ? FI_ADDR_UNSPEC : peer;
    if (rank == 1) {
        uint64_t before = fi_cntr_read(rxc);
        memset(buf, 0, sizeof(buf));
        CHECK(fi_trecvmsg(ep, &m, 0) == 0, "trecvmsg without FI_COMPLETION");
        sync_peers();
        double t0 = now();
        while (fi_cntr_read(rxc) == before && now() - t0 < 20) {
        }
        CHECK(fi_cntr_read(rxc) == before + 1, "receive counted");
        CHECK(check_fill(buf, sizeof(buf), 15), "silent receive data");
        expect_nothing("no receive completion without FI_COMPLETION");
        /* a silent receive that is truncated still reports its error */
        iov.iov_len = 4;
        CHECK(fi_trecvmsg(ep, &m, 0) == 0, "trecvmsg (short) without FI_COMPLETION");
        sync_peers();
        expect_err(&ctx, FI_ETRUNC, "error of a silent receive");
    } else {
        fill(buf, sizeof(buf), 15);
        sync_peers();
        uint64_t before = fi_cntr_read(txc);
        CHECK(fi_tsendmsg(ep, &m, 0) == 0, "tsendmsg without FI_COMPLETION");
        double t0 = now();
        while (fi_cntr_read(txc) == before && now() - t0 < 20) {
        }
        CHECK(fi_cntr_read(txc) == before + 1, "send counted");
        expect_nothing("no send completion without FI_COMPLETION");
        sync_peers();
        CHECK(fi_tsendmsg(ep, &m, FI_COMPLETION) == 0, "tsendmsg with FI_COMPLETION");
        expect_comp(&ctx, FI_SEND | FI_TAGGED, 0, 0, 0, "send with FI_COMPLETION");
    }
    sync_peers();
}

/* FI_SETOPSFLAG on an enabled endpoint: with FI_SELECTIVE_COMPLETION, taking FI_COMPLETION
 * out of the default op_flags makes fi_tsend and fi_trecv complete silently (counted), and
 * putting it back makes them report again. fi_tsend and fi_trecv keep what the op_flags say
 * in the endpoint (tmx_fi_ep_hot): this fails if a change of them is not seen there. */
static void test_opsflag(void)
{
    char     buf[16];
    int      ctx;
    uint64_t f;

    for (int round = 0; round < 2; round++) {
        f = (rank ? FI_RECV : FI_TRANSMIT) | (round == 0 ? 0 : FI_COMPLETION);
        CHECK(fi_control(&ep->fid, FI_SETOPSFLAG, &f) == 0, "FI_SETOPSFLAG round %d", round);
        if (rank == 1) {
            uint64_t before = fi_cntr_read(rxc);
            memset(buf, 0, sizeof(buf));
            CHECK(fi_trecv(ep, buf, sizeof(buf), NULL, FI_ADDR_UNSPEC, 0x18, 0, &ctx) == 0,
                  "trecv round %d", round);
            sync_peers();
            if (round == 0) {
                double t0 = now();
                while (fi_cntr_read(rxc) == before && now() - t0 < 20) {
                    fi_cq_read(cq, NULL, 0); /* progress */
                }
                CHECK(fi_cntr_read(rxc) == before + 1, "silent receive counted");
                expect_nothing("no receive completion with FI_COMPLETION taken out");
            } else {
                expect_comp(&ctx, FI_RECV | FI_TAGGED, sizeof(buf), 0x18, 1,
                            "receive with FI_COMPLETION put back");
            }
            CHECK(check_fill(buf, sizeof(buf), 18), "data round %d", round);
        } else {
            fill(buf, sizeof(buf), 18);
            sync_peers();
            uint64_t before = fi_cntr_read(txc);
            ssize_t  r;
            while ((r = fi_tsend(ep, buf, sizeof(buf), NULL, peer, 0x18, &ctx)) == -FI_EAGAIN) {
                fi_cq_read(cq, NULL, 0);
            }
            CHECK(r == 0, "tsend round %d: %zd", round, r);
            if (round == 0) {
                double t0 = now();
                while (fi_cntr_read(txc) == before && now() - t0 < 20) {
                    fi_cq_read(cq, NULL, 0);
                }
                CHECK(fi_cntr_read(txc) == before + 1, "silent send counted");
                expect_nothing("no send completion with FI_COMPLETION taken out");
            } else {
                expect_comp(&ctx, FI_SEND | FI_TAGGED, 0, 0, 0,
                            "send with FI_COMPLETION put back");
            }
        }
        sync_peers();
    }
}

/* Completions made while fi_cq_read progresses an empty CQ go straight into the caller's
 * buffer, up to its count, and the rest to the CQ's ring (tmx_fi_cq_push): 40 receives that
 * complete in the first reads of 16 entries come back all, once each, in order. A truncated
 * one among them makes its error entry (which, as before, may be reported ahead of the
 * entries queued before it: -FI_EAVAIL comes first). */
static void test_direct(void)
{
    enum { N = 40, BAD = 30 };
    static int vals[N], ctxs[N];
    struct fi_cq_tagged_entry e[16];
    if (rank == 1) {
        for (int i = 0; i < N; i++) {
            vals[i] = -1;
            CHECK(fi_trecv(ep, &vals[i], i == BAD ? 1 : sizeof(int), NULL, FI_ADDR_UNSPEC, 0x19,
                           0, &ctxs[i]) == 0,
                  "trecv %d", i);
        }
        sync_peers();
        sync_peers(); /* the sender is done */
        int    next = 0, errs = 0, reads = 0;
        double t0   = now();
        while ((next < N || errs == 0) && now() - t0 < 20) {
            ssize_t n = fi_cq_read(cq, e, 16);
            if (n == -FI_EAVAIL) {
                memset(&last_err, 0, sizeof(last_err));
                DIE_IF(fi_cq_readerr(cq, &last_err, 0) != 1, "readerr");
                CHECK(last_err.op_context == &ctxs[BAD] && last_err.err == FI_ETRUNC,
                      "error entry: context %p (expected %p), err %d", last_err.op_context,
                      (void *)&ctxs[BAD], last_err.err);
                errs++;
                continue;
            }
            if (n == -FI_EAGAIN) {
                continue;
            }
            CHECK(n > 0 && n <= 16, "fi_cq_read: %zd", n);
            reads++;
            for (ssize_t k = 0; k < n; k++, next++) {
                next += next == BAD;
                CHECK(next < N && e[k].op_context == &ctxs[next] && vals[next] == next &&
                          e[k].len == sizeof(int),
                      "completion %d: context %p (expected %p), value %d, len %zu", next,
                      e[k].op_context, (void *)&ctxs[next < N ? next : 0],
                      vals[next < N ? next : 0], e[k].len);
            }
            next += next == BAD;
        }
        CHECK(next == N && errs == 1 && reads >= 3, "%d completions of %d, %d errors, %d reads",
              next, N, errs, reads);
        expect_nothing("nothing after the last completion");
    } else {
        sync_peers();
        for (int i = 0; i < N; i++) {
            vals[i] = i;
            send_wait(&vals[i], sizeof(int), 0x19, &ctxs[i]);
        }
        sync_peers();
    }
    sync_peers();
}

/* More completions than the CQ's initial 1024 entries, read only at the end: the queue grows
 * and gives them back in order. */
static void test_many(void)
{
    enum { N = 3000 };
    static int vals[N], ctxs[N];
    struct fi_cq_tagged_entry e;
    if (rank == 1) {
        for (int i = 0; i < N; i++) {
            CHECK(fi_trecv(ep, &vals[i], sizeof(int), NULL, FI_ADDR_UNSPEC, 0x16, 0, &ctxs[i]) ==
                      0,
                  "trecv %d", i);
        }
        sync_peers();
        sync_peers(); /* the sender is done; some receives completed already */
        for (int i = 0; i < N; i++) {
            if (get_comp(&e, 20) != 1) {
                CHECK(0, "completion %d missing", i);
                break;
            }
            CHECK(e.op_context == &ctxs[i] && vals[i] == i, "completion %d: context %p, value %d",
                  i, e.op_context, vals[i]);
        }
    } else {
        sync_peers();
        for (int i = 0; i < N; i++) {
            vals[i] = i;
            ssize_t r;
            while ((r = fi_tsend(ep, &vals[i], sizeof(int), NULL, peer, 0x16, &ctxs[i])) ==
                   -FI_EAGAIN) {
            }
            CHECK(r == 0, "tsend %d: %zd", i, r);
        }
        sync_peers();
        for (int i = 0; i < N; i++) {
            if (get_comp(&e, 20) != 1) {
                CHECK(0, "send completion %d missing", i);
                break;
            }
            CHECK(e.op_context == &ctxs[i], "send completion %d out of order", i);
        }
    }
    sync_peers();
}

static void test_cancel(void)
{
    char buf[16] = {0};
    int  ctx, other;
    CHECK(fi_trecv(ep, buf, sizeof(buf), NULL, FI_ADDR_UNSPEC, 0x77, 0, &ctx) == 0, "trecv");
    CHECK(fi_cancel(&ep->fid, &other) == -FI_ENOENT, "cancel of nothing");
    CHECK(fi_cancel(&ep->fid, &ctx) == 0, "cancel");
    expect_err(&ctx, FI_ECANCELED, "canceled receive");
    expect_nothing("a canceled receive completes once");
    sync_peers();
}

/* Remote CQ data (FI_REMOTE_CQ_DATA, tmx's immediate data): fi_tsenddata, fi_tinjectdata,
 * fi_tsendmsg with the flag, fi_senddata; eager and rendezvous; posted first and unexpected
 * (peek reports it too); a send without it reports none. */
static void expect_data_entry(const struct fi_cq_tagged_entry *e, uint64_t flags, uint64_t tag,
                              size_t len, int has, uint64_t data, const char *what)
{
    CHECK((e->flags & flags) == flags, "%s: flags %#llx lack %#llx", what,
          (unsigned long long)e->flags, (unsigned long long)flags);
    CHECK(!!(e->flags & FI_REMOTE_CQ_DATA) == has, "%s: FI_REMOTE_CQ_DATA %s", what,
          has ? "missing" : "reported for a send without data");
    CHECK(e->data == (has ? data : 0), "%s: data %#llx, expected %#llx", what,
          (unsigned long long)e->data, (unsigned long long)(has ? data : 0));
    CHECK(e->len == len, "%s: len %zu, expected %zu", what, e->len, len);
    if (flags & FI_TAGGED) {
        CHECK(e->tag == tag, "%s: tag %#llx", what, (unsigned long long)e->tag);
    }
}

#define CQD_BIG (1u << 20)

static void test_cq_data(void)
{
    char  *big = malloc(CQD_BIG), *small = malloc(256);
    int    ctx[6];
    size_t lens[6] = {100, 8, CQD_BIG, 50, 30, 0};
    if (rank == 1) {
        struct fi_cq_tagged_entry e;
        int                       seen[6] = {0};
        char                     *bufs[6];
        for (int i = 0; i < 6; i++) {
            bufs[i] = calloc(1, lens[i] + 1);
        }
        for (int i = 0; i < 4; i++) {
            CHECK(fi_trecv(ep, bufs[i], lens[i], NULL, FI_ADDR_UNSPEC, 0x20 + (uint64_t)i, 0,
                           &ctx[i]) == 0, "trecv %d", i);
        }
        CHECK(fi_recv(ep, bufs[4], lens[4], NULL, FI_ADDR_UNSPEC, &ctx[4]) == 0, "recv");
        sync_peers();
        for (int n = 0; n < 5; n++) {
            int r = get_comp(&e, 20);
            CHECK(r == 1, "cq data: completion %d: %d (err %d)", n, r, last_err.err);
            if (r != 1) {
                break;
            }
            for (int i = 0; i < 5; i++) {
                if (e.op_context == &ctx[i]) {
                    seen[i]++;
                    static const uint64_t data[5] = {0xdeadbeef, 1, 0x7fffffff, 0, 5};
                    static const char *what[5] = {"fi_tsenddata", "fi_tinjectdata",
                                                  "fi_tsendmsg rendezvous", "fi_tsend",
                                                  "fi_senddata"};
                    expect_data_entry(&e, FI_RECV | (i == 4 ? FI_MSG : FI_TAGGED),
                                      0x20 + (uint64_t)i, lens[i], i != 3, data[i], what[i]);
                    CHECK(check_fill(bufs[i], lens[i], 20 + i), "%s: data", what[i]);
                }
            }
        }
        for (int i = 0; i < 5; i++) {
            CHECK(seen[i] == 1, "cq data: receive %d completed %d times", i, seen[i]);
        }
        /* unexpected: peek sees the data, the receive too */
        sync_peers();
        {
            double t0 = now();
            int    r  = 0;
            while (now() - t0 < 20) {
                struct iovec         iov = {NULL, 0};
                struct fi_msg_tagged m   = tmsg(&iov, 0, 0x25, 0, &ctx[5]);
                CHECK(fi_trecvmsg(ep, &m, FI_PEEK | FI_COMPLETION) == 0, "peek");
                r = get_comp(&e, 20);
                if (r == 1 || last_err.err != FI_ENOMSG) {
                    break;
                }
            }
            CHECK(r == 1, "peek for the unexpected message with data: %d", r);
            if (r == 1) {
                expect_data_entry(&e, FI_RECV | FI_TAGGED, 0x25, 0, 1, 0xabcd, "peek");
            }
            CHECK(fi_trecv(ep, bufs[5], 0, NULL, FI_ADDR_UNSPEC, 0x25, 0, &ctx[5]) == 0,
                  "trecv unexpected");
            r = get_comp(&e, 20);
            CHECK(r == 1 && e.op_context == &ctx[5], "unexpected with data: %d", r);
            if (r == 1) {
                expect_data_entry(&e, FI_RECV | FI_TAGGED, 0x25, 0, 1, 0xabcd, "unexpected");
            }
        }
        for (int i = 0; i < 6; i++) {
            free(bufs[i]);
        }
    } else {
        struct iovec         iov = {big, CQD_BIG};
        struct fi_msg_tagged m   = tmsg(&iov, 1, 0x22, 0, &ctx[2]);
        ssize_t              r;
        m.data = 0x7fffffff;
        m.addr = peer;
        sync_peers();
        fill(small, lens[0], 20);
        CHECK(fi_tsenddata(ep, small, lens[0], NULL, 0xdeadbeef, peer, 0x20, &ctx[0]) == 0,
              "fi_tsenddata");
        expect_comp(&ctx[0], FI_SEND | FI_TAGGED, 0, 0, 0, "fi_tsenddata completion");
        fill(small, lens[1], 21);
        CHECK(fi_tinjectdata(ep, small, lens[1], 1, peer, 0x21) == 0, "fi_tinjectdata");
        fill(big, CQD_BIG, 22);
        CHECK(fi_tsendmsg(ep, &m, FI_REMOTE_CQ_DATA | FI_COMPLETION) == 0, "fi_tsendmsg");
        expect_comp(&ctx[2], FI_SEND | FI_TAGGED, 0, 0, 0, "fi_tsendmsg completion");
        fill(small, lens[3], 23);
        send_wait(small, lens[3], 0x23, &ctx[3]);
        fill(small, lens[4], 24);
        CHECK(fi_senddata(ep, small, lens[4], NULL, 5, peer, &ctx[4]) == 0, "fi_senddata");
        expect_comp(&ctx[4], FI_SEND | FI_MSG, 0, 0, 0, "fi_senddata completion");
        CHECK((r = fi_tsenddata(ep, small, 1, NULL, 1ULL << 32, peer, 0x26, &ctx[0])) ==
                  -FI_EINVAL,
              "data wider than cq_data_size: %zd", r);
        CHECK(fi_tsenddata(ep, small, 0, NULL, 0xabcd, peer, 0x25, &ctx[5]) == 0,
              "fi_tsenddata unexpected");
        expect_comp(&ctx[5], FI_SEND | FI_TAGGED, 0, 0, 0, "unexpected send completion");
        sync_peers();
    }
    sync_peers();
    free(big);
    free(small);
}

static void test_bad_use(void)
{
    char         buf[16] = {0};
    int          ctx;
    struct iovec iov[20];
    for (int i = 0; i < 20; i++) {
        iov[i].iov_base = buf;
        iov[i].iov_len  = 1;
    }
    CHECK(fi_tsend(ep, buf, 1, NULL, 12345, 1, &ctx) == -FI_EINVAL, "send to no address");
    CHECK(fi_tsendv(ep, iov, NULL, 20, peer, 1, &ctx) == -FI_EINVAL, "iov over the limit");
    CHECK(fi_tsend(ep, buf, 1, NULL, peer, 1ULL << 63, &ctx) == -FI_EINVAL,
          "a tag with the reserved bit");
    struct fi_msg_tagged m = tmsg(iov, 1, 1, 0, &ctx);
    CHECK(fi_trecvmsg(ep, &m, FI_DISCARD) == -FI_EINVAL, "FI_DISCARD alone");
    CHECK(fi_trecvmsg(ep, NULL, 0) == -FI_EINVAL, "NULL message");
    CHECK(fi_ep_bind(ep, &cq->fid, FI_TRANSMIT) == -FI_EOPBADSTATE, "bind after enable");
    fi_addr_t bad;
    char      junk[FI_NAME_MAX];
    memset(junk, 0xff, sizeof(junk));
    CHECK(fi_av_insert(av, junk, 1, &bad, 0, NULL) == 0 && bad == FI_ADDR_NOTAVAIL,
          "junk address inserted");
    CHECK(fi_tsend(ep, buf, 1, NULL, bad, 1, &ctx) == -FI_EINVAL, "send to junk");
    sync_peers();
}

int main(void)
{
    int   sv[2];
    pid_t pid;

    DIE_IF(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0, "socketpair");
    pid = fork();
    DIE_IF(pid < 0, "fork");
    rank = pid == 0 ? 1 : 0;
    ctl  = sv[rank];
    close(sv[1 - rank]);

    setup();
    test_send_recv(0, "zero bytes");
    test_send_recv(1000, "eager");
    test_send_recv(4 << 20, "rendezvous");
    test_wildcard_order();
    test_msg_and_iov();
    test_peek_claim_discard();
    test_directed();
    test_truncation(100, 40);
    test_truncation(1 << 20, 1000);
    test_inject();
    test_inject_many(sizeof(int), 1000);
    test_inject_many(4096, 300);
    test_selective();
    test_opsflag();
    test_direct();
    test_many();
    test_cancel();
    test_cq_data();
    test_bad_use();
    uint64_t sends = fi_cntr_read(txc), recvs = fi_cntr_read(rxc);
    if (rank == 0) {
        CHECK(sends >= 11, "send counter %llu", (unsigned long long)sends);
    } else {
        CHECK(recvs >= 8 && fi_cntr_readerr(rxc) >= 3, "receive counters %llu/%llu",
              (unsigned long long)recvs, (unsigned long long)fi_cntr_readerr(rxc));
    }
    sync_peers();
    teardown();
    if (rank == 1) {
        return fails ? 1 : 0;
    }
    int st;
    waitpid(pid, &st, 0);
    int child_ok = WIFEXITED(st) && WEXITSTATUS(st) == 0;
    CHECK(child_ok, "rank 1 failed");
    printf("%s\n", fails ? "FAIL" : "PASS");
    return fails ? 1 : 0;
}
