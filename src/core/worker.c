#include "config.h"

#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "core/core.h"
#include "proto/proto.h"
#include "proto/ring.h"
#include "topo/topo.h"
#include "util/log.h"
#include "util/time.h"

/* Worker address blob. All integers little-endian as the host writes them: a worker address
 * only travels between processes of compatible hosts (the device checks reachability). */
typedef struct tmx_addr_hdr {
    uint32_t magic;
    uint16_t version;
    uint16_t num_ifaces;
    uint64_t uuid;
} tmx_addr_hdr_t;

typedef struct tmx_addr_iface {
    char     prov[16];
    uint32_t ud_qpn;
    uint16_t dev_addr_len;
    uint16_t reserved;
    /* dev_addr_len bytes follow */
} tmx_addr_iface_t;

#define TMX_RX_BUFS  256
#define TMX_UD_BUFS  64
#define TMX_TX_BUFS  64
#define TMX_CQ_SIZE  4096
#define TMX_POLL_MAX 32
/* Largest eager message on any device: every interface keeps TMX_RX_BUFS + TMX_TX_BUFS
 * buffers of the eager size (320 MiB at this limit). */
#define TMX_EAGER_LIMIT ((size_t)1 << 20)

/* The largest eager payload dev can carry. A device that moves data only inside our calls
 * (TMX_DEV_CAP_MANUAL_PROGRESS) must get each eager message out whole at the post, or a send
 * reported done could wait for progress the sender never makes: there an eager message is
 * one inline SEND, header included. */
static size_t tmx_iface_eager_limit(const tmx_dev_t *dev)
{
    size_t hdr   = sizeof(tmx_proto_rts_hdr_t);
    size_t limit = TMX_EAGER_LIMIT;
    size_t dev_max;

    dev_max = (dev->attr.caps & TMX_DEV_CAP_MANUAL_PROGRESS) ? dev->attr.max_inline
                                                            : dev->attr.max_msg_sz;
    if (dev_max != 0 && dev_max < hdr + limit) {
        limit = dev_max > hdr ? dev_max - hdr : 0;
    }
    return limit;
}

int tmx_worker_check(tmx_worker_t *w)
{
    return w != NULL && w->magic == TMX_MAGIC_WORKER;
}

static tmx_status_t tmx_iface_post_rx(tmx_iface_t *iface, unsigned idx)
{
    tmx_sge_t     sge = {.addr   = (uintptr_t)(iface->rx_bufs + (size_t)idx * iface->rx_size),
                         .length = (uint32_t)iface->rx_size,
                         .lkey   = iface->rx_mr->lkey};
    tmx_recv_wr_t wr  = {.wr_id = TMX_WRID(TMX_WRID_RX, idx), .sg_list = &sge, .num_sge = 1};
    tmx_recv_wr_t *bad;

    /* the basic SRQ's buffers first, then each XRC SRQ's (xrc.c) */
    return iface->ops->srq_post_recv(idx < iface->rx_basic ? iface->srq
                                                          : tmx_xrc_rx_srq(iface, idx),
                                     &wr, &bad);
}

/* Posts again the receive buffers that completions consumed. Done when a poll finds nothing
 * (off the path from an arrival to its completion) and at least rx_lazy are waiting, or once a
 * quarter of them are waiting, and before the worker sleeps; the device holds arrivals back
 * while it has no receive, so nothing is lost meanwhile. rx_lazy (16 of 256 buffers) makes a
 * ping-pong, whose every poll after a message finds nothing, post one chain of 16 instead of
 * 16 posts of one (a post costs a provider call and, on rxe, a lock and a queue check). */
static void tmx_iface_repost_rx(tmx_iface_t *iface)
{
    enum { BATCH = 32 };
    tmx_sge_t      sge[BATCH];
    tmx_recv_wr_t  wr[BATCH], *bad;

    /* in chains of one SRQ's buffers: one post for many (a provider's post has a cost of its
     * own per call: rxe's takes a lock and checks the queue each time) */
    while (iface->rx_repost_count > 0) {
        unsigned   first = iface->rx_repost[iface->rx_repost_count - 1];
        tmx_srq_t *srq   = first < iface->rx_basic ? iface->srq : tmx_xrc_rx_srq(iface, first);
        int        n     = 0;

        while (n < BATCH && iface->rx_repost_count > 0) {
            unsigned idx = iface->rx_repost[iface->rx_repost_count - 1];

            if ((idx < iface->rx_basic ? iface->srq : tmx_xrc_rx_srq(iface, idx)) != srq) {
                break;
            }
            iface->rx_repost_count--;
            sge[n] = (tmx_sge_t){.addr   = (uintptr_t)(iface->rx_bufs + (size_t)idx * iface->rx_size),
                                 .length = (uint32_t)iface->rx_size,
                                 .lkey   = iface->rx_mr->lkey};
            wr[n]  = (tmx_recv_wr_t){.wr_id   = TMX_WRID(TMX_WRID_RX, idx),
                                     .sg_list = &sge[n],
                                     .num_sge = 1};
            if (n > 0) {
                wr[n - 1].next = &wr[n];
            }
            n++;
        }
        bad = NULL;
        if (iface->ops->srq_post_recv(srq, wr, &bad) != TMX_OK) {
            for (tmx_recv_wr_t *b = bad != NULL ? bad : wr; b != NULL; b = b->next) {
                tmx_error("could not repost receive buffer %u",
                          (unsigned)TMX_WRID_VAL(b->wr_id));
            }
        }
    }
}

static tmx_status_t tmx_iface_post_ud_rx(tmx_iface_t *iface, unsigned idx)
{
    tmx_sge_t     sge = {.addr   = (uintptr_t)(iface->ud_bufs + (size_t)idx * iface->ud_size),
                         .length = (uint32_t)iface->ud_size,
                         .lkey   = iface->ud_mr->lkey};
    tmx_recv_wr_t wr  = {.wr_id = TMX_WRID(TMX_WRID_UD_RX, idx), .sg_list = &sge, .num_sge = 1};
    tmx_recv_wr_t *bad;

    return iface->ops->post_recv(iface->ud_qp, &wr, &bad);
}

static tmx_status_t tmx_iface_reg(tmx_iface_t *iface, size_t size, uint8_t **buf_p,
                                  tmx_mr_t **mr_p)
{
    uint8_t     *buf;
    tmx_status_t status;

    /* Anonymous pages, zero and made only when first touched: the soft device receives in
     * place and touches few of its receive buffers (memset here made all 5 MiB of them, a
     * rank's largest private memory in a 64-rank job); a verbs registration pins them. */
    buf = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (buf == MAP_FAILED) {
        return TMX_ERR_NO_MEMORY;
    }
    status = iface->ops->mr_reg(iface->pd, buf, size, TMX_ACCESS_LOCAL_WRITE, mr_p);
    if (status != TMX_OK) {
        munmap(buf, size);
        return status;
    }
    *buf_p = buf;
    return TMX_OK;
}

static void tmx_iface_cleanup(tmx_iface_t *iface)
{
    const tmx_prov_ops_t *ops = iface->ops;

    if (iface->ud_qp != NULL) {
        ops->qp_destroy(iface->ud_qp);
    }
    if (iface->tm_on) {
        tmx_tm_cleanup(&iface->tm);
    }
    tmx_xrc_iface_cleanup(iface);
    if (iface->srq != NULL) {
        ops->srq_destroy(iface->srq);
    }
    if (iface->cq != NULL) {
        ops->cq_destroy(iface->cq);
    }
    if (iface->channel != NULL) {
        ops->channel_destroy(iface->channel);
    }
    if (iface->rx_mr != NULL) {
        ops->mr_dereg(iface->rx_mr);
    }
    if (iface->ud_mr != NULL) {
        ops->mr_dereg(iface->ud_mr);
    }
    if (iface->tx_mr != NULL) {
        ops->mr_dereg(iface->tx_mr);
    }
    tmx_mem_stage_free(iface);
    if (iface->rx_bufs != NULL) {
        munmap(iface->rx_bufs, iface->rx_count * iface->rx_size);
    }
    if (iface->ud_bufs != NULL) {
        munmap(iface->ud_bufs, iface->ud_count * iface->ud_size);
    }
    if (iface->tx_bufs != NULL) {
        munmap(iface->tx_bufs, iface->tx_count * iface->tx_size);
    }
    free(iface->tx_free);
    free(iface->rx_repost);
    if (iface->pd != NULL) {
        ops->pd_free(iface->pd);
    }
    ops->dev_close(iface->dev);
    memset(iface, 0, sizeof(*iface));
}

