#!/usr/bin/env bash
# debug.sh: rxe-kvfix under the kernel's own checkers, in a guest booted on the debug
# kernel (tests/vm/debug-kernel: KASAN generic inline with vmalloc checks, KFENCE,
# kmemleak, lockdep, failslab/fail_page_alloc) with rxe-kvfix installed by DKMS
# against it before boot.
#
#   debug.sh KERNELRELEASE EXPECT [PARTS]
#
# PARTS (comma list, default all: checkers,stock,fixed,pyverbs,ulp,stress,inject,kmemleak):
#   checkers  KASAN, KFENCE, kmemleak and lockdep said at boot that they are on; the
#             fault-injection knobs are in debugfs
#   stock     the debug kernel's own rdma_rxe (guest/proof.sh stock-short): 1 GiB + 16 B
#             and 2 GiB fail with ENOMEM and the page allocator's WARNING from
#             __alloc_mr_page_info
#   fixed     rxe-kvfix (guest/proof.sh fixed): 1 GiB, 1 GiB + 16 B, 1025 MiB, 2 GiB,
#             4 GiB sampled, 1 GiB full span both ways, probe to 2 GiB
#   pyverbs   rdma-core's pyverbs MR/RDMA tests on both modules (guest/pyverbs.sh)
#   ulp       NVMe over RDMA over rxe, fio with crc32c verification, on both modules
#             (guest/ulp.sh): a kernel consumer of rxe's fast-registration MRs, whose
#             page-info array the patch allocates with kvcalloc() too; under KASAN
#             ulp.sh runs fio with 4 MiB a job (64 MiB elsewhere)
#   stress    guest/stress.sh in its debug form: churn (2 GiB x 50, 1 GiB x 3 with
#             traffic), concurrency (four verifiers at once), lifecycle (5 module
#             load/unload cycles)
#   inject    injected allocation failures on the page-info allocation alone (the
#             stack-trace filter holds them to __alloc_mr_page_info's address range,
#             the task filter to the verifier's process): with failslab (the vmalloc
#             fallback's own allocations) and with fail_page_alloc (its pages, and
#             the stock module's kmalloc), a registration of 1 GiB + 16 B and of 2 GiB
#             on rxe-kvfix (rxe-verify churn --count 1: that registration and no
#             other) fails with ENOMEM, rxe-verify says so, and the next one (rxe-verify
#             run, verified traffic) passes; the stock module the same at 256 MiB, a
#             size it can register. 0002's resize path (rxe_map_mr_sg) is not reached
#             from user verbs: only kernel ULPs' fast-reg MRs (the ulp part) run it
#   kmemleak  two scans after everything: no leak whose trace names rdma_rxe, ib_ or
#             rdma (others are listed)
# The kernel log is read from /dev/kmsg for the whole run and cut at each part: every
# part but stock must be free of KASAN, KFENCE, kmemleak, lockdep, BUG and WARNING
# reports, each quoted if there is one; lockdep must still be on at the end.
set -uo pipefail

usage() { echo "Usage: debug.sh KERNELRELEASE EXPECT [checkers,stock,fixed,pyverbs,ulp,stress,inject,kmemleak]"; }
# shellcheck source=vmhost/guest/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../../../vmhost/guest/lib.sh"
rxe_guest_main vm-debug 2 3 "$@"
K=$1 EXPECT=$2 PARTS=${3:-checkers,stock,fixed,pyverbs,ulp,stress,inject,kmemleak}
G=$(dirname "${BASH_SOURCE[0]}")
DBG=/sys/kernel/debug
KMSG=$OUT/debug-kmsg.log
# a report of one of the checkers, or any BUG/WARNING/oops
REPORT='BUG: KASAN|BUG: KFENCE|KFENCE:|kmemleak: .*suspected|WARNING:|BUG:|Oops|general protection|circular locking|possible recursive locking|inconsistent lock state|DEBUG_LOCKS_WARN_ON|list_(add|del) corruption|UBSAN:'

