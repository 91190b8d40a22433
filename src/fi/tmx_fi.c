/* libtmx-fi.so: the provider entry point, fi_getinfo, and the fabric, domain, event queue,
 * address vector, completion queue, counter and memory registration objects. Endpoints and
 * the data path are in tmx_fi_ep.c. */
#include "tmx_fi.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

uint32_t tmx_fi_api_version = FI_VERSION(1, 0);

int tmx_fi_errno(tmx_status_t s)
{
    switch (s) {
    case TMX_OK:
    case TMX_INPROGRESS:
        return 0;
    case TMX_ERR_INVALID_PARAM:
    case TMX_ERR_INVALID_HANDLE:
        return FI_EINVAL;
    case TMX_ERR_NO_MEMORY:
        return FI_ENOMEM;
    case TMX_ERR_NO_RESOURCE:
        return FI_EAGAIN;
    case TMX_ERR_UNSUPPORTED:
        return FI_ENOSYS;
    case TMX_ERR_TRUNCATED:
        return FI_ETRUNC;
    case TMX_ERR_CANCELED:
        return FI_ECANCELED;
    case TMX_ERR_NO_DEVICE:
        return FI_ENODEV;
    case TMX_ERR_UNREACHABLE:
        return FI_EHOSTUNREACH;
    case TMX_ERR_INVALID_ADDR:
        return FI_EADDRNOTAVAIL;
    case TMX_ERR_NO_MESSAGE:
        return FI_ENOMSG;
    case TMX_ERR_TIMED_OUT:
        return FI_ETIMEDOUT;
    case TMX_ERR_BUSY:
        return FI_EBUSY;
    case TMX_ERR_PEER_FAILED:
    case TMX_ERR_PEER_FAILED_PENDING:
        return FI_ECONNABORTED;
    default:
        return FI_EIO;
    }
}

/* ---------------------------------------------------------------- fi_getinfo */

/* A threading level that lets the application call into one domain from several threads at
 * once: everything but FI_THREAD_DOMAIN (and unspecified). */
static int tmx_fi_threads_any(enum fi_threading t)
{
    return t == FI_THREAD_SAFE || t == FI_THREAD_FID || t == FI_THREAD_ENDPOINT ||
           t == FI_THREAD_COMPLETION;
}

static struct fi_info *tmx_fi_info_alloc(uint32_t version, const struct fi_info *hints)
{
    struct fi_info *fi = fi_allocinfo();
    uint64_t        caps;

    if (fi == NULL) {
        return NULL;
    }
    caps = TMX_FI_CAPS;
    /* FI_DIRECTED_RECV (exact: tmx receives name their source, tmx_fi(7)) is a secondary
     * capability: given to who asks for it, or asks for nothing in particular, so that an
     * application that did not ask keeps src_addr ignored. */
    if (hints != NULL && hints->caps != 0 && !(hints->caps & FI_DIRECTED_RECV)) {
        caps &= ~(uint64_t)FI_DIRECTED_RECV;
    }
    /* An application that asks for tags but not for untagged messages gets all 64 tag bits;
     * with FI_MSG the top bit is the provider's (mem_tag_format says so). */
    if (hints != NULL && hints->caps != 0 && !(hints->caps & FI_MSG)) {
        caps &= ~(uint64_t)FI_MSG;
    }
    fi->caps                            = caps;
    fi->mode                            = 0;
    fi->addr_format                     = FI_FORMAT_UNSPEC;
    fi->src_addrlen                     = 0;
    fi->ep_attr->type                   = FI_EP_RDM;
    fi->ep_attr->protocol               = FI_PROTO_UNSPEC;
    fi->ep_attr->max_msg_size           = TMX_FI_MAX_MSG;
    fi->ep_attr->mem_tag_format         = (caps & FI_MSG) ? ~TMX_FI_MSG_BIT : ~(uint64_t)0;
    fi->ep_attr->tx_ctx_cnt             = 1;
    fi->ep_attr->rx_ctx_cnt             = 1;
    fi->tx_attr->caps                   = caps;
    fi->tx_attr->op_flags               = hints && hints->tx_attr ? hints->tx_attr->op_flags : 0;
    fi->tx_attr->msg_order              = FI_ORDER_SAS;
    fi->tx_attr->comp_order             = FI_ORDER_NONE;
    fi->tx_attr->inject_size            = TMX_FI_INJECT_SIZE;
    fi->tx_attr->size                   = TMX_FI_QUEUE_SIZE;
    fi->tx_attr->iov_limit              = TMX_FI_IOV_LIMIT;
    fi->rx_attr->caps                   = caps;
    fi->rx_attr->op_flags               = hints && hints->rx_attr ? hints->rx_attr->op_flags : 0;
    fi->rx_attr->msg_order              = FI_ORDER_SAS;
    fi->rx_attr->comp_order             = FI_ORDER_NONE;
    fi->rx_attr->size                   = TMX_FI_QUEUE_SIZE;
    fi->rx_attr->iov_limit              = TMX_FI_IOV_LIMIT;
    fi->domain_attr->name               = strdup(TMX_FI_NAME);
    /* FI_THREAD_SAFE when asked for, or for any level that lets threads call into one domain
     * at once (FI_THREAD_FID, _ENDPOINT, _COMPLETION: tmx_fi_threads_any): the domain's
     * objects then take its lock. FI_THREAD_DOMAIN would promise less than was asked. */
    fi->domain_attr->threading = (hints && hints->domain_attr &&
                                  tmx_fi_threads_any(hints->domain_attr->threading))
                                     ? FI_THREAD_SAFE
                                     : FI_THREAD_DOMAIN;
    fi->domain_attr->control_progress   = FI_PROGRESS_MANUAL;
    fi->domain_attr->data_progress      = FI_PROGRESS_MANUAL;
    fi->domain_attr->resource_mgmt      = FI_RM_ENABLED;
    fi->domain_attr->av_type            = (hints && hints->domain_attr &&
                                           hints->domain_attr->av_type != FI_AV_UNSPEC)
                                              ? hints->domain_attr->av_type
                                              : FI_AV_UNSPEC;
    /* nothing needs registering: before API 1.5 mr_mode is the old enumeration */
    fi->domain_attr->mr_mode            = version < FI_VERSION(1, 5) ? FI_MR_SCALABLE : 0;
    fi->domain_attr->mr_key_size        = sizeof(uint64_t);
    /* remote CQ data: tmx's immediate data, 32 bits (TMX_REQ_PARAM_IMM) */
    fi->domain_attr->cq_data_size       = TMX_FI_CQ_DATA_SIZE;
    fi->domain_attr->cq_cnt             = 256;
    fi->domain_attr->ep_cnt             = 256;
    fi->domain_attr->tx_ctx_cnt         = 256;
    fi->domain_attr->rx_ctx_cnt         = 256;
    fi->domain_attr->max_ep_tx_ctx      = 1;
    fi->domain_attr->max_ep_rx_ctx      = 1;
    fi->domain_attr->cntr_cnt           = 256;
    fi->domain_attr->mr_iov_limit       = 1;
    fi->domain_attr->mr_cnt             = 65536;
    fi->fabric_attr->name               = strdup(TMX_FI_NAME);
    /* prov_name: libfabric's core fills it in */
    fi->fabric_attr->prov_version       = TMX_FI_VERSION;
    fi->fabric_attr->api_version        = version;
    if (fi->domain_attr->name == NULL || fi->fabric_attr->name == NULL) {
        fi_freeinfo(fi);
        return NULL;
    }
    return fi;
}

/* The hints ask for something the provider lacks: say which line of tmx_fi_hints_ok refused
 * (FI_LOG_LEVEL=info) and return 0. */
static int tmx_fi_reject(int line)
{
    if (fi_log_enabled(&tmx_fi_prov, FI_LOG_INFO, FI_LOG_CORE)) {
        fi_log(&tmx_fi_prov, FI_LOG_INFO, FI_LOG_CORE, "tmx_fi_hints_ok", line,
               "hints refused at tmx_fi.c:%d\n", line);
    }
    return 0;
}

