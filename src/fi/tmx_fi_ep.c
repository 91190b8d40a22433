/* libtmx-fi.so: endpoints and the data path (tagged and untagged send/receive, peek/claim,
 * cancel), as calls of tmx's public API. */
#include "tmx_fi.h"

#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- operations */

static void tmx_fi_recv_cb(tmx_request_h req, tmx_status_t status,
                           const tmx_tag_recv_info_t *info, void *user_data);

/* tmx_fi_op_get when the free list is empty: a new chunk of operations (NULL at
 * TMX_FI_QUEUE_SIZE or without memory). */
static __attribute__((noinline)) tmx_fi_op_t *tmx_fi_op_grow(tmx_fi_ep_t *ep)
{
    enum { CHUNK = 64 };
    void       **chunks;
    tmx_fi_op_t *ops;

    if (ep->nops >= TMX_FI_QUEUE_SIZE) {
        return NULL;
    }
    chunks = realloc(ep->chunks, (ep->nchunks + 1) * sizeof(*chunks));
    if (chunks == NULL) {
        return NULL;
    }
    ep->chunks = chunks;
    ops        = calloc(CHUNK, sizeof(*ops));
    if (ops == NULL) {
        return NULL;
    }
    ep->chunks[ep->nchunks++] = ops;
    ep->nops += CHUNK;
    for (int i = 0; i < CHUNK; i++) {
        ops[i].ep    = ep; /* calloc'd: req, bounce NULL, iov_count 0 */
        ops[i].rparams.field_mask = TMX_REQ_PARAM_CALLBACK | TMX_REQ_PARAM_USER_DATA;
        ops[i].rparams.cb.recv    = tmx_fi_recv_cb;
        ops[i].rparams.user_data  = &ops[i];
        ops[i].next  = ep->free_ops;
        ep->free_ops = &ops[i];
    }
    return ep->free_ops;
}

static inline tmx_fi_op_t *tmx_fi_op_get(tmx_fi_ep_t *ep)
{
    tmx_fi_op_t *op = ep->free_ops;

    if (op == NULL && (op = tmx_fi_op_grow(ep)) == NULL) {
        return NULL;
    }
    /* a free operation has ep set, req and bounce NULL, iov_count 0 (op_put) */
    ep->free_ops = op->next;
    op->next     = NULL;
    op->status   = TMX_INPROGRESS;
    return op;
}

static void tmx_fi_op_put(tmx_fi_op_t *op)
{
    tmx_fi_ep_t *ep = op->ep;

    if (op->bounce != NULL) {
        if (op->kind == TMX_FI_OP_SEND && (op->flags & FI_INJECT)) {
            ep->inject_bytes -= op->len; /* a long inject's copy (tmx_fi_send_unlocked) */
        }
        free(op->bounce);
        op->bounce = NULL;
    }
    op->req       = NULL;
    op->iov_count = 0;
    op->next      = ep->free_ops;
    ep->free_ops  = op;
}

/* The user's view of a tag: with FI_MSG the top bit is the provider's. */
static uint64_t tmx_fi_user_tag(const tmx_fi_ep_t *ep, uint64_t tag)
{
    return (ep->caps & FI_MSG) ? tag & ~TMX_FI_MSG_BIT : tag;
}

/* Turns a finished operation into its CQ entry (or error entry) and counter increment. */
static void tmx_fi_op_complete_any(tmx_fi_op_t *op)
{
    tmx_fi_ep_t   *ep    = op->ep;
    int            recv  = op->kind == TMX_FI_OP_RECV;
    tmx_fi_cq_t   *cq    = recv ? ep->rx_cq : ep->tx_cq;
    tmx_fi_cntr_t *cntr  = recv ? ep->rx_cntr : ep->tx_cntr;
    uint64_t       flags = (op->flags & (FI_TAGGED | FI_MSG)) | (recv ? FI_RECV : FI_SEND);
    tmx_status_t   s     = op->status;
    size_t         len   = 0;
    uint64_t       tag   = recv ? tmx_fi_user_tag(ep, op->info.tag) : 0;
    uint64_t       data  = 0;

    if (recv) {
        len = op->info.length < op->len ? op->info.length : op->len;
        if (op->bounce != NULL) {
            /* scatter what came into the iov */
            size_t off = 0;
            for (size_t i = 0; i < op->iov_count && off < len; i++) {
                size_t n = op->iov[i].iov_len < len - off ? op->iov[i].iov_len : len - off;
                if (n == 0) {
                    continue;
                }
                memcpy(op->iov[i].iov_base, (char *)op->bounce + off, n);
                off += n;
            }
        }
        if ((op->flags & FI_DISCARD) && (s == TMX_OK || s == TMX_ERR_TRUNCATED)) {
            s   = TMX_OK;
            len = 0;
        }
        if (op->info.has_imm) {
            flags |= FI_REMOTE_CQ_DATA;
            data = op->info.imm;
        }
    }
    if (s == TMX_OK) {
        if (cntr != NULL) {
            cntr->val++;
        }
        if (cq != NULL && (op->flags & FI_COMPLETION)) {
            tmx_fi_cq_push(cq, op->context, flags, len, tag, data);
        }
    } else {
        if (cntr != NULL) {
            cntr->err++;
        }
        /* an injected send has no context to report an error with */
        if (cq != NULL && !(op->flags & FI_INJECT)) {
            size_t olen = (s == TMX_ERR_TRUNCATED && op->info.length > op->len)
                              ? op->info.length - op->len
                              : 0;
            if (tmx_fi_cq_push_err(cq, op->context, flags, s == TMX_ERR_TRUNCATED ? len : 0, tag,
                                   olen, tmx_fi_errno(s), (int)s) == 0) {
                cq->err_tail->e.data = data;
            }
        }
    }
}

/* A send done: the endpoint's send counter, then its CQ entry when the flags at flagsp ask
 * for one (FI_COMPLETION; NULL: an inject, none; kind: FI_TAGGED or FI_MSG). Inline in every
 * send's success: the common cases' (fi_tsend, fi_tsenddata, fi_tinject, fi_tinjectdata),
 * tmx_fi_send_one's, tmx_fi_inject_one's and a completed operation's. The flags are read
 * through a pointer after the counter, as the blocks this replaces did: read before it (the
 * counter's store may alias them), fi_tsend took 2 instructions more (cg_small fi-msg). */
static inline __attribute__((always_inline)) void
tmx_fi_send_done(tmx_fi_ep_t *ep, void *context, const uint64_t *flagsp, uint64_t kind)
{
    if (ep->tx_cntr != NULL) {
        ep->tx_cntr->val++;
    }
    if (flagsp != NULL && (*flagsp & FI_COMPLETION) && ep->tx_cq != NULL) {
        tmx_fi_cq_push(ep->tx_cq, context, kind | FI_SEND, 0, 0, 0);
    }
}

/* tmx_fi_op_complete_any, with the common cases first: a send, or a receive into one buffer,
 * that succeeded. */
static inline void tmx_fi_op_complete(tmx_fi_op_t *op)
{
    tmx_fi_ep_t *ep = op->ep;

    if (op->status != TMX_OK) {
        tmx_fi_op_complete_any(op);
    } else if (op->kind == TMX_FI_OP_SEND) {
        tmx_fi_send_done(ep, op->context, &op->flags, op->flags & (FI_TAGGED | FI_MSG));
    } else if (op->bounce == NULL && !(op->flags & FI_DISCARD) && !op->info.has_imm) {
        if (ep->rx_cntr != NULL) {
            ep->rx_cntr->val++;
        }
        if (ep->rx_cq != NULL && (op->flags & FI_COMPLETION)) {
            tmx_fi_cq_push(ep->rx_cq, op->context, (op->flags & (FI_TAGGED | FI_MSG)) | FI_RECV,
                           op->info.length < op->len ? op->info.length : op->len,
                           tmx_fi_user_tag(ep, op->info.tag), 0);
        }
    } else {
        tmx_fi_op_complete_any(op);
    }
}

/*
 * tmx callbacks complete their operation at once: the CQ entry or error entry, the counter,
 * and the operation back on the free list. None calls tmx (tmx's rule for callbacks): the
 * poster freed the request already (tmx_request_free of a request in progress: tmx releases
 * it after this callback), so there is nothing left to do after the tmx call returns. While
 * the endpoint closes (ep->closing) operations only go back to the free list.
 */
static void tmx_fi_op_finish(tmx_fi_op_t *op)
{
    if (!op->ep->closing) {
        tmx_fi_op_complete(op);
    }
    tmx_fi_op_put(op);
}

static void tmx_fi_send_cb(tmx_request_h req, tmx_status_t status, void *user_data)
{
    tmx_fi_op_t *op = user_data;

    (void)req;
    op->ep->tx_pending--;
    op->status = status;
    tmx_fi_op_finish(op);
}

static void tmx_fi_recv_cb(tmx_request_h req, tmx_status_t status,
                           const tmx_tag_recv_info_t *info, void *user_data)
{
    tmx_fi_op_t *op = user_data;
    tmx_fi_ep_t *ep = op->ep;

    (void)req;
    if (status == TMX_OK && info != NULL && op->bounce == NULL && !(op->flags & FI_DISCARD) &&
        !ep->closing) {
        /* the common case, tmx_fi_op_complete's for a receive into one buffer, straight from
         * info: no copy of it into the operation. With remote CQ data too (Open MPI's default
         * ofi_tag_full sends the source rank so). */
        if (ep->rx_cntr != NULL) {
            ep->rx_cntr->val++;
        }
        if (ep->rx_cq != NULL && (op->flags & FI_COMPLETION)) {
            uint64_t flags = (op->flags & (FI_TAGGED | FI_MSG)) | FI_RECV |
                             (info->has_imm ? FI_REMOTE_CQ_DATA : 0);
            /* TMX_OK: the message fitted (info->length <= op->len) */
            tmx_fi_cq_push(ep->rx_cq, op->context, flags, info->length,
                           info->tag & ~ep->tag_bad, info->imm);
        }
        op->status = TMX_OK; /* tmx_fi_recv_post looks (a receive done inside its call) */
        tmx_fi_op_put(op);
        return;
    }
    op->status = status;
    if (info != NULL) {
        op->info = *info;
    } else {
        memset(&op->info, 0, sizeof(op->info)); /* no message: nothing to report */
    }
    tmx_fi_op_finish(op);
}

/* ---------------------------------------------------------------- sending */

