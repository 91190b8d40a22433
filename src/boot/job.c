/*
 * tmx_job: a rank's side of the bootstrap that tmxrun serves (wire: boot_wire.h).
 *
 * Rank, size and the launcher's address come from the configuration table (TMX_RANK,
 * TMX_SIZE, TMX_BOOT_ADDR, TMX_BOOT_TIMEOUT). Without TMX_RANK and TMX_SIZE the program is a
 * job of one and nothing is connected. The socket is non-blocking and every wait is a poll(),
 * so a launcher that goes away shows up as TMX_ERR_IO instead of a hang.
 */
#define TMX_LOG_SUBSYS "boot"
#include "config.h"

#include <endian.h>
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <tmx/tmx_job.h>

#include "boot/boot_wire.h"
#include "util/config.h"
#include "util/log.h"
#include "util/time.h"

struct tmx_job {
    int rank;
    int size;
    int fd;     /* bootstrap connection; -1 for a job of one */
    int broken; /* the launcher aborted or the connection failed: every later call fails */
    tmx_worker_h worker; /* the worker of tmx_job_connect: progressed while we wait */
};

/* Progress rounds that find nothing before a bootstrap wait with a worker sleeps on both the
 * socket and the worker's fd (tmx_worker_get_efd): woken by the launcher's answer or by a
 * peer's message at once, whichever comes first. */
#define TMX_JOB_SPIN 1000
/* The same when ranks outnumber the CPUs (TMX_WORKER_ATTR_WAIT: oversubscribed), yielding
 * between them: a rank that finished its part spun 1000 polls in a row while the ranks it
 * waits for (and that its launcher waits for) wanted the processor. At 8 ranks on 2 cores the
 * last all-to-all round before tmx_alltoall's allgather took 0.4-1.5 ms instead of 0.1. */
#define TMX_JOB_SPIN_OVERSUB 16

/* Waits until fd is ready for events; deadline < 0 waits as long as the socket lives. With a
 * worker, it progresses the worker meanwhile: a rank in a barrier still answers its peers
 * (the FIN, ACK or credits they wait for), so a barrier never waits on its own rank. */
static tmx_status_t tmx_job_wait_fd(int fd, short events, double deadline, tmx_worker_h worker)
{
    struct pollfd pfd[2] = {{.fd = fd, .events = events}, {.fd = -1, .events = POLLIN}};
    tmx_status_t status;
    tmx_worker_attr_t wa = {.field_mask = TMX_WORKER_ATTR_WAIT};
    unsigned idle = 0, spin = TMX_JOB_SPIN;
    int rc, efd = -1, oversub = 0;

    if (worker != NULL && tmx_worker_get_efd(worker, &efd) != TMX_OK) {
        efd = -1;
    }
    if (worker != NULL && tmx_worker_query(worker, &wa) == TMX_OK && wa.oversubscribed) {
        oversub = 1;
        spin    = TMX_JOB_SPIN_OVERSUB;
    }
    for (;;) {
        int timeout_ms = 1000;
        pfd[1].fd      = -1; /* poll ignores a negative fd */
        if (worker != NULL) {
            idle       = tmx_worker_progress(worker) > 0 ? 0 : idle + 1;
            timeout_ms = 0;
            if (oversub && idle > 0 && idle < spin) {
                sched_yield();
            }
            if (idle >= spin) {
                /* armed: sleep on both; busy (or no fd): 1 ms naps between rounds */
                timeout_ms = 1;
                if (efd >= 0 && tmx_worker_arm(worker) == TMX_OK) {
                    pfd[1].fd  = efd;
                    timeout_ms = 100; /* what only polling sees, e.g. a peer's death */
                }
            }
        }
        if (deadline >= 0) {
            double left = deadline - tmx_time_sec();
            if (left <= 0) {
                status = TMX_ERR_TIMED_OUT;
                goto out;
            }
            if (left * 1000.0 < timeout_ms) {
                timeout_ms = (int)(left * 1000.0) + 1;
            }
        }
        rc = poll(pfd, 2, timeout_ms);
        if (rc < 0 && errno != EINTR) {
            tmx_error("bootstrap poll failed: %s", strerror(errno));
            status = TMX_ERR_IO;
            goto out;
        }
        if (rc > 0 && pfd[0].revents != 0) {
            /* POLLHUP/POLLERR: the read or write that follows reports what happened */
            status = (pfd[0].revents & POLLNVAL) ? TMX_ERR_IO : TMX_OK;
            goto out;
        }
    }
out:
    return status;
}