want() { [[ ,$PARTS, == *",$1,"* ]]; }
# rxe_off: rxe0, d0 and rdma_rxe gone, whichever of them is there (rxe_dummy_down
# ends the script when one is missing)
rxe_off() {
	rdma link del rxe0 2>/dev/null || true
	ip link del d0 2>/dev/null || true
	[[ ! -d /sys/module/rdma_rxe ]] || rmmod rdma_rxe
}
mark() {
	echo "rxe-kvfix-debug: part $1" >/dev/kmsg
	sleep 1
}
# section NAME: the kernel log lines from part NAME's mark to the next mark
section() {
	awk -v m="rxe-kvfix-debug: part $1\$" '
		/rxe-kvfix-debug: part / { on = ($0 ~ m); next } on { sub(/^[^;]*;/, ""); print }' "$KMSG"
}
# boot_log: the kernel log before the first part's mark (the boot and the checkers part)
boot_log() { awk '/rxe-kvfix-debug: part / { exit } { sub(/^[^;]*;/, ""); print }' "$KMSG"; }
# clean NAME [EXCLUDE]: part NAME's kernel log has no report (each quoted when there
# is one); lines matching EXCLUDE are another test's business
clean() {
	local bad
	bad=$(section "$1" | grep -E "$REPORT" | grep -vE "${2:-^\$}" || true)
	t_start "$K debug $1: no KASAN, KFENCE, kmemleak, lockdep, BUG or WARNING report in the kernel log"
	if [[ -z $bad ]]; then
		t_pass
		echo "     $(section "$1" | wc -l) kernel log lines in this part"
	else
		t_fail "$(wc -l <<<"$bad") report line(s), the first: $(head -n1 <<<"$bad")"
		section "$1" | grep -E -B2 -A25 "$REPORT" | head -n 60 | sed 's/^/     | /'
	fi
}

[[ $(uname -r) == "$K" ]] || {
	t_fail "$K: booted kernel" "uname -r is $(uname -r)"
	exit 1
}
mountpoint -q "$DBG" || mount -t debugfs debugfs "$DBG"
echo 0 >/proc/sys/kernel/kptr_restrict
cat /dev/kmsg >"$KMSG" 2>/dev/null &
KMSG_PID=$!
# shellcheck disable=SC2317  # run at exit (rxe_on_exit)
cleanup() { kill "$KMSG_PID" 2>/dev/null || true; }
rxe_on_exit cleanup
sleep 1
modprobe -a ib_core ib_uverbs udp_tunnel ip6_udp_tunnel dummy || true
echo "     guest: $(awk '/^MemTotal:/ {print $2 " KiB"}' /proc/meminfo), $(nproc) vCPUs, kernel $(uname -r)"

# --- checkers: their boot lines --------------------------------------------------
if want checkers; then
	for c in 'KASAN:KernelAddressSanitizer initialized' 'KFENCE:kfence: initialized' \
		'kmemleak:kmemleak: Kernel memory leak detector initialized' 'lockdep:Lock dependency validator'; do
		t_start "$K debug checkers: ${c%%:*} is on (boot line)"
		line=$(grep -m1 -F "${c#*:}" "$KMSG" | sed 's/^[^;]*;//')
		if [[ -n $line ]]; then
			t_pass
			echo "     $line"
		else t_fail "no '${c#*:}' in the kernel log"; fi
	done
	t_start "$K debug checkers: failslab and fail_page_alloc with task and stack-trace filters in debugfs"
	if [[ -w $DBG/failslab/require-start && -w $DBG/fail_page_alloc/require-start && -e /proc/self/make-it-fail &&
		-w $DBG/kmemleak ]]; then
		t_pass
	else
		t_fail "missing: $(for p in "$DBG"/failslab/require-start "$DBG"/fail_page_alloc/require-start /proc/self/make-it-fail "$DBG"/kmemleak; do [[ -e $p ]] || printf '%s ' "$p"; done)"
	fi
	# the boot itself, before any part: the log up to the first mark
	t_start "$K debug checkers: no KASAN, KFENCE, lockdep, BUG or WARNING report while the kernel booted"
	bad=$(boot_log | grep -E "$REPORT" || true)
	if [[ -z $bad ]]; then
		t_pass
	else
		# (under TCG an interrupt that arrives before the kernel set its handlers up
		# shows as a KASAN wild-memory-access in handle_edge_irq: tests/vm/README.md
		# "Early-boot oops under TCG")
		t_fail "$(wc -l <<<"$bad") report line(s), the first: $(head -n1 <<<"$bad")"
		boot_log | grep -E -B2 -A25 "$REPORT" | head -n 40 | sed 's/^/     | /'
	fi
	# what kmemleak holds from boot is not ours: cleared so the scans at the end see this run
	echo clear >"$DBG/kmemleak" 2>/dev/null || true
