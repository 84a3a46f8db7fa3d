#!/usr/bin/env bash
# bench.sh: benchmarks (figures, not pass/fail thresholds), stock rdma_rxe and
# rxe-kvfix in one boot, run inside a guest booted by vmhost/vm-run on kernel K with
# rxe-kvfix installed by DKMS before boot.
#
#   bench.sh K [short|full [PARTS]]     PARTS: comma list of reg,bw,defaults,frag,dp
#                                       (default reg,bw,defaults,frag,dp)
#
# Five parts, in this order (each module is loaded and unloaded once per round):
#   1. reg   registration cost, interleaved: ROUNDS rounds in ABBA order (stock, fixed,
#            fixed, stock, ...); a round loads its module, adds rxe0 and runs, per size
#            of SIZES_BOTH (64 MiB .. 1 GiB), `rxe-verify churn -s SIZE --count REG_REPS` (one region,
#            pre-faulted once, registered and deregistered REG_REPS times) ->
#            reg-rNN-MOD-SIZE.json, and the kernel's own time of every call of
#            rxe_reg_user_mr and rxe_dereg_mr (ftrace function_graph on those two only) ->
#            reg-rNN-MOD-SIZE.ktrace; rounds 2p-1 and 2p are pair p (one of each module);
#            per round the guest's /proc/loadavg and the guest clock at its start and
#            end (round-NN.txt; the scenario samples the host's load beside it).
#            Full form: then 2/4/8 GiB on rxe-kvfix only, FIXED_ONLY_REPS each
#            (reg-fixed-SIZE.json, .ktrace).
#   2. bw    RDMA WRITE/READ bandwidth on rxe-kvfix: guest/bw.sh FORM (rxe-verify's
#            pipelined, verified loops against ib_write_bw/ib_read_bw in interleaved
#            ABBA pairs, and in the full form the verified full span of 1 GiB + 16 B
#            beside ib_write_bw over a 1026 MiB MR) -> bw-pairs.tsv, bw-span.tsv
#   2b. defaults  on rxe-kvfix, in the bandwidth part's module load when both run:
#            guest/defaults.sh FORM (rxe-verify and perftest each at its own defaults,
#            same message size and bytes, interleaved; rxe-verify's waiting modes with the
#            CPU each run spent) -> defaults-pairs.tsv, wait-pairs.tsv
#   3. frag  the fragmented guest on purpose: rxe-fragment (tests/vm/tools/fragment.c)
#            fills memory and holds one mlocked page in every 2 MiB block; then
#            FRAG_ROUNDS rounds in ABBA order register each of FRAG_SIZES once
#            (`churn --count 1 --force`, after a top-up), /proc/vmstat copied right
#            before and after each registration -> frag-rNN-MOD-SIZE.{json,vmstat0,vmstat1};
#            stock's failures are figures (the time to fail), rxe-kvfix's are failures
#   4. dp    the fix's cost on the data path (guest/dp.sh): rxe-verify's WRITE and READ
#            bandwidth over the same MR on stock and rxe-kvfix in ABBA rounds, DP_ROUNDS
#            of DP_SIZES in the guest as booted (page array from kmalloc on both) ->
#            dp-rNN-MOD-SIZE.{json,vmalloc}, then, while the fragmenter of part 3 holds
#            (started for dp alone when frag is not run), DP_FRAG_ROUNDS of
#            DP_FRAG_SIZES (rxe-kvfix's page array from vmalloc where no block of its
#            order is free; stock then cannot register one MR, and runs the region
#            split into 256 MiB MRs beside it) -> dpfrag-rNN-MOD-SIZE[-splitK].*; the
#            allocator that served each run is read from /proc/vmallocinfo
#
# Forms: short (CI, within the harness budget; proves the design runs, decides little):
# 4 registration rounds (2 pairs) of 5 registrations of 64M 256M 1G, bw.sh short (3 pairs
# of 64K and 1M), defaults.sh short (one pair at 64 KiB, perftest WRITE only, three
# waiting modes once: ~25 s, an estimate), 2 fragmented rounds (1 pair) of 640M 1G;
# full (make bench, ~11G guest):
# 40 rounds (20 pairs: what the registration targets need to be decided) of 5
# registrations of 64M 128M 256M 512M 1G, then 20 of each of 2/4/8 GiB on rxe-kvfix,
# bw.sh full (5 pairs of 64K, 1M, 8M and 64M, the full span), defaults.sh full (5 pairs
# of 64K, 1M and 8M, WRITE and READ; six waiting modes x 5 rounds), 6 fragmented
# rounds (3 pairs) of 256M 512M 640M 1G.
# dp: short: 2 rounds (1 pair: one ratio, never a decision) of 1G as booted, 2 fragmented
# rounds of 1G (stock's also split into 4 MRs), sampled mode, one pass (324 transfers,
# ~12 MiB each way: the region's setup is most of a run, the rates are noise); full: 12
# rounds (6 pairs) of 256M 512M 1G as booted, 6 fragmented rounds (3 pairs) of 512M 1G,
# full mode, 1 MiB messages (every byte of the MR both ways: seconds of wire time a run).
#
# Raw outputs go to /results; tests/bench/render collects them into results.json and
# renders RESULTS.md and summary.json from it. A step fails only when it produced no figure where one must exist (tool
# crashed, unparsable output, rxe-kvfix refusing a size); a stock failure is a figure.
set -euo pipefail

