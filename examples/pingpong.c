/*
 * tmx_pingpong: OSU-style latency, bandwidth and message-rate tests between two ranks.
 *
 *   tmxrun -n 2 tmx_pingpong [-t lat|bw|rate|all] [-m min:max] [-n iters] [-w warmup]
 *                            [-W window] [-f table|csv] [-h]
 *
 * Uses only the public API (<tmx/tmx.h>, <tmx/tmx_job.h>) so that it shows what an application
 * sees. Definitions follow the OSU micro-benchmarks (osu_latency, osu_bw, osu_mbw_mr) so the
 * numbers can be put next to an MPI run of bench/osu_pingpong_mpi.c:
 *   latency   = half of the mean round trip of blocking send/recv, in microseconds;
 *   bandwidth = rank 0 posts a window of W non-blocking sends, rank 1 W receives and answers
 *               with a 0-byte ack; bytes / time in MB/s where 1 MB = 10^6 bytes;
 *   rate      = the same window loop counted in messages, in millions of messages per second.
 * Each size starts with one untimed check round whose received bytes are compared with the
 * pattern the peer sent; a wrong byte, length or tag fails the run (exit 1).
 */
#define _GNU_SOURCE
#include <tmx/tmx.h>
#include <tmx/tmx_job.h>

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define PP_EXIT_OK    0
#define PP_EXIT_ERROR 1
#define PP_EXIT_USAGE 2

/* OSU's split between small and large messages: above it, fewer iterations. */
#define PP_LARGE_MSG (8u * 1024u)
/* Largest message we agree to allocate: two buffers of this size per rank. */
#define PP_MAX_SIZE  ((size_t)1 << 30)
#define PP_MAX_WINDOW 4096u

#define PP_TAG_LAT  0x1001u
#define PP_TAG_BW   0x1002u
#define PP_TAG_ACK  0x1003u
#define PP_TAG_MASK (~(tmx_tag_t)0)

enum {
    PP_TEST_LAT  = 1u << 0,
    PP_TEST_BW   = 1u << 1,
    PP_TEST_RATE = 1u << 2,
};

typedef enum { PP_FMT_TABLE, PP_FMT_CSV } pp_format_t;

typedef struct pp_opts {
    unsigned    tests;
    size_t      min_size;
    size_t      max_size;
    long        iters;  /* -1: OSU defaults per test and size */
    long        warmup; /* -1: OSU defaults per test and size */
    unsigned    window;
    pp_format_t format;
    int         median; /* -M: the median half round trip too (perftest's "typical") */
    int         map;    /* -R: buffers registered once (tmx_mem_map) */
} pp_opts_t;

typedef struct pp_ctx {
    const pp_opts_t *opts;
    tmx_job_h        job;
    tmx_context_h    context;
    tmx_worker_h     worker;
    tmx_ep_h        *eps;
    tmx_ep_h         peer_ep;
    tmx_request_h   *reqs;
    int              rank;
    int              size;
    unsigned char   *sbuf;
    unsigned char   *rbuf;
    tmx_mem_h        smem, rmem; /* -R */
    double           lat_median; /* -M: of the last latency test, us */
} pp_ctx_t;

static double pp_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

static void pp_usage(FILE *stream)
{
    fprintf(stream,
            "usage: tmxrun -n 2 tmx_pingpong [options]\n"
            "  -t TESTS    lat, bw, rate, all, or a comma list (default lat,bw)\n"
            "  -m MIN:MAX  message sizes, doubling from MIN (default 1:4M; K, M, G suffixes;\n"
            "              -m MAX alone means 1:MAX; MIN 0 adds a 0-byte row)\n"
            "  -n ITERS    timed iterations per size (default: lat 10000, bw/rate 100;\n"
            "              sizes above 8K use ITERS/10 for lat and ITERS/5 for bw/rate)\n"
            "  -w WARMUP   untimed iterations per size (default: lat 100, bw/rate 10;\n"
            "              sizes above 8K use WARMUP/10 and WARMUP/5)\n"
            "  -W WINDOW   messages in flight in bw/rate (default 64)\n"
            "  -f FORMAT   table or csv (default table)\n"
            "  -M          latency: the median half round trip too (as perftest's typical)\n"
            "  -R          register the buffers once (tmx_mem_map), not per rendezvous message\n"
            "  -h          this help\n"
            "latency: half round trip of blocking send/recv (us); bandwidth: MB/s with\n"
            "1 MB = 10^6 bytes; rate: millions of messages per second.\n");
}

