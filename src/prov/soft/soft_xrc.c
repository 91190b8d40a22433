/*
 * Soft device: XRC domains, XRC SRQs, initiator (INI) and target (TGT) queue pairs, as
 * prov.h ("XRC") says they behave.
 *
 * The node's table. On hardware the adapter of a node gives SRQ and QP numbers out of one
 * number space, and an XRC domain is shared by the node's processes through a file. Here the
 * processes of one node (TMX_NODE_ID, default the host) share a named table in /dev/shm,
 * "/tmx-xrc-<uid>-<hash of the boot and the node id>":
 *
 *   header | users (lock_id of each process that has it open) | XRC SRQ entries | TGT entries
 *
 * An XRC SRQ's number names its entry (index, and 7 bits of the entry's generation so that a
 * number of a destroyed SRQ does not name its successor); the entry says which domain the SRQ
 * is in and which process owns it (its device address). A TGT QP's number names its entry,
 * which holds the domain, a count of the handles to it (its creator's and qp_open's) and the
 * initiator's process. Entries are taken and given back under the header's lock word (a
 * holder that died is detected by pid and start time, as for the inbox). The last process to
 * close the table unlinks it; a table whose users are all dead is reset by the next opener
 * and removed by the sweep of tmx_soft_dev_open.
 *
 * The wire. Data does not pass through the TGT's owner: on hardware the target adapter places
 * it, here the initiator writes it straight into the receiving process's rings. For every
 * remote SRQ it sends to, an INI keeps a route: a QP object without a slot that has the RC
 * send machinery (send queue, SEND chunks, RDMA by cross-memory attach, fast rings), aimed at
 * an XRC stream line in the receiver's segment. A stream line is the part of the TGT's
 * receive state that lives with one receiving process: the route claims a free line (CAS of
 * its lock word from 0 to the sender's lock_id), writes there which SRQ and TGT its messages
 * are for, and bumps the line's generation; its records name the line (dst =
 * TMX_SOFT_XRC_DST | line) and that generation. The receiver makes a stream object for the
 * line when the first record comes (a QP object of type XRC_TGT whose receive queue is the
 * SRQ's, whose qp_num is the TGT's), checks the claim against its SRQs and the node's table
 * (a claim that names no SRQ of ours in the TGT's domain is refused: err_gen, and the route
 * fails), and from then on reads the stream like an RC QP: fast ring grants, SWITCH, parking.
 * A route gives its line up with a CLOSE record (and a released marker in case the record
 * finds no room); the receiver frees the line after the CLOSE, after a second of a released
 * line staying idle, or when the claimant died.
 *
 * The cost is per (initiator, receiving process): a line in the receiver's segment and a
 * route in the sender's process, the soft device's own bookkeeping (tmx_dev_stats_t
 * xrc_routes, xrc_streams). What the job's connection count is made of, QPs and SRQs, is
 * hardware's: one INI per remote node and domain, one TGT per INI.
 */
#define _GNU_SOURCE
#define TMX_LOG_SUBSYS "soft"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "prov/soft/soft.h"
#include "util/hash.h"
#include "util/log.h"
#include "util/time.h"

#define TMX_SOFT_XNODE_MAGIC   0x746d78786e6f6431ULL /* "tmxxnod1" */
#define TMX_SOFT_XNODE_VERSION 1
#define TMX_SOFT_XNODE_SRQS    4096
#define TMX_SOFT_XNODE_TGTS    16384
#define TMX_SOFT_XNODE_USERS   4096
#define TMX_SOFT_XTGT_QPN      0x800000u /* above every slot's qp_num (max_qps <= 2^20) */
#define TMX_SOFT_XTGT_MAGIC    0x78746731u
#define TMX_SOFT_XS_IDLE_NS    (1000ull * 1000000) /* a released line whose CLOSE never came */
#define TMX_SOFT_XWAIT_S       2.0 /* a table being created by another process */

/* ---------------------------------------------------------------- the node's table */

typedef struct tmx_soft_xnode_hdr {
    uint64_t         magic;
    uint32_t         version;
    uint32_t         uid;
    uint64_t         node_hash;
    uint64_t         nonce;     /* new each time the table is (re)set: a TGT blob names it */
    uint32_t         max_srqs;
    uint32_t         max_tgts;
    uint32_t         max_users;
    uint32_t         pad;
    uint64_t         users_off;
    uint64_t         srq_off;
    uint64_t         tgt_off;
    uint64_t         total;
    uint32_t         srq_next, tgt_next; /* next fit */
    uint32_t         srq_hwm, tgt_hwm;   /* entries ever used: a reset clears only these */
    _Atomic uint64_t lock;
} tmx_soft_xnode_hdr_t;

/* gen_valid: generation << 1 | valid. */
typedef struct tmx_soft_xsrq_ent {
    _Atomic uint32_t gen_valid;
    uint32_t         dev_len;
    uint64_t         xrcd;  /* the domain's id */
    uint64_t         owner; /* lock_id of the owning process */
    uint64_t         pad;
    uint8_t          dev[96]; /* the owner's device address */
} tmx_soft_xsrq_ent_t;

typedef struct tmx_soft_xtgt_ent {
    _Atomic uint32_t gen_valid;
    _Atomic uint32_t refs;      /* handles: the creator's and every qp_open's */
    uint64_t         xrcd;
    uint64_t         creator;
    _Atomic uint64_t ini_owner; /* lock_id of the initiator's process, 0 before RTR */
    uint32_t         ini_qpn;
    uint32_t         pad;
    uint64_t         pad2[3];
} tmx_soft_xtgt_ent_t;

_Static_assert(sizeof(tmx_soft_xsrq_ent_t) == 128, "XRC SRQ entry");
_Static_assert(sizeof(tmx_soft_xtgt_ent_t) == 64, "TGT entry");

typedef struct tmx_soft_xnode {
    tmx_list_t            list;
    uint64_t              hash;
    int                   refs;
    char                  name[64];
    void                 *base;
    size_t                size;
    dev_t                 st_dev;
    ino_t                 st_ino;
    unsigned              user_slot;
    tmx_soft_xnode_hdr_t *hdr;
    _Atomic uint64_t     *users;
    tmx_soft_xsrq_ent_t  *srq;
    tmx_soft_xtgt_ent_t  *tgt;
} tmx_soft_xnode_t;

/* ---------------------------------------------------------------- process-local objects */

typedef struct tmx_soft_xrcd {
    tmx_xrcd_t        super;
    uint64_t          id;
    tmx_soft_xnode_t *node;
} tmx_soft_xrcd_t;

typedef struct tmx_soft_xsrq {
    tmx_list_t       list;
    tmx_soft_srq_t  *srq;
    tmx_soft_xrcd_t *xrcd;
    uint32_t         index;
    uint32_t         srqn;
} tmx_soft_xsrq_t;

/* A process watched for its death (a TGT's initiator, a stream's claimant). */
typedef struct tmx_soft_xwatch {
    uint64_t owner; /* lock_id: pid | start time << 32 */
    int      pidfd;
    int      dead;
    int      refs;
} tmx_soft_xwatch_t;

typedef struct tmx_soft_xqp {
    tmx_list_t         list;      /* xdev->tgts or xdev->inis */
    tmx_soft_qp_t     *qp;        /* whose it is */
    tmx_soft_xnode_t  *node;      /* TGT: ours; INI: the target's (after RTR) */
    uint64_t           xrcd;
    uint32_t           tgt_index;
    uint32_t           tgt_gen;
    uint32_t           tgt_qpn;
    /* TGT */
    int                created;   /* 0: a handle opened by qp_open */
    tmx_soft_xwatch_t *watch;     /* the initiator's process */
    /* INI */
    tmx_hash_t         routes;    /* remote srqn -> route */
    tmx_soft_qp_t     *last;
    uint32_t           last_srqn;
    unsigned           nroutes;
    uint32_t           max_send_wr;
} tmx_soft_xqp_t;

typedef struct tmx_soft_xdev {
    uint64_t        node_hash;    /* our node */
    tmx_list_t      nodes;        /* tables open (ours, and the targets' of our INIs) */
    tmx_list_t      xsrqs;
    tmx_list_t      tgts;
    tmx_list_t      inis;
    tmx_hash_t      watches;      /* owner -> tmx_soft_xwatch_t */
    tmx_soft_qp_t **xs;           /* stream receivers by line (max_xs) */
    uint64_t       *xs_idle_ns;   /* when a released line was first seen so */
    int             warned_lines; /* "no stream line free" said */
    int             warned_cma;
} tmx_soft_xdev_t;

static uint64_t tmx_soft_str_hash(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ULL; /* FNV-1a */

    for (; *s != '\0'; s++) {
        h = (h ^ (uint8_t)*s) * 0x100000001b3ULL;
    }
    return h;
}

int tmx_soft_xrc_offered(const tmx_config_t *cfg)
{
    return cfg->soft_xrc && cfg->soft_cma != 0;
}

static tmx_soft_xdev_t *tmx_soft_xdev(tmx_soft_dev_t *dev)
{
    tmx_soft_xdev_t *x = dev->xrc;
    unsigned         n = dev->hdr->max_xs;

    if (x != NULL) {
        return x;
    }
    x = calloc(1, sizeof(*x));
    if (x == NULL) {
        return NULL;
    }
    x->xs         = calloc(n ? n : 1, sizeof(*x->xs));
    x->xs_idle_ns = calloc(n ? n : 1, sizeof(*x->xs_idle_ns));
    if (x->xs == NULL || x->xs_idle_ns == NULL || tmx_hash_init(&x->watches, 16) != TMX_OK) {
        free(x->xs);
        free(x->xs_idle_ns);
        free(x);
        return NULL;
    }
    x->node_hash = tmx_hash_u64(dev->boot_hash ^ tmx_soft_str_hash(dev->cfg->node_id)) | 1;
    tmx_list_init(&x->nodes);
    tmx_list_init(&x->xsrqs);
    tmx_list_init(&x->tgts);
    tmx_list_init(&x->inis);
    dev->xrc = x;
    return x;
}

