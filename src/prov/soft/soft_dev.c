/*
 * Soft device, shared-memory fabric: the segment, device addresses, peers' segments and the
 * cross-memory-attach trial, protection domains, memory registration, completion queues,
 * shared receive queues, address handles, and the ops table.
 */
#define _GNU_SOURCE
#define TMX_LOG_SUBSYS "soft"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <linux/membarrier.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "prov/soft/soft.h"
#include "topo/topo.h"
#include "util/log.h"
#include "util/proc.h"
#include "util/time.h"

/* The device address blob: everything a peer needs to find our segment and to tell whether
 * it can reach us at all (same boot of the same host, same user). */
typedef struct tmx_soft_dev_addr {
    uint32_t magic;
    uint16_t version;
    uint16_t len;
    uint32_t uid;
    int32_t  pid;
    uint64_t boot_hash;
    uint64_t nonce;      /* the segment's probe word */
    uint64_t start_time; /* the owner's, see tmx_soft_rseg_same_process */
    int32_t  fd;         /* the memfd in the owner, -1 for a named segment */
    uint32_t pad;
    char     name[TMX_SOFT_NAME_MAX]; /* the named segment's, "" for a memfd */
} tmx_soft_dev_addr_t;

#define TMX_SOFT_ALIGN(_x) (((_x) + 4095) & ~(size_t)4095)

static _Atomic unsigned tmx_soft_seg_counter;
static _Atomic int      tmx_soft_cma_logged;
static _Atomic int      tmx_soft_pidfd_logged;
static _Atomic int      tmx_soft_memfd_works = -1; /* the trial's answer, once per process */
static _Atomic int      tmx_soft_wake_logged;
static _Atomic int      tmx_soft_membarrier_reg = -1; /* this process registered: 1, not: 0 */

static int tmx_soft_membarrier_register(void);

static void tmx_soft_populate(const uint8_t *p, size_t len);
static int tmx_soft_ring0_early(const tmx_config_t *cfg);

/* Gone, or a zombie that nobody reaped yet: kill(pid, 0) still succeeds on a zombie. */
int tmx_soft_pid_dead(pid_t pid)
{
    char        buf[256];
    const char *p;

    if (pid <= 0 || (kill(pid, 0) == -1 && errno == ESRCH)) {
        return 1;
    }
    p = tmx_proc_stat_field(tmx_proc_stat(pid, buf, sizeof(buf)), 3);
    return p != NULL && (p[0] == 'Z' || p[0] == 'X');
}

/* The start time of a process (field 22 of /proc/<pid>/stat, clock ticks after boot): with
 * the pid, it names one process for the life of the system. 0 when unknown. */
static uint64_t tmx_soft_start_time(pid_t pid)
{
    char        buf[1024];
    const char *p = tmx_proc_stat_field(tmx_proc_stat(pid, buf, sizeof(buf)), 22);

    return p != NULL ? strtoull(p, NULL, 10) : 0;
}

/*
 * A pidfd of a peer's process: unlike its pid, it can never name another process, so a long
 * job whose pids wrap around does not take a new process for a dead peer. TMX_OK with
 * *fd_p = -1 where the kernel has no pidfd_open (before Linux 5.3, or a seccomp filter that
 * refuses it): liveness then falls back to the pid.
 */
static tmx_status_t tmx_soft_pidfd_open(pid_t pid, int *fd_p)
{
    int err = ENOSYS;

    *fd_p = -1;
#ifdef SYS_pidfd_open
    *fd_p = (int)syscall(SYS_pidfd_open, pid, 0);
    if (*fd_p >= 0) {
        return TMX_OK;
    }
    err = errno;
#endif
    switch (err) {
    case ENOSYS:
    case EPERM: /* pidfd_open checks no permission: only a seccomp filter says EPERM */
        if (atomic_exchange(&tmx_soft_pidfd_logged, 1) == 0) {
            tmx_info("pidfd_open is not available (%s): peers' liveness is checked by pid, "
                     "which a reused pid can fool", strerror(err));
        }
        return TMX_OK;
    case ESRCH:
    case ENOENT: /* a process on its way out (seen for one exiting as we asked) */
    case EINVAL: /* no such process, or the pid names a thread now */
        tmx_debug("peer process %d is gone", (int)pid);
        return TMX_ERR_UNREACHABLE;
    default:
        tmx_error("pidfd_open of peer process %d failed: %s", (int)pid, strerror(err));
        return TMX_ERR_NO_RESOURCE;
    }
}

/* Whether the process that owns a peer's segment is gone: its pidfd polls readable once it
 * exited (a zombie included). */
int tmx_soft_rseg_dead(tmx_soft_rseg_t *r)
{
    struct pollfd p = {.fd = r->pidfd, .events = POLLIN};

    if (!r->dead) {
        r->dead = r->pidfd >= 0 ? poll(&p, 1, 0) > 0 : tmx_soft_pid_dead(r->pid);
    }
    return r->dead;
}

/* Whether the process a lock word names (tmx_soft_dev_t.lock_id: pid in the low half, the low
 * 32 bits of its start time in the high half) is gone. Such a producer is no peer of ours,
 * with no pidfd: a reused pid is told by its start time. */
int tmx_soft_lock_holder_dead(uint64_t lock_id)
{
    pid_t    pid   = (pid_t)(uint32_t)lock_id;
    uint32_t start = (uint32_t)(lock_id >> 32);
    uint64_t now;

    if (tmx_soft_pid_dead(pid)) {
        return 1;
    }
    now = start != 0 ? tmx_soft_start_time(pid) : 0;
    return now != 0 && (uint32_t)now != start;
}

static uint64_t tmx_soft_boot_hash(void)
{
    char     buf[64] = {0};
    uint64_t h       = 0xcbf29ce484222325ULL; /* FNV-1a */
    int      fd      = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
    ssize_t  n       = -1;

    if (fd >= 0) {
        n = read(fd, buf, sizeof(buf) - 1);
        close(fd);
    }
    if (n <= 0) {
        /* No boot id: fall back to the host name, still different between hosts. */
        gethostname(buf, sizeof(buf) - 1);
    }
    for (size_t i = 0; buf[i] != '\0' && buf[i] != '\n'; i++) {
        h = (h ^ (uint8_t)buf[i]) * 0x100000001b3ULL;
    }
    return h;
}

/* Unlinks the named segments of this uid whose owner is gone (a process killed while its
 * segment was named in /dev/shm could not): names of exactly our form, tmx-<uid>-<pid>-<n>,
 * and no other file. */
static void tmx_soft_sweep(void)
{
    char           prefix[32];
    DIR           *d = opendir("/dev/shm");
    struct dirent *e;

    if (d == NULL) {
        return;
    }
    snprintf(prefix, sizeof(prefix), "tmx-%u-", (unsigned)getuid());
    while ((e = readdir(d)) != NULL) {
        char  path[300];
        char *end;
        long  pid;

        if (strncmp(e->d_name, prefix, strlen(prefix)) != 0) {
            continue;
        }
        pid = strtol(e->d_name + strlen(prefix), &end, 10);
        if (end == e->d_name + strlen(prefix) || *end != '-' || pid <= 0 || end[1] == '\0' ||
            strspn(end + 1, "0123456789") != strlen(end + 1)) {
            continue;
        }
        if (tmx_soft_pid_dead((pid_t)pid)) {
            snprintf(path, sizeof(path), "/%s", e->d_name);
            if (shm_unlink(path) == 0) {
                tmx_debug("removed stale segment %s of dead process %ld", path, pid);
            }
        }
    }
    closedir(d);
}

static size_t tmx_soft_pow2(size_t v, size_t min)
{
    size_t p = min;
    while (p < v) {
        p <<= 1;
    }
    return p;
}

/*
 * Whether another process of ours can open the memfd fd through /proc/<pid>/fd/<fd>: a real
 * trial, by a child that tries. Opening it needs only PTRACE_MODE_READ on us (the kernel's
 * proc_fd_access_allowed), which Yama's ptrace_scope does not restrict (it restricts
 * attaching only: CMA may fail where this works); it fails when /proc is missing, when we
 * are not dumpable (a set-user-id program, prctl) or by an LSM policy. vfork: the child
 * copies nothing and runs only open and _exit, with every signal blocked so that no handler
 * of ours runs on the memory it shares; it writes its answer in that memory (with fork, as
 * under some sanitizers, the exit status says it).
 */
