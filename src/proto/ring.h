/*
 * The eager-RDMA ring (doc/DESIGN.md, "Data-in-order and polling on data"): small eager
 * messages RDMA-written by the sender into slots of memory the receiver got from mem_alloc,
 * read by the receiver polling that memory (or, on a device with no data-in-order promise,
 * from the completion of an RDMA write with immediate). Slot layout: ring_slot.h.
 *
 * Who has what. A connection carries one sender's messages (the active endpoint) to one
 * receiver (the passive endpoint) and the receiver's replies back. The receiver lends a ring
 * (tmx_ring_rx_t, on its passive endpoint) once the sender has carried traffic, to at most
 * TMX_RING_PEERS senders; the sender writes it (tmx_ring_tx_t, on its active endpoint).
 *
 *   receiver: RING_GRANT {slots addr, rkey, slots, slot size, mode}          (queue)
 *   sender:   RING_ACK   {its control word's addr, rkey} or a refusal          (queue)
 *   sender:   ring messages, and queue messages as before                     (both)
 *   receiver: RDMA writes of its count taken and of asleep/awake into the
 *             sender's control block (two words on two lines)                 (no message)
 *
 * Mode: the receiver's choice at connect (tmx_ring_choose), from its queue pair's answer to
 * the data-in-order query, never polling on a queue pair with OOO placement (TMX_RING_MODE
 * forces one, for tests). The sender refuses a polling mode if its own queue pair has OOO
 * placement on.
 *
 * Order (MPI's non-overtaking). In the polling modes every message the sender posts from its
 * RING_ACK on carries a sequence number shared by both paths: a queue message in the
 * immediate data of a SEND_WITH_IMM, a ring message in its flag. The receiver takes a ring
 * message only when its number is the next one, and before a queue message it first takes
 * every ring message numbered before it: those were posted before it on the same queue pair,
 * so they are in its memory by the time the queue message completes. With IMM, ring messages
 * complete in the same completion queue as the rest, in order.
 *
 * Cells (WHOLE only). Next to its slots a ring has TMX_RING_CELLS_PER_SLOT 64-byte cells per
 * slot, all in a row after the slots (TMX_RING_CELL; the grant's last word says how many).
 * Position pos has cell pos % ncells and slot pos % slots. A message that fits a cell with
 * its flag (a 40-byte payload behind the 16-byte header) is written to its position's cell,
 * laid out as in a slot, with the marker of the cells' lap; a larger one to its slot. A
 * small message needs only its cell free (fewer than ncells positions outstanding), a large
 * one its slot (fewer than slots): a window of 64 small messages (osu_bw, tmx_pingpong -t
 * bw) fits a 32-slot ring without waiting for the receiver, which posts its receives
 * meanwhile. The reader looks at both
 * for the position's marker, the cell first. Small messages in a row then land in adjacent
 * lines, not one line per 2 KiB slot: where moving a line between the cores is slow, the
 * reader's cache fetches the next ones ahead (compare.sh 8 B rate). A cell or a slot not
 * written for 255 laps shows this lap's marker again: the reader takes only the one whose
 * sequence number is the next, and passes over one that is older.
 *
 * Spans (WHOLE, on a device that writes the ring in place: tx->mapped). A message that fills
 * more than three quarters of a slot (ring.c TMX_RING_FILL) but fits one takes two positions:
 * the first's slot holds only the flag word at its end (the header length's TMX_RING_SPAN bit
 * set), the message lies near the start of the next position's slot (ring_slot.h
 * tmx_ring_span_off: its payload on a line, its end on 8 bytes), and is written before the
 * flag (two in-place writes on one queue pair, the flag's stored with release). It never reaches the last 8 bytes of that slot, so the place the reader polls
 * there keeps an older lap's flag (passed over by its sequence number); the reader takes both
 * positions at once. Such a message sits behind a near-empty slot, as in a slot twice the size,
 * instead of filling its own (the full slot that lost to the queue), and costs no more of the
 * ring's memory. The next slot wraps to the ring's first with the positions, so nothing waits
 * at the ring's end; the sender needs both positions free, and takes the queue at once when
 * they are not (no TMX_RING_SPILL_NS wait). Only a send that follows a receive (the worker
 * received a message since the previous send of this size) takes a span: a stream of them
 * (osu_bw's window) went faster by the queue, whose copy streams better (tmx_pingpong -t bw
 * 2 KiB, fast phase: 6.4-8.8 GB/s by spans against 9.6-11.6 by the queue), while a
 * ping-pong's message waits for its reader, where the ring's shorter path counts (about 500
 * instructions fewer a 2 KiB message). The reader does not ask for a span's lines ahead
 * (tmx_prefetch_lines) and the soft device copies it with ordinary stores: with either, 2 KiB
 * came out slower than by the queue (bench/README.md "h-q2k").
 *
 * Credits. A slot is free again once the receiver has taken its message (matched, or copied
 * into an unexpected message); the receiver writes the count into the sender's control word
 * every half ring (of slots). With cells the sender may be up to ncells positions ahead, so
 * the count it takes may say that many are outstanding, not only a slot lap. A full ring, a
 * message too big for a slot, or a sleeping receiver sends by the queue instead, numbered
 * like the rest: nothing waits for a slot long. (A polling ring found full is waited for
 * up to TMX_RING_SPILL_NS first, the send pending: spilling at
 * once into the queue, whose messages cost the receiver more, let a sender that outran its
 * receiver by a ring keep it behind; 8 B tmx_pingpong -t bw fell from 110-150 to 23-30 MB/s
 * in about one run in three.) In the polling modes
 * the slots are a ring message's only flow control: it takes no eager credit (proto.h), so no
 * CREDIT message comes back through the queue for it. What eager credits also bound, the
 * receiver's memory, the slots bound instead: a ring message copied unexpected past the
 * budget (tmx_ep_t.ring_held) leaves its slot out of the count reported free until a receive
 * takes it, so a sender that floods a receiver that does not receive fills the ring and then
 * the queue's credits, and stops. With IMM a ring write consumes a posted receive like a
 * SEND, and takes an eager credit like one.
 *
 * Sleeping. A write into memory wakes nobody. Before it sleeps (tmx_ring_arm), a receiver
 * polling rings writes "asleep" into each sender's control word, waits for those writes to
 * complete (so they are in the senders' memory), then looks at its rings once more. A sender
 * looks at the word before a ring write (asleep: it uses the queue, which wakes) and again
 * after it, once the write is placed (at once on a TMX_DEV_CAP_MEM_DIRECT device with an
 * empty send queue, else at the write's completion): if asleep by then, it sends a CREDIT
 * through the queue, which wakes the receiver. One of the two sees the other (both look after
 * their own write is placed), so a ring message is never left behind a sleeper. The receiver
 * clears the word once messages reach it again.
 *
 * Taking a ring back. Rings are few (TMX_RING_PEERS); one lent to a sender that went quiet is
 * asked back when another sender has earned one and none is free: at most one ring at a time,
 * looked for at most once per TMX_RING_IDLE_NS, and only one whose receiver took no message
 * from it since the previous look (idle for a whole period).
 *
 *   receiver: RING_REVOKE                                                     (queue)
 *   sender:   stops writing the ring; RING_RETURN, numbered like the rest    (queue)
 *   receiver: takes the ring messages numbered before it (or, with IMM, they
 *             completed before it), frees the ring; RING_DONE                 (queue)
 *   sender:   frees its control word (the receiver writes it until RING_DONE)
 *
 * Until RING_RETURN the ring works as before (credits, sleep words), so a receiver may sleep
 * while the sender has not answered: a ring message written meanwhile wakes it as any other.
 * The sender may earn a ring again later, as at first. A ring lent to a sender that failed
 * (the connection was lost, answered or not) is freed at the next look, with no message.
 */
