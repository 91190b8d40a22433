/*
 * tmxrun: starts N processes of a program on this host as the ranks of one tmx job, serves
 * their bootstrap (src/boot/boot_wire.h) while they run, forwards their output and returns the
 * first failure.
 *
 *   tmxrun -n N [--timeout SEC] [--bind-to LEVEL] [--map-by LEVEL] [--report-bindings]
 *          [--tag-output] [--boot-listen IP[:PORT]] [--local-ranks LIST]
 *          [--boot-addr-file FILE] [--remote-timeout SEC] [--] prog [args...]
 *
 * With --local-ranks, the ranks not listed are "remote": started by someone else (on another
 * host, with TMX_RANK, TMX_SIZE and this launcher's TMX_BOOT_ADDR), they have no pid here.
 * Their bootstrap connection is all we know of them: its close without a goodbye counts as
 * the rank's death, and one that does not join within --remote-timeout fails the job.
 *
 * One thread, one poll() loop over: a self-pipe that the signal handlers write to, the
 * bootstrap listener, the ranks' bootstrap connections and (with --tag-output) their stdout
 * and stderr pipes. Every socket is non-blocking, so a rank that sends garbage, stalls or
 * disappears can fail the job but never block the launcher.
 */
#define _GNU_SOURCE
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <netinet/tcp.h>
#include <time.h>
#include <unistd.h>

#include "boot/boot_wire.h"
#include "topo/topo.h"
#include "util/proc.h"

#define TMXRUN_EXIT_USAGE 2
#define TMXRUN_EXIT_FAILED 1 /* the launcher or the bootstrap failed, not a rank */
#define TMXRUN_EXIT_TIMEOUT 124
#define TMXRUN_KILL_GRACE 2.0  /* seconds from SIGTERM to SIGKILL */
#define TMXRUN_HELLO_TIME 10.0 /* seconds a new connection has to say hello */
/* seconds after the start at which oversubscribed ranks that started one per core get the
 * allowed CPUs back even if no allgather completed (a program that does not use tmx_job) */
#define TMXRUN_RELEASE_TIME 2.0
#define TMXRUN_LEFT_GRACE 2.0  /* seconds a rank that closed the bootstrap may take to exit */
/* Connections that have not said hello yet may number the ranks that have not joined (each
 * may be slow to speak: a loaded machine, thousands of ranks starting at once) plus this
 * many strangers (a port scan, a rank of an older job). Beyond that the oldest silent one is
 * dropped; a rank that loses its connection that way connects again (job.c). */
#define TMXRUN_MAX_STRAYS 16
#define TMXRUN_DROP_MSGS 8 /* dropped strangers reported one by one; the rest are counted */
#define TMXRUN_LINE_MAX 16384
#define TMXRUN_REMOTE_TIME 60.0 /* default --remote-timeout */

#define TMXRUN_AUTO (-1) /* --bind-to or --map-by not given */

typedef struct tmxrun_opts {
    int np;
    double timeout; /* 0: none */
    int bind;       /* tmx_topo_level_t or TMXRUN_AUTO */
    int map_by;     /* tmx_topo_level_t (not none) or TMXRUN_AUTO */
    int report;     /* --report-bindings */
    int tag_output;
    struct in_addr listen_ip; /* --boot-listen (network order); default 127.0.0.1 */
    uint16_t listen_port;     /* 0: ephemeral */
    const char *local_spec;   /* --local-ranks, NULL: every rank is started here */
    const char *addr_file;    /* --boot-addr-file */
    double remote_timeout;    /* --remote-timeout */
    char **argv; /* the program and its arguments */
    char path[PATH_MAX];
} tmxrun_opts_t;

/* A gathered result; shared by the connections still sending it. */
typedef struct tmxrun_buf {
    unsigned refcnt;
    size_t len;
    char data[];
} tmxrun_buf_t;

/* One forwarded output stream of a rank (--tag-output). */
typedef struct tmxrun_out {
    int fd; /* -1 when closed */
    int dest;
    size_t used;
    char *line;
} tmxrun_out_t;

typedef struct tmxrun_rank {
    pid_t pid;        /* 0 for a remote rank */
    int remote;       /* not started here (--local-ranks) */
    int local_idx;    /* index among the ranks started here, -1 remote */
    int alive;        /* not reaped yet */
    int joined;       /* said a valid hello */
    int left;         /* the bootstrap connection closed */
    int bye;          /* ... after a BYE */
    double left_time; /* when it closed */
    int in_round;     /* contributed to the allgather in progress */
    int conn;         /* index into conns or -1 */
    pid_t hello_pid;  /* the pid its hello gave (a wrapper's child may be the rank), 0 unknown */
    tmxrun_out_t out[2];
} tmxrun_rank_t;

typedef struct tmxrun_conn {
    int fd;   /* -1: free slot */
    int rank; /* -1 before hello */
    double hello_deadline;
    /* input: a header, then its payload */
    tmx_boot_hdr_t hdr;
    size_t hdr_got;
    int in_payload;
    char *pay_dst;
    size_t pay_len;
    size_t pay_got;
    tmx_boot_hello_t hello;
    /* output: one message at a time; input is not read while it is pending */
    tmx_boot_hdr_t ohdr;
    size_t ohdr_sent;
    int out_pending;
    tmxrun_buf_t *obuf;
    size_t obuf_sent;
} tmxrun_conn_t;

typedef struct tmxrun {
    tmxrun_opts_t opts;
    tmxrun_rank_t *ranks;
    int nlocal;  /* ranks started here */
    int nremote; /* ranks started elsewhere */
    double remote_deadline; /* when the remote ranks must have joined */
    int nalive;
    pid_t pgid;
    tmxrun_conn_t *conns;
    int nconns_max;
    int *free_conns;      /* a stack of the free slots of conns */
    struct rlimit nofile; /* RLIMIT_NOFILE as we found it */
    int nofile_set;       /* ... and raised since */
    int nfree;
    int nsilent;       /* connections that have not said hello */
    int njoined;       /* ranks that said hello */
    unsigned ndropped; /* strangers dropped */
    int listen_fd;
    uint64_t cookie;
    tmx_topo_t *topo;          /* NULL: no hwloc or no topology; nothing is bound */
    tmx_topo_place_t *places;  /* per rank, with topo */
    /* Oversubscribed by default (not bound): the cores the ranks start on, one each round-robin,
     * so that the job starts evenly spread; they get places[].cpus back (the allowed CPUs) when
     * the first allgather completes, i.e. once every rank is up. NULL otherwise. */
    tmx_topo_place_t *start;
    int               released; /* start's bindings were given back */
    double            release_deadline; /* ... at the latest (a program without tmx_job) */
    int bind;                  /* what the ranks are bound to (tmx_topo_level_t) */
    char topo_err[256];        /* why topo is NULL */
    /* the allgather in progress */
    tmxrun_buf_t *round;
    uint32_t round_len;
    int round_count;
    unsigned round_no;
    /* ending */
    int exit_code; /* first failure, -1 none */
    int killing;   /* SIGTERM sent to the ranks */
    double kill_deadline;
    int sigkilled;
    double deadline; /* --timeout, 0 none */
    int timed_out;
    int user_sig;
} tmxrun_t;

static int tmxrun_sigpipe[2] = {-1, -1};

