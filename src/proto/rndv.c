/*
 * Rendezvous: the sender registers its buffer and sends RTS (tag, length, address, remote key);
 * the receiver, once a receive matched, registers the part of its buffer that will be written
 * and RDMA-READs the data straight into it (one copy, done by the device), then tells the
 * sender with FIN. Reads larger than the device's max message go in chunks.
 *
 * Where registering is a system call (TMX_DEV_CAP_REG_SLOW) a message of up to TMX_RNDV_COPY
 * bytes outside any tmx_mem_map range goes the same way through staging buffers registered
 * once (mem.c): the sender copies into one of its endpoint's pool before the RTS and the RTS
 * names it (that pool's key goes to that peer only, so it can read nothing sent to others);
 * the receiver reads into one of its interface's pool (no remote access) and copies out
 * before the FIN. Copying 64 KiB costs less than the two system calls at each end (in the
 * TCG guest of bench/verbs_rxe.sh: 30-50 us against 200).
 */
#define TMX_LOG_SUBSYS "proto"
#include "config.h"

#include <endian.h>
#include <string.h>

#include "core/core.h"
#include "proto/fence.h"
#include "proto/proto.h"
#include "util/copy.h"
#include "util/log.h"
#include "util/time.h"

/* XRC: rendezvous data is striped over the domains in stripes of at least this much. */
#define TMX_XRC_STRIPE_MIN ((size_t)64 * 1024)

/* Seconds between two lines about rendezvous sends waiting for a registration. */
#define TMX_REG_WAIT_LOG_INTERVAL 10.0

/*
 * The device has no registration left (every one belongs to a rendezvous still in flight):
 * the send stays queued and progress tries it again, as often as it runs. That is said once,
 * then at most once per TMX_REG_WAIT_LOG_INTERVAL with the count of refused attempts since;
 * tmx_worker_destroy reports what was counted after the last line.
 */
static void tmx_proto_rndv_reg_wait(tmx_ep_t *ep)
{
    tmx_worker_t *w   = ep->worker;
    double        now = tmx_time_sec();

    w->reg_waits++;
    if (w->reg_wait_logged == 0) {
        tmx_warn("rendezvous send to %016llx waits for a memory registration: the device has "
                 "none left (%u outstanding sends on this endpoint); it is retried quietly",
                 (unsigned long long)ep->remote_uuid, ep->outstanding);
    } else if (now - w->reg_wait_logged >= TMX_REG_WAIT_LOG_INTERVAL) {
        tmx_warn("rendezvous sends waited for memory registrations: %llu attempts refused in "
                 "the last %.0f s", (unsigned long long)w->reg_waits, now - w->reg_wait_logged);
    } else {
        return;
    }
    w->reg_wait_logged = now;
    w->reg_waits       = 0;
}

