/*
 * Checks shared by the integration test programs. The including file defines `rank` (its job
 * rank, for the messages) and, to use EXPECT, `bad` (failed expectations). CHECK and REQUIRE
 * end the process at the first failure; EXPECT counts it and goes on.
 */
#ifndef TMX_TEST_INTEGRATION_IT_H
#define TMX_TEST_INTEGRATION_IT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tmx/tmx.h>

/* A tmx call that must not fail: the process exits 1 with the call and the status. */
#define CHECK(call)                                                                               \
    do {                                                                                          \
        tmx_status_t s_ = (call);                                                                 \
        if (s_ < 0) {                                                                             \
            fprintf(stderr, "rank %d line %d: %s: %s\n", rank, __LINE__, #call,                   \
                    tmx_status_string(s_));                                                       \
            exit(1);                                                                              \
        }                                                                                         \
    } while (0)

/* A file that defines IT_COUNT_CHECKS before including this also counts every EXPECT in its
 * `checks` (to print how many held). */
#ifdef IT_COUNT_CHECKS
#define IT_COUNT_() (checks++)
#else
#define IT_COUNT_() ((void)0)
#endif

/* An expectation: counted in bad and printed when it does not hold; the test goes on. */
#define EXPECT(cond, ...)                                                                         \
    do {                                                                                          \
        IT_COUNT_();                                                                              \
        if (!(cond)) {                                                                            \
            bad++;                                                                                \
            fprintf(stderr, "rank %d line %d: ", rank, __LINE__);                                 \
            fprintf(stderr, __VA_ARGS__);                                                         \
            fputc('\n', stderr);                                                                  \
        }                                                                                         \
    } while (0)

/* A condition the test cannot go on without: the process exits 1 at once. */
#define REQUIRE(cond)                                                                             \
    do {                                                                                          \
        if (!(cond)) {                                                                            \
            fprintf(stderr, "rank %d line %d: check failed: %s\n", rank, __LINE__, #cond);       \
            exit(1);                                                                              \
        }                                                                                         \
    } while (0)

/* A test's start: the job joined (rank set), of exactly n ranks, a context and a worker made
 * with the defaults, an endpoint to every rank; the first failure ends the process. */
#define IT_START(job, ctx, worker, eps, n)                                                        \
    do {                                                                                          \
        CHECK(tmx_job_init(&(job)));                                                              \
        rank = tmx_job_rank(job);                                                                 \
        REQUIRE(tmx_job_size(job) == (n));                                                        \
        CHECK(tmx_context_create(NULL, &(ctx)));                                                  \
        CHECK(tmx_worker_create(ctx, NULL, &(worker)));                                           \
        CHECK(tmx_job_connect(job, worker, eps));                                                 \
    } while (0)

/* A test's end: a barrier (every rank is done with every peer), its n endpoints closed with a
 * flush, then its worker, context and job released; the first failure ends the process. */
#define IT_FINISH(job, ctx, worker, eps, n)                                                       \
    do {                                                                                          \
        CHECK(tmx_job_barrier(job));                                                              \
        for (int r_ = 0; r_ < (n); r_++) {                                                        \
            CHECK(tmx_ep_close((eps)[r_], TMX_EP_CLOSE_FLUSH));                                   \
        }                                                                                         \
        CHECK(tmx_worker_destroy(worker));                                                        \
        CHECK(tmx_context_destroy(ctx));                                                          \
        tmx_job_finalize(job);                                                                    \
    } while (0)

/* A payload pattern that differs per message (seed) and per 4 KiB page: it_fill writes it,
 * it_check exits 1 at the first byte that differs, naming the rank, message and byte. */
static inline uint8_t it_pattern(size_t i, unsigned seed)
{
    return (uint8_t)(i * 31 + seed * 7 + (i >> 12));
}

static inline void it_fill(uint8_t *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++) {
        p[i] = it_pattern(i, seed);
    }
}

#define it_check(p, n, seed)                                                                      \
    do {                                                                                          \
        const uint8_t *p_ = (p);                                                                  \
        size_t         n_ = (n);                                                                  \
        unsigned       s_ = (seed);                                                               \
        for (size_t i_ = 0; i_ < n_; i_++) {                                                      \
            if (p_[i_] != it_pattern(i_, s_)) {                                                   \
                fprintf(stderr, "rank %d, message %u: byte %zu differs (%u)\n", rank, s_, i_,    \
                        p_[i_]);                                                                  \
                exit(1);                                                                          \
            }                                                                                     \
        }                                                                                         \
    } while (0)

/* Receives the message tagged seed, exactly n bytes, into p (zeroed first) and checks its
 * pattern (it_fill's on the sending side); the first failure ends the process. */
#define it_recv_check(worker, p, n, seed)                                                         \
    do {                                                                                          \
        tmx_tag_recv_info_t info_;                                                                \
        memset((p), 0, (n));                                                                      \
        CHECK(tmx_tag_recv((worker), (p), (n), (seed), ~(tmx_tag_t)0, &info_));                   \
        REQUIRE(info_.length == (n));                                                             \
        it_check((p), (n), (seed));                                                               \
    } while (0)

#endif
