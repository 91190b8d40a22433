/*
 * The verbs provider: the device provider contract (prov.h) on libibverbs (rdma-core), shared
 * by verbs_dev.c (devices, addresses, PD, MR, CQ, completion channel, async events, AH),
 * verbs_qp.c (SRQ, QP, posting, polling) and verbs_tm.c (TM SRQ list operations, XRC).
 *
 * One tmx device is one active port of one RDMA device, with its own ibv_context. Caps come
 * from ibv_query_device_ex and the port query, never from the device's name; the optional
 * verbs (TM SRQ, XRC, the data-in-order query, OOO placement through mlx5dv) are compiled in
 * where configure found them in rdma-core (TMX_VERBS_HAVE_* in config.h) and used where the
 * device reports them.
 *
 * Work request ids. Every work request the provider posts carries an id of its own, which
 * says what it is and where the caller's id is kept (tmx_verbs_wrid): kind (send, receive of a
 * QP, receive of a SRQ, TM list op, TM tagged receive), the object (QP or SRQ) by its index in
 * the device's object table with a generation, and a slot in that object's table. So every
 * completion, errors and flushes included (whose opcode verbs leaves undefined), tells exactly
 * which work request it ends; a completion of an object destroyed meanwhile is recognized and
 * dropped; and send queue slots are retired exactly (a signaled send retires every unsignaled
 * one before it).
 *
 * Send queues are never left to fill with unsignaled work requests: one in every half queue
 * is signaled by the provider, and its successful completion is not handed to the caller.
 *
 * Completions that belong to no completion queue entry (TMX_WR_ID_ASYNC_ERROR when a QP went
 * to error on its own, from an error completion or an async event), and the entries taken out
 * of the hardware queue when a QP or SRQ is destroyed (so that nothing already completed is
 * lost), wait in the CQ's backlog, which cq_poll returns first.
 */
#ifndef TMX_PROV_VERBS_H
#define TMX_PROV_VERBS_H

#include <infiniband/verbs.h>
#include <stdint.h>

#include "prov/prov.h"

#define TMX_VERBS_ADDR_MAGIC 0x44565854u /* "TXVD": device address */
#define TMX_VERBS_QP_MAGIC   0x51565854u /* "TXVQ": QP address */
#define TMX_VERBS_VERSION    1
#define TMX_VERBS_QKEY       0x746d7831u /* UD: every tmx UD QP uses this Q_Key */
#define TMX_VERBS_GRH        40          /* bytes of the GRH in front of every UD receive */
#define TMX_VERBS_MAX_SGE    4           /* contract scatter/gather entries per work request */
#define TMX_VERBS_MAX_INLINE 256         /* largest inline send asked of a QP */
#define TMX_VERBS_POLL_BATCH 32
#define TMX_VERBS_MAX_OBJS   (1u << 16)

/* What a peer needs to reach a port: the device address blob (dev_get_addr, ah_create).
 * Integers in the host's order, as every address of a worker. */
typedef struct tmx_verbs_dev_addr {
    uint32_t magic;
    uint16_t version;
    uint16_t len;        /* sizeof(tmx_verbs_dev_addr_t) */
    uint8_t  link_layer; /* IBV_LINK_LAYER_INFINIBAND or _ETHERNET */
    uint8_t  mtu;        /* enum ibv_mtu: the port's active MTU */
    uint8_t  gid_type;   /* enum ibv_gid_type of the GID below */
    uint8_t  port;
    uint16_t lid;        /* InfiniBand */
    uint16_t gid_index;  /* the sender's index of the GID below (its port's table) */
    uint8_t  gid[16];
} tmx_verbs_dev_addr_t;

/* The QP address blob (qp_get_addr, qp_modify RTR): the port's address and the QP's. */
typedef struct tmx_verbs_qp_addr {
    uint32_t             magic;
    uint16_t             version;
    uint16_t             len;     /* sizeof(tmx_verbs_qp_addr_t) */
    uint32_t             qpn;
    uint32_t             psn;     /* the first packet sequence number the QP sends */
    uint8_t              qp_type; /* tmx_qp_type_t */
    uint8_t              flags;   /* TMX_VERBS_QPF_* */
    uint8_t              reserved[6];
    tmx_verbs_dev_addr_t dev;
} tmx_verbs_qp_addr_t;