static tmx_status_t tmx_job_send_all(tmx_job_h job, const void *buf, size_t len)
{
    const char *p       = buf;
    tmx_status_t status = TMX_OK;

    while (len > 0) {
        ssize_t n = send(job->fd, p, len, MSG_NOSIGNAL);
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            status = tmx_job_wait_fd(job->fd, POLLOUT, -1, job->worker);
            if (status != TMX_OK) {
                goto err;
            }
            continue;
        }
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            tmx_error("rank %d: sending to the launcher failed: %s", job->rank,
                      (n < 0) ? strerror(errno) : "connection closed");
            status = TMX_ERR_IO;
            goto err;
        }
        p += n;
        len -= (size_t)n;
    }
    return TMX_OK;
err:
    job->broken = 1;
    return status;
}

static tmx_status_t tmx_job_recv_all(tmx_job_h job, void *buf, size_t len, double deadline)
{
    char *p             = buf;
    tmx_status_t status = TMX_OK;

    while (len > 0) {
        ssize_t n = recv(job->fd, p, len, 0);
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            status = tmx_job_wait_fd(job->fd, POLLIN, deadline, job->worker);
            if (status != TMX_OK) {
                if (status == TMX_ERR_TIMED_OUT) {
                    tmx_error("rank %d: no answer from the launcher in time", job->rank);
                }
                goto err;
            }
            continue;
        }
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            tmx_error("rank %d: the launcher closed the bootstrap connection%s%s", job->rank,
                      (n < 0) ? ": " : "", (n < 0) ? strerror(errno) : "");
            status = TMX_ERR_IO;
            goto err;
        }
        p += n;
        len -= (size_t)n;
    }
    return TMX_OK;
err:
    job->broken = 1;
    return status;
}

/* Checks that a received header is the expected op; ABORT or anything else breaks the job.
 * The launcher is not trusted more than a peer: a bad header is an error, not a crash. */
static tmx_status_t tmx_job_check_hdr(tmx_job_h job, tmx_boot_op_t op, tmx_boot_hdr_t *hdr)
{
    tmx_status_t status = TMX_OK;

    if (tmx_boot_hdr_unpack(hdr) != 0) {
        tmx_error("rank %d: bad message from the launcher (magic or version)", job->rank);
        status = TMX_ERR_IO;
    } else if (hdr->op == TMX_BOOT_OP_ABORT) {
        if ((int32_t)hdr->arg >= 0) {
            tmx_error("rank %d: the launcher aborted the job (because of rank %d)", job->rank,
                      (int)(int32_t)hdr->arg);
        } else {
            tmx_error("rank %d: the launcher aborted the job", job->rank);
        }
        status = TMX_ERR_IO;
    } else if (hdr->op != op) {
        tmx_error("rank %d: unexpected message %u from the launcher (expected %u)", job->rank,
                  (unsigned)hdr->op, (unsigned)op);
        status = TMX_ERR_IO;
    }
    if (status != TMX_OK) {
        job->broken = 1;
    }
    return status;
}

/* Receives a header and checks it (tmx_job_check_hdr). */
static tmx_status_t tmx_job_recv_hdr(tmx_job_h job, tmx_boot_op_t op, tmx_boot_hdr_t *hdr,
                                     double deadline)
{
    tmx_status_t status = tmx_job_recv_all(job, hdr, sizeof(*hdr), deadline);

    if (status == TMX_OK) {
        status = tmx_job_check_hdr(job, op, hdr);
    }
    return status;
}

/* One connection attempt with the time that is left; 0 connected, -1 retry (refused, the
 * launcher is not listening yet or its backlog is full). */
static int tmx_job_try_connect(const struct sockaddr_in *sin, double deadline, int *fd_p)
{
    int fd        = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int err       = 0;
    socklen_t len = sizeof(err);

    if (fd < 0) {
        return -1;
    }
    if (connect(fd, (const struct sockaddr *)sin, sizeof(*sin)) != 0) {
        if (errno != EINPROGRESS) {
            goto err_close;
        }
        if (tmx_job_wait_fd(fd, POLLOUT, deadline, NULL) != TMX_OK ||
            getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err != 0) {
            goto err_close;
        }
    }
    *fd_p = fd;
    return 0;
err_close:
    close(fd);
    return -1;
}

