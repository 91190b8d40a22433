/*
 * The verbs provider: shared receive queues, queue pairs (RESET -> INIT -> RTR -> RTS by
 * address blob), posting, and polling completions into tmx_wc_t. See verbs.h for the work
 * request ids and the CQ backlog.
 */
#define _GNU_SOURCE
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#ifdef TMX_VERBS_HAVE_MLX5DV_OOO
#include <infiniband/mlx5dv.h>
#endif

#include "prov/verbs/verbs.h"
#include "util/log.h"
#include "util/time.h"

/* RC transport: the ACK timeout is TMX_VERBS_ACK_TIMEOUT (default 67 ms, 4.096 us * 2^14) and
 * a request is retried 6 times, so by default a peer that died is found within half a second
 * of traffic to it (InfiniBand allows 7,
 * but rxe takes 7 as "retry forever"); receiver-not-ready is retried without end (the peer
 * posts receives again as it polls). */
#define TMX_VERBS_RETRY_CNT   6 /* rxe retries 7 without end */
#define TMX_VERBS_RNR_RETRY   7
#define TMX_VERBS_MIN_RNR     12 /* 0.64 ms */

static inline void tmx_verbs_ka_seen(struct tmx_verbs_qp *qp);

/* ---------------------------------------------------------------- receive slots */

static tmx_status_t tmx_verbs_rslots_init(tmx_verbs_rslots_t *rs, uint32_t cap)
{
    rs->cap      = cap;
    rs->num_free = cap;
    rs->wr_id    = calloc(cap ? cap : 1, sizeof(*rs->wr_id));
    rs->free     = calloc(cap ? cap : 1, sizeof(*rs->free));
    if (rs->wr_id == NULL || rs->free == NULL) {
        free(rs->wr_id);
        free(rs->free);
        return TMX_ERR_NO_MEMORY;
    }
    for (uint32_t i = 0; i < cap; i++) {
        rs->free[i] = cap - 1 - i;
    }
    return TMX_OK;
}

static void tmx_verbs_rslots_cleanup(tmx_verbs_rslots_t *rs)
{
    free(rs->wr_id);
    free(rs->free);
    memset(rs, 0, sizeof(*rs));
}

static void tmx_verbs_rslots_reset(tmx_verbs_rslots_t *rs)
{
    rs->num_free = rs->cap;
    for (uint32_t i = 0; i < rs->cap; i++) {
        rs->free[i] = rs->cap - 1 - i;
    }
}

int tmx_verbs_rslot_get(tmx_verbs_rslots_t *rs, uint64_t wr_id, uint32_t *slot_p)
{
    if (rs->num_free == 0) {
        return 0;
    }
    *slot_p            = rs->free[--rs->num_free];
    rs->wr_id[*slot_p] = wr_id;
    return 1;
}

void tmx_verbs_rslot_put(tmx_verbs_rslots_t *rs, uint32_t slot)
{
    if (slot < rs->cap && rs->num_free < rs->cap) {
        rs->free[rs->num_free++] = slot;
    }
}

/* ---------------------------------------------------------------- SRQ */

static int tmx_verbs_srq_counts(tmx_verbs_srq_t *srq, tmx_verbs_cq_t *cq)
{
    for (unsigned i = 0; i < srq->num_counted; i++) {
        if (srq->counted[i] == cq) {
            return 1;
        }
    }
    return 0;
}

/* Receives of srq may complete on cq: its load counts them once. */
static tmx_status_t tmx_verbs_srq_count(tmx_verbs_srq_t *srq, tmx_verbs_cq_t *cq)
{
    tmx_status_t status;

    if (cq == NULL || tmx_verbs_srq_counts(srq, cq)) {
        return TMX_OK;
    }
    if (srq->num_counted == sizeof(srq->counted) / sizeof(srq->counted[0])) {
        return TMX_ERR_NO_RESOURCE;
    }
    status = tmx_verbs_cq_load(cq, srq->max_wr);
    if (status == TMX_OK) {
        srq->counted[srq->num_counted++] = cq;
    }
    return status;
}

tmx_status_t tmx_verbs_srq_create(tmx_pd_t *pd, const tmx_srq_init_attr_t *attr,
                                  tmx_srq_t **srq_p)
{
    tmx_verbs_dev_t *dev = (tmx_verbs_dev_t *)pd->dev;
    tmx_verbs_srq_t *srq;
    tmx_status_t     status;

    if (attr == NULL) {
        return TMX_ERR_INVALID_PARAM;
    }
    if ((attr->type == TMX_SRQT_TM && !dev->tm) || (attr->type == TMX_SRQT_XRC && !dev->xrc) ||
        (unsigned)attr->type > TMX_SRQT_XRC) {
        return TMX_ERR_UNSUPPORTED;
    }
    if (attr->max_wr == 0 || attr->max_wr > dev->super.attr.max_srq_wr ||
        attr->max_sge > dev->max_send_sge ||
        (attr->type != TMX_SRQT_BASIC && attr->cq == NULL) ||
        (attr->type == TMX_SRQT_XRC && attr->xrcd == NULL)) {
        return TMX_ERR_INVALID_PARAM;
    }
    srq = calloc(1, sizeof(*srq));
    if (srq == NULL) {
        return TMX_ERR_NO_MEMORY;
    }
    srq->super.pd = pd;
    srq->max_wr   = attr->max_wr;
    srq->max_sge  = attr->max_sge ? attr->max_sge : 1;
    status = tmx_verbs_rslots_init(&srq->rs, srq->max_wr);
    if (status != TMX_OK) {
        goto err_free;
    }
    status = tmx_verbs_obj_add(dev, srq, TMX_VERBS_OBJ_SRQ, &srq->obj, &srq->gen);
    if (status != TMX_OK) {
        goto err_slots;
    }
    status = tmx_verbs_srq_count(srq, (tmx_verbs_cq_t *)attr->cq);
    if (status != TMX_OK) {
        goto err_obj;
    }
    if (attr->type == TMX_SRQT_TM) {
        status = tmx_verbs_tm_create(srq, attr);
        if (status != TMX_OK) {
            goto err_load;
        }
    } else if (attr->type == TMX_SRQT_XRC) {
#ifdef TMX_VERBS_HAVE_XRC
        struct ibv_srq_init_attr_ex ia;

        memset(&ia, 0, sizeof(ia));
        ia.srq_context   = srq;
        ia.attr.max_wr   = srq->max_wr;
        ia.attr.max_sge  = srq->max_sge;
        ia.comp_mask     = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD |
                           IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ;
        ia.srq_type      = IBV_SRQT_XRC;
        ia.pd            = ((tmx_verbs_pd_t *)pd)->ibpd;
        ia.xrcd          = ((tmx_verbs_xrcd_t *)attr->xrcd)->ibxrcd;
        ia.cq            = ((tmx_verbs_cq_t *)attr->cq)->ibcq;
        srq->ibsrq       = ibv_create_srq_ex(dev->ctx, &ia);
#endif
        if (srq->ibsrq == NULL) {
            status = tmx_verbs_status(errno);
            tmx_warn("verbs %s: XRC SRQ: %s", dev->super.name, strerror(errno));
            goto err_load;
        }
    } else {
        struct ibv_srq_init_attr ia;

        memset(&ia, 0, sizeof(ia));
        ia.srq_context  = srq;
        ia.attr.max_wr  = srq->max_wr;
        ia.attr.max_sge = srq->max_sge;
        srq->ibsrq      = ibv_create_srq(((tmx_verbs_pd_t *)pd)->ibpd, &ia);
        if (srq->ibsrq == NULL) {
            status = tmx_verbs_status(errno);
            tmx_warn("verbs %s: SRQ of %u entries: %s", dev->super.name, srq->max_wr,
                     strerror(errno));
            goto err_load;
        }
    }
    srq->super.pd   = pd;
    srq->super.type = attr->type;
    srq->super.cq   = attr->cq;
    *srq_p          = &srq->super;
    return TMX_OK;

err_load:
    for (unsigned i = 0; i < srq->num_counted; i++) {
        tmx_verbs_cq_load(srq->counted[i], -(long)srq->max_wr);
    }
err_obj:
    tmx_verbs_obj_del(dev, srq->obj);
err_slots:
    tmx_verbs_rslots_cleanup(&srq->rs);
err_free:
    free(srq);
    return status;
}

void tmx_verbs_srq_destroy(tmx_srq_t *s)
{
    tmx_verbs_srq_t *srq = (tmx_verbs_srq_t *)s;
    tmx_verbs_dev_t *dev;

    if (srq == NULL) {
        return;
    }
    dev = (tmx_verbs_dev_t *)s->pd->dev;
    /* what already completed reaches the caller: converted now, into the backlogs */
    for (unsigned i = 0; i < srq->num_counted; i++) {
        tmx_verbs_cq_drain(srq->counted[i]);
    }
    if (ibv_destroy_srq(srq->ibsrq) != 0) {
        tmx_warn("verbs %s: SRQ still in use at destroy: %s", dev->super.name, strerror(errno));
    }
    for (unsigned i = 0; i < srq->num_counted; i++) {
        tmx_verbs_cq_drain(srq->counted[i]);
        tmx_verbs_cq_load(srq->counted[i], -(long)srq->max_wr);
    }
    tmx_verbs_tm_destroy(srq);
    tmx_verbs_obj_del(dev, srq->obj);
    tmx_verbs_rslots_cleanup(&srq->rs);
    free(srq);
}

/* Fills iwr/isge from a contract receive chain of up to TMX_VERBS_POLL_BATCH work requests;
 * returns how many, with *status set when the next one is refused. */
static int tmx_verbs_recv_batch(tmx_verbs_rslots_t *rs, unsigned kind, unsigned gen,
                                uint32_t obj, uint32_t max_sge, const struct ibv_sge *grh,
                                tmx_recv_wr_t *wr, struct ibv_recv_wr *iwr,
                                struct ibv_sge (*isge)[TMX_VERBS_MAX_SGE + 1],
                                tmx_status_t *status)
{
    int n = 0;

    *status = TMX_OK;
    for (; wr != NULL && n < TMX_VERBS_POLL_BATCH; wr = wr->next, n++) {
        uint32_t slot;
        int      k = 0;

        if (wr->num_sge < 0 || (uint32_t)wr->num_sge > max_sge ||
            (wr->num_sge > 0 && wr->sg_list == NULL)) {
            *status = TMX_ERR_INVALID_PARAM;
            break;
        }
        if (!tmx_verbs_rslot_get(rs, wr->wr_id, &slot)) {
            *status = TMX_ERR_NO_RESOURCE;
            break;
        }
        if (grh != NULL) {
            isge[n][k++] = *grh;
        }
        for (int i = 0; i < wr->num_sge; i++, k++) {
            isge[n][k].addr   = wr->sg_list[i].addr;
            isge[n][k].length = wr->sg_list[i].length;
            isge[n][k].lkey   = wr->sg_list[i].lkey;
        }
        iwr[n].wr_id   = TMX_VERBS_WRID(kind, gen, obj, slot);
        iwr[n].next    = NULL;
        iwr[n].sg_list = isge[n];
        iwr[n].num_sge = k;
        if (n > 0) {
            iwr[n - 1].next = &iwr[n];
        }
    }
    return n;
}

