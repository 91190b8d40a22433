/* Unit tests of src/util: configuration table, log, hash map, memory pool.
 * Criterion runs every test in its own process, so setenv() in one does not leak. */
#define _GNU_SOURCE
#include <criterion/criterion.h>

#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/config.h"
#include "util/copy.h"
#include "util/hash.h"
#include "util/log.h"
#include "util/mpool.h"

/* ---------------------------------------------------------------- configuration */

/* A developer's shell may hold TMX_* settings; tests start from a clean environment. */
static void clean_env(void)
{
    char name[64];

    for (size_t i = 0; i < tmx_config_num_vars(); i++) {
        snprintf(name, sizeof(name), "TMX_%s", tmx_config_var_name(i));
        unsetenv(name);
    }
    unsetenv("OMPI_COMM_WORLD_LOCAL_SIZE");
    unsetenv("MPI_LOCALNRANKS");
}

TestSuite(config, .init = clean_env);

Test(config, table_covers_struct)
{
    /* 22 members in tmx_config_t; a new member needs a new row (and a man page entry). */
    cr_assert_eq(tmx_config_num_vars(), 60);
    cr_assert_null(tmx_config_var_name(tmx_config_num_vars()));
    for (size_t i = 0; i < tmx_config_num_vars(); i++) {
        for (size_t j = i + 1; j < tmx_config_num_vars(); j++) {
            cr_assert_str_neq(tmx_config_var_name(i), tmx_config_var_name(j));
        }
    }
}

Test(config, defaults_are_valid_values)
{
    tmx_config_t cfg;

    tmx_config_set_defaults(&cfg);
    for (size_t i = 0; i < tmx_config_num_vars(); i++) {
        cr_assert_eq(tmx_config_set(&cfg, tmx_config_var_name(i), tmx_config_var_default(i)),
                     TMX_OK, "default of %s does not parse", tmx_config_var_name(i));
    }
}

Test(config, defaults)
{
    tmx_config_t cfg;

    memset(&cfg, 0x5a, sizeof(cfg));
    cr_assert_eq(tmx_config_load(&cfg), TMX_OK);
    cr_assert_eq(cfg.log_level, TMX_LOG_WARN);
    cr_assert_str_eq(cfg.log_file, "");
    cr_assert_str_eq(cfg.providers, "");
    cr_assert_eq(cfg.eager_max, 16384);
    cr_assert_eq(cfg.unexp_budget, 64u << 20);
    cr_assert_eq(cfg.eager_credits, 64);
    cr_assert_eq(cfg.tag_hash_bits, 10);
    cr_assert_float_eq(cfg.peer_timeout, 10.0, 1e-12);
    cr_assert_eq(cfg.soft_ring_size, 256u << 10);
    cr_assert_eq(cfg.soft_max_qps, 4096);
    cr_assert_eq(cfg.soft_inbox_size, 256u << 10);
    cr_assert_eq(cfg.soft_fast_rings, 8);
    cr_assert_eq(cfg.soft_max_mrs, 4096);
    cr_assert_eq(cfg.soft_cma, -1);
    cr_assert_eq(cfg.rank, -1);
    cr_assert_eq(cfg.size, -1);
    cr_assert_str_eq(cfg.boot_addr, "");
    cr_assert_float_eq(cfg.boot_timeout, 60.0, 1e-12);
}

Test(config, parse_size)
{
    static const struct {
        const char *str;
        size_t      val;
    } good[] = {
        {"0", 0},           {"4096", 4096},        {"8k", 8192},        {"8K", 8192},
        {"64m", 64u << 20}, {"64M", 64u << 20},    {"1g", 1u << 30},    {"2G", 2ul << 30},
        {"1kb", 1024},      {"16KB", 16 << 10},    {"7b", 7},
    };
    static const char *const bad[] = {
        "", "k", "-1", "+1", " 1", "1 ", "1x", "1.5k", "1kk", "1kbb", "0x10",
        "99999999999999999999", "17179869184g",
    };
    size_t v;

    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        v = 12345;
        cr_assert_eq(tmx_config_parse_size(good[i].str, &v), 0, "'%s' rejected", good[i].str);
        cr_assert_eq(v, good[i].val, "'%s' -> %zu", good[i].str, v);
    }
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        v = 12345;
        cr_assert_eq(tmx_config_parse_size(bad[i], &v), -1, "'%s' accepted", bad[i]);
        cr_assert_eq(v, 12345, "output written on error for '%s'", bad[i]);
    }
    cr_assert_eq(tmx_config_parse_size(NULL, &v), -1);
}

Test(config, sizes_from_environment)
{
    tmx_config_t cfg;

    setenv("TMX_EAGER_MAX", "16k", 1);
    setenv("TMX_UNEXP_BUDGET", "1g", 1);
    setenv("TMX_SOFT_RING_SIZE", "1M", 1);
    cr_assert_eq(tmx_config_load(&cfg), TMX_OK);
    cr_assert_eq(cfg.eager_max, 16384);
    cr_assert_eq(cfg.unexp_budget, 1ul << 30);
    cr_assert_eq(cfg.soft_ring_size, 1u << 20);
}

