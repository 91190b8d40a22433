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

/*
 * A copy of a rendezvous message through a staging buffer (up to TMX_RNDV_COPY bytes): memcpy
 * in pieces of 4 KiB. glibc copies a piece that size with vector moves but a whole 64 KiB with
 * `rep movsb` (above its rep_movsb_threshold), which qemu's TCG runs byte by byte: 64 KiB in
 * the guest of bench/verbs_rxe.sh took 230-257 us at once and 26-47 us in 4 KiB pieces (means of
 * 500). On hardware the pieces cost what one call does, within a few per cent.
 */
static inline void tmx_copy_pieces(void *dst, const void *src, size_t n)
{
    uint8_t       *d = dst;
    const uint8_t *s = src;

    for (size_t off = 0; off < n; off += 4096) {
        memcpy(d + off, s + off, n - off < 4096 ? n - off : 4096);
    }
}

/*
 * Asks for the lines of n bytes at p past the first (the one the caller reads at once), all at
 * once: a received message larger than a line whose last line (the ring's flag) or first
 * (a record's stamp) was just seen, so that its other lines cross from the sender's cache (or
 * come from memory) while its header is read and matched, instead of one after the other in
 * the copy out, where the hardware prefetcher learns the stream only after a few.
 * tmx_pingpong -t lat, alternating runs, eager-RDMA ring: 1 KiB slow phase 0.586-0.621 us
 * against 0.674-0.808 in 7 of 7 rounds, fast 0.191 against 0.212; 2 KiB fast 5 of 6 rounds
 * faster, slow 1.42-1.45 against 1.52-1.55 (bench/README.md, "256 B to 2 KiB"). About 4
 * instructions a line.
 */
static inline void tmx_prefetch_lines(const void *p, size_t n)
{
    const uint8_t *b = p;

    for (size_t o = 64; o < n; o += 64) {
        __builtin_prefetch(b + o, 0, 3);
    }
}

#endif /* TMX_UTIL_COPY_H */