static tmx_status_t tmx_iface_init(tmx_worker_t *w, tmx_iface_t *iface, tmx_dev_t *dev)
{
    const tmx_prov_ops_t *ops = dev->prov->ops;
    tmx_srq_init_attr_t   srq_attr;
    tmx_qp_init_attr_t    qp_attr;
    tmx_qp_attr_t         mod;
    size_t                eager_limit;
    tmx_status_t          status;

    iface->worker = w;
    iface->dev    = dev;
    iface->ops    = ops;
    if (!(dev->attr.caps & TMX_DEV_CAP_RC) || !(dev->attr.caps & TMX_DEV_CAP_UD) ||
        !(dev->attr.caps & TMX_DEV_CAP_SRQ)) {
        tmx_warn("device %s lacks rc/ud/srq, not used", dev->name);
        status = TMX_ERR_UNSUPPORTED;
        goto err;
    }
    iface->max_inline = dev->attr.max_inline;
    iface->max_msg    = dev->attr.max_msg_sz;
    eager_limit = tmx_iface_eager_limit(dev);
    if (w->eager_max > eager_limit) {
        tmx_warn("TMX_EAGER_MAX=%zu lowered to %zu: the largest eager message device %s "
                 "carries (larger ones go by rendezvous)",
                 w->eager_max, eager_limit, dev->name);
        w->eager_max = eager_limit;
    }
    /* the endpoints' QPs take the device's depth then (ep.c, tmx_ep_sq_depth) */
    if (dev->attr.max_qp_wr != 0 && w->ctx->cfg.send_queue > dev->attr.max_qp_wr) {
        tmx_warn("TMX_SEND_QUEUE=%u lowered to %u: the deepest send queue device %s makes",
                 w->ctx->cfg.send_queue, dev->attr.max_qp_wr, dev->name);
    }

    status = ops->pd_alloc(dev, &iface->pd);
    if (status != TMX_OK) {
        goto err;
    }
    status = ops->cq_create(dev, TMX_CQ_SIZE, &iface->cq);
    if (status != TMX_OK) {
        goto err;
    }
    /* A device that cannot wake a sleeper still works: waits then spin or yield. */
    if (ops->channel_create(dev, &iface->channel) != TMX_OK) {
        tmx_debug("device %s cannot wake a sleeping worker: its waits poll", dev->name);
        iface->channel = NULL;
    }

    iface->rx_count = TMX_RX_BUFS;
    if (dev->attr.max_srq_wr != 0 && dev->attr.max_srq_wr < iface->rx_count) {
        iface->rx_count = dev->attr.max_srq_wr;
    }
    memset(&srq_attr, 0, sizeof(srq_attr));
    srq_attr.type    = TMX_SRQT_BASIC;
    srq_attr.max_wr  = iface->rx_count;
    srq_attr.max_sge = 1;
    srq_attr.cq      = iface->cq;
    if ((dev->attr.caps & TMX_DEV_CAP_TM) && w->ctx->cfg.tm_offload != 0) {
        srq_attr.type         = TMX_SRQT_TM;
        srq_attr.max_num_tags = dev->attr.tm.max_num_tags;
        srq_attr.max_ops      = dev->attr.tm.max_ops;
        status = ops->srq_create(iface->pd, &srq_attr, &iface->srq);
        if (status == TMX_OK) {
            status = tmx_tm_init(&iface->tm, ops, iface->pd, iface->srq, srq_attr.max_num_tags,
                                 srq_attr.max_ops, w->ctx->cfg.tm_thresh,
                                 TMX_WRID(TMX_WRID_TM_RECV, 0), TMX_WRID(TMX_WRID_TM_OP, 0));
            if (status != TMX_OK) {
                goto err;
            }
            iface->tm_on = 1;
            tmx_info("device %s: tag-matching offload on (%u tags, %u ops outstanding)",
                     dev->name, srq_attr.max_num_tags, srq_attr.max_ops);
        } else {
            tmx_warn("device %s: creating its tag-matching SRQ failed (%s): matching in "
                     "software", dev->name, tmx_status_string(status));
            srq_attr.type = TMX_SRQT_BASIC;
        }
    } else if (w->ctx->cfg.tm_offload == 1) {
        tmx_warn("TMX_TM_OFFLOAD=yes: device %s has no tag-matching SRQ: matching in software",
                 dev->name);
    }
    if (!iface->tm_on) {
        if (dev->attr.caps & TMX_DEV_CAP_RECV_INPLACE) {
            srq_attr.flags = TMX_SRQ_F_INPLACE; /* tmx_proto_rx reads wc.data where given */
        }
        status = ops->srq_create(iface->pd, &srq_attr, &iface->srq);
        if (status != TMX_OK) {
            goto err;
        }
    }
    /* XRC domains and their SRQs, where the device and TMX_XRC allow; it shares the receive
     * buffers out (rx_basic, rx_per_dom) */
    status = tmx_xrc_iface_init(iface);
    if (status != TMX_OK) {
        goto err;
    }
    /* a message with TM starts with the device's header (tmx_tmh_t) */
    iface->rx_size = (sizeof(tmx_tmh_t) + sizeof(tmx_proto_rts_hdr_t) + w->eager_max + 63) &
                     ~(size_t)63;
    status = tmx_iface_reg(iface, iface->rx_count * iface->rx_size, &iface->rx_bufs,
                           &iface->rx_mr);
    if (status != TMX_OK) {
        goto err;
    }
    /* with XRC the plain SRQ may hold 16 buffers only (xrc.c): each one is posted again */
    iface->rx_lazy = iface->xrc_ndom > 0 ? 1 : iface->rx_count / 16 > 16 ? 16
                                               : iface->rx_count / 16 > 0 ? iface->rx_count / 16
                                                                          : 1;
    iface->rx_repost = malloc(iface->rx_count * sizeof(*iface->rx_repost));
    if (iface->rx_repost == NULL) {
        status = TMX_ERR_NO_MEMORY;
        goto err;
    }
    for (unsigned i = 0; i < iface->rx_count; i++) {
        status = tmx_iface_post_rx(iface, i);
        if (status != TMX_OK) {
            goto err;
        }
    }

    iface->tx_count = TMX_TX_BUFS;
    iface->tx_size  = iface->rx_size;
    status = tmx_iface_reg(iface, iface->tx_count * iface->tx_size, &iface->tx_bufs,
                           &iface->tx_mr);
    if (status != TMX_OK) {
        goto err;
    }
    iface->tx_free = malloc(iface->tx_count * sizeof(*iface->tx_free));
    if (iface->tx_free == NULL) {
        status = TMX_ERR_NO_MEMORY;
        goto err;
    }
    for (unsigned i = 0; i < iface->tx_count; i++) {
        iface->tx_free[iface->tx_free_top++] = i;
    }

    /* The UD QP carries connection wire-up only. */
    memset(&qp_attr, 0, sizeof(qp_attr));
    qp_attr.type        = TMX_QPT_UD;
    qp_attr.send_cq     = iface->cq;
    qp_attr.recv_cq     = iface->cq;
    qp_attr.max_send_wr = 64;
    qp_attr.max_recv_wr = TMX_UD_BUFS;
    status = ops->qp_create(iface->pd, &qp_attr, &iface->ud_qp);
    if (status != TMX_OK) {
        goto err;
    }
    iface->ud_count = TMX_UD_BUFS;
    iface->ud_size  = dev->attr.max_ud_msg < 1024 ? dev->attr.max_ud_msg : 1024;
    status = tmx_iface_reg(iface, iface->ud_count * iface->ud_size, &iface->ud_bufs,
                           &iface->ud_mr);
    if (status != TMX_OK) {
        goto err;
    }
    for (unsigned i = 0; i < iface->ud_count; i++) {
        status = tmx_iface_post_ud_rx(iface, i);
        if (status != TMX_OK) {
            goto err;
        }
    }
    memset(&mod, 0, sizeof(mod));
    for (tmx_qp_state_t s = TMX_QPS_INIT; s <= TMX_QPS_RTS; s++) {
        mod.state = s;
        status    = ops->qp_modify(iface->ud_qp, &mod, TMX_QP_ATTR_STATE);
        if (status != TMX_OK) {
            goto err;
        }
    }
    iface->ud_qpn       = iface->ud_qp->qp_num;
    iface->dev_addr_len = sizeof(iface->dev_addr);
    status = ops->dev_get_addr(dev, iface->dev_addr, &iface->dev_addr_len);
    if (status != TMX_OK) {
        goto err;
    }
    return TMX_OK;

err:
    tmx_error("device %s setup failed: %s", dev->name, tmx_status_string(status));
    tmx_iface_cleanup(iface);
    return status;
}

/* The worker's fd (tmx_worker_get_efd): an epoll set of every device's channel and of the
 * worker's own eventfd. When a device has no channel, or a step fails, the worker has none
 * (epfd -1): its waits spin or yield, and tmx_worker_get_efd says unsupported. */
static void tmx_worker_sleep_init(tmx_worker_t *w)
{
    struct epoll_event ev = {.events = EPOLLIN};

    w->epfd = -1;
    w->evfd = -1;
    for (int i = 0; i < w->num_ifaces; i++) {
        if (w->ifaces[i].channel == NULL) {
            return;
        }
    }
    w->epfd = epoll_create1(EPOLL_CLOEXEC);
    w->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (w->epfd < 0 || w->evfd < 0 || epoll_ctl(w->epfd, EPOLL_CTL_ADD, w->evfd, &ev) != 0) {
        goto err;
    }
    for (int i = 0; i < w->num_ifaces; i++) {
        if (epoll_ctl(w->epfd, EPOLL_CTL_ADD, w->ifaces[i].channel->fd, &ev) != 0) {
            goto err;
        }
    }
    return;

err:
    tmx_warn("worker wait fd setup failed: %s; blocking calls poll instead of sleeping",
             strerror(errno));
    if (w->epfd >= 0) {
        close(w->epfd);
    }
    if (w->evfd >= 0) {
        close(w->evfd);
    }
    w->epfd = -1;
    w->evfd = -1;
}

static uint64_t tmx_worker_new_uuid(void)
{
    struct timespec ts;
    uint64_t        seed;

    clock_gettime(CLOCK_REALTIME, &ts);
    seed = ((uint64_t)getpid() << 32) ^ (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 20) ^
           (uint64_t)(uintptr_t)&seed;
    seed = tmx_hash_u64(seed);
    return seed != 0 ? seed : 1; /* 0 means "any sender" to the tag engine */
}

