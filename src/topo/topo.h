/*
 * Topology: where the process runs, where its memory and its devices are (hwloc).
 *
 * One module for everything that knows about packages, NUMA nodes and cores: tmxrun maps and
 * binds ranks with it, the library finds its NUMA node, places shared memory there and
 * prefers the device nearest to it. Like util it sits below every other layer (it uses
 * util's config table only), so the launcher, the bootstrap, the providers and the core may
 * all use it.
 *
 * hwloc is optional (configure --enable-hwloc): without it, tmx_topo_open fails with a
 * message, tmxrun refuses to bind, and the library uses what the environment says
 * (TMX_NUMA_NODE) or knows nothing (-1). The topology is this machine's, or the one hwloc
 * reads from HWLOC_XMLFILE or HWLOC_SYNTHETIC (hwloc's own variables; the tests use them),
 * restricted to what the process may use: the allowed CPUs (cgroups, cpusets) and, on this
 * machine, the process's affinity mask (taskset).
 */
#ifndef TMX_TOPO_H
#define TMX_TOPO_H

#include <stddef.h>
#include <sys/types.h>
#include <tmx/tmx.h>

#include "util/config.h"

/* Levels a rank is mapped by or bound to. */
typedef enum {
    TMX_TOPO_NONE   = 0,
    TMX_TOPO_CORE   = 1,
    TMX_TOPO_NUMA   = 2,
    TMX_TOPO_SOCKET = 3, /* a package */
} tmx_topo_level_t;

#define TMX_TOPO_CPUS_MAX 256 /* a CPU list ("0-3,8") as the environment carries it */
#define TMX_TOPO_FAR 1000     /* tmx_topo_distance when nothing is known */

typedef struct tmx_topo tmx_topo_t;

/* Where a rank goes. */
typedef struct tmx_topo_place {
    int  core;       /* logical index (hwloc L#) of the core it is mapped to */
    int  bind_index; /* index of what it is bound to (core L#, NUMA os index, package L#); -1
                      * unbound */
    int  numa;       /* NUMA node (os index) of cpus; -1 when they span several */
    int  local_size; /* ranks bound to the same CPUs (all of them when unbound) */
    char cpus[TMX_TOPO_CPUS_MAX]; /* CPUs it is bound to, the allowed ones when unbound */
} tmx_topo_place_t;

/* 1 when tmx was built with hwloc. */
int tmx_topo_built(void);

/* "none", "core", "numa", "socket". */
const char *tmx_topo_level_name(tmx_topo_level_t level);

/* Parses one of the names above ("package" is taken for "socket"); -1 if none. */
int tmx_topo_level_parse(const char *word, tmx_topo_level_t *level_p);

/* Loads the topology; on failure (no hwloc, hwloc failed) says why in err. */
tmx_status_t tmx_topo_open(tmx_topo_t **topo_p, char *err, size_t errlen);
void tmx_topo_close(tmx_topo_t *topo);

/* 1 when the topology is this machine's (binding applies), 0 for XML or synthetic ones. */
int tmx_topo_this_system(const tmx_topo_t *topo);

/* Objects of a level with at least one allowed CPU (TMX_TOPO_NONE: allowed CPUs). */
int tmx_topo_count(const tmx_topo_t *topo, tmx_topo_level_t level);

/* One line: "2 packages, 4 NUMA nodes, 16 cores, 32 CPUs; allowed CPUs 0-31". */
void tmx_topo_summary(const tmx_topo_t *topo, char *buf, size_t len);

/* Maps np ranks by map_by (core: the next allowed core; numa, socket: round-robin over the
 * allowed NUMA nodes or packages, the next core of each) and binds each to bind_to around its
 * core (none: unbound). places[np]. More ranks than cores wrap around. */
tmx_status_t tmx_topo_map(const tmx_topo_t *topo, int np, tmx_topo_level_t map_by,
                          tmx_topo_level_t bind_to, tmx_topo_place_t *places, char *err,
                          size_t errlen);

/* Binds the calling process to a CPU list; 0, or -1 with errno. Between fork and exec. */
int tmx_topo_bind(const tmx_topo_t *topo, const char *cpus);

/* Binds process pid (all its threads) to a CPU list; 0, or -1 with errno. */
int tmx_topo_bind_pid(const tmx_topo_t *topo, pid_t pid, const char *cpus);

/* The NUMA node (os index) holding every CPU of the list (NULL or "": the process's affinity
 * mask); -1 when they span several or are unknown. */
int tmx_topo_numa_of(const tmx_topo_t *topo, const char *cpus);

/* Distance from NUMA node from to NUMA node to: from hwloc's latency matrix when the machine
 * has one (ACPI SLIT: 10 local), else by the tree (10 same node, 20 same package, 30 another);
 * TMX_TOPO_FAR when either is -1 or unknown. */
int tmx_topo_distance(const tmx_topo_t *topo, int from, int to);

/* Of n devices on NUMA nodes numa[0..n-1], the index of the nearest to node from; the first
 * of equals (the registration order decides ties). topo NULL: 0. */
int tmx_topo_nearest(const tmx_topo_t *topo, int from, const int *numa, int n);

/* The process's topology for the library, loaded once on first use (thread-safe); NULL
 * without hwloc or when loading failed (logged once). */
const tmx_topo_t *tmx_topo_get(void);

/* This process's NUMA node: TMX_NUMA_NODE when tmxrun set it, else from hwloc and the
 * affinity mask (the topology is loaded then); -1 unknown or several. */
int tmx_topo_self_numa(const tmx_config_t *cfg);

/* Pages of [addr, addr + len) of a shared mapping prefer NUMA node node, whichever process
 * touches them first (mbind MPOL_PREFERRED: on shared memory the policy belongs to the
 * segment, so the peers that write the pages get them on the reader's node). 0, or -1 with
 * errno. No hwloc needed. */
int tmx_topo_mem_prefer(void *addr, size_t len, int node);

#endif
