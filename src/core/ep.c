/*
 * Endpoints and connection wire-up.
 *
 * Every endpoint is one RC connection, made over the interfaces' UD QPs:
 *   A: ep_create -> RC QP in INIT, WIREUP_REQ {A's uuid, ep id, device address, QP blob}
 *   B: creates a *passive* endpoint for that connection, QP INIT->RTR->RTS, WIREUP_REP
 *   A: QP RTR->RTS, endpoint connected, queued sends go out.
 * A connection carries A's messages to B and B's protocol replies (ACK, FIN, credits) back.
 * B's own messages to A travel on B's own endpoint (its own connection), so simultaneous
 * connects need no tie-breaking, and order is kept per endpoint as MPI requires.
 *
 * Close: each side sends DISC and waits (bounded by TMX_PEER_TIMEOUT) for DISC_ACK or the
 * peer's own DISC; after that nothing more travels on the QP and it can be destroyed.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "proto/proto.h"
#include "proto/ring.h"
#include "util/log.h"
#include "util/time.h"

#define TMX_WIREUP_MAGIC   0x57584d54u
#define TMX_WIREUP_REQ     1
#define TMX_WIREUP_REP     2
#define TMX_WIREUP_NAK     3 /* the request cannot be served: the sides disagree on TM */

/* flags of a wire-up message */
#define TMX_WIREUP_F_TM    1u /* the sender's device matches tags: a second QP blob follows */
#define TMX_WIREUP_F_XRC   2u /* the sender connects through XRC: its node and SRQ numbers
                               * (xrc.c) stand where the QP blob would */
#define TMX_WIREUP_F_COMPACT 4u /* the sender takes compact EAGER messages (proto.h): it
                                 * lends this connection no polling eager-RDMA ring */
#define TMX_WIREUP_RESEND  0.5 /* seconds */

typedef struct tmx_wireup_msg {
    uint32_t magic;
    uint8_t  type;
    uint8_t  flags;        /* TMX_WIREUP_F_* */
    uint8_t  reserved[2];
    uint64_t src_uuid;
    uint64_t src_ep_id;
    uint64_t dst_ep_id;
    uint32_t src_ud_qpn;
    uint32_t eager_max;    /* the sender's eager limit: both sides use the smaller */
    uint16_t tm_addr_len;  /* TMX_WIREUP_F_TM: bytes of the TM QP's blob */
    uint16_t xrc_len;      /* TMX_WIREUP_F_TM and _F_XRC: bytes of the XRC part, after the
                            * TM QP's blob (with _F_XRC alone it stands for the QP blob) */
    uint16_t dev_addr_len;
    uint16_t qp_addr_len;
    /* dev_addr_len + qp_addr_len (+ tm_addr_len (+ xrc_len)) bytes follow */
} tmx_wireup_msg_t;

/* worker.c: a compact address expanded into out (at least 1024 bytes) */
tmx_status_t tmx_worker_addr_expand(const void **addr_p, size_t *len_p, void *out);
tmx_status_t tmx_worker_addr_resolve(tmx_worker_t *w, const void *addr, size_t len,
                                     uint64_t *uuid_p, tmx_iface_t **iface_p,
                                     const uint8_t **dev_addr_p, size_t *dev_addr_len_p,
                                     uint32_t *ud_qpn_p);

static uint64_t tmx_ep_qpn_key(tmx_worker_t *w, tmx_iface_t *iface, uint32_t qpn)
{
    return ((uint64_t)(iface - w->ifaces) << 32) | qpn;
}

static uint64_t tmx_ep_passive_key(uint64_t uuid, uint64_t ep_id)
{
    /* 0 would be fine as a key, but keep it distinct from nothing-set */
    return tmx_hash_u64(uuid ^ tmx_hash_u64(ep_id)) | 1;
}

/* Traffic comes in runs from one peer: the last answer is kept per interface (and forgotten
 * when its endpoint loses its QP). */
tmx_ep_t *tmx_ep_by_qpn(tmx_worker_t *w, tmx_iface_t *iface, uint32_t qpn)
{
    tmx_ep_t *ep;

    if (iface->last_ep != NULL && iface->last_qpn == qpn) {
        return iface->last_ep;
    }
    ep = tmx_hash_get(&w->ep_by_qpn, tmx_ep_qpn_key(w, iface, qpn));
    if (ep != NULL) {
        iface->last_qpn = qpn;
        iface->last_ep  = ep;
    }
    return ep;
}

static tmx_status_t tmx_ep_qp_new(tmx_ep_t *ep, uint32_t max_send_wr, tmx_qp_t **qp_p)
{
    tmx_iface_t       *iface = ep->iface;
    tmx_qp_init_attr_t attr;
    tmx_qp_attr_t      mod;
    tmx_status_t       status;

    memset(&attr, 0, sizeof(attr));
    attr.type        = TMX_QPT_RC;
    attr.send_cq     = iface->cq;
    attr.recv_cq     = iface->cq;
    attr.srq         = iface->srq;
    attr.max_send_wr = max_send_wr;
    attr.max_inline  = max_send_wr > 0 ? (uint32_t)iface->max_inline : 0;
    status = iface->ops->qp_create(iface->pd, &attr, qp_p);
    if (status != TMX_OK) {
        return status;
    }
    memset(&mod, 0, sizeof(mod));
    mod.state = TMX_QPS_INIT;
    status    = iface->ops->qp_modify(*qp_p, &mod, TMX_QP_ATTR_STATE);
    if (status == TMX_OK) {
        status = tmx_hash_put(&ep->worker->ep_by_qpn,
                              tmx_ep_qpn_key(ep->worker, iface, (*qp_p)->qp_num), ep);
    }
    if (status != TMX_OK) {
        iface->ops->qp_destroy(*qp_p);
        *qp_p = NULL;
    }
    return status;
}

/* TMX_SEND_QUEUE, within the deepest send queue the device makes (max_qp_wr): a deeper one
 * fails the QP's creation, and with it every connection (tmx_iface_init says so once). */
