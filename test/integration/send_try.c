/*
 * TMX_SEND_FLAG_TRY (API 1.5): a send completes in place (TMX_OK) or is refused with
 * TMX_ERR_NO_RESOURCE, having sent, queued and kept nothing. One process, two workers on the
 * soft device (no launcher). Checks: refused before the endpoint is connected and above the
 * eager limit, accepted once connected; a burst to a receiver that does not progress is
 * refused once the credits or ring slots run out, and then exactly the accepted messages
 * arrive, in order, each with the value its buffer held at the call (the buffer is rewritten
 * right after each call, so a send that kept it would deliver a later value), followed by a
 * normal send queued behind them; TRY with SYNC, and TRY on a receive, are invalid. Also
 * (API 1.5 too) a receive freed right after posting can still be canceled: its callback runs
 * once with TMX_ERR_CANCELED; and one freed right after posting completes through its callback
 * with the data.
 *
 * Prints "send_try: N checks ok" and exits 0 when everything held; 77 without a soft device.
 */
#include <tmx/tmx.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int          rank, bad, checks; /* rank: it.h's messages */
static tmx_worker_h wk[2];
static tmx_ep_h     ep[2]; /* ep[i]: worker i to the other */

#define IT_COUNT_CHECKS
#include "it.h"

static int          cb_seen;
static tmx_status_t cb_status;

static void cb_recv(tmx_request_h req, tmx_status_t status, const tmx_tag_recv_info_t *info,
                    void *user_data)
{
    (void)req;
    (void)info;
    ++*(int *)user_data;
    cb_status = status;
}

#define TAG   5
#define BURST 100000 /* far more than any credit window or ring */

static tmx_status_t send_try(tmx_ep_h e, const void *buf, size_t len, unsigned flags,
                             tmx_request_h *req)
{
    tmx_request_params_t p = {.field_mask = TMX_REQ_PARAM_FLAGS, .flags = flags};
    return tmx_tag_send_nb(e, buf, len, TAG, &p, req);
}

/* receives one message of TAG on worker 1 into buf, progressing both workers */
static tmx_status_t recv_one(void *buf, size_t len, tmx_tag_recv_info_t *info)
{
    tmx_request_h r;
    tmx_status_t  s = tmx_tag_recv_nb(wk[1], buf, len, TAG, ~(tmx_tag_t)0, NULL, &r);
    long          n = 0;

    if (s != TMX_INPROGRESS) {
        return s;
    }
    while ((s = tmx_request_test(r, info)) == TMX_INPROGRESS && n++ < 100000000L) {
        tmx_worker_progress(wk[1]);
        tmx_worker_progress(wk[0]);
    }
    tmx_request_free(r);
    return s;
}

