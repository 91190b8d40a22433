/*
 * boot_nolauncher MODE: tmx_job without a working launcher must fail with a clear status and
 * never hang. The test sets its own environment before the first tmx call (a test program,
 * not the library).
 *   alone    no TMX_RANK/TMX_SIZE: a job of one; allgather copies, barrier returns
 *   refused  TMX_BOOT_ADDR names a port nobody listens on: TMX_ERR_TIMED_OUT after
 *            TMX_BOOT_TIMEOUT
 *   badaddr  TMX_BOOT_ADDR is not an address: TMX_ERR_INVALID_PARAM
 *   gone     a fake launcher (a child process) welcomes us and then exits: the barrier
 *            returns TMX_ERR_IO
 *   abort    the fake launcher answers the barrier with ABORT: TMX_ERR_IO
 *   lie      the fake launcher answers an allgather with a result of the wrong length
 *   dropped  the fake launcher drops our first connection unread and the second after reading
 *            the hello (what tmxrun does to silent connections when there are too many, or
 *            too slow ones): tmx_job_init connects again and the job works
 *   stranger the fake launcher answers the hello with ABORT (what tmxrun says to a rank of
 *            another job): tmx_job_init fails with TMX_ERR_IO at once, it does not retry
 * Exits 0 when the status was the expected one.
 */
#define _GNU_SOURCE
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <tmx/tmx_job.h>

#include "boot/boot_wire.h"

static int check(const char *what, tmx_status_t got, tmx_status_t want)
{
    if (got != want) {
        fprintf(stderr, "boot_nolauncher: %s: %s, expected %s\n", what, tmx_status_string(got),
                tmx_status_string(want));
        return 1;
    }
    printf("boot_nolauncher: %s: %s as expected\n", what, tmx_status_string(got));
    return 0;
}

/* A launcher that serves one rank: welcome, then what the mode says. */
static void fake_launcher(int lfd, const char *mode)
{
    int fd = accept(lfd, NULL, NULL);
    tmx_boot_hdr_t hdr;
    char buf[64];

    if (strcmp(mode, "dropped") == 0) {
        /* unread: the rank's hello, when it came, turns the close into a reset */
        close(fd);
        fd = accept(lfd, NULL, NULL);
        if (fd < 0 || recv(fd, buf, 32, MSG_WAITALL) != 32) {
            _exit(1);
        }
        close(fd); /* read: a plain end of stream */
        fd = accept(lfd, NULL, NULL);
    }
    if (fd < 0 || recv(fd, buf, 32, MSG_WAITALL) != 32) {
        _exit(1);
    }
    if (strcmp(mode, "stranger") == 0) {
        tmx_boot_hdr_pack(&hdr, TMX_BOOT_OP_ABORT, UINT32_MAX, 0);
        send(fd, &hdr, sizeof(hdr), MSG_NOSIGNAL);
        close(fd);
        /* a rank that tried again would wait for an accept that never comes, until its
         * TMX_BOOT_TIMEOUT: it would fail with TMX_ERR_TIMED_OUT instead of TMX_ERR_IO */
        sleep(10);
        _exit(0);
    }
    tmx_boot_hdr_pack(&hdr, TMX_BOOT_OP_WELCOME, 2, 0);
    send(fd, &hdr, sizeof(hdr), MSG_NOSIGNAL);
    if (strcmp(mode, "gone") == 0) {
        _exit(0); /* the kernel closes the socket */
    }
    if (recv(fd, buf, 16, MSG_WAITALL) != 16) {
        _exit(1);
    }
    if (strcmp(mode, "abort") == 0) {
        tmx_boot_hdr_pack(&hdr, TMX_BOOT_OP_ABORT, 1, 0);
    } else if (strcmp(mode, "dropped") == 0) {
        tmx_boot_hdr_pack(&hdr, TMX_BOOT_OP_RESULT, 0, 0); /* the barrier, served */
    } else {
        tmx_boot_hdr_pack(&hdr, TMX_BOOT_OP_RESULT, 0, 12345); /* barrier: 0 bytes expected */
    }
    send(fd, &hdr, sizeof(hdr), MSG_NOSIGNAL);
    sleep(10); /* keep the socket open: the rank must not wait for the close */
    _exit(0);
}