/* 1 when the hints ask for nothing the provider lacks. */
static int tmx_fi_hints_ok(const struct fi_info *h)
{
    if (h == NULL) {
        return 1;
    }
    if ((h->caps & ~(uint64_t)TMX_FI_CAPS) != 0) {
        /* FI_SOURCE, FI_RMA, ... are not offered */
        if (fi_log_enabled(&tmx_fi_prov, FI_LOG_INFO, FI_LOG_CORE)) {
            fi_log(&tmx_fi_prov, FI_LOG_INFO, FI_LOG_CORE, __func__, __LINE__,
                   "capabilities not offered: %s\n",
                   fi_tostr(&(uint64_t){h->caps & ~(uint64_t)TMX_FI_CAPS},
                            FI_TYPE_CAPS));
        }
        return 0;
    }
    if (h->addr_format != FI_FORMAT_UNSPEC) {
        return tmx_fi_reject(__LINE__);
    }
    if (h->ep_attr != NULL) {
        if (h->ep_attr->type != FI_EP_UNSPEC && h->ep_attr->type != FI_EP_RDM) {
            return tmx_fi_reject(__LINE__);
        }
        if (h->ep_attr->mem_tag_format != 0 && (h->ep_attr->mem_tag_format & TMX_FI_MSG_BIT) &&
            (h->caps & FI_MSG)) {
            return tmx_fi_reject(__LINE__);
        }
        if (h->ep_attr->tx_ctx_cnt > 1 || h->ep_attr->rx_ctx_cnt > 1 ||
            h->ep_attr->auth_key_size != 0) {
            return tmx_fi_reject(__LINE__);
        }
    }
    /* default operation flags the data path would ignore (it refuses them per call) */
    if ((h->tx_attr != NULL &&
         (h->tx_attr->op_flags & (FI_MULTICAST | FI_TRIGGER | FI_FENCE | FI_MULTI_RECV))) ||
        (h->rx_attr != NULL &&
         (h->rx_attr->op_flags & (FI_MULTICAST | FI_TRIGGER | FI_FENCE | FI_MULTI_RECV)))) {
        return tmx_fi_reject(__LINE__);
    }
    if (h->tx_attr != NULL &&
        ((h->tx_attr->msg_order & ~(uint64_t)FI_ORDER_SAS) != 0 ||
         (h->tx_attr->comp_order & ~(uint64_t)FI_ORDER_NONE) != 0 ||
         h->tx_attr->inject_size > TMX_FI_INJECT_SIZE ||
         h->tx_attr->iov_limit > TMX_FI_IOV_LIMIT)) {
        return tmx_fi_reject(__LINE__);
    }
    if (h->rx_attr != NULL &&
        ((h->rx_attr->msg_order & ~(uint64_t)FI_ORDER_SAS) != 0 ||
         (h->rx_attr->comp_order & ~(uint64_t)FI_ORDER_NONE) != 0 ||
         h->rx_attr->total_buffered_recv != 0 || h->rx_attr->iov_limit > TMX_FI_IOV_LIMIT)) {
        return tmx_fi_reject(__LINE__);
    }
    if (h->domain_attr != NULL) {
        const struct fi_domain_attr *d = h->domain_attr;
        if (d->name != NULL && strcmp(d->name, TMX_FI_NAME) != 0) {
            return tmx_fi_reject(__LINE__);
        }
        if (d->threading != FI_THREAD_UNSPEC && d->threading != FI_THREAD_DOMAIN &&
            d->threading != FI_THREAD_COMPLETION && d->threading != FI_THREAD_ENDPOINT &&
            d->threading != FI_THREAD_FID && d->threading != FI_THREAD_SAFE) {
            return tmx_fi_reject(__LINE__);
        }
        if (d->control_progress == FI_PROGRESS_AUTO || d->data_progress == FI_PROGRESS_AUTO) {
            return tmx_fi_reject(__LINE__);
        }
        if (d->av_type != FI_AV_UNSPEC && d->av_type != FI_AV_MAP && d->av_type != FI_AV_TABLE) {
            return tmx_fi_reject(__LINE__); /* no such type: it was given back as asked */
        }
        if (d->cq_data_size > TMX_FI_CQ_DATA_SIZE) {
            return tmx_fi_reject(__LINE__); /* remote CQ data: 4 bytes, see tmx_fi(7) */
        }
        if (d->caps & ~(uint64_t)(FI_LOCAL_COMM | FI_REMOTE_COMM)) {
            return tmx_fi_reject(__LINE__);
        }
    }
    if (h->fabric_attr != NULL) {
        if (h->fabric_attr->name != NULL && strcmp(h->fabric_attr->name, TMX_FI_NAME) != 0) {
            return tmx_fi_reject(__LINE__);
        }
        if (h->fabric_attr->prov_name != NULL &&
            strcmp(h->fabric_attr->prov_name, TMX_FI_NAME) != 0) {
            return tmx_fi_reject(__LINE__);
        }
    }
    return 1;
}

static int tmx_fi_getinfo(uint32_t version, const char *node, const char *service,
                          uint64_t flags, const struct fi_info *hints, struct fi_info **info)
{
    (void)node;
    (void)service;
    (void)flags;
    if (version > tmx_fi_api_version) {
        tmx_fi_api_version = version;
    }
    if (!tmx_fi_hints_ok(hints)) {
        return -FI_ENODATA;
    }
    *info = tmx_fi_info_alloc(version, hints);
    return *info == NULL ? -FI_ENOMEM : 0;
}

/* ---------------------------------------------------------------- stubs */

static int tmx_fi_no_bind(struct fid *fid, struct fid *bfid, uint64_t flags)
{
    (void)fid;
    (void)bfid;
    (void)flags;
    return -FI_ENOSYS;
}

static int tmx_fi_no_control(struct fid *fid, int command, void *arg)
{
    (void)fid;
    (void)command;
    (void)arg;
    return -FI_ENOSYS;
}

static int tmx_fi_no_ops_open(struct fid *fid, const char *name, uint64_t flags, void **ops,
                              void *context)
{
    (void)fid;
    (void)name;
    (void)flags;
    (void)ops;
    (void)context;
    return -FI_ENOSYS;
}

/* ---------------------------------------------------------------- event queue */

/* fi_pingpong opens an event queue even for RDM endpoints; nothing is ever reported on it. */
typedef struct tmx_fi_eq {
    struct fid_eq eq;
} tmx_fi_eq_t;

static int tmx_fi_eq_close(struct fid *fid)
{
    free(fid);
    return 0;
}

static ssize_t tmx_fi_eq_read(struct fid_eq *eq, uint32_t *event, void *buf, size_t len,
                              uint64_t flags)
{
    (void)eq;
    (void)event;
    (void)buf;
    (void)len;
    (void)flags;
    return -FI_EAGAIN;
}

static ssize_t tmx_fi_eq_readerr(struct fid_eq *eq, struct fi_eq_err_entry *buf, uint64_t flags)
{
    (void)eq;
    (void)buf;
    (void)flags;
    return -FI_EAGAIN;
}

static ssize_t tmx_fi_eq_write(struct fid_eq *eq, uint32_t event, const void *buf, size_t len,
                               uint64_t flags)
{
    (void)eq;
    (void)event;
    (void)buf;
    (void)len;
    (void)flags;
    return -FI_ENOSYS;
}

static ssize_t tmx_fi_eq_sread(struct fid_eq *eq, uint32_t *event, void *buf, size_t len,
                               int timeout, uint64_t flags)
{
    (void)eq;
    (void)event;
    (void)buf;
    (void)len;
    (void)timeout;
    (void)flags;
    return -FI_EAGAIN;
}

static const char *tmx_fi_eq_strerror(struct fid_eq *eq, int prov_errno, const void *err_data,
                                      char *buf, size_t len)
{
    (void)eq;
    (void)err_data;
    const char *s = tmx_status_string((tmx_status_t)prov_errno);
    if (buf != NULL && len > 0) {
        snprintf(buf, len, "%s", s);
        return buf;
    }
    return s;
}

