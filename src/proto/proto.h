/*
 * Point-to-point protocols over a connected QP:
 *   EAGER      header + payload in one SEND (copied at both ends), up to eager_max
 *   EAGER_SYNC the same, and the receiver answers ACK when it matched
 *   RTS        rendezvous: the sender registers its buffer and sends (addr, rkey, len); the
 *              receiver RDMA-READs straight into the user buffer (one copy) and answers FIN
 *   CREDIT     gives eager credits back (also piggybacked on every header)
 *   compact EAGER  no header at all: a SEND_WITH_IMM of the payload alone, whose immediate data
 *              is TMX_PROTO_COMPACT | the credits it returns; its tag is the tag of the last
 *              EAGER or EAGER_SYNC with a header on the connection (the QP delivers in order).
 *              Only to a peer that said at wire-up it takes them (TMX_WIREUP_F_COMPACT: no
 *              tag-matching offload, no XRC, and no polling eager-RDMA ring, whose messages
 *              number the SENDs in their immediate data). A 4 KiB message on a 1 KiB MTU is
 *              then 4 packets, not 5 (a header would start a fifth). Posted through the
 *              provider's send_inline where it has one (prov.h; the verbs provider), else as
 *              one inline post_send.
 *   DISC/DISC_ACK  orderly close of a connection
 *
 * Flow control: an endpoint may have eager_credits EAGER/RTS messages that the receiver has
 * not yet consumed. The receiver gives a credit back when it matched the message or buffered it
 * within its unexpected budget; past the budget the credit is held until the message is
 * matched, so a sender that floods a receiver which does not post receives stops, and the
 * receiver's memory stays bounded (budget + peers * credits * eager_max). A message through a
 * polling eager-RDMA ring takes no credit: the ring's slots hold it back the same way (ring.h,
 * "Credits"), adding at most peers * slots * slot size.
 *
 * Every field of a received header is checked before use: lengths against the completion,
 * request ids through a hash lookup, never dereferenced as pointers.
 */
#ifndef TMX_PROTO_H
#define TMX_PROTO_H

#include <stdint.h>

#include "core/core.h"

enum {
    TMX_PROTO_EAGER      = 1,
    TMX_PROTO_EAGER_SYNC = 2,
    TMX_PROTO_RTS        = 3,
    TMX_PROTO_ACK        = 5,
    TMX_PROTO_FIN        = 6,
    TMX_PROTO_CREDIT     = 7,
    TMX_PROTO_DISC       = 8,
    TMX_PROTO_DISC_ACK   = 9,
    TMX_PROTO_RING_GRANT = 10, /* the receiver lends an eager-RDMA ring (ring.h) */
    TMX_PROTO_RING_ACK   = 11, /* the sender takes it (or refuses) */
    TMX_PROTO_RING_REVOKE = 12, /* the receiver asks an idle sender's ring back (ring.h) */
    TMX_PROTO_RING_RETURN = 13, /* the sender's ring messages all precede this one */
    TMX_PROTO_RING_DONE   = 14, /* the receiver let the ring go: the sender's word is free */
};

typedef struct tmx_proto_hdr {
    uint8_t  op;
    uint8_t  reserved; /* EAGER, EAGER_SYNC, RTS: TMX_PROTO_HDR_IMM or 0 */
    uint16_t credits;  /* eager credits returned to the receiver of this header */
    int32_t  status;   /* FIN: how the receiver's read went; EAGER, EAGER_SYNC with
                        * TMX_PROTO_HDR_IMM: the immediate data (its 32 bits) */
    uint64_t tag;
} tmx_proto_hdr_t;

#define TMX_PROTO_HDR_IMM 0x01u /* the message carries immediate data (RTS: in reserved) */

#define TMX_PROTO_COMPACT         0x80000000u /* immediate data of a compact EAGER */
#define TMX_PROTO_COMPACT_CREDITS 0x7fffffffu /* ... and the credits it returns */

typedef struct tmx_proto_sync_hdr {
    tmx_proto_hdr_t base;
    uint64_t        sreq_id;
} tmx_proto_sync_hdr_t;

typedef struct tmx_proto_ring_hdr {
    tmx_proto_hdr_t base;      /* status: GRANT: the mode; ACK: 0 taken, else refused */
    uint64_t        addr;      /* GRANT: the slots; ACK: the sender's control word */
    uint32_t        rkey;
    uint32_t        slots;     /* GRANT */
    uint32_t        slot_size; /* GRANT */
    uint32_t        reserved;
} tmx_proto_ring_hdr_t;

