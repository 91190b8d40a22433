/*
 * Soft device, shared-memory fabric: queue pairs, the rings (the wire), RDMA by cross-memory
 * attach or through the rings, progress and completion polling.
 *
 * A fast ring has one producer (the QP it is lent to) and one consumer (the owner): the only
 * synchronization is the release store of a record's stamp and the acquire load that sees
 * it, plus the consumer's position published every quarter ring. The inbox has many
 * producers, serialized by a lock word naming the producer by pid and start time (so a
 * producer that dies holding it can be detected, even once its pid is reused, and the lock
 * taken over). soft.h tells how a ring is lent and taken back.
 *
 * UD: one UD QP per device; its qp_num is its slot + 1 like any QP, and datagrams for it go
 * to the device's inbox (a datagram naming another qp number is dropped).
 */
#define _GNU_SOURCE
#define TMX_LOG_SUBSYS "soft"

#include <endian.h>
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#endif
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

#include "prov/soft/soft.h"
#include "util/copy.h"
#include "util/log.h"
#include "util/time.h"

typedef struct tmx_soft_qp_addr {
    uint32_t magic;
    uint16_t version;
    uint16_t len;
    uint32_t qp_num;
    uint32_t index;
    uint32_t gen;
    uint32_t dev_len;
    uint8_t  dev[TMX_DEV_ADDR_MAX - 24];
} tmx_soft_qp_addr_t;

#define TMX_SOFT_HDR      sizeof(tmx_soft_rec_t)
#define TMX_SOFT_HDR_EXT  (sizeof(tmx_soft_rec_t) + sizeof(tmx_soft_rec_ext_t))
#define TMX_SOFT_DRAIN    64                  /* records per ring per poll */
#define TMX_SOFT_FAST_AFTER 16                /* inbox records in a window that earn a ring */
#define TMX_SOFT_FAST_SHARE 4                 /* ... if at least 1/4 of the window's records */
#define TMX_SOFT_WIN_NS   (10ull * 1000000)   /* traffic window */
#define TMX_SOFT_REST_WIN 100                 /* windows a dropped fast ring rests */
#define TMX_SOFT_CHECK_NS (100ull * 1000000)  /* peer liveness check period */
#define TMX_SOFT_TX_GONE  (-1)                /* tx: the peer process is gone */
#define TMX_SOFT_CMA_CHECK_NS (1000000ull)    /* see tmx_soft_cma_target_gone */

static void tmx_soft_fast_drop(tmx_soft_qp_t *qp);
static void tmx_soft_park_free(tmx_soft_qp_t *qp);
static void tmx_soft_tm_rndv_done(tmx_soft_qp_t *qp, const tmx_soft_swr_t *swr);
static void tmx_soft_tm_rx_end(tmx_soft_qp_t *qp, tmx_wc_status_t flush);

static inline size_t tmx_soft_lines(size_t bytes)
{
    return (bytes + TMX_SOFT_LINE - 1) & ~(size_t)(TMX_SOFT_LINE - 1);
}

static inline tmx_soft_rec_ext_t *tmx_soft_ext(tmx_soft_rec_t *rec)
{
    return (tmx_soft_rec_ext_t *)(rec + 1);
}

/* ---------------------------------------------------------------- scatter/gather */

static void tmx_soft_sge_gather(const tmx_sge_t *sge, int n, size_t off, uint8_t *dst,
                                size_t len)
{
    if (n == 1 && off + len <= sge[0].length) {
        tmx_copy(dst, (const uint8_t *)(uintptr_t)sge[0].addr + off, len);
        return;
    }
    for (int i = 0; i < n && len > 0; i++) {
        size_t c;

        if (off >= sge[i].length) {
            off -= sge[i].length;
            continue;
        }
        c = sge[i].length - off < len ? sge[i].length - off : len;
        tmx_copy(dst, (const uint8_t *)(uintptr_t)sge[i].addr + off, c);
        dst += c;
        len -= c;
        off  = 0;
    }
}

static void tmx_soft_sge_scatter(const tmx_sge_t *sge, int n, size_t off, const uint8_t *src,
                                 size_t len)
{
    if (n == 1 && off + len <= sge[0].length) {
        tmx_copy((uint8_t *)(uintptr_t)sge[0].addr + off, src, len);
        return;
    }
    for (int i = 0; i < n && len > 0; i++) {
        size_t c;

        if (off >= sge[i].length) {
            off -= sge[i].length;
            continue;
        }
        c = sge[i].length - off < len ? sge[i].length - off : len;
        tmx_copy((uint8_t *)(uintptr_t)sge[i].addr + off, src, c);
        src += c;
        len -= c;
        off  = 0;
    }
}

static size_t tmx_soft_sge_len(const tmx_sge_t *sge, int n)
{
    size_t total = 0;
    for (int i = 0; i < n; i++) {
        total += sge[i].length;
    }
    return total;
}

/* 0 when every local sge lies in a registration of this device with the rights. */
static int tmx_soft_sge_check(tmx_soft_dev_t *dev, const tmx_sge_t *sge, int n, unsigned access)
{
    for (int i = 0; i < n; i++) {
        if (sge[i].length != 0 &&
            tmx_soft_key_check(dev->mrs, dev->hdr->max_mrs, sge[i].lkey, sge[i].addr,
                               sge[i].length, access) != 0) {
            return -1;
        }
    }
    return 0;
}

/* ---------------------------------------------------------------- data-in-order (soft.h) */

tmx_soft_write_hook_t tmx_soft_write_hook;
void                 *tmx_soft_write_hook_arg;

uint64_t tmx_soft_rand(uint64_t *s)
{
    uint64_t x = *s;

    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return x * 0x2545f4914f6cdd1dull;
}

/* The aligned 8 bytes holding the last byte of [addr, end): how many of them the write has. */
static inline size_t tmx_soft_tail(uint64_t addr, uint64_t end)
{
    uint64_t t = (end - 1) & ~(uint64_t)7;

    return (size_t)(end - (t > addr ? t : addr));
}

size_t tmx_soft_scramble_plan(unsigned mode, uint64_t addr, size_t len, uint64_t *rng,
                              tmx_soft_piece_t *out)
{
    uint8_t  order[TMX_SOFT_SCRAMBLE_GROUPS];
    uint64_t end = addr + len, base, unit;
    size_t   groups, n = 0;

    if (len == 0) {
        return 0;
    }
    if (mode == TMX_SOFT_DIO_WHOLE) {
        size_t tail = tmx_soft_tail(addr, end);

        if (tail < len) {
            out[n++] = (tmx_soft_piece_t){0, len - tail};
        }
        out[n++] = (tmx_soft_piece_t){len - tail, tail};
        return n;
    }
    if (mode == TMX_SOFT_DIO_ALIGNED128) {
        uint64_t blocks;

        base   = addr & ~(uint64_t)127;
        blocks = (end - base + 127) / 128;
        unit   = 128 * ((blocks + TMX_SOFT_SCRAMBLE_GROUPS - 1) / TMX_SOFT_SCRAMBLE_GROUPS);
    } else {
        base = addr;
        unit = ((len + TMX_SOFT_SCRAMBLE_GROUPS - 1) / TMX_SOFT_SCRAMBLE_GROUPS + 7) &
               ~(uint64_t)7;
    }
    groups = (size_t)((end - base + unit - 1) / unit);
    for (size_t i = 0; i < groups; i++) {
        order[i] = (uint8_t)i;
    }
    for (size_t i = groups; i > 1; i--) { /* Fisher-Yates */
        size_t  j = (size_t)(tmx_soft_rand(rng) % i);
        uint8_t t = order[i - 1];

        order[i - 1] = order[j];
        order[j]     = t;
    }
    if (groups > 1 && order[groups - 1] == groups - 1) {
        /* the last group never lands last: a reader trusting its end must be caught */
        size_t j = (size_t)(tmx_soft_rand(rng) % (groups - 1));

        order[groups - 1] = order[j];
        order[j]          = (uint8_t)(groups - 1);
    }
    for (size_t i = 0; i < groups; i++) {
        uint64_t a = base + order[i] * unit, b = a + unit;

        a = a < addr ? addr : a;
        b = b > end ? end : b;
        if (mode == TMX_SOFT_DIO_ALIGNED128) {
            size_t tail = tmx_soft_tail(a, b);

            if (tail < b - a) {
                out[n++] = (tmx_soft_piece_t){(size_t)(a - addr), (size_t)(b - a) - tail};
            }
            out[n++] = (tmx_soft_piece_t){(size_t)(b - addr) - tail, tail};
        } else {
            out[n++] = (tmx_soft_piece_t){(size_t)(a - addr), (size_t)(b - a)};
        }
    }
    return n;
}

/* How writes into a device whose TMX_SOFT_DATA_IN_ORDER is mode land through qp. */
static inline unsigned tmx_soft_write_mode(const tmx_soft_qp_t *qp, uint32_t mode)
{
    return qp->ooo || mode > TMX_SOFT_DIO_NONE ? TMX_SOFT_DIO_NONE : mode;
}

/* The fallback path's RDMA write of one record's bytes: the target (we) places them. */
static void tmx_soft_place(tmx_soft_qp_t *qp, uint64_t addr, const uint8_t *src, size_t len)
{
    tmx_soft_piece_t pieces[TMX_SOFT_MAX_PIECES];
    size_t           n = tmx_soft_scramble_plan(tmx_soft_write_mode(qp, qp->dev->data_order),
                                                addr, len, &qp->dev->rng, pieces);

    for (size_t i = 0; i < n; i++) {
        memcpy((uint8_t *)(uintptr_t)addr + pieces[i].off, src + pieces[i].off, pieces[i].len);
        atomic_thread_fence(memory_order_release); /* the pieces land in this order */
        if (tmx_soft_write_hook != NULL) {
            tmx_soft_write_hook(tmx_soft_write_hook_arg, addr + pieces[i].off, pieces[i].len);
        }
    }
}

/*
 * The last len (1..8) bytes of a write, from src to dst, after everything before them and in
 * ascending address order, each store with release: a reader that sees the last byte sees
 * every earlier one, whatever order memcpy would have stored them in. A whole aligned 8 bytes
 * is one store.
 */
static inline void tmx_soft_store_tail(uint8_t *dst, const uint8_t *src, size_t len)
{
    if (len == 8 && ((uintptr_t)dst & 7) == 0) {
        uint64_t v;

        memcpy(&v, src, 8);
        __atomic_store_n((uint64_t *)(void *)dst, v, __ATOMIC_RELEASE);
        return;
    }
    for (size_t i = 0; i < len; i++) {
        __atomic_store_n(dst + i, src[i], __ATOMIC_RELEASE);
    }
}

/* The pieces of an RDMA WRITE of swr's data into dst, the target's device memory (the peer's
 * address raddr), as the target's data-in-order mode says (tmx_soft_scramble_plan): whole:
 * the last byte last; aligned128: 128-byte blocks in a scrambled order, each block's last
 * 8 bytes after its others (a run of several blocks is cut into its blocks); none: scrambled
 * pieces. Release ordering between pieces. */
static void tmx_soft_swr_data(tmx_soft_swr_t *swr, size_t off, uint8_t *dst, size_t n);

static void tmx_soft_dm_store(tmx_soft_qp_t *qp, tmx_soft_swr_t *swr, uint8_t *dst)
{
    tmx_soft_piece_t pieces[TMX_SOFT_MAX_PIECES];
    unsigned         mode = tmx_soft_write_mode(qp, qp->rseg->h.data_order);
    size_t           n    = tmx_soft_scramble_plan(mode, swr->raddr, swr->total, &qp->dev->rng,
                                                   pieces);

    for (size_t i = 0; i < n; i++) {
        size_t off = pieces[i].off, len = pieces[i].len;

        if (mode == TMX_SOFT_DIO_NONE) {
            tmx_soft_swr_data(swr, off, dst + off, len);
        } else if (len <= 8 && (off + len == swr->total ||
                                mode == TMX_SOFT_DIO_ALIGNED128)) {
            uint8_t tail[8];

            tmx_soft_swr_data(swr, off, tail, len); /* a block's (or the write's) end */
            atomic_thread_fence(memory_order_release);
            tmx_soft_store_tail(dst + off, tail, len);
        } else if (mode == TMX_SOFT_DIO_ALIGNED128) {
            /* a run of whole blocks but its last 8 bytes: each block's end after the rest */
            uint64_t a = swr->raddr + off, end = a + len;

            while (a < end) {
                uint64_t b    = (a & ~(uint64_t)127) + 128;
                uint64_t t    = b - 8 > a ? b - 8 : a;
                uint8_t  tail[8];

                if (b >= end) {
                    tmx_soft_swr_data(swr, (size_t)(a - swr->raddr),
                                      dst + (a - swr->raddr), (size_t)(end - a));
                    break;
                }
                tmx_soft_swr_data(swr, (size_t)(a - swr->raddr), dst + (a - swr->raddr),
                                  (size_t)(t - a));
                tmx_soft_swr_data(swr, (size_t)(t - swr->raddr), tail, (size_t)(b - t));
                atomic_thread_fence(memory_order_release);
                tmx_soft_store_tail(dst + (t - swr->raddr), tail, (size_t)(b - t));
                a = b;
            }
        } else {
            tmx_soft_swr_data(swr, off, dst + off, len);
        }
        atomic_thread_fence(memory_order_release); /* the pieces land in this order */
        if (tmx_soft_write_hook != NULL) {
            tmx_soft_write_hook(tmx_soft_write_hook_arg, swr->raddr + off, len);
        }
    }
}

/*
 * tmx_soft_dm_store of a whole-message device, straight from the work request's sges (the
 * eager-RDMA ring's writes: no write hook to call): what tmx_soft_scramble_plan's two pieces
 * would store, in one pass: every byte but the aligned tail, then the tail in ascending order
 * with release (tmx_soft_store_tail). total > 0; the sges hold total bytes.
 */
static inline __attribute__((always_inline)) void
tmx_soft_dm_store_whole(const tmx_sge_t *sge, int n, uint64_t raddr, size_t total, uint8_t *dst)
{
    size_t         tail = tmx_soft_tail(raddr, raddr + total);
    size_t         body = total - tail, off = 0;
    const uint8_t *src;
    uint8_t        t[8];

    if (n == 1) {
        /* one piece (the ring's small messages): the body, then the tail */
        src = (const uint8_t *)(uintptr_t)sge[0].addr;
        tmx_copy(dst, src, body);
        TMX_SOFT_RELEASE_FENCE();
        tmx_soft_store_tail(dst + body, src + body, tail);
        TMX_SOFT_RELEASE_FENCE();
        return;
    }
    for (int i = 0; i < n && off < body; i++) {
        size_t c = sge[i].length < body - off ? sge[i].length : body - off;

        tmx_copy(dst + off, (const uint8_t *)(uintptr_t)sge[i].addr, c);
        off += c;
    }
    if (sge[n - 1].length >= tail) {
        src = (const uint8_t *)(uintptr_t)sge[n - 1].addr + sge[n - 1].length - tail;
    } else {
        tmx_soft_sge_gather(sge, n, body, t, tail);
        src = t;
    }
    TMX_SOFT_RELEASE_FENCE();
    tmx_soft_store_tail(dst + body, src, tail);
    TMX_SOFT_RELEASE_FENCE();
}

/* ---------------------------------------------------------------- QP bookkeeping */

/*
 * The device keeps QPs in three unordered arrays: active (RTR/RTS: checked for their peer's
 * life), pend (with work for cq_poll besides reading rings, so that a poll costs what is
 * pending, not what is connected) and fast_on (a lent ring being read). A QP's place in one is
 * an int member (index + 1, 0 when absent), named by its offset; a removal moves the last QP
 * into the hole.
 */
static inline int *tmx_soft_set_pos(tmx_soft_qp_t *qp, size_t off)
{
    return (int *)((uint8_t *)qp + off);
}

static void tmx_soft_set_add(tmx_soft_qp_t **set, unsigned *n, tmx_soft_qp_t *qp, size_t off)
{
    if (*tmx_soft_set_pos(qp, off) == 0) {
        set[(*n)++]                 = qp;
        *tmx_soft_set_pos(qp, off) = (int)*n;
    }
}

static void tmx_soft_set_del(tmx_soft_qp_t **set, unsigned *n, tmx_soft_qp_t *qp, size_t off)
{
    int pos = *tmx_soft_set_pos(qp, off);

    if (pos != 0) {
        tmx_soft_qp_t *last = set[--(*n)];

        set[pos - 1]                 = last;
        *tmx_soft_set_pos(last, off) = pos;
        *tmx_soft_set_pos(qp, off)   = 0;
    }
}

#define TMX_SOFT_SET(_set, _num, _member)                                                          \
    static void tmx_soft_##_member##_add(tmx_soft_qp_t *qp)                                        \
    {                                                                                              \
        tmx_soft_set_add(qp->dev->_set, &qp->dev->_num, qp, offsetof(tmx_soft_qp_t, _member));     \
    }                                                                                              \
    static void tmx_soft_##_member##_del(tmx_soft_qp_t *qp)                                        \
    {                                                                                              \
        tmx_soft_set_del(qp->dev->_set, &qp->dev->_num, qp, offsetof(tmx_soft_qp_t, _member));     \
    }

TMX_SOFT_SET(active, num_active, active)
TMX_SOFT_SET(pend, num_pend, pending)
TMX_SOFT_SET(fast_on, num_fast_on, fast_on)

static tmx_soft_swr_t *tmx_soft_swr(tmx_soft_qp_t *qp, uint32_t seq)
{
    return &qp->sq[seq & (qp->sq_cap - 1)];
}

/* Doubles the send queue's entries (up to sq_size): a QP starts small, so that a process with
 * thousands of them does not pay for queues only a few fill. 0 when out of memory. */
static int tmx_soft_sq_grow(tmx_soft_qp_t *qp)
{
    unsigned        cap = qp->sq_cap * 2;
    tmx_soft_swr_t *sq  = calloc(cap, sizeof(*sq));

    if (sq == NULL) {
        return 0;
    }
    for (uint32_t s = qp->head_seq; s != qp->next_seq; s++) {
        sq[s & (cap - 1)] = *tmx_soft_swr(qp, s);
    }
    free(qp->sq);
    qp->sq     = sq;
    qp->sq_cap = cap;
    return 1;
}

static tmx_wc_opcode_t tmx_soft_wc_opcode(tmx_wr_opcode_t op)
{
    switch (op) {
    case TMX_WR_RDMA_WRITE:
    case TMX_WR_RDMA_WRITE_WITH_IMM:
        return TMX_WC_RDMA_WRITE;
    case TMX_WR_RDMA_READ:
        return TMX_WC_RDMA_READ;
    default:
        return TMX_WC_SEND;
    }
}

/* Completes finished send WRs in post order, as an RC send queue does. */
static void tmx_soft_sq_reap(tmx_soft_qp_t *qp)
{
    tmx_wc_status_t read_status = TMX_WC_SUCCESS;

    while (qp->sq_count > 0) {
        tmx_soft_swr_t *swr = tmx_soft_swr(qp, qp->head_seq);

        if (swr->state != TMX_SOFT_SWR_DONE) {
            break;
        }
        if (swr->tm_kind != TMX_SOFT_TM_WR_NONE) {
            /* rendezvous offload: the READ stays until its FIN is done, which reads its
             * status; the FIN's end is the entry's DATA_VALID completion */
            if (swr->tm_kind == TMX_SOFT_TM_WR_READ && qp->sq_count > 1 &&
                tmx_soft_swr(qp, qp->head_seq + 1)->state != TMX_SOFT_SWR_DONE) {
                break;
            }
            if (swr->tm_kind == TMX_SOFT_TM_WR_READ) {
                read_status = swr->status;
            } else {
                /* a FIN flushed behind a READ that failed: the READ's error says more */
                if (swr->status == TMX_WC_WR_FLUSH_ERR && read_status != TMX_WC_SUCCESS) {
                    swr->status = read_status;
                }
                tmx_soft_tm_rndv_done(qp, swr);
            }
        } else if (swr->signaled || swr->status != TMX_WC_SUCCESS) {
            tmx_wc_t wc;

            memset(&wc, 0, sizeof(wc));
            wc.wr_id    = swr->wr_id;
            wc.status   = swr->status;
            wc.opcode   = tmx_soft_wc_opcode(swr->opcode);
            wc.byte_len = swr->opcode == TMX_WR_RDMA_READ ? (uint32_t)swr->total : 0;
            wc.qp_num   = qp->super.qp_num;
            wc.src_qp   = qp->xrc_srqn;
            tmx_soft_cq_push((tmx_soft_cq_t *)qp->super.send_cq, &wc);
        }
        free(swr->copy);
        swr->copy = NULL;
        qp->head_seq++;
        qp->sq_count--;
        if ((int32_t)(qp->tx_seq - qp->head_seq) < 0) {
            qp->tx_seq = qp->head_seq;
        }
    }
}

/* Moves the QP to ERR: outstanding WRs complete with status for the first and FLUSH for the
 * rest; with async, one TMX_WR_ID_ASYNC_ERROR completion tells the core even when nothing was
 * outstanding. */
static void tmx_soft_qp_fail(tmx_soft_qp_t *qp, tmx_wc_status_t status, int async)
{
    tmx_wc_status_t first = status;
    tmx_soft_rwr_t  rwr;
    tmx_wc_t        wc;

    if (qp->super.state == TMX_QPS_ERR) {
        return;
    }
    qp->super.state = TMX_QPS_ERR;
    tmx_soft_active_del(qp);
    tmx_soft_pending_del(qp);
    tmx_soft_fast_drop(qp);
    tmx_soft_park_free(qp);
    for (uint32_t s = qp->head_seq; s != qp->next_seq; s++) {
        tmx_soft_swr_t *swr = tmx_soft_swr(qp, s);

        if (swr->state != TMX_SOFT_SWR_DONE) {
            swr->state  = TMX_SOFT_SWR_DONE;
            swr->status = first;
            first       = TMX_WC_WR_FLUSH_ERR;
        }
    }
    qp->tx_seq = qp->next_seq;
    tmx_soft_sq_reap(qp);
    qp->resp_count = 0;

    memset(&wc, 0, sizeof(wc));
    wc.status = TMX_WC_WR_FLUSH_ERR;
    wc.opcode = TMX_WC_RECV;
    wc.qp_num = qp->super.qp_num;
    if (qp->rx_busy && qp->tm != NULL) {
        tmx_soft_tm_rx_end(qp, TMX_WC_WR_FLUSH_ERR);
    } else if (qp->rx_busy) {
        wc.wr_id    = qp->rx_wr.wr_id;
        qp->rx_busy = 0;
        tmx_soft_cq_push((tmx_soft_cq_t *)qp->super.recv_cq, &wc);
    }
    while (tmx_soft_rq_pop(&qp->rq, &rwr)) {
        wc.wr_id = rwr.wr_id;
        tmx_soft_cq_push((tmx_soft_cq_t *)qp->super.recv_cq, &wc);
    }
    if (async) {
        memset(&wc, 0, sizeof(wc));
        wc.wr_id  = TMX_WR_ID_ASYNC_ERROR;
        wc.status = status;
        wc.opcode = TMX_WC_SEND;
        wc.qp_num = qp->super.qp_num;
        wc.src_qp = qp->xrc_srqn;
        tmx_soft_cq_push((tmx_soft_cq_t *)qp->super.send_cq, &wc);
    }
}

/* The peer process is gone: the QP goes to ERR as when no acknowledgement comes back on
 * hardware, the oldest outstanding WR with "retry exceeded", the rest flushed. */
static void tmx_soft_qp_gone(tmx_soft_qp_t *qp)
{
    /* The user of the QP hears of it (the async error): a word at debug level is enough. */
    tmx_debug("qp %u: peer process %d is gone", qp->super.qp_num, (int)qp->rseg->pid);
    tmx_soft_qp_fail(qp, TMX_WC_RETRY_EXC_ERR, 1);
}

