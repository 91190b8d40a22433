/*
 * The verbs provider: devices (one per active port), addresses, PD, MR, CQ, the completion
 * channel, async events, address handles, and the ops table. See verbs.h.
 */
#define _GNU_SOURCE
#include "config.h"

#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef TMX_VERBS_HAVE_MLX5DV_OOO
#include <infiniband/mlx5dv.h>
#endif

#include "prov/verbs/verbs.h"
#include "util/log.h"
#include "util/time.h"

int tmx_verbs_force_cq_ex;

/* ---------------------------------------------------------------- helpers */

tmx_status_t tmx_verbs_status(int err)
{
    switch (err) {
    case 0:
        return TMX_OK;
    case ENOMEM:
    case EAGAIN:
    case ENOSPC:
        return TMX_ERR_NO_RESOURCE;
    case EINVAL:
    case EFAULT:
    case ERANGE:
        return TMX_ERR_INVALID_PARAM;
    case EOPNOTSUPP:
    case ENOSYS:
        return TMX_ERR_UNSUPPORTED;
    case EBUSY:
        return TMX_ERR_BUSY;
    default:
        return TMX_ERR_IO;
    }
}

static unsigned tmx_verbs_mtu_bytes(unsigned mtu)
{
    return mtu >= IBV_MTU_256 && mtu <= IBV_MTU_4096 ? 128u << mtu : 0;
}

static const char *tmx_verbs_gid_type_name(uint32_t type)
{
    switch (type) {
    case IBV_GID_TYPE_IB:      return "IB";
    case IBV_GID_TYPE_ROCE_V1: return "RoCE v1";
    case IBV_GID_TYPE_ROCE_V2: return "RoCE v2";
    }
    return "unknown";
}

static const char *tmx_verbs_link_name(unsigned ll)
{
    switch (ll) {
    case IBV_LINK_LAYER_INFINIBAND: return "InfiniBand";
    case IBV_LINK_LAYER_ETHERNET:   return "Ethernet";
    }
    return "unspecified";
}

static void tmx_verbs_gid_str(const uint8_t *g, char *buf, size_t len)
{
    snprintf(buf, len,
             "%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x", g[0],
             g[1], g[2], g[3], g[4], g[5], g[6], g[7], g[8], g[9], g[10], g[11], g[12], g[13],
             g[14], g[15]);
}

static int tmx_verbs_gid_zero(const uint8_t *g)
{
    for (int i = 0; i < 16; i++) {
        if (g[i] != 0) {
            return 0;
        }
    }
    return 1;
}

static int tmx_verbs_gid_ipv4(const uint8_t *g)
{
    for (int i = 0; i < 10; i++) {
        if (g[i] != 0) {
            return 0;
        }
    }
    return g[10] == 0xff && g[11] == 0xff;
}

static int tmx_verbs_gid_link_local(const uint8_t *g)
{
    return g[0] == 0xfe && (g[1] & 0xc0) == 0x80;
}

/* ---------------------------------------------------------------- object table */

tmx_status_t tmx_verbs_obj_add(tmx_verbs_dev_t *dev, void *ptr, uint8_t type, uint32_t *obj_p,
                               uint16_t *gen_p)
{
    uint32_t i;

    for (i = dev->obj_hint; i < dev->num_objs && dev->objs[i].ptr != NULL; i++) {
    }
    if (i == dev->num_objs) {
        if (dev->num_objs == TMX_VERBS_MAX_OBJS) {
            return TMX_ERR_NO_RESOURCE;
        }
        if (dev->num_objs == dev->objs_cap) {
            uint32_t         cap = dev->objs_cap ? dev->objs_cap * 2 : 64;
            tmx_verbs_obj_t *o   = realloc(dev->objs, cap * sizeof(*o));
            if (o == NULL) {
                return TMX_ERR_NO_MEMORY;
            }
            memset(o + dev->objs_cap, 0, (cap - dev->objs_cap) * sizeof(*o));
            dev->objs     = o;
            dev->objs_cap = cap;
        }
        dev->num_objs++;
    }
    dev->objs[i].ptr  = ptr;
    dev->objs[i].type = type;
    dev->objs[i].gen  = (uint16_t)((dev->objs[i].gen + 1) & 0xfffu);
    dev->obj_hint     = i + 1;
    *obj_p            = i;
    *gen_p            = dev->objs[i].gen;
    return TMX_OK;
}

void tmx_verbs_obj_del(tmx_verbs_dev_t *dev, uint32_t obj)
{
    if (obj < dev->num_objs) {
        dev->objs[obj].ptr = NULL;
        if (obj < dev->obj_hint) {
            dev->obj_hint = obj;
        }
    }
}

void *tmx_verbs_obj_get(tmx_verbs_dev_t *dev, uint32_t obj, unsigned gen, uint8_t type)
{
    if (obj >= dev->num_objs || dev->objs[obj].ptr == NULL || dev->objs[obj].gen != gen ||
        dev->objs[obj].type != type) {
        return NULL;
    }
    return dev->objs[obj].ptr;
}

/* ---------------------------------------------------------------- device selection */

/* TMX_VERBS_DEVICES: "" takes every port; otherwise a comma list of NAME (every port of it) or
 * NAME:PORT. 1 when the port is selected. */
static int tmx_verbs_selected(const char *list, const char *name, unsigned port)
{
    const char *p = list;
    size_t      n = strlen(name);

    if (list == NULL || list[0] == '\0') {
        return 1;
    }
    while (*p != '\0') {
        const char *end = strchr(p, ',');
        size_t      len = end != NULL ? (size_t)(end - p) : strlen(p);

        if (len >= n && strncmp(p, name, n) == 0) {
            if (len == n) {
                return 1;
            }
            if (p[n] == ':') {
                char  num[8];
                char *e;
                long  v;
                if (len - n - 1 == 0 || len - n - 1 >= sizeof(num)) {
                    goto next;
                }
                memcpy(num, p + n + 1, len - n - 1);
                num[len - n - 1] = '\0';
                v                = strtol(num, &e, 10);
                if (*e == '\0' && v == (long)port) {
                    return 1;
                }
            }
        }
next:
        p += len + (end != NULL);
    }
    return 0;
}

/* Says once per name in TMX_VERBS_DEVICES that no device has it. */
static void tmx_verbs_filter_check(const char *list, struct ibv_device **devs, int num)
{
    const char *p = list;

    while (p != NULL && *p != '\0') {
        const char *end   = strchr(p, ',');
        size_t      len   = end != NULL ? (size_t)(end - p) : strlen(p);
        const char *colon = memchr(p, ':', len);
        size_t      nlen  = colon != NULL ? (size_t)(colon - p) : len;
        int         found = 0;

        for (int i = 0; i < num; i++) {
            const char *name = ibv_get_device_name(devs[i]);
            if (strlen(name) == nlen && strncmp(name, p, nlen) == 0) {
                found = 1;
            }
        }
        if (!found) {
            tmx_warn("TMX_VERBS_DEVICES names '%.*s': no RDMA device has that name", (int)len, p);
        }
        p += len + (end != NULL);
    }
}

