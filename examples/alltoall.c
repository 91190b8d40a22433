/*
 * tmx_alltoall: an all-to-all of tagged messages between every pair of ranks of a job.
 *
 *   tmxrun -n N tmx_alltoall [-m size] [-n rounds] [-w warmup] [-T launch_ns] [-H ms] [-h]
 *
 * Uses only the public API (<tmx/tmx.h>, <tmx/tmx_job.h>). bench/alltoall_mpi.c is the same
 * program written with MPI, line for line, and prints the same lines, so that
 * bench/alltoall.sh can set one next to the other. A round: every rank posts a receive from
 * every other rank (tag = round << 32 | source), sends one message to every other rank
 * (starting with its right neighbour, so that no rank is sent to by all at once), and waits
 * for all of them (tmx_request_wait on each, in order: the library's own waiting, as an
 * application would use it). Every payload depends on source, destination, round and offset
 * and is checked byte by byte after the round, with its tag and length.
 *
 * The first round starts right after tmx_job_connect, without a barrier: its end at rank 0
 * is the start-up time (-T). Every later round starts after a barrier made of tmx messages
 * (a dissemination barrier of empty messages, as MPI_Barrier is made of the MPI library's
 * own messages in the MPI twin; tmx_job_barrier goes through the launcher, whose scheduling
 * on an oversubscribed machine would dominate the time); rank 0 times the round from the end
 * of the barrier until its own receives and sends are complete. Warm-up
 * rounds (the first included) are not reported. After the last round every rank reads its
 * /proc/self/smaps_rollup, rank 0 prints the sums over the job, and with -H every rank waits
 * that many milliseconds before tearing down (for an outside sampler of /dev/shm).
 *
 * Output (rank 0; other ranks print only errors): '#' lines, then
 *   result ranks=N size=B rounds=R warmup=W median_us=.. min_us=.. max_us=..
 *   memory ranks=N rss_kib=.. pss_kib=.. pss_anon_kib=.. pss_file_kib=.. pss_shmem_kib=..
 *          max_rank_pss_shmem_kib=.. unreadable=K   (K ranks lacked a field: counted 0)
 *   startup init_ms=.. first_round_ms=..          (with -T)
 *   loop ranks=N loop_us=.. vcsw=.. ivcsw=.. cpu_us=..
 *          per timed round: rank 0's wall time of the timed rounds (barriers and payload
 *          fills included: what an application gets), and the job's sums over its ranks of
 *          voluntary and involuntary context switches and processor time (us) in them
 * Exit 0, 1 on an error or a wrong message, 2 on a usage error.
 */
#define _GNU_SOURCE
#include <tmx/tmx.h>
#include <tmx/tmx_job.h>

#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#define A2A_EXIT_OK    0
#define A2A_EXIT_ERROR 1
#define A2A_EXIT_USAGE 2

#define A2A_MAX_SIZE   ((size_t)64 << 20)
#define A2A_MAX_ROUNDS 1000000L
/* The fields of smaps_rollup summed over the job, in this order. */
#define A2A_NMEM       5

static const char *const a2a_mem_keys[A2A_NMEM] = {"Rss:", "Pss:", "Pss_Anon:", "Pss_File:",
                                                   "Pss_Shmem:"};

static int a2a_rank = -1;

#define A2A_CHECK(call)                                                                           \
    do {                                                                                           \
        tmx_status_t s_ = (call);                                                                  \
        if (s_ < 0) {                                                                              \
            fprintf(stderr, "tmx_alltoall: rank %d: %s: %s\n", a2a_rank, #call,                   \
                    tmx_status_string(s_));                                                        \
            exit(A2A_EXIT_ERROR);                                                                  \
        }                                                                                          \
    } while (0)

typedef struct a2a_opts {
    size_t size;
    long   rounds;
    long   warmup;
    long   hold_ms;
    double launch_ns; /* CLOCK_REALTIME of the launch, ns since the epoch; 0: not given */
} a2a_opts_t;

static double a2a_now_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

static double a2a_wall_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* The timed rounds' load-independent cost at one rank: its voluntary and involuntary context
 * switches and CPU time (user + system, us), from getrusage. */
#define A2A_NUSE 3

