/*
 * Tag-matching offload: the shadow of a device's tag list. See offload.h.
 */
#define TMX_LOG_SUBSYS "tag"
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "tag/offload.h"
#include "util/log.h"

tmx_status_t tmx_tm_init(tmx_tm_t *tm, const tmx_prov_ops_t *ops, tmx_pd_t *pd, tmx_srq_t *srq,
                         uint32_t max_tags, uint32_t max_ops, size_t thresh, uint64_t wrid_recv,
                         uint64_t wrid_op)
{
    memset(tm, 0, sizeof(*tm));
    tm->ops       = ops;
    tm->pd        = pd;
    tm->srq       = srq;
    tm->max_tags  = max_tags;
    tm->max_ops   = max_ops;
    tm->thresh    = thresh;
    tm->wrid_recv = wrid_recv;
    tm->wrid_op   = wrid_op;
    /* an entry holds its slot until its last completion: at most max_tags in the list, and
     * as many again deleted or matched whose completions are still on their way */
    tm->nslots     = max_tags * 2;
    tm->slots      = calloc(tm->nslots, sizeof(*tm->slots));
    tm->free_slots = malloc(tm->nslots * sizeof(*tm->free_slots));
    if (tm->slots == NULL || tm->free_slots == NULL) {
        free(tm->slots);
        free(tm->free_slots);
        memset(tm, 0, sizeof(*tm));
        return TMX_ERR_NO_MEMORY;
    }
    for (uint32_t i = 0; i < tm->nslots; i++) {
        tm->free_slots[tm->free_top++] = tm->nslots - 1 - i;
    }
    tmx_list_init(&tm->op_queue);
    tmx_list_init(&tm->sw_list);
    return TMX_OK;
}

static void tmx_tm_slot_release(tmx_tm_t *tm, uint32_t slot)
{
    tmx_tm_slot_t *s = &tm->slots[slot];

    if (s->mr != NULL) {
        tm->ops->mr_dereg(s->mr);
    }
    memset(s, 0, sizeof(*s));
    tm->free_slots[tm->free_top++] = slot;
}

void tmx_tm_cleanup(tmx_tm_t *tm)
{
    if (tm->slots == NULL) {
        return;
    }
    for (uint32_t i = 0; i < tm->nslots; i++) {
        if (tm->slots[i].used && tm->slots[i].mr != NULL) {
            tm->ops->mr_dereg(tm->slots[i].mr);
        }
    }
    free(tm->slots);
    free(tm->free_slots);
    memset(tm, 0, sizeof(*tm));
}

static tmx_status_t tmx_tm_post(tmx_tm_t *tm, tmx_srq_op_type_t type, uint32_t slot)
{
    tmx_srq_op_t op, *bad;
    tmx_sge_t    sge;
    tmx_status_t status;

    memset(&op, 0, sizeof(op));
    op.op             = type;
    op.flags          = TMX_OPS_TM_SYNC;
    op.unexpected_cnt = tm->sw_unexp;
    op.wr_id          = tm->wrid_op | slot;
    if (type == TMX_SRQ_OP_TM_ADD) {
        tmx_tm_slot_t  *s = &tm->slots[slot];
        tmx_tm_entry_t *e = s->entry;

        sge.addr       = (uintptr_t)e->buf;
        sge.length     = (uint32_t)e->len;
        sge.lkey       = s->mr->lkey;
        op.tag         = e->tag;
        op.mask        = e->mask;
        op.sg_list     = &sge;
        op.num_sge     = 1;
        op.recv_wr_id  = tm->wrid_recv | slot;
    } else if (type == TMX_SRQ_OP_TM_DEL) {
        /* signaled always: its completion says whether the entry came back */
        op.flags |= TMX_OPS_SIGNALED;
        op.handle = tm->slots[slot].handle;
    }
    if ((op.flags & TMX_OPS_SIGNALED) && tm->ops_out >= tm->max_ops) {
        return TMX_ERR_BUSY;
    }
    status = tm->ops->srq_post_ops(tm->srq, &op, &bad);
    if (status != TMX_OK) {
        if (status != TMX_ERR_BUSY) {
            tm->stats.op_errors++;
        }
        return status;
    }
    if (op.flags & TMX_OPS_SIGNALED) {
        tm->ops_out++;
    }
    if (type == TMX_SRQ_OP_TM_ADD) {
        tm->slots[slot].handle = op.handle;
        tm->stats.offered++;
    } else if (type == TMX_SRQ_OP_TM_DEL) {
        tm->slots[slot].del_posted = 1;
    } else {
        tm->stats.syncs++;
    }
    tm->sync_wanted = 0; /* every op carried the count */
    return TMX_OK;
}