/* Reads a GID table entry: 0 and *gid, *type, or -1 for an empty or unreadable entry. */
static int tmx_verbs_query_gid(struct ibv_context *ctx, uint8_t port, int index,
                               union ibv_gid *gid, uint32_t *type)
{
#ifdef HAVE__IBV_QUERY_GID_EX
    struct ibv_gid_entry e;

    if (ibv_query_gid_ex(ctx, port, (uint32_t)index, &e, 0) != 0) {
        return -1;
    }
    *gid  = e.gid;
    *type = e.gid_type;
#else
    char path[PATH_MAX + 64];
    char buf[32] = "";
    FILE *f;

    if (ibv_query_gid(ctx, port, index, gid) != 0) {
        return -1;
    }
    *type = IBV_GID_TYPE_IB;
    snprintf(path, sizeof(path), "%s/ports/%u/gid_attrs/types/%d", ctx->device->ibdev_path,
             port, index);
    f = fopen(path, "r");
    if (f != NULL) {
        if (fgets(buf, sizeof(buf), f) != NULL) {
            *type = strstr(buf, "v2") != NULL ? IBV_GID_TYPE_ROCE_V2 : IBV_GID_TYPE_ROCE_V1;
        }
        fclose(f);
    }
#endif
    return tmx_verbs_gid_zero(gid->raw) ? -1 : 0;
}

/* The GID of the port: InfiniBand index 0; RoCE TMX_VERBS_GID_INDEX, or the RoCE v2 GID of an
 * IPv4 address (what rdma_cm picks for an IPv4 peer), else another routable RoCE v2 one, else
 * any RoCE v2 one, else RoCE v1. -1 (logged) when there is none or the forced one is bad. */
static int tmx_verbs_pick_gid(tmx_verbs_dev_t *dev)
{
    int           best = -1, best_rank = 0;
    union ibv_gid gid;
    uint32_t      type;
    int           forced = dev->cfg->verbs_gid_index;

    if (forced >= 0) {
        if (forced >= dev->port_attr.gid_tbl_len ||
            tmx_verbs_query_gid(dev->ctx, dev->port, forced, &gid, &type) != 0) {
            tmx_error("TMX_VERBS_GID_INDEX=%d: %s port %u has no GID at that index (its table "
                      "has %d entries); the port is not used", forced, dev->ibdev, dev->port,
                      dev->port_attr.gid_tbl_len);
            return -1;
        }
        dev->gid       = gid;
        dev->gid_type  = type;
        dev->gid_index = forced;
        return 0;
    }
    if (dev->port_attr.link_layer != IBV_LINK_LAYER_ETHERNET) {
        if (tmx_verbs_query_gid(dev->ctx, dev->port, 0, &gid, &type) != 0) {
            memset(&gid, 0, sizeof(gid)); /* InfiniBand works by LID without one */
            type = IBV_GID_TYPE_IB;
        }
        dev->gid       = gid;
        dev->gid_type  = IBV_GID_TYPE_IB;
        dev->gid_index = 0;
        return 0;
    }
    for (int i = 0; i < dev->port_attr.gid_tbl_len; i++) {
        int rank;

        if (tmx_verbs_query_gid(dev->ctx, dev->port, i, &gid, &type) != 0) {
            continue;
        }
        if (type == IBV_GID_TYPE_ROCE_V2) {
            rank = tmx_verbs_gid_ipv4(gid.raw) ? 4 : !tmx_verbs_gid_link_local(gid.raw) ? 3 : 2;
        } else {
            rank = 1;
        }
        if (rank > best_rank) {
            best_rank      = rank;
            best           = i;
            dev->gid       = gid;
            dev->gid_type  = type;
        }
        if (best_rank == 4) {
            /* nothing ranks higher, and the first of a rank wins: the rest of the table (rxe
             * has 1024 entries, each an ioctl, most empty) cannot change the choice */
            break;
        }
    }
    if (best < 0) {
        tmx_warn("%s port %u (Ethernet): no GID in its table (no IP address on its netdev?); "
                 "the port is not used", dev->ibdev, dev->port);
        return -1;
    }
    dev->gid_index = best;
    return 0;
}

/* The largest inline send a QP of this device takes (up to TMX_VERBS_MAX_INLINE), found by
 * creating one: verbs has no query for it. */
static uint32_t tmx_verbs_probe_inline(tmx_verbs_dev_t *dev)
{
    static const uint32_t tries[] = {TMX_VERBS_MAX_INLINE, 128, 64, 32, 0};
    struct ibv_pd        *pd      = ibv_alloc_pd(dev->ctx);
    struct ibv_cq        *cq      = pd != NULL ? ibv_create_cq(dev->ctx, 4, NULL, NULL, 0) : NULL;
    uint32_t              got     = 0;

    for (size_t i = 0; cq != NULL && i < sizeof(tries) / sizeof(tries[0]); i++) {
        struct ibv_qp_init_attr ia;
        struct ibv_qp          *qp;

        memset(&ia, 0, sizeof(ia));
        ia.send_cq             = cq;
        ia.recv_cq             = cq;
        ia.qp_type             = IBV_QPT_RC;
        ia.cap.max_send_wr     = 4;
        ia.cap.max_recv_wr     = 4;
        ia.cap.max_send_sge    = dev->max_send_sge;
        ia.cap.max_recv_sge    = 1;
        ia.cap.max_inline_data = tries[i];
        qp = ibv_create_qp(pd, &ia);
        if (qp != NULL) {
            got = ia.cap.max_inline_data < TMX_VERBS_MAX_INLINE ? ia.cap.max_inline_data
                                                                 : TMX_VERBS_MAX_INLINE;
            if (got < tries[i]) {
                got = tries[i];
            }
            ibv_destroy_qp(qp);
            break;
        }
    }
    if (cq != NULL) {
        ibv_destroy_cq(cq);
    }
    if (pd != NULL) {
        ibv_dealloc_pd(pd);
    }
    return got;
}

