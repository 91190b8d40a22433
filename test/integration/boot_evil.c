/*
 * boot_evil MODE EVIL_RANK: one rank misbehaves on the bootstrap wire, the others are normal
 * tmx_job ranks doing two barriers. Used by boot_evil.sh to check that tmxrun never hangs or
 * crashes on what a rank sends, and that it fails the job when a rank breaks the protocol.
 *
 * Modes (done by EVIL_RANK only, on a raw socket to TMX_BOOT_ADDR):
 *   garbage      random bytes on a new connection, then behave normally (job must succeed)
 *   garbage-exit random bytes, then exit 0 without joining (job must fail, not hang)
 *   badcookie    a well-formed hello with a wrong cookie, then behave normally (must succeed)
 *   flood        open FLOOD_CONNS connections that never speak, keep them open and join as a
 *                normal rank (must succeed: the silent ones must not crowd out the ranks)
 *   badrank      hello as rank SIZE              badsize   hello claiming another job size
 *   dup          hello as rank (EVIL_RANK+1)%SIZE while that rank joins too
 *   biglen       allgather header of 2 MiB        mismatch  allgather of 9 bytes, others 0
 *   trunc        allgather header of 100 bytes, 10 sent, then exit 0
 *   badop        a valid hello, then an unknown operation
 *   late         EVERY rank (EVIL_RANK is ignored) connects, stays silent for a second, then
 *                says hello, takes its welcome and leaves with a goodbye; prints "late ok"
 *                (must succeed: a silent connection of a rank that has not joined yet is not
 *                a stranger to drop, however many there are)
 * A normal rank prints "status: <tmx status>" of its barriers and exits 0 when they were ok.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <tmx/tmx_job.h>

#include "boot/boot_wire.h"

#define FLOOD_CONNS 200

static int evil_connect(uint64_t *cookie_p)
{
    const char *addr = getenv("TMX_BOOT_ADDR"); /* a test program, not the library */
    struct sockaddr_in sin;
    int fd;

    if (tmx_boot_addr_parse(addr, &sin, cookie_p) != 0) {
        fprintf(stderr, "boot_evil: bad TMX_BOOT_ADDR '%s'\n", addr != NULL ? addr : "");
        exit(3);
    }
    fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&sin, sizeof(sin)) != 0) {
        perror("boot_evil: connect");
        exit(3);
    }
    return fd;
}

static void evil_send(int fd, const void *buf, size_t len)
{
    if (send(fd, buf, len, MSG_NOSIGNAL) != (ssize_t)len) {
        /* the launcher may have dropped us already: that is what some modes test */
    }
}

static void evil_hello(int fd, uint32_t rank, uint32_t size, uint64_t cookie)
{
    tmx_boot_hdr_t hdr;
    tmx_boot_hello_t hello;

    tmx_boot_hdr_pack(&hdr, TMX_BOOT_OP_HELLO, rank, sizeof(hello));
    hello.cookie_hi = htonl((uint32_t)(cookie >> 32));
    hello.cookie_lo = htonl((uint32_t)cookie);
    hello.size      = htonl(size);
    hello.pid       = htonl((uint32_t)getpid());
    evil_send(fd, &hdr, sizeof(hdr));
    evil_send(fd, &hello, sizeof(hello));
}

/* A valid hello as our own rank, waiting for the welcome. */
static int evil_join(int rank, int size, uint64_t *cookie_p)
{
    int fd = evil_connect(cookie_p);
    tmx_boot_hdr_t hdr;

    evil_hello(fd, (uint32_t)rank, (uint32_t)size, *cookie_p);
    if (recv(fd, &hdr, sizeof(hdr), MSG_WAITALL) != (ssize_t)sizeof(hdr)) {
        fprintf(stderr, "boot_evil: no welcome\n");
        exit(3);
    }
    return fd;
}

static int normal_rank(void)
{
    tmx_job_h job;
    tmx_status_t status = tmx_job_init(&job);

    if (status == TMX_OK) {
        status = tmx_job_barrier(job);
        if (status == TMX_OK) {
            status = tmx_job_barrier(job);
        }
        tmx_job_finalize(job);
    }
    printf("status: %s\n", tmx_status_string(status));
    fflush(stdout);
    return status == TMX_OK ? 0 : 1;
}

