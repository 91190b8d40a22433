/*
 * Unit tests of the eager-RDMA ring's slots (src/proto/ring_slot.c) on the soft device: the
 * sender's writes (tmx_ring_slot_build, posted as RDMA writes into device memory from
 * mem_alloc) land as the device's data-in-order mode says, piece by piece; after every piece
 * the write hook (soft.h) asks what a receiver polling the slot would take
 * (tmx_ring_slot_read). A reader that trusts only what the device promises never takes a
 * message early; one that trusts more than the device gave must be caught taking a torn one.
 * Also: wrap-around over many laps, a block stale for 255 laps, the credit word.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "prov/prov.h"
#include "prov/soft/soft.h"
#include "proto/ring_slot.h"
#include "util/config.h"

extern const tmx_prov_t tmx_soft_prov;

typedef struct loop {
    tmx_config_t          cfg;
    const tmx_prov_ops_t *ops;
    tmx_dev_t            *dev;
    tmx_pd_t             *pd;
    tmx_cq_t             *cq;
    tmx_qp_t             *qp;
    tmx_mr_t             *ring;
} loop_t;

/* A QP connected to itself in RTS, and a ring of slots x slot_size bytes of device memory. */
static void loop_open(loop_t *l, int dio, unsigned slots, size_t slot_size)
{
    tmx_dev_t         *devs[1];
    int                num = 0;
    tmx_qp_init_attr_t qa;
    tmx_qp_attr_t      mod;
    uint8_t            blob[TMX_QP_ADDR_MAX];
    size_t             blen = sizeof(blob);

    memset(l, 0, sizeof(*l));
    cr_assert_eq(tmx_config_load(&l->cfg), TMX_OK);
    l->cfg.soft_memfd         = -1;
    l->cfg.soft_cma           = 0;
    l->cfg.soft_ring_size     = 64 * 1024;
    l->cfg.soft_ring0_size    = 64 * 1024;
    l->cfg.soft_inbox_size    = 64 * 1024;
    l->cfg.soft_max_qps       = 8;
    l->cfg.soft_max_mrs       = 64;
    l->cfg.soft_data_in_order = dio;
    l->cfg.soft_scramble_seed = 4242;
    l->ops                    = tmx_soft_prov.ops;
    cr_assert_eq(l->ops->dev_open(&tmx_soft_prov, &l->cfg, devs, 1, &num), TMX_OK);
    l->dev = devs[0];
    cr_assert_eq(l->ops->pd_alloc(l->dev, &l->pd), TMX_OK);
    cr_assert_eq(l->ops->cq_create(l->dev, 64, &l->cq), TMX_OK);
    memset(&qa, 0, sizeof(qa));
    qa.type        = TMX_QPT_RC;
    qa.send_cq     = l->cq;
    qa.recv_cq     = l->cq;
    qa.max_send_wr = 16;
    qa.max_recv_wr = 16;
    cr_assert_eq(l->ops->qp_create(l->pd, &qa, &l->qp), TMX_OK);
    memset(&mod, 0, sizeof(mod));
    mod.state = TMX_QPS_INIT;
    cr_assert_eq(l->ops->qp_modify(l->qp, &mod, TMX_QP_ATTR_STATE), TMX_OK);
    cr_assert_eq(l->ops->qp_get_addr(l->qp, blob, &blen), TMX_OK);
    mod.state           = TMX_QPS_RTR;
    mod.remote_addr     = blob;
    mod.remote_addr_len = blen;
    cr_assert_eq(l->ops->qp_modify(l->qp, &mod, TMX_QP_ATTR_STATE | TMX_QP_ATTR_REMOTE), TMX_OK);
    mod.state = TMX_QPS_RTS;
    cr_assert_eq(l->ops->qp_modify(l->qp, &mod, TMX_QP_ATTR_STATE), TMX_OK);
    cr_assert_eq(l->ops->mem_alloc(l->pd, slots * slot_size,
                                   TMX_ACCESS_LOCAL_WRITE | TMX_ACCESS_REMOTE_WRITE, &l->ring),
                 TMX_OK);
}

