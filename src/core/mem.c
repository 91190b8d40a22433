/*
 * Memory the user registers with a worker (tmx_mem_map): rendezvous messages whose buffer lies
 * in such a range use its registration instead of registering their buffer per message.
 *
 * The registration cache (TMX_MR_CACHE=N, off by default): a rendezvous buffer outside every
 * mapping is registered page-aligned and kept after its message, up to N per worker (the least
 * recently used one with no message in flight goes first), for the next message from or into
 * the same memory. A registration pins the pages it saw, so the cache must learn when memory
 * leaves the process (munmap, a heap trimmed by free, madvise(MADV_DONTNEED), mremap): a
 * buffer mapped again at the same address would otherwise be sent from, or received into, the
 * old pages, silently. It learns it from a userfaultfd(2) with UFFD_FEATURE_EVENT_UNMAP,
 * _REMOVE and _REMAP: each cached range is registered with it in write-protect mode
 * (UFFDIO_REGISTER_MODE_WP), and since tmx never write-protects a page no page fault of the
 * program ever reaches it (unlike the missing-page mode, where a fault after
 * MADV_DONTNEED would wait for the monitor, and one from the kernel would fail with
 * UFFD_USER_MODE_ONLY); only the events do. The kernel holds the munmap or madvise until a
 * thread reads the event: the monitor thread reads them with rc.lock held and marks the
 * overlapping entries invalid before it lets go, so once the call has returned no lookup
 * (which takes rc.lock) can find them. Nothing under rc.lock allocates, frees or calls the
 * device (any of them could unmap memory and wait for the monitor): entries are allocated
 * before it and deregistered after it, by their worker only. A registration made while any
 * event arrived is used for its message only. Where userfaultfd is refused (not Linux, an old
 * kernel, a seccomp filter, vm.unprivileged_userfaultfd=0 on a kernel without
 * UFFD_USER_MODE_ONLY) or a range cannot be registered (a file mapping, memory another
 * userfaultfd watches), buffers are registered per message as without the cache.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#if defined(__linux__) && defined(__has_include)
#if __has_include(<linux/userfaultfd.h>)
#include <linux/userfaultfd.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#endif
#endif

#include "core/core.h"
#include "util/log.h"

#if defined(UFFDIO_REGISTER_MODE_WP) && defined(UFFD_FEATURE_EVENT_REMOVE) && \
    defined(SYS_userfaultfd)
#define TMX_MEM_UFFD 1
#endif

struct tmx_mem {
    uint32_t      magic;
    int           unmapped;  /* tmx_mem_unmap was called: freed when refs drops to 0 */
    unsigned      refs;      /* rendezvous requests using the registration now */
    tmx_worker_t *worker;
    uintptr_t     start, end;
    unsigned      access;    /* what the registrations allow */
    tmx_list_t    link;      /* worker->mems, while mapped; rc.ents if cached */
    tmx_mr_t     *mr[TMX_MAX_IFACES];
    int           cached;    /* an entry of the registration cache (mr[iface] only) */
    int           valid;     /* cached: its memory has not left since (rc.lock) */
    uint64_t      used;      /* cached: rc.clock at its last use (the LRU) */
};

/* The registration cache's monitor and entries, one per process (rc.lock) */
static struct {
    pthread_mutex_t lock;    /* rc.ents, each entry's valid, refs and used, gen, clock */
    pthread_mutex_t start;   /* users, fd, efd, thread */
    tmx_list_t      ents;    /* every worker's cached entries */
    uint64_t        gen;     /* events read */
    uint64_t        clock;
    unsigned        users;   /* workers with the monitor started */
    uintptr_t       page;    /* the page size, set before the first start */
    pid_t           pid;     /* the process that started the monitor */
    int             fd, efd; /* the userfaultfd, the monitor's stop eventfd */
    pthread_t       thread;
} rc = {.lock  = PTHREAD_MUTEX_INITIALIZER,
        .start = PTHREAD_MUTEX_INITIALIZER,
        .ents  = {&rc.ents, &rc.ents},
        .fd    = -1,
        .efd   = -1};

