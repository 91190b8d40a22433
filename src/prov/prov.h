/*
 * The device provider contract.
 *
 * Verbs-shaped, so that the rdma-core provider is a thin mapping and the soft device
 * reproduces the hardware. The layers above (tag, proto, core) see devices only through this
 * file. Every provider has one const ops table with every slot set; slots a provider does not
 * implement point at tmx_prov_unsupported_*() stubs (prov.c), so the core never tests for
 * NULL. Capabilities are read from tmx_dev_attr_t, never assumed.
 *
 * Objects: each provider object embeds the base struct below as its first member ("super")
 * and the provider casts back. Base structs are filled by the provider on create.
 *
 * Threading: a device and everything made from it is used by one thread at a time (the
 * worker serializes); providers take no locks of their own.
 */
#ifndef TMX_PROV_H
#define TMX_PROV_H

#include <stddef.h>
#include <stdint.h>
#include <tmx/tmx.h>

#include "util/config.h"

typedef struct tmx_prov_ops tmx_prov_ops_t;
typedef struct tmx_prov tmx_prov_t;

/* ---------------------------------------------------------------- capabilities */

enum tmx_dev_cap {
    TMX_DEV_CAP_RC          = 1u << 0,  /* reliable connected QPs */
    TMX_DEV_CAP_UD          = 1u << 1,  /* datagram QPs (used for wire-up) */
    TMX_DEV_CAP_SRQ         = 1u << 2,
    TMX_DEV_CAP_RMA         = 1u << 3,  /* RDMA read/write */
    TMX_DEV_CAP_TM          = 1u << 4,  /* tag-matching SRQ (tm caps valid) */
    TMX_DEV_CAP_TM_RNDV     = 1u << 5,  /* rendezvous offload in the TM SRQ */
    TMX_DEV_CAP_XRC         = 1u << 6,
    TMX_DEV_CAP_OOO         = 1u << 7,  /* out-of-order data placement can be enabled */
    TMX_DEV_CAP_FULL_MATCH  = 1u << 8,  /* provider matches tags itself (libfabric) */
    TMX_DEV_CAP_LOCAL_ONLY  = 1u << 9,  /* reaches only processes of this host */
    /* The device has no engine of its own: data moves only inside the caller's calls (post,
     * poll). Such a device accepts an unsignaled SEND only when it can put the whole of it on
     * the wire at once (TMX_ERR_NO_RESOURCE otherwise, nothing posted), so that nothing the
     * caller may treat as done waits for its progress; a SEND of more than max_inline bytes
     * must be signaled, and its completion is what says it left. The same holds for an
     * unsignaled RDMA_WRITE_WITH_IMM into memory from mem_alloc (its notice is a message). */
    TMX_DEV_CAP_MANUAL_PROGRESS = 1u << 10,
    /* Memory from mem_alloc is written by the peer's CPU itself: an unsignaled RDMA WRITE (or
     * the data of a WRITE_WITH_IMM) whose target lies wholly in memory the remote side got from
     * mem_alloc, posted on a QP whose send queue is empty and that has no out-of-order
     * placement (TMX_QP_ATTR_OOO), is placed (visible to the target's
     * CPU, in the order its data-in-order answer promises) by the time post_send returns
     * TMX_OK. Without it a write is placed some time before its completion. */
    TMX_DEV_CAP_MEM_DIRECT = 1u << 11,
    /* With MEM_DIRECT: the peers that poll memory we write order our stores with mem_barrier.
     * Between a direct write and a load of ours that must not pass it (Dekker: we write a
     * message, then look whether the reader sleeps; it writes "asleep", then looks for
     * messages), a compiler barrier is enough if the other side calls mem_barrier between its
     * store and its load. Without this cap, a full fence. */
    TMX_DEV_CAP_MEM_ASYM = 1u << 12,
    /* Receives in place (TMX_SRQ_F_INPLACE): a basic or XRC SRQ created with that flag may complete
     * a receive with the message left where the device has it instead of in the posted buffer
     * (tmx_wc_t.data). Hardware's counterpart is a striding (multi-packet) receive queue,
     * where the adapter writes into the driver's buffers and the completion says where; on a
     * device that copies with the CPU it saves one copy of every eager message. */
    TMX_DEV_CAP_RECV_INPLACE = 1u << 16,
    /* Registering memory (mr_reg, mr_dereg) is a system call that pins pages: tens to
     * hundreds of microseconds a pair, more than copying a rendezvous message of up to
     * TMX_RNDV_COPY bytes. The core then sends such a message through staging buffers it
     * registered once (a copy at each end; mem.c) instead of registering the user's buffers
     * per message. The verbs provider; not the soft device, whose registration is a table
     * entry. */
    TMX_DEV_CAP_REG_SLOW = 1u << 17,
};

/* What ibv_query_qp_data_in_order answers (capability form); 0 = no guarantee. */
enum tmx_data_in_order {
    TMX_DATA_IN_ORDER_WHOLE_MSG         = 1u << 0,
    TMX_DATA_IN_ORDER_ALIGNED_128_BYTES = 1u << 1,
};

typedef struct tmx_tm_caps {
    uint32_t max_num_tags;      /* tag list entries in one TM SRQ */
    uint32_t max_ops;           /* outstanding list operations */
    uint32_t max_sge;
    uint32_t max_rndv_hdr_size; /* TMH + RVH + user header */
} tmx_tm_caps_t;

