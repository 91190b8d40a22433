/*
 * Eager protocol, control messages, credits and the receive dispatch (see proto.h).
 */
#define TMX_LOG_SUBSYS "proto"
#include "config.h"

#include <endian.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "proto/fence.h"
#include "proto/proto.h"
#include "proto/ring.h"
#include "util/copy.h"
#include "util/log.h"
#include "util/time.h"

typedef struct tmx_proto_ctrl {
    tmx_list_t     list;
    uint8_t        op;
    int32_t        status;
    uint64_t       sreq_id;
    tmx_request_t *rreq;    /* a receive that completes once this is on the wire, or NULL */
    tmx_status_t   rstatus; /* ... with this status */
} tmx_proto_ctrl_t;

static int tmx_list_linked(const tmx_list_t *l)
{
    return l->next != l;
}

void tmx_proto_ep_schedule(tmx_ep_t *ep)
{
    if (!tmx_list_linked(&ep->pending_link)) {
        tmx_list_add_tail(&ep->worker->pending_eps, &ep->pending_link);
    }
}

void tmx_proto_sq_done(tmx_ep_t *ep)
{
    if (ep->sq_busy > 0) {
        ep->sq_busy--;
    }
    if (ep->sq_wait) {
        ep->sq_wait = 0;
        tmx_proto_ep_schedule(ep);
    }
}

/*
 * Posts up to two headers and len bytes of buf as one SEND: inline when it fits, through a
 * bounce buffer otherwise; with compact != 0 (no headers: l1 = l2 = 0) a SEND_WITH_IMM of
 * that immediate data (a compact EAGER). TMX_ERR_NO_RESOURCE: nothing was posted.
 */
static tmx_status_t tmx_proto_post_wire(tmx_ep_t *ep, int via_xrc, const void *h1, size_t l1,
                                        const void *h2, size_t l2, const void *buf, size_t len,
                                        uint32_t compact)
{
    tmx_iface_t  *iface = ep->iface;
    tmx_sge_t     sge[3];
    tmx_send_wr_t wr, *bad;
    tmx_status_t  status;
    unsigned      idx = 0;
    size_t        total = l1 + l2 + len;
    int           numbered;

    wr = (tmx_send_wr_t){.opcode = TMX_WR_SEND, .sg_list = sge};
    if (total <= iface->max_inline) {
        wr.num_sge = 0;
        if (l1 > 0) {
            sge[wr.num_sge++] = (tmx_sge_t){.addr = (uintptr_t)h1, .length = (uint32_t)l1};
        }
        if (l2 > 0) {
            sge[wr.num_sge++] = (tmx_sge_t){.addr = (uintptr_t)h2, .length = (uint32_t)l2};
        }
        if (len > 0) {
            sge[wr.num_sge++] = (tmx_sge_t){.addr = (uintptr_t)buf, .length = (uint32_t)len};
        }
        wr.send_flags = TMX_SEND_INLINE;
        wr.wr_id      = TMX_WRID(TMX_WRID_CTRL, 0);
    } else {
        uint8_t *tx;
        if (iface->tx_free_top == 0 || total > iface->tx_size) {
            return TMX_ERR_NO_RESOURCE;
        }
        idx = iface->tx_free[--iface->tx_free_top];
        tx  = iface->tx_bufs + (size_t)idx * iface->tx_size;
        if (l1 > 0) {
            memcpy(tx, h1, l1);
        }
        if (l2 > 0) {
            memcpy(tx + l1, h2, l2);
        }
        if (len > 0) {
            memcpy(tx + l1 + l2, buf, len);
        }
        sge[0].addr   = (uintptr_t)tx;
        sge[0].length = (uint32_t)total;
        sge[0].lkey   = iface->tx_mr->lkey;
        wr.num_sge    = 1;
        wr.send_flags = TMX_SEND_SIGNALED;
        wr.wr_id      = TMX_WRID(TMX_WRID_TX_BUF, idx);
    }
    /* EAGER, RTS and the control messages all come through here: SENDs after SENDs */
    wr.send_flags |= tmx_fence_flags_for_step(ep->ooo, TMX_FENCE_STEP_EAGER,
                                              ep->worker->ctx->cfg.fence_drop);
    numbered = ep->ring_tx != NULL && ep->ring_tx->seq_on; /* never with XRC (ring.c) */
    if (compact != 0) {
        /* the peer lends no polling ring (TMX_WIREUP_F_COMPACT): never numbered as well */
        wr.opcode   = TMX_WR_SEND_WITH_IMM;
        wr.imm_data = compact;
    } else if (numbered) {
        /* numbered like the ring's messages, so that neither path overtakes (ring.h) */
        wr.opcode   = TMX_WR_SEND_WITH_IMM;
        wr.imm_data = ep->ring_tx->seq;
    }
    if (via_xrc) {
        status = tmx_xrc_post(ep, ep->xdom, &wr); /* the pair's domain: one stream, in order */
    } else {
        status = iface->ops->post_send(ep->qp, &wr, &bad);
    }
    if (status != TMX_OK && (wr.send_flags & TMX_SEND_SIGNALED)) {
        iface->tx_free[iface->tx_free_top++] = idx;
    } else if (status == TMX_OK) {
        if (numbered && compact == 0) {
            ep->ring_tx->seq++;
        }
        if (wr.send_flags & TMX_SEND_SIGNALED) {
            ep->sq_busy++;
        }
    }
    return status;
}

/*
 * Posts hdr (whose first bytes are a tmx_proto_hdr_t) followed by len bytes of buf as one SEND.
 * Credits owed to the peer ride along in the header. With tag-matching offload the message is
 * one the device does not match (TMX_TMH_NO_TAG). TMX_ERR_NO_RESOURCE: nothing was posted.
 */
static tmx_status_t tmx_proto_post_ring(tmx_ep_t *ep, void *hdr, size_t hdr_len,
                                        const void *buf, size_t len, int ring);

static tmx_status_t tmx_proto_post(tmx_ep_t *ep, void *hdr, size_t hdr_len, const void *buf,
                                   size_t len)
{
    return tmx_proto_post_ring(ep, hdr, hdr_len, buf, len, 1);
}