/* The lock word of a node's table; a holder that died is detected and the lock taken over. */
static void tmx_soft_xlock(_Atomic uint64_t *w, uint64_t me)
{
    unsigned spins = 0;

    for (;;) {
        uint64_t cur = 0;

        if (atomic_compare_exchange_weak_explicit(w, &cur, me, memory_order_acquire,
                                                  memory_order_relaxed)) {
            return;
        }
        if (++spins % 256 == 0) {
            sched_yield();
        }
        if (spins % (1u << 14) == 0 && cur != 0 && tmx_soft_lock_holder_dead(cur) &&
            atomic_compare_exchange_strong_explicit(w, &cur, me, memory_order_acquire,
                                                    memory_order_relaxed)) {
            return;
        }
    }
}

static void tmx_soft_xunlock(_Atomic uint64_t *w)
{
    atomic_store_explicit(w, 0, memory_order_release);
}

static size_t tmx_soft_xnode_layout(tmx_soft_xnode_hdr_t *h)
{
    h->max_srqs  = TMX_SOFT_XNODE_SRQS;
    h->max_tgts  = TMX_SOFT_XNODE_TGTS;
    h->max_users = TMX_SOFT_XNODE_USERS;
    h->users_off = 4096;
    h->srq_off   = h->users_off + (uint64_t)h->max_users * sizeof(uint64_t);
    h->tgt_off   = h->srq_off + (uint64_t)h->max_srqs * sizeof(tmx_soft_xsrq_ent_t);
    h->total     = h->tgt_off + (uint64_t)h->max_tgts * sizeof(tmx_soft_xtgt_ent_t);
    return (size_t)h->total;
}

static void tmx_soft_xnode_name(char *buf, size_t len, uint64_t hash)
{
    snprintf(buf, len, "/tmx-xrc-%u-%016llx", (unsigned)getuid(), (unsigned long long)hash);
}

/* Whether the name still names the file we mapped (a last user may have unlinked it). */
static int tmx_soft_xnode_named(const tmx_soft_xnode_t *n)
{
    struct stat st;
    int         fd = shm_open(n->name, O_RDWR | O_CLOEXEC, 0);
    int         same;

    if (fd < 0) {
        return 0;
    }
    same = fstat(fd, &st) == 0 && st.st_dev == n->st_dev && st.st_ino == n->st_ino;
    close(fd);
    return same;
}

/* Under the lock: any user of the table alive but us; dead users' slots are cleared. */
static int tmx_soft_xnode_others_alive(tmx_soft_xnode_t *n, uint64_t me)
{
    for (unsigned i = 0; i < n->hdr->max_users; i++) {
        uint64_t u = atomic_load_explicit(&n->users[i], memory_order_relaxed);

        if (u == 0 || (i == n->user_slot && u == me)) {
            continue;
        }
        if (!tmx_soft_lock_holder_dead(u)) {
            return 1;
        }
        atomic_store_explicit(&n->users[i], 0, memory_order_relaxed);
    }
    return 0;
}

static void tmx_soft_xnode_reset(tmx_soft_xnode_t *n)
{
    uint64_t nonce = 0;

    for (unsigned i = 0; i < n->hdr->srq_hwm && i < n->hdr->max_srqs; i++) {
        atomic_fetch_and(&n->srq[i].gen_valid, ~1u);
    }
    for (unsigned i = 0; i < n->hdr->tgt_hwm && i < n->hdr->max_tgts; i++) {
        atomic_fetch_and(&n->tgt[i].gen_valid, ~1u);
        atomic_store(&n->tgt[i].refs, 0);
    }
    if (getrandom(&nonce, sizeof(nonce), GRND_NONBLOCK) != sizeof(nonce) || nonce == 0) {
        nonce = tmx_time_ns() ^ ((uint64_t)getpid() << 40);
    }
    n->hdr->nonce = nonce | 1;
}

/* Maps the table of node hash (creating it if nobody has) and registers us as a user. */
static tmx_status_t tmx_soft_xnode_map(tmx_soft_dev_t *dev, uint64_t hash, tmx_soft_xnode_t *n)
{
    tmx_soft_xnode_hdr_t want;
    size_t               total;

    memset(&want, 0, sizeof(want));
    total = tmx_soft_xnode_layout(&want);
    tmx_soft_xnode_name(n->name, sizeof(n->name), hash);
    for (int attempt = 0; attempt < 8; attempt++) {
        struct stat st;
        double      end     = tmx_time_sec() + TMX_SOFT_XWAIT_S;
        int         created = 0, others, fd;
        unsigned    slot;

        fd = shm_open(n->name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (fd >= 0) {
            created = 1;
            if (ftruncate(fd, (off_t)total) != 0) {
                tmx_error("ftruncate of the XRC table %s: %s", n->name, strerror(errno));
                close(fd);
                shm_unlink(n->name);
                return TMX_ERR_NO_MEMORY;
            }
        } else if (errno == EEXIST) {
            fd = shm_open(n->name, O_RDWR | O_CLOEXEC, 0);
            if (fd < 0 && errno == ENOENT) {
                continue; /* its last user unlinked it meanwhile */
            }
        }
        if (fd < 0) {
            tmx_error("XRC table %s: %s", n->name, strerror(errno));
            return TMX_ERR_IO;
        }
        /* its creator may not have sized it yet */
        while (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == getuid() &&
               (st.st_mode & 077) == 0 && st.st_size == 0 && tmx_time_sec() < end) {
            usleep(1000);
        }
        if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != getuid() ||
            (st.st_mode & 077) != 0 || (size_t)st.st_size != total) {
            tmx_error("%s is not an XRC table of this version", n->name);
            close(fd);
            return TMX_ERR_INVALID_ADDR;
        }
        n->base = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        close(fd);
        if (n->base == MAP_FAILED) {
            n->base = NULL;
            return TMX_ERR_NO_MEMORY;
        }
        n->size   = total;
        n->st_dev = st.st_dev;
        n->st_ino = st.st_ino;
        n->hdr    = n->base;
        if (created) {
            *n->hdr         = want;
            n->hdr->version = TMX_SOFT_XNODE_VERSION;
            n->hdr->uid     = (uint32_t)getuid();
            n->hdr->node_hash = hash;
            n->hdr->nonce   = (tmx_time_ns() ^ ((uint64_t)getpid() << 40)) | 1;
            __atomic_store_n(&n->hdr->magic, TMX_SOFT_XNODE_MAGIC, __ATOMIC_RELEASE);
        } else {
            while (__atomic_load_n(&n->hdr->magic, __ATOMIC_ACQUIRE) != TMX_SOFT_XNODE_MAGIC &&
                   tmx_time_sec() < end) {
                usleep(1000);
            }
            if (__atomic_load_n(&n->hdr->magic, __ATOMIC_ACQUIRE) != TMX_SOFT_XNODE_MAGIC ||
                n->hdr->version != TMX_SOFT_XNODE_VERSION || n->hdr->uid != getuid() ||
                n->hdr->node_hash != hash || n->hdr->total != want.total ||
                n->hdr->max_srqs != want.max_srqs || n->hdr->max_tgts != want.max_tgts ||
                n->hdr->max_users != want.max_users || n->hdr->users_off != want.users_off ||
                n->hdr->srq_off != want.srq_off || n->hdr->tgt_off != want.tgt_off) {
                tmx_error("%s is not an XRC table of this version", n->name);
                munmap(n->base, total);
                return TMX_ERR_INVALID_ADDR;
            }
        }
        n->users = (_Atomic uint64_t *)((uint8_t *)n->base + n->hdr->users_off);
        n->srq   = (tmx_soft_xsrq_ent_t *)((uint8_t *)n->base + n->hdr->srq_off);
        n->tgt   = (tmx_soft_xtgt_ent_t *)((uint8_t *)n->base + n->hdr->tgt_off);
        tmx_soft_xlock(&n->hdr->lock, dev->lock_id);
        if (!tmx_soft_xnode_named(n)) {
            tmx_soft_xunlock(&n->hdr->lock); /* unlinked before we got the lock: again */
            munmap(n->base, total);
            continue;
        }
        n->user_slot = UINT32_MAX;
        others       = tmx_soft_xnode_others_alive(n, dev->lock_id);
        for (slot = 0; slot < n->hdr->max_users; slot++) {
            if (atomic_load_explicit(&n->users[slot], memory_order_relaxed) == 0) {
                atomic_store_explicit(&n->users[slot], dev->lock_id, memory_order_relaxed);
                n->user_slot = slot;
                break;
            }
        }
        if (!others && !created) {
            tmx_soft_xnode_reset(n); /* a table its users left behind (killed) */
        }
        tmx_soft_xunlock(&n->hdr->lock);
        if (n->user_slot == UINT32_MAX) {
            tmx_error("XRC table %s: %u processes use it already", n->name, n->hdr->max_users);
            munmap(n->base, total);
            return TMX_ERR_NO_RESOURCE;
        }
        n->hash = hash;
        return TMX_OK;
    }
    tmx_error("XRC table %s: could not open it (removed and created again under us)",
              n->name);
    return TMX_ERR_IO;
}

