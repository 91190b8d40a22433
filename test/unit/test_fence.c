/* Unit tests of the fence planner (src/proto/fence.c): every cell of DESIGN.md's ordering
 * table, the opcode mapping, and what each protocol step gets. */
#include <criterion/criterion.h>

#include "proto/fence.h"

/* DESIGN.md, "OOO data placement", written out cell by cell (1 = F). */
static const int expect[7][7] = {
    /*            Send BMW Wr  Rd  At  LInv WrImm */
    /* Send    */ {0, 0, 0, 0, 0, 1, 0},
    /* Bind MW */ {0, 0, 0, 0, 0, 1, 0},
    /* Write   */ {0, 0, 1, 1, 0, 0, 0},
    /* Read    */ {1, 1, 1, 1, 1, 1, 0},
    /* Atomic  */ {1, 1, 1, 0, 1, 1, 1},
    /* LInv    */ {0, 0, 0, 0, 0, 0, 0},
    /* WrImm   */ {0, 0, 0, 0, 0, 0, 0},
};

Test(fence, every_cell)
{
    for (int a = 0; a < TMX_FENCE_NUM_OPS; a++) {
        for (int b = 0; b < TMX_FENCE_NUM_OPS; b++) {
            cr_assert_eq(tmx_fence_cell((tmx_fence_op_t)a, (tmx_fence_op_t)b),
                         expect[a][b] ? 'F' : '#', "cell %d,%d", a, b);
        }
    }
    cr_assert_eq(tmx_fence_cell(TMX_FENCE_OP_NONE, TMX_FENCE_OP_SEND), '#');
}

Test(fence, flags_follow_the_table_only_with_ooo)
{
    static const tmx_wr_opcode_t ops[] = {TMX_WR_SEND, TMX_WR_SEND_WITH_IMM, TMX_WR_RDMA_WRITE,
                                          TMX_WR_RDMA_WRITE_WITH_IMM, TMX_WR_RDMA_READ};
    static const tmx_fence_op_t col[] = {TMX_FENCE_OP_SEND, TMX_FENCE_OP_SEND,
                                         TMX_FENCE_OP_WRITE, TMX_FENCE_OP_WRITE_IMM,
                                         TMX_FENCE_OP_READ};

    for (int a = 0; a < TMX_FENCE_NUM_OPS; a++) {
        for (unsigned i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
            unsigned want = expect[a][col[i]] ? TMX_SEND_FENCE : 0;

            cr_assert_eq(tmx_fence_op_of(ops[i]), col[i]);
            cr_assert_eq(tmx_fence_flags(1, (tmx_fence_op_t)a, ops[i], 0), want, "%d,%u", a, i);
            cr_assert_eq(tmx_fence_flags(0, (tmx_fence_op_t)a, ops[i], 0), 0);
            cr_assert_eq(tmx_fence_flags(1, (tmx_fence_op_t)a, ops[i], 1), 0, "drop");
        }
        cr_assert_eq(tmx_fence_flags(1, TMX_FENCE_OP_NONE, TMX_WR_SEND, 0), 0);
    }
}

/* Today's steps: sends after sends, a READ relying on nothing, a FIN posted only after the
 * READ's completion: none needs a fence even with OOO. */
Test(fence, protocol_steps)
{
    for (int s = 0; s < TMX_FENCE_NUM_STEPS; s++) {
        cr_assert_eq(tmx_fence_flags_for_step(1, (tmx_fence_step_t)s, 0), 0, "step %d", s);
        cr_assert_eq(tmx_fence_flags_for_step(0, (tmx_fence_step_t)s, 0), 0);
    }
    cr_assert_eq(tmx_fence_step_opcode(TMX_FENCE_STEP_RNDV_READ), TMX_WR_RDMA_READ);
    cr_assert_eq(tmx_fence_step_relies_on(TMX_FENCE_STEP_RNDV_FIN), TMX_FENCE_OP_NONE);
    cr_assert_eq(tmx_fence_step_relies_on(TMX_FENCE_STEP_EAGER), TMX_FENCE_OP_SEND);
}
