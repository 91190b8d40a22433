/* The tagged public API: argument checks, then the protocols. */
#include "config.h"

#include <string.h>

#include "core/core.h"
#include "proto/proto.h"
#include "proto/ring.h"
#include "util/log.h"

static tmx_status_t tmx_buf_check(const void *buf, size_t len)
{
    if ((buf == NULL && len > 0) || len > TMX_MAX_MSG) {
        return TMX_ERR_INVALID_PARAM;
    }
    return TMX_OK;
}

TMX_API tmx_status_t tmx_tag_send_nb(tmx_ep_h ep, const void *buf, size_t len, tmx_tag_t tag,
                                     const tmx_request_params_t *params, tmx_request_h *request_p)
{
    tmx_worker_t *w;
    tmx_request_t *req;
    tmx_status_t status;
    int sync;
    uint64_t imm;

    if (ep == NULL || request_p == NULL) {
        return TMX_ERR_INVALID_PARAM;
    }
    if (ep->magic != TMX_MAGIC_EP || ep->passive) {
        return TMX_ERR_INVALID_HANDLE;
    }
    status = tmx_buf_check(buf, len);
    if (status == TMX_OK) {
        status = tmx_request_params_ok(params, 1);
    }
    if (status != TMX_OK) {
        return status;
    }
    w    = ep->worker;
    sync = params != NULL && (params->field_mask & TMX_REQ_PARAM_FLAGS) &&
           (params->flags & TMX_SEND_FLAG_SYNC);
    imm  = params != NULL && (params->field_mask & TMX_REQ_PARAM_IMM) ? TMX_PROTO_IMM(params->imm)
                                                                      : 0;
    tmx_worker_lock(w);
    if (ep->state == TMX_EP_FAILED) {
        status = TMX_ERR_PEER_FAILED;
        goto out;
    }
    /* Fast path: connected, nothing queued before us, eager: done on return. */
    if (!sync && len <= ep->eager_max && ep->state == TMX_EP_CONNECTED &&
        tmx_list_is_empty(&ep->pending) && (imm == 0 || !ep->iface->tm_on)) {
        if (imm == 0 && tmx_proto_compact_fits(ep, len, tag)) {
            /* tmx_proto_eager_try's compact EAGER, inline */
            status = tmx_proto_compact_post(ep, buf, len);
        } else if (ep->ring_tx != NULL && ep->ring_tx->seq_on) {
            /* tmx_proto_eager_try, its ring step inline */
            status = tmx_ring_eager_try(ep, buf, len, tag, imm);
            if (status != TMX_OK) {
                status = tmx_proto_eager_queue(ep, buf, len, tag, imm);
            }
        } else {
            status = tmx_proto_eager_try(ep, buf, len, tag, imm);
        }
        if (status == TMX_OK) {
            *request_p = NULL;
            goto out;
        }
        if (status != TMX_ERR_NO_RESOURCE) {
            goto out;
        }
    }
    if (params != NULL && (params->field_mask & TMX_REQ_PARAM_FLAGS) &&
        (params->flags & TMX_SEND_FLAG_TRY)) {
        /* TMX_SEND_FLAG_TRY: not in place, so not at all (nothing posted, buf not kept) */
        status = TMX_ERR_NO_RESOURCE;
        goto out;
    }
    req = tmx_request_alloc(w, TMX_REQ_SEND, params);
    if (req == NULL) {
        status = TMX_ERR_NO_MEMORY;
        goto out;
    }
    req->ep  = ep;
    req->buf = (void *)buf;
    req->len = len;
    req->tag = tag;
    status   = TMX_ERR_NO_RESOURCE;
    if (ep->state == TMX_EP_CONNECTED && tmx_list_is_empty(&ep->pending)) {
        status = tmx_proto_send(ep, req);
    }
    if (status == TMX_ERR_NO_RESOURCE) {
        tmx_proto_ep_queue(ep, req);
        status = TMX_INPROGRESS;
    } else if (status == TMX_OK) {
        tmx_request_release(req); /* complete in place: no request for the caller */
        *request_p = NULL;
        goto out;
    } else if (status != TMX_INPROGRESS) {
        tmx_request_release(req);
        goto out;
    }
    *request_p = req;
out:
    tmx_worker_unlock(w);
    return status;
}

/* The sender a directed receive or probe names: the remote worker of an endpoint of w. Its
 * id is fixed when the endpoint is created, so no lock is needed. *src_p = 0 for none. */
