/*
 * XRC endpoint ids cannot be spoofed (src/core/xrc.c, tmx_xrc_rx_ep). An XRC SRQ takes every
 * peer's messages; the receiver learns which endpoint a message is for from its immediate
 * data. A process of the job that puts another process's endpoint id there must not be taken
 * for that process: the message is accepted only when it came through a target QP (the
 * completion's qp_num, reported by the device) that serves the endpoint's peer.
 *
 * Three workers in this process on the soft device with XRC: A and S connect to B. S then
 * crafts a message by hand on its own initiator to B's SRQ, naming B's endpoint for A in the
 * immediate data, with a tag B waits for. B must drop it (and count it), and still take A's
 * real message with that tag. Without the check B delivers S's bytes as A's message.
 *
 * With tag-matching offload on too (the second test) only replies travel on XRC: S forges the
 * ACK of A's synchronous send, naming A's endpoint, through the initiator S answers A's own
 * connection with; A's send must not complete until B really matched it.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tmx/tmx.h>

#include "core/core.h"
#include "proto/proto.h"
#include "util/time.h"

typedef struct trio {
    tmx_context_h ctx[3];
    tmx_worker_h  w[3]; /* A, S, B */
    tmx_ep_h      ab, sb, sa; /* A to B, S to B, S to A */
} trio_t;

enum { A = 0, S = 1, B = 2 };

static void progress_all(trio_t *t, double secs)
{
    double end = tmx_time_sec() + secs;

    do {
        for (int i = 0; i < 3; i++) {
            tmx_worker_progress(t->w[i]);
        }
    } while (tmx_time_sec() < end);
}

static tmx_ep_t *passive_for(tmx_worker_t *w, uint64_t uuid)
{
    tmx_list_t *l;

    tmx_list_for_each(l, &w->eps) {
        tmx_ep_t *ep = tmx_container_of(l, tmx_ep_t, list);

        if (ep->passive && ep->remote_uuid == uuid) {
            return ep;
        }
    }
    return NULL;
}

static void trio_setup(trio_t *t, int tm)
{
    void  *addr, *addr_a;
    size_t len, len_a;

    setenv("TMX_PROVIDERS", "soft", 1);
    setenv("TMX_SOFT_XRC", "yes", 1);
    setenv("TMX_XRC", "yes", 1);
    setenv("TMX_XRC_DOMAINS", "2", 1);
    setenv("TMX_SOFT_TM", tm ? "yes" : "no", 1);
    setenv("TMX_TM_OFFLOAD", tm ? "yes" : "no", 1);
    setenv("TMX_NODE_ID", "spoof-test", 1);
    setenv("TMX_PEER_TIMEOUT", "1", 1); /* teardown: one thread closes one worker at a time */
    memset(t, 0, sizeof(*t));
    for (int i = 0; i < 3; i++) {
        cr_assert_eq(tmx_context_create(NULL, &t->ctx[i]), TMX_OK);
        cr_assert_eq(tmx_worker_create(t->ctx[i], NULL, &t->w[i]), TMX_OK);
        cr_assert_eq(t->w[i]->ifaces[0].xrc_on, 1, "XRC is on");
        cr_assert_eq(t->w[i]->ifaces[0].tm_on, tm, "offload is %s", tm ? "on" : "off");
    }
    cr_assert_eq(tmx_worker_get_address(t->w[B], &addr, &len), TMX_OK);
    {
        tmx_ep_params_t p = {.field_mask = TMX_EP_PARAM_ADDRESS, .address = addr, .address_length = len};
        cr_assert_eq(tmx_ep_create(t->w[A], &p, &t->ab), TMX_OK);
        cr_assert_eq(tmx_ep_create(t->w[S], &p, &t->sb), TMX_OK);
    }
    tmx_worker_release_address(t->w[B], addr);
    cr_assert_eq(tmx_worker_get_address(t->w[A], &addr_a, &len_a), TMX_OK);
    {
        tmx_ep_params_t p = {.field_mask = TMX_EP_PARAM_ADDRESS, .address = addr_a, .address_length = len_a};
        cr_assert_eq(tmx_ep_create(t->w[S], &p, &t->sa), TMX_OK);
    }
    tmx_worker_release_address(t->w[A], addr_a);
    for (double end = tmx_time_sec() + 10;
         (t->ab->state != TMX_EP_CONNECTED || t->sb->state != TMX_EP_CONNECTED ||
          t->sa->state != TMX_EP_CONNECTED) &&
         tmx_time_sec() < end;) {
        progress_all(t, 0.001);
    }
    cr_assert_eq(t->ab->state, TMX_EP_CONNECTED);
    cr_assert_eq(t->sb->state, TMX_EP_CONNECTED);
    cr_assert_eq(t->sa->state, TMX_EP_CONNECTED);
    cr_assert(t->ab->xrc && t->sb->xrc && t->sa->xrc);
    /* with offload the sending side has no initiator of its own: replies only use XRC */
    cr_assert(tm ? t->ab->xini[t->ab->xdom] == NULL : t->ab->xini[t->ab->xdom] != NULL);
    cr_assert_eq(t->ab->xrc_tm, tm);
}