/* NUMA node and PCI address from sysfs (a software device such as rxe has neither). */
static void tmx_verbs_locality(tmx_verbs_dev_t *dev)
{
    char  path[PATH_MAX + 32], link[PATH_MAX];
    FILE *f;
    int   node = -1;
    ssize_t n;

    dev->super.attr.numa_node  = -1;
    dev->super.attr.pci_addr[0] = '\0';
    snprintf(path, sizeof(path), "%s/device/numa_node", dev->ctx->device->ibdev_path);
    f = fopen(path, "r");
    if (f != NULL) {
        if (fscanf(f, "%d", &node) == 1 && node >= 0) {
            dev->super.attr.numa_node = node;
        }
        fclose(f);
    }
    snprintf(path, sizeof(path), "%s/device", dev->ctx->device->ibdev_path);
    n = readlink(path, link, sizeof(link) - 1);
    if (n > 0) {
        const char  *base;
        unsigned     dom, bus, slot, fn;
        char         tail;
        link[n] = '\0';
        base    = strrchr(link, '/');
        base    = base != NULL ? base + 1 : link;
        if (sscanf(base, "%x:%x:%x.%x%c", &dom, &bus, &slot, &fn, &tail) == 4) {
            snprintf(dev->super.attr.pci_addr, sizeof(dev->super.attr.pci_addr),
                     "%04x:%02x:%02x.%x", dom & 0xffffu, bus & 0xffu, slot & 0x1fu, fn & 7u);
        }
    }
}

/* The optional verbs the device offers, from rdma-core (configure) and the device query. */
static void tmx_verbs_optional_caps(tmx_verbs_dev_t *dev)
{
    tmx_dev_attr_t *a   = &dev->super.attr;
    size_t          off = 0;

#define TMX_VERBS_ABSENT(...)                                                                      \
    off += (size_t)snprintf(dev->absent + off, off < sizeof(dev->absent) ? sizeof(dev->absent) - off \
                                                                         : 0, __VA_ARGS__);         \
    if (off >= sizeof(dev->absent)) {                                                              \
        off = sizeof(dev->absent);                                                                 \
    }

    dev->absent[0] = '\0';
#ifdef TMX_VERBS_HAVE_TM
    if (dev->attr_ex.tm_caps.max_num_tags > 0 && (dev->attr_ex.tm_caps.flags & IBV_TM_CAP_RC)) {
        dev->tm = 1;
        a->caps |= TMX_DEV_CAP_TM;
        a->tm.max_num_tags      = dev->attr_ex.tm_caps.max_num_tags;
        a->tm.max_ops           = dev->attr_ex.tm_caps.max_ops;
        a->tm.max_sge           = dev->attr_ex.tm_caps.max_sge;
        a->tm.max_rndv_hdr_size = dev->attr_ex.tm_caps.max_rndv_hdr_size;
        if (a->tm.max_rndv_hdr_size >= sizeof(tmx_tmh_t) + sizeof(tmx_rvh_t)) {
            a->caps |= TMX_DEV_CAP_TM_RNDV;
        }
    } else {
        TMX_VERBS_ABSENT("tm: the device reports no tag-matching SRQ (tm_caps.max_num_tags %u); ",
                         dev->attr_ex.tm_caps.max_num_tags);
    }
#else
    TMX_VERBS_ABSENT("tm: rdma-core was built without IBV_SRQT_TM; ");
#endif
#ifdef TMX_VERBS_HAVE_XRC
    if (dev->attr_ex.orig_attr.device_cap_flags & IBV_DEVICE_XRC) {
        dev->xrc = 1;
        a->caps |= TMX_DEV_CAP_XRC;
    } else {
        TMX_VERBS_ABSENT("xrc: the device reports no IBV_DEVICE_XRC; ");
    }
#else
    TMX_VERBS_ABSENT("xrc: rdma-core has no ibv_open_xrcd; ");
#endif
#ifdef HAVE_IBV_QUERY_QP_DATA_IN_ORDER
#if HAVE_DECL_IBV_QUERY_QP_DATA_IN_ORDER_RETURN_CAPS
    dev->dio_form = 2;
#else
    dev->dio_form = 1;
#endif
#else
    TMX_VERBS_ABSENT("data-in-order: rdma-core has no ibv_query_qp_data_in_order (v36+); ");
#endif
#ifdef TMX_VERBS_HAVE_MLX5DV_OOO
    {
        struct mlx5dv_context dv;

        memset(&dv, 0, sizeof(dv));
        dv.comp_mask = MLX5DV_CONTEXT_MASK_OOO_RECV_WRS;
        if (!mlx5dv_is_supported(dev->ctx->device)) {
            TMX_VERBS_ABSENT("ooo: not an mlx5 device; ");
        } else if (mlx5dv_query_device(dev->ctx, &dv) != 0 ||
                   !(dv.comp_mask & MLX5DV_CONTEXT_MASK_OOO_RECV_WRS) ||
                   dv.ooo_recv_wrs_caps.max_rc == 0) {
            TMX_VERBS_ABSENT("ooo: the device reports no out-of-order receive WRs on RC; ");
        } else if (dev->cfg->ooo == 0) {
            TMX_VERBS_ABSENT("ooo: offered by the device, off by TMX_OOO=no; ");
        } else {
            /* mlx5dv sets it when a QP is made, not at INIT -> RTR: every RC QP of the device
             * has it, and the core asks for it at RTR whenever TMX_OOO allows and the cap is
             * there (tmx_ep_ooo_wanted), so both agree. */
            dev->ooo = 1;
            a->caps |= TMX_DEV_CAP_OOO;
        }
    }
#else
    TMX_VERBS_ABSENT("ooo: rdma-core has no MLX5DV_QP_CREATE_OOO_DP (v55+)");
#endif
#undef TMX_VERBS_ABSENT
}

/* Opens port of the device: 0, or -1 (logged) when the port is not usable. */
static int tmx_verbs_port_open(const tmx_prov_t *prov, const tmx_config_t *cfg,
                               struct ibv_device *ibdev, uint8_t port, tmx_verbs_dev_t **dev_p)
{
    tmx_verbs_dev_t *dev = calloc(1, sizeof(*dev));
    tmx_dev_attr_t  *a;
    int              err;

