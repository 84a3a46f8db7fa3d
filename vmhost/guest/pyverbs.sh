#!/usr/bin/env bash
# pyverbs.sh: rdma-core's own pyverbs tests for memory regions and RDMA
# WRITE/READ (python3-pyverbs, /usr/share/doc/rdma-core/tests) against the
# stock rdma_rxe and against rxe-kvfix, in one boot.
#
#   pyverbs.sh KERNELRELEASE [UNPATCHED_KO PATCHED_KO]
#
# With two module files (patches/validate --boot) the two suites run on those
# instead, labelled "unpatched" and "patched"; each must be the loaded rdma_rxe
# (build ID, load_ko in lib.sh).
#
# Reports passed/failed/skipped for both; any test that passes on stock but
# not on rxe-kvfix is a failure. (These tests use small messages: they check
# the MR mapping paths, not large allocations.)
set -uo pipefail

usage() { echo "Usage: pyverbs.sh KERNELRELEASE [UNPATCHED_KO PATCHED_KO]"; }
# shellcheck source=vmhost/guest/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
rxe_guest_main vm-pyverbs 1 3 "$@"
(($# != 2)) || {
	usage >&2
	exit 2
}
K=$1 UNPATCHED_KO=${2:-} PATCHED_KO=${3:-}
# MR registration/re-registration/memory windows, and the RC RDMA WRITE/READ
# traffic tests of the extended QP API
MODULES=(test_mr test_qpex)

T=/tmp/pyverbs-tests
rm -rf "$T"
cp -r /usr/share/doc/rdma-core/tests "$T"
gunzip -f "$T"/*.gz

# run_suite PHASE: run the modules on rxe0, outcome per test in OUT/pyverbs-PHASE.outcomes
run_suite() {
	local phase=$1
	rxe_dummy_up rxe0 d0 10.77.0.1/24
	(cd "$T" && timeout 1200 python3 run_tests.py --dev rxe0 -v "${MODULES[@]}") >"$OUT/pyverbs-$phase.log" 2>&1
	echo "exit=$?" >>"$OUT/pyverbs-$phase.log"
	# "test_x (tests.test_mr.MRTest.test_x) ... ok|FAIL|ERROR|skipped '...'"
	sed -nE 's/^(test_[A-Za-z0-9_]+) \(([^)]*)\).*\.\.\. (ok|FAIL|ERROR|skipped|expected failure).*/\2 \3/p' \
		"$OUT/pyverbs-$phase.log" | sort -u >"$OUT/pyverbs-$phase.outcomes"
	rxe_dummy_down rxe0 d0
	rmmod rdma_rxe
}

counts() { # FILE -> "P passed, F failed, S skipped"
	awk '{ if ($2 == "ok") p++; else if ($2 == "skipped") s++; else f++ }
		END { printf "%d passed, %d failed, %d skipped", p, f, s }' "$1"
}

# suite PHASE LOADER...: load the module with LOADER, run the suite, record the counts
suite() {
	local phase=$1
	shift
	t_start "$K pyverbs: suite on the $phase module"
	if ! "$@"; then
		t_fail "cannot load the $phase module"
		return
	fi
	run_suite "$phase"
	if [[ -s $OUT/pyverbs-$phase.outcomes ]]; then
		t_pass
		echo "     $phase: $(counts "$OUT/pyverbs-$phase.outcomes")"
	else
		t_fail "no test outcomes: $(tail -n3 "$OUT/pyverbs-$phase.log" | tr '\n' ' ')"
	fi
}
# shellcheck disable=SC2317  # called through suite
load_fixed() { modprobe rdma_rxe && rxe_flavor rxe-kvfix; }

if [[ -n $UNPATCHED_KO ]]; then
	A=unpatched B=patched BN=patched
	suite "$A" load_ko "$UNPATCHED_KO"
	suite "$B" load_ko "$PATCHED_KO"
else
	A=stock B=fixed BN=rxe-kvfix
	suite "$A" load_stock "$K"
	suite "$B" load_fixed
fi

t_start "$K pyverbs: nothing that passes on $A fails on $BN"
if [[ -s $OUT/pyverbs-$A.outcomes && -s $OUT/pyverbs-$B.outcomes ]]; then
	regressions=$(join <(awk '$2 == "ok"' "$OUT/pyverbs-$A.outcomes") "$OUT/pyverbs-$B.outcomes" | awk '$3 != "ok" {print $1}')
	missing=$(join -v1 <(awk '$2 == "ok"' "$OUT/pyverbs-$A.outcomes") "$OUT/pyverbs-$B.outcomes" | awk '{print $1}')
	if [[ -z $regressions && -z $missing ]]; then
		t_pass
		printf '     %s: %s | %s: %s\n' "$A" "$(counts "$OUT/pyverbs-$A.outcomes")" "$BN" "$(counts "$OUT/pyverbs-$B.outcomes")"
	else
		t_fail "regressions: ${regressions//$'\n'/ } ${missing:+not run on $BN: ${missing//$'\n'/ }}"
	fi
else
	t_fail "a suite produced no outcomes"
fi
t_start "$K pyverbs: dmesg has no BUG/Oops"
bad=$(dmesg | grep -E 'BUG:|Oops|general protection' || true)
if [[ -z $bad ]]; then t_pass; else t_fail "$(head -n2 <<<"$bad" | tr '\n' ' ')"; fi
exit $((T_FAILS > 0))