/* Says hello on a new connection and receives the welcome header. 0: welcomed (*hdr holds
 * it, checked); 1: the launcher closed the connection before answering, connect again (it
 * drops a connection that has not spoken yet when more are silent at once than it keeps, or
 * when the hello came too late; boot_wire.h); -1: failed with *status_p. */
static int tmx_job_hello(tmx_job_h job, uint64_t cookie, double deadline, tmx_boot_hdr_t *hdr,
                         tmx_status_t *status_p)
{
    struct {
        tmx_boot_hdr_t hdr;
        tmx_boot_hello_t hello;
    } msg;
    size_t done = 0;
    ssize_t n;

    tmx_boot_hdr_pack(&msg.hdr, TMX_BOOT_OP_HELLO, (uint32_t)job->rank, sizeof(msg.hello));
    msg.hello.cookie_hi = htonl((uint32_t)(cookie >> 32));
    msg.hello.cookie_lo = htonl((uint32_t)cookie);
    msg.hello.size      = htonl((uint32_t)job->size);
    msg.hello.pid       = htonl((uint32_t)getpid());
    while (done < sizeof(msg)) {
        n = send(job->fd, (const char *)&msg + done, sizeof(msg) - done, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            *status_p = tmx_job_wait_fd(job->fd, POLLOUT, deadline, NULL);
            if (*status_p != TMX_OK) {
                goto err;
            }
            continue;
        }
        if (n < 0 && (errno == EPIPE || errno == ECONNRESET)) {
            return 1;
        }
        if (n <= 0) {
            tmx_error("rank %d: sending the hello to the launcher failed: %s", job->rank,
                      (n < 0) ? strerror(errno) : "connection closed");
            *status_p = TMX_ERR_IO;
            goto err;
        }
        done += (size_t)n;
    }
    for (done = 0; done < sizeof(*hdr);) {
        n = recv(job->fd, (char *)hdr + done, sizeof(*hdr) - done, 0);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            *status_p = tmx_job_wait_fd(job->fd, POLLIN, deadline, NULL);
            if (*status_p != TMX_OK) {
                goto err;
            }
            continue;
        }
        if (done == 0 && (n == 0 || (n < 0 && errno == ECONNRESET))) {
            return 1; /* dropped before any answer: not a failure of the job */
        }
        if (n <= 0) {
            tmx_error("rank %d: the launcher closed the bootstrap connection during the "
                      "welcome%s%s",
                      job->rank, (n < 0) ? ": " : "", (n < 0) ? strerror(errno) : "");
            *status_p = TMX_ERR_IO;
            goto err;
        }
        done += (size_t)n;
    }
    *status_p = tmx_job_check_hdr(job, TMX_BOOT_OP_WELCOME, hdr);
    return (*status_p == TMX_OK) ? 0 : -1;
err:
    if (*status_p == TMX_ERR_TIMED_OUT) {
        tmx_error("rank %d: no answer from the launcher in time", job->rank);
    }
    return -1;
}

static tmx_status_t tmx_job_join(tmx_job_h job, const tmx_config_t *cfg)
{
    double timeout  = (cfg->boot_timeout > 0) ? cfg->boot_timeout : 0;
    double deadline = tmx_time_sec() + timeout;
    struct sockaddr_in sin;
    uint64_t cookie;
    tmx_boot_hdr_t hdr;
    tmx_status_t status;
    int rc;

    if (tmx_boot_addr_parse(cfg->boot_addr, &sin, &cookie) != 0) {
        tmx_error("rank %d: TMX_BOOT_ADDR '%s' is not a bootstrap address (run under tmxrun)",
                  job->rank, cfg->boot_addr);
        status = TMX_ERR_INVALID_PARAM;
        goto err;
    }
    for (;;) {
        struct timespec ts = {.tv_sec = 0, .tv_nsec = 20 * 1000 * 1000};

        if (tmx_job_try_connect(&sin, deadline, &job->fd) == 0) {
            rc = tmx_job_hello(job, cookie, deadline, &hdr, &status);
            if (rc <= 0) {
                break;
            }
            tmx_debug("rank %d: the launcher dropped our connection before the welcome; "
                      "connecting again",
                      job->rank);
            close(job->fd);
            job->fd = -1;
        }
        if (tmx_time_sec() >= deadline) {
            tmx_error("rank %d: could not join the launcher at %s within %g s", job->rank,
                      cfg->boot_addr, timeout);
            status = TMX_ERR_TIMED_OUT;
            goto err;
        }
        nanosleep(&ts, NULL);
    }
    if (rc != 0) {
        goto err_close;
    }
    if (hdr.arg != (uint32_t)job->size || hdr.len != 0) {
        tmx_error("rank %d: the launcher says the job has %u ranks, TMX_SIZE says %d", job->rank,
                  hdr.arg, job->size);
        status = TMX_ERR_IO;
        goto err_close;
    }
    return TMX_OK;
err_close:
    close(job->fd);
    job->fd = -1;
err:
    return status;
}