static tmx_status_t tmx_source_resolve(tmx_worker_t *w, tmx_ep_h ep, uint64_t *src_p)
{
    if (ep == NULL) {
        return TMX_ERR_INVALID_PARAM;
    }
    if (ep->magic != TMX_MAGIC_EP) {
        return TMX_ERR_INVALID_HANDLE;
    }
    if (ep->worker != w || ep->passive) {
        return TMX_ERR_INVALID_PARAM;
    }
    *src_p = ep->remote_uuid;
    return TMX_OK;
}

/* The checks shared by the two receive calls, in the order the API promises: NULL
 * arguments, then a dead worker, then the buffer, then the request params. */
static inline tmx_status_t tmx_recv_args_check(tmx_worker_t *w, void *buf, size_t len,
                                               const tmx_request_params_t *params,
                                               tmx_request_h *request_p)
{
    tmx_status_t status;

    if (w == NULL || request_p == NULL) {
        return TMX_ERR_INVALID_PARAM;
    }
    if (w->magic != TMX_MAGIC_WORKER) {
        return TMX_ERR_INVALID_HANDLE;
    }
    status = tmx_buf_check(buf, len);
    if (status == TMX_OK) {
        status = tmx_request_params_ok(params, 0);
    }
    return status;
}

TMX_API tmx_status_t tmx_tag_recv_nb(tmx_worker_h w, void *buf, size_t len, tmx_tag_t tag,
                                     tmx_tag_t mask, const tmx_request_params_t *params,
                                     tmx_request_h *request_p)
{
    tmx_request_t *req;
    tmx_tag_unexp_t *u;
    tmx_status_t status;
    uint64_t src = 0;

    status = tmx_recv_args_check(w, buf, len, params, request_p);
    if (status == TMX_OK && params != NULL && (params->field_mask & TMX_REQ_PARAM_SOURCE)) {
        status = tmx_source_resolve(w, params->source, &src);
    }
    if (status != TMX_OK) {
        return status;
    }
    tmx_worker_lock(w);
    req = tmx_request_alloc(w, TMX_REQ_RECV, params);
    if (req == NULL) {
        tmx_worker_unlock(w);
        return TMX_ERR_NO_MEMORY;
    }
    req->buf   = buf;
    req->len   = len;
    req->tag   = tag;
    req->exp.src = src;
    *request_p   = req; /* set first: a callback may run inside the match below */
    u            = tmx_tag_unexp_match(&w->tm, tag, mask, src, 1);
    if (u != NULL) {
        tmx_proto_recv_matched(req, tmx_container_of(u, tmx_message_t, unexp));
    } else if (src != 0 && w->failed_peers.count != 0 &&
               tmx_hash_get(&w->failed_peers, src) != NULL) {
        /* its source failed before, and left no message that matches: none will come */
        req->info.sender = src;
        tmx_request_complete(req, TMX_ERR_PEER_FAILED);
    } else {
        req->exp.tag  = tag;
        req->exp.mask = mask;
        tmx_tag_exp_post(&w->tm, &req->exp);
        req->flags |= TMX_REQ_FLAG_EXPECTED;
        if (w->tm_iface != NULL) {
            tmx_proto_tm_offer(w, req);
        }
    }
    tmx_worker_unlock(w);
    return TMX_INPROGRESS;
}

TMX_API tmx_status_t tmx_tag_probe(tmx_worker_h w, tmx_tag_t tag, tmx_tag_t mask,
                                   tmx_probe_mode_t mode, tmx_tag_recv_info_t *info,
                                   tmx_message_h *message_p)
{
    return tmx_tag_probe_ex(w, tag, mask, NULL, mode, info, message_p);
}

TMX_API tmx_status_t tmx_tag_probe_ex(tmx_worker_h w, tmx_tag_t tag, tmx_tag_t mask,
                                      tmx_ep_h source, tmx_probe_mode_t mode,
                                      tmx_tag_recv_info_t *info, tmx_message_h *message_p)
{
    tmx_tag_unexp_t *u;
    tmx_message_t *msg;
    tmx_status_t status;
    uint64_t src = 0;

    if (w == NULL) {
        return TMX_ERR_INVALID_PARAM;
    }
    if (w->magic != TMX_MAGIC_WORKER) {
        return TMX_ERR_INVALID_HANDLE;
    }
    if ((unsigned)mode > TMX_PROBE_DISCARD || (mode == TMX_PROBE_CLAIM && message_p == NULL)) {
        return TMX_ERR_INVALID_PARAM;
    }
    if (source != NULL) {
        status = tmx_source_resolve(w, source, &src);
        if (status != TMX_OK) {
            return status;
        }
    }
    tmx_worker_lock(w);
    u = tmx_tag_unexp_match(&w->tm, tag, mask, src, mode != TMX_PROBE_PEEK);
    if (u == NULL) {
        tmx_worker_unlock(w);
        return TMX_ERR_NO_MESSAGE;
    }
    msg = tmx_container_of(u, tmx_message_t, unexp);
    if (info != NULL) {
        info->tag    = msg->unexp.tag;
        info->length = msg->length;
        info->sender  = msg->unexp.src;
        info->has_imm = msg->imm != 0;
        info->imm     = (uint32_t)msg->imm;
    }
    if (mode == TMX_PROBE_CLAIM) {
        tmx_list_add_tail(&w->claimed, &msg->claimed_link);
        *message_p = msg;
    } else if (mode == TMX_PROBE_DISCARD) {
        tmx_proto_message_drop(w, msg);
    }
    tmx_worker_unlock(w);
    return TMX_OK;
}

