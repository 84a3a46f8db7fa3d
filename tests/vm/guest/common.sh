# shellcheck shell=bash
# tests/vm/guest/common.sh: sourced by the guest scripts of tests/vm/guest.
# Sets SRC (the checkout in the guest), OUT (/results), RXE_RESULTS, RV
# (rxe-verify), loads tests/testlib.sh and tests/vm/guest-lib.sh, and defines:
#
#   jget FILE EXPR       evaluate a Python expression over rxe-verify's JSON
#                        (j = document, r = results[0]); booleans print as true/false
#   stock_module K       path of the distribution's rdma_rxe of kernel K (DKMS keeps
#                        it in original_module/ while rxe-kvfix is installed)
#   load_stock K         insmod it and check that the loaded module is not ours
#   dmesg_bad            kernel log lines that no clean run may have

SRC=${RXE_KVFIX_SRC:-/root/rxe-kvfix}
OUT=${RXE_KVFIX_RESULTS:-/results}
export RXE_RESULTS=$OUT/results.tsv
# shellcheck disable=SC2034  # used by the scripts that source this file
RV=${RXE_VERIFY:-/usr/local/bin/rxe-verify}
# shellcheck source=tests/testlib.sh
. "$SRC/tests/testlib.sh"
# shellcheck source=tests/vm/guest-lib.sh
. "${RXE_KVFIX_GUEST_LIB:-$SRC/tests/vm/guest-lib.sh}"

jget() {
	python3 - "$1" "$2" <<'PY' 2>/dev/null
import json, sys
j = json.load(open(sys.argv[1]))
r = (j.get("results") or [{}])[0]
v = eval(sys.argv[2])
print(v if not isinstance(v, bool) else str(v).lower())
PY
}

stock_module() {
	find /var/lib/dkms/rxe-kvfix/original_module/"$1" "/lib/modules/$1/kernel" \
		-name 'rdma_rxe.ko*' ! -name '*.origin' 2>/dev/null | head -n1
}

load_stock() {
	local ko
	ko=$(stock_module "$1")
	[[ -n $ko ]] || return 1
	modprobe -a ib_core ib_uverbs udp_tunnel ip6_udp_tunnel || return 1
	insmod "$ko" || return 1
	[[ ! -e /sys/module/rdma_rxe/version ]]
}

dmesg_bad() {
	dmesg | grep -E 'WARNING:|BUG:|Oops|Call Trace|possible circular locking|lockdep|general protection' || true
}
