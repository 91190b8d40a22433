/*
 * The verbs provider: the tag-matching SRQ (ibv_create_srq_ex with IBV_SRQT_TM,
 * ibv_post_srq_ops, the TM fields of ibv_cq_ex) and XRC (ibv_open_xrcd, IBV_SRQT_XRC,
 * ibv_get_srq_num), each compiled where rdma-core has it (configure) and used where the device
 * reports it; elsewhere the ops say TMX_ERR_UNSUPPORTED.
 *
 * The contract's list semantics (prov.h) are checked here before anything reaches the device,
 * since rdma-core's mlx5 answers a full op queue and a full list alike (ENOMEM) and does not
 * check a DEL's handle at all: a shadow of the list (which handles are in it, which have a DEL
 * outstanding, which a message consumed), the count of outstanding ops, and handles that are
 * the device's plus one (the contract's handles are never 0, mlx5's can be). Every op is
 * posted signaled, so that an op is outstanding exactly until its completion is polled, and a
 * completion the caller did not ask for (a successful unsignaled op) is not handed over.
 */
#define _GNU_SOURCE
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

#include "prov/verbs/verbs.h"
#include "util/log.h"

#ifdef TMX_VERBS_HAVE_TM

enum { TMX_VERBS_TAG_FREE = 0, TMX_VERBS_TAG_LIVE = 1, TMX_VERBS_TAG_CONSUMED = 2 };

typedef struct tmx_verbs_tag {
    uint8_t  state;
    uint8_t  del_out;   /* a DEL of it is outstanding */
    uint8_t  recv_done; /* its last receive completion was polled */
    uint32_t rslot;     /* its receive slot */
} tmx_verbs_tag_t;

typedef struct tmx_verbs_tm_rslot {
    uint64_t wr_id;  /* the caller's recv_wr_id */
    uint32_t handle; /* the device's */
} tmx_verbs_tm_rslot_t;

typedef struct tmx_verbs_tm_oslot {
    uint64_t wr_id;
    uint32_t handle;
    uint8_t  op;
    uint8_t  signaled; /* the caller asked for a completion */
} tmx_verbs_tm_oslot_t;

struct tmx_verbs_tm {
    uint32_t              max_num_tags;
    uint32_t              max_ops;
    uint32_t              num_tags;  /* handles the device may give: max_num_tags + 1 */
    tmx_verbs_tag_t      *tags;
    tmx_verbs_tm_rslot_t *rslots;
    uint32_t             *rfree;
    uint32_t              num_rfree;
    tmx_verbs_tm_oslot_t *oslots;
    uint32_t             *ofree;
    uint32_t              num_ofree;
    uint32_t              live;      /* entries in the list */
    uint32_t              ops_out;
    long                  load;      /* what the SRQ's CQ load holds for the list */
};

static void tmx_verbs_tm_free(tmx_verbs_tm_t *tm)
{
    if (tm != NULL) {
        free(tm->tags);
        free(tm->rslots);
        free(tm->rfree);
        free(tm->oslots);
        free(tm->ofree);
        free(tm);
    }
}