static uint32_t tmx_ep_sq_depth(const tmx_iface_t *iface)
{
    uint32_t want = iface->worker->ctx->cfg.send_queue;
    uint32_t max  = iface->dev->attr.max_qp_wr;

    return (max != 0 && want > max) ? max : want;
}

/* Our QP; with tag-matching offload also the TM QP the peer's sends arrive on, whose send
 * queue is the device's (created with none of ours, as mlx5 requires). With XRC none: the
 * interface's initiators carry our messages (xrc.c); with XRC and TM both, the pair of TM for
 * the tagged stream, and the initiators for the rest (xrc.c "TM and XRC"). */
static tmx_status_t tmx_ep_qp_create(tmx_ep_t *ep)
{
    tmx_status_t status;

    if (ep->iface->xrc_on) {
        tmx_xrc_ep_init(ep);
        if (!ep->iface->tm_on) {
            return TMX_OK;
        }
    }
    status = tmx_ep_qp_new(ep, tmx_ep_sq_depth(ep->iface), &ep->qp);

    if (status != TMX_OK || !ep->iface->tm_on) {
        return status;
    }
    status = tmx_ep_qp_new(ep, 0, &ep->tm_qp);
    if (status != TMX_OK) {
        tmx_hash_del(&ep->worker->ep_by_qpn,
                     tmx_ep_qpn_key(ep->worker, ep->iface, ep->qp->qp_num));
        ep->iface->ops->qp_destroy(ep->qp);
        ep->qp = NULL;
    }
    return status;
}

/* Whether ep's RC QPs enable out-of-order data placement: TMX_OOO=auto|yes where the device
 * offers it (yes warns once where it does not). */
static int tmx_ep_ooo_wanted(tmx_ep_t *ep)
{
    static int warned;
    int        want = ep->worker->ctx->cfg.ooo;

    if (want == 0) {
        return 0;
    }
    if (ep->iface->dev->attr.caps & TMX_DEV_CAP_OOO) {
        return 1;
    }
    if (want == 1 && !warned) {
        warned = 1;
        tmx_warn("connect on %s: TMX_OOO=yes but the device offers no out-of-order placement",
                 ep->iface->dev->name);
    }
    return 0;
}

tmx_status_t tmx_ep_data_path_check(const tmx_ep_t *ep)
{
    if (ep->ooo && ep->poll_data) {
        tmx_error("endpoint to %016llx: polling on data with out-of-order placement on",
                  (unsigned long long)ep->remote_uuid);
        return TMX_ERR_INVALID_PARAM;
    }
    return TMX_OK;
}

static tmx_status_t tmx_ep_qp_connect_one(tmx_ep_t *ep, tmx_qp_t *qp, const void *blob,
                                          size_t len)
{
    const tmx_prov_ops_t *ops = ep->iface->ops;
    tmx_qp_attr_t         mod;
    tmx_status_t          status;

    memset(&mod, 0, sizeof(mod));
    mod.state           = TMX_QPS_RTR;
    mod.remote_addr     = blob;
    mod.remote_addr_len = len;
    mod.ooo             = tmx_ep_ooo_wanted(ep);
    status = ops->qp_modify(qp, &mod,
                            TMX_QP_ATTR_STATE | TMX_QP_ATTR_REMOTE |
                                (mod.ooo ? TMX_QP_ATTR_OOO : 0));
    if (status != TMX_OK) {
        return status;
    }
    ep->ooo |= mod.ooo;
    mod.state = TMX_QPS_RTS;
    return ops->qp_modify(qp, &mod, TMX_QP_ATTR_STATE);
}

/* Without TM our QP connects to the peer's; with TM ours to the peer's TM QP and our TM QP to
 * the peer's QP. */
static tmx_status_t tmx_ep_qp_connect(tmx_ep_t *ep, const tmx_wireup_msg_t *msg,
                                      const uint8_t *qp_addr)
{
    const uint8_t *tm_addr = qp_addr + msg->qp_addr_len;
    tmx_status_t   status;

    if (!ep->iface->tm_on) {
        status = tmx_ep_qp_connect_one(ep, ep->qp, qp_addr, msg->qp_addr_len);
    } else {
        status = tmx_ep_qp_connect_one(ep, ep->qp, tm_addr, msg->tm_addr_len);
        if (status == TMX_OK) {
            status = tmx_ep_qp_connect_one(ep, ep->tm_qp, qp_addr, msg->qp_addr_len);
        }
    }
    if (status == TMX_OK) {
        if (ep->ooo) {
            ep->worker->stat_ooo_eps++;
            tmx_info("endpoint to %016llx: out-of-order placement on; data path: completions",
                     (unsigned long long)ep->remote_uuid);
        }
        status = tmx_ep_data_path_check(ep);
    }
    if (status == TMX_OK) {
        tmx_ring_ep_connected(ep); /* the eager-RDMA ring's mode, from the device's answer */
    }
    return status;
}

static tmx_ep_t *tmx_ep_alloc(tmx_worker_t *w, tmx_iface_t *iface)
{
    tmx_ep_t *ep = calloc(1, sizeof(*ep));

    if (ep == NULL) {
        return NULL;
    }
    ep->worker  = w;
    ep->iface   = iface;
    ep->id      = w->next_ep_id++;
    ep->credits   = (int)w->eager_credits;
    ep->eager_max = w->eager_max;
    ep->state   = TMX_EP_CONNECTING;
    tmx_list_init(&ep->pending);
    tmx_list_init(&ep->pending_link);
    tmx_list_init(&ep->outstanding_list);
    tmx_list_init(&ep->ctrl_pending);
    tmx_list_init(&ep->read_pending);
    return ep;
}

/* One wire-up datagram (copied at the post: inline) to a peer's UD QP. */
static tmx_status_t tmx_ep_ud_post(tmx_iface_t *iface, tmx_ah_t *ah, uint32_t qpn,
                                   const void *buf, size_t len)
{
    tmx_sge_t     sge = {.addr = (uintptr_t)buf, .length = (uint32_t)len, .lkey = 0};
    tmx_send_wr_t wr, *bad;

    memset(&wr, 0, sizeof(wr));
    wr.wr_id         = TMX_WRID(TMX_WRID_CTRL, 0);
    wr.sg_list       = &sge;
    wr.num_sge       = 1;
    wr.opcode        = TMX_WR_SEND;
    wr.send_flags    = TMX_SEND_INLINE;
    wr.ud.ah         = ah;
    wr.ud.remote_qpn = qpn;
    return iface->ops->post_send(iface->ud_qp, &wr, &bad);
}

