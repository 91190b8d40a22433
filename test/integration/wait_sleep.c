/*
 * Blocking waits sleep: a process blocked for a message that comes a second later uses almost
 * no processor meanwhile, and wakes when it comes.
 *
 *   wait_sleep block    2 ranks. Rank 1 waits in tmx_request_wait for an eager message that
 *                       rank 0 sends after a 1 s pause outside tmx; then rank 0 waits in a
 *                       blocking rendezvous tmx_tag_send while rank 1 pauses 1 s before it
 *                       posts the receive. Each waiter checks the payload and that its
 *                       processor time stayed under a quarter of the wait.
 *
 *   wait_sleep efd      1 process, 2 workers: tmx_worker_get_efd / tmx_worker_arm /
 *                       tmx_worker_wait semantics: armed and quiet with nothing pending (an
 *                       endpoint that waits for its peer's connection reply included),
 *                       readable when a message arrives, BUSY while it waits unprogressed,
 *                       a stray datagram on the wake socket is a harmless spurious wakeup.
 *
 *   wait_sleep yield    1 process, 2 workers, TMX_WAIT=yield and rings on: a message that
 *                       came by the device's queue while the receiver polls a ring is taken
 *                       by the first progress round after a yield, whatever the phase of
 *                       the ring-only rounds (a round after a yield may come a time slice of
 *                       every other rank later, when ranks outnumber cores). The library's
 *                       yields are counted by this program's own sched_yield, which the
 *                       library's calls reach instead of libc's.
 *
 *   wait_sleep nearmiss 2 ranks, TMX_WAIT=auto: a ping-pong whose answers take 3 ms (rank 1
 *                       busy before each reply), longer than the 1 ms TMX_WAIT_SPIN. A sleep
 *                       that an arrival ends that soon is a near miss: rank 0's spin grows
 *                       past the 3 ms and its waits stop sleeping (a few sleep, at most
 *                       half of them on a heavily loaded machine; with a fixed spin every
 *                       one does). Then a message that
 *                       comes after 1 s: rank 0 still sleeps when truly idle. The library's
 *                       sleeps are counted by this program's own poll (as yields below).
 *                       Over verbs in the soft-RoCE guest (test/verbs/wait_auto.sh) a wakeup
 *                       can cost more than the spin by itself, and every wait slept.
 *
 *   wait_sleep bootwait 2 ranks, told that they outnumber their CPUs (TMX_LOCAL_SIZE above
 *                       the CPUs of the affinity mask): rank 0 waits in tmx_job_barrier for
 *                       rank 1, which comes 300 ms late. Past a few idle progress rounds the
 *                       wait must yield between them and then sleep: a rank done with its
 *                       part that spun 1000 rounds in a row there kept the processor from
 *                       the ranks it waited for (tmx_alltoall's last round at 8 ranks on 2
 *                       cores, 0.4-1.5 ms instead of 0.1). Counted, not timed: the rounds
 *                       that do not sleep (this program's poll with no time limit) and the
 *                       yields, whatever the machine's load.
 *
 *   wait_sleep bootspin The same, not oversubscribed: the wait spins over 64 rounds without
 *                       yielding before it sleeps (the contrast that shows that bootwait's
 *                       yields come from the oversubscription).
 *
 *   wait_sleep reqwait  2 ranks, oversubscribed as for bootwait, TMX_WAIT=auto with a 100 ms
 *                       TMX_WAIT_SPIN and no eager-RDMA ring: rank 0 waits in tmx_request_wait
 *                       for a message that rank 1 sends 300 ms late. Its idle progress rounds
 *                       must give the processor away (sched_yield), as Open MPI's
 *                       opal_progress does after every idle call when it knows it is
 *                       oversubscribed, and then sleep (after 16 idle yields: reqturns). Counted: at least 16 yields and a
 *                       sleep (100 ms of yields are many more on any load: a yield takes at
 *                       most the other processes' time slices).
 *
 *   wait_sleep reqturns The same with a 10 s spin: the wait sleeps after 16 idle yields (4
 *                       turns of the 2 processes per CPU that brought nothing), not after the
 *                       spin: 3 waits of 300 ms, each that slept yielded at most 16 times
 *                       before its first sleep, and at least one slept.
 *
 *   wait_sleep reqspin  The same with a CPU each: the spin polls without a yield, then sleeps
 *                       (fewer than 16 yields: an arm that finds work pending yields once).
 *
 * Prints "<mode> ok" (per rank) when every check held; exits non-zero otherwise.
 */