typedef struct tmx_dev_attr {
    uint64_t      caps;          /* TMX_DEV_CAP_* */
    size_t        max_msg_sz;    /* largest SEND / RDMA transfer */
    size_t        max_inline;    /* largest inline send (buffer reusable on return) */
    uint32_t      max_qp;
    uint32_t      max_qp_wr;     /* send queue depth */
    uint32_t      max_srq_wr;
    uint32_t      max_sge;
    uint32_t      max_mr;
    size_t        max_ud_msg;    /* largest UD datagram */
    tmx_tm_caps_t tm;
    int           numa_node;     /* -1 if unknown */
    char          pci_addr[16];  /* "" if none */
    size_t        addr_len;      /* bytes of a device address blob */
} tmx_dev_attr_t;

/* ---------------------------------------------------------------- objects */

typedef struct tmx_dev {
    const tmx_prov_t *prov;
    char              name[32];
    tmx_dev_attr_t    attr;
} tmx_dev_t;

typedef struct tmx_pd {
    tmx_dev_t *dev;
} tmx_pd_t;

enum tmx_access {
    TMX_ACCESS_LOCAL_WRITE  = 1u << 0,
    TMX_ACCESS_REMOTE_WRITE = 1u << 1,
    TMX_ACCESS_REMOTE_READ  = 1u << 2,
};

typedef struct tmx_mr {
    tmx_pd_t *pd;
    void     *addr;
    size_t    length;
    uint32_t  lkey;
    uint32_t  rkey;
    unsigned  access;
} tmx_mr_t;

typedef struct tmx_cq {
    tmx_dev_t *dev;
    int        cqe;
} tmx_cq_t;

/*
 * An XRC domain (ibv_open_xrcd): the receive side that the processes of one node share. A
 * domain is named by the node and a key: every process of the node that opens the same key
 * gets the same domain (verbs: the same file passed to ibv_open_xrcd), so a sender's
 * initiator QP, connected to one target QP of the domain, reaches the XRC SRQ of any process
 * of that node in that domain, addressed by its SRQ number (tmx_send_wr_t.remote_srqn). What
 * a node is belongs to the device: the soft device takes TMX_NODE_ID (default: the host).
 */
typedef struct tmx_xrcd_init_attr {
    uint64_t key; /* the domain's name within the node */
} tmx_xrcd_init_attr_t;

typedef struct tmx_xrcd {
    tmx_dev_t *dev;
    uint64_t   key;
} tmx_xrcd_t;

/* A completion channel (ibv_comp_channel): fd polls readable (POLLIN) after a completion queue
 * armed on it with cq_req_notify had something arrive. The fd may also become readable with
 * nothing new (a spurious event): the caller polls its CQs and arms again. */
typedef struct tmx_comp_channel {
    tmx_dev_t *dev;
    int        fd;
} tmx_comp_channel_t;

typedef enum {
    TMX_SRQT_BASIC = 0,
    TMX_SRQT_TM    = 1, /* tag matching: list ops, own CQ, no XRC */
    TMX_SRQT_XRC   = 2,
} tmx_srq_type_t;

/* tmx_srq_init_attr_t.flags */
enum tmx_srq_flags {
    TMX_SRQ_F_INPLACE = 1u << 0, /* BASIC or XRC on a TMX_DEV_CAP_RECV_INPLACE device */
};

typedef struct tmx_srq_init_attr {
    tmx_srq_type_t type;
    unsigned       flags;        /* TMX_SRQ_F_* */
    uint32_t       max_wr;
    uint32_t       max_sge;
    tmx_cq_t      *cq;           /* TM and XRC: completions of this SRQ */
    tmx_xrcd_t    *xrcd;         /* XRC */
    uint32_t       max_num_tags; /* TM */
    uint32_t       max_ops;      /* TM */
} tmx_srq_init_attr_t;

typedef struct tmx_srq {
    tmx_pd_t      *pd;
    tmx_srq_type_t type;
    tmx_cq_t      *cq;
} tmx_srq_t;

typedef enum {
    TMX_QPT_RC      = 0,
    TMX_QPT_UD      = 1,
    TMX_QPT_XRC_INI = 2,
    TMX_QPT_XRC_TGT = 3,
} tmx_qp_type_t;

typedef enum {
    TMX_QPS_RESET = 0,
    TMX_QPS_INIT  = 1,
    TMX_QPS_RTR   = 2,
    TMX_QPS_RTS   = 3,
    TMX_QPS_ERR   = 4,
} tmx_qp_state_t;

