#!/usr/bin/env bash
# stress.sh: rxe-kvfix under stress, stock beside fixed, inside a guest booted by
# vmhost/vm-run on kernel K with rxe-kvfix installed by DKMS before boot.
#
#   stress.sh K [short|full|debug] [PARTS]
#
# PARTS (comma list, default frag,churn,concurrency,pressure,lifecycle):
#   frag         fresh guest, stock module: page-aligned 512 MiB, 640 MiB and 1 GiB
#                register; 2 GiB never does (one attempt). rxe-fragment (tests/vm/tools/
#                fragment.c: huge pages filled, one mlocked page kept per 2 MiB block, plus settings that keep compaction
#                from undoing it) fragments memory and keeps holding it. Before every
#                attempt it takes the free blocks of order >= 9 that appeared, and
#                rxe-verify records buddyinfo right before ibv_reg_mr: with no free block
#                of the needed order, stock must fail 640 MiB and 1 GiB (512 MiB
#                reported) diagnosed as fragmentation, and after the swap rxe-kvfix must
#                pass the same sizes with verified WRITE/READ; an attempt that still saw
#                a free block after 3 tries is a SKIP with the figures, and at least one
#                of 640M/1G must reach the state on each module or the part fails
#   churn        rxe-kvfix: 2 GiB registered/deregistered N times (short: 100;
#                full: 1000; debug: 50), 1 GiB with a verified pass between
#                registrations (short 10, full 20, debug 3); no failure, Slab/VmallocUsed/vmallocinfo back to
#                baseline within 1 MiB, MemFree not more than 4 MiB below it
#   concurrency  four rxe-verify processes at once on rxe0, each 1 GiB with sampled
#                verified loops: all pass, dmesg clean (no WARNING/BUG/Oops/oom)
#   pressure     a region beyond MemAvailable: one-line exit-3 error naming the figures
#                and --force, nothing pinned; with --force the kernel refuses cleanly:
#                no oops, a sentinel process survives, OOM victims named
#   lifecycle    8 cycles (full: 20, debug: 5) of: load rxe-kvfix, add rxe0, register 1 GiB+16 B, deregister,
#                delete rxe0, unload; no oops, no leak (meminfo/vmallocinfo/slab); then
#                the stock module loads and registers 1 GiB
# dmesg is checked after each part. Results: testlib lines (results.tsv), rxe-verify
# JSON and logs in /results/stress-*.
set -uo pipefail

usage() { echo "Usage: stress.sh KERNELRELEASE [short|full|debug] [frag,churn,concurrency,pressure,lifecycle]"; }
# shellcheck source=tests/vm/guest/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
rxe_guest_main vm-stress 1 "" "$@"
K=$1 FORM=${2:-short} PARTS=${3:-frag,churn,concurrency,pressure,lifecycle}
# lifecycle cycles: a leak of what a cycle allocates (the 1 GiB + 16 B region's page
# array alone is 4 MiB) crosses the 1 MiB threshold in one; 8 cycles catch one of
# 128 KiB a cycle. Each cycle costs 4-9 s under TCG
case $FORM in
short) N_CHURN=100 N_TRAFFIC=10 N_LIFE=8 ;;
full) N_CHURN=1000 N_TRAFFIC=20 N_LIFE=20 ;;
# under the debug kernel's checkers (guest/debug.sh): every kernel access is checked,
# so fewer rounds of the same shapes
debug) N_CHURN=50 N_TRAFFIC=3 N_LIFE=5 ;;
*)
	usage >&2
	exit 2
	;;
esac
MIB=$((1 << 20))

FRAG=/usr/local/bin/rxe-fragment
FRAG_PID=''

# shellcheck disable=SC2317  # invoked by trap
cleanup() {
	[[ -z $FRAG_PID ]] || kill -TERM "$FRAG_PID" 2>/dev/null || true
	[[ -z ${SENTINEL_PID:-} ]] || kill "$SENTINEL_PID" 2>/dev/null || true
}
rxe_on_exit cleanup

rxe_up() { (rxe_dummy_up rxe0 d0 10.77.0.1/24 "$BULK_MTU") >/dev/null 2>&1; }
rxe_down() {
	rdma link del rxe0 2>/dev/null || true
	ip link del d0 2>/dev/null || true
}
unload() {
	rxe_down
	[[ ! -d /sys/module/rdma_rxe ]] || rmmod rdma_rxe
}
load_fixed() { modprobe rdma_rxe && rxe_flavor rxe-kvfix; }