static double tmxrun_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void tmxrun_msg(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void tmxrun_msg(const char *fmt, ...)
{
    char buf[1024] = "tmxrun: ";
    size_t pre     = strlen(buf);
    va_list ap;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(buf + pre, sizeof(buf) - pre - 1, fmt, ap);
    va_end(ap);
    if (n < 0) {
        return;
    }
    if ((size_t)n > sizeof(buf) - pre - 2) {
        n = (int)(sizeof(buf) - pre - 2);
    }
    buf[pre + (size_t)n] = '\n';
    /* one write, so that the message is not torn by the ranks' output */
    if (write(STDERR_FILENO, buf, pre + (size_t)n + 1) < 0) {
        return;
    }
}

static void tmxrun_usage(FILE *stream)
{
    fprintf(stream,
            "usage: tmxrun -n N [--timeout SEC] [--bind-to LEVEL] [--map-by LEVEL]\n"
            "              [--report-bindings] [--tag-output] [--boot-listen IP[:PORT]]\n"
            "              [--local-ranks LIST] [--boot-addr-file FILE] [--remote-timeout SEC]\n"
            "              [--] prog [args...]\n"
            "  -n N                 start N ranks (1..%d) of prog on this host\n"
            "  --timeout SEC        kill the job after SEC seconds and exit 124\n"
            "  --bind-to LEVEL      none|core|numa|socket: bind each rank to the allowed CPUs\n"
            "                       of its core, NUMA node or socket (default: core when N <=\n"
            "                       allowed cores; when oversubscribed none, each rank\n"
            "                       starting on one core until all have joined; needs hwloc)\n"
            "  --map-by LEVEL       core|numa|socket: rank r goes to the next allowed core, or\n"
            "                       round-robin over NUMA nodes or sockets (default: core)\n"
            "  --report-bindings    print each rank's binding on stderr\n"
            "  --tag-output         prefix every output line with [rank]\n"
            "  --boot-listen IP[:PORT]  serve the bootstrap on this IPv4 address of this host\n"
            "                       (default 127.0.0.1, an ephemeral port), for remote ranks\n"
            "  --local-ranks LIST   start only these ranks here (e.g. 0 or 0-3,8); the others\n"
            "                       are started elsewhere with TMX_RANK, TMX_SIZE and the\n"
            "                       TMX_BOOT_ADDR this prints (or writes to --boot-addr-file)\n"
            "  --boot-addr-file FILE  write TMX_BOOT_ADDR (with its cookie) to FILE, mode 0600\n"
            "  --remote-timeout SEC fail the job when a remote rank has not joined in SEC s\n"
            "                       (default %g)\n"
            "  -h, --help           this text\n",
            TMX_BOOT_MAX_SIZE, TMXRUN_REMOTE_TIME);
}

/* ------------------------------------------------------------------ arguments */

static int tmxrun_parse_np(const char *s, int *np_p)
{
    char *end;
    long v;

    if (s == NULL || !isdigit((unsigned char)s[0])) {
        tmxrun_msg("-n needs a number of ranks, got '%s'", s != NULL ? s : "");
        return -1;
    }
    errno = 0;
    v     = strtol(s, &end, 10);
    if (errno != 0 || *end != '\0' || v < 1 || v > TMX_BOOT_MAX_SIZE) {
        tmxrun_msg("-n %s: the number of ranks must be 1..%d", s, TMX_BOOT_MAX_SIZE);
        return -1;
    }
    *np_p = (int)v;
    return 0;
}

static int tmxrun_parse_timeout(const char *opt, const char *s, double *t_p)
{
    char *end;
    double v;

    if (s == NULL || !(isdigit((unsigned char)s[0]) || s[0] == '.')) {
        tmxrun_msg("%s needs a number of seconds, got '%s'", opt, s != NULL ? s : "");
        return -1;
    }
    errno = 0;
    v     = strtod(s, &end);
    if (errno != 0 || *end != '\0' || !isfinite(v) || v <= 0 || v > 1e8) {
        tmxrun_msg("%s %s: seconds must be a positive number", opt, s);
        return -1;
    }
    *t_p = v;
    return 0;
}

/* --boot-listen IP or IP:PORT: a unicast IPv4 address of this host that the remote ranks can
 * reach (it goes into TMX_BOOT_ADDR, so the wildcard 0.0.0.0 is refused). */
static int tmxrun_parse_listen(const char *s, tmxrun_opts_t *o)
{
    char host[INET_ADDRSTRLEN];
    const char *colon = (s != NULL) ? strchr(s, ':') : NULL;
    size_t hlen       = (s == NULL) ? 0 : (colon != NULL) ? (size_t)(colon - s) : strlen(s);
    uint32_t a;

    if (s == NULL || hlen == 0 || hlen >= sizeof(host)) {
        goto bad;
    }
    memcpy(host, s, hlen);
    host[hlen] = '\0';
    if (inet_pton(AF_INET, host, &o->listen_ip) != 1) {
        goto bad;
    }
    a = ntohl(o->listen_ip.s_addr);
    if (a == INADDR_ANY || a == INADDR_BROADCAST || (a >> 28) == 0xe) {
        tmxrun_msg("--boot-listen %s: give the address of this host the remote ranks connect "
                   "to, not a wildcard, broadcast or multicast one", s);
        return -1;
    }
    o->listen_port = 0;
    if (colon != NULL) {
        char *end;
        unsigned long port;

        if (!isdigit((unsigned char)colon[1])) {
            goto bad;
        }
        errno = 0;
        port  = strtoul(colon + 1, &end, 10);
        if (errno != 0 || *end != '\0' || port > 65535) {
            goto bad;
        }
        o->listen_port = (uint16_t)port;
    }
    return 0;
bad:
    tmxrun_msg("--boot-listen takes an IPv4 address and optionally :PORT (0..65535), got '%s'",
               s != NULL ? s : "");
    return -1;
}

/* --local-ranks LIST: ranks and ranges, "0", "0-3,8"; marks them in local[np]. */
static int tmxrun_parse_local(const char *s, int np, char *local)
{
    const char *p = s;

    if (s == NULL || *s == '\0') {
        goto bad;
    }
    for (;;) {
        char *end;
        long lo, hi;

        if (!isdigit((unsigned char)*p)) {
            goto bad;
        }
        errno = 0;
        lo    = strtol(p, &end, 10);
        hi    = lo;
        if (errno == 0 && *end == '-' && isdigit((unsigned char)end[1])) {
            hi = strtol(end + 1, &end, 10);
        }
        if (errno != 0 || lo < 0 || hi < lo || hi >= np || (*end != ',' && *end != '\0')) {
            tmxrun_msg("--local-ranks %s: each rank must be in 0..%d, each range low-high", s,
                       np - 1);
            return -1;
        }
        for (long r = lo; r <= hi; r++) {
            local[r] = 1;
        }
        if (*end == '\0') {
            return 0;
        }
        p = end + 1;
    }
bad:
    tmxrun_msg("--local-ranks takes a list of ranks and ranges such as 0 or 0-3,8, got '%s'",
               s != NULL ? s : "");
    return -1;
}

/* Finds prog the way execvp would and checks that it can be executed, so that a typo is a
 * clear usage error before any rank starts. */
static int tmxrun_resolve(const char *prog, char *out, size_t outlen)
{
    struct stat st;
    const char *path;
    const char *p;

    if (prog[0] == '\0') {
        tmxrun_msg("empty program name");
        return -1;
    }
    if (strchr(prog, '/') != NULL) {
        if (stat(prog, &st) != 0) {
            tmxrun_msg("cannot execute '%s': %s", prog, strerror(errno));
            return -1;
        }
        if (!S_ISREG(st.st_mode) || access(prog, X_OK) != 0) {
            tmxrun_msg("cannot execute '%s': not an executable file", prog);
            return -1;
        }
        if (strlen(prog) >= outlen) {
            tmxrun_msg("program path too long");
            return -1;
        }
        strcpy(out, prog);
        return 0;
    }
    path = getenv("PATH");
    if (path == NULL) {
        path = "/usr/local/bin:/usr/bin:/bin";
    }
    for (p = path;;) {
        const char *end = strchr(p, ':');
        size_t dlen     = (end != NULL) ? (size_t)(end - p) : strlen(p);
        int n;

        /* an empty PATH entry means the current directory */
        n = snprintf(out, outlen, "%.*s%s%s", (int)dlen, p, dlen > 0 ? "/" : "", prog);
        if (n > 0 && (size_t)n < outlen && stat(out, &st) == 0 && S_ISREG(st.st_mode) &&
            access(out, X_OK) == 0) {
            return 0;
        }
        if (end == NULL) {
            break;
        }
        p = end + 1;
    }
    tmxrun_msg("cannot execute '%s': not found in PATH or not executable", prog);
    return -1;
}

/* a is the option name, alone or followed by =value */
static int tmxrun_is_opt(const char *a, const char *name)
{
    size_t n = strlen(name);

    return strncmp(a, name, n) == 0 && (a[n] == '\0' || a[n] == '=');
}

/* 0 ok, 1 help printed, -1 usage error */
static int tmxrun_parse_args(int argc, char **argv, tmxrun_opts_t *opts)
{
    int i;

    memset(opts, 0, sizeof(*opts));
    opts->bind             = TMXRUN_AUTO;
    opts->map_by           = TMXRUN_AUTO;
    opts->listen_ip.s_addr = htonl(INADDR_LOOPBACK);
    opts->remote_timeout   = TMXRUN_REMOTE_TIME;
    for (i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *val;

        if (strcmp(a, "--") == 0) {
            i++;
            break;
        } else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            tmxrun_usage(stdout);
            return 1;
        } else if (strcmp(a, "-n") == 0 || strcmp(a, "--np") == 0) {
            if (i + 1 >= argc) {
                tmxrun_msg("%s needs a number of ranks", a);
                return -1;
            }
            if (tmxrun_parse_np(argv[++i], &opts->np) != 0) {
                return -1;
            }
        } else if (strncmp(a, "-n", 2) == 0 && isdigit((unsigned char)a[2])) {
            if (tmxrun_parse_np(a + 2, &opts->np) != 0) {
                return -1;
            }
        } else if (strcmp(a, "--timeout") == 0 || strncmp(a, "--timeout=", 10) == 0) {
            val = (a[9] == '=') ? a + 10 : ((i + 1 < argc) ? argv[++i] : NULL);
            if (tmxrun_parse_timeout("--timeout", val, &opts->timeout) != 0) {
                return -1;
            }
        } else if (tmxrun_is_opt(a, "--bind-to") || tmxrun_is_opt(a, "--bind") ||
                   tmxrun_is_opt(a, "--map-by")) {
            /* --bind is the older spelling of --bind-to */
            int map             = (a[2] == 'm');
            const char *eq      = strchr(a, '=');
            tmx_topo_level_t lv = TMX_TOPO_NONE;
            val = (eq != NULL) ? eq + 1 : ((i + 1 < argc) ? argv[++i] : NULL);
            if (tmx_topo_level_parse(val, &lv) != 0 || (map && lv == TMX_TOPO_NONE)) {
                tmxrun_msg("%.*s takes %s, got '%s'", (int)(eq != NULL ? eq - a : (long)strlen(a)),
                           a, map ? "core, numa or socket" : "none, core, numa or socket",
                           val != NULL ? val : "");
                return -1;
            }
            *(map ? &opts->map_by : &opts->bind) = (int)lv;
        } else if (strcmp(a, "--report-bindings") == 0) {
            opts->report = 1;
        } else if (strcmp(a, "--tag-output") == 0) {
            opts->tag_output = 1;
        } else if (tmxrun_is_opt(a, "--boot-listen") || tmxrun_is_opt(a, "--local-ranks") ||
                   tmxrun_is_opt(a, "--boot-addr-file") || tmxrun_is_opt(a, "--remote-timeout")) {
            const char *eq = strchr(a, '=');
            val = (eq != NULL) ? eq + 1 : ((i + 1 < argc) ? argv[++i] : NULL);
            if (val == NULL) {
                tmxrun_msg("%s needs a value", a);
                return -1;
            }
            if (a[2] == 'b' && a[7] == 'l') { /* --boot-listen */
                if (tmxrun_parse_listen(val, opts) != 0) {
                    return -1;
                }
            } else if (a[2] == 'l') {
                opts->local_spec = val; /* checked once -n is known */
            } else if (a[2] == 'b') {
                if (val[0] == '\0') {
                    tmxrun_msg("--boot-addr-file needs a file name");
                    return -1;
                }
                opts->addr_file = val;
            } else {
                double t = 0;
                if (tmxrun_parse_timeout("--remote-timeout", val, &t) != 0) {
                    return -1;
                }
                opts->remote_timeout = t;
            }
        } else if (a[0] == '-' && a[1] != '\0') {
            tmxrun_msg("unknown option '%s' (try --help)", a);
            return -1;
        } else {
            break; /* the program: everything after it is its own */
        }
    }
    if (opts->np == 0) {
        tmxrun_msg("missing -n N (the number of ranks)");
        return -1;
    }
    if (i >= argc) {
        tmxrun_msg("missing the program to run");
        return -1;
    }
    opts->argv = &argv[i];
    return tmxrun_resolve(argv[i], opts->path, sizeof(opts->path));
}