static struct fi_ops tmx_fi_eq_fi_ops = {
    .size     = sizeof(struct fi_ops),
    .close    = tmx_fi_eq_close,
    .bind     = tmx_fi_no_bind,
    .control  = tmx_fi_no_control,
    .ops_open = tmx_fi_no_ops_open,
};

static struct fi_ops_eq tmx_fi_eq_ops = {
    .size     = sizeof(struct fi_ops_eq),
    .read     = tmx_fi_eq_read,
    .readerr  = tmx_fi_eq_readerr,
    .write    = tmx_fi_eq_write,
    .sread    = tmx_fi_eq_sread,
    .strerror = tmx_fi_eq_strerror,
};

static int tmx_fi_eq_open(struct fid_fabric *fabric, struct fi_eq_attr *attr,
                          struct fid_eq **eq_p, void *context)
{
    tmx_fi_eq_t *eq;

    if (attr == NULL || eq_p == NULL ||
        (attr->wait_obj != FI_WAIT_NONE && attr->wait_obj != FI_WAIT_UNSPEC)) {
        return attr != NULL && eq_p != NULL ? -FI_ENOSYS : -FI_EINVAL;
    }
    eq = calloc(1, sizeof(*eq));
    if (eq == NULL) {
        return -FI_ENOMEM;
    }
    eq->eq.fid.fclass  = FI_CLASS_EQ;
    eq->eq.fid.context = context;
    eq->eq.fid.ops     = &tmx_fi_eq_fi_ops;
    eq->eq.ops         = &tmx_fi_eq_ops;
    (void)fabric;
    *eq_p = &eq->eq;
    return 0;
}

/* ---------------------------------------------------------------- address vector */

static int tmx_fi_av_close(struct fid *fid)
{
    tmx_fi_av_t     *av  = (tmx_fi_av_t *)fid;
    tmx_fi_domain_t *dom = av->dom;

    tmx_fi_lock(dom);
    if (av->refs > 0) {
        tmx_fi_unlock(dom);
        return -FI_EBUSY;
    }
    dom->refs--;
    tmx_fi_unlock(dom);
    free(av->names);
    free(av->valid);
    free(av);
    return 0;
}

static int tmx_fi_av_insert_unlocked(struct fid_av *fav, const void *addr, size_t count,
                            fi_addr_t *fi_addr, uint64_t flags, void *context)
{
    tmx_fi_av_t   *av = (tmx_fi_av_t *)fav;
    const uint8_t *in = addr;
    int            inserted = 0;

    (void)context;
    if ((addr == NULL && count > 0) || (flags & ~(uint64_t)FI_MORE) != 0) {
        return -FI_EINVAL; /* FI_MORE: a hint, more inserts follow */
    }
    if (av->count + count > av->cap) {
        size_t   cap = av->cap ? av->cap : 64;
        uint8_t *names, *valid;
        while (cap < av->count + count) {
            cap *= 2;
        }
        names = realloc(av->names, cap * TMX_FI_NAME_LEN);
        if (names == NULL) {
            return -FI_ENOMEM;
        }
        av->names = names;
        valid     = realloc(av->valid, cap);
        if (valid == NULL) {
            return -FI_ENOMEM;
        }
        av->valid = valid;
        av->cap   = cap;
    }
    for (size_t i = 0; i < count; i++) {
        const uint8_t *name = in + i * TMX_FI_NAME_LEN;
        size_t         idx  = av->count++;
        /* a name is one length byte and that many address bytes; the rest is zero */
        int ok = name[0] != 0 && name[0] < TMX_FI_NAME_LEN;
        memcpy(av->names + idx * TMX_FI_NAME_LEN, name, TMX_FI_NAME_LEN);
        av->valid[idx] = (uint8_t)ok;
        if (fi_addr != NULL) {
            fi_addr[i] = ok ? (fi_addr_t)idx : FI_ADDR_NOTAVAIL;
        }
        inserted += ok;
    }
    return inserted;
}

static int tmx_fi_av_insert(struct fid_av *fav, const void *addr, size_t count,
                            fi_addr_t *fi_addr, uint64_t flags, void *context)
{
    tmx_fi_domain_t *dom_ = ((tmx_fi_av_t *)fav)->dom;
    int r_;
    tmx_fi_lock(dom_);
    r_ = tmx_fi_av_insert_unlocked(fav, addr, count, fi_addr, flags, context);
    tmx_fi_unlock(dom_);
    return r_;
}

static int tmx_fi_av_insertsvc(struct fid_av *av, const char *node, const char *service,
                               fi_addr_t *fi_addr, uint64_t flags, void *context)
{
    (void)av;
    (void)node;
    (void)service;
    (void)fi_addr;
    (void)flags;
    (void)context;
    return -FI_ENOSYS;
}

static int tmx_fi_av_insertsym(struct fid_av *av, const char *node, size_t nodecnt,
                               const char *service, size_t svccnt, fi_addr_t *fi_addr,
                               uint64_t flags, void *context)
{
    (void)av;
    (void)node;
    (void)nodecnt;
    (void)service;
    (void)svccnt;
    (void)fi_addr;
    (void)flags;
    (void)context;
    return -FI_ENOSYS;
}

static int tmx_fi_av_remove_unlocked(struct fid_av *fav, fi_addr_t *fi_addr, size_t count,
                            uint64_t flags)
{
    tmx_fi_av_t *av = (tmx_fi_av_t *)fav;

    if ((fi_addr == NULL && count > 0) || flags != 0) {
        return -FI_EINVAL;
    }
    for (size_t i = 0; i < count; i++) {
        if (fi_addr[i] >= av->count || !av->valid[fi_addr[i]]) {
            return -FI_EINVAL; /* not an entry, or one removed already: nothing removed */
        }
    }
    for (size_t i = 0; i < count; i++) {
        av->valid[fi_addr[i]] = 0;
    }
    return 0;
}

static int tmx_fi_av_remove(struct fid_av *fav, fi_addr_t *fi_addr, size_t count,
                            uint64_t flags)
{
    tmx_fi_domain_t *dom_ = ((tmx_fi_av_t *)fav)->dom;
    int r_;
    tmx_fi_lock(dom_);
    r_ = tmx_fi_av_remove_unlocked(fav, fi_addr, count, flags);
    tmx_fi_unlock(dom_);
    return r_;
}

static int tmx_fi_av_lookup_unlocked(struct fid_av *fav, fi_addr_t fi_addr, void *addr, size_t *addrlen)
{
    tmx_fi_av_t *av = (tmx_fi_av_t *)fav;
    size_t       n;

    if (addrlen == NULL || fi_addr >= av->count || !av->valid[fi_addr]) {
        return -FI_EINVAL;
    }
    n = *addrlen < TMX_FI_NAME_LEN ? *addrlen : TMX_FI_NAME_LEN;
    if (addr != NULL) {
        memcpy(addr, av->names + fi_addr * TMX_FI_NAME_LEN, n);
    }
    *addrlen = TMX_FI_NAME_LEN;
    return 0;
}

static int tmx_fi_av_lookup(struct fid_av *fav, fi_addr_t fi_addr, void *addr, size_t *addrlen)
{
    tmx_fi_domain_t *dom_ = ((tmx_fi_av_t *)fav)->dom;
    int r_;
    tmx_fi_lock(dom_);
    r_ = tmx_fi_av_lookup_unlocked(fav, fi_addr, addr, addrlen);
    tmx_fi_unlock(dom_);
    return r_;
}