usage() { echo "Usage: bench.sh KERNELRELEASE [short|full [reg,bw,defaults,frag,dp]]"; }
# shellcheck source=tests/vm/guest/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
rxe_guest_main vm-bench 1 4 "$@"
K=$1 FORM=${2:-short}
case $FORM in
short)
	REG_REPS=5 ROUNDS=4 FRAG_ROUNDS=2 FIXED_ONLY_REPS=0
	SIZES_BOTH='64M 256M 1G' SIZES_FIXED_ONLY='' FRAG_SIZES='640M 1G'
	DP_ROUNDS=2 DP_SIZES='1G' DP_FRAG_ROUNDS=2 DP_FRAG_SIZES='1G' DP_ARGS='-m sampled --passes 1'
	;;
full)
	REG_REPS=5 ROUNDS=40 FRAG_ROUNDS=6 FIXED_ONLY_REPS=20
	SIZES_BOTH='64M 128M 256M 512M 1G' SIZES_FIXED_ONLY='2G 4G 8G' FRAG_SIZES='256M 512M 640M 1G'
	DP_ROUNDS=12 DP_SIZES='256M 512M 1G' DP_FRAG_ROUNDS=6 DP_FRAG_SIZES='512M 1G' DP_ARGS='-m full --msg-size 1M'
	;;
*)
	echo "bench.sh: form must be short or full, not '$FORM'" >&2
	exit 2
	;;
esac
PARTS=${3:-reg,bw,defaults,frag,dp}
[[ ,$PARTS, =~ ^,((reg|bw|defaults|frag|dp),)+$ ]] || {
	echo "bench.sh: PARTS must be a comma list of reg, bw, defaults, frag and dp, not '$PARTS'" >&2
	exit 2
}
part() { [[ ,$PARTS, == *,$1,* ]]; }
# shellcheck source=tests/vm/guest/dp.sh
. "$(dirname "${BASH_SOURCE[0]}")/dp.sh"
FRAG=/usr/local/bin/rxe-fragment
FRAG_PID=''

# shellcheck disable=SC2317  # the EXIT trap
cleanup() { [[ -z $FRAG_PID ]] || kill -TERM "$FRAG_PID" 2>/dev/null || true; }
rxe_on_exit cleanup

ENV_FILE=$OUT/bench-env.txt
: >"$ENV_FILE"

kv() { printf '%s=%s\n' "$1" "$2" >>"$ENV_FILE"; }
now() { date +%s.%N; }
# abba R: the module of round R (1-based): stock, fixed, fixed, stock, stock, fixed, ...
abba() { case $((($1 - 1) % 4)) in 0 | 3) echo stock ;; *) echo fixed ;; esac }