/*
 * XRC (ibv_open_xrcd, IBV_QPT_XRC_SEND / _RECV, IBV_SRQT_XRC, ibv_get_srq_num, ibv_open_qp):
 * - An XRC SRQ (srq_create TMX_SRQT_XRC, .xrcd, .cq) is a process's receive side in a domain;
 *   srq_get_num gives its number, unique on the node, which senders put in remote_srqn.
 * - An XRC_TGT QP (.xrcd; .send_cq takes its async errors, no other completion) belongs to the
 *   domain, not to its creator alone: another process of the node opens it by number
 *   (qp_open), and it lives until its last holder destroys its handle (qp_destroy). It goes
 *   INIT -> RTR with TMX_QP_ATTR_REMOTE = the initiator's blob (qp_get_addr of the XRC_INI);
 *   its qp_num is unique on the node and is the qp_num of every receive completion of a
 *   message that came through it (on the XRC SRQ's CQ). A handle reports the death of the
 *   initiator's process as an async error (TMX_WR_ID_ASYNC_ERROR on .send_cq, qp_num = the
 *   target's number), as a connected RC QP does.
 * - An XRC_INI QP (.send_cq; no receive side) goes INIT -> RTR (TMX_QP_ATTR_REMOTE = the
 *   target QP's blob) -> RTS; every work request names the SRQ it goes to in remote_srqn (RDMA
 *   too: the memory of that SRQ's process). A number that names no XRC SRQ of the target's
 *   domain completes with TMX_WC_REM_INV_REQ_ERR and moves the QP to error (the responder's
 *   NAK), never reaches another SRQ. The soft device keeps the order of work requests, and of
 *   their completions, per remote SRQ (hardware: for the whole QP); a dead process behind one
 *   SRQ fails only the work requests for that SRQ (wc.src_qp = its number, on the async error
 *   too), where hardware fails the whole QP (async error with src_qp 0: every SRQ).
 */
typedef struct tmx_qp_init_attr {
    tmx_qp_type_t type;
    tmx_cq_t     *send_cq;
    tmx_cq_t     *recv_cq;
    tmx_srq_t    *srq;        /* NULL: the QP has its own receive queue */
    tmx_xrcd_t   *xrcd;       /* XRC_TGT */
    uint32_t      max_send_wr;
    uint32_t      max_recv_wr;
    uint32_t      max_inline;
    int           sq_sig_all; /* every send completes, SIGNALED or not */
} tmx_qp_init_attr_t;

typedef struct tmx_qp {
    tmx_pd_t      *pd;
    tmx_qp_type_t  type;
    tmx_qp_state_t state;
    uint32_t       qp_num;  /* unique within the device; reported in tmx_wc_t.qp_num */
    tmx_cq_t      *send_cq;
    tmx_cq_t      *recv_cq;
    tmx_srq_t     *srq;
} tmx_qp_t;

/* qp_open (ibv_open_qp): a handle to an XRC_TGT QP another process of the node created. */
typedef struct tmx_qp_open_attr {
    tmx_xrcd_t *xrcd;
    uint32_t    qp_num;  /* the target QP's number (its creator's qp_num) */
    tmx_cq_t   *send_cq; /* its async errors */
} tmx_qp_open_attr_t;

/*
 * What a device holds (dev_query_stats), to measure how connection state scales: counted by
 * the device, live objects only. Receive contexts are what the device keeps per receiving
 * peer or process: RC QPs, XRC target QPs and SRQs.
 */
typedef struct tmx_dev_stats {
    uint32_t qps_rc;       /* RC QPs (TM QPs included) */
    uint32_t qps_ud;
    uint32_t qps_xrc_ini;  /* XRC initiator QPs */
    uint32_t qps_xrc_tgt;  /* XRC target QPs this process created and still holds */
    uint32_t xrc_tgt_open; /* handles to target QPs other processes created (qp_open) */
    uint32_t srqs;         /* SRQs of every type */
    uint32_t srqs_xrc;
    uint32_t xrcds;
    uint32_t cqs;
    /* the soft device's own bookkeeping behind XRC: per (initiator, remote SRQ) send paths it
     * opened, and the receive streams other processes' initiators hold into this one */
    uint32_t xrc_routes;
    uint32_t xrc_streams;
} tmx_dev_stats_t;

/* A remote address for UD sends, made from a device address blob (+ qp number). */
typedef struct tmx_ah {
    tmx_pd_t *pd;
} tmx_ah_t;

/* Largest QP address blob any provider produces. */
#define TMX_QP_ADDR_MAX 128
/* Largest device address blob any provider produces. */
#define TMX_DEV_ADDR_MAX 128

/* qp_modify: the attributes of a transition. */
enum tmx_qp_attr_mask {
    TMX_QP_ATTR_STATE       = 1u << 0,
    TMX_QP_ATTR_REMOTE      = 1u << 1, /* INIT -> RTR of RC/XRC: remote QP blob */
    TMX_QP_ATTR_OOO         = 1u << 2, /* INIT -> RTR: enable out-of-order placement */
};

typedef struct tmx_qp_attr {
    tmx_qp_state_t state;
    const void    *remote_addr;     /* blob from the peer's qp_get_addr */
    size_t         remote_addr_len;
    int            ooo;             /* with TMX_QP_ATTR_OOO */
} tmx_qp_attr_t;

/* ---------------------------------------------------------------- work requests */

typedef struct tmx_sge {
    uint64_t addr;
    uint32_t length;
    uint32_t lkey; /* ignored for inline sends */
} tmx_sge_t;

typedef enum {
    TMX_WR_SEND               = 0,
    TMX_WR_SEND_WITH_IMM      = 1,
    TMX_WR_RDMA_WRITE         = 2,
    TMX_WR_RDMA_WRITE_WITH_IMM = 3,
    TMX_WR_RDMA_READ          = 4,
} tmx_wr_opcode_t;

enum tmx_send_flags {
    TMX_SEND_SIGNALED = 1u << 0, /* generate a send completion */
    TMX_SEND_FENCE    = 1u << 1, /* wait for prior RDMA reads (ordering table, doc/DESIGN.md) */
    TMX_SEND_INLINE   = 1u << 2, /* copy the data now; buffer reusable on return */
};