/* A QP in RESET takes receives (the contract allows what verbs refuses): they wait in
 * qp->early and go to the device at INIT. */
static tmx_status_t tmx_verbs_recv_early(tmx_verbs_qp_t *qp, struct ibv_recv_wr *iwr, int n)
{
    if (qp->early == NULL) {
        qp->early     = calloc(qp->rq_depth, sizeof(*qp->early));
        qp->early_sge = calloc((size_t)qp->rq_depth * (TMX_VERBS_MAX_SGE + 1),
                               sizeof(*qp->early_sge));
        if (qp->early == NULL || qp->early_sge == NULL) {
            free(qp->early);
            free(qp->early_sge);
            qp->early     = NULL;
            qp->early_sge = NULL;
            return TMX_ERR_NO_MEMORY;
        }
    }
    for (int i = 0; i < n; i++) {
        /* the slots bound the count: at most rq_depth receives are outstanding */
        struct ibv_recv_wr *e   = &qp->early[qp->num_early];
        struct ibv_sge     *sge = &qp->early_sge[(size_t)qp->num_early * (TMX_VERBS_MAX_SGE + 1)];

        memcpy(sge, iwr[i].sg_list, (size_t)iwr[i].num_sge * sizeof(*sge));
        e->wr_id   = iwr[i].wr_id;
        e->next    = NULL;
        e->sg_list = sge;
        e->num_sge = iwr[i].num_sge;
        qp->num_early++;
    }
    return TMX_OK;
}

/* INIT: the receives posted in RESET go to the device. */
static tmx_status_t tmx_verbs_recv_early_flush(tmx_verbs_qp_t *qp)
{
    struct ibv_recv_wr *bad;
    int                 err;

    if (qp->num_early == 0) {
        return TMX_OK;
    }
    for (uint32_t i = 0; i + 1 < qp->num_early; i++) {
        qp->early[i].next = &qp->early[i + 1];
    }
    qp->early[qp->num_early - 1].next = NULL;
    err = ibv_post_recv(qp->ibqp, qp->early, &bad);
    if (err != 0) {
        tmx_warn("verbs %s: QP %u: posting the receives taken in RESET: %s",
                 qp->dev->super.name, qp->super.qp_num, strerror(err));
        return tmx_verbs_status(err);
    }
    qp->num_early = 0;
    return TMX_OK;
}

/* Posts a contract receive chain to a QP (qp != NULL) or an SRQ. */
static tmx_status_t tmx_verbs_recv_post(tmx_verbs_qp_t *qp, tmx_verbs_srq_t *srq,
                                        tmx_recv_wr_t *wr, tmx_recv_wr_t **bad_p)
{
    struct ibv_recv_wr  iwr[TMX_VERBS_POLL_BATCH], *ibad;
    struct ibv_sge      isge[TMX_VERBS_POLL_BATCH][TMX_VERBS_MAX_SGE + 1];
    struct ibv_sge      grh;
    tmx_verbs_rslots_t *rs = qp != NULL ? &qp->rs : &srq->rs;

    if (qp != NULL && qp->grh_mr != NULL) {
        grh.addr   = (uintptr_t)qp->grh_buf;
        grh.length = TMX_VERBS_GRH;
        grh.lkey   = qp->grh_mr->lkey;
    }
    while (wr != NULL) {
        tmx_status_t   bstatus;
        int            n, err;
        tmx_recv_wr_t *next;

        if (qp != NULL) {
            n = tmx_verbs_recv_batch(rs, TMX_VERBS_WR_RECV, qp->gen, qp->obj,
                                     qp->max_recv_sge - (qp->grh_mr != NULL),
                                     qp->grh_mr != NULL ? &grh : NULL, wr, iwr, isge, &bstatus);
        } else {
            n = tmx_verbs_recv_batch(rs, TMX_VERBS_WR_SRECV, srq->gen, srq->obj, srq->max_sge,
                                     NULL, wr, iwr, isge, &bstatus);
        }
        next = wr;
        for (int i = 0; i < n; i++) {
            next = next->next;
        }
        if (n > 0) {
            if (qp != NULL && qp->super.state == TMX_QPS_RESET) {
                err  = 0;
                ibad = iwr;
                if (tmx_verbs_recv_early(qp, iwr, n) != TMX_OK) {
                    err = ENOMEM;
                }
            } else {
                ibad = NULL;
                err  = qp != NULL ? ibv_post_recv(qp->ibqp, iwr, &ibad)
                                  : ibv_post_srq_recv(srq->ibsrq, iwr, &ibad);
            }
            if (err != 0) {
                int k = ibad != NULL && ibad >= iwr && ibad < iwr + n ? (int)(ibad - iwr) : 0;
                for (int i = k; i < n; i++) {
                    tmx_verbs_rslot_put(rs, TMX_VERBS_WRID_SLOT(iwr[i].wr_id));
                }
                for (int i = 0; i < k; i++) {
                    wr = wr->next;
                }
                *bad_p = wr;
                return err == ENOMEM ? TMX_ERR_NO_RESOURCE : tmx_verbs_status(err);
            }
        }
        if (bstatus != TMX_OK) {
            *bad_p = next;
            return bstatus;
        }
        wr = next;
    }
    return TMX_OK;
}

tmx_status_t tmx_verbs_srq_post_recv(tmx_srq_t *s, tmx_recv_wr_t *wr, tmx_recv_wr_t **bad_p)
{
    tmx_recv_wr_t *bad = NULL;

    if (s == NULL) {
        return TMX_ERR_INVALID_PARAM;
    }
    return tmx_verbs_recv_post(NULL, (tmx_verbs_srq_t *)s, wr, bad_p != NULL ? bad_p : &bad);
}

/* ---------------------------------------------------------------- QP */

static uint32_t tmx_verbs_pow2(uint32_t v)
{
    uint32_t p = 1;

    while (p < v) {
        p <<= 1;
    }
    return p;
}

/* The QP attribute for TMX_VERBS_ACK_TIMEOUT: the least n (1..31) with 4.096 us x 2^n at
 * least the seconds asked for (0 would mean "wait for ever"). */
static uint8_t tmx_verbs_ack_timeout(double sec)
{
    uint8_t n = 1;

    while (n < 31 && 4.096e-6 * (double)(1u << n) < sec) {
        n++;
    }
    return n;
}

static uint32_t tmx_verbs_psn(tmx_verbs_dev_t *dev)
{
    dev->rng ^= dev->rng >> 12;
    dev->rng ^= dev->rng << 25;
    dev->rng ^= dev->rng >> 27;
    return (uint32_t)((dev->rng * 0x2545f4914f6cdd1dull) >> 40) & 0xffffffu;
}

static enum ibv_qp_type tmx_verbs_ibv_qpt(tmx_qp_type_t t)
{
    switch (t) {
    case TMX_QPT_UD:
        return IBV_QPT_UD;
#ifdef TMX_VERBS_HAVE_XRC
    case TMX_QPT_XRC_INI:
        return IBV_QPT_XRC_SEND;
    case TMX_QPT_XRC_TGT:
        return IBV_QPT_XRC_RECV;
#endif
    default:
        return IBV_QPT_RC;
    }
}

