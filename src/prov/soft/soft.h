/*
 * The soft device, shared-memory fabric: private structures shared by soft_dev.c (segment,
 * addresses, memory, completion and receive queues) and soft_qp.c (queue pairs, the rings
 * that are the wire, progress).
 *
 * Segment of one opened device, mapped by its owner and by every peer that talks to it: an
 * anonymous memory file (memfd) that peers open through /proc/<pid>/fd/<fd> of the owner, so
 * that nothing outlives the processes; where peers cannot open that (a trial decides, see
 * tmx_soft_memfd_trial), a POSIX shm segment "/tmx-<uid>-<pid>-<n>":
 *
 *   header | MR table (max_mrs entries) | inbox control line + inbox ring | per-QP control
 *   lines (max_qps) | fast ring control lines (max_fast) | max_fast fast rings (tmx_soft_ring) |
 *   device memory (dm_size)
 *
 * Device memory is what mem_alloc gives out (a bitmap of 64-byte lines, process-local): an
 * RDMA WRITE whose target lies wholly inside a peer's device memory is done by the
 * initiator's own stores into its mapping of the segment, checked against the target's MR
 * table like any remote access and ordered as the target's data-in-order answer promises
 * (tmx_soft_dm_store), so that a receiver polling that memory sees a write without any poll
 * of its own, as with an adapter that DMA-writes registered memory.
 *
 * The header's third line holds the wake word. Sleeping (verbs' completion channel): the
 * owner arms its wake word before it sleeps on its wake socket; a producer that finds the word
 * set after publishing a record clears it and sends the socket one datagram
 * (tmx_soft_wake_peer, tmx_soft_cq_req_notify).
 *
 * The wire is a set of byte rings of 64-byte lines, each read by the segment's owner only:
 *
 * - The inbox, one per device, written by every sender of every peer (datagrams and RC
 *   traffic alike), serialized by a lock word; an RC record names the receiving QP by slot
 *   and generation. Its size does not depend on the number of peers: this is the receive
 *   queue "found by number and shared by every sender" of an XRC SRQ (doc/DESIGN.md).
 * - max_fast fast rings, each lent to one sending QP at a time, which writes it without a
 *   lock: the owner grants them to the QPs that carry traffic, one per peer process, and
 *   takes them back from idle ones (tmx_soft_fast_grant). A grant is written in the receiving QP's control line; the
 *   sender sees it at its next record and answers with a SWITCH record in the inbox, after
 *   which it writes the fast ring; on a revocation it answers with a SWITCH naming where its
 *   last record in the fast ring ends. The owner switches paths at those records, so the
 *   records of one QP are read in the order they were written, whichever path they took.
 *   A ring's positions continue from one borrower to the next.
 *
 * Shared memory per process is thus header + tables + inbox + max_fast rings, whatever the
 * number of peers (a QP costs one 64-byte control line).
 *
 * A record starts on a line with tmx_soft_rec_t; its stamp is the record's position + 1,
 * stored last with a release store, so the reader never mistakes stale data of an earlier lap
 * for a new record. Before it the producer clears the stamp word of the line behind the
 * record if it holds the next stamp: that line may hold payload of the previous lap, which can
 * equal it by chance.
 */
#ifndef TMX_PROV_SOFT_H
#define TMX_PROV_SOFT_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/un.h>

#include "prov/prov.h"
#include "util/list.h"

#define TMX_SOFT_MAGIC      0x746d78736f667431ULL /* "tmxsoft1" */
#define TMX_SOFT_ADDR_MAGIC 0x736d7431u
#define TMX_SOFT_QP_MAGIC   0x71707431u
#define TMX_SOFT_VERSION    6
#define TMX_SOFT_LINE       64
#define TMX_SOFT_MAX_SGE    4
#define TMX_SOFT_NAME_MAX   40
#define TMX_SOFT_MAX_UD_MSG 4096
#define TMX_SOFT_MAX_MSG    (1ul << 30)
#define TMX_SOFT_MAX_RESP   16 /* fallback READs a target serves at once per QP */
#define TMX_SOFT_DM_MAX     (1ull << 30) /* largest device memory area (TMX_SOFT_DM_SIZE) */
#define TMX_SOFT_DM_ALIGN   128 /* of a mem_alloc area: the data-in-order block */
/* Payload of one SEND record when a message takes several: the receiver copies a record out
 * while the sender writes the next, so a message above it moves in a pipeline instead of in
 * two serial copies (tmx_soft_send_direct). A message in pieces is not received in place (the
 * receiver gathers them into its receive buffer first: one copy more), so a message up to
 * TMX_SOFT_WHOLE_MAX stays whole, and the pieces of a longer one are of even size, none
 * more than TMX_SOFT_FRAG_SLACK above TMX_SOFT_FRAG. */
#define TMX_SOFT_FRAG       8192
#define TMX_SOFT_FRAG_SLACK 1024
/* The largest SEND that stays one record: a 16 KiB eager message (TMX_EAGER_MAX's default)
 * behind the core's header. Whole and received in place, a 16 KiB ping-pong took 1.43-1.65 us
 * against 2.48-3.25 in two pieces, and streamed 26.6-28.3 GB/s against 10.6-13.0 (2-core VM,
 * 3-5 interleaved rounds in its fast mode). At least TMX_SOFT_FRAG + TMX_SOFT_FRAG_SLACK. */
#define TMX_SOFT_WHOLE_MAX  (16384 + 1024)

/*
 * Bytes of data per RRESP record of an RDMA READ answered through the rings (the target's
 * progress copies, the reader copies out as each record lands). Smaller records overlap the
 * two copies more; ping-pong latency on a 2-core VM, 4 interleaved rounds, 64 KiB records
 * against 16 KiB: 32 KiB 3.5-4.3 against 2.6-3.0 us, 64 KiB 6.7-7.8 against 3.7-3.9, 1 MiB
 * 50-58 against 41-43 (8 KiB records: level with 16 KiB up to 128 KiB, then slower).
 */
#define TMX_SOFT_RRESP_CHUNK 16384
/* Reads through the rings from TMX_SOFT_RD_LAP_MIN measure the target's copy mode
 * (tmx_soft_rd_mode), reads of at least TMX_SOFT_RD_MEASURE_MIN (four records) being the
 * ones that can be measured at all (below TMX_SOFT_RD_LAP_MIN, a stricter bound, every read
 * takes tmx_soft_rd_mode_small). With two records a read measured
 * only the gap between them: 32 KiB reads in a window gave 97-520 ps per byte for either mode
 * (steady 83), and ordinary stores taken on that ran at 2.3-6.1 GB/s against main's 11.8-12.3
 * (2026-11-27). A mode is measured only after a ring lap of it (the lap of a
 * ring of unknown size: TMX_SOFT_RD_LAP); the other mode is tried for a lap and a quarter
 * lap, at least TMX_SOFT_RD_PROBE_MEAS measured reads, once TMX_SOFT_RD_GAP laps were read
 * since the last try, twice as long after a try that lost clearly, up to TMX_SOFT_RD_GAP_MAX;
 * a try whose reads are not all measured ends after TMX_SOFT_RD_GAP laps. */