/* QP address flags */
#define TMX_VERBS_QPF_OOO 0x01u /* made with OOO placement: both ends must be */

/* Object kinds in a work request id. */
enum {
    TMX_VERBS_WR_SEND    = 1, /* obj: QP, slot: send queue position */
    TMX_VERBS_WR_RECV    = 2, /* obj: QP, slot: receive slot */
    TMX_VERBS_WR_SRECV   = 3, /* obj: SRQ, slot: receive slot */
    TMX_VERBS_WR_TM_OP   = 4, /* obj: SRQ, slot: list operation slot */
    TMX_VERBS_WR_TM_RECV = 5, /* obj: SRQ, slot: tag entry slot */
};

/* kind 4 bits | generation 12 | object 16 | slot 32 */
#define TMX_VERBS_WRID(_kind, _gen, _obj, _slot)                                                  \
    (((uint64_t)(_kind) << 60) | ((uint64_t)((_gen) & 0xfffu) << 48) |                           \
     ((uint64_t)((_obj) & 0xffffu) << 32) | (uint64_t)(uint32_t)(_slot))
#define TMX_VERBS_WRID_KIND(_w) ((unsigned)((_w) >> 60))
#define TMX_VERBS_WRID_GEN(_w)  ((unsigned)((_w) >> 48) & 0xfffu)
#define TMX_VERBS_WRID_OBJ(_w)  ((unsigned)((_w) >> 32) & 0xffffu)
#define TMX_VERBS_WRID_SLOT(_w) ((uint32_t)(_w))

typedef struct tmx_verbs_dev tmx_verbs_dev_t;
typedef struct tmx_verbs_cq  tmx_verbs_cq_t;

/* One entry of the device's object table (QPs and SRQs, for work request ids). */
typedef struct tmx_verbs_obj {
    void    *ptr;  /* tmx_verbs_qp_t or tmx_verbs_srq_t; NULL when free */
    uint8_t  type; /* 1 QP, 2 SRQ */
    uint16_t gen;
} tmx_verbs_obj_t;

enum { TMX_VERBS_OBJ_QP = 1, TMX_VERBS_OBJ_SRQ = 2 };

struct tmx_verbs_dev {
    tmx_dev_t                 super;
    struct ibv_context       *ctx;
    char                      ibdev[IBV_SYSFS_NAME_MAX];
    uint8_t                   port;
    struct ibv_port_attr      port_attr;
    struct ibv_device_attr_ex attr_ex;
    int                       gid_index;
    union ibv_gid             gid;
    uint32_t                  gid_type;
    tmx_verbs_dev_addr_t      addr;
    const tmx_config_t       *cfg;
    /* the completion channel: made with the device, every CQ is bound to it, handed out once */
    struct ibv_comp_channel  *ibch;
    tmx_comp_channel_t        channel;
    int                       channel_given;
    /* object table */
    tmx_verbs_obj_t          *objs;
    uint32_t                  num_objs;
    uint32_t                  objs_cap;
    uint32_t                  obj_hint;
    uint64_t                  rng;
    unsigned                  poll_count;
    uint64_t                  ka_ns;       /* the last keepalive round */
    unsigned                  ka_waiting;  /* QPs in RTS not yet ka_on */
    uint32_t                  ka_on_qpn;   /* the last QP an SRQ receive found ka_on: its
                                            * receives skip the lookup; 0 (never an RC QP's
                                            * number) whenever a QP enters RTS */
    /* QP number -> object index (open addressing, keys qpn + 1, 0 empty) */
    uint32_t                 *qpn_key;
    uint32_t                 *qpn_obj;
    uint32_t                  qpn_cap;
    uint32_t                  qpn_count;
    int                       use_cq_ex;   /* CQs are ibv_cq_ex (TM info), polled that way */
    int                       tm;          /* the device has a usable TM SRQ */
    int                       xrc;
    int                       ooo;         /* RC QPs are made with OOO placement (mlx5dv) */
    int                       dio_form;    /* 0 none, 1 boolean, 2 capability form */
    unsigned                  max_send_sge;
    unsigned                  max_recv_sge;
    char                      absent[256]; /* why the optional verbs are absent, for tmx_info */
};

