/* libtmx-fi.so used the wrong way round, in one process, through libfabric's API only: what a
 * libfabric application may do (hints, objects of another domain, hint flags, threads under
 * FI_THREAD_SAFE, fi_cq_signal, closing with operations posted, many cancels) answered with
 * libfabric's conventions, never a crash or a hang. fi_bad.sh runs it with FI_PROVIDER_PATH set (and checks
 * that nothing of tmx's complains on stderr). fi_api.c has the two-process tests. */
#define _GNU_SOURCE /* pthread_timedjoin_np */
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"

/* The tmx provider's info for threading (FI_THREAD_UNSPEC: none asked), NULL when refused. */
static struct fi_info *get_info(enum fi_threading threading)
{
    struct fi_info *hints = fi_allocinfo(), *info = NULL;
    int             ret;

    hints->caps                   = FI_TAGGED | FI_MSG | FI_DIRECTED_RECV;
    hints->ep_attr->type          = FI_EP_RDM;
    hints->fabric_attr->prov_name = strdup("tmx");
    hints->domain_attr->threading = threading;
    ret = fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &info);
    fi_freeinfo(hints);
    if (ret != 0) {
        return NULL;
    }
    DIE_IF(strcmp(info->fabric_attr->prov_name, "tmx") != 0, "provider %s, not tmx",
           info->fabric_attr->prov_name);
    return info;
}

typedef struct {
    struct fi_info    *info;
    struct fid_fabric *fabric;
    struct fid_domain *domain;
    struct fid_cq     *cq;
    struct fid_av     *av;
    struct fid_cntr   *cntr;
} objs_t;

static void open_objs(objs_t *o, enum fi_threading threading)
{
    struct fi_cq_attr   cqa = {.format = FI_CQ_FORMAT_TAGGED};
    struct fi_av_attr   ava = {.type = FI_AV_TABLE};
    struct fi_cntr_attr cna = {.events = FI_CNTR_EVENTS_COMP};

    o->info = get_info(threading);
    DIE_IF(o->info == NULL, "fi_getinfo found no tmx provider (FI_PROVIDER_PATH?)");
    DIE_IF(fi_fabric(o->info->fabric_attr, &o->fabric, NULL) != 0, "fi_fabric");
    DIE_IF(fi_domain(o->fabric, o->info, &o->domain, NULL) != 0, "fi_domain");
    DIE_IF(fi_cq_open(o->domain, &cqa, &o->cq, NULL) != 0, "fi_cq_open");
    DIE_IF(fi_av_open(o->domain, &ava, &o->av, NULL) != 0, "fi_av_open");
    DIE_IF(fi_cntr_open(o->domain, &cna, &o->cntr, NULL) != 0, "fi_cntr_open");
}

static void close_objs(objs_t *o)
{
    CHECK(fi_close(&o->cntr->fid) == 0, "close counter");
    CHECK(fi_close(&o->av->fid) == 0, "close av");
    CHECK(fi_close(&o->cq->fid) == 0, "close cq");
    CHECK(fi_close(&o->domain->fid) == 0, "close domain");
    CHECK(fi_close(&o->fabric->fid) == 0, "close fabric");
    fi_freeinfo(o->info);
}

/* An endpoint of o bound to its CQ and AV, enabled. */
static struct fid_ep *open_ep(objs_t *o)
{
    struct fid_ep *ep;

    DIE_IF(fi_endpoint(o->domain, o->info, &ep, NULL) != 0, "fi_endpoint");
    DIE_IF(fi_ep_bind(ep, &o->cq->fid, FI_TRANSMIT | FI_RECV) != 0, "bind cq");
    DIE_IF(fi_ep_bind(ep, &o->av->fid, 0) != 0, "bind av");
    DIE_IF(fi_enable(ep) != 0, "fi_enable");
    return ep;
}

/* The one error entry a canceled operation of ctx makes, within 5 s. */
static void expect_canceled(struct fid_cq *cq, void *ctx, const char *what)
{
    struct fi_cq_tagged_entry e;
    struct fi_cq_err_entry    err;
    double                    t0 = now();
    ssize_t                   n;

    while ((n = fi_cq_read(cq, &e, 1)) == -FI_EAGAIN && now() - t0 < 5) {
    }
    CHECK(n == -FI_EAVAIL, "%s: fi_cq_read %zd, expected an error entry", what, n);
    if (n == -FI_EAVAIL) {
        memset(&err, 0, sizeof(err));
        CHECK(fi_cq_readerr(cq, &err, 0) == 1 && err.err == FI_ECANCELED && err.op_context == ctx,
              "%s: error entry %d (%s), context %p, expected %p", what, err.err,
              fi_strerror(err.err), err.op_context, ctx);
    }
}

/* A thread level above FI_THREAD_DOMAIN lets the application call into one domain from
 * several threads at once: the provider must not answer it with FI_THREAD_DOMAIN, which
 * promises nothing of the kind. */
static void test_threading_hints(void)
{
    static const enum fi_threading levels[] = {FI_THREAD_FID, FI_THREAD_ENDPOINT,
                                               FI_THREAD_COMPLETION, FI_THREAD_SAFE};
    static const char *names[] = {"FI_THREAD_FID", "FI_THREAD_ENDPOINT", "FI_THREAD_COMPLETION",
                                  "FI_THREAD_SAFE"};

    for (size_t i = 0; i < sizeof(levels) / sizeof(levels[0]); i++) {
        struct fi_info *info = get_info(levels[i]);
        CHECK(info == NULL || info->domain_attr->threading == levels[i] ||
                  info->domain_attr->threading == FI_THREAD_SAFE,
              "%s asked, threading %d given", names[i],
              info ? (int)info->domain_attr->threading : -1);
        fi_freeinfo(info);
    }
}

/* Hints the provider cannot honour find no tmx provider, rather than an info that ignores
 * them: an address-vector type that does not exist, default operation flags it lacks. */