static void trio_teardown(trio_t *t)
{
    tmx_ep_close(t->ab, TMX_EP_CLOSE_FORCE);
    tmx_ep_close(t->sb, TMX_EP_CLOSE_FORCE);
    tmx_ep_close(t->sa, TMX_EP_CLOSE_FORCE);
    for (int i = 0; i < 3; i++) {
        tmx_worker_destroy(t->w[i]);
        tmx_context_destroy(t->ctx[i]);
    }
}

/* S posts hdr + payload on its own initiator to ep's peer's SRQ in domain dom, with imm as
 * the immediate data (the endpoint id it claims). */
static void forge(tmx_ep_t *s_ep, uint32_t imm, const void *hdr, size_t hlen, const void *data,
                  size_t dlen)
{
    tmx_iface_t   *iface = s_ep->iface;
    unsigned       dom   = s_ep->xdom;
    tmx_sge_t      sge[2];
    tmx_send_wr_t  wr, *bad;

    cr_assert(hlen + dlen <= iface->max_inline);
    sge[0] = (tmx_sge_t){.addr = (uintptr_t)hdr, .length = (uint32_t)hlen};
    sge[1] = (tmx_sge_t){.addr = (uintptr_t)data, .length = (uint32_t)dlen};
    memset(&wr, 0, sizeof(wr));
    wr.wr_id       = TMX_WRID(TMX_WRID_CTRL, 0);
    wr.sg_list     = sge;
    wr.num_sge     = dlen > 0 ? 2 : 1;
    wr.opcode      = TMX_WR_SEND_WITH_IMM;
    wr.send_flags  = TMX_SEND_INLINE;
    wr.imm_data    = imm;
    wr.remote_srqn = s_ep->xsrqn[dom];
    cr_assert_eq(iface->ops->post_send(s_ep->xini[dom]->qp, &wr, &bad), TMX_OK);
}

