#!/usr/bin/env bash
# bench.sh: benchmarks (figures, not pass/fail thresholds), stock rdma_rxe and
# rxe-kvfix side by side in one boot, run inside a guest booted by
# tests/vm/vm-run on kernel K with rxe-kvfix installed by DKMS before boot.
#
#   bench.sh K [short|full [REPS_1G [PERFTEST_1G]]]
#
# Per module (stock first, on the fresh guest, then rxe-kvfix; same commands):
#   reg   rxe-verify churn -s SIZE --count REPS: registration/deregistration
#         seconds of one pre-faulted region, and /proc/meminfo + vmallocinfo at
#         baseline / while registered / after (kernel memory per registered GiB);
#         64 MiB .. 1 GiB on both modules, 2/4/8 GiB on rxe-kvfix only (full form)
#   bw    RDMA WRITE and READ bandwidth at 64 KiB and 1 MiB messages (+1 GiB in the
#         full form): rxe-verify run -m full --msg-size MSG against ib_write_bw /
#         ib_read_bw loopback on the same rxe0, REPS separate runs each
#
# Forms: short (CI): 5 registrations and 3 bandwidth runs per figure, 16 MiB per
# bandwidth run, no 1 GiB messages, no sizes above 1 GiB; full: 11 registrations,
# 5 bandwidth runs (REPS_1G, default 3, for 1 GiB messages), 2/4/8 GiB registrations
# (needs a guest of ~11G). PERFTEST_1G=0 leaves perftest out at 1 GiB (each
# process fills its 2 GiB buffer with rand(): ~5 min under TCG on an idle host).
#
# Raw outputs go to /results (reg-*.json, bw-rv-*.json, bw-pt-*.client, bench-env.txt);
# tests/bench/render collects them into results.json and the table. A step fails
# only when it produced no figure where one must exist (tool crashed, unparsable
# output, rxe-kvfix refusing a size); a stock failure is recorded as a figure.
set -euo pipefail

usage() { echo "Usage: bench.sh KERNELRELEASE [short|full]"; }
# shellcheck source=tests/vm/guest/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
rxe_guest_main vm-bench 1 4 "$@"
K=$1 FORM=${2:-short}
case $FORM in
short) REPS=3 REG_REPS=5 REPS_1G=0 BW_REGION=16M SIZES_FIXED_ONLY='' ;;
full) REPS=5 REG_REPS=11 REPS_1G=${3:-3} BW_REGION=16M SIZES_FIXED_ONLY='2G 4G 8G' ;;
*) echo "bench.sh: form must be short or full, not '$FORM'" >&2; exit 2 ;;
esac
PERFTEST_1G=${4:-1}
[[ $REPS_1G =~ ^[0-9]+$ && $PERFTEST_1G =~ ^[01]$ ]] || { echo "bench.sh: REPS_1G must be a count and PERFTEST_1G 0 or 1" >&2; exit 2; }
SIZES_BOTH='64M 128M 256M 512M 1G'
MSGS='64K 1M'
((REPS_1G == 0)) || MSGS='64K 1M 1G'

ENV_FILE=$OUT/bench-env.txt
: >"$ENV_FILE"

kv() { printf '%s=%s\n' "$1" "$2" >>"$ENV_FILE"; }
now() { date +%s.%N; }
bytes_of() { # 64K / 1M / 1G / 32M -> bytes
	local n=${1%[KMG]}
	case $1 in
	*K) echo $((n << 10)) ;;
	*M) echo $((n << 20)) ;;
	*G) echo $((n << 30)) ;;
	*) echo "$1" ;;
	esac
}

kv form "$FORM"
kv kernel "$(uname -r)"
kv nproc "$(nproc)"
kv memtotal_kib "$(awk '/^MemTotal:/ {print $2}' /proc/meminfo)"
kv cpu_model "$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n1)"
kv guest_loadavg_start "$(cat /proc/loadavg)"
kv reps "$REPS"
kv reg_reps "$REG_REPS"
kv reps_1g "$REPS_1G"
kv perftest_1g "$PERFTEST_1G"
kv bw_region "$(bytes_of "$BW_REGION")"
kv t_start "$(now)"

[[ $(uname -r) == "$K" ]] || { t_fail "$K: booted kernel" "uname -r is $(uname -r)"; exit 1; }
modprobe -a ib_core ib_uverbs udp_tunnel ip6_udp_tunnel dummy || true