/* The peer process died, or its QP refused a record of ours and went to error (it will
 * never read this ring again: like the NAK of hardware, whether or not we have traffic), or
 * (when we have traffic for it: busy) destroyed or reset its QP, so its ring is no longer ours
 * to write; hardware would stop getting acknowledgements. An idle QP whose peer QP went away
 * stays quiet, as on hardware, so an orderly close on the other side raises no error here. */
static int tmx_soft_qp_peer_dead(tmx_soft_qp_t *qp, int busy)
{
    if (qp->rseg == NULL) {
        return 0;
    }
    if (tmx_soft_rseg_dead(qp->rseg)) {
        tmx_soft_qp_gone(qp);
    } else if (atomic_load_explicit(&qp->peer_ctrl->err_gen, memory_order_relaxed) ==
               qp->out_gen) {
        tmx_warn("qp %u: peer qp %u of process %d refused a record and went to error",
                 qp->super.qp_num, qp->remote_qpn, (int)qp->rseg->pid);
        tmx_soft_qp_fail(qp, TMX_WC_REM_INV_REQ_ERR, 1);
    } else if (busy &&
               atomic_load_explicit(&qp->peer_ctrl->gen, memory_order_relaxed) != qp->out_gen) {
        tmx_warn("qp %u: peer qp %u of process %d was destroyed", qp->super.qp_num,
                 qp->remote_qpn, (int)qp->rseg->pid);
        tmx_soft_qp_fail(qp, TMX_WC_RETRY_EXC_ERR, 1);
    } else {
        return 0;
    }
    return 1;
}

/* ---------------------------------------------------------------- the sending side */

/*
 * Publishes the record at tail of bytes (a multiple of the line): its stamp goes in last, with
 * release. Before it, the line behind the record: in the previous lap it may have been the
 * middle of a record, and its first 8 bytes payload -- any value, the stamp the next record
 * there will have included (an MR key in a rendezvous header was, in the field). The reader,
 * done with this record, would take it for that stamp and read a record not written yet. So
 * when that word holds exactly the next stamp it is cleared first. Only producers write the
 * ring, and none writes that line before the next record: checked here, it stays so. (A load,
 * mostly of a line this core still holds; clearing it every time cost 40 ns of a 110 ns
 * one-way latency in bench_soft, the line being the one the reader polls next.) The line
 * behind is always free: tmx_soft_tx_reserve counts it in.
 */
static inline void tmx_soft_tx_publish(uint8_t *ring, uint64_t size, tmx_soft_rec_t *rec,
                                       uint64_t tail, uint64_t bytes)
{
    tmx_soft_rec_t *next = (tmx_soft_rec_t *)(ring + ((tail + bytes) & (size - 1)));

    if (atomic_load_explicit(&next->stamp, memory_order_relaxed) == tail + bytes + 1) {
        atomic_store_explicit(&next->stamp, 0, memory_order_relaxed);
    }
    atomic_store_explicit(&rec->stamp, tail + 1, memory_order_release);
}

/* Room for a record of bytes (a multiple of the line) at the tail, after a PAD record if it
 * would cross the end of the ring, and for the line behind it whose stamp its publication
 * clears; NULL when the ring is full. */
static inline tmx_soft_rec_t *tmx_soft_tx_reserve(uint8_t *ring, uint64_t size,
                                           tmx_soft_ring_ctrl_t *ctrl, uint64_t *tail_p,
                                           uint64_t *consumed_p, size_t bytes)
{
    uint64_t        tail = *tail_p;
    uint64_t        pos  = tail & (size - 1);
    uint64_t        pad  = pos + bytes > size ? size - pos : 0;
    uint64_t        need = pad + bytes + TMX_SOFT_LINE;
    tmx_soft_rec_t *rec;

    if (tail + need - *consumed_p > size) {
        *consumed_p = atomic_load_explicit(&ctrl->consumed, memory_order_acquire);
        if (tail + need - *consumed_p > size) {
            return NULL;
        }
    }
    if (pad != 0) {
        rec        = (tmx_soft_rec_t *)(ring + pos);
        rec->len   = 0;
        rec->op    = TMX_SOFT_OP_PAD;
        rec->flags = 0;
        tmx_soft_tx_publish(ring, size, rec, tail, pad);
        tail   += pad;
        *tail_p = tail;
    }
    return (tmx_soft_rec_t *)(ring + (tail & (size - 1)));
}

static void tmx_soft_prefault(tmx_soft_dev_t *dev, uint8_t *ring, size_t size);

/* Takes an inbox's lock word. A holder that died inside its critical section is detected (by
 * pid and start time) and the lock taken over; a holder that was preempted is given the
 * processor now and then, which matters when ranks outnumber cores. */
static void tmx_soft_inbox_lock(tmx_soft_ring_ctrl_t *ctrl, uint64_t me)
{
    unsigned spins = 0;

    for (;;) {
        uint64_t cur = 0;

        if (atomic_compare_exchange_weak_explicit(&ctrl->lock, &cur, me, memory_order_acquire,
                                                  memory_order_relaxed)) {
            return;
        }
        if (++spins % 256 == 0) {
            sched_yield();
        }
        if (spins % (1u << 14) == 0 && cur != 0 && tmx_soft_lock_holder_dead(cur)) {
            if (atomic_compare_exchange_strong_explicit(&ctrl->lock, &cur, me,
                                                        memory_order_acquire,
                                                        memory_order_relaxed)) {
                return;
            }
        }
    }
}

static inline tmx_soft_ring_ctrl_t *tmx_soft_rseg_inbox_ctrl(tmx_soft_rseg_t *r)
{
    return tmx_soft_inbox_ctrl(r->base, r->hdr);
}

/* Room for bytes (whole lines) in a peer's inbox: on success the lock is held until
 * tmx_soft_inbox_commit, and *tail_p is where the record goes; NULL (lock released) when full. */
static tmx_soft_rec_t *tmx_soft_inbox_reserve(tmx_soft_dev_t *dev, tmx_soft_rseg_t *r,
                                              uint64_t *tail_p, size_t bytes)
{
    tmx_soft_ring_ctrl_t *ctrl = tmx_soft_rseg_inbox_ctrl(r);
    uint64_t              consumed;
    tmx_soft_rec_t       *rec;

    tmx_soft_inbox_lock(ctrl, dev->lock_id);
    *tail_p  = atomic_load_explicit(&ctrl->tail, memory_order_relaxed);
    consumed = atomic_load_explicit(&ctrl->consumed, memory_order_acquire);
    rec      = tmx_soft_tx_reserve((uint8_t *)(ctrl + 1), r->hdr->inbox_size, ctrl, tail_p,
                                   &consumed, bytes);
    if (rec != NULL) {
        /* the record and the line behind it, within the ring (the next lap's start is
         * touched when a record goes there) */
        size_t left = r->hdr->inbox_size - (*tail_p & (r->hdr->inbox_size - 1));

        tmx_soft_rseg_touch(r, rec, bytes + TMX_SOFT_LINE < left ? bytes + TMX_SOFT_LINE : left);
    }
    /* Past a PAD, if one went in: a holder that dies before its commit leaves the tail
     * where the reader will look next (the lock's next holder writes there). */
    atomic_store_explicit(&ctrl->tail, *tail_p, memory_order_relaxed);
    if (rec == NULL) {
        atomic_store_explicit(&ctrl->lock, 0, memory_order_release);
    }
    return rec;
}

/* Publishes the record, releases the lock, and wakes the owner if it sleeps. */
static void tmx_soft_inbox_commit(tmx_soft_dev_t *dev, tmx_soft_rseg_t *r, tmx_soft_rec_t *rec,
                                  uint64_t tail, size_t bytes)
{
    tmx_soft_ring_ctrl_t *ctrl = tmx_soft_rseg_inbox_ctrl(r);

    tmx_soft_tx_publish((uint8_t *)(ctrl + 1), r->hdr->inbox_size, rec, tail, bytes);
    atomic_store_explicit(&ctrl->tail, tail + bytes, memory_order_relaxed);
    atomic_store_explicit(&ctrl->lock, 0, memory_order_release);
    tmx_soft_wake_peer(dev, r);
}

/*
 * The peer changed the grant word of its QP: answer with a SWITCH record in its inbox, naming
 * where our records in the fast ring we leave (if any) end and which ring we take (if any),
 * and write there from now on. 0 when the inbox is full (the caller retries later).
 */
static int tmx_soft_tx_switch(tmx_soft_qp_t *qp)
{
    tmx_soft_rseg_t    *r     = qp->rseg;
    uint64_t            g     = atomic_load_explicit(&qp->peer_ctrl->grant, memory_order_acquire);
    uint64_t            base  = atomic_load_explicit(&qp->peer_ctrl->grant_base,
                                                     memory_order_relaxed);
    unsigned            ring  = (uint32_t)g;
    tmx_soft_rec_t     *rec;
    tmx_soft_rec_ext_t *ext;
    uint64_t            tail;

    if (ring > r->hdr->max_fast) {
        ring = 0; /* nonsense: stay on (or go back to) the inbox */
    }
    rec = tmx_soft_inbox_reserve(qp->dev, r, &tail, tmx_soft_lines(TMX_SOFT_HDR_EXT));
    if (rec == NULL) {
        return 0;
    }
    ext         = tmx_soft_ext(rec);
    rec->len    = 0;
    rec->op     = TMX_SOFT_OP_SWITCH;
    rec->flags  = 0;
    rec->imm    = 0;
    rec->seq    = (uint32_t)(g >> 32);
    rec->dst    = qp->remote_index;
    rec->gen    = qp->out_gen;
    ext->raddr  = qp->out_fast != 0 ? qp->out_tail : 0;
    ext->status = qp->out_fast;
    ext->rkey   = ring;
    ext->total  = base;
    tmx_soft_inbox_commit(qp->dev, r, rec, tail, tmx_soft_lines(TMX_SOFT_HDR_EXT));
    qp->out_grant = g;
    qp->out_fast  = ring;
    if (ring != 0) {
        qp->out_ring     = tmx_soft_ring(r->base, r->hdr, ring - 1);
        qp->out_size     = tmx_soft_ring_bytes(r->hdr, ring - 1);
        qp->out_ctrl     = tmx_soft_fctrl(r->base, r->hdr, ring - 1);
        qp->out_tail     = base;
        qp->out_consumed = base;
        tmx_soft_prefault(qp->dev, qp->out_ring, qp->out_size);
    }
    return 1;
}

/* Room for a record of bytes on the QP's path; with the inbox, its lock is held until
 * tmx_soft_qp_commit. The record's destination fields are filled in. */
static inline tmx_soft_rec_t *tmx_soft_qp_reserve(tmx_soft_qp_t *qp, size_t bytes)
{
    tmx_soft_rec_t *rec;

    bytes = tmx_soft_lines(bytes);
    /* One load of a line the peer writes only when it lends or takes back a ring. */
    if (atomic_load_explicit(&qp->peer_ctrl->grant, memory_order_relaxed) != qp->out_grant &&
        !tmx_soft_tx_switch(qp)) {
        return NULL;
    }
    if (qp->out_fast != 0) {
        rec = tmx_soft_tx_reserve(qp->out_ring, qp->out_size, qp->out_ctrl, &qp->out_tail,
                                  &qp->out_consumed, bytes);
    } else {
        rec = tmx_soft_inbox_reserve(qp->dev, qp->rseg, &qp->ibx_tail, bytes);
    }
    if (rec != NULL) {
        rec->dst = qp->remote_index;
        rec->gen = qp->out_gen;
    }
    return rec;
}

/* The stamp goes last, with release: the reader that sees it sees the whole record. */
static inline void tmx_soft_qp_commit(tmx_soft_qp_t *qp, tmx_soft_rec_t *rec, size_t bytes)
{
    bytes = tmx_soft_lines(bytes);
    if (qp->out_fast != 0) {
        tmx_soft_tx_publish(qp->out_ring, qp->out_size, rec, qp->out_tail, bytes);
        qp->out_tail += bytes;
        tmx_soft_wake_peer(qp->dev, qp->rseg);
    } else {
        tmx_soft_inbox_commit(qp->dev, qp->rseg, rec, qp->ibx_tail, bytes);
    }
}

/* Publishes one record of several taken by one reservation (tmx_soft_send_frags): the reader
 * may take it now; the last one goes by tmx_soft_qp_commit, which ends the reservation. */
static inline void tmx_soft_qp_publish_part(tmx_soft_qp_t *qp, tmx_soft_rec_t *rec, size_t bytes)
{
    if (qp->out_fast != 0) {
        tmx_soft_tx_publish(qp->out_ring, qp->out_size, rec, qp->out_tail, bytes);
        qp->out_tail += bytes;
    } else {
        tmx_soft_ring_ctrl_t *ctrl = tmx_soft_rseg_inbox_ctrl(qp->rseg);

        tmx_soft_tx_publish((uint8_t *)(ctrl + 1), qp->rseg->hdr->inbox_size, rec, qp->ibx_tail,
                            bytes);
        qp->ibx_tail += bytes;
        /* as tmx_soft_inbox_commit does: a holder that dies now leaves the tail past what the
         * reader may already have taken, so the next holder writes where it looks next */
        atomic_store_explicit(&ctrl->tail, qp->ibx_tail, memory_order_relaxed);
    }
}

/*
 * The data of a read response, copied into the ring with non-temporal stores (the lines go to
 * memory, not into our cache): the reader then takes them from memory instead of from our
 * core, and our stores need not first take lines the reader may still hold. With ordinary
 * stores this 2-core VM sometimes (under other load) moved a read through the rings at 2.3
 * GB/s (1 MiB ping-pong 400-470 us against 85 for the peers' cross-memory attach); with these
 * 13-20 GB/s and 53-63 us in the same minutes. In its good phases ordinary stores were faster
 * (1 MiB 38 us against 67): the reader picks (tmx_soft_rd_mode). The sfence orders the
 * streaming stores before the record's stamp (tmx_soft_qp_commit's release).
 */
static void tmx_soft_copy_nt(void *dst, const void *src, size_t n)
{
#if defined(__SSE2__)
    uint8_t       *d = dst;
    const uint8_t *s = src;

    while (n > 0 && ((uintptr_t)d & 15) != 0) {
        *d++ = *s++;
        n--;
    }
    for (; n >= 64; n -= 64, d += 64, s += 64) {
        __m128i a = _mm_loadu_si128((const __m128i *)(const void *)s);
        __m128i b = _mm_loadu_si128((const __m128i *)(const void *)(s + 16));
        __m128i c = _mm_loadu_si128((const __m128i *)(const void *)(s + 32));
        __m128i e = _mm_loadu_si128((const __m128i *)(const void *)(s + 48));

        _mm_stream_si128((__m128i *)(void *)d, a);
        _mm_stream_si128((__m128i *)(void *)(d + 16), b);
        _mm_stream_si128((__m128i *)(void *)(d + 32), c);
        _mm_stream_si128((__m128i *)(void *)(d + 48), e);
    }
    memcpy(d, s, n);
    _mm_sfence();
#else
    memcpy(dst, src, n);
#endif
}

/*
 * How the payload of a SEND of one record (an eager message of TMX_SOFT_TX_NT_MIN bytes or
 * more) goes into the peer's ring: ordinary or non-temporal stores. As for reads through the
 * rings (tmx_soft_rd_mode), which is cheaper changes with the machine's phase. On a 2-core VM
 * (tmx_pingpong, back-to-back runs, 2026-11-26) in its good phases ordinary stores took 0.58 /
 * 0.71 / 1.9 us for 4 / 8 / 16 KiB against 1.14 / 1.56 / 2.95 with streaming ones; in its bad
 * phases (moving a cache line between the cores slow) 2.3 / 4.4 / 6.3 against 1.6 / 2.0 / 3.9,
 * where Open MPI took 2.7 / 3.1 / 3.9. What tells the phases apart is the writer's copy with
 * ordinary stores (each line must first be taken from the reader, which has held it since it
 * read the ring's previous lap): 590-960 cycles per KiB in the bad phases, 90 in the good
 * ones, while streaming stores cost the writer 65-140 in both (the reader pays for them in
 * the good phases, loading from memory, which the writer does not see). So the writer times
 * its copy (the time stamp counter), keeps a moving average per way (half the last sample),
 * and takes streaming stores when they cost less than a third as much (in the bad phases they
 * cost a fourth to a tenth; in a middle phase, 4 KiB in 0.8 us, taking them at half the cost
 * made the ping-pong 9% slower), the other way every TMX_SOFT_TX_PROBE-th send so that both
 * stay measured.
 */
static inline uint64_t tmx_soft_cycles(void)
{
#if defined(__x86_64__) || defined(__i386__)
    return __rdtsc();
#else
    return tmx_time_ns();
#endif
}

static int tmx_soft_tx_mode(tmx_soft_qp_t *qp)
{
    int want = qp->tx_cost[0] != 0 && qp->tx_cost[1] != 0 && 3 * qp->tx_cost[1] < qp->tx_cost[0];

    qp->tx_count++;
    if (qp->tx_cost[1] == 0) {
        return (qp->tx_count % 16) == 0; /* not measured yet: soon */
    }
    return (qp->tx_count % TMX_SOFT_TX_PROBE) == 0 ? !want : want;
}

/* The gather of a SEND's payload into its record; 1 when with non-temporal stores. */
static int tmx_soft_tx_gather(tmx_soft_qp_t *qp, const tmx_sge_t *sge, int n, uint8_t *dst,
                              size_t total)
{
    int      nt      = tmx_soft_tx_mode(qp);
    int      measure = nt || (qp->tx_count % TMX_SOFT_TX_PROBE) == 0 ||
                       (qp->tx_count % TMX_SOFT_TX_SAMPLE) == 1; /* every probe too */
    uint64_t t0      = measure ? tmx_soft_cycles() : 0;

    if (!nt) {
        tmx_soft_sge_gather(sge, n, 0, dst, total);
    } else {
        for (int i = 0; i < n; i++) {
            const void *src = (const void *)(uintptr_t)sge[i].addr;

            if (sge[i].length >= 256) {
                tmx_soft_copy_nt(dst, src, sge[i].length);
            } else {
                tmx_copy(dst, src, sge[i].length);
            }
            dst += sge[i].length;
        }
    }
    if (measure) {
        uint64_t c = (tmx_soft_cycles() - t0) * 1024 / total;

        c = c != 0 ? c : 1;
        if (qp->tx_cost[nt] != 0 && c > 2 * qp->tx_cost[nt]) {
            c = 2 * qp->tx_cost[nt]; /* one sample (an interrupt in the copy) moves it little */
        }
        qp->tx_cost[nt] = qp->tx_cost[nt] == 0 ? c : (qp->tx_cost[nt] + c) / 2;
    }
    return nt;
}

/* Serves the responses this QP owes its peer (fallback RDMA); 0 when the ring is full. */
static int tmx_soft_resp_progress(tmx_soft_qp_t *qp)
{
    tmx_soft_dev_t *dev = qp->dev;

    while (qp->resp_count > 0) {
        tmx_soft_resp_t    *r = &qp->resp[qp->resp_head];
        tmx_soft_rec_t     *rec;
        tmx_soft_rec_ext_t *ext;
        size_t              n = 0;

        if (r->is_read &&
            tmx_soft_key_check(dev->mrs, dev->hdr->max_mrs, (uint32_t)r->status, r->addr,
                               r->total, TMX_ACCESS_REMOTE_READ) != 0) {
            /* Deregistered while being read: refuse the rest. */
            r->is_read = 0;
            r->status  = TMX_WC_REM_ACCESS_ERR;
        }
        if (r->is_read) {
            /* records of TMX_SOFT_RRESP_CHUNK: the reader copies one out while we write the
             * next, so a read costs about one copy and a chunk, not two copies. A record
             * fits a quarter of the reader's rings, whose size is its TMX_SOFT_RING_SIZE, not
             * ours: a reader with smaller ones never found room for ours (the read waited for
             * ever). The peer's header is read again here, after its check at map time (at
             * least 4 KiB), and the peer could have changed it since: never below 512 bytes,
             * so a record always carries some of the read. */
            size_t rs    = qp->rseg->hdr->ring_size / 4;
            size_t hdrs  = sizeof(tmx_soft_rec_t) + sizeof(tmx_soft_rec_ext_t);
            size_t peer  = rs > hdrs + 512 ? rs - hdrs : 512;
            size_t chunk = TMX_SOFT_RRESP_CHUNK < dev->max_payload ? TMX_SOFT_RRESP_CHUNK
                                                                   : dev->max_payload;

            chunk = chunk < peer ? chunk : peer;

            n = r->total - r->off < chunk ? r->total - r->off : chunk;
        }
        rec = tmx_soft_qp_reserve(qp, TMX_SOFT_HDR_EXT + n);
        if (rec == NULL) {
            return 0;
        }
        ext        = tmx_soft_ext(rec);
        rec->len   = (uint32_t)n;
        rec->seq   = r->seq;
        rec->imm   = 0;
        rec->flags = 0;
        if (r->is_read) {
            rec->op    = TMX_SOFT_OP_RRESP;
            ext->raddr = r->off;
            ext->total = r->total;
            if (r->nt) {
                tmx_soft_copy_nt(ext + 1, (const uint8_t *)(uintptr_t)r->addr + r->off, n);
            } else {
                memcpy(ext + 1, (const uint8_t *)(uintptr_t)r->addr + r->off, n);
            }
            r->off += n;
            if (r->off == r->total) {
                rec->flags = TMX_SOFT_REC_LAST;
            }
        } else {
            rec->op     = TMX_SOFT_OP_ACK;
            ext->status = r->status;
        }
        tmx_soft_qp_commit(qp, rec, TMX_SOFT_HDR_EXT + n);
        if (!r->is_read || r->off == r->total) {
            qp->resp_head = (qp->resp_head + 1) % TMX_SOFT_MAX_RESP;
            qp->resp_count--;
        }
    }
    return 1;
}

static tmx_soft_resp_t *tmx_soft_resp_add(tmx_soft_qp_t *qp)
{
    tmx_soft_resp_t *r;

    if (qp->resp_count == TMX_SOFT_MAX_RESP) {
        return NULL;
    }
    r = &qp->resp[(qp->resp_head + qp->resp_count) % TMX_SOFT_MAX_RESP];
    memset(r, 0, sizeof(*r));
    qp->resp_count++;
    tmx_soft_pending_add(qp);
    return r;
}

static void tmx_soft_swr_data(tmx_soft_swr_t *swr, size_t off, uint8_t *dst, size_t n)
{
    if (swr->copy != NULL) {
        memcpy(dst, (uint8_t *)swr->copy + off, n);
    } else {
        tmx_soft_sge_gather(swr->sge, swr->num_sge, off, dst, n);
    }
}

/* Writes SEND or fallback WRITE chunks; 1 when all are written. */
static int tmx_soft_tx_chunks(tmx_soft_qp_t *qp, tmx_soft_swr_t *swr, int op)
{
    size_t hlen = op == TMX_SOFT_OP_SEND ? TMX_SOFT_HDR : TMX_SOFT_HDR_EXT;

    do {
        size_t          n = swr->total - swr->off;
        tmx_soft_rec_t *rec;

        if (n > qp->dev->max_payload) {
            n = qp->dev->max_payload;
        }
        rec = tmx_soft_qp_reserve(qp, hlen + n);
        if (rec == NULL) {
            return 0;
        }
        rec->len   = (uint32_t)n;
        rec->op    = (uint8_t)op;
        rec->flags = (swr->off == 0 ? TMX_SOFT_REC_FIRST : 0) |
                     (swr->off + n == swr->total ? TMX_SOFT_REC_LAST : 0);
        if (swr->opcode == TMX_WR_SEND_WITH_IMM || swr->opcode == TMX_WR_RDMA_WRITE_WITH_IMM) {
            rec->flags |= TMX_SOFT_REC_IMM;
        }
        rec->imm = swr->imm;
        rec->seq = swr->seq;
        if (op != TMX_SOFT_OP_SEND) {
            tmx_soft_rec_ext_t *ext = tmx_soft_ext(rec);
            ext->raddr = swr->raddr + swr->off;
            ext->total = swr->total;
            ext->rkey  = swr->rkey;
        }
        tmx_soft_swr_data(swr, swr->off, (uint8_t *)rec + hlen, n);
        tmx_soft_qp_commit(qp, rec, hlen + n);
        swr->off += n;
    } while (swr->off < swr->total);
    return 1;
}