Test(config, enums)
{
    static const struct {
        const char *name;
        const char *value;
        int         expect;
    } cases[] = {
        {"LOG_LEVEL", "error", TMX_LOG_ERROR}, {"LOG_LEVEL", "warn", TMX_LOG_WARN},
        {"LOG_LEVEL", "info", TMX_LOG_INFO},   {"LOG_LEVEL", "DEBUG", TMX_LOG_DEBUG},
        {"LOG_LEVEL", "trace", TMX_LOG_TRACE}, {"SOFT_CMA", "auto", -1},
        {"SOFT_CMA", "yes", 1},                {"TMX_SOFT_CMA", "no", 0},
    };
    tmx_config_t cfg;

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        tmx_config_set_defaults(&cfg);
        cr_assert_eq(tmx_config_set(&cfg, cases[i].name, cases[i].value), TMX_OK);
        if (strstr(cases[i].name, "LOG_LEVEL") != NULL) {
            cr_assert_eq(cfg.log_level, cases[i].expect, "%s", cases[i].value);
        } else {
            cr_assert_eq(cfg.soft_cma, cases[i].expect, "%s", cases[i].value);
        }
    }
    cr_assert_eq(tmx_config_set(&cfg, "LOG_LEVEL", "loud"), TMX_ERR_INVALID_PARAM);
    cr_assert_eq(tmx_config_set(&cfg, "LOG_LEVEL", ""), TMX_ERR_INVALID_PARAM);
    cr_assert_eq(tmx_config_set(&cfg, "SOFT_CMA", "maybe"), TMX_ERR_INVALID_PARAM);
    cr_assert_eq(tmx_config_set(&cfg, "SOFT_CMA", "-1"), TMX_ERR_INVALID_PARAM);
}

/* A yes|no variable (TMX_CONFIG_BOOL) takes 1, y, yes, on, true and 0, n, no, off, false in any
 * case (tmx_config(7), Syntax) and nothing else: a typo is refused, not read as "no". */
Test(config, bools)
{
    static const char *const yes[] = {"1", "y", "YES", "On", "true", "Y", "TRUE"};
    static const char *const no[]  = {"0", "n", "No", "OFF", "false", "N", "False"};
    static const char *const bad[] = {"", "2", "-1", "maybe", "yes ", " no", "ye", "of", "tru",
                                      "enabled", "nein"};
    tmx_config_t cfg;
    tmx_config_t ref;

    for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
        tmx_config_set_defaults(&cfg);
        cr_assert_eq(cfg.soft_tm, 0);
        cr_assert_eq(tmx_config_set(&cfg, "SOFT_TM", yes[i]), TMX_OK, "TMX_SOFT_TM='%s'", yes[i]);
        cr_assert_eq(cfg.soft_tm, 1, "TMX_SOFT_TM='%s'", yes[i]);
    }
    for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++) {
        tmx_config_set_defaults(&cfg);
        cr_assert_eq(cfg.soft_inplace, 1);
        cr_assert_eq(tmx_config_set(&cfg, "SOFT_INPLACE", no[i]), TMX_OK,
                     "TMX_SOFT_INPLACE='%s'", no[i]);
        cr_assert_eq(cfg.soft_inplace, 0, "TMX_SOFT_INPLACE='%s'", no[i]);
    }
    tmx_config_set_defaults(&ref);
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        tmx_config_set_defaults(&cfg);
        cr_assert_eq(tmx_config_set(&cfg, "SOFT_INPLACE", bad[i]), TMX_ERR_INVALID_PARAM,
                     "TMX_SOFT_INPLACE='%s' accepted", bad[i]);
        cr_assert_eq(tmx_config_set(&cfg, "SOFT_TM", bad[i]), TMX_ERR_INVALID_PARAM,
                     "TMX_SOFT_TM='%s' accepted", bad[i]);
        cr_assert_eq(memcmp(&cfg, &ref, sizeof(cfg)), 0, "a refused '%s' changed the config",
                     bad[i]);
    }
}