# ch NAME ARGS...: rxe-verify churn -d rxe0 --json ARGS; JSON in OUT/stress-NAME.json;
# prints the file name; exit status in FILE.rc
ch() {
	local name=$1 f rc=0
	shift
	f=$OUT/stress-$name.json
	timeout 1200 "$RV" churn -d rxe0 --json "$@" >"$f" 2>"$f.err" || rc=$?
	echo "$rc" >"$f.rc"
	printf '%s\n' "$f"
}
cj() { jget "$1" "$2"; } # cj FILE EXPR over the churn JSON (j)
fig() {                  # one line of figures from a churn JSON
	cj "$1" '"reg min/median/max %.3f/%.3f/%.3f s, dereg median %.3f s" % (j["reg_seconds"]["min"], j["reg_seconds"]["median"], j["reg_seconds"]["max"], j["dereg_seconds"]["median"]) if j.get("reg_seconds") else "no registration: " + str((j.get("failure") or {}).get("diagnosis"))'
}
kmem_line() { # registered/after deltas in KiB
	cj "$1" '"; ".join("%s %s: %s" % (w, k, ("%+d KiB" % (v // 1024)) if v is not None else "n/a") for w, d in (("registered", j["kernel_memory"]["registered_minus_baseline"]), ("after", j["kernel_memory"]["after_minus_baseline"])) if d for k, v in d.items())'
}
# back_to_baseline FILE: Slab, VmallocUsed and vmallocinfo (where the page array lives)
# within 1 MiB of the baseline: one leaked array (4 MiB per GiB) shows there. MemFree
# not more than 64 MiB below it, for what does not live there (pinned pages that stay
# pinned: the whole region): MemFree moves by itself, caches shrink and grow and pages
# sit on per-CPU lists. Measured: -1.3 MiB after 10 x 1 GiB with traffic (Slab +0.5 MiB);
# -12.3 MiB after 100 x 2 GiB run right after the fragmenter released 5.6 GiB (it rose
# 24 MiB while the MR was registered; Slab +16 KiB, VmallocUsed -24 KiB): the 4 MiB
# bound this had failed there, in CI.
# In the debug form Slab is not compared: KASAN keeps freed slab objects in its
# quarantine (up to 1/32 of memory) before they count as free, so Slab stays above
# its baseline after traffic without a leak (measured: +8.2 MiB after 1 GiB x 3 with
# traffic); kmemleak's scans in guest/debug.sh judge leaks there.
back_to_baseline() {
	local d=$1 v skip=''
	[[ $FORM != debug ]] || skip=slab
	v=$(cj "$d" "' '.join('%s=%s' % (k, v) for k, v in j['kernel_memory']['after_minus_baseline'].items() if k != '$skip' and (v is None or (v < -64 * $MIB if k == 'mem_free' else abs(v) > $MIB)))")
	[[ -z $v ]] || {
		echo "after minus baseline (bytes): $v"
		return 1
	}
}
if [[ $FORM == debug ]]; then
	BASELINE_WHAT="VmallocUsed/vmallocinfo back to baseline within 1 MiB, MemFree within 64 MiB (Slab not compared: KASAN's quarantine)"
else
	BASELINE_WHAT="Slab/VmallocUsed/vmallocinfo back to baseline within 1 MiB, MemFree within 64 MiB"
fi

# dmesg_part NAME [oom-ok]: blktests style, the kernel log of the part just run;
# oom-ok: OOM reports (with their Call Trace) are allowed, oopses are not
dmesg_part() {
	local name=$1 bad
	dmesg >"$OUT/stress-$name-dmesg.txt"
	t_start "$K stress $name: dmesg clean"
	if [[ ${2:-} == oom-ok ]]; then
		bad=$(grep -E 'BUG:|Oops|general protection|WARNING:|RIP:.*rxe' "$OUT/stress-$name-dmesg.txt" || true)
	else
		bad=$(
			dmesg_bad
			grep -iE 'oom|out of memory' "$OUT/stress-$name-dmesg.txt" || true
		)
	fi
	if [[ -z $bad ]]; then t_pass; else t_fail "$(head -n3 <<<"$bad" | tr '\n' ' ' | cut -c1-300)"; fi
	dmesg -C
}