/* Parses "123", "64K", "4M", "1G" (powers of 1024). */
static int pp_parse_size(const char *str, size_t *size_p)
{
    char              *end;
    unsigned long long value;
    unsigned long long scale = 1;
    int                ret   = -1;

    if ((str == NULL) || (*str == '\0') || (*str == '-')) {
        goto out;
    }
    errno = 0;
    value = strtoull(str, &end, 10);
    if ((errno != 0) || (end == str)) {
        goto out;
    }
    switch (*end) {
    case 'k': case 'K': scale = 1ull << 10; end++; break;
    case 'm': case 'M': scale = 1ull << 20; end++; break;
    case 'g': case 'G': scale = 1ull << 30; end++; break;
    default: break;
    }
    if ((*end != '\0') || (value > PP_MAX_SIZE / scale)) {
        goto out;
    }
    *size_p = (size_t)(value * scale);
    ret     = 0;
out:
    return ret;
}

static int pp_parse_long(const char *str, long min, long max, long *value_p)
{
    char *end;
    long  value;
    int   ret = -1;

    errno = 0;
    value = strtol(str, &end, 10);
    if ((errno == 0) && (end != str) && (*end == '\0') && (value >= min) && (value <= max)) {
        *value_p = value;
        ret      = 0;
    }
    return ret;
}

static int pp_parse_tests(const char *str, unsigned *tests_p)
{
    char    *copy  = strdup(str);
    char    *save  = NULL;
    char    *tok;
    unsigned tests = 0;
    int      ret   = -1;

    if (copy == NULL) {
        goto out;
    }
    for (tok = strtok_r(copy, ",", &save); tok != NULL; tok = strtok_r(NULL, ",", &save)) {
        if (strcmp(tok, "lat") == 0) {
            tests |= PP_TEST_LAT;
        } else if (strcmp(tok, "bw") == 0) {
            tests |= PP_TEST_BW;
        } else if (strcmp(tok, "rate") == 0) {
            tests |= PP_TEST_RATE;
        } else if (strcmp(tok, "all") == 0) {
            tests |= PP_TEST_LAT | PP_TEST_BW | PP_TEST_RATE;
        } else {
            goto out_free;
        }
    }
    if (tests != 0) {
        *tests_p = tests;
        ret      = 0;
    }
out_free:
    free(copy);
out:
    return ret;
}

/* Returns 0, PP_EXIT_USAGE after a bad option, or -1 for -h. */
static int pp_parse_opts(int argc, char **argv, pp_opts_t *opts, char *err, size_t errlen)
{
    const char *colon;
    long        value;
    int         c;
    int         ret = 0;

    opts->tests    = PP_TEST_LAT | PP_TEST_BW;
    opts->min_size = 1;
    opts->max_size = 4u << 20;
    opts->iters    = -1;
    opts->warmup   = -1;
    opts->window   = 64;
    opts->format   = PP_FMT_TABLE;
    opts->median   = 0;
    opts->map      = 0;
    err[0]         = '\0';

    opterr = 0;
    while ((ret == 0) && ((c = getopt(argc, argv, ":t:m:n:w:W:f:MRh")) != -1)) {
        switch (c) {
        case 't':
            if (pp_parse_tests(optarg, &opts->tests) != 0) {
                snprintf(err, errlen, "bad test list '%s'", optarg);
                ret = PP_EXIT_USAGE;
            }
            break;
        case 'm':
            colon = strchr(optarg, ':');
            if (colon == NULL) {
                opts->min_size = 1;
                if (pp_parse_size(optarg, &opts->max_size) != 0) {
                    ret = PP_EXIT_USAGE;
                }
            } else {
                char minstr[32];
                size_t n = (size_t)(colon - optarg);

                if ((n == 0) || (n >= sizeof(minstr))) {
                    ret = PP_EXIT_USAGE;
                } else {
                    memcpy(minstr, optarg, n);
                    minstr[n] = '\0';
                    if ((pp_parse_size(minstr, &opts->min_size) != 0) ||
                        (pp_parse_size(colon + 1, &opts->max_size) != 0)) {
                        ret = PP_EXIT_USAGE;
                    }
                }
            }
            if ((ret == 0) && (opts->min_size > opts->max_size)) {
                ret = PP_EXIT_USAGE;
            }
            if (ret != 0) {
                snprintf(err, errlen, "bad size range '%s' (MIN:MAX, at most 1G)", optarg);
            }
            break;
        case 'n':
            if (pp_parse_long(optarg, 1, 100000000L, &opts->iters) != 0) {
                snprintf(err, errlen, "bad iteration count '%s'", optarg);
                ret = PP_EXIT_USAGE;
            }
            break;
        case 'w':
            if (pp_parse_long(optarg, 0, 100000000L, &opts->warmup) != 0) {
                snprintf(err, errlen, "bad warmup count '%s'", optarg);
                ret = PP_EXIT_USAGE;
            }
            break;
        case 'W':
            if (pp_parse_long(optarg, 1, PP_MAX_WINDOW, &value) != 0) {
                snprintf(err, errlen, "bad window '%s' (1..%u)", optarg, PP_MAX_WINDOW);
                ret = PP_EXIT_USAGE;
            } else {
                opts->window = (unsigned)value;
            }
            break;
        case 'f':
            if (strcmp(optarg, "table") == 0) {
                opts->format = PP_FMT_TABLE;
            } else if (strcmp(optarg, "csv") == 0) {
                opts->format = PP_FMT_CSV;
            } else {
                snprintf(err, errlen, "bad format '%s'", optarg);
                ret = PP_EXIT_USAGE;
            }
            break;
        case 'M':
            opts->median = 1;
            break;
        case 'R':
            opts->map = 1;
            break;
        case 'h':
            ret = -1;
            break;
        case ':':
            snprintf(err, errlen, "option -%c needs a value", optopt);
            ret = PP_EXIT_USAGE;
            break;
        default:
            snprintf(err, errlen, "unknown option -%c", optopt);
            ret = PP_EXIT_USAGE;
            break;
        }
    }
    if ((ret == 0) && (optind < argc)) {
        snprintf(err, errlen, "unexpected argument '%s'", argv[optind]);
        ret = PP_EXIT_USAGE;
    }
    return ret;
}

