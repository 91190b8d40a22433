/*
 * osu_pingpong_mpi: the MPI twin of tmx_pingpong, with the same sizes, iteration counts,
 * definitions and output, so that bench/compare.sh can put the two side by side.
 *
 *   mpicc -O2 -o osu_pingpong_mpi osu_pingpong_mpi.c
 *   mpirun -np 2 --bind-to core ./osu_pingpong_mpi [-t lat|bw|rate|all] [-m min:max]
 *                                                   [-n iters] [-w warmup] [-W window]
 *                                                   [-f table|csv] [-M]
 *
 * latency   = half of the mean round trip of MPI_Send/MPI_Recv, in microseconds (osu_latency);
 *             with -M also half of the median round trip (tmx_pingpong -M, perftest's
 *             "typical"), which a preempted iteration on a loaded machine does not move;
 * bandwidth = rank 0 posts W MPI_Isend, rank 1 W MPI_Irecv into one buffer, then a 0-byte
 *             ack; MB/s with 1 MB = 10^6 bytes (osu_bw, except that OSU's ack is 4 bytes);
 * rate      = the same loop in millions of messages per second.
 * The first round of each size is untimed and its data is checked (exit 1 on a wrong byte).
 */
#define _GNU_SOURCE
#include <mpi.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define LARGE_MSG  (8u * 1024u)
#define MAX_SIZE   ((size_t)1 << 30)
#define MAX_WINDOW 4096
#define TAG_LAT    1
#define TAG_BW     2
#define TAG_ACK    3

enum { T_LAT = 1, T_BW = 2, T_RATE = 4 };

static unsigned tests  = T_LAT | T_BW;
static size_t   min_sz = 1;
static size_t   max_sz = 4u << 20;
static long     iters_opt  = -1;
static long     warmup_opt = -1;
static int      window     = 64;
static int      csv;
static int      median;   /* -M */
static double   lat_med;  /* -M: of the last latency test, us */
static double  *rtt;      /* -M: round trips of rank 0, s */
static int      rank;
static unsigned char *sbuf;
static unsigned char *rbuf;
static MPI_Request   *reqs;

static void usage(FILE *f)
{
    fprintf(f, "usage: mpirun -np 2 osu_pingpong_mpi [-t lat|bw|rate|all] [-m min:max] "
               "[-n iters] [-w warmup] [-W window] [-f table|csv] [-M]\n");
}

static int parse_size(const char *s, size_t *out)
{
    char *end;
    unsigned long long v, scale = 1;

    if (*s == '\0' || *s == '-') {
        return -1;
    }
    errno = 0;
    v     = strtoull(s, &end, 10);
    if (errno != 0 || end == s) {
        return -1;
    }
    switch (*end) {
    case 'k': case 'K': scale = 1ull << 10; end++; break;
    case 'm': case 'M': scale = 1ull << 20; end++; break;
    case 'g': case 'G': scale = 1ull << 30; end++; break;
    default: break;
    }
    if (*end != '\0' || v > MAX_SIZE / scale) {
        return -1;
    }
    *out = (size_t)(v * scale);
    return 0;
}