/* Completions that wait in software (see the top of this file): a growing ring. */
typedef struct tmx_verbs_wcq {
    tmx_wc_t *wc;
    unsigned  cap;
    unsigned  head;
    unsigned  count;
} tmx_verbs_wcq_t;

struct tmx_verbs_cq {
    tmx_cq_t          super;
    struct ibv_cq    *ibcq;
    struct ibv_cq_ex *ibcqx; /* dev->use_cq_ex */
    int               size;  /* entries the hardware queue holds */
    long              load;  /* work requests that may complete here at once */
    /* taken out of the hardware queue (at a QP's or SRQ's destroy): returned before it */
    tmx_verbs_wcq_t   blog;
    /* TMX_WR_ID_ASYNC_ERROR of QPs that failed: returned once the hardware queue is empty,
     * after the failed QP's own completions and flushes, as the soft device orders them */
    tmx_verbs_wcq_t   async;
    unsigned          events_unacked;
};

typedef struct tmx_verbs_pd {
    tmx_pd_t       super;
    struct ibv_pd *ibpd;
    struct ibv_mr *zero_mr;  /* what a zero-length registration names */
    uint8_t        zero_buf[64];
} tmx_verbs_pd_t;

typedef struct tmx_verbs_mr {
    tmx_mr_t       super;
    struct ibv_mr *ibmr; /* NULL: a zero-length region (the PD's zero_mr keys) */
} tmx_verbs_mr_t;

typedef struct tmx_verbs_xrcd {
    tmx_xrcd_t       super;
    struct ibv_xrcd *ibxrcd;
} tmx_verbs_xrcd_t;

/* Receive slots of a QP or SRQ: a free list over the caller's wr_ids. */
typedef struct tmx_verbs_rslots {
    uint64_t *wr_id;
    uint32_t *free;
    uint32_t  num_free;
    uint32_t  cap;
} tmx_verbs_rslots_t;

/* TM list state (verbs_tm.c) */
typedef struct tmx_verbs_tm tmx_verbs_tm_t;

typedef struct tmx_verbs_srq {
    tmx_srq_t           super;
    struct ibv_srq     *ibsrq;
    uint32_t            obj;
    uint16_t            gen;
    uint32_t            max_wr;
    uint32_t            max_sge;
    tmx_verbs_rslots_t  rs;
    tmx_verbs_cq_t     *counted[8]; /* CQs whose load counts max_wr */
    unsigned            num_counted;
    tmx_verbs_tm_t     *tm;
} tmx_verbs_srq_t;

typedef struct tmx_verbs_sslot {
    uint64_t wr_id;
    uint32_t seq;
    uint8_t  opcode;   /* tmx_wr_opcode_t */
    uint8_t  signaled; /* the caller asked for a completion */
    uint8_t  internal; /* the provider's own (a keepalive): no completion of it is the caller's */
} tmx_verbs_sslot_t;

typedef struct tmx_verbs_qp {
    tmx_qp_t            super;
    struct ibv_qp      *ibqp;
    tmx_verbs_dev_t    *dev;
    uint32_t            obj;
    uint16_t            gen;
    uint32_t            psn;
    int                 sig_all;
    int                 no_sq;       /* a TM QP: the send queue is the device's */
    int                 ooo;         /* OOO placement on (mlx5dv) */
    uint32_t            max_inline;
    uint32_t            max_send_sge;
    uint32_t            max_recv_sge;
    /* send queue */
    tmx_verbs_sslot_t  *sq;
    uint32_t            sq_depth;    /* power of two */
    uint32_t            sq_head;     /* next sequence number */
    uint32_t            sq_tail;     /* oldest not retired */
    uint32_t            unsig_run;   /* unsignaled work requests since the last signaled one */
    uint32_t            ka_head;     /* sq_head at the last keepalive round */
    /* send_inline's one work request, its constant fields filled once (an initializer of
     * the 128-byte ibv_send_wr was 25 of its instructions per send); wrid_send is
     * TMX_VERBS_WRID(TMX_VERBS_WR_SEND, gen, obj, 0), kept with gen and obj */
    struct ibv_send_wr  inl_wr;
    struct ibv_sge      inl_sge;
    uint64_t            wrid_send;
    int                 ka_on;       /* the peer QP is up (the caller posted a send, or a
                                      * completion showed it): keepalives go */
    /* receive queue (no SRQ) */
    tmx_verbs_rslots_t  rs;
    uint32_t            rq_depth;
    /* receives posted in RESET (which verbs refuses): posted at INIT */
    struct ibv_recv_wr *early;
    struct ibv_sge     *early_sge;  /* TMX_VERBS_MAX_SGE + 1 per entry */
    uint32_t            num_early;
    /* UD: the GRH lands here (one scratch area for every receive: nobody reads it) */
    struct ibv_mr      *grh_mr;
    uint8_t            *grh_buf;
    /* UD: an "inline" datagram longer than the device's inline limit is copied here (one
     * slot per send queue position, max_ud_msg bytes each; made at the first one) */
    uint8_t            *bounce;
    struct ibv_mr      *bounce_mr;
    long                load_send;   /* what this QP added to its CQs' load */
    long                load_recv;
} tmx_verbs_qp_t;