/* Iterations for a test and size: the user's count, or OSU's defaults, fewer for large. */
static long pp_count(long user, long dflt, long large_div, size_t size)
{
    long n = (user >= 0) ? user : dflt;

    if (size > PP_LARGE_MSG) {
        n = (n > 0) ? ((n / large_div > 0) ? n / large_div : 1) : 0;
    }
    return n;
}

/* The byte a sender of rank `rank` puts at offset i of a message of `size` bytes; depends on
 * all three so that a message from the wrong rank, size or offset is caught. */
static inline unsigned char pp_pattern(int rank, size_t size, size_t i)
{
    return (unsigned char)((i * 7u) + (size * 13u) + ((size_t)rank * 101u) + 1u);
}

static void pp_fill(unsigned char *buf, size_t size, int rank)
{
    size_t i;

    for (i = 0; i < size; i++) {
        buf[i] = pp_pattern(rank, size, i);
    }
}

/* 0 when buf holds what `rank` sends for this size; else reports the first bad byte. */
static int pp_verify(const pp_ctx_t *pp, const unsigned char *buf, size_t size, int rank,
                     const tmx_tag_recv_info_t *info, tmx_tag_t tag, const char *test)
{
    size_t i;
    int    ret = 0;

    if ((info->length != size) || (info->tag != tag)) {
        fprintf(stderr,
                "tmx_pingpong: rank %d: %s size %zu: got length %zu tag 0x%" PRIx64
                ", expected length %zu tag 0x%" PRIx64 "\n",
                pp->rank, test, size, info->length, info->tag, size, (uint64_t)tag);
        ret = -1;
        goto out;
    }
    for (i = 0; i < size; i++) {
        if (buf[i] != pp_pattern(rank, size, i)) {
            fprintf(stderr,
                    "tmx_pingpong: rank %d: %s size %zu: wrong data at byte %zu: "
                    "0x%02x, expected 0x%02x\n",
                    pp->rank, test, size, i, buf[i], pp_pattern(rank, size, i));
            ret = -1;
            break;
        }
    }
out:
    return ret;
}

static int pp_fail(const pp_ctx_t *pp, const char *what, tmx_status_t status)
{
    fprintf(stderr, "tmx_pingpong: rank %d: %s failed: %s\n", pp->rank, what,
            tmx_status_string(status));
    return -1;
}

/* Both ranks learn whether either failed, so that neither waits for a peer that gave up. */
static int pp_agree(pp_ctx_t *pp, int ok)
{
    int          all[2] = {0, 0};
    tmx_status_t status;
    int          ret;

    status = tmx_job_allgather(pp->job, &ok, sizeof(ok), all);
    if (status != TMX_OK) {
        ret = pp_fail(pp, "allgather", status);
    } else {
        ret = ((all[0] != 0) && (all[1] != 0)) ? 0 : -1;
    }
    return ret;
}

