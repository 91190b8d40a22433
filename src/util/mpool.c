/* Fixed-size element pools. Each chunk is one allocation: a header word linking the chunks
 * (padded to the alignment) followed by per_chunk elements. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define TMX_LOG_SUBSYS "mpool"
#include "util/log.h"
#include "util/mpool.h"

#define TMX_MPOOL_DEFAULT_PER_CHUNK 64

static size_t tmx_mpool_round_up(size_t n, size_t align)
{
    return (n + align - 1) & ~(align - 1);
}

tmx_status_t tmx_mpool_init(tmx_mpool_t *mp, size_t elem_size, size_t align, unsigned per_chunk,
                            unsigned max_elems, const char *name)
{
    tmx_status_t status = TMX_ERR_INVALID_PARAM;

    if (mp == NULL || elem_size == 0 || (align & (align - 1)) != 0 || elem_size > SIZE_MAX / 4) {
        goto out;
    }
    /* Free elements hold the list link, so they need a pointer's size and alignment; a
     * smaller alignment asked for is raised, which still satisfies it. */
    if (align < sizeof(void *)) {
        align = sizeof(void *);
    }
    if (align > 4096) {
        goto out;
    }
    memset(mp, 0, sizeof(*mp));
    if (elem_size < sizeof(tmx_mpool_elem_t)) {
        elem_size = sizeof(tmx_mpool_elem_t);
    }
    mp->elem_size = tmx_mpool_round_up(elem_size, align);
    mp->align     = align;
    mp->per_chunk = (per_chunk != 0) ? per_chunk : TMX_MPOOL_DEFAULT_PER_CHUNK;
    mp->max_elems = max_elems;
    mp->name      = (name != NULL) ? name : "mpool";
    status        = TMX_OK;
out:
    return status;
}

tmx_status_t tmx_mpool_grow(tmx_mpool_t *mp)
{
    size_t       hdr = tmx_mpool_round_up(sizeof(void *), mp->align);
    unsigned     n   = mp->per_chunk;
    void        *chunk;
    char        *elems;
    tmx_status_t status = TMX_ERR_NO_RESOURCE;

    if (mp->max_elems != 0) {
        if (mp->num_elems >= mp->max_elems) {
            goto out;
        }
        if (n > mp->max_elems - mp->num_elems) {
            n = mp->max_elems - mp->num_elems;
        }
    }
    status = TMX_ERR_NO_MEMORY;
    if (n == 0 || n > (SIZE_MAX - hdr) / mp->elem_size || n > UINT32_MAX - mp->num_elems) {
        goto out;
    }
    if (posix_memalign(&chunk, mp->align, hdr + (size_t)n * mp->elem_size) != 0) {
        tmx_debug("mpool %s: allocation of %u elements of %zu bytes failed", mp->name, n,
                  mp->elem_size);
        goto out;
    }
    *(void **)chunk = mp->chunks;
    mp->chunks      = chunk;
    elems           = (char *)chunk + hdr;
    /* Pushed from the end, so the pool hands out elements in address order. */
    for (unsigned i = n; i > 0; i--) {
        tmx_mpool_elem_t *e = (tmx_mpool_elem_t *)(elems + (size_t)(i - 1) * mp->elem_size);
        e->next  = mp->free;
        mp->free = e;
    }
    mp->num_elems += n;
    status = TMX_OK;
out:
    return status;
}

void tmx_mpool_cleanup(tmx_mpool_t *mp)
{
    unsigned nfree = 0;
    void    *chunk;

    if (mp == NULL) {
        goto out;
    }
    for (tmx_mpool_elem_t *e = mp->free; e != NULL; e = e->next) {
        nfree++;
    }
    /* An element still out is a leak, or a later use after free of the caller. */
    if (nfree != mp->num_elems) {
        tmx_warn("mpool %s: %u of %u elements still in use at cleanup", mp->name,
                 mp->num_elems - nfree, mp->num_elems);
    }
    chunk = mp->chunks;
    while (chunk != NULL) {
        void *next = *(void **)chunk;
        free(chunk);
        chunk = next;
    }
    memset(mp, 0, sizeof(*mp));
out:
    return;
}