#define _GNU_SOURCE
#include <tmx/tmx.h>
#include <tmx/tmx_job.h>

#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "it.h"

static int rank = -1; /* for the messages of it.h */


#define BIG (1u << 20) /* rendezvous at the default eager limit */

static double clock_of(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double wall(void)
{
    return clock_of(CLOCK_MONOTONIC);
}

static double cpu(void)
{
    return clock_of(CLOCK_PROCESS_CPUTIME_ID);
}

/* The wait took about a second (the peer's pause) and under a quarter of it on a processor. */
static void check_slept(const char *what, double w0, double c0)
{
    double w = wall() - w0, c = cpu() - c0;

    printf("%s: waited %.3f s, processor %.3f s\n", what, w, c);
    REQUIRE(w > 0.5);
    REQUIRE(c < w / 4);
}

static void pause_1s(void)
{
    struct timespec ts = {.tv_sec = 1};
    nanosleep(&ts, NULL);
}

static int run_block(void)
{
    tmx_job_h           job;
    tmx_context_h       ctx;
    tmx_worker_h        worker;
    tmx_ep_h            eps[2];
    tmx_request_h       req;
    tmx_tag_recv_info_t info;
    uint8_t            *big = malloc(BIG);
    char                small[64];
    double              w0, c0;

    REQUIRE(big != NULL);
    IT_START(job, ctx, worker, eps, 2);

    /* 1: rank 1 waits for an eager message that comes after a second */
    memset(small, 0, sizeof(small));
    if (rank == 1) {
        CHECK(tmx_tag_recv_nb(worker, small, sizeof(small), 7, ~(tmx_tag_t)0, NULL, &req));
    }
    CHECK(tmx_job_barrier(job));
    if (rank == 0) {
        pause_1s();
        snprintf(small, sizeof(small), "the eager message");
        CHECK(tmx_tag_send(eps[1], small, sizeof(small), 7));
    } else {
        w0 = wall();
        c0 = cpu();
        CHECK(tmx_request_wait(req, &info));
        check_slept("rank 1 in tmx_request_wait", w0, c0);
        tmx_request_free(req);
        REQUIRE(info.tag == 7 && info.length == sizeof(small));
        REQUIRE(strcmp(small, "the eager message") == 0);
    }

    /* 2: rank 0 waits in a blocking rendezvous send whose receive is posted a second late */
    CHECK(tmx_job_barrier(job));
    if (rank == 0) {
        for (unsigned i = 0; i < BIG; i++) {
            big[i] = (uint8_t)(i * 7 + 3);
        }
        w0 = wall();
        c0 = cpu();
        CHECK(tmx_tag_send(eps[1], big, BIG, 8));
        check_slept("rank 0 in tmx_tag_send", w0, c0);
    } else {
        pause_1s();
        memset(big, 0, BIG);
        CHECK(tmx_tag_recv(worker, big, BIG, 8, ~(tmx_tag_t)0, &info));
        REQUIRE(info.length == BIG);
        for (unsigned i = 0; i < BIG; i++) {
            REQUIRE(big[i] == (uint8_t)(i * 7 + 3));
        }
    }

    IT_FINISH(job, ctx, worker, eps, 2);
    free(big);
    printf("block ok\n");
    return 0;
}

static int readable(int fd, int ms)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    return poll(&p, 1, ms) == 1 && (p.revents & POLLIN) != 0;
}

static void progress_all(tmx_worker_h a, tmx_worker_h b)
{
    while (tmx_worker_progress(a) + tmx_worker_progress(b) > 0) {
    }
}

/* Arms w, progressing only w while arm says BUSY: a worker that polls eager-RDMA rings first
 * writes "asleep" into each sender's control word and is BUSY until those writes complete
 * (proto/ring.h, "Sleeping"), which its own progress sees; the sender need not progress. */