typedef struct tmx_send_wr {
    uint64_t            wr_id;
    struct tmx_send_wr *next;
    tmx_sge_t          *sg_list;
    int                 num_sge;
    tmx_wr_opcode_t     opcode;
    unsigned            send_flags;
    uint32_t            imm_data;
    struct {
        uint64_t remote_addr;
        uint32_t rkey;
    } rdma;
    struct {
        tmx_ah_t *ah;
        uint32_t  remote_qpn;
    } ud;
    uint32_t remote_srqn; /* XRC_INI: the target SRQ number */
} tmx_send_wr_t;

typedef struct tmx_recv_wr {
    uint64_t            wr_id;
    struct tmx_recv_wr *next;
    tmx_sge_t          *sg_list;
    int                 num_sge;
} tmx_recv_wr_t;

/*
 * ---------------------------------------------------------------- tag matching (TM SRQ)
 *
 * rdma-core's tag-matching SRQ (ibv_post_srq_ops(3), infiniband/tm_types.h) as mlx5 behaves.
 * A device offers it with TMX_DEV_CAP_TM and tmx_dev_attr_t.tm (TMX_DEV_CAP_TM_RNDV: rendezvous
 * offload too).
 *
 * Shape. srq_create(TMX_SRQT_TM) makes a SRQ with a tag list of attr.max_num_tags entries
 * (1..caps.tm.max_num_tags) that takes at most attr.max_ops list operations outstanding
 * (1..caps.tm.max_ops); every completion of the SRQ (list operations and receives) goes to
 * attr.cq. Its plain receive buffers are posted with srq_post_recv as for a basic SRQ. RC QPs
 * created with .srq = a TM SRQ receive through it, and every SEND arriving on such a QP starts
 * with a tmx_tmh_t (a SEND shorter than that completes TMX_WC_TM_NO_TAG with nothing parsed;
 * the consumer drops it; so does a SEND whose TMH has an opcode not listed below). An RC QP
 * attached to a TM SRQ and created with max_send_wr = 0 is a "TM QP": its send queue belongs
 * to the device, which issues the RDMA reads of rendezvous offload and the FINs on it
 * (post_send on it fails TMX_ERR_INVALID_PARAM); rendezvous offload happens only for messages
 * that arrive on a TM QP. So, as with mlx5 (UCX's rc_mlx5 tm_qp), a peer pair that uses TM
 * holds two connections per direction of data: each side sends on a plain RC QP ("tx",
 * attached to its own TM SRQ, where the peer device's FINs arrive) connected to the other
 * side's TM QP.
 *
 * Wire. tmx_tmh_t (and tmx_rvh_t) are the wire headers of infiniband/tm_types.h: multi-byte
 * fields big-endian. TMX_TMH_EAGER: TMH + payload. TMX_TMH_RNDV: TMH + RVH (the sender's
 * buffer: va, rkey, len) + an opaque user header, max_rndv_hdr_size bytes in all at most.
 * TMX_TMH_NO_TAG: TMH + payload, never matched, not counted. TMX_TMH_FIN: sent by the device
 * itself, TMH only, app_ctx copied from the RNDV it finishes.
 *
 * Receive. A tagged (EAGER/RNDV) message is matched on arrival against the eligible entries in
 * list order: (tmh.tag & entry.mask) == entry.tag; the entry is consumed.
 *  - Matched EAGER: the payload (without the TMH) goes straight into the entry's buffer;
 *    completion opcode TMX_WC_TM_RECV, wr_id = the entry's recv_wr_id, wc_flags MATCH |
 *    DATA_VALID, byte_len = payload bytes, tm_info.tag = tmh.tag, tm_info.priv = tmh.app_ctx.
 *    A payload of more than one MTU (the device's choice; the soft device: 4 KiB) gives two
 *    completions: MATCH first (byte_len 0), then DATA_VALID alone with byte_len. A payload
 *    longer than the buffer: the buffer is filled, status TMX_WC_LOC_LEN_ERR, byte_len = the
 *    payload's length.
 *  - Matched RNDV with rendezvous offload, on a TM QP, RVH.len <= the buffer: the device reads
 *    RVH.len bytes from (va, rkey) into the buffer, sends TMX_TMH_FIN back on that TM QP, and
 *    completes twice: MATCH (byte_len 0), then DATA_VALID with byte_len = RVH.len once the FIN
 *    is wholly on the wire (so a completed receive has answered its sender). A failed read
 *    completes (DATA_VALID) with the read's error status (REM_ACCESS_ERR: the RVH names memory
 *    the sender did not register for remote reading; RETRY_EXC_ERR: the sender died) and
 *    sends no FIN. The FIN carries the RNDV's tag and app_ctx.
 *  - Matched RNDV otherwise (no offload, not a TM QP, buffer too small, a header shorter than
 *    TMH + RVH or longer than max_rndv_hdr_size): status TMX_WC_TM_RNDV_INCOMPLETE, MATCH, and
 *    the buffer holds the message after the TMH (RVH + user header; cut at the buffer's end),
 *    byte_len its length; software does the read and tells the sender.
 *  - Unmatched EAGER/RNDV: the whole message, TMH included, lands in a plain SRQ buffer;
 *    completion TMX_WC_TM_RECV with neither MATCH nor DATA_VALID, wr_id of the plain receive.
 *    The device counts it (unexpected_cnt, 16 bits) when it steers it there, so every TM_RECV
 *    completion without MATCH counts as one, whatever its status (LOC_LEN_ERR when the plain
 *    buffer is too small, WR_FLUSH_ERR when its QP failed halfway). NO_TAG and FIN messages
 *    land the same way but complete TMX_WC_TM_NO_TAG and are not counted. No plain buffer:
 *    the sender is held back (RNR) as for a basic SRQ.
 *  tm_info is valid only with MATCH; software parses the TMH of a plain buffer itself.
 *
 * Phase synchronization. Software reports how many unexpected messages it has handled with
 * TMX_OPS_TM_SYNC and unexpected_cnt on any list op (compared modulo 2^16). An entry added
 * while the device has delivered unexpected messages that software has not reported is not
 * eligible: it matches nothing until an op reports a count equal to the device's, which makes
 * every entry of the list eligible. (Messages m1, m2 both match b1 and b2; b1 is added between
 * their arrivals, before software saw m1: m2 does not take b1; software matches m1 to b1.)
 * When the device's count runs more than the sync gap (mlx5: 0x3fff) ahead of the last report,
 * its completions (unexpected receives, list ops) carry TMX_WC_TM_SYNC_REQ: post a SYNC.
 *
 * List operations (srq_post_ops), executed in chain order; ops before *bad_p were posted.
 *  - ADD (tag, mask, sg_list of at most caps.tm.max_sge, recv_wr_id): returns op->handle
 *    (non-zero). tag bits outside mask must be 0 (TMX_ERR_INVALID_PARAM).
 *  - DEL (handle): removes the entry; the receive then belongs to software again, no receive
 *    completion. If a message consumed the entry first, DEL completes TMX_WC_TM_DEL with status
 *    TMX_WC_TM_ERR, always (signaled or not), after the entry's receive completion(s) (other
 *    completions may come between them).
 *  - SYNC: only the count (taken with or without TMX_OPS_TM_SYNC). Any op's count is taken
 *    before the op is done, so an ADD that reports the device's count is eligible at once.
 *  - TMX_OPS_SIGNALED: a completion (TMX_WC_TM_ADD/_DEL/_SYNC, wr_id of the op) on the SRQ's CQ.
 *  - An op is outstanding until its completion, if it has one, is polled (the soft device
 *    executes ops when they are posted, so an unsignaled op that succeeds retires at once).
 *    One more than max_ops: TMX_ERR_BUSY, nothing of that op posted (poll, then retry). ADD on
 *    a full list: TMX_ERR_NO_RESOURCE. A handle that names no entry (or one already DELeted):
 *    TMX_ERR_INVALID_PARAM. Checked in that order: a malformed op or handle, max_ops, a
 *    failure the soft device injects (TMX_SOFT_TM_INJECT: TMX_ERR_IO, nothing done), the list.
 *  - A handle is not reused before every completion of its entry (receive, failed DEL) has been
 *    polled, so a DEL never hits a newer entry.
 */
