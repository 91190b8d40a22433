/*
 * tmx_conformance: the conformance suite, run by tmxrun on every rank.
 *
 *   tmxrun -n 2 tmx_conformance [-t name] [-l] [-s seed] [-n schedules] [-T timeout_s]
 *
 * Each case runs on all ranks in lock step (a job barrier before and after) and its result is
 * gathered on rank 0, which prints "PASS name", "FAIL name: reason" or "SKIP name: reason" and
 * at the end "N passed, N failed[, N skipped]". Exit status: 0 if nothing failed, 1 otherwise,
 * 2 for bad usage or a setup failure.
 */
#define _GNU_SOURCE
#include "cf.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <time.h>

/* What every rank reports to rank 0 after a case. */
typedef struct cf_result {
    int  result;
    char why[CF_WHY_LEN];
} cf_result_t;

int cf_fail(cf_t *cf, const char *fmt, ...)
{
    va_list ap;

    if (cf->why[0] == '\0') {
        va_start(ap, fmt);
        vsnprintf(cf->why, sizeof(cf->why), fmt, ap);
        va_end(ap);
    }
    return CF_FAIL;
}

int cf_skip(cf_t *cf, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(cf->why, sizeof(cf->why), fmt, ap);
    va_end(ap);
    return CF_SKIP;
}

tmx_tag_t cf_tag(const cf_t *cf, uint64_t low)
{
    return ((tmx_tag_t)cf->case_id << CF_CASE_SHIFT) | (low & ~CF_CASE_MASK);
}

double cf_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

const char *cf_status_name(tmx_status_t status)
{
    if (status == CF_TIMED_OUT) {
        return "(test deadline passed)";
    }
    return cf_status_enum_name(status);
}

void *cf_alloc(cf_t *cf, size_t len)
{
    void *buf;

    if (len == 0) {
        return NULL;
    }
    if (cf->nbufs == cf->bufs_cap) {
        cf->bufs_cap = (cf->bufs_cap == 0) ? 64 : 2 * cf->bufs_cap;
        cf->bufs     = realloc(cf->bufs, cf->bufs_cap * sizeof(*cf->bufs));
        if (cf->bufs == NULL) {
            fprintf(stderr, "tmx_conformance: out of memory\n");
            exit(2);
        }
    }
    buf = calloc(1, len);
    if (buf == NULL) {
        fprintf(stderr, "tmx_conformance: out of memory (%zu bytes)\n", len);
        exit(2);
    }
    cf->bufs[cf->nbufs++] = buf;
    return buf;
}

static unsigned char cf_pattern_byte(uint64_t seed, size_t i)
{
    /* Differs between neighbouring bytes, between 256-byte blocks and between seeds, so a
     * shifted, repeated or foreign block is caught. */
    return (unsigned char)(seed * 0x9d + i * 7 + (i >> 8) * 0x3b + (seed >> 8));
}

void cf_fill(void *buf, size_t len, uint64_t seed)
{
    unsigned char *p = buf;

    for (size_t i = 0; i < len; i++) {
        p[i] = cf_pattern_byte(seed, i);
    }
}

long cf_verify(const void *buf, size_t len, uint64_t seed)
{
    const unsigned char *p = buf;

    for (size_t i = 0; i < len; i++) {
        if (p[i] != cf_pattern_byte(seed, i)) {
            return (long)i;
        }
    }
    return -1;
}

void cf_track(cf_t *cf, tmx_request_h req)
{
    if (req == NULL) {
        return;
    }
    if (cf->nreqs == cf->reqs_cap) {
        cf->reqs_cap = (cf->reqs_cap == 0) ? 64 : 2 * cf->reqs_cap;
        cf->reqs     = realloc(cf->reqs, cf->reqs_cap * sizeof(*cf->reqs));
        if (cf->reqs == NULL) {
            fprintf(stderr, "tmx_conformance: out of memory\n");
            exit(2);
        }
    }
    cf->reqs[cf->nreqs].req    = req;
    cf->reqs[cf->nreqs].in_use = 1;
    cf->nreqs++;
}

