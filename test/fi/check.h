/* The checks of test/fi's C programs: CHECK reports a failed condition and counts it in fails
 * (the program's exit status says whether any failed), DIE_IF reports one and ends the process
 * with status 1. A program that runs as several processes names the one that failed by
 * defining CHECK_WHO() (printing, say, "rank 1 ") before including this; CHECK_EXIT is _exit
 * unless the program defines it (exit: atexit handlers and libraries' destructors run). now()
 * is the monotonic clock in seconds, for the programs' time bounds. */
#ifndef TMX_TEST_FI_CHECK_H
#define TMX_TEST_FI_CHECK_H

#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static int fails;

#ifndef CHECK_WHO
#define CHECK_WHO() ((void)0)
#endif
#ifndef CHECK_EXIT
#define CHECK_EXIT _exit
#endif

#define CHECK_SAY(...)                                                                            \
    do {                                                                                          \
        printf("FAIL ");                                                                          \
        CHECK_WHO();                                                                              \
        printf("%s:%d: ", __FILE__, __LINE__);                                                    \
        printf(__VA_ARGS__);                                                                      \
        printf("\n");                                                                             \
        fflush(stdout);                                                                           \
    } while (0)

#define CHECK(cond, ...)                                                                          \
    do {                                                                                          \
        if (!(cond)) {                                                                            \
            CHECK_SAY(__VA_ARGS__);                                                               \
            fails++;                                                                              \
        }                                                                                         \
    } while (0)

#define DIE_IF(cond, ...)                                                                         \
    do {                                                                                          \
        if (cond) {                                                                               \
            CHECK_SAY(__VA_ARGS__);                                                               \
            CHECK_EXIT(1);                                                                        \
        }                                                                                         \
    } while (0)

static inline double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

#endif