static const char *tmx_fi_av_straddr(struct fid_av *av, const void *addr, char *buf,
                                     size_t *len)
{
    const uint8_t *a = addr;
    size_t         need = 5 + 2 * TMX_FI_NAME_LEN + 1, n = 0;
    char           tmp[5 + 2 * TMX_FI_NAME_LEN + 1];

    (void)av;
    n += (size_t)snprintf(tmp, sizeof(tmp), "tmx:");
    for (size_t i = 1; a != NULL && i <= a[0] && i < TMX_FI_NAME_LEN; i++) {
        n += (size_t)snprintf(tmp + n, sizeof(tmp) - n, "%02x", a[i]);
    }
    if (buf != NULL && len != NULL && *len > 0) {
        snprintf(buf, *len, "%s", tmp);
    }
    if (len != NULL) {
        *len = n + 1 < need ? n + 1 : need;
    }
    return buf;
}

static struct fi_ops tmx_fi_av_fi_ops = {
    .size     = sizeof(struct fi_ops),
    .close    = tmx_fi_av_close,
    .bind     = tmx_fi_no_bind,
    .control  = tmx_fi_no_control,
    .ops_open = tmx_fi_no_ops_open,
};

static struct fi_ops_av tmx_fi_av_ops = {
    .size      = sizeof(struct fi_ops_av),
    .insert    = tmx_fi_av_insert,
    .insertsvc = tmx_fi_av_insertsvc,
    .insertsym = tmx_fi_av_insertsym,
    .remove    = tmx_fi_av_remove,
    .lookup    = tmx_fi_av_lookup,
    .straddr   = tmx_fi_av_straddr,
};

static int tmx_fi_av_open(struct fid_domain *domain, struct fi_av_attr *attr,
                          struct fid_av **av_p, void *context)
{
    tmx_fi_domain_t *dom = (tmx_fi_domain_t *)domain;
    tmx_fi_av_t     *av;

    if (attr == NULL || av_p == NULL) {
        return -FI_EINVAL;
    }
    if ((attr->type != FI_AV_UNSPEC && attr->type != FI_AV_MAP && attr->type != FI_AV_TABLE) ||
        attr->rx_ctx_bits != 0 || attr->name != NULL || (attr->flags & ~(uint64_t)0) != 0) {
        return attr->flags != 0 ? -FI_ENOSYS : -FI_EINVAL;
    }
    av = calloc(1, sizeof(*av));
    if (av == NULL) {
        return -FI_ENOMEM;
    }
    av->av.fid.fclass  = FI_CLASS_AV;
    av->av.fid.context = context;
    av->av.fid.ops     = &tmx_fi_av_fi_ops;
    av->av.ops         = &tmx_fi_av_ops;
    av->dom            = dom;
    av->type           = attr->type == FI_AV_UNSPEC ? FI_AV_TABLE : attr->type;
    tmx_fi_lock(dom);
    dom->refs++;
    tmx_fi_unlock(dom);
    *av_p = &av->av;
    return 0;
}

/* ---------------------------------------------------------------- completion queue */

static void tmx_fi_cq_progress(tmx_fi_cq_t *cq)
{
    for (int i = 0; i < cq->neps; i++) {
        tmx_fi_ep_progress(cq->eps[i]);
    }
}

/* Sets cq->one_worker from what it derives from: the domain's lock, the format, the endpoints
 * bound (an endpoint's worker is made with it and stays until it is closed and detached).
 * Written only when it changes: with the domain's lock it stays NULL, and fi_cq_read reads it
 * before taking the lock, while another thread may bind or close an endpoint. */
static void tmx_fi_cq_hot(tmx_fi_cq_t *cq)
{
    tmx_worker_h w = (!cq->dom->safe && cq->format == FI_CQ_FORMAT_TAGGED && cq->neps == 1)
                         ? cq->eps[0]->worker
                         : NULL;

    if (cq->one_worker != w) {
        cq->one_worker = w;
    }
}

int tmx_fi_cq_attach(tmx_fi_cq_t *cq, tmx_fi_ep_t *ep)
{
    for (int i = 0; i < cq->neps; i++) {
        if (cq->eps[i] == ep) {
            return 0;
        }
    }
    if (cq->neps == TMX_FI_CQ_MAX_EPS) {
        return -FI_ENOSPC;
    }
    cq->eps[cq->neps++] = ep;
    cq->refs++;
    tmx_fi_cq_hot(cq);
    return 0;
}

void tmx_fi_cq_detach(tmx_fi_cq_t *cq, tmx_fi_ep_t *ep)
{
    for (int i = 0; i < cq->neps; i++) {
        if (cq->eps[i] == ep) {
            cq->eps[i] = cq->eps[--cq->neps];
            cq->refs--;
            tmx_fi_cq_hot(cq);
            return;
        }
    }
}

void tmx_fi_cq_push_grow(tmx_fi_cq_t *cq, void *context, uint64_t flags, size_t len,
                         uint64_t tag, uint64_t data)
{
    /* a completion of tmx cannot be refused */
    size_t                     cap  = cq->cap * 2;
    struct fi_cq_tagged_entry *ring = malloc(cap * sizeof(*ring));

    if (ring == NULL) {
        tmx_fi_cq_push_err(cq, context, flags, len, tag, 0, FI_ENOMEM, TMX_ERR_NO_MEMORY);
        return;
    }
    for (size_t i = 0; i < cq->count; i++) {
        ring[i] = cq->ring[(cq->head + i) & (cq->cap - 1)];
    }
    free(cq->ring);
    cq->ring = ring;
    cq->cap  = cap;
    cq->head = 0;
    tmx_fi_cq_push(cq, context, flags, len, tag, data);
}

int tmx_fi_cq_push_err(tmx_fi_cq_t *cq, void *context, uint64_t flags, size_t len, uint64_t tag,
                       size_t olen, int err, int prov_errno)
{
    tmx_fi_err_t *e = calloc(1, sizeof(*e));

    if (e == NULL) {
        return -FI_ENOMEM;
    }
    e->e.op_context = context;
    e->e.flags      = flags;
    e->e.len        = len;
    e->e.tag        = tag;
    e->e.olen       = olen;
    e->e.err        = err;
    e->e.prov_errno = prov_errno;
    if (cq->err_tail != NULL) {
        cq->err_tail->next = e;
    } else {
        cq->err_head = e;
    }
    cq->err_tail = e;
    return 0;
}

/* Copies min(count, entries) entries in the CQ's format (count > 0, the CQ not empty): the
 * format chosen once, not per entry, and the queue's fields read once and written back once
 * (stores into buf could alias them for the compiler, which reloaded head, count and cap for
 * every entry: 47 instructions for Open MPI's usual read of one entry, callgrind). */
#define TMX_FI_CQ_COPY(_type)                                                                     \
    for (size_t i = 0; i < n; i++) {                                                              \
        memcpy((_type *)buf + i, &ring[(head + i) & mask], sizeof(_type));                        \
    }
static __attribute__((noinline)) ssize_t tmx_fi_cq_copy(tmx_fi_cq_t *cq, void *buf, size_t count)
{
    const struct fi_cq_tagged_entry *ring = cq->ring;
    size_t                           head = cq->head, mask = cq->cap - 1;
    size_t                           n    = count < cq->count ? count : cq->count;

    /* each format is a prefix of the tagged entry: copies of a constant size (no call) */
    switch (cq->format) {
    case FI_CQ_FORMAT_CONTEXT:
        TMX_FI_CQ_COPY(struct fi_cq_entry);
        break;
    case FI_CQ_FORMAT_MSG:
        TMX_FI_CQ_COPY(struct fi_cq_msg_entry);
        break;
    case FI_CQ_FORMAT_DATA:
        TMX_FI_CQ_COPY(struct fi_cq_data_entry);
        break;
    default: /* FI_CQ_FORMAT_TAGGED */
        TMX_FI_CQ_COPY(struct fi_cq_tagged_entry);
        break;
    }
    cq->head = (head + n) & mask;
    cq->count -= n;
    return (ssize_t)n;
}
#undef TMX_FI_CQ_COPY

/* Entries one read may write straight into the caller's buffer: a bound on count, so that
 * e + count stays a pointer into (or just past) a buffer that can exist whatever count a caller
 * passes (a read may return fewer than asked; the rest wait in the ring). */
#define TMX_FI_CQ_DIRECT_MAX 65536