kmem_now() { # MemFree Slab VmallocUsed (KiB) and the vmallocinfo sum (KiB, without freed "unpurged" areas)
	echo "$(awk '/^(MemFree|Slab|VmallocUsed):/ {printf "%s ", $2}' /proc/meminfo)$(awk '$1 ~ /^0x/ && !/unpurged/ {s += $2} END {printf "%d", s / 1024}' /proc/vmallocinfo)"
}

part_t0=0
part_begin() {
	part_t0=$SECONDS
	echo "--- stress part $1 ($FORM form), $(date +%T)"
}
part_end() { echo "     part $1 took $((SECONDS - part_t0)) s"; }

[[ $(uname -r) == "$K" ]] || {
	t_fail "$K: booted kernel" "uname -r is $(uname -r)"
	exit 1
}
modprobe -a ib_core ib_uverbs udp_tunnel ip6_udp_tunnel dummy || true
echo "     guest: $(awk '/^MemTotal:/ {print $2 " KiB"}' /proc/meminfo), $(nproc) vCPUs, form $FORM"
dmesg -C

# --- 1. fragmentation -------------------------------------------------------------
FRAG_TRIES=3
# vmstat_delta BEFORE: the reclaim/compaction counters of /proc/vmstat that moved since
vmstat_delta() {
	awk 'NR == FNR { b[$1] = $2; next }
		$1 ~ /^(compact_(stall|fail|success|migrate_scanned|free_scanned|isolated)|allocstall_|pgsteal_direct|pgscan_direct|thp_split_page$|thp_deferred_split_page|pgmigrate_success|kswapd_|drop_|pageoutrun)/ && $2 != b[$1] {
			printf "%s%s %+d", sep, $1, $2 - b[$1]; sep = ", " }' "$1" /proc/vmstat
}
# frag_attempt NAME SIZE [CHURN ARGS]: top up, register SIZE once (churn --count 1
# --force) and read the free blocks of the metadata's order that buddyinfo showed right
# before ibv_reg_mr; again while there was one, FRAG_TRIES times at most. Sets FA_FILE
# (the last JSON), FA_BEFORE (free blocks of order >= the metadata's, '' if unread),
# FA_TRY ("try N/M") and FA_FIG (the figures of the last try).
frag_attempt() {
	local name=$1 size=$2 try
	shift 2
	for ((try = 1; try <= FRAG_TRIES; try++)); do
		rxe_frag_topup || echo "     (the fragmenter did not confirm top-up $((FRAG_TOPUPS + 1)))"
		cp /proc/vmstat "$OUT/stress-$name-try$try.vmstat0"
		FA_FILE=$(ch "$name-try$try" -s "$size" --count 1 --force "$@")
		FA_VMSTAT=$(vmstat_delta "$OUT/stress-$name-try$try.vmstat0")
		FA_BEFORE=$(cj "$FA_FILE" '(j["iterations"][0].get("buddyinfo_before") or {}).get("free_blocks", "")')
		FA_FIG=$(cj "$FA_FILE" '(lambda b: "free blocks of order >= %d: %d (largest free order %d; %s)" % (b["order"], b["free_blocks"], b["largest_free_order"], ", ".join("%s orders %d-10: %s" % (z["zone"], b["order"] - 1, " ".join(str(x) for x in z["free"][b["order"] - 1:])) for z in b["zones"] if z["zone"] != "DMA")) if b else "no buddyinfo reading")(j["iterations"][0].get("buddyinfo_before"))')
		FA_TRY="try $try/$FRAG_TRIES"
		[[ $FA_BEFORE != 0 && $FA_BEFORE =~ ^[0-9]+$ ]] || return 0
		((try < FRAG_TRIES)) || break
		echo "     $name try $try: $FA_FIG before the registration (vmstat during it: ${FA_VMSTAT:-none moved}): topping up and trying again"
	done
	FA_TRY="try $FRAG_TRIES/$FRAG_TRIES"
}
part_frag() {
	local s f reg line
	part_begin frag
	t_start "$K stress frag: the stock rdma_rxe loads"
	if load_stock "$K" && rxe_up; then t_pass; else
		t_fail "stock module or rxe0 did not come up"
		return
	fi
	for s in 512M 640M 1G; do
		f=$(ch "stock-fresh-$s" -s "$s" --count 1)
		reg=$(cj "$f" 'j["completed"] == 1')
		echo "     fresh guest, stock, $s page-aligned: registered=$reg ($(fig "$f"))"
		[[ $s == 512M ]] && continue
		t_start "$K stock, fresh guest: $s page-aligned registers"
		if [[ $reg == true ]]; then t_pass; else t_fail "exit $(cat "$f.rc"): $(head -c 300 "$f.err")"; fi
	done
	t_start "$K stock: 2 GiB never registers (one attempt; rxe metadata order 11)"
	f=$(ch stock-2G -s 2G --count 1)
	if [[ $(cat "$f.rc") == 1 && $(cj "$f" 'j["iterations"][0]["reg_errno"] == 12 and j["failure"]["diagnosis"]["cause"] == "rxe_metadata_order"') == true ]]; then
		t_pass
	else
		t_fail "exit $(cat "$f.rc"): $(cj "$f" 'j.get("failure")') $(head -c 200 "$f.err")"
	fi

	t_start "$K stress frag: rxe-fragment fragments memory and holds it"
	if [[ ! -x $FRAG ]]; then
		t_skip "$FRAG missing (the host could not build tests/vm/tools/fragment.c with gcc -static)"
		return
	fi
	if rxe_frag_start "$OUT/stress-fragment.log"; then
		t_pass
	else
		t_fail "no 'ready' within 600 s: $(tail -n2 "$OUT/stress-fragment.log" | tr '\n' ' ')"
		return
	fi
	sed 's/^/     /' "$OUT/stress-fragment.log"
	echo "     MemAvailable now $(awk '/^MemAvailable:/ {print $2}' /proc/meminfo) KiB"
	# What holds in every state, and which state each attempt was in: rxe-verify reads
	# /proc/buddyinfo immediately before ibv_reg_mr (the region already resident). With
	# no free block of the metadata's order, stock must fail (ENOMEM, fragmentation) and
	# rxe-kvfix must pass; with one, the fragmenter tops up and the attempt is retried,
	# FRAG_TRIES times at most, then reported as a SKIP with the figures.
	local s reached_stock=0 reached_fixed=0 before figs=''
	for s in 512M 640M 1G; do
		frag_attempt "stock-frag-$s" "$s"
		before=$FA_BEFORE
		echo "     fragmented, stock, $s: $FA_TRY, $FA_FIG; vmstat during it: ${FA_VMSTAT:-none moved}: $(cj "$FA_FILE" '"registered" if j["completed"] == 1 else "FAILED errno %s [%s] %s" % (j["iterations"][0]["reg_errno"] if j["iterations"] else "-", (j.get("failure") or {}).get("diagnosis", {}).get("cause"), (j.get("failure") or {}).get("diagnosis", {}).get("summary"))')"
		[[ $s == 512M ]] && continue # order 9: free order-9 blocks may sit on per-CPU lists, unseen by buddyinfo; reported, not asserted
		figs+="${figs:+; }$s $FA_TRY: $FA_FIG"
		t_start "$K stock, fragmented: $s page-aligned fails, diagnosed as fragmentation"
		if [[ $before == 0 ]]; then
			if [[ $(cat "$FA_FILE.rc") == 1 && $(cj "$FA_FILE" 'j["iterations"][0]["reg_errno"] == 12 and j["failure"]["diagnosis"]["cause"] == "fragmentation"') == true ]]; then
				t_pass
				reached_stock=$((reached_stock + 1))
			else
				t_fail "no free block of the needed order before the attempt ($FA_FIG), yet exit $(cat "$FA_FILE.rc"): $(cj "$FA_FILE" 'j.get("failure"), j.get("completed")') $(head -c 200 "$FA_FILE.err")"
			fi
		elif [[ $before =~ ^[0-9]+$ ]]; then
			t_skip "the no-free-block state was not reached in $FRAG_TRIES tries ($FA_FIG before the last; it $(cj "$FA_FILE" '"registered" if j["completed"] == 1 else "failed"')): nothing shown about fragmentation"
		else
			t_fail "no buddyinfo reading before the registration: exit $(cat "$FA_FILE.rc"): $(cj "$FA_FILE" 'j.get("failure")') $(head -c 200 "$FA_FILE.err")"
		fi
	done
	t_start "$K stock, fragmented: a page-aligned size <= 1 GiB reached the no-free-block state and failed"
	if ((reached_stock > 0)); then t_pass; else t_fail "neither 640M nor 1G did, the fragmented state was not reached: $figs"; fi
	figs=
	dmesg >"$OUT/stress-frag-stock-dmesg.txt"
	line=$(grep -m1 -E 'page allocation failure' "$OUT/stress-frag-stock-dmesg.txt" || true)
	[[ -z $line ]] || echo "     stock dmesg: $line"
	t_start "$K stress frag: stock kernel log has no oops"
	if grep -qE 'BUG:|Oops|general protection' "$OUT/stress-frag-stock-dmesg.txt"; then
		t_fail "$(grep -m1 -E 'BUG:|Oops|general protection' "$OUT/stress-frag-stock-dmesg.txt")"
	else
		t_pass
	fi
	dmesg -C

	t_start "$K stress frag: swap stock -> rxe-kvfix while the fragmenter keeps holding"
	if unload && load_fixed && rxe_up && kill -0 "$FRAG_PID" 2>/dev/null; then
		t_pass
	else
		t_fail "module swap failed (loaded: $(rxe_flavor)) or the fragmenter is gone"
		return
	fi
	for s in 512M 640M 1G; do
		t_start "$K rxe-kvfix, same fragmented state: $s page-aligned registers and passes verified WRITE/READ"
		frag_attempt "fixed-frag-$s" "$s" --traffic
		before=$FA_BEFORE
		figs+="${figs:+; }$s $FA_TRY: $FA_FIG"
		echo "     fragmented, rxe-kvfix, $s: $FA_TRY, $FA_FIG; vmstat during it: ${FA_VMSTAT:-none moved}"
		if [[ $(cat "$FA_FILE.rc") == 0 && $(cj "$FA_FILE" 'j["completed"] == 1 and j["iterations"][0]["traffic"]["verified_bytes"] > 0') == true ]]; then
			if [[ $before == 0 ]]; then
				t_pass
				reached_fixed=$((reached_fixed + 1))
				echo "     $(fig "$FA_FILE"); $(kmem_line "$FA_FILE")"
			else
				t_skip "passed, but the no-free-block state was not reached in $FRAG_TRIES tries ($FA_FIG before the last): nothing shown about fragmentation"
			fi
		else
			t_fail "exit $(cat "$FA_FILE.rc") ($FA_FIG before it): $(cj "$FA_FILE" 'j.get("failure")') $(head -c 200 "$FA_FILE.err")"
		fi
	done
	t_start "$K rxe-kvfix, same fragmented state: a size reached the no-free-block state and passed"
	if ((reached_fixed > 0)); then t_pass; else t_fail "no size did, the fragmented state was not reached: $figs"; fi
	echo "     the fragmenter's top-ups:"
	grep '^fragment: topup' "$OUT/stress-fragment.log" | sed 's/^/       /'
	rxe_frag_stop
	t_check "$K stress frag: the fragmenter released everything" grep -q 'buddyinfo released' "$OUT/stress-fragment.log"
	dmesg_part frag
	part_end frag
}

