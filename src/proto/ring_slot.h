/*
 * The eager-RDMA ring's slots: what a sender writes into a slot of the receiver's memory, and
 * how the receiver, polling that memory and nothing else, knows that a message is wholly
 * there. Depends on prov.h only (unit-tested with the soft device alone, test_ring.c); the
 * protocol around it is ring.c.
 *
 * A ring is `slots` slots (a power of two) of `slot_size` bytes (a multiple of 128) in memory
 * the receiver got from mem_alloc; message number pos (counted from 0 since the ring was lent)
 * goes to slot pos % slots. A message is our protocol header (hlen bytes) then the payload
 * (len bytes). Three modes, one per answer of the data-in-order query (doc/DESIGN.md):
 *
 * - WHOLE (TMX_DATA_IN_ORDER_WHOLE_MSG: the last byte of a write implies every earlier one):
 *   the message is written so that it ends 8 bytes before the slot's end, followed by the
 *   flag word, in one RDMA write: [.. | header | payload | flag]. The flag's last byte (the
 *   slot's last byte) is the lap marker; the reader polls it, and once it shows this lap the
 *   rest of the flag word (sequence, lengths) and the message are there.
 * - ALIGNED128 (only each 128-byte aligned block is atomic): the message is cut into 120-byte
 *   chunks, one per block, each block ending with its own stamp (the same flag word), in the
 *   last k blocks of the slot, one RDMA write. The reader polls the slot's last stamp, learns
 *   k from it, and takes the message only once every one of the k blocks shows this lap.
 * - IMM (no promise, or OOO placement on): [header | payload] at the slot's start by RDMA
 *   WRITE_WITH_IMM, immediate data = the slot; the receiver learns of it from its completion
 *   queue, which says the data is there.
 *
 * The marker of position pos is (pos / slots) % 255 + 1: never 0 (the memory starts zeroed)
 * and never the value the slot's end held from the lap before, so stale data is never taken
 * for a new message. A block before the last one of an ALIGNED128 slot is not written every
 * lap and may show this marker from 255 laps ago: its stamp's sequence number must also be
 * the message's.
 */
#ifndef TMX_PROTO_RING_SLOT_H
#define TMX_PROTO_RING_SLOT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "prov/prov.h"

typedef enum {
    TMX_RING_MODE_NONE       = 0, /* no ring */
    TMX_RING_MODE_WHOLE      = 1, /* flag at the slot's end */
    TMX_RING_MODE_ALIGNED128 = 2, /* a stamp per 128-byte block */
    TMX_RING_MODE_IMM        = 3, /* RDMA write with immediate, and the completion queue */
    TMX_RING_MODE_LAST
} tmx_ring_mode_t;

#define TMX_RING_FLAG       8   /* bytes of the flag word (and of a block's stamp) */
#define TMX_RING_BLOCK      128
#define TMX_RING_BLOCK_DATA (TMX_RING_BLOCK - TMX_RING_FLAG)
#define TMX_RING_HLEN_MAX   255 /* a header's length travels in a byte */
/* WHOLE: bytes of a cell (ring.h, "Cells"): a message of up to this much, flag included,
 * goes to its position's cell instead of its slot */
#define TMX_RING_CELL       64
/* WHOLE: the header length's high bit in a slot's flag word says the message is not in front
 * of the flag but in the next position's slot, from its start (ring.h "Spans"); a header is
 * never that long */
#define TMX_RING_SPAN       0x80

/* The mode's name, for logs and the worker query: "whole", "aligned128", "imm", "none". */
const char *tmx_ring_mode_name(unsigned mode);

/* Bytes of message (header and payload) one slot carries in mode. */
size_t tmx_ring_slot_max(unsigned mode, size_t slot_size);

static inline uint8_t tmx_ring_marker(uint64_t pos, unsigned slots_log2)
{
    return (uint8_t)((pos >> slots_log2) % 255 + 1);
}

/* One RDMA write of a message into its slot: at off in the slot, len bytes from sge[]. */
typedef struct tmx_ring_wr {
    size_t    off;
    size_t    len;
    tmx_sge_t sge[3];
    int       num_sge;
    uint64_t  flag; /* WHOLE: the flag word, which sge[] points at */
} tmx_ring_wr_t;

