#!/bin/sh
# tmx_job allgather and barrier with 1, 2 and 4 ranks (and alone, without tmxrun).
. "$(dirname "$0")/lib.sh"

P="$B/test/integration/boot_allgather"
run 30 env -u TMX_RANK -u TMX_SIZE -u TMX_BOOT_ADDR "$P" 1
expect_rc 0 "allgather and barrier without a launcher"
for n in 1 2 4; do
    run 60 "$TMXRUN" -n "$n" --timeout 50 "$P" "$n"
    expect_rc 0 "allgather and barrier with $n rank(s)"
    c=$(grep -c "rank [0-9]* of $n ok" "$T/out")
    [ "$c" -eq "$n" ] && ok "$n rank(s) checked every gathered byte" || fail "$c of $n ranks ok"
done
finish