/* tmx_proto_post; ring 0: the ring was tried already (tmx_proto_eager_try) */
static tmx_status_t tmx_proto_post_ring(tmx_ep_t *ep, void *hdr, size_t hdr_len,
                                        const void *buf, size_t len, int ring)
{
    tmx_proto_hdr_t *h    = hdr;
    unsigned         give = ep->credits_owed > 0xffff ? 0xffff : ep->credits_owed;
    tmx_status_t     status;

    h->credits = (uint16_t)give;
    if (ep->iface->tm_on && tmx_xrc_ctrl(ep)) {
        /* TM and XRC: a reply, through the XRC SRQ (a basic one: no TMH), never tagged data */
        status = tmx_proto_post_wire(ep, 1, hdr, hdr_len, NULL, 0, buf, len, 0);
    } else if (ep->iface->tm_on) {
        tmx_tmh_t tmh = {.opcode = TMX_TMH_NO_TAG};
        status = tmx_proto_post_wire(ep, 0, &tmh, sizeof(tmh), hdr, hdr_len, buf, len, 0);
    } else {
        int eager = h->op == TMX_PROTO_EAGER || h->op == TMX_PROTO_EAGER_SYNC;

        status = TMX_ERR_NO_RESOURCE;
        if (ep->ring_tx != NULL && eager && ring) {
            status = tmx_ring_send(ep, hdr, hdr_len, buf, len);
        }
        if (status != TMX_OK && h->op == TMX_PROTO_EAGER && h->reserved == 0 &&
            hdr_len == sizeof(*h) && ep->compact_tx && !ep->xrc && ep->ctag_tx_ok &&
            ep->ctag_tx == h->tag && (ep->ring_tx == NULL || !ep->ring_tx->seq_on)) {
            /* the tag of the last one, no immediate data: the payload alone (proto.h) */
            unsigned cgive = ep->credits_owed > TMX_PROTO_COMPACT_CREDITS
                                 ? TMX_PROTO_COMPACT_CREDITS
                                 : ep->credits_owed;

            status = tmx_proto_post_wire(ep, 0, NULL, 0, NULL, 0, buf, len,
                                         TMX_PROTO_COMPACT | (uint32_t)cgive);
            if (status == TMX_OK) {
                ep->credits_owed -= cgive;
                ep->worker->compact_tx++;
            }
            return status;
        }
        if (status != TMX_OK) {
            status = tmx_proto_post_wire(ep, ep->xrc, hdr, hdr_len, NULL, 0, buf, len, 0);
        }
        if (status == TMX_OK && eager) {
            ep->ctag_tx    = h->tag;
            ep->ctag_tx_ok = 1;
        }
    }
    if (status == TMX_OK) {
        ep->credits_owed -= give;
    }
    return status;
}

/*
 * With tag-matching offload: a message the peer's device matches. EAGER: TMH + payload, the
 * credits we owe (or, for a synchronous send, its id) in app_ctx. RNDV: TMH + ext (RVH and our
 * header) and no payload.
 */
tmx_status_t tmx_proto_post_tagged(tmx_ep_t *ep, uint8_t opcode, uint32_t app_ctx, uint64_t tag,
                                   const void *ext, size_t ext_len, const void *buf, size_t len)
{
    unsigned     give = 0;
    tmx_tmh_t    tmh;
    tmx_status_t status;

    if (opcode == TMX_TMH_EAGER && !(app_ctx & TMX_PROTO_TM_SYNC)) {
        give    = ep->credits_owed > TMX_PROTO_TM_CREDITS_MAX ? TMX_PROTO_TM_CREDITS_MAX
                                                               : ep->credits_owed;
        app_ctx = give;
    }
    memset(&tmh, 0, sizeof(tmh));
    tmh.opcode  = opcode;
    tmh.app_ctx = htobe32(app_ctx);
    tmh.tag     = htobe64(tag);
    /* the TM SRQ matches it: on the RC QP, also with XRC on (xrc.c "TM and XRC") */
    status = tmx_proto_post_wire(ep, 0, &tmh, sizeof(tmh), ext, ext_len, buf, len, 0);
    if (status == TMX_OK) {
        ep->credits_owed -= give;
    }
    return status;
}

tmx_status_t tmx_proto_post_hdr(tmx_ep_t *ep, void *hdr, size_t hdr_len)
{
    return tmx_proto_post(ep, hdr, hdr_len, NULL, 0);
}

static tmx_status_t tmx_proto_ctrl_post(tmx_ep_t *ep, uint8_t op, uint64_t sreq_id,
                                        int32_t status)
{
    tmx_proto_sync_hdr_t h;

    if (op == TMX_PROTO_RING_GRANT || op == TMX_PROTO_RING_ACK) {
        return tmx_ring_ctrl_post(ep, op, status);
    }
    memset(&h, 0, sizeof(h));
    h.base.op     = op;
    h.base.status = status;
    h.sreq_id     = sreq_id;
    return tmx_proto_post(ep, &h, sizeof(h), NULL, 0);
}

/* Control messages are never lost: when the wire is full they wait, in order, on the
 * endpoint. A receive whose sender waits for this message (ACK, FIN) completes only once it
 * is on the wire: completed, the receiver may stop calling tmx (a barrier, a sleep) while the
 * message would still need its progress, and the sender would wait for ever. With rreq NULL,
 * the message is queued or sent and nothing else happens. */
tmx_status_t tmx_proto_send_ctrl_then(tmx_ep_t *ep, uint8_t op, uint64_t sreq_id, int32_t status,
                                      tmx_request_t *rreq, tmx_status_t rstatus)
{
    tmx_proto_ctrl_t *c;
    tmx_status_t      st = TMX_ERR_PEER_FAILED;

    if (ep == NULL || ep->state == TMX_EP_FAILED || (ep->qp == NULL && !ep->xrc)) {
        goto out_complete;
    }
    /* an XRC endpoint still connecting (its initiators): queued until it is */
    if (tmx_list_is_empty(&ep->ctrl_pending) && ep->state == TMX_EP_CONNECTED) {
        st = tmx_proto_ctrl_post(ep, op, sreq_id, status);
        if (st != TMX_ERR_NO_RESOURCE) {
            goto out_complete;
        }
    }
    c = malloc(sizeof(*c));
    if (c == NULL) {
        st = TMX_ERR_NO_MEMORY;
        goto out_complete;
    }
    c->op      = op;
    c->status  = status;
    c->sreq_id = sreq_id;
    c->rreq    = rreq;
    c->rstatus = rstatus;
    tmx_list_add_tail(&ep->ctrl_pending, &c->list);
    tmx_proto_ep_schedule(ep);
    return TMX_OK;

out_complete:
    /* posted, or it never can be (the peer is gone: nobody waits for it) */
    if (rreq != NULL) {
        tmx_request_complete(rreq, rstatus);
    }
    return st;
}

tmx_status_t tmx_proto_send_ctrl(tmx_ep_t *ep, uint8_t op, uint64_t sreq_id, int32_t status)
{
    return tmx_proto_send_ctrl_then(ep, op, sreq_id, status, NULL, TMX_OK);
}

/* The endpoint failed or closes: its queued control messages will never go; the receives
 * waiting on them complete now. */
