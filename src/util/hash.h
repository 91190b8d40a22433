/* Open-addressing hash map from uint64_t keys to pointers (grows; NULL values not allowed). */
#ifndef TMX_UTIL_HASH_H
#define TMX_UTIL_HASH_H

#include <stddef.h>
#include <stdint.h>
#include <tmx/tmx.h>

typedef struct tmx_hash {
    uint64_t *keys;
    void    **vals;     /* NULL = empty slot; TMX_HASH_TOMBSTONE = deleted */
    size_t    cap;      /* power of two */
    size_t    count;
    size_t    used;     /* count + tombstones */
} tmx_hash_t;

/* Marks a deleted slot; a value that can never be a caller's pointer. */
extern char tmx_hash_tombstone_obj;
#define TMX_HASH_TOMBSTONE ((void *)&tmx_hash_tombstone_obj)

tmx_status_t tmx_hash_init(tmx_hash_t *h, size_t initial_cap);
void tmx_hash_cleanup(tmx_hash_t *h);
/* TMX_ERR_BUSY if the key is present; TMX_ERR_INVALID_PARAM for a NULL value. */
tmx_status_t tmx_hash_put(tmx_hash_t *h, uint64_t key, void *val);
void *tmx_hash_get(const tmx_hash_t *h, uint64_t key);
/* Returns the removed value or NULL. */
void *tmx_hash_del(tmx_hash_t *h, uint64_t key);

/* A 64-bit mixer (splitmix64 finalizer), also used to bin tags. */
static inline uint64_t tmx_hash_u64(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    x ^= x >> 31;
    return x;
}

#endif