static tmx_soft_xnode_t *tmx_soft_xnode_get(tmx_soft_dev_t *dev, uint64_t hash,
                                            tmx_status_t *status_p)
{
    tmx_soft_xdev_t  *x = dev->xrc;
    tmx_soft_xnode_t *n;
    tmx_list_t       *pos;

    tmx_list_for_each(pos, &x->nodes) {
        n = tmx_container_of(pos, tmx_soft_xnode_t, list);
        if (n->hash == hash) {
            n->refs++;
            *status_p = TMX_OK;
            return n;
        }
    }
    n = calloc(1, sizeof(*n));
    if (n == NULL) {
        *status_p = TMX_ERR_NO_MEMORY;
        return NULL;
    }
    *status_p = tmx_soft_xnode_map(dev, hash, n);
    if (*status_p != TMX_OK) {
        free(n);
        return NULL;
    }
    n->refs = 1;
    tmx_list_add_tail(&x->nodes, &n->list);
    return n;
}

static void tmx_soft_xnode_close(tmx_soft_dev_t *dev, tmx_soft_xnode_t *n)
{
    tmx_soft_xlock(&n->hdr->lock, dev->lock_id);
    atomic_store_explicit(&n->users[n->user_slot], 0, memory_order_relaxed);
    if (!tmx_soft_xnode_others_alive(n, dev->lock_id) && tmx_soft_xnode_named(n)) {
        shm_unlink(n->name);
    }
    tmx_soft_xunlock(&n->hdr->lock);
    munmap(n->base, n->size);
}

static void tmx_soft_xnode_put(tmx_soft_dev_t *dev, tmx_soft_xnode_t *n)
{
    if (n != NULL && --n->refs == 0) {
        tmx_list_del(&n->list);
        tmx_soft_xnode_close(dev, n);
        free(n);
    }
}

/* Removes the tables of this uid whose users are all gone (killed processes). */
void tmx_soft_xrc_sweep(void)
{
    char           prefix[32];
    DIR           *d = opendir("/dev/shm");
    struct dirent *e;

    if (d == NULL) {
        return;
    }
    snprintf(prefix, sizeof(prefix), "tmx-xrc-%u-", (unsigned)getuid());
    while ((e = readdir(d)) != NULL) {
        tmx_soft_xnode_hdr_t want;
        tmx_soft_xnode_t     n;
        struct stat          st;
        int                  fd;

        if (strncmp(e->d_name, prefix, strlen(prefix)) != 0 ||
            strlen(e->d_name) != strlen(prefix) + 16) {
            continue;
        }
        memset(&n, 0, sizeof(n));
        memset(&want, 0, sizeof(want));
        snprintf(n.name, sizeof(n.name), "/%s", e->d_name);
        fd = shm_open(n.name, O_RDWR | O_CLOEXEC, 0);
        if (fd < 0) {
            continue;
        }
        n.size = tmx_soft_xnode_layout(&want);
        if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != getuid() ||
            (size_t)st.st_size != n.size) {
            close(fd);
            continue;
        }
        n.base = mmap(NULL, n.size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        close(fd);
        if (n.base == MAP_FAILED) {
            continue;
        }
        n.hdr       = n.base;
        n.st_dev    = st.st_dev;
        n.st_ino    = st.st_ino;
        n.user_slot = UINT32_MAX;
        if (__atomic_load_n(&n.hdr->magic, __ATOMIC_ACQUIRE) == TMX_SOFT_XNODE_MAGIC &&
            n.hdr->users_off == want.users_off && n.hdr->max_users == want.max_users) {
            uint64_t me = (uint32_t)getpid();

            n.users = (_Atomic uint64_t *)((uint8_t *)n.base + n.hdr->users_off);
            tmx_soft_xlock(&n.hdr->lock, me);
            if (!tmx_soft_xnode_others_alive(&n, me) && tmx_soft_xnode_named(&n)) {
                if (shm_unlink(n.name) == 0) {
                    tmx_debug("removed XRC table %s that dead processes left", n.name);
                }
            }
            tmx_soft_xunlock(&n.hdr->lock);
        }
        munmap(n.base, n.size);
    }
    closedir(d);
}

/* ---------------------------------------------------------------- numbers */

/* An SRQ number: the entry's index, and 7 bits of its generation + 1 (never 0). */
static uint32_t tmx_soft_srqn(uint32_t index, uint32_t gen)
{
    return (((gen & 0x7fu) + 1) << 16) | index;
}

/* The entry an SRQ number names, if it is valid and its generation matches; NULL if not.
 * *gv_p gets the gen_valid word that was checked. */
static tmx_soft_xsrq_ent_t *tmx_soft_srqn_entry(tmx_soft_xnode_t *n, uint32_t srqn,
                                               uint32_t *gv_p)
{
    uint32_t             index = srqn & 0xffffu, tag = srqn >> 16;
    tmx_soft_xsrq_ent_t *e;
    uint32_t             gv;

    if (tag == 0 || tag > 0x80u || index >= n->hdr->max_srqs) {
        return NULL;
    }
    e  = &n->srq[index];
    gv = atomic_load_explicit(&e->gen_valid, memory_order_acquire);
    if (!(gv & 1) || (((gv >> 1) & 0x7fu) + 1) != tag) {
        return NULL;
    }
    *gv_p = gv;
    return e;
}

/* A TGT's number: above every slot's, its entry's index and 7 bits of its generation. */
static uint32_t tmx_soft_tgt_qpn(uint32_t index, uint32_t gen)
{
    return TMX_SOFT_XTGT_QPN | ((gen & 0x7fu) << 16) | index;
}

static tmx_soft_xtgt_ent_t *tmx_soft_tgt_entry(tmx_soft_xnode_t *n, uint32_t qpn,
                                              uint32_t *gv_p)
{
    uint32_t             index = qpn & 0xffffu;
    tmx_soft_xtgt_ent_t *e;
    uint32_t             gv;

    if ((qpn & 0xff800000u) != TMX_SOFT_XTGT_QPN || index >= n->hdr->max_tgts) {
        return NULL;
    }
    e  = &n->tgt[index];
    gv = atomic_load_explicit(&e->gen_valid, memory_order_acquire);
    if (!(gv & 1) || ((gv >> 1) & 0x7fu) != ((qpn >> 16) & 0x7fu)) {
        return NULL;
    }
    *gv_p = gv;
    return e;
}

/* Takes a free entry of a table (SRQs or TGTs) under the lock: a first pass for a free one
 * from the next-fit position; a second that also takes back entries of dead processes (the
 * owner word at owner_off). Returns the index and sets *gen_p, or UINT32_MAX. */
static uint32_t tmx_soft_xnode_alloc(tmx_soft_xnode_t *n, uint8_t *ents, size_t ent_size,
                                     uint32_t max, uint32_t *next, uint32_t *hwm,
                                     size_t owner_off, uint32_t *gen_p)
{
    for (int pass = 0; pass < 2; pass++) {
        for (uint32_t k = 0; k < max; k++) {
            uint32_t          i  = (*next + k) % max;
            _Atomic uint32_t *gw = (_Atomic uint32_t *)(ents + (size_t)i * ent_size);
            uint32_t          gv = atomic_load_explicit(gw, memory_order_relaxed);

            if ((gv & 1) &&
                (pass == 0 ||
                 !tmx_soft_lock_holder_dead(*(uint64_t *)(ents + (size_t)i * ent_size +
                                                          owner_off)))) {
                continue;
            }
            *gen_p = (gv >> 1) + 1;
            *next  = i + 1;
            if (i + 1 > *hwm) {
                *hwm = i + 1;
            }
            return i;
        }
    }
    (void)n;
    return UINT32_MAX;
}

/* ---------------------------------------------------------------- watching processes */

static tmx_soft_xwatch_t *tmx_soft_xwatch_get(tmx_soft_xdev_t *x, uint64_t owner)
{
    tmx_soft_xwatch_t *w = tmx_hash_get(&x->watches, owner);

    if (w != NULL) {
        w->refs++;
        return w;
    }
    w = calloc(1, sizeof(*w));
    if (w == NULL) {
        return NULL;
    }
    w->owner = owner;
    w->pidfd = -1;
    w->refs  = 1;
#ifdef SYS_pidfd_open
    w->pidfd = (int)syscall(SYS_pidfd_open, (pid_t)(uint32_t)owner, 0);
#endif
    /* after the pidfd: a pid reused before it was opened is told by the start time */
    w->dead = tmx_soft_lock_holder_dead(owner);
    if (tmx_hash_put(&x->watches, owner, w) != TMX_OK) {
        if (w->pidfd >= 0) {
            close(w->pidfd);
        }
        free(w);
        return NULL;
    }
    return w;
}

static void tmx_soft_xwatch_put(tmx_soft_xdev_t *x, tmx_soft_xwatch_t *w)
{
    if (w != NULL && --w->refs == 0) {
        tmx_hash_del(&x->watches, w->owner);
        if (w->pidfd >= 0) {
            close(w->pidfd);
        }
        free(w);
    }
}

static int tmx_soft_xwatch_dead(tmx_soft_xwatch_t *w)
{
    if (!w->dead) {
        if (w->pidfd >= 0) {
            struct pollfd p = {.fd = w->pidfd, .events = POLLIN};
            w->dead = poll(&p, 1, 0) > 0;
        } else {
            w->dead = tmx_soft_lock_holder_dead(w->owner);
        }
    }
    return w->dead;
}