static void tmx_mem_free(tmx_mem_t *m)
{
    tmx_worker_t *w = m->worker;

    for (int i = 0; i < w->num_ifaces; i++) {
        if (m->mr[i] != NULL) {
            w->ifaces[i].ops->mr_dereg(m->mr[i]);
        }
    }
    m->magic = TMX_MAGIC_DEAD;
    free(m);
}

TMX_API tmx_status_t tmx_mem_map(tmx_worker_h w, void *addr, size_t len, tmx_mem_h *memh_p)
{
    tmx_mem_t   *m;
    tmx_status_t status = TMX_OK;

    if (w == NULL || addr == NULL || len == 0 || memh_p == NULL ||
        (uintptr_t)addr + len < (uintptr_t)addr) {
        return TMX_ERR_INVALID_PARAM;
    }
    if (w->magic != TMX_MAGIC_WORKER) {
        return TMX_ERR_INVALID_HANDLE;
    }
    m = calloc(1, sizeof(*m));
    if (m == NULL) {
        return TMX_ERR_NO_MEMORY;
    }
    m->magic  = TMX_MAGIC_MEM;
    m->worker = w;
    m->start  = (uintptr_t)addr;
    m->end    = (uintptr_t)addr + len;
    m->access = TMX_ACCESS_LOCAL_WRITE | TMX_ACCESS_REMOTE_READ;
    tmx_worker_lock(w);
    for (int i = 0; i < w->num_ifaces && status == TMX_OK; i++) {
        tmx_iface_t *iface = &w->ifaces[i];

        status = iface->ops->mr_reg(iface->pd, addr, len,
                                    m->access, &m->mr[i]);
        if (status != TMX_OK) {
            m->mr[i] = NULL;
        }
    }
    if (status != TMX_OK) {
        tmx_mem_free(m);
        tmx_worker_unlock(w);
        return status;
    }
    tmx_list_add_tail(&w->mems, &m->link);
    tmx_worker_unlock(w);
    *memh_p = m;
    return TMX_OK;
}

TMX_API tmx_status_t tmx_mem_unmap(tmx_mem_h m)
{
    tmx_worker_t *w;

    if (m == NULL) {
        return TMX_ERR_INVALID_PARAM;
    }
    if (m->magic != TMX_MAGIC_MEM || m->unmapped) {
        return TMX_ERR_INVALID_HANDLE;
    }
    w = m->worker;
    tmx_worker_lock(w);
    m->unmapped = 1;
    tmx_list_del(&m->link);
    if (m->refs == 0) {
        tmx_mem_free(m);
    }
    tmx_worker_unlock(w);
    return TMX_OK;
}

#ifdef TMX_MEM_UFFD
/* The monitor: every event that takes memory from the process invalidates the entries it
 * overlaps, read and applied under rc.lock (see the top of the file). */
static void *tmx_mem_monitor(void *arg)
{
    struct pollfd p[2] = {{.fd = rc.fd, .events = POLLIN}, {.fd = rc.efd, .events = POLLIN}};

    (void)arg;
    for (;;) {
        if (poll(p, 2, -1) < 0) {
            if (errno == EINTR) {
                continue;
            }
            break;
        }
        if (p[1].revents != 0) {
            break;
        }
        pthread_mutex_lock(&rc.lock);
        for (;;) {
            struct uffd_msg m;
            uintptr_t       s, e;
            tmx_list_t     *l;

            if (read(rc.fd, &m, sizeof(m)) != (ssize_t)sizeof(m)) {
                break; /* EAGAIN: none left */
            }
            if (m.event == UFFD_EVENT_UNMAP || m.event == UFFD_EVENT_REMOVE) {
                s = (uintptr_t)m.arg.remove.start;
                e = (uintptr_t)m.arg.remove.end;
            } else if (m.event == UFFD_EVENT_REMAP) {
                s = (uintptr_t)m.arg.remap.from;
                e = s + (uintptr_t)m.arg.remap.len;
            } else {
                continue; /* no page is write-protected: no fault comes */
            }
            rc.gen++;
            tmx_list_for_each(l, &rc.ents) {
                tmx_mem_t *c = tmx_container_of(l, tmx_mem_t, link);

                if (c->start < e && s < c->end) {
                    c->valid = 0;
                }
            }
        }
        pthread_mutex_unlock(&rc.lock);
    }
    return NULL;
}

