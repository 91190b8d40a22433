/*
 * Tag-matching offload: what the core does with a device that matches tags (a TM SRQ, see
 * prov.h) -- receives offered to its list, messages it matched, messages it delivered
 * unexpected, and the list operations that take receives back.
 *
 * MPI order. Every receive stays in the software engine too. A receive is offered only when
 * no older receive is in software alone (tmx_tm_offer), so the device never takes a message
 * that an older software-only receive could take. A message that reaches software (the device
 * found no eligible entry for it) is matched there against every receive, offered or not: if
 * it matches one the device holds, that one is taken back (DEL) before the message is
 * delivered; the device's phase synchronization guarantees that such an entry is not eligible
 * meanwhile (it was added after the message arrived, before software reported the message).
 */
#define TMX_LOG_SUBSYS "proto"
#include "config.h"

#include <endian.h>
#include <string.h>

#include "core/core.h"
#include "proto/proto.h"
#include "util/log.h"
#include "util/time.h"

int tmx_proto_tm_claim(tmx_request_t *rreq)
{
    tmx_worker_t *w = rreq->worker;
    tmx_tm_t     *tm;

    if (w->tm_iface == NULL) {
        return 0;
    }
    tm = &w->tm_iface->tm;
    tmx_tm_sw_left(tm, &rreq->tme);
    if (rreq->tme.state == TMX_TM_NONE || tmx_tm_withdraw(tm, &rreq->tme)) {
        return 0;
    }
    tm->stats.forced++;
    return 1;
}

void tmx_proto_tm_hold(tmx_request_t *rreq, tmx_message_t *msg)
{
    rreq->tm_held = msg;
}

/* A message a receive held, whose device entry a later message consumed after all: it is
 * matched again as if it had just arrived. (With a device that keeps phase synchronization
 * this does not happen: the held entry is not eligible until its DEL is posted.) */
static void tmx_proto_tm_rematch(tmx_worker_t *w, tmx_message_t *msg)
{
    tmx_tag_exp_t *exp = tmx_tag_exp_match(&w->tm, msg->unexp.tag, msg->unexp.src);
    tmx_request_t *rreq;

    if (exp == NULL) {
        tmx_proto_unexpected_add(w, msg);
        return;
    }
    rreq = tmx_container_of(exp, tmx_request_t, exp);
    rreq->flags &= (uint16_t)~TMX_REQ_FLAG_EXPECTED;
    if (tmx_proto_tm_claim(rreq)) {
        tmx_proto_tm_hold(rreq, msg);
        return;
    }
    tmx_proto_recv_matched(rreq, msg);
}

int tmx_proto_tm_rndv_parse(const tmx_proto_tm_rndv_t *r, uint64_t *imm_p)
{
    uint32_t rvh_len = be32toh(r->rvh.len);

    if (r->length > TMX_MAX_MSG || (r->flags & ~TMX_PROTO_TM_RNDV_IMM) != 0) {
        return -1;
    }
    if (r->flags & TMX_PROTO_TM_RNDV_IMM) {
        if (rvh_len != UINT32_MAX) {
            return -1; /* the device could have read it and lost the data */
        }
        *imm_p = TMX_PROTO_IMM(r->imm);
        return 0;
    }
    if (r->length < UINT32_MAX && r->length != rvh_len) {
        return -1;
    }
    *imm_p = 0;
    return 0;
}

void tmx_proto_tm_offer(tmx_worker_t *w, tmx_request_t *rreq)
{
    tmx_iface_t *iface = w->tm_iface;

    /* Without rendezvous offload a matched rendezvous comes back as its header, written into
     * the receive's buffer (RNDV_INCOMPLETE), which a receive posted on the same buffer (as
     * OSU's bandwidth test does) may overwrite before we read it: a receive that can take a
     * rendezvous message stays in software then. */
    rreq->tme.tag  = rreq->exp.tag; /* masked by tmx_tag_exp_post */
    rreq->tme.mask = rreq->exp.mask;
    rreq->tme.buf  = rreq->buf;
    rreq->tme.len  = rreq->len;
    /* A device's tag list matches tags only: a directed receive is never offered. Kept in
     * software, it keeps the younger receives its tag overlaps out of the list too (MPI
     * order), as any receive kept in software does. */
    if (rreq->exp.src != 0 ||
        (!(iface->dev->attr.caps & TMX_DEV_CAP_TM_RNDV) && rreq->len > w->eager_max)) {
        tmx_tm_sw_add(&iface->tm, &rreq->tme);
        return;
    }
    /* a message with immediate data comes in rendezvous form whatever its length, and the
     * device writes that header here: what it covers past a shorter message is put back */
    if (rreq->len >= iface->tm.thresh) { /* smaller receives are never offered */
        memcpy(rreq->tm_saved, rreq->buf, rreq->len < TMX_TM_SAVED ? rreq->len : TMX_TM_SAVED);
    }
    tmx_tm_offer(&iface->tm, &rreq->tme);
}