/*
 * What to write for the message (hdr, hlen; data, len) at position pos with sequence number
 * seq, in mode (WHOLE, ALIGNED128 or IMM). ALIGNED128 builds the slot's image in stage (at
 * least slot_size bytes); the others point sge[] at hdr, data and out->flag (out must stay in
 * place until the write is posted). The caller checked hlen + len <= tmx_ring_slot_max and
 * 0 < hlen <= TMX_RING_HLEN_MAX.
 */
void tmx_ring_slot_build_any(unsigned mode, size_t slot_size, unsigned slots_log2, uint64_t pos,
                             uint32_t seq, const void *hdr, size_t hlen, const void *data,
                             size_t len, uint8_t *stage, tmx_ring_wr_t *out);

/* The flag word (and stamp) of a message, little-endian: seq, message length, header length,
 * marker (the highest byte: the last one written). */
static inline uint64_t tmx_ring_flag(uint32_t seq, size_t mlen, size_t hlen, uint8_t marker)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    /* the same bytes, without building them one by one */
    return (uint64_t)seq | (uint64_t)(mlen & 0xffff) << 32 | (uint64_t)(hlen & 0xff) << 48 |
           (uint64_t)marker << 56;
#else
    uint8_t  b[TMX_RING_FLAG];
    uint64_t f;

    b[0] = (uint8_t)seq;
    b[1] = (uint8_t)(seq >> 8);
    b[2] = (uint8_t)(seq >> 16);
    b[3] = (uint8_t)(seq >> 24);
    b[4] = (uint8_t)mlen;
    b[5] = (uint8_t)(mlen >> 8);
    b[6] = (uint8_t)hlen;
    b[7] = marker;
    memcpy(&f, b, sizeof(f));
    return f;
#endif
}

/* tmx_ring_slot_build_any, with WHOLE (the common mode) inline. */
static inline void tmx_ring_slot_build(unsigned mode, size_t slot_size, unsigned slots_log2,
                                       uint64_t pos, uint32_t seq, const void *hdr, size_t hlen,
                                       const void *data, size_t len, uint8_t *stage,
                                       tmx_ring_wr_t *out)
{
    size_t mlen = hlen + len;

    if (mode != TMX_RING_MODE_WHOLE) {
        tmx_ring_slot_build_any(mode, slot_size, slots_log2, pos, seq, hdr, hlen, data, len,
                                stage, out);
        return;
    }
    out->sge[0]  = (tmx_sge_t){.addr = (uintptr_t)hdr, .length = (uint32_t)hlen};
    out->num_sge = 1;
    if (len > 0) {
        out->sge[out->num_sge++] = (tmx_sge_t){.addr = (uintptr_t)data, .length = (uint32_t)len};
    }
    out->flag                = tmx_ring_flag(seq, mlen, hlen, tmx_ring_marker(pos, slots_log2));
    out->sge[out->num_sge++] = (tmx_sge_t){.addr = (uintptr_t)&out->flag, .length = TMX_RING_FLAG};
    out->off                 = slot_size - TMX_RING_FLAG - mlen;
    out->len                 = mlen + TMX_RING_FLAG;
}

/* A message found in a slot. */
typedef struct tmx_ring_msg {
    uint32_t       seq;
    size_t         hlen; /* header bytes (the reader checks they make sense) */
    size_t         len;  /* the whole message: header and payload */
    const uint8_t *data; /* where it is: in the slot (WHOLE) or gathered into buf */
} tmx_ring_msg_t;

/*
 * Polls slot (slot_size bytes) for the message at position pos in mode WHOLE or ALIGNED128:
 * 1 when it is wholly there (*msg filled; ALIGNED128 gathers it into buf, slot_size bytes),
 * 0 when not yet, -1 when the slot holds this lap's marker with lengths that cannot be (the
 * sender is broken or hostile). Every field is read once from the slot and checked.
 */
int tmx_ring_slot_read_any(unsigned mode, const uint8_t *slot, size_t slot_size,
                           unsigned slots_log2, uint64_t pos, uint8_t *buf, tmx_ring_msg_t *msg);

/* Only whether the slot shows this lap's marker at its end: the poll of an idle ring. */
static inline int tmx_ring_slot_ready(const uint8_t *slot, size_t slot_size, unsigned slots_log2,
                                      uint64_t pos)
{
    return __atomic_load_n(&slot[slot_size - 1], __ATOMIC_ACQUIRE) ==
           tmx_ring_marker(pos, slots_log2);
}