Test(xrc_spoof, eager_naming_another_peers_endpoint_is_dropped, .timeout = 60)
{
    trio_t              t;
    tmx_ep_t           *b_for_a;
    tmx_proto_hdr_t     h;
    const char          fake[] = "from S, posing as A";
    const char          real[] = "from A";
    char                buf[64];
    tmx_request_h       req;
    tmx_tag_recv_info_t info;
    tmx_status_t        st;

    trio_setup(&t, 0);
    /* A's first message: B knows A's targets and endpoint */
    cr_assert_eq(tmx_tag_send(t.ab, real, sizeof(real), 1), TMX_OK);
    memset(buf, 0, sizeof(buf));
    cr_assert_eq(tmx_tag_recv_nb(t.w[B], buf, sizeof(buf), 1, ~0ULL, NULL, &req), TMX_INPROGRESS);
    cr_assert_eq(tmx_request_wait(req, &info), TMX_OK);
    tmx_request_free(req);
    cr_assert_eq(info.sender, t.w[A]->uuid);
    b_for_a = passive_for(t.w[B], t.w[A]->uuid);
    cr_assert_not_null(b_for_a);

    /* S names B's endpoint for A */
    memset(&h, 0, sizeof(h));
    h.op  = TMX_PROTO_EAGER;
    h.tag = 2;
    forge(t.sb, (uint32_t)b_for_a->id, &h, sizeof(h), fake, sizeof(fake));
    memset(buf, 0, sizeof(buf));
    cr_assert_eq(tmx_tag_recv_nb(t.w[B], buf, sizeof(buf), 2, ~0ULL, NULL, &req),
                 TMX_INPROGRESS);
    progress_all(&t, 0.5);
    st = tmx_request_test(req, &info);
    cr_expect_eq(st, TMX_INPROGRESS, "B took S's forged message as A's: \"%s\" from %016llx",
                 buf, (unsigned long long)info.sender);
    cr_expect_eq(t.w[B]->stat_xrc_dropped, 1, "dropped and counted: %llu",
                 (unsigned long long)t.w[B]->stat_xrc_dropped);
    /* A's real message with that tag still arrives, and is what B gets */
    if (st == TMX_INPROGRESS) {
        cr_assert_eq(tmx_tag_send(t.ab, real, sizeof(real), 2), TMX_OK);
        cr_assert_eq(tmx_request_wait(req, &info), TMX_OK);
        cr_expect_eq(info.sender, t.w[A]->uuid);
        cr_expect_str_eq(buf, real);
    }
    tmx_request_free(req);
    /* S's own endpoint at B still works: only the forged message was refused */
    {
        cr_assert_eq(tmx_tag_send(t.sb, fake, sizeof(fake), 3), TMX_OK);
        cr_assert_eq(tmx_tag_recv_nb(t.w[B], buf, sizeof(buf), 3, ~0ULL, NULL, &req),
                     TMX_INPROGRESS);
        cr_assert_eq(tmx_request_wait(req, &info), TMX_OK);
        cr_expect_eq(info.sender, t.w[S]->uuid);
        tmx_request_free(req);
    }
    trio_teardown(&t);
}

Test(xrc_spoof, forged_ack_with_offload_is_dropped, .timeout = 60)
{
    trio_t               t;
    tmx_proto_sync_hdr_t h;
    tmx_request_t       *sreq;
    tmx_request_h        sreq_h = NULL, rreq;
    tmx_request_params_t sync = {.field_mask = TMX_REQ_PARAM_FLAGS,
                                 .flags      = TMX_SEND_FLAG_SYNC};
    char                 buf[64];
    const char           msg[] = "sync from A";
    tmx_tag_recv_info_t  info;

    trio_setup(&t, 1);
    /* A's synchronous send waits for B's ACK (B has posted nothing yet) */
    cr_assert_eq(tmx_tag_send_nb(t.ab, msg, sizeof(msg), 7, &sync, &sreq_h), TMX_INPROGRESS);
    progress_all(&t, 0.1);
    sreq = sreq_h;
    cr_assert_eq(tmx_request_test(sreq_h, NULL), TMX_INPROGRESS);
    cr_assert_neq(sreq->id, 0);

    /* S answers A's connection to it through its initiator to A's node (A knows its target:
     * S's reply named it); S forges B's ACK there, naming A's endpoint to B */
    {
        tmx_ep_h as = NULL;
        void    *addr;
        size_t   len;
        tmx_ep_t *s_for_a;
        tmx_ep_params_t p = {.field_mask = TMX_EP_PARAM_ADDRESS};

        cr_assert_eq(tmx_worker_get_address(t.w[S], &addr, &len), TMX_OK);
        p.address        = addr;
        p.address_length = len;
        cr_assert_eq(tmx_ep_create(t.w[A], &p, &as), TMX_OK);
        tmx_worker_release_address(t.w[S], addr);
        for (double end = tmx_time_sec() + 10;
             as->state != TMX_EP_CONNECTED && tmx_time_sec() < end;) {
            progress_all(&t, 0.001);
        }
        cr_assert_eq(as->state, TMX_EP_CONNECTED);
        s_for_a = passive_for(t.w[S], t.w[A]->uuid);
        cr_assert_not_null(s_for_a);
        cr_assert_eq(s_for_a->state, TMX_EP_CONNECTED);
        memset(&h, 0, sizeof(h));
        h.base.op = TMX_PROTO_ACK;
        h.sreq_id = sreq->id;
        forge(s_for_a, (uint32_t)t.ab->id, &h, sizeof(h), NULL, 0);
        progress_all(&t, 0.5);
        tmx_ep_close(as, TMX_EP_CLOSE_FORCE);
    }
    progress_all(&t, 0.5);
    cr_expect_eq(tmx_request_test(sreq_h, NULL), TMX_INPROGRESS,
                 "A's synchronous send completed on S's forged ACK");
    cr_expect_eq(t.w[A]->stat_xrc_dropped, 1, "dropped and counted: %llu",
                 (unsigned long long)t.w[A]->stat_xrc_dropped);

    /* B's real ACK (through XRC: a reply) completes it */
    memset(buf, 0, sizeof(buf));
    cr_assert_eq(tmx_tag_recv_nb(t.w[B], buf, sizeof(buf), 7, ~0ULL, NULL, &rreq),
                 TMX_INPROGRESS);
    for (double end = tmx_time_sec() + 10;
         tmx_request_test(sreq_h, NULL) == TMX_INPROGRESS && tmx_time_sec() < end;) {
        progress_all(&t, 0.001);
    }
    cr_expect_eq(tmx_request_test(sreq_h, NULL), TMX_OK);
    cr_expect_eq(tmx_request_test(rreq, &info), TMX_OK);
    cr_expect_eq(info.sender, t.w[A]->uuid);
    cr_expect_str_eq(buf, msg);
    tmx_request_free(rreq);
    tmx_request_free(sreq_h);
    trio_teardown(&t);
}