TMX_API tmx_status_t tmx_worker_create(tmx_context_h ctx, const tmx_worker_params_t *params,
                                       tmx_worker_h *worker_p)
{
    tmx_worker_t *w;
    tmx_status_t  status;

    if (ctx == NULL || worker_p == NULL) {
        return TMX_ERR_INVALID_PARAM;
    }
    if (ctx->magic != TMX_MAGIC_CONTEXT) {
        return TMX_ERR_INVALID_HANDLE;
    }
    if (params != NULL &&
        ((params->field_mask &
          ~(uint64_t)(TMX_WORKER_PARAM_THREAD_MODE | TMX_WORKER_PARAM_ERR_HANDLER)) != 0 ||
         ((params->field_mask & TMX_WORKER_PARAM_THREAD_MODE) &&
          (unsigned)params->thread_mode > TMX_THREAD_MODE_MULTI) ||
         ((params->field_mask & TMX_WORKER_PARAM_ERR_HANDLER) && params->err_handler == NULL))) {
        return TMX_ERR_INVALID_PARAM;
    }
    w = calloc(1, sizeof(*w));
    if (w == NULL) {
        return TMX_ERR_NO_MEMORY;
    }
    w->ctx         = ctx;
    w->thread_mode = TMX_THREAD_MODE_SINGLE;
    if (params != NULL && (params->field_mask & TMX_WORKER_PARAM_THREAD_MODE)) {
        w->thread_mode = params->thread_mode;
    }
    if (params != NULL && (params->field_mask & TMX_WORKER_PARAM_ERR_HANDLER)) {
        w->err_handler     = params->err_handler;
        w->err_handler_arg = params->err_handler_arg;
    }
    pthread_mutex_init(&w->lock, NULL);
    w->uuid          = tmx_worker_new_uuid();
    w->eager_max     = ctx->cfg.eager_max;
    w->unexp_budget  = ctx->cfg.unexp_budget;
    w->eager_credits = ctx->cfg.eager_credits;
    w->next_ep_id    = 1;
    w->next_sreq_id  = 1;
    tmx_list_init(&w->eps);
    tmx_list_init(&w->pending_eps);
    tmx_list_init(&w->claimed);
    tmx_list_init(&w->failures);
    tmx_list_init(&w->mems);
    tmx_list_init(&w->ring_polled);

    status = tmx_tag_engine_init(&w->tm, ctx->cfg.tag_hash_bits);
    if (status != TMX_OK) {
        goto err_free;
    }
    if (tmx_hash_init(&w->ep_by_qpn, 64) != TMX_OK || tmx_hash_init(&w->ep_by_id, 64) != TMX_OK ||
        tmx_hash_init(&w->passive_by_key, 64) != TMX_OK ||
        tmx_hash_init(&w->sreq_by_id, 256) != TMX_OK ||
        tmx_hash_init(&w->failed_peers, 16) != TMX_OK) {
        status = TMX_ERR_NO_MEMORY;
        goto err_hash;
    }
    status = tmx_mpool_init(&w->req_mp, sizeof(tmx_request_t), 64, 128, 0, "requests");
    if (status != TMX_OK) {
        goto err_hash;
    }
    status = tmx_mpool_init(&w->msg_mp, sizeof(tmx_message_t) + TMX_MSG_POOL_DATA, 64, 16, 0,
                            "unexpected messages");
    if (status != TMX_OK) {
        tmx_mpool_cleanup(&w->req_mp);
        goto err_hash;
    }

    for (int p = 0; p < ctx->num_provs && w->num_ifaces < TMX_MAX_IFACES; p++) {
        const tmx_prov_t *prov = ctx->provs[p];
        tmx_dev_t        *devs[TMX_MAX_IFACES];
        int               num = 0;

        if (prov->ops->dev_open(prov, &ctx->cfg, devs, TMX_MAX_IFACES - w->num_ifaces, &num) !=
            TMX_OK) {
            tmx_debug("provider %s has no usable device", prov->name);
            continue;
        }
        for (int d = 0; d < num; d++) {
            if (tmx_iface_init(w, &w->ifaces[w->num_ifaces], devs[d]) == TMX_OK) {
                w->num_ifaces++;
            }
        }
    }
    if (w->num_ifaces == 0) {
        tmx_error("no usable device: every provider failed or found none");
        status = TMX_ERR_NO_DEVICE;
        goto err_mpool;
    }
    /* A receive can sit in one device's list only: with several devices, a message through
     * another could belong to a receive that device holds, so they all match in software. */
    if (w->num_ifaces == 1 && w->ifaces[0].tm_on) {
        w->tm_iface = &w->ifaces[0];
    } else {
        for (int i = 0; i < w->num_ifaces; i++) {
            if (w->ifaces[i].tm_on) {
                tmx_info("device %s: tag list unused: the worker has %d devices",
                         w->ifaces[i].dev->name, w->num_ifaces);
            }
        }
    }
    tmx_worker_sleep_init(w);
    w->magic = TMX_MAGIC_WORKER;
    ctx->num_workers++;
    *worker_p = w;
    return TMX_OK;

err_mpool:
    tmx_mpool_cleanup(&w->msg_mp);
    tmx_mpool_cleanup(&w->req_mp);
err_hash:
    tmx_hash_cleanup(&w->ep_by_qpn);
    tmx_hash_cleanup(&w->ep_by_id);
    tmx_hash_cleanup(&w->passive_by_key);
    tmx_hash_cleanup(&w->sreq_by_id);
    tmx_hash_cleanup(&w->failed_peers);
    tmx_tag_engine_cleanup(&w->tm);
err_free:
    pthread_mutex_destroy(&w->lock);
    free(w);
    return status;
}

static void tmx_worker_drop_unexpected(tmx_worker_t *w)
{
    tmx_tag_unexp_t *u;

    while ((u = tmx_tag_unexp_match(&w->tm, 0, 0, 0, 1)) != NULL) {
        tmx_message_t *msg = tmx_container_of(u, tmx_message_t, unexp);
        msg->magic         = TMX_MAGIC_DEAD;
        if (!msg->pooled) {
            free(msg); /* pooled ones die with the pool */
        }
    }
    while (!tmx_list_is_empty(&w->claimed)) {
        tmx_message_t *msg = tmx_container_of(tmx_list_pop_head(&w->claimed), tmx_message_t,
                                              claimed_link);
        msg->magic         = TMX_MAGIC_DEAD;
        if (!msg->pooled) {
            free(msg);
        }
    }
}

TMX_API tmx_status_t tmx_worker_destroy(tmx_worker_h w)
{
    if (w == NULL) {
        return TMX_ERR_INVALID_PARAM;
    }
    if (w->magic != TMX_MAGIC_WORKER) {
        return TMX_ERR_INVALID_HANDLE;
    }
    tmx_worker_lock(w);
    if (w->ring_stats.sent + w->ring_stats.received > 0) {
        tmx_info("eager-RDMA rings: %llu messages sent, %llu received; sends by the queue: "
                 "%llu (ring full), %llu (receiver asleep); %llu wake notices; %llu credit "
                 "reports waited for the send queue",
                 (unsigned long long)w->ring_stats.sent,
                 (unsigned long long)w->ring_stats.received,
                 (unsigned long long)w->ring_stats.full, (unsigned long long)w->ring_stats.asleep,
                 (unsigned long long)w->ring_stats.wakes,
                 (unsigned long long)w->ring_stats.report_waits);
    }
    if (w->compact_tx + w->compact_rx > 0) {
        tmx_info("compact eager messages (no header): %llu sent, %llu received",
                 (unsigned long long)w->compact_tx, (unsigned long long)w->compact_rx);
    }
    if (w->stat_credit_msgs + w->num_credit_stalls > 0) {
        tmx_info("eager credits: %llu returned alone (CREDIT messages), %llu send attempts "
                 "found none (a queued send counts at each retry; window %u, returned alone at "
                 "%u owed)", (unsigned long long)w->stat_credit_msgs,
                 (unsigned long long)w->num_credit_stalls, w->eager_credits,
                 tmx_proto_credit_threshold(w));
    }
    if (w->stat_sleeps > 0) {
        tmx_info("blocking waits slept %llu times, %llu of them until the time limit; "
                 "TMX_WAIT=auto's spin at most %u us", (unsigned long long)w->stat_sleeps,
                 (unsigned long long)w->stat_sleep_timeouts,
                 w->spin_us_max > w->ctx->cfg.wait_spin_us ? w->spin_us_max
                                                            : w->ctx->cfg.wait_spin_us);
    }
    w->destroying = 1;
    tmx_ep_close_all(w);
    tmx_worker_drop_unexpected(w);
    if (w->reg_waits > 0) {
        tmx_info("%llu more registration attempts of rendezvous sends were refused (device "
                 "limit) since the last report", (unsigned long long)w->reg_waits);
    }
    if (w->read_waits > w->read_waits_logged) {
        tmx_info("rendezvous reads waited for room in a send queue: %llu posts refused in all "
                 "(retried)", (unsigned long long)w->read_waits);
    }
    while (!tmx_list_is_empty(&w->failures)) {
        free(tmx_container_of(tmx_list_pop_head(&w->failures), tmx_peer_failure_t, list));
    }
    tmx_mem_cleanup(w);
    for (int i = 0; i < w->num_ifaces; i++) {
        tmx_iface_cleanup(&w->ifaces[i]);
    }
    if (w->epfd >= 0) {
        close(w->epfd);
        close(w->evfd);
    }
    w->magic = TMX_MAGIC_DEAD;
    tmx_worker_unlock(w);
    /* Requests the user never freed live in the pool; they die with it. */
    tmx_mpool_cleanup(&w->req_mp);
    tmx_mpool_cleanup(&w->msg_mp);
    tmx_hash_cleanup(&w->ep_by_qpn);
    tmx_hash_cleanup(&w->ep_by_id);
    tmx_hash_cleanup(&w->passive_by_key);
    tmx_hash_cleanup(&w->sreq_by_id);
    tmx_hash_cleanup(&w->failed_peers);
    tmx_tag_engine_cleanup(&w->tm);
    pthread_mutex_destroy(&w->lock);
    w->ctx->num_workers--;
    tmx_core_bury(w);
    return TMX_OK;
}

