/*
 * Soft device, shared-memory fabric: the tag-matching SRQ's list (prov.h, "tag matching"):
 * creation, list operations (ADD, DEL, SYNC), phase synchronization, handles and the retiring
 * of handles and outstanding operations as their completions are polled. The receive path
 * (matching messages against the list, rendezvous offload) is in soft_qp.c.
 */
#define _GNU_SOURCE
#define TMX_LOG_SUBSYS "soft"

#include <stdlib.h>
#include <string.h>

#include "prov/soft/soft.h"
#include "util/log.h"

/* ---------------------------------------------------------------- TMX_SOFT_TM_INJECT */

/* "add=N,del=N,sync=N" (any subset, any order, N >= 1): every Nth op of the kind fails. */
tmx_status_t tmx_soft_tm_parse_inject(tmx_soft_dev_t *dev, const char *spec)
{
    static const char *const kinds[3] = {"add", "del", "sync"};
    const char              *p        = spec;

    memset(dev->tm_inject, 0, sizeof(dev->tm_inject));
    memset(dev->tm_posted, 0, sizeof(dev->tm_posted));
    while (p != NULL && *p != '\0') {
        const char   *eq = strchr(p, '=');
        char         *end;
        unsigned long n;
        int           k;

        for (k = 0; k < 3; k++) {
            if (eq != NULL && (size_t)(eq - p) == strlen(kinds[k]) &&
                strncmp(p, kinds[k], (size_t)(eq - p)) == 0) {
                break;
            }
        }
        if (k == 3 || eq[1] < '0' || eq[1] > '9') {
            goto err;
        }
        n = strtoul(eq + 1, &end, 10);
        if (n == 0 || n > UINT32_MAX || (*end != ',' && *end != '\0') || dev->tm_inject[k]) {
            goto err;
        }
        dev->tm_inject[k] = (unsigned)n;
        p                 = *end == ',' ? end + 1 : end;
        if (*end == ',' && *p == '\0') {
            goto err;
        }
    }
    return TMX_OK;

err:
    tmx_error("TMX_SOFT_TM_INJECT=\"%s\" is malformed: expected a comma list of add=N, del=N, "
              "sync=N (N >= 1, each kind at most once)", spec);
    memset(dev->tm_inject, 0, sizeof(dev->tm_inject));
    return TMX_ERR_INVALID_PARAM;
}

/* ---------------------------------------------------------------- handles and events */

static tmx_status_t tmx_soft_tm_grow(tmx_soft_tm_t *tm)
{
    uint32_t           cap  = tm->ent_cap * 2;
    tmx_soft_tm_ent_t *ent  = realloc(tm->ent, cap * sizeof(*ent));
    uint32_t          *free_q;

    if (ent == NULL) {
        return TMX_ERR_NO_MEMORY;
    }
    tm->ent = ent;
    memset(ent + tm->ent_cap, 0, (cap - tm->ent_cap) * sizeof(*ent));
    free_q = malloc(cap * sizeof(*free_q));
    if (free_q == NULL) {
        return TMX_ERR_NO_MEMORY; /* the table grew, harmless; no handle yet */
    }
    /* the free handles queued, then the new ones, in order */
    for (uint32_t i = 0; i < tm->free_count; i++) {
        free_q[i] = tm->free[(tm->free_head + i) & (tm->ent_cap - 1)];
    }
    for (uint32_t h = tm->ent_cap; h < cap; h++) {
        free_q[tm->free_count + h - tm->ent_cap] = h;
    }
    free(tm->free);
    tm->free        = free_q;
    tm->free_head   = 0;
    tm->free_count += cap - tm->ent_cap;
    tm->ent_cap     = cap;
    return TMX_OK;
}

/* A free handle, oldest freed first (a handle comes back as late as possible). */
static uint32_t tmx_soft_tm_handle_get(tmx_soft_tm_t *tm)
{
    uint32_t h;

    if (tm->free_count == 0 && tmx_soft_tm_grow(tm) != TMX_OK) {
        return 0;
    }
    h             = tm->free[tm->free_head];
    tm->free_head = (tm->free_head + 1) & (tm->ent_cap - 1);
    tm->free_count--;
    return h;
}