static void a2a_read_usage(int64_t use[A2A_NUSE])
{
    struct rusage ru;

    if (getrusage(RUSAGE_SELF, &ru) != 0) {
        use[0] = use[1] = use[2] = 0;
        return;
    }
    use[0] = ru.ru_nvcsw;
    use[1] = ru.ru_nivcsw;
    use[2] = (int64_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000 + ru.ru_utime.tv_usec +
             ru.ru_stime.tv_usec;
}

static void a2a_usage(FILE *stream)
{
    fprintf(stream,
            "usage: tmxrun -n N tmx_alltoall [options]\n"
            "  -m SIZE     bytes of each message (default 1K; K, M suffixes; at most 64M)\n"
            "  -n ROUNDS   timed rounds (default 20)\n"
            "  -w WARMUP   untimed rounds before them, the first included (default 3, at least 1)\n"
            "  -T NS       the launch time, CLOCK_REALTIME in ns since the epoch (date +%%s%%N):\n"
            "              print the start-up times measured from it\n"
            "  -H MS       after the memory report, every rank waits MS milliseconds\n"
            "  -h          this help\n"
            "time per round: rank 0, from the end of a barrier to all its messages complete.\n");
}

static int a2a_parse_long(const char *str, long min, long max, long *value_p)
{
    char *end;
    long  value;

    errno = 0;
    value = strtol(str, &end, 10);
    if ((errno != 0) || (end == str) || (*end != '\0') || (value < min) || (value > max)) {
        return -1;
    }
    *value_p = value;
    return 0;
}

static int a2a_parse_size(const char *str, size_t *size_p)
{
    unsigned long long value, scale = 1;
    char              *end;

    if ((*str < '0') || (*str > '9')) {
        return -1;
    }
    errno = 0;
    value = strtoull(str, &end, 10);
    if (errno != 0) {
        return -1;
    }
    if ((*end == 'k') || (*end == 'K')) {
        scale = 1ull << 10;
        end++;
    } else if ((*end == 'm') || (*end == 'M')) {
        scale = 1ull << 20;
        end++;
    }
    if ((*end != '\0') || (value > A2A_MAX_SIZE / scale)) {
        return -1;
    }
    *size_p = (size_t)(value * scale);
    return 0;
}

/* Returns 0, A2A_EXIT_USAGE after a bad option (message in err), or -1 for -h. */
static int a2a_parse_opts(int argc, char **argv, a2a_opts_t *opts, char *err, size_t errlen)
{
    char *end;
    long  value;
    int   c, ret = 0;

    opts->size      = 1024;
    opts->rounds    = 20;
    opts->warmup    = 3;
    opts->hold_ms   = 0;
    opts->launch_ns = 0;
    opterr          = 0;
    while ((ret == 0) && ((c = getopt(argc, argv, ":m:n:w:T:H:h")) != -1)) {
        switch (c) {
        case 'm':
            if (a2a_parse_size(optarg, &opts->size) != 0) {
                snprintf(err, errlen, "bad message size '%s' (at most 64M)", optarg);
                ret = A2A_EXIT_USAGE;
            }
            break;
        case 'n':
            if (a2a_parse_long(optarg, 1, A2A_MAX_ROUNDS, &opts->rounds) != 0) {
                snprintf(err, errlen, "bad round count '%s'", optarg);
                ret = A2A_EXIT_USAGE;
            }
            break;
        case 'w':
            if (a2a_parse_long(optarg, 1, A2A_MAX_ROUNDS, &opts->warmup) != 0) {
                snprintf(err, errlen, "bad warm-up count '%s' (at least 1)", optarg);
                ret = A2A_EXIT_USAGE;
            }
            break;
        case 'H':
            if (a2a_parse_long(optarg, 0, 3600000L, &value) != 0) {
                snprintf(err, errlen, "bad hold time '%s' (milliseconds)", optarg);
                ret = A2A_EXIT_USAGE;
            } else {
                opts->hold_ms = value;
            }
            break;
        case 'T':
            errno           = 0;
            opts->launch_ns = strtod(optarg, &end);
            if ((errno != 0) || (end == optarg) || (*end != '\0') || !(opts->launch_ns > 0)) {
                snprintf(err, errlen, "bad launch time '%s' (ns since the epoch)", optarg);
                ret = A2A_EXIT_USAGE;
            }
            break;
        case 'h':
            ret = -1;
            break;
        case ':':
            snprintf(err, errlen, "option -%c needs a value", optopt);
            ret = A2A_EXIT_USAGE;
            break;
        default:
            snprintf(err, errlen, "unknown option -%c", optopt);
            ret = A2A_EXIT_USAGE;
            break;
        }
    }
    if ((ret == 0) && (optind < argc)) {
        snprintf(err, errlen, "unexpected argument '%s'", argv[optind]);
        ret = A2A_EXIT_USAGE;
    }
    return ret;
}

/* A dissemination barrier of empty tmx messages (tags with the top bit set, which round tags
 * never have): in step k every rank sends to rank + 2^k and receives from rank - 2^k. */
static void a2a_barrier(tmx_worker_h worker, tmx_ep_h *eps, int size, long r)
{
    for (int k = 1, step = 0; k < size; k <<= 1, step++) {
        tmx_tag_t     tag  = (tmx_tag_t)1 << 63 | (tmx_tag_t)r << 8 | (tmx_tag_t)step;
        tmx_request_h rreq = NULL, sreq = NULL;
        char          b    = 0;

        A2A_CHECK(tmx_tag_recv_nb(worker, &b, 0, tag, ~(tmx_tag_t)0, NULL, &rreq));
        A2A_CHECK(tmx_tag_send_nb(eps[(a2a_rank + k) % size], &b, 0, tag, NULL, &sreq));
        if (sreq != NULL) {
            A2A_CHECK(tmx_request_wait(sreq, NULL));
            tmx_request_free(sreq);
        }
        if (rreq != NULL) {
            A2A_CHECK(tmx_request_wait(rreq, NULL));
            tmx_request_free(rreq);
        }
    }
}

/* The byte at offset i of the message from src to dst in round r: depends on all four, so
 * that a message from the wrong rank, to the wrong rank, of another round or shifted is
 * caught. The same function is in bench/alltoall_mpi.c. */
static inline unsigned char a2a_pattern(int src, int dst, long r, size_t i)
{
    uint32_t x = (uint32_t)src * 0x9e3779b1u ^ (uint32_t)dst * 0x85ebca77u ^
                 (uint32_t)r * 0xc2b2ae3du ^ (uint32_t)i * 0x27d4eb2fu;

    x ^= x >> 15;
    x *= 0x2c1b3c6du;
    x ^= x >> 12;
    return (unsigned char)x;
}

/* 0 when buf is the message from src to dst of round r; else reports the first bad byte. */
static int a2a_verify(const unsigned char *buf, size_t size, int src, int dst, long r)
{
    for (size_t i = 0; i < size; i++) {
        if (buf[i] != a2a_pattern(src, dst, r, i)) {
            fprintf(stderr,
                    "tmx_alltoall: rank %d: round %ld: message from rank %d: byte %zu is 0x%02x, "
                    "expected 0x%02x\n",
                    dst, r, src, i, buf[i], a2a_pattern(src, dst, r, i));
            return -1;
        }
    }
    return 0;
}

/* This process's smaps_rollup fields of a2a_mem_keys in KiB; -1 where unreadable. */
static void a2a_read_mem(int64_t kib[A2A_NMEM])
{
    char  line[256];
    FILE *f = fopen("/proc/self/smaps_rollup", "r");

    for (int k = 0; k < A2A_NMEM; k++) {
        kib[k] = -1;
    }
    if (f == NULL) {
        return;
    }
    while (fgets(line, sizeof(line), f) != NULL) {
        for (int k = 0; k < A2A_NMEM; k++) {
            size_t n = strlen(a2a_mem_keys[k]);
            if (strncmp(line, a2a_mem_keys[k], n) == 0) {
                kib[k] = strtoll(line + n, NULL, 10);
            }
        }
    }
    fclose(f);
}

static int a2a_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    a2a_opts_t           opts;
    char                 err[160] = "";
    tmx_job_h            job;
    tmx_context_h        ctx;
    tmx_worker_h         worker;
    tmx_ep_h            *eps;
    tmx_request_h       *reqs;
    tmx_tag_recv_info_t *infos;
    unsigned char       *sbuf, *rbuf;
    double              *times, t_init = 0, t_first = 0, t_loop = 0;
    int64_t              use0[A2A_NUSE], use[A2A_NUSE], *all_use;
    int64_t              mem[A2A_NMEM], *all_mem;
    int                  size, errors = 0, ret;

    ret = a2a_parse_opts(argc, argv, &opts, err, sizeof(err));
    if (ret < 0) {
        a2a_usage(stdout);
        return A2A_EXIT_OK;
    } else if (ret != 0) {
        fprintf(stderr, "tmx_alltoall: %s\n", err);
        a2a_usage(stderr);
        return A2A_EXIT_USAGE;
    }

    A2A_CHECK(tmx_job_init(&job));
    a2a_rank = tmx_job_rank(job);
    size     = tmx_job_size(job);
    A2A_CHECK(tmx_context_create(NULL, &ctx));
    A2A_CHECK(tmx_worker_create(ctx, NULL, &worker));
    eps     = calloc((size_t)size, sizeof(*eps));
    reqs    = calloc(2 * (size_t)size, sizeof(*reqs));
    infos   = calloc((size_t)size, sizeof(*infos));
    sbuf    = malloc((size_t)size * (opts.size ? opts.size : 1));
    rbuf    = malloc((size_t)size * (opts.size ? opts.size : 1));
    times   = calloc((size_t)opts.rounds, sizeof(*times));
    all_mem = calloc((size_t)size * A2A_NMEM, sizeof(*all_mem));
    all_use = calloc((size_t)size * A2A_NUSE, sizeof(*all_use));
    if ((eps == NULL) || (reqs == NULL) || (infos == NULL) || (sbuf == NULL) || (rbuf == NULL) ||
        (times == NULL) || (all_mem == NULL) || (all_use == NULL)) {
        fprintf(stderr, "tmx_alltoall: rank %d: out of memory\n", a2a_rank);
        return A2A_EXIT_ERROR;
    }
    A2A_CHECK(tmx_job_connect(job, worker, eps));
    t_init = a2a_wall_ns();

    for (long r = 0; r < opts.warmup + opts.rounds; r++) {
        double t0;

        if (r == opts.warmup) {
            a2a_read_usage(use0);
            t_loop = a2a_now_us();
        }

        for (int k = 1; k < size; k++) {
            int dst = (a2a_rank + k) % size, src = (a2a_rank + size - k) % size;
            for (size_t i = 0; i < opts.size; i++) {
                sbuf[(size_t)dst * opts.size + i] = a2a_pattern(a2a_rank, dst, r, i);
            }
            memset(rbuf + (size_t)src * opts.size, 0xee, opts.size);
        }
        if (r > 0) {
            a2a_barrier(worker, eps, size, r);
        }
        t0 = a2a_now_us();
        for (int src = 0; src < size; src++) {
            if (src == a2a_rank) {
                continue;
            }
            A2A_CHECK(tmx_tag_recv_nb(worker, rbuf + (size_t)src * opts.size, opts.size,
                                      (tmx_tag_t)r << 32 | (tmx_tag_t)src, ~(tmx_tag_t)0, NULL,
                                      &reqs[src]));
        }
        for (int k = 1; k < size; k++) {
            int dst = (a2a_rank + k) % size;
            A2A_CHECK(tmx_tag_send_nb(eps[dst], sbuf + (size_t)dst * opts.size, opts.size,
                                      (tmx_tag_t)r << 32 | (tmx_tag_t)a2a_rank, NULL,
                                      &reqs[size + dst]));
        }
        for (int i = 0; i < 2 * size; i++) {
            if (reqs[i] != NULL) {
                A2A_CHECK(tmx_request_wait(reqs[i], (i < size) ? &infos[i] : NULL));
                tmx_request_free(reqs[i]);
                reqs[i] = NULL;
            }
        }
        if (r >= opts.warmup) {
            times[r - opts.warmup] = a2a_now_us() - t0;
        } else if (r == 0) {
            t_first = a2a_wall_ns();
        }
        for (int src = 0; src < size; src++) {
            tmx_tag_t tag = (tmx_tag_t)r << 32 | (tmx_tag_t)src;
            if (src == a2a_rank) {
                continue;
            }
            if ((infos[src].length != opts.size) || (infos[src].tag != tag)) {
                fprintf(stderr,
                        "tmx_alltoall: rank %d: round %ld: message from rank %d: length %zu tag "
                        "0x%" PRIx64 ", expected %zu and 0x%" PRIx64 "\n",
                        a2a_rank, r, src, infos[src].length, (uint64_t)infos[src].tag, opts.size,
                        (uint64_t)tag);
                errors++;
            } else if (a2a_verify(rbuf + (size_t)src * opts.size, opts.size, src, a2a_rank, r) !=
                       0) {
                errors++;
            }
        }
        if (errors > 0) {
            return A2A_EXIT_ERROR;
        }
    }

    t_loop = a2a_now_us() - t_loop;
    a2a_read_usage(use);
    for (int k = 0; k < A2A_NUSE; k++) {
        use[k] -= use0[k];
    }
    A2A_CHECK(tmx_job_allgather(job, use, sizeof(use), all_use));

    /* Memory while every connection still exists: the measured phase. */
    a2a_read_mem(mem);
    A2A_CHECK(tmx_job_allgather(job, mem, sizeof(mem), all_mem));
    if (a2a_rank == 0) {
        int64_t sum[A2A_NMEM] = {0}, max_shmem = 0;
        int     missing       = 0;

        for (int p = 0; p < size; p++) {
            int bad = 0;
            for (int k = 0; k < A2A_NMEM; k++) {
                int64_t v = all_mem[p * A2A_NMEM + k];
                bad |= (v < 0);
                sum[k] += (v > 0) ? v : 0;
            }
            missing += bad;
            if (all_mem[p * A2A_NMEM + 4] > max_shmem) {
                max_shmem = all_mem[p * A2A_NMEM + 4];
            }
        }
        qsort(times, (size_t)opts.rounds, sizeof(*times), a2a_cmp_double);
        printf("# tmx_alltoall: %d ranks, %zu B per message, %ld rounds after %ld warm-up\n", size,
               opts.size, opts.rounds, opts.warmup);
        printf("# time per round in us at rank 0 (barrier, then all receives and sends of the "
               "round complete)\n");
        printf("# memory: sums over the ranks of /proc/<pid>/smaps_rollup after the last round, "
               "KiB%s\n",
               (missing > 0) ? " (unreadable: ranks without some field; those count 0)" : "");
        printf("result ranks=%d size=%zu rounds=%ld warmup=%ld median_us=%.1f min_us=%.1f "
               "max_us=%.1f\n",
               size, opts.size, opts.rounds, opts.warmup,
               (opts.rounds % 2) ? times[opts.rounds / 2]
                                 : (times[opts.rounds / 2 - 1] + times[opts.rounds / 2]) / 2,
               times[0], times[opts.rounds - 1]);
        printf("memory ranks=%d rss_kib=%" PRId64 " pss_kib=%" PRId64 " pss_anon_kib=%" PRId64
               " pss_file_kib=%" PRId64 " pss_shmem_kib=%" PRId64
               " max_rank_pss_shmem_kib=%" PRId64 " unreadable=%d\n",
               size, sum[0], sum[1], sum[2], sum[3], sum[4], max_shmem, missing);
        {
            int64_t tot[A2A_NUSE] = {0};

            for (int p = 0; p < size; p++) {
                for (int k = 0; k < A2A_NUSE; k++) {
                    tot[k] += all_use[p * A2A_NUSE + k];
                }
            }
            printf("loop ranks=%d loop_us=%.1f vcsw=%.1f ivcsw=%.1f cpu_us=%.1f\n", size,
                   t_loop / (double)opts.rounds, (double)tot[0] / (double)opts.rounds,
                   (double)tot[1] / (double)opts.rounds, (double)tot[2] / (double)opts.rounds);
        }
        if (opts.launch_ns > 0) {
            printf("startup init_ms=%.1f first_round_ms=%.1f\n",
                   (t_init - opts.launch_ns) / 1e6, (t_first - opts.launch_ns) / 1e6);
        }
        fflush(stdout);
    }
    if (opts.hold_ms > 0) {
        struct timespec ts = {opts.hold_ms / 1000, (opts.hold_ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
    }

    /* Nobody tears down while others still send; tmx_worker_destroy closes every endpoint
     * at once (a FLUSH close of each in turn waits a disconnect round trip per peer). */
    A2A_CHECK(tmx_job_barrier(job));
    A2A_CHECK(tmx_worker_destroy(worker));
    A2A_CHECK(tmx_context_destroy(ctx));
    tmx_job_finalize(job);
    free(all_use);
    free(all_mem);
    free(times);
    free(rbuf);
    free(sbuf);
    free(infos);
    free(reqs);
    free(eps);
    return A2A_EXIT_OK;
}