tmx_status_t cf_send(cf_t *cf, tmx_ep_h ep, const void *buf, size_t len, tmx_tag_t tag,
                     unsigned flags, tmx_request_h *req_p)
{
    tmx_request_params_t params = {.field_mask = TMX_REQ_PARAM_FLAGS, .flags = flags};
    tmx_request_h        req    = NULL;
    tmx_status_t         status;

    status = tmx_tag_send_nb(ep, buf, len, tag, &params, &req);
    if (status == TMX_OK) {
        req = NULL;
    } else if (status == TMX_INPROGRESS) {
        cf_track(cf, req);
    }
    *req_p = req;
    return status;
}

tmx_status_t cf_recv(cf_t *cf, void *buf, size_t len, tmx_tag_t tag, tmx_tag_t mask,
                     tmx_request_h *req_p)
{
    tmx_request_h req = NULL;
    tmx_status_t  status;

    status = tmx_tag_recv_nb(cf->worker, buf, len, tag, mask, NULL, &req);
    if (status == TMX_INPROGRESS) {
        cf_track(cf, req);
    } else {
        req = NULL;
    }
    *req_p = req;
    return status;
}

/* With more ranks than cores (4 ranks on 2 cores in CI) a rank that spins without events
 * only delays the peer it waits for: give the core away when progress finds nothing. */
static void cf_idle(cf_t *cf)
{
    if (tmx_worker_progress(cf->worker) == 0) {
        sched_yield();
    }
}

tmx_status_t cf_wait(cf_t *cf, tmx_request_h req, tmx_tag_recv_info_t *info)
{
    double       deadline = cf_now() + cf->timeout_s;
    tmx_status_t status;
    unsigned     spins = 0;

    if (req == NULL) {
        return TMX_OK;
    }
    for (;;) {
        status = tmx_request_test(req, info);
        if (status != TMX_INPROGRESS) {
            return status;
        }
        cf_idle(cf);
        /* Reading the clock every call would dominate small-message loops. */
        if ((++spins & 255) == 0 && cf_now() > deadline) {
            return CF_TIMED_OUT;
        }
    }
}

tmx_status_t cf_probe_wait(cf_t *cf, tmx_tag_t tag, tmx_tag_t mask, tmx_probe_mode_t mode,
                           tmx_tag_recv_info_t *info, tmx_message_h *msg_p)
{
    double       deadline = cf_now() + cf->timeout_s;
    tmx_status_t status;
    unsigned     spins = 0;

    for (;;) {
        status = tmx_tag_probe(cf->worker, tag, mask, mode, info, msg_p);
        if (status != TMX_ERR_NO_MESSAGE) {
            return status;
        }
        cf_idle(cf);
        if ((++spins & 255) == 0 && cf_now() > deadline) {
            return CF_TIMED_OUT;
        }
    }
}

void cf_progress_for(cf_t *cf, double seconds)
{
    double end = cf_now() + seconds;

    while (cf_now() < end) {
        tmx_worker_progress(cf->worker);
    }
}

tmx_status_t cf_send_wait(cf_t *cf, tmx_ep_h ep, const void *buf, size_t len, tmx_tag_t tag)
{
    tmx_request_h req;
    tmx_status_t  status;

    status = cf_send(cf, ep, buf, len, tag, 0, &req);
    if (status == TMX_INPROGRESS) {
        status = cf_wait(cf, req, NULL);
    }
    return status;
}

tmx_status_t cf_recv_wait(cf_t *cf, void *buf, size_t len, tmx_tag_t tag, tmx_tag_t mask,
                          tmx_tag_recv_info_t *info)
{
    tmx_request_h req;
    tmx_status_t  status;

    status = cf_recv(cf, buf, len, tag, mask, &req);
    if (status == TMX_INPROGRESS) {
        status = cf_wait(cf, req, info);
    }
    return status;
}

/* Releases the case's requests and buffers. A request the library still owns after a cancel
 * and a grace period keeps its buffers alive: they are leaked on purpose rather than freed
 * under a pending write. */
void cf_release(cf_t *cf)
{
    int leak = 0;

    for (size_t i = 0; i < cf->nreqs; i++) {
        tmx_request_h req = cf->reqs[i].req;
        double        end;

        if (tmx_request_test(req, NULL) == TMX_INPROGRESS) {
            (void)tmx_request_cancel(req);
            end = cf_now() + 1.0;
            while (tmx_request_test(req, NULL) == TMX_INPROGRESS && cf_now() < end) {
                tmx_worker_progress(cf->worker);
            }
            if (tmx_request_test(req, NULL) == TMX_INPROGRESS) {
                leak = 1;
            }
        }
        tmx_request_free(req);
    }
    cf->nreqs = 0;
    for (size_t i = 0; i < cf->nbufs; i++) {
        if (!leak) {
            free(cf->bufs[i]);
        }
    }
    cf->nbufs = 0;
}

