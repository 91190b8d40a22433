#define _GNU_SOURCE
#include "config.h"

#include <limits.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "topo/topo.h"
#include "util/log.h"

typedef struct tmx_grave {
    struct tmx_grave *next;
    void             *obj;
} tmx_grave_t;

static tmx_grave_t    *tmx_graveyard;
static pthread_mutex_t tmx_graveyard_lock = PTHREAD_MUTEX_INITIALIZER;

void tmx_core_bury(void *obj)
{
    tmx_grave_t *g = malloc(sizeof(*g));

    if (g == NULL) {
        return; /* the object simply leaks unreachable */
    }
    g->obj = obj;
    pthread_mutex_lock(&tmx_graveyard_lock);
    g->next       = tmx_graveyard;
    tmx_graveyard = g;
    pthread_mutex_unlock(&tmx_graveyard_lock);
}

/* Destroyed contexts, workers and endpoints keep their (small) struct with a dead magic so that
 * a call on a stale handle answers TMX_ERR_INVALID_HANDLE instead of touching freed memory. */
static int tmx_provider_selected(const char *list, const char *name)
{
    size_t      n = strlen(name);
    const char *p = list;

    if (list == NULL || list[0] == '\0') {
        return 1;
    }
    while (*p != '\0') {
        const char *end = strchr(p, ',');
        size_t      len = (end != NULL) ? (size_t)(end - p) : strlen(p);
        if (len == n && strncmp(p, name, n) == 0) {
            return 1;
        }
        p += len + (end != NULL);
    }
    return 0;
}

/* Every name in the list must be a provider that exists. */
static tmx_status_t tmx_provider_list_check(const char *list)
{
    const char *p = list;

    while (p != NULL && *p != '\0') {
        const char *end = strchr(p, ',');
        size_t      len = (end != NULL) ? (size_t)(end - p) : strlen(p);
        int         found = 0;
        for (int i = 0; tmx_providers[i] != NULL; i++) {
            if (strlen(tmx_providers[i]->name) == len &&
                strncmp(tmx_providers[i]->name, p, len) == 0) {
                found = 1;
            }
        }
        if (!found) {
            tmx_error("unknown provider '%.*s' in provider list '%s'", (int)len, p, list);
            return TMX_ERR_INVALID_PARAM;
        }
        p += len + (end != NULL);
    }
    return TMX_OK;
}

/* Oversubscribed: more processes of the job share our CPUs (TMX_LOCAL_SIZE, from tmxrun)
 * than there are; then an idle poll gives the processor to them. Said once per process. */
static void tmx_context_wait_policy(tmx_context_t *ctx)
{
    static const char *const modes[] = {"auto", "spin", "yield", "sleep"};
    static atomic_int        logged;
    const tmx_config_t      *cfg = &ctx->cfg;

    ctx->oversubscribed = tmx_config_oversubscribed(cfg, &ctx->cpus);
    /* A connection needs the peer's progress, which an oversubscribed peer makes a turn of
     * every other process later: the wait for it grows with the processes per CPU (up to
     * TMX_CONNECT_SCALE_MAX times). 256 ranks on 2 busy cores took connections past 10 s. */
    ctx->connect_timeout = cfg->peer_timeout;
    ctx->idle_yields     = 0;
    if (ctx->oversubscribed) {
        /* rounded up without local_size + cpus - 1, which overflows at INT_MAX */
        int per_cpu = cfg->local_size / ctx->cpus + (cfg->local_size % ctx->cpus != 0);

        ctx->connect_timeout *= per_cpu < TMX_CONNECT_SCALE_MAX ? per_cpu : TMX_CONNECT_SCALE_MAX;
        /* A wait's yields go to the processes on its CPU. A few turns of all of them that
         * brought nothing mean that the work it waits for is elsewhere: on the other CPUs,
         * or behind the two or three waiting ranks that the scheduler left on this one,
         * which then yield to one another for the whole TMX_WAIT_SPIN (16 ranks on 2 cores:
         * about one job in four had 2-3 ranks with 150 yields each per round, the rest 4;
         * bench/README.md, "16 ranks"). Sleeping then leaves the CPU to the ranks with
         * work. */
        ctx->idle_yields = (unsigned)per_cpu <= UINT_MAX / TMX_IDLE_TURNS
                               ? (unsigned)per_cpu * TMX_IDLE_TURNS
                               : UINT_MAX;
        if (ctx->idle_yields < TMX_IDLE_YIELDS_MIN) {
            ctx->idle_yields = TMX_IDLE_YIELDS_MIN;
        }
    }
    if (atomic_exchange(&logged, 1) != 0) {
        return;
    }
    if (cfg->local_size < 0) {
        tmx_info("wait policy %s (spin %u us): processes sharing our %d cpus unknown (no "
                 "TMX_LOCAL_SIZE), idle polls do not yield", modes[cfg->wait_mode & 3],
                 cfg->wait_spin_us, ctx->cpus);
    } else {
        tmx_info("wait policy %s (spin %u us): %d processes share our %d cpus: %s",
                 modes[cfg->wait_mode & 3], cfg->wait_spin_us, cfg->local_size, ctx->cpus,
                 ctx->oversubscribed ? "oversubscribed, idle polls yield"
                                     : "not oversubscribed");
    }
}