static tmx_status_t tmx_ep_send_wireup(tmx_ep_t *ep, uint8_t type, uint64_t dst_ep_id)
{
    tmx_iface_t      *iface = ep->iface;
    uint8_t           buf[sizeof(tmx_wireup_msg_t) + TMX_DEV_ADDR_MAX + 2 * TMX_QP_ADDR_MAX +
                          TMX_WIREUP_XRC_MAX];
    tmx_wireup_msg_t  msg;
    size_t            qp_len = TMX_QP_ADDR_MAX, tm_len = 0, xrc_len = 0;
    tmx_status_t      status;

    memset(&msg, 0, sizeof(msg));
    if (ep->xrc && !ep->xrc_tm) {
        qp_len = tmx_xrc_wireup_pack(ep, buf + sizeof(msg) + iface->dev_addr_len,
                                     TMX_QP_ADDR_MAX);
        msg.flags |= TMX_WIREUP_F_XRC;
        status = qp_len > 0 ? TMX_OK : TMX_ERR_INTERNAL;
    } else {
        status = iface->ops->qp_get_addr(ep->qp, buf + sizeof(msg) + iface->dev_addr_len,
                                         &qp_len);
    }
    if (status != TMX_OK) {
        return status;
    }
    if (iface->tm_on) {
        tm_len = TMX_QP_ADDR_MAX;
        status = iface->ops->qp_get_addr(ep->tm_qp,
                                         buf + sizeof(msg) + iface->dev_addr_len + qp_len,
                                         &tm_len);
        if (status != TMX_OK) {
            return status;
        }
        msg.flags |= TMX_WIREUP_F_TM;
    }
    if (ep->xrc_tm) {
        xrc_len = tmx_xrc_wireup_pack(ep, buf + sizeof(msg) + iface->dev_addr_len + qp_len +
                                              tm_len,
                                      TMX_WIREUP_XRC_MAX);
        if (xrc_len == 0) {
            return TMX_ERR_INTERNAL;
        }
        msg.flags |= TMX_WIREUP_F_XRC;
    }
    /* compact EAGER messages carry their credits in the immediate data, which a polling ring
     * uses to number the SENDs: only where we lend none (the passive side knows its ring's
     * mode by now, tmx_ep_qp_connect; the active side lends no ring) */
    if (!iface->tm_on && !ep->xrc &&
        (!ep->passive || ep->ring_choice == TMX_RING_MODE_NONE ||
         ep->ring_choice == TMX_RING_MODE_IMM)) {
        msg.flags |= TMX_WIREUP_F_COMPACT;
        ep->compact_rx = 1;
    }
    msg.magic        = TMX_WIREUP_MAGIC;
    msg.type         = type;
    msg.src_uuid     = ep->worker->uuid;
    msg.src_ep_id    = ep->id;
    msg.dst_ep_id    = dst_ep_id;
    msg.src_ud_qpn   = iface->ud_qpn;
    msg.eager_max    = (uint32_t)ep->worker->eager_max;
    msg.dev_addr_len = (uint16_t)iface->dev_addr_len;
    msg.qp_addr_len  = (uint16_t)qp_len;
    msg.tm_addr_len  = (uint16_t)tm_len;
    msg.xrc_len      = (uint16_t)xrc_len;
    memcpy(buf, &msg, sizeof(msg));
    memcpy(buf + sizeof(msg), iface->dev_addr, iface->dev_addr_len);

    status = tmx_ep_ud_post(iface, ep->ah, ep->remote_ud_qpn, buf,
                            sizeof(msg) + iface->dev_addr_len + qp_len + tm_len + xrc_len);
    if (status == TMX_OK) {
        ep->wireup_time = tmx_time_sec();
    }
    return status;
}

/* xrc.c: a passive XRC endpoint replies once connected. */
void tmx_ep_wireup_reply(tmx_ep_t *ep)
{
    tmx_ep_send_wireup(ep, TMX_WIREUP_REP, ep->remote_id);
}

/* An XRC message (xrc.c): the wire-up header, then payload, to a peer's UD QP. */
tmx_status_t tmx_ep_wireup_send_xrc(tmx_iface_t *iface, tmx_ah_t *ah, uint32_t ud_qpn,
                                    uint8_t type, uint64_t src_ep_id, uint64_t dst_ep_id,
                                    const void *payload, size_t len)
{
    uint8_t          buf[sizeof(tmx_wireup_msg_t) + TMX_DEV_ADDR_MAX + TMX_WIREUP_XRC_MAX];
    tmx_wireup_msg_t msg;

    if (len == 0 || len > TMX_WIREUP_XRC_MAX) {
        return TMX_ERR_INVALID_PARAM;
    }
    memset(&msg, 0, sizeof(msg));
    msg.magic        = TMX_WIREUP_MAGIC;
    msg.type         = type;
    msg.flags        = TMX_WIREUP_F_XRC;
    msg.src_uuid     = iface->worker->uuid;
    msg.src_ep_id    = src_ep_id;
    msg.dst_ep_id    = dst_ep_id;
    msg.src_ud_qpn   = iface->ud_qpn;
    msg.eager_max    = (uint32_t)iface->worker->eager_max;
    msg.dev_addr_len = (uint16_t)iface->dev_addr_len;
    msg.qp_addr_len  = (uint16_t)len;
    memcpy(buf, &msg, sizeof(msg));
    memcpy(buf + sizeof(msg), iface->dev_addr, iface->dev_addr_len);
    memcpy(buf + sizeof(msg) + iface->dev_addr_len, payload, len);
    return tmx_ep_ud_post(iface, ah, ud_qpn, buf, sizeof(msg) + iface->dev_addr_len + len);
}

static void tmx_ep_register(tmx_ep_t *ep)
{
    tmx_list_add_tail(&ep->worker->eps, &ep->list);
    tmx_hash_put(&ep->worker->ep_by_id, ep->id, ep);
}