/* Drops whatever a case left in this case's tag space (messages of a failed case). */
static void cf_case_drain(cf_t *cf)
{
    tmx_tag_recv_info_t info;

    cf_progress_for(cf, 0.01);
    /* Bounded: a discard that does not remove the message must not hang the suite. */
    for (int i = 0; i < 1000 && tmx_tag_probe(cf->worker, cf_tag(cf, 0), CF_CASE_MASK,
                                              TMX_PROBE_DISCARD, &info, NULL) == TMX_OK; i++) {
        fprintf(stderr, "tmx_conformance: rank %d: dropped leftover tag 0x%016" PRIx64
                        " length %zu\n", cf->rank, info.tag, info.length);
    }
}

/* Runs one case on every rank and reports it on rank 0. Returns the gathered result. */
static int cf_run_case(cf_t *cf, size_t index)
{
    const cf_case_t *c = &cf_cases[index];
    cf_result_t      mine;
    cf_result_t     *all;
    int              result = CF_PASS;
    int              first_fail = -1;
    int              nskip = 0;

    all = calloc((size_t)cf->size, sizeof(*all));
    if (all == NULL) {
        fprintf(stderr, "tmx_conformance: out of memory\n");
        exit(2);
    }
    cf->case_id    = (unsigned)index + 1;
    cf->script_seq = 0;
    cf->why[0]  = '\0';
    if (tmx_job_barrier(cf->job) != TMX_OK) {
        fprintf(stderr, "tmx_conformance: rank %d: barrier failed\n", cf->rank);
        exit(2);
    }
    memset(&mine, 0, sizeof(mine));
    mine.result = c->fn(cf);
    snprintf(mine.why, sizeof(mine.why), "%s", cf->why);
    if (mine.result == CF_FAIL) {
        fprintf(stderr, "tmx_conformance: rank %d: FAIL %s: %s\n", cf->rank, c->name, mine.why);
    }
    cf_release(cf);
    if (tmx_job_allgather(cf->job, &mine, sizeof(mine), all) != TMX_OK) {
        fprintf(stderr, "tmx_conformance: rank %d: allgather failed\n", cf->rank);
        exit(2);
    }
    cf_case_drain(cf);
    for (int r = 0; r < cf->size; r++) {
        if (all[r].result == CF_FAIL && first_fail < 0) {
            first_fail = r;
        } else if (all[r].result == CF_SKIP) {
            nskip++;
        }
    }
    if (first_fail >= 0) {
        result = CF_FAIL;
    } else if (nskip == cf->size) {
        result = CF_SKIP;
    }
    if (cf->rank == 0) {
        if (result == CF_FAIL) {
            printf("FAIL %s: rank %d: %s\n", c->name, first_fail, all[first_fail].why);
        } else if (result == CF_SKIP) {
            printf("SKIP %s: %s\n", c->name, all[0].why);
        } else {
            printf("PASS %s\n", c->name);
        }
        fflush(stdout);
    }
    free(all);
    return result;
}

static void cf_usage(FILE *stream)
{
    fprintf(stream,
            "usage: tmxrun -n N tmx_conformance [options]\n"
            "  -t NAME     run only case NAME (may be repeated)\n"
            "  -l          list the cases and exit\n"
            "  -s SEED     seed of the random schedules (default: from the clock, printed)\n"
            "  -n COUNT    number of random schedules per rank pair (default 10000)\n"
            "  -T SECONDS  deadline of each wait (default 60)\n"
            "  -v          print every random schedule (to stderr)\n"
            "  -O          check that tag-matching offload was used: every rank's worker has it\n"
            "              and its device matched receives (counted as the case 'offload')\n"
            "  -X          check that XRC was used: every rank's worker has initiators and\n"
            "              target QPs, and RC queue pairs too where offload is on (case 'xrc')\n"
            "  -h          this help\n");
}