tmx_status_t tmx_verbs_qp_create(tmx_pd_t *pd, const tmx_qp_init_attr_t *attr, tmx_qp_t **qp_p)
{
    tmx_verbs_dev_t           *dev = (tmx_verbs_dev_t *)pd->dev;
    tmx_verbs_srq_t           *srq;
    tmx_verbs_cq_t            *scq, *rcq;
    tmx_verbs_qp_t            *qp;
    struct ibv_qp_init_attr_ex ia;
    tmx_status_t               status;
    int                        has_send, has_recv;

    if (attr == NULL || (unsigned)attr->type > TMX_QPT_XRC_TGT) {
        return TMX_ERR_INVALID_PARAM;
    }
    if ((attr->type == TMX_QPT_XRC_INI || attr->type == TMX_QPT_XRC_TGT) && !dev->xrc) {
        return TMX_ERR_UNSUPPORTED;
    }
    srq      = (tmx_verbs_srq_t *)attr->srq;
    has_send = attr->type != TMX_QPT_XRC_TGT;
    has_recv = attr->type == TMX_QPT_RC || attr->type == TMX_QPT_UD;
    if ((has_send && attr->send_cq == NULL) || (has_recv && attr->recv_cq == NULL) ||
        attr->max_send_wr > dev->super.attr.max_qp_wr ||
        attr->max_recv_wr > dev->super.attr.max_qp_wr ||
        attr->max_inline > dev->super.attr.max_inline ||
        (attr->type == TMX_QPT_XRC_TGT && attr->xrcd == NULL) ||
        (srq != NULL && srq->super.type == TMX_SRQT_TM && attr->type != TMX_QPT_RC) ||
        (srq != NULL && srq->super.type == TMX_SRQT_XRC) ||
        (srq != NULL && attr->type != TMX_QPT_RC)) {
        return TMX_ERR_INVALID_PARAM; /* TM traffic travels on RC; a UD QP has its own RQ */
    }
    qp = calloc(1, sizeof(*qp));
    if (qp == NULL) {
        return TMX_ERR_NO_MEMORY;
    }
    qp->dev      = dev;
    qp->sig_all  = attr->sq_sig_all;
    qp->no_sq    = !has_send || attr->max_send_wr == 0;
    qp->sq_depth = qp->no_sq ? 1 : tmx_verbs_pow2(attr->max_send_wr);
    qp->rq_depth = has_recv && srq == NULL ? (attr->max_recv_wr ? attr->max_recv_wr : 1) : 0;
    qp->ooo      = dev->ooo && attr->type == TMX_QPT_RC;
    qp->sq       = calloc(qp->sq_depth, sizeof(*qp->sq));
    if (qp->sq == NULL) {
        status = TMX_ERR_NO_MEMORY;
        goto err_free;
    }
    status = tmx_verbs_rslots_init(&qp->rs, qp->rq_depth);
    if (status != TMX_OK) {
        goto err_free;
    }
    status = tmx_verbs_obj_add(dev, qp, TMX_VERBS_OBJ_QP, &qp->obj, &qp->gen);
    if (status != TMX_OK) {
        goto err_slots;
    }
    qp->wrid_send      = TMX_VERBS_WRID(TMX_VERBS_WR_SEND, qp->gen, qp->obj, 0);
    qp->inl_wr.sg_list = &qp->inl_sge; /* the rest of inl_wr and inl_sge: calloc's zeros */
    qp->inl_wr.opcode  = IBV_WR_SEND_WITH_IMM;
    scq = (tmx_verbs_cq_t *)attr->send_cq;
    rcq = (tmx_verbs_cq_t *)attr->recv_cq;
    /* the CQs grow first: a QP never makes one overflow */
    if (has_send && !qp->no_sq) {
        status = tmx_verbs_cq_load(scq, qp->sq_depth);
        if (status != TMX_OK) {
            goto err_obj;
        }
        qp->load_send = qp->sq_depth;
    }
    if (has_recv && srq == NULL) {
        status = tmx_verbs_cq_load(rcq, qp->rq_depth);
        if (status != TMX_OK) {
            goto err_load;
        }
        qp->load_recv = qp->rq_depth;
    } else if (srq != NULL) {
        status = tmx_verbs_srq_count(srq, rcq);
        if (status != TMX_OK) {
            goto err_load;
        }
    }
    if (attr->type == TMX_QPT_UD) {
        qp->grh_buf = calloc(1, 64);
        qp->grh_mr  = qp->grh_buf != NULL ? ibv_reg_mr(((tmx_verbs_pd_t *)pd)->ibpd, qp->grh_buf,
                                                       64, IBV_ACCESS_LOCAL_WRITE)
                                          : NULL;
        if (qp->grh_mr == NULL) {
            status = qp->grh_buf == NULL ? TMX_ERR_NO_MEMORY : tmx_verbs_status(errno);
            goto err_load;
        }
    }

    memset(&ia, 0, sizeof(ia));
    ia.qp_context          = qp;
    ia.send_cq             = has_send ? scq->ibcq : NULL;
    ia.recv_cq             = has_recv ? rcq->ibcq : (has_send ? scq->ibcq : NULL);
    ia.srq                 = srq != NULL ? srq->ibsrq : NULL;
    ia.qp_type             = tmx_verbs_ibv_qpt(attr->type);
    ia.sq_sig_all          = attr->sq_sig_all != 0;
    ia.comp_mask           = IBV_QP_INIT_ATTR_PD;
    ia.pd                  = ((tmx_verbs_pd_t *)pd)->ibpd;
    if (has_send) {
        /* a TM QP has no send queue of ours (mlx5 takes 0); elsewhere one entry */
        ia.cap.max_send_wr     = qp->no_sq ? (srq != NULL && srq->tm != NULL ? 0 : 1)
                                           : qp->sq_depth;
        ia.cap.max_send_sge    = dev->max_send_sge;
        ia.cap.max_inline_data = qp->no_sq ? 0 : (uint32_t)dev->super.attr.max_inline;
    }
    if (has_recv && srq == NULL) {
        ia.cap.max_recv_wr  = qp->rq_depth;
        ia.cap.max_recv_sge = attr->type == TMX_QPT_UD ? dev->max_recv_sge
                                                       : (dev->max_recv_sge < TMX_VERBS_MAX_SGE
                                                              ? dev->max_recv_sge
                                                              : TMX_VERBS_MAX_SGE);
    }
#ifdef TMX_VERBS_HAVE_XRC
    if (attr->type == TMX_QPT_XRC_TGT) {
        ia.comp_mask = IBV_QP_INIT_ATTR_XRCD;
        ia.xrcd      = ((tmx_verbs_xrcd_t *)attr->xrcd)->ibxrcd;
    }
#endif
#ifdef TMX_VERBS_HAVE_MLX5DV_OOO
    if (qp->ooo) {
        struct mlx5dv_qp_init_attr dv;

        memset(&dv, 0, sizeof(dv));
        dv.comp_mask    = MLX5DV_QP_INIT_ATTR_MASK_QP_CREATE_FLAGS;
        dv.create_flags = MLX5DV_QP_CREATE_OOO_DP;
        qp->ibqp        = mlx5dv_create_qp(dev->ctx, &ia, &dv);
    } else
#endif
    {
#if HAVE_DECL_IBV_CREATE_QP_EX
        qp->ibqp = ibv_create_qp_ex(dev->ctx, &ia);
#else
        qp->ibqp = ibv_create_qp(ia.pd, (struct ibv_qp_init_attr *)&ia);
#endif
    }
    if (qp->ibqp == NULL) {
        status = tmx_verbs_status(errno);
        tmx_warn("verbs %s: cannot create a QP (send %u, recv %u, inline %u): %s",
                 dev->super.name, ia.cap.max_send_wr, ia.cap.max_recv_wr,
                 ia.cap.max_inline_data, strerror(errno));
        goto err_grh;
    }
    qp->max_inline   = ia.cap.max_inline_data;
    qp->max_send_sge = ia.cap.max_send_sge < TMX_VERBS_MAX_SGE ? ia.cap.max_send_sge
                                                               : TMX_VERBS_MAX_SGE;
    qp->max_recv_sge = ia.cap.max_recv_sge < TMX_VERBS_MAX_SGE + 1 ? ia.cap.max_recv_sge
                                                                   : TMX_VERBS_MAX_SGE + 1;
    qp->psn           = tmx_verbs_psn(dev);
    qp->super.pd      = pd;
    qp->super.type    = attr->type;
    qp->super.state   = TMX_QPS_RESET;
    qp->super.qp_num  = qp->ibqp->qp_num;
    qp->super.send_cq = attr->send_cq;
    qp->super.recv_cq = attr->recv_cq;
    qp->super.srq     = attr->srq;
    if (tmx_verbs_qpn_rebuild(dev) != TMX_OK) {
        ibv_destroy_qp(qp->ibqp);
        status = TMX_ERR_NO_MEMORY;
        goto err_grh;
    }
    *qp_p             = &qp->super;
    return TMX_OK;

err_grh:
    if (qp->grh_mr != NULL) {
        ibv_dereg_mr(qp->grh_mr);
    }
err_load:
    if (qp->load_send > 0) {
        tmx_verbs_cq_load(scq, -qp->load_send);
    }
    if (qp->load_recv > 0) {
        tmx_verbs_cq_load(rcq, -qp->load_recv);
    }
err_obj:
    tmx_verbs_obj_del(dev, qp->obj);
err_slots:
    tmx_verbs_rslots_cleanup(&qp->rs);
err_free:
    free(qp->grh_buf);
    free(qp->sq);
    free(qp);
    return status;
}

/* Moves the completions in qp's CQs to their backlogs (while qp still converts them). */
static void tmx_verbs_qp_drain(tmx_verbs_qp_t *qp)
{
    if (qp->super.send_cq != NULL) {
        tmx_verbs_cq_drain((tmx_verbs_cq_t *)qp->super.send_cq);
    }
    if (qp->super.recv_cq != NULL && qp->super.recv_cq != qp->super.send_cq) {
        tmx_verbs_cq_drain((tmx_verbs_cq_t *)qp->super.recv_cq);
    }
}

void tmx_verbs_qp_destroy(tmx_qp_t *q)
{
    tmx_verbs_qp_t *qp = (tmx_verbs_qp_t *)q;

    if (qp == NULL) {
        return;
    }
    /* Before (some providers drop a destroyed QP's entries) and after (others may still
     * write some): what completed reaches the caller as with the soft device. */
    tmx_verbs_qp_drain(qp);
    if (ibv_destroy_qp(qp->ibqp) != 0) {
        tmx_warn("verbs %s: destroying QP %u: %s", qp->dev->super.name, q->qp_num,
                 strerror(errno));
    }
    tmx_verbs_qp_drain(qp);
    if (qp->load_send > 0) {
        tmx_verbs_cq_load((tmx_verbs_cq_t *)q->send_cq, -qp->load_send);
    }
    if (qp->load_recv > 0) {
        tmx_verbs_cq_load((tmx_verbs_cq_t *)q->recv_cq, -qp->load_recv);
    }
    if (qp->grh_mr != NULL) {
        ibv_dereg_mr(qp->grh_mr);
    }
    if (qp->bounce_mr != NULL) {
        ibv_dereg_mr(qp->bounce_mr);
    }
    free(qp->bounce);
    if (q->state == TMX_QPS_RTS && !qp->ka_on) {
        qp->dev->ka_waiting--;
    }
    tmx_verbs_obj_del(qp->dev, qp->obj);
    tmx_verbs_qpn_rebuild(qp->dev);
    tmx_verbs_rslots_cleanup(&qp->rs);
    free(qp->early);
    free(qp->early_sge);
    free(qp->grh_buf);
    free(qp->sq);
    free(qp);
}

tmx_status_t tmx_verbs_qp_get_addr(tmx_qp_t *q, void *buf, size_t *len_p)
{
    tmx_verbs_qp_t     *qp = (tmx_verbs_qp_t *)q;
    tmx_verbs_qp_addr_t a;

    if (qp == NULL || buf == NULL || len_p == NULL || *len_p < sizeof(a)) {
        return TMX_ERR_INVALID_PARAM;
    }
    memset(&a, 0, sizeof(a));
    a.magic   = TMX_VERBS_QP_MAGIC;
    a.version = TMX_VERBS_VERSION;
    a.len     = sizeof(a);
    a.qpn     = q->qp_num;
    a.psn     = qp->psn;
    a.qp_type = (uint8_t)q->type;
    a.flags   = qp->ooo ? TMX_VERBS_QPF_OOO : 0;
    a.dev     = qp->dev->addr;
    memcpy(buf, &a, sizeof(a));
    *len_p = sizeof(a);
    return TMX_OK;
}

/* The peer of a QP of type t is of this type. */
static tmx_qp_type_t tmx_verbs_peer_type(tmx_qp_type_t t)
{
    return t == TMX_QPT_XRC_INI ? TMX_QPT_XRC_TGT : t == TMX_QPT_XRC_TGT ? TMX_QPT_XRC_INI : t;
}

