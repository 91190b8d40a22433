#!/usr/bin/env bash
# The store mode of reads through the soft device's rings (src/prov/soft/soft_qp.c,
# tmx_soft_rd_mode): the target copies a rendezvous read into the ring with ordinary or
# streaming stores, as the reader asks from what each mode cost it. One read of a mode right
# after the other measures the change of the ring's cache state, not the mode (bench/README.md,
# h-bw256): a try of the other mode must last a ring lap before anything of it is measured.
# From the reader's lines (TMX_LOG_LEVEL=debug: one per try, info: a count at the end) in a
# 128 KiB bandwidth run through a 2 MiB ring (a lap is 16 reads):
# - the other mode was tried, and each mode asked for at least a lap and 4 reads;
# - every try measured at least 4 of its reads (a quarter lap) after its lap.
# Timing decides which mode wins, not what is checked.
. "$(dirname "$0")/lib.sh"
PP="$B/examples/tmx_pingpong"
for v in $(env | sed -n 's/^\(TMX_[A-Za-z0-9_]*\)=.*/\1/p'); do
    case $v in TMX_BUILDDIR|TMX_SRCDIR) ;; *) unset "$v" ;; esac
done

run 120 env TMX_LOG_LEVEL=debug TMX_SOFT_RING0_SIZE=2m TMX_SOFT_CMA_MIN=1g "$TMXRUN" -n 2 \
    --timeout 100 "$PP" -t bw -m 128k:128k -n 100
expect_rc 0 "tmx_pingpong -t bw, 128 KiB"
line=$(grep "reads through the rings: [0-9]* by ordinary stores" "$T/err" | head -1)
if [ -z "$line" ]; then
    fail "no reader's count of reads through the rings"
    show
else
    sed 's/^/    /' <<< "$line"
    set -- $(sed 's/.*rings: \([0-9]*\) by ordinary stores, \([0-9]*\) by streaming ones; the other mode tried \([0-9]*\) times.*/\1 \2 \3/' <<< "$line")
    if [ "$3" -ge 1 ] && [ "$1" -ge 20 ] && [ "$2" -ge 20 ]; then
        ok "the other mode tried ($3 times), each mode asked for a lap and more ($1 / $2 reads)"
    else
        fail "tries $3, reads by ordinary / streaming stores $1 / $2 (want >= 1, >= 20, >= 20)"
    fi
fi
tries=$(grep -c "stores tried (" "$T/err")
short=$(grep "stores tried (" "$T/err" |
        sed 's/.*stores tried (\([0-9]*\) reads measured after a lap of \([0-9]*\) KiB).*/\1 \2/' |
        awk '$1 < 4 || $2 != 2048' | wc -l)
grep "stores tried (" "$T/err" | head -3 | sed 's/.*reads through the rings: /    /; s/ (soft_qp.*//'
if [ "$tries" -ge 1 ] && [ "$short" -eq 0 ]; then
    ok "$tries tries, each measured 4 reads or more after a lap of 2048 KiB"
else
    fail "$tries tries, $short of them measured fewer than 4 reads after a 2 MiB lap"
    show
fi
finish
