/* tmx_info: version, devices and capabilities, configuration variables, and what a worker
 * would use to reach each class of peer. Uses only the public API. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>

#include <tmx/tmx.h>

enum {
    TMX_INFO_VERSION = 1u << 0,
    TMX_INFO_DEVICES = 1u << 1,
    TMX_INFO_CONFIG  = 1u << 2,
    TMX_INFO_WORKER  = 1u << 3,
    TMX_INFO_ALL     = TMX_INFO_VERSION | TMX_INFO_DEVICES | TMX_INFO_CONFIG | TMX_INFO_WORKER,
};

static const char *const tmx_info_peer_names[TMX_PEER_CLASS_LAST] = {
    [TMX_PEER_SELF]  = "self",
    [TMX_PEER_LOCAL] = "local (same host)",
    [TMX_PEER_NET]   = "network (other hosts)",
};

static const char *const tmx_info_thread_modes[] = {
    [TMX_THREAD_MODE_SINGLE]     = "single",
    [TMX_THREAD_MODE_SERIALIZED] = "serialized",
    [TMX_THREAD_MODE_MULTI]      = "multi",
};

static void tmx_info_usage(FILE *stream, const char *prog)
{
    fprintf(stream,
            "usage: %s [-v] [-d] [-c] [-w] [-a] [-h]\n"
            "  -v  print the library version\n"
            "  -d  print providers, devices and their capabilities\n"
            "  -c  print every TMX_* configuration variable with its value, default and doc\n"
            "  -w  create a worker and print how it reaches each class of peer\n"
            "  -a  all of the above\n"
            "  -h  this help\n"
            "With no option, -v -d is assumed.\n",
            prog);
}

static void tmx_info_print_size(const char *label, size_t value)
{
    /* SIZE_MAX means "no limit" in the worker attributes. */
    if (value == (size_t)-1) {
        printf("#     %-16s unlimited\n", label);
    } else {
        printf("#     %-16s %zu\n", label, value);
    }
}

/* Connects the worker to itself and sends one message through the connection, so that the
 * query can say what mode its eager-RDMA ring takes on this device (the receiving side
 * chooses when the connection comes up). 0 when that worked within two seconds. */
static int tmx_info_self_connect(tmx_worker_h worker, tmx_ep_h *ep_p)
{
    tmx_ep_params_t ep_params;
    tmx_request_h   sreq = NULL, rreq = NULL;
    void           *addr;
    size_t          len;
    char            out = 'x', in = 0;
    int             n   = 0;

    *ep_p = NULL;
    if (tmx_worker_get_address(worker, &addr, &len) != TMX_OK) {
        return -1;
    }
    ep_params.field_mask     = TMX_EP_PARAM_ADDRESS;
    ep_params.address        = addr;
    ep_params.address_length = len;
    if (tmx_ep_create(worker, &ep_params, ep_p) != TMX_OK) {
        tmx_worker_release_address(worker, addr);
        return -1;
    }
    tmx_worker_release_address(worker, addr);
    if (tmx_tag_recv_nb(worker, &in, 1, 1, ~(tmx_tag_t)0, NULL, &rreq) < 0 ||
        tmx_tag_send_nb(*ep_p, &out, 1, 1, NULL, &sreq) < 0) {
        return -1;
    }
    while (n++ < 2000000 && (tmx_request_test(rreq, NULL) == TMX_INPROGRESS ||
                             (sreq != NULL && tmx_request_test(sreq, NULL) == TMX_INPROGRESS))) {
        tmx_worker_progress(worker);
    }
    if (sreq != NULL) {
        tmx_request_free(sreq);
    }
    tmx_request_free(rreq);
    return in == out ? 0 : -1;
}

static void tmx_info_ring(tmx_worker_h worker)
{
    tmx_worker_attr_t attr = {.field_mask = TMX_WORKER_ATTR_RING};
    tmx_ep_h          ep;
    const char       *mode;

    if (!tmx_info_self_connect(worker, &ep) && tmx_worker_query(worker, &attr) == TMX_OK) {
        const tmx_ring_attr_t *r = &attr.ring;

        if (r->eps_whole > 0) {
            mode = "whole: polled on a flag at each slot's end (whole-message order)";
        } else if (r->eps_aligned128 > 0) {
            mode = "aligned128: polled on a stamp in each 128-byte block (blocks in order)";
        } else if (r->eps_imm > 0) {
            mode = "imm: RDMA write with immediate, seen in the completion queue (no "
                   "data-in-order promise)";
        } else {
            mode = "none (TMX_RING=no, or tag-matching offload)";
        }
        printf("#   eager-RDMA ring  %s\n", mode);
        if (r->enabled) {
            printf("#   ring limits      %u senders at most, %u slots of %zu bytes each\n",
                   r->max_rings, r->slots, r->slot_size);
        }
    } else {
        printf("#   eager-RDMA ring  unknown (a connection to itself did not come up)\n");
    }
    if (ep != NULL) {
        tmx_ep_close(ep, TMX_EP_CLOSE_FORCE);
    }
}