/* ------------------------------------------------------------------ signals and killing */

static void tmxrun_on_signal(int sig)
{
    int saved       = errno;
    unsigned char b = (unsigned char)sig;

    /* a full pipe drops the byte; the loop then still wakes for the ones already queued */
    if (write(tmxrun_sigpipe[1], &b, 1) < 0) {
        (void)0;
    }
    errno = saved;
}

static int tmxrun_signals_setup(void)
{
    static const int sigs[] = {SIGCHLD, SIGINT, SIGTERM, SIGHUP, SIGQUIT};
    struct sigaction sa;

    if (pipe2(tmxrun_sigpipe, O_CLOEXEC | O_NONBLOCK) != 0) {
        tmxrun_msg("pipe: %s", strerror(errno));
        return -1;
    }
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = tmxrun_on_signal;
    sa.sa_flags   = SA_RESTART | SA_NOCLDSTOP;
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++) {
        sigaction(sigs[i], &sa, NULL);
    }
    /* a rank that closes its socket or an output reader that goes away must not kill us */
    signal(SIGPIPE, SIG_IGN);
    return 0;
}

static void tmxrun_signal_ranks(tmxrun_t *run, int sig)
{
    int any = 0;

    for (int r = 0; r < run->opts.np; r++) {
        if (run->ranks[r].alive) {
            kill(run->ranks[r].pid, sig);
            any = 1;
        }
    }
    /* The group also holds what the ranks started (a shell's children). Only while a rank is
     * unreaped: then the group id cannot have been reused by another process. */
    if (any && run->pgid > 0) {
        kill(-run->pgid, sig);
    }
}

static void tmxrun_conn_close(tmxrun_t *run, int c);

/* Best effort: a rank whose socket is full learns of the abort from the close. */
static void tmxrun_send_abort(tmxrun_conn_t *cn, int blamed)
{
    tmx_boot_hdr_t hdr;

    tmx_boot_hdr_pack(&hdr, TMX_BOOT_OP_ABORT, (uint32_t)blamed, 0);
    if (cn->ohdr_sent == 0 && cn->obuf_sent == 0 &&
        send(cn->fd, &hdr, sizeof(hdr), MSG_NOSIGNAL | MSG_DONTWAIT) < 0) {
        (void)0;
    }
}

/* The ranks we cannot signal learn that the job ends: an ABORT (their tmx_job call fails)
 * and the close of their bootstrap connection. */
static void tmxrun_abort_remote(tmxrun_t *run)
{
    for (int r = 0; r < run->opts.np; r++) {
        int c = run->ranks[r].conn;
        if (run->ranks[r].remote && c >= 0) {
            tmxrun_send_abort(&run->conns[c], -1);
            tmxrun_conn_close(run, c);
        }
    }
}

static void tmxrun_kill_all(tmxrun_t *run)
{
    if (!run->killing) {
        run->killing       = 1;
        run->kill_deadline = tmxrun_now() + TMXRUN_KILL_GRACE;
        tmxrun_signal_ranks(run, SIGTERM);
        tmxrun_abort_remote(run);
    }
}

/* The job fails for a reason of the bootstrap (not a rank's exit): say why, tell the ranks
 * that are connected (their tmx_job call returns an error instead of waiting for the kill)
 * and kill them. */