/* Progress of an empty CQ of the tagged format straight into the caller's buffer: the
 * completions it makes go to [e, e + count) (tmx_fi_cq_push), the rest to the ring. Progresses
 * worker alone when given (the CQ's only endpoint's), else every endpoint's. Returns how many
 * entries it wrote. */
static inline __attribute__((always_inline)) ssize_t
tmx_fi_cq_progress_direct(tmx_fi_cq_t *cq, struct fi_cq_tagged_entry *e, size_t count,
                          tmx_worker_h worker)
{
    ssize_t r;

    if (count > TMX_FI_CQ_DIRECT_MAX) {
        count = TMX_FI_CQ_DIRECT_MAX;
    }
    cq->direct     = e;
    cq->direct_end = e + count;
    if (worker != NULL) {
        tmx_worker_progress(worker);
    } else {
        tmx_fi_cq_progress(cq);
    }
    r              = cq->direct - e;
    cq->direct     = NULL;
    cq->direct_end = NULL;
    return r;
}

/* fi_cq_read's general way: manual progress when nothing is ready, then the entries; an
 * error entry first makes -FI_EAVAIL (fi_cq_readerr). A CQ of the tagged format that is empty
 * when the read progresses gets the completions of that progress straight in the caller's
 * buffer (tmx_fi_cq_push), up to count: no ring entry and no copy. Those are returned even
 * when an error entry came in the same progress; the error is the next read's -FI_EAVAIL. */
static __attribute__((noinline)) ssize_t tmx_fi_cq_read_any(tmx_fi_cq_t *cq, void *buf,
                                                            size_t count)
{
    tmx_fi_domain_t *dom = cq->dom;
    ssize_t          r;

    if (buf == NULL && count > 0) {
        return -FI_EINVAL;
    }
    tmx_fi_lock(dom);
    if (cq->count == 0 && cq->err_head == NULL) {
        if (count > 0 && cq->format == FI_CQ_FORMAT_TAGGED) {
            r = tmx_fi_cq_progress_direct(cq, buf, count, NULL);
            if (r > 0) {
                tmx_fi_unlock(dom);
                return r;
            }
        } else {
            tmx_fi_cq_progress(cq);
        }
    }
    if (cq->err_head != NULL) {
        r = -FI_EAVAIL;
    } else if (cq->count == 0 || count == 0) {
        r = -FI_EAGAIN;
    } else {
        r = tmx_fi_cq_copy(cq, buf, count);
    }
    tmx_fi_unlock(dom);
    return r;
}

/*
 * fi_cq_read. Its short way is for a CQ with one endpoint, of the tagged format, without the
 * domain lock (Open MPI's: cq->one_worker), and no error entry: entries already queued (a
 * send done inside fi_tsend) are copied as they are; an empty CQ gets the worker's progress,
 * whose completions go straight into the caller's buffer as in the general way, and nothing
 * else is looked at. No call but tmx's, one register saved (cg_small, bench/README.md h-mpi7:
 * an idle read 172 -> 152 instructions, fi-msg 8 B 1394.6 -> 1338.6 a message). Everything
 * else takes tmx_fi_cq_read_any.
 */
static ssize_t tmx_fi_cq_read(struct fid_cq *fcq, void *buf, size_t count)
{
    tmx_fi_cq_t               *cq = (tmx_fi_cq_t *)fcq;
    struct fi_cq_tagged_entry *e  = buf;
    ssize_t                    r;

    if (cq->one_worker == NULL || cq->err_head != NULL || count == 0 || e == NULL) {
        return tmx_fi_cq_read_any(cq, buf, count);
    }
    if (cq->count != 0) {
        /* entries made outside a read (a send done inside fi_tsend): copied as they are */
        const struct fi_cq_tagged_entry *ring = cq->ring;
        size_t                           head = cq->head, mask = cq->cap - 1;
        size_t                           n    = count < cq->count ? count : cq->count;

        for (size_t i = 0; i < n; i++) {
            e[i] = ring[(head + i) & mask];
        }
        cq->head = (head + n) & mask;
        cq->count -= n;
        return (ssize_t)n;
    }
    r = tmx_fi_cq_progress_direct(cq, e, count, cq->one_worker);
    if (r > 0) {
        return r; /* the ring may hold more when the buffer filled: the next read's */
    }
    return cq->err_head != NULL ? -FI_EAVAIL : -FI_EAGAIN;
}

static ssize_t tmx_fi_cq_readfrom(struct fid_cq *cq, void *buf, size_t count,
                                  fi_addr_t *src_addr)
{
    ssize_t n = tmx_fi_cq_read(cq, buf, count);
    for (ssize_t i = 0; src_addr != NULL && i < n; i++) {
        src_addr[i] = FI_ADDR_NOTAVAIL; /* FI_SOURCE is not offered */
    }
    return n;
}

static ssize_t tmx_fi_cq_readerr_unlocked(struct fid_cq *fcq, struct fi_cq_err_entry *buf, uint64_t flags)
{
    tmx_fi_cq_t  *cq = (tmx_fi_cq_t *)fcq;
    tmx_fi_err_t *e  = cq->err_head;

    (void)flags;
    if (buf == NULL) {
        return -FI_EINVAL;
    }
    if (e == NULL) {
        return -FI_EAGAIN;
    }
    cq->err_head = e->next;
    if (cq->err_head == NULL) {
        cq->err_tail = NULL;
    }
    /* before API 1.5 the entry ends at err_data (no err_data_size) */
    if (tmx_fi_api_version >= FI_VERSION(1, 5)) {
        *buf = e->e;
    } else {
        memcpy(buf, &e->e, offsetof(struct fi_cq_err_entry, err_data_size));
    }
    free(e);
    return 1;
}

static ssize_t tmx_fi_cq_readerr(struct fid_cq *fcq, struct fi_cq_err_entry *buf, uint64_t flags)
{
    tmx_fi_domain_t *dom_ = ((tmx_fi_cq_t *)fcq)->dom;
    ssize_t r_;
    tmx_fi_lock(dom_);
    r_ = tmx_fi_cq_readerr_unlocked(fcq, buf, flags);
    tmx_fi_unlock(dom_);
    return r_;
}

/* A spinning fi_cq_sread (no wait object): reads until something is there, timeout ms pass
 * (-1: no limit), or fi_cq_signal ends the wait (-FI_EAGAIN, as libfabric's own CQs do; a
 * signal that found nobody waiting ends the next wait). */
static ssize_t tmx_fi_cq_sread(struct fid_cq *fcq, void *buf, size_t count, const void *cond,
                               int timeout)
{
    tmx_fi_cq_t    *cq = (tmx_fi_cq_t *)fcq;
    struct timespec t0, t;
    ssize_t         n;

    (void)cond;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        n = tmx_fi_cq_read(fcq, buf, count);
        if (n != -FI_EAGAIN) {
            return n;
        }
        if (__atomic_exchange_n(&cq->signaled, 0, __ATOMIC_ACQ_REL)) {
            return -FI_EAGAIN;
        }
        clock_gettime(CLOCK_MONOTONIC, &t);
        if (timeout >= 0 &&
            (t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 >= timeout) {
            return -FI_EAGAIN;
        }
        sched_yield();
    }
}

static ssize_t tmx_fi_cq_sreadfrom(struct fid_cq *cq, void *buf, size_t count,
                                   fi_addr_t *src_addr, const void *cond, int timeout)
{
    ssize_t n = tmx_fi_cq_sread(cq, buf, count, cond, timeout);
    for (ssize_t i = 0; src_addr != NULL && i < n; i++) {
        src_addr[i] = FI_ADDR_NOTAVAIL;
    }
    return n;
}

static int tmx_fi_cq_signal(struct fid_cq *fcq)
{
    __atomic_store_n(&((tmx_fi_cq_t *)fcq)->signaled, 1, __ATOMIC_RELEASE);
    return 0;
}

