/*
 * XRC domains (doc/DESIGN.md "XRC"; the device's side in prov.h "XRC").
 *
 * TM and XRC: with tag-matching offload on too, each endpoint keeps the RC pair of TM (ep.c)
 * for the tagged stream and its close, which the device matches; a passive endpoint's
 * messages (ACK, FIN, CREDIT, DISC, DISC_ACK) and the rendezvous reads software does go
 * through the initiators (tmx_xrc_ctrl; DESIGN.md "TM and XRC" has the table).
 *
 * Where the device offers XRC and TMX_XRC allows it, an interface opens TMX_XRC_DOMAINS domains of its node and one XRC SRQ in
 * each: its whole receive side. An endpoint then owns no queue pair: it sends through the
 * initiators of its interface to the peer's node, one per domain, which every endpoint to a
 * process of that node shares, and names the peer's SRQ in each work request; the peer learns
 * which endpoint of its own a message is for from the immediate data (its endpoint id), and
 * checks that it is an XRC endpoint of that interface.
 *
 * Connecting an endpoint, beyond the RC wire-up (REQ/REP over UD, which here carry the node
 * and the SRQ numbers instead of QP blobs):
 * - each side needs its initiators to the other's node connected (the passive side replies
 *   only once it has them, so that nothing arrives that it could not answer); one not yet
 *   connected is connected through the endpoint's peer, which is on that node: XCONN_REQ
 *   (our initiator's blob) -> the peer creates a target QP in its domain for it -> XCONN_REP
 *   (the target's blob). Endpoints waiting for an initiator another one is connecting wait
 *   for that one (and take over if it fails). An endpoint is CONNECTED once its peer's
 *   numbers are known and its initiators to the peer's node (every domain: rendezvous data
 *   is striped over them) are; until then, sends and control messages wait on it.
 * - once connected, a side tells its peer which target QPs its initiators use (XTGT). The peer
 *   opens them by number (unless it created them): that handle is its receive side for us,
 *   reports our death, and keeps the target alive while the peer lives, whoever created it.
 *
 * Spreading: the messages of a pair of workers (eager, rendezvous requests, control) travel in
 * one domain, hash(both ids) mod the domains, so their order is that of one queue pair; the
 * data of a rendezvous is read in stripes, one per domain (tmx_proto_rndv_recv).
 *
 * Failures: a target QP's async error (its initiator's process died) fails every endpoint of
 * that worker; an initiator's, with the remote SRQ named (the soft device: that process died),
 * the endpoints to that SRQ; without (hardware: the whole initiator), every endpoint using it,
 * and the initiator is replaced at the next connect to that node.
 */
#define TMX_LOG_SUBSYS "xrc"
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/core.h"
#include "proto/proto.h"
#include "util/log.h"
#include "util/time.h"

#define TMX_XRC_RESEND   0.5 /* seconds between two XCONN_REQ of one initiator */
#define TMX_XRC_INI_WR   1024 /* an initiator's send queue: every endpoint to its node shares it */

/* What the XRC wire-up messages carry after the device address. */
typedef struct tmx_xrc_wire {
    uint64_t node;
    uint8_t  ndom;
    uint8_t  dom;      /* XCONN: the domain of the initiator */
    uint16_t blob_len; /* XCONN_REQ: the initiator's blob; XCONN_REP: the target's */
    uint32_t ini_qpn;  /* XCONN: the initiator's qp number */
    uint32_t srqn[TMX_XRC_MAX_DOMAINS]; /* REQ, REP: the sender's SRQ numbers */
    uint32_t tgt[TMX_XRC_MAX_DOMAINS];  /* XCONN_REP: [0] the target's number; XTGT: the
                                         * targets of the sender's initiators to our node */
} tmx_xrc_wire_t;

/* ep.c: the reply to a passive endpoint's request */
void tmx_ep_wireup_reply(tmx_ep_t *ep);
/* ep.c: a wire-up message of type with an XRC payload, to a peer's UD QP */
tmx_status_t tmx_ep_wireup_send_xrc(tmx_iface_t *iface, tmx_ah_t *ah, uint32_t ud_qpn,
                                    uint8_t type, uint64_t src_ep_id, uint64_t dst_ep_id,
                                    const void *payload, size_t len);

static int tmx_xrc_tgts_note(tmx_iface_t *iface, uint64_t uuid, const uint32_t *tgt,
                             unsigned n, uint32_t *gone);
static void tmx_xrc_send_stale(tmx_ep_t *ep, const uint32_t *gone);

static uint64_t tmx_xrc_str_hash(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ULL; /* FNV-1a */

    for (; *s != '\0'; s++) {
        h = (h ^ (uint8_t)*s) * 0x100000001b3ULL;
    }
    return h;
}

/* ---------------------------------------------------------------- the interface */