static void tmx_soft_tm_handle_put(tmx_soft_tm_t *tm, uint32_t h)
{
    /* ent_cap - 1 handles exist: the ring of ent_cap always has room */
    tm->free[(tm->free_head + tm->free_count) & (tm->ent_cap - 1)] = h;
    tm->free_count++;
    memset(&tm->ent[h], 0, sizeof(tm->ent[h]));
}

/* Records that the completion just pushed (the CQ's last) ends something when polled. */
static void tmx_soft_tm_ev_add(tmx_soft_tm_t *tm, uint32_t handle)
{
    tmx_soft_tm_ev_t *ev;

    if (tm->ev_count == tm->ev_cap) {
        unsigned cap = tm->ev_cap * 2;

        ev = malloc(cap * sizeof(*ev));
        if (ev == NULL) {
            /* Out of memory: the handle or op is never retired, a leak of one, never a
             * reuse too early. */
            tmx_error("tm srq: out of memory: a %s is never retired",
                      handle != 0 ? "tag handle" : "list operation");
            return;
        }
        for (unsigned i = 0; i < tm->ev_count; i++) {
            ev[i] = tm->ev[(tm->ev_head + i) & (tm->ev_cap - 1)];
        }
        free(tm->ev);
        tm->ev      = ev;
        tm->ev_cap  = cap;
        tm->ev_head = 0;
    }
    ev         = &tm->ev[(tm->ev_head + tm->ev_count) & (tm->ev_cap - 1)];
    ev->pos    = tm->cq->pushed;
    ev->handle = handle;
    tm->ev_count++;
}

/* After a poll of cq: what its polled completions end is retired. */
void tmx_soft_tm_polled(tmx_soft_cq_t *cq)
{
    for (tmx_soft_tm_t *tm = cq->tm; tm != NULL; tm = tm->cq_next) {
        while (tm->ev_count > 0 && tm->ev[tm->ev_head].pos <= cq->popped) {
            uint32_t           h = tm->ev[tm->ev_head].handle;
            tmx_soft_tm_ent_t *e;

            tm->ev_head = (tm->ev_head + 1) & (tm->ev_cap - 1);
            tm->ev_count--;
            if (h == 0) {
                tm->ops_out--;
                continue;
            }
            e = &tm->ent[h];
            if (--e->wcs == 0 && e->state == TMX_SOFT_TM_RETIRING) {
                tmx_soft_tm_handle_put(tm, h);
            }
        }
    }
}

/* Pushes a completion of the SRQ's; h: the entry it belongs to (0: none); op: a list op's. */
static void tmx_soft_tm_push(tmx_soft_tm_t *tm, const tmx_wc_t *wc, uint32_t h, int op)
{
    tmx_soft_cq_push(tm->cq, wc);
    if (op) {
        tmx_soft_tm_ev_add(tm, 0);
    }
    if (h != 0) {
        tm->ent[h].wcs++;
        tmx_soft_tm_ev_add(tm, h);
    }
}

/* ---------------------------------------------------------------- create, destroy */

