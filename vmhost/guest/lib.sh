# shellcheck shell=bash
# vmhost/guest/lib.sh: the guest side's one library (bash). Every guest script
# sources it from the checkout (vmhost/guest/*.sh next to it, the test scenarios'
# and the patch validation's guest scripts by their path to vmhost/guest/lib.sh); any
# other command run by vmhost/vm-run finds a copy at $RXE_GUEST_LIB
# (/run/rxe-kvfix/ctl/lib.sh):
#     . "$(dirname "${BASH_SOURCE[0]}")/lib.sh"    # a script of vmhost/guest
#     . "$RXE_GUEST_LIB"                           # any guest command
# Helpers only the test scenarios' guest scripts use are not here: they are in
# tests/vm/guest/lib.sh, which sources this file.
# The 10.77.x.0/24 addresses used here exist only inside the guest.
#
# Sets SRC (the checkout in the guest, /root/rxe-kvfix), OUT (results:
# $RXE_GUEST_RESULTS, default /results), exports RXE_RESULTS (OUT/results.tsv, read
# by the result functions), RV (rxe-verify, /usr/local/bin/rxe-verify); sources
# SRC/vmhost/common.sh (rxe_on_exit, the script's cleanup; t_suite, t_start, t_pass,
# t_fail, t_skip, t_check) when the checkout is there. Defines:
#
#   rxe_guest_main SUITE MIN MAX "$@"
#                                   the opening of a guest script: -h/--help prints its
#                                   usage() and exits 0, fewer than MIN or more than MAX
#                                   arguments (MAX "": no limit) print it on stderr and
#                                   exit 2; results from here on belong to SUITE (t_suite)
#   rxe_fail MSG...                 print "FAIL: MSG" to stderr and exit 1
#   rxe_log MSG...                  "rxe: MSG" on stderr
#   rxe_pkg_version                 this checkout's package version (SRC/META, read by
#                                   the package's own kmod/rxe-kvfix-lib.sh)
#   rxe_flavor [WANT]               the loaded rdma_rxe as `rxe-verify doctor --json`
#                                   classifies it (module.flavor): stock, rxe-kvfix or
#                                   absent (unknown, status 2, if doctor says nothing);
#                                   with WANT: status 0 if it is WANT (see below)
#   stock_module K                  path of the distribution's rdma_rxe of kernel K (DKMS
#                                   keeps it in original_module/ while rxe-kvfix is installed)
#   load_stock K                    insmod it and check that the loaded module is stock
#   load_ko KO                      insmod the module file KO (dependencies first); it must
#                                   then be the loaded rdma_rxe: its GNU build ID equals
#                                   /sys/module/rdma_rxe/notes/.note.gnu.build-id (a module
#                                   without MODULE_VERSION has no srcversion); on a mismatch
#                                   it is unloaded again
#   rxe_dummy_up [RXE NETDEV CIDR [MTU]]
#                                   dummy netdev (default d0, 10.77.0.1/24, MTU 1500, the
#                                   kernel's default) + rxe link (default rxe0); waits for
#                                   its RoCEv2 IPv4 GID. MTU $BULK_MTU: see below
#   rxe_dummy_down [RXE NETDEV]     delete that rxe link and dummy netdev
#   rxe_gid_index RXE [IPV4]        index of the RoCEv2 GID of RXE (for IPV4, or any IPv4)
#   rxe_wait_gid RXE [IPV4]         wait up to 10 s for that GID, fail if it never shows
#   jget FILE EXPR                  evaluate a Python expression over rxe-verify's JSON
#                                   (j = document, r = results[0]); booleans print as true/false
#   dmesg_bad                       kernel log lines that no clean run may have

