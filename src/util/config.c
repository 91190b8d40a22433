/* The configuration table: the only place where tmx reads the environment. */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "util/config.h"
#include "util/log.h"

#define TMX_CONFIG_PREFIX "TMX_"

extern char **environ;

typedef enum {
    TMX_CONFIG_INT,
    TMX_CONFIG_UINT,
    TMX_CONFIG_SIZE,
    TMX_CONFIG_DOUBLE,
    TMX_CONFIG_BOOL,
    TMX_CONFIG_STRING,
    TMX_CONFIG_ENUM,
} tmx_config_type_t;

/* Range and shape checks a field may ask for. */
enum {
    TMX_CONFIG_F_MIN  = 1u << 0, /* value >= min */
    TMX_CONFIG_F_MAX  = 1u << 1, /* value <= max */
    TMX_CONFIG_F_POW2 = 1u << 2, /* value is a power of two */
    TMX_CONFIG_F_POS  = 1u << 3, /* double strictly > 0 */
};

typedef struct tmx_config_enum {
    const char *word;
    int         value;
} tmx_config_enum_t;

typedef struct tmx_config_field {
    const char              *name;  /* without the TMX_ prefix */
    tmx_config_type_t        type;
    const char              *dflt;  /* parsed by the same code as the environment */
    const char              *doc;
    size_t                   offset;
    size_t                   size;  /* sizeof the member; bounds string copies */
    const tmx_config_enum_t *words; /* ENUM only; terminated by a NULL word */
    unsigned                 flags;
    double                   min;
    double                   max;
} tmx_config_field_t;

static const tmx_config_enum_t tmx_config_log_levels[] = {
    {"error", TMX_LOG_ERROR}, {"warn", TMX_LOG_WARN},   {"info", TMX_LOG_INFO},
    {"debug", TMX_LOG_DEBUG}, {"trace", TMX_LOG_TRACE}, {NULL, 0},
};

static const tmx_config_enum_t tmx_config_ternary[] = {
    {"auto", -1}, {"yes", 1}, {"no", 0}, {NULL, 0},
};

static const tmx_config_enum_t tmx_config_wait_modes[] = {
    {"auto", TMX_WAIT_AUTO},   {"spin", TMX_WAIT_SPIN}, {"yield", TMX_WAIT_YIELD},
    {"sleep", TMX_WAIT_SLEEP}, {NULL, 0},
};

/* TMX_SOFT_DIO_* (src/prov/soft/soft.h) */
static const tmx_config_enum_t tmx_config_data_in_order[] = {
    {"whole", 0}, {"aligned128", 1}, {"none", 2}, {NULL, 0},
};

/* tmx_ring_mode_t (src/proto/ring_slot.h) */
static const tmx_config_enum_t tmx_config_ring_modes[] = {
    {"auto", 0}, {"whole", 1}, {"aligned128", 2}, {"imm", 3}, {NULL, 0},
};

/* tmx_topo_level_t (src/topo/topo.h) */
static const tmx_config_enum_t tmx_config_bind_levels[] = {
    {"unknown", -1}, {"none", 0}, {"core", 1}, {"numa", 2}, {"socket", 3}, {NULL, 0},
};

#define TMX_CONFIG_FIELD(_name, _type, _dflt, _member, _doc)                                       \
    .name = (_name), .type = (_type), .dflt = (_dflt), .doc = (_doc),                              \
    .offset = offsetof(tmx_config_t, _member), .size = sizeof(((tmx_config_t *)0)->_member)

