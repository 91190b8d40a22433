/*
 * tmx: tagged, MPI-style messaging between processes.
 *
 * Objects are opaque handles: a context (configuration, devices) owns workers (progress
 * engines); a worker owns endpoints (connections to remote workers, made from their address
 * blobs) and the posted/unexpected receive queues. Every params/attr struct starts with a
 * field_mask saying which fields the caller set.
 *
 * Matching: a message with tag T matches a receive (tag R, mask M) when (T & M) == (R & M),
 * and, for a receive that names a source (TMX_REQ_PARAM_SOURCE, API 1.3), when it was sent by
 * the worker that endpoint connects to. Messages from one endpoint to one worker match in the
 * order they were sent; receives match in the order they were posted, wildcards included.
 */
#ifndef TMX_TMX_H
#define TMX_TMX_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define TMX_API __attribute__((visibility("default")))
#else
#define TMX_API
#endif

#define TMX_API_MAJOR   1
#define TMX_API_MINOR   6
#define TMX_API_VERSION ((TMX_API_MAJOR << 16) | TMX_API_MINOR)

/** Status codes: TMX_OK, TMX_INPROGRESS, or a negative error. */
typedef enum {
    TMX_OK                 = 0,
    TMX_INPROGRESS         = 1,
    TMX_ERR_INVALID_PARAM  = -1,  /**< a NULL handle, bad flag, bad length or mask */
    TMX_ERR_NO_MEMORY      = -2,
    TMX_ERR_NO_RESOURCE    = -3,  /**< a queue or table is full right now; retry later */
    TMX_ERR_UNSUPPORTED    = -4,
    TMX_ERR_TRUNCATED      = -5,  /**< message longer than the receive buffer */
    TMX_ERR_CANCELED       = -6,
    TMX_ERR_NO_DEVICE      = -7,  /**< no usable device/provider */
    TMX_ERR_UNREACHABLE    = -8,  /**< no device can reach that peer */
    TMX_ERR_VERSION        = -9,  /**< header and library API versions differ */
    TMX_ERR_IO             = -10,
    TMX_ERR_TIMED_OUT      = -11,
    TMX_ERR_BUSY           = -12, /**< e.g. cancel of a receive that already matched */
    TMX_ERR_PEER_FAILED    = -13, /**< the remote process died or reset the connection */
    TMX_ERR_INVALID_ADDR   = -14, /**< a worker address blob that is not one */
    TMX_ERR_NO_MESSAGE     = -15, /**< probe found nothing */
    TMX_ERR_INVALID_HANDLE = -16, /**< a handle that was destroyed or never created */
    TMX_ERR_REMOTE_ACCESS  = -17, /**< remote key or bounds check failed */
    TMX_ERR_INTERNAL       = -18,
    /** A receive still waits for a match, and a peer failed since it was posted (or since it
     *  last said so): told once per receive; the receive stays posted (MPI's
     *  MPI_ERR_PROC_FAILED_PENDING). Cancel it, or keep waiting. */
    TMX_ERR_PEER_FAILED_PENDING = -19,
} tmx_status_t;

/** A static, lower-case description of a status. Never NULL. */
TMX_API const char *tmx_status_string(tmx_status_t status);

/** "major.minor.patch" of the library that is linked. */
TMX_API const char *tmx_version_string(void);

typedef uint64_t tmx_tag_t;
typedef struct tmx_context *tmx_context_h;
typedef struct tmx_worker *tmx_worker_h;
typedef struct tmx_ep *tmx_ep_h;
typedef struct tmx_request *tmx_request_h;
typedef struct tmx_message *tmx_message_h;
typedef struct tmx_mem *tmx_mem_h;

/* ---------------------------------------------------------------- context */

enum tmx_context_params_field {
    TMX_CONTEXT_PARAM_PROVIDERS = 1u << 0, /**< providers */
};

typedef struct tmx_context_params {
    uint64_t    field_mask;
    /** Comma-separated provider names to use ("soft", "verbs"); overrides
     *  TMX_PROVIDERS. */
    const char *providers;
} tmx_context_params_t;