#define TMX_SOFT_RD_MEASURE_MIN (4 * TMX_SOFT_RRESP_CHUNK)
/* Below this size reads keep the choice made before (tmx_soft_rd_mode_small): one read of
 * each 128 the other way, measured from two records (TMX_SOFT_RD_SMALL_MIN) up; the laps are
 * not worth it there (32 KiB bandwidth 0.47 of it, 64 KiB 0.94-0.99, 2026-11-27). */
#define TMX_SOFT_RD_LAP_MIN     (8 * TMX_SOFT_RRESP_CHUNK)
#define TMX_SOFT_RD_SMALL_MIN   (2 * TMX_SOFT_RRESP_CHUNK)
#define TMX_SOFT_RD_PROBE       128
#define TMX_SOFT_RD_LAP         (2u << 20)
#define TMX_SOFT_RD_PROBE_MEAS  4
#define TMX_SOFT_RD_GAP         32
#define TMX_SOFT_RD_GAP_MAX     512
/* A SEND of one record from this size goes with ordinary or non-temporal stores, as its
 * writer measured (tmx_soft_tx_mode): every TMX_SOFT_TX_PROBE-th the other way; each one with
 * streaming stores, each probe and every TMX_SOFT_TX_SAMPLE-th of the others is timed. */
#define TMX_SOFT_TX_NT_MIN 2048
#define TMX_SOFT_TX_PROBE  128
#define TMX_SOFT_TX_SAMPLE 16

/* ---------------------------------------------------------------- shared memory (the wire) */

typedef struct tmx_soft_seg_hdr {
    uint64_t magic;
    uint32_t version;
    uint32_t uid;
    int32_t  pid;
    uint32_t max_mrs;
    uint32_t max_qps;
    uint32_t max_fast;   /* fast rings */
    uint64_t ring_size;  /* of a fast ring */
    uint64_t inbox_size;
    uint64_t map_addr; /* the owner's mapping address: peers read probe through CMA there */
    uint64_t probe;    /* random, also in the address blob: it tells this segment from another
                        * one of a process that got the same pid later; and a CMA read of it
                        * that returns the same value proves CMA */
    uint64_t mr_off;
    uint64_t inbox_off;  /* its control line; the ring follows */
    uint64_t ctrl_off;   /* per-QP control lines */
    uint64_t fctrl_off;  /* fast ring control lines */
    uint64_t rings_off;  /* fast rings */
    uint64_t total;
    uint64_t start_time; /* the owner's start time (clock ticks after boot), 0 if unknown */
    uint32_t data_order; /* TMX_SOFT_DIO_*: how RDMA writes into this device land (CMA) */
    uint32_t max_xs;     /* XRC stream lines (soft_xrc.c), at xs_off below */
    /* The wake line, alone in its cache line (offset 128) so that it stays shared in every
     * producer's cache: written only by the owner when it arms before a sleep, and by the one
     * producer that finds it armed and wakes it (tmx_soft_wake_peer). */
    _Atomic uint32_t armed;
    uint8_t          pad_wake[TMX_SOFT_LINE - 4];
    uint64_t         dm_off;  /* device memory (mem_alloc): peers write it with stores */
    uint64_t         dm_size; /* a multiple of the line, 0: none */
    uint64_t         xs_off;
    uint64_t         ring0_size; /* of the first fast ring (tmx_soft_ring), >= ring_size */
} tmx_soft_seg_hdr_t;

_Static_assert(offsetof(tmx_soft_seg_hdr_t, armed) == 2 * TMX_SOFT_LINE,
               "the wake line is the header's third line");

/*
 * ---------------------------------------------------------------- data-in-order (tmx_config(7))
 *
 * How the bytes of one RDMA write become visible to a CPU polling the target memory, as the
 * data-in-order query answers for the target's QP. A write is cut into pieces written one
 * after the other (each piece forward, in one copy):
 * - WHOLE: everything but the aligned 8 bytes that hold the last byte, then those: the last
 *   byte implies all earlier ones;
 * - ALIGNED128: the 128-byte aligned blocks (grouped into at most TMX_SOFT_SCRAMBLE_GROUPS
 *   runs of whole blocks), in a pseudo-random order, the last never last when there are two
 *   or more; each run written forward with its final aligned 8 bytes split off and written
 *   after the rest of the run;
 * - NONE (and any QP with OOO placement on): the bytes in at most TMX_SOFT_SCRAMBLE_GROUPS
 *   pieces of a multiple of 8 bytes, in a pseudo-random order, the last never last.
 * The values are TMX_SOFT_DATA_IN_ORDER's words (config.c).
 */
enum { TMX_SOFT_DIO_WHOLE = 0, TMX_SOFT_DIO_ALIGNED128 = 1, TMX_SOFT_DIO_NONE = 2 };

/* OOO placement: how long a WR overtaken by later ones (in the order the ordering table of
 * DESIGN.md allows without a fence) is held back, so that a missing fence shows. */
#define TMX_SOFT_OOO_HOLD_NS (5 * 1000 * 1000)

#define TMX_SOFT_SCRAMBLE_GROUPS 64
#define TMX_SOFT_MAX_PIECES      (2 * TMX_SOFT_SCRAMBLE_GROUPS)

typedef struct tmx_soft_piece {
    size_t off; /* from the start of the write */
    size_t len;
} tmx_soft_piece_t;

/* The pieces (at most TMX_SOFT_MAX_PIECES) a write of len bytes at addr is made of under mode
 * (TMX_SOFT_DIO_*), in the order they are written; *rng is the pseudo-random state. */
size_t tmx_soft_scramble_plan(unsigned mode, uint64_t addr, size_t len, uint64_t *rng,
                              tmx_soft_piece_t *out);

/* The next pseudo-random number of the state *s (xorshift64*; *s never 0). */
uint64_t tmx_soft_rand(uint64_t *s);

/* For tests: called after each piece of an RDMA write landed (the CMA path then writes one
 * piece per system call), with the target address and length of the piece. NULL: none. */
typedef void (*tmx_soft_write_hook_t)(void *arg, uint64_t addr, size_t len);
extern tmx_soft_write_hook_t tmx_soft_write_hook;
extern void                 *tmx_soft_write_hook_arg;

/* Registered memory, in the owner's segment so a CMA initiator checks the TARGET's table. */
typedef struct tmx_soft_mr_ent {
    _Atomic uint64_t addr;
    _Atomic uint64_t length;
    _Atomic uint32_t access;
    _Atomic uint32_t gen_valid; /* bit 8: valid, bits 0..7: generation of the key */
} tmx_soft_mr_ent_t;

/*
 * A control line, written by the segment's owner (the reader) unless said otherwise. The same
 * shape serves three uses:
 * - inbox: consumed; tail and lock written by the producers;
 * - a QP: gen, err_gen, and the fast ring grant;
 * - a fast ring: consumed.
 */
typedef struct tmx_soft_ring_ctrl {
    _Atomic uint64_t consumed;   /* published by the consumer now and then */
    _Atomic uint32_t gen;        /* QP: bumped when the slot is given to a new QP */
    _Atomic uint32_t err_gen;    /* QP: gen of a QP that refused a record and went to error */
    _Atomic uint64_t tail;       /* inbox: the shared producer position */
    _Atomic uint64_t lock;       /* inbox: the producer holding it (its lock_id), 0 free */
    _Atomic uint64_t grant;      /* QP: seq << 32 | fast ring + 1 (0: none), release store */
    _Atomic uint64_t grant_base; /* QP: the position the granted ring starts at */
    uint8_t          pad[TMX_SOFT_LINE - 48];
} tmx_soft_ring_ctrl_t;

