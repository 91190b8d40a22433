/* The one configuration table: every TMX_* variable, its type, default and doc line.
 * No getenv() outside config.c. */
#ifndef TMX_UTIL_CONFIG_H
#define TMX_UTIL_CONFIG_H

#include <stddef.h>
#include <stdio.h>
#include <tmx/tmx.h>

typedef struct tmx_config {
    /* logging */
    int      log_level;        /* TMX_LOG_LEVEL: error|warn|info|debug|trace (tmx_log_level_t) */
    char     log_file[256];    /* TMX_LOG_FILE: "" = stderr; %p expands to the pid */
    /* devices */
    char     providers[128];   /* TMX_PROVIDERS: comma list, "" = all built */
    char     verbs_devices[128]; /* TMX_VERBS_DEVICES: comma list of dev or dev:port, "" = all */
    int      verbs_gid_index;  /* TMX_VERBS_GID_INDEX: -1 = find the RoCE v2 IPv4 GID */
    double   verbs_ack_timeout; /* TMX_VERBS_ACK_TIMEOUT: seconds before an RC retransmission */
    /* protocols */
    size_t   eager_max;        /* TMX_EAGER_MAX: largest eager message (bytes) */
    size_t   unexp_budget;     /* TMX_UNEXP_BUDGET: unexpected eager bytes buffered per worker */
    unsigned eager_credits;    /* TMX_EAGER_CREDITS: eager messages in flight per endpoint */
    unsigned send_queue;       /* TMX_SEND_QUEUE: work requests of a connection's send queue */
    unsigned mr_cache;         /* TMX_MR_CACHE: rendezvous registrations kept per worker, 0 none */
    size_t   rndv_copy;        /* TMX_RNDV_COPY: rendezvous up to this size through staging
                                * buffers on TMX_DEV_CAP_REG_SLOW devices, 0 never */
    unsigned tag_hash_bits;    /* TMX_TAG_HASH_BITS: log2 of matching hash bins */
    double   peer_timeout;     /* TMX_PEER_TIMEOUT: seconds of silence before a peer is dead */
    /* waiting */
    int      wait_mode;        /* TMX_WAIT: auto|spin|yield|sleep (tmx_wait_mode_t) */
    unsigned wait_spin_us;     /* TMX_WAIT_SPIN: microseconds of polling before sleeping */
    int      local_size;       /* TMX_LOCAL_SIZE: processes sharing our CPUs, -1 unknown */
    /* placement (set by tmxrun) */
    int      bind;             /* TMX_BIND: -1 unknown, else tmx_topo_level_t */
    char     bind_cpus[256];   /* TMX_BIND_CPUS: CPU list bound to, "" unbound or unknown */
    int      numa_node;        /* TMX_NUMA_NODE: NUMA node of our CPUs, -1 unknown */
    char     node_id[64];      /* TMX_NODE_ID: the node this process counts as on, "" = host */
    /* tag-matching offload (TM SRQ) */
    int      tm_offload;       /* TMX_TM_OFFLOAD: -1 auto, 0 no, 1 yes */
    size_t   tm_thresh;        /* TMX_TM_THRESH: smallest receive offered to the device */
    /* out-of-order data placement */
    int      ooo;              /* TMX_OOO: -1 auto, 0 no, 1 yes */
    int      fence_drop;       /* TMX_FENCE_DROP: debug, the planner sets no fence */
    /* eager-RDMA rings (src/proto/ring.h) */
    int      ring;             /* TMX_RING: -1 auto, 0 no, 1 yes */
    int      ring_mode;        /* TMX_RING_MODE: 0 auto, else tmx_ring_mode_t (tests) */
    unsigned ring_slots;       /* TMX_RING_SLOTS */
    size_t   ring_slot_size;   /* TMX_RING_SLOT_SIZE */
    unsigned ring_peers;       /* TMX_RING_PEERS: rings a worker lends at most */
    /* XRC domains */
    int      xrc;              /* TMX_XRC: -1 auto, 0 no, 1 yes */
    unsigned xrc_domains;      /* TMX_XRC_DOMAINS: domains (and SRQs) per process */
    /* soft device */
    size_t   soft_ring_size;   /* TMX_SOFT_RING_SIZE: bytes of each per-peer fast ring */
    size_t   soft_ring0_size;  /* TMX_SOFT_RING0_SIZE: bytes of the first one */
    int      soft_ring0_early; /* TMX_SOFT_RING0_EARLY: -1 auto, 0 no, 1 yes */
    size_t   soft_inbox_size;  /* TMX_SOFT_INBOX_SIZE: bytes of the shared receive ring */
    unsigned soft_fast_rings;  /* TMX_SOFT_FAST_RINGS */
    unsigned soft_max_qps;     /* TMX_SOFT_MAX_QPS */
    unsigned soft_max_mrs;     /* TMX_SOFT_MAX_MRS */
    int      soft_cma;         /* TMX_SOFT_CMA: -1 auto, 0 no, 1 yes */
    size_t   soft_cma_min;     /* TMX_SOFT_CMA_MIN: smaller RDMA goes through the rings */
    int      soft_memfd;       /* TMX_SOFT_MEMFD: -1 auto, 0 no, 1 yes */
    int      soft_tm;          /* TMX_SOFT_TM: the soft device offers a TM SRQ */
    int      soft_inplace;     /* TMX_SOFT_INPLACE: receives in place (TMX_DEV_CAP_RECV_INPLACE) */
    unsigned soft_tm_tags;     /* TMX_SOFT_TM_TAGS: tag list entries (max_num_tags) */
    unsigned soft_tm_ops;      /* TMX_SOFT_TM_OPS: outstanding list operations (max_ops) */
    unsigned soft_tm_sync_gap; /* TMX_SOFT_TM_SYNC_GAP: unexpected lag that asks for a SYNC */
    int      soft_tm_rndv;     /* TMX_SOFT_TM_RNDV: rendezvous offload */
    char     soft_tm_inject[64]; /* TMX_SOFT_TM_INJECT: list op failures for tests */
    int      soft_data_in_order; /* TMX_SOFT_DATA_IN_ORDER: TMX_SOFT_DIO_* (soft.h) */
    int      soft_ooo;         /* TMX_SOFT_OOO: the soft device offers OOO placement */
    unsigned soft_scramble_seed; /* TMX_SOFT_SCRAMBLE_SEED: 0 = from the pid and the clock */
    size_t   soft_dm_size;     /* TMX_SOFT_DM_SIZE: bytes of device memory (mem_alloc) */
    int      soft_xrc;         /* TMX_SOFT_XRC: the soft device offers XRC */
    unsigned soft_xrc_streams; /* TMX_SOFT_XRC_STREAMS: XRC streams a device receives / sends */
    /* job bootstrap (set by tmxrun) */
    int      rank;             /* TMX_RANK: -1 unset */
    int      size;             /* TMX_SIZE: -1 unset */
    char     boot_addr[128];   /* TMX_BOOT_ADDR */
    double   boot_timeout;     /* TMX_BOOT_TIMEOUT: seconds */
} tmx_config_t;