    if (dev == NULL) {
        return -1;
    }
    dev->cfg  = cfg;
    dev->port = port;
    snprintf(dev->ibdev, sizeof(dev->ibdev), "%s", ibv_get_device_name(ibdev));
    dev->ctx = ibv_open_device(ibdev);
    if (dev->ctx == NULL) {
        tmx_warn("verbs: cannot open %s: %s", dev->ibdev, strerror(errno));
        goto err_free;
    }
    err = ibv_query_port(dev->ctx, port, &dev->port_attr);
    if (err != 0) {
        tmx_warn("verbs: %s port %u: query failed: %s", dev->ibdev, port, strerror(err));
        goto err_close;
    }
    if (dev->port_attr.state != IBV_PORT_ACTIVE) {
        tmx_info("verbs: %s port %u is not active (state %s): not used", dev->ibdev, port,
                 ibv_port_state_str(dev->port_attr.state));
        goto err_close;
    }
    memset(&dev->attr_ex, 0, sizeof(dev->attr_ex));
    err = ibv_query_device_ex(dev->ctx, NULL, &dev->attr_ex);
    if (err != 0) {
        tmx_warn("verbs: %s: device query failed: %s", dev->ibdev, strerror(err));
        goto err_close;
    }
    if (tmx_verbs_pick_gid(dev) != 0) {
        goto err_close;
    }
    dev->max_send_sge = dev->attr_ex.orig_attr.max_sge < TMX_VERBS_MAX_SGE
                            ? (unsigned)dev->attr_ex.orig_attr.max_sge
                            : TMX_VERBS_MAX_SGE;
    dev->max_recv_sge = dev->attr_ex.orig_attr.max_sge < TMX_VERBS_MAX_SGE + 1
                            ? (unsigned)dev->attr_ex.orig_attr.max_sge
                            : TMX_VERBS_MAX_SGE + 1; /* UD: + the GRH */
    if (dev->max_send_sge < 1 || dev->max_recv_sge < 2) {
        tmx_warn("verbs: %s: max_sge %d is too small", dev->ibdev, dev->attr_ex.orig_attr.max_sge);
        goto err_close;
    }
    dev->ibch = ibv_create_comp_channel(dev->ctx);
    if (dev->ibch != NULL && fcntl(dev->ibch->fd, F_SETFL,
                                   fcntl(dev->ibch->fd, F_GETFL) | O_NONBLOCK) != 0) {
        ibv_destroy_comp_channel(dev->ibch);
        dev->ibch = NULL;
    }
    if (fcntl(dev->ctx->async_fd, F_SETFL, fcntl(dev->ctx->async_fd, F_GETFL) | O_NONBLOCK) != 0) {
        tmx_warn("verbs: %s: async event fd: %s", dev->ibdev, strerror(errno));
    }
    dev->rng = tmx_time_ns() ^ ((uint64_t)getpid() << 32) ^ (uintptr_t)dev;
    if (dev->rng == 0) {
        dev->rng = 1;
    }

    a = &dev->super.attr;
    dev->super.prov = prov;
    snprintf(dev->super.name, sizeof(dev->super.name), "%.24s:%u", dev->ibdev, port);
    a->caps = TMX_DEV_CAP_RC | TMX_DEV_CAP_UD | TMX_DEV_CAP_RMA | TMX_DEV_CAP_REG_SLOW;
    if (dev->attr_ex.orig_attr.max_srq > 0) {
        a->caps |= TMX_DEV_CAP_SRQ;
    }
    a->max_msg_sz = dev->port_attr.max_msg_sz;
    a->max_qp     = (uint32_t)dev->attr_ex.orig_attr.max_qp;
    a->max_qp_wr  = (uint32_t)dev->attr_ex.orig_attr.max_qp_wr;
    a->max_srq_wr = (uint32_t)dev->attr_ex.orig_attr.max_srq_wr;
    a->max_sge    = dev->max_send_sge;
    a->max_mr     = (uint32_t)dev->attr_ex.orig_attr.max_mr;
    a->max_ud_msg = tmx_verbs_mtu_bytes(dev->port_attr.active_mtu);
    a->addr_len   = sizeof(tmx_verbs_dev_addr_t);
    a->max_inline = tmx_verbs_probe_inline(dev);
    tmx_verbs_locality(dev);
    tmx_verbs_optional_caps(dev);
    dev->use_cq_ex = dev->tm || tmx_verbs_force_cq_ex;

    memset(&dev->addr, 0, sizeof(dev->addr));
    dev->addr.magic      = TMX_VERBS_ADDR_MAGIC;
    dev->addr.version    = TMX_VERBS_VERSION;
    dev->addr.len        = sizeof(dev->addr);
    dev->addr.link_layer = dev->port_attr.link_layer;
    dev->addr.mtu        = (uint8_t)dev->port_attr.active_mtu;
    dev->addr.gid_type   = (uint8_t)dev->gid_type;
    dev->addr.port       = port;
    dev->addr.lid        = dev->port_attr.lid;
    dev->addr.gid_index  = (uint16_t)dev->gid_index;
    memcpy(dev->addr.gid, dev->gid.raw, 16);
    *dev_p = dev;
    return 0;

err_close:
    ibv_close_device(dev->ctx);
err_free:
    free(dev);
    return -1;
}

static tmx_status_t tmx_verbs_dev_open(const tmx_prov_t *prov, const tmx_config_t *cfg,
                                       tmx_dev_t **devs, int max, int *num_p)
{
    struct ibv_device **list;
    int                 num = 0, n = 0;

    *num_p = 0;
    list   = ibv_get_device_list(&num);
    if (list == NULL) {
        tmx_debug("verbs: no RDMA devices (%s)", strerror(errno));
        return TMX_OK;
    }
    if (cfg->verbs_devices[0] != '\0') {
        tmx_verbs_filter_check(cfg->verbs_devices, list, num);
    }
    for (int i = 0; i < num && n < max; i++) {
        struct ibv_context    *ctx = ibv_open_device(list[i]);
        struct ibv_device_attr da;
        int                    ports;

        if (ctx == NULL) {
            tmx_warn("verbs: cannot open %s: %s", ibv_get_device_name(list[i]), strerror(errno));
            continue;
        }
        ports = ibv_query_device(ctx, &da) == 0 ? da.phys_port_cnt : 0;
        ibv_close_device(ctx);
        for (int p = 1; p <= ports && n < max; p++) {
            tmx_verbs_dev_t *dev;

            if (!tmx_verbs_selected(cfg->verbs_devices, ibv_get_device_name(list[i]),
                                    (unsigned)p)) {
                continue;
            }
            if (tmx_verbs_port_open(prov, cfg, list[i], (uint8_t)p, &dev) == 0) {
                devs[n++] = &dev->super;
            }
        }
    }
    ibv_free_device_list(list);
    *num_p = n;
    return TMX_OK;
}

static void tmx_verbs_dev_close(tmx_dev_t *d)
{
    tmx_verbs_dev_t *dev = (tmx_verbs_dev_t *)d;

    if (dev == NULL) {
        return;
    }
    if (dev->ibch != NULL) {
        ibv_destroy_comp_channel(dev->ibch);
    }
    ibv_close_device(dev->ctx);
    free(dev->objs);
    free(dev->qpn_key);
    free(dev->qpn_obj);
    free(dev);
}

/* ---------------------------------------------------------------- addresses */