/* Starts the monitor for worker w (once per process; w->mr_cache 1), or says why not (-1). */
static void tmx_mem_cache_start(tmx_worker_t *w)
{
    struct uffdio_api api;
    const char       *why = NULL;
    int               fd, eno = 0;

    pthread_mutex_lock(&rc.start);
    rc.page = (uintptr_t)sysconf(_SC_PAGESIZE);
    if (rc.users > 0 && rc.pid != getpid()) {
        /* a child forked with the monitor running: the userfaultfd watches the parent's
         * memory, and no thread reads it here */
        w->mr_cache = -1;
        pthread_mutex_unlock(&rc.start);
        tmx_info("registration cache off: in a child forked from a process that runs the "
                 "monitor; rendezvous buffers are registered per message");
        return;
    }
    if (rc.users > 0) {
        rc.users++;
        w->mr_cache = 1;
        pthread_mutex_unlock(&rc.start);
        return;
    }
#ifdef UFFD_USER_MODE_ONLY
    /* only events are wanted: this needs no privilege where vm.unprivileged_userfaultfd=0 */
    fd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK | UFFD_USER_MODE_ONLY);
    if (fd < 0 && errno == EINVAL)
#endif
    {
        fd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);
    }
    if (fd < 0) {
        why = "userfaultfd";
        eno = errno;
    } else {
        memset(&api, 0, sizeof(api));
        api.api      = UFFD_API;
        api.features = UFFD_FEATURE_EVENT_UNMAP | UFFD_FEATURE_EVENT_REMOVE |
                       UFFD_FEATURE_EVENT_REMAP;
        if (ioctl(fd, UFFDIO_API, &api) != 0) {
            why = "UFFDIO_API (unmap, remove and remap events)";
            eno = errno;
        } else if ((rc.efd = eventfd(0, EFD_CLOEXEC)) < 0) {
            why = "eventfd";
            eno = errno;
        } else {
            sigset_t all, old;
            int      err;

            /* the program's signals go to its own threads, never to the monitor */
            sigfillset(&all);
            pthread_sigmask(SIG_SETMASK, &all, &old);
            rc.fd = fd;
            err   = pthread_create(&rc.thread, NULL, tmx_mem_monitor, NULL);
            pthread_sigmask(SIG_SETMASK, &old, NULL);
            if (err != 0) {
                why = "pthread_create";
                eno = err;
                close(rc.efd);
                rc.efd = -1;
                rc.fd  = -1;
            }
        }
        if (why != NULL) {
            close(fd);
        }
    }
    if (why != NULL) {
        w->mr_cache = -1;
        pthread_mutex_unlock(&rc.start);
        tmx_info("registration cache off: %s failed (%s); rendezvous buffers are registered per "
                 "message", why, strerror(eno));
        return;
    }
    rc.users    = 1;
    rc.pid      = getpid();
    w->mr_cache = 1;
    pthread_mutex_unlock(&rc.start);
}