static int pp_send(pp_ctx_t *pp, const void *buf, size_t size, tmx_tag_t tag)
{
    tmx_status_t status = tmx_tag_send(pp->peer_ep, buf, size, tag);

    return (status == TMX_OK) ? 0 : pp_fail(pp, "send", status);
}

static int pp_recv(pp_ctx_t *pp, void *buf, size_t size, tmx_tag_t tag, tmx_tag_recv_info_t *info)
{
    tmx_tag_recv_info_t dummy;
    tmx_status_t        status;

    status = tmx_tag_recv(pp->worker, buf, size, tag, PP_TAG_MASK, (info != NULL) ? info : &dummy);
    return (status == TMX_OK) ? 0 : pp_fail(pp, "recv", status);
}

/* Waits for and frees reqs[0..count); every one is waited for even after an error. */
static int pp_wait_all(pp_ctx_t *pp, unsigned count, const char *what)
{
    tmx_status_t status;
    unsigned     i;
    int          ret = 0;

    for (i = 0; i < count; i++) {
        if (pp->reqs[i] == NULL) {
            continue;
        }
        status = tmx_request_wait(pp->reqs[i], NULL);
        if ((status != TMX_OK) && (ret == 0)) {
            ret = pp_fail(pp, what, status);
        }
        tmx_request_free(pp->reqs[i]);
        pp->reqs[i] = NULL;
    }
    return ret;
}

/* One non-blocking send; a full queue (TMX_ERR_NO_RESOURCE) is retried after progress. */
static int pp_isend(pp_ctx_t *pp, const void *buf, size_t size, tmx_tag_t tag, tmx_request_h *req)
{
    tmx_request_h request = NULL;
    tmx_status_t  status;
    int           ret = 0;

    do {
        status = tmx_tag_send_nb(pp->peer_ep, buf, size, tag, NULL, &request);
        if (status == TMX_ERR_NO_RESOURCE) {
            tmx_worker_progress(pp->worker);
        }
    } while (status == TMX_ERR_NO_RESOURCE);
    /* TMX_OK: completed in place, there is no request to wait for */
    *req = (status == TMX_INPROGRESS) ? request : NULL;
    if ((status != TMX_OK) && (status != TMX_INPROGRESS)) {
        ret = pp_fail(pp, "non-blocking send", status);
    }
    return ret;
}

static int pp_irecv(pp_ctx_t *pp, void *buf, size_t size, tmx_tag_t tag, tmx_request_h *req)
{
    tmx_request_h request = NULL;
    tmx_status_t  status;
    int           ret = 0;

    status = tmx_tag_recv_nb(pp->worker, buf, size, tag, PP_TAG_MASK, NULL, &request);
    *req   = (status == TMX_INPROGRESS) ? request : NULL;
    if (status != TMX_INPROGRESS) {
        /* the API never completes a receive in place; anything else is an error */
        ret = pp_fail(pp, "non-blocking recv", (status == TMX_OK) ? TMX_ERR_INTERNAL : status);
    }
    return ret;
}

/* Untimed check round of the latency test: each side verifies the one message it receives. */
static int pp_lat_check(pp_ctx_t *pp, size_t size)
{
    tmx_tag_recv_info_t info;
    int                 peer = 1 - pp->rank;
    int                 ret;

    memset(pp->rbuf, 0, size);
    if (pp->rank == 0) {
        ret = pp_send(pp, pp->sbuf, size, PP_TAG_LAT);
        ret = (ret == 0) ? pp_recv(pp, pp->rbuf, size, PP_TAG_LAT, &info) : ret;
    } else {
        ret = pp_recv(pp, pp->rbuf, size, PP_TAG_LAT, &info);
        ret = (ret == 0) ? pp_send(pp, pp->sbuf, size, PP_TAG_LAT) : ret;
    }
    if (ret == 0) {
        ret = pp_agree(pp, pp_verify(pp, pp->rbuf, size, peer, &info, PP_TAG_LAT, "latency") == 0);
    }
    return ret;
}

static int pp_barrier(pp_ctx_t *pp)
{
    tmx_status_t status = tmx_job_barrier(pp->job);

    return (status == TMX_OK) ? 0 : pp_fail(pp, "barrier", status);
}

static int pp_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return (x > y) - (x < y);
}

