/*
 * Software tag matching: the expected (posted receives) and unexpected (arrived messages)
 * queues of one worker.
 *
 * A message with tag T matches a receive (tag R, mask M) when (T & M) == (R & M).
 *
 * Expected queue: receives with a full mask (exact tag) live in hashed bins; receives with any
 * other mask live in one list. Every receive gets a sequence number at post time, and a match
 * takes the lowest-numbered matching receive across both, so post order is kept exactly,
 * wildcards included. A directed message costs a bin lookup plus a walk of the wildcard list
 * that stops at the first entry younger than the bin's candidate.
 *
 * Unexpected queue: every message sits in its tag's bin and in one arrival-ordered list. An
 * exact-tag receive searches the bin; a masked receive walks the arrival list. Arrival order
 * is the order the transport delivered (per-sender FIFO), which keeps MPI non-overtaking.
 *
 * Sources (directed receives). Every message carries its sender's id (src, never 0); a receive
 * may name one (src != 0) and then takes only that sender's messages. The rule above is kept
 * with one more condition: a message from S goes to the oldest posted receive whose tag
 * matches and whose src is 0 or S, across the bins and the wildcard list alike; a directed
 * receive (or probe) takes the oldest queued message from its sender that matches its tag. A
 * receive without a source pays one compare per entry it looks at. Directed receives are also
 * on their own list (exp_src, post order) so that a failed sender's receives can be found
 * (tmx_tag_exp_take_src) without a walk of the whole queue.
 *
 * Entries are embedded in the caller's objects (tmx_container_of). The engine allocates only
 * its bin arrays.
 */
#ifndef TMX_TAG_H
#define TMX_TAG_H

#include <stdint.h>
#include <tmx/tmx.h>

#include "util/list.h"

#define TMX_TAG_MASK_FULL UINT64_MAX

typedef struct tmx_tag_exp {
    tmx_list_t list;  /* bin list or wildcard list, in post order */
    uint64_t   tag;   /* already masked: tag & mask */
    uint64_t   mask;
    uint64_t   src;   /* the sender it takes messages from; 0: any */
    uint64_t   seq;   /* set by tmx_tag_exp_post */
    int        exact; /* set by tmx_tag_exp_post: mask == full */
    tmx_list_t src_list; /* engine->exp_src while posted, when src != 0 */
} tmx_tag_exp_t;

typedef struct tmx_tag_unexp {
    tmx_list_t bin_list;    /* bin of its tag, arrival order */
    tmx_list_t all_list;    /* all unexpected, arrival order */
    uint64_t   tag;
    uint64_t   src;         /* its sender's id (not 0) */
} tmx_tag_unexp_t;

typedef struct tmx_tag_engine {
    tmx_list_t *exp_bins;
    tmx_list_t  exp_wild;
    tmx_list_t  exp_src;    /* directed receives (src != 0), in post order */
    tmx_list_t *unexp_bins;
    tmx_list_t  unexp_all;
    uint64_t    bin_mask;   /* number of bins - 1 */
    uint64_t    next_seq;
    size_t      exp_count;
    size_t      unexp_count;
} tmx_tag_engine_t;

/*
 * hash_bits: log2 of the initial number of bins (1..24); TMX_ERR_INVALID_PARAM otherwise. The
 * bins double (up to 2^24) when a queue holds more than two entries per bin, so directed
 * matching stays O(1) at any depth; if that allocation fails the engine keeps working.
 */
tmx_status_t tmx_tag_engine_init(tmx_tag_engine_t *e, unsigned hash_bits);
/* Entries still queued are simply forgotten (the owner frees its objects). Safe to repeat. */
void tmx_tag_engine_cleanup(tmx_tag_engine_t *e);

/* Posts a receive; entry->tag, entry->mask and entry->src (0: any sender) set by the caller
 * (tag is masked here). */
void tmx_tag_exp_post(tmx_tag_engine_t *e, tmx_tag_exp_t *entry);
/* The oldest posted receive matching msg_tag and taking messages from msg_src (its src is 0 or
 * msg_src), removed from the queue; NULL if none. */
tmx_tag_exp_t *tmx_tag_exp_match(tmx_tag_engine_t *e, uint64_t msg_tag, uint64_t msg_src);
/* The oldest posted receive directed at src (entry->src == src, src != 0), removed from the
 * queue; NULL if none. For failing the receives of a sender that died. */
tmx_tag_exp_t *tmx_tag_exp_take_src(tmx_tag_engine_t *e, uint64_t src);
/* Removes a posted receive (cancel). A no-op for an entry already matched or removed. */
void tmx_tag_exp_remove(tmx_tag_engine_t *e, tmx_tag_exp_t *entry);

/* Queues an arrived message; entry->tag and entry->src set by the caller. */
void tmx_tag_unexp_add(tmx_tag_engine_t *e, tmx_tag_unexp_t *entry);
/* The oldest arrived message matching (tag, mask) from sender src (0: any); removed if
 * remove != 0. NULL if none. */
tmx_tag_unexp_t *tmx_tag_unexp_match(tmx_tag_engine_t *e, uint64_t tag, uint64_t mask,
                                     uint64_t src, int remove);
/* Removes a queued message (e.g. a claimed one that is freed). No-op if already removed. */
void tmx_tag_unexp_remove(tmx_tag_engine_t *e, tmx_tag_unexp_t *entry);

#endif /* TMX_TAG_H */
