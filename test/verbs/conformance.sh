#!/bin/sh
# conformance.sh N [ARGS...]: the conformance suite on N ranks over the verbs provider, inside
# the soft-RoCE guest (in_vm.sh): TMX_PROVIDERS=verbs tmxrun -n N --timeout 240
# tmx_conformance -n 200 ARGS. 200 random schedules per ring pair instead of the default
# 10,000 (rxe under emulation carries a message in about 100-200 us); a later -n in ARGS
# overrides it. Skips (77) when the verbs provider is not built (the "providers built:" line
# of tmx_info) or the guest cannot run here. conformance_np2.sh and conformance_np4.sh call it.
np=${1:?usage: conformance.sh N [tmx_conformance options]}
shift
me="conformance_np$np.sh"
B=${TMX_BUILDDIR:-$(pwd)}
for f in "$B/tools/tmxrun" "$B/tools/tmx_info" "$B/test/conformance/tmx_conformance"; do
    if [ ! -x "$f" ]; then
        echo "$me: $f not built" >&2
        exit 99
    fi
done
built=$("$B/tools/tmx_info" 2>/dev/null | sed -n 's/^# providers built: //p')
case ", $built," in
    *", verbs,"*) ;;
    *) echo "$me: the verbs provider is not built (providers built: ${built:-none}), skipping"
       exit 77 ;;
esac
exec sh "$(dirname "$0")/in_vm.sh" env TMX_PROVIDERS=verbs \
    "$B/tools/tmxrun" -n "$np" --timeout 240 "$B/test/conformance/tmx_conformance" -n 200 "$@"