static tmx_status_t arm_own(tmx_worker_h w)
{
    tmx_status_t s;
    int          tries = 0;

    while ((s = tmx_worker_arm(w)) == TMX_ERR_BUSY && tries++ < 1000) {
        tmx_worker_progress(w);
    }
    return s;
}

/* Sends a byte to every abstract socket of this process's soft devices ("@tmx-wake-<uid>-
 * <pid>-..." in /proc/net/unix): what a stranger may do. Returns how many got one. */
static int poke_wake_sockets(void)
{
    char  line[512], prefix[64];
    FILE *f = fopen("/proc/net/unix", "r");
    int   s = socket(AF_UNIX, SOCK_DGRAM, 0), n = 0;

    snprintf(prefix, sizeof(prefix), "@tmx-wake-%u-%d-", (unsigned)getuid(), (int)getpid());
    while (f != NULL && s >= 0 && fgets(line, sizeof(line), f) != NULL) {
        char              *name = strstr(line, prefix);
        struct sockaddr_un sa   = {.sun_family = AF_UNIX};
        size_t             len;

        if (name == NULL) {
            continue;
        }
        len = strcspn(name, "\n ");
        memcpy(sa.sun_path, name, len);
        sa.sun_path[0] = '\0';
        if (sendto(s, "x", 1, 0, (struct sockaddr *)&sa,
                   (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len)) == 1) {
            n++;
        }
    }
    if (f != NULL) {
        fclose(f);
    }
    if (s >= 0) {
        close(s);
    }
    return n;
}