static void loop_close(loop_t *l)
{
    l->ops->mem_free(l->ring);
    l->ops->qp_destroy(l->qp);
    l->ops->cq_destroy(l->cq);
    l->ops->pd_free(l->pd);
    l->ops->dev_close(l->dev);
}

/* What the hook checks: the slot being written, and the message expected in it. */
static struct {
    unsigned       mode; /* the reader's */
    const uint8_t *slot;
    size_t         slot_size;
    unsigned       slots_log2;
    uint64_t       pos;
    const uint8_t *want;
    size_t         want_len;
    uint32_t       want_seq;
    uint8_t        buf[4096];
    int            torn;  /* taken with wrong bytes (or refused as malformed) */
    int            taken; /* taken right */
} watch;

static void watch_hook(void *arg, uint64_t addr, size_t len)
{
    tmx_ring_msg_t msg;
    int            rc;

    (void)arg;
    (void)addr;
    (void)len;
    rc = tmx_ring_slot_read(watch.mode, watch.slot, watch.slot_size, watch.slots_log2, watch.pos,
                            watch.buf, &msg);
    if (rc < 0 || (rc == 1 && (msg.seq != watch.want_seq || msg.len != watch.want_len ||
                               memcmp(msg.data, watch.want, watch.want_len) != 0))) {
        watch.torn++;
    } else if (rc == 1) {
        watch.taken++;
    }
}

static uint8_t pat(uint64_t pos, size_t i)
{
    return (uint8_t)(pos * 31 + i * 7 + 1);
}

/*
 * Writes n messages of the given lengths round the ring as a sender in mode wmode would,
 * while a reader in rmode polls after every landed piece. Returns how many messages the
 * reader took torn; each must be taken whole once written.
 */
static int ring_run(int dio, unsigned wmode, unsigned rmode, unsigned slots, size_t slot_size,
                    const size_t *lens, size_t nlens, unsigned n)
{
    loop_t        l;
    unsigned      log2 = 0;
    uint8_t       hdr[16], *data = malloc(slot_size), *stage = malloc(slot_size);
    int           torn = 0;

    cr_assert(data != NULL && stage != NULL);
    while ((1u << log2) < slots) {
        log2++;
    }
    loop_open(&l, dio, slots, slot_size);
    for (uint64_t pos = 0; pos < n; pos++) {
        size_t         len  = lens[pos % nlens];
        uint8_t       *slot = (uint8_t *)l.ring->addr + (pos & (slots - 1)) * slot_size;
        uint8_t        want[4096];
        tmx_ring_wr_t  rw;
        tmx_send_wr_t  wr, *bad;
        tmx_ring_msg_t msg;

        cr_assert(sizeof(hdr) + len <= tmx_ring_slot_max(wmode, slot_size));
        for (size_t i = 0; i < sizeof(hdr); i++) {
            hdr[i] = pat(pos, i + 1000);
        }
        hdr[0] = 1; /* what the core's header starts with: an op */
        for (size_t i = 0; i < len; i++) {
            data[i] = pat(pos, i);
        }
        memcpy(want, hdr, sizeof(hdr));
        memcpy(want + sizeof(hdr), data, len);
        cr_assert_eq(tmx_ring_slot_read(rmode, slot, slot_size, log2, pos, watch.buf, &msg), 0,
                     "position %llu taken before it was written", (unsigned long long)pos);
        tmx_ring_slot_build(wmode, slot_size, log2, pos, (uint32_t)pos + 77, hdr, sizeof(hdr),
                            data, len, stage, &rw);
        memset(&wr, 0, sizeof(wr));
        wr.opcode           = TMX_WR_RDMA_WRITE;
        wr.sg_list          = rw.sge;
        wr.num_sge          = rw.num_sge;
        wr.send_flags       = TMX_SEND_INLINE;
        wr.rdma.remote_addr = (uintptr_t)slot + rw.off;
        wr.rdma.rkey        = l.ring->rkey;
        memset(&watch, 0, offsetof(__typeof__(watch), buf));
        watch.mode       = rmode;
        watch.slot       = slot;
        watch.slot_size  = slot_size;
        watch.slots_log2 = log2;
        watch.pos        = pos;
        watch.want       = want;
        watch.want_len   = sizeof(hdr) + len;
        watch.want_seq   = (uint32_t)pos + 77;
        tmx_soft_write_hook = watch_hook;
        cr_assert_eq(l.ops->post_send(l.qp, &wr, &bad), TMX_OK);
        tmx_soft_write_hook = NULL;
        torn += watch.torn > 0;
        /* placed when post_send returns (device memory): the reader takes it whole */
        cr_assert_eq(tmx_ring_slot_read(rmode, slot, slot_size, log2, pos, watch.buf, &msg), 1);
        cr_assert(msg.seq == (uint32_t)pos + 77 && msg.len == sizeof(hdr) + len &&
                  memcmp(msg.data, want, msg.len) == 0);
        /* and the next lap of the slot is not there yet */
        cr_assert_eq(tmx_ring_slot_read(rmode, slot, slot_size, log2, pos + slots, watch.buf,
                                        &msg), 0);
    }
    loop_close(&l);
    free(data);
    free(stage);
    return torn;
}