void tmx_proto_ctrl_drop(tmx_ep_t *ep)
{
    tmx_list_t *l;

    while ((l = tmx_list_pop_head(&ep->ctrl_pending)) != NULL) {
        tmx_proto_ctrl_t *c = tmx_container_of(l, tmx_proto_ctrl_t, list);
        if (c->rreq != NULL) {
            tmx_request_complete(c->rreq, c->rstatus);
        }
        free(c);
    }
}

void tmx_proto_consumed(tmx_worker_t *w, uint64_t ep_id)
{
    tmx_ep_t *ep = tmx_hash_get(&w->ep_by_id, ep_id);

    if (ep != NULL) {
        tmx_proto_credit_return(ep);
    }
}

tmx_status_t tmx_proto_eager_queue(tmx_ep_t *ep, const void *buf, size_t len, uint64_t tag,
                                   uint64_t imm)
{
    tmx_proto_hdr_t h;
    tmx_status_t    status;
    tmx_ring_tx_t  *tx = ep->ring_tx;

    if (tx != NULL && tx->full_ns != 0 && tmx_time_ns() - tx->full_ns < TMX_RING_SPILL_NS) {
        return TMX_ERR_NO_RESOURCE; /* the ring is full: wait for its slots a while (ring.h) */
    }
    if (ep->credits <= 0) {
        ep->worker->num_credit_stalls++;
        return TMX_ERR_NO_RESOURCE;
    }
    h.op       = TMX_PROTO_EAGER;
    h.reserved = imm != 0 ? TMX_PROTO_HDR_IMM : 0;
    h.status   = (int32_t)(uint32_t)imm;
    h.tag      = tag;
    status     = tmx_proto_post_ring(ep, &h, sizeof(h), buf, len, 0);
    if (status == TMX_OK) {
        ep->credits--;
    }
    return status;
}

/* The fast path: a standard eager send that completes on return. */
tmx_status_t tmx_proto_eager_try(tmx_ep_t *ep, const void *buf, size_t len, uint64_t tag,
                                 uint64_t imm)
{
    tmx_proto_hdr_t h;
    tmx_status_t    status;
    tmx_ring_tx_t  *tx = ep->ring_tx;

    if (tx != NULL && tx->seq_on) {
        /* a polling ring: its slots are the flow control, no eager credit is taken (ring.h,
         * "Credits"); when it cannot take the message, the queue does, with a credit */
        if (tmx_ring_eager_try(ep, buf, len, tag, imm) == TMX_OK) {
            return TMX_OK;
        }
        return tmx_proto_eager_queue(ep, buf, len, tag, imm);
    }
    if (ep->credits <= 0) {
        ep->worker->num_credit_stalls++;
        return TMX_ERR_NO_RESOURCE;
    }
    if (imm == 0 && ep->compact_tx && ep->ctag_tx_ok && ep->ctag_tx == tag && !ep->xrc &&
        ep->ring_tx == NULL && !ep->iface->tm_on && len <= ep->iface->max_inline) {
        /* A compact EAGER (the tag of the last one, no immediate data) that goes inline: the
         * one work request of tmx_proto_post_ring's compact case, built here and posted at
         * once (the layers in between were about 120 instructions of every small send) */
        unsigned      cgive = ep->credits_owed > TMX_PROTO_COMPACT_CREDITS
                                  ? TMX_PROTO_COMPACT_CREDITS
                                  : ep->credits_owed;
        /* without OOO placement never a fence (tmx_fence_flags): no call for it */
        unsigned      fence = ep->ooo ? tmx_fence_flags_for_step(ep->ooo, TMX_FENCE_STEP_EAGER,
                                                                 ep->worker->ctx->cfg.fence_drop)
                                      : 0;
        tmx_sge_t     sge   = {.addr = (uintptr_t)buf, .length = (uint32_t)len};
        tmx_send_wr_t wr, *bad;

        if (ep->iface->ops->send_inline != NULL) {
            /* the provider's own way to this one work request (prov.h send_inline) */
            status = ep->iface->ops->send_inline(ep->qp, buf, len,
                                                 TMX_PROTO_COMPACT | (uint32_t)cgive, fence,
                                                 TMX_WRID(TMX_WRID_CTRL, 0));
        } else {
            wr = (tmx_send_wr_t){
                .wr_id      = TMX_WRID(TMX_WRID_CTRL, 0),
                .sg_list    = &sge,
                .num_sge    = len > 0,
                .opcode     = TMX_WR_SEND_WITH_IMM,
                .send_flags = TMX_SEND_INLINE | fence,
                .imm_data   = TMX_PROTO_COMPACT | (uint32_t)cgive};
            status = ep->iface->ops->post_send(ep->qp, &wr, &bad);
        }
        if (status == TMX_OK) {
            ep->credits_owed -= cgive;
            ep->worker->compact_tx++;
            ep->credits--;
        }
        return status;
    }
    if (ep->iface->tm_on) {
        status = tmx_proto_post_tagged(ep, TMX_TMH_EAGER, 0, tag, NULL, 0, buf, len);
    } else {
        h.op       = TMX_PROTO_EAGER;
        h.reserved = imm != 0 ? TMX_PROTO_HDR_IMM : 0;
        h.status   = (int32_t)(uint32_t)imm;
        h.tag      = tag;
        if (ep->ring_tx != NULL) {
            /* tmx_proto_post's first try, straight: through the ring */
            unsigned give = ep->credits_owed > 0xffff ? 0xffff : ep->credits_owed;

            h.credits = (uint16_t)give;
            if (tmx_ring_send(ep, &h, sizeof(h), buf, len) == TMX_OK) {
                ep->ctag_tx    = tag;
                ep->ctag_tx_ok = 1;
                ep->credits_owed -= give;
                ep->credits--;
                return TMX_OK;
            }
        }
        status = tmx_proto_post_ring(ep, &h, sizeof(h), buf, len, ep->ring_tx == NULL);
    }
    if (status == TMX_OK) {
        ep->credits--;
    }
    return status;
}

/* The id the next request waiting for an ACK, FIN or read gets: in 1..2^31-1 (with
 * tag-matching offload it travels in 31 bits of the device header), never one in use. */
uint64_t tmx_proto_sreq_id_peek(tmx_worker_t *w)
{
    for (;;) {
        if (w->next_sreq_id == 0 || w->next_sreq_id > TMX_PROTO_SREQ_ID_MAX) {
            w->next_sreq_id = 1;
        }
        if (tmx_hash_get(&w->sreq_by_id, w->next_sreq_id) == NULL) {
            return w->next_sreq_id;
        }
        w->next_sreq_id++;
    }
}

/* A posted send that waits for its ACK or FIN: leaves ep->pending (if it was queued there)
 * for ep->outstanding_list and becomes findable by its id. */