tmx_status_t tmx_xrc_iface_init(tmx_iface_t *iface)
{
    const tmx_config_t   *cfg  = &iface->worker->ctx->cfg;
    tmx_dev_t            *dev  = iface->dev;
    const tmx_prov_ops_t *ops  = iface->ops;
    unsigned              ndom = cfg->xrc_domains;
    char                  host[256] = "";
    tmx_status_t          status;

    iface->rx_basic = iface->rx_count;
    tmx_list_init(&iface->xinis);
    tmx_list_init(&iface->xtgts);
    if (cfg->xrc == 0) {
        return TMX_OK;
    }
    if (!(dev->attr.caps & TMX_DEV_CAP_XRC)) {
        if (cfg->xrc == 1) {
            tmx_warn("TMX_XRC=yes: device %s has no XRC: one RC queue pair per peer",
                     dev->name);
        }
        return TMX_OK;
    }
    if (ndom == 0 || ndom > TMX_XRC_MAX_DOMAINS) {
        ndom = ndom == 0 ? 1 : TMX_XRC_MAX_DOMAINS;
    }
    if (tmx_hash_init(&iface->xini_by_key, 16) != TMX_OK ||
        tmx_hash_init(&iface->xtgt_by_qpn, 64) != TMX_OK) {
        return TMX_ERR_NO_MEMORY;
    }
    /* the device's node is TMX_NODE_ID or the host; ours, to tell peers' nodes apart, too */
    if (cfg->node_id[0] == '\0') {
        gethostname(host, sizeof(host) - 1);
    }
    iface->node_key = tmx_hash_u64(tmx_xrc_str_hash(cfg->node_id) ^
                                   tmx_hash_u64(tmx_xrc_str_hash(host))) | 1;
    /* the receive buffers: a few for the basic SRQ (no RC QP is made), the rest shared out
     * over the domains. With TM the tagged stream arrives on the TM SRQ: it keeps its
     * buffers, and the domains get what the replies need. */
    iface->rx_per_dom = iface->rx_count / ndom;
    if (iface->rx_per_dom < 64 || iface->tm_on) {
        iface->rx_per_dom = 64;
    }
    iface->rx_basic = iface->tm_on ? iface->rx_count : 16;
    for (unsigned d = 0; d < ndom; d++) {
        tmx_xrcd_init_attr_t xa = {.key = d};
        tmx_srq_init_attr_t  sa;

        status = ops->xrcd_open(dev, &xa, &iface->xrcd[d]);
        if (status != TMX_OK) {
            goto err;
        }
        memset(&sa, 0, sizeof(sa));
        sa.type    = TMX_SRQT_XRC;
        sa.max_wr  = iface->rx_per_dom;
        sa.max_sge = 1;
        sa.cq      = iface->cq;
        sa.xrcd    = iface->xrcd[d];
        if (dev->attr.caps & TMX_DEV_CAP_RECV_INPLACE) {
            sa.flags = TMX_SRQ_F_INPLACE; /* tmx_proto_rx reads wc.data where given */
        }
        status = ops->srq_create(iface->pd, &sa, &iface->xsrq[d]);
        if (status == TMX_OK) {
            status = ops->srq_get_num(iface->xsrq[d], &iface->xsrqn[d]);
        }
        if (status != TMX_OK) {
            goto err;
        }
    }
    iface->xrc_ndom = ndom;
    iface->rx_count = iface->rx_basic + ndom * iface->rx_per_dom;
    iface->xrc_on   = 1;
    tmx_info("device %s: XRC on, %u domain%s of node %016llx, SRQ numbers %u%s%s", dev->name,
             ndom, ndom == 1 ? "" : "s", (unsigned long long)iface->node_key, iface->xsrqn[0],
             ndom > 1 ? " ..." : "",
             iface->tm_on ? "; tagged messages on RC (tag-matching offload), the rest on XRC"
                          : "");
    return TMX_OK;

err:
    tmx_warn("device %s: XRC setup failed (%s): one RC queue pair per peer", dev->name,
             tmx_status_string(status));
    tmx_xrc_iface_cleanup(iface);
    iface->rx_basic = iface->rx_count;
    return cfg->xrc == 1 ? status : TMX_OK;
}

void tmx_xrc_iface_cleanup(tmx_iface_t *iface)
{
    const tmx_prov_ops_t *ops = iface->ops;
    tmx_list_t           *l;

    if (iface->xinis.next == NULL) {
        return; /* the interface's setup failed before XRC's */
    }
    while ((l = tmx_list_pop_head(&iface->xinis)) != NULL) {
        tmx_xini_t *x = tmx_container_of(l, tmx_xini_t, list);

        ops->qp_destroy(x->qp);
        free(x);
    }
    while ((l = tmx_list_pop_head(&iface->xtgts)) != NULL) {
        tmx_xtgt_t *t = tmx_container_of(l, tmx_xtgt_t, list);

        ops->qp_destroy(t->qp);
        free(t);
    }
    for (unsigned d = 0; d < TMX_XRC_MAX_DOMAINS; d++) {
        if (iface->xsrq[d] != NULL) {
            ops->srq_destroy(iface->xsrq[d]);
            iface->xsrq[d] = NULL;
        }
        if (iface->xrcd[d] != NULL) {
            ops->xrcd_close(iface->xrcd[d]);
            iface->xrcd[d] = NULL;
        }
    }
    if (iface->xini_by_key.keys != NULL) {
        tmx_hash_cleanup(&iface->xini_by_key);
        tmx_hash_cleanup(&iface->xtgt_by_qpn);
    }
    iface->xrc_on = 0;
}

tmx_srq_t *tmx_xrc_rx_srq(tmx_iface_t *iface, unsigned idx)
{
    unsigned end = iface->rx_basic;

    for (unsigned d = 0; d < iface->xrc_ndom; d++) {
        end += iface->rx_per_dom;
        if (idx < end) {
            return iface->xsrq[d];
        }
    }
    return NULL;
}

/* ---------------------------------------------------------------- initiators */

static uint64_t tmx_xini_key(uint64_t node, unsigned dom)
{
    return tmx_hash_u64(node + dom) | 1;
}

/* Our initiator to node in domain dom: the one there is, or a new one in INIT. */
static tmx_xini_t *tmx_xini_get(tmx_iface_t *iface, uint64_t node, unsigned dom)
{
    tmx_xini_t        *x = tmx_hash_get(&iface->xini_by_key, tmx_xini_key(node, dom));
    tmx_qp_init_attr_t qa;
    tmx_qp_attr_t      mod;
    tmx_status_t       status;

    if (x != NULL) {
        return x;
    }
    x = calloc(1, sizeof(*x));
    if (x == NULL) {
        return NULL;
    }
    memset(&qa, 0, sizeof(qa));
    qa.type        = TMX_QPT_XRC_INI;
    qa.send_cq     = iface->cq;
    qa.recv_cq     = iface->cq;
    qa.max_send_wr = TMX_XRC_INI_WR;
    qa.max_inline  = (uint32_t)iface->max_inline;
    status         = iface->ops->qp_create(iface->pd, &qa, &x->qp);
    if (status == TMX_OK) {
        memset(&mod, 0, sizeof(mod));
        mod.state = TMX_QPS_INIT;
        status    = iface->ops->qp_modify(x->qp, &mod, TMX_QP_ATTR_STATE);
        if (status != TMX_OK) {
            iface->ops->qp_destroy(x->qp);
        }
    }
    if (status == TMX_OK) {
        status = tmx_hash_put(&iface->xini_by_key, tmx_xini_key(node, dom), x);
        if (status != TMX_OK) {
            iface->ops->qp_destroy(x->qp);
        }
    }
    if (status != TMX_OK) {
        tmx_warn("XRC initiator to node %016llx, domain %u: %s", (unsigned long long)node, dom,
                 tmx_status_string(status));
        free(x);
        return NULL;
    }
    x->node  = node;
    x->dom   = dom;
    x->state = TMX_XINI_IDLE;
    tmx_list_add_tail(&iface->xinis, &x->list);
    return x;
}