/* API 1.6: what tmx_ep_close's FLUSH does before its disconnect, for every endpoint of the
 * worker at once (ep.c, tmx_ep_flush_all), so that n peers that do not progress cost one
 * TMX_PEER_TIMEOUT, not n; tmx_worker_destroy then disconnects them all at once too. */
TMX_API tmx_status_t tmx_worker_flush(tmx_worker_h w)
{
    tmx_status_t status;

    if (w == NULL) {
        return TMX_ERR_INVALID_PARAM;
    }
    if (w->magic != TMX_MAGIC_WORKER) {
        return TMX_ERR_INVALID_HANDLE;
    }
    tmx_worker_lock(w);
    status = tmx_ep_flush_all(w);
    tmx_worker_unlock(w);
    return status;
}

TMX_API tmx_status_t tmx_worker_get_address(tmx_worker_h w, void **address_p, size_t *length_p)
{
    size_t          len = sizeof(tmx_addr_hdr_t);
    uint8_t        *buf, *p;
    tmx_addr_hdr_t  hdr;

    if (w == NULL || address_p == NULL || length_p == NULL) {
        return TMX_ERR_INVALID_PARAM;
    }
    if (w->magic != TMX_MAGIC_WORKER) {
        return TMX_ERR_INVALID_HANDLE;
    }
    for (int i = 0; i < w->num_ifaces; i++) {
        len += sizeof(tmx_addr_iface_t) + w->ifaces[i].dev_addr_len;
    }
    buf = malloc(len);
    if (buf == NULL) {
        return TMX_ERR_NO_MEMORY;
    }
    hdr.magic      = TMX_ADDR_MAGIC;
    hdr.version    = TMX_ADDR_VERSION;
    hdr.num_ifaces = (uint16_t)w->num_ifaces;
    hdr.uuid       = w->uuid;
    memcpy(buf, &hdr, sizeof(hdr));
    p = buf + sizeof(hdr);
    for (int i = 0; i < w->num_ifaces; i++) {
        tmx_addr_iface_t ia;
        memset(&ia, 0, sizeof(ia));
        snprintf(ia.prov, sizeof(ia.prov), "%s", w->ifaces[i].dev->prov->name);
        ia.ud_qpn       = w->ifaces[i].ud_qpn;
        ia.dev_addr_len = (uint16_t)w->ifaces[i].dev_addr_len;
        memcpy(p, &ia, sizeof(ia));
        p += sizeof(ia);
        memcpy(p, w->ifaces[i].dev_addr, ia.dev_addr_len);
        p += ia.dev_addr_len;
    }
    *address_p = buf;
    *length_p  = len;
    return TMX_OK;
}

TMX_API void tmx_worker_release_address(tmx_worker_h w, void *address)
{
    (void)w;
    free(address);
}

/* Of two devices that both reach a peer, a is preferred when it is nearer to our CPUs
 * (src/topo: by NUMA distance; equals keep the one found first). The topology is loaded only
 * here, when there is a choice. */
static int tmx_worker_nearer(tmx_worker_t *w, const tmx_iface_t *a, const tmx_iface_t *b)
{
    const tmx_topo_t *topo = tmx_topo_get();
    int               numa[2];

    if (topo == NULL) {
        return 0;
    }
    numa[0] = b->dev->attr.numa_node;
    numa[1] = a->dev->attr.numa_node;
    return tmx_topo_nearest(topo, tmx_topo_self_numa(&w->ctx->cfg), numa, 2) == 1;
}

/* Compact address (API 1.3): the same fields as the blob, packed for channels that carry a
 * small fixed-size name (MPI's modex through libfabric: FI_NAME_MAX, 64 bytes).
 *   u8 'z', u8 TMX_ADDR_COMPACT_VERSION, u8 num_ifaces, u64 uuid,
 *   per interface: u8 n, n bytes of provider name, LEB128 ud_qpn, u8 dev_addr_len, u8 m, then
 *   m bytes of dev_addr where a zero byte is followed by the count (1..255) of zeros it
 *   stands for. Expanded back into the blob by tmx_worker_addr_resolve. */
#define TMX_ADDR_COMPACT_MAGIC   0x7a /* not 0x54, the first byte of TMX_ADDR_MAGIC */
#define TMX_ADDR_FULL_MAX                                                                         \
    (sizeof(tmx_addr_hdr_t) + TMX_MAX_IFACES * (sizeof(tmx_addr_iface_t) + TMX_DEV_ADDR_MAX))
#define TMX_ADDR_COMPACT_VERSION 0xc1

/* Appends len bytes of src to dst[*n] within cap, zero runs encoded; 0 when it does not fit. */
static int tmx_addr_zrle_put(uint8_t *dst, size_t cap, size_t *n, const uint8_t *src, size_t len)
{
    for (size_t i = 0; i < len;) {
        if (*n >= cap) {
            return 0;
        }
        if (src[i] != 0) {
            dst[(*n)++] = src[i++];
            continue;
        }
        size_t run = 0;
        while (i + run < len && src[i + run] == 0 && run < 255) {
            run++;
        }
        if (*n + 2 > cap) {
            return 0;
        }
        dst[(*n)++] = 0;
        dst[(*n)++] = (uint8_t)run;
        i += run;
    }
    return 1;
}

TMX_API tmx_status_t tmx_worker_get_address_compact(tmx_worker_h w, void **address_p,
                                                    size_t *length_p)
{
    /* worst case per byte is one byte; zero runs of one take two */
    size_t       cap = 3 + 8 + TMX_MAX_IFACES * (1 + 16 + 5 + 2 + 2 * TMX_DEV_ADDR_MAX);
    size_t       n   = 0;
    uint8_t     *buf;

    if (w == NULL || address_p == NULL || length_p == NULL) {
        return TMX_ERR_INVALID_PARAM;
    }
    if (w->magic != TMX_MAGIC_WORKER) {
        return TMX_ERR_INVALID_HANDLE;
    }
    buf = malloc(cap);
    if (buf == NULL) {
        return TMX_ERR_NO_MEMORY;
    }
    buf[n++] = TMX_ADDR_COMPACT_MAGIC;
    buf[n++] = TMX_ADDR_COMPACT_VERSION;
    buf[n++] = (uint8_t)w->num_ifaces;
    memcpy(buf + n, &w->uuid, sizeof(w->uuid));
    n += sizeof(w->uuid);
    for (int i = 0; i < w->num_ifaces; i++) {
        const tmx_iface_t *iface = &w->ifaces[i];
        size_t             plen  = strnlen(iface->dev->prov->name, 15);
        uint32_t           qpn   = iface->ud_qpn;
        size_t             mpos;

        buf[n++] = (uint8_t)plen;
        memcpy(buf + n, iface->dev->prov->name, plen);
        n += plen;
        do {
            buf[n++] = (uint8_t)((qpn & 0x7f) | (qpn > 0x7f ? 0x80 : 0));
            qpn >>= 7;
        } while (qpn != 0);
        buf[n++] = (uint8_t)iface->dev_addr_len;
        mpos     = n++;
        if (!tmx_addr_zrle_put(buf, mpos + 1 + 255, &n, iface->dev_addr, iface->dev_addr_len)) {
            free(buf);
            return TMX_ERR_INTERNAL; /* dev_addr_len <= TMX_DEV_ADDR_MAX < 256 */
        }
        buf[mpos] = (uint8_t)(n - mpos - 1);
    }
    *address_p = buf;
    *length_p  = n;
    return TMX_OK;
}

/* Expands a compact address into the blob form in out (cap bytes); 0 when it is not a
 * well-formed compact address. Every length is checked against the input. */