int main(int argc, char **argv)
{
    const char *mode = (argc > 1) ? argv[1] : "alone";
    tmx_job_h job;
    tmx_status_t status;
    int errors  = 0;
    pid_t child = -1;

    unsetenv("TMX_RANK");
    unsetenv("TMX_SIZE");
    unsetenv("TMX_BOOT_ADDR");
    if (strcmp(mode, "alone") == 0) {
        int in = 42, out = 0;
        errors += check("init alone", tmx_job_init(&job), TMX_OK);
        if (errors == 0) {
            errors += (tmx_job_rank(job) != 0 || tmx_job_size(job) != 1);
            errors +=
                check("allgather alone", tmx_job_allgather(job, &in, sizeof(in), &out), TMX_OK);
            errors += (out != 42);
            errors += check("barrier alone", tmx_job_barrier(job), TMX_OK);
            tmx_job_finalize(job);
        }
        return errors != 0;
    }
    setenv("TMX_RANK", "0", 1);
    setenv("TMX_SIZE", "2", 1);
    setenv("TMX_BOOT_TIMEOUT", "1", 1);
    if (strcmp(mode, "refused") == 0 || strcmp(mode, "badaddr") == 0) {
        /* a port that was just free: bound, then closed */
        int fd                 = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in sin = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        socklen_t len          = sizeof(sin);
        char addr[TMX_BOOT_ADDR_MAX];

        bind(fd, (struct sockaddr *)&sin, sizeof(sin));
        getsockname(fd, (struct sockaddr *)&sin, &len);
        close(fd);
        tmx_boot_addr_format(addr, sizeof(addr), ntohs(sin.sin_port), 0x1234);
        setenv("TMX_BOOT_ADDR", strcmp(mode, "refused") == 0 ? addr : "127.0.0.1:0x50:zz", 1);
        status = tmx_job_init(&job);
        errors += check(mode, status,
                        strcmp(mode, "refused") == 0 ? TMX_ERR_TIMED_OUT : TMX_ERR_INVALID_PARAM);
        if (status == TMX_OK) {
            tmx_job_finalize(job);
        }
        return errors != 0;
    }
    {
        int lfd                = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in sin = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        socklen_t len          = sizeof(sin);
        char addr[TMX_BOOT_ADDR_MAX];

        if (lfd < 0 || bind(lfd, (struct sockaddr *)&sin, sizeof(sin)) != 0 ||
            listen(lfd, 4) != 0 || getsockname(lfd, (struct sockaddr *)&sin, &len) != 0) {
            perror("boot_nolauncher: listen");
            return 1;
        }
        tmx_boot_addr_format(addr, sizeof(addr), ntohs(sin.sin_port), 0x1234);
        setenv("TMX_BOOT_ADDR", addr, 1);
        child = fork();
        if (child == 0) {
            fake_launcher(lfd, mode);
        }
        close(lfd);
    }
    status = tmx_job_init(&job);
    if (strcmp(mode, "stranger") == 0) {
        errors += check("init told it is a stranger", status, TMX_ERR_IO);
    } else {
        errors += check("init with the fake launcher", status, TMX_OK);
    }
    if (status == TMX_OK && strcmp(mode, "dropped") == 0) {
        errors += check("barrier after two dropped connections", tmx_job_barrier(job), TMX_OK);
        tmx_job_finalize(job);
    } else if (status == TMX_OK) {
        errors += check(mode, tmx_job_barrier(job), TMX_ERR_IO);
        /* once broken, the job stays broken (no half-read stream reused) */
        errors += check("barrier after the failure", tmx_job_barrier(job), TMX_ERR_IO);
        tmx_job_finalize(job);
    }
    if (child > 0) {
        kill(child, SIGKILL);
        waitpid(child, NULL, 0);
    }
    return errors != 0;
}