/* Every member of tmx_config_t has exactly one row; test_util checks the count. */
static const tmx_config_field_t tmx_config_table[] = {
    {TMX_CONFIG_FIELD("LOG_LEVEL", TMX_CONFIG_ENUM, "warn", log_level,
                      "Messages at this level and more severe are logged."),
     .words = tmx_config_log_levels},
    {TMX_CONFIG_FIELD("LOG_FILE", TMX_CONFIG_STRING, "", log_file,
                      "Log destination file; empty means stderr, %p is replaced by the pid.")},
    {TMX_CONFIG_FIELD("PROVIDERS", TMX_CONFIG_STRING, "", providers,
                      "Comma-separated device providers to use; empty means all that were built.")},
    {TMX_CONFIG_FIELD("VERBS_DEVICES", TMX_CONFIG_STRING, "", verbs_devices,
                      "Verbs provider: comma-separated RDMA devices (mlx5_0) or device ports "
                      "(mlx5_0:1) to use; empty means every active port of every device.")},
    {TMX_CONFIG_FIELD("VERBS_GID_INDEX", TMX_CONFIG_INT, "-1", verbs_gid_index,
                      "Verbs provider, RoCE ports: the GID table index to use; -1 picks the "
                      "RoCE v2 GID of an IPv4 address, else another RoCE v2 one, else RoCE v1."),
     .flags = TMX_CONFIG_F_MIN | TMX_CONFIG_F_MAX, .min = -1, .max = 65535},
    {TMX_CONFIG_FIELD("VERBS_ACK_TIMEOUT", TMX_CONFIG_DOUBLE, "0.067", verbs_ack_timeout,
                      "Verbs provider, RC QPs: seconds without an acknowledgement before a "
                      "packet is sent again (rounded up to the 4.096 us x 2^n the adapter "
                      "takes); after 6 retransmissions the connection fails."),
     .flags = TMX_CONFIG_F_POS | TMX_CONFIG_F_MAX, .max = 600},
    {TMX_CONFIG_FIELD("EAGER_MAX", TMX_CONFIG_SIZE, "16k", eager_max,
                      "Largest message sent eagerly; larger ones use rendezvous.")},
    {TMX_CONFIG_FIELD("UNEXP_BUDGET", TMX_CONFIG_SIZE, "64m", unexp_budget,
                      "Bytes of unexpected eager messages buffered per worker.")},
    {TMX_CONFIG_FIELD("EAGER_CREDITS", TMX_CONFIG_UINT, "64", eager_credits,
                      "Eager messages in flight per endpoint before the sender waits for credits."),
     .flags = TMX_CONFIG_F_MIN | TMX_CONFIG_F_MAX, .min = 1,
     .max = 65535 /* what a header returns at once (16 bits); an endpoint's count is an int */},
    {TMX_CONFIG_FIELD("SEND_QUEUE", TMX_CONFIG_UINT, "256", send_queue,
                      "Work requests each connection's send queue holds (the RC QP's depth); "
                      "posts that find it full wait in tmx's queues and are retried."),
     .flags = TMX_CONFIG_F_MIN | TMX_CONFIG_F_MAX, .min = 4, .max = 65536},
    {TMX_CONFIG_FIELD("MR_CACHE", TMX_CONFIG_UINT, "0", mr_cache,
                      "Rendezvous buffers' registrations a worker keeps after their message, for "
                      "the next message from or into the same memory (0: none, each is "
                      "registered per message); a userfaultfd monitor drops one when its memory "
                      "is unmapped or released (Linux; off where userfaultfd is refused)."),
     .flags = TMX_CONFIG_F_MAX, .max = 4096},
    {TMX_CONFIG_FIELD("RNDV_COPY", TMX_CONFIG_SIZE, "64k", rndv_copy,
                      "Rendezvous messages up to this size go through staging buffers "
                      "registered once (a copy at each end; a sender's are its endpoint's, "
                      "keyed for that peer alone) instead of registering the user's buffers "
                      "per message, on devices where registering is a system call (verbs); "
                      "not for buffers in a tmx_mem_map range or with TMX_MR_CACHE (0: never)."),
     .flags = TMX_CONFIG_F_MAX, .max = 4194304},
    {TMX_CONFIG_FIELD("TAG_HASH_BITS", TMX_CONFIG_UINT, "10", tag_hash_bits,
                      "Log2 of the initial number of tag matching hash bins (they grow)."),
     .flags = TMX_CONFIG_F_MIN | TMX_CONFIG_F_MAX, .min = 1, .max = 24},
    {TMX_CONFIG_FIELD("PEER_TIMEOUT", TMX_CONFIG_DOUBLE, "10.0", peer_timeout,
                      "Seconds a connect, a FLUSH close or a disconnect waits on a silent peer."),
     .flags = TMX_CONFIG_F_POS},
    {TMX_CONFIG_FIELD("WAIT", TMX_CONFIG_ENUM, "auto", wait_mode,
                      "How blocking calls wait when a poll finds nothing: auto polls for "
                      "TMX_WAIT_SPIN (yielding when oversubscribed, and then sleeping after 4 "
                      "idle yields per process on the CPU if sooner) then sleeps; spin; yield; "
                      "sleep at once."),
     .words = tmx_config_wait_modes},
    {TMX_CONFIG_FIELD("WAIT_SPIN", TMX_CONFIG_UINT, "1000", wait_spin_us,
                      "Microseconds a blocking call of TMX_WAIT=auto polls before it sleeps (grown up "
                      "to 16 times while sleeps end soon after they start)."),
     .flags = TMX_CONFIG_F_MAX, .max = 10000000},
    {TMX_CONFIG_FIELD("LOCAL_SIZE", TMX_CONFIG_INT, "-1", local_size,
                      "Processes of the job that run on this process's CPUs (set by tmxrun; unset, "
                      "from Open MPI's or MPICH's local size when not bound); more than the CPUs "
                      "of the affinity mask is oversubscribed. -1: unknown."),
     .flags = TMX_CONFIG_F_MIN, .min = -1},
    {TMX_CONFIG_FIELD("BIND", TMX_CONFIG_ENUM, "unknown", bind,
                      "What tmxrun bound this process to: none, core, numa or socket; unknown "
                      "when not launched by tmxrun."),
     .words = tmx_config_bind_levels},
    {TMX_CONFIG_FIELD("BIND_CPUS", TMX_CONFIG_STRING, "", bind_cpus,
                      "The CPUs tmxrun bound this process to, as a list (0-3,8); empty when "
                      "unbound or not launched by tmxrun.")},
    {TMX_CONFIG_FIELD("NUMA_NODE", TMX_CONFIG_INT, "-1", numa_node,
                      "NUMA node of this process's CPUs (set by tmxrun): the soft device's "
                      "memory goes there. -1: found with hwloc, or unknown."),
     .flags = TMX_CONFIG_F_MIN, .min = -1},
    {TMX_CONFIG_FIELD("NODE_ID", TMX_CONFIG_STRING, "", node_id,
                      "The node this process counts as running on; processes with the same value "
                      "share XRC domains. Empty: the host. Set it per rank to make one host look "
                      "like several nodes.")},
    {TMX_CONFIG_FIELD("TM_OFFLOAD", TMX_CONFIG_ENUM, "auto", tm_offload,
                      "Tag-matching offload: auto and yes give receives to a device's tag list "
                      "where the device has one (yes warns where none has); no matches in "
                      "software only."),
     .words = tmx_config_ternary},
    {TMX_CONFIG_FIELD("TM_THRESH", TMX_CONFIG_SIZE, "1k", tm_thresh,
                      "Receives with a smaller buffer are matched in software, never offered to "
                      "the device's tag list."),
     .flags = TMX_CONFIG_F_MIN, .min = 64},
    {TMX_CONFIG_FIELD("OOO", TMX_CONFIG_ENUM, "auto", ooo,
                      "Out-of-order data placement on RC queue pairs: auto and yes enable it "
                      "where the device offers it (yes warns where none does); no never."),
     .words = tmx_config_ternary},
    {TMX_CONFIG_FIELD("FENCE_DROP", TMX_CONFIG_BOOL, "no", fence_drop,
                      "For tests only: the fence planner sets no fence, so that data placed out "
                      "of order shows as corruption.")},
    {TMX_CONFIG_FIELD("RING", TMX_CONFIG_ENUM, "auto", ring,
                      "Eager-RDMA rings: small messages written into memory the receiver polls. "
                      "auto lends one to a sender at its first message while rings are to "
                      "spare, at its 16th once all are lent; yes from its "
                      "first; no never."),
     .words = tmx_config_ternary},
    {TMX_CONFIG_FIELD("RING_MODE", TMX_CONFIG_ENUM, "auto", ring_mode,
                      "For tests only: the ring mode a receiver uses whatever its device's "
                      "data-in-order answer (whole, aligned128, imm); auto follows the answer."),
     .words = tmx_config_ring_modes},
    {TMX_CONFIG_FIELD("RING_SLOTS", TMX_CONFIG_UINT, "32", ring_slots,
                      "Slots (messages in flight) of an eager-RDMA ring."),
     .flags = TMX_CONFIG_F_MIN | TMX_CONFIG_F_MAX | TMX_CONFIG_F_POW2, .min = 2, .max = 4096},
    {TMX_CONFIG_FIELD("RING_SLOT_SIZE", TMX_CONFIG_SIZE, "2k", ring_slot_size,
                      "Payload bytes a ring slot carries (the slot adds the header and the mode's "
                      "flag or stamps, rounded up to 128 bytes): larger messages go by the "
                      "queue."),
     .flags = TMX_CONFIG_F_MIN | TMX_CONFIG_F_MAX | TMX_CONFIG_F_POW2, .min = 128,
     .max = 65536},
    {TMX_CONFIG_FIELD("RING_PEERS", TMX_CONFIG_UINT, "8", ring_peers,
                      "Rings a worker lends at most (to its busiest senders, first come); the "
                      "first two cost about RING_SLOTS x RING_SLOT_SIZE bytes of device memory "
                      "each, the others a quarter of that."),
     .flags = TMX_CONFIG_F_MAX, .max = 4096},
    {TMX_CONFIG_FIELD("XRC", TMX_CONFIG_ENUM, "auto", xrc,
                      "XRC domains: auto and yes connect through the node's XRC domains where "
                      "the device offers them (yes warns where it cannot; with tag-matching "
                      "offload the tagged messages stay on RC, the rest goes on XRC); no "
                      "connects one RC queue pair per peer process."),
     .words = tmx_config_ternary},
    {TMX_CONFIG_FIELD("XRC_DOMAINS", TMX_CONFIG_UINT, "2", xrc_domains,
                      "XRC domains per node: the messages of a pair of workers use one (chosen "
                      "from the two workers' ids), rendezvous data from 128 KiB is striped over "
                      "all."),
     .flags = TMX_CONFIG_F_MIN | TMX_CONFIG_F_MAX, .min = 1, .max = 4},
    {TMX_CONFIG_FIELD("SOFT_RING_SIZE", TMX_CONFIG_SIZE, "256k", soft_ring_size,
                      "Soft device: bytes of each per-peer fast ring."),
     .flags = TMX_CONFIG_F_MIN | TMX_CONFIG_F_MAX | TMX_CONFIG_F_POW2, .min = 4096,
     .max = 1ull << 30 /* a peer takes a segment of rings up to 4 GiB each */},
    {TMX_CONFIG_FIELD("SOFT_RING0_SIZE", TMX_CONFIG_SIZE, "2m", soft_ring0_size,
                      "Soft device: bytes of the first fast ring, lent first (a ring larger "
                      "than a core's cache moves medium messages faster; at least the fast "
                      "ring size)."),
     .flags = TMX_CONFIG_F_MIN | TMX_CONFIG_F_MAX | TMX_CONFIG_F_POW2, .min = 4096,
     .max = 1ull << 30 /* a peer takes a segment of rings up to 4 GiB each */},
    {TMX_CONFIG_FIELD("SOFT_RING0_EARLY", TMX_CONFIG_ENUM, "auto", soft_ring0_early,
                      "Soft device: make the first fast ring's pages when the device opens "
                      "(TMX_SOFT_RING0_SIZE bytes of memory per process, used or not) instead "
                      "of in its first lap; auto does unless oversubscribed (TMX_LOCAL_SIZE)."),
     .words = tmx_config_ternary},
    {TMX_CONFIG_FIELD("SOFT_INBOX_SIZE", TMX_CONFIG_SIZE, "256k", soft_inbox_size,
                      "Soft device: bytes of the receive ring that every sender shares (at "
                      "least the fast ring size)."),
     .flags = TMX_CONFIG_F_MIN | TMX_CONFIG_F_MAX | TMX_CONFIG_F_POW2, .min = 4096,
     .max = 1ull << 30 /* a peer takes a segment of rings up to 4 GiB each */},
    {TMX_CONFIG_FIELD("SOFT_FAST_RINGS", TMX_CONFIG_UINT, "8", soft_fast_rings,
                      "Soft device: per-peer fast rings, given to the busiest senders."),
     .flags = TMX_CONFIG_F_MAX, .max = 1024},
    {TMX_CONFIG_FIELD("SOFT_MAX_QPS", TMX_CONFIG_UINT, "4096", soft_max_qps,
                      "Soft device: maximum number of queue pairs per device."),
     .flags = TMX_CONFIG_F_MIN | TMX_CONFIG_F_MAX, .min = 1,
     .max = 1u << 20 /* a peer maps no segment with more (tmx_soft_seg_valid), and XRC
                      * target numbers start above them (soft_xrc.c) */},
    {TMX_CONFIG_FIELD("SOFT_MAX_MRS", TMX_CONFIG_UINT, "4096", soft_max_mrs,
                      "Soft device: maximum number of memory regions per device (a region's "
                      "index is 24 bits of its key)."),
     .flags = TMX_CONFIG_F_MIN | TMX_CONFIG_F_MAX,
     .min = 8 /* a worker keeps 3, rings take at most a quarter (ring.c), the rest is for
               * rendezvous: with 4 or fewer, a worker failed to start or waited for ever */,
     .max = 1u << 24},
    {TMX_CONFIG_FIELD("SOFT_CMA", TMX_CONFIG_ENUM, "auto", soft_cma,
                      "Soft device: use cross-memory attach (process_vm_readv) for large copies."),
     .words = tmx_config_ternary},
    {TMX_CONFIG_FIELD("SOFT_CMA_MIN", TMX_CONFIG_SIZE, "1g", soft_cma_min,
                      "Soft device: RDMA reads and writes of at least this many bytes go by "
                      "cross-memory attach (where TMX_SOFT_CMA allows), smaller ones through "
                      "the rings (two pipelined copies; faster on VMs; needs the target's "
                      "progress). 0: all by cross-memory attach."),
     .flags = TMX_CONFIG_F_MAX, .max = 1ull << 30},
    {TMX_CONFIG_FIELD("SOFT_MEMFD", TMX_CONFIG_ENUM, "auto", soft_memfd,
                      "Soft device: anonymous segments (memfd) that peers open through /proc, "
                      "instead of named ones in /dev/shm."),
     .words = tmx_config_ternary},
    {TMX_CONFIG_FIELD("SOFT_INPLACE", TMX_CONFIG_BOOL, "yes", soft_inplace,
                      "Soft device: an eager message is read where the sender wrote it, not "
                      "first copied into a receive buffer (receives in place).")},
    {TMX_CONFIG_FIELD("SOFT_REG_SLOW", TMX_CONFIG_BOOL, "no", soft_reg_slow,
                      "Soft device, for tests: report registration as slow, as verbs devices "
                      "do, so that rendezvous messages of up to TMX_RNDV_COPY go through "
                      "staging buffers.")},
    {TMX_CONFIG_FIELD("SOFT_TM", TMX_CONFIG_BOOL, "no", soft_tm,
                      "Soft device: offer a tag-matching SRQ (TM SRQ), as mlx5 adapters do.")},
    {TMX_CONFIG_FIELD("SOFT_TM_TAGS", TMX_CONFIG_UINT, "1023", soft_tm_tags,
                      "Soft device: entries of a TM SRQ's tag list (max_num_tags)."),
     .flags = TMX_CONFIG_F_MIN | TMX_CONFIG_F_MAX, .min = 1, .max = 65535},
    {TMX_CONFIG_FIELD("SOFT_TM_OPS", TMX_CONFIG_UINT, "32768", soft_tm_ops,
                      "Soft device: tag list operations a TM SRQ takes outstanding (max_ops)."),
     .flags = TMX_CONFIG_F_MIN | TMX_CONFIG_F_MAX, .min = 1, .max = 1048576},
    {TMX_CONFIG_FIELD("SOFT_TM_SYNC_GAP", TMX_CONFIG_UINT, "16383", soft_tm_sync_gap,
                      "Soft device: unexpected messages software may lag behind before "
                      "completions ask for a SYNC."),
     .flags = TMX_CONFIG_F_MAX, .max = 32767},
    {TMX_CONFIG_FIELD("SOFT_TM_RNDV", TMX_CONFIG_BOOL, "yes", soft_tm_rndv,
                      "Soft device: the TM SRQ reads matched rendezvous data itself and sends "
                      "the FIN (rendezvous offload).")},
    {TMX_CONFIG_FIELD("SOFT_TM_INJECT", TMX_CONFIG_STRING, "", soft_tm_inject,
                      "Soft device, for tests: make every Nth tag list operation of a kind fail "
                      "when posted, e.g. add=7,del=3,sync=2; empty: none.")},
    {TMX_CONFIG_FIELD("SOFT_DATA_IN_ORDER", TMX_CONFIG_ENUM, "whole", soft_data_in_order,
                      "Soft device: what a queue pair answers to the data-in-order query, and how "
                      "RDMA writes land: whole (like mlx5), aligned128 (like EFA) or none (like "
                      "rxe: bytes land scrambled)."),
     .words = tmx_config_data_in_order},
    {TMX_CONFIG_FIELD("SOFT_OOO", TMX_CONFIG_BOOL, "no", soft_ooo,
                      "Soft device: offer out-of-order data placement (enabled per queue pair).")},
    {TMX_CONFIG_FIELD("SOFT_SCRAMBLE_SEED", TMX_CONFIG_UINT, "0", soft_scramble_seed,
                      "Soft device, for tests: seed of the order in which scrambled data lands; "
                      "0 takes one from the pid and the clock.")},
    {TMX_CONFIG_FIELD("SOFT_DM_SIZE", TMX_CONFIG_SIZE, "1m", soft_dm_size,
                      "Soft device: bytes of its segment given out as device memory (mem_alloc: "
                      "what eager-RDMA rings are made of), where peers' RDMA writes are their own "
                      "stores; 0: none."),
     .flags = TMX_CONFIG_F_MAX, .max = 1073741824.0},
    {TMX_CONFIG_FIELD("SOFT_XRC", TMX_CONFIG_BOOL, "no", soft_xrc,
                      "Soft device: offer XRC domains, SRQs and queue pairs, as mlx5 adapters "
                      "do (needs cross-memory attach: not with TMX_SOFT_CMA=no).")},
    {TMX_CONFIG_FIELD("SOFT_XRC_STREAMS", TMX_CONFIG_UINT, "1024", soft_xrc_streams,
                      "Soft device: XRC senders a process receives from at once, and XRC "
                      "destinations it sends to (per device)."),
     .flags = TMX_CONFIG_F_MIN | TMX_CONFIG_F_MAX, .min = 1, .max = 65536},
    {TMX_CONFIG_FIELD("RANK", TMX_CONFIG_INT, "-1", rank,
                      "Rank of this process in the job (set by tmxrun); -1 means not launched."),
     .flags = TMX_CONFIG_F_MIN, .min = -1},
    {TMX_CONFIG_FIELD("SIZE", TMX_CONFIG_INT, "-1", size,
                      "Number of processes in the job (set by tmxrun); -1 means not launched."),
     .flags = TMX_CONFIG_F_MIN, .min = -1},
    {TMX_CONFIG_FIELD("BOOT_ADDR", TMX_CONFIG_STRING, "", boot_addr,
                      "Address (host:port:cookie) of the bootstrap server (set by tmxrun).")},
    {TMX_CONFIG_FIELD("BOOT_TIMEOUT", TMX_CONFIG_DOUBLE, "60.0", boot_timeout,
                      "Seconds a rank keeps trying to connect to the launcher."),
     .flags = TMX_CONFIG_F_POS},
};