#ifndef TMX_PROTO_RING_H
#define TMX_PROTO_RING_H

#include <stdatomic.h>

#include "core/core.h"
#include "proto/ring_slot.h"
#include "util/copy.h"

/* Where the receiver's words lie in the sender's control block: apart, so that the sender's
 * look at the sleep word after every ring write reads a line the receiver seldom writes. */
#define TMX_RING_CREDIT_OFF 0
#define TMX_RING_SLEEP_OFF  64

/* How long a sender waits for a full polling ring's slots before its eager messages take the
 * queue ("Credits"). */
#define TMX_RING_SPILL_NS (100ull * 1000)

/* The receiver's side: the ring it lends a sender (on the passive endpoint). */
typedef struct tmx_ring_rx {
    tmx_ep_t  *ep;
    tmx_mr_t  *mr;         /* slots * slot_size bytes from mem_alloc */
    uint8_t   *base;
    unsigned   mode;       /* tmx_ring_mode_t */
    unsigned   slots, slots_log2;
    size_t     slot_size;
    uint64_t   head;       /* messages taken */
    /* the byte an idle poll looks at and the marker it waits for (tmx_ring_slot_ready of
     * head), kept up to date with head (tmx_ring_rx_aim): the poll of an idle ring is a load
     * and a compare */
    const uint8_t *poll_at;
    const uint8_t *poll_cell;  /* the position's cell's last byte (poll_at when no cells) */
    uint8_t    poll_marker;
    uint8_t    poll_cell_marker; /* the cell's (its laps are ncells positions long) */
    uint8_t   *cells;      /* WHOLE: ncells cells of TMX_RING_CELL bytes after the slots */
    unsigned   ncells, cells_log2; /* slots and slots_log2 when no cells */
    size_t     cell_step;  /* what poll_cell moves by: TMX_RING_CELL, or slot_size (none) */
    uint64_t   reported;   /* head last written into the sender's control word */
    int        report_due; /* that write found the send queue full: ep's progress retries
                            * it (tmx_ring_rx_report_retry) */
    uint32_t   expected;   /* polling modes: sequence number of the sender's next message */
    int        seq_seen;   /* a numbered queue message came: expected is valid */
    int        active;     /* the sender took it (RING_ACK) */
    int        polled;     /* in worker->ring_polled */
    int        revoking;   /* RING_REVOKE sent: taken back at the sender's RING_RETURN */
    uint64_t   idle_head;  /* head when the worker last looked for idle rings */
    int        sleep;      /* TMX_RING_SLEEP_*: what the sender's word says of our sleep */
    uint64_t   ctrl_addr;  /* the sender's control word */
    uint32_t   ctrl_rkey;
    int        ctrl_mapped; /* ctrl_map is the control block: credit reports by rma_write */
    tmx_rma_map_t ctrl_map;
    tmx_list_t link;       /* worker->ring_polled (active, polling modes) */
    uint8_t   *stage;      /* ALIGNED128: where a message is gathered (slot_size bytes) */
} tmx_ring_rx_t;