static void tmx_mem_cache_stop(void)
{
    uint64_t one = 1;

    pthread_mutex_lock(&rc.start);
    if (rc.users > 0 && --rc.users == 0) {
        if (rc.pid == getpid()) { /* a forked child has no monitor thread to stop */
            if (write(rc.efd, &one, sizeof(one)) != (ssize_t)sizeof(one)) {
                tmx_warn("registration cache: the monitor could not be told to stop");
            }
            pthread_join(rc.thread, NULL);
        }
        close(rc.efd);
        close(rc.fd); /* unregisters every range */
        rc.efd = -1;
        rc.fd  = -1;
    }
    pthread_mutex_unlock(&rc.start);
}
#else
static void tmx_mem_cache_start(tmx_worker_t *w)
{
    w->mr_cache = -1;
    tmx_info("registration cache off: no userfaultfd events in this build; rendezvous buffers "
             "are registered per message");
}

static void tmx_mem_cache_stop(void)
{
}
#endif

static uintptr_t tmx_mem_page_down(uintptr_t a)
{
    return a & ~(rc.page - 1);
}

static uintptr_t tmx_mem_page_up(uintptr_t a)
{
    return tmx_mem_page_down(a + rc.page - 1);
}

/* Entry c has just left rc.ents (rc.lock held): its range stops being watched unless another
 * entry overlaps it, so that the program's later munmap and madvise of it do not wait for the
 * monitor. Under rc.lock, so that no entry registered meanwhile loses its watch. */
static void tmx_mem_cache_unwatch(tmx_mem_t *c)
{
#ifdef TMX_MEM_UFFD
    struct uffdio_range r;
    tmx_list_t         *l;

    uintptr_t           s = tmx_mem_page_down(c->start), e = tmx_mem_page_up(c->end);

    tmx_list_for_each(l, &rc.ents) {
        tmx_mem_t *o = tmx_container_of(l, tmx_mem_t, link);

        if (tmx_mem_page_down(o->start) < e && s < tmx_mem_page_up(o->end)) {
            return;
        }
    }
    r.start = s;
    r.len   = e - s;
    (void)ioctl(rc.fd, UFFDIO_UNREGISTER, &r); /* fails if it is unmapped already */
#else
    (void)c;
#endif
}

/* Moves w's entries (every one, or the invalid ones and, past TMX_MR_CACHE, the least recently
 * used) that no message holds from rc.ents to *out; rc.lock held. Returns how many w keeps. */
static unsigned tmx_mem_cache_reap(tmx_worker_t *w, int all, tmx_list_t *out)
{
    unsigned    max = w->ctx->cfg.mr_cache, n = 0;
    tmx_list_t *l, *next;

    for (l = rc.ents.next; l != &rc.ents; l = next) {
        tmx_mem_t *c = tmx_container_of(l, tmx_mem_t, link);

        next = l->next;
        if (c->worker != w) {
            continue;
        }
        if (all || (!c->valid && c->refs == 0)) {
            tmx_list_del(l);
            tmx_list_add_tail(out, l);
            tmx_mem_cache_unwatch(c);
        } else {
            n++;
        }
    }
    while (!all && n > max) {
        tmx_mem_t *old = NULL;

        tmx_list_for_each(l, &rc.ents) {
            tmx_mem_t *c = tmx_container_of(l, tmx_mem_t, link);

            if (c->worker == w && c->refs == 0 && (old == NULL || c->used < old->used)) {
                old = c;
            }
        }
        if (old == NULL) {
            break; /* every one in use */
        }
        tmx_list_del(&old->link);
        tmx_list_add_tail(out, &old->link);
        tmx_mem_cache_unwatch(old);
        n--;
    }
    return n;
}

static void tmx_mem_free_list(tmx_list_t *out)
{
    while (!tmx_list_is_empty(out)) {
        tmx_mem_free(tmx_container_of(tmx_list_pop_head(out), tmx_mem_t, link));
    }
}

/* A cached registration of buf for iface: TMX_OK (a hit, or a new entry), or not cacheable
 * here (the caller registers per message). */