/* Defaults, then TMX_* from the environment. A malformed value fails with
 * TMX_ERR_INVALID_PARAM and an error message naming the variable. */
tmx_status_t tmx_config_load(tmx_config_t *cfg);

/* The configuration loaded once per process (thread-safe); NULL if it failed to parse. */
const tmx_config_t *tmx_config_get(void);

/* Whether cfg says more processes share this process's CPUs (TMX_LOCAL_SIZE) than its
 * affinity mask holds; *cpus_p (when not NULL) gets the mask's CPU count, 0 if unknown. */
int tmx_config_oversubscribed(const tmx_config_t *cfg, int *cpus_p);

/* Prints every variable: name, current value, default, and with TMX_CONFIG_PRINT_DOC the doc. */
void tmx_config_print_table(FILE *stream, const tmx_config_t *cfg, unsigned flags);

/* Parses "8k", "64M", "1g", "4096" into bytes; -1 on error. */
int tmx_config_parse_size(const char *str, size_t *out);

/* Fills cfg with the defaults of the table (never fails). */
void tmx_config_set_defaults(tmx_config_t *cfg);

/* Sets one variable (name with or without the TMX_ prefix) from its string form, with the
 * checks of tmx_config_load; TMX_ERR_INVALID_PARAM (and a message on stderr) if unknown or
 * invalid, cfg unchanged then. */
tmx_status_t tmx_config_set(tmx_config_t *cfg, const char *name, const char *value);

/* The table, for tests and tools: number of variables, name (without TMX_) and default of
 * each; NULL past the end. */
size_t tmx_config_num_vars(void);
const char *tmx_config_var_name(size_t index);
const char *tmx_config_var_default(size_t index);

/* Counts TMX_* variables in the environment that are not in the table (nor TMX_BUILDDIR,
 * TMX_SRCDIR, TMX_LOCAL_RANK) and writes their names, space-separated, into buf. */
size_t tmx_config_find_unknown(char *buf, size_t len);

#endif
