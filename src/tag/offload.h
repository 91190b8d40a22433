/*
 * Tag-matching offload: the shadow of a device's tag list (a TM SRQ, prov.h).
 *
 * The core keeps every posted receive in the software engine (tag.h); a receive it offers here
 * also goes to the device's tag list, so that a message the device matches lands in the
 * receive's buffer directly. This module owns what the device holds: the entries (their
 * handles, registrations and the completions still to come for each), the list operations
 * waiting to be posted (in order: a DEL is never overtaken by a later op), the number of
 * unexpected messages software has handled (reported with every op, for phase
 * synchronization), and the counters shown by tmx_info. The policy that keeps MPI order
 * (which receives may be offered at all) is the core's; this module refuses only what the
 * device cannot take (size, a full list, a failed registration) and counts the refusals.
 *
 * Slots: every entry given to the device gets a slot, named in the recv_wr_id and op wr_id.
 * A slot lives until every completion the device owes for it has been polled, even if its
 * receive completed and was freed meanwhile (then the slot is detached from it).
 */
#ifndef TMX_TAG_OFFLOAD_H
#define TMX_TAG_OFFLOAD_H

#include <stdint.h>
#include <tmx/tmx.h>

#include "prov/prov.h"
#include "util/list.h"

typedef enum {
    TMX_TM_NONE       = 0, /* software only */
    TMX_TM_ADD_QUEUED = 1, /* offered; the ADD waits for room to be posted */
    TMX_TM_LISTED     = 2, /* in the device's list */
    TMX_TM_DEL_QUEUED = 3, /* taken back; the DEL waits to be posted */
    TMX_TM_DELETING   = 4, /* DEL posted, its completion not yet seen */
    TMX_TM_MATCHED    = 5, /* the device matched it; its data completion is still to come */
} tmx_tm_state_t;

/* Embedded in the owner (a receive request). */
typedef struct tmx_tm_entry {
    tmx_list_t op_link; /* tm->op_queue while an op waits */
    tmx_list_t sw_link; /* tm->sw_list while software alone holds it */
    uint64_t   tag;     /* tag & mask */
    uint64_t   mask;
    void      *buf;
    size_t     len;
    uint32_t   slot;
    uint8_t    state;   /* tmx_tm_state_t */
} tmx_tm_entry_t;

typedef struct tmx_tm_slot {
    tmx_tm_entry_t *entry;     /* NULL once detached */
    tmx_mr_t       *mr;
    uint32_t        handle;
    uint8_t         used;
    uint8_t         del_posted;
    uint8_t         matched;   /* a receive completion (MATCH) came */
} tmx_tm_slot_t;

typedef struct tmx_tm_stats {
    uint64_t offered;     /* ADDs posted */
    uint64_t matched;     /* receives the device matched */
    uint64_t unexpected;  /* tagged messages the device delivered unexpected */
    uint64_t syncs;       /* SYNC ops posted */
    uint64_t sync_reqs;   /* completions that asked for a SYNC */
    uint64_t fallbacks;   /* receives kept in software: list full, size, registration, op failed */
    uint64_t forced;      /* entries taken back because a software-path message matched them */
    uint64_t rndv;        /* rendezvous data the device read itself */
    uint64_t op_errors;   /* list operations the device refused when posted */
} tmx_tm_stats_t;

typedef struct tmx_tm {
    const tmx_prov_ops_t *ops;
    tmx_pd_t             *pd;
    tmx_srq_t            *srq;
    uint32_t              max_tags;
    uint32_t              max_ops;
    size_t                thresh;     /* smallest receive offered */
    tmx_tm_slot_t        *slots;      /* max_tags + max_ops of them */
    uint32_t             *free_slots;
    uint32_t              nslots;
    uint32_t              free_top;
    uint32_t              listed;     /* entries the device holds or is about to */
    uint32_t              ops_out;    /* signaled ops whose completion is not yet polled */
    uint32_t              sw_unexp;   /* unexpected messages handled by software */
    uint32_t              sw_only;    /* receives in the software engine the device has not */
    tmx_list_t            sw_list;    /* those receives, oldest first */
    int                   sync_wanted;
    tmx_list_t            op_queue;
    uint64_t              wrid_recv;  /* recv_wr_id = wrid_recv | slot */
    uint64_t              wrid_op;    /* op wr_id = wrid_op | slot */
    tmx_tm_stats_t        stats;
} tmx_tm_t;