/* INIT -> RTR of a connected QP, to the peer QP of the blob (checked first). */
static tmx_status_t tmx_verbs_qp_rtr(tmx_verbs_qp_t *qp, const tmx_qp_attr_t *attr)
{
    tmx_verbs_dev_t    *dev = qp->dev;
    tmx_verbs_qp_addr_t a;
    struct ibv_qp_attr  m;
    tmx_status_t        status;
    int                 err;

    if (attr->remote_addr == NULL || attr->remote_addr_len != sizeof(a)) {
        tmx_warn("verbs %s: QP %u: a peer QP address of %zu bytes%s refused (want %zu)",
                 dev->super.name, qp->super.qp_num, attr->remote_addr_len,
                 attr->remote_addr == NULL ? " at NULL" : "", sizeof(a));
        return TMX_ERR_INVALID_ADDR;
    }
    memcpy(&a, attr->remote_addr, sizeof(a));
    if (a.magic != TMX_VERBS_QP_MAGIC || a.version != TMX_VERBS_VERSION || a.len != sizeof(a)) {
        tmx_warn("verbs %s: QP %u: peer QP address refused: %s", dev->super.name,
                 qp->super.qp_num,
                 a.magic != TMX_VERBS_QP_MAGIC ? "not a verbs QP address (another provider's, "
                                                 "or garbage)"
                                               : "a verbs QP address of another version");
        return TMX_ERR_INVALID_ADDR;
    }
    if (a.qpn == 0 || a.qpn > 0xffffffu || a.psn > 0xffffffu ||
        a.qp_type != (uint8_t)tmx_verbs_peer_type(qp->super.type) ||
        (a.flags & ~TMX_VERBS_QPF_OOO) != 0) {
        tmx_warn("verbs %s: QP %u: peer QP address refused: QP number %u, PSN %u, type %u "
                 "(want %u), flags %#x", dev->super.name, qp->super.qp_num, a.qpn, a.psn,
                 a.qp_type, (unsigned)tmx_verbs_peer_type(qp->super.type), a.flags);
        return TMX_ERR_INVALID_ADDR;
    }
    status = tmx_verbs_addr_check(dev, &a.dev, "peer QP address");
    if (status != TMX_OK) {
        return status;
    }
    if (!(a.flags & TMX_VERBS_QPF_OOO) != !qp->ooo) {
        tmx_warn("verbs %s: QP %u: out-of-order placement is on at one end only (set TMX_OOO "
                 "alike in every process)", dev->super.name, qp->super.qp_num);
        return TMX_ERR_INVALID_PARAM;
    }
    memset(&m, 0, sizeof(m));
    m.qp_state           = IBV_QPS_RTR;
    m.path_mtu           = a.dev.mtu < dev->port_attr.active_mtu ? (enum ibv_mtu)a.dev.mtu
                                                                  : dev->port_attr.active_mtu;
    m.dest_qp_num        = a.qpn;
    m.rq_psn             = a.psn;
    m.max_dest_rd_atomic = (uint8_t)(dev->attr_ex.orig_attr.max_qp_rd_atom > 0
                                         ? (dev->attr_ex.orig_attr.max_qp_rd_atom < 16
                                                ? dev->attr_ex.orig_attr.max_qp_rd_atom
                                                : 16)
                                         : 1);
    m.min_rnr_timer      = TMX_VERBS_MIN_RNR;
    m.ah_attr.port_num   = dev->port;
    m.ah_attr.dlid       = a.dev.lid;
    if (a.dev.link_layer == IBV_LINK_LAYER_ETHERNET ||
        memcmp(a.dev.gid, dev->addr.gid, 8) != 0) {
        m.ah_attr.is_global      = 1;
        m.ah_attr.grh.hop_limit  = 64;
        m.ah_attr.grh.sgid_index = (uint8_t)dev->gid_index;
        memcpy(m.ah_attr.grh.dgid.raw, a.dev.gid, 16);
    }
    err = ibv_modify_qp(qp->ibqp, &m,
                        IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                            IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
    if (err != 0) {
        tmx_warn("verbs %s: QP %u to RTR (peer QP %u): %s", dev->super.name, qp->super.qp_num,
                 a.qpn, strerror(err));
        return tmx_verbs_status(err);
    }
    return TMX_OK;
}

static tmx_status_t tmx_verbs_qp_modify_ibv(tmx_verbs_qp_t *qp, struct ibv_qp_attr *m, int mask,
                                            const char *to)
{
    int err = ibv_modify_qp(qp->ibqp, m, mask);

    if (err != 0) {
        tmx_warn("verbs %s: QP %u to %s: %s", qp->dev->super.name, qp->super.qp_num, to,
                 strerror(err));
        return tmx_verbs_status(err);
    }
    return TMX_OK;
}

tmx_status_t tmx_verbs_qp_modify(tmx_qp_t *q, const tmx_qp_attr_t *attr, unsigned attr_mask)
{
    tmx_verbs_qp_t    *qp = (tmx_verbs_qp_t *)q;
    tmx_verbs_dev_t   *dev;
    struct ibv_qp_attr m;
    tmx_qp_state_t     cur;
    tmx_status_t       status = TMX_OK;
    int                connected;

    if (qp == NULL || attr == NULL || !(attr_mask & TMX_QP_ATTR_STATE) ||
        (attr_mask & ~(unsigned)(TMX_QP_ATTR_STATE | TMX_QP_ATTR_REMOTE | TMX_QP_ATTR_OOO)) != 0) {
        return TMX_ERR_INVALID_PARAM;
    }
    dev       = qp->dev;
    cur       = q->state;
    connected = q->type != TMX_QPT_UD;
    if ((attr_mask & TMX_QP_ATTR_OOO) && attr->ooo) {
        /* OOO placement: only at INIT -> RTR of an RC QP, where the device offers it */
        if (attr->state != TMX_QPS_RTR || cur != TMX_QPS_INIT || q->type != TMX_QPT_RC) {
            return TMX_ERR_INVALID_PARAM;
        }
        if (!(dev->super.attr.caps & TMX_DEV_CAP_OOO)) {
            return TMX_ERR_UNSUPPORTED;
        }
    }
    memset(&m, 0, sizeof(m));
    switch (attr->state) {
    case TMX_QPS_INIT:
        if (cur != TMX_QPS_RESET) {
            return TMX_ERR_INVALID_PARAM;
        }
        m.qp_state   = IBV_QPS_INIT;
        m.pkey_index = 0;
        m.port_num   = dev->port;
        if (q->type == TMX_QPT_UD) {
            m.qkey = TMX_VERBS_QKEY;
            status = tmx_verbs_qp_modify_ibv(qp, &m,
                                             IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
                                                 IBV_QP_QKEY, "INIT");
        } else {
            m.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                                IBV_ACCESS_REMOTE_READ;
            status = tmx_verbs_qp_modify_ibv(qp, &m,
                                             IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
                                                 IBV_QP_ACCESS_FLAGS, "INIT");
        }
        if (status == TMX_OK) {
            q->state = TMX_QPS_INIT;
            status   = tmx_verbs_recv_early_flush(qp);
        }
        break;
    case TMX_QPS_RTR:
        if (cur != TMX_QPS_INIT) {
            return TMX_ERR_INVALID_PARAM;
        }
        if (connected) {
            if (!(attr_mask & TMX_QP_ATTR_REMOTE)) {
                return TMX_ERR_INVALID_PARAM;
            }
            if (qp->ooo && !((attr_mask & TMX_QP_ATTR_OOO) && attr->ooo)) {
                /* made with OOO placement (mlx5dv sets it at creation): it cannot be off, and
                 * a caller that did not ask for it would plan no fences */
                tmx_warn("verbs %s: QP %u has out-of-order placement (TMX_OOO): RTR must ask "
                         "for it", dev->super.name, q->qp_num);
                return TMX_ERR_INVALID_PARAM;
            }
            status = tmx_verbs_qp_rtr(qp, attr);
        } else {
            m.qp_state = IBV_QPS_RTR;
            status     = tmx_verbs_qp_modify_ibv(qp, &m, IBV_QP_STATE, "RTR");
        }
        break;
    case TMX_QPS_RTS:
        if (cur != TMX_QPS_RTR) {
            return TMX_ERR_INVALID_PARAM;
        }
        m.qp_state = IBV_QPS_RTS;
        m.sq_psn   = qp->psn;
        if (q->type == TMX_QPT_UD) {
            status = tmx_verbs_qp_modify_ibv(qp, &m, IBV_QP_STATE | IBV_QP_SQ_PSN, "RTS");
        } else if (q->type == TMX_QPT_XRC_TGT) {
            status = TMX_OK; /* a target has no send side: RTR is all it needs */
        } else {
            m.timeout       = tmx_verbs_ack_timeout(dev->cfg->verbs_ack_timeout);
            m.retry_cnt     = TMX_VERBS_RETRY_CNT;
            m.rnr_retry     = TMX_VERBS_RNR_RETRY;
            m.max_rd_atomic = (uint8_t)(dev->attr_ex.orig_attr.max_qp_init_rd_atom > 0
                                            ? (dev->attr_ex.orig_attr.max_qp_init_rd_atom < 16
                                                   ? dev->attr_ex.orig_attr.max_qp_init_rd_atom
                                                   : 16)
                                            : 1);
            status = tmx_verbs_qp_modify_ibv(qp, &m,
                                             IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                                                 IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                                                 IBV_QP_MAX_QP_RD_ATOMIC, "RTS");
        }
        break;
    case TMX_QPS_ERR:
        m.qp_state = IBV_QPS_ERR;
        status     = tmx_verbs_qp_modify_ibv(qp, &m, IBV_QP_STATE, "ERR");
        break;
    case TMX_QPS_RESET:
        if (cur == TMX_QPS_RESET) {
            return TMX_ERR_INVALID_PARAM;
        }
        /* What completed so far reaches the caller; verbs drops what is still outstanding
         * without completions, and a new generation drops anything of the old life that
         * completes late. */
        tmx_verbs_qp_drain(qp);
        m.qp_state = IBV_QPS_RESET;
        status     = tmx_verbs_qp_modify_ibv(qp, &m, IBV_QP_STATE, "RESET");
        if (status == TMX_OK) {
            uint32_t obj;
            uint16_t gen;

            tmx_verbs_obj_del(dev, qp->obj);
            if (tmx_verbs_obj_add(dev, qp, TMX_VERBS_OBJ_QP, &obj, &gen) == TMX_OK) {
                qp->obj       = obj;
                qp->gen       = gen;
                qp->wrid_send = TMX_VERBS_WRID(TMX_VERBS_WR_SEND, gen, obj, 0);
            }
            tmx_verbs_qpn_rebuild(dev);
            qp->sq_tail   = qp->sq_head;
            qp->unsig_run = 0;
            qp->num_early = 0;
            qp->ka_on     = 0;
            tmx_verbs_rslots_reset(&qp->rs);
            qp->psn = tmx_verbs_psn(dev);
        }
        break;
    default:
        return TMX_ERR_INVALID_PARAM;
    }
    if (status == TMX_OK) {
        if (q->state == TMX_QPS_RTS && !qp->ka_on) {
            dev->ka_waiting--;
        }
        q->state = attr->state;
        if (q->state == TMX_QPS_RTS) {
            qp->ka_on = 0;
            dev->ka_waiting++;
            dev->ka_on_qpn = 0; /* it may have the number of one destroyed */
        }
    }
    return status;
}

unsigned tmx_verbs_qp_data_in_order(tmx_qp_t *q, tmx_wr_opcode_t op)
{
    tmx_verbs_qp_t *qp = (tmx_verbs_qp_t *)q;

    if (qp == NULL || q->state != TMX_QPS_RTS || q->type != TMX_QPT_RC || qp->ooo ||
        (op != TMX_WR_RDMA_WRITE && op != TMX_WR_RDMA_WRITE_WITH_IMM)) {
        return 0;
    }
#ifdef HAVE_IBV_QUERY_QP_DATA_IN_ORDER
    {
        enum ibv_wr_opcode iop = op == TMX_WR_RDMA_WRITE ? IBV_WR_RDMA_WRITE
                                                         : IBV_WR_RDMA_WRITE_WITH_IMM;
#if HAVE_DECL_IBV_QUERY_QP_DATA_IN_ORDER_RETURN_CAPS
        int      r   = ibv_query_qp_data_in_order(qp->ibqp, iop,
                                                  IBV_QUERY_QP_DATA_IN_ORDER_RETURN_CAPS);
        unsigned res = 0;

        if (r < 0) {
            return 0;
        }
        if (r & IBV_QUERY_QP_DATA_IN_ORDER_WHOLE_MSG) {
            res |= TMX_DATA_IN_ORDER_WHOLE_MSG | TMX_DATA_IN_ORDER_ALIGNED_128_BYTES;
        }
        if (r & IBV_QUERY_QP_DATA_IN_ORDER_ALIGNED_128_BYTES) {
            res |= TMX_DATA_IN_ORDER_ALIGNED_128_BYTES;
        }
        return res;
#else
        /* the boolean form: 1 promises the whole message */
        return ibv_query_qp_data_in_order(qp->ibqp, iop, 0) == 1
                   ? TMX_DATA_IN_ORDER_WHOLE_MSG | TMX_DATA_IN_ORDER_ALIGNED_128_BYTES
                   : 0;
#endif
    }
#else
    return 0;
#endif
}

/* ---------------------------------------------------------------- posting */

static enum ibv_wr_opcode tmx_verbs_ibv_op(tmx_wr_opcode_t op)
{
    switch (op) {
    case TMX_WR_SEND_WITH_IMM:       return IBV_WR_SEND_WITH_IMM;
    case TMX_WR_RDMA_WRITE:          return IBV_WR_RDMA_WRITE;
    case TMX_WR_RDMA_WRITE_WITH_IMM: return IBV_WR_RDMA_WRITE_WITH_IMM;
    case TMX_WR_RDMA_READ:           return IBV_WR_RDMA_READ;
    default:                         return IBV_WR_SEND;
    }
}

/* Checks one send work request against qp: TMX_OK or why not. Inline in both posts (a call
 * of its own was a fifth of the provider's instructions per send). */
static inline __attribute__((always_inline)) tmx_status_t
tmx_verbs_send_check(tmx_verbs_qp_t *qp, const tmx_send_wr_t *wr)
{
    uint64_t total = 0;

    if (wr->num_sge < 0 || (uint32_t)wr->num_sge > qp->max_send_sge ||
        (wr->num_sge > 0 && wr->sg_list == NULL) || (unsigned)wr->opcode > TMX_WR_RDMA_READ ||
        (wr->send_flags & ~(unsigned)(TMX_SEND_SIGNALED | TMX_SEND_FENCE | TMX_SEND_INLINE)) != 0) {
        return TMX_ERR_INVALID_PARAM;
    }
    for (int i = 0; i < wr->num_sge; i++) {
        total += wr->sg_list[i].length;
    }
    if (total > qp->dev->super.attr.max_msg_sz) {
        return TMX_ERR_INVALID_PARAM;
    }
    if (qp->super.type == TMX_QPT_UD) {
        if ((wr->opcode != TMX_WR_SEND && wr->opcode != TMX_WR_SEND_WITH_IMM) ||
            wr->ud.ah == NULL || total > qp->dev->super.attr.max_ud_msg) {
            return TMX_ERR_INVALID_PARAM;
        }
    }
    /* UD datagrams are inline up to max_ud_msg (through a bounce slot past the device's
     * limit), as on the soft device; RC ones up to the limit the device attributes say */
    if ((wr->send_flags & TMX_SEND_INLINE) &&
        ((total > qp->max_inline && qp->super.type != TMX_QPT_UD) ||
         wr->opcode == TMX_WR_RDMA_READ)) {
        return TMX_ERR_INVALID_PARAM;
    }
    return TMX_OK;
}

/* The bounce slot of send queue position seq, with the work request's data copied in. */
static tmx_status_t tmx_verbs_bounce(tmx_verbs_qp_t *qp, uint32_t seq, const tmx_send_wr_t *w,
                                     struct ibv_sge *sge)
{
    size_t   slot = qp->dev->super.attr.max_ud_msg;
    uint8_t *p;

    if (qp->bounce == NULL) {
        if (posix_memalign((void **)&qp->bounce, 4096, slot * qp->sq_depth) != 0) {
            qp->bounce = NULL;
            return TMX_ERR_NO_MEMORY;
        }
        qp->bounce_mr = ibv_reg_mr(((tmx_verbs_pd_t *)qp->super.pd)->ibpd, qp->bounce,
                                   slot * qp->sq_depth, IBV_ACCESS_LOCAL_WRITE);
        if (qp->bounce_mr == NULL) {
            free(qp->bounce);
            qp->bounce = NULL;
            return TMX_ERR_NO_RESOURCE;
        }
    }
    p           = qp->bounce + slot * (seq & (qp->sq_depth - 1));
    sge->addr   = (uintptr_t)p;
    sge->lkey   = qp->bounce_mr->lkey;
    sge->length = 0;
    for (int i = 0; i < w->num_sge; i++) {
        memcpy(p + sge->length, (const void *)(uintptr_t)w->sg_list[i].addr,
               w->sg_list[i].length);
        sge->length += w->sg_list[i].length;
    }
    return TMX_OK;
}

/*
 * Work request w at send queue position seq, checked and translated into x (its gather list in
 * sge; x zeroed by the caller); *run counts the unsignaled ones since the last signaled one.
 * TMX_OK, or what is wrong (TMX_ERR_NO_RESOURCE: the queue is full; poll, then post again).
 */
static inline __attribute__((always_inline)) tmx_status_t
tmx_verbs_send_fill(tmx_verbs_qp_t *qp, tmx_send_wr_t *w, uint32_t seq, uint32_t *run,
                    struct ibv_send_wr *x, struct ibv_sge *sge)
{
    tmx_qp_t          *q = &qp->super;
    tmx_verbs_sslot_t *s;
    tmx_status_t       status;
    int                sig;

    if (q->state != TMX_QPS_RTS || qp->no_sq) {
        return TMX_ERR_INVALID_PARAM;
    }
    status = tmx_verbs_send_check(qp, w);
    if (status != TMX_OK) {
        return status;
    }
    if (seq - qp->sq_tail >= qp->sq_depth) {
        return TMX_ERR_NO_RESOURCE;
    }
    sig = (w->send_flags & TMX_SEND_SIGNALED) || qp->sig_all;
    s           = &qp->sq[seq & (qp->sq_depth - 1)];
    s->wr_id    = w->wr_id;
    s->seq      = seq;
    s->opcode   = (uint8_t)w->opcode;
    s->signaled = (uint8_t)sig;
    s->internal = 0;
    x->wr_id  = TMX_VERBS_WRID(TMX_VERBS_WR_SEND, qp->gen, qp->obj, seq);
    x->opcode = tmx_verbs_ibv_op(w->opcode);
    /* one in every half queue is signaled, so unsignaled ones never fill it */
    if (sig || ++*run >= qp->sq_depth / 2) {
        x->send_flags |= IBV_SEND_SIGNALED;
        *run = 0;
    }
    if (w->send_flags & TMX_SEND_FENCE) {
        x->send_flags |= IBV_SEND_FENCE;
    }
    x->sg_list = sge;
    x->num_sge = w->num_sge;
    if ((w->send_flags & TMX_SEND_INLINE) && q->type == TMX_QPT_UD) {
        uint64_t total = 0;
        for (int i = 0; i < w->num_sge; i++) {
            total += w->sg_list[i].length;
        }
        if (total > qp->max_inline) {
            status = tmx_verbs_bounce(qp, seq, w, &sge[0]);
            if (status != TMX_OK) {
                return status;
            }
            x->num_sge = 1;
            goto filled;
        }
    }
    if (w->send_flags & TMX_SEND_INLINE) {
        x->send_flags |= IBV_SEND_INLINE;
    }
    for (int i = 0; i < w->num_sge; i++) {
        sge[i].addr   = w->sg_list[i].addr;
        sge[i].length = w->sg_list[i].length;
        sge[i].lkey   = w->sg_list[i].lkey;
    }
filled:
    if (w->opcode == TMX_WR_SEND_WITH_IMM || w->opcode == TMX_WR_RDMA_WRITE_WITH_IMM) {
        x->imm_data = htonl(w->imm_data);
    }
    if (w->opcode == TMX_WR_RDMA_WRITE || w->opcode == TMX_WR_RDMA_WRITE_WITH_IMM ||
        w->opcode == TMX_WR_RDMA_READ) {
        x->wr.rdma.remote_addr = w->rdma.remote_addr;
        x->wr.rdma.rkey        = w->rdma.rkey;
    } else if (q->type == TMX_QPT_UD) {
        x->wr.ud.ah          = ((tmx_verbs_ah_t *)w->ud.ah)->ibah;
        x->wr.ud.remote_qpn  = w->ud.remote_qpn;
        x->wr.ud.remote_qkey = TMX_VERBS_QKEY;
    }
#ifdef TMX_VERBS_HAVE_XRC
    if (q->type == TMX_QPT_XRC_INI) {
        x->qp_type.xrc.remote_srqn = w->remote_srqn;
    }
#endif
    return TMX_OK;
}

/* One work request (almost every post of the core): one ibv_send_wr on the stack, not the
 * batch's arrays (cg: 8-byte ping-pong over rxe, the provider's share of a post). */
static tmx_status_t tmx_verbs_post_one(tmx_verbs_qp_t *qp, tmx_send_wr_t *wr,
                                       tmx_send_wr_t **bad_p)
{
    struct ibv_send_wr  x, *ibad;
    struct ibv_sge      sge[TMX_VERBS_MAX_SGE];
    uint32_t            run = qp->unsig_run;
    tmx_status_t        status;
    int                 err;

    memset(&x, 0, sizeof(x));
    status = tmx_verbs_send_fill(qp, wr, qp->sq_head, &run, &x, sge);
    if (status != TMX_OK) {
        *bad_p = wr;
        return status;
    }
    err = ibv_post_send(qp->ibqp, &x, &ibad);
    if (err != 0) {
        qp->unsig_run = 0;
        *bad_p        = wr;
        return err == ENOMEM ? TMX_ERR_NO_RESOURCE : tmx_verbs_status(err);
    }
    qp->sq_head++;
    qp->unsig_run = run;
    tmx_verbs_ka_seen(qp); /* a send would time out all the same if the peer were not up */
    return TMX_OK;
}

tmx_status_t tmx_verbs_post_send(tmx_qp_t *q, tmx_send_wr_t *wr, tmx_send_wr_t **bad_p)
{
    tmx_verbs_qp_t     *qp = (tmx_verbs_qp_t *)q;
    struct ibv_send_wr  iwr[TMX_VERBS_POLL_BATCH], *ibad;
    struct ibv_sge      isge[TMX_VERBS_POLL_BATCH][TMX_VERBS_MAX_SGE];
    tmx_send_wr_t      *dummy;

    if (bad_p == NULL) {
        bad_p = &dummy;
    }
    if (qp == NULL) {
        return TMX_ERR_INVALID_PARAM;
    }
    if (wr != NULL && wr->next == NULL) {
        return tmx_verbs_post_one(qp, wr, bad_p);
    }
    while (wr != NULL) {
        tmx_status_t   status = TMX_OK;
        tmx_send_wr_t *w      = wr;
        uint32_t       run    = qp->unsig_run;
        int            n      = 0, err;

        for (; w != NULL && n < TMX_VERBS_POLL_BATCH; w = w->next, n++) {
            memset(&iwr[n], 0, sizeof(iwr[n]));
            status = tmx_verbs_send_fill(qp, w, qp->sq_head + (uint32_t)n, &run, &iwr[n],
                                         isge[n]);
            if (status != TMX_OK) {
                break;
            }
            if (n > 0) {
                iwr[n - 1].next = &iwr[n];
            }
        }
        if (n > 0) {
            err = ibv_post_send(qp->ibqp, iwr, &ibad);
            if (err != 0) {
                int k = (int)(ibad - iwr);
                /* the first k went; the rest did not */
                qp->sq_head += (uint32_t)k;
                qp->unsig_run = 0;
                for (int i = 0; i < k; i++) {
                    wr = wr->next;
                }
                *bad_p = wr;
                return err == ENOMEM ? TMX_ERR_NO_RESOURCE : tmx_verbs_status(err);
            }
            qp->sq_head  += (uint32_t)n;
            qp->unsig_run = run;
            tmx_verbs_ka_seen(qp); /* a send would time out all the same if the peer were not up */
        }
        if (status != TMX_OK) {
            *bad_p = w;
            return status;
        }
        wr = w;
    }
    return TMX_OK;
}

/*
 * prov.h send_inline: one unsignaled inline SEND_WITH_IMM on an RC QP, what post_one does
 * for such a work request without the caller's tmx_send_wr_t and its general checks (the
 * core built 72 bytes of work request and the provider checked and translated them: about 200
 * instructions of every small message's send in the guest; rxe's own post stays).
 */
tmx_status_t tmx_verbs_send_inline(tmx_qp_t *q, const void *src, size_t n, uint32_t imm,
                                   unsigned flags, uint64_t wr_id)
{
    tmx_verbs_qp_t     *qp  = (tmx_verbs_qp_t *)q;
    uint32_t            seq = qp->sq_head;
    tmx_verbs_sslot_t  *s;
    struct ibv_send_wr *x = &qp->inl_wr, *ibad;
    unsigned            ibflags = IBV_SEND_INLINE;
    int                 err;

    if (q->state != TMX_QPS_RTS || q->type != TMX_QPT_RC || qp->no_sq || n > qp->max_inline ||
        (n > 0 && src == NULL) || (flags & ~(unsigned)TMX_SEND_FENCE) != 0) {
        return TMX_ERR_INVALID_PARAM;
    }
    if (seq - qp->sq_tail >= qp->sq_depth) {
        return TMX_ERR_NO_RESOURCE;
    }
    /* one in every half queue is signaled, so unsignaled ones never fill it (send_fill) */
    if (qp->sig_all || qp->unsig_run + 1 >= qp->sq_depth / 2) {
        ibflags |= IBV_SEND_SIGNALED;
    }
    if (flags & TMX_SEND_FENCE) {
        ibflags |= IBV_SEND_FENCE;
    }
    s           = &qp->sq[seq & (qp->sq_depth - 1)];
    s->wr_id    = wr_id;
    s->seq      = seq;
    s->opcode   = (uint8_t)TMX_WR_SEND_WITH_IMM;
    s->signaled = (uint8_t)(qp->sig_all != 0);
    s->internal = 0;
    /* qp->inl_wr: sg_list, opcode and the zeros an RC send leaves unused are set once (QP
     * creation); next stays NULL. The device copies from src at the post (inline: no lkey),
     * and the caller's lock keeps one post on a QP at a time (sq_head likewise). */
    qp->inl_sge.addr   = (uintptr_t)src;
    qp->inl_sge.length = (uint32_t)n;
    x->wr_id           = qp->wrid_send | seq;
    x->num_sge         = n > 0;
    x->send_flags      = ibflags;
    x->imm_data        = htonl(imm);
    err = ibv_post_send(qp->ibqp, x, &ibad);
    if (err != 0) {
        qp->unsig_run = 0;
        return err == ENOMEM ? TMX_ERR_NO_RESOURCE : tmx_verbs_status(err);
    }
    qp->sq_head++;
    qp->unsig_run = (ibflags & IBV_SEND_SIGNALED) ? 0 : qp->unsig_run + 1;
    tmx_verbs_ka_seen(qp); /* a send would time out all the same if the peer were not up */
    return TMX_OK;
}

tmx_status_t tmx_verbs_post_recv(tmx_qp_t *q, tmx_recv_wr_t *wr, tmx_recv_wr_t **bad_p)
{
    tmx_verbs_qp_t *qp = (tmx_verbs_qp_t *)q;
    tmx_recv_wr_t  *dummy;

    if (bad_p == NULL) {
        bad_p = &dummy;
    }
    if (qp == NULL || q->srq != NULL || q->state == TMX_QPS_ERR || qp->rq_depth == 0) {
        *bad_p = wr;
        return TMX_ERR_INVALID_PARAM;
    }
    return tmx_verbs_recv_post(qp, NULL, wr, bad_p);
}

/* ---------------------------------------------------------------- completions */

tmx_wc_status_t tmx_verbs_wc_status(enum ibv_wc_status s)
{
    switch (s) {
    case IBV_WC_SUCCESS:           return TMX_WC_SUCCESS;
    case IBV_WC_LOC_LEN_ERR:       return TMX_WC_LOC_LEN_ERR;
    case IBV_WC_LOC_PROT_ERR:      return TMX_WC_LOC_PROT_ERR;
    case IBV_WC_WR_FLUSH_ERR:      return TMX_WC_WR_FLUSH_ERR;
    case IBV_WC_REM_ACCESS_ERR:    return TMX_WC_REM_ACCESS_ERR;
    case IBV_WC_REM_INV_REQ_ERR:
    case IBV_WC_REM_OP_ERR:        return TMX_WC_REM_INV_REQ_ERR;
    case IBV_WC_RETRY_EXC_ERR:
    case IBV_WC_RNR_RETRY_EXC_ERR: return TMX_WC_RETRY_EXC_ERR; /* the peer is gone */
#ifdef TMX_VERBS_HAVE_TM
    case IBV_WC_TM_ERR:            return TMX_WC_TM_ERR;
    case IBV_WC_TM_RNDV_INCOMPLETE: return TMX_WC_TM_RNDV_INCOMPLETE;
#endif
    default:                       return TMX_WC_GENERAL_ERR;
    }
}

static uint32_t tmx_verbs_qpn_hash(uint32_t qpn, uint32_t cap)
{
    return (qpn * 2654435761u) & (cap - 1);
}

tmx_status_t tmx_verbs_qpn_rebuild(tmx_verbs_dev_t *dev)
{
    uint32_t n = 0, cap = 16;

    for (uint32_t i = 0; i < dev->num_objs; i++) {
        n += dev->objs[i].ptr != NULL && dev->objs[i].type == TMX_VERBS_OBJ_QP;
    }
    while (cap < 2 * n + 2) {
        cap *= 2;
    }
    if (cap != dev->qpn_cap) {
        uint32_t *k = calloc(cap, sizeof(*k)), *o = calloc(cap, sizeof(*o));
        if (k == NULL || o == NULL) {
            free(k);
            free(o);
            return TMX_ERR_NO_MEMORY;
        }
        free(dev->qpn_key);
        free(dev->qpn_obj);
        dev->qpn_key = k;
        dev->qpn_obj = o;
        dev->qpn_cap = cap;
    } else {
        memset(dev->qpn_key, 0, cap * sizeof(*dev->qpn_key));
    }
    for (uint32_t i = 0; i < dev->num_objs; i++) {
        tmx_verbs_qp_t *qp = dev->objs[i].ptr;
        uint32_t        h;

        if (qp == NULL || dev->objs[i].type != TMX_VERBS_OBJ_QP) {
            continue;
        }
        for (h = tmx_verbs_qpn_hash(qp->super.qp_num, cap); dev->qpn_key[h] != 0;
             h = (h + 1) & (cap - 1)) {
        }
        dev->qpn_key[h] = qp->super.qp_num + 1;
        dev->qpn_obj[h] = i;
    }
    dev->qpn_count = n;
    return TMX_OK;
}

tmx_verbs_qp_t *tmx_verbs_qp_by_num(tmx_verbs_dev_t *dev, uint32_t qpn)
{
    if (dev->qpn_cap == 0) {
        return NULL;
    }
    for (uint32_t h = tmx_verbs_qpn_hash(qpn, dev->qpn_cap); dev->qpn_key[h] != 0;
         h = (h + 1) & (dev->qpn_cap - 1)) {
        if (dev->qpn_key[h] == qpn + 1) {
            uint32_t obj = dev->qpn_obj[h];
            return obj < dev->num_objs && dev->objs[obj].type == TMX_VERBS_OBJ_QP
                       ? dev->objs[obj].ptr
                       : NULL;
        }
    }
    return NULL;
}

/* A completion showed the peer of qp up: keepalives may go. */
static inline void tmx_verbs_ka_seen(tmx_verbs_qp_t *qp)
{
    if (!qp->ka_on && qp->super.state == TMX_QPS_RTS) {
        qp->ka_on = 1;
        qp->dev->ka_waiting--;
    }
}

void tmx_verbs_qp_failed(tmx_verbs_qp_t *qp, tmx_wc_status_t status, const char *why)
{
    tmx_wc_t wc;

    if (qp->super.state == TMX_QPS_ERR || qp->super.state == TMX_QPS_RESET) {
        return;
    }
    if (qp->super.state == TMX_QPS_RTS && !qp->ka_on) {
        qp->dev->ka_waiting--;
    }
    qp->super.state = TMX_QPS_ERR;
    tmx_debug("verbs %s: QP %u went to error: %s (%s)", qp->dev->super.name, qp->super.qp_num,
              why, tmx_wc_status_string(status));
    if (qp->super.send_cq == NULL) {
        return;
    }
    memset(&wc, 0, sizeof(wc));
    wc.wr_id  = TMX_WR_ID_ASYNC_ERROR;
    wc.status = status;
    wc.opcode = TMX_WC_SEND;
    wc.qp_num = qp->super.qp_num;
    tmx_verbs_wcq_push(&((tmx_verbs_cq_t *)qp->super.send_cq)->async, &wc);
}

/* A completion as read from the hardware queue. */
typedef struct tmx_verbs_raw {
    uint64_t           wr_id;
    enum ibv_wc_status status;
    enum ibv_wc_opcode opcode;
    uint32_t           byte_len;
    uint32_t           imm; /* network order */
    uint32_t           qp_num;
    uint32_t           src_qp;
    unsigned           flags;
    uint64_t           tm_tag;
    uint32_t           tm_priv;
} tmx_verbs_raw_t;

static tmx_wc_opcode_t tmx_verbs_send_wc_op(uint8_t op)
{
    switch (op) {
    case TMX_WR_RDMA_WRITE:
    case TMX_WR_RDMA_WRITE_WITH_IMM:
        return TMX_WC_RDMA_WRITE;
    case TMX_WR_RDMA_READ:
        return TMX_WC_RDMA_READ;
    default:
        return TMX_WC_SEND;
    }
}

/* The receive-side fields of a completion. */
static inline __attribute__((always_inline)) void tmx_verbs_recv_fields(const tmx_verbs_raw_t *r, tmx_wc_t *wc, int tm_srq)
{
    if (r->status == IBV_WC_SUCCESS) {
        switch ((int)r->opcode) {
        case IBV_WC_RECV_RDMA_WITH_IMM:
            wc->opcode = TMX_WC_RECV_RDMA_WITH_IMM;
            break;
#ifdef TMX_VERBS_HAVE_TM
        case IBV_WC_TM_RECV:
            wc->opcode = TMX_WC_TM_RECV;
            break;
        case IBV_WC_TM_NO_TAG:
            wc->opcode = TMX_WC_TM_NO_TAG;
            break;
#endif
        default:
            wc->opcode = TMX_WC_RECV;
            break;
        }
    } else {
        /* verbs leaves the opcode of an error undefined: a plain buffer of a TM SRQ that a
         * message reached counts as unexpected (prov.h), a flushed one does not */
        wc->opcode = tm_srq && r->status != IBV_WC_WR_FLUSH_ERR ? TMX_WC_TM_RECV : TMX_WC_RECV;
    }
    wc->byte_len = r->byte_len;
    if (r->flags & IBV_WC_WITH_IMM) {
        wc->wc_flags |= TMX_WC_WITH_IMM;
        wc->imm_data = ntohl(r->imm);
    }
#ifdef TMX_VERBS_HAVE_TM
    if (r->flags & IBV_WC_TM_SYNC_REQ) {
        wc->wc_flags |= TMX_WC_TM_SYNC_REQ;
    }
#endif
}

/* Converts r: 1 and *wc when it is the caller's, 0 when the provider keeps it. */
static int tmx_verbs_convert(tmx_verbs_dev_t *dev, const tmx_verbs_raw_t *r, tmx_wc_t *wc)
{
    unsigned        kind = TMX_VERBS_WRID_KIND(r->wr_id);
    uint32_t        obj  = TMX_VERBS_WRID_OBJ(r->wr_id);
    unsigned        gen  = TMX_VERBS_WRID_GEN(r->wr_id);
    uint32_t        slot = TMX_VERBS_WRID_SLOT(r->wr_id);
    tmx_verbs_qp_t *qp;
    tmx_verbs_srq_t *srq;

    memset(wc, 0, sizeof(*wc));
    wc->status = tmx_verbs_wc_status(r->status);
    if (r->status != IBV_WC_SUCCESS) {
        tmx_debug("verbs %s: QP %u: completion %016llx: %s", dev->super.name, r->qp_num,
                  (unsigned long long)r->wr_id, ibv_wc_status_str(r->status));
    }
    wc->qp_num = r->qp_num;
    wc->src_qp = r->src_qp;
    switch (kind) {
    case TMX_VERBS_WR_SEND: {
        tmx_verbs_sslot_t *s;

        qp = tmx_verbs_obj_at(dev, obj, gen, TMX_VERBS_OBJ_QP);
        if (qp == NULL) {
            return 0; /* of a QP destroyed or reset meanwhile */
        }
        s = &qp->sq[slot & (qp->sq_depth - 1)];
        if (s->seq != slot) {
            tmx_error("verbs %s: QP %u: completion of send %u, slot holds %u", dev->super.name,
                      qp->super.qp_num, slot, s->seq);
            return 0;
        }
        /* completions of a send queue come in order: every one before it is done too */
        if ((int32_t)(slot + 1 - qp->sq_tail) > 0) {
            qp->sq_tail = slot + 1;
        }
        if (r->status != IBV_WC_SUCCESS) {
            tmx_verbs_qp_failed(qp, wc->status, s->internal ? "keepalive completion with error"
                                                            : "send completion with error");
            if (s->internal) {
                return 0; /* the async error says it */
            }
        } else {
            tmx_verbs_ka_seen(qp);
            if (!s->signaled) {
                return 0; /* signaled by the provider to retire the queue, or a keepalive */
            }
        }
        wc->wr_id    = s->wr_id;
        wc->opcode   = tmx_verbs_send_wc_op(s->opcode);
        wc->qp_num   = qp->super.qp_num;
        wc->byte_len = r->status == IBV_WC_SUCCESS && s->opcode == TMX_WR_RDMA_READ ? r->byte_len
                                                                                     : 0;
        return 1;
    }
    case TMX_VERBS_WR_RECV:
        qp = tmx_verbs_obj_at(dev, obj, gen, TMX_VERBS_OBJ_QP);
        if (qp == NULL || slot >= qp->rs.cap) {
            return 0;
        }
        wc->wr_id = qp->rs.wr_id[slot];
        tmx_verbs_rslot_put(&qp->rs, slot);
        tmx_verbs_recv_fields(r, wc, 0);
        if (r->status == IBV_WC_SUCCESS) {
            tmx_verbs_ka_seen(qp);
        }
        wc->qp_num = qp->super.qp_num;
        if (qp->grh_mr != NULL) {
            wc->byte_len = wc->byte_len > TMX_VERBS_GRH ? wc->byte_len - TMX_VERBS_GRH : 0;
        } else if (r->status != IBV_WC_SUCCESS) {
            /* an RC receive that failed takes its QP to error */
            tmx_verbs_qp_failed(qp, wc->status, "receive completion with error");
        }
        return 1;
    case TMX_VERBS_WR_SRECV:
        srq = tmx_verbs_obj_at(dev, obj, gen, TMX_VERBS_OBJ_SRQ);
        if (srq == NULL || slot >= srq->rs.cap) {
            return 0;
        }
        wc->wr_id = srq->rs.wr_id[slot];
        tmx_verbs_rslot_put(&srq->rs, slot);
        tmx_verbs_recv_fields(r, wc, srq->tm != NULL);
        if (r->status == IBV_WC_SUCCESS) {
            /* a QP that never sees traffic (the connection of a worker to itself) keeps
             * ka_waiting above 0: the QP these receives come from is looked up once */
            if (dev->ka_waiting > 0 && r->qp_num != dev->ka_on_qpn &&
                (qp = tmx_verbs_qp_by_num(dev, r->qp_num)) != NULL) {
                tmx_verbs_ka_seen(qp);
                dev->ka_on_qpn = r->qp_num;
            }
        } else if (r->status != IBV_WC_WR_FLUSH_ERR &&
                   (qp = tmx_verbs_qp_by_num(dev, r->qp_num)) != NULL) {
            tmx_verbs_qp_failed(qp, wc->status, "receive completion with error");
        }
        return 1;
    case TMX_VERBS_WR_TM_OP:
    case TMX_VERBS_WR_TM_RECV:
        srq = tmx_verbs_obj_at(dev, obj, gen, TMX_VERBS_OBJ_SRQ);
        if (srq == NULL || srq->tm == NULL) {
            return 0;
        }
        if (kind == TMX_VERBS_WR_TM_RECV) {
            tmx_verbs_recv_fields(r, wc, 1);
#ifdef TMX_VERBS_HAVE_TM
            wc->opcode = TMX_WC_TM_RECV;
            if (r->flags & IBV_WC_TM_MATCH) {
                wc->wc_flags |= TMX_WC_TM_MATCH;
                wc->tm_info.tag  = r->tm_tag;
                wc->tm_info.priv = r->tm_priv;
            }
            if (r->flags & IBV_WC_TM_DATA_VALID) {
                wc->wc_flags |= TMX_WC_TM_DATA_VALID;
            }
#endif
        } else {
#ifdef TMX_VERBS_HAVE_TM
            wc->opcode = r->opcode == IBV_WC_TM_DEL    ? TMX_WC_TM_DEL
                         : r->opcode == IBV_WC_TM_SYNC ? TMX_WC_TM_SYNC
                                                       : TMX_WC_TM_ADD;
            if (r->flags & IBV_WC_TM_SYNC_REQ) {
                wc->wc_flags |= TMX_WC_TM_SYNC_REQ;
            }
#endif
        }
        return tmx_verbs_tm_wc(srq, kind, slot, wc);
    default:
        tmx_error("verbs %s: completion with an id that is not the provider's (%016llx)",
                  dev->super.name, (unsigned long long)r->wr_id);
        return 0;
    }
}

/*
 * A successful receive into an SRQ without TM (every message of the core's, TM aside),
 * straight from the ibv_wc into *wc: what tmx_verbs_convert does for it, without the
 * intermediate tmx_verbs_raw_t, the clearing of *wc and the dispatch on the kind (about 40
 * instructions of every message's completion). 1 when done, 0: convert it the general way.
 */
static inline __attribute__((always_inline)) int
tmx_verbs_srecv_direct(tmx_verbs_dev_t *dev, const struct ibv_wc *iw, tmx_wc_t *wc)
{
    uint64_t         id   = iw->wr_id;
    uint32_t         slot = TMX_VERBS_WRID_SLOT(id);
    tmx_verbs_srq_t *srq;
    tmx_verbs_qp_t  *qp;

    if (TMX_VERBS_WRID_KIND(id) != TMX_VERBS_WR_SRECV || iw->status != IBV_WC_SUCCESS ||
        (iw->opcode != IBV_WC_RECV && iw->opcode != IBV_WC_RECV_RDMA_WITH_IMM)) {
        return 0;
    }
    srq = tmx_verbs_obj_at(dev, TMX_VERBS_WRID_OBJ(id), TMX_VERBS_WRID_GEN(id),
                           TMX_VERBS_OBJ_SRQ);
    if (srq == NULL || srq->tm != NULL || slot >= srq->rs.cap) {
        return 0;
    }
    wc->wr_id = srq->rs.wr_id[slot];
    if (srq->rs.num_free < srq->rs.cap) { /* tmx_verbs_rslot_put */
        srq->rs.free[srq->rs.num_free++] = slot;
    }
    wc->status       = TMX_WC_SUCCESS;
    wc->opcode       = iw->opcode == IBV_WC_RECV ? TMX_WC_RECV : TMX_WC_RECV_RDMA_WITH_IMM;
    wc->byte_len     = iw->byte_len;
    wc->qp_num       = iw->qp_num;
    wc->src_qp       = iw->src_qp;
    wc->tm_info.tag  = 0;
    wc->tm_info.priv = 0;
    wc->data         = NULL;
    if (iw->wc_flags & IBV_WC_WITH_IMM) {
        wc->wc_flags = TMX_WC_WITH_IMM;
        wc->imm_data = ntohl(iw->imm_data);
    } else {
        wc->wc_flags = 0;
        wc->imm_data = 0;
    }
    /* as tmx_verbs_convert: the QP these receives come from is up */
    if (dev->ka_waiting > 0 && iw->qp_num != dev->ka_on_qpn &&
        (qp = tmx_verbs_qp_by_num(dev, iw->qp_num)) != NULL) {
        tmx_verbs_ka_seen(qp);
        dev->ka_on_qpn = iw->qp_num;
    }
    return 1;
}

/* Reads up to n entries of the hardware queue into raw[]: how many, or -errno. */
static int tmx_verbs_read_hw(tmx_verbs_cq_t *cq, int n, tmx_verbs_raw_t *raw)
{
    int got = 0;

    if (cq->ibcqx != NULL) {
        struct ibv_poll_cq_attr pa = {.comp_mask = 0};
        struct ibv_cq_ex       *x  = cq->ibcqx;
        int                     err = ibv_start_poll(x, &pa);

        if (err == ENOENT) {
            return 0;
        }
        if (err != 0) {
            return -err;
        }
        for (;;) {
            tmx_verbs_raw_t *r = &raw[got++];

            r->wr_id    = x->wr_id;
            r->status   = x->status;
            r->opcode   = ibv_wc_read_opcode(x);
            r->byte_len = ibv_wc_read_byte_len(x);
            r->qp_num   = ibv_wc_read_qp_num(x);
            r->src_qp   = ibv_wc_read_src_qp(x);
            r->flags    = ibv_wc_read_wc_flags(x);
            r->imm      = (r->flags & IBV_WC_WITH_IMM) ? ibv_wc_read_imm_data(x) : 0;
            r->tm_tag   = 0;
            r->tm_priv  = 0;
#ifdef TMX_VERBS_HAVE_TM
            if (r->flags & IBV_WC_TM_MATCH) {
                struct ibv_wc_tm_info ti;
                ibv_wc_read_tm_info(x, &ti);
                r->tm_tag  = ti.tag;
                r->tm_priv = ti.priv;
            }
#endif
            if (got == n || ibv_next_poll(x) != 0) {
                break;
            }
        }
        ibv_end_poll(x);
        return got;
    } else {
        struct ibv_wc wc[TMX_VERBS_POLL_BATCH];

        got = ibv_poll_cq(cq->ibcq, n < TMX_VERBS_POLL_BATCH ? n : TMX_VERBS_POLL_BATCH, wc);
        if (got < 0) {
            return got;
        }
        for (int i = 0; i < got; i++) {
            raw[i].wr_id    = wc[i].wr_id;
            raw[i].status   = wc[i].status;
            raw[i].opcode   = wc[i].opcode;
            raw[i].byte_len = wc[i].byte_len;
            raw[i].imm      = wc[i].imm_data;
            raw[i].qp_num   = wc[i].qp_num;
            raw[i].src_qp   = wc[i].src_qp;
            raw[i].flags    = wc[i].wc_flags;
            raw[i].tm_tag   = 0;
            raw[i].tm_priv  = 0;
        }
        return got;
    }
}

int tmx_verbs_cq_poll_hw(tmx_verbs_cq_t *cq, int n, tmx_wc_t *wc)
{
    tmx_verbs_dev_t *dev = (tmx_verbs_dev_t *)cq->super.dev;
    tmx_verbs_raw_t  raw[TMX_VERBS_POLL_BATCH];
    int              out = 0;

    while (out < n) {
        int want = n - out < TMX_VERBS_POLL_BATCH ? n - out : TMX_VERBS_POLL_BATCH;
        int got  = tmx_verbs_read_hw(cq, want, raw);

        if (got < 0) {
            tmx_error("verbs %s: polling a CQ failed: %s", dev->super.name, strerror(-got));
            return out > 0 ? out : TMX_ERR_IO;
        }
        for (int i = 0; i < got; i++) {
            if (tmx_verbs_convert(dev, &raw[i], &wc[out])) {
                out++;
            }
        }
        if (got < want) {
            break;
        }
    }
    return out;
}

void tmx_verbs_keepalive(tmx_verbs_dev_t *dev)
{
    uint64_t now = tmx_time_ns();

    if (now - dev->ka_ns < TMX_VERBS_KEEPALIVE_NS) {
        return;
    }
    dev->ka_ns = now;
    for (uint32_t i = 0; i < dev->num_objs; i++) {
        tmx_verbs_qp_t     *qp = dev->objs[i].ptr;
        tmx_verbs_sslot_t  *s;
        struct ibv_send_wr  w, *bad;
        uint32_t            seq;

        if (qp == NULL || dev->objs[i].type != TMX_VERBS_OBJ_QP ||
            qp->super.state != TMX_QPS_RTS || qp->no_sq || !qp->ka_on ||
            (qp->super.type != TMX_QPT_RC && qp->super.type != TMX_QPT_XRC_INI)) {
            continue;
        }
        if (qp->sq_head != qp->ka_head) {
            qp->ka_head = qp->sq_head; /* it has traffic: that finds a dead peer */
            continue;
        }
        seq = qp->sq_head;
        if (seq - qp->sq_tail >= qp->sq_depth) {
            continue;
        }
        s           = &qp->sq[seq & (qp->sq_depth - 1)];
        s->wr_id    = 0;
        s->seq      = seq;
        s->opcode   = TMX_WR_RDMA_WRITE;
        s->signaled = 0;
        s->internal = 1;
        memset(&w, 0, sizeof(w));
        w.wr_id      = TMX_VERBS_WRID(TMX_VERBS_WR_SEND, qp->gen, qp->obj, seq);
        w.opcode     = IBV_WR_RDMA_WRITE;
        w.send_flags = IBV_SEND_SIGNALED;
        if (ibv_post_send(qp->ibqp, &w, &bad) == 0) {
            qp->sq_head++;
            qp->unsig_run = 0;
        }
        qp->ka_head = qp->sq_head;
    }
}

/* Every 64th poll: the keepalive, and every 1024th the async events. */
static __attribute__((noinline)) void tmx_verbs_cq_tick(tmx_verbs_dev_t *dev)
{
    if ((dev->poll_count & 1023) == 0) {
        tmx_verbs_async_events(dev);
    }
    tmx_verbs_keepalive(dev);
}

/* The completions that one ibv_poll_cq returned (k of them, into iwc; k < 0: its error),
 * converted into wc, then what the hardware queue holds beyond them and the failures: the
 * part of tmx_verbs_cq_poll after a poll that found something. */
static __attribute__((noinline)) int tmx_verbs_cq_poll_found(tmx_verbs_cq_t *cq, int n,
                                                             tmx_wc_t *wc,
                                                             const struct ibv_wc *iwc, int k)
{
    tmx_verbs_dev_t *dev = (tmx_verbs_dev_t *)cq->super.dev;
    int              got = 0;

    if (k < 0) {
        tmx_error("verbs %s: polling a CQ failed: %s", dev->super.name, strerror(-k));
        return TMX_ERR_IO;
    }
    for (int i = 0; i < k; i++) {
        if (tmx_verbs_srecv_direct(dev, &iwc[i], &wc[got])) {
            got++;
            continue;
        }
        tmx_verbs_raw_t r = {.wr_id    = iwc[i].wr_id,
                             .status   = iwc[i].status,
                             .opcode   = iwc[i].opcode,
                             .byte_len = iwc[i].byte_len,
                             .imm      = iwc[i].imm_data,
                             .qp_num   = iwc[i].qp_num,
                             .src_qp   = iwc[i].src_qp,
                             .flags    = iwc[i].wc_flags};

        got += tmx_verbs_convert(dev, &r, &wc[got]);
    }
    if (k == n && got < n) {
        /* full, some kept by the provider: there may be more */
        int more = tmx_verbs_cq_poll_hw(cq, n - got, wc + got);
        got += more > 0 ? more : 0;
    }
    if (got < n && cq->async.count > 0) {
        /* the hardware queue had no more: the failures it showed come after */
        got += tmx_verbs_wcq_pop(&cq->async, n - got, wc + got);
    }
    return got;
}

/* The general case of tmx_verbs_cq_poll: a backlog, an extended CQ, more than a batch. */
static __attribute__((noinline)) int tmx_verbs_cq_poll_general(tmx_verbs_cq_t *cq, int n,
                                                               tmx_wc_t *wc)
{
    int got, hw;

    got = cq->blog.count > 0 ? tmx_verbs_wcq_pop(&cq->blog, n, wc) : 0;
    if (got == n) {
        return got;
    }
    if (cq->ibcqx == NULL && n - got <= TMX_VERBS_POLL_BATCH) {
        struct ibv_wc iwc[TMX_VERBS_POLL_BATCH];
        int           k = ibv_poll_cq(cq->ibcq, n - got, iwc);

        if (k == 0 && cq->async.count == 0) {
            return got;
        }
        hw = tmx_verbs_cq_poll_found(cq, n - got, wc + got, iwc, k);
        return hw < 0 ? (got > 0 ? got : hw) : got + hw;
    }
    hw = tmx_verbs_cq_poll_hw(cq, n - got, wc + got);
    if (hw < 0) {
        return got > 0 ? got : hw;
    }
    got += hw;
    if (got < n && cq->async.count > 0) {
        /* the hardware queue had no more: the failures it showed come after */
        got += tmx_verbs_wcq_pop(&cq->async, n - got, wc + got);
    }
    return got;
}

/*
 * Every progress round polls here, and most rounds of a waiting caller find nothing: the
 * common case is one ibv_poll_cq and, when it finds nothing, a test of the failures and the
 * return, with everything else out of line (tmx_verbs_cq_tick, _found, _general: their
 * register saves and checks were about 60 instructions of every idle round, beside rxe's own
 * poll of about 40).
 */
int tmx_verbs_cq_poll(tmx_cq_t *c, int n, tmx_wc_t *wc)
{
    tmx_verbs_cq_t  *cq = (tmx_verbs_cq_t *)c;
    tmx_verbs_dev_t *dev;
    struct ibv_wc    iwc[TMX_VERBS_POLL_BATCH];
    int              k;

    /* one test for the common case: 1 <= n <= a batch, wc given (else: the checks, or n == 0
     * or more than a batch, the general way) */
    if (cq == NULL || (unsigned)n - 1u >= TMX_VERBS_POLL_BATCH || wc == NULL) {
        if (cq == NULL || n < 0 || (n > 0 && wc == NULL)) {
            return TMX_ERR_INVALID_PARAM;
        }
        dev = (tmx_verbs_dev_t *)c->dev;
        if ((++dev->poll_count & 63) == 0) {
            tmx_verbs_cq_tick(dev);
        }
        return tmx_verbs_cq_poll_general(cq, n, wc);
    }
    dev = (tmx_verbs_dev_t *)c->dev;
    if ((++dev->poll_count & 63) == 0) {
        tmx_verbs_cq_tick(dev);
    }
    if (cq->blog.count > 0 || cq->ibcqx != NULL) {
        return tmx_verbs_cq_poll_general(cq, n, wc);
    }
    k = ibv_poll_cq(cq->ibcq, n, iwc);
    if (k == 0 && cq->async.count == 0) {
        return 0;
    }
    return tmx_verbs_cq_poll_found(cq, n, wc, iwc, k);
}
