/*
 * libtmx-fi.so: a libfabric provider ("tmx") over tmx's public API (include/tmx/tmx.h).
 *
 * Objects: a fabric; a domain owns one tmx context; an endpoint owns one tmx worker and one
 * tmx endpoint per address-vector entry it sends to (made on first use); a CQ progresses the
 * workers of the endpoints bound to it (manual progress inside fi_cq_read). Every operation is
 * a tmx_fi_op_t from the endpoint's free list. The poster frees the tmx request at once
 * (tmx releases a request freed in progress after its callback); the tmx completion callback
 * makes the CQ entry and the counter increment and puts the operation back, calling nothing of
 * tmx (tmx's rule for callbacks).
 * See doc/man/tmx_fi.7.md.
 */
#ifndef TMX_FI_H
#define TMX_FI_H

#ifndef EXTERNALLY_VISIBLE
#define EXTERNALLY_VISIBLE /* fi_prov.h's FI_EXT_INI uses it; default visibility suffices */
#endif

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>
#include <rdma/providers/fi_log.h>
#include <rdma/providers/fi_prov.h>
#include <pthread.h>
#include <tmx/tmx.h>

#define TMX_FI_NAME        "tmx"
#define TMX_FI_VERSION     FI_VERSION(0, 1)
/* An endpoint name: one length byte, the compact tmx worker address, zeros to the end. A fixed
 * length, because Open MPI inserts the names of all ranks with one stride. */
#define TMX_FI_NAME_LEN    FI_NAME_MAX
/* fi_inject's limit: tmx's default eager limit (TMX_EAGER_MAX), so that Open MPI sends every
 * eager MPI_Send by fi_tinject, which tmx completes in place from the caller's buffer
 * (TMX_SEND_FLAG_TRY) with no CQ entry to wait for; only a send tmx refuses is copied, into
 * the operation (TMX_FI_INL_SIZE) or, longer, into a buffer of its own. */
#define TMX_FI_INJECT_SIZE 16384
#define TMX_FI_INL_SIZE    512
/* The bytes of inject copies longer than TMX_FI_INL_SIZE an endpoint holds for tmx at most
 * (then -FI_EAGAIN until tmx sent some): 4096 injects of TMX_FI_INJECT_SIZE */
#define TMX_FI_INJECT_BUFFERED ((size_t)64 << 20)
#define TMX_FI_IOV_LIMIT   8
#define TMX_FI_QUEUE_SIZE  65536 /* operations in flight per endpoint */
#define TMX_FI_MAX_MSG     ((size_t)1 << 40)
/* With FI_MSG, the top tag bit tells untagged messages from tagged ones. */
#define TMX_FI_MSG_BIT     ((uint64_t)1 << 63)
#define TMX_FI_CQ_MAX_EPS  16
/* bytes of remote CQ data (FI_REMOTE_CQ_DATA): tmx's immediate data */
#define TMX_FI_CQ_DATA_SIZE 4

#define TMX_FI_CAPS                                                                               \
    (FI_TAGGED | FI_MSG | FI_SEND | FI_RECV | FI_LOCAL_COMM | FI_REMOTE_COMM | FI_DIRECTED_RECV)

extern struct fi_provider tmx_fi_prov;
extern uint32_t           tmx_fi_api_version; /* the highest version an application asked for */

typedef struct tmx_fi_fabric {
    struct fid_fabric fabric;
    int               refs;
} tmx_fi_fabric_t;

typedef struct tmx_fi_domain {
    struct fid_domain domain;
    tmx_fi_fabric_t  *fab;
    tmx_context_h     ctx;
    int               refs;
    int               safe; /* FI_THREAD_SAFE: every entry point takes lock */
    pthread_mutex_t   lock;
} tmx_fi_domain_t;

static inline void tmx_fi_lock(tmx_fi_domain_t *dom)
{
    if (dom->safe) {
        pthread_mutex_lock(&dom->lock);
    }
}

static inline void tmx_fi_unlock(tmx_fi_domain_t *dom)
{
    if (dom->safe) {
        pthread_mutex_unlock(&dom->lock);
    }
}

typedef struct tmx_fi_av {
    struct fid_av    av;
    tmx_fi_domain_t *dom;
    enum fi_av_type  type;
    size_t           count, cap;
    uint8_t         *names; /* count names of TMX_FI_NAME_LEN bytes */
    uint8_t         *valid;
    int              refs;
} tmx_fi_av_t;