TMX_API tmx_status_t tmx_tag_msg_recv_nb(tmx_worker_h w, void *buf, size_t len, tmx_message_h msg,
                                         const tmx_request_params_t *params,
                                         tmx_request_h *request_p)
{
    tmx_request_t *req;
    tmx_status_t status;
    tmx_list_t *l;

    if (msg == NULL ||
        (params != NULL && (params->field_mask & TMX_REQ_PARAM_SOURCE))) {
        return TMX_ERR_INVALID_PARAM; /* the message is chosen already */
    }
    status = tmx_recv_args_check(w, buf, len, params, request_p);
    if (status != TMX_OK) {
        return status;
    }
    tmx_worker_lock(w);
    /* The handle is looked up among this worker's claimed messages before it is touched: a
     * handle already received (its memory freed) or from another worker is refused. */
    for (l = w->claimed.next; l != &w->claimed; l = l->next) {
        if (l == &msg->claimed_link) {
            break;
        }
    }
    if (l == &w->claimed) {
        tmx_worker_unlock(w);
        return TMX_ERR_INVALID_HANDLE;
    }
    req = tmx_request_alloc(w, TMX_REQ_RECV, params);
    if (req == NULL) {
        tmx_worker_unlock(w);
        return TMX_ERR_NO_MEMORY;
    }
    tmx_list_del(&msg->claimed_link);
    req->buf   = buf;
    req->len   = len;
    *request_p = req;
    tmx_proto_recv_matched(req, msg);
    tmx_worker_unlock(w);
    return TMX_INPROGRESS;
}

static tmx_status_t tmx_tag_send_blocking(tmx_ep_h ep, const void *buf, size_t len, tmx_tag_t tag,
                                          unsigned flags)
{
    tmx_request_params_t params = {.field_mask = TMX_REQ_PARAM_FLAGS, .flags = flags};
    tmx_request_h req;
    tmx_status_t status;

    /* no flags: no params to check (about 25 instructions of every blocking send) */
    status = tmx_tag_send_nb(ep, buf, len, tag, flags != 0 ? &params : NULL, &req);
    if (status != TMX_INPROGRESS) {
        return status;
    }
    status = tmx_request_wait(req, NULL);
    tmx_request_free(req);
    return status;
}

TMX_API tmx_status_t tmx_tag_send(tmx_ep_h ep, const void *buf, size_t len, tmx_tag_t tag)
{
    return tmx_tag_send_blocking(ep, buf, len, tag, 0);
}

TMX_API tmx_status_t tmx_tag_send_sync(tmx_ep_h ep, const void *buf, size_t len, tmx_tag_t tag)
{
    return tmx_tag_send_blocking(ep, buf, len, tag, TMX_SEND_FLAG_SYNC);
}

TMX_API tmx_status_t tmx_tag_recv(tmx_worker_h w, void *buf, size_t len, tmx_tag_t tag,
                                  tmx_tag_t mask, tmx_tag_recv_info_t *info)
{
    tmx_request_h req;
    tmx_status_t status;

    status = tmx_tag_recv_nb(w, buf, len, tag, mask, NULL, &req);
    if (status != TMX_INPROGRESS) {
        return status;
    }
    /* Blocking, the caller cannot choose to keep waiting after a peer failed: the receive is
     * canceled and fails (as MPI_Recv from MPI_ANY_SOURCE does under ULFM), unless it matched
     * meanwhile. */
    while ((status = tmx_request_wait(req, info)) == TMX_ERR_PEER_FAILED_PENDING) {
        if (tmx_request_cancel(req) == TMX_OK) {
            status = TMX_ERR_PEER_FAILED;
            break;
        }
    }
    tmx_request_free(req);
    return status;
}