SRC=/root/rxe-kvfix
OUT=${RXE_GUEST_RESULTS:-/results}
export RXE_RESULTS=$OUT/results.tsv
# shellcheck disable=SC2034  # used by the scripts that source this file
RV=/usr/local/bin/rxe-verify
# GUEST_KASAN=1 on a kernel with KASAN (the debug kernel: kasan_report in its
# symbols), where the data path is ~10x slower under TCG; the scripts size their time
# limits by it. RV_OP_DEADLINE: rxe-verify run's deadline per RDMA operation, its
# default (30 s + 1 s per 4 MiB in flight: 62 s for the full span's two 64 MiB
# WRITEs) but 600 s under KASAN, where one 64 MiB WRITE has gone past 62 s with two
# guests beside it; elsewhere a stalled transfer still fails within a minute
GUEST_KASAN=0 RV_OP_DEADLINE=()
# shellcheck disable=SC2034  # used by the scripts that source this file
if grep -qw kasan_report /proc/kallsyms 2>/dev/null; then GUEST_KASAN=1 RV_OP_DEADLINE=(--timeout 600); fi
GUEST_STATE=/run/rxe-kvfix-guest
# The netdev MTU of the scenarios that move gigabytes over one loopback rxe device
# (proof, stress, nonroot, ulp): 9000 makes rxe's active MTU 4096 instead of 1500's
# 1024, a quarter of the packets for the same bytes. Under TCG rxe's per-packet work
# is a large part of a transfer. Measured in one 6.12.113 guest (QEMU 11.1.3,
# thread=single), MTU 1500 and 9000 alternated, twice each:
# `rxe-verify run -s 1G --offset 16 --mode full` 92, 106 s -> 52, 63 s;
# ib_write_bw 32 MiB x 10 17.2, 16.6 -> 25.7, 23.4 MB/s; ib_read_bw 20.2, 18.6 ->
# 28.3, 33.1 MB/s. Every byte is still carried and checked, every page of the MR is
# still looked up (a 4 KiB packet spans two pages at offset 16); the registration
# the fix changes does not depend on the MTU. The bench (its figures are compared
# at perftest's defaults), twohost, pyverbs and Secure Boot guests keep 1500.
# shellcheck disable=SC2034  # used by the scripts that source this file
BULK_MTU=9000
if [[ -f $SRC/vmhost/common.sh ]]; then
	# shellcheck source=vmhost/common.sh
	. "$SRC/vmhost/common.sh"
fi

rxe_guest_main() {
	local suite=$1 min=$2 max=$3
	shift 3
	[[ ${1:-} != -h && ${1:-} != --help ]] || {
		usage
		exit 0
	}
	if (($# < min)) || { [[ -n $max ]] && (($# > max)); }; then
		usage >&2
		exit 2
	fi
	t_suite "$suite"
}

rxe_fail() {
	echo "FAIL: $*" >&2
	exit 1
}

rxe_log() { echo "rxe: $*" >&2; }

rxe_pkg_version() {
	# shellcheck source=kmod/rxe-kvfix-lib.sh
	. "$SRC/kmod/rxe-kvfix-lib.sh" && rxe_kvfix_meta_version "$SRC"
}

# rxe_flavor [WANT]: rxe-verify's own answer (classify_module in
# userspace/src/core/diagnosis.cpp: loaded at all, /sys/module/rdma_rxe/version containing
# "rxe-kvfix"), so the guest scripts and the verifier cannot disagree about which
# module is loaded. rxe-kvfix-unpatched (a RXE_KVFIX_UNPATCHED test build) counts as
# rxe-kvfix: it is our module, and the checks that follow show that it is unfixed.
# WANT rxe-kvfix also needs module.version to be this checkout's
# "$(rxe_pkg_version)-rxe-kvfix" (not some other rxe-kvfix left installed).
# Doctor exits 3 when the host is not ready (no module, no device): still an answer.
rxe_flavor() {
	local doc got
	doc=$("$RV" doctor --json 2>/dev/null) || true
	got=$(python3 -c '
import json, sys
try:
    m = json.loads(sys.stdin.read())["module"]
except Exception:
    sys.exit(1)
f = {"rxe-kvfix-unpatched": "rxe-kvfix"}.get(m.get("flavor"), m.get("flavor"))
if f not in ("stock", "rxe-kvfix", "absent"):
    sys.exit(1)
print(f, m.get("version") or "-")
' <<<"$doc") || {
		echo "rxe_flavor: no module.flavor from $RV doctor --json" >&2
		[[ -n ${1:-} ]] || echo unknown
		return 2
	}
	if [[ -z ${1:-} ]]; then
		echo "${got%% *}"
	elif [[ $1 == rxe-kvfix && $got == "rxe-kvfix $(rxe_pkg_version)-rxe-kvfix" ]] ||
		[[ $1 != rxe-kvfix && ${got%% *} == "$1" ]]; then
		return 0
	else
		echo "rxe_flavor: loaded: ${got% *} (version ${got#* }), not $1" >&2
		return 1
	fi
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
	rxe_flavor stock
}

rxe_module_build_id() { # [KO]: build ID of KO, or of the loaded rdma_rxe
	if [[ -n ${1:-} ]]; then
		readelf -n "$1" 2>/dev/null | awk '/Build ID:/ { print $3; exit }'
	else
		python3 -c '
import struct, sys
b = open("/sys/module/rdma_rxe/notes/.note.gnu.build-id", "rb").read()
namesz, descsz, _ = struct.unpack_from("<III", b)
off = 12 + (namesz + 3) // 4 * 4
print(b[off:off + descsz].hex())' 2>/dev/null
	fi
}

load_ko() {
	local want got
	want=$(rxe_module_build_id "$1")
	[[ -n $want ]] || {
		echo "load_ko: $1 has no GNU build ID (readelf -n)" >&2
		return 1
	}
	modprobe -a ib_core ib_uverbs udp_tunnel ip6_udp_tunnel || return 1
	insmod "$1" || return 1
	got=$(rxe_module_build_id)
	if [[ $got != "$want" ]]; then
		echo "load_ko: the loaded rdma_rxe has build ID '$got', $1 has '$want'" >&2
		rmmod rdma_rxe 2>/dev/null || true
		return 1
	fi
}

rxe__note() {
	mkdir -p "$GUEST_STATE"
	echo "$2" >>"$GUEST_STATE/$1"
}

rxe_gid_index() {
	local dev="$1" want="${2:-}" d g n hex
	d=/sys/class/infiniband/$dev/ports/1
	[[ -d $d/gids ]] || return 1
	if [[ -n $want ]]; then
		# 10.77.0.1 -> 0a4d:0001
		hex=$(echo "$want" | awk -F. '{ printf "%02x%02x:%02x%02x", $1, $2, $3, $4 }')
	fi
	for g in "$d"/gids/*; do
		n=${g##*/}
		case "$(cat "$g" 2>/dev/null)" in
		0000:0000:0000:0000:0000:ffff:*) ;;
		*) continue ;;
		esac
		[[ $(cat "$d/gid_attrs/types/$n" 2>/dev/null) == "RoCE v2" ]] || continue
		if [[ -n $want ]]; then
			[[ $(cut -d: -f7,8 "$g") == "$hex" ]] || continue
		fi
		echo "$n"
		return 0
	done
	return 1
}