enum {
    TMX_RING_SLEEP_AWAKE  = 0, /* the word says awake (or will, once our write lands) */
    TMX_RING_SLEEP_POSTED = 1, /* "asleep" posted, its completion not seen */
    TMX_RING_SLEEP_PLACED = 2, /* "asleep" is in the sender's memory */
};

/* The sender's side: the ring a receiver lent us (on the active endpoint). */
typedef struct tmx_ring_tx {
    unsigned  mode;
    unsigned  slots, slots_log2;
    size_t    slot_size;
    size_t    max;         /* largest message (header and payload) a slot takes */
    size_t    span_max;    /* largest that takes two positions ("Spans"), max when none */
    uint64_t  span_rx;     /* the worker's rx_msgs at the last send of a span's size */
    uint64_t  addr;        /* the receiver's slots */
    uint64_t  cells;       /* and its cells (ring.h "Cells"), 0: none */
    unsigned  ncells, cells_log2; /* how many (slots and slots_log2 when none) */
    uint32_t  rkey;
    uint64_t  head;        /* messages written */
    uint8_t   marker;      /* tmx_ring_marker(head): it changes once a lap */
    uint8_t   cell_marker; /* the same for the cells, whose lap is ncells positions */
    uint64_t  consumed;    /* taken by the receiver, as its word last said */
    int       asleep;      /* and whether it sleeps */
    int       ready;       /* our RING_ACK is posted: ring messages may follow it */
    int       returning;   /* asked back: RING_RETURN sent, our word kept until RING_DONE */
    int       seq_on;      /* polling modes: every message carries a sequence number */
    uint64_t  caps;        /* the device's capabilities (read once, at the grant) */
    uint64_t  full_ns;     /* when the ring was found full, 0: it was not at the last try */
    uint32_t  seq;         /* the next one */
    tmx_mr_t *ctrl_mr;     /* our control word, written by the receiver */
    int       ctrl_host;   /* ctrl_mr from tmx_prov_host_mem_alloc, not the device */
    uint8_t  *stage;       /* ALIGNED128: a slot's image (slot_size bytes) */
    int       mapped;      /* map is the ring (slots and cells): small writes by rma_write */
    /* a plain EAGER of up to TMX_RING_CELL_PAYLOAD bytes may take tmx_ring_eager_try's short
     * path: mapped, cells, whole-message mode, a TMX_DEV_CAP_MEM_DIRECT device (set once, at
     * the grant; what can change is checked at every send) */
    int       cell_fast;
    int       asym;        /* TMX_DEV_CAP_MEM_ASYM: the receiver's barrier orders our stores */
    size_t    cells_off;   /* the cells' offset in map */
    tmx_rma_map_t map;
} tmx_ring_tx_t;