static void test_odd_hints(void)
{
    struct fi_info *h, *info = NULL;
    int             ret;

    h                          = fi_allocinfo();
    h->caps                    = FI_TAGGED;
    h->ep_attr->type           = FI_EP_RDM;
    h->fabric_attr->prov_name  = strdup("tmx");
    h->domain_attr->av_type    = (enum fi_av_type)55;
    ret                        = fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, h, &info);
    CHECK(ret == -FI_ENODATA, "av_type 55: %d, av_type %d given", ret,
          info ? (int)info->domain_attr->av_type : -1);
    fi_freeinfo(info);
    info                       = NULL;
    h->domain_attr->av_type    = FI_AV_TABLE;
    h->rx_attr->op_flags       = FI_MULTI_RECV;
    ret                        = fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, h, &info);
    CHECK(ret == -FI_ENODATA, "rx op_flags FI_MULTI_RECV: %d", ret);
    fi_freeinfo(info);
    info                       = NULL;
    h->rx_attr->op_flags       = 0;
    h->tx_attr->op_flags       = FI_TRIGGER;
    ret                        = fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, h, &info);
    CHECK(ret == -FI_ENODATA, "tx op_flags FI_TRIGGER: %d", ret);
    fi_freeinfo(info);
    info                       = NULL;
    /* what it has still finds it */
    h->tx_attr->op_flags       = FI_COMPLETION;
    h->rx_attr->op_flags       = FI_COMPLETION;
    ret                        = fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, h, &info);
    CHECK(ret == 0 && info != NULL && info->domain_attr->av_type == FI_AV_TABLE,
          "FI_AV_TABLE, op_flags FI_COMPLETION: %d", ret);
    fi_freeinfo(info);
    fi_freeinfo(h);
}

/* An endpoint takes only its own domain's CQ, AV and counter (FI_THREAD_SAFE's lock and the
 * CQ's progress are per domain). */
static void test_foreign_bind(void)
{
    objs_t         a, b;
    struct fid_ep *ep;

    open_objs(&a, FI_THREAD_UNSPEC);
    open_objs(&b, FI_THREAD_UNSPEC);
    DIE_IF(fi_endpoint(a.domain, a.info, &ep, NULL) != 0, "fi_endpoint");
    CHECK(fi_ep_bind(ep, &b.cq->fid, FI_TRANSMIT | FI_RECV) == -FI_EINVAL,
          "bound a CQ of another domain");
    CHECK(fi_ep_bind(ep, &b.av->fid, 0) == -FI_EINVAL, "bound an AV of another domain");
    CHECK(fi_ep_bind(ep, &b.cntr->fid, FI_SEND) == -FI_EINVAL,
          "bound a counter of another domain");
    CHECK(fi_ep_bind(ep, &b.domain->fid, 0) == -FI_EINVAL || fi_ep_bind(ep, &b.domain->fid, 0) ==
                                                                 -FI_ENOSYS,
          "bound a domain");
    /* its own still bind, and the other domain's objects close (nothing holds them) */
    CHECK(fi_ep_bind(ep, &a.cq->fid, FI_TRANSMIT | FI_RECV) == 0, "bind own cq");
    CHECK(fi_ep_bind(ep, &a.av->fid, 0) == 0, "bind own av");
    CHECK(fi_ep_bind(ep, &a.cntr->fid, FI_SEND) == 0, "bind own counter");
    CHECK(fi_enable(ep) == 0, "fi_enable");
    close_objs(&b);
    CHECK(fi_close(&ep->fid) == 0, "close ep");
    close_objs(&a);
}

/* A CQ or counter serves at most 16 endpoints (their workers are what its reads progress): the
 * 17th bind is -FI_ENOSPC, and a slot is free again once one of the 16 closes. A CQ holds any
 * number of entries (test_many of fi_api.c). */
static void test_cq_eps(void)
{
    objs_t         o;
    struct fid_ep *eps[17];

    open_objs(&o, FI_THREAD_UNSPEC);
    for (int i = 0; i < 16; i++) {
        DIE_IF(fi_endpoint(o.domain, o.info, &eps[i], NULL) != 0, "fi_endpoint %d", i);
        CHECK(fi_ep_bind(eps[i], &o.cq->fid, FI_TRANSMIT | FI_RECV) == 0, "bind cq %d", i);
        CHECK(fi_ep_bind(eps[i], &o.cntr->fid, FI_SEND | FI_RECV) == 0, "bind counter %d", i);
        CHECK(fi_ep_bind(eps[i], &o.av->fid, 0) == 0, "bind av %d", i);
        CHECK(fi_enable(eps[i]) == 0, "enable %d", i);
    }
    DIE_IF(fi_endpoint(o.domain, o.info, &eps[16], NULL) != 0, "fi_endpoint");
    CHECK(fi_ep_bind(eps[16], &o.cq->fid, FI_TRANSMIT | FI_RECV) == -FI_ENOSPC,
          "17th endpoint on one CQ");
    {
        int r = fi_ep_bind(eps[16], &o.cntr->fid, FI_SEND);
        CHECK(r == -FI_ENOSPC, "17th endpoint on one counter: %d", r);
    }
    CHECK(fi_close(&eps[0]->fid) == 0, "close ep 0");
    CHECK(fi_ep_bind(eps[16], &o.cq->fid, FI_TRANSMIT | FI_RECV) == 0, "bind after a close");
    CHECK(fi_ep_bind(eps[16], &o.cntr->fid, FI_SEND) == 0, "bind counter after a close");
    CHECK(fi_ep_bind(eps[16], &o.av->fid, 0) == 0, "bind av");
    CHECK(fi_enable(eps[16]) == 0, "enable the 17th");
    for (int i = 1; i < 17; i++) {
        CHECK(fi_close(&eps[i]->fid) == 0, "close ep %d", i);
    }
    close_objs(&o);
}