static void tmxrun_fail(tmxrun_t *run, int blamed, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void tmxrun_fail(tmxrun_t *run, int blamed, const char *fmt, ...)
{
    char buf[512];
    va_list ap;

    if (run->killing) {
        return; /* the first failure is the one reported */
    }
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    tmxrun_msg("bootstrap: %s; killing the job", buf);
    if (run->exit_code < 0) {
        run->exit_code = TMXRUN_EXIT_FAILED;
    }
    for (int c = 0; c < run->nconns_max; c++) {
        if (run->conns[c].fd >= 0 && run->conns[c].rank >= 0) {
            tmxrun_send_abort(&run->conns[c], blamed);
        }
        if (run->conns[c].fd >= 0) {
            tmxrun_conn_close(run, c);
        }
    }
    if (run->listen_fd >= 0) {
        close(run->listen_fd);
        run->listen_fd = -1;
    }
    tmxrun_kill_all(run);
}

/* ------------------------------------------------------------------ starting the ranks */

/* Where the ranks go (src/topo): the default binds to cores when every rank has one of the
 * allowed cores, as Open MPI does, and binds nothing when they are oversubscribed or the
 * topology is unknown; a binding asked for by name without a topology is a usage error. */
static int tmxrun_place(tmxrun_t *run)
{
    tmxrun_opts_t *o    = &run->opts;
    int            asked = (o->bind != TMXRUN_AUTO && o->bind != TMX_TOPO_NONE) ||
                           o->map_by != TMXRUN_AUTO;
    char           err[256];
    int            ncores;

    run->bind = TMX_TOPO_NONE;
    if (tmx_topo_open(&run->topo, run->topo_err, sizeof(run->topo_err)) != TMX_OK) {
        run->topo = NULL;
        if (asked) {
            tmxrun_msg("%s %s: cannot bind: %s", o->map_by != TMXRUN_AUTO ? "--map-by" : "--bind-to",
                       tmx_topo_level_name((tmx_topo_level_t)(o->map_by != TMXRUN_AUTO ? o->map_by
                                                                                      : o->bind)),
                       run->topo_err);
            return -1;
        }
        return 0;
    }
    ncores = tmx_topo_count(run->topo, TMX_TOPO_CORE);
    /* only the ranks started here are placed (--local-ranks), in the order of their ranks */
    if (o->bind == TMXRUN_AUTO) {
        run->bind = (run->nlocal <= ncores) ? TMX_TOPO_CORE : TMX_TOPO_NONE;
    } else {
        run->bind = o->bind;
    }
    if (run->bind == TMX_TOPO_CORE && run->nlocal > ncores) {
        tmxrun_msg("--bind-to core: %d ranks on %d allowed cores: ranks share cores", run->nlocal,
                   ncores);
    }
    run->places = calloc((size_t)run->nlocal, sizeof(*run->places));
    if (run->places == NULL) {
        tmxrun_msg("out of memory");
        return -1;
    }
    if (tmx_topo_map(run->topo, run->nlocal,
                     (tmx_topo_level_t)(o->map_by == TMXRUN_AUTO ? TMX_TOPO_CORE : o->map_by),
                     (tmx_topo_level_t)run->bind, run->places, err, sizeof(err)) != TMX_OK) {
        tmxrun_msg("mapping %d ranks: %s", run->nlocal, err);
        return -1;
    }
    /* Oversubscribed and nothing asked: the ranks are free to move (an even binding cannot
     * leave a core another busy process holds), but they start spread evenly over the cores,
     * which the kernel's placement of processes that start, sleep and spin by turns often is
     * not for the first hundreds of ms (bench/README.md, h-a2a5). Released at the first
     * allgather, before any of them can have sent a message. */
    if (o->bind == TMXRUN_AUTO && o->map_by == TMXRUN_AUTO && run->bind == TMX_TOPO_NONE &&
        tmx_topo_this_system(run->topo)) {
        run->start = calloc((size_t)run->nlocal, sizeof(*run->start));
        if (run->start == NULL ||
            tmx_topo_map(run->topo, run->nlocal, TMX_TOPO_CORE, TMX_TOPO_CORE, run->start, err,
                         sizeof(err)) != TMX_OK) {
            free(run->start); /* not needed to run: the ranks start where the kernel puts them */
            run->start = NULL;
        }
    }
    return 0;
}

/* --report-bindings: one line per rank, which the tests read. */
static void tmxrun_report(tmxrun_t *run, int rank, pid_t pid)
{
    int li                     = run->ranks[rank].local_idx;
    const tmx_topo_place_t *pl = (run->places != NULL) ? &run->places[li] : NULL;
    char numa[32];

    if (pl == NULL) {
        tmxrun_msg("rank %d (pid %d) not bound: topology unknown: %s", rank, (int)pid,
                   run->topo_err);
        return;
    }
    if (pl->numa >= 0) {
        snprintf(numa, sizeof(numa), "numa node %d", pl->numa);
    } else {
        snprintf(numa, sizeof(numa), "several numa nodes");
    }
    if (pl->bind_index < 0 && run->start != NULL) {
        tmxrun_msg("rank %d (pid %d) not bound: cpus %s (%s), starts on core %d: cpus %s", rank,
                   (int)pid, pl->cpus, numa, run->start[li].bind_index, run->start[li].cpus);
    } else if (pl->bind_index < 0) {
        tmxrun_msg("rank %d (pid %d) not bound: cpus %s (%s)", rank, (int)pid, pl->cpus, numa);
    } else {
        tmxrun_msg("rank %d (pid %d) bound to %s %d: cpus %s (%s)%s", rank, (int)pid,
                   tmx_topo_level_name((tmx_topo_level_t)run->bind), pl->bind_index, pl->cpus,
                   numa, tmx_topo_this_system(run->topo) ? "" : " [not applied: not this machine]");
    }
}

static int tmxrun_listen(tmxrun_t *run)
{
    struct sockaddr_in sin;
    socklen_t slen = sizeof(sin);
    uint64_t cookie;
    /* room for every rank to connect at once; the kernel caps it at net.core.somaxconn, and
     * a rank whose connection overflows it retries (its SYN is dropped and sent again) */
    int backlog = (run->opts.np + TMXRUN_MAX_STRAYS > SOMAXCONN) ? run->opts.np + TMXRUN_MAX_STRAYS
                                                                 : SOMAXCONN;

    if (getrandom(&cookie, sizeof(cookie), 0) != (ssize_t)sizeof(cookie)) {
        tmxrun_msg("getrandom: %s", strerror(errno));
        return -1;
    }
    run->cookie    = cookie;
    run->listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (run->listen_fd < 0) {
        tmxrun_msg("bootstrap socket: %s", strerror(errno));
        return -1;
    }
    /* 127.0.0.1 unless --boot-listen names another address of this host */
    memset(&sin, 0, sizeof(sin));
    sin.sin_family = AF_INET;
    sin.sin_addr   = run->opts.listen_ip;
    sin.sin_port   = htons(run->opts.listen_port);
    if (run->opts.listen_port != 0) {
        /* a fixed port: a previous job's connections in TIME_WAIT must not block it */
        int one = 1;
        setsockopt(run->listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    }
    if (bind(run->listen_fd, (struct sockaddr *)&sin, sizeof(sin)) != 0 ||
        listen(run->listen_fd, backlog) != 0 ||
        getsockname(run->listen_fd, (struct sockaddr *)&sin, &slen) != 0) {
        char host[INET_ADDRSTRLEN] = "?";
        inet_ntop(AF_INET, &run->opts.listen_ip, host, sizeof(host));
        tmxrun_msg("bootstrap listener on %s:%u: %s", host, (unsigned)run->opts.listen_port,
                   strerror(errno));
        return -1;
    }
    return ntohs(sin.sin_port);
}

static void tmxrun_setenv_int(const char *name, int v)
{
    char buf[16];

    snprintf(buf, sizeof(buf), "%d", v);
    setenv(name, buf, 1);
}

/* In the child, between fork and exec. Only the rank's own setup; any failure is reported and
 * ends the child with 127 like a shell does for a program it cannot run. The child starts
 * with every signal blocked (tmxrun_spawn): until its handlers are back to SIG_DFL, a signal
 * would run tmxrun's handler, which writes to the launcher's signal pipe (the launcher would
 * take the ranks' SIGTERM for its own) and swallows the signal (the rank would live on). */
static void tmxrun_child(tmxrun_t *run, int rank, const char *addr, int outfd[2], pid_t parent)
{
    struct sigaction sa;
    sigset_t none;
    int li = run->ranks[rank].local_idx;

    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = SIG_DFL;
    sigemptyset(&sa.sa_mask);
    for (int s = 1; s < NSIG; s++) {
        sigaction(s, &sa, NULL);
    }
    /* a rank starts with nothing blocked, whatever tmxrun inherited (its kill must work); a
     * signal that came since the fork is delivered now, with its default action */
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    /* the ranks form one process group, so that killing it reaches what they started */
    setpgid(0, run->pgid);
    /* the open-file limit raised for the launcher's connections is not the rank's */
    if (run->nofile_set) {
        setrlimit(RLIMIT_NOFILE, &run->nofile);
    }
    /* a launcher killed with SIGKILL cannot clean up: the kernel kills the ranks for it */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) {
        _exit(127);
    }
    if (run->opts.tag_output) {
        if (dup2(outfd[0], STDOUT_FILENO) < 0 || dup2(outfd[1], STDERR_FILENO) < 0) {
            _exit(127);
        }
    }
    /* Only rank 0 may read our stdin, and only when it is not a terminal: the ranks run in
     * their own process group, where a terminal read would stop them (SIGTTIN). */
    if (rank != 0 || isatty(STDIN_FILENO)) {
        int fd = open("/dev/null", O_RDONLY);
        if (fd >= 0) {
            dup2(fd, STDIN_FILENO);
            close(fd);
        }
    }
    tmxrun_setenv_int("TMX_RANK", rank);
    tmxrun_setenv_int("TMX_SIZE", run->opts.np);
    tmxrun_setenv_int("TMX_LOCAL_RANK", li);
    /* The processes that compete for this rank's CPUs: all of this host's, or with binding
     * those bound to the same CPUs (the library compares it with its affinity mask). The
     * binding and the NUMA node, so that the library need not load the topology again. */
    if (run->places != NULL) {
        const tmx_topo_place_t *pl = &run->places[li];
        /* A rank that starts on one core (run->start) reads its local size there, before the
         * release: the ranks started on that core, as many per CPU as it will have later. */
        tmxrun_setenv_int("TMX_LOCAL_SIZE",
                          (run->start != NULL) ? run->start[li].local_size : pl->local_size);
        setenv("TMX_BIND", tmx_topo_level_name((tmx_topo_level_t)run->bind), 1);
        if (pl->bind_index >= 0) {
            setenv("TMX_BIND_CPUS", pl->cpus, 1);
        } else {
            unsetenv("TMX_BIND_CPUS");
        }
        tmxrun_setenv_int("TMX_NUMA_NODE", pl->numa);
    } else {
        tmxrun_setenv_int("TMX_LOCAL_SIZE", run->nlocal);
        setenv("TMX_BIND", "none", 1);
        unsetenv("TMX_BIND_CPUS");
        unsetenv("TMX_NUMA_NODE");
    }
    setenv("TMX_BOOT_ADDR", addr, 1);
    if (run->places != NULL && run->places[li].bind_index >= 0 &&
        tmx_topo_this_system(run->topo) && tmx_topo_bind(run->topo, run->places[li].cpus) != 0) {
        fprintf(stderr, "tmxrun: rank %d: binding to cpus %s failed: %s\n", rank,
                run->places[li].cpus, strerror(errno));
        if (run->opts.bind != TMXRUN_AUTO) {
            _exit(127);
        }
    }
    /* only where it starts; a rank forked after the release (a slow start of many ranks,
     * past TMXRUN_RELEASE_TIME) starts free */
    if (run->start != NULL && !run->released) {
        (void)tmx_topo_bind(run->topo, run->start[li].cpus);
    }
    execv(run->opts.path, run->opts.argv);
    fprintf(stderr, "tmxrun: rank %d: cannot execute '%s': %s\n", rank, run->opts.path,
            strerror(errno));
    _exit(127);
}

static int tmxrun_spawn(tmxrun_t *run, const char *addr)
{
    pid_t parent = getpid();
    sigset_t all;
    sigset_t mask;

    sigfillset(&all);

    for (int r = 0; r < run->opts.np; r++) {
        tmxrun_rank_t *rk = &run->ranks[r];
        int pout[2]       = {-1, -1};
        int perr[2]       = {-1, -1};
        int child[2]      = {-1, -1};
        pid_t pid;

        if (rk->remote) {
            continue; /* started elsewhere */
        }
        if (run->opts.tag_output) {
            if (pipe2(pout, O_CLOEXEC) != 0 || pipe2(perr, O_CLOEXEC) != 0) {
                tmxrun_msg("pipe for rank %d: %s", r, strerror(errno));
                goto err_pipes;
            }
            child[0] = pout[1];
            child[1] = perr[1];
        }
        /* see tmxrun_child; our own signals wait until the fork is done */
        sigprocmask(SIG_BLOCK, &all, &mask);
        pid = fork();
        if (pid == 0) {
            tmxrun_child(run, r, addr, child, parent);
        }
        sigprocmask(SIG_SETMASK, &mask, NULL);
        if (pid < 0) {
            tmxrun_msg("fork for rank %d: %s", r, strerror(errno));
            goto err_pipes;
        }
        /* also in the parent: whichever runs first, the child is in the group before we
         * might signal the group */
        if (run->pgid == 0) {
            run->pgid = pid;
        }
        setpgid(pid, run->pgid);
        rk->pid   = pid;
        rk->alive = 1;
        run->nalive++;
        if (run->opts.report) {
            tmxrun_report(run, r, pid);
        }
        if (run->opts.tag_output) {
            close(pout[1]);
            close(perr[1]);
            fcntl(pout[0], F_SETFL, O_NONBLOCK);
            fcntl(perr[0], F_SETFL, O_NONBLOCK);
            rk->out[0].fd = pout[0];
            rk->out[1].fd = perr[0];
        }
        continue;
    err_pipes:
        for (int k = 0; k < 2; k++) {
            if (pout[k] >= 0) {
                close(pout[k]);
            }
            if (perr[k] >= 0) {
                close(perr[k]);
            }
        }
        return -1;
    }
    return 0;
}

/* ------------------------------------------------------------------ reaping */

static void tmxrun_reap(tmxrun_t *run)
{
    int st;
    pid_t pid;

    while ((pid = waitpid(-1, &st, WNOHANG)) > 0) {
        int r;
        int code;

        for (r = 0; r < run->opts.np; r++) {
            if (run->ranks[r].pid == pid && run->ranks[r].alive) {
                break;
            }
        }
        if (r == run->opts.np) {
            continue;
        }
        run->ranks[r].alive = 0;
        run->nalive--;
        code = WIFEXITED(st) ? WEXITSTATUS(st) : (WIFSIGNALED(st) ? 128 + WTERMSIG(st) : 1);
        if (code == 0) {
            continue;
        }
        if (!run->killing) {
            if (WIFSIGNALED(st)) {
                tmxrun_msg("rank %d (pid %d) was killed by signal %d (%s)%s", r, (int)pid,
                           WTERMSIG(st), strsignal(WTERMSIG(st)),
                           run->nalive > 0 ? "; killing the other ranks" : "");
            } else {
                tmxrun_msg("rank %d (pid %d) exited with status %d%s", r, (int)pid, code,
                           run->nalive > 0 ? "; killing the other ranks" : "");
            }
        }
        if (run->exit_code < 0) {
            run->exit_code = code;
        }
        tmxrun_kill_all(run);
    }
}

/* ------------------------------------------------------------------ forwarded output */

static void tmxrun_write_all(int fd, const char *buf, size_t len)
{
    while (len > 0) {
        ssize_t n = write(fd, buf, len);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            return; /* our reader went away: the output is lost, the job goes on */
        }
        buf += n;
        len -= (size_t)n;
    }
}