/* Returns the latency in microseconds (on rank 0), or a negative value on error. With -M,
 * pp->lat_median is the median of the iterations' half round trips (rank 0's clock). */
static double pp_lat(pp_ctx_t *pp, size_t size)
{
    long    iters  = pp_count(pp->opts->iters, 10000, 10, size);
    long    warmup = pp_count(pp->opts->warmup, 100, 10, size);
    double  start  = 0.0;
    double  lat    = -1.0;
    double  t_prev = 0.0;
    double *each   = NULL;
    long    i;
    int     ret;

    if (pp->opts->median && (each = malloc((size_t)iters * sizeof(*each))) == NULL) {
        return pp_fail(pp, "memory for -M", TMX_ERR_NO_MEMORY);
    }
    pp->lat_median = 0.0;
    ret = pp_lat_check(pp, size);
    ret = (ret == 0) ? pp_barrier(pp) : ret;
    for (i = 0; (i < warmup + iters) && (ret == 0); i++) {
        if (i == warmup) {
            start  = pp_now_us();
            t_prev = start;
        } else if ((each != NULL) && (i > warmup)) {
            double t = pp_now_us();
            each[i - warmup - 1] = (t - t_prev) / 2.0;
            t_prev               = t;
        }
        if (pp->rank == 0) {
            ret = pp_send(pp, pp->sbuf, size, PP_TAG_LAT);
            ret = (ret == 0) ? pp_recv(pp, pp->rbuf, size, PP_TAG_LAT, NULL) : ret;
        } else {
            ret = pp_recv(pp, pp->rbuf, size, PP_TAG_LAT, NULL);
            ret = (ret == 0) ? pp_send(pp, pp->sbuf, size, PP_TAG_LAT) : ret;
        }
    }
    if (ret == 0) {
        double end = pp_now_us();
        lat = (end - start) / (2.0 * (double)iters);
        if (each != NULL) {
            each[iters - 1] = (end - t_prev) / 2.0;
            qsort(each, (size_t)iters, sizeof(*each), pp_cmp_double);
            pp->lat_median = each[iters / 2];
        }
    }
    free(each);
    return lat;
}

/* One window: rank 0 sends W messages and waits for the ack; rank 1 receives them (all into
 * the same buffer, as OSU does) and acks with 0 bytes. */
static int pp_bw_window(pp_ctx_t *pp, size_t size)
{
    unsigned w;
    unsigned window = pp->opts->window;
    int      ret    = 0;

    /* the 0-byte ack still passes a valid buffer: a NULL one is the caller's business only
     * when the length is 0, and not every stack agrees that it is */
    if (pp->rank == 0) {
        for (w = 0; (w < window) && (ret == 0); w++) {
            ret = pp_isend(pp, pp->sbuf, size, PP_TAG_BW, &pp->reqs[w]);
        }
        /* wait even after a failed post: the requests already posted own sbuf */
        ret = (pp_wait_all(pp, w, "window send") != 0) ? -1 : ret;
        ret = (ret == 0) ? pp_recv(pp, pp->rbuf, 0, PP_TAG_ACK, NULL) : ret;
    } else {
        for (w = 0; (w < window) && (ret == 0); w++) {
            ret = pp_irecv(pp, pp->rbuf, size, PP_TAG_BW, &pp->reqs[w]);
        }
        ret = (pp_wait_all(pp, w, "window recv") != 0) ? -1 : ret;
        ret = (ret == 0) ? pp_send(pp, pp->sbuf, 0, PP_TAG_ACK) : ret;
    }
    return ret;
}

/* Untimed check round of the window test: rank 1 receives the W messages one by one and checks
 * each, so that a message overwritten by the next one cannot hide a bad one. */
static int pp_bw_check(pp_ctx_t *pp, size_t size)
{
    tmx_tag_recv_info_t info;
    unsigned            w;
    int                 ok  = 1;
    int                 ret = 0;

    if (pp->rank == 0) {
        ret = pp_bw_window(pp, size);
    } else {
        for (w = 0; (w < pp->opts->window) && (ret == 0); w++) {
            memset(pp->rbuf, 0, size);
            ret = pp_recv(pp, pp->rbuf, size, PP_TAG_BW, &info);
            if ((ret == 0) && ok &&
                (pp_verify(pp, pp->rbuf, size, 0, &info, PP_TAG_BW, "bandwidth") != 0)) {
                ok = 0;
            }
        }
        ret = (ret == 0) ? pp_send(pp, pp->sbuf, 0, PP_TAG_ACK) : ret;
    }
    return (ret == 0) ? pp_agree(pp, ok) : ret;
}

