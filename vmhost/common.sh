# shellcheck shell=bash
# vmhost/common.sh: what every script shares, on the host and in a guest. Sourced by
# the two sides' libraries (vmhost/lib.sh, vmhost/guest/lib.sh) and by
# tests/testlib.sh; nothing else sources it directly.
#
# The script opening:
#   rxe_on_exit CMD       CMD (a function or a command string) runs when the script
#                         exits, also after Ctrl-C or TERM, which exit 130: the one
#                         cleanup trap of a script (a later call replaces it)
#
# The result lines: every test ends in exactly one of t_pass, t_fail or t_skip;
# results go to stdout as one line each and, when RXE_RESULTS is set, are appended to
# that file as TSV (status, suite, name, seconds, reason): what tests/run-all and
# tests/vm/scenarios collect (a guest's /results/results.tsv is relayed by the
# scenario runner).
#
#   t_suite NAME          the suite the following results belong to
#   t_start NAME          remember the start time of NAME
#   t_pass [NAME]         ok NAME
#   t_fail [NAME] REASON  FAIL NAME: REASON
#   t_skip [NAME] REASON  SKIP NAME: REASON   (REASON must say what the machine lacks)
#   t_check NAME CMD...   t_pass if CMD succeeds, else t_fail with its last output line

[[ -z ${VMHOST_COMMON:-} ]] || return 0 # sourced once (both libraries source it)
VMHOST_COMMON=1

# shellcheck disable=SC2064  # CMD is expanded now, on purpose
rxe_on_exit() {
	trap "$1" EXIT
	trap 'exit 130' INT TERM
}

T_SUITE=${T_SUITE:-tests}
T_NAME=''
T_T0=0
T_FAILS=0

t_suite() { T_SUITE=$1; }
t_start() {
	T_NAME=$1
	T_T0=$(date +%s.%N)
}

t__record() { # STATUS NAME REASON
	local secs
	secs=$(awk -v a="$T_T0" -v b="$(date +%s.%N)" 'BEGIN { if (a > 0) printf "%.1f", b - a; else printf "0.0" }')
	case $1 in
	ok) printf 'ok   %s (%ss)\n' "$2" "$secs" ;;
	FAIL)
		printf 'FAIL %s: %s (%ss)\n' "$2" "$3" "$secs"
		T_FAILS=$((T_FAILS + 1))
		;;
	SKIP) printf 'SKIP %s: %s\n' "$2" "$3" ;;
	esac
	if [[ -n ${RXE_RESULTS:-} ]]; then
		printf '%s\t%s\t%s\t%s\t%s\n' "$1" "$T_SUITE" "$2" "$secs" "${3//$'\t'/ }" >>"$RXE_RESULTS"
	fi
	T_T0=0
}

t_pass() { t__record ok "${1:-$T_NAME}" ""; }
t_fail() {
	if (($# >= 2)); then t__record FAIL "$1" "$2"; else t__record FAIL "$T_NAME" "$1"; fi
}
t_skip() {
	if (($# >= 2)); then t__record SKIP "$1" "$2"; else t__record SKIP "$T_NAME" "$1"; fi
}

t_check() { # NAME CMD...
	local name=$1 out
	shift
	[[ $T_T0 != 0 ]] || t_start "$name"
	if out=$("$@" 2>&1); then
		t_pass "$name"
	else
		t_fail "$name" "$(tail -n 3 <<<"$out" | tr '\n' ' ' | cut -c1-400)"
	fi
}
