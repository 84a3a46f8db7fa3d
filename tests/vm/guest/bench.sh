#!/usr/bin/env bash
# bench.sh: benchmarks (figures, not pass/fail thresholds), stock rdma_rxe and
# rxe-kvfix in one boot, run inside a guest booted by tests/vm/vm-run on kernel K with
# rxe-kvfix installed by DKMS before boot.
#
#   bench.sh K [short|full [REPS_1G [PERFTEST_1G]]]
#
# Three parts, in this order (each module is loaded and unloaded once per round):
#   1. reg   registration cost, interleaved: ROUNDS rounds in ABBA order (stock, fixed,
#            fixed, stock, ...); a round loads its module, adds rxe0 and runs, per size
#            of SIZES_BOTH (64 MiB .. 1 GiB), `rxe-verify churn -s SIZE --count REG_REPS` (one region,
#            pre-faulted once, registered and deregistered REG_REPS times) ->
#            reg-rNN-MOD-SIZE.json; rounds 2p-1 and 2p are pair p (one of each module);
#            per round the guest's /proc/loadavg and the guest clock at its start and
#            end (round-NN.txt; the scenario samples the host's load beside it).
#            Full form: then 2/4/8 GiB on rxe-kvfix only (reg-fixed-SIZE.json).
#   2. bw    RDMA WRITE/READ bandwidth, rxe-verify beside perftest (issue 13 replaces
#            this part): stock then rxe-kvfix, bw-rv-*.json, bw-pt-*.client
#   3. frag  the fragmented guest on purpose: rxe-fragment (tests/vm/tools/fragment.c)
#            fills memory and holds one mlocked page in every 2 MiB block; then
#            FRAG_ROUNDS rounds in ABBA order register each of FRAG_SIZES once
#            (`churn --count 1 --force`, after a top-up), /proc/vmstat copied right
#            before and after each registration -> frag-rNN-MOD-SIZE.{json,vmstat0,vmstat1};
#            stock's failures are figures (the time to fail), rxe-kvfix's are failures
#
# Forms: short (CI, within the harness budget; proves the design runs, decides little):
# 4 registration rounds (2 pairs) of 5 registrations of 64M 256M 1G, 3 bandwidth runs
# per figure, 2 fragmented rounds (1 pair) of 640M 1G; full (make bench, ~11G guest):
# 10 rounds (5 pairs) of 11 registrations of 64M 128M 256M 512M 1G, then 2/4/8 GiB on
# rxe-kvfix, 5 bandwidth runs (REPS_1G, default 3, for 1 GiB messages), 6 fragmented
# rounds (3 pairs) of 256M 512M 640M 1G. PERFTEST_1G=0 leaves perftest out at 1 GiB.
#
# Raw outputs go to /results; tests/bench/render collects them into results.json and
# RESULTS.md. A step fails only when it produced no figure where one must exist (tool
# crashed, unparsable output, rxe-kvfix refusing a size); a stock failure is a figure.
set -euo pipefail

usage() { echo "Usage: bench.sh KERNELRELEASE [short|full [REPS_1G [PERFTEST_1G]]]"; }
# shellcheck source=tests/vm/guest/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
rxe_guest_main vm-bench 1 4 "$@"
K=$1 FORM=${2:-short}
case $FORM in
short)
	REPS=3 REG_REPS=5 ROUNDS=4 FRAG_ROUNDS=2 REPS_1G=0 BW_REGION=16M
	SIZES_BOTH='64M 256M 1G' SIZES_FIXED_ONLY='' FRAG_SIZES='640M 1G'
	;;
full)
	REPS=5 REG_REPS=11 ROUNDS=10 FRAG_ROUNDS=6 REPS_1G=${3:-3} BW_REGION=16M
	SIZES_BOTH='64M 128M 256M 512M 1G' SIZES_FIXED_ONLY='2G 4G 8G' FRAG_SIZES='256M 512M 640M 1G'
	;;
*) echo "bench.sh: form must be short or full, not '$FORM'" >&2; exit 2 ;;
esac
PERFTEST_1G=${4:-1}
[[ $REPS_1G =~ ^[0-9]+$ && $PERFTEST_1G =~ ^[01]$ ]] || { echo "bench.sh: REPS_1G must be a count and PERFTEST_1G 0 or 1" >&2; exit 2; }
MSGS='64K 1M'
((REPS_1G == 0)) || MSGS='64K 1M 1G'
FRAG=${RXE_FRAGMENT:-/usr/local/bin/rxe-fragment}
FRAG_PID='' FRAG_TOPUPS=0