static tmx_status_t tmx_verbs_dev_get_addr(tmx_dev_t *d, void *buf, size_t *len_p)
{
    tmx_verbs_dev_t *dev = (tmx_verbs_dev_t *)d;

    if (buf == NULL || len_p == NULL || *len_p < sizeof(dev->addr)) {
        return TMX_ERR_INVALID_PARAM;
    }
    memcpy(buf, &dev->addr, sizeof(dev->addr));
    *len_p = sizeof(dev->addr);
    return TMX_OK;
}

tmx_status_t tmx_verbs_addr_check(tmx_verbs_dev_t *dev, const tmx_verbs_dev_addr_t *a,
                                  const char *what)
{
    const char *why = NULL;

    if (a->magic != TMX_VERBS_ADDR_MAGIC) {
        why = "not a verbs address (another provider's, or garbage)";
    } else if (a->version != TMX_VERBS_VERSION || a->len != sizeof(*a)) {
        why = "a verbs address of another version";
    } else if (a->link_layer != IBV_LINK_LAYER_INFINIBAND &&
               a->link_layer != IBV_LINK_LAYER_ETHERNET) {
        why = "an unknown link layer";
    } else if (tmx_verbs_mtu_bytes(a->mtu) == 0) {
        why = "an invalid MTU";
    } else if (a->port == 0) {
        why = "port 0";
    } else if (a->link_layer == IBV_LINK_LAYER_ETHERNET &&
               (a->gid_type > IBV_GID_TYPE_ROCE_V2 || tmx_verbs_gid_zero(a->gid))) {
        why = "a RoCE address without a valid GID";
    } else if (a->link_layer == IBV_LINK_LAYER_ETHERNET &&
               (int)a->gid_index >= dev->port_attr.gid_tbl_len) {
        why = "a GID index beyond any GID table of this kind of port";
    } else if (a->link_layer == IBV_LINK_LAYER_INFINIBAND && (a->lid == 0 || a->lid >= 0xc000)) {
        why = "an InfiniBand address without a unicast LID";
    }
    if (why != NULL) {
        tmx_warn("verbs %s: %s refused: %s", dev->super.name, what, why);
        return TMX_ERR_INVALID_ADDR;
    }
    if (a->link_layer != dev->port_attr.link_layer) {
        tmx_warn("verbs %s: %s is on %s, this port is %s: unreachable", dev->super.name, what,
                 tmx_verbs_link_name(a->link_layer),
                 tmx_verbs_link_name(dev->port_attr.link_layer));
        return TMX_ERR_UNREACHABLE;
    }
    if (a->link_layer == IBV_LINK_LAYER_ETHERNET && a->gid_type != dev->gid_type) {
        tmx_warn("verbs %s: %s uses a %s GID, this port %s: unreachable", dev->super.name, what,
                 tmx_verbs_gid_type_name(a->gid_type), tmx_verbs_gid_type_name(dev->gid_type));
        return TMX_ERR_UNREACHABLE;
    }
    return TMX_OK;
}

/* Quiet: the core asks this of every interface record of every address it resolves. */
static int tmx_verbs_dev_reachable(tmx_dev_t *d, const void *addr, size_t len)
{
    tmx_verbs_dev_t     *dev = (tmx_verbs_dev_t *)d;
    tmx_verbs_dev_addr_t a;

    if (addr == NULL || len != sizeof(a)) {
        return 0;
    }
    memcpy(&a, addr, sizeof(a));
    if (a.magic != TMX_VERBS_ADDR_MAGIC || a.version != TMX_VERBS_VERSION ||
        a.len != sizeof(a) || a.link_layer != dev->port_attr.link_layer) {
        return 0;
    }
    if (a.link_layer == IBV_LINK_LAYER_ETHERNET) {
        return a.gid_type == dev->gid_type && !tmx_verbs_gid_zero(a.gid);
    }
    /* InfiniBand: one subnet (LID routing) */
    return a.lid != 0 && a.lid < 0xc000 && memcmp(a.gid, dev->addr.gid, 8) == 0;
}

/* ---------------------------------------------------------------- PD, MR */

static tmx_status_t tmx_verbs_pd_alloc(tmx_dev_t *d, tmx_pd_t **pd_p)
{
    tmx_verbs_dev_t *dev = (tmx_verbs_dev_t *)d;
    tmx_verbs_pd_t  *pd  = calloc(1, sizeof(*pd));

    if (pd == NULL) {
        return TMX_ERR_NO_MEMORY;
    }
    pd->ibpd = ibv_alloc_pd(dev->ctx);
    if (pd->ibpd == NULL) {
        tmx_status_t status = tmx_verbs_status(errno);
        free(pd);
        return status;
    }
    pd->super.dev = d;
    *pd_p         = &pd->super;
    return TMX_OK;
}

static void tmx_verbs_pd_free(tmx_pd_t *p)
{
    tmx_verbs_pd_t *pd = (tmx_verbs_pd_t *)p;

    if (pd == NULL) {
        return;
    }
    if (pd->zero_mr != NULL) {
        ibv_dereg_mr(pd->zero_mr);
    }
    if (ibv_dealloc_pd(pd->ibpd) != 0) {
        tmx_warn("verbs: protection domain still in use at free");
    }
    free(pd);
}

static int tmx_verbs_access(unsigned access)
{
    int a = 0;

    if (access & TMX_ACCESS_LOCAL_WRITE) {
        a |= IBV_ACCESS_LOCAL_WRITE;
    }
    if (access & TMX_ACCESS_REMOTE_WRITE) {
        a |= IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_LOCAL_WRITE; /* verbs requires both */
    }
    if (access & TMX_ACCESS_REMOTE_READ) {
        a |= IBV_ACCESS_REMOTE_READ;
    }
    return a;
}