/** Use tmx_context_create(); it passes the header's API version to be checked. */
TMX_API tmx_status_t tmx_context_create_version(unsigned api_version,
                                                const tmx_context_params_t *params,
                                                tmx_context_h *context_p);
#define tmx_context_create(_params, _context_p)                                                   \
    tmx_context_create_version(TMX_API_VERSION, (_params), (_context_p))

/** Destroys the context. Its workers must be destroyed first (TMX_ERR_BUSY otherwise). */
TMX_API tmx_status_t tmx_context_destroy(tmx_context_h context);

/** Prints providers (built and usable), devices and their capabilities; TMX_ERR_NO_DEVICE
 *  (after printing) when no selected provider has a usable device. */
TMX_API tmx_status_t tmx_context_print_info(tmx_context_h context, FILE *stream);

/** Prints every TMX_* configuration variable with its value, default and description. */
enum { TMX_CONFIG_PRINT_DOC = 1u << 0 };
TMX_API void tmx_config_print(FILE *stream, unsigned flags);

/* ---------------------------------------------------------------- worker */

typedef enum {
    TMX_THREAD_MODE_SINGLE     = 0, /**< only one thread ever calls into the worker */
    TMX_THREAD_MODE_SERIALIZED = 1, /**< many threads, never at once (caller serializes) */
    TMX_THREAD_MODE_MULTI      = 2, /**< many threads at once; the worker takes a lock */
} tmx_thread_mode_t;

/**
 * Called from the worker's progress once for each remote worker found failed (its process
 * died, or a connection to it broke or never came up), not for one that closed in order.
 * ep: the caller's endpoint to that worker, or NULL when there is none (only the peer had
 * connected to us); peer_id: that worker's id (TMX_WORKER_ATTR_ID on its side); status:
 * TMX_ERR_PEER_FAILED, or TMX_ERR_UNREACHABLE when the connection never came up.
 */
typedef void (*tmx_err_handler_cb_t)(void *arg, tmx_ep_h ep, uint64_t peer_id,
                                     tmx_status_t status);

enum tmx_worker_params_field {
    TMX_WORKER_PARAM_THREAD_MODE = 1u << 0,
    TMX_WORKER_PARAM_ERR_HANDLER = 1u << 1, /**< err_handler, err_handler_arg */
};

typedef struct tmx_worker_params {
    uint64_t             field_mask;
    tmx_thread_mode_t    thread_mode;     /**< default TMX_THREAD_MODE_SINGLE */
    tmx_err_handler_cb_t err_handler;     /**< default none */
    void                *err_handler_arg; /**< first argument of err_handler */
} tmx_worker_params_t;

TMX_API tmx_status_t tmx_worker_create(tmx_context_h context, const tmx_worker_params_t *params,
                                       tmx_worker_h *worker_p);
/** Closes (forcibly) the endpoints still open and fails their outstanding requests. It waits
 *  for the peers to acknowledge the disconnect, all at once: TMX_PEER_TIMEOUT seconds at most. */
TMX_API tmx_status_t tmx_worker_destroy(tmx_worker_h worker);

/**
 * (API 1.6) Progresses until every send of every endpoint of the worker has completed: the
 * flush of tmx_ep_close's TMX_EP_CLOSE_FLUSH, for all endpoints at once. An endpoint whose sends
 * make no progress for TMX_PEER_TIMEOUT seconds has the rest failed with TMX_ERR_TIMED_OUT; the
 * endpoints' timeouts run at the same time, so any number of peers that do not progress cost
 * one timeout, not one each. The endpoints stay open. To close many endpoints with a flush:
 * tmx_worker_flush, then tmx_worker_destroy (both bounded by one timeout, whatever the count).
 * @return TMX_OK; TMX_ERR_TIMED_OUT when some sends timed out as above; else
 *         TMX_ERR_PEER_FAILED when the peer of an endpoint failed (as tmx_ep_close says);
 *         TMX_ERR_INVALID_PARAM, TMX_ERR_INVALID_HANDLE, TMX_ERR_NO_MEMORY.
 */