static int tmx_info_worker(tmx_context_h context)
{
    tmx_worker_params_t params = {.field_mask = 0};
    tmx_worker_attr_t   attr   = {.field_mask = TMX_WORKER_ATTR_THREAD_MODE |
                                                TMX_WORKER_ATTR_PEERS | TMX_WORKER_ATTR_LIMITS |
                                                TMX_WORKER_ATTR_WAIT | TMX_WORKER_ATTR_TM |
                                                TMX_WORKER_ATTR_XRC};
    static const char *const qp_states[] = {"reset", "init", "rtr", "rts", "err"};
    tmx_xrc_rcv_qp_attr_t    rcv[16];
    static const char *const wait_modes[] = {"auto", "spin", "yield", "sleep"};
    tmx_worker_h        worker;
    tmx_status_t        status;
    int                 ret    = 1;

    attr.xrc.rcv_qps     = rcv;
    attr.xrc.max_rcv_qps = sizeof(rcv) / sizeof(rcv[0]);
    status = tmx_worker_create(context, &params, &worker);
    if (status != TMX_OK) {
        fprintf(stderr, "tmx_info: worker create failed: %s\n", tmx_status_string(status));
        goto out;
    }
    status = tmx_worker_query(worker, &attr);
    if (status != TMX_OK) {
        fprintf(stderr, "tmx_info: worker query failed: %s\n", tmx_status_string(status));
        goto out_destroy;
    }
    printf("#\n# worker\n#\n");
    if ((unsigned)attr.thread_mode <= TMX_THREAD_MODE_MULTI) {
        printf("#   thread mode      %s\n", tmx_info_thread_modes[attr.thread_mode]);
    }
    printf("#   unexp budget     %zu bytes\n", attr.unexp_budget);
    printf("#   eager credits    %u per endpoint\n", attr.eager_credits);
    if ((unsigned)attr.wait_mode <= TMX_WAIT_SLEEP) {
        printf("#   wait             %s, spin %u us%s\n", wait_modes[attr.wait_mode],
               attr.wait_spin_us, attr.can_sleep ? "" : " (no device can wake a sleeper)");
    }
    if (attr.local_procs < 0) {
        printf("#   oversubscribed   no (processes sharing the %d cpus unknown)\n", attr.cpus);
    } else {
        printf("#   oversubscribed   %s (%d processes on %d cpus)\n",
               attr.oversubscribed ? "yes, idle polls yield" : "no", attr.local_procs,
               attr.cpus);
    }
    if (attr.tm.enabled) {
        printf("#   tag matching     offloaded to %.*s: %u tags, %u ops, rendezvous %s, "
               "receives from %zu bytes\n", (int)sizeof(attr.tm.device), attr.tm.device,
               attr.tm.max_num_tags, attr.tm.max_ops, attr.tm.rndv_offload ? "offloaded" : "in software",
               attr.tm.thresh);
        printf("#   tag list counters offered %llu, matched %llu, unexpected %llu, syncs %llu, "
               "sync requests %llu, fallbacks %llu, forced %llu, rendezvous %llu\n",
               (unsigned long long)attr.tm.offered, (unsigned long long)attr.tm.matched,
               (unsigned long long)attr.tm.unexpected, (unsigned long long)attr.tm.syncs,
               (unsigned long long)attr.tm.sync_reqs, (unsigned long long)attr.tm.fallbacks,
               (unsigned long long)attr.tm.forced, (unsigned long long)attr.tm.rndv);
    } else {
        printf("#   tag matching     software\n");
    }
    tmx_info_ring(worker);
    if (attr.xrc.enabled) {
        printf("#   xrc              on %.*s: %u domain%s of node %016llx, SRQ numbers",
               (int)sizeof(attr.xrc.device), attr.xrc.device, attr.xrc.domains,
               attr.xrc.domains == 1 ? "" : "s", (unsigned long long)attr.xrc.node_id);
        for (unsigned d = 0; d < attr.xrc.domains && d < 4; d++) {
            printf(" %u", attr.xrc.srq_num[d]);
        }
        printf("\n");
    } else {
        printf("#   xrc              off (one RC queue pair per peer)\n");
    }
    printf("#   connections      %u (rc %u, xrc initiators %u); receive contexts %u (rc %u, "
           "xrc targets %u, srqs %u); xrc targets opened %u\n",
           attr.xrc.connections, attr.xrc.rc_qps, attr.xrc.ini_qps, attr.xrc.rcv_contexts,
           attr.xrc.rc_qps, attr.xrc.tgt_qps, attr.xrc.srqs, attr.xrc.tgt_opened);
    for (unsigned i = 0; i < attr.xrc.num_rcv_qps && i < attr.xrc.max_rcv_qps; i++) {
        const tmx_xrc_rcv_qp_attr_t *r = &rcv[i];

        printf("#   xrc receive qp   %u: %s, domain %u, srq %u, peer %016llx, %s\n", r->qp_num,
               (unsigned)r->state <= TMX_XRC_QP_ERR ? qp_states[r->state] : "?", r->domain,
               r->srq_num, (unsigned long long)r->peer_id, r->created ? "created" : "opened");
    }
    for (int c = 0; c < TMX_PEER_CLASS_LAST; c++) {
        const tmx_peer_class_attr_t *p = &attr.peer[c];

        printf("#   peer class %s:\n", tmx_info_peer_names[c]);
        if (!p->available) {
            printf("#     unreachable (no device)\n");
            continue;
        }
        /* The strings come from the library; bound them anyway. */
        printf("#     provider         %.*s\n", (int)sizeof(p->provider), p->provider);
        printf("#     device           %.*s\n", (int)sizeof(p->device), p->device);
        printf("#     protocol         %.*s\n", (int)sizeof(p->protocol), p->protocol);
        tmx_info_print_size("eager max", p->eager_max);
        tmx_info_print_size("rndv threshold", p->rndv_threshold);
        tmx_info_print_size("max message", p->max_msg);
    }
    ret = 0;
out_destroy:
    tmx_worker_destroy(worker);
out:
    return ret;
}

