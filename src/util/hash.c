/* Open addressing with linear probing: keys and values in two flat arrays, deleted slots
 * kept as tombstones so that probe chains stay intact, rebuilt at 70% use. */
#include <stdlib.h>
#include <string.h>

#include "util/hash.h"

#define TMX_HASH_MIN_CAP 8

char tmx_hash_tombstone_obj;

static size_t tmx_hash_round_pow2(size_t n)
{
    size_t cap = TMX_HASH_MIN_CAP;

    while (cap < n && cap <= SIZE_MAX / 2) {
        cap <<= 1;
    }
    return cap;
}

static tmx_status_t tmx_hash_alloc(tmx_hash_t *h, size_t cap)
{
    tmx_status_t status = TMX_ERR_NO_MEMORY;

    if (cap > SIZE_MAX / sizeof(void *)) {
        goto err;
    }
    h->keys = malloc(cap * sizeof(*h->keys));
    if (h->keys == NULL) {
        goto err;
    }
    h->vals = calloc(cap, sizeof(*h->vals));
    if (h->vals == NULL) {
        goto err_free_keys;
    }
    h->cap   = cap;
    h->count = 0;
    h->used  = 0;
    return TMX_OK;

err_free_keys:
    free(h->keys);
    h->keys = NULL;
err:
    return status;
}

tmx_status_t tmx_hash_init(tmx_hash_t *h, size_t initial_cap)
{
    tmx_status_t status = TMX_ERR_INVALID_PARAM;

    if (h != NULL) {
        memset(h, 0, sizeof(*h));
        status = tmx_hash_alloc(h, tmx_hash_round_pow2(initial_cap));
    }
    return status;
}

void tmx_hash_cleanup(tmx_hash_t *h)
{
    if (h != NULL) {
        free(h->keys);
        free(h->vals);
        memset(h, 0, sizeof(*h));
    }
}

/* Slot holding key, or cap if absent. */
static size_t tmx_hash_find(const tmx_hash_t *h, uint64_t key)
{
    size_t mask = h->cap - 1;
    size_t i    = (size_t)tmx_hash_u64(key) & mask;

    /* Terminates: puts rebuild the table before more than 70% of the slots are used. */
    while (h->vals[i] != NULL && (h->vals[i] == TMX_HASH_TOMBSTONE || h->keys[i] != key)) {
        i = (i + 1) & mask;
    }
    return (h->vals[i] != NULL) ? i : h->cap;
}

/* Rebuilds into a table twice as large if the live entries alone pass 35%, else into one of
 * the same size: a put/delete workload then sheds its tombstones without growing forever. */
static tmx_status_t tmx_hash_rebuild(tmx_hash_t *h)
{
    tmx_hash_t   old    = *h;
    size_t       cap    = h->cap;
    tmx_status_t status = TMX_ERR_NO_MEMORY;

    if ((h->count + 1) * 20 > cap * 7) {
        if (cap > SIZE_MAX / 2) {
            goto err;
        }
        cap *= 2;
    }
    status = tmx_hash_alloc(h, cap);
    if (status != TMX_OK) {
        goto err_restore;
    }
    for (size_t i = 0; i < old.cap; i++) {
        if (old.vals[i] != NULL && old.vals[i] != TMX_HASH_TOMBSTONE) {
            size_t j = (size_t)tmx_hash_u64(old.keys[i]) & (cap - 1);
            while (h->vals[j] != NULL) {
                j = (j + 1) & (cap - 1);
            }
            h->keys[j] = old.keys[i];
            h->vals[j] = old.vals[i];
            h->count++;
            h->used++;
        }
    }
    free(old.keys);
    free(old.vals);
    return TMX_OK;

err_restore:
    *h = old;
err:
    return status;
}

tmx_status_t tmx_hash_put(tmx_hash_t *h, uint64_t key, void *val)
{
    size_t       mask;
    size_t       i;
    size_t       slot;
    tmx_status_t status = TMX_ERR_INVALID_PARAM;

    if (h == NULL || h->cap == 0 || val == NULL || val == TMX_HASH_TOMBSTONE) {
        goto out;
    }
    if (tmx_hash_find(h, key) != h->cap) {
        status = TMX_ERR_BUSY;
        goto out;
    }
    if ((h->used + 1) * 10 > h->cap * 7) {
        status = tmx_hash_rebuild(h);
        if (status != TMX_OK) {
            goto out;
        }
    }
    /* The key is absent: take the first tombstone or empty slot of its chain. */
    mask = h->cap - 1;
    i    = (size_t)tmx_hash_u64(key) & mask;
    slot = h->cap;
    while (h->vals[i] != NULL) {
        if (h->vals[i] == TMX_HASH_TOMBSTONE) {
            slot = i;
            break;
        }
        i = (i + 1) & mask;
    }
    if (slot == h->cap) {
        slot = i;
        h->used++;
    }
    h->keys[slot] = key;
    h->vals[slot] = val;
    h->count++;
    status = TMX_OK;
out:
    return status;
}

void *tmx_hash_get(const tmx_hash_t *h, uint64_t key)
{
    void  *val = NULL;
    size_t i;

    if (h != NULL && h->cap != 0) {
        i   = tmx_hash_find(h, key);
        val = (i != h->cap) ? h->vals[i] : NULL;
    }
    return val;
}

void *tmx_hash_del(tmx_hash_t *h, uint64_t key)
{
    void  *val = NULL;
    size_t i;

    if (h == NULL || h->cap == 0) {
        goto out;
    }
    i = tmx_hash_find(h, key);
    if (i == h->cap) {
        goto out;
    }
    val        = h->vals[i];
    h->vals[i] = TMX_HASH_TOMBSTONE;
    h->count--;
out:
    return val;
}
