#!/usr/bin/env bash
# Eager credits (src/proto/proto.h, "Flow control"), as each worker's info line at destroy
# reports them: the credit returns sent alone (CREDIT messages) and the send attempts that
# found no credit (num_credit_stalls). Without rings (TMX_RING=no: a polling ring's messages
# take no credit), tmx_pingpong -t bw -w 0 -n 20 runs 21 windows (its check round and 20).
# - A window of 64 (the default TMX_EAGER_CREDITS): the receiver returns its credits alone at
#   half the window, 2 CREDIT messages per window, 42 in all (its 0-byte acknowledgement goes
#   on its own endpoint to the sender, a connection of the other direction, and carries none
#   of them); the sender never finds its credits gone: no attempt refused.
# - TMX_EAGER_CREDITS=16 with the same window of 64: the receiver returns them every 8 (168
#   CREDIT messages) and the sender runs out within each window: attempts refused, counted.
# Over verbs (TMX_PROVIDERS=verbs in the soft-RoCE guest) the counts are the same.
. "$(dirname "$0")/lib.sh"
PP="$B/examples/tmx_pingpong"
for v in $(env | sed -n 's/^\(TMX_[A-Za-z0-9_]*\)=.*/\1/p'); do
    case $v in TMX_BUILDDIR|TMX_SRCDIR|TMX_PROVIDERS) ;; *) unset "$v" ;; esac
done

# credit_line FILE FIELD: the numbers of the ranks' "eager credits" lines, one per line, of
# FIELD 1 (returned alone) or 2 (attempts refused); ranks without such a line print nothing
credit_line() {
    sed -n 's/.*eager credits: \([0-9]*\) returned alone (CREDIT messages), \([0-9]*\) send attempts found none.*/\1 \2/p' "$1" |
        awk -v f="$2" '{print $f}'
}

# check_run CREDITS SENT WHY: tmx_pingpong -t bw (21 windows of 64) with TMX_EAGER_CREDITS
# CREDITS; the receiver must have returned credits alone SENT times (WHY says when), and the
# sender must have found its credits gone never (64 credits) or at least once (fewer)
check_run() {
    run 120 env TMX_RING=no TMX_LOG_LEVEL=info TMX_EAGER_CREDITS="$1" "$TMXRUN" -n 2 \
        --timeout 100 "$PP" -t bw -m 8:8 -w 0 -n 20
    expect_rc 0 "window of 64, $1 credits: tmx_pingpong -t bw, 21 windows, its data checked"
    grep "eager credits" "$T/err" | sed 's/^/    /'
    sent=$(credit_line "$T/err" 1 | sort -n | tail -n 1)
    refused=$(credit_line "$T/err" 2 | sort -n | tail -n 1)
    if [ "${sent:-}" = "$2" ]; then
        ok "the receiver returned credits alone $2 times ($3)"
    else
        fail "credit returns sent alone: '${sent:-none}', expected $2"
        show
    fi
    if [ "$1" -ge 64 ] && [ "${refused:-0}" = 0 ]; then
        ok "no send found its credits gone"
    elif [ "$1" -ge 64 ]; then
        fail "$refused send attempts found no credit with a window no larger than the credits"
    elif [ "${refused:-0}" -gt 0 ]; then
        ok "the sender's refused attempts are reported ($refused)"
    else
        fail "no refused send attempt reported with $1 credits for a window of 64"
        show
    fi
}

check_run 64 42 "2 per window of 64"
check_run 16 168 "every 8 of 16"
finish
