/*
 * Core objects: context, worker, interface (one opened device of a worker), endpoint,
 * request. Internal to the library; the public header has opaque handles only.
 */
#ifndef TMX_CORE_H
#define TMX_CORE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <tmx/tmx.h>

#include "prov/prov.h"
#include "tag/offload.h"
#include "tag/tag.h"
#include "util/config.h"
#include "util/hash.h"
#include "util/list.h"
#include "util/mpool.h"

#define TMX_MAGIC_CONTEXT 0x54435458u /* "XTCT" */
#define TMX_MAGIC_WORKER  0x54575854u
#define TMX_MAGIC_EP      0x54455854u
#define TMX_MAGIC_REQ     0x54525854u
/* most times TMX_PEER_TIMEOUT a connection waits when oversubscribed (tmx_context_wait_policy) */
#define TMX_CONNECT_SCALE_MAX 16
#define TMX_MAGIC_MSG     0x544d5854u
#define TMX_MAGIC_MEM     0x544d4d54u
#define TMX_MAGIC_DEAD    0xdeadbeefu

#define TMX_MAX_PROVS   8
#define TMX_MAX_IFACES  4
/* Largest message: process_vm_readv and friends take ssize_t; 1 TiB is beyond any buffer. */
#define TMX_MAX_MSG     ((size_t)1 << 40)

/* XRC domains an interface may use (TMX_XRC_DOMAINS). */
#define TMX_XRC_MAX_DOMAINS 4

/* Worker address blob: header, then per interface a record. */
#define TMX_ADDR_MAGIC   0x31584d54u /* "TMX1" */
#define TMX_ADDR_VERSION 1

typedef struct tmx_context {
    uint32_t          magic;
    int               num_workers;
    tmx_config_t      cfg;
    const tmx_prov_t *provs[TMX_MAX_PROVS];
    int               num_provs;
    int               cpus;           /* CPUs of the affinity mask when the context was made */
    int               oversubscribed; /* cfg.local_size > cpus: idle polls yield */
    double            connect_timeout; /* TMX_PEER_TIMEOUT for connections (tmx_context_wait_policy) */
    unsigned          idle_yields;    /* oversubscribed: idle yields of a wait before it tries to
                                       * sleep, whatever TMX_WAIT_SPIN (0: the spin alone) */
} tmx_context_t;

/* One opened device of a worker, with everything the worker needs on it. */
typedef struct tmx_iface {
    struct tmx_worker *worker;
    tmx_dev_t         *dev;
    const tmx_prov_ops_t *ops;
    tmx_pd_t          *pd;
    tmx_cq_t          *cq;       /* all completions of this iface */
    tmx_comp_channel_t *channel; /* wakes a sleeping worker; NULL: the device cannot */
    tmx_srq_t         *srq;      /* receives of all RC QPs (a TM SRQ when tm_on) */
    int                tm_on;    /* the SRQ matches tags: every message starts with a TMH */
    tmx_tm_t           tm;       /* its tag list's shadow (tm_on) */
    tmx_qp_t          *ud_qp;    /* connection wire-up */
    uint8_t           *rx_bufs;  /* srq receive buffers, rx_count * rx_size */
    tmx_mr_t          *rx_mr;
    unsigned           rx_count;
    size_t             rx_size;
    uint8_t           *ud_bufs;
    tmx_mr_t          *ud_mr;
    unsigned           ud_count;
    size_t             ud_size;
    uint8_t           *tx_bufs;  /* bounce buffers for sends that cannot go inline */
    tmx_mr_t          *tx_mr;
    unsigned           tx_count;
    size_t             tx_size;
    uint32_t          *tx_free;  /* stack of free tx buffer indices */
    unsigned           tx_free_top;
    /* Rendezvous staging buffers (TMX_RNDV_COPY, TMX_DEV_CAP_REG_SLOW; mem.c): the
     * receivers' pool, made at the first read that can use it; every pool of the interface
     * (the receivers' and the endpoints'), and how many are endpoints'. */
    struct tmx_stage_pool *stage_rx;
    struct tmx_stage_pool *stage_pools;
    unsigned           stage_tx_pools;
    uint32_t          *rx_repost; /* receive buffers consumed, to post again when idle */
    unsigned           rx_repost_count;
    unsigned           rx_lazy;   /* an idle poll reposts once this many wait (tmx_iface_repost_rx) */
    uint32_t           last_qpn;  /* tmx_ep_by_qpn's last answer (valid when last_ep) */
    struct tmx_ep     *last_ep;
    uint32_t           xlast_qpn; /* tmx_xrc_rx_ep's last answer: target qp and endpoint id */
    uint32_t           xlast_id;  /* (valid when xlast_ep) */
    struct tmx_ep     *xlast_ep;
    uint8_t            dev_addr[TMX_DEV_ADDR_MAX];
    size_t             dev_addr_len;
    /* XRC (src/core/xrc.c): on where the device offers it and TMX_XRC allows it. With TM on
     * too (tm_on), the tagged stream stays on RC QPs and the TM SRQ; XRC carries the rest.
     * The receive buffers are rx_basic for srq, then rx_per_dom for each xsrq[d]. */
    int                xrc_on;
    unsigned           xrc_ndom;
    unsigned           rx_basic;
    unsigned           rx_per_dom;
    uint64_t           node_key;  /* our node (TMX_NODE_ID, or the host) */
    tmx_xrcd_t        *xrcd[TMX_XRC_MAX_DOMAINS];
    tmx_srq_t         *xsrq[TMX_XRC_MAX_DOMAINS];
    uint32_t           xsrqn[TMX_XRC_MAX_DOMAINS];
    tmx_hash_t         xini_by_key; /* tmx_xini_key(node, domain) -> struct tmx_xini */
    tmx_list_t         xinis;
    tmx_hash_t         xtgt_by_qpn; /* target QP number -> struct tmx_xtgt */
    tmx_list_t         xtgts;
    uint32_t           ud_qpn;
    size_t             max_inline;
    size_t             max_msg;
} tmx_iface_t;