enum {
    TMX_TMH_NO_TAG = 0,
    TMX_TMH_RNDV   = 1,
    TMX_TMH_FIN    = 2,
    TMX_TMH_EAGER  = 3,
};

typedef struct tmx_tmh {
    uint8_t  opcode;
    uint8_t  reserved[3];
    uint32_t app_ctx; /* big-endian */
    uint64_t tag;     /* big-endian */
} tmx_tmh_t;

typedef struct tmx_rvh {
    uint64_t va;   /* big-endian */
    uint32_t rkey; /* big-endian */
    uint32_t len;  /* big-endian */
} tmx_rvh_t;

/* TM SRQ list operations (ibv_post_srq_ops). */
typedef enum {
    TMX_SRQ_OP_TM_ADD  = 0,
    TMX_SRQ_OP_TM_DEL  = 1,
    TMX_SRQ_OP_TM_SYNC = 2,
} tmx_srq_op_type_t;

enum tmx_srq_op_flags {
    TMX_OPS_SIGNALED = 1u << 0,
    TMX_OPS_TM_SYNC  = 1u << 1, /* unexpected_cnt below is valid */
};

typedef struct tmx_srq_op {
    uint64_t           wr_id;
    struct tmx_srq_op *next;
    tmx_srq_op_type_t  op;
    unsigned           flags;
    uint32_t           unexpected_cnt;
    uint32_t           handle;    /* DEL: handle of the entry; ADD: returned */
    uint64_t           tag;
    uint64_t           mask;
    tmx_sge_t         *sg_list;
    int                num_sge;
    uint64_t           recv_wr_id;
} tmx_srq_op_t;

/* ---------------------------------------------------------------- completions */

typedef enum {
    TMX_WC_SUCCESS            = 0,
    TMX_WC_LOC_LEN_ERR        = 1, /* receive buffer too small */
    TMX_WC_LOC_PROT_ERR       = 2, /* bad lkey */
    TMX_WC_WR_FLUSH_ERR       = 3, /* QP went to error; request flushed */
    TMX_WC_REM_ACCESS_ERR     = 4, /* rkey, bounds or rights check failed at the target */
    TMX_WC_REM_INV_REQ_ERR    = 5,
    TMX_WC_RETRY_EXC_ERR      = 6, /* peer gone (process died) */
    TMX_WC_TM_ERR             = 7,
    TMX_WC_TM_RNDV_INCOMPLETE = 8,
    TMX_WC_GENERAL_ERR        = 9,
} tmx_wc_status_t;