static int tmx_soft_memfd_trial(int fd, int *err_p)
{
    char          path[64];
    sigset_t      all, old;
    volatile int  ok = 0, err = 0;
    int           st = 0;
    pid_t         pid;

    snprintf(path, sizeof(path), "/proc/%d/fd/%d", (int)getpid(), fd);
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pid = vfork();
    if (pid == 0) {
        int f = open(path, O_RDWR | O_CLOEXEC);

        ok  = f >= 0;
        err = f >= 0 ? 0 : errno;
        _exit(f >= 0 ? 0 : 1);
    }
    if (pid > 0) {
        /* reaped before the signals are back: a SIGCHLD handler of the program's will not
         * take the child from us */
        if (waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0) {
            ok = 1;
        }
    } else {
        err = errno;
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    *err_p = err;
    return ok;
}

/* A memfd of size bytes, private to us and sealed at that size (a peer cannot make it
 * shorter under the others' mappings), that the trial says peers can open; -1 if not. */
static int tmx_soft_memfd_create(size_t size, int *err_p)
{
    int fd = memfd_create("tmx-soft", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    int works;

    if (fd < 0) {
        *err_p = errno;
        return -1;
    }
    /* a memfd starts 0777; /proc/<pid>/fd opens check the mode like any open */
    if (fchmod(fd, 0600) != 0 || ftruncate(fd, (off_t)size) != 0 ||
        fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
        *err_p = errno;
        goto err_close;
    }
    works = atomic_load(&tmx_soft_memfd_works);
    if (works < 0) {
        int err = 0;

        works = tmx_soft_memfd_trial(fd, &err);
        if (atomic_exchange(&tmx_soft_memfd_works, works) < 0) {
            if (works) {
                tmx_info("segments are memfds that peers open through /proc/<pid>/fd");
            } else {
                tmx_warn("a process of ours cannot open /proc/%d/fd/%d (%s): segments are "
                         "named in /dev/shm, where a killed process leaves its own until the "
                         "next tmx run removes it", (int)getpid(), fd,
                         err != 0 ? strerror(err) : "trial failed");
            }
        }
        *err_p = err;
    }
    if (!works) {
        goto err_close;
    }
    return fd;

err_close:
    close(fd);
    return -1;
}

/* The segment's file, size bytes, mapped at dev->base: a memfd where peers can open it
 * (TMX_SOFT_MEMFD), else a POSIX shm segment by name. */
static tmx_status_t tmx_soft_seg_open(tmx_soft_dev_t *dev, const tmx_config_t *cfg,
                                      size_t size)
{
    int          err = 0, fd = -1;
    tmx_status_t status;

    dev->fd = -1;
    if (cfg->soft_memfd != 0) {
        fd = tmx_soft_memfd_create(size, &err);
        if (fd < 0 && cfg->soft_memfd == 1) {
            tmx_error("memfd segment required (TMX_SOFT_MEMFD=yes) but it does not work: %s",
                      err != 0 ? strerror(err) : "peers cannot open it");
            status = TMX_ERR_UNSUPPORTED;
            goto err;
        }
    }
    if (fd >= 0) {
        dev->fd      = fd;
        dev->name[0] = '\0';
    } else {
        snprintf(dev->name, sizeof(dev->name), "/tmx-%u-%d-%u", (unsigned)getuid(),
                 (int)getpid(), atomic_fetch_add(&tmx_soft_seg_counter, 1));
        fd = shm_open(dev->name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (fd < 0) {
            tmx_error("shm_open(%s) failed: %s", dev->name, strerror(errno));
            status = TMX_ERR_IO;
            goto err;
        }
        /* tmpfs is sparse: the full size costs only the pages that get touched. */
        if (ftruncate(fd, (off_t)size) != 0) {
            tmx_error("ftruncate(%s, %zu) failed: %s", dev->name, size, strerror(errno));
            status = TMX_ERR_NO_MEMORY;
            goto err_close;
        }
    }
    dev->base = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (dev->base == MAP_FAILED) {
        tmx_error("mmap of the segment (%zu bytes) failed: %s", size, strerror(errno));
        dev->base = NULL;
        status    = TMX_ERR_NO_MEMORY;
        goto err_close;
    }
    /* Everything in the segment is read by us and written by peers (rings, control lines):
     * its pages go on our NUMA node even though a peer's write usually touches them first.
     * On shared memory the policy belongs to the file, so it holds for the peers' faults. */
    if (dev->super.attr.numa_node >= 0 &&
        tmx_topo_mem_prefer(dev->base, size, dev->super.attr.numa_node) != 0) {
        tmx_debug("segment memory on numa node %d: mbind failed: %s", dev->super.attr.numa_node,
                  strerror(errno));
    }
    if (dev->fd < 0) {
        close(fd);
    }
    return TMX_OK;

err_close:
    close(fd);
    if (dev->fd < 0) {
        shm_unlink(dev->name);
    }
    dev->fd = -1;
err:
    return status;
}

static tmx_status_t tmx_soft_seg_create(tmx_soft_dev_t *dev, const tmx_config_t *cfg)
{
    size_t   ring_size = tmx_soft_pow2(cfg->soft_ring_size ? cfg->soft_ring_size : 256 * 1024,
                                       4096);
    size_t   ring0_size = tmx_soft_pow2(cfg->soft_ring0_size, 4096);
    size_t   inbox_size = tmx_soft_pow2(cfg->soft_inbox_size ? cfg->soft_inbox_size : 256 * 1024,
                                        4096);
    unsigned max_qps   = cfg->soft_max_qps ? cfg->soft_max_qps : 64;
    unsigned max_mrs   = cfg->soft_max_mrs ? cfg->soft_max_mrs : 1024;
    unsigned max_fast  = cfg->soft_fast_rings > 1024 ? 1024 : cfg->soft_fast_rings;
    size_t   dm_size   = cfg->soft_dm_size > TMX_SOFT_DM_MAX ? TMX_SOFT_DM_MAX
                                                                : cfg->soft_dm_size;
    unsigned max_xs    = tmx_soft_xrc_offered(cfg) ? cfg->soft_xrc_streams : 0;
    size_t   off, mr_off, inbox_off, ctrl_off, fctrl_off, xs_off, rings_off, dm_off;
    uint64_t probe = 0;
    tmx_status_t status;

    if (max_mrs > (1u << 24)) {
        max_mrs = 1u << 24; /* the index must fit in 24 bits of a key */
    }
    mr_off    = TMX_SOFT_ALIGN(sizeof(tmx_soft_seg_hdr_t));
    /* A record may take a quarter of a fast ring: the inbox must carry it too. */
    if (inbox_size < ring_size) {
        inbox_size = ring_size;
    }
    if (ring0_size < ring_size) {
        ring0_size = ring_size;
    }
    inbox_off = TMX_SOFT_ALIGN(mr_off + (size_t)max_mrs * sizeof(tmx_soft_mr_ent_t));
    ctrl_off  = TMX_SOFT_ALIGN(inbox_off + sizeof(tmx_soft_ring_ctrl_t) + inbox_size);
    fctrl_off = TMX_SOFT_ALIGN(ctrl_off + (size_t)max_qps * sizeof(tmx_soft_ring_ctrl_t));
    xs_off    = TMX_SOFT_ALIGN(fctrl_off + (size_t)max_fast * sizeof(tmx_soft_ring_ctrl_t));
    rings_off = TMX_SOFT_ALIGN(xs_off + (size_t)max_xs * sizeof(tmx_soft_ring_ctrl_t));
    dm_off    = TMX_SOFT_ALIGN(rings_off + tmx_soft_rings_span(max_fast, ring0_size, ring_size));
    dm_size   = dm_size & ~(size_t)(TMX_SOFT_LINE - 1);
    off       = TMX_SOFT_ALIGN(dm_off + dm_size);

    status = tmx_soft_seg_open(dev, cfg, off);
    if (status != TMX_OK) {
        goto err;
    }
    if (getrandom(&probe, sizeof(probe), GRND_NONBLOCK) != sizeof(probe)) {
        probe = (uint64_t)time(NULL) * 0x9e3779b97f4a7c15ULL ^ (uint64_t)getpid();
    }
    dev->size          = off;
    dev->hdr           = dev->base;
    dev->hdr->version  = TMX_SOFT_VERSION;
    dev->hdr->uid      = (uint32_t)getuid();
    dev->hdr->pid      = (int32_t)getpid();
    dev->hdr->max_mrs  = max_mrs;
    dev->hdr->max_qps  = max_qps;
    dev->hdr->max_fast = max_fast;
    dev->hdr->ring_size = ring_size;
    dev->hdr->ring0_size = ring0_size;
    dev->hdr->inbox_size = inbox_size;
    dev->hdr->map_addr = (uint64_t)(uintptr_t)dev->base;
    dev->hdr->probe    = probe | 1;
    dev->hdr->mr_off   = mr_off;
    dev->hdr->inbox_off = inbox_off;
    dev->hdr->ctrl_off = ctrl_off;
    dev->hdr->fctrl_off = fctrl_off;
    dev->hdr->rings_off = rings_off;
    dev->hdr->xs_off   = xs_off;
    dev->hdr->max_xs   = max_xs;
    dev->hdr->total    = off;
    dev->hdr->start_time = tmx_soft_start_time(getpid());
    dev->hdr->data_order = (uint32_t)cfg->soft_data_in_order;
    dev->hdr->dm_off   = dm_off;
    dev->hdr->dm_size  = dm_size;
    dev->mrs           = (tmx_soft_mr_ent_t *)((uint8_t *)dev->base + mr_off);
    /* Magic last, by a release store: a peer that maps a half-built segment rejects it. (A
     * release store rather than a fence and a plain store: ThreadSanitizer cannot see fences,
     * and gcc refuses them under -fsanitize=thread with -Werror.) */
    __atomic_store_n(&dev->hdr->magic, TMX_SOFT_MAGIC, __ATOMIC_RELEASE);
    return TMX_OK;

err:
    return status;
}

static void tmx_soft_seg_destroy(tmx_soft_dev_t *dev)
{
    munmap(dev->base, dev->size);
    if (dev->fd >= 0) {
        close(dev->fd); /* the last mapping gone, the memory goes with it */
    } else {
        shm_unlink(dev->name);
    }
}

static tmx_status_t tmx_soft_dev_open(const tmx_prov_t *prov, const tmx_config_t *cfg,
                                      tmx_dev_t **devs, int max, int *num_p)
{
    tmx_soft_dev_t *dev;
    tmx_status_t    status;

    if (max < 1) {
        *num_p = 0;
        return TMX_OK;
    }
    tmx_soft_sweep();
    tmx_soft_xrc_sweep();
    dev = calloc(1, sizeof(*dev));
    if (dev == NULL) {
        status = TMX_ERR_NO_MEMORY;
        goto err;
    }
    dev->cfg     = cfg;
    dev->wake_fd = -1;
    status = tmx_soft_tm_parse_inject(dev, cfg->soft_tm_inject);
    if (status != TMX_OK) {
        free(dev);
        goto err;
    }
    dev->asym    = tmx_soft_membarrier_register();
    tmx_list_init(&dev->rsegs);
    /* the device is where our CPUs are: its memory is placed there (tmx_soft_seg_open) */
    dev->super.attr.numa_node = tmx_topo_self_numa(cfg);
    status = tmx_soft_seg_create(dev, cfg);
    if (status != TMX_OK) {
        goto err_free;
    }
    /* the sets hold QPs, and XRC routes (up to max_xs) and streams (max_xs) */
    dev->set_cap = dev->hdr->max_qps + 2 * dev->hdr->max_xs;
    dev->qps     = calloc(dev->hdr->max_qps, sizeof(*dev->qps));
    dev->active  = calloc(dev->set_cap, sizeof(*dev->active));
    dev->pend    = calloc(dev->set_cap, sizeof(*dev->pend));
    dev->mr_objs = calloc(dev->hdr->max_mrs, sizeof(*dev->mr_objs));
    dev->fast_owner = calloc(dev->hdr->max_fast + 1, sizeof(*dev->fast_owner));
    dev->fast_on    = calloc(dev->hdr->max_fast + 1, sizeof(*dev->fast_on));
    dev->fast_pos   = calloc(dev->hdr->max_fast + 1, sizeof(*dev->fast_pos));
    dev->fast_rest  = calloc(dev->hdr->max_fast + 1, sizeof(*dev->fast_rest));
    dev->dm_lines   = dev->hdr->dm_size / TMX_SOFT_LINE;
    dev->dm_map     = calloc(dev->dm_lines / 64 + 1, sizeof(*dev->dm_map));
    dev->dm         = dev->dm_lines > 0 ? (uint8_t *)dev->base + dev->hdr->dm_off : NULL;
    if (dev->qps == NULL || dev->active == NULL || dev->pend == NULL || dev->mr_objs == NULL ||
        dev->fast_owner == NULL || dev->fast_on == NULL || dev->fast_pos == NULL ||
        dev->fast_rest == NULL || dev->dm_map == NULL) {
        status = TMX_ERR_NO_MEMORY;
        goto err_seg;
    }
    dev->boot_hash   = tmx_soft_boot_hash();
    dev->lock_id     = (uint32_t)getpid() | (uint64_t)(uint32_t)dev->hdr->start_time << 32;
    dev->inbox_ctrl  = tmx_soft_inbox_ctrl(dev->base, dev->hdr);
    dev->inbox       = (uint8_t *)(dev->inbox_ctrl + 1);
    dev->inbox_size  = dev->hdr->inbox_size;
    /* its first pages now: every sender's first load from one maps 16 (tmx_soft_rseg_touch) */
    tmx_soft_populate((uint8_t *)dev->inbox_ctrl, sizeof(*dev->inbox_ctrl));
    dev->inbox_made = 0;
    tmx_soft_inbox_make(dev);
    if (dev->hdr->max_fast > 0 && tmx_soft_ring0_early(cfg)) {
        tmx_soft_populate(tmx_soft_ring(dev->base, dev->hdr, 0), dev->hdr->ring0_size);
    }
    /* A record is at most a quarter ring: with the consumer publishing its position every
     * quarter ring, a record and its wrap padding always fit once the ring has drained. */
    dev->max_payload = dev->hdr->ring_size / 4 - sizeof(tmx_soft_rec_t) -
                       sizeof(tmx_soft_rec_ext_t);

    dev->super.prov = prov;
    snprintf(dev->super.name, sizeof(dev->super.name), "soft:shm");
    dev->super.attr.caps = TMX_DEV_CAP_RC | TMX_DEV_CAP_UD | TMX_DEV_CAP_SRQ | TMX_DEV_CAP_RMA |
                           TMX_DEV_CAP_LOCAL_ONLY | TMX_DEV_CAP_MANUAL_PROGRESS;
    if (cfg->soft_inplace) {
        dev->super.attr.caps |= TMX_DEV_CAP_RECV_INPLACE;
    }
    if (cfg->soft_reg_slow) { /* for tests of the staging buffers (mem.c) */
        dev->super.attr.caps |= TMX_DEV_CAP_REG_SLOW;
    }
    dev->super.attr.max_msg_sz = TMX_SOFT_MAX_MSG;
    dev->super.attr.max_inline = dev->max_payload;
    dev->super.attr.max_qp     = dev->hdr->max_qps;
    dev->super.attr.max_qp_wr  = 4096;
    dev->super.attr.max_srq_wr = 16384;
    dev->super.attr.max_sge    = TMX_SOFT_MAX_SGE;
    dev->super.attr.max_mr     = dev->hdr->max_mrs;
    dev->super.attr.max_ud_msg = TMX_SOFT_MAX_UD_MSG;
    dev->super.attr.addr_len   = sizeof(tmx_soft_dev_addr_t);
    if (cfg->soft_tm) {
        /* a TM SRQ with the shape of mlx5's (TMX_SOFT_TM_*) */
        dev->super.attr.caps |= TMX_DEV_CAP_TM | (cfg->soft_tm_rndv ? TMX_DEV_CAP_TM_RNDV : 0);
        dev->super.attr.tm.max_num_tags      = cfg->soft_tm_tags;
        dev->super.attr.tm.max_ops           = cfg->soft_tm_ops;
        dev->super.attr.tm.max_sge           = 1;
        dev->super.attr.tm.max_rndv_hdr_size = 64;
    }
    if (cfg->soft_ooo) {
        dev->super.attr.caps |= TMX_DEV_CAP_OOO;
    }
    if (dev->dm != NULL) {
        dev->super.attr.caps |= TMX_DEV_CAP_MEM_DIRECT | (dev->asym ? TMX_DEV_CAP_MEM_ASYM : 0);
    }
    if (tmx_soft_xrc_offered(cfg)) {
        dev->super.attr.caps |= TMX_DEV_CAP_XRC;
    }
    dev->data_order = (unsigned)cfg->soft_data_in_order;
    dev->rng        = cfg->soft_scramble_seed != 0
                          ? cfg->soft_scramble_seed
                          : (uint64_t)getpid() << 32 ^ tmx_time_ns();
    if (dev->rng == 0) {
        dev->rng = 1;
    }
    devs[0] = &dev->super;
    *num_p  = 1;
    return TMX_OK;

err_seg:
    tmx_soft_seg_destroy(dev);
err_free:
    free(dev->qps);
    free(dev->active);
    free(dev->pend);
    free(dev->mr_objs);
    free(dev->fast_owner);
    free(dev->fast_on);
    free(dev->fast_pos);
    free(dev->fast_rest);
    free(dev->dm_map);
    free(dev);
err:
    return status;
}

static void tmx_soft_dev_close(tmx_dev_t *d)
{
    tmx_soft_dev_t  *dev = (tmx_soft_dev_t *)d;
    tmx_list_t      *pos, *tmp;

    tmx_soft_xrc_dev_close(dev);
    tmx_list_for_each_safe(pos, tmp, &dev->rsegs) {
        tmx_soft_rseg_t *r = tmx_container_of(pos, tmx_soft_rseg_t, list);
        tmx_list_del(&r->list);
        munmap(r->base, r->size);
        if (r->pidfd >= 0) {
            close(r->pidfd);
        }
        free(r->touched);
        free(r);
    }
    if (dev->channel_open) {
        close(dev->channel.fd);
        close(dev->wake_sock);
    }
    if (dev->wake_fd >= 0) {
        close(dev->wake_fd);
    }
    tmx_soft_seg_destroy(dev);
    while (dev->mr_free != NULL) {
        tmx_soft_mr_t *mr = dev->mr_free;
        dev->mr_free      = mr->next_free;
        free(mr);
    }
    free(dev->qps);
    free(dev->active);
    free(dev->pend);
    free(dev->mr_objs);
    free(dev->fast_owner);
    free(dev->fast_on);
    free(dev->fast_pos);
    free(dev->fast_rest);
    free(dev->dm_map);
    free(dev);
}

tmx_status_t tmx_soft_dev_addr_pack(tmx_soft_dev_t *dev, void *buf, size_t *len_p)
{
    tmx_soft_dev_addr_t a;

    if (buf == NULL || len_p == NULL || *len_p < sizeof(a)) {
        return TMX_ERR_INVALID_PARAM;
    }
    memset(&a, 0, sizeof(a));
    a.magic     = TMX_SOFT_ADDR_MAGIC;
    a.version   = TMX_SOFT_VERSION;
    a.len       = sizeof(a);
    a.uid       = (uint32_t)getuid();
    a.pid       = (int32_t)getpid();
    a.boot_hash = dev->boot_hash;
    a.nonce      = dev->hdr->probe;
    a.start_time = dev->hdr->start_time;
    a.fd         = dev->fd;
    memcpy(a.name, dev->name, sizeof(a.name));
    memcpy(buf, &a, sizeof(a));
    *len_p = sizeof(a);
    return TMX_OK;
}

static tmx_status_t tmx_soft_dev_get_addr(tmx_dev_t *d, void *buf, size_t *len_p)
{
    return tmx_soft_dev_addr_pack((tmx_soft_dev_t *)d, buf, len_p);
}

/* TMX_OK when the blob is well formed; *a gets a NUL-terminated copy. */
static tmx_status_t tmx_soft_addr_parse(const void *addr, size_t len, tmx_soft_dev_addr_t *a)
{
    if (addr == NULL || len != sizeof(*a)) {
        return TMX_ERR_INVALID_ADDR;
    }
    memcpy(a, addr, sizeof(*a));
    if (a->magic != TMX_SOFT_ADDR_MAGIC || a->version != TMX_SOFT_VERSION ||
        a->len != sizeof(*a) || a->pid <= 0 || a->fd < -1 ||
        memchr(a->name, '\0', sizeof(a->name)) == NULL) {
        return TMX_ERR_INVALID_ADDR;
    }
    /* a memfd, or a name of ours in /dev/shm: one or the other */
    if (a->fd >= 0 ? a->name[0] != '\0'
                   : strncmp(a->name, "/tmx-", 5) != 0 || strchr(a->name + 1, '/') != NULL) {
        return TMX_ERR_INVALID_ADDR;
    }
    return TMX_OK;
}

tmx_status_t tmx_soft_addr_owner(const void *addr, size_t len, pid_t *pid_p,
                                 uint64_t *start_p, uint64_t *boot_hash_p)
{
    tmx_soft_dev_addr_t a;
    tmx_status_t        status = tmx_soft_addr_parse(addr, len, &a);

    if (status == TMX_OK) {
        *pid_p       = a.pid;
        *start_p     = a.start_time;
        *boot_hash_p = a.boot_hash;
    }
    return status;
}

static int tmx_soft_dev_reachable(tmx_dev_t *d, const void *addr, size_t len)
{
    tmx_soft_dev_t     *dev = (tmx_soft_dev_t *)d;
    tmx_soft_dev_addr_t a;

    return tmx_soft_addr_parse(addr, len, &a) == TMX_OK && a.uid == (uint32_t)getuid() &&
           a.boot_hash == dev->boot_hash;
}

/* Checks that a peer's segment header describes a layout inside the mapping. */
static int tmx_soft_seg_valid(const tmx_soft_seg_hdr_t *h, size_t size, pid_t pid)
{
    uint64_t rings_end;

    if (h->magic != TMX_SOFT_MAGIC || h->version != TMX_SOFT_VERSION || h->pid != pid ||
        h->uid != (uint32_t)getuid() || h->total != size || h->max_qps == 0 ||
        h->max_qps > (1u << 20) || h->max_mrs > (1u << 24) || h->max_fast > 1024 ||
        h->ring_size < 4096 || (h->ring_size & (h->ring_size - 1)) != 0 ||
        h->ring_size > (1ull << 32) || h->inbox_size < h->ring_size ||
        h->ring0_size < h->ring_size || (h->ring0_size & (h->ring0_size - 1)) != 0 ||
        h->ring0_size > (1ull << 32) ||
        (h->inbox_size & (h->inbox_size - 1)) != 0 || h->inbox_size > (1ull << 32) ||
        h->max_xs > 65536) {
        return 0;
    }
    rings_end = h->rings_off + tmx_soft_rings_bytes(h);
    if (h->dm_size > TMX_SOFT_DM_MAX || h->dm_size % TMX_SOFT_LINE != 0 ||
        h->dm_off % TMX_SOFT_DM_ALIGN != 0 || h->dm_off > size || h->dm_size > size - h->dm_off ||
        (h->dm_size != 0 && h->dm_off < rings_end)) {
        return 0;
    }
    return h->mr_off + (uint64_t)h->max_mrs * sizeof(tmx_soft_mr_ent_t) <= size &&
           h->inbox_off + sizeof(tmx_soft_ring_ctrl_t) + h->inbox_size <= size &&
           h->ctrl_off + (uint64_t)h->max_qps * sizeof(tmx_soft_ring_ctrl_t) <= size &&
           h->fctrl_off + (uint64_t)h->max_fast * sizeof(tmx_soft_ring_ctrl_t) <= size &&
           h->xs_off + (uint64_t)h->max_xs * sizeof(tmx_soft_ring_ctrl_t) <= size &&
           h->xs_off % TMX_SOFT_LINE == 0 &&
           rings_end <= size && h->rings_off % TMX_SOFT_LINE == 0 &&
           h->inbox_off % TMX_SOFT_LINE == 0 && h->ctrl_off % TMX_SOFT_LINE == 0 &&
           h->fctrl_off % TMX_SOFT_LINE == 0;
}

/*
 * Opens a peer's segment file: its memfd through /proc/<pid>/fd/<fd>, or its name. Whatever
 * the blob names is looked at (stat follows the link) before it is opened: a regular file
 * only, so that an address naming a descriptor of some other kind (a device, a fifo) opens
 * nothing. -1 when there is nothing to open.
 */
static int tmx_soft_seg_file_open(const tmx_soft_dev_addr_t *a)
{
    char        path[64];
    struct stat st;
    int         fd;

    if (a->fd < 0) {
        fd = shm_open(a->name, O_RDWR | O_CLOEXEC, 0);
        if (fd < 0) {
            tmx_debug("segment %s of pid %d: %s", a->name, (int)a->pid, strerror(errno));
        }
        return fd;
    }
    snprintf(path, sizeof(path), "/proc/%d/fd/%d", (int)a->pid, (int)a->fd);
    if (stat(path, &st) != 0) {
        tmx_debug("segment %s: %s", path, strerror(errno));
        return -1;
    }
    if (!S_ISREG(st.st_mode)) {
        tmx_debug("segment %s: not a regular file", path);
        return -1;
    }
    fd = open(path, O_RDWR | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0) {
        tmx_debug("segment %s: %s", path, strerror(errno));
    }
    return fd;
}

/* Maps the segment open on fd after checking its file and header; r->h gets the header. */
static tmx_status_t tmx_soft_rseg_map(tmx_soft_rseg_t *r, int fd, const tmx_soft_dev_addr_t *a)
{
    struct stat st;

    /* A private regular file of ours, at least a header long, whose header says what it is
     * and a size that is the file's: only then is anything mapped, and no more than that. A
     * memfd must be sealed against shrinking, which would leave our mapping over nothing. */
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != getuid() ||
        (st.st_mode & 077) != 0 || (size_t)st.st_size < sizeof(r->h) ||
        (a->fd >= 0 && (fcntl(fd, F_GET_SEALS) & (F_SEAL_SHRINK | F_SEAL_SEAL)) !=
                           (F_SEAL_SHRINK | F_SEAL_SEAL)) ||
        pread(fd, &r->h, sizeof(r->h), 0) != (ssize_t)sizeof(r->h) ||
        !tmx_soft_seg_valid(&r->h, (size_t)st.st_size, a->pid) || r->h.probe != a->nonce ||
        r->h.start_time != a->start_time) {
        tmx_warn("the segment of pid %d is not a valid soft device segment", (int)a->pid);
        return TMX_ERR_INVALID_ADDR;
    }
    r->size = (size_t)r->h.total;
    r->base = mmap(NULL, r->size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (r->base == MAP_FAILED) {
        r->base = NULL;
        return TMX_ERR_NO_MEMORY;
    }
    r->page_shift = (unsigned)__builtin_ctzl((unsigned long)sysconf(_SC_PAGESIZE));
    r->touched    = calloc(((r->size >> r->page_shift) + 1 + 63) / 64, sizeof(uint64_t));
    if (r->touched == NULL) {
        munmap(r->base, r->size);
        r->base = NULL;
        return TMX_ERR_NO_MEMORY;
    }
    r->hdr   = &r->h;
    r->armed = (_Atomic uint32_t *)((uint8_t *)r->base + offsetof(tmx_soft_seg_hdr_t, armed));
    tmx_soft_wake_name(r->h.uid, r->h.pid, r->h.probe, &r->wake_addr, &r->wake_len);
    return TMX_OK;
}

/*
 * The pidfd must name the segment's owner, not a process that got the owner's pid after it
 * died. pidfd_open(pid) comes first; then the start time of the process that has the pid now
 * is compared with the owner's (in its address), before its segment is opened; then, once
 * the segment is mapped, the pidfd is polled. If the pidfd's process still runs at the end,
 * the pid named it all along (a pid is not reused while its process exists, zombie included),
 * so the start time read and the /proc/<pid>/fd opened were its own: the same pid and start
 * time (clock ticks: a pid cannot come round again within one) is the same process. A
 * process that exited meanwhile is gone. Where /proc does not give the start time (no /proc:
 * then segments are named) only the last step is left.
 */
static tmx_status_t tmx_soft_rseg_same_process(pid_t pid, const tmx_soft_dev_addr_t *a)
{
    uint64_t start = a->start_time != 0 ? tmx_soft_start_time(pid) : 0;

    if (start != 0 && start != a->start_time) {
        tmx_debug("pid %d names another process than the owner of the segment", (int)pid);
        return TMX_ERR_UNREACHABLE;
    }
    return TMX_OK;
}

tmx_soft_rseg_t *tmx_soft_rseg_get(tmx_soft_dev_t *dev, const void *addr, size_t len,
                                   tmx_status_t *status_p)
{
    tmx_soft_dev_addr_t a;
    tmx_soft_rseg_t    *r = NULL;
    tmx_list_t         *pos;
    int                 fd;
    tmx_status_t        status;

    status = tmx_soft_addr_parse(addr, len, &a);
    if (status != TMX_OK) {
        goto out;
    }
    if (a.uid != (uint32_t)getuid() || a.boot_hash != dev->boot_hash) {
        status = TMX_ERR_UNREACHABLE;
        goto out;
    }
    tmx_list_for_each(pos, &dev->rsegs) {
        r = tmx_container_of(pos, tmx_soft_rseg_t, list);
        if (r->pid == a.pid && r->nonce == a.nonce) {
            r->refs++;
            goto out;
        }
    }
    r = calloc(1, sizeof(*r));
    if (r == NULL) {
        status = TMX_ERR_NO_MEMORY;
        goto out;
    }
    r->pid = a.pid;
    /* before anything else of the peer is looked at: see tmx_soft_rseg_same_process */
    status = tmx_soft_pidfd_open(a.pid, &r->pidfd);
    if (status != TMX_OK) {
        goto err_free;
    }
    status = tmx_soft_rseg_same_process(a.pid, &a);
    if (status != TMX_OK) {
        goto err_pidfd;
    }
    fd = tmx_soft_seg_file_open(&a);
    if (fd < 0) {
        status = TMX_ERR_UNREACHABLE;
        goto err_pidfd;
    }
    status = tmx_soft_rseg_map(r, fd, &a);
    close(fd);
    if (status != TMX_OK) {
        goto err_pidfd;
    }
    if (tmx_soft_rseg_dead(r)) {
        tmx_debug("peer process %d is gone", (int)a.pid);
        status = TMX_ERR_UNREACHABLE;
        goto err_unmap;
    }
    memcpy(r->name, a.name, sizeof(r->name));
    r->nonce = a.nonce;
    r->refs  = 1;
    r->cma   = -1;
    tmx_list_add_tail(&dev->rsegs, &r->list);
    tmx_soft_rseg_watch(dev, r);
    goto out;

err_unmap:
    munmap(r->base, r->size);
err_pidfd:
    if (r->pidfd >= 0) {
        close(r->pidfd);
    }
err_free:
    free(r->touched);
    free(r);
    r = NULL;
out:
    *status_p = status;
    return r;
}

void tmx_soft_rseg_put(tmx_soft_dev_t *dev, tmx_soft_rseg_t *rseg)
{
    (void)dev;
    /* Mappings stay cached until dev_close: reconnecting to the same peer is then free. */
    if (rseg != NULL) {
        rseg->refs--;
    }
}

/* 1 when cross-memory attach works toward this peer: a real read of its probe word. */
int tmx_soft_rseg_cma(tmx_soft_dev_t *dev, tmx_soft_rseg_t *r)
{
    uint64_t     v = 0;
    struct iovec l = {.iov_base = &v, .iov_len = sizeof(v)};
    struct iovec rem;
    ssize_t      n;
    int          err;

    if (r->cma >= 0) {
        return r->cma;
    }
    if (dev->cfg->soft_cma == 0) {
        r->cma = 0;
        return 0;
    }
    rem.iov_base = (void *)(uintptr_t)(r->hdr->map_addr + offsetof(tmx_soft_seg_hdr_t, probe));
    rem.iov_len  = sizeof(v);
    n            = process_vm_readv(r->pid, &l, 1, &rem, 1, 0);
    err          = errno;
    r->cma       = (n == (ssize_t)sizeof(v) && v == r->hdr->probe) ? 1 : 0;
    if (atomic_exchange(&tmx_soft_cma_logged, 1) == 0) {
        if (r->cma) {
            tmx_info("cross-memory attach works (tested on pid %d); rdma uses it", (int)r->pid);
        } else {
            tmx_warn("cross-memory attach to pid %d failed (%s); rdma goes through the rings. "
                     "hint: check /proc/sys/kernel/yama/ptrace_scope (0 or 1 allows it)",
                     (int)r->pid, n < 0 ? strerror(err) : "probe mismatch");
        }
    }
    return r->cma;
}

/* ---------------------------------------------------------------- PD, MR */

static tmx_status_t tmx_soft_pd_alloc(tmx_dev_t *dev, tmx_pd_t **pd_p)
{
    tmx_pd_t *pd = calloc(1, sizeof(*pd));

    if (pd == NULL) {
        return TMX_ERR_NO_MEMORY;
    }
    pd->dev = dev;
    *pd_p   = pd;
    return TMX_OK;
}

static void tmx_soft_pd_free(tmx_pd_t *pd)
{
    free(pd);
}

static tmx_status_t tmx_soft_mr_reg(tmx_pd_t *pd, void *addr, size_t length, unsigned access,
                                    tmx_mr_t **mr_p)
{
    tmx_soft_dev_t *dev = (tmx_soft_dev_t *)pd->dev;
    tmx_soft_mr_t  *mr;
    unsigned        i;
    uint32_t        gen;
    tmx_status_t    status;

    if ((addr == NULL && length != 0) || (uintptr_t)addr + length < (uintptr_t)addr) {
        status = TMX_ERR_INVALID_PARAM;
        goto err;
    }
    /* Receives offered to a tag list register and deregister one buffer per message: the
     * slot search starts at the lowest one that may be free, and objects are reused. */
    for (i = dev->mr_hint; i < dev->hdr->max_mrs; i++) {
        if (dev->mr_objs[i] == NULL) {
            break;
        }
    }
    dev->mr_hint = i;
    if (i == dev->hdr->max_mrs) {
        status = TMX_ERR_NO_RESOURCE;
        goto err;
    }
    mr = dev->mr_free;
    if (mr != NULL) {
        dev->mr_free = mr->next_free;
        memset(mr, 0, sizeof(*mr));
    } else {
        mr = calloc(1, sizeof(*mr));
        if (mr == NULL) {
            status = TMX_ERR_NO_MEMORY;
            goto err;
        }
    }
    /* A new generation per registration: the key of a deregistered region stays dead. */
    gen = (atomic_load(&dev->mrs[i].gen_valid) + 1) & 0xffu;
    if (gen == 0) {
        gen = 1;
    }
    atomic_store_explicit(&dev->mrs[i].addr, (uint64_t)(uintptr_t)addr, memory_order_relaxed);
    atomic_store_explicit(&dev->mrs[i].length, length, memory_order_relaxed);
    atomic_store_explicit(&dev->mrs[i].access, access, memory_order_relaxed);
    atomic_store_explicit(&dev->mrs[i].gen_valid, 0x100u | gen, memory_order_release);
    mr->super.pd     = pd;
    mr->super.addr   = addr;
    mr->super.length = length;
    mr->super.access = access;
    mr->super.lkey   = (i << 8) | gen;
    mr->super.rkey   = mr->super.lkey;
    mr->index        = i;
    dev->mr_objs[i]  = mr;
    *mr_p            = &mr->super;
    return TMX_OK;

err:
    return status;
}

static void tmx_soft_mr_dereg(tmx_mr_t *m)
{
    tmx_soft_mr_t  *mr;
    tmx_soft_dev_t *dev;

    if (m == NULL) {
        return;
    }
    mr  = (tmx_soft_mr_t *)m;
    dev = (tmx_soft_dev_t *)m->pd->dev;
    /* Keep the generation, drop the valid bit. */
    atomic_store_explicit(&dev->mrs[mr->index].gen_valid, m->lkey & 0xffu, memory_order_release);
    dev->mr_objs[mr->index] = NULL;
    if (mr->index < dev->mr_hint) {
        dev->mr_hint = mr->index;
    }
    mr->next_free = dev->mr_free;
    dev->mr_free  = mr;
}

/* ---------------------------------------------------------------- device memory */

static int tmx_soft_dm_taken(const tmx_soft_dev_t *dev, size_t line)
{
    return (dev->dm_map[line / 64] >> (line % 64)) & 1;
}

/* Free lines from line on, up to max: a word of the map at a time where it can. */
static size_t tmx_soft_dm_free_run(const tmx_soft_dev_t *dev, size_t line, size_t max)
{
    size_t n = 0;

    while (n < max) {
        if ((line + n) % 64 == 0 && max - n >= 64) {
            if (dev->dm_map[(line + n) / 64] != 0) {
                break;
            }
            n += 64;
        } else if (tmx_soft_dm_taken(dev, line + n)) {
            break;
        } else {
            n++;
        }
    }
    return n;
}

static void tmx_soft_dm_mark(tmx_soft_dev_t *dev, size_t first, size_t n, int taken)
{
    for (size_t l = first; l < first + n; l++) {
        if (l % 64 == 0 && first + n - l >= 64) {
            dev->dm_map[l / 64] = taken ? ~0ull : 0;
            l += 63;
        } else if (taken) {
            dev->dm_map[l / 64] |= 1ull << (l % 64);
        } else {
            dev->dm_map[l / 64] &= ~(1ull << (l % 64));
        }
    }
}

/*
 * Whether the first fast ring's pages are made when the device opens (TMX_SOFT_RING0_EARLY).
 * Made in its first lap instead, they cost a stream the ring is lent to 1.2-1.9 ms (512 pages
 * of 2 MiB, each made and zeroed at its first touch; measured here): fi_pingpong, which runs
 * 1000 round trips of 4 KiB with no warm-up, took 3.65x the time of libfabric's shm provider.
 * Made here they cost every process ring0_size bytes of memory whether a peer ever earns the
 * ring or not; the borrower then only maps them (tmx_soft_prefault, about 0.15 ms). auto: not
 * when more processes share our CPUs than there are (TMX_LOCAL_SIZE), as in an all-to-all of
 * many ranks, where few rings are lent and memory per rank matters more.
 */
static int tmx_soft_ring0_early(const tmx_config_t *cfg)
{
    if (cfg->soft_ring0_early >= 0) {
        return cfg->soft_ring0_early;
    }
    return !tmx_config_oversubscribed(cfg, NULL);
}

/* Makes the pages of [p, p + len) of our segment (an optimization: where MADV_POPULATE_WRITE
 * is missing or fails, the first touches make them). */
static void tmx_soft_populate(const uint8_t *p, size_t len)
{
#ifdef MADV_POPULATE_WRITE
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t a    = (uintptr_t)p & ~(page - 1);

    (void)madvise((void *)a, (uintptr_t)p + len - a, MADV_POPULATE_WRITE);
#else
    (void)p;
    (void)len;
#endif
}

/*
 * Makes the inbox's pages up to 2 x TMX_SOFT_INBOX_AHEAD past where we read (at open: from its
 * start), and once all are made, never again (inbox_made goes past any head). A sender that
 * runs ahead of them makes its pages by its own first touch, as before the inbox was made
 * whole at open (correct, one fault per page). Measured (tmx_alltoall, Pss_Shmem): an inbox of
 * 512 KiB made whole cost every rank 512 KiB, also in jobs whose traffic went by the eager-RDMA
 * rings (2 ranks: 1.2 MiB for the job, of which the inbox's records used a few pages).
 */
void tmx_soft_inbox_make(tmx_soft_dev_t *dev)
{
    uint64_t want = dev->inbox_head + 2 * TMX_SOFT_INBOX_AHEAD;

    if (want >= dev->inbox_size) {
        want = dev->inbox_size;
    }
    if (want > dev->inbox_made) {
        tmx_soft_populate(dev->inbox + dev->inbox_made, want - dev->inbox_made);
        dev->inbox_made = want;
    }
    if (dev->inbox_made >= dev->inbox_size) {
        dev->inbox_made = UINT64_MAX / 2; /* all made: tmx_soft_inbox_ahead never calls again */
    }
}

/* Makes the pages of n lines of device memory from line first. */
static void tmx_soft_dm_populate(tmx_soft_dev_t *dev, size_t first, size_t n)
{
    tmx_soft_populate(dev->dm + first * TMX_SOFT_LINE, n * TMX_SOFT_LINE);
}

/* First fit of len bytes in the device memory's lines, at a TMX_SOFT_DM_ALIGN boundary, zeroed
 * and registered like any memory; the MR says it is device memory. */
static tmx_status_t tmx_soft_mem_alloc(tmx_pd_t *pd, size_t len, unsigned access,
                                       tmx_mr_t **mr_p)
{
    tmx_soft_dev_t *dev   = (tmx_soft_dev_t *)pd->dev;
    const size_t    step  = TMX_SOFT_DM_ALIGN / TMX_SOFT_LINE;
    size_t          need, first;
    tmx_status_t    status;

    if (mr_p == NULL || len == 0 || len > TMX_SOFT_DM_MAX) {
        return TMX_ERR_INVALID_PARAM;
    }
    need = (len + TMX_SOFT_LINE - 1) / TMX_SOFT_LINE;
    for (first = dev->dm_hint - dev->dm_hint % step; first + need <= dev->dm_lines;) {
        size_t n = tmx_soft_dm_free_run(dev, first, need);

        if (n == need) {
            break;
        }
        first += n + 1; /* past the taken line, to the next boundary */
        first += (step - first % step) % step;
    }
    if (first + need > dev->dm_lines) {
        tmx_debug("device memory: no %zu free bytes of %zu", len, dev->dm_lines * TMX_SOFT_LINE);
        return TMX_ERR_NO_RESOURCE;
    }
    /* Lines given out before are cleared; lines never given out are zero still (the segment
     * is a new file), and only their pages are made, by the kernel, at once: measured
     * (tmx_alltoall, 8 ranks, callgrind), clearing the 64 KiB eager-RDMA ring lent to each
     * peer cost 85,000 instructions at the grant; left to the first touches, the ring's pages
     * cost more than made here (2 ranks: 8-10 us in each of the 16 rounds of the ring's first
     * lap, against 3 us once these are made), as the receiver's poll and the sender's write
     * meet on each new page. */
    if (first < dev->dm_clean) {
        size_t dirty = dev->dm_clean - first < need ? dev->dm_clean - first : need;

        memset(dev->dm + first * TMX_SOFT_LINE, 0, dirty * TMX_SOFT_LINE);
    }
    if (first + need > dev->dm_clean) {
        size_t clean = first > dev->dm_clean ? first : dev->dm_clean;

        tmx_soft_dm_populate(dev, clean, first + need - clean);
    }
    status = tmx_soft_ops.mr_reg(pd, dev->dm + first * TMX_SOFT_LINE, len, access, mr_p);
    if (status != TMX_OK) {
        return status;
    }
    ((tmx_soft_mr_t *)*mr_p)->dm = 1;
    tmx_soft_dm_mark(dev, first, need, 1);
    if (first + need > dev->dm_clean) {
        dev->dm_clean = first + need;
    }
    if (first == dev->dm_hint) {
        dev->dm_hint = first + need;
    }
    return TMX_OK;
}

static void tmx_soft_mem_free(tmx_mr_t *m)
{
    tmx_soft_dev_t *dev;
    size_t          first, need;

    if (m == NULL) {
        return;
    }
    dev = (tmx_soft_dev_t *)m->pd->dev;
    if (!((tmx_soft_mr_t *)m)->dm) {
        tmx_error("mem_free of memory that mem_alloc did not give: ignored");
        return;
    }
    first = (size_t)((uint8_t *)m->addr - dev->dm) / TMX_SOFT_LINE;
    need  = (m->length + TMX_SOFT_LINE - 1) / TMX_SOFT_LINE;
    tmx_soft_ops.mr_dereg(m);
    tmx_soft_dm_mark(dev, first, need, 0);
    if (first < dev->dm_hint) {
        dev->dm_hint = first;
    }
}

/* The slow side of the asymmetric barrier (TMX_DEV_CAP_MEM_ASYM), as before a sleep
 * (tmx_soft_cq_req_notify): every registered process runs a full barrier. */
static tmx_status_t tmx_soft_mem_barrier(tmx_dev_t *d)
{
    tmx_soft_dev_t *dev = (tmx_soft_dev_t *)d;

    if (dev->asym) {
        return tmx_soft_membarrier() ? TMX_OK : TMX_ERR_IO;
    }
    TMX_SOFT_FENCE();
    return TMX_OK;
}

/* ---------------------------------------------------------------- CQ */

static tmx_status_t tmx_soft_cq_create(tmx_dev_t *dev, int cqe, tmx_cq_t **cq_p)
{
    tmx_soft_cq_t *cq;
    tmx_status_t   status;

    if (cqe <= 0 || cqe > (1 << 24)) {
        status = TMX_ERR_INVALID_PARAM;
        goto err;
    }
    cq = calloc(1, sizeof(*cq));
    if (cq == NULL) {
        status = TMX_ERR_NO_MEMORY;
        goto err;
    }
    /* a power of two: positions wrap with a mask */
    for (cq->cap = 1; cq->cap < (unsigned)cqe; cq->cap *= 2) {
    }
    cq->wc = calloc(cq->cap, sizeof(*cq->wc));
    if (cq->wc == NULL) {
        status = TMX_ERR_NO_MEMORY;
        goto err_free;
    }
    tmx_soft_touch(cq->wc, cq->cap * sizeof(*cq->wc));
    cq->super.dev = dev;
    cq->super.cqe = cqe;
    ((tmx_soft_dev_t *)dev)->stats.cqs++;
    *cq_p         = &cq->super;
    return TMX_OK;

err_free:
    free(cq);
err:
    return status;
}

static void tmx_soft_cq_destroy(tmx_cq_t *c)
{
    tmx_soft_cq_t *cq = (tmx_soft_cq_t *)c;

    if (cq != NULL) {
        ((tmx_soft_dev_t *)c->dev)->stats.cqs--;
        free(cq->wc);
        free(cq);
    }
}

/* Local completions (sends, flushes) may exceed cqe: the ring grows rather than lose one;
 * draining the wire stops at cqe, which is the backpressure. */
tmx_status_t tmx_soft_cq_grow_push(tmx_soft_cq_t *cq, const tmx_wc_t *wc)
{
    unsigned  ncap = cq->cap * 2;
    tmx_wc_t *nwc  = calloc(ncap, sizeof(*nwc));

    if (nwc == NULL) {
        tmx_error("completion queue full and out of memory: completion lost");
        return TMX_ERR_NO_MEMORY;
    }
    tmx_soft_touch(nwc, ncap * sizeof(*nwc));
    for (unsigned i = 0; i < cq->count; i++) {
        nwc[i] = cq->wc[(cq->head + i) & (cq->cap - 1)];
    }
    free(cq->wc);
    cq->wc   = nwc;
    cq->cap  = ncap;
    cq->head = 0;
    cq->wc[cq->count++] = *wc;
    return TMX_OK;
}

/* ---------------------------------------------------------------- receive queues */

int tmx_soft_rq_pop(tmx_soft_rq_t *rq, tmx_soft_rwr_t *out)
{
    if (rq->count == 0) {
        return 0;
    }
    *out = rq->wr[rq->head];
    tmx_soft_rq_advance(rq);
    return 1;
}

tmx_status_t tmx_soft_rq_post(tmx_soft_dev_t *dev, tmx_soft_rq_t *rq, tmx_recv_wr_t *wr,
                              tmx_recv_wr_t **bad_p)
{
    (void)dev;
    for (; wr != NULL; wr = wr->next) {
        tmx_soft_rwr_t *e;
        unsigned        pos;

        if (wr->num_sge < 0 || wr->num_sge > TMX_SOFT_MAX_SGE ||
            (wr->num_sge > 0 && wr->sg_list == NULL)) {
            *bad_p = wr;
            return TMX_ERR_INVALID_PARAM;
        }
        if (rq->count == rq->size) {
            *bad_p = wr;
            return TMX_ERR_NO_RESOURCE;
        }
        pos        = rq->head + rq->count; /* both below size: no overflow */
        e          = &rq->wr[pos >= rq->size ? pos - rq->size : pos];
        e->wr_id   = wr->wr_id;
        e->num_sge = wr->num_sge;
        if (wr->num_sge == 1) {
            e->sge[0] = wr->sg_list[0]; /* the usual case, without a call */
        } else if (wr->num_sge > 1) {
            memcpy(e->sge, wr->sg_list, (size_t)wr->num_sge * sizeof(tmx_sge_t));
        }
        rq->count++;
    }
    return TMX_OK;
}

static tmx_status_t tmx_soft_srq_create(tmx_pd_t *pd, const tmx_srq_init_attr_t *attr,
                                        tmx_srq_t **srq_p)
{
    tmx_soft_srq_t *srq;
    tmx_status_t    status;

    /* TM SRQs only with TMX_SOFT_TM, XRC ones only with TMX_SOFT_XRC: the caps say which. */
    if (attr != NULL && attr->type != TMX_SRQT_BASIC &&
        (attr->type != TMX_SRQT_TM || !(pd->dev->attr.caps & TMX_DEV_CAP_TM)) &&
        (attr->type != TMX_SRQT_XRC || !(pd->dev->attr.caps & TMX_DEV_CAP_XRC))) {
        status = TMX_ERR_UNSUPPORTED;
        goto err;
    }
    if (attr == NULL || attr->max_wr == 0 || attr->max_sge > TMX_SOFT_MAX_SGE ||
        attr->max_wr > pd->dev->attr.max_srq_wr || (attr->flags & ~(unsigned)TMX_SRQ_F_INPLACE) ||
        ((attr->flags & TMX_SRQ_F_INPLACE) &&
         (attr->type == TMX_SRQT_TM || !(pd->dev->attr.caps & TMX_DEV_CAP_RECV_INPLACE)))) {
        status = TMX_ERR_INVALID_PARAM;
        goto err;
    }
    srq = calloc(1, sizeof(*srq));
    if (srq == NULL) {
        status = TMX_ERR_NO_MEMORY;
        goto err;
    }
    srq->rq.size = attr->max_wr;
    srq->rq.wr   = calloc(srq->rq.size, sizeof(*srq->rq.wr));
    if (srq->rq.wr == NULL) {
        status = TMX_ERR_NO_MEMORY;
        goto err_free;
    }
    tmx_soft_touch(srq->rq.wr, srq->rq.size * sizeof(*srq->rq.wr));
    srq->super.pd   = pd;
    srq->super.type = attr->type;
    srq->super.cq   = attr->cq;
    srq->inplace    = (attr->flags & TMX_SRQ_F_INPLACE) != 0;
    if (attr->type == TMX_SRQT_TM) {
        status = tmx_soft_tm_create(srq, attr);
        if (status != TMX_OK) {
            goto err_free_rq;
        }
    } else if (attr->type == TMX_SRQT_XRC) {
        status = tmx_soft_xrc_srq_init(srq, attr);
        if (status != TMX_OK) {
            goto err_free_rq;
        }
    }
    ((tmx_soft_dev_t *)pd->dev)->stats.srqs++;
    *srq_p          = &srq->super;
    return TMX_OK;

err_free_rq:
    free(srq->rq.wr);
err_free:
    free(srq);
err:
    return status;
}

static void tmx_soft_srq_destroy(tmx_srq_t *s)
{
    tmx_soft_srq_t *srq = (tmx_soft_srq_t *)s;

    if (srq != NULL) {
        ((tmx_soft_dev_t *)s->pd->dev)->stats.srqs--;
        tmx_soft_tm_destroy(srq);
        tmx_soft_xrc_srq_fini(srq);
        free(srq->rq.wr);
        free(srq);
    }
}

static tmx_status_t tmx_soft_srq_post_recv(tmx_srq_t *s, tmx_recv_wr_t *wr,
                                           tmx_recv_wr_t **bad_p)
{
    tmx_soft_srq_t *srq = (tmx_soft_srq_t *)s;

    return tmx_soft_rq_post((tmx_soft_dev_t *)s->pd->dev, &srq->rq, wr, bad_p);
}

/* ---------------------------------------------------------------- completion channel */

/* Registers this process for MEMBARRIER_CMD_GLOBAL_EXPEDITED (once): its producers may then
 * publish without a fence (tmx_soft_wake_peer). 1 when registered. */
static int tmx_soft_membarrier_register(void)
{
    int reg = atomic_load(&tmx_soft_membarrier_reg);

    if (reg < 0) {
#if defined(__NR_membarrier) && !defined(__SANITIZE_THREAD__)
        long q = syscall(__NR_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);

        reg = q > 0 && (q & MEMBARRIER_CMD_GLOBAL_EXPEDITED) &&
              syscall(__NR_membarrier, MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED, 0, 0) == 0;
#else
        reg = 0;
#endif
        atomic_store(&tmx_soft_membarrier_reg, reg);
        tmx_debug("membarrier: %s", reg ? "registered, producers publish without a fence"
                                        : "unavailable, producers fence");
    }
    return reg;
}

int tmx_soft_membarrier(void)
{
#if defined(__NR_membarrier)
    return syscall(__NR_membarrier, MEMBARRIER_CMD_GLOBAL_EXPEDITED, 0, 0) == 0;
#else
    return 0;
#endif
}

void tmx_soft_wake_name(uint32_t uid, int32_t pid, uint64_t probe, struct sockaddr_un *sa,
                        socklen_t *len_p)
{
    int n;

    memset(sa, 0, sizeof(*sa));
    sa->sun_family = AF_UNIX;
    /* abstract: sun_path[0] is NUL, the name is the bytes after it (no terminator) */
    n = snprintf(sa->sun_path + 1, sizeof(sa->sun_path) - 1, "tmx-wake-%u-%d-%016llx",
                 (unsigned)uid, (int)pid, (unsigned long long)probe);
    *len_p = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
}

/*
 * The slow half of tmx_soft_wake_peer: the peer armed. Whoever clears the word sends the one
 * datagram; the others had nothing to do. A datagram that cannot be sent (the peer's socket
 * queue is full: it has wakes pending already; or it is gone) is dropped: a sleeper also
 * wakes on its own after a bounded time (the core's), so a lost wake costs latency, never a
 * hang.
 */
void tmx_soft_wake_send(tmx_soft_dev_t *dev, tmx_soft_rseg_t *r)
{
    char b = 0;

    if (atomic_exchange_explicit(r->armed, 0, memory_order_relaxed) == 0) {
        return;
    }
    if (dev->wake_fd < 0) {
        dev->wake_fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (dev->wake_fd < 0) {
            if (atomic_exchange(&tmx_soft_wake_logged, 1) == 0) {
                tmx_warn("socket for waking sleeping peers failed: %s; they wake late",
                         strerror(errno));
            }
            return;
        }
    }
    if (sendto(dev->wake_fd, &b, 1, MSG_DONTWAIT | MSG_NOSIGNAL,
               (const struct sockaddr *)&r->wake_addr, r->wake_len) < 0 &&
        errno != EAGAIN && errno != EWOULDBLOCK) {
        if (atomic_exchange(&tmx_soft_wake_logged, 1) == 0) {
            tmx_warn("wake of sleeping peer process %d failed: %s; it wakes late", (int)r->pid,
                     strerror(errno));
        } else {
            tmx_debug("wake of peer process %d failed: %s", (int)r->pid, strerror(errno));
        }
    }
}

/* A peer's pidfd goes into the channel's epoll set: a sleeper wakes when a peer dies, as on
 * hardware a QP's error completion wakes a completion channel (tmx_soft_channel_get_events
 * takes it out again once seen). */
void tmx_soft_rseg_watch(tmx_soft_dev_t *dev, tmx_soft_rseg_t *r)
{
    struct epoll_event ev = {.events = EPOLLIN};

    if (!dev->channel_open || r->watched || r->pidfd < 0 || r->dead) {
        return;
    }
    ev.data.ptr = r;
    if (epoll_ctl(dev->channel.fd, EPOLL_CTL_ADD, r->pidfd, &ev) == 0) {
        r->watched = 1;
    } else {
        tmx_debug("watching peer process %d: %s", (int)r->pid, strerror(errno));
    }
}

static void tmx_soft_rseg_unwatch(tmx_soft_dev_t *dev, tmx_soft_rseg_t *r)
{
    if (r->watched) {
        (void)epoll_ctl(dev->channel.fd, EPOLL_CTL_DEL, r->pidfd, NULL);
        r->watched = 0;
    }
}

/* The device's one channel: a datagram socket bound to our segment's wake name. Anyone of
 * this network namespace can send to an abstract name: a stranger's datagram only wakes us
 * for nothing (we poll, find nothing and sleep again). */
static tmx_status_t tmx_soft_channel_create(tmx_dev_t *d, tmx_comp_channel_t **ch_p)
{
    tmx_soft_dev_t    *dev = (tmx_soft_dev_t *)d;
    struct epoll_event ev  = {.events = EPOLLIN};
    struct sockaddr_un sa;
    socklen_t          len;
    tmx_list_t        *pos;
    int                fd, ep;
    tmx_status_t       status;

    if (dev->channel_open) {
        status = TMX_ERR_NO_RESOURCE;
        goto err;
    }
    fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        tmx_warn("wake socket of the soft device: %s", strerror(errno));
        status = TMX_ERR_IO;
        goto err;
    }
    tmx_soft_wake_name(dev->hdr->uid, dev->hdr->pid, dev->hdr->probe, &sa, &len);
    if (bind(fd, (const struct sockaddr *)&sa, len) != 0) {
        tmx_warn("bind of the soft device's wake socket @%s: %s", sa.sun_path + 1,
                 strerror(errno));
        status = TMX_ERR_IO;
        goto err_close;
    }
    ep = epoll_create1(EPOLL_CLOEXEC);
    if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) != 0) {
        tmx_warn("epoll set of the soft device's channel: %s", strerror(errno));
        status = TMX_ERR_IO;
        if (ep >= 0) {
            close(ep);
        }
        goto err_close;
    }
    atomic_store_explicit(&dev->hdr->armed, 0, memory_order_relaxed);
    dev->wake_sock    = fd;
    dev->channel.dev  = d;
    dev->channel.fd   = ep;
    dev->channel_open = 1;
    tmx_list_for_each(pos, &dev->rsegs) {
        tmx_soft_rseg_watch(dev, tmx_container_of(pos, tmx_soft_rseg_t, list));
    }
    *ch_p = &dev->channel;
    return TMX_OK;

err_close:
    close(fd);
err:
    return status;
}