static tmx_status_t tmx_mem_cache_get(tmx_iface_t *iface, void *buf, size_t len,
                                      unsigned access, tmx_mr_t **mr_p, tmx_mem_t **memh_p)
{
    tmx_worker_t *w   = iface->worker;
    int           idx = (int)(iface - w->ifaces);
    uintptr_t     b   = (uintptr_t)buf;
    tmx_list_t    out, *l;
    tmx_mem_t    *m = NULL;
    tmx_status_t  status;
    uint64_t      gen;

    if (w->mr_cache == 0) {
        tmx_mem_cache_start(w);
    }
    if (w->mr_cache < 0 || len == 0 || b + len < b || tmx_mem_page_up(b + len) < b) {
        return TMX_ERR_UNSUPPORTED;
    }
    tmx_list_init(&out);
    pthread_mutex_lock(&rc.lock);
    tmx_mem_cache_reap(w, 0, &out);
    tmx_list_for_each(l, &rc.ents) {
        tmx_mem_t *c = tmx_container_of(l, tmx_mem_t, link);

        if (c->worker == w && c->valid && c->mr[idx] != NULL && c->start <= b &&
            b + len <= c->end && (access & ~c->access) == 0) {
            m = c;
            break;
        }
    }
    if (m != NULL) {
        m->refs++;
        m->used = ++rc.clock;
    }
    gen = rc.gen;
    pthread_mutex_unlock(&rc.lock);
    tmx_mem_free_list(&out);
    if (m != NULL) {
        *mr_p   = m->mr[idx];
        *memh_p = m;
        w->stat_rndv_cached++;
        return TMX_OK;
    }
#ifdef TMX_MEM_UFFD
    {
        struct uffdio_register r;

        memset(&r, 0, sizeof(r));
        r.range.start = tmx_mem_page_down(b);
        r.range.len   = tmx_mem_page_up(b + len) - r.range.start;
        r.mode        = UFFDIO_REGISTER_MODE_WP;
        if (ioctl(rc.fd, UFFDIO_REGISTER, &r) != 0) {
            return TMX_ERR_UNSUPPORTED; /* a file mapping, or watched by another userfaultfd */
        }
    }
#endif
    m = calloc(1, sizeof(*m));
    if (m == NULL) {
        return TMX_ERR_UNSUPPORTED;
    }
    m->magic  = TMX_MAGIC_MEM;
    m->worker = w;
    /* the buffer's bytes exactly, not its pages: a peer that gets the key reads no neighbour */
    m->start  = b;
    m->end    = b + len;
    m->access = TMX_ACCESS_LOCAL_WRITE | TMX_ACCESS_REMOTE_READ;
    m->cached = 1;
    status    = iface->ops->mr_reg(iface->pd, buf, len, m->access, &m->mr[idx]);
    if (status != TMX_OK) {
        /* the device may be out of registrations: give back the idle ones (the caller's
         * registration per message comes next) */
        tmx_list_t *next;

        free(m);
        tmx_list_init(&out);
        pthread_mutex_lock(&rc.lock);
        for (l = rc.ents.next; l != &rc.ents; l = next) {
            tmx_mem_t *c = tmx_container_of(l, tmx_mem_t, link);

            next = l->next;
            if (c->worker == w && c->refs == 0) {
                tmx_list_del(l);
                tmx_list_add_tail(&out, l);
                tmx_mem_cache_unwatch(c);
            }
        }
        pthread_mutex_unlock(&rc.lock);
        tmx_mem_free_list(&out);
        return TMX_ERR_UNSUPPORTED;
    }
    w->stat_rndv_cache_regs++;
    m->refs = 1;
    tmx_list_init(&out);
    pthread_mutex_lock(&rc.lock);
    m->valid = rc.gen == gen; /* else memory left while we registered: this message only */
    m->used  = ++rc.clock;
    tmx_list_add_tail(&rc.ents, &m->link);
    tmx_mem_cache_reap(w, 0, &out);
    pthread_mutex_unlock(&rc.lock);
    tmx_mem_free_list(&out);
    *mr_p   = m->mr[idx];
    *memh_p = m;
    return TMX_OK;
}