static void tmxrun_emit_line(int rank, int dest, const char *line, size_t len)
{
    char buf[TMXRUN_LINE_MAX + 32];
    int n = snprintf(buf, sizeof(buf), "[%d] ", rank);

    if (len > TMXRUN_LINE_MAX) {
        len = TMXRUN_LINE_MAX;
    }
    memcpy(buf + n, line, len);
    buf[(size_t)n + len] = '\n';
    tmxrun_write_all(dest, buf, (size_t)n + len + 1);
}

/* Reads what the pipe has; returns 0 while it stays open. */
static int tmxrun_out_read(tmxrun_out_t *o, int rank)
{
    char buf[8192];
    ssize_t n;

    for (;;) {
        n = read(o->fd, buf, sizeof(buf));
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            return 0;
        }
        if (n <= 0) {
            break;
        }
        for (ssize_t i = 0; i < n; i++) {
            if (buf[i] == '\n') {
                tmxrun_emit_line(rank, o->dest, o->line, o->used);
                o->used = 0;
            } else {
                if (o->used == TMXRUN_LINE_MAX) {
                    /* a line longer than the buffer goes out in pieces, each tagged */
                    tmxrun_emit_line(rank, o->dest, o->line, o->used);
                    o->used = 0;
                }
                o->line[o->used++] = buf[i];
            }
        }
    }
    if (o->used > 0) {
        tmxrun_emit_line(rank, o->dest, o->line, o->used);
        o->used = 0;
    }
    close(o->fd);
    o->fd = -1;
    return -1;
}

/* ------------------------------------------------------------------ bootstrap connections */

static void tmxrun_buf_put(tmxrun_buf_t *b)
{
    if (b != NULL && --b->refcnt == 0) {
        free(b);
    }
}

static void tmxrun_conn_close(tmxrun_t *run, int c)
{
    tmxrun_conn_t *cn = &run->conns[c];

    if (cn->rank >= 0 && cn->in_payload && cn->hdr.op == TMX_BOOT_OP_ALLGATHER &&
        run->round_count == 0) {
        /* a partial first contribution: the next rank to come sets the length, not this one */
        tmxrun_buf_put(run->round);
        run->round     = NULL;
        run->round_len = 0;
    }
    if (cn->rank >= 0) {
        tmxrun_rank_t *rk = &run->ranks[cn->rank];
        rk->conn          = -1;
        rk->left          = 1;
        rk->left_time     = tmxrun_now();
    } else {
        run->nsilent--;
    }
    close(cn->fd);
    tmxrun_buf_put(cn->obuf);
    memset(cn, 0, sizeof(*cn));
    cn->fd                        = -1;
    cn->rank                      = -1;
    run->free_conns[run->nfree++] = c;
}

/* A connection that is not (or not yet) a rank of this job is dropped: the first few are
 * reported one by one, the rest only counted, so that a flood of them does not flood stderr. */
static void tmxrun_drop(tmxrun_t *run, int c, const char *why)
{
    run->ndropped++;
    if (run->ndropped <= TMXRUN_DROP_MSGS) {
        tmxrun_msg("bootstrap: dropped a connection %s%s", why,
                   (run->ndropped == TMXRUN_DROP_MSGS) ? " (further drops are only counted)" : "");
    }
    tmxrun_conn_close(run, c);
}

static void tmxrun_conn_send(tmxrun_conn_t *cn, tmx_boot_op_t op, uint32_t arg, tmxrun_buf_t *b)
{
    tmx_boot_hdr_pack(&cn->ohdr, op, arg, (b != NULL) ? (uint32_t)b->len : 0);
    cn->ohdr_sent   = 0;
    cn->obuf        = b;
    cn->obuf_sent   = 0;
    cn->out_pending = 1;
    if (b != NULL) {
        b->refcnt++;
    }
}

static void tmxrun_conn_input(tmxrun_t *run, int c);

/* The connection that has been silent the longest; -1 if none is. */
static int tmxrun_oldest_silent(tmxrun_t *run)
{
    int oldest = -1;

    for (int c = 0; c < run->nconns_max; c++) {
        if (run->conns[c].fd >= 0 && run->conns[c].rank < 0 &&
            (oldest < 0 || run->conns[c].hello_deadline < run->conns[oldest].hello_deadline)) {
            oldest = c;
        }
    }
    return oldest;
}

/* Takes every pending connection. Every rank that has not joined may have a connection that
 * has not spoken yet, so the silent ones may number those ranks plus TMXRUN_MAX_STRAYS; the
 * slots (ranks + TMXRUN_MAX_STRAYS) then always suffice, since a rank that joined holds one
 * slot at most. Beyond that the oldest silent connection makes room: strangers that flood us
 * only push each other out, and a rank that was pushed out connects again. */
static void tmxrun_accept(tmxrun_t *run)
{
    while (run->listen_fd >= 0) {
        int fd = accept4(run->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        int c;

        if (fd < 0) {
            return; /* EAGAIN, or a connection that went away before we took it */
        }
        if (run->nsilent >= run->opts.np - run->njoined + TMXRUN_MAX_STRAYS || run->nfree == 0) {
            c = tmxrun_oldest_silent(run);
            if (c < 0) {
                close(fd); /* cannot happen: the slots suffice, see above */
                continue;
            }
            tmxrun_drop(run, c, "that had not said hello, to make room for a new one");
        }
        if (run->nremote > 0) {
            /* a remote rank's host that dies, or a network that fails, closes nothing: TCP
             * keepalive finds out within about 11 s (5 idle, 3 probes 2 s apart) */
            int one = 1, idle = 5, intvl = 2, cnt = 3;
            setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
            setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
            setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl));
            setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt));
        }
        c = run->free_conns[--run->nfree];
        memset(&run->conns[c], 0, sizeof(run->conns[c]));
        run->conns[c].fd             = fd;
        run->conns[c].rank           = -1;
        run->conns[c].hello_deadline = tmxrun_now() + TMXRUN_HELLO_TIME;
        run->nsilent++;
        /* a rank sends its hello right after connecting: read it now if it is there, so that
         * the connection does not count as silent while the rest of the backlog is taken */
        tmxrun_conn_input(run, c);
    }
}

/* Is rank r known to be unable to join the allgather in progress? */
static int tmxrun_rank_absent(tmxrun_t *run, int r, double now)
{
    tmxrun_rank_t *rk = &run->ranks[r];

    if (rk->in_round) {
        return 0;
    }
    if (rk->bye) {
        return 1;
    }
    if (rk->conn >= 0) {
        return 0;
    }
    if (rk->remote) {
        /* no process to reap: a close without BYE is its death (tmxrun_rank_gone), one that
         * never joined fails at --remote-timeout (tmxrun_timers) */
        return rk->left;
    }
    /* closed without BYE: give the process time to be reaped, so that a rank that crashed is
     * reported with its exit status rather than as a bootstrap failure */
    if (rk->left) {
        return !rk->alive || now - rk->left_time > TMXRUN_LEFT_GRACE;
    }
    return !rk->alive; /* never connected: only once it has exited */
}

static void tmxrun_round_check(tmxrun_t *run)
{
    double now = tmxrun_now();

    if (run->round_count == 0 || run->killing) {
        return;
    }
    for (int r = 0; r < run->opts.np; r++) {
        if (tmxrun_rank_absent(run, r, now)) {
            tmxrun_fail(run, r, "rank %d %s without joining allgather #%u that %d rank(s) wait in",
                        r, run->ranks[r].alive ? "left the bootstrap" : "exited", run->round_no,
                        run->round_count);
            return;
        }
    }
}

/* Rank r's bootstrap connection ended (EOF, reset, a failed send) without a goodbye. A remote
 * rank has no process we could wait for: that close is its death, and the job fails at once
 * (its peers here could otherwise wait on it for ever outside the bootstrap). */
static void tmxrun_rank_gone(tmxrun_t *run, int r)
{
    if (r < 0) {
        return;
    }
    if (run->ranks[r].remote && !run->ranks[r].bye && !run->killing) {
        tmxrun_fail(run, r,
                    "rank %d (started elsewhere) closed its bootstrap connection without a "
                    "goodbye: it died, or its host or the network did",
                    r);
        return;
    }
    tmxrun_round_check(run);
}

/* Is pid a descendant of ancestor (within a few generations: a wrapper script and what it
 * runs)? The parent of each from /proc/PID/stat. */
static int tmxrun_descends(pid_t pid, pid_t ancestor)
{
    for (int depth = 0; depth < 8 && pid > 1; depth++) {
        char        buf[512];
        const char *p = tmx_proc_stat_field(tmx_proc_stat(pid, buf, sizeof(buf)), 4);
        int         ppid;

        if (p == NULL || (ppid = atoi(p)) <= 0) {
            return 0;
        }
        if (ppid == (int)ancestor) {
            return 1;
        }
        pid = (pid_t)ppid;
    }
    return 0;
}

