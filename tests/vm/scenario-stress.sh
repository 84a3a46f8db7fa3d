# shellcheck shell=bash
# tests/vm/scenario-stress.sh: sourced by tests/vm/scenarios; defines
#
#   scenario_stress KERNEL
#
# Builds the memory fragmenter (tests/vm/tools/fragment.c) on the host with gcc -static
# into the prepared overlay ($MNT/usr/local/bin/rxe-fragment) and boots KERNEL once
# running tests/vm/guest/stress.sh: fragmentation (stock fails, rxe-kvfix passes in the
# same fragmented state), churn, concurrency, memory pressure and module lifecycle.
#
# Environment:
#   RXE_STRESS_FORM=short|full  short (default, CI) or full (more churn iterations)
#   RXE_STRESS_MEM=SIZE         guest memory (default 6G; at most 8G)
#   RXE_STRESS_PARTS=LIST       parts of stress.sh (default: all)
#   RXE_STRESS_TIMEOUT=SECS     VM time limit (default 3600: under TCG on a loaded 2-core
#                               host every pass over guest memory costs minutes)
# Uses from tests/vm/scenarios: boot, MNT, OUT, REPO, t_* (tests/testlib.sh).

scenario_stress() {
	local k=$1 form=${RXE_STRESS_FORM:-short} t0=$SECONDS out
	case $form in
	short | full) ;;
	*) t_fail "stress: form" "RXE_STRESS_FORM must be short or full, not '$form'"; return 0 ;;
	esac
	t_start "stress: fragmenter built (gcc -static tests/vm/tools/fragment.c)"
	if ! command -v gcc >/dev/null; then
		t_skip "gcc is not installed on the host: the fragmentation part will SKIP"
	elif out=$(gcc -static -O2 -Wall -Wextra -Werror -o "$MNT/usr/local/bin/rxe-fragment" \
		"$REPO/tests/vm/tools/fragment.c" 2>&1); then
		t_pass
	else
		t_fail "$(tail -n2 <<<"$out" | tr '\n' ' ')"
	fi
	BOOT_MEM=${RXE_STRESS_MEM:-6G} BOOT_ARGS="--timeout ${RXE_STRESS_TIMEOUT:-3600}" boot "stress-$k" "$k" /root/rxe-kvfix/tests/vm/guest/stress.sh "$k" "$form" \
		"${RXE_STRESS_PARTS:-frag,churn,concurrency,pressure,lifecycle}"
	rxe_log "stress scenario ($form form) took $((SECONDS - t0)) s"
}