tmx_status_t tmx_proto_rndv_send(tmx_ep_t *ep, tmx_request_t *req)
{
    tmx_worker_t        *w     = ep->worker;
    tmx_iface_t         *iface = ep->iface;
    tmx_proto_rts_hdr_t  h;
    uintptr_t            addr;
    tmx_status_t         status;

    if (req->mr == NULL) {
        status = tmx_mem_reg_rndv(iface, req, req->buf, req->len, TMX_ACCESS_REMOTE_READ,
                                  &ep->stage_tx);
        if (status == TMX_ERR_NO_RESOURCE) {
            req->mr = NULL;
            tmx_proto_rndv_reg_wait(ep);
            return status; /* queued: progress tries again */
        }
        if (status != TMX_OK) {
            tmx_error("rendezvous send of %zu bytes: registration failed: %s", req->len,
                      tmx_status_string(status));
            req->mr = NULL;
            return status;
        }
        if (req->stage != NULL) {
            /* the peer reads the copy; the user's buffer is not touched again */
            tmx_copy_pieces(req->stage, req->buf, req->len);
        }
    }
    addr = req->stage != NULL ? (uintptr_t)req->stage : (uintptr_t)req->buf;
    if (iface->tm_on) {
        /* the device's rendezvous header, then ours: the whole length (RVH has 32 bits) */
        tmx_proto_tm_rndv_t r;
        uint64_t            id = tmx_proto_sreq_id_peek(w); /* becomes req->id when posted */

        memset(&r, 0, sizeof(r));
        r.rvh.va   = htobe64(addr);
        r.rvh.rkey = htobe32(req->mr->rkey);
        r.rvh.len  = htobe32(req->len < UINT32_MAX ? (uint32_t)req->len : UINT32_MAX);
        r.length   = req->len;
        if (req->imm != 0) {
            /* larger than any offered buffer: the device leaves it to software (proto.h) */
            r.rvh.len = htobe32(UINT32_MAX);
            r.flags   = TMX_PROTO_TM_RNDV_IMM;
            r.imm     = (uint32_t)req->imm;
        }
        status = tmx_proto_post_tagged(ep, TMX_TMH_RNDV, TMX_PROTO_TM_RNDV | (uint32_t)id, req->tag,
                                       &r, sizeof(r),
                                       NULL, 0);
    } else {
        memset(&h, 0, sizeof(h));
        h.base.op  = TMX_PROTO_RTS;
        h.base.tag = req->tag;
        h.sreq_id  = tmx_proto_sreq_id_peek(w); /* becomes req->id when posted */
        h.addr     = addr;
        h.length   = req->len;
        h.rkey     = req->mr->rkey;
        if (req->imm != 0) {
            h.base.reserved = TMX_PROTO_HDR_IMM;
            h.reserved      = (uint32_t)req->imm;
        }
        /* The header goes through tmx_proto_post via the control path of eager.c. */
        status = tmx_proto_post_hdr(ep, &h, sizeof(h));
    }
    if (status == TMX_ERR_NO_RESOURCE) {
        return status; /* keeps the registration (or staging buffer) for the retry */
    }
    if (status != TMX_OK) {
        tmx_mem_dereg_rndv(iface, req); /* the request fails: nothing will use it again */
        return status;
    }
    ep->credits--;
    tmx_proto_outstanding_add(ep, req);
    return TMX_INPROGRESS;
}

static void tmx_proto_rndv_finish(tmx_request_t *rreq)
{
    tmx_worker_t *w  = rreq->worker;
    tmx_ep_t     *ep = tmx_hash_get(&w->ep_by_id, rreq->rndv_ep_id);
    int32_t       fin = TMX_OK;

    if (rreq->rndv_status != TMX_OK && rreq->rndv_status != TMX_ERR_TRUNCATED) {
        fin = rreq->rndv_status;
    }
    if (rreq->stage != NULL && (rreq->rndv_status == TMX_OK ||
                                rreq->rndv_status == TMX_ERR_TRUNCATED)) {
        /* every read of the staging buffer succeeded (a failed one set rndv_status) */
        tmx_copy_pieces(rreq->buf, rreq->stage, rreq->rndv_n);
    }
    if (rreq->mr != NULL) {
        /* a mapping's reference and a staging buffer go even without the endpoint; a
         * registration of its own only with it (as before: its device is the endpoint's) */
        tmx_mem_dereg_rndv(ep != NULL ? ep->iface : NULL, rreq);
    }
    rreq->mr = NULL;
    /* completes the receive once the FIN is on the wire (at once without an endpoint) */
    tmx_proto_send_ctrl_then(ep, TMX_PROTO_FIN, rreq->rndv_sreq_id, fin, rreq, rreq->rndv_status);
}

/*
 * The send queue was full: the read waits on ep->read_pending for the completions that make
 * room (tmx_proto_ep_progress posts it again). Said once per worker, with the count of refused
 * posts; the rest are counted quietly and reported when the worker is destroyed.
 */
static void tmx_proto_rndv_read_wait(tmx_ep_t *ep, const tmx_request_t *rreq)
{
    tmx_worker_t *w = ep->worker;

    if (w->read_waits++ == 0) {
        tmx_warn("rendezvous read of %zu bytes from %016llx waits for room in the send queue "
                 "(%u work requests of ours in it; TMX_SEND_QUEUE=%u); it is retried quietly",
                 rreq->rndv_n - rreq->rndv_off, (unsigned long long)ep->remote_uuid,
                 ep->sq_busy, w->ctx->cfg.send_queue);
        w->read_waits_logged = w->read_waits;
    }
}