static int tmx_addr_expand_compact(const uint8_t *p, size_t len, uint8_t *out, size_t cap,
                           size_t *out_len)
{
    const uint8_t *end = p + len;
    tmx_addr_hdr_t hdr;
    size_t         n = sizeof(hdr);

    if (len < 3 + 8 || p[0] != TMX_ADDR_COMPACT_MAGIC || p[1] != TMX_ADDR_COMPACT_VERSION ||
        p[2] == 0 || p[2] > TMX_MAX_IFACES) {
        return 0;
    }
    memset(&hdr, 0, sizeof(hdr));
    hdr.magic      = TMX_ADDR_MAGIC;
    hdr.version    = TMX_ADDR_VERSION;
    hdr.num_ifaces = p[2];
    memcpy(&hdr.uuid, p + 3, sizeof(hdr.uuid));
    p += 3 + 8;
    for (unsigned i = 0; i < hdr.num_ifaces; i++) {
        tmx_addr_iface_t ia;
        uint32_t         qpn = 0;
        unsigned         shift;
        size_t           plen, m, d = 0;

        memset(&ia, 0, sizeof(ia));
        if (p >= end || (plen = *p++) >= sizeof(ia.prov) || (size_t)(end - p) < plen) {
            return 0;
        }
        memcpy(ia.prov, p, plen);
        p += plen;
        for (shift = 0;; shift += 7) {
            if (p >= end || shift > 28) {
                return 0;
            }
            qpn |= (uint32_t)(*p & 0x7f) << shift;
            if ((*p++ & 0x80) == 0) {
                break;
            }
        }
        ia.ud_qpn = qpn;
        if ((size_t)(end - p) < 2) {
            return 0;
        }
        ia.dev_addr_len = *p++;
        m               = *p++;
        if (ia.dev_addr_len == 0 || ia.dev_addr_len > TMX_DEV_ADDR_MAX ||
            (size_t)(end - p) < m || cap - n < sizeof(ia) + ia.dev_addr_len) {
            return 0;
        }
        memcpy(out + n, &ia, sizeof(ia));
        n += sizeof(ia);
        for (const uint8_t *q = p; q < p + m;) {
            size_t run = 1;
            if (*q == 0) {
                if (q + 1 >= p + m || q[1] == 0) {
                    return 0;
                }
                run = q[1];
            }
            if (d + run > ia.dev_addr_len) {
                return 0;
            }
            if (*q == 0) {
                memset(out + n + d, 0, run);
                q += 2;
            } else {
                out[n + d] = *q++;
            }
            d += run;
        }
        if (d != ia.dev_addr_len) {
            return 0;
        }
        n += d;
        p += m;
    }
    if (p != end) {
        return 0;
    }
    memcpy(out, &hdr, sizeof(hdr));
    *out_len = n;
    return 1;
}

/* For tmx_ep_create: a compact address becomes the blob in out (TMX_ADDR_FULL_MAX bytes),
 * *addr_p and *len_p then point at it; any other address is left as it is (resolve checks
 * it). TMX_ERR_INVALID_ADDR for a malformed compact address. */
_Static_assert(TMX_ADDR_FULL_MAX <= 1024, "tmx_ep_create's expansion buffer");
tmx_status_t tmx_worker_addr_expand(const void **addr_p, size_t *len_p, void *out)
{
    const uint8_t *p = *addr_p;
    size_t         n;

    if (p == NULL || *len_p == 0 || p[0] != TMX_ADDR_COMPACT_MAGIC) {
        return TMX_OK;
    }
    if (!tmx_addr_expand_compact(p, *len_p, out, TMX_ADDR_FULL_MAX, &n)) {
        return TMX_ERR_INVALID_ADDR;
    }
    *addr_p = out;
    *len_p  = n;
    return TMX_OK;
}

/* Finds, in a peer's address blob, the first interface one of ours can reach. Every length in
 * the blob is checked against the blob's size. */
tmx_status_t tmx_worker_addr_resolve(tmx_worker_t *w, const void *addr, size_t len,
                                     uint64_t *uuid_p, tmx_iface_t **iface_p,
                                     const uint8_t **dev_addr_p, size_t *dev_addr_len_p,
                                     uint32_t *ud_qpn_p)
{
    const uint8_t *p = addr, *end;
    tmx_addr_hdr_t hdr;
    tmx_iface_t   *found = NULL;
    if (addr == NULL || len < sizeof(hdr) ||
        len > sizeof(hdr) + TMX_MAX_IFACES * (sizeof(tmx_addr_iface_t) + TMX_DEV_ADDR_MAX)) {
        return TMX_ERR_INVALID_ADDR;
    }
    end = p + len;
    memcpy(&hdr, p, sizeof(hdr));
    if (hdr.magic != TMX_ADDR_MAGIC || hdr.version != TMX_ADDR_VERSION || hdr.num_ifaces == 0 ||
        hdr.num_ifaces > TMX_MAX_IFACES) {
        return TMX_ERR_INVALID_ADDR;
    }
    p += sizeof(hdr);
    /* Every record is checked, also past the one that is used: the blob must be exactly the
     * header plus its interface records, so a wrong length (short, padded or garbage) is
     * refused. */
    for (unsigned i = 0; i < hdr.num_ifaces; i++) {
        tmx_addr_iface_t ia;
        if ((size_t)(end - p) < sizeof(ia)) {
            return TMX_ERR_INVALID_ADDR;
        }
        memcpy(&ia, p, sizeof(ia));
        p += sizeof(ia);
        if ((size_t)(end - p) < ia.dev_addr_len || ia.dev_addr_len == 0 ||
            ia.dev_addr_len > TMX_DEV_ADDR_MAX || ia.prov[sizeof(ia.prov) - 1] != '\0') {
            return TMX_ERR_INVALID_ADDR;
        }
        for (int j = 0; j < w->num_ifaces; j++) {
            tmx_iface_t *iface = &w->ifaces[j];
            if (strcmp(iface->dev->prov->name, ia.prov) == 0 &&
                iface->ops->dev_reachable(iface->dev, p, ia.dev_addr_len) &&
                (found == NULL || tmx_worker_nearer(w, iface, found))) {
                found           = iface;
                *dev_addr_p     = p;
                *dev_addr_len_p = ia.dev_addr_len;
                *ud_qpn_p       = ia.ud_qpn;
            }
        }
        p += ia.dev_addr_len;
    }
    if (p != end) {
        return TMX_ERR_INVALID_ADDR;
    }
    if (found == NULL) {
        return TMX_ERR_UNREACHABLE;
    }
    *uuid_p  = hdr.uuid;
    *iface_p = found;
    return TMX_OK;
}

static void tmx_iface_dispatch(tmx_iface_t *iface, const tmx_wc_t *wc)
{
    tmx_worker_t *w = iface->worker;
    tmx_ep_t     *ep;
    uint64_t      val;

    if (wc->wr_id == TMX_WR_ID_ASYNC_ERROR) {
        ep = tmx_ep_by_qpn(w, iface, wc->qp_num);
        if (ep == NULL && tmx_xrc_completion_failed(iface, wc)) {
            return; /* an XRC initiator's or target's (xrc.c) */
        }
        if (ep != NULL) {
            /* A peer that said goodbye (DISC) and then exited, or one that exits while we
             * close an endpoint with nothing in flight, is the end of an orderly job. */
            if (ep->disc_acked || (ep->closing && ep->outstanding == 0 &&
                                   tmx_list_is_empty(&ep->pending))) {
                tmx_debug("connection to peer %016llx closed: %s",
                          (unsigned long long)ep->remote_uuid, tmx_wc_status_string(wc->status));
            } else {
                tmx_warn("connection to peer %016llx lost: %s",
                         (unsigned long long)ep->remote_uuid, tmx_wc_status_string(wc->status));
            }
            tmx_ep_lost(ep, TMX_ERR_PEER_FAILED);
        }
        return;
    }
    val = TMX_WRID_VAL(wc->wr_id);
    switch (TMX_WRID_KIND(wc->wr_id)) {
    case TMX_WRID_RX:
        if (val >= iface->rx_count) {
            break;
        }
        if (wc->status == TMX_WC_SUCCESS) {
            if (iface->tm_on && val < iface->rx_basic) { /* XRC SRQs': never tagged */
                tmx_proto_tm_rx(iface, wc);
            } else {
                tmx_proto_rx(iface, wc);
            }
        } else {
            if (wc->status != TMX_WC_WR_FLUSH_ERR) {
                tmx_warn("receive failed: %s", tmx_wc_status_string(wc->status));
            }
            if (iface->tm_on && wc->opcode == TMX_WC_TM_RECV) {
                tmx_tm_unexp_handled(&iface->tm); /* the device counted it all the same */
            }
        }
        if (wc->status != TMX_WC_WR_FLUSH_ERR) {
            iface->rx_repost[iface->rx_repost_count++] = (uint32_t)val;
        }
        break;
    case TMX_WRID_UD_RX:
        if (val >= iface->ud_count) {
            break;
        }
        if (wc->status == TMX_WC_SUCCESS) {
            tmx_ep_wireup_rx(iface, iface->ud_bufs + val * iface->ud_size,
                             wc->byte_len < iface->ud_size ? wc->byte_len : iface->ud_size);
        }
        if (wc->status != TMX_WC_WR_FLUSH_ERR) {
            tmx_iface_post_ud_rx(iface, (unsigned)val);
        }
        break;
    case TMX_WRID_TX_BUF:
    case TMX_WRID_CTRL:
        tmx_proto_tx_done(iface, wc);
        break;
    case TMX_WRID_RNDV_RD:
        tmx_ring_sq_done(iface, wc);
        tmx_proto_rndv_read_done(iface, wc);
        break;
    case TMX_WRID_RING_RX:
    case TMX_WRID_RING_TX:
        tmx_ring_wc(iface, wc);
        break;
    case TMX_WRID_TM_RECV:
        if (iface->tm_on) {
            tmx_proto_tm_matched(iface, wc);
        }
        break;
    case TMX_WRID_TM_OP:
        if (iface->tm_on) {
            tmx_proto_tm_op_done(iface, wc);
        }
        break;
    default:
        tmx_error("completion with unknown wr_id %llx", (unsigned long long)wc->wr_id);
        break;
    }
}

/*
 * A remote worker is found failed (a connection to it broke, or never came up): the first
 * time for that worker, every receive still waiting for a match learns it once from test or
 * wait (the epoch moves on), and the error handler is called at the end of this progress
 * round. Later connections to the same dead worker failing add nothing.
 */