TMX_API tmx_status_t tmx_worker_flush(tmx_worker_h worker);

/** The worker's address blob; give it to peers for tmx_ep_create. Free with
 *  tmx_worker_release_address. */
TMX_API tmx_status_t tmx_worker_get_address(tmx_worker_h worker, void **address_p,
                                            size_t *length_p);
TMX_API void tmx_worker_release_address(tmx_worker_h worker, void *address);

/** The worker's address in a compact form (API 1.3), for channels that carry a small
 *  fixed-size name (MPI's modex through libfabric, FI_NAME_MAX = 64 bytes): 57 bytes for a
 *  soft-device worker with memfd segments (76 with named ones). tmx_ep_create takes either
 *  form. Free it with tmx_worker_release_address. */
TMX_API tmx_status_t tmx_worker_get_address_compact(tmx_worker_h worker, void **address_p,
                                                    size_t *length_p);

/** Makes progress on every device of the worker; returns the number of events handled
 *  (0 for an invalid handle). Completion callbacks run from inside this call. */
TMX_API unsigned tmx_worker_progress(tmx_worker_h worker);

/** How the worker talks to a class of peers. */
typedef enum {
    TMX_PEER_SELF  = 0, /**< the worker itself */
    TMX_PEER_LOCAL = 1, /**< another process of this host */
    TMX_PEER_NET   = 2, /**< another host */
    TMX_PEER_CLASS_LAST
} tmx_peer_class_t;

typedef struct tmx_peer_class_attr {
    int    available;       /**< 0: no device reaches this class */
    char   provider[16];    /**< "soft", "verbs" */
    char   device[32];      /**< device name as tmx_info lists it */
    char   protocol[32];    /**< e.g. "eager+rndv-read" */
    size_t eager_max;       /**< largest message sent eagerly (copied) */
    size_t rndv_threshold;  /**< smallest message sent by rendezvous */
    size_t max_msg;         /**< largest message */
} tmx_peer_class_attr_t;

/** How blocking calls wait when a progress round finds nothing (TMX_WAIT; tmx(7)). */
typedef enum {
    TMX_WAIT_AUTO  = 0, /**< poll for TMX_WAIT_SPIN microseconds (yielding between polls when
                         *   oversubscribed), then sleep until something arrives */
    TMX_WAIT_SPIN  = 1, /**< poll without pause */
    TMX_WAIT_YIELD = 2, /**< poll, yielding the processor between polls */
    TMX_WAIT_SLEEP = 3, /**< sleep as soon as a poll finds nothing */
} tmx_wait_mode_t;

enum tmx_worker_attr_field {
    TMX_WORKER_ATTR_THREAD_MODE = 1u << 0,
    TMX_WORKER_ATTR_PEERS       = 1u << 1,
    TMX_WORKER_ATTR_LIMITS      = 1u << 2,
    TMX_WORKER_ATTR_ID          = 1u << 3,
    TMX_WORKER_ATTR_WAIT        = 1u << 4, /**< wait_mode .. can_sleep (API 1.2) */
    TMX_WORKER_ATTR_TM          = 1u << 5, /**< tm (API 1.3) */
    TMX_WORKER_ATTR_XRC         = 1u << 6, /**< xrc: XRC domains and connection counts */
    TMX_WORKER_ATTR_RING        = 1u << 7, /**< ring: eager-RDMA rings */
};

/** Tag-matching offload of a worker (TMX_WORKER_ATTR_TM, API 1.3): the device whose tag list
 *  gets receives, and what happened to them since the worker was created. */