kv form "$FORM"
kv kernel "$(uname -r)"
kv nproc "$(nproc)"
kv memtotal_kib "$(awk '/^MemTotal:/ {print $2}' /proc/meminfo)"
kv cpu_model "$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n1)"
kv guest_loadavg_start "$(cat /proc/loadavg)"
kv reg_reps "$REG_REPS"
kv rounds "$ROUNDS"
kv frag_rounds "$FRAG_ROUNDS"
kv dp_rounds "$DP_ROUNDS"
kv dp_frag_rounds "$DP_FRAG_ROUNDS"
kv dp_run "$DP_ARGS --seed $DP_SEED"
kv parts "$PARTS"
kv t_start "$(now)"

[[ $(uname -r) == "$K" ]] || {
	t_fail "$K: booted kernel" "uname -r is $(uname -r)"
	exit 1
}
modprobe -a ib_core ib_uverbs udp_tunnel ip6_udp_tunnel dummy || true

# mod_load MOD / mod_unload MOD: one module with rxe0 on a dummy netdev, and back;
# the kernel log of each load goes to bench-MOD-dmesg.txt (checked at the end)
mod_load() {
	dmesg -C
	if [[ $1 == stock ]]; then
		load_stock "$K" || {
			echo "bench: cannot load the stock module ($(stock_module "$K"))" >&2
			return 1
		}
	else
		{ modprobe rdma_rxe && rxe_flavor rxe-kvfix; } || {
			echo "bench: modprobe rdma_rxe did not give rxe-kvfix ($(modinfo -n rdma_rxe 2>&1))" >&2
			return 1
		}
		# which module every part's rxe-kvfix figures are of, whichever part loads it first
		grep -q '^fixed_module=' "$ENV_FILE" ||
			kv fixed_module "$(modinfo -n rdma_rxe) $(cat /sys/module/rdma_rxe/version)"
	fi
	(rxe_dummy_up rxe0 d0 10.77.0.1/24) >/dev/null 2>&1 || {
		echo "bench: rxe0 did not come up on $1" >&2
		rmmod rdma_rxe
		return 1
	}
}
mod_unload() {
	rdma link del rxe0 2>/dev/null || true
	ip link del d0 2>/dev/null || true
	rmmod rdma_rxe || {
		echo "bench: rmmod rdma_rxe failed after $1" >&2
		return 1
	}
	dmesg >>"$OUT/bench-$1-dmesg.txt"
	dmesg -C
}
# --- the kernel's own time per registration (ftrace) --------------------------------
# ftrace's function_graph tracer on the two rxe verbs only (set_ftrace_filter, so no
# other call site is patched or hooked: switching it is cheap under TCG, and the calls
# inside a traced one run untraced): the duration from entry to return of
# rxe_reg_user_mr (pinning the pages, the page table the fix allocates, the MR's setup)
# and of rxe_dereg_mr, per call, without the system call, uverbs' marshalling or
# rxe-verify's clocks around them. The filter names module functions, which leave with
# the module, so it is set after every load. max_graph_depth=1 adds nothing while the
# filter holds (the two verbs are the only calls traced); it stays because a filter whose
# functions left with the module is empty, which ftrace reads as "every function": then
# only outermost calls are traced instead of every nested one flooding the buffer.
# ktrace_start: after mod_load; ktrace_take FILE: FILE.ktrace gets the calls since the
# last take; ktrace_stop: before mod_unload. KTRACE is 0 when tracefs or the filter
# is missing (then the figures are rxe-verify's own clocks only, and render says so).
TRACEFS=/sys/kernel/tracing KFUNCS='rxe_reg_user_mr rxe_dereg_mr' KTRACE=1
ktrace_start() {
	((KTRACE)) || return 0
	{ mountpoint -q "$TRACEFS" || mount -t tracefs nodev "$TRACEFS"; } 2>/dev/null &&
		echo 0 >"$TRACEFS/tracing_on" && echo nop >"$TRACEFS/current_tracer" &&
		echo "$KFUNCS" >"$TRACEFS/set_ftrace_filter" && echo 1 >"$TRACEFS/max_graph_depth" &&
		echo 1 >"$TRACEFS/options/funcgraph-tail" &&
		echo function_graph >"$TRACEFS/current_tracer" && : >"$TRACEFS/trace" &&
		echo 1 >"$TRACEFS/tracing_on" && return 0
	KTRACE=0
	kv ktrace "off: the function_graph tracer or its filter ($KFUNCS) could not be set"
	echo "     (kernel-side timing off: function_graph on $KFUNCS could not be set)"
}
ktrace_take() {
	((KTRACE)) || return 0
	echo 0 >"$TRACEFS/tracing_on"
	grep -v '^#' "$TRACEFS/trace" >"$1.ktrace" || true
	: >"$TRACEFS/trace"
	echo 1 >"$TRACEFS/tracing_on"
}
ktrace_stop() {
	((KTRACE)) || return 0
	echo 0 >"$TRACEFS/tracing_on"
	echo nop >"$TRACEFS/current_tracer"
	: >"$TRACEFS/set_ftrace_filter"
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

# ab_rounds PART ROUNDS SIZES WHAT SIZE_FN: ROUNDS rounds in ABBA order, one result line
# each: load the round's module, SIZE_FN FILE SIZE for every size of SIZES (FILE is
# OUT/PART-rRR-MODULE-SIZE), note the round's clock and load, summarise, unload
ab_rounds() {
	local part=$1 rounds=$2 sizes=$3 what=$4 size_fn=$5 r rr mod size files
	for ((r = 1; r <= rounds; r++)); do
		mod=$(abba "$r")
		rr=$(printf %02d "$r")
		t_start "$K bench $part round $r/$rounds ($mod): $what"
		round_note "$part" "$r" "$mod" start
		if ! mod_load "$mod" 2>"$OUT/$part-round-$rr.err"; then
			t_fail "$(head -c 300 "$OUT/$part-round-$rr.err")"
			continue
		fi
		[[ $part != reg ]] || ktrace_start
		files=()
		for size in $sizes; do
			files+=("$OUT/$part-r$rr-$mod-$size")
			"$size_fn" "${files[-1]}" "$size"
		done
		[[ $part != reg ]] || ktrace_stop
		round_note "$part" "$r" "$mod" end
		summary "$mod" "${files[@]}"
		mod_unload "$mod" || BAD+="${BAD:+; }rmmod failed"
		if [[ -z $BAD ]]; then t_pass; else t_fail "${BAD:0:400}"; fi
		echo "     $FIGS"
	done
}
# a registration round's size: churn x REG_REPS, the kernel's time per call beside it
# shellcheck disable=SC2317  # called by ab_rounds, by name
reg_size() {
	churn "$1" "$2" --count "$REG_REPS" || true
	ktrace_take "$1"
}
# a fragmented round's size: top the fragmenter up, register once, vmstat around it
# shellcheck disable=SC2317  # called by ab_rounds, by name
frag_size() {
	rxe_frag_topup || echo "     (the fragmenter did not confirm top-up $((FRAG_TOPUPS + 1)))"
	cp /proc/vmstat "$1.vmstat0"
	churn "$1" "$2" --count 1 --force || true
	cp /proc/vmstat "$1.vmstat1"
}

# ====================================================================== 1. registration
dmesg -C
: >"$OUT/bench-stock-dmesg.txt"
: >"$OUT/bench-fixed-dmesg.txt"
kv stock_module "$(stock_module "$K")"
if part reg; then
	kv t_reg_start "$(now)"
	ab_rounds reg "$ROUNDS" "$SIZES_BOTH" "churn x $REG_REPS of $SIZES_BOTH" reg_size
	if [[ -n $SIZES_FIXED_ONLY ]]; then
		t_start "$K bench reg rxe-kvfix only: churn x $FIXED_ONLY_REPS of $SIZES_FIXED_ONLY (per-GiB cost beyond stock's limit)"
		if mod_load fixed 2>"$OUT/reg-fixed-only.err"; then
			files=()
			round_note reg 99 fixed start
			ktrace_start
			for size in $SIZES_FIXED_ONLY; do
				files+=("$OUT/reg-fixed-$size")
				churn "${files[-1]}" "$size" --count "$FIXED_ONLY_REPS" || true
				ktrace_take "${files[-1]}"
			done
			ktrace_stop
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
fi

# ================================================================ 2. bandwidth
# on rxe-kvfix only: the tool comparison (rxe-verify against perftest); the module's data path is the same
# code on both modules, only the page table's allocation differs. The defaults part
# (2b) runs in the same module load: its own rxe device, its own times in bench-env.txt
if part bw || part defaults; then
	t_start "$K bench bw/defaults: rxe-kvfix loads"
	if mod_load fixed 2>"$OUT/bw-fixed.err"; then
		t_pass
		if part bw; then
			kv t_bw_start "$(now)"
			"$SRC/tests/vm/guest/bw.sh" "$FORM" || true # its results are its own lines
			kv t_bw_end "$(now)"
		fi
		if part defaults; then
			kv t_defaults_start "$(now)"
			"$SRC/tests/vm/guest/defaults.sh" "$FORM" || true # its results are its own lines
			kv t_defaults_end "$(now)"
		fi
		t_check "$K bench bw/defaults: rxe-kvfix unloads" mod_unload fixed
	else
		t_fail "$(head -c 300 "$OUT/bw-fixed.err")"
	fi
fi

# ============================================== 4a. the data path, the guest as booted
if part dp; then
	kv t_dp_start "$(now)"
	dp_rounds dp "$DP_ROUNDS" "$DP_SIZES" 0
	kv t_dp_end "$(now)"
fi

# ============================================================= 3. the fragmented guest
# (and 4b. the data path in it: the fragmenter's fill is the most of both parts' time)
if part frag || part dp; then
	kv t_frag_start "$(now)"
	t_start "$K bench frag: rxe-fragment fragments memory and holds it"
	if [[ ! -x $FRAG ]]; then
		t_skip "$FRAG missing (the host could not build tests/vm/tools/fragment.c with gcc -static): no fragmented figures"
	else
		if rxe_frag_start "$OUT/frag-fragment.log"; then
			t_pass
			grep -E '^fragment: (filling|holding|topup 0)' "$OUT/frag-fragment.log" | sed 's/^/     /'
			! part frag || ab_rounds frag "$FRAG_ROUNDS" "$FRAG_SIZES" "register $FRAG_SIZES once each, fragmented" frag_size
			if part dp; then
				kv t_dpfrag_start "$(now)"
				dp_rounds dpfrag "$DP_FRAG_ROUNDS" "$DP_FRAG_SIZES" 1
				kv t_dpfrag_end "$(now)"
			fi
		else
			t_fail "no 'ready' within 600 s: $(tail -n2 "$OUT/frag-fragment.log" | tr '\n' ' ')"
		fi
		rxe_frag_stop
		t_check "$K bench frag: the fragmenter released everything" grep -q 'buddyinfo released' "$OUT/frag-fragment.log"
	fi
	kv t_frag_end "$(now)"
fi

t_start "$K bench: rxe-kvfix's kernel log (every load) has no WARNING/BUG/Oops/lockdep report"
bad=$(grep -E 'WARNING:|BUG:|Oops|Call Trace|possible circular locking|lockdep|general protection' "$OUT/bench-fixed-dmesg.txt" || true)
if [[ -z $bad ]]; then t_pass; else t_fail "$(head -n2 <<<"$bad" | tr '\n' ' ')"; fi

kv guest_loadavg_end "$(cat /proc/loadavg)"
kv t_end "$(now)"
exit $((T_FAILS > 0))