fi

# --- stock: the bug and its WARNING on the debug kernel ------------------------------
if want stock; then
	mark stock
	"$SRC/vmhost/guest/proof.sh" "$K" "$EXPECT" stock-short ""
	t_start "$K debug stock: the page allocator's WARNING from __alloc_mr_page_info"
	w=$(section stock | grep -E -A30 'WARNING:' | grep -m1 -E '__alloc_mr_page_info' || true)
	if [[ -n $w ]]; then
		t_pass
		section stock | grep -m1 -E 'WARNING:' | sed 's/^/     /'
		echo "     $w"
	else
		t_fail "no WARNING naming __alloc_mr_page_info while the stock module failed"
	fi
	other=$(section stock | grep -E "$REPORT" | grep -vE 'WARNING:.*(page_alloc|__alloc_frozen_pages|__alloc_pages)' || true)
	[[ -z $other ]] || echo "     other report lines with the stock module: $(head -n3 <<<"$other" | tr '\n' ' ')"
	rxe_off
fi

# --- rxe-kvfix: the proof sizes, pyverbs, stress ------------------------------------
if want fixed; then
	mark fixed
	"$SRC/vmhost/guest/proof.sh" "$K" "$EXPECT" fixed ""
	clean fixed
fi
if want pyverbs; then
	mark pyverbs
	"$SRC/vmhost/guest/pyverbs.sh" "$K"
	clean pyverbs
fi
if want ulp; then
	mark ulp
	rxe_off
	"$G/ulp.sh" "$K"
	clean ulp
fi
if want stress; then
	mark stress
	"$G/stress.sh" "$K" debug churn,concurrency,lifecycle
	clean stress
fi