/* Values that must be refused, each with the field left as it was. */
Test(config, bad_values_rejected)
{
    static const struct {
        const char *name;
        const char *value;
    } bad[] = {
        {"TAG_HASH_BITS", "0"},    {"TAG_HASH_BITS", "25"},     {"TAG_HASH_BITS", "-1"},
        {"TAG_HASH_BITS", "ten"},  {"TAG_HASH_BITS", ""},       {"TAG_HASH_BITS", "10 "},
        {"SOFT_RING_SIZE", "2k"},  {"SOFT_RING_SIZE", "5000"},  {"SOFT_RING_SIZE", "0"},
        {"SOFT_RING_SIZE", "96k"}, {"EAGER_MAX", "-8k"},        {"EAGER_MAX", "8q"},
        {"EAGER_CREDITS", "0"},    {"EAGER_CREDITS", "-1"},     {"EAGER_CREDITS", "4294967296"},
        {"SOFT_MAX_QPS", "0"},     {"SOFT_MAX_MRS", "1.5"},     {"RANK", "-2"},
        {"RANK", "2147483648"},    {"SIZE", "x"},               {"PEER_TIMEOUT", "0"},
        {"PEER_TIMEOUT", "-1"},    {"PEER_TIMEOUT", "nan"},     {"PEER_TIMEOUT", "inf"},
        {"PEER_TIMEOUT", "1s"},    {"BOOT_TIMEOUT", ""},        {"NO_SUCH_VARIABLE", "1"},
        {"SOFT_MAX_MRS", "16777217"}, {"SOFT_MAX_QPS", "1048577"}, {"SOFT_MAX_MRS", "7"},
        {"EAGER_CREDITS", "65536"},    {"EAGER_CREDITS", "2147483648"},
    };
    tmx_config_t cfg;
    tmx_config_t ref;

    tmx_config_set_defaults(&ref);
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        tmx_config_set_defaults(&cfg);
        cr_assert_eq(tmx_config_set(&cfg, bad[i].name, bad[i].value), TMX_ERR_INVALID_PARAM,
                     "TMX_%s='%s' accepted", bad[i].name, bad[i].value);
        cr_assert_eq(memcmp(&cfg, &ref, sizeof(cfg)), 0, "TMX_%s changed", bad[i].name);
    }
}

Test(config, range_edges_accepted)
{
    tmx_config_t cfg;

    tmx_config_set_defaults(&cfg);
    cr_assert_eq(tmx_config_set(&cfg, "TAG_HASH_BITS", "1"), TMX_OK);
    cr_assert_eq(cfg.tag_hash_bits, 1);
    cr_assert_eq(tmx_config_set(&cfg, "TAG_HASH_BITS", "24"), TMX_OK);
    cr_assert_eq(cfg.tag_hash_bits, 24);
    cr_assert_eq(tmx_config_set(&cfg, "SOFT_RING_SIZE", "4k"), TMX_OK);
    cr_assert_eq(cfg.soft_ring_size, 4096);
    cr_assert_eq(tmx_config_set(&cfg, "RANK", "0"), TMX_OK);
    cr_assert_eq(cfg.rank, 0);
    cr_assert_eq(tmx_config_set(&cfg, "PEER_TIMEOUT", "0.25"), TMX_OK);
    cr_assert_float_eq(cfg.peer_timeout, 0.25, 1e-12);
    cr_assert_eq(tmx_config_set(&cfg, "EAGER_MAX", "0"), TMX_OK);
    cr_assert_eq(cfg.eager_max, 0);
    cr_assert_eq(tmx_config_set(&cfg, "SOFT_MAX_QPS", "1048576"), TMX_OK);
    cr_assert_eq(cfg.soft_max_qps, 1048576);
    cr_assert_eq(tmx_config_set(&cfg, "EAGER_CREDITS", "65535"), TMX_OK);
    cr_assert_eq(cfg.eager_credits, 65535);
    cr_assert_eq(tmx_config_set(&cfg, "SOFT_MAX_MRS", "8"), TMX_OK);
    cr_assert_eq(cfg.soft_max_mrs, 8);
}

Test(config, strings_bounded)
{
    tmx_config_t cfg;
    char         longval[sizeof(cfg.providers) + 1];

    tmx_config_set_defaults(&cfg);
    cr_assert_eq(tmx_config_set(&cfg, "PROVIDERS", "soft,verbs"), TMX_OK);
    cr_assert_str_eq(cfg.providers, "soft,verbs");
    memset(longval, 'a', sizeof(longval) - 1);
    longval[sizeof(longval) - 1] = '\0';
    cr_assert_eq(tmx_config_set(&cfg, "PROVIDERS", longval), TMX_ERR_INVALID_PARAM);
    cr_assert_str_eq(cfg.providers, "soft,verbs");
    longval[sizeof(cfg.providers) - 1] = '\0'; /* exactly fits with its terminator */
    cr_assert_eq(tmx_config_set(&cfg, "PROVIDERS", longval), TMX_OK);
    cr_assert_eq(strlen(cfg.providers), sizeof(cfg.providers) - 1);
}

Test(config, load_fails_on_bad_env_and_keeps_output)
{
    tmx_config_t cfg;

    memset(&cfg, 0x33, sizeof(cfg));
    setenv("TMX_EAGER_MAX", "8k", 1);
    setenv("TMX_TAG_HASH_BITS", "99", 1);
    cr_assert_eq(tmx_config_load(&cfg), TMX_ERR_INVALID_PARAM);
    cr_assert_eq(((unsigned char *)&cfg)[0], 0x33);
    cr_assert_eq(tmx_config_load(NULL), TMX_ERR_INVALID_PARAM);
}

Test(config, get_once_and_null_on_error)
{
    setenv("TMX_SOFT_CMA", "perhaps", 1);
    cr_assert_null(tmx_config_get());
    /* Loaded once: fixing the environment afterwards does not change the answer. */
    setenv("TMX_SOFT_CMA", "yes", 1);
    cr_assert_null(tmx_config_get());
}