/* A message in a plain buffer of the TM SRQ: unexpected tagged (counted by the device), or
 * one it never matches (NO_TAG, FIN). */
void tmx_proto_tm_rx(tmx_iface_t *iface, const tmx_wc_t *wc)
{
    tmx_worker_t  *w       = iface->worker;
    const uint8_t *buf     = iface->rx_bufs + TMX_WRID_VAL(wc->wr_id) * iface->rx_size;
    size_t         len     = wc->byte_len;
    int            counted = wc->opcode == TMX_WC_TM_RECV;
    tmx_ep_t      *ep      = tmx_ep_by_qpn(w, iface, wc->qp_num);
    tmx_tmh_t      tmh;
    uint32_t       ctx;
    uint64_t       tag;

    if (wc->wc_flags & TMX_WC_TM_SYNC_REQ) {
        tmx_tm_sync_request(&iface->tm);
    }
    if (ep == NULL) {
        tmx_debug("message on unknown qp %u dropped", wc->qp_num);
        goto out;
    }
    if (len < sizeof(tmh) || len > iface->rx_size) {
        goto malformed;
    }
    memcpy(&tmh, buf, sizeof(tmh));
    ctx = be32toh(tmh.app_ctx);
    tag = be64toh(tmh.tag);
    buf += sizeof(tmh);
    len -= sizeof(tmh);
    switch (tmh.opcode) {
    case TMX_TMH_NO_TAG:
        tmx_proto_rx_msg(iface, ep, buf, len);
        goto out;
    case TMX_TMH_FIN: {
        tmx_request_t *sreq;
        if (!(ctx & TMX_PROTO_TM_RNDV)) {
            goto malformed;
        }
        sreq = tmx_proto_sreq_lookup(ep, ctx & TMX_PROTO_SREQ_ID_MAX, TMX_REQ_FLAG_RNDV);
        if (sreq != NULL) {
            tmx_proto_sreq_done(w, sreq, TMX_OK);
        }
        break;
    }
    case TMX_TMH_EAGER:
        if (ctx & TMX_PROTO_TM_SYNC) {
            tmx_proto_rx_eager(ep, tag, buf, len, 1, ctx & TMX_PROTO_SREQ_ID_MAX, 0);
        } else {
            tmx_proto_credits_add(ep, ctx & TMX_PROTO_TM_CREDITS_MAX);
            tmx_proto_rx_eager(ep, tag, buf, len, 0, 0, 0);
        }
        break;
    case TMX_TMH_RNDV: {
        tmx_proto_tm_rndv_t r;
        tmx_proto_rts_hdr_t rts;
        uint64_t            imm;

        if (len < sizeof(r) || !(ctx & TMX_PROTO_TM_RNDV)) {
            goto malformed;
        }
        memcpy(&r, buf, sizeof(r));
        if (tmx_proto_tm_rndv_parse(&r, &imm) != 0) {
            goto malformed;
        }
        memset(&rts, 0, sizeof(rts));
        if (imm != 0) {
            rts.base.reserved = TMX_PROTO_HDR_IMM;
            rts.reserved      = (uint32_t)imm;
        }
        rts.base.op  = TMX_PROTO_RTS;
        rts.base.tag = tag;
        rts.sreq_id  = ctx & TMX_PROTO_SREQ_ID_MAX;
        rts.addr     = be64toh(r.rvh.va);
        rts.rkey     = be32toh(r.rvh.rkey);
        rts.length   = r.length;
        tmx_proto_rx_rts(ep, &rts);
        break;
    }
    default:
        goto malformed;
    }
    if (!tmx_list_is_empty(&ep->pending)) {
        tmx_proto_ep_schedule(ep); /* credits may have come back */
    }
    goto out;

malformed:
    tmx_warn("malformed message (%zu bytes) from %016llx dropped", len,
             ep != NULL ? (unsigned long long)ep->remote_uuid : 0ULL);
out:
    if (counted) {
        tmx_tm_unexp_handled(&iface->tm);
        /* entries added before software saw this message stay out of matching until the
         * device hears the count: tell it at the end of this round */
        if (iface->tm.listed > 0) {
            iface->tm.sync_wanted = 1;
        }
    }
}