/* The end of a message's use of cached entry m. */
static void tmx_mem_cache_put(tmx_mem_t *m)
{
    tmx_list_t out;

    tmx_list_init(&out);
    pthread_mutex_lock(&rc.lock);
    if (--m->refs == 0 && !m->valid) {
        tmx_list_del(&m->link);
        tmx_list_add_tail(&out, &m->link);
        tmx_mem_cache_unwatch(m);
    }
    pthread_mutex_unlock(&rc.lock);
    tmx_mem_free_list(&out);
}

/*
 * Staging buffers (TMX_RNDV_COPY on a TMX_DEV_CAP_REG_SLOW device): pools of
 * TMX_STAGE_COUNT buffers of TMX_RNDV_COPY bytes rounded up to pages (fewer when they would
 * pass TMX_STAGE_BYTES, at least TMX_STAGE_MIN), each pool one registration made at the first
 * message that can use it. A buffer is held from the copy in (a send) or the read (a
 * receive) until the FIN or the copy out. When a pool's buffers are all held, or it could
 * not be made, messages register their own buffers as before.
 *
 * - A receiver's reads land in its interface's pool, registered for local writes only: no
 *   peer gets a key to it.
 * - A sender's copies go to its endpoint's own pool, registered for remote reads, whose key
 *   goes to that peer alone in the RTS: what the peer can read with it is only what was sent
 *   to it. One pool for all peers would let every peer that got an RTS read the copies of
 *   messages sent to the others. At most TMX_STAGE_TX_POOLS endpoints of an interface have
 *   one at a time (the first to send); one that closes gives its pool up when its last
 *   buffer comes back.
 *
 * 8 buffers a pool, not more: a ping-pong uses one, and a window of 64 over rxe went no
 * faster with 64 (25-45 MB/s either way, bench/README.md h-verbs6), while pinned memory adds
 * up over the ranks of a node and the peers of a rank.
 */
#define TMX_STAGE_COUNT    8u
#define TMX_STAGE_MIN      4u
#define TMX_STAGE_BYTES    ((size_t)4 << 20)
#define TMX_STAGE_TX_POOLS 8u

struct tmx_stage_pool {
    tmx_iface_t           *iface;
    struct tmx_stage_pool *next;     /* the interface's list of pools (stage_pools) */
    uint8_t               *bufs;     /* count * size */
    tmx_mr_t              *mr;
    size_t                 size;
    unsigned               count;
    unsigned               free_top; /* free[0 .. free_top - 1]: buffers not held */
    int                    orphan;   /* its endpoint is gone: freed when the last comes back */
    int                    is_tx;    /* an endpoint's (counted in iface->stage_tx_pools) */
    uint32_t               free[];
};

/* Marks "tried, could not be made" where a pool pointer would be: never tried again. */
static tmx_stage_pool_t tmx_stage_failed;