void tmx_proto_outstanding_add(tmx_ep_t *ep, tmx_request_t *req)
{
    tmx_worker_t *w = ep->worker;

    req->id = tmx_proto_sreq_id_peek(w);
    w->next_sreq_id++;
    tmx_hash_put(&w->sreq_by_id, req->id, req);
    tmx_list_del(&req->pending_link);
    tmx_list_add_tail(&ep->outstanding_list, &req->pending_link);
    ep->outstanding++;
}

void tmx_proto_sreq_done(tmx_worker_t *w, tmx_request_t *sreq, tmx_status_t status)
{
    tmx_ep_t *ep = sreq->ep;

    tmx_hash_del(&w->sreq_by_id, sreq->id);
    tmx_list_del(&sreq->pending_link);
    if (ep != NULL && ep->outstanding > 0) {
        ep->outstanding--;
    }
    if (ep != NULL) {
        ep->send_events++;
    }
    if (sreq->mr != NULL) {
        tmx_mem_dereg_rndv(ep != NULL ? ep->iface : NULL, sreq);
    }
    tmx_request_complete(sreq, status);
}

/*
 * Sends a queued request. Precondition: the endpoint is connected and the request is at the
 * head of its queue. TMX_OK: complete; TMX_INPROGRESS: posted, waits for ACK or FIN;
 * TMX_ERR_NO_RESOURCE: nothing posted, try again later.
 */
tmx_status_t tmx_proto_send(tmx_ep_t *ep, tmx_request_t *req)
{
    tmx_proto_sync_hdr_t h;
    tmx_status_t         status;
    /* a polling ring takes eager messages without an eager credit (ring.h, "Credits") */
    int                  ring = ep->ring_tx != NULL && ep->ring_tx->seq_on;

    /* decided here, not at post time: the limit is agreed only once connected. With
     * tag-matching offload immediate data goes by rendezvous (proto.h). */
    if (req->len > ep->eager_max || (req->imm != 0 && ep->iface->tm_on)) {
        if (ep->credits <= 0) {
            ep->worker->num_credit_stalls++;
            return TMX_ERR_NO_RESOURCE;
        }
        req->flags |= TMX_REQ_FLAG_RNDV;
        return tmx_proto_rndv_send(ep, req);
    }
    if (!(req->flags & TMX_REQ_FLAG_SYNC)) {
        return tmx_proto_eager_try(ep, req->buf, req->len, req->tag, req->imm);
    }
    if (ring && !ep->iface->tm_on) {
        unsigned give = ep->credits_owed > 0xffff ? 0xffff : ep->credits_owed;

        memset(&h, 0, sizeof(h));
        h.base.op       = TMX_PROTO_EAGER_SYNC;
        h.base.tag      = req->tag;
        h.base.reserved = req->imm != 0 ? TMX_PROTO_HDR_IMM : 0;
        h.base.status   = (int32_t)(uint32_t)req->imm;
        h.base.credits  = (uint16_t)give;
        h.sreq_id       = tmx_proto_sreq_id_peek(ep->worker);
        if (tmx_ring_send(ep, &h, sizeof(h), req->buf, req->len) == TMX_OK) {
            ep->ctag_tx    = req->tag;
            ep->ctag_tx_ok = 1;
            ep->credits_owed -= give;
            tmx_proto_outstanding_add(ep, req);
            return TMX_INPROGRESS;
        }
    }
    if (ep->credits <= 0) {
        ep->worker->num_credit_stalls++;
        return TMX_ERR_NO_RESOURCE;
    }
    if (ep->iface->tm_on) {
        status = tmx_proto_post_tagged(ep, TMX_TMH_EAGER,
                                       TMX_PROTO_TM_SYNC | (uint32_t)tmx_proto_sreq_id_peek(ep->worker),
                                       req->tag, NULL, 0, req->buf, req->len);
    } else {
        memset(&h, 0, sizeof(h));
        h.base.op       = TMX_PROTO_EAGER_SYNC;
        h.base.tag      = req->tag;
        h.base.reserved = req->imm != 0 ? TMX_PROTO_HDR_IMM : 0;
        h.base.status   = (int32_t)(uint32_t)req->imm;
        h.sreq_id  = tmx_proto_sreq_id_peek(ep->worker); /* becomes req->id below if posted */
        status     = tmx_proto_post_ring(ep, &h, sizeof(h), req->buf, req->len, !ring);
    }
    if (status != TMX_OK) {
        return status;
    }
    ep->credits--;
    tmx_proto_outstanding_add(ep, req);
    return TMX_INPROGRESS;
}

void tmx_proto_ep_queue(tmx_ep_t *ep, tmx_request_t *req)
{
    tmx_list_add_tail(&ep->pending, &req->pending_link);
    tmx_proto_ep_schedule(ep);
}

int tmx_proto_ep_queued(const tmx_ep_t *ep)
{
    return !tmx_list_is_empty(&ep->pending) || !tmx_list_is_empty(&ep->ctrl_pending) ||
           !tmx_list_is_empty(&ep->read_pending) ||
           (ep->ring_rx != NULL && ep->ring_rx->report_due);
}

static void tmx_proto_ep_progress(tmx_ep_t *ep)
{
    tmx_list_t *l;

    tmx_ring_rx_report_retry(ep); /* one word, ahead of the rest: the sender's ring waits on it */

    while ((l = ep->ctrl_pending.next) != &ep->ctrl_pending) {
        tmx_proto_ctrl_t *c = tmx_container_of(l, tmx_proto_ctrl_t, list);
        if (tmx_proto_ctrl_post(ep, c->op, c->sreq_id, c->status) == TMX_ERR_NO_RESOURCE) {
            return;
        }
        tmx_list_del(l);
        if (c->rreq != NULL) {
            tmx_request_complete(c->rreq, c->rstatus);
        }
        free(c);
    }
    /* a read found the send queue full: nothing goes until a completion of ours makes room
     * (tmx_proto_sq_done), so a full queue costs one refused post per completion, not one per
     * progress round */
    if (ep->sq_wait || tmx_proto_rndv_read_progress(ep) == TMX_ERR_NO_RESOURCE) {
        return; /* reads of matched receives go before new sends */
    }
    while ((l = ep->pending.next) != &ep->pending) {
        tmx_request_t *req = tmx_container_of(l, tmx_request_t, pending_link);
        tmx_status_t   status;

        status = tmx_proto_send(ep, req);
        if (status == TMX_ERR_NO_RESOURCE) {
            return;
        }
        ep->send_events++;
        if (status != TMX_INPROGRESS) {
            tmx_list_del(l);
            tmx_request_complete(req, status);
        }
        /* TMX_INPROGRESS: moved to the outstanding list by the protocol */
    }
}