void tmx_ep_destroy(tmx_ep_t *ep)
{
    tmx_worker_t *w = ep->worker;

    if (ep->xrc) {
        tmx_xrc_ep_release(ep); /* its queue pairs are the interface's */
    }
    if (ep->qp != NULL) {
        tmx_hash_del(&w->ep_by_qpn, tmx_ep_qpn_key(w, ep->iface, ep->qp->qp_num));
        if (ep->iface->last_ep == ep) {
            ep->iface->last_ep = NULL;
        }
        ep->iface->ops->qp_destroy(ep->qp);
        ep->qp = NULL;
    }
    if (ep->tm_qp != NULL) {
        tmx_hash_del(&w->ep_by_qpn, tmx_ep_qpn_key(w, ep->iface, ep->tm_qp->qp_num));
        ep->iface->ops->qp_destroy(ep->tm_qp);
        ep->tm_qp = NULL;
    }
    if (ep->ah != NULL) {
        ep->iface->ops->ah_destroy(ep->ah);
        ep->ah = NULL;
    }
    if (ep->passive) {
        tmx_hash_del(&w->passive_by_key, ep->passive_key);
    }
    tmx_hash_del(&w->ep_by_id, ep->id);
    tmx_list_del(&ep->list);
    tmx_list_del(&ep->pending_link);
    tmx_proto_rndv_read_drop(ep, TMX_ERR_PEER_FAILED);
    tmx_proto_ctrl_drop(ep);
    tmx_ring_ep_cleanup(ep);
    tmx_mem_stage_release(&ep->stage_tx);
    ep->magic = TMX_MAGIC_DEAD;
    if (ep->passive) {
        free(ep); /* never handed to the user */
    } else {
        tmx_core_bury(ep);
    }
}

/* Completes every send queued or outstanding on the endpoint with status. */
static void tmx_ep_fail_sends(tmx_ep_t *ep, tmx_status_t status)
{
    tmx_list_t *l;

    while ((l = tmx_list_pop_head(&ep->pending)) != NULL) {
        tmx_request_t *req = tmx_container_of(l, tmx_request_t, pending_link);
        if (req->mr != NULL) { /* a rendezvous registered before the wire filled up */
            tmx_mem_dereg_rndv(ep->iface, req);
        }
        tmx_request_complete(req, status);
    }
    while ((l = tmx_list_pop_head(&ep->outstanding_list)) != NULL) {
        tmx_request_t *req = tmx_container_of(l, tmx_request_t, pending_link);
        tmx_proto_sreq_done(ep->worker, req, status);
    }
}

/* Fails everything queued or outstanding on the endpoint. */
void tmx_ep_fail(tmx_ep_t *ep, tmx_status_t status)
{
    if (ep->state == TMX_EP_FAILED) {
        return;
    }
    ep->state = TMX_EP_FAILED;
    tmx_ring_ep_failed(ep);
    tmx_ep_fail_sends(ep, status);
    tmx_proto_rndv_read_drop(ep, status); /* never posted now: those receives fail */
    tmx_proto_ctrl_drop(ep); /* never sent now: the receives waiting on them complete */
    tmx_list_del(&ep->pending_link);
}

/* The connection broke (the device said so) or never came up: unlike a close in order, this
 * is a peer failure, which the worker reports (tmx_worker_peer_failed). A connection that
 * had already ended in order is not one. */
void tmx_ep_lost(tmx_ep_t *ep, tmx_status_t status)
{
    if (ep->state == TMX_EP_FAILED) {
        return;
    }
    tmx_ep_fail(ep, status);
    tmx_worker_peer_failed(ep->worker, ep->remote_uuid, status);
}

TMX_API tmx_status_t tmx_ep_create(tmx_worker_h w, const tmx_ep_params_t *params, tmx_ep_h *ep_p)
{
    tmx_iface_t   *iface;
    const uint8_t *dev_addr;
    size_t         dev_addr_len;
    uint64_t       uuid;
    uint32_t       ud_qpn;
    tmx_ep_t      *ep;
    tmx_status_t   status;
    const void    *address;
    size_t         address_length;
    uint8_t        full[1024];

    if (w == NULL || params == NULL || ep_p == NULL) {
        return TMX_ERR_INVALID_PARAM;
    }
    if (w->magic != TMX_MAGIC_WORKER) {
        return TMX_ERR_INVALID_HANDLE;
    }
    if ((params->field_mask & ~(uint64_t)TMX_EP_PARAM_ADDRESS) != 0 ||
        !(params->field_mask & TMX_EP_PARAM_ADDRESS) || params->address == NULL ||
        params->address_length == 0) {
        return TMX_ERR_INVALID_PARAM;
    }
    address        = params->address;
    address_length = params->address_length;
    status = tmx_worker_addr_expand(&address, &address_length, full);
    if (status != TMX_OK) {
        return status;
    }
    tmx_worker_lock(w);
    status = tmx_worker_addr_resolve(w, address, address_length, &uuid, &iface, &dev_addr,
                                     &dev_addr_len, &ud_qpn);
    if (status != TMX_OK) {
        goto out;
    }
    ep = tmx_ep_alloc(w, iface);
    if (ep == NULL) {
        status = TMX_ERR_NO_MEMORY;
        goto out;
    }
    ep->remote_uuid   = uuid;
    ep->remote_ud_qpn = ud_qpn;
    status = iface->ops->ah_create(iface->pd, dev_addr, dev_addr_len, &ep->ah);
    if (status != TMX_OK) {
        free(ep);
        goto out;
    }
    status = tmx_ep_qp_create(ep);
    if (status != TMX_OK) {
        iface->ops->ah_destroy(ep->ah);
        free(ep);
        goto out;
    }
    ep->magic = TMX_MAGIC_EP;
    tmx_ep_register(ep);
    /* which of our devices reaches the peer: the one test/verbs/two_guests.sh looks for */
    tmx_info("endpoint to %016llx%s: provider %s, device %s", (unsigned long long)uuid,
             uuid == w->uuid ? " (self)" : "", iface->dev->prov->name, iface->dev->name);
    /* Until the reply comes the endpoint sits on the pending list, which resends the request
     * and gives up after TMX_PEER_TIMEOUT. */
    tmx_list_add_tail(&w->pending_eps, &ep->pending_link);
    if (tmx_ep_send_wireup(ep, TMX_WIREUP_REQ, 0) != TMX_OK) {
        ep->wireup_time = 0; /* resent from progress */
    }
    ep->connect_start = tmx_time_sec();
    *ep_p = ep;
out:
    tmx_worker_unlock(w);
    return status;
}