tmx_status_t tmx_soft_tm_create(tmx_soft_srq_t *srq, const tmx_srq_init_attr_t *attr)
{
    const tmx_tm_caps_t *caps = &srq->super.pd->dev->attr.tm;
    tmx_soft_cq_t       *cq   = (tmx_soft_cq_t *)attr->cq;
    tmx_soft_tm_t       *tm;

    if (cq == NULL || attr->xrcd != NULL || attr->max_num_tags == 0 ||
        attr->max_num_tags > caps->max_num_tags || attr->max_ops == 0 ||
        attr->max_ops > caps->max_ops || cq->super.dev != srq->super.pd->dev) {
        return TMX_ERR_INVALID_PARAM;
    }
    tm = calloc(1, sizeof(*tm));
    if (tm == NULL) {
        return TMX_ERR_NO_MEMORY;
    }
    tm->srq      = srq;
    tm->cq       = cq;
    tm->max_tags = attr->max_num_tags;
    tm->max_ops  = attr->max_ops;
    tm->gap      = ((tmx_soft_dev_t *)srq->super.pd->dev)->cfg->soft_tm_sync_gap;
    /* ent_cap and ev_cap stay powers of two (they double): rings are indexed by mask */
    tm->ent_cap  = 1; /* handle 0 only: the first ADD grows the table */
    tm->ent      = calloc(1, sizeof(*tm->ent));
    tm->free     = calloc(1, sizeof(*tm->free));
    tm->ev_cap   = 64;
    tm->ev       = calloc(tm->ev_cap, sizeof(*tm->ev));
    if (tm->ent == NULL || tm->free == NULL || tm->ev == NULL) {
        goto err_free;
    }
    while (tm->ent_cap <= tm->max_tags) {
        if (tmx_soft_tm_grow(tm) != TMX_OK) {
            goto err_free;
        }
    }
    tm->cq_next = cq->tm;
    cq->tm      = tm;
    srq->tm     = tm;
    return TMX_OK;

err_free:
    free(tm->ent);
    free(tm->free);
    free(tm->ev);
    free(tm);
    return TMX_ERR_NO_MEMORY;
}

void tmx_soft_tm_destroy(tmx_soft_srq_t *srq)
{
    tmx_soft_tm_t  *tm = srq->tm;
    tmx_soft_tm_t **pp;

    if (tm == NULL) {
        return;
    }
    for (pp = &tm->cq->tm; *pp != NULL; pp = &(*pp)->cq_next) {
        if (*pp == tm) {
            *pp = tm->cq_next;
            break;
        }
    }
    free(tm->ent);
    free(tm->free);
    free(tm->ev);
    free(tm);
    srq->tm = NULL;
}

/* ---------------------------------------------------------------- phase synchronization */

unsigned tmx_soft_tm_sync_req(const tmx_soft_tm_t *tm)
{
    return (uint16_t)(tm->uexp - tm->sw) > tm->gap ? TMX_WC_TM_SYNC_REQ : 0;
}

unsigned tmx_soft_tm_unexpected(tmx_soft_tm_t *tm)
{
    tm->uexp++;
    return tmx_soft_tm_sync_req(tm);
}

/* Software reports it has handled cnt unexpected messages (mod 2^16); when that is every one
 * the device delivered, every entry of the list may match. */
static void tmx_soft_tm_sync(tmx_soft_tm_t *tm, uint32_t cnt)
{
    tm->sw = (uint16_t)cnt;
    if (tm->sw == tm->uexp && tm->inelig > 0) {
        for (uint32_t h = tm->first; h != 0; h = tm->ent[h].next) {
            tm->ent[h].eligible = 1;
        }
        tm->inelig = 0;
    }
}

/* ---------------------------------------------------------------- the list */

static void tmx_soft_tm_unlink(tmx_soft_tm_t *tm, uint32_t h)
{
    tmx_soft_tm_ent_t *e = &tm->ent[h];

    if (e->prev != 0) {
        tm->ent[e->prev].next = e->next;
    } else {
        tm->first = e->next;
    }
    if (e->next != 0) {
        tm->ent[e->next].prev = e->prev;
    } else {
        tm->last = e->prev;
    }
    e->prev = e->next = 0;
    if (!e->eligible) {
        tm->inelig--;
    }
    tm->listed--;
}

uint32_t tmx_soft_tm_match(tmx_soft_tm_t *tm, uint64_t tag)
{
    for (uint32_t h = tm->first; h != 0; h = tm->ent[h].next) {
        const tmx_soft_tm_ent_t *e = &tm->ent[h];

        if (e->eligible && (tag & e->mask) == e->tag) {
            return h;
        }
    }
    return 0;
}

void tmx_soft_tm_consume(tmx_soft_tm_t *tm, uint32_t h)
{
    tmx_soft_tm_unlink(tm, h);
    tm->ent[h].state = TMX_SOFT_TM_CONSUMED;
}