/* FI_MORE is a hint (more requests follow at once): accepted wherever libfabric allows it. */
static void test_more_flag(void)
{
    objs_t               o;
    struct fid_ep       *ep;
    char                 buf[8], name[FI_NAME_MAX];
    int                  ctx;
    size_t               len = sizeof(name);
    fi_addr_t            addr;
    struct iovec         iov = {buf, sizeof(buf)};
    struct fi_msg_tagged tm  = {.msg_iov = &iov, .iov_count = 1, .addr = FI_ADDR_UNSPEC,
                                .tag = 0x5, .context = &ctx};
    struct fi_msg        m   = {.msg_iov = &iov, .iov_count = 1, .addr = FI_ADDR_UNSPEC,
                                .context = &ctx};

    open_objs(&o, FI_THREAD_UNSPEC);
    ep = open_ep(&o);
    DIE_IF(fi_getname(&ep->fid, name, &len) != 0, "fi_getname");
    CHECK(fi_av_insert(o.av, name, 1, &addr, FI_MORE, NULL) == 1, "fi_av_insert with FI_MORE");
    CHECK(fi_trecvmsg(ep, &tm, FI_MORE | FI_COMPLETION) == 0, "fi_trecvmsg with FI_MORE");
    CHECK(fi_cancel(&ep->fid, &ctx) == 0, "cancel");
    expect_canceled(o.cq, &ctx, "tagged receive with FI_MORE");
    CHECK(fi_recvmsg(ep, &m, FI_MORE | FI_COMPLETION) == 0, "fi_recvmsg with FI_MORE");
    CHECK(fi_cancel(&ep->fid, &ctx) == 0, "cancel");
    expect_canceled(o.cq, &ctx, "untagged receive with FI_MORE");
    /* what is not a hint stays refused */
    CHECK(fi_trecvmsg(ep, &tm, FI_MULTI_RECV) == -FI_ENOSYS ||
              fi_trecvmsg(ep, &tm, FI_MULTI_RECV) == -FI_EINVAL,
          "FI_MULTI_RECV taken");
    CHECK(fi_close(&ep->fid) == 0, "close ep");
    close_objs(&o);
}

/* fi_cancel among many receives (tmx_fi_cancel_find keeps an index of them): N receives
 * posted, then canceled in an order of their own (every third first, then the rest backwards),
 * with receives posted meanwhile (after an index was built) canceled in between: each cancel
 * takes its own receive, which completes once with FI_ECANCELED, and nothing else completes;
 * then a context no receive has any more is -FI_ENOENT, and the same context given to a new
 * receive is canceled again. CANCEL_N sets N (default 4096); the time is printed. */
static void test_cancel_many(void)
{
    enum { LATE = 64 };
    objs_t         o;
    struct fid_ep *ep;
    static char    buf[8];
    int            n = getenv("CANCEL_N") != NULL ? atoi(getenv("CANCEL_N")) : 4096;
    int           *ctx, *seen, *order, k = 0, late = 0, got = 0, bad = 0;
    double         t0;

    DIE_IF(n < 3 || n > 60000, "CANCEL_N %d: 3 to 60000", n);
    ctx   = calloc((size_t)n + LATE, sizeof(*ctx));
    seen  = calloc((size_t)n + LATE, sizeof(*seen));
    order = calloc((size_t)n, sizeof(*order));
    DIE_IF(ctx == NULL || seen == NULL || order == NULL, "no memory");
    for (int i = 0; i < n; i += 3) {
        order[k++] = i;
    }
    for (int i = n - 1; i >= 0; i--) {
        if (i % 3 != 0) {
            order[k++] = i;
        }
    }
    open_objs(&o, FI_THREAD_UNSPEC);
    ep = open_ep(&o);
    for (int i = 0; i < n; i++) {
        CHECK(fi_trecv(ep, buf, sizeof(buf), NULL, FI_ADDR_UNSPEC, 0x33, 0, &ctx[i]) == 0,
              "trecv %d", i);
    }
    t0 = now();
    for (k = 0; k < n; k++) {
        CHECK(fi_cancel(&ep->fid, &ctx[order[k]]) == 0, "cancel of receive %d", order[k]);
        if (k % (n / LATE + 1) == n / (2 * LATE) && late < LATE) {
            /* posted after the cancels began, canceled at once */
            CHECK(fi_trecv(ep, buf, sizeof(buf), NULL, FI_ADDR_UNSPEC, 0x33, 0,
                           &ctx[n + late]) == 0, "late trecv %d", late);
            CHECK(fi_cancel(&ep->fid, &ctx[n + late]) == 0, "cancel of late receive %d", late);
            late++;
        }
    }
    printf("%d cancels among %d receives posted: %.3f s\n", n + late, n + late, now() - t0);
    CHECK(late > 0, "no late receives");
    /* every one completes once, canceled */
    for (t0 = now(); got < n + late && now() - t0 < 30;) {
        struct fi_cq_tagged_entry e;
        struct fi_cq_err_entry    err;
        ssize_t                   r = fi_cq_read(o.cq, &e, 1);

        if (r == 1) {
            bad++;
            printf("a completion that is no cancel: context %p\n", e.op_context);
        } else if (r == -FI_EAVAIL) {
            memset(&err, 0, sizeof(err));
            DIE_IF(fi_cq_readerr(o.cq, &err, 0) != 1, "fi_cq_readerr");
            if (err.err != FI_ECANCELED || (int *)err.op_context < ctx ||
                (int *)err.op_context >= ctx + n + late ||
                seen[(int *)err.op_context - ctx]++ != 0) {
                bad++;
                printf("error entry %d (%s) of context %p\n", err.err, fi_strerror(err.err),
                       err.op_context);
            }
            got++;
        }
    }
    CHECK(got == n + late && bad == 0, "%d of %d receives canceled, %d wrong entries", got,
          n + late, bad);
    CHECK(fi_cancel(&ep->fid, &ctx[order[0]]) == -FI_ENOENT,
          "cancel of a context whose receive was canceled already");
    CHECK(fi_trecv(ep, buf, sizeof(buf), NULL, FI_ADDR_UNSPEC, 0x33, 0, &ctx[order[0]]) == 0,
          "trecv with a context used before");
    CHECK(fi_cancel(&ep->fid, &ctx[order[0]]) == 0, "cancel of a context used again");
    expect_canceled(o.cq, &ctx[order[0]], "receive with a context used again");
    CHECK(fi_close(&ep->fid) == 0, "close ep");
    close_objs(&o);
    free(ctx);
    free(seen);
    free(order);
}