typedef struct tmx_verbs_ah {
    tmx_ah_t       super;
    struct ibv_ah *ibah;
} tmx_verbs_ah_t;

/* verbs_dev.c */
extern const tmx_prov_t tmx_verbs_prov;
/* For tests: CQs are made and polled as ibv_cq_ex even without TM (the path a TM device
 * takes). Read when a device is opened. */
extern int tmx_verbs_force_cq_ex;

tmx_status_t tmx_verbs_status(int err);
tmx_status_t tmx_verbs_obj_add(tmx_verbs_dev_t *dev, void *ptr, uint8_t type, uint32_t *obj_p,
                               uint16_t *gen_p);
void tmx_verbs_obj_del(tmx_verbs_dev_t *dev, uint32_t obj);
void *tmx_verbs_obj_get(tmx_verbs_dev_t *dev, uint32_t obj, unsigned gen, uint8_t type);
/* tmx_verbs_obj_get inline, for every completion */
static inline void *tmx_verbs_obj_at(const tmx_verbs_dev_t *dev, uint32_t obj, unsigned gen,
                                     uint8_t type)
{
    return obj < dev->num_objs && dev->objs[obj].gen == gen && dev->objs[obj].type == type
               ? dev->objs[obj].ptr
               : NULL;
}
tmx_status_t tmx_verbs_cq_load(tmx_verbs_cq_t *cq, long delta);
tmx_status_t tmx_verbs_wcq_push(tmx_verbs_wcq_t *q, const tmx_wc_t *wc);
/* Up to n completions of q into wc: how many. */
int tmx_verbs_wcq_pop(tmx_verbs_wcq_t *q, int n, tmx_wc_t *wc);
void tmx_verbs_cq_drain(tmx_verbs_cq_t *cq);
/* Checks a device address blob (or the device part of a QP blob) against dev: TMX_OK, or
 * TMX_ERR_INVALID_ADDR / TMX_ERR_UNREACHABLE with the reason logged. */
tmx_status_t tmx_verbs_addr_check(tmx_verbs_dev_t *dev, const tmx_verbs_dev_addr_t *a,
                                  const char *what);
void tmx_verbs_async_events(tmx_verbs_dev_t *dev);

/* verbs_qp.c */
/* Keepalive (once a second, from cq_poll and before a sleep): every connected QP that posted
 * nothing since the last round sends a zero-length RDMA WRITE, which touches no memory and
 * makes no completion at the peer, so that a peer that died is found (retry exceeded, then
 * TMX_WR_ID_ASYNC_ERROR) even by a process that only waits for it, as the soft device finds
 * it by its process id. Only once the peer QP is known to be up: the caller posted a send on
 * the QP (which would time out all the same if it were not), or a completion on it (a send
 * acknowledged, a message received) showed it. Before that it may not be ready yet (the side
 * that answers a connection request reaches RTS before the requester reaches RTR, and a write
 * to a QP in INIT is dropped, which would look like a dead peer). */