static const char *tmx_fi_cq_strerror(struct fid_cq *cq, int prov_errno, const void *err_data,
                                      char *buf, size_t len)
{
    (void)cq;
    (void)err_data;
    const char *s = tmx_status_string((tmx_status_t)prov_errno);
    if (buf != NULL && len > 0) {
        snprintf(buf, len, "%s", s);
        return buf;
    }
    return s;
}

static int tmx_fi_cq_close(struct fid *fid)
{
    tmx_fi_cq_t     *cq  = (tmx_fi_cq_t *)fid;
    tmx_fi_domain_t *dom = cq->dom;

    tmx_fi_lock(dom);
    if (cq->refs > 0) {
        tmx_fi_unlock(dom);
        return -FI_EBUSY;
    }
    dom->refs--;
    tmx_fi_unlock(dom);
    while (cq->err_head != NULL) {
        tmx_fi_err_t *e = cq->err_head;
        cq->err_head    = e->next;
        free(e);
    }
    free(cq->ring);
    free(cq);
    return 0;
}

static struct fi_ops tmx_fi_cq_fi_ops = {
    .size     = sizeof(struct fi_ops),
    .close    = tmx_fi_cq_close,
    .bind     = tmx_fi_no_bind,
    .control  = tmx_fi_no_control,
    .ops_open = tmx_fi_no_ops_open,
};

static struct fi_ops_cq tmx_fi_cq_ops = {
    .size      = sizeof(struct fi_ops_cq),
    .read      = tmx_fi_cq_read,
    .readfrom  = tmx_fi_cq_readfrom,
    .readerr   = tmx_fi_cq_readerr,
    .sread     = tmx_fi_cq_sread,
    .sreadfrom = tmx_fi_cq_sreadfrom,
    .signal    = tmx_fi_cq_signal,
    .strerror  = tmx_fi_cq_strerror,
};

static int tmx_fi_cq_open(struct fid_domain *domain, struct fi_cq_attr *attr,
                          struct fid_cq **cq_p, void *context)
{
    tmx_fi_domain_t *dom = (tmx_fi_domain_t *)domain;
    tmx_fi_cq_t     *cq;
    size_t           esize;

    if (attr == NULL || cq_p == NULL) {
        return -FI_EINVAL;
    }
    switch (attr->format) {
    case FI_CQ_FORMAT_UNSPEC:
    case FI_CQ_FORMAT_TAGGED:
        esize = sizeof(struct fi_cq_tagged_entry);
        break;
    case FI_CQ_FORMAT_CONTEXT:
        esize = sizeof(struct fi_cq_entry);
        break;
    case FI_CQ_FORMAT_MSG:
        esize = sizeof(struct fi_cq_msg_entry);
        break;
    case FI_CQ_FORMAT_DATA:
        esize = sizeof(struct fi_cq_data_entry);
        break;
    default:
        return -FI_EINVAL;
    }
    if (attr->wait_obj != FI_WAIT_NONE && attr->wait_obj != FI_WAIT_UNSPEC) {
        return -FI_ENOSYS;
    }
    if (attr->flags & FI_AFFINITY) {
        return -FI_ENOSYS;
    }
    cq = calloc(1, sizeof(*cq));
    if (cq == NULL) {
        return -FI_ENOMEM;
    }
    /* a power of two, grown when full: attr->size (a minimum) is honoured by growing, so a
     * huge one does not allocate its all at once (2^40 entries asked for was -FI_ENOMEM, and
     * an abort under AddressSanitizer); the ring starts at most at TMX_FI_QUEUE_SIZE */
    cq->cap = 1024;
    while (cq->cap < attr->size && cq->cap < TMX_FI_QUEUE_SIZE) {
        cq->cap *= 2;
    }
    cq->ring = malloc(cq->cap * sizeof(*cq->ring));
    if (cq->ring == NULL) {
        free(cq);
        return -FI_ENOMEM;
    }
    cq->cq.fid.fclass  = FI_CLASS_CQ;
    cq->cq.fid.context = context;
    cq->cq.fid.ops     = &tmx_fi_cq_fi_ops;
    cq->cq.ops         = &tmx_fi_cq_ops;
    cq->dom            = dom;
    cq->format         = attr->format == FI_CQ_FORMAT_UNSPEC ? FI_CQ_FORMAT_TAGGED : attr->format;
    cq->entry_size     = esize;
    tmx_fi_lock(dom);
    dom->refs++;
    tmx_fi_unlock(dom);
    *cq_p = &cq->cq;
    return 0;
}

/* ---------------------------------------------------------------- counters */

int tmx_fi_cntr_attach(tmx_fi_cntr_t *c, tmx_fi_ep_t *ep)
{
    for (int i = 0; i < c->neps; i++) {
        if (c->eps[i] == ep) {
            return 0;
        }
    }
    if (c->neps == TMX_FI_CQ_MAX_EPS) {
        return -FI_ENOSPC;
    }
    c->eps[c->neps++] = ep;
    c->refs++;
    return 0;
}

void tmx_fi_cntr_detach(tmx_fi_cntr_t *c, tmx_fi_ep_t *ep)
{
    for (int i = 0; i < c->neps; i++) {
        if (c->eps[i] == ep) {
            c->eps[i] = c->eps[--c->neps];
            c->refs--;
            return;
        }
    }
}

static uint64_t tmx_fi_cntr_read_unlocked(struct fid_cntr *fc)
{
    tmx_fi_cntr_t *c = (tmx_fi_cntr_t *)fc;
    for (int i = 0; i < c->neps; i++) {
        tmx_fi_ep_progress(c->eps[i]);
    }
    return c->val;
}

static uint64_t tmx_fi_cntr_read(struct fid_cntr *fc)
{
    tmx_fi_domain_t *dom_ = ((tmx_fi_cntr_t *)fc)->dom;
    uint64_t r_;
    tmx_fi_lock(dom_);
    r_ = tmx_fi_cntr_read_unlocked(fc);
    tmx_fi_unlock(dom_);
    return r_;
}

static uint64_t tmx_fi_cntr_readerr_unlocked(struct fid_cntr *fc)
{
    tmx_fi_cntr_t *c = (tmx_fi_cntr_t *)fc;
    for (int i = 0; i < c->neps; i++) {
        tmx_fi_ep_progress(c->eps[i]);
    }
    return c->err;
}

static uint64_t tmx_fi_cntr_readerr(struct fid_cntr *fc)
{
    tmx_fi_domain_t *dom_ = ((tmx_fi_cntr_t *)fc)->dom;
    uint64_t r_;
    tmx_fi_lock(dom_);
    r_ = tmx_fi_cntr_readerr_unlocked(fc);
    tmx_fi_unlock(dom_);
    return r_;
}

static int tmx_fi_cntr_add(struct fid_cntr *fc, uint64_t value)
{
    tmx_fi_cntr_t *c = (tmx_fi_cntr_t *)fc;
    tmx_fi_lock(c->dom);
    c->val += value;
    tmx_fi_unlock(c->dom);
    return 0;
}

static int tmx_fi_cntr_set(struct fid_cntr *fc, uint64_t value)
{
    tmx_fi_cntr_t *c = (tmx_fi_cntr_t *)fc;
    tmx_fi_lock(c->dom);
    c->val = value;
    tmx_fi_unlock(c->dom);
    return 0;
}

static int tmx_fi_cntr_adderr(struct fid_cntr *fc, uint64_t value)
{
    tmx_fi_cntr_t *c = (tmx_fi_cntr_t *)fc;
    tmx_fi_lock(c->dom);
    c->err += value;
    tmx_fi_unlock(c->dom);
    return 0;
}

static int tmx_fi_cntr_seterr(struct fid_cntr *fc, uint64_t value)
{
    tmx_fi_cntr_t *c = (tmx_fi_cntr_t *)fc;
    tmx_fi_lock(c->dom);
    c->err = value;
    tmx_fi_unlock(c->dom);
    return 0;
}