void tmx_proto_progress_pending(tmx_worker_t *w)
{
    tmx_list_t *l, *t;

    tmx_list_for_each_safe(l, t, &w->pending_eps) {
        tmx_ep_t *ep = tmx_container_of(l, tmx_ep_t, pending_link);

        if (ep->state == TMX_EP_CONNECTING) {
            tmx_ep_wireup_progress(ep);
            continue;
        }
        if (ep->state == TMX_EP_CONNECTED) {
            tmx_proto_ep_progress(ep);
        }
        if (ep->state != TMX_EP_CONNECTED ||
            !tmx_proto_ep_queued(ep)) {
            tmx_list_del(&ep->pending_link);
        }
    }
}

/* A message left the unexpected queue: give back its memory, and its credit if held. */
static void tmx_proto_message_release(tmx_worker_t *w, tmx_message_t *msg)
{
    w->unexp_bytes -= msg->mem_size;
    if (msg->credit_owed == TMX_MSG_CREDIT_EAGER) {
        tmx_proto_consumed(w, msg->ep_id);
    } else if (msg->credit_owed == TMX_MSG_CREDIT_RING) {
        tmx_ring_rx_unheld(w, msg->ep_id);
    }
    msg->magic = TMX_MAGIC_DEAD;
    if (msg->pooled) {
        tmx_mpool_put(&w->msg_mp, msg);
    } else {
        free(msg);
    }
}

/* Copies an eager payload into a matched receive and completes it; a synchronous one first
 * sends the ACK its sender waits for (ack_ep non-NULL), and completes once that is out. */
static void tmx_proto_deliver(tmx_request_t *rreq, uint64_t tag, const void *data, size_t len,
                              tmx_ep_t *ack_ep, uint64_t sreq_id)
{
    size_t       n      = len < rreq->len ? len : rreq->len;
    tmx_status_t status = len > rreq->len ? TMX_ERR_TRUNCATED : TMX_OK;

    tmx_copy(rreq->buf, data, n);
    rreq->info.tag    = tag;
    rreq->info.length = len;
    if (ack_ep != NULL) {
        tmx_proto_send_ctrl_then(ack_ep, TMX_PROTO_ACK, sreq_id, 0, rreq, status);
    } else {
        tmx_request_complete(rreq, status);
    }
}

void tmx_proto_recv_matched(tmx_request_t *rreq, tmx_message_t *msg)
{
    tmx_worker_t *w = rreq->worker;

    rreq->flags |= TMX_REQ_FLAG_MATCHED;
    rreq->info.sender  = msg->unexp.src;
    rreq->info.has_imm = msg->imm != 0;
    rreq->info.imm     = (uint32_t)msg->imm;
    if (msg->op == TMX_PROTO_RTS) {
        tmx_ep_t *ep = tmx_hash_get(&w->ep_by_id, msg->ep_id);
        rreq->info.tag = msg->unexp.tag;
        if (ep == NULL || ep->state == TMX_EP_FAILED) {
            rreq->info.length = msg->length;
            tmx_request_complete(rreq, TMX_ERR_PEER_FAILED);
        } else {
            tmx_proto_rndv_recv(rreq, ep, msg->sreq_id, msg->rndv_addr, msg->length,
                                msg->rndv_rkey);
        }
    } else {
        tmx_ep_t *ack_ep = msg->sync ? tmx_hash_get(&w->ep_by_id, msg->ep_id) : NULL;
        tmx_proto_deliver(rreq, msg->unexp.tag, msg->data, msg->length, ack_ep, msg->sreq_id);
    }
    tmx_proto_message_release(w, msg);
}

void tmx_proto_message_drop(tmx_worker_t *w, tmx_message_t *msg)
{
    tmx_ep_t *ep = tmx_hash_get(&w->ep_by_id, msg->ep_id);

    /* the sender still completes: as if a receive took the message and threw it away */
    if (ep != NULL && msg->op == TMX_PROTO_RTS) {
        tmx_proto_send_ctrl(ep, TMX_PROTO_FIN, msg->sreq_id, TMX_OK);
    } else if (ep != NULL && msg->sync) {
        tmx_proto_send_ctrl(ep, TMX_PROTO_ACK, msg->sreq_id, 0);
    }
    tmx_proto_message_release(w, msg);
}

/* The first message of a process past TMX_UNEXP_BUDGET: said once, because what follows can
 * look like a hang. Its sender gets the credit back only when a receive takes it, so a sender
 * with TMX_EAGER_CREDITS such messages out waits: a program that receives a sender's messages
 * in another order than they were sent (a later tag first) then waits for ever. */
static __attribute__((noinline, cold)) void tmx_proto_budget_past(tmx_worker_t *w,
                                                                  const tmx_ep_t *ep)
{
    static atomic_int said;

    if (atomic_exchange(&said, 1) == 0) {
        tmx_warn("unexpected messages hold %zu bytes, past TMX_UNEXP_BUDGET=%zu: credits of "
                 "%016llx and other senders are held until receives take their messages (a "
                 "sender with TMX_EAGER_CREDITS=%u of them waits; one whose later message is "
                 "received first waits for ever)",
                 w->unexp_bytes, w->unexp_budget, (unsigned long long)ep->remote_uuid,
                 w->eager_credits);
    }
}

/* Buffers an arrived message the receives do not take now: queued as unexpected, or held by a
 * receive the device must give back first (tmx_proto_tm_hold). NULL: out of memory. */