typedef struct tmx_worker {
    uint32_t          magic;
    tmx_context_t    *ctx;
    tmx_thread_mode_t thread_mode;
    pthread_mutex_t   lock;
    uint64_t          uuid;
    int               in_progress;  /* progress re-entered from a callback is a no-op */
    tmx_iface_t       ifaces[TMX_MAX_IFACES];
    int               num_ifaces;
    tmx_tag_engine_t  tm;
    tmx_iface_t      *tm_iface;     /* receives are offered to this device's tag list; NULL:
                                     * software matching only */
    tmx_hash_t        ep_by_qpn;   /* (iface << 32 | qp_num) -> ep */
    tmx_hash_t        ep_by_id;    /* local ep id -> ep (wire-up replies, credits owed) */
    tmx_hash_t        passive_by_key; /* hash(remote uuid, remote ep id) -> passive ep */
    tmx_hash_t        sreq_by_id;  /* send request id -> request (ACK/FIN lookups) */
    uint64_t          next_ep_id;
    uint64_t          next_sreq_id;
    tmx_list_t        eps;          /* all endpoints, user and passive */
    tmx_list_t        pending_eps;  /* endpoints with queued sends */
    tmx_list_t        claimed;      /* messages claimed by a probe, not yet received */
    tmx_mpool_t       req_mp;
    tmx_mpool_t       msg_mp;       /* unexpected messages of up to TMX_MSG_POOL_DATA bytes */
    size_t            unexp_bytes;
    size_t            unexp_budget;
    size_t            eager_max;
    unsigned          eager_credits;
    /* counters shown by tmx_info / debug logs */
    uint64_t          num_unexp;
    uint64_t          num_credit_stalls; /* send attempts that found no eager credit (a
                                         * queued send counts again at each retry) */
    uint64_t          stat_credit_msgs;  /* CREDIT messages asked for (proto.h) */
    /* Peer failures (ULFM's "failure pending"): fail_epoch counts the remote workers found
     * failed; a receive remembers the count it has told its user about. Written under the
     * worker's lock, read by test/wait without it. */
    atomic_uint       fail_epoch;
    tmx_hash_t        failed_peers;   /* remote uuid -> tmx_peer_failure_t */
    tmx_list_t        failures;       /* every tmx_peer_failure_t, reported or not */
    unsigned          failures_unreported;
    int               destroying;     /* tmx_worker_destroy: the error handler stays quiet */
    tmx_err_handler_cb_t err_handler;
    void             *err_handler_arg;
    /* Sleeping: epfd (tmx_worker_get_efd) is an epoll set of every iface's channel fd and
     * evfd, an eventfd by which a thread whose progress completed something wakes the
     * threads sleeping in the worker (sleepers, under the lock). -1 when a device cannot
     * wake us: then waits spin or yield. */
    int               epfd;
    int               evfd;
    unsigned          sleepers;
    tmx_list_t        mems;           /* tmx_mem_t mapped by the user (mem.c) */
    uint64_t          stat_rndv_regs;   /* rendezvous buffers registered per message */
    uint64_t          stat_rndv_mapped; /* rendezvous buffers in a tmx_mem_map range */
    uint64_t          stat_rndv_cached; /* rendezvous buffers in a cached registration */
    uint64_t          stat_rndv_cache_regs; /* registrations made for the cache (TMX_MR_CACHE) */
    uint64_t          stat_rndv_staged; /* rendezvous buffers copied through a staging buffer */
    int               mr_cache;       /* TMX_MR_CACHE: 1 on (the monitor runs), -1 off, 0 not
                                       * started yet (mem.c) */
    uint64_t          stat_sleeps;    /* blocking waits' sleeps on epfd (tmx_worker_idle) */
    uint64_t          stat_sleep_timeouts; /* of them, those that no wakeup ended */
    unsigned          spin_us;        /* TMX_WAIT=auto's polling before a sleep, adapted
                                       * (tmx_worker_idle); 0 until the first sleep */
    unsigned          spin_us_max;    /* the most it grew to, for the closing report */
    /* Rendezvous sends waiting for a memory registration: logged once, then counted. */
    uint64_t          reg_waits;      /* registration attempts refused, since the last log */
    double            reg_wait_logged; /* when the last line said so (0: never) */
    /* Rendezvous reads that found the send queue full (tmx_proto_rndv_read_post): they wait
     * on ep->read_pending; the first is logged, every one counted. */
    uint64_t          read_waits;     /* posts refused with TMX_ERR_NO_RESOURCE */
    uint64_t          read_waits_logged; /* read_waits when the line was logged (0: never) */
    uint64_t          stat_ooo_eps;   /* endpoints connected with OOO placement on */
    /* Eager-RDMA rings (src/proto/ring.h) */
    tmx_list_t        ring_polled;    /* rings lent to senders that we poll */
    unsigned          rings_rx;       /* rings lent to senders */
    unsigned          rings_tx;       /* rings senders lent us */
    unsigned          ring_sleepers;  /* lent rings whose sender's word does not say awake */
    int               ring_skipped;   /* the last progress round took ring messages only */
    int               devs_busy;      /* the devices' last poll found something */
    unsigned          ring_rounds;    /* rounds of ring polls while the devices are quiet */
    int               poll_devs;      /* the next round polls the devices: the last one gave
                                       * the processor away (yield or sleep) */
    uint64_t          ring_sleep_rx;  /* rx_msgs when the first of them was told */
    uint64_t          rx_msgs;        /* messages received, any path */
    uint64_t          compact_tx;     /* compact EAGER messages (proto.h) sent */
    uint64_t          compact_rx;     /* ... and received */
    struct {
        uint64_t sent, received, full, asleep, wakes;
        uint64_t report_waits; /* credit reports that found the send queue full (retried) */
    } ring_stats;
    uint64_t          ring_idle_ns;   /* when the lent rings were last looked at for idleness */
    unsigned          ring_revoking;  /* rings asked back whose RING_RETURN has not come */
    uint64_t          stat_xrc_striped; /* rendezvous reads striped over XRC domains */
    uint64_t          stat_xrc_dropped; /* XRC messages whose endpoint id does not belong to the
                                         * initiator that sent them (xrc.c), dropped */
} tmx_worker_t;