enum tmx_soft_op {
    TMX_SOFT_OP_PAD   = 1, /* skip to the end of the ring */
    TMX_SOFT_OP_SEND  = 2, /* payload of a SEND (chunk) */
    TMX_SOFT_OP_WIMM  = 3, /* WRITE_WITH_IMM done by CMA: consume a receive, no data */
    TMX_SOFT_OP_WDATA = 4, /* fallback RDMA WRITE chunk */
    TMX_SOFT_OP_RREQ  = 5, /* fallback RDMA READ request */
    TMX_SOFT_OP_RRESP = 6, /* fallback READ response chunk */
    TMX_SOFT_OP_ACK   = 7, /* fallback WRITE done / READ or WRITE refused */
    TMX_SOFT_OP_UD    = 8, /* datagram in the inbox */
    TMX_SOFT_OP_SWITCH = 9, /* inbox: the sender changes paths (fast ring grant answered) */
    TMX_SOFT_OP_CLOSE = 10, /* XRC stream: its sender gave it up, nothing follows */
};

/* A record's dst with this bit names an XRC stream line (soft_xrc.c), not a QP's slot. */
#define TMX_SOFT_XRC_DST (1u << 31)

enum tmx_soft_rec_flags {
    TMX_SOFT_REC_FIRST = 1u << 0,
    TMX_SOFT_REC_LAST  = 1u << 1,
    TMX_SOFT_REC_IMM   = 1u << 2,
    TMX_SOFT_REC_NT    = 1u << 3, /* RREQ: answer with non-temporal stores (a hint) */
};

/* 32 bytes, so that an 8-byte SEND behind the core's 24-byte header fits in one line. */
typedef struct tmx_soft_rec {
    _Atomic uint64_t stamp;
    uint32_t         len;   /* payload bytes behind the header (and extension) */
    uint8_t          op;
    uint8_t          flags;
    uint16_t         pad;
    uint32_t         imm;
    uint32_t         seq;   /* RDMA: the initiator's work request sequence number;
                             * SWITCH: the grant sequence it answers */
    uint32_t         dst;   /* RC: the receiving QP's slot */
    uint32_t         gen;   /* RC: and its generation */
} tmx_soft_rec_t;

/* Follows tmx_soft_rec_t for WDATA, RREQ, RRESP, ACK, UD and SWITCH records. */
typedef struct tmx_soft_rec_ext {
    uint64_t raddr;  /* WDATA/RREQ: target address; RRESP: offset in the READ;
                      * SWITCH: where the records in the fast ring left end */
    uint64_t total;  /* RREQ: bytes to read; WDATA: bytes of the whole WRITE;
                      * SWITCH: the start of the fast ring taken */
    uint32_t rkey;   /* WDATA/RREQ; UD: source qp number; SWITCH: fast ring taken + 1 */
    uint32_t status; /* ACK: tmx_wc_status_t; UD: destination qp number;
                      * SWITCH: fast ring left + 1 */
} tmx_soft_rec_ext_t;

/* ---------------------------------------------------------------- process-local objects */

/* A peer's segment, mapped once per remote device and cached. */
typedef struct tmx_soft_rseg {
    tmx_list_t          list;
    char                name[TMX_SOFT_NAME_MAX];
    pid_t               pid;
    uint64_t            nonce;
    void               *base;
    size_t              size;
    tmx_soft_seg_hdr_t *hdr;   /* points at h: the peer cannot change it after the checks */
    tmx_soft_seg_hdr_t  h;     /* validated copy of the peer's header */
    int                 pidfd; /* the owner process, -1 where the kernel has no pidfd_open */
    int                 dead;  /* the owner was seen gone (it stays gone) */
    uint64_t            alive_ns; /* when it was last seen alive before a CMA operation */
    int                 refs;
    int                 cma; /* -1 not tried, 0 no, 1 yes */
    int                 watched;   /* its pidfd is in our channel's epoll set */
    struct tmx_soft_qp *fast_holder; /* our QP that holds a fast ring for this peer, if any */
    _Atomic uint32_t   *armed;     /* the peer's wake word, in its mapped header */
    struct sockaddr_un  wake_addr; /* the peer's wake socket (abstract name) */
    socklen_t           wake_len;
    uint64_t           *touched;   /* a bit per page of base read once (tmx_soft_rseg_touch) */
    unsigned            page_shift;
} tmx_soft_rseg_t;

/*
 * Before our first store into a page of a peer's segment (its inbox, its device memory), one
 * load from it. The first store into a page of our mapping is a page fault each (a write
 * fault maps that page only), while the first load is a read fault, which maps up to 16 pages
 * around it that the owner has made (the kernel's fault-around; writable, as the mapping is
 * shared and shmem needs no write notification). Senders to an inbox of 512 KiB took one fault
 * for nearly every record in their first lap of it (an all-to-all at 32 ranks: 39 faults per
 * rank and round, 1240 per round, taken under the inbox lock); the owner makes its inbox's
 * pages at creation (and its device memory when it lends it), so the first load maps 16 of
 * them at once. Only an optimization: a page not mapped when stored to faults as before.
 */
static inline void tmx_soft_rseg_touch(tmx_soft_rseg_t *r, const void *p, size_t len)
{
    size_t first, last;

    if (len == 0) {
        return;
    }
    first = (size_t)((const uint8_t *)p - (const uint8_t *)r->base) >> r->page_shift;
    last  = (size_t)((const uint8_t *)p + len - 1 - (const uint8_t *)r->base) >> r->page_shift;
    if (first == last && (r->touched[first / 64] & (1ull << (first % 64)))) {
        return; /* the common case, a write within a page loaded before: no loop */
    }
    for (size_t i = first; i <= last; i++) {
        if (!(r->touched[i / 64] & (1ull << (i % 64)))) {
            (void)*(volatile const uint8_t *)((const uint8_t *)r->base + (i << r->page_shift));
            r->touched[i / 64] |= 1ull << (i % 64);
        }
    }
}

struct tmx_soft_tm;

typedef struct tmx_soft_cq {
    tmx_cq_t  super;
    tmx_wc_t *wc;
    unsigned  cap;   /* a power of two, grows for local completions; draining stops at cqe */
    unsigned  head;
    unsigned  count;
    uint64_t  pushed; /* completions ever pushed: the position of the last one */
    uint64_t  popped; /* completions ever polled */
    struct tmx_soft_tm *tm; /* TM SRQs completing here (tmx_soft_tm_polled), NULL: none */
} tmx_soft_cq_t;

typedef struct tmx_soft_rwr {
    uint64_t  wr_id;
    int       num_sge;
    tmx_sge_t sge[TMX_SOFT_MAX_SGE];
} tmx_soft_rwr_t;

/* A receive queue (SRQ or a QP's own). */
typedef struct tmx_soft_rq {
    tmx_soft_rwr_t *wr;
    unsigned        size, head, count;
} tmx_soft_rq_t;

