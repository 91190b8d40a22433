/*
 * The stubs for ops a provider does not implement (so the core never tests an ops slot for
 * NULL). The provider table itself is in registry.c, which only the library links: a unit test
 * of one provider links this file and that provider alone.
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "prov/prov.h"

void tmx_prov_no_dev_print(tmx_dev_t *dev, FILE *stream, const char *prefix)
{
    (void)dev;
    (void)stream;
    (void)prefix;
}

tmx_status_t tmx_prov_unsupported_channel_create(tmx_dev_t *dev, tmx_comp_channel_t **ch_p)
{
    (void)dev;
    (void)ch_p;
    return TMX_ERR_UNSUPPORTED;
}

void tmx_prov_unsupported_channel_destroy(tmx_comp_channel_t *ch)
{
    (void)ch;
}

tmx_status_t tmx_prov_unsupported_cq_req_notify(tmx_cq_t *cq, tmx_comp_channel_t *ch)
{
    (void)cq;
    (void)ch;
    return TMX_ERR_UNSUPPORTED;
}

int tmx_prov_unsupported_channel_get_events(tmx_comp_channel_t *ch)
{
    (void)ch;
    return TMX_ERR_UNSUPPORTED;
}

tmx_status_t tmx_prov_unsupported_dev_query_stats(tmx_dev_t *dev, tmx_dev_stats_t *stats)
{
    (void)dev;
    (void)stats;
    return TMX_ERR_UNSUPPORTED;
}

tmx_status_t tmx_prov_unsupported_xrcd_open(tmx_dev_t *dev, const tmx_xrcd_init_attr_t *attr,
                                            tmx_xrcd_t **xrcd_p)
{
    (void)dev;
    (void)attr;
    (void)xrcd_p;
    return TMX_ERR_UNSUPPORTED;
}

void tmx_prov_unsupported_xrcd_close(tmx_xrcd_t *xrcd)
{
    (void)xrcd;
}

tmx_status_t tmx_prov_unsupported_srq_post_ops(tmx_srq_t *srq, tmx_srq_op_t *op,
                                               tmx_srq_op_t **bad_p)
{
    (void)srq;
    if (bad_p != NULL) {
        *bad_p = op;
    }
    return TMX_ERR_UNSUPPORTED;
}

tmx_status_t tmx_prov_unsupported_srq_get_num(tmx_srq_t *srq, uint32_t *srqn_p)
{
    (void)srq;
    (void)srqn_p;
    return TMX_ERR_UNSUPPORTED;
}

tmx_status_t tmx_prov_unsupported_qp_open(tmx_pd_t *pd, const tmx_qp_open_attr_t *attr,
                                          tmx_qp_t **qp_p)
{
    (void)pd;
    (void)attr;
    (void)qp_p;
    return TMX_ERR_UNSUPPORTED;
}

unsigned tmx_prov_no_data_in_order(tmx_qp_t *qp, tmx_wr_opcode_t op)
{
    (void)qp;
    (void)op;
    return 0;
}

tmx_status_t tmx_prov_host_mem_alloc(tmx_pd_t *pd, size_t len, unsigned access,
                                     tmx_mr_t **mr_p)
{
    size_t       size = (len + 4095) & ~(size_t)4095;
    void        *buf;
    tmx_status_t status;

    if (pd == NULL || mr_p == NULL || len == 0 || size < len) {
        return TMX_ERR_INVALID_PARAM;
    }
    buf = aligned_alloc(4096, size);
    if (buf == NULL) {
        return TMX_ERR_NO_MEMORY;
    }
    memset(buf, 0, size);
    status = pd->dev->prov->ops->mr_reg(pd, buf, len, access, mr_p);
    if (status != TMX_OK) {
        free(buf);
    }
    return status;
}

void tmx_prov_host_mem_free(tmx_mr_t *mr)
{
    void *buf;

    if (mr == NULL) {
        return;
    }
    buf = mr->addr; /* mr_dereg may reuse the object */
    mr->pd->dev->prov->ops->mr_dereg(mr);
    free(buf);
}

tmx_status_t tmx_prov_fence_mem_barrier(tmx_dev_t *dev)
{
    (void)dev;
    atomic_thread_fence(memory_order_seq_cst);
    return TMX_OK;
}

tmx_status_t tmx_prov_unsupported_ah_create(tmx_pd_t *pd, const void *dev_addr, size_t len,
                                            tmx_ah_t **ah_p)
{
    (void)pd;
    (void)dev_addr;
    (void)len;
    (void)ah_p;
    return TMX_ERR_UNSUPPORTED;
}

void tmx_prov_unsupported_ah_destroy(tmx_ah_t *ah)
{
    (void)ah;
}

const char *tmx_wc_status_string(tmx_wc_status_t status)
{
    switch (status) {
    case TMX_WC_SUCCESS:            return "success";
    case TMX_WC_LOC_LEN_ERR:        return "local length error";
    case TMX_WC_LOC_PROT_ERR:       return "local protection error";
    case TMX_WC_WR_FLUSH_ERR:       return "work request flushed";
    case TMX_WC_REM_ACCESS_ERR:     return "remote access error";
    case TMX_WC_REM_INV_REQ_ERR:    return "remote invalid request";
    case TMX_WC_RETRY_EXC_ERR:      return "transport retry exceeded (peer gone)";
    case TMX_WC_TM_ERR:             return "tag matching error";
    case TMX_WC_TM_RNDV_INCOMPLETE: return "rendezvous incomplete";
    case TMX_WC_GENERAL_ERR:        return "general error";
    }
    return "unknown completion status";
}