static int cf_setup(cf_t *cf)
{
    tmx_worker_attr_t attr;
    tmx_status_t      status;

    status = tmx_job_init(&cf->job);
    if (status != TMX_OK) {
        fprintf(stderr, "tmx_conformance: tmx_job_init: %s\n", tmx_status_string(status));
        return -1;
    }
    cf->rank = tmx_job_rank(cf->job);
    cf->size = tmx_job_size(cf->job);
    cf->dst  = (cf->rank + 1) % cf->size;
    cf->src  = (cf->rank + cf->size - 1) % cf->size;
    status   = tmx_context_create(NULL, &cf->context);
    if (status != TMX_OK) {
        fprintf(stderr, "tmx_conformance: tmx_context_create: %s\n", tmx_status_string(status));
        return -1;
    }
    status = tmx_worker_create(cf->context, NULL, &cf->worker);
    if (status != TMX_OK) {
        fprintf(stderr, "tmx_conformance: tmx_worker_create: %s\n", tmx_status_string(status));
        return -1;
    }
    cf->eps = calloc((size_t)cf->size, sizeof(*cf->eps));
    if (cf->eps == NULL) {
        return -1;
    }
    status = tmx_job_connect(cf->job, cf->worker, cf->eps);
    if (status != TMX_OK) {
        fprintf(stderr, "tmx_conformance: tmx_job_connect: %s\n", tmx_status_string(status));
        return -1;
    }
    memset(&attr, 0, sizeof(attr));
    attr.field_mask = TMX_WORKER_ATTR_PEERS;
    status          = tmx_worker_query(cf->worker, &attr);
    if (status != TMX_OK) {
        fprintf(stderr, "tmx_conformance: tmx_worker_query: %s\n", tmx_status_string(status));
        return -1;
    }
    cf->eager_max_self = attr.peer[TMX_PEER_SELF].eager_max;
    cf->eager_max      = attr.peer[TMX_PEER_LOCAL].available ? attr.peer[TMX_PEER_LOCAL].eager_max
                                                             : cf->eager_max_self;
    cf->max_msg        = attr.peer[TMX_PEER_LOCAL].available ? attr.peer[TMX_PEER_LOCAL].max_msg
                                                             : attr.peer[TMX_PEER_SELF].max_msg;
    if (cf->rank == 0) {
        printf("# tmx %s, %d ranks, provider %s device %s, eager_max %zu (self %zu), "
               "max_msg %zu\n",
               tmx_version_string(), cf->size, attr.peer[TMX_PEER_LOCAL].provider,
               attr.peer[TMX_PEER_LOCAL].device, cf->eager_max, cf->eager_max_self, cf->max_msg);
    }
    return 0;
}

static void cf_teardown(cf_t *cf)
{
    if (cf->eps != NULL) {
        for (int r = 0; r < cf->size; r++) {
            if (cf->eps[r] != NULL) {
                (void)tmx_ep_close(cf->eps[r], TMX_EP_CLOSE_FORCE);
            }
        }
        free(cf->eps);
    }
    if (cf->worker != NULL) {
        (void)tmx_worker_destroy(cf->worker);
    }
    if (cf->context != NULL) {
        (void)tmx_context_destroy(cf->context);
    }
    if (cf->job != NULL) {
        tmx_job_finalize(cf->job);
    }
    free(cf->reqs);
    free(cf->bufs);
}

/* -O: the tag-matching offload counters of every rank, summed by rank 0, which prints them;
 * the check fails when a rank's worker has no offload or no device matched anything. */