typedef struct tmx_tm_attr {
    int      enabled;      /**< receives are offered to a device's tag list */
    char     device[32];   /**< that device ("" when not enabled) */
    unsigned max_num_tags; /**< entries of the device's tag list */
    unsigned max_ops;      /**< list operations it takes outstanding */
    int      rndv_offload; /**< the device reads matched rendezvous data itself */
    size_t   thresh;       /**< smallest receive offered (TMX_TM_THRESH) */
    uint64_t offered;      /**< receives given to the tag list */
    uint64_t matched;      /**< receives the device matched */
    uint64_t unexpected;   /**< tagged messages the device delivered unexpected */
    uint64_t syncs;        /**< SYNC operations posted */
    uint64_t sync_reqs;    /**< times the device asked for a SYNC */
    uint64_t fallbacks;    /**< receives kept in software: list full, registration, refused op */
    uint64_t forced;       /**< offered receives taken back for a message software matched */
    uint64_t rndv;         /**< rendezvous messages whose data the device read */
} tmx_tm_attr_t;

/** State of a queue pair, as verbs names them (TMX_WORKER_ATTR_XRC). */
typedef enum {
    TMX_XRC_QP_RESET = 0,
    TMX_XRC_QP_INIT  = 1,
    TMX_XRC_QP_RTR   = 2,
    TMX_XRC_QP_RTS   = 3,
    TMX_XRC_QP_ERR   = 4,
} tmx_xrc_qp_state_t;

/** One XRC receive QP of a worker (a target QP it holds): what ibv_query_xrc_rcv_qp reported.
 *  Messages of the peer whose initiator it serves arrive through it into our SRQ of its
 *  domain. */
typedef struct tmx_xrc_rcv_qp_attr {
    uint32_t              qp_num;  /**< the target QP's number (unique on the node) */
    tmx_xrc_qp_state_t    state;   /**< RTR while it serves; ERR once its peer died */
    unsigned              domain;  /**< the XRC domain it belongs to (0 .. domains - 1) */
    uint32_t              srq_num; /**< our XRC SRQ in that domain */
    uint64_t              peer_id; /**< the worker whose initiator it serves */
    int                   created; /**< 1: this worker created it; 0: opened it by number */
} tmx_xrc_rcv_qp_attr_t;

/** XRC domains of a worker, and the connection state its devices hold
 *  (TMX_WORKER_ATTR_XRC). The counts are valid whether or not XRC is on, so that RC and XRC
 *  can be compared: connections grow with peer processes under RC (one RC queue pair per
 *  endpoint), with peer nodes under XRC (an initiator per node and domain). */
typedef struct tmx_xrc_attr {
    int      enabled;       /**< endpoints connect through XRC domains (TMX_XRC) */
    char     device[32];    /**< the device ("" when not enabled) */
    unsigned domains;       /**< TMX_XRC_DOMAINS in effect */
    uint32_t srq_num[4];    /**< our XRC SRQ in each domain */
    uint64_t node_id;       /**< our node (a hash of TMX_NODE_ID, or of the host) */
    unsigned rc_qps;        /**< RC queue pairs */
    unsigned ini_qps;       /**< XRC initiators: one per peer node and domain */
    unsigned tgt_qps;       /**< XRC target QPs this worker created (one per peer initiator) */
    unsigned tgt_opened;    /**< handles to target QPs other processes of the node created */
    unsigned srqs;          /**< shared receive queues, XRC ones included */
    unsigned connections;   /**< queue pairs that carry our sends: rc_qps + ini_qps */
    unsigned rcv_contexts;  /**< receive state kept per peer: rc_qps + tgt_qps + srqs */
    uint64_t rndv_striped;  /**< rendezvous messages read in stripes over several domains */
    /** in: an array for the receive QPs (NULL: none wanted) and its length; out: how many the
     *  worker has (the first max_rcv_qps of them are filled) */
    tmx_xrc_rcv_qp_attr_t *rcv_qps;
    unsigned               max_rcv_qps;
    unsigned               num_rcv_qps;
} tmx_xrc_attr_t;

/** Eager-RDMA rings of a worker (TMX_WORKER_ATTR_RING; tmx(7), "Eager-RDMA ring"): small
 *  messages written into memory the receiver polls. The mode of each connection is chosen by
 *  its receiving side from the device's data-in-order answer. */
