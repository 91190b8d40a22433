/*
 * The eager-RDMA ring: lending, writing, polling, credits and sleep (ring.h).
 */
#define TMX_LOG_SUBSYS "ring"
#include "config.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "proto/proto.h"
#include "proto/ring.h"
#include "util/copy.h"
#include "util/log.h"
#include "util/time.h"

/* Eager messages a sender carries through the queue before its receiver lends it a ring
 * (TMX_RING=auto): while the receiver has rings to spare, TMX_RING_AFTER_FREE; once every
 * ring is lent, TMX_RING_AFTER, and the sender waits for one taken back from an idle sender.
 * Lent at the 16th message whatever the spare rings, the grant (its memory's pages made,
 * GRANT and ACK) came in the middle of a short job's traffic: tmx_alltoall at 2 ranks, 10
 * timed rounds of about 1 us, had one round of 70 us. Lent at the second message, it still
 * came in the second and third all-to-all rounds at 8 ranks on 2 cores (1-8 ms and 0.3-0.5
 * ms against 0.15 later: 7 grants and 7 acks at each rank, with 4 ranks per core): at the
 * first, the setup is part of the first round, which the job's start pays anyway. A ring is
 * bounded memory (TMX_RING_PEERS of them at most), so one lent to a connection used once
 * costs no more than the bound, and is taken back when another sender earns it. */
#define TMX_RING_AFTER      16
#define TMX_RING_AFTER_FREE 1
/* Messages (header, payload and flag) up to this size are gathered into one piece before the
 * write (tmx_ring_send): payloads up to 488 bytes behind the 16-byte header. A copy of that
 * much on the stack costs less than the device's write of three pieces (callgrind, cg_small:
 * 128 B 1340 -> 1240 instructions a message, 256 B 1356 -> 1279). */
#define TMX_RING_SMALL 512
/* The first TMX_RING_FULL rings a worker lends have TMX_RING_SLOTS slots; while that many are
 * lent, another has a quarter of them (at least 8, or TMX_RING_SLOTS if fewer). The few busy
 * peers (a ping-pong's one, a pipeline's neighbours) keep the whole ring for their windows;
 * the rest of an all-to-all, one message per peer and round, needs few: at 64 ranks with
 * 1 KiB messages the eight rings of 32 slots (68 KiB each then, made when lent) were half of every
 * rank's shared memory (tmx_alltoall, Pss_Shmem). An oversubscribed worker lends only
 * quarter rings: its busy peers cannot stream to it faster than it gets a processor. */
#define TMX_RING_FULL 2
/* TMX_RING_FILL (whole mode): a message goes by its slot only while it fills at most three
 * quarters of it (header, payload and flag); a larger one takes the queue. A message that
 * fills its slot lies right behind the previous position's, and came out slower than by the
 * queue in every measurement (tmx_pingpong, alternating runs; the mechanism, perhaps the
 * reader's or the writer's prefetchers running into the next slot, is not established):
 * 2 KiB in the default 2176-byte slot, fast phase, latency 0.40-0.44 us against 0.36-0.42 by
 * the queue (7 of 8 rounds), bandwidth 6.8-7.4 against 11.3-14.9 GB/s (8 of 8); slow phase
 * 1.41-1.68 against 1.31-1.44 us, 1.77-1.84 against 1.89-2.07 GB/s (6 of 6 each). 1 KiB in a
 * full 1152-byte slot (TMX_RING_SLOT_SIZE=1k), slow phase: 0.97-1.04 us against 0.59-0.71 in
 * the half-empty default slot. 1.5 KiB (72% of the slot) kept its slot: latency 0.28-0.38 us
 * against 0.34-0.41 by the queue (fast phase, 6 of 6). So TMX_RING_SLOT_SIZE=2k carries
 * payloads up to about 1.6 KiB (MPI's 1 KiB with its header included); a larger message that
 * fits the slot (2 KiB, Open MPI's too) takes two positions instead (ring.h "Spans"), or the
 * queue; bench/README.md, "256 B to 2 KiB" and "h-q2k". */

/* Cells per slot (ring.h "Cells"): a small message's position is free again once the receiver
 * is fewer than slots * this many behind. With 32 slots, 128 cells (8 KiB): a 64-message window
 * of 8-byte sends fitted 32 positions badly (the sender spilled into pending requests while
 * the receiver posted its receives; TMX_RING_SLOTS=64 as a stand-in: tmx_pingpong -t bw 8 B,
 * fast phase, median of 10 rounds 117 -> 131 MB/s). */
#define TMX_RING_CELLS_PER_SLOT 4
/* Ring messages taken per ring per poll, so that one busy sender does not hold the others. */
#define TMX_RING_DRAIN 32
/* How often the lent rings are looked at for an idle one, when a sender waits for a ring and
 * none is free; a ring is idle when its receiver took nothing from it between two looks. */
#define TMX_RING_IDLE_NS (10ull * 1000 * 1000)

/* Refusals in RING_ACK's status. */
enum {
    TMX_RING_REFUSE_NONE    = 0,
    TMX_RING_REFUSE_BAD     = 1, /* a grant that makes no sense */
    TMX_RING_REFUSE_OOO     = 2, /* polling asked of a queue pair with OOO placement on */
    TMX_RING_REFUSE_NOMEM   = 3, /* no memory for the control word */
    TMX_RING_REFUSE_CONFIG  = 4, /* TMX_RING=no, tag-matching offload, already one */
};

static unsigned tmx_ring_log2(unsigned v)
{
    unsigned l = 0;

    while ((1u << l) < v) {
        l++;
    }
    return l;
}

static int tmx_ring_polling(unsigned mode)
{
    return mode == TMX_RING_MODE_WHOLE || mode == TMX_RING_MODE_ALIGNED128;
}

/* ---------------------------------------------------------------- the choice */

/* The mode of the ring ep's receiving side would lend, and why. */
static unsigned tmx_ring_choose(tmx_ep_t *ep, const char **why)
{
    const tmx_config_t *cfg   = &ep->worker->ctx->cfg;
    tmx_iface_t        *iface = ep->iface;
    unsigned            dio;

    if (cfg->ring == 0 || cfg->ring_peers == 0) {
        *why = cfg->ring == 0 ? "TMX_RING=no" : "TMX_RING_PEERS=0";
        return TMX_RING_MODE_NONE;
    }
    if (iface->tm_on) {
        *why = "tag-matching offload on: its device matches messages in their order";
        return TMX_RING_MODE_NONE;
    }
    if (ep->xrc) {
        *why = "XRC: a message's immediate data names its endpoint";
        return TMX_RING_MODE_NONE;
    }
    if (!(iface->dev->attr.caps & TMX_DEV_CAP_RMA) || cfg->ring_slot_size > iface->max_inline) {
        *why = "the device has no RDMA write of a slot's size";
        return TMX_RING_MODE_NONE;
    }
    if (cfg->ring_mode != TMX_RING_MODE_NONE) {
        if (ep->ooo && tmx_ring_polling((unsigned)cfg->ring_mode)) {
            *why = "TMX_RING_MODE asks for polling, but out-of-order placement is on";
            return TMX_RING_MODE_IMM;
        }
        *why = "forced by TMX_RING_MODE, whatever the device answers";
        return (unsigned)cfg->ring_mode;
    }
    if (ep->ooo) {
        *why = "out-of-order placement on: never polling on data";
        return TMX_RING_MODE_IMM;
    }
    dio = iface->ops->qp_data_in_order(ep->qp, TMX_WR_RDMA_WRITE);
    if (dio & TMX_DATA_IN_ORDER_WHOLE_MSG) {
        *why = "the device answers whole-message order";
        return TMX_RING_MODE_WHOLE;
    }
    if (dio & TMX_DATA_IN_ORDER_ALIGNED_128_BYTES) {
        *why = "the device answers 128-byte blocks in order";
        return TMX_RING_MODE_ALIGNED128;
    }
    *why = "the device gives no data-in-order promise";
    return TMX_RING_MODE_IMM;
}

