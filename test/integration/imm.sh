#!/bin/sh
# Immediate data (TMX_REQ_PARAM_IMM): every case of test/integration/imm.c, with software tag
# matching and with the soft device's tag-matching offload (its rendezvous offload on and
# off; receives from 64 bytes up offered, so small buffers get the rendezvous header that
# carries the immediate data under offload).
. "$(dirname "$0")/lib.sh"

prog="$B/test/integration/imm"

run 120 "$TMXRUN" -n 2 --timeout 100 "$prog"
expect_rc 0 "immediate data, software tag matching"
expect_grep "$T/out" "rank 1: [0-9]* checks ok" "every check held"

for rndv in yes no; do
    run 120 env TMX_SOFT_TM=yes TMX_SOFT_TM_RNDV=$rndv TMX_TM_THRESH=64 \
        "$TMXRUN" -n 2 --timeout 100 "$prog"
    expect_rc 0 "immediate data, TMX_SOFT_TM=yes TMX_SOFT_TM_RNDV=$rndv TMX_TM_THRESH=64"
    expect_grep "$T/out" "rank 1: [0-9]* checks ok" "every check held"
    expect_grep "$T/out" "tag list matched [1-9][0-9]*, unexpected [1-9]" \
        "the device matched some receives and delivered some messages unexpected"
done
finish