/* A remote worker found failed: reported once to the error handler. */
typedef struct tmx_peer_failure {
    tmx_list_t   list;     /* worker->failures */
    uint64_t     uuid;
    tmx_status_t status;
    int          reported;
} tmx_peer_failure_t;

typedef enum {
    TMX_EP_CONNECTING = 0,
    TMX_EP_CONNECTED  = 1,
    TMX_EP_FAILED     = 2,
    TMX_EP_CLOSING    = 3,
} tmx_ep_state_t;

typedef struct tmx_ep {
    uint32_t       magic;
    tmx_worker_t  *worker;
    tmx_iface_t   *iface;
    tmx_ep_state_t state;
    int            passive;        /* created by a peer's wire-up request, not by the user */
    int            user_closed;
    uint64_t       id;             /* local id, unique per worker */
    uint64_t       remote_id;      /* the peer's id of its side of the connection */
    uint64_t       remote_uuid;
    uint64_t       passive_key;
    tmx_qp_t      *qp;             /* our sends (and, with TM, the peer device's FINs) */
    tmx_qp_t      *tm_qp;          /* TM: the peer's sends arrive here; its send queue is the
                                    * device's (rendezvous reads, FINs) */
    tmx_ah_t      *ah;
    uint32_t       remote_ud_qpn;
    tmx_list_t     list;           /* worker->eps */
    tmx_list_t     pending_link;   /* worker->pending_eps while pending is not empty */
    tmx_list_t     pending;        /* send requests waiting for connection/credits/space */
    tmx_list_t     outstanding_list; /* sends posted, waiting for ACK/FIN */
    tmx_list_t     ctrl_pending;   /* control messages waiting for room on the wire */
    tmx_list_t     read_pending;   /* receives whose rendezvous reads wait for room in the send
                                    * queue (tmx_request_t.pending_link) */
    size_t         eager_max;      /* min of both sides' eager limits (agreed at wire-up) */
    int            credits;        /* eager messages we may still send */
    unsigned       credits_owed;   /* credits to give back to the peer */
    unsigned       outstanding;    /* sends waiting for ACK/FIN */
    int            disc_acked;     /* the peer knows the connection closes */
    int            peer_closed_idle; /* the peer closed in order with nothing of ours in flight */
    int            closing;
    uint64_t       send_events;    /* sends posted or completed: the progress a FLUSH close sees */
    double         wireup_time;    /* last wire-up request sent */
    double         connect_start;
    int            ooo;            /* the RC QPs have out-of-order data placement on: the
                                    * fence planner (src/proto/fence.c) fences per its table */
    int            poll_data;      /* the receiver polls memory for data (eager-RDMA ring):
                                    * never with ooo (tmx_ep_data_path_check) */
    struct tmx_ring_rx *ring_rx;   /* passive: the ring we lend the sender (proto/ring.h) */
    struct tmx_stage_pool *stage_tx; /* rendezvous sends' staging buffers, read by this
                                     * peer only (mem.c); NULL until the first */
    struct tmx_ring_tx *ring_tx;   /* active: the ring the receiver lent us */
    uint8_t        ring_choice;    /* passive: the mode its ring would have (tmx_ring_mode_t) */
    uint8_t        ring_tried;     /* passive: lent once (or could not be): not again */
    unsigned       ring_msgs;      /* passive: eager messages through the queue so far */
    /* passive, polling ring (ring.h "Credits"): a message of it is being handled (no eager
     * credit goes back for it), and how many of its messages sit unexpected past the budget
     * (their slots are not reported free until a receive takes them) */
    uint8_t        ring_rx_now;
    unsigned       ring_held;
    unsigned       sq_busy;        /* signaled work requests of ours on qp not completed yet */
    uint8_t        sq_wait;        /* a rendezvous read found qp's send queue full while some of
                                    * sq_busy were in it: the queued reads and sends wait for
                                    * one of their completions (tmx_proto_sq_done), not for the
                                    * next progress round */
    /* compact eager (proto.h): an EAGER with the tag of the last one goes with no header */
    uint8_t        compact_tx;     /* the peer takes them (TMX_WIREUP_F_COMPACT in its wire-up) */
    uint8_t        compact_rx;     /* we said we take them */
    uint8_t        ctag_tx_ok;     /* ctag_tx is the tag of the last full EAGER header sent */
    uint8_t        ctag_rx_ok;     /* ctag_rx is the tag of the last full EAGER header received */
    uint64_t       ctag_tx;
    uint64_t       ctag_rx;
    /* XRC (src/core/xrc.c): qp is the initiator of domain xdom, shared with the other
     * endpoints to the peer's node; the peer's messages land in our XRC SRQs. With xrc_tm
     * (TM offload on too) qp and tm_qp stay the RC pair of TM and carry the tagged stream;
     * the initiators carry the rest (xrc.c "TM and XRC"). */
    int            xrc;
    int            xrc_tm;
    int            xtgt_acked;     /* active side: the peer knows our initiators' targets */
    double         xtgt_sent;      /* when XTGT was last sent (resent until acknowledged) */
    int            xrep;           /* active side: the peer's reply (its SRQs, node) came */
    unsigned       xdom;           /* the domain of this pair's messages */
    uint64_t       xnode;          /* the peer's node */
    uint32_t       xsrqn[TMX_XRC_MAX_DOMAINS]; /* the peer's SRQ numbers */
    struct tmx_xini *xini[TMX_XRC_MAX_DOMAINS]; /* our initiators to its node */
} tmx_ep_t;