Test(config, get_returns_loaded)
{
    const tmx_config_t *cfg;

    setenv("TMX_RANK", "3", 1);
    setenv("TMX_SIZE", "8", 1);
    cfg = tmx_config_get();
    cr_assert_not_null(cfg);
    cr_assert_eq(cfg->rank, 3);
    cr_assert_eq(cfg->size, 8);
    cr_assert_eq(tmx_config_get(), cfg);
}

/* Under another launcher TMX_LOCAL_SIZE comes from its local size, unless the launcher bound
 * the process to fewer CPUs than are online (then ranks do not share them). */
Test(config, local_size_from_launcher)
{
    long         online = sysconf(_SC_NPROCESSORS_ONLN);
    cpu_set_t    all, one;
    tmx_config_t cfg;

    CPU_ZERO(&all);
    for (long c = 0; c < online && c < CPU_SETSIZE; c++) {
        CPU_SET((int)c, &all);
    }
    if (online <= 0 || sched_setaffinity(0, sizeof(all), &all) != 0) {
        cr_skip_test("cannot run on every online CPU here");
    }
    cr_assert_eq(tmx_config_load(&cfg), TMX_OK);
    cr_assert_eq(cfg.local_size, -1);
    setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "7", 1);
    cr_assert_eq(tmx_config_load(&cfg), TMX_OK);
    cr_assert_eq(cfg.local_size, 7);
    unsetenv("OMPI_COMM_WORLD_LOCAL_SIZE");
    setenv("MPI_LOCALNRANKS", "5", 1);
    cr_assert_eq(tmx_config_load(&cfg), TMX_OK);
    cr_assert_eq(cfg.local_size, 5);
    setenv("TMX_LOCAL_SIZE", "3", 1);
    cr_assert_eq(tmx_config_load(&cfg), TMX_OK);
    cr_assert_eq(cfg.local_size, 3, "TMX_LOCAL_SIZE wins over the launcher's");
    unsetenv("TMX_LOCAL_SIZE");
    setenv("MPI_LOCALNRANKS", "5x", 1);
    cr_assert_eq(tmx_config_load(&cfg), TMX_OK);
    cr_assert_eq(cfg.local_size, -1, "a malformed count is ignored");
    setenv("MPI_LOCALNRANKS", "5", 1);
    if (online > 1) {
        CPU_ZERO(&one);
        CPU_SET(0, &one);
        cr_assert_eq(sched_setaffinity(0, sizeof(one), &one), 0);
        cr_assert_eq(tmx_config_load(&cfg), TMX_OK);
        cr_assert_eq(cfg.local_size, -1, "a bound process does not take the node's count");
    }
}

/* An oversubscribed process gets 128 KiB soft rings (inbox, fast rings, the first fast ring)
 * where their variables are unset; set ones are kept, and a process with a CPU each keeps the
 * defaults (issue 11: shared memory at 16-64 ranks on 2 cores). */
Test(config, oversubscribed_soft_sizes)
{
    cpu_set_t    set;
    char         n[16];
    tmx_config_t cfg;

    cr_assert_eq(sched_getaffinity(0, sizeof(set), &set), 0);
    setenv("TMX_LOCAL_SIZE", "1", 1);
    cr_assert_eq(tmx_config_load(&cfg), TMX_OK);
    cr_assert_eq(cfg.soft_ring_size, 256 * 1024);
    cr_assert_eq(cfg.soft_inbox_size, 256 * 1024);
    cr_assert_eq(cfg.soft_ring0_size, 2 * 1024 * 1024);
    snprintf(n, sizeof(n), "%d", CPU_COUNT(&set) + 1);
    setenv("TMX_LOCAL_SIZE", n, 1);
    cr_assert_eq(tmx_config_load(&cfg), TMX_OK);
    cr_assert_eq(cfg.soft_ring_size, 128 * 1024);
    cr_assert_eq(cfg.soft_inbox_size, 128 * 1024);
    cr_assert_eq(cfg.soft_ring0_size, 128 * 1024);
    setenv("TMX_SOFT_RING_SIZE", "64k", 1);
    setenv("TMX_SOFT_INBOX_SIZE", "1m", 1);
    cr_assert_eq(tmx_config_load(&cfg), TMX_OK);
    cr_assert_eq(cfg.soft_ring_size, 64 * 1024, "a set size is kept");
    cr_assert_eq(cfg.soft_inbox_size, 1024 * 1024, "a set size is kept");
    cr_assert_eq(cfg.soft_ring0_size, 64 * 1024, "the first ring follows the others");
    setenv("TMX_SOFT_RING0_SIZE", "4m", 1);
    cr_assert_eq(tmx_config_load(&cfg), TMX_OK);
    cr_assert_eq(cfg.soft_ring0_size, 4 * 1024 * 1024, "a set size is kept");
    unsetenv("TMX_SOFT_RING_SIZE");
    unsetenv("TMX_SOFT_INBOX_SIZE");
    unsetenv("TMX_SOFT_RING0_SIZE");
    unsetenv("TMX_LOCAL_SIZE");
}