static int run_efd(void)
{
    tmx_context_h       ctx;
    tmx_worker_h        a, b;
    tmx_ep_h            ep;
    tmx_ep_params_t     ep_params = {.field_mask = TMX_EP_PARAM_ADDRESS};
    tmx_request_h       req, sreq;
    tmx_tag_recv_info_t info;
    void               *addr;
    size_t              addr_len;
    char                msg[32] = "", in[32];
    int                 fd, fd2;
    double              t0;

    CHECK(tmx_context_create(NULL, &ctx));
    CHECK(tmx_worker_create(ctx, NULL, &a));
    CHECK(tmx_worker_create(ctx, NULL, &b));
    CHECK(tmx_worker_get_efd(b, &fd));
    CHECK(tmx_worker_get_efd(b, &fd2));
    REQUIRE(fd >= 0 && fd == fd2);
    REQUIRE(tmx_worker_get_efd(NULL, &fd) == TMX_ERR_INVALID_PARAM);
    REQUIRE(tmx_worker_wait(b, -2) == TMX_ERR_INVALID_PARAM);

    /* connect a -> b and get one message through (wire-up needs both to progress) */
    CHECK(tmx_worker_get_address(b, &addr, &addr_len));
    ep_params.address        = addr;
    ep_params.address_length = addr_len;
    CHECK(tmx_ep_create(a, &ep_params, &ep));
    tmx_worker_release_address(b, addr);
    /* connecting, the peer silent: a waits for its reply, an arrival, so it may sleep */
    while (tmx_worker_progress(a) > 0) {
    }
    REQUIRE(tmx_worker_arm(a) == TMX_OK);
    REQUIRE(tmx_worker_wait(a, 10) == TMX_ERR_TIMED_OUT);
    CHECK(tmx_tag_recv_nb(b, in, sizeof(in), 1, ~(tmx_tag_t)0, NULL, &req));
    sreq = NULL;
    CHECK(tmx_tag_send_nb(ep, msg, sizeof(msg), 1, NULL, &sreq));
    t0 = wall();
    while (tmx_request_test(req, NULL) == TMX_INPROGRESS && wall() - t0 < 10) {
        progress_all(a, b);
    }
    CHECK(tmx_request_test(req, NULL));
    tmx_request_free(req);
    if (sreq != NULL) {
        while (tmx_request_test(sreq, NULL) == TMX_INPROGRESS && wall() - t0 < 10) {
            progress_all(a, b);
        }
        CHECK(tmx_request_test(sreq, NULL));
        tmx_request_free(sreq);
    }
    progress_all(a, b);

    /* nothing pending: arm says OK (once the sleep words b's ring, lent at the first
     * message, owes its sender are written), the fd stays quiet, a wait times out */
    CHECK(arm_own(b));
    REQUIRE(tmx_worker_arm(b) == TMX_OK);
    REQUIRE(!readable(fd, 0));
    REQUIRE(tmx_worker_wait(b, 10) == TMX_ERR_TIMED_OUT);

    /* a message arrives: readable; unprogressed, arm says BUSY (and wait returns at once) */
    REQUIRE(tmx_worker_arm(b) == TMX_OK);
    snprintf(msg, sizeof(msg), "wake up");
    CHECK(tmx_tag_send(ep, msg, sizeof(msg), 2));
    t0 = wall();
    REQUIRE(readable(fd, 5000));
    REQUIRE(wall() - t0 < 4);
    REQUIRE(tmx_worker_arm(b) == TMX_ERR_BUSY);
    REQUIRE(tmx_worker_arm(b) == TMX_ERR_BUSY);
    REQUIRE(tmx_worker_wait(b, 5000) == TMX_OK);
    REQUIRE(wall() - t0 < 4);
    while (tmx_worker_progress(b) > 0) {
    }
    REQUIRE(arm_own(b) == TMX_OK); /* awake again: the sleep words first, as above */
    REQUIRE(!readable(fd, 0));     /* arming took the wakeup */

    /* a stray datagram: readable, nothing to progress, arm again, quiet again */
    REQUIRE(poke_wake_sockets() >= 1);
    REQUIRE(readable(fd, 5000));
    REQUIRE(tmx_worker_progress(b) == 0);
    REQUIRE(tmx_worker_arm(b) == TMX_OK);
    REQUIRE(!readable(fd, 0));

    /* the message is intact, and tmx_worker_wait wakes for the next one */
    CHECK(tmx_tag_recv(b, in, sizeof(in), 2, ~(tmx_tag_t)0, &info));
    REQUIRE(strcmp(in, "wake up") == 0 && info.tag == 2);
    progress_all(a, b);
    snprintf(msg, sizeof(msg), "third");
    CHECK(tmx_tag_send(ep, msg, sizeof(msg), 3));
    REQUIRE(tmx_worker_wait(b, 5000) == TMX_OK);
    CHECK(tmx_tag_recv(b, in, sizeof(in), 3, ~(tmx_tag_t)0, &info));
    REQUIRE(strcmp(in, "third") == 0);

    /* close: the peer worker must progress for the disconnect, so close with FORCE */
    CHECK(tmx_ep_close(ep, TMX_EP_CLOSE_FORCE));
    CHECK(tmx_worker_destroy(a));
    CHECK(tmx_worker_destroy(b));
    CHECK(tmx_context_destroy(ctx));
    printf("efd ok\n");
    return 0;
}

/* The library's sched_yield calls land here: the executable's definition comes first, once
 * it is visible (the build compiles with hidden visibility). */
static unsigned long yields;

__attribute__((visibility("default"))) int sched_yield(void)
{
    yields++;
    return (int)syscall(SYS_sched_yield);
}