tmx_status_t tmx_verbs_tm_create(tmx_verbs_srq_t *srq, const tmx_srq_init_attr_t *attr)
{
    tmx_verbs_dev_t            *dev = (tmx_verbs_dev_t *)srq->super.pd->dev;
    const tmx_tm_caps_t        *caps = &dev->super.attr.tm;
    struct ibv_srq_init_attr_ex ia;
    tmx_verbs_tm_t             *tm;
    tmx_status_t                status;

    if (attr->max_num_tags == 0 || attr->max_num_tags > caps->max_num_tags ||
        attr->max_ops == 0 || attr->max_ops > caps->max_ops) {
        return TMX_ERR_INVALID_PARAM;
    }
    tm = calloc(1, sizeof(*tm));
    if (tm == NULL) {
        return TMX_ERR_NO_MEMORY;
    }
    tm->max_num_tags = attr->max_num_tags;
    tm->max_ops      = attr->max_ops;
    tm->num_tags     = attr->max_num_tags + 1;
    tm->tags         = calloc(tm->num_tags, sizeof(*tm->tags));
    tm->rslots       = calloc(tm->num_tags, sizeof(*tm->rslots));
    tm->rfree        = calloc(tm->num_tags, sizeof(*tm->rfree));
    tm->oslots       = calloc(tm->max_ops, sizeof(*tm->oslots));
    tm->ofree        = calloc(tm->max_ops, sizeof(*tm->ofree));
    if (tm->tags == NULL || tm->rslots == NULL || tm->rfree == NULL || tm->oslots == NULL ||
        tm->ofree == NULL) {
        tmx_verbs_tm_free(tm);
        return TMX_ERR_NO_MEMORY;
    }
    for (uint32_t i = 0; i < tm->num_tags; i++) {
        tm->rfree[tm->num_rfree++] = tm->num_tags - 1 - i;
    }
    for (uint32_t i = 0; i < tm->max_ops; i++) {
        tm->ofree[tm->num_ofree++] = tm->max_ops - 1 - i;
    }
    /* list ops and up to two completions per entry land on the SRQ's CQ too */
    tm->load = (long)tm->max_ops + 2L * tm->num_tags;
    status   = tmx_verbs_cq_load((tmx_verbs_cq_t *)attr->cq, tm->load);
    if (status != TMX_OK) {
        tmx_verbs_tm_free(tm);
        return status;
    }
    memset(&ia, 0, sizeof(ia));
    ia.srq_context         = srq;
    ia.attr.max_wr         = srq->max_wr;
    ia.attr.max_sge        = srq->max_sge;
    ia.comp_mask           = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_CQ |
                             IBV_SRQ_INIT_ATTR_TM;
    ia.srq_type            = IBV_SRQT_TM;
    ia.pd                  = ((tmx_verbs_pd_t *)srq->super.pd)->ibpd;
    ia.cq                  = ((tmx_verbs_cq_t *)attr->cq)->ibcq;
    ia.tm_cap.max_num_tags = tm->max_num_tags;
    ia.tm_cap.max_ops      = tm->max_ops;
    srq->ibsrq             = ibv_create_srq_ex(dev->ctx, &ia);
    if (srq->ibsrq == NULL) {
        status = tmx_verbs_status(errno);
        tmx_warn("verbs %s: TM SRQ (%u tags, %u ops): %s", dev->super.name, tm->max_num_tags,
                 tm->max_ops, strerror(errno));
        tmx_verbs_cq_load((tmx_verbs_cq_t *)attr->cq, -tm->load);
        tmx_verbs_tm_free(tm);
        return status;
    }
    srq->tm = tm;
    return TMX_OK;
}

void tmx_verbs_tm_destroy(tmx_verbs_srq_t *srq)
{
    if (srq->tm != NULL) {
        if (srq->super.cq != NULL) {
            tmx_verbs_cq_load((tmx_verbs_cq_t *)srq->super.cq, -srq->tm->load);
        }
        tmx_verbs_tm_free(srq->tm);
        srq->tm = NULL;
    }
}

static void tmx_verbs_tag_release(tmx_verbs_tm_t *tm, uint32_t h)
{
    tmx_verbs_tag_t *t = &tm->tags[h];

    if (t->state != TMX_VERBS_TAG_FREE) {
        tm->rfree[tm->num_rfree++] = t->rslot;
        tm->live--;
    }
    memset(t, 0, sizeof(*t));
}