static int tmx_fi_cntr_wait(struct fid_cntr *fc, uint64_t threshold, int timeout)
{
    tmx_fi_cntr_t  *c = (tmx_fi_cntr_t *)fc;
    struct timespec t0, t;
    uint64_t        err0, val, err;

    tmx_fi_lock(c->dom);
    err0 = c->err;
    tmx_fi_unlock(c->dom);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        tmx_fi_lock(c->dom);
        val = tmx_fi_cntr_read_unlocked(fc);
        err = c->err;
        tmx_fi_unlock(c->dom);
        if (val >= threshold) {
            break;
        }
        if (err != err0) {
            return -FI_EAVAIL;
        }
        clock_gettime(CLOCK_MONOTONIC, &t);
        if (timeout >= 0 &&
            (t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 >= timeout) {
            return -FI_ETIMEDOUT;
        }
        sched_yield();
    }
    return 0;
}

static int tmx_fi_cntr_close(struct fid *fid)
{
    tmx_fi_cntr_t   *c   = (tmx_fi_cntr_t *)fid;
    tmx_fi_domain_t *dom = c->dom;

    tmx_fi_lock(dom);
    if (c->refs > 0) {
        tmx_fi_unlock(dom);
        return -FI_EBUSY;
    }
    dom->refs--;
    tmx_fi_unlock(dom);
    free(c);
    return 0;
}

static struct fi_ops tmx_fi_cntr_fi_ops = {
    .size     = sizeof(struct fi_ops),
    .close    = tmx_fi_cntr_close,
    .bind     = tmx_fi_no_bind,
    .control  = tmx_fi_no_control,
    .ops_open = tmx_fi_no_ops_open,
};

static struct fi_ops_cntr tmx_fi_cntr_ops = {
    .size    = sizeof(struct fi_ops_cntr),
    .read    = tmx_fi_cntr_read,
    .readerr = tmx_fi_cntr_readerr,
    .add     = tmx_fi_cntr_add,
    .set     = tmx_fi_cntr_set,
    .wait    = tmx_fi_cntr_wait,
    .adderr  = tmx_fi_cntr_adderr,
    .seterr  = tmx_fi_cntr_seterr,
};

static int tmx_fi_cntr_open(struct fid_domain *domain, struct fi_cntr_attr *attr,
                            struct fid_cntr **cntr_p, void *context)
{
    tmx_fi_domain_t *dom = (tmx_fi_domain_t *)domain;
    tmx_fi_cntr_t   *c;

    if (cntr_p == NULL) {
        return -FI_EINVAL;
    }
    if (attr != NULL && ((attr->events != FI_CNTR_EVENTS_COMP) ||
                         (attr->wait_obj != FI_WAIT_NONE && attr->wait_obj != FI_WAIT_UNSPEC))) {
        return -FI_ENOSYS;
    }
    c = calloc(1, sizeof(*c));
    if (c == NULL) {
        return -FI_ENOMEM;
    }
    c->cntr.fid.fclass  = FI_CLASS_CNTR;
    c->cntr.fid.context = context;
    c->cntr.fid.ops     = &tmx_fi_cntr_fi_ops;
    c->cntr.ops         = &tmx_fi_cntr_ops;
    c->dom              = dom;
    tmx_fi_lock(dom);
    dom->refs++;
    tmx_fi_unlock(dom);
    *cntr_p = &c->cntr;
    return 0;
}

/* ---------------------------------------------------------------- memory registration */

/* tmx needs no registration from its user (mr_mode 0): a registration only gives a key. */
typedef struct tmx_fi_mr {
    struct fid_mr    mr;
    tmx_fi_domain_t *dom;
} tmx_fi_mr_t;

static int tmx_fi_mr_close(struct fid *fid)
{
    tmx_fi_mr_t *mr = (tmx_fi_mr_t *)fid;
    tmx_fi_lock(mr->dom);
    mr->dom->refs--;
    tmx_fi_unlock(mr->dom);
    free(mr);
    return 0;
}

static struct fi_ops tmx_fi_mr_fi_ops = {
    .size     = sizeof(struct fi_ops),
    .close    = tmx_fi_mr_close,
    .bind     = tmx_fi_no_bind,
    .control  = tmx_fi_no_control,
    .ops_open = tmx_fi_no_ops_open,
};

static int tmx_fi_mr_regattr(struct fid *fid, const struct fi_mr_attr *attr, uint64_t flags,
                             struct fid_mr **mr_p)
{
    tmx_fi_domain_t *dom = (tmx_fi_domain_t *)fid;
    tmx_fi_mr_t     *mr;

    (void)flags;
    if (attr == NULL || mr_p == NULL || fid->fclass != FI_CLASS_DOMAIN) {
        return -FI_EINVAL;
    }
    if (attr->iface != FI_HMEM_SYSTEM) {
        return -FI_ENOSYS;
    }
    mr = calloc(1, sizeof(*mr));
    if (mr == NULL) {
        return -FI_ENOMEM;
    }
    mr->mr.fid.fclass  = FI_CLASS_MR;
    mr->mr.fid.context = attr->context;
    mr->mr.fid.ops     = &tmx_fi_mr_fi_ops;
    mr->mr.mem_desc    = NULL;
    mr->mr.key         = attr->requested_key;
    mr->dom            = dom;
    tmx_fi_lock(dom);
    dom->refs++;
    tmx_fi_unlock(dom);
    *mr_p = &mr->mr;
    return 0;
}

static int tmx_fi_mr_regv(struct fid *fid, const struct iovec *iov, size_t count,
                          uint64_t access, uint64_t offset, uint64_t requested_key,
                          uint64_t flags, struct fid_mr **mr, void *context)
{
    struct fi_mr_attr attr;
    memset(&attr, 0, sizeof(attr));
    attr.mr_iov        = iov;
    attr.iov_count     = count;
    attr.access        = access;
    attr.offset        = offset;
    attr.requested_key = requested_key;
    attr.context       = context;
    attr.iface         = FI_HMEM_SYSTEM;
    return tmx_fi_mr_regattr(fid, &attr, flags, mr);
}

static int tmx_fi_mr_reg(struct fid *fid, const void *buf, size_t len, uint64_t access,
                         uint64_t offset, uint64_t requested_key, uint64_t flags,
                         struct fid_mr **mr, void *context)
{
    struct iovec iov = {.iov_base = (void *)buf, .iov_len = len};
    return tmx_fi_mr_regv(fid, &iov, 1, access, offset, requested_key, flags, mr, context);
}

static struct fi_ops_mr tmx_fi_mr_ops = {
    .size    = sizeof(struct fi_ops_mr),
    .reg     = tmx_fi_mr_reg,
    .regv    = tmx_fi_mr_regv,
    .regattr = tmx_fi_mr_regattr,
};

/* ---------------------------------------------------------------- domain */

static int tmx_fi_domain_close(struct fid *fid)
{
    tmx_fi_domain_t *dom = (tmx_fi_domain_t *)fid;

    tmx_fi_lock(dom);
    if (dom->refs > 0) {
        tmx_fi_unlock(dom);
        return -FI_EBUSY;
    }
    tmx_fi_unlock(dom);
    tmx_context_destroy(dom->ctx);
    pthread_mutex_destroy(&dom->lock);
    dom->fab->refs--;
    free(dom);
    return 0;
}

static int tmx_fi_no_scalable_ep(struct fid_domain *domain, struct fi_info *info,
                                 struct fid_ep **sep, void *context)
{
    (void)domain;
    (void)info;
    (void)sep;
    (void)context;
    return -FI_ENOSYS;
}

static int tmx_fi_no_poll_open(struct fid_domain *domain, struct fi_poll_attr *attr,
                               struct fid_poll **pollset)
{
    (void)domain;
    (void)attr;
    (void)pollset;
    return -FI_ENOSYS;
}

static int tmx_fi_no_stx_ctx(struct fid_domain *domain, struct fi_tx_attr *attr,
                             struct fid_stx **stx, void *context)
{
    (void)domain;
    (void)attr;
    (void)stx;
    (void)context;
    return -FI_ENOSYS;
}