/* Asks ep's peer for a target QP for initiator x. */
static void tmx_xini_request(tmx_ep_t *ep, tmx_xini_t *x)
{
    tmx_iface_t   *iface = ep->iface;
    uint8_t        buf[sizeof(tmx_xrc_wire_t) + TMX_QP_ADDR_MAX];
    tmx_xrc_wire_t m;
    size_t         blen = TMX_QP_ADDR_MAX;

    if (iface->ops->qp_get_addr(x->qp, buf + sizeof(m), &blen) != TMX_OK) {
        return;
    }
    memset(&m, 0, sizeof(m));
    m.node     = iface->node_key;
    m.ndom     = (uint8_t)iface->xrc_ndom;
    m.dom      = (uint8_t)x->dom;
    m.blob_len = (uint16_t)blen;
    m.ini_qpn  = x->qp->qp_num;
    memcpy(buf, &m, sizeof(m));
    x->state  = TMX_XINI_CONNECTING;
    x->via_ep = ep->id;
    x->sent   = tmx_time_sec();
    tmx_ep_wireup_send_xrc(iface, ep->ah, ep->remote_ud_qpn, TMX_WIREUP_XCONN_REQ, ep->id,
                           ep->remote_id, buf, sizeof(m) + blen);
}

/* ---------------------------------------------------------------- endpoints */

void tmx_xrc_ep_init(tmx_ep_t *ep)
{
    tmx_iface_t *iface = ep->iface;

    ep->xrc    = 1;
    ep->xrc_tm = iface->tm_on; /* qp and tm_qp: the RC pair of TM (ep.c) */
    ep->xdom   = (unsigned)(tmx_hash_u64(iface->worker->uuid + ep->remote_uuid) %
                          iface->xrc_ndom);
}

void tmx_xrc_ep_release(tmx_ep_t *ep)
{
    /* the initiators and target QPs are the interface's, shared: nothing of ep's own (with
     * TM its RC pair is, and ep.c destroys it) */
    if (ep->iface->xlast_ep == ep) {
        ep->iface->xlast_ep = NULL; /* tmx_xrc_rx_ep's cache */
    }
    if (!ep->xrc_tm) {
        ep->qp = NULL;
    }
    for (unsigned d = 0; d < TMX_XRC_MAX_DOMAINS; d++) {
        ep->xini[d] = NULL;
    }
}

/* Tells the peer which target QPs our initiators to its node use (it opens them). */
static void tmx_xrc_send_tgts(tmx_ep_t *ep)
{
    tmx_iface_t   *iface = ep->iface;
    tmx_xrc_wire_t m;

    memset(&m, 0, sizeof(m));
    m.node = iface->node_key;
    m.ndom = (uint8_t)iface->xrc_ndom;
    for (unsigned d = 0; d < iface->xrc_ndom; d++) {
        m.tgt[d] = ep->xini[d]->tgt_qpn;
    }
    ep->xtgt_sent = tmx_time_sec();
    tmx_ep_wireup_send_xrc(iface, ep->ah, ep->remote_ud_qpn, TMX_WIREUP_XTGT, ep->id,
                           ep->remote_id, &m, sizeof(m));
}

/* Connects ep once it can: its peer's numbers known, and our initiators to the peer's node
 * (each one not yet asked for is asked for through ep's peer). */
static void tmx_xrc_try_ready(tmx_ep_t *ep)
{
    tmx_iface_t *iface = ep->iface;
    tmx_worker_t *w    = iface->worker;
    int          ready = 1;

    if (ep->state != TMX_EP_CONNECTING || (!ep->passive && !ep->xrep)) {
        return;
    }
    if (ep->xrc_tm && !ep->passive) {
        /* TM and XRC: the sending side sends nothing through XRC (its tagged stream and its
         * close go on RC, connected at the REP); the answers come through the peer's
         * initiators, whose targets the REP named. No initiator of ours is needed for it. */
        ep->state = TMX_EP_CONNECTED;
        tmx_debug("endpoint %llu to %016llx connected: tagged messages through RC, answers "
                  "through XRC (domain %u)", (unsigned long long)ep->id,
                  (unsigned long long)ep->remote_uuid, ep->xdom);
        tmx_proto_ep_schedule(ep);
        return;
    }
    for (unsigned d = 0; d < iface->xrc_ndom; d++) {
        tmx_xini_t *x = ep->xini[d];

        if (x == NULL || x->state == TMX_XINI_FAILED) {
            x = ep->xini[d] = tmx_xini_get(iface, ep->xnode, d);
        }
        if (x == NULL) {
            ready = 0;
            continue;
        }
        if (x->state == TMX_XINI_IDLE) {
            tmx_xini_request(ep, x);
        } else if (x->state == TMX_XINI_CONNECTING) {
            /* asked through another endpoint: if that one failed, ask again through ours */
            tmx_ep_t *via = tmx_hash_get(&w->ep_by_id, x->via_ep);

            if (via == NULL || via->state == TMX_EP_FAILED) {
                tmx_xini_request(ep, x);
            }
        }
        if (x->state != TMX_XINI_CONNECTED) {
            ready = 0;
        }
    }
    if (ready && !ep->passive && !ep->xtgt_acked) {
        /* the peer takes our messages only through targets it knows to be ours
         * (tmx_xrc_rx_ep): it hears which first, over UD, which nothing orders with XRC */
        if (ep->xtgt_sent == 0 || tmx_time_sec() - ep->xtgt_sent > TMX_XRC_RESEND) {
            tmx_xrc_send_tgts(ep);
        }
        ready = 0;
    }
    if (!ready) {
        tmx_proto_ep_schedule(ep); /* wireup progress resends, and times out */
        return;
    }
    if (!ep->xrc_tm) {
        ep->qp = ep->xini[ep->xdom]->qp;
    }
    ep->state = TMX_EP_CONNECTED;
    tmx_debug("endpoint %llu to %016llx connected through XRC (domain %u)%s",
              (unsigned long long)ep->id, (unsigned long long)ep->remote_uuid, ep->xdom,
              ep->xrc_tm ? ", tagged messages through RC" : "");
    if (ep->passive) {
        /* the reply names our initiators' targets (tmx_xrc_wireup_pack) */
        /* only now: the peer sends once it has our reply, and everything it sends (a
         * rendezvous to read, a synchronous send to acknowledge) may need our initiators */
        tmx_ep_wireup_reply(ep);
    }
    tmx_proto_ep_schedule(ep); /* what was queued meanwhile goes */
}