/* tmx_fi_ep_peer for an entry not connected yet: the tmx endpoint, made now (NULL: none, and
 * ep->peer_err says why: -FI_EINVAL for no valid entry, else tmx_ep_create's status, such as
 * -FI_EHOSTUNREACH for the name of a process that is gone) */
static __attribute__((noinline)) tmx_ep_h tmx_fi_ep_peer_new(tmx_fi_ep_t *ep, fi_addr_t addr)
{
    tmx_fi_av_t    *av = ep->av;
    tmx_ep_params_t p;
    tmx_ep_h        tep;
    const uint8_t  *name;
    tmx_status_t    s;

    ep->peer_err = -FI_EINVAL;
    if (av == NULL || addr >= av->count || !av->valid[addr]) {
        return NULL;
    }
    if (addr >= ep->npeers) {
        size_t    n     = av->cap > addr ? av->cap : addr + 1;
        tmx_ep_h *peers = realloc(ep->peers, n * sizeof(*peers));
        if (peers == NULL) {
            ep->peer_err = -FI_ENOMEM;
            return NULL;
        }
        memset(peers + ep->npeers, 0, (n - ep->npeers) * sizeof(*peers));
        ep->peers  = peers;
        ep->npeers = n;
    }
    name             = av->names + addr * TMX_FI_NAME_LEN;
    p.field_mask     = TMX_EP_PARAM_ADDRESS;
    p.address        = name + 1;
    p.address_length = name[0];
    s                = tmx_ep_create(ep->worker, &p, &tep);
    if (s != TMX_OK) {
        ep->peer_err = -tmx_fi_errno(s);
        return NULL;
    }
    ep->peers[addr] = tep;
    return tep;
}

/* The tmx endpoint of an address-vector entry (NULL: no valid entry). Inline: every send and
 * every directed receive looks its peer up. */
static inline tmx_ep_h tmx_fi_ep_peer(tmx_fi_ep_t *ep, fi_addr_t addr)
{
    tmx_fi_av_t *av = ep->av;

    if (addr < ep->npeers && ep->peers[addr] != NULL && addr < av->count && av->valid[addr]) {
        return ep->peers[addr]; /* peers exist only with an av */
    }
    return tmx_fi_ep_peer_new(ep, addr);
}

/* flags with FI_REMOTE_CQ_DATA: data goes as tmx's immediate data (TMX_FI_CQ_DATA_SIZE bytes) */
static ssize_t tmx_fi_send_unlocked(tmx_fi_ep_t *ep, const struct iovec *iov, size_t count,
                           fi_addr_t dest, uint64_t tag, void *context, uint64_t flags,
                           uint64_t data)
{
    tmx_request_params_t params;
    tmx_request_h        req = NULL;
    tmx_fi_op_t         *op;
    tmx_ep_h             peer;
    const void          *buf;
    size_t               len = 0;
    tmx_status_t         s;

    if (!ep->enabled) {
        return -FI_EOPBADSTATE; /* before fi_enable */
    }
    if (count > TMX_FI_IOV_LIMIT || (count > 0 && iov == NULL)) {
        return -FI_EINVAL;
    }
    for (size_t i = 0; i < count; i++) {
        /* an element longer than a message is refused on its own: the sum of up to
         * TMX_FI_IOV_LIMIT such lengths cannot wrap (it sized the bounce buffer, and each
         * element was copied at its own length) */
        if ((iov[i].iov_base == NULL && iov[i].iov_len > 0) || iov[i].iov_len > TMX_FI_MAX_MSG) {
            return -FI_EINVAL;
        }
        len += iov[i].iov_len;
    }
    if (len > TMX_FI_MAX_MSG || ((flags & FI_INJECT) && len > TMX_FI_INJECT_SIZE) ||
        ((flags & FI_REMOTE_CQ_DATA) && data > UINT32_MAX)) {
        return -FI_EINVAL;
    }
    peer = tmx_fi_ep_peer(ep, dest);
    if (peer == NULL) {
        return ep->peer_err;
    }
    op = tmx_fi_op_get(ep);
    if (op == NULL) {
        tmx_fi_ep_progress(ep);
        return -FI_EAGAIN;
    }
    op->kind    = TMX_FI_OP_SEND;
    op->flags   = flags;
    op->context = context;
    if ((flags & FI_INJECT) && len <= TMX_FI_INL_SIZE) {
        size_t off = 0;
        for (size_t i = 0; i < count; i++) {
            if (iov[i].iov_len > 0) { /* a zero-byte element may be NULL */
                memcpy(op->inl + off, iov[i].iov_base, iov[i].iov_len);
                off += iov[i].iov_len;
            }
        }
        buf = op->inl;
    } else if (count > 1 || (flags & FI_INJECT)) { /* gathered, or a long inject's copy */
        size_t off = 0;
        if ((flags & FI_INJECT) && ep->inject_bytes + len > TMX_FI_INJECT_BUFFERED) {
            /* the copies of injects tmx has not sent yet are the provider's memory: bounded
             * (a receiver that takes nothing made 65536 injects of 16 KiB hold 1 GiB) */
            tmx_fi_op_put(op);
            tmx_fi_ep_progress(ep);
            return -FI_EAGAIN;
        }
        op->bounce = malloc(len ? len : 1);
        if (op->bounce == NULL) {
            tmx_fi_op_put(op);
            return -FI_ENOMEM;
        }
        if (flags & FI_INJECT) {
            op->len = len; /* op_put gives it back */
            ep->inject_bytes += len;
        }
        for (size_t i = 0; i < count; i++) {
            if (iov[i].iov_len > 0) {
                memcpy((char *)op->bounce + off, iov[i].iov_base, iov[i].iov_len);
                off += iov[i].iov_len;
            }
        }
        buf = op->bounce;
    } else {
        buf = count ? iov[0].iov_base : op->inl;
    }
    params.field_mask = TMX_REQ_PARAM_CALLBACK | TMX_REQ_PARAM_USER_DATA;
    params.flags      = 0;
    params.cb.send    = tmx_fi_send_cb;
    params.user_data  = op;
    if (flags & FI_REMOTE_CQ_DATA) {
        params.field_mask |= TMX_REQ_PARAM_IMM;
        params.imm = (uint32_t)data;
        if (!ep->cq_data_said) {
            /* once per endpoint: tells who reads FI_LOG_LEVEL=info that the application
             * uses remote CQ data (Open MPI's ofi_tag_full does) */
            ep->cq_data_said = 1;
            if (fi_log_enabled(&tmx_fi_prov, FI_LOG_INFO, FI_LOG_EP_DATA)) {
                fi_log(&tmx_fi_prov, FI_LOG_INFO, FI_LOG_EP_DATA, __func__, __LINE__,
                       "first send with remote CQ data on this endpoint\n");
            }
        }
    }
    s                 = tmx_tag_send_nb(peer, buf, len, tag, &params, &req);
    if (s == TMX_OK) {
        op->status = TMX_OK; /* completed in place: no callback */
        tmx_fi_op_complete(op);
        tmx_fi_op_put(op);
        return 0;
    }
    if (s == TMX_INPROGRESS) {
        ep->tx_pending++;
        tmx_request_free(req); /* released after its callback, which completes op */
        return 0;
    }
    tmx_fi_op_put(op);
    if (s == TMX_ERR_NO_RESOURCE) {
        tmx_fi_ep_progress(ep);
    }
    return -tmx_fi_errno(s);
}

/*
 * tmx_fi_send_unlocked's common case, one buffer without inject or CQ data (fi_tsend): an
 * operation carries the callback's user data and goes back to the free list at once when the
 * send completes in place (an eager send: the CQ entry is made here); only a send in progress
 * keeps it, until its callback.
 */
static ssize_t tmx_fi_send_one(tmx_fi_ep_t *ep, const void *buf, size_t len, fi_addr_t dest,
                               uint64_t tag, void *context, uint64_t flags, int tried)
{
    tmx_request_params_t params;
    tmx_request_h        req = NULL;
    tmx_fi_op_t         *op;
    tmx_ep_h             peer;
    tmx_status_t         s;

    if (!ep->enabled) {
        return -FI_EOPBADSTATE; /* before fi_enable */
    }
    if ((buf == NULL && len > 0) || len > TMX_FI_MAX_MSG) {
        return -FI_EINVAL;
    }
    peer = tmx_fi_ep_peer(ep, dest);
    if (peer == NULL) {
        return ep->peer_err;
    }
    if (!tried && len <= TMX_FI_INJECT_SIZE && ep->tx_pending == 0) {
        /* first as fi_inject does: done in place (an eager send), or not at all, with no
         * operation taken and put back (callgrind, cg_small fi-win 8 B: 12 instructions a
         * message less). Not while sends of ours are in progress: tmx queues this one behind
         * them, which a try would find out only to call again. */
        params.field_mask = TMX_REQ_PARAM_FLAGS;
        params.flags      = TMX_SEND_FLAG_TRY;
        s                 = tmx_tag_send_nb(peer, buf, len, tag, &params, &req);
        if (s == TMX_OK) {
            tmx_fi_send_done(ep, context, &flags, flags & (FI_TAGGED | FI_MSG));
            return 0;
        }
        if (s != TMX_ERR_NO_RESOURCE) {
            return -tmx_fi_errno(s);
        }
    }
    op = tmx_fi_op_get(ep);
    if (op == NULL) {
        tmx_fi_ep_progress(ep);
        return -FI_EAGAIN;
    }
    op->kind          = TMX_FI_OP_SEND;
    op->flags         = flags;
    op->context       = context;
    op->status        = TMX_INPROGRESS;
    params.field_mask = TMX_REQ_PARAM_CALLBACK | TMX_REQ_PARAM_USER_DATA;
    params.flags      = 0;
    params.cb.send    = tmx_fi_send_cb;
    params.user_data  = op;
    s                 = tmx_tag_send_nb(peer, buf, len, tag, &params, &req);
    if (s != TMX_INPROGRESS) {
        op->next     = ep->free_ops; /* unused: back (op_get left it clean) */
        ep->free_ops = op;
    }
    if (s == TMX_OK) {
        tmx_fi_send_done(ep, context, &flags, flags & (FI_TAGGED | FI_MSG));
        return 0;
    }
    if (s == TMX_INPROGRESS) {
        ep->tx_pending++;
        tmx_request_free(req); /* released after its callback, which completes op */
        return 0;
    }
    if (s == TMX_ERR_NO_RESOURCE) {
        tmx_fi_ep_progress(ep);
    }
    return -tmx_fi_errno(s);
}