static tmx_message_t *tmx_proto_message_new(tmx_ep_t *ep, uint8_t op, int sync, uint64_t sreq_id,
                                            uint64_t tag, const void *data, size_t len,
                                            const tmx_proto_rts_hdr_t *rts, uint64_t imm)
{
    tmx_worker_t  *w    = ep->worker;
    size_t         dlen = op == TMX_PROTO_RTS ? 0 : len;
    /* Those between malloc's per-thread cache (up to about 1 KiB) and TMX_MSG_POOL_DATA from
     * the worker's pool, charged the pool's element (at most twice their size): malloc and
     * free of a message of a KiB took about 200 instructions (callgrind, tmx_alltoall at 8
     * ranks, where 2 messages in 5 arrive before their receive), the pool 10. */
    int            pooled = dlen <= TMX_MSG_POOL_DATA && sizeof(tmx_message_t) + dlen > 1024;
    tmx_message_t *msg    = pooled ? tmx_mpool_get(&w->msg_mp) : malloc(sizeof(*msg) + dlen);

    if (msg == NULL) {
        /* Cannot buffer: the sender is not told and the message is lost. The credit scheme
         * keeps this memory bounded, so this means the host is out of memory. */
        tmx_error("out of memory buffering an unexpected message of %zu bytes from %016llx",
                  len, (unsigned long long)ep->remote_uuid);
        return NULL;
    }
    memset(msg, 0, sizeof(*msg));
    msg->pooled    = (uint8_t)pooled;
    msg->magic     = TMX_MAGIC_MSG;
    msg->unexp.tag = tag;
    msg->unexp.src = ep->remote_uuid;
    msg->op        = op;
    msg->sync      = (uint8_t)sync;
    msg->ep_id     = ep->id;
    msg->length    = len;
    msg->mem_size  = pooled ? w->msg_mp.elem_size : sizeof(*msg) + dlen;
    msg->sreq_id   = sreq_id;
    msg->imm       = imm;
    if (rts != NULL) {
        msg->sreq_id   = rts->sreq_id;
        msg->rndv_addr = rts->addr;
        msg->rndv_rkey = rts->rkey;
    }
    if (dlen > 0) {
        memcpy(msg->data, data, dlen);
    }
    w->unexp_bytes += msg->mem_size;
    /* Within the budget the credit goes back at once; past it, only when a receive takes the
     * message, which stops a sender that floods a receiver that does not receive. */
    if (w->unexp_bytes <= w->unexp_budget) {
        tmx_proto_credit_return(ep);
    } else if (ep->ring_rx_now) {
        tmx_proto_budget_past(w, ep);
        msg->credit_owed = TMX_MSG_CREDIT_RING; /* its slot is not reported free until then */
        ep->ring_held++;
    } else {
        tmx_proto_budget_past(w, ep);
        msg->credit_owed = TMX_MSG_CREDIT_EAGER;
    }
    return msg;
}

/* A message that found no receive: to the unexpected queue. Also the way back for a message
 * a receive held until the device lost the race for it (tm.c). */
void tmx_proto_unexpected_add(tmx_worker_t *w, tmx_message_t *msg)
{
    w->num_unexp++;
    tmx_tag_unexp_add(&w->tm, &msg->unexp);
}

/* The receive rreq (out of the expected queue) takes an arrived message: now, or once the
 * device gave it back. */
static void tmx_proto_rx_matched(tmx_request_t *rreq, tmx_ep_t *ep, uint8_t op, int sync,
                                 uint64_t sreq_id, uint64_t tag, const void *data, size_t len,
                                 const tmx_proto_rts_hdr_t *rts, uint64_t imm)
{
    rreq->flags &= (uint16_t)~TMX_REQ_FLAG_EXPECTED;
    if (rreq->worker->tm_iface != NULL && tmx_proto_tm_claim(rreq)) { /* TM: may be held */
        tmx_message_t *msg = tmx_proto_message_new(ep, op, sync, sreq_id, tag, data, len, rts,
                                                   imm);
        if (msg != NULL) {
            tmx_proto_tm_hold(rreq, msg);
        }
        return;
    }
    rreq->flags |= TMX_REQ_FLAG_MATCHED;
    rreq->info.sender  = ep->remote_uuid;
    rreq->info.has_imm = imm != 0;
    rreq->info.imm     = (uint32_t)imm;
    tmx_proto_credit_return(ep);
    if (op == TMX_PROTO_RTS) {
        rreq->info.tag = tag;
        tmx_proto_rndv_recv(rreq, ep, rts->sreq_id, rts->addr, rts->length, rts->rkey);
    } else {
        tmx_proto_deliver(rreq, tag, data, len, sync ? ep : NULL, sreq_id);
    }
}

void tmx_proto_rx_eager(tmx_ep_t *ep, uint64_t tag, const void *data, size_t len, int sync,
                        uint64_t sreq_id, uint64_t imm)
{
    tmx_worker_t  *w   = ep->worker;
    tmx_tag_exp_t *exp = tmx_tag_exp_match(&w->tm, tag, ep->remote_uuid);
    tmx_message_t *msg;

    if (exp != NULL) {
        tmx_proto_rx_matched(tmx_container_of(exp, tmx_request_t, exp), ep, TMX_PROTO_EAGER, sync,
                             sreq_id, tag, data, len, NULL, imm);
        return;
    }
    msg = tmx_proto_message_new(ep, TMX_PROTO_EAGER, sync, sreq_id, tag, data, len, NULL, imm);
    if (msg != NULL) {
        tmx_proto_unexpected_add(w, msg);
    }
}

void tmx_proto_rx_rts(tmx_ep_t *ep, const tmx_proto_rts_hdr_t *rts)
{
    tmx_worker_t  *w   = ep->worker;
    tmx_tag_exp_t *exp = tmx_tag_exp_match(&w->tm, rts->base.tag, ep->remote_uuid);
    uint64_t       imm = rts->base.reserved & TMX_PROTO_HDR_IMM ? TMX_PROTO_IMM(rts->reserved) : 0;
    tmx_message_t *msg;

    if (exp != NULL) {
        tmx_proto_rx_matched(tmx_container_of(exp, tmx_request_t, exp), ep, TMX_PROTO_RTS, 0, 0,
                             rts->base.tag, NULL, rts->length, rts, imm);
        return;
    }
    msg = tmx_proto_message_new(ep, TMX_PROTO_RTS, 0, 0, rts->base.tag, NULL, rts->length, rts,
                                imm);
    if (msg != NULL) {
        tmx_proto_unexpected_add(w, msg);
    }
}

/* A sender's request named by a peer's ACK/FIN: only one of ours, on this endpoint. */
tmx_request_t *tmx_proto_sreq_lookup(tmx_ep_t *ep, uint64_t id, unsigned need_flag)
{
    tmx_request_t *req = tmx_hash_get(&ep->worker->sreq_by_id, id);

    if (req == NULL || req->type != TMX_REQ_SEND || req->ep != ep || !(req->flags & need_flag)) {
        tmx_warn("peer %016llx named unknown send request %llu; ignored",
                 (unsigned long long)ep->remote_uuid, (unsigned long long)id);
        return NULL;
    }
    return req;
}

static tmx_status_t tmx_proto_fin_status(int32_t s)
{
    switch (s) {
    case TMX_OK:
    case TMX_ERR_REMOTE_ACCESS:
    case TMX_ERR_PEER_FAILED:
    case TMX_ERR_NO_MEMORY:
    case TMX_ERR_NO_RESOURCE:
        return (tmx_status_t)s;
    default:
        return TMX_ERR_IO;
    }
}

/* Credits the peer gave back. */
void tmx_proto_credits_add(tmx_ep_t *ep, unsigned credits)
{
    int max = (int)ep->worker->eager_credits;

    if (credits > 0) {
        ep->credits += (int)(credits < (unsigned)max ? credits : (unsigned)max);
        if (ep->credits > max) {
            ep->credits = max; /* a peer cannot grant more than the window */
        }
    }
}