typedef struct tmx_proto_rts_hdr {
    tmx_proto_hdr_t base;
    uint64_t        sreq_id;
    uint64_t        addr;
    uint64_t        length;
    uint32_t        rkey;
    uint32_t        reserved; /* with TMX_PROTO_HDR_IMM in base.reserved: the immediate data */
} tmx_proto_rts_hdr_t;

/*
 * With tag-matching offload (iface->tm_on) every message starts with the device's header,
 * tmx_tmh_t (prov.h). Tagged messages are the device's to match, so nothing of ours may sit
 * between the TMH and the payload: EAGER carries in app_ctx either the credits it returns or,
 * for a synchronous send, TMX_PROTO_TM_SYNC | the send's id (the ACK names it); RNDV carries
 * TMX_PROTO_TM_RNDV | the send's id in app_ctx (the device's FIN echoes it) and after the RVH
 * the whole length. A receive the device matched learns which it was from app_ctx alone.
 * Everything else (ACK, software FIN, CREDIT, DISC) goes TMX_TMH_NO_TAG + the header above.
 *
 * Immediate data: app_ctx has no room for it, and a device reports nothing else of a message
 * it matched. A send with immediate data therefore goes as RNDV whatever its length, with
 * TMX_PROTO_TM_RNDV_IMM and the data in our header after the RVH, and RVH.len = 2^32 - 1: no
 * offered buffer is that large, so the device never reads it itself; it completes the receive
 * RNDV_INCOMPLETE with our header in the buffer (every offered buffer is at least
 * TMX_TM_THRESH >= 64 bytes) or delivers it unexpected, and software reads the data. It travels
 * tagged like every other message, so MPI order holds. The device writes our header into the
 * receive's buffer: for a message shorter than it, the bytes past the message are put back from
 * a copy taken when the receive was offered (tmx_request_t.tm_saved).
 */
#define TMX_PROTO_TM_SYNC        0x80000000u /* EAGER: a synchronous send; its id below */
#define TMX_PROTO_TM_RNDV        0x40000000u /* RNDV (and the FIN): the send's id below */
#define TMX_PROTO_TM_CREDITS_MAX 0xffffu
#define TMX_PROTO_SREQ_ID_MAX    0x3fffffffu

typedef struct tmx_proto_tm_rndv {
    tmx_rvh_t rvh;
    uint64_t  length; /* the sender's length (RVH.len saturates at 2^32 - 1) */
    uint32_t  flags;  /* TMX_PROTO_TM_RNDV_IMM or 0 */
    uint32_t  imm;    /* with TMX_PROTO_TM_RNDV_IMM: the immediate data */
} tmx_proto_tm_rndv_t;

_Static_assert(sizeof(tmx_proto_tm_rndv_t) == TMX_TM_SAVED, "tm_saved keeps the header's bytes");

#define TMX_PROTO_TM_RNDV_IMM 0x1u

/* The sender's length and immediate data of a TM rendezvous header, checked: 0 and *imm_p set
 * (TMX_PROTO_IMM or 0), or -1 for a header that is not one. */
int tmx_proto_tm_rndv_parse(const tmx_proto_tm_rndv_t *r, uint64_t *imm_p);

/* wr_id encoding of the core's work requests: kind in the top byte. */
#define TMX_WRID_KIND_SHIFT 56
enum {
    TMX_WRID_RX       = 1, /* srq receive buffer index */
    TMX_WRID_UD_RX    = 2, /* ud receive buffer index */
    TMX_WRID_TX_BUF   = 3, /* bounce buffer index to free */
    TMX_WRID_RNDV_RD  = 4, /* receive request id being read */
    TMX_WRID_CTRL     = 5, /* nothing to do */
    TMX_WRID_TM_RECV  = 6, /* a receive the device's tag list matched: its slot */
    TMX_WRID_TM_OP    = 7, /* a tag list operation: its slot */
    TMX_WRID_RING_RX  = 8, /* a receiver's "asleep" word to a ring's sender: the ep id */
    TMX_WRID_RING_TX  = 9, /* a ring message written signaled: the ep id */
};
#define TMX_WRID(_kind, _val) (((uint64_t)(_kind) << TMX_WRID_KIND_SHIFT) | (uint64_t)(_val))
#define TMX_WRID_KIND(_wrid)  ((unsigned)((_wrid) >> TMX_WRID_KIND_SHIFT))
#define TMX_WRID_VAL(_wrid)   ((_wrid) & ((1ULL << TMX_WRID_KIND_SHIFT) - 1))