static int parse_opts(int argc, char **argv)
{
    char *colon, *end, *tok, *save = NULL;
    int   c;

    while ((c = getopt(argc, argv, "t:m:n:w:W:f:Mh")) != -1) {
        switch (c) {
        case 't':
            tests = 0;
            for (tok = strtok_r(optarg, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
                if (!strcmp(tok, "lat")) tests |= T_LAT;
                else if (!strcmp(tok, "bw")) tests |= T_BW;
                else if (!strcmp(tok, "rate")) tests |= T_RATE;
                else if (!strcmp(tok, "all")) tests |= T_LAT | T_BW | T_RATE;
                else return 2;
            }
            if (tests == 0) return 2;
            break;
        case 'm':
            colon = strchr(optarg, ':');
            if (colon == NULL) {
                min_sz = 1;
                if (parse_size(optarg, &max_sz)) return 2;
            } else {
                *colon = '\0';
                if (parse_size(optarg, &min_sz) || parse_size(colon + 1, &max_sz)) return 2;
            }
            if (min_sz > max_sz) return 2;
            break;
        case 'n':
            iters_opt = strtol(optarg, &end, 10);
            if (*end != '\0' || iters_opt < 1) return 2;
            break;
        case 'w':
            warmup_opt = strtol(optarg, &end, 10);
            if (*end != '\0' || warmup_opt < 0) return 2;
            break;
        case 'W':
            window = (int)strtol(optarg, &end, 10);
            if (*end != '\0' || window < 1 || window > MAX_WINDOW) return 2;
            break;
        case 'f':
            if (!strcmp(optarg, "csv")) csv = 1;
            else if (!strcmp(optarg, "table")) csv = 0;
            else return 2;
            break;
        case 'M':
            median = 1;
            break;
        case 'h':
            return -1;
        default:
            return 2;
        }
    }
    return (optind < argc) ? 2 : 0;
}

static long count(long user, long dflt, long div, size_t size)
{
    long n = (user >= 0) ? user : dflt;

    if (size > LARGE_MSG) {
        n = (n > 0) ? ((n / div > 0) ? n / div : 1) : 0;
    }
    return n;
}

/* Same pattern as tmx_pingpong. */
static unsigned char pattern(int r, size_t size, size_t i)
{
    return (unsigned char)((i * 7u) + (size * 13u) + ((size_t)r * 101u) + 1u);
}

static void fill(size_t size)
{
    for (size_t i = 0; i < size; i++) {
        sbuf[i] = pattern(rank, size, i);
    }
}

static int verify(size_t size, int from, MPI_Status *st, const char *test)
{
    int n;

    MPI_Get_count(st, MPI_BYTE, &n);
    if ((size_t)n != size) {
        fprintf(stderr, "osu_pingpong_mpi: rank %d: %s size %zu: got %d bytes\n", rank, test,
                size, n);
        return 0;
    }
    for (size_t i = 0; i < size; i++) {
        if (rbuf[i] != pattern(from, size, i)) {
            fprintf(stderr, "osu_pingpong_mpi: rank %d: %s size %zu: wrong byte %zu\n", rank,
                    test, size, i);
            return 0;
        }
    }
    return 1;
}

static int agree(int ok)
{
    int all;

    MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
    return all;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double lat_test(size_t size)
{
    long       iters = count(iters_opt, 10000, 10, size), warm = count(warmup_opt, 100, 10, size);
    int        peer  = 1 - rank, n = (int)size;
    double     t0    = 0.0;
    MPI_Status st;

    memset(rbuf, 0, size);
    if (rank == 0) {
        MPI_Send(sbuf, n, MPI_BYTE, peer, TAG_LAT, MPI_COMM_WORLD);
        MPI_Recv(rbuf, n, MPI_BYTE, peer, TAG_LAT, MPI_COMM_WORLD, &st);
    } else {
        MPI_Recv(rbuf, n, MPI_BYTE, peer, TAG_LAT, MPI_COMM_WORLD, &st);
        MPI_Send(sbuf, n, MPI_BYTE, peer, TAG_LAT, MPI_COMM_WORLD);
    }
    if (!agree(verify(size, peer, &st, "latency"))) {
        return -1.0;
    }
    if (median && rank == 0) {
        free(rtt);
        rtt = malloc((size_t)(iters > 0 ? iters : 1) * sizeof(*rtt));
        if (rtt == NULL) {
            fprintf(stderr, "osu_pingpong_mpi: out of memory\n");
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);
    for (long i = 0; i < warm + iters; i++) {
        if (i == warm) {
            t0 = MPI_Wtime();
        }
        if (rank == 0) {
            double t1 = median ? MPI_Wtime() : 0.0;
            MPI_Send(sbuf, n, MPI_BYTE, peer, TAG_LAT, MPI_COMM_WORLD);
            MPI_Recv(rbuf, n, MPI_BYTE, peer, TAG_LAT, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            if (median && i >= warm) {
                rtt[i - warm] = MPI_Wtime() - t1;
            }
        } else {
            MPI_Recv(rbuf, n, MPI_BYTE, peer, TAG_LAT, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(sbuf, n, MPI_BYTE, peer, TAG_LAT, MPI_COMM_WORLD);
        }
    }
    t0 = (MPI_Wtime() - t0) * 1e6 / (2.0 * (double)iters);
    if (median && rank == 0 && iters > 0) {
        qsort(rtt, (size_t)iters, sizeof(*rtt), cmp_double);
        lat_med = (iters % 2 ? rtt[iters / 2] : (rtt[iters / 2 - 1] + rtt[iters / 2]) / 2.0) * 1e6 /
                  2.0;
    }
    return t0;
}

static void bw_window(size_t size)
{
    int peer = 1 - rank, n = (int)size;

    if (rank == 0) {
        for (int w = 0; w < window; w++) {
            MPI_Isend(sbuf, n, MPI_BYTE, peer, TAG_BW, MPI_COMM_WORLD, &reqs[w]);
        }
        MPI_Waitall(window, reqs, MPI_STATUSES_IGNORE);
        MPI_Recv(NULL, 0, MPI_BYTE, peer, TAG_ACK, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else {
        for (int w = 0; w < window; w++) {
            MPI_Irecv(rbuf, n, MPI_BYTE, peer, TAG_BW, MPI_COMM_WORLD, &reqs[w]);
        }
        MPI_Waitall(window, reqs, MPI_STATUSES_IGNORE);
        MPI_Send(NULL, 0, MPI_BYTE, peer, TAG_ACK, MPI_COMM_WORLD);
    }
}

/* seconds per window */
static double bw_test(size_t size)
{
    long       iters = count(iters_opt, 100, 5, size), warm = count(warmup_opt, 10, 5, size);
    int        ok    = 1, n = (int)size;
    double     t0    = 0.0;
    MPI_Status st;

    /* check round: rank 1 receives the window one message at a time and checks each */
    if (rank == 0) {
        bw_window(size);
    } else {
        for (int w = 0; w < window; w++) {
            memset(rbuf, 0, size);
            MPI_Recv(rbuf, n, MPI_BYTE, 0, TAG_BW, MPI_COMM_WORLD, &st);
            ok = ok && verify(size, 0, &st, "bandwidth");
        }
        MPI_Send(NULL, 0, MPI_BYTE, 0, TAG_ACK, MPI_COMM_WORLD);
    }
    if (!agree(ok)) {
        return -1.0;
    }
    MPI_Barrier(MPI_COMM_WORLD);
    for (long i = 0; i < warm + iters; i++) {
        if (i == warm) {
            t0 = MPI_Wtime();
        }
        bw_window(size);
    }
    return (MPI_Wtime() - t0) / (double)iters;
}

int main(int argc, char **argv)
{
    int    nprocs, parsed, ret = 0;
    size_t size, bufsz;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
    parsed = parse_opts(argc, argv);
    if (parsed != 0) {
        if (rank == 0) {
            usage(parsed < 0 ? stdout : stderr);
        }
        MPI_Finalize();
        return parsed < 0 ? 0 : 2;
    }
    if (nprocs != 2) {
        if (rank == 0) {
            fprintf(stderr, "osu_pingpong_mpi: needs exactly 2 ranks, got %d\n", nprocs);
        }
        MPI_Finalize();
        return 1;
    }
    bufsz = max_sz > 0 ? max_sz : 1;
    reqs  = calloc((size_t)window, sizeof(*reqs));
    if (reqs == NULL || posix_memalign((void **)&sbuf, 4096, bufsz) != 0 ||
        posix_memalign((void **)&rbuf, 4096, bufsz) != 0) {
        fprintf(stderr, "osu_pingpong_mpi: out of memory\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    if (rank == 0) {
        char lib[MPI_MAX_LIBRARY_VERSION_STRING];
        int  len;

        MPI_Get_library_version(lib, &len);
        lib[strcspn(lib, ",\n")] = '\0';
        printf("# osu_pingpong_mpi (%s), 2 ranks\n", lib);
        if (tests & T_LAT) printf("# latency: half round trip of blocking send/recv, us\n");
        if (tests & (T_BW | T_RATE))
            printf("# bandwidth: window of %d non-blocking sends, then a 0-byte ack; "
                   "MB/s, 1 MB = 10^6 bytes\n", window);
        if (tests & T_RATE) printf("# rate: messages of that window loop, millions per second\n");
        if (csv) {
            printf("size%s%s%s%s\n", (tests & T_LAT) ? ",latency_us" : "",
                   (tests & T_LAT) && median ? ",latency_median_us" : "",
                   (tests & T_BW) ? ",bandwidth_MBps" : "", (tests & T_RATE) ? ",rate_Mmsgps" : "");
        } else {
            printf("%-12s", "# Size");
            if (tests & T_LAT) printf("%16s", "Latency(us)");
            if ((tests & T_LAT) && median) printf("%16s", "Median(us)");
            if (tests & T_BW) printf("%18s", "Bandwidth(MB/s)");
            if (tests & T_RATE) printf("%16s", "Rate(Mmsg/s)");
            printf("\n");
        }
        fflush(stdout);
    }
    size = min_sz;
    while (size <= max_sz) {
        double lat = 0.0, win = 0.0;

        fill(size);
        if ((tests & T_LAT) && (lat = lat_test(size)) < 0.0) {
            ret = 1;
            break;
        }
        if ((tests & (T_BW | T_RATE)) && (win = bw_test(size)) < 0.0) {
            ret = 1;
            break;
        }
        if (rank == 0) {
            printf(csv ? "%zu" : "%-12zu", size);
            if (tests & T_LAT) printf(csv ? ",%.3f" : "%16.2f", lat);
            if ((tests & T_LAT) && median) printf(csv ? ",%.3f" : "%16.2f", lat_med);
            if (tests & T_BW) printf(csv ? ",%.2f" : "%18.2f", (double)size * window / win / 1e6);
            if (tests & T_RATE) printf(csv ? ",%.4f" : "%16.4f", (double)window / win / 1e6);
            printf("\n");
            fflush(stdout);
        }
        if (size == 0) {
            size = 1;
        } else if (size > max_sz / 2) {
            break;
        } else {
            size *= 2;
        }
    }
    free(reqs);
    free(rtt);
    free(sbuf);
    free(rbuf);
    MPI_Finalize();
    return ret;
}