static void tmx_soft_channel_destroy(tmx_comp_channel_t *ch)
{
    tmx_soft_dev_t *dev;
    tmx_list_t     *pos;

    if (ch == NULL) {
        return;
    }
    dev = (tmx_soft_dev_t *)ch->dev;
    atomic_store_explicit(&dev->hdr->armed, 0, memory_order_relaxed);
    tmx_list_for_each(pos, &dev->rsegs) {
        tmx_soft_rseg_t *r = tmx_container_of(pos, tmx_soft_rseg_t, list);
        r->watched = 0;
    }
    close(ch->fd);
    close(dev->wake_sock);
    dev->channel_open = 0;
}

/* Drains the wake datagrams. Awake now, we also disarm: a wake that ended by the caller's
 * timeout left the word set, and producers would pay a system call for nothing. */
static int tmx_soft_channel_get_events(tmx_comp_channel_t *ch)
{
    tmx_soft_dev_t *dev = (tmx_soft_dev_t *)ch->dev;
    char            buf[64];
    tmx_list_t     *pos;
    int             n = 0;

    if (atomic_load_explicit(&dev->hdr->armed, memory_order_relaxed) != 0) {
        atomic_store_explicit(&dev->hdr->armed, 0, memory_order_relaxed);
    }
    while (recv(dev->wake_sock, buf, sizeof(buf), MSG_DONTWAIT) >= 0) {
        n++;
    }
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        tmx_error("reading the soft device's wake socket: %s", strerror(errno));
        return TMX_ERR_IO;
    }
    /* A peer that died: its pidfd stays readable, so it leaves the set, and the next arm
     * checks every peer now rather than at the next period (its QPs fail, which is the
     * event the sleeper needed). */
    tmx_list_for_each(pos, &dev->rsegs) {
        tmx_soft_rseg_t *r = tmx_container_of(pos, tmx_soft_rseg_t, list);

        if (r->watched && tmx_soft_rseg_dead(r)) {
            tmx_soft_rseg_unwatch(dev, r);
            dev->last_check_ns = 0;
            n++;
        }
    }
    return n;
}