typedef struct tmx_ring_attr {
    int      enabled;        /**< TMX_RING is not no and the device can lend rings */
    unsigned slots;          /**< slots of a ring (TMX_RING_SLOTS) */
    size_t   slot_size;      /**< payload bytes a slot carries (TMX_RING_SLOT_SIZE) */
    unsigned max_rings;      /**< rings this worker lends at most (TMX_RING_PEERS) */
    unsigned eps_whole;      /**< connections into this worker whose ring is polled on a flag */
    unsigned eps_aligned128; /**< ... polled on a stamp per 128-byte block */
    unsigned eps_imm;        /**< ... written with immediate data, seen in the CQ */
    unsigned eps_none;       /**< ... that get no ring (TMX_RING=no, tag-matching offload) */
    unsigned rx_rings;       /**< rings lent to senders now */
    unsigned tx_rings;       /**< rings receivers lent us now */
    uint64_t sent;           /**< messages sent through rings */
    uint64_t received;       /**< messages received through rings */
    uint64_t full;           /**< sends that went by the queue: the ring was full */
    uint64_t asleep;         /**< sends that went by the queue: the receiver slept */
    uint64_t wakes;          /**< notices sent to a receiver that fell asleep under a write */
} tmx_ring_attr_t;

typedef struct tmx_worker_attr {
    uint64_t              field_mask; /**< which fields the caller asks for */
    tmx_thread_mode_t     thread_mode;
    tmx_peer_class_attr_t peer[TMX_PEER_CLASS_LAST];
    size_t                unexp_budget;  /**< bytes of unexpected eager data buffered */
    unsigned              eager_credits; /**< eager messages in flight per endpoint */
    uint64_t              id;            /**< the peer_id an error handler of a peer gets */
    tmx_wait_mode_t       wait_mode;     /**< TMX_WAIT in effect */
    unsigned              wait_spin_us;  /**< TMX_WAIT_SPIN */
    int                   oversubscribed; /**< more processes than CPUs: idle polls yield */
    int                   local_procs;   /**< processes sharing our CPUs (TMX_LOCAL_SIZE), -1 */
    int                   cpus;          /**< CPUs of the process's affinity mask */
    int                   can_sleep;     /**< every device can wake a sleeping worker */
    tmx_tm_attr_t         tm;            /**< tag-matching offload (API 1.3) */
    tmx_xrc_attr_t        xrc;           /**< XRC domains and connection counts */
    tmx_ring_attr_t       ring;          /**< eager-RDMA rings (TMX_WORKER_ATTR_RING) */
} tmx_worker_attr_t;

TMX_API tmx_status_t tmx_worker_query(tmx_worker_h worker, tmx_worker_attr_t *attr);

/**
 * A file descriptor for poll(2), select(2) or epoll(7): it polls readable (POLLIN) after
 * tmx_worker_arm returned TMX_OK and then something arrived for the worker. It belongs to the
 * worker: do not read, write or close it. It may also poll readable with nothing new (a
 * spurious wakeup, e.g. a stray datagram on the soft device's wake socket): progress and arm
 * again. A peer's death does not make it readable: wait with a timeout to learn of failures.
 * @return TMX_OK with *fd_p set, or TMX_ERR_UNSUPPORTED when a device of the worker cannot
 *         wake a sleeper (then poll with tmx_worker_progress).
 */
TMX_API tmx_status_t tmx_worker_get_efd(tmx_worker_h worker, int *fd_p);

/**
 * Arms the worker's fd: consumes the wakeups it holds, then asks the devices to signal at the
 * next arrival. Use: progress until tmx_worker_progress returns 0, arm, and sleep on the fd
 * only when arm said TMX_OK.
 * @return TMX_OK: armed; TMX_ERR_BUSY: events are pending (something arrived, or a send waits
 *         for room), call tmx_worker_progress and arm again; TMX_ERR_UNSUPPORTED as for
 *         tmx_worker_get_efd.
 */
TMX_API tmx_status_t tmx_worker_arm(tmx_worker_h worker);