#define TMX_CONFIG_NUM_FIELDS (sizeof(tmx_config_table) / sizeof(tmx_config_table[0]))

/* Variables that are not configuration but share the prefix: the test harness's and the
 * launcher's own. They must not trigger the typo warning. */
static const char *const tmx_config_ignored[] = {
    "BUILDDIR",
    "SRCDIR",
    "LOCAL_RANK",
    NULL,
};

static void tmx_config_complain(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Configuration errors are printed directly: the log is configured from the configuration,
 * so it cannot report on it. Same prefix as log.c so the lines look alike. */
static void tmx_config_complain(const char *fmt, ...)
{
    char    msg[512];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    fprintf(stderr, "[tmx %d config error] %s\n", (int)getpid(), msg);
}

int tmx_config_parse_size(const char *str, size_t *out)
{
    unsigned long long value;
    unsigned long long mult = 1;
    char              *end;
    int                ret  = -1;

    if (str == NULL || out == NULL || !isdigit((unsigned char)str[0])) {
        goto out;
    }
    errno = 0;
    value = strtoull(str, &end, 10);
    if (errno != 0) {
        goto out;
    }
    switch (tolower((unsigned char)*end)) {
    case 'k':
        mult = 1ULL << 10;
        end++;
        break;
    case 'm':
        mult = 1ULL << 20;
        end++;
        break;
    case 'g':
        mult = 1ULL << 30;
        end++;
        break;
    default:
        break;
    }
    /* "64kb" and "64KB" read naturally too; a lone "b" means bytes. */
    if (*end == 'b' || *end == 'B') {
        end++;
    }
    if (*end != '\0' || value > SIZE_MAX / mult) {
        goto out;
    }
    *out = (size_t)(value * mult);
    ret  = 0;
out:
    return ret;
}

static int tmx_config_parse_bool(const char *str, int *out)
{
    static const char *const yes[] = {"1", "y", "yes", "on", "true", NULL};
    static const char *const no[]  = {"0", "n", "no", "off", "false", NULL};
    int                      ret   = -1;

    for (int i = 0; yes[i] != NULL && ret != 0; i++) {
        if (strcasecmp(str, yes[i]) == 0) {
            *out = 1;
            ret  = 0;
        }
    }
    for (int i = 0; no[i] != NULL && ret != 0; i++) {
        if (strcasecmp(str, no[i]) == 0) {
            *out = 0;
            ret  = 0;
        }
    }
    return ret;
}

/* Describes what a field accepts, for error messages and the printed table. */
static void tmx_config_syntax(const tmx_config_field_t *f, char *buf, size_t len)
{
    size_t pos = 0;

    buf[0] = '\0';
    switch (f->type) {
    case TMX_CONFIG_INT:
        pos = (size_t)snprintf(buf, len, "integer");
        break;
    case TMX_CONFIG_UINT:
        pos = (size_t)snprintf(buf, len, "unsigned integer");
        break;
    case TMX_CONFIG_SIZE:
        pos = (size_t)snprintf(buf, len, "size in bytes with optional k|m|g suffix (binary)");
        break;
    case TMX_CONFIG_DOUBLE:
        pos = (size_t)snprintf(buf, len, "floating point number%s",
                               (f->flags & TMX_CONFIG_F_POS) ? " > 0" : "");
        break;
    case TMX_CONFIG_BOOL:
        pos = (size_t)snprintf(buf, len, "yes|no");
        break;
    case TMX_CONFIG_STRING:
        pos = (size_t)snprintf(buf, len, "string of at most %zu characters", f->size - 1);
        break;
    case TMX_CONFIG_ENUM:
        for (const tmx_config_enum_t *w = f->words; w->word != NULL && pos < len; w++) {
            pos += (size_t)snprintf(buf + pos, len - pos, "%s%s", (w == f->words) ? "" : "|",
                                    w->word);
        }
        break;
    }
    if (pos < len && (f->flags & TMX_CONFIG_F_POW2)) {
        pos += (size_t)snprintf(buf + pos, len - pos, ", power of two");
    }
    if (pos < len && (f->flags & TMX_CONFIG_F_MIN) && (f->flags & TMX_CONFIG_F_MAX)) {
        pos += (size_t)snprintf(buf + pos, len - pos, ", %.15g..%.15g", f->min, f->max);
    } else if (pos < len && (f->flags & TMX_CONFIG_F_MIN)) {
        pos += (size_t)snprintf(buf + pos, len - pos, ", >= %.15g", f->min);
    } else if (pos < len && (f->flags & TMX_CONFIG_F_MAX)) {
        pos += (size_t)snprintf(buf + pos, len - pos, ", <= %.15g", f->max);
    }
}

/* Range checks shared by the numeric types; doubles hold every bound we use exactly. */
static int tmx_config_check_range(const tmx_config_field_t *f, double v, unsigned long long u)
{
    int ok = 1;

    ok = ok && (!(f->flags & TMX_CONFIG_F_MIN) || v >= f->min);
    ok = ok && (!(f->flags & TMX_CONFIG_F_MAX) || v <= f->max);
    ok = ok && (!(f->flags & TMX_CONFIG_F_POW2) || (u != 0 && (u & (u - 1)) == 0));
    ok = ok && (!(f->flags & TMX_CONFIG_F_POS) || v > 0);
    return ok ? 0 : -1;
}

/* Parses str into the member of cfg; -1 if malformed or out of range (cfg untouched). */
static int tmx_config_parse_field(const tmx_config_field_t *f, const char *str, tmx_config_t *cfg)
{
    void              *dst = (char *)cfg + f->offset;
    char              *end;
    long               l;
    unsigned long long u;
    double             d;
    size_t             sz;
    int                b;
    int                ret = -1;

    errno = 0;
    switch (f->type) {
    case TMX_CONFIG_INT:
        l = strtol(str, &end, 10);
        if (str[0] == '\0' || isspace((unsigned char)str[0]) || *end != '\0' || errno != 0 ||
            l < INT_MIN || l > INT_MAX || tmx_config_check_range(f, (double)l, 0) != 0) {
            break;
        }
        *(int *)dst = (int)l;
        ret         = 0;
        break;
    case TMX_CONFIG_UINT:
        /* strtoull accepts "-1" and wraps it; only plain digits are an unsigned. */
        if (!isdigit((unsigned char)str[0])) {
            break;
        }
        u = strtoull(str, &end, 10);
        if (*end != '\0' || errno != 0 || u > UINT_MAX ||
            tmx_config_check_range(f, (double)u, u) != 0) {
            break;
        }
        *(unsigned *)dst = (unsigned)u;
        ret              = 0;
        break;
    case TMX_CONFIG_SIZE:
        if (tmx_config_parse_size(str, &sz) != 0 ||
            tmx_config_check_range(f, (double)sz, sz) != 0) {
            break;
        }
        *(size_t *)dst = sz;
        ret            = 0;
        break;
    case TMX_CONFIG_DOUBLE:
        d = strtod(str, &end);
        if (str[0] == '\0' || isspace((unsigned char)str[0]) || *end != '\0' || errno != 0 ||
            !isfinite(d) || tmx_config_check_range(f, d, 0) != 0) {
            break;
        }
        *(double *)dst = d;
        ret            = 0;
        break;
    case TMX_CONFIG_BOOL:
        if (tmx_config_parse_bool(str, &b) != 0) {
            break;
        }
        *(int *)dst = b;
        ret         = 0;
        break;
    case TMX_CONFIG_STRING:
        /* Truncating a path or an address silently would be worse than refusing it. */
        if (strlen(str) >= f->size) {
            break;
        }
        memcpy(dst, str, strlen(str) + 1);
        ret = 0;
        break;
    case TMX_CONFIG_ENUM:
        for (const tmx_config_enum_t *w = f->words; w->word != NULL; w++) {
            if (strcasecmp(str, w->word) == 0) {
                *(int *)dst = w->value;
                ret         = 0;
                break;
            }
        }
        break;
    }
    return ret;
}

static const tmx_config_field_t *tmx_config_find(const char *name)
{
    const tmx_config_field_t *f = NULL;

    if (strncmp(name, TMX_CONFIG_PREFIX, strlen(TMX_CONFIG_PREFIX)) == 0) {
        name += strlen(TMX_CONFIG_PREFIX);
    }
    for (size_t i = 0; i < TMX_CONFIG_NUM_FIELDS && f == NULL; i++) {
        if (strcmp(tmx_config_table[i].name, name) == 0) {
            f = &tmx_config_table[i];
        }
    }
    return f;
}

tmx_status_t tmx_config_set(tmx_config_t *cfg, const char *name, const char *value)
{
    const tmx_config_field_t *f;
    char                      syntax[256];
    tmx_status_t              status = TMX_ERR_INVALID_PARAM;

    if (cfg == NULL || name == NULL || value == NULL) {
        goto out;
    }
    f = tmx_config_find(name);
    if (f == NULL) {
        tmx_config_complain("unknown configuration variable %s%s", TMX_CONFIG_PREFIX, name);
        goto out;
    }
    if (tmx_config_parse_field(f, value, cfg) != 0) {
        tmx_config_syntax(f, syntax, sizeof(syntax));
        tmx_config_complain("invalid value '%s' for %s%s: expected %s", value,
                            TMX_CONFIG_PREFIX, f->name, syntax);
        goto out;
    }
    status = TMX_OK;
out:
    return status;
}

void tmx_config_set_defaults(tmx_config_t *cfg)
{
    memset(cfg, 0, sizeof(*cfg));
    for (size_t i = 0; i < TMX_CONFIG_NUM_FIELDS; i++) {
        /* The defaults pass the same checks as user values (test_util asserts it). */
        (void)tmx_config_parse_field(&tmx_config_table[i], tmx_config_table[i].dflt, cfg);
    }
}

size_t tmx_config_num_vars(void)
{
    return TMX_CONFIG_NUM_FIELDS;
}

const char *tmx_config_var_name(size_t index)
{
    return (index < TMX_CONFIG_NUM_FIELDS) ? tmx_config_table[index].name : NULL;
}

const char *tmx_config_var_default(size_t index)
{
    return (index < TMX_CONFIG_NUM_FIELDS) ? tmx_config_table[index].dflt : NULL;
}

static int tmx_config_is_known(const char *name, size_t len)
{
    int known = 0;

    for (size_t i = 0; i < TMX_CONFIG_NUM_FIELDS && !known; i++) {
        known = strlen(tmx_config_table[i].name) == len &&
                strncmp(tmx_config_table[i].name, name, len) == 0;
    }
    for (size_t i = 0; tmx_config_ignored[i] != NULL && !known; i++) {
        known = strlen(tmx_config_ignored[i]) == len &&
                strncmp(tmx_config_ignored[i], name, len) == 0;
    }
    return known;
}

size_t tmx_config_find_unknown(char *buf, size_t len)
{
    const size_t plen  = strlen(TMX_CONFIG_PREFIX);
    size_t       count = 0;
    size_t       pos   = 0;

    if (buf != NULL && len > 0) {
        buf[0] = '\0';
    }
    for (char **env = environ; env != NULL && *env != NULL; env++) {
        const char *var = *env;
        const char *eq  = strchr(var, '=');
        size_t      nlen;

        if (eq == NULL || strncmp(var, TMX_CONFIG_PREFIX, plen) != 0) {
            continue;
        }
        nlen = (size_t)(eq - var) - plen;
        if (tmx_config_is_known(var + plen, nlen)) {
            continue;
        }
        count++;
        if (buf != NULL && pos < len) {
            int n = snprintf(buf + pos, len - pos, "%s%.*s", (count > 1) ? " " : "",
                             (int)(nlen + plen), var);
            pos += (n > 0) ? (size_t)n : 0;
        }
    }
    return count;
}

/* The typo warning is printed once per process even if the configuration is loaded again. */
static void tmx_config_warn_unknown(void)
{
    static pthread_mutex_t lock   = PTHREAD_MUTEX_INITIALIZER;
    static int             warned = 0;
    char                   names[512];

    pthread_mutex_lock(&lock);
    if (!warned && tmx_config_find_unknown(names, sizeof(names)) > 0) {
        warned = 1;
        fprintf(stderr, "[tmx %d config warn] unknown variables in the environment (ignored): "
                        "%s\n", (int)getpid(), names);
    }
    pthread_mutex_unlock(&lock);
}

/* CPUs of this process's affinity mask, 0 if unknown. */
static int tmx_config_cpus(void)
{
    cpu_set_t set;

    return sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set) : 0;
}