/* DESIGN.md: a QP with OOO placement never gets the polling-on-data path. TMX_ERR_INVALID_PARAM
 * (and an error logged) when ep would break that. */
tmx_status_t tmx_ep_data_path_check(const tmx_ep_t *ep);

typedef enum {
    TMX_REQ_SEND = 0,
    TMX_REQ_RECV = 1,
} tmx_req_type_t;

/* Written and read under the worker lock only (in TMX_THREAD_MODE_MULTI). What
 * tmx_request_test and tmx_request_wait read without the lock is tmx_request_t.done. */
enum tmx_req_flags {
    TMX_REQ_FLAG_COMPLETED  = 1u << 0, /* tmx_request_complete ran (or is running its callback) */
    TMX_REQ_FLAG_RELEASE    = 1u << 1, /* user freed it: release on completion */
    TMX_REQ_FLAG_EXPECTED   = 1u << 2, /* receive is in the expected queue */
    TMX_REQ_FLAG_MATCHED    = 1u << 3,
    TMX_REQ_FLAG_SYNC       = 1u << 4,
    TMX_REQ_FLAG_RNDV       = 1u << 5,
    TMX_REQ_FLAG_INTERNAL   = 1u << 6, /* created by a blocking helper or the library */
};

/* Bytes of an offered receive's buffer kept (tmx_request_t.tm_saved): the TM rendezvous header
 * (tmx_proto_tm_rndv_t, checked in tm.c). */
#define TMX_TM_SAVED 32

