/*
 * tmx_badinput: bad input to every public function gets a clear status, never a crash or a
 * hang. Single process. Each group of checks runs in a child process with an alarm, so a
 * crash or a hang is reported as a failure of that group and the other groups still run.
 * Every check prints the call it made:
 *   PASS tmx_worker_create(NULL, NULL, &w) -> TMX_ERR_INVALID_PARAM
 *   FAIL tmx_ep_create(w, &p, &ep) [random blob 3]: expected TMX_ERR_INVALID_ADDR, got TMX_OK
 * and the run ends with "N passed, N failed". Exit status 1 if anything failed.
 */
#define _GNU_SOURCE
#include <tmx/tmx.h>
#include <tmx/tmx_job.h>
#include "cf_status.h"

#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define BI_GROUP_TIMEOUT 60

typedef struct bi_counts {
    int passed;
    int failed;
} bi_counts_t;

static bi_counts_t *bi_counts; /* shared with the children */
static const char  *bi_note = ""; /* extra context printed after the call */


static void bi_result(int ok, const char *call, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void bi_result(int ok, const char *call, const char *fmt, ...)
{
    va_list ap;

    printf("%s %s%s%s", ok ? "PASS" : "FAIL", call, bi_note[0] ? " " : "", bi_note);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    fflush(stdout);
    __atomic_add_fetch(ok ? &bi_counts->passed : &bi_counts->failed, 1, __ATOMIC_SEQ_CST);
}

static int bi_check(const char *call, tmx_status_t got, const tmx_status_t *want, size_t nwant)
{
    int  ok = 0;
    char expected[160] = "";

    for (size_t i = 0; i < nwant; i++) {
        ok |= (got == want[i]);
        snprintf(expected + strlen(expected), sizeof(expected) - strlen(expected), "%s%s",
                 i > 0 ? " or " : "", cf_status_enum_name(want[i]));
    }
    if (ok) {
        bi_result(1, call, " -> %s", cf_status_enum_name(got));
    } else {
        bi_result(0, call, ": expected %s, got %s (%d)", expected, cf_status_enum_name(got), (int)got);
    }
    return ok;
}

/* Calls and checks that the status is one of the listed ones; prints the call's text. */
#define BI_EXPECT(_call, ...)                                                                     \
    ({                                                                                            \
        const tmx_status_t _want[] = {__VA_ARGS__};                                               \
        bi_check(#_call, (_call), _want, sizeof(_want) / sizeof(_want[0]));                       \
    })
#define BI_TRUE(_what, _cond)                                                                     \
    bi_result(!!(_cond), (_what), "%s", (_cond) ? "" : ": condition false: " #_cond)

/* A context, a worker and an endpoint to the worker itself, or exit (setup is not under
 * test here). */
typedef struct bi_env {
    tmx_context_h ctx;
    tmx_worker_h  w;
    tmx_ep_h      ep;
    void         *addr;
    size_t        addr_len;
} bi_env_t;

static void bi_env_open(bi_env_t *env)
{
    tmx_ep_params_t p = {.field_mask = TMX_EP_PARAM_ADDRESS};

    memset(env, 0, sizeof(*env));
    if (tmx_context_create(NULL, &env->ctx) != TMX_OK ||
        tmx_worker_create(env->ctx, NULL, &env->w) != TMX_OK ||
        tmx_worker_get_address(env->w, &env->addr, &env->addr_len) != TMX_OK) {
        printf("FAIL setup: could not create a context, worker and address\n");
        exit(3);
    }
    p.address        = env->addr;
    p.address_length = env->addr_len;
    if (tmx_ep_create(env->w, &p, &env->ep) != TMX_OK) {
        printf("FAIL setup: could not create an endpoint to the worker itself\n");
        exit(3);
    }
}

static void bi_env_close(bi_env_t *env)
{
    (void)tmx_ep_close(env->ep, TMX_EP_CLOSE_FORCE);
    tmx_worker_release_address(env->w, env->addr);
    (void)tmx_worker_destroy(env->w);
    (void)tmx_context_destroy(env->ctx);
}

/* ------------------------------------------------------------------ groups */

static void bi_group_status(void)
{
    const int others[] = {2, 3, 20, -20, -100, 12345, -12345, 0x7fffffff, -0x7fffffff - 1};

    for (int s = TMX_ERR_PEER_FAILED_PENDING; s <= TMX_INPROGRESS; s++) {
        const char *str = tmx_status_string((tmx_status_t)s);
        char        call[64];
        snprintf(call, sizeof(call), "tmx_status_string(%s)", cf_status_enum_name((tmx_status_t)s));
        bi_result(str != NULL && str[0] != '\0', call, " -> \"%s\"", str ? str : "(null)");
    }
    for (size_t i = 0; i < sizeof(others) / sizeof(others[0]); i++) {
        const char *str = tmx_status_string((tmx_status_t)others[i]);
        char        call[64];
        snprintf(call, sizeof(call), "tmx_status_string(%d)", others[i]);
        bi_result(str != NULL && str[0] != '\0', call, " -> \"%s\"", str ? str : "(null)");
    }
    BI_TRUE("tmx_version_string() != NULL", tmx_version_string() != NULL);
}

static void bi_group_context(void)
{
    tmx_context_h        ctx      = NULL;
    tmx_context_h        sentinel = (tmx_context_h)(uintptr_t)0x5a5a5a50;
    tmx_context_params_t p;

    BI_EXPECT(tmx_context_create_version(TMX_API_VERSION, NULL, NULL), TMX_ERR_INVALID_PARAM);
    ctx = sentinel;
    BI_EXPECT(tmx_context_create_version(0x7fff0000, NULL, &ctx), TMX_ERR_VERSION);
    BI_TRUE("tmx_context_create_version(0x7fff0000, ...) leaves *context_p untouched",
            ctx == sentinel);
    BI_EXPECT(tmx_context_create_version(TMX_API_VERSION + 1u, NULL, &ctx), TMX_OK,
              TMX_ERR_VERSION);
    if (ctx != sentinel) {
        (void)tmx_context_destroy(ctx); /* a newer minor version may be accepted */
    }
    ctx = sentinel;
    BI_EXPECT(tmx_context_create_version((TMX_API_MAJOR + 1u) << 16, NULL, &ctx),
              TMX_ERR_VERSION);
    memset(&p, 0, sizeof(p));
    p.field_mask = 1ull << 40;
    BI_EXPECT(tmx_context_create(&p, &ctx), TMX_ERR_INVALID_PARAM);
    p.field_mask = TMX_CONTEXT_PARAM_PROVIDERS | (1ull << 5);
    p.providers  = "soft";
    BI_EXPECT(tmx_context_create(&p, &ctx), TMX_ERR_INVALID_PARAM);
    p.field_mask = TMX_CONTEXT_PARAM_PROVIDERS;
    p.providers  = NULL;
    BI_EXPECT(tmx_context_create(&p, &ctx), TMX_ERR_INVALID_PARAM);
    p.providers = "no-such-provider";
    BI_EXPECT(tmx_context_create(&p, &ctx), TMX_ERR_NO_DEVICE, TMX_ERR_INVALID_PARAM);
    BI_EXPECT(tmx_context_destroy(NULL), TMX_ERR_INVALID_PARAM);
    BI_EXPECT(tmx_context_print_info(NULL, stdout), TMX_ERR_INVALID_PARAM);
    ctx = NULL;
    if (BI_EXPECT(tmx_context_create(NULL, &ctx), TMX_OK)) {
        BI_EXPECT(tmx_context_print_info(ctx, NULL), TMX_ERR_INVALID_PARAM);
        BI_EXPECT(tmx_context_destroy(ctx), TMX_OK);
        /* Destroyed handles stay recognisable. */
        BI_EXPECT(tmx_context_destroy(ctx), TMX_ERR_INVALID_HANDLE);
        BI_EXPECT(tmx_context_print_info(ctx, stdout), TMX_ERR_INVALID_HANDLE);
        tmx_worker_h w = NULL;
        BI_EXPECT(tmx_worker_create(ctx, NULL, &w), TMX_ERR_INVALID_HANDLE);
    }
    tmx_config_print(NULL, 0);
    BI_TRUE("tmx_config_print(NULL, 0) returns", 1);
}

static void bi_group_worker(void)
{
    tmx_context_h       ctx;
    tmx_worker_h        w = NULL, w2 = NULL;
    tmx_worker_params_t wp;
    tmx_worker_attr_t   attr;
    void               *addr = NULL;
    size_t              len  = 0;

    if (tmx_context_create(NULL, &ctx) != TMX_OK) {
        bi_result(0, "tmx_context_create(NULL, &ctx)", ": setup failed");
        return;
    }
    BI_EXPECT(tmx_worker_create(NULL, NULL, &w), TMX_ERR_INVALID_PARAM);
    BI_EXPECT(tmx_worker_create(ctx, NULL, NULL), TMX_ERR_INVALID_PARAM);
    memset(&wp, 0, sizeof(wp));
    wp.field_mask = 1ull << 33;
    BI_EXPECT(tmx_worker_create(ctx, &wp, &w), TMX_ERR_INVALID_PARAM);
    wp.field_mask  = TMX_WORKER_PARAM_THREAD_MODE;
    wp.thread_mode = (tmx_thread_mode_t)7;
    BI_EXPECT(tmx_worker_create(ctx, &wp, &w), TMX_ERR_INVALID_PARAM);
    wp.thread_mode = (tmx_thread_mode_t)-1;
    BI_EXPECT(tmx_worker_create(ctx, &wp, &w), TMX_ERR_INVALID_PARAM);
    wp.field_mask  = TMX_WORKER_PARAM_ERR_HANDLER; /* the bit without a handler */
    wp.err_handler = NULL;
    BI_EXPECT(tmx_worker_create(ctx, &wp, &w), TMX_ERR_INVALID_PARAM);
    wp.field_mask  = TMX_WORKER_PARAM_THREAD_MODE;
    wp.thread_mode = TMX_THREAD_MODE_MULTI;
    if (BI_EXPECT(tmx_worker_create(ctx, &wp, &w2), TMX_OK)) {
        BI_EXPECT(tmx_worker_destroy(w2), TMX_OK);
    }
    BI_EXPECT(tmx_worker_destroy(NULL), TMX_ERR_INVALID_PARAM);
    BI_EXPECT(tmx_worker_get_address(NULL, &addr, &len), TMX_ERR_INVALID_PARAM);
    BI_TRUE("tmx_worker_progress(NULL) == 0", tmx_worker_progress(NULL) == 0);
    BI_EXPECT(tmx_worker_query(NULL, &attr), TMX_ERR_INVALID_PARAM);
    tmx_worker_release_address(NULL, NULL);
    BI_TRUE("tmx_worker_release_address(NULL, NULL) returns", 1);
    if (!BI_EXPECT(tmx_worker_create(ctx, NULL, &w), TMX_OK)) {
        (void)tmx_context_destroy(ctx);
        return;
    }
    BI_EXPECT(tmx_worker_get_address(w, NULL, &len), TMX_ERR_INVALID_PARAM);
    BI_EXPECT(tmx_worker_get_address(w, &addr, NULL), TMX_ERR_INVALID_PARAM);
    tmx_worker_release_address(w, NULL);
    BI_TRUE("tmx_worker_release_address(w, NULL) returns", 1);
    BI_EXPECT(tmx_worker_query(w, NULL), TMX_ERR_INVALID_PARAM);
    memset(&attr, 0, sizeof(attr));
    attr.field_mask = 1ull << 50;
    BI_EXPECT(tmx_worker_query(w, &attr), TMX_ERR_INVALID_PARAM);
    /* A context with a live worker cannot go away. */
    BI_EXPECT(tmx_context_destroy(ctx), TMX_ERR_BUSY);
    BI_TRUE("worker still usable after the refused context destroy: progress returns",
            (tmx_worker_progress(w), 1));
    BI_EXPECT(tmx_worker_destroy(w), TMX_OK);
    /* After destroy: recognisable, every call refuses. */
    BI_EXPECT(tmx_worker_destroy(w), TMX_ERR_INVALID_HANDLE);
    BI_TRUE("tmx_worker_progress(destroyed) == 0", tmx_worker_progress(w) == 0);
    BI_EXPECT(tmx_worker_get_address(w, &addr, &len), TMX_ERR_INVALID_HANDLE);
    attr.field_mask = TMX_WORKER_ATTR_PEERS;
    BI_EXPECT(tmx_worker_query(w, &attr), TMX_ERR_INVALID_HANDLE);
    {
        tmx_request_h       req;
        tmx_ep_h            ep;
        char                buf[8];
        tmx_tag_recv_info_t info;
        tmx_ep_params_t     p = {.field_mask = TMX_EP_PARAM_ADDRESS, .address = buf,
                                 .address_length = sizeof(buf)};
        BI_EXPECT(tmx_tag_recv_nb(w, buf, sizeof(buf), 0, 0, NULL, &req),
                  TMX_ERR_INVALID_HANDLE);
        BI_EXPECT(tmx_tag_probe(w, 0, 0, TMX_PROBE_PEEK, &info, NULL), TMX_ERR_INVALID_HANDLE);
        BI_EXPECT(tmx_ep_create(w, &p, &ep), TMX_ERR_INVALID_HANDLE);
        BI_EXPECT(tmx_tag_recv(w, buf, sizeof(buf), 0, 0, &info), TMX_ERR_INVALID_HANDLE);
    }
    BI_EXPECT(tmx_context_destroy(ctx), TMX_OK);
}

/* tmx_ep_create that must fail; an endpoint it created anyway is closed again. */
#define BI_EP_BAD(_w, _p, _ep_p)                                                                  \
    do {                                                                                          \
        *(_ep_p) = NULL;                                                                          \
        BI_EXPECT(tmx_ep_create(_w, _p, _ep_p), TMX_ERR_INVALID_ADDR, TMX_ERR_INVALID_PARAM);     \
        if (*(_ep_p) != NULL) {                                                                   \
            (void)tmx_ep_close(*(_ep_p), TMX_EP_CLOSE_FORCE);                                     \
        }                                                                                         \
    } while (0)

static void bi_group_ep_addr(void)
{
    bi_env_t         env;
    tmx_ep_h         ep = NULL;
    tmx_ep_params_t  p;
    unsigned char    junk[512];
    char             note[128];
    uint64_t         st = 0x1234567;

    bi_env_open(&env);
    memset(&p, 0, sizeof(p));
    p.field_mask     = TMX_EP_PARAM_ADDRESS;
    p.address        = env.addr;
    p.address_length = env.addr_len;
    BI_EXPECT(tmx_ep_create(NULL, &p, &ep), TMX_ERR_INVALID_PARAM);
    BI_EXPECT(tmx_ep_create(env.w, NULL, &ep), TMX_ERR_INVALID_PARAM);
    BI_EXPECT(tmx_ep_create(env.w, &p, NULL), TMX_ERR_INVALID_PARAM);
    p.field_mask = 0; /* the address is required */
    bi_note      = "[field_mask 0: no address]";
    BI_EXPECT(tmx_ep_create(env.w, &p, &ep), TMX_ERR_INVALID_PARAM);
    p.field_mask = TMX_EP_PARAM_ADDRESS | (1ull << 20);
    bi_note      = "[unknown field_mask bit 20]";
    BI_EXPECT(tmx_ep_create(env.w, &p, &ep), TMX_ERR_INVALID_PARAM);
    p.field_mask     = TMX_EP_PARAM_ADDRESS;
    p.address        = NULL;
    p.address_length = env.addr_len;
    bi_note          = "[address NULL, length of a real blob]";
    BI_EP_BAD(env.w, &p, &ep);
    p.address        = env.addr;
    p.address_length = 0;
    bi_note          = "[real blob, length 0]";
    BI_EP_BAD(env.w, &p, &ep);
    p.address        = NULL;
    p.address_length = 0;
    bi_note          = "[address NULL, length 0]";
    BI_EP_BAD(env.w, &p, &ep);
    p.address        = env.addr;
    p.address_length = SIZE_MAX;
    bi_note          = "[real blob, length SIZE_MAX]";
    BI_EP_BAD(env.w, &p, &ep);
    /* Every truncation of a real blob. */
    for (size_t l = 1; l < env.addr_len; l++) {
        snprintf(note, sizeof(note), "[real blob truncated to %zu of %zu bytes]", l,
                 env.addr_len);
        bi_note          = note;
        p.address        = env.addr;
        p.address_length = l;
        BI_EP_BAD(env.w, &p, &ep);
    }
    /* Random bytes of many lengths, including the real blob's. */
    for (int i = 0; i < 64; i++) {
        size_t l = (i < 8) ? env.addr_len : 1 + (size_t)(i * 37) % sizeof(junk);
        for (size_t k = 0; k < sizeof(junk); k++) {
            st      = st * 6364136223846793005ull + 1442695040888963407ull;
            junk[k] = (unsigned char)(st >> 56);
        }
        snprintf(note, sizeof(note), "[random blob %d, %zu bytes]", i, l);
        bi_note          = note;
        p.address        = junk;
        p.address_length = l;
        BI_EP_BAD(env.w, &p, &ep);
    }
    /* A zeroed blob of the right length. */
    memset(junk, 0, sizeof(junk));
    bi_note          = "[zeroed blob of the real length]";
    p.address_length = env.addr_len < sizeof(junk) ? env.addr_len : sizeof(junk);
    BI_EP_BAD(env.w, &p, &ep);
    bi_note = "";
    bi_env_close(&env);
}

static void bi_group_ep_close(void)
{
    bi_env_t        env;
    tmx_ep_h        ep = NULL;
    tmx_ep_params_t p;
    tmx_request_h   req;
    char            buf[8] = {0};

    bi_env_open(&env);
    p.field_mask     = TMX_EP_PARAM_ADDRESS;
    p.address        = env.addr;
    p.address_length = env.addr_len;
    BI_EXPECT(tmx_ep_close(NULL, TMX_EP_CLOSE_FLUSH), TMX_ERR_INVALID_PARAM);
    if (BI_EXPECT(tmx_ep_create(env.w, &p, &ep), TMX_OK)) {
        BI_EXPECT(tmx_ep_close(ep, (tmx_ep_close_mode_t)7), TMX_ERR_INVALID_PARAM);
        BI_EXPECT(tmx_ep_close(ep, (tmx_ep_close_mode_t)-1), TMX_ERR_INVALID_PARAM);
        /* The refused close left the endpoint open. */
        req = NULL;
        BI_EXPECT(tmx_tag_send_nb(ep, buf, sizeof(buf), 1, NULL, &req), TMX_OK,
                  TMX_INPROGRESS);
        tmx_request_free(req); /* released when it completes */
        BI_EXPECT(tmx_ep_close(ep, TMX_EP_CLOSE_FLUSH), TMX_OK);
        BI_EXPECT(tmx_ep_close(ep, TMX_EP_CLOSE_FLUSH), TMX_ERR_INVALID_HANDLE);
        BI_EXPECT(tmx_tag_send_nb(ep, buf, sizeof(buf), 1, NULL, &req), TMX_ERR_INVALID_HANDLE);
        BI_EXPECT(tmx_tag_send(ep, buf, sizeof(buf), 1), TMX_ERR_INVALID_HANDLE);
    }
    /* Endpoints that the worker's destroy closed are recognisable too. */
    if (BI_EXPECT(tmx_ep_create(env.w, &p, &ep), TMX_OK)) {
        tmx_worker_release_address(env.w, env.addr);
        (void)tmx_ep_close(env.ep, TMX_EP_CLOSE_FORCE);
        BI_EXPECT(tmx_worker_destroy(env.w), TMX_OK);
        BI_EXPECT(tmx_tag_send_nb(ep, buf, sizeof(buf), 1, NULL, &req), TMX_ERR_INVALID_HANDLE);
        BI_EXPECT(tmx_ep_close(ep, TMX_EP_CLOSE_FORCE), TMX_ERR_INVALID_HANDLE);
        BI_EXPECT(tmx_context_destroy(env.ctx), TMX_OK);
    } else {
        bi_env_close(&env);
    }
}

static void bi_group_tag(void)
{
    bi_env_t             env;
    tmx_request_h        req = NULL, rreq = NULL;
    tmx_request_params_t rp;
    tmx_tag_recv_info_t  info;
    tmx_message_h        msg = NULL;
    char                 buf[64] = {0};
    uint64_t             fake[64];
    tmx_status_t         st;

    bi_env_open(&env);
    /* send */
    BI_EXPECT(tmx_tag_send_nb(NULL, buf, 8, 1, NULL, &req), TMX_ERR_INVALID_PARAM);
    BI_EXPECT(tmx_tag_send_nb(env.ep, buf, 8, 1, NULL, NULL), TMX_ERR_INVALID_PARAM);
    BI_EXPECT(tmx_tag_send_nb(env.ep, NULL, 8, 1, NULL, &req), TMX_ERR_INVALID_PARAM);
    BI_EXPECT(tmx_tag_send_nb(env.ep, buf, SIZE_MAX, 1, NULL, &req), TMX_ERR_INVALID_PARAM);
    BI_EXPECT(tmx_tag_send_nb(env.ep, buf, SIZE_MAX / 2, 1, NULL, &req), TMX_ERR_INVALID_PARAM);
    memset(&rp, 0, sizeof(rp));
    rp.field_mask = 1ull << 45;
    bi_note       = "[params: unknown field_mask bit 45]";
    BI_EXPECT(tmx_tag_send_nb(env.ep, buf, 8, 1, &rp, &req), TMX_ERR_INVALID_PARAM);
    rp.field_mask = TMX_REQ_PARAM_FLAGS;
    rp.flags      = 1u << 30;
    bi_note       = "[params: unknown flag bit 30]";
    BI_EXPECT(tmx_tag_send_nb(env.ep, buf, 8, 1, &rp, &req), TMX_ERR_INVALID_PARAM);
    rp.field_mask = TMX_REQ_PARAM_CALLBACK;
    rp.flags      = 0;
    rp.cb.send    = NULL;
    req           = NULL;
    bi_note       = "[params: TMX_REQ_PARAM_CALLBACK with cb.send NULL]";
    if (!BI_EXPECT(tmx_tag_send_nb(env.ep, buf, 8, 1, &rp, &req), TMX_ERR_INVALID_PARAM)) {
        /* accepted anyway: take the message off the queue again */
        (void)tmx_tag_recv(env.w, buf, 8, 1, ~0ull, &info);
        tmx_request_free(req);
    }
    bi_note = "";
    BI_EXPECT(tmx_tag_send(NULL, buf, 8, 1), TMX_ERR_INVALID_PARAM);
    BI_EXPECT(tmx_tag_send_sync(NULL, buf, 8, 1), TMX_ERR_INVALID_PARAM);
    BI_EXPECT(tmx_tag_send(env.ep, NULL, 8, 1), TMX_ERR_INVALID_PARAM);
    BI_EXPECT(tmx_tag_send(env.ep, buf, SIZE_MAX, 1), TMX_ERR_INVALID_PARAM);
    /* recv */
    BI_EXPECT(tmx_tag_recv_nb(NULL, buf, 8, 1, ~0ull, NULL, &req), TMX_ERR_INVALID_PARAM);
    BI_EXPECT(tmx_tag_recv_nb(env.w, buf, 8, 1, ~0ull, NULL, NULL), TMX_ERR_INVALID_PARAM);
    BI_EXPECT(tmx_tag_recv_nb(env.w, NULL, 8, 1, ~0ull, NULL, &req), TMX_ERR_INVALID_PARAM);
    BI_EXPECT(tmx_tag_recv_nb(env.w, buf, SIZE_MAX, 1, ~0ull, NULL, &req), TMX_ERR_INVALID_PARAM);
    rp.field_mask = 1ull << 45;
    bi_note       = "[params: unknown field_mask bit 45]";
    BI_EXPECT(tmx_tag_recv_nb(env.w, buf, 8, 1, ~0ull, &rp, &req), TMX_ERR_INVALID_PARAM);
    rp.field_mask = TMX_REQ_PARAM_IMM;
    rp.imm        = 7;
    bi_note       = "[params: TMX_REQ_PARAM_IMM on a receive]";
    BI_EXPECT(tmx_tag_recv_nb(env.w, buf, 8, 1, ~0ull, &rp, &req), TMX_ERR_INVALID_PARAM);
    rp.field_mask = TMX_REQ_PARAM_CALLBACK;
    rp.cb.recv    = NULL;
    req           = NULL;
    bi_note       = "[params: TMX_REQ_PARAM_CALLBACK with cb.recv NULL]";
    if (!BI_EXPECT(tmx_tag_recv_nb(env.w, buf, 8, 1, ~0ull, &rp, &req), TMX_ERR_INVALID_PARAM)) {
        (void)tmx_request_cancel(req);
        tmx_request_free(req);
    }
    bi_note = "";
    BI_EXPECT(tmx_tag_recv(NULL, buf, 8, 1, ~0ull, &info), TMX_ERR_INVALID_PARAM);
    BI_EXPECT(tmx_tag_recv(env.w, NULL, 8, 1, ~0ull, &info), TMX_ERR_INVALID_PARAM);
    /* zero length with a NULL buffer is valid, both ways */
    req = NULL;
    BI_EXPECT(tmx_tag_send_nb(env.ep, NULL, 0, 0x77, NULL, &req), TMX_OK, TMX_INPROGRESS);
    tmx_request_free(req);
    BI_EXPECT(tmx_tag_recv(env.w, NULL, 0, 0x77, ~0ull, &info), TMX_OK);
    BI_TRUE("tmx_tag_recv(w, NULL, 0, ...) info.length == 0", info.length == 0);
    /* probe */
    BI_EXPECT(tmx_tag_probe(NULL, 0, 0, TMX_PROBE_PEEK, &info, NULL), TMX_ERR_INVALID_PARAM);
    BI_EXPECT(tmx_tag_probe(env.w, 0, 0, (tmx_probe_mode_t)3, &info, &msg),
              TMX_ERR_INVALID_PARAM);
    BI_EXPECT(tmx_tag_probe(env.w, 0, 0, (tmx_probe_mode_t)-1, &info, &msg),
              TMX_ERR_INVALID_PARAM);
    BI_EXPECT(tmx_tag_probe(env.w, 0, 0, TMX_PROBE_CLAIM, &info, NULL), TMX_ERR_INVALID_PARAM);
    BI_EXPECT(tmx_tag_probe(env.w, 0x99, ~0ull, TMX_PROBE_PEEK, &info, NULL),
              TMX_ERR_NO_MESSAGE);
    /* a named source (API 1.3): NULL, or an endpoint of another worker, is refused (tmx.h) */
    {
        tmx_worker_h w2 = NULL;

        if (tmx_worker_create(env.ctx, NULL, &w2) != TMX_OK) {
            printf("FAIL setup: could not create a second worker\n");
            exit(3);
        }
        memset(&rp, 0, sizeof(rp));
        rp.field_mask = TMX_REQ_PARAM_SOURCE;
        rp.source     = NULL;
        req           = NULL;
        bi_note       = "[params: TMX_REQ_PARAM_SOURCE, source NULL]";
        BI_EXPECT(tmx_tag_recv_nb(env.w, buf, 8, 1, ~0ull, &rp, &req), TMX_ERR_INVALID_PARAM);
        rp.source = env.ep;
        bi_note   = "[params: TMX_REQ_PARAM_SOURCE, an endpoint of another worker]";
        BI_EXPECT(tmx_tag_recv_nb(w2, buf, 8, 1, ~0ull, &rp, &req), TMX_ERR_INVALID_PARAM);
        bi_note = "[params: TMX_REQ_PARAM_SOURCE on a send]";
        BI_EXPECT(tmx_tag_send_nb(env.ep, buf, 8, 1, &rp, &req), TMX_ERR_INVALID_PARAM);
        bi_note = "[source: an endpoint of another worker]";
        BI_EXPECT(tmx_tag_probe_ex(w2, 0, 0, env.ep, TMX_PROBE_PEEK, &info, NULL),
                  TMX_ERR_INVALID_PARAM);
        bi_note = "[source: an endpoint of this worker, nothing sent]";
        BI_EXPECT(tmx_tag_probe_ex(env.w, 0, 0, env.ep, TMX_PROBE_PEEK, &info, NULL),
                  TMX_ERR_NO_MESSAGE);
        bi_note = "";
        (void)tmx_worker_destroy(w2);
    }
    BI_EXPECT(tmx_tag_msg_recv_nb(NULL, buf, 8, msg, NULL, &req), TMX_ERR_INVALID_PARAM);
    BI_EXPECT(tmx_tag_msg_recv_nb(env.w, buf, 8, NULL, NULL, &req), TMX_ERR_INVALID_PARAM);
    /* Handles that point at memory that is not a tmx object. */
    memset(fake, 0, sizeof(fake));
    BI_EXPECT(tmx_tag_msg_recv_nb(env.w, buf, 8, (tmx_message_h)(void *)fake, NULL, &req),
              TMX_ERR_INVALID_HANDLE, TMX_ERR_INVALID_PARAM);
    BI_EXPECT(tmx_request_test((tmx_request_h)(void *)fake, NULL), TMX_ERR_INVALID_HANDLE,
              TMX_ERR_INVALID_PARAM);
    {
        void  *a = NULL;
        size_t l = 0;
        BI_EXPECT(tmx_worker_get_address((tmx_worker_h)(void *)fake, &a, &l),
                  TMX_ERR_INVALID_HANDLE, TMX_ERR_INVALID_PARAM);
    }
    BI_EXPECT(tmx_tag_send_nb((tmx_ep_h)(void *)fake, buf, 8, 1, NULL, &req),
              TMX_ERR_INVALID_HANDLE, TMX_ERR_INVALID_PARAM);
    /* a real message, claimed, then received with bad arguments */
    st = tmx_tag_send_nb(env.ep, buf, 8, 0x55, NULL, &req);
    if (st == TMX_INPROGRESS) {
        (void)tmx_request_wait(req, NULL);
        tmx_request_free(req);
    }
    for (int i = 0; i < 1000 && tmx_tag_probe(env.w, 0x55, ~0ull, TMX_PROBE_PEEK, NULL, NULL) ==
                                    TMX_ERR_NO_MESSAGE; i++) {
        tmx_worker_progress(env.w);
    }
    if (BI_EXPECT(tmx_tag_probe(env.w, 0x55, ~0ull, TMX_PROBE_CLAIM, &info, &msg), TMX_OK)) {
        BI_EXPECT(tmx_tag_msg_recv_nb(env.w, NULL, 8, msg, NULL, &req), TMX_ERR_INVALID_PARAM);
        BI_EXPECT(tmx_tag_msg_recv_nb(env.w, buf, 8, msg, NULL, NULL), TMX_ERR_INVALID_PARAM);
        if (BI_EXPECT(tmx_tag_msg_recv_nb(env.w, buf, 8, msg, NULL, &req), TMX_INPROGRESS)) {
            BI_EXPECT(tmx_request_wait(req, &info), TMX_OK);
            tmx_request_free(req);
            /* The message handle was consumed by the receive. */
            BI_EXPECT(tmx_tag_msg_recv_nb(env.w, buf, 8, msg, NULL, &req),
                      TMX_ERR_INVALID_HANDLE, TMX_ERR_INVALID_PARAM);
        }
    }
    /* requests */
    BI_EXPECT(tmx_request_test(NULL, &info), TMX_ERR_INVALID_PARAM);
    BI_EXPECT(tmx_request_wait(NULL, &info), TMX_ERR_INVALID_PARAM);
    BI_EXPECT(tmx_request_cancel(NULL), TMX_ERR_INVALID_PARAM);
    tmx_request_free(NULL);
    BI_TRUE("tmx_request_free(NULL) returns", 1);
    /* A send cannot be canceled; a receive can. */
    if (BI_EXPECT(tmx_tag_recv_nb(env.w, buf, 8, 0x66, ~0ull, NULL, &rreq), TMX_INPROGRESS)) {
        BI_EXPECT(tmx_request_cancel(rreq), TMX_OK);
        BI_EXPECT(tmx_request_wait(rreq, NULL), TMX_ERR_CANCELED);
        tmx_request_free(rreq);
    }
    /* A receive freed while in progress (it stays posted until the worker goes): waiting for it
     * is refused, not a wait forever; a second free is ignored. */
    if (BI_EXPECT(tmx_tag_recv_nb(env.w, buf, 8, 0x67, ~0ull, NULL, &rreq), TMX_INPROGRESS)) {
        tmx_request_free(rreq);
        BI_EXPECT(tmx_request_wait(rreq, NULL), TMX_ERR_INVALID_HANDLE);
        tmx_request_free(rreq);
        BI_TRUE("a second tmx_request_free of a request in progress returns", 1);
    }
    {
        tmx_worker_attr_t attr = {.field_mask = TMX_WORKER_ATTR_PEERS};
        size_t            big;
        char             *bb;

        (void)tmx_worker_query(env.w, &attr);
        big = 2 * attr.peer[TMX_PEER_SELF].eager_max + 64;
        bb  = calloc(1, big);
        st  = tmx_tag_send_nb(env.ep, bb, big, 0x88, NULL, &req);
        BI_TRUE("rendezvous send to self returns TMX_INPROGRESS", st == TMX_INPROGRESS);
        if (st == TMX_INPROGRESS) {
            BI_EXPECT(tmx_request_cancel(req), TMX_ERR_UNSUPPORTED);
            BI_EXPECT(tmx_tag_recv(env.w, bb, big, 0x88, ~0ull, &info), TMX_OK);
            BI_EXPECT(tmx_request_wait(req, NULL), TMX_OK);
            tmx_request_free(req);
        }
        free(bb);
    }
    bi_env_close(&env);
}

static void bi_group_job(void)
{
    tmx_job_h job = NULL;
    char      in[4] = {0}, out[4];

    BI_EXPECT(tmx_job_init(NULL), TMX_ERR_INVALID_PARAM);
    BI_EXPECT(tmx_job_allgather(NULL, in, sizeof(in), out), TMX_ERR_INVALID_PARAM);
    BI_EXPECT(tmx_job_barrier(NULL), TMX_ERR_INVALID_PARAM);
    BI_EXPECT(tmx_job_connect(NULL, NULL, NULL), TMX_ERR_INVALID_PARAM);
    (void)tmx_job_rank(NULL);
    (void)tmx_job_size(NULL);
    tmx_job_finalize(NULL);
    BI_TRUE("tmx_job_rank/size/finalize(NULL) return", 1);
    /* Alone (no launcher environment) the program is a job of one. */
    if (BI_EXPECT(tmx_job_init(&job), TMX_OK)) {
        BI_EXPECT(tmx_job_allgather(job, NULL, sizeof(in), out), TMX_ERR_INVALID_PARAM);
        BI_EXPECT(tmx_job_allgather(job, in, sizeof(in), NULL), TMX_ERR_INVALID_PARAM);
        BI_EXPECT(tmx_job_connect(job, NULL, NULL), TMX_ERR_INVALID_PARAM);
        tmx_job_finalize(job);
    }
}

typedef struct bi_group {
    const char *name;
    void (*fn)(void);
} bi_group_t;

static const bi_group_t bi_groups[] = {
    {"status", bi_group_status}, {"context", bi_group_context}, {"worker", bi_group_worker},
    {"ep_addr", bi_group_ep_addr}, {"ep_close", bi_group_ep_close}, {"tag", bi_group_tag},
    {"job", bi_group_job},
};

int main(int argc, char **argv)
{
    const char *only = (argc > 1) ? argv[1] : NULL;
    int         ran  = 0;

    bi_counts = mmap(NULL, sizeof(*bi_counts), PROT_READ | PROT_WRITE,
                     MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (bi_counts == MAP_FAILED) {
        perror("mmap");
        return 2;
    }
    /* Not part of a job even when started by tmxrun's environment. */
    unsetenv("TMX_RANK");
    unsetenv("TMX_SIZE");
    unsetenv("TMX_BOOT_ADDR");
    for (size_t g = 0; g < sizeof(bi_groups) / sizeof(bi_groups[0]); g++) {
        pid_t pid;
        int   wstatus;

        if (only != NULL && strcmp(only, bi_groups[g].name) != 0) {
            continue;
        }
        printf("# group %s\n", bi_groups[g].name);
        fflush(stdout);
        ran++;
        pid = fork();
        if (pid == 0) {
            alarm(BI_GROUP_TIMEOUT);
            bi_groups[g].fn();
            fflush(stdout);
            _exit(0);
        }
        if (pid < 0 || waitpid(pid, &wstatus, 0) != pid) {
            perror("fork/waitpid");
            return 2;
        }
        if (WIFSIGNALED(wstatus)) {
            printf("FAIL group %s: crashed with signal %d (%s)%s; the last PASS/FAIL line "
                   "above is the last call that returned\n",
                   bi_groups[g].name, WTERMSIG(wstatus), strsignal(WTERMSIG(wstatus)),
                   WTERMSIG(wstatus) == SIGALRM ? " - hung" : "");
            bi_counts->failed++;
        } else if (WEXITSTATUS(wstatus) != 0) {
            printf("FAIL group %s: exited with %d\n", bi_groups[g].name, WEXITSTATUS(wstatus));
            bi_counts->failed++;
        }
    }
    if (ran == 0) {
        fprintf(stderr, "tmx_badinput: no group named '%s'\n", only);
        return 2;
    }
    printf("%d passed, %d failed\n", bi_counts->passed, bi_counts->failed);
    return (bi_counts->failed > 0) ? 1 : 0;
}