# --- 2. churn ---------------------------------------------------------------------
part_churn() {
	local f
	part_begin churn
	{ rxe_flavor rxe-kvfix && [[ -e /sys/class/infiniband/rxe0 ]]; } || {
		unload
		load_fixed && rxe_up
	}
	t_start "$K rxe-kvfix churn: 2 GiB registered and deregistered $N_CHURN times"
	f=$(ch fixed-churn-2G -s 2G --count "$N_CHURN")
	if [[ $(cat "$f.rc") == 0 && $(cj "$f" "j['completed'] == $N_CHURN") == true ]]; then
		t_pass
	else
		t_fail "exit $(cat "$f.rc"): $(cj "$f" 'j.get("completed"), j.get("failure")') $(head -c 200 "$f.err")"
	fi
	echo "     2 GiB x $N_CHURN: $(fig "$f")"
	echo "     $(kmem_line "$f")"
	t_check "$K rxe-kvfix churn 2 GiB: $BASELINE_WHAT" back_to_baseline "$f"
	t_start "$K rxe-kvfix churn: 1 GiB x $N_TRAFFIC with a verified WRITE/READ pass between registrations"
	f=$(ch fixed-churn-1G-traffic -s 1G --count "$N_TRAFFIC" --traffic)
	if [[ $(cat "$f.rc") == 0 && $(cj "$f" "j['completed'] == $N_TRAFFIC and all(i['traffic']['result'] == 'pass' for i in j['iterations'])") == true ]]; then
		t_pass
	else
		t_fail "exit $(cat "$f.rc"): $(cj "$f" 'j.get("completed"), j.get("failure")') $(head -c 200 "$f.err")"
	fi
	echo "     1 GiB x $N_TRAFFIC with traffic: $(fig "$f")"
	echo "     $(kmem_line "$f")"
	t_check "$K rxe-kvfix churn 1 GiB with traffic: $BASELINE_WHAT" back_to_baseline "$f"
	dmesg_part churn
	part_end churn
}