static int run_yield(void)
{
    tmx_context_h       ctx;
    tmx_worker_h        a, b;
    tmx_ep_h            ep;
    tmx_ep_params_t     ep_params = {.field_mask = TMX_EP_PARAM_ADDRESS};
    tmx_request_h       req, sreq;
    tmx_tag_recv_info_t info;
    void               *addr;
    size_t              addr_len;
    static char         out[4096], in[4096]; /* above a ring slot: by the queue */
    char                small[16] = "ring";
    unsigned long       most = 0, y0;
    double              t0;

    setenv("TMX_WAIT", "yield", 1);
    setenv("TMX_RING", "yes", 1);
    CHECK(tmx_context_create(NULL, &ctx));
    CHECK(tmx_worker_create(ctx, NULL, &a));
    CHECK(tmx_worker_create(ctx, NULL, &b));
    CHECK(tmx_worker_get_address(b, &addr, &addr_len));
    ep_params.address        = addr;
    ep_params.address_length = addr_len;
    CHECK(tmx_ep_create(a, &ep_params, &ep));
    tmx_worker_release_address(b, addr);
    /* small messages, so that b lends a's endpoint a ring and polls it */
    for (int i = 0; i < 8; i++) {
        CHECK(tmx_tag_recv_nb(b, in, sizeof(small), 1, ~(tmx_tag_t)0, NULL, &req));
        sreq = NULL;
        CHECK(tmx_tag_send_nb(ep, small, sizeof(small), 1, NULL, &sreq));
        t0 = wall();
        while (tmx_request_test(req, NULL) == TMX_INPROGRESS && wall() - t0 < 10) {
            progress_all(a, b);
        }
        CHECK(tmx_request_test(req, NULL));
        tmx_request_free(req);
        while (sreq != NULL && tmx_request_test(sreq, NULL) == TMX_INPROGRESS &&
               wall() - t0 < 10) {
            progress_all(a, b);
        }
        if (sreq != NULL) {
            CHECK(tmx_request_test(sreq, NULL));
            tmx_request_free(sreq);
        }
    }
    /* Every phase of b's rounds that look at its rings only: b goes quiet, makes phase more
     * rounds, then a message comes by the queue and b waits for it. */
    for (int phase = 0; phase < 8; phase++) {
        for (int quiet = 0; quiet < 8;) {
            quiet = (tmx_worker_progress(a) + tmx_worker_progress(b) == 0) ? quiet + 1 : 0;
        }
        for (int i = 0; i < phase; i++) {
            REQUIRE(tmx_worker_progress(b) == 0);
        }
        memset(out, 'a' + phase, sizeof(out));
        CHECK(tmx_tag_recv_nb(b, in, sizeof(in), 2, ~(tmx_tag_t)0, NULL, &req));
        sreq = NULL;
        CHECK(tmx_tag_send_nb(ep, out, sizeof(out), 2, NULL, &sreq));
        y0 = yields;
        CHECK(tmx_request_wait(req, &info));
        if (yields - y0 > most) {
            most = yields - y0;
        }
        tmx_request_free(req);
        REQUIRE(info.length == sizeof(in) && memcmp(in, out, sizeof(in)) == 0);
        if (sreq != NULL) {
            CHECK(tmx_request_wait(sreq, NULL));
            tmx_request_free(sreq);
        }
    }
    printf("yield: at most %lu yields before a queued message was taken\n", most);
    REQUIRE(most <= 1);

    CHECK(tmx_ep_close(ep, TMX_EP_CLOSE_FORCE));
    CHECK(tmx_worker_destroy(a));
    CHECK(tmx_worker_destroy(b));
    CHECK(tmx_context_destroy(ctx));
    printf("yield ok\n");
    return 0;
}

/* The library's sleeps (a poll with a time limit) land here, as its yields do below; so do
 * its polls that do not wait (busy_polls). */
static unsigned long sleeps, busy_polls;
/* yields counted when the first sleep after sleep_mark began (reqturns), ULONG_MAX before */
static unsigned long sleep_mark_yields = ULONG_MAX;
static int           sleep_mark;

__attribute__((visibility("default"))) int poll(struct pollfd *fds, nfds_t nfds, int timeout)
{
    if (timeout != 0 && sleep_mark) {
        sleep_mark        = 0;
        sleep_mark_yields = yields;
    }
    sleeps += timeout != 0;
    busy_polls += timeout == 0;
    return (int)syscall(SYS_poll, fds, nfds, timeout);
}

#define NEARMISS_ITERS    40
#define NEARMISS_DELAY_MS 3.0