/* ---------------------------------------------------------------- domains */

tmx_status_t tmx_soft_xrcd_open(tmx_dev_t *d, const tmx_xrcd_init_attr_t *attr,
                                tmx_xrcd_t **xrcd_p)
{
    tmx_soft_dev_t  *dev = (tmx_soft_dev_t *)d;
    tmx_soft_xdev_t *x;
    tmx_soft_xrcd_t *xd;
    tmx_status_t     status;

    if (d == NULL || xrcd_p == NULL) {
        return TMX_ERR_INVALID_PARAM;
    }
    if (!(d->attr.caps & TMX_DEV_CAP_XRC)) {
        return TMX_ERR_UNSUPPORTED;
    }
    x = tmx_soft_xdev(dev);
    if (x == NULL) {
        return TMX_ERR_NO_MEMORY;
    }
    xd = calloc(1, sizeof(*xd));
    if (xd == NULL) {
        return TMX_ERR_NO_MEMORY;
    }
    xd->node = tmx_soft_xnode_get(dev, x->node_hash, &status);
    if (xd->node == NULL) {
        free(xd);
        return status;
    }
    xd->super.dev = d;
    xd->super.key = attr != NULL ? attr->key : 0;
    /* the same key on the same node is the same domain, in every process */
    xd->id        = tmx_hash_u64(x->node_hash ^ tmx_hash_u64(xd->super.key + 1)) | 1;
    dev->stats.xrcds++;
    *xrcd_p = &xd->super;
    return TMX_OK;
}

void tmx_soft_xrcd_close(tmx_xrcd_t *xrcd)
{
    tmx_soft_xrcd_t *xd = (tmx_soft_xrcd_t *)xrcd;
    tmx_soft_dev_t  *dev;

    if (xd == NULL) {
        return;
    }
    dev = (tmx_soft_dev_t *)xrcd->dev;
    tmx_soft_xnode_put(dev, xd->node);
    dev->stats.xrcds--;
    free(xd);
}

/* ---------------------------------------------------------------- XRC SRQs */

static void tmx_soft_xs_free(tmx_soft_dev_t *dev, tmx_soft_qp_t *st, int free_line);

tmx_status_t tmx_soft_xrc_srq_init(tmx_soft_srq_t *srq, const tmx_srq_init_attr_t *attr)
{
    tmx_soft_dev_t      *dev = (tmx_soft_dev_t *)srq->super.pd->dev;
    tmx_soft_xrcd_t     *xd  = (tmx_soft_xrcd_t *)attr->xrcd;
    tmx_soft_xnode_t    *n;
    tmx_soft_xsrq_t     *xs;
    tmx_soft_xsrq_ent_t *e;
    uint8_t              addr[TMX_DEV_ADDR_MAX];
    size_t               alen = sizeof(addr);
    uint32_t             i, gen;

    if (xd == NULL || attr->cq == NULL || xd->super.dev != &dev->super ||
        attr->cq->dev != &dev->super || dev->xrc == NULL) {
        return TMX_ERR_INVALID_PARAM;
    }
    if (tmx_soft_dev_addr_pack(dev, addr, &alen) != TMX_OK || alen > sizeof(e->dev)) {
        return TMX_ERR_INTERNAL;
    }
    xs = calloc(1, sizeof(*xs));
    if (xs == NULL) {
        return TMX_ERR_NO_MEMORY;
    }
    n = xd->node;
    tmx_soft_xlock(&n->hdr->lock, dev->lock_id);
    i = tmx_soft_xnode_alloc(n, (uint8_t *)n->srq, sizeof(*n->srq), n->hdr->max_srqs,
                             &n->hdr->srq_next, &n->hdr->srq_hwm,
                             offsetof(tmx_soft_xsrq_ent_t, owner), &gen);
    if (i != UINT32_MAX) {
        e          = &n->srq[i];
        e->xrcd    = xd->id;
        e->owner   = dev->lock_id;
        e->dev_len = (uint32_t)alen;
        memcpy(e->dev, addr, alen);
        atomic_store_explicit(&e->gen_valid, gen << 1 | 1, memory_order_release);
    }
    tmx_soft_xunlock(&n->hdr->lock);
    if (i == UINT32_MAX) {
        tmx_warn("XRC table %s: all %u SRQ numbers are taken", n->name, n->hdr->max_srqs);
        free(xs);
        return TMX_ERR_NO_RESOURCE;
    }
    xs->srq   = srq;
    xs->xrcd  = xd;
    xs->index = i;
    xs->srqn  = tmx_soft_srqn(i, gen);
    tmx_list_add_tail(&dev->xrc->xsrqs, &xs->list);
    srq->xrc = xs;
    dev->stats.srqs_xrc++;
    return TMX_OK;
}

void tmx_soft_xrc_srq_fini(tmx_soft_srq_t *srq)
{
    tmx_soft_xsrq_t  *xs = srq->xrc;
    tmx_soft_dev_t   *dev;
    tmx_soft_xnode_t *n;

    if (xs == NULL) {
        return;
    }
    dev = (tmx_soft_dev_t *)srq->super.pd->dev;
    n   = xs->xrcd->node;
    /* its number names nothing from now on: a sender's next route to it fails */
    tmx_soft_xlock(&n->hdr->lock, dev->lock_id);
    atomic_fetch_and_explicit(&n->srq[xs->index].gen_valid, ~1u, memory_order_release);
    tmx_soft_xunlock(&n->hdr->lock);
    /* the streams into it end; their senders see the line taken back (as a destroyed RC QP:
     * an error only for one with traffic) */
    for (unsigned i = 0; i < dev->hdr->max_xs; i++) {
        tmx_soft_qp_t *st = dev->xrc->xs[i];

        if (st != NULL && st->super.srq == &srq->super) {
            tmx_soft_xs_free(dev, st, 1);
        }
    }
    tmx_list_del(&xs->list);
    dev->stats.srqs_xrc--;
    free(xs);
    srq->xrc = NULL;
}

tmx_status_t tmx_soft_srq_get_num(tmx_srq_t *s, uint32_t *srqn_p)
{
    tmx_soft_srq_t *srq = (tmx_soft_srq_t *)s;

    if (srq == NULL || srqn_p == NULL || srq->xrc == NULL) {
        return TMX_ERR_INVALID_PARAM; /* only XRC SRQs have a number */
    }
    *srqn_p = srq->xrc->srqn;
    return TMX_OK;
}

/* ---------------------------------------------------------------- target QPs */

/* The blob an initiator connects to. */
typedef struct tmx_soft_xtgt_addr {
    uint32_t magic;
    uint16_t version;
    uint16_t len;
    uint32_t qpn;
    uint32_t gen;       /* the entry's whole generation */
    uint64_t node_hash; /* which node's table */
    uint64_t nonce;     /* which incarnation of it */
    uint64_t xrcd;
    uint64_t boot_hash;
} tmx_soft_xtgt_addr_t;

static tmx_soft_qp_t *tmx_soft_xqp_new(tmx_pd_t *pd, tmx_qp_type_t type, tmx_cq_t *send_cq,
                                       tmx_cq_t *recv_cq)
{
    tmx_soft_qp_t  *qp = calloc(1, sizeof(*qp));
    tmx_soft_xqp_t *xq = calloc(1, sizeof(*xq));

    if (qp == NULL || xq == NULL) {
        free(qp);
        free(xq);
        return NULL;
    }
    tmx_list_init(&xq->list);
    qp->dev           = (tmx_soft_dev_t *)pd->dev;
    qp->index         = ~TMX_SOFT_XRC_DST; /* no slot */
    qp->in_stop       = UINT64_MAX;
    qp->xrc           = xq;
    qp->super.pd      = pd;
    qp->super.type    = type;
    qp->super.state   = TMX_QPS_RESET;
    qp->super.send_cq = send_cq;
    qp->super.recv_cq = recv_cq;
    xq->qp            = qp;
    return qp;
}

tmx_status_t tmx_soft_xrc_tgt_create(tmx_pd_t *pd, const tmx_qp_init_attr_t *attr,
                                     tmx_qp_t **qp_p)
{
    tmx_soft_dev_t      *dev = (tmx_soft_dev_t *)pd->dev;
    tmx_soft_xrcd_t     *xd  = (tmx_soft_xrcd_t *)attr->xrcd;
    tmx_soft_xnode_t    *n;
    tmx_soft_xtgt_ent_t *e;
    tmx_soft_qp_t       *qp;
    uint32_t             i, gen;

    if (xd == NULL || xd->super.dev != pd->dev || attr->send_cq == NULL ||
        attr->send_cq->dev != pd->dev) {
        return TMX_ERR_INVALID_PARAM;
    }
    qp = tmx_soft_xqp_new(pd, TMX_QPT_XRC_TGT, attr->send_cq, attr->recv_cq);
    if (qp == NULL) {
        return TMX_ERR_NO_MEMORY;
    }
    n = xd->node;
    tmx_soft_xlock(&n->hdr->lock, dev->lock_id);
    i = tmx_soft_xnode_alloc(n, (uint8_t *)n->tgt, sizeof(*n->tgt), n->hdr->max_tgts,
                             &n->hdr->tgt_next, &n->hdr->tgt_hwm,
                             offsetof(tmx_soft_xtgt_ent_t, creator), &gen);
    if (i != UINT32_MAX) {
        e          = &n->tgt[i];
        e->xrcd    = xd->id;
        e->creator = dev->lock_id;
        e->ini_qpn = 0;
        atomic_store_explicit(&e->ini_owner, 0, memory_order_relaxed);
        atomic_store_explicit(&e->refs, 1, memory_order_relaxed);
        atomic_store_explicit(&e->gen_valid, gen << 1 | 1, memory_order_release);
    }
    tmx_soft_xunlock(&n->hdr->lock);
    if (i == UINT32_MAX) {
        tmx_warn("XRC table %s: all %u target QP numbers are taken", n->name, n->hdr->max_tgts);
        free(qp->xrc);
        free(qp);
        return TMX_ERR_NO_RESOURCE;
    }
    n->refs++;
    qp->xrc->node      = n;
    qp->xrc->xrcd      = xd->id;
    qp->xrc->tgt_index = i;
    qp->xrc->tgt_gen   = gen;
    qp->xrc->tgt_qpn   = tmx_soft_tgt_qpn(i, gen);
    qp->xrc->created   = 1;
    qp->super.qp_num   = qp->xrc->tgt_qpn;
    tmx_list_add_tail(&dev->xrc->tgts, &qp->xrc->list);
    dev->stats.qps_xrc_tgt++;
    *qp_p = &qp->super;
    return TMX_OK;
}