# --- 3. concurrency ---------------------------------------------------------------
part_concurrency() {
	local i pids=() rcs=() bad='' t0
	part_begin concurrency
	{ rxe_flavor rxe-kvfix && [[ -e /sys/class/infiniband/rxe0 ]]; } || {
		unload
		load_fixed && rxe_up
	}
	t_start "$K rxe-kvfix concurrency: four rxe-verify processes, 1 GiB each, verified loops, at once"
	t0=$SECONDS
	for i in 1 2 3 4; do
		timeout 1800 "$RV" run "${RV_OP_DEADLINE[@]}" -d rxe0 -s 1G -m sampled --json --no-progress \
			>"$OUT/stress-concurrent-$i.json" 2>"$OUT/stress-concurrent-$i.err" &
		pids+=($!)
	done
	for i in 0 1 2 3; do
		rcs[i]=0
		wait "${pids[i]}" || rcs[i]=$?
	done
	for i in 1 2 3 4; do
		f=$OUT/stress-concurrent-$i.json
		echo "     process $i: exit ${rcs[i - 1]}, $(jget "$f" '"%s, reg %.3f s, write %.1f MB/s, read %.1f MB/s, %d bytes verified" % (r["result"], r["reg_seconds"], r["write"]["MBps"], r["read"]["MBps"], r["verified_bytes"])')"
		[[ ${rcs[i - 1]} == 0 && $(jget "$f" 'r["result"] == "pass" and r["verified_bytes"] > 0') == true ]] ||
			bad+="process $i exit ${rcs[i - 1]} $(head -c 150 "$f.err"); "
	done
	if [[ -z $bad ]]; then t_pass; else t_fail "$bad"; fi
	echo "     four processes together: $((SECONDS - t0)) s"
	dmesg_part concurrency
	part_end concurrency
}