/* Returns the seconds per window (on rank 0), or a negative value on error. */
static double pp_bw(pp_ctx_t *pp, size_t size)
{
    long   iters  = pp_count(pp->opts->iters, 100, 5, size);
    long   warmup = pp_count(pp->opts->warmup, 10, 5, size);
    double start  = 0.0;
    double sec    = -1.0;
    long   i;
    int    ret;

    ret = pp_bw_check(pp, size);
    ret = (ret == 0) ? pp_barrier(pp) : ret;
    for (i = 0; (i < warmup + iters) && (ret == 0); i++) {
        if (i == warmup) {
            start = pp_now_us();
        }
        ret = pp_bw_window(pp, size);
    }
    if (ret == 0) {
        sec = (pp_now_us() - start) * 1e-6 / (double)iters;
    }
    return sec;
}

static void pp_print_header(const pp_ctx_t *pp)
{
    const pp_opts_t      *o = pp->opts;
    tmx_worker_attr_t     attr;
    tmx_peer_class_attr_t *peer = &attr.peer[TMX_PEER_LOCAL];
    const char            *csv  = (o->format == PP_FMT_CSV) ? "csv" : "table";

    memset(&attr, 0, sizeof(attr));
    attr.field_mask = TMX_WORKER_ATTR_PEERS | TMX_WORKER_ATTR_TM;
    printf("# tmx_pingpong (libtmx %s), 2 ranks, format %s\n", tmx_version_string(), csv);
    if (tmx_worker_query(pp->worker, &attr) != TMX_OK) {
        printf("# device: unknown (tmx_worker_query failed)\n");
    } else if (!peer->available) {
        printf("# device: none reported for local peers\n");
    } else {
        printf("# provider %s, device %s, protocol %s\n", peer->provider, peer->device,
               peer->protocol);
        printf("# eager threshold %zu B (eager up to %zu B, rendezvous from %zu B)\n",
               peer->eager_max, peer->eager_max, peer->rndv_threshold);
        if (attr.tm.enabled) {
            printf("# tag matching offloaded to %s (receives from %zu B, rendezvous %s)\n",
                   attr.tm.device, attr.tm.thresh,
                   attr.tm.rndv_offload ? "offloaded" : "in software");
        } else {
            printf("# tag matching in software\n");
        }
    }
    if (o->tests & PP_TEST_LAT) {
        printf("# latency: half round trip of blocking send/recv, us\n");
    }
    if (o->tests & PP_TEST_BW) {
        printf("# bandwidth: window of %u non-blocking sends, then a 0-byte ack; "
               "MB/s, 1 MB = 10^6 bytes\n", o->window);
    }
    if (o->tests & PP_TEST_RATE) {
        printf("# rate: window of %u non-blocking sends, then a 0-byte ack; "
               "millions of messages/s\n", o->window);
    }
    if (o->format == PP_FMT_CSV) {
        printf("size");
        if (o->tests & PP_TEST_LAT) {
            printf(",latency_us");
        }
        if (o->tests & PP_TEST_BW) {
            printf(",bandwidth_MBps");
        }
        if (o->tests & PP_TEST_RATE) {
            printf(",rate_Mmsgps");
        }
        if ((o->tests & PP_TEST_LAT) && o->median) {
            printf(",latency_median_us");
        }
    } else {
        printf("%-12s", "# Size");
        if (o->tests & PP_TEST_LAT) {
            printf("%16s", "Latency(us)");
        }
        if (o->tests & PP_TEST_BW) {
            printf("%18s", "Bandwidth(MB/s)");
        }
        if (o->tests & PP_TEST_RATE) {
            printf("%16s", "Rate(Mmsg/s)");
        }
        if ((o->tests & PP_TEST_LAT) && o->median) {
            printf("%16s", "Median(us)");
        }
    }
    printf("\n");
    fflush(stdout);
}

static void pp_print_row(const pp_ctx_t *pp, size_t size, double lat, double win_sec)
{
    const pp_opts_t *o    = pp->opts;
    double           msgs = (double)o->window;
    int              csv  = (o->format == PP_FMT_CSV);

    printf(csv ? "%zu" : "%-12zu", size);
    if (o->tests & PP_TEST_LAT) {
        printf(csv ? ",%.3f" : "%16.2f", lat);
    }
    if (o->tests & PP_TEST_BW) {
        printf(csv ? ",%.2f" : "%18.2f", (double)size * msgs / win_sec / 1e6);
    }
    if (o->tests & PP_TEST_RATE) {
        printf(csv ? ",%.4f" : "%16.4f", msgs / win_sec / 1e6);
    }
    if ((o->tests & PP_TEST_LAT) && o->median) {
        printf(csv ? ",%.3f" : "%16.2f", pp->lat_median);
    }
    printf("\n");
    fflush(stdout);
}