struct tmx_soft_xsrq;

typedef struct tmx_soft_srq {
    tmx_srq_t             super;
    tmx_soft_rq_t         rq;
    struct tmx_soft_tm   *tm;  /* TMX_SRQT_TM: the tag list, NULL for a basic SRQ */
    struct tmx_soft_xsrq *xrc; /* TMX_SRQT_XRC: its entry in the node's table (soft_xrc.c) */
    int                   inplace; /* TMX_SRQ_F_INPLACE */
} tmx_soft_srq_t;

/*
 * The TM SRQ (prov.h, "tag matching"). Entries live in a table indexed by handle (0 is no
 * handle); listed ones are linked in list order. An entry leaves the list when a message
 * consumes it or a DEL removes it, and its handle is free again only once every completion it
 * gave has been polled: each such completion, and each list op completion, leaves an event
 * {position in the CQ, handle} in a FIFO that tmx_soft_tm_polled retires as the CQ's popped
 * count passes it (handle 0: a list op completion, which ends an outstanding op; a failed DEL
 * leaves both).
 */
enum tmx_soft_tm_state {
    TMX_SOFT_TM_FREE     = 0,
    TMX_SOFT_TM_LISTED   = 1,
    TMX_SOFT_TM_CONSUMED = 2, /* a message took it: its completions are (being) given */
    TMX_SOFT_TM_RETIRING = 3, /* every completion given; free once they are polled */
};

typedef struct tmx_soft_tm_ent {
    uint64_t  tag, mask;
    uint64_t  recv_wr_id;
    uint64_t  del_wr_id; /* a DEL that came after a message consumed the entry */
    tmx_sge_t sge;
    int       num_sge;
    uint32_t  prev, next; /* list links (handles, 0: none) */
    uint8_t   state;
    uint8_t   eligible;   /* phase synchronization: may match */
    uint8_t   del;        /* a DEL was posted (after consumption: TM_ERR after the last
                           * receive completion) */
    uint8_t   match_sent; /* the MATCH completion went ahead of DATA_VALID */
    uint32_t  wcs;        /* its completions pushed and not polled yet */
} tmx_soft_tm_ent_t;

typedef struct tmx_soft_tm_ev {
    uint64_t pos;    /* the completion's position in the CQ (tmx_soft_cq_t.pushed) */
    uint32_t handle; /* 0: a list op completion */
} tmx_soft_tm_ev_t;

typedef struct tmx_soft_tm {
    struct tmx_soft_srq *srq;
    tmx_soft_cq_t       *cq;
    struct tmx_soft_tm  *cq_next;   /* other TM SRQs of the same CQ */
    tmx_soft_tm_ent_t   *ent;       /* by handle; ent[0] unused */
    uint32_t             ent_cap;   /* handles 1..ent_cap - 1 exist */
    uint32_t            *free;      /* FIFO of free handles (ring of ent_cap) */
    uint32_t             free_head, free_count;
    uint32_t             first, last; /* the list */
    unsigned             listed, max_tags, inelig;
    unsigned             max_ops, ops_out;
    uint16_t             uexp;      /* unexpected messages delivered (mod 2^16) */
    uint16_t             sw;        /* the count software last reported */
    unsigned             gap;       /* SYNC_REQ when uexp - sw exceeds it */
    tmx_soft_tm_ev_t    *ev;        /* FIFO of completion events, ring of ev_cap */
    unsigned             ev_head, ev_count, ev_cap;
} tmx_soft_tm_t;

typedef struct tmx_soft_mr {
    tmx_mr_t            super;
    unsigned            index;
    int                 dm;        /* from mem_alloc: its lines are given back at mem_free */
    struct tmx_soft_mr *next_free; /* dev->mr_free while deregistered */
} tmx_soft_mr_t;

typedef struct tmx_soft_ah {
    tmx_ah_t         super;
    tmx_soft_rseg_t *rseg;
} tmx_soft_ah_t;

enum tmx_soft_swr_state {
    TMX_SOFT_SWR_QUEUED = 0, /* not (fully) written to the ring yet */
    TMX_SOFT_SWR_WAIT   = 1, /* written; waiting for the target (fallback RDMA) */
    TMX_SOFT_SWR_DONE   = 2,
};

typedef struct tmx_soft_swr {
    uint64_t        wr_id;
    uint32_t        seq;
    tmx_wr_opcode_t opcode;
    unsigned        flags;
    int             signaled;
    int             state;
    tmx_wc_status_t status;
    uint32_t        imm;
    uint64_t        raddr;
    uint32_t        rkey;
    int             num_sge;
    tmx_sge_t       sge[TMX_SOFT_MAX_SGE];
    size_t          total;
    size_t          off;     /* bytes written to the ring (or received, for a READ) */
    void           *copy;    /* inline data kept while the WR waits in the queue */
    int             cma_done; /* WRITE_WITH_IMM: data written, its notice still to go */
    uint8_t         early;    /* OOO: fully written ahead of an earlier WR held back */
    uint8_t         tm_kind;  /* TMX_SOFT_TM_WR_*: the device's own WR on a TM QP */
    uint32_t        tm_handle; /* the entry it finishes */
    uint32_t        tm_len;    /* rendezvous length (the DATA_VALID byte_len) */
    uint8_t         nt;        /* READ through the rings: asked with TMX_SOFT_REC_NT */
    uint8_t         rd_warm;   /* and asked after a ring lap in that mode: measured */
    uint8_t         rd_small;  /* or below TMX_SOFT_RD_LAP_MIN: measured as such */
    size_t          first_len; /* READ through the rings: bytes of its first response */
    uint64_t        first_ns;  /* and when we took it */
} tmx_soft_swr_t;

/* WRs a TM QP's send queue carries for rendezvous offload (never the user's). */
enum {
    TMX_SOFT_TM_WR_NONE = 0,
    TMX_SOFT_TM_WR_READ = 1, /* reads the sender's data into the entry's buffer */
    TMX_SOFT_TM_WR_FIN  = 2, /* FENCEd behind it: the FIN, or the READ's failure */
};

/* A response the target owes its peer (fallback RDMA): an ACK or a READ being streamed. */
typedef struct tmx_soft_resp {
    uint32_t seq;
    uint32_t status;
    int      is_read;
    int      nt;    /* copy with non-temporal stores (the reader's TMX_SOFT_REC_NT) */
    uint64_t addr;  /* local address to read from */
    uint64_t total;
    uint64_t off;
} tmx_soft_resp_t;

typedef struct tmx_soft_dev tmx_soft_dev_t;

/* An inbox record kept aside for a QP that could not take it yet (tmx_soft_park). */
typedef struct tmx_soft_park {
    struct tmx_soft_park *next;
    uint64_t              bytes;
    uint8_t               rec[];
} tmx_soft_park_t;

struct tmx_soft_xqp;