# --- 4. memory pressure -----------------------------------------------------------
part_pressure() {
	local avail total size f rc=0 line victims
	part_begin pressure
	{ rxe_flavor rxe-kvfix && [[ -e /sys/class/infiniband/rxe0 ]]; } || {
		unload
		load_fixed && rxe_up
	}
	avail=$(awk '/^MemAvailable:/ {print $2 * 1024}' /proc/meminfo)
	total=$(awk '/^MemTotal:/ {print $2 * 1024}' /proc/meminfo)
	size=$(((avail + 256 * MIB) / MIB))M
	# beyond MemTotal would be the usage error (exit 2): stay between the two figures
	((avail + 256 * MIB < total)) || size=$(((avail + total) / 2 / MIB))M
	echo "     MemAvailable $((avail / MIB)) MiB, MemTotal $((total / MIB)) MiB: asking for $size"
	t_start "$K pressure: $size (beyond MemAvailable) gets a one-line exit-3 error naming the figures and --force, nothing pinned"
	local before after
	before=$(kmem_now)
	f=$(ch pressure-check -s "$size" --count 1)
	after=$(kmem_now)
	line=$(cat "$f.err")
	echo "     $line"
	if [[ $(cat "$f.rc") == 3 && $(wc -l <"$f.err") == 1 && $line == *MemAvailable* && $line == *--force* && ! -s $f ]]; then
		t_pass
	else
		t_fail "exit $(cat "$f.rc"), stderr '$(head -c 300 "$f.err")', stdout $(wc -c <"$f") bytes"
	fi
	echo "     kernel memory KiB (MemFree Slab VmallocUsed vmallocinfo) before: $before, after: $after"

	# --force beyond MemAvailable on a host without swap: the OOM killer decides.
	# Uncontained, a run of this test saw the OOM killer take rxe-verify and,
	# 120 ms later (its memory not yet freed), an unrelated 69 MB process. So the
	# forced attempt runs the way the docs tell engineers to: in a memory cgroup
	# capped below MemAvailable, where the kernel refuses or kills inside the cgroup only.
	t_start "$K pressure: with --force in a memory cgroup the kernel refuses cleanly, the sentinel survives"
	local cg=/sys/fs/cgroup/rxe-verify-force
	[[ -e /sys/fs/cgroup/cgroup.controllers ]] || mount -t cgroup2 none /sys/fs/cgroup
	echo +memory >/sys/fs/cgroup/cgroup.subtree_control
	mkdir -p "$cg"
	echo $((avail - 256 * MIB)) >"$cg/memory.max"
	[[ ! -e $cg/memory.swap.max ]] || echo 0 >"$cg/memory.swap.max"
	python3 -c 'import time; b = bytearray(64 << 20); time.sleep(100000)' &
	SENTINEL_PID=$!
	sleep 2
	f=$OUT/stress-pressure-force.json
	rc=0
	sh -c 'echo $$ >"$1/cgroup.procs" && shift && exec "$@"' sh "$cg" \
		timeout 1200 "$RV" churn -d rxe0 --json -s "$size" --count 1 --force >"$f" 2>"$f.err" || rc=$?
	dmesg >"$OUT/stress-pressure-dmesg.txt"
	victims=$(sed -n 's/.*Killed process [0-9]* (\([^)]*\)).*/\1/p' "$OUT/stress-pressure-dmesg.txt" | sort | uniq -c | tr -s ' \n' ' ')
	echo "     rxe-verify --force in a cgroup of $(((avail - 256 * MIB) / MIB)) MiB: exit $rc; $(head -c 200 "$f.err" | tr '\n' ' ')"
	echo "     OOM victims: ${victims:-none}; $(grep -m1 -o 'Memory cgroup out of memory' "$OUT/stress-pressure-dmesg.txt" || echo 'no memcg OOM')"
	if ! kill -0 "$SENTINEL_PID" 2>/dev/null; then
		t_fail "the sentinel (pid $SENTINEL_PID) was killed; OOM victims: ${victims:-none}"
	elif grep -qE 'BUG:|Oops|general protection' "$OUT/stress-pressure-dmesg.txt"; then
		t_fail "oops: $(grep -m1 -E 'BUG:|Oops|general protection' "$OUT/stress-pressure-dmesg.txt")"
	elif sed -n 's/.*Killed process [0-9]* (\([^)]*\)).*/\1/p' "$OUT/stress-pressure-dmesg.txt" | grep -qvx 'rxe-verify'; then
		t_fail "an unrelated process was OOM-killed: $victims"
	elif [[ $rc == 0 ]]; then
		t_fail "registering $size beyond MemAvailable succeeded?"
	else
		t_pass
	fi
	rmdir "$cg" 2>/dev/null || true
	kill "$SENTINEL_PID" 2>/dev/null
	wait "$SENTINEL_PID" 2>/dev/null
	SENTINEL_PID=''
	t_check "$K pressure: rxe0 still registers 64 MiB afterwards" bash -c "timeout 300 '$RV' churn -d rxe0 -s 64M --count 1 >/dev/null 2>&1"
	dmesg_part pressure oom-ok
	part_end pressure
}