void tmx_ring_ep_connected(tmx_ep_t *ep)
{
    const char *why = "";

    ep->ring_choice = (uint8_t)tmx_ring_choose(ep, &why);
    /* none to lend: the receive path does not count messages towards one (ring_tried) */
    ep->ring_tried = ep->ring_choice == TMX_RING_MODE_NONE;
    if (ep->passive) {
        tmx_info("endpoint from %016llx: eager-RDMA ring %s (%s)",
                 (unsigned long long)ep->remote_uuid, tmx_ring_mode_name(ep->ring_choice), why);
    }
}

/* ---------------------------------------------------------------- the receiver */

static void tmx_ring_rx_free(tmx_ep_t *ep)
{
    tmx_ring_rx_t *rx = ep->ring_rx;
    tmx_worker_t  *w  = ep->worker;

    if (rx == NULL) {
        return;
    }
    tmx_ring_ep_failed(ep);
    if (rx->revoking) {
        w->ring_revoking--;
    }
    if (rx->mr != NULL) {
        ep->iface->ops->mem_free(rx->mr);
    }
    free(rx->stage);
    free(rx);
    ep->ring_rx = NULL;
    w->rings_rx--;
}

void tmx_ring_ep_failed(tmx_ep_t *ep)
{
    tmx_ring_rx_t *rx = ep->ring_rx;

    if (rx == NULL || !rx->polled) {
        return;
    }
    tmx_list_del(&rx->link);
    rx->polled = 0;
    if (rx->sleep != TMX_RING_SLEEP_AWAKE) {
        rx->sleep = TMX_RING_SLEEP_AWAKE;
        ep->worker->ring_sleepers--;
    }
}

/* One word into the sender's control block: signaled (a sleep notice, whose completion says it
 * is placed) or not. TMX_OK when posted. */
static tmx_status_t tmx_ring_rx_write(tmx_ep_t *ep, tmx_ring_rx_t *rx, uint64_t off,
                                      uint64_t word, int signaled)
{
    tmx_sge_t     sge = {.addr = (uintptr_t)&word, .length = sizeof(word)};
    tmx_send_wr_t wr, *bad;
    tmx_status_t  status;

    if (ep->state != TMX_EP_CONNECTED || ep->qp == NULL || !rx->active) {
        return TMX_ERR_PEER_FAILED;
    }
    if (!signaled && rx->ctrl_mapped) {
        /* the same write without a work request (prov.h rma_write), as the sender's ring
         * writes: a credit report every half ring cost the receiver about 170 instructions */
        return ep->iface->ops->rma_write(ep->qp, &rx->ctrl_map, off, &word, sizeof(word),
                                         TMX_WRID(TMX_WRID_RING_RX, ep->id));
    }
    memset(&wr, 0, sizeof(wr));
    wr.wr_id            = TMX_WRID(TMX_WRID_RING_RX, ep->id);
    wr.sg_list          = &sge;
    wr.num_sge          = 1;
    wr.opcode           = TMX_WR_RDMA_WRITE;
    wr.send_flags       = TMX_SEND_INLINE | (signaled ? TMX_SEND_SIGNALED : 0);
    wr.rdma.remote_addr = rx->ctrl_addr + off;
    wr.rdma.rkey        = rx->ctrl_rkey;
    status = ep->iface->ops->post_send(ep->qp, &wr, &bad);
    if (status == TMX_OK && signaled) {
        ep->sq_busy++;
    }
    return status;
}

/* Slots the sender may count free: the messages we took, less those that sit unexpected past
 * the budget (a polling ring's messages take no eager credit: this bounds our memory). Never
 * less than what we reported before: a message held counts once it was taken, as before. */
static inline uint64_t tmx_ring_rx_freed(const tmx_ep_t *ep, const tmx_ring_rx_t *rx)
{
    uint64_t f = rx->head > ep->ring_held ? rx->head - ep->ring_held : 0;

    return f > rx->reported ? f : rx->reported;
}

/* The sender learns how many messages we took: its slots are free again. A send queue that is
 * full now makes the endpoint's progress try again: the sender, whose ring may be full, would
 * wait for this word for ever (its messages would all go through the queue, none through the
 * ring, whose next message is what would report again). */
static void tmx_ring_rx_report(tmx_ep_t *ep, tmx_ring_rx_t *rx)
{
    uint64_t     f = tmx_ring_rx_freed(ep, rx);
    tmx_status_t st;

    st = tmx_ring_rx_write(ep, rx, TMX_RING_CREDIT_OFF, tmx_ring_credit_pack(f, 0), 0);
    if (st == TMX_OK) {
        rx->reported   = f;
        rx->report_due = 0;
    } else if (st == TMX_ERR_NO_RESOURCE && !rx->report_due) {
        rx->report_due = 1;
        ep->worker->ring_stats.report_waits++;
        tmx_proto_ep_schedule(ep);
    }
}

void tmx_ring_rx_unheld(tmx_worker_t *w, uint64_t ep_id)
{
    tmx_ep_t      *ep = tmx_hash_get(&w->ep_by_id, ep_id);
    tmx_ring_rx_t *rx;

    if (ep == NULL || ep->ring_held == 0) {
        return;
    }
    ep->ring_held--;
    rx = ep->ring_rx;
    if (rx != NULL && rx->active && !rx->revoking && tmx_ring_rx_freed(ep, rx) > rx->reported) {
        tmx_ring_rx_report(ep, rx); /* the sender may wait for these slots (TMX_RING_SPILL_NS) */
    }
}

tmx_status_t tmx_ring_rx_report_retry(tmx_ep_t *ep)
{
    tmx_ring_rx_t *rx = ep->ring_rx;

    if (rx == NULL || !rx->report_due) {
        return TMX_OK;
    }
    if (!rx->active) {
        rx->report_due = 0;
        return TMX_OK;
    }
    tmx_ring_rx_report(ep, rx);
    return rx->report_due ? TMX_ERR_NO_RESOURCE : TMX_OK;
}

/* The sender's sleep word: asleep (signaled: its completion says it is in place) or awake. */
static tmx_status_t tmx_ring_rx_sleep(tmx_ep_t *ep, tmx_ring_rx_t *rx, int asleep)
{
    return tmx_ring_rx_write(ep, rx, TMX_RING_SLEEP_OFF, tmx_ring_credit_pack(0, asleep), asleep);
}

/* rx->head moved: where the next message's marker will show (rx->poll_at, poll_marker). */
static inline void tmx_ring_rx_aim(tmx_ring_rx_t *rx)
{
    rx->poll_at     = rx->base + (rx->head & (rx->slots - 1)) * rx->slot_size + rx->slot_size - 1;
    rx->poll_cell   = rx->cells == NULL ? rx->poll_at
                                        : rx->cells + (rx->head & (rx->ncells - 1)) * TMX_RING_CELL +
                                              TMX_RING_CELL - 1;
    rx->poll_marker = tmx_ring_marker(rx->head, rx->slots_log2);
    rx->poll_cell_marker = tmx_ring_marker(rx->head, rx->cells_log2);
}

/* The next position: head, and where its marker will show. */
static inline __attribute__((always_inline)) void tmx_ring_rx_advance(tmx_ring_rx_t *rx)
{
    rx->head++;
    if ((rx->head & (rx->slots - 1)) == 0) {
        tmx_ring_rx_aim(rx); /* a new lap: the first slot, the next marker */
    } else {
        rx->poll_at += rx->slot_size;
        rx->poll_cell += rx->cell_step;
    }
}

/* A message taken out of a slot: to the protocol (eager messages only come this way). Inline
 * in the drain loop: a call layer less per message. */
static inline __attribute__((always_inline)) int
tmx_ring_rx_deliver(tmx_ep_t *ep, tmx_ring_rx_t *rx, const uint8_t *msg, size_t len)
{
    tmx_worker_t *w = ep->worker;
    uint8_t       op;

    if (len < sizeof(tmx_proto_hdr_t) ||
        ((op = msg[0]) != TMX_PROTO_EAGER && op != TMX_PROTO_EAGER_SYNC)) {
        tmx_error("malformed ring message (%zu bytes) from %016llx: the connection fails", len,
                  (unsigned long long)ep->remote_uuid);
        tmx_ep_lost(ep, TMX_ERR_PEER_FAILED);
        return -1;
    }
    tmx_ring_rx_advance(rx);
    w->ring_stats.received++;
    ep->ring_rx_now = rx->mode != TMX_RING_MODE_IMM; /* no eager credit (ring.h "Credits") */
    tmx_proto_rx_ring(ep->iface, ep, msg, len);
    ep->ring_rx_now = 0;
    if (rx->head - rx->reported >= rx->slots / 2 && ep->ring_rx == rx &&
        tmx_ring_rx_freed(ep, rx) - rx->reported >= rx->slots / 2) {
        tmx_ring_rx_report(ep, rx);
    }
    return 0;
}