static int tmx_soft_iov(const tmx_soft_swr_t *swr, struct iovec *iov)
{
    int n = 0;
    for (int i = 0; i < swr->num_sge; i++) {
        if (swr->sge[i].length != 0) {
            iov[n].iov_base = (void *)(uintptr_t)swr->sge[i].addr;
            iov[n].iov_len  = swr->sge[i].length;
            n++;
        }
    }
    return n;
}

/*
 * Cross-memory attach names its target by pid, and a dead peer's pid may belong to another
 * process of ours by now: reading or writing that one would be silent corruption. So the
 * peer's pidfd is asked first. A pid comes round again only after its process died and the
 * pid space wrapped (pids are handed out in turn, 32768 of them by default), which takes far
 * longer than a millisecond: a check at most every millisecond keeps the cost of the poll off
 * the message rate.
 */
static int tmx_soft_cma_target_gone(tmx_soft_rseg_t *r)
{
    uint64_t now = tmx_time_ns();

    if (now - r->alive_ns < TMX_SOFT_CMA_CHECK_NS) {
        return 0;
    }
    if (tmx_soft_rseg_dead(r)) {
        return 1;
    }
    r->alive_ns = now;
    return 0;
}

/* The local iovecs of bytes [off, off + len) of swr's data, appended at iov[*n]. */
static void tmx_soft_iov_range(const tmx_soft_swr_t *swr, size_t off, size_t len,
                               struct iovec *iov, int *n)
{
    for (int i = 0; i < swr->num_sge && len > 0; i++) {
        size_t l = swr->sge[i].length, take;

        if (off >= l) {
            off -= l;
            continue;
        }
        take              = l - off < len ? l - off : len;
        iov[*n].iov_base  = (uint8_t *)(uintptr_t)swr->sge[i].addr + off;
        iov[*n].iov_len   = take;
        (*n)++;
        len -= take;
        off = 0;
    }
}

/* The data of an RDMA WRITE into the target by cross-memory attach, in the pieces and order
 * the target's data-in-order answer asks for (tmx_soft_scramble_plan): the kernel copies the
 * remote iovecs of one call in their order. Bytes written, or -1 with errno. */
static ssize_t tmx_soft_cma_write(tmx_soft_qp_t *qp, const tmx_soft_swr_t *swr)
{
    tmx_soft_rseg_t *r = qp->rseg;
    tmx_soft_piece_t pieces[TMX_SOFT_MAX_PIECES];
    struct iovec     liov[TMX_SOFT_MAX_PIECES + TMX_SOFT_MAX_SGE], riov[TMX_SOFT_MAX_PIECES];
    size_t           np, done = 0, batch = 0; /* bytes of the pieces before this call's */
    int              nl = 0, nr = 0;

    if (swr->total == 0) {
        return 0;
    }
    np = tmx_soft_scramble_plan(tmx_soft_write_mode(qp, r->h.data_order), swr->raddr,
                                swr->total, &qp->dev->rng, pieces);
    for (size_t i = 0; i < np; i++) {
        ssize_t n;

        tmx_soft_iov_range(swr, pieces[i].off, pieces[i].len, liov, &nl);
        riov[nr].iov_base = (void *)(uintptr_t)(swr->raddr + pieces[i].off);
        riov[nr].iov_len  = pieces[i].len;
        nr++;
        done += pieces[i].len;
        if (i + 1 < np && tmx_soft_write_hook == NULL &&
            nl + TMX_SOFT_MAX_SGE <= (int)(sizeof(liov) / sizeof(liov[0]))) {
            continue; /* more pieces in the same call */
        }
        n = process_vm_writev(r->pid, liov, (unsigned long)nl, riov, (unsigned long)nr, 0);
        if (n < 0) {
            return -1;
        }
        if ((size_t)n != done - batch) {
            return (ssize_t)(batch + (size_t)n); /* short: the caller fails the WR */
        }
        batch = done;
        if (tmx_soft_write_hook != NULL) {
            tmx_soft_write_hook(tmx_soft_write_hook_arg, swr->raddr + pieces[i].off,
                                pieces[i].len);
        }
        nl = nr = 0;
    }
    return (ssize_t)done;
}

/* Where [raddr, raddr + len) of the peer's address space lies in our mapping of its device
 * memory (soft.h); NULL when not wholly inside it. Bounded by the validated header: whatever
 * the peer wrote there, the pointer stays in its device memory. */
static inline uint8_t *tmx_soft_dm_target(const tmx_soft_rseg_t *r, uint64_t raddr, uint64_t len)
{
    uint64_t lo = r->h.map_addr + r->h.dm_off;

    if (len == 0 || raddr < lo || raddr - lo >= r->h.dm_size ||
        len > r->h.dm_size - (raddr - lo)) {
        return NULL;
    }
    return (uint8_t *)r->base + r->h.dm_off + (raddr - lo);
}

/* The notice of a WRITE_WITH_IMM whose data went (by CMA or by stores), in rec (reserved). */
static void tmx_soft_wimm_commit(tmx_soft_qp_t *qp, const tmx_soft_swr_t *swr,
                                 tmx_soft_rec_t *rec)
{
    rec->len                 = 0;
    rec->op                  = TMX_SOFT_OP_WIMM;
    rec->flags               = TMX_SOFT_REC_IMM;
    rec->imm                 = swr->imm;
    rec->seq                 = swr->seq;
    tmx_soft_ext(rec)->total = swr->total;
    tmx_soft_qp_commit(qp, rec, TMX_SOFT_HDR_EXT);
}

/* A WRITE_WITH_IMM whose data is placed: its notice, a record that consumes a receive at the
 * target. 1 when sent (the WR is done), 0 when the ring is full (the next call sends it). */
static int tmx_soft_tx_notice(tmx_soft_qp_t *qp, tmx_soft_swr_t *swr)
{
    tmx_soft_rec_t *rec;

    if (swr->opcode == TMX_WR_RDMA_WRITE_WITH_IMM) {
        rec = tmx_soft_qp_reserve(qp, TMX_SOFT_HDR_EXT);
        if (rec == NULL) {
            return 0;
        }
        tmx_soft_wimm_commit(qp, swr, rec);
    }
    swr->state  = TMX_SOFT_SWR_DONE;
    swr->status = TMX_WC_SUCCESS;
    return 1;
}

/* An RDMA WRITE into the peer's device memory, by our stores (dst: tmx_soft_dm_target), checked
 * against the target's own MR table as CMA is; then a WRITE_WITH_IMM's notice. As
 * tmx_soft_tx_cma returns. A store into the mapping of a dead peer's segment harms nobody
 * (unlike CMA, which names a pid that may be another process's by now): its death is what
 * the liveness checks found (tmx_soft_check_peers), as for records in its rings. */
static int tmx_soft_tx_dm(tmx_soft_qp_t *qp, tmx_soft_swr_t *swr, uint8_t *dst)
{
    tmx_soft_rseg_t         *r     = qp->rseg;
    const tmx_soft_mr_ent_t *table = (tmx_soft_mr_ent_t *)((uint8_t *)r->base + r->hdr->mr_off);

    if (r->dead) {
        return TMX_SOFT_TX_GONE; /* found gone by a liveness check, as for ring records */
    }
    if (tmx_soft_key_check(table, r->hdr->max_mrs, swr->rkey, swr->raddr, swr->total,
                           TMX_ACCESS_REMOTE_WRITE) != 0) {
        tmx_debug("qp %u: remote write of %zu bytes at 0x%llx refused: bad key or bounds",
                  qp->super.qp_num, swr->total, (unsigned long long)swr->raddr);
        swr->state  = TMX_SOFT_SWR_DONE;
        swr->status = TMX_WC_REM_ACCESS_ERR;
        return 1;
    }
    tmx_soft_rseg_touch(r, dst, swr->total);
    if (swr->opcode == TMX_WR_RDMA_WRITE_WITH_IMM) {
        /* room for the notice first: all of it goes now, or nothing (an unsignaled one is
         * then taken back by post_send, TMX_DEV_CAP_MANUAL_PROGRESS) */
        tmx_soft_rec_t *rec = tmx_soft_qp_reserve(qp, TMX_SOFT_HDR_EXT);

        if (rec == NULL) {
            return 0;
        }
        tmx_soft_dm_store(qp, swr, dst);
        tmx_soft_wimm_commit(qp, swr, rec);
        swr->state  = TMX_SOFT_SWR_DONE;
        swr->status = TMX_WC_SUCCESS;
        return 1;
    }
    tmx_soft_dm_store(qp, swr, dst);
    swr->cma_done = 1;
    return tmx_soft_tx_notice(qp, swr);
}

/* RDMA by cross-memory attach, checked against the target's own MR table. 1 when done, 0
 * when it must wait for ring space (a WRITE_WITH_IMM whose data went, and whose notice waits:
 * the next call sends only the notice), TMX_SOFT_TX_GONE when the target process is gone (the
 * caller fails the QP: the WR completes as on a dead peer, not as a remote access error). */
static int tmx_soft_tx_cma(tmx_soft_qp_t *qp, tmx_soft_swr_t *swr)
{
    tmx_soft_rseg_t          *r     = qp->rseg;
    const tmx_soft_mr_ent_t  *table = (tmx_soft_mr_ent_t *)((uint8_t *)r->base + r->hdr->mr_off);
    int                       read  = swr->opcode == TMX_WR_RDMA_READ;
    struct iovec              liov[TMX_SOFT_MAX_SGE], riov;
    ssize_t                   n     = 0;
    int                       cnt;

    if (tmx_soft_cma_target_gone(r)) {
        return TMX_SOFT_TX_GONE; /* whatever the key: the fallback path would not answer */
    }
    if (swr->cma_done) {
        return tmx_soft_tx_notice(qp, swr);
    }
    if (tmx_soft_key_check(table, r->hdr->max_mrs, swr->rkey, swr->raddr, swr->total,
                           read ? TMX_ACCESS_REMOTE_READ : TMX_ACCESS_REMOTE_WRITE) != 0) {
        swr->state  = TMX_SOFT_SWR_DONE;
        swr->status = TMX_WC_REM_ACCESS_ERR;
        return 1;
    }
    if (read) {
        cnt           = tmx_soft_iov(swr, liov);
        riov.iov_base = (void *)(uintptr_t)swr->raddr;
        riov.iov_len  = swr->total;
        if (swr->total != 0) {
            n = process_vm_readv(r->pid, liov, (unsigned long)cnt, &riov, 1, 0);
        }
    } else {
        n = tmx_soft_cma_write(qp, swr);
    }
    if (n != (ssize_t)swr->total) {
        int err = n < 0 ? errno : 0;

        tmx_debug("qp %u: cma %s of %zu bytes at 0x%llx failed: %s", qp->super.qp_num,
                  read ? "read" : "write", swr->total, (unsigned long long)swr->raddr,
                  n < 0 ? strerror(err) : "short");
        /* ESRCH: no such process, or one without memory, i.e. exiting (it may not count as
         * dead yet: the kernel drops its memory before it becomes a zombie). Any other
         * failure is the peer's fault only while it lives: a dead target cannot answer. */
        if (err == ESRCH || tmx_soft_rseg_dead(r)) {
            return TMX_SOFT_TX_GONE;
        }
        swr->state  = TMX_SOFT_SWR_DONE;
        swr->status = TMX_WC_REM_ACCESS_ERR;
        return 1;
    }
    swr->cma_done = 1;
    return tmx_soft_tx_notice(qp, swr);
}

/*
 * How the target copies a read through the rings into its ring: ordinary stores (the reader
 * then takes the lines from the target's cache) or non-temporal ones (from memory; see
 * tmx_soft_copy_nt). Which is faster changes with the machine's phase: on a 2-core VM in its
 * good phases ordinary stores moved a 1 MiB ping-pong in 38 us against 67, in its bad ones
 * (moving a cache line between the cores slow, under other load) in 400-470 us against
 * 53-63. So the reader measures: each read of TMX_SOFT_RD_MEASURE_MIN bytes or more in
 * several records costs (last record - first record) / (bytes after the first), a moving
 * average per mode (half the last sample), and asks for the cheaper mode; ordinary stores
 * only when a quarter cheaper. Streaming until both are measured: it is never far behind.
 *
 * What one mode costs depends on what the other left in the ring: a 128 KiB window
 * (2026-11-27, the VM's fast phase) measured ordinary stores at 22-28 ps per byte for the
 * first 10-13 reads after streaming ones and at 80-92 from then on, and other runs found the
 * first read 59-174 against a steady 26 (bench/README.md, h-bw128 and h-bw256): one read
 * after the other mode measures the change, not the mode. So a mode's reads are measured
 * only after a ring lap of it (rd_warm), and the other mode is tried for a lap and then a
 * quarter lap more, at least TMX_SOFT_RD_PROBE_MEAS reads (tmx_soft_rd_mode); the first
 * try once the mode asked is measured, the next TMX_SOFT_RD_GAP laps after the last. A try
 * that wins is taken; one that loses by more than twice doubles the laps to the next, so
 * that a mode much dearer in this phase costs little.
 */
static int tmx_soft_rd_plain_better(const tmx_soft_qp_t *qp)
{
    /* by a quarter at least: a noisy probe does not flip the choice back and forth */
    return qp->rd_cost[0] != 0 && qp->rd_cost[0] + qp->rd_cost[0] / 4 < qp->rd_cost[1];
}

/* The ring the target writes our reads into: the fast ring we lent it, or the inbox. */
static uint64_t tmx_soft_rd_lap(const tmx_soft_qp_t *qp)
{
    return qp->in_ring != NULL && qp->in_size != 0 ? qp->in_size : TMX_SOFT_RD_LAP;
}

/* A try's verdict, once its measured reads are in: take the tried mode if it won, else keep
 * the mode, and try again after twice as many laps if it lost clearly. */
static void tmx_soft_rd_decide(tmx_soft_qp_t *qp, uint64_t lap)
{
    unsigned tried = qp->rd_tried;
    unsigned plain = qp->rd_cost[0] == 0 || qp->rd_cost[1] == 0
                         ? !tried /* nothing measured (no read large enough): keep */
                         : (unsigned)tmx_soft_rd_plain_better(qp);

    tmx_debug("qp %u: reads through the rings: %s stores tried (%u reads measured after a "
              "lap of %llu KiB), ps per byte ordinary %llu, streaming %llu: %s",
              qp->super.qp_num, tried ? "ordinary" : "streaming", qp->rd_probe_meas,
              (unsigned long long)(lap >> 10), (unsigned long long)qp->rd_cost[0],
              (unsigned long long)qp->rd_cost[1], plain == tried ? "taken" : "not taken");
    qp->rd_pending = 0;
    qp->rd_since   = 0;
    if (qp->rd_gap == 0) {
        qp->rd_gap = TMX_SOFT_RD_GAP;
    }
    if (plain == tried) {
        qp->rd_switches++;
        qp->rd_plain = (uint8_t)plain;
        qp->rd_run   = 0;
        qp->rd_gap   = TMX_SOFT_RD_GAP;
        return;
    }
    /* a clear loss (the slow phase's ordinary stores: 3-5 times dearer) waits longer; a
     * close one (a phase in between, or a moment of load) does not */
    if (qp->rd_cost[tried ? 0 : 1] > 2 * qp->rd_cost[tried ? 1 : 0]) {
        qp->rd_gap = qp->rd_gap * 2 > TMX_SOFT_RD_GAP_MAX ? TMX_SOFT_RD_GAP_MAX : qp->rd_gap * 2;
    } else {
        qp->rd_gap = TMX_SOFT_RD_GAP;
    }
}

/* Reads below TMX_SOFT_RD_LAP_MIN: as before the laps, the cheaper mode by their own
 * measurements, the other one every TMX_SOFT_RD_PROBE-th read (streaming until both are
 * measured). */
static int tmx_soft_rd_mode_small(tmx_soft_qp_t *qp, tmx_soft_swr_t *swr)
{
    const uint64_t *c    = qp->rd_small_cost;
    int             best = !(c[0] != 0 && c[0] + c[0] / 4 < c[1]);

    swr->rd_small = 1;
    if (swr->total < TMX_SOFT_RD_SMALL_MIN) {
        return best;
    }
    qp->rd_small_count++;
    if (c[1] == 0) {
        return 1;
    }
    if (c[0] == 0) {
        return (qp->rd_small_count % TMX_SOFT_RD_PROBE) != 0;
    }
    return (qp->rd_small_count % TMX_SOFT_RD_PROBE) == 0 ? !best : best;
}

/*
 * The mode of a read about to be asked (1: streaming stores), and whether it is measured.
 * Reads are asked ahead of their answers (a window of 64 at once in a bandwidth test), so a
 * try is a length asked, a lap and the reads to measure, after which the mode asked is the
 * old one again until the measurements are in (rd_pending).
 */
static int tmx_soft_rd_mode(tmx_soft_qp_t *qp, tmx_soft_swr_t *swr)
{
    uint64_t lap = tmx_soft_rd_lap(qp);

    if (swr->total < TMX_SOFT_RD_LAP_MIN) {
        return tmx_soft_rd_mode_small(qp, swr);
    }
    swr->rd_small = 0;
    if (swr->total >= TMX_SOFT_RD_MEASURE_MIN) {
        unsigned cur  = qp->rd_plain ? 0 : 1; /* rd_cost's index */
        uint64_t want = lap / 4 / swr->total;

        if (want < TMX_SOFT_RD_PROBE_MEAS) {
            want = TMX_SOFT_RD_PROBE_MEAS;
        }
        if (qp->rd_probing) {
            if (qp->rd_probe_asked >= want) { /* asked enough: back until the verdict */
                qp->rd_plain   = (uint8_t)!qp->rd_plain;
                qp->rd_run     = 0;
                qp->rd_probing = 0;
                qp->rd_pending = 1;
            }
        } else if (qp->rd_pending) {
            if (qp->rd_probe_meas >= qp->rd_probe_asked ||
                qp->rd_since >= (uint64_t)TMX_SOFT_RD_GAP * lap) { /* or reads that failed */
                tmx_soft_rd_decide(qp, lap);
            }
        } else if (qp->rd_cost[cur] != 0 &&
                   qp->rd_since >= (qp->rd_cost[!cur] == 0
                                        ? lap + lap / 2
                                        : (uint64_t)(qp->rd_gap ? qp->rd_gap : TMX_SOFT_RD_GAP) *
                                              lap)) {
            /* try the other mode, measured afresh */
            qp->rd_plain       = (uint8_t)!qp->rd_plain;
            qp->rd_tried       = qp->rd_plain;
            qp->rd_cost[!cur]  = 0;
            qp->rd_run         = 0;
            qp->rd_since       = 0;
            qp->rd_probing     = 1;
            qp->rd_probe_meas  = 0;
            qp->rd_probe_asked = 0;
            qp->rd_probes++;
        }
    }
    swr->rd_warm = qp->rd_run >= lap;
    if (qp->rd_probing && swr->rd_warm && swr->total >= TMX_SOFT_RD_MEASURE_MIN) {
        qp->rd_probe_asked++;
    }
    qp->rd_run += swr->total;
    qp->rd_since += swr->total;
    qp->rd_reads[qp->rd_plain ? 0 : 1]++;
    return !qp->rd_plain;
}

static void tmx_soft_rd_measure(tmx_soft_qp_t *qp, const tmx_soft_swr_t *swr)
{
    uint64_t  dt   = tmx_time_ns() - swr->first_ns;
    uint64_t  ps   = dt * 1000 / (uint64_t)(swr->total - swr->first_len);
    uint64_t *cost = swr->rd_small ? &qp->rd_small_cost[swr->nt ? 1 : 0]
                                   : &qp->rd_cost[swr->nt ? 1 : 0];

    if (!swr->rd_small && !swr->rd_warm) {
        return; /* after the other mode: it measures the change */
    }
    if (ps == 0) {
        ps = 1;
    }
    *cost = *cost == 0 ? ps : (*cost + ps) / 2;
    if (swr->rd_small) {
        return;
    }
    if ((qp->rd_probing || qp->rd_pending) && swr->nt == !qp->rd_tried) {
        qp->rd_probe_meas++;
    }
}

/*
 * Whether an RDMA READ or WRITE goes by cross-memory attach rather than through the rings
 * (TMX_SOFT_CMA_MIN). Through the rings the target copies into its ring and we copy out, a
 * record at a time, both cores at once; CMA is one copy by one core, but pins and maps every
 * page: on a 2-core VM it moved 13 GB/s at most, the rings 22-35 GB/s from 32 KiB to 4 MiB in
 * the VM's good phases and 12-20 in its bad ones (tmx_soft_rd_mode, doc/man/tmx_config.7.md).
 * The rings need the target's progress.
 */
static inline int tmx_soft_by_cma(const tmx_soft_qp_t *qp, const tmx_soft_swr_t *swr)
{
    return qp->cma && swr->total >= qp->cma_min;
}

/* A WR with FENCE waits until the earlier RDMA READs of the QP completed. */
static int tmx_soft_fenced(tmx_soft_qp_t *qp, const tmx_soft_swr_t *swr)
{
    if (!(swr->flags & TMX_SEND_FENCE)) {
        return 0;
    }
    for (uint32_t s = qp->head_seq; s != swr->seq; s++) {
        const tmx_soft_swr_t *e = tmx_soft_swr(qp, s);
        if (e->opcode == TMX_WR_RDMA_READ && e->state != TMX_SOFT_SWR_DONE) {
            return 1;
        }
    }
    return 0;
}

/* Writes one WR to the wire; 1 when it is fully written (or done), 0 when it must wait,
 * TMX_SOFT_TX_GONE when the peer process is gone (the WR stays outstanding for
 * tmx_soft_qp_gone). */
static int tmx_soft_tx_one(tmx_soft_qp_t *qp, tmx_soft_swr_t *swr)
{
    tmx_soft_rec_t *rec;
    uint8_t        *dst;

    if (swr->state == TMX_SOFT_SWR_DONE) {
        return 1;
    }
    if (tmx_soft_fenced(qp, swr)) {
        return 0;
    }
    if (swr->tm_kind == TMX_SOFT_TM_WR_FIN) {
        /* behind its READ (FENCE), which is not reaped before it (tmx_soft_sq_reap) */
        const tmx_soft_swr_t *rd = tmx_soft_swr(qp, swr->seq - 1);

        if (rd->status != TMX_WC_SUCCESS) {
            swr->state  = TMX_SOFT_SWR_DONE; /* no FIN: DATA_VALID with the READ's error */
            swr->status = rd->status;
            return 1;
        }
    }
    switch (swr->opcode) {
    case TMX_WR_SEND:
    case TMX_WR_SEND_WITH_IMM:
        if (!tmx_soft_tx_chunks(qp, swr, TMX_SOFT_OP_SEND)) {
            return 0;
        }
        swr->state  = TMX_SOFT_SWR_DONE;
        swr->status = TMX_WC_SUCCESS;
        return 1;
    case TMX_WR_RDMA_WRITE:
    case TMX_WR_RDMA_WRITE_WITH_IMM:
        if (swr->cma_done) {
            return tmx_soft_tx_notice(qp, swr); /* the data went: the notice waited */
        }
        if ((dst = tmx_soft_dm_target(qp->rseg, swr->raddr, swr->total)) != NULL) {
            return tmx_soft_tx_dm(qp, swr, dst);
        }
        if (tmx_soft_by_cma(qp, swr)) {
            return tmx_soft_tx_cma(qp, swr);
        }
        if (!tmx_soft_tx_chunks(qp, swr, TMX_SOFT_OP_WDATA)) {
            return 0;
        }
        swr->state = TMX_SOFT_SWR_WAIT;
        return 1;
    case TMX_WR_RDMA_READ:
        if (tmx_soft_by_cma(qp, swr)) {
            return tmx_soft_tx_cma(qp, swr);
        }
        rec = tmx_soft_qp_reserve(qp, TMX_SOFT_HDR_EXT);
        if (rec == NULL) {
            return 0;
        }
        swr->nt                  = (uint8_t)tmx_soft_rd_mode(qp, swr);
        rec->len                 = 0;
        rec->op                  = TMX_SOFT_OP_RREQ;
        rec->flags               = swr->nt ? TMX_SOFT_REC_NT : 0;
        rec->seq                 = swr->seq;
        tmx_soft_ext(rec)->raddr = swr->raddr;
        tmx_soft_ext(rec)->total = swr->total;
        tmx_soft_ext(rec)->rkey  = swr->rkey;
        tmx_soft_qp_commit(qp, rec, TMX_SOFT_HDR_EXT);
        swr->off   = 0;
        swr->state = TMX_SOFT_SWR_WAIT;
        return 1;
    }
    return 1;
}

