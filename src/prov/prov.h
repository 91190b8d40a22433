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
     * must be signaled, and its completion is what says it left. */
    TMX_DEV_CAP_MANUAL_PROGRESS = 1u << 10,
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

typedef struct tmx_xrcd {
    tmx_dev_t *dev;
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

typedef struct tmx_srq_init_attr {
    tmx_srq_type_t type;
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
    uint32_t        qp_num;   /* local QP the completion belongs to */
    uint32_t        src_qp;   /* UD: sender's QP number */
    unsigned        wc_flags;
    struct {
        uint64_t tag;
        uint32_t priv;
    } tm_info;
} tmx_wc_t;

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

    tmx_status_t (*pd_alloc)(tmx_dev_t *dev, tmx_pd_t **pd_p);
    void (*pd_free)(tmx_pd_t *pd);

    tmx_status_t (*mr_reg)(tmx_pd_t *pd, void *addr, size_t length, unsigned access,
                           tmx_mr_t **mr_p);
    void (*mr_dereg)(tmx_mr_t *mr);

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

    tmx_status_t (*xrcd_open)(tmx_dev_t *dev, tmx_xrcd_t **xrcd_p);
    void (*xrcd_close)(tmx_xrcd_t *xrcd);

    tmx_status_t (*srq_create)(tmx_pd_t *pd, const tmx_srq_init_attr_t *attr,
                               tmx_srq_t **srq_p);
    void (*srq_destroy)(tmx_srq_t *srq);
    tmx_status_t (*srq_post_recv)(tmx_srq_t *srq, tmx_recv_wr_t *wr, tmx_recv_wr_t **bad_p);
    tmx_status_t (*srq_post_ops)(tmx_srq_t *srq, tmx_srq_op_t *op, tmx_srq_op_t **bad_p);
    tmx_status_t (*srq_get_num)(tmx_srq_t *srq, uint32_t *srqn_p);

    tmx_status_t (*qp_create)(tmx_pd_t *pd, const tmx_qp_init_attr_t *attr, tmx_qp_t **qp_p);
    void (*qp_destroy)(tmx_qp_t *qp);
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
};

struct tmx_prov {
    const char           *name;
    const char           *description;
    const tmx_prov_ops_t *ops;
};

/* The static provider table (prov.c), NULL-terminated, in preference order. */
extern const tmx_prov_t *const tmx_providers[];

/* Stubs for ops a provider does not implement: they return TMX_ERR_UNSUPPORTED. */
tmx_status_t tmx_prov_unsupported_channel_create(tmx_dev_t *dev, tmx_comp_channel_t **ch_p);
void tmx_prov_unsupported_channel_destroy(tmx_comp_channel_t *ch);
tmx_status_t tmx_prov_unsupported_cq_req_notify(tmx_cq_t *cq, tmx_comp_channel_t *ch);
int tmx_prov_unsupported_channel_get_events(tmx_comp_channel_t *ch);
tmx_status_t tmx_prov_unsupported_xrcd_open(tmx_dev_t *dev, tmx_xrcd_t **xrcd_p);
void tmx_prov_unsupported_xrcd_close(tmx_xrcd_t *xrcd);
tmx_status_t tmx_prov_unsupported_srq_post_ops(tmx_srq_t *srq, tmx_srq_op_t *op,
                                               tmx_srq_op_t **bad_p);
tmx_status_t tmx_prov_unsupported_srq_get_num(tmx_srq_t *srq, uint32_t *srqn_p);
unsigned tmx_prov_no_data_in_order(tmx_qp_t *qp, tmx_wr_opcode_t op);
tmx_status_t tmx_prov_unsupported_ah_create(tmx_pd_t *pd, const void *dev_addr, size_t len,
                                            tmx_ah_t **ah_p);
void tmx_prov_unsupported_ah_destroy(tmx_ah_t *ah);

/* Name of a completion status, for logs. */
const char *tmx_wc_status_string(tmx_wc_status_t status);

#endif /* TMX_PROV_H */