int main(int argc, char **argv)
{
    const char *mode;
    int rank, size, evil;
    uint64_t cookie;
    int fd;
    tmx_boot_hdr_t hdr;
    unsigned char junk[100];

    if (argc < 3 || getenv("TMX_RANK") == NULL || getenv("TMX_SIZE") == NULL) {
        fprintf(stderr, "usage: tmxrun -n N boot_evil MODE EVIL_RANK\n");
        return 2;
    }
    mode = argv[1];
    evil = atoi(argv[2]);
    rank = atoi(getenv("TMX_RANK"));
    size = atoi(getenv("TMX_SIZE"));
    if (strcmp(mode, "late") == 0) {
        fd = evil_connect(&cookie);
        sleep(1); /* the other ranks connect meanwhile: many silent connections at once */
        evil_hello(fd, (uint32_t)rank, (uint32_t)size, cookie);
        if (recv(fd, &hdr, sizeof(hdr), MSG_WAITALL) != (ssize_t)sizeof(hdr)) {
            fprintf(stderr, "boot_evil: rank %d: no welcome (dropped?)\n", rank);
            return 1;
        }
        tmx_boot_hdr_pack(&hdr, TMX_BOOT_OP_BYE, 0, 0);
        evil_send(fd, &hdr, sizeof(hdr));
        close(fd);
        printf("late ok\n");
        fflush(stdout);
        return 0;
    }
    if (rank != evil) {
        return normal_rank();
    }
    for (size_t i = 0; i < sizeof(junk); i++) {
        junk[i] = (unsigned char)(random() & 0xff);
    }
    if (strcmp(mode, "garbage") == 0 || strcmp(mode, "garbage-exit") == 0) {
        fd = evil_connect(&cookie);
        evil_send(fd, junk, sizeof(junk));
        close(fd);
        return strcmp(mode, "garbage") == 0 ? normal_rank() : 0;
    }
    if (strcmp(mode, "flood") == 0) {
        int fds[FLOOD_CONNS];
        int rc;
        for (int i = 0; i < FLOOD_CONNS; i++) {
            fds[i] = evil_connect(&cookie);
        }
        rc = normal_rank();
        for (int i = 0; i < FLOOD_CONNS; i++) {
            close(fds[i]);
        }
        return rc;
    }
    if (strcmp(mode, "badcookie") == 0) {
        fd = evil_connect(&cookie);
        evil_hello(fd, (uint32_t)rank, (uint32_t)size, cookie ^ 1);
        close(fd);
        return normal_rank();
    }
    if (strcmp(mode, "badrank") == 0 || strcmp(mode, "badsize") == 0 || strcmp(mode, "dup") == 0) {
        fd = evil_connect(&cookie);
        if (strcmp(mode, "badrank") == 0) {
            evil_hello(fd, (uint32_t)size, (uint32_t)size, cookie);
        } else if (strcmp(mode, "badsize") == 0) {
            evil_hello(fd, (uint32_t)rank, (uint32_t)size + 1, cookie);
        } else {
            evil_hello(fd, (uint32_t)((rank + 1) % size), (uint32_t)size, cookie);
        }
        sleep(30); /* the launcher must end the job, not wait for us */
        return 0;
    }
    fd = evil_join(rank, size, &cookie);
    if (strcmp(mode, "biglen") == 0) {
        tmx_boot_hdr_pack(&hdr, TMX_BOOT_OP_ALLGATHER, 0, 2u * 1024 * 1024);
        evil_send(fd, &hdr, sizeof(hdr));
    } else if (strcmp(mode, "mismatch") == 0) {
        tmx_boot_hdr_pack(&hdr, TMX_BOOT_OP_ALLGATHER, 0, 9);
        evil_send(fd, &hdr, sizeof(hdr));
        evil_send(fd, junk, 9);
    } else if (strcmp(mode, "trunc") == 0) {
        tmx_boot_hdr_pack(&hdr, TMX_BOOT_OP_ALLGATHER, 0, 100);
        evil_send(fd, &hdr, sizeof(hdr));
        evil_send(fd, junk, 10);
        return 0;
    } else if (strcmp(mode, "badop") == 0) {
        tmx_boot_hdr_pack(&hdr, (tmx_boot_op_t)99, 0, 0);
        evil_send(fd, &hdr, sizeof(hdr));
    } else {
        fprintf(stderr, "boot_evil: unknown mode %s\n", mode);
        return 2;
    }
    sleep(30);
    return 0;
}