/* A flag with TMX_RING_SPAN (ring.h "Spans"), at position head, numbered next: the message
 * is in the next position's slot where tmx_ring_span_off puts it, short of that slot's flag
 * word (checked here: a hostile flag reads nothing outside the slot). Takes the flag's
 * position (the message's is taken on delivery) and points msg at the message; -1 when the
 * flag cannot be (the connection fails). */
static __attribute__((noinline)) int tmx_ring_rx_span(tmx_ep_t *ep, tmx_ring_rx_t *rx,
                                                      tmx_ring_msg_t *msg)
{
    size_t hlen = msg->hlen & (TMX_RING_SPAN - 1);
    size_t pad;

    if (rx->mode != TMX_RING_MODE_WHOLE || hlen == 0 || hlen > msg->len ||
        msg->len + 7 > rx->slot_size - TMX_RING_FLAG) {
        tmx_error("malformed ring span from %016llx (%zu bytes, header %zu): the connection "
                  "fails", (unsigned long long)ep->remote_uuid, msg->len, hlen);
        tmx_ep_lost(ep, TMX_ERR_PEER_FAILED);
        return -1;
    }
    pad = tmx_ring_span_off(hlen, msg->len - hlen, rx->slot_size);
    tmx_ring_rx_advance(rx);
    msg->hlen = hlen;
    msg->data = rx->poll_at + 1 - rx->slot_size + pad; /* poll_at: that slot's last byte */
    return 0;
}

/* Takes the ring's messages in order while they are there and numbered next, up to max;
 * how many. */
static unsigned tmx_ring_rx_drain(tmx_ep_t *ep, tmx_ring_rx_t *rx, unsigned max)
{
    unsigned n = 0;

    while (n < max) {
        tmx_ring_msg_t msg;
        int            rc;

        if (rx->mode == TMX_RING_MODE_WHOLE && rx->cells != NULL) {
            /* the position's cell, then its slot (ring.h "Cells"): the one whose number is
             * not older than the next one (the other may show this marker from 255 laps ago) */
            rc = tmx_ring_slot_read_whole(rx->poll_cell, rx->poll_cell_marker, TMX_RING_CELL,
                                          &msg);
            if (rc > 0 && (int32_t)(msg.seq - rx->expected) < 0) {
                rc = 0;
            }
            if (rc == 0) {
                rc = tmx_ring_slot_read_whole(rx->poll_at, rx->poll_marker, rx->slot_size, &msg);
                if (rc > 0 && (int32_t)(msg.seq - rx->expected) < 0) {
                    rc = 0;
                }
            }
        } else if (rx->mode == TMX_RING_MODE_WHOLE) {
            /* rx->poll_at is the slot's last byte, poll_marker this lap's (tmx_ring_rx_aim) */
            rc = tmx_ring_slot_read_whole(rx->poll_at, rx->poll_marker, rx->slot_size, &msg);
        } else {
            rc = tmx_ring_slot_read_any(rx->mode,
                                        rx->base + (rx->head & (rx->slots - 1)) * rx->slot_size,
                                        rx->slot_size, rx->slots_log2, rx->head, rx->stage,
                                        &msg);
        }
        if (rc == 0) {
            break;
        }
        if (rc < 0 || (int32_t)(msg.seq - rx->expected) < 0) {
            tmx_error("malformed ring slot from %016llx (sequence %u, expected %u): the "
                      "connection fails", (unsigned long long)ep->remote_uuid, msg.seq,
                      rx->expected);
            tmx_ep_lost(ep, TMX_ERR_PEER_FAILED);
            break;
        }
        if (msg.seq != rx->expected) {
            break; /* a queue message comes first: its completion is on its way */
        }
        rx->expected++;
        n++;
        if (__builtin_expect(msg.hlen >= TMX_RING_SPAN, 0)) {
            /* its lines not asked for ahead: a span's copy came out slower with that
             * (tmx_pingpong 2 KiB, ring.h "Spans") */
            if (tmx_ring_rx_span(ep, rx, &msg) != 0) {
                break;
            }
        } else if (msg.len > TMX_RING_CELL) {
            /* its other lines asked for now, all at once, so that they cross from
             * the sender's cache while the header is read and matched (tmx_prefetch_lines) */
            tmx_prefetch_lines(msg.data, msg.len);
        }
        if (tmx_ring_rx_deliver(ep, rx, msg.data, msg.len) != 0 || !rx->polled) {
            break;
        }
    }
    return n;
}

unsigned tmx_ring_poll_rx(tmx_ring_rx_t *rx)
{
    return tmx_ring_rx_drain(rx->ep, rx, TMX_RING_DRAIN);
}

int tmx_ring_rx_seq(tmx_ep_t *ep, const tmx_wc_t *wc)
{
    tmx_ring_rx_t *rx = ep->ring_rx;
    uint32_t       seq;

    if (!(wc->wc_flags & TMX_WC_WITH_IMM)) {
        if (rx->seq_seen && rx->polled) {
            tmx_warn("message without sequence number from %016llx, whose ring is polled: its "
                     "order with ring messages is lost", (unsigned long long)ep->remote_uuid);
        }
        return 0;
    }
    seq = wc->imm_data;
    if (rx->polled) {
        /* the ring messages posted before it are in our memory by now */
        while (rx->expected != seq && rx->polled && tmx_ring_rx_drain(ep, rx, UINT32_MAX) > 0) {
        }
        if (!rx->polled) {
            return -1; /* a bad slot failed the connection */
        }
        if (rx->expected != seq) {
            tmx_error("ring messages %u..%u of %016llx missing before its queued message %u: "
                      "the connection fails", rx->expected, seq - 1,
                      (unsigned long long)ep->remote_uuid, seq);
            tmx_ep_lost(ep, TMX_ERR_PEER_FAILED);
            return -1;
        }
    }
    rx->expected = seq + 1;
    rx->seq_seen = 1;
    return 0;
}

void tmx_ring_rx_imm(tmx_ep_t *ep, const tmx_wc_t *wc)
{
    tmx_ring_rx_t *rx = ep->ring_rx;

    if (rx == NULL || !rx->active || rx->mode != TMX_RING_MODE_IMM ||
        wc->imm_data != (uint32_t)(rx->head & (rx->slots - 1)) || wc->byte_len > rx->slot_size) {
        tmx_error("unexpected RDMA write with immediate data from %016llx: the connection fails",
                  (unsigned long long)ep->remote_uuid);
        tmx_ep_lost(ep, TMX_ERR_PEER_FAILED);
        return;
    }
    (void)tmx_ring_rx_deliver(ep, rx, rx->base + (size_t)wc->imm_data * rx->slot_size,
                              wc->byte_len);
}

/* Bytes of a slot in mode: TMX_RING_SLOT_SIZE bytes of payload behind the largest eager
 * header (sizeof(tmx_proto_sync_hdr_t)) with what the mode adds (flag, stamps), rounded up to
 * TMX_RING_BLOCK; so a 2 KiB message fits a slot of the default size (2176 bytes in whole
 * mode). The bare TMX_RING_SLOT_SIZE when the padded size is more than the device writes
 * inline or a grant may say. */
static size_t tmx_ring_slot_bytes(unsigned mode, size_t payload, size_t max_inline)
{
    size_t need = payload + sizeof(tmx_proto_sync_hdr_t);
    size_t s    = (need + TMX_RING_BLOCK - 1) / TMX_RING_BLOCK * TMX_RING_BLOCK;

    while (tmx_ring_slot_max(mode, s) < need && s <= 65536) {
        s += TMX_RING_BLOCK;
    }
    return s > max_inline || s > 65536 ? payload : s;
}