void tmx_worker_peer_failed(tmx_worker_t *w, uint64_t uuid, tmx_status_t status)
{
    tmx_peer_failure_t *f;
    tmx_tag_exp_t      *x;

    if (tmx_hash_get(&w->failed_peers, uuid) != NULL) {
        return;
    }
    atomic_fetch_add_explicit(&w->fail_epoch, 1, memory_order_release);
    f = calloc(1, sizeof(*f));
    if (f == NULL || tmx_hash_put(&w->failed_peers, uuid, f) != TMX_OK) {
        tmx_error("out of memory recording the failure of peer %016llx: the error handler "
                  "will not hear of it", (unsigned long long)uuid);
        free(f);
    } else {
        f->uuid   = uuid;
        f->status = status;
        tmx_list_add_tail(&w->failures, &f->list);
        w->failures_unreported++;
    }
    /* Receives directed at that worker wait for nothing now: they fail (never offered to a
     * device's tag list, they are in software alone). Last, as their callbacks may post
     * again: a receive directed at it now fails at once (tmx_tag_recv_nb). */
    while ((x = tmx_tag_exp_take_src(&w->tm, uuid)) != NULL) {
        tmx_request_t *rreq = tmx_container_of(x, tmx_request_t, exp);

        rreq->flags &= (uint16_t)~TMX_REQ_FLAG_EXPECTED;
        if (w->tm_iface != NULL) {
            tmx_tm_sw_left(&w->tm_iface->tm, &rreq->tme);
        }
        rreq->info.sender = uuid;
        tmx_request_complete(rreq, TMX_ERR_PEER_FAILED);
    }
}

/* The error handler hears of each failed remote worker once, after the round that found it,
 * with the user's endpoint to it if one is open (a passive connection has no handle). */
static void tmx_worker_report_failures(tmx_worker_t *w)
{
    tmx_list_t *l, *e;

    tmx_list_for_each(l, &w->failures) {
        tmx_peer_failure_t *f  = tmx_container_of(l, tmx_peer_failure_t, list);
        tmx_ep_t           *ep = NULL;

        if (f->reported) {
            continue;
        }
        f->reported = 1;
        w->failures_unreported--;
        if (w->err_handler == NULL || w->destroying) {
            continue;
        }
        tmx_list_for_each(e, &w->eps) {
            tmx_ep_t *cand = tmx_container_of(e, tmx_ep_t, list);
            if (!cand->passive && !cand->user_closed && cand->remote_uuid == f->uuid) {
                ep = cand;
                break;
            }
        }
        w->err_handler(w->err_handler_arg, ep, f->uuid, f->status);
    }
}

/* What follows a device poll that found completions, or that has receive buffers to post
 * again or tag-matching work: out of line, so that the poll that finds nothing (every idle
 * round of a waiting caller) is a call of cq_poll and three tests. */
static inline __attribute__((always_inline)) unsigned
tmx_worker_poll_iface_rest_inline(tmx_iface_t *iface, tmx_wc_t *wc, int n)
{
    if (n < 0) {
        tmx_error("polling device %s failed: %s", iface->dev->name,
                  tmx_status_string((tmx_status_t)n));
        return 0;
    }
    for (int k = 0; k < n; k++) {
        tmx_iface_dispatch(iface, &wc[k]);
    }
    if (iface->rx_repost_count >= iface->rx_lazy &&
        (n == 0 || iface->rx_repost_count >= iface->rx_count / 4)) {
        tmx_iface_repost_rx(iface);
    }
    if (iface->tm_on && (iface->tm.sync_wanted || !tmx_list_is_empty(&iface->tm.op_queue))) {
        tmx_tm_progress(&iface->tm);
    }
    return (unsigned)n;
}

static __attribute__((noinline)) unsigned tmx_worker_poll_iface_rest(tmx_iface_t *iface,
                                                                     tmx_wc_t *wc, int n)
{
    return tmx_worker_poll_iface_rest_inline(iface, wc, n);
}

/* One poll of a device's completions, dispatched; returns how many. */
static inline __attribute__((always_inline)) unsigned tmx_worker_poll_iface_inline(
    tmx_iface_t *iface)
{
    tmx_wc_t wc[TMX_POLL_MAX];
    int      n = iface->ops->cq_poll(iface->cq, TMX_POLL_MAX, wc);

    if (n == 0 && iface->rx_repost_count < iface->rx_lazy && !iface->tm_on) {
        return 0; /* nothing found, nothing to do */
    }
    return tmx_worker_poll_iface_rest(iface, wc, n);
}

unsigned tmx_worker_poll_iface(tmx_iface_t *iface)
{
    return tmx_worker_poll_iface_inline(iface);
}

/*
 * The rings we poll, first: polling memory is what they are for. Whether the devices are
 * polled in this round too: not when the rings took messages (their receives may be what the
 * caller waits for: return at once; the next round polls the devices whatever the rings hold),
 * and, while the devices' last poll found nothing, only every fourth round: a round of ring
 * polls alone is short, so a ring message is seen sooner. Traffic through the devices makes
 * them polled every round again.
 */
static inline __attribute__((always_inline)) int tmx_worker_poll_rings(tmx_worker_t *w,
                                                                   unsigned    *count_p)
{
    unsigned n = tmx_ring_poll(w);

    *count_p += n;
    if (w->poll_devs) {
        /* Back from a yield or a sleep: the skipping above is for rounds that follow one
         * another in microseconds, and a round after a yield may come a time slice of every
         * other rank later (oversubscribed). Every such round looks at the devices: else a
         * message in the device's queue waits up to four of them. */
        w->poll_devs    = 0;
        w->ring_skipped = 0;
        return 1;
    }
    if (w->ring_skipped) {
        w->ring_skipped = 0;
        return 1;
    }
    if (n > 0) {
        w->ring_skipped = 1;
        return 0;
    }
    return w->devs_busy || (++w->ring_rounds & 3) == 0;
}

/* The end of a progress round that polled the devices and found count events (w->in_progress
 * set; cleared here). */
static inline __attribute__((always_inline)) void tmx_worker_round_tail(tmx_worker_t *w,
                                                                        unsigned     count)
{
    if (w->ring_sleepers > 0 && w->rx_msgs != w->ring_sleep_rx) {
        tmx_ring_awake(w); /* messages reach us again: senders may use our rings */
    }
    if (!tmx_list_is_empty(&w->pending_eps)) {
        tmx_proto_progress_pending(w);
    }
    if (w->failures_unreported > 0) {
        tmx_worker_report_failures(w);
    }
    if (count > 0 && w->sleepers > 0) {
        /* another thread sleeps in this worker: what we just completed may be its request */
        uint64_t one = 1;
        if (write(w->evfd, &one, sizeof(one)) < 0 && errno != EAGAIN) {
            tmx_debug("waking the worker's sleepers failed: %s", strerror(errno));
        }
    }
    w->in_progress = 0;
}

/* One progress round (tmx_worker_progress_locked); inline in the API's tmx_worker_progress,
 * whose idle rounds are the loop of every waiting caller. */
static inline __attribute__((always_inline)) unsigned tmx_worker_round(tmx_worker_t *w)
{
    unsigned count = 0;

    if (w->in_progress) {
        return 0; /* called from a completion callback */
    }
    w->in_progress = 1;
    if (tmx_list_is_empty(&w->ring_polled) || tmx_worker_poll_rings(w, &count)) {
        unsigned dev = 0;

        for (int i = 0; i < w->num_ifaces; i++) {
            dev += tmx_worker_poll_iface_inline(&w->ifaces[i]);
        }
        w->devs_busy = dev > 0;
        count += dev;
    }
    tmx_worker_round_tail(w, count);
    return count;
}

unsigned tmx_worker_progress_locked(tmx_worker_t *w)
{
    return tmx_worker_round(w);
}

TMX_API unsigned tmx_worker_progress(tmx_worker_h w)
{
    unsigned count;

    if (!tmx_worker_check(w)) {
        return 0;
    }
    if (w->thread_mode != TMX_THREAD_MODE_MULTI) {
        return tmx_worker_round(w);
    }
    pthread_mutex_lock(&w->lock);
    count = tmx_worker_round(w);
    pthread_mutex_unlock(&w->lock);
    return count;
}