/**
 * Arms the worker and sleeps until something arrives or timeout_ms milliseconds passed (-1: no
 * limit). Does not progress: call tmx_worker_progress after it returns.
 * @return TMX_OK when woken (possibly spuriously) or when events were pending already (no
 *         sleep); TMX_ERR_TIMED_OUT; for a worker whose devices cannot wake it, it yields the
 *         processor once and returns TMX_OK.
 */
TMX_API tmx_status_t tmx_worker_wait(tmx_worker_h worker, int timeout_ms);

/* ---------------------------------------------------------------- endpoint */

enum tmx_ep_params_field {
    TMX_EP_PARAM_ADDRESS = 1u << 0, /**< address, address_length (required) */
};

typedef struct tmx_ep_params {
    uint64_t    field_mask;
    const void *address; /**< a blob from tmx_worker_get_address, possibly another process's */
    size_t      address_length;
} tmx_ep_params_t;

/** Creates an endpoint. Connection completes in the background; sends posted before then
 *  are queued. */
TMX_API tmx_status_t tmx_ep_create(tmx_worker_h worker, const tmx_ep_params_t *params,
                                   tmx_ep_h *ep_p);

typedef enum {
    /** wait until outstanding sends completed; TMX_PEER_TIMEOUT seconds in which none of them
     *  progresses fail the rest with TMX_ERR_TIMED_OUT */
    TMX_EP_CLOSE_FLUSH = 0,
    TMX_EP_CLOSE_FORCE = 1, /**< fail outstanding sends with TMX_ERR_CANCELED */
} tmx_ep_close_mode_t;

/** Closes the endpoint, progressing the worker as needed. The handle is invalid after. */
TMX_API tmx_status_t tmx_ep_close(tmx_ep_h ep, tmx_ep_close_mode_t mode);

/* ---------------------------------------------------------------- requests */

/** What a completed receive (or probe) reports. */
typedef struct tmx_tag_recv_info {
    tmx_tag_t tag;    /**< the sender's tag */
    size_t    length; /**< the sender's length; may exceed the buffer (TMX_ERR_TRUNCATED) */
    /** The sending worker's id (API 1.3): its TMX_WORKER_ATTR_ID, the peer_id an error handler
     *  reports for it; never 0 for a message. A directed receive that failed with
     *  TMX_ERR_PEER_FAILED before a match reports its source's id. */
    uint64_t  sender;
    /** has_imm (API 1.3): 1 when the sender gave immediate data (TMX_REQ_PARAM_IMM), then in
     *  imm; 0 (and imm 0) otherwise. */
    int       has_imm;
    uint32_t  imm;
} tmx_tag_recv_info_t;

typedef void (*tmx_send_cb_t)(tmx_request_h request, tmx_status_t status, void *user_data);
typedef void (*tmx_recv_cb_t)(tmx_request_h request, tmx_status_t status,
                              const tmx_tag_recv_info_t *info, void *user_data);

enum tmx_request_params_field {
    TMX_REQ_PARAM_CALLBACK  = 1u << 0, /**< cb.send or cb.recv */
    TMX_REQ_PARAM_USER_DATA = 1u << 1,
    TMX_REQ_PARAM_FLAGS     = 1u << 2,
    /** source (API 1.3): a receive that takes only messages of the worker source connects
     *  to (a directed receive); receives only (tmx_tag_recv_nb). */
    TMX_REQ_PARAM_SOURCE    = 1u << 3,
    /** imm (API 1.3): 32 bits of immediate data a send carries to the receive's info
     *  (has_imm, imm); sends only (tmx_tag_send_nb), standard and synchronous. */
    TMX_REQ_PARAM_IMM       = 1u << 4,
};