/* The slot named by a SYNC op's wr_id (no entry). */
#define TMX_TM_SYNC_SLOT 0xffffffffu

/* wrid_recv, wrid_op: what the core's dispatch recognizes (the slot is or-ed in). */
tmx_status_t tmx_tm_init(tmx_tm_t *tm, const tmx_prov_ops_t *ops, tmx_pd_t *pd, tmx_srq_t *srq,
                         uint32_t max_tags, uint32_t max_ops, size_t thresh, uint64_t wrid_recv,
                         uint64_t wrid_op);
/* Deregisters what entries still hold; the SRQ (destroyed by the caller) forgets them. */
void tmx_tm_cleanup(tmx_tm_t *tm);

/*
 * Offers a receive (entry->tag/mask/buf/len set by the caller) to the device. 1: the entry is
 * the device's (ADD posted or queued); 0: kept in software (counted as a fallback when the
 * device could not take it). A receive is not offered while an older one that software alone
 * holds could take a message it could take: ((t1 ^ t2) & m1 & m2) == 0, checked against each
 * of up to TMX_TM_SW_SCAN such receives (more: not offered).
 */
#define TMX_TM_SW_SCAN 16
int tmx_tm_offer(tmx_tm_t *tm, tmx_tm_entry_t *entry);

/*
 * Takes an offered receive back. 1: done at once (its ADD had not been posted); 0: a DEL is
 * under way, whose completion (tmx_tm_op_done) says whether the entry came back or a message
 * consumed it first.
 */
int tmx_tm_withdraw(tmx_tm_t *tm, tmx_tm_entry_t *entry);

/* Posts the ops that wait, in order; the count of software's unexpected messages rides on
 * each. */
void tmx_tm_progress(tmx_tm_t *tm);

/* A TMX_WC_TM_RECV completion with MATCH (or the DATA_VALID that follows). Returns the entry
 * (NULL when its receive has gone) and *final_p = 1 when no more receive completions come for
 * it (the receive then leaves the device's hands). */
tmx_tm_entry_t *tmx_tm_recv_done(tmx_tm_t *tm, const tmx_wc_t *wc, int *final_p);

/* A list op completion (TMX_WC_TM_ADD/_DEL/_SYNC). For a DEL, returns its entry (NULL when
 * its receive has gone), *consumed_p = 1 when a message consumed it before the DEL. */
tmx_tm_entry_t *tmx_tm_op_done(tmx_tm_t *tm, const tmx_wc_t *wc, int *is_del_p,
                               int *consumed_p);

/* A receive the device will not have, in the software engine (entry->tag, ->mask set). */
static inline void tmx_tm_sw_add(tmx_tm_t *tm, tmx_tm_entry_t *entry)
{
    entry->state = TMX_TM_NONE;
    tm->sw_only++;
    tmx_list_add_tail(&tm->sw_list, &entry->sw_link);
}

/* A receive the device does not have (entry->state NONE) left the software engine. */
static inline void tmx_tm_sw_left(tmx_tm_t *tm, tmx_tm_entry_t *entry)
{
    if (entry->state == TMX_TM_NONE && tm->sw_only > 0) {
        tm->sw_only--;
        tmx_list_del(&entry->sw_link);
    }
}

/* Software handled one more unexpected message the device delivered. */
static inline void tmx_tm_unexp_handled(tmx_tm_t *tm)
{
    tm->sw_unexp++;
    tm->stats.unexpected++;
}

/* A completion carried TMX_WC_TM_SYNC_REQ. */
static inline void tmx_tm_sync_request(tmx_tm_t *tm)
{
    tm->sync_wanted = 1;
    tm->stats.sync_reqs++;
}

#endif /* TMX_TAG_OFFLOAD_H */
