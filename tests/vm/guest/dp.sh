# shellcheck shell=bash
# dp.sh: the bench's part `dp`, sourced by guest/bench.sh (it uses bench.sh's mod_load,
# mod_unload, abba, round_note, kv and lib.sh's t_* and rxe_frag_*): does the fix cost
# anything on the data path? RDMA WRITE and READ bandwidth of rxe-verify over the same
# MR size on stock rdma_rxe and on rxe-kvfix, in ABBA rounds (stock, rxe-kvfix,
# rxe-kvfix, stock, ...: rounds 2p-1 and 2p are pair p), each round loading its module.
#
#   dp_rounds TAG ROUNDS SIZES TOPUP   TAG dp (the guest as booted: the page array from
#                                      kmalloc on both) or dpfrag (the fragmenter
#                                      holding: rxe-kvfix's kvcalloc falls back to vmalloc
#                                      where no block of the array's order is free; stock
#                                      may then not register at all); TOPUP 1: top the
#                                      fragmenter up before every run
#
# A run: `rxe-verify run -d rxe0 -s SIZE DP_ARGS --seed DP_SEED` (bench.sh's form: the
# short one sampled, one pass: first and last pages, straddles, 64 spread and 64 random
# transfers over the whole MR; the full one every byte both ways in 1 MiB messages): one
# seed for every run, so both modules move the same transfers; the page array is looked
# up all over the MR -> TAG-rNN-MOD-SIZE.json (.err, .rc).
# Which allocator served the page array is read, not assumed: while the run is live,
# /proc/vmallocinfo's lines whose caller is in [rdma_rxe] are read every 0.2 s and the
# reading with the most bytes is kept -> TAG-rNN-MOD-SIZE.vmalloc (render: vmalloc when a
# line of another caller than rxe_queue_init, the queues' vmalloc_user, holds at least
# the page array's bytes; kmalloc otherwise, as stock always). Nothing here is a
# threshold: a stock run that could not register is a figure, any rxe-kvfix failure a
# FAIL of the round.
# In the fragmented guest stock can register only where kvcalloc's kmalloc would succeed
# too (vmalloc serves rxe-kvfix only when no block of the array's order is free, and then
# stock's kzalloc fails): so there, stock's round also runs the same region split into
# MRs of DP_SPLIT_BYTES (256 MiB: order-8 arrays, which the fragmented guest still has)
# -> TAG-rNN-stock-SIZE-splitK.*: the same bytes over the same region, stock's arrays
# from kmalloc, against rxe-kvfix's one array from vmalloc.
DP_SPLIT_BYTES=$((256 << 20))
DP_DEV=rxe0 DP_SEED=20261207

# dp_watch OUT: the largest reading (bytes) of rdma_rxe's vmalloc lines into OUT, until killed
# shellcheck disable=SC2317  # run in the background by dp_run
dp_watch() {
	local out=$1 best=0 cur
	: >"$out"
	while :; do
		cur=$(grep -F '[rdma_rxe]' /proc/vmallocinfo 2>/dev/null | tee "$out.tmp" | awk '{ s += $2 } END { print s + 0 }')
		if ((cur > best)); then
			best=$cur
			mv "$out.tmp" "$out"
		fi
		sleep 0.2
	done
}

# dp_run FILE SIZE [ARGS]: one rxe-verify run with the vmallocinfo watch beside it
# shellcheck disable=SC2317  # called by dp_rounds
dp_run() {
	local f=$1 size=$2 rc=0 w
	shift 2
	dp_watch "$f.vmalloc" &
	w=$!
	# shellcheck disable=SC2086  # DP_ARGS: the form's options, split on purpose
	timeout 1200 "$RV" run -d "$DP_DEV" -s "$size" $DP_ARGS --seed "$DP_SEED" \
		--json --no-progress "$@" >"$f.json" 2>"$f.err" || rc=$?
	kill "$w" 2>/dev/null || true
	wait "$w" 2>/dev/null || true
	rm -f "$f.vmalloc.tmp"
	echo "$rc" >"$f.rc"
}

# dp_summary MOD FILE...: the round's figures (DP_FIGS) and what went wrong (DP_BAD):
# any rxe-kvfix run without a pass; a stock run that neither passed nor was refused its
# registration
dp_summary() {
	local out
	out=$(
		python3 - "$@" <<'PY'
import json, os, sys
mod, figs, bad = sys.argv[1], [], []
for base in sys.argv[2:]:
    size = base.split("-r", 1)[1].split("-", 2)[2]
    try:
        j = json.load(open(base + ".json"))
        r = (j.get("results") or [{}])[0]
    except (OSError, ValueError):
        figs.append(f"{size} no JSON"); bad.append(f"{size}: no JSON"); continue
    vm = sum(int(l.split()[1]) for l in open(base + ".vmalloc") if len(l.split()) > 1) if os.path.exists(base + ".vmalloc") else 0
    if r.get("result") == "pass":
        figs.append("%s W %.1f R %.1f MB/s (rxe vmalloc %d KiB)" % (size, r["write"]["MBps"], r["read"]["MBps"], vm >> 10))
        continue
    cause = (r.get("diagnosis") or {}).get("cause")
    figs.append(f"{size} {r.get('result')} ({cause})")
    if mod != "stock" or r.get("registered") is not False:
        bad.append(f"{size}: {r.get('result')} ({cause})")
print("; ".join(figs))
print("BAD:" + "; ".join(bad))
PY
	) || out=$'?\nBAD:the summary of the round failed (python3)'
	DP_FIGS=${out%%$'\n'BAD:*} DP_BAD=${out##*$'\n'BAD:}
}

dp_rounds() {
	local tag=$1 rounds=$2 sizes=$3 topup=$4 r rr mod size files
	for ((r = 1; r <= rounds; r++)); do
		mod=$(abba "$r")
		rr=$(printf %02d "$r")
		t_start "$K bench $tag round $r/$rounds ($mod): rxe-verify run $DP_ARGS of $sizes"
		round_note "$tag" "$r" "$mod" start
		if ! mod_load "$mod" 2>"$OUT/$tag-round-$rr.err"; then
			t_fail "$(head -c 300 "$OUT/$tag-round-$rr.err")"
			continue
		fi
		files=()
		for size in $sizes; do
			files+=("$OUT/$tag-r$rr-$mod-$size")
			((!topup)) || rxe_frag_topup || echo "     (the fragmenter did not confirm top-up $((FRAG_TOPUPS + 1)))"
			dp_run "${files[-1]}" "$size"
			if ((topup)) && [[ $mod == stock ]] && (($(numfmt --from=iec "$size") > DP_SPLIT_BYTES)); then
				local k=$(($(numfmt --from=iec "$size") / DP_SPLIT_BYTES))
				files+=("$OUT/$tag-r$rr-$mod-$size-split$k")
				rxe_frag_topup || echo "     (the fragmenter did not confirm top-up $((FRAG_TOPUPS + 1)))"
				dp_run "${files[-1]}" "$size" --split "$k"
			fi
		done
		round_note "$tag" "$r" "$mod" end
		dp_summary "$mod" "${files[@]}"
		mod_unload "$mod" || DP_BAD+="${DP_BAD:+; }rmmod failed"
		if [[ -z $DP_BAD ]]; then t_pass; else t_fail "${DP_BAD:0:400}"; fi
		echo "     $DP_FIGS"
	done
}