typedef struct tmx_soft_qp {
    tmx_qp_t        super;
    tmx_soft_dev_t *dev;
    unsigned        index;     /* control line slot in the segment; TMX_SOFT_XRC_DST | line:
                                * an XRC stream's receiver (soft_xrc.c) */
    int             active;    /* position in dev->active + 1, 0 if not there */
    int             pending;   /* position in dev->pend + 1: has work for cq_poll */
    tmx_soft_rq_t   rq;
    int             sig_all;
    uint32_t        rma_gen;   /* bumped at reset: an rma_map made before is stale */
    uint32_t        max_inline;

    /* receiving side: records come from the inbox, or from a fast ring while one is lent */
    tmx_soft_ring_ctrl_t *my_ctrl;      /* our control line (gen, err_gen, grant) */
    uint32_t              my_gen;       /* what a record must name */
    uint32_t              grant_seq;    /* of the last grant word written */
    unsigned              rfast;        /* fast ring reserved for the peer + 1, 0 none */
    int                   revoking;     /* asked back, the peer's SWITCH not seen yet */
    int                   fast_on;      /* position in dev->fast_on + 1: ring being read */
    uint64_t              fast_base;    /* where the lent ring starts */
    uint64_t              in_stop;      /* the peer left the ring here (UINT64_MAX: not) */
    uint8_t              *in_ring;      /* the lent ring */
    uint64_t              in_size;
    tmx_soft_ring_ctrl_t *in_ctrl;
    uint64_t              in_head;
    uint64_t              in_published;
    uint64_t              rx_win;       /* traffic window of rx_recent */
    unsigned              rx_recent;    /* records received in that window */
    tmx_soft_park_t      *park, *park_tail; /* inbox records kept aside, in order */
    uint64_t              park_bytes;
    /* TM SRQ */
    tmx_soft_tm_t        *tm;      /* the TM SRQ's list when attached to one */
    int                   tm_qp;   /* a TM QP (max_send_wr 0): the device's send queue */
    int                   rx_tm;   /* TMX_SOFT_TM_RX_*: what the receive being assembled is */
    uint32_t              rx_handle;
    uint64_t              rx_tag;
    uint32_t              rx_ctx;
    /* receive being assembled from SEND chunks */
    int                   rx_busy;
    tmx_soft_rwr_t        rx_wr;
    uint64_t              rx_len;
    tmx_wc_status_t       rx_status;
    /* fallback WRITE whose chunks failed the key check: skip until its last chunk */
    uint32_t              wfail_seq;
    int                   wfail;

    /* sending side: the peer's inbox, or the fast ring it lent us */
    tmx_soft_rseg_t      *rseg;
    tmx_soft_ring_ctrl_t *peer_ctrl;    /* the peer QP's control line */
    uint32_t              remote_index;
    uint32_t              remote_qpn;
    uint32_t              out_gen;      /* generation of the peer QP when connected */
    uint64_t              out_grant;    /* the grant word last answered */
    unsigned              out_fast;     /* fast ring written + 1, 0: the inbox */
    uint8_t              *out_ring;
    uint64_t              out_size;
    tmx_soft_ring_ctrl_t *out_ctrl;
    uint64_t              out_tail;
    uint64_t              out_consumed; /* cached */
    uint64_t              ibx_tail;     /* inbox tail while its lock is held */
    int                   cma;
    size_t                cma_min;      /* RDMA this large goes by CMA (0 on an XRC route:
                                         * its target serves no RDMA through the rings) */
    uint64_t              rd_cost[2];   /* reads through the rings: ps per byte, moving
                                         * average, by ordinary [0] and streaming [1] stores
                                         * of the target (0: not measured yet) */
    uint64_t              rd_small_cost[2]; /* the same of reads below TMX_SOFT_RD_LAP_MIN */
    uint32_t              rd_small_count;   /* such reads measured or asked */
    uint64_t              rd_run;       /* bytes asked in the mode asked now since it was taken */
    uint64_t              rd_since;     /* bytes asked since the last try of the other mode */
    uint64_t              rd_reads[2];  /* reads through the rings by each mode (the log) */
    uint32_t              rd_gap;       /* laps between tries (TMX_SOFT_RD_GAP and up) */
    uint32_t              rd_probe_meas; /* measured reads of the try under way */
    uint32_t              rd_probe_asked; /* and those asked after its first lap */
    uint32_t              rd_probes;    /* tries of the other mode; those that it won */
    uint32_t              rd_switches;
    uint8_t               rd_plain;     /* the mode asked now: ordinary stores (0 streaming) */
    uint8_t               rd_probing;   /* the other mode is being tried (asked) */
    uint8_t               rd_pending;   /* a try asked, its measurements not all in */
    uint8_t               rd_tried;     /* the mode of that try (as rd_plain) */
    uint32_t              tx_count;     /* SENDs of one record from TMX_SOFT_TX_NT_MIN */
    uint64_t              tx_cost[2];   /* and what our copy into the ring cost (cycles per
                                         * KiB, moving average), with ordinary [0] and
                                         * streaming [1] stores */
    int                   ooo;          /* OOO placement enabled (at INIT -> RTR) */
    int                   in_post;      /* OOO: sq_progress called from post_send */
    int                   hold_on;      /* OOO: the WR of hold_seq is held back until */
    uint32_t              hold_seq;     /* hold_ns while later ones overtake it */
    uint64_t              hold_ns;
    /* XRC (soft_xrc.c): an initiator's or target's own state; a route (the initiator's path
     * to one remote SRQ, a QP of its own without a slot) names that SRQ */
    struct tmx_soft_xqp  *xrc;
    uint32_t              xrc_srqn;
    struct tmx_soft_xwatch *xrc_watch; /* a stream's claimant */

    /* send queue: entries complete in post order */
    tmx_soft_swr_t *sq;
    unsigned        sq_size, sq_head, sq_count; /* sq_size: the most it may hold */
    unsigned        sq_cap;    /* entries allocated: grows by doubling up to sq_size */
    uint32_t        head_seq;  /* seq of the entry at sq_head */
    uint32_t        tx_seq;    /* first entry not fully written to the ring */
    uint32_t        next_seq;  /* entry of seq s lives at sq[s % sq_cap] */

    tmx_soft_resp_t resp[TMX_SOFT_MAX_RESP];
    unsigned        resp_head, resp_count;
} tmx_soft_qp_t;

struct tmx_soft_dev {
    tmx_dev_t           super;
    const tmx_config_t *cfg;
    int                 fd;   /* the segment's memfd, kept open for peers; -1 when named */
    char                name[TMX_SOFT_NAME_MAX]; /* the named segment's, "" for a memfd */
    void               *base;
    size_t              size;
    tmx_soft_seg_hdr_t *hdr;
    tmx_soft_mr_ent_t  *mrs;
    tmx_soft_mr_t     **mr_objs;
    tmx_soft_mr_t      *mr_free;     /* deregistered objects, reused by the next mr_reg */
    unsigned            mr_hint;     /* no free mr_objs slot below this index */
    uint64_t            boot_hash;
    uint64_t            lock_id;     /* pid | start time << 32: this process in a lock word */
    size_t              max_payload; /* of one RC record */
    unsigned            data_order;  /* TMX_SOFT_DIO_* (TMX_SOFT_DATA_IN_ORDER) */
    uint64_t            rng;         /* scrambling and OOO choices (tmx_soft_rand) */
    uint8_t            *dm;          /* device memory (hdr->dm_off), NULL when none */
    uint64_t           *dm_map;      /* its lines: bit set = taken */
    size_t              dm_lines;
    size_t              dm_hint;     /* no free line below this one */
    size_t              dm_clean;    /* lines from here on were never given out: still zero */
    unsigned long       stat_ooo_qps; /* QPs that enabled OOO placement */