static tmx_status_t tmx_verbs_mr_reg(tmx_pd_t *p, void *addr, size_t length, unsigned access,
                                     tmx_mr_t **mr_p)
{
    tmx_verbs_pd_t *pd = (tmx_verbs_pd_t *)p;
    tmx_verbs_mr_t *mr;

    if ((addr == NULL && length != 0) || (uintptr_t)addr + length < (uintptr_t)addr ||
        (access & ~(unsigned)(TMX_ACCESS_LOCAL_WRITE | TMX_ACCESS_REMOTE_WRITE |
                              TMX_ACCESS_REMOTE_READ)) != 0) {
        return TMX_ERR_INVALID_PARAM;
    }
    mr = calloc(1, sizeof(*mr));
    if (mr == NULL) {
        return TMX_ERR_NO_MEMORY;
    }
    if (length == 0) {
        /* verbs registers no empty region: such a one names a small one of the PD's, which a
         * zero-length transfer never touches */
        if (pd->zero_mr == NULL) {
            pd->zero_mr = ibv_reg_mr(pd->ibpd, pd->zero_buf, sizeof(pd->zero_buf),
                                     IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                                         IBV_ACCESS_REMOTE_READ);
            if (pd->zero_mr == NULL) {
                tmx_status_t status = tmx_verbs_status(errno);
                free(mr);
                return status;
            }
        }
        mr->super.lkey = pd->zero_mr->lkey;
        mr->super.rkey = pd->zero_mr->rkey;
    } else {
        mr->ibmr = ibv_reg_mr(pd->ibpd, addr, length, tmx_verbs_access(access));
        if (mr->ibmr == NULL) {
            int err = errno;
            tmx_debug("verbs: ibv_reg_mr(%p, %zu) failed: %s", addr, length, strerror(err));
            free(mr);
            return err == EFAULT || err == EINVAL ? TMX_ERR_INVALID_PARAM : TMX_ERR_NO_RESOURCE;
        }
        mr->super.lkey = mr->ibmr->lkey;
        mr->super.rkey = mr->ibmr->rkey;
    }
    mr->super.pd     = p;
    mr->super.addr   = addr;
    mr->super.length = length;
    mr->super.access = access;
    *mr_p            = &mr->super;
    return TMX_OK;
}

static void tmx_verbs_mr_dereg(tmx_mr_t *m)
{
    tmx_verbs_mr_t *mr = (tmx_verbs_mr_t *)m;

    if (mr == NULL) {
        return;
    }
    if (mr->ibmr != NULL && ibv_dereg_mr(mr->ibmr) != 0) {
        tmx_warn("verbs: ibv_dereg_mr failed: %s", strerror(errno));
    }
    free(mr);
}

/* ---------------------------------------------------------------- CQ */

static tmx_status_t tmx_verbs_cq_create(tmx_dev_t *d, int cqe, tmx_cq_t **cq_p)
{
    tmx_verbs_dev_t *dev = (tmx_verbs_dev_t *)d;
    tmx_verbs_cq_t  *cq;
    tmx_status_t     status;

    if (cqe <= 0 || cqe > dev->attr_ex.orig_attr.max_cqe) {
        return TMX_ERR_INVALID_PARAM;
    }
    cq = calloc(1, sizeof(*cq));
    if (cq == NULL) {
        return TMX_ERR_NO_MEMORY;
    }
    if (dev->use_cq_ex) {
        struct ibv_cq_init_attr_ex ca;

        memset(&ca, 0, sizeof(ca));
        ca.cqe          = (uint32_t)cqe;
        ca.cq_context   = cq;
        ca.channel      = dev->ibch;
        ca.wc_flags     = IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_IMM | IBV_WC_EX_WITH_QP_NUM |
                          IBV_WC_EX_WITH_SRC_QP;
#ifdef TMX_VERBS_HAVE_TM
        if (dev->tm) {
            ca.wc_flags |= IBV_WC_EX_WITH_TM_INFO;
        }
#endif
        cq->ibcqx = ibv_create_cq_ex(dev->ctx, &ca);
        cq->ibcq  = cq->ibcqx != NULL ? ibv_cq_ex_to_cq(cq->ibcqx) : NULL;
    } else {
        cq->ibcq = ibv_create_cq(dev->ctx, cqe, cq, dev->ibch, 0);
    }
    if (cq->ibcq == NULL) {
        status = tmx_verbs_status(errno);
        tmx_warn("verbs %s: cannot create a CQ of %d entries: %s", d->name, cqe, strerror(errno));
        free(cq);
        return status;
    }
    cq->size      = cq->ibcq->cqe;
    cq->super.dev = d;
    cq->super.cqe = cqe;
    *cq_p         = &cq->super;
    return TMX_OK;
}

static void tmx_verbs_cq_destroy(tmx_cq_t *c)
{
    tmx_verbs_cq_t *cq = (tmx_verbs_cq_t *)c;

    if (cq == NULL) {
        return;
    }
    if (cq->events_unacked > 0) {
        ibv_ack_cq_events(cq->ibcq, cq->events_unacked);
    }
    if (ibv_destroy_cq(cq->ibcq) != 0) {
        tmx_warn("verbs: CQ still in use at destroy: %s", strerror(errno));
    }
    free(cq->blog.wc);
    free(cq->async.wc);
    free(cq);
}

/* Work requests that may complete on cq at once grow (or shrink) by delta: the hardware queue
 * grows with them, so that it never overflows (an overflow is fatal to it). */
tmx_status_t tmx_verbs_cq_load(tmx_verbs_cq_t *cq, long delta)
{
    tmx_verbs_dev_t *dev  = (tmx_verbs_dev_t *)cq->super.dev;
    long             need = cq->load + delta;

    if (delta > 0 && need > cq->size) {
        long want = need + need / 4;
        if (want > dev->attr_ex.orig_attr.max_cqe) {
            want = dev->attr_ex.orig_attr.max_cqe;
        }
        if (want < need || ibv_resize_cq(cq->ibcq, (int)want) != 0) {
            tmx_warn("verbs %s: a CQ of %d entries cannot grow to %ld for the queues on it",
                     dev->super.name, cq->size, need);
            return TMX_ERR_NO_RESOURCE;
        }
        cq->size = cq->ibcq->cqe;
    }
    cq->load = need;
    return TMX_OK;
}

tmx_status_t tmx_verbs_wcq_push(tmx_verbs_wcq_t *q, const tmx_wc_t *wc)
{
    if (q->count == q->cap) {
        unsigned  cap = q->cap ? q->cap * 2 : 16;
        tmx_wc_t *n   = malloc(cap * sizeof(*n));
        if (n == NULL) {
            tmx_error("verbs: out of memory keeping a completion: lost");
            return TMX_ERR_NO_MEMORY;
        }
        for (unsigned i = 0; i < q->count; i++) {
            n[i] = q->wc[(q->head + i) % q->cap];
        }
        free(q->wc);
        q->wc   = n;
        q->cap  = cap;
        q->head = 0;
    }
    q->wc[(q->head + q->count) % q->cap] = *wc;
    q->count++;
    return TMX_OK;
}

int tmx_verbs_wcq_pop(tmx_verbs_wcq_t *q, int n, tmx_wc_t *wc)
{
    int got = 0;

    while (got < n && q->count > 0) {
        wc[got++] = q->wc[q->head];
        q->head   = (q->head + 1) % q->cap;
        q->count--;
    }
    return got;
}

/* Moves every completion in the hardware queue behind the backlog (converted while the
 * objects they name still exist). */
void tmx_verbs_cq_drain(tmx_verbs_cq_t *cq)
{
    tmx_wc_t wc[TMX_VERBS_POLL_BATCH];
    int      got;

    while ((got = tmx_verbs_cq_poll_hw(cq, TMX_VERBS_POLL_BATCH, wc)) > 0) {
        for (int i = 0; i < got; i++) {
            tmx_verbs_wcq_push(&cq->blog, &wc[i]);
        }
    }
}

