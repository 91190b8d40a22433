/* tmx_worker_get_address_compact (API 1.3): the compact form is short enough for a libfabric
 * endpoint name (FI_NAME_MAX, 64 bytes), tmx_ep_create takes it and the endpoint carries
 * messages, and every malformed variant (truncated, padded, flipped bytes) is refused with a
 * status, never a crash. */
#include <tmx/tmx.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

static tmx_status_t try_ep(tmx_worker_h w, const void *addr, size_t len)
{
    tmx_ep_params_t p = {.field_mask = TMX_EP_PARAM_ADDRESS, .address = addr,
                         .address_length = len};
    tmx_ep_h        ep;
    tmx_status_t    s = tmx_ep_create(w, &p, &ep);
    if (s == TMX_OK) {
        tmx_ep_close(ep, TMX_EP_CLOSE_FORCE);
    }
    return s;
}

int main(void)
{
    tmx_context_h ctx;
    tmx_worker_h  w;
    void         *addr, *full;
    size_t        len, full_len;
    tmx_ep_h      ep;

    if (tmx_context_create(NULL, &ctx) != TMX_OK || tmx_worker_create(ctx, NULL, &w) != TMX_OK) {
        printf("FAIL setup\n");
        return 1;
    }
    CHECK(tmx_worker_get_address_compact(NULL, &addr, &len) == TMX_ERR_INVALID_PARAM, "NULL");
    CHECK(tmx_worker_get_address_compact(w, NULL, &len) == TMX_ERR_INVALID_PARAM, "NULL addr");
    CHECK(tmx_worker_get_address_compact(w, &addr, NULL) == TMX_ERR_INVALID_PARAM, "NULL len");
    CHECK(tmx_worker_get_address(w, &full, &full_len) == TMX_OK, "full address");
    CHECK(tmx_worker_get_address_compact(w, &addr, &len) == TMX_OK, "compact address");
    printf("address: %zu bytes, compact %zu bytes\n", full_len, len);
    /* named segments (TMX_SOFT_MEMFD=no) make it longer: a known limit, tmx_fi(7) */
    const char *memfd = getenv("TMX_SOFT_MEMFD");
    if (memfd == NULL || strcmp(memfd, "no") != 0) {
        CHECK(len <= 63, "compact address of %zu bytes does not fit a 64-byte name", len);
    }
    CHECK(len < full_len, "compact address (%zu bytes) not shorter than the blob", len);

    /* the compact form makes an endpoint that carries a message */
    tmx_ep_params_t p = {.field_mask = TMX_EP_PARAM_ADDRESS, .address = addr,
                         .address_length = len};
    CHECK(tmx_ep_create(w, &p, &ep) == TMX_OK, "ep from compact address");
    int           in = 0, out = 42;
    tmx_request_h req;
    CHECK(tmx_tag_recv_nb(w, &in, sizeof(in), 7, ~(tmx_tag_t)0, NULL, &req) == TMX_INPROGRESS,
          "recv");
    CHECK(tmx_tag_send(ep, &out, sizeof(out), 7) == TMX_OK, "send");
    CHECK(tmx_request_wait(req, NULL) == TMX_OK, "wait");
    tmx_request_free(req);
    CHECK(in == 42, "received %d", in);
    CHECK(tmx_ep_close(ep, TMX_EP_CLOSE_FLUSH) == TMX_OK, "close");

    /* the full blob still makes an endpoint too */
    CHECK(try_ep(w, full, full_len) == TMX_OK, "ep from the full address");

    /* truncated and padded forms are refused */
    unsigned char *buf = malloc(len + 8);
    for (size_t l = 1; l < len; l++) {
        CHECK(try_ep(w, addr, l) == TMX_ERR_INVALID_ADDR, "truncated to %zu accepted", l);
    }
    memcpy(buf, addr, len);
    memset(buf + len, 0, 8);
    CHECK(try_ep(w, buf, len + 1) == TMX_ERR_INVALID_ADDR, "padded accepted");
    /* any byte changed: refused, unreachable, or (a byte of the random key) accepted -- never a
     * crash; ASan runs this too */
    for (size_t i = 0; i < len; i++) {
        for (int v = 0; v < 256; v += 17) {
            memcpy(buf, addr, len);
            buf[i] = (unsigned char)v;
            tmx_status_t s = try_ep(w, buf, len);
            CHECK(s == TMX_OK || s == TMX_ERR_INVALID_ADDR || s == TMX_ERR_UNREACHABLE,
                  "byte %zu = %d: %s", i, v, tmx_status_string(s));
        }
    }
    free(buf);
    tmx_worker_release_address(w, addr);
    tmx_worker_release_address(w, full);
    tmx_worker_destroy(w);
    tmx_context_destroy(ctx);
    printf("%s\n", fails ? "FAIL" : "PASS");
    return fails ? 1 : 0;
}