TMX_API tmx_status_t tmx_worker_query(tmx_worker_h w, tmx_worker_attr_t *attr)
{
    if (w == NULL || attr == NULL) {
        return TMX_ERR_INVALID_PARAM;
    }
    if (w->magic != TMX_MAGIC_WORKER) {
        return TMX_ERR_INVALID_HANDLE;
    }
    if (attr->field_mask & ~(uint64_t)(TMX_WORKER_ATTR_THREAD_MODE | TMX_WORKER_ATTR_PEERS |
                                       TMX_WORKER_ATTR_LIMITS | TMX_WORKER_ATTR_ID |
                                       TMX_WORKER_ATTR_WAIT | TMX_WORKER_ATTR_TM |
                                       TMX_WORKER_ATTR_XRC | TMX_WORKER_ATTR_RING)) {
        return TMX_ERR_INVALID_PARAM;
    }
    if (attr->field_mask & TMX_WORKER_ATTR_RING) {
        tmx_ring_query(w, &attr->ring);
    }
    if ((attr->field_mask & TMX_WORKER_ATTR_XRC) && attr->xrc.max_rcv_qps > 0 &&
        attr->xrc.rcv_qps == NULL) {
        return TMX_ERR_INVALID_PARAM;
    }
    if (attr->field_mask & TMX_WORKER_ATTR_XRC) {
        tmx_worker_lock(w);
        tmx_xrc_query(w, &attr->xrc);
        tmx_worker_unlock(w);
    }
    if (attr->field_mask & TMX_WORKER_ATTR_TM) {
        memset(&attr->tm, 0, sizeof(attr->tm));
        if (w->tm_iface != NULL) {
            const tmx_tm_t       *tm = &w->tm_iface->tm;
            const tmx_tm_stats_t *st = &tm->stats;

            attr->tm.enabled = 1;
            snprintf(attr->tm.device, sizeof(attr->tm.device), "%s", w->tm_iface->dev->name);
            attr->tm.max_num_tags = tm->max_tags;
            attr->tm.max_ops      = tm->max_ops;
            attr->tm.rndv_offload = (w->tm_iface->dev->attr.caps & TMX_DEV_CAP_TM_RNDV) != 0;
            attr->tm.thresh       = tm->thresh;
            attr->tm.offered      = st->offered;
            attr->tm.matched      = st->matched;
            attr->tm.unexpected   = st->unexpected;
            attr->tm.syncs        = st->syncs;
            attr->tm.sync_reqs    = st->sync_reqs;
            attr->tm.fallbacks    = st->fallbacks;
            attr->tm.forced       = st->forced;
            attr->tm.rndv         = st->rndv;
        }
    }
    if (attr->field_mask & TMX_WORKER_ATTR_WAIT) {
        attr->wait_mode      = (tmx_wait_mode_t)w->ctx->cfg.wait_mode;
        attr->wait_spin_us   = w->ctx->cfg.wait_spin_us;
        attr->oversubscribed = w->ctx->oversubscribed;
        attr->local_procs    = w->ctx->cfg.local_size;
        attr->cpus           = w->ctx->cpus;
        attr->can_sleep      = w->epfd >= 0;
    }
    if (attr->field_mask & TMX_WORKER_ATTR_ID) {
        attr->id = w->uuid;
    }
    if (attr->field_mask & TMX_WORKER_ATTR_THREAD_MODE) {
        attr->thread_mode = w->thread_mode;
    }
    if (attr->field_mask & TMX_WORKER_ATTR_LIMITS) {
        attr->unexp_budget  = w->unexp_budget;
        attr->eager_credits = w->eager_credits;
    }
    if (attr->field_mask & TMX_WORKER_ATTR_PEERS) {
        memset(attr->peer, 0, sizeof(attr->peer));
        for (int c = 0; c < TMX_PEER_CLASS_LAST; c++) {
            tmx_peer_class_attr_t *pc = &attr->peer[c];
            for (int i = 0; i < w->num_ifaces; i++) {
                tmx_iface_t *iface = &w->ifaces[i];
                if (c == TMX_PEER_NET && (iface->dev->attr.caps & TMX_DEV_CAP_LOCAL_ONLY)) {
                    continue;
                }
                pc->available = 1;
                snprintf(pc->provider, sizeof(pc->provider), "%s", iface->dev->prov->name);
                snprintf(pc->device, sizeof(pc->device), "%s", iface->dev->name);
                snprintf(pc->protocol, sizeof(pc->protocol), "%seager+rndv-read",
                         !iface->tm_on && w->ctx->cfg.ring != 0 && w->ctx->cfg.ring_peers > 0
                             ? "ring+" : "");
                pc->eager_max      = w->eager_max;
                pc->rndv_threshold = w->eager_max + 1;
                pc->max_msg        = TMX_MAX_MSG;
                break;
            }
        }
    }
    return TMX_OK;
}

/* ---------------------------------------------------------------- sleeping */

/* Whether a connected endpoint has sends or control messages queued: they wait for room on
 * the wire or for credits, and room comes without a word to us. An endpoint still connecting
 * waits for its peer's reply, an arrival that wakes us (and resends on a timer the sleep's
 * bound serves). */
static int tmx_worker_sends_queued(tmx_worker_t *w)
{
    tmx_list_t *l;

    tmx_list_for_each(l, &w->pending_eps) {
        tmx_ep_t *ep = tmx_container_of(l, tmx_ep_t, pending_link);
        if (ep->state == TMX_EP_CONNECTED && tmx_proto_ep_queued(ep)) {
            return 1;
        }
    }
    return 0;
}

/* Arms every device (and takes the wakeups the fd holds), under the lock. TMX_ERR_BUSY when
 * something is pending: a device holds work only polling moves, or the worker itself has
 * queued sends or failures to report. */
static tmx_status_t tmx_worker_arm_locked(tmx_worker_t *w)
{
    uint64_t     val;
    tmx_status_t status = TMX_OK;

    if (w->epfd < 0) {
        return TMX_ERR_UNSUPPORTED;
    }
    if (read(w->evfd, &val, sizeof(val)) < 0 && errno != EAGAIN) {
        tmx_debug("reading the worker's eventfd failed: %s", strerror(errno));
    }
    for (int i = 0; i < w->num_ifaces; i++) {
        tmx_iface_t *iface = &w->ifaces[i];
        int          n     = iface->ops->channel_get_events(iface->channel);

        if (n < 0) {
            return (tmx_status_t)n;
        }
    }
    if (w->failures_unreported > 0 || tmx_worker_sends_queued(w)) {
        return TMX_ERR_BUSY;
    }
    /* a ring write wakes nobody: our senders learn that we sleep first (proto/ring.h) */
    if (!tmx_list_is_empty(&w->ring_polled) && tmx_ring_arm(w) != TMX_OK) {
        return TMX_ERR_BUSY;
    }
    for (int i = 0; i < w->num_ifaces && status == TMX_OK; i++) {
        tmx_iface_t *iface = &w->ifaces[i];

        if (iface->rx_repost_count > 0) {
            tmx_iface_repost_rx(iface); /* fewer than rx_lazy: no idle round posts them */
        }
        status = iface->ops->cq_req_notify(iface->cq, iface->channel);
    }
    return status;
}

/* Sleeps on the worker's fd for at most timeout_ms (-1: no limit), the lock released
 * meanwhile. TMX_OK when woken, TMX_ERR_TIMED_OUT, or TMX_ERR_IO. */
static tmx_status_t tmx_worker_sleep(tmx_worker_t *w, int timeout_ms)
{
    struct pollfd pfd = {.fd = w->epfd, .events = POLLIN};
    int           rc;

    w->sleepers++;
    tmx_worker_unlock(w);
    rc = poll(&pfd, 1, timeout_ms);
    tmx_worker_lock(w);
    w->sleepers--;
    w->poll_devs = 1;
    w->stat_sleeps++;
    w->stat_sleep_timeouts += rc == 0;
    if (rc < 0 && errno != EINTR) {
        tmx_error("sleeping on the worker's fd failed: %s", strerror(errno));
        return TMX_ERR_IO;
    }
    return rc == 0 ? TMX_ERR_TIMED_OUT : TMX_OK;
}

static void tmx_worker_yield(tmx_worker_t *w)
{
    tmx_worker_unlock(w);
    sched_yield();
    tmx_worker_lock(w);
    w->poll_devs = 1;
}

/* TMX_WAIT=auto's polling before a sleep: TMX_WAIT_SPIN, grown while sleeps are near misses
 * (tmx_worker_spin_adapt). */
static unsigned tmx_worker_spin_us(const tmx_worker_t *w)
{
    return w->spin_us != 0 ? w->spin_us : w->ctx->cfg.wait_spin_us;
}

/* After an auto wait's sleep of slept seconds (woken: by an arrival, not the time limit).
 * Spinning for as long as a wakeup costs is what keeps a wait cheap, and that cost is not
 * known: on a loaded or emulated machine (rxe in a TCG guest on a shared host) a sleeper's
 * wakeup can take milliseconds, longer than TMX_WAIT_SPIN. Then a ping-pong locks into
 * sleeping on every wait: each side's wait includes the other side's wakeup, longer than the
 * spin, so it sleeps too (every round trip costs two wakeups). A sleep that an arrival ends
 * within TMX_IDLE_NEAR_MISS times the spin was such a near miss: the spin doubles, up to
 * TMX_IDLE_SPIN_GROWTH_MAX times TMX_WAIT_SPIN. A sleep that lasts longer, or times out,
 * is idleness: the spin halves, down to TMX_WAIT_SPIN. */
static void tmx_worker_spin_adapt(tmx_worker_t *w, int woken, double slept)
{
    unsigned base = w->ctx->cfg.wait_spin_us;
    unsigned cur  = tmx_worker_spin_us(w);

    if (woken && slept < TMX_IDLE_NEAR_MISS * cur * 1e-6) {
        if (cur < base * TMX_IDLE_SPIN_GROWTH_MAX) {
            cur = cur * 2 < base * TMX_IDLE_SPIN_GROWTH_MAX ? cur * 2
                                                             : base * TMX_IDLE_SPIN_GROWTH_MAX;
        }
    } else {
        cur = cur / 2 > base ? cur / 2 : base;
    }
    w->spin_us = cur;
    if (cur > w->spin_us_max) {
        w->spin_us_max = cur;
    }
}