static const size_t lens[] = {8, 100, 104, 105, 200, 300, 400, 464};
#define NLENS (sizeof(lens) / sizeof(lens[0]))

/* Every reader that trusts no more than the device promises, on every device mode. */
Test(ring, trusted_modes_never_read_early, .timeout = 60)
{
    cr_assert_eq(ring_run(TMX_SOFT_DIO_WHOLE, TMX_RING_MODE_WHOLE, TMX_RING_MODE_WHOLE, 8, 512,
                          lens, NLENS, 400), 0);
    cr_assert_eq(ring_run(TMX_SOFT_DIO_WHOLE, TMX_RING_MODE_ALIGNED128,
                          TMX_RING_MODE_ALIGNED128, 8, 512, lens, NLENS, 400), 0);
    cr_assert_eq(ring_run(TMX_SOFT_DIO_ALIGNED128, TMX_RING_MODE_ALIGNED128,
                          TMX_RING_MODE_ALIGNED128, 8, 512, lens, NLENS, 400), 0);
}

/* A reader that trusts an answer the device did not give takes torn messages: the tests of
 * the core's choice (it must follow the answer) can fail. */
Test(ring, trusting_more_than_the_device_gives_is_caught, .timeout = 60)
{
    static const size_t big[] = {300, 400, 464}; /* several blocks, several pieces */

    cr_assert_gt(ring_run(TMX_SOFT_DIO_ALIGNED128, TMX_RING_MODE_WHOLE, TMX_RING_MODE_WHOLE, 8,
                          512, big, 3, 60), 0, "flag polling on a 128-byte-block device");
    cr_assert_gt(ring_run(TMX_SOFT_DIO_NONE, TMX_RING_MODE_WHOLE, TMX_RING_MODE_WHOLE, 8, 512,
                          big, 3, 60), 0, "flag polling on a device with no promise");
    cr_assert_gt(ring_run(TMX_SOFT_DIO_NONE, TMX_RING_MODE_ALIGNED128, TMX_RING_MODE_ALIGNED128,
                          8, 512, big, 3, 60), 0, "block stamps on a device with no promise");
}

/* Positions past many laps (the marker repeats every 255): two slots, so a block written by a
 * large message at lap 0 still shows lap 255's marker when the large message of lap 255 lands
 * block by block; only its stamp's sequence number tells it is stale. */
