/*
 * Unit tests of src/topo: the device choice by distance (two fake devices on different NUMA
 * nodes of a two-socket, four-node machine, with and without a distance matrix), the NUMA
 * node of a CPU list, and the memory policy of the soft device's segment on this machine
 * (read back from /proc/self/numa_maps).
 */
#define _GNU_SOURCE
#include "config.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "prov/prov.h"
#include "prov/soft/soft.h"
#include "topo/topo.h"

#define SYNTH "pack:2 numa:2 core:4 pu:2"

extern const tmx_prov_t tmx_soft_prov;

/* A topology of hwloc's own variable (the test process's environment is its to change). */
static tmx_topo_t *open_with(const char *var, const char *value)
{
    tmx_topo_t *topo = NULL;
    char        err[256];

    if (!tmx_topo_built()) {
        cr_skip_test("built without hwloc");
    }
    setenv(var, value, 1);
    cr_assert_eq(tmx_topo_open(&topo, err, sizeof(err)), TMX_OK, "%s", err);
    unsetenv(var);
    return topo;
}

static char xml_path[4096];

static const char *two_socket_xml(void)
{
    const char *src = getenv("TMX_SRCDIR");

    snprintf(xml_path, sizeof(xml_path), "%s/test/integration/topo/two_socket.xml",
             src != NULL ? src : "..");
    return xml_path;
}

Test(topo, nearest_by_tree)
{
    tmx_topo_t *topo = open_with("HWLOC_SYNTHETIC", SYNTH);

    cr_assert_eq(tmx_topo_this_system(topo), 0);
    cr_assert_eq(tmx_topo_count(topo, TMX_TOPO_SOCKET), 2);
    cr_assert_eq(tmx_topo_count(topo, TMX_TOPO_NUMA), 4);
    cr_assert_eq(tmx_topo_count(topo, TMX_TOPO_CORE), 16);
    /* no distance matrix: same node, same package, other package */
    cr_assert_eq(tmx_topo_distance(topo, 0, 0), 10);
    cr_assert_eq(tmx_topo_distance(topo, 0, 1), 20);
    cr_assert_eq(tmx_topo_distance(topo, 0, 2), 30);
    cr_assert_eq(tmx_topo_distance(topo, 0, -1), TMX_TOPO_FAR);
    cr_assert_eq(tmx_topo_distance(topo, 0, 7), TMX_TOPO_FAR);
    {
        int devs[2] = {2, 1}; /* device 0 on the other socket, device 1 on our socket */
        cr_assert_eq(tmx_topo_nearest(topo, 0, devs, 2), 1);
        cr_assert_eq(tmx_topo_nearest(topo, 3, devs, 2), 0);
        cr_assert_eq(tmx_topo_nearest(topo, 1, devs, 2), 1);
    }
    {
        int devs[2] = {-1, 3}; /* one of unknown locality */
        cr_assert_eq(tmx_topo_nearest(topo, 3, devs, 2), 1);
        cr_assert_eq(tmx_topo_nearest(topo, -1, devs, 2), 0, "nothing known: the first");
    }
    {
        int devs[3] = {2, 3, 2}; /* equals: the first of them */
        cr_assert_eq(tmx_topo_nearest(topo, 0, devs, 3), 0);
        cr_assert_eq(tmx_topo_nearest(topo, 2, devs, 3), 0);
        cr_assert_eq(tmx_topo_nearest(topo, 3, devs, 3), 1);
    }
    tmx_topo_close(topo);
}

Test(topo, nearest_by_matrix)
{
    /* the XML's latency matrix: 0-1 12, 0-2 20, 0-3 22; 2-3 12, 2-1 22 */
    tmx_topo_t *topo = open_with("HWLOC_XMLFILE", two_socket_xml());
    int         devs[2] = {3, 2};

    cr_assert_eq(tmx_topo_distance(topo, 0, 1), 12);
    cr_assert_eq(tmx_topo_distance(topo, 0, 3), 22);
    cr_assert_eq(tmx_topo_distance(topo, 2, 2), 10);
    /* the tree makes nodes 2 and 3 equally far from node 0; the matrix does not */
    cr_assert_eq(tmx_topo_nearest(topo, 0, devs, 2), 1);
    cr_assert_eq(tmx_topo_nearest(topo, 2, devs, 2), 1);
    cr_assert_eq(tmx_topo_nearest(topo, 3, devs, 2), 0);
    tmx_topo_close(topo);
}