tmx_status_t tmx_soft_qp_open(tmx_pd_t *pd, const tmx_qp_open_attr_t *attr, tmx_qp_t **qp_p)
{
    tmx_soft_dev_t      *dev;
    tmx_soft_xrcd_t     *xd;
    tmx_soft_xtgt_ent_t *e;
    tmx_soft_qp_t       *qp;
    uint32_t             gv = 0;
    uint64_t             owner = 0;
    tmx_status_t         status = TMX_OK;

    if (pd == NULL || attr == NULL || qp_p == NULL || attr->xrcd == NULL ||
        attr->send_cq == NULL || attr->xrcd->dev != pd->dev || attr->send_cq->dev != pd->dev) {
        return TMX_ERR_INVALID_PARAM;
    }
    dev = (tmx_soft_dev_t *)pd->dev;
    xd  = (tmx_soft_xrcd_t *)attr->xrcd;
    qp  = tmx_soft_xqp_new(pd, TMX_QPT_XRC_TGT, attr->send_cq, NULL);
    if (qp == NULL) {
        return TMX_ERR_NO_MEMORY;
    }
    /* under the lock: the last handle's destroy cannot free the entry between the checks
     * and the new reference */
    tmx_soft_xlock(&xd->node->hdr->lock, dev->lock_id);
    e = tmx_soft_tgt_entry(xd->node, attr->qp_num, &gv);
    if (e == NULL || e->xrcd != xd->id || atomic_load(&e->refs) == 0) {
        status = TMX_ERR_INVALID_PARAM; /* no such target QP in this domain */
    } else {
        atomic_fetch_add(&e->refs, 1);
        owner = atomic_load(&e->ini_owner);
    }
    tmx_soft_xunlock(&xd->node->hdr->lock);
    if (status != TMX_OK) {
        free(qp->xrc);
        free(qp);
        return status;
    }
    xd->node->refs++;
    qp->xrc->node      = xd->node;
    qp->xrc->xrcd      = xd->id;
    qp->xrc->tgt_index = attr->qp_num & 0xffffu;
    qp->xrc->tgt_gen   = gv >> 1;
    qp->xrc->tgt_qpn   = attr->qp_num;
    qp->super.qp_num   = attr->qp_num;
    /* as connected as the target itself: its creator took it to RTR, or will */
    qp->super.state    = TMX_QPS_RTR;
    if (owner != 0) {
        qp->xrc->watch = tmx_soft_xwatch_get(dev->xrc, owner);
    }
    tmx_list_add_tail(&dev->xrc->tgts, &qp->xrc->list);
    dev->stats.xrc_tgt_open++;
    *qp_p = &qp->super;
    return TMX_OK;
}

/* INIT -> RTR of a TGT we created: it serves the initiator whose blob this is. */
static tmx_status_t tmx_soft_xrc_tgt_connect(tmx_soft_qp_t *qp, const tmx_qp_attr_t *attr)
{
    tmx_soft_dev_t      *dev = qp->dev;
    tmx_soft_xqp_t      *xq  = qp->xrc;
    tmx_soft_xtgt_ent_t *e   = &xq->node->tgt[xq->tgt_index];
    const uint8_t       *da;
    size_t               dlen;
    pid_t                pid;
    uint64_t             start, boot, owner;
    tmx_status_t         status;

    status = tmx_soft_qp_addr_dev(attr->remote_addr, attr->remote_addr_len, &da, &dlen);
    if (status == TMX_OK) {
        status = tmx_soft_addr_owner(da, dlen, &pid, &start, &boot);
    }
    if (status != TMX_OK) {
        return status;
    }
    if (boot != dev->boot_hash) {
        return TMX_ERR_UNREACHABLE;
    }
    owner = (uint32_t)pid | (uint64_t)(uint32_t)start << 32;
    memcpy(&e->ini_qpn, (const uint8_t *)attr->remote_addr + 8, sizeof(e->ini_qpn));
    atomic_store_explicit(&e->ini_owner, owner, memory_order_release);
    xq->watch = tmx_soft_xwatch_get(dev->xrc, owner);
    return xq->watch != NULL ? TMX_OK : TMX_ERR_NO_MEMORY;
}

tmx_status_t tmx_soft_xrc_get_addr(tmx_soft_qp_t *qp, void *buf, size_t *len_p)
{
    tmx_soft_xtgt_addr_t a;
    tmx_soft_xqp_t      *xq = qp->xrc;

    if (buf == NULL || len_p == NULL || *len_p < sizeof(a)) {
        return TMX_ERR_INVALID_PARAM;
    }
    memset(&a, 0, sizeof(a));
    a.magic     = TMX_SOFT_XTGT_MAGIC;
    a.version   = TMX_SOFT_VERSION;
    a.len       = sizeof(a);
    a.qpn       = xq->tgt_qpn;
    a.gen       = xq->tgt_gen;
    a.node_hash = xq->node->hash;
    a.nonce     = xq->node->hdr->nonce;
    a.xrcd      = xq->xrcd;
    a.boot_hash = qp->dev->boot_hash;
    memcpy(buf, &a, sizeof(a));
    *len_p = sizeof(a);
    return TMX_OK;
}

/* The async error of a TGT handle: its initiator's process died. */
static void tmx_soft_xrc_tgt_fail(tmx_soft_qp_t *qp)
{
    tmx_wc_t wc;

    qp->super.state = TMX_QPS_ERR;
    memset(&wc, 0, sizeof(wc));
    wc.wr_id  = TMX_WR_ID_ASYNC_ERROR;
    wc.status = TMX_WC_RETRY_EXC_ERR;
    wc.opcode = TMX_WC_SEND;
    wc.qp_num = qp->super.qp_num;
    tmx_soft_cq_push((tmx_soft_cq_t *)qp->super.send_cq, &wc);
}

/* ---------------------------------------------------------------- initiator QPs and routes */

tmx_status_t tmx_soft_xrc_ini_init(tmx_soft_qp_t *qp)
{
    tmx_soft_xqp_t *xq;

    if (tmx_soft_xdev(qp->dev) == NULL) {
        return TMX_ERR_NO_MEMORY;
    }
    xq = calloc(1, sizeof(*xq));
    if (xq == NULL) {
        return TMX_ERR_NO_MEMORY;
    }
    if (tmx_hash_init(&xq->routes, 16) != TMX_OK) {
        free(xq);
        return TMX_ERR_NO_MEMORY;
    }
    tmx_list_init(&xq->list);
    xq->qp          = qp;
    xq->max_send_wr = qp->sq_size;
    qp->xrc         = xq;
    tmx_list_add_tail(&qp->dev->xrc->inis, &xq->list);
    return TMX_OK;
}

/* Gives the route's line up (CLOSE, and the released marker) and frees it. */
static void tmx_soft_xroute_free(tmx_soft_qp_t *ini, tmx_soft_qp_t *rt)
{
    tmx_soft_dev_t *dev = rt->dev;

    if (rt->rseg != NULL && !tmx_soft_rseg_dead(rt->rseg) &&
        atomic_load_explicit(&rt->peer_ctrl->gen, memory_order_relaxed) == rt->out_gen) {
        if (rt->super.state == TMX_QPS_RTS) {
            (void)tmx_soft_qp_send_close(rt);
        }
        atomic_store_explicit(&rt->peer_ctrl->consumed, rt->out_gen, memory_order_release);
    }
    tmx_soft_qp_release(rt);
    tmx_soft_rseg_put(dev, rt->rseg);
    if (ini != NULL) {
        tmx_hash_del(&ini->xrc->routes, rt->xrc_srqn);
        if (ini->xrc->last == rt) {
            ini->xrc->last = NULL;
        }
        ini->xrc->nroutes--;
    }
    dev->stats.xrc_routes--;
    free(rt->sq);
    free(rt);
}

static void tmx_soft_xroutes_free(tmx_soft_qp_t *ini)
{
    tmx_soft_xqp_t *xq = ini->xrc;

    for (size_t i = 0; i < xq->routes.cap; i++) {
        void *v = xq->routes.vals[i];

        if (v != NULL && v != TMX_HASH_TOMBSTONE) {
            tmx_soft_xroute_free(ini, v);
        }
    }
    xq->last = NULL;
}

/* The INI goes to error: every route flushes what it holds, and (async) the core hears of it
 * once, for every remote SRQ (src_qp 0). */