enum tmx_request_flags {
    /** Send completes only after the receiver matched it (MPI_Ssend). */
    TMX_SEND_FLAG_SYNC = 1u << 0,
    /** (API 1.5) Complete in place or not at all: tmx_tag_send_nb returns TMX_OK (sent, the
     *  buffer is the caller's again) or TMX_ERR_NO_RESOURCE (nothing was sent or queued, no
     *  request, the buffer was not kept; e.g. no eager credit, sends queued before it, or
     *  longer than the eager limit). For callers that must not lend their buffer, such as
     *  libfabric's fi_inject: they try, and copy only when refused. Not with
     *  TMX_SEND_FLAG_SYNC (TMX_ERR_INVALID_PARAM). */
    TMX_SEND_FLAG_TRY = 1u << 1,
};

typedef struct tmx_request_params {
    uint64_t field_mask;
    unsigned flags;
    union {
        tmx_send_cb_t send;
        tmx_recv_cb_t recv;
    } cb;
    void *user_data;
    /** TMX_REQ_PARAM_SOURCE: an endpoint of this worker (not closed). The receive matches
     *  only messages sent by the remote worker it connects to, whichever connection they
     *  arrive on (that worker's own endpoint to us included). */
    tmx_ep_h source;
    /** TMX_REQ_PARAM_IMM: the immediate data (API 1.3). */
    uint32_t imm;
} tmx_request_params_t;

/**
 * Registers [addr, addr + len) with every device of the worker, once (API 1.4). Rendezvous
 * sends and receives of this worker whose whole buffer lies in one such range use this
 * registration instead of registering and deregistering their buffer per message (the
 * registration cache of tmx: it caches nothing else). The memory must stay mapped (not
 * munmap'ed, not given back to the system by free) until tmx_mem_unmap: a registration pins
 * the pages it saw, and memory mapped again at the same address would be sent stale.
 * @return TMX_OK with *memh_p set; TMX_ERR_INVALID_PARAM (NULL, len 0, a range that wraps);
 *         TMX_ERR_INVALID_HANDLE; a device's refusal (TMX_ERR_NO_RESOURCE, ...).
 */
TMX_API tmx_status_t tmx_mem_map(tmx_worker_h worker, void *addr, size_t len, tmx_mem_h *memh_p);

/**
 * Releases a registration of tmx_mem_map (API 1.4); messages in flight that use it keep it
 * until they complete. tmx_worker_destroy releases those still mapped.
 * @return TMX_OK; TMX_ERR_INVALID_PARAM (NULL); TMX_ERR_INVALID_HANDLE (already released).
 */
TMX_API tmx_status_t tmx_mem_unmap(tmx_mem_h memh);

/**
 * Sends len bytes of buf with tag to the endpoint's worker.
 * @return TMX_OK when the send completed in place (buf reusable, *request_p set to NULL, no
 *         callback); TMX_INPROGRESS with *request_p a request to test/wait/free (the buffer
 *         belongs to tmx until it completes); a negative status on error (*request_p untouched).
 */
TMX_API tmx_status_t tmx_tag_send_nb(tmx_ep_h ep, const void *buf, size_t len, tmx_tag_t tag,
                                     const tmx_request_params_t *params,
                                     tmx_request_h *request_p);

/**
 * Posts a receive for a message with (msg_tag & mask) == (tag & mask).
 * @return TMX_INPROGRESS with *request_p set (it may already be complete), or a negative
 *         status. Completion statuses: TMX_OK, TMX_ERR_TRUNCATED (the first len bytes were
 *         delivered, info.length is the real length), TMX_ERR_CANCELED, TMX_ERR_PEER_FAILED
 *         (the sender died before its data came). While it waits for a match, test and wait
 *         return TMX_ERR_PEER_FAILED_PENDING once after a peer failed (the receive stays
 *         posted). A directed receive (TMX_REQ_PARAM_SOURCE) is not told of other peers'
 *         failures: it completes with TMX_ERR_PEER_FAILED when its source fails before a
 *         match (at once if it failed before, and no message of it is queued).
 *         TMX_ERR_INVALID_HANDLE for a closed source, TMX_ERR_INVALID_PARAM for a NULL one
 *         or one of another worker.
 */