#define TMX_VERBS_KEEPALIVE_NS 1000000000ull
void tmx_verbs_keepalive(tmx_verbs_dev_t *dev);
tmx_status_t tmx_verbs_srq_create(tmx_pd_t *pd, const tmx_srq_init_attr_t *attr,
                                  tmx_srq_t **srq_p);
void tmx_verbs_srq_destroy(tmx_srq_t *srq);
tmx_status_t tmx_verbs_srq_post_recv(tmx_srq_t *srq, tmx_recv_wr_t *wr, tmx_recv_wr_t **bad_p);
tmx_status_t tmx_verbs_qp_create(tmx_pd_t *pd, const tmx_qp_init_attr_t *attr, tmx_qp_t **qp_p);
void tmx_verbs_qp_destroy(tmx_qp_t *qp);
tmx_status_t tmx_verbs_qp_get_addr(tmx_qp_t *qp, void *buf, size_t *len_p);
tmx_status_t tmx_verbs_qp_modify(tmx_qp_t *qp, const tmx_qp_attr_t *attr, unsigned attr_mask);
unsigned tmx_verbs_qp_data_in_order(tmx_qp_t *qp, tmx_wr_opcode_t op);
tmx_status_t tmx_verbs_post_send(tmx_qp_t *qp, tmx_send_wr_t *wr, tmx_send_wr_t **bad_p);
tmx_status_t tmx_verbs_post_recv(tmx_qp_t *qp, tmx_recv_wr_t *wr, tmx_recv_wr_t **bad_p);
tmx_status_t tmx_verbs_send_inline(tmx_qp_t *qp, const void *src, size_t n, uint32_t imm,
                                   unsigned flags, uint64_t wr_id);
int tmx_verbs_cq_poll(tmx_cq_t *cq, int n, tmx_wc_t *wc);
/* Up to n completions of the hardware queue only (the backlog stays), converted; a QP failure
 * seen goes to the backlog. >= 0, or a negative tmx_status_t. */
int tmx_verbs_cq_poll_hw(tmx_verbs_cq_t *cq, int n, tmx_wc_t *wc);
/* The QP went to error on its own: state ERR, and one TMX_WR_ID_ASYNC_ERROR on its send CQ. */
void tmx_verbs_qp_failed(tmx_verbs_qp_t *qp, tmx_wc_status_t status, const char *why);
tmx_verbs_qp_t *tmx_verbs_qp_by_num(tmx_verbs_dev_t *dev, uint32_t qpn);
/* Rebuilds the QP number table from the object table (after a QP is made or destroyed). */
tmx_status_t tmx_verbs_qpn_rebuild(tmx_verbs_dev_t *dev);
tmx_wc_status_t tmx_verbs_wc_status(enum ibv_wc_status s);
int tmx_verbs_rslot_get(tmx_verbs_rslots_t *rs, uint64_t wr_id, uint32_t *slot_p);
void tmx_verbs_rslot_put(tmx_verbs_rslots_t *rs, uint32_t slot);

/* verbs_tm.c: TM SRQ (TMX_VERBS_HAVE_TM) and XRC (TMX_VERBS_HAVE_XRC); stubs otherwise */
tmx_status_t tmx_verbs_tm_create(tmx_verbs_srq_t *srq, const tmx_srq_init_attr_t *attr);
void tmx_verbs_tm_destroy(tmx_verbs_srq_t *srq);
tmx_status_t tmx_verbs_srq_post_ops(tmx_srq_t *srq, tmx_srq_op_t *op, tmx_srq_op_t **bad_p);
/* A TM completion of srq (kind TM_OP or TM_RECV): 1 and *wc filled when it is the caller's,
 * 0 when the provider keeps it. */
int tmx_verbs_tm_wc(tmx_verbs_srq_t *srq, unsigned kind, uint32_t slot, tmx_wc_t *wc);
tmx_status_t tmx_verbs_xrcd_open(tmx_dev_t *dev, const tmx_xrcd_init_attr_t *attr,
                                 tmx_xrcd_t **xrcd_p);
void tmx_verbs_xrcd_close(tmx_xrcd_t *xrcd);
tmx_status_t tmx_verbs_srq_get_num(tmx_srq_t *srq, uint32_t *srqn_p);

#endif /* TMX_PROV_VERBS_H */