/* Connect: what the receiving side of ep would lend (ep->ring_choice), logged for passive
 * endpoints. Destroy: frees ep's ring state. */
void tmx_ring_ep_connected(tmx_ep_t *ep);
void tmx_ring_ep_cleanup(tmx_ep_t *ep);

/* Receiver: a polling ring's message that sat unexpected past the budget (its slot not
 * reported free) left the unexpected queue. */
void tmx_ring_rx_unheld(tmx_worker_t *w, uint64_t ep_id);
/* Receiver: an eager message came through the queue on passive ep (may lend a ring). */
void tmx_ring_rx_counted(tmx_ep_t *ep);
/* Receiver: before the queue message of wc on ep is handled, the ring messages numbered before
 * it are; then its number is the last one seen. -1 when ep failed meanwhile (drop it). */
int tmx_ring_rx_seq(tmx_ep_t *ep, const tmx_wc_t *wc);
/* Receiver: the credit report the send queue refused, posted again (from the endpoint's
 * pending progress); TMX_ERR_NO_RESOURCE while it still waits. */
tmx_status_t tmx_ring_rx_report_retry(tmx_ep_t *ep);
/* ep failed: its ring is no longer polled. */
void tmx_ring_ep_failed(tmx_ep_t *ep);
/* Receiver, IMM mode: a ring message's completion. */
void tmx_ring_rx_imm(tmx_ep_t *ep, const tmx_wc_t *wc);
/* Receiver: the sender's RING_ACK. Sender: the receiver's RING_GRANT. */
void tmx_ring_rx_ack(tmx_ep_t *ep, const uint8_t *buf, size_t len);
void tmx_ring_tx_grant(tmx_ep_t *ep, const uint8_t *buf, size_t len);
/* Taking a ring back from an idle sender ("Taking a ring back" above): the sender's side of
 * RING_REVOKE and RING_DONE, the receiver's of RING_RETURN. */