/* Checks op against the contract; TMX_OK or the status it fails with (prov.h's order). */
static tmx_status_t tmx_verbs_tm_check(tmx_verbs_srq_t *srq, const tmx_srq_op_t *op)
{
    tmx_verbs_tm_t  *tm   = srq->tm;
    tmx_verbs_dev_t *dev  = (tmx_verbs_dev_t *)srq->super.pd->dev;

    switch (op->op) {
    case TMX_SRQ_OP_TM_ADD:
        if (op->num_sge < 0 || (uint32_t)op->num_sge > dev->super.attr.tm.max_sge ||
            (op->num_sge > 0 && op->sg_list == NULL) || (op->tag & ~op->mask) != 0) {
            return TMX_ERR_INVALID_PARAM;
        }
        break;
    case TMX_SRQ_OP_TM_DEL:
        if (op->handle == 0 || op->handle > tm->num_tags ||
            tm->tags[op->handle - 1].state == TMX_VERBS_TAG_FREE ||
            tm->tags[op->handle - 1].del_out) {
            return TMX_ERR_INVALID_PARAM;
        }
        break;
    case TMX_SRQ_OP_TM_SYNC:
        break;
    default:
        return TMX_ERR_INVALID_PARAM;
    }
    if ((op->flags & ~(unsigned)(TMX_OPS_SIGNALED | TMX_OPS_TM_SYNC)) != 0) {
        return TMX_ERR_INVALID_PARAM;
    }
    if (tm->ops_out == tm->max_ops || tm->num_ofree == 0) {
        return TMX_ERR_BUSY;
    }
    if (op->op == TMX_SRQ_OP_TM_ADD && (tm->live == tm->max_num_tags || tm->num_rfree == 0)) {
        return TMX_ERR_NO_RESOURCE;
    }
    return TMX_OK;
}

tmx_status_t tmx_verbs_srq_post_ops(tmx_srq_t *s, tmx_srq_op_t *op, tmx_srq_op_t **bad_p)
{
    tmx_verbs_srq_t *srq = (tmx_verbs_srq_t *)s;
    tmx_verbs_tm_t  *tm;
    tmx_srq_op_t    *dummy;

    if (bad_p == NULL) {
        bad_p = &dummy;
    }
    if (srq == NULL || srq->tm == NULL) {
        *bad_p = op;
        return srq == NULL || s->type != TMX_SRQT_TM ? TMX_ERR_INVALID_PARAM
                                                     : TMX_ERR_UNSUPPORTED;
    }
    tm = srq->tm;
    for (; op != NULL; op = op->next) {
        struct ibv_ops_wr w, *ibad;
        struct ibv_sge    sge[TMX_VERBS_MAX_SGE];
        tmx_status_t      status = tmx_verbs_tm_check(srq, op);
        uint32_t          oslot, rslot = 0;
        int               err;

        if (status != TMX_OK) {
            *bad_p = op;
            return status;
        }
        oslot = tm->ofree[--tm->num_ofree];
        memset(&w, 0, sizeof(w));
        w.wr_id             = TMX_VERBS_WRID(TMX_VERBS_WR_TM_OP, srq->gen, srq->obj, oslot);
        w.flags             = IBV_OPS_SIGNALED | ((op->flags & TMX_OPS_TM_SYNC) ? IBV_OPS_TM_SYNC : 0);
        w.tm.unexpected_cnt = op->unexpected_cnt;
        switch (op->op) {
        case TMX_SRQ_OP_TM_ADD:
            rslot = tm->rfree[--tm->num_rfree];
            w.opcode = IBV_WR_TAG_ADD;
            w.tm.add.recv_wr_id = TMX_VERBS_WRID(TMX_VERBS_WR_TM_RECV, srq->gen, srq->obj, rslot);
            for (int i = 0; i < op->num_sge; i++) {
                sge[i].addr   = op->sg_list[i].addr;
                sge[i].length = op->sg_list[i].length;
                sge[i].lkey   = op->sg_list[i].lkey;
            }
            w.tm.add.sg_list = sge;
            w.tm.add.num_sge = op->num_sge;
            w.tm.add.tag     = op->tag;
            w.tm.add.mask    = op->mask;
            break;
        case TMX_SRQ_OP_TM_DEL:
            w.opcode    = IBV_WR_TAG_DEL;
            w.tm.handle = op->handle - 1;
            break;
        default:
            w.opcode = IBV_WR_TAG_SYNC;
            break;
        }
        err = ibv_post_srq_ops(srq->ibsrq, &w, &ibad);
        if (err != 0) {
            tm->ofree[tm->num_ofree++] = oslot;
            if (op->op == TMX_SRQ_OP_TM_ADD) {
                tm->rfree[tm->num_rfree++] = rslot;
            }
            *bad_p = op;
            return tmx_verbs_status(err);
        }
        tm->ops_out++;
        tm->oslots[oslot].wr_id    = op->wr_id;
        tm->oslots[oslot].op       = (uint8_t)op->op;
        tm->oslots[oslot].signaled = (op->flags & TMX_OPS_SIGNALED) != 0;
        tm->oslots[oslot].handle   = UINT32_MAX;
        if (op->op == TMX_SRQ_OP_TM_ADD) {
            uint32_t h = w.tm.handle;
            if (h >= tm->num_tags || tm->tags[h].state != TMX_VERBS_TAG_FREE) {
                tmx_error("verbs: TM SRQ: the device gave handle %u, which the list does not "
                          "expect", h);
            } else {
                tm->tags[h].state      = TMX_VERBS_TAG_LIVE;
                tm->tags[h].rslot      = rslot;
                tm->rslots[rslot].wr_id  = op->recv_wr_id;
                tm->rslots[rslot].handle = h;
                tm->oslots[oslot].handle = h;
                tm->live++;
            }
            op->handle = h + 1;
        } else if (op->op == TMX_SRQ_OP_TM_DEL) {
            tm->tags[op->handle - 1].del_out = 1;
            tm->oslots[oslot].handle         = op->handle - 1;
        }
    }
    return TMX_OK;
}