struct tmx_fi_ep;

typedef struct tmx_fi_cntr {
    struct fid_cntr  cntr;
    tmx_fi_domain_t *dom;
    uint64_t         val, err;
    struct tmx_fi_ep *eps[TMX_FI_CQ_MAX_EPS];
    int              neps;
    int              refs;
} tmx_fi_cntr_t;

/* A completion entry (the tagged format, the largest) or an error entry. */
typedef struct tmx_fi_err {
    struct tmx_fi_err     *next;
    struct fi_cq_err_entry e;
} tmx_fi_err_t;

typedef struct tmx_fi_cq {
    struct fid_cq              cq;
    tmx_fi_domain_t           *dom;
    enum fi_cq_format          format;
    size_t                     entry_size;
    struct fi_cq_tagged_entry *ring;
    size_t                     cap, head, count;
    tmx_fi_err_t              *err_head, *err_tail;
    /* While fi_cq_read progresses an empty CQ of the tagged format: the caller's buffer, where
     * completions go straight instead of through the ring, from direct up to direct_end (both
     * NULL otherwise; equal once full) */
    struct fi_cq_tagged_entry *direct, *direct_end;
    /* The worker of the CQ's only endpoint when fi_cq_read may take its short way (no domain
     * lock, the tagged format, one endpoint bound), NULL otherwise (tmx_fi_cq_hot) */
    tmx_worker_h               one_worker;
    struct tmx_fi_ep          *eps[TMX_FI_CQ_MAX_EPS];
    int                        neps;
    int                        refs;
    int                        signaled; /* fi_cq_signal: ends fi_cq_sread's wait (atomic) */
} tmx_fi_cq_t;

enum {
    TMX_FI_OP_SEND = 1,
    TMX_FI_OP_RECV = 2,
};

typedef struct tmx_fi_op {
    struct tmx_fi_op *next;             /* free list */
    struct tmx_fi_ep *ep;
    int               kind;
    uint64_t          flags;   /* FI_TAGGED or FI_MSG, FI_COMPLETION, FI_DISCARD */
    void             *context;
    tmx_request_h     req;
    tmx_status_t      status;
    tmx_tag_recv_info_t info;
    void             *buf;     /* receive: the user's buffer (or the bounce) */
    size_t            len;
    void             *bounce;  /* iov count > 1: gathered send or scattered receive */
    /* A receive's tmx parameters from any source (callback tmx_fi_recv_cb, this operation as
     * user data), set once when the operation is made: fi_trecv's common case builds none */
    tmx_request_params_t rparams;
    struct iovec      iov[TMX_FI_IOV_LIMIT];
    size_t            iov_count;
    char              inl[TMX_FI_INL_SIZE];
} tmx_fi_op_t;

typedef struct tmx_fi_claim {
    struct tmx_fi_claim *next;
    void                *context;
    tmx_message_h        msg;
    tmx_tag_recv_info_t  info;
} tmx_fi_claim_t;

typedef struct tmx_fi_ep {
    struct fid_ep    ep;
    tmx_fi_domain_t *dom;
    struct fi_info  *info;
    uint64_t         caps;
    tmx_worker_h     worker;
    uint8_t          name[TMX_FI_NAME_LEN];
    tmx_fi_av_t     *av;
    tmx_ep_h        *peers;
    size_t           npeers;
    int              peer_err; /* why tmx_fi_ep_peer found none (a negative FI_ error) */
    tmx_fi_cq_t     *tx_cq, *rx_cq;
    tmx_fi_cntr_t   *tx_cntr, *rx_cntr;
    uint64_t         tx_op_flags, rx_op_flags; /* FI_COMPLETION when ops without flags complete */
    int              tx_selective, rx_selective;
    int              enabled;
    int              cq_data_said; /* the first send with remote CQ data was logged (info) */
    tmx_fi_op_t     *free_ops;
    void           **chunks;
    size_t           nchunks, nops;
    int              closing; /* tmx_fi_ep_close: completions make no CQ entries */
    size_t           tx_pending; /* send operations tmx has in progress (their callback due) */
    size_t           inject_bytes; /* in copies of long injects (TMX_FI_INJECT_BUFFERED) */
    tmx_fi_claim_t  *claims;
    /* What fi_tsend and fi_trecv would otherwise work out per call, set by tmx_fi_ep_hot
     * whenever what it derives from changes (bind, FI_ENABLE, FI_SETOPSFLAG): */
    int              fast;        /* enabled, FI_TAGGED, no domain lock (FI_THREAD_SAFE) */
    uint64_t         tag_bad;     /* the tag bits a tagged operation may not use (FI_MSG's) */
    uint64_t         tsend_flags; /* FI_TAGGED, and FI_COMPLETION when fi_tsend completes */
    uint64_t         trecv_flags; /* FI_TAGGED, and FI_COMPLETION when fi_trecv completes */
    /* fi_cancel's caches (tmx_fi_cancel_find): the operation it found last; an index of the
     * receives in progress by context, open addressing in cancel_cap slots (a power of two,
     * 0: none yet), NULL for empty; the operations its scans looked at since its build */
    tmx_fi_op_t     *cancel_last;
    tmx_fi_op_t    **cancel_idx;
    size_t           cancel_cap;
    size_t           cancel_scanned;
} tmx_fi_ep_t;

