/* Fixed-size element pools: a free list refilled by chunks; elements never move. */
#ifndef TMX_UTIL_MPOOL_H
#define TMX_UTIL_MPOOL_H

#include <stddef.h>
#include <tmx/tmx.h>

typedef struct tmx_mpool_elem {
    struct tmx_mpool_elem *next;
} tmx_mpool_elem_t;

typedef struct tmx_mpool {
    tmx_mpool_elem_t *free;
    void             *chunks;     /* singly linked through the first word */
    size_t            elem_size;  /* rounded up to the alignment */
    size_t            align;
    unsigned          per_chunk;
    unsigned          max_elems;  /* 0 = unbounded */
    unsigned          num_elems;
    const char       *name;
} tmx_mpool_t;

tmx_status_t tmx_mpool_init(tmx_mpool_t *mp, size_t elem_size, size_t align, unsigned per_chunk,
                            unsigned max_elems, const char *name);
void tmx_mpool_cleanup(tmx_mpool_t *mp);
/* Refills the free list; used by tmx_mpool_get. */
tmx_status_t tmx_mpool_grow(tmx_mpool_t *mp);

/* NULL when the pool is at max_elems or memory is exhausted. */
static inline void *tmx_mpool_get(tmx_mpool_t *mp)
{
    tmx_mpool_elem_t *e = mp->free;
    if (e == NULL) {
        if (tmx_mpool_grow(mp) != TMX_OK) {
            return NULL;
        }
        e = mp->free;
    }
    mp->free = e->next;
    return e;
}

static inline void tmx_mpool_put(tmx_mpool_t *mp, void *obj)
{
    tmx_mpool_elem_t *e = (tmx_mpool_elem_t *)obj;
    e->next  = mp->free;
    mp->free = e;
}

#endif
