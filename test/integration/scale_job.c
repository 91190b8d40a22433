/*
 * scale_job MODE [expected_size]: a small job for many ranks, through the public API only
 * (<tmx/tmx.h> and <tmx/tmx_job.h>). Used by tmxrun_scale.sh to check that tmxrun starts and
 * serves large jobs.
 *
 *   boot      tmx_job_init, an allgather of (rank, pid, size) checked for every rank, a barrier
 *   ring      boot, then a worker whose endpoints go to the two ring neighbours only (their
 *             addresses through tmx_job_allgather): a message each way, payloads checked
 *   alltoall  boot, then tmx_job_connect (an endpoint to every rank, self included) and one
 *             small message from every rank to every rank, every payload and tag checked
 *
 * A rank prints "rank R of N: M checks ok" and exits 0, or says what differed and exits 1.
 * Waiting yields the CPU when nothing progressed: a job of hundreds of ranks on two cores
 * moves only when the ranks that can make progress get to run.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <tmx/tmx.h>
#include <tmx/tmx_job.h>

#include "it.h"

#define MSG_LEN 48

static int rank = -1, size = -1, checks = 0, errors = 0;


static void nap(void)
{
    struct timespec ts = {0, 100 * 1000};
    nanosleep(&ts, NULL);
}

/* Waits for every request of reqs[0..n) (NULL: done in place), yielding when idle. */
static void wait_all(tmx_worker_h worker, tmx_request_h *reqs, tmx_tag_recv_info_t *infos, int n)
{
    int left = n;

    while (left > 0) {
        unsigned events = tmx_worker_progress(worker);
        left            = 0;
        for (int i = 0; i < n; i++) {
            tmx_status_t s;
            if (reqs[i] == NULL) {
                continue;
            }
            s = tmx_request_test(reqs[i], infos != NULL ? &infos[i] : NULL);
            if (s == TMX_INPROGRESS) {
                left++;
                continue;
            }
            if (s != TMX_OK) {
                fprintf(stderr, "scale_job: rank %d: request %d: %s\n", rank, i,
                        tmx_status_string(s));
                exit(1);
            }
            tmx_request_free(reqs[i]);
            reqs[i] = NULL;
        }
        if (left > 0 && events == 0) {
            nap();
        }
    }
}

/* The payload from src to dst: every byte depends on both and on its offset. */
static void fill(unsigned char *buf, int src, int dst)
{
    for (int i = 0; i < MSG_LEN; i++) {
        buf[i] = (unsigned char)((unsigned)src * 131u + (unsigned)dst * 31u + (unsigned)i * 7u +
                                 ((unsigned)src >> 8) + ((unsigned)dst >> 5));
    }
}

static void check_msg(const unsigned char *buf, const tmx_tag_recv_info_t *info, int src)
{
    unsigned char want[MSG_LEN];

    fill(want, src, rank);
    checks++;
    if (info->tag != (tmx_tag_t)src || info->length != MSG_LEN || memcmp(buf, want, MSG_LEN)) {
        fprintf(stderr, "scale_job: rank %d: message from rank %d: tag %llu, %zu bytes, %s\n", rank,
                src, (unsigned long long)info->tag, info->length,
                memcmp(buf, want, MSG_LEN) ? "payload differs" : "payload ok");
        errors++;
    }
}

static void boot(tmx_job_h job)
{
    uint32_t mine[3] = {(uint32_t)rank, (uint32_t)getpid(), (uint32_t)size};
    uint32_t *all    = malloc(sizeof(mine) * (size_t)size);

    if (all == NULL) {
        exit(1);
    }
    CHECK(tmx_job_allgather(job, mine, sizeof(mine), all));
    for (int r = 0; r < size; r++) {
        checks++;
        if (all[3 * r] != (uint32_t)r || all[3 * r + 2] != (uint32_t)size || all[3 * r + 1] == 0 ||
            (r == rank && all[3 * r + 1] != (uint32_t)getpid())) {
            fprintf(stderr, "scale_job: rank %d: allgather entry %d is (%u, %u, %u)\n", rank, r,
                    all[3 * r], all[3 * r + 1], all[3 * r + 2]);
            errors++;
        }
    }
    free(all);
    CHECK(tmx_job_barrier(job));
}

