/* The fence planner (fence.h): the ordering table and what each protocol step relies on. */
#include "proto/fence.h"

/* DESIGN.md's table, first operation in rows, second in columns, in tmx_fence_op_t order:
 * Send, Bind MW, Write, Read, Atomic, Local inv., Write imm. */
static const char tmx_fence_table[TMX_FENCE_NUM_OPS][TMX_FENCE_NUM_OPS + 1] = {
    /* Send       */ "#####F#",
    /* Bind MW    */ "#####F#",
    /* Write      */ "##FF###",
    /* Read       */ "FFFFFF#",
    /* Atomic     */ "FFF#FFF",
    /* Local inv. */ "#######",
    /* Write imm. */ "#######",
};

char tmx_fence_cell(tmx_fence_op_t first, tmx_fence_op_t second)
{
    if ((unsigned)first >= TMX_FENCE_NUM_OPS || (unsigned)second >= TMX_FENCE_NUM_OPS) {
        return '#';
    }
    return tmx_fence_table[first][second];
}

tmx_fence_op_t tmx_fence_op_of(tmx_wr_opcode_t op)
{
    switch (op) {
    case TMX_WR_SEND:
    case TMX_WR_SEND_WITH_IMM:
        return TMX_FENCE_OP_SEND;
    case TMX_WR_RDMA_WRITE:
        return TMX_FENCE_OP_WRITE;
    case TMX_WR_RDMA_WRITE_WITH_IMM:
        return TMX_FENCE_OP_WRITE_IMM;
    case TMX_WR_RDMA_READ:
        return TMX_FENCE_OP_READ;
    }
    return TMX_FENCE_OP_NONE;
}

unsigned tmx_fence_flags(int ooo, tmx_fence_op_t first, tmx_wr_opcode_t second, int drop)
{
    if (!ooo || drop || first == TMX_FENCE_OP_NONE) {
        return 0;
    }
    return tmx_fence_cell(first, tmx_fence_op_of(second)) == 'F' ? TMX_SEND_FENCE : 0;
}

/*
 * What each step relies on, on the same QP (matching order between QPs is the core's, not the
 * device's):
 * - EAGER, RTS, CTRL: a SEND after earlier SENDs, whose order the receiver's matching needs
 *   (MPI order of one sender's messages; credits and ACKs after the messages they answer).
 *   Send after Send is '#': never a fence. Nothing of ours precedes them that is not a SEND
 *   except rendezvous READs, on which they do not depend (a READ's target is a receive buffer
 *   no SEND names).
 *   With TM and XRC both on (src/core/xrc.c, DESIGN.md "TM and XRC") the sending side's
 *   tagged SENDs and its DISC stay on its RC QP, and the receiving side's CTRL and FIN SENDs
 *   (its DISC behind its ACKs and FINs) on its initiator of the pair's domain: each step's
 *   earlier SENDs are still on the same QP.
 * - RNDV_READ: the sender's buffer is registered before its RTS went, and the READ is posted
 *   when the RTS arrived: it relies on no earlier operation of this QP.
 * - RNDV_FIN: tells the sender its buffer has been read. It must be placed after the READ's
 *   data (Read then Send is 'F'), but the FIN is posted only after the READ's completion
 *   (tmx_proto_rndv_read_done, then tmx_proto_rndv_finish): the completion orders it, and the
 *   step relies on no placement order. Posting the FIN right behind the READ would save the
 *   wait for the completion; it would then rely on READ and need the fence on an OOO QP,
 *   which the soft device's tests show is then needed (test_soft_order, test_fence).
 */
static const struct {
    tmx_wr_opcode_t opcode;
    tmx_fence_op_t  relies_on;
} tmx_fence_steps[TMX_FENCE_NUM_STEPS] = {
    [TMX_FENCE_STEP_EAGER]     = {TMX_WR_SEND, TMX_FENCE_OP_SEND},
    [TMX_FENCE_STEP_RTS]       = {TMX_WR_SEND, TMX_FENCE_OP_SEND},
    [TMX_FENCE_STEP_CTRL]      = {TMX_WR_SEND, TMX_FENCE_OP_SEND},
    [TMX_FENCE_STEP_RNDV_READ] = {TMX_WR_RDMA_READ, TMX_FENCE_OP_NONE},
    [TMX_FENCE_STEP_RNDV_FIN]  = {TMX_WR_SEND, TMX_FENCE_OP_NONE},
};

tmx_wr_opcode_t tmx_fence_step_opcode(tmx_fence_step_t step)
{
    return (unsigned)step < TMX_FENCE_NUM_STEPS ? tmx_fence_steps[step].opcode : TMX_WR_SEND;
}

tmx_fence_op_t tmx_fence_step_relies_on(tmx_fence_step_t step)
{
    return (unsigned)step < TMX_FENCE_NUM_STEPS ? tmx_fence_steps[step].relies_on
                                                 : TMX_FENCE_OP_NONE;
}

unsigned tmx_fence_flags_for_step(int ooo, tmx_fence_step_t step, int drop)
{
    return tmx_fence_flags(ooo, tmx_fence_step_relies_on(step), tmx_fence_step_opcode(step),
                           drop);
}
