/*
 * Copies of a few bytes (the payload of an eager message, a header) without a call into libc:
 * for n <= 64 two possibly overlapping loads and stores of the largest width that fits (up to
 * 32 bytes each), which the compiler turns into plain (vector) moves. Longer copies go to
 * memcpy.
 */
#ifndef TMX_UTIL_COPY_H
#define TMX_UTIL_COPY_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

static inline void tmx_copy(void *dst, const void *src, size_t n)
{
    uint8_t *d       = dst;
    const uint8_t *s = src;

    if (n > 64) {
        memcpy(d, s, n);
    } else if (n > 32) {
        uint8_t a[32], b[32];
        memcpy(a, s, 32);
        memcpy(b, s + n - 32, 32);
        memcpy(d, a, 32);
        memcpy(d + n - 32, b, 32);
    } else if (n > 16) {
        uint8_t a[16], b[16];
        memcpy(a, s, 16);
        memcpy(b, s + n - 16, 16);
        memcpy(d, a, 16);
        memcpy(d + n - 16, b, 16);
    } else if (n >= 8) {
        uint64_t a, b;
        memcpy(&a, s, 8);
        memcpy(&b, s + n - 8, 8);
        memcpy(d, &a, 8);
        memcpy(d + n - 8, &b, 8);
    } else if (n >= 4) {
        uint32_t a, b;
        memcpy(&a, s, 4);
        memcpy(&b, s + n - 4, 4);
        memcpy(d, &a, 4);
        memcpy(d + n - 4, &b, 4);
    } else if (n > 0) {
        /* 1, 2 or 3 bytes: first, middle and last cover them all */
        d[0]     = s[0];
        d[n / 2] = s[n / 2];
        d[n - 1] = s[n - 1];
    }
}

#endif /* TMX_UTIL_COPY_H */