Test(topo, numa_of_cpus)
{
    tmx_topo_t *topo = open_with("HWLOC_SYNTHETIC", SYNTH);

    cr_assert_eq(tmx_topo_numa_of(topo, "0-1"), 0);
    cr_assert_eq(tmx_topo_numa_of(topo, "24-31"), 3);
    cr_assert_eq(tmx_topo_numa_of(topo, "7-8"), -1, "two nodes");
    cr_assert_eq(tmx_topo_numa_of(topo, "0-31"), -1);
    cr_assert_eq(tmx_topo_numa_of(topo, "garbage"), -1);
    tmx_topo_close(topo);
}

Test(topo, levels)
{
    tmx_topo_level_t l;

    cr_assert_eq(tmx_topo_level_parse("numa", &l), 0);
    cr_assert_eq(l, TMX_TOPO_NUMA);
    cr_assert_eq(tmx_topo_level_parse("package", &l), 0);
    cr_assert_eq(l, TMX_TOPO_SOCKET);
    cr_assert_eq(tmx_topo_level_parse("board", &l), -1);
    cr_assert_eq(tmx_topo_level_parse(NULL, &l), -1);
    cr_assert_str_eq(tmx_topo_level_name(TMX_TOPO_CORE), "core");
}

/* The policy /proc/self/numa_maps shows for the mapping at addr ("" if not found). */
static void policy_of(const void *addr, char *out, size_t len)
{
    FILE *f = fopen("/proc/self/numa_maps", "r");
    char  line[4096];

    out[0] = '\0';
    cr_assert_not_null(f);
    while (fgets(line, sizeof(line), f) != NULL) {
        unsigned long a = strtoul(line, NULL, 16);
        if (a == (unsigned long)addr) {
            sscanf(line, "%*s %63s", out);
            break;
        }
    }
    fclose(f);
    (void)len;
}

Test(topo, soft_segment_prefers_our_node)
{
    tmx_config_t    cfg;
    tmx_dev_t      *devs[1];
    int             num = 0;
    char            pol[64];
    tmx_soft_dev_t *dev;

    if (access("/proc/self/numa_maps", R_OK) != 0 || access("/sys/devices/system/node/node0",
                                                            F_OK) != 0) {
        cr_skip_test("no NUMA support in this kernel");
    }
    tmx_config_set_defaults(&cfg);
    cfg.numa_node = 0; /* as tmxrun says it */
    cr_assert_eq(tmx_soft_prov.ops->dev_open(&tmx_soft_prov, &cfg, devs, 1, &num), TMX_OK);
    cr_assert_eq(num, 1);
    cr_assert_eq(devs[0]->attr.numa_node, 0);
    dev = (tmx_soft_dev_t *)devs[0];
    policy_of(dev->base, pol, sizeof(pol));
    cr_assert_str_eq(pol, "prefer:0", "the segment's policy is '%s'", pol);
    tmx_soft_prov.ops->dev_close(devs[0]);

    /* unknown (several nodes, no hwloc): the kernel's default */
    cfg.numa_node = -1;
    cfg.bind      = 0; /* tmxrun said: not bound, CPUs on several nodes */
    cr_assert_eq(tmx_soft_prov.ops->dev_open(&tmx_soft_prov, &cfg, devs, 1, &num), TMX_OK);
    cr_assert_eq(devs[0]->attr.numa_node, -1);
    policy_of(((tmx_soft_dev_t *)devs[0])->base, pol, sizeof(pol));
    cr_assert_str_eq(pol, "default");
    tmx_soft_prov.ops->dev_close(devs[0]);
}

Test(topo, mem_prefer_is_the_files)
{
    /* the policy set by one mapping holds for another mapping of the same memfd: what makes
     * a peer's first write land on the reader's node */
    int   fd = memfd_create("topo-test", MFD_CLOEXEC);
    void *a, *b;
    char  pol[64];

    if (access("/proc/self/numa_maps", R_OK) != 0) {
        cr_skip_test("no NUMA support in this kernel");
    }
    cr_assert_geq(fd, 0);
    cr_assert_eq(ftruncate(fd, 1 << 20), 0);
    a = mmap(NULL, 1 << 20, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    b = mmap(NULL, 1 << 20, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    cr_assert(a != MAP_FAILED && b != MAP_FAILED);
    cr_assert_eq(tmx_topo_mem_prefer(a, 1 << 20, 0), 0);
    policy_of(b, pol, sizeof(pol));
    cr_assert_str_eq(pol, "prefer:0");
    cr_assert_eq(tmx_topo_mem_prefer(a, 1 << 20, -1), -1);
    munmap(a, 1 << 20);
    munmap(b, 1 << 20);
    close(fd);
}