/* An initiator got connected: the endpoints waiting for it may be ready. */
static void tmx_xrc_kick(tmx_iface_t *iface)
{
    tmx_list_t *l, *t;

    tmx_list_for_each_safe(l, t, &iface->worker->eps) {
        tmx_ep_t *ep = tmx_container_of(l, tmx_ep_t, list);

        if (ep->iface == iface && ep->xrc && ep->state == TMX_EP_CONNECTING) {
            tmx_xrc_try_ready(ep);
        }
    }
}

void tmx_xrc_wireup_progress(tmx_ep_t *ep)
{
    double now = tmx_time_sec();

    for (unsigned d = 0; d < ep->iface->xrc_ndom; d++) {
        tmx_xini_t *x = ep->xini[d];

        if (x != NULL && x->state == TMX_XINI_CONNECTING && x->via_ep == ep->id &&
            now - x->sent > TMX_XRC_RESEND) {
            tmx_xini_request(ep, x);
        }
    }
    tmx_xrc_try_ready(ep);
}

size_t tmx_xrc_wireup_pack(tmx_ep_t *ep, void *buf, size_t len)
{
    tmx_iface_t   *iface = ep->iface;
    tmx_xrc_wire_t m;

    if (len < sizeof(m)) {
        return 0;
    }
    memset(&m, 0, sizeof(m));
    m.node = iface->node_key;
    m.ndom = (uint8_t)iface->xrc_ndom;
    for (unsigned d = 0; d < iface->xrc_ndom; d++) {
        m.srqn[d] = iface->xsrqn[d];
        /* a passive side's reply: the targets of its initiators to the requester's node, which
         * the requester must know before anything of ours comes through them */
        if (ep->passive && ep->state == TMX_EP_CONNECTED && ep->xini[d] != NULL) {
            m.tgt[d] = ep->xini[d]->tgt_qpn;
        }
    }
    memcpy(buf, &m, sizeof(m));
    return sizeof(m);
}

/* The peer's node and SRQ numbers from a REQ or REP; TMX_ERR_UNREACHABLE when its domains
 * are not ours. */
static tmx_status_t tmx_xrc_peer(tmx_ep_t *ep, const void *x, size_t len)
{
    tmx_xrc_wire_t m;

    if (len < sizeof(m)) {
        return TMX_ERR_INVALID_PARAM;
    }
    memcpy(&m, x, sizeof(m));
    if (m.ndom != ep->iface->xrc_ndom) {
        tmx_warn("peer %016llx has %u XRC domains and this process %u: set TMX_XRC_DOMAINS "
                 "alike in every process of the job", (unsigned long long)ep->remote_uuid,
                 m.ndom, ep->iface->xrc_ndom);
        return TMX_ERR_UNREACHABLE;
    }
    for (unsigned d = 0; d < m.ndom; d++) {
        if (m.srqn[d] == 0) {
            return TMX_ERR_INVALID_PARAM;
        }
        ep->xsrqn[d] = m.srqn[d];
    }
    ep->xnode = m.node;
    return TMX_OK;
}

tmx_status_t tmx_xrc_on_req(tmx_ep_t *ep, const void *x, size_t len)
{
    tmx_status_t status = tmx_xrc_peer(ep, x, len);

    if (status == TMX_OK) {
        ep->state         = TMX_EP_CONNECTING;
        ep->connect_start = tmx_time_sec();
        tmx_xrc_try_ready(ep);
    }
    return status;
}

tmx_status_t tmx_xrc_on_rep(tmx_ep_t *ep, const void *x, size_t len)
{
    tmx_status_t status = tmx_xrc_peer(ep, x, len);

    if (status == TMX_OK) {
        tmx_xrc_wire_t m;

        uint32_t       gone[TMX_XRC_MAX_DOMAINS] = {0};

        /* the targets of the peer's initiators to our node: its replies come through them.
         * One that is gone (every process of our node that held it exited) is no use: the
         * peer hears so, makes a new initiator, and replies again (to a resent REQ). */
        memcpy(&m, x, sizeof(m));
        if (!tmx_xrc_tgts_note(ep->iface, ep->remote_uuid, m.tgt, m.ndom, gone)) {
            for (unsigned d = 0; d < ep->iface->xrc_ndom; d++) {
                if (gone[d] != 0) {
                    tmx_xrc_send_stale(ep, gone);
                    return TMX_OK;
                }
            }
        }
        ep->xrep = 1;
        tmx_xrc_try_ready(ep);
    }
    return status;
}