    tmx_soft_qp_t     **qps;     /* by control line slot */
    unsigned            qp_next; /* where the search for a free slot starts (next fit) */
    int                 qps_full_logged; /* the warning that every slot is taken was given */
    tmx_soft_qp_t     **active;  /* QPs in RTR/RTS: checked for their peer's life */
    unsigned            num_active;
    tmx_soft_qp_t     **pend;    /* QPs with queued sends, responses or kept records */
    unsigned            num_pend;
    tmx_soft_qp_t      *ud_qp;

    /* the inbox */
    uint8_t              *inbox;
    uint64_t              inbox_size;
    tmx_soft_ring_ctrl_t *inbox_ctrl;
    uint64_t              inbox_head;
    uint64_t              inbox_published;
    uint64_t              inbox_made; /* its pages made from the start (tmx_soft_inbox_make) */

    /* receives in place (tmx_soft_rx_send_whole): while a poll may hand out completions that
     * point into the rings, inplace_cq is the CQ it polls and inplace_budget how many it can
     * still return; once one was handed out, the rings' read positions are not published
     * (their records stay ours) until the next poll begins: inplace_hold */
    struct tmx_soft_cq   *inplace_cq;
    unsigned              inplace_budget;
    int                   inplace_hold;

    /* fast rings */
    tmx_soft_qp_t       **fast_owner; /* the QP each is lent for, NULL when free */
    uint64_t             *fast_pos;   /* where each starts when lent next */
    uint64_t             *fast_rest;  /* window before which each may not be lent again */
    tmx_soft_qp_t       **fast_on;    /* QPs whose lent ring is being read */
    unsigned              num_fast_on;
    unsigned              fast_next;  /* next fit, as for slots */
    uint64_t              win;        /* traffic window number */
    uint64_t              recs_win;   /* the window recs counts */
    uint64_t              recs;       /* records read from the inbox in it */
    uint64_t              win_ns;     /* when it started */
    int                   win_frozen; /* tests: the window never moves (counts per window
                                       * then do not depend on the machine's load) */
    uint64_t              reclaim_ns; /* last time an idle ring was asked back */
    unsigned long         stat_grants, stat_revokes;
    unsigned long         stat_pf_pages, stat_pf_loads; /* of the rings we were lent (prefault) */

    tmx_list_t          rsegs;
    unsigned            poll_count;
    unsigned            set_cap;     /* room of active and pend: QPs, XRC routes and streams */
    struct tmx_soft_xdev *xrc;       /* XRC objects (soft_xrc.c), NULL until the first */
    tmx_dev_stats_t     stats;       /* dev_query_stats; xrc_* kept by soft_xrc.c */
    unsigned            tm_inject[3];   /* TMX_SOFT_TM_INJECT: every Nth ADD, DEL, SYNC fails */
    unsigned            tm_posted[3];   /* ops of each kind that reached the injection */
    uint64_t            last_check_ns;

    /* Sleeping (completion channel): the channel's fd is a datagram socket bound to the
     * abstract name tmx_soft_wake_name gives our segment; wake_fd, an unbound one, sends the
     * wake datagrams to peers (-1 until the first). */
    tmx_comp_channel_t  channel;
    int                 channel_open;
    int                 asym;     /* registered for membarrier: tmx_soft_wake_peer */
    int                 wake_fd;
    int                 wake_sock; /* the bound socket; channel.fd is an epoll set of it
                                    * and of the mapped peers' pidfds */
};

/* Writes one zero byte per page of zeroed memory (from calloc) so that its pages exist now and
 * not at the first use of each on a message's path; a page fault there costs more than the
 * whole message (see tmx_soft_prefault). */
static inline void tmx_soft_touch(void *p, size_t len)
{
    for (size_t off = 0; p != NULL && off < len; off += 4096) {
        ((volatile uint8_t *)p)[off] = 0;
    }
}

/* soft_dev.c */
extern const tmx_prov_ops_t tmx_soft_ops;

/* The abstract socket name of a segment's wake socket, from its owner's uid, pid and probe:
 * it vanishes with the process, and another segment's cannot have it. */
void tmx_soft_wake_name(uint32_t uid, int32_t pid, uint64_t probe, struct sockaddr_un *sa,
                        socklen_t *len_p);
void tmx_soft_wake_send(tmx_soft_dev_t *dev, tmx_soft_rseg_t *rseg);
void tmx_soft_rseg_watch(tmx_soft_dev_t *dev, tmx_soft_rseg_t *r);

/* A full fence where it is checked; ThreadSanitizer neither models it (it checks races, not
 * store-load order: the words involved are atomics) nor, under gcc, accepts it. */
#if defined(__SANITIZE_THREAD__)
#define TMX_SOFT_FENCE() ((void)0)
#else
#define TMX_SOFT_FENCE() atomic_thread_fence(memory_order_seq_cst)
#endif

/* The acquire fence of a seqlock's reader (plain copies, then the word checked again); under
 * ThreadSanitizer (which gcc refuses the fence for, where it is inlined) a compiler barrier,
 * which on x86 -- loads are not reordered with loads -- is the same. */
#if defined(__SANITIZE_THREAD__)
#define TMX_SOFT_ACQUIRE_FENCE() atomic_signal_fence(memory_order_acquire)
#else
#define TMX_SOFT_ACQUIRE_FENCE() atomic_thread_fence(memory_order_acquire)
#endif

/* A release fence between the pieces of a write; under ThreadSanitizer (which gcc refuses the
 * fence for where it is inlined) a compiler barrier: the pieces' ends are release stores, which
 * is what ThreadSanitizer models. */
#if defined(__SANITIZE_THREAD__)
#define TMX_SOFT_RELEASE_FENCE() atomic_signal_fence(memory_order_release)
#else
#define TMX_SOFT_RELEASE_FENCE() atomic_thread_fence(memory_order_release)
#endif

/*
 * After publishing a record into a peer's ring: wakes the peer if it is about to sleep. The
 * peer arms (stores its armed word, a barrier, then looks at every ring it reads); we stored the
 * record's stamp, a barrier, then load the armed word: one of the two sees the other's store
 * (Dekker), so a record is never left behind a sleeping peer.
 *
 * The barrier is asymmetric where the kernel allows (dev->asym): the sleeper, which is rare
 * and about to sleep anyway, issues membarrier(MEMBARRIER_CMD_GLOBAL_EXPEDITED), which runs a
 * full barrier on every CPU running a registered process (every tmx process registers), and
 * the producer needs only a compiler barrier. A full fence here would wait for the stamp's
 * line to leave for the reader's cache at every record: measured, the 8-byte message rate
 * fell from 9-10 to 6-7 M/s with it. Without membarrier, both sides fence.
 */
static inline void tmx_soft_wake_peer(tmx_soft_dev_t *dev, tmx_soft_rseg_t *rseg)
{
    if (dev->asym) {
        atomic_signal_fence(memory_order_seq_cst);
    } else {
        TMX_SOFT_FENCE();
    }
    if (__builtin_expect(atomic_load_explicit(rseg->armed, memory_order_relaxed) != 0, 0)) {
        tmx_soft_wake_send(dev, rseg);
    }
}