static struct fid_cq *sig_cq;
static ssize_t        sig_ret;
static double         sig_secs;

static void *sread_thread(void *arg)
{
    struct fi_cq_tagged_entry e;
    double                    t0 = now();

    (void)arg;
    sig_ret  = fi_cq_sread(sig_cq, &e, 1, NULL, -1);
    sig_secs = now() - t0;
    return NULL;
}

/* fi_cq_signal wakes a thread blocked in fi_cq_sread with no time limit (-FI_EAGAIN), and a
 * signal that found nobody waiting makes the next fi_cq_sread return at once. */
static void test_signal(void)
{
    objs_t                    o;
    pthread_t                 t;
    struct timespec           ts;
    struct fi_cq_tagged_entry e;
    double                    t0;
    ssize_t                   n;

    open_objs(&o, FI_THREAD_SAFE);
    sig_cq = o.cq;
    DIE_IF(pthread_create(&t, NULL, sread_thread, NULL) != 0, "pthread_create");
    usleep(100000);
    CHECK(fi_cq_signal(o.cq) == 0, "fi_cq_signal");
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += 10;
    /* the thread cannot be stopped otherwise: a test that hangs here fails at once */
    DIE_IF(pthread_timedjoin_np(t, NULL, &ts) != 0,
           "fi_cq_sread(timeout -1) not woken by fi_cq_signal in 10 s");
    CHECK(sig_ret == -FI_EAGAIN, "woken fi_cq_sread returned %zd", sig_ret);
    CHECK(fi_cq_signal(o.cq) == 0, "fi_cq_signal");
    t0 = now();
    n  = fi_cq_sread(o.cq, &e, 1, NULL, 5000);
    CHECK(n == -FI_EAGAIN && now() - t0 < 2.5, "fi_cq_sread after a signal: %zd after %.2f s",
          n, now() - t0);
    /* the signal is used up: the next one waits its time */
    t0 = now();
    n  = fi_cq_sread(o.cq, &e, 1, NULL, 100);
    CHECK(n == -FI_EAGAIN && now() - t0 >= 0.09, "fi_cq_sread(100 ms): %zd after %.3f s", n,
          now() - t0);
    close_objs(&o);
}

static int            reader_stop; /* __atomic */
static struct fid_cq *reader_cq;

/* A thread that reads (and so progresses) reader_cq until reader_stop. */
static void *cq_reader(void *arg)
{
    struct fi_cq_tagged_entry e[4];
    struct fi_cq_err_entry    err;

    (void)arg;
    while (!__atomic_load_n(&reader_stop, __ATOMIC_ACQUIRE)) {
        if (fi_cq_read(reader_cq, e, 4) == -FI_EAVAIL) {
            (void)fi_cq_readerr(reader_cq, &err, 0);
        }
    }
    return NULL;
}

/* FI_THREAD_SAFE: endpoints that share a CQ open, post a receive and close while another thread
 * reads (and so progresses) that CQ. */
static void test_close_race(void)
{
    objs_t    o;
    pthread_t t;
    char      buf[8];

    open_objs(&o, FI_THREAD_SAFE);
    reader_cq = o.cq;
    __atomic_store_n(&reader_stop, 0, __ATOMIC_RELEASE);
    DIE_IF(pthread_create(&t, NULL, cq_reader, NULL) != 0, "pthread_create");
    for (int i = 0; i < 200; i++) {
        struct fid_ep *ep = open_ep(&o);
        CHECK(fi_trecv(ep, buf, sizeof(buf), NULL, FI_ADDR_UNSPEC, 0x1, 0, NULL) == 0, "trecv");
        CHECK(fi_close(&ep->fid) == 0, "close ep %d", i);
    }
    __atomic_store_n(&reader_stop, 1, __ATOMIC_RELEASE);
    pthread_join(t, NULL);
    close_objs(&o);
}

/* Closing an endpoint with receives posted and a message claimed discards them (libfabric:
 * no completions); fi_bad.sh checks that tmx says nothing of requests left over. */
static void test_close_posted(void)
{
    objs_t               o;
    struct fid_ep       *ep, *ep2;
    struct fi_cq_tagged_entry e;
    char                 buf[8] = {0}, name[FI_NAME_MAX];
    size_t               len = sizeof(name);
    fi_addr_t            addr;
    int                  ctx[4];
    struct iovec         iov = {buf, sizeof(buf)};
    struct fi_msg_tagged tm  = {.msg_iov = &iov, .iov_count = 1, .addr = FI_ADDR_UNSPEC,
                                .tag = 0x9, .context = &ctx[2]};
    double               t0;
    ssize_t              n;

    open_objs(&o, FI_THREAD_UNSPEC);
    ep = open_ep(&o);
    CHECK(fi_trecv(ep, buf, sizeof(buf), NULL, FI_ADDR_UNSPEC, 0x7, 0, &ctx[0]) == 0, "trecv");
    CHECK(fi_recv(ep, buf, sizeof(buf), NULL, FI_ADDR_UNSPEC, &ctx[1]) == 0, "recv");
    /* a message to itself, claimed and never received */
    DIE_IF(fi_getname(&ep->fid, name, &len) != 0, "fi_getname");
    DIE_IF(fi_av_insert(o.av, name, 1, &addr, 0, NULL) != 1, "fi_av_insert");
    CHECK(fi_tinject(ep, buf, sizeof(buf), addr, 0x9) == 0, "tinject to itself");
    t0 = now();
    do {
        CHECK(fi_trecvmsg(ep, &tm, FI_PEEK | FI_CLAIM | FI_COMPLETION) == 0, "peek|claim");
        while ((n = fi_cq_read(o.cq, &e, 1)) == -FI_EAGAIN) {
        }
        if (n == -FI_EAVAIL) {
            struct fi_cq_err_entry err;
            (void)fi_cq_readerr(o.cq, &err, 0);
        }
    } while (n != 1 && now() - t0 < 5);
    CHECK(n == 1 && e.op_context == &ctx[2], "claim of the message to itself: %zd", n);
    /* a second endpoint with a receive, closed first: the first is still usable */
    ep2 = open_ep(&o);
    CHECK(fi_trecv(ep2, buf, sizeof(buf), NULL, FI_ADDR_UNSPEC, 0x7, 0, &ctx[3]) == 0, "trecv");
    CHECK(fi_close(&ep2->fid) == 0, "close ep2");
    CHECK(fi_close(&ep->fid) == 0, "close ep");
    close_objs(&o);
}