static int cf_check_offload(cf_t *cf)
{
    enum { N = 9 };
    static const char *const names[N] = {"enabled", "offered", "matched", "unexpected", "syncs",
                                         "sync_reqs", "fallbacks", "forced", "rndv"};
    tmx_worker_attr_t attr = {.field_mask = TMX_WORKER_ATTR_TM};
    uint64_t          mine[N], *all, sum[N];
    int               ok = 1;

    if (tmx_worker_query(cf->worker, &attr) != TMX_OK) {
        memset(&attr.tm, 0, sizeof(attr.tm));
    }
    mine[0] = (uint64_t)attr.tm.enabled;
    mine[1] = attr.tm.offered;
    mine[2] = attr.tm.matched;
    mine[3] = attr.tm.unexpected;
    mine[4] = attr.tm.syncs;
    mine[5] = attr.tm.sync_reqs;
    mine[6] = attr.tm.fallbacks;
    mine[7] = attr.tm.forced;
    mine[8] = attr.tm.rndv;
    all     = calloc((size_t)cf->size, sizeof(mine));
    if (all == NULL || tmx_job_allgather(cf->job, mine, sizeof(mine), all) != 0) {
        free(all);
        fprintf(stderr, "tmx_conformance: offload counters allgather failed\n");
        return CF_FAIL;
    }
    memset(sum, 0, sizeof(sum));
    for (int r = 0; r < cf->size; r++) {
        ok &= all[(size_t)r * N] == 1;
        for (int k = 0; k < N; k++) {
            sum[k] += all[(size_t)r * N + k];
        }
    }
    free(all);
    ok &= sum[2] > 0;
    if (cf->rank == 0) {
        printf("# tag list, all ranks:");
        for (int k = 1; k < N; k++) {
            printf(" %s %" PRIu64, names[k], sum[k]);
        }
        printf("\n");
        if (ok) {
            printf("PASS offload\n");
        } else {
            printf("FAIL offload: %" PRIu64 " of %d ranks offload, the devices matched %" PRIu64
                   " receives\n", sum[0], cf->size, sum[2]);
        }
        fflush(stdout);
    }
    return ok ? CF_PASS : CF_FAIL;
}

/* -X: every rank's worker connected through XRC (its initiators and targets, as the worker
 * query counts them from the device), and, with tag-matching offload on too, kept its RC
 * queue pairs for the tagged stream: a worker that fell back to RC alone, or that dropped
 * offload to use XRC, fails. Rank 0 prints the sums. */
static int cf_check_xrc(cf_t *cf)
{
    enum { N = 8 };
    static const char *const names[N] = {"enabled", "tm", "rc_qps", "ini_qps", "tgt_qps",
                                         "tgt_opened", "rndv_striped", "ok"};
    tmx_worker_attr_t attr = {.field_mask = TMX_WORKER_ATTR_XRC | TMX_WORKER_ATTR_TM};
    uint64_t          mine[N], *all, sum[N];
    int               ok = 1;

    if (tmx_worker_query(cf->worker, &attr) != TMX_OK) {
        memset(&attr.xrc, 0, sizeof(attr.xrc));
        memset(&attr.tm, 0, sizeof(attr.tm));
    }
    mine[0] = (uint64_t)attr.xrc.enabled;
    mine[1] = (uint64_t)attr.tm.enabled;
    mine[2] = attr.xrc.rc_qps;
    mine[3] = attr.xrc.ini_qps;
    mine[4] = attr.xrc.tgt_qps;
    mine[5] = attr.xrc.tgt_opened;
    mine[6] = attr.xrc.rndv_striped;
    mine[7] = attr.xrc.enabled && attr.xrc.ini_qps > 0 &&
              attr.xrc.tgt_qps + attr.xrc.tgt_opened > 0 &&
              (!attr.tm.enabled || attr.xrc.rc_qps > 0);
    all = calloc((size_t)cf->size, sizeof(mine));
    if (all == NULL || tmx_job_allgather(cf->job, mine, sizeof(mine), all) != 0) {
        free(all);
        fprintf(stderr, "tmx_conformance: XRC counters allgather failed\n");
        return CF_FAIL;
    }
    memset(sum, 0, sizeof(sum));
    for (int r = 0; r < cf->size; r++) {
        ok &= all[(size_t)r * N + 7] == 1;
        for (int k = 0; k < N; k++) {
            sum[k] += all[(size_t)r * N + k];
        }
    }
    free(all);
    if (cf->rank == 0) {
        printf("# xrc, all ranks:");
        for (int k = 0; k < N; k++) {
            printf(" %s %" PRIu64, names[k], sum[k]);
        }
        printf("\n");
        if (ok) {
            printf("PASS xrc\n");
        } else {
            printf("FAIL xrc: %" PRIu64 " of %d ranks connected through XRC (with RC queue "
                   "pairs where offload is on)\n", sum[7], cf->size);
        }
        fflush(stdout);
    }
    return ok ? CF_PASS : CF_FAIL;
}