/* tmx_fi.c */
int          tmx_fi_errno(tmx_status_t status);
/* tmx_fi_cq_push when the ring is full: grows it, then pushes */
void         tmx_fi_cq_push_grow(tmx_fi_cq_t *cq, void *context, uint64_t flags, size_t len,
                                 uint64_t tag, uint64_t data);
/* A completion entry. data: the remote CQ data, reported when flags has FI_REMOTE_CQ_DATA.
 * Inline: it is on the path of every message. */
static inline void tmx_fi_cq_push(tmx_fi_cq_t *cq, void *context, uint64_t flags, size_t len,
                                  uint64_t tag, uint64_t data)
{
    struct fi_cq_tagged_entry *e = cq->direct;

    if (e != cq->direct_end) {
        /* inside fi_cq_read, which found the CQ empty: into the caller's buffer (once it is
         * full, direct == direct_end: the rest go to the ring) */
        cq->direct = e + 1;
    } else {
        if (cq->count == cq->cap) {
            tmx_fi_cq_push_grow(cq, context, flags, len, tag, data);
            return;
        }
        if (cq->count == 0) {
            cq->head = 0; /* an empty queue starts over: its first entries stay in the cache */
        }
        e = &cq->ring[(cq->head + cq->count++) & (cq->cap - 1)]; /* cap: 2^n */
    }
    e->op_context = context;
    e->flags      = flags;
    e->len        = len;
    e->buf        = NULL;
    e->data       = (flags & FI_REMOTE_CQ_DATA) ? data : 0;
    e->tag        = tag;
}
int          tmx_fi_cq_push_err(tmx_fi_cq_t *cq, void *context, uint64_t flags, size_t len,
                                uint64_t tag, size_t olen, int err, int prov_errno);
int          tmx_fi_cq_attach(tmx_fi_cq_t *cq, tmx_fi_ep_t *ep);
void         tmx_fi_cq_detach(tmx_fi_cq_t *cq, tmx_fi_ep_t *ep);
/* The domain of a CQ, AV or counter of this provider; NULL for any other object (another
 * provider's, or another class): fi_ep_bind takes only its own domain's. */
tmx_fi_domain_t *tmx_fi_fid_domain(const struct fid *fid);
int          tmx_fi_fid_is_eq(const struct fid *fid); /* an event queue of this provider */
int          tmx_fi_cntr_attach(tmx_fi_cntr_t *cntr, tmx_fi_ep_t *ep);
void         tmx_fi_cntr_detach(tmx_fi_cntr_t *cntr, tmx_fi_ep_t *ep);

/* tmx_fi_ep.c */
int          tmx_fi_endpoint(struct fid_domain *domain, struct fi_info *info, struct fid_ep **ep,
                             void *context);
/* Manual progress: the worker's round, whose callbacks complete operations. Inline: the loop
 * of every caller waiting in fi_cq_read runs it. */
static inline void tmx_fi_ep_progress(tmx_fi_ep_t *ep)
{
    if (ep->worker != NULL) {
        tmx_worker_progress(ep->worker);
    }
}

#endif /* TMX_FI_H */