int tmx_config_oversubscribed(const tmx_config_t *cfg, int *cpus_p)
{
    int cpus = tmx_config_cpus();

    if (cpus_p != NULL) {
        *cpus_p = cpus;
    }
    return cfg->local_size > 0 && cpus > 0 && cfg->local_size > cpus;
}

/*
 * TMX_LOCAL_SIZE of a program another launcher started: the processes of the job on this
 * node as Open MPI (OMPI_COMM_WORLD_LOCAL_SIZE) or MPICH's hydra (MPI_LOCALNRANKS) tell
 * them, taken only when the process may run on every online CPU. A launcher that bound it
 * to fewer did so because ranks do not share CPUs (Open MPI binds only when not
 * oversubscribed), and the node-wide count would then call it oversubscribed wrongly.
 * -1 when unknown.
 */
static int tmx_config_launcher_local_size(void)
{
    static const char *const vars[] = {"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS"};
    long online = sysconf(_SC_NPROCESSORS_ONLN);

    if (online <= 0 || tmx_config_cpus() < online) {
        return -1;
    }
    for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
        const char *v = getenv(vars[i]);
        char       *end;
        long        n;

        if (v == NULL || *v == '\0') {
            continue;
        }
        errno = 0;
        n     = strtol(v, &end, 10);
        if (errno == 0 && *end == '\0' && n > 0 && n <= INT_MAX) {
            return (int)n;
        }
    }
    return -1;
}