/* Endpoints to the left and right neighbours only, from addresses gathered through the job. */
static void ring(tmx_job_h job, tmx_worker_h worker)
{
    int peer[2] = {(rank + size - 1) % size, (rank + 1) % size};
    unsigned char out[2][MSG_LEN], in[2][MSG_LEN];
    tmx_request_h reqs[4] = {NULL, NULL, NULL, NULL};
    tmx_tag_recv_info_t infos[4];
    tmx_ep_h eps[2];
    uint64_t mylen, *lens;
    size_t alen, max = 0;
    void *addr;
    char *padded, *all;

    CHECK(tmx_worker_get_address(worker, &addr, &alen));
    lens  = malloc(sizeof(*lens) * (size_t)size);
    mylen = alen;
    if (lens == NULL) {
        exit(1);
    }
    CHECK(tmx_job_allgather(job, &mylen, sizeof(mylen), lens));
    for (int r = 0; r < size; r++) {
        max = (lens[r] > max) ? (size_t)lens[r] : max;
    }
    padded = calloc(1, max);
    all    = malloc(max * (size_t)size);
    if (padded == NULL || all == NULL) {
        exit(1);
    }
    memcpy(padded, addr, alen);
    CHECK(tmx_job_allgather(job, padded, max, all));
    for (int k = 0; k < 2; k++) {
        tmx_ep_params_t params = {.field_mask     = TMX_EP_PARAM_ADDRESS,
                                  .address        = all + (size_t)peer[k] * max,
                                  .address_length = (size_t)lens[peer[k]]};
        CHECK(tmx_ep_create(worker, &params, &eps[k]));
    }
    /* receives first (tag = the sender's rank), then a message to each neighbour */
    for (int k = 0; k < 2; k++) {
        CHECK(tmx_tag_recv_nb(worker, in[k], MSG_LEN, (tmx_tag_t)peer[k], ~(tmx_tag_t)0, NULL,
                              &reqs[k]));
    }
    for (int k = 0; k < 2; k++) {
        fill(out[k], rank, peer[k]);
        CHECK(tmx_tag_send_nb(eps[k], out[k], MSG_LEN, (tmx_tag_t)rank, NULL, &reqs[2 + k]));
    }
    /* with 2 ranks both neighbours are the same rank: two messages with one tag, either order */
    wait_all(worker, reqs, infos, 4);
    for (int k = 0; k < 2; k++) {
        check_msg(in[k], &infos[k], peer[k]);
    }
    CHECK(tmx_job_barrier(job)); /* nobody closes while a neighbour still sends */
    for (int k = 0; k < 2; k++) {
        CHECK(tmx_ep_close(eps[k], TMX_EP_CLOSE_FLUSH));
    }
    free(all);
    free(padded);
    free(lens);
    tmx_worker_release_address(worker, addr);
}

static void alltoall(tmx_job_h job, tmx_worker_h worker)
{
    tmx_ep_h *eps              = calloc((size_t)size, sizeof(*eps));
    unsigned char *in          = malloc((size_t)size * MSG_LEN);
    unsigned char *out         = malloc((size_t)size * MSG_LEN);
    tmx_request_h *reqs        = calloc(2 * (size_t)size, sizeof(*reqs));
    tmx_tag_recv_info_t *infos = calloc(2 * (size_t)size, sizeof(*infos));

    if (eps == NULL || in == NULL || out == NULL || reqs == NULL || infos == NULL) {
        exit(1);
    }
    CHECK(tmx_job_connect(job, worker, eps));
    for (int r = 0; r < size; r++) {
        memset(in + (size_t)r * MSG_LEN, 0xee, MSG_LEN);
        CHECK(tmx_tag_recv_nb(worker, in + (size_t)r * MSG_LEN, MSG_LEN, (tmx_tag_t)r,
                              ~(tmx_tag_t)0, NULL, &reqs[r]));
    }
    /* everybody starts with its right neighbour, so that no rank is sent to by all at once */
    for (int k = 0; k < size; k++) {
        int r = (rank + k) % size;
        fill(out + (size_t)r * MSG_LEN, rank, r);
        CHECK(tmx_tag_send_nb(eps[r], out + (size_t)r * MSG_LEN, MSG_LEN, (tmx_tag_t)rank, NULL,
                              &reqs[size + r]));
    }
    wait_all(worker, reqs, infos, 2 * size);
    for (int r = 0; r < size; r++) {
        check_msg(in + (size_t)r * MSG_LEN, &infos[r], r);
    }
    /* Every message has arrived everywhere: tmx_worker_destroy (main) closes the endpoints,
     * all at once. A FLUSH close of each in turn waits for a disconnect round trip per peer,
     * with every rank busy in its own closes: 20 s at 64 ranks on two cores. */
    CHECK(tmx_job_barrier(job));
    free(infos);
    free(reqs);
    free(out);
    free(in);
    free(eps);
}

int main(int argc, char **argv)
{
    const char *mode = (argc > 1) ? argv[1] : "";
    int expected     = (argc > 2) ? atoi(argv[2]) : -1;
    tmx_context_h ctx;
    tmx_worker_h worker;
    tmx_job_h job;

    if (strcmp(mode, "boot") != 0 && strcmp(mode, "ring") != 0 && strcmp(mode, "alltoall") != 0) {
        fprintf(stderr, "usage: tmxrun -n N scale_job boot|ring|alltoall [expected_size]\n");
        return 2;
    }
    CHECK(tmx_job_init(&job));
    rank = tmx_job_rank(job);
    size = tmx_job_size(job);
    if (expected > 0 && size != expected) {
        fprintf(stderr, "scale_job: rank %d: size %d, expected %d\n", rank, size, expected);
        return 1;
    }
    boot(job);
    if (strcmp(mode, "boot") != 0) {
        CHECK(tmx_context_create(NULL, &ctx));
        CHECK(tmx_worker_create(ctx, NULL, &worker));
        if (strcmp(mode, "ring") == 0) {
            ring(job, worker);
        } else {
            alltoall(job, worker);
        }
        CHECK(tmx_worker_destroy(worker));
        CHECK(tmx_context_destroy(ctx));
    }
    tmx_job_finalize(job);
    if (errors > 0) {
        return 1;
    }
    printf("rank %d of %d: %d checks ok\n", rank, size, checks);
    return 0;
}