typedef enum {
    TMX_WC_SEND               = 0,
    TMX_WC_RDMA_WRITE         = 1,
    TMX_WC_RDMA_READ          = 2,
    TMX_WC_RECV               = 3,
    TMX_WC_RECV_RDMA_WITH_IMM = 4,
    TMX_WC_TM_ADD             = 5,
    TMX_WC_TM_DEL             = 6,
    TMX_WC_TM_SYNC            = 7,
    TMX_WC_TM_RECV            = 8,
    TMX_WC_TM_NO_TAG          = 9,
} tmx_wc_opcode_t;

enum tmx_wc_flags {
    TMX_WC_WITH_IMM      = 1u << 0,
    TMX_WC_TM_MATCH      = 1u << 1,
    TMX_WC_TM_DATA_VALID = 1u << 2,
    TMX_WC_TM_SYNC_REQ   = 1u << 3,
};

/* wr_id of a completion that belongs to no work request: the QP (qp_num) went to the error
 * state on its own, e.g. because the peer process died. Pushed to the QP's send CQ, so the core
 * learns of it even when it has nothing outstanding. */
#define TMX_WR_ID_ASYNC_ERROR UINT64_MAX

typedef struct tmx_wc {
    uint64_t        wr_id;
    tmx_wc_status_t status;
    tmx_wc_opcode_t opcode;
    uint32_t        byte_len;
    uint32_t        imm_data;
    uint32_t        qp_num;   /* local QP the completion belongs to (XRC: see above) */
    uint32_t        src_qp;   /* UD: sender's QP number; XRC_INI: the remote SRQ number */
    unsigned        wc_flags;
    struct {
        uint64_t tag;
        uint32_t priv;
    } tm_info;
    /* TMX_SRQ_F_INPLACE: non-NULL when a receive (TMX_WC_RECV, success) left the message
     * where the device had it: byte_len bytes at data, the posted buffer consumed (its wr_id
     * is this one) but not written. Valid until the next cq_poll of this CQ; memory the
     * sender can still write, so each byte is to be read once (copy headers out first). */
    const void *data;
} tmx_wc_t;

/* A region of a peer's memory mapped for rma_write (the ops table). The first three fields
 * are the caller's arguments to rma_map; the rest is the provider's. */
typedef struct tmx_rma_map {
    uint64_t    remote_addr;
    size_t      len;
    uint32_t    rkey;
    uint32_t    prov_word;
    uint32_t    prov_gen;
    void       *prov_ptr;
    const void *prov_aux[2];
} tmx_rma_map_t;

/* ---------------------------------------------------------------- the ops table */

struct tmx_prov_ops {
    /* Opens up to max devices of this provider; *num_p = 0 (and TMX_OK) when none. */
    tmx_status_t (*dev_open)(const tmx_prov_t *prov, const tmx_config_t *cfg, tmx_dev_t **devs,
                             int max, int *num_p);
    void (*dev_close)(tmx_dev_t *dev);
    /* The device address: what a peer needs (with a QP number) to reach it with UD, and to
     * tell whether it is reachable at all (same host for shm). */
    tmx_status_t (*dev_get_addr)(tmx_dev_t *dev, void *buf, size_t *len_p);
    /* 1 when a device with this address blob can be reached from dev. */
    int (*dev_reachable)(tmx_dev_t *dev, const void *addr, size_t len);
    /* For tmx_info: what the device is beyond tmx_dev_attr_t (verbs: port, link layer, MTU,
     * GIDs, the optional verbs and why one is absent), as lines that start with prefix.
     * Providers with nothing to add use tmx_prov_no_dev_print. */
    void (*dev_print)(tmx_dev_t *dev, FILE *stream, const char *prefix);

    tmx_status_t (*pd_alloc)(tmx_dev_t *dev, tmx_pd_t **pd_p);
    void (*pd_free)(tmx_pd_t *pd);

    tmx_status_t (*mr_reg)(tmx_pd_t *pd, void *addr, size_t length, unsigned access,
                           tmx_mr_t **mr_p);
    void (*mr_dereg)(tmx_mr_t *mr);
    /*
     * Memory the provider allocates and registers (as mr_reg with access): len bytes, zeroed,
     * at mr->addr, aligned to at least 128 bytes, where RDMA writes of peers land without
     * their owner's progress, as a real adapter's DMA writes registered host memory. It is
     * what a receiver polls (the eager-RDMA ring, doc/DESIGN.md). A provider with no better
     * way uses tmx_prov_host_mem_alloc / _free (page-aligned host memory + mr_reg). The soft
     * device gives it from its segment (TMX_SOFT_DM_SIZE), where peers' writes are their own
     * stores (TMX_DEV_CAP_MEM_DIRECT); TMX_ERR_NO_RESOURCE when that area is full.
     * mem_free deregisters and frees it (mr from mem_alloc only).
     */
    tmx_status_t (*mem_alloc)(tmx_pd_t *pd, size_t len, unsigned access, tmx_mr_t **mr_p);
    void (*mem_free)(tmx_mr_t *mr);
    /* A full memory barrier of the caller that also orders the direct writes of every peer
     * process with TMX_DEV_CAP_MEM_ASYM (on the soft device: membarrier(2), global expedited);
     * an error when it cannot (the caller must then not count on its order: e.g. not sleep).
     * Providers without direct writes: tmx_prov_fence_mem_barrier (a fence). */
    tmx_status_t (*mem_barrier)(tmx_dev_t *dev);