/*
 * fi_inject and friends (Open MPI's MPI_Send up to inject_size): first a send straight from the
 * caller's buffer that tmx must finish in place or refuse (TMX_SEND_FLAG_TRY), which needs no
 * operation and no copy of ours; only when tmx refuses (no eager credit, sends queued before
 * it) the general path copies the data into an operation (FI_INJECT) and tmx queues that.
 * kind: FI_TAGGED or FI_MSG; with FI_REMOTE_CQ_DATA in cq_data, data goes as immediate data.
 */
static ssize_t tmx_fi_inject_one(tmx_fi_ep_t *ep, const void *buf, size_t len, fi_addr_t dest,
                                 uint64_t tag, uint64_t kind, uint64_t cq_data, uint64_t data)
{
    tmx_request_params_t params;
    tmx_request_h        req = NULL;
    tmx_ep_h             peer;
    tmx_status_t         s;
    ssize_t              r;

    if (!ep->enabled) {
        return -FI_EOPBADSTATE; /* before fi_enable */
    }
    if ((buf == NULL && len > 0) || len > TMX_FI_INJECT_SIZE ||
        (cq_data && data > UINT32_MAX)) {
        return -FI_EINVAL;
    }
    tmx_fi_lock(ep->dom);
    peer = tmx_fi_ep_peer(ep, dest);
    if (peer == NULL) {
        tmx_fi_unlock(ep->dom);
        return ep->peer_err;
    }
    params.field_mask = TMX_REQ_PARAM_FLAGS;
    params.flags      = TMX_SEND_FLAG_TRY;
    if (cq_data) {
        params.field_mask |= TMX_REQ_PARAM_IMM;
        params.imm = (uint32_t)data;
    }
    /* the general path logs the first CQ data; with sends of ours in progress tmx would queue
     * this one behind them: the try would fail */
    s = ((cq_data && !ep->cq_data_said) || ep->tx_pending > 0)
            ? TMX_ERR_NO_RESOURCE
            : tmx_tag_send_nb(peer, buf, len, tag, &params, &req);
    if (s == TMX_OK) {
        tmx_fi_send_done(ep, NULL, NULL, kind); /* an inject: no CQ entry */
        tmx_fi_unlock(ep->dom);
        return 0;
    }
    if (s != TMX_ERR_NO_RESOURCE) {
        tmx_fi_unlock(ep->dom);
        return -tmx_fi_errno(s);
    }
    {
        struct iovec iov = {.iov_base = (void *)buf, .iov_len = len};
        r = tmx_fi_send_unlocked(ep, &iov, 1, dest, tag, NULL, kind | FI_INJECT | cq_data, data);
    }
    tmx_fi_unlock(ep->dom);
    return r;
}

static ssize_t tmx_fi_send(tmx_fi_ep_t *ep, const struct iovec *iov, size_t count,
                           fi_addr_t dest, uint64_t tag, void *context, uint64_t flags,
                           uint64_t data)
{
    tmx_fi_domain_t *dom_ = ep->dom;
    ssize_t r_;
    tmx_fi_lock(dom_);
    r_ = tmx_fi_send_unlocked(ep, iov, count, dest, tag, context, flags, data);
    tmx_fi_unlock(dom_);
    return r_;
}

/* ---------------------------------------------------------------- receiving */

static tmx_fi_claim_t **tmx_fi_claim_find(tmx_fi_ep_t *ep, void *context)
{
    tmx_fi_claim_t **pp = &ep->claims;
    while (*pp != NULL && (*pp)->context != context) {
        pp = &(*pp)->next;
    }
    return pp;
}

/* FI_DIRECTED_RECV: the receive's source, the tmx endpoint of its AV entry (connected on
 * first use, as for a send), whose remote worker tmx matches messages by; NULL for any source
 * (FI_ADDR_UNSPEC, or an endpoint without FI_DIRECTED_RECV, which ignores src_addr). */
static int tmx_fi_source(tmx_fi_ep_t *ep, fi_addr_t src_addr, tmx_ep_h *source_p)
{
    *source_p = NULL;
    if (!(ep->caps & FI_DIRECTED_RECV) || src_addr == FI_ADDR_UNSPEC) {
        return 0;
    }
    *source_p = tmx_fi_ep_peer(ep, src_addr);
    return *source_p != NULL ? 0 : ep->peer_err;
}

/* FI_PEEK (with FI_CLAIM or FI_DISCARD): the result goes to the CQ, found or not. */
static ssize_t tmx_fi_peek(tmx_fi_ep_t *ep, uint64_t tag, uint64_t mask, tmx_ep_h source,
                           void *context, uint64_t flags, uint64_t kind)
{
    tmx_tag_recv_info_t info;
    tmx_message_h       msg  = NULL;
    tmx_probe_mode_t    mode = TMX_PROBE_PEEK;
    tmx_fi_claim_t     *claim = NULL;
    tmx_status_t        s;

    if (ep->rx_cq == NULL) {
        return -FI_ENOCQ;
    }
    if (flags & FI_CLAIM) {
        if (context == NULL) {
            return -FI_EINVAL;
        }
        claim = malloc(sizeof(*claim));
        if (claim == NULL) {
            return -FI_ENOMEM;
        }
        mode = TMX_PROBE_CLAIM;
    } else if (flags & FI_DISCARD) {
        mode = TMX_PROBE_DISCARD;
    }
    tmx_fi_ep_progress(ep);
    s = tmx_tag_probe_ex(ep->worker, tag, mask, source, mode, &info, &msg);
    if (s == TMX_OK) {
        if (claim != NULL) {
            claim->context = context;
            claim->msg     = msg;
            claim->info    = info;
            claim->next    = ep->claims;
            ep->claims     = claim;
        }
        tmx_fi_cq_push(ep->rx_cq, context,
                       kind | FI_RECV | (info.has_imm ? FI_REMOTE_CQ_DATA : 0), info.length,
                       tmx_fi_user_tag(ep, info.tag), info.imm);
        return 0;
    }
    free(claim);
    if (s == TMX_ERR_NO_MESSAGE) {
        return tmx_fi_cq_push_err(ep->rx_cq, context, kind | FI_RECV, 0, 0, 0, FI_ENOMSG, 0);
    }
    return -tmx_fi_errno(s);
}

/* Posts the receive op (kind, flags, context and info set) for buf: the claimed message of
 * *cp, or a match of tag and mask from source; its completion comes through tmx_fi_recv_cb. */
static inline ssize_t tmx_fi_recv_post(tmx_fi_ep_t *ep, tmx_fi_op_t *op, void *buf, size_t len,
                                       uint64_t tag, uint64_t mask, tmx_ep_h source,
                                       tmx_fi_claim_t **cp)
{
    tmx_request_params_t params;
    tmx_request_h        req = NULL;
    tmx_status_t         s;

    op->buf = buf;
    op->len = len;
    if (cp != NULL) {
        tmx_fi_claim_t *claim = *cp;
        *cp                   = claim->next;
        /* the message is chosen: no source */
        s = tmx_tag_msg_recv_nb(ep->worker, buf, len, claim->msg, &op->rparams, &req);
        free(claim);
    } else if (source == NULL) {
        s = tmx_tag_recv_nb(ep->worker, buf, len, tag, mask, &op->rparams, &req);
    } else {
        params = op->rparams;
        params.field_mask |= TMX_REQ_PARAM_SOURCE;
        params.source = source;
        s             = tmx_tag_recv_nb(ep->worker, buf, len, tag, mask, &params, &req);
    }
    if (s != TMX_INPROGRESS) {
        tmx_fi_op_put(op);
        return -tmx_fi_errno(s);
    }
    /* released after its callback (at once if it matched an unexpected message and completed
     * op already); until then fi_cancel may cancel it (tmx(3), tmx_request_free) */
    tmx_request_free(req);
    if (op->status == TMX_INPROGRESS) {
        op->req = req;
    }
    return 0;
}

static ssize_t tmx_fi_recv_unlocked(tmx_fi_ep_t *ep, const struct iovec *iov, size_t count, uint64_t tag,
                           uint64_t mask, fi_addr_t src_addr, void *context, uint64_t flags,
                           uint64_t kind)
{
    tmx_ep_h         source = NULL;
    tmx_fi_op_t     *op;
    tmx_fi_claim_t **cp  = NULL;
    size_t           len = 0;
    void            *buf;

    if (!ep->enabled) {
        return -FI_EOPBADSTATE; /* before fi_enable */
    }
    if (count > TMX_FI_IOV_LIMIT || (count > 0 && iov == NULL)) {
        return -FI_EINVAL;
    }
    for (size_t i = 0; i < count; i++) {
        /* an element longer than a message is refused on its own: the sum of up to
         * TMX_FI_IOV_LIMIT such lengths cannot wrap (it sized the bounce buffer, and each
         * element was copied at its own length) */
        if ((iov[i].iov_base == NULL && iov[i].iov_len > 0) || iov[i].iov_len > TMX_FI_MAX_MSG) {
            return -FI_EINVAL;
        }
        len += iov[i].iov_len;
    }
    if (!(flags & FI_CLAIM) || (flags & FI_PEEK)) {
        int ret = tmx_fi_source(ep, src_addr, &source);
        if (ret != 0) {
            return ret;
        }
    }
    if (flags & FI_PEEK) {
        return tmx_fi_peek(ep, tag, mask, source, context, flags, kind);
    }
    if (flags & FI_CLAIM) {
        cp = tmx_fi_claim_find(ep, context);
        if (context == NULL || *cp == NULL) {
            return -FI_EINVAL; /* nothing was claimed with this context */
        }
    } else if (flags & FI_DISCARD) {
        return -FI_EINVAL;
    }
    op = tmx_fi_op_get(ep);
    if (op == NULL) {
        tmx_fi_ep_progress(ep);
        return -FI_EAGAIN;
    }
    op->kind    = TMX_FI_OP_RECV;
    op->flags   = flags | kind;
    op->context = context;
    if (flags & FI_DISCARD) {
        buf = op->inl;
        len = 0;
    } else if (count > 1) {
        op->bounce = malloc(len ? len : 1);
        if (op->bounce == NULL) {
            tmx_fi_op_put(op);
            return -FI_ENOMEM;
        }
        memcpy(op->iov, iov, count * sizeof(*iov));
        op->iov_count = count;
        buf           = op->bounce;
    } else {
        buf = count ? iov[0].iov_base : op->inl;
    }
    return tmx_fi_recv_post(ep, op, buf, len, tag, mask, source, cp);
}