/*
 * An oversubscribed process (an all-to-all of many ranks on few cores) gets smaller soft-device
 * rings where their variables are unset: the inbox and the fast rings 128 KiB instead of 256
 * (a record, at most a quarter of a ring, still carries TMX_EAGER_MAX's 16 KiB and a 16 KiB
 * read response), and the first fast ring as large as the others instead of 2 MiB (what it is
 * large for, a 4-8 KiB ping-pong whose sender never waits for the other core's cache, needs a
 * core for each side). An inbox that every peer without a ring writes laps in a long job: at
 * 64 ranks it was 256 KiB of every rank's shared memory (tmx_config(7), Soft device).
 */
#define TMX_CONFIG_OVERSUB_RING (128 * 1024)
static void tmx_config_oversub_sizes(tmx_config_t *cfg)
{
    if (!tmx_config_oversubscribed(cfg, NULL)) {
        return;
    }
    if (getenv(TMX_CONFIG_PREFIX "SOFT_RING_SIZE") == NULL) {
        cfg->soft_ring_size = TMX_CONFIG_OVERSUB_RING;
    }
    if (getenv(TMX_CONFIG_PREFIX "SOFT_INBOX_SIZE") == NULL) {
        cfg->soft_inbox_size = TMX_CONFIG_OVERSUB_RING;
    }
    if (getenv(TMX_CONFIG_PREFIX "SOFT_RING0_SIZE") == NULL) {
        cfg->soft_ring0_size = cfg->soft_ring_size;
    }
}