/* Called for CONNECTING endpoints from the pending-list progress. */
void tmx_ep_wireup_progress(tmx_ep_t *ep)
{
    double now = tmx_time_sec();

    if (now - ep->connect_start > ep->worker->ctx->connect_timeout) {
        tmx_warn("connection to peer %016llx timed out after %.1f s (TMX_PEER_TIMEOUT%s)",
                 (unsigned long long)ep->remote_uuid, ep->worker->ctx->connect_timeout,
                 ep->worker->ctx->oversubscribed ? " times the processes per CPU" : "");
        tmx_ep_lost(ep, TMX_ERR_UNREACHABLE);
        return;
    }
    if (!ep->passive && !ep->xrep && now - ep->wireup_time > TMX_WIREUP_RESEND) {
        tmx_ep_send_wireup(ep, TMX_WIREUP_REQ, 0);
    }
    if (ep->xrc) {
        tmx_xrc_wireup_progress(ep); /* its initiators to the peer's node */
    }
}

/* Every process of a job must match tags the same way: a device with a TM SRQ parses a
 * header that the other kind of peer does not send; and connect the same way, XRC or RC. */
static const char *const tmx_ep_tm_mismatch =
    "set TMX_TM_OFFLOAD, TMX_XRC (and TMX_SOFT_TM, TMX_SOFT_XRC) alike in every process of "
    "the job";

/* Whether a peer's wire-up flags say it matches and connects as this interface does. */
static int tmx_ep_flags_agree(const tmx_iface_t *iface, uint8_t flags)
{
    return !(flags & TMX_WIREUP_F_TM) == !iface->tm_on &&
           !(flags & TMX_WIREUP_F_XRC) == !iface->xrc_on;
}

/* Tells a requester that its connection cannot be made (we and it disagree on TM). */
static void tmx_ep_wireup_nak(tmx_iface_t *iface, const tmx_wireup_msg_t *req,
                              const uint8_t *dev_addr)
{
    tmx_wireup_msg_t msg;
    tmx_ah_t        *ah;

    tmx_warn("connection from %016llx refused: it uses %s%s and this process %s%s; %s",
             (unsigned long long)req->src_uuid,
             (req->flags & TMX_WIREUP_F_TM) ? "tag-matching offload" : "no offload",
             (req->flags & TMX_WIREUP_F_XRC) ? " and XRC" : " and RC",
             iface->tm_on ? "offload" : "no offload", iface->xrc_on ? " and XRC" : " and RC",
             tmx_ep_tm_mismatch);
    if (iface->ops->ah_create(iface->pd, dev_addr, req->dev_addr_len, &ah) != TMX_OK) {
        return;
    }
    memset(&msg, 0, sizeof(msg));
    msg.magic        = TMX_WIREUP_MAGIC;
    msg.type         = TMX_WIREUP_NAK;
    msg.src_uuid     = iface->worker->uuid;
    msg.dst_ep_id    = req->src_ep_id;
    msg.src_ud_qpn   = iface->ud_qpn;
    msg.dev_addr_len = (uint16_t)iface->dev_addr_len;
    msg.qp_addr_len  = 1; /* no blob; keeps the receiver's length checks */
    {
        uint8_t buf[sizeof(msg) + TMX_DEV_ADDR_MAX + 1];
        memcpy(buf, &msg, sizeof(msg));
        memcpy(buf + sizeof(msg), iface->dev_addr, iface->dev_addr_len);
        buf[sizeof(msg) + iface->dev_addr_len] = 0;
        tmx_ep_ud_post(iface, ah, req->src_ud_qpn, buf, sizeof(msg) + iface->dev_addr_len + 1);
    }
    iface->ops->ah_destroy(ah);
}

/* The XRC part of a REQ or REP (its length in *len_p): after the TM QP's blob when the
 * sender uses TM too, else where the QP blob would be. */
static const uint8_t *tmx_ep_xrc_part(const tmx_wireup_msg_t *msg, const uint8_t *qp_addr,
                                      size_t *len_p)
{
    if (msg->flags & TMX_WIREUP_F_TM) {
        *len_p = msg->xrc_len;
        return qp_addr + msg->qp_addr_len + msg->tm_addr_len;
    }
    *len_p = msg->qp_addr_len;
    return qp_addr;
}