/* With tag-matching offload: what the devices of both ranks did, so that a table is not read
 * as offloaded when the receives stayed in software. */
static int pp_print_tm(pp_ctx_t *pp)
{
    tmx_worker_attr_t attr;
    uint64_t          mine[4], all[8];

    memset(&attr, 0, sizeof(attr));
    attr.field_mask = TMX_WORKER_ATTR_TM;
    if (tmx_worker_query(pp->worker, &attr) != TMX_OK || !attr.tm.enabled) {
        return 0;
    }
    mine[0] = attr.tm.offered;
    mine[1] = attr.tm.matched;
    mine[2] = attr.tm.unexpected;
    mine[3] = attr.tm.fallbacks;
    if (tmx_job_allgather(pp->job, mine, sizeof(mine), all) != TMX_OK) {
        return pp_fail(pp, "allgather", TMX_ERR_IO);
    }
    if (pp->rank == 0) {
        for (int r = 0; r < 2; r++) {
            printf("# tag list of rank %d: %" PRIu64 " receives offered, %" PRIu64
                   " matched by the device, %" PRIu64 " messages unexpected, %" PRIu64
                   " refused by the device\n", r, all[4 * r], all[4 * r + 1], all[4 * r + 2],
                   all[4 * r + 3]);
        }
        fflush(stdout);
    }
    return 0;
}

static int pp_run(pp_ctx_t *pp)
{
    const pp_opts_t *o = pp->opts;
    size_t           size = o->min_size;
    double           lat;
    double           win;
    int              more = 1;
    int              ret  = 0;

    if (pp->rank == 0) {
        pp_print_header(pp);
    }
    while (more && (ret == 0)) {
        /* the pattern depends on the size, so the send buffer is refilled per size */
        pp_fill(pp->sbuf, size, pp->rank);
        lat = 0.0;
        win = 0.0;
        if ((o->tests & PP_TEST_LAT) && ((lat = pp_lat(pp, size)) < 0.0)) {
            ret = -1;
        } else if ((o->tests & (PP_TEST_BW | PP_TEST_RATE)) && ((win = pp_bw(pp, size)) < 0.0)) {
            ret = -1;
        } else if (pp->rank == 0) {
            pp_print_row(pp, size, lat, win);
        }
        /* doubling; 0 is followed by 1, and the test avoids overflowing size */
        more = (size < o->max_size) && ((size == 0) || (size <= o->max_size / 2));
        size = (size == 0) ? 1 : size * 2;
    }
    if (ret == 0) {
        ret = pp_print_tm(pp);
    }
    return ret;
}

/* The largest size asked for must fit what the device sends to a local peer. */
static int pp_check_max_msg(pp_ctx_t *pp)
{
    tmx_worker_attr_t attr;
    size_t            max_msg;
    int               ret = 0;

    memset(&attr, 0, sizeof(attr));
    attr.field_mask = TMX_WORKER_ATTR_PEERS;
    if (tmx_worker_query(pp->worker, &attr) == TMX_OK) {
        max_msg = attr.peer[TMX_PEER_LOCAL].max_msg;
        if ((max_msg > 0) && (pp->opts->max_size > max_msg)) {
            fprintf(stderr, "tmx_pingpong: rank %d: size %zu exceeds the largest message %zu of "
                            "device %s\n", pp->rank, pp->opts->max_size, max_msg,
                    attr.peer[TMX_PEER_LOCAL].device);
            ret = -1;
        }
    }
    return ret;
}