TMX_API tmx_status_t tmx_context_create_version(unsigned api_version,
                                                const tmx_context_params_t *params,
                                                tmx_context_h *context_p)
{
    const tmx_config_t *cfg;
    const char         *list;
    tmx_context_t      *ctx;
    tmx_status_t        status;

    if ((api_version >> 16) != TMX_API_MAJOR || (api_version & 0xffff) > TMX_API_MINOR) {
        return TMX_ERR_VERSION;
    }
    if (context_p == NULL) {
        return TMX_ERR_INVALID_PARAM;
    }
    if (params != NULL && (params->field_mask & ~(uint64_t)TMX_CONTEXT_PARAM_PROVIDERS) != 0) {
        return TMX_ERR_INVALID_PARAM;
    }
    cfg = tmx_config_get();
    if (cfg == NULL) {
        return TMX_ERR_INVALID_PARAM; /* config.c printed which variable is wrong */
    }
    tmx_log_configure(cfg);

    ctx = calloc(1, sizeof(*ctx));
    if (ctx == NULL) {
        return TMX_ERR_NO_MEMORY;
    }
    ctx->cfg = *cfg;
    list     = cfg->providers;
    if (params != NULL && (params->field_mask & TMX_CONTEXT_PARAM_PROVIDERS)) {
        if (params->providers == NULL) {
            status = TMX_ERR_INVALID_PARAM;
            goto err_free;
        }
        list = params->providers;
    }
    status = tmx_provider_list_check(list);
    if (status != TMX_OK) {
        goto err_free;
    }
    for (int i = 0; tmx_providers[i] != NULL && ctx->num_provs < TMX_MAX_PROVS; i++) {
        if (tmx_provider_selected(list, tmx_providers[i]->name)) {
            ctx->provs[ctx->num_provs++] = tmx_providers[i];
        }
    }
    if (ctx->num_provs == 0) {
        status = TMX_ERR_NO_DEVICE;
        goto err_free;
    }
    tmx_context_wait_policy(ctx);
    ctx->magic = TMX_MAGIC_CONTEXT;
    *context_p = ctx;
    return TMX_OK;

err_free:
    free(ctx);
    return status;
}

TMX_API tmx_status_t tmx_context_destroy(tmx_context_h ctx)
{
    if (ctx == NULL) {
        return TMX_ERR_INVALID_PARAM;
    }
    if (ctx->magic != TMX_MAGIC_CONTEXT) {
        return TMX_ERR_INVALID_HANDLE;
    }
    if (ctx->num_workers > 0) {
        return TMX_ERR_BUSY;
    }
    ctx->magic = TMX_MAGIC_DEAD;
    tmx_core_bury(ctx);
    return TMX_OK;
}

static void tmx_print_caps(FILE *stream, const tmx_dev_attr_t *a, const tmx_topo_t *topo,
                           int self)
{
    static const char *names[] = {"rc", "ud", "srq", "rma", "tm", "tm-rndv",
                                  "xrc", "ooo", "full-match", "local-only",
                                  "manual-progress", "mem-direct", "mem-asym"};
    fprintf(stream, "#      caps       :");
    for (unsigned i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        if (a->caps & (1ull << i)) {
            fprintf(stream, " %s", names[i]);
        }
    }
    fprintf(stream, "\n");
    fprintf(stream, "#      max_msg    : %zu\n", a->max_msg_sz);
    fprintf(stream, "#      max_inline : %zu\n", a->max_inline);
    fprintf(stream, "#      max_qp     : %u\n", a->max_qp);
    fprintf(stream, "#      max_mr     : %u\n", a->max_mr);
    fprintf(stream, "#      max_srq_wr : %u\n", a->max_srq_wr);
    if (a->caps & TMX_DEV_CAP_TM) {
        fprintf(stream, "#      tm         : max_num_tags %u, max_ops %u, max_rndv_hdr %u\n",
                a->tm.max_num_tags, a->tm.max_ops, a->tm.max_rndv_hdr_size);
    }
    if (a->numa_node >= 0 && self >= 0 && topo != NULL) {
        fprintf(stream, "#      locality   : numa node %d (distance %d from this process's node %d)",
                a->numa_node, tmx_topo_distance(topo, self, a->numa_node), self);
    } else if (a->numa_node >= 0) {
        fprintf(stream, "#      locality   : numa node %d", a->numa_node);
    } else {
        fprintf(stream, "#      locality   : numa node unknown");
    }
    fprintf(stream, ", pci %s\n", a->pci_addr[0] != '\0' ? a->pci_addr : "none");
}