/* An ADD the device refused: that receive, and every offered one behind it whose ADD was not
 * posted either, stay in software (a younger receive must not sit in the device while an older
 * one that could take the same message is only in software). */
static void tmx_tm_add_failed(tmx_tm_t *tm, tmx_tm_entry_t *failed)
{
    tmx_list_t *l, *t;
    int         found = 0;

    tmx_list_for_each_safe(l, t, &tm->op_queue) {
        tmx_tm_entry_t *e = tmx_container_of(l, tmx_tm_entry_t, op_link);

        if (e == failed) {
            found = 1;
        }
        if (!found || e->state != TMX_TM_ADD_QUEUED) {
            continue;
        }
        tmx_list_del(&e->op_link);
        tmx_tm_slot_release(tm, e->slot);
        tm->listed--;
        tmx_tm_sw_add(tm, e);
        tm->stats.fallbacks++;
    }
}

void tmx_tm_progress(tmx_tm_t *tm)
{
    tmx_list_t *l;

    while ((l = tm->op_queue.next) != &tm->op_queue) {
        tmx_tm_entry_t *e = tmx_container_of(l, tmx_tm_entry_t, op_link);
        tmx_status_t    status;

        if (e->state == TMX_TM_ADD_QUEUED) {
            status = tmx_tm_post(tm, TMX_SRQ_OP_TM_ADD, e->slot);
            if (status == TMX_OK) {
                e->state = TMX_TM_LISTED;
            } else if (status != TMX_ERR_BUSY) {
                tmx_debug("tag list add refused (%s): receive kept in software",
                          tmx_status_string(status));
                tmx_tm_add_failed(tm, e);
                continue;
            }
        } else {
            status = tmx_tm_post(tm, TMX_SRQ_OP_TM_DEL, e->slot);
            if (status == TMX_OK) {
                e->state = TMX_TM_DELETING;
            }
        }
        if (status != TMX_OK) {
            return; /* the device is busy: retried at the next progress */
        }
        tmx_list_del(&e->op_link);
    }
    if (tm->sync_wanted) {
        tmx_tm_post(tm, TMX_SRQ_OP_TM_SYNC, TMX_TM_SYNC_SLOT);
    }
}

/* An older receive that software alone holds could take a message entry could take:
 * offering entry would let the device give it that message first. */
static int tmx_tm_sw_overlap(tmx_tm_t *tm, const tmx_tm_entry_t *entry)
{
    tmx_list_t *l;

    if (tm->sw_only > TMX_TM_SW_SCAN) {
        return 1;
    }
    tmx_list_for_each(l, &tm->sw_list) {
        const tmx_tm_entry_t *o = tmx_container_of(l, tmx_tm_entry_t, sw_link);
        if (((o->tag ^ entry->tag) & o->mask & entry->mask) == 0) {
            return 1;
        }
    }
    return 0;
}

int tmx_tm_offer(tmx_tm_t *tm, tmx_tm_entry_t *entry)
{
    tmx_tm_slot_t *s;
    uint32_t       slot;
    tmx_status_t   status;

    entry->state = TMX_TM_NONE;
    if (entry->len < tm->thresh || entry->len >= UINT32_MAX ||
        (tm->sw_only > 0 && tmx_tm_sw_overlap(tm, entry))) {
        goto software;
    }
    if (tm->listed >= tm->max_tags || tm->free_top == 0) {
        tm->stats.fallbacks++;
        goto software;
    }
    slot = tm->free_slots[tm->free_top - 1];
    s    = &tm->slots[slot];
    status = tm->ops->mr_reg(tm->pd, entry->buf, entry->len, TMX_ACCESS_LOCAL_WRITE, &s->mr);
    if (status != TMX_OK) {
        tmx_debug("registering a %zu-byte receive for the tag list failed (%s): kept in "
                  "software", entry->len, tmx_status_string(status));
        s->mr = NULL;
        tm->stats.fallbacks++;
        goto software;
    }
    tm->free_top--;
    s->used      = 1;
    s->entry     = entry;
    entry->slot  = slot;
    entry->state = TMX_TM_ADD_QUEUED;
    tm->listed++;
    tmx_list_add_tail(&tm->op_queue, &entry->op_link);
    tmx_tm_progress(tm);
    /* a refused ADD made it software's after all (counted in sw_only there) */
    return entry->state != TMX_TM_NONE;

software:
    tmx_tm_sw_add(tm, entry);
    return 0;
}