Test(ring, wraps_and_stale_blocks, .timeout = 60)
{
    size_t pattern[2 * 256];

    for (size_t i = 0; i < 2 * 256; i++) {
        pattern[i] = (i == 0 || i == 2 * 255) ? 464 : 8; /* big at lap 0 and 255 of slot 0 */
    }
    cr_assert_eq(ring_run(TMX_SOFT_DIO_ALIGNED128, TMX_RING_MODE_ALIGNED128,
                          TMX_RING_MODE_ALIGNED128, 2, 512, pattern, 2 * 256, 2 * 256), 0);
    cr_assert_eq(ring_run(TMX_SOFT_DIO_WHOLE, TMX_RING_MODE_WHOLE, TMX_RING_MODE_WHOLE, 2, 128,
                          lens, 1, 3 * 255 * 2), 0);
}

Test(ring, slot_capacity)
{
    cr_assert_eq(tmx_ring_slot_max(TMX_RING_MODE_WHOLE, 512), 504);
    cr_assert_eq(tmx_ring_slot_max(TMX_RING_MODE_ALIGNED128, 512), 480);
    cr_assert_eq(tmx_ring_slot_max(TMX_RING_MODE_IMM, 512), 512);
    cr_assert_eq(tmx_ring_slot_max(TMX_RING_MODE_NONE, 512), 0);
    cr_assert_str_eq(tmx_ring_mode_name(TMX_RING_MODE_ALIGNED128), "aligned128");
}

/* A lying flag (lengths that do not fit the slot) is refused, not followed. */
Test(ring, malformed_flag_refused)
{
    uint8_t        slot[256], buf[256];
    tmx_ring_msg_t msg;

    memset(slot, 0, sizeof(slot));
    /* seq 1, message length 300 in a 256-byte slot, header 16, marker of position 0 */
    slot[248] = 1;
    slot[252] = 300 & 0xff;
    slot[253] = 300 >> 8;
    slot[254] = 16;
    slot[255] = tmx_ring_marker(0, 1);
    cr_assert_eq(tmx_ring_slot_read(TMX_RING_MODE_WHOLE, slot, sizeof(slot), 1, 0, buf, &msg),
                 -1);
    slot[252] = 20; /* header longer than the message */
    slot[253] = 0;
    slot[254] = 30;
    cr_assert_eq(tmx_ring_slot_read(TMX_RING_MODE_WHOLE, slot, sizeof(slot), 1, 0, buf, &msg),
                 -1);
    slot[254] = 0; /* no header */
    cr_assert_eq(tmx_ring_slot_read(TMX_RING_MODE_WHOLE, slot, sizeof(slot), 1, 0, buf, &msg),
                 -1);
    slot[254] = 16;
    cr_assert_eq(tmx_ring_slot_read(TMX_RING_MODE_WHOLE, slot, sizeof(slot), 1, 0, buf, &msg), 1);
    cr_assert(msg.len == 20 && msg.data == slot + 256 - 8 - 20);
}

Test(ring, credit_word)
{
    uint32_t c;
    int      asleep;
    uint64_t w = tmx_ring_credit_pack(0x123456789ull, 1);

    cr_assert(tmx_ring_credit_unpack(w, &c, &asleep));
    cr_assert(c == 0x23456789u && asleep == 1);
    cr_assert(tmx_ring_credit_unpack(tmx_ring_credit_pack(7, 0), &c, &asleep));
    cr_assert(c == 7 && asleep == 0);
    cr_assert(!tmx_ring_credit_unpack(0, &c, &asleep), "the zeroed word says nothing");
    /* half of a new word over the old one */
    cr_assert(!tmx_ring_credit_unpack((tmx_ring_credit_pack(8, 0) & 0xffffffffull) |
                                          (tmx_ring_credit_pack(7, 0) & ~0xffffffffull),
                                      &c, &asleep));
}

/* rma_map / rma_write (prov.h), the ring's small writes without a work request each: what
 * lands is what post_send of the same RDMA WRITE would place, a reader polling the slot takes
 * it whole, a write past the map is refused, a key freed since the map is never written
 * through, and only a whole-message device is mapped (the others keep their scrambling). */
