/*
 * The bootstrap wire between tmxrun and the ranks it starts (src/boot/job.c). Shared by both
 * sides; plain C, no dependency on libtmx, so that the launcher builds without the library.
 *
 * Transport: TCP on 127.0.0.1, an ephemeral port (tmxrun --boot-listen: an address and port of
 * another interface, for ranks on other hosts). TMX_BOOT_ADDR = "127.0.0.1:<port>:<cookie>",
 * the cookie being 16 hex digits from the kernel's random source. Why TCP and not an abstract
 * unix socket: an abstract socket has no permissions (any local user can connect) and lives in
 * the network namespace, while TCP reaches the same way from other hosts once tmxrun starts
 * ranks there. The cookie, known only through the environment of our own ranks (readable only
 * by the same user), tells a rank from a stray connection (a port scan, a leftover rank of an
 * older job): a connection whose hello has the wrong magic, version or cookie is dropped
 * without failing the job (a well-formed hello with a wrong cookie gets an ABORT first, so that
 * a rank of another job fails at once), whereas a rank that said a valid hello and then breaks
 * the protocol fails the job.
 *
 * Until its hello has been read, a connection may be dropped without an answer: tmxrun keeps
 * as many silent connections as ranks that have not joined plus a few, and drops the oldest
 * silent one beyond that (a flood of connections that never speak) or after 10 s. A rank whose
 * connection ends (EOF or reset) before any byte of the WELCOME therefore connects and says
 * hello again, until its TMX_BOOT_TIMEOUT. Once its hello has been read, a rank is never dropped
 * that way: its connection ends only with an ABORT or with the launcher.
 *
 * Every message is a 16-byte header followed by len payload bytes; integers in network byte
 * order. Operations are collective and strictly in lock step: a rank sends one ALLGATHER and
 * waits for its RESULT before it sends the next.
 *
 *   rank -> tmxrun  HELLO      arg = rank, payload = tmx_boot_hello_t
 *   tmxrun -> rank  WELCOME    arg = size, no payload
 *   rank -> tmxrun  ALLGATHER  arg = 0, payload = this rank's len bytes (a barrier sends 0)
 *   tmxrun -> rank  RESULT     arg = per-rank len, payload = size * len bytes in rank order
 *   rank -> tmxrun  BYE        (tmx_job_finalize) no payload, then close
 *   tmxrun -> rank  ABORT      the job failed; arg = the rank blamed or -1; then close
 */
#ifndef TMX_BOOT_BOOT_WIRE_H
#define TMX_BOOT_BOOT_WIRE_H

#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TMX_BOOT_MAGIC 0x544d5842u /* "TMXB" */
#define TMX_BOOT_VERSION 1u

/* Caps that tmxrun enforces on every rank (and job.c checks before sending): one allgather
 * contribution, and the whole gathered result that every rank receives. */
#define TMX_BOOT_MAX_LEN (1024u * 1024u)
#define TMX_BOOT_MAX_TOTAL (256u * 1024u * 1024u)
/* Largest job tmxrun starts (and job.c accepts): beyond it -n is a typo, not a job. */
#define TMX_BOOT_MAX_SIZE 4096

/* TMX_BOOT_ADDR fits in tmx_config_t.boot_addr[128]. */
#define TMX_BOOT_ADDR_MAX 64

typedef enum {
    TMX_BOOT_OP_HELLO     = 1,
    TMX_BOOT_OP_WELCOME   = 2,
    TMX_BOOT_OP_ALLGATHER = 3,
    TMX_BOOT_OP_RESULT    = 4,
    TMX_BOOT_OP_BYE       = 5,
    TMX_BOOT_OP_ABORT     = 6,
} tmx_boot_op_t;

typedef struct tmx_boot_hdr {
    uint32_t magic;   /* TMX_BOOT_MAGIC */
    uint16_t version; /* TMX_BOOT_VERSION */
    uint16_t op;      /* tmx_boot_op_t */
    uint32_t arg;     /* per op, see above */
    uint32_t len;     /* payload bytes that follow */
} tmx_boot_hdr_t;