static void tmx_ep_wireup_req(tmx_iface_t *iface, const tmx_wireup_msg_t *msg,
                              const uint8_t *dev_addr, const uint8_t *qp_addr)
{
    tmx_worker_t *w   = iface->worker;
    uint64_t      key = tmx_ep_passive_key(msg->src_uuid, msg->src_ep_id);
    tmx_ep_t     *ep  = tmx_hash_get(&w->passive_by_key, key);
    tmx_status_t  status;

    if (ep != NULL) {
        /* a resent request: our reply was lost or slow (XRC: not made yet, see xrc.c) */
        if (ep->state == TMX_EP_CONNECTED) {
            tmx_ep_send_wireup(ep, TMX_WIREUP_REP, msg->src_ep_id);
        }
        return;
    }
    if (!tmx_ep_flags_agree(iface, msg->flags)) {
        tmx_ep_wireup_nak(iface, msg, dev_addr);
        return;
    }
    ep = tmx_ep_alloc(w, iface);
    if (ep == NULL) {
        return;
    }
    ep->passive       = 1;
    ep->passive_key   = key;
    ep->remote_uuid   = msg->src_uuid;
    ep->remote_id     = msg->src_ep_id;
    ep->remote_ud_qpn = msg->src_ud_qpn;
    ep->compact_tx    = (msg->flags & TMX_WIREUP_F_COMPACT) && !iface->tm_on;
    if (msg->eager_max < ep->eager_max) {
        ep->eager_max = msg->eager_max;
    }
    status = iface->ops->ah_create(iface->pd, dev_addr, msg->dev_addr_len, &ep->ah);
    if (status != TMX_OK) {
        tmx_warn("wire-up request from %016llx: bad device address (%s)",
                 (unsigned long long)msg->src_uuid, tmx_status_string(status));
        free(ep);
        return;
    }
    status = tmx_ep_qp_create(ep);
    if (status != TMX_OK) {
        iface->ops->ah_destroy(ep->ah);
        free(ep);
        return;
    }
    ep->magic = TMX_MAGIC_EP;
    tmx_ep_register(ep);
    tmx_hash_put(&w->passive_by_key, key, ep);
    if (ep->xrc) {
        /* connected once our initiators to its node are (xrc.c); with TM the RC pair first */
        size_t         xlen;
        const uint8_t *xpart = tmx_ep_xrc_part(msg, qp_addr, &xlen);

        status = ep->xrc_tm ? tmx_ep_qp_connect(ep, msg, qp_addr) : TMX_OK;
        if (status == TMX_OK) {
            status = tmx_xrc_on_req(ep, xpart, xlen);
        }
    } else {
        status = tmx_ep_qp_connect(ep, msg, qp_addr);
        ep->state = TMX_EP_CONNECTED;
    }
    if (status != TMX_OK) {
        tmx_warn("wire-up request from %016llx: connect failed: %s",
                 (unsigned long long)msg->src_uuid, tmx_status_string(status));
        if (status == TMX_ERR_UNREACHABLE) {
            tmx_ep_wireup_nak(iface, msg, dev_addr);
        }
        tmx_ep_destroy(ep);
        return;
    }
    if (!ep->xrc) {
        tmx_ep_send_wireup(ep, TMX_WIREUP_REP, msg->src_ep_id); /* XRC: once connected */
    }
}

static void tmx_ep_wireup_rep(tmx_iface_t *iface, const tmx_wireup_msg_t *msg,
                              const uint8_t *qp_addr)
{
    tmx_ep_t    *ep = tmx_hash_get(&iface->worker->ep_by_id, msg->dst_ep_id);
    tmx_status_t status;

    if (ep == NULL || ep->passive || ep->iface != iface || ep->remote_uuid != msg->src_uuid ||
        ep->state != TMX_EP_CONNECTING) {
        return; /* a duplicate reply, or not for us */
    }
    if (!tmx_ep_flags_agree(iface, msg->flags)) {
        tmx_warn("connect to peer %016llx failed: %s", (unsigned long long)ep->remote_uuid,
                 tmx_ep_tm_mismatch);
        tmx_ep_fail(ep, TMX_ERR_UNREACHABLE);
        return;
    }
    if (ep->xrc) {
        size_t         xlen;
        const uint8_t *xpart = tmx_ep_xrc_part(msg, qp_addr, &xlen);

        if (ep->xrep) {
            return; /* a duplicate reply */
        }
        ep->remote_id = msg->src_ep_id;
        if (msg->eager_max < ep->eager_max) {
            ep->eager_max = msg->eager_max;
        }
        /* with TM the RC pair of the tagged stream first */
        status = ep->xrc_tm ? tmx_ep_qp_connect(ep, msg, qp_addr) : TMX_OK;
        if (status == TMX_OK) {
            status = tmx_xrc_on_rep(ep, xpart, xlen); /* connected when it can */
        }
        if (status != TMX_OK) {
            tmx_warn("connect to peer %016llx failed: %s", (unsigned long long)ep->remote_uuid,
                     tmx_status_string(status));
            tmx_ep_fail(ep, TMX_ERR_UNREACHABLE);
        }
        return;
    }
    status = tmx_ep_qp_connect(ep, msg, qp_addr);
    if (status != TMX_OK) {
        tmx_warn("connect to peer %016llx failed: %s", (unsigned long long)ep->remote_uuid,
                 tmx_status_string(status));
        tmx_ep_fail(ep, TMX_ERR_UNREACHABLE);
        return;
    }
    ep->remote_id  = msg->src_ep_id;
    ep->compact_tx = (msg->flags & TMX_WIREUP_F_COMPACT) && !iface->tm_on && !ep->xrc;
    if (msg->eager_max < ep->eager_max) {
        ep->eager_max = msg->eager_max;
    }
    ep->state = TMX_EP_CONNECTED;
    /* stays on the pending list if sends were queued; removed there when empty */
}