/* A flag word read from the slot (after its marker was seen with acquire). */
static inline void tmx_ring_flag_parse(const uint8_t *p, uint32_t *seq_p, size_t *mlen_p,
                                size_t *hlen_p)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    uint64_t f;

    memcpy(&f, p, sizeof(f)); /* once: the sender could rewrite the slot meanwhile */
    *seq_p  = (uint32_t)f;
    *mlen_p = (size_t)(f >> 32) & 0xffff;
    *hlen_p = (size_t)(f >> 48) & 0xff;
#else
    uint8_t b[TMX_RING_FLAG];

    memcpy(b, p, sizeof(b)); /* once: the sender could rewrite the slot meanwhile */
    *seq_p  = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
    *mlen_p = (size_t)b[4] | (size_t)b[5] << 8;
    *hlen_p = b[6];
#endif
}

/* Where a span's message (ring.h "Spans": hlen + len bytes, header first) starts in its slot:
 * its payload on a 64-byte line when len is a multiple of 8 and it fits (the copies in and out
 * of the slot run on whole lines), else at the slot's start; either way it ends on 8 bytes and
 * short of the slot's flag word, given hlen + len <= slot_size - TMX_RING_FLAG - 7. */
static inline size_t tmx_ring_span_off(size_t hlen, size_t len, size_t slot_size)
{
    if (hlen + 7 <= 64 && 64 + len + TMX_RING_FLAG <= slot_size) {
        return 64 - hlen - (len & 7);
    }
    return (0 - (hlen + len)) & 7;
}

/* The WHOLE mode's read, given the slot's last byte (end) and the marker of this lap: what
 * tmx_ring_slot_read returns. A flag with TMX_RING_SPAN in its header length is returned as
 * read (msg->hlen with the bit, msg->data meaningless): its caller checks it and finds the
 * message (ring.h "Spans"). */
static inline int tmx_ring_slot_read_whole(const uint8_t *end, uint8_t marker, size_t slot_size,
                                           tmx_ring_msg_t *msg)
{
    size_t mlen, hlen;

    if (__atomic_load_n(end, __ATOMIC_ACQUIRE) != marker) {
        return 0;
    }
    tmx_ring_flag_parse(end + 1 - TMX_RING_FLAG, &msg->seq, &mlen, &hlen);
    if ((hlen == 0 || hlen > mlen || mlen > slot_size - TMX_RING_FLAG) &&
        !(hlen & TMX_RING_SPAN)) {
        return -1; /* a span's (TMX_RING_SPAN) lengths are the caller's to check */
    }
    msg->hlen = hlen;
    msg->len  = mlen;
    msg->data = end + 1 - TMX_RING_FLAG - mlen;
    return 1;
}

/* tmx_ring_slot_read_any, with WHOLE (the common mode) inline. */
static inline int tmx_ring_slot_read(unsigned mode, const uint8_t *slot, size_t slot_size,
                                     unsigned slots_log2, uint64_t pos, uint8_t *buf,
                                     tmx_ring_msg_t *msg)
{
    if (mode != TMX_RING_MODE_WHOLE) {
        return tmx_ring_slot_read_any(mode, slot, slot_size, slots_log2, pos, buf, msg);
    }
    return tmx_ring_slot_read_whole(slot + slot_size - 1, tmx_ring_marker(pos, slots_log2),
                                    slot_size, msg);
}

/*
 * The receiver's word in the sender's memory (its control line, from mem_alloc): how many
 * messages it has taken out of the ring (the low 32 bits of that count) and whether it sleeps
 * (then a ring write would wake nobody: the sender uses the queue, or sends a notice). Written
 * by RDMA WRITE as one 8-byte word, with the count's complement, so that a word read half
 * written is refused.
 */
static inline uint64_t tmx_ring_credit_pack(uint64_t consumed, int asleep)
{
    uint32_t c = (uint32_t)consumed;

    return (uint64_t)c | (uint64_t)(~c & 0x7fffffffu) << 32 | (uint64_t)(asleep != 0) << 63;
}

/* 1 and the fields when w is a whole word; 0 for a word being written (or garbage). */
static inline int tmx_ring_credit_unpack(uint64_t w, uint32_t *consumed_p, int *asleep_p)
{
    uint32_t c = (uint32_t)w;

    if (((w >> 32) & 0x7fffffffu) != (~c & 0x7fffffffu)) {
        return 0;
    }
    *consumed_p = c;
    *asleep_p   = (int)(w >> 63);
    return 1;
}

#endif /* TMX_PROTO_RING_SLOT_H */