# shellcheck disable=SC2317  # the EXIT trap
cleanup() { [[ -z $FRAG_PID ]] || kill -TERM "$FRAG_PID" 2>/dev/null || true; }
trap cleanup EXIT

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
# abba R: the module of round R (1-based): stock, fixed, fixed, stock, stock, fixed, ...
abba() { case $((($1 - 1) % 4)) in 0 | 3) echo stock ;; *) echo fixed ;; esac; }

kv form "$FORM"
kv kernel "$(uname -r)"
kv nproc "$(nproc)"
kv memtotal_kib "$(awk '/^MemTotal:/ {print $2}' /proc/meminfo)"
kv cpu_model "$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n1)"
kv guest_loadavg_start "$(cat /proc/loadavg)"
kv reps "$REPS"
kv reg_reps "$REG_REPS"
kv rounds "$ROUNDS"
kv frag_rounds "$FRAG_ROUNDS"
kv reps_1g "$REPS_1G"
kv perftest_1g "$PERFTEST_1G"
kv bw_region "$(bytes_of "$BW_REGION")"
kv t_start "$(now)"

[[ $(uname -r) == "$K" ]] || { t_fail "$K: booted kernel" "uname -r is $(uname -r)"; exit 1; }
modprobe -a ib_core ib_uverbs udp_tunnel ip6_udp_tunnel dummy || true