/*
 * Posts rreq's reads from where the last post stopped. TMX_OK: all posted, or a post failed
 * for good (rndv_status says so, and nothing more is posted); TMX_ERR_NO_RESOURCE: the send
 * queue is full, the rest waits.
 */
static tmx_status_t tmx_proto_rndv_read_post(tmx_ep_t *ep, tmx_request_t *rreq)
{
    tmx_worker_t *w     = ep->worker;
    tmx_iface_t  *iface = ep->iface;
    tmx_status_t  status;

    while (rreq->rndv_off < rreq->rndv_n) {
        size_t        off = rreq->rndv_off;
        size_t        len = rreq->rndv_n - off < rreq->rndv_chunk ? rreq->rndv_n - off
                                                                    : rreq->rndv_chunk;
        tmx_sge_t     sge = {.addr   = (rreq->stage != NULL ? (uintptr_t)rreq->stage
                                                             : (uintptr_t)rreq->buf) + off,
                             .length = (uint32_t)len,
                             .lkey   = rreq->mr->lkey};
        tmx_send_wr_t wr, *bad;

        memset(&wr, 0, sizeof(wr));
        wr.wr_id            = TMX_WRID(TMX_WRID_RNDV_RD, rreq->id);
        wr.sg_list          = &sge;
        wr.num_sge          = 1;
        wr.opcode           = TMX_WR_RDMA_READ;
        wr.send_flags       = TMX_SEND_SIGNALED |
                              tmx_fence_flags_for_step(ep->ooo, TMX_FENCE_STEP_RNDV_READ,
                                                       w->ctx->cfg.fence_drop);
        wr.rdma.remote_addr = rreq->rndv_raddr + off;
        wr.rdma.rkey        = rreq->rndv_rkey;
        if (ep->xrc) {
            status = tmx_xrc_post(ep, (unsigned)((ep->xdom + rreq->rndv_piece) % iface->xrc_ndom),
                                  &wr);
        } else {
            status = iface->ops->post_send(ep->qp, &wr, &bad);
        }
        if (status == TMX_ERR_NO_RESOURCE) {
            tmx_proto_rndv_read_wait(ep, rreq);
            /* a completion of ours is due, which makes room: wait for it (tmx_proto_sq_done).
             * Without one in the queue (only unsignaled sends, which the provider retires on
             * its own) or through XRC's shared initiators (whose completions are not counted
             * per endpoint), the next progress round tries again */
            ep->sq_wait = ep->sq_busy > 0 && !ep->xrc;
            return status;
        }
        if (status != TMX_OK) {
            tmx_error("rendezvous read of %zu bytes from %016llx could not be posted: %s", len,
                      (unsigned long long)ep->remote_uuid, tmx_status_string(status));
            rreq->rndv_status = status;
            rreq->rndv_off    = rreq->rndv_n;
            break;
        }
        rreq->reads_left++;
        ep->sq_busy++;
        rreq->rndv_off += len;
        rreq->rndv_piece++;
    }
    return TMX_OK;
}

/* Every read posted (or none will be) and none in flight: the FIN goes. */
static void tmx_proto_rndv_read_check(tmx_request_t *rreq)
{
    if (rreq->reads_left == 0 && rreq->rndv_off >= rreq->rndv_n) {
        tmx_hash_del(&rreq->worker->sreq_by_id, rreq->id);
        tmx_proto_rndv_finish(rreq);
    }
}