typedef struct tmx_request {
    uint32_t            magic;
    uint16_t            type;
    uint16_t            flags;
    tmx_status_t        status;
    /* Completion published to threads that test without the lock: stored 1 with release
     * ordering once status, info and the callback are done; read with acquire. */
    uint8_t             done;
    tmx_worker_t       *worker;
    tmx_ep_t           *ep;
    void               *buf;
    size_t              len;
    tmx_tag_t           tag;
    tmx_tag_recv_info_t info;
    union {
        tmx_send_cb_t   send;
        tmx_recv_cb_t   recv;
    } cb;
    void               *user_data;
    tmx_tag_exp_t       exp;          /* receive: expected queue entry */
    tmx_tm_entry_t      tme;          /* receive: its entry in the device's tag list */
    struct tmx_message *tm_held;      /* receive: a software-path message that matched it while
                                       * the device still held it; delivered once the DEL
                                       * gives the receive back */
    int                 tm_cancel;    /* receive: canceled while the device held it */
    /* receive offered to a device: its buffer's first bytes when offered (the user may not
     * touch them until it completes), put back past a short message whose rendezvous-form
     * header the device wrote there (tm.c); read only for an offered receive */
    uint8_t             tm_saved[TMX_TM_SAVED];
    tmx_list_t          pending_link; /* send: ep->pending; receive: ep->read_pending */
    uint64_t            id;           /* send: key in worker->sreq_by_id */
    tmx_mr_t           *mr;           /* rendezvous registration */
    struct tmx_mem     *memh;         /* the user's mapping mr belongs to, or NULL (mem.c) */
    struct tmx_stage_pool *stage_pool; /* the pool of stage (mem.c) */
    uint8_t            *stage;        /* rendezvous through a staging buffer (mr is the
                                       * staging buffers'): that buffer, else NULL (mem.c) */
    uint64_t            rndv_sreq_id; /* receive of a rendezvous: the sender's request id */
    uint64_t            rndv_ep_id;   /* receive of a rendezvous: where the FIN goes */
    unsigned            reads_left;   /* reads posted and not completed */
    tmx_status_t        rndv_status;
    /* receive of a rendezvous: what is read (rndv_n bytes from rndv_raddr, rndv_rkey, in
     * pieces of rndv_chunk) and how far the posts got (rndv_off, rndv_piece): a read the send
     * queue refused is posted again from there (tmx_proto_rndv_read_post) */
    uint64_t            rndv_raddr;
    uint32_t            rndv_rkey;
    unsigned            rndv_piece;
    size_t              rndv_n;
    size_t              rndv_off;
    size_t              rndv_chunk;
    atomic_uint         fail_epoch;   /* receive: worker->fail_epoch its user was told about */
    uint64_t            imm;          /* send: TMX_PROTO_IMM(its immediate data), or 0 */
} tmx_request_t;

/* Immediate data as the core passes it around: 0 for none, else this flag | the 32 bits. */
#define TMX_PROTO_IMM_FLAG  (1ULL << 32)
#define TMX_PROTO_IMM(_v)   (TMX_PROTO_IMM_FLAG | (uint64_t)(uint32_t)(_v))

/* Payload bytes of the largest unexpected message buffered in the worker's pool rather than
 * by malloc (tmx_proto_message_new): a slot of the eager-RDMA ring's default size. */
#define TMX_MSG_POOL_DATA 2048

enum {
    TMX_MSG_CREDIT_EAGER = 1,
    TMX_MSG_CREDIT_RING  = 2,
};

/* An arrived, unmatched message (also the handle of a claimed message). */
typedef struct tmx_message {
    uint32_t        magic;
    tmx_tag_unexp_t unexp;
    tmx_list_t      claimed_link; /* worker->claimed, while claimed by a probe */
    uint8_t         op;           /* TMX_PROTO_EAGER / _RTS */
    uint8_t         sync;
    uint8_t         credit_owed;  /* credit goes back when this is consumed: an eager
                                   * credit (TMX_MSG_CREDIT_EAGER) or a ring slot (_RING) */
    uint8_t         pooled;       /* from worker->msg_mp, not malloc */
    uint64_t        ep_id;        /* the connection it came on (looked up, never a pointer) */
    size_t          length;       /* the sender's length */
    uint64_t        sreq_id;
    uint64_t        rndv_addr;
    uint32_t        rndv_rkey;
    size_t          mem_size;     /* bytes charged to the unexpected budget */
    uint64_t        imm;          /* TMX_PROTO_IMM(the sender's immediate data), or 0 */
    uint8_t         data[];       /* eager payload */
} tmx_message_t;

/* ---- context.c */
/* Keeps a destroyed object's struct (with its dead magic) reachable for the life of the
 * process, so that calls on a stale handle answer TMX_ERR_INVALID_HANDLE. */
void tmx_core_bury(void *obj);

/* ---- worker.c */
/* The worker's mutex, in TMX_THREAD_MODE_MULTI only (inline: every call of the API takes it). */
static inline void tmx_worker_lock(tmx_worker_t *w)
{
    if (w->thread_mode == TMX_THREAD_MODE_MULTI) {
        pthread_mutex_lock(&w->lock);
    }
}

static inline void tmx_worker_unlock(tmx_worker_t *w)
{
    if (w->thread_mode == TMX_THREAD_MODE_MULTI) {
        pthread_mutex_unlock(&w->lock);
    }
}
unsigned tmx_worker_progress_locked(tmx_worker_t *w);
unsigned tmx_worker_poll_iface(tmx_iface_t *iface);
int tmx_worker_check(tmx_worker_t *w);
void tmx_worker_peer_failed(tmx_worker_t *w, uint64_t uuid, tmx_status_t status);