Test(config, unknown_variables_found)
{
    char   names[256];
    size_t n;

    setenv("TMX_BUILDDIR", "/x", 1);
    setenv("TMX_SRCDIR", "/y", 1);
    setenv("TMX_LOCAL_RANK", "0", 1);
    setenv("TMX_EAGER_MAX", "8k", 1);
    cr_assert_eq(tmx_config_find_unknown(names, sizeof(names)), 0, "%s", names);
    setenv("TMX_EAGERMAX", "16k", 1);
    n = tmx_config_find_unknown(names, sizeof(names));
    cr_assert_eq(n, 1, "%zu: %s", n, names);
    cr_assert_str_eq(names, "TMX_EAGERMAX");
    /* A known name as prefix does not make a variable known. */
    setenv("TMX_RANKS", "1", 1);
    n = tmx_config_find_unknown(names, sizeof(names));
    cr_assert_eq(n, 2, "%zu: %s", n, names);
    cr_assert_not_null(strstr(names, "TMX_RANKS"), "%s", names);
    /* A typo is reported, not fatal. */
    cr_assert_not_null(tmx_config_get());
}

/* Every printed line, fed back through tmx_config_set, rebuilds the same configuration:
 * checks the formatting and every offset in the table. */
static void check_print_roundtrip(const tmx_config_t *cfg, unsigned flags)
{
    char        *buf  = NULL;
    size_t       len  = 0;
    FILE        *mem  = open_memstream(&buf, &len);
    tmx_config_t back;
    size_t       vars = 0;
    size_t       docs = 0;

    cr_assert_not_null(mem);
    tmx_config_print_table(mem, cfg, flags);
    fclose(mem);
    tmx_config_set_defaults(&back);
    memset(&back, 0x77, sizeof(back));
    for (char *line = strtok(buf, "\n"); line != NULL; line = strtok(NULL, "\n")) {
        char *eq;

        if (line[0] == '#') {
            docs += (strncmp(line, "# default:", 10) == 0);
            continue;
        }
        eq = strchr(line, '=');
        cr_assert_not_null(eq, "line without '=': %s", line);
        *eq = '\0';
        cr_assert_eq(strncmp(line, "TMX_", 4), 0, "%s", line);
        cr_assert_eq(tmx_config_set(&back, line, eq + 1), TMX_OK, "%s=%s", line, eq + 1);
        vars++;
    }
    free(buf);
    cr_assert_eq(vars, tmx_config_num_vars());
    cr_assert_eq(docs, (flags & TMX_CONFIG_PRINT_DOC) ? tmx_config_num_vars() : 0);
    cr_assert_eq(back.log_level, cfg->log_level);
    cr_assert_str_eq(back.log_file, cfg->log_file);
    cr_assert_str_eq(back.providers, cfg->providers);
    cr_assert_eq(back.eager_max, cfg->eager_max);
    cr_assert_eq(back.unexp_budget, cfg->unexp_budget);
    cr_assert_eq(back.eager_credits, cfg->eager_credits);
    cr_assert_eq(back.tag_hash_bits, cfg->tag_hash_bits);
    cr_assert_float_eq(back.peer_timeout, cfg->peer_timeout, 1e-6);
    cr_assert_eq(back.soft_ring_size, cfg->soft_ring_size);
    cr_assert_eq(back.soft_max_qps, cfg->soft_max_qps);
    cr_assert_eq(back.soft_max_mrs, cfg->soft_max_mrs);
    cr_assert_eq(back.soft_cma, cfg->soft_cma);
    cr_assert_eq(back.rank, cfg->rank);
    cr_assert_eq(back.size, cfg->size);
    cr_assert_str_eq(back.boot_addr, cfg->boot_addr);
    cr_assert_float_eq(back.boot_timeout, cfg->boot_timeout, 1e-6);
}

Test(config, print_roundtrip_defaults)
{
    tmx_config_t cfg;

    tmx_config_set_defaults(&cfg);
    check_print_roundtrip(&cfg, 0);
    check_print_roundtrip(&cfg, TMX_CONFIG_PRINT_DOC);
}

Test(config, print_roundtrip_changed)
{
    tmx_config_t cfg;

    tmx_config_set_defaults(&cfg);
    cfg.log_level = TMX_LOG_DEBUG;
    strcpy(cfg.log_file, "/tmp/tmx.%p.log");
    strcpy(cfg.providers, "soft");
    cfg.eager_max      = 12345;
    cfg.unexp_budget   = 3ul << 30;
    cfg.eager_credits  = 7;
    cfg.tag_hash_bits  = 17;
    cfg.peer_timeout   = 2.5;
    cfg.soft_ring_size = 1u << 19;
    cfg.soft_max_qps   = 9;
    cfg.soft_max_mrs   = 11;
    cfg.soft_cma       = 0;
    cfg.rank           = 5;
    cfg.size           = 6;
    strcpy(cfg.boot_addr, "node1:4242");
    cfg.boot_timeout = 0.5;
    check_print_roundtrip(&cfg, 0);
    check_print_roundtrip(&cfg, TMX_CONFIG_PRINT_DOC);
}