/*
 * Whether one more ring fits beside the worker's others in iface's registrations: a lent
 * ring's memory is a registration of the device (mem_alloc), and so is a sender's control
 * block, and neither is given back for a rendezvous buffer that finds none. Rings lent and
 * taken together keep to a quarter of the device's table (max_mr), so that the rest is left
 * to the worker's own buffers (3) and to rendezvous: with TMX_SOFT_MAX_MRS of 4 or 5, rings
 * took the last ones and a rendezvous send waited for ever for a registration.
 */
static int tmx_ring_mr_spare(const tmx_iface_t *iface, const tmx_worker_t *w)
{
    uint32_t max = iface->dev->attr.max_mr;

    return max == 0 || (uint64_t)w->rings_rx + w->rings_tx + 1 <= max / 4;
}

/* Lends ep's sender a ring. */
static void tmx_ring_grant(tmx_ep_t *ep)
{
    tmx_worker_t       *w   = ep->worker;
    const tmx_config_t *cfg = &w->ctx->cfg;
    tmx_ring_rx_t      *rx;
    tmx_status_t        status;

    ep->ring_tried = 1;
    if (!tmx_ring_mr_spare(ep->iface, w)) {
        tmx_debug("no eager-RDMA ring for %016llx: rings hold a quarter of device %s's "
                  "registrations (%u)", (unsigned long long)ep->remote_uuid,
                  ep->iface->dev->name, ep->iface->dev->attr.max_mr);
        return;
    }
    rx             = calloc(1, sizeof(*rx));
    if (rx == NULL) {
        return;
    }
    rx->ep         = ep;
    rx->mode       = ep->ring_choice;
    rx->slots      = cfg->ring_slots;
    if (w->rings_rx >= TMX_RING_FULL || w->ctx->oversubscribed) {
        rx->slots = cfg->ring_slots / 4 >= 8 ? cfg->ring_slots / 4
                                             : (cfg->ring_slots < 8 ? cfg->ring_slots : 8);
    }
    rx->slots_log2 = tmx_ring_log2(rx->slots);
    rx->slot_size  = tmx_ring_slot_bytes(rx->mode, cfg->ring_slot_size, ep->iface->max_inline);
    rx->idle_head  = UINT64_MAX; /* not idle at the first look: it has just begun */
    tmx_list_init(&rx->link);
    if (rx->mode == TMX_RING_MODE_ALIGNED128 && (rx->stage = malloc(rx->slot_size)) == NULL) {
        free(rx);
        return;
    }
    status = ep->iface->ops->mem_alloc(ep->iface->pd,
                                       (size_t)rx->slots * rx->slot_size +
                                           (rx->mode == TMX_RING_MODE_WHOLE
                                                ? (size_t)rx->slots * TMX_RING_CELLS_PER_SLOT *
                                                      TMX_RING_CELL
                                                : 0),
                                       TMX_ACCESS_LOCAL_WRITE | TMX_ACCESS_REMOTE_WRITE, &rx->mr);
    if (status != TMX_OK) {
        tmx_debug("no eager-RDMA ring for %016llx: its memory: %s",
                  (unsigned long long)ep->remote_uuid, tmx_status_string(status));
        free(rx->stage);
        free(rx);
        return;
    }
    rx->base       = rx->mr->addr;
    rx->cells      = rx->mode == TMX_RING_MODE_WHOLE ? rx->base + rx->slots * rx->slot_size : NULL;
    rx->cell_step  = rx->cells != NULL ? TMX_RING_CELL : rx->slot_size;
    rx->ncells     = rx->cells != NULL ? rx->slots * TMX_RING_CELLS_PER_SLOT : rx->slots;
    rx->cells_log2 = tmx_ring_log2(rx->ncells);
    tmx_ring_rx_aim(rx);
    ep->ring_rx = rx;
    w->rings_rx++;
    if (tmx_proto_send_ctrl(ep, TMX_PROTO_RING_GRANT, 0, (int32_t)rx->mode) != TMX_OK) {
        tmx_ring_rx_free(ep);
        return;
    }
    tmx_debug("eager-RDMA ring (%s, %u x %zu bytes) lent to %016llx",
              tmx_ring_mode_name(rx->mode), rx->slots, rx->slot_size,
              (unsigned long long)ep->remote_uuid);
}

/* Every ring is lent and a sender waits for one: asks back the ring of a sender that went
 * quiet (ring.h, "Taking a ring back"). */
static void tmx_ring_reclaim(tmx_worker_t *w)
{
    uint64_t    now    = tmx_time_ns();
    tmx_ep_t   *victim = NULL;
    tmx_list_t *l;

    if (now - w->ring_idle_ns < TMX_RING_IDLE_NS) {
        return;
    }
    w->ring_idle_ns = now;
    /* A ring lent to a peer that failed is ours again: nobody polls it (tmx_ring_ep_failed),
     * and a revoke it never answered ends here. Freed now rather than where the failure is
     * found, which may be inside a drain of that very ring. */
    tmx_list_for_each(l, &w->eps) {
        tmx_ep_t *ep = tmx_container_of(l, tmx_ep_t, list);

        if (ep->passive && ep->ring_rx != NULL && ep->state == TMX_EP_FAILED) {
            tmx_debug("eager-RDMA ring of failed peer %016llx taken back",
                      (unsigned long long)ep->remote_uuid);
            tmx_ring_rx_free(ep);
        }
    }
    if (w->ring_revoking > 0 || w->rings_rx < w->ctx->cfg.ring_peers) {
        return;
    }
    tmx_list_for_each(l, &w->eps) {
        tmx_ep_t      *ep = tmx_container_of(l, tmx_ep_t, list);
        tmx_ring_rx_t *rx = ep->ring_rx;

        if (!ep->passive || rx == NULL || !rx->active || rx->revoking) {
            continue;
        }
        if (victim == NULL && rx->head == rx->idle_head && ep->state == TMX_EP_CONNECTED &&
            !ep->closing) {
            victim = ep;
        }
        rx->idle_head = rx->head;
    }
    if (victim == NULL) {
        return;
    }
    victim->ring_rx->revoking = 1;
    w->ring_revoking++;
    tmx_debug("eager-RDMA ring of %016llx asked back: idle, and another sender waits",
              (unsigned long long)victim->remote_uuid);
    tmx_proto_send_ctrl(victim, TMX_PROTO_RING_REVOKE, 0, 0);
}

void tmx_ring_rx_counted(tmx_ep_t *ep)
{
    tmx_worker_t *w     = ep->worker;
    unsigned      after = TMX_RING_AFTER;

    if (w->ctx->cfg.ring == 1) {
        after = 1;
    } else if (w->rings_rx < w->ctx->cfg.ring_peers) {
        after = TMX_RING_AFTER_FREE;
    }
    if (++ep->ring_msgs < after ||
        ep->ring_choice == TMX_RING_MODE_NONE || ep->state != TMX_EP_CONNECTED || ep->xrc ||
        ep->closing) {
        return;
    }
    if (w->rings_rx >= w->ctx->cfg.ring_peers && (ep->ring_msgs & 15) == 0) {
        /* every 16th: a sender without a ring reads no clock per message */
        tmx_ring_reclaim(w);
    }
    if (w->rings_rx < w->ctx->cfg.ring_peers) {
        tmx_ring_grant(ep);
    }
}

void tmx_ring_rx_return(tmx_ep_t *ep)
{
    tmx_ring_rx_t *rx = ep->ring_rx;

    if (!ep->passive || rx == NULL || !rx->revoking) {
        tmx_warn("unexpected RING_RETURN from %016llx dropped",
                 (unsigned long long)ep->remote_uuid);
        return;
    }
    /* its ring messages are all taken: numbered before it (tmx_ring_rx_seq took them first),
     * or, with IMM, completed before it */
    tmx_ring_rx_free(ep);
    ep->poll_data  = 0;
    ep->ring_tried = 0; /* it may earn one again */
    ep->ring_msgs  = 0;
    tmx_proto_send_ctrl(ep, TMX_PROTO_RING_DONE, 0, 0);
    tmx_debug("eager-RDMA ring of %016llx taken back", (unsigned long long)ep->remote_uuid);
}