/* A plain eager message (no immediate data, not synchronous, no tag-matching offload) that
 * the posted receive exp takes: what tmx_proto_rx_matched and tmx_proto_deliver do for it, in
 * one place without their calls (tmx_proto_rx_ring and tmx_proto_rx_compact: every message
 * of a bandwidth test and of a ping-pong). */
static inline __attribute__((always_inline)) void
tmx_proto_rx_take(tmx_ep_t *ep, tmx_tag_exp_t *exp, uint64_t tag, const uint8_t *data,
                  size_t dlen)
{
    tmx_request_t *rreq = tmx_container_of(exp, tmx_request_t, exp);
    size_t         n    = dlen < rreq->len ? dlen : rreq->len;

    rreq->flags        = (uint16_t)((rreq->flags & ~TMX_REQ_FLAG_EXPECTED) | TMX_REQ_FLAG_MATCHED);
    rreq->info.sender  = ep->remote_uuid;
    rreq->info.has_imm = 0;
    rreq->info.imm     = 0;
    tmx_proto_credit_return(ep);
    /* tmx_proto_deliver */
    tmx_copy(rreq->buf, data, n);
    rreq->info.tag    = tag;
    rreq->info.length = dlen;
    tmx_request_complete(rreq, dlen > rreq->len ? TMX_ERR_TRUNCATED : TMX_OK);
}

/* A compact EAGER (proto.h): the payload alone, its tag the last full header's. */
static void tmx_proto_rx_compact(tmx_iface_t *iface, tmx_ep_t *ep, const tmx_wc_t *wc)
{
    tmx_worker_t  *w = iface->worker;
    const uint8_t *buf;
    tmx_tag_exp_t *exp;
    tmx_message_t *msg;

    if (!(wc->imm_data & TMX_PROTO_COMPACT) || !ep->ctag_rx_ok ||
        wc->byte_len > iface->rx_size || wc->byte_len > ep->eager_max) {
        tmx_error("malformed compact message (%u bytes, immediate data %#x%s) from %016llx: "
                  "the connection fails", wc->byte_len, wc->imm_data,
                  ep->ctag_rx_ok ? "" : ", no tag before it",
                  (unsigned long long)ep->remote_uuid);
        tmx_ep_lost(ep, TMX_ERR_PEER_FAILED);
        return;
    }
    buf = wc->data != NULL ? (const uint8_t *)wc->data
                           : iface->rx_bufs + TMX_WRID_VAL(wc->wr_id) * iface->rx_size;
    if (ep->passive && !ep->ring_tried) {
        tmx_ring_rx_counted(ep); /* an eager message all the same: a ring may be lent (IMM) */
    }
    w->rx_msgs++;
    w->compact_rx++;
    tmx_proto_credits_add(ep, wc->imm_data & TMX_PROTO_COMPACT_CREDITS);
    if (w->tm_iface != NULL) {
        tmx_proto_rx_eager(ep, ep->ctag_rx, buf, wc->byte_len, 0, 0, 0);
        return;
    }
    /* tmx_proto_rx_eager without tag-matching offload, its matched case inline */
    exp = tmx_tag_exp_match(&w->tm, ep->ctag_rx, ep->remote_uuid);
    if (exp != NULL) {
        tmx_proto_rx_take(ep, exp, ep->ctag_rx, buf, wc->byte_len);
        return;
    }
    msg = tmx_proto_message_new(ep, TMX_PROTO_EAGER, 0, 0, ep->ctag_rx, buf, wc->byte_len, NULL,
                                0);
    if (msg != NULL) {
        tmx_proto_unexpected_add(w, msg);
    }
}

void tmx_proto_rx(tmx_iface_t *iface, const tmx_wc_t *wc)
{
    /* through an XRC SRQ, every peer's: the endpoint is named by the immediate data */
    tmx_ep_t *ep = iface->xrc_on && TMX_WRID_VAL(wc->wr_id) >= iface->rx_basic
                       ? tmx_xrc_rx_ep(iface, wc)
                       : tmx_ep_by_qpn(iface->worker, iface, wc->qp_num);
    const uint8_t *buf;

    if (ep == NULL) {
        tmx_debug("message on unknown qp %u dropped", wc->qp_num);
        return;
    }
    if (ep->compact_rx && wc->opcode == TMX_WC_RECV && (wc->wc_flags & TMX_WC_WITH_IMM) &&
        !ep->xrc) {
        /* we lend no polling ring (TMX_WIREUP_F_COMPACT): the immediate data of a SEND is a
         * compact EAGER's, never a ring's sequence number */
        tmx_proto_rx_compact(iface, ep, wc);
        return;
    }
    if (ep->ring_rx != NULL) {
        if (wc->opcode == TMX_WC_RECV_RDMA_WITH_IMM) {
            tmx_ring_rx_imm(ep, wc); /* a ring message in IMM mode */
            return;
        }
        if (tmx_ring_rx_seq(ep, wc) != 0) { /* the ring's messages numbered before first */
            return;
        }
    } else if (wc->opcode != TMX_WC_RECV) {
        tmx_warn("unexpected completion (opcode %d) from %016llx dropped", (int)wc->opcode,
                 (unsigned long long)ep->remote_uuid);
        return;
    }
    if (wc->byte_len > iface->rx_size) {
        tmx_warn("malformed message (%u bytes) from %016llx dropped", wc->byte_len,
                 (unsigned long long)ep->remote_uuid);
        return;
    }
    /* in place (TMX_SRQ_F_INPLACE): where the device has it, valid during this dispatch;
     * tmx_proto_rx_msg reads each byte once (headers copied out, data copied to its receive
     * or to an unexpected message) */
    buf = wc->data != NULL ? (const uint8_t *)wc->data
                           : iface->rx_bufs + TMX_WRID_VAL(wc->wr_id) * iface->rx_size;
    if (ep->passive && !ep->ring_tried && wc->byte_len > 0 &&
        (buf[0] == TMX_PROTO_EAGER || buf[0] == TMX_PROTO_EAGER_SYNC)) {
        tmx_ring_rx_counted(ep); /* a sender with traffic may get a ring */
    }
    tmx_proto_rx_msg(iface, ep, buf, wc->byte_len);
}