/*
 * A node whose processes all left can be connected to again. A (node "a") connects to B1, the
 * only process of node "b": B1 creates the target QP of A's initiator to node b, and is its
 * only holder. B1 leaves, and the target with it. A new process B2 of node b: A's initiator to
 * node b still says connected, to a target that is gone; B2 says so (it cannot open it), A
 * makes a new initiator, and the connection works both ways. Before, it timed out.
 */
static tmx_worker_h make_worker(tmx_context_h *ctx, const char *node)
{
    tmx_worker_h w;

    setenv("TMX_NODE_ID", node, 1);
    cr_assert_eq(tmx_context_create(NULL, ctx), TMX_OK);
    cr_assert_eq(tmx_worker_create(*ctx, NULL, &w), TMX_OK);
    cr_assert_eq(w->ifaces[0].xrc_on, 1, "XRC is on");
    return w;
}

static tmx_ep_h connect_to(tmx_worker_h from, tmx_worker_h to)
{
    void           *addr;
    size_t          len;
    tmx_ep_h        ep;
    tmx_ep_params_t p = {.field_mask = TMX_EP_PARAM_ADDRESS};

    cr_assert_eq(tmx_worker_get_address(to, &addr, &len), TMX_OK);
    p.address        = addr;
    p.address_length = len;
    cr_assert_eq(tmx_ep_create(from, &p, &ep), TMX_OK);
    tmx_worker_release_address(to, addr);
    return ep;
}