/* tmx_fi_recv_unlocked's common case (fi_trecv): one buffer, no peek, claim or discard. */
static ssize_t tmx_fi_recv_one(tmx_fi_ep_t *ep, void *buf, size_t len, uint64_t tag,
                               uint64_t mask, fi_addr_t src_addr, void *context, uint64_t flags)
{
    tmx_ep_h     source = NULL;
    tmx_fi_op_t *op;
    int          ret;

    if (!ep->enabled) {
        return -FI_EOPBADSTATE; /* before fi_enable */
    }
    if ((buf == NULL && len > 0)) {
        return -FI_EINVAL;
    }
    ret = tmx_fi_source(ep, src_addr, &source);
    if (ret != 0) {
        return ret;
    }
    op = tmx_fi_op_get(ep);
    if (op == NULL) {
        tmx_fi_ep_progress(ep);
        return -FI_EAGAIN;
    }
    op->kind    = TMX_FI_OP_RECV;
    op->flags   = flags;
    op->context = context;
    return tmx_fi_recv_post(ep, op, buf, len, tag, mask, source, NULL);
}

static ssize_t tmx_fi_recv(tmx_fi_ep_t *ep, const struct iovec *iov, size_t count, uint64_t tag,
                           uint64_t mask, fi_addr_t src_addr, void *context, uint64_t flags,
                           uint64_t kind)
{
    tmx_fi_domain_t *dom_ = ep->dom;
    ssize_t r_;
    tmx_fi_lock(dom_);
    r_ = tmx_fi_recv_unlocked(ep, iov, count, tag, mask, src_addr, context, flags, kind);
    tmx_fi_unlock(dom_);
    return r_;
}

/* ---------------------------------------------------------------- tagged */

static tmx_fi_ep_t *tmx_fi_ep_of(struct fid_ep *fep)
{
    return (tmx_fi_ep_t *)fep;
}

static uint64_t tmx_fi_comp(int selective, uint64_t op_flags, uint64_t flags)
{
    return (!selective || ((op_flags | flags) & FI_COMPLETION)) ? FI_COMPLETION : 0;
}

static int tmx_fi_tag_ok(const tmx_fi_ep_t *ep, uint64_t tag)
{
    return !(ep->caps & FI_MSG) || !(tag & TMX_FI_MSG_BIT);
}

static ssize_t tmx_fi_trecvv_flags(tmx_fi_ep_t *ep, const struct iovec *iov, size_t count,
                                   fi_addr_t src_addr, uint64_t tag, uint64_t ignore,
                                   void *context, uint64_t flags)
{
    uint64_t mask = ~ignore;

    if (!(ep->caps & FI_TAGGED) || !tmx_fi_tag_ok(ep, tag & mask)) {
        return ep->caps & FI_TAGGED ? -FI_EINVAL : -FI_ENOSYS;
    }
    if (ep->caps & FI_MSG) {
        mask |= TMX_FI_MSG_BIT; /* a tagged receive never matches an untagged message */
        tag &= mask;
    }
    flags |= tmx_fi_comp(ep->rx_selective, ep->rx_op_flags, flags);
    return tmx_fi_recv(ep, iov, count, tag, mask, src_addr, context, flags, FI_TAGGED);
}

/* fi_trecv's general way: everything its common case does not take. */
static __attribute__((noinline)) ssize_t tmx_fi_trecv_any(tmx_fi_ep_t *ep, void *buf,
                                                          size_t len, fi_addr_t src_addr,
                                                          uint64_t tag, uint64_t mask,
                                                          void *context)
{
    ssize_t r;

    if (!(ep->caps & FI_TAGGED) || !tmx_fi_tag_ok(ep, tag & mask)) {
        return ep->caps & FI_TAGGED ? -FI_EINVAL : -FI_ENOSYS;
    }
    if (ep->caps & FI_MSG) {
        mask |= TMX_FI_MSG_BIT; /* a tagged receive never matches an untagged message */
        tag &= mask;
    }
    tmx_fi_lock(ep->dom);
    r = tmx_fi_recv_one(ep, buf, len, tag, mask, src_addr, context,
                        FI_TAGGED | tmx_fi_comp(ep->rx_selective, ep->rx_op_flags, 0));
    tmx_fi_unlock(ep->dom);
    return r;
}

/* fi_trecv's common case: an operation from the free list (not empty), posted from source
 * (NULL: any). */
static inline ssize_t tmx_fi_trecv_fast(tmx_fi_ep_t *ep, void *buf, size_t len, uint64_t tag,
                                        uint64_t mask, tmx_ep_h source, void *context)
{
    tmx_fi_op_t *op = ep->free_ops;

    mask |= ep->tag_bad; /* a tagged receive never matches an untagged message */
    ep->free_ops = op->next;
    op->next     = NULL;
    op->status   = TMX_INPROGRESS;
    op->kind     = TMX_FI_OP_RECV;
    op->flags    = ep->trecv_flags;
    op->context  = context;
    return tmx_fi_recv_post(ep, op, buf, len, tag & mask, mask, source, NULL);
}

/* fi_trecv from one source (FI_DIRECTED_RECV; Open MPI's default ofi_tag_full): the common
 * case when the source is a connected peer of a valid entry. */
static __attribute__((noinline)) ssize_t tmx_fi_trecv_from(tmx_fi_ep_t *ep, void *buf,
                                                           size_t len, fi_addr_t src_addr,
                                                           uint64_t tag, uint64_t mask,
                                                           void *context)
{
    if (src_addr < ep->npeers && ep->peers[src_addr] != NULL && src_addr < ep->av->count &&
        ep->av->valid[src_addr]) {
        return tmx_fi_trecv_fast(ep, buf, len, tag, mask, ep->peers[src_addr], context);
    }
    return tmx_fi_trecv_any(ep, buf, len, src_addr, tag, mask, context);
}

/*
 * fi_trecv. Open MPI's every receive comes here. The common case first (tmx_fi_ep_hot): an
 * endpoint without the domain lock, a receive from any source (Open MPI's ofi_tag_1) or, by
 * tmx_fi_trecv_from, from a connected peer, an operation on the free list; anything else the
 * general way.
 */
static ssize_t tmx_fi_trecv(struct fid_ep *fep, void *buf, size_t len, void *desc,
                            fi_addr_t src_addr, uint64_t tag, uint64_t ignore, void *context)
{
    tmx_fi_ep_t *ep   = tmx_fi_ep_of(fep);
    uint64_t     mask = ~ignore;

    (void)desc;
    if (ep->fast && !(tag & mask & ep->tag_bad) && (buf != NULL || len == 0) &&
        ep->free_ops != NULL) {
        if (src_addr == FI_ADDR_UNSPEC || !(ep->caps & FI_DIRECTED_RECV)) {
            return tmx_fi_trecv_fast(ep, buf, len, tag, mask, NULL, context);
        }
        return tmx_fi_trecv_from(ep, buf, len, src_addr, tag, mask, context);
    }
    return tmx_fi_trecv_any(ep, buf, len, src_addr, tag, mask, context);
}

static ssize_t tmx_fi_trecvv(struct fid_ep *fep, const struct iovec *iov, void **desc,
                             size_t count, fi_addr_t src_addr, uint64_t tag, uint64_t ignore,
                             void *context)
{
    (void)desc;
    return tmx_fi_trecvv_flags(tmx_fi_ep_of(fep), iov, count, src_addr, tag, ignore, context, 0);
}

static ssize_t tmx_fi_trecvmsg(struct fid_ep *fep, const struct fi_msg_tagged *msg,
                               uint64_t flags)
{
    tmx_fi_ep_t *ep = tmx_fi_ep_of(fep);
    flags &= ~(uint64_t)FI_MORE; /* a hint: more requests follow */
    if (msg == NULL ||
        (flags & ~(uint64_t)(FI_COMPLETION | FI_PEEK | FI_CLAIM | FI_DISCARD)) != 0) {
        return msg == NULL ? -FI_EINVAL : -FI_ENOSYS;
    }
    /* fi_trecvmsg's flags replace the endpoint's: FI_COMPLETION only when given */
    uint64_t comp = (!ep->rx_selective || (flags & FI_COMPLETION)) ? FI_COMPLETION : 0;
    uint64_t mask = ~msg->ignore, tag = msg->tag;
    if (!(ep->caps & FI_TAGGED)) {
        return -FI_ENOSYS;
    }
    if (!tmx_fi_tag_ok(ep, tag & mask)) {
        return -FI_EINVAL;
    }
    if (ep->caps & FI_MSG) {
        mask |= TMX_FI_MSG_BIT;
        tag &= mask;
    }
    return tmx_fi_recv(ep, msg->msg_iov, msg->iov_count, tag, mask, msg->addr, msg->context,
                       (flags & ~(uint64_t)FI_COMPLETION) | comp, FI_TAGGED);
}

static ssize_t tmx_fi_tsendv_flags(tmx_fi_ep_t *ep, const struct iovec *iov, size_t count,
                                   fi_addr_t dest, uint64_t tag, void *context, uint64_t flags,
                                   uint64_t data)
{
    if (!(ep->caps & FI_TAGGED)) {
        return -FI_ENOSYS;
    }
    if (!tmx_fi_tag_ok(ep, tag)) {
        return -FI_EINVAL;
    }
    return tmx_fi_send(ep, iov, count, dest, tag, context, flags | FI_TAGGED, data);
}

/* The parameters of a send tmx must finish in place or refuse (TMX_SEND_FLAG_TRY). */
static const tmx_request_params_t tmx_fi_try_params = {
    .field_mask = TMX_REQ_PARAM_FLAGS,
    .flags      = TMX_SEND_FLAG_TRY,
};

/* Whether a tagged send may be tried in place at once (fi_tsend, fi_tinject): an endpoint
 * without the domain lock, a valid tag, an eager length, no send of ours in progress (tmx
 * would queue this one behind it), and a connected peer of a valid AV entry. */