/* Whatever it creates before a failure is released by pp_cleanup. */
static int pp_setup(pp_ctx_t *pp)
{
    size_t       bufsize = (pp->opts->max_size > 0) ? pp->opts->max_size : 1;
    tmx_status_t status;
    int          ret = -1;

    status = tmx_context_create(NULL, &pp->context);
    if (status != TMX_OK) {
        pp_fail(pp, "context create", status);
        goto out;
    }
    status = tmx_worker_create(pp->context, NULL, &pp->worker);
    if (status != TMX_OK) {
        pp_fail(pp, "worker create", status);
        goto out;
    }
    pp->eps  = calloc((size_t)pp->size, sizeof(*pp->eps));
    pp->reqs = calloc(pp->opts->window, sizeof(*pp->reqs));
    if ((pp->eps == NULL) || (pp->reqs == NULL) ||
        (posix_memalign((void **)&pp->sbuf, 4096, bufsize) != 0) ||
        (posix_memalign((void **)&pp->rbuf, 4096, bufsize) != 0)) {
        pp_fail(pp, "allocation", TMX_ERR_NO_MEMORY);
        goto out;
    }
    if (pp->opts->map &&
        (((status = tmx_mem_map(pp->worker, pp->sbuf, bufsize, &pp->smem)) != TMX_OK) ||
         ((status = tmx_mem_map(pp->worker, pp->rbuf, bufsize, &pp->rmem)) != TMX_OK))) {
        pp_fail(pp, "tmx_mem_map", status);
        goto out;
    }
    status = tmx_job_connect(pp->job, pp->worker, pp->eps);
    if (status != TMX_OK) {
        pp_fail(pp, "connect", status);
        goto out;
    }
    pp->peer_ep = pp->eps[1 - pp->rank];
    if (pp_check_max_msg(pp) != 0) {
        goto out;
    }
    ret = 0;
out:
    return ret;
}

static void pp_cleanup(pp_ctx_t *pp)
{
    tmx_status_t status;
    int          r;

    if (pp->eps != NULL) {
        for (r = 0; r < pp->size; r++) {
            if (pp->eps[r] == NULL) {
                continue;
            }
            status = tmx_ep_close(pp->eps[r], TMX_EP_CLOSE_FLUSH);
            if (status != TMX_OK) {
                pp_fail(pp, "endpoint close", status);
            }
        }
        free(pp->eps);
    }
    if (pp->smem != NULL) {
        tmx_mem_unmap(pp->smem);
    }
    if (pp->rmem != NULL) {
        tmx_mem_unmap(pp->rmem);
    }
    if (pp->worker != NULL) {
        tmx_worker_destroy(pp->worker);
    }
    if (pp->context != NULL) {
        tmx_context_destroy(pp->context);
    }
    free(pp->reqs);
    free(pp->sbuf);
    free(pp->rbuf);
}

int main(int argc, char **argv)
{
    pp_opts_t    opts;
    pp_ctx_t     pp;
    char         err[160];
    tmx_status_t status;
    int          parsed;
    int          ret = PP_EXIT_ERROR;

    memset(&pp, 0, sizeof(pp));
    pp.opts = &opts;
    parsed  = pp_parse_opts(argc, argv, &opts, err, sizeof(err));

    /* joined even for bad options, so that only rank 0 prints the usage */
    status = tmx_job_init(&pp.job);
    if (status == TMX_OK) {
        pp.rank = tmx_job_rank(pp.job);
        pp.size = tmx_job_size(pp.job);
    } else {
        pp.job = NULL;
        if (parsed == 0) {
            fprintf(stderr, "tmx_pingpong: joining the job failed: %s (run under tmxrun -n 2)\n",
                    tmx_status_string(status));
            goto out;
        }
    }
    if (parsed != 0) {
        if (pp.rank == 0) {
            if (parsed < 0) {
                pp_usage(stdout);
            } else {
                fprintf(stderr, "tmx_pingpong: %s\n", err);
                pp_usage(stderr);
            }
        }
        ret = (parsed < 0) ? PP_EXIT_OK : PP_EXIT_USAGE;
        goto out_wait;
    }
    if (pp.size != 2) {
        if (pp.rank == 0) {
            fprintf(stderr, "tmx_pingpong: needs exactly 2 ranks, got %d "
                            "(run as: tmxrun -n 2 tmx_pingpong)\n", pp.size);
        }
        goto out_wait;
    }
    if ((pp_setup(&pp) != 0) || (pp_run(&pp) != 0)) {
        goto out_cleanup;
    }
    /* the peer may still be flushing its last message; close only when both are done */
    if (pp_barrier(&pp) != 0) {
        goto out_cleanup;
    }
    ret = PP_EXIT_OK;
out_cleanup:
    pp_cleanup(&pp);
    goto out_job;
out_wait:
    /* tmxrun stops the whole job when one rank exits with an error: the others wait until
     * rank 0 has said why */
    if (pp.job != NULL) {
        (void)tmx_job_barrier(pp.job);
    }
out_job:
    if (pp.job != NULL) {
        tmx_job_finalize(pp.job);
    }
out:
    return ret;
}
