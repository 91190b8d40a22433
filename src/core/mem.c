/*
 * Memory the user registers with a worker (tmx_mem_map): rendezvous messages whose buffer lies
 * in such a range use its registration instead of registering their buffer per message.
 *
 * This is the registration cache, and deliberately the only one: tmx caches a registration
 * only where the user promised that the memory stays mapped until tmx_mem_unmap. An implicit
 * cache of every buffer ever sent would need to learn when memory leaves the process (munmap,
 * a heap trimmed by free, madvise(MADV_DONTNEED)): a registration pins the old pages, and a
 * buffer mapped again at the same address would be read through them, silently stale. UCX
 * and libfabric learn it by patching the memory calls or through userfaultfd; tmx has no such
 * monitor (tmx(7), "Memory registration").
 */
#include "config.h"

#include <stdlib.h>

#include "core/core.h"
#include "util/log.h"

struct tmx_mem {
    uint32_t      magic;
    int           unmapped;  /* tmx_mem_unmap was called: freed when refs drops to 0 */
    unsigned      refs;      /* rendezvous requests using the registration now */
    tmx_worker_t *worker;
    uintptr_t     start, end;
    unsigned      access;    /* what the registrations allow */
    tmx_list_t    link;      /* worker->mems, while mapped */
    tmx_mr_t     *mr[TMX_MAX_IFACES];
};

static void tmx_mem_free(tmx_mem_t *m)
{
    tmx_worker_t *w = m->worker;

    for (int i = 0; i < w->num_ifaces; i++) {
        if (m->mr[i] != NULL) {
            w->ifaces[i].ops->mr_dereg(m->mr[i]);
        }
    }
    m->magic = TMX_MAGIC_DEAD;
    free(m);
}

TMX_API tmx_status_t tmx_mem_map(tmx_worker_h w, void *addr, size_t len, tmx_mem_h *memh_p)
{
    tmx_mem_t   *m;
    tmx_status_t status = TMX_OK;

    if (w == NULL || addr == NULL || len == 0 || memh_p == NULL ||
        (uintptr_t)addr + len < (uintptr_t)addr) {
        return TMX_ERR_INVALID_PARAM;
    }
    if (w->magic != TMX_MAGIC_WORKER) {
        return TMX_ERR_INVALID_HANDLE;
    }
    m = calloc(1, sizeof(*m));
    if (m == NULL) {
        return TMX_ERR_NO_MEMORY;
    }
    m->magic  = TMX_MAGIC_MEM;
    m->worker = w;
    m->start  = (uintptr_t)addr;
    m->end    = (uintptr_t)addr + len;
    m->access = TMX_ACCESS_LOCAL_WRITE | TMX_ACCESS_REMOTE_READ;
    tmx_worker_lock(w);
    for (int i = 0; i < w->num_ifaces && status == TMX_OK; i++) {
        tmx_iface_t *iface = &w->ifaces[i];

        status = iface->ops->mr_reg(iface->pd, addr, len,
                                    m->access, &m->mr[i]);
        if (status != TMX_OK) {
            m->mr[i] = NULL;
        }
    }
    if (status != TMX_OK) {
        tmx_mem_free(m);
        tmx_worker_unlock(w);
        return status;
    }
    tmx_list_add_tail(&w->mems, &m->link);
    tmx_worker_unlock(w);
    *memh_p = m;
    return TMX_OK;
}

TMX_API tmx_status_t tmx_mem_unmap(tmx_mem_h m)
{
    tmx_worker_t *w;

    if (m == NULL) {
        return TMX_ERR_INVALID_PARAM;
    }
    if (m->magic != TMX_MAGIC_MEM || m->unmapped) {
        return TMX_ERR_INVALID_HANDLE;
    }
    w = m->worker;
    tmx_worker_lock(w);
    m->unmapped = 1;
    tmx_list_del(&m->link);
    if (m->refs == 0) {
        tmx_mem_free(m);
    }
    tmx_worker_unlock(w);
    return TMX_OK;
}

tmx_status_t tmx_mem_reg_rndv(tmx_iface_t *iface, void *buf, size_t len, unsigned access,
                              tmx_mr_t **mr_p, tmx_mem_t **memh_p)
{
    tmx_worker_t *w   = iface->worker;
    int           idx = (int)(iface - w->ifaces);
    uintptr_t     b   = (uintptr_t)buf;
    tmx_list_t   *l;
    tmx_status_t  status;

    tmx_list_for_each(l, &w->mems) {
        tmx_mem_t *m = tmx_container_of(l, tmx_mem_t, link);

        if (m->start <= b && b + len <= m->end && m->mr[idx] != NULL &&
            (access & ~m->access) == 0) {
            m->refs++;
            *mr_p   = m->mr[idx];
            *memh_p = m;
            w->stat_rndv_mapped++;
            return TMX_OK;
        }
    }
    *memh_p = NULL;
    status  = iface->ops->mr_reg(iface->pd, buf, len, access, mr_p);
    w->stat_rndv_regs += status == TMX_OK;
    return status;
}

void tmx_mem_dereg_rndv(tmx_iface_t *iface, tmx_mr_t **mr_p, tmx_mem_t **memh_p)
{
    tmx_mem_t *m = *memh_p;

    if (m != NULL) {
        if (--m->refs == 0 && m->unmapped) {
            tmx_mem_free(m);
        }
    } else if (*mr_p != NULL && iface != NULL) {
        iface->ops->mr_dereg(*mr_p);
    }
    *mr_p   = NULL;
    *memh_p = NULL;
}

void tmx_mem_cleanup(tmx_worker_t *w)
{
    if (w->stat_rndv_regs + w->stat_rndv_mapped > 0) {
        tmx_info("rendezvous buffers: %llu registered per message, %llu in a tmx_mem_map range",
                 (unsigned long long)w->stat_rndv_regs, (unsigned long long)w->stat_rndv_mapped);
    }
    while (!tmx_list_is_empty(&w->mems)) {
        tmx_mem_free(tmx_container_of(tmx_list_pop_head(&w->mems), tmx_mem_t, link));
    }
}