/* Lengths no buffer has: a vector element longer than max_msg_size is refused (its sum with
 * another wrapped, sized the bounce buffer small and the gather copy overran it), and a CQ of
 * 2^40 entries asked for opens (its ring grows as needed). */
static void test_huge_lengths(void)
{
    objs_t               o;
    struct fid_ep       *ep;
    struct fid_cq       *cq  = NULL;
    struct fi_cq_attr    cqa = {.format = FI_CQ_FORMAT_TAGGED, .size = (size_t)1 << 40};
    static char          buf[64];
    char                 name[FI_NAME_MAX];
    size_t               len = sizeof(name);
    fi_addr_t            self;
    int                  ctx;
    struct iovec         iov[2] = {{buf, SIZE_MAX}, {buf, 2}};
    struct fi_msg_tagged tm = {.msg_iov = iov, .iov_count = 2, .tag = 0x3, .context = &ctx};

    open_objs(&o, FI_THREAD_UNSPEC);
    ep = open_ep(&o);
    DIE_IF(fi_getname(&ep->fid, name, &len) != 0, "fi_getname");
    DIE_IF(fi_av_insert(o.av, name, 1, &self, 0, NULL) != 1, "fi_av_insert");
    CHECK(fi_tsendv(ep, iov, NULL, 2, self, 0x3, &ctx) == -FI_EINVAL,
          "fi_tsendv of an element of SIZE_MAX bytes taken");
    CHECK(fi_sendv(ep, iov, NULL, 2, self, &ctx) == -FI_EINVAL,
          "fi_sendv of an element of SIZE_MAX bytes taken");
    tm.addr = self;
    CHECK(fi_tsendmsg(ep, &tm, FI_COMPLETION) == -FI_EINVAL,
          "fi_tsendmsg of an element of SIZE_MAX bytes taken");
    CHECK(fi_trecvv(ep, iov, NULL, 2, FI_ADDR_UNSPEC, 0x3, 0, &ctx) == -FI_EINVAL,
          "fi_trecvv of an element of SIZE_MAX bytes taken");
    /* a read asking for more entries than any buffer holds: the one completion, nothing else.
     * A guard: before the provider bounded count, its end pointer (buffer + count) wrapped
     * below the buffer, so the completion went to the ring and a later read returned it; no
     * check here sees that difference (UBSan does not flag the wrap either). */
    {
        struct fi_cq_tagged_entry e[4];
        uint64_t                  v = 42, w = 0;
        ssize_t                   r = -FI_EAGAIN;
        double                    t = now();
        objs_t                    o2;
        struct fid_ep            *ep2;
        fi_addr_t                 to;

        /* the sender in a domain of its own: the message waits for ep's progress, which the
         * read makes (with the send to itself, ep's own inject delivered it first) */
        open_objs(&o2, FI_THREAD_UNSPEC);
        ep2 = open_ep(&o2);
        DIE_IF(fi_av_insert(o2.av, name, 1, &to, 0, NULL) != 1, "fi_av_insert");
        CHECK(fi_trecv(ep, &w, sizeof(w), NULL, FI_ADDR_UNSPEC, 0x5, 0, &ctx) == 0, "fi_trecv");
        CHECK(fi_tinject(ep2, &v, sizeof(v), to, 0x5) == 0, "fi_tinject");
        while (r == -FI_EAGAIN && now() - t < 5) {
            struct fi_cq_tagged_entry e2;

            (void)fi_cq_read(o2.cq, &e2, 1); /* the sender's side of the connection */
            r = fi_cq_read(o.cq, e, SIZE_MAX / 2);
        }
        CHECK(r == 1 && e[0].op_context == &ctx && w == 42,
              "fi_cq_read of SIZE_MAX / 2 entries: %zd, value %llu", r, (unsigned long long)w);
        CHECK(fi_close(&ep2->fid) == 0, "close ep2");
        close_objs(&o2);
    }
    CHECK(fi_close(&ep->fid) == 0, "close ep");
    /* an entry removed twice: the second is -FI_EINVAL, as an index that never was one */
    CHECK(fi_av_remove(o.av, &self, 1, 0) == 0, "fi_av_remove");
    CHECK(fi_av_remove(o.av, &self, 1, 0) == -FI_EINVAL, "fi_av_remove of a removed entry");
    CHECK(fi_cq_open(o.domain, &cqa, &cq, NULL) == 0, "fi_cq_open of 2^40 entries");
    CHECK(cq == NULL || fi_close(&cq->fid) == 0, "close big cq");
    close_objs(&o);
}

/* Sends and receives on an endpoint not enabled yet: -FI_EOPBADSTATE, as libfabric's
 * providers answer (they were -FI_EINVAL). */