Test(ring, rma_map_write, .timeout = 60)
{
    loop_t         l;
    tmx_rma_map_t  map;
    tmx_ring_msg_t msg;
    uint8_t        img[64], rb[256];
    const size_t   slots = 4, slot_size = 256;
    uint64_t       raddr;

    loop_open(&l, TMX_SOFT_DIO_WHOLE, slots, slot_size);
    cr_assert(l.ops->rma_map != NULL && l.ops->rma_write != NULL);
    raddr = (uintptr_t)l.ring->addr;
    cr_assert_eq(l.ops->rma_map(l.qp, raddr, slots * slot_size, l.ring->rkey, &map), TMX_OK);
    cr_assert(map.remote_addr == raddr && map.len == slots * slot_size &&
              map.rkey == l.ring->rkey);
    for (uint64_t pos = 0; pos < 3 * slots; pos++) {
        const uint8_t *slot = (const uint8_t *)l.ring->addr + (pos & (slots - 1)) * slot_size;
        size_t         mlen = 16 + 8 + pos % 24;
        uint64_t       flag = tmx_ring_flag((uint32_t)pos + 5, mlen, 16, tmx_ring_marker(pos, 2));

        for (size_t i = 0; i < mlen; i++) {
            img[i] = pat(pos, i);
        }
        img[0] = 1;
        memcpy(img + mlen, &flag, sizeof(flag));
        cr_assert_eq(tmx_ring_slot_read(TMX_RING_MODE_WHOLE, slot, slot_size, 2, pos, rb, &msg),
                     0);
        cr_assert_eq(l.ops->rma_write(l.qp, &map,
                                      (pos & (slots - 1)) * slot_size + slot_size - mlen - 8, img,
                                      mlen + 8, 0),
                     TMX_OK);
        cr_assert_eq(tmx_ring_slot_read(TMX_RING_MODE_WHOLE, slot, slot_size, 2, pos, rb, &msg),
                     1);
        cr_assert(msg.seq == (uint32_t)pos + 5 && msg.len == mlen &&
                  memcmp(msg.data, img, mlen) == 0);
    }
    /* past the map's end: refused, nothing written */
    cr_assert_eq(l.ops->rma_write(l.qp, &map, slots * slot_size - 8, img, 16, 0),
                 TMX_ERR_INVALID_PARAM);
    cr_assert_eq(l.ops->rma_write(l.qp, &map, SIZE_MAX - 4, img, 16, 0), TMX_ERR_INVALID_PARAM);
    /* the region freed and its memory given again under a new key: the old map never writes
     * there (its key's generation changed: the general path refuses the old key) */
    l.ops->mem_free(l.ring);
    cr_assert_eq(l.ops->mem_alloc(l.pd, slots * slot_size,
                                  TMX_ACCESS_LOCAL_WRITE | TMX_ACCESS_REMOTE_WRITE, &l.ring),
                 TMX_OK);
    memset(l.ring->addr, 0, slots * slot_size);
    (void)l.ops->rma_write(l.qp, &map, 0, img, 32, 0);
    for (size_t i = 0; i < slots * slot_size; i++) {
        cr_assert_eq(((const uint8_t *)l.ring->addr)[i], 0, "byte %zu written through a stale map",
                     i);
    }
    loop_close(&l);
    /* no whole-message promise: no map, so every write keeps the device's scrambling */
    loop_open(&l, TMX_SOFT_DIO_ALIGNED128, slots, slot_size);
    cr_assert_eq(l.ops->rma_map(l.qp, (uintptr_t)l.ring->addr, slots * slot_size, l.ring->rkey,
                                &map),
                 TMX_ERR_UNSUPPORTED);
    loop_close(&l);
    loop_open(&l, TMX_SOFT_DIO_NONE, slots, slot_size);
    cr_assert_eq(l.ops->rma_map(l.qp, (uintptr_t)l.ring->addr, slots * slot_size, l.ring->rkey,
                                &map),
                 TMX_ERR_UNSUPPORTED);
    /* nor a region outside the key */
    loop_close(&l);
    loop_open(&l, TMX_SOFT_DIO_WHOLE, slots, slot_size);
    cr_assert_eq(l.ops->rma_map(l.qp, (uintptr_t)l.ring->addr, slots * slot_size + 64,
                                l.ring->rkey, &map),
                 TMX_ERR_UNSUPPORTED);
    cr_assert_eq(l.ops->rma_map(l.qp, (uintptr_t)l.ring->addr, slots * slot_size,
                                l.ring->rkey ^ 1, &map),
                 TMX_ERR_UNSUPPORTED);
    loop_close(&l);
}
/* rma_writev: a ring message in its slot from three pieces (header, payload, flag), as
 * tmx_ring_send writes the slot's larger messages; the same checks as rma_write (bounds, a
 * stale map never writes). */