TMX_API tmx_status_t tmx_job_init(tmx_job_h *job_p)
{
    const tmx_config_t *cfg = tmx_config_get();
    tmx_job_h job;
    tmx_status_t status;

    if (job_p == NULL) {
        status = TMX_ERR_INVALID_PARAM;
        goto err;
    }
    if (cfg == NULL) {
        status = TMX_ERR_INVALID_PARAM; /* config.c said which variable is malformed */
        goto err;
    }
    job = calloc(1, sizeof(*job));
    if (job == NULL) {
        status = TMX_ERR_NO_MEMORY;
        goto err;
    }
    job->fd = -1;
    if (cfg->rank < 0 && cfg->size < 0) {
        job->rank = 0; /* started without a launcher: a job of one */
        job->size = 1;
        goto out;
    }
    if (cfg->rank < 0 || cfg->size < 1 || cfg->size > TMX_BOOT_MAX_SIZE || cfg->rank >= cfg->size) {
        tmx_error("TMX_RANK=%d and TMX_SIZE=%d do not describe a rank of a job", cfg->rank,
                  cfg->size);
        status = TMX_ERR_INVALID_PARAM;
        goto err_free;
    }
    job->rank = cfg->rank;
    job->size = cfg->size;
    if (job->size == 1 && cfg->boot_addr[0] == '\0') {
        goto out; /* a job of one needs no launcher */
    }
    status = tmx_job_join(job, cfg);
    if (status != TMX_OK) {
        goto err_free;
    }
out:
    *job_p = job;
    return TMX_OK;
err_free:
    free(job);
err:
    return status;
}

TMX_API void tmx_job_finalize(tmx_job_h job)
{
    tmx_boot_hdr_t hdr;

    if (job == NULL) {
        return;
    }
    if (job->fd >= 0) {
        if (!job->broken) {
            /* a goodbye tells the launcher that our leaving is not a failure */
            tmx_boot_hdr_pack(&hdr, TMX_BOOT_OP_BYE, 0, 0);
            (void)tmx_job_send_all(job, &hdr, sizeof(hdr));
        }
        close(job->fd);
    }
    free(job);
}

TMX_API int tmx_job_rank(tmx_job_h job)
{
    return (job != NULL) ? job->rank : -1;
}

TMX_API int tmx_job_size(tmx_job_h job)
{
    return (job != NULL) ? job->size : -1;
}

TMX_API tmx_status_t tmx_job_allgather(tmx_job_h job, const void *in, size_t len, void *out)
{
    tmx_boot_hdr_t hdr;
    tmx_status_t status;

    if (job == NULL || (len > 0 && (in == NULL || out == NULL))) {
        status = TMX_ERR_INVALID_PARAM;
        goto out;
    }
    if (len > TMX_BOOT_MAX_LEN || len * (size_t)job->size > TMX_BOOT_MAX_TOTAL) {
        tmx_error("rank %d: allgather of %zu bytes exceeds the bootstrap caps (%u per rank, "
                  "%u in all)",
                  job->rank, len, TMX_BOOT_MAX_LEN, TMX_BOOT_MAX_TOTAL);
        status = TMX_ERR_INVALID_PARAM;
        goto out;
    }
    if (job->fd < 0) {
        if (len > 0 && out != in) {
            memmove(out, in, len);
        }
        status = TMX_OK;
        goto out;
    }
    if (job->broken) {
        status = TMX_ERR_IO;
        goto out;
    }
    tmx_boot_hdr_pack(&hdr, TMX_BOOT_OP_ALLGATHER, 0, (uint32_t)len);
    status = tmx_job_send_all(job, &hdr, sizeof(hdr));
    if (status == TMX_OK && len > 0) {
        status = tmx_job_send_all(job, in, len);
    }
    if (status != TMX_OK) {
        goto out;
    }
    /* no deadline: another rank may legitimately take long to get here; the launcher ends
     * the wait (result, abort or close) when a rank fails or the job times out */
    status = tmx_job_recv_hdr(job, TMX_BOOT_OP_RESULT, &hdr, -1);
    if (status != TMX_OK) {
        goto out;
    }
    if (hdr.arg != (uint32_t)len || hdr.len != (uint32_t)(len * (size_t)job->size)) {
        tmx_error("rank %d: allgather result of %u bytes (%u per rank), expected %zu", job->rank,
                  hdr.len, hdr.arg, len * (size_t)job->size);
        job->broken = 1;
        status      = TMX_ERR_IO;
        goto out;
    }
    if (len > 0) {
        status = tmx_job_recv_all(job, out, hdr.len, -1);
    }
out:
    return status;
}