typedef struct tmx_boot_hello {
    uint32_t cookie_hi; /* the cookie of TMX_BOOT_ADDR */
    uint32_t cookie_lo;
    uint32_t size; /* the job size the rank was told (TMX_SIZE); must match */
    uint32_t pid;  /* for messages only */
} tmx_boot_hello_t;

_Static_assert(sizeof(tmx_boot_hdr_t) == 16, "boot header is 16 bytes on the wire");
_Static_assert(sizeof(tmx_boot_hello_t) == 16, "boot hello is 16 bytes on the wire");

static inline void tmx_boot_hdr_pack(tmx_boot_hdr_t *hdr, tmx_boot_op_t op, uint32_t arg,
                                     uint32_t len)
{
    hdr->magic   = htonl(TMX_BOOT_MAGIC);
    hdr->version = htons(TMX_BOOT_VERSION);
    hdr->op      = htons((uint16_t)op);
    hdr->arg     = htonl(arg);
    hdr->len     = htonl(len);
}

/* Converts a received header to host order in place; 0 if magic and version are ours. */
static inline int tmx_boot_hdr_unpack(tmx_boot_hdr_t *hdr)
{
    hdr->magic   = ntohl(hdr->magic);
    hdr->version = ntohs(hdr->version);
    hdr->op      = ntohs(hdr->op);
    hdr->arg     = ntohl(hdr->arg);
    hdr->len     = ntohl(hdr->len);
    return (hdr->magic == TMX_BOOT_MAGIC && hdr->version == TMX_BOOT_VERSION) ? 0 : -1;
}

/* "a.b.c.d:port:cookie" for the listener at ip (network order); 0 on success. */
static inline int tmx_boot_addr_format_ip(char *buf, size_t buflen, struct in_addr ip,
                                          uint16_t port, uint64_t cookie)
{
    char host[INET_ADDRSTRLEN];
    int  n;

    if (inet_ntop(AF_INET, &ip, host, sizeof(host)) == NULL) {
        return -1;
    }
    n = snprintf(buf, buflen, "%s:%u:%016llx", host, (unsigned)port, (unsigned long long)cookie);
    return (n > 0 && (size_t)n < buflen) ? 0 : -1;
}

static inline int tmx_boot_addr_format(char *buf, size_t buflen, uint16_t port, uint64_t cookie)
{
    struct in_addr lo = {.s_addr = htonl(INADDR_LOOPBACK)};

    return tmx_boot_addr_format_ip(buf, buflen, lo, port, cookie);
}

/* Parses "a.b.c.d:port:cookie" strictly; 0 on success, -1 for anything else. */
static inline int tmx_boot_addr_parse(const char *str, struct sockaddr_in *sin, uint64_t *cookie_p)
{
    char host[INET_ADDRSTRLEN];
    const char *c1, *c2;
    char *end;
    unsigned long port;
    unsigned long long cookie;
    size_t hlen;

    if (str == NULL || strlen(str) >= TMX_BOOT_ADDR_MAX) {
        return -1;
    }
    c1 = strchr(str, ':');
    c2 = (c1 != NULL) ? strchr(c1 + 1, ':') : NULL;
    if (c1 == NULL || c2 == NULL) {
        return -1;
    }
    hlen = (size_t)(c1 - str);
    if (hlen == 0 || hlen >= sizeof(host)) {
        return -1;
    }
    memcpy(host, str, hlen);
    host[hlen] = '\0';
    memset(sin, 0, sizeof(*sin));
    sin->sin_family = AF_INET;
    if (inet_pton(AF_INET, host, &sin->sin_addr) != 1) {
        return -1;
    }
    /* strtoul accepts signs and spaces; a port and a cookie are plain digits only */
    if (c1[1] < '0' || c1[1] > '9') {
        return -1;
    }
    errno = 0;
    port  = strtoul(c1 + 1, &end, 10);
    if (errno != 0 || end != c2 || port == 0 || port > 65535) {
        return -1;
    }
    if (strlen(c2 + 1) != 16 || strspn(c2 + 1, "0123456789abcdefABCDEF") != 16) {
        return -1;
    }
    cookie        = strtoull(c2 + 1, &end, 16);
    sin->sin_port = htons((uint16_t)port);
    *cookie_p     = (uint64_t)cookie;
    return 0;
}

#endif /* TMX_BOOT_BOOT_WIRE_H */