/*
 * OOO placement: whether b may be placed before the earlier a, i.e. the ordering table of
 * DESIGN.md ("OOO data placement") has F in a's row and b's column and b has no FENCE. Of the
 * operations the soft device has: after a WRITE, a WRITE or READ; after a READ, a SEND, WRITE
 * or READ (never a WRITE_WITH_IMM, which is always ordered, as is everything after a SEND or
 * a WRITE_WITH_IMM).
 */
static int tmx_soft_ooo_may_pass(const tmx_soft_swr_t *a, const tmx_soft_swr_t *b)
{
    if (b->flags & TMX_SEND_FENCE) {
        return 0;
    }
    switch (a->opcode) {
    case TMX_WR_RDMA_WRITE:
        return b->opcode == TMX_WR_RDMA_WRITE || b->opcode == TMX_WR_RDMA_READ;
    case TMX_WR_RDMA_READ:
        return b->opcode != TMX_WR_RDMA_WRITE_WITH_IMM;
    default:
        return 0;
    }
}

/*
 * OOO placement, for a at the head of what is still to be written: 1 while a is held back
 * (the WRs behind it that may overtake it are written meanwhile, in their order), 0 when a
 * goes now. A WRITE or READ posted on an idle queue waits for the next poll, so that what is
 * posted right behind it may overtake it; when something may, it does (three times in four,
 * by the device's pseudo-random state) and a is held back for TMX_SOFT_OOO_HOLD_NS. Only
 * untouched WRs are overtaken, and a hold ends only between WRs: records of two WRs never
 * interleave. Completions stay in post order (tmx_soft_sq_reap).
 */
static int tmx_soft_ooo_hold(tmx_soft_qp_t *qp, tmx_soft_swr_t *a)
{
    int expired, partial = 0;

    if (a->state != TMX_SOFT_SWR_QUEUED || a->off != 0 || a->cma_done ||
        (a->opcode != TMX_WR_RDMA_WRITE && a->opcode != TMX_WR_RDMA_READ)) {
        return 0;
    }
    if (!qp->hold_on || qp->hold_seq != a->seq) {
        tmx_soft_swr_t *b;

        if (a->seq + 1 == qp->next_seq) {
            return qp->in_post; /* alone: it goes at the next poll */
        }
        b = tmx_soft_swr(qp, a->seq + 1);
        if (b->state != TMX_SOFT_SWR_QUEUED || !tmx_soft_ooo_may_pass(a, b) ||
            (tmx_soft_rand(&qp->dev->rng) & 3) == 0) {
            return 0;
        }
        qp->hold_on  = 1;
        qp->hold_seq = a->seq;
        qp->hold_ns  = tmx_time_ns() + TMX_SOFT_OOO_HOLD_NS;
    }
    expired = tmx_time_ns() >= qp->hold_ns;
    for (uint32_t s = a->seq + 1; s != qp->next_seq; s++) {
        tmx_soft_swr_t *b = tmx_soft_swr(qp, s);
        int             rc;

        if (b->early || b->state == TMX_SOFT_SWR_DONE) {
            continue;
        }
        if (!tmx_soft_ooo_may_pass(a, b) || (expired && b->off == 0 && !b->cma_done)) {
            break;
        }
        rc = tmx_soft_tx_one(qp, b);
        if (rc != 1) {
            partial = rc == 0; /* the wire is full (TMX_SOFT_TX_GONE: a's turn finds it) */
            break;
        }
        b->early = 1;
    }
    if (expired && !partial) {
        qp->hold_on = 0;
        return 0;
    }
    return 1;
}

static void tmx_soft_sq_progress(tmx_soft_qp_t *qp)
{
    while (qp->tx_seq != qp->next_seq) {
        tmx_soft_swr_t *swr = tmx_soft_swr(qp, qp->tx_seq);
        int             rc;

        if (swr->early) {
            qp->tx_seq++;
            continue;
        }
        if (qp->ooo && tmx_soft_ooo_hold(qp, swr)) {
            break;
        }
        rc = tmx_soft_tx_one(qp, swr);

        if (rc == TMX_SOFT_TX_GONE) {
            tmx_soft_qp_gone(qp); /* the QP leaves RTS: nothing more to send */
            return;
        }
        if (rc == 0) {
            break;
        }
        qp->tx_seq++;
    }
    tmx_soft_sq_reap(qp);
}

/* ---------------------------------------------------------------- the receiving side */

enum { TMX_SOFT_RX_BLOCKED = 0, TMX_SOFT_RX_DONE = 1, TMX_SOFT_RX_BAD = -1 };

/* The receive queue a QP's SENDs consume: its SRQ's or its own. */
static tmx_soft_rq_t *tmx_soft_qp_rq(tmx_soft_qp_t *qp)
{
    return qp->super.srq != NULL ? &((tmx_soft_srq_t *)qp->super.srq)->rq : &qp->rq;
}

static int tmx_soft_take_recv(tmx_soft_qp_t *qp, tmx_soft_rwr_t *rwr)
{
    if (!tmx_soft_cq_has_room(qp->super.recv_cq)) {
        return 0; /* backpressure: leave the record in the ring */
    }
    return tmx_soft_rq_pop(tmx_soft_qp_rq(qp), rwr);
}

/* A receive in place for qp: its SRQ asked for it, the record is in a ring (not a copy kept
 * aside), and the poll running now returns the completion before anything can move the ring
 * on: the CQ holds fewer than the caller's array takes (inplace_budget), so this one, pushed
 * now, is in the array. */
static inline int tmx_soft_inplace_ok(const tmx_soft_qp_t *qp)
{
    const tmx_soft_dev_t *dev = qp->dev;

    return dev->inplace_cq != NULL && (const tmx_cq_t *)dev->inplace_cq == qp->super.recv_cq &&
           dev->inplace_cq->count < dev->inplace_budget && qp->super.srq != NULL &&
           ((const tmx_soft_srq_t *)qp->super.srq)->inplace;
}

/* A receive's completion; data: where the message is, for a receive in place (else NULL). */
static void tmx_soft_recv_complete_at(tmx_soft_qp_t *qp, uint64_t wr_id, tmx_wc_status_t status,
                                      tmx_wc_opcode_t opcode, uint64_t len, int imm_valid,
                                      uint32_t imm, uint32_t src_qp, const void *data)
{
    tmx_wc_t wc = {.wr_id    = wr_id,
                   .status   = status,
                   .opcode   = opcode,
                   .byte_len = (uint32_t)len,
                   .imm_data = imm_valid ? imm : 0,
                   .qp_num   = qp->super.qp_num,
                   .src_qp   = src_qp,
                   .wc_flags = imm_valid ? TMX_WC_WITH_IMM : 0,
                   .data     = data};

    tmx_soft_cq_push((tmx_soft_cq_t *)qp->super.recv_cq, &wc);
}

static inline void tmx_soft_recv_complete(tmx_soft_qp_t *qp, uint64_t wr_id,
                                          tmx_wc_status_t status, tmx_wc_opcode_t opcode,
                                          uint64_t len, int imm_valid, uint32_t imm,
                                          uint32_t src_qp)
{
    tmx_soft_recv_complete_at(qp, wr_id, status, opcode, len, imm_valid, imm, src_qp, NULL);
}

/* ---------------------------------------------------------------- TM SRQ: the receive path */

static void tmx_soft_tm_wc(tmx_wc_t *wc, const tmx_soft_qp_t *qp, uint64_t wr_id,
                           tmx_wc_status_t status, tmx_wc_opcode_t opcode, uint64_t len,
                           unsigned flags)
{
    memset(wc, 0, sizeof(*wc));
    wc->wr_id    = wr_id;
    wc->status   = status;
    wc->opcode   = opcode;
    wc->byte_len = (uint32_t)len;
    wc->qp_num   = qp->super.qp_num;
    wc->wc_flags = flags;
    if (flags & TMX_WC_TM_MATCH) {
        wc->tm_info.tag  = qp->rx_tag;
        wc->tm_info.priv = qp->rx_ctx;
    }
}

/* The MATCH completion ahead of DATA_VALID (a payload above the MTU, or rendezvous offload). */
static void tmx_soft_tm_match_first(tmx_soft_qp_t *qp, uint32_t h)
{
    tmx_soft_tm_t *tm = qp->tm;
    tmx_wc_t       wc;

    tmx_soft_tm_wc(&wc, qp, tm->ent[h].recv_wr_id, TMX_WC_SUCCESS, TMX_WC_TM_RECV, 0,
                   TMX_WC_TM_MATCH);
    tmx_soft_tm_complete(tm, h, &wc, 0);
    tm->ent[h].match_sent = 1;
}

/* The receive being assembled ends (flush: with that status, the QP failing): its last
 * completion, as prov.h says for each kind. */
static void tmx_soft_tm_rx_end(tmx_soft_qp_t *qp, tmx_wc_status_t flush)
{
    tmx_soft_tm_t  *tm     = qp->tm;
    tmx_wc_status_t status = flush != TMX_WC_SUCCESS ? flush : qp->rx_status;
    uint32_t        h      = qp->rx_handle;
    tmx_wc_t        wc;

    qp->rx_busy = 0;
    switch (qp->rx_tm) {
    case TMX_SOFT_TM_RX_MATCHED:
        if (!tm->ent[h].match_sent && qp->rx_len > TMX_SOFT_TM_MTU) {
            tmx_soft_tm_match_first(qp, h);
        }
        tmx_soft_tm_wc(&wc, qp, qp->rx_wr.wr_id, status, TMX_WC_TM_RECV, qp->rx_len,
                       tm->ent[h].match_sent ? TMX_WC_TM_DATA_VALID
                                             : TMX_WC_TM_MATCH | TMX_WC_TM_DATA_VALID);
        tmx_soft_tm_complete(tm, h, &wc, 1);
        break;
    case TMX_SOFT_TM_RX_RNDV:
        /* software reads the data: the header (RVH + user header) is in the buffer */
        if (status == TMX_WC_SUCCESS || status == TMX_WC_LOC_LEN_ERR) {
            status = TMX_WC_TM_RNDV_INCOMPLETE;
        }
        tmx_soft_tm_wc(&wc, qp, qp->rx_wr.wr_id, status, TMX_WC_TM_RECV, qp->rx_len,
                       TMX_WC_TM_MATCH);
        tmx_soft_tm_complete(tm, h, &wc, 1);
        break;
    case TMX_SOFT_TM_RX_UNEXP:
        /* counted when it was steered here (tmx_soft_tm_rx_send), flushed or not */
        tmx_soft_tm_wc(&wc, qp, qp->rx_wr.wr_id, status, TMX_WC_TM_RECV, qp->rx_len,
                       tmx_soft_tm_sync_req(tm));
        tmx_soft_tm_complete(tm, 0, &wc, 1);
        break;
    default:
        tmx_soft_tm_wc(&wc, qp, qp->rx_wr.wr_id, status, TMX_WC_TM_NO_TAG, qp->rx_len, 0);
        tmx_soft_tm_complete(tm, 0, &wc, 1);
        break;
    }
}

/* Bytes of the message into the receive being assembled; the buffer is filled as far as it
 * goes (LOC_LEN_ERR beyond). */
static int tmx_soft_tm_rx_more(tmx_soft_qp_t *qp, const uint8_t *data, uint32_t len, int last)
{
    if (qp->rx_status == TMX_WC_SUCCESS || qp->rx_status == TMX_WC_LOC_LEN_ERR) {
        size_t room = tmx_soft_sge_len(qp->rx_wr.sge, qp->rx_wr.num_sge);
        size_t n    = len;

        if (qp->rx_len >= room) {
            n = 0;
        } else if (qp->rx_len + len > room) {
            n = room - qp->rx_len;
        }
        if (n < len) {
            qp->rx_status = TMX_WC_LOC_LEN_ERR;
        }
        if (n > 0) {
            tmx_soft_sge_scatter(qp->rx_wr.sge, qp->rx_wr.num_sge, qp->rx_len, data, n);
        }
    }
    qp->rx_len += len;
    if (qp->rx_tm == TMX_SOFT_TM_RX_MATCHED && !last && qp->rx_len > TMX_SOFT_TM_MTU &&
        !qp->tm->ent[qp->rx_handle].match_sent) {
        tmx_soft_tm_match_first(qp, qp->rx_handle); /* the rest is still on its way */
    }
    if (last) {
        tmx_soft_tm_rx_end(qp, TMX_WC_SUCCESS);
    }
    return TMX_SOFT_RX_DONE;
}

/* Room for the two WRs of a rendezvous offload in the TM QP's send queue. */
static int tmx_soft_tm_sq_room(tmx_soft_qp_t *qp)
{
    while (qp->sq_count + 2 > qp->sq_cap) {
        if (qp->sq_cap == qp->sq_size || !tmx_soft_sq_grow(qp)) {
            return 0;
        }
    }
    return 1;
}

/* Rendezvous offload: the READ of the sender's buffer into the entry's, and the FIN behind it
 * (FENCE), on the TM QP's send queue; cq_poll moves them (tmx_soft_sq_progress). */
static void tmx_soft_tm_rndv_post(tmx_soft_qp_t *qp, uint32_t h, const tmx_rvh_t *rvh_be)
{
    tmx_soft_tm_ent_t *e   = &qp->tm->ent[h];
    tmx_soft_swr_t    *rd  = tmx_soft_swr(qp, qp->next_seq);
    tmx_soft_swr_t    *fin = tmx_soft_swr(qp, qp->next_seq + 1);
    tmx_tmh_t          tmh;
    uint32_t           len = be32toh(rvh_be->len);

    memset(rd, 0, sizeof(*rd));
    rd->seq       = qp->next_seq;
    rd->opcode    = TMX_WR_RDMA_READ;
    rd->state     = TMX_SOFT_SWR_QUEUED;
    rd->status    = TMX_WC_SUCCESS;
    rd->raddr     = be64toh(rvh_be->va);
    rd->rkey      = be32toh(rvh_be->rkey);
    rd->num_sge   = e->num_sge;
    rd->sge[0]    = e->sge;
    rd->sge[0].length = len; /* the entry's buffer holds it: checked by the caller */
    rd->total     = len;
    rd->tm_kind   = TMX_SOFT_TM_WR_READ;
    rd->tm_handle = h;
    rd->tm_len    = len;
    if (e->num_sge == 0 || tmx_soft_sge_check(qp->dev, rd->sge, rd->num_sge,
                                             TMX_ACCESS_LOCAL_WRITE) != 0) {
        rd->state  = TMX_SOFT_SWR_DONE;
        rd->status = len == 0 && e->num_sge == 0 ? TMX_WC_SUCCESS : TMX_WC_LOC_PROT_ERR;
        rd->num_sge = 0;
    }
    memset(fin, 0, sizeof(*fin));
    memset(&tmh, 0, sizeof(tmh));
    tmh.opcode     = TMX_TMH_FIN;
    tmh.app_ctx    = htobe32(qp->rx_ctx);
    tmh.tag        = htobe64(qp->rx_tag);
    fin->seq       = qp->next_seq + 1;
    fin->opcode    = TMX_WR_SEND;
    fin->flags     = TMX_SEND_FENCE;
    fin->state     = TMX_SOFT_SWR_QUEUED;
    fin->status    = TMX_WC_SUCCESS;
    fin->total     = sizeof(tmh);
    fin->copy      = malloc(sizeof(tmh));
    fin->tm_kind   = TMX_SOFT_TM_WR_FIN;
    fin->tm_handle = h;
    fin->tm_len    = len;
    if (fin->copy == NULL) {
        /* no FIN can go: DATA_VALID fails, as a READ that failed */
        fin->state  = TMX_SOFT_SWR_DONE;
        fin->status = TMX_WC_GENERAL_ERR;
    } else {
        memcpy(fin->copy, &tmh, sizeof(tmh));
    }
    qp->next_seq += 2;
    qp->sq_count += 2;
    tmx_soft_pending_add(qp);
}

/* The FIN of a rendezvous offload went (or the READ or the QP failed): DATA_VALID. */
static void tmx_soft_tm_rndv_done(tmx_soft_qp_t *qp, const tmx_soft_swr_t *swr)
{
    tmx_soft_tm_t *tm = qp->tm;
    tmx_wc_t       wc;

    if (tm == NULL) {
        return;
    }
    memset(&wc, 0, sizeof(wc));
    wc.wr_id    = tm->ent[swr->tm_handle].recv_wr_id;
    wc.status   = swr->status;
    wc.opcode   = TMX_WC_TM_RECV;
    wc.byte_len = swr->tm_len;
    wc.qp_num   = qp->super.qp_num;
    wc.wc_flags = TMX_WC_TM_DATA_VALID;
    tmx_soft_tm_complete(tm, swr->tm_handle, &wc, 1);
}

/* A tagged message matched entry h (prov.h, "Receive"). */
static int tmx_soft_tm_rx_matched(tmx_soft_qp_t *qp, uint32_t h, uint8_t op,
                                  const uint8_t *data, uint32_t len, int last)
{
    tmx_soft_tm_t     *tm = qp->tm;
    tmx_soft_tm_ent_t *e  = &tm->ent[h];
    tmx_rvh_t          rvh;

    if (op == TMX_TMH_RNDV && last && qp->tm_qp && qp->dev->cfg->soft_tm_rndv &&
        len >= sizeof(tmx_tmh_t) + sizeof(rvh) &&
        len <= qp->dev->super.attr.tm.max_rndv_hdr_size) {
        memcpy(&rvh, data + sizeof(tmx_tmh_t), sizeof(rvh));
        if (be32toh(rvh.len) <= tmx_soft_sge_len(&e->sge, e->num_sge)) {
            if (!tmx_soft_tm_sq_room(qp)) {
                return TMX_SOFT_RX_BLOCKED; /* reads in flight: it waits, unmatched yet */
            }
            tmx_soft_tm_consume(tm, h);
            tmx_soft_tm_match_first(qp, h);
            tmx_soft_tm_rndv_post(qp, h, &rvh);
            return TMX_SOFT_RX_DONE;
        }
    }
    tmx_soft_tm_consume(tm, h);
    qp->rx_busy       = 1;
    qp->rx_tm         = op == TMX_TMH_RNDV ? TMX_SOFT_TM_RX_RNDV : TMX_SOFT_TM_RX_MATCHED;
    qp->rx_handle     = h;
    qp->rx_len        = 0;
    qp->rx_wr.wr_id   = e->recv_wr_id;
    qp->rx_wr.num_sge = e->num_sge;
    qp->rx_wr.sge[0]  = e->sge;
    qp->rx_status = tmx_soft_sge_check(qp->dev, qp->rx_wr.sge, qp->rx_wr.num_sge,
                                       TMX_ACCESS_LOCAL_WRITE) == 0 ? TMX_WC_SUCCESS
                                                                   : TMX_WC_LOC_PROT_ERR;
    return tmx_soft_tm_rx_more(qp, data + sizeof(tmx_tmh_t), len - (uint32_t)sizeof(tmx_tmh_t),
                               last);
}

/*
 * A SEND record on a QP of a TM SRQ. The first record of a message (or the whole of it)
 * decides where it goes: a matched entry's buffer, or a plain buffer (unexpected, counted;
 * NO_TAG, FIN and messages too short for a TMH, not counted); the next records follow it
 * there. Nothing is decided when it must wait (CQ full, no plain buffer, no room for the
 * reads of a rendezvous): the record stays, and is matched afresh when it is read again, as a
 * message the sender retries after RNR is.
 */
static int tmx_soft_tm_rx_send(tmx_soft_qp_t *qp, const tmx_soft_rec_t *rec, uint32_t len,
                               unsigned flags)
{
    tmx_soft_tm_t *tm   = qp->tm;
    const uint8_t *data = (const uint8_t *)(rec + 1);
    int            last = (flags & TMX_SOFT_REC_LAST) != 0;
    uint8_t        op   = TMX_TMH_NO_TAG;
    tmx_tmh_t      tmh;

    if (qp->rx_busy) {
        return (flags & TMX_SOFT_REC_FIRST) ? TMX_SOFT_RX_BAD
                                            : tmx_soft_tm_rx_more(qp, data, len, last);
    }
    if (!(flags & TMX_SOFT_REC_FIRST)) {
        return TMX_SOFT_RX_BAD;
    }
    if (!tmx_soft_cq_has_room(&tm->cq->super)) {
        return TMX_SOFT_RX_BLOCKED;
    }
    if (len >= sizeof(tmh)) {
        memcpy(&tmh, data, sizeof(tmh)); /* once: the peer may rewrite the ring */
        op         = tmh.opcode;
        qp->rx_tag = be64toh(tmh.tag);
        qp->rx_ctx = be32toh(tmh.app_ctx);
    }
    if (op == TMX_TMH_EAGER || op == TMX_TMH_RNDV) {
        uint32_t h = tmx_soft_tm_match(tm, qp->rx_tag);

        if (h != 0) {
            return tmx_soft_tm_rx_matched(qp, h, op, data, len, last);
        }
    }
    if (!tmx_soft_rq_pop(&tm->srq->rq, &qp->rx_wr)) {
        return TMX_SOFT_RX_BLOCKED; /* RNR */
    }
    if (op == TMX_TMH_EAGER || op == TMX_TMH_RNDV) {
        qp->rx_tm = TMX_SOFT_TM_RX_UNEXP;
        (void)tmx_soft_tm_unexpected(tm);
    } else {
        qp->rx_tm = TMX_SOFT_TM_RX_NO_TAG;
    }
    qp->rx_busy   = 1;
    qp->rx_handle = 0;
    qp->rx_len    = 0;
    qp->rx_status = tmx_soft_sge_check(qp->dev, qp->rx_wr.sge, qp->rx_wr.num_sge,
                                       TMX_ACCESS_LOCAL_WRITE) == 0 ? TMX_WC_SUCCESS
                                                                   : TMX_WC_LOC_PROT_ERR;
    return tmx_soft_tm_rx_more(qp, data, len, last);
}

/* A SEND in one record (every eager message) goes from the ring straight into the receive at
 * the head of the queue, without being taken out of it first. */