/* mem.c: the registration of req's rendezvous buffer (buf, len), into req->mr: from a
 * tmx_mem_map range that holds it (req->memh set, a reference taken), a cached one, or, with
 * stage non-NULL, a buffer of the staging pool *stage (made at its first use; req->stage and
 * req->stage_pool set, req->mr the pool's; TMX_RNDV_COPY: the caller copies in or out), or
 * registered for this message (req->memh NULL). stage: &iface->stage_rx for a read's target
 * (access LOCAL_WRITE), &ep->stage_tx for a send's buffer that ep's peer reads (access
 * REMOTE_READ: that pool's key goes to that peer only). Released by tmx_mem_dereg_rndv
 * (iface may be NULL only with a mapping or a staging buffer). tmx_mem_stage_release: an
 * endpoint's pool, at its destroy (freed once its buffers are back). tmx_mem_stage_free: at
 * iface cleanup, every pool. tmx_mem_cleanup: at worker destroy, every mapping. */
typedef struct tmx_mem tmx_mem_t;
typedef struct tmx_stage_pool tmx_stage_pool_t;
tmx_status_t tmx_mem_reg_rndv(tmx_iface_t *iface, tmx_request_t *req, void *buf, size_t len,
                              unsigned access, tmx_stage_pool_t **stage);
void tmx_mem_dereg_rndv(tmx_iface_t *iface, tmx_request_t *req);
void tmx_mem_stage_release(tmx_stage_pool_t **pool_p);
void tmx_mem_stage_free(tmx_iface_t *iface);
void tmx_mem_cleanup(tmx_worker_t *w);

/* What a blocking loop knows of its idle rounds (tmx_worker_idle). */
typedef struct tmx_idle {
    double   since;  /* when the rounds started to find nothing; 0 while they find something */
    unsigned rounds; /* idle rounds so far: the clock is read every 16th only */
} tmx_idle_t;

#define TMX_IDLE_INIT {.since = 0, .rounds = 0}
#define TMX_IDLE_NEAR_MISS 8
#define TMX_IDLE_SPIN_GROWTH_MAX 16
/* Longest sleep of a blocking call between two progress rounds: what a sleeper notices only
 * by polling (a peer's death, a send waiting for room, timeouts) it notices this late. */
#define TMX_IDLE_SLEEP_MAX_MS 100
/* Oversubscribed, a wait tries to sleep after this many turns of every process on its CPU
 * that found nothing (tmx_context_wait_policy), at least TMX_IDLE_YIELDS_MIN yields. */
#define TMX_IDLE_TURNS      4
#define TMX_IDLE_YIELDS_MIN 16

/* Called with the lock held by a blocking loop after each progress round that got events:
 * waits as TMX_WAIT says (spins, yields, or arms and sleeps without the lock) before the next
 * round. deadline: tmx_time_sec() by which to be back, < 0 for none. */
void tmx_worker_idle(tmx_worker_t *w, tmx_idle_t *idle, unsigned events, double deadline);

/* tmx_request_wait's loop (worker.c, where the progress round and the common idle answers are
 * inline): progress rounds until req is done (0), or it was released by the user
 * (TMX_ERR_INVALID_HANDLE), or a peer's failure is pending for it
 * (TMX_ERR_PEER_FAILED_PENDING). Takes the worker lock around each round. */
tmx_status_t tmx_worker_wait_request(tmx_worker_t *w, tmx_request_t *req);

/* ---- ep.c */
tmx_status_t tmx_ep_wireup_rx(tmx_iface_t *iface, const void *msg, size_t len);
void tmx_ep_fail(tmx_ep_t *ep, tmx_status_t status);
void tmx_ep_lost(tmx_ep_t *ep, tmx_status_t status);
void tmx_ep_destroy(tmx_ep_t *ep);
tmx_ep_t *tmx_ep_by_qpn(tmx_worker_t *w, tmx_iface_t *iface, uint32_t qpn);
void tmx_ep_close_all(tmx_worker_t *w);
tmx_status_t tmx_ep_flush_all(tmx_worker_t *w);
void tmx_ep_wireup_progress(tmx_ep_t *ep);
void tmx_ep_peer_disconnected(tmx_ep_t *ep);

/* ---- xrc.c: XRC domains (doc/DESIGN.md "XRC") */
/* The wire-up messages of XRC (ep.c's REQ, REP and NAK are 1, 2, 3). */
#define TMX_WIREUP_XCONN_REQ 4 /* please make a target QP for my initiator (its blob) */
#define TMX_WIREUP_XCONN_REP 5 /* here it is (its blob) */
#define TMX_WIREUP_XTGT      6 /* my initiators to your node use these target QPs */
#define TMX_WIREUP_XTGT_ACK  7 /* noted: send */
/* Largest XRC part of a wire-up message (xrc.c's header and a QP blob). */
#define TMX_WIREUP_XRC_MAX   (64 + TMX_QP_ADDR_MAX)