# reg MOD SIZE: churn SIZE x REG_REPS on rxe0 (registrations are cheap next to
# populating the region once, so more of them than bandwidth runs) -> reg-MOD-SIZE.json (+ .err, .rc)
reg() {
	local mod=$1 size=$2 f rc=0 what
	f=$OUT/reg-$mod-$size
	t_start "$K bench $mod: registration of $size x $REG_REPS (churn)"
	timeout 1200 "$RV" churn -d rxe0 -s "$size" --count "$REG_REPS" --json >"$f.json" 2>"$f.err" || rc=$?
	echo "$rc" >"$f.rc"
	what=$(jget "$f.json" '"reg median %.4f s (%.4f-%.4f), dereg median %.4f s" % (j["reg_seconds"]["median"], j["reg_seconds"]["min"], j["reg_seconds"]["max"], j["dereg_seconds"]["median"])' || true)
	if [[ $rc == 0 && -n $what ]]; then
		t_pass
		echo "     $what"
	elif [[ $mod == stock && $(jget "$f.json" 'j["iterations"][0]["registered"] is False' || true) == true ]]; then
		t_skip "the stock module could not register $size ($(jget "$f.json" '(j.get("failure") or {}).get("diagnosis", {}).get("cause")' || true)): recorded as a figure"
	else
		t_fail "exit $rc: $(jget "$f.json" 'j.get("failure") or j.get("error")' || true) $(head -c 300 "$f.err")"
	fi
}

# bw_rv MOD MSG REP: rxe-verify full-mode loop on a region of BW_REGION (1G for
# 1 GiB messages) in MSG chunks -> bw-rv-MOD-MSG-REP.json
bw_rv() {
	local mod=$1 msg=$2 rep=$3 region=$BW_REGION f rc=0
	[[ $msg != 1G ]] || region=1G
	f=$OUT/bw-rv-$mod-$msg-$rep
	timeout 1200 taskset -c 0 "$RV" run -d rxe0 -s "$region" -m full --msg-size "$msg" --json --no-progress >"$f.json" 2>"$f.err" || rc=$?
	echo "$rc" >"$f.rc"
	[[ $rc == 0 && $(jget "$f.json" 'r["result"] == "pass" and r["write"]["MBps"] > 0 and r["read"]["MBps"] > 0' || true) == true ]]
}

# bw_pt MOD TOOL MSG REP: perftest loopback on rxe0 (server + client in this guest)
# -> bw-pt-MOD-TOOL-MSG-REP.{client,server,rc}; iterations: the bytes of one
# rxe-verify run (BW_REGION / MSG), at least 5 (perftest's minimum). perftest times with
# rdtsc: under TCG a process moving between vCPUs can see the TSC jump (one unpinned
# ib_read_bw run printed 0.00 MiB/s), so client and server are pinned, the client on
# CPU 0 like rxe-verify. A run printing 0 MiB/s counts as no figure.
bw_pt() {
	local mod=$1 tool=$2 msg=$3 rep=$4 base gid iters spid rc=0 src=0 t0 t1 i
	base=$OUT/bw-pt-$mod-$tool-$msg-$rep
	iters=$(($(bytes_of "$BW_REGION") / $(bytes_of "$msg")))
	((iters >= 5)) || iters=5
	gid=$(rxe_gid_index rxe0) || return 1
	timeout 1200 taskset -c 1 "$tool" -d rxe0 -x "$gid" -s "$(bytes_of "$msg")" -n "$iters" -F >"$base.server" 2>&1 &
	spid=$!
	for ((i = 0; i < 100; i++)); do # perftest listens on TCP 18515 before it allocates
		ss -ltn 2>/dev/null | grep -q ':18515 ' && break
		sleep 0.2
	done
	t0=$(now)
	timeout 1200 taskset -c 0 "$tool" -d rxe0 -x "$gid" -s "$(bytes_of "$msg")" -n "$iters" -F 127.0.0.1 >"$base.client" 2>&1 || rc=$?
	t1=$(now)
	wait "$spid" || src=$?
	printf 'client=%s server=%s iters=%s wall=%s\n' "$rc" "$src" "$iters" "$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }')" >"$base.rc"
	((rc == 0 && src == 0)) &&
		awk '/^ *[0-9]+ +[0-9]+ +[0-9.]+ +[0-9.]+/ { bw = $4 } END { exit !(bw > 0) }' "$base.client"
}