int main(int argc, char **argv)
{
    cf_t        cf;
    const char *only[64];
    int         nonly = 0;
    int         list  = 0;
    int         have_seed = 0;
    int         npass = 0, nfail = 0, nskip = 0;
    int         opt;
    int         expect_offload = 0;
    int         expect_xrc     = 0;
    uint64_t    seeds[2];
    uint64_t   *all_seeds = NULL;

    memset(&cf, 0, sizeof(cf));
    cf.schedules = 10000;
    cf.timeout_s = 60.0;
    while ((opt = getopt(argc, argv, "t:ls:n:T:vOXh")) != -1) {
        switch (opt) {
        case 't':
            if (nonly == (int)(sizeof(only) / sizeof(only[0]))) {
                fprintf(stderr, "tmx_conformance: too many -t\n");
                return 2;
            }
            only[nonly++] = optarg;
            break;
        case 'l': list = 1; break;
        case 'v': cf.verbose = 1; break;
        case 'O': expect_offload = 1; break;
        case 'X': expect_xrc = 1; break;
        case 's':
            cf.seed   = strtoull(optarg, NULL, 0);
            have_seed = 1;
            break;
        case 'n': cf.schedules = strtol(optarg, NULL, 0); break;
        case 'T': cf.timeout_s = strtod(optarg, NULL); break;
        case 'h': cf_usage(stdout); return 0;
        default: cf_usage(stderr); return 2;
        }
    }
    if (optind < argc || cf.schedules < 0 || cf.timeout_s <= 0) {
        cf_usage(stderr);
        return 2;
    }
    if (list) {
        for (size_t i = 0; i < cf_ncases; i++) {
            printf("%-22s %s\n", cf_cases[i].name, cf_cases[i].doc);
        }
        return 0;
    }
    for (int i = 0; i < nonly; i++) {
        size_t k;
        for (k = 0; k < cf_ncases && strcmp(cf_cases[k].name, only[i]) != 0; k++) {
        }
        if (k == cf_ncases) {
            fprintf(stderr, "tmx_conformance: no case named '%s' (-l lists them)\n", only[i]);
            return 2;
        }
    }
    if (cf_setup(&cf) != 0) {
        cf_teardown(&cf);
        return 2;
    }
    /* Every rank must use rank 0's seed: the schedules of a pair are derived from it. */
    if (!have_seed) {
        cf.seed = (uint64_t)time(NULL) ^ ((uint64_t)cf_now() << 20);
    }
    seeds[0]  = cf.seed;
    seeds[1]  = 0;
    all_seeds = calloc((size_t)cf.size, sizeof(seeds));
    if (all_seeds == NULL || tmx_job_allgather(cf.job, seeds, sizeof(seeds), all_seeds) != 0) {
        fprintf(stderr, "tmx_conformance: seed allgather failed\n");
        cf_teardown(&cf);
        return 2;
    }
    cf.seed = all_seeds[0];
    free(all_seeds);
    if (cf.rank == 0) {
        printf("# seed %" PRIu64 " (rerun with -s %" PRIu64 ")\n", cf.seed, cf.seed);
        fflush(stdout);
    }
    for (size_t i = 0; i < cf_ncases; i++) {
        int run = (nonly == 0);
        int result;
        for (int k = 0; k < nonly; k++) {
            run |= (strcmp(cf_cases[i].name, only[k]) == 0);
        }
        if (!run) {
            continue;
        }
        result = cf_run_case(&cf, i);
        npass += (result == CF_PASS);
        nfail += (result == CF_FAIL);
        nskip += (result == CF_SKIP);
    }
    if (expect_offload) {
        int result = cf_check_offload(&cf);
        npass += (result == CF_PASS);
        nfail += (result == CF_FAIL);
    }
    if (expect_xrc) {
        int result = cf_check_xrc(&cf);
        npass += (result == CF_PASS);
        nfail += (result == CF_FAIL);
    }
    if (cf.rank == 0) {
        if (nskip > 0) {
            printf("%d passed, %d failed, %d skipped\n", npass, nfail, nskip);
        } else {
            printf("%d passed, %d failed\n", npass, nfail);
        }
        fflush(stdout);
    }
    (void)tmx_job_barrier(cf.job);
    cf_teardown(&cf);
    return (nfail > 0) ? 1 : 0;
}