static void test_not_enabled(void)
{
    objs_t               o;
    struct fid_ep       *ep;
    static char          buf[64];
    int                  ctx;
    struct iovec         iov = {buf, 8};
    struct fi_msg_tagged tm  = {.msg_iov = &iov, .iov_count = 1, .tag = 0x3, .context = &ctx};

    open_objs(&o, FI_THREAD_UNSPEC);
    DIE_IF(fi_endpoint(o.domain, o.info, &ep, NULL) != 0, "fi_endpoint");
    DIE_IF(fi_ep_bind(ep, &o.cq->fid, FI_TRANSMIT | FI_RECV) != 0, "bind cq");
    DIE_IF(fi_ep_bind(ep, &o.av->fid, 0) != 0, "bind av");
    CHECK(fi_tsend(ep, buf, 8, NULL, 0, 0x3, &ctx) == -FI_EOPBADSTATE, "fi_tsend");
    CHECK(fi_tinject(ep, buf, 8, 0, 0x3) == -FI_EOPBADSTATE, "fi_tinject");
    CHECK(fi_tsendv(ep, &iov, NULL, 1, 0, 0x3, &ctx) == -FI_EOPBADSTATE, "fi_tsendv");
    CHECK(fi_tsendmsg(ep, &tm, 0) == -FI_EOPBADSTATE, "fi_tsendmsg");
    CHECK(fi_send(ep, buf, 8, NULL, 0, &ctx) == -FI_EOPBADSTATE, "fi_send");
    CHECK(fi_trecv(ep, buf, 8, NULL, FI_ADDR_UNSPEC, 0x3, 0, &ctx) == -FI_EOPBADSTATE,
          "fi_trecv");
    CHECK(fi_trecvv(ep, &iov, NULL, 1, FI_ADDR_UNSPEC, 0x3, 0, &ctx) == -FI_EOPBADSTATE,
          "fi_trecvv");
    CHECK(fi_recv(ep, buf, 8, NULL, FI_ADDR_UNSPEC, &ctx) == -FI_EOPBADSTATE, "fi_recv");
    DIE_IF(fi_enable(ep) != 0, "fi_enable");
    CHECK(fi_trecv(ep, buf, 8, NULL, FI_ADDR_UNSPEC, 0x3, 0, &ctx) == 0, "fi_trecv enabled");
    CHECK(fi_close(&ep->fid) == 0, "close ep");
    close_objs(&o);
}

/* Injects to a peer that takes nothing: the provider copies what tmx cannot send at once, and
 * those copies are bounded (-FI_EAGAIN past 64 MiB; 65536 injects of 16 KiB held 1 GiB), then
 * the peer receives every one, in order, and injects go on. */
static void test_inject_bound(void)
{
    enum { LEN = 16384 };
    objs_t                    o;
    struct fi_cq_attr         cqa = {.format = FI_CQ_FORMAT_TAGGED};
    struct fid_cq            *cqb;
    struct fid_ep            *a, *b;
    struct fi_cq_tagged_entry e;
    static char               sbuf[LEN], rbuf[LEN];
    char                      name[FI_NAME_MAX];
    size_t                    len = sizeof(name);
    fi_addr_t                 to_b;
    int                       ctx, n = 0, got = 0, bad = 0;
    ssize_t                   r  = 0;
    double                    t0 = now();
    pthread_t                 t;

    open_objs(&o, FI_THREAD_SAFE);
    a = open_ep(&o);
    DIE_IF(fi_cq_open(o.domain, &cqa, &cqb, NULL) != 0, "fi_cq_open");
    DIE_IF(fi_endpoint(o.domain, o.info, &b, NULL) != 0, "fi_endpoint");
    DIE_IF(fi_ep_bind(b, &cqb->fid, FI_TRANSMIT | FI_RECV) != 0, "bind cq");
    DIE_IF(fi_ep_bind(b, &o.av->fid, 0) != 0, "bind av");
    DIE_IF(fi_enable(b) != 0, "fi_enable");
    DIE_IF(fi_getname(&b->fid, name, &len) != 0, "fi_getname");
    DIE_IF(fi_av_insert(o.av, name, 1, &to_b, 0, NULL) != 1, "fi_av_insert");
    /* connected: one message through, both reading */
    CHECK(fi_trecv(b, rbuf, LEN, NULL, FI_ADDR_UNSPEC, 0x6, 0, &ctx) == 0, "trecv");
    CHECK(fi_tinject(a, sbuf, 8, to_b, 0x6) == 0, "tinject");
    while ((r = fi_cq_read(cqb, &e, 1)) == -FI_EAGAIN && now() - t0 < 10) {
        (void)fi_cq_read(o.cq, &e, 1);
    }
    CHECK(r == 1, "first message: %zd", r);
    /* b takes nothing now */
    for (n = 0; n < 70000; n++) {
        memcpy(sbuf, &n, sizeof(n));
        r = fi_tinject(a, sbuf, LEN, to_b, 0x7);
        if (r != 0) {
            break;
        }
    }
    CHECK(r == -FI_EAGAIN, "the inject that did not go: %zd (%s)", r, fi_strerror((int)-r));
    CHECK(n >= 64 && n <= (64 << 20) / LEN + 256,
          "%d injects of %d bytes taken before -FI_EAGAIN (copies held: 64 MiB at most)", n,
          LEN);
    /* b receives them all, in order */
    for (got = 0; got < n && now() - t0 < 60; got++) {
        int v = -1;
        CHECK(fi_trecv(b, rbuf, LEN, NULL, FI_ADDR_UNSPEC, 0x7, 0, &ctx) == 0, "trecv %d", got);
        while ((r = fi_cq_read(cqb, &e, 1)) == -FI_EAGAIN && now() - t0 < 60) {
            (void)fi_cq_read(o.cq, &e, 1); /* a's progress sends the copies */
        }
        memcpy(&v, rbuf, sizeof(v));
        bad += r != 1 || v != got;
        if (r != 1) {
            break;
        }
    }
    CHECK(got == n && bad == 0, "%d of %d injects received, %d wrong", got, n, bad);
    CHECK(fi_tinject(a, sbuf, LEN, to_b, 0x8) == 0, "an inject after the peer took them");
    /* a closes while another thread progresses b (its disconnect needs b's answer) */
    reader_cq = cqb;
    __atomic_store_n(&reader_stop, 0, __ATOMIC_RELEASE);
    DIE_IF(pthread_create(&t, NULL, cq_reader, NULL) != 0, "pthread_create");
    CHECK(fi_close(&a->fid) == 0, "close a");
    __atomic_store_n(&reader_stop, 1, __ATOMIC_RELEASE);
    pthread_join(t, NULL);
    CHECK(fi_close(&b->fid) == 0, "close b");
    CHECK(fi_close(&cqb->fid) == 0, "close cq b");
    close_objs(&o);
}