TMX_API tmx_status_t tmx_job_barrier(tmx_job_h job)
{
    return tmx_job_allgather(job, NULL, 0, NULL);
}

static void tmx_job_close_eps(tmx_ep_h *eps, int n)
{
    for (int r = 0; r < n; r++) {
        (void)tmx_ep_close(eps[r], TMX_EP_CLOSE_FORCE);
        eps[r] = NULL;
    }
}

TMX_API tmx_status_t tmx_job_connect(tmx_job_h job, tmx_worker_h worker, tmx_ep_h *eps)
{
    void *addr     = NULL;
    size_t alen    = 0;
    uint64_t *lens = NULL;
    char *padded   = NULL;
    char *all      = NULL;
    size_t max     = 0;
    uint64_t mine;
    tmx_ep_params_t params;
    tmx_status_t status;
    int r;

    if (job == NULL || worker == NULL || eps == NULL) {
        status = TMX_ERR_INVALID_PARAM;
        goto err;
    }
    status = tmx_worker_get_address(worker, &addr, &alen);
    if (status != TMX_OK) {
        goto err;
    }
    lens = calloc((size_t)job->size, sizeof(*lens));
    if (lens == NULL) {
        status = TMX_ERR_NO_MEMORY;
        goto err_addr;
    }
    /* lengths first, so that every rank pads its address to the same (largest) length */
    mine   = htobe64((uint64_t)alen);
    status = tmx_job_allgather(job, &mine, sizeof(mine), lens);
    if (status != TMX_OK) {
        goto err_lens;
    }
    for (r = 0; r < job->size; r++) {
        lens[r] = be64toh(lens[r]);
        if (lens[r] == 0 || lens[r] > TMX_BOOT_MAX_LEN) {
            tmx_error("rank %d: rank %d announced a worker address of %llu bytes", job->rank, r,
                      (unsigned long long)lens[r]);
            status = TMX_ERR_INVALID_ADDR;
            goto err_lens;
        }
        max = (lens[r] > max) ? (size_t)lens[r] : max;
    }
    padded = calloc(1, max);
    all    = malloc(max * (size_t)job->size);
    if (padded == NULL || all == NULL) {
        status = TMX_ERR_NO_MEMORY;
        goto err_bufs;
    }
    memcpy(padded, addr, alen);
    status = tmx_job_allgather(job, padded, max, all);
    if (status != TMX_OK) {
        goto err_bufs;
    }
    for (r = 0; r < job->size; r++) {
        params.field_mask     = TMX_EP_PARAM_ADDRESS;
        params.address        = all + (size_t)r * max;
        params.address_length = (size_t)lens[r];
        status                = tmx_ep_create(worker, &params, &eps[r]);
        if (status != TMX_OK) {
            tmx_error("rank %d: endpoint to rank %d failed: %s", job->rank, r,
                      tmx_status_string(status));
            goto err_eps;
        }
    }
    free(all);
    free(padded);
    free(lens);
    tmx_worker_release_address(worker, addr);
    job->worker = worker;
    return TMX_OK;
err_eps:
    tmx_job_close_eps(eps, r);
err_bufs:
    free(all);
    free(padded);
err_lens:
    free(lens);
err_addr:
    tmx_worker_release_address(worker, addr);
err:
    return status;
}