# --- inject: failures on the page-info allocation ------------------------------------
# fi_range: FUNCTION|START|END|REJECT_START|REJECT_END (hex) for the stack-trace filter
# of the loaded rdma_rxe: the function that allocates the page-info array
# (__alloc_mr_page_info, or alloc_mr_page_info); when the compiler inlined both into
# rxe_mr_init_user (DKMS's build of rxe-kvfix on the debug kernel does), that function,
# with the umem pinning it calls (its other allocations) rejected: ib_umem_get, or
# ib_umem_get_desc where ib_umem_get_va is an inline wrapper of it (7.2)
fi_range() {
	local fn start end rs=0 re=0 umem
	next_after() { awk '{ print $1 }' /proc/kallsyms | sort -u | awk -v s="$1" 'found { print; exit } $1 == s { found = 1 }'; }
	for fn in __alloc_mr_page_info alloc_mr_page_info; do
		start=$(awk -v f="$fn" '$3 == f && $4 == "[rdma_rxe]" { print $1; exit }' /proc/kallsyms)
		[[ -z $start ]] || break
	done
	if [[ -z $start ]]; then
		start=$(awk '$3 == "rxe_mr_init_user" && $4 == "[rdma_rxe]" { print $1; exit }' /proc/kallsyms)
		rs=''
		for umem in ib_umem_get ib_umem_get_desc; do
			rs=$(awk -v f="$umem" '$3 == f { print $1; exit }' /proc/kallsyms)
			[[ -z $rs ]] || break
		done
		fn="rxe_mr_init_user (the page-info allocation inlined there; $umem rejected)"
		[[ -n $start && -n $rs ]] || return 1
		re=0x$(next_after "$rs")
		rs=0x$rs
	fi
	end=$(next_after "$start")
	[[ -n $end ]] || return 1
	printf '%s|0x%s|0x%s|%s|%s\n' "$fn" "$start" "$end" "$rs" "$re"
}
# fi_set KIND on|off [START END REJECT_START REJECT_END]: failslab or fail_page_alloc,
# always failing inside [START, END) and not in [REJECT_START, REJECT_END) for tasks
# with make-it-fail, or back to off
fi_set() {
	local d=$DBG/$1
	if [[ $2 == on ]]; then
		echo 0 >"$d/space"
		echo -1 >"$d/times"
		echo 1 >"$d/interval"
		echo 1 >"$d/verbose"
		echo Y >"$d/task-filter"
		echo N >"$d/ignore-gfp-wait"
		[[ $1 != fail_page_alloc ]] || {
			echo N >"$d/ignore-gfp-highmem"
			echo 0 >"$d/min-order"
		}
		echo 32 >"$d/stacktrace-depth"
		echo "$3" >"$d/require-start"
		echo "$4" >"$d/require-end"
		echo "$5" >"$d/reject-start"
		echo "$6" >"$d/reject-end"
		echo 100 >"$d/probability"
	else
		echo 0 >"$d/probability"
		echo N >"$d/task-filter"
		echo 0 >"$d/require-start"
		echo 18446744073709551615 >"$d/require-end"
		echo 0 >"$d/reject-start"
		echo 0 >"$d/reject-end"
	fi
}
# fi_reg NAME FAIL ARGS...: one rxe-verify command (ARGS) on rxe0, its process marked
# make-it-fail when FAIL is 1; JSON in OUT/inject-NAME.json, exit status in .rc
fi_reg() {
	local f=$OUT/inject-$1.json fail=$2 rc=0
	shift 2
	# shellcheck disable=SC2016  # expanded by the inner sh, which marks itself and execs
	FI_FAIL=$fail timeout 900 sh -c 'echo "$FI_FAIL" >/proc/self/make-it-fail && exec "$0" "$@"' \
		"$RV" "$@" -d rxe0 --json >"$f" 2>"$f.err" || rc=$?
	echo "$rc" >"$f.rc"
	printf '%s\n' "$f"
}
# inject_case MODULE KIND SIZE OFFSET: with KIND on, a registration of SIZE+OFFSET
# (rxe-verify churn --count 1: no staging buffer, no other registration) fails with
# ENOMEM after forced failures, and rxe-verify says so; with KIND off, the same size
# registers and passes rxe-verify run's verified WRITE/READ
inject_case() {
	local mod=$1 kind=$2 size=$3 off=$4 f name forced before
	name=$mod-$kind-$size$([[ $off == 0 ]] || echo "+$off")
	t_start "$K debug inject $mod: $size+$off B with $kind failing ${FI_FN%% *} fails with ENOMEM, cleanly"
	before=$(section inject | grep -c 'FAULT_INJECTION: forcing a failure' || true)
	fi_set "$kind" on "$FI_START" "$FI_END" "$FI_RS" "$FI_RE"
	f=$(fi_reg "$name" 1 churn -s "$size" --offset "$off" --count 1)
	fi_set "$kind" off
	sleep 1
	forced=$(($(section inject | grep -c 'FAULT_INJECTION: forcing a failure' || true) - before))
	if [[ $(cat "$f.rc") != 0 && $(jget "$f" 'j["failure"]["stage"] == "register" and j["iterations"][0]["reg_errno"] == 12') == true ]] && ((forced > 0)); then
		t_pass
		echo "     exit $(cat "$f.rc"), reg_errno 12, $forced allocation(s) failed by $kind; rxe-verify: $(jget "$f" 'j["failure"]["diagnosis"].get("summary")')"
	else
		t_fail "exit $(cat "$f.rc"), $forced forced failure(s): $(jget "$f" 'j.get("failure"), [i.get("reg_errno") for i in j.get("iterations") or []]') $(head -c 200 "$f.err")"
	fi
	t_start "$K debug inject $mod: with $kind off again, $size+$off B registers and passes verified traffic"
	f=$(fi_reg "$name-after" 0 run "${RV_OP_DEADLINE[@]}" -s "$size" --offset "$off" --mode sampled --no-progress)
	if [[ $(cat "$f.rc") == 0 && $(jget "$f" 'r["registered"] and r["result"] == "pass"') == true ]]; then
		t_pass
	else
		t_fail "exit $(cat "$f.rc"): $(jget "$f" 'r.get("reg_errno"), r.get("diagnosis")') $(head -c 200 "$f.err")"
	fi
}
if want inject; then
	mark inject
	for mod in rxe-kvfix stock; do
		rxe_off
		if [[ $mod == stock ]]; then load_stock "$K"; else modprobe rdma_rxe && rxe_flavor rxe-kvfix; fi ||
			{
				t_fail "$K debug inject $mod: module" "cannot load it"
				continue
			}
		rxe_dummy_up rxe0 d0 10.77.0.1/24 "$BULK_MTU"
		t_start "$K debug inject $mod: the page-info allocation's address range in the loaded rdma_rxe"
		if IFS='|' read -r FI_FN FI_START FI_END FI_RS FI_RE < <(fi_range); then
			t_pass
			printf '     %s: [%s, %s)%s\n' "$FI_FN" "$FI_START" "$FI_END" "$([[ $FI_RS == 0 ]] || echo ", rejected [$FI_RS, $FI_RE)")"
		else
			t_fail "neither __alloc_mr_page_info, alloc_mr_page_info nor rxe_mr_init_user (with ib_umem_get or ib_umem_get_desc) in /proc/kallsyms"
			continue
		fi
		if [[ $mod == rxe-kvfix ]]; then
			# failslab: kvcalloc's vmalloc fallback allocates its bookkeeping from slab;
			# fail_page_alloc: the pages of the vmalloc'ed array
			for kind in failslab fail_page_alloc; do
				inject_case "$mod" "$kind" 1G 16
				inject_case "$mod" "$kind" 2G 0
			done
		else
			# the stock module's kzalloc of 1 MiB is a page-allocator request
			inject_case "$mod" fail_page_alloc 256M 0
		fi
	done
	clean inject