    tmx_status_t (*cq_create)(tmx_dev_t *dev, int cqe, tmx_cq_t **cq_p);
    void (*cq_destroy)(tmx_cq_t *cq);
    /* Up to n completions into wc[]; returns how many (>= 0) or a negative tmx_status_t.
     * For software devices this is also where the device makes progress. */
    int (*cq_poll)(tmx_cq_t *cq, int n, tmx_wc_t *wc);

    /*
     * Completion channels, verbs' ibv_create_comp_channel / ibv_req_notify_cq /
     * ibv_get_cq_event + ibv_ack_cq_events. The use is verbs': drain the channel's events, arm,
     * poll the CQ once more (what arrived before the arm may not signal), and sleep in poll()
     * on ch->fd only when that poll found nothing.
     *
     * channel_create: at most one channel per device may be asked for (TMX_ERR_NO_RESOURCE
     * after); TMX_ERR_UNSUPPORTED when the device cannot signal (the core then spins or yields).
     * cq_req_notify: arms cq (verbs binds the channel when the CQ is created; here it is named
     * when arming): TMX_OK, and the channel signals once at the next arrival for cq; or
     * TMX_ERR_BUSY when the device already holds work for cq that only cq_poll moves (for a
     * device without an engine of its own, TMX_DEV_CAP_MANUAL_PROGRESS: an arrival not yet
     * polled, or a send waiting for room on the wire): poll, then arm again.
     * channel_get_events: takes the channel's pending events without blocking; returns how
     * many (>= 0) or a negative tmx_status_t.
     */
    tmx_status_t (*channel_create)(tmx_dev_t *dev, tmx_comp_channel_t **ch_p);
    void (*channel_destroy)(tmx_comp_channel_t *ch);
    tmx_status_t (*cq_req_notify)(tmx_cq_t *cq, tmx_comp_channel_t *ch);
    int (*channel_get_events)(tmx_comp_channel_t *ch);

    /* Counts of what the device holds (tmx_dev_stats_t). */
    tmx_status_t (*dev_query_stats)(tmx_dev_t *dev, tmx_dev_stats_t *stats);

    tmx_status_t (*xrcd_open)(tmx_dev_t *dev, const tmx_xrcd_init_attr_t *attr,
                              tmx_xrcd_t **xrcd_p);
    void (*xrcd_close)(tmx_xrcd_t *xrcd);

    tmx_status_t (*srq_create)(tmx_pd_t *pd, const tmx_srq_init_attr_t *attr,
                               tmx_srq_t **srq_p);
    void (*srq_destroy)(tmx_srq_t *srq);
    tmx_status_t (*srq_post_recv)(tmx_srq_t *srq, tmx_recv_wr_t *wr, tmx_recv_wr_t **bad_p);
    tmx_status_t (*srq_post_ops)(tmx_srq_t *srq, tmx_srq_op_t *op, tmx_srq_op_t **bad_p);
    tmx_status_t (*srq_get_num)(tmx_srq_t *srq, uint32_t *srqn_p);

    tmx_status_t (*qp_create)(tmx_pd_t *pd, const tmx_qp_init_attr_t *attr, tmx_qp_t **qp_p);
    void (*qp_destroy)(tmx_qp_t *qp);
    /* XRC: a handle to a target QP of the domain (see XRC above); destroyed by qp_destroy. */
    tmx_status_t (*qp_open)(tmx_pd_t *pd, const tmx_qp_open_attr_t *attr, tmx_qp_t **qp_p);
    /* The blob a peer passes to qp_modify(RTR, TMX_QP_ATTR_REMOTE); <= TMX_QP_ADDR_MAX. */
    tmx_status_t (*qp_get_addr)(tmx_qp_t *qp, void *buf, size_t *len_p);
    tmx_status_t (*qp_modify)(tmx_qp_t *qp, const tmx_qp_attr_t *attr, unsigned attr_mask);
    /* TMX_DATA_IN_ORDER_* for op on this QP (valid from RTS on), 0 for none. */
    unsigned (*qp_data_in_order)(tmx_qp_t *qp, tmx_wr_opcode_t op);
    /* TMX_ERR_NO_RESOURCE when the send queue (or the wire) is full: nothing of wr posted
     * (see TMX_DEV_CAP_MANUAL_PROGRESS for when an unsignaled SEND is accepted). */
    tmx_status_t (*post_send)(tmx_qp_t *qp, tmx_send_wr_t *wr, tmx_send_wr_t **bad_p);
    tmx_status_t (*post_recv)(tmx_qp_t *qp, tmx_recv_wr_t *wr, tmx_recv_wr_t **bad_p);

    /* UD: an address handle from a device address blob. */
    tmx_status_t (*ah_create)(tmx_pd_t *pd, const void *dev_addr, size_t len, tmx_ah_t **ah_p);
    void (*ah_destroy)(tmx_ah_t *ah);