void tmx_ring_rx_ack(tmx_ep_t *ep, const uint8_t *buf, size_t len)
{
    tmx_ring_rx_t       *rx = ep->ring_rx;
    tmx_proto_ring_hdr_t h;

    if (len < sizeof(h) || rx == NULL || rx->active || !ep->passive) {
        tmx_warn("unexpected RING_ACK from %016llx dropped", (unsigned long long)ep->remote_uuid);
        return;
    }
    memcpy(&h, buf, sizeof(h));
    if (h.base.status != TMX_RING_REFUSE_NONE) {
        tmx_info("%016llx refused the eager-RDMA ring (reason %d)",
                 (unsigned long long)ep->remote_uuid, (int)h.base.status);
        tmx_ring_rx_free(ep);
        return;
    }
    if (tmx_ring_polling(rx->mode) && !rx->seq_seen) {
        tmx_error("%016llx took the eager-RDMA ring without numbering its messages: the "
                  "connection fails", (unsigned long long)ep->remote_uuid);
        tmx_ep_lost(ep, TMX_ERR_PEER_FAILED);
        return;
    }
    rx->ctrl_addr = h.addr;
    rx->ctrl_rkey = h.rkey;
    rx->active    = 1;
    /* a device that writes a word without a work request: the control block checked once */
    rx->ctrl_mapped = rx->mode == TMX_RING_MODE_WHOLE &&
                      (ep->iface->dev->attr.caps & TMX_DEV_CAP_MEM_DIRECT) &&
                      ep->iface->ops->rma_map != NULL && ep->iface->ops->rma_write != NULL &&
                      ep->iface->ops->rma_map(ep->qp, rx->ctrl_addr, TMX_RING_BLOCK,
                                              rx->ctrl_rkey, &rx->ctrl_map) == TMX_OK;
    if (tmx_ring_polling(rx->mode)) {
        ep->poll_data = 1;
        if (tmx_ep_data_path_check(ep) != TMX_OK) {
            tmx_ep_lost(ep, TMX_ERR_PEER_FAILED);
            return;
        }
        tmx_list_add_tail(&ep->worker->ring_polled, &rx->link);
        rx->polled = 1;
    }
    tmx_debug("eager-RDMA ring of %016llx in use", (unsigned long long)ep->remote_uuid);
}

/* ---------------------------------------------------------------- the sender */

static void tmx_ring_tx_free(tmx_ep_t *ep)
{
    tmx_ring_tx_t *tx = ep->ring_tx;

    if (tx == NULL) {
        return;
    }
    if (tx->ctrl_mr != NULL) {
        if (tx->ctrl_host) {
            tmx_prov_host_mem_free(tx->ctrl_mr);
        } else {
            ep->iface->ops->mem_free(tx->ctrl_mr);
        }
    }
    free(tx->stage);
    free(tx);
    ep->ring_tx = NULL;
    ep->worker->rings_tx--;
}

/* Reads the receiver's credit word: messages taken. */
static inline void tmx_ring_tx_credits(tmx_ring_tx_t *tx)
{
    uint64_t w = __atomic_load_n((const uint64_t *)((uint8_t *)tx->ctrl_mr->addr +
                                                     TMX_RING_CREDIT_OFF),
                                 __ATOMIC_ACQUIRE);
    uint32_t c;
    int      asleep;

    if (tmx_ring_credit_unpack(w, &c, &asleep)) {
        uint32_t out = (uint32_t)tx->head - c;

        /* else nonsense, or a count older than one we saw (on a queue pair with OOO
         * placement, the receiver's writes may land out of order): keep what we knew. Up to
         * ncells may be outstanding, not only slots (ring.h "Cells"): bounded by the slots,
         * a count that showed the receiver more than a slot lap behind was dropped as
         * nonsense, so a stream of small messages met a full ring (its cells all taken as
         * far as the sender knew) about once in every two osu_bw windows of 64, and waited
         * there until the receiver came within the slots (mpi_fi.sh 8 B: 56 "ring full" in
         * 7042 messages, 7042 / 128 = 55). */
        if (out <= tx->ncells && tx->head - out >= tx->consumed) {
            tx->consumed = tx->head - out;
        }
    }
}

/* Reads the receiver's sleep word. */
static inline void tmx_ring_tx_sleep(tmx_ring_tx_t *tx)
{
    uint64_t w = __atomic_load_n((const uint64_t *)((uint8_t *)tx->ctrl_mr->addr +
                                                     TMX_RING_SLEEP_OFF),
                                 __ATOMIC_ACQUIRE);
    uint32_t c;
    int      asleep;

    if (tmx_ring_credit_unpack(w, &c, &asleep)) {
        tx->asleep = asleep;
    }
}

static unsigned tmx_ring_refusal(tmx_ep_t *ep, const tmx_proto_ring_hdr_t *h)
{
    const tmx_config_t *cfg = &ep->worker->ctx->cfg;
    unsigned            mode = (unsigned)h->base.status;

    if (ep->passive || ep->ring_tx != NULL || cfg->ring == 0 || ep->iface->tm_on || ep->xrc ||
        ep->state != TMX_EP_CONNECTED || ep->closing) {
        return TMX_RING_REFUSE_CONFIG;
    }
    if (mode == TMX_RING_MODE_NONE || mode >= TMX_RING_MODE_LAST || h->slots < 2 ||
        h->slots > 65536 || (h->slots & (h->slots - 1)) != 0 || h->slot_size < 128 ||
        h->slot_size > 65536 || h->slot_size % TMX_RING_BLOCK != 0 ||
        h->slot_size > ep->iface->max_inline ||
        (h->reserved != 0 && (h->reserved < h->slots || h->reserved > 65536 ||
                              (h->reserved & (h->reserved - 1)) != 0 ||
                              mode != TMX_RING_MODE_WHOLE))) {
        return TMX_RING_REFUSE_BAD;
    }
    if (tmx_ring_polling(mode) && ep->ooo) {
        return TMX_RING_REFUSE_OOO;
    }
    if (!tmx_ring_mr_spare(ep->iface, ep->worker)) {
        return TMX_RING_REFUSE_NOMEM; /* its control block would be one registration too many */
    }
    return TMX_RING_REFUSE_NONE;
}