static int run_nearmiss(void)
{
    tmx_job_h           job;
    tmx_context_h       ctx;
    tmx_worker_h        worker;
    tmx_ep_h            eps[2];
    tmx_tag_recv_info_t info;
    char                msg[8] = "ping";
    unsigned long       s0, slept = 0;
    double              w0, c0;

    setenv("TMX_WAIT", "auto", 1);
    setenv("TMX_WAIT_SPIN", "1000", 1);
    IT_START(job, ctx, worker, eps, 2);
    CHECK(tmx_job_barrier(job));
    for (int i = 0; i < NEARMISS_ITERS; i++) {
        if (rank == 0) {
            CHECK(tmx_tag_send(eps[1], msg, sizeof(msg), 5));
            s0 = sleeps;
            CHECK(tmx_tag_recv(worker, msg, sizeof(msg), 5, ~(tmx_tag_t)0, &info));
            slept += sleeps - s0;
        } else {
            CHECK(tmx_tag_recv(worker, msg, sizeof(msg), 5, ~(tmx_tag_t)0, &info));
            w0 = wall();
            while (wall() - w0 < NEARMISS_DELAY_MS * 1e-3) {
            }
            CHECK(tmx_tag_send(eps[0], msg, sizeof(msg), 5));
        }
    }
    if (rank == 0) {
        printf("nearmiss: %lu of %d waits of %.0f ms slept\n", slept, NEARMISS_ITERS,
               NEARMISS_DELAY_MS);
        REQUIRE(slept <= NEARMISS_ITERS / 2);
    }
    /* idle after the ping-pong: rank 0 waits a second for a message, and sleeps */
    CHECK(tmx_job_barrier(job));
    if (rank == 0) {
        w0 = wall();
        c0 = cpu();
        CHECK(tmx_tag_recv(worker, msg, sizeof(msg), 6, ~(tmx_tag_t)0, &info));
        check_slept("rank 0 idle after the ping-pong", w0, c0);
    } else {
        pause_1s();
        CHECK(tmx_tag_send(eps[0], msg, sizeof(msg), 6));
    }
    IT_FINISH(job, ctx, worker, eps, 2);
    printf("nearmiss ok\n");
    return 0;
}

/* Rank 0's wait in tmx_job_barrier for a rank 300 ms late; oversub: tell the library that
 * more processes share our CPUs than there are (tmxrun binds 2 ranks to a core each here). */
static int run_bootwait(int oversub)
{
    tmx_job_h           job;
    tmx_context_h       ctx;
    tmx_worker_h        worker;
    tmx_ep_h            eps[2];
    tmx_worker_attr_t   wa = {.field_mask = TMX_WORKER_ATTR_WAIT};
    tmx_tag_recv_info_t info;
    cpu_set_t           set;
    char                local[16], msg[8] = "in";
    unsigned long       y0, b0, s0, y, b, s;
    int                 waited = 0;
    double              w0;

    REQUIRE(sched_getaffinity(0, sizeof(set), &set) == 0);
    snprintf(local, sizeof(local), "%d", oversub ? CPU_COUNT(&set) + 1 : 1);
    setenv("TMX_LOCAL_SIZE", local, 1);
    setenv("TMX_WAIT", "auto", 1);
    CHECK(tmx_job_init(&job));
    rank = tmx_job_rank(job);
    REQUIRE(tmx_job_size(job) == 2);
    CHECK(tmx_context_create(NULL, &ctx));
    CHECK(tmx_worker_create(ctx, NULL, &worker));
    CHECK(tmx_worker_query(worker, &wa));
    REQUIRE(wa.oversubscribed == oversub);
    CHECK(tmx_job_connect(job, worker, eps));
    CHECK(tmx_job_barrier(job));
    for (int i = 0; i < 3; i++) {
        if (rank == 1) {
            /* late by 300 ms after rank 0 said it enters the barrier */
            struct timespec ts = {.tv_nsec = 300 * 1000 * 1000};
            CHECK(tmx_tag_recv(worker, msg, sizeof(msg), 9, ~(tmx_tag_t)0, &info));
            nanosleep(&ts, NULL);
            CHECK(tmx_job_barrier(job));
            continue;
        }
        CHECK(tmx_tag_send(eps[1], msg, sizeof(msg), 9));
        y0 = yields;
        b0 = busy_polls;
        s0 = sleeps;
        w0 = wall();
        CHECK(tmx_job_barrier(job));
        y = yields - y0;
        b = busy_polls - b0;
        s = sleeps - s0;
        printf("%s: %s: rank 0 waited %.3f s in tmx_job_barrier: %lu polls without a wait, "
               "%lu yields, %lu sleeps\n", oversub ? "bootwait" : "bootspin",
               oversub ? "oversubscribed" : "a core each", wall() - w0, b, y, s);
        if (s == 0) {
            /* rank 0 lost its processor for the whole 300 ms (to a real-time process of
             * someone else): it did not wait, nothing to count */
            continue;
        }
        waited++;
        if (oversub) {
            /* 16 rounds, a yield between each two, then sleeps (each wakeup from a sleep
             * may make a round more) */
            REQUIRE(y >= 8);
            REQUIRE(b <= 64);
        } else {
            REQUIRE(y == 0);
            REQUIRE(b > 64);
        }
    }
    if (rank == 0) {
        REQUIRE(waited > 0);
    }
    IT_FINISH(job, ctx, worker, eps, 2);
    printf("%s ok\n", oversub ? "bootwait" : "bootspin");
    return 0;
}