static void pingpong(tmx_worker_h a, tmx_ep_h ab, tmx_worker_h b, tmx_ep_h ba, uint64_t tag)
{
    char                buf[32];
    tmx_request_h       req, sreq = NULL;
    tmx_tag_recv_info_t info;
    double              end = tmx_time_sec() + 10;

    cr_assert_eq(tmx_tag_recv_nb(b, buf, sizeof(buf), tag, ~0ULL, NULL, &req), TMX_INPROGRESS);
    cr_assert_geq(tmx_tag_send_nb(ab, "ping", 5, tag, NULL, &sreq), 0);
    while (tmx_request_test(req, &info) == TMX_INPROGRESS && tmx_time_sec() < end) {
        tmx_worker_progress(a);
        tmx_worker_progress(b);
    }
    cr_assert_eq(tmx_request_test(req, &info), TMX_OK, "A to B");
    cr_assert_eq(info.sender, a->uuid);
    tmx_request_free(req);
    if (sreq != NULL) {
        tmx_request_free(sreq);
    }
    cr_assert_eq(tmx_tag_recv_nb(a, buf, sizeof(buf), tag + 1, ~0ULL, NULL, &req),
                 TMX_INPROGRESS);
    sreq = NULL;
    cr_assert_geq(tmx_tag_send_nb(ba, "pong", 5, tag + 1, NULL, &sreq), 0);
    end = tmx_time_sec() + 10;
    while (tmx_request_test(req, &info) == TMX_INPROGRESS && tmx_time_sec() < end) {
        tmx_worker_progress(a);
        tmx_worker_progress(b);
    }
    cr_assert_eq(tmx_request_test(req, &info), TMX_OK, "B to A");
    tmx_request_free(req);
    if (sreq != NULL) {
        tmx_request_free(sreq);
    }
}

static void reconnect_after_node_emptied(int tm)
{
    tmx_context_h ca, cb1, cb2;
    tmx_worker_h  a, b1, b2;
    tmx_ep_h      ab1, b1a, ab2, b2a;
    tmx_xini_t   *old;

    setenv("TMX_PROVIDERS", "soft", 1);
    setenv("TMX_SOFT_XRC", "yes", 1);
    setenv("TMX_XRC", "yes", 1);
    setenv("TMX_XRC_DOMAINS", "1", 1);
    setenv("TMX_SOFT_TM", tm ? "yes" : "no", 1);
    setenv("TMX_TM_OFFLOAD", tm ? "yes" : "no", 1);
    setenv("TMX_PEER_TIMEOUT", "2", 1);
    a   = make_worker(&ca, "reconnect-a");
    b1  = make_worker(&cb1, "reconnect-b");
    ab1 = connect_to(a, b1);
    b1a = connect_to(b1, a);
    pingpong(a, ab1, b1, b1a, 10);
    /* A's initiator to node b: its answers to B1 go through it */
    cr_assert_not_null(passive_for(a, b1->uuid));
    old = passive_for(a, b1->uuid)->xini[0];
    cr_assert_not_null(old);
    cr_assert_eq(old->state, TMX_XINI_CONNECTED);
    tmx_ep_close(ab1, TMX_EP_CLOSE_FORCE);
    tmx_ep_close(b1a, TMX_EP_CLOSE_FORCE);
    tmx_worker_destroy(b1);
    tmx_context_destroy(cb1);
    progress_all(&(trio_t){.w = {a, a, a}}, 0.2);

    b2  = make_worker(&cb2, "reconnect-b");
    ab2 = connect_to(a, b2);
    b2a = connect_to(b2, a);
    for (double end = tmx_time_sec() + 10;
         (ab2->state == TMX_EP_CONNECTING || b2a->state == TMX_EP_CONNECTING) &&
         tmx_time_sec() < end;) {
        tmx_worker_progress(a);
        tmx_worker_progress(b2);
    }
    cr_assert_eq(ab2->state, TMX_EP_CONNECTED, "A to the new process of node b");
    cr_assert_eq(b2a->state, TMX_EP_CONNECTED);
    cr_assert_not_null(passive_for(a, b2->uuid));
    cr_expect_neq(passive_for(a, b2->uuid)->xini[0], old,
                  "the initiator to node b was made anew");
    pingpong(a, ab2, b2, b2a, 20);
    tmx_ep_close(ab2, TMX_EP_CLOSE_FORCE);
    tmx_ep_close(b2a, TMX_EP_CLOSE_FORCE);
    tmx_worker_destroy(b2);
    tmx_worker_destroy(a);
    tmx_context_destroy(cb2);
    tmx_context_destroy(ca);
}

Test(xrc_core, reconnect_after_node_emptied, .timeout = 60)
{
    reconnect_after_node_emptied(0);
}

Test(xrc_core, reconnect_after_node_emptied_with_offload, .timeout = 60)
{
    reconnect_after_node_emptied(1);
}