bench_phase() { # MOD
	local mod=$1 size msg rep reps ok tool
	kv "guest_loadavg_${mod}_start" "$(cat /proc/loadavg)"
	kv "t_${mod}_start" "$(now)"
	rxe_dummy_up rxe0 d0 10.77.0.1/24
	for size in $SIZES_BOTH; do reg "$mod" "$size"; done
	if [[ $mod == fixed ]]; then
		for size in $SIZES_FIXED_ONLY; do reg "$mod" "$size"; done
	fi
	for msg in $MSGS; do
		reps=$REPS
		[[ $msg != 1G ]] || reps=$REPS_1G
		t_start "$K bench $mod: rxe-verify WRITE/READ bandwidth, $msg messages x $reps runs"
		ok=0
		for ((rep = 1; rep <= reps; rep++)); do bw_rv "$mod" "$msg" "$rep" && ok=$((ok + 1)); done
		if ((ok == reps)); then
			t_pass
			echo "     $(for ((rep = 1; rep <= reps; rep++)); do jget "$OUT/bw-rv-$mod-$msg-$rep.json" '"W %.1f R %.1f" % (r["write"]["MBps"], r["read"]["MBps"])'; done | paste -sd ';') MB/s"
		else
			t_fail "$((reps - ok)) of $reps runs gave no figure; see $OUT/bw-rv-$mod-$msg-*.err"
		fi
		for tool in ib_write_bw ib_read_bw; do
			if [[ $msg == 1G && $mod == stock ]]; then
				t_skip "$K bench stock: $tool, 1G messages" "perftest registers 2 x the message size (a 2 GiB MR, order 11): the stock module cannot; recorded as n/a"
				continue
			fi
			if [[ $msg == 1G && $PERFTEST_1G == 0 ]]; then
				t_skip "$K bench $mod: $tool, 1G messages" "left out (PERFTEST_1G=0): a 2 GiB rand() buffer fill per process"
				continue
			fi
			t_start "$K bench $mod: $tool bandwidth, $msg messages x $reps runs"
			ok=0
			for ((rep = 1; rep <= reps; rep++)); do bw_pt "$mod" "$tool" "$msg" "$rep" && ok=$((ok + 1)); done
			if ((ok == reps)); then
				t_pass
				echo "     $(for ((rep = 1; rep <= reps; rep++)); do grep -E '^ *[0-9]+ +[0-9]+ +[0-9.]+ +[0-9.]+' "$OUT/bw-pt-$mod-$tool-$msg-$rep.client" | tail -n1 | awk '{print $4}'; done | paste -sd ' ') MiB/s (perftest's MB = 2^20 B)"
			else
				t_fail "$((reps - ok)) of $reps runs gave no figure; see $OUT/bw-pt-$mod-$tool-$msg-*.client"
			fi
		done
	done
	rxe_dummy_down rxe0 d0
	kv "guest_loadavg_${mod}_end" "$(cat /proc/loadavg)"
	kv "t_${mod}_end" "$(now)"
}

# --- stock first, on the fresh guest (its page allocator still has order-10 blocks)
dmesg -C
t_start "$K bench: the distribution's rdma_rxe loads"
if load_stock "$K"; then
	t_pass
	kv stock_module "$(stock_module "$K")"
	bench_phase stock
	t_check "$K bench stock: rdma_rxe unloads" rmmod rdma_rxe
else
	t_fail "cannot load the stock module ($(stock_module "$K"))"
fi
dmesg >"$OUT/bench-stock-dmesg.txt"

# --- rxe-kvfix, resolved by modprobe, same commands
dmesg -C
t_start "$K bench: modprobe rdma_rxe loads rxe-kvfix"
if modprobe rdma_rxe && rxe_flavor rxe-kvfix; then
	t_pass
	kv fixed_module "$(modinfo -n rdma_rxe) $(cat /sys/module/rdma_rxe/version)"
	bench_phase fixed
	t_check "$K bench fixed: rdma_rxe unloads" rmmod rdma_rxe
	t_start "$K bench fixed: dmesg has no WARNING/BUG/Oops/lockdep report"
	dmesg >"$OUT/bench-fixed-dmesg.txt"
	bad=$(dmesg_bad)
	if [[ -z $bad ]]; then t_pass; else t_fail "$(head -n2 <<<"$bad" | tr '\n' ' ')"; fi
else
	t_fail "modinfo -n rdma_rxe is '$(modinfo -n rdma_rxe 2>&1)', version '$(cat /sys/module/rdma_rxe/version 2>&1)'"
fi

kv guest_loadavg_end "$(cat /proc/loadavg)"
kv t_end "$(now)"
exit $((T_FAILS > 0))