void tmx_ring_tx_grant(tmx_ep_t *ep, const uint8_t *buf, size_t len)
{
    tmx_iface_t         *iface = ep->iface;
    tmx_proto_ring_hdr_t h;
    tmx_ring_tx_t       *tx;
    unsigned             refuse;

    if (len < sizeof(h)) {
        tmx_warn("malformed RING_GRANT from %016llx dropped", (unsigned long long)ep->remote_uuid);
        return;
    }
    memcpy(&h, buf, sizeof(h));
    refuse = tmx_ring_refusal(ep, &h);
    tx     = refuse == TMX_RING_REFUSE_NONE ? calloc(1, sizeof(*tx)) : NULL;
    if (tx == NULL) {
        goto refused;
    }
    tx->mode       = (unsigned)h.base.status;
    tx->slots      = h.slots;
    tx->slots_log2 = tmx_ring_log2(tx->slots);
    tx->marker     = tmx_ring_marker(0, tx->slots_log2);
    tx->slot_size  = h.slot_size;
    tx->max        = tmx_ring_slot_max(tx->mode, tx->slot_size);
    if (tx->mode == TMX_RING_MODE_WHOLE && tx->max > tx->slot_size / 4 * 3) {
        tx->max = tx->slot_size / 4 * 3; /* TMX_RING_FILL */
    }
    tx->span_max   = tx->max;
    tx->addr       = h.addr;
    tx->cells      = h.reserved != 0 ? h.addr + (uint64_t)h.slots * h.slot_size : 0;
    tx->ncells     = h.reserved != 0 ? h.reserved : h.slots;
    tx->cells_log2 = tmx_ring_log2(tx->ncells);
    tx->cell_marker = tmx_ring_marker(0, tx->cells_log2);
    tx->rkey       = h.rkey;
    tx->seq_on     = tmx_ring_polling(tx->mode);
    tx->caps       = iface->dev->attr.caps;
    if ((tx->mode == TMX_RING_MODE_ALIGNED128 && (tx->stage = malloc(tx->slot_size)) == NULL) ||
        (iface->ops->mem_alloc(iface->pd, TMX_RING_BLOCK,
                               TMX_ACCESS_LOCAL_WRITE | TMX_ACCESS_REMOTE_WRITE,
                               &tx->ctrl_mr) != TMX_OK &&
         (tx->ctrl_host = 1,
          tmx_prov_host_mem_alloc(iface->pd, TMX_RING_BLOCK,
                                  TMX_ACCESS_LOCAL_WRITE | TMX_ACCESS_REMOTE_WRITE,
                                  &tx->ctrl_mr) != TMX_OK))) {
        free(tx->stage);
        free(tx);
        refuse = TMX_RING_REFUSE_NOMEM;
        goto refused;
    }
    /* a device that lets us write the ring's small messages without a work request each
     * (prov.h rma_map): the checks of the region once, here */
    tx->mapped = tx->mode == TMX_RING_MODE_WHOLE && (tx->caps & TMX_DEV_CAP_MEM_DIRECT) &&
                 iface->ops->rma_map != NULL &&
                 iface->ops->rma_write != NULL &&
                 iface->ops->rma_map(ep->qp, tx->addr,
                                     (size_t)tx->slots * tx->slot_size +
                                         (tx->cells != 0 ? (size_t)tx->ncells * TMX_RING_CELL : 0),
                                     tx->rkey, &tx->map) == TMX_OK;
    tx->cell_fast = tx->mapped && tx->cells != 0;
    if (tx->mapped && iface->ops->rma_writev != NULL) {
        /* ring.h "Spans": the message and its padding short of the next slot's flag word */
        tx->span_max = tx->slot_size - TMX_RING_FLAG - 7;
    }
    tx->asym      = (tx->caps & TMX_DEV_CAP_MEM_ASYM) != 0;
    tx->cells_off = tx->cells != 0 ? (size_t)(tx->cells - tx->addr) : 0;
    ep->ring_tx = tx;
    ep->worker->rings_tx++;
    if (tx->seq_on) {
        ep->poll_data = 1;
        if (tmx_ep_data_path_check(ep) != TMX_OK) {
            ep->poll_data = 0;
            tmx_ring_tx_free(ep);
            refuse = TMX_RING_REFUSE_OOO;
            goto refused;
        }
    }
    /* RING_ACK is the first numbered message; the ring is used once it is posted */
    tmx_proto_send_ctrl(ep, TMX_PROTO_RING_ACK, 0, TMX_RING_REFUSE_NONE);
    tmx_info("endpoint to %016llx: eager-RDMA ring %s (%u x %u bytes, messages up to %zu "
             "bytes)", (unsigned long long)ep->remote_uuid, tmx_ring_mode_name(tx->mode),
             tx->slots, h.slot_size, tx->max);
    return;

refused:
    tmx_info("endpoint to %016llx: eager-RDMA ring refused (reason %u)",
             (unsigned long long)ep->remote_uuid, refuse);
    tmx_proto_send_ctrl(ep, TMX_PROTO_RING_ACK, 0, (int32_t)refuse);
}

void tmx_ring_tx_revoke(tmx_ep_t *ep)
{
    tmx_ring_tx_t *tx = ep->ring_tx;

    if (ep->passive || tx == NULL || tx->returning) {
        tmx_warn("unexpected RING_REVOKE from %016llx dropped",
                 (unsigned long long)ep->remote_uuid);
        return;
    }
    /* no ring message after this point: RING_RETURN is numbered after the last one */
    tx->ready     = 0;
    tx->returning = 1;
    tmx_proto_send_ctrl(ep, TMX_PROTO_RING_RETURN, 0, 0);
}

void tmx_ring_tx_done(tmx_ep_t *ep)
{
    tmx_ring_tx_t *tx = ep->ring_tx;

    if (ep->passive || tx == NULL || !tx->returning) {
        tmx_warn("unexpected RING_DONE from %016llx dropped", (unsigned long long)ep->remote_uuid);
        return;
    }
    ep->poll_data = 0;
    tmx_ring_tx_free(ep);
    tmx_info("endpoint to %016llx: eager-RDMA ring given back (idle)",
             (unsigned long long)ep->remote_uuid);
}

tmx_status_t tmx_ring_ctrl_post(tmx_ep_t *ep, uint8_t op, int32_t status)
{
    tmx_proto_ring_hdr_t h;
    tmx_status_t         st;

    memset(&h, 0, sizeof(h));
    h.base.op     = op;
    h.base.status = status;
    if (op == TMX_PROTO_RING_GRANT) {
        tmx_ring_rx_t *rx = ep->ring_rx;

        if (rx == NULL) {
            return TMX_OK; /* taken back meanwhile: nothing to say */
        }
        h.addr      = (uintptr_t)rx->base;
        h.rkey      = rx->mr->rkey;
        h.slots     = rx->slots;
        h.slot_size = (uint32_t)rx->slot_size;
        h.reserved  = rx->cells != NULL ? rx->ncells : 0; /* the cells follow the slots */
    } else if (status == TMX_RING_REFUSE_NONE) {
        tmx_ring_tx_t *tx = ep->ring_tx;

        if (tx == NULL) {
            h.base.status = TMX_RING_REFUSE_CONFIG;
        } else {
            h.addr = (uintptr_t)tx->ctrl_mr->addr;
            h.rkey = tx->ctrl_mr->rkey;
        }
    }
    st = tmx_proto_post_hdr(ep, &h, sizeof(h));
    if (st == TMX_OK && op == TMX_PROTO_RING_ACK && h.base.status == TMX_RING_REFUSE_NONE &&
        !ep->ring_tx->returning) {
        ep->ring_tx->ready = 1;
    }
    return st;
}

/* A sender that saw its receiver asleep looks again: 1 while it still sleeps (counted). */
static inline __attribute__((always_inline)) int tmx_ring_tx_asleep(tmx_worker_t  *w,
                                                                    tmx_ring_tx_t *tx)
{
    tmx_ring_tx_sleep(tx);
    if (tx->asleep) {
        w->ring_stats.asleep++;
        return 1;
    }
    return 0;
}

/* The next position written: head, and the markers at a new lap. */
static inline void tmx_ring_tx_advance(tmx_ring_tx_t *tx)
{
    tx->head++;
    if ((tx->head & (tx->slots - 1)) == 0) {
        tx->marker      = tmx_ring_marker(tx->head, tx->slots_log2); /* a new lap */
        tx->cell_marker = tmx_ring_marker(tx->head, tx->cells_log2);
    }
}

/* tmx_ring_send of a message larger than tx->max: a span (ring.h "Spans") when it fits one and
 * follows a receive. The message into the next position's slot, then the flag at
 * the end of this position's, in place (tx->mapped: a TMX_DEV_CAP_MEM_DIRECT device, whole
 * mode), each write after the other on the queue pair. A failed flag write leaves the message
 * unflagged in a slot nobody reads until a later message rewrites it. Out of tmx_ring_send's
 * path (noinline): its checks cost the other sizes nothing. */