static void tmxrun_give_back(tmxrun_t *run, int r, pid_t pid)
{
    const char *cpus = run->places[run->ranks[r].local_idx].cpus;

    if (tmx_topo_bind_pid(run->topo, pid, cpus) != 0 && errno != ESRCH) {
        tmxrun_msg("rank %d: giving back cpus %s after the start (pid %d): %s", r, cpus,
                   (int)pid, strerror(errno));
    }
}

/* Every rank is up (the first allgather is complete): the ranks that started on one core each
 * (run->start) get the allowed CPUs back before they learn the result. The process that said
 * hello may be a child of the one started (a wrapper): it is given them too, once it is known
 * to descend from it (the hello's pid is the rank's word, not to be trusted further). */
static void tmxrun_release_start(tmxrun_t *run)
{
    if (run->start == NULL || run->released) {
        return;
    }
    run->released = 1;
    for (int r = 0; r < run->opts.np; r++) {
        tmxrun_rank_t *rk = &run->ranks[r];
        if (rk->remote || !rk->alive || rk->pid <= 0) {
            continue;
        }
        tmxrun_give_back(run, r, rk->pid);
        if (rk->hello_pid > 0 && rk->hello_pid != rk->pid &&
            tmxrun_descends(rk->hello_pid, rk->pid)) {
            tmxrun_give_back(run, r, rk->hello_pid);
        }
    }
}

static void tmxrun_round_complete(tmxrun_t *run)
{
    tmxrun_buf_t *b = run->round;

    tmxrun_release_start(run);

    for (int r = 0; r < run->opts.np; r++) {
        tmxrun_rank_t *rk = &run->ranks[r];
        if (rk->conn >= 0) {
            tmxrun_conn_send(&run->conns[rk->conn], TMX_BOOT_OP_RESULT, run->round_len, b);
        }
        rk->in_round = 0;
    }
    tmxrun_buf_put(b); /* the round's own reference */
    run->round       = NULL;
    run->round_count = 0;
    run->round_len   = 0;
    run->round_no++;
}

/* A header has arrived on connection c; prepares the payload read. 0 ok, -1 the connection
 * was closed or the job failed. */
static int tmxrun_conn_header(tmxrun_t *run, int c)
{
    tmxrun_conn_t *cn   = &run->conns[c];
    tmx_boot_hdr_t *hdr = &cn->hdr;
    int bad             = tmx_boot_hdr_unpack(hdr);
    int r               = cn->rank;

    if (r < 0) {
        if (bad || hdr->op != TMX_BOOT_OP_HELLO || hdr->len != sizeof(tmx_boot_hello_t)) {
            tmxrun_drop(run, c, "that is not a rank of this job (no valid hello)");
            return -1;
        }
        cn->pay_dst = (char *)&cn->hello;
        cn->pay_len = sizeof(cn->hello);
        goto out;
    }
    if (bad) {
        tmxrun_fail(run, r, "rank %d sent a message with a bad magic or version", r);
        return -1;
    }
    switch (hdr->op) {
    case TMX_BOOT_OP_ALLGATHER:
        if (run->ranks[r].in_round) {
            tmxrun_fail(run, r, "rank %d sent a second contribution to allgather #%u", r,
                        run->round_no);
            return -1;
        }
        if (hdr->len > TMX_BOOT_MAX_LEN) {
            tmxrun_fail(run, r,
                        "rank %d sent %u bytes to allgather #%u, more than the cap "
                        "of %u",
                        r, hdr->len, run->round_no, TMX_BOOT_MAX_LEN);
            return -1;
        }
        if (run->round == NULL) {
            size_t total = (size_t)hdr->len * (size_t)run->opts.np;
            if (total > TMX_BOOT_MAX_TOTAL) {
                tmxrun_fail(run, r,
                            "allgather #%u of %u bytes from %d ranks exceeds the cap "
                            "of %u bytes in all",
                            run->round_no, hdr->len, run->opts.np, TMX_BOOT_MAX_TOTAL);
                return -1;
            }
            run->round = malloc(sizeof(*run->round) + total);
            if (run->round == NULL) {
                tmxrun_fail(run, r, "out of memory for allgather #%u", run->round_no);
                return -1;
            }
            run->round->refcnt = 1;
            run->round->len    = total;
            run->round_len     = hdr->len;
        } else if (hdr->len != run->round_len) {
            tmxrun_fail(run, r, "rank %d sent %u bytes to allgather #%u, other ranks %u", r,
                        hdr->len, run->round_no, run->round_len);
            return -1;
        }
        cn->pay_dst = run->round->data + (size_t)r * run->round_len;
        cn->pay_len = hdr->len;
        break;
    case TMX_BOOT_OP_BYE:
        if (hdr->len != 0) {
            tmxrun_fail(run, r, "rank %d sent a goodbye with %u bytes of payload", r, hdr->len);
            return -1;
        }
        cn->pay_len = 0;
        break;
    default:
        tmxrun_fail(run, r, "rank %d sent an unknown operation %u", r, (unsigned)hdr->op);
        return -1;
    }
out:
    cn->in_payload = 1;
    cn->pay_got    = 0;
    return 0;
}

/* A whole message (header and payload) has arrived. 0 ok, -1 closed or failed. */
static int tmxrun_conn_message(tmxrun_t *run, int c)
{
    tmxrun_conn_t *cn = &run->conns[c];
    int r             = cn->rank;

    cn->in_payload = 0;
    cn->hdr_got    = 0;
    if (r < 0) {
        uint64_t cookie = ((uint64_t)ntohl(cn->hello.cookie_hi) << 32) | ntohl(cn->hello.cookie_lo);
        uint32_t rank   = cn->hdr.arg;
        uint32_t size   = ntohl(cn->hello.size);

        if (cookie != run->cookie) {
            tmx_boot_hdr_t hdr;
            /* A well-formed hello: a rank of another job (an older one on a reused port).
             * Told so, it fails at once instead of connecting again until its timeout. */
            tmx_boot_hdr_pack(&hdr, TMX_BOOT_OP_ABORT, UINT32_MAX, 0);
            if (send(cn->fd, &hdr, sizeof(hdr), MSG_NOSIGNAL | MSG_DONTWAIT) < 0) {
                (void)0; /* best effort */
            }
            tmxrun_drop(run, c, "with a wrong cookie (a process of another job?)");
            return -1;
        }
        if (size != (uint32_t)run->opts.np) {
            tmxrun_fail(run, -1, "a rank (pid %u) believes the job has %u ranks, not %d",
                        ntohl(cn->hello.pid), size, run->opts.np);
            return -1;
        }
        if (rank >= (uint32_t)run->opts.np) {
            tmxrun_fail(run, -1, "a process (pid %u) said hello as rank %u, out of range 0..%d",
                        ntohl(cn->hello.pid), rank, run->opts.np - 1);
            return -1;
        }
        if (run->ranks[rank].joined) {
            tmxrun_fail(run, (int)rank, "rank %u said hello twice (second from pid %u)", rank,
                        ntohl(cn->hello.pid));
            return -1;
        }
        cn->rank                   = (int)rank;
        run->ranks[rank].joined    = 1;
        run->ranks[rank].hello_pid = (pid_t)ntohl(cn->hello.pid);
        run->ranks[rank].conn   = c;
        run->nsilent--;
        run->njoined++;
        tmxrun_conn_send(cn, TMX_BOOT_OP_WELCOME, (uint32_t)run->opts.np, NULL);
        return 0;
    }
    if (cn->hdr.op == TMX_BOOT_OP_BYE) {
        run->ranks[r].bye = 1;
        tmxrun_conn_close(run, c);
        tmxrun_round_check(run);
        return -1;
    }
    /* an allgather contribution is complete */
    run->ranks[r].in_round = 1;
    run->round_count++;
    if (run->round_count == run->opts.np) {
        tmxrun_round_complete(run);
    }
    return 0;
}

static void tmxrun_conn_input(tmxrun_t *run, int c)
{
    tmxrun_conn_t *cn = &run->conns[c];

    while (cn->fd >= 0 && !cn->out_pending && !run->killing) {
        char *dst;
        size_t want;
        ssize_t n;

        if (!cn->in_payload) {
            dst  = (char *)&cn->hdr + cn->hdr_got;
            want = sizeof(cn->hdr) - cn->hdr_got;
        } else {
            dst  = cn->pay_dst + cn->pay_got;
            want = cn->pay_len - cn->pay_got;
        }
        if (want > 0) {
            n = recv(cn->fd, dst, want, 0);
            if (n < 0 && errno == EINTR) {
                continue;
            }
            if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
                return;
            }
            if (n <= 0) {
                /* EOF or reset: a partial contribution is dropped with the connection */
                int r = cn->rank;
                tmxrun_conn_close(run, c);
                tmxrun_rank_gone(run, r);
                return;
            }
            if (!cn->in_payload) {
                cn->hdr_got += (size_t)n;
            } else {
                cn->pay_got += (size_t)n;
            }
        }
        if (!cn->in_payload) {
            if (cn->hdr_got == sizeof(cn->hdr) && tmxrun_conn_header(run, c) != 0) {
                return;
            }
        }
        if (cn->in_payload && cn->pay_got == cn->pay_len) {
            if (tmxrun_conn_message(run, c) != 0) {
                return;
            }
        }
    }
}