static int tmx_fi_no_srx_ctx(struct fid_domain *domain, struct fi_rx_attr *attr,
                             struct fid_ep **rx_ep, void *context)
{
    (void)domain;
    (void)attr;
    (void)rx_ep;
    (void)context;
    return -FI_ENOSYS;
}

static int tmx_fi_no_query_atomic(struct fid_domain *domain, enum fi_datatype datatype,
                                  enum fi_op op, struct fi_atomic_attr *attr, uint64_t flags)
{
    (void)domain;
    (void)datatype;
    (void)op;
    (void)attr;
    (void)flags;
    return -FI_ENOSYS;
}

static int tmx_fi_no_query_collective(struct fid_domain *domain, enum fi_collective_op coll,
                                      struct fi_collective_attr *attr, uint64_t flags)
{
    (void)domain;
    (void)coll;
    (void)attr;
    (void)flags;
    return -FI_ENOSYS;
}

static int tmx_fi_endpoint2(struct fid_domain *domain, struct fi_info *info, struct fid_ep **ep,
                            uint64_t flags, void *context)
{
    if (flags != 0) {
        return -FI_EINVAL;
    }
    return tmx_fi_endpoint(domain, info, ep, context);
}

static struct fi_ops tmx_fi_domain_fi_ops = {
    .size     = sizeof(struct fi_ops),
    .close    = tmx_fi_domain_close,
    .bind     = tmx_fi_no_bind,
    .control  = tmx_fi_no_control,
    .ops_open = tmx_fi_no_ops_open,
};

static struct fi_ops_domain tmx_fi_domain_ops = {
    .size             = sizeof(struct fi_ops_domain),
    .av_open          = tmx_fi_av_open,
    .cq_open          = tmx_fi_cq_open,
    .endpoint         = tmx_fi_endpoint,
    .scalable_ep      = tmx_fi_no_scalable_ep,
    .cntr_open        = tmx_fi_cntr_open,
    .poll_open        = tmx_fi_no_poll_open,
    .stx_ctx          = tmx_fi_no_stx_ctx,
    .srx_ctx          = tmx_fi_no_srx_ctx,
    .query_atomic     = tmx_fi_no_query_atomic,
    .query_collective = tmx_fi_no_query_collective,
    .endpoint2        = tmx_fi_endpoint2,
};

static int tmx_fi_domain(struct fid_fabric *fabric, struct fi_info *info,
                         struct fid_domain **dom_p, void *context)
{
    tmx_fi_fabric_t *fab = (tmx_fi_fabric_t *)fabric;
    tmx_fi_domain_t *dom;
    tmx_status_t     s;

    if (info == NULL || dom_p == NULL) {
        return -FI_EINVAL;
    }
    if (info->domain_attr != NULL && info->domain_attr->name != NULL &&
        strcmp(info->domain_attr->name, TMX_FI_NAME) != 0) {
        return -FI_EINVAL;
    }
    dom = calloc(1, sizeof(*dom));
    if (dom == NULL) {
        return -FI_ENOMEM;
    }
    s = tmx_context_create(NULL, &dom->ctx);
    if (s != TMX_OK) {
        free(dom);
        return -tmx_fi_errno(s);
    }
    dom->safe = info->domain_attr != NULL && tmx_fi_threads_any(info->domain_attr->threading);
    pthread_mutex_init(&dom->lock, NULL);
    dom->domain.fid.fclass  = FI_CLASS_DOMAIN;
    dom->domain.fid.context = context;
    dom->domain.fid.ops     = &tmx_fi_domain_fi_ops;
    dom->domain.ops         = &tmx_fi_domain_ops;
    dom->domain.mr          = &tmx_fi_mr_ops;
    dom->fab                = fab;
    fab->refs++;
    *dom_p = &dom->domain;
    return 0;
}

/* ---------------------------------------------------------------- fabric */

static int tmx_fi_fabric_close(struct fid *fid)
{
    tmx_fi_fabric_t *fab = (tmx_fi_fabric_t *)fid;
    if (fab->refs > 0) {
        return -FI_EBUSY;
    }
    free(fab);
    return 0;
}

static int tmx_fi_no_passive_ep(struct fid_fabric *fabric, struct fi_info *info,
                                struct fid_pep **pep, void *context)
{
    (void)fabric;
    (void)info;
    (void)pep;
    (void)context;
    return -FI_ENOSYS;
}

static int tmx_fi_no_wait_open(struct fid_fabric *fabric, struct fi_wait_attr *attr,
                               struct fid_wait **waitset)
{
    (void)fabric;
    (void)attr;
    (void)waitset;
    return -FI_ENOSYS;
}

static int tmx_fi_trywait(struct fid_fabric *fabric, struct fid **fids, int count)
{
    (void)fabric;
    (void)fids;
    (void)count;
    return -FI_ENOSYS;
}

static int tmx_fi_domain2(struct fid_fabric *fabric, struct fi_info *info,
                          struct fid_domain **dom, uint64_t flags, void *context)
{
    if (flags != 0) {
        return -FI_EINVAL;
    }
    return tmx_fi_domain(fabric, info, dom, context);
}

static struct fi_ops tmx_fi_fabric_fi_ops = {
    .size     = sizeof(struct fi_ops),
    .close    = tmx_fi_fabric_close,
    .bind     = tmx_fi_no_bind,
    .control  = tmx_fi_no_control,
    .ops_open = tmx_fi_no_ops_open,
};

static struct fi_ops_fabric tmx_fi_fabric_ops = {
    .size       = sizeof(struct fi_ops_fabric),
    .domain     = tmx_fi_domain,
    .passive_ep = tmx_fi_no_passive_ep,
    .eq_open    = tmx_fi_eq_open,
    .wait_open  = tmx_fi_no_wait_open,
    .trywait    = tmx_fi_trywait,
    .domain2    = tmx_fi_domain2,
};

static int tmx_fi_fabric(struct fi_fabric_attr *attr, struct fid_fabric **fabric_p,
                         void *context)
{
    tmx_fi_fabric_t *fab;

    if (attr == NULL || fabric_p == NULL ||
        (attr->name != NULL && strcmp(attr->name, TMX_FI_NAME) != 0)) {
        return -FI_EINVAL;
    }
    fab = calloc(1, sizeof(*fab));
    if (fab == NULL) {
        return -FI_ENOMEM;
    }
    fab->fabric.fid.fclass  = FI_CLASS_FABRIC;
    fab->fabric.fid.context = context;
    fab->fabric.fid.ops     = &tmx_fi_fabric_fi_ops;
    fab->fabric.ops         = &tmx_fi_fabric_ops;
    *fabric_p = &fab->fabric;
    return 0;
}

tmx_fi_domain_t *tmx_fi_fid_domain(const struct fid *fid)
{
    switch (fid->fclass) {
    case FI_CLASS_CQ:
        return fid->ops == &tmx_fi_cq_fi_ops ? ((const tmx_fi_cq_t *)fid)->dom : NULL;
    case FI_CLASS_AV:
        return fid->ops == &tmx_fi_av_fi_ops ? ((const tmx_fi_av_t *)fid)->dom : NULL;
    case FI_CLASS_CNTR:
        return fid->ops == &tmx_fi_cntr_fi_ops ? ((const tmx_fi_cntr_t *)fid)->dom : NULL;
    default:
        return NULL;
    }
}

int tmx_fi_fid_is_eq(const struct fid *fid)
{
    return fid->fclass == FI_CLASS_EQ && fid->ops == &tmx_fi_eq_fi_ops;
}

static void tmx_fi_cleanup(void)
{
}

struct fi_provider tmx_fi_prov = {
    .version    = TMX_FI_VERSION,
    .fi_version = FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION),
    .name       = TMX_FI_NAME,
    .getinfo    = tmx_fi_getinfo,
    .fabric     = tmx_fi_fabric,
    .cleanup    = tmx_fi_cleanup,
};

FI_EXT_INI
{
    return &tmx_fi_prov;
}