int tmx_verbs_tm_wc(tmx_verbs_srq_t *srq, unsigned kind, uint32_t slot, tmx_wc_t *wc)
{
    tmx_verbs_tm_t *tm = srq->tm;

    if (kind == TMX_VERBS_WR_TM_OP) {
        tmx_verbs_tm_oslot_t *o;
        int                   deliver;

        if (slot >= tm->max_ops) {
            return 0;
        }
        o         = &tm->oslots[slot];
        wc->wr_id = o->wr_id;
        deliver   = o->signaled || wc->status != TMX_WC_SUCCESS;
        if (o->op == TMX_SRQ_OP_TM_DEL && o->handle < tm->num_tags) {
            tmx_verbs_tag_t *t = &tm->tags[o->handle];
            t->del_out         = 0;
            if (wc->status == TMX_WC_SUCCESS || t->recv_done) {
                tmx_verbs_tag_release(tm, o->handle); /* removed, or consumed and done */
            }
            if (wc->status == TMX_WC_TM_ERR) {
                deliver = 1; /* prov.h: a failed DEL always completes */
            }
        } else if (o->op == TMX_SRQ_OP_TM_ADD && wc->status != TMX_WC_SUCCESS &&
                   o->handle < tm->num_tags) {
            tmx_verbs_tag_release(tm, o->handle);
        }
        tm->ops_out--;
        tm->ofree[tm->num_ofree++] = slot;
        return deliver;
    }
    /* a tagged receive: MATCH, then (or with it) DATA_VALID, or an error */
    if (slot >= tm->num_tags) {
        return 0;
    }
    {
        uint32_t         h = tm->rslots[slot].handle;
        tmx_verbs_tag_t *t;

        if (h >= tm->num_tags || tm->tags[h].state == TMX_VERBS_TAG_FREE ||
            tm->tags[h].rslot != slot) {
            return 0;
        }
        t         = &tm->tags[h];
        wc->wr_id = tm->rslots[slot].wr_id;
        t->state  = TMX_VERBS_TAG_CONSUMED;
        if ((wc->wc_flags & TMX_WC_TM_DATA_VALID) || wc->status != TMX_WC_SUCCESS) {
            t->recv_done = 1;
            if (!t->del_out) {
                tmx_verbs_tag_release(tm, h);
            }
        }
        return 1;
    }
}

#else /* no TM in this rdma-core */