static void tmx_soft_xini_fail(tmx_soft_qp_t *ini, tmx_wc_status_t status, int async)
{
    tmx_soft_xqp_t *xq = ini->xrc;

    if (ini->super.state == TMX_QPS_ERR) {
        return;
    }
    ini->super.state = TMX_QPS_ERR;
    for (size_t i = 0; i < xq->routes.cap; i++) {
        tmx_soft_qp_t *rt = xq->routes.vals[i];

        if (rt != NULL && (void *)rt != TMX_HASH_TOMBSTONE) {
            tmx_soft_qp_error(rt, TMX_WC_WR_FLUSH_ERR, 0);
        }
    }
    if (async) {
        tmx_wc_t wc;

        memset(&wc, 0, sizeof(wc));
        wc.wr_id  = TMX_WR_ID_ASYNC_ERROR;
        wc.status = status;
        wc.opcode = TMX_WC_SEND;
        wc.qp_num = ini->super.qp_num;
        tmx_soft_cq_push((tmx_soft_cq_t *)ini->super.send_cq, &wc);
    }
}

/* INIT -> RTR of an INI: the target QP's blob; its node's table is opened to resolve the SRQ
 * numbers the work requests name. */
static tmx_status_t tmx_soft_xini_connect(tmx_soft_qp_t *qp, const tmx_qp_attr_t *attr)
{
    tmx_soft_dev_t      *dev = qp->dev;
    tmx_soft_xqp_t      *xq  = qp->xrc;
    tmx_soft_xtgt_addr_t a;
    tmx_soft_xnode_t    *n;
    tmx_soft_xtgt_ent_t *e;
    uint32_t             gv = 0;
    tmx_status_t         status;

    if (attr->remote_addr == NULL || attr->remote_addr_len != sizeof(a)) {
        return TMX_ERR_INVALID_ADDR;
    }
    memcpy(&a, attr->remote_addr, sizeof(a));
    if (a.magic != TMX_SOFT_XTGT_MAGIC || a.version != TMX_SOFT_VERSION || a.len != sizeof(a)) {
        return TMX_ERR_INVALID_ADDR;
    }
    if (a.boot_hash != dev->boot_hash) {
        return TMX_ERR_UNREACHABLE;
    }
    n = tmx_soft_xnode_get(dev, a.node_hash, &status);
    if (n == NULL) {
        return status;
    }
    e = tmx_soft_tgt_entry(n, a.qpn, &gv);
    if (n->hdr->nonce != a.nonce || e == NULL || (gv >> 1) != a.gen || e->xrcd != a.xrcd) {
        tmx_soft_xnode_put(dev, n);
        return TMX_ERR_INVALID_ADDR; /* that target QP is gone or never was */
    }
    tmx_soft_xnode_put(dev, xq->node); /* a reconnect after RESET */
    xq->node      = n;
    xq->xrcd      = a.xrcd;
    xq->tgt_index = a.qpn & 0xffffu;
    xq->tgt_gen   = a.gen;
    xq->tgt_qpn   = a.qpn;
    return TMX_OK;
}

tmx_status_t tmx_soft_xrc_modify(tmx_soft_qp_t *qp, const tmx_qp_attr_t *attr,
                                 unsigned attr_mask)
{
    tmx_qp_state_t cur = qp->super.state;
    tmx_status_t   status = TMX_OK;

    if ((attr_mask & TMX_QP_ATTR_OOO) && attr->ooo) {
        return TMX_ERR_INVALID_PARAM; /* OOO placement is an RC QP's */
    }
    switch (attr->state) {
    case TMX_QPS_INIT:
        status = cur == TMX_QPS_RESET && qp->xrc->created ? TMX_OK : TMX_ERR_INVALID_PARAM;
        break;
    case TMX_QPS_RTR:
        if (cur != TMX_QPS_INIT || !(attr_mask & TMX_QP_ATTR_REMOTE)) {
            status = TMX_ERR_INVALID_PARAM;
        } else if (qp->super.type == TMX_QPT_XRC_INI) {
            status = tmx_soft_xini_connect(qp, attr);
        } else {
            status = tmx_soft_xrc_tgt_connect(qp, attr);
        }
        break;
    case TMX_QPS_RTS:
        /* verbs takes an XRC_RECV QP no further than RTR; RTS is accepted as a no-op */
        status = cur == TMX_QPS_RTR ? TMX_OK : TMX_ERR_INVALID_PARAM;
        break;
    case TMX_QPS_ERR:
        if (qp->super.type == TMX_QPT_XRC_INI) {
            tmx_soft_xini_fail(qp, TMX_WC_WR_FLUSH_ERR, 0);
        }
        break;
    case TMX_QPS_RESET:
        if (qp->super.type != TMX_QPT_XRC_INI || cur == TMX_QPS_RESET) {
            status = TMX_ERR_INVALID_PARAM;
        } else {
            tmx_soft_xroutes_free(qp);
        }
        break;
    default:
        status = TMX_ERR_INVALID_PARAM;
        break;
    }
    if (status == TMX_OK) {
        qp->super.state = attr->state;
    }
    return status;
}

/*
 * The INI's route to the SRQ numbered srqn, made at its first work request: the number is
 * looked up in the target's node table (it must name an XRC SRQ of the target's domain), the
 * owner's segment is mapped, and a stream line there claimed. NULL with *status_p TMX_OK
 * when the work request must complete with *wc_p (a bad number: REM_INV_REQ_ERR; a process
 * gone: RETRY_EXC_ERR); NULL with another status when it cannot be posted now.
 */
static tmx_soft_qp_t *tmx_soft_xroute_new(tmx_soft_qp_t *ini, uint32_t srqn,
                                          tmx_wc_status_t *wc_p, tmx_status_t *status_p)
{
    tmx_soft_dev_t      *dev = ini->dev;
    tmx_soft_xqp_t      *xq  = ini->xrc;
    tmx_soft_xsrq_ent_t *e;
    tmx_soft_rseg_t     *r;
    tmx_soft_qp_t       *rt;
    uint8_t              da[sizeof(e->dev)];
    uint32_t             gv = 0, dlen, max, start;
    uint64_t             xrcd, line_gen;
    tmx_soft_ring_ctrl_t *line = NULL;
    tmx_status_t          st;

    *status_p = TMX_OK;
    if (xq->nroutes >= dev->hdr->max_xs) {
        if (!dev->xrc->warned_lines++) {
            tmx_warn("qp %u: XRC sends to %u SRQs at once: no route left (TMX_SOFT_XRC_STREAMS)",
                     ini->super.qp_num, xq->nroutes);
        }
        *status_p = TMX_ERR_NO_RESOURCE;
        return NULL;
    }
    e = tmx_soft_srqn_entry(xq->node, srqn, &gv);
    if (e == NULL) {
        *wc_p = TMX_WC_REM_INV_REQ_ERR;
        return NULL;
    }
    /* copied, then the word checked again: an entry given to another SRQ meanwhile is seen */
    xrcd = e->xrcd;
    dlen = e->dev_len;
    if (dlen > sizeof(da)) {
        dlen = 0;
    }
    memcpy(da, e->dev, dlen);
    TMX_SOFT_ACQUIRE_FENCE();
    if (atomic_load_explicit(&e->gen_valid, memory_order_relaxed) != gv || xrcd != xq->xrcd ||
        dlen == 0) {
        *wc_p = TMX_WC_REM_INV_REQ_ERR; /* not an SRQ of the target's domain */
        return NULL;
    }
    r = tmx_soft_rseg_get(dev, da, dlen, &st);
    if (r == NULL) {
        if (st == TMX_ERR_NO_MEMORY) {
            *status_p = st;
        } else {
            *wc_p = TMX_WC_RETRY_EXC_ERR; /* its process is gone */
        }
        return NULL;
    }
    if (tmx_soft_rseg_dead(r)) {
        tmx_soft_rseg_put(dev, r);
        *wc_p = TMX_WC_RETRY_EXC_ERR;
        return NULL;
    }
    max   = r->hdr->max_xs;
    start = max > 0 ? (uint32_t)(tmx_hash_u64(dev->lock_id ^ ini->super.qp_num ^
                                              (uint64_t)srqn << 32) % max)
                    : 0;
    for (uint32_t k = 0; k < max; k++) {
        tmx_soft_ring_ctrl_t *c   = (tmx_soft_ring_ctrl_t *)((uint8_t *)r->base + r->hdr->xs_off) +
                                    (start + k) % max;
        uint64_t              cur = 0;

        if (atomic_load_explicit(&c->lock, memory_order_relaxed) == 0 &&
            atomic_compare_exchange_strong_explicit(&c->lock, &cur, dev->lock_id,
                                                    memory_order_acquire,
                                                    memory_order_relaxed)) {
            line  = c;
            start = (start + k) % max;
            break;
        }
    }
    if (line == NULL) {
        if (!dev->xrc->warned_lines++) {
            tmx_warn("qp %u: all %u XRC stream lines of process %d are taken "
                     "(TMX_SOFT_XRC_STREAMS there)", ini->super.qp_num, max, (int)r->pid);
        }
        tmx_soft_rseg_put(dev, r);
        *status_p = TMX_ERR_NO_RESOURCE;
        return NULL;
    }
    rt = calloc(1, sizeof(*rt));
    if (rt != NULL) {
        rt->sq_size = tmx_soft_pow2u(xq->max_send_wr ? xq->max_send_wr : 256);
        rt->sq_cap  = rt->sq_size < 16 ? rt->sq_size : 16;
        rt->sq      = calloc(rt->sq_cap, sizeof(*rt->sq));
    }
    if (rt == NULL || rt->sq == NULL || tmx_hash_put(&xq->routes, srqn, rt) != TMX_OK) {
        if (rt != NULL) {
            free(rt->sq);
        }
        free(rt);
        atomic_store_explicit(&line->lock, 0, memory_order_release);
        tmx_soft_rseg_put(dev, r);
        *status_p = TMX_ERR_NO_MEMORY;
        return NULL;
    }
    /* the claim: what it is for, then the generation its records will carry (release: a
     * reader that sees the generation sees the rest) */
    atomic_store_explicit(&line->tail, (uint64_t)srqn << 32 | xq->tgt_qpn, memory_order_relaxed);
    atomic_store_explicit(&line->consumed, 0, memory_order_relaxed);
    line_gen = atomic_fetch_add_explicit(&line->gen, 1, memory_order_acq_rel) + 1;
    rt->dev           = dev;
    rt->index         = ~TMX_SOFT_XRC_DST;
    rt->in_stop       = UINT64_MAX;
    rt->sig_all       = ini->sig_all;
    rt->max_inline    = ini->max_inline;
    rt->xrc_srqn      = srqn;
    rt->rseg          = r;
    rt->peer_ctrl     = line;
    rt->remote_index  = TMX_SOFT_XRC_DST | start;
    rt->out_gen       = (uint32_t)line_gen;
    rt->out_grant     = atomic_load(&line->grant) & ~(uint64_t)UINT32_MAX;
    rt->cma           = tmx_soft_rseg_cma(dev, r);
    rt->cma_min       = 0; /* an XRC target serves no RDMA through the rings */
    rt->super.pd      = ini->super.pd;
    rt->super.type    = TMX_QPT_RC; /* the RC send machinery, aimed at a stream line */
    rt->super.state   = TMX_QPS_RTS;
    rt->super.qp_num  = ini->super.qp_num;
    rt->super.send_cq = ini->super.send_cq;
    rt->super.recv_cq = ini->super.send_cq;
    tmx_soft_touch(rt->sq, rt->sq_cap * sizeof(*rt->sq));
    tmx_soft_qp_activate(rt); /* its peer's life is checked as an RC QP's */
    xq->nroutes++;
    dev->stats.xrc_routes++;
    return rt;
}