static int tmx_soft_rx_send_whole(tmx_soft_qp_t *qp, const tmx_soft_rec_t *rec, uint32_t len,
                                  unsigned flags)
{
    tmx_soft_rq_t   *rq = tmx_soft_qp_rq(qp);
    tmx_soft_rwr_t  *rwr;
    tmx_wc_status_t  status;
    uint64_t         wr_id;

    if (qp->tm != NULL) {
        return tmx_soft_tm_rx_send(qp, rec, len, flags);
    }
    if (rq->count == 0 || !tmx_soft_cq_has_room(qp->super.recv_cq)) {
        return TMX_SOFT_RX_BLOCKED; /* RNR, or backpressure: the record waits in the ring */
    }
    rwr = &rq->wr[rq->head];
    if (tmx_soft_sge_check(qp->dev, rwr->sge, rwr->num_sge, TMX_ACCESS_LOCAL_WRITE) != 0) {
        status = TMX_WC_LOC_PROT_ERR;
    } else if (len > tmx_soft_sge_len(rwr->sge, rwr->num_sge)) {
        status = TMX_WC_LOC_LEN_ERR;
    } else if (tmx_soft_inplace_ok(qp)) {
        /* in place: the completion points at the record, which stays ours until the next
         * poll (tmx_soft_rx_release) */
        wr_id = rwr->wr_id;
        tmx_soft_rq_advance(rq);
        qp->dev->inplace_hold = 1;
        tmx_soft_recv_complete_at(qp, wr_id, TMX_WC_SUCCESS, TMX_WC_RECV, len,
                                  (flags & TMX_SOFT_REC_IMM) != 0, rec->imm, 0, rec + 1);
        return TMX_SOFT_RX_DONE;
    } else {
        tmx_soft_sge_scatter(rwr->sge, rwr->num_sge, 0, (const uint8_t *)(rec + 1), len);
        status = TMX_WC_SUCCESS;
    }
    wr_id = rwr->wr_id;
    tmx_soft_rq_advance(rq);
    tmx_soft_recv_complete(qp, wr_id, status, TMX_WC_RECV, len, (flags & TMX_SOFT_REC_IMM) != 0,
                           rec->imm, 0);
    return TMX_SOFT_RX_DONE;
}

static int tmx_soft_rx_send(tmx_soft_qp_t *qp, const tmx_soft_rec_t *rec, uint32_t len,
                            unsigned flags)
{
    if (qp->tm != NULL) {
        return tmx_soft_tm_rx_send(qp, rec, len, flags);
    }
    if (!qp->rx_busy &&
        (flags & (TMX_SOFT_REC_FIRST | TMX_SOFT_REC_LAST)) ==
            (TMX_SOFT_REC_FIRST | TMX_SOFT_REC_LAST)) {
        return tmx_soft_rx_send_whole(qp, rec, len, flags);
    }
    if (!qp->rx_busy) {
        if (!(flags & TMX_SOFT_REC_FIRST)) {
            return TMX_SOFT_RX_BAD;
        }
        if (!tmx_soft_take_recv(qp, &qp->rx_wr)) {
            return TMX_SOFT_RX_BLOCKED; /* RNR: the record waits for a receive */
        }
        qp->rx_busy   = 1;
        qp->rx_len    = 0;
        qp->rx_status = tmx_soft_sge_check(qp->dev, qp->rx_wr.sge, qp->rx_wr.num_sge,
                                           TMX_ACCESS_LOCAL_WRITE) == 0 ? TMX_WC_SUCCESS
                                                                       : TMX_WC_LOC_PROT_ERR;
    } else if (flags & TMX_SOFT_REC_FIRST) {
        return TMX_SOFT_RX_BAD;
    }
    if (qp->rx_status == TMX_WC_SUCCESS) {
        if (qp->rx_len + len > tmx_soft_sge_len(qp->rx_wr.sge, qp->rx_wr.num_sge)) {
            qp->rx_status = TMX_WC_LOC_LEN_ERR;
        } else {
            tmx_soft_sge_scatter(qp->rx_wr.sge, qp->rx_wr.num_sge, qp->rx_len,
                                 (const uint8_t *)(rec + 1), len);
        }
    }
    qp->rx_len += len;
    if (flags & TMX_SOFT_REC_LAST) {
        qp->rx_busy = 0;
        tmx_soft_recv_complete(qp, qp->rx_wr.wr_id, qp->rx_status, TMX_WC_RECV, qp->rx_len,
                               (flags & TMX_SOFT_REC_IMM) != 0, rec->imm, 0);
    }
    return TMX_SOFT_RX_DONE;
}

static int tmx_soft_rx_wdata(tmx_soft_qp_t *qp, const tmx_soft_rec_t *rec,
                             const tmx_soft_rec_ext_t *ext, uint32_t len, unsigned flags)
{
    tmx_soft_dev_t  *dev  = qp->dev;
    int              last = (flags & TMX_SOFT_REC_LAST) != 0;
    int              imm  = (flags & TMX_SOFT_REC_IMM) != 0;
    tmx_soft_rwr_t   rwr;
    tmx_soft_resp_t *r;

    if (flags & TMX_SOFT_REC_FIRST) {
        qp->wfail     = 0;
        qp->wfail_seq = rec->seq;
    }
    if (last && (qp->resp_count == TMX_SOFT_MAX_RESP ||
                 (imm && !qp->wfail && !tmx_soft_cq_has_room(qp->super.recv_cq)))) {
        return TMX_SOFT_RX_BLOCKED;
    }
    if (!qp->wfail && tmx_soft_key_check(dev->mrs, dev->hdr->max_mrs, ext->rkey, ext->raddr,
                                         len, TMX_ACCESS_REMOTE_WRITE) != 0) {
        tmx_debug("qp %u: remote write of %u bytes at 0x%llx refused: bad key or bounds",
                  qp->super.qp_num, len, (unsigned long long)ext->raddr);
        qp->wfail = 1;
    }
    if (last && imm && !qp->wfail) {
        /* A WRITE_WITH_IMM consumes a receive: wait for one before touching memory. */
        if (!tmx_soft_take_recv(qp, &rwr)) {
            return TMX_SOFT_RX_BLOCKED;
        }
    }
    if (!qp->wfail) {
        tmx_soft_place(qp, ext->raddr, (const uint8_t *)rec + TMX_SOFT_HDR_EXT, len);
    }
    if (last) {
        r         = tmx_soft_resp_add(qp);
        r->seq    = rec->seq;
        r->status = qp->wfail ? TMX_WC_REM_ACCESS_ERR : TMX_WC_SUCCESS;
        if (imm && !qp->wfail) {
            tmx_soft_recv_complete(qp, rwr.wr_id, TMX_WC_SUCCESS, TMX_WC_RECV_RDMA_WITH_IMM,
                                   ext->total, 1, rec->imm, 0);
        }
    }
    return TMX_SOFT_RX_DONE;
}

static int tmx_soft_rx_rreq(tmx_soft_qp_t *qp, const tmx_soft_rec_t *rec,
                            const tmx_soft_rec_ext_t *ext)
{
    tmx_soft_dev_t  *dev = qp->dev;
    tmx_soft_resp_t *r   = tmx_soft_resp_add(qp);

    if (r == NULL) {
        return TMX_SOFT_RX_BLOCKED;
    }
    r->seq = rec->seq;
    if (ext->total > TMX_SOFT_MAX_MSG ||
        tmx_soft_key_check(dev->mrs, dev->hdr->max_mrs, ext->rkey, ext->raddr, ext->total,
                           TMX_ACCESS_REMOTE_READ) != 0) {
        tmx_debug("qp %u: remote read of %llu bytes at 0x%llx refused: bad key or bounds",
                  qp->super.qp_num, (unsigned long long)ext->total,
                  (unsigned long long)ext->raddr);
        r->status = TMX_WC_REM_ACCESS_ERR;
        return TMX_SOFT_RX_DONE;
    }
    r->is_read = 1;
    r->nt      = (rec->flags & TMX_SOFT_REC_NT) != 0;
    r->status  = ext->rkey; /* kept to re-check the key before each chunk */
    r->addr    = ext->raddr;
    r->total   = ext->total;
    return TMX_SOFT_RX_DONE;
}

/* The initiator's WR that a response names; NULL (and the response ignored) if none waits. */
static tmx_soft_swr_t *tmx_soft_rx_swr(tmx_soft_qp_t *qp, uint32_t seq)
{
    tmx_soft_swr_t *swr;

    if ((uint32_t)(seq - qp->head_seq) >= qp->sq_count) {
        return NULL;
    }
    swr = tmx_soft_swr(qp, seq);
    return swr->seq == seq && swr->state == TMX_SOFT_SWR_WAIT ? swr : NULL;
}

static int tmx_soft_rx_rresp(tmx_soft_qp_t *qp, const tmx_soft_rec_t *rec,
                             const tmx_soft_rec_ext_t *ext, uint32_t len, unsigned flags)
{
    tmx_soft_swr_t *swr = tmx_soft_rx_swr(qp, rec->seq);

    if (swr == NULL || swr->opcode != TMX_WR_RDMA_READ || ext->raddr != swr->off ||
        len > swr->total - swr->off) {
        return TMX_SOFT_RX_BAD;
    }
    tmx_soft_sge_scatter(swr->sge, swr->num_sge, swr->off, (const uint8_t *)rec +
                         TMX_SOFT_HDR_EXT, len);
    if (swr->off == 0) {
        swr->first_len = len;
        swr->first_ns  = swr->total >= (swr->rd_small ? TMX_SOFT_RD_SMALL_MIN
                                                      : TMX_SOFT_RD_MEASURE_MIN)
                             ? tmx_time_ns()
                             : 0;
    }
    swr->off += len;
    if (flags & TMX_SOFT_REC_LAST) {
        swr->state  = TMX_SOFT_SWR_DONE;
        swr->status = swr->off == swr->total ? TMX_WC_SUCCESS : TMX_WC_REM_INV_REQ_ERR;
        if (swr->first_ns != 0 && swr->off == swr->total && swr->total > swr->first_len) {
            tmx_soft_rd_measure(qp, swr);
        }
    }
    return TMX_SOFT_RX_DONE;
}

static int tmx_soft_rx_ack(tmx_soft_qp_t *qp, const tmx_soft_rec_t *rec,
                           const tmx_soft_rec_ext_t *ext)
{
    tmx_soft_swr_t *swr = tmx_soft_rx_swr(qp, rec->seq);

    if (swr == NULL || swr->opcode == TMX_WR_SEND || swr->opcode == TMX_WR_SEND_WITH_IMM) {
        return TMX_SOFT_RX_BAD;
    }
    swr->state  = TMX_SOFT_SWR_DONE;
    swr->status = ext->status == TMX_WC_SUCCESS ? TMX_WC_SUCCESS : TMX_WC_REM_ACCESS_ERR;
    return TMX_SOFT_RX_DONE;
}

static int tmx_soft_rx_wimm(tmx_soft_qp_t *qp, const tmx_soft_rec_t *rec,
                            const tmx_soft_rec_ext_t *ext)
{
    tmx_soft_rwr_t rwr;

    if (!tmx_soft_take_recv(qp, &rwr)) {
        return TMX_SOFT_RX_BLOCKED;
    }
    tmx_soft_recv_complete(qp, rwr.wr_id, TMX_WC_SUCCESS, TMX_WC_RECV_RDMA_WITH_IMM,
                           ext->total, 1, rec->imm, 0);
    return TMX_SOFT_RX_DONE;
}

static int tmx_soft_rx_ud(tmx_soft_qp_t *qp, const tmx_soft_rec_t *rec,
                          const tmx_soft_rec_ext_t *ext, uint32_t len, unsigned flags)
{
    tmx_soft_rwr_t  rwr;
    tmx_wc_status_t st = TMX_WC_SUCCESS;

    if (ext->status != qp->super.qp_num) {
        return TMX_SOFT_RX_DONE; /* not for this QP: a datagram is dropped */
    }
    if (!tmx_soft_take_recv(qp, &rwr)) {
        return TMX_SOFT_RX_BLOCKED;
    }
    if (tmx_soft_sge_check(qp->dev, rwr.sge, rwr.num_sge, TMX_ACCESS_LOCAL_WRITE) != 0) {
        st = TMX_WC_LOC_PROT_ERR;
    } else if (len > tmx_soft_sge_len(rwr.sge, rwr.num_sge)) {
        st = TMX_WC_LOC_LEN_ERR;
    } else {
        tmx_soft_sge_scatter(rwr.sge, rwr.num_sge, 0, (const uint8_t *)rec + TMX_SOFT_HDR_EXT,
                             len);
    }
    tmx_soft_recv_complete(qp, rwr.wr_id, st, TMX_WC_RECV, len,
                           (flags & TMX_SOFT_REC_IMM) != 0, rec->imm, ext->rkey);
    return TMX_SOFT_RX_DONE;
}

/* ---------------------------------------------------------------- fast rings (the owner's side) */

static void tmx_soft_grant_write(tmx_soft_qp_t *qp, unsigned ring)
{
    qp->grant_seq++;
    atomic_store_explicit(&qp->my_ctrl->grant, (uint64_t)qp->grant_seq << 32 | ring,
                          memory_order_release);
}

/* Asks the peer to give its ring back; it answers with a SWITCH at its next record (or at
 * its next liveness check when idle). */
static void tmx_soft_fast_revoke(tmx_soft_qp_t *qp)
{
    qp->revoking = 1;
    tmx_soft_grant_write(qp, 0);
    qp->dev->stat_revokes++;
    tmx_debug("qp %u: fast ring %u asked back", qp->super.qp_num, qp->rfast - 1);
}

/* No ring free: ask one back from the QP idle the longest, if one has been idle for a whole
 * traffic window, at most once a window. */
static void tmx_soft_fast_reclaim(tmx_soft_dev_t *dev)
{
    tmx_soft_qp_t *idle = NULL;

    if (dev->reclaim_ns == dev->win) {
        return;
    }
    dev->reclaim_ns = dev->win;
    for (unsigned r = 0; r < dev->hdr->max_fast; r++) {
        tmx_soft_qp_t *q = dev->fast_owner[r];

        if (q != NULL && !q->revoking && q->rx_win + 1 < dev->win &&
            (idle == NULL || q->rx_win < idle->rx_win)) {
            idle = q;
        }
    }
    if (idle != NULL) {
        tmx_soft_fast_revoke(idle);
    }
}

/* qp no longer holds its peer's ring. */
static void tmx_soft_fast_unhold(tmx_soft_qp_t *qp)
{
    if (qp->rseg != NULL && qp->rseg->fast_holder == qp) {
        qp->rseg->fast_holder = NULL;
    }
}

/* Lends a free fast ring to the peer of qp (which has carried traffic through the inbox). */
static void tmx_soft_fast_grant(tmx_soft_qp_t *qp)
{
    tmx_soft_dev_t  *dev    = qp->dev;
    tmx_soft_qp_t   *holder = qp->rseg != NULL ? qp->rseg->fast_holder : NULL;
    unsigned         n      = dev->hdr->max_fast, k, r;

    /* One ring per peer process, as vader keeps one fast box per peer: its other QPs (the
     * protocol replies, acknowledgements and credits going the other way) share the inbox.
     * Measured with tmx_pingpong -t bw, 8 bytes: a ring for each of a peer's QPs cost a
     * third of the bandwidth. The one a peer holds moves to a busier QP once it idles. */
    if (holder != NULL && holder != qp) {
        if (!holder->revoking && holder->rx_win + 1 < dev->win && dev->reclaim_ns != dev->win) {
            dev->reclaim_ns = dev->win;
            tmx_soft_fast_revoke(holder);
        }
        return;
    }
    /* the first ring (the largest, tmx_soft_ring) when it is free, else the next in turn */
    r = dev->fast_owner[0] == NULL && dev->fast_rest[0] <= dev->win ? 0 : dev->fast_next % n;
    for (k = 0; k < n && (dev->fast_owner[r] != NULL || dev->fast_rest[r] > dev->win);
         k++, r = (r + 1) % n) {
    }
    if (k == n) {
        tmx_soft_fast_reclaim(dev);
        return;
    }
    dev->fast_next = r + 1;
    qp->rfast      = r + 1;
    qp->fast_base  = dev->fast_pos[r];
    qp->revoking   = 0;
    dev->fast_owner[r] = qp;
    if (qp->rseg != NULL) {
        qp->rseg->fast_holder = qp;
    }
    atomic_store_explicit(&tmx_soft_fctrl(dev->base, dev->hdr, r)->consumed, qp->fast_base,
                          memory_order_relaxed);
    atomic_store_explicit(&qp->my_ctrl->grant_base, qp->fast_base, memory_order_relaxed);
    tmx_soft_grant_write(qp, r + 1);
    dev->stat_grants++;
    tmx_debug("qp %u: fast ring %u lent from position %llu", qp->super.qp_num, r,
              (unsigned long long)qp->fast_base);
}

/* The QP leaves (error, reset, destroy) holding a ring: the ring is free again, but its
 * positions jump far ahead, so that a peer still writing where it was cannot make records the
 * next borrower's reader takes for its own, and it rests for a second first: a peer that goes
 * on writing finds our QP gone at its next liveness check (every 100 ms while it has traffic),
 * long before the ring is lent again. */
static void tmx_soft_fast_drop(tmx_soft_qp_t *qp)
{
    tmx_soft_dev_t *dev = qp->dev;
    unsigned        r;

    if (qp->rfast == 0) {
        return;
    }
    r = qp->rfast - 1;
    if (qp->fast_on != 0 && qp->in_head > dev->fast_pos[r]) {
        dev->fast_pos[r] = qp->in_head;
    }
    dev->fast_pos[r] += 1ull << 32;
    dev->fast_rest[r] = dev->win + TMX_SOFT_REST_WIN;
    tmx_soft_fast_on_del(qp);
    dev->fast_owner[r] = NULL;
    tmx_soft_fast_unhold(qp);
    qp->rfast          = 0;
    qp->revoking       = 0;
    tmx_soft_grant_write(qp, 0);
}

/* Counts a record of qp's peer through the inbox; past a few in one window it gets a ring if
 * it is one of the busiest senders: it carried at least 1 / TMX_SOFT_FAST_SHARE of the
 * window's inbox records. Without that share, an all-to-all, where every peer sends as much, lent its rings
 * (2 MiB and 256 KiB, each prefaulted) to whichever peers a descheduled rank happened to find
 * 16 records of in a window: at 64 ranks on 2 cores 17 of the 64 ranks lent their 2 MiB ring,
 * more the longer it ran, for traffic the inbox carries as fast. */
static void tmx_soft_rx_count(tmx_soft_qp_t *qp)
{
    tmx_soft_dev_t *dev = qp->dev;

    if (qp->rx_win != dev->win) {
        qp->rx_win    = dev->win;
        qp->rx_recent = 0;
    }
    if (dev->recs_win != dev->win) {
        dev->recs_win = dev->win;
        dev->recs     = 0;
    }
    dev->recs++;
    if (++qp->rx_recent >= TMX_SOFT_FAST_AFTER && qp->rfast == 0 && dev->hdr->max_fast > 0 &&
        (uint64_t)qp->rx_recent * TMX_SOFT_FAST_SHARE >= dev->recs) {
        tmx_soft_fast_grant(qp);
    }
}

/* ---------------------------------------------------------------- reading records */

static void tmx_soft_park_free(tmx_soft_qp_t *qp)
{
    while (qp->park != NULL) {
        tmx_soft_park_t *p = qp->park;

        qp->park = p->next;
        free(p);
    }
    qp->park_tail  = NULL;
    qp->park_bytes = 0;
}

/* A peer's record made no sense: the QP goes to error, and the peer is told (its liveness
 * check reads err_gen, tmx_soft_qp_peer_dead), since it may wait for an answer that will never
 * come. */
static void tmx_soft_rx_bad(tmx_soft_qp_t *qp, unsigned op, uint32_t len)
{
    tmx_error("qp %u: malformed record from peer (op %u, len %u): qp to error",
              qp->super.qp_num, op, len);
    atomic_store_explicit(&qp->my_ctrl->err_gen, qp->my_gen, memory_order_relaxed);
    tmx_soft_qp_fail(qp, TMX_WC_REM_INV_REQ_ERR, 1);
}

/* Bytes a record of op with len payload bytes takes in a ring. */
static inline uint64_t tmx_soft_rec_bytes(unsigned op, uint32_t len)
{
    return tmx_soft_lines((op == TMX_SOFT_OP_SEND ? TMX_SOFT_HDR : TMX_SOFT_HDR_EXT) +
                          (uint64_t)len);
}

static int tmx_soft_rx_switch(tmx_soft_qp_t *qp, const tmx_soft_rec_t *rec,
                              const tmx_soft_rec_ext_t *ext);

/* Handles one RC record for qp, read from a ring where room bytes follow it; *bytes_p gets
 * what it takes there. Every field is read once into a local: the peer could rewrite the
 * ring under us, and nothing it writes may take us out of bounds. */
static int tmx_soft_rx_one(tmx_soft_qp_t *qp, const tmx_soft_rec_t *rec, uint64_t room,
                           uint64_t *bytes_p, int inbox)
{
    uint32_t           len   = rec->len;
    uint8_t            op    = rec->op;
    uint8_t            flags = rec->flags;
    tmx_soft_rec_ext_t ext;

    if (op == TMX_SOFT_OP_PAD) {
        *bytes_p = room;
        return TMX_SOFT_RX_DONE;
    }
    *bytes_p = tmx_soft_rec_bytes(op, len);
    if (*bytes_p > room) {
        return TMX_SOFT_RX_BAD;
    }
    memcpy(&ext, rec + 1, sizeof(ext));
    if ((qp->index & TMX_SOFT_XRC_DST) &&
        (op == TMX_SOFT_OP_WDATA || op == TMX_SOFT_OP_RREQ || op == TMX_SOFT_OP_RRESP ||
         op == TMX_SOFT_OP_ACK)) {
        return TMX_SOFT_RX_BAD; /* an XRC stream carries RDMA by cross-memory attach only */
    }
    switch (op) {
    case TMX_SOFT_OP_SEND:   return tmx_soft_rx_send(qp, rec, len, flags);
    case TMX_SOFT_OP_CLOSE:  return tmx_soft_xrc_rx_close(qp);
    case TMX_SOFT_OP_WIMM:   return tmx_soft_rx_wimm(qp, rec, &ext);
    case TMX_SOFT_OP_WDATA:  return tmx_soft_rx_wdata(qp, rec, &ext, len, flags);
    case TMX_SOFT_OP_RREQ:   return tmx_soft_rx_rreq(qp, rec, &ext);
    case TMX_SOFT_OP_RRESP:  return tmx_soft_rx_rresp(qp, rec, &ext, len, flags);
    case TMX_SOFT_OP_ACK:    return tmx_soft_rx_ack(qp, rec, &ext);
    case TMX_SOFT_OP_SWITCH: return inbox ? tmx_soft_rx_switch(qp, rec, &ext) : TMX_SOFT_RX_BAD;
    default:                 return TMX_SOFT_RX_BAD; /* a datagram on an RC path, or nonsense */
    }
}

/* The reader's side of a ring: its position is published to the producers every quarter ring.
 * Publishing rarely keeps the control line quiet; a quarter ring bounds what a producer may
 * believe is still in use. */
static inline void tmx_soft_rx_publish(tmx_soft_ring_ctrl_t *ctrl, uint64_t size, uint64_t head,
                                       uint64_t *published_p)
{
    if (head - *published_p >= size / 4) {
        *published_p = head;
        atomic_store_explicit(&ctrl->consumed, head, memory_order_release);
    }
}