/* An initiator QP of ours to one node and domain, shared by every endpoint to that node. */
typedef struct tmx_xini {
    tmx_list_t list;          /* iface->xinis */
    uint64_t   node;
    unsigned   dom;
    int        state;         /* TMX_XINI_* */
    tmx_qp_t  *qp;
    uint32_t   tgt_qpn;       /* the target QP it is connected to */
    uint64_t   via_ep;        /* the endpoint whose peer is asked for the target QP */
    double     sent;          /* when that request was last sent */
} tmx_xini_t;

enum { TMX_XINI_IDLE = 0, TMX_XINI_CONNECTING = 1, TMX_XINI_CONNECTED = 2, TMX_XINI_FAILED = 3 };

/* A target QP this worker holds: created for a peer's initiator, or opened by number (the peer
 * said its initiator to our node uses it): our receive side for that peer, watched for its
 * death. */
typedef struct tmx_xtgt {
    tmx_list_t list;          /* iface->xtgts */
    tmx_qp_t  *qp;
    uint32_t   qpn;
    uint64_t   uuid;          /* the worker whose initiator it serves */
    unsigned   dom;
    int        created;
    uint32_t   ini_qpn;       /* created: the initiator's number (a resent request) */
} tmx_xtgt_t;

tmx_status_t tmx_xrc_iface_init(tmx_iface_t *iface);
void tmx_xrc_iface_cleanup(tmx_iface_t *iface);
tmx_srq_t *tmx_xrc_rx_srq(tmx_iface_t *iface, unsigned idx);
tmx_ep_t *tmx_xrc_rx_ep(tmx_iface_t *iface, const tmx_wc_t *wc);
int tmx_xrc_completion_failed(tmx_iface_t *iface, const tmx_wc_t *wc);
void tmx_xrc_ep_init(tmx_ep_t *ep);
void tmx_xrc_ep_release(tmx_ep_t *ep);
void tmx_xrc_wireup_progress(tmx_ep_t *ep);
/* The wire-up's XRC part: what a REQ, REP or XRC message carries after the device address
 * (wireup_len bytes); the handlers of those messages. */
size_t tmx_xrc_wireup_pack(tmx_ep_t *ep, void *buf, size_t len);
tmx_status_t tmx_xrc_on_req(tmx_ep_t *ep, const void *x, size_t len);
tmx_status_t tmx_xrc_on_rep(tmx_ep_t *ep, const void *x, size_t len);
void tmx_xrc_on_msg(tmx_iface_t *iface, uint8_t type, uint64_t src_uuid, uint64_t dst_ep_id,
                    uint32_t src_ud_qpn, const uint8_t *dev_addr, size_t dev_addr_len,
                    const void *x, size_t len);
/* TMX_WORKER_ATTR_XRC (the caller holds the lock). */
void tmx_xrc_query(tmx_worker_t *w, tmx_xrc_attr_t *attr);
/* Posts wr (sg_list, opcode set) to the peer of ep through domain dom. */
tmx_status_t tmx_xrc_post(tmx_ep_t *ep, unsigned dom, tmx_send_wr_t *wr);
/* Whether ep's control message goes through XRC: every message with XRC alone; with TM and
 * XRC only a passive endpoint's (the replies: ACK, FIN, CREDIT, DISC, DISC_ACK). */
static inline int tmx_xrc_ctrl(const tmx_ep_t *ep)
{
    return ep->xrc && (!ep->xrc_tm || ep->passive);
}

/* ---- request.c */
/* Inline: the send and receive calls are its only callers, and a call layer (its register
 * saves) was a tenth of its cost. Forced: gcc's own choice dropped it from tmx_tag_recv_nb
 * when tmx_tag_send_nb grew (25 instructions more per receive on the soft device). */