static void tmx_soft_tm_del_fail(tmx_soft_tm_t *tm, uint32_t h, uint64_t wr_id)
{
    tmx_wc_t wc;

    memset(&wc, 0, sizeof(wc));
    wc.wr_id    = wr_id;
    wc.status   = TMX_WC_TM_ERR;
    wc.opcode   = TMX_WC_TM_DEL;
    wc.wc_flags = tmx_soft_tm_sync_req(tm);
    tmx_soft_tm_push(tm, &wc, h, 1);
}

void tmx_soft_tm_complete(tmx_soft_tm_t *tm, uint32_t h, tmx_wc_t *wc, int last)
{
    tmx_soft_tm_ent_t *e;

    tmx_soft_tm_push(tm, wc, h, 0);
    if (!last || h == 0) {
        return;
    }
    /* The entry's last receive completion: a DEL that came meanwhile fails now, after it,
     * and the handle retires once all of them are polled. */
    e        = &tm->ent[h];
    e->state = TMX_SOFT_TM_RETIRING;
    if (e->del) {
        tmx_soft_tm_del_fail(tm, h, e->del_wr_id);
    }
}

/* ---------------------------------------------------------------- list operations */

static void tmx_soft_tm_op_complete(tmx_soft_tm_t *tm, const tmx_srq_op_t *op,
                                    tmx_wc_opcode_t opcode, uint32_t h)
{
    tmx_wc_t wc;

    memset(&wc, 0, sizeof(wc));
    wc.wr_id    = op->wr_id;
    wc.status   = TMX_WC_SUCCESS;
    wc.opcode   = opcode;
    wc.wc_flags = tmx_soft_tm_sync_req(tm);
    tmx_soft_tm_push(tm, &wc, h, 1);
}

/* The entry a DEL names: listed, or consumed with no DEL yet; 0 otherwise. */
static tmx_soft_tm_ent_t *tmx_soft_tm_del_target(tmx_soft_tm_t *tm, uint32_t h)
{
    tmx_soft_tm_ent_t *e;

    if (h == 0 || h >= tm->ent_cap) {
        return NULL;
    }
    e = &tm->ent[h];
    if (e->state == TMX_SOFT_TM_LISTED ||
        ((e->state == TMX_SOFT_TM_CONSUMED || e->state == TMX_SOFT_TM_RETIRING) && !e->del)) {
        return e;
    }
    return NULL;
}