/* A work request that cannot go anywhere completes at once, with status. */
static void tmx_soft_xini_complete(tmx_soft_qp_t *ini, const tmx_send_wr_t *wr,
                                   tmx_wc_status_t status)
{
    tmx_wc_t wc;

    memset(&wc, 0, sizeof(wc));
    wc.wr_id  = wr->wr_id;
    wc.status = status;
    wc.opcode = wr->opcode == TMX_WR_RDMA_READ    ? TMX_WC_RDMA_READ
                : wr->opcode == TMX_WR_RDMA_WRITE ||
                          wr->opcode == TMX_WR_RDMA_WRITE_WITH_IMM
                    ? TMX_WC_RDMA_WRITE
                    : TMX_WC_SEND;
    wc.qp_num = ini->super.qp_num;
    wc.src_qp = wr->remote_srqn;
    tmx_soft_cq_push((tmx_soft_cq_t *)ini->super.send_cq, &wc);
}

tmx_soft_qp_t *tmx_soft_xrc_route_hint(tmx_soft_qp_t *ini, const tmx_send_wr_t *wr)
{
    tmx_soft_qp_t *rt = ini->xrc->last;

    if (rt == NULL || wr->next != NULL || ini->xrc->last_srqn != wr->remote_srqn ||
        ini->super.state != TMX_QPS_RTS || rt->super.state != TMX_QPS_RTS ||
        (wr->opcode != TMX_WR_SEND && wr->opcode != TMX_WR_SEND_WITH_IMM)) {
        return NULL;
    }
    return rt;
}

tmx_status_t tmx_soft_xrc_ini_post(tmx_soft_qp_t *ini, tmx_send_wr_t *wr, tmx_send_wr_t **bad_p)
{
    tmx_soft_xqp_t *xq     = ini->xrc;
    tmx_status_t    status = TMX_OK;

    for (; wr != NULL; wr = wr->next) {
        tmx_soft_qp_t  *rt;
        tmx_send_wr_t   one;
        tmx_wc_status_t wcst = TMX_WC_SUCCESS;

        if (ini->super.state == TMX_QPS_ERR) {
            tmx_soft_xini_complete(ini, wr, TMX_WC_WR_FLUSH_ERR);
            continue;
        }
        if (ini->super.state != TMX_QPS_RTS) {
            status = TMX_ERR_INVALID_PARAM;
            goto bad;
        }
        if (xq->last != NULL && xq->last_srqn == wr->remote_srqn) {
            rt = xq->last;
        } else {
            rt = tmx_hash_get(&xq->routes, wr->remote_srqn);
        }
        if (rt != NULL && rt->super.state == TMX_QPS_ERR && rt->sq_count == 0) {
            tmx_soft_xroute_free(ini, rt); /* its process died: the number is looked up again */
            rt = NULL;
        }
        if (rt == NULL) {
            rt = tmx_soft_xroute_new(ini, wr->remote_srqn, &wcst, &status);
        }
        if (rt == NULL) {
            if (status != TMX_OK) {
                goto bad;
            }
            tmx_soft_xini_complete(ini, wr, wcst);
            if (wcst == TMX_WC_REM_INV_REQ_ERR) {
                /* the responder's NAK: the QP goes to error, as on hardware */
                tmx_warn("qp %u: XRC send to SRQ number %u, which names no SRQ of the target's "
                         "domain: qp to error", ini->super.qp_num, wr->remote_srqn);
                tmx_soft_xini_fail(ini, wcst, 1);
            }
            continue;
        }
        xq->last      = rt;
        xq->last_srqn = wr->remote_srqn;
        if (rt->super.state == TMX_QPS_ERR) {
            tmx_soft_xini_complete(ini, wr, TMX_WC_WR_FLUSH_ERR);
            continue;
        }
        if (!rt->cma && wr->opcode != TMX_WR_SEND && wr->opcode != TMX_WR_SEND_WITH_IMM) {
            if (!ini->dev->xrc->warned_cma++) {
                tmx_error("qp %u: XRC RDMA to process %d needs cross-memory attach, which "
                          "does not work toward it", ini->super.qp_num, (int)rt->rseg->pid);
            }
            tmx_soft_xini_complete(ini, wr, TMX_WC_REM_INV_REQ_ERR);
            continue;
        }
        one      = *wr;
        one.next = NULL;
        status   = tmx_soft_post_send(&rt->super, &one, NULL);
        if (status != TMX_OK) {
            goto bad;
        }
    }
    return TMX_OK;

bad:
    if (bad_p != NULL) {
        *bad_p = wr;
    }
    return status;
}

/* ---------------------------------------------------------------- destroy */

void tmx_soft_xrc_qp_destroy(tmx_soft_qp_t *qp)
{
    tmx_soft_dev_t *dev = qp->dev;
    tmx_soft_xqp_t *xq  = qp->xrc;

    if (xq == NULL) {
        return;
    }
    if (qp->super.type == TMX_QPT_XRC_INI) {
        tmx_soft_xroutes_free(qp);
        tmx_hash_cleanup(&xq->routes);
        tmx_soft_xnode_put(dev, xq->node);
        tmx_list_del(&xq->list);
        free(xq);
        qp->xrc = NULL;
        return; /* the slot is the caller's */
    }
    /* a TGT handle: the entry lives until its last handle goes */
    tmx_list_del(&xq->list);
    tmx_soft_xwatch_put(dev->xrc, xq->watch);
    if (xq->node != NULL) {
        tmx_soft_xtgt_ent_t *e = &xq->node->tgt[xq->tgt_index];

        tmx_soft_xlock(&xq->node->hdr->lock, dev->lock_id);
        if ((atomic_load(&e->gen_valid) >> 1) == xq->tgt_gen &&
            atomic_fetch_sub(&e->refs, 1) == 1) {
            atomic_fetch_and_explicit(&e->gen_valid, ~1u, memory_order_release);
        }
        tmx_soft_xunlock(&xq->node->hdr->lock);
        tmx_soft_xnode_put(dev, xq->node);
    }
    if (xq->created) {
        dev->stats.qps_xrc_tgt--;
    } else {
        dev->stats.xrc_tgt_open--;
    }
    free(xq);
    free(qp);
}

/* ---------------------------------------------------------------- streams (receiving side) */

static inline tmx_soft_ring_ctrl_t *tmx_soft_xs_line(tmx_soft_dev_t *dev, uint32_t idx)
{
    return (tmx_soft_ring_ctrl_t *)((uint8_t *)dev->base + dev->hdr->xs_off) + idx;
}

/* A stream receiver goes; with free_line its line is free for the next claim (the claim it
 * served is over: closed, dead, or refused), else a newer claim holds it already. */
static void tmx_soft_xs_free(tmx_soft_dev_t *dev, tmx_soft_qp_t *st, int free_line)
{
    uint32_t              idx  = st->index & ~TMX_SOFT_XRC_DST;
    tmx_soft_ring_ctrl_t *line = st->my_ctrl;

    tmx_soft_qp_release(st);
    if (free_line) {
        /* a bumped generation: what the old claim still writes is dropped, and its sender,
         * if busy, sees the line taken back (tmx_soft_qp_peer_dead) */
        atomic_fetch_add_explicit(&line->gen, 1, memory_order_acq_rel);
        atomic_store_explicit(&line->lock, 0, memory_order_release);
    }
    tmx_soft_xwatch_put(dev->xrc, st->xrc_watch);
    dev->xrc->xs[idx]         = NULL;
    dev->xrc->xs_idle_ns[idx] = 0;
    dev->stats.xrc_streams--;
    free(st);
}