static inline int tmx_fi_try_ok(const tmx_fi_ep_t *ep, const void *buf, size_t len,
                                fi_addr_t dest, uint64_t tag)
{
    return ep->fast && !(tag & ep->tag_bad) && len <= TMX_FI_INJECT_SIZE &&
           ep->tx_pending == 0 && (buf != NULL || len == 0) && dest < ep->npeers &&
           ep->peers[dest] != NULL && dest < ep->av->count && ep->av->valid[dest];
}

/* A send tmx_fi_try_ok allowed, with imm as tmx's immediate data (remote CQ data). */
static inline tmx_status_t tmx_fi_try_imm(tmx_fi_ep_t *ep, const void *buf, size_t len,
                                          fi_addr_t dest, uint64_t tag, uint32_t imm)
{
    tmx_request_params_t params;
    tmx_request_h        req = NULL;

    params.field_mask = TMX_REQ_PARAM_FLAGS | TMX_REQ_PARAM_IMM;
    params.flags      = TMX_SEND_FLAG_TRY;
    params.imm        = imm;
    return tmx_tag_send_nb(ep->peers[dest], buf, len, tag, &params, &req);
}

/*
 * fi_tsend. Open MPI's MPI_Isend (and every send above inject_size) comes here. The common
 * case first, with nothing worked out per call that the endpoint knows already (tmx_fi_ep_hot):
 * an endpoint without the domain lock, a connected peer, no send of ours in progress, and tmx
 * finishing the send in place; then the CQ entry is made here and no operation is taken.
 * Anything else, or a send tmx refuses, goes the general way (tmx_fi_send_one).
 */
static ssize_t tmx_fi_tsend(struct fid_ep *fep, const void *buf, size_t len, void *desc,
                            fi_addr_t dest, uint64_t tag, void *context)
{
    tmx_fi_ep_t *ep    = tmx_fi_ep_of(fep);
    int          tried = 0;
    ssize_t      r;

    (void)desc;
    if (tmx_fi_try_ok(ep, buf, len, dest, tag)) {
        tmx_request_h req = NULL;
        tmx_status_t  s   = tmx_tag_send_nb(ep->peers[dest], buf, len, tag, &tmx_fi_try_params,
                                            &req);
        if (s == TMX_OK) {
            tmx_fi_send_done(ep, context, &ep->tsend_flags, FI_TAGGED);
            return 0;
        }
        if (s != TMX_ERR_NO_RESOURCE) {
            return -tmx_fi_errno(s);
        }
        tried = 1;
    }
    if (!(ep->caps & FI_TAGGED)) {
        return -FI_ENOSYS;
    }
    if (!tmx_fi_tag_ok(ep, tag)) {
        return -FI_EINVAL;
    }
    tmx_fi_lock(ep->dom);
    r = tmx_fi_send_one(ep, buf, len, dest, tag, context,
                        FI_TAGGED | tmx_fi_comp(ep->tx_selective, ep->tx_op_flags, 0), tried);
    tmx_fi_unlock(ep->dom);
    return r;
}

static ssize_t tmx_fi_tsendv(struct fid_ep *fep, const struct iovec *iov, void **desc,
                             size_t count, fi_addr_t dest, uint64_t tag, void *context)
{
    tmx_fi_ep_t *ep = tmx_fi_ep_of(fep);
    (void)desc;
    return tmx_fi_tsendv_flags(ep, iov, count, dest, tag, context,
                               tmx_fi_comp(ep->tx_selective, ep->tx_op_flags, 0), 0);
}

static ssize_t tmx_fi_tsendmsg(struct fid_ep *fep, const struct fi_msg_tagged *msg,
                               uint64_t flags)
{
    tmx_fi_ep_t *ep = tmx_fi_ep_of(fep);
    if (msg == NULL) {
        return -FI_EINVAL;
    }
    if (flags & (FI_MULTICAST | FI_TRIGGER | FI_FENCE)) {
        return -FI_ENOSYS;
    }
    uint64_t comp = (!ep->tx_selective || (flags & FI_COMPLETION)) ? FI_COMPLETION : 0;
    if (flags & FI_INJECT) {
        comp = (flags & FI_COMPLETION) ? FI_COMPLETION : 0;
    }
    return tmx_fi_tsendv_flags(ep, msg->msg_iov, msg->iov_count, msg->addr, msg->tag,
                               msg->context,
                               (flags & (FI_INJECT | FI_REMOTE_CQ_DATA)) | comp, msg->data);
}

/* fi_tinject: Open MPI's MPI_Send up to inject_size. The common case first, as in
 * fi_tsend: tmx finishes the send in place from the caller's buffer, counted, no CQ entry. */
static ssize_t tmx_fi_tinject(struct fid_ep *fep, const void *buf, size_t len, fi_addr_t dest,
                              uint64_t tag)
{
    tmx_fi_ep_t *ep = tmx_fi_ep_of(fep);

    if (tmx_fi_try_ok(ep, buf, len, dest, tag)) {
        tmx_request_h req = NULL;
        tmx_status_t  s   = tmx_tag_send_nb(ep->peers[dest], buf, len, tag, &tmx_fi_try_params,
                                            &req);
        if (s == TMX_OK) {
            tmx_fi_send_done(ep, NULL, NULL, FI_TAGGED); /* an inject: no CQ entry */
            return 0;
        }
        if (s != TMX_ERR_NO_RESOURCE) {
            return -tmx_fi_errno(s);
        }
        /* refused: tmx_fi_inject_one tries once more, then copies */
    }
    if (!(ep->caps & FI_TAGGED)) {
        return -FI_ENOSYS;
    }
    if (!tmx_fi_tag_ok(ep, tag)) {
        return -FI_EINVAL;
    }
    return tmx_fi_inject_one(ep, buf, len, dest, tag, FI_TAGGED, 0, 0);
}

/* fi_tsenddata: Open MPI's MPI_Isend in its default tag mode (ofi_tag_full: the source rank as
 * remote CQ data). The common case first, as in fi_tsend, with the data as tmx's immediate
 * data; the endpoint's first send with data goes the general way, which logs it. */
static ssize_t tmx_fi_tsenddata(struct fid_ep *fep, const void *buf, size_t len, void *desc,
                                uint64_t data, fi_addr_t dest, uint64_t tag, void *context)
{
    tmx_fi_ep_t *ep  = tmx_fi_ep_of(fep);
    struct iovec iov = {.iov_base = (void *)buf, .iov_len = len};

    (void)desc;
    if (tmx_fi_try_ok(ep, buf, len, dest, tag) && data <= UINT32_MAX && ep->cq_data_said) {
        tmx_status_t s = tmx_fi_try_imm(ep, buf, len, dest, tag, (uint32_t)data);
        if (s == TMX_OK) {
            tmx_fi_send_done(ep, context, &ep->tsend_flags, FI_TAGGED);
            return 0;
        }
        if (s != TMX_ERR_NO_RESOURCE) {
            return -tmx_fi_errno(s);
        }
    }
    return tmx_fi_tsendv_flags(ep, &iov, 1, dest, tag, context,
                               tmx_fi_comp(ep->tx_selective, ep->tx_op_flags, 0) |
                                   FI_REMOTE_CQ_DATA,
                               data);
}

/* fi_tinjectdata: Open MPI's MPI_Send up to inject_size in its default tag mode. The common
 * case first, as in fi_tinject, with the data as tmx's immediate data. */
static ssize_t tmx_fi_tinjectdata(struct fid_ep *fep, const void *buf, size_t len,
                                  uint64_t data, fi_addr_t dest, uint64_t tag)
{
    tmx_fi_ep_t *ep = tmx_fi_ep_of(fep);

    if (tmx_fi_try_ok(ep, buf, len, dest, tag) && data <= UINT32_MAX && ep->cq_data_said) {
        tmx_status_t s = tmx_fi_try_imm(ep, buf, len, dest, tag, (uint32_t)data);
        if (s == TMX_OK) {
            tmx_fi_send_done(ep, NULL, NULL, FI_TAGGED); /* an inject: no CQ entry */
            return 0;
        }
        if (s != TMX_ERR_NO_RESOURCE) {
            return -tmx_fi_errno(s);
        }
    }
    if (!(ep->caps & FI_TAGGED)) {
        return -FI_ENOSYS;
    }
    if (!tmx_fi_tag_ok(ep, tag)) {
        return -FI_EINVAL;
    }
    return tmx_fi_inject_one(ep, buf, len, dest, tag, FI_TAGGED, FI_REMOTE_CQ_DATA, data);
}

static struct fi_ops_tagged tmx_fi_tagged_ops = {
    .size       = sizeof(struct fi_ops_tagged),
    .recv       = tmx_fi_trecv,
    .recvv      = tmx_fi_trecvv,
    .recvmsg    = tmx_fi_trecvmsg,
    .send       = tmx_fi_tsend,
    .sendv      = tmx_fi_tsendv,
    .sendmsg    = tmx_fi_tsendmsg,
    .inject     = tmx_fi_tinject,
    .senddata   = tmx_fi_tsenddata,
    .injectdata = tmx_fi_tinjectdata,
};

/* ---------------------------------------------------------------- untagged (FI_MSG) */

static ssize_t tmx_fi_mrecvv_flags(tmx_fi_ep_t *ep, const struct iovec *iov, size_t count,
                                   fi_addr_t src_addr, void *context, uint64_t flags)
{
    if (!(ep->caps & FI_MSG)) {
        return -FI_ENOSYS;
    }
    flags |= tmx_fi_comp(ep->rx_selective, ep->rx_op_flags, flags);
    return tmx_fi_recv(ep, iov, count, TMX_FI_MSG_BIT, TMX_FI_MSG_BIT, src_addr, context, flags,
                       FI_MSG);
}

static ssize_t tmx_fi_mrecv(struct fid_ep *fep, void *buf, size_t len, void *desc,
                            fi_addr_t src_addr, void *context)
{
    struct iovec iov = {.iov_base = buf, .iov_len = len};
    (void)desc;
    return tmx_fi_mrecvv_flags(tmx_fi_ep_of(fep), &iov, 1, src_addr, context, 0);
}

static ssize_t tmx_fi_mrecvv(struct fid_ep *fep, const struct iovec *iov, void **desc,
                             size_t count, fi_addr_t src_addr, void *context)
{
    (void)desc;
    return tmx_fi_mrecvv_flags(tmx_fi_ep_of(fep), iov, count, src_addr, context, 0);
}