    /*
     * Optional (both NULL: not offered), for a caller that writes many small messages into one
     * region of its RC peer's memory (the eager-RDMA ring). rma_map checks once that len
     * bytes at remote_addr (rkey) can be written through qp and fills *map (TMX_OK), or says
     * TMX_ERR_UNSUPPORTED (the caller posts RDMA WRITEs as before). rma_write(qp, map, off,
     * src, n, wr_id) is then exactly post_send of one unsignaled inline RDMA_WRITE (wr_id) of
     * n bytes from src to remote_addr + off (same order with the QP's other work, same data-in-order
     * behaviour, same status), without the per-write checks of the work request and of the
     * region: the device checks only what can change (the QP's state and queue, the key still
     * registered, the peer alive) and writes, or posts the write as post_send would. off + n
     * must lie within the map. The map stays valid until qp is destroyed.
     */
    tmx_status_t (*rma_map)(tmx_qp_t *qp, uint64_t remote_addr, size_t len, uint32_t rkey,
                            tmx_rma_map_t *map);
    tmx_status_t (*rma_write)(tmx_qp_t *qp, const tmx_rma_map_t *map, size_t off,
                              const void *src, size_t n, uint64_t wr_id);

    /*
     * Optional (NULL: not offered), for the core's smallest sends (a compact EAGER: every
     * small message of a ping-pong after the first). send_inline(qp, src, n, imm, flags,
     * wr_id) is exactly post_send of one unsignaled, inline TMX_WR_SEND_WITH_IMM (wr_id) of n
     * bytes from src with immediate data imm on an RC QP, flags 0 or TMX_SEND_FENCE: the same
     * status (TMX_ERR_INVALID_PARAM for another QP type or state, n above the QP's inline
     * limit or other flags; TMX_ERR_NO_RESOURCE when the queue is full), the same order with
     * the QP's other work, the same completions (an error one carries wr_id), without a work
     * request built by the caller and checked by the device.
     */
    tmx_status_t (*send_inline)(tmx_qp_t *qp, const void *src, size_t n, uint32_t imm,
                                unsigned flags, uint64_t wr_id);

    /* Optional too (NULL: the caller posts the work request): rma_write of num_sge (1..3)
     * pieces gathered, num_sge sges as post_send's: a ring message in its slot (header,
     * payload, flag) without a copy into one piece first. */
    tmx_status_t (*rma_writev)(tmx_qp_t *qp, const tmx_rma_map_t *map, size_t off,
                               const tmx_sge_t *sge, int num_sge, uint64_t wr_id);
};

struct tmx_prov {
    const char           *name;
    const char           *description;
    const tmx_prov_ops_t *ops;
};

/* The static provider table (prov.c), NULL-terminated, in preference order. */
extern const tmx_prov_t *const tmx_providers[];

/* Stubs for ops a provider does not implement: they return TMX_ERR_UNSUPPORTED. */
void tmx_prov_no_dev_print(tmx_dev_t *dev, FILE *stream, const char *prefix);
tmx_status_t tmx_prov_unsupported_channel_create(tmx_dev_t *dev, tmx_comp_channel_t **ch_p);
void tmx_prov_unsupported_channel_destroy(tmx_comp_channel_t *ch);
tmx_status_t tmx_prov_unsupported_cq_req_notify(tmx_cq_t *cq, tmx_comp_channel_t *ch);
int tmx_prov_unsupported_channel_get_events(tmx_comp_channel_t *ch);
tmx_status_t tmx_prov_unsupported_dev_query_stats(tmx_dev_t *dev, tmx_dev_stats_t *stats);
tmx_status_t tmx_prov_unsupported_xrcd_open(tmx_dev_t *dev, const tmx_xrcd_init_attr_t *attr,
                                            tmx_xrcd_t **xrcd_p);
void tmx_prov_unsupported_xrcd_close(tmx_xrcd_t *xrcd);
tmx_status_t tmx_prov_unsupported_srq_post_ops(tmx_srq_t *srq, tmx_srq_op_t *op,
                                               tmx_srq_op_t **bad_p);
tmx_status_t tmx_prov_unsupported_srq_get_num(tmx_srq_t *srq, uint32_t *srqn_p);
tmx_status_t tmx_prov_unsupported_qp_open(tmx_pd_t *pd, const tmx_qp_open_attr_t *attr,
                                          tmx_qp_t **qp_p);
unsigned tmx_prov_no_data_in_order(tmx_qp_t *qp, tmx_wr_opcode_t op);
/* mem_alloc / mem_free for providers without device memory: aligned host memory + mr_reg. */
tmx_status_t tmx_prov_host_mem_alloc(tmx_pd_t *pd, size_t len, unsigned access,
                                     tmx_mr_t **mr_p);
void tmx_prov_host_mem_free(tmx_mr_t *mr);
tmx_status_t tmx_prov_fence_mem_barrier(tmx_dev_t *dev);
tmx_status_t tmx_prov_unsupported_ah_create(tmx_pd_t *pd, const void *dev_addr, size_t len,
                                            tmx_ah_t **ah_p);
void tmx_prov_unsupported_ah_destroy(tmx_ah_t *ah);

/* Name of a completion status, for logs. */
const char *tmx_wc_status_string(tmx_wc_status_t status);

#endif /* TMX_PROV_H */