tmx_status_t tmx_ep_wireup_rx(tmx_iface_t *iface, const void *buf, size_t len)
{
    tmx_wireup_msg_t msg;
    const uint8_t   *dev_addr, *qp_addr;

    if (len < sizeof(msg)) {
        return TMX_ERR_INVALID_PARAM;
    }
    memcpy(&msg, buf, sizeof(msg));
    if (msg.magic != TMX_WIREUP_MAGIC || msg.dev_addr_len == 0 ||
        msg.dev_addr_len > TMX_DEV_ADDR_MAX || msg.qp_addr_len == 0 ||
        msg.qp_addr_len >
            ((msg.flags & TMX_WIREUP_F_XRC) ? TMX_WIREUP_XRC_MAX : TMX_QP_ADDR_MAX) ||
        len < sizeof(msg) + msg.dev_addr_len + msg.qp_addr_len) {
        tmx_warn("malformed wire-up message (%zu bytes) dropped", len);
        return TMX_ERR_INVALID_PARAM;
    }
    if ((msg.flags & TMX_WIREUP_F_TM) &&
        (msg.tm_addr_len == 0 || msg.tm_addr_len > TMX_QP_ADDR_MAX ||
         msg.qp_addr_len > TMX_QP_ADDR_MAX || msg.xrc_len > TMX_WIREUP_XRC_MAX ||
         ((msg.flags & TMX_WIREUP_F_XRC) && msg.xrc_len == 0 &&
          (msg.type == TMX_WIREUP_REQ || msg.type == TMX_WIREUP_REP)) ||
         len < sizeof(msg) + msg.dev_addr_len + msg.qp_addr_len + msg.tm_addr_len +
                   msg.xrc_len)) {
        tmx_warn("malformed wire-up message (%zu bytes) dropped", len);
        return TMX_ERR_INVALID_PARAM;
    }
    dev_addr = (const uint8_t *)buf + sizeof(msg);
    qp_addr  = dev_addr + msg.dev_addr_len;
    if (msg.type == TMX_WIREUP_XCONN_REQ || msg.type == TMX_WIREUP_XCONN_REP ||
        msg.type == TMX_WIREUP_XTGT || msg.type == TMX_WIREUP_XTGT_ACK) {
        tmx_xrc_on_msg(iface, msg.type, msg.src_uuid, msg.dst_ep_id, msg.src_ud_qpn, dev_addr,
                       msg.dev_addr_len, qp_addr, msg.qp_addr_len);
        return TMX_OK;
    }
    if (msg.type == TMX_WIREUP_NAK) {
        tmx_ep_t *ep = tmx_hash_get(&iface->worker->ep_by_id, msg.dst_ep_id);
        if (ep != NULL && !ep->passive && ep->iface == iface &&
            ep->remote_uuid == msg.src_uuid && ep->state == TMX_EP_CONNECTING) {
            tmx_warn("connection to peer %016llx refused: one of us uses tag-matching offload "
                     "or XRC and the other does not; %s", (unsigned long long)ep->remote_uuid,
                     tmx_ep_tm_mismatch);
            tmx_ep_fail(ep, TMX_ERR_UNREACHABLE);
        }
        return TMX_OK;
    }
    if (msg.type == TMX_WIREUP_REQ) {
        tmx_ep_wireup_req(iface, &msg, dev_addr, qp_addr);
    } else if (msg.type == TMX_WIREUP_REP) {
        tmx_ep_wireup_rep(iface, &msg, qp_addr);
    } else {
        tmx_warn("wire-up message of unknown type %u dropped", msg.type);
        return TMX_ERR_INVALID_PARAM;
    }
    return TMX_OK;
}

/* Sends DISC on every given endpoint that can still talk, then progresses until each has heard
 * DISC_ACK or DISC from the peer, failed, or the peer timeout passed. */
static void tmx_ep_disconnect(tmx_worker_t *w, tmx_ep_t **eps, int n)
{
    double     deadline = tmx_time_sec() + w->ctx->cfg.peer_timeout;
    tmx_idle_t idle     = TMX_IDLE_INIT;
    int        waiting;

    for (int i = 0; i < n; i++) {
        tmx_ep_t *ep = eps[i];
        ep->closing  = 1;
        if (ep->state == TMX_EP_CONNECTED && !ep->disc_acked &&
            tmx_proto_send_ctrl(ep, TMX_PROTO_DISC, 0, 0) != TMX_OK) {
            ep->disc_acked = 1; /* cannot tell the peer; it will see the QP go away */
        }
    }
    do {
        waiting = 0;
        for (int i = 0; i < n; i++) {
            if (eps[i]->state == TMX_EP_CONNECTED && !eps[i]->disc_acked) {
                waiting = 1;
            }
        }
        if (waiting) {
            /* the peer's answer may need this core (more ranks than cores): TMX_WAIT */
            tmx_worker_idle(w, &idle, tmx_worker_progress_locked(w), deadline);
        }
    } while (waiting && tmx_time_sec() < deadline);
}

static int tmx_ep_flushed(tmx_ep_t *ep)
{
    return ep->state == TMX_EP_FAILED ||
           (tmx_list_is_empty(&ep->pending) && ep->outstanding == 0 &&
            ep->state == TMX_EP_CONNECTED);
}

/* An endpoint a FLUSH waits for: the progress of its sends seen last, and when they time out
 * without more. */
typedef struct tmx_ep_flush {
    tmx_ep_t *ep;
    uint64_t  seen;     /* ep->send_events then */
    double    deadline; /* then + TMX_PEER_TIMEOUT */
} tmx_ep_flush_t;

/* The status of a finished flush of ep. tmx(3): PEER_FAILED only when the peer died before the
 * flush finished, not when it closed in order after every send of ours had completed. */
static tmx_status_t tmx_ep_flush_status(const tmx_ep_t *ep)
{
    return ep->state == TMX_EP_FAILED && !ep->peer_closed_idle ? TMX_ERR_PEER_FAILED : TMX_OK;
}

/* One look at the n endpoints of f, at time now: those whose flush ended leave f (the worst
 * status into *status_p); one whose sends made no progress until its deadline has them fail
 * with TMX_ERR_TIMED_OUT, and leaves too. Returns how many are left (f[0 .. that)); *next_p:
 * the earliest deadline of those. An endpoint that is not connected yet does not time out
 * here: its connection's own timeout (tmx_ep_wireup_progress) ends the wait. */
static int tmx_ep_flush_look(tmx_ep_flush_t *f, int n, double now, double timeout,
                             tmx_status_t *status_p, double *next_p)
{
    *next_p = -1;
    for (int i = 0; i < n;) {
        tmx_ep_t *ep = f[i].ep;

        if (ep->magic != TMX_MAGIC_EP) {
            f[i] = f[--n]; /* closed by another thread while we slept (MULTI): not ours now */
            continue;
        }
        if (tmx_ep_flushed(ep)) {
            if (*status_p == TMX_OK) {
                *status_p = tmx_ep_flush_status(ep);
            }
            f[i] = f[--n];
            continue;
        }
        if (ep->send_events != f[i].seen) {
            f[i].seen     = ep->send_events;
            f[i].deadline = now + timeout;
        } else if (ep->state == TMX_EP_CONNECTED && now > f[i].deadline) {
            tmx_warn("flush of the endpoint to peer %016llx: its sends made no progress in "
                     "%.1f s (TMX_PEER_TIMEOUT); %u outstanding and the queued ones fail with "
                     "timed out", (unsigned long long)ep->remote_uuid, timeout, ep->outstanding);
            tmx_ep_fail_sends(ep, TMX_ERR_TIMED_OUT);
            *status_p = TMX_ERR_TIMED_OUT;
            f[i]      = f[--n];
            continue;
        }
        if (*next_p < 0 || f[i].deadline < *next_p) {
            *next_p = f[i].deadline;
        }
        i++;
    }
    return n;
}