/* The name of an endpoint whose process is gone (make_gone_name, before anything else) */
static char gone_name[FI_NAME_MAX];
static int  have_gone;

static void make_gone_name(void)
{
    int   fd[2];
    pid_t pid;

    DIE_IF(pipe(fd) != 0, "pipe");
    pid = fork();
    DIE_IF(pid < 0, "fork");
    if (pid == 0) {
        objs_t         o;
        struct fid_ep *ep;
        size_t         len = sizeof(gone_name);
        open_objs(&o, FI_THREAD_UNSPEC);
        ep = open_ep(&o);
        DIE_IF(fi_getname(&ep->fid, gone_name, &len) != 0, "fi_getname");
        DIE_IF(write(fd[1], gone_name, sizeof(gone_name)) != (ssize_t)sizeof(gone_name),
               "write");
        _exit(0); /* gone without closing anything */
    }
    close(fd[1]);
    have_gone = read(fd[0], gone_name, sizeof(gone_name)) == (ssize_t)sizeof(gone_name);
    close(fd[0]);
    waitpid(pid, NULL, 0);
}

/* A send to a name whose process is gone is a peer error (-FI_EHOSTUNREACH from tmx's
 * connect), and a damaged name -FI_EADDRNOTAVAIL: not -FI_EINVAL, which says the
 * application's arguments were wrong (an fi_addr that is no AV entry still is). */
static void test_gone_peer(void)
{
    objs_t         o;
    struct fid_ep *ep;
    char           buf[8] = {0}, bad[FI_NAME_MAX];
    fi_addr_t      gone, damaged;
    int            ctx;
    ssize_t        r;

    DIE_IF(!have_gone, "no name from the child");
    open_objs(&o, FI_THREAD_UNSPEC);
    ep = open_ep(&o);
    CHECK(fi_av_insert(o.av, gone_name, 1, &gone, 0, NULL) == 1, "insert the gone name");
    r = fi_tsend(ep, buf, sizeof(buf), NULL, gone, 0x1, &ctx);
    CHECK(r == -FI_EHOSTUNREACH, "fi_tsend to a process that is gone: %zd (%s)", r,
          fi_strerror((int)-r));
    r = fi_tinject(ep, buf, sizeof(buf), gone, 0x1);
    CHECK(r == -FI_EHOSTUNREACH, "fi_tinject to a process that is gone: %zd (%s)", r,
          fi_strerror((int)-r));
    memcpy(bad, gone_name, sizeof(bad));
    memset(bad + 1, 0xa5, 8); /* the length byte kept, the address's start broken */
    CHECK(fi_av_insert(o.av, bad, 1, &damaged, 0, NULL) == 1, "insert a damaged name");
    r = fi_tsend(ep, buf, sizeof(buf), NULL, damaged, 0x1, &ctx);
    CHECK(r == -FI_EADDRNOTAVAIL, "fi_tsend to a damaged name: %zd (%s)", r,
          fi_strerror((int)-r));
    r = fi_tsend(ep, buf, sizeof(buf), NULL, damaged + 100, 0x1, &ctx);
    CHECK(r == -FI_EINVAL, "fi_tsend to no entry: %zd (%s)", r, fi_strerror((int)-r));
    CHECK(fi_close(&ep->fid) == 0, "close ep");
    close_objs(&o);
}

/* A child that sends BIG bytes (tag 0x1) to the process that gave it its name, then only
 * progresses until it is killed (make_dying_peer, before anything else). */
enum { BIG = 32 << 20 };
static pid_t dying_pid = -1;
static int   dying_to, dying_from; /* pipes to and from it */

static void make_dying_peer(void)
{
    int to[2], from[2];

    DIE_IF(pipe(to) != 0 || pipe(from) != 0, "pipe");
    dying_pid = fork();
    DIE_IF(dying_pid < 0, "fork");
    if (dying_pid == 0) {
        objs_t                    o;
        struct fid_ep            *ep;
        struct fi_cq_tagged_entry e;
        char                      name[FI_NAME_MAX], *buf = calloc(1, BIG);
        size_t                    len = sizeof(name);
        fi_addr_t                 parent;
        int                       ctx;
        ssize_t                   r;

        close(to[1]);
        close(from[0]);
        open_objs(&o, FI_THREAD_UNSPEC);
        ep = open_ep(&o);
        DIE_IF(fi_getname(&ep->fid, name, &len) != 0, "fi_getname");
        DIE_IF(write(from[1], name, sizeof(name)) != (ssize_t)sizeof(name), "write");
        if (read(to[0], name, sizeof(name)) != (ssize_t)sizeof(name)) {
            _exit(0); /* the test did not run */
        }
        DIE_IF(fi_av_insert(o.av, name, 1, &parent, 0, NULL) != 1, "fi_av_insert");
        while ((r = fi_tsend(ep, buf, BIG, NULL, parent, 0x1, &ctx)) == -FI_EAGAIN) {
            (void)fi_cq_read(o.cq, &e, 1);
        }
        for (;;) {
            if (fi_cq_read(o.cq, &e, 1) == -FI_EAVAIL) {
                struct fi_cq_err_entry err;
                (void)fi_cq_readerr(o.cq, &err, 0);
            }
        }
    }
    close(to[0]);
    close(from[1]);
    dying_to   = to[1];
    dying_from = from[0];
}