tmx_status_t tmx_config_load(tmx_config_t *cfg)
{
    tmx_config_t tmp;
    char         name[64];
    tmx_status_t status = TMX_ERR_INVALID_PARAM;

    if (cfg == NULL) {
        goto out;
    }
    tmx_config_set_defaults(&tmp);
    for (size_t i = 0; i < TMX_CONFIG_NUM_FIELDS; i++) {
        const char *value;

        snprintf(name, sizeof(name), "%s%s", TMX_CONFIG_PREFIX, tmx_config_table[i].name);
        value = getenv(name);
        if (value != NULL && tmx_config_set(&tmp, tmx_config_table[i].name, value) != TMX_OK) {
            goto out;
        }
    }
    tmx_config_warn_unknown();
    if (getenv(TMX_CONFIG_PREFIX "LOCAL_SIZE") == NULL) {
        tmp.local_size = tmx_config_launcher_local_size();
    }
    tmx_config_oversub_sizes(&tmp);
    *cfg   = tmp;
    status = TMX_OK;
out:
    return status;
}

static pthread_once_t tmx_config_once = PTHREAD_ONCE_INIT;
static tmx_config_t   tmx_config_global;
static tmx_status_t   tmx_config_global_status = TMX_ERR_INTERNAL;

static void tmx_config_load_global(void)
{
    tmx_config_global_status = tmx_config_load(&tmx_config_global);
}