static int tmx_info_run(unsigned what)
{
    tmx_context_h context = NULL;
    tmx_status_t  status;
    int           ret     = 0;

    if (what & TMX_INFO_VERSION) {
        printf("# tmx version %s (API %d.%d)\n", tmx_version_string(), TMX_API_MAJOR,
               TMX_API_MINOR);
    }
    if (what & (TMX_INFO_CONFIG | TMX_INFO_DEVICES | TMX_INFO_WORKER)) {
        /* Creating a context reads and checks the configuration: a malformed TMX_* variable
         * (or an unknown provider name) fails it with INVALID_PARAM after the library named
         * the variable on stderr. That is an error for -c too, which then prints no table. */
        status = tmx_context_create(NULL, &context);
        if (status == TMX_ERR_INVALID_PARAM) {
            fprintf(stderr, "tmx_info: invalid configuration (see the message above)\n");
            ret = 1;
            goto out;
        }
        if (status != TMX_OK) {
            context = NULL;
            if (what & (TMX_INFO_DEVICES | TMX_INFO_WORKER)) {
                fprintf(stderr, "tmx_info: context create failed: %s\n",
                        tmx_status_string(status));
                ret = 1;
            }
        }
    }
    if (what & TMX_INFO_CONFIG) {
        tmx_config_print(stdout, TMX_CONFIG_PRINT_DOC);
    }
    if (context == NULL) {
        goto out;
    }
    if (what & TMX_INFO_DEVICES) {
        status = tmx_context_print_info(context, stdout);
        if (status == TMX_ERR_NO_DEVICE) {
            fprintf(stderr, "tmx_info: no usable device (see the providers above)\n");
            ret = 1;
        } else if (status != TMX_OK) {
            fprintf(stderr, "tmx_info: cannot print devices: %s\n", tmx_status_string(status));
            ret = 1;
        }
    }
    if ((what & TMX_INFO_WORKER) && tmx_info_worker(context) != 0) {
        ret = 1;
    }
    tmx_context_destroy(context);
out:
    return ret;
}

int main(int argc, char **argv)
{
    unsigned what = 0;
    int      opt;

    while ((opt = getopt(argc, argv, "vdcwah")) != -1) {
        switch (opt) {
        case 'v':
            what |= TMX_INFO_VERSION;
            break;
        case 'd':
            what |= TMX_INFO_DEVICES;
            break;
        case 'c':
            what |= TMX_INFO_CONFIG;
            break;
        case 'w':
            what |= TMX_INFO_WORKER;
            break;
        case 'a':
            what |= TMX_INFO_ALL;
            break;
        case 'h':
            tmx_info_usage(stdout, "tmx_info");
            return 0;
        default:
            tmx_info_usage(stderr, "tmx_info");
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "tmx_info: unexpected argument '%s'\n", argv[optind]);
        tmx_info_usage(stderr, "tmx_info");
        return 2;
    }
    if (what == 0) {
        what = TMX_INFO_VERSION | TMX_INFO_DEVICES; /* what a user wants to see first */
    }
    return tmx_info_run(what);
}