/* ---------------------------------------------------------------- AH */

static tmx_status_t tmx_soft_ah_create(tmx_pd_t *pd, const void *dev_addr, size_t len,
                                       tmx_ah_t **ah_p)
{
    tmx_soft_dev_t *dev = (tmx_soft_dev_t *)pd->dev;
    tmx_soft_ah_t  *ah;
    tmx_status_t    status;

    ah = calloc(1, sizeof(*ah));
    if (ah == NULL) {
        status = TMX_ERR_NO_MEMORY;
        goto err;
    }
    ah->rseg = tmx_soft_rseg_get(dev, dev_addr, len, &status);
    if (ah->rseg == NULL) {
        goto err_free;
    }
    ah->super.pd = pd;
    *ah_p        = &ah->super;
    return TMX_OK;

err_free:
    free(ah);
err:
    return status;
}

static void tmx_soft_ah_destroy(tmx_ah_t *a)
{
    tmx_soft_ah_t *ah = (tmx_soft_ah_t *)a;

    if (ah != NULL) {
        tmx_soft_rseg_put((tmx_soft_dev_t *)a->pd->dev, ah->rseg);
        free(ah);
    }
}

/* ---------------------------------------------------------------- statistics */

static tmx_status_t tmx_soft_dev_query_stats(tmx_dev_t *d, tmx_dev_stats_t *stats)
{
    if (d == NULL || stats == NULL) {
        return TMX_ERR_INVALID_PARAM;
    }
    *stats = ((tmx_soft_dev_t *)d)->stats;
    return TMX_OK;
}