static void tmxrun_conn_output(tmxrun_t *run, int c)
{
    tmxrun_conn_t *cn = &run->conns[c];

    while (cn->out_pending) {
        const char *src;
        size_t want;
        ssize_t n;

        if (cn->ohdr_sent < sizeof(cn->ohdr)) {
            src  = (const char *)&cn->ohdr + cn->ohdr_sent;
            want = sizeof(cn->ohdr) - cn->ohdr_sent;
        } else if (cn->obuf != NULL && cn->obuf_sent < cn->obuf->len) {
            src  = cn->obuf->data + cn->obuf_sent;
            want = cn->obuf->len - cn->obuf_sent;
        } else {
            tmxrun_buf_put(cn->obuf);
            cn->obuf        = NULL;
            cn->out_pending = 0;
            break;
        }
        n = send(cn->fd, src, want, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            return;
        }
        if (n < 0) {
            int r = cn->rank;
            tmxrun_conn_close(run, c);
            tmxrun_rank_gone(run, r);
            return;
        }
        if (cn->ohdr_sent < sizeof(cn->ohdr)) {
            cn->ohdr_sent += (size_t)n;
        } else {
            cn->obuf_sent += (size_t)n;
        }
    }
    /* input that arrived while we were sending (e.g. the next contribution) */
    tmxrun_conn_input(run, c);
}

/* ------------------------------------------------------------------ the loop */

enum { TMXRUN_FD_SIG, TMXRUN_FD_LISTEN, TMXRUN_FD_CONN, TMXRUN_FD_OUT };

typedef struct tmxrun_fdref {
    int kind;
    int idx;
    int sub;
} tmxrun_fdref_t;

static void tmxrun_handle_signals(tmxrun_t *run)
{
    unsigned char sigs[64];
    ssize_t n;

    while ((n = read(tmxrun_sigpipe[0], sigs, sizeof(sigs))) > 0) {
        for (ssize_t i = 0; i < n; i++) {
            int sig = sigs[i];
            if (sig == SIGCHLD) {
                continue; /* reaped below in any case */
            }
            if (run->user_sig == 0) {
                tmxrun_msg("got signal %d (%s); passing it on to the ranks", sig, strsignal(sig));
                run->user_sig = sig;
                tmxrun_signal_ranks(run, sig);
                if (!run->killing) {
                    run->killing       = 1;
                    run->kill_deadline = tmxrun_now() + TMXRUN_KILL_GRACE;
                }
                tmxrun_abort_remote(run);
            } else if (!run->sigkilled) {
                tmxrun_msg("second signal; killing the ranks with SIGKILL");
                run->sigkilled = 1;
                tmxrun_signal_ranks(run, SIGKILL);
            }
        }
    }
    tmxrun_reap(run);
    tmxrun_round_check(run);
}

static void tmxrun_timers(tmxrun_t *run)
{
    double now = tmxrun_now();

    if (run->deadline > 0 && now >= run->deadline && !run->timed_out) {
        run->timed_out = 1;
        tmxrun_msg("timeout: the job ran longer than %g s; killing all ranks", run->opts.timeout);
        if (!run->killing) {
            for (int c = 0; c < run->nconns_max; c++) {
                if (run->conns[c].fd >= 0) {
                    tmxrun_conn_close(run, c);
                }
            }
        }
        tmxrun_kill_all(run);
    }
    if (run->killing && !run->sigkilled && now >= run->kill_deadline && run->nalive > 0) {
        tmxrun_msg("%d rank(s) still alive %g s after SIGTERM; sending SIGKILL", run->nalive,
                   TMXRUN_KILL_GRACE);
        run->sigkilled = 1;
        tmxrun_signal_ranks(run, SIGKILL);
    }
    if (run->nremote > 0 && !run->killing && now >= run->remote_deadline &&
        run->njoined < run->opts.np) {
        for (int r = 0; r < run->opts.np; r++) {
            if (run->ranks[r].remote && !run->ranks[r].joined) {
                tmxrun_fail(run, r,
                            "rank %d (started elsewhere) did not join within %g s "
                            "(--remote-timeout)",
                            r, run->opts.remote_timeout);
                break;
            }
        }
    }
    if (now >= run->release_deadline) {
        tmxrun_release_start(run);
    }
    for (int c = 0; c < run->nconns_max; c++) {
        if (run->conns[c].fd >= 0 && run->conns[c].rank < 0 &&
            now >= run->conns[c].hello_deadline) {
            char why[64];
            snprintf(why, sizeof(why), "that said no hello in %g s", TMXRUN_HELLO_TIME);
            tmxrun_drop(run, c, why);
        }
    }
    tmxrun_round_check(run);
}

static double tmxrun_min(double a, double b)
{
    return (a < b) ? a : b;
}

static int tmxrun_poll_timeout(tmxrun_t *run)
{
    double now = tmxrun_now();
    double t   = 1.0; /* also the tick for hello deadlines and the left-rank grace */

    if (run->deadline > 0 && !run->timed_out) {
        t = tmxrun_min(t, run->deadline - now);
    }
    if (run->killing && !run->sigkilled) {
        t = tmxrun_min(t, run->kill_deadline - now);
    }
    if (run->round_count > 0) {
        t = tmxrun_min(t, 0.25);
    }
    if (run->start != NULL && !run->released) {
        t = tmxrun_min(t, run->release_deadline - now);
    }
    return (t <= 0) ? 0 : (int)(t * 1000.0) + 1;
}

/* A remote rank has no process: the job waits for its goodbye (or the close that fails the
 * job), unless the job is ending already. */
static int tmxrun_remote_pending(tmxrun_t *run)
{
    if (run->nremote == 0 || run->killing) {
        return 0;
    }
    for (int r = 0; r < run->opts.np; r++) {
        if (run->ranks[r].remote && !run->ranks[r].left) {
            return 1;
        }
    }
    return 0;
}

static int tmxrun_loop(tmxrun_t *run)
{
    int maxfds           = 2 + run->nconns_max + 2 * run->opts.np;
    struct pollfd *pfds  = calloc((size_t)maxfds, sizeof(*pfds));
    tmxrun_fdref_t *refs = calloc((size_t)maxfds, sizeof(*refs));

    if (pfds == NULL || refs == NULL) {
        tmxrun_msg("out of memory");
        free(pfds);
        free(refs);
        return -1;
    }
    while (run->nalive > 0 || tmxrun_remote_pending(run)) {
        int n = 0;

        pfds[n]   = (struct pollfd){.fd = tmxrun_sigpipe[0], .events = POLLIN};
        refs[n++] = (tmxrun_fdref_t){TMXRUN_FD_SIG, 0, 0};
        if (run->listen_fd >= 0) {
            pfds[n]   = (struct pollfd){.fd = run->listen_fd, .events = POLLIN};
            refs[n++] = (tmxrun_fdref_t){TMXRUN_FD_LISTEN, 0, 0};
        }
        for (int c = 0; c < run->nconns_max; c++) {
            if (run->conns[c].fd >= 0) {
                short ev  = run->conns[c].out_pending ? POLLOUT : POLLIN;
                pfds[n]   = (struct pollfd){.fd = run->conns[c].fd, .events = ev};
                refs[n++] = (tmxrun_fdref_t){TMXRUN_FD_CONN, c, 0};
            }
        }
        for (int r = 0; r < run->opts.np; r++) {
            for (int s = 0; s < 2; s++) {
                if (run->ranks[r].out[s].fd >= 0) {
                    pfds[n]   = (struct pollfd){.fd = run->ranks[r].out[s].fd, .events = POLLIN};
                    refs[n++] = (tmxrun_fdref_t){TMXRUN_FD_OUT, r, s};
                }
            }
        }
        if (poll(pfds, (nfds_t)n, tmxrun_poll_timeout(run)) < 0 && errno != EINTR) {
            tmxrun_msg("poll: %s", strerror(errno));
            break;
        }
        for (int i = 0; i < n; i++) {
            if (pfds[i].revents == 0) {
                continue;
            }
            switch (refs[i].kind) {
            case TMXRUN_FD_SIG:
                break; /* below, always */
            case TMXRUN_FD_LISTEN:
                if (run->listen_fd >= 0) {
                    tmxrun_accept(run);
                }
                break;
            case TMXRUN_FD_CONN:
                /* the slot may have been closed (and reused by accept) meanwhile */
                if (run->conns[refs[i].idx].fd == pfds[i].fd) {
                    if (run->conns[refs[i].idx].out_pending) {
                        tmxrun_conn_output(run, refs[i].idx);
                    } else {
                        tmxrun_conn_input(run, refs[i].idx);
                    }
                }
                break;
            case TMXRUN_FD_OUT:
                if (run->ranks[refs[i].idx].out[refs[i].sub].fd == pfds[i].fd) {
                    tmxrun_out_read(&run->ranks[refs[i].idx].out[refs[i].sub], refs[i].idx);
                }
                break;
            }
        }
        tmxrun_handle_signals(run);
        tmxrun_timers(run);
    }
    free(pfds);
    free(refs);
    return 0;
}

/* ------------------------------------------------------------------ cleanup and main */

/* The soft device's shared segments are named /dev/shm/tmx-<uid>-<pid>-*; a rank that was
 * killed could not unlink its own. Only our regular files are removed. */
static void tmxrun_shm_cleanup(tmxrun_t *run)
{
    uid_t uid = getuid();

    for (int r = 0; r < run->opts.np; r++) {
        char pat[96];
        glob_t g;

        if (run->ranks[r].pid <= 0) {
            continue;
        }
        snprintf(pat, sizeof(pat), "/dev/shm/tmx-%u-%d-*", (unsigned)uid, (int)run->ranks[r].pid);
        if (glob(pat, GLOB_NOSORT, NULL, &g) != 0) {
            continue;
        }
        for (size_t i = 0; i < g.gl_pathc; i++) {
            struct stat st;
            if (lstat(g.gl_pathv[i], &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == uid) {
                unlink(g.gl_pathv[i]);
            }
        }
        globfree(&g);
    }
}

/* --boot-addr-file: TMX_BOOT_ADDR for the remote ranks, written whole (a reader polling for
 * the file never sees half of it) and readable by this user only (it holds the cookie). */
static int tmxrun_write_addr_file(const char *path, const char *addr)
{
    char tmp[PATH_MAX];
    int fd, n;
    size_t len = strlen(addr);

    n = snprintf(tmp, sizeof(tmp), "%s.tmp%d", path, (int)getpid());
    if (n < 0 || (size_t)n >= sizeof(tmp)) {
        tmxrun_msg("--boot-addr-file %s: name too long", path);
        return -1;
    }
    unlink(tmp);
    fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) {
        tmxrun_msg("--boot-addr-file %s: %s", tmp, strerror(errno));
        return -1;
    }
    if (write(fd, addr, len) != (ssize_t)len || write(fd, "\n", 1) != 1 || close(fd) != 0 ||
        rename(tmp, path) != 0) {
        tmxrun_msg("--boot-addr-file %s: %s", path, strerror(errno));
        unlink(tmp);
        return -1;
    }
    return 0;
}