/* Reads the records of qp's lent ring, up to limit of them or to where the peer left it. */
static void tmx_soft_fast_drain(tmx_soft_qp_t *qp, unsigned limit)
{
    uint64_t mask = qp->in_size - 1;

    for (unsigned i = 0; i < limit; i++) {
        uint64_t        head = qp->in_head;
        uint64_t        pos  = head & mask;
        tmx_soft_rec_t *rec  = (tmx_soft_rec_t *)(qp->in_ring + pos);
        uint64_t        bytes;
        uint32_t        len;
        int             rc;

        if (head == qp->in_stop ||
            atomic_load_explicit(&rec->stamp, memory_order_acquire) != head + 1) {
            break;
        }
        len = rec->len;
        if (rec->op == TMX_SOFT_OP_SEND && !qp->rx_busy && len <= qp->in_size - pos &&
            (rec->flags & (TMX_SOFT_REC_FIRST | TMX_SOFT_REC_LAST)) ==
                (TMX_SOFT_REC_FIRST | TMX_SOFT_REC_LAST)) {
            /* the eager message, the common case: straight to its receive */
            bytes = tmx_soft_rec_bytes(TMX_SOFT_OP_SEND, len);
            rc    = bytes <= qp->in_size - pos ? tmx_soft_rx_send_whole(qp, rec, len, rec->flags)
                                                : TMX_SOFT_RX_BAD;
        } else {
            rc = tmx_soft_rx_one(qp, rec, qp->in_size - pos, &bytes, 0);
        }
        if (rc == TMX_SOFT_RX_BLOCKED) {
            break;
        }
        if (rc == TMX_SOFT_RX_BAD) {
            tmx_soft_rx_bad(qp, rec->op, rec->len);
            return;
        }
        head       += bytes;
        qp->in_head = head;
        if (!qp->dev->inplace_hold) {
            tmx_soft_rx_publish(qp->in_ctrl, qp->in_size, head, &qp->in_published);
        }
    }
    qp->rx_win = qp->dev->win;
}

/*
 * The peer answers a grant word: it leaves the ring it wrote (its records there end at
 * ext->raddr: read them first, they came before this record) and takes the one named, from
 * its start. Once it answered our last word asking the ring back, the ring is free.
 */
static int tmx_soft_rx_switch(tmx_soft_qp_t *qp, const tmx_soft_rec_t *rec,
                              const tmx_soft_rec_ext_t *ext)
{
    tmx_soft_dev_t *dev   = qp->dev;
    unsigned        left  = ext->status;
    unsigned        taken = ext->rkey;

    if (qp->fast_on != 0) {
        if (left != qp->rfast || ext->raddr < qp->in_head ||
            ext->raddr - qp->in_head > qp->in_size) {
            return TMX_SOFT_RX_BAD;
        }
        qp->in_stop = ext->raddr;
        tmx_soft_fast_drain(qp, UINT32_MAX);
        if (qp->super.state == TMX_QPS_ERR) {
            return TMX_SOFT_RX_DONE; /* the drain met a bad record */
        }
        if (qp->in_head != qp->in_stop) {
            return TMX_SOFT_RX_BLOCKED; /* a receive is missing: the rest waits with us */
        }
        dev->fast_pos[qp->rfast - 1] = qp->in_head;
        if (dev->inplace_hold && dev->fast_rest[qp->rfast - 1] <= dev->win) {
            /* completions of this poll may point into it: not lent again before they are
             * taken (tmx_soft_rx_release publishes nothing for a ring no longer read) */
            dev->fast_rest[qp->rfast - 1] = dev->win + 1;
        }
        qp->in_stop                  = UINT64_MAX;
        tmx_soft_fast_on_del(qp);
    } else if (left != 0) {
        return TMX_SOFT_RX_BAD;
    }
    if (taken != 0) {
        if (taken != qp->rfast || ext->total != qp->fast_base) {
            return TMX_SOFT_RX_BAD;
        }
        qp->in_ring      = tmx_soft_ring(dev->base, dev->hdr, taken - 1);
        qp->in_size      = tmx_soft_ring_bytes(dev->hdr, taken - 1);
        qp->in_ctrl      = tmx_soft_fctrl(dev->base, dev->hdr, taken - 1);
        qp->in_head      = qp->fast_base;
        qp->in_published = qp->fast_base;
        qp->in_stop      = UINT64_MAX;
        tmx_soft_fast_on_add(qp);
    }
    if (qp->revoking && rec->seq == qp->grant_seq) {
        if (taken != 0) {
            return TMX_SOFT_RX_BAD;
        }
        dev->fast_owner[qp->rfast - 1] = NULL;
        tmx_soft_fast_unhold(qp);
        qp->rfast                      = 0;
        qp->revoking                   = 0;
    }
    return TMX_SOFT_RX_DONE;
}

/* Keeps a copy of an inbox record for qp, which cannot take it now (not connected yet, or no
 * receive posted), so that the inbox moves on for the other QPs; 0 when qp holds too much. */
static int tmx_soft_park(tmx_soft_qp_t *qp, const tmx_soft_rec_t *rec, uint64_t bytes)
{
    tmx_soft_park_t *p;

    if (qp->park_bytes + bytes > qp->dev->inbox_size ||
        (p = malloc(sizeof(*p) + bytes)) == NULL) {
        return 0;
    }
    p->next  = NULL;
    p->bytes = bytes;
    memcpy(p->rec, rec, bytes);
    if (qp->park_tail != NULL) {
        qp->park_tail->next = p;
    } else {
        qp->park = p;
    }
    qp->park_tail   = p;
    qp->park_bytes += bytes;
    tmx_soft_pending_add(qp);
    return 1;
}

static void tmx_soft_park_drain(tmx_soft_qp_t *qp)
{
    while (qp->park != NULL && qp->super.state != TMX_QPS_INIT) {
        tmx_soft_park_t *p = qp->park;
        uint64_t         bytes;
        int              rc = tmx_soft_rx_one(qp, (const tmx_soft_rec_t *)p->rec, p->bytes,
                                              &bytes, 1);

        if (rc == TMX_SOFT_RX_BLOCKED) {
            return;
        }
        if (rc == TMX_SOFT_RX_BAD) {
            tmx_soft_rx_bad(qp, ((const tmx_soft_rec_t *)p->rec)->op,
                            ((const tmx_soft_rec_t *)p->rec)->len);
            return; /* the failure freed the rest */
        }
        qp->park        = p->next;
        qp->park_bytes -= p->bytes;
        if (qp->park == NULL) {
            qp->park_tail = NULL;
        }
        free(p);
        if (qp->super.state == TMX_QPS_ERR) {
            return;
        }
    }
}

/* The QP an inbox record names, if it still is the one the sender connected to. */
static tmx_soft_qp_t *tmx_soft_inbox_qp(tmx_soft_dev_t *dev, uint32_t dst, uint32_t gen)
{
    tmx_soft_qp_t *qp;

    if (dst & TMX_SOFT_XRC_DST) {
        return tmx_soft_xrc_stream(dev, dst & ~TMX_SOFT_XRC_DST, gen);
    }
    qp = dst < dev->hdr->max_qps ? dev->qps[dst] : NULL;

    if (qp == NULL || qp->super.type != TMX_QPT_RC || qp->my_gen != gen ||
        qp->super.state == TMX_QPS_ERR || qp->super.state == TMX_QPS_RESET) {
        return NULL;
    }
    return qp;
}

/* A datagram for the UD QP. */
static int tmx_soft_inbox_ud(tmx_soft_dev_t *dev, const tmx_soft_rec_t *rec, uint64_t room,
                             uint64_t *bytes_p)
{
    uint32_t           len   = rec->len;
    uint8_t            flags = rec->flags;
    tmx_soft_rec_ext_t ext;

    *bytes_p = tmx_soft_lines(TMX_SOFT_HDR_EXT + (uint64_t)len);
    if (*bytes_p > room) {
        tmx_warn("dropping malformed datagram (len %u)", len);
        *bytes_p = room;
        return TMX_SOFT_RX_DONE;
    }
    if (dev->ud_qp == NULL || dev->ud_qp->super.state == TMX_QPS_RESET ||
        dev->ud_qp->super.state == TMX_QPS_ERR) {
        return TMX_SOFT_RX_DONE; /* nobody listens: dropped, as on hardware */
    }
    memcpy(&ext, rec + 1, sizeof(ext));
    return tmx_soft_rx_ud(dev->ud_qp, rec, &ext, len, flags);
}

/* Reads the inbox: datagrams, and RC records for whichever QP they name. */
static void tmx_soft_inbox_drain(tmx_soft_dev_t *dev)
{
    uint64_t mask = dev->inbox_size - 1;

    for (int i = 0; i < TMX_SOFT_DRAIN; i++) {
        uint64_t        head = dev->inbox_head;
        uint64_t        pos  = head & mask;
        uint64_t        room = dev->inbox_size - pos;
        tmx_soft_rec_t *rec  = (tmx_soft_rec_t *)(dev->inbox + pos);
        tmx_soft_qp_t  *qp;
        uint64_t        bytes;
        uint8_t         op;
        int             rc;

        if (atomic_load_explicit(&rec->stamp, memory_order_acquire) != head + 1) {
            break;
        }
        op = rec->op;
        if (op == TMX_SOFT_OP_PAD) {
            bytes = room;
            rc    = TMX_SOFT_RX_DONE;
        } else if (op == TMX_SOFT_OP_UD) {
            rc = tmx_soft_inbox_ud(dev, rec, room, &bytes);
        } else if ((qp = tmx_soft_inbox_qp(dev, rec->dst, rec->gen)) == NULL) {
            /* For a QP gone (or never there): dropped, as hardware drops packets for a QP
             * in error or reset. The inbox has many writers: keep going. */
            bytes = tmx_soft_rec_bytes(op, rec->len);
            bytes = bytes > room ? room : bytes;
            rc    = TMX_SOFT_RX_DONE;
        } else {
            if (qp->park == NULL && qp->super.state != TMX_QPS_INIT) {
                rc = tmx_soft_rx_one(qp, rec, room, &bytes, 1);
            } else {
                /* behind records kept aside, or not connected yet: kept aside too */
                bytes = tmx_soft_rec_bytes(op, rec->len);
                rc    = bytes > room ? TMX_SOFT_RX_BAD : TMX_SOFT_RX_BLOCKED;
            }
            if (rc == TMX_SOFT_RX_BAD) {
                tmx_soft_rx_bad(qp, op, rec->len);
                bytes = bytes > room ? room : bytes;
                rc    = TMX_SOFT_RX_DONE;
            } else if (rc == TMX_SOFT_RX_BLOCKED &&
                       (qp->super.state == TMX_QPS_INIT ||
                        tmx_soft_cq_has_room(qp->super.recv_cq)) &&
                       tmx_soft_park(qp, rec, bytes)) {
                /* Kept aside: the others go on. (With its CQ full, a QP is not the only
                 * one held up: the inbox waits for the poller instead.) */
                rc = TMX_SOFT_RX_DONE;
            } else if (rc == TMX_SOFT_RX_DONE) {
                tmx_soft_rx_count(qp);
            }
        }
        if (rc == TMX_SOFT_RX_BLOCKED) {
            break;
        }
        head           += bytes;
        dev->inbox_head = head;
        if (!dev->inplace_hold) {
            tmx_soft_rx_publish(dev->inbox_ctrl, dev->inbox_size, head, &dev->inbox_published);
        }
    }
    tmx_soft_inbox_ahead(dev);
}

/* Whether a record waits at head of a ring: the question every poll asks of every ring it
 * reads, so it is kept to a few loads (the drain asks again, and reads the record). */
static inline int tmx_soft_ring_has_rx(const uint8_t *ring, uint64_t size, uint64_t head)
{
    const tmx_soft_rec_t *rec = (const tmx_soft_rec_t *)(ring + (head & (size - 1)));

    return atomic_load_explicit(&rec->stamp, memory_order_acquire) == head + 1;
}

static inline int tmx_soft_inbox_has_rx(const tmx_soft_dev_t *dev)
{
    return tmx_soft_ring_has_rx(dev->inbox, dev->inbox_size, dev->inbox_head);
}

static inline int tmx_soft_fast_has_rx(const tmx_soft_qp_t *qp)
{
    return tmx_soft_ring_has_rx(qp->in_ring, qp->in_size, qp->in_head);
}

/* ---------------------------------------------------------------- UD */

static tmx_status_t tmx_soft_ud_send(tmx_soft_qp_t *qp, const tmx_send_wr_t *wr, size_t total)
{
    tmx_soft_rseg_t    *r     = ((tmx_soft_ah_t *)wr->ud.ah)->rseg;
    size_t              bytes = tmx_soft_lines(TMX_SOFT_HDR_EXT + total);
    tmx_soft_rec_t     *rec;
    tmx_soft_rec_ext_t *ext;
    uint64_t            tail;

    rec = tmx_soft_inbox_reserve(qp->dev, r, &tail, bytes);
    if (rec == NULL) {
        return TMX_ERR_NO_RESOURCE;
    }
    ext         = tmx_soft_ext(rec);
    rec->len    = (uint32_t)total;
    rec->op     = TMX_SOFT_OP_UD;
    rec->flags  = wr->opcode == TMX_WR_SEND_WITH_IMM ? TMX_SOFT_REC_IMM : 0;
    rec->imm    = wr->imm_data;
    rec->seq    = 0;
    rec->dst    = 0;
    rec->gen    = 0;
    ext->rkey   = qp->super.qp_num;
    ext->status = wr->ud.remote_qpn;
    tmx_soft_sge_gather(wr->sg_list, wr->num_sge, 0, (uint8_t *)(ext + 1), total);
    tmx_soft_inbox_commit(qp->dev, r, rec, tail, bytes);
    if (wr->send_flags & TMX_SEND_SIGNALED || qp->sig_all) {
        tmx_wc_t wc;

        memset(&wc, 0, sizeof(wc));
        wc.wr_id  = wr->wr_id;
        wc.opcode = TMX_WC_SEND;
        wc.qp_num = qp->super.qp_num;
        tmx_soft_cq_push((tmx_soft_cq_t *)qp->super.send_cq, &wc);
    }
    return TMX_OK;
}

/* ---------------------------------------------------------------- QP verbs */

tmx_status_t tmx_soft_qp_create(tmx_pd_t *pd, const tmx_qp_init_attr_t *attr, tmx_qp_t **qp_p)
{
    tmx_soft_dev_t *dev = (tmx_soft_dev_t *)pd->dev;
    tmx_soft_qp_t  *qp;
    unsigned        i, n;
    tmx_status_t    status;

    if (attr == NULL || attr->send_cq == NULL ||
        (attr->recv_cq == NULL && attr->type != TMX_QPT_XRC_INI &&
         attr->type != TMX_QPT_XRC_TGT) ||
        attr->max_send_wr > dev->super.attr.max_qp_wr ||
        attr->max_recv_wr > dev->super.attr.max_qp_wr ||
        attr->max_inline > dev->super.attr.max_inline) {
        status = TMX_ERR_INVALID_PARAM;
        goto err;
    }
    if (attr->type == TMX_QPT_XRC_TGT || attr->type == TMX_QPT_XRC_INI) {
        if (!(dev->super.attr.caps & TMX_DEV_CAP_XRC)) {
            status = TMX_ERR_UNSUPPORTED;
            goto err;
        }
        if (attr->srq != NULL) {
            status = TMX_ERR_INVALID_PARAM; /* no receive queue of their own to share */
            goto err;
        }
        if (attr->type == TMX_QPT_XRC_TGT) {
            return tmx_soft_xrc_tgt_create(pd, attr, qp_p); /* the domain's, not a slot's */
        }
    } else if (attr->type != TMX_QPT_RC && attr->type != TMX_QPT_UD) {
        status = TMX_ERR_UNSUPPORTED;
        goto err;
    }
    if (attr->srq != NULL && attr->srq->type == TMX_SRQT_TM && attr->type != TMX_QPT_RC) {
        status = TMX_ERR_INVALID_PARAM; /* TM traffic travels on RC */
        goto err;
    }
    if (attr->type == TMX_QPT_UD && dev->ud_qp != NULL) {
        status = TMX_ERR_NO_RESOURCE; /* one UD QP per device */
        goto err;
    }
    /* Next fit, not first fit: a ring freed by a QP whose peer was never told (a failure, a
     * timeout) is given out again as late as possible, so that a peer QP still aiming at it
     * has every chance to find the new generation first (it checks when busy or full). */
    for (n = 0, i = dev->qp_next % dev->hdr->max_qps;
         n < dev->hdr->max_qps && dev->qps[i] != NULL; n++, i = (i + 1) % dev->hdr->max_qps) {
    }
    if (n == dev->hdr->max_qps) {
        if (!dev->qps_full_logged) {
            dev->qps_full_logged = 1;
            tmx_warn("all %u queue pairs of the device are in use: a connection is refused "
                     "(raise TMX_SOFT_MAX_QPS; a rank of an all-to-all of N ranks uses 2N + 1)",
                     dev->hdr->max_qps);
        }
        status = TMX_ERR_NO_RESOURCE;
        goto err;
    }
    dev->qp_next = i + 1;
    qp = calloc(1, sizeof(*qp));
    if (qp == NULL) {
        status = TMX_ERR_NO_MEMORY;
        goto err;
    }
    qp->sq_size = tmx_soft_pow2u(attr->max_send_wr ? attr->max_send_wr : 256);
    qp->sq_cap  = qp->sq_size < 16 ? qp->sq_size : 16;
    qp->sq      = calloc(qp->sq_cap, sizeof(*qp->sq));
    qp->rq.size = attr->max_recv_wr ? attr->max_recv_wr : 256;
    qp->rq.wr   = attr->srq == NULL ? calloc(qp->rq.size, sizeof(*qp->rq.wr)) : NULL;
    if (qp->sq == NULL || (attr->srq == NULL && qp->rq.wr == NULL)) {
        status = TMX_ERR_NO_MEMORY;
        goto err_free;
    }
    tmx_soft_touch(qp->sq, qp->sq_cap * sizeof(*qp->sq));
    tmx_soft_touch(qp->rq.wr, attr->srq == NULL ? qp->rq.size * sizeof(*qp->rq.wr) : 0);
    qp->dev        = dev;
    qp->index      = i;
    qp->sig_all    = attr->sq_sig_all;
    qp->max_inline = attr->max_inline;
    qp->my_ctrl    = tmx_soft_ctrl(dev->base, dev->hdr, i);
    qp->in_stop    = UINT64_MAX;
    if (attr->type == TMX_QPT_UD) {
        dev->ud_qp = qp;
    } else {
        /* A new generation: records for an earlier QP of this slot are dropped. */
        qp->my_gen    = atomic_fetch_add(&qp->my_ctrl->gen, 1) + 1;
        qp->grant_seq = (uint32_t)(atomic_load(&qp->my_ctrl->grant) >> 32);
    }
    qp->super.pd      = pd;
    qp->super.type    = attr->type;
    qp->super.state   = TMX_QPS_RESET;
    qp->super.qp_num  = i + 1;
    qp->super.send_cq = attr->send_cq;
    qp->super.recv_cq = attr->recv_cq;
    qp->super.srq     = attr->srq;
    if (attr->srq != NULL && attr->srq->type == TMX_SRQT_TM) {
        qp->tm    = ((tmx_soft_srq_t *)attr->srq)->tm;
        qp->tm_qp = attr->max_send_wr == 0; /* its send queue is the device's */
    }
    if (attr->type == TMX_QPT_XRC_INI) {
        status = tmx_soft_xrc_ini_init(qp);
        if (status != TMX_OK) {
            goto err_free;
        }
        dev->stats.qps_xrc_ini++;
    } else if (attr->type == TMX_QPT_UD) {
        dev->stats.qps_ud++;
    } else {
        dev->stats.qps_rc++;
    }
    dev->qps[i]       = qp;
    *qp_p             = &qp->super;
    return TMX_OK;

err_free:
    free(qp->sq);
    free(qp->rq.wr);
    free(qp);
err:
    return status;
}

void tmx_soft_qp_destroy(tmx_qp_t *q)
{
    tmx_soft_qp_t *qp = (tmx_soft_qp_t *)q;

    if (qp == NULL) {
        return;
    }
    if (qp->super.type == TMX_QPT_XRC_TGT) {
        tmx_soft_xrc_qp_destroy(qp); /* the domain's: no slot */
        return;
    }
    if (qp->super.type == TMX_QPT_XRC_INI) {
        tmx_soft_xrc_qp_destroy(qp); /* its routes */
        qp->dev->stats.qps_xrc_ini--;
    } else if (qp->super.type == TMX_QPT_UD) {
        qp->dev->stats.qps_ud--;
    } else {
        qp->dev->stats.qps_rc--;
    }
    if (qp->rd_reads[0] + qp->rd_reads[1] != 0) {
        tmx_info("qp %u: reads through the rings: %llu by ordinary stores, %llu by streaming "
                 "ones; the other mode tried %u times, kept %u; ps per byte %llu / %llu",
                 qp->super.qp_num, (unsigned long long)qp->rd_reads[0],
                 (unsigned long long)qp->rd_reads[1], qp->rd_probes, qp->rd_switches,
                 (unsigned long long)qp->rd_cost[0], (unsigned long long)qp->rd_cost[1]);
    }
    tmx_soft_active_del(qp);
    for (uint32_t s = qp->head_seq; s != qp->next_seq; s++) {
        free(tmx_soft_swr(qp, s)->copy);
    }
    tmx_soft_pending_del(qp);
    tmx_soft_fast_drop(qp);
    tmx_soft_park_free(qp);
    if (qp->super.type == TMX_QPT_UD) {
        qp->dev->ud_qp = NULL;
    } else {
        atomic_fetch_add(&qp->my_ctrl->gen, 1);
    }
    tmx_soft_rseg_put(qp->dev, qp->rseg);
    qp->dev->qps[qp->index] = NULL;
    free(qp->sq);
    free(qp->rq.wr);
    free(qp);
}

tmx_status_t tmx_soft_qp_get_addr(tmx_qp_t *q, void *buf, size_t *len_p)
{
    tmx_soft_qp_t     *qp = (tmx_soft_qp_t *)q;
    tmx_soft_qp_addr_t a;
    size_t             dlen = sizeof(a.dev);
    tmx_status_t       status;

    if (qp != NULL && qp->super.type == TMX_QPT_XRC_TGT) {
        return tmx_soft_xrc_get_addr(qp, buf, len_p);
    }
    if (buf == NULL || len_p == NULL || *len_p < sizeof(a)) {
        return TMX_ERR_INVALID_PARAM;
    }
    memset(&a, 0, sizeof(a));
    status = tmx_soft_dev_addr_pack(qp->dev, a.dev, &dlen);
    if (status != TMX_OK) {
        return status;
    }
    a.magic   = TMX_SOFT_QP_MAGIC;
    a.version = TMX_SOFT_VERSION;
    a.len     = sizeof(a);
    a.qp_num  = qp->super.qp_num;
    a.index   = qp->index;
    a.gen     = qp->my_gen;
    a.dev_len = (uint32_t)dlen;
    memcpy(buf, &a, sizeof(a));
    *len_p = sizeof(a);
    return TMX_OK;
}

tmx_status_t tmx_soft_qp_addr_dev(const void *blob, size_t len, const uint8_t **dev_p,
                                  size_t *dev_len_p)
{
    const tmx_soft_qp_addr_t *a = blob;
    tmx_soft_qp_addr_t        h;

    if (blob == NULL || len != sizeof(h)) {
        return TMX_ERR_INVALID_ADDR;
    }
    memcpy(&h, blob, sizeof(h));
    if (h.magic != TMX_SOFT_QP_MAGIC || h.version != TMX_SOFT_VERSION || h.len != sizeof(h) ||
        h.dev_len > sizeof(h.dev)) {
        return TMX_ERR_INVALID_ADDR;
    }
    *dev_p     = a->dev;
    *dev_len_p = h.dev_len;
    return TMX_OK;
}