static ssize_t tmx_fi_mrecvmsg(struct fid_ep *fep, const struct fi_msg *msg, uint64_t flags)
{
    tmx_fi_ep_t *ep = tmx_fi_ep_of(fep);
    flags &= ~(uint64_t)FI_MORE; /* a hint: more requests follow */
    if (msg == NULL || (flags & ~(uint64_t)FI_COMPLETION) != 0) {
        return msg == NULL ? -FI_EINVAL : -FI_ENOSYS;
    }
    if (!(ep->caps & FI_MSG)) {
        return -FI_ENOSYS;
    }
    uint64_t comp = (!ep->rx_selective || (flags & FI_COMPLETION)) ? FI_COMPLETION : 0;
    return tmx_fi_recv(ep, msg->msg_iov, msg->iov_count, TMX_FI_MSG_BIT, TMX_FI_MSG_BIT,
                       msg->addr, msg->context, comp, FI_MSG);
}

static ssize_t tmx_fi_msendv_flags(tmx_fi_ep_t *ep, const struct iovec *iov, size_t count,
                                   fi_addr_t dest, void *context, uint64_t flags, uint64_t data)
{
    if (!(ep->caps & FI_MSG)) {
        return -FI_ENOSYS;
    }
    return tmx_fi_send(ep, iov, count, dest, TMX_FI_MSG_BIT, context, flags | FI_MSG, data);
}

static ssize_t tmx_fi_msend(struct fid_ep *fep, const void *buf, size_t len, void *desc,
                            fi_addr_t dest, void *context)
{
    tmx_fi_ep_t *ep  = tmx_fi_ep_of(fep);
    struct iovec iov = {.iov_base = (void *)buf, .iov_len = len};
    (void)desc;
    return tmx_fi_msendv_flags(ep, &iov, 1, dest, context,
                               tmx_fi_comp(ep->tx_selective, ep->tx_op_flags, 0), 0);
}

static ssize_t tmx_fi_msendv(struct fid_ep *fep, const struct iovec *iov, void **desc,
                             size_t count, fi_addr_t dest, void *context)
{
    tmx_fi_ep_t *ep = tmx_fi_ep_of(fep);
    (void)desc;
    return tmx_fi_msendv_flags(ep, iov, count, dest, context,
                               tmx_fi_comp(ep->tx_selective, ep->tx_op_flags, 0), 0);
}

static ssize_t tmx_fi_msendmsg(struct fid_ep *fep, const struct fi_msg *msg, uint64_t flags)
{
    tmx_fi_ep_t *ep = tmx_fi_ep_of(fep);
    if (msg == NULL) {
        return -FI_EINVAL;
    }
    if (flags & (FI_MULTICAST | FI_TRIGGER | FI_FENCE)) {
        return -FI_ENOSYS;
    }
    uint64_t comp = (!ep->tx_selective || (flags & FI_COMPLETION)) ? FI_COMPLETION : 0;
    if (flags & FI_INJECT) {
        comp = (flags & FI_COMPLETION) ? FI_COMPLETION : 0;
    }
    return tmx_fi_msendv_flags(ep, msg->msg_iov, msg->iov_count, msg->addr, msg->context,
                               (flags & (FI_INJECT | FI_REMOTE_CQ_DATA)) | comp, msg->data);
}

static ssize_t tmx_fi_minject(struct fid_ep *fep, const void *buf, size_t len, fi_addr_t dest)
{
    tmx_fi_ep_t *ep = tmx_fi_ep_of(fep);
    if (!(ep->caps & FI_MSG)) {
        return -FI_ENOSYS;
    }
    return tmx_fi_inject_one(ep, buf, len, dest, TMX_FI_MSG_BIT, FI_MSG, 0, 0);
}

static ssize_t tmx_fi_msenddata(struct fid_ep *fep, const void *buf, size_t len, void *desc,
                                uint64_t data, fi_addr_t dest, void *context)
{
    tmx_fi_ep_t *ep  = tmx_fi_ep_of(fep);
    struct iovec iov = {.iov_base = (void *)buf, .iov_len = len};
    (void)desc;
    return tmx_fi_msendv_flags(ep, &iov, 1, dest, context,
                               tmx_fi_comp(ep->tx_selective, ep->tx_op_flags, 0) |
                                   FI_REMOTE_CQ_DATA,
                               data);
}

static ssize_t tmx_fi_minjectdata(struct fid_ep *fep, const void *buf, size_t len,
                                  uint64_t data, fi_addr_t dest)
{
    tmx_fi_ep_t *ep = tmx_fi_ep_of(fep);
    if (!(ep->caps & FI_MSG)) {
        return -FI_ENOSYS;
    }
    return tmx_fi_inject_one(ep, buf, len, dest, TMX_FI_MSG_BIT, FI_MSG, FI_REMOTE_CQ_DATA,
                             data);
}

static struct fi_ops_msg tmx_fi_msg_ops = {
    .size       = sizeof(struct fi_ops_msg),
    .recv       = tmx_fi_mrecv,
    .recvv      = tmx_fi_mrecvv,
    .recvmsg    = tmx_fi_mrecvmsg,
    .send       = tmx_fi_msend,
    .sendv      = tmx_fi_msendv,
    .sendmsg    = tmx_fi_msendmsg,
    .inject     = tmx_fi_minject,
    .senddata   = tmx_fi_msenddata,
    .injectdata = tmx_fi_minjectdata,
};

/* ---------------------------------------------------------------- endpoint */

/* A receive waiting for its message with that context: one with a tmx request (free
 * operations have none; op_put clears it). */
static int tmx_fi_op_cancelable(const tmx_fi_op_t *op, void *context)
{
    return op != NULL && op->kind == TMX_FI_OP_RECV && op->context == context &&
           op->req != NULL && op->status == TMX_INPROGRESS;
}

static size_t tmx_fi_cancel_slot(const void *context, size_t cap)
{
    return (size_t)(((uint64_t)(uintptr_t)context * 0x9e3779b97f4a7c15ull) >> 40) & (cap - 1);
}

/* tmx_fi_cancel_find: the index is built anew once scans did this many times its work */
#define TMX_FI_CANCEL_REBUILD 8

/* The index of fi_cancel made anew: every receive in progress (a pass over every operation),
 * in twice as many slots (a power of two). Without memory there is none, and cancels scan. */
static void tmx_fi_cancel_index(tmx_fi_ep_t *ep)
{
    tmx_fi_op_t **live = malloc(ep->nops * sizeof(*live));
    size_t        n = 0, cap = 16;

    free(ep->cancel_idx);
    ep->cancel_idx     = NULL;
    ep->cancel_cap     = 0;
    ep->cancel_scanned = 0;
    if (live == NULL) {
        return;
    }
    for (size_t c = 0; c < ep->nchunks; c++) {
        tmx_fi_op_t *ops = ep->chunks[c];
        for (int i = 0; i < 64; i++) {
            if (tmx_fi_op_cancelable(&ops[i], ops[i].context)) {
                live[n++] = &ops[i];
            }
        }
    }
    while (cap < 2 * n) {
        cap *= 2;
    }
    ep->cancel_idx = calloc(cap, sizeof(*ep->cancel_idx));
    if (ep->cancel_idx != NULL) {
        ep->cancel_cap = cap;
        for (size_t j = 0; j < n; j++) {
            size_t k = tmx_fi_cancel_slot(live[j]->context, cap);
            while (ep->cancel_idx[k] != NULL) {
                k = (k + 1) & (cap - 1);
            }
            ep->cancel_idx[k] = live[j];
        }
    }
    free(live);
}

/*
 * The receive fi_cancel cancels (NULL: none). Nothing on the data path keeps track of receives
 * by context (fi_trecv and the completions would pay for it on every message), so fi_cancel
 * keeps its own, as caches: every entry found is checked (still a receive in progress with
 * that context: the operation may have completed and been reused since), and a context they
 * do not hold is looked for by a scan of every operation (one per cancel was all there was:
 * 60000 receives canceled in a row took 5.6 to 7.2 s; 0.03 to 0.06 s with the caches).
 *   - The operation the last cancel found: fi_trecv takes the operation freed last, so a
 *     receive posted and canceled again and again (MPI_Irecv, MPI_Cancel) is found at once.
 *   - An index of the receives in progress by context, built from every operation and never
 *     updated after (a receive posted since is not in it). It is built anew when a scan found
 *     the receive and the scans since the last build looked at TMX_FI_CANCEL_REBUILD times as
 *     many operations as a build does: at most 1/8 more than the scans alone in any pattern,
 *     and cancels of receives posted before them, in a row, take a few scans and a build in
 *     all.
 */
static tmx_fi_op_t *tmx_fi_cancel_find(tmx_fi_ep_t *ep, void *context)
{
    if (tmx_fi_op_cancelable(ep->cancel_last, context)) {
        return ep->cancel_last;
    }
    if (ep->cancel_cap > 0) {
        size_t mask = ep->cancel_cap - 1;
        for (size_t k = tmx_fi_cancel_slot(context, ep->cancel_cap); ep->cancel_idx[k] != NULL;
             k = (k + 1) & mask) {
            if (tmx_fi_op_cancelable(ep->cancel_idx[k], context)) {
                return ep->cancel_last = ep->cancel_idx[k];
            }
        }
    }
    for (size_t c = 0; c < ep->nchunks; c++) {
        tmx_fi_op_t *ops = ep->chunks[c];
        for (int i = 0; i < 64; i++) {
            if (tmx_fi_op_cancelable(&ops[i], context)) {
                ep->cancel_scanned += c * 64 + (size_t)i + 1;
                if (ep->cancel_scanned >= TMX_FI_CANCEL_REBUILD * ep->nops) {
                    tmx_fi_cancel_index(ep);
                }
                return ep->cancel_last = &ops[i];
            }
        }
    }
    ep->cancel_scanned += ep->nops;
    return NULL;
}

static ssize_t tmx_fi_cancel_unlocked(fid_t fid, void *context)
{
    tmx_fi_op_t *op = tmx_fi_cancel_find((tmx_fi_ep_t *)fid, context);
    tmx_status_t s;

    if (op == NULL) {
        return -FI_ENOENT;
    }
    /* the canceled receive completes (FI_ECANCELED) in its callback */
    s = tmx_request_cancel(op->req);
    return s == TMX_OK || s == TMX_ERR_BUSY ? 0 : -tmx_fi_errno(s);
}