TMX_API tmx_status_t tmx_tag_recv_nb(tmx_worker_h worker, void *buf, size_t len, tmx_tag_t tag,
                                     tmx_tag_t mask, const tmx_request_params_t *params,
                                     tmx_request_h *request_p);

typedef enum {
    TMX_PROBE_PEEK    = 0, /**< report; the message stays queued */
    TMX_PROBE_CLAIM   = 1, /**< remove into *message_p, to receive with tmx_tag_msg_recv_nb */
    TMX_PROBE_DISCARD = 2, /**< remove and drop the data (the sender still completes) */
} tmx_probe_mode_t;

/**
 * Looks for an arrived, unmatched message. Does not progress the worker.
 * @return TMX_OK (info filled; with CLAIM, *message_p set) or TMX_ERR_NO_MESSAGE.
 */
TMX_API tmx_status_t tmx_tag_probe(tmx_worker_h worker, tmx_tag_t tag, tmx_tag_t mask,
                                   tmx_probe_mode_t mode, tmx_tag_recv_info_t *info,
                                   tmx_message_h *message_p);

/**
 * tmx_tag_probe for messages of one sender (API 1.3): source NULL is any sender (then it is
 * tmx_tag_probe); else only messages sent by the worker that endpoint of this worker connects
 * to, the oldest matching one first. TMX_ERR_INVALID_HANDLE for a closed source,
 * TMX_ERR_INVALID_PARAM for one of another worker.
 */
TMX_API tmx_status_t tmx_tag_probe_ex(tmx_worker_h worker, tmx_tag_t tag, tmx_tag_t mask,
                                      tmx_ep_h source, tmx_probe_mode_t mode,
                                      tmx_tag_recv_info_t *info, tmx_message_h *message_p);

/** Receives a message claimed by tmx_tag_probe; same returns as tmx_tag_recv_nb
 *  (TMX_REQ_PARAM_SOURCE is refused with TMX_ERR_INVALID_PARAM: the message is chosen). */
TMX_API tmx_status_t tmx_tag_msg_recv_nb(tmx_worker_h worker, void *buf, size_t len,
                                         tmx_message_h message, const tmx_request_params_t *params,
                                         tmx_request_h *request_p);

/** TMX_INPROGRESS, or the final status, or (a receive waiting for a match after a peer
 *  failed) TMX_ERR_PEER_FAILED_PENDING once. Does not progress. info may be NULL. */
TMX_API tmx_status_t tmx_request_test(tmx_request_h request, tmx_tag_recv_info_t *info);

/** Progresses the request's worker until the request completes; returns its status, or
 *  TMX_ERR_PEER_FAILED_PENDING (once) for a receive still waiting when a peer failed. */
TMX_API tmx_status_t tmx_request_wait(tmx_request_h request, tmx_tag_recv_info_t *info);

/** Cancels a receive that has not matched yet: it completes with TMX_ERR_CANCELED.
 *  TMX_ERR_BUSY if it matched already; TMX_ERR_UNSUPPORTED for sends. */
TMX_API tmx_status_t tmx_request_cancel(tmx_request_h request);

/** Releases the request; if it is still in progress it is released when it completes (the
 *  callback still runs). (API 1.5) Until its callback has run, a receive freed in progress may
 *  still be canceled with tmx_request_cancel: a caller that completes everything in callbacks
 *  frees each request right after posting it and keeps the handle only for cancel. */
TMX_API void tmx_request_free(tmx_request_h request);

/* ---------------------------------------------------------------- blocking helpers */

TMX_API tmx_status_t tmx_tag_send(tmx_ep_h ep, const void *buf, size_t len, tmx_tag_t tag);
TMX_API tmx_status_t tmx_tag_send_sync(tmx_ep_h ep, const void *buf, size_t len, tmx_tag_t tag);
TMX_API tmx_status_t tmx_tag_recv(tmx_worker_h worker, void *buf, size_t len, tmx_tag_t tag,
                                  tmx_tag_t mask, tmx_tag_recv_info_t *info);

#ifdef __cplusplus
}
#endif

#endif /* TMX_TMX_H */
