#!/bin/sh
# The environment of the ranks and their binding.
. "$(dirname "$0")/lib.sh"

run 20 "$TMXRUN" -n 4 --timeout 15 sh -c 'echo "$TMX_RANK $TMX_SIZE $TMX_LOCAL_RANK $TMX_BOOT_ADDR"'
expect_rc 0 "4 ranks print their environment"
for r in 0 1 2 3; do
    n=$(grep -c "^$r 4 $r 127\.0\.0\.1:[0-9]*:[0-9a-f]\{16\}\$" "$T/out")
    [ "$n" -eq 1 ] && ok "rank $r: TMX_RANK, TMX_SIZE, TMX_LOCAL_RANK, TMX_BOOT_ADDR" ||
        fail "rank $r appears $n times with the expected environment"
done
[ "$(cut -d' ' -f4 "$T/out" | sort -u | wc -l)" -eq 1 ] && ok "one bootstrap address" ||
    fail "ranks got different bootstrap addresses"

mine=$(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' /proc/self/status)
ncpu=$(nproc)
cpus='sed -n "s/^Cpus_allowed_list:[[:space:]]*/$TMX_RANK /p" /proc/self/status'
run 20 "$TMXRUN" -n 1 --report-bindings --timeout 15 true
if grep -q "built without hwloc" "$T/err"; then
    echo "skip: binding checks need hwloc (topo_bind.sh checks the refusal)"
elif [ "$ncpu" -ge 2 ]; then
    run 20 "$TMXRUN" -n 2 --timeout 15 sh -c "$cpus"
    expect_rc 0 "default binding with 2 ranks"
    c0=$(sed -n 's/^0 //p' "$T/out")
    c1=$(sed -n 's/^1 //p' "$T/out")
    if [ -n "$c0" ] && [ -n "$c1" ] && [ "$c0" != "$c1" ] && [ "${c0#*[,-]}" = "$c0" ] &&
        [ "${c1#*[,-]}" = "$c1" ]; then
        ok "2 ranks bound to different single CPUs ($c0, $c1)"
    else
        fail "2 ranks bound to '$c0' and '$c1'"
    fi
    run 20 "$TMXRUN" -n 2 --bind none --timeout 15 sh -c "$cpus"
    expect_rc 0 "--bind none"
    [ "$(sed -n 's/^0 //p' "$T/out")" = "$mine" ] && ok "--bind none keeps the CPU set ($mine)" ||
        fail "--bind none changed the CPU set: $(cat "$T/out")"
else
    echo "skip: binding checks need 2 CPUs"
fi
# more ranks than CPUs: by default each starts on one core until all have joined (topo_bind.sh
# checks that); --bind-to none binds nothing at any time
run 20 "$TMXRUN" -n $((ncpu + 1)) --bind-to none --timeout 15 sh -c "$cpus"
expect_rc 0 "more ranks than CPUs"
[ "$(sed -n 's/^0 //p' "$T/out")" = "$mine" ] && ok "more ranks than CPUs, --bind-to none: not bound" ||
    fail "more ranks than CPUs were bound with --bind-to none: $(cat "$T/out")"
finish