static inline __attribute__((always_inline)) tmx_request_t *
tmx_request_alloc(tmx_worker_t *w, tmx_req_type_t type, const tmx_request_params_t *params)
{
    tmx_request_t *req = tmx_mpool_get(&w->req_mp);

    if (req == NULL) {
        return NULL;
    }
    /* Every field but exp (set when the receive is posted, read only while it is) by hand:
     * clearing the whole struct was a tenth of the work of receiving an eager message. A new
     * field of tmx_request_t needs its line here. */
    req->magic             = TMX_MAGIC_REQ;
    req->type              = (uint16_t)type;
    req->flags             = 0;
    req->status            = TMX_INPROGRESS;
    req->done              = 0; /* the last reader took the lock since (free, or alloc here) */
    req->worker            = w;
    req->ep                = NULL;
    req->buf               = NULL;
    req->len               = 0;
    req->tag               = 0;
    req->info.tag          = 0;
    req->info.length       = 0;
    req->info.sender       = 0;
    req->info.has_imm      = 0;
    req->info.imm          = 0;
    req->imm               = 0;
    req->cb.send           = NULL; /* cb: a union of two pointers */
    req->user_data         = NULL;
    req->id                = 0;
    req->mr                = NULL;
    req->memh              = NULL;
    req->stage             = NULL;
    req->stage_pool        = NULL;
    req->rndv_sreq_id      = 0;
    req->rndv_ep_id        = 0;
    req->reads_left        = 0;
    req->rndv_status       = TMX_OK;
    req->rndv_n            = 0;
    req->rndv_off          = 0;
    req->tme.state         = TMX_TM_NONE;
    req->tm_held           = NULL;
    req->tm_cancel         = 0;
    atomic_store_explicit(&req->fail_epoch,
                          atomic_load_explicit(&w->fail_epoch, memory_order_relaxed),
                          memory_order_relaxed);
    tmx_list_init(&req->pending_link);
    if (params != NULL) {
        if (params->field_mask == (TMX_REQ_PARAM_CALLBACK | TMX_REQ_PARAM_USER_DATA) ||
            params->field_mask ==
                (TMX_REQ_PARAM_CALLBACK | TMX_REQ_PARAM_USER_DATA | TMX_REQ_PARAM_SOURCE)) {
            /* the common case with parameters (every receive of the libfabric provider,
             * directed or not; the receive call takes the source): one test instead of four
             * (cg_small fi-win 8 B, h-mpi7) */
            memcpy(&req->cb, &params->cb, sizeof(req->cb));
            req->user_data = params->user_data;
            return req;
        }
        if (params->field_mask & TMX_REQ_PARAM_CALLBACK) {
            memcpy(&req->cb, &params->cb, sizeof(req->cb)); /* same layout: two callback pointers */
        }
        if (params->field_mask & TMX_REQ_PARAM_USER_DATA) {
            req->user_data = params->user_data;
        }
        if ((params->field_mask & TMX_REQ_PARAM_FLAGS) && (params->flags & TMX_SEND_FLAG_SYNC)) {
            req->flags |= TMX_REQ_FLAG_SYNC;
        }
        if (type == TMX_REQ_SEND && (params->field_mask & TMX_REQ_PARAM_IMM)) {
            req->imm = TMX_PROTO_IMM(params->imm);
        }
    }
    return req;
}

void tmx_request_complete(tmx_request_t *req, tmx_status_t status);
void tmx_request_release(tmx_request_t *req);

/* Whether the request completed; no lock needed (see tmx_request_complete). */
static inline int tmx_request_done(const tmx_request_t *req)
{
    return __atomic_load_n(&req->done, __ATOMIC_ACQUIRE);
}

/* ULFM's "failure pending": a receive still waiting for a match when a peer failed cannot
 * know whether that peer was its sender (matching is by tag), so test and wait say so once per
 * failure seen, and the receive stays posted. One that has matched is past that question, and
 * so is a directed one: it fails when its own source does (tmx_worker_peer_failed). */
int tmx_request_failure_pending_locked(tmx_request_t *req, unsigned epoch);

/* inline: the common answer (no failure since the receive was posted) costs two loads */
static inline int tmx_request_failure_pending(tmx_request_t *req)
{
    tmx_worker_t *w = req->worker;
    unsigned      epoch;

    if (req->type != TMX_REQ_RECV) {
        return 0;
    }
    epoch = atomic_load_explicit(&w->fail_epoch, memory_order_acquire);
    if (epoch == atomic_load_explicit(&req->fail_epoch, memory_order_relaxed)) {
        return 0;
    }
    return tmx_request_failure_pending_locked(req, epoch);
}
tmx_status_t tmx_request_params_check(const tmx_request_params_t *params, int is_send);
/* tmx_request_params_check, with the common answers inline: no params, or a callback (given)
 * and user data only. */
static inline tmx_status_t tmx_request_params_ok(const tmx_request_params_t *params, int is_send)
{
    if (params == NULL ||
        (params->field_mask == (TMX_REQ_PARAM_CALLBACK | TMX_REQ_PARAM_USER_DATA) &&
         params->cb.send != NULL) || /* cb: a union of two pointers */
        (is_send && params->field_mask == TMX_REQ_PARAM_FLAGS &&
         params->flags == TMX_SEND_FLAG_TRY) || /* a send done in place or not at all */
        (is_send && params->field_mask == (TMX_REQ_PARAM_FLAGS | TMX_REQ_PARAM_IMM) &&
         params->flags == TMX_SEND_FLAG_TRY) || /* the same with immediate data */
        (!is_send &&
         params->field_mask ==
             (TMX_REQ_PARAM_CALLBACK | TMX_REQ_PARAM_USER_DATA | TMX_REQ_PARAM_SOURCE) &&
         params->cb.recv != NULL)) { /* a directed receive: the receive call checks the source */
        return TMX_OK;
    }
    return tmx_request_params_check(params, is_send);
}

#endif /* TMX_CORE_H */
