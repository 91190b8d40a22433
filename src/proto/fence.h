/*
 * The fence planner: the one place that sets TMX_SEND_FENCE.
 *
 * A QP with out-of-order data placement (OOO, TMX_DEV_CAP_OOO, enabled at INIT -> RTR) may
 * place the data of a work request before that of an earlier one, except where the ordering
 * table below (DESIGN.md, "OOO data placement"; the kernel's OOO document) says "#"; where it
 * says "F" the second is placed after the first only if it carries the fence flag. Without
 * OOO a QP keeps the usual RC order and the planner never fences.
 *
 * The protocols do not set the flag themselves: each protocol step is listed in
 * tmx_fence_step_t with the earlier operation on the same QP whose data it relies on being
 * placed first (fence.c says why, step by step), and asks tmx_fence_flags_for_step.
 */
#ifndef TMX_PROTO_FENCE_H
#define TMX_PROTO_FENCE_H

#include "prov/prov.h"

/* Rows and columns of the ordering table. */
typedef enum {
    TMX_FENCE_OP_SEND      = 0,
    TMX_FENCE_OP_BIND_MW   = 1,
    TMX_FENCE_OP_WRITE     = 2,
    TMX_FENCE_OP_READ      = 3,
    TMX_FENCE_OP_ATOMIC    = 4,
    TMX_FENCE_OP_LOCAL_INV = 5,
    TMX_FENCE_OP_WRITE_IMM = 6,
    TMX_FENCE_OP_NONE      = 7, /* a step that relies on no earlier operation */
    TMX_FENCE_NUM_OPS      = 7,
} tmx_fence_op_t;

/* The table's cell: '#' (always ordered) or 'F' (ordered only with the fence on second). */
char tmx_fence_cell(tmx_fence_op_t first, tmx_fence_op_t second);

/* The table's operation of a work request opcode. */
tmx_fence_op_t tmx_fence_op_of(tmx_wr_opcode_t op);

/* TMX_SEND_FENCE when a work request of opcode second, posted after one of first on a QP
 * with OOO placement ooo, must carry the fence to be placed after it; 0 otherwise (and always
 * with drop, TMX_FENCE_DROP, for tests). */
unsigned tmx_fence_flags(int ooo, tmx_fence_op_t first, tmx_wr_opcode_t second, int drop);

/* The protocol steps that post on an RC QP (src/proto, src/core). */
typedef enum {
    TMX_FENCE_STEP_EAGER     = 0, /* EAGER / EAGER_SYNC SEND, header and payload */
    TMX_FENCE_STEP_RTS       = 1, /* rendezvous RTS SEND */
    TMX_FENCE_STEP_CTRL      = 2, /* ACK, CREDIT, DISC, DISC_ACK SENDs */
    TMX_FENCE_STEP_RNDV_READ = 3, /* the receiver's RDMA READ of the sender's buffer */
    TMX_FENCE_STEP_RNDV_FIN  = 4, /* the FIN SEND after that READ */
    TMX_FENCE_NUM_STEPS      = 5,
} tmx_fence_step_t;

/* What a step posts, and the earlier operation on the same QP it relies on being placed
 * before it (TMX_FENCE_OP_NONE: none, or only through a completion it waited for). */
tmx_wr_opcode_t tmx_fence_step_opcode(tmx_fence_step_t step);
tmx_fence_op_t  tmx_fence_step_relies_on(tmx_fence_step_t step);

/* The send flags (TMX_SEND_FENCE or 0) of step on a QP with OOO placement ooo. */
unsigned tmx_fence_flags_for_step(int ooo, tmx_fence_step_t step, int drop);

#endif /* TMX_PROTO_FENCE_H */