static tmx_status_t tmx_soft_tm_post_one(tmx_soft_dev_t *dev, tmx_soft_tm_t *tm,
                                         tmx_srq_op_t *op)
{
    int                signaled = (op->flags & TMX_OPS_SIGNALED) != 0;
    tmx_soft_tm_ent_t *e        = NULL;
    uint32_t           h        = 0;
    int                kind;

    switch (op->op) {
    case TMX_SRQ_OP_TM_ADD:
        if (op->num_sge < 0 || (unsigned)op->num_sge > dev->super.attr.tm.max_sge ||
            (op->num_sge > 0 && op->sg_list == NULL) || (op->tag & ~op->mask) != 0) {
            return TMX_ERR_INVALID_PARAM;
        }
        kind = 0;
        break;
    case TMX_SRQ_OP_TM_DEL:
        e = tmx_soft_tm_del_target(tm, op->handle);
        if (e == NULL) {
            return TMX_ERR_INVALID_PARAM;
        }
        /* Consumed by a message first: the DEL fails, with a completion, signaled or not. */
        signaled = signaled || e->state != TMX_SOFT_TM_LISTED;
        kind     = 1;
        break;
    case TMX_SRQ_OP_TM_SYNC:
        kind = 2;
        break;
    default:
        return TMX_ERR_INVALID_PARAM;
    }
    if (signaled && tm->ops_out >= tm->max_ops) {
        return TMX_ERR_BUSY;
    }
    if (dev->tm_inject[kind] != 0 && ++dev->tm_posted[kind] % dev->tm_inject[kind] == 0) {
        tmx_debug("tm srq: %s operation failed by TMX_SOFT_TM_INJECT",
                  kind == 0 ? "add" : kind == 1 ? "del" : "sync");
        return TMX_ERR_IO;
    }
    if (kind == 0 && tm->listed == tm->max_tags) {
        return TMX_ERR_NO_RESOURCE;
    }
    if (kind == 0 && (h = tmx_soft_tm_handle_get(tm)) == 0) {
        return TMX_ERR_NO_MEMORY;
    }
    /* From here the op is done: its count first, so that an ADD in step is eligible. */
    if ((op->flags & TMX_OPS_TM_SYNC) || kind == 2) {
        tmx_soft_tm_sync(tm, op->unexpected_cnt);
    }
    if (signaled) {
        tm->ops_out++; /* until its completion is polled */
    }
    switch (kind) {
    case 0:
        e             = &tm->ent[h];
        e->tag        = op->tag;
        e->mask       = op->mask;
        e->recv_wr_id = op->recv_wr_id;
        e->num_sge    = op->num_sge;
        if (op->num_sge > 0) {
            e->sge = op->sg_list[0];
        }
        e->state    = TMX_SOFT_TM_LISTED;
        e->eligible = tm->uexp == tm->sw;
        e->prev     = tm->last;
        e->next     = 0;
        if (tm->last != 0) {
            tm->ent[tm->last].next = h;
        } else {
            tm->first = h;
        }
        tm->last = h;
        tm->listed++;
        if (!e->eligible) {
            tm->inelig++;
        }
        op->handle = h;
        if (signaled) {
            tmx_soft_tm_op_complete(tm, op, TMX_WC_TM_ADD, 0);
        }
        break;
    case 1:
        h = op->handle;
        if (e->state == TMX_SOFT_TM_LISTED) {
            tmx_soft_tm_unlink(tm, h);
            e->del = 1;
            if (signaled) {
                /* the handle is free once the DEL's completion is polled */
                e->state = TMX_SOFT_TM_RETIRING;
                tmx_soft_tm_op_complete(tm, op, TMX_WC_TM_DEL, h);
            } else {
                tmx_soft_tm_handle_put(tm, h);
            }
        } else {
            /* a message consumed it: the DEL fails after the entry's receive completions */
            e->del       = 1;
            e->del_wr_id = op->wr_id;
            if (e->state == TMX_SOFT_TM_RETIRING) {
                tmx_soft_tm_del_fail(tm, h, op->wr_id); /* they were all given */
            }
        }
        break;
    default:
        if (signaled) {
            tmx_soft_tm_op_complete(tm, op, TMX_WC_TM_SYNC, 0);
        }
        break;
    }
    return TMX_OK;
}

tmx_status_t tmx_soft_srq_post_ops(tmx_srq_t *s, tmx_srq_op_t *op, tmx_srq_op_t **bad_p)
{
    tmx_soft_srq_t *srq = (tmx_soft_srq_t *)s;
    tmx_soft_tm_t  *tm  = srq != NULL ? srq->tm : NULL;
    tmx_status_t    status;

    if (tm == NULL) {
        if (bad_p != NULL) {
            *bad_p = op;
        }
        return srq != NULL && srq->super.type != TMX_SRQT_TM ? TMX_ERR_UNSUPPORTED
                                                              : TMX_ERR_INVALID_PARAM;
    }
    /* An adapter matches what arrives while software prepares its list operations: messages
     * already on the wire reach the list before these ops do. That is the order that makes
     * phase synchronization matter (an ADD of a tag that arrived unexpected a moment ago), so
     * the soft device always takes it. */
    tmx_soft_rx_arrivals((tmx_soft_dev_t *)s->pd->dev);
    for (; op != NULL; op = op->next) {
        status = tmx_soft_tm_post_one((tmx_soft_dev_t *)s->pd->dev, tm, op);
        if (status != TMX_OK) {
            if (bad_p != NULL) {
                *bad_p = op;
            }
            return status;
        }
    }
    return TMX_OK;
}