/* ---------------------------------------------------------------- target QPs */

static tmx_xtgt_t *tmx_xtgt_add(tmx_iface_t *iface, tmx_qp_t *qp, uint64_t uuid, unsigned dom,
                                int created, uint32_t ini_qpn)
{
    tmx_xtgt_t *t = calloc(1, sizeof(*t));

    if (t == NULL || tmx_hash_put(&iface->xtgt_by_qpn, qp->qp_num, t) != TMX_OK) {
        free(t);
        iface->ops->qp_destroy(qp);
        return NULL;
    }
    t->qp      = qp;
    t->qpn     = qp->qp_num;
    t->uuid    = uuid;
    t->dom     = dom;
    t->created = created;
    t->ini_qpn = ini_qpn;
    tmx_list_add_tail(&iface->xtgts, &t->list);
    return t;
}

/* XCONN_REQ: a target QP in our domain for the sender's initiator (the same one again when
 * the request is resent), and its blob back. */
static void tmx_xrc_on_xconn_req(tmx_iface_t *iface, uint64_t src_uuid, uint32_t src_ud_qpn,
                                 const uint8_t *dev_addr, size_t dev_addr_len,
                                 const tmx_xrc_wire_t *m, const uint8_t *blob)
{
    const tmx_prov_ops_t *ops = iface->ops;
    tmx_xtgt_t           *t   = NULL;
    tmx_list_t           *l;
    uint8_t               buf[sizeof(tmx_xrc_wire_t) + TMX_QP_ADDR_MAX];
    tmx_xrc_wire_t        r;
    size_t                blen = TMX_QP_ADDR_MAX;
    tmx_ah_t             *ah;
    tmx_status_t          status;

    if (m->dom >= iface->xrc_ndom) {
        return;
    }
    tmx_list_for_each(l, &iface->xtgts) {
        tmx_xtgt_t *c = tmx_container_of(l, tmx_xtgt_t, list);

        if (c->created && c->uuid == src_uuid && c->dom == m->dom && c->ini_qpn == m->ini_qpn) {
            t = c;
            break;
        }
    }
    if (t == NULL) {
        tmx_qp_init_attr_t qa;
        tmx_qp_attr_t      mod;
        tmx_qp_t          *qp = NULL;

        memset(&qa, 0, sizeof(qa));
        qa.type    = TMX_QPT_XRC_TGT;
        qa.send_cq = iface->cq;
        qa.xrcd    = iface->xrcd[m->dom];
        status     = ops->qp_create(iface->pd, &qa, &qp);
        if (status == TMX_OK) {
            memset(&mod, 0, sizeof(mod));
            mod.state = TMX_QPS_INIT;
            status    = ops->qp_modify(qp, &mod, TMX_QP_ATTR_STATE);
        }
        if (status == TMX_OK) {
            mod.state           = TMX_QPS_RTR;
            mod.remote_addr     = blob;
            mod.remote_addr_len = m->blob_len;
            status = ops->qp_modify(qp, &mod, TMX_QP_ATTR_STATE | TMX_QP_ATTR_REMOTE);
        }
        if (status != TMX_OK) {
            tmx_warn("XRC target QP for %016llx's initiator (domain %u): %s",
                     (unsigned long long)src_uuid, m->dom, tmx_status_string(status));
            if (qp != NULL) {
                ops->qp_destroy(qp);
            }
            return;
        }
        t = tmx_xtgt_add(iface, qp, src_uuid, m->dom, 1, m->ini_qpn);
        if (t == NULL) {
            return;
        }
    }
    if (ops->qp_get_addr(t->qp, buf + sizeof(r), &blen) != TMX_OK ||
        ops->ah_create(iface->pd, dev_addr, dev_addr_len, &ah) != TMX_OK) {
        return;
    }
    memset(&r, 0, sizeof(r));
    r.node     = iface->node_key;
    r.ndom     = (uint8_t)iface->xrc_ndom;
    r.dom      = m->dom;
    r.blob_len = (uint16_t)blen;
    r.ini_qpn  = m->ini_qpn;
    r.tgt[0]   = t->qpn;
    memcpy(buf, &r, sizeof(r));
    tmx_ep_wireup_send_xrc(iface, ah, src_ud_qpn, TMX_WIREUP_XCONN_REP, 0, 0, buf,
                           sizeof(r) + blen);
    ops->ah_destroy(ah);
}

/* XCONN_REP: our initiator's target QP; the initiator connects. */
static void tmx_xrc_on_xconn_rep(tmx_iface_t *iface, const tmx_xrc_wire_t *m,
                                 const uint8_t *blob)
{
    tmx_xini_t   *x = NULL;
    tmx_list_t   *l;
    tmx_qp_attr_t mod;
    tmx_status_t  status;

    tmx_list_for_each(l, &iface->xinis) {
        tmx_xini_t *c = tmx_container_of(l, tmx_xini_t, list);

        if (c->qp->qp_num == m->ini_qpn && c->dom == m->dom) {
            x = c;
            break;
        }
    }
    if (x == NULL || x->state != TMX_XINI_CONNECTING) {
        return; /* a duplicate, or an initiator replaced meanwhile */
    }
    memset(&mod, 0, sizeof(mod));
    mod.state           = TMX_QPS_RTR;
    mod.remote_addr     = blob;
    mod.remote_addr_len = m->blob_len;
    status = iface->ops->qp_modify(x->qp, &mod, TMX_QP_ATTR_STATE | TMX_QP_ATTR_REMOTE);
    if (status == TMX_OK) {
        mod.state = TMX_QPS_RTS;
        status    = iface->ops->qp_modify(x->qp, &mod, TMX_QP_ATTR_STATE);
    }
    if (status != TMX_OK) {
        tmx_warn("XRC initiator to node %016llx (domain %u): connect failed: %s; asked again",
                 (unsigned long long)x->node, x->dom, tmx_status_string(status));
        mod.state = TMX_QPS_RESET;
        iface->ops->qp_modify(x->qp, &mod, TMX_QP_ATTR_STATE);
        mod.state = TMX_QPS_INIT;
        iface->ops->qp_modify(x->qp, &mod, TMX_QP_ATTR_STATE);
        x->state = TMX_XINI_IDLE;
        return;
    }
    x->state   = TMX_XINI_CONNECTED;
    x->tgt_qpn = m->tgt[0];
    tmx_debug("XRC initiator qp %u to node %016llx, domain %u: target qp %u", x->qp->qp_num,
              (unsigned long long)x->node, x->dom, x->tgt_qpn);
    tmx_xrc_kick(iface);
}

