/* The eager-RDMA ring's slot layout (ring_slot.h). */
#include <string.h>

#include "proto/ring_slot.h"

const char *tmx_ring_mode_name(unsigned mode)
{
    switch (mode) {
    case TMX_RING_MODE_WHOLE:      return "whole";
    case TMX_RING_MODE_ALIGNED128: return "aligned128";
    case TMX_RING_MODE_IMM:        return "imm";
    default:                       return "none";
    }
}

size_t tmx_ring_slot_max(unsigned mode, size_t slot_size)
{
    switch (mode) {
    case TMX_RING_MODE_WHOLE:
        return slot_size - TMX_RING_FLAG;
    case TMX_RING_MODE_ALIGNED128:
        return slot_size / TMX_RING_BLOCK * TMX_RING_BLOCK_DATA;
    case TMX_RING_MODE_IMM:
        return slot_size;
    default:
        return 0;
    }
}

void tmx_ring_slot_build_any(unsigned mode, size_t slot_size, unsigned slots_log2, uint64_t pos,
                         uint32_t seq, const void *hdr, size_t hlen, const void *data,
                         size_t len, uint8_t *stage, tmx_ring_wr_t *out)
{
    size_t  mlen   = hlen + len;
    uint8_t marker = tmx_ring_marker(pos, slots_log2);

    out->num_sge = 0;
    if (mode == TMX_RING_MODE_ALIGNED128) {
        size_t   k    = mlen == 0 ? 1 : (mlen + TMX_RING_BLOCK_DATA - 1) / TMX_RING_BLOCK_DATA;
        uint64_t flag = tmx_ring_flag(seq, mlen, hlen, marker);
        size_t   done = 0;

        for (size_t b = 0; b < k; b++) {
            uint8_t *blk = stage + b * TMX_RING_BLOCK;
            size_t   n   = 0;

            /* this block's chunk of the message: from the header, then the payload */
            while (n < TMX_RING_BLOCK_DATA && done < mlen) {
                size_t c;

                if (done < hlen) {
                    c = hlen - done < TMX_RING_BLOCK_DATA - n ? hlen - done
                                                               : TMX_RING_BLOCK_DATA - n;
                    memcpy(blk + n, (const uint8_t *)hdr + done, c);
                } else {
                    c = mlen - done < TMX_RING_BLOCK_DATA - n ? mlen - done
                                                               : TMX_RING_BLOCK_DATA - n;
                    memcpy(blk + n, (const uint8_t *)data + (done - hlen), c);
                }
                n += c;
                done += c;
            }
            memset(blk + n, 0, TMX_RING_BLOCK_DATA - n);
            memcpy(blk + TMX_RING_BLOCK_DATA, &flag, sizeof(flag));
        }
        out->off    = slot_size - k * TMX_RING_BLOCK;
        out->len    = k * TMX_RING_BLOCK;
        out->sge[0] = (tmx_sge_t){.addr = (uintptr_t)stage, .length = (uint32_t)out->len};
        out->num_sge = 1;
        return;
    }
    out->sge[out->num_sge++] = (tmx_sge_t){.addr = (uintptr_t)hdr, .length = (uint32_t)hlen};
    if (len > 0) {
        out->sge[out->num_sge++] = (tmx_sge_t){.addr = (uintptr_t)data, .length = (uint32_t)len};
    }
    if (mode == TMX_RING_MODE_WHOLE) {
        out->flag                = tmx_ring_flag(seq, mlen, hlen, marker);
        out->sge[out->num_sge++] = (tmx_sge_t){.addr   = (uintptr_t)&out->flag,
                                               .length = TMX_RING_FLAG};
        out->off                 = slot_size - TMX_RING_FLAG - mlen;
        out->len                 = mlen + TMX_RING_FLAG;
    } else {
        out->off = 0;
        out->len = mlen;
    }
}

int tmx_ring_slot_read_any(unsigned mode, const uint8_t *slot, size_t slot_size, unsigned slots_log2,
                       uint64_t pos, uint8_t *buf, tmx_ring_msg_t *msg)
{
    uint8_t marker = tmx_ring_marker(pos, slots_log2);
    size_t  mlen, hlen, k;

    if (!tmx_ring_slot_ready(slot, slot_size, slots_log2, pos)) {
        return 0;
    }
    tmx_ring_flag_parse(slot + slot_size - TMX_RING_FLAG, &msg->seq, &mlen, &hlen);
    if (hlen == 0 || hlen > mlen || mlen > tmx_ring_slot_max(mode, slot_size)) {
        return -1;
    }
    msg->hlen = hlen;
    msg->len  = mlen;
    if (mode == TMX_RING_MODE_WHOLE) {
        msg->data = slot + slot_size - TMX_RING_FLAG - mlen;
        return 1;
    }
    /* ALIGNED128: every block of the message must show this lap, with the same stamp */
    k = (mlen + TMX_RING_BLOCK_DATA - 1) / TMX_RING_BLOCK_DATA;
    for (size_t b = 0; b < k; b++) {
        const uint8_t *blk = slot + slot_size - (k - b) * TMX_RING_BLOCK;
        uint32_t       seq;
        size_t         l, h, n;

        if (__atomic_load_n(&blk[TMX_RING_BLOCK - 1], __ATOMIC_ACQUIRE) != marker) {
            return 0; /* that block has not landed yet */
        }
        tmx_ring_flag_parse(blk + TMX_RING_BLOCK_DATA, &seq, &l, &h);
        if (seq != msg->seq) {
            /* a block last written 255 laps ago shows the same marker: only the sequence
             * number tells it from this lap's */
            return 0;
        }
        if (l != mlen || h != hlen) {
            return -1;
        }
        n = mlen - b * TMX_RING_BLOCK_DATA;
        n = n < TMX_RING_BLOCK_DATA ? n : TMX_RING_BLOCK_DATA;
        memcpy(buf + b * TMX_RING_BLOCK_DATA, blk, n);
    }
    msg->data = buf;
    return 1;
}