/* eager.c */
tmx_status_t tmx_proto_send(tmx_ep_t *ep, tmx_request_t *req);
tmx_status_t tmx_proto_send_ctrl(tmx_ep_t *ep, uint8_t op, uint64_t sreq_id, int32_t status);
tmx_status_t tmx_proto_send_ctrl_then(tmx_ep_t *ep, uint8_t op, uint64_t sreq_id, int32_t status,
                                      tmx_request_t *rreq, tmx_status_t rstatus);
void tmx_proto_rx(tmx_iface_t *iface, const tmx_wc_t *wc);
void tmx_proto_tx_done(tmx_iface_t *iface, const tmx_wc_t *wc);
void tmx_proto_progress_pending(tmx_worker_t *w);
void tmx_proto_recv_matched(tmx_request_t *rreq, tmx_message_t *msg);
void tmx_proto_message_drop(tmx_worker_t *w, tmx_message_t *msg);
void tmx_proto_consumed(tmx_worker_t *w, uint64_t ep_id);
void tmx_proto_ep_queue(tmx_ep_t *ep, tmx_request_t *req);
tmx_status_t tmx_proto_eager_try(tmx_ep_t *ep, const void *buf, size_t len, uint64_t tag,
                                 uint64_t imm);
/* The compact EAGER of tmx_proto_eager_try that goes by the provider's send_inline (prov.h):
 * no immediate data, the tag of the last full header, inline, no ring, no XRC, no TM, no OOO
 * placement (so never a fence), a credit at hand. 1 when (ep, len, tag) is one; then
 * tmx_proto_compact_post posts it. Inline in tmx_tag_send_nb's fast path, whose every small
 * message of a ping-pong or a window after the first is one over verbs (through
 * tmx_proto_eager_try: its call, its saved registers and checks made twice). */
static inline __attribute__((always_inline)) int
tmx_proto_compact_fits(const tmx_ep_t *ep, size_t len, uint64_t tag)
{
    const tmx_iface_t *iface = ep->iface;

    /* send_inline first: the soft device, which has none, pays this one test */
    return iface->ops->send_inline != NULL && ep->ring_tx == NULL && ep->ctag_tx == tag &&
           ep->ctag_tx_ok && ep->compact_tx && ep->credits > 0 && !ep->xrc && !ep->ooo &&
           len <= iface->max_inline && !iface->tm_on;
}

static inline __attribute__((always_inline)) tmx_status_t
tmx_proto_compact_post(tmx_ep_t *ep, const void *buf, size_t len)
{
    unsigned     cgive  = ep->credits_owed > TMX_PROTO_COMPACT_CREDITS ? TMX_PROTO_COMPACT_CREDITS
                                                                       : ep->credits_owed;
    tmx_status_t status = ep->iface->ops->send_inline(ep->qp, buf, len,
                                                      TMX_PROTO_COMPACT | (uint32_t)cgive, 0,
                                                      TMX_WRID(TMX_WRID_CTRL, 0));

    if (status == TMX_OK) {
        ep->credits_owed -= cgive;
        ep->worker->compact_tx++;
        ep->credits--;
    }
    return status;
}

/* tmx_proto_eager_try past a polling ring that could not take the message: the queue, with
 * an eager credit (tmx_tag_send_nb tries the ring itself first, tmx_ring_eager_try). */
tmx_status_t tmx_proto_eager_queue(tmx_ep_t *ep, const void *buf, size_t len, uint64_t tag,
                                   uint64_t imm);
void tmx_proto_ctrl_drop(tmx_ep_t *ep);
tmx_status_t tmx_proto_post_hdr(tmx_ep_t *ep, void *hdr, size_t hdr_len);
tmx_status_t tmx_proto_post_tagged(tmx_ep_t *ep, uint8_t opcode, uint32_t app_ctx, uint64_t tag,
                                   const void *ext, size_t ext_len, const void *buf, size_t len);
uint64_t tmx_proto_sreq_id_peek(tmx_worker_t *w);

void tmx_proto_unexpected_add(tmx_worker_t *w, tmx_message_t *msg);
void tmx_proto_rx_msg(tmx_iface_t *iface, tmx_ep_t *ep, const uint8_t *buf, size_t len);
/* tmx_proto_rx_msg of an eager-RDMA ring message (at least a header's length): a plain EAGER
 * that a posted receive takes is delivered without the general dispatch. */