Test(ring, rma_map_writev, .timeout = 60)
{
    loop_t         l;
    tmx_rma_map_t  map;
    tmx_ring_msg_t msg;
    uint8_t        hdr[16], pay[2048], rb[2304], want[2048 + 16];
    const size_t   slots = 4, slot_size = 2176;
    uint64_t       raddr, flag;
    tmx_sge_t      sge[3];

    loop_open(&l, TMX_SOFT_DIO_WHOLE, slots, slot_size);
    cr_assert(l.ops->rma_map != NULL && l.ops->rma_writev != NULL);
    raddr = (uintptr_t)l.ring->addr;
    cr_assert_eq(l.ops->rma_map(l.qp, raddr, slots * slot_size, l.ring->rkey, &map), TMX_OK);
    for (uint64_t pos = 0; pos < 3 * slots; pos++) {
        const uint8_t *slot = (const uint8_t *)l.ring->addr + (pos & (slots - 1)) * slot_size;
        size_t         len  = pos == 0 ? 0 : (size_t)(pos * 173 % 2048) + 1;
        size_t         mlen = sizeof(hdr) + len;

        for (size_t i = 0; i < sizeof(hdr); i++) {
            hdr[i] = pat(pos, i);
        }
        hdr[0] = 1;
        for (size_t i = 0; i < len; i++) {
            pay[i] = pat(pos, i + 100);
        }
        flag   = tmx_ring_flag((uint32_t)pos + 9, mlen, sizeof(hdr), tmx_ring_marker(pos, 2));
        sge[0] = (tmx_sge_t){.addr = (uintptr_t)hdr, .length = sizeof(hdr)};
        sge[1] = (tmx_sge_t){.addr = (uintptr_t)pay, .length = (uint32_t)len};
        sge[2] = (tmx_sge_t){.addr = (uintptr_t)&flag, .length = 8};
        cr_assert_eq(tmx_ring_slot_read(TMX_RING_MODE_WHOLE, slot, slot_size, 2, pos, rb, &msg),
                     0);
        /* pos 0: two pieces (header, flag); the others three */
        cr_assert_eq(pos == 0 ? l.ops->rma_writev(l.qp, &map, slot_size - mlen - 8,
                                                  (tmx_sge_t[]){sge[0], sge[2]}, 2, 0)
                              : l.ops->rma_writev(l.qp, &map,
                                                  (pos & (slots - 1)) * slot_size + slot_size -
                                                      mlen - 8,
                                                  sge, 3, 0),
                     TMX_OK);
        cr_assert_eq(tmx_ring_slot_read(TMX_RING_MODE_WHOLE, slot, slot_size, 2, pos, rb, &msg),
                     1);
        memcpy(want, hdr, sizeof(hdr));
        memcpy(want + sizeof(hdr), pay, len);
        cr_assert(msg.seq == (uint32_t)pos + 9 && msg.len == mlen && msg.hlen == sizeof(hdr) &&
                      memcmp(msg.data, want, mlen) == 0,
                  "position %llu (%zu bytes) read back wrong", (unsigned long long)pos, len);
    }
    /* past the map's end, or a bad piece count: refused, nothing written */
    cr_assert_eq(l.ops->rma_writev(l.qp, &map, slots * slot_size - 16, sge, 3, 0),
                 TMX_ERR_INVALID_PARAM);
    cr_assert_eq(l.ops->rma_writev(l.qp, &map, SIZE_MAX - 4, sge, 3, 0), TMX_ERR_INVALID_PARAM);
    cr_assert_eq(l.ops->rma_writev(l.qp, &map, 0, sge, 0, 0), TMX_ERR_INVALID_PARAM);
    cr_assert_eq(l.ops->rma_writev(l.qp, &map, 0, sge, 4, 0), TMX_ERR_INVALID_PARAM);
    /* the region freed and its memory given again under a new key: the old map never writes
     * there */
    l.ops->mem_free(l.ring);
    cr_assert_eq(l.ops->mem_alloc(l.pd, slots * slot_size,
                                  TMX_ACCESS_LOCAL_WRITE | TMX_ACCESS_REMOTE_WRITE, &l.ring),
                 TMX_OK);
    memset(l.ring->addr, 0, slots * slot_size);
    sge[1].length = 1000;
    (void)l.ops->rma_writev(l.qp, &map, 0, sge, 3, 0);
    for (size_t i = 0; i < slots * slot_size; i++) {
        cr_assert_eq(((const uint8_t *)l.ring->addr)[i], 0, "byte %zu written through a stale map",
                     i);
    }
    loop_close(&l);
}