/* A peer killed (SIGKILL) while a rendezvous message of it is coming in, a receive directed at
 * it waits and a rendezvous send to it waits: each completes, with FI_ECONNABORTED where the
 * peer is needed (the message coming in may have finished first), within seconds; a send to
 * it afterwards is -FI_ECONNABORTED. Nothing hangs. */
static void test_peer_dies(void)
{
    objs_t         o;
    struct fid_ep *ep;
    char           name[FI_NAME_MAX], small[8], *in = malloc(BIG), *out = calloc(1, BIG);
    size_t         len = sizeof(name);
    fi_addr_t      peer;
    int            ctx[3], done[3] = {0, 0, 0}, errs[3] = {0, 0, 0};
    double         t0;
    ssize_t        r;

    DIE_IF(dying_pid < 0, "no child");
    open_objs(&o, FI_THREAD_UNSPEC);
    ep = open_ep(&o);
    DIE_IF(read(dying_from, name, sizeof(name)) != (ssize_t)sizeof(name), "child's name");
    DIE_IF(fi_av_insert(o.av, name, 1, &peer, 0, NULL) != 1, "fi_av_insert");
    DIE_IF(fi_getname(&ep->fid, name, &len) != 0, "fi_getname");
    CHECK(fi_trecv(ep, small, sizeof(small), NULL, peer, 0x2, 0, &ctx[1]) == 0,
          "directed trecv");
    CHECK(fi_tsend(ep, out, BIG, NULL, peer, 0x3, &ctx[2]) == 0, "tsend big");
    DIE_IF(write(dying_to, name, sizeof(name)) != (ssize_t)sizeof(name), "write");
    /* the child's message has arrived (a peek sees it), then the receive that takes it: the
     * transfer starts, and the child is killed at once */
    t0 = now();
    for (r = 0; r != 1 && now() - t0 < 20;) {
        struct iovec              iov = {NULL, 0};
        struct fi_msg_tagged      m   = {.msg_iov = &iov, .iov_count = 0, .addr = FI_ADDR_UNSPEC,
                                         .tag = 0x1, .context = &ctx[0]};
        struct fi_cq_tagged_entry e;
        struct fi_cq_err_entry    err;
        CHECK(fi_trecvmsg(ep, &m, FI_PEEK | FI_COMPLETION) == 0, "peek");
        while ((r = fi_cq_read(o.cq, &e, 1)) == -FI_EAGAIN) {
        }
        if (r == -FI_EAVAIL) {
            DIE_IF(fi_cq_readerr(o.cq, &err, 0) != 1, "readerr");
            DIE_IF(err.op_context != &ctx[0] || err.err != FI_ENOMSG, "error entry %d",
                   err.err);
        } else {
            DIE_IF(r != 1 || e.op_context != &ctx[0], "peek: %zd", r);
        }
    }
    DIE_IF(r != 1, "the child's message never came");
    CHECK(fi_trecv(ep, in, BIG, NULL, FI_ADDR_UNSPEC, 0x1, 0, &ctx[0]) == 0, "trecv big");
    kill(dying_pid, SIGKILL);
    waitpid(dying_pid, NULL, 0);
    dying_pid = -1;
    t0 = now();
    while ((!done[0] || !done[1] || !done[2]) && now() - t0 < 30) {
        struct fi_cq_tagged_entry e;
        struct fi_cq_err_entry    err;
        void                     *c = NULL;
        int                       eno = 0;
        r = fi_cq_read(o.cq, &e, 1);
        if (r == 1) {
            c = e.op_context;
        } else if (r == -FI_EAVAIL) {
            memset(&err, 0, sizeof(err));
            DIE_IF(fi_cq_readerr(o.cq, &err, 0) != 1, "readerr");
            c   = err.op_context;
            eno = err.err;
        }
        for (int i = 0; i < 3; i++) {
            if (c == &ctx[i]) {
                done[i]++;
                errs[i] = eno;
            }
        }
    }
    CHECK(done[0] == 1 && (errs[0] == 0 || errs[0] == FI_ECONNABORTED),
          "message coming in from the killed peer: %d completions, err %d", done[0], errs[0]);
    CHECK(done[1] == 1 && errs[1] == FI_ECONNABORTED,
          "receive directed at the killed peer: %d completions, err %d", done[1], errs[1]);
    CHECK(done[2] == 1 && errs[2] == FI_ECONNABORTED,
          "send to the killed peer: %d completions, err %d", done[2], errs[2]);
    r = fi_tsend(ep, small, sizeof(small), NULL, peer, 0x4, &ctx[0]);
    CHECK(r == -FI_ECONNABORTED, "send after the peer died: %zd (%s)", r, fi_strerror((int)-r));
    CHECK(fi_close(&ep->fid) == 0, "close ep");
    close_objs(&o);
    free(in);
    free(out);
}

int main(int argc, char **argv)
{
    const char *only = argc > 1 ? argv[1] : NULL;

    setvbuf(stdout, NULL, _IOLBF, 0);
    /* first: the children fork from a process that used nothing yet */
    make_gone_name();
    make_dying_peer();
#define RUN(t)                                                                                    \
    if (only == NULL || strcmp(only, #t) == 0) {                                                  \
        printf("%s\n", #t);                                                                       \
        t();                                                                                      \
    }
    RUN(test_threading_hints);
    RUN(test_odd_hints);
    RUN(test_foreign_bind);
    RUN(test_cq_eps);
    RUN(test_more_flag);
    RUN(test_cancel_many);
    RUN(test_signal);
    RUN(test_close_race);
    RUN(test_close_posted);
    RUN(test_huge_lengths);
    RUN(test_not_enabled);
    RUN(test_gone_peer);
    RUN(test_inject_bound);
    RUN(test_peer_dies);
    if (dying_pid > 0 && kill(dying_pid, 0) == 0) {
        close(dying_to); /* not used: it exits */
        waitpid(dying_pid, NULL, 0);
    }
    printf("%s\n", fails ? "FAIL" : "PASS");
    return fails ? 1 : 0;
}
