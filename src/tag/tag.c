/*
 * Software tag matching engine: expected and unexpected queues (see tag.h for the rules).
 *
 * Both queues share one bin count. Bins double when either queue holds more than
 * TMX_TAG_LOAD_MAX entries per bin, so a directed match walks a short chain whatever the queue
 * depth. Doubling keeps each bin in order: new bin i takes entries only from old bin
 * (i & old_mask), and they are moved in their old order.
 */
#include "tag/tag.h"

#include <assert.h>
#include <stdlib.h>

#include "util/hash.h"

#define TMX_TAG_HASH_BITS_MIN 1
#define TMX_TAG_HASH_BITS_MAX 24
#define TMX_TAG_LOAD_MAX      2 /* entries per bin before the bins double */

static inline size_t tmx_tag_bin_index(const tmx_tag_engine_t *e, uint64_t tag)
{
    return (size_t)(tmx_hash_u64(tag) & e->bin_mask);
}

static tmx_list_t *tmx_tag_bins_alloc(size_t nbins)
{
    tmx_list_t *bins;
    size_t      i;

    bins = malloc(nbins * sizeof(*bins));
    if (bins != NULL) {
        for (i = 0; i < nbins; i++) {
            tmx_list_init(&bins[i]);
        }
    }
    return bins;
}

tmx_status_t tmx_tag_engine_init(tmx_tag_engine_t *e, unsigned hash_bits)
{
    tmx_status_t status;
    tmx_list_t  *exp_bins, *unexp_bins;
    size_t       nbins;

    if ((e == NULL) || (hash_bits < TMX_TAG_HASH_BITS_MIN) ||
        (hash_bits > TMX_TAG_HASH_BITS_MAX)) {
        status = TMX_ERR_INVALID_PARAM;
        goto err;
    }
    nbins    = (size_t)1 << hash_bits;
    exp_bins = tmx_tag_bins_alloc(nbins);
    if (exp_bins == NULL) {
        status = TMX_ERR_NO_MEMORY;
        goto err;
    }
    unexp_bins = tmx_tag_bins_alloc(nbins);
    if (unexp_bins == NULL) {
        status = TMX_ERR_NO_MEMORY;
        goto err_free_exp;
    }
    e->exp_bins   = exp_bins;
    e->unexp_bins = unexp_bins;
    tmx_list_init(&e->exp_wild);
    tmx_list_init(&e->exp_src);
    tmx_list_init(&e->unexp_all);
    e->bin_mask    = nbins - 1;
    e->next_seq    = 0;
    e->exp_count   = 0;
    e->unexp_count = 0;
    return TMX_OK;

err_free_exp:
    free(exp_bins);
err:
    return status;
}

void tmx_tag_engine_cleanup(tmx_tag_engine_t *e)
{
    if (e == NULL) {
        return;
    }
    free(e->exp_bins);
    free(e->unexp_bins);
    e->exp_bins    = NULL;
    e->unexp_bins  = NULL;
    e->exp_count   = 0;
    e->unexp_count = 0;
}

/*
 * Doubles the bins of both queues. Failing to allocate is not an error: matching stays
 * correct with longer chains, and the next insert tries again.
 */
static void tmx_tag_bins_grow(tmx_tag_engine_t *e)
{
    tmx_list_t *exp_bins, *unexp_bins, *elem;
    size_t      old_nbins = (size_t)e->bin_mask + 1;
    size_t      i;

    if (old_nbins >= ((size_t)1 << TMX_TAG_HASH_BITS_MAX)) {
        return;
    }
    exp_bins = tmx_tag_bins_alloc(old_nbins * 2);
    if (exp_bins == NULL) {
        goto out;
    }
    unexp_bins = tmx_tag_bins_alloc(old_nbins * 2);
    if (unexp_bins == NULL) {
        goto out_free_exp;
    }
    e->bin_mask = old_nbins * 2 - 1;
    /* Moving each old bin head to tail, in bin order, keeps post and arrival order per bin. */
    for (i = 0; i < old_nbins; i++) {
        while ((elem = tmx_list_pop_head(&e->exp_bins[i])) != NULL) {
            tmx_tag_exp_t *x = tmx_container_of(elem, tmx_tag_exp_t, list);
            tmx_list_add_tail(&exp_bins[tmx_tag_bin_index(e, x->tag)], elem);
        }
        while ((elem = tmx_list_pop_head(&e->unexp_bins[i])) != NULL) {
            tmx_tag_unexp_t *u = tmx_container_of(elem, tmx_tag_unexp_t, bin_list);
            tmx_list_add_tail(&unexp_bins[tmx_tag_bin_index(e, u->tag)], elem);
        }
    }
    free(e->exp_bins);
    free(e->unexp_bins);
    e->exp_bins   = exp_bins;
    e->unexp_bins = unexp_bins;
    goto out;

out_free_exp:
    free(exp_bins);
out:
    return;
}

static inline void tmx_tag_maybe_grow(tmx_tag_engine_t *e, size_t count)
{
    if (count > TMX_TAG_LOAD_MAX * ((size_t)e->bin_mask + 1)) {
        tmx_tag_bins_grow(e);
    }
}

void tmx_tag_exp_post(tmx_tag_engine_t *e, tmx_tag_exp_t *entry)
{
    entry->tag &= entry->mask;
    entry->seq   = e->next_seq++;
    entry->exact = (entry->mask == TMX_TAG_MASK_FULL);
    if (entry->exact) {
        tmx_list_add_tail(&e->exp_bins[tmx_tag_bin_index(e, entry->tag)], &entry->list);
    } else {
        tmx_list_add_tail(&e->exp_wild, &entry->list);
    }
    if (entry->src != 0) {
        tmx_list_add_tail(&e->exp_src, &entry->src_list);
    }
    e->exp_count++;
    if (entry->exact) {
        tmx_tag_maybe_grow(e, e->exp_count);
    }
}