/* The sleeper's side of the asymmetric barrier; 0 when it failed. */
int tmx_soft_membarrier(void);

tmx_soft_rseg_t *tmx_soft_rseg_get(tmx_soft_dev_t *dev, const void *addr, size_t len,
                                   tmx_status_t *status_p);
void tmx_soft_rseg_put(tmx_soft_dev_t *dev, tmx_soft_rseg_t *rseg);
void tmx_soft_inbox_make(tmx_soft_dev_t *dev);

/* The inbox's pages are made TMX_SOFT_INBOX_AHEAD bytes ahead of where we read, in its first
 * lap (tmx_soft_inbox_make), rather than whole when the device opens: tmpfs allocates a page
 * at its first touch, so a job whose inbox never laps keeps only what its senders wrote. */
#define TMX_SOFT_INBOX_AHEAD (32 * 1024)

/* After reading the inbox up to head: make the pages ahead, while its first lap lasts. */
static inline void tmx_soft_inbox_ahead(tmx_soft_dev_t *dev)
{
    if (__builtin_expect(dev->inbox_head + TMX_SOFT_INBOX_AHEAD > dev->inbox_made, 0)) {
        tmx_soft_inbox_make(dev);
    }
}
int tmx_soft_rseg_cma(tmx_soft_dev_t *dev, tmx_soft_rseg_t *rseg);
int tmx_soft_pid_dead(pid_t pid);
int tmx_soft_rseg_dead(tmx_soft_rseg_t *rseg);
int tmx_soft_lock_holder_dead(uint64_t lock_id);
/* 0 when [addr, addr+len) lies in a valid registration of key with the rights (inline: it
 * runs for every receive and every RDMA). */
static inline __attribute__((always_inline)) int tmx_soft_key_check(const tmx_soft_mr_ent_t *table, unsigned max,
                                     uint32_t key, uint64_t addr, uint64_t len, unsigned access)
{
    unsigned                 idx = key >> 8;
    const tmx_soft_mr_ent_t *e;
    uint64_t                 base, size;
    uint32_t                 gv;

    if (idx >= max) {
        return -1;
    }
    e    = &table[idx];
    gv   = atomic_load_explicit(&e->gen_valid, memory_order_acquire);
    base = atomic_load_explicit(&e->addr, memory_order_relaxed);
    size = atomic_load_explicit(&e->length, memory_order_relaxed);
    if (gv != (0x100u | (key & 0xffu))) {
        return -1;
    }
    /* Written so that no sum can overflow. */
    if (addr < base || addr - base > size || len > size - (addr - base)) {
        return -1;
    }
    if ((atomic_load_explicit(&e->access, memory_order_relaxed) & access) != access) {
        return -1;
    }
    return 0;
}

tmx_status_t tmx_soft_cq_grow_push(tmx_soft_cq_t *cq, const tmx_wc_t *wc);
/* The smallest power of two >= v (v >= 1). */
static inline unsigned tmx_soft_pow2u(unsigned v)
{
    unsigned p = 1;

    while (p < v) {
        p <<= 1;
    }
    return p;
}

static inline tmx_status_t tmx_soft_cq_push(tmx_soft_cq_t *cq, const tmx_wc_t *wc)
{
    cq->pushed++;
    if (cq->count == cq->cap) {
        return tmx_soft_cq_grow_push(cq, wc);
    }
    cq->wc[(cq->head + cq->count) & (cq->cap - 1)] = *wc;
    cq->count++;
    return TMX_OK;
}
static inline int tmx_soft_cq_has_room(tmx_cq_t *cq)
{
    tmx_soft_cq_t *c = (tmx_soft_cq_t *)cq;
    return c->count < (unsigned)c->super.cqe;
}
int tmx_soft_rq_pop(tmx_soft_rq_t *rq, tmx_soft_rwr_t *out);
/* Drops the receive at the head of a non-empty queue (the caller has used it in place). */
static inline void tmx_soft_rq_advance(tmx_soft_rq_t *rq)
{
    if (++rq->head == rq->size) {
        rq->head = 0;
    }
    rq->count--;
}
tmx_status_t tmx_soft_rq_post(tmx_soft_dev_t *dev, tmx_soft_rq_t *rq, tmx_recv_wr_t *wr,
                              tmx_recv_wr_t **bad_p);

static inline tmx_soft_ring_ctrl_t *tmx_soft_ctrl(void *base, const tmx_soft_seg_hdr_t *hdr,
                                                  unsigned index)
{
    return (tmx_soft_ring_ctrl_t *)((uint8_t *)base + hdr->ctrl_off) + index;
}

static inline tmx_soft_ring_ctrl_t *tmx_soft_fctrl(void *base, const tmx_soft_seg_hdr_t *hdr,
                                                   unsigned ring)
{
    return (tmx_soft_ring_ctrl_t *)((uint8_t *)base + hdr->fctrl_off) + ring;
}

/* The fast rings: the first of ring0_size bytes, lent first (tmx_soft_fast_grant), then
 * max_fast - 1 of ring_size. On this 2-core VM an 8 KiB ping-pong through a 2 MiB ring took
 * half the time it took through a 256 KiB one (0.67-0.95 vs 1.45-1.77 us): a ring larger than
 * the reader's cache is rewritten in lines the reader no longer holds, so the writer's stores
 * wait for no invalidation of the other core's copy. */
static inline uint8_t *tmx_soft_ring(void *base, const tmx_soft_seg_hdr_t *hdr, unsigned ring)
{
    return (uint8_t *)base + hdr->rings_off +
           (ring == 0 ? 0 : hdr->ring0_size + (size_t)(ring - 1) * hdr->ring_size);
}

static inline uint64_t tmx_soft_ring_bytes(const tmx_soft_seg_hdr_t *hdr, unsigned ring)
{
    return ring == 0 ? hdr->ring0_size : hdr->ring_size;
}

/* Bytes of max_fast fast rings, the first of ring0 bytes, the others of ring. */
static inline uint64_t tmx_soft_rings_span(unsigned max_fast, uint64_t ring0, uint64_t ring)
{
    return max_fast == 0 ? 0 : ring0 + (uint64_t)(max_fast - 1) * ring;
}

static inline uint64_t tmx_soft_rings_bytes(const tmx_soft_seg_hdr_t *hdr)
{
    return tmx_soft_rings_span(hdr->max_fast, hdr->ring0_size, hdr->ring_size);
}

static inline tmx_soft_ring_ctrl_t *tmx_soft_inbox_ctrl(void *base, const tmx_soft_seg_hdr_t *hdr)
{
    return (tmx_soft_ring_ctrl_t *)((uint8_t *)base + hdr->inbox_off);
}