void tmx_proto_rndv_recv(tmx_request_t *rreq, tmx_ep_t *ep, uint64_t sreq_id, uint64_t addr,
                         uint64_t length, uint32_t rkey)
{
    tmx_worker_t *w     = rreq->worker;
    tmx_iface_t  *iface = ep->iface;
    size_t        n     = length < rreq->len ? (size_t)length : rreq->len;
    size_t        chunk = (iface->max_msg != 0 && iface->max_msg < ((size_t)1 << 30)) ? iface->max_msg
                                                                              : ((size_t)1 << 30);
    tmx_status_t  status;

    rreq->info.length = (size_t)length;
    rreq->rndv_sreq_id = sreq_id;
    rreq->rndv_ep_id   = ep->id;
    rreq->rndv_status  = length > rreq->len ? TMX_ERR_TRUNCATED : TMX_OK;
    rreq->flags |= TMX_REQ_FLAG_RNDV;
    if (n == 0) {
        tmx_proto_rndv_finish(rreq);
        return;
    }
    status = tmx_mem_reg_rndv(iface, rreq, rreq->buf, n, TMX_ACCESS_LOCAL_WRITE,
                              &iface->stage_rx);
    if (status != TMX_OK) {
        tmx_error("rendezvous receive of %zu bytes: registration failed: %s", n,
                  tmx_status_string(status));
        rreq->mr          = NULL;
        rreq->rndv_status = status;
        tmx_proto_rndv_finish(rreq);
        return;
    }
    rreq->id = tmx_proto_sreq_id_peek(w);
    w->next_sreq_id++;
    tmx_hash_put(&w->sreq_by_id, rreq->id, rreq);
    rreq->reads_left = 0;
    /* XRC: the data in one stripe per domain, each read through that domain's initiator
     * (stripes of whole pages, none under TMX_XRC_STRIPE_MIN); the FIN goes once all are
     * done, so their order does not matter */
    if (ep->xrc && iface->xrc_ndom > 1 && n >= 2 * TMX_XRC_STRIPE_MIN) {
        size_t stripe = (n / iface->xrc_ndom + 4095) & ~(size_t)4095;

        if (stripe < TMX_XRC_STRIPE_MIN) {
            stripe = TMX_XRC_STRIPE_MIN;
        }
        if (stripe < chunk) {
            chunk = stripe;
        }
        w->stat_xrc_striped += n > chunk;
    }
    rreq->rndv_raddr = addr;
    rreq->rndv_rkey  = rkey;
    rreq->rndv_n     = n;
    rreq->rndv_off   = 0;
    rreq->rndv_chunk = chunk;
    rreq->rndv_piece = 0;
    /* reads queued before this one go first: they were matched earlier */
    if (!tmx_list_is_empty(&ep->read_pending) ||
        tmx_proto_rndv_read_post(ep, rreq) == TMX_ERR_NO_RESOURCE) {
        tmx_list_add_tail(&ep->read_pending, &rreq->pending_link);
        tmx_proto_ep_schedule(ep);
        return;
    }
    tmx_proto_rndv_read_check(rreq);
}

tmx_status_t tmx_proto_rndv_read_progress(tmx_ep_t *ep)
{
    tmx_list_t *l;

    while ((l = ep->read_pending.next) != &ep->read_pending) {
        tmx_request_t *rreq = tmx_container_of(l, tmx_request_t, pending_link);

        if (tmx_proto_rndv_read_post(ep, rreq) == TMX_ERR_NO_RESOURCE) {
            return TMX_ERR_NO_RESOURCE;
        }
        tmx_list_del(l);
        tmx_proto_rndv_read_check(rreq);
    }
    return TMX_OK;
}

void tmx_proto_rndv_read_drop(tmx_ep_t *ep, tmx_status_t status)
{
    tmx_list_t *l;

    while ((l = tmx_list_pop_head(&ep->read_pending)) != NULL) {
        tmx_request_t *rreq = tmx_container_of(l, tmx_request_t, pending_link);

        rreq->rndv_status = status;
        rreq->rndv_off    = rreq->rndv_n; /* nothing more is posted */
        tmx_proto_rndv_read_check(rreq);
    }
}

void tmx_proto_rndv_read_done(tmx_iface_t *iface, const tmx_wc_t *wc)
{
    tmx_worker_t  *w    = iface->worker;
    tmx_request_t *rreq = tmx_hash_get(&w->sreq_by_id, TMX_WRID_VAL(wc->wr_id));

    if (rreq == NULL || rreq->type != TMX_REQ_RECV || rreq->reads_left == 0) {
        tmx_error("read completion for unknown request %llu",
                  (unsigned long long)TMX_WRID_VAL(wc->wr_id));
        return;
    }
    if (wc->status != TMX_WC_SUCCESS) {
        tmx_warn("rendezvous read failed: %s", tmx_wc_status_string(wc->status));
        rreq->rndv_status = wc->status == TMX_WC_REM_ACCESS_ERR ? TMX_ERR_REMOTE_ACCESS
                                                                 : TMX_ERR_PEER_FAILED;
    }
    --rreq->reads_left;
    tmx_proto_rndv_read_check(rreq);
}