/* Out of the expected queue (and of the directed list, for a directed receive). */
static inline void tmx_tag_exp_unlink(tmx_tag_engine_t *e, tmx_tag_exp_t *entry)
{
    tmx_list_del(&entry->list);
    if (entry->src != 0) {
        tmx_list_del(&entry->src_list);
    }
    assert(e->exp_count > 0);
    e->exp_count--;
}

/* Whether a receive takes a message from src: one compare for a receive without a source. */
static inline int tmx_tag_src_ok(uint64_t want, uint64_t src)
{
    return (want == 0) || (want == src);
}

tmx_tag_exp_t *tmx_tag_exp_match(tmx_tag_engine_t *e, uint64_t msg_tag, uint64_t msg_src)
{
    tmx_tag_exp_t *cand = NULL;
    tmx_list_t    *bin  = &e->exp_bins[tmx_tag_bin_index(e, msg_tag)];
    tmx_list_t    *pos;

    /* A bin holds other tags too (collisions); its first entry with our tag is its oldest. */
    tmx_list_for_each(pos, bin) {
        tmx_tag_exp_t *x = tmx_container_of(pos, tmx_tag_exp_t, list);
        if ((x->tag == msg_tag) && tmx_tag_src_ok(x->src, msg_src)) {
            cand = x;
            break;
        }
    }
    /*
     * The wildcard list is in post order: once its entries are younger than the exact
     * candidate, none of them can win, so the walk stops there. Directed receives of other
     * senders are passed over in both lists: they keep their place for their own sender.
     */
    tmx_list_for_each(pos, &e->exp_wild) {
        tmx_tag_exp_t *x = tmx_container_of(pos, tmx_tag_exp_t, list);
        if ((cand != NULL) && (x->seq > cand->seq)) {
            break;
        }
        if (((msg_tag & x->mask) == x->tag) && tmx_tag_src_ok(x->src, msg_src)) {
            cand = x;
            break;
        }
    }
    if (cand != NULL) {
        tmx_tag_exp_unlink(e, cand);
    }
    return cand;
}

tmx_tag_exp_t *tmx_tag_exp_take_src(tmx_tag_engine_t *e, uint64_t src)
{
    tmx_list_t *pos;

    if (src == 0) {
        return NULL;
    }
    tmx_list_for_each(pos, &e->exp_src) {
        tmx_tag_exp_t *x = tmx_container_of(pos, tmx_tag_exp_t, src_list);
        if (x->src == src) {
            tmx_tag_exp_unlink(e, x);
            return x;
        }
    }
    return NULL;
}

void tmx_tag_exp_remove(tmx_tag_engine_t *e, tmx_tag_exp_t *entry)
{
    /*
     * A matched or removed entry is self-linked (tmx_list_del): removing it again is a no-op,
     * so a cancel racing with a match cannot corrupt the count.
     */
    if (entry->list.next == &entry->list) {
        return;
    }
    tmx_tag_exp_unlink(e, entry);
}

void tmx_tag_unexp_add(tmx_tag_engine_t *e, tmx_tag_unexp_t *entry)
{
    tmx_list_add_tail(&e->unexp_bins[tmx_tag_bin_index(e, entry->tag)], &entry->bin_list);
    tmx_list_add_tail(&e->unexp_all, &entry->all_list);
    e->unexp_count++;
    tmx_tag_maybe_grow(e, e->unexp_count);
}

static void tmx_tag_unexp_unlink(tmx_tag_engine_t *e, tmx_tag_unexp_t *entry)
{
    tmx_list_del(&entry->bin_list);
    tmx_list_del(&entry->all_list);
    assert(e->unexp_count > 0);
    e->unexp_count--;
}

tmx_tag_unexp_t *tmx_tag_unexp_match(tmx_tag_engine_t *e, uint64_t tag, uint64_t mask,
                                     uint64_t src, int remove)
{
    tmx_tag_unexp_t *found = NULL;
    tmx_list_t      *pos;

    if (e->unexp_count == 0) {
        return NULL; /* a receive posted ahead of its message: no hash, no walk */
    }
    if (mask == TMX_TAG_MASK_FULL) {
        /* Bin order is arrival order, so the first hit is the oldest message with this tag. */
        tmx_list_for_each(pos, &e->unexp_bins[tmx_tag_bin_index(e, tag)]) {
            tmx_tag_unexp_t *u = tmx_container_of(pos, tmx_tag_unexp_t, bin_list);
            if ((u->tag == tag) && tmx_tag_src_ok(src, u->src)) {
                found = u;
                break;
            }
        }
    } else {
        tag &= mask;
        tmx_list_for_each(pos, &e->unexp_all) {
            tmx_tag_unexp_t *u = tmx_container_of(pos, tmx_tag_unexp_t, all_list);
            if (((u->tag & mask) == tag) && tmx_tag_src_ok(src, u->src)) {
                found = u;
                break;
            }
        }
    }
    if ((found != NULL) && (remove != 0)) {
        tmx_tag_unexp_unlink(e, found);
    }
    return found;
}

void tmx_tag_unexp_remove(tmx_tag_engine_t *e, tmx_tag_unexp_t *entry)
{
    /* Same no-op rule as tmx_tag_exp_remove for an entry already taken. */
    if (entry->all_list.next == &entry->all_list) {
        return;
    }
    tmx_tag_unexp_unlink(e, entry);
}