/* Marks the ranks started here (every one without --local-ranks). */
static int tmxrun_split_ranks(tmxrun_t *run)
{
    char *local = calloc((size_t)run->opts.np, 1);

    if (local == NULL) {
        tmxrun_msg("out of memory");
        return -1;
    }
    if (run->opts.local_spec == NULL) {
        memset(local, 1, (size_t)run->opts.np);
    } else if (tmxrun_parse_local(run->opts.local_spec, run->opts.np, local) != 0) {
        free(local);
        return -1;
    }
    for (int r = 0; r < run->opts.np; r++) {
        run->ranks[r].remote    = !local[r];
        run->ranks[r].local_idx = local[r] ? run->nlocal : -1;
        if (local[r]) {
            run->nlocal++;
        } else {
            run->nremote++;
        }
    }
    free(local);
    return 0;
}

/* How the remote ranks are started, when no --boot-addr-file takes the address: on stderr,
 * which is this user's (the cookie is the job's secret: do not paste it where others read). */
static void tmxrun_tell_remote(tmxrun_t *run, const char *addr)
{
    char list[256];
    size_t used = 0;

    list[0] = '\0';
    for (int r = 0; r < run->opts.np && used < sizeof(list) - 16; r++) {
        if (run->ranks[r].remote) {
            int n = snprintf(list + used, sizeof(list) - used, "%s%d", used ? "," : "", r);
            used += (n > 0) ? (size_t)n : 0;
        }
    }
    tmxrun_msg("rank(s) %s%s are not started here: start each (within %g s) with "
               "TMX_RANK=<rank> TMX_SIZE=%d TMX_BOOT_ADDR=%s",
               list, used >= sizeof(list) - 16 ? ",..." : "", run->opts.remote_timeout,
               run->opts.np, addr);
}

/* Raises the soft limit of open files to need when it is lower (up to the hard limit, which
 * only root may raise); the ranks get the limit back as it was (tmxrun_child). */
static int tmxrun_fd_limit(tmxrun_t *run, int need)
{
    struct rlimit rl;

    if (getrlimit(RLIMIT_NOFILE, &rl) != 0) {
        return 0;
    }
    run->nofile     = rl;
    run->nofile_set = 0;
    if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < (rlim_t)need) {
        if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < (rlim_t)need) {
            tmxrun_msg("-n %d needs %d open files, more than the hard limit of %llu allows "
                       "(ulimit -Hn)",
                       run->opts.np, need, (unsigned long long)rl.rlim_max);
            return -1;
        }
        rl.rlim_cur = (rlim_t)need;
        if (setrlimit(RLIMIT_NOFILE, &rl) != 0) {
            tmxrun_msg("-n %d needs %d open files; raising the limit from %llu failed: %s",
                       run->opts.np, need, (unsigned long long)run->nofile.rlim_cur,
                       strerror(errno));
            return -1;
        }
        run->nofile_set = 1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    tmxrun_t run;
    char addr[TMX_BOOT_ADDR_MAX];
    int port;
    int rc;
    int addr_written = 0;
    int ret          = TMXRUN_EXIT_FAILED;

    memset(&run, 0, sizeof(run));
    run.listen_fd = -1;
    run.exit_code = -1;
    rc            = tmxrun_parse_args(argc, argv, &run.opts);
    if (rc != 0) {
        return (rc > 0) ? 0 : TMXRUN_EXIT_USAGE;
    }
    /* the connection slots, per rank two pipes (--tag-output), and a spare for stdio, the
     * listener, the signal pipe and the pipes of the rank being started */
    if (tmxrun_fd_limit(&run, run.opts.np + TMXRUN_MAX_STRAYS +
                                  (run.opts.tag_output ? 2 * run.opts.np : 0) + 32) != 0) {
        return TMXRUN_EXIT_USAGE;
    }
    run.nconns_max = run.opts.np + TMXRUN_MAX_STRAYS;
    run.ranks      = calloc((size_t)run.opts.np, sizeof(*run.ranks));
    run.conns      = calloc((size_t)run.nconns_max, sizeof(*run.conns));
    run.free_conns = calloc((size_t)run.nconns_max, sizeof(*run.free_conns));
    if (run.ranks == NULL || run.conns == NULL || run.free_conns == NULL) {
        tmxrun_msg("out of memory");
        goto err_free;
    }
    for (int c = run.nconns_max - 1; c >= 0; c--) {
        run.conns[c].fd             = -1;
        run.conns[c].rank           = -1;
        run.free_conns[run.nfree++] = c;
    }
    for (int r = 0; r < run.opts.np; r++) {
        run.ranks[r].conn = -1;
        for (int s = 0; s < 2; s++) {
            run.ranks[r].out[s].fd   = -1;
            run.ranks[r].out[s].dest = (s == 0) ? STDOUT_FILENO : STDERR_FILENO;
            if (run.opts.tag_output) {
                run.ranks[r].out[s].line = malloc(TMXRUN_LINE_MAX);
                if (run.ranks[r].out[s].line == NULL) {
                    tmxrun_msg("out of memory");
                    goto err_free;
                }
            }
        }
    }
    if (tmxrun_split_ranks(&run) != 0) {
        ret = TMXRUN_EXIT_USAGE;
        goto err_free;
    }
    if (run.nlocal == 0) {
        tmxrun_msg("--local-ranks %s: no rank is left to start here", run.opts.local_spec);
        ret = TMXRUN_EXIT_USAGE;
        goto err_free;
    }
    if (tmxrun_place(&run) != 0) {
        ret = TMXRUN_EXIT_USAGE;
        goto err_free;
    }
    /* what a rank leaves behind (a shell's children) is re-parented to us, not to init, so that
     * we reap it while the job runs */
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    if (tmxrun_signals_setup() != 0) {
        goto err_free;
    }
    port = tmxrun_listen(&run);
    if (port < 0 || tmx_boot_addr_format_ip(addr, sizeof(addr), run.opts.listen_ip,
                                            (uint16_t)port, run.cookie) != 0) {
        goto err_listen;
    }
    if (run.opts.addr_file != NULL) {
        if (tmxrun_write_addr_file(run.opts.addr_file, addr) != 0) {
            goto err_listen;
        }
        addr_written = 1;
    } else if (run.nremote > 0) {
        tmxrun_tell_remote(&run, addr);
    }
    if (run.opts.timeout > 0) {
        run.deadline = tmxrun_now() + run.opts.timeout;
    }
    run.remote_deadline  = tmxrun_now() + run.opts.remote_timeout;
    run.release_deadline = tmxrun_now() + TMXRUN_RELEASE_TIME;
    if (tmxrun_spawn(&run, addr) != 0) {
        /* the ranks already started must not outlive us */
        run.exit_code = TMXRUN_EXIT_FAILED;
        tmxrun_kill_all(&run);
    }
    tmxrun_loop(&run);
    if (run.nalive > 0) {
        /* the loop failed: do not leave ranks behind */
        tmxrun_signal_ranks(&run, SIGKILL);
        while (run.nalive > 0 && waitpid(-1, NULL, 0) > 0) {
            run.nalive--;
        }
    }
    for (int r = 0; r < run.opts.np; r++) {
        for (int s = 0; s < 2; s++) {
            if (run.ranks[r].out[s].fd >= 0) {
                /* what the rank wrote before it exited; a grandchild that keeps the pipe open
                 * does not hold us (non-blocking read stops at EAGAIN) */
                tmxrun_out_read(&run.ranks[r].out[s], r);
                if (run.ranks[r].out[s].fd >= 0) {
                    close(run.ranks[r].out[s].fd);
                }
            }
        }
    }
    tmxrun_shm_cleanup(&run);
    if (run.ndropped > TMXRUN_DROP_MSGS) {
        tmxrun_msg("bootstrap: dropped %u connections in all that had no valid hello",
                   run.ndropped);
    }
    if (run.timed_out) {
        ret = TMXRUN_EXIT_TIMEOUT;
    } else if (run.exit_code >= 0) {
        ret = run.exit_code;
    } else if (run.user_sig != 0) {
        ret = 128 + run.user_sig;
    } else {
        ret = 0;
    }
    for (int c = 0; c < run.nconns_max; c++) {
        if (run.conns[c].fd >= 0) {
            tmxrun_conn_close(&run, c);
        }
    }
    tmxrun_buf_put(run.round);
err_listen:
    if (run.listen_fd >= 0) {
        close(run.listen_fd);
    }
    if (addr_written) {
        unlink(run.opts.addr_file); /* the cookie of a job that is over */
    }
err_free:
    if (run.ranks != NULL) {
        for (int r = 0; r < run.opts.np; r++) {
            free(run.ranks[r].out[0].line);
            free(run.ranks[r].out[1].line);
        }
    }
    free(run.ranks);
    free(run.conns);
    free(run.free_conns);
    free(run.places);
    free(run.start);
    tmx_topo_close(run.topo);
    return ret;
}