/*
 * Maps the pages of a peer's ring into this process now. Otherwise the first lap of the ring
 * takes a page fault every 64 records, on the path of a message: measured here, the first
 * 4096 ping-pongs of a connection ran at twice the latency of the ones after them.
 *
 * Where the owner made the pages (the first ring, TMX_SOFT_RING0_EARLY; or an earlier
 * borrower), a read of one line a page maps them, 16 pages a fault (the kernel maps the
 * neighbours of a read fault that are in memory, writable in a shared mapping): 0.13-0.17 ms
 * for 2 MiB, against 0.5-0.6 ms for MADV_POPULATE_WRITE, which takes one fault per page. Where
 * they are not made (the ring's last page tells), MADV_POPULATE_WRITE (Linux 5.14) makes them
 * writable at once (1.2-1.9 ms for 2 MiB, most of it making the pages); where it is missing,
 * the reads make each page at its first line.
 *
 * One line a page, not every line: this runs on the path of the message that finds the grant
 * (a stream's 16th or so), on both sides of a ping-pong, and reading all 32768 lines of 2 MiB
 * added 0.13-0.16 ms a side to the mapping's 0.2: a 4 KiB ping-pong's grant round trip took
 * 742-783 us with them, 442-455 without (2-core VM, 4 interleaved rounds; 256 KiB / 1 MiB /
 * 4 MiB rings 107-119 / 377-414 / 1313-1410 against 78-83 / 242-262 / 740-889). The reads
 * bought less than they cost: nothing in the first lap of 4 KiB records (round trip as in the
 * later laps), 0.1-1.4 us a round trip in the first lap of 8 and 16 KiB records (probably
 * lines from memory rather than from the cache the reads filled: 30-190 us a lap in two sets
 * of runs, 250-300 saved), and
 * the 8-byte rate they were kept for is level or ahead without them (tmx_pingpong -t rate -m
 * 8:8, 3 rounds: 16.1-16.4 against 13.7-16.5 M msg/s, with TMX_RING=no 7.4-9.6 against
 * 6.9-8.0); bench/README.md, h-lap. dev->stat_pf_pages and stat_pf_loads count the work.
 *
 * The whole ring at the grant: prefaulting ahead of the tail in pieces instead, as far again
 * as the sender had written, kept the pages of a short job's few records only, but put the
 * first lap's pages in the measured part of a ping-pong (tmx_pingpong -t bw -m 8:8, 8 runs
 * each on a loaded machine: best 51 MB/s against 80 with TMX_RING=no, 95 against 110 with
 * rings).
 */
static void tmx_soft_prefault(tmx_soft_dev_t *dev, uint8_t *ring, size_t size)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
#ifdef MADV_POPULATE_WRITE
    unsigned char made = 0;

    /* rings are page-aligned and whole pages (powers of two of at least 4 KiB) */
    if (size < page || mincore(ring + size - page, page, &made) != 0 || (made & 1) == 0) {
        (void)madvise(ring, size, MADV_POPULATE_WRITE); /* an optimization: failure is harmless */
    }
#endif
    for (size_t off = 0; off < size; off += page) {
        (void)*(volatile uint8_t *)(ring + off);
        dev->stat_pf_loads++;
    }
    dev->stat_pf_pages += (size + page - 1) / page;
}

/* INIT -> RTR of an RC QP: map the peer's segment and aim at its inbox, naming its QP. */
static tmx_status_t tmx_soft_qp_connect(tmx_soft_qp_t *qp, const tmx_qp_attr_t *attr)
{
    tmx_soft_dev_t    *dev = qp->dev;
    tmx_soft_qp_addr_t a;
    tmx_soft_rseg_t   *r;
    tmx_status_t       status;

    if (attr->remote_addr == NULL || attr->remote_addr_len != sizeof(a)) {
        return TMX_ERR_INVALID_ADDR;
    }
    memcpy(&a, attr->remote_addr, sizeof(a));
    if (a.magic != TMX_SOFT_QP_MAGIC || a.version != TMX_SOFT_VERSION || a.len != sizeof(a) ||
        a.dev_len > sizeof(a.dev)) {
        return TMX_ERR_INVALID_ADDR;
    }
    r = tmx_soft_rseg_get(dev, a.dev, a.dev_len, &status);
    if (r == NULL) {
        return status;
    }
    if (a.index >= r->hdr->max_qps || a.qp_num != a.index + 1 ||
        atomic_load(&tmx_soft_ctrl(r->base, r->hdr, a.index)->gen) != a.gen) {
        status = TMX_ERR_INVALID_ADDR; /* that QP is gone or never was */
        goto err_put;
    }
    qp->cma = tmx_soft_rseg_cma(dev, r);
    qp->cma_min = dev->cfg->soft_cma_min;
    if (!qp->cma && dev->cfg->soft_cma == 1) {
        tmx_error("qp %u: cross-memory attach to pid %d required (TMX_SOFT_CMA=1) but it "
                  "does not work", qp->super.qp_num, (int)r->pid);
        status = TMX_ERR_UNSUPPORTED;
        goto err_put;
    }
    qp->rseg         = r;
    qp->peer_ctrl    = tmx_soft_ctrl(r->base, r->hdr, a.index);
    qp->remote_index = a.index;
    qp->remote_qpn   = a.qp_num;
    qp->out_gen      = a.gen;
    qp->out_fast     = 0;
    /* The sequence only: a ring named already is answered at the first record. */
    qp->out_grant    = atomic_load(&qp->peer_ctrl->grant) & ~(uint64_t)UINT32_MAX;
    /* The peer's inbox is not prefaulted (its fast ring is, when lent): with every peer's
     * inbox mapped whole, a rank of a large job would show hundreds of MiB resident. */
    return TMX_OK;

err_put:
    tmx_soft_rseg_put(dev, r);
    return status;
}

/* Back to RESET: flush what is outstanding, forget the peer, start a fresh ring under a new
 * generation (a peer still aiming at the old one is refused at its next connect). */
static void tmx_soft_qp_reset(tmx_soft_qp_t *qp)
{
    tmx_soft_qp_fail(qp, TMX_WC_WR_FLUSH_ERR, 0);
    tmx_soft_sq_reap(qp);
    tmx_soft_rseg_put(qp->dev, qp->rseg);
    qp->rseg       = NULL;
    qp->rma_gen++; /* maps into that peer's memory are stale (rma_write posts) */
    qp->out_ring   = NULL;
    qp->resp_count = 0;
    qp->rx_busy    = 0;
    qp->wfail      = 0;
    qp->out_fast   = 0;
    qp->ooo        = 0;
    qp->hold_on    = 0;
    if (qp->super.type == TMX_QPT_RC) {
        /* a new generation: records of the old peer still in the inbox are dropped */
        qp->my_gen = atomic_fetch_add(&qp->my_ctrl->gen, 1) + 1;
    }
}

