/*
 * The topology through hwloc: what tmxrun and the library share (no logging, no config: the
 * launcher links this file alone). The library's own part is topo_lib.c.
 */
#define _GNU_SOURCE
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "topo/topo.h"

#ifdef HAVE_HWLOC
#include <hwloc.h>
#endif

static void tmx_topo_err(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void tmx_topo_err(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;

    if (err == NULL || errlen == 0) {
        return;
    }
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

int tmx_topo_built(void)
{
#ifdef HAVE_HWLOC
    return 1;
#else
    return 0;
#endif
}

const char *tmx_topo_level_name(tmx_topo_level_t level)
{
    static const char *const names[] = {"none", "core", "numa", "socket"};

    return ((unsigned)level < 4) ? names[level] : "?";
}

int tmx_topo_level_parse(const char *word, tmx_topo_level_t *level_p)
{
    for (int l = TMX_TOPO_NONE; l <= TMX_TOPO_SOCKET; l++) {
        if (word != NULL && strcmp(word, tmx_topo_level_name((tmx_topo_level_t)l)) == 0) {
            *level_p = (tmx_topo_level_t)l;
            return 0;
        }
    }
    if (word != NULL && strcmp(word, "package") == 0) {
        *level_p = TMX_TOPO_SOCKET;
        return 0;
    }
    return -1;
}

#ifdef HAVE_HWLOC

struct tmx_topo {
    hwloc_topology_t t;
    hwloc_bitmap_t   allowed; /* CPUs we may use */
    int              this_system;
};

/* The objects of a level with an allowed CPU, in logical order. Cores are PUs on a machine
 * that reports no cores; packages the whole machine on one that reports none. */
static int tmx_topo_objs(const tmx_topo_t *topo, tmx_topo_level_t level, hwloc_obj_t *objs,
                         int max)
{
    hwloc_obj_type_t type;
    int              n = 0, nb;

    switch (level) {
    case TMX_TOPO_CORE:
        type = (hwloc_get_nbobjs_by_type(topo->t, HWLOC_OBJ_CORE) > 0) ? HWLOC_OBJ_CORE
                                                                         : HWLOC_OBJ_PU;
        break;
    case TMX_TOPO_NUMA:
        type = HWLOC_OBJ_NUMANODE;
        break;
    case TMX_TOPO_SOCKET:
        type = HWLOC_OBJ_PACKAGE;
        if (hwloc_get_nbobjs_by_type(topo->t, type) <= 0) {
            type = HWLOC_OBJ_MACHINE;
        }
        break;
    default:
        type = HWLOC_OBJ_PU;
        break;
    }
    nb = hwloc_get_nbobjs_by_type(topo->t, type);
    for (int i = 0; i < nb; i++) {
        hwloc_obj_t o = hwloc_get_obj_by_type(topo->t, type, (unsigned)i);
        if (o != NULL && o->cpuset != NULL && hwloc_bitmap_intersects(o->cpuset, topo->allowed)) {
            if (objs != NULL && n < max) {
                objs[n] = o;
            }
            n++;
        }
    }
    return n;
}

tmx_status_t tmx_topo_open(tmx_topo_t **topo_p, char *err, size_t errlen)
{
    tmx_topo_t    *topo = calloc(1, sizeof(*topo));
    hwloc_bitmap_t bound;

    if (topo == NULL) {
        tmx_topo_err(err, errlen, "out of memory");
        return TMX_ERR_NO_MEMORY;
    }
    if (hwloc_topology_init(&topo->t) != 0) {
        tmx_topo_err(err, errlen, "hwloc_topology_init failed: %s", strerror(errno));
        goto err_free;
    }
    /* hwloc reads HWLOC_XMLFILE and HWLOC_SYNTHETIC itself here */
    if (hwloc_topology_load(topo->t) != 0) {
        tmx_topo_err(err, errlen, "hwloc could not load the topology: %s", strerror(errno));
        goto err_destroy;
    }
    topo->this_system = hwloc_topology_is_thissystem(topo->t);
    topo->allowed     = hwloc_bitmap_dup(hwloc_topology_get_allowed_cpuset(topo->t));
    bound             = hwloc_bitmap_alloc();
    if (topo->allowed == NULL || bound == NULL) {
        hwloc_bitmap_free(bound);
        tmx_topo_err(err, errlen, "out of memory");
        goto err_destroy;
    }
    /* cgroups give the allowed set; taskset and a parent's binding only the affinity mask */
    hwloc_bitmap_and(topo->allowed, topo->allowed, hwloc_topology_get_topology_cpuset(topo->t));
    if (topo->this_system && hwloc_get_cpubind(topo->t, bound, HWLOC_CPUBIND_PROCESS) == 0 &&
        hwloc_bitmap_intersects(bound, topo->allowed)) {
        hwloc_bitmap_and(topo->allowed, topo->allowed, bound);
    }
    hwloc_bitmap_free(bound);
    if (hwloc_bitmap_iszero(topo->allowed)) {
        tmx_topo_err(err, errlen, "the topology has no allowed CPU");
        goto err_destroy;
    }
    *topo_p = topo;
    return TMX_OK;

err_destroy:
    hwloc_bitmap_free(topo->allowed);
    hwloc_topology_destroy(topo->t);
err_free:
    free(topo);
    return TMX_ERR_UNSUPPORTED;
}

void tmx_topo_close(tmx_topo_t *topo)
{
    if (topo != NULL) {
        hwloc_bitmap_free(topo->allowed);
        hwloc_topology_destroy(topo->t);
        free(topo);
    }
}

int tmx_topo_this_system(const tmx_topo_t *topo)
{
    return topo->this_system;
}

int tmx_topo_count(const tmx_topo_t *topo, tmx_topo_level_t level)
{
    return tmx_topo_objs(topo, level, NULL, 0);
}

void tmx_topo_summary(const tmx_topo_t *topo, char *buf, size_t len)
{
    char cpus[TMX_TOPO_CPUS_MAX];
    int  npkg = hwloc_get_nbobjs_by_type(topo->t, HWLOC_OBJ_PACKAGE);

    if (hwloc_bitmap_list_snprintf(cpus, sizeof(cpus), topo->allowed) >= (int)sizeof(cpus)) {
        snprintf(cpus, sizeof(cpus), "%d CPUs", hwloc_bitmap_weight(topo->allowed));
    }
    snprintf(buf, len, "%d package%s, %d NUMA node%s, %d cores, %d CPUs; allowed CPUs %s%s",
             npkg, npkg == 1 ? "" : "s", hwloc_get_nbobjs_by_type(topo->t, HWLOC_OBJ_NUMANODE),
             hwloc_get_nbobjs_by_type(topo->t, HWLOC_OBJ_NUMANODE) == 1 ? "" : "s",
             hwloc_get_nbobjs_by_type(topo->t, HWLOC_OBJ_CORE),
             hwloc_get_nbobjs_by_type(topo->t, HWLOC_OBJ_PU), cpus,
             topo->this_system ? "" : " (not this machine: HWLOC_XMLFILE or HWLOC_SYNTHETIC)");
}

/* The NUMA node whose CPUs hold all of set; -1 if none does. */
static int tmx_topo_numa_of_set(const tmx_topo_t *topo, hwloc_const_bitmap_t set)
{
    int nb = hwloc_get_nbobjs_by_type(topo->t, HWLOC_OBJ_NUMANODE);

    if (hwloc_bitmap_iszero(set)) {
        return -1;
    }
    for (int i = 0; i < nb; i++) {
        hwloc_obj_t o = hwloc_get_obj_by_type(topo->t, HWLOC_OBJ_NUMANODE, (unsigned)i);
        if (o != NULL && o->cpuset != NULL && hwloc_bitmap_isincluded(set, o->cpuset)) {
            return (int)o->os_index;
        }
    }
    return -1;
}

/* The ancestor of a core that a rank is bound to at level (a NUMA node: the one whose CPUs
 * hold the core's). */
static hwloc_obj_t tmx_topo_bind_obj(const tmx_topo_t *topo, hwloc_obj_t core,
                                     tmx_topo_level_t level, hwloc_obj_t *objs, int nobjs)
{
    if (level == TMX_TOPO_CORE) {
        return core;
    }
    for (int i = 0; i < nobjs; i++) {
        if (hwloc_bitmap_isincluded(core->cpuset, objs[i]->cpuset)) {
            return objs[i];
        }
    }
    (void)topo;
    return NULL;
}

tmx_status_t tmx_topo_map(const tmx_topo_t *topo, int np, tmx_topo_level_t map_by,
                          tmx_topo_level_t bind_to, tmx_topo_place_t *places, char *err,
                          size_t errlen)
{
    int            ncores  = tmx_topo_objs(topo, TMX_TOPO_CORE, NULL, 0);
    int            ngroups = (map_by == TMX_TOPO_CORE || map_by == TMX_TOPO_NONE)
                                 ? 1
                                 : tmx_topo_objs(topo, map_by, NULL, 0);
    int            nbind   = (bind_to == TMX_TOPO_NUMA || bind_to == TMX_TOPO_SOCKET)
                                 ? tmx_topo_objs(topo, bind_to, NULL, 0)
                                 : 0;
    hwloc_obj_t   *cores   = calloc((size_t)ncores + 1, sizeof(*cores));
    hwloc_obj_t   *groups  = calloc((size_t)ngroups + 1, sizeof(*groups));
    hwloc_obj_t   *bobjs   = calloc((size_t)nbind + 1, sizeof(*bobjs));
    hwloc_obj_t   *chosen  = calloc((size_t)np, sizeof(*chosen)); /* bound object per rank */
    int           *gcores  = calloc((size_t)ngroups * (size_t)ncores + 1, sizeof(*gcores));
    int           *gn      = calloc((size_t)ngroups + 1, sizeof(*gn));
    hwloc_bitmap_t set     = hwloc_bitmap_alloc();
    tmx_status_t   status  = TMX_OK;
    int            all_numa;

    if (cores == NULL || groups == NULL || bobjs == NULL || chosen == NULL || gcores == NULL ||
        gn == NULL || set == NULL) {
        tmx_topo_err(err, errlen, "out of memory");
        status = TMX_ERR_NO_MEMORY;
        goto out;
    }
    if (ncores == 0 || ngroups == 0 || (nbind == 0 && bind_to >= TMX_TOPO_NUMA)) {
        tmx_topo_err(err, errlen, "the topology has no allowed %s",
                     ncores == 0 ? "core" : tmx_topo_level_name(ngroups == 0 ? map_by : bind_to));
        status = TMX_ERR_UNSUPPORTED;
        goto out;
    }
    tmx_topo_objs(topo, TMX_TOPO_CORE, cores, ncores);
    tmx_topo_objs(topo, bind_to, bobjs, nbind);
    /* the allowed cores of each group, in order */
    if (ngroups == 1 && (map_by == TMX_TOPO_CORE || map_by == TMX_TOPO_NONE)) {
        for (int c = 0; c < ncores; c++) {
            gcores[c] = c;
        }
        gn[0] = ncores;
    } else {
        tmx_topo_objs(topo, map_by, groups, ngroups);
        for (int g = 0; g < ngroups; g++) {
            for (int c = 0; c < ncores; c++) {
                if (hwloc_bitmap_isincluded(cores[c]->cpuset, groups[g]->cpuset)) {
                    gcores[g * ncores + gn[g]++] = c;
                }
            }
            if (gn[g] == 0) {
                /* a group with allowed CPUs but no core wholly inside it (hardly a machine) */
                gcores[g * ncores + gn[g]++] = 0;
            }
        }
    }
    hwloc_bitmap_copy(set, topo->allowed);
    all_numa = tmx_topo_numa_of_set(topo, set);
    for (int r = 0; r < np; r++) {
        tmx_topo_place_t *pl   = &places[r];
        int               g    = r % ngroups;
        int               k    = r / ngroups;
        hwloc_obj_t       core = cores[gcores[g * ncores + k % gn[g]]];
        hwloc_obj_t       b    = NULL;

        memset(pl, 0, sizeof(*pl));
        pl->core       = (int)core->logical_index;
        pl->bind_index = -1;
        if (bind_to != TMX_TOPO_NONE) {
            b = tmx_topo_bind_obj(topo, core, bind_to, bobjs, nbind);
        }
        chosen[r] = b;
        if (b == NULL) {
            hwloc_bitmap_copy(set, topo->allowed);
            pl->numa = all_numa;
        } else {
            hwloc_bitmap_and(set, b->cpuset, topo->allowed);
            pl->bind_index = (int)((bind_to == TMX_TOPO_NUMA) ? b->os_index : b->logical_index);
            pl->numa       = tmx_topo_numa_of_set(topo, set);
        }
        if (hwloc_bitmap_list_snprintf(pl->cpus, sizeof(pl->cpus), set) >=
            (int)sizeof(pl->cpus)) {
            tmx_topo_err(err, errlen, "the CPU list of rank %d is longer than %d characters", r,
                         TMX_TOPO_CPUS_MAX - 1);
            status = TMX_ERR_UNSUPPORTED;
            goto out;
        }
    }
    /* the ranks that share a rank's CPUs: the same bound object (objects of one level do not
     * overlap), or everybody */
    for (int r = 0; r < np; r++) {
        int same = 0;
        if (chosen[r] == NULL) {
            places[r].local_size = np;
            continue;
        }
        for (int q = 0; q < np; q++) {
            same += (chosen[q] == chosen[r]);
        }
        places[r].local_size = same;
    }

out:
    hwloc_bitmap_free(set);
    free(gn);
    free(gcores);
    free(chosen);
    free(bobjs);
    free(groups);
    free(cores);
    return status;
}

/* pid 0: the calling process */
static int tmx_topo_bind_any(const tmx_topo_t *topo, pid_t pid, const char *cpus)
{
    hwloc_bitmap_t set = hwloc_bitmap_alloc();
    int            rc  = -1;

    if (set == NULL) {
        errno = ENOMEM;
        return -1;
    }
    if (hwloc_bitmap_list_sscanf(set, cpus) != 0 || hwloc_bitmap_iszero(set)) {
        errno = EINVAL;
    } else if (pid == 0) {
        rc = hwloc_set_cpubind(topo->t, set, HWLOC_CPUBIND_PROCESS);
    } else {
        rc = hwloc_set_proc_cpubind(topo->t, pid, set, HWLOC_CPUBIND_PROCESS);
    }
    hwloc_bitmap_free(set);
    return rc;
}

int tmx_topo_bind(const tmx_topo_t *topo, const char *cpus)
{
    return tmx_topo_bind_any(topo, 0, cpus);
}

int tmx_topo_bind_pid(const tmx_topo_t *topo, pid_t pid, const char *cpus)
{
    if (pid <= 0) {
        errno = EINVAL;
        return -1;
    }
    return tmx_topo_bind_any(topo, pid, cpus);
}

int tmx_topo_numa_of(const tmx_topo_t *topo, const char *cpus)
{
    hwloc_bitmap_t set = hwloc_bitmap_alloc();
    int            node = -1;

    if (set == NULL) {
        return -1;
    }
    if (cpus != NULL && cpus[0] != '\0') {
        if (hwloc_bitmap_list_sscanf(set, cpus) == 0) {
            node = tmx_topo_numa_of_set(topo, set);
        }
    } else if (topo->this_system && hwloc_get_cpubind(topo->t, set, HWLOC_CPUBIND_PROCESS) == 0) {
        node = tmx_topo_numa_of_set(topo, set);
    } else {
        node = tmx_topo_numa_of_set(topo, topo->allowed);
    }
    hwloc_bitmap_free(set);
    return node;
}

static hwloc_obj_t tmx_topo_numa_obj(const tmx_topo_t *topo, int os_index)
{
    hwloc_obj_t o = NULL;

    if (os_index < 0) {
        return NULL;
    }
    while ((o = hwloc_get_next_obj_by_type(topo->t, HWLOC_OBJ_NUMANODE, o)) != NULL) {
        if ((int)o->os_index == os_index) {
            return o;
        }
    }
    return NULL;
}

int tmx_topo_distance(const tmx_topo_t *topo, int from, int to)
{
    hwloc_obj_t                 a = tmx_topo_numa_obj(topo, from), b = tmx_topo_numa_obj(topo, to);
    struct hwloc_distances_s   *dist[1];
    unsigned                    nr = 1;
    int                         d  = -1;
    hwloc_obj_t                 pa, pb;

    if (a == NULL || b == NULL) {
        return TMX_TOPO_FAR;
    }
    if (hwloc_distances_get_by_type(topo->t, HWLOC_OBJ_NUMANODE, &nr, dist,
                                    HWLOC_DISTANCES_KIND_MEANS_LATENCY, 0) == 0 &&
        nr > 0) {
        hwloc_uint64_t ab, ba;
        if (hwloc_distances_obj_pair_values(dist[0], a, b, &ab, &ba) == 0 && ab < TMX_TOPO_FAR) {
            d = (int)ab;
        }
        hwloc_distances_release(topo->t, dist[0]);
        if (d >= 0) {
            return d;
        }
    }
    if (a == b) {
        return 10;
    }
    pa = hwloc_get_ancestor_obj_by_type(topo->t, HWLOC_OBJ_PACKAGE, a);
    pb = hwloc_get_ancestor_obj_by_type(topo->t, HWLOC_OBJ_PACKAGE, b);
    return (pa != NULL && pa == pb) ? 20 : 30;
}

#else /* !HAVE_HWLOC */

struct tmx_topo {
    int unused;
};

tmx_status_t tmx_topo_open(tmx_topo_t **topo_p, char *err, size_t errlen)
{
    (void)topo_p;
    tmx_topo_err(err, errlen, "tmx was built without hwloc (configure --enable-hwloc)");
    return TMX_ERR_UNSUPPORTED;
}

void tmx_topo_close(tmx_topo_t *topo)
{
    (void)topo;
}

int tmx_topo_this_system(const tmx_topo_t *topo)
{
    (void)topo;
    return 0;
}

int tmx_topo_count(const tmx_topo_t *topo, tmx_topo_level_t level)
{
    (void)topo;
    (void)level;
    return 0;
}

void tmx_topo_summary(const tmx_topo_t *topo, char *buf, size_t len)
{
    (void)topo;
    snprintf(buf, len, "unknown (built without hwloc)");
}

tmx_status_t tmx_topo_map(const tmx_topo_t *topo, int np, tmx_topo_level_t map_by,
                          tmx_topo_level_t bind_to, tmx_topo_place_t *places, char *err,
                          size_t errlen)
{
    (void)topo;
    (void)np;
    (void)map_by;
    (void)bind_to;
    (void)places;
    tmx_topo_err(err, errlen, "tmx was built without hwloc (configure --enable-hwloc)");
    return TMX_ERR_UNSUPPORTED;
}

int tmx_topo_bind(const tmx_topo_t *topo, const char *cpus)
{
    (void)topo;
    (void)cpus;
    errno = ENOSYS;
    return -1;
}

int tmx_topo_bind_pid(const tmx_topo_t *topo, pid_t pid, const char *cpus)
{
    (void)topo;
    (void)pid;
    (void)cpus;
    errno = ENOSYS;
    return -1;
}

int tmx_topo_numa_of(const tmx_topo_t *topo, const char *cpus)
{
    (void)topo;
    (void)cpus;
    return -1;
}

int tmx_topo_distance(const tmx_topo_t *topo, int from, int to)
{
    (void)topo;
    return (from >= 0 && from == to) ? 10 : TMX_TOPO_FAR;
}

#endif /* HAVE_HWLOC */

int tmx_topo_nearest(const tmx_topo_t *topo, int from, const int *numa, int n)
{
    int best = 0, best_d = -1;

    for (int i = 0; i < n && topo != NULL; i++) {
        int d = tmx_topo_distance(topo, from, numa[i]);
        if (best_d < 0 || d < best_d) {
            best   = i;
            best_d = d;
        }
    }
    return best;
}