rxe_wait_gid() {
	local i
	for ((i = 0; i < 50; i++)); do
		rxe_gid_index "$@" >/dev/null && return 0
		sleep 0.2
	done
	rxe_fail "no RoCEv2 IPv4 GID on $1 after 10 s ($(cat /sys/class/infiniband/"$1"/ports/1/gids/* 2>/dev/null | sort -u | tr '\n' ' '))"
}

rxe_dummy_up() {
	local rxe="${1:-rxe0}" nd="${2:-d0}" cidr="${3:-10.77.0.1/24}" mtu="${4:-}"
	modprobe dummy numdummies=0 || rxe_fail "modprobe dummy failed"
	ip link add "$nd" type dummy || rxe_fail "ip link add $nd type dummy failed"
	rxe__note dummies "$nd"
	[[ -z $mtu ]] || ip link set "$nd" mtu "$mtu" || rxe_fail "ip link set $nd mtu $mtu failed"
	ip addr add "$cidr" dev "$nd" || rxe_fail "ip addr add $cidr dev $nd failed"
	ip link set "$nd" up || rxe_fail "ip link set $nd up failed"
	rdma link add "$rxe" type rxe netdev "$nd" || rxe_fail "rdma link add $rxe type rxe netdev $nd failed"
	rxe_wait_gid "$rxe" "${cidr%/*}"
	rxe_log "$rxe up on dummy $nd ($cidr, MTU $(cat "/sys/class/net/$nd/mtu"), rxe active MTU $(rxe_active_mtu "$rxe"), gid index $(rxe_gid_index "$rxe" "${cidr%/*}"))"
}

# rxe_active_mtu RXE: the port's active MTU in bytes (sysfs has no attribute for it)
rxe_active_mtu() { ibv_devinfo -d "$1" 2>/dev/null | awk '$1 == "active_mtu:" { print $2; exit }'; }

rxe_dummy_down() {
	local rxe="${1:-rxe0}" nd="${2:-d0}"
	rdma link del "$rxe" || rxe_fail "rdma link del $rxe failed"
	ip link del "$nd" || rxe_fail "ip link del $nd failed"
}

jget() {
	python3 - "$1" "$2" <<'PY' 2>/dev/null
import json, sys
j = json.load(open(sys.argv[1]))
r = (j.get("results") or [{}])[0]
v = eval(sys.argv[2])
print(v if not isinstance(v, bool) else str(v).lower())
PY
}

dmesg_bad() {
	dmesg | grep -E 'WARNING:|BUG:|Oops|Call Trace|possible circular locking|lockdep|general protection' || true
}