/* ---------------------------------------------------------------- log */

static char *read_file(const char *path)
{
    FILE  *fp = fopen(path, "r");
    char  *buf;
    long   size;
    size_t n;

    cr_assert_not_null(fp, "cannot open %s", path);
    fseek(fp, 0, SEEK_END);
    size = ftell(fp);
    cr_assert_geq(size, 0);
    rewind(fp);
    buf = calloc(1, (size_t)size + 1);
    cr_assert_not_null(buf);
    n      = fread(buf, 1, (size_t)size, fp);
    buf[n] = '\0';
    fclose(fp);
    return buf;
}

Test(log, file_level_and_format)
{
    tmx_config_t cfg;
    char         pattern[] = "/tmp/tmx_test_util_%p.log";
    char         path[128];
    char         expect[128];
    char        *text;

    cr_assert_eq(tmx_log_level_current, TMX_LOG_WARN);
    tmx_config_set_defaults(&cfg);
    cfg.log_level = TMX_LOG_INFO;
    strcpy(cfg.log_file, pattern);
    snprintf(path, sizeof(path), "/tmp/tmx_test_util_%d.log", (int)getpid());
    unlink(path);
    tmx_log_configure(&cfg);
    cr_assert_eq(tmx_log_level_current, TMX_LOG_INFO);
    tmx_error("first %d", 1);
    tmx_info("second\n");
    tmx_debug("filtered out");
    tmx_log_write(TMX_LOG_DEBUG, "tag", "src/tag/tag.c", 42, "with location");
    text = read_file(path);
    unlink(path);
    snprintf(expect, sizeof(expect), "[tmx %d core error] first 1\n", (int)getpid());
    cr_assert_not_null(strstr(text, expect), "%s", text);
    snprintf(expect, sizeof(expect), "[tmx %d core info] second\n", (int)getpid());
    cr_assert_not_null(strstr(text, expect), "%s", text);
    cr_assert_null(strstr(text, "filtered out"), "%s", text);
    snprintf(expect, sizeof(expect), "[tmx %d tag debug] with location (tag.c:42)\n",
             (int)getpid());
    cr_assert_not_null(strstr(text, expect), "%s", text);
    free(text);
}

Test(log, unopenable_file_falls_back_to_stderr)
{
    tmx_config_t cfg;

    tmx_config_set_defaults(&cfg);
    cfg.log_level = TMX_LOG_ERROR;
    strcpy(cfg.log_file, "/nonexistent-dir/tmx.log");
    tmx_log_configure(&cfg);
    cr_assert_eq(tmx_log_level_current, TMX_LOG_ERROR);
    tmx_error("still works"); /* to stderr; the test checks it does not crash */
}

/* ---------------------------------------------------------------- hash */

/* Deterministic keys so a failure can be replayed. */
static uint64_t rng_next(uint64_t *s)
{
    *s += 0x9e3779b97f4a7c15ULL;
    return tmx_hash_u64(*s);
}

#define REF_N 20000

Test(hash, put_get_del_against_reference)
{
    static uint64_t keys[REF_N];
    static char     live[REF_N];
    static char     objs[REF_N];
    tmx_hash_t      h;
    uint64_t        seed  = 1;
    size_t          count = 0;

    cr_assert_eq(tmx_hash_init(&h, 4), TMX_OK);
    for (size_t i = 0; i < REF_N; i++) {
        keys[i] = rng_next(&seed);
    }
    keys[0] = 0;
    keys[1] = UINT64_MAX;
    /* Random operations over a key set that fits the table many times over. */
    for (unsigned step = 0; step < 200000; step++) {
        size_t   i  = (size_t)(rng_next(&seed) % REF_N);
        unsigned op = (unsigned)(rng_next(&seed) % 3);

        if (op == 0) {
            tmx_status_t st = tmx_hash_put(&h, keys[i], &objs[i]);
            cr_assert_eq(st, live[i] ? TMX_ERR_BUSY : TMX_OK, "step %u", step);
            count += !live[i];
            live[i] = 1;
        } else if (op == 1) {
            cr_assert_eq(tmx_hash_del(&h, keys[i]), live[i] ? &objs[i] : NULL, "step %u", step);
            count -= live[i];
            live[i] = 0;
        } else {
            cr_assert_eq(tmx_hash_get(&h, keys[i]), live[i] ? &objs[i] : NULL, "step %u", step);
        }
        cr_assert_eq(h.count, count);
        cr_assert_leq(h.used * 10, h.cap * 7);
    }
    for (size_t i = 0; i < REF_N; i++) {
        cr_assert_eq(tmx_hash_get(&h, keys[i]), live[i] ? &objs[i] : NULL);
    }
    tmx_hash_cleanup(&h);
    cr_assert_eq(h.cap, 0);
    cr_assert_null(tmx_hash_get(&h, 5));
}