tmx_status_t tmx_verbs_tm_create(tmx_verbs_srq_t *srq, const tmx_srq_init_attr_t *attr)
{
    (void)srq;
    (void)attr;
    return TMX_ERR_UNSUPPORTED;
}

void tmx_verbs_tm_destroy(tmx_verbs_srq_t *srq)
{
    (void)srq;
}

tmx_status_t tmx_verbs_srq_post_ops(tmx_srq_t *srq, tmx_srq_op_t *op, tmx_srq_op_t **bad_p)
{
    return tmx_prov_unsupported_srq_post_ops(srq, op, bad_p);
}

int tmx_verbs_tm_wc(tmx_verbs_srq_t *srq, unsigned kind, uint32_t slot, tmx_wc_t *wc)
{
    (void)srq;
    (void)kind;
    (void)slot;
    (void)wc;
    return 0;
}

#endif /* TMX_VERBS_HAVE_TM */

/* ---------------------------------------------------------------- XRC */

tmx_status_t tmx_verbs_xrcd_open(tmx_dev_t *d, const tmx_xrcd_init_attr_t *attr,
                                 tmx_xrcd_t **xrcd_p)
{
    tmx_verbs_dev_t *dev = (tmx_verbs_dev_t *)d;

    if (attr == NULL || xrcd_p == NULL) {
        return TMX_ERR_INVALID_PARAM;
    }
    if (!dev->xrc) {
        return TMX_ERR_UNSUPPORTED;
    }
#ifdef TMX_VERBS_HAVE_XRC
    {
        struct ibv_xrcd_init_attr ia;
        tmx_verbs_xrcd_t         *x = calloc(1, sizeof(*x));

        if (x == NULL) {
            return TMX_ERR_NO_MEMORY;
        }
        memset(&ia, 0, sizeof(ia));
        ia.comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS;
        ia.fd        = -1; /* a domain of this process (one shared by a node takes a file) */
        ia.oflags    = O_CREAT;
        x->ibxrcd    = ibv_open_xrcd(dev->ctx, &ia);
        if (x->ibxrcd == NULL) {
            tmx_status_t status = tmx_verbs_status(errno);
            tmx_warn("verbs %s: ibv_open_xrcd: %s", d->name, strerror(errno));
            free(x);
            return status;
        }
        /* a domain of this process: sharing one by attr->key across the node's processes
         * (a file for ibv_open_xrcd, and qp_open) is not done yet */
        x->super.dev = d;
        x->super.key = attr->key;
        *xrcd_p      = &x->super;
        return TMX_OK;
    }
#else
    (void)xrcd_p;
    return TMX_ERR_UNSUPPORTED;
#endif
}

void tmx_verbs_xrcd_close(tmx_xrcd_t *xrcd)
{
#ifdef TMX_VERBS_HAVE_XRC
    tmx_verbs_xrcd_t *x = (tmx_verbs_xrcd_t *)xrcd;

    if (x != NULL) {
        if (ibv_close_xrcd(x->ibxrcd) != 0) {
            tmx_warn("verbs: ibv_close_xrcd: %s", strerror(errno));
        }
        free(x);
    }
#else
    (void)xrcd;
#endif
}

tmx_status_t tmx_verbs_srq_get_num(tmx_srq_t *s, uint32_t *srqn_p)
{
    tmx_verbs_srq_t *srq = (tmx_verbs_srq_t *)s;

    if (srq == NULL || srqn_p == NULL) {
        return TMX_ERR_INVALID_PARAM;
    }
    if (!((tmx_verbs_dev_t *)s->pd->dev)->xrc) {
        return TMX_ERR_UNSUPPORTED;
    }
    if (s->type != TMX_SRQT_XRC) {
        return TMX_ERR_INVALID_PARAM;
    }
#ifdef TMX_VERBS_HAVE_XRC
    {
        int err = ibv_get_srq_num(srq->ibsrq, srqn_p);
        return err == 0 ? TMX_OK : tmx_verbs_status(err);
    }
#else
    return TMX_ERR_UNSUPPORTED;
#endif
}
