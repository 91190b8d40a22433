/*
 * boot_allgather [expected_size]: allgather and barrier through tmx_job only (<tmx/tmx_job.h>).
 * Every rank contributes bytes that depend on (rank, round, offset) and checks every other
 * rank's bytes in the result, for lengths from 0 to above 64 KiB (several socket buffers).
 * Exits 0 when every check passed, 1 otherwise, printing what differed.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tmx/tmx_job.h>

static unsigned char pattern(int rank, int round, size_t i)
{
    return (unsigned char)((unsigned)rank * 131u + (unsigned)round * 31u + (unsigned)i * 7u +
                           (unsigned)(i >> 8));
}

int main(int argc, char **argv)
{
    static const size_t lens[] = {0, 1, 8, 13, 1000, 65536 + 3, 200000};
    tmx_job_h job;
    tmx_status_t status;
    int rank, size, expected = -1, errors = 0;

    if (argc > 1) {
        expected = atoi(argv[1]);
    }
    status = tmx_job_init(&job);
    if (status != TMX_OK) {
        fprintf(stderr, "boot_allgather: tmx_job_init: %s\n", tmx_status_string(status));
        return 1;
    }
    rank = tmx_job_rank(job);
    size = tmx_job_size(job);
    if (size < 1 || rank < 0 || rank >= size || (expected > 0 && size != expected)) {
        fprintf(stderr, "boot_allgather: rank %d size %d (expected size %d)\n", rank, size,
                expected);
        errors++;
        goto out;
    }
    for (int round = 0; round < (int)(sizeof(lens) / sizeof(lens[0])); round++) {
        size_t len         = lens[round];
        unsigned char *in  = malloc(len + 1);
        unsigned char *out = malloc(len * (size_t)size + 1);

        if (in == NULL || out == NULL) {
            fprintf(stderr, "boot_allgather: out of memory\n");
            return 1;
        }
        for (size_t i = 0; i < len; i++) {
            in[i] = pattern(rank, round, i);
        }
        memset(out, 0xee, len * (size_t)size);
        status = tmx_job_allgather(job, in, len, out);
        if (status != TMX_OK) {
            fprintf(stderr, "boot_allgather: rank %d: allgather of %zu: %s\n", rank, len,
                    tmx_status_string(status));
            errors++;
        } else {
            for (int r = 0; r < size; r++) {
                for (size_t i = 0; i < len; i++) {
                    if (out[(size_t)r * len + i] != pattern(r, round, i)) {
                        fprintf(stderr,
                                "boot_allgather: rank %d: allgather of %zu: byte %zu "
                                "of rank %d is %u, expected %u\n",
                                rank, len, i, r, out[(size_t)r * len + i], pattern(r, round, i));
                        errors++;
                        break;
                    }
                }
            }
        }
        free(in);
        free(out);
        if (round == 0 && getenv("BOOT_ALLGATHER_CPUS") != NULL) {
            /* for topo_bind.sh: tmxrun gives the ranks it started one per core the allowed
             * CPUs back before the first allgather returns */
            char  line[512];
            FILE *f = fopen("/proc/self/status", "r");
            while (f != NULL && fgets(line, sizeof(line), f) != NULL) {
                if (strncmp(line, "Cpus_allowed_list:", 18) == 0) {
                    printf("cpus after the first allgather: %s", line + 18 + strspn(line + 18, " \t"));
                }
            }
            if (f != NULL) {
                fclose(f);
            }
        }
        status = tmx_job_barrier(job);
        if (status != TMX_OK) {
            fprintf(stderr, "boot_allgather: rank %d: barrier: %s\n", rank,
                    tmx_status_string(status));
            errors++;
        }
        if (errors > 0) {
            break;
        }
    }
    /* local argument checks: refused without touching the job, which stays usable */
    if (tmx_job_allgather(job, NULL, 4, NULL) != TMX_ERR_INVALID_PARAM ||
        tmx_job_allgather(NULL, NULL, 0, NULL) != TMX_ERR_INVALID_PARAM) {
        fprintf(stderr, "boot_allgather: rank %d: bad arguments were accepted\n", rank);
        errors++;
    }
    if (rank == 0) { /* one rank is enough, and it keeps the expected error log short */
        size_t big       = 2u * 1024 * 1024;
        unsigned char *b = calloc(1, big);
        unsigned char *o = calloc((size_t)size, big);
        if (b != NULL && o != NULL && tmx_job_allgather(job, b, big, o) != TMX_ERR_INVALID_PARAM) {
            fprintf(stderr, "boot_allgather: rank %d: 2 MiB allgather was not refused\n", rank);
            errors++;
        }
        free(b);
        free(o);
    }
    if (errors == 0 && tmx_job_barrier(job) != TMX_OK) {
        fprintf(stderr, "boot_allgather: rank %d: final barrier failed\n", rank);
        errors++;
    }
out:
    if (errors == 0) {
        printf("boot_allgather: rank %d of %d ok\n", rank, size);
    }
    tmx_job_finalize(job);
    return errors == 0 ? 0 : 1;
}