Test(hash, grows_with_many_keys)
{
    tmx_hash_t h;
    size_t     n = 100000;

    cr_assert_eq(tmx_hash_init(&h, 0), TMX_OK);
    cr_assert_eq(h.cap & (h.cap - 1), 0);
    for (size_t i = 0; i < n; i++) {
        cr_assert_eq(tmx_hash_put(&h, i << 20, (void *)(uintptr_t)(i * 8 + 8)), TMX_OK);
    }
    cr_assert_eq(h.count, n);
    cr_assert_geq(h.cap * 7, n * 10);
    cr_assert_eq(h.cap & (h.cap - 1), 0);
    for (size_t i = 0; i < n; i++) {
        cr_assert_eq(tmx_hash_get(&h, i << 20), (void *)(uintptr_t)(i * 8 + 8));
    }
    cr_assert_null(tmx_hash_get(&h, 1));
    tmx_hash_cleanup(&h);
}

Test(hash, tombstones_do_not_grow_forever)
{
    tmx_hash_t h;
    int        obj;

    cr_assert_eq(tmx_hash_init(&h, 64), TMX_OK);
    /* Many distinct keys but never more than 10 live: the table must stay small. */
    for (uint64_t k = 0; k < 200000; k++) {
        cr_assert_eq(tmx_hash_put(&h, k, &obj), TMX_OK);
        if (k >= 10) {
            cr_assert_eq(tmx_hash_del(&h, k - 10), &obj);
        }
    }
    cr_assert_eq(h.count, 10);
    cr_assert_leq(h.cap, 64);
    tmx_hash_cleanup(&h);
}

Test(hash, bad_input)
{
    tmx_hash_t h;
    int        obj;

    cr_assert_eq(tmx_hash_init(NULL, 8), TMX_ERR_INVALID_PARAM);
    cr_assert_eq(tmx_hash_init(&h, 8), TMX_OK);
    cr_assert_eq(tmx_hash_put(&h, 1, NULL), TMX_ERR_INVALID_PARAM);
    cr_assert_eq(tmx_hash_put(&h, 1, TMX_HASH_TOMBSTONE), TMX_ERR_INVALID_PARAM);
    cr_assert_eq(tmx_hash_put(&h, 1, &obj), TMX_OK);
    cr_assert_eq(tmx_hash_put(&h, 1, &obj), TMX_ERR_BUSY);
    cr_assert_null(tmx_hash_del(&h, 2));
    cr_assert_eq(tmx_hash_del(&h, 1), &obj);
    cr_assert_null(tmx_hash_del(&h, 1));
    cr_assert_eq(h.count, 0);
    tmx_hash_cleanup(&h);
}

/* ---------------------------------------------------------------- mpool */

Test(mpool, get_put_reuse)
{
    tmx_mpool_t mp;
    void       *a;
    void       *b;

    cr_assert_eq(tmx_mpool_init(&mp, 40, 8, 4, 0, "test"), TMX_OK);
    a = tmx_mpool_get(&mp);
    b = tmx_mpool_get(&mp);
    cr_assert_not_null(a);
    cr_assert_not_null(b);
    cr_assert_neq(a, b);
    memset(a, 0xab, 40);
    memset(b, 0xcd, 40);
    tmx_mpool_put(&mp, a);
    cr_assert_eq(tmx_mpool_get(&mp), a);
    tmx_mpool_put(&mp, a);
    tmx_mpool_put(&mp, b);
    tmx_mpool_cleanup(&mp);
    cr_assert_null(mp.chunks);
}

Test(mpool, unbounded_grows_and_elements_disjoint)
{
    enum { N = 1000, SZ = 24 };
    static unsigned char *elems[N];
    tmx_mpool_t           mp;

    cr_assert_eq(tmx_mpool_init(&mp, SZ, 0, 7, 0, "grow"), TMX_OK);
    for (int i = 0; i < N; i++) {
        elems[i] = tmx_mpool_get(&mp);
        cr_assert_not_null(elems[i]);
        memset(elems[i], i & 0xff, SZ);
    }
    /* Writing every element in full must not have touched any other. */
    for (int i = 0; i < N; i++) {
        for (int j = 0; j < SZ; j++) {
            cr_assert_eq(elems[i][j], (unsigned char)(i & 0xff), "element %d byte %d", i, j);
        }
    }
    cr_assert_geq(mp.num_elems, N);
    for (int i = 0; i < N; i++) {
        tmx_mpool_put(&mp, elems[i]);
    }
    tmx_mpool_cleanup(&mp);
}

Test(mpool, max_elems_honoured)
{
    void       *elems[11];
    tmx_mpool_t mp;
    int         n = 0;

    cr_assert_eq(tmx_mpool_init(&mp, 16, 16, 4, 10, "bounded"), TMX_OK);
    while (n < 11 && (elems[n] = tmx_mpool_get(&mp)) != NULL) {
        n++;
    }
    cr_assert_eq(n, 10);
    cr_assert_eq(mp.num_elems, 10);
    cr_assert_eq(tmx_mpool_grow(&mp), TMX_ERR_NO_RESOURCE);
    tmx_mpool_put(&mp, elems[3]);
    cr_assert_eq(tmx_mpool_get(&mp), elems[3]);
    cr_assert_null(tmx_mpool_get(&mp));
    for (int i = 0; i < n; i++) {
        tmx_mpool_put(&mp, elems[i]);
    }
    tmx_mpool_cleanup(&mp);
}

