/*
 * The library's side of the topology: the process-wide topology (loaded on first use only: a
 * rank that tmxrun told its NUMA node never loads it, which would cost every rank of a big
 * job a few milliseconds of CPU at start-up) and the memory policy of shared segments.
 */
#define _GNU_SOURCE
#include "config.h"

#include <errno.h>
#include <linux/mempolicy.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "topo/topo.h"
#include "util/log.h"

static pthread_once_t tmx_topo_once = PTHREAD_ONCE_INIT;
static tmx_topo_t    *tmx_topo_proc;

static void tmx_topo_load_once(void)
{
    char err[256];

    if (tmx_topo_open(&tmx_topo_proc, err, sizeof(err)) != TMX_OK) {
        tmx_topo_proc = NULL;
        tmx_info("topology unknown: %s", err);
    }
}

const tmx_topo_t *tmx_topo_get(void)
{
    pthread_once(&tmx_topo_once, tmx_topo_load_once);
    return tmx_topo_proc;
}

int tmx_topo_self_numa(const tmx_config_t *cfg)
{
    const tmx_topo_t *topo;

    /* tmxrun told us (TMX_BIND set; -1: our CPUs span several nodes): the topology need
     * not be loaded */
    if (cfg->numa_node >= 0 || cfg->bind >= 0) {
        return cfg->numa_node;
    }
    topo = tmx_topo_get();
    return (topo != NULL) ? tmx_topo_numa_of(topo, cfg->bind_cpus) : -1;
}

int tmx_topo_mem_prefer(void *addr, size_t len, int node)
{
    unsigned long mask[4] = {0};
    const size_t  bits    = sizeof(mask) * 8;

    if (node < 0 || (size_t)node >= bits) {
        errno = EINVAL;
        return -1;
    }
    mask[(size_t)node / (sizeof(mask[0]) * 8)] |= 1ul << ((size_t)node % (sizeof(mask[0]) * 8));
    /* the kernel reads maxnode - 1 bits */
    return (int)syscall(SYS_mbind, addr, len, MPOL_PREFERRED, mask, bits + 1, 0);
}
