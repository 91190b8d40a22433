/*
 * Conformance suite: shared state and helpers. Uses only the public API (<tmx/tmx.h>,
 * <tmx/tmx_job.h>) so that it runs unchanged on every device that was built.
 *
 * Every wait is time-bounded: a library bug must show up as "FAIL name: timed out ...", never
 * as a hung test run. Every case owns the top 8 bits of the tag (its case number) so that a
 * failing case cannot hand its leftovers to the next one.
 */
#ifndef TMX_TEST_CF_H
#define TMX_TEST_CF_H

#include <tmx/tmx.h>
#include <tmx/tmx_job.h>
#include "cf_status.h"

#include <stddef.h>
#include <stdint.h>

enum { CF_PASS = 0, CF_FAIL = 1, CF_SKIP = 2 };

#define CF_WHY_LEN    200
#define CF_CASE_SHIFT 56
#define CF_CASE_MASK  ((tmx_tag_t)0xff << CF_CASE_SHIFT)
#define CF_FULL_MASK  (~(tmx_tag_t)0)
/* Returned by the waiting helpers when the deadline passed; not a library status. */
#define CF_TIMED_OUT  ((tmx_status_t)-1000)

typedef struct cf_track {
    tmx_request_h req;
    int           in_use;
} cf_track_t;

typedef struct cf {
    tmx_job_h     job;
    tmx_context_h context;
    tmx_worker_h  worker;
    tmx_ep_h     *eps;
    int           rank;
    int           size;
    int           dst; /* ring: I send to dst and receive from src (one sender per receiver) */
    int           src;
    size_t        eager_max;      /* to other processes of this host */
    size_t        eager_max_self; /* to the worker itself */
    size_t        max_msg;
    unsigned      case_id;
    unsigned      script_seq; /* scripts run in this case so far: tag bits 48..55 */
    uint64_t      seed;
    long          schedules;
    int           verbose; /* -v: print every random schedule */
    double        timeout_s;
    unsigned      eager_credits; /* 0 if the worker does not say */
    char          why[CF_WHY_LEN];
    /* Requests and buffers of the running case, released (or, if the library still owns
     * them, leaked on purpose) by cf_case_cleanup. */
    cf_track_t   *reqs;
    size_t        nreqs;
    size_t        reqs_cap;
    void        **bufs;
    size_t        nbufs;
    size_t        bufs_cap;
} cf_t;

typedef int (*cf_case_fn_t)(cf_t *cf);

typedef struct cf_case {
    const char  *name;
    const char  *doc;
    cf_case_fn_t fn;
} cf_case_t;

/* Records why the case fails (first reason wins) and returns CF_FAIL. */
int cf_fail(cf_t *cf, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int cf_skip(cf_t *cf, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define CF_REQUIRE(_cf, _cond, ...)                                                               \
    do {                                                                                          \
        if (!(_cond)) {                                                                           \
            rc = cf_fail((_cf), __VA_ARGS__);                                                     \
            goto out;                                                                             \
        }                                                                                         \
    } while (0)

tmx_tag_t cf_tag(const cf_t *cf, uint64_t low);
double    cf_now(void);

/* Buffers owned by the case (freed at cleanup unless a request may still write them). */
void *cf_alloc(cf_t *cf, size_t len);
void  cf_fill(void *buf, size_t len, uint64_t seed);
/* Index of the first byte that differs from the pattern, or -1. */
long  cf_verify(const void *buf, size_t len, uint64_t seed);

void         cf_track(cf_t *cf, tmx_request_h req);
/* Frees the requests and buffers of the case so far (cancels what is still pending). */
void         cf_release(cf_t *cf);
tmx_status_t cf_send(cf_t *cf, tmx_ep_h ep, const void *buf, size_t len, tmx_tag_t tag,
                     unsigned flags, tmx_request_h *req_p);
tmx_status_t cf_recv(cf_t *cf, void *buf, size_t len, tmx_tag_t tag, tmx_tag_t mask,
                     tmx_request_h *req_p);
/* Progresses until the request completes or the deadline passes (CF_TIMED_OUT). A NULL
 * request (a send that completed in place) is TMX_OK. */
tmx_status_t cf_wait(cf_t *cf, tmx_request_h req, tmx_tag_recv_info_t *info);
/* Progresses and probes until a message is found or the deadline passes. */
tmx_status_t cf_probe_wait(cf_t *cf, tmx_tag_t tag, tmx_tag_t mask, tmx_probe_mode_t mode,
                           tmx_tag_recv_info_t *info, tmx_message_h *msg_p);
void         cf_progress_for(cf_t *cf, double seconds);
/* Blocking helpers built from the above. */
tmx_status_t cf_send_wait(cf_t *cf, tmx_ep_h ep, const void *buf, size_t len, tmx_tag_t tag);
tmx_status_t cf_recv_wait(cf_t *cf, void *buf, size_t len, tmx_tag_t tag, tmx_tag_t mask,
                          tmx_tag_recv_info_t *info);
const char  *cf_status_name(tmx_status_t status);

/* ---- scripts: a list of messages one rank sends and the receives its peer posts ---- */

typedef struct cf_msg {
    tmx_tag_t tag;
    size_t    len;
    unsigned  flags; /* TMX_SEND_FLAG_* */
} cf_msg_t;

typedef struct cf_rcv {
    tmx_tag_t tag;
    tmx_tag_t mask;
    size_t    buflen; /* 0: a NULL buffer */
} cf_rcv_t;

typedef enum {
    CF_ORDER_POSTED, /* post every receive, job barrier, then send */
    CF_ORDER_UNEXP,  /* send, wait until everything arrived (marker message), then post */
    CF_ORDER_MIXED,  /* sends and receives in a random interleaving with progress */
} cf_order_t;

typedef struct cf_script {
    const cf_msg_t *msgs;
    size_t          nmsgs;
    const cf_rcv_t *rcvs;
    size_t          nrcvs;
    cf_order_t      order;
    int             peer;  /* rank sent to (outgoing script) or received from (incoming) */
    uint64_t        salt;  /* varies the data patterns between scripts */
    int             drain_by_recv; /* leftovers: 1 = exact receives, 0 = probe discard */
    tmx_tag_t       space_mask;    /* nonzero: afterwards nothing of msgs[0]'s tag space
                                    * (tag & space_mask) may be left queued */
} cf_script_t;

/* The reference model: for each receive in post order, the earliest unmatched message in send
 * order that matches it. match[j] = message index; returns the number of receives that
 * nothing matches (0 for a valid script). */
size_t   cf_script_model(const cf_script_t *s, long *match);
/* Sends `out` to out->peer while receiving `in` from in->peer and checks every receive
 * against the model (status, tag, length, data, guard bytes), then the leftovers and the
 * sends. All ranks must call it together when order is CF_ORDER_POSTED. */
int      cf_script_run(cf_t *cf, const cf_script_t *out, const cf_script_t *in,
                       const char *label, uint64_t mix_seed);
uint64_t cf_rand(uint64_t *state);

extern const cf_case_t cf_cases[];
extern const size_t    cf_ncases;

int cf_case_random(cf_t *cf);

#endif /* TMX_TEST_CF_H */