Test(mpool, alignment)
{
    static const size_t aligns[] = {1, 8, 16, 64, 256, 4096};

    for (size_t a = 0; a < sizeof(aligns) / sizeof(aligns[0]); a++) {
        tmx_mpool_t mp;
        void       *elems[20];

        cr_assert_eq(tmx_mpool_init(&mp, 10, aligns[a], 3, 0, "aligned"), TMX_OK);
        cr_assert_geq(mp.elem_size, 10);
        for (int i = 0; i < 20; i++) {
            elems[i] = tmx_mpool_get(&mp);
            cr_assert_not_null(elems[i]);
            cr_assert_eq((uintptr_t)elems[i] % aligns[a], 0, "align %zu", aligns[a]);
            cr_assert_eq((uintptr_t)elems[i] % sizeof(void *), 0);
        }
        for (int i = 0; i < 20; i++) {
            tmx_mpool_put(&mp, elems[i]);
        }
        tmx_mpool_cleanup(&mp);
    }
}

Test(mpool, bad_params)
{
    tmx_mpool_t mp;

    cr_assert_eq(tmx_mpool_init(NULL, 8, 8, 4, 0, "x"), TMX_ERR_INVALID_PARAM);
    cr_assert_eq(tmx_mpool_init(&mp, 0, 8, 4, 0, "x"), TMX_ERR_INVALID_PARAM);
    cr_assert_eq(tmx_mpool_init(&mp, 8, 3, 4, 0, "x"), TMX_ERR_INVALID_PARAM);
    cr_assert_eq(tmx_mpool_init(&mp, 8, 24, 4, 0, "x"), TMX_ERR_INVALID_PARAM);
    cr_assert_eq(tmx_mpool_init(&mp, SIZE_MAX, 8, 4, 0, "x"), TMX_ERR_INVALID_PARAM);
}

/* ---------------------------------------------------------------- log from threads */

#define LOG_THREADS 4
#define LOG_LINES   500

static void *log_thread(void *arg)
{
    int id = (int)(intptr_t)arg;

    for (int i = 0; i < LOG_LINES; i++) {
        tmx_error("thread %d line %d %s", id, i, "padding-padding-padding-padding-padding");
    }
    return NULL;
}

Test(log, lines_of_threads_do_not_mix)
{
    pthread_t    th[LOG_THREADS];
    tmx_config_t cfg;
    char         path[128];
    char        *text;
    int          seen[LOG_THREADS] = {0};
    int          lines             = 0;

    snprintf(path, sizeof(path), "/tmp/tmx_test_util_mt_%d.log", (int)getpid());
    unlink(path);
    tmx_config_set_defaults(&cfg);
    strcpy(cfg.log_file, path);
    tmx_log_configure(&cfg);
    for (int t = 0; t < LOG_THREADS; t++) {
        cr_assert_eq(pthread_create(&th[t], NULL, log_thread, (void *)(intptr_t)t), 0);
    }
    for (int t = 0; t < LOG_THREADS; t++) {
        pthread_join(th[t], NULL);
    }
    text = read_file(path);
    unlink(path);
    for (char *line = strtok(text, "\n"); line != NULL; line = strtok(NULL, "\n")) {
        int pid;
        int id;
        int n;
        int end = 0;

        cr_assert_eq(sscanf(line, "[tmx %d core error] thread %d line %d %*s%n", &pid, &id, &n,
                            &end),
                     3, "malformed line: %s", line);
        cr_assert_eq((size_t)end, strlen(line), "malformed line: %s", line);
        cr_assert(id >= 0 && id < LOG_THREADS);
        /* Each thread's lines arrive whole and in its own order. */
        cr_assert_eq(n, seen[id], "thread %d: line %d after %d", id, n, seen[id] - 1);
        seen[id]++;
        lines++;
    }
    free(text);
    cr_assert_eq(lines, LOG_THREADS * LOG_LINES);
}

/* ---------------------------------------------------------------- copy */

/* Every length up to past the memcpy cut-over, at every alignment of both sides: exactly the n
 * bytes arrive, and nothing around them is written. */
Test(copy, every_small_length_and_alignment)
{
    uint8_t src[96], dst[96];

    for (size_t i = 0; i < sizeof(src); i++) {
        src[i] = (uint8_t)(i * 13 + 1);
    }
    for (size_t n = 0; n <= 40; n++) {
        for (size_t so = 0; so < 8; so++) {
            for (size_t doff = 0; doff < 8; doff++) {
                memset(dst, 0xee, sizeof(dst));
                tmx_copy(dst + 16 + doff, src + so, n);
                for (size_t i = 0; i < sizeof(dst); i++) {
                    int inside = i >= 16 + doff && i < 16 + doff + n;
                    cr_assert_eq(dst[i], inside ? src[so + i - 16 - doff] : 0xee,
                                 "n %zu src+%zu dst+%zu: byte %zu", n, so, doff, i);
                }
            }
        }
    }
}