/* The target QPs a peer (uuid) says its initiators to our node use, n of them (one per
 * domain): opened unless we hold them. 1 when every one is now known to serve that peer; a
 * number we hold for another worker is not taken (its messages would pass for that one's). */
static int tmx_xrc_tgts_note(tmx_iface_t *iface, uint64_t uuid, const uint32_t *tgt, unsigned n,
                             uint32_t *gone)
{
    int ok = 1;

    for (unsigned d = 0; d < iface->xrc_ndom && d < n; d++) {
        tmx_qp_open_attr_t oa = {.xrcd = iface->xrcd[d], .qp_num = tgt[d],
                                 .send_cq = iface->cq};
        tmx_xtgt_t        *t  = tgt[d] != 0 ? tmx_hash_get(&iface->xtgt_by_qpn, tgt[d]) : NULL;
        tmx_qp_t          *qp = NULL;
        tmx_status_t       status;

        if (tgt[d] == 0) {
            ok = 0;
            continue;
        }
        if (t != NULL) {
            if (t->uuid != uuid) {
                tmx_warn("XRC target qp %u, named by %016llx, serves %016llx here: not taken",
                         tgt[d], (unsigned long long)uuid, (unsigned long long)t->uuid);
                ok = 0;
            }
            continue;
        }
        status = iface->ops->qp_open(iface->pd, &oa, &qp);
        if (status != TMX_OK) {
            tmx_debug("XRC target qp %u of %016llx (domain %u): open failed: %s", tgt[d],
                      (unsigned long long)uuid, d, tmx_status_string(status));
            gone[d] = tgt[d]; /* its holders all left: the initiator must be made anew */
            ok      = 0;
            continue;
        }
        if (tmx_xtgt_add(iface, qp, uuid, d, 0, 0) == NULL) {
            ok = 0;
        }
    }
    return ok;
}

/* XTGT: the target QPs the peer's initiators to our node use; acknowledged once every one is
 * known to be the peer's (it sends only then). */
static void tmx_xrc_on_xtgt(tmx_iface_t *iface, uint64_t src_uuid, uint64_t dst_ep_id,
                            const tmx_xrc_wire_t *m)
{
    tmx_ep_t *ep                        = tmx_hash_get(&iface->worker->ep_by_id, dst_ep_id);
    uint32_t  gone[TMX_XRC_MAX_DOMAINS] = {0};

    if (ep == NULL || !ep->xrc || ep->iface != iface || ep->remote_uuid != src_uuid) {
        return;
    }
    if (!tmx_xrc_tgts_note(iface, src_uuid, m->tgt, m->ndom, gone)) {
        for (unsigned d = 0; d < iface->xrc_ndom; d++) {
            if (gone[d] != 0) {
                tmx_xrc_send_stale(ep, gone); /* the peer makes a new initiator */
                return;
            }
        }
        return; /* no answer: the peer asks again, and times out */
    }
    tmx_xrc_send_stale(ep, gone); /* all zero: the acknowledgement */
}

/* XTGT_ACK to ep's peer: with gone[] all 0, "your targets are known here"; else the numbers
 * of its initiators' targets that no longer exist. */
static void tmx_xrc_send_stale(tmx_ep_t *ep, const uint32_t *gone)
{
    tmx_iface_t   *iface = ep->iface;
    tmx_xrc_wire_t a;

    memset(&a, 0, sizeof(a));
    a.node = iface->node_key;
    a.ndom = (uint8_t)iface->xrc_ndom;
    for (unsigned d = 0; d < iface->xrc_ndom; d++) {
        a.tgt[d] = gone[d];
    }
    tmx_ep_wireup_send_xrc(iface, ep->ah, ep->remote_ud_qpn, TMX_WIREUP_XTGT_ACK, ep->id,
                           ep->remote_id, &a, sizeof(a));
}

/* XTGT_ACK: the peer knows our targets (the endpoint may connect), or says that some are gone:
 * those initiators are replaced (a new one, connected through ep's peer) and the endpoint, a
 * passive one too, waits for the new ones. */
static void tmx_xrc_on_xtgt_ack(tmx_iface_t *iface, uint64_t src_uuid, uint64_t dst_ep_id,
                                const tmx_xrc_wire_t *m)
{
    tmx_ep_t *ep    = tmx_hash_get(&iface->worker->ep_by_id, dst_ep_id);
    int       stale = 0;

    if (ep == NULL || !ep->xrc || ep->iface != iface || ep->remote_uuid != src_uuid) {
        return;
    }
    for (unsigned d = 0; d < iface->xrc_ndom && d < m->ndom; d++) {
        tmx_xini_t *x = ep->xini[d];

        if (m->tgt[d] == 0 || x == NULL || x->state != TMX_XINI_CONNECTED ||
            x->tgt_qpn != m->tgt[d]) {
            continue; /* not (or no longer) ours */
        }
        tmx_info("XRC initiator qp %u to node %016llx (domain %u): its target qp %u is gone "
                 "(the node's processes that held it exited): a new one is made",
                 x->qp->qp_num, (unsigned long long)x->node, x->dom, x->tgt_qpn);
        x->state = TMX_XINI_FAILED;
        tmx_hash_del(&iface->xini_by_key, tmx_xini_key(x->node, x->dom));
        stale = 1;
    }
    if (stale) {
        ep->xtgt_acked = 0;
        ep->xtgt_sent  = 0;
        if (ep->state == TMX_EP_CONNECTED && ep->passive) {
            ep->state = TMX_EP_CONNECTING; /* replies again once the new ones are up */
        }
        tmx_xrc_try_ready(ep);
        return;
    }
    if (ep->passive || ep->xtgt_acked) {
        return;
    }
    for (unsigned d = 0; d < iface->xrc_ndom && d < m->ndom; d++) {
        if (m->tgt[d] != 0) {
            return; /* a stale notice about initiators replaced already */
        }
    }
    ep->xtgt_acked = 1;
    tmx_xrc_try_ready(ep);
}