/*
 * FLUSH of n endpoints of w at once: progresses until every send of each completed. A receiver
 * that is alive but never posts the matching receive would hold a rendezvous send forever, so
 * the wait is bounded per endpoint: TMX_PEER_TIMEOUT seconds in which no send of the endpoint
 * is posted or completes fail the rest with TMX_ERR_TIMED_OUT (their buffers are deregistered:
 * a late read of the peer fails its remote key check). The endpoints' timeouts run at the same
 * time, so peers that do not progress cost one timeout together, not one each. The connections
 * stay up (for the disconnect, or for more sends). Returns the worst of the endpoints' statuses:
 * TMX_ERR_TIMED_OUT, then TMX_ERR_PEER_FAILED, then TMX_OK. Reorders f.
 */
static tmx_status_t tmx_ep_flush_many(tmx_worker_t *w, tmx_ep_flush_t *f, int n)
{
    double       timeout = w->ctx->cfg.peer_timeout;
    double       now     = tmx_time_sec();
    double       next;
    tmx_idle_t   idle    = TMX_IDLE_INIT;
    tmx_status_t status  = TMX_OK;

    for (int i = 0; i < n; i++) {
        f[i].seen     = f[i].ep->send_events;
        f[i].deadline = now + timeout;
    }
    n = tmx_ep_flush_look(f, n, now, timeout, &status, &next);
    while (n > 0) {
        unsigned events = tmx_worker_progress_locked(w);
        int      done   = 0;

        for (int i = 0; i < n && !done; i++) {
            done = f[i].ep->magic != TMX_MAGIC_EP || tmx_ep_flushed(f[i].ep);
        }
        if (!done) {
            tmx_worker_idle(w, &idle, events, next);
        }
        n = tmx_ep_flush_look(f, n, tmx_time_sec(), timeout, &status, &next);
    }
    return status;
}

static tmx_status_t tmx_ep_flush(tmx_ep_t *ep)
{
    tmx_ep_flush_t one = {.ep = ep};

    return tmx_ep_flush_many(ep->worker, &one, 1);
}

/* tmx_worker_flush: every endpoint of the user's (the passive ones carry no sends of ours). */
tmx_status_t tmx_ep_flush_all(tmx_worker_t *w)
{
    tmx_list_t     *l;
    tmx_ep_flush_t *f;
    int             n = 0;
    tmx_status_t    status;

    tmx_list_for_each(l, &w->eps) {
        n += !tmx_container_of(l, tmx_ep_t, list)->passive;
    }
    if (n == 0) {
        return TMX_OK;
    }
    f = calloc((size_t)n, sizeof(*f));
    if (f == NULL) {
        return TMX_ERR_NO_MEMORY;
    }
    n = 0;
    tmx_list_for_each(l, &w->eps) {
        tmx_ep_t *ep = tmx_container_of(l, tmx_ep_t, list);
        if (!ep->passive) {
            f[n++].ep = ep;
        }
    }
    status = tmx_ep_flush_many(w, f, n);
    free(f);
    return status;
}

TMX_API tmx_status_t tmx_ep_close(tmx_ep_h ep, tmx_ep_close_mode_t mode)
{
    tmx_worker_t *w;
    tmx_status_t  status = TMX_OK;

    if (ep == NULL) {
        return TMX_ERR_INVALID_PARAM;
    }
    if (ep->magic != TMX_MAGIC_EP || ep->passive) {
        return TMX_ERR_INVALID_HANDLE;
    }
    if (mode != TMX_EP_CLOSE_FLUSH && mode != TMX_EP_CLOSE_FORCE) {
        return TMX_ERR_INVALID_PARAM;
    }
    w = ep->worker;
    tmx_worker_lock(w);
    ep->user_closed = 1; /* the error handler is not handed an endpoint being closed */
    if (mode == TMX_EP_CLOSE_FLUSH) {
        status = tmx_ep_flush(ep);
    }
    if (ep->state != TMX_EP_FAILED) {
        tmx_ep_t *one[1] = {ep};
        tmx_ep_disconnect(w, one, 1);
        tmx_ep_fail(ep, TMX_ERR_CANCELED); /* FORCE: what is left is canceled */
    }
    tmx_ep_destroy(ep);
    tmx_worker_unlock(w);
    return status;
}

/* Passive endpoint told by its peer that the connection closes. */
void tmx_ep_peer_disconnected(tmx_ep_t *ep)
{
    ep->disc_acked = 1;
    if (ep->passive && !ep->closing) {
        tmx_ep_fail(ep, TMX_ERR_PEER_FAILED);
        tmx_ep_destroy(ep);
    } else if (!ep->closing) {
        /* the peer went away while our endpoint is still open: later sends fail. With nothing
         * of ours in flight, a later FLUSH close has lost nothing and succeeds. */
        ep->peer_closed_idle = tmx_list_is_empty(&ep->pending) && ep->outstanding == 0;
        tmx_ep_fail(ep, TMX_ERR_PEER_FAILED);
    }
}

void tmx_ep_close_all(tmx_worker_t *w)
{
    tmx_list_t *l, *t;
    tmx_ep_t  **eps;
    int         n = 0, cap = 0;

    tmx_list_for_each(l, &w->eps) {
        cap++;
    }
    eps = calloc(cap ? (size_t)cap : 1, sizeof(*eps));
    if (eps != NULL) {
        tmx_list_for_each(l, &w->eps) {
            eps[n++] = tmx_container_of(l, tmx_ep_t, list);
        }
        tmx_ep_disconnect(w, eps, n);
        free(eps);
    }
    tmx_list_for_each_safe(l, t, &w->eps) {
        tmx_ep_t *ep = tmx_container_of(l, tmx_ep_t, list);
        tmx_ep_fail(ep, TMX_ERR_CANCELED);
        tmx_ep_destroy(ep);
    }
}