/* A span's message (ring.h "Spans") lies in its slot short of the slot's flag word, ends on 8
 * bytes, and has its payload on a 64-byte line when its length allows; its flag (the header
 * length's TMX_RING_SPAN bit) is returned as read, for the ring's reader to check. */
Test(ring, span_place_and_flag)
{
    static const size_t hlens[] = {16, 24, 32};
    const size_t        slot    = 2176;
    uint8_t             s[256], buf[256];
    tmx_ring_msg_t      msg;

    for (size_t h = 0; h < sizeof(hlens) / sizeof(hlens[0]); h++) {
        for (size_t len = 1; hlens[h] + len <= slot - TMX_RING_FLAG - 7; len++) {
            size_t off = tmx_ring_span_off(hlens[h], len, slot);

            cr_assert(off + hlens[h] + len <= slot - TMX_RING_FLAG, "hlen %zu len %zu off %zu",
                      hlens[h], len, off);
            cr_assert_eq((off + hlens[h] + len) % 8, 0, "hlen %zu len %zu off %zu", hlens[h],
                         len, off);
            if (len % 8 == 0 && 64 + len + TMX_RING_FLAG <= slot) {
                cr_assert_eq((off + hlens[h]) % 64, 0, "hlen %zu len %zu", hlens[h], len);
            }
        }
    }
    memset(s, 0, sizeof(s));
    s[248] = 5;                            /* seq 5 */
    s[252] = 2064 & 0xff;                  /* a 2 KiB message, longer than this slot */
    s[253] = 2064 >> 8;
    s[254] = 16 | TMX_RING_SPAN;
    s[255] = tmx_ring_marker(0, 1);
    cr_assert_eq(tmx_ring_slot_read(TMX_RING_MODE_WHOLE, s, sizeof(s), 1, 0, buf, &msg), 1);
    cr_assert(msg.seq == 5 && msg.len == 2064 && msg.hlen == (16 | TMX_RING_SPAN));
    s[254] = 16; /* the same lengths without the bit: refused */
    cr_assert_eq(tmx_ring_slot_read(TMX_RING_MODE_WHOLE, s, sizeof(s), 1, 0, buf, &msg), -1);
}