# mod_load MOD / mod_unload MOD: one module with rxe0 on a dummy netdev, and back;
# the kernel log of each load goes to bench-MOD-dmesg.txt (checked at the end)
mod_load() {
	dmesg -C
	if [[ $1 == stock ]]; then
		load_stock "$K" || { echo "bench: cannot load the stock module ($(stock_module "$K"))" >&2; return 1; }
	else
		{ modprobe rdma_rxe && rxe_flavor rxe-kvfix; } || { echo "bench: modprobe rdma_rxe did not give rxe-kvfix ($(modinfo -n rdma_rxe 2>&1))" >&2; return 1; }
	fi
	(rxe_dummy_up rxe0 d0 10.77.0.1/24) >/dev/null 2>&1 || { echo "bench: rxe0 did not come up on $1" >&2; rmmod rdma_rxe; return 1; }
}
mod_unload() {
	rdma link del rxe0 2>/dev/null || true
	ip link del d0 2>/dev/null || true
	rmmod rdma_rxe || { echo "bench: rmmod rdma_rxe failed after $1" >&2; return 1; }
	dmesg >>"$OUT/bench-$1-dmesg.txt"
	dmesg -C
}
# churn FILE SIZE ARGS...: rxe-verify churn on rxe0 -> FILE.json (+ .err, .rc); status 0
# when it registered at least once
churn() {
	local f=$1 size=$2 rc=0
	shift 2
	timeout 1200 "$RV" churn -d rxe0 -s "$size" --json "$@" >"$f.json" 2>"$f.err" || rc=$?
	echo "$rc" >"$f.rc"
	[[ $rc == 0 ]]
}
# summary MOD BASE...: one python3 for a round's churn outputs (python3 costs ~1 s to
# start under TCG). Sets FIGS (the figures: "SIZE reg ... s; ...") and BAD (what went
# wrong where a figure must exist; empty if nothing): any rxe-kvfix failure, and a stock one
# other than a refused registration (stock failing to register is a figure)
summary() {
	local out
	out=$(summary_py "$@") || out=$'?\nBAD:the summary of the round failed (python3)'
	FIGS=${out%%$'\n'BAD:*} BAD=${out##*$'\n'BAD:}
	[[ $out == *$'\n'BAD:* ]] || BAD="the summary of the round printed no BAD line"
}
summary_py() {
	python3 - "$@" <<'PY'
import json, os, sys
mod, figs, bad = sys.argv[1], [], []
for base in sys.argv[2:]:
    size = base.rsplit("-", 1)[1]
    rc = open(base + ".rc").read().strip() if os.path.exists(base + ".rc") else "?"
    try:
        j = json.load(open(base + ".json"))
    except (OSError, ValueError):
        err = open(base + ".err", errors="replace").read()[:200] if os.path.exists(base + ".err") else ""
        figs.append(f"{size} no JSON"); bad.append(f"{size}: exit {rc}, no JSON: {err}"); continue
    its = j.get("iterations") or []
    if j.get("completed"):
        figs.append("%s reg %.4f s dereg %.4f s" % (size, j["reg_seconds"]["median"], j["dereg_seconds"]["median"]))
    elif its:
        cause = ((j.get("failure") or {}).get("diagnosis") or {}).get("cause")
        figs.append("%s FAILED errno %s (%s) after %.4f s" % (size, its[0].get("reg_errno"), cause, its[0].get("reg_seconds") or 0))
    else:
        figs.append(f"{size} no figure")
    refused = bool(its) and its[0].get("registered") is False
    if rc != "0" and not (mod == "stock" and refused):
        bad.append(f"{size}: exit {rc} {figs[-1]} {str(j.get('error') or j.get('failure'))[:150]}")
print("; ".join(figs))
print("BAD:" + "; ".join(bad))
PY
}
# round_note PART R MOD start|end: the guest clock and load, read by render
round_note() {
	printf '%s_%s=%s %s\n' "$4" "$3" "$(now)" "$(cat /proc/loadavg)" >>"$OUT/$1-round-$(printf %02d "$2").txt"
}

# ====================================================================== 1. registration
dmesg -C
: >"$OUT/bench-stock-dmesg.txt"
: >"$OUT/bench-fixed-dmesg.txt"
kv stock_module "$(stock_module "$K")"
kv t_reg_start "$(now)"
for ((r = 1; r <= ROUNDS; r++)); do
	mod=$(abba "$r")
	rr=$(printf %02d "$r")
	t_start "$K bench reg round $r/$ROUNDS ($mod): churn x $REG_REPS of $SIZES_BOTH"
	round_note reg "$r" "$mod" start
	if ! mod_load "$mod" 2>"$OUT/reg-round-$rr.err"; then
		t_fail "$(head -c 300 "$OUT/reg-round-$rr.err")"
		continue
	fi
	[[ $r -gt 2 || $mod != fixed ]] || kv fixed_module "$(modinfo -n rdma_rxe) $(cat /sys/module/rdma_rxe/version)"
	files=()
	for size in $SIZES_BOTH; do
		files+=("$OUT/reg-r$rr-$mod-$size")
		churn "${files[-1]}" "$size" --count "$REG_REPS" || true
	done
	round_note reg "$r" "$mod" end
	summary "$mod" "${files[@]}"
	mod_unload "$mod" || BAD+="${BAD:+; }rmmod failed"
	if [[ -z $BAD ]]; then t_pass; else t_fail "${BAD:0:400}"; fi
	echo "     $FIGS"
done
if [[ -n $SIZES_FIXED_ONLY ]]; then
	t_start "$K bench reg rxe-kvfix only: churn x $REG_REPS of $SIZES_FIXED_ONLY (per-GiB cost beyond stock's limit)"
	if mod_load fixed 2>"$OUT/reg-fixed-only.err"; then
		files=()
		round_note reg 99 fixed start
		for size in $SIZES_FIXED_ONLY; do
			files+=("$OUT/reg-fixed-$size")
			churn "${files[-1]}" "$size" --count "$REG_REPS" || true
		done
		round_note reg 99 fixed end
		summary fixed "${files[@]}"
		mod_unload fixed || BAD+="${BAD:+; }rmmod failed"
		if [[ -z $BAD ]]; then t_pass; else t_fail "${BAD:0:400}"; fi
		echo "     $FIGS"
	else
		t_fail "$(head -c 300 "$OUT/reg-fixed-only.err")"
	fi
fi
kv t_reg_end "$(now)"

# ============================================ 2. bandwidth (issue 13 replaces this part)
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

bw_phase() { # MOD: the bandwidth loop on one module (loaded, rxe0 up)
	local mod=$1 msg rep reps ok tool
	kv "guest_loadavg_bw_${mod}_start" "$(cat /proc/loadavg)"
	kv "t_bw_${mod}_start" "$(now)"
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
	kv "guest_loadavg_bw_${mod}_end" "$(cat /proc/loadavg)"
	kv "t_bw_${mod}_end" "$(now)"
}

for mod in stock fixed; do
	t_start "$K bench bw: $mod module loads, rxe0 up"
	if mod_load "$mod" 2>"$OUT/bw-$mod.err"; then
		t_pass
		bw_phase "$mod"
		t_check "$K bench bw: $mod module unloads" mod_unload "$mod"
	else
		t_fail "$(head -c 300 "$OUT/bw-$mod.err")"
	fi
done

# ============================================================= 3. the fragmented guest
# frag_topup: ask the fragmenter (SIGUSR2) to take the free blocks of order >= 9 that
# appeared since, and wait for its "topup N done" line
frag_topup() {
	local n=$((FRAG_TOPUPS + 1))
	kill -USR2 "$FRAG_PID" 2>/dev/null || return 1
	for _ in $(seq 600); do
		if grep -q "^fragment: topup $n done" "$OUT/frag-fragment.log"; then
			FRAG_TOPUPS=$n
			return 0
		fi
		sleep 0.1
	done
	return 1
}
kv t_frag_start "$(now)"
t_start "$K bench frag: rxe-fragment fragments memory and holds it"
if [[ ! -x $FRAG ]]; then
	t_skip "$FRAG missing (the host could not build tests/vm/tools/fragment.c with gcc -static): no fragmented figures"
else
	"$FRAG" --leave 120 >"$OUT/frag-fragment.log" 2>&1 &
	FRAG_PID=$!
	for _ in $(seq 600); do
		grep -q 'fragment: ready' "$OUT/frag-fragment.log" && break
		kill -0 "$FRAG_PID" 2>/dev/null || break
		sleep 1
	done
	if grep -q 'fragment: ready' "$OUT/frag-fragment.log"; then
		t_pass
		grep -E '^fragment: (filling|holding|topup 0)' "$OUT/frag-fragment.log" | sed 's/^/     /'
		for ((r = 1; r <= FRAG_ROUNDS; r++)); do
			mod=$(abba "$r")
			rr=$(printf %02d "$r")
			t_start "$K bench frag round $r/$FRAG_ROUNDS ($mod): register $FRAG_SIZES once each, fragmented"
			round_note frag "$r" "$mod" start
			if ! mod_load "$mod" 2>"$OUT/frag-round-$rr.err"; then
				t_fail "$(head -c 300 "$OUT/frag-round-$rr.err")"
				continue
			fi
			files=()
			for size in $FRAG_SIZES; do
				f=$OUT/frag-r$rr-$mod-$size
				files+=("$f")
				frag_topup || echo "     (the fragmenter did not confirm top-up $((FRAG_TOPUPS + 1)))"
				cp /proc/vmstat "$f.vmstat0"
				churn "$f" "$size" --count 1 --force || true
				cp /proc/vmstat "$f.vmstat1"
			done
			round_note frag "$r" "$mod" end
			summary "$mod" "${files[@]}"
			mod_unload "$mod" || BAD+="${BAD:+; }rmmod failed"
			if [[ -z $BAD ]]; then t_pass; else t_fail "${BAD:0:400}"; fi
			echo "     $FIGS"
		done
	else
		t_fail "no 'ready' within 600 s: $(tail -n2 "$OUT/frag-fragment.log" | tr '\n' ' ')"
	fi
	kill -TERM "$FRAG_PID" 2>/dev/null || true
	wait "$FRAG_PID" 2>/dev/null || true
	FRAG_PID=''
	t_check "$K bench frag: the fragmenter released everything" grep -q 'buddyinfo released' "$OUT/frag-fragment.log"
fi
kv t_frag_end "$(now)"

t_start "$K bench: rxe-kvfix's kernel log (every load) has no WARNING/BUG/Oops/lockdep report"
bad=$(grep -E 'WARNING:|BUG:|Oops|Call Trace|possible circular locking|lockdep|general protection' "$OUT/bench-fixed-dmesg.txt" || true)
if [[ -z $bad ]]; then t_pass; else t_fail "$(head -n2 <<<"$bad" | tr '\n' ' ')"; fi

kv guest_loadavg_end "$(cat /proc/loadavg)"
kv t_end "$(now)"
exit $((T_FAILS > 0))