tmx_status_t tmx_soft_qp_modify(tmx_qp_t *q, const tmx_qp_attr_t *attr, unsigned attr_mask)
{
    tmx_soft_qp_t *qp  = (tmx_soft_qp_t *)q;
    tmx_qp_state_t cur;
    tmx_status_t   status = TMX_OK;

    if (qp == NULL || attr == NULL || !(attr_mask & TMX_QP_ATTR_STATE)) {
        return TMX_ERR_INVALID_PARAM;
    }
    if (qp->super.type == TMX_QPT_XRC_TGT ||
        (qp->super.type == TMX_QPT_XRC_INI && attr->state != TMX_QPS_INIT &&
         attr->state != TMX_QPS_RTS)) {
        return tmx_soft_xrc_modify(qp, attr, attr_mask);
    }
    cur = qp->super.state;
    if ((attr_mask & TMX_QP_ATTR_OOO) && attr->ooo) {
        /* OOO placement: only at INIT -> RTR of an RC QP, where the device offers it */
        if (attr->state != TMX_QPS_RTR || cur != TMX_QPS_INIT || qp->super.type != TMX_QPT_RC) {
            return TMX_ERR_INVALID_PARAM;
        }
        if (!(qp->dev->super.attr.caps & TMX_DEV_CAP_OOO)) {
            return TMX_ERR_UNSUPPORTED;
        }
    }
    switch (attr->state) {
    case TMX_QPS_INIT:
        if (cur != TMX_QPS_RESET) {
            status = TMX_ERR_INVALID_PARAM;
        }
        break;
    case TMX_QPS_RTR:
        if (cur != TMX_QPS_INIT) {
            status = TMX_ERR_INVALID_PARAM;
        } else if (qp->super.type == TMX_QPT_RC) {
            status = (attr_mask & TMX_QP_ATTR_REMOTE) ? tmx_soft_qp_connect(qp, attr)
                                                      : TMX_ERR_INVALID_PARAM;
        }
        if (status == TMX_OK) {
            tmx_soft_active_add(qp);
            if ((attr_mask & TMX_QP_ATTR_OOO) && attr->ooo) {
                qp->ooo = 1;
                qp->dev->stat_ooo_qps++;
            }
        }
        break;
    case TMX_QPS_RTS:
        if (cur != TMX_QPS_RTR) {
            status = TMX_ERR_INVALID_PARAM;
        }
        break;
    case TMX_QPS_ERR:
        tmx_soft_qp_fail(qp, TMX_WC_WR_FLUSH_ERR, 0);
        break;
    case TMX_QPS_RESET:
        if (cur == TMX_QPS_RESET) {
            status = TMX_ERR_INVALID_PARAM;
        } else {
            tmx_soft_qp_reset(qp);
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

/* What ibv_query_qp_data_in_order answers (capability form), from RTS on: the soft device
 * keeps (and answers) its TMX_SOFT_DATA_IN_ORDER promise for RDMA writes into this QP (both
 * bits for whole, as mlx5); sends and reads land with no promise; OOO placement: none. */
unsigned tmx_soft_qp_data_in_order(tmx_qp_t *q, tmx_wr_opcode_t op)
{
    tmx_soft_qp_t *qp = (tmx_soft_qp_t *)q;

    if (qp == NULL || qp->super.state != TMX_QPS_RTS || qp->super.type != TMX_QPT_RC ||
        qp->ooo || (op != TMX_WR_RDMA_WRITE && op != TMX_WR_RDMA_WRITE_WITH_IMM)) {
        return 0;
    }
    switch (qp->dev->data_order) {
    case TMX_SOFT_DIO_WHOLE:
        return TMX_DATA_IN_ORDER_WHOLE_MSG | TMX_DATA_IN_ORDER_ALIGNED_128_BYTES;
    case TMX_SOFT_DIO_ALIGNED128:
        return TMX_DATA_IN_ORDER_ALIGNED_128_BYTES;
    default:
        return 0;
    }
}

/* Validates one WR; *total_p gets its length. */
static tmx_status_t tmx_soft_wr_check(tmx_soft_qp_t *qp, const tmx_send_wr_t *wr,
                                      size_t *total_p)
{
    size_t total = 0;

    if (wr->num_sge < 0 || wr->num_sge > TMX_SOFT_MAX_SGE ||
        (wr->num_sge > 0 && wr->sg_list == NULL) || wr->opcode > TMX_WR_RDMA_READ) {
        return TMX_ERR_INVALID_PARAM;
    }
    for (int i = 0; i < wr->num_sge; i++) {
        total += wr->sg_list[i].length; /* 4 sges of 32 bits: no overflow in 64 */
    }
    if (total > TMX_SOFT_MAX_MSG) {
        return TMX_ERR_INVALID_PARAM;
    }
    if (qp->super.type == TMX_QPT_UD) {
        if ((wr->opcode != TMX_WR_SEND && wr->opcode != TMX_WR_SEND_WITH_IMM) ||
            wr->ud.ah == NULL || total > TMX_SOFT_MAX_UD_MSG) {
            return TMX_ERR_INVALID_PARAM;
        }
    } else if ((wr->send_flags & TMX_SEND_INLINE) &&
               (total > qp->dev->max_payload || wr->opcode == TMX_WR_RDMA_READ)) {
        return TMX_ERR_INVALID_PARAM;
    }
    *total_p = total;
    return TMX_OK;
}

static tmx_status_t tmx_soft_post_one(tmx_soft_qp_t *qp, const tmx_send_wr_t *wr, size_t total)
{
    int             idle = qp->tx_seq == qp->next_seq && qp->resp_count == 0;
    tmx_soft_swr_t *swr;
    unsigned        access;

    if (qp->sq_count == qp->sq_size) {
        return TMX_ERR_NO_RESOURCE;
    }
    if (qp->sq_count == qp->sq_cap && !tmx_soft_sq_grow(qp)) {
        return TMX_ERR_NO_MEMORY;
    }
    if ((wr->opcode == TMX_WR_SEND || wr->opcode == TMX_WR_SEND_WITH_IMM) &&
        !(wr->send_flags & TMX_SEND_SIGNALED) && !qp->sig_all) {
        /* TMX_DEV_CAP_MANUAL_PROGRESS: an unsignaled SEND is done for its poster once posted,
         * and nothing here moves data without the poster's calls, so it is accepted only
         * when it goes out whole now: one record, nothing queued before it. Queued, it would
         * wait for progress its poster may never make (a send "completed", then a barrier). */
        if (total > qp->dev->max_payload) {
            return TMX_ERR_INVALID_PARAM;
        }
        if (!idle) {
            return TMX_ERR_NO_RESOURCE;
        }
    }
    if (wr->opcode == TMX_WR_RDMA_WRITE_WITH_IMM && !(wr->send_flags & TMX_SEND_SIGNALED) &&
        !qp->sig_all && !idle) {
        return TMX_ERR_NO_RESOURCE; /* its notice is a record: the same rule as a SEND */
    }
    swr           = tmx_soft_swr(qp, qp->next_seq);
    swr->wr_id    = wr->wr_id;
    swr->seq      = qp->next_seq;
    swr->opcode   = wr->opcode;
    swr->flags    = wr->send_flags;
    swr->signaled = (wr->send_flags & TMX_SEND_SIGNALED) || qp->sig_all;
    swr->state    = TMX_SOFT_SWR_QUEUED;
    swr->status   = TMX_WC_SUCCESS;
    swr->imm      = wr->imm_data;
    swr->raddr    = wr->rdma.remote_addr;
    swr->rkey     = wr->rdma.rkey;
    swr->num_sge  = wr->num_sge;
    swr->total    = total;
    swr->off      = 0;
    swr->copy     = NULL;
    swr->cma_done = 0;
    swr->early    = 0;
    if (wr->num_sge > 0) {
        memcpy(swr->sge, wr->sg_list, (size_t)wr->num_sge * sizeof(tmx_sge_t));
    }
    access = wr->opcode == TMX_WR_RDMA_READ ? TMX_ACCESS_LOCAL_WRITE : 0;
    if (!(wr->send_flags & TMX_SEND_INLINE) &&
        tmx_soft_sge_check(qp->dev, swr->sge, swr->num_sge, access) != 0) {
        swr->state  = TMX_SOFT_SWR_DONE;
        swr->status = TMX_WC_LOC_PROT_ERR;
    }
    qp->next_seq++;
    qp->sq_count++;
    tmx_soft_pending_add(qp);
    if (qp->ooo && (wr->opcode == TMX_WR_RDMA_WRITE || wr->opcode == TMX_WR_RDMA_READ)) {
        idle = 0; /* may be overtaken by what follows: it waits for a poll (tmx_soft_ooo_hold) */
    }
    if (idle) {
        int rc = 1;

        if (swr->state != TMX_SOFT_SWR_DONE && !tmx_soft_fenced(qp, swr)) {
            rc = tmx_soft_tx_one(qp, swr);
        }
        if (rc == TMX_SOFT_TX_GONE) {
            tmx_soft_qp_gone(qp); /* the WR is posted: it completes with the error */
            return TMX_OK;
        }
        if (rc == 0 && swr->off == 0 && !swr->cma_done && wr->opcode != TMX_WR_RDMA_READ) {
            /* The ring is full and nothing of the WR went out: take it back. Not a READ: it
             * is signaled and waits in the queue for room, which cq_poll makes, as behind
             * any other WR (a read through the rings needs a request record; the core has no
             * retry for a read it could not post, and a job of 64 ranks failed its receives
             * with "resource temporarily unavailable"). */
            qp->next_seq--;
            qp->sq_count--;
            tmx_soft_qp_peer_dead(qp, 1);
            return TMX_ERR_NO_RESOURCE;
        }
        if (qp->tx_seq == swr->seq && swr->state != TMX_SOFT_SWR_QUEUED) {
            qp->tx_seq++;
        }
    }
    if (swr->state == TMX_SOFT_SWR_QUEUED && (wr->send_flags & TMX_SEND_INLINE)) {
        /* Still queued: an inline buffer is reusable on return, keep a copy. */
        swr->copy = malloc(total ? total : 1);
        if (swr->copy == NULL) {
            qp->next_seq--;
            qp->sq_count--;
            return TMX_ERR_NO_MEMORY;
        }
        tmx_soft_sge_gather(swr->sge, swr->num_sge, 0, swr->copy, total);
    }
    qp->in_post = 1;
    tmx_soft_sq_progress(qp);
    qp->in_post = 0;
    return TMX_OK;
}

/*
 * A direct SEND above TMX_SOFT_WHOLE_MAX: one reservation for all its
 * records, each published as soon as it is written, so that the receiver copies one out while
 * we write the next. Taken at once like the single record it replaces (it goes out whole or
 * not at all), and only when the records fit where that one record would: the bound on a
 * record (a quarter ring) holds for the reservation. 0: it does not fit (one record then), or
 * the ring is full.
 */
static int tmx_soft_send_frags(tmx_soft_qp_t *qp, const tmx_send_wr_t *wr, size_t total,
                               uint8_t flags)
{
    /* total > TMX_SOFT_WHOLE_MAX >= TMX_SOFT_FRAG + TMX_SOFT_FRAG_SLACK: k >= 2 pieces of
     * at most about
     * TMX_SOFT_FRAG, even (whole lines but the last), so none is a header's worth */
    size_t          k     = (total - TMX_SOFT_FRAG_SLACK + TMX_SOFT_FRAG - 1) / TMX_SOFT_FRAG;
    size_t          piece = ((total + k - 1) / k + 63) & ~(size_t)63;
    size_t          last  = total - (k - 1) * piece;
    size_t          whole = (k - 1) * tmx_soft_lines(TMX_SOFT_HDR + piece) +
                            tmx_soft_lines(TMX_SOFT_HDR + last);
    tmx_soft_rec_t *rec;
    uint8_t        *p;
    size_t          off = 0;

    if (whole > tmx_soft_lines(TMX_SOFT_HDR + qp->dev->max_payload)) {
        return -1;
    }
    rec = tmx_soft_qp_reserve(qp, whole);
    if (rec == NULL) {
        return 0;
    }
    p = (uint8_t *)rec;
    for (size_t i = 0; i < k; i++) {
        size_t n     = i + 1 < k ? piece : last;
        size_t bytes = tmx_soft_lines(TMX_SOFT_HDR + n);

        rec        = (tmx_soft_rec_t *)p;
        rec->len   = (uint32_t)n;
        rec->op    = TMX_SOFT_OP_SEND;
        rec->flags = (uint8_t)((flags & TMX_SOFT_REC_IMM) | (i == 0 ? TMX_SOFT_REC_FIRST : 0) |
                               (i + 1 == k ? TMX_SOFT_REC_LAST : 0));
        rec->imm   = wr->imm_data;
        rec->seq   = qp->next_seq;
        rec->dst   = qp->remote_index;
        rec->gen   = qp->out_gen;
        tmx_soft_sge_gather(wr->sg_list, wr->num_sge, off, (uint8_t *)(rec + 1), n);
        if (i + 1 < k) {
            tmx_soft_qp_publish_part(qp, rec, bytes);
        } else {
            tmx_soft_qp_commit(qp, rec, bytes);
        }
        off += n;
        p += bytes;
    }
    return 1;
}

/*
 * The eager path's common case: an unsignaled inline SEND on an RC QP whose send queue is
 * empty. It goes straight into one ring record and is complete on return, so it needs no
 * queue entry and makes no completion; the sequence numbers move as if it had passed through
 * the queue. 0: not this case, or the ring is full (the general path decides what to do).
 */
static int tmx_soft_send_direct(tmx_soft_qp_t *qp, const tmx_send_wr_t *wr, size_t total)
{
    tmx_soft_rec_t *rec;
    uint8_t         flags = TMX_SOFT_REC_FIRST | TMX_SOFT_REC_LAST;

    if (qp->sq_count != 0 || qp->resp_count != 0 || qp->sig_all ||
        qp->super.type != TMX_QPT_RC ||
        (wr->send_flags & (TMX_SEND_INLINE | TMX_SEND_SIGNALED)) != TMX_SEND_INLINE) {
        return 0;
    }
    if (wr->opcode == TMX_WR_SEND_WITH_IMM) {
        flags |= TMX_SOFT_REC_IMM;
    } else if (wr->opcode != TMX_WR_SEND) {
        return 0;
    }
    if (total > TMX_SOFT_WHOLE_MAX) {
        int r = tmx_soft_send_frags(qp, wr, total, flags);

        if (r == 0) {
            return 0;
        }
        if (r > 0) {
            qp->next_seq++;
            qp->tx_seq++;
            qp->head_seq++;
            return 1;
        }
    }
    /* tmx_soft_wr_check bounded an inline total by max_payload: one record */
    rec = tmx_soft_qp_reserve(qp, TMX_SOFT_HDR + total);
    if (rec == NULL) {
        return 0;
    }
    rec->len   = (uint32_t)total;
    rec->op    = TMX_SOFT_OP_SEND;
    rec->flags = flags;
    rec->imm   = wr->imm_data;
    rec->seq   = qp->next_seq;
    if (total >= TMX_SOFT_TX_NT_MIN) {
        (void)tmx_soft_tx_gather(qp, wr->sg_list, wr->num_sge, (uint8_t *)(rec + 1), total);
    } else {
        tmx_soft_sge_gather(wr->sg_list, wr->num_sge, 0, (uint8_t *)(rec + 1), total);
    }
    tmx_soft_qp_commit(qp, rec, TMX_SOFT_HDR + total);
    /* the queue was empty: head, tx and next were equal and stay so */
    qp->next_seq++;
    qp->tx_seq++;
    qp->head_seq++;
    return 1;
}

/*
 * The eager-RDMA ring's common case: an unsignaled RDMA WRITE into the peer's device memory on
 * an RC QP whose send queue is empty, key and bounds good and the peer alive: our stores place
 * it now, and it needs no queue entry and makes no completion (the sequence numbers move as if
 * it had passed through the queue). 0: not this case (the general path does it, or fails it
 * with the completion it deserves).
 */
static int tmx_soft_write_direct(tmx_soft_qp_t *qp, const tmx_send_wr_t *wr, size_t total)
{
    tmx_soft_rseg_t         *r = qp->rseg;
    const tmx_soft_mr_ent_t *table;
    tmx_soft_swr_t           swr;
    uint8_t                 *dst;

    if (wr->opcode != TMX_WR_RDMA_WRITE || qp->sq_count != 0 || qp->resp_count != 0 ||
        qp->sig_all || qp->ooo || qp->super.type != TMX_QPT_RC ||
        (wr->send_flags & TMX_SEND_SIGNALED) ||
        (dst = tmx_soft_dm_target(r, wr->rdma.remote_addr, total)) == NULL) {
        return 0;
    }
    table = (tmx_soft_mr_ent_t *)((uint8_t *)r->base + r->hdr->mr_off);
    if ((!(wr->send_flags & TMX_SEND_INLINE) &&
         tmx_soft_sge_check(qp->dev, wr->sg_list, wr->num_sge, 0) != 0) ||
        tmx_soft_key_check(table, r->hdr->max_mrs, wr->rdma.rkey, wr->rdma.remote_addr, total,
                           TMX_ACCESS_REMOTE_WRITE) != 0 ||
        r->dead) {
        return 0;
    }
    tmx_soft_rseg_touch(r, dst, total);
    if (tmx_soft_write_mode(qp, r->h.data_order) == TMX_SOFT_DIO_WHOLE &&
        tmx_soft_write_hook == NULL) {
        tmx_soft_dm_store_whole(wr->sg_list, wr->num_sge, wr->rdma.remote_addr, total, dst);
    } else {
        swr.num_sge = wr->num_sge;
        memcpy(swr.sge, wr->sg_list, (size_t)wr->num_sge * sizeof(tmx_sge_t));
        swr.copy  = NULL;
        swr.raddr = wr->rdma.remote_addr;
        swr.total = total;
        tmx_soft_dm_store(qp, &swr, dst);
    }
    /* the queue was empty: head, tx and next were equal and stay so */
    qp->next_seq++;
    qp->tx_seq++;
    qp->head_seq++;
    return 1;
}

/*
 * The second half of tmx_soft_write_small and tmx_soft_write_slot, once their callers checked
 * the work request and the QP: tmx_soft_write_direct's checks of the nsge pieces' total bytes
 * against the peer's memory, and the store. Inline in both (with nsge a constant 1 in the
 * first). 0: not this case (nothing done).
 */
static inline __attribute__((always_inline)) int
tmx_soft_write_store(tmx_soft_qp_t *qp, const tmx_send_wr_t *wr, int nsge, size_t total)
{
    tmx_soft_rseg_t *r = qp->rseg;
    uint8_t         *dst;

    if (r->h.data_order != TMX_SOFT_DIO_WHOLE ||
        (dst = tmx_soft_dm_target(r, wr->rdma.remote_addr, total)) == NULL ||
        tmx_soft_key_check((const tmx_soft_mr_ent_t *)((uint8_t *)r->base + r->hdr->mr_off),
                           r->hdr->max_mrs, wr->rdma.rkey, wr->rdma.remote_addr, total,
                           TMX_ACCESS_REMOTE_WRITE) != 0 ||
        r->dead) {
        return 0;
    }
    tmx_soft_rseg_touch(r, dst, total);
    tmx_soft_dm_store_whole(wr->sg_list, nsge, wr->rdma.remote_addr, total, dst);
    /* the queue was empty: head, tx and next were equal and stay so */
    qp->next_seq++;
    qp->tx_seq++;
    qp->head_seq++;
    return 1;
}

/*
 * The eager-RDMA ring's write of a small message in one piece (tmx_ring_send): an unsignaled
 * inline RDMA WRITE of one sge into a whole-message device's memory, alone, on an RC QP in RTS
 * whose send queue is empty. tmx_soft_wr_check's checks that apply to it and
 * tmx_soft_write_direct's, once each, and the store. 0: not this case (nothing done).
 */
static inline int tmx_soft_write_small(tmx_soft_qp_t *qp, const tmx_send_wr_t *wr)
{
    const tmx_sge_t *sge = wr->sg_list;
    size_t           total;

    if (wr->next != NULL || wr->opcode != TMX_WR_RDMA_WRITE || wr->num_sge != 1 || sge == NULL ||
        (wr->send_flags & (TMX_SEND_INLINE | TMX_SEND_SIGNALED)) != TMX_SEND_INLINE ||
        qp->super.state != TMX_QPS_RTS || qp->super.type != TMX_QPT_RC || qp->tm_qp ||
        (qp->sq_count | qp->resp_count) != 0 || qp->sig_all || qp->ooo ||
        (total = sge->length) > qp->dev->max_payload || tmx_soft_write_hook != NULL) {
        return 0;
    }
    return tmx_soft_write_store(qp, wr, 1, total);
}

/*
 * tmx_soft_write_small for a message in its slot (tmx_ring_send: header, payload and flag, two
 * or three sges): the same checks and the same store, summing the pieces. Out of
 * tmx_soft_write_small, whose one-sge case is every small message's (callgrind: a loop there
 * costs the 8-byte send 30 instructions). 0: not this case (nothing done).
 */
static int tmx_soft_write_slot(tmx_soft_qp_t *qp, const tmx_send_wr_t *wr)
{
    const tmx_sge_t *sge = wr->sg_list;
    size_t           total = 0;

    if (wr->next != NULL || wr->opcode != TMX_WR_RDMA_WRITE || wr->num_sge < 2 ||
        wr->num_sge > 3 || sge == NULL ||
        (wr->send_flags & (TMX_SEND_INLINE | TMX_SEND_SIGNALED)) != TMX_SEND_INLINE ||
        qp->super.state != TMX_QPS_RTS || qp->super.type != TMX_QPT_RC || qp->tm_qp ||
        (qp->sq_count | qp->resp_count) != 0 || qp->sig_all || qp->ooo ||
        tmx_soft_write_hook != NULL) {
        return 0;
    }
    for (int i = 0; i < wr->num_sge; i++) {
        total += sge[i].length; /* three 32-bit lengths: no overflow */
    }
    if (total > qp->dev->max_payload) {
        return 0;
    }
    return tmx_soft_write_store(qp, wr, wr->num_sge, total);
}

/* tmx_soft_post_send past its ring write fast path: its own function, so that the fast path
 * does not pay this one's register saves (callgrind: 18 instructions a call). */
static __attribute__((noinline)) tmx_status_t tmx_soft_post_send_any(tmx_soft_qp_t *qp,
                                                                     tmx_send_wr_t *wr,
                                                                     tmx_send_wr_t **bad_p)
{
    tmx_status_t status = TMX_OK;

    if (qp->super.type == TMX_QPT_RC && tmx_soft_write_slot(qp, wr)) {
        return TMX_OK; /* a ring message in its slot */
    }
    if (qp->super.type == TMX_QPT_XRC_INI) {
        /* one SEND to the remote SRQ of the last one: straight to its route */
        tmx_soft_qp_t *rt = tmx_soft_xrc_route_hint(qp, wr);

        if (rt == NULL) {
            return tmx_soft_xrc_ini_post(qp, wr, bad_p);
        }
        qp = rt;
        if (tmx_soft_write_small(qp, wr)) {
            return TMX_OK;
        }
    }
    for (; wr != NULL; wr = wr->next) {
        size_t total = 0;

        if (qp->super.state != TMX_QPS_RTS || qp->tm_qp) {
            status = TMX_ERR_INVALID_PARAM;
        } else {
            status = tmx_soft_wr_check(qp, wr, &total);
        }
        if (status == TMX_OK && !(wr->opcode == TMX_WR_RDMA_WRITE
                                      ? tmx_soft_write_direct(qp, wr, total)
                                      : tmx_soft_send_direct(qp, wr, total))) {
            status = qp->super.type == TMX_QPT_UD ? tmx_soft_ud_send(qp, wr, total)
                                                  : tmx_soft_post_one(qp, wr, total);
        }
        if (status != TMX_OK) {
            if (bad_p != NULL) {
                *bad_p = wr;
            }
            break;
        }
    }
    return status;
}

/*
 * rma_map / rma_write (prov.h): the eager-RDMA ring's writes with the checks that cannot
 * change hoisted out of every write. The map holds where the region lies in our mapping of the
 * peer's device memory (prov_ptr), its key's table entry and the generation it must show
 * (prov_aux[0], prov_word), and the peer segment it was checked against (prov_aux[1]) under
 * the QP's reset count (prov_gen: a reset forgets that peer, so the map is stale). Only
 * an RC QP to a whole-message device without OOO placement is mapped: every other case keeps
 * the general path, which scrambles writes as the device's data-in-order mode says.
 */
tmx_status_t tmx_soft_rma_map(tmx_qp_t *q, uint64_t raddr, size_t len, uint32_t rkey,
                              tmx_rma_map_t *map)
{
    tmx_soft_qp_t           *qp = (tmx_soft_qp_t *)q;
    tmx_soft_rseg_t         *r  = qp->rseg;
    const tmx_soft_mr_ent_t *table;
    uint8_t                 *dst;

    memset(map, 0, sizeof(*map));
    map->remote_addr = raddr;
    map->len         = len;
    map->rkey        = rkey;
    if (qp->super.type != TMX_QPT_RC || qp->super.state != TMX_QPS_RTS || qp->tm_qp ||
        qp->ooo || qp->sig_all || r == NULL || r->dead || r->h.data_order != TMX_SOFT_DIO_WHOLE ||
        (dst = tmx_soft_dm_target(r, raddr, len)) == NULL) {
        return TMX_ERR_UNSUPPORTED;
    }
    table = (const tmx_soft_mr_ent_t *)((uint8_t *)r->base + r->hdr->mr_off);
    if (tmx_soft_key_check(table, r->hdr->max_mrs, rkey, raddr, len, TMX_ACCESS_REMOTE_WRITE) !=
        0) {
        return TMX_ERR_UNSUPPORTED;
    }
    tmx_soft_rseg_touch(r, dst, len); /* its pages once, here */
    map->prov_ptr    = dst;
    map->prov_word   = 0x100u | (rkey & 0xffu);
    map->prov_aux[0] = &table[rkey >> 8].gen_valid;
    map->prov_aux[1] = r;
    map->prov_gen    = qp->rma_gen;
    return TMX_OK;
}

/* rma_write and rma_writev past their fast path: the bounds, then the general post_send of the
 * same write. */
static __attribute__((noinline)) tmx_status_t
tmx_soft_rma_writev_post(tmx_qp_t *q, const tmx_rma_map_t *map, size_t off, const tmx_sge_t *sge,
                         int num_sge, uint64_t wr_id)
{
    tmx_sge_t     sg[3];
    tmx_send_wr_t wr, *bad;
    size_t        n = 0;

    if (num_sge < 1 || num_sge > 3) {
        return TMX_ERR_INVALID_PARAM;
    }
    for (int i = 0; i < num_sge; i++) {
        sg[i] = sge[i];
        n += sge[i].length;
    }
    if (off > map->len || n > map->len - off) {
        return TMX_ERR_INVALID_PARAM;
    }
    memset(&wr, 0, sizeof(wr));
    wr.wr_id            = wr_id;
    wr.sg_list          = sg;
    wr.num_sge          = num_sge;
    wr.opcode           = TMX_WR_RDMA_WRITE;
    wr.send_flags       = TMX_SEND_INLINE;
    wr.rdma.remote_addr = map->remote_addr + off;
    wr.rdma.rkey        = map->rkey;
    return tmx_soft_post_send(q, &wr, &bad);
}

/*
 * What rma_write and rma_writev check before writing in place (tmx_soft_write_small's case:
 * the queue is empty, the key still good, the peer alive): n bytes at off within the map, a
 * payload the device carries, ending on an aligned 8 bytes (the ring's flag word).
 */
static inline __attribute__((always_inline)) int
tmx_soft_rma_in_place(const tmx_soft_qp_t *qp, const tmx_rma_map_t *map, size_t off, size_t n,
                      const uint8_t *dst)
{
    return off <= map->len && n <= map->len - off && n <= qp->dev->max_payload &&
           (((uintptr_t)dst + n) & 7) == 0 && qp->super.state == TMX_QPS_RTS &&
           (qp->sq_count | qp->resp_count) == 0 && qp->rma_gen == map->prov_gen &&
           qp->rseg == map->prov_aux[1] && !((const tmx_soft_rseg_t *)map->prov_aux[1])->dead &&
           tmx_soft_write_hook == NULL &&
           atomic_load_explicit((const _Atomic uint32_t *)map->prov_aux[0],
                                memory_order_acquire) == map->prov_word;
}

/* The last piece of an in-place write: its bytes, then its last 8 with release (as
 * tmx_soft_dm_store_whole stores them), and the queue's counters, which were equal (the queue
 * was empty: head, tx and next) and stay so. */
static inline __attribute__((always_inline)) void
tmx_soft_rma_finish(tmx_soft_qp_t *qp, uint8_t *dst, const uint8_t *src, size_t n)
{
    uint64_t v;

    tmx_copy(dst, src, n - 8);
    TMX_SOFT_RELEASE_FENCE();
    memcpy(&v, src + n - 8, 8);
    __atomic_store_n((uint64_t *)(void *)(dst + n - 8), v, __ATOMIC_RELEASE);
    TMX_SOFT_RELEASE_FENCE();
    qp->next_seq++;
    qp->tx_seq++;
    qp->head_seq++;
}

tmx_status_t tmx_soft_rma_write(tmx_qp_t *q, const tmx_rma_map_t *map, size_t off,
                                const void *src, size_t n, uint64_t wr_id)
{
    tmx_soft_qp_t *qp  = (tmx_soft_qp_t *)q;
    uint8_t       *dst = (uint8_t *)map->prov_ptr + off;
    tmx_sge_t      sge;

    if (n >= 8 && tmx_soft_rma_in_place(qp, map, off, n, dst)) {
        tmx_soft_rma_finish(qp, dst, src, n);
        return TMX_OK;
    }
    if (n > UINT32_MAX) {
        return TMX_ERR_INVALID_PARAM;
    }
    sge = (tmx_sge_t){.addr = (uintptr_t)src, .length = (uint32_t)n};
    return tmx_soft_rma_writev_post(q, map, off, &sge, 1, wr_id);
}

/* tmx_soft_rma_write gathering up to three pieces (a ring message in its slot: header,
 * payload, flag), each copied once, straight into the peer's memory; the last 8 bytes (the
 * flag word, at the end of the last piece) stored last, with release, as there. */
tmx_status_t tmx_soft_rma_writev(tmx_qp_t *q, const tmx_rma_map_t *map, size_t off,
                                 const tmx_sge_t *sge, int num_sge, uint64_t wr_id)
{
    tmx_soft_qp_t *qp  = (tmx_soft_qp_t *)q;
    uint8_t       *dst = (uint8_t *)map->prov_ptr + off;
    size_t         n   = 0, last;

    if (num_sge < 1 || num_sge > 3) {
        return TMX_ERR_INVALID_PARAM;
    }
    for (int i = 0; i < num_sge; i++) {
        n += sge[i].length; /* at most three 32-bit lengths: no overflow */
    }
    last = sge[num_sge - 1].length;
    if (last >= 8 && tmx_soft_rma_in_place(qp, map, off, n, dst)) {
        for (int i = 0; i < num_sge - 1; i++) {
            tmx_copy(dst, (const void *)(uintptr_t)sge[i].addr, sge[i].length);
            dst += sge[i].length;
        }
        tmx_soft_rma_finish(qp, dst, (const uint8_t *)(uintptr_t)sge[num_sge - 1].addr, last);
        return TMX_OK;
    }
    return tmx_soft_rma_writev_post(q, map, off, sge, num_sge, wr_id);
}

tmx_status_t tmx_soft_post_send(tmx_qp_t *q, tmx_send_wr_t *wr, tmx_send_wr_t **bad_p)
{
    tmx_soft_qp_t *qp = (tmx_soft_qp_t *)q;

    if (qp->super.type != TMX_QPT_XRC_INI && tmx_soft_write_small(qp, wr)) {
        return TMX_OK;
    }
    return tmx_soft_post_send_any(qp, wr, bad_p);
}

tmx_status_t tmx_soft_post_recv(tmx_qp_t *q, tmx_recv_wr_t *wr, tmx_recv_wr_t **bad_p)
{
    tmx_soft_qp_t *qp = (tmx_soft_qp_t *)q;

    if (qp->super.srq != NULL || qp->super.state == TMX_QPS_ERR ||
        qp->super.type == TMX_QPT_XRC_INI || qp->super.type == TMX_QPT_XRC_TGT) {
        *bad_p = wr;
        return TMX_ERR_INVALID_PARAM;
    }
    return tmx_soft_rq_post(qp->dev, &qp->rq, wr, bad_p);
}

/* ---------------------------------------------------------------- progress */

/* Every few hundred polls: the traffic window moves on; every TMX_SOFT_CHECK_NS, peers are
 * checked for life, and idle senders answer grant words they have not seen yet (a ring asked
 * back from an idle sender is then free again). */
static void tmx_soft_check_peers(tmx_soft_dev_t *dev)
{
    uint64_t now = tmx_time_ns();

    if (now - dev->win_ns >= TMX_SOFT_WIN_NS && !dev->win_frozen) {
        dev->win_ns = now;
        dev->win++;
    }
    if (now - dev->last_check_ns < TMX_SOFT_CHECK_NS) {
        return;
    }
    dev->last_check_ns = now;
    for (unsigned i = 0; i < dev->num_active;) {
        tmx_soft_qp_t *qp = dev->active[i];
        /* A failed QP leaves the array, its slot takes the last one: do not advance. */
        if (!tmx_soft_qp_peer_dead(qp, qp->sq_count > 0 || qp->resp_count > 0)) {
            if (qp->rseg != NULL && qp->super.state == TMX_QPS_RTS &&
                atomic_load_explicit(&qp->peer_ctrl->grant, memory_order_relaxed) !=
                    qp->out_grant) {
                (void)tmx_soft_tx_switch(qp);
            }
            i++;
        }
    }
    if (dev->xrc != NULL) {
        tmx_soft_xrc_check(dev);
    }
}

/* What peers have put on the wire for us reaches its queue pairs (matching, placement,
 * completions): the rings lent to peers, then the inbox. */
void tmx_soft_rx_arrivals(tmx_soft_dev_t *dev)
{
    for (unsigned i = 0; i < dev->num_fast_on; i++) {
        tmx_soft_qp_t *qp = dev->fast_on[i];

        if (tmx_soft_fast_has_rx(qp)) {
            tmx_soft_fast_drain(qp, TMX_SOFT_DRAIN);
            if (qp->fast_on == 0) {
                i--; /* it failed and left the array */
            }
        }
    }
    if (tmx_soft_inbox_has_rx(dev)) {
        tmx_soft_inbox_drain(dev);
    }
}

/* The completions in place of the last poll were taken (the caller polls again): the
 * records they pointed at may go back to their producers. */
static void tmx_soft_rx_release(tmx_soft_dev_t *dev)
{
    dev->inplace_hold = 0;
    tmx_soft_rx_publish(dev->inbox_ctrl, dev->inbox_size, dev->inbox_head, &dev->inbox_published);
    for (unsigned i = 0; i < dev->num_fast_on; i++) {
        tmx_soft_qp_t *qp = dev->fast_on[i];

        tmx_soft_rx_publish(qp->in_ctrl, qp->in_size, qp->in_head, &qp->in_published);
    }
}

int tmx_soft_cq_poll(tmx_cq_t *c, int n, tmx_wc_t *wc)
{
    tmx_soft_cq_t  *cq  = (tmx_soft_cq_t *)c;
    tmx_soft_dev_t *dev = (tmx_soft_dev_t *)c->dev;
    int             got = 0;

    if (n < 0 || (n > 0 && wc == NULL)) {
        return TMX_ERR_INVALID_PARAM;
    }
    if (dev->inplace_hold) {
        tmx_soft_rx_release(dev);
    }
    if ((++dev->poll_count & 255) == 0) {
        tmx_soft_check_peers(dev);
    }
    dev->inplace_cq     = cq;
    dev->inplace_budget = (unsigned)n;
    tmx_soft_rx_arrivals(dev);
    dev->inplace_cq     = NULL;
    dev->inplace_budget = 0;
    for (unsigned i = 0; i < dev->num_pend;) {
        tmx_soft_qp_t *qp = dev->pend[i];

        if (qp->park != NULL) {
            tmx_soft_park_drain(qp);
        }
        if (qp->resp_count > 0 && qp->super.state != TMX_QPS_ERR) {
            tmx_soft_resp_progress(qp);
        }
        if (qp->sq_count > 0 && qp->super.state != TMX_QPS_ERR) {
            tmx_soft_sq_progress(qp);
        }
        if (qp->pending == 0) {
            continue; /* it failed and left the array: slot i holds another */
        }
        if (qp->park == NULL && qp->resp_count == 0 && qp->sq_count == 0) {
            tmx_soft_pending_del(qp);
            continue;
        }
        i++;
    }
    while (got < n && cq->count > 0) {
        wc[got++] = cq->wc[cq->head];
        cq->head  = (cq->head + 1) & (cq->cap - 1);
        cq->count--;
    }
    cq->popped += (unsigned)got;
    if (cq->tm != NULL && got > 0) {
        tmx_soft_tm_polled(cq);
    }
    return got;
}

/*
 * Arms the device's wake word (ibv_req_notify_cq). The store, a barrier, then a look at every
 * ring we read (the inbox, the lent rings): a producer stores its record, then loads the word
 * (tmx_soft_wake_peer), so either it sees us armed and wakes us, or we see its record here
 * and do not sleep. BUSY
 * too while a send of ours waits for room in a peer's ring (or we owe a peer fallback READ
 * data): room appears without a word to us, so only polling moves it.
 */
tmx_status_t tmx_soft_cq_req_notify(tmx_cq_t *c, tmx_comp_channel_t *ch)
{
    tmx_soft_cq_t  *cq  = (tmx_soft_cq_t *)c;
    tmx_soft_dev_t *dev = (tmx_soft_dev_t *)c->dev;

    if (ch == NULL || ch != &dev->channel || !dev->channel_open) {
        return TMX_ERR_INVALID_PARAM;
    }
    /* Before a sleep, the liveness check that polls make every 256th time (a sleeper polls
     * rarely): a dead peer's QPs fail now, and their completions make us busy. And the
     * records of receives in place go back to their senders now, not at the next poll: a
     * sender waiting for room would not wake us. */
    tmx_soft_check_peers(dev);
    if (dev->inplace_hold) {
        tmx_soft_rx_release(dev);
    }
    if (cq->count > 0) {
        return TMX_ERR_BUSY;
    }
    for (unsigned i = 0; i < dev->num_pend; i++) {
        tmx_soft_qp_t *qp = dev->pend[i];
        if (qp->tx_seq != qp->next_seq || qp->resp_count > 0 ||
            (qp->park != NULL && qp->super.state != TMX_QPS_INIT)) {
            return TMX_ERR_BUSY;
        }
    }
    atomic_store_explicit(&dev->hdr->armed, 1, memory_order_seq_cst);
    if (dev->asym) {
        if (!tmx_soft_membarrier()) {
            goto busy; /* cannot order the producers: do not sleep */
        }
    } else {
        TMX_SOFT_FENCE();
    }
    if (tmx_soft_inbox_has_rx(dev)) {
        goto busy;
    }
    for (unsigned i = 0; i < dev->num_fast_on; i++) {
        if (tmx_soft_fast_has_rx(dev->fast_on[i])) {
            goto busy;
        }
    }
    return TMX_OK;

busy:
    /* a producer that saw the word meanwhile sends a wake for nothing: harmless */
    atomic_store_explicit(&dev->hdr->armed, 0, memory_order_relaxed);
    return TMX_ERR_BUSY;
}

/* ---------------------------------------------------------------- for soft_xrc.c */

void tmx_soft_qp_release(tmx_soft_qp_t *qp)
{
    tmx_soft_active_del(qp);
    tmx_soft_pending_del(qp);
    for (uint32_t s = qp->head_seq; s != qp->next_seq; s++) {
        free(tmx_soft_swr(qp, s)->copy);
        tmx_soft_swr(qp, s)->copy = NULL;
    }
    tmx_soft_fast_drop(qp);
    tmx_soft_park_free(qp);
}

void tmx_soft_qp_error(tmx_soft_qp_t *qp, tmx_wc_status_t status, int async)
{
    tmx_soft_qp_fail(qp, status, async);
}

void tmx_soft_qp_activate(tmx_soft_qp_t *qp)
{
    tmx_soft_active_add(qp);
}

int tmx_soft_qp_send_close(tmx_soft_qp_t *qp)
{
    tmx_soft_rec_t *rec;

    if (qp->rseg == NULL || tmx_soft_rseg_dead(qp->rseg)) {
        return 1; /* nobody reads it */
    }
    rec = tmx_soft_qp_reserve(qp, TMX_SOFT_HDR);
    if (rec == NULL) {
        return 0;
    }
    rec->len   = 0;
    rec->op    = TMX_SOFT_OP_CLOSE;
    rec->flags = 0;
    rec->imm   = 0;
    rec->seq   = qp->next_seq;
    tmx_soft_qp_commit(qp, rec, TMX_SOFT_HDR);
    return 1;
}
