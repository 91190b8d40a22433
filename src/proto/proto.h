/*
 * Point-to-point protocols over a connected QP:
 *   EAGER      header + payload in one SEND (copied at both ends), up to eager_max
 *   EAGER_SYNC the same, and the receiver answers ACK when it matched
 *   RTS        rendezvous: the sender registers its buffer and sends (addr, rkey, len); the
 *              receiver RDMA-READs straight into the user buffer (one copy) and answers FIN
 *   CREDIT     gives eager credits back (also piggybacked on every header)
 *   DISC/DISC_ACK  orderly close of a connection
 *
 * Flow control: an endpoint may have eager_credits EAGER/RTS messages that the receiver has
 * not yet consumed. The receiver gives a credit back when it matched the message or buffered it
 * within its unexpected budget; past the budget the credit is held until the message is
 * matched, so a sender that floods a receiver which does not post receives stops, and the
 * receiver's memory stays bounded (budget + peers * credits * eager_max).
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
};

typedef struct tmx_proto_hdr {
    uint8_t  op;
    uint8_t  reserved;
    uint16_t credits;  /* eager credits returned to the receiver of this header */
    int32_t  status;   /* FIN: how the receiver's read went */
    uint64_t tag;
} tmx_proto_hdr_t;

typedef struct tmx_proto_sync_hdr {
    tmx_proto_hdr_t base;
    uint64_t        sreq_id;
} tmx_proto_sync_hdr_t;

typedef struct tmx_proto_rts_hdr {
    tmx_proto_hdr_t base;
    uint64_t        sreq_id;
    uint64_t        addr;
    uint64_t        length;
    uint32_t        rkey;
    uint32_t        reserved;
} tmx_proto_rts_hdr_t;

/* wr_id encoding of the core's work requests: kind in the top byte. */
#define TMX_WRID_KIND_SHIFT 56
enum {
    TMX_WRID_RX       = 1, /* srq receive buffer index */
    TMX_WRID_UD_RX    = 2, /* ud receive buffer index */
    TMX_WRID_TX_BUF   = 3, /* bounce buffer index to free */
    TMX_WRID_RNDV_RD  = 4, /* receive request id being read */
    TMX_WRID_CTRL     = 5, /* nothing to do */
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
tmx_status_t tmx_proto_eager_try(tmx_ep_t *ep, const void *buf, size_t len, uint64_t tag);
void tmx_proto_ctrl_drop(tmx_ep_t *ep);
tmx_status_t tmx_proto_post_hdr(tmx_ep_t *ep, void *hdr, size_t hdr_len);

/* rndv.c */
tmx_status_t tmx_proto_rndv_send(tmx_ep_t *ep, tmx_request_t *req);
void tmx_proto_rndv_recv(tmx_request_t *rreq, tmx_ep_t *ep, uint64_t sreq_id, uint64_t addr,
                         uint64_t length, uint32_t rkey);
void tmx_proto_rndv_read_done(tmx_iface_t *iface, const tmx_wc_t *wc);
void tmx_proto_rndv_fin(tmx_ep_t *ep, uint64_t sreq_id, int32_t status);
/* A posted send now waits for its ACK or FIN (moved off ep->pending if queued). */
void tmx_proto_outstanding_add(tmx_ep_t *ep, tmx_request_t *req);
void tmx_proto_sreq_done(tmx_worker_t *w, tmx_request_t *sreq, tmx_status_t status);

#endif /* TMX_PROTO_H */