int tmx_tm_withdraw(tmx_tm_t *tm, tmx_tm_entry_t *entry)
{
    switch (entry->state) {
    case TMX_TM_ADD_QUEUED:
        tmx_list_del(&entry->op_link);
        tmx_tm_slot_release(tm, entry->slot);
        entry->state = TMX_TM_NONE;
        tm->listed--;
        return 1;
    case TMX_TM_LISTED:
        entry->state = TMX_TM_DEL_QUEUED;
        tmx_list_add_tail(&tm->op_queue, &entry->op_link);
        tmx_tm_progress(tm);
        return 0;
    default:
        return 0; /* a DEL is under way, or the device matched it: its completion tells */
    }
}

tmx_tm_entry_t *tmx_tm_recv_done(tmx_tm_t *tm, const tmx_wc_t *wc, int *final_p)
{
    uint32_t        slot = (uint32_t)wc->wr_id;
    tmx_tm_slot_t  *s;
    tmx_tm_entry_t *e;
    int             final = (wc->wc_flags & TMX_WC_TM_DATA_VALID) || wc->status != TMX_WC_SUCCESS;

    *final_p = final;
    if (slot >= tm->nslots || !tm->slots[slot].used) {
        tmx_error("tag list completion for unknown entry %u", slot);
        return NULL;
    }
    s = &tm->slots[slot];
    e = s->entry;
    if (!s->matched) {
        s->matched = 1;
        tm->listed--;
        tm->stats.matched++;
        if (e != NULL && e->state == TMX_TM_DEL_QUEUED) {
            tmx_list_del(&e->op_link); /* the entry is gone: no DEL may name its handle now */
        }
    }
    if (e != NULL) {
        e->state = final ? TMX_TM_NONE : TMX_TM_MATCHED;
    }
    if (final) {
        s->entry = NULL;
        if (!s->del_posted) {
            tmx_tm_slot_release(tm, slot);
        } else if (s->mr != NULL) {
            tm->ops->mr_dereg(s->mr); /* the slot waits only for the DEL's error now */
            s->mr = NULL;
        }
    }
    return e;
}

tmx_tm_entry_t *tmx_tm_op_done(tmx_tm_t *tm, const tmx_wc_t *wc, int *is_del_p,
                               int *consumed_p)
{
    uint32_t        slot = (uint32_t)wc->wr_id;
    tmx_tm_slot_t  *s;
    tmx_tm_entry_t *e;

    *is_del_p   = 0;
    *consumed_p = 0;
    if (wc->wc_flags & TMX_WC_TM_SYNC_REQ) {
        tmx_tm_sync_request(tm);
    }
    if (wc->opcode != TMX_WC_TM_DEL) {
        if (wc->status != TMX_WC_SUCCESS) {
            tmx_warn("tag list %s failed: %s", wc->opcode == TMX_WC_TM_ADD ? "add" : "sync",
                     tmx_wc_status_string(wc->status));
        }
        return NULL; /* ADD and SYNC are posted unsignaled: nothing was counted */
    }
    if (tm->ops_out > 0) {
        tm->ops_out--;
    }
    if (slot >= tm->nslots || !tm->slots[slot].used || !tm->slots[slot].del_posted) {
        tmx_error("tag list delete completion for unknown entry %u", slot);
        return NULL;
    }
    *is_del_p = 1;
    s         = &tm->slots[slot];
    e         = s->entry;
    if (wc->status == TMX_WC_SUCCESS) {
        tm->listed--;
        if (e != NULL) {
            e->state = TMX_TM_NONE;
        }
    } else {
        /* TMX_WC_TM_ERR: a message consumed the entry first; its completions came before */
        *consumed_p = 1;
        if (!s->matched) {
            tmx_error("tag list delete failed (%s) with no match seen for entry %u",
                      tmx_wc_status_string(wc->status), slot);
            tm->listed--;
            if (e != NULL) {
                e->state = TMX_TM_NONE;
            }
        }
    }
    tmx_tm_slot_release(tm, slot);
    return e;
}