/* soft_tm.c: the TM SRQ's list */
enum {
    TMX_SOFT_TM_RX_NONE = 0,
    TMX_SOFT_TM_RX_MATCHED, /* eager, into the entry's buffer */
    TMX_SOFT_TM_RX_RNDV,    /* rendezvous not offloaded, into the entry's buffer */
    TMX_SOFT_TM_RX_UNEXP,   /* tagged, into a plain buffer */
    TMX_SOFT_TM_RX_NO_TAG,  /* NO_TAG, FIN or no TMH, into a plain buffer */
};
#define TMX_SOFT_TM_MTU 4096 /* a matched payload above it completes twice */
tmx_status_t tmx_soft_tm_parse_inject(tmx_soft_dev_t *dev, const char *spec);
tmx_status_t tmx_soft_tm_create(tmx_soft_srq_t *srq, const tmx_srq_init_attr_t *attr);
void tmx_soft_tm_destroy(tmx_soft_srq_t *srq);
tmx_status_t tmx_soft_srq_post_ops(tmx_srq_t *srq, tmx_srq_op_t *op, tmx_srq_op_t **bad_p);
void tmx_soft_tm_polled(tmx_soft_cq_t *cq);
/* The first eligible entry in list order that tag matches; 0 when none. */
uint32_t tmx_soft_tm_match(tmx_soft_tm_t *tm, uint64_t tag);
/* Takes the entry off the list: a message consumed it. */
void tmx_soft_tm_consume(tmx_soft_tm_t *tm, uint32_t h);
/* Pushes a receive completion of the SRQ; with last, the entry's last one (h != 0). */
void tmx_soft_tm_complete(tmx_soft_tm_t *tm, uint32_t h, tmx_wc_t *wc, int last);
/* One more unexpected message delivered; the SYNC_REQ flag its completion carries. */
unsigned tmx_soft_tm_unexpected(tmx_soft_tm_t *tm);
unsigned tmx_soft_tm_sync_req(const tmx_soft_tm_t *tm);

/* soft_xrc.c: XRC domains, SRQs and queue pairs (see the file) */
tmx_status_t tmx_soft_xrcd_open(tmx_dev_t *dev, const tmx_xrcd_init_attr_t *attr,
                                tmx_xrcd_t **xrcd_p);
void tmx_soft_xrcd_close(tmx_xrcd_t *xrcd);
tmx_status_t tmx_soft_xrc_srq_init(tmx_soft_srq_t *srq, const tmx_srq_init_attr_t *attr);
void tmx_soft_xrc_srq_fini(tmx_soft_srq_t *srq);
tmx_status_t tmx_soft_srq_get_num(tmx_srq_t *srq, uint32_t *srqn_p);
tmx_status_t tmx_soft_xrc_tgt_create(tmx_pd_t *pd, const tmx_qp_init_attr_t *attr,
                                     tmx_qp_t **qp_p);
tmx_status_t tmx_soft_qp_open(tmx_pd_t *pd, const tmx_qp_open_attr_t *attr, tmx_qp_t **qp_p);
tmx_status_t tmx_soft_xrc_ini_init(tmx_soft_qp_t *qp);
tmx_status_t tmx_soft_xrc_modify(tmx_soft_qp_t *qp, const tmx_qp_attr_t *attr,
                                 unsigned attr_mask);
tmx_status_t tmx_soft_xrc_get_addr(tmx_soft_qp_t *qp, void *buf, size_t *len_p);
tmx_status_t tmx_soft_xrc_ini_post(tmx_soft_qp_t *qp, tmx_send_wr_t *wr, tmx_send_wr_t **bad_p);
/* The route a lone SEND on an initiator goes to when it is the last one used and nothing
 * needs the general path; NULL: take tmx_soft_xrc_ini_post. */
tmx_soft_qp_t *tmx_soft_xrc_route_hint(tmx_soft_qp_t *qp, const tmx_send_wr_t *wr);
void tmx_soft_xrc_qp_destroy(tmx_soft_qp_t *qp);
/* The receiver of the XRC stream line idx for a record of claim gen; NULL: drop the record. */
tmx_soft_qp_t *tmx_soft_xrc_stream(tmx_soft_dev_t *dev, uint32_t idx, uint32_t gen);
int tmx_soft_xrc_rx_close(tmx_soft_qp_t *qp);
void tmx_soft_xrc_check(tmx_soft_dev_t *dev);
void tmx_soft_xrc_dev_close(tmx_soft_dev_t *dev);
void tmx_soft_xrc_sweep(void);
/* Whether the device offers XRC under cfg: TMX_SOFT_XRC, and cross-memory attach allowed (an
 * XRC stream carries RDMA by it only). */
int tmx_soft_xrc_offered(const tmx_config_t *cfg);
/* soft_dev.c: the identity in a device address blob (TMX_OK when it is one) */
tmx_status_t tmx_soft_addr_owner(const void *addr, size_t len, pid_t *pid_p,
                                 uint64_t *start_p, uint64_t *boot_hash_p);

/* soft_qp.c */
/* For soft_xrc.c: a QP object without a slot (a route, a stream) leaves the device's sets and
 * gives back what it holds; its peer is not told. */
void tmx_soft_qp_release(tmx_soft_qp_t *qp);
void tmx_soft_qp_error(tmx_soft_qp_t *qp, tmx_wc_status_t status, int async);
void tmx_soft_qp_activate(tmx_soft_qp_t *qp);
/* A CLOSE record on the QP's path; 0 when there is no room. */
int tmx_soft_qp_send_close(tmx_soft_qp_t *qp);
/* The device address inside a QP blob (qp_get_addr of an RC or XRC_INI QP). */
tmx_status_t tmx_soft_qp_addr_dev(const void *blob, size_t len, const uint8_t **dev_p,
                                  size_t *dev_len_p);
tmx_status_t tmx_soft_qp_create(tmx_pd_t *pd, const tmx_qp_init_attr_t *attr, tmx_qp_t **qp_p);
void tmx_soft_qp_destroy(tmx_qp_t *qp);
tmx_status_t tmx_soft_qp_get_addr(tmx_qp_t *qp, void *buf, size_t *len_p);
tmx_status_t tmx_soft_qp_modify(tmx_qp_t *qp, const tmx_qp_attr_t *attr, unsigned attr_mask);
unsigned tmx_soft_qp_data_in_order(tmx_qp_t *qp, tmx_wr_opcode_t op);
tmx_status_t tmx_soft_post_send(tmx_qp_t *qp, tmx_send_wr_t *wr, tmx_send_wr_t **bad_p);
tmx_status_t tmx_soft_rma_map(tmx_qp_t *qp, uint64_t raddr, size_t len, uint32_t rkey,
                              tmx_rma_map_t *map);
tmx_status_t tmx_soft_rma_write(tmx_qp_t *qp, const tmx_rma_map_t *map, size_t off,
                                const void *src, size_t n, uint64_t wr_id);
tmx_status_t tmx_soft_rma_writev(tmx_qp_t *qp, const tmx_rma_map_t *map, size_t off,
                                 const tmx_sge_t *sge, int num_sge, uint64_t wr_id);
tmx_status_t tmx_soft_post_recv(tmx_qp_t *qp, tmx_recv_wr_t *wr, tmx_recv_wr_t **bad_p);
void tmx_soft_rx_arrivals(tmx_soft_dev_t *dev);
int tmx_soft_cq_poll(tmx_cq_t *cq, int n, tmx_wc_t *wc);
tmx_status_t tmx_soft_cq_req_notify(tmx_cq_t *cq, tmx_comp_channel_t *ch);
tmx_status_t tmx_soft_dev_addr_pack(tmx_soft_dev_t *dev, void *buf, size_t *len_p);

#endif /* TMX_PROV_SOFT_H */