void tmx_xrc_on_msg(tmx_iface_t *iface, uint8_t type, uint64_t src_uuid, uint64_t dst_ep_id,
                    uint32_t src_ud_qpn, const uint8_t *dev_addr, size_t dev_addr_len,
                    const void *x, size_t len)
{
    tmx_xrc_wire_t m;
    const uint8_t *blob = (const uint8_t *)x + sizeof(m);

    if (!iface->xrc_on || len < sizeof(m)) {
        return;
    }
    memcpy(&m, x, sizeof(m));
    if (m.ndom != iface->xrc_ndom || m.blob_len > TMX_QP_ADDR_MAX ||
        len < sizeof(m) + m.blob_len) {
        tmx_warn("malformed XRC wire-up message from %016llx dropped",
                 (unsigned long long)src_uuid);
        return;
    }
    switch (type) {
    case TMX_WIREUP_XCONN_REQ:
        tmx_xrc_on_xconn_req(iface, src_uuid, src_ud_qpn, dev_addr, dev_addr_len, &m, blob);
        break;
    case TMX_WIREUP_XCONN_REP:
        tmx_xrc_on_xconn_rep(iface, &m, blob);
        break;
    case TMX_WIREUP_XTGT:
        tmx_xrc_on_xtgt(iface, src_uuid, dst_ep_id, &m);
        break;
    case TMX_WIREUP_XTGT_ACK:
        tmx_xrc_on_xtgt_ack(iface, src_uuid, dst_ep_id, &m);
        break;
    default:
        break;
    }
}

/* ---------------------------------------------------------------- the data path */

tmx_status_t tmx_xrc_post(tmx_ep_t *ep, unsigned dom, tmx_send_wr_t *wr)
{
    tmx_send_wr_t *bad;

    wr->remote_srqn = ep->xsrqn[dom];
    if (wr->opcode == TMX_WR_SEND) {
        /* the peer's endpoint this is for: its SRQ takes every peer's messages */
        wr->opcode   = TMX_WR_SEND_WITH_IMM;
        wr->imm_data = (uint32_t)ep->remote_id;
    }
    return ep->iface->ops->post_send(ep->xini[dom]->qp, wr, &bad);
}

/*
 * The endpoint an XRC message is for: the one its immediate data names, if that is an XRC
 * endpoint of iface and the message came through a target QP (the completion's qp_num, which
 * the device reports: the target takes packets from its own initiator only) that serves the
 * endpoint's peer. Anything else is dropped and counted (stat_xrc_dropped): a process of the
 * job naming another's endpoint would otherwise be taken for that one.
 */
tmx_ep_t *tmx_xrc_rx_ep(tmx_iface_t *iface, const tmx_wc_t *wc)
{
    tmx_worker_t     *w = iface->worker;
    tmx_ep_t         *ep;
    const tmx_xtgt_t *t;

    if (!(wc->wc_flags & TMX_WC_WITH_IMM)) {
        return NULL;
    }
    /* traffic comes in runs from one peer, as for tmx_ep_by_qpn */
    if (iface->xlast_ep != NULL && iface->xlast_id == wc->imm_data &&
        iface->xlast_qpn == wc->qp_num) {
        return iface->xlast_ep;
    }
    ep = tmx_hash_get(&w->ep_by_id, wc->imm_data);
    if (ep == NULL || !ep->xrc || ep->iface != iface) {
        return NULL;
    }
    t = tmx_hash_get(&iface->xtgt_by_qpn, wc->qp_num);
    if (t == NULL || t->uuid != ep->remote_uuid) {
        w->stat_xrc_dropped++;
        if ((w->stat_xrc_dropped & (w->stat_xrc_dropped - 1)) != 0) {
            tmx_debug("XRC message through target qp %u for endpoint %u dropped", wc->qp_num,
                      wc->imm_data); /* said at 1, 2, 4, 8, ... */
        } else if (t != NULL) {
            tmx_warn("XRC message through target qp %u, which serves %016llx, names the "
                     "endpoint of %016llx: dropped (%llu so far)", wc->qp_num,
                     (unsigned long long)t->uuid, (unsigned long long)ep->remote_uuid,
                     (unsigned long long)w->stat_xrc_dropped);
        } else {
            tmx_warn("XRC message through target qp %u, which serves no peer known here, "
                     "names the endpoint of %016llx: dropped (%llu so far)", wc->qp_num,
                     (unsigned long long)ep->remote_uuid,
                     (unsigned long long)w->stat_xrc_dropped);
        }
        return NULL;
    }
    iface->xlast_qpn = wc->qp_num;
    iface->xlast_id  = wc->imm_data;
    iface->xlast_ep  = ep;
    return ep;
}

/* Fails the XRC endpoints of iface that match: a worker (uuid), an initiator (x), or one of
 * its remote SRQs (x and srqn). */