tmx_soft_qp_t *tmx_soft_xrc_stream(tmx_soft_dev_t *dev, uint32_t idx, uint32_t gen)
{
    tmx_soft_xdev_t      *x = dev->xrc;
    tmx_soft_ring_ctrl_t *line;
    tmx_soft_qp_t        *st;
    tmx_soft_xsrq_t      *xs = NULL;
    tmx_list_t           *pos;
    uint64_t              dest, claim;
    uint32_t              gv = 0, srqn, tgt;
    tmx_soft_xtgt_ent_t  *e;

    if (x == NULL || idx >= dev->hdr->max_xs) {
        return NULL;
    }
    st = x->xs[idx];
    if (st != NULL && st->my_gen == gen) {
        return st->super.state == TMX_QPS_RTS ? st : NULL;
    }
    line  = tmx_soft_xs_line(dev, idx);
    claim = atomic_load_explicit(&line->lock, memory_order_acquire);
    if (atomic_load_explicit(&line->gen, memory_order_acquire) != gen || claim == 0) {
        return NULL; /* a record of a claim that is over: dropped */
    }
    if (st != NULL) {
        tmx_soft_xs_free(dev, st, 0); /* its claim ended, a new one holds the line */
    }
    dest = atomic_load_explicit(&line->tail, memory_order_relaxed);
    srqn = (uint32_t)(dest >> 32);
    tgt  = (uint32_t)dest;
    tmx_list_for_each(pos, &x->xsrqs) {
        tmx_soft_xsrq_t *c = tmx_container_of(pos, tmx_soft_xsrq_t, list);

        if (c->srqn == srqn) {
            xs = c;
            break;
        }
    }
    e = xs != NULL ? tmx_soft_tgt_entry(xs->xrcd->node, tgt, &gv) : NULL;
    if (e == NULL || e->xrcd != xs->xrcd->id) {
        tmx_warn("XRC stream %u: for SRQ number %u through target qp %u, which is not a pair "
                 "of one domain here: refused", idx, srqn, tgt);
        atomic_store_explicit(&line->err_gen, gen, memory_order_relaxed);
        return NULL;
    }
    /* a target takes packets from the initiator it is connected to only (hardware: the
     * connection's QP number and PSN): the claimant must be that initiator's process, or one
     * process could send through another's target and be taken for it */
    if (atomic_load_explicit(&e->ini_owner, memory_order_acquire) != claim) {
        tmx_warn("XRC stream %u: process %d claims target qp %u, whose initiator is another "
                 "process's: refused", idx, (int)(uint32_t)claim, tgt);
        atomic_store_explicit(&line->err_gen, gen, memory_order_relaxed);
        return NULL;
    }
    st = calloc(1, sizeof(*st));
    if (st == NULL) {
        return NULL; /* the record waits in the ring for a later poll */
    }
    st->dev           = dev;
    st->index         = TMX_SOFT_XRC_DST | idx;
    st->my_ctrl       = line;
    st->my_gen        = gen;
    st->grant_seq     = (uint32_t)(atomic_load(&line->grant) >> 32);
    st->in_stop       = UINT64_MAX;
    st->sig_all       = 0;
    st->super.pd      = xs->srq->super.pd;
    st->super.type    = TMX_QPT_XRC_TGT;
    st->super.state   = TMX_QPS_RTS;
    st->super.qp_num  = tgt;
    st->super.srq     = &xs->srq->super;
    st->super.recv_cq = xs->srq->super.cq;
    st->super.send_cq = xs->srq->super.cq;
    st->xrc_watch = tmx_soft_xwatch_get(x, claim); /* the claimant, watched for its death */
    x->xs[idx] = st;
    dev->stats.xrc_streams++;
    return st;
}

int tmx_soft_xrc_rx_close(tmx_soft_qp_t *qp)
{
    if (!(qp->index & TMX_SOFT_XRC_DST)) {
        return -1; /* TMX_SOFT_RX_BAD: CLOSE belongs to streams */
    }
    /* freed by the next check (not here: the caller may still be reading its ring) */
    qp->super.state = TMX_QPS_RESET;
    return 1; /* TMX_SOFT_RX_DONE */
}

/* ---------------------------------------------------------------- the periodic check */

void tmx_soft_xrc_check(tmx_soft_dev_t *dev)
{
    tmx_soft_xdev_t *x   = dev->xrc;
    uint64_t         now = tmx_time_ns();
    tmx_list_t      *pos;

    for (unsigned i = 0; i < dev->hdr->max_xs; i++) {
        tmx_soft_qp_t        *st = x->xs[i];
        tmx_soft_ring_ctrl_t *line;
        tmx_soft_xwatch_t    *w;

        if (st == NULL) {
            continue;
        }
        line = st->my_ctrl;
        w    = st->xrc_watch;
        if (st->super.state == TMX_QPS_RESET) {
            tmx_soft_xs_free(dev, st, 1); /* closed by its sender */
        } else if (w != NULL && tmx_soft_xwatch_dead(w)) {
            if (st->super.state == TMX_QPS_RTS) {
                tmx_wc_t wc;

                memset(&wc, 0, sizeof(wc));
                wc.wr_id  = TMX_WR_ID_ASYNC_ERROR;
                wc.status = TMX_WC_RETRY_EXC_ERR;
                wc.opcode = TMX_WC_SEND;
                wc.qp_num = st->super.qp_num;
                tmx_soft_cq_push((tmx_soft_cq_t *)st->super.send_cq, &wc);
            }
            tmx_soft_xs_free(dev, st, 1);
        } else if (atomic_load_explicit(&line->consumed, memory_order_acquire) == st->my_gen &&
                   st->park == NULL) {
            /* released, and its CLOSE not seen: once idle for a while, over */
            if (x->xs_idle_ns[i] == 0 || st->rx_win == dev->win) {
                x->xs_idle_ns[i] = now;
            } else if (now - x->xs_idle_ns[i] > TMX_SOFT_XS_IDLE_NS) {
                tmx_soft_xs_free(dev, st, 1);
            }
        }
    }
    /* target handles: their initiator's process */
    tmx_list_for_each(pos, &x->tgts) {
        tmx_soft_xqp_t *xq = tmx_container_of(pos, tmx_soft_xqp_t, list);

        if (xq->watch == NULL && xq->node != NULL) {
            uint64_t owner = atomic_load(&xq->node->tgt[xq->tgt_index].ini_owner);

            if (owner != 0) {
                xq->watch = tmx_soft_xwatch_get(x, owner); /* opened before its RTR */
            }
        }
        if (xq->watch != NULL && xq->qp->super.state != TMX_QPS_ERR &&
            xq->qp->super.state != TMX_QPS_RESET && tmx_soft_xwatch_dead(xq->watch)) {
            tmx_soft_xrc_tgt_fail(xq->qp);
        }
    }
    /* initiators: their target QP (destroyed by its last holder: hardware's initiator then
     * gets no answer, once it has something to send) */
    tmx_list_for_each(pos, &x->inis) {
        tmx_soft_xqp_t      *xq = tmx_container_of(pos, tmx_soft_xqp_t, list);
        tmx_soft_qp_t       *qp = xq->qp;
        uint32_t             gv = 0;
        int                  busy = 0;

        if (qp->super.state != TMX_QPS_RTS || xq->node == NULL ||
            tmx_soft_tgt_entry(xq->node, xq->tgt_qpn, &gv) != NULL) {
            continue;
        }
        for (size_t k = 0; k < xq->routes.cap && !busy; k++) {
            tmx_soft_qp_t *rt = xq->routes.vals[k];

            busy = rt != NULL && (void *)rt != TMX_HASH_TOMBSTONE && rt->sq_count > 0;
        }
        if (busy) {
            tmx_warn("qp %u: its XRC target qp %u is gone", qp->super.qp_num, xq->tgt_qpn);
            tmx_soft_xini_fail(qp, TMX_WC_RETRY_EXC_ERR, 1);
        }
    }
}

void tmx_soft_xrc_dev_close(tmx_soft_dev_t *dev)
{
    tmx_soft_xdev_t *x = dev->xrc;
    tmx_list_t      *pos, *tmp;

    if (x == NULL) {
        return;
    }
    for (unsigned i = 0; i < dev->hdr->max_xs; i++) {
        if (x->xs[i] != NULL) {
            tmx_soft_xs_free(dev, x->xs[i], 1);
        }
    }
    /* objects the user did not destroy: their entries and tables are given back */
    tmx_list_for_each_safe(pos, tmp, &x->inis) {
        tmx_soft_xqp_t *xq = tmx_container_of(pos, tmx_soft_xqp_t, list);

        tmx_soft_xroutes_free(xq->qp);
        tmx_list_del(&xq->list);
        tmx_list_init(&xq->list);
    }
    tmx_list_for_each_safe(pos, tmp, &x->tgts) {
        tmx_soft_xrc_qp_destroy(tmx_container_of(pos, tmx_soft_xqp_t, list)->qp);
    }
    tmx_list_for_each_safe(pos, tmp, &x->nodes) {
        tmx_soft_xnode_t *n = tmx_container_of(pos, tmx_soft_xnode_t, list);

        tmx_list_del(&n->list);
        tmx_soft_xnode_close(dev, n);
        free(n);
    }
    tmx_hash_cleanup(&x->watches);
    free(x->xs);
    free(x->xs_idle_ns);
    free(x);
    dev->xrc = NULL;
}