/* reqwait and reqturns: a 2-rank job with TMX_WAIT=auto, the spin spin_us, TMX_LOCAL_SIZE
 * one process more than our CPUs when oversub (2 per CPU) and 1 otherwise, connected. */
static void req_job_start(int oversub, const char *spin_us, tmx_job_h *job, tmx_context_h *ctx,
                          tmx_worker_h *worker, tmx_ep_h eps[2])
{
    tmx_worker_attr_t wa = {.field_mask = TMX_WORKER_ATTR_WAIT};
    cpu_set_t         set;
    char              local[16];

    REQUIRE(sched_getaffinity(0, sizeof(set), &set) == 0);
    snprintf(local, sizeof(local), "%d", oversub ? CPU_COUNT(&set) + 1 : 1);
    setenv("TMX_LOCAL_SIZE", local, 1);
    setenv("TMX_WAIT", "auto", 1);
    setenv("TMX_WAIT_SPIN", spin_us, 1);
    setenv("TMX_RING", "no", 1); /* no ring: arming never says busy (which yields) */
    CHECK(tmx_job_init(job));
    rank = tmx_job_rank(*job);
    REQUIRE(tmx_job_size(*job) == 2);
    CHECK(tmx_context_create(NULL, ctx));
    CHECK(tmx_worker_create(*ctx, NULL, worker));
    CHECK(tmx_worker_query(*worker, &wa));
    REQUIRE(wa.oversubscribed == oversub);
    CHECK(tmx_job_connect(*job, *worker, eps));
    CHECK(tmx_job_barrier(*job));
}

/* One round of reqwait and reqturns. Rank 1 answers rank 0's message 300 ms late; rank 0
 * posts the receive of the answer into msg, sends msg, and returns the receive for its wait
 * (NULL on rank 1). */
static tmx_request_h req_round(tmx_worker_h worker, tmx_ep_h eps[2], char msg[8])
{
    tmx_tag_recv_info_t info;
    tmx_request_h       req;

    if (rank == 1) {
        struct timespec ts = {.tv_nsec = 300 * 1000 * 1000};
        CHECK(tmx_tag_recv(worker, msg, 8, 9, ~(tmx_tag_t)0, &info));
        nanosleep(&ts, NULL);
        CHECK(tmx_tag_send(eps[0], msg, 8, 10));
        return NULL;
    }
    CHECK(tmx_tag_recv_nb(worker, msg, 8, 10, ~(tmx_tag_t)0, NULL, &req));
    CHECK(tmx_tag_send(eps[1], msg, 8, 9));
    return req;
}