const tmx_config_t *tmx_config_get(void)
{
    pthread_once(&tmx_config_once, tmx_config_load_global);
    return (tmx_config_global_status == TMX_OK) ? &tmx_config_global : NULL;
}

/* Formats a member in the syntax the parser accepts, so printed lines can be pasted back. */
static void tmx_config_format(const tmx_config_field_t *f, const tmx_config_t *cfg, char *buf,
                              size_t len)
{
    const void *src = (const char *)cfg + f->offset;
    size_t      sz;

    switch (f->type) {
    case TMX_CONFIG_INT:
        snprintf(buf, len, "%d", *(const int *)src);
        break;
    case TMX_CONFIG_UINT:
        snprintf(buf, len, "%u", *(const unsigned *)src);
        break;
    case TMX_CONFIG_SIZE:
        sz = *(const size_t *)src;
        if (sz != 0 && sz % (1u << 30) == 0) {
            snprintf(buf, len, "%zug", sz >> 30);
        } else if (sz != 0 && sz % (1u << 20) == 0) {
            snprintf(buf, len, "%zum", sz >> 20);
        } else if (sz != 0 && sz % (1u << 10) == 0) {
            snprintf(buf, len, "%zuk", sz >> 10);
        } else {
            snprintf(buf, len, "%zu", sz);
        }
        break;
    case TMX_CONFIG_DOUBLE:
        snprintf(buf, len, "%g", *(const double *)src);
        break;
    case TMX_CONFIG_BOOL:
        snprintf(buf, len, "%s", *(const int *)src ? "yes" : "no");
        break;
    case TMX_CONFIG_STRING:
        snprintf(buf, len, "%.*s", (int)f->size, (const char *)src);
        break;
    case TMX_CONFIG_ENUM:
        snprintf(buf, len, "<%d>", *(const int *)src);
        for (const tmx_config_enum_t *w = f->words; w->word != NULL; w++) {
            if (w->value == *(const int *)src) {
                snprintf(buf, len, "%s", w->word);
                break;
            }
        }
        break;
    }
}