void tmx_ring_tx_revoke(tmx_ep_t *ep);
void tmx_ring_tx_done(tmx_ep_t *ep);
void tmx_ring_rx_return(tmx_ep_t *ep);
/* Posts a RING_GRANT or RING_ACK (status: ACK's refusal, 0 taken) for the control path of
 * eager.c; TMX_ERR_NO_RESOURCE when the wire is full. */
tmx_status_t tmx_ring_ctrl_post(tmx_ep_t *ep, uint8_t op, int32_t status);

/* Progress: takes what the polled rings hold; how many messages. Inline: an idle ring costs a
 * load and a compare (rx->poll_at); tmx_ring_poll_rx takes what a ready one holds. */
unsigned tmx_ring_poll_rx(tmx_ring_rx_t *rx);

static inline unsigned tmx_ring_poll(tmx_worker_t *w)
{
    tmx_list_t *l, *t;
    unsigned    n = 0;

    tmx_list_for_each_safe(l, t, &w->ring_polled) {
        tmx_ring_rx_t *rx = tmx_container_of(l, tmx_ring_rx_t, link);

        if (__atomic_load_n(rx->poll_cell, __ATOMIC_ACQUIRE) == rx->poll_cell_marker ||
            __atomic_load_n(rx->poll_at, __ATOMIC_ACQUIRE) == rx->poll_marker) {
            n += tmx_ring_poll_rx(rx);
        }
    }
    return n;
}

/* Sender: the message hdr (hlen bytes) + len bytes of buf through ep's ring. TMX_OK: written
 * (an eager send done); TMX_ERR_NO_RESOURCE: the queue must carry it (no ring, full, too big,
 * the receiver sleeps). */
tmx_status_t tmx_ring_send(tmx_ep_t *ep, const void *hdr, size_t hlen, const void *buf,
                           size_t len);

/* The payload of a plain EAGER that fits a cell with its header and flag. */
#define TMX_RING_CELL_PAYLOAD (TMX_RING_CELL - TMX_RING_FLAG - sizeof(tmx_proto_hdr_t))

/* The sender's short path's end: the receiver fell asleep before it saw our write (ring.h
 * "Sleeping"); sends the CREDIT that wakes it. */
void tmx_ring_tx_woke(tmx_ep_t *ep);

/* tmx_ring_send of a plain EAGER (header h) into its position's cell, when nothing but the
 * write itself is to do: tx->cell_fast, connected, the send queue empty, the cell free, the
 * receiver awake. The same bytes, checks and order as tmx_ring_send's, without its general
 * cases (callgrind, cg_small tmx-win 8 B: about 40 instructions a message fewer). TMX_OK:
 * written; TMX_ERR_NO_RESOURCE: tmx_ring_send decides. */