void tmx_proto_rx_ring(tmx_iface_t *iface, tmx_ep_t *ep, const uint8_t *buf, size_t len);
void tmx_proto_rx_eager(tmx_ep_t *ep, uint64_t tag, const void *data, size_t len, int sync,
                        uint64_t sreq_id, uint64_t imm);
void tmx_proto_rx_rts(tmx_ep_t *ep, const tmx_proto_rts_hdr_t *rts);
/* How many owed eager credits the receiver of a stream gathers before it sends them back
 * alone in a CREDIT (otherwise they ride on the next header going that way): half the
 * window, at least 1. */
static inline unsigned tmx_proto_credit_threshold(const tmx_worker_t *w)
{
    unsigned t = w->eager_credits / 2;

    return t ? t : 1;
}
/* One credit back to the peer: sent on its own once tmx_proto_credit_threshold are owed
 * (otherwise it rides on the next header going that way); none for a polling ring's message,
 * which took none (ring.h, "Credits"). Inline: every message of the compact and ring paths
 * comes through it (tmx_proto_rx_take). */
static inline void tmx_proto_credit_return(tmx_ep_t *ep)
{
    if (ep->ring_rx_now) {
        return;
    }
    if (++ep->credits_owed >= tmx_proto_credit_threshold(ep->worker) &&
        ep->state == TMX_EP_CONNECTED) {
        ep->worker->stat_credit_msgs++;
        tmx_proto_send_ctrl(ep, TMX_PROTO_CREDIT, 0, 0);
    }
}
void tmx_proto_credits_add(tmx_ep_t *ep, unsigned credits);
tmx_request_t *tmx_proto_sreq_lookup(tmx_ep_t *ep, uint64_t id, unsigned need_flag);
void tmx_proto_ep_schedule(tmx_ep_t *ep);
/* A signaled work request of ep's completed (one less in ep->sq_busy): its send queue has
 * room again, so what waits for it there (ep->sq_wait) is tried at the next progress round. */
void tmx_proto_sq_done(tmx_ep_t *ep);

/* tm.c: tag-matching offload */
void tmx_proto_tm_rx(tmx_iface_t *iface, const tmx_wc_t *wc);
void tmx_proto_tm_matched(tmx_iface_t *iface, const tmx_wc_t *wc);
void tmx_proto_tm_op_done(tmx_iface_t *iface, const tmx_wc_t *wc);
void tmx_proto_tm_offer(tmx_worker_t *w, tmx_request_t *rreq);
/* A software-path message matched rreq: 1 when rreq's device entry must be taken back first
 * (the message is held, delivered when the DEL completes); 0: deliver now. */
int tmx_proto_tm_claim(tmx_request_t *rreq);
void tmx_proto_tm_hold(tmx_request_t *rreq, tmx_message_t *msg);
tmx_status_t tmx_proto_tm_cancel(tmx_request_t *rreq);

/* rndv.c */
tmx_status_t tmx_proto_rndv_send(tmx_ep_t *ep, tmx_request_t *req);
void tmx_proto_rndv_recv(tmx_request_t *rreq, tmx_ep_t *ep, uint64_t sreq_id, uint64_t addr,
                         uint64_t length, uint32_t rkey);
void tmx_proto_rndv_read_done(tmx_iface_t *iface, const tmx_wc_t *wc);
/* Whether ep has something waiting for room on the wire: queued sends, control messages,
 * rendezvous reads, a ring credit report. */
int tmx_proto_ep_queued(const tmx_ep_t *ep);
/* Posts the rendezvous reads queued on ep (the send queue was full); TMX_ERR_NO_RESOURCE when
 * some still wait. */
tmx_status_t tmx_proto_rndv_read_progress(tmx_ep_t *ep);
/* The endpoint fails or goes: its queued reads never will be posted, their receives complete
 * with status (once the reads already posted are done). */
void tmx_proto_rndv_read_drop(tmx_ep_t *ep, tmx_status_t status);
void tmx_proto_rndv_fin(tmx_ep_t *ep, uint64_t sreq_id, int32_t status);
/* A posted send now waits for its ACK or FIN (moved off ep->pending if queued). */
void tmx_proto_outstanding_add(tmx_ep_t *ep, tmx_request_t *req);
void tmx_proto_sreq_done(tmx_worker_t *w, tmx_request_t *sreq, tmx_status_t status);

#endif /* TMX_PROTO_H */