void tmx_config_print_table(FILE *stream, const tmx_config_t *cfg, unsigned flags)
{
    tmx_config_t defaults;
    char         value[512];
    char         syntax[256];

    if (stream == NULL) {
        goto out;
    }
    if (cfg == NULL) {
        /* Still worth printing: the user needs the table to fix the value that failed. */
        fprintf(stream, "# the environment holds an invalid TMX_* value; showing defaults\n");
        tmx_config_set_defaults(&defaults);
        cfg = &defaults;
    }
    for (size_t i = 0; i < TMX_CONFIG_NUM_FIELDS; i++) {
        const tmx_config_field_t *f = &tmx_config_table[i];

        tmx_config_format(f, cfg, value, sizeof(value));
        if (flags & TMX_CONFIG_PRINT_DOC) {
            tmx_config_syntax(f, syntax, sizeof(syntax));
            fprintf(stream, "#\n# %s\n#\n# syntax:  %s\n# default: %s\n#\n", f->doc, syntax,
                    (f->dflt[0] != '\0') ? f->dflt : "(empty)");
        }
        fprintf(stream, "%s%s=%s\n", TMX_CONFIG_PREFIX, f->name, value);
        if ((flags & TMX_CONFIG_PRINT_DOC) && i + 1 < TMX_CONFIG_NUM_FIELDS) {
            fprintf(stream, "\n");
        }
    }
out:
    return;
}