int main(void)
{
    tmx_context_h        ctx;
    void                *addr[2];
    size_t               alen[2];
    tmx_request_h        req;
    tmx_status_t         s;
    tmx_tag_recv_info_t  info;
    static unsigned char big[2u << 20]; /* above any eager limit (at most 1 MiB) */
    unsigned             v, got, accepted = 0, queued_v;
    tmx_request_h        queued = NULL;

    /* the soft device is always built and needs no hardware: no context is a failure, not a
     * reason to skip */
    s = tmx_context_create(NULL, &ctx);
    if (s != TMX_OK) {
        printf("send_try: FAIL tmx_context_create: %s\n", tmx_status_string(s));
        return 1;
    }
    for (int i = 0; i < 2; i++) {
        CHECK(tmx_worker_create(ctx, NULL, &wk[i]));
        CHECK(tmx_worker_get_address(wk[i], &addr[i], &alen[i]));
    }
    for (int i = 0; i < 2; i++) {
        tmx_ep_params_t p = {.field_mask     = TMX_EP_PARAM_ADDRESS,
                             .address        = addr[1 - i],
                             .address_length = alen[1 - i]};
        CHECK(tmx_ep_create(wk[i], &p, &ep[i]));
    }

    /* not connected yet: refused, nothing sent (the first message below is the normal one) */
    v   = 0xdead;
    req = (tmx_request_h)&v; /* must stay untouched */
    s   = send_try(ep[0], &v, sizeof(v), TMX_SEND_FLAG_TRY, &req);
    EXPECT(s == TMX_ERR_NO_RESOURCE, "before connection: %s", tmx_status_string(s));
    EXPECT(req == (tmx_request_h)&v, "before connection: request touched");

    /* connect with a normal message */
    v = 1;
    s = send_try(ep[0], &v, sizeof(v), 0, &req);
    EXPECT(s == TMX_OK || s == TMX_INPROGRESS, "normal send: %s", tmx_status_string(s));
    got = 0;
    s   = recv_one(&got, sizeof(got), &info);
    EXPECT(s == TMX_OK && got == 1, "first message: %s, value %u (a refused TRY was sent?)",
           tmx_status_string(s), got);
    if (req != NULL && s == TMX_OK) {
        while (tmx_request_test(req, NULL) == TMX_INPROGRESS) {
            tmx_worker_progress(wk[0]);
            tmx_worker_progress(wk[1]);
        }
        tmx_request_free(req);
    }

    /* connected: a small TRY completes in place */
    v   = 2;
    req = (tmx_request_h)&v;
    s   = send_try(ep[0], &v, sizeof(v), TMX_SEND_FLAG_TRY, &req);
    EXPECT(s == TMX_OK && req == NULL, "connected: %s, request %p", tmx_status_string(s),
           (void *)req);
    v   = 0;
    got = 0;
    s   = recv_one(&got, sizeof(got), &info);
    EXPECT(s == TMX_OK && got == 2 && info.length == sizeof(got), "TRY message: %s, value %u",
           tmx_status_string(s), got);

    /* above the eager limit: refused */
    req = (tmx_request_h)&v;
    s   = send_try(ep[0], big, sizeof(big), TMX_SEND_FLAG_TRY, &req);
    EXPECT(s == TMX_ERR_NO_RESOURCE && req == (tmx_request_h)&v, "2 MiB: %s",
           tmx_status_string(s));

    /* invalid combinations */
    s = send_try(ep[0], &v, sizeof(v), TMX_SEND_FLAG_TRY | TMX_SEND_FLAG_SYNC, &req);
    EXPECT(s == TMX_ERR_INVALID_PARAM, "TRY|SYNC: %s", tmx_status_string(s));
    {
        tmx_request_params_t p = {.field_mask = TMX_REQ_PARAM_FLAGS, .flags = TMX_SEND_FLAG_TRY};
        s = tmx_tag_recv_nb(wk[1], &got, sizeof(got), TAG, ~(tmx_tag_t)0, &p, &req);
        EXPECT(s == TMX_ERR_INVALID_PARAM, "TRY on a receive: %s", tmx_status_string(s));
    }

    /* a burst to a receiver that does not progress: accepted until refused */
    v = 100;
    for (unsigned i = 0; i < BURST; i++) {
        s = send_try(ep[0], &v, sizeof(v), TMX_SEND_FLAG_TRY, &req);
        if (s != TMX_OK) {
            break;
        }
        accepted++;
        v++; /* the buffer is ours again: a send that kept it would deliver this value */
    }
    EXPECT(s == TMX_ERR_NO_RESOURCE, "burst ended with %s after %u", tmx_status_string(s),
           accepted);
    EXPECT(accepted > 0 && accepted < BURST, "burst: %u accepted", accepted);
    /* a normal send now queues behind them */
    queued_v = 100 + accepted;
    s        = send_try(ep[0], &queued_v, sizeof(queued_v), 0, &queued);
    EXPECT(s == TMX_OK || s == TMX_INPROGRESS, "queued send: %s", tmx_status_string(s));
    if (s == TMX_OK) {
        queued = NULL;
    }
    v = 0xffff; /* what a send that kept &v would now deliver */
    for (unsigned i = 0; i <= accepted; i++) {
        got = 0;
        s   = recv_one(&got, sizeof(got), &info);
        if (s != TMX_OK || got != 100 + i) {
            EXPECT(0, "burst message %u of %u: %s, value %u", i, accepted + 1,
                   tmx_status_string(s), got);
            break;
        }
        checks++;
    }
    if (queued != NULL) {
        while (tmx_request_test(queued, NULL) == TMX_INPROGRESS) {
            tmx_worker_progress(wk[0]);
            tmx_worker_progress(wk[1]);
        }
        tmx_request_free(queued);
    }
    /* nothing more arrived: a refused TRY sent nothing */
    for (int k = 0; k < 1000; k++) {
        tmx_worker_progress(wk[0]);
        tmx_worker_progress(wk[1]);
    }
    s = tmx_tag_probe(wk[1], 0, 0, TMX_PROBE_PEEK, &info, NULL);
    EXPECT(s == TMX_ERR_NO_MESSAGE, "a message more: %s (tag %llu)", tmx_status_string(s),
           (unsigned long long)info.tag);

    /* freed right after posting: cancel still works, the callback runs once */
    {
        tmx_request_params_t p = {.field_mask = TMX_REQ_PARAM_CALLBACK | TMX_REQ_PARAM_USER_DATA,
                                  .cb.recv    = cb_recv, .user_data = &cb_seen};
        cb_seen = 0;
        s       = tmx_tag_recv_nb(wk[1], &got, sizeof(got), TAG + 1, ~(tmx_tag_t)0, &p, &req);
        EXPECT(s == TMX_INPROGRESS, "recv to cancel: %s", tmx_status_string(s));
        tmx_request_free(req);
        s = tmx_request_cancel(req);
        EXPECT(s == TMX_OK, "cancel after free: %s", tmx_status_string(s));
        EXPECT(cb_seen == 1 && cb_status == TMX_ERR_CANCELED,
               "canceled callback: %d times, %s", cb_seen, tmx_status_string(cb_status));
        /* and one that completes with data */
        cb_seen = 0;
        got     = 0;
        s       = tmx_tag_recv_nb(wk[1], &got, sizeof(got), TAG, ~(tmx_tag_t)0, &p, &req);
        EXPECT(s == TMX_INPROGRESS, "recv freed at once: %s", tmx_status_string(s));
        tmx_request_free(req);
        v = 77;
        s = send_try(ep[0], &v, sizeof(v), 0, &queued);
        EXPECT(s == TMX_OK || s == TMX_INPROGRESS, "send: %s", tmx_status_string(s));
        for (long k = 0; k < 10000000L && cb_seen == 0; k++) {
            tmx_worker_progress(wk[1]);
            tmx_worker_progress(wk[0]);
        }
        EXPECT(cb_seen == 1 && cb_status == TMX_OK && got == 77, "freed receive: %d, %s, %u",
               cb_seen, tmx_status_string(cb_status), got);
        if (s == TMX_INPROGRESS) {
            tmx_request_free(queued);
        }
    }

    for (int i = 0; i < 2; i++) {
        tmx_ep_close(ep[i], TMX_EP_CLOSE_FORCE);
    }
    for (int i = 0; i < 2; i++) {
        tmx_worker_release_address(wk[i], addr[i]);
        tmx_worker_destroy(wk[i]);
    }
    tmx_context_destroy(ctx);
    if (bad) {
        fprintf(stderr, "send_try: %d of %d checks failed\n", bad, checks);
        return 1;
    }
    printf("send_try: %d checks ok (%u sends accepted before the first refusal)\n", checks,
           accepted);
    return 0;
}