static __attribute__((noinline)) tmx_status_t
tmx_ring_send_span(tmx_ep_t *ep, tmx_ring_tx_t *tx, const void *hdr, size_t hlen,
                   const void *buf, size_t len)
{
    const tmx_prov_ops_t *ops  = ep->iface->ops;
    tmx_worker_t         *w    = ep->worker;
    size_t                mlen = hlen + len;
    uint64_t              wrid = TMX_WRID(TMX_WRID_RING_TX, ep->id);
    uint64_t              flag;
    tmx_sge_t             sge[2];

    tx->span_rx = w->rx_msgs; /* the caller saw a receive since the last send of this size */
    if (!tx->ready || ep->closing || ep->state != TMX_EP_CONNECTED ||
        ep->sq_busy > 0) {
        return TMX_ERR_NO_RESOURCE; /* a stream of them takes the queue */
    }
    if (tx->head + 1 - tx->consumed >= tx->slots) {
        tmx_ring_tx_credits(tx);
        if (tx->head + 1 - tx->consumed >= tx->slots) {
            w->ring_stats.full++;
            return TMX_ERR_NO_RESOURCE; /* the queue at once, no TMX_RING_SPILL_NS wait */
        }
        tx->full_ns = 0;
    }
    if (tx->asleep && tmx_ring_tx_asleep(w, tx)) {
        return TMX_ERR_NO_RESOURCE; /* the queue wakes it */
    }
    sge[0] = (tmx_sge_t){.addr = (uintptr_t)hdr, .length = (uint32_t)hlen};
    sge[1] = (tmx_sge_t){.addr = (uintptr_t)buf, .length = (uint32_t)len};
    flag   = tmx_ring_flag(tx->seq, mlen, hlen | TMX_RING_SPAN, tx->marker);
    if (ops->rma_writev(ep->qp, &tx->map,
                        (size_t)((tx->head + 1) & (tx->slots - 1)) * tx->slot_size +
                            tmx_ring_span_off(hlen, len, tx->slot_size),
                        sge, 2, wrid) != TMX_OK ||
        ops->rma_write(ep->qp, &tx->map,
                       (size_t)(tx->head & (tx->slots - 1)) * tx->slot_size + tx->slot_size -
                           TMX_RING_FLAG,
                       &flag, sizeof(flag), wrid) != TMX_OK) {
        return TMX_ERR_NO_RESOURCE;
    }
    tmx_ring_tx_advance(tx); /* the flag's position */
    tmx_ring_tx_advance(tx); /* the message's */
    w->ring_stats.sent++;
    tx->seq++;
    /* the writes are in place: did the receiver fall asleep before it looked? (tmx_ring_send) */
    if (tx->asym) {
        atomic_signal_fence(memory_order_seq_cst); /* it calls mem_barrier */
    } else {
#if defined(__SANITIZE_THREAD__)
        atomic_signal_fence(memory_order_seq_cst); /* as tmx_ring_send_cell */
#else
        atomic_thread_fence(memory_order_seq_cst);
#endif
    }
    tmx_ring_tx_sleep(tx);
    if (tx->asleep) {
        w->ring_stats.wakes++;
        tmx_proto_send_ctrl(ep, TMX_PROTO_CREDIT, 0, 0);
    }
    return TMX_OK;
}

tmx_status_t tmx_ring_send(tmx_ep_t *ep, const void *hdr, size_t hlen, const void *buf,
                           size_t len)
{
    tmx_ring_tx_t *tx    = ep->ring_tx;
    tmx_iface_t   *iface = ep->iface;
    tmx_worker_t  *w     = ep->worker;
    uint64_t       caps  = tx->caps;
    uint64_t       img[2 * TMX_RING_SMALL / 8]; /* half used; the rest quiets -Warray-bounds */
    tmx_ring_wr_t  rw;
    tmx_send_wr_t  wr, *bad;
    int            direct;
    tmx_status_t   status;
    /* to its position's cell (ring.h "Cells"), which is free while fewer than ncells
     * messages are outstanding; else to its slot (fewer than slots) */
    int            cell = tx->cells != 0 && hlen + len + TMX_RING_FLAG <= TMX_RING_CELL;
    uint64_t       cap  = cell ? tx->ncells : tx->slots;

    if (__builtin_expect(!tx->ready || hlen + len > tx->max || ep->closing ||
                             ep->state != TMX_EP_CONNECTED, 0)) {
        if (hlen + len > tx->max && hlen + len <= tx->span_max &&
            ep->worker->rx_msgs != tx->span_rx) {
            /* a span only after a receive: tested here, so that a window's sends (each after
             * the last) reach the queue without the call */
            return tmx_ring_send_span(ep, tx, hdr, hlen, buf, len);
        }
        return TMX_ERR_NO_RESOURCE;
    }
    /* On a device that places a write when it is posted (or moves data only inside our
     * calls), the send queue must be empty: then the write is in the receiver's memory when
     * post_send returns, and nothing of an eager send done on return waits for our progress. */
    direct = (caps & TMX_DEV_CAP_MEM_DIRECT) != 0;
    if ((caps & (TMX_DEV_CAP_MEM_DIRECT | TMX_DEV_CAP_MANUAL_PROGRESS)) && ep->sq_busy > 0) {
        return TMX_ERR_NO_RESOURCE;
    }
    if (tx->head - tx->consumed >= cap) {
        tmx_ring_tx_credits(tx);
        if (tx->head - tx->consumed >= cap) {
            w->ring_stats.full++;
            if (tx->full_ns == 0) {
                tx->full_ns = tmx_time_ns();
            }
            return TMX_ERR_NO_RESOURCE;
        }
        tx->full_ns = 0;
    }
    if (tx->asleep && tmx_ring_tx_asleep(w, tx)) {
        return TMX_ERR_NO_RESOURCE; /* the queue wakes it */
    }
    if (tx->mode == TMX_RING_MODE_WHOLE && hlen + len + TMX_RING_FLAG <= TMX_RING_SMALL) {
        /* a small message (an 8-byte payload): header, payload and flag gathered here into
         * one piece, so that the device copies one sge; the same bytes as
         * tmx_ring_slot_build's */
        size_t   mlen = hlen + len;
        uint64_t flag = tmx_ring_flag(tx->seq, mlen, hlen, cell ? tx->cell_marker : tx->marker);

        if (hlen == sizeof(tmx_proto_hdr_t)) {
            memcpy(img, hdr, sizeof(tmx_proto_hdr_t)); /* a plain EAGER's: two moves */
        } else {
            tmx_copy(img, hdr, hlen);
        }
        tmx_copy((uint8_t *)img + hlen, buf, len);
        memcpy((uint8_t *)img + mlen, &flag, sizeof(flag));
        rw.len = mlen + TMX_RING_FLAG;
        if (tx->mapped) {
            /* the same write without a work request (prov.h rma_write): to the position's
             * cell or the end of its slot */
            size_t off = cell ? (size_t)(tx->cells - tx->addr) +
                                    (size_t)(tx->head & (tx->ncells - 1)) * TMX_RING_CELL +
                                    TMX_RING_CELL - rw.len
                              : (size_t)(tx->head & (tx->slots - 1)) * tx->slot_size +
                                    tx->slot_size - rw.len;

            status = iface->ops->rma_write(ep->qp, &tx->map, off, img, rw.len,
                                           TMX_WRID(TMX_WRID_RING_TX, ep->id));
            if (status != TMX_OK) {
                return TMX_ERR_NO_RESOURCE;
            }
            goto written;
        }
        rw.off       = tx->slot_size - rw.len;
        rw.sge[0]    = (tmx_sge_t){.addr = (uintptr_t)img, .length = (uint32_t)rw.len};
        rw.num_sge   = 1;
    } else {
        tmx_ring_slot_build(tx->mode, tx->slot_size, tx->slots_log2, tx->head, tx->seq, hdr,
                            hlen, buf, len, tx->stage, &rw);
        if (tx->mapped && tx->mode == TMX_RING_MODE_WHOLE && iface->ops->rma_writev != NULL) {
            /* header, payload and flag straight into the slot (prov.h rma_writev), without a
             * work request: the small messages' path (above) for the slot's larger ones,
             * whose payload is not worth a copy into one piece first (callgrind, cg_small
             * -n 1000, instructions a message, tmx-msg 512 B 1449 -> 1293, 1 KiB 1545 -> 1389,
             * 2 KiB 1742 -> 1581) */
            status = iface->ops->rma_writev(ep->qp, &tx->map,
                                            (size_t)(tx->head & (tx->slots - 1)) *
                                                    tx->slot_size + rw.off,
                                            rw.sge, rw.num_sge,
                                            TMX_WRID(TMX_WRID_RING_TX, ep->id));
            if (status != TMX_OK) {
                return TMX_ERR_NO_RESOURCE;
            }
            goto written;
        }
    }
    memset(&wr, 0, sizeof(wr));
    wr.wr_id            = TMX_WRID(TMX_WRID_RING_TX, ep->id);
    wr.sg_list          = rw.sge;
    wr.num_sge          = rw.num_sge;
    if (cell) {
        /* to the position's cell, laid out as in a slot (ring.h "Cells") */
        wr.rdma.remote_addr = tx->cells + (tx->head & (tx->ncells - 1)) * TMX_RING_CELL +
                              TMX_RING_CELL - rw.len;
    } else {
        wr.rdma.remote_addr = tx->addr + (tx->head & (tx->slots - 1)) * tx->slot_size + rw.off;
    }
    wr.rdma.rkey        = tx->rkey;
    wr.send_flags       = TMX_SEND_INLINE;
    if (tx->mode == TMX_RING_MODE_IMM) {
        wr.opcode   = TMX_WR_RDMA_WRITE_WITH_IMM;
        wr.imm_data = (uint32_t)(tx->head & (tx->slots - 1));
    } else {
        wr.opcode = TMX_WR_RDMA_WRITE;
        if (!direct) {
            /* placed some time before its completion: the sleep check waits for it */
            wr.send_flags |= TMX_SEND_SIGNALED;
        }
    }
    status = iface->ops->post_send(ep->qp, &wr, &bad);
    if (status != TMX_OK) {
        return TMX_ERR_NO_RESOURCE; /* the queue path reports what is wrong, if anything */
    }
    if (wr.send_flags & TMX_SEND_SIGNALED) {
        ep->sq_busy++;
    }
written:
    tx->head++;
    if ((tx->head & (tx->slots - 1)) == 0) {
        tx->marker      = tmx_ring_marker(tx->head, tx->slots_log2); /* a new lap */
        tx->cell_marker = tmx_ring_marker(tx->head, tx->cells_log2);
    }
    w->ring_stats.sent++;
    if (tx->seq_on) {
        tx->seq++;
        if (direct) {
            /* the write is in place: did the receiver fall asleep before it looked? (its
             * side: "asleep" placed, a full barrier, then a look at the ring) */
            if (caps & TMX_DEV_CAP_MEM_ASYM) {
                atomic_signal_fence(memory_order_seq_cst); /* it calls mem_barrier */
            } else {
                atomic_thread_fence(memory_order_seq_cst);
            }
            tmx_ring_tx_sleep(tx);
            if (tx->asleep) {
                w->ring_stats.wakes++;
                tmx_proto_send_ctrl(ep, TMX_PROTO_CREDIT, 0, 0);
            }
        }
    }
    return TMX_OK;
}