/* ---------------------------------------------------------------- completion channel */

static tmx_status_t tmx_verbs_channel_create(tmx_dev_t *d, tmx_comp_channel_t **ch_p)
{
    tmx_verbs_dev_t *dev = (tmx_verbs_dev_t *)d;

    if (dev->ibch == NULL) {
        return TMX_ERR_UNSUPPORTED;
    }
    if (dev->channel_given) {
        return TMX_ERR_NO_RESOURCE;
    }
    dev->channel.dev   = d;
    dev->channel.fd    = dev->ibch->fd;
    dev->channel_given = 1;
    *ch_p              = &dev->channel;
    return TMX_OK;
}

/* The channel itself lives as long as the device (every CQ is bound to it). */
static void tmx_verbs_channel_destroy(tmx_comp_channel_t *ch)
{
    if (ch != NULL) {
        ((tmx_verbs_dev_t *)ch->dev)->channel_given = 0;
    }
}

static tmx_status_t tmx_verbs_cq_req_notify(tmx_cq_t *c, tmx_comp_channel_t *ch)
{
    tmx_verbs_cq_t  *cq  = (tmx_verbs_cq_t *)c;
    tmx_verbs_dev_t *dev = (tmx_verbs_dev_t *)c->dev;
    int              err;

    if (ch == NULL || ch != &dev->channel || !dev->channel_given) {
        return TMX_ERR_INVALID_PARAM;
    }
    /* before a sleep: a QP that failed by an async event has its completion in the backlog;
     * a sleeper's keepalives go out from here */
    tmx_verbs_async_events(dev);
    tmx_verbs_keepalive(dev);
    if (cq->blog.count > 0 || cq->async.count > 0) {
        return TMX_ERR_BUSY;
    }
    err = ibv_req_notify_cq(cq->ibcq, 0);
    if (err != 0) {
        return tmx_verbs_status(err);
    }
    /* What completed before the arm makes no event: it is taken now (into the backlog, for
     * the next poll) and the caller told to poll rather than sleep. */
    tmx_verbs_cq_drain(cq);
    return cq->blog.count > 0 || cq->async.count > 0 ? TMX_ERR_BUSY : TMX_OK;
}

static int tmx_verbs_channel_get_events(tmx_comp_channel_t *ch)
{
    tmx_verbs_dev_t *dev = (tmx_verbs_dev_t *)ch->dev;
    struct ibv_cq   *ibcq;
    void            *ctx;
    int              n = 0;

    while (ibv_get_cq_event(dev->ibch, &ibcq, &ctx) == 0) {
        tmx_verbs_cq_t *cq = ctx;
        /* acked in batches: ibv_ack_cq_events takes a lock */
        if (++cq->events_unacked >= 64) {
            ibv_ack_cq_events(cq->ibcq, cq->events_unacked);
            cq->events_unacked = 0;
        }
        n++;
    }
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        tmx_error("verbs %s: reading the completion channel: %s", dev->super.name,
                  strerror(errno));
        return TMX_ERR_IO;
    }
    return n;
}

/* ---------------------------------------------------------------- async events */

/* Takes the device's pending async events without blocking. A QP that went to error by one
 * fails (tmx_verbs_qp_failed); the rest are logged. */
void tmx_verbs_async_events(tmx_verbs_dev_t *dev)
{
    struct ibv_async_event ev;
    struct pollfd          pfd = {.fd = dev->ctx->async_fd, .events = POLLIN};

    if (poll(&pfd, 1, 0) <= 0) {
        return;
    }
    while (ibv_get_async_event(dev->ctx, &ev) == 0) {
        switch (ev.event_type) {
        case IBV_EVENT_QP_FATAL:
        case IBV_EVENT_QP_REQ_ERR:
        case IBV_EVENT_QP_ACCESS_ERR: {
            tmx_verbs_qp_t *qp = ev.element.qp->qp_context;
            if (qp != NULL) {
                tmx_verbs_qp_failed(qp,
                                    ev.event_type == IBV_EVENT_QP_ACCESS_ERR ? TMX_WC_REM_ACCESS_ERR
                                    : ev.event_type == IBV_EVENT_QP_REQ_ERR  ? TMX_WC_REM_INV_REQ_ERR
                                                                             : TMX_WC_GENERAL_ERR,
                                    ibv_event_type_str(ev.event_type));
            }
            break;
        }
        case IBV_EVENT_COMM_EST:
        case IBV_EVENT_SQ_DRAINED:
        case IBV_EVENT_QP_LAST_WQE_REACHED:
        case IBV_EVENT_SRQ_LIMIT_REACHED:
        case IBV_EVENT_PATH_MIG:
        case IBV_EVENT_CLIENT_REREGISTER:
        case IBV_EVENT_GID_CHANGE:
        case IBV_EVENT_LID_CHANGE:
        case IBV_EVENT_PKEY_CHANGE:
        case IBV_EVENT_SM_CHANGE:
        case IBV_EVENT_PORT_ACTIVE:
            tmx_debug("verbs %s: async event %s", dev->super.name,
                      ibv_event_type_str(ev.event_type));
            break;
        case IBV_EVENT_PORT_ERR:
            if (ev.element.port_num == dev->port) {
                tmx_warn("verbs %s: the port went down (%s)", dev->super.name,
                         ibv_event_type_str(ev.event_type));
            }
            break;
        default:
            tmx_error("verbs %s: async event %s", dev->super.name,
                      ibv_event_type_str(ev.event_type));
            break;
        }
        ibv_ack_async_event(&ev);
    }
}

/* ---------------------------------------------------------------- AH */