static tmx_status_t tmx_proto_tm_wc_status(tmx_wc_status_t s)
{
    switch (s) {
    case TMX_WC_SUCCESS:
        return TMX_OK;
    case TMX_WC_LOC_LEN_ERR:
        return TMX_ERR_TRUNCATED;
    case TMX_WC_REM_ACCESS_ERR:
        return TMX_ERR_REMOTE_ACCESS;
    case TMX_WC_RETRY_EXC_ERR:
    case TMX_WC_WR_FLUSH_ERR:
        return TMX_ERR_PEER_FAILED;
    default:
        return TMX_ERR_IO;
    }
}

/* The device matched a receive it held: the receive leaves software at the first completion
 * and completes at the last (DATA_VALID, or an error). */
void tmx_proto_tm_matched(tmx_iface_t *iface, const tmx_wc_t *wc)
{
    tmx_worker_t   *w = iface->worker;
    int             final;
    tmx_tm_entry_t *e = tmx_tm_recv_done(&iface->tm, wc, &final);
    tmx_request_t  *rreq;
    tmx_ep_t       *ep;
    uint32_t        ctx;
    tmx_status_t    status;

    if (wc->wc_flags & TMX_WC_TM_SYNC_REQ) {
        tmx_tm_sync_request(&iface->tm);
    }
    if (e == NULL) {
        return;
    }
    rreq = tmx_container_of(e, tmx_request_t, tme);
    ep   = tmx_ep_by_qpn(w, iface, wc->qp_num);
    if (!(rreq->flags & TMX_REQ_FLAG_MATCHED)) {
        if (rreq->flags & TMX_REQ_FLAG_EXPECTED) {
            tmx_tag_exp_remove(&w->tm, &rreq->exp);
            rreq->flags &= (uint16_t)~TMX_REQ_FLAG_EXPECTED;
        }
        rreq->flags |= TMX_REQ_FLAG_MATCHED;
        rreq->info.tag     = wc->tm_info.tag;
        rreq->info.sender  = ep != NULL ? ep->remote_uuid : 0;
        rreq->rndv_sreq_id = wc->tm_info.priv; /* app_ctx, whole */
        rreq->rndv_ep_id   = ep != NULL ? ep->id : 0;
        if (ep != NULL) {
            tmx_proto_credit_return(ep); /* the message took one of the sender's credits */
        }
        if (rreq->tm_held != NULL) {
            tmx_message_t *msg = rreq->tm_held;
            rreq->tm_held      = NULL;
            tmx_proto_tm_rematch(w, msg);
        }
    }
    if (!final) {
        return;
    }
    ep  = tmx_hash_get(&w->ep_by_id, rreq->rndv_ep_id);
    ctx = (uint32_t)rreq->rndv_sreq_id;
    if (wc->status == TMX_WC_TM_RNDV_INCOMPLETE) {
        /* the buffer holds the rendezvous header: software reads and sends the FIN */
        tmx_proto_tm_rndv_t r;
        uint64_t            imm;

        if (!(ctx & TMX_PROTO_TM_RNDV) || wc->byte_len < sizeof(r) || rreq->len < sizeof(r)) {
            tmx_warn("tag list: malformed rendezvous header (%u bytes) dropped", wc->byte_len);
            if (ctx & TMX_PROTO_TM_RNDV) {
                tmx_proto_send_ctrl_then(ep, TMX_PROTO_FIN, ctx & TMX_PROTO_SREQ_ID_MAX,
                                         TMX_ERR_IO, rreq, TMX_ERR_IO);
            } else {
                tmx_request_complete(rreq, TMX_ERR_IO);
            }
            return;
        }
        memcpy(&r, rreq->buf, sizeof(r));
        if (tmx_proto_tm_rndv_parse(&r, &imm) != 0) {
            /* overwritten (another receive on the same buffer) or forged: the sender still
             * hears that it is over */
            tmx_warn("tag list: the rendezvous header in a receive's buffer is not one (was the "
                     "buffer given to two receives?): receive failed");
            tmx_proto_send_ctrl_then(ep, TMX_PROTO_FIN, ctx & TMX_PROTO_SREQ_ID_MAX, TMX_ERR_IO,
                                     rreq, TMX_ERR_IO);
            return;
        }
        rreq->info.has_imm = imm != 0;
        rreq->info.imm     = (uint32_t)imm;
        if (r.length < sizeof(r)) {
            /* the header covered bytes past the message: the user's again (the read writes
             * only the message's) */
            memcpy((uint8_t *)rreq->buf + r.length, rreq->tm_saved + r.length,
                   sizeof(r) - (size_t)r.length);
        }
        if (ep == NULL || ep->state == TMX_EP_FAILED) {
            rreq->info.length = (size_t)r.length;
            tmx_request_complete(rreq, TMX_ERR_PEER_FAILED);
            return;
        }
        tmx_proto_rndv_recv(rreq, ep, ctx & TMX_PROTO_SREQ_ID_MAX, be64toh(r.rvh.va), r.length,
                            be32toh(r.rvh.rkey));
        return;
    }
    status            = tmx_proto_tm_wc_status(wc->status);
    rreq->info.length = wc->byte_len;
    if (ctx & TMX_PROTO_TM_RNDV) {
        if (status == TMX_OK) {
            iface->tm.stats.rndv++; /* the device read the data and sent the FIN */
            tmx_request_complete(rreq, TMX_OK);
            return;
        }
        /* the read failed and the device sent no FIN: the sender learns it from us */
        tmx_warn("rendezvous read by the device failed: %s", tmx_wc_status_string(wc->status));
        tmx_proto_send_ctrl_then(ep, TMX_PROTO_FIN, ctx & TMX_PROTO_SREQ_ID_MAX, status, rreq,
                                 status);
        return;
    }
    if (ctx & TMX_PROTO_TM_SYNC) {
        tmx_proto_send_ctrl_then(ep, TMX_PROTO_ACK, ctx & TMX_PROTO_SREQ_ID_MAX, 0, rreq, status);
        return;
    }
    if (ep != NULL) {
        tmx_proto_credits_add(ep, ctx & TMX_PROTO_TM_CREDITS_MAX);
        if (!tmx_list_is_empty(&ep->pending)) {
            tmx_proto_ep_schedule(ep);
        }
    }
    tmx_request_complete(rreq, status);
}