void tmx_ring_tx_woke(tmx_ep_t *ep)
{
    ep->worker->ring_stats.wakes++;
    tmx_proto_send_ctrl(ep, TMX_PROTO_CREDIT, 0, 0);
}

/* ---------------------------------------------------------------- sleeping */

tmx_status_t tmx_ring_arm(tmx_worker_t *w)
{
    tmx_list_t *l;
    int         busy = 0;

    tmx_list_for_each(l, &w->ring_polled) {
        tmx_ring_rx_t *rx = tmx_container_of(l, tmx_ring_rx_t, link);

        if (rx->sleep == TMX_RING_SLEEP_AWAKE) {
            if (w->ring_sleepers == 0) {
                w->ring_sleep_rx = w->rx_msgs;
            }
            if (tmx_ring_rx_sleep(rx->ep, rx, 1) != TMX_OK) {
                busy = 1; /* the wire is full: poll, and try again */
                continue;
            }
            rx->sleep = TMX_RING_SLEEP_POSTED;
            w->ring_sleepers++;
        }
        if (rx->sleep == TMX_RING_SLEEP_POSTED) {
            busy = 1; /* its completion says it is in the sender's memory */
        }
    }
    if (busy) {
        return TMX_ERR_BUSY;
    }
    /* every sender's word says asleep: a barrier (that orders the senders' stores too, on a
     * device whose senders only fence the compiler), then one more look (a sender wrote its
     * message, a barrier, then looked at its word) */
    for (int i = 0; i < w->num_ifaces; i++) {
        tmx_iface_t *iface = &w->ifaces[i];

        if (iface->ops->mem_barrier(iface->dev) != TMX_OK) {
            return TMX_ERR_BUSY; /* cannot order the senders: do not sleep */
        }
    }
    tmx_list_for_each(l, &w->ring_polled) {
        tmx_ring_rx_t *rx = tmx_container_of(l, tmx_ring_rx_t, link);

        if (tmx_ring_slot_ready(rx->base + (rx->head & (rx->slots - 1)) * rx->slot_size,
                                rx->slot_size, rx->slots_log2, rx->head) ||
            (rx->cells != NULL &&
             tmx_ring_slot_ready(rx->cells + (rx->head & (rx->ncells - 1)) * TMX_RING_CELL,
                                 TMX_RING_CELL, rx->cells_log2, rx->head))) {
            return TMX_ERR_BUSY;
        }
    }
    return TMX_OK;
}

void tmx_ring_awake(tmx_worker_t *w)
{
    tmx_list_t *l;

    tmx_list_for_each(l, &w->ring_polled) {
        tmx_ring_rx_t *rx = tmx_container_of(l, tmx_ring_rx_t, link);

        if (rx->sleep != TMX_RING_SLEEP_AWAKE &&
            tmx_ring_rx_sleep(rx->ep, rx, 0) == TMX_OK) {
            rx->sleep = TMX_RING_SLEEP_AWAKE;
            w->ring_sleepers--;
        }
    }
}

void tmx_ring_wc(tmx_iface_t *iface, const tmx_wc_t *wc)
{
    tmx_worker_t *w  = iface->worker;
    tmx_ep_t     *ep = tmx_hash_get(&w->ep_by_id, TMX_WRID_VAL(wc->wr_id));

    if (ep == NULL || ep->iface != iface) {
        return; /* gone meanwhile */
    }
    if (wc->status != TMX_WC_SUCCESS) {
        /* an unsignaled one failed (or a signaled one was flushed): the connection fails,
         * its asynchronous error says so */
        return;
    }
    tmx_proto_sq_done(ep);
    if (TMX_WRID_KIND(wc->wr_id) == TMX_WRID_RING_RX) {
        if (ep->ring_rx != NULL && ep->ring_rx->sleep == TMX_RING_SLEEP_POSTED) {
            ep->ring_rx->sleep = TMX_RING_SLEEP_PLACED;
        }
    } else if (ep->ring_tx != NULL && ep->ring_tx->seq_on) {
        /* a ring message is in place: the receiver's word, once more */
        tmx_ring_tx_sleep(ep->ring_tx);
        if (ep->ring_tx->asleep) {
            w->ring_stats.wakes++;
            tmx_proto_send_ctrl(ep, TMX_PROTO_CREDIT, 0, 0);
        }
    }
}

void tmx_ring_sq_done(tmx_iface_t *iface, const tmx_wc_t *wc)
{
    tmx_ep_t *ep = tmx_ep_by_qpn(iface->worker, iface, wc->qp_num);

    if (ep != NULL) {
        tmx_proto_sq_done(ep);
    }
}

/* ---------------------------------------------------------------- cleanup, query */

void tmx_ring_ep_cleanup(tmx_ep_t *ep)
{
    tmx_ring_rx_free(ep);
    tmx_ring_tx_free(ep);
}

void tmx_ring_query(tmx_worker_t *w, tmx_ring_attr_t *attr)
{
    const tmx_config_t *cfg = &w->ctx->cfg;
    tmx_list_t         *l;

    memset(attr, 0, sizeof(*attr));
    for (int i = 0; i < w->num_ifaces; i++) {
        if (!w->ifaces[i].tm_on && cfg->ring != 0 && cfg->ring_peers > 0) {
            attr->enabled = 1;
        }
    }
    attr->slots     = cfg->ring_slots;
    attr->slot_size = cfg->ring_slot_size;
    attr->max_rings = cfg->ring_peers;
    tmx_list_for_each(l, &w->eps) {
        tmx_ep_t *ep = tmx_container_of(l, tmx_ep_t, list);

        if (!ep->passive || ep->state != TMX_EP_CONNECTED) {
            continue;
        }
        switch (ep->ring_choice) {
        case TMX_RING_MODE_WHOLE:      attr->eps_whole++; break;
        case TMX_RING_MODE_ALIGNED128: attr->eps_aligned128++; break;
        case TMX_RING_MODE_IMM:        attr->eps_imm++; break;
        default:                       attr->eps_none++; break;
        }
    }
    attr->rx_rings = w->rings_rx;
    attr->tx_rings = w->rings_tx;
    attr->sent     = w->ring_stats.sent;
    attr->received = w->ring_stats.received;
    attr->full     = w->ring_stats.full;
    attr->asleep   = w->ring_stats.asleep;
    attr->wakes    = w->ring_stats.wakes;
}