static ssize_t tmx_fi_cancel(fid_t fid, void *context)
{
    tmx_fi_domain_t *dom_ = ((tmx_fi_ep_t *)fid)->dom;
    ssize_t r_;
    tmx_fi_lock(dom_);
    r_ = tmx_fi_cancel_unlocked(fid, context);
    tmx_fi_unlock(dom_);
    return r_;
}

static int tmx_fi_getopt(fid_t fid, int level, int optname, void *optval, size_t *optlen)
{
    (void)fid;
    (void)level;
    (void)optname;
    (void)optval;
    (void)optlen;
    return -FI_ENOPROTOOPT;
}

static int tmx_fi_setopt(fid_t fid, int level, int optname, const void *optval, size_t optlen)
{
    (void)fid;
    (void)level;
    (void)optname;
    (void)optval;
    (void)optlen;
    return -FI_ENOPROTOOPT;
}

static int tmx_fi_no_tx_ctx(struct fid_ep *sep, int index, struct fi_tx_attr *attr,
                            struct fid_ep **tx_ep, void *context)
{
    (void)sep;
    (void)index;
    (void)attr;
    (void)tx_ep;
    (void)context;
    return -FI_ENOSYS;
}

static int tmx_fi_no_rx_ctx(struct fid_ep *sep, int index, struct fi_rx_attr *attr,
                            struct fid_ep **rx_ep, void *context)
{
    (void)sep;
    (void)index;
    (void)attr;
    (void)rx_ep;
    (void)context;
    return -FI_ENOSYS;
}

static ssize_t tmx_fi_size_left(struct fid_ep *fep)
{
    tmx_fi_ep_t *ep = tmx_fi_ep_of(fep);
    size_t       used, freen = 0;

    tmx_fi_lock(ep->dom);
    used = ep->nops;
    for (tmx_fi_op_t *op = ep->free_ops; op != NULL; op = op->next) {
        freen++;
    }
    tmx_fi_unlock(ep->dom);
    return (ssize_t)(TMX_FI_QUEUE_SIZE - (used - freen));
}

static struct fi_ops_ep tmx_fi_ep_ops = {
    .size         = sizeof(struct fi_ops_ep),
    .cancel       = tmx_fi_cancel,
    .getopt       = tmx_fi_getopt,
    .setopt       = tmx_fi_setopt,
    .tx_ctx       = tmx_fi_no_tx_ctx,
    .rx_ctx       = tmx_fi_no_rx_ctx,
    .rx_size_left = tmx_fi_size_left,
    .tx_size_left = tmx_fi_size_left,
};

static int tmx_fi_getname(fid_t fid, void *addr, size_t *addrlen)
{
    tmx_fi_ep_t *ep = (tmx_fi_ep_t *)fid;
    size_t       n;

    if (addrlen == NULL) {
        return -FI_EINVAL;
    }
    n        = *addrlen;
    *addrlen = TMX_FI_NAME_LEN;
    if (n < TMX_FI_NAME_LEN) {
        return -FI_ETOOSMALL;
    }
    if (addr == NULL) {
        return -FI_EINVAL;
    }
    memcpy(addr, ep->name, TMX_FI_NAME_LEN);
    return 0;
}

static int tmx_fi_no_setname(fid_t fid, void *addr, size_t addrlen)
{
    (void)fid;
    (void)addr;
    (void)addrlen;
    return -FI_ENOSYS;
}

static int tmx_fi_no_getpeer(struct fid_ep *ep, void *addr, size_t *addrlen)
{
    (void)ep;
    (void)addr;
    (void)addrlen;
    return -FI_ENOSYS;
}

static int tmx_fi_no_connect(struct fid_ep *ep, const void *addr, const void *param,
                             size_t paramlen)
{
    (void)ep;
    (void)addr;
    (void)param;
    (void)paramlen;
    return -FI_ENOSYS;
}

static int tmx_fi_no_listen(struct fid_pep *pep)
{
    (void)pep;
    return -FI_ENOSYS;
}

static int tmx_fi_no_accept(struct fid_ep *ep, const void *param, size_t paramlen)
{
    (void)ep;
    (void)param;
    (void)paramlen;
    return -FI_ENOSYS;
}

static int tmx_fi_no_reject(struct fid_pep *pep, fid_t handle, const void *param,
                            size_t paramlen)
{
    (void)pep;
    (void)handle;
    (void)param;
    (void)paramlen;
    return -FI_ENOSYS;
}

static int tmx_fi_no_shutdown(struct fid_ep *ep, uint64_t flags)
{
    (void)ep;
    (void)flags;
    return -FI_ENOSYS;
}

static int tmx_fi_no_join(struct fid_ep *ep, const void *addr, uint64_t flags,
                          struct fid_mc **mc, void *context)
{
    (void)ep;
    (void)addr;
    (void)flags;
    (void)mc;
    (void)context;
    return -FI_ENOSYS;
}

static struct fi_ops_cm tmx_fi_cm_ops = {
    .size     = sizeof(struct fi_ops_cm),
    .setname  = tmx_fi_no_setname,
    .getname  = tmx_fi_getname,
    .getpeer  = tmx_fi_no_getpeer,
    .connect  = tmx_fi_no_connect,
    .listen   = tmx_fi_no_listen,
    .accept   = tmx_fi_no_accept,
    .reject   = tmx_fi_no_reject,
    .shutdown = tmx_fi_no_shutdown,
    .join     = tmx_fi_no_join,
};

/* FI_LOG_LEVEL=info: what the endpoint's traffic did, for telling a benchmark's paths apart
 * (eager-RDMA ring or the queue, and why) without timing. */
static void tmx_fi_ep_log_stats(tmx_fi_ep_t *ep)
{
    tmx_worker_attr_t a;

    if (!fi_log_enabled(&tmx_fi_prov, FI_LOG_INFO, FI_LOG_EP_DATA)) {
        return;
    }
    memset(&a, 0, sizeof(a));
    a.field_mask = TMX_WORKER_ATTR_RING;
    if (tmx_worker_query(ep->worker, &a) != TMX_OK) {
        return;
    }
    fi_log(&tmx_fi_prov, FI_LOG_INFO, FI_LOG_EP_DATA, __func__, __LINE__,
           "endpoint closed: ring messages sent %llu received %llu; sends by the queue: ring "
           "full %llu, receiver asleep %llu; wake notices %llu; operations allocated %zu\n",
           (unsigned long long)a.ring.sent, (unsigned long long)a.ring.received,
           (unsigned long long)a.ring.full, (unsigned long long)a.ring.asleep,
           (unsigned long long)a.ring.wakes, ep->nops);
}

/* At close: every receive still posted is canceled, so that tmx completes and releases its
 * request before the worker goes (tmx_worker_destroy leaves a request in progress behind and
 * warns about it); ep->closing is set, so no CQ entry is made. */
static void tmx_fi_ep_cancel_posted(tmx_fi_ep_t *ep)
{
    int any = 0;

    for (size_t c = 0; c < ep->nchunks; c++) {
        tmx_fi_op_t *ops = ep->chunks[c];
        for (int i = 0; i < 64; i++) {
            tmx_fi_op_t *op = &ops[i];
            if (op->kind == TMX_FI_OP_RECV && op->req != NULL && op->status == TMX_INPROGRESS) {
                any |= tmx_request_cancel(op->req) == TMX_OK; /* BUSY: matched, finishing */
            }
        }
    }
    if (any) {
        tmx_worker_progress(ep->worker); /* a cancel may complete in the next progress */
    }
}

static int tmx_fi_ep_close(struct fid *fid)
{
    tmx_fi_ep_t     *ep  = (tmx_fi_ep_t *)fid;
    tmx_fi_domain_t *dom = ep->dom;

    /* First, under the domain's lock (FI_THREAD_SAFE: another thread may be reading a CQ or
     * counter this endpoint shares, which progresses its worker), the endpoint leaves its CQs
     * and counters: from here on only this close progresses the worker, and what it completes
     * makes no entry (libfabric: operations outstanding at close are discarded). */
    tmx_fi_lock(dom);
    ep->closing = 1;
    if (ep->tx_cq != NULL) {
        tmx_fi_cq_detach(ep->tx_cq, ep);
    }
    if (ep->rx_cq != NULL && ep->rx_cq != ep->tx_cq) {
        tmx_fi_cq_detach(ep->rx_cq, ep);
    }
    if (ep->tx_cntr != NULL) {
        tmx_fi_cntr_detach(ep->tx_cntr, ep);
    }
    if (ep->rx_cntr != NULL && ep->rx_cntr != ep->tx_cntr) {
        tmx_fi_cntr_detach(ep->rx_cntr, ep);
    }
    tmx_fi_unlock(dom);
    if (ep->worker != NULL) {
        tmx_fi_ep_log_stats(ep);
        tmx_fi_ep_cancel_posted(ep);
        /* sends still in progress are flushed (an injected one was done for the application
         * already), every peer's at once, and the worker's destroy disconnects every peer at
         * once: peers that do not progress now cost one TMX_PEER_TIMEOUT for each of the two,
         * not one per peer as a tmx_ep_close of each did. Claimed messages go with the
         * worker. */
        (void)tmx_worker_flush(ep->worker);
        tmx_worker_destroy(ep->worker);
    }
    while (ep->claims != NULL) {
        tmx_fi_claim_t *c = ep->claims;
        ep->claims        = c->next;
        free(c);
    }
    for (size_t i = 0; i < ep->nchunks; i++) {
        tmx_fi_op_t *ops = ep->chunks[i];
        for (int j = 0; j < 64; j++) {
            free(ops[j].bounce);
        }
        free(ops);
    }
    free(ep->chunks);
    free(ep->cancel_idx);
    free(ep->peers);
    tmx_fi_lock(dom);
    if (ep->av != NULL) {
        ep->av->refs--;
    }
    dom->refs--;
    tmx_fi_unlock(dom);
    fi_freeinfo(ep->info);
    free(ep);
    return 0;
}

/* Sets the endpoint's hot fields (tmx_fi_ep_t) from what they derive from; called by
 * everything that changes that. */
static void tmx_fi_ep_hot(tmx_fi_ep_t *ep)
{
    ep->fast        = ep->enabled && (ep->caps & FI_TAGGED) && !ep->dom->safe;
    ep->tag_bad     = (ep->caps & FI_MSG) ? TMX_FI_MSG_BIT : 0;
    ep->tsend_flags = FI_TAGGED | tmx_fi_comp(ep->tx_selective, ep->tx_op_flags, 0);
    ep->trecv_flags = FI_TAGGED | tmx_fi_comp(ep->rx_selective, ep->rx_op_flags, 0);
}