static void tmx_xrc_fail_eps(tmx_iface_t *iface, uint64_t uuid, const tmx_xini_t *x,
                             uint32_t srqn)
{
    tmx_list_t *l, *t;

    tmx_list_for_each_safe(l, t, &iface->worker->eps) {
        tmx_ep_t *ep   = tmx_container_of(l, tmx_ep_t, list);
        int       hit  = 0;

        if (ep->iface != iface || !ep->xrc || ep->state == TMX_EP_FAILED) {
            continue;
        }
        if (x == NULL) {
            hit = ep->remote_uuid == uuid;
        } else {
            for (unsigned d = 0; d < iface->xrc_ndom; d++) {
                hit |= ep->xini[d] == x && (srqn == 0 || ep->xsrqn[d] == srqn);
            }
        }
        if (!hit) {
            continue;
        }
        if (ep->disc_acked ||
            (ep->closing && ep->outstanding == 0 && tmx_list_is_empty(&ep->pending))) {
            tmx_debug("connection to peer %016llx closed", (unsigned long long)ep->remote_uuid);
        } else {
            tmx_warn("connection to peer %016llx lost (XRC)", (unsigned long long)ep->remote_uuid);
        }
        tmx_ep_lost(ep, TMX_ERR_PEER_FAILED);
    }
}

int tmx_xrc_completion_failed(tmx_iface_t *iface, const tmx_wc_t *wc)
{
    tmx_xtgt_t *t;
    tmx_list_t *l;

    if (!iface->xrc_on) {
        return 0;
    }
    t = tmx_hash_get(&iface->xtgt_by_qpn, wc->qp_num);
    if (t != NULL) {
        /* our receive side for a peer's initiator: that peer died. The handle goes now, not at
         * the worker's end: a target lives while a handle does, and its number would stay
         * taken for a dead initiator (later completions of it find nothing: dropped) */
        tmx_debug("XRC target qp %u: %s", t->qpn, tmx_wc_status_string(wc->status));
        tmx_xrc_fail_eps(iface, t->uuid, NULL, 0);
        if (wc->wr_id == TMX_WR_ID_ASYNC_ERROR) {
            if (iface->xlast_ep != NULL && iface->xlast_qpn == t->qpn) {
                iface->xlast_ep = NULL;
            }
            tmx_hash_del(&iface->xtgt_by_qpn, t->qpn);
            tmx_list_del(&t->list);
            iface->ops->qp_destroy(t->qp);
            free(t);
        }
        return 1;
    }
    tmx_list_for_each(l, &iface->xinis) {
        tmx_xini_t *x = tmx_container_of(l, tmx_xini_t, list);

        if (x->qp->qp_num != wc->qp_num) {
            continue;
        }
        if (wc->status == TMX_WC_WR_FLUSH_ERR && wc->wr_id != TMX_WR_ID_ASYNC_ERROR) {
            return 1; /* behind the error that says what happened */
        }
        if (wc->src_qp == 0 || wc->wr_id == TMX_WR_ID_ASYNC_ERROR) {
            if (wc->src_qp == 0 && x->state != TMX_XINI_FAILED) {
                /* the whole initiator: replaced at the next connect to its node */
                tmx_warn("XRC initiator qp %u to node %016llx failed: %s", x->qp->qp_num,
                         (unsigned long long)x->node, tmx_wc_status_string(wc->status));
                x->state = TMX_XINI_FAILED;
                tmx_hash_del(&iface->xini_by_key, tmx_xini_key(x->node, x->dom));
            }
        }
        tmx_xrc_fail_eps(iface, 0, x, wc->src_qp);
        return 1;
    }
    return 0;
}

/* ---------------------------------------------------------------- the worker query */

static tmx_xrc_qp_state_t tmx_xrc_state(tmx_qp_state_t s)
{
    switch (s) {
    case TMX_QPS_RESET: return TMX_XRC_QP_RESET;
    case TMX_QPS_INIT:  return TMX_XRC_QP_INIT;
    case TMX_QPS_RTR:   return TMX_XRC_QP_RTR;
    case TMX_QPS_RTS:   return TMX_XRC_QP_RTS;
    default:            return TMX_XRC_QP_ERR;
    }
}

void tmx_xrc_query(tmx_worker_t *w, tmx_xrc_attr_t *attr)
{
    tmx_xrc_rcv_qp_attr_t *out = attr->rcv_qps;
    unsigned               max = attr->max_rcv_qps;

    memset(attr, 0, sizeof(*attr));
    attr->rcv_qps      = out;
    attr->max_rcv_qps  = max;
    attr->rndv_striped = w->stat_xrc_striped;
    for (int i = 0; i < w->num_ifaces; i++) {
        tmx_iface_t    *iface = &w->ifaces[i];
        tmx_dev_stats_t st;
        tmx_list_t     *l;

        if (iface->ops->dev_query_stats(iface->dev, &st) == TMX_OK) {
            attr->rc_qps     += st.qps_rc;
            attr->ini_qps    += st.qps_xrc_ini;
            attr->tgt_qps    += st.qps_xrc_tgt;
            attr->tgt_opened += st.xrc_tgt_open;
            attr->srqs       += st.srqs;
        }
        if (!iface->xrc_on) {
            continue;
        }
        if (!attr->enabled) {
            attr->enabled = 1;
            attr->domains = iface->xrc_ndom;
            attr->node_id = iface->node_key;
            snprintf(attr->device, sizeof(attr->device), "%s", iface->dev->name);
            for (unsigned d = 0; d < iface->xrc_ndom && d < 4; d++) {
                attr->srq_num[d] = iface->xsrqn[d];
            }
        }
        tmx_list_for_each(l, &iface->xtgts) {
            const tmx_xtgt_t *t = tmx_container_of(l, tmx_xtgt_t, list);

            if (attr->num_rcv_qps < max) {
                tmx_xrc_rcv_qp_attr_t *r = &out[attr->num_rcv_qps];

                r->qp_num  = t->qpn;
                r->state   = tmx_xrc_state(t->qp->state);
                r->domain  = t->dom;
                r->srq_num = iface->xsrqn[t->dom];
                r->peer_id = t->uuid;
                r->created = t->created;
            }
            attr->num_rcv_qps++;
        }
    }
    attr->connections  = attr->rc_qps + attr->ini_qps;
    attr->rcv_contexts = attr->rc_qps + attr->tgt_qps + attr->srqs;
}