void tmx_worker_idle(tmx_worker_t *w, tmx_idle_t *idle, unsigned events, double deadline)
{
    const tmx_context_t *ctx = w->ctx;
    double               now;
    int                  timeout_ms;

    if (events > 0) {
        idle->since  = 0;
        idle->rounds = 0;
        return;
    }
    switch (ctx->cfg.wait_mode) {
    case TMX_WAIT_SPIN:
        return;
    case TMX_WAIT_YIELD:
        tmx_worker_yield(w);
        return;
    case TMX_WAIT_AUTO:
        /* One round in 16 reads the clock: most waits of a ping-pong end before the first
         * read, and a spinning wait pays 1/16th of a clock read per poll (reading it every
         * round cost 8% of the 8-byte message rate). */
        if ((++idle->rounds & 15) != 0) {
            if (ctx->oversubscribed) {
                tmx_worker_yield(w);
            }
            return;
        }
        now = tmx_time_sec();
        if (idle->since == 0) {
            idle->since = now;
        }
        if (now - idle->since < tmx_worker_spin_us(w) * 1e-6 &&
            (ctx->idle_yields == 0 || idle->rounds < ctx->idle_yields)) {
            if (ctx->oversubscribed) {
                tmx_worker_yield(w);
            }
            return;
        }
        break;
    default: /* TMX_WAIT_SLEEP */
        now = tmx_time_sec();
        break;
    }
    /* Sleep, but come back in time for the deadline and for what only polling sees. */
    timeout_ms = TMX_IDLE_SLEEP_MAX_MS;
    if (deadline >= 0 && (deadline - now) * 1000.0 < timeout_ms) {
        timeout_ms = deadline > now ? (int)((deadline - now) * 1000.0) + 1 : 0;
    }
    if (timeout_ms > 0 && tmx_worker_arm_locked(w) == TMX_OK) {
        tmx_status_t woke = tmx_worker_sleep(w, timeout_ms);
        if (ctx->cfg.wait_mode == TMX_WAIT_AUTO) {
            tmx_worker_spin_adapt(w, woke == TMX_OK, tmx_time_sec() - now);
        }
    } else {
        /* busy (a send waits for room a peer makes: give it the processor), or no device
         * can wake us: past the spin, poll politely */
        tmx_worker_yield(w);
    }
}

/* tmx_worker_idle's answers that need no call: a round that found something, TMX_WAIT=spin,
 * and auto's rounds between two clock reads (not oversubscribed). The same decisions. */
static inline __attribute__((always_inline)) void
tmx_worker_idle_inline(tmx_worker_t *w, tmx_idle_t *idle, unsigned events, double deadline)
{
    const tmx_context_t *ctx = w->ctx;

    if (events > 0) {
        idle->since  = 0;
        idle->rounds = 0;
        return;
    }
    if (ctx->cfg.wait_mode == TMX_WAIT_SPIN) {
        return;
    }
    if (ctx->cfg.wait_mode == TMX_WAIT_AUTO && ((idle->rounds + 1) & 15) != 0 &&
        !ctx->oversubscribed) {
        idle->rounds++;
        return;
    }
    tmx_worker_idle(w, idle, 0, deadline);
}

/*
 * Whether a waiting caller's next rounds, after one that found nothing, can be polls of the
 * one device's completion queue alone (tmx_worker_quiet_polls): nothing but a completion can
 * give a round anything else to do. One thread calls into the worker (no other thread
 * completes requests, queues sends or fails peers meanwhile), no ring is polled, no endpoint
 * waits in pending_eps, no failure waits to be reported, no tag-matching offload, fewer
 * receive buffers wait to be posted again than an idle poll posts, and TMX_WAIT spins
 * (spin, or auto between its clock reads). Everything the skipped parts of a round look at
 * changes only by a completion's dispatch or an API call, and neither happens in the polls.
 */
static inline __attribute__((always_inline)) int tmx_worker_quiet(const tmx_worker_t *w)
{
    const tmx_iface_t *iface = &w->ifaces[0];

    return w->thread_mode != TMX_THREAD_MODE_MULTI && w->num_ifaces == 1 &&
           tmx_list_is_empty(&w->ring_polled) && tmx_list_is_empty(&w->pending_eps) &&
           w->failures_unreported == 0 && w->ring_sleepers == 0 && !iface->tm_on &&
           iface->rx_repost_count < iface->rx_lazy && !w->in_progress;
}

/*
 * Up to max polls of the one device's CQ (tmx_worker_quiet holds), each what an idle round
 * would do: returns when one finds completions (dispatched, and the round's tail run, as a
 * round does) with their number, or 0 after max polls that found nothing (*polls: how many
 * ran). A poll that finds nothing costs the provider's cq_poll and a test here: about 90
 * instructions over rxe, against about 165 for a whole round (bench/README.md, h-verbs5).
 */
static inline __attribute__((always_inline)) unsigned
tmx_worker_quiet_polls(tmx_worker_t *w, unsigned max, unsigned *polls)
{
    tmx_iface_t *iface = &w->ifaces[0];
    tmx_wc_t     wc[TMX_POLL_MAX];
    unsigned     i;
    int          n = 0;

    for (i = 0; i < max; i++) {
        n = iface->ops->cq_poll(iface->cq, TMX_POLL_MAX, wc);
        if (n != 0) {
            break;
        }
    }
    *polls = i;
    if (n == 0) {
        return 0;
    }
    /* inline: a call layer less between an arrival and its completion; the idle polls
     * above pay nothing for it (the registers are saved once per wait) */
    w->in_progress = 1;
    n              = (int)tmx_worker_poll_iface_rest_inline(iface, wc, n);
    w->devs_busy   = n > 0;
    tmx_worker_round_tail(w, (unsigned)n);
    return (unsigned)n;
}

/* Idle polls a quiet wait makes between two whole rounds (TMX_WAIT=spin). */
#define TMX_QUIET_POLLS 16

/*
 * tmx_request_wait's loop. Each round is the one of tmx_worker_progress_locked, inline here,
 * with the idle decision after it; after a round that found nothing, while the worker is
 * quiet (tmx_worker_quiet), the next idle rounds are polls of the CQ alone. A waiting
 * caller's rounds that find nothing (the spin until a message arrives) cost less than half
 * what they did through tmx_worker_progress_locked, tmx_worker_poll_iface and
 * tmx_worker_idle (bench/README.md, h-verbs5), and a message that arrives during one waits
 * half a round on average.
 */
tmx_status_t tmx_worker_wait_request(tmx_worker_t *w, tmx_request_t *req)
{
    tmx_idle_t idle = TMX_IDLE_INIT;

    while (!tmx_request_done(req)) {
        unsigned events;

        if (tmx_request_failure_pending(req)) {
            return TMX_ERR_PEER_FAILED_PENDING;
        }
        tmx_worker_lock(w);
        if (req->flags & TMX_REQ_FLAG_RELEASE) {
            tmx_worker_unlock(w);
            return TMX_ERR_INVALID_HANDLE;
        }
        events = tmx_worker_round(w);
        if (events == 0 && tmx_worker_quiet(w)) {
            const tmx_context_t *ctx = w->ctx;
            unsigned             max = 0, polls;

            /* as many idle rounds as tmx_worker_idle_inline would answer without a call */
            if (ctx->cfg.wait_mode == TMX_WAIT_SPIN) {
                max = TMX_QUIET_POLLS;
            } else if (ctx->cfg.wait_mode == TMX_WAIT_AUTO && !ctx->oversubscribed) {
                /* up to the round before the one that reads the clock (the idle call
                 * below counts the round itself) */
                max = 15 - (idle.rounds & 15);
            }
            if (max > 0) {
                events = tmx_worker_quiet_polls(w, max, &polls);
                if (ctx->cfg.wait_mode == TMX_WAIT_AUTO) {
                    idle.rounds += polls; /* each was an idle round */
                }
            }
        }
        if (!tmx_request_done(req)) {
            tmx_worker_idle_inline(w, &idle, events, -1);
        }
        tmx_worker_unlock(w);
    }
    return TMX_OK;
}

TMX_API tmx_status_t tmx_worker_get_efd(tmx_worker_h w, int *fd_p)
{
    if (w == NULL || fd_p == NULL) {
        return TMX_ERR_INVALID_PARAM;
    }
    if (w->magic != TMX_MAGIC_WORKER) {
        return TMX_ERR_INVALID_HANDLE;
    }
    if (w->epfd < 0) {
        return TMX_ERR_UNSUPPORTED;
    }
    *fd_p = w->epfd;
    return TMX_OK;
}

TMX_API tmx_status_t tmx_worker_arm(tmx_worker_h w)
{
    tmx_status_t status;

    if (w == NULL) {
        return TMX_ERR_INVALID_PARAM;
    }
    if (w->magic != TMX_MAGIC_WORKER) {
        return TMX_ERR_INVALID_HANDLE;
    }
    tmx_worker_lock(w);
    status = tmx_worker_arm_locked(w);
    tmx_worker_unlock(w);
    return status;
}

TMX_API tmx_status_t tmx_worker_wait(tmx_worker_h w, int timeout_ms)
{
    tmx_status_t status;

    if (w == NULL || timeout_ms < -1) {
        return TMX_ERR_INVALID_PARAM;
    }
    if (w->magic != TMX_MAGIC_WORKER) {
        return TMX_ERR_INVALID_HANDLE;
    }
    tmx_worker_lock(w);
    status = tmx_worker_arm_locked(w);
    if (status == TMX_OK) {
        status = tmx_worker_sleep(w, timeout_ms);
    } else if (status == TMX_ERR_BUSY) {
        status = TMX_OK; /* pending already: the caller progresses */
    } else if (status == TMX_ERR_UNSUPPORTED) {
        tmx_worker_yield(w);
        status = TMX_OK;
    }
    tmx_worker_unlock(w);
    return status;
}