# --- 5. module lifecycle ----------------------------------------------------------
part_lifecycle() {
	local i f base after bad='' t0 d
	part_begin lifecycle
	unload
	# rxe_flavor (rxe-verify doctor) runs nft and iptables-save, and the first run in a
	# boot loads nf_tables: that happens before the baseline, not in cycle 1, whatever
	# part ran first
	rxe_flavor >/dev/null
	echo 1 >/proc/sys/vm/drop_caches
	base=$(kmem_now)
	t0=$SECONDS
	t_start "$K lifecycle: $N_LIFE cycles of load rxe-kvfix, add rxe0, register 1 GiB+16 B, deregister, delete, unload"
	for ((i = 1; i <= N_LIFE; i++)); do
		# the flavour check (rxe_flavor: rxe-verify doctor, which runs modinfo, nft and
		# iptables-save, then python3; 2-7 s a call under TCG on a loaded host) on the
		# first and the last load only, not in every cycle of this loop: a stock module in
		# between fails 1 GiB+16 B anyway
		if ((i == 1 || i == N_LIFE)); then load_fixed; else modprobe rdma_rxe; fi ||
			{
				bad="cycle $i: modprobe (loaded: $(rxe_flavor))"
				break
			}
		if ! rxe_up; then
			bad="cycle $i: rxe0 did not come up"
			break
		fi
		f=$(ch "lifecycle-$i" -s 1G+16 --count 1)
		if [[ $(cat "$f.rc") != 0 ]]; then
			bad="cycle $i: churn exit $(cat "$f.rc") $(head -c 200 "$f.err")"
			break
		fi
		[[ $i == 1 || $i == "$N_LIFE" ]] && echo "     cycle $i: $(fig "$f")"
		if ! unload; then
			bad="cycle $i: rmmod rdma_rxe failed"
			break
		fi
	done
	if [[ -z $bad ]]; then t_pass; else t_fail "$bad"; fi
	echo "     $N_LIFE cycles: $((SECONDS - t0)) s"
	echo 1 >/proc/sys/vm/drop_caches
	after=$(kmem_now)
	echo "     KiB (MemFree Slab VmallocUsed vmallocinfo) before: $base; after: $after"
	# a leak makes Slab/VmallocUsed/vmallocinfo grow. MemFree is printed, not judged:
	# module loads through 9p leave page cache behind (seen: -72 MiB after 20, after drop_caches).
	# The debug form leaves Slab out (KASAN's quarantine, see back_to_baseline).
	local first=2
	if [[ $FORM == debug ]]; then
		first=3
		t_start "$K lifecycle: no leak (VmallocUsed, vmallocinfo within 1 MiB; Slab not compared: KASAN's quarantine)"
	else
		t_start "$K lifecycle: no leak (Slab, VmallocUsed, vmallocinfo within 1 MiB)"
	fi
	d=$(awk -v a="$base" -v b="$after" -v first="$first" 'BEGIN { split(a, x, " "); split(b, y, " ");
		n = split("MemFree Slab VmallocUsed vmallocinfo", k, " ");
		for (i = first; i <= n; i++) { v = y[i] - x[i];
			if (v > 1024) printf "%s %+d KiB; ", k[i], v } }')
	if [[ -z $d ]]; then t_pass; else t_fail "$d"; fi
	t_start "$K lifecycle: the stock module loads cleanly afterwards and registers 1 GiB"
	# the stock module needs one free order-10 block (4 MiB) for 1 GiB; compact only when
	# the buddy allocator has fewer than 8 (the whole test took 30 s in one CI run and
	# 262 s in the next, ~190 s of it between drop_caches and the load, where an
	# unconditional compact_memory ran beside the other guest)
	local o10 tc
	o10=$(awk '$4 == "Normal" || $4 == "DMA32" {n += $15} END {print n + 0}' /proc/buddyinfo)
	if ((o10 < 8)); then
		tc=$SECONDS
		echo 1 >/proc/sys/vm/compact_memory
		echo "     $o10 free order-10 blocks: compacted in $((SECONDS - tc)) s"
	else
		echo "     $o10 free order-10 blocks: no compaction needed"
	fi
	if load_stock "$K" && rxe_up; then
		f=$(ch stock-after-lifecycle -s 1G --count 1)
		if [[ $(cat "$f.rc") == 0 ]]; then
			t_pass
		else
			t_fail "exit $(cat "$f.rc"): $(cj "$f" 'j.get("failure")') $(head -c 200 "$f.err")"
		fi
	else
		t_fail "stock module did not load (loaded: $(rxe_flavor))"
	fi
	dmesg_part lifecycle
	part_end lifecycle
}

for p in ${PARTS//,/ }; do
	case $p in
	frag) part_frag ;;
	churn) part_churn ;;
	concurrency) part_concurrency ;;
	pressure) part_pressure ;;
	lifecycle) part_lifecycle ;;
	*) t_fail "$K stress: part" "unknown part '$p'" ;;
	esac
done
rxe_down
((T_FAILS == 0))