/* Rank 0's tmx_request_wait for a message rank 1 sends 300 ms after rank 0 asked for it. */
static int run_reqwait(int oversub)
{
    tmx_job_h           job;
    tmx_context_h       ctx;
    tmx_worker_h        worker;
    tmx_ep_h            eps[2];
    tmx_request_h       req;
    tmx_tag_recv_info_t info;
    char                msg[8] = "in";
    unsigned long       y0, s0, y, s;
    const char         *name = oversub ? "reqwait" : "reqspin";
    int                 waited = 0;
    double              w0;

    req_job_start(oversub, "100000", &job, &ctx, &worker, eps);
    for (int i = 0; i < 3; i++) {
        req = req_round(worker, eps, msg);
        if (req == NULL) {
            continue;
        }
        y0 = yields;
        s0 = sleeps;
        w0 = wall();
        CHECK(tmx_request_wait(req, &info));
        tmx_request_free(req);
        y = yields - y0;
        s = sleeps - s0;
        printf("%s: %s: rank 0 waited %.3f s in tmx_request_wait: %lu yields, %lu sleeps\n", name,
               oversub ? "oversubscribed" : "a core each", wall() - w0, y, s);
        if (s == 0) {
            continue; /* rank 0 lost its processor for the whole wait: nothing to count */
        }
        waited++;
        if (oversub) {
            REQUIRE(y >= 16);
        } else {
            /* the spin polls without yielding (if it yielded, it would in every idle round:
             * thousands in 100 ms); an arm that finds something pending (our send's
             * completion, the peer's credit landing as we go to sleep) yields once whatever
             * the oversubscription, which CI's load made happen in 1 of 3 waits */
            REQUIRE(y < 16);
        }
    }
    if (rank == 0) {
        REQUIRE(waited > 0);
    }
    IT_FINISH(job, ctx, worker, eps, 2);
    printf("%s ok\n", name);
    return 0;
}

/* reqturns: oversubscribed (one process more than our CPUs: 2 per CPU), a wait whose spin is
 * 10 s tries to sleep after TMX_IDLE_TURNS turns of every process on its CPU (16 yields, at
 * least) instead: 3 waits of 300 ms each; every one that slept yielded at most 16 times
 * before its first sleep. With the spin alone the waits never sleep (300 ms < 10 s): fails. */
static int run_reqturns(void)
{
    tmx_job_h           job;
    tmx_context_h       ctx;
    tmx_worker_h        worker;
    tmx_ep_h            eps[2];
    tmx_tag_recv_info_t info;
    tmx_request_h       req;
    char                msg[8] = "in";
    int                 slept = 0;

    req_job_start(1, "10000000", &job, &ctx, &worker, eps);
    for (int i = 0; i < 3; i++) {
        unsigned long y0;

        req = req_round(worker, eps, msg);
        if (req == NULL) {
            continue;
        }
        y0                = yields;
        sleep_mark_yields = ULONG_MAX;
        sleep_mark        = 1;
        CHECK(tmx_request_wait(req, &info));
        tmx_request_free(req);
        sleep_mark = 0;
        if (sleep_mark_yields == ULONG_MAX) {
            printf("reqturns: rank 0's wait of 300 ms did not sleep (%lu yields)\n", yields - y0);
            continue;
        }
        printf("reqturns: rank 0 yielded %lu times before its first sleep\n",
               sleep_mark_yields - y0);
        REQUIRE(sleep_mark_yields - y0 <= 16);
        slept++;
    }
    if (rank == 0) {
        REQUIRE(slept > 0);
    }
    IT_FINISH(job, ctx, worker, eps, 2);
    printf("reqturns ok\n");
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "reqturns") == 0) {
        return run_reqturns();
    }
    if (argc == 2 && strcmp(argv[1], "bootwait") == 0) {
        return run_bootwait(1);
    }
    if (argc == 2 && strcmp(argv[1], "bootspin") == 0) {
        return run_bootwait(0);
    }
    if (argc == 2 && strcmp(argv[1], "reqwait") == 0) {
        return run_reqwait(1);
    }
    if (argc == 2 && strcmp(argv[1], "reqspin") == 0) {
        return run_reqwait(0);
    }
    if (argc == 2 && strcmp(argv[1], "nearmiss") == 0) {
        return run_nearmiss();
    }
    if (argc == 2 && strcmp(argv[1], "block") == 0) {
        return run_block();
    }
    if (argc == 2 && strcmp(argv[1], "efd") == 0) {
        return run_efd();
    }
    if (argc == 2 && strcmp(argv[1], "yield") == 0) {
        return run_yield();
    }
    fprintf(stderr, "usage: wait_sleep block|efd|yield|nearmiss|bootwait|bootspin|reqwait|reqspin|reqturns\n");
    return 2;
}