static inline tmx_status_t tmx_ring_send_cell(tmx_ep_t *ep, tmx_ring_tx_t *tx,
                                              const tmx_proto_hdr_t *h, const void *buf,
                                              size_t len)
{
    uint64_t img[TMX_RING_CELL / 8];
    size_t   n = sizeof(*h) + len + TMX_RING_FLAG;
    uint64_t flag;

    if (!tx->ready || ep->closing || ep->state != TMX_EP_CONNECTED || ep->sq_busy > 0 ||
        tx->head - tx->consumed >= tx->ncells || tx->asleep) {
        return TMX_ERR_NO_RESOURCE;
    }
    flag = tmx_ring_flag(tx->seq, sizeof(*h) + len, sizeof(*h), tx->cell_marker);
    memcpy(img, h, sizeof(*h));
    tmx_copy((uint8_t *)img + sizeof(*h), buf, len); /* inline, as tmx_ring_send's */
    memcpy((uint8_t *)img + sizeof(*h) + len, &flag, sizeof(flag));
    if (ep->iface->ops->rma_write(ep->qp, &tx->map,
                                  tx->cells_off + (size_t)(tx->head & (tx->ncells - 1)) *
                                                      TMX_RING_CELL + TMX_RING_CELL - n,
                                  img, n, TMX_WRID(TMX_WRID_RING_TX, ep->id)) != TMX_OK) {
        return TMX_ERR_NO_RESOURCE;
    }
    tx->head++;
    if ((tx->head & (tx->slots - 1)) == 0) {
        tx->marker      = tmx_ring_marker(tx->head, tx->slots_log2); /* a new lap */
        tx->cell_marker = tmx_ring_marker(tx->head, tx->cells_log2);
    }
    ep->worker->ring_stats.sent++;
    tx->seq++;
    /* the write is in place: did the receiver fall asleep before it looked? (tmx_ring_send) */
    if (tx->asym) {
        atomic_signal_fence(memory_order_seq_cst);
    } else {
#if defined(__SANITIZE_THREAD__)
        /* gcc refuses the full fence where it is inlined under ThreadSanitizer, which does
         * not model it (it checks races, not store-load order; soft.h TMX_SOFT_FENCE) */
        atomic_signal_fence(memory_order_seq_cst);
#else
        atomic_thread_fence(memory_order_seq_cst);
#endif
    }
    {
        uint64_t w = __atomic_load_n((const uint64_t *)((uint8_t *)tx->ctrl_mr->addr +
                                                         TMX_RING_SLEEP_OFF),
                                     __ATOMIC_ACQUIRE);
        uint32_t c;
        int      asleep;

        if (tmx_ring_credit_unpack(w, &c, &asleep) && asleep) {
            tx->asleep = 1;
            tmx_ring_tx_woke(ep);
        }
    }
    return TMX_OK;
}

/* tmx_proto_eager_try's first step, inline in the send call: a plain EAGER through a polling
 * ring, which takes no eager credit ("Credits"). TMX_OK: sent; TMX_ERR_NO_RESOURCE: not by
 * the ring (the queue may carry it). */
static inline tmx_status_t tmx_ring_eager_try(tmx_ep_t *ep, const void *buf, size_t len,
                                              uint64_t tag, uint64_t imm)
{
    tmx_proto_hdr_t h;
    unsigned        give = ep->credits_owed > 0xffff ? 0xffff : ep->credits_owed;

    h.op       = TMX_PROTO_EAGER;
    h.reserved = imm != 0 ? TMX_PROTO_HDR_IMM : 0;
    h.credits  = (uint16_t)give;
    h.status   = (int32_t)(uint32_t)imm;
    h.tag      = tag;
    if (!(len <= TMX_RING_CELL_PAYLOAD && ep->ring_tx->cell_fast &&
          tmx_ring_send_cell(ep, ep->ring_tx, &h, buf, len) == TMX_OK) &&
        tmx_ring_send(ep, &h, sizeof(h), buf, len) != TMX_OK) {
        return TMX_ERR_NO_RESOURCE;
    }
    ep->ctag_tx    = tag;
    ep->ctag_tx_ok = 1;
    ep->credits_owed -= give;
    return TMX_OK;
}

/* Sleeping: TMX_OK when every ring sender knows we sleep and no ring holds a message,
 * TMX_ERR_BUSY otherwise (poll, then arm again). Awake: messages reached us since. */
tmx_status_t tmx_ring_arm(tmx_worker_t *w);
void tmx_ring_awake(tmx_worker_t *w);

/* Completions of the ring's own work requests (TMX_WRID_RING_RX, _TX), and of the core's
 * signaled ones on an endpoint's queue pair (the send queue is empty when none is left). */
void tmx_ring_wc(tmx_iface_t *iface, const tmx_wc_t *wc);
void tmx_ring_sq_done(tmx_iface_t *iface, const tmx_wc_t *wc);

void tmx_ring_query(tmx_worker_t *w, tmx_ring_attr_t *attr);

#endif /* TMX_PROTO_RING_H */
