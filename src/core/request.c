#include "config.h"

#include <string.h>

#include "core/core.h"
#include "proto/proto.h"
#include "util/log.h"

tmx_status_t tmx_request_params_check(const tmx_request_params_t *params, int is_send)
{
    uint64_t known = TMX_REQ_PARAM_CALLBACK | TMX_REQ_PARAM_USER_DATA | TMX_REQ_PARAM_FLAGS;

    if (params == NULL) {
        return TMX_OK;
    }
    if (!is_send) {
        known |= TMX_REQ_PARAM_SOURCE; /* checked by the receive call, which knows the worker */
    } else {
        known |= TMX_REQ_PARAM_IMM;
    }
    if (params->field_mask & ~known) {
        return TMX_ERR_INVALID_PARAM;
    }
    if ((params->field_mask & TMX_REQ_PARAM_CALLBACK) &&
        (is_send ? params->cb.send == NULL : params->cb.recv == NULL)) {
        return TMX_ERR_INVALID_PARAM; /* asked for a callback but gave none */
    }
    if (params->field_mask & TMX_REQ_PARAM_FLAGS) {
        unsigned allowed = is_send ? TMX_SEND_FLAG_SYNC | TMX_SEND_FLAG_TRY : 0;
        if ((params->flags & ~allowed) ||
            (params->flags & (TMX_SEND_FLAG_SYNC | TMX_SEND_FLAG_TRY)) ==
                (TMX_SEND_FLAG_SYNC | TMX_SEND_FLAG_TRY)) {
            return TMX_ERR_INVALID_PARAM;
        }
    }
    return TMX_OK;
}

void tmx_request_release(tmx_request_t *req)
{
    req->magic = TMX_MAGIC_DEAD;
    tmx_mpool_put(&req->worker->req_mp, req);
}

void tmx_request_complete(tmx_request_t *req, tmx_status_t status)
{
    if (req->flags & TMX_REQ_FLAG_COMPLETED) {
        return;
    }
    req->status = status;
    req->flags |= TMX_REQ_FLAG_COMPLETED;
    if (req->type == TMX_REQ_RECV) {
        if (req->cb.recv != NULL) {
            req->cb.recv(req, status, &req->info, req->user_data);
        }
    } else if (req->cb.send != NULL) {
        req->cb.send(req, status, req->user_data);
    }
    if (req->flags & TMX_REQ_FLAG_RELEASE) {
        tmx_request_release(req);
        return;
    }
    /* Last: a thread that sees done (tmx_request_test, without the worker lock) sees status and
     * info too, and the callback has returned; this thread does not touch req afterwards. */
    __atomic_store_n(&req->done, 1, __ATOMIC_RELEASE);
}

static int tmx_request_check(const tmx_request_t *req)
{
    return req != NULL && req->magic == TMX_MAGIC_REQ;
}

int tmx_request_failure_pending_locked(tmx_request_t *req, unsigned epoch)
{
    tmx_worker_t *w = req->worker;
    int           pending;

    tmx_worker_lock(w);
    pending = (req->flags & (TMX_REQ_FLAG_EXPECTED | TMX_REQ_FLAG_COMPLETED)) ==
                  TMX_REQ_FLAG_EXPECTED &&
              atomic_exchange_explicit(&req->fail_epoch, epoch, memory_order_relaxed) != epoch &&
              req->exp.src == 0;
    tmx_worker_unlock(w);
    return pending;
}

TMX_API tmx_status_t tmx_request_test(tmx_request_h req, tmx_tag_recv_info_t *info)
{
    if (req == NULL) {
        return TMX_ERR_INVALID_PARAM;
    }
    if (!tmx_request_check(req)) {
        return TMX_ERR_INVALID_HANDLE;
    }
    if (!tmx_request_done(req)) {
        return tmx_request_failure_pending(req) ? TMX_ERR_PEER_FAILED_PENDING : TMX_INPROGRESS;
    }
    if (info != NULL && req->type == TMX_REQ_RECV) {
        *info = req->info;
    }
    return req->status;
}

TMX_API tmx_status_t tmx_request_wait(tmx_request_h req, tmx_tag_recv_info_t *info)
{
    if (req == NULL) {
        return TMX_ERR_INVALID_PARAM;
    }
    if (!tmx_request_check(req)) {
        return TMX_ERR_INVALID_HANDLE;
    }
    /* A freed request is never done (it is released instead); its RELEASE flag is read under
     * the lock, as other threads' progress changes the flags. Rounds that find nothing wait
     * as TMX_WAIT says (tmx_worker_idle). */
    if (!tmx_request_done(req)) {
        tmx_status_t status = tmx_worker_wait_request(req->worker, req);

        if (status != TMX_OK) {
            return status;
        }
    }
    return tmx_request_test(req, info);
}

TMX_API tmx_status_t tmx_request_cancel(tmx_request_h req)
{
    tmx_worker_t *w;
    tmx_status_t  status;

    if (req == NULL) {
        return TMX_ERR_INVALID_PARAM;
    }
    if (!tmx_request_check(req)) {
        return TMX_ERR_INVALID_HANDLE;
    }
    if (req->type != TMX_REQ_RECV) {
        return TMX_ERR_UNSUPPORTED;
    }
    w = req->worker;
    tmx_worker_lock(w);
    if ((req->flags & TMX_REQ_FLAG_EXPECTED) && req->tme.state != TMX_TM_NONE) {
        status = tmx_proto_tm_cancel(req); /* the device holds it */
    } else if (req->flags & TMX_REQ_FLAG_EXPECTED) {
        tmx_tag_exp_remove(&w->tm, &req->exp);
        req->flags &= (uint16_t)~TMX_REQ_FLAG_EXPECTED;
        if (w->tm_iface != NULL) {
            tmx_tm_sw_left(&w->tm_iface->tm, &req->tme);
        }
        tmx_request_complete(req, TMX_ERR_CANCELED);
        status = TMX_OK;
    } else {
        status = TMX_ERR_BUSY; /* matched (or done) already */
    }
    tmx_worker_unlock(w);
    return status;
}

TMX_API void tmx_request_free(tmx_request_h req)
{
    tmx_worker_t *w;

    if (!tmx_request_check(req)) {
        return;
    }
    w = req->worker;
    tmx_worker_lock(w);
    if (req->flags & TMX_REQ_FLAG_RELEASE) {
        /* freed twice: ignored */
    } else if (tmx_request_done(req)) {
        tmx_request_release(req);
    } else {
        /* Released by tmx_request_complete; also when freed from its own callback. */
        req->flags |= TMX_REQ_FLAG_RELEASE;
    }
    tmx_worker_unlock(w);
}