static tmx_stage_pool_t *tmx_mem_stage_pool_new(tmx_iface_t *iface, unsigned access)
{
    tmx_worker_t     *w    = iface->worker;
    size_t            size = (w->ctx->cfg.rndv_copy + 4095) & ~(size_t)4095;
    unsigned          n    = TMX_STAGE_COUNT;
    tmx_stage_pool_t *pool;

    while (n > TMX_STAGE_MIN && n * size > TMX_STAGE_BYTES) {
        n /= 2;
    }
    pool = calloc(1, sizeof(*pool) + n * sizeof(pool->free[0]));
    if (pool == NULL) {
        return NULL;
    }
    pool->bufs = mmap(NULL, n * size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (pool->bufs == MAP_FAILED) {
        tmx_info("rendezvous staging buffers (%u of %zu bytes): no memory; buffers are "
                 "registered per message", n, size);
        free(pool);
        return NULL;
    }
    if (iface->ops->mr_reg(iface->pd, pool->bufs, n * size, access, &pool->mr) != TMX_OK) {
        tmx_info("rendezvous staging buffers (%u of %zu bytes) could not be registered; "
                 "buffers are registered per message", n, size);
        munmap(pool->bufs, n * size);
        free(pool);
        return NULL;
    }
    pool->iface = iface;
    pool->size  = size;
    pool->count = n;
    for (unsigned i = 0; i < n; i++) {
        pool->free[i] = n - 1 - i;
    }
    pool->free_top     = n;
    pool->is_tx        = (access & TMX_ACCESS_REMOTE_READ) != 0;
    pool->next         = iface->stage_pools;
    iface->stage_pools = pool;
    iface->stage_tx_pools += (unsigned)pool->is_tx;
    return pool;
}

static void tmx_mem_stage_pool_free(tmx_stage_pool_t *pool)
{
    tmx_iface_t       *iface = pool->iface;
    tmx_stage_pool_t **pp    = &iface->stage_pools;

    while (*pp != pool) {
        pp = &(*pp)->next;
    }
    *pp = pool->next;
    iface->stage_tx_pools -= (unsigned)pool->is_tx;
    iface->ops->mr_dereg(pool->mr);
    munmap(pool->bufs, pool->count * pool->size);
    free(pool);
}

void tmx_mem_stage_free(tmx_iface_t *iface)
{
    while (iface->stage_pools != NULL) {
        tmx_mem_stage_pool_free(iface->stage_pools);
    }
    iface->stage_rx = NULL;
}

void tmx_mem_stage_release(tmx_stage_pool_t **pool_p)
{
    tmx_stage_pool_t *pool = *pool_p;

    *pool_p = NULL;
    if (pool == NULL || pool == &tmx_stage_failed) {
        return;
    }
    if (pool->free_top == pool->count) {
        tmx_mem_stage_pool_free(pool);
    } else {
        pool->orphan = 1; /* the last buffer to come back frees it */
    }
}

/* A staging buffer of *pool_p (made at the first call) for len bytes into req (req->stage,
 * req->stage_pool, req->mr), or 0: not for this message, the pool could not be made, or its
 * buffers are all held. access: the pool's registration. */
static int tmx_mem_stage_get(tmx_iface_t *iface, tmx_stage_pool_t **pool_p, tmx_request_t *req,
                             size_t len, unsigned access)
{
    tmx_worker_t     *w = iface->worker;
    tmx_stage_pool_t *pool;

    if (pool_p == NULL || len > w->ctx->cfg.rndv_copy ||
        !(iface->dev->attr.caps & TMX_DEV_CAP_REG_SLOW) || iface->tm_on || iface->xrc_on ||
        w->ctx->cfg.mr_cache > 0 || *pool_p == &tmx_stage_failed) {
        return 0;
    }
    if (*pool_p == NULL) {
        if ((access & TMX_ACCESS_REMOTE_READ) && iface->stage_tx_pools >= TMX_STAGE_TX_POOLS) {
            return 0; /* others have them: maybe later, when one closes */
        }
        pool    = tmx_mem_stage_pool_new(iface, access);
        *pool_p = pool != NULL ? pool : &tmx_stage_failed;
        if (pool == NULL) {
            return 0;
        }
    }
    pool = *pool_p;
    if (pool->free_top == 0) {
        return 0;
    }
    req->stage      = pool->bufs + (size_t)pool->free[--pool->free_top] * pool->size;
    req->stage_pool = pool;
    req->mr         = pool->mr;
    return 1;
}

/* Gives req's staging buffer back to its pool. */
static void tmx_mem_stage_put(tmx_request_t *req)
{
    tmx_stage_pool_t *pool = req->stage_pool;

    pool->free[pool->free_top++] = (uint32_t)((size_t)(req->stage - pool->bufs) / pool->size);
    req->stage      = NULL;
    req->stage_pool = NULL;
    if (pool->orphan && pool->free_top == pool->count) {
        tmx_mem_stage_pool_free(pool);
    }
}

tmx_status_t tmx_mem_reg_rndv(tmx_iface_t *iface, tmx_request_t *req, void *buf, size_t len,
                              unsigned access, tmx_stage_pool_t **stage)
{
    tmx_worker_t *w   = iface->worker;
    int           idx = (int)(iface - w->ifaces);
    uintptr_t     b   = (uintptr_t)buf;
    tmx_list_t   *l;
    tmx_status_t  status;

    tmx_list_for_each(l, &w->mems) {
        tmx_mem_t *m = tmx_container_of(l, tmx_mem_t, link);

        if (m->start <= b && b + len <= m->end && m->mr[idx] != NULL &&
            (access & ~m->access) == 0) {
            m->refs++;
            req->mr   = m->mr[idx];
            req->memh = m;
            w->stat_rndv_mapped++;
            return TMX_OK;
        }
    }
    req->memh = NULL;
    if (w->ctx->cfg.mr_cache > 0 && tmx_mem_cache_get(iface, buf, len, access, &req->mr,
                                                      &req->memh) == TMX_OK) {
        return TMX_OK;
    }
    if (tmx_mem_stage_get(iface, stage, req, len, access)) {
        w->stat_rndv_staged++;
        return TMX_OK;
    }
    status  = iface->ops->mr_reg(iface->pd, buf, len, access, &req->mr);
    w->stat_rndv_regs += status == TMX_OK;
    return status;
}

void tmx_mem_dereg_rndv(tmx_iface_t *iface, tmx_request_t *req)
{
    tmx_mem_t *m = req->memh;

    if (req->stage != NULL) {
        tmx_mem_stage_put(req);
    } else if (m != NULL && m->cached) {
        tmx_mem_cache_put(m);
    } else if (m != NULL) {
        if (--m->refs == 0 && m->unmapped) {
            tmx_mem_free(m);
        }
    } else if (req->mr != NULL && iface != NULL) {
        iface->ops->mr_dereg(req->mr);
    }
    req->mr   = NULL;
    req->memh = NULL;
}

void tmx_mem_cleanup(tmx_worker_t *w)
{
    /* (staging is off while the cache is on: tmx_mem_stage_get) */
    if (w->stat_rndv_regs + w->stat_rndv_mapped + w->stat_rndv_staged > 0 && w->mr_cache <= 0) {
        char staged[64] = "";

        if (w->stat_rndv_staged > 0) {
            snprintf(staged, sizeof(staged), ", %llu copied through staging buffers",
                     (unsigned long long)w->stat_rndv_staged);
        }
        tmx_info("rendezvous buffers: %llu registered per message, %llu in a tmx_mem_map range%s",
                 (unsigned long long)w->stat_rndv_regs, (unsigned long long)w->stat_rndv_mapped,
                 staged);
    }
    if (w->mr_cache > 0) {
        tmx_list_t out;

        tmx_info("rendezvous buffers: %llu registered per message, %llu in a tmx_mem_map range, "
                 "%llu in a cached registration (%llu registrations made for the cache)",
                 (unsigned long long)w->stat_rndv_regs, (unsigned long long)w->stat_rndv_mapped,
                 (unsigned long long)w->stat_rndv_cached,
                 (unsigned long long)w->stat_rndv_cache_regs);
        tmx_list_init(&out);
        pthread_mutex_lock(&rc.lock);
        tmx_mem_cache_reap(w, 1, &out);
        pthread_mutex_unlock(&rc.lock);
        tmx_mem_free_list(&out);
        tmx_mem_cache_stop();
        w->mr_cache = 0;
    }
    while (!tmx_list_is_empty(&w->mems)) {
        tmx_mem_free(tmx_container_of(tmx_list_pop_head(&w->mems), tmx_mem_t, link));
    }
}