/* A list operation completed. A DEL that got its entry back lets the receive go on: canceled,
 * or given the message that made software take it back. */
void tmx_proto_tm_op_done(tmx_iface_t *iface, const tmx_wc_t *wc)
{
    int             is_del, consumed;
    tmx_tm_entry_t *e = tmx_tm_op_done(&iface->tm, wc, &is_del, &consumed);
    tmx_request_t  *rreq;

    if (e == NULL || consumed) {
        return; /* consumed: its receive completions said everything */
    }
    rreq = tmx_container_of(e, tmx_request_t, tme);
    if (rreq->tm_cancel) {
        rreq->tm_cancel = 0;
        tmx_request_complete(rreq, TMX_ERR_CANCELED);
    } else if (rreq->tm_held != NULL) {
        tmx_message_t *msg = rreq->tm_held;
        rreq->tm_held      = NULL;
        tmx_proto_recv_matched(rreq, msg);
    }
}

/* Cancels a receive the device holds (under the lock, the receive in the expected queue):
 * waits for the DEL's answer, which is immediate on the soft device and microseconds on an
 * adapter. TMX_OK: canceled; TMX_ERR_BUSY: a message consumed it first. */
tmx_status_t tmx_proto_tm_cancel(tmx_request_t *rreq)
{
    tmx_worker_t *w     = rreq->worker;
    tmx_iface_t  *iface = w->tm_iface;
    double        limit = tmx_time_sec() + w->ctx->cfg.peer_timeout;

    tmx_tag_exp_remove(&w->tm, &rreq->exp);
    rreq->flags &= (uint16_t)~TMX_REQ_FLAG_EXPECTED;
    if (tmx_tm_withdraw(&iface->tm, &rreq->tme)) {
        tmx_request_complete(rreq, TMX_ERR_CANCELED);
        return TMX_OK;
    }
    rreq->tm_cancel = 1;
    while (!(rreq->flags & TMX_REQ_FLAG_COMPLETED)) {
        if (tmx_worker_poll_iface(iface) == 0 && tmx_time_sec() > limit) {
            tmx_error("tag list: no answer to the delete of a canceled receive");
            return TMX_ERR_BUSY;
        }
    }
    return rreq->status == TMX_ERR_CANCELED ? TMX_OK : TMX_ERR_BUSY;
}