static int tmx_fi_ep_bind_unlocked(struct fid *fid, struct fid *bfid, uint64_t flags)
{
    tmx_fi_ep_t *ep = (tmx_fi_ep_t *)fid;
    int          ret;

    if (bfid == NULL) {
        return -FI_EINVAL;
    }
    if (ep->enabled) {
        return -FI_EOPBADSTATE;
    }
    /* only a CQ, AV or counter of the endpoint's own domain (its lock, its progress), or an
     * event queue of this provider */
    if ((bfid->fclass == FI_CLASS_AV || bfid->fclass == FI_CLASS_CQ ||
         bfid->fclass == FI_CLASS_CNTR) &&
        tmx_fi_fid_domain(bfid) != ep->dom) {
        return -FI_EINVAL;
    }
    if (bfid->fclass == FI_CLASS_EQ && !tmx_fi_fid_is_eq(bfid)) {
        return -FI_EINVAL;
    }
    switch (bfid->fclass) {
    case FI_CLASS_AV:
        if (ep->av != NULL) {
            return -FI_EINVAL;
        }
        ep->av = (tmx_fi_av_t *)bfid;
        ep->av->refs++;
        return 0;
    case FI_CLASS_CQ: {
        tmx_fi_cq_t *cq = (tmx_fi_cq_t *)bfid;
        if (!(flags & (FI_TRANSMIT | FI_RECV)) ||
            (flags & ~(uint64_t)(FI_TRANSMIT | FI_RECV | FI_SELECTIVE_COMPLETION))) {
            return -FI_EINVAL;
        }
        if (((flags & FI_TRANSMIT) && ep->tx_cq != NULL) || ((flags & FI_RECV) && ep->rx_cq)) {
            return -FI_EINVAL;
        }
        ret = tmx_fi_cq_attach(cq, ep);
        if (ret != 0) {
            return ret;
        }
        if (flags & FI_TRANSMIT) {
            ep->tx_cq        = cq;
            ep->tx_selective = !!(flags & FI_SELECTIVE_COMPLETION);
        }
        if (flags & FI_RECV) {
            ep->rx_cq        = cq;
            ep->rx_selective = !!(flags & FI_SELECTIVE_COMPLETION);
        }
        tmx_fi_ep_hot(ep);
        return 0;
    }
    case FI_CLASS_CNTR: {
        tmx_fi_cntr_t *c = (tmx_fi_cntr_t *)bfid;
        if (!(flags & (FI_SEND | FI_RECV)) || (flags & ~(uint64_t)(FI_SEND | FI_RECV))) {
            return (flags & (FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE))
                       ? -FI_ENOSYS
                       : -FI_EINVAL;
        }
        if (((flags & FI_SEND) && ep->tx_cntr != NULL) || ((flags & FI_RECV) && ep->rx_cntr)) {
            return -FI_EINVAL;
        }
        ret = tmx_fi_cntr_attach(c, ep);
        if (ret != 0) {
            return ret;
        }
        if (flags & FI_SEND) {
            ep->tx_cntr = c;
        }
        if (flags & FI_RECV) {
            ep->rx_cntr = c;
        }
        return 0;
    }
    case FI_CLASS_EQ:
        return 0; /* nothing is reported on an event queue */
    default:
        return -FI_ENOSYS;
    }
}

static int tmx_fi_ep_bind(struct fid *fid, struct fid *bfid, uint64_t flags)
{
    tmx_fi_domain_t *dom_ = ((tmx_fi_ep_t *)fid)->dom;
    int r_;
    tmx_fi_lock(dom_);
    r_ = tmx_fi_ep_bind_unlocked(fid, bfid, flags);
    tmx_fi_unlock(dom_);
    return r_;
}

static int tmx_fi_ep_control_unlocked(struct fid *fid, int command, void *arg)
{
    tmx_fi_ep_t *ep = (tmx_fi_ep_t *)fid;

    switch (command) {
    case FI_ENABLE:
        if (ep->av == NULL) {
            return -FI_ENOAV;
        }
        if (ep->tx_cq == NULL && ep->rx_cq == NULL && ep->tx_cntr == NULL &&
            ep->rx_cntr == NULL) {
            return -FI_ENOCQ;
        }
        ep->enabled = 1;
        tmx_fi_ep_hot(ep);
        if (fi_log_enabled(&tmx_fi_prov, FI_LOG_INFO, FI_LOG_EP_CTRL)) {
            /* what the application asked for: which of the data path's cases it takes */
            fi_log(&tmx_fi_prov, FI_LOG_INFO, FI_LOG_EP_CTRL, __func__, __LINE__,
                   "endpoint enabled: caps %#llx, op_flags tx %#llx rx %#llx, selective "
                   "completion tx %d rx %d, CQ format tx %d rx %d, one CQ %d, fast path %d\n",
                   (unsigned long long)ep->caps, (unsigned long long)ep->tx_op_flags,
                   (unsigned long long)ep->rx_op_flags, ep->tx_selective, ep->rx_selective,
                   ep->tx_cq ? (int)ep->tx_cq->format : -1,
                   ep->rx_cq ? (int)ep->rx_cq->format : -1, ep->tx_cq == ep->rx_cq, ep->fast);
        }
        return 0;
    case FI_GETOPSFLAG:
    case FI_SETOPSFLAG: {
        uint64_t *f = arg;
        if (f == NULL) {
            return -FI_EINVAL;
        }
        uint64_t *target = (*f & FI_TRANSMIT) ? &ep->tx_op_flags
                           : (*f & FI_RECV)   ? &ep->rx_op_flags
                                              : NULL;
        if (target == NULL) {
            return -FI_EINVAL;
        }
        if (command == FI_GETOPSFLAG) {
            *f = *target;
        } else {
            *target = *f & ~(uint64_t)(FI_TRANSMIT | FI_RECV);
            tmx_fi_ep_hot(ep);
        }
        return 0;
    }
    default:
        return -FI_ENOSYS;
    }
}

static int tmx_fi_ep_control(struct fid *fid, int command, void *arg)
{
    tmx_fi_domain_t *dom_ = ((tmx_fi_ep_t *)fid)->dom;
    int r_;
    tmx_fi_lock(dom_);
    r_ = tmx_fi_ep_control_unlocked(fid, command, arg);
    tmx_fi_unlock(dom_);
    return r_;
}

static int tmx_fi_ep_ops_open(struct fid *fid, const char *name, uint64_t flags, void **ops,
                              void *context)
{
    (void)fid;
    (void)name;
    (void)flags;
    (void)ops;
    (void)context;
    return -FI_ENOSYS;
}

static struct fi_ops tmx_fi_ep_fi_ops = {
    .size     = sizeof(struct fi_ops),
    .close    = tmx_fi_ep_close,
    .bind     = tmx_fi_ep_bind,
    .control  = tmx_fi_ep_control,
    .ops_open = tmx_fi_ep_ops_open,
};

int tmx_fi_endpoint(struct fid_domain *domain, struct fi_info *info, struct fid_ep **ep_p,
                    void *context)
{
    tmx_fi_domain_t *dom = (tmx_fi_domain_t *)domain;
    tmx_fi_ep_t     *ep;
    void            *addr;
    size_t           len;
    tmx_status_t     s;
    int              ret;

    if (info == NULL || ep_p == NULL || info->ep_attr == NULL ||
        (info->ep_attr->type != FI_EP_RDM && info->ep_attr->type != FI_EP_UNSPEC) ||
        (info->caps & ~(uint64_t)TMX_FI_CAPS) != 0) {
        return -FI_EINVAL;
    }
    ep = calloc(1, sizeof(*ep));
    if (ep == NULL) {
        return -FI_ENOMEM;
    }
    ep->info = fi_dupinfo(info);
    if (ep->info == NULL) {
        free(ep);
        return -FI_ENOMEM;
    }
    ep->caps = info->caps ? info->caps : TMX_FI_CAPS;
    if (!(ep->caps & (FI_TAGGED | FI_MSG))) {
        ep->caps |= FI_TAGGED | FI_MSG;
    }
    ep->tx_op_flags = info->tx_attr ? info->tx_attr->op_flags : 0;
    ep->rx_op_flags = info->rx_attr ? info->rx_attr->op_flags : 0;
    s               = tmx_worker_create(dom->ctx, NULL, &ep->worker);
    if (s != TMX_OK) {
        ret = -tmx_fi_errno(s);
        goto err_info;
    }
    s = tmx_worker_get_address_compact(ep->worker, &addr, &len);
    if (s != TMX_OK) {
        ret = -tmx_fi_errno(s);
        goto err_worker;
    }
    if (len >= TMX_FI_NAME_LEN) {
        /* no room in FI_NAME_MAX: tmx_fi(7) */
        if (fi_log_enabled(&tmx_fi_prov, FI_LOG_WARN, FI_LOG_EP_CTRL)) {
            fi_log(&tmx_fi_prov, FI_LOG_WARN, FI_LOG_EP_CTRL, __func__, __LINE__,
                   "endpoint: the worker's compact address has %zu bytes, more than the %d "
                   "an endpoint name holds (soft device with named segments, "
                   "TMX_SOFT_MEMFD=no?)\n",
                   len, TMX_FI_NAME_LEN - 1);
        }
        tmx_worker_release_address(ep->worker, addr);
        ret = -FI_EOVERFLOW;
        goto err_worker;
    }
    ep->name[0] = (uint8_t)len;
    memcpy(ep->name + 1, addr, len);
    tmx_worker_release_address(ep->worker, addr);
    ep->ep.fid.fclass  = FI_CLASS_EP;
    ep->ep.fid.context = context;
    ep->ep.fid.ops     = &tmx_fi_ep_fi_ops;
    ep->ep.ops         = &tmx_fi_ep_ops;
    ep->ep.cm          = &tmx_fi_cm_ops;
    ep->ep.msg         = &tmx_fi_msg_ops;
    ep->ep.tagged      = &tmx_fi_tagged_ops;
    ep->dom            = dom;
    tmx_fi_lock(dom);
    dom->refs++;
    tmx_fi_unlock(dom);
    tmx_fi_ep_hot(ep);
    *ep_p = &ep->ep;
    return 0;

err_worker:
    tmx_worker_destroy(ep->worker);
err_info:
    fi_freeinfo(ep->info);
    free(ep);
    return ret;
}