/* A message of ours (tmx_proto_hdr_t first) in a receive buffer. */
void tmx_proto_rx_msg(tmx_iface_t *iface, tmx_ep_t *ep, const uint8_t *buf, size_t len)
{
    tmx_worker_t    *w = iface->worker;
    tmx_proto_hdr_t  h;
    tmx_request_t   *sreq;
    uint64_t         imm;

    if (len < sizeof(h)) {
        tmx_warn("malformed message (%zu bytes) from %016llx dropped", len,
                 (unsigned long long)ep->remote_uuid);
        return;
    }
    memcpy(&h, buf, sizeof(h));
    w->rx_msgs++;
    if (iface->tm_on &&
        (h.op == TMX_PROTO_EAGER || h.op == TMX_PROTO_EAGER_SYNC || h.op == TMX_PROTO_RTS)) {
        goto malformed; /* tagged data must come tagged, or it would bypass the device's order */
    }
    if ((h.op == TMX_PROTO_EAGER || h.op == TMX_PROTO_EAGER_SYNC || h.op == TMX_PROTO_RTS) &&
        (h.reserved & ~TMX_PROTO_HDR_IMM) != 0) {
        goto malformed;
    }
    imm = h.reserved & TMX_PROTO_HDR_IMM ? TMX_PROTO_IMM((uint32_t)h.status) : 0;
    tmx_proto_credits_add(ep, h.credits);
    switch (h.op) {
    case TMX_PROTO_EAGER:
        ep->ctag_rx    = h.tag; /* a compact EAGER after it has this tag */
        ep->ctag_rx_ok = 1;
        tmx_proto_rx_eager(ep, h.tag, buf + sizeof(h), len - sizeof(h), 0, 0, imm);
        break;
    case TMX_PROTO_EAGER_SYNC: {
        tmx_proto_sync_hdr_t sh;
        if (len < sizeof(sh)) {
            goto malformed;
        }
        memcpy(&sh, buf, sizeof(sh));
        ep->ctag_rx    = h.tag;
        ep->ctag_rx_ok = 1;
        tmx_proto_rx_eager(ep, h.tag, buf + sizeof(sh), len - sizeof(sh), 1, sh.sreq_id, imm);
        break;
    }
    case TMX_PROTO_RTS: {
        tmx_proto_rts_hdr_t rh;
        if (len < sizeof(rh)) {
            goto malformed;
        }
        memcpy(&rh, buf, sizeof(rh));
        if (rh.length > TMX_MAX_MSG) {
            goto malformed;
        }
        tmx_proto_rx_rts(ep, &rh);
        break;
    }
    case TMX_PROTO_ACK:
    case TMX_PROTO_FIN: {
        tmx_proto_sync_hdr_t sh;
        if (len < sizeof(sh)) {
            goto malformed;
        }
        memcpy(&sh, buf, sizeof(sh));
        sreq = tmx_proto_sreq_lookup(ep, sh.sreq_id,
                                     h.op == TMX_PROTO_ACK ? TMX_REQ_FLAG_SYNC : TMX_REQ_FLAG_RNDV);
        if (sreq != NULL) {
            tmx_proto_sreq_done(w, sreq, h.op == TMX_PROTO_ACK ? TMX_OK
                                                               : tmx_proto_fin_status(h.status));
        }
        break;
    }
    case TMX_PROTO_CREDIT:
        break;
    case TMX_PROTO_DISC:
        tmx_proto_send_ctrl(ep, TMX_PROTO_DISC_ACK, 0, 0);
        tmx_ep_peer_disconnected(ep);
        return;
    case TMX_PROTO_DISC_ACK:
        ep->disc_acked = 1;
        break;
    case TMX_PROTO_RING_GRANT:
        tmx_ring_tx_grant(ep, buf, len);
        break;
    case TMX_PROTO_RING_ACK:
        tmx_ring_rx_ack(ep, buf, len);
        break;
    case TMX_PROTO_RING_REVOKE:
        tmx_ring_tx_revoke(ep);
        break;
    case TMX_PROTO_RING_RETURN:
        tmx_ring_rx_return(ep);
        break;
    case TMX_PROTO_RING_DONE:
        tmx_ring_tx_done(ep);
        break;
    default:
        goto malformed;
    }
    if (!tmx_list_is_empty(&ep->pending)) {
        tmx_proto_ep_schedule(ep); /* credits may have come back */
    }
    return;

malformed:
    tmx_warn("malformed message (op %u, %zu bytes) from %016llx dropped", h.op, len,
             (unsigned long long)ep->remote_uuid);
}

/* What tmx_proto_rx_msg, tmx_proto_rx_eager, tmx_proto_rx_matched and tmx_proto_deliver do
 * for a plain EAGER (no immediate data, not synchronous) that a posted receive takes, without
 * tag-matching offload, in one function: the bandwidth test's every message. Anything else
 * takes the general way. */
void tmx_proto_rx_ring(tmx_iface_t *iface, tmx_ep_t *ep, const uint8_t *buf, size_t len)
{
    tmx_worker_t   *w = iface->worker;
    tmx_proto_hdr_t h;
    tmx_tag_exp_t  *exp;

    memcpy(&h, buf, sizeof(h));
    if (h.op != TMX_PROTO_EAGER || h.reserved != 0 || iface->tm_on || w->tm_iface != NULL) {
        tmx_proto_rx_msg(iface, ep, buf, len);
        return;
    }
    exp = tmx_tag_exp_match(&w->tm, h.tag, ep->remote_uuid);
    if (exp == NULL) {
        tmx_proto_rx_msg(iface, ep, buf, len); /* unexpected: it matches nothing there either */
        return;
    }
    w->rx_msgs++;
    tmx_proto_credits_add(ep, h.credits);
    ep->ctag_rx    = h.tag;
    ep->ctag_rx_ok = 1;
    tmx_proto_rx_take(ep, exp, h.tag, buf + sizeof(h), len - sizeof(h));
    if (!tmx_list_is_empty(&ep->pending)) {
        tmx_proto_ep_schedule(ep); /* credits may have come back */
    }
}

void tmx_proto_tx_done(tmx_iface_t *iface, const tmx_wc_t *wc)
{
    uint64_t val = TMX_WRID_VAL(wc->wr_id);

    if (TMX_WRID_KIND(wc->wr_id) == TMX_WRID_TX_BUF && val < iface->tx_count) {
        iface->tx_free[iface->tx_free_top++] = (uint32_t)val;
        tmx_ring_sq_done(iface, wc);
    }
    if (wc->status != TMX_WC_SUCCESS && wc->status != TMX_WC_WR_FLUSH_ERR) {
        tmx_ep_t *ep = tmx_ep_by_qpn(iface->worker, iface, wc->qp_num);
        if (ep == NULL && tmx_xrc_completion_failed(iface, wc)) {
            return; /* an XRC initiator's: the endpoints it concerns failed */
        }
        if (ep != NULL) {
            tmx_warn("send to %016llx failed: %s", (unsigned long long)ep->remote_uuid,
                     tmx_wc_status_string(wc->status));
            tmx_ep_lost(ep, TMX_ERR_PEER_FAILED);
        }
    }
}