static tmx_status_t tmx_verbs_ah_create(tmx_pd_t *p, const void *dev_addr, size_t len,
                                        tmx_ah_t **ah_p)
{
    tmx_verbs_pd_t      *pd  = (tmx_verbs_pd_t *)p;
    tmx_verbs_dev_t     *dev = (tmx_verbs_dev_t *)p->dev;
    tmx_verbs_dev_addr_t a;
    struct ibv_ah_attr   aa;
    tmx_verbs_ah_t      *ah;
    tmx_status_t         status;

    if (dev_addr == NULL || len != sizeof(a)) {
        tmx_warn("verbs %s: a device address of %zu bytes%s refused (want %zu)",
                 dev->super.name, len, dev_addr == NULL ? " at NULL" : "", sizeof(a));
        return TMX_ERR_INVALID_ADDR;
    }
    memcpy(&a, dev_addr, sizeof(a));
    status = tmx_verbs_addr_check(dev, &a, "device address");
    if (status != TMX_OK) {
        return status;
    }
    memset(&aa, 0, sizeof(aa));
    aa.port_num = dev->port;
    aa.dlid     = a.lid;
    if (a.link_layer == IBV_LINK_LAYER_ETHERNET) {
        aa.is_global          = 1;
        aa.grh.hop_limit      = 64;
        aa.grh.sgid_index     = (uint8_t)dev->gid_index;
        memcpy(aa.grh.dgid.raw, a.gid, 16);
    }
    ah = calloc(1, sizeof(*ah));
    if (ah == NULL) {
        return TMX_ERR_NO_MEMORY;
    }
    ah->ibah = ibv_create_ah(pd->ibpd, &aa);
    if (ah->ibah == NULL) {
        status = tmx_verbs_status(errno);
        tmx_warn("verbs %s: address handle: %s", dev->super.name, strerror(errno));
        free(ah);
        return status == TMX_ERR_INVALID_PARAM ? TMX_ERR_INVALID_ADDR : status;
    }
    ah->super.pd = p;
    *ah_p        = &ah->super;
    return TMX_OK;
}

static void tmx_verbs_ah_destroy(tmx_ah_t *a)
{
    tmx_verbs_ah_t *ah = (tmx_verbs_ah_t *)a;

    if (ah != NULL) {
        ibv_destroy_ah(ah->ibah);
        free(ah);
    }
}

/* ---------------------------------------------------------------- tmx_info */

static void tmx_verbs_dev_print(tmx_dev_t *d, FILE *stream, const char *prefix)
{
    tmx_verbs_dev_t           *dev = (tmx_verbs_dev_t *)d;
    const struct ibv_port_attr *pa = &dev->port_attr;
    const struct ibv_device_attr *da = &dev->attr_ex.orig_attr;
    char                        g[48];
    int                         shown = 0;

    fprintf(stream, "%sverbs      : %s port %u, %s, %s, fw %s, node guid %016llx\n", prefix,
            dev->ibdev, dev->port, ibv_node_type_str(dev->ctx->device->node_type),
            tmx_verbs_link_name(pa->link_layer), da->fw_ver,
            (unsigned long long)be64toh(da->node_guid));
    fprintf(stream, "%sport       : %s, active MTU %u (max %u), lid %u, %d GIDs, max_msg %u\n",
            prefix, ibv_port_state_str(pa->state), tmx_verbs_mtu_bytes(pa->active_mtu),
            tmx_verbs_mtu_bytes(pa->max_mtu), pa->lid, pa->gid_tbl_len, pa->max_msg_sz);
    for (int i = 0; i < pa->gid_tbl_len && shown < 16; i++) {
        union ibv_gid gid;
        uint32_t      type;

        if (tmx_verbs_query_gid(dev->ctx, dev->port, i, &gid, &type) != 0) {
            continue;
        }
        tmx_verbs_gid_str(gid.raw, g, sizeof(g));
        fprintf(stream, "%sgid[%d]%*s: %s %s%s\n", prefix, i, i < 10 ? 5 : 4, "", g,
                tmx_verbs_gid_type_name(type), i == dev->gid_index ? " (used)" : "");
        shown++;
    }
    fprintf(stream, "%squeues     : max_qp_wr %d, max_srq %d, max_cqe %d, max_qp_rd_atom %d\n",
            prefix, da->max_qp_wr, da->max_srq, da->max_cqe, da->max_qp_rd_atom);
    fprintf(stream, "%soptional   : tm %s, xrc %s, data-in-order query %s, ooo %s\n", prefix,
            dev->tm ? "yes" : "no", dev->xrc ? "yes" : "no",
            dev->dio_form == 2 ? "capability form" : dev->dio_form == 1 ? "boolean form" : "none",
            dev->ooo ? "yes (mlx5dv)" : "no");
    if (dev->absent[0] != '\0') {
        fprintf(stream, "%sabsent     : %s\n", prefix, dev->absent);
    }
}

/* ---------------------------------------------------------------- the provider */

const tmx_prov_ops_t tmx_verbs_ops = {
    .dev_open           = tmx_verbs_dev_open,
    .dev_close          = tmx_verbs_dev_close,
    .dev_get_addr       = tmx_verbs_dev_get_addr,
    .dev_reachable      = tmx_verbs_dev_reachable,
    .dev_print          = tmx_verbs_dev_print,
    .dev_query_stats    = tmx_prov_unsupported_dev_query_stats,
    .pd_alloc           = tmx_verbs_pd_alloc,
    .pd_free            = tmx_verbs_pd_free,
    .mr_reg             = tmx_verbs_mr_reg,
    .mr_dereg           = tmx_verbs_mr_dereg,
    .mem_alloc          = tmx_prov_host_mem_alloc, /* registered host memory: no MEM_DIRECT */
    .mem_free           = tmx_prov_host_mem_free,
    .mem_barrier        = tmx_prov_fence_mem_barrier,
    .cq_create          = tmx_verbs_cq_create,
    .cq_destroy         = tmx_verbs_cq_destroy,
    .cq_poll            = tmx_verbs_cq_poll,
    .channel_create     = tmx_verbs_channel_create,
    .channel_destroy    = tmx_verbs_channel_destroy,
    .cq_req_notify      = tmx_verbs_cq_req_notify,
    .channel_get_events = tmx_verbs_channel_get_events,
    .xrcd_open          = tmx_verbs_xrcd_open,
    .xrcd_close         = tmx_verbs_xrcd_close,
    .srq_create         = tmx_verbs_srq_create,
    .srq_destroy        = tmx_verbs_srq_destroy,
    .srq_post_recv      = tmx_verbs_srq_post_recv,
    .srq_post_ops       = tmx_verbs_srq_post_ops,
    .srq_get_num        = tmx_verbs_srq_get_num,
    .qp_create          = tmx_verbs_qp_create,
    .qp_open            = tmx_prov_unsupported_qp_open,
    .qp_destroy         = tmx_verbs_qp_destroy,
    .qp_get_addr        = tmx_verbs_qp_get_addr,
    .qp_modify          = tmx_verbs_qp_modify,
    .qp_data_in_order   = tmx_verbs_qp_data_in_order,
    .post_send          = tmx_verbs_post_send,
    .send_inline        = tmx_verbs_send_inline,
    .post_recv          = tmx_verbs_post_recv,
    .ah_create          = tmx_verbs_ah_create,
    .ah_destroy         = tmx_verbs_ah_destroy,
};

const tmx_prov_t tmx_verbs_prov = {
    .name        = "verbs",
    .description = "rdma-core verbs: InfiniBand and RoCE adapters (soft-RoCE too)",
    .ops         = &tmx_verbs_ops,
};