/* The machine as hwloc sees it and where this process is. */
static void tmx_print_topo(FILE *stream, const tmx_config_t *cfg, const tmx_topo_t **topo_p,
                           int *self_p)
{
    static const char *const binds[] = {"none", "core", "numa", "socket"};
    const tmx_topo_t        *topo    = tmx_topo_get();
    char                     line[512];

    if (topo != NULL) {
        tmx_topo_summary(topo, line, sizeof(line));
    } else {
        snprintf(line, sizeof(line), "unknown (%s)",
                 tmx_topo_built() ? "hwloc could not load it" : "built without hwloc");
    }
    *topo_p = topo;
    *self_p = tmx_topo_self_numa(cfg);
    fprintf(stream, "# topology: %s\n", line);
    if (cfg->bind > 0) {
        fprintf(stream, "# this process: bound by tmxrun to %s (cpus %s)", binds[cfg->bind & 3],
                cfg->bind_cpus);
    } else {
        fprintf(stream, "# this process: %s", cfg->bind == 0 ? "not bound by tmxrun"
                                                             : "not started by tmxrun");
    }
    if (*self_p >= 0) {
        fprintf(stream, ", numa node %d\n", *self_p);
    } else {
        fprintf(stream, ", numa node unknown or several\n");
    }
}

TMX_API tmx_status_t tmx_context_print_info(tmx_context_h ctx, FILE *stream)
{
    const tmx_topo_t *topo;
    int               self;
    int               usable = 0;

    if (ctx == NULL || stream == NULL) {
        return TMX_ERR_INVALID_PARAM;
    }
    if (ctx->magic != TMX_MAGIC_CONTEXT) {
        return TMX_ERR_INVALID_HANDLE;
    }
    fprintf(stream, "# tmx %s\n# providers built: ", PACKAGE_VERSION);
    for (int i = 0; tmx_providers[i] != NULL; i++) {
        fprintf(stream, "%s%s", i ? ", " : "", tmx_providers[i]->name);
    }
    fprintf(stream, "\n");
    tmx_print_topo(stream, &ctx->cfg, &topo, &self);
    for (int i = 0; i < ctx->num_provs; i++) {
        const tmx_prov_t *prov = ctx->provs[i];
        tmx_dev_t        *devs[TMX_MAX_IFACES];
        int               num  = 0;
        tmx_status_t      status;

        fprintf(stream, "#\n# provider %s: %s\n", prov->name, prov->description);
        status = prov->ops->dev_open(prov, &ctx->cfg, devs, TMX_MAX_IFACES, &num);
        if (status != TMX_OK) {
            fprintf(stream, "#   not usable: %s\n", tmx_status_string(status));
            continue;
        }
        if (num == 0) {
            fprintf(stream, "#   no devices\n");
        }
        usable += num;
        for (int d = 0; d < num; d++) {
            fprintf(stream, "#   device %s\n", devs[d]->name);
            tmx_print_caps(stream, &devs[d]->attr, topo, self);
            prov->ops->dev_print(devs[d], stream, "#      ");
            prov->ops->dev_close(devs[d]);
        }
    }
    /* Everything is printed either way; the status says whether a worker could open a device
     * (tmx_info -d exits 1 when none can, as tmx_info(1) says). */
    return usable > 0 ? TMX_OK : TMX_ERR_NO_DEVICE;
}

TMX_API void tmx_config_print(FILE *stream, unsigned flags)
{
    const tmx_config_t *cfg = tmx_config_get();

    if (stream == NULL) {
        return;
    }
    if (cfg == NULL) {
        fprintf(stream, "# the configuration failed to load (see the message above)\n");
        return;
    }
    tmx_config_print_table(stream, cfg, flags);
}