fi

# --- kmemleak, and the end state of the checkers --------------------------------------
if want kmemleak; then
	mark kmemleak
	rxe_off
	t_start "$K debug kmemleak: two scans find no leak in rdma_rxe, ib_ or rdma code"
	sleep 6
	echo scan >"$DBG/kmemleak"
	sleep 6
	echo scan >"$DBG/kmemleak"
	cat "$DBG/kmemleak" >"$OUT/debug-kmemleak.txt"
	total=$(grep -c '^unreferenced object' "$OUT/debug-kmemleak.txt" || true)
	ours=$(awk '/^unreferenced object/ { if (obj != "" && hit) n++; obj = $0; hit = 0 }
		/rdma_rxe|\[ib_|rxe_|ib_umem|ib_uverbs|rdma_/ { hit = 1 }
		END { if (obj != "" && hit) n++; print n + 0 }' "$OUT/debug-kmemleak.txt")
	if ((ours == 0)); then
		t_pass
		echo "     kmemleak: $total unreferenced object(s) in all, 0 in rdma_rxe/ib_/rdma code"
		((total == 0)) || grep -m3 -A8 '^unreferenced object' "$OUT/debug-kmemleak.txt" | sed 's/^/     | /'
	else
		t_fail "$ours of $total unreferenced objects have rdma_rxe/ib_/rdma in their trace"
		grep -B1 -A14 -E 'rdma_rxe|\[ib_|rxe_' "$OUT/debug-kmemleak.txt" | head -n 60 | sed 's/^/     | /'
	fi
	clean kmemleak 'kmemleak: .*suspected'
	t_start "$K debug: lockdep is still on at the end (no report turned it off)"
	if grep -qE '^ *debug_locks: *1' /proc/lockdep_stats 2>/dev/null; then
		t_pass
	else
		t_fail "$(grep -E 'debug_locks' /proc/lockdep_stats 2>&1 | head -n1)"
	fi
fi
exit 0