/* ---------------------------------------------------------------- the provider */

const tmx_prov_ops_t tmx_soft_ops = {
    .dev_open         = tmx_soft_dev_open,
    .dev_close        = tmx_soft_dev_close,
    .dev_get_addr     = tmx_soft_dev_get_addr,
    .dev_reachable    = tmx_soft_dev_reachable,
    .dev_print        = tmx_prov_no_dev_print,
    .pd_alloc         = tmx_soft_pd_alloc,
    .pd_free          = tmx_soft_pd_free,
    .mr_reg           = tmx_soft_mr_reg,
    .mr_dereg         = tmx_soft_mr_dereg,
    .mem_alloc        = tmx_soft_mem_alloc,
    .mem_free         = tmx_soft_mem_free,
    .mem_barrier      = tmx_soft_mem_barrier,
    .cq_create        = tmx_soft_cq_create,
    .cq_destroy       = tmx_soft_cq_destroy,
    .cq_poll          = tmx_soft_cq_poll,
    .channel_create   = tmx_soft_channel_create,
    .channel_destroy  = tmx_soft_channel_destroy,
    .cq_req_notify    = tmx_soft_cq_req_notify,
    .channel_get_events = tmx_soft_channel_get_events,
    .dev_query_stats  = tmx_soft_dev_query_stats,
    .xrcd_open        = tmx_soft_xrcd_open,
    .xrcd_close       = tmx_soft_xrcd_close,
    .srq_create       = tmx_soft_srq_create,
    .srq_destroy      = tmx_soft_srq_destroy,
    .srq_post_recv    = tmx_soft_srq_post_recv,
    .srq_post_ops     = tmx_soft_srq_post_ops,
    .srq_get_num      = tmx_soft_srq_get_num,
    .qp_create        = tmx_soft_qp_create,
    .qp_destroy       = tmx_soft_qp_destroy,
    .qp_open          = tmx_soft_qp_open,
    .qp_get_addr      = tmx_soft_qp_get_addr,
    .qp_modify        = tmx_soft_qp_modify,
    .qp_data_in_order = tmx_soft_qp_data_in_order,
    .post_send        = tmx_soft_post_send,
    .post_recv        = tmx_soft_post_recv,
    .ah_create        = tmx_soft_ah_create,
    .ah_destroy       = tmx_soft_ah_destroy,
    .rma_map          = tmx_soft_rma_map,
    .rma_write        = tmx_soft_rma_write,
    .rma_writev       = tmx_soft_rma_writev,
};

const tmx_prov_t tmx_soft_prov = {
    .name        = "soft",
    .description = "soft device: verbs semantics over shared memory between processes of a host",
    .ops         = &tmx_soft_ops,
};
